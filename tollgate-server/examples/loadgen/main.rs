//! Load generator for tollgate-server: many concurrent unary calls (HTTP/2 streams over a
//! few connections for gRPC, keep-alive HTTP/1.1 connections for `/json`), for a fixed
//! time; prints decisions per second and latency percentiles.
//!
//! ```text
//! cargo run --release -p tollgate-server --example loadgen -- \
//!     --target 127.0.0.1:8081 --api grpc-raw --concurrency 64 --connections 4 --seconds 10
//! ```
//!
//! `--api grpc-raw` is a minimal HTTP/2 client written for this load generator (`raw.rs`,
//! `conn.rs`, `streams.rs`, `message.rs`, `h2.rs`): one task per connection, requests pre-encoded and
//! written in batches, responses parsed frame by frame without an HPACK decoder. It costs
//! a few microseconds of CPU per call, so one core can drive well over 100,000 calls/s.
//! `--api grpc` is tonic's client (the same stack as the server's, about as costly per
//! call as the server itself), kept as a cross-check of the raw client.
//!
//! `--api canned-server` is a stand-in server (`canned.rs`) answering every call with the
//! same pre-encoded OK response: against it, grpc-raw's own capacity shows.
//!
//! `grpc-raw` exits non-zero when a connection fails (refused, closed or reset by the
//! server, a protocol error, a GOAWAY before the run is done, or no bytes from the server
//! for `--timeout` seconds while waiting), after the report and a message on stderr; calls
//! answered with an error (gRPC status, RST_STREAM) are counted in `errors=` and
//! described on stderr, the exit status unchanged.
//!
//! `--api inproc --config DIR` calls the server's decision path (`Engine::decide`: matching,
//! the engine, the response and its headers, the metrics) in this process on one thread,
//! with no network: what the server's own work costs per decision.
//!
//! Every call asks one descriptor `(key, value)` of domain `--domain`, the value drawn
//! round-robin from `--keys` distinct values (the default config: testdata/bench).

mod calls;
mod canned;
mod conn;
mod h2;
mod inproc;
mod message;
mod raw;
mod streams;
#[cfg(test)]
mod tests;

use clap::Parser;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tollgate_server::proto::{Entry, RateLimitDescriptor, RateLimitRequest};

/// Drives tollgate-server with concurrent calls and reports throughput and latency.
#[derive(Debug, Parser)]
pub(crate) struct Args {
    /// host:port of the gRPC listener (`--api grpc`, `grpc-raw`) or the HTTP listener
    /// (`--api json`).
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub(crate) target: String,
    /// `grpc` (ShouldRateLimit over tonic's client), `grpc-raw` (the same over this
    /// program's own HTTP/2 client, much cheaper per call), `json` (POST /json), or
    /// `inproc` (the decision path in this process, no network; needs --config), or
    /// `canned-server` (not a client: a stand-in server on --target answering every call
    /// with one pre-encoded OK response, cheap enough to measure grpc-raw's own capacity).
    #[arg(long, default_value = "grpc", value_parser = ["grpc", "grpc-raw", "json", "inproc", "canned-server"])]
    pub(crate) api: String,
    /// With `--api inproc`: the configuration directory.
    #[arg(long)]
    pub(crate) config: Option<std::path::PathBuf>,
    /// Calls in flight at once.
    #[arg(long, default_value_t = 64)]
    pub(crate) concurrency: usize,
    /// gRPC connections the calls are spread over (HTTP/2 streams share them).
    #[arg(long, default_value_t = 4)]
    pub(crate) connections: usize,
    /// How long to measure, after a one-second warm-up.
    #[arg(long, default_value_t = 10)]
    pub(crate) seconds: u64,
    /// Domain of the calls.
    #[arg(long, default_value = "bench")]
    pub(crate) domain: String,
    /// Descriptor key.
    #[arg(long, default_value = "user")]
    pub(crate) key: String,
    /// Distinct descriptor values.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) keys: u64,
    /// Send this many calls in all (spread over the workers), with no warm-up and no time
    /// limit, instead of measuring for `--seconds`: a fixed amount of work, for counting
    /// the server's CPU time or instructions per call.
    #[arg(long)]
    pub(crate) requests: Option<u64>,
    /// `--api grpc-raw`: seconds without any byte from the server (while waiting for
    /// one) after which a connection is given up as failed.
    #[arg(long, default_value_t = 10)]
    pub(crate) timeout: u64,
    /// `--api grpc-raw`: also print, on stderr, the client's I/O counts (reads, writes,
    /// calls per read and per write, bytes per call).
    #[arg(long)]
    pub(crate) io_stats: bool,
    /// `--api grpc-raw`: the request path (for testing the error paths: a path the
    /// server does not serve is answered with a gRPC error).
    #[arg(
        long,
        hide = true,
        default_value = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
    )]
    pub(crate) path: String,
    /// `--api grpc-raw`: how the request headers are HPACK-encoded. `indexed`: the first
    /// request of a connection adds its headers to the server's dynamic table and every
    /// later one refers to them by index (what Envoy, grpc-go, grpc-c and tonic's clients
    /// do); `literal`: every request spells them out (no dynamic table).
    #[arg(long, default_value = "indexed", value_parser = ["indexed", "literal"])]
    pub(crate) hpack: String,
}

/// The request of call number `i`: one descriptor, its value the `i % keys`-th.
pub(crate) fn request(a: &Args, i: u64) -> RateLimitRequest {
    RateLimitRequest {
        domain: a.domain.clone(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: a.key.clone(),
                value: format!("v{}", i % a.keys),
            }],
            limit: None,
            hits_addend: None,
            is_negative_hits: false,
        }],
        hits_addend: 1,
    }
}

/// Per-worker (or per-connection) results: latencies in microseconds of the calls
/// finished in the window, errors included.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// One latency per counted call.
    pub(crate) lat_us: Vec<u32>,
    /// Calls answered OVER_LIMIT.
    pub(crate) over: u64,
    /// Calls that failed.
    pub(crate) errors: u64,
}

impl Tally {
    /// Adds `other`'s calls to this one.
    pub(crate) fn merge(&mut self, other: Tally) {
        self.lat_us.extend(other.lat_us);
        self.over += other.over;
        self.errors += other.errors;
    }
}

/// When a run counts calls: from `warm` to `end`, or `share` calls with no window.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// Calls started before this are not counted (the warm-up).
    pub(crate) warm: Instant,
    /// No call starts at or after this, and calls finished after it are not counted.
    pub(crate) end: Instant,
    /// With `--requests`: how many calls this worker sends (and counts, all of them).
    pub(crate) share: Option<u64>,
}

impl Plan {
    /// The plan of a run that begins at `began`: `--requests` or `--seconds`.
    pub(crate) fn new(a: &Args, began: Instant) -> Plan {
        match a.requests {
            // No warm-up; the calls stop by count (the end is only a bound).
            Some(n) => Plan {
                warm: began,
                end: began + Duration::from_secs(86_400),
                share: Some(n),
            },
            None => {
                let warm = began + Duration::from_secs(1);
                Plan {
                    warm,
                    end: warm + Duration::from_secs(a.seconds),
                    share: None,
                }
            }
        }
    }

    /// This plan for worker `w` of `workers`: its share of the calls.
    pub(crate) fn part(self, w: u64, workers: u64) -> Plan {
        Plan {
            share: self.share.map(|r| r / workers + u64::from(w < r % workers)),
            ..self
        }
    }
}

/// Prints the report line of a run over `secs` seconds.
pub(crate) fn report(a: &Args, mut t: Tally, secs: f64) {
    let lat = &mut t.lat_us;
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    println!(
        "api={} concurrency={} connections={} seconds={} decisions={} rate={:.0}/s p50={}us p99={}us p999={}us over_limit={} errors={}",
        a.api,
        a.concurrency,
        a.connections,
        a.seconds,
        lat.len(),
        lat.len() as f64 / secs,
        pct(0.50),
        pct(0.99),
        pct(0.999),
        t.over,
        t.errors
    );
}

fn main() -> ExitCode {
    let a = Args::parse();
    // The raw client and the stand-in server on one thread: their whole cost is on one
    // core. The tonic and HTTP/1.1 clients on tokio's multi-thread scheduler.
    let one_thread = matches!(a.api.as_str(), "grpc-raw" | "canned-server");
    let rt = if one_thread {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    }
    .enable_all()
    .build()
    .expect("runtime");
    match a.api.as_str() {
        "grpc-raw" => return rt.block_on(raw::run(&a)),
        "canned-server" => rt.block_on(canned::run(&a)),
        "inproc" => rt.block_on(inproc::run(&a)),
        _ => rt.block_on(calls::run(std::sync::Arc::new(a))),
    }
    ExitCode::SUCCESS
}
