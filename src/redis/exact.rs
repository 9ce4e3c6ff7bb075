//! The exact mode: one atomic Lua script, one `EVALSHA` round trip per decision.

use super::{bounded, Connection, Error, Target, TimeSource, DEFAULT_PREFIX, DEFAULT_TIMEOUT};
use crate::algorithm::{Params, SLIDING_LOG_MAX_LIMIT};
use crate::{
    Algorithm, Clock, Decision, InsufficientCapacity, KeyedRateLimiter, QuantaClock, Quota,
};
use redis::aio::ConnectionLike;
use redis::Script;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const PRELUDE: &str = include_str!("scripts/prelude.lua");
const GCRA: &str = include_str!("scripts/gcra.lua");
const FIXED_WINDOW: &str = include_str!("scripts/fixed_window.lua");
const SLIDING_WINDOW: &str = include_str!("scripts/sliding_window.lua");
const SLIDING_LOG: &str = include_str!("scripts/sliding_log.lua");

/// The largest span (µs) a quota may need: with times up to [`MAX_TIME_US`], every sum
/// the scripts form (at most a time plus two spans) stays below 2^53, where doubles stop
/// being exact.
const MAX_SPAN_US: u64 = 1 << 50;

/// The latest time (µs since the clock's zero) the scripts decide at: 2^52 µs, about
/// 142 years (Redis `TIME` since 1970 is about 2^50.6 µs today).
const MAX_TIME_US: u64 = 1 << 52;

/// How long the fallback answers alone after a Redis error before Redis is tried
/// again (only with a fallback other than [`Fallback::Error`]).
const RETRY_AFTER_ERROR: Duration = Duration::from_millis(100);

/// Extra TTL (ms) on keys written with the caller's clock, whose time runs apart from
/// the Redis clock that expires keys.
const CALLER_CLOCK_GRACE_MS: u64 = 1000;

/// The most keys the local fallback tracks at once (a fixed table: further keys take
/// the place of idle ones, then of the entry going idle soonest).
const FALLBACK_MAX_KEYS: usize = 1 << 16;

fn script(body: &str) -> Script {
    let mut src = String::with_capacity(PRELUDE.len() + body.len());
    src.push_str(PRELUDE);
    src.push_str(body);
    Script::new(&src)
}

/// The compiled scripts, one per algorithm family, hashed once per process.
fn scripts() -> &'static [Script; 4] {
    static SCRIPTS: OnceLock<[Script; 4]> = OnceLock::new();
    SCRIPTS.get_or_init(|| {
        [
            script(GCRA),
            script(FIXED_WINDOW),
            script(SLIDING_WINDOW),
            script(SLIDING_LOG),
        ]
    })
}

/// What to do when Redis is down, slow, or answers garbage.
///
/// Every decision the fallback makes is counted in [`RedisStats::fallbacks`].
///
/// # Example
///
/// ```
/// use tollgate::redis::Fallback;
/// use tollgate::Quota;
///
/// // While Redis is away, each instance enforces a tenth of the quota on its own.
/// let f = Fallback::Local(Quota::per_second(10));
/// assert_ne!(f, Fallback::Error);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fallback {
    /// Return the error (the default).
    #[default]
    Error,
    /// Admit every request (fail open).
    Allow,
    /// Deny every request (fail closed), with `retry_after` equal to the timeout.
    Deny,
    /// Decide locally, one limit per key, running the same algorithm on this quota
    /// (typically the global quota divided by the number of instances) until Redis
    /// answers again: a [`KeyedRateLimiter`](crate::KeyedRateLimiter) of 65,536 keys,
    /// fixed memory, on the limiter's clock (the builder's
    /// [`clock`](RedisRateLimiterBuilder::clock) when given).
    Local(Quota),
}

/// Counters of a [`RedisRateLimiter`] (all its clones together).
///
/// # Example
///
/// ```
/// let s = tollgate::redis::RedisStats::default();
/// assert_eq!(s.decisions + s.errors + s.fallbacks, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RedisStats {
    /// Decisions Redis made.
    pub decisions: u64,
    /// Redis calls that failed (error, timeout or bad reply).
    pub errors: u64,
    /// Decisions the [`Fallback`] made instead of Redis.
    pub fallbacks: u64,
}

/// The script's parameters, in whole microseconds.
#[derive(Clone, Copy, Debug)]
enum Plan {
    Gcra { t_us: u64, burst: u32, shaper: bool },
    Fixed { p_us: u64, limit: u32 },
    Sliding { p_us: u64, limit: u32 },
    Log { p_us: u64, limit: u32 },
}

impl Plan {
    fn new(algorithm: Algorithm, quota: Quota) -> Result<Self, Error> {
        // The local engine's checks first: the same ConfigError for the same quota.
        Params::new(algorithm, quota)?;
        let period_ns = quota.period().as_nanos();
        if period_ns % 1000 != 0 {
            return Err(Error::Unrepresentable(format!(
                "period {:?} is not a whole number of microseconds",
                quota.period()
            )));
        }
        // Params::new bounds the period by the 2^62 ns horizon.
        let p_us = (period_ns / 1000) as u64;
        let limit = quota.limit();
        let too_big = |what: &str, v: u128| {
            Error::Unrepresentable(format!(
                "{what} = {v} exceeds 2^50, the largest span the scripts compute exactly"
            ))
        };
        if u128::from(p_us) > u128::from(MAX_SPAN_US) {
            return Err(too_big("period in µs", u128::from(p_us)));
        }
        Ok(match algorithm {
            Algorithm::TokenBucket | Algorithm::LeakyBucket => {
                // More than one request per µs cannot be represented; the interval is
                // rounded up, as the local engine rounds its nanoseconds: never more
                // than the quota.
                if p_us < u64::from(limit) {
                    return Err(Error::Unrepresentable(format!(
                        "{limit} per {:?} is more than one request per microsecond",
                        quota.period()
                    )));
                }
                let t_us = p_us.div_ceil(u64::from(limit));
                let burst = quota.burst();
                let tau = u128::from(t_us) * u128::from(burst);
                if tau > u128::from(MAX_SPAN_US) {
                    return Err(too_big("burst × interval in µs", tau));
                }
                Plan::Gcra {
                    t_us,
                    burst,
                    shaper: algorithm == Algorithm::LeakyBucket,
                }
            }
            // The fixed window's script never multiplies the limit by the period (its
            // largest number is the window's end, `(k + 1)·P`): billing quotas such as
            // 20,000 per day or 1,000 per 30 days fit.
            Algorithm::FixedWindow => Plan::Fixed { p_us, limit },
            Algorithm::SlidingWindow => {
                let product = u128::from(limit) * u128::from(p_us);
                if product > u128::from(MAX_SPAN_US) {
                    return Err(too_big("limit × period in µs", product));
                }
                Plan::Sliding { p_us, limit }
            }
            Algorithm::SlidingLog => {
                debug_assert!(limit <= SLIDING_LOG_MAX_LIMIT);
                Plan::Log { p_us, limit }
            }
        })
    }

    fn capacity(&self) -> u32 {
        match *self {
            Plan::Gcra { burst, .. } => burst,
            Plan::Fixed { limit, .. } | Plan::Sliding { limit, .. } | Plan::Log { limit, .. } => {
                limit
            }
        }
    }

    fn script(&self) -> &'static Script {
        let s = scripts();
        match self {
            Plan::Gcra { .. } => &s[0],
            Plan::Fixed { .. } => &s[1],
            Plan::Sliding { .. } => &s[2],
            Plan::Log { .. } => &s[3],
        }
    }

    /// ARGV[4..]: the algorithm's parameters.
    fn args(&self) -> [u64; 3] {
        match *self {
            Plan::Gcra {
                t_us,
                burst,
                shaper,
            } => [t_us, u64::from(burst), u64::from(shaper)],
            Plan::Fixed { p_us, limit }
            | Plan::Sliding { p_us, limit }
            | Plan::Log { p_us, limit } => [p_us, u64::from(limit), 0],
        }
    }
}

/// An exact distributed rate limiter: every decision is one atomic Lua script on
/// Redis, so every instance sharing a Redis (and a prefix) shares one limit exactly.
///
/// Clones share one multiplexed connection and one set of counters.
///
/// Time comes from Redis `TIME` inside the script by default: one clock for every
/// instance, no client skew. [`clock`](RedisRateLimiterBuilder::clock) passes the
/// caller's clock instead.
///
/// Semantics are the local engine's ([`RateLimiter`](crate::RateLimiter)) in whole
/// microseconds: the emission interval is `⌈period_µs / limit⌉` µs (rounded up: never
/// more than the quota), windows are aligned to the
/// clock's zero (the Unix epoch with Redis `TIME`), and every number the scripts
/// compute stays below 2^53 (quotas that would not are refused at build time).
///
/// # Example
///
/// ```no_run
/// use std::time::Duration;
/// use tollgate::redis::{Fallback, RedisRateLimiter};
/// use tollgate::{Algorithm, Quota};
///
/// # async fn run() -> Result<(), tollgate::redis::Error> {
/// let limiter = RedisRateLimiter::builder(Algorithm::SlidingWindow, Quota::per_minute(600))
///     .url("redis://127.0.0.1:6379")
///     .prefix("api")
///     .timeout(Duration::from_millis(50))
///     .fallback(Fallback::Local(Quota::per_minute(60)))
///     .build()
///     .await?;
/// let d = limiter.check("client-7").await?;
/// println!("allowed: {}, remaining: {}", d.is_allowed(), d.remaining());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisRateLimiter {
    inner: Arc<Inner>,
}

struct Inner {
    conn: Connection,
    plan: Plan,
    algorithm: Algorithm,
    quota: Quota,
    prefix: String,
    timeout: Duration,
    time: TimeSource,
    grace_ms: u64,
    fallback: FallbackState,
    decisions: AtomicU64,
    errors: AtomicU64,
    fallbacks: AtomicU64,
    /// Nanoseconds after `epoch` before which the fallback answers alone.
    down_until: AtomicU64,
    epoch: Instant,
}

enum FallbackState {
    Error,
    Allow,
    Deny,
    /// One local limit per key, in a fixed table on the limiter's own clock.
    Local(Box<KeyedRateLimiter<str, FallbackClock>>),
}

/// The clock of the local fallback: the caller's clock when one was given (so tests and
/// callers with their own time see the fallback follow it), else the engine's default
/// (Redis `TIME` is what is unreachable).
#[derive(Clone)]
pub(crate) struct FallbackClock(Option<Arc<dyn Fn() -> u64 + Send + Sync>>, QuantaClock);

impl FallbackClock {
    fn new(time: &TimeSource) -> Self {
        match time {
            TimeSource::Server => FallbackClock(None, QuantaClock::new()),
            TimeSource::Caller(f) => FallbackClock(Some(Arc::clone(f)), QuantaClock::new()),
        }
    }
}

impl Clock for FallbackClock {
    fn now(&self) -> u64 {
        match &self.0 {
            Some(f) => f(),
            None => self.1.now(),
        }
    }
}

impl RedisRateLimiter {
    /// Starts building an exact distributed limiter running `algorithm` on `quota`.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::redis::RedisRateLimiter;
    /// use tollgate::{Algorithm, Quota};
    ///
    /// let builder = RedisRateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(10))
    ///     .url("redis://127.0.0.1:6379")
    ///     .prefix("login");
    /// # let _ = builder;
    /// ```
    pub fn builder(algorithm: Algorithm, quota: Quota) -> RedisRateLimiterBuilder {
        RedisRateLimiterBuilder {
            algorithm,
            quota,
            target: Target::None,
            prefix: DEFAULT_PREFIX.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            fallback: Fallback::Error,
            time: TimeSource::Server,
        }
    }

    /// Decides one request of cost 1 for `key`.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`], [`Error::Timeout`] or [`Error::BadReply`] when Redis cannot
    /// decide within the timeout and the [`Fallback`] is `Error`;
    /// [`Error::Unrepresentable`] when a caller's [`clock`](RedisRateLimiterBuilder::clock)
    /// reads past 2^52 µs (about 142 years after its zero).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// if !limiter.check("10.0.0.1").await?.is_allowed() {
    ///     // answer 429
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check(&self, key: &str) -> Result<Decision, Error> {
        self.check_n(key, 1).await
    }

    /// Decides one request of cost `n` for `key`. A cost of 0 changes nothing and
    /// reports the current state.
    ///
    /// # Errors
    ///
    /// [`Error::InsufficientCapacity`] when `n` exceeds the capacity (the burst for
    /// the buckets, the limit for the others); the Redis errors of
    /// [`check`](Self::check).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// let d = limiter.check_n("upload:alice", 5).await?;
    /// # let _ = d;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check_n(&self, key: &str, n: u32) -> Result<Decision, Error> {
        let inner = &*self.inner;
        let capacity = inner.plan.capacity();
        if n > capacity {
            return Err(Error::InsufficientCapacity(InsufficientCapacity {
                requested: n,
                capacity,
            }));
        }
        let has_fallback = !matches!(inner.fallback, FallbackState::Error);
        if has_fallback && inner.elapsed_ns() < inner.down_until.load(Ordering::Relaxed) {
            return Ok(inner.fall_back(key, n));
        }
        match inner.eval(key, n).await {
            Ok(d) => {
                inner.decisions.fetch_add(1, Ordering::Relaxed);
                Ok(d)
            }
            Err(e) if !e.is_redis_unavailable() => Err(e),
            Err(e) => {
                inner.errors.fetch_add(1, Ordering::Relaxed);
                if !has_fallback {
                    return Err(e);
                }
                let until = inner.elapsed_ns() + RETRY_AFTER_ERROR.as_nanos() as u64;
                inner.down_until.fetch_max(until, Ordering::Relaxed);
                Ok(inner.fall_back(key, n))
            }
        }
    }

    /// The counters of this limiter and its clones.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::RedisRateLimiter) {
    /// let s = limiter.stats();
    /// println!("{} by redis, {} by fallback", s.decisions, s.fallbacks);
    /// # }
    /// ```
    #[must_use]
    pub fn stats(&self) -> RedisStats {
        let i = &self.inner;
        RedisStats {
            decisions: i.decisions.load(Ordering::Relaxed),
            errors: i.errors.load(Ordering::Relaxed),
            fallbacks: i.fallbacks.load(Ordering::Relaxed),
        }
    }

    /// The Redis key holding `key`'s state: `<prefix>:{<key>}`.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::RedisRateLimiter) {
    /// assert_eq!(limiter.redis_key("bob"), "tollgate:{bob}");
    /// # }
    /// ```
    #[must_use]
    pub fn redis_key(&self, key: &str) -> String {
        format!("{}:{{{key}}}", self.inner.prefix)
    }

    /// The most that can ever be admitted at once (the burst for the buckets, the
    /// limit for the others): a larger cost is [`Error::InsufficientCapacity`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::RedisRateLimiter) {
    /// assert!(limiter.burst() >= 1);
    /// # }
    /// ```
    #[must_use]
    pub fn burst(&self) -> u32 {
        self.inner.plan.capacity()
    }

    /// The old name of [`burst`](Self::burst).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # #![allow(deprecated)]
    /// # fn run(limiter: tollgate::redis::RedisRateLimiter) {
    /// assert_eq!(limiter.capacity(), limiter.burst());
    /// # }
    /// ```
    #[must_use]
    #[deprecated(since = "0.2.0", note = "use `burst()`")]
    pub fn capacity(&self) -> u32 {
        self.burst()
    }

    /// The algorithm this limiter runs.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::RedisRateLimiter) {
    /// println!("{:?}", limiter.algorithm());
    /// # }
    /// ```
    #[must_use]
    pub fn algorithm(&self) -> Algorithm {
        self.inner.algorithm
    }

    /// The quota this limiter enforces.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::RedisRateLimiter) {
    /// println!("{:?}", limiter.quota());
    /// # }
    /// ```
    #[must_use]
    pub fn quota(&self) -> Quota {
        self.inner.quota
    }
}

impl Inner {
    fn elapsed_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    async fn eval(&self, key: &str, n: u32) -> Result<Decision, Error> {
        let now_us: i64 = match &self.time {
            TimeSource::Server => -1,
            TimeSource::Caller(f) => {
                let us = f() / 1000;
                if us > MAX_TIME_US {
                    return Err(Error::Unrepresentable(format!(
                        "caller clock reading of {us} µs is past 2^52 µs (about 142 years), \
                         the latest time the scripts compute exactly"
                    )));
                }
                // us <= 2^52: fits an i64.
                us as i64
            }
        };
        let [a, b, c] = self.plan.args();
        let mut inv = self.plan.script().prepare_invoke();
        inv.key(format!("{}:{{{key}}}", self.prefix))
            .arg(now_us)
            .arg(n)
            .arg(self.grace_ms)
            .arg(a)
            .arg(b)
            .arg(c);
        let mut conn = self.conn.clone();
        let reply: Vec<i64> = bounded(self.timeout, inv.invoke_async(&mut conn)).await?;
        self.parse(&reply)
    }

    fn parse(&self, reply: &[i64]) -> Result<Decision, Error> {
        let bad = || Error::BadReply(format!("{reply:?} is not a decision"));
        let &[allowed, remaining, reset, retry, delay] = reply else {
            return Err(bad());
        };
        let limit = self.plan.capacity();
        let remaining = u32::try_from(remaining)
            .ok()
            .filter(|r| *r <= limit)
            .ok_or_else(bad)?;
        let ns = |us: i64| -> Result<u64, Error> {
            u64::try_from(us)
                .ok()
                .filter(|us| *us <= MAX_TIME_US)
                .map(|us| us * 1000)
                .ok_or_else(bad)
        };
        let (reset, retry, delay) = (ns(reset)?, ns(retry)?, ns(delay)?);
        match allowed {
            1 => Ok(Decision::allow(limit, remaining, reset, delay).with_limit(self.quota.limit())),
            0 => Ok(Decision::deny(limit, remaining, reset, retry).with_limit(self.quota.limit())),
            _ => Err(bad()),
        }
    }

    fn fall_back(&self, key: &str, n: u32) -> Decision {
        self.fallbacks.fetch_add(1, Ordering::Relaxed);
        let limit = self.plan.capacity();
        match &self.fallback {
            FallbackState::Allow | FallbackState::Error => {
                Decision::allow(limit, 0, 0, 0).with_limit(self.quota.limit())
            }
            FallbackState::Deny => Decision::deny(limit, 0, 0, self.timeout.as_nanos() as u64)
                .with_limit(self.quota.limit()),
            // A cost past the local quota's capacity never fits locally: deny it.
            FallbackState::Local(local) => local
                .check_n(key, n)
                .unwrap_or_else(|_| Decision::deny(limit, 0, 0, self.timeout.as_nanos() as u64)),
        }
    }
}

impl fmt::Debug for RedisRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRateLimiter")
            .field("algorithm", &self.inner.algorithm)
            .field("quota", &self.inner.quota)
            .field("prefix", &self.inner.prefix)
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

/// Builds a [`RedisRateLimiter`]; made by [`RedisRateLimiter::builder`].
///
/// # Example
///
/// ```no_run
/// use std::time::Duration;
/// use tollgate::redis::RedisRateLimiter;
/// use tollgate::{Algorithm, Quota};
///
/// # async fn run() -> Result<(), tollgate::redis::Error> {
/// let limiter = RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(50))
///     .url("redis://127.0.0.1:6379")
///     .timeout(Duration::from_millis(20))
///     .build()
///     .await?;
/// # let _ = limiter;
/// # Ok(())
/// # }
/// ```
#[must_use = "a builder does nothing until .build() is called"]
pub struct RedisRateLimiterBuilder {
    algorithm: Algorithm,
    quota: Quota,
    target: Target,
    prefix: String,
    timeout: Duration,
    fallback: Fallback,
    time: TimeSource,
}

impl RedisRateLimiterBuilder {
    /// Connects to the Redis at `url` (`redis://host:port/db`) when built.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{redis::RedisRateLimiter, Algorithm, Quota};
    /// let b = RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(5))
    ///     .url("redis://127.0.0.1:6379/0");
    /// # let _ = b;
    /// ```
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.target = Target::Url(url.into());
        self
    }

    /// Uses an existing connection, shared with the caller's other Redis traffic: a
    /// `ConnectionManager` (reconnects by itself; what [`url`](Self::url) builds), a
    /// `MultiplexedConnection`, or a Redis Cluster connection (enable the `redis`
    /// crate's `cluster-async` feature in your own dependency on the same version:
    /// every script touches one hash-tagged key, hence one slot).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # use tollgate::{redis::RedisRateLimiter, Algorithm, Quota};
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = tollgate::redis::redis::Client::open("redis://127.0.0.1:6379")?;
    /// let conn = client.get_connection_manager().await?;
    /// let limiter = RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(5))
    ///     .connection(conn)
    ///     .build()
    ///     .await?;
    /// # let _ = limiter;
    /// # Ok(())
    /// # }
    /// ```
    pub fn connection<C>(mut self, connection: C) -> Self
    where
        C: ConnectionLike + Clone + Send + Sync + 'static,
    {
        self.target = Target::Connection(Connection::new(connection));
        self
    }

    /// Prefixes every Redis key (default `tollgate`). Give each limiter (each
    /// algorithm and quota) its own prefix: limiters sharing a prefix share state.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{redis::RedisRateLimiter, Algorithm, Quota};
    /// let b = RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(5))
    ///     .prefix("rl:search");
    /// # let _ = b;
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Bounds every Redis call, and connecting (default 100 ms).
    ///
    /// # Example
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::{redis::RedisRateLimiter, Algorithm, Quota};
    /// let b = RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(5))
    ///     .timeout(Duration::from_millis(25));
    /// # let _ = b;
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// What to do when Redis is unavailable (default [`Fallback::Error`]). With any
    /// other policy, after a failed call the fallback decides alone for 100 ms before
    /// Redis is tried again, so an outage costs one timeout per 100 ms, not one per
    /// request.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{redis::{Fallback, RedisRateLimiter}, Algorithm, Quota};
    /// let b = RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(5))
    ///     .fallback(Fallback::Allow);
    /// # let _ = b;
    /// ```
    pub fn fallback(mut self, fallback: Fallback) -> Self {
        self.fallback = fallback;
        self
    }

    /// Decides at the caller's `clock` (whole microseconds of its nanoseconds) instead
    /// of Redis `TIME`. Every instance must then share one clock; key TTLs are
    /// computed in that clock's time plus one second of grace.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{redis::RedisRateLimiter, Algorithm, ManualClock, Quota};
    /// let b = RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(5))
    ///     .clock(ManualClock::new());
    /// # let _ = b;
    /// ```
    pub fn clock<C: Clock>(mut self, clock: C) -> Self {
        self.time = TimeSource::from_clock(clock);
        self
    }

    /// Checks the quota, then connects (within the timeout). With a
    /// [`fallback`](Self::fallback) other than `Error`, Redis is optional at start:
    /// the limiter builds while Redis is down, the fallback answers, and the
    /// connection is made on the first call that finds Redis reachable.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a quota the local engine refuses;
    /// [`Error::Unrepresentable`] for one the scripts cannot compute exactly (a period
    /// that is not whole microseconds, more than one request per microsecond for the
    /// buckets, a bucket's span or a sliding window's `limit × period` past 2^50 µs,
    /// about 35 years); [`Error::NoTarget`] without a URL or connection; without a
    /// fallback, [`Error::Redis`] when Redis cannot be reached (see
    /// [`Error::is_connection_refused`]) or [`Error::Timeout`] when it does not answer.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{redis::{Error, RedisRateLimiter}, Algorithm, Quota};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let err = RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(0))
    ///     .url("redis://127.0.0.1:6379")
    ///     .build()
    ///     .await
    ///     .unwrap_err();
    /// assert!(matches!(err, Error::Config(_)));
    /// # }
    /// ```
    pub async fn build(self) -> Result<RedisRateLimiter, Error> {
        let plan = Plan::new(self.algorithm, self.quota)?;
        super::check_prefix(&self.prefix)?;
        // With a fallback, Redis is optional at start: the fallback answers until the
        // connection, made on first use, succeeds.
        let lazy = !matches!(self.fallback, Fallback::Error);
        let fallback = match self.fallback {
            Fallback::Error => FallbackState::Error,
            Fallback::Allow => FallbackState::Allow,
            Fallback::Deny => FallbackState::Deny,
            Fallback::Local(quota) => FallbackState::Local(Box::new(
                KeyedRateLimiter::builder(self.algorithm, quota)
                    .max_keys(FALLBACK_MAX_KEYS)
                    .clock(FallbackClock::new(&self.time))
                    .build()?,
            )),
        };
        let grace_ms = match self.time {
            TimeSource::Server => 0,
            TimeSource::Caller(_) => CALLER_CLOCK_GRACE_MS,
        };
        let conn = self.target.connect(self.timeout, lazy).await?;
        Ok(RedisRateLimiter {
            inner: Arc::new(Inner {
                conn,
                plan,
                algorithm: self.algorithm,
                quota: self.quota,
                prefix: self.prefix,
                timeout: self.timeout,
                time: self.time,
                grace_ms,
                fallback,
                decisions: AtomicU64::new(0),
                errors: AtomicU64::new(0),
                fallbacks: AtomicU64::new(0),
                down_until: AtomicU64::new(0),
                epoch: Instant::now(),
            }),
        })
    }
}

impl fmt::Debug for RedisRateLimiterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRateLimiterBuilder")
            .field("algorithm", &self.algorithm)
            .field("quota", &self.quota)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("fallback", &self.fallback)
            .finish_non_exhaustive()
    }
}
