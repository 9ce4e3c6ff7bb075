//! Quotas: how many requests per how long, and how many at once.

use std::time::Duration;

/// `limit` requests per `period`, with a burst (bucket capacity) that defaults to `limit`.
///
/// A `Quota` is plain data; it is checked when a limiter is built, where an impossible
/// quota (zero limit, zero period, a bucket rate above one request per nanosecond, ...)
/// is refused with a [`ConfigError`](crate::ConfigError) that says what the bound is.
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
