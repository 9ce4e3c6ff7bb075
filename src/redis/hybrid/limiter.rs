//! [`HybridRateLimiter`]: the public face of the hybrid mode.

use super::decide::Inner;
use super::plan::Plan;
use super::{Error, HybridRateLimiterBuilder, HybridStats, RedisCharge};
use super::{RedisKey, Target, TimeSource, DEFAULT_PREFIX, DEFAULT_TIMEOUT, KEY_BUF};
use crate::sync::{PlainOrdering as Ordering, StdArc as Arc};
use crate::{
    decision::Decision, error::ConfigError, error::InsufficientCapacity, quota::Algorithm,
    quota::Quota,
};
use std::fmt;
use std::time::Duration;

/// A distributed limiter that decides locally, at in-memory speed, and shares its
/// counts through Redis in the background (FixedWindow and SlidingWindow).
///
/// Each instance counts its own admissions per key and window. Redis keeps, per key
/// and window, a hash with one field per instance: that instance's *cumulative*
/// admissions in the window (charges included; its give-backs in a field of their own,
/// see [`give_back`](Self::give_back)). A background task, every sync interval `I`, sets this
/// instance's fields for the keys that changed or were used since the last sync and
/// reads back their global counts (the fields summed), in one pipelined round trip
/// per 2,000 keys (one atomic script per key; the hash's TTL is set with every write). Setting a
/// cumulative count is idempotent: a sync whose reply was lost (a timeout while Redis
/// still ran it) is simply sent again, and nothing is counted twice. Keys neither used
/// nor changed since the last sync cost nothing, so a sync costs what changed, not
/// what is tracked. A decision compares the last global count plus this instance's
/// admissions since then with the limit; it never waits on the network.
///
/// # Overshoot bound
///
/// With `N` instances, each receiving at most `r` requests per second for a key, sync
/// interval `I` and Redis round-trip time `d`, the global count of one window exceeds
/// the limit by at most `3·N·r·(I + d)`: an instance's view of a tracked key misses at
/// most the last `2·(I + d)` of the others' admissions, and a key an instance has not
/// seen before (or has not used since its last sync) is decided with no (or an old)
/// global count for up to `I + d`, until the next sync reads it. Failed syncs widen
/// `I` to the time between two successful ones ([`HybridStats::max_sync_gap_ns`]). (For `FixedWindow`
/// the excess is also never more than `(N − 1)·limit`, since no instance alone admits
/// more than the limit.) A sync sends its keys in chunks of 2,000 (each chunk one
/// round trip within the timeout; on Redis Cluster one pipeline per hash slot in the
/// chunk, sent together; 100 keys per script call), so `d` is the whole sync's
/// duration, which grows with the keys used since the last sync (what a key costs
/// Redis is measured in BENCHMARKS.md's method, not here). Redis round trips per decision
/// are at most `1 / (r·I)` per instance and chunk. Windows are aligned to the Unix epoch and
/// instances' clocks must agree to well within a window.
///
/// If Redis is unavailable, decisions continue locally; the cumulative counts go with
/// the next successful sync ([`HybridStats::sync_errors`] counts failures), which also
/// restores counts a restarted Redis lost.
///
/// The number of tracked keys is bounded ([`max_keys`](HybridRateLimiterBuilder::max_keys)),
/// and so is the memory: the key table is the engine's fixed-capacity open-addressed
/// layout (each key in one of its two groups of 12 slots, about 1.48 slots per key,
/// one small lock per slot), allocated once at build
/// ([`memory_bytes`](HybridRateLimiter::memory_bytes); each key's name is stored once
/// more when it is first seen). It holds exactly `max_keys` keys. Keys idle for a
/// window (two for `SlidingWindow`) are dropped at each sync; a new key arriving while
/// the table is full takes the slot of an idle key with nothing left to sync (in its
/// windows, or found by a sweep of the table from a rotating hand), and is otherwise
/// denied (counted in [`HybridStats::untracked`]). Deciding a known key allocates
/// nothing.
///
/// # Example
///
/// ```no_run
/// use std::time::Duration;
/// use tollgate::redis::HybridRateLimiter;
/// use tollgate::{Algorithm, Quota};
///
/// # async fn run() -> Result<(), tollgate::redis::Error> {
/// let limiter = HybridRateLimiter::builder(Algorithm::SlidingWindow, Quota::per_minute(6000))
///     .url("redis://127.0.0.1:6379")
///     .sync_interval(Duration::from_millis(50))
///     .build()
///     .await?;
/// let d = limiter.check("tenant-3"); // no await: decided locally
/// # let _ = d;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct HybridRateLimiter {
    pub(super) inner: Arc<Inner>,
}

impl HybridRateLimiter {
    /// Starts building a hybrid limiter running `algorithm` (`FixedWindow` or
    /// `SlidingWindow`) on `quota`.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::redis::HybridRateLimiter;
    /// use tollgate::{Algorithm, Quota};
    ///
    /// let b = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(1000))
    ///     .url("redis://127.0.0.1:6379");
    /// # let _ = b;
    /// ```
    pub fn builder(algorithm: Algorithm, quota: Quota) -> HybridRateLimiterBuilder {
        HybridRateLimiterBuilder {
            algorithm,
            quota,
            target: Target::None,
            prefix: DEFAULT_PREFIX.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            interval: Duration::from_millis(100),
            max_keys: 100_000,
            time: TimeSource::Server,
        }
    }

    /// Decides one request of cost 1 for `key`, locally: any [`RedisKey`] (`&str`,
    /// `String`, bytes, an IP address, an integer). Deciding a key already tracked
    /// allocates nothing.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::HybridRateLimiter) {
    /// if limiter.check("10.1.2.3").is_allowed() { /* serve */ }
    /// // The same key, given as an address.
    /// let ip: std::net::IpAddr = "10.1.2.3".parse().unwrap();
    /// let d = limiter.check(&ip);
    /// # let _ = d;
    /// # }
    /// ```
    pub fn check<K: RedisKey + ?Sized>(&self, key: &K) -> Decision {
        let mut buf = [0; KEY_BUF];
        self.inner.decide(key.key_bytes(&mut buf), 1)
    }

    /// Decides one request of cost `n` for `key`, locally.
    ///
    /// # Errors
    ///
    /// [`InsufficientCapacity`] when `n` exceeds the limit.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::HybridRateLimiter) -> Result<(), tollgate::InsufficientCapacity> {
    /// let d = limiter.check_n("batch", 10)?;
    /// let d = limiter.check_n(&7u64, 10)?; // tenant 7
    /// # let _ = d;
    /// # Ok(())
    /// # }
    /// ```
    pub fn check_n<K: RedisKey + ?Sized>(
        &self,
        key: &K,
        n: u32,
    ) -> Result<Decision, InsufficientCapacity> {
        self.fits(n)?;
        let mut buf = [0; KEY_BUF];
        Ok(self.inner.decide(key.key_bytes(&mut buf), n))
    }

    /// `Err` when a cost of `n` exceeds the limit and so can never fit.
    pub(super) fn fits(&self, n: u32) -> Result<(), InsufficientCapacity> {
        let capacity = self.inner.plan.load().limit();
        if n > capacity {
            return Err(InsufficientCapacity {
                requested: n,
                capacity,
            });
        }
        Ok(())
    }

    /// Charges `n` to `key` whatever is left, never denied, locally (no await): for a
    /// cost known only once the work is done. The in-process window's charge
    /// ([`RateLimiter::charge`](crate::limiter::RateLimiter::charge)) on this instance's view of
    /// the global counts: the current window's count may pass the limit by one burst
    /// (the limit; [`charge_owing`](Self::charge_owing) sets another bound), the part
    /// past that is not counted ([`RedisCharge::dropped`]), and the key's next requests
    /// are denied while the window still weighs what it owes. The charged requests go
    /// to Redis with the next sync, as admissions do.
    ///
    /// Not exact, as nothing in this mode is: other instances' charges and admissions
    /// since the last sync are not in the view, so one window's global count exceeds
    /// the limit plus `max_owed` by at most the mode's overshoot bound (see
    /// [`HybridRateLimiter`]), with `r` counting charged requests as admissions.
    ///
    /// A new key while the table is full is not counted
    /// ([`tracked`](RedisCharge::tracked) is `false`, the whole cost is dropped).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::HybridRateLimiter) {
    /// // 20,000 tokens a second per tenant: check before, charge what was used.
    /// if limiter.peek_n("tenant-3", 0).map_or(false, |d| d.remaining() > 0) {
    ///     let c = limiter.charge("tenant-3", 1_250);
    ///     println!("owed {}, dropped {}", c.owed(), c.dropped());
    /// }
    /// # }
    /// ```
    pub fn charge<K: RedisKey + ?Sized>(&self, key: &K, n: u32) -> RedisCharge {
        let max_owed = self.inner.plan.load().limit();
        self.charge_owing(key, n, max_owed)
    }

    /// [`charge`](Self::charge) with the most the key may owe after it set to
    /// `max_owed` requests past the limit.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::HybridRateLimiter) {
    /// let c = limiter.charge_owing("tenant-3", 50_000, 0); // never past the limit
    /// assert_eq!(c.owed(), 0);
    /// # }
    /// ```
    pub fn charge_owing<K: RedisKey + ?Sized>(
        &self,
        key: &K,
        n: u32,
        max_owed: u32,
    ) -> RedisCharge {
        let mut buf = [0; KEY_BUF];
        match self.inner.charge(key.key_bytes(&mut buf), n, max_owed) {
            Some((d, taken, owed, dropped)) => RedisCharge::new(d, taken, owed, dropped, true),
            None => {
                // Refused: the table holds max_keys live keys.
                let plan = self.inner.plan.load();
                let p = plan.period_ns;
                let wait = p - self.inner.now_ns() % p;
                let d = Decision::deny(plan.limit(), 0, wait, wait);
                RedisCharge::new(d, 0, 0, n, false)
            }
        }
    }

    /// Gives `n` back to `key` locally, never below 0 as this instance sees the key's
    /// counts; returns how many requests were given back. From the counts that still
    /// weigh, the current window's first (the sliding window's previous one next), as
    /// the in-process [`RateLimiter::give_back`](crate::limiter::RateLimiter::give_back) does.
    /// A key this instance does not track gives nothing back (its counts are not
    /// known here).
    ///
    /// The give-backs go to Redis with the next sync, as a count of their own per
    /// instance and window (`<id>:g` in the window's hash), only ever raised as the
    /// admissions are: a sync retried or late counts nothing twice, and the global
    /// count is the admissions less the give-backs, never read below 0. Two
    /// instances giving back the same requests between two syncs (each sees them in
    /// its view) give back twice: a caller that gives back only what it charged never
    /// does. An instance of an earlier version adds the give-backs instead (it never
    /// counts less than the truth).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::HybridRateLimiter) {
    /// let c = limiter.charge("tenant-3", 1_250);
    /// // The stream was cut short: 400 tokens were never sent.
    /// assert!(limiter.give_back("tenant-3", 400) <= 400);
    /// # let _ = c;
    /// # }
    /// ```
    pub fn give_back<K: RedisKey + ?Sized>(&self, key: &K, n: u32) -> u32 {
        let mut buf = [0; KEY_BUF];
        self.inner.give_back(key.key_bytes(&mut buf), n)
    }

    /// Syncs now (what the background task does every interval): sends the unsent
    /// counts and reads back the global ones. Returns the number of keys synced.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`], [`Error::Timeout`] or [`Error::BadReply`]; the unsent counts
    /// are then kept for the next sync.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::HybridRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// limiter.sync().await?; // e.g. before shutting down
    /// # Ok(())
    /// # }
    /// ```
    pub async fn sync(&self) -> Result<usize, Error> {
        self.inner.sync().await
    }

    /// Changes the quota at run time, for every key, for this limiter and its clones
    /// (each instance of a service calls it for its own).
    ///
    /// Decisions stay local and never wait for this call: the quota is swapped in one
    /// atomic copy. Each key's counts (this instance's, and the global ones read back
    /// by the syncs) are kept and judged under the new quota from the next decision;
    /// the Redis keys stay the same.
    ///
    /// # Over-admission bound
    ///
    /// On top of the mode's own overshoot bound (see [`HybridRateLimiter`]), which
    /// holds for each quota:
    ///
    /// * **Lower limit**: a key whose window already holds the new limit or more is
    ///   denied (nothing remaining) until its counts leave the window; admissions after
    ///   the change are at most what a limiter built fresh with the new quota would
    ///   admit. It never over-admits.
    /// * **Higher limit**: the difference is available at once.
    /// * **Period**: window indices under the old period mean nothing under the new,
    ///   so each key's windows restart at its first decision after the change: the old
    ///   window holding the change admitted at most `L_old`, the new one holding it
    ///   admits at most `L_new` (plus the overshoot bound), so at most `L_old + L_new`
    ///   from the start of the one to the end of the other. Counts this instance had
    ///   not yet synced for the old windows are not sent.
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] that [`build`](HybridRateLimiterBuilder::build) would give
    /// for this quota; [`ConfigError::Unrepresentable`] for a period not longer than
    /// the sync interval (the builder's `Error::Unsupported`). Nothing changes then.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tollgate::{ConfigError, Quota};
    ///
    /// # fn run(limiter: tollgate::redis::HybridRateLimiter) -> Result<(), ConfigError> {
    /// limiter.set_quota(Quota::per_minute(300))?;
    /// assert_eq!(limiter.quota(), Quota::per_minute(300));
    /// // A period within the sync interval cannot be shared in time.
    /// let too_short = limiter.set_quota(Quota::new(10, Duration::from_millis(1)));
    /// assert!(matches!(too_short, Err(ConfigError::Unrepresentable { .. })));
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_quota(&self, quota: Quota) -> Result<(), ConfigError> {
        let inner = &*self.inner;
        let plan = Plan::new(inner.algorithm, quota, inner.interval).map_err(|e| match e {
            Error::Config(c) => c,
            Error::Unsupported(reason) => ConfigError::Unrepresentable { reason },
            other => ConfigError::Unrepresentable {
                reason: other.to_string(),
            },
        })?;
        inner.plan.store(plan);
        // Entries restart their windows under a new period: the table's note of when
        // the soonest goes idle no longer holds.
        inner.table.rearm();
        Ok(())
    }

    /// The counters of this limiter and its clones.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::HybridRateLimiter) {
    /// let s = limiter.stats();
    /// println!("{} round trips for {} decisions", s.round_trips, s.decisions);
    /// # }
    /// ```
    #[must_use]
    pub fn stats(&self) -> HybridStats {
        let i = &self.inner;
        HybridStats {
            decisions: i.table.decisions(),
            round_trips: i.round_trips.load(Ordering::Relaxed),
            sync_errors: i.sync_errors.load(Ordering::Relaxed),
            untracked: i.table.refused(),
            keys: i.table.len(),
            reclaimed: i.table.reclaimed(),
            max_sync_gap_ns: i.max_gap.load(Ordering::Relaxed),
        }
    }

    /// Bytes of the key table, fixed at build whatever the number of distinct keys
    /// seen (what [`HybridRateLimiterBuilder::memory_bytes`] announced). Each tracked
    /// key's name is stored once besides, in an allocation of about 16 bytes plus its
    /// length, made when the key is first seen.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::HybridRateLimiter) {
    /// println!("{} bytes for {} keys", limiter.memory_bytes(), limiter.stats().keys);
    /// # }
    /// ```
    #[must_use]
    pub fn memory_bytes(&self) -> usize {
        self.inner.table.memory_bytes()
    }

    /// The algorithm this limiter runs.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::HybridRateLimiter) {
    /// println!("{:?}", limiter.algorithm());
    /// # }
    /// ```
    #[must_use]
    pub fn algorithm(&self) -> Algorithm {
        self.inner.algorithm
    }

    /// The quota this limiter enforces.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn run(limiter: tollgate::redis::HybridRateLimiter) {
    /// println!("{:?}", limiter.quota());
    /// # }
    /// ```
    #[must_use]
    pub fn quota(&self) -> Quota {
        self.inner.plan.load().quota
    }
}

impl fmt::Debug for HybridRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HybridRateLimiter")
            .field("algorithm", &self.inner.algorithm)
            .field("quota", &self.inner.plan.load().quota)
            .field("prefix", &self.inner.prefix)
            .finish_non_exhaustive()
    }
}
