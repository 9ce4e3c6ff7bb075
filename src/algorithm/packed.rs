//! The packed algorithms' one seam: [`PackedAlgorithm`], what a state held in one
//! 64-bit word needs of its algorithm (the step, the booking and its refund, the idle
//! stamp, the eviction rank). The keyed table is generic over it (`PackedTable<A>`,
//! the algorithm chosen once, at build), so its compare-and-swap loop holds no match;
//! [`PackedParams`], the run-time choice, dispatches to it where one limiter may hold
//! any of them (`RateLimiter`'s cell, the builders).

use super::booking::{Book, Booking, Reserved};
use super::fixed_window::FixedWindow;
use super::gcra::Gcra;
use super::sliding_window::SlidingWindow;
use crate::decision::Decision;
use crate::sync::Words;

/// One packed algorithm's step, split for the keyed table's fast path: the state a
/// request leaves (computed in the compare-and-swap loop) and the decision (computed
/// once, after, from the state the winning compare-and-swap replaced). Both are
/// [`both`](Self::both)'s halves, exactly; forced inline, so that no 40-byte decision
/// travels through memory between a call and its caller.
pub(crate) trait Step: Copy {
    /// The algorithm's `step(state, now, cost)`: the new state and the decision.
    fn both(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Decision);
    /// `both(state, now, cost).0`.
    #[inline(always)]
    fn next_state(&self, state: u64, now: u64, cost: u32) -> Option<u64> {
        self.both(state, now, cost).0
    }
    /// `both(state, now, cost).1`.
    #[inline(always)]
    fn decision(&self, state: u64, now: u64, cost: u32) -> Decision {
        self.both(state, now, cost).1
    }
    /// Whether `state` has moved into a window that starts after the reading `now`
    /// (another request read a later time first, or a booking went there). A denial
    /// of such a reading may be due to its age alone (a thread pre-empted between its
    /// reading and its decision at a window boundary): the limiters read the clock
    /// once more before returning it. Never for the buckets, whose stale readings
    /// are decided at the state's time.
    #[inline(always)]
    fn ahead(&self, _state: u64, _now: u64) -> bool {
        false
    }
    /// The bucket, in a table that may hold states of several rate classes (see
    /// `table::packed::rates`); `None` otherwise (the windows, whose states count
    /// requests and carry over between quotas as they are, and a bucket of one rate).
    #[inline(always)]
    fn classed(&self) -> Option<Gcra> {
        None
    }
    /// The rate class a bucket's states must carry to be decided on the fast path
    /// (its parameters' class; 0 in a table of one rate); `None` for the windows.
    #[inline(always)]
    fn class(&self) -> Option<u8> {
        None
    }
}

/// What the eviction ranking of one scan reads once, at the scan's reading: the
/// sliding window's current window `now / P` and what is left of it (zero for the
/// others).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Reading {
    current: u64,
    rest: u64,
}

/// A packed algorithm's parameters, validated and precomputed: everything the keyed
/// table and the cell ask of one algorithm, implemented once per algorithm.
pub(crate) trait PackedAlgorithm:
    Step + Words + std::fmt::Debug + PartialEq + Send + Sync + 'static
{
    /// Books `cost` (at most the burst) at the earliest time it may proceed, if
    /// that is at most `max_wait` (`<= MAX_WAIT_NS`) after `now`; see each
    /// algorithm's `reserve` for the order of service.
    fn reserve(&self, state: u64, now: u64, cost: u32, max_wait: u64) -> (Option<u64>, Reserved);
    /// Charges `cost` at `now` whatever is left, the key owing at most `max_owed`
    /// requests past its quota after it (see each algorithm's `charge`).
    fn charge(&self, state: u64, now: u64, cost: u32, max_owed: u32) -> (Option<u64>, Reserved);
    /// Gives `cost` back to `state` at `now`, never below an empty state (see each
    /// algorithm's `give_back`).
    fn give_back(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Reserved);
    /// A reservation, a charge or a give-back of `cost`, as `how` says.
    #[inline]
    fn book(&self, state: u64, now: u64, cost: u32, how: Book) -> (Option<u64>, Reserved) {
        match how {
            Book::Wait(max_wait) => self.reserve(state, now, cost, max_wait),
            Book::Charge(max_owed) => self.charge(state, now, cost, max_owed),
            Book::GiveBack => self.give_back(state, now, cost),
        }
    }
    /// What an admission of `cost` that left `state` booked (for a roll-back).
    fn booking(&self, state: u64, cost: u32) -> Booking;
    /// The state with `booking` given back at `now`: by a cancel, as far as no later
    /// booking depends on it; by a roll-back (`roll_back`: the request never
    /// proceeded), exactly what the booking took (see each algorithm's `refund`).
    /// `None` when nothing can be given back.
    fn refund(&self, state: u64, booking: &Booking, now: u64, roll_back: bool) -> Option<u64>;
    /// Whether `state` says nothing any more at `now`: it decides exactly as the
    /// fresh state `0` would, now and at every later time.
    fn is_idle(&self, state: u64, now: u64) -> bool;
    /// The time (engine nanoseconds) from which `state` is idle, in O(1) from the
    /// state alone: `is_idle(state, now)` iff `now >= idle_at(state)`.
    fn idle_at(&self, state: u64) -> u64;
    /// What the eviction ranks of one scan at `now` share (see [`rank`](Self::rank)).
    #[inline]
    fn reading(&self, _now: u64) -> Reading {
        Reading::default()
    }
    /// The idle stamp of `state` and, for a state live at the reading, its eviction
    /// rank: one number ordered as (what the state has used, its idle stamp), read off
    /// the state in O(1) with no step (each algorithm's `evict_rank`). Comparable only
    /// within one table at one reading.
    fn rank(&self, state: u64, reading: &Reading) -> (u64, u128);
    /// The quota's limit (what decisions report as `limit()`).
    fn limit(&self) -> u32;
    /// The burst: the largest cost ever admitted at once (the limit for a window).
    fn burst(&self) -> u32;
    /// The bucket's parameters (`None` for a window algorithm): what a keyed table
    /// needs to carry a state written under another interval over (see
    /// `table::packed::rates`).
    #[inline(always)]
    fn gcra(&self) -> Option<Gcra> {
        None
    }
    /// The bucket's parameters, to give them a rate class (`None` for a window).
    #[inline]
    fn gcra_mut(&mut self) -> Option<&mut Gcra> {
        None
    }
    /// These parameters, as the run-time choice.
    fn into_params(self) -> PackedParams;
    /// The parameters of this algorithm in `p` (`None` for another algorithm's).
    fn from_params(p: PackedParams) -> Option<Self>;
    /// The parameters of this algorithm in `p`, of any kind (`None` for another
    /// algorithm's).
    #[inline]
    fn of(p: super::Params) -> Option<Self> {
        match p {
            super::Params::Packed(p) => Self::from_params(p),
            super::Params::Log(_) => None,
        }
    }
}

/// The bucket in a table of one rate ever: no class to compare on a hit.
impl Step for Gcra {
    #[inline(always)]
    fn both(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Decision) {
        self.step(state, now, cost)
    }
    /// A bucket of one rate is of class 0 (the registry gives tier 0's rate class 0,
    /// and a second rate makes every tier's parameters `Classed`), which is never
    /// retired: a request that read it before the table's first rate change still
    /// prices a state of class 0 rightly, and leaves any other class's state to the
    /// slow path.
    #[inline(always)]
    fn class(&self) -> Option<u8> {
        Some(0)
    }
}

/// The bucket in a table that may hold states of several rate classes: a hit whose
/// state another class wrote goes to the slow path, which converts it.
#[derive(Clone, Copy)]
pub(crate) struct Classed(pub(crate) Gcra);

impl Step for Classed {
    #[inline(always)]
    fn both(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Decision) {
        self.0.step(state, now, cost)
    }
    #[inline(always)]
    fn class(&self) -> Option<u8> {
        Some(self.0.class())
    }
    #[inline(always)]
    fn classed(&self) -> Option<Gcra> {
        Some(self.0)
    }
}

impl Step for FixedWindow {
    #[inline(always)]
    fn both(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Decision) {
        self.step(state, now, cost)
    }
    #[inline(always)]
    fn ahead(&self, state: u64, now: u64) -> bool {
        FixedWindow::ahead(self, state, now)
    }
}

impl Step for SlidingWindow {
    #[inline(always)]
    fn both(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Decision) {
        self.step(state, now, cost)
    }
    /// Without the decision's divisions (see `SlidingWindow::next_state`).
    #[inline(always)]
    fn next_state(&self, state: u64, now: u64, cost: u32) -> Option<u64> {
        SlidingWindow::next_state(self, state, now, cost)
    }
    #[inline(always)]
    fn ahead(&self, state: u64, now: u64) -> bool {
        SlidingWindow::ahead(self, state, now)
    }
}

impl PackedAlgorithm for Gcra {
    #[inline]
    fn reserve(&self, state: u64, now: u64, cost: u32, max_wait: u64) -> (Option<u64>, Reserved) {
        Gcra::reserve(self, state, now, cost, max_wait)
    }
    #[inline]
    fn charge(&self, state: u64, now: u64, cost: u32, max_owed: u32) -> (Option<u64>, Reserved) {
        Gcra::charge(self, state, now, cost, max_owed)
    }
    #[inline]
    fn give_back(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Reserved) {
        Gcra::give_back(self, state, now, cost)
    }
    #[inline]
    fn booking(&self, state: u64, cost: u32) -> Booking {
        Gcra::booking(self, state, cost)
    }
    #[inline]
    fn refund(&self, state: u64, booking: &Booking, now: u64, roll_back: bool) -> Option<u64> {
        match *booking {
            Booking::Gcra { tat, weight, acts } => {
                Gcra::refund(self, state, (tat, weight, acts), now, roll_back)
            }
            _ => None,
        }
    }
    #[inline]
    fn is_idle(&self, state: u64, now: u64) -> bool {
        Gcra::is_idle(self, state, now)
    }
    #[inline(always)]
    fn idle_at(&self, state: u64) -> u64 {
        Gcra::idle_at(self, state)
    }
    #[inline(always)]
    fn rank(&self, state: u64, _reading: &Reading) -> (u64, u128) {
        (
            Gcra::idle_at(self, state),
            u128::from(self.evict_rank(state)),
        )
    }
    #[inline]
    fn limit(&self) -> u32 {
        Gcra::limit(self)
    }
    #[inline]
    fn burst(&self) -> u32 {
        Gcra::burst(self)
    }
    #[inline(always)]
    fn gcra(&self) -> Option<Gcra> {
        Some(*self)
    }
    #[inline]
    fn gcra_mut(&mut self) -> Option<&mut Gcra> {
        Some(self)
    }
    fn into_params(self) -> PackedParams {
        PackedParams::Gcra(self)
    }
    fn from_params(p: PackedParams) -> Option<Self> {
        match p {
            PackedParams::Gcra(g) => Some(g),
            _ => None,
        }
    }
}

impl PackedAlgorithm for FixedWindow {
    #[inline]
    fn reserve(&self, state: u64, now: u64, cost: u32, max_wait: u64) -> (Option<u64>, Reserved) {
        FixedWindow::reserve(self, state, now, cost, max_wait)
    }
    #[inline]
    fn charge(&self, state: u64, now: u64, cost: u32, max_owed: u32) -> (Option<u64>, Reserved) {
        FixedWindow::charge(self, state, now, cost, max_owed)
    }
    #[inline]
    fn give_back(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Reserved) {
        FixedWindow::give_back(self, state, now, cost)
    }
    #[inline]
    fn booking(&self, state: u64, cost: u32) -> Booking {
        FixedWindow::booking(self, state, cost)
    }
    #[inline]
    fn refund(&self, state: u64, booking: &Booking, _now: u64, _roll_back: bool) -> Option<u64> {
        match *booking {
            Booking::Window { index, cost, later } => {
                FixedWindow::refund(self, state, index, cost, later)
            }
            _ => None,
        }
    }
    #[inline]
    fn is_idle(&self, state: u64, now: u64) -> bool {
        FixedWindow::is_idle(self, state, now)
    }
    #[inline(always)]
    fn idle_at(&self, state: u64) -> u64 {
        FixedWindow::idle_at(self, state)
    }
    #[inline(always)]
    fn rank(&self, state: u64, _reading: &Reading) -> (u64, u128) {
        (
            FixedWindow::idle_at(self, state),
            u128::from(self.evict_rank(state)),
        )
    }
    #[inline]
    fn limit(&self) -> u32 {
        FixedWindow::limit(self)
    }
    #[inline]
    fn burst(&self) -> u32 {
        FixedWindow::limit(self)
    }
    fn into_params(self) -> PackedParams {
        PackedParams::Fixed(self)
    }
    fn from_params(p: PackedParams) -> Option<Self> {
        match p {
            PackedParams::Fixed(f) => Some(f),
            _ => None,
        }
    }
}

impl PackedAlgorithm for SlidingWindow {
    #[inline]
    fn reserve(&self, state: u64, now: u64, cost: u32, max_wait: u64) -> (Option<u64>, Reserved) {
        SlidingWindow::reserve(self, state, now, cost, max_wait)
    }
    #[inline]
    fn charge(&self, state: u64, now: u64, cost: u32, max_owed: u32) -> (Option<u64>, Reserved) {
        SlidingWindow::charge(self, state, now, cost, max_owed)
    }
    #[inline]
    fn give_back(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Reserved) {
        SlidingWindow::give_back(self, state, now, cost)
    }
    #[inline]
    fn booking(&self, state: u64, cost: u32) -> Booking {
        SlidingWindow::booking(self, state, cost)
    }
    #[inline]
    fn refund(&self, state: u64, booking: &Booking, _now: u64, _roll_back: bool) -> Option<u64> {
        match *booking {
            Booking::Window { index, cost, later } => {
                SlidingWindow::refund(self, state, index, cost, later)
            }
            _ => None,
        }
    }
    #[inline]
    fn is_idle(&self, state: u64, now: u64) -> bool {
        SlidingWindow::is_idle(self, state, now)
    }
    #[inline(always)]
    fn idle_at(&self, state: u64) -> u64 {
        SlidingWindow::idle_at(self, state)
    }
    /// The reading's window, computed once for the whole scan.
    #[inline]
    fn reading(&self, now: u64) -> Reading {
        let current = now / self.period();
        Reading {
            current,
            rest: self.period() - (now - current * self.period()),
        }
    }
    #[inline(always)]
    fn rank(&self, state: u64, reading: &Reading) -> (u64, u128) {
        (
            SlidingWindow::idle_at(self, state),
            self.evict_rank(state, reading.current, reading.rest),
        )
    }
    #[inline]
    fn limit(&self) -> u32 {
        SlidingWindow::limit(self)
    }
    #[inline]
    fn burst(&self) -> u32 {
        SlidingWindow::limit(self)
    }
    fn into_params(self) -> PackedParams {
        PackedParams::Sliding(self)
    }
    fn from_params(p: PackedParams) -> Option<Self> {
        match p {
            PackedParams::Sliding(s) => Some(s),
            _ => None,
        }
    }
}

/// Parameters of a packed algorithm chosen at run time: what `Params::new` builds,
/// before the builders pick the store of that algorithm ([`PackedAlgorithm::from_params`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PackedParams {
    Gcra(Gcra),
    Fixed(FixedWindow),
    Sliding(SlidingWindow),
}

/// `$body` with `$p` bound to the algorithm's own parameters.
#[cfg(test)]
macro_rules! each {
    ($params:expr, $p:ident => $body:expr) => {
        match $params {
            PackedParams::Gcra($p) => $body,
            PackedParams::Fixed($p) => $body,
            PackedParams::Sliding($p) => $body,
        }
    };
}

/// The run-time choice's dispatch to its algorithm, for the algorithm tests (which run
/// every algorithm through one value); the limiters call [`PackedAlgorithm`] directly.
#[cfg(test)]
impl PackedParams {
    /// One decision: the new state (`None` to leave it) and the decision.
    ///
    /// `inline(always)` here and on each algorithm's `step`/`decide`: inside the keyed
    /// table's large `decide` a plain `#[inline]` is not taken, the `Decision` then
    /// travels through memory (a store and a reload on every decision).
    #[inline(always)]
    pub(crate) fn step(&self, state: u64, now: u64, cost: u32) -> (Option<u64>, Decision) {
        each!(self, p => p.both(state, now, cost))
    }

    /// `step(state, now, cost).0`: the new state alone (see [`Step::next_state`]).
    pub(crate) fn next_state(&self, state: u64, now: u64, cost: u32) -> Option<u64> {
        each!(self, p => p.next_state(state, now, cost))
    }

    /// [`PackedAlgorithm::book`].
    #[inline]
    pub(crate) fn book(
        &self,
        state: u64,
        now: u64,
        cost: u32,
        how: Book,
    ) -> (Option<u64>, Reserved) {
        each!(self, p => PackedAlgorithm::book(p, state, now, cost, how))
    }

    /// [`PackedAlgorithm::is_idle`].
    pub(crate) fn is_idle(&self, state: u64, now: u64) -> bool {
        each!(self, p => PackedAlgorithm::is_idle(p, state, now))
    }

    /// [`PackedAlgorithm::idle_at`].
    pub(crate) fn idle_at(&self, state: u64) -> u64 {
        each!(self, p => PackedAlgorithm::idle_at(p, state))
    }

    /// The eviction ranking at the reading `now` (see [`Ranking::of`]).
    pub(crate) fn ranking(&self, now: u64) -> Ranking {
        Ranking {
            params: *self,
            reading: each!(self, p => p.reading(now)),
        }
    }

    /// [`PackedAlgorithm::burst`].
    #[inline]
    pub(crate) fn burst(&self) -> u32 {
        each!(self, p => PackedAlgorithm::burst(p))
    }
}

/// The eviction ranks of one scan at one reading (tests read them through the
/// run-time choice; the table calls [`PackedAlgorithm::rank`] directly).
#[cfg(test)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ranking {
    params: PackedParams,
    reading: Reading,
}

#[cfg(test)]
impl Ranking {
    /// [`PackedAlgorithm::rank`] at this ranking's reading.
    pub(crate) fn of(&self, state: u64) -> (u64, u128) {
        each!(self.params, p => p.rank(state, &self.reading))
    }
}
