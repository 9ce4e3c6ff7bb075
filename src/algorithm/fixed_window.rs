//! Fixed window: at most `limit` per window `[k·P, (k+1)·P)`, windows aligned to the
//! clock's zero.

use super::booking::{self, Booked, Booking, Reserved};
use super::{count_bits, index_bits, min_window_period, HORIZON_NS};
use crate::{Algorithm, ConfigError, Decision, Quota};
use std::time::Duration;

/// Validated fixed-window parameters.
///
/// State layout, with `c = min(32, 64 − index_bits(P))`: the count takes every bit the
/// window index leaves over the horizon (at least `count_bits(limit)`, checked at
/// build), so the layout depends on the period alone:
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

/// The parameters as the words `sync::Swap` publishes (see `algorithm::window_words`).
impl crate::sync::Words for FixedWindow {
    #[inline]
    fn as_words(&self) -> [u64; 4] {
        super::window_words(self.period, self.limit, self.shift)
    }

    #[inline]
    fn from_words(w: [u64; 4]) -> Self {
        let (period, limit, shift) = super::window_of_words(w);
        FixedWindow {
            period,
            limit,
            shift,
        }
    }
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
        // The count field takes every bit the index leaves (the layout depends on the
        // period alone), so any limit this period can represent can later be set by
        // `set_quota` without re-packing a single state.
        let shift = (64 - index_bits(period)).min(32);
        debug_assert!(shift >= count_bits(limit));
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

    /// The window length, ns.
    pub(crate) fn period(&self) -> u64 {
        self.period
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
        if stored > current {
            // The state has moved to a later window (a reservation booked into it, or
            // a reading newer than this one): this window's count is gone, so nothing
            // is admitted before the later one starts. No aligned window ever holds
            // more than the limit, and requests are served after the bookings made
            // before them.
            return (
                None,
                self.queued(stored, u64::from(stored_count), now, cost),
            );
        }
        let k = current.max(stored);
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

    /// The denial of `cost` at `now`, before window `k` (which holds `count`) starts:
    /// retry when it starts, or when it ends if the request does not fit in it; for a
    /// cost of 0, which asks for nothing, an allowed answer with nothing remaining (no
    /// request is admitted before that window). Rare (a pending booking, or a reading
    /// racing a window boundary): kept off the hot path.
    #[cold]
    #[inline(never)]
    fn queued(&self, k: u64, count: u64, now: u64, cost: u32) -> Decision {
        let start = k * self.period;
        // The state's own reset time: the denied request counts in nothing.
        let reset = match self.decide(k, count, start, 0).reset_after().as_nanos() as u64 {
            0 => 0,
            r => (start - now) + r,
        };
        if cost == 0 {
            return Decision::allow(self.limit, 0, reset, 0);
        }
        let d = self.decide(k, count, start, cost);
        let wait = (start - now) + d.retry_after().map_or(0, |w| w.as_nanos() as u64);
        Decision::deny(self.limit, 0, reset, wait)
    }

    /// Whether `state` has moved to a window later than the reading `now`'s: a denial
    /// there may be only the reading's age (see `Step::ahead`).
    #[inline(always)]
    pub(crate) fn ahead(&self, state: u64, now: u64) -> bool {
        (state >> self.shift) * self.period > now
    }

    /// Books `cost` into the earliest window, from the state's own, where it fits: a
    /// reservation that does not fit the current window goes into a later one, and
    /// requests after it queue behind it (the current window's remaining capacity is
    /// given up: strict order of booking, never more than the limit per window).
    /// `Err(wait)` when that window starts more than `max_wait` after `now`.
    pub(crate) fn reserve(
        &self,
        state: u64,
        now: u64,
        cost: u32,
        max_wait: u64,
    ) -> (Option<u64>, Reserved) {
        let (stored, stored_count) = self.unpack(state);
        let current = now / self.period;
        // Summed in 64 bits: a limit may be any u32.
        let (k, count) = if stored < current {
            (current, cost)
        } else if u64::from(stored_count) + u64::from(cost) <= u64::from(self.limit) {
            (stored, stored_count + cost)
        } else {
            (stored + 1, cost)
        };
        let start = k.saturating_mul(self.period);
        let wait = start.saturating_sub(now);
        if let Some(late) = booking::Late::check(wait, max_wait, start, now) {
            return (None, Err(late));
        }
        let at = now + wait;
        let next = (k << self.shift) | u64::from(count);
        let decision = self.decide(k, u64::from(count), at, 0);
        let booking = Booking::Window {
            index: k,
            cost,
            later: booking::Later::of(start, now, state, next),
        };
        booking::stored(next, wait, decision, booking)
    }

    /// Gives back a booking of `cost` in window `index` while the state still counts
    /// that window (later bookings in the same window do not depend on it; a later
    /// window means the count was superseded, and nothing is given back). A booking
    /// into a window later than its reading's (`later`) is given back last first and
    /// restores the state before it (see [`booking::Later`]): nothing was admitted in
    /// between (every request queued behind it), so that is the state without it.
    pub(crate) fn refund(
        &self,
        state: u64,
        index: u64,
        cost: u32,
        later: Option<booking::Later>,
    ) -> Option<u64> {
        if let Some(later) = later {
            return later.refund(state);
        }
        let (stored, count) = self.unpack(state);
        if stored != index || count < cost {
            return None;
        }
        Some((index << self.shift) | u64::from(count - cost))
    }

    /// The largest count a state of this layout holds.
    #[inline]
    fn count_max(&self) -> u64 {
        (1u64 << self.shift) - 1
    }

    /// A charge of `cost` at `now`, counted whatever is left: the window's count may
    /// pass the limit by at most `max_owed` (and what the count field holds), and the
    /// rest of the window denies; the overdraft ends with the window, as every count
    /// does. A state booked into a later window is charged there (nothing is admitted
    /// before it anyway). The part past the bound is dropped, and reported.
    pub(crate) fn charge(
        &self,
        state: u64,
        now: u64,
        cost: u32,
        max_owed: u32,
    ) -> (Option<u64>, Reserved) {
        let (stored, stored_count) = self.unpack(state);
        let current = now / self.period;
        let (k, count) = if stored >= current {
            (stored, u64::from(stored_count))
        } else {
            (current, 0)
        };
        let cap = (u64::from(self.limit) + u64::from(max_owed)).min(self.count_max());
        let taken = u64::from(cost).min(cap.saturating_sub(count));
        let after = count + taken;
        let counted = booking::Counted {
            taken: taken as u32,
            owed: after.saturating_sub(u64::from(self.limit)) as u32,
            dropped: cost - taken as u32,
            given: 0,
        };
        let next = (k << self.shift) | after;
        let booked = Booked {
            wait: 0,
            decision: self.step(next, now, 1).1,
            booking: Booking::Window {
                index: k,
                cost: taken as u32,
                later: None,
            },
            counted,
        };
        ((taken > 0).then_some(next), Ok(booked))
    }

    /// Gives `cost` back to the state's window at `now` while it still counts (a window
    /// over counts nothing any more), never below an empty count.
    pub(crate) fn give_back(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Reserved) {
        let (stored, count) = self.unpack(state);
        let live = stored >= now / self.period;
        let given = if live { cost.min(count) } else { 0 };
        let next = (stored << self.shift) | u64::from(count - given);
        let booked = Booked {
            wait: 0,
            decision: self.step(next, now, 1).1,
            booking: Booking::Nothing,
            counted: booking::Counted {
                given,
                ..Default::default()
            },
        };
        ((given > 0).then_some(next), Ok(booked))
    }

    /// What an admission of `cost` that left `state` booked.
    pub(crate) fn booking(&self, state: u64, cost: u32) -> Booking {
        Booking::Window {
            index: state >> self.shift,
            cost,
            later: None,
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

    /// The keyed table's eviction rank of a state live at `now` (its window is the
    /// current one or later, its count not 0): what it has used, then its idle stamp.
    /// That is its word, `(window, count)`: within the current window it orders by the
    /// count (every entry there goes idle at the window's end), and a state booked into
    /// a later window (a reservation: it admits nothing before that window starts, so
    /// forgetting it can over-admit a whole quota) ranks above every state of the
    /// current one. One comparison per entry.
    #[inline]
    pub(crate) fn evict_rank(&self, state: u64) -> u64 {
        state
    }
}
