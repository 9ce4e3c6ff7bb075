//! Peeks on the hybrid mode: what a request would get now, from this instance's view
//! of the key, changing, counting and inserting nothing.

use super::{HybridRateLimiter, RedisKey, KEY_BUF};
use crate::{decision::Decision, error::InsufficientCapacity};

impl HybridRateLimiter {
    /// The decision a request of cost 1 for `key` would get now, locally, taking
    /// nothing: this instance's view of the key's counts (as [`check`](Self::check)
    /// decides) is read under its slot's lock and left as it was. Nothing is inserted:
    /// a key the table does not hold is reported whole (also while the table is full,
    /// where a check of a new key is refused), nothing is marked for the next sync, and
    /// the peek is not counted in [`HybridStats::decisions`](super::HybridStats::decisions).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::HybridRateLimiter) {
    /// if limiter.peek("tenant-3").is_allowed() {
    ///     // a check now would be admitted (asking took nothing)
    /// }
    /// # }
    /// ```
    #[must_use = "a peek changes nothing; it only reports"]
    pub fn peek<K: RedisKey + ?Sized>(&self, key: &K) -> Decision {
        let mut buf = [0; KEY_BUF];
        self.inner.peek(key.key_bytes(&mut buf), 1)
    }

    /// What a request of cost `n` for `key` would get now, locally, taking and
    /// inserting nothing (see [`peek`](Self::peek)): the decision
    /// [`check_n`](Self::check_n) of `n` would give. `peek_n(key, 0)` reports the key's
    /// state without asking for anything: [`remaining`](Decision::remaining) is what is
    /// left now (0 while the key owes after a [`charge`](Self::charge)).
    ///
    /// # Errors
    ///
    /// [`InsufficientCapacity`] when `n` exceeds the limit.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::HybridRateLimiter) -> Result<(), tollgate::InsufficientCapacity> {
    /// // Check a token budget before the work, charge what it used after.
    /// if limiter.peek_n("tenant-3", 0)?.remaining() > 0 {
    ///     let c = limiter.charge("tenant-3", 1_250);
    ///     println!("owed {}", c.owed());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn peek_n<K: RedisKey + ?Sized>(
        &self,
        key: &K,
        n: u32,
    ) -> Result<Decision, InsufficientCapacity> {
        self.fits(n)?;
        let mut buf = [0; KEY_BUF];
        Ok(self.inner.peek(key.key_bytes(&mut buf), n))
    }
}
