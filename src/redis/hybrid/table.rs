//! The hybrid mode's key table: `LockedTable<HybridEntry>` (the table's protocol is on
//! `table::locked`: geometry, claims, claim locks, the reclaim floor, the sweep of a
//! full table, the occupancy bits, the decision counters), with the hybrid's entry.
//!
//! Each slot's lock guards the key's bytes (stored once, at insertion, as an `Arc<[u8]>`
//! that a sync clones without allocating) and its window counts ([`Entry`]); the key
//! itself is compared under the slot's lock, so two keys never share an entry, even
//! with equal 64-bit hashes.
//!
//! What the hybrid's entry chooses ([`SlotEntry`]): a new key takes an entry of its
//! groups that is *reclaimable* (idle, its windows past, and nothing unsynced: see
//! [`Entry::reclaimable`]) before an empty slot; slots empty again (a sync drops idle
//! entries), so keys are counted and never exceed `max_keys` (the table has about 1.48
//! slots per key, so while fewer than `max_keys` are held an empty slot always exists
//! somewhere, and `max_keys` keys always fit: a key whose groups are full of live
//! entries is *displaced* to the first empty slot after them); a table holding
//! `max_keys` sweeps for a reclaimable entry and otherwise refuses the key (the full
//! policy is `OnFull::Deny`: live entries are never evicted, since their unsynced
//! counts would be lost); the reclaim floor is the table's, since a displaced key may
//! live in another shard.
//!
//! **Syncs** walk the slots holding a key (the occupancy bits), each lock held only to
//! drop an idle entry or to copy out a dirty one (the key's `Arc` and the `Entry`,
//! which is `Copy`); their replies are applied by slot index, checked under the lock to
//! hold the same key (`Arc::ptr_eq`).

use super::counts::Entry;
use crate::decision::Decision;
use crate::error::ConfigError;
use crate::sync::StdArc as Arc;
use crate::table::claim::OnFull;
use crate::table::counters::Shard;
use crate::table::geometry::{fingerprint, Geometry, MAX_KEYS};
use crate::table::locked::{Claim, Floor, LockedTable, SlotEntry};

/// The hybrid limiter's fixed-capacity key table.
///
/// Memory: slots of 136 bytes (on 64-bit targets), one occupancy bit per slot,
/// the shard counters, the claim locks and the decision counters, all allocated at
/// build.
pub(super) type KeyTable = LockedTable<HybridEntry>;

/// What a slot of the hybrid's table holds.
#[derive(Debug)]
pub(super) struct HybridEntry {
    /// The key, `None` when the slot is empty.
    key: Option<Arc<[u8]>>,
    /// Whether the key lives outside its two groups.
    displaced: bool,
    /// The key's window counts.
    counts: Entry,
}

/// What the hybrid's entries share.
pub(super) struct Keys {
    hasher: ahash::RandomState,
    /// Windows an entry matters for: 1 (fixed window), 2 (sliding window: the
    /// previous window counts).
    keep: u64,
}

impl SlotEntry for HybridEntry {
    /// The key's bytes, compared whole.
    type Key = [u8];
    type Name = Option<Arc<[u8]>>;
    type Ext = Keys;
    /// Live entries are never evicted: nothing to check again.
    type Mark = ();

    const EMPTY_FIRST: bool = false;
    const EMPTIES: bool = true;
    const FLOOR: Floor = Floor::Table;

    fn vacant() -> Self {
        HybridEntry {
            key: None,
            displaced: false,
            counts: Entry::new(0, 1),
        }
    }

    #[inline]
    fn is(&self, key: &[u8]) -> bool {
        self.key.as_deref() == Some(key)
    }

    /// Reclaimable: idle (see [`Entry::idle`]) with nothing left to sync.
    fn idle(&self, keys: &Keys, _: usize, now: u64) -> bool {
        self.counts.reclaimable(now, keys.keep)
    }

    fn mark(&self) {}

    fn settles_at(&self, keys: &Keys) -> Option<u64> {
        (!self.counts.dirty()).then(|| self.counts.idle_at(keys.keep))
    }

    /// The key's counts are set by the claim's caller (`fresh`), under the same lock.
    fn install(
        &mut self,
        _: &Keys,
        _: usize,
        _: &Shard,
        name: Option<Arc<[u8]>>,
        displaced: bool,
    ) -> Option<Arc<[u8]>> {
        self.displaced = displaced;
        std::mem::replace(&mut self.key, name)
    }

    fn vacate(&mut self) -> Option<Arc<[u8]>> {
        self.displaced = false;
        self.key.take()
    }

    fn displaced(&self) -> bool {
        self.displaced
    }

    fn ext_bytes(_: &Keys) -> usize {
        0
    }
}

impl LockedTable<HybridEntry> {
    /// The geometry for `max_keys`, and the bytes of its table, without allocating.
    fn plan(max_keys: usize) -> Result<(Geometry, usize), ConfigError> {
        let too_big = || ConfigError::InvalidCapacity {
            requested: max_keys,
            max: MAX_KEYS.min(isize::MAX as usize / Self::SLOT_BYTES / 2),
        };
        let geo = Geometry::new(max_keys, None)?;
        let bytes = Self::bytes_of(&geo, 0).ok_or_else(too_big)?;
        Ok((geo, bytes))
    }

    /// The bytes a table for `max_keys` keys takes (the keys' own bytes aside).
    pub(super) fn bytes_for(max_keys: usize) -> Result<usize, ConfigError> {
        Self::plan(max_keys).map(|(_, bytes)| bytes)
    }

    /// Allocates the table for `max_keys` keys, once, fallibly: a table too large for
    /// the machine is [`ConfigError::InvalidCapacity`], never an abort.
    pub(super) fn new(max_keys: usize, keep: u64) -> Result<Self, ConfigError> {
        let (geo, _) = Self::plan(max_keys)?;
        let keys = Keys {
            hasher: ahash::RandomState::new(),
            keep,
        };
        Self::with_ext(geo, keys, OnFull::Deny, true)
    }

    /// Entries dropped so far (idle at a sync, or reclaimed for a new key).
    pub(super) fn reclaimed(&self) -> u64 {
        self.totals().idle_reclaims
    }

    /// New keys refused so far because the table was full.
    pub(super) fn refused(&self) -> u64 {
        self.totals().refused
    }

    /// Decisions counted so far.
    pub(super) fn decisions(&self) -> u64 {
        let t = self.totals();
        t.allowed + t.rejected
    }

    /// Counts one decision.
    pub(super) fn count(&self, d: &Decision) {
        self.counts().count(1, d);
    }

    /// Runs `f(entry, now)` on `key`'s entry under its slot's lock, inserting the key
    /// with `fresh(now)` when it is missing and there is room; `None` when there is no
    /// room (the table holds `max_keys` keys and none of those looked at is
    /// reclaimable). `now` may be raised to the newest reclaim (see `table::locked`).
    #[inline]
    pub(super) fn decide<R>(
        &self,
        key: &[u8],
        now: u64,
        fresh: impl FnOnce(u64) -> Entry,
        f: impl FnOnce(&mut Entry, u64) -> R,
    ) -> Option<R> {
        let h = self.ext().hasher.hash_one(key);
        let fp = fingerprint(h);
        let loc = self.geo().locate(h);
        if let Some((_, mut held)) = self.find(fp, key, &loc) {
            return Some(f(&mut held.entry.counts, now));
        }
        // The key's one allocation, made before any lock is taken.
        let name: Arc<[u8]> = Arc::from(key);
        match self.claim(fp, key, &loc, now, Some(name)) {
            (Claim::Found(_, mut held), now) => Some(f(&mut held.entry.counts, now)),
            (Claim::Installed(_, mut held, old), now) => {
                held.entry.counts = fresh(now);
                let r = f(&mut held.entry.counts, now);
                drop(held);
                drop(old);
                Some(r)
            }
            (Claim::Untracked | Claim::Refused { .. }, _) => None,
        }
    }

    /// Runs `f` on `key`'s entry under its slot's lock, when the table holds the key
    /// (nothing is inserted: `None` otherwise).
    pub(super) fn with_key<R>(&self, key: &[u8], f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let h = self.ext().hasher.hash_one(key);
        let loc = self.geo().locate(h);
        let (_, mut held) = self.find(fingerprint(h), key, &loc)?;
        Some(f(&mut held.entry.counts))
    }

    /// A sync's walk at `now`: drops the entries idle at `now` (see [`Entry::idle`]),
    /// and hands each dirty one to `each(slot, key, entry)` after clearing its
    /// `touched` mark. Each slot's lock is held only to copy the entry and clone the
    /// key's `Arc`; `each` runs without it.
    pub(super) fn collect(&self, now: u64, mut each: impl FnMut(usize, Arc<[u8]>, Entry)) {
        let keep = self.ext().keep;
        // A key installed during the walk waits for the next sync.
        for i in self.held_slots() {
            let mut held = self.lock_slot(i);
            if held.fp() == 0 {
                continue;
            }
            if held.entry.counts.idle(now, keep) {
                let old = self.remove(i, &mut held, now);
                drop(held);
                drop(old);
                continue;
            }
            if !held.entry.counts.dirty() {
                continue;
            }
            held.entry.counts.touched = false;
            let entry = held.entry.counts;
            let key = held.entry.key.clone();
            drop(held);
            if let Some(key) = key {
                each(i, key, entry);
            }
        }
        self.rearm();
    }

    /// Runs `f` on slot `i`'s entry if the slot still holds `key` (the same `Arc` a
    /// sync collected: a key dropped and inserted again meanwhile is a new entry).
    pub(super) fn with_slot(&self, i: usize, key: &Arc<[u8]>, f: impl FnOnce(&mut Entry)) {
        let mut held = self.lock_slot(i);
        if held.entry.key.as_ref().is_some_and(|k| Arc::ptr_eq(k, key)) {
            f(&mut held.entry.counts);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry admitted once in group `k` of period `p`, clean or dirty.
    fn used(k: u64, p: u64, synced: bool) -> impl FnOnce(u64) -> Entry {
        move |_| {
            let mut e = Entry::new(k, p);
            e.w[1].own = 1;
            if synced {
                e.w[1].own_synced = 1;
            } else {
                e.touched = true;
            }
            e
        }
    }

    /// The slot size the type's doc states.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_slot_takes_136_bytes() {
        assert_eq!(KeyTable::SLOT_BYTES, 136);
    }

    /// `max_keys(n)` holds exactly n keys, for sizes whose groups are smaller than
    /// the table and ones where a key's two groups are the whole table; the n + 1st
    /// key is refused while the others are live.
    #[test]
    fn holds_exactly_max_keys_live_keys() {
        for n in [1, 2, 7, 100, 1_000, 5_000] {
            let t = KeyTable::new(n, 1).unwrap();
            for k in 0..n {
                let r = t.decide(format!("k{k}").as_bytes(), 5, used(5, 1, true), |_, _| ());
                assert!(r.is_some(), "key {k} of {n} refused");
            }
            assert_eq!(t.len(), n as u64);
            assert!(t
                .decide(b"one-more", 5, used(5, 1, true), |_, _| ())
                .is_none());
            // Every key is still found, with its own entry.
            for k in 0..n {
                let seen = t.decide(
                    format!("k{k}").as_bytes(),
                    5,
                    |_| unreachable!(),
                    |e, _| e.k,
                );
                assert_eq!(seen, Some(5));
            }
        }
    }

    /// Threads inserting the same new keys at once into one group of 12 slots, each
    /// reading the clock a little later than the one before, so that each sees other
    /// threads' fresh entries of this round as idle and replaceable: a key is never
    /// present twice (claims of one key are serialized by its claim lock and rescan
    /// under it; without the lock, two threads install one key in two slots).
    #[test]
    fn racing_claims_never_install_a_key_twice() {
        let t = KeyTable::new(8, 1).unwrap();
        assert_eq!(t.slot_count(), 12);
        let threads = 4;
        for round in 1..=2_000u64 {
            let keys: Vec<String> = (0..8).map(|k| format!("{round}-{k}")).collect();
            let barrier = std::sync::Barrier::new(threads);
            std::thread::scope(|s| {
                for th in 0..threads {
                    let (t, keys, barrier) = (&t, &keys, &barrier);
                    s.spawn(move || {
                        let now = round * 10 + th as u64;
                        barrier.wait();
                        for j in 0..keys.len() {
                            let key = &keys[(j * (th + 1) + th) % keys.len()];
                            // A clean entry of group `now`, idle from `now + 1` on.
                            let _ = t.decide(key.as_bytes(), now, |t| Entry::new(t, 1), |_, _| ());
                        }
                    });
                }
            });
            for key in &keys {
                let copies = (0..t.slot_count())
                    .filter(|&i| t.lock_slot(i).entry.key.as_deref() == Some(key.as_bytes()))
                    .count();
                assert!(copies <= 1, "round {round}: {key} held {copies} times");
            }
            let held = (0..t.slot_count())
                .filter(|&i| t.lock_slot(i).entry.key.is_some())
                .count();
            assert_eq!(t.len(), held as u64, "round {round}");
            assert!(held <= 8);
        }
    }

    /// A key whose two groups are full of live keys still fits while the table holds
    /// fewer than max_keys (it is placed elsewhere, and found there).
    #[test]
    fn a_key_with_full_groups_is_placed_elsewhere_and_found() {
        let t = KeyTable::new(1_000, 1).unwrap();
        let w = t.geo().group();
        // Fill both groups of one key with other keys, chosen by their location.
        let target = t.geo().locate(t.ext().hasher.hash_one(&b"target"[..]));
        let mut filled = 0;
        for k in 0.. {
            let name = format!("f{k}");
            let loc = t.geo().locate(t.ext().hasher.hash_one(name.as_bytes()));
            if loc.groups == target.groups || loc.groups == [target.groups[1], target.groups[0]] {
                t.decide(name.as_bytes(), 5, used(5, 1, true), |_, _| ())
                    .unwrap();
                filled += 1;
                if filled == 2 * w {
                    break;
                }
            }
        }
        assert_eq!(t.displaced(), 0);
        t.decide(b"target", 5, used(5, 1, true), |e, _| e.w[1].own += 1)
            .expect("room outside the groups");
        assert_eq!(t.displaced(), 1);
        assert_eq!(
            t.decide(b"target", 5, |_| unreachable!(), |e, _| e.w[1].own),
            Some(2)
        );
    }
}
