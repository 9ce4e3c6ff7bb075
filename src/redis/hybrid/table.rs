//! The hybrid mode's key table: a fixed number of slots allocated once at build, laid
//! out and probed as the engine's keyed tables are (`keyed::layout`: the geometry, the
//! fingerprint, the two candidate groups and their probe order, the claim locks, the
//! decision counters), with one lock per slot as in the sliding log's table
//! (`keyed::log_table`).
//!
//! Each slot's lock guards the key's bytes (stored once, at insertion, as an `Arc<[u8]>`
//! that a sync clones without allocating) and its [`Entry`]. An atomic copy of the key's
//! fingerprint (the *hint*, written only under the slot's lock, `0` when the slot is
//! empty) lets lookups skip other keys' slots without locking them; the key itself is
//! compared under the slot's lock, so two keys never share an entry, even with equal
//! 64-bit hashes.
//!
//! **Claims.** A key found missing is inserted under its claim lock (`ClaimLocks`),
//! after a rescan of its groups under that lock, so a key is never present twice.
//! Where it goes, in order of preference: an entry of its groups that is
//! *reclaimable* (idle, its groups past, and nothing unsynced: see
//! [`Entry::reclaimable`]), which it replaces; an empty slot of its groups (the one
//! of the group holding fewer live keys); and, only when both groups are full of
//! live entries, the first empty slot of the table after them (the key is then
//! *displaced*: while any key is, a lookup that misses its groups scans the whole
//! table). Keys are counted ([`occupied`](KeyTable::len)) and never exceed `max_keys`;
//! the table has about 1.48 slots per key, so while fewer than `max_keys` are held an
//! empty slot always exists somewhere, and `max_keys` keys always fit. When the count
//! is at `max_keys`, the claim sweeps the table from a rotating hand, [`SWEEP`] slots at
//! a time, for a reclaimable entry and drops it; if a whole lap finds none, the key is
//! refused, and later claims skip the sweep (and are refused unless their own groups
//! hold a reclaimable entry) until the soonest clean entry that lap saw goes idle or a
//! sync (which may clean entries) has run: a full table of live keys costs one lap of
//! the table per such event, not one per new key.
//!
//! **Syncs** walk the slots holding a key (one occupancy bit per slot, changed under
//! the slot's lock, so the walk costs the keys held, not the table's size), each lock
//! held only to drop an idle entry or to copy out a dirty one (the key's `Arc` and the
//! `Entry`, which is `Copy`); their replies are applied by slot index, checked under
//! the lock to hold the same key (`Arc::ptr_eq`).
//!
//! A dropped entry raises `reclaimed_at`, and a claim decides at no earlier reading:
//! a request that read the clock before its key's entry was dropped cannot restart the
//! key in a window the dropped entry had already counted in.
//!
//! Lock order: claim lock, then one slot lock at a time.

use super::Entry;
use crate::sync::{lock, AtomicU64, Mutex, MutexGuard, Ordering};
use crate::table::claim::{ClaimLocks, ClaimScan};
use crate::table::counters::{totals, Stripes};
use crate::table::geometry::{fingerprint, Geometry, Location, MAX_KEYS};
use crate::{ConfigError, Decision};
use std::sync::Arc;

/// Slots a sweep of a full table takes from the rotating hand at a time.
pub(super) const SWEEP: usize = 64;

/// What a slot's lock guards.
struct Held {
    /// The key, `None` when the slot is empty.
    key: Option<Arc<[u8]>>,
    /// Whether the key lives outside its two groups.
    displaced: bool,
    entry: Entry,
}

struct Slot {
    /// The fingerprint of the key held, `0` when empty: written under the lock, read
    /// without it.
    hint: AtomicU64,
    held: Mutex<Held>,
}

/// The hybrid limiter's fixed-capacity key table.
///
/// Memory: `slots` of 112 bytes (on 64-bit targets), one occupancy bit per slot, the
/// claim locks and the decision counters, all allocated at build.
pub(super) struct KeyTable {
    slots: Box<[Slot]>,
    /// One bit per slot, set while the slot holds a key (changed under the slot's
    /// lock): a sync walks the keys held, not every slot.
    occupied_bits: Box<[AtomicU64]>,
    geo: Geometry,
    claims: ClaimLocks,
    hasher: ahash::RandomState,
    /// The most keys held at once.
    max_keys: u64,
    /// Slots holding a key, plus claims that reserved room for one: at most
    /// `max_keys`.
    occupied: AtomicU64,
    /// Keys living outside their two groups.
    displaced: AtomicU64,
    /// The newest reading at which an entry was dropped (a running maximum).
    reclaimed_at: AtomicU64,
    /// Entries dropped so far.
    reclaimed: AtomicU64,
    /// Where the next sweep of a full table starts.
    hand: AtomicU64,
    /// After a lap of the sweep found nothing to reclaim: the soonest time at which an
    /// entry it saw (with nothing to sync) goes idle; until then sweeps are skipped.
    /// Reset by every sync and quota change. `0`: sweep.
    no_idle_before: AtomicU64,
    /// Windows an entry matters for: 1 (fixed window), 2 (sliding window: the
    /// previous window counts).
    keep: u64,
    counts: Stripes,
}

impl KeyTable {
    /// The geometry for `max_keys`, and the bytes of its table, without allocating.
    fn plan(max_keys: usize) -> Result<(Geometry, usize), ConfigError> {
        let too_big = || ConfigError::InvalidCapacity {
            requested: max_keys,
            max: MAX_KEYS.min(isize::MAX as usize / std::mem::size_of::<Slot>() / 2),
        };
        let geo = Geometry::new(max_keys, None)?;
        let bytes = geo
            .slots()
            .checked_mul(std::mem::size_of::<Slot>())
            .and_then(|b| b.checked_add(geo.slots().div_ceil(64) * 8))
            .and_then(|b| b.checked_add(ClaimLocks::bytes(geo.slots())))
            .and_then(|b| b.checked_add(Stripes::BYTES))
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or_else(too_big)?;
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
        let n = geo.slots();
        let too_big = |_| ConfigError::InvalidCapacity {
            requested: max_keys,
            max: MAX_KEYS,
        };
        let mut slots = Vec::new();
        slots.try_reserve_exact(n).map_err(too_big)?;
        let mut bits = Vec::new();
        bits.try_reserve_exact(n.div_ceil(64)).map_err(too_big)?;
        bits.extend((0..n.div_ceil(64)).map(|_| AtomicU64::new(0)));
        slots.extend((0..n).map(|_| Slot {
            hint: AtomicU64::new(0),
            held: Mutex::new(Held {
                key: None,
                displaced: false,
                entry: Entry::new(0, 1),
            }),
        }));
        Ok(KeyTable {
            slots: slots.into_boxed_slice(),
            occupied_bits: bits.into_boxed_slice(),
            geo,
            claims: ClaimLocks::new(n),
            hasher: ahash::RandomState::new(),
            max_keys: max_keys as u64,
            occupied: AtomicU64::new(0),
            displaced: AtomicU64::new(0),
            reclaimed_at: AtomicU64::new(0),
            reclaimed: AtomicU64::new(0),
            hand: AtomicU64::new(0),
            no_idle_before: AtomicU64::new(0),
            keep,
            counts: Stripes::new(true),
        })
    }

    /// Bytes of the slots, the claim locks and the decision counters: fixed at build.
    pub(super) fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.slots)
            + std::mem::size_of_val(&*self.occupied_bits)
            + ClaimLocks::bytes(self.slots.len())
            + self.counts.memory_bytes()
    }

    /// Keys held now.
    pub(super) fn len(&self) -> u64 {
        self.occupied.load(Ordering::Relaxed)
    }

    /// Entries dropped so far (idle at a sync, or reclaimed for a new key).
    pub(super) fn reclaimed(&self) -> u64 {
        self.reclaimed.load(Ordering::Relaxed)
    }

    /// Decisions counted so far.
    pub(super) fn decisions(&self) -> u64 {
        let t = totals(&[], &self.counts);
        t.allowed + t.rejected
    }

    /// Counts one decision.
    pub(super) fn count(&self, d: &Decision) {
        self.counts.count(1, d);
    }

    /// Whether `e` may be dropped at `now`: idle (see [`Entry::idle`]) with nothing
    /// left to sync.
    fn reclaimable(&self, e: &Entry, now: u64) -> bool {
        e.reclaimable(now, self.keep)
    }

    /// Runs `f(entry, now)` on `key`'s entry under its slot's lock, inserting the key
    /// with `fresh(now)` when it is missing and there is room; `None` when there is no
    /// room (the table holds `max_keys` keys and none of those looked at is
    /// reclaimable). `now` may be raised to the newest reclaim (see the module doc).
    #[inline]
    pub(super) fn decide<R>(
        &self,
        key: &[u8],
        now: u64,
        fresh: impl FnOnce(u64) -> Entry,
        f: impl FnOnce(&mut Entry, u64) -> R,
    ) -> Option<R> {
        let h = self.hasher.hash_one(key);
        let fp = fingerprint(h);
        let loc = self.geo.locate(h);
        if let Some(mut held) = self.find(fp, key, &loc) {
            return Some(f(&mut held.entry, now));
        }
        self.claim(fp, key, &loc, now, fresh, f)
    }

    /// Slot `i` locked, if it holds `key` (fingerprint `fp`); the hint skips other
    /// keys' slots without locking them.
    #[inline]
    fn holding(&self, i: usize, fp: u64, key: &[u8]) -> Option<MutexGuard<'_, Held>> {
        let slot = &self.slots[i];
        if slot.hint.load(Ordering::Acquire) != fp {
            return None;
        }
        let held = lock(&slot.held);
        (held.key.as_deref() == Some(key)).then_some(held)
    }

    /// The slot holding `key`, locked: its groups, then (while any key is displaced)
    /// the whole table.
    #[inline]
    fn find(&self, fp: u64, key: &[u8], loc: &Location) -> Option<MutexGuard<'_, Held>> {
        for (_, i) in loc.probe(self.geo.group()) {
            if let Some(held) = self.holding(i, fp, key) {
                return Some(held);
            }
        }
        if self.displaced.load(Ordering::Acquire) > 0 {
            return (0..self.slots.len()).find_map(|i| self.holding(i, fp, key));
        }
        None
    }

    /// Finds or installs `key` under its claim lock.
    fn claim<R>(
        &self,
        fp: u64,
        key: &[u8],
        loc: &Location,
        now: u64,
        fresh: impl FnOnce(u64) -> Entry,
        f: impl FnOnce(&mut Entry, u64) -> R,
    ) -> Option<R> {
        let _claim = lock(self.claims.of(fp));
        let now = now.max(self.reclaimed_at.load(Ordering::Acquire));
        // The key's one allocation, made before any slot lock is taken.
        let name: Arc<[u8]> = Arc::from(key);
        let mut swept = false;
        loop {
            let mut empty = ClaimScan::new();
            let mut idle = ClaimScan::new();
            for (w, i) in loc.probe(self.geo.group()) {
                let mut held = lock(&self.slots[i].held);
                match &held.key {
                    Some(k) if **k == *key => return Some(f(&mut held.entry, now)),
                    None => empty.free(w, i),
                    Some(_) if self.reclaimable(&held.entry, now) => idle.free(w, i),
                    Some(_) => {
                        empty.live(w);
                        idle.live(w);
                    }
                }
            }
            // Installs of this key hold this claim lock, so the hints of any displaced
            // copy are visible here.
            if self.displaced.load(Ordering::Acquire) > 0 {
                if let Some(mut held) = (0..self.slots.len()).find_map(|i| self.holding(i, fp, key))
                {
                    return Some(f(&mut held.entry, now));
                }
            }
            // Between the scan and the slot's lock, another claim may have taken the
            // slot, or its key decided again: then look again.
            if let Some(i) = idle.target() {
                let mut held = lock(&self.slots[i].held);
                if held.key.is_some() && self.reclaimable(&held.entry, now) {
                    let old = self.vacate(i, &mut held, now);
                    let r = self.install(i, &mut held, fp, name, false, now, fresh, f);
                    drop(held);
                    drop(old);
                    return Some(r);
                }
                continue;
            }
            if !self.reserve() {
                // Full: one step of the sweep may free room elsewhere.
                if !swept && self.sweep(now) {
                    swept = true;
                    continue;
                }
                return None;
            }
            if let Some(i) = empty.target() {
                let mut held = lock(&self.slots[i].held);
                if held.key.is_none() {
                    return Some(self.install(i, &mut held, fp, name, false, now, fresh, f));
                }
                self.occupied.fetch_sub(1, Ordering::AcqRel);
                continue;
            }
            // Both groups hold live keys only. Fewer than max_keys keys are held
            // (counting our reservation), and the table has more slots than that, so
            // an empty slot exists: the first one after the groups.
            let n = self.slots.len();
            let from = loc.groups[0];
            for i in (from..n).chain(0..from) {
                if self.slots[i].hint.load(Ordering::Acquire) != 0 {
                    continue;
                }
                let mut held = lock(&self.slots[i].held);
                if held.key.is_none() {
                    self.displaced.fetch_add(1, Ordering::AcqRel);
                    return Some(self.install(i, &mut held, fp, name, true, now, fresh, f));
                }
            }
            // Every empty slot was taken during the walk: look again.
            self.occupied.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Reserves room for one more key, if the table holds fewer than `max_keys`.
    fn reserve(&self) -> bool {
        self.occupied
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| {
                (o < self.max_keys).then_some(o + 1)
            })
            .is_ok()
    }

    /// Hands slot `i` (locked as `held`, empty) to `name` (fingerprint `fp`) with
    /// `fresh(now)` and runs `f` on it.
    #[allow(clippy::too_many_arguments)]
    fn install<R>(
        &self,
        i: usize,
        held: &mut Held,
        fp: u64,
        name: Arc<[u8]>,
        displaced: bool,
        now: u64,
        fresh: impl FnOnce(u64) -> Entry,
        f: impl FnOnce(&mut Entry, u64) -> R,
    ) -> R {
        held.key = Some(name);
        self.occupied_bits[i / 64].fetch_or(1 << (i % 64), Ordering::AcqRel);
        held.displaced = displaced;
        held.entry = fresh(now);
        self.slots[i].hint.store(fp, Ordering::Release);
        f(&mut held.entry, now)
    }

    /// Empties slot `i` (locked as `held`) at `now`, leaving `occupied` to the caller;
    /// returns the key, to be dropped once the lock is released.
    fn vacate(&self, i: usize, held: &mut Held, now: u64) -> Option<Arc<[u8]>> {
        self.reclaimed_at.fetch_max(now, Ordering::AcqRel);
        self.reclaimed.fetch_add(1, Ordering::Relaxed);
        if held.displaced {
            held.displaced = false;
            self.displaced.fetch_sub(1, Ordering::AcqRel);
        }
        self.slots[i].hint.store(0, Ordering::Release);
        self.occupied_bits[i / 64].fetch_and(!(1 << (i % 64)), Ordering::AcqRel);
        held.key.take()
    }

    /// Drops slot `i`'s entry (locked as `held`) at `now`.
    fn remove(&self, i: usize, held: &mut Held, now: u64) -> Option<Arc<[u8]>> {
        let old = self.vacate(i, held, now);
        self.occupied.fetch_sub(1, Ordering::AcqRel);
        old
    }

    /// Drops the first reclaimable entry past the hand, walking at most one lap of the
    /// table; returns whether it found one. A lap that finds none records when the
    /// soonest entry it saw goes idle, and sweeps before then return at once.
    fn sweep(&self, now: u64) -> bool {
        if now < self.no_idle_before.load(Ordering::Acquire) {
            return false;
        }
        let n = self.slots.len();
        let mut soonest = u64::MAX;
        for _ in 0..n.div_ceil(SWEEP) {
            let start = (self.hand.fetch_add(SWEEP as u64, Ordering::Relaxed) % n as u64) as usize;
            for j in 0..SWEEP.min(n) {
                let i = (start + j) % n;
                if self.slots[i].hint.load(Ordering::Acquire) == 0 {
                    continue;
                }
                let mut held = lock(&self.slots[i].held);
                if held.key.is_none() {
                    continue;
                }
                if self.reclaimable(&held.entry, now) {
                    let old = self.remove(i, &mut held, now);
                    drop(held);
                    drop(old);
                    return true;
                }
                if !held.entry.dirty() {
                    soonest = soonest.min(held.entry.idle_at(self.keep));
                }
            }
        }
        self.no_idle_before.store(soonest, Ordering::Release);
        false
    }

    /// Lets the next full-table claim sweep again (after a sync cleaned entries, or a
    /// quota change moved their groups).
    pub(super) fn rearm(&self) {
        self.no_idle_before.store(0, Ordering::Release);
    }

    /// A sync's walk at `now`: drops the entries idle at `now` (see [`Entry::idle`]),
    /// and hands each dirty one to `each(slot, key, entry)` after clearing its
    /// `touched` mark. Each slot's lock is held only to copy the entry and clone the
    /// key's `Arc`; `each` runs without it.
    pub(super) fn collect(&self, now: u64, mut each: impl FnMut(usize, Arc<[u8]>, Entry)) {
        // The slots holding a key, from the occupancy bits: a sync's walk costs the keys
        // held, not the table's size. A key installed during the walk waits for the
        // next sync.
        let held_slots = self.occupied_bits.iter().enumerate().flat_map(|(w, bits)| {
            let mut m = bits.load(Ordering::Acquire);
            std::iter::from_fn(move || {
                (m != 0).then(|| {
                    let i = w * 64 + m.trailing_zeros() as usize;
                    m &= m - 1;
                    i
                })
            })
        });
        for i in held_slots {
            let slot = &self.slots[i];
            let mut held = lock(&slot.held);
            if held.key.is_none() {
                continue;
            }
            if held.entry.idle(now, self.keep) {
                let old = self.remove(i, &mut held, now);
                drop(held);
                drop(old);
                continue;
            }
            if !held.entry.dirty() {
                continue;
            }
            held.entry.touched = false;
            let entry = held.entry;
            let key = held.key.clone();
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
        let mut held = lock(&self.slots[i].held);
        if held.key.as_ref().is_some_and(|k| Arc::ptr_eq(k, key)) {
            f(&mut held.entry);
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
        assert_eq!(t.slots.len(), 12);
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
                let copies = t
                    .slots
                    .iter()
                    .filter(|s| lock(&s.held).key.as_deref() == Some(key.as_bytes()))
                    .count();
                assert!(copies <= 1, "round {round}: {key} held {copies} times");
            }
            let held = t
                .slots
                .iter()
                .filter(|s| lock(&s.held).key.is_some())
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
        let w = t.geo.group();
        // Fill both groups of one key with other keys, chosen by their location.
        let target = t.geo.locate(t.hasher.hash_one(&b"target"[..]));
        let mut filled = 0;
        for k in 0.. {
            let name = format!("f{k}");
            let loc = t.geo.locate(t.hasher.hash_one(name.as_bytes()));
            if loc.groups == target.groups || loc.groups == [target.groups[1], target.groups[0]] {
                t.decide(name.as_bytes(), 5, used(5, 1, true), |_, _| ())
                    .unwrap();
                filled += 1;
                if filled == 2 * w {
                    break;
                }
            }
        }
        assert_eq!(t.displaced.load(Ordering::Relaxed), 0);
        t.decide(b"target", 5, used(5, 1, true), |e, _| e.w[1].own += 1)
            .expect("room outside the groups");
        assert_eq!(t.displaced.load(Ordering::Relaxed), 1);
        assert_eq!(
            t.decide(b"target", 5, |_| unreachable!(), |e, _| e.w[1].own),
            Some(2)
        );
    }
}
