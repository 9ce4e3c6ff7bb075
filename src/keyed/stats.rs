//! What a keyed limiter reports about itself: [`Stats`].

use super::KeyedRateLimiter;
use crate::clock::Clock;
use crate::store::{by_algorithm, KeyedStore};
#[cfg(doc)]
use crate::table::OnFull;
use std::hash::Hash;

/// A snapshot of a [`KeyedRateLimiter`]'s counters and occupancy.
///
/// The counters are summed over per-shard, cache-padded counters updated with relaxed
/// atomics: under concurrent use the snapshot is not one instant, but every count is
/// exact once the callers have stopped. Peeks (`peek`, `peek_n`, `check_n(key, 0)`) are not counted.
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

impl<K: Hash + ?Sized, C: Clock> KeyedRateLimiter<K, C> {
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
        let (t, (occupied, active)) =
            by_algorithm!(&self.table, t => (KeyedStore::totals(t), KeyedStore::occupancy(t, now)));
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
}
