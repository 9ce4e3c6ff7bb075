//! The keyed limiter's charges and give-backs (see [`Charge`]).

use super::KeyedRateLimiter;
use crate::store::{by_algorithm, verbs, Store};
use crate::{charge::Charge, clock::Clock};
use std::hash::Hash;

impl<K: Hash + ?Sized, C: Clock> KeyedRateLimiter<K, C> {
    /// Charges `n` to `key` whatever is left, never denied (see
    /// [`RateLimiter::charge`](crate::limiter::RateLimiter::charge)): the key then owes what went
    /// past its quota, at most one burst, and its next requests wait the debt out. A
    /// new key is inserted as `check` would insert it; under
    /// [`OnFull::Deny`](crate::table::claim::OnFull::Deny) or [`OnFull::Allow`](crate::table::claim::OnFull::Allow)
    /// a new key that finds no slot is not counted ([`Charge::tracked`] is `false`).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, Quota};
    /// // Tokens per API key: 1,000 a minute.
    /// let tokens = KeyedRateLimiter::<str, _>::builder(Algorithm::TokenBucket, Quota::per_minute(1_000))
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// assert!(tokens.peek("key-1").is_allowed());
    /// let used = tokens.charge("key-1", 1_250);
    /// assert_eq!(used.owed(), 250);
    /// assert!(!tokens.peek("key-1").is_allowed());
    /// assert!(tokens.peek("key-2").is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn charge(&self, key: &K, n: u32) -> Charge<'_> {
        self.charge_in(key, n, None, 0)
    }

    /// [`charge`](Self::charge) with the most the key may owe after it set to
    /// `max_owed` requests past its quota (see
    /// [`RateLimiter::charge_owing`](crate::limiter::RateLimiter::charge_owing)).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::TokenBucket, Quota::per_minute(100)).build()?;
    /// assert_eq!(l.charge_owing("a", 1_000, 50).dropped(), 850);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn charge_owing(&self, key: &K, n: u32, max_owed: u32) -> Charge<'_> {
        self.charge_in(key, n, Some(max_owed), 0)
    }

    /// Gives `n` back to `key`, never below an empty state; returns how many requests
    /// were given back (0 for a key the table does not hold). For a caller that keeps
    /// no [`Charge`]; see [`RateLimiter::give_back`](crate::limiter::RateLimiter::give_back).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<str>::builder(Algorithm::FixedWindow, Quota::per_minute(5)).build()?;
    /// let _ = l.charge("a", 8);
    /// assert_eq!(l.give_back("a", 4), 4);
    /// assert_eq!(l.peek("a").remaining(), 0); // 4 of 5 counted, and the peeked one
    /// assert_eq!(l.give_back("b", 4), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn give_back(&self, key: &K, n: u32) -> u32 {
        self.give_back_in(key, n, 0)
    }

    /// [`charge`](Self::charge) under tier `tier`, the debt bounded by `max_owed` (the
    /// tier's burst when `None`).
    pub(crate) fn charge_in(
        &self,
        key: &K,
        n: u32,
        max_owed: Option<u32>,
        tier: usize,
    ) -> Charge<'_> {
        let h = self.hasher.hash_one(key);
        by_algorithm!(&self.table, t => {
            let owed = max_owed.unwrap_or_else(|| t.burst(&t.params(tier)));
            verbs::charge(t, self, h, n, owed, tier, || self.now())
        })
    }

    /// [`give_back`](Self::give_back) under tier `tier`.
    pub(crate) fn give_back_in(&self, key: &K, n: u32, tier: usize) -> u32 {
        let h = self.hasher.hash_one(key);
        by_algorithm!(&self.table, t => verbs::give_back(t, h, n, tier, || self.now()))
    }
}
