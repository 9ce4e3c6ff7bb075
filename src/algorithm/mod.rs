//! The five algorithms, as pure, allocation-free step functions.
//!
//! Each packed algorithm is a function `(params, state: u64, now, cost) -> (Option<new
//! state>, Decision)`: `None` means "leave the state as it is" (a denial, or a zero-cost
//! peek), so the cell skips the compare-and-swap. The sliding log works on a ring of
//! timestamps behind a lock instead.
//!
//! All time is `u64` nanoseconds since the clock's zero, clamped to [`HORIZON_NS`]
//! (about 146 years) so that every sum the algorithms make fits in a `u64` and every
//! product in a `u128`.

pub(crate) mod booking;
pub(crate) mod fixed_window;
pub(crate) mod gcra;
pub(crate) mod packed;
pub(crate) mod sliding_log;
pub(crate) mod sliding_window;

pub(crate) use packed::{PackedAlgorithm, PackedParams};

use crate::clock::duration_to_nanos;
use crate::{ConfigError, Quota};
use std::time::Duration;

/// The latest time the engine represents: 2^62 ns, about 146 years after the clock's
/// zero. Readings past it are treated as this time; quotas whose spans exceed it are
/// refused at build time.
pub(crate) const HORIZON_NS: u64 = 1 << 62;

/// The engine's reading of `clock`: nanoseconds since its zero, clamped to
/// [`HORIZON_NS`]. Every limiter reads time through this, once per decision.
#[inline]
pub(crate) fn now<C: crate::Clock>(clock: &C) -> u64 {
    clock.now().min(HORIZON_NS)
}

/// The largest limit the sliding log accepts (it stores one timestamp per request).
pub(crate) const SLIDING_LOG_MAX_LIMIT: u32 = 1 << 16;

/// Which rate-limiting algorithm a limiter runs.
///
/// | algorithm | guarantee | state per key |
/// |---|---|---|
/// | `TokenBucket` | GCRA: at most `burst + t/T` in any span `t`, `T = period/limit` | 8 bytes |
/// | `LeakyBucket` | admits as `TokenBucket`, and [`Decision::delay`](crate::Decision::delay) spaces releases by `T` | 8 bytes |
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
    /// The zero is the clock's: for the default [`QuantaClock`](crate::QuantaClock) and
    /// for [`ManualClock`](crate::ManualClock) it is when the clock was made (for the
    /// default clock, when the limiter's builder was), so a `per_minute` window runs
    /// from the limiter's start, not from the minute on the wall clock: a key that used
    /// up its minute ten seconds after start-up is told to retry in about fifty seconds. For windows on the
    /// wall clock (every `per_minute` window starting on a whole UTC minute, as in
    /// tollgate-server and the Redis mode on Redis `TIME`), build on
    /// [`SystemClock`](crate::SystemClock), whose zero is the Unix epoch:
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

/// Validated parameters of any algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Params {
    Packed(PackedParams),
    Log(sliding_log::SlidingLog),
}

impl Params {
    /// Checks `quota` for `algorithm` and precomputes its parameters.
    pub(crate) fn new(algorithm: Algorithm, quota: Quota) -> Result<Self, ConfigError> {
        let limit = quota.limit();
        if limit == 0 {
            return Err(ConfigError::ZeroLimit);
        }
        let period = duration_to_nanos(quota.period());
        if period == 0 {
            return Err(ConfigError::ZeroPeriod);
        }
        if period > HORIZON_NS {
            return Err(ConfigError::PeriodTooLong {
                span: quota.period(),
                max: Duration::from_nanos(HORIZON_NS),
            });
        }
        let burst = quota.burst();
        if burst == 0 {
            return Err(ConfigError::ZeroBurst);
        }
        if !matches!(algorithm, Algorithm::TokenBucket | Algorithm::LeakyBucket) {
            if let Some(b) = quota.explicit_burst() {
                if b != limit {
                    return Err(ConfigError::BurstNotSupported {
                        algorithm,
                        burst: b,
                        limit,
                    });
                }
            }
        }
        Ok(match algorithm {
            Algorithm::TokenBucket | Algorithm::LeakyBucket => {
                let shaper = algorithm == Algorithm::LeakyBucket;
                Params::Packed(PackedParams::Gcra(gcra::Gcra::new(quota, period, shaper)?))
            }
            Algorithm::FixedWindow => Params::Packed(PackedParams::Fixed(
                fixed_window::FixedWindow::new(quota, period)?,
            )),
            Algorithm::SlidingWindow => Params::Packed(PackedParams::Sliding(
                sliding_window::SlidingWindow::new(quota, period)?,
            )),
            Algorithm::SlidingLog => Params::Log(sliding_log::SlidingLog::new(quota, period)?),
        })
    }

    /// Checks that `next` (same algorithm) can replace these parameters at run time
    /// with every stored state keeping its meaning: the buckets' states are times, so
    /// anything goes; the windows' states count in windows of their period, so the
    /// period stays (their layout depends on the period alone, so any limit fits); a
    /// log keeps at most `ring` timestamps, allocated at build.
    pub(crate) fn can_become(&self, next: &Params, ring: u32) -> Result<(), ConfigError> {
        let (algorithm, period, requested) = match (self, next) {
            (Params::Packed(PackedParams::Fixed(a)), Params::Packed(PackedParams::Fixed(b))) => {
                (Algorithm::FixedWindow, a.period(), b.period())
            }
            (
                Params::Packed(PackedParams::Sliding(a)),
                Params::Packed(PackedParams::Sliding(b)),
            ) => (Algorithm::SlidingWindow, a.period(), b.period()),
            (Params::Log(_), Params::Log(b)) if b.limit() > ring => {
                return Err(ConfigError::LogBeyondRing {
                    limit: b.limit(),
                    ring,
                })
            }
            _ => return Ok(()),
        };
        if period != requested {
            return Err(ConfigError::PeriodChange {
                algorithm,
                period: Duration::from_nanos(period),
                requested: Duration::from_nanos(requested),
            });
        }
        Ok(())
    }
}

/// A window algorithm's parameters (period, limit, and the shift of its packed
/// state's index) as the words `sync::Swap` publishes: the period, then
/// `limit | shift << 32` (the other two unused).
#[inline]
pub(crate) fn window_words(period: u64, limit: u32, shift: u32) -> [u64; 4] {
    [period, u64::from(limit) | (u64::from(shift) << 32), 0, 0]
}

/// `(period, limit, shift)` from [`window_words`].
#[inline]
pub(crate) fn window_of_words(w: [u64; 4]) -> (u64, u32, u32) {
    (w[0], w[1] as u32, (w[1] >> 32) as u32)
}

/// Bits needed to hold every count from 0 to `limit`.
pub(crate) const fn count_bits(limit: u32) -> u32 {
    32 - limit.leading_zeros()
}

/// Bits holding every window index from 0 to the horizon, for windows of `period` ns.
pub(crate) const fn index_bits(period: u64) -> u32 {
    64 - (HORIZON_NS / period).leading_zeros()
}

/// The shortest period (ns) whose window index, over the whole horizon, fits in
/// `index_bits` bits: `HORIZON_NS / period < 2^index_bits`.
pub(crate) fn min_window_period(index_bits: u32) -> u64 {
    if index_bits >= 63 {
        return 1;
    }
    // period > HORIZON / 2^bits  <=>  period >= HORIZON / 2^bits + 1
    (HORIZON_NS >> index_bits) + 1
}

#[cfg(test)]
mod tests;
