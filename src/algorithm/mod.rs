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
use crate::clock::HORIZON_NS;
use crate::{
    error::ConfigError,
    quota::{Algorithm, Quota},
};
use std::time::Duration;

/// The engine's reading of `clock`: nanoseconds since its zero, clamped to
/// [`HORIZON_NS`]. Every limiter reads time through this, once per decision.
#[inline]
pub(crate) fn now<C: crate::clock::Clock>(clock: &C) -> u64 {
    clock.now().min(HORIZON_NS)
}

/// The largest limit the sliding log accepts (it stores one timestamp per request).
pub(crate) const SLIDING_LOG_MAX_LIMIT: u32 = 1 << 16;

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
/// state's index) as the words `sync::Replaceable` publishes: the period, then
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
