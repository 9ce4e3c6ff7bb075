//! The keyed verbs on the sliding log's table: [`Store`] for `LogTable`.

use crate::algorithm::booking::Origin;
use crate::algorithm::booking::{Book, Booked, Booking};
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::Params;
use crate::decision::Decision;
use crate::error::{ConfigError, InsufficientCapacity};
use crate::store::{BookingOutcome, KeyedStore, ReservationOutcome, Store};
use crate::table::counters::Totals;
use crate::table::log::LogTable;
use crate::table::packed::Applied;

impl Store for LogTable {
    type Params = SlidingLog;

    #[inline(always)]
    fn params(&self, tier: usize) -> SlidingLog {
        self.tiers().get(tier)
    }

    #[inline(always)]
    fn burst(&self, p: &SlidingLog) -> u32 {
        p.limit()
    }

    #[inline(always)]
    fn decide(
        &self,
        h: u64,
        _tier: usize,
        now: impl Fn() -> u64,
        cost: u32,
        p: SlidingLog,
    ) -> Option<Decision> {
        // A log converts nothing at a quota change: never stale.
        if self.beyond_caches() {
            return Some(LogTable::decide_beyond_caches(self, h, now(), cost, p));
        }
        Some(LogTable::decide(self, h, now(), cost, p))
    }

    fn peek(&self, h: u64, now: u64, cost: u32, p: SlidingLog) -> Decision {
        LogTable::peek(self, h, now, cost, p)
    }

    fn book(
        &self,
        h: u64,
        _tier: usize,
        now: impl Fn() -> u64,
        n: u32,
        params: SlidingLog,
    ) -> Result<BookingOutcome, InsufficientCapacity> {
        let (placed, origin) = self.run_booked(
            h,
            now(),
            n > 0,
            |ring, t, lag| {
                let (d, booking) = params.step_booked(ring, t, n);
                (d.lagged(lag), booking)
            },
            || (params.fresh(n), Booking::Nothing),
        );
        let placed = match placed {
            Applied::Refused(d) => Applied::Refused(d.with_policy(params.limit(), params.limit())),
            other => other,
        };
        Ok((placed, origin))
    }

    fn reserve(
        &self,
        h: u64,
        _tier: usize,
        now: impl Fn() -> u64,
        n: u32,
        how: Book,
        params: SlidingLog,
    ) -> Result<ReservationOutcome, InsufficientCapacity> {
        Ok(self.run_booked(
            h,
            now(),
            how.inserts(),
            // Decided `lag` after the reading (see `run_booked`): its wait from the
            // reading.
            |ring, t, lag| how.seen_behind(params.book(ring, t, n, how.behind(lag)), t, lag),
            || {
                let booked = Booked {
                    wait: 0,
                    decision: params.fresh(n),
                    booking: Booking::Nothing,
                    counted: Default::default(),
                };
                Ok((booked, 0))
            },
        ))
    }

    fn refund(&self, h: u64, booking: &Booking, origin: Origin, now: u64, _always: bool) {
        let params = self.tiers().get(0);
        if let Booking::Log { .. } = booking {
            LogTable::refund(self, h, origin, now, |ring, t| {
                params.refund(ring, booking, t);
            });
        }
    }

    fn set_params(
        &self,
        tier: usize,
        next: Params,
        tiers: usize,
        algorithm: crate::quota::Algorithm,
        _now: impl Fn() -> u64,
    ) -> Result<(), ConfigError> {
        // Params::new for this limiter's own algorithm builds the same kind.
        let Params::Log(l) = next else {
            return Ok(());
        };
        let current = Params::Log(self.tiers().get(tier));
        current.can_become(&next, self.ring_len())?;
        if tiers > 1 {
            super::builder::tier_fits(algorithm, &Params::Log(self.tiers().get(0)), &next, tier)?;
        }
        self.tiers().set(tier, l);
        Ok(())
    }

    #[inline(always)]
    fn count(&self, cost: u32, d: &Decision) {
        self.counts().count(cost, d);
    }
}

impl KeyedStore for LogTable {
    fn reset(&self, h: u64) -> bool {
        LogTable::reset(self, h)
    }

    fn occupancy(&self, now: u64) -> (u64, u64) {
        LogTable::occupancy(self, now)
    }

    fn totals(&self) -> Totals {
        LogTable::totals(self)
    }

    fn memory_bytes(&self) -> usize {
        LogTable::memory_bytes(self)
    }

    fn ring_bytes(&self) -> usize {
        LogTable::ring_bytes(self)
    }

    fn is_lock_free(&self) -> bool {
        false
    }

    fn huge_pages(&self) -> bool {
        LogTable::huge_pages(self)
    }
}
