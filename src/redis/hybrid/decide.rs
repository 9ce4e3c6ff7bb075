//! The state every clone of a hybrid limiter shares, and its local decision: one
//! lookup (or claim) in the key table and the window arithmetic on this instance's view
//! of the global counts.

use super::counts::Entry;
use super::plan::{Plan, Window};
use super::table::KeyTable;
use super::{lock, Connection, TimeSource};
use crate::sync::{PlainAtomicU64 as AtomicU64, StdMutex as Mutex};
use crate::{Algorithm, Decision};
use crossbeam_utils::atomic::AtomicCell;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::task::JoinHandle;

pub(super) struct Inner {
    pub(super) algorithm: Algorithm,
    /// The quota in force and its arithmetic, replaced whole by `set_quota`: each
    /// decision and sync loads one copy (a seqlock read, never across I/O).
    pub(super) plan: AtomicCell<Plan>,
    /// The background sync's interval (`Duration::MAX`: none), which every period
    /// must exceed.
    pub(super) interval: Duration,
    pub(super) prefix: String,
    pub(super) timeout: Duration,
    pub(super) conn: Connection,
    pub(super) time: TimeSource,
    /// The key table: fixed capacity, one lock per slot.
    pub(super) table: KeyTable,
    pub(super) sync_lock: tokio::sync::Mutex<()>,
    /// This instance's field name in the per-window hashes: random per limiter.
    pub(super) instance: String,
    pub(super) round_trips: AtomicU64,
    pub(super) sync_errors: AtomicU64,
    pub(super) max_gap: AtomicU64,
    pub(super) last_sync: AtomicU64,
    pub(super) epoch: Instant,
    pub(super) task: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(task) = lock(&self.task).take() {
            task.abort();
        }
    }
}

impl Inner {
    pub(super) fn now_ns(&self) -> u64 {
        match &self.time {
            TimeSource::Server => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            TimeSource::Caller(f) => f(),
        }
    }

    pub(super) fn decide(&self, key: &[u8], n: u32) -> Decision {
        let t = self.now_ns();
        let plan = self.plan.load();
        let p = plan.period_ns;
        // One lookup for a tracked key; a new key is inserted only when there is room.
        let d = self
            .table
            .decide(
                key,
                t,
                |t| Entry::new(t / p, p),
                |entry, t| Self::decide_entry(entry, &plan, t, n),
            )
            .unwrap_or_else(|| {
                // Refused: the table holds max_keys live keys (counted by the table).
                let wait = p - t % p;
                Decision::deny(plan.limit(), 0, wait, wait)
            });
        self.table.count(&d);
        d
    }

    /// One decision on a key's entry (under its slot's lock) at `t` for `n`.
    #[inline]
    pub(super) fn decide_entry(entry: &mut Entry, plan: &Plan, t: u64, n: u32) -> Decision {
        let p = plan.period_ns;
        let k_now = t / p;
        if entry.period_ns != p {
            // set_quota changed the period: the windows restart.
            *entry = Entry::new(k_now, p);
        }
        let k = entry.roll(k_now);
        let curr = entry.w[1].estimate();
        let d = match &plan.window {
            Window::Fixed(f) => f.decide(k, curr, t, n),
            Window::Sliding(s) => s.decide(&s.at(k, t, entry.w[0].estimate(), curr), t, n),
        };
        if d.is_allowed() {
            entry.w[1].own += u64::from(n);
        }
        entry.touched = true;
        d
    }
}
