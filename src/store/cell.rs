//! `RateLimiter`'s stores: one state and its parameters, [`Store`] for a packed
//! algorithm's word ([`WordStore`]) and for the sliding log's ring ([`RingStore`]).
//! A cell is always present: every transition is [`Applied::Stored`] on
//! [`Origin::Cell`], and a cell keeps no statistics.

use super::{BookingOutcome, ByAlgorithm, ReservationOutcome, Store};
use crate::algorithm::booking::Origin;
use crate::algorithm::booking::{Book, Booking};
use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::packed::PackedAlgorithm;
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::sliding_window::SlidingWindow;
use crate::algorithm::Params;
use crate::cell::{LogCell, PackedCell, Stale};
use crate::decision::Decision;
use crate::error::{ConfigError, InsufficientCapacity};
use crate::sync::{AtomicU64, Ordering, Replaceable};
use crate::table::packed::Applied;
use crate::table::tiers;

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
                params: Replaceable::new(l),
                cell: LogCell::new(&l),
                ring: l.limit(),
            }),
        }
    }
}

/// A packed algorithm's state word and its parameters (replaceable at run time).
pub(crate) struct WordStore<A: PackedAlgorithm> {
    params: Replaceable<A>,
    cell: PackedCell,
    /// The stamp of the parameters the last conversion of the state to another
    /// interval published (0: never converted). Bookings made with earlier parameters
    /// give nothing back (see [`Origin::Cell`]).
    converted: AtomicU64,
}

impl<A: PackedAlgorithm> WordStore<A> {
    fn new(params: A) -> Self {
        WordStore {
            params: Replaceable::new(params),
            cell: PackedCell::new(),
            converted: AtomicU64::new(0),
        }
    }

    /// Whether `p` went stale (see [`Stale`]): only a bucket's parameters can, as
    /// only a bucket's state is converted at a quota change.
    #[inline(always)]
    fn since(&self, p: &Stamped<A>) -> Since<'_, A> {
        Since {
            swap: &self.params,
            stamp: p.stamp,
            converts: p.params.gcra().is_some(),
        }
    }
}

/// What a booking made with `p` on a cell is counted in (see [`Origin::Cell`]).
#[inline]
fn origin<A: PackedAlgorithm>(p: &Stamped<A>) -> Origin {
    match p.params.gcra() {
        Some(g) => Origin::Cell {
            interval: g.interval(),
            stamp: p.stamp,
        },
        None => Origin::Cell {
            interval: 0,
            stamp: 0,
        },
    }
}

/// A cell's parameters and the stamp of the `Replaceable` they were read at.
#[derive(Clone, Copy)]
pub(crate) struct Stamped<A> {
    params: A,
    stamp: u64,
}

/// [`Stale`] for parameters read from `swap` at `stamp`.
pub(crate) struct Since<'a, A: PackedAlgorithm> {
    swap: &'a Replaceable<A>,
    stamp: u64,
    /// Whether a quota change converts the state (a bucket); else never stale.
    converts: bool,
}

impl<A: PackedAlgorithm> Stale for Since<'_, A> {
    #[inline(always)]
    fn stale(&self) -> bool {
        self.converts && self.swap.changed(self.stamp)
    }
}

impl<A: PackedAlgorithm> Store for WordStore<A> {
    type Params = Stamped<A>;

    #[inline(always)]
    fn params(&self, _tier: usize) -> Stamped<A> {
        let (params, stamp) = self.params.load_stamped();
        Stamped { params, stamp }
    }

    #[inline(always)]
    fn burst(&self, p: &Stamped<A>) -> u32 {
        p.params.burst()
    }

    #[inline(always)]
    fn decide(
        &self,
        _h: u64,
        _tier: usize,
        now: impl Fn() -> u64,
        cost: u32,
        p: Stamped<A>,
    ) -> Option<Decision> {
        match self
            .cell
            .decide(p.params, now(), cost, &now, self.since(&p))
        {
            Some(d) => Some(d),
            None => tiers::fresh_again(
                cost,
                || self.params(0),
                |p| p.params.burst(),
                |p| {
                    self.cell
                        .decide(p.params, now(), cost, &now, self.since(&p))
                },
            )
            .ok(),
        }
    }

    fn peek(&self, _h: u64, now: u64, cost: u32, p: Stamped<A>) -> Decision {
        self.cell.peek(&p.params, now, cost)
    }

    fn book(
        &self,
        _h: u64,
        _tier: usize,
        now: impl Fn() -> u64,
        n: u32,
        p: Stamped<A>,
    ) -> Result<BookingOutcome, InsufficientCapacity> {
        let book = |p: Stamped<A>| {
            let booked = self
                .cell
                .decide_booked(&p.params, now(), n, &now, self.since(&p))?;
            Some((Applied::Stored(booked), origin(&p)))
        };
        tiers::fresh(p, n, || self.params(0), |p| p.params.burst(), book)
    }

    fn reserve(
        &self,
        _h: u64,
        _tier: usize,
        now: impl Fn() -> u64,
        n: u32,
        how: Book,
        p: Stamped<A>,
    ) -> Result<ReservationOutcome, InsufficientCapacity> {
        let reserve = |p: Stamped<A>| {
            let t = now();
            let reserved = self.cell.reserve(&p.params, t, n, how, self.since(&p))?;
            Some((Applied::Stored(reserved.map(|b| (b, t))), origin(&p)))
        };
        let cost = how.checked_cost(n);
        tiers::fresh(p, cost, || self.params(0), |p| p.params.burst(), reserve)
    }

    fn refund(&self, _h: u64, booking: &Booking, origin: Origin, now: u64, always: bool) {
        loop {
            let p = self.params(0);
            let Origin::Cell { interval, stamp } = origin else {
                return;
            };
            if p.params.gcra().map_or(0, |g| g.interval()) != interval
                || stamp < self.converted.load(Ordering::Acquire)
            {
                // Counted in another interval, or converted since (even back to its
                // own): nothing to give back.
                return;
            }
            if self
                .cell
                .refund(&p.params, booking, now, always, self.since(&p))
                .is_some()
            {
                return;
            }
        }
    }

    fn set_params(
        &self,
        _tier: usize,
        next: Params,
        _tiers: usize,
        _algorithm: crate::quota::Algorithm,
        now: impl Fn() -> u64,
    ) -> Result<(), ConfigError> {
        // Params::new for this limiter's own algorithm builds the same kind.
        let Some(p) = A::of(next) else {
            return Ok(());
        };
        let old = self.params.load();
        Params::Packed(old.into_params()).can_become(&next, 0)?;
        let intervals = old.gcra().zip(p.gcra());
        let Some((a, b)) = intervals.filter(|(a, b)| a.interval() != b.interval()) else {
            self.params.store(p);
            return Ok(());
        };
        // The buckets: what the state owes carries over in requests, converted while
        // deciders wait for the new parameters; a decision that read the old ones
        // either swaps the state before the conversion (and is converted with it) or
        // finds them stale and starts over (see `cell::Stale`). A state that owes
        // nothing is written as `now` (the same meaning at `now` and later), so that
        // the conversion changes the word and such a decision's swap fails. Left: a
        // state already equal to `now` (a fresh limiter on a manual clock at zero) is
        // the same word after; a decision of the old quota swapping it then counts one
        // request at the old rate: under one request off (on a frozen clock never an
        // extra admission; on a running one, a later admission up to one old interval
        // early), once per such change.
        let now = now();
        self.params.store_with(p, || {
            self.cell.update(|tat| {
                let to = b.convert(tat.max(now), a.interval(), now);
                ((to != tat).then_some(to), ())
            });
        });
        // One `set_quota` at a time (the limiter's lock): the stamp just published.
        let (_, stamp) = self.params.load_stamped();
        self.converted.store(stamp, Ordering::Release);
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
    params: Replaceable<SlidingLog>,
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
    fn decide(
        &self,
        _h: u64,
        _tier: usize,
        now: impl Fn() -> u64,
        cost: u32,
        p: SlidingLog,
    ) -> Option<Decision> {
        // A log converts nothing at a quota change: never stale.
        Some(self.cell.decide(&p, now(), cost))
    }

    fn peek(&self, _h: u64, now: u64, cost: u32, p: SlidingLog) -> Decision {
        self.cell.peek(&p, now, cost)
    }

    fn book(
        &self,
        _h: u64,
        _tier: usize,
        now: impl Fn() -> u64,
        n: u32,
        p: SlidingLog,
    ) -> Result<BookingOutcome, InsufficientCapacity> {
        let booked = self.cell.decide_booked(&p, now(), n);
        Ok((
            Applied::Stored(booked),
            Origin::Cell {
                interval: 0,
                stamp: 0,
            },
        ))
    }

    fn reserve(
        &self,
        _h: u64,
        _tier: usize,
        now: impl Fn() -> u64,
        n: u32,
        how: Book,
        p: SlidingLog,
    ) -> Result<ReservationOutcome, InsufficientCapacity> {
        let t = now();
        let booked = self.cell.reserve(&p, t, n, how).map(|b| (b, t));
        Ok((
            Applied::Stored(booked),
            Origin::Cell {
                interval: 0,
                stamp: 0,
            },
        ))
    }

    fn refund(&self, _h: u64, booking: &Booking, _origin: Origin, now: u64, _always: bool) {
        self.cell.refund(&self.params.load(), booking, now);
    }

    fn set_params(
        &self,
        _tier: usize,
        next: Params,
        _tiers: usize,
        _algorithm: crate::quota::Algorithm,
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
