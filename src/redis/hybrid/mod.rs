//! The hybrid mode: local decisions, counts shared through Redis in the background.
//!
//! * `limiter`: [`HybridRateLimiter`], the public type, and its documentation;
//! * `peek`: its peeks, from the local state;
//! * `builder`: its builder;
//! * `plan`: the quota in force and its window arithmetic;
//! * `decide`: the state its clones share, and the local decision;
//! * `counts`: one key's window counts as this instance sees them;
//! * `table`: the key table, `table::LockedTable` with the hybrid's entry;
//! * `sync`: the protocol that shares the counts, and its background task.

mod builder;
mod counts;
mod decide;
mod limiter;
mod peek;
mod plan;
mod sync;
mod table;

pub use builder::HybridRateLimiterBuilder;
pub use limiter::HybridRateLimiter;

use super::{
    bounded, lock, Connection, Error, KeyName, RedisCharge, RedisKey, Target, TimeSource,
    DEFAULT_PREFIX, DEFAULT_TIMEOUT, KEY_BUF,
};

/// Counters of a [`HybridRateLimiter`] (all its clones together).
///
/// # Example
///
/// ```
/// let s = tollgate::redis::HybridStats::default();
/// assert_eq!(s.round_trips, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HybridStats {
    /// Decisions made (all local).
    pub decisions: u64,
    /// Redis round trips made by syncs (one per sync with keys to share and per 2,000 of
    /// its keys; on Redis Cluster one per hash slot among them).
    pub round_trips: u64,
    /// Syncs that failed; their counts are kept and sent with the next sync.
    pub sync_errors: u64,
    /// Decisions denied because the key table was full (see
    /// [`max_keys`](HybridRateLimiterBuilder::max_keys)): new keys *refused*, in the
    /// words of [`OnFull::Deny`](crate::table::claim::OnFull::Deny) (the field keeps its first name).
    pub untracked: u64,
    /// Keys tracked now.
    pub keys: u64,
    /// Keys dropped from the table once idle: at a sync, or to make room for a new
    /// key.
    pub reclaimed: u64,
    /// The longest time between two successful syncs so far, in nanoseconds.
    pub max_sync_gap_ns: u64,
}
