//! The single-key limiter's cells: the one compare-and-swap seam over a single packed
//! word (`load → step → compare_exchange`, retried), which every packed algorithm plugs
//! into, and the locked ring of the sliding log.
//!
//! Not the crate's only `compare_exchange`: the keyed table's slot words (fingerprint
//! and state together) are swapped in `table::packed` (and re-classified in
//! `table::packed::rates`), the parameter seqlock's version in `sync`, and the manual clock's
//! reading in `clock`.

use crate::algorithm::booking::{Book, Booking, Reserved};
use crate::algorithm::packed::PackedAlgorithm;
use crate::algorithm::sliding_log::{Ring, SlidingLog};
use crate::decision::Decision;
use crate::sync::{lock, AtomicU64, Mutex, Ordering};

/// A packed algorithm's state in one atomic word.
///
/// Every decision is `load → step → compare_exchange`, retried on contention: the
/// decision returned is the one whose state transition won, so concurrent callers are
/// linearized exactly as if they had been served one at a time.
#[derive(Debug, Default)]
pub(crate) struct PackedCell {
    state: AtomicU64,
}

impl PackedCell {
    /// A cell in the fresh state `0`.
    pub(crate) fn new() -> Self {
        PackedCell {
            state: AtomicU64::new(0),
        }
    }

    /// Runs `f` on the current state until its replacement (if any) is installed
    /// atomically. `f` returns `None` to leave the state untouched (no write at all).
    ///
    /// This is the one seam every algorithm plugs into (governor's
    /// `measure_and_replace`). `f` may run several times under contention, so it must
    /// be a pure function of the state it is given.
    #[inline]
    pub(crate) fn update<R>(&self, f: impl FnMut(u64) -> (Option<u64>, R)) -> R {
        let Some(result) = self.update_while(&(), f) else {
            unreachable!("`()` is never stale")
        };
        result
    }

    /// One decision of `params` at `now` for `cost`; `None` when `stale` says the
    /// parameters changed after they were read (see [`Stale`]): nothing was written,
    /// and the caller decides again with the new ones.
    ///
    /// The loop computes only the next state; the decision is computed once, from the
    /// state the winning compare-and-swap replaced (the step is pure, so it is the
    /// decision that state gave). Carrying the 40-byte decision through the loop made
    /// the compiler keep it in memory and read it back at other widths, which stalled
    /// store forwarding on every decision.
    ///
    /// A denial in a window later than the reading's (see `Step::ahead`) is decided
    /// once more at a fresh reading of `clock`.
    #[inline]
    pub(crate) fn decide<A: PackedAlgorithm>(
        &self,
        params: A,
        now: u64,
        cost: u32,
        clock: impl Fn() -> u64,
        stale: impl Stale,
    ) -> Option<Decision> {
        let (current, d) = self.decide_at(params, now, cost, &stale)?;
        if !d.is_allowed() && params.ahead(current, now) {
            return self.decide_again(params, clock().max(now), cost, &stale);
        }
        Some(d)
    }

    /// [`decide`](Self::decide) at one reading: the state the decision was made on,
    /// and the decision.
    #[inline(always)]
    fn decide_at<A: PackedAlgorithm>(
        &self,
        params: A,
        now: u64,
        cost: u32,
        stale: &impl Stale,
    ) -> Option<(u64, Decision)> {
        let mut current = self.state.load(Ordering::Acquire);
        loop {
            if stale.stale() {
                return None;
            }
            let Some(next) = params.both(current, now, cost).0 else {
                break;
            };
            match self.state.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(actual) => current = actual,
            }
        }
        Some((current, params.both(current, now, cost).1))
    }

    /// The second decision of a stale denial, off the hot path.
    #[cold]
    #[inline(never)]
    fn decide_again<A: PackedAlgorithm>(
        &self,
        params: A,
        now: u64,
        cost: u32,
        stale: &impl Stale,
    ) -> Option<Decision> {
        Some(self.decide_at(params, now, cost, stale)?.1)
    }

    /// The decision for `cost` at `now`, writing nothing.
    #[inline]
    pub(crate) fn peek<A: PackedAlgorithm>(&self, params: &A, now: u64, cost: u32) -> Decision {
        params.both(self.state.load(Ordering::Acquire), now, cost).1
    }

    /// [`update`](Self::update), given up (`None`, nothing written) as soon as
    /// `stale` says the parameters `f` was made with changed.
    #[inline]
    fn update_while<R>(
        &self,
        stale: &impl Stale,
        mut f: impl FnMut(u64) -> (Option<u64>, R),
    ) -> Option<R> {
        let mut current = self.state.load(Ordering::Acquire);
        loop {
            if stale.stale() {
                return None;
            }
            let (next, result) = f(current);
            let Some(next) = next else {
                return Some(result);
            };
            match self.state.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(result),
                Err(actual) => current = actual,
            }
        }
    }

    /// One decision, with what it booked when admitted (for a roll-back); `None` as
    /// [`decide`](Self::decide). A denial in a window later than the reading's is
    /// decided once more at a fresh reading of `clock`.
    pub(crate) fn decide_booked<A: PackedAlgorithm>(
        &self,
        params: &A,
        now: u64,
        cost: u32,
        clock: impl Fn() -> u64,
        stale: impl Stale,
    ) -> Option<(Decision, Booking)> {
        // As `decide`: only the next state inside the loop, the rest once after.
        let params = *params;
        let mut now = now;
        let mut again = true;
        loop {
            let before = self.update_while(&stale, move |state| {
                (params.both(state, now, cost).0, state)
            })?;
            let (next, d) = params.both(before, now, cost);
            if again && !d.is_allowed() && params.ahead(before, now) {
                again = false;
                now = clock().max(now);
                continue;
            }
            let booking = next.map_or(Booking::Nothing, |n| params.booking(n, cost));
            return Some((d, booking));
        }
    }

    /// Books `cost` at `now` as `how` says (within a wait, a charge, a give-back), in
    /// one compare-and-swap; `None` as [`decide`](Self::decide).
    pub(crate) fn reserve<A: PackedAlgorithm>(
        &self,
        params: &A,
        now: u64,
        cost: u32,
        how: Book,
        stale: impl Stale,
    ) -> Option<Reserved> {
        self.update_while(&stale, |state| params.book(state, now, cost, how))
    }

    /// Gives `booking` back at `now` (see `PackedAlgorithm::refund`: a cancel, or a
    /// roll-back when `roll_back`); `None` as [`decide`](Self::decide).
    pub(crate) fn refund<A: PackedAlgorithm>(
        &self,
        params: &A,
        booking: &Booking,
        now: u64,
        roll_back: bool,
        stale: impl Stale,
    ) -> Option<()> {
        self.update_while(&stale, |state| {
            (params.refund(state, booking, now, roll_back), ())
        })
    }
}

/// Whether the parameters a decision read are still the ones its state is written
/// for, asked after every read of the state (the first load and each failed
/// compare-and-swap).
///
/// A bucket's state is a time counted in its quota's interval, and `set_quota`
/// converts it to the new interval (`Gcra::convert`) while readers of the parameters
/// wait (`Replaceable::store_with`). A decision that read the old parameters and then the
/// converted state would price its request in the wrong interval; it finds its
/// parameters stale and starts over with the new ones. A decision that read the state
/// before the conversion either wins its compare-and-swap before it (and is converted
/// with the rest) or loses it and is asked again.
pub(crate) trait Stale {
    /// `true` when the parameters changed since they were read.
    fn stale(&self) -> bool;
}

/// Parameters that never need converting (the windows): never stale.
impl Stale for () {
    #[inline(always)]
    fn stale(&self) -> bool {
        false
    }
}

/// The sliding log's ring behind a lock: the one algorithm whose state does not fit a
/// word. Its memory is allocated once, when the cell is made.
#[derive(Debug)]
pub(crate) struct LogCell {
    ring: Mutex<Ring>,
}

impl LogCell {
    pub(crate) fn new(params: &SlidingLog) -> Self {
        LogCell {
            ring: Mutex::new(Ring::new(params)),
        }
    }

    /// One decision of `params` at `now` for `cost`.
    pub(crate) fn decide(&self, params: &SlidingLog, now: u64, cost: u32) -> Decision {
        params.step(&mut lock(&self.ring), now, cost)
    }

    /// The decision for `cost` (at least 1) at `now`, logging nothing.
    pub(crate) fn peek(&self, params: &SlidingLog, now: u64, cost: u32) -> Decision {
        params.peek(&lock(&self.ring), now, cost)
    }

    /// One decision, with what it booked when admitted (for a roll-back).
    pub(crate) fn decide_booked(
        &self,
        params: &SlidingLog,
        now: u64,
        cost: u32,
    ) -> (Decision, Booking) {
        params.step_booked(&mut lock(&self.ring), now, cost)
    }

    /// Books `cost` entries at `now` as `how` says.
    pub(crate) fn reserve(&self, params: &SlidingLog, now: u64, cost: u32, how: Book) -> Reserved {
        params.book(&mut lock(&self.ring), now, cost, how)
    }

    /// Gives `booking` back while no later booking depends on it.
    pub(crate) fn refund(&self, params: &SlidingLog, booking: &Booking, now: u64) {
        params.refund(&mut lock(&self.ring), booking, now);
    }
}
