//! `tollgate-server`: see `--help`.

use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tollgate_server::backend::{Backend, BackendConfig, FailurePolicy, Mode};
use tollgate_server::engine::{Engine, InputLimits};
use tollgate_server::grpc::serve_grpc;
use tollgate_server::headers::HeaderMode;
use tollgate_server::rules::Rules;
use tollgate_server::serve::{serve_http, Http};

/// An Envoy rate limit service (envoy.service.ratelimit.v3 over gRPC, POST /json,
/// GET /healthcheck, GET /metrics) on the tollgate engine. It reads a directory of
/// envoyproxy/ratelimit configuration files (one domain per YAML file) unchanged, and
/// reloads it when a file changes or on SIGHUP, keeping the counts of unchanged limits.
/// SIGTERM or Ctrl-C stops it after the calls in flight are answered.
#[derive(Debug, Parser)]
#[command(name = "tollgate-server", version)]
struct Args {
    /// Directory of configuration files: every *.yaml / *.yml in it is one domain.
    #[arg(long, env = "TOLLGATE_CONFIG")]
    config: PathBuf,

    /// Address of the gRPC rate limit service (Envoy's rate_limit_service cluster).
    #[arg(long, default_value = "127.0.0.1:8081")]
    grpc: SocketAddr,

    /// Address of the HTTP listener: POST /json, GET /healthcheck, GET /metrics.
    #[arg(long, default_value = "127.0.0.1:8080")]
    http: SocketAddr,

    /// Where counts live: `local` (this process, the default; needs nothing else),
    /// `exact` (Redis, one atomic script per decision: instances share limits exactly) or
    /// `hybrid` (local decisions, counts shared through Redis every --sync-interval-ms;
    /// the shared total may overshoot by what instances admit between two syncs).
    /// Giving --redis without --mode selects `exact`.
    #[arg(long, value_enum)]
    mode: Option<Mode>,

    /// Redis URL (redis://host:port/db), or with --redis-cluster a comma-separated list of
    /// cluster seed addresses (host:port,host:port).
    #[arg(long, env = "TOLLGATE_REDIS")]
    redis: Option<String>,

    /// --redis lists Redis Cluster seeds. Every key of one domain is put in one hash slot
    /// (the `{domain}` hash tag), so the descriptors of a request are decided atomically.
    #[arg(long)]
    redis_cluster: bool,

    /// Bound on each Redis call, in milliseconds; past it the failure policy answers.
    #[arg(long, default_value_t = 100)]
    redis_timeout_ms: u64,

    /// What answers while Redis is down or slow (exact mode): `open` admits, `closed`
    /// denies, `local` decides in this process on each limit divided by
    /// --local-fallback-divisor, `error` fails the call (gRPC UNAVAILABLE, HTTP 500) and
    /// leaves the choice to Envoy's failure_mode_deny. Hybrid mode always decides locally.
    #[arg(long, value_enum, default_value = "error")]
    redis_failure: FailurePolicy,

    /// With --redis-failure local: the number of server instances sharing the limits
    /// (each enforces limit / N on its own while Redis is away).
    #[arg(long, default_value_t = 1)]
    local_fallback_divisor: u32,

    /// Hybrid mode's sync interval, in milliseconds.
    #[arg(long, default_value_t = 50)]
    sync_interval_ms: u64,

    /// Prefix of every Redis key this server writes.
    #[arg(long, default_value = "tollgate-server")]
    redis_prefix: String,

    /// Response headers Envoy adds downstream: `ietf` (RateLimit-Policy and RateLimit,
    /// draft-ietf-httpapi-ratelimit-headers), `x-ratelimit` (x-ratelimit-limit,
    /// -remaining, -reset) or `off`.
    #[arg(long, value_enum, default_value = "ietf")]
    response_headers: HeaderMode,

    /// How often the configuration directory is checked for changes, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    watch_interval_ms: u64,

    /// Descriptors accepted in one request (more: gRPC INVALID_ARGUMENT, HTTP 400).
    #[arg(long, default_value_t = 256)]
    max_descriptors: usize,

    /// Entries accepted in one descriptor.
    #[arg(long, default_value_t = 64)]
    max_entries: usize,

    /// Bytes accepted in one entry key or value, and in the domain.
    #[arg(long, default_value_t = 4096)]
    max_entry_bytes: usize,

    /// Longest wait for calls in flight to finish after SIGTERM, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    drain_timeout_ms: u64,

    /// Log format: `json` (one object per line) or `text`. The level comes from RUST_LOG
    /// (default info).
    #[arg(long, default_value = "json", value_parser = ["json", "text"])]
    log_format: String,

    /// Worker threads (default: the cores this process may run on).
    #[arg(long)]
    threads: Option<usize>,

    /// The async runtime: `auto` (one thread running everything when there is one worker
    /// thread, e.g. the process is pinned to one core; else work-stealing workers),
    /// `multi-thread` or `current-thread`.
    #[arg(long, value_enum, default_value = "auto")]
    runtime: Runtime,
}

/// Which tokio scheduler runs the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Runtime {
    /// `current-thread` for one worker thread, else `multi-thread`.
    Auto,
    /// Work-stealing worker threads (`--threads` of them).
    MultiThread,
    /// Everything on the main thread: no hand-offs between workers.
    CurrentThread,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if args.log_format == "json" {
        fmt.json().init();
    } else {
        fmt.init();
    }
    // What tokio would pick: --threads, else TOKIO_WORKER_THREADS, else the cores.
    let threads = args
        .threads
        .or_else(|| std::env::var("TOKIO_WORKER_THREADS").ok()?.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
        .max(1);
    let current = match args.runtime {
        Runtime::Auto => threads == 1,
        Runtime::MultiThread => false,
        Runtime::CurrentThread => true,
    };
    let mut rt = if current {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut rt = tokio::runtime::Builder::new_multi_thread();
        if let Some(n) = args.threads {
            rt.worker_threads(n.max(1));
        }
        rt
    };
    let rt = match rt.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the runtime");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "tollgate-server stopped");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let metrics = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| format!("metrics: {e}"))?;
    let mode = args.mode.unwrap_or(if args.redis.is_some() {
        Mode::Exact
    } else {
        Mode::Local
    });
    let backend = Backend::new(BackendConfig {
        mode,
        redis: args.redis.clone(),
        cluster: args.redis_cluster,
        timeout: Duration::from_millis(args.redis_timeout_ms),
        failure: args.redis_failure,
        fallback_divisor: args.local_fallback_divisor,
        sync_interval: Duration::from_millis(args.sync_interval_ms),
        prefix: args.redis_prefix.clone(),
    })
    .await?;
    let input = InputLimits {
        max_descriptors: args.max_descriptors,
        max_entries: args.max_entries,
        max_entry_bytes: args.max_entry_bytes,
    };
    let engine = Arc::new(Engine::new(
        Rules::default(),
        backend,
        args.response_headers,
        input,
    ));
    let loaded = tollgate_server::reload::fingerprint(&args.config);
    tollgate_server::reload::reload(&engine, &args.config).await?;

    let grpc = tokio::net::TcpListener::bind(args.grpc)
        .await
        .map_err(|e| format!("gRPC listener {}: {e}", args.grpc))?;
    let http = tokio::net::TcpListener::bind(args.http)
        .await
        .map_err(|e| format!("HTTP listener {}: {e}", args.http))?;
    tracing::info!(
        grpc = %grpc.local_addr().map_err(|e| e.to_string())?,
        http = %http.local_addr().map_err(|e| e.to_string())?,
        mode = ?mode,
        "tollgate-server listening"
    );

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let draining = Arc::new(AtomicBool::new(false));
    let state = Http {
        engine: Arc::clone(&engine),
        metrics,
        draining: Arc::clone(&draining),
    };
    let http_task = tokio::spawn(serve_http(http, state, stopped(stop_rx.clone())));
    let grpc_task = tokio::spawn(serve_grpc(grpc, Arc::clone(&engine), stopped(stop_rx)));
    let watcher = tokio::spawn(tollgate_server::reload::watch(
        Arc::clone(&engine),
        args.config.clone(),
        Duration::from_millis(args.watch_interval_ms),
        loaded,
    ));

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("SIGTERM handler: {e}"))?;
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: draining"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: draining"),
    }
    draining.store(true, std::sync::atomic::Ordering::Relaxed);
    watcher.abort();
    let _ = stop_tx.send(true);
    let drain = async {
        let _ = http_task.await;
        let _ = grpc_task.await;
    };
    if tokio::time::timeout(Duration::from_millis(args.drain_timeout_ms), drain)
        .await
        .is_err()
    {
        tracing::warn!("calls still in flight after the drain timeout; stopping anyway");
    }
    tracing::info!("stopped");
    Ok(())
}
