//! What a limiter enforces: the quota (how many requests per how long, and how many at once)
//! and the algorithm that enforces it, the two things every builder takes.

use std::time::Duration;

/// `limit` requests per `period`, with a burst (bucket capacity) that defaults to `limit`.
///
/// A `Quota` is plain data; it is checked when a limiter is built, where an impossible
/// quota (zero limit, zero period, a bucket rate above one request per nanosecond, ...)
/// is refused with a [`ConfigError`](crate::error::ConfigError) that says what the bound is.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use tollgate::Quota;
///
/// let q = Quota::per_second(100).with_burst(20);
/// assert_eq!((q.limit(), q.period(), q.burst()), (100, Duration::from_secs(1), 20));
/// assert_eq!(Quota::new(5, Duration::from_millis(250)).burst(), 5);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quota {
    limit: u32,
    period: Duration,
    burst: Option<u32>,
}

impl Quota {
    /// `limit` requests per `period`.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// let q = tollgate::Quota::new(10, Duration::from_secs(2));
    /// assert_eq!(q.limit(), 10);
    /// ```
    #[must_use]
    pub const fn new(limit: u32, period: Duration) -> Self {
        Quota {
            limit,
            period,
            burst: None,
        }
    }

    /// `limit` requests per second.
    ///
    /// # Example
    ///
    /// ```
    /// let q = tollgate::Quota::per_second(100);
    /// assert_eq!(q.period().as_secs(), 1);
    /// ```
    #[must_use]
    pub const fn per_second(limit: u32) -> Self {
        Self::new(limit, Duration::from_secs(1))
    }

    /// `limit` requests per minute.
    ///
    /// # Example
    ///
    /// ```
    /// let q = tollgate::Quota::per_minute(600);
    /// assert_eq!(q.period().as_secs(), 60);
    /// ```
    #[must_use]
    pub const fn per_minute(limit: u32) -> Self {
        Self::new(limit, Duration::from_secs(60))
    }

    /// `limit` requests per hour.
    ///
    /// # Example
    ///
    /// ```
    /// let q = tollgate::Quota::per_hour(3600);
    /// assert_eq!(q.period().as_secs(), 3600);
    /// ```
    #[must_use]
    pub const fn per_hour(limit: u32) -> Self {
        Self::new(limit, Duration::from_secs(3600))
    }

    /// Sets the burst: how many requests may be admitted at once (the bucket
    /// capacity of `TokenBucket` and `LeakyBucket`). Window algorithms accept no burst
    /// other than their `limit`.
    ///
    /// # Example
    ///
    /// ```
    /// let q = tollgate::Quota::per_second(100).with_burst(20);
    /// assert_eq!(q.burst(), 20);
    /// ```
    #[must_use]
    pub const fn with_burst(self, burst: u32) -> Self {
        Quota {
            burst: Some(burst),
            ..self
        }
    }

    /// Requests per period.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(tollgate::Quota::per_minute(7).limit(), 7);
    /// ```
    #[must_use]
    pub const fn limit(&self) -> u32 {
        self.limit
    }

    /// The period over which `limit` requests are allowed.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(tollgate::Quota::per_hour(1).period().as_secs(), 3600);
    /// ```
    #[must_use]
    pub const fn period(&self) -> Duration {
        self.period
    }

    /// The burst: the explicit one, or `limit` when none was set.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(tollgate::Quota::per_second(9).burst(), 9);
    /// ```
    #[must_use]
    pub const fn burst(&self) -> u32 {
        match self.burst {
            Some(b) => b,
            None => self.limit,
        }
    }

    /// Whether a burst was set explicitly with [`with_burst`](Self::with_burst).
    pub(crate) const fn explicit_burst(&self) -> Option<u32> {
        self.burst
    }
}

/// Which rate-limiting algorithm a limiter runs.
///
/// | algorithm | guarantee | state per key |
/// |---|---|---|
/// | `TokenBucket` | GCRA: at most `burst + t/T` in any span `t`, `T = period/limit` | 8 bytes |
/// | `LeakyBucket` | admits as `TokenBucket`, and [`Decision::delay`](crate::decision::Decision::delay) spaces releases by `T` | 8 bytes |
/// | `FixedWindow` | at most `limit` per window `[k·P, (k+1)·P)` from the clock's zero ([wall-aligned on `SystemClock`](Algorithm::FixedWindow)) | 8 bytes |
/// | `SlidingWindow` | weighted counter: `prev·(P−e)/P + curr ≤ limit` | 8 bytes |
/// | `SlidingLog` | exact: at most `limit` in every interval `(t−P, t]` | `8 × limit` bytes |
///
/// # Example
///
/// ```
/// use tollgate::{Algorithm, Quota, RateLimiter};
///
/// for algorithm in Algorithm::ALL {
///     let limiter = RateLimiter::builder(algorithm, Quota::per_second(5)).build()?;
///     assert!(limiter.check().is_allowed());
/// }
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// GCRA token bucket: smooth refill at `limit/period`, bursts up to `burst`.
    TokenBucket,
    /// The shaper: admits what `TokenBucket` admits and says how long to delay each
    /// admitted request so releases are evenly spaced (nginx `limit_req` with `burst`).
    LeakyBucket,
    /// At most `limit` per window, windows `[k·P, (k+1)·P)` counted from the clock's zero.
    ///
    /// The zero is the clock's: for the default [`QuantaClock`](crate::clock::QuantaClock) and
    /// for [`ManualClock`](crate::clock::ManualClock) it is when the clock was made (for the
    /// default clock, when the limiter's builder was), so a `per_minute` window runs
    /// from the limiter's start, not from the minute on the wall clock: a key that used
    /// up its minute ten seconds after start-up is told to retry in about fifty seconds. For windows on the
    /// wall clock (every `per_minute` window starting on a whole UTC minute, as in
    /// tollgate-server and the Redis mode on Redis `TIME`), build on
    /// [`SystemClock`](crate::clock::SystemClock), whose zero is the Unix epoch:
    ///
    /// ```
    /// use std::time::{SystemTime, UNIX_EPOCH};
    /// use tollgate::{Algorithm, Quota, RateLimiter, SystemClock};
    ///
    /// let limiter = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(3))
    ///     .clock(SystemClock::new())
    ///     .build()?;
    /// let denied = loop {
    ///     let d = limiter.check();
    ///     if !d.is_allowed() {
    ///         break d;
    ///     }
    /// };
    /// // The window ends on the next whole minute of the wall clock.
    /// let into_minute = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() % 60_000_000_000;
    /// let retry = denied.retry_after().expect("a denial says when").as_nanos();
    /// let off = (into_minute + retry) % 60_000_000_000; // 0, up to the time between the two readings
    /// assert!(off < 1_000_000_000 || off > 59_000_000_000, "{off} ns off a whole minute");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    FixedWindow,
    /// Sliding window counter: the previous window's count, weighted by how much of it
    /// still overlaps the sliding period, plus the current count.
    SlidingWindow,
    /// Exact sliding log: a ring of the last `limit` admission timestamps.
    SlidingLog,
}

impl Algorithm {
    /// All five algorithms, in declaration order.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(tollgate::Algorithm::ALL.len(), 5);
    /// ```
    pub const ALL: [Algorithm; 5] = [
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
    ];

    /// Whether this algorithm's state fits in one atomic `u64`.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::Algorithm;
    /// assert!(Algorithm::TokenBucket.is_packed());
    /// assert!(!Algorithm::SlidingLog.is_packed());
    /// ```
    #[must_use]
    pub const fn is_packed(self) -> bool {
        !matches!(self, Algorithm::SlidingLog)
    }
}
