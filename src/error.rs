//! Errors: configuration that can never work, and requests that can never fit.

use crate::quota::Algorithm;
use std::fmt;
use std::time::Duration;

/// Why a limiter could not be built from the given quota and options.
///
/// Every message names the bound that was crossed.
///
/// # Example
///
/// ```
/// use tollgate::{Algorithm, ConfigError, Quota, RateLimiter};
///
/// let err = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(0))
///     .build()
///     .unwrap_err();
/// assert_eq!(err, ConfigError::ZeroLimit);
/// assert!(err.to_string().contains("limit"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The quota allows zero requests per period.
    ZeroLimit,
    /// The quota's period is zero.
    ZeroPeriod,
    /// The burst is zero.
    ZeroBurst,
    /// A window algorithm was given a burst other than its limit.
    BurstNotSupported {
        /// The algorithm that has no burst.
        algorithm: Algorithm,
        /// The burst asked for.
        burst: u32,
        /// The quota's limit, the only burst a window accepts.
        limit: u32,
    },
    /// More than one request per nanosecond: the emission interval would round to zero.
    RateTooHigh {
        /// The quota's limit.
        limit: u32,
        /// The quota's period.
        period: Duration,
    },
    /// A span the engine must represent (the period, or burst × emission interval for
    /// the buckets) exceeds the engine's time horizon.
    PeriodTooLong {
        /// The span that does not fit.
        span: Duration,
        /// The longest span the engine represents.
        max: Duration,
    },
    /// A window quota whose counts and window index do not fit together in one
    /// 64-bit word over the engine's time horizon.
    WindowTooFine {
        /// The window algorithm.
        algorithm: Algorithm,
        /// The quota's limit.
        limit: u32,
        /// The quota's period.
        period: Duration,
        /// The shortest period that fits this limit.
        min_period: Duration,
    },
    /// The sliding log keeps one timestamp per request of the limit; this one is too big.
    LogTooLarge {
        /// The quota's limit.
        limit: u32,
        /// The largest limit the sliding log accepts.
        max: u32,
    },
    /// A keyed limiter was asked to hold zero keys (`max_keys`), more than it can
    /// address, or a table too large to allocate. (The variant keeps its first name:
    /// it counts keys, never a burst.)
    InvalidCapacity {
        /// The `max_keys` asked for.
        requested: usize,
        /// The largest `max_keys` accepted.
        max: usize,
    },
    /// The shard count is zero, not a power of two, or leaves too few keys per shard.
    InvalidShards {
        /// The shard count asked for.
        requested: usize,
    },
    /// `set_quota` on a window algorithm with another period: every stored state
    /// counts in windows of the period it was built with, so the period stays.
    PeriodChange {
        /// The window algorithm.
        algorithm: Algorithm,
        /// The limiter's period.
        period: Duration,
        /// The period asked for.
        requested: Duration,
    },
    /// A keyed limiter's tiers of a window algorithm or the sliding log differ in
    /// period (their states count in the period, shared by every tier).
    TierPeriod {
        /// The algorithm.
        algorithm: Algorithm,
        /// The tier whose period differs.
        tier: usize,
        /// Its period.
        period: Duration,
        /// Tier 0's period, which every tier shares.
        expected: Duration,
    },
    /// A keyed token or leaky bucket's tiers have more distinct rates (emission
    /// intervals) than one table tells apart: each key's state records which rate
    /// wrote it, so that a request under another one carries over what the key used.
    TooManyRates {
        /// Distinct rates asked for (at least).
        rates: usize,
        /// The most one table holds.
        max: usize,
    },
    /// `set_quota` on a sliding log with a limit above the one its rings were
    /// allocated for at build (memory is fixed at build).
    LogBeyondRing {
        /// The limit asked for.
        limit: u32,
        /// The most each ring holds.
        ring: u32,
    },
    /// The quota is valid for the local engine, but a distributed limiter (feature
    /// `redis`) cannot enforce it as configured: the Lua scripts compute in whole
    /// microseconds with doubles, and the hybrid mode syncs several times per period.
    /// Given by their `set_quota`; their builders report the same as
    /// `redis::Error::Unrepresentable`.
    Unrepresentable {
        /// What does not fit, and the bound.
        reason: String,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ZeroLimit => write!(f, "quota limit is zero: a limit must allow at least 1 request per period"),
            ConfigError::ZeroPeriod => write!(f, "quota period is zero: a period must be at least 1 ns"),
            ConfigError::ZeroBurst => write!(f, "burst is zero: a burst must be at least 1 request"),
            ConfigError::BurstNotSupported { algorithm, burst, limit } => write!(
                f,
                "{algorithm:?} has no burst beyond its limit: got burst {burst}, the only accepted burst is the limit {limit}"
            ),
            ConfigError::RateTooHigh { limit, period } => write!(
                f,
                "quota of {limit} per {period:?} is more than 1 request per nanosecond, the finest rate the engine represents"
            ),
            ConfigError::PeriodTooLong { span, max } => write!(
                f,
                "quota spans {span:?}, longer than the engine's horizon of {max:?} (about 146 years)"
            ),
            // No period can fit (SlidingWindow with a limit of 2^31 or more: two 32-bit
            // counts fill the word); the minimum is then past the horizon.
            ConfigError::WindowTooFine { algorithm, limit, period, min_period }
                if *min_period > Duration::from_nanos(crate::clock::HORIZON_NS) => write!(
                f,
                "{algorithm:?} packs its counts and window index into 64 bits: a limit of {limit} leaves no room for the window index at any period (got {period:?}); use a smaller limit or TokenBucket"
            ),
            ConfigError::WindowTooFine { algorithm, limit, period, min_period } => write!(
                f,
                "{algorithm:?} packs its counts and window index into 64 bits: a limit of {limit} needs a period of at least {min_period:?}, got {period:?} (use a longer period or TokenBucket)"
            ),
            ConfigError::LogTooLarge { limit, max } => write!(
                f,
                "SlidingLog keeps one 8-byte timestamp per request of the limit: limit {limit} exceeds the maximum of {max} (use SlidingWindow for large limits)"
            ),
            ConfigError::InvalidCapacity { requested, max } => write!(
                f,
                "max_keys {requested} is out of range: a keyed limiter holds between 1 and {max} keys, and its table must fit in memory"
            ),
            ConfigError::InvalidShards { requested } => write!(
                f,
                "shard count {requested} is invalid: it must be a power of two, at least 1 and at most the table's slot count"
            ),
            ConfigError::PeriodChange { algorithm, period, requested } => write!(
                f,
                "{algorithm:?} counts in windows of {period:?}, the period it was built with; a new period ({requested:?}) needs a new limiter (the limit can change: any limit this period represents)"
            ),
            ConfigError::TierPeriod { algorithm, tier, period, expected } => write!(
                f,
                "{algorithm:?} tiers share one period: tier {tier} has {period:?}, tier 0 has {expected:?} (the buckets' tiers may differ in period)"
            ),
            ConfigError::TooManyRates { rates, max } => write!(
                f,
                "a keyed bucket's tiers may use at most {max} distinct rates (emission intervals); {rates} were asked for: tiers of equal rate share one"
            ),
            ConfigError::LogBeyondRing { limit, ring } => write!(
                f,
                "SlidingLog rings were allocated for {ring} timestamps at build: a limit of {limit} needs a limiter built with at least that limit"
            ),
            ConfigError::Unrepresentable { reason } => write!(
                f,
                "quota not representable by the distributed limiter: {reason}"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A request whose cost exceeds the limiter's capacity: it could never be admitted,
/// however long the caller waits (as opposed to a denial, which means "not now").
///
/// # Example
///
/// ```
/// use tollgate::{Algorithm, InsufficientCapacity, Quota, RateLimiter};
///
/// let limiter = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(10)).build()?;
/// let err = limiter.check_n(11).unwrap_err();
/// assert_eq!(err, InsufficientCapacity { requested: 11, capacity: 10 });
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InsufficientCapacity {
    /// The cost asked for.
    pub requested: u32,
    /// The most the limiter can ever admit at once.
    pub capacity: u32,
}

impl InsufficientCapacity {
    /// `Ok` when a cost of `requested` fits a `capacity`, else this error.
    #[inline]
    pub(crate) fn check(requested: u32, capacity: u32) -> Result<(), Self> {
        if requested > capacity {
            return Err(InsufficientCapacity {
                requested,
                capacity,
            });
        }
        Ok(())
    }
}

impl fmt::Display for InsufficientCapacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "request of cost {} can never fit: the limiter admits at most {} at once",
            self.requested, self.capacity
        )
    }
}

impl std::error::Error for InsufficientCapacity {}
