//! The keyed limiter's reservations and multi-limit bookings, on the tables' `run`.

use super::KeyedRateLimiter;
use crate::algorithm::booking::Booking;
use crate::algorithm::booking::{Ledger, Origin};
use crate::algorithm::Params;
use crate::reservation::{Reservation, ReserveError};
use crate::store::{by_algorithm, verbs, KeyedStore, Store};
use crate::sync::lock;
use crate::{
    clock::Clock, decision::Decision, error::ConfigError, error::InsufficientCapacity, quota::Quota,
};
use std::hash::Hash;
use std::marker::PhantomData;
use std::time::Duration;

impl<K: Hash + ?Sized, C: Clock> KeyedRateLimiter<K, C> {
    /// Books `n` now for `key`'s request, which proceeds after
    /// [`wait_time`](Reservation::wait_time), if that is at most `max_wait`. Each
    /// key's reservations are served in the order they were booked; see
    /// [`RateLimiter::reserve`](crate::limiter::RateLimiter::reserve) for what each algorithm
    /// books. A new key is inserted as `check` would insert it (under
    /// [`OnFull::Allow`](crate::table::claim::OnFull::Allow) a new key that finds no slot is
    /// admitted at once, untracked, and its reservation has nothing to give back).
    ///
    /// # Errors
    ///
    /// [`ReserveError::InsufficientCapacity`] when `n` exceeds the burst (or is 0);
    /// [`ReserveError::TooLong`] when the wait would exceed `max_wait`;
    /// [`ReserveError::Refused`] when the table is full under
    /// [`OnFull::Deny`](crate::table::claim::OnFull::Deny). Nothing is booked then.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, Quota};
    ///
    /// let l = KeyedRateLimiter::<str, _>::builder(Algorithm::TokenBucket, Quota::per_second(2).with_burst(1))
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// assert_eq!(l.reserve("alice", 1, Duration::ZERO)?.wait_time(), Duration::ZERO);
    /// let r = l.reserve("alice", 1, Duration::from_secs(1))?;
    /// assert_eq!(r.wait_time(), Duration::from_millis(500));
    /// assert_eq!(l.reserve("bob", 1, Duration::ZERO)?.wait_time(), Duration::ZERO);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve(
        &self,
        key: &K,
        n: u32,
        max_wait: Duration,
    ) -> Result<Reservation<'_>, ReserveError> {
        self.reserve_in(key, n, max_wait, 0)
    }

    /// [`reserve`](Self::reserve) under tier `tier` (< the number of tiers).
    pub(crate) fn reserve_in(
        &self,
        key: &K,
        n: u32,
        max_wait: Duration,
        tier: usize,
    ) -> Result<Reservation<'_>, ReserveError> {
        let h = self.hasher.hash_one(key);
        by_algorithm!(&self.table, t => {
            verbs::reserve(t, self, h, n, max_wait, tier, || self.now())
        })
    }

    /// Replaces the quota of every key at run time, keeping every key's state;
    /// deciders are never blocked (each decision reads the parameters once). What
    /// carries over and the bound across the change are those of
    /// [`RateLimiter::set_quota`](crate::limiter::RateLimiter::set_quota), key by key. The
    /// table's memory does not change: a sliding log cannot grow past the limit its
    /// rings were built for.
    ///
    /// # Errors
    ///
    /// Any [`ConfigError`] `build` would return for this quota;
    /// [`ConfigError::PeriodChange`] for a window algorithm given another period;
    /// [`ConfigError::LogBeyondRing`]. Nothing changes then.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, Quota};
    ///
    /// let l = KeyedRateLimiter::<str, _>::builder(Algorithm::TokenBucket, Quota::per_second(10))
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// assert!(l.check_n("alice", 10)?.is_allowed()); // 10 used of 10
    /// l.set_quota(Quota::per_second(100))?;
    /// assert_eq!(l.check("alice").remaining(), 89); // 10 used of 100, and one more
    /// assert!(l.check_n("bob", 100)?.is_allowed()); // the new burst
    /// assert_eq!(l.quota(), Quota::per_second(100));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_quota(&self, quota: Quota) -> Result<(), ConfigError> {
        self.set_quota_in(0, quota)
    }

    /// [`set_quota`](Self::set_quota) for tier `tier` (< the number of tiers); with
    /// several tiers, a window algorithm's or the log's period stays that of tier 0.
    pub(crate) fn set_quota_in(&self, tier: usize, quota: Quota) -> Result<(), ConfigError> {
        let next = Params::new(self.algorithm, quota)?;
        let _one_at_a_time = lock(&self.setting);
        let tiers = self.quotas.len();
        by_algorithm!(&self.table, t => {
            t.set_params(tier, next, tiers, self.algorithm, || self.now())
        })?;
        self.quotas[tier].store(quota);
        Ok(())
    }

    /// Tier `tier`'s quota.
    pub(crate) fn quota_in(&self, tier: usize) -> Quota {
        self.quotas[tier].load()
    }

    /// How many quota tiers the limiter has (1 without
    /// [`tiers`](crate::keyed::KeyedRateLimiterBuilder::tiers)).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::builder(Algorithm::FixedWindow, Quota::per_minute(10))
    ///     .tiers([Quota::per_minute(100), Quota::per_minute(1_000)])
    ///     .build()?;
    /// assert_eq!(l.tier_count(), 3);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn tier_count(&self) -> usize {
        self.quotas.len()
    }

    /// Tier `tier` of this limiter (0 is the builder's quota; see
    /// [`tiers`](crate::keyed::KeyedRateLimiterBuilder::tiers)): the same verbs, deciding
    /// each key under that tier's quota. `None` past the last tier.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::SlidingWindow, Quota::per_minute(2))
    ///     .tiers([Quota::per_minute(100)])
    ///     .build()?;
    /// let pro = l.tier(1).unwrap();
    /// for _ in 0..50 {
    ///     assert!(pro.check("acme").is_allowed());
    /// }
    /// // Downgraded: what acme used still counts, against the free tier's 2.
    /// assert!(!l.check("acme").is_allowed());
    /// assert!(l.tier(2).is_none());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn tier(&self, tier: usize) -> Option<super::Tier<'_, K, C>> {
        (tier < self.quotas.len()).then(|| super::Tier::new(self, tier))
    }

    /// Forgets `key`'s usage: its next request is decided as a new key's first. Its
    /// slot stays assigned but is idle, so it is the first taken when another key
    /// needs room (memory is fixed: nothing is freed or allocated). Pending
    /// reservations of the key give nothing back after this. `false` when the table
    /// did not hold the key.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::FixedWindow, Quota::per_hour(1)).build()?;
    /// assert!(l.check("alice").is_allowed());
    /// assert!(!l.check("alice").is_allowed());
    /// assert!(l.reset("alice"));
    /// assert!(l.check("alice").is_allowed());
    /// assert!(!l.reset("nobody"));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn reset(&self, key: &K) -> bool {
        let h = self.hasher.hash_one(key);
        // A new generation of the key's state: no booking made before gives it anything.
        by_algorithm!(&self.table, t => KeyedStore::reset(t, h))
    }

    /// Removes `key`: the same as [`reset`](Self::reset) (an idle slot is a free
    /// slot in this table: it is reclaimed before any other when a new key needs
    /// room), under the name caches use.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let l = KeyedRateLimiter::<u64>::builder(Algorithm::SlidingLog, Quota::per_hour(1)).build()?;
    /// assert!(l.check(&7).is_allowed());
    /// assert_eq!(l.len(), 1);
    /// assert!(l.remove(&7));
    /// assert_eq!(l.len(), 0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn remove(&self, key: &K) -> bool {
        self.reset(key)
    }

    /// The number of keys whose state still says something (not idle) now: the keys
    /// being limited. A scan of the whole table (`O(slots)`, no locks for the packed
    /// algorithms): for monitoring, not for the request path.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::TokenBucket, Quota::per_second(10)).build()?;
    /// assert!(l.is_empty());
    /// let _ = l.check("alice");
    /// let _ = l.check("bob");
    /// assert_eq!(l.len(), 2);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        let now = self.now();
        let (_, active) = by_algorithm!(&self.table, t => KeyedStore::occupancy(t, now));
        active as usize
    }

    /// Whether no key is being limited now ([`len`](Self::len) is 0).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let l = KeyedRateLimiter::<u64>::builder(Algorithm::FixedWindow, Quota::per_second(10)).build()?;
    /// assert!(l.is_empty());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `key`'s limit, to decide together with others in
    /// [`check_all`](crate::multi::check_all). It holds the key's hash, not the key.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{check_all, Algorithm, KeyedRateLimiter, Limit, Quota};
    ///
    /// let per_second = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(5)).build()?;
    /// let per_day = KeyedRateLimiter::<u64>::builder(Algorithm::FixedWindow, Quota::new(1, std::time::Duration::from_secs(86_400))).build()?;
    /// let user = 42;
    /// let limits = [&per_second.limit(&user) as &dyn Limit, &per_day.limit(&user)];
    /// assert!(check_all(&limits, 1)?.is_allowed());
    /// assert!(!check_all(&limits, 1)?.is_allowed()); // the daily limit
    /// assert_eq!(per_second.peek(&user).remaining(), 3); // 4 left: the denial took nothing
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn limit(&self, key: &K) -> KeyLimit<'_, K, C> {
        self.limit_in(key, 0)
    }

    /// [`limit`](Self::limit) under tier `tier`.
    pub(crate) fn limit_in(&self, key: &K, tier: usize) -> KeyLimit<'_, K, C> {
        KeyLimit {
            limiter: self,
            hash: self.hasher.hash_one(key),
            tier,
            _key: PhantomData,
        }
    }
}

impl<K: Hash + ?Sized, C: Clock> KeyedRateLimiter<K, C> {
    /// Gives `undo`'s admission back exactly (as far as no later booking depends on
    /// it), due or not.
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    pub(crate) fn undo(&self, undo: crate::reservation::Undo) {
        Ledger::refund(self, undo.key, &undo.booking, undo.origin, 0, true);
    }
}

impl<K: Hash + ?Sized, C: Clock> Ledger for KeyedRateLimiter<K, C> {
    fn refund(&self, key: u64, booking: &Booking, origin: Origin, due: u64, always: bool) {
        // Only on the state the booking was made on (see `algorithm::booking::Origin`).
        let now = self.now();
        by_algorithm!(&self.table, t => verbs::refund(t, key, booking, origin, due, always, now));
    }
}

/// One key of a [`KeyedRateLimiter`], as a [`Limit`](crate::multi::Limit) for
/// [`check_all`](crate::multi::check_all); made by [`KeyedRateLimiter::limit`].
///
/// # Example
///
/// ```
/// use tollgate::{check_all, Algorithm, KeyedRateLimiter, Limit, Quota};
/// let l = KeyedRateLimiter::<str>::builder(Algorithm::SlidingLog, Quota::per_minute(1)).build()?;
/// let alice = l.limit("alice");
/// assert!(check_all(&[&alice as &dyn Limit], 1)?.is_allowed());
/// assert!(!check_all(&[&alice as &dyn Limit], 1)?.is_allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct KeyLimit<'a, K: Hash + ?Sized, C: Clock> {
    limiter: &'a KeyedRateLimiter<K, C>,
    hash: u64,
    tier: usize,
    _key: PhantomData<fn(&K)>,
}

impl<K: Hash + ?Sized, C: Clock> std::fmt::Debug for KeyLimit<'_, K, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyLimit").finish_non_exhaustive()
    }
}

impl<K: Hash + ?Sized, C: Clock> crate::reservation::sealed::Bookable for KeyLimit<'_, K, C> {
    fn book(&self, n: u32) -> Result<(Decision, Option<Reservation<'_>>), InsufficientCapacity> {
        let l = self.limiter;
        by_algorithm!(&l.table, t => verbs::book(t, l, self.hash, n, self.tier, || l.now()))
    }

    fn peek_n(&self, n: u32) -> Result<Decision, InsufficientCapacity> {
        let l = self.limiter;
        by_algorithm!(&l.table, t => verbs::peek_n(t, self.hash, n, self.tier, l.now()))
    }

    fn books_last(&self) -> bool {
        self.limiter.algorithm == crate::quota::Algorithm::LeakyBucket
    }
}
