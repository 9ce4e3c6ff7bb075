//! The sliding log's keyed table: one lock per slot, guarding the key's fingerprint and
//! its ring's cursor; the rings' timestamps live in one block allocated at build.
//!
//! The block holds `limit` timestamps (8 bytes each) per slot, reserved fallibly in one
//! allocation, so a table too large for the machine is a [`ConfigError::InvalidCapacity`]
//! at build, never an abort. Slot `i`'s timestamps are the block's `i`-th run of
//! `limit` cells, touched only under slot `i`'s lock. A key's identity is checked under
//! the slot's lock, so a request can never be applied to a ring handed to another key.
//! An atomic copy of the fingerprint (the *hint*, written only under the slot's lock)
//! lets lookups skip the slots of other keys without locking them.
//!
//! Every claim (of an empty, idle or evicted slot) holds the key's claim lock (see
//! `ClaimLocks`) and rescans under it, so a key is never present twice; the chosen slot
//! is checked again under its own lock (a claim of another key may have taken it).
//! Empty slots are taken before idle ones, and a live log is evicted (`OnFull::Evict`)
//! only when both groups are full of live logs: the one that has used least (its
//! entries in the period, a binary search of its ring under its lock), ties by idle
//! stamp, checked again under its lock to be the log that was ranked.
//! A claim that replaces an entry first raises the shard's `reclaimed_at` stamp,
//! and every claim decides at no earlier reading than the stamp: a request that read
//! the clock before its own key's slot was reclaimed (or on a lagging core) cannot
//! decide the key fresh while its old log still held quota back (see `table` for the
//! argument). Lock order: claim lock, then a slot lock; lookups take a slot lock only.
//!
//! [`ConfigError::InvalidCapacity`]: crate::ConfigError::InvalidCapacity

use super::claim::{ClaimLocks, ClaimScan, OnFull};
use super::counters::{new_shards, totals, Shard, Stripes, Totals};
use super::geometry::{fingerprint, Geometry, Location, MAX_KEYS};
use super::packed::Placed;
use super::tiers::Tiers;
use crate::algorithm::sliding_log::{Cursor, Ring, SlidingLog, EMPTY_STAMP};
use crate::reservation::Origin;
use crate::sync::{lock, AtomicU64, Mutex, MutexGuard, Ordering, PlainAtomicU64};
use crate::Decision;
use crossbeam_utils::CachePadded;

/// What a slot's lock guards.
#[derive(Debug)]
struct Entry {
    /// The key's fingerprint, `0` when the slot has never held a key.
    fp: u64,
    /// The ring's head and newest timestamp (its timestamps are in the block).
    cursor: Cursor,
    /// This incarnation of the key's log: the shard's epoch when it was installed or
    /// last reset (unique in the shard), so that a booking is given back only to the
    /// log it was made on (see `reservation::Origin::Entry`).
    gen: u64,
}

#[derive(Debug)]
struct Slot {
    /// A copy of `entry.fp`, written under the lock, read without it.
    hint: AtomicU64,
    entry: Mutex<Entry>,
}

/// A fixed-capacity table of sliding logs.
pub(crate) struct LogTable {
    slots: Box<[Slot]>,
    /// Every slot's timestamps, `limit` per slot.
    stamps: Box<[PlainAtomicU64]>,
    shards: Box<[CachePadded<Shard>]>,
    claims: ClaimLocks,
    counts: Stripes,
    geo: Geometry,
    /// Each tier's parameters.
    params: Tiers<SlidingLog>,
    /// Timestamps per ring, fixed at build (the largest limit built with).
    ring_len: usize,
    on_full: OnFull,
}

impl LogTable {
    /// The bytes a table of `geo` and `params` takes, computed before allocating;
    /// `None` when it exceeds the address space.
    pub(crate) fn bytes_for(geo: &Geometry, ring_len: u32, tiers: usize) -> Option<usize> {
        let n = geo.slots();
        n.checked_mul(ring_len as usize * std::mem::size_of::<u64>())?
            .checked_add(Tiers::<SlidingLog>::bytes(tiers))?
            .checked_add(n.checked_mul(std::mem::size_of::<Slot>())?)?
            .checked_add(geo.shards() * std::mem::size_of::<CachePadded<Shard>>())?
            .checked_add(ClaimLocks::bytes(n))?
            .checked_add(Stripes::BYTES)
    }

    /// Allocates every slot and the timestamp block, once, fallibly.
    pub(crate) fn new(
        geo: Geometry,
        tiers: Vec<SlidingLog>,
        on_full: OnFull,
        stats: bool,
    ) -> Result<Self, crate::ConfigError> {
        let n = geo.slots();
        let too_big = || crate::ConfigError::InvalidCapacity {
            requested: geo.max_keys(),
            max: MAX_KEYS,
        };
        let limit = tiers.iter().map(SlidingLog::limit).max().unwrap_or(0) as usize;
        let cells = n
            .checked_mul(limit)
            .filter(|&c| c <= isize::MAX as usize / 8)
            .ok_or_else(too_big)?;
        let mut stamps = Vec::new();
        stamps.try_reserve_exact(cells).map_err(|_| too_big())?;
        stamps.extend((0..cells).map(|_| PlainAtomicU64::new(EMPTY_STAMP)));
        let mut slots = Vec::new();
        slots.try_reserve_exact(n).map_err(|_| too_big())?;
        slots.extend((0..n).map(|_| Slot {
            hint: AtomicU64::new(0),
            entry: Mutex::new(Entry {
                fp: 0,
                cursor: Cursor::EMPTY,
                gen: 0,
            }),
        }));
        Ok(LogTable {
            slots: slots.into_boxed_slice(),
            stamps: stamps.into_boxed_slice(),
            shards: new_shards(geo.shards()),
            claims: ClaimLocks::new(n),
            counts: Stripes::new(stats),
            geo,
            params: Tiers::new(tiers),
            ring_len: limit,
            on_full,
        })
    }

    /// Bytes of the slots, their timestamps and the shard metadata.
    pub(crate) fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.slots)
            + std::mem::size_of_val(&*self.stamps)
            + self.params.memory_bytes()
            + std::mem::size_of_val(&*self.shards)
            + ClaimLocks::bytes(self.slots.len())
            + self.counts.memory_bytes()
    }

    /// Bytes of one slot's ring.
    pub(crate) fn ring_bytes(&self) -> usize {
        self.ring_len * std::mem::size_of::<u64>()
    }

    /// Each tier's parameters.
    pub(crate) fn tiers(&self) -> &Tiers<SlidingLog> {
        &self.params
    }

    /// The decision counters (`stats`).
    pub(crate) fn counts(&self) -> &Stripes {
        &self.counts
    }

    /// Timestamps per ring, fixed at build.
    pub(crate) fn ring_len(&self) -> u32 {
        self.ring_len as u32
    }

    /// The counters.
    pub(crate) fn totals(&self) -> Totals {
        totals(&self.shards, &self.counts)
    }

    /// Slot `i`'s ring at `cursor` (call under slot `i`'s lock).
    #[inline]
    fn ring(&self, i: usize, cursor: Cursor) -> Ring<&[PlainAtomicU64]> {
        let len = self.ring_len;
        Ring::from_parts(cursor, &self.stamps[i * len..(i + 1) * len])
    }

    /// Runs `f` on slot `i`'s ring (locked as `e`) and stores the cursor back.
    #[inline]
    fn apply<R>(
        &self,
        i: usize,
        e: &mut Entry,
        now: u64,
        f: &mut impl FnMut(&mut Ring<&[PlainAtomicU64]>, u64) -> R,
    ) -> R {
        let mut ring = self.ring(i, e.cursor);
        let r = f(&mut ring, now);
        e.cursor = ring.cursor();
        r
    }

    /// `(occupied, active)`: slots holding a key, and those whose log is not empty.
    pub(crate) fn occupancy(&self, now: u64) -> (u64, u64) {
        let (mut occupied, mut active) = (0, 0);
        for s in self.slots.iter() {
            let e = lock(&s.entry);
            if e.fp != 0 {
                occupied += 1;
                if !self.params.get(0).cursor_is_idle(e.cursor, now) {
                    active += 1;
                }
            }
        }
        (occupied, active)
    }

    /// One decision for the key hashed to `h` at `now`, for `cost <= capacity`.
    pub(crate) fn decide(&self, h: u64, now: u64, cost: u32, params: SlidingLog) -> Decision {
        let placed = self.run(
            h,
            now,
            cost > 0,
            |ring, t| params.step(ring, t, cost),
            || params.fresh(cost),
        );
        let d = match placed {
            // A peek (cost 0) at an absent key: it decides as fresh, uncounted.
            Placed::Absent(d) => return d,
            Placed::Stored(d) | Placed::Untracked(d) => d,
            // Refused under the deciding tier's policy (the table's is tier 0's).
            Placed::Refused(d) => d.with_policy(params.limit(), params.limit()),
        };
        self.counts.count(cost, &d);
        d
    }

    /// Runs `f(ring, now)` on the key hashed to `h` under its slot's lock, inserting a
    /// missing key (with an empty ring, through the claim protocol) only if `insert`;
    /// `fresh()` is the result for a key left absent or admitted untracked.
    pub(crate) fn run<R>(
        &self,
        h: u64,
        now: u64,
        insert: bool,
        f: impl FnMut(&mut Ring<&[PlainAtomicU64]>, u64) -> R,
        fresh: impl FnOnce() -> R,
    ) -> Placed<R> {
        self.run_booked(h, now, insert, f, fresh).0
    }

    /// [`run`](Self::run), and what identifies the log the transition ran on
    /// ([`Origin::Entry`]), for a later [`refund`](Self::refund).
    pub(crate) fn run_booked<R>(
        &self,
        h: u64,
        now: u64,
        insert: bool,
        mut f: impl FnMut(&mut Ring<&[PlainAtomicU64]>, u64) -> R,
        fresh: impl FnOnce() -> R,
    ) -> (Placed<R>, Origin) {
        let fp = fingerprint(h);
        let loc = self.geo.locate(h);
        if let Some((i, mut e)) = self.find(fp, &loc) {
            let r = self.apply(i, &mut e, now, &mut f);
            return (Placed::Stored(r), Origin::Entry { gen: e.gen });
        }
        if !insert {
            return (Placed::Absent(fresh()), Origin::Cell);
        }
        let mut gen = 0;
        let placed = self.claim(fp, &loc, now, &mut gen, &mut f, fresh);
        (placed, Origin::Entry { gen })
    }

    /// Runs `f(ring, now)` on the key hashed to `h` only while its log is the one
    /// `origin` (from [`run_booked`](Self::run_booked)) identifies: nothing when the
    /// key is gone, or was reset, reclaimed or evicted since.
    pub(crate) fn refund(
        &self,
        h: u64,
        origin: Origin,
        now: u64,
        mut f: impl FnMut(&mut Ring<&[PlainAtomicU64]>, u64),
    ) {
        let Origin::Entry { gen } = origin else {
            return;
        };
        let loc = self.geo.locate(h);
        if let Some((i, mut e)) = self.find(fingerprint(h), &loc) {
            if e.gen == gen {
                self.apply(i, &mut e, now, &mut f);
            }
        }
    }

    /// Empties the log of the key hashed to `h`, as a new incarnation (no booking made
    /// before gives anything to it). `false` when the table does not hold the key.
    pub(crate) fn reset(&self, h: u64) -> bool {
        let loc = self.geo.locate(h);
        let Some((i, mut e)) = self.find(fingerprint(h), &loc) else {
            return false;
        };
        let mut ring = self.ring(i, e.cursor);
        ring.clear();
        e.cursor = ring.cursor();
        e.gen = self.shards[loc.shard].next_epoch();
        true
    }

    /// The decision for `cost` (at least 1) for the key hashed to `h` at `now`,
    /// logging and inserting nothing.
    pub(crate) fn peek(&self, h: u64, now: u64, cost: u32, params: SlidingLog) -> Decision {
        let fp = fingerprint(h);
        match self.find(fp, &self.geo.locate(h)) {
            Some((i, e)) => params.peek(&self.ring(i, e.cursor), now, cost),
            None => params.fresh(cost),
        }
    }

    /// The slot holding `fp`, locked: the hints skip other keys' slots without locking
    /// them, and the key is confirmed under the slot's lock.
    ///
    /// Inline: out of line, the locked guard came back through memory and the caller
    /// saved and restored its registers around the call (a keyed sliding-log check at
    /// 1,000 keys: 44.3 ns out of line, 39.1 ns inline).
    #[inline(always)]
    fn find(&self, fp: u64, loc: &Location) -> Option<(usize, MutexGuard<'_, Entry>)> {
        // The key's first slot in each group first, where about nine keys in ten sit;
        // then the whole probe order (a key is never present twice, so whichever slot
        // confirms it is the key's).
        let [a, b] = loc.groups;
        let [sa, sb] = loc.starts;
        for i in [a + sa, b + sb] {
            let slot = &self.slots[i];
            if slot.hint.load(Ordering::Acquire) == fp {
                let e = lock(&slot.entry);
                if e.fp == fp {
                    return Some((i, e));
                }
            }
        }
        for (_, i) in loc.probe(self.geo.group()) {
            let slot = &self.slots[i];
            if slot.hint.load(Ordering::Acquire) != fp {
                continue;
            }
            let e = lock(&slot.entry);
            if e.fp == fp {
                return Some((i, e));
            }
        }
        None
    }

    /// Finds or installs the key under its claim lock.
    fn claim<R>(
        &self,
        fp: u64,
        loc: &Location,
        now: u64,
        gen: &mut u64,
        f: &mut impl FnMut(&mut Ring<&[PlainAtomicU64]>, u64) -> R,
        fresh: impl FnOnce() -> R,
    ) -> Placed<R> {
        let shard = &self.shards[loc.shard];
        let _guard = lock(self.claims.of(fp));
        // Every replacing claim stamps before it installs: this reading is no older
        // than any reclaim of this key's old slot.
        let now = shard.floor(now);
        loop {
            let mut empty = ClaimScan::new();
            let mut idle = ClaimScan::new();
            for (wi, i) in loc.probe(self.geo.group()) {
                let mut e = lock(&self.slots[i].entry);
                if e.fp == fp {
                    *gen = e.gen;
                    return Placed::Stored(self.apply(i, &mut e, now, f));
                }
                if e.fp == 0 {
                    empty.free(wi, (i, 0));
                } else if self.params.get(0).cursor_is_idle(e.cursor, now) {
                    idle.free(wi, (i, e.fp, e.cursor));
                } else {
                    empty.live(wi);
                    idle.live(wi);
                    let params = self.params.get(0);
                    let at = params.cursor_idle_at(e.cursor);
                    // The cursor bounds the rank (a live log has used from 1 to `limit`
                    // entries); its ring (other cache lines) is searched only when the
                    // bounds differ and the floor could make it the victim, and only
                    // for an eviction.
                    let [floor, ceiling] = params.evict_rank_bounds(e.cursor, now, at);
                    idle.rank_above((i, e.fp, e.cursor), floor, at, || {
                        if self.on_full == OnFull::Evict && floor != ceiling {
                            params.evict_rank(&self.ring(i, e.cursor), now, at)
                        } else {
                            floor
                        }
                    });
                }
            }
            // Between the scan and the slot's lock, a claim of another key may have
            // taken the slot, or its owner logged a request: then look again.
            if let Some((i, _)) = empty.target() {
                let mut e = lock(&self.slots[i].entry);
                if e.fp == 0 {
                    return Placed::Stored(self.install(i, &mut e, fp, now, gen, f));
                }
                continue;
            }
            if let Some((i, seen, _)) = idle.target() {
                let mut e = lock(&self.slots[i].entry);
                if e.fp == seen && self.params.get(0).cursor_is_idle(e.cursor, now) {
                    shard.stamp(now);
                    Shard::bump(&shard.idle_reclaims);
                    return Placed::Stored(self.install(i, &mut e, fp, now, gen, f));
                }
                continue;
            }
            return match (self.on_full, idle.victim()) {
                (OnFull::Evict, Some((i, seen, ranked))) => {
                    let mut e = lock(&self.slots[i].entry);
                    // Ranked on this log: if its owner logged since, rank again.
                    if e.fp != seen || e.cursor != ranked {
                        continue;
                    }
                    shard.stamp(now);
                    Shard::bump(&shard.evictions);
                    Placed::Stored(self.install(i, &mut e, fp, now, gen, f))
                }
                (OnFull::Allow, _) => {
                    Shard::bump(&shard.untracked);
                    Placed::Untracked(fresh())
                }
                _ => {
                    Shard::bump(&shard.refused);
                    Placed::Refused(idle.refusal(self.params.get(0).limit(), now))
                }
            };
        }
    }

    /// Hands slot `i` (locked as `e`) to `fp` with an empty log and runs `f` on it.
    fn install<R>(
        &self,
        i: usize,
        e: &mut Entry,
        fp: u64,
        now: u64,
        gen: &mut u64,
        f: &mut impl FnMut(&mut Ring<&[PlainAtomicU64]>, u64) -> R,
    ) -> R {
        e.fp = fp;
        e.gen = self.shards[self.geo.shard_of(i)].next_epoch();
        *gen = e.gen;
        let mut ring = self.ring(i, e.cursor);
        ring.clear();
        e.cursor = ring.cursor();
        self.slots[i].hint.store(fp, Ordering::Release);
        self.apply(i, e, now, f)
    }
}
