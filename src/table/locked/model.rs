//! A minimal entry for loom models of [`LockedTable`], built only under
//! `--cfg tollgate_loom` and reached as `tollgate::loom_hooks`: keys are `u64`s
//! hashed as the model says (so fingerprints collide at will) and compared whole, and
//! slots empty again (a walk drops idle entries), as the Redis hybrid's do; each entry
//! counts its key's requests. It stands in for the hybrid's entry, whose limiter needs
//! Redis and a runtime.

use super::{Claim, Floor, LockedTable, SlotEntry};
use crate::table::claim::OnFull;
use crate::table::counters::Shard;
use crate::table::geometry::{fingerprint, Geometry};

/// A model entry: its key, the requests it counted, the reading it was installed at,
/// and when it goes idle.
#[derive(Debug)]
pub(crate) struct ModelEntry {
    key: Option<u64>,
    count: u64,
    since: u64,
    idle_at: u64,
    displaced: bool,
}

impl SlotEntry for ModelEntry {
    type Key = u64;
    type Name = Option<u64>;
    type Ext = ();
    type Mark = u64;

    const EMPTY_FIRST: bool = false;
    const EMPTIES: bool = true;
    const FLOOR: Floor = Floor::Table;

    fn vacant() -> Self {
        ModelEntry {
            key: None,
            count: 0,
            since: 0,
            idle_at: 0,
            displaced: false,
        }
    }

    fn is(&self, key: &u64) -> bool {
        self.key == Some(*key)
    }

    fn idle(&self, _: &(), _: usize, now: u64) -> bool {
        self.idle_at <= now
    }

    fn mark(&self) -> u64 {
        self.count
    }

    fn settles_at(&self, _: &()) -> Option<u64> {
        Some(self.idle_at)
    }

    fn install(&mut self, _: &(), _: usize, _: &Shard, name: Option<u64>, d: bool) -> Option<u64> {
        self.count = 0;
        self.idle_at = 0;
        self.displaced = d;
        std::mem::replace(&mut self.key, name)
    }

    fn vacate(&mut self) -> Option<u64> {
        self.displaced = false;
        self.key.take()
    }

    fn displaced(&self) -> bool {
        self.displaced
    }

    fn ext_bytes(_: &()) -> usize {
        0
    }
}

/// A locked table of [`ModelEntry`]s holding at most `max_keys` keys, refusing new
/// keys when full (`OnFull::Deny`).
pub struct ModelTable {
    table: LockedTable<ModelEntry>,
}

impl ModelTable {
    /// A table for `max_keys` keys in one shard.
    pub fn new(max_keys: usize) -> Self {
        let geo = Geometry::new(max_keys, Some(1)).expect("a model's table");
        ModelTable {
            table: LockedTable::with_ext(geo, (), OnFull::Deny, true).expect("a model's table"),
        }
    }

    /// The two groups (first slot of each) and the slot count of a key hashed to `h`.
    pub fn groups(&self, h: u64) -> ([usize; 2], usize) {
        (self.table.geo().locate(h).groups, self.table.geo().group())
    }

    /// Slots in the table.
    pub fn slots(&self) -> usize {
        self.table.geo().slots()
    }

    /// One request of `key` (hashed to `h`) at `now`, keeping it live until
    /// `live_until`: the key's count after it, or `None` when the key was refused.
    pub fn add(&self, key: u64, h: u64, now: u64, live_until: u64) -> Option<u64> {
        let fp = fingerprint(h);
        let loc = self.table.geo().locate(h);
        let mut held = match self.table.find(fp, &key, &loc) {
            Some((_, held)) => held,
            None => match self.table.claim(fp, &key, &loc, now, Some(key)) {
                (Claim::Found(_, held), _) => held,
                (Claim::Installed(_, mut held, _), now) => {
                    held.entry.since = now;
                    held
                }
                (Claim::Untracked | Claim::Refused { .. }, _) => return None,
            },
        };
        held.entry.count += 1;
        held.entry.idle_at = held.entry.idle_at.max(live_until);
        Some(held.entry.count)
    }

    /// Drops every entry idle at `now` (as a sync's walk does); returns how many.
    pub fn drop_idle(&self, now: u64) -> usize {
        let mut dropped = 0;
        for i in self.table.held_slots() {
            let mut held = self.table.lock_slot(i);
            if held.fp() != 0 && held.entry.idle_at <= now {
                self.table.remove(i, &mut held, now);
                dropped += 1;
            }
        }
        dropped
    }

    /// `(key, count)` of every slot holding a key, in slot order.
    pub fn entries(&self) -> Vec<(u64, u64)> {
        (0..self.slots())
            .filter_map(|i| {
                let held = self.table.lock_slot(i);
                held.entry.key.map(|k| (k, held.entry.count))
            })
            .collect()
    }

    /// The reading `key`'s entry was installed at (the claim's, raised to the reclaim
    /// floor), if the table holds the key.
    pub fn since(&self, key: u64) -> Option<u64> {
        (0..self.slots()).find_map(|i| {
            let held = self.table.lock_slot(i);
            (held.entry.key == Some(key)).then_some(held.entry.since)
        })
    }

    /// Keys held (the table's count).
    pub fn len(&self) -> u64 {
        self.table.len()
    }
}
