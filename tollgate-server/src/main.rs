//! `tollgate-server`: see `--help`.

use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tollgate_server::backend::{Backend, BackendConfig, FailurePolicy, Mode};
use tollgate_server::engine::{Engine, InputLimits, Policy};
use tollgate_server::grpc::serve_grpc;
use tollgate_server::headers::HeaderMode;
use tollgate_server::rules::Rules;
use tollgate_server::serve::{serve_http, Http};
use tollgate_server::settings::{self, Upstream};

/// An Envoy rate limit service (envoy.service.ratelimit.v3 over gRPC, POST /json,
/// GET /healthcheck, GET /metrics) on the tollgate engine. It reads a directory of
/// envoyproxy/ratelimit configuration files (one domain per YAML file) unchanged, and
/// reloads it when a file changes or on SIGHUP; a limit changed in place keeps what its
/// keys used.
/// SIGTERM or Ctrl-C stops it after the calls in flight are answered.
///
/// envoyproxy/ratelimit's environment variables are read for the settings both have
/// (RUNTIME_ROOT/RUNTIME_SUBDIRECTORY, GRPC_HOST/GRPC_PORT, HOST/PORT, REDIS_URL and
/// REDIS_SOCKET_TYPE/REDIS_TYPE/REDIS_AUTH/REDIS_TLS, LOG_LEVEL, LOG_FORMAT,
/// LIMIT_RESPONSE_HEADERS_ENABLED, STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT,
/// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED, SHADOW_MODE, QUOTA_MODE, MERGE_DOMAIN_CONFIG); a
/// flag wins over a
/// variable.
#[derive(Debug, Parser)]
#[command(name = "tollgate-server", version)]
struct Args {
    /// Directory of configuration files: every *.yaml / *.yml in it is one domain
    /// (else RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY, as envoyproxy/ratelimit).
    #[arg(long, env = "TOLLGATE_CONFIG")]
    config: Option<PathBuf>,

    /// Address of the gRPC rate limit service (Envoy's rate_limit_service cluster); else
    /// GRPC_HOST:GRPC_PORT, else 127.0.0.1:8081.
    #[arg(long)]
    grpc: Option<SocketAddr>,

    /// Address of the HTTP listener (POST /json, GET /healthcheck, GET /metrics,
    /// GET /rlconfig); else HOST:PORT, else 127.0.0.1:8080.
    #[arg(long)]
    http: Option<SocketAddr>,

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
    /// draft-ietf-httpapi-ratelimit-headers, the default), `x-ratelimit`
    /// (x-ratelimit-limit, -remaining, -reset), `ratelimit` (envoyproxy/ratelimit's
    /// RateLimit-Limit, -Remaining, -Reset; LIMIT_RESPONSE_HEADERS_ENABLED=true) or `off`.
    #[arg(long, value_enum)]
    response_headers: Option<HeaderMode>,

    /// Count denied hits as envoyproxy/ratelimit does (INCRBY before deciding): each
    /// limit of a request decided on its own, a denying limit charged what it had left.
    /// Default: all or nothing, a denied request takes nothing. Also
    /// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false.
    #[arg(long)]
    count_denied_hits: bool,

    /// GET /healthcheck answers 500 until a configuration with at least one domain is
    /// loaded (envoyproxy/ratelimit's HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED).
    #[arg(long)]
    healthy_with_at_least_one_config_loaded: bool,

    /// Answer every request OK, the statuses still saying which limits are over
    /// (envoyproxy/ratelimit's SHADOW_MODE).
    #[arg(long)]
    global_shadow_mode: bool,

    /// Treat every limit as a quota-mode limit (envoyproxy/ratelimit's QUOTA_MODE).
    #[arg(long)]
    global_quota_mode: bool,

    /// Merge the files of one domain instead of refusing a domain in two files (a key and
    /// value defined in two of them is refused; envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG).
    #[arg(long)]
    merge_domain_config: bool,

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

    /// Log format: `json` (one object per line, the default) or `text`; else LOG_FORMAT.
    /// The level comes from RUST_LOG, else LOG_LEVEL, else info.
    #[arg(long, value_parser = ["json", "text"])]
    log_format: Option<String>,

    /// Worker threads (default: the cores this process may run on).
    #[arg(long)]
    threads: Option<usize>,

    /// The async runtime: `auto` (one thread running everything when there is one worker
    /// thread, e.g. the process is pinned to one core; else work-stealing workers),
    /// `multi-thread` or `current-thread`.
    #[arg(long, value_enum, default_value = "auto")]
    runtime: Runtime,
}

impl Args {
    /// Fills what no flag said from envoyproxy/ratelimit's variables.
    fn apply(&mut self, up: &Upstream) {
        self.config = self.config.take().or_else(|| up.config.clone());
        self.grpc = self.grpc.or(up.grpc);
        self.http = self.http.or(up.http);
        if self.redis.is_none() {
            self.redis = up.redis.clone();
            self.redis_cluster |= up.redis_cluster;
        }
        self.log_format = self.log_format.take().or_else(|| up.log_format.clone());
        self.response_headers = self.response_headers.or(up.response_headers);
        self.count_denied_hits |= up.count_denied_hits.unwrap_or(false);
        self.healthy_with_at_least_one_config_loaded |= up.healthy_needs_config.unwrap_or(false);
        self.global_shadow_mode |= up.global_shadow.unwrap_or(false);
        self.global_quota_mode |= up.global_quota.unwrap_or(false);
        self.merge_domain_config |= up.merge_domains.unwrap_or(false);
    }
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
    let mut args = Args::parse();
    let upstream = match settings::from_env(|k| std::env::var(k).ok()) {
        Ok(u) => u,
        Err(e) => {
            eprintln!("tollgate-server: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    args.apply(&upstream);
    let level = upstream.log_level.clone().unwrap_or_else(|| "info".into());
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if args.log_format.as_deref() != Some("text") {
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
    let config = args.config.clone().ok_or(
        "no configuration directory: give --config DIR (or TOLLGATE_CONFIG, or envoyproxy/ratelimit's RUNTIME_ROOT and RUNTIME_SUBDIRECTORY)",
    )?;
    let grpc_addr = args
        .grpc
        .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8081)));
    let http_addr = args
        .http
        .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8080)));
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
    let engine = Arc::new(
        Engine::new(
            Rules::default(),
            backend,
            args.response_headers.unwrap_or_default(),
            input,
        )
        .with_policy(Policy {
            count_denied_hits: args.count_denied_hits,
            global_shadow: args.global_shadow_mode,
            global_quota: args.global_quota_mode,
        }),
    );
    let loaded = tollgate_server::reload::fingerprint(&config);
    tollgate_server::reload::reload_merging(&engine, &config, args.merge_domain_config).await?;

    let grpc = tokio::net::TcpListener::bind(grpc_addr)
        .await
        .map_err(|e| format!("gRPC listener {grpc_addr}: {e}"))?;
    let http = tokio::net::TcpListener::bind(http_addr)
        .await
        .map_err(|e| format!("HTTP listener {http_addr}: {e}"))?;
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
        healthy_needs_config: args.healthy_with_at_least_one_config_loaded,
    };
    let http_task = tokio::spawn(serve_http(http, state, stopped(stop_rx.clone())));
    let grpc_task = tokio::spawn(serve_grpc(grpc, Arc::clone(&engine), stopped(stop_rx)));
    let watcher = tokio::spawn(tollgate_server::reload::watch(
        Arc::clone(&engine),
        config.clone(),
        Duration::from_millis(args.watch_interval_ms),
        loaded,
        args.merge_domain_config,
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
