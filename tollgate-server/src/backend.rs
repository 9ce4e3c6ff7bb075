//! Where counts live: the in-process keyed engine (the default), Redis exact mode, or the
//! Redis hybrid mode, and one limiter per configured limit on it.

use std::sync::Arc;
use std::time::Duration;
use tollgate::redis::redis::cluster::ClusterClientBuilder;
use tollgate::redis::{Fallback, HybridRateLimiter, RedisRateLimiter};
use tollgate::{Algorithm, KeyedRateLimiter, OnFull, Quota, SystemClock};

/// What the server does when Redis cannot answer within the timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailurePolicy {
    /// Admit every request (fail open).
    Open,
    /// Deny every request (fail closed).
    Closed,
    /// Decide in this process on the limit divided by `--local-fallback-divisor`.
    Local,
    /// Answer the call with gRPC UNAVAILABLE / HTTP 500 (Envoy's `failure_mode_deny` decides).
    Error,
}

/// Which engine holds the counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// In this process (needs nothing else).
    Local,
    /// Redis, exact: one atomic script per decision.
    Exact,
    /// Redis, hybrid: local decisions, counts shared by a periodic sync.
    Hybrid,
}

/// Backend settings from the command line.
#[derive(Debug, Clone)]
pub struct BackendConfig {
    /// The engine.
    pub mode: Mode,
    /// Redis URL (`redis://host:port`) or comma-separated Redis Cluster seeds.
    pub redis: Option<String>,
    /// Whether `redis` lists cluster seeds.
    pub cluster: bool,
    /// Bound on each Redis call.
    pub timeout: Duration,
    /// What answers while Redis is away.
    pub failure: FailurePolicy,
    /// The local fallback enforces limit / divisor (the number of instances).
    pub fallback_divisor: u32,
    /// Hybrid mode's sync interval.
    pub sync_interval: Duration,
    /// Redis key prefix.
    pub prefix: String,
}

impl Default for BackendConfig {
    fn default() -> Self {
        BackendConfig {
            mode: Mode::Local,
            redis: None,
            cluster: false,
            timeout: Duration::from_millis(100),
            failure: FailurePolicy::Error,
            fallback_divisor: 1,
            sync_interval: Duration::from_millis(50),
            prefix: "tollgate-server".into(),
        }
    }
}

/// One configured limit's counts (always behind an `Arc`, so the variants' sizes do not matter).
#[allow(clippy::large_enum_variant)]
pub enum Limiter {
    /// In this process, one state per distinct descriptor value.
    Local(KeyedRateLimiter<str, SystemClock>),
    /// Redis exact mode.
    Exact(RedisRateLimiter),
    /// Redis hybrid mode.
    Hybrid(HybridRateLimiter),
    /// `requests_per_unit: 0`: every request is over the limit.
    Zero,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Limiter::Local(_) => "Limiter::Local",
            Limiter::Exact(_) => "Limiter::Exact",
            Limiter::Hybrid(_) => "Limiter::Hybrid",
            Limiter::Zero => "Limiter::Zero",
        })
    }
}

impl Limiter {
    /// Gives the limiter a new quota, keeping what its keys used (the library's
    /// `set_quota` of each engine).
    ///
    /// # Errors
    ///
    /// The engine's refusal; a limit of 0 requests holds no state to give a quota to.
    pub fn set_quota(&self, quota: Quota) -> Result<(), tollgate::ConfigError> {
        match self {
            Limiter::Local(k) => k.set_quota(quota),
            Limiter::Exact(r) => r.set_quota(quota),
            Limiter::Hybrid(h) => h.set_quota(quota),
            Limiter::Zero => Err(tollgate::ConfigError::Unrepresentable {
                reason: "a limit of 0 requests holds no state".into(),
            }),
        }
    }
}

/// What one limit is built from.
#[derive(Debug, Clone, Copy)]
pub struct LimitParams {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// The quota (`None`: zero requests).
    pub quota: Option<Quota>,
    /// Keys the in-process table holds.
    pub max_keys: usize,
    /// What a full in-process table does.
    pub on_full: OnFull,
}

/// Builds limiters on the chosen engine; holds the shared Redis connection.
pub struct Backend {
    config: BackendConfig,
    /// The limiter that owns the Redis connection every exact limiter shares.
    base: Option<RedisRateLimiter>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Backend {
    /// Connects to Redis when the mode needs it.
    ///
    /// # Errors
    ///
    /// A Redis mode without `--redis`, or a connection that cannot be set up (with the
    /// `error` failure policy; the other policies start without Redis).
    pub async fn new(config: BackendConfig) -> Result<Backend, String> {
        let base = match config.mode {
            Mode::Local => None,
            Mode::Exact | Mode::Hybrid => {
                if config.redis.is_none() {
                    return Err("--mode exact/hybrid needs --redis URL".into());
                }
                if config.mode == Mode::Exact {
                    let q = Quota::per_second(1);
                    let b = RedisRateLimiter::builder(Algorithm::FixedWindow, q);
                    let b = Self::connect(&config, b).await?;
                    Some(b.build().await.map_err(|e| format!("redis: {e}"))?)
                } else {
                    None
                }
            }
        };
        Ok(Backend { config, base })
    }

    async fn connect(
        config: &BackendConfig,
        b: tollgate::redis::RedisRateLimiterBuilder,
    ) -> Result<tollgate::redis::RedisRateLimiterBuilder, String> {
        let url = config.redis.clone().unwrap_or_default();
        let b = b
            .timeout(config.timeout)
            .fallback(fallback(config, Quota::per_second(1)));
        if config.cluster {
            let seeds: Vec<String> = url.split(',').map(|s| seed_url(s.trim())).collect();
            let client = ClusterClientBuilder::new(seeds)
                .build()
                .map_err(|e| format!("redis cluster: {e}"))?;
            let conn = client
                .get_async_connection()
                .await
                .map_err(|e| format!("redis cluster: {e}"))?;
            Ok(b.connection(conn))
        } else {
            Ok(b.url(url))
        }
    }

    /// The engine.
    pub fn mode(&self) -> Mode {
        self.config.mode
    }

    /// The settings.
    pub fn config(&self) -> &BackendConfig {
        &self.config
    }

    /// A new limiter for one limit; `id` names it in Redis keys (stable across restarts
    /// and instances, so that instances with one configuration share counts).
    ///
    /// # Errors
    ///
    /// The library's refusal of the parameters, or a Redis connection failure.
    pub async fn limiter(&self, id: &str, p: LimitParams) -> Result<Arc<Limiter>, String> {
        let Some(quota) = p.quota else {
            return Ok(Arc::new(Limiter::Zero));
        };
        let prefix = format!("{}:{}", self.config.prefix, stable_hash(id));
        let limiter = match self.config.mode {
            Mode::Local => Limiter::Local(
                KeyedRateLimiter::<str>::builder(p.algorithm, quota)
                    .max_keys(p.max_keys)
                    .on_full(p.on_full)
                    .clock(SystemClock::new())
                    .build()
                    .map_err(|e| e.to_string())?,
            ),
            Mode::Exact => {
                let base = self.base.as_ref().ok_or("no redis connection")?;
                Limiter::Exact(
                    RedisRateLimiter::builder(p.algorithm, quota)
                        .connection_of(base)
                        .prefix(prefix)
                        .timeout(self.config.timeout)
                        .fallback(fallback(&self.config, quota))
                        .build()
                        .await
                        .map_err(|e| format!("redis: {e}"))?,
                )
            }
            Mode::Hybrid => {
                let url = self.config.redis.clone().unwrap_or_default();
                let mut b = HybridRateLimiter::builder(p.algorithm, quota)
                    .prefix(prefix)
                    .timeout(self.config.timeout)
                    .sync_interval(self.config.sync_interval)
                    .max_keys(p.max_keys);
                b = if self.config.cluster {
                    let seeds: Vec<String> = url.split(',').map(|s| seed_url(s.trim())).collect();
                    let client = ClusterClientBuilder::new(seeds)
                        .build()
                        .map_err(|e| format!("redis cluster: {e}"))?;
                    let conn = client
                        .get_async_connection()
                        .await
                        .map_err(|e| format!("redis cluster: {e}"))?;
                    b.connection(conn)
                } else {
                    b.url(url)
                };
                Limiter::Hybrid(b.build().await.map_err(|e| format!("redis: {e}"))?)
            }
        };
        Ok(Arc::new(limiter))
    }
}

/// `host:port` → `redis://host:port` (a seed given with its scheme is kept).
fn seed_url(s: &str) -> String {
    if s.contains("://") {
        s.to_string()
    } else {
        format!("redis://{s}")
    }
}

/// The library's fallback for the failure policy (`Local`: the quota divided).
fn fallback(config: &BackendConfig, quota: Quota) -> Fallback {
    match config.failure {
        FailurePolicy::Open => Fallback::Allow,
        FailurePolicy::Closed => Fallback::Deny,
        FailurePolicy::Error => Fallback::Error,
        FailurePolicy::Local => {
            let limit = (quota.limit() / config.fallback_divisor.max(1)).max(1);
            let burst = (quota.burst() / config.fallback_divisor.max(1)).max(1);
            let q = Quota::new(limit, quota.period());
            // A window's burst is its limit; keep the divided burst only where it differs.
            Fallback::Local(if burst == limit {
                q
            } else {
                q.with_burst(burst)
            })
        }
    }
}

/// FNV-1a of `s`, in hex: a short, stable name for a limit in Redis keys.
pub fn stable_hash(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}
