//! Fixed window: at most `limit` per window `[k·P, (k+1)·P)`, windows aligned to the
//! clock's zero.

use super::{count_bits, min_window_period, HORIZON_NS};
use crate::{Algorithm, ConfigError, Decision, Quota};
use std::time::Duration;

/// Validated fixed-window parameters.
///
/// State layout, with `c = count_bits(limit)` (the bits that hold `0..=limit`):
///
/// ```text
///  63                     c  c-1        0
/// +------------------------+-------------+
/// |  window index k        |   count     |
/// +------------------------+-------------+
/// ```
///
/// `k = t / P` is the full window index, never reduced modulo anything: `build`
/// refuses quotas for which `HORIZON_NS / P` does not fit in `64 − c` bits, so the
/// index cannot wrap before the horizon and a key idle for any time reads as expired.
/// `0` is window 0 with count 0, which decides as a fresh key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FixedWindow {
    period: u64,
    limit: u32,
    shift: u32,
}

impl FixedWindow {
    pub(crate) fn new(quota: Quota, period: u64) -> Result<Self, ConfigError> {
        let limit = quota.limit();
        let shift = count_bits(limit);
        let min = min_window_period(64 - shift);
        if period < min {
            return Err(ConfigError::WindowTooFine {
                algorithm: Algorithm::FixedWindow,
                limit,
                period: quota.period(),
                min_period: Duration::from_nanos(min),
            });
        }
        debug_assert!(HORIZON_NS / period < 1u64 << (64 - shift));
        Ok(FixedWindow {
            period,
            limit,
            shift,
        })
    }

    pub(crate) fn limit(&self) -> u32 {
        self.limit
    }

    #[inline]
    fn unpack(&self, state: u64) -> (u64, u32) {
        let mask = (1u64 << self.shift) - 1;
        (state >> self.shift, (state & mask) as u32)
    }

    /// `now <= HORIZON_NS`, `cost <= limit`.
    #[inline(always)]
    pub(crate) fn step(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Decision) {
        let (stored, stored_count) = self.unpack(state);
        // A reading older than the state's window is decided in that window (time never
        // runs backwards).
        let k = (now / self.period).max(stored);
        let count = if k == stored { stored_count } else { 0 };
        let d = self.decide(k, u64::from(count), now, cost);
        let next =
            (d.is_allowed() && cost > 0).then(|| (k << self.shift) | u64::from(count + cost));
        (next, d)
    }

    /// The decision for `cost` in window `k` (`k >= now / P`: later for a stale
    /// reading) holding `count`, at the reading `now`. Waits are measured from `now`
    /// itself, so they are never too early for the caller whose clock read it.
    ///
    /// `count` may exceed the limit (the hybrid Redis mode's global counts can); a
    /// zero-cost peek asks for nothing and is always allowed.
    #[inline(always)]
    pub(crate) fn decide(&self, k: u64, count: u64, now: u64, cost: u32) -> Decision {
        let end = (k + 1) * self.period;
        let limit = u64::from(self.limit);
        let remaining = |count: u64| limit.saturating_sub(count) as u32;
        if cost == 0 || count + u64::from(cost) <= limit {
            let count = count + u64::from(cost);
            let reset = if count > 0 { end - now } else { 0 };
            Decision::allow(self.limit, remaining(count), reset, 0)
        } else {
            // cost <= limit, so the request fits in the next window.
            let wait = end - now;
            Decision::deny(self.limit, remaining(count), wait, wait)
        }
    }

    /// Idle once its window has passed, or when it counts nothing.
    #[inline]
    pub(crate) fn is_idle(&self, state: u64, now: u64) -> bool {
        let (stored, count) = self.unpack(state);
        count == 0 || now / self.period > stored
    }

    /// The time from which `state` is idle: the end of its window (0 when empty).
    #[inline]
    pub(crate) fn idle_at(&self, state: u64) -> u64 {
        let (stored, count) = self.unpack(state);
        if count == 0 {
            0
        } else {
            (stored + 1).saturating_mul(self.period)
        }
    }
}
