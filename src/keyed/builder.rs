//! Building a [`KeyedRateLimiter`]: the builder, and the checks its tiers pass.

use super::{KeyedRateLimiter, OnFull};
use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::sliding_window::SlidingWindow;
use crate::algorithm::{PackedAlgorithm, PackedParams, Params};
use crate::store::Table;
use crate::sync::{CopyCell, Mutex};
use crate::table::geometry::{Geometry, MAX_KEYS};
use crate::table::log::LogTable;
use crate::table::packed::PackedTable;
use crate::{clock::Clock, clock::QuantaClock, error::ConfigError, quota::Algorithm, quota::Quota};
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;

/// Tier parameters by kind (every tier of one limiter runs its algorithm).
enum Split {
    Gcra(Vec<Gcra>),
    Fixed(Vec<FixedWindow>),
    Sliding(Vec<SlidingWindow>),
    Log(Vec<SlidingLog>),
}

/// The tiers' parameters by kind.
fn split(tiers: Vec<Params>) -> Split {
    /// Every tier's parameters if they are all `A`'s.
    fn all<A: PackedAlgorithm>(tiers: &[Params]) -> Option<Vec<A>> {
        tiers.iter().map(|t| A::of(*t)).collect()
    }
    if let Some(g) = all(&tiers) {
        return Split::Gcra(g);
    }
    if let Some(f) = all(&tiers) {
        return Split::Fixed(f);
    }
    if let Some(s) = all(&tiers) {
        return Split::Sliding(s);
    }
    Split::Log(
        tiers
            .into_iter()
            .filter_map(|t| match t {
                Params::Log(l) => Some(l),
                Params::Packed(_) => None,
            })
            .collect(),
    )
}

/// Checks that tier `tier`'s parameters can share a table with tier 0's: window and
/// log states count in their period, so those tiers must share it.
pub(super) fn tier_fits(
    algorithm: Algorithm,
    first: &Params,
    p: &Params,
    tier: usize,
) -> Result<(), ConfigError> {
    let period = |p: &Params| match p {
        Params::Packed(PackedParams::Fixed(w)) => Some(w.period()),
        Params::Packed(PackedParams::Sliding(w)) => Some(w.period()),
        Params::Log(l) => Some(l.period()),
        Params::Packed(PackedParams::Gcra(_)) => None,
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
            Split::Gcra(p) => PackedTable::<Gcra>::bytes_for(&geo, p.len()),
            Split::Fixed(p) => PackedTable::<FixedWindow>::bytes_for(&geo, p.len()),
            Split::Sliding(p) => PackedTable::<SlidingWindow>::bytes_for(&geo, p.len()),
            Split::Log(l) => {
                let ring = l.iter().map(|l| l.limit()).max().unwrap_or(0);
                LogTable::bytes_for(&geo, ring, l.len())
            }
        };
        table
            .and_then(|t| t.checked_add(std::mem::size_of::<KeyedRateLimiter<K, C>>()))
            .ok_or(ConfigError::InvalidCapacity {
                requested: self.max_keys,
                max: MAX_KEYS,
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
    /// Every [`ConfigError`] of [`RateLimiter`](crate::limiter::RateLimiter)'s builder for the
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
        let (on_full, stats) = (self.on_full, self.stats);
        let table = match split(tiers) {
            Split::Gcra(p) => Table::Gcra(PackedTable::new(geo, p, on_full, stats)?),
            Split::Fixed(p) => Table::Fixed(PackedTable::new(geo, p, on_full, stats)?),
            Split::Sliding(p) => Table::Sliding(PackedTable::new(geo, p, on_full, stats)?),
            Split::Log(l) => Table::Log(LogTable::new(geo, l, on_full, stats)?),
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
