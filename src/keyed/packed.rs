//! The keyed verbs on a packed table: [`Store`] for `PackedTable<A>`, once for
//! every packed algorithm `A`.

use crate::algorithm::booking::Origin;
use crate::algorithm::booking::{Book, Booked, Booking, Late};
use crate::algorithm::packed::PackedAlgorithm;
use crate::algorithm::Params;
use crate::decision::Decision;
use crate::error::{ConfigError, InsufficientCapacity};
use crate::store::{BookingOutcome, KeyedStore, ReservationOutcome, Store};
use crate::table::counters::Totals;
use crate::table::packed::{Applied, PackedTable};
use crate::table::tiers;

impl<A: PackedAlgorithm> Store for PackedTable<A> {
    type Params = A;

    #[inline(always)]
    fn params(&self, tier: usize) -> A {
        self.tiers().get(tier)
    }

    #[inline(always)]
    fn burst(&self, p: &A) -> u32 {
        p.burst()
    }

    #[inline(always)]
    fn decide(
        &self,
        h: u64,
        tier: usize,
        now: impl Fn() -> u64,
        cost: u32,
        p: A,
    ) -> Option<Decision> {
        PackedTable::decide(self, h, tier, now, cost, p)
    }

    fn peek(&self, h: u64, now: u64, cost: u32, p: A) -> Decision {
        PackedTable::peek(self, h, now, cost, p)
    }

    fn book(
        &self,
        h: u64,
        tier: usize,
        now: impl Fn() -> u64,
        n: u32,
        params: A,
    ) -> Result<BookingOutcome, InsufficientCapacity> {
        let reload = || self.tiers().get(tier);
        tiers::fresh(params, n, reload, A::burst, |p| {
            self.book_with(h, &now, n, p)
        })
    }

    fn reserve(
        &self,
        h: u64,
        tier: usize,
        now: impl Fn() -> u64,
        n: u32,
        how: Book,
        params: A,
    ) -> Result<ReservationOutcome, InsufficientCapacity> {
        let reload = || self.tiers().get(tier);
        tiers::fresh(params, how.checked_cost(n), reload, A::burst, |params| {
            // A refused reservation changes nothing, not even the rate class.
            // Decided `lag` after the reading (see `run_from`): its wait from the reading.
            self.run_booked(
                h,
                &now,
                how.inserts(),
                params.gcra(),
                false,
                |state, t, lag| {
                    if lag == 0 {
                        let (next, r) = params.book(state, t, n, how);
                        (next, r.map(|b| (b, t)))
                    } else {
                        booked_behind(params, (state, t, lag), n, how)
                    }
                },
            )
        })
    }

    fn refund(&self, h: u64, booking: &Booking, origin: Origin, now: u64, always: bool) {
        let params = self.tiers().get(0);
        PackedTable::refund(self, h, origin, now, |state, t| {
            params.refund(state, booking, t, always)
        });
    }

    fn set_params(
        &self,
        tier: usize,
        next: Params,
        _tiers: usize,
        algorithm: crate::quota::Algorithm,
        now: impl Fn() -> u64,
    ) -> Result<(), ConfigError> {
        // Params::new for this limiter's own algorithm builds the same kind.
        let Some(p) = A::of(next) else {
            return Ok(());
        };
        let current = Params::Packed(self.tiers().get(tier).into_params());
        current.can_become(&next, 0)?;
        super::builder::tier_fits(
            algorithm,
            &Params::Packed(self.tiers().get(0).into_params()),
            &next,
            tier,
        )?;
        // The buckets' rate class: what each key owes carries over in requests,
        // converted into the new quota from the change on.
        let now = now();
        let p = self.classify(tier, p, now)?;
        let old = self.tiers().get(tier);
        self.tiers().set(tier, p);
        self.carry_over(tier, old, now);
        Ok(())
    }

    #[inline(always)]
    fn count(&self, cost: u32, d: &Decision) {
        self.counts().count(cost, d);
    }
}

impl<A: PackedAlgorithm> PackedTable<A> {
    /// `Store::book` with `params` (`None` when they went stale: see `run_from`).
    fn book_with(
        &self,
        h: u64,
        now: &impl Fn() -> u64,
        n: u32,
        params: A,
    ) -> Option<BookingOutcome> {
        // As the table's `decide`: only the next state inside the compare-and-swap
        // loop, the decision and booking once after. A zero-cost check inserts nothing
        // (as `check_n(&key, 0)`). A denial in a window later than the reading's is
        // decided once more at a fresh reading (see `Step::ahead`).
        let mut again = true;
        let (placed, origin) = loop {
            let (placed, origin) =
                self.run_booked(h, now, n > 0, params.gcra(), true, |state, t, lag| {
                    (params.next_state(state, t, n), (state, t, lag))
                })?;
            if let Applied::Stored((state, t, _)) = placed {
                if again && params.ahead(state, t) && !params.decision(state, t, n).is_allowed() {
                    again = false;
                    continue;
                }
            }
            break (placed, origin);
        };
        // Its waits measured from the reading (see `run_from`).
        let outcome = |(state, t, lag): (u64, u64, u64)| {
            let (next, d) = params.both(state, t, n);
            (
                d.lagged(lag),
                next.map_or(Booking::Nothing, |s| params.booking(s, n)),
            )
        };
        let placed = match placed {
            Applied::Stored(at) => Applied::Stored(outcome(at)),
            Applied::Absent(at) => Applied::Absent(outcome(at)),
            Applied::Untracked(at) => Applied::Untracked(outcome(at)),
            Applied::Refused(d) => Applied::Refused(d.with_policy(params.limit(), params.burst())),
        };
        Some((placed, origin))
    }
}

/// A booking decided at `t`, `lag` (nonzero) after the caller's reading (see
/// `run_from`): its wait, and its bound, from the reading. Out of line: the hit path
/// has no lag.
#[cold]
#[inline(never)]
fn booked_behind<A: PackedAlgorithm>(
    params: A,
    (state, t, lag): (u64, u64, u64),
    n: u32,
    how: Book,
) -> (Option<u64>, Result<(Booked, u64), Late>) {
    let (next, r) = params.book(state, t, n, how.behind(lag));
    (next, how.seen_behind(r, t, lag))
}

impl<A: PackedAlgorithm> KeyedStore for PackedTable<A> {
    fn reset(&self, h: u64) -> bool {
        PackedTable::reset(self, h)
    }

    fn occupancy(&self, now: u64) -> (u64, u64) {
        PackedTable::occupancy(self, now)
    }

    fn totals(&self) -> Totals {
        PackedTable::totals(self)
    }

    fn memory_bytes(&self) -> usize {
        PackedTable::memory_bytes(self)
    }

    fn ring_bytes(&self) -> usize {
        0
    }

    fn is_lock_free(&self) -> bool {
        crate::sync::slot_word_is_lock_free()
    }

    fn huge_pages(&self) -> bool {
        PackedTable::huge_pages(self)
    }
}
