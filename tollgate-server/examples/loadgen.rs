//! Load generator for tollgate-server: many concurrent unary calls (HTTP/2 streams over a
//! few connections for gRPC, keep-alive HTTP/1.1 connections for `/json`), for a fixed
//! time; prints decisions per second and latency percentiles.
//!
//! ```text
//! cargo run --release -p tollgate-server --example loadgen -- \
//!     --target 127.0.0.1:8081 --api grpc --concurrency 64 --connections 4 --seconds 10
//! ```
//!
//! `--api inproc --config DIR` calls the server's decision path (`Engine::decide`: matching,
//! the engine, the response and its headers, the metrics) in this process on one thread,
//! with no network: what the server's own work costs per decision.
//!
//! Every call asks one descriptor `(key, value)` of domain `--domain`, the value drawn
//! round-robin from `--keys` distinct values (the default config: testdata/bench).

use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::time::{Duration, Instant};
use tollgate_server::proto::rate_limit_service::rate_limit_service_client::RateLimitServiceClient;
use tollgate_server::proto::{Entry, RateLimitDescriptor, RateLimitRequest};

/// Drives tollgate-server with concurrent calls and reports throughput and latency.
#[derive(Debug, Parser)]
struct Args {
    /// host:port of the gRPC listener (`--api grpc`) or the HTTP listener (`--api json`).
    #[arg(long, default_value = "127.0.0.1:8081")]
    target: String,
    /// `grpc` (ShouldRateLimit), `json` (POST /json), or `inproc` (the decision path in
    /// this process, no network; needs --config).
    #[arg(long, default_value = "grpc", value_parser = ["grpc", "json", "inproc"])]
    api: String,
    /// With `--api inproc`: the configuration directory.
    #[arg(long)]
    config: Option<std::path::PathBuf>,
    /// Calls in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// gRPC connections the calls are spread over (HTTP/2 streams share them).
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// How long to measure, after a one-second warm-up.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Domain of the calls.
    #[arg(long, default_value = "bench")]
    domain: String,
    /// Descriptor key.
    #[arg(long, default_value = "user")]
    key: String,
    /// Distinct descriptor values.
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
    /// Send this many calls in all (spread over the workers), with no warm-up and no time
    /// limit, instead of measuring for `--seconds`: a fixed amount of work, for counting
    /// the server's CPU time or instructions per call.
    #[arg(long)]
    requests: Option<u64>,
}

fn request(a: &Args, i: u64) -> RateLimitRequest {
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

/// Per-worker results: latencies in microseconds of the calls finished in the window.
struct Tally {
    lat_us: Vec<u32>,
    over: u64,
    errors: u64,
}

/// `--api inproc`: decisions on this thread for `--seconds`.
async fn inproc(a: &Args) {
    use tollgate_server::backend::{Backend, BackendConfig};
    use tollgate_server::engine::{Engine, InputLimits};
    use tollgate_server::rules::Rules;
    let dir = a.config.as_ref().expect("--api inproc needs --config DIR");
    let config = tollgate_server::config::load_dir(dir).expect("config");
    let backend = Backend::new(BackendConfig::default())
        .await
        .expect("backend");
    let rules = Rules::compile(&config, &backend, &Default::default())
        .await
        .expect("rules");
    let engine = Engine::new(rules, backend, Default::default(), InputLimits::default());
    let reqs: Vec<RateLimitRequest> = (0..a.keys.min(100_000)).map(|i| request(a, i)).collect();
    let start = Instant::now();
    let end = start + Duration::from_secs(a.seconds);
    let mut n = 0u64;
    while Instant::now() < end {
        for i in 0..1024 {
            let r = &reqs[(n as usize + i) % reqs.len()];
            let _ = std::hint::black_box(engine.decide(std::hint::black_box(r)).await);
        }
        n += 1024;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "api=inproc seconds={} decisions={n} rate={:.0}/s per_decision={:.0}ns",
        a.seconds,
        n as f64 / secs,
        secs * 1e9 / n as f64
    );
}

#[tokio::main]
async fn main() {
    let a = std::sync::Arc::new(Args::parse());
    if a.api == "inproc" {
        inproc(&a).await;
        return;
    }
    let began = Instant::now();
    let (warm, end) = match a.requests {
        // No warm-up; the calls stop by count (the end is only a bound).
        Some(_) => (began, began + Duration::from_secs(86_400)),
        None => {
            let warm = began + Duration::from_secs(1);
            (warm, warm + Duration::from_secs(a.seconds))
        }
    };
    let workers = a.concurrency.max(1) as u64;
    let mut channels = Vec::new();
    if a.api == "grpc" {
        for _ in 0..a.connections.max(1) {
            let ch = tonic::transport::Endpoint::from_shared(format!("http://{}", a.target))
                .expect("target")
                .tcp_nodelay(true)
                .connect()
                .await
                .expect("connect");
            channels.push(ch);
        }
    }
    let http = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(a.concurrency)
        .build_http::<Full<Bytes>>();
    let mut tasks = Vec::new();
    for w in 0..a.concurrency {
        let a = std::sync::Arc::clone(&a);
        let grpc = channels
            .get(w % channels.len().max(1))
            .cloned()
            .map(RateLimitServiceClient::new);
        let http = http.clone();
        tasks.push(tokio::spawn(async move {
            let mut t = Tally {
                lat_us: Vec::with_capacity(1 << 16),
                over: 0,
                errors: 0,
            };
            let mut i = w as u64;
            // With --requests: this worker's share of them.
            let share = a.requests.map(|r| r / workers + u64::from((w as u64) < r % workers));
            let mut sent = 0u64;
            loop {
                let start = Instant::now();
                if start >= end || share.is_some_and(|p| sent >= p) {
                    break;
                }
                sent += 1;
                let req = request(&a, i);
                i += a.concurrency as u64;
                let code = if let Some(mut c) = grpc.clone() {
                    c.should_rate_limit(req)
                        .await
                        .map(|r| r.into_inner().overall_code)
                        .ok()
                } else {
                    let body = format!(
                        r#"{{"domain":"{}","descriptors":[{{"entries":[{{"key":"{}","value":"{}"}}]}}]}}"#,
                        req.domain, req.descriptors[0].entries[0].key, req.descriptors[0].entries[0].value
                    );
                    let r = hyper::Request::post(format!("http://{}/json", a.target))
                        .body(Full::new(Bytes::from(body)))
                        .expect("request");
                    match http.request(r).await {
                        Ok(resp) => {
                            let s = resp.status().as_u16();
                            let _ = resp.into_body().collect().await;
                            match s {
                                200 => Some(1),
                                429 => Some(2),
                                _ => None,
                            }
                        }
                        Err(_) => None,
                    }
                };
                if start < warm {
                    continue;
                }
                let done = Instant::now();
                if done > end {
                    break;
                }
                t.lat_us.push(u32::try_from(done.duration_since(start).as_micros()).unwrap_or(u32::MAX));
                match code {
                    Some(2) => t.over += 1,
                    Some(_) => {}
                    None => t.errors += 1,
                }
            }
            t
        }));
    }
    let mut lat = Vec::new();
    let (mut over, mut errors) = (0, 0);
    for task in tasks {
        let t = task.await.expect("worker");
        lat.extend(t.lat_us);
        over += t.over;
        errors += t.errors;
    }
    // The measured time: the whole run with --requests, else the window.
    let secs = match a.requests {
        Some(_) => began.elapsed().as_secs_f64(),
        None => a.seconds as f64,
    };
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
        over,
        errors
    );
}
