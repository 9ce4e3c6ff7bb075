//! Fixed window: at most `limit` per window `[k·P, (k+1)·P)`, windows aligned to the
//! clock's zero.

use super::booking::{self, Booked, Booking, Reserved};
use super::{count_bits, index_bits, min_window_period, HORIZON_NS};
use crate::{decision::Decision, error::ConfigError, quota::Algorithm, quota::Quota};
use std::time::Duration;

/// Validated fixed-window parameters.
///
/// State layout, with `c = count_field_bits(P) = min(32, 63 − index_bits(P))`: the
/// count takes every bit the window index and the mark leave over the horizon (at
/// least `count_bits(limit)`, checked at build), so the layout depends on the period
/// alone:
///
/// ```text
///  63                 c+1  c          1   0
/// +---------------------+-------------+---+
/// |  window index k     |   count     | b |
/// +---------------------+-------------+---+
/// ```
///
/// `k = t / P` is the full window index, never reduced modulo anything: `build`
/// refuses quotas for which `HORIZON_NS / P` does not fit in `63 − c` bits, so the
/// index cannot wrap before the horizon and a key idle for any time reads as expired.
/// `0` is window 0 with count 0, unmarked, which decides as a fresh key.
///
/// `b`, the booked-ahead mark, tells the two ways a state can lie in a window later
/// than a reading's apart. Set (`b = 1`): a reservation moved the state into a window
/// later than its own reading's (or a give-back left the rest of the window such a
/// booking moved from given up, see [`refund`](Self::refund)); nothing is admitted
/// before that window starts, so nothing overtakes the booking. Clear: a newer reading
/// wrote it (another thread's, or the clock stepped back), and an older reading is
/// decided at the state's time, in its window with its count (the clock's promise).
/// Every write by a reading in or after the state's window clears the mark: that
/// window has started, so nobody can overtake a booking in it any more. A marked state
/// always counts at least one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FixedWindow {
    period: u64,
    limit: u32,
    shift: u32,
}

/// The parameters as the words `sync::Replaceable` publishes (see `algorithm::window_words`).
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

/// The booked-ahead mark (see [`FixedWindow`]'s layout).
const MARK: u64 = 1;

/// The bits of a fixed window's count field for windows of `period` ns: every bit the
/// full window index and the booked-ahead mark leave, at most 32 (the local layout,
/// which the Redis mode's charge bound mirrors).
pub(crate) const fn count_field_bits(period: u64) -> u32 {
    let rest = 63 - index_bits(period);
    if rest < 32 {
        rest
    } else {
        32
    }
}

impl FixedWindow {
    pub(crate) fn new(quota: Quota, period: u64) -> Result<Self, ConfigError> {
        let limit = quota.limit();
        // The index takes `63 − c` bits: one is the booked-ahead mark.
        let min = min_window_period(63 - count_bits(limit));
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
        let count = count_field_bits(period);
        debug_assert!(count >= count_bits(limit));
        let shift = count + 1;
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

    /// `(window index, count, booked-ahead mark)`.
    #[inline(always)]
    fn unpack(&self, state: u64) -> (u64, u32, bool) {
        (
            state >> self.shift,
            ((state & self.count_mask()) >> 1) as u32,
            state & MARK != 0,
        )
    }

    #[inline(always)]
    fn pack(&self, k: u64, count: u64, marked: bool) -> u64 {
        (k << self.shift) | (count << 1) | u64::from(marked)
    }

    /// The count field's bits in place.
    #[inline(always)]
    fn count_mask(&self) -> u64 {
        (1u64 << self.shift) - 2
    }

    /// `now <= HORIZON_NS`, `cost <= limit`.
    #[inline(always)]
    pub(crate) fn step(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Decision) {
        let (stored, stored_count, marked) = self.unpack(state);
        let current = now / self.period;
        if stored > current && marked {
            // A reservation moved the state to a later window: the rest of this one
            // was given up with it, so nothing is admitted before the later one
            // starts. No aligned window ever holds more than the limit, and requests
            // are served after the bookings made before them.
            return (
                None,
                self.queued(stored, u64::from(stored_count), now, cost),
            );
        }
        // A reading behind an unmarked state (a newer reading wrote it) is decided at
        // the state's time: in its window, with its count.
        let (k, count) = if stored >= current {
            (stored, stored_count)
        } else {
            (current, 0)
        };
        let d = self.decide(k, u64::from(count), now, cost);
        // Written by a reading in or behind an unmarked window: unmarked.
        let next =
            (d.is_allowed() && cost > 0).then(|| self.pack(k, u64::from(count + cost), false));
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
    /// request is admitted before that window). Rare (a pending booking): kept off the
    /// hot path.
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

    /// Books `cost` (at least 1) into the earliest window, from the state's own, where
    /// it fits: a reservation that does not fit the state's window moves the state into
    /// the next one, marked, and requests after it queue behind it (the rest of the
    /// window it moved from is given up: strict order of booking, never more than the
    /// limit per window). A reading behind an unmarked state books at the state's time,
    /// as `step` decides it. `Err(wait)` when the window starts more than `max_wait`
    /// after `now`.
    pub(crate) fn reserve(
        &self,
        state: u64,
        now: u64,
        cost: u32,
        max_wait: u64,
    ) -> (Option<u64>, Reserved) {
        let (stored, stored_count, marked) = self.unpack(state);
        let current = now / self.period;
        // Summed in 64 bits: a limit may be any u32.
        let (k, count, mark) = if stored < current {
            (current, u64::from(cost), false)
        } else if u64::from(stored_count) + u64::from(cost) <= u64::from(self.limit) {
            // Joins the state's window: still marked while it is a booking's later
            // window, cleared once a reading in it writes it.
            (
                stored,
                u64::from(stored_count) + u64::from(cost),
                marked && stored > current,
            )
        } else {
            (stored + 1, u64::from(cost), true)
        };
        // A marked window waits until it starts; any other is the reading's, or the
        // state's later one that the reading is decided at.
        let wait = if mark {
            k.saturating_mul(self.period).saturating_sub(now)
        } else {
            0
        };
        let at = now + wait;
        if let Some(late) = booking::Late::check(wait, max_wait, at, now) {
            return (None, Err(late));
        }
        let next = self.pack(k, count, mark);
        let decision = self.decide(k, count, at, 0);
        let booking = Booking::Window {
            index: k,
            cost,
            // Only the booking that moved the state knows the window it moved from.
            later: (k > stored.max(current)).then_some(booking::Later {
                before: state,
                after: next,
            }),
        };
        booking::stored(next, wait, decision, booking)
    }

    /// Gives back a booking of `cost` in window `index` while the state still counts
    /// that window, whatever the order of cancels: a window's count is a sum, and every
    /// booking in it is given back by taking its cost from it (a later window means the
    /// count was superseded, and nothing is given back). The one part that needs order
    /// is the window a booking moved the state from (`later`), whose rest it gave up:
    /// while the state is still exactly `after` (the booking's count alone, the mark
    /// still set), a cancel restores `before`, the key back in that window with every
    /// count it had there; nothing was admitted in between (every request queued behind
    /// the booking), so that is the state without it.
    ///
    /// A give-back that empties a marked window otherwise never leaves the key held
    /// until a window that counts nothing (such a state would read as idle yet decide
    /// unlike a fresh one): it becomes the window the state was moved from, marked and
    /// counted full, as its rest was given up (see [`given_up`](Self::given_up)).
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
        let (stored, count, marked) = self.unpack(state);
        if stored != index || count < cost {
            return None;
        }
        Some(self.left(stored, count - cost, marked))
    }

    /// The state of window `k` left holding `count` (mark `marked`) by a give-back.
    #[inline]
    fn left(&self, k: u64, count: u32, marked: bool) -> u64 {
        if marked && count == 0 {
            self.given_up(k)
        } else {
            self.pack(k, u64::from(count), marked)
        }
    }

    /// What an emptied marked window `k` leaves: the window `k − 1` it was moved from
    /// (a marked window is only ever reached from the one before it), marked and
    /// holding the limit.
    ///
    /// It admits no more than the limit in any window: window `k` counts nothing and
    /// starts fresh; window `k − 1` admits nothing more, which is what the booking that
    /// moved the state left it (its rest was given up then, and whatever that window
    /// counted is within the limit); the mark keeps readings before `k − 1` from being
    /// admitted into it, as they were not while the state was marked in `k`. Clearing
    /// the mark of `(k, 0)` instead would decide readings in `k − 1` at window `k`'s
    /// time and admit a further limit while window `k − 1`'s own admissions stand. It
    /// is not idle before window `k` starts, and decides as a fresh key from then on,
    /// as the marked `(k, 0)` it replaces would not.
    /// Window 0 has none before it: emptied, it is the fresh state.
    #[cold]
    fn given_up(&self, k: u64) -> u64 {
        match k {
            0 => 0,
            k => self.pack(k - 1, u64::from(self.limit), true),
        }
    }

    /// The largest count a state of this layout holds.
    #[inline]
    fn count_max(&self) -> u64 {
        self.count_mask() >> 1
    }

    /// A charge of `cost` at `now`, counted whatever is left: the window's count may
    /// pass the limit by at most `max_owed` (and what the count field holds), and the
    /// rest of the window denies; the overdraft ends with the window, as every count
    /// does. A state booked into a later window is charged there (nothing is admitted
    /// before it anyway), as is one a newer reading wrote (the reading's time is the
    /// state's). The part past the bound is dropped, and reported.
    pub(crate) fn charge(
        &self,
        state: u64,
        now: u64,
        cost: u32,
        max_owed: u32,
    ) -> (Option<u64>, Reserved) {
        let (stored, stored_count, marked) = self.unpack(state);
        let current = now / self.period;
        let (k, count, mark) = if stored >= current {
            (stored, u64::from(stored_count), marked && stored > current)
        } else {
            (current, 0, false)
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
        let next = self.pack(k, after, mark);
        // Nothing taken writes nothing: decided on the state as it stands.
        let decided = if taken > 0 { next } else { state };
        let booked = Booked {
            wait: 0,
            decision: self.step(decided, now, 1).1,
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
    /// over counts nothing any more), never below an empty count (an emptied marked
    /// window leaves the one it was moved from given up, as [`refund`](Self::refund)).
    pub(crate) fn give_back(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Reserved) {
        let (stored, count, marked) = self.unpack(state);
        let live = stored >= now / self.period;
        let given = if live { cost.min(count) } else { 0 };
        let next = if given > 0 {
            self.left(stored, count - given, marked)
        } else {
            state
        };
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
        let (stored, count, _) = self.unpack(state);
        count == 0 || now / self.period > stored
    }

    /// The time from which `state` is idle: the end of its window (0 when empty).
    #[inline]
    pub(crate) fn idle_at(&self, state: u64) -> u64 {
        let (stored, count, _) = self.unpack(state);
        if count == 0 {
            0
        } else {
            (stored + 1).saturating_mul(self.period)
        }
    }

    /// The keyed table's eviction rank of a state live at `now` (its window is the
    /// current one or later, its count not 0): what it has used, then its idle stamp.
    /// That is its word without the mark, `(window, count)`: within the current window
    /// it orders by the count (every entry there goes idle at the window's end), and a
    /// state in a later window (a reservation: it admits nothing before that window
    /// starts, so forgetting it can over-admit a whole quota; or a newer reading's,
    /// whose count the older readings are decided on) ranks above every state of the
    /// current one. The mark says nothing of what was used (a marked window's rank is
    /// already its window's), so it orders nothing, not even ties. One shift per entry.
    #[inline]
    pub(crate) fn evict_rank(&self, state: u64) -> u64 {
        state >> 1
    }
}
