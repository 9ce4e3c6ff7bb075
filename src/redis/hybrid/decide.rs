//! The state every clone of a hybrid limiter shares, and its local decision: one
//! lookup (or claim) in the key table and the window arithmetic on this instance's view
//! of the global counts.

use super::counts::Entry;
use super::plan::{Plan, Window};
use super::table::KeyTable;
use super::{lock, Connection, TimeSource};
use crate::sync::{PlainAtomicU64 as AtomicU64, StdMutex as Mutex};
use crate::{decision::Decision, quota::Algorithm};
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

    /// What a decision of `n` for `key` would be now, from a copy of its entry taken
    /// under the slot's lock: nothing is changed, counted or inserted (a key the table
    /// does not hold is decided as a fresh one).
    pub(super) fn peek(&self, key: &[u8], n: u32) -> Decision {
        let t = self.now_ns();
        let plan = self.plan.load();
        let p = plan.period_ns;
        let mut copy = self
            .table
            .with_key(key, |entry| *entry)
            .unwrap_or_else(|| Entry::new(t / p, p));
        Self::decide_entry(&mut copy, &plan, t, n)
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

/// What a charge counted on an entry: the decision after it (a request of cost 1),
/// `taken`, `owed`, `dropped`.
pub(super) type Charged = (Decision, u32, u32, u32);

impl Inner {
    /// Charges `n` to `key` locally, whatever is left (see `HybridRateLimiter::charge`):
    /// `None` when the table is full and the key is not in it.
    pub(super) fn charge(&self, key: &[u8], n: u32, max_owed: u32) -> Option<Charged> {
        let t = self.now_ns();
        let plan = self.plan.load();
        let p = plan.period_ns;
        self.table.decide(
            key,
            t,
            |t| Entry::new(t / p, p),
            |entry, t| Self::charge_entry(entry, &plan, t, n, max_owed),
        )
    }

    /// A charge of `n` on a key's entry (under its slot's lock) at `t`: the engine's
    /// window charge on this instance's view of the global counts. The current
    /// window's count may pass the limit by `max_owed`; the rest is dropped.
    pub(super) fn charge_entry(
        entry: &mut Entry,
        plan: &Plan,
        t: u64,
        n: u32,
        max_owed: u32,
    ) -> Charged {
        let p = plan.period_ns;
        let k_now = t / p;
        if entry.period_ns != p {
            *entry = Entry::new(k_now, p);
        }
        let k = entry.roll(k_now);
        let curr = entry.w[1].estimate();
        let limit = u64::from(plan.limit());
        let cap = limit + u64::from(max_owed);
        let taken = u64::from(n).min(cap.saturating_sub(curr));
        entry.w[1].own += taken;
        entry.touched = true;
        let after = curr + taken;
        let (owed, d) = match &plan.window {
            Window::Fixed(f) => (after.saturating_sub(limit), f.decide(k, after, t, 1)),
            Window::Sliding(s) => {
                let prev = entry.w[0].estimate();
                // How far the weighted count is past the limit, in requests, rounded up.
                let e = t.saturating_sub(k * p).min(p);
                let p128 = u128::from(p);
                let weight = u128::from(prev) * (p128 - u128::from(e)) + u128::from(after) * p128;
                let over = weight.saturating_sub(u128::from(limit) * p128);
                let owed = over.div_ceil(p128).min(u128::from(u64::MAX)) as u64;
                (owed, s.decide(&s.at(k, t, prev, after), t, 1))
            }
        };
        let u32_of = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        (d, u32_of(taken), u32_of(owed), n - u32_of(taken))
    }

    /// Gives `n` back to `key` locally (see `HybridRateLimiter::give_back`): 0 for a
    /// key the table does not hold.
    pub(super) fn give_back(&self, key: &[u8], n: u32) -> u32 {
        let t = self.now_ns();
        let plan = self.plan.load();
        self.table
            .with_key(key, |entry| Self::give_back_entry(entry, &plan, t, n))
            .unwrap_or(0)
    }

    /// A give-back of `n` on a key's entry at `t`: from the counts that still weigh as
    /// this instance sees them, the current window's first (the sliding window's
    /// previous one next), never below 0.
    pub(super) fn give_back_entry(entry: &mut Entry, plan: &Plan, t: u64, n: u32) -> u32 {
        let p = plan.period_ns;
        if entry.period_ns != p {
            // Windows of another period: nothing this quota counts.
            return 0;
        }
        entry.roll(t / p);
        let from_curr = entry.w[1].give(u64::from(n));
        let from_prev = match plan.window {
            Window::Fixed(_) => 0,
            Window::Sliding(_) => entry.w[0].give(u64::from(n) - from_curr),
        };
        // Both at most n.
        (from_curr + from_prev) as u32
    }
}
