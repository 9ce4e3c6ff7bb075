//! The key count of a table whose slots empty again ([`SlotEntry::EMPTIES`]): the
//! reservation of room for a new key, the removal of a key, the occupancy bits a walk
//! over the keys follows, and the sweep of a full table.

use super::{Held, LockedTable, SlotEntry, SWEEP};
use crate::sync::{lock, AtomicU64, Ordering};
use crate::table::counters::Event;

/// The key count of a table whose slots empty again ([`SlotEntry::EMPTIES`]).
pub(super) struct Room {
    /// One bit per slot, set while the slot holds a key (changed under its lock).
    pub(super) bits: Box<[AtomicU64]>,
    /// The most keys held at once.
    pub(super) max_keys: u64,
    /// Slots holding a key, plus claims that reserved room for one: at most
    /// `max_keys`.
    pub(super) occupied: AtomicU64,
    /// Keys living outside their two groups.
    pub(super) displaced: AtomicU64,
    /// Where the next sweep of a full table starts.
    pub(super) hand: AtomicU64,
    /// After a lap of the sweep found nothing to reclaim: the soonest time at which an
    /// entry it saw goes idle; until then sweeps are skipped. `0`: sweep.
    pub(super) no_idle_before: AtomicU64,
}

impl<E: SlotEntry> LockedTable<E> {
    /// Reserves room for one more key: always, unless entries are counted and
    /// `max_keys` are held.
    pub(super) fn reserve(&self) -> bool {
        let Some(room) = &self.room else {
            return true;
        };
        room.occupied
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| {
                (o < room.max_keys).then_some(o + 1)
            })
            .is_ok()
    }

    /// Gives back a reservation, or the room of a key that left.
    pub(super) fn unreserve(&self) {
        if let Some(room) = &self.room {
            room.occupied.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Keys held now (entries that leave only; `0` otherwise).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn len(&self) -> u64 {
        self.room
            .as_ref()
            .map_or(0, |r| r.occupied.load(Ordering::Relaxed))
    }

    /// Empties slot `i` (locked as `held`, holding a key) at `now`, counted as a
    /// reclaim; returns the key's name, to be dropped once the lock is released.
    /// Only for entries that leave ([`SlotEntry::EMPTIES`]).
    pub(crate) fn remove(&self, i: usize, held: &mut Held<E>, now: u64) -> E::Name {
        debug_assert!(E::EMPTIES && held.fp != 0);
        self.stamp(i, now);
        self.counts.event(Event::IdleReclaim);
        if let Some(room) = &self.room {
            if held.entry.displaced() {
                room.displaced.fetch_sub(1, Ordering::AcqRel);
            }
            room.bits[i / 64].fetch_and(!(1 << (i % 64)), Ordering::AcqRel);
        }
        held.fp = 0;
        self.slots[i].hint.store(0, Ordering::Release);
        let old = held.entry.vacate();
        self.unreserve();
        old
    }

    /// The slots holding a key now, from the occupancy bits (entries that leave only):
    /// a walk costs the keys held, not the table's size. A key installed during the
    /// walk may be missed.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn held_slots(&self) -> impl Iterator<Item = usize> + '_ {
        let bits: &[AtomicU64] = self.room.as_ref().map_or(&[], |r| &r.bits);
        bits.iter().enumerate().flat_map(|(w, bits)| {
            let mut m = bits.load(Ordering::Acquire);
            std::iter::from_fn(move || {
                (m != 0).then(|| {
                    let i = w * 64 + m.trailing_zeros() as usize;
                    m &= m - 1;
                    i
                })
            })
        })
    }

    /// Drops the first idle entry past the hand, walking at most one lap of the table;
    /// returns whether it found one. A lap that finds none records when the soonest
    /// entry it saw goes idle, and sweeps before then return at once.
    pub(super) fn sweep(&self, now: u64) -> bool {
        let Some(room) = &self.room else {
            return false;
        };
        if now < room.no_idle_before.load(Ordering::Acquire) {
            return false;
        }
        let n = self.slots.len();
        let mut soonest = u64::MAX;
        for _ in 0..n.div_ceil(SWEEP) {
            let start = (room.hand.fetch_add(SWEEP as u64, Ordering::Relaxed) % n as u64) as usize;
            for j in 0..SWEEP.min(n) {
                let i = (start + j) % n;
                if self.slots[i].hint.load(Ordering::Acquire) == 0 {
                    continue;
                }
                let mut held = lock(&self.slots[i].held);
                if held.fp == 0 {
                    continue;
                }
                if held.entry.idle(&self.ext, i, now) {
                    let old = self.remove(i, &mut held, now);
                    drop(held);
                    drop(old);
                    return true;
                }
                if let Some(at) = held.entry.settles_at(&self.ext) {
                    soonest = soonest.min(at);
                }
            }
        }
        room.no_idle_before.store(soonest, Ordering::Release);
        false
    }

    /// Lets the next full-table claim sweep again (after entries changed in a way
    /// their [`SlotEntry::settles_at`] did not foresee).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn rearm(&self) {
        if let Some(room) = &self.room {
            room.no_idle_before.store(0, Ordering::Release);
        }
    }

    /// Keys living outside their groups now.
    #[cfg(all(test, feature = "redis"))]
    pub(crate) fn displaced(&self) -> u64 {
        self.room
            .as_ref()
            .map_or(0, |r| r.displaced.load(Ordering::Relaxed))
    }

    /// Slots in the table.
    #[cfg(all(test, feature = "redis"))]
    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }
}
