//! `LockedTable<E>`: the keyed table whose slots are a lock and a hint word each, for
//! entries that do not fit a word (the sliding log's ring cursor, the Redis hybrid's
//! key bytes and window counts). What differs between its users is stated by the
//! entry type ([`SlotEntry`]); the protocol below is written once.
//!
//! **Slots.** Each slot's lock guards the key's fingerprint (`0` when the slot holds no
//! key) and its entry. An atomic copy of the fingerprint (the *hint*, written only under
//! the slot's lock) lets lookups skip other keys' slots without locking them; the key
//! is confirmed under the slot's lock (the fingerprint, then [`SlotEntry::is`]: the
//! sliding log compares the fingerprint only, the hybrid the key's bytes), so a
//! request is never applied to another key's entry.
//!
//! **Claims.** A key found missing is inserted under its claim lock (see
//! `ClaimLocks`), after a rescan of its groups under that lock: a key is never present
//! twice. The slot chosen is checked again under its own lock (a claim of another key
//! may have taken it, or its owner decided again since the scan): then the claim looks
//! again. Where a new key goes, in order: an empty slot of its groups and an idle entry
//! of its groups ([`SlotEntry::idle`]: it decides as a fresh key would), in the order
//! [`SlotEntry::EMPTY_FIRST`] chooses; of each kind, the one in the group holding fewer
//! live keys. When both groups are full of live entries, the table is full for this
//! key, and its policy ([`OnFull`]) chooses: evict the live entry ranked lowest
//! ([`SlotEntry::rank`]: what it has used, ties by idle stamp; checked again under its
//! lock to be the entry ranked), refuse the key, or admit it untracked.
//!
//! **Entries that leave** ([`SlotEntry::EMPTIES`]). A table whose slots empty again
//! (the hybrid drops idle entries at its syncs) counts its keys, never more than
//! `max_keys`; each slot holding a key has an occupancy bit (changed under the slot's
//! lock) so a walk over the keys costs the keys held, not the table's size. There, when
//! both groups are full of live keys but fewer than `max_keys` are held, the key takes
//! the first empty slot of the table after its groups (it is *displaced*; while any key
//! is, a lookup that misses its groups scans the whole table). When `max_keys` are held,
//! the claim sweeps the table from a rotating hand, [`SWEEP`] slots at a time, for an
//! idle entry and drops it; a lap that finds none records when the soonest entry it saw
//! goes idle ([`SlotEntry::settles_at`]), and sweeps before then return at once (until
//! [`rearm`](LockedTable::rearm)).
//!
//! **Reclaim floor.** A claim that replaces or drops an entry first raises a stamp,
//! `reclaimed_at` (the shard's, or the table's when keys may be displaced to another
//! shard: [`SlotEntry::FLOOR`]), and every claim decides at no earlier reading than
//! that stamp: a request that read the clock before its own key's entry was reclaimed
//! (or on a lagging core) cannot decide the key fresh while its old entry still held
//! quota back.
//!
//! **Lock order**: a claim lock, then one slot lock at a time; lookups take one slot
//! lock only.

mod entry;
mod lookup;
#[cfg(tollgate_loom)]
pub mod model;
mod room;

pub(crate) use entry::{Candidate, Floor, SlotEntry};

use super::claim::{ClaimLocks, ClaimScan, OnFull};
use super::counters::{new_shards, totals, Event, Shard, Stripes, Totals};
use super::geometry::{Geometry, Location, MAX_KEYS};
use crate::error::ConfigError;
use crate::sync::{advise_huge_pages, lock, AtomicU64, Mutex, MutexGuard, Ordering};
use crossbeam_utils::CachePadded;
use room::Room;

/// Slots a sweep of a full table takes from the rotating hand at a time.
pub(crate) const SWEEP: usize = 64;

/// What a slot's lock guards.
#[derive(Debug)]
pub(crate) struct Held<E> {
    /// The key's fingerprint, `0` when the slot holds no key.
    fp: u64,
    /// The key's entry.
    pub(crate) entry: E,
}

impl<E> Held<E> {
    /// The fingerprint of the key held, `0` for none.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn fp(&self) -> u64 {
        self.fp
    }
}

#[derive(Debug)]
struct Slot<E> {
    /// A copy of `held.fp`, written under the lock, read without it.
    hint: AtomicU64,
    held: Mutex<Held<E>>,
}

/// What a claim did for a key found missing by a lookup.
pub(crate) enum Claim<'a, E: SlotEntry> {
    /// The key is in slot `.0` (a racing claim put it there), locked.
    Found(usize, MutexGuard<'a, Held<E>>),
    /// The key was installed in slot `.0`, locked, with [`SlotEntry::install`]'s
    /// empty state (the caller sets up the rest before releasing the lock); `.2` is
    /// the name the slot held before, to be dropped after the lock.
    Installed(usize, MutexGuard<'a, Held<E>>, E::Name),
    /// The table is full for the key and `OnFull::Allow` admits it without a slot.
    Untracked,
    /// The table is full for the key and it is refused: retry at `soonest` (when the
    /// soonest ranked entry of its groups goes idle), if known.
    Refused {
        /// See [`ClaimScan::soonest`].
        soonest: Option<u64>,
    },
}

/// Which kind of free slot a claim tries.
#[derive(Clone, Copy)]
enum Free {
    Empty,
    Idle,
}

/// A fixed-capacity table of locked slots holding entries `E` (see the module doc).
pub(crate) struct LockedTable<E: SlotEntry> {
    slots: Box<[Slot<E>]>,
    shards: Box<[CachePadded<Shard>]>,
    claims: ClaimLocks,
    counts: Stripes,
    geo: Geometry,
    on_full: OnFull,
    /// Present iff `E::EMPTIES`.
    room: Option<Room>,
    /// What the entries share.
    ext: E::Ext,
}

impl<E: SlotEntry> LockedTable<E> {
    /// Bytes of one slot.
    pub(crate) const SLOT_BYTES: usize = std::mem::size_of::<Slot<E>>();

    /// The bytes a table of `geo` takes, besides `ext_bytes` for its [`SlotEntry::Ext`],
    /// computed before allocating; `None` beyond the address space.
    pub(crate) fn bytes_of(geo: &Geometry, ext_bytes: usize) -> Option<usize> {
        let n = geo.slots();
        let bits = if E::EMPTIES { n.div_ceil(64) * 8 } else { 0 };
        n.checked_mul(Self::SLOT_BYTES)?
            .checked_add(ext_bytes)?
            .checked_add(bits)?
            .checked_add(geo.shards() * std::mem::size_of::<CachePadded<Shard>>())?
            .checked_add(ClaimLocks::bytes(n))?
            .checked_add(Stripes::BYTES)
            .filter(|&b| b <= isize::MAX as usize)
    }

    /// Allocates every slot, once, fallibly: a table too large for the machine is
    /// [`ConfigError::InvalidCapacity`], never an abort. A table of entries that leave
    /// ([`SlotEntry::EMPTIES`]) holds at most `geo.max_keys()` keys.
    pub(crate) fn with_ext(
        geo: Geometry,
        ext: E::Ext,
        on_full: OnFull,
        stats: bool,
    ) -> Result<Self, ConfigError> {
        let n = geo.slots();
        let too_big = |_| ConfigError::InvalidCapacity {
            requested: geo.max_keys(),
            max: MAX_KEYS,
        };
        let mut slots = Vec::new();
        slots.try_reserve_exact(n).map_err(too_big)?;
        // Advised before the first write touches the pages (see `machine`): a lookup in
        // a large table then pays no TLB miss for its slot besides the one for its entry
        // (the sliding log's ring block is advised too).
        advise_huge_pages(slots.spare_capacity_mut());
        slots.extend((0..n).map(|_| Slot {
            hint: AtomicU64::new(0),
            held: Mutex::new(Held {
                fp: 0,
                entry: E::vacant(),
            }),
        }));
        let room = if E::EMPTIES {
            let mut bits = Vec::new();
            bits.try_reserve_exact(n.div_ceil(64)).map_err(too_big)?;
            bits.extend((0..n.div_ceil(64)).map(|_| AtomicU64::new(0)));
            Some(Room {
                bits: bits.into_boxed_slice(),
                max_keys: geo.max_keys() as u64,
                occupied: AtomicU64::new(0),
                displaced: AtomicU64::new(0),
                hand: AtomicU64::new(0),
                no_idle_before: AtomicU64::new(0),
            })
        } else {
            None
        };
        Ok(LockedTable {
            slots: slots.into_boxed_slice(),
            shards: new_shards(geo.shards()),
            claims: ClaimLocks::new(n),
            counts: Stripes::new(stats),
            geo,
            on_full,
            room,
            ext,
        })
    }

    /// Bytes of the slots, the shard counters, the claim locks, the decision counters
    /// and the entries' [`SlotEntry::Ext`]: fixed at build.
    pub(crate) fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.slots)
            + E::ext_bytes(&self.ext)
            + self
                .room
                .as_ref()
                .map_or(0, |r| std::mem::size_of_val(&*r.bits))
            + std::mem::size_of_val(&*self.shards)
            + ClaimLocks::bytes(self.slots.len())
            + self.counts.memory_bytes()
    }

    /// What the entries share.
    pub(crate) fn ext(&self) -> &E::Ext {
        &self.ext
    }

    /// The table's shape.
    pub(crate) fn geo(&self) -> &Geometry {
        &self.geo
    }

    /// The decision counters (`stats`).
    pub(crate) fn counts(&self) -> &Stripes {
        &self.counts
    }

    /// The counters.
    pub(crate) fn totals(&self) -> Totals {
        totals(&self.counts)
    }

    /// Shard `shard`'s counters.
    pub(crate) fn shard(&self, shard: usize) -> &Shard {
        &self.shards[shard]
    }

    /// `(occupied, active)`: slots holding a key, and those whose entry is not idle
    /// at `now`.
    pub(crate) fn occupancy(&self, now: u64) -> (u64, u64) {
        let (mut occupied, mut active) = (0, 0);
        for (i, s) in self.slots.iter().enumerate() {
            let held = lock(&s.held);
            if held.fp != 0 {
                occupied += 1;
                if !held.entry.idle(&self.ext, i, now) {
                    active += 1;
                }
            }
        }
        (occupied, active)
    }

    /// Slot `i`, locked.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn lock_slot(&self, i: usize) -> MutexGuard<'_, Held<E>> {
        lock(&self.slots[i].held)
    }

    /// The shard whose stamp bounds claims of keys of shard `shard`.
    #[inline]
    fn floor_shard(&self, shard: usize) -> &Shard {
        match E::FLOOR {
            Floor::Shard => &self.shards[shard],
            Floor::Table => &self.shards[0],
        }
    }

    /// Records a reclaim of slot `i` at `now`, before the slot is handed over;
    /// returns the shard counting it.
    #[inline]
    fn stamp(&self, i: usize, now: u64) -> &Shard {
        let shard = self.floor_shard(self.geo.shard_of(i));
        shard.stamp(now);
        shard
    }

    /// Finds or installs `key` (fingerprint `fp`, located at `loc`) under its claim
    /// lock, at `now` raised to the reclaim floor (returned with the claim); `name` is
    /// what the key keeps if installed.
    pub(crate) fn claim(
        &self,
        fp: u64,
        key: &E::Key,
        loc: &Location,
        now: u64,
        name: E::Name,
    ) -> (Claim<'_, E>, u64) {
        let _claim = self.claims.of(fp).lock();
        // Every replacing claim stamps before it installs: this reading is no older
        // than any reclaim of this key's old slot.
        let now = self.floor_shard(loc.shard).floor(now);
        let evict = self.on_full == OnFull::Evict;
        let order = if E::EMPTY_FIRST {
            [Free::Empty, Free::Idle]
        } else {
            [Free::Idle, Free::Empty]
        };
        let mut swept = false;
        let claim = 'scan: loop {
            let mut empty = ClaimScan::new();
            let mut idle = ClaimScan::new();
            for (w, i) in loc.probe(self.geo.group()) {
                let held = lock(&self.slots[i].held);
                if held.fp == fp && held.entry.is(key) {
                    break 'scan Claim::Found(i, held);
                }
                let me = (i, held.fp, held.entry.mark());
                if held.fp == 0 {
                    empty.free(w, me);
                } else if held.entry.idle(&self.ext, i, now) {
                    idle.free(w, me);
                } else {
                    empty.live(w);
                    idle.live(w);
                    held.entry.rank(&self.ext, now, evict, me, &mut idle);
                }
            }
            // Installs of this key hold this claim lock, so the hints of any displaced
            // copy are visible here.
            if let Some((i, held)) = self.find_displaced(fp, key) {
                break 'scan Claim::Found(i, held);
            }
            // Between the scan and the slot's lock, a claim of another key may have
            // taken the slot, or its owner decided again: then look again.
            for free in order {
                match free {
                    Free::Idle => {
                        let Some((i, seen, _)) = idle.target() else {
                            continue;
                        };
                        let mut held = lock(&self.slots[i].held);
                        if held.fp != seen || !held.entry.idle(&self.ext, i, now) {
                            continue 'scan;
                        }
                        self.stamp(i, now);
                        self.counts.event(Event::IdleReclaim);
                        let old = self.install(i, &mut held, fp, name, false);
                        break 'scan Claim::Installed(i, held, old);
                    }
                    Free::Empty => {
                        if !self.reserve() {
                            // Full: one step of the sweep may free room elsewhere.
                            if !swept && self.sweep(now) {
                                swept = true;
                                continue 'scan;
                            }
                            break;
                        }
                        if let Some((i, _, _)) = empty.target() {
                            let mut held = lock(&self.slots[i].held);
                            if held.fp != 0 {
                                self.unreserve();
                                continue 'scan;
                            }
                            let old = self.install(i, &mut held, fp, name, false);
                            break 'scan Claim::Installed(i, held, old);
                        }
                        if let Some(room) = &self.room {
                            // Both groups hold live keys only. Fewer than max_keys keys
                            // are held (counting our reservation), and the table has
                            // more slots than that, so an empty slot exists: the first
                            // one after the groups.
                            let n = self.slots.len();
                            let from = loc.groups[0];
                            for i in (from..n).chain(0..from) {
                                if self.slots[i].hint.load(Ordering::Acquire) != 0 {
                                    continue;
                                }
                                let mut held = lock(&self.slots[i].held);
                                if held.fp == 0 {
                                    room.displaced.fetch_add(1, Ordering::AcqRel);
                                    let old = self.install(i, &mut held, fp, name, true);
                                    break 'scan Claim::Installed(i, held, old);
                                }
                            }
                            // Every empty slot was taken during the walk: look again.
                            self.unreserve();
                            continue 'scan;
                        }
                        self.unreserve();
                    }
                }
            }
            // The table is full for this key: its policy, written once.
            break 'scan match (self.on_full, idle.victim()) {
                (OnFull::Evict, Some((i, seen, ranked))) => {
                    let mut held = lock(&self.slots[i].held);
                    // Ranked on this entry: if its owner decided since, rank again.
                    if held.fp != seen || held.entry.mark() != ranked {
                        continue 'scan;
                    }
                    self.stamp(i, now);
                    self.counts.event(Event::Eviction);
                    let old = self.install(i, &mut held, fp, name, false);
                    Claim::Installed(i, held, old)
                }
                (OnFull::Allow, _) => {
                    self.counts.event(Event::Untracked);
                    Claim::Untracked
                }
                _ => {
                    self.counts.event(Event::Refused);
                    Claim::Refused {
                        soonest: idle.soonest(),
                    }
                }
            };
        };
        (claim, now)
    }

    /// Hands slot `i` (locked as `held`) to the key `fp` named `name`, with its empty
    /// entry; returns the name the slot held.
    fn install(
        &self,
        i: usize,
        held: &mut Held<E>,
        fp: u64,
        name: E::Name,
        displaced: bool,
    ) -> E::Name {
        if let Some(room) = &self.room {
            if held.entry.displaced() {
                room.displaced.fetch_sub(1, Ordering::AcqRel);
            }
            room.bits[i / 64].fetch_or(1 << (i % 64), Ordering::AcqRel);
        }
        held.fp = fp;
        let shard = &self.shards[self.geo.shard_of(i)];
        let old = held.entry.install(&self.ext, i, shard, name, displaced);
        self.slots[i].hint.store(fp, Ordering::Release);
        old
    }
}
