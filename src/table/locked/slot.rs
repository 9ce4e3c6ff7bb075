//! A locked table's slot: a hint word (the key's fingerprint, read without the lock)
//! and a lock over what the slot holds ([`Held`]). The entry type chooses the slot
//! ([`SlotEntry::Slot`]): a `Mutex` around any entry ([`MutexSlot`]), or a slot of
//! atomic cells behind a spin lock for an entry that fits a few words (the sliding
//! log's `LogSlot`: one compare-and-swap to take, one store to give back).

use super::{Held, SlotEntry};
use crate::sync::{lock, AtomicU64, Mutex, MutexGuard, Ordering};
use std::ops::DerefMut;

/// What a slot offers the table's protocol (see `LockedTable`).
pub(crate) trait SlotCell<E>: Sized {
    /// A locked slot: what it holds, by reference, until dropped.
    type Guard<'a>: DerefMut<Target = Held<E>>
    where
        Self: 'a;

    /// A slot holding `held`.
    fn new(held: Held<E>) -> Self;

    /// The fingerprint of the key held (`0` for none), read without the lock
    /// (`Acquire`): it may change before the lock is taken.
    fn hint(&self) -> u64;

    /// Publishes `fp` as the hint (`Release`); call under the lock, after `held.fp`
    /// became `fp`.
    fn set_hint(&self, fp: u64);

    /// The slot, locked.
    fn lock(&self) -> Self::Guard<'_>;
}

/// A locked slot of entries `E`.
pub(crate) type Guard<'a, E> = <<E as SlotEntry>::Slot as SlotCell<E>>::Guard<'a>;

/// A slot whose lock is a `Mutex` around any entry: the hint is a copy of `held.fp`.
#[derive(Debug)]
#[cfg_attr(not(any(feature = "redis", tollgate_loom)), allow(dead_code))]
pub(crate) struct MutexSlot<E> {
    hint: AtomicU64,
    held: Mutex<Held<E>>,
}

impl<E> SlotCell<E> for MutexSlot<E> {
    type Guard<'a>
        = MutexGuard<'a, Held<E>>
    where
        Self: 'a;

    fn new(held: Held<E>) -> Self {
        MutexSlot {
            hint: AtomicU64::new(held.fp),
            held: Mutex::new(held),
        }
    }

    #[inline(always)]
    fn hint(&self) -> u64 {
        self.hint.load(Ordering::Acquire)
    }

    #[inline]
    fn set_hint(&self, fp: u64) {
        self.hint.store(fp, Ordering::Release);
    }

    #[inline(always)]
    fn lock(&self) -> MutexGuard<'_, Held<E>> {
        lock(&self.held)
    }
}
