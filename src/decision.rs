//! The outcome of one rate-limiting decision.

use std::time::Duration;

/// What the limiter decided about one request, and what the caller needs to tell its
/// client (IETF `RateLimit` headers, `Retry-After`, a shaper's hold time).
///
/// # Example
///
/// ```
/// use tollgate::{Algorithm, ManualClock, Quota, RateLimiter};
///
/// let limiter = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(2))
///     .clock(ManualClock::new())
///     .build()?;
/// let first = limiter.check();
/// assert!(first.is_allowed());
/// assert_eq!((first.limit(), first.remaining()), (2, 1));
/// assert!(limiter.check().is_allowed());
/// let third = limiter.check();
/// assert!(!third.is_allowed());
/// assert_eq!(third.retry_after(), Some(std::time::Duration::from_secs(1)));
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use = "a Decision says whether the request may proceed"]
pub struct Decision {
    allowed: bool,
    /// The quota's limit (requests per period).
    limit: u32,
    /// The most admitted at once (the burst for the buckets, else the limit).
    burst: u32,
    remaining: u32,
    reset_after_ns: u64,
    retry_after_ns: u64,
    delay_ns: u64,
}

impl Decision {
    /// An admitted request.
    #[inline]
    pub(crate) const fn allow(
        limit: u32,
        remaining: u32,
        reset_after_ns: u64,
        delay_ns: u64,
    ) -> Self {
        Decision {
            allowed: true,
            limit,
            burst: limit,
            remaining,
            reset_after_ns,
            retry_after_ns: 0,
            delay_ns,
        }
    }

    /// A denied request that would fit after `retry_after_ns`.
    #[inline]
    pub(crate) const fn deny(
        limit: u32,
        remaining: u32,
        reset_after_ns: u64,
        retry_after_ns: u64,
    ) -> Self {
        Decision {
            allowed: false,
            limit,
            burst: limit,
            remaining,
            reset_after_ns,
            retry_after_ns,
            delay_ns: 0,
        }
    }

    /// Whether the request was admitted.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_hour(1)).build()?;
    /// assert!(l.check().is_allowed());
    /// assert!(!l.check().is_allowed());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    #[must_use]
    pub const fn is_allowed(&self) -> bool {
        self.allowed
    }

    /// The quota's limit: requests per period, what an IETF `RateLimit-Policy` header's
    /// `q` reports. (Until 0.2 this returned the burst; that is now
    /// [`burst`](Self::burst).)
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(100).with_burst(20)).build()?;
    /// let d = l.check();
    /// assert_eq!((d.limit(), d.burst()), (100, 20));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    #[must_use]
    pub const fn limit(&self) -> u32 {
        self.limit
    }

    /// The most requests admitted at once: the burst for the buckets, the limit for
    /// the windows and the log. [`remaining`](Self::remaining) counts down from it.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(60)).build()?;
    /// assert_eq!(l.check().burst(), 60);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    #[must_use]
    pub const fn burst(&self) -> u32 {
        self.burst
    }

    /// This decision with the quota's `limit` (for the buckets, whose decisions are
    /// built from the burst).
    #[inline]
    pub(crate) const fn with_limit(mut self, limit: u32) -> Self {
        self.limit = limit;
        self
    }

    /// This decision under another policy's `limit` and `burst`: a keyed table's
    /// refusal of a new key is built where the table is full, and restated with the
    /// deciding tier's quota by the caller that decided under it.
    #[inline]
    pub(crate) const fn with_policy(mut self, limit: u32, burst: u32) -> Self {
        self.limit = limit;
        self.burst = burst;
        self
    }

    /// This decision, made at a time `lag` ns after the caller's reading (a keyed
    /// table decides a missing key no earlier than the newest reclaim in its shard), as
    /// that caller sees it: every wait it reports (`reset_after`, `retry_after`,
    /// `delay`) measured from the reading, so never too early for that caller. A wait
    /// of zero stays zero: nothing is held. Saturating: a lag cannot wrap a wait.
    #[inline]
    pub(crate) const fn lagged(mut self, lag: u64) -> Self {
        if self.reset_after_ns != 0 {
            self.reset_after_ns = self.reset_after_ns.saturating_add(lag);
        }
        if !self.allowed {
            self.retry_after_ns = self.retry_after_ns.saturating_add(lag);
        }
        if self.delay_ns != 0 {
            self.delay_ns = self.delay_ns.saturating_add(lag);
        }
        self
    }

    /// [`lagged`](Self::lagged) for a path where the lag is almost always zero (a hit
    /// path that passes one): one compare inline, the shift out of line.
    #[inline]
    pub(crate) fn lagged_rarely(self, lag: u64) -> Self {
        #[cold]
        #[inline(never)]
        fn shift(d: Decision, lag: u64) -> Decision {
            d.lagged(lag)
        }
        if lag == 0 {
            self
        } else {
            shift(self, lag)
        }
    }

    /// How many more requests of cost 1 would be admitted right now, after this one.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, Quota, RateLimiter, ManualClock};
    /// let l = RateLimiter::builder(Algorithm::SlidingLog, Quota::per_minute(3))
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// assert_eq!(l.check().remaining(), 2);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    #[must_use]
    pub const fn remaining(&self) -> u32 {
        self.remaining
    }

    /// How long until the full quota ([`limit`](Self::limit)) is available again, if
    /// nothing else arrives. Zero when it already is.
    ///
    /// # Example
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::{Algorithm, Quota, RateLimiter, ManualClock};
    /// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(10))
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// assert_eq!(l.check().reset_after(), Duration::from_millis(100));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    #[must_use]
    pub const fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.reset_after_ns)
    }

    /// `None` when admitted; otherwise the exact wait after which the same request
    /// would be admitted if nothing else arrives (never too early).
    ///
    /// # Example
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::{Algorithm, Quota, RateLimiter, ManualClock};
    /// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(10))
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// assert_eq!(l.check_n(10)?.retry_after(), None);
    /// assert_eq!(l.check().retry_after(), Some(Duration::from_millis(100)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[must_use]
    pub const fn retry_after(&self) -> Option<Duration> {
        if self.allowed {
            None
        } else {
            Some(Duration::from_nanos(self.retry_after_ns))
        }
    }

    /// For `LeakyBucket`: how long to hold this admitted request so that releases are
    /// evenly spaced at the quota's rate. Zero for the other algorithms and for denials.
    ///
    /// # Example
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::{Algorithm, Quota, RateLimiter, ManualClock};
    /// let l = RateLimiter::builder(Algorithm::LeakyBucket, Quota::per_second(10))
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// assert_eq!(l.check().delay(), Duration::ZERO);
    /// assert_eq!(l.check().delay(), Duration::from_millis(100));
    /// assert_eq!(l.check().delay(), Duration::from_millis(200));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    #[must_use]
    pub const fn delay(&self) -> Duration {
        Duration::from_nanos(self.delay_ns)
    }
}
