//! A key's lookup in a [`LockedTable`]: its likeliest slots first, then the rest of its
//! probe order, then (while any key is displaced) the whole table; and the prefetch of
//! its likeliest slots for a table beyond the caches.

use super::super::geometry::Location;
use super::{Held, LockedTable, SlotEntry};
use crate::sync::{lock, prefetch, MutexGuard, Ordering};

impl<E: SlotEntry> LockedTable<E> {
    /// Slot `i` locked, if it holds `key` (fingerprint `fp`): the hint skips other
    /// keys' slots without locking them.
    #[inline(always)]
    pub(super) fn holding(
        &self,
        i: usize,
        fp: u64,
        key: &E::Key,
    ) -> Option<MutexGuard<'_, Held<E>>> {
        let slot = &self.slots[i];
        if slot.hint.load(Ordering::Acquire) != fp {
            return None;
        }
        let held = lock(&slot.held);
        (held.fp == fp && held.entry.is(key)).then_some(held)
    }

    /// The slot holding `key` (fingerprint `fp`, located at `loc`), locked.
    ///
    /// Inline: out of line, the locked guard came back through memory and the caller
    /// saved and restored its registers around the call (a keyed sliding-log check at
    /// 1,000 keys: 44.3 ns out of line, 39.1 ns inline).
    #[inline(always)]
    pub(crate) fn find(
        &self,
        fp: u64,
        key: &E::Key,
        loc: &Location,
    ) -> Option<(usize, MutexGuard<'_, Held<E>>)> {
        // The key's first slot in each group first, where about nine keys in ten sit;
        // then the rest of its probe order (a key is never present twice, so whichever
        // slot confirms it is the key's).
        let [a, b] = loc.groups;
        let [sa, sb] = loc.starts;
        for i in [a + sa, b + sb] {
            if let Some(held) = self.holding(i, fp, key) {
                return Some((i, held));
            }
        }
        // The rest of the probe order (`Location::probe` without each group's first
        // slot), its offsets in registers.
        let g = self.geo.group();
        let (mut oa, mut ob) = (sa, sb);
        for _ in 1..g {
            oa = if oa + 1 == g { 0 } else { oa + 1 };
            if let Some(held) = self.holding(a + oa, fp, key) {
                return Some((a + oa, held));
            }
            if a != b {
                ob = if ob + 1 == g { 0 } else { ob + 1 };
                if let Some(held) = self.holding(b + ob, fp, key) {
                    return Some((b + ob, held));
                }
            }
        }
        self.find_displaced(fp, key)
    }

    /// Prefetches the two slots a key at `loc` most likely sits in (each group's first
    /// of its probe), ahead of [`find`](Self::find): the second one's miss, and that of
    /// a slot's second line (a slot's lock, a locked instruction, waits for every load
    /// before it), then overlap the first one's instead of following it.
    #[inline]
    pub(crate) fn prefetch_slots(&self, loc: &Location) {
        for (g, s) in loc.groups.into_iter().zip(loc.starts) {
            if let Some(slot) = self.slots.get(g + s) {
                prefetch(slot);
            }
        }
    }

    /// The slot holding `key` outside its groups, while any key is displaced.
    pub(super) fn find_displaced(
        &self,
        fp: u64,
        key: &E::Key,
    ) -> Option<(usize, MutexGuard<'_, Held<E>>)> {
        let room = self.room.as_ref()?;
        if room.displaced.load(Ordering::Acquire) == 0 {
            return None;
        }
        (0..self.slots.len()).find_map(|i| self.holding(i, fp, key).map(|h| (i, h)))
    }
}
