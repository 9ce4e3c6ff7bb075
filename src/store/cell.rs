//! `RateLimiter`'s stores: one state and its parameters, [`Store`] for a packed
//! algorithm's word ([`WordStore`]) and for the sliding log's ring ([`RingStore`]).
//! A cell is always present: every transition is [`Placed::Stored`] on
//! [`Origin::Cell`], and a cell keeps no statistics.

use super::{Booked1, ByAlgorithm, Reserved1, Store};
use crate::algorithm::booking::Booking;
use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::packed::PackedAlgorithm;
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::sliding_window::SlidingWindow;
use crate::algorithm::Params;
use crate::cell::{LogCell, PackedCell};
use crate::decision::Decision;
use crate::error::ConfigError;
use crate::reservation::Origin;
use crate::sync::Swap;
use crate::table::packed::Placed;

/// A `RateLimiter`'s store, of its algorithm's kind.
pub(crate) type CellStore =
    ByAlgorithm<WordStore<Gcra>, WordStore<FixedWindow>, WordStore<SlidingWindow>, RingStore>;

impl CellStore {
    /// The store for `params`, empty.
    pub(crate) fn new(params: Params) -> Self {
        use crate::algorithm::PackedParams as P;
        match params {
            Params::Packed(P::Gcra(g)) => ByAlgorithm::Gcra(WordStore::new(g)),
            Params::Packed(P::Fixed(f)) => ByAlgorithm::Fixed(WordStore::new(f)),
            Params::Packed(P::Sliding(s)) => ByAlgorithm::Sliding(WordStore::new(s)),
            Params::Log(l) => ByAlgorithm::Log(RingStore {
                params: Swap::new(l),
                cell: LogCell::new(&l),
                ring: l.limit(),
            }),
        }
    }
}

/// A packed algorithm's state word and its parameters (replaceable at run time).
pub(crate) struct WordStore<A: PackedAlgorithm> {
    params: Swap<A>,
    cell: PackedCell,
}

impl<A: PackedAlgorithm> WordStore<A> {
    fn new(params: A) -> Self {
        WordStore {
            params: Swap::new(params),
            cell: PackedCell::new(),
        }
    }
}

impl<A: PackedAlgorithm> Store for WordStore<A> {
    type Params = A;

    #[inline(always)]
    fn params(&self, _tier: usize) -> A {
        self.params.load()
    }

    #[inline(always)]
    fn burst(&self, p: &A) -> u32 {
        p.burst()
    }

    #[inline(always)]
    fn decide(&self, _h: u64, now: impl Fn() -> u64, cost: u32, p: A) -> Decision {
        self.cell.decide(p, now(), cost, now)
    }

    fn peek(&self, _h: u64, now: u64, cost: u32, p: A) -> Decision {
        self.cell.peek(&p, now, cost)
    }

    fn book(&self, _h: u64, now: impl Fn() -> u64, n: u32, p: A) -> Booked1 {
        let (d, booking) = self.cell.decide_booked(&p, now(), n, now);
        (Placed::Stored((d, booking)), Origin::Cell)
    }

    fn reserve(&self, _h: u64, now: impl Fn() -> u64, n: u32, limit: u64, p: A) -> Reserved1 {
        let t = now();
        let booked = self.cell.reserve(&p, t, n, limit).map(|b| (b, t));
        (Placed::Stored(booked), Origin::Cell)
    }

    fn refund(&self, _h: u64, booking: &Booking, _origin: Origin, now: u64, always: bool) {
        self.cell.refund(&self.params.load(), booking, now, always);
    }

    fn set_params(
        &self,
        _tier: usize,
        next: Params,
        _tiers: usize,
        _algorithm: crate::Algorithm,
        now: impl Fn() -> u64,
    ) -> Result<(), ConfigError> {
        // Params::new for this limiter's own algorithm builds the same kind.
        let Some(p) = A::of(next) else {
            return Ok(());
        };
        let old = self.params.load();
        Params::Packed(old.into_params()).can_become(&next, 0)?;
        self.params.store(p);
        // The buckets: what the state owes carries over in requests (a request that
        // read the old quota before the store may still count its own cost under it).
        if let (Some(a), Some(b)) = (old.gcra(), p.gcra()) {
            if a.interval() != b.interval() {
                let now = now();
                self.cell.update(|tat| {
                    let to = b.convert(tat, a.interval(), now);
                    ((to != tat).then_some(to), ())
                });
            }
        }
        Ok(())
    }

    /// A cell keeps no statistics.
    #[inline(always)]
    fn count(&self, _cost: u32, _d: &Decision) {}
}

impl RingStore {
    /// Bytes of the ring (`8 × limit` at build).
    pub(crate) fn ring_bytes(&self) -> usize {
        self.ring as usize * std::mem::size_of::<u64>()
    }
}

/// The sliding log's ring and its parameters (replaceable at run time, within the
/// ring's length).
pub(crate) struct RingStore {
    params: Swap<SlidingLog>,
    cell: LogCell,
    /// The ring's length (the limit at build).
    ring: u32,
}

impl Store for RingStore {
    type Params = SlidingLog;

    #[inline(always)]
    fn params(&self, _tier: usize) -> SlidingLog {
        self.params.load()
    }

    #[inline(always)]
    fn burst(&self, p: &SlidingLog) -> u32 {
        p.limit()
    }

    #[inline(always)]
    fn decide(&self, _h: u64, now: impl Fn() -> u64, cost: u32, p: SlidingLog) -> Decision {
        self.cell.decide(&p, now(), cost)
    }

    fn peek(&self, _h: u64, now: u64, cost: u32, p: SlidingLog) -> Decision {
        self.cell.peek(&p, now, cost)
    }

    fn book(&self, _h: u64, now: impl Fn() -> u64, n: u32, p: SlidingLog) -> Booked1 {
        let (d, booking) = self.cell.decide_booked(&p, now(), n);
        (Placed::Stored((d, booking)), Origin::Cell)
    }

    fn reserve(
        &self,
        _h: u64,
        now: impl Fn() -> u64,
        n: u32,
        limit: u64,
        p: SlidingLog,
    ) -> Reserved1 {
        let t = now();
        let booked = self.cell.reserve(&p, t, n, limit).map(|b| (b, t));
        (Placed::Stored(booked), Origin::Cell)
    }

    fn refund(&self, _h: u64, booking: &Booking, _origin: Origin, now: u64, _always: bool) {
        self.cell.refund(&self.params.load(), booking, now);
    }

    fn set_params(
        &self,
        _tier: usize,
        next: Params,
        _tiers: usize,
        _algorithm: crate::Algorithm,
        _now: impl Fn() -> u64,
    ) -> Result<(), ConfigError> {
        // Params::new for this limiter's own algorithm builds the same kind.
        let Params::Log(l) = next else {
            return Ok(());
        };
        Params::Log(self.params.load()).can_become(&next, self.ring)?;
        self.params.store(l);
        Ok(())
    }

    /// A cell keeps no statistics.
    #[inline(always)]
    fn count(&self, _cost: u32, _d: &Decision) {}
}
