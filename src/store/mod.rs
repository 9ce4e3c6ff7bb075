//! The one seam under every limiter's verbs: [`Store`], where a limiter keeps its
//! state (a single cell for `RateLimiter`, a keyed table for `KeyedRateLimiter`) and
//! what the verbs need of it: decide, peek, book (to roll back exactly), reserve,
//! refund, change a tier's quota. The verbs are written once over it (`verbs`); each
//! kind of store is written once per slot kind (`cell` for `RateLimiter`'s, the keyed
//! tables in `keyed::packed` and `keyed::log`).
//!
//! [`ByAlgorithm`] holds the store of the algorithm chosen at build, one variant per
//! kind of state, matched once per verb by [`by_algorithm!`]: everything under the
//! match is monomorphic (the compare-and-swap loops hold no match on the algorithm).

pub(crate) mod cell;
pub(crate) mod verbs;

use crate::algorithm::booking::Origin;
use crate::algorithm::booking::{Book, Booked, Booking, Late};
use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::sliding_window::SlidingWindow;
use crate::algorithm::Params;
use crate::decision::Decision;
use crate::error::{ConfigError, InsufficientCapacity};
use crate::table::counters::Totals;
use crate::table::log::LogTable;
use crate::table::packed::{Applied, PackedTable};

/// A store of the kind each algorithm needs (chosen once, at build): the token and
/// leaky buckets' (`G`), the fixed window's (`F`), the sliding window's (`S`), the
/// sliding log's (`L`).
pub(crate) enum ByAlgorithm<G, F, S, L> {
    Gcra(G),
    Fixed(F),
    Sliding(S),
    Log(L),
}

/// A keyed limiter's table.
pub(crate) type Table =
    ByAlgorithm<PackedTable<Gcra>, PackedTable<FixedWindow>, PackedTable<SlidingWindow>, LogTable>;

/// `$body` with `$s` bound to the store, whatever its kind: one match per verb, each
/// arm its own monomorphic copy of `$body`.
macro_rules! by_algorithm {
    ($store:expr, $s:ident => $body:expr) => {
        match $store {
            $crate::store::ByAlgorithm::Gcra($s) => $body,
            $crate::store::ByAlgorithm::Fixed($s) => $body,
            $crate::store::ByAlgorithm::Sliding($s) => $body,
            $crate::store::ByAlgorithm::Log($s) => $body,
        }
    };
}
pub(crate) use by_algorithm;

/// What one request's booking returns: where it took effect (the decision and what
/// it booked) and the state it was booked on.
pub(crate) type BookingOutcome = (Applied<(Decision, Booking)>, Origin);

/// What a reservation returns: where it took effect (the booking and the reading, or
/// the wait that exceeded the bound) and the state it was booked on.
pub(crate) type ReservationOutcome = (Applied<Result<(Booked, u64), Late>>, Origin);

/// What the verbs need of a limiter's state: each verb written once over it (see
/// `verbs`). `h` is the key's hash (ignored by a single cell).
///
/// Every method that takes `now` reads it at most once per attempt (a store re-reads
/// it when a request starts over, or decides a stale window denial again); `params`
/// are one tier's, read once by the caller ([`params`](Self::params)) so that the cost
/// checked is the one decided with.
///
/// Parameters can go stale under a request: a single cell's bucket racing `set_quota`
/// (see `cell::Stale`), a keyed table whose rate class they carry was retired and
/// given out again (see `table::packed::rates`). The store then writes nothing with
/// them, reads tier `tier`'s parameters again, checks the cost against their burst
/// (the `Err` of `decide`, `book` and `reserve`: the request no longer fits the quota
/// now in force) and starts over, all out of the hot path.
pub(crate) trait Store {
    /// One tier's parameters.
    type Params: Copy;

    /// Tier `tier`'s parameters now (`tier` < the number of tiers).
    fn params(&self, tier: usize) -> Self::Params;

    /// The largest cost `p` ever admits at once (the burst, or the limit).
    fn burst(&self, p: &Self::Params) -> u32;

    /// One decision of `cost` (at most `p`'s burst) for the key hashed to `h`, counted
    /// (see [`count`](Self::count)); `None` when `cost` no longer fits the parameters
    /// read again (the `Err` above: an `Option`, not a `Result`, so that the decision
    /// is returned in place on the hot path).
    fn decide(
        &self,
        h: u64,
        tier: usize,
        now: impl Fn() -> u64,
        cost: u32,
        p: Self::Params,
    ) -> Option<Decision>;

    /// The decision of `cost` for the key hashed to `h` at `now`, writing nothing.
    fn peek(&self, h: u64, now: u64, cost: u32, p: Self::Params) -> Decision;

    /// Admits `n` now or not (all or nothing), booking what it took so that it can be
    /// rolled back exactly; inserts a missing key only when `n > 0`. Not counted.
    fn book(
        &self,
        h: u64,
        tier: usize,
        now: impl Fn() -> u64,
        n: u32,
        p: Self::Params,
    ) -> Result<BookingOutcome, InsufficientCapacity>;

    /// Books `n` as `how` says: at the earliest time it may proceed, if that is at most
    /// `Book::Wait` ns after the reading; a charge; a give-back (which inserts no
    /// missing key).
    #[allow(clippy::too_many_arguments)]
    fn reserve(
        &self,
        h: u64,
        tier: usize,
        now: impl Fn() -> u64,
        n: u32,
        how: Book,
        p: Self::Params,
    ) -> Result<ReservationOutcome, InsufficientCapacity>;

    /// Gives `booking` back at `now` (a cancel, or a roll-back when `always`), only to
    /// the state `origin` identifies.
    fn refund(&self, h: u64, booking: &Booking, origin: Origin, now: u64, always: bool);

    /// Replaces tier `tier`'s parameters with `next` (already checked to be this
    /// algorithm's), carrying what each key used over at `now`.
    ///
    /// # Errors
    ///
    /// What `next` cannot become in this table (a period change of a window, a log
    /// beyond its ring, a tier period, too many bucket rates).
    fn set_params(
        &self,
        tier: usize,
        next: Params,
        tiers: usize,
        algorithm: crate::quota::Algorithm,
        now: impl Fn() -> u64,
    ) -> Result<(), ConfigError>;

    /// Counts a decision of `cost` in the statistics (a keyed table's; a cell keeps
    /// none).
    fn count(&self, cost: u32, d: &Decision);
}

/// What a keyed limiter needs of its table beyond the verbs: resets, occupancy,
/// counters and sizes.
pub(crate) trait KeyedStore: Store {
    /// Gives the key hashed to `h` a fresh state of a new generation; `false` when the
    /// table does not hold it.
    fn reset(&self, h: u64) -> bool;

    /// `(occupied, active)` slots at `now`.
    fn occupancy(&self, now: u64) -> (u64, u64);

    /// The counters summed.
    fn totals(&self) -> Totals;

    /// Bytes of the table.
    fn memory_bytes(&self) -> usize;

    /// Bytes of one slot's ring (0 where the state is a word).
    fn ring_bytes(&self) -> usize;

    /// Whether every decision is lock-free on this machine.
    fn is_lock_free(&self) -> bool;

    /// Whether the table's largest array was advised onto huge pages.
    fn huge_pages(&self) -> bool;
}
