//! [`RedisRateLimiterBuilder`]: target, prefix, timeout, fallback, clock.

#[allow(clippy::wildcard_imports)]
use super::*;

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
    pub(super) algorithm: Algorithm,
    pub(super) quota: Quota,
    pub(super) target: Target,
    pub(super) prefix: String,
    pub(super) timeout: Duration,
    pub(super) fallback: Fallback,
    pub(super) time: TimeSource,
    /// Set by `connection_of`: the other limiter's deployment, shared.
    pub(super) deployment: Option<Deployment>,
}

crate::redis::shared_settings::shared_settings!(
    RedisRateLimiterBuilder,
    "RedisRateLimiter",
    "TokenBucket",
    "Every script touches one hash-tagged key, hence one slot."
);

impl RedisRateLimiterBuilder {
    /// Uses `other`'s connection (shared, not a new one), and counts as the same Redis
    /// deployment: limiters built so can be decided together by
    /// [`check_all`](crate::redis::check_all). Limiters built on the same
    /// [`url`](Self::url) (address and database) share a deployment too; limiters given
    /// connections by [`connection`](Self::connection) each have their own, since a
    /// connection cannot tell where it leads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # use tollgate::{redis::RedisRateLimiter, Algorithm, Quota};
    /// # async fn run() -> Result<(), tollgate::redis::Error> {
    /// let client = tollgate::redis::redis::Client::open("redis://127.0.0.1:6379")?;
    /// let global = RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1000))
    ///     .connection(client.get_connection_manager().await?)
    ///     .prefix("global")
    ///     .build()
    ///     .await?;
    /// let per_user = RedisRateLimiter::builder(Algorithm::SlidingWindow, Quota::per_minute(60))
    ///     .connection_of(&global)
    ///     .prefix("user")
    ///     .build()
    ///     .await?;
    /// # let _ = per_user;
    /// # Ok(())
    /// # }
    /// ```
    pub fn connection_of(mut self, other: &RedisRateLimiter) -> Self {
        self.target = Target::Connection(other.inner.conn.clone());
        self.deployment = Some(other.inner.deployment.clone());
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
        crate::redis::check_prefix(&self.prefix)?;
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
        let deployment = self.deployment.unwrap_or_else(|| self.target.deployment());
        let conn = self.target.connect(self.timeout, lazy).await?;
        Ok(RedisRateLimiter {
            inner: Arc::new(Inner {
                conn,
                deployment,
                active: AtomicCell::new(Active {
                    quota: self.quota,
                    plan,
                }),
                algorithm: self.algorithm,
                prefix: self.prefix,
                timeout: self.timeout,
                time: self.time,
                grace_ms,
                fallback,
                decisions: AtomicU64::new(0),
                errors: AtomicU64::new(0),
                fallbacks: AtomicU64::new(0),
                background_errors: AtomicU64::new(0),
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
