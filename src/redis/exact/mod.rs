//! The exact mode: one atomic Lua script, one `EVALSHA` round trip per decision.
//!
//! `mod.rs` holds the limiter and its public methods; `decide` its decision path (the
//! script call, the reply, the outage window); `plan` the quota checks and the scripts;
//! `fallback` what answers while Redis cannot; `multi` [`check_all`]; `builder` the
//! builder.

mod background;
mod builder;
mod charge;
mod decide;
mod fallback;
mod multi;
mod peek;
mod plan;

pub use builder::RedisRateLimiterBuilder;
pub use charge::RedisCharge;
use decide::parse;
pub use fallback::Fallback;
use fallback::{FallbackClock, FallbackState};
pub use multi::check_all;
use plan::*;

use super::{
    bounded, Connection, Deployment, Error, KeyName, RedisKey, Target, TimeSource, DEFAULT_PREFIX,
    DEFAULT_TIMEOUT, KEY_BUF,
};
use crate::algorithm::{Params, SLIDING_LOG_MAX_LIMIT};
use crate::sync::{OnceLock, Ordering, PlainAtomicU64 as AtomicU64, StdArc as Arc};
use crate::{
    clock::Clock, clock::QuantaClock, decision::Decision, error::ConfigError,
    error::InsufficientCapacity, keyed::KeyedRateLimiter, quota::Algorithm, quota::Quota,
};
use crossbeam_utils::atomic::AtomicCell;
use redis::aio::ConnectionLike;
use redis::Script;
use std::fmt;
use std::time::{Duration, Instant};

/// Counters of a [`RedisRateLimiter`] (all its clones together).
///
/// # Example
///
/// ```
/// let s = tollgate::redis::RedisStats::default();
/// assert_eq!(s.decisions + s.errors + s.fallbacks + s.background_errors, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RedisStats {
    /// Decisions Redis made.
    pub decisions: u64,
    /// Redis calls that failed (error, timeout or bad reply).
    pub errors: u64,
    /// Decisions the [`Fallback`] made instead of Redis.
    pub fallbacks: u64,
    /// Charges made in the background (a budget policy's charge at the end of a response
    /// body, `tollgate::http::Policy::budget`, spawned on the runtime) that nothing
    /// counted: the call failed (also counted in [`errors`](Self::errors) when Redis
    /// was unreachable), a [`Fallback::Allow`] or [`Fallback::Deny`] answered without
    /// counting ([`RedisCharge::tracked`] `false`), or no tokio runtime was there to run
    /// it. Such a charge is lost: the key owes less than it used.
    pub background_errors: u64,
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
/// Semantics are the local engine's ([`RateLimiter`](crate::limiter::RateLimiter)) in whole
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
    /// Where `conn` leads, for `check_all`'s one-deployment rule.
    deployment: Deployment,
    /// The quota in force and its plan, replaced whole by `set_quota`: each decision
    /// loads one copy (a seqlock read that never waits on I/O) and decides with it.
    active: AtomicCell<Active>,
    algorithm: Algorithm,
    prefix: String,
    timeout: Duration,
    time: TimeSource,
    grace_ms: u64,
    fallback: FallbackState,
    decisions: AtomicU64,
    errors: AtomicU64,
    fallbacks: AtomicU64,
    /// Background charges that nothing counted (see [`RedisStats::background_errors`]).
    background_errors: AtomicU64,
    /// Nanoseconds after `epoch` before which the fallback answers alone.
    down_until: AtomicU64,
    epoch: Instant,
}

/// A quota and the scripts' plan for it, swapped together.
#[derive(Clone, Copy, Debug)]
struct Active {
    quota: Quota,
    plan: Plan,
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
            deployment: None,
        }
    }

    /// Decides one request of cost 1 for `key`: any [`RedisKey`] (`&str`, `String`,
    /// bytes, an IP address, an integer), written into the Redis command as
    /// `<prefix>:{<key>}` without building a `String`.
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
    /// // The same Redis key: an address is written as its text.
    /// let ip: std::net::IpAddr = "10.0.0.1".parse().unwrap();
    /// let d = limiter.check(&ip).await?;
    /// # let _ = d;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check<K: RedisKey + ?Sized>(&self, key: &K) -> Result<Decision, Error> {
        self.check_n(key, 1).await
    }

    /// Decides one request of cost `n` for `key`. A cost of 0 changes nothing and
    /// reports the current state (a log may drop entries that can never count again;
    /// [`peek_n`](Self::peek_n) writes nothing at all).
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
    /// let d = limiter.check_n(&42u64, 5).await?; // the Redis key `<prefix>:{42}`
    /// # let _ = d;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check_n<K: RedisKey + ?Sized>(&self, key: &K, n: u32) -> Result<Decision, Error> {
        let mut buf = [0; KEY_BUF];
        self.inner.decide(key.key_bytes(&mut buf), n, false).await
    }

    /// Changes the quota at run time, for every key, for this limiter and its clones.
    ///
    /// Each key's state in Redis is kept (same prefix, same keys) and read under the new
    /// quota from the next decision on (a bucket's converted in requests, below);
    /// decisions in flight finish under the quota they started with, and none waits for
    /// this call (the quota is swapped in one atomic copy, never held across I/O). Other processes sharing the prefix keep their own
    /// quota until they call `set_quota` too: during a rolling change, each decides by
    /// its own, and the bound below holds per quota. A [`Fallback::Local`] keeps its
    /// own quota.
    ///
    /// # Over-admission bound
    ///
    /// From the change on, a key is never admitted more (over any sequence of requests)
    /// than by a limiter built fresh with the new quota at the change, starting empty:
    /// the kept state only ever counts against the key. Before the change, the old
    /// quota held. So, with `c` the change:
    ///
    /// * **Lower limit or burst**: state at or above the new capacity is a clean denial
    ///   (nothing remaining, never an error, never the fallback) until it drains under
    ///   the new quota; admissions after `c` are at most the new quota's own (no more
    ///   than `L_new` per window for the window algorithms and per `(t − P, t]` for the
    ///   log). It never over-admits.
    /// * **Higher limit** of a window or the log: the difference is available at once
    ///   (a window holding `n` admits `L_new − n` more at once).
    /// * **Buckets** (TokenBucket, LeakyBucket): what a key has used carries over **in
    ///   requests**, as in the in-process engine (Bucket4j's "additive" strategy). The
    ///   state is a time, when the bucket is full again (TAT), stored with the emission
    ///   interval that wrote it; a decision at `t` under another interval `T_b` converts
    ///   a state written under `T_a` with `TAT > t` to
    ///   `TAT' = t + ⌈(TAT − t)·T_b / T_a⌉` (rounded up: the limit is never exceeded).
    ///   So raising a limit never lengthens a wait and lowering one never shortens it:
    ///   a key that used 10 of 10 per minute has used 10 of 1,000 per minute (990
    ///   remain), and one that used 10 of 1,000 per minute has nothing left on 10 per
    ///   minute. A higher burst is available at once.
    ///
    ///   The conversion is **lazy**: the Redis state is shared by instances that switch
    ///   quota each at its own moment, so there is no one instant to convert at. Each
    ///   decision converts at its own time; the first admission or denial under the new
    ///   quota stores the converted state with its interval (one `SET`, with the key's
    ///   TTL; a denial takes nothing: the same debt, counted in the new quota's
    ///   requests), as the in-process tables do. Peeks (cost 0) convert for their answer
    ///   and write nothing, so until the first request under the new quota the stored
    ///   debt keeps being paid off at the rate that wrote it (after a lowered rate,
    ///   faster in the new quota's requests than the in-process engine, which converts
    ///   at the change). A debt past 2^50 µs beyond the new
    ///   burst × interval (35 years) is capped there. State written by a version that
    ///   did not store the interval (a bare time) is read as written under the current
    ///   one, as that version read it.
    /// * **Period of a window** (FixedWindow, SlidingWindow): windows restart at the
    ///   change (a window index under the old period means nothing under the new): the
    ///   old window holding the change admitted at most `L_old`, the new one holding it
    ///   admits at most `L_new`, so at most `L_old + L_new` from the start of the one
    ///   to the end of the other. State written by a version that did not store its
    ///   period is read as the current period's.
    /// * **Period of the log** (SlidingLog): the logged admissions are kept and judged
    ///   against the new period. Entries older than the old period were already
    ///   dropped, so a longer period does not see them: at most `L_old + L_new` in
    ///   `(c − P_old, c + P_new)`, and at most `L_new` in any `(t − P_new, t]` after `c`.
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] that [`build`](RedisRateLimiterBuilder::build) would give
    /// for this quota (as [`Error::Config`], or [`ConfigError::Unrepresentable`] for
    /// its [`Error::Unrepresentable`]); nothing changes then.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use tollgate::{ConfigError, Quota};
    ///
    /// # async fn run(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// limiter.set_quota(Quota::per_minute(30))?; // from the next decision on
    /// assert_eq!(limiter.quota(), Quota::per_minute(30));
    /// assert_eq!(limiter.set_quota(Quota::per_minute(0)), Err(ConfigError::ZeroLimit));
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_quota(&self, quota: Quota) -> Result<(), ConfigError> {
        let plan = Plan::new(self.inner.algorithm, quota)?;
        self.inner.active.store(Active { quota, plan });
        Ok(())
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
            background_errors: i.background_errors.load(Ordering::Relaxed),
        }
    }

    /// The Redis key holding `key`'s state: `<prefix>:{<key>}` (bytes of a key that
    /// are not UTF-8 appear here as U+FFFD; Redis gets them as they are).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::RedisRateLimiter) {
    /// assert_eq!(limiter.redis_key("bob"), "tollgate:{bob}");
    /// assert_eq!(limiter.redis_key(&7u32), "tollgate:{7}");
    /// # }
    /// ```
    #[must_use]
    pub fn redis_key<K: RedisKey + ?Sized>(&self, key: &K) -> String {
        let mut buf = [0; KEY_BUF];
        KeyName::exact(&self.inner.prefix, key.key_bytes(&mut buf)).to_lossy_string()
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
        self.inner.active.load().plan.capacity()
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
        self.inner.active.load().quota
    }
}

impl fmt::Debug for RedisRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRateLimiter")
            .field("algorithm", &self.inner.algorithm)
            .field("quota", &self.inner.active.load().quota)
            .field("prefix", &self.inner.prefix)
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}
