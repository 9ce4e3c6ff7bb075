//! The keyed limiter's seam over its table: [`KeyedTable`], what every verb needs of a
//! table (decide, peek, book, reserve, refund, reset, change a tier's quota), written
//! once per slot kind (`packed.rs` for `PackedTable<A>`, `log.rs` for the sliding
//! log's table); and [`Table`], the kind chosen at build, matched once per verb by
//! [`with_table!`] so that everything under it is monomorphic.

use crate::algorithm::booking::{Booked, Booking};
use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::sliding_window::SlidingWindow;
use crate::algorithm::Params;
use crate::decision::Decision;
use crate::error::ConfigError;
use crate::reservation::Origin;
use crate::table::counters::{Stripes, Totals};
use crate::table::log::LogTable;
use crate::table::packed::{PackedTable, Placed};

/// A keyed limiter's table, of the kind its algorithm needs (chosen once, at build).
pub(super) enum Table {
    Gcra(PackedTable<Gcra>),
    Fixed(PackedTable<FixedWindow>),
    Sliding(PackedTable<SlidingWindow>),
    Log(LogTable),
}

/// `$body` with `$t` bound to the table, whatever its kind: one match per verb, each
/// arm its own monomorphic copy of `$body`.
macro_rules! with_table {
    ($table:expr, $t:ident => $body:expr) => {
        match $table {
            $crate::keyed::table::Table::Gcra($t) => $body,
            $crate::keyed::table::Table::Fixed($t) => $body,
            $crate::keyed::table::Table::Sliding($t) => $body,
            $crate::keyed::table::Table::Log($t) => $body,
        }
    };
}
pub(super) use with_table;

/// What one request's booking returns: where it took effect (the decision and what
/// it booked) and the state it was booked on.
pub(super) type Booked1 = (Placed<(Decision, Booking)>, Origin);

/// What a reservation returns: where it took effect (the booking and the reading, or
/// the wait that exceeded the bound) and the state it was booked on.
pub(super) type Reserved1 = (Placed<Result<(Booked, u64), u64>>, Origin);

/// What the keyed limiter's verbs need of a table: each verb written once over it.
///
/// Every method that takes `now` reads it at most once per attempt (the tables re-read
/// it when a request starts over); `params` are one tier's, read once by the caller
/// ([`params`](Self::params)) so that the cost checked is the one decided with.
pub(super) trait KeyedTable {
    /// One tier's parameters.
    type Params: Copy;

    /// Tier `tier`'s parameters now (`tier` < the number of tiers).
    fn params(&self, tier: usize) -> Self::Params;

    /// The largest cost `p` ever admits at once (the burst, or the limit).
    fn burst(&self, p: &Self::Params) -> u32;

    /// One decision of `cost` (at most the burst) for the key hashed to `h`, counted.
    fn decide(&self, h: u64, now: impl Fn() -> u64, cost: u32, p: Self::Params) -> Decision;

    /// The decision of `cost` for the key hashed to `h` at `now`, writing nothing.
    fn peek(&self, h: u64, now: u64, cost: u32, p: Self::Params) -> Decision;

    /// Admits `n` now or not (all or nothing), booking what it took so that it can be
    /// rolled back exactly; inserts a missing key only when `n > 0`. Not counted.
    fn book(&self, h: u64, now: impl Fn() -> u64, n: u32, p: Self::Params) -> Booked1;

    /// Books `n` at the earliest time it may proceed, if that is at most `limit` ns
    /// after the reading.
    fn reserve(
        &self,
        h: u64,
        now: impl Fn() -> u64,
        n: u32,
        limit: u64,
        p: Self::Params,
    ) -> Reserved1;

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
        algorithm: crate::Algorithm,
        now: impl Fn() -> u64,
    ) -> Result<(), ConfigError>;

    /// Gives the key hashed to `h` a fresh state of a new generation; `false` when the
    /// table does not hold it.
    fn reset(&self, h: u64) -> bool;

    /// `(occupied, active)` slots at `now`.
    fn occupancy(&self, now: u64) -> (u64, u64);

    /// The counters summed.
    fn totals(&self) -> Totals;

    /// The per-decision counters.
    fn counts(&self) -> &Stripes;

    /// Bytes of the table.
    fn memory_bytes(&self) -> usize;

    /// Bytes of one slot's ring (0 where the state is the slot's).
    fn ring_bytes(&self) -> usize;

    /// Whether every decision is lock-free on this machine.
    fn is_lock_free(&self) -> bool;
}
