//! Sliding window counter: the previous window's count weighted by how much of it the
//! sliding period still covers, plus the current window's count.
//!
//! At time `t = k·P + e` a request of cost `n` is admitted iff
//! `prev·(P − e) + (curr + n)·P ≤ limit·P`, in exact integer arithmetic (`u128`).

use super::booking::{self, Booking, Reserved};
use super::{count_bits, index_bits, min_window_period};
use crate::{decision::Decision, error::ConfigError, quota::Algorithm, quota::Quota};
use std::time::Duration;

/// Validated sliding-window parameters.
///
/// State layout, with `c = min(32, (64 − index_bits(P)) / 2)` (at least
/// `count_bits(limit)`, checked at build; the layout depends on the period alone):
///
/// ```text
///  63                 2c  2c-1        c  c-1        0
/// +---------------------+--------------+-------------+
/// |  window index k     |  prev count  |  curr count |
/// +---------------------+--------------+-------------+
/// ```
///
/// `prev` is the count of window `k − 1`, `curr` that of window `k`. The index is the
/// full `t / P`: `build` refuses quotas for which `HORIZON_NS / P` does not fit in
/// `64 − 2c` bits, so it never wraps and an idle key always reads as expired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlidingWindow {
    period: u64,
    limit: u32,
    shift: u32,
}

/// A sliding-window state, unpacked and rolled forward to the decision's window.
///
/// The counts are `u64` so that callers whose counts can exceed the limit (the hybrid
/// Redis mode's global counts) share this arithmetic; made by [`SlidingWindow::at`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct View {
    k: u64,
    /// Time into window `k`: 0 when the reading is older than the window's start.
    e: u64,
    prev: u64,
    curr: u64,
}

/// The parameters as the words `sync::Replaceable` publishes (see `algorithm::window_words`).
impl crate::sync::Words for SlidingWindow {
    #[inline]
    fn as_words(&self) -> [u64; 4] {
        super::window_words(self.period, self.limit, self.shift)
    }

    #[inline]
    fn from_words(w: [u64; 4]) -> Self {
        let (period, limit, shift) = super::window_of_words(w);
        SlidingWindow {
            period,
            limit,
            shift,
        }
    }
}

impl SlidingWindow {
    pub(crate) fn new(quota: Quota, period: u64) -> Result<Self, ConfigError> {
        let limit = quota.limit();
        let shift = count_bits(limit);
        let too_fine = |min: u64| ConfigError::WindowTooFine {
            algorithm: Algorithm::SlidingWindow,
            limit,
            period: quota.period(),
            min_period: Duration::from_nanos(min),
        };
        if 2 * shift >= 64 {
            return Err(too_fine(u64::MAX));
        }
        let min = min_window_period(64 - 2 * shift);
        if period < min {
            return Err(too_fine(min));
        }
        // Each count takes half of what the index leaves (the layout depends on the
        // period alone), so `set_quota` can raise the limit without re-packing.
        let shift = ((64 - index_bits(period)) / 2).min(32);
        debug_assert!(shift >= count_bits(limit));
        Ok(SlidingWindow {
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

    /// Counts `prev` (window `k − 1`) and `curr` (window `k`) viewed at the reading
    /// `now`, for `k >= now / P` (later for a stale reading, which is then decided at
    /// window `k`'s start, where the previous window weighs the most).
    #[inline]
    pub(crate) fn at(&self, k: u64, now: u64, prev: u64, curr: u64) -> View {
        View {
            k,
            e: now.saturating_sub(k * self.period),
            prev,
            curr,
        }
    }

    #[inline]
    fn view(&self, state: u64, now: u64) -> View {
        let mask = (1u64 << self.shift) - 1;
        let stored = state >> (2 * self.shift);
        let stored_prev = (state >> self.shift) & mask;
        let stored_curr = state & mask;
        // Time never runs backwards: a reading older than the state's window is
        // decided in that window.
        let k = (now / self.period).max(stored);
        let (prev, curr) = match k - stored {
            0 => (stored_prev, stored_curr),
            1 => (stored_curr, 0),
            _ => (0, 0),
        };
        self.at(k, now, prev, curr)
    }

    /// `prev·(P − e) + (curr + n)·P`, the weighted count of a request of cost `n`.
    #[inline]
    fn weight(&self, prev: u64, e: u64, curr: u64, n: u32) -> u128 {
        let p = u128::from(self.period);
        u128::from(prev) * (p - u128::from(e)) + (u128::from(curr) + u128::from(n)) * p
    }

    /// How many cost-1 requests still fit at `(prev, e, curr)`.
    #[inline]
    fn remaining(&self, v: &View) -> u32 {
        let p = u128::from(self.period);
        let budget = u128::from(self.limit) * p;
        let used = u128::from(v.prev) * (p - u128::from(v.e));
        let fits = budget.saturating_sub(used) / p;
        // fits <= limit < 2^32.
        (fits as u64).saturating_sub(v.curr) as u32
    }

    /// The exact shortest wait (ns) from `v` until a request of cost `n <= limit` fits,
    /// if nothing else arrives.
    fn wait(&self, v: &View, n: u32) -> u64 {
        let p = self.period;
        let limit = u128::from(self.limit);
        // Within window k: prev·(P − e') <= (limit − curr − n)·P.
        if u128::from(v.curr) + u128::from(n) <= limit {
            if v.prev == 0 {
                return 0;
            }
            let slack = (limit - u128::from(v.curr) - u128::from(n)) * u128::from(p);
            // The largest overlap P − e' the previous window may still have.
            let overlap = slack / u128::from(v.prev);
            if overlap >= u128::from(p) {
                return 0;
            }
            if overlap > 0 {
                // overlap < P, so e_min in (0, P).
                let e_min = p - overlap as u64;
                return e_min.saturating_sub(v.e);
            }
        }
        // In window k + 1: curr becomes prev; curr·(P − e') <= (limit − n)·P.
        let e_next = if v.curr == 0 {
            0
        } else {
            let overlap = (limit - u128::from(n)) * u128::from(p) / u128::from(v.curr);
            u128::from(p).saturating_sub(overlap) as u64
        };
        (p - v.e) + e_next
    }

    /// `now <= HORIZON_NS`, `cost <= limit`.
    #[inline(always)]
    pub(crate) fn step(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Decision) {
        let v = self.view(state, now);
        if v.k * self.period > now {
            // The state has moved to a later window (a reservation booked into it, or
            // a reading newer than this one): nothing is admitted before it starts, so
            // requests are served after the bookings made before them.
            return (None, self.queued(&v, now, cost));
        }
        let d = self.decide(&v, now, cost);
        let next = (d.is_allowed() && cost > 0).then(|| {
            (v.k << (2 * self.shift)) | (v.prev << self.shift) | (v.curr + u64::from(cost))
        });
        (next, d)
    }

    /// The state [`step`](Self::step) would leave, without its decision: the same
    /// admission test and the same state, but none of the decision's waits (two or
    /// three 128-bit divisions), which a caller that needs the decision only once the
    /// state is stored computes after. `step(state, now, cost).0`, exactly.
    #[inline(always)]
    pub(crate) fn next_state(&self, state: u64, now: u64, cost: u32) -> Option<u64> {
        let v = self.view(state, now);
        let budget = u128::from(self.limit) * u128::from(self.period);
        let admitted = cost > 0 && self.weight(v.prev, v.e, v.curr, cost) <= budget;
        // A state in a later window admits nothing before it starts (see `step`).
        (admitted && v.k * self.period <= now).then(|| {
            (v.k << (2 * self.shift)) | (v.prev << self.shift) | (v.curr + u64::from(cost))
        })
    }

    /// The decision for `cost` on `v` at the reading `now`. A stale reading is decided
    /// at its window's start; waits are measured from the reading itself, so they are
    /// never too early for its caller. A zero-cost peek asks for nothing and is always
    /// allowed (only a stale reading, or counts past the limit, can weigh more than the
    /// budget).
    #[inline(always)]
    pub(crate) fn decide(&self, v: &View, now: u64, cost: u32) -> Decision {
        let lag = (v.k * self.period + v.e) - now;
        let from_now = |wait: u64| if wait == 0 { 0 } else { wait + lag };
        let budget = u128::from(self.limit) * u128::from(self.period);
        if cost == 0 || self.weight(v.prev, v.e, v.curr, cost) <= budget {
            let after = View {
                curr: v.curr + u64::from(cost),
                ..*v
            };
            Decision::allow(
                self.limit,
                self.remaining(&after),
                from_now(self.wait(&after, self.limit)),
                0,
            )
        } else {
            Decision::deny(
                self.limit,
                self.remaining(v),
                from_now(self.wait(v, self.limit)),
                from_now(self.wait(v, cost)),
            )
        }
    }

    /// The denial of a request read at `now`, before the state's later window `v.k`
    /// starts. Its reset time is the state's own (the denied request counts in
    /// nothing), measured from the reading. Rare: kept off the hot path.
    ///
    /// A cost of 0 asks for nothing: allowed, with nothing remaining. A cost that
    /// would not fit even once the window starts waits for what `decide` then asks.
    #[cold]
    #[inline(never)]
    fn queued(&self, v: &View, now: u64, cost: u32) -> Decision {
        let start = v.k * self.period;
        let reset = match self.wait(v, self.limit) {
            0 => 0,
            w => (start + v.e + w) - now,
        };
        if cost == 0 {
            return Decision::allow(self.limit, 0, reset, 0);
        }
        let wait = (start - now) + self.wait(v, cost);
        Decision::deny(self.limit, 0, reset, wait)
    }

    /// Whether `state` has moved to a window later than the reading `now`'s: a denial
    /// there may be only the reading's age (see `Step::ahead`).
    #[inline(always)]
    pub(crate) fn ahead(&self, state: u64, now: u64) -> bool {
        (state >> (2 * self.shift)) * self.period > now
    }

    /// Books `cost` at the earliest time it fits if nothing else arrives (the exact
    /// wait `decide` reports), counting it in that time's window: in the current one
    /// (later requests then see it, and since the previous window's weight only
    /// decreases they fit no sooner than it), or in a later one, which then admits
    /// nothing before it starts. Strict order of booking. `Err(wait)` beyond `max_wait`.
    pub(crate) fn reserve(
        &self,
        state: u64,
        now: u64,
        cost: u32,
        max_wait: u64,
    ) -> (Option<u64>, Reserved) {
        let v = self.view(state, now);
        let from = v.k * self.period + v.e;
        let at = from + self.wait(&v, cost);
        let wait = at - now;
        let k = at / self.period;
        if let Some(late) = booking::Late::check(wait, max_wait, at, now) {
            return (None, Err(late));
        }
        let (prev, curr) = match k - v.k {
            0 => (v.prev, v.curr + u64::from(cost)),
            1 => (v.curr, u64::from(cost)),
            _ => (0, u64::from(cost)),
        };
        let next = (k << (2 * self.shift)) | (prev << self.shift) | curr;
        let decision = self.decide(&self.at(k, at, prev, curr), at, 0);
        let booking = Booking::Window {
            index: k,
            cost,
            later: booking::Later::of(k * self.period, now, state, next),
        };
        booking::stored(next, wait, decision, booking)
    }

    /// Gives back a booking of `cost` in window `index` while the state's current
    /// window is still that one (see the fixed window's rule, `later` included).
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
        let stored = state >> (2 * self.shift);
        let curr = state & ((1u64 << self.shift) - 1);
        if stored != index || curr < u64::from(cost) {
            return None;
        }
        Some(state - u64::from(cost))
    }

    /// A charge of `cost` at `now`, counted whatever is left: the weighted count
    /// `prev·(P − e) + curr·P` may pass `limit·P` by at most `max_owed·P` (and the
    /// current count what its field holds);
    /// the excess weighs into the next window as any count does. A state booked into a
    /// later window is charged there. The part past the bound is dropped, and reported.
    pub(crate) fn charge(
        &self,
        state: u64,
        now: u64,
        cost: u32,
        max_owed: u32,
    ) -> (Option<u64>, Reserved) {
        let v = self.view(state, now);
        let field = (1u64 << self.shift) - 1;
        // The bound is on the weighted count, as `owed` is: `prev·(P − e) + (curr +
        // taken)·P ≤ (limit + max_owed)·P`, and the count must fit its field.
        let p = u128::from(self.period);
        let cap = (u64::from(self.limit) + u64::from(max_owed)).min(field);
        let weighs = self.weight(v.prev, v.e, 0, 0);
        // At most `cap`: the count stays within its field.
        let room = ((u128::from(cap) * p).saturating_sub(weighs) / p) as u64;
        let taken = u64::from(cost).min(room.saturating_sub(v.curr));
        let after = View {
            curr: v.curr + taken,
            ..v
        };
        // What the key owes: how far the weighted count is past the limit, in requests
        // (rounded up).
        let over = self
            .weight(after.prev, after.e, after.curr, 0)
            .saturating_sub(u128::from(self.limit) * p);
        let counted = booking::Counted {
            taken: taken as u32,
            owed: over.div_ceil(p).min(u128::from(u32::MAX)) as u32,
            dropped: cost - taken as u32,
            given: 0,
        };
        let next = (v.k << (2 * self.shift)) | (v.prev << self.shift) | after.curr;
        let booked = booking::Booked {
            wait: 0,
            decision: self.step(next, now, 1).1,
            booking: Booking::Window {
                index: v.k,
                cost: taken as u32,
                later: None,
            },
            counted,
        };
        ((taken > 0).then_some(next), Ok(booked))
    }

    /// Gives `cost` back at `now` to the counts that still weigh, the current window's
    /// first, then the previous one's, never below empty counts.
    pub(crate) fn give_back(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Reserved) {
        let v = self.view(state, now);
        let from_curr = u64::from(cost).min(v.curr);
        let from_prev = (u64::from(cost) - from_curr).min(v.prev);
        let given = from_curr + from_prev;
        let next =
            (v.k << (2 * self.shift)) | ((v.prev - from_prev) << self.shift) | (v.curr - from_curr);
        let booked = booking::Booked {
            wait: 0,
            decision: self.step(next, now, 1).1,
            booking: Booking::Nothing,
            counted: booking::Counted {
                given: given as u32,
                ..Default::default()
            },
        };
        ((given > 0).then_some(next), Ok(booked))
    }

    /// What an admission of `cost` that left `state` booked.
    pub(crate) fn booking(&self, state: u64, cost: u32) -> Booking {
        Booking::Window {
            index: state >> (2 * self.shift),
            cost,
            later: None,
        }
    }

    /// Idle when neither count weighs anything now or later.
    #[inline]
    pub(crate) fn is_idle(&self, state: u64, now: u64) -> bool {
        let v = self.view(state, now);
        v.curr == 0 && v.prev == 0
    }

    /// The time from which `state` is idle: a current count weighs until the end of
    /// the next window, a previous count until the end of the current one.
    #[inline]
    pub(crate) fn idle_at(&self, state: u64) -> u64 {
        let mask = (1u64 << self.shift) - 1;
        let stored = state >> (2 * self.shift);
        let (prev, curr) = ((state >> self.shift) & mask, state & mask);
        let windows = match (prev, curr) {
            (0, 0) => return 0,
            (_, 0) => 1,
            _ => 2,
        };
        (stored + windows).saturating_mul(self.period)
    }

    /// The keyed table's eviction rank of a state live at a reading in window
    /// `current`, `P − rest` into it: what it has used, the weighted count that still
    /// counts then, `w = prev·rest + curr·P` (requests × P ns, under 2⁹⁵), then its idle
    /// stamp, as one number: `w·2 + (curr > 0)` (a live state of the current window
    /// with a current count goes idle a window after one with only a previous count).
    /// A state booked into a later window (a reservation: it admits nothing before that
    /// window starts, so forgetting it can over-admit a whole quota) ranks above every
    /// state of the current one, by how many windows ahead (from bit 96), then as above
    /// at that window's start (`rest = P`). `view` without its division, and two
    /// 64-bit products.
    #[inline]
    pub(crate) fn evict_rank(&self, state: u64, current: u64, rest: u64) -> u128 {
        let stored = state >> (2 * self.shift);
        let mask = (1u64 << self.shift) - 1;
        let (stored_prev, stored_curr) = ((state >> self.shift) & mask, state & mask);
        let (prev, curr, ahead, rest) = if stored == current {
            (stored_prev, stored_curr, 0, rest)
        } else if stored > current {
            (stored_prev, stored_curr, stored - current, self.period)
        } else if stored + 1 == current {
            (stored_curr, 0, 0, rest)
        } else {
            (0, 0, 0, rest)
        };
        let weight =
            u128::from(prev) * u128::from(rest) + u128::from(curr) * u128::from(self.period);
        (u128::from(ahead.min(u64::from(u32::MAX))) << 96) | (weight << 1) | u128::from(curr > 0)
    }
}
