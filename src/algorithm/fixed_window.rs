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
        let current = now / self.period;
        // A reading older than the state's window is decided in that window (time never
        // runs backwards); waits are still measured from the reading itself, so that
        // they are never too early for the caller whose clock read `now`.
        let k = current.max(stored);
        let count = if k == stored { stored_count } else { 0 };
        let end = (k + 1) * self.period;
        // In u64: with limit = u32::MAX, a full window plus one would overflow a u32.
        if u64::from(count) + u64::from(cost) <= u64::from(self.limit) {
            // Fits: count + cost <= limit, so the sum is a u32.
            let count = count + cost;
            let reset = if count > 0 { end - now } else { 0 };
            let d = Decision::allow(self.limit, self.limit - count, reset, 0);
            let next = if cost == 0 {
                None
            } else {
                Some((k << self.shift) | u64::from(count))
            };
            (next, d)
        } else {
            // cost <= limit, so the request fits in the next window.
            let wait = end - now;
            (
                None,
                Decision::deny(self.limit, self.limit - count, wait, wait),
            )
        }
    }

    /// Idle once its window has passed, or when it counts nothing.
    #[inline]
    pub(crate) fn is_idle(&self, state: u64, now: u64) -> bool {
        let (stored, count) = self.unpack(state);
        count == 0 || now / self.period > stored
    }
}
