//! The sliding log's keyed table: one lock per slot, guarding the key's fingerprint and
//! its ring of timestamps.
//!
//! Each slot's ring is allocated at build time, sized from the quota (`8 × limit`
//! bytes). A key's identity is checked under the slot's lock, so a request can never
//! be applied to a ring that was handed to another key. An atomic copy of the
//! fingerprint (the *hint*, written only under the slot's lock) lets lookups skip the
//! slots of other keys without locking them.
//!
//! Every claim (of an empty, idle or evicted slot) holds the shard's claim lock and
//! rescans under it, so a key is never present twice. Lock order: claim lock, then a
//! slot lock; lookups take a slot lock only.

use super::layout::{
    fingerprint, new_shards, totals, ClaimScan, Geometry, Location, Shard, Stripes, Totals,
};
use super::OnFull;
use crate::algorithm::sliding_log::{Ring, SlidingLog};
use crate::sync::{lock, AtomicU64, Mutex, Ordering};
use crate::Decision;
use crossbeam_utils::CachePadded;

/// What a slot's lock guards.
#[derive(Debug)]
struct Entry {
    /// The key's fingerprint, `0` when the slot has never held a key.
    fp: u64,
    ring: Ring,
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
    shards: Box<[CachePadded<Shard>]>,
    counts: Stripes,
    geo: Geometry,
    params: SlidingLog,
    on_full: OnFull,
}

impl LogTable {
    /// Allocates every slot and ring, once.
    pub(crate) fn new(
        geo: Geometry,
        params: SlidingLog,
        on_full: OnFull,
    ) -> Result<Self, crate::ConfigError> {
        let n = geo.slots();
        let too_big = || crate::ConfigError::InvalidCapacity {
            requested: n,
            max: super::layout::MAX_CAPACITY,
        };
        n.checked_mul(params.ring_bytes()).ok_or_else(too_big)?;
        let mut slots = Vec::new();
        slots.try_reserve_exact(n).map_err(|_| too_big())?;
        slots.extend((0..n).map(|_| Slot {
            hint: AtomicU64::new(0),
            entry: Mutex::new(Entry {
                fp: 0,
                ring: Ring::new(&params),
            }),
        }));
        Ok(LogTable {
            slots: slots.into_boxed_slice(),
            shards: new_shards(geo.shards()),
            counts: Stripes::new(),
            geo,
            params,
            on_full,
        })
    }

    /// Bytes of the slots, their rings and the shard metadata.
    pub(crate) fn memory_bytes(&self) -> usize {
        // Every ring is allocated at build with the same size.
        let rings = self.slots.len() * self.params.ring_bytes();
        std::mem::size_of_val(&*self.slots)
            + rings
            + std::mem::size_of_val(&*self.shards)
            + self.counts.memory_bytes()
    }

    /// Bytes of one slot's ring.
    pub(crate) fn ring_bytes(&self) -> usize {
        self.params.ring_bytes()
    }

    /// The counters.
    pub(crate) fn totals(&self) -> Totals {
        totals(&self.shards, &self.counts)
    }

    /// `(occupied, active)`: slots holding a key, and those whose log is not empty.
    pub(crate) fn occupancy(&self, now: u64) -> (u64, u64) {
        let (mut occupied, mut active) = (0, 0);
        for s in self.slots.iter() {
            let e = lock(&s.entry);
            if e.fp != 0 {
                occupied += 1;
                if !self.params.is_idle(&e.ring, now) {
                    active += 1;
                }
            }
        }
        (occupied, active)
    }

    /// One decision for the key hashed to `h` at `now`, for `cost <= capacity`.
    pub(crate) fn decide(&self, h: u64, now: u64, cost: u32) -> Decision {
        let fp = fingerprint(h);
        let loc = self.geo.locate(h);
        for (_, i) in loc.probe(self.geo.window()) {
            let slot = &self.slots[i];
            if slot.hint.load(Ordering::Acquire) != fp {
                continue;
            }
            let mut e = lock(&slot.entry);
            if e.fp == fp {
                let d = self.params.step(&mut e.ring, now, cost);
                drop(e);
                self.counts.count(cost, &d);
                return d;
            }
        }
        if cost == 0 {
            // A peek at an absent key: it decides as fresh.
            return self.params.fresh(0);
        }
        let d = self.claim(fp, &loc, now, cost);
        self.counts.count(cost, &d);
        d
    }

    /// Finds or installs the key under the shard's claim lock.
    fn claim(&self, fp: u64, loc: &Location, now: u64, cost: u32) -> Decision {
        let shard = &self.shards[loc.shard];
        let _guard = lock(&shard.claim);
        loop {
            let mut scan = ClaimScan::new();
            for (wi, i) in loc.probe(self.geo.window()) {
                let mut e = lock(&self.slots[i].entry);
                if e.fp == fp {
                    return self.params.step(&mut e.ring, now, cost);
                }
                if e.fp == 0 || self.params.is_idle(&e.ring, now) {
                    scan.free(wi, i);
                } else {
                    scan.live(wi);
                    scan.rank(i, &self.params.step(&mut e.ring, now, 0));
                }
            }
            if let Some(i) = scan.target() {
                let mut e = lock(&self.slots[i].entry);
                // Only this shard's claims change a slot's key, and we hold its lock;
                // but the owner may have logged a request since we looked: then look
                // again.
                if e.fp == 0 || self.params.is_idle(&e.ring, now) {
                    if e.fp != 0 {
                        Shard::bump(&shard.idle_reclaims);
                    }
                    return self.install(i, &mut e, fp, now, cost);
                }
                continue;
            }
            return match (self.on_full, scan.victim()) {
                (OnFull::Evict, Some(i)) => {
                    let mut e = lock(&self.slots[i].entry);
                    Shard::bump(&shard.evictions);
                    self.install(i, &mut e, fp, now, cost)
                }
                (OnFull::Allow, _) => {
                    Shard::bump(&shard.untracked);
                    self.params.fresh(cost)
                }
                _ => {
                    Shard::bump(&shard.refused);
                    scan.refusal(self.params.limit())
                }
            };
        }
    }

    /// Hands slot `i` (locked as `e`) to `fp` with an empty log and logs the request.
    fn install(&self, i: usize, e: &mut Entry, fp: u64, now: u64, cost: u32) -> Decision {
        e.fp = fp;
        e.ring.clear();
        self.slots[i].hint.store(fp, Ordering::Release);
        self.params.step(&mut e.ring, now, cost)
    }
}
