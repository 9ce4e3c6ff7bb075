//! One quota tier of a keyed limiter: the same verbs, under that tier's quota.

use super::verbs::KeyLimit;
use super::KeyedRateLimiter;
use crate::{
    charge::Charge, clock::Clock, decision::Decision, error::ConfigError,
    error::InsufficientCapacity, quota::Quota, reservation::Reservation, reservation::ReserveError,
};
use std::fmt;
use std::hash::Hash;
use std::time::Duration;

/// One quota tier of a [`KeyedRateLimiter`] (see
/// [`KeyedRateLimiterBuilder::tiers`](crate::keyed::KeyedRateLimiterBuilder::tiers)); made by
/// [`KeyedRateLimiter::tier`]. Every key shares one table; each request is decided
/// under the tier it names, and a key's state carries from one tier to another.
///
/// # Example
///
/// ```
/// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
///
/// let l = KeyedRateLimiter::<u64>::builder(Algorithm::FixedWindow, Quota::per_hour(10))
///     .tiers([Quota::per_hour(1_000)])
///     .build()?;
/// let pro = l.tier(1).unwrap();
/// assert_eq!(pro.index(), 1);
/// assert_eq!(pro.check(&42).limit(), 1_000);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
pub struct Tier<'a, K: Hash + ?Sized, C: Clock> {
    limiter: &'a KeyedRateLimiter<K, C>,
    tier: usize,
}

impl<K: Hash + ?Sized, C: Clock> Clone for Tier<'_, K, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K: Hash + ?Sized, C: Clock> Copy for Tier<'_, K, C> {}

impl<K: Hash + ?Sized, C: Clock> fmt::Debug for Tier<'_, K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tier")
            .field("index", &self.tier)
            .field("quota", &self.quota())
            .finish()
    }
}

impl<'a, K: Hash + ?Sized, C: Clock> Tier<'a, K, C> {
    /// Tier `tier` (< the limiter's tier count) of `limiter`.
    pub(crate) fn new(limiter: &'a KeyedRateLimiter<K, C>, tier: usize) -> Self {
        Tier { limiter, tier }
    }

    /// This tier's index.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(1)).build()?;
    /// assert_eq!(l.tier(0).unwrap().index(), 0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn index(&self) -> usize {
        self.tier
    }

    /// Decides one request of cost 1 for `key` under this tier, now.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::TokenBucket, Quota::per_hour(1))
    ///     .tiers([Quota::per_hour(2)])
    ///     .build()?;
    /// let t = l.tier(1).unwrap();
    /// assert!(t.check("a").is_allowed());
    /// assert!(t.check("a").is_allowed());
    /// assert!(!t.check("a").is_allowed());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn check(&self, key: &K) -> Decision {
        self.limiter.check_one(key, self.tier)
    }

    /// Decides one request of cost `n` for `key` under this tier, now.
    ///
    /// # Errors
    ///
    /// [`InsufficientCapacity`] when `n` exceeds this tier's burst.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::TokenBucket, Quota::per_second(1))
    ///     .tiers([Quota::per_second(50)])
    ///     .build()?;
    /// assert!(l.tier(1).unwrap().check_n("a", 50)?.is_allowed());
    /// assert!(l.tier(0).unwrap().check_n("b", 50).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_n(&self, key: &K, n: u32) -> Result<Decision, InsufficientCapacity> {
        self.limiter.check_in(key, n, self.tier)
    }

    /// What a request of cost 1 for `key` would get under this tier now, consuming
    /// and inserting nothing.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::SlidingLog, Quota::per_hour(1))
    ///     .tiers([Quota::per_hour(5)])
    ///     .build()?;
    /// assert_eq!(l.tier(1).unwrap().peek("a").remaining(), 4);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use = "a peek changes nothing; it only reports"]
    pub fn peek(&self, key: &K) -> Decision {
        self.limiter.peek_in(key, 1, self.tier)
    }

    /// What a request of cost `n` for `key` would get under this tier now, consuming
    /// and inserting nothing; see [`KeyedRateLimiter::peek_n`].
    ///
    /// # Errors
    ///
    /// [`InsufficientCapacity`] when `n` exceeds this tier's burst.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::FixedWindow, Quota::per_hour(1))
    ///     .tiers([Quota::per_hour(5)])
    ///     .build()?;
    /// assert!(l.tier(1).unwrap().peek_n("a", 5)?.is_allowed());
    /// assert!(l.peek_n("a", 5).is_err()); // more than tier 0's burst
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn peek_n(&self, key: &K, n: u32) -> Result<Decision, InsufficientCapacity> {
        self.limiter.peek_n_in(key, n, self.tier)
    }

    /// Books `n` for `key` under this tier; see [`KeyedRateLimiter::reserve`].
    ///
    /// # Errors
    ///
    /// As [`KeyedRateLimiter::reserve`], against this tier's burst.
    ///
    /// # Example
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, Quota};
    /// let l = KeyedRateLimiter::<str, _>::builder(Algorithm::TokenBucket, Quota::per_second(1).with_burst(1))
    ///     .tiers([Quota::per_second(10).with_burst(1)])
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// let pro = l.tier(1).unwrap();
    /// let _ = pro.reserve("a", 1, Duration::ZERO)?;
    /// assert_eq!(pro.reserve("a", 1, Duration::from_secs(1))?.wait_time(), Duration::from_millis(100));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve(
        &self,
        key: &K,
        n: u32,
        max_wait: Duration,
    ) -> Result<Reservation<'a>, ReserveError> {
        self.limiter.reserve_in(key, n, max_wait, self.tier)
    }

    /// Charges `n` to `key` under this tier whatever is left (see
    /// [`KeyedRateLimiter::charge`]); the debt is bounded by this tier's burst.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::TokenBucket, Quota::per_minute(100))
    ///     .tiers([Quota::per_minute(1_000)])
    ///     .build()?;
    /// let pro = l.tier(1).unwrap();
    /// assert!(pro.charge("a", 900).fit());
    /// assert!(!l.charge("b", 900).fit());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn charge(&self, key: &K, n: u32) -> Charge<'a> {
        self.limiter.charge_in(key, n, None, self.tier)
    }

    /// [`charge`](Self::charge) with the most the key may owe after it set to
    /// `max_owed` requests past this tier's quota.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::TokenBucket, Quota::per_minute(100))
    ///     .tiers([Quota::per_minute(1_000)])
    ///     .build()?;
    /// assert_eq!(l.tier(1).unwrap().charge_owing("a", 1_500, 100).dropped(), 400);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn charge_owing(&self, key: &K, n: u32, max_owed: u32) -> Charge<'a> {
        self.limiter.charge_in(key, n, Some(max_owed), self.tier)
    }

    /// Gives `n` back to `key` under this tier, never below an empty state (see
    /// [`KeyedRateLimiter::give_back`]).
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::TokenBucket, Quota::per_minute(100))
    ///     .tiers([Quota::per_minute(1_000)])
    ///     .build()?;
    /// let pro = l.tier(1).unwrap();
    /// assert!(pro.check_n("a", 10)?.is_allowed());
    /// assert_eq!(pro.give_back("a", 4), 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn give_back(&self, key: &K, n: u32) -> u32 {
        self.limiter.give_back_in(key, n, self.tier)
    }

    /// `key`'s limit under this tier, for [`check_all`](crate::multi::check_all).
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{check_all, Algorithm, KeyedRateLimiter, Limit, Quota};
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::TokenBucket, Quota::per_hour(1))
    ///     .tiers([Quota::per_hour(3)])
    ///     .build()?;
    /// let limit = l.tier(1).unwrap().limit("a");
    /// assert!(check_all(&[&limit as &dyn Limit], 3)?.is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn limit(&self, key: &K) -> KeyLimit<'a, K, C> {
        self.limiter.limit_in(key, self.tier)
    }

    /// Replaces this tier's quota at run time; see [`KeyedRateLimiter::set_quota`].
    ///
    /// # Errors
    ///
    /// As [`KeyedRateLimiter::set_quota`]; with several tiers, a window algorithm's or
    /// the sliding log's period must stay tier 0's ([`ConfigError::TierPeriod`]).
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::FixedWindow, Quota::per_hour(10))
    ///     .tiers([Quota::per_hour(100)])
    ///     .build()?;
    /// l.tier(1).unwrap().set_quota(Quota::per_hour(500))?;
    /// assert_eq!(l.tier(1).unwrap().quota(), Quota::per_hour(500));
    /// assert!(l.tier(1).unwrap().set_quota(Quota::per_minute(5)).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_quota(&self, quota: Quota) -> Result<(), ConfigError> {
        self.limiter.set_quota_in(self.tier, quota)
    }

    /// This tier's quota.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::TokenBucket, Quota::per_hour(1))
    ///     .tiers([Quota::per_hour(7)])
    ///     .build()?;
    /// assert_eq!(l.tier(1).unwrap().quota(), Quota::per_hour(7));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn quota(&self) -> Quota {
        self.limiter.quota_in(self.tier)
    }

    /// This tier's burst (the most admitted at once).
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::TokenBucket, Quota::per_hour(1))
    ///     .tiers([Quota::per_hour(70).with_burst(7)])
    ///     .build()?;
    /// assert_eq!(l.tier(1).unwrap().burst(), 7);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn burst(&self) -> u32 {
        self.limiter.burst_in(self.tier)
    }
}
