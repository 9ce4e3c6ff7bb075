//! Sliding window counter: the previous window's count weighted by how much of it the
//! sliding period still covers, plus the current window's count.
//!
//! At time `t = k·P + e` a request of cost `n` is admitted iff
//! `prev·(P − e) + (curr + n)·P ≤ limit·P`, in exact integer arithmetic (`u128`).

use super::booking::{self, Booking, Reserved};
use super::{count_bits, index_bits, min_window_period, HORIZON_NS};
use crate::{decision::Decision, error::ConfigError, quota::Algorithm, quota::Quota};
use std::time::Duration;

/// Validated sliding-window parameters.
///
/// State layout, with `c = count_field_bits(P) = min(32, (63 − index_bits(P)) / 2)`
/// (at least `count_bits(limit)`, checked at build; the layout depends on the period
/// alone):
///
/// ```text
///  63             2c+1  2c        c+1  c          1   0
/// +-----------------+--------------+-------------+---+
/// |  window index k |  prev count  |  curr count | b |
/// +-----------------+--------------+-------------+---+
/// ```
///
/// `prev` is the count of window `k − 1`, `curr` that of window `k`. The index is the
/// full `t / P`: `build` refuses quotas for which `HORIZON_NS / P` does not fit in
/// `63 − 2c` bits, so it never wraps and an idle key always reads as expired. `0` is
/// window 0 with empty counts, unmarked, which decides as a fresh key.
///
/// `b`, the booked-ahead mark, tells the two ways a state can lie in a window later
/// than a reading's apart, as the fixed window's does. Set (`b = 1`): a reservation
/// moved the state into a window later than its own reading's (the rest of the windows
/// it moved from is given up); nothing is admitted before that window starts, so
/// nothing overtakes the booking. Clear: a newer reading wrote it (another thread's, or
/// the clock stepped back), and an older reading is decided at the state's time (see
/// [`view`](Self::view)). Every write by a reading in or after the state's window
/// clears the mark: that window has started, so nobody can overtake a booking in it
/// any more.
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

/// The booked-ahead mark (see [`SlidingWindow`]'s layout).
const MARK: u64 = 1;

/// The bits of each of a sliding window's two count fields for windows of `period` ns:
/// half of what the full window index and the booked-ahead mark leave, at most 32 (the
/// local layout, which the Redis mode's charge bound mirrors).
pub(crate) const fn count_field_bits(period: u64) -> u32 {
    let half = (63 - index_bits(period)) / 2;
    if half < 32 {
        half
    } else {
        32
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
        // The index takes `63 − 2c` bits: one is the booked-ahead mark.
        if 2 * shift >= 63 {
            return Err(too_fine(u64::MAX));
        }
        let min = min_window_period(63 - 2 * shift);
        if period < min {
            return Err(too_fine(min));
        }
        // Each count takes half of what the index and the mark leave (the layout
        // depends on the period alone), so `set_quota` can raise the limit without
        // re-packing.
        let shift = count_field_bits(period);
        debug_assert!(shift >= count_bits(limit));
        debug_assert!(HORIZON_NS / period < 1u64 << (63 - 2 * shift));
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

    /// `(window index, prev, curr, booked-ahead mark)`.
    #[inline(always)]
    fn unpack(&self, state: u64) -> (u64, u64, u64, bool) {
        let mask = (1u64 << self.shift) - 1;
        (
            state >> (2 * self.shift + 1),
            (state >> (self.shift + 1)) & mask,
            (state >> 1) & mask,
            state & MARK != 0,
        )
    }

    #[inline(always)]
    fn pack(&self, k: u64, prev: u64, curr: u64, marked: bool) -> u64 {
        (k << (2 * self.shift + 1)) | (prev << (self.shift + 1)) | (curr << 1) | u64::from(marked)
    }

    /// The state `v` written with the mark `marked`.
    #[inline(always)]
    fn packed(&self, v: &View, marked: bool) -> u64 {
        self.pack(v.k, v.prev, v.curr, marked)
    }

    /// The state viewed at the reading `now`, and whether it holds `now` back: a
    /// reservation moved it into a window that starts after `now` (marked), so nothing
    /// is admitted before that window starts.
    ///
    /// Time never runs backwards: a reading older than the state's window is decided at
    /// the state's time, in its window with its counts. For a sliding window that time
    /// is the earliest one consistent with the state, the start of its window (`e = 0`,
    /// `e` computed from `max(now, k·P)`): the reading that wrote the state lay
    /// somewhere in window `k`, and nothing in the state says where; at the window's
    /// start the previous window weighs the most (`prev·(P − e)` only falls with `e`),
    /// so the decision is the strictest of any time the state could stand for: it
    /// never admits what a reading at the writer's own time would deny.
    #[inline(always)]
    fn view(&self, state: u64, now: u64) -> (View, bool) {
        let (stored, stored_prev, stored_curr, marked) = self.unpack(state);
        let current = now / self.period;
        let k = current.max(stored);
        let (prev, curr) = match k - stored {
            0 => (stored_prev, stored_curr),
            1 => (stored_curr, 0),
            _ => (0, 0),
        };
        (self.at(k, now, prev, curr), marked && stored > current)
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
        let (v, held) = self.view(state, now);
        if held {
            // A reservation moved the state to a later window: the rest of the windows
            // before it was given up with it, so nothing is admitted before it starts,
            // and requests are served after the bookings made before them.
            return (None, self.queued(&v, now, cost));
        }
        // A reading behind an unmarked state (a newer reading wrote it) is decided at
        // the state's time (see `view`).
        let d = self.decide(&v, now, cost);
        // Written by a reading in or behind an unmarked window: unmarked.
        let next = (d.is_allowed() && cost > 0)
            .then(|| self.pack(v.k, v.prev, v.curr + u64::from(cost), false));
        (next, d)
    }

    /// The state [`step`](Self::step) would leave, without its decision: the same
    /// admission test and the same state, but none of the decision's waits (two or
    /// three 128-bit divisions), which a caller that needs the decision only once the
    /// state is stored computes after. `step(state, now, cost).0`, exactly.
    #[inline(always)]
    pub(crate) fn next_state(&self, state: u64, now: u64, cost: u32) -> Option<u64> {
        let (v, held) = self.view(state, now);
        let budget = u128::from(self.limit) * u128::from(self.period);
        let admitted = cost > 0 && self.weight(v.prev, v.e, v.curr, cost) <= budget;
        // A booking's later window admits nothing before it starts (see `step`).
        (admitted && !held).then(|| self.pack(v.k, v.prev, v.curr + u64::from(cost), false))
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

    /// The denial of a request read at `now`, before the window `v.k` a booking moved
    /// the state into starts. Its reset time is the state's own (the denied request
    /// counts in nothing), measured from the reading, and never before that window
    /// starts: nothing is admitted before then, even when a give-back emptied its counts
    /// (the state is idle from then, see [`idle_at`](Self::idle_at)). Rare: kept off the
    /// hot path.
    ///
    /// A cost of 0 asks for nothing: allowed, with nothing remaining. A cost that
    /// would not fit even once the window starts waits for what `decide` then asks.
    #[cold]
    #[inline(never)]
    fn queued(&self, v: &View, now: u64, cost: u32) -> Decision {
        let start = v.k * self.period;
        // `v.e` is 0: the reading is before the window.
        let reset = (start - now) + self.wait(v, self.limit);
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
        (state >> (2 * self.shift + 1)) * self.period > now
    }

    /// Books `cost` (at least 1) at the earliest time it fits if nothing else arrives
    /// (the exact wait `decide` reports), counting it in that time's window: in the
    /// state's one (later requests then see it, and since the previous window's weight
    /// only decreases they fit no sooner than it), or in a later one, which the state
    /// moves to, marked, and which then admits nothing before it starts (the rest of the
    /// windows it moved from is given up). Strict order of booking. A reading behind an
    /// unmarked state books at the state's time, as `step` decides it: at once when it
    /// fits there. `Err(wait)` beyond `max_wait`.
    pub(crate) fn reserve(
        &self,
        state: u64,
        now: u64,
        cost: u32,
        max_wait: u64,
    ) -> (Option<u64>, Reserved) {
        let (v, held) = self.view(state, now);
        // The state's time (the reading's, unless it is behind the state's window).
        let from = v.k * self.period + v.e;
        let fits_in = self.wait(&v, cost);
        let k = (from + fits_in) / self.period;
        // Waits are measured from the reading: one that fits at the state's time is
        // admitted now, as `step` admits it; any other waits until its time comes.
        let at = if fits_in == 0 && !held {
            now
        } else {
            from + fits_in
        };
        let wait = at - now;
        if let Some(late) = booking::Late::check(wait, max_wait, at, now) {
            return (None, Err(late));
        }
        let (prev, curr) = match k - v.k {
            0 => (v.prev, v.curr + u64::from(cost)),
            1 => (v.curr, u64::from(cost)),
            _ => (0, u64::from(cost)),
        };
        // Moved: marked. Joined the state's window: still marked while it is a
        // booking's later window, cleared once a reading in it writes it.
        let moved = k > v.k;
        let next = self.pack(k, prev, curr, moved || held);
        let decision = self.decide(&self.at(k, at, prev, curr), at, 0);
        let booking = Booking::Window {
            index: k,
            cost,
            // Only the booking that moved the state knows the windows it moved from.
            later: moved.then_some(booking::Later {
                before: state,
                after: next,
            }),
        };
        booking::stored(next, wait, decision, booking)
    }

    /// Gives back a booking of `cost` in window `index` while the state's current
    /// window is still that one, whatever the order of cancels, as the fixed window
    /// does: a window's count is a sum, and every booking in it is given back by taking
    /// its cost from it (a later window means the count was superseded, and nothing is
    /// given back). The one part that needs order is the windows a booking moved the
    /// state from (`later`), whose rest it gave up: while the state is still exactly
    /// `after` (the booking's count alone, the mark still set), a cancel restores
    /// `before`, the key back in its window with every count it had there; nothing was
    /// admitted in between (every request queued behind the booking), so that is the
    /// state without it.
    ///
    /// Otherwise the state keeps its mark, and the rest of the windows it was moved
    /// from stays given up: a marked window whose counts a give-back emptied still
    /// holds readings before it back, and is not idle until it starts (see
    /// [`idle_at`](Self::idle_at)). Clearing the mark instead would decide readings
    /// there at the marked window's start and admit what the move gave up, while the
    /// windows it moved from (which the state no longer counts) keep their admissions.
    pub(crate) fn refund(
        &self,
        state: u64,
        index: u64,
        cost: u32,
        later: Option<booking::Later>,
    ) -> Option<u64> {
        if let Some(before) = later.and_then(|l| l.refund(state)) {
            return Some(before);
        }
        let (stored, prev, curr, marked) = self.unpack(state);
        if stored != index || curr < u64::from(cost) {
            return None;
        }
        Some(self.pack(stored, prev, curr - u64::from(cost), marked))
    }

    /// A charge of `cost` at `now`, counted whatever is left: the weighted count
    /// `prev·(P − e) + curr·P` may pass `limit·P` by at most `max_owed·P` (and the
    /// current count what its field holds);
    /// the excess weighs into the next window as any count does. A state booked into a
    /// later window is charged there (nothing is admitted before it anyway), as is one
    /// a newer reading wrote (the reading's time is the state's, see `view`). The part
    /// past the bound is dropped, and reported.
    pub(crate) fn charge(
        &self,
        state: u64,
        now: u64,
        cost: u32,
        max_owed: u32,
    ) -> (Option<u64>, Reserved) {
        let (v, held) = self.view(state, now);
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
        let next = self.packed(&after, held);
        // Nothing taken writes nothing: decided on the state as it stands.
        let decided = if taken > 0 { next } else { state };
        let booked = booking::Booked {
            wait: 0,
            decision: self.step(decided, now, 1).1,
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
        let (v, held) = self.view(state, now);
        let from_curr = u64::from(cost).min(v.curr);
        let from_prev = (u64::from(cost) - from_curr).min(v.prev);
        let given = from_curr + from_prev;
        let after = View {
            prev: v.prev - from_prev,
            curr: v.curr - from_curr,
            ..v
        };
        // Still marked while the booking's window has not started (see `refund`).
        let next = if given > 0 {
            self.packed(&after, held)
        } else {
            state
        };
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
            index: self.unpack(state).0,
            cost,
            later: None,
        }
    }

    /// Idle when neither count weighs anything now or later, and no booking's window
    /// holds the reading back.
    #[inline]
    pub(crate) fn is_idle(&self, state: u64, now: u64) -> bool {
        let (v, held) = self.view(state, now);
        v.curr == 0 && v.prev == 0 && !held
    }

    /// The time from which `state` is idle: a current count weighs until the end of
    /// the next window, a previous count until the end of the current one; a marked
    /// state with empty counts (a give-back emptied a booking's window, see
    /// [`refund`](Self::refund)) holds readings back until its window starts.
    #[inline]
    pub(crate) fn idle_at(&self, state: u64) -> u64 {
        let (stored, prev, curr, marked) = self.unpack(state);
        let windows = match (prev, curr, marked) {
            (0, 0, false) => return 0,
            (0, 0, true) => 0,
            (_, 0, _) => 1,
            _ => 2,
        };
        (stored + windows).saturating_mul(self.period)
    }

    /// The keyed table's eviction rank of a state live at a reading in window
    /// `current`, `P − rest` into it: what it has used, the weighted count that still
    /// counts then, `w = prev·rest + curr·P` (requests × P ns, under 2⁹⁵), then its idle
    /// stamp, as one number: `w·2 + (curr > 0)` (a live state of the current window
    /// with a current count goes idle a window after one with only a previous count).
    /// A state in a later window (a reservation: it admits nothing before that window
    /// starts, so forgetting it can over-admit a whole quota; or a newer reading's,
    /// whose counts the older readings are decided on) ranks above every state of the
    /// current one, by how many windows ahead (from bit 96), then as above at that
    /// window's start (`rest = P`). The mark says nothing of what was used, so it orders
    /// nothing. `view` without its division, and two 64-bit products.
    #[inline]
    pub(crate) fn evict_rank(&self, state: u64, current: u64, rest: u64) -> u128 {
        let (stored, stored_prev, stored_curr, _) = self.unpack(state);
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
