//! `KeyedRateLimiter`: one limit per key, in a fixed-capacity table allocated at build.
//!
//! See [`KeyedRateLimiter`] for the guarantees, `table::packed` for the lock-free
//! protocol of the packed algorithms and `table::log` for the sliding log's.

mod builder;
mod charge;
mod log;
mod packed;
mod stats;
mod tier;
mod verbs;

use crate::store::{self, by_algorithm, KeyedStore, Store, Table};
use crate::sync::{CopyCell, Mutex};
pub use crate::table::OnFull;
use crate::{
    clock::Clock, clock::QuantaClock, decision::Decision, error::InsufficientCapacity,
    quota::Algorithm, quota::Quota,
};
pub use builder::KeyedRateLimiterBuilder;
pub use stats::Stats;
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
pub use tier::Tier;
pub use verbs::KeyLimit;

/// A rate limiter with one limit per key (user id, API key, IP address, route...),
/// in a fixed-capacity table allocated once at build time.
///
/// * **Fixed memory**: [`memory_bytes`](Self::memory_bytes) never changes after build,
///   whatever the number of distinct keys seen. No background thread: idle entries are
///   reclaimed on the insert path.
/// * **Capacity**: room for [`max_keys`](Self::max_keys) keys whose state is not idle
///   (1.48 slots per key, each key choosing between two groups of 12 slots).
/// * **Identity**: a key is its 64-bit hash, seeded randomly per limiter; a packed slot
///   keeps its top 44 bits (the rest hold the state's rate class and generation) and
///   the sliding log's all 64: two distinct keys share a state only if they share a
///   group and those bits, with probability about 2⁻⁴⁴ per pair present at once, and
///   an attacker who does not know the seed cannot craft collisions.
/// * **Concurrency**: `Send + Sync`; for the packed algorithms lookups, updates and
///   claims of empty slots are lock-free (one 16-byte compare-and-swap per decision);
///   replacing an entry takes the key's claim lock (one of up to 4,096) for one short
///   scan, so new keys of one shard are not serialized on one mutex. Concurrent
///   callers never get more than the quota between them.
///
/// # Example
///
/// ```
/// use std::net::IpAddr;
/// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
///
/// let limiter = KeyedRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(10).with_burst(2))
///     .max_keys(10_000)
///     .build()?;
/// let ip: IpAddr = "192.0.2.1".parse().unwrap();
/// assert!(limiter.check(&ip).is_allowed());
/// assert!(limiter.check(&ip).is_allowed());
/// assert!(!limiter.check(&ip).is_allowed()); // burst of 2 spent
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
pub struct KeyedRateLimiter<K: Hash + ?Sized, C: Clock = QuantaClock> {
    table: Table,
    hasher: ahash::RandomState,
    clock: C,
    algorithm: Algorithm,
    /// Each tier's quota (tier 0 first).
    quotas: Box<[CopyCell<Quota>]>,
    /// Serializes `set_quota` calls (deciders never take it).
    setting: Mutex<()>,
    max_keys: usize,
    slots: usize,
    _key: PhantomData<fn(&K)>,
}

impl<K: Hash + ?Sized, C: Clock> KeyedRateLimiter<K, C> {
    /// Decides one request of cost 1 for `key`, now.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<str>::builder(Algorithm::FixedWindow, Quota::per_hour(1)).build()?;
    /// assert!(limiter.check("alice").is_allowed());
    /// assert!(!limiter.check("alice").is_allowed());
    /// assert!(limiter.check("bob").is_allowed());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    pub fn check(&self, key: &K) -> Decision {
        self.check_one(key, 0)
    }

    /// Decides one request of cost `n` for `key`, now. A cost of 0 changes nothing
    /// (and does not insert the key): it reports the key's current state.
    ///
    /// # Errors
    ///
    /// [`InsufficientCapacity`] when `n` exceeds the per-key capacity (the burst for
    /// the buckets, the limit for the others).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(10)).build()?;
    /// assert!(limiter.check_n(&1, 10)?.is_allowed());
    /// assert!(!limiter.check_n(&1, 1)?.is_allowed());
    /// assert!(limiter.check_n(&2, 11).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check_n(&self, key: &K, n: u32) -> Result<Decision, InsufficientCapacity> {
        self.check_in(key, n, 0)
    }

    /// The decision a request of cost 1 for `key` would get now, consuming nothing and
    /// inserting nothing (a key the table does not hold is reported as fresh). Another
    /// caller may take the capacity between a peek and a check.
    ///
    /// Its [`remaining`](crate::decision::Decision::remaining) is, as for every decision, what
    /// would be left *after* that request (after one check on a 5-per-hour key,
    /// `peek(&key).remaining()` is 3); what is left now is
    /// [`peek_n(&key, 0)`](Self::peek_n)'s (4 there).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<str>::builder(Algorithm::TokenBucket, Quota::per_hour(1)).build()?;
    /// assert!(limiter.peek("alice").is_allowed());
    /// assert_eq!(limiter.stats().occupied, 0); // a peek inserts nothing
    /// assert!(limiter.check("alice").is_allowed());
    /// assert!(!limiter.peek("alice").is_allowed());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use = "a peek changes nothing; it only reports"]
    pub fn peek(&self, key: &K) -> Decision {
        self.peek_in(key, 1, 0)
    }

    /// What a request of cost `n` for `key` would get now, consuming and inserting
    /// nothing: [`peek`](Self::peek) for any cost (`peek_n(&key, 0)` reports the
    /// key's state without asking for anything).
    ///
    /// # Errors
    ///
    /// [`InsufficientCapacity`] when `n` exceeds the burst (it could never be
    /// admitted).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<str>::builder(Algorithm::TokenBucket, Quota::per_hour(5)).build()?;
    /// assert!(limiter.check_n("alice", 3)?.is_allowed());
    /// assert!(limiter.peek_n("alice", 2)?.is_allowed());
    /// assert!(!limiter.peek_n("alice", 3)?.is_allowed());
    /// assert_eq!(limiter.peek("alice").remaining(), 1); // the peeks took nothing
    /// assert!(limiter.peek_n("alice", 6).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn peek_n(&self, key: &K, n: u32) -> Result<Decision, InsufficientCapacity> {
        self.peek_n_in(key, n, 0)
    }

    /// [`peek_n`](Self::peek_n) under tier `tier`.
    pub(crate) fn peek_n_in(
        &self,
        key: &K,
        n: u32,
        tier: usize,
    ) -> Result<Decision, InsufficientCapacity> {
        let (h, now) = (self.hasher.hash_one(key), self.now());
        by_algorithm!(&self.table, t => store::verbs::peek_n(t, h, n, tier, now))
    }

    /// What `n` for `key` under tier `tier` would get now, consuming nothing.
    pub(crate) fn peek_in(&self, key: &K, n: u32, tier: usize) -> Decision {
        self.peek_hashed(self.hasher.hash_one(key), n, tier)
    }

    /// What `n` (at most the tier's burst) for the key hashed to `h` under tier
    /// `tier` would get now, consuming nothing.
    pub(crate) fn peek_hashed(&self, h: u64, n: u32, tier: usize) -> Decision {
        let now = self.now();
        by_algorithm!(&self.table, t => t.peek(h, now, n, t.params(tier)))
    }

    #[inline]
    fn now(&self) -> u64 {
        crate::algorithm::now(&self.clock)
    }

    /// One request of cost 1 for `key` under tier `tier` (< the number of tiers):
    /// every burst is at least 1, so it always fits.
    #[inline]
    pub(crate) fn check_one(&self, key: &K, tier: usize) -> Decision {
        let h = self.hasher.hash_one(key);
        by_algorithm!(&self.table, t => store::verbs::check_one(t, h, tier, || self.now()))
    }

    /// One request of cost `n` for `key` under tier `tier`, checked against the
    /// burst of the parameters it is then decided with (read once).
    #[inline]
    pub(crate) fn check_in(
        &self,
        key: &K,
        n: u32,
        tier: usize,
    ) -> Result<Decision, InsufficientCapacity> {
        let h = self.hasher.hash_one(key);
        by_algorithm!(&self.table, t => store::verbs::check_n(t, h, n, tier, || self.now()))
    }

    /// The number of keys with a non-idle state the table was built to hold.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(1))
    ///     .max_keys(500)
    ///     .build()?;
    /// assert_eq!(l.max_keys(), 500);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// The old name of [`max_keys`](Self::max_keys).
    ///
    /// # Example
    ///
    /// ```
    /// # #![allow(deprecated)]
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(1))
    ///     .max_keys(500)
    ///     .build()?;
    /// assert_eq!(l.capacity(), 500);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    #[deprecated(
        since = "0.2.0",
        note = "`capacity` meant both keys and burst: use `max_keys()`"
    )]
    pub fn capacity(&self) -> usize {
        self.max_keys
    }

    /// The most one key can ever be admitted at once (the burst for the buckets, the
    /// limit for the others): a larger cost is refused with [`InsufficientCapacity`].
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(9).with_burst(3))
    ///     .build()?;
    /// assert_eq!(l.burst(), 3);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn burst(&self) -> u32 {
        self.burst_in(0)
    }

    /// Tier `tier`'s burst.
    pub(crate) fn burst_in(&self, tier: usize) -> u32 {
        by_algorithm!(&self.table, t => t.burst(&t.params(tier)))
    }

    /// The old name of [`burst`](Self::burst).
    ///
    /// # Example
    ///
    /// ```
    /// # #![allow(deprecated)]
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(9).with_burst(3))
    ///     .build()?;
    /// assert_eq!(l.burst(), 3);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    #[deprecated(since = "0.2.0", note = "use `burst()`")]
    pub fn capacity_per_key(&self) -> u32 {
        self.burst()
    }

    /// Whether the packed table's 16-byte slot word is lock-free on this machine
    /// (`cmpxchg16b` on x86_64, `casp`/`ldxp` on aarch64). Where it is not (32-bit
    /// targets, wasm, x86_64 CPUs without `cmpxchg16b`), `portable-atomic`'s fallback
    /// guards each slot word with one of a fixed set of spinlocks: still exact, never
    /// a double admission, but no longer lock-free. The sliding log's table locks per
    /// slot whatever the target. Log it at start-up if it matters to you.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(9)).build()?;
    /// if !l.is_lock_free() {
    ///     eprintln!("tollgate: 16-byte atomics are emulated with locks on this CPU");
    /// }
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn is_lock_free(&self) -> bool {
        by_algorithm!(&self.table, t => t.is_lock_free())
    }

    /// Whether the table's slots (the sliding log: its rings; its slots are advised
    /// alike when they take over 4 MiB) were advised onto transparent huge pages at
    /// build. Linux only, for tables over 4 MiB, where the
    /// kernel's `transparent_hugepage` setting is `madvise` or `always`; one TLB entry
    /// then covers 2 MiB of the table instead of 4 KiB, which a lookup in a table of tens
    /// of megabytes feels. Elsewhere, or with `TOLLGATE_HUGE_PAGES=0` in the environment,
    /// the table lives on ordinary pages, silently: nothing else changes.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let small = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(9))
    ///     .max_keys(1_000)
    ///     .build()?;
    /// assert!(!small.huge_pages()); // 24 KB: ordinary pages
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn huge_pages(&self) -> bool {
        by_algorithm!(&self.table, t => KeyedStore::huge_pages(t))
    }

    /// Bytes the limiter occupies: the table (slots, shard counters and, for the
    /// sliding log, every key's ring). Fixed at build: it never changes, whatever the
    /// number of distinct keys seen.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::builder(Algorithm::SlidingWindow, Quota::per_second(100))
    ///     .max_keys(16_384)
    ///     .build()?;
    /// let before = l.memory_bytes();
    /// for key in 0..100_000 {
    ///     let _ = l.check(&key);
    /// }
    /// assert_eq!(l.memory_bytes(), before);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn memory_bytes(&self) -> usize {
        let table = by_algorithm!(&self.table, t => KeyedStore::memory_bytes(t));
        std::mem::size_of::<Self>() + table
    }

    /// Bytes of the sliding log's ring per slot (`8 × limit`, sized from the quota at
    /// build); 0 for the packed algorithms, whose state is part of the slot.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::builder(Algorithm::SlidingLog, Quota::per_second(10)).build()?;
    /// assert_eq!(l.ring_bytes(), 80);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn ring_bytes(&self) -> usize {
        by_algorithm!(&self.table, t => KeyedStore::ring_bytes(t))
    }

    /// The algorithm every key runs.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::builder(Algorithm::SlidingLog, Quota::per_second(3)).build()?;
    /// assert_eq!(l.algorithm(), Algorithm::SlidingLog);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The quota every key gets.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let q = Quota::per_minute(30);
    /// let l = KeyedRateLimiter::<u64>::builder(Algorithm::FixedWindow, q).build()?;
    /// assert_eq!(l.quota(), q);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn quota(&self) -> Quota {
        self.quotas[0].load()
    }

    /// The clock this limiter reads.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, Clock, KeyedRateLimiter, ManualClock, Quota};
    /// let l = KeyedRateLimiter::<u64, _>::builder(Algorithm::FixedWindow, Quota::per_second(1))
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// assert_eq!(l.clock().now(), 0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn clock(&self) -> &C {
        &self.clock
    }
}

impl<K: Hash + ?Sized, C: Clock> fmt::Debug for KeyedRateLimiter<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRateLimiter")
            .field("algorithm", &self.algorithm)
            .field("quota", &self.quota())
            .field("tiers", &self.quotas.len())
            .field("max_keys", &self.max_keys)
            .field("slots", &self.slots)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn limiter_is_send_and_sync_for_unsized_keys() {
        assert_send_sync::<KeyedRateLimiter<str>>();
        assert_send_sync::<KeyedRateLimiter<[u8], ManualClock>>();
    }

    #[test]
    fn packed_slots_are_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<crate::sync::AtomicU128>(), 16);
    }
}
