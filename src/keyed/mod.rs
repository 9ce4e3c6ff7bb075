//! `KeyedRateLimiter`: one limit per key, in a fixed-capacity table allocated at build.
//!
//! See [`KeyedRateLimiter`] for the guarantees, `table::packed` for the lock-free
//! protocol of the packed algorithms and `table::log` for the sliding log's.

mod tier;
mod verbs;

use crate::algorithm::Params;
use crate::sync::{CopyCell, Mutex};
use crate::table::geometry::{Geometry, MAX_CAPACITY};
use crate::table::log::LogTable;
use crate::table::packed::PackedTable;
pub use crate::table::OnFull;
use crate::{Algorithm, Clock, ConfigError, Decision, InsufficientCapacity, QuantaClock, Quota};
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
pub use tier::Tier;
pub use verbs::KeyLimit;

/// A snapshot of a [`KeyedRateLimiter`]'s counters and occupancy.
///
/// The counters are summed over per-shard, cache-padded counters updated with relaxed
/// atomics: under concurrent use the snapshot is not one instant, but every count is
/// exact once the callers have stopped. Peeks (`check_n(key, 0)`) are not counted.
///
/// # Example
///
/// ```
/// use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, Quota};
///
/// let limiter = KeyedRateLimiter::<str, _>::builder(Algorithm::FixedWindow, Quota::per_second(1))
///     .max_keys(100)
///     .clock(ManualClock::new())
///     .build()?;
/// let _ = limiter.check("alice");
/// let _ = limiter.check("alice");
/// let stats = limiter.stats();
/// assert_eq!((stats.allowed, stats.rejected, stats.evictions), (1, 1, 0));
/// assert_eq!(stats.occupied, 1);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Requests admitted (including untracked admissions under [`OnFull::Allow`]).
    pub allowed: u64,
    /// Requests denied (including new keys refused under [`OnFull::Deny`]).
    pub rejected: u64,
    /// Entries that still said something, forgotten to make room under
    /// [`OnFull::Evict`].
    pub evictions: u64,
    /// Idle entries whose slot was reused for a new key (not evictions: an idle entry
    /// decides exactly as a fresh key would).
    pub idle_reclaims: u64,
    /// Requests of new keys admitted untracked under [`OnFull::Allow`].
    pub untracked: u64,
    /// Requests of new keys refused under [`OnFull::Deny`].
    pub refused: u64,
    /// Slots holding a key (idle or not), at the time of the snapshot.
    pub occupied: u64,
    /// Slots holding a key whose state is not idle, at the time of the snapshot.
    pub active: u64,
    /// Total slots in the table (fixed at build).
    pub slots: u64,
}

/// Tier parameters split by kind (every tier of one limiter has the same kind).
enum Split {
    Packed(Vec<crate::algorithm::PackedParams>),
    Log(Vec<crate::algorithm::sliding_log::SlidingLog>),
}

fn split(tiers: Vec<Params>) -> Split {
    let mut packed = Vec::new();
    let mut log = Vec::new();
    for t in tiers {
        match t {
            Params::Packed(p) => packed.push(p),
            Params::Log(l) => log.push(l),
        }
    }
    if log.is_empty() {
        Split::Packed(packed)
    } else {
        Split::Log(log)
    }
}

/// Checks that tier `tier`'s parameters can share a table with tier 0's: window and
/// log states count in their period, so those tiers must share it.
fn tier_fits(
    algorithm: Algorithm,
    first: &Params,
    p: &Params,
    tier: usize,
) -> Result<(), ConfigError> {
    let period = |p: &Params| match p {
        Params::Packed(crate::algorithm::PackedParams::Fixed(w)) => Some(w.period()),
        Params::Packed(crate::algorithm::PackedParams::Sliding(w)) => Some(w.period()),
        Params::Log(l) => Some(l.period()),
        Params::Packed(crate::algorithm::PackedParams::Gcra(_)) => None,
    };
    match (period(first), period(p)) {
        (Some(a), Some(b)) if a != b => Err(ConfigError::TierPeriod {
            algorithm,
            tier,
            period: std::time::Duration::from_nanos(b),
            expected: std::time::Duration::from_nanos(a),
        }),
        _ => Ok(()),
    }
}

/// A rate limiter with one limit per key (user id, API key, IP address, route...),
/// in a fixed-capacity table allocated once at build time.
///
/// * **Fixed memory**: [`memory_bytes`](Self::memory_bytes) never changes after build,
///   whatever the number of distinct keys seen. No background thread: idle entries are
///   reclaimed on the insert path.
/// * **Capacity**: room for [`capacity`](Self::capacity) keys whose state is not idle
///   (1.48 slots per key, each key choosing between two windows of 12 slots).
/// * **Identity**: a key is its 64-bit hash, seeded randomly per limiter; a packed slot
///   keeps its top 44 bits (the rest hold the state's rate class and generation) and
///   the sliding log's all 64: two distinct keys share a state only if they share a
///   window and those bits, with probability about 2⁻⁴⁴ per pair present at once, and
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

enum Table {
    Packed(PackedTable),
    Log(LogTable),
}

impl<K: Hash + ?Sized> KeyedRateLimiter<K> {
    /// Starts building a keyed limiter running `algorithm` on `quota` for every key,
    /// with the default [`QuantaClock`], room for 65,536 keys and [`OnFull::Evict`].
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<[u8]>::builder(Algorithm::SlidingWindow, Quota::per_minute(60))
    ///     .max_keys(1 << 12)
    ///     .build()?;
    /// assert!(limiter.check(b"api-key-1".as_slice()).is_allowed());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn builder(algorithm: Algorithm, quota: Quota) -> KeyedRateLimiterBuilder<K, QuantaClock> {
        KeyedRateLimiterBuilder {
            algorithm,
            quota,
            clock: QuantaClock::new(),
            max_keys: 1 << 16,
            on_full: OnFull::Evict,
            shards: None,
            seed: None,
            stats: true,
            tiers: Vec::new(),
            _key: PhantomData,
        }
    }
}

/// Builds a [`KeyedRateLimiter`]; made by [`KeyedRateLimiter::builder`].
///
/// # Example
///
/// ```
/// use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, OnFull, Quota};
///
/// let limiter = KeyedRateLimiter::<u64, _>::builder(Algorithm::LeakyBucket, Quota::per_second(5))
///     .max_keys(4_000)
///     .on_full(OnFull::Deny)
///     .shards(4)
///     .clock(ManualClock::new())
///     .build()?;
/// assert_eq!(limiter.max_keys(), 4_000);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[must_use = "a builder does nothing until .build() is called"]
pub struct KeyedRateLimiterBuilder<K: ?Sized, C: Clock> {
    algorithm: Algorithm,
    quota: Quota,
    clock: C,
    max_keys: usize,
    on_full: OnFull,
    shards: Option<usize>,
    seed: Option<u64>,
    stats: bool,
    /// Quotas of tiers 1.. (tier 0 is `quota`).
    tiers: Vec<Quota>,
    _key: PhantomData<fn(&K)>,
}

impl<K: ?Sized, C: Clock> fmt::Debug for KeyedRateLimiterBuilder<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRateLimiterBuilder")
            .field("algorithm", &self.algorithm)
            .field("quota", &self.quota)
            .field("max_keys", &self.max_keys)
            .field("on_full", &self.on_full)
            .field("shards", &self.shards)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + ?Sized, C: Clock> KeyedRateLimiterBuilder<K, C> {
    /// Room for `n` keys whose state is not idle; the memory is fixed at build. Must be
    /// between 1 and 2³² (less on 32-bit targets; checked by [`build`](Self::build)).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(1))
    ///     .max_keys(16_384)
    ///     .build()?;
    /// assert_eq!(limiter.max_keys(), 16_384);
    /// assert!(limiter.memory_bytes() <= 16_384 * 25);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn max_keys(mut self, n: usize) -> Self {
        self.max_keys = n;
        self
    }

    /// The old name of [`max_keys`](Self::max_keys).
    ///
    /// # Example
    ///
    /// ```
    /// # #![allow(deprecated)]
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(1))
    ///     .capacity(100)
    ///     .build()?;
    /// assert_eq!(limiter.max_keys(), 100);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[deprecated(
        since = "0.2.0",
        note = "`capacity` meant both keys and burst: use `max_keys(n)`"
    )]
    pub fn capacity(self, n: usize) -> Self {
        self.max_keys(n)
    }

    /// The bytes [`build`](Self::build) will allocate for this configuration, without
    /// allocating them: check a configuration (a sliding log with a large limit keeps
    /// `8 × limit` bytes per slot) before committing the memory.
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] that [`build`](Self::build) would return for the quota, the
    /// key count or the shard count; [`ConfigError::InvalidCapacity`] when the table
    /// exceeds the address space.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let b = KeyedRateLimiter::<u64>::builder(Algorithm::SlidingLog, Quota::per_minute(100))
    ///     .max_keys(10_000);
    /// let bytes = b.memory_bytes()?;
    /// assert!(bytes > 10_000 * 800); // 100 timestamps of 8 bytes per key, plus slack
    /// let limiter = b.build()?;
    /// assert!(limiter.memory_bytes() >= bytes);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn memory_bytes(&self) -> Result<usize, ConfigError> {
        let tiers = self.tier_params()?;
        let geo = Geometry::new(self.max_keys, self.shards)?;
        let table = match split(tiers) {
            Split::Packed(p) => PackedTable::bytes_for(&geo, p.len()),
            Split::Log(l) => {
                let ring = l.iter().map(|l| l.limit()).max().unwrap_or(0);
                LogTable::bytes_for(&geo, ring, l.len())
            }
        };
        table
            .and_then(|t| t.checked_add(std::mem::size_of::<KeyedRateLimiter<K, C>>()))
            .ok_or(ConfigError::InvalidCapacity {
                requested: self.max_keys,
                max: MAX_CAPACITY,
            })
    }

    /// What to do with a new key when its windows hold no idle slot.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, OnFull, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<str>::builder(Algorithm::FixedWindow, Quota::per_second(1))
    ///     .on_full(OnFull::Allow)
    ///     .build()?;
    /// assert!(limiter.check("route:/login").is_allowed());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn on_full(mut self, policy: OnFull) -> Self {
        self.on_full = policy;
        self
    }

    /// Uses `clock` instead of the default.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = KeyedRateLimiter::<u64, _>::builder(Algorithm::FixedWindow, Quota::per_second(1))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// assert!(limiter.check(&7).is_allowed());
    /// assert!(!limiter.check(&7).is_allowed());
    /// clock.advance(Duration::from_secs(1));
    /// assert!(limiter.check(&7).is_allowed());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn clock<C2: Clock>(self, clock: C2) -> KeyedRateLimiterBuilder<K, C2> {
        KeyedRateLimiterBuilder {
            algorithm: self.algorithm,
            quota: self.quota,
            clock,
            max_keys: self.max_keys,
            on_full: self.on_full,
            shards: self.shards,
            seed: self.seed,
            stats: self.stats,
            tiers: self.tiers,
            _key: PhantomData,
        }
    }

    /// Splits the table into `n` shards (each with its own counters and reclaim stamp).
    /// The default is a few per core, each of at least 3,072 slots.
    ///
    /// [`build`](Self::build) refuses ([`ConfigError::InvalidShards`]) a count that is
    /// not a power of two between 1 and 256, or that leaves fewer than 256 keys per
    /// shard: keys spread over shards unevenly, and a table cut too fine refuses or
    /// evicts live keys well below its [`max_keys`](Self::max_keys).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, ConfigError, KeyedRateLimiter, Quota};
    ///
    /// let ok = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(1))
    ///     .shards(4)
    ///     .max_keys(4_096)
    ///     .build();
    /// assert!(ok.is_ok());
    /// let too_fine = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(1))
    ///     .max_keys(1_000)
    ///     .shards(256)
    ///     .build();
    /// assert!(matches!(too_fine, Err(ConfigError::InvalidShards { requested: 256 })));
    /// ```
    pub fn shards(mut self, n: usize) -> Self {
        self.shards = Some(n);
        self
    }

    /// Fixes the hash seed instead of drawing one at random. **For tests only**: with
    /// a known seed an attacker can craft keys that collide in one window (to evict,
    /// or under `Deny` to lock out new keys) or share a fingerprint (and so a state).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(1))
    ///     .hash_seed(42)
    ///     .build()?;
    /// assert!(limiter.check(&1).is_allowed());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[doc(hidden)]
    pub fn hash_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Adds quota tiers: keys of one limiter with different quotas (plans: free,
    /// pro, a customer's override). The builder's quota is tier 0; these are tiers 1,
    /// 2, ... in order. A request names its key's tier
    /// ([`KeyedRateLimiter::tier`]): the caller knows the plan (from its
    /// authentication), so nothing is stored per key and no resolver runs on the hot
    /// path. A key's state keeps its meaning in every tier, so a key moving to another
    /// tier (an upgrade) keeps what it used, as [`set_quota`](KeyedRateLimiter::set_quota)
    /// does. Memory is still fixed at build (a few bytes per tier; the sliding log's
    /// rings hold the largest tier's limit).
    ///
    /// # Errors (at build)
    ///
    /// Every [`ConfigError`] of each tier's quota; [`ConfigError::TierPeriod`] when a
    /// window algorithm's or the sliding log's tiers differ in period (their states
    /// count in the period; the buckets' tiers may differ in everything).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let (free, pro) = (0, 1);
    /// let limiter = KeyedRateLimiter::<str>::builder(Algorithm::TokenBucket, Quota::per_second(10))
    ///     .tiers([Quota::per_second(1_000)])
    ///     .build()?;
    /// assert!(limiter.tier(free).unwrap().check_n("alice", 10)?.is_allowed());
    /// assert!(!limiter.tier(free).unwrap().check("alice").is_allowed());
    /// assert!(limiter.tier(pro).unwrap().check_n("bob", 1_000)?.is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tiers(mut self, quotas: impl IntoIterator<Item = Quota>) -> Self {
        self.tiers.extend(quotas);
        self
    }

    /// Every tier's parameters, tier 0 first, checked.
    fn tier_params(&self) -> Result<Vec<Params>, ConfigError> {
        let first = Params::new(self.algorithm, self.quota)?;
        let mut all = vec![first];
        for (i, q) in self.tiers.iter().enumerate() {
            let p = Params::new(self.algorithm, *q)?;
            tier_fits(self.algorithm, &first, &p, i + 1)?;
            all.push(p);
        }
        Ok(all)
    }

    /// Whether to count decisions in [`stats`](KeyedRateLimiter::stats)'s `allowed`
    /// and `rejected` (default: yes). Counting costs one relaxed increment of a
    /// per-thread-stripe counter per decision; with `stats(false)` the hot path skips
    /// it and those two counters stay 0 (occupancy and the claim counters, updated only
    /// on the rare insert paths, are still kept).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(10))
    ///     .stats(false)
    ///     .build()?;
    /// assert!(limiter.check(&1).is_allowed());
    /// assert_eq!(limiter.stats().allowed, 0);
    /// assert_eq!(limiter.stats().occupied, 1);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn stats(mut self, on: bool) -> Self {
        self.stats = on;
        self
    }

    /// Checks the configuration and builds the limiter; all memory is allocated here.
    ///
    /// # Errors
    ///
    /// Every [`ConfigError`] of [`RateLimiter`](crate::RateLimiter)'s builder for the
    /// quota; [`ConfigError::InvalidCapacity`] for `max_keys` of 0, above 2³² (less
    /// on 32-bit targets), or a table that cannot be allocated (its `requested` is the
    /// key count asked for); [`ConfigError::InvalidShards`] for a shard count that is
    /// not a power of two up to 256 or leaves fewer than 256 keys per shard.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, ConfigError, KeyedRateLimiter, Quota};
    ///
    /// let err = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_second(1))
    ///     .max_keys(0)
    ///     .build()
    ///     .unwrap_err();
    /// assert!(matches!(err, ConfigError::InvalidCapacity { requested: 0, .. }));
    /// ```
    pub fn build(self) -> Result<KeyedRateLimiter<K, C>, ConfigError> {
        let tiers = self.tier_params()?;
        let geo = Geometry::new(self.max_keys, self.shards)?;
        let table = match split(tiers) {
            Split::Packed(p) => Table::Packed(PackedTable::new(geo, p, self.on_full, self.stats)?),
            Split::Log(l) => Table::Log(LogTable::new(geo, l, self.on_full, self.stats)?),
        };
        let hasher = match self.seed {
            Some(s) => ahash::RandomState::with_seeds(
                s,
                s ^ 0x243F_6A88_85A3_08D3,
                s ^ 0x1319_8A2E_0370_7344,
                s ^ 0xA409_3822_299F_31D0,
            ),
            None => ahash::RandomState::new(),
        };
        Ok(KeyedRateLimiter {
            table,
            hasher,
            clock: self.clock,
            algorithm: self.algorithm,
            quotas: std::iter::once(self.quota)
                .chain(self.tiers)
                .map(CopyCell::new)
                .collect(),
            setting: Mutex::new(()),
            max_keys: self.max_keys,
            slots: geo.slots(),
            _key: PhantomData,
        })
    }
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

    /// What `n` for `key` under tier `tier` would get now, consuming nothing.
    pub(crate) fn peek_in(&self, key: &K, n: u32, tier: usize) -> Decision {
        self.peek_hashed(self.hasher.hash_one(key), n, tier)
    }

    /// What `n` (at most the tier's capacity) for the key hashed to `h` under tier
    /// `tier` would get now, consuming nothing.
    pub(crate) fn peek_hashed(&self, h: u64, n: u32, tier: usize) -> Decision {
        let now = self.now();
        match &self.table {
            Table::Packed(t) => t.peek(h, now, n, t.tiers().get(tier)),
            Table::Log(t) => t.peek(h, now, n, t.tiers().get(tier)),
        }
    }

    #[inline]
    fn now(&self) -> u64 {
        crate::algorithm::now(&self.clock)
    }

    /// One request of cost 1 for `key` under tier `tier` (< the number of tiers):
    /// every capacity is at least 1, so it always fits.
    #[inline]
    pub(crate) fn check_one(&self, key: &K, tier: usize) -> Decision {
        let h = self.hasher.hash_one(key);
        match &self.table {
            Table::Packed(t) => t.decide(h, || self.now(), 1, t.tiers().get(tier)),
            Table::Log(t) => t.decide(h, self.now(), 1, t.tiers().get(tier)),
        }
    }

    /// One request of cost `n` for `key` under tier `tier`, checked against the
    /// capacity of the parameters it is then decided with (read once).
    #[inline]
    pub(crate) fn check_in(
        &self,
        key: &K,
        n: u32,
        tier: usize,
    ) -> Result<Decision, InsufficientCapacity> {
        let h = self.hasher.hash_one(key);
        match &self.table {
            Table::Packed(t) => {
                let p = t.tiers().get(tier);
                InsufficientCapacity::check(n, p.capacity())?;
                Ok(t.decide(h, || self.now(), n, p))
            }
            Table::Log(t) => {
                let p = t.tiers().get(tier);
                InsufficientCapacity::check(n, p.limit())?;
                Ok(t.decide(h, self.now(), n, p))
            }
        }
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
        match &self.table {
            Table::Packed(t) => t.tiers().get(tier).capacity(),
            Table::Log(t) => t.tiers().get(tier).limit(),
        }
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
        match &self.table {
            Table::Packed(_) => crate::sync::slot_word_is_lock_free(),
            Table::Log(_) => false,
        }
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
        let table = match &self.table {
            Table::Packed(t) => t.memory_bytes(),
            Table::Log(t) => t.memory_bytes(),
        };
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
        match &self.table {
            Table::Packed(_) => 0,
            Table::Log(t) => t.ring_bytes(),
        }
    }

    /// A snapshot of the counters and occupancy. Counting the occupancy visits every
    /// slot: call it for monitoring, not per request.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::builder(Algorithm::TokenBucket, Quota::per_hour(1)).build()?;
    /// let _ = l.check(&1);
    /// let _ = l.check(&1);
    /// let s = l.stats();
    /// assert_eq!((s.allowed, s.rejected, s.active), (1, 1, 1));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn stats(&self) -> Stats {
        let now = self.now();
        let (t, (occupied, active)) = match &self.table {
            Table::Packed(t) => (t.totals(), t.occupancy(now)),
            Table::Log(t) => (t.totals(), t.occupancy(now)),
        };
        Stats {
            allowed: t.allowed,
            rejected: t.rejected,
            evictions: t.evictions,
            idle_reclaims: t.idle_reclaims,
            untracked: t.untracked,
            refused: t.refused,
            occupied,
            active,
            slots: self.slots as u64,
        }
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
    use crate::ManualClock;

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
