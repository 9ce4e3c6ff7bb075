//! `RateLimiter`: one key, any algorithm, any clock.

use crate::algorithm::booking::Booking;
use crate::algorithm::booking::{Ledger, Origin};
use crate::algorithm::Params;
use crate::charge::Charge;
use crate::reservation::{Reservation, ReserveError};
use crate::store::cell::CellStore;
use crate::store::{by_algorithm, verbs, Store};
use crate::sync::{lock, CopyCell, Mutex};
use crate::{
    clock::Clock, clock::QuantaClock, decision::Decision, error::ConfigError,
    error::InsufficientCapacity, quota::Algorithm, quota::Quota,
};
use std::fmt;
use std::time::Duration;

/// A rate limiter for one key (one client, one route, one whole service).
///
/// `Send + Sync`: share it by reference or `Arc` across threads; concurrent callers
/// never get more than the quota between them.
///
/// # Example
///
/// ```
/// use tollgate::{Algorithm, Quota, RateLimiter};
///
/// let limiter = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(100).with_burst(20))
///     .build()?;
/// let admitted = (0..50).filter(|_| limiter.check().is_allowed()).count();
/// assert!((20..=21).contains(&admitted)); // the burst, plus what refilled meanwhile
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
pub struct RateLimiter<C: Clock = QuantaClock> {
    pub(crate) store: CellStore,
    clock: C,
    algorithm: Algorithm,
    quota: CopyCell<Quota>,
    /// Serializes `set_quota` calls (deciders never take it).
    setting: Mutex<()>,
}

impl RateLimiter {
    /// Starts building a limiter running `algorithm` on `quota`, with the default
    /// [`QuantaClock`].
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, ManualClock, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::builder(Algorithm::SlidingWindow, Quota::per_minute(60))
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// assert!(limiter.check().is_allowed());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn builder(algorithm: Algorithm, quota: Quota) -> RateLimiterBuilder<QuantaClock> {
        RateLimiterBuilder {
            algorithm,
            quota,
            clock: QuantaClock::new(),
        }
    }
}

/// Builds a [`RateLimiter`]; made by [`RateLimiter::builder`].
///
/// # Example
///
/// ```
/// use tollgate::{Algorithm, ManualClock, Quota, RateLimiter};
///
/// let limiter: RateLimiter<ManualClock> = RateLimiter::builder(Algorithm::LeakyBucket, Quota::per_second(10))
///     .clock(ManualClock::new())
///     .build()?;
/// # let _ = limiter;
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[must_use = "a builder does nothing until .build() is called"]
#[derive(Clone, Debug)]
pub struct RateLimiterBuilder<C: Clock> {
    algorithm: Algorithm,
    quota: Quota,
    clock: C,
}

impl<C: Clock> RateLimiterBuilder<C> {
    /// Uses `clock` instead of the default.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Algorithm, ManualClock, Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(1))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// assert!(limiter.check().is_allowed());
    /// assert!(!limiter.check().is_allowed());
    /// clock.advance(Duration::from_secs(1));
    /// assert!(limiter.check().is_allowed());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn clock<C2: Clock>(self, clock: C2) -> RateLimiterBuilder<C2> {
        RateLimiterBuilder {
            algorithm: self.algorithm,
            quota: self.quota,
            clock,
        }
    }

    /// Checks the quota and builds the limiter; all memory is allocated here.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the quota can never work or cannot be represented: zero
    /// limit, period or burst; a burst on a window algorithm; more than one request per
    /// nanosecond; spans past the engine's ~146-year horizon; window quotas too fine
    /// for their packed layout; a sliding log larger than 65,536 entries.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, ConfigError, Quota, RateLimiter};
    ///
    /// let err = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(10).with_burst(5))
    ///     .build()
    ///     .unwrap_err();
    /// assert!(matches!(err, ConfigError::BurstNotSupported { .. }));
    /// ```
    pub fn build(self) -> Result<RateLimiter<C>, ConfigError> {
        let store = CellStore::new(Params::new(self.algorithm, self.quota)?);
        Ok(RateLimiter {
            store,
            clock: self.clock,
            algorithm: self.algorithm,
            quota: CopyCell::new(self.quota),
            setting: Mutex::new(()),
        })
    }
}

impl<C: Clock> RateLimiter<C> {
    /// Decides one request of cost 1, now.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(2)).build()?;
    /// assert!(l.check().is_allowed());
    /// assert!(l.check().is_allowed());
    /// assert!(!l.check().is_allowed());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    pub fn check(&self) -> Decision {
        // Every burst is at least 1, so a cost of 1 always fits.
        by_algorithm!(&self.store, e => verbs::check_one(e, 0, 0, || self.now()))
    }

    /// Decides one request of cost `n`, now. A cost of 0 changes nothing and reports
    /// the current state.
    ///
    /// # Errors
    ///
    /// [`InsufficientCapacity`] when `n` exceeds the capacity (the burst for the
    /// buckets, the limit for the others): such a request can never be admitted, which
    /// is different from a denial ("not now").
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(10)).build()?;
    /// assert!(l.check_n(10)?.is_allowed());
    /// assert!(!l.check_n(10)?.is_allowed());
    /// assert!(l.check_n(11).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check_n(&self, n: u32) -> Result<Decision, InsufficientCapacity> {
        by_algorithm!(&self.store, e => verbs::check_n(e, 0, n, 0, || self.now()))
    }

    /// The decision a request of cost 1 would get now, consuming nothing: whether it
    /// would be admitted, what would remain, when to retry. (`check_n(0)` reports the
    /// state without asking for anything, so it is always "allowed"; `peek` asks for
    /// one.) Another caller may take the capacity between a peek and a check.
    ///
    /// Its [`remaining`](Decision::remaining) is, as for every decision, what would be
    /// left *after* that request: on a fresh 5-per-hour limiter after one check,
    /// `peek().remaining()` is 3. What is left now is [`peek_n(0)`](Self::peek_n)'s
    /// (4 there).
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// let five = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_hour(5)).build()?;
    /// assert!(five.check().is_allowed());
    /// assert_eq!(five.peek().remaining(), 3); // left after the request it asks about
    /// assert_eq!(five.peek_n(0)?.remaining(), 4); // left now
    ///
    /// let l = RateLimiter::builder(Algorithm::SlidingLog, Quota::per_hour(1)).build()?;
    /// assert!(l.peek().is_allowed());
    /// assert!(l.peek().is_allowed()); // nothing was consumed
    /// assert!(l.check().is_allowed());
    /// let p = l.peek();
    /// assert!(!p.is_allowed());
    /// assert!(p.retry_after().is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "a peek changes nothing; it only reports"]
    pub fn peek(&self) -> Decision {
        let now = self.now();
        by_algorithm!(&self.store, e => e.peek(0, now, 1, e.params(0)))
    }

    /// What a request of cost `n` would get now, consuming nothing: [`peek`](Self::peek)
    /// for any cost (`peek_n(0)` reports the state without asking for anything).
    ///
    /// # Errors
    ///
    /// [`InsufficientCapacity`] when `n` exceeds the burst (it could never be
    /// admitted).
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::SlidingWindow, Quota::per_hour(4)).build()?;
    /// assert!(l.check_n(3)?.is_allowed());
    /// assert!(l.peek_n(1)?.is_allowed());
    /// assert!(!l.peek_n(2)?.is_allowed());
    /// assert_eq!(l.peek_n(0)?.remaining(), 1); // nothing was consumed
    /// assert!(l.peek_n(5).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn peek_n(&self, n: u32) -> Result<Decision, InsufficientCapacity> {
        by_algorithm!(&self.store, e => verbs::peek_n(e, 0, n, 0, self.now()))
    }

    /// Books `n` now for a request that proceeds after
    /// [`wait_time`](Reservation::wait_time), if that is at most `max_wait`.
    ///
    /// Order of service is the order of booking: for the buckets the booking is GCRA
    /// virtual scheduling in one compare-and-swap (FIFO, no queue); the fixed window
    /// books into the current window if the request fits there, else into the next
    /// (the rest of the current window is then given up, so that no later request
    /// overtakes it); the sliding window books at the earliest time the weighted count
    /// admits it; the sliding log logs the request at the time its `n`-th oldest entry
    /// leaves the window. While a booking is pending, `check` denies what would
    /// overtake it, with the wait until it could proceed. For the leaky bucket the
    /// wait includes the shaper's spacing ([`Decision::delay`]).
    ///
    /// # Errors
    ///
    /// [`ReserveError::InsufficientCapacity`] when `n` exceeds [`burst`](Self::burst);
    /// [`ReserveError::TooLong`] when the wait would exceed `max_wait`. Either way
    /// nothing is booked.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Algorithm, ManualClock, Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let l = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(2))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// assert_eq!(l.reserve(2, Duration::ZERO)?.wait_time(), Duration::ZERO);
    /// let r = l.reserve(1, Duration::from_secs(2))?;
    /// assert_eq!(r.wait_time(), Duration::from_secs(1)); // booked into the next window
    /// assert!(!l.check().is_allowed()); // nothing overtakes it
    /// clock.advance(Duration::from_secs(1));
    /// assert!(l.check().is_allowed()); // the next window's second request
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve(&self, n: u32, max_wait: Duration) -> Result<Reservation<'_>, ReserveError> {
        by_algorithm!(&self.store, e => verbs::reserve(e, self, 0, n, max_wait, 0, || self.now()))
    }

    /// Replaces the quota at run time, keeping the state: each decision is made with
    /// one quota, old or new, never a mix. Deciders wait only while a bucket's state is
    /// converted to a new rate (one compare-and-swap); a decision that read the old
    /// quota and then finds the state converted starts over with the new one (a cost
    /// past the new burst is then [`InsufficientCapacity`]), so no request is ever
    /// priced in one rate on a state counted in the other.
    ///
    /// What carries over, and the bound across the change at time `c`:
    ///
    /// * **Buckets**: what the bucket still owes at `c` carries over in requests
    ///   (Bucket4j's "additive" strategy, x/time/rate's `SetLimitAt` while the burst
    ///   stays): `TAT' = c + ⌈(TAT − c)·T_new / T_old⌉`, rounded up so the limit is never
    ///   exceeded. Raising the quota never lengthens a wait, lowering it never shortens
    ///   one: 10 used of 10 per minute are 10 used of 1,000 per minute. Over any span
    ///   `[a, b]` containing `c`, at most `burst_old + (c − a)/T_old` are admitted
    ///   before `c`, and from `c` on at most `burst_new + (b − c)/T_new` less what was
    ///   still owed at `c`. A request decided under the old quota counts at its rate
    ///   and is converted with the rest.
    /// * **Windows** (the period must stay: [`ConfigError::PeriodChange`]): counts carry
    ///   over and the new limit applies at once, so the window containing `c` admits at
    ///   most `max(limit_old, limit_new)` in all (a lowered limit admits nothing more in
    ///   a window already past it). Any limit the period can represent fits: the packed
    ///   layout depends on the period alone.
    /// * **Sliding log**: logged times carry over; after `c` every interval of the new
    ///   period ending at an admission holds at most the new limit. The rings keep the
    ///   size they were built with: a larger limit is
    ///   [`ConfigError::LogBeyondRing`].
    ///
    /// # Errors
    ///
    /// Any [`ConfigError`] `build` would return for this quota, and the two above;
    /// nothing changes then.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, Quota, RateLimiter};
    ///
    /// let l = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(10)).build()?;
    /// for _ in 0..5 {
    ///     assert!(l.check().is_allowed());
    /// }
    /// l.set_quota(Quota::per_minute(6))?; // the 5 already admitted still count
    /// assert!(l.check().is_allowed());
    /// assert!(!l.check().is_allowed());
    /// assert!(l.set_quota(Quota::per_hour(6)).is_err()); // windows keep their period
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn set_quota(&self, quota: Quota) -> Result<(), ConfigError> {
        let next = Params::new(self.algorithm, quota)?;
        let _one_at_a_time = lock(&self.setting);
        by_algorithm!(&self.store, e => e.set_params(0, next, 1, self.algorithm, || self.now()))?;
        self.quota.store(quota);
        Ok(())
    }

    /// The most that can ever be admitted at once: the burst for the buckets, the
    /// limit for the others. A larger cost is [`InsufficientCapacity`].
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(10).with_burst(3)).build()?;
    /// assert_eq!(l.burst(), 3);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn burst(&self) -> u32 {
        by_algorithm!(&self.store, e => e.burst(&e.params(0)))
    }

    /// The old name of [`burst`](Self::burst).
    ///
    /// # Example
    ///
    /// ```
    /// # #![allow(deprecated)]
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(10).with_burst(3)).build()?;
    /// assert_eq!(l.capacity(), 3);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    #[deprecated(
        since = "0.2.0",
        note = "`capacity` meant several things: use `burst()`"
    )]
    pub fn capacity(&self) -> u32 {
        self.burst()
    }

    /// The algorithm this limiter runs.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::SlidingLog, Quota::per_second(3)).build()?;
    /// assert_eq!(l.algorithm(), Algorithm::SlidingLog);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The quota this limiter enforces.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// let q = Quota::per_minute(30);
    /// let l = RateLimiter::builder(Algorithm::FixedWindow, q).build()?;
    /// assert_eq!(l.quota(), q);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn quota(&self) -> Quota {
        self.quota.load()
    }

    /// The clock this limiter reads.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, Clock, ManualClock, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(1))
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// assert_eq!(l.clock().now(), 0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Bytes this limiter occupies, including the sliding log's ring.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::SlidingLog, Quota::per_second(100)).build()?;
    /// assert!(l.memory_bytes() >= 800);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn memory_bytes(&self) -> usize {
        let ring = match &self.store {
            crate::store::ByAlgorithm::Log(l) => l.ring_bytes(),
            _ => 0,
        };
        std::mem::size_of::<Self>() + ring
    }
}

impl<C: Clock> RateLimiter<C> {
    /// The engine's reading of the clock.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        crate::algorithm::now(&self.clock)
    }

    /// Gives `undo`'s admission back exactly (as far as no later booking depends on
    /// it), due or not.
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    pub(crate) fn undo(&self, undo: crate::reservation::Undo) {
        Ledger::refund(self, undo.key, &undo.booking, undo.origin, 0, true);
    }
}

impl<C: Clock> Ledger for RateLimiter<C> {
    fn refund(&self, _key: u64, booking: &Booking, origin: Origin, due: u64, always: bool) {
        let now = self.now();
        by_algorithm!(&self.store, e => verbs::refund(e, 0, booking, origin, due, always, now));
    }
}

impl<C: Clock> crate::reservation::sealed::Bookable for RateLimiter<C> {
    fn book(&self, n: u32) -> Result<(Decision, Option<Reservation<'_>>), InsufficientCapacity> {
        by_algorithm!(&self.store, e => verbs::book(e, self, 0, n, 0, || self.now()))
    }

    fn peek_n(&self, n: u32) -> Result<Decision, InsufficientCapacity> {
        RateLimiter::peek_n(self, n)
    }

    fn books_last(&self) -> bool {
        self.algorithm == Algorithm::LeakyBucket
    }
}

impl<C: Clock> fmt::Debug for RateLimiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("algorithm", &self.algorithm)
            .field("quota", &self.quota.load())
            .finish_non_exhaustive()
    }
}

/// The single limiter's charges (the keyed limiter's are in `keyed::charge`; `Charge` is
/// in `charge`).
impl<C: Clock> RateLimiter<C> {
    /// Charges `n` whatever is left, never denied: for a cost known only once the work
    /// is done (tokens of a response, bytes served). The limiter then owes what went
    /// past its quota, at most one burst (the part past that is not counted, see
    /// [`Charge::dropped`]), and its next requests wait until the debt is paid at the
    /// quota's rate (the buckets), or until the charged window or period has passed
    /// (the windows, the log). Check before the work with [`peek`](Self::peek) or
    /// [`check`](Self::check); give back with [`Charge::give_back`].
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Algorithm, ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(10))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let c = l.charge(15);
    /// assert_eq!((c.fit(), c.owed()), (false, 5));
    /// assert!(!l.check().is_allowed());
    /// clock.advance(Duration::from_millis(600)); // 5 paid off, 1 earned
    /// assert!(l.check().is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn charge(&self, n: u32) -> Charge<'_> {
        self.charge_owing(n, self.burst())
    }

    /// [`charge`](Self::charge) with the most the limiter may owe after it set to
    /// `max_owed` requests past its quota (a bucket owes at most 36 years of its rate
    /// whatever is asked; a window what its count field holds).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_minute(1_000)).build()?;
    /// let c = l.charge_owing(5_000, 10_000); // a long answer: 4,000 owed, 4 minutes
    /// assert_eq!((c.owed(), c.dropped()), (4_000, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn charge_owing(&self, n: u32, max_owed: u32) -> Charge<'_> {
        by_algorithm!(&self.store, e => verbs::charge(e, self, 0, n, max_owed, 0, || self.now()))
    }

    /// Gives `n` back, never below a full limiter; returns how many requests were given
    /// back. For a caller that keeps no [`Charge`] (a stateless service told to give
    /// hits back): it cannot tell what it gives back from what others took, so prefer
    /// [`Charge::give_back`], which gives back only what its charge took. A window gives
    /// back from its counts that still weigh, the current window's first (the sliding
    /// window's previous one next); a log from its newest entries,
    /// and nothing while every slot of its ring is in the window (it cannot tell an
    /// overdraft it could not log from its admissions) or while a reservation for a
    /// later time is pending.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::SlidingWindow, Quota::per_minute(5)).build()?;
    /// assert!(l.check_n(5)?.is_allowed());
    /// assert_eq!(l.give_back(7), 5); // never below empty
    /// assert_eq!(l.peek().remaining(), 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn give_back(&self, n: u32) -> u32 {
        by_algorithm!(&self.store, e => verbs::give_back(e, 0, n, 0, || self.now()))
    }
}
