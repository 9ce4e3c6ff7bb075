//! The one module that imports atomics and locks.
//!
//! Everything else in the crate goes through these re-exports, so that building with
//! `RUSTFLAGS="--cfg tollgate_loom"` swaps in [loom]'s model-checked versions. The cfg
//! is crate-specific (not plain `loom`) so that turning it on does not change the code
//! of our dependencies, exactly as crossbeam-utils does with `crossbeam_loom`.
//!
//! [loom]: https://docs.rs/loom

#[cfg(not(tollgate_loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(tollgate_loom))]
pub(crate) use std::sync::{Arc, Mutex, MutexGuard};

#[cfg(tollgate_loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(tollgate_loom)]
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard};

/// Always the standard library's atomic, even in loom models: the sliding log's
/// timestamp block, whose cells are only touched under a (modelled) slot lock, so
/// they need no model of their own (see `algorithm::sliding_log::Stamps`).
pub(crate) use std::sync::atomic::AtomicU64 as PlainAtomicU64;

/// A 128-bit atomic word: the keyed table's slot (fingerprint and state together).
///
/// portable-atomic's `AtomicU128` is lock-free on x86_64 (`cmpxchg16b`, detected at
/// run time) and on aarch64 (`casp`/`ldxp`).
#[cfg(not(tollgate_loom))]
pub(crate) use portable_atomic::AtomicU128;

/// A 128-bit atomic word for loom models: a linearizable `u128` behind a loom mutex,
/// which is exactly the contract the hardware's 16-byte compare-and-swap gives, so the
/// models check the table's protocol (not the instruction).
#[cfg(tollgate_loom)]
#[derive(Debug)]
pub(crate) struct AtomicU128 {
    word: loom::sync::Mutex<u128>,
}

#[cfg(tollgate_loom)]
impl AtomicU128 {
    pub(crate) fn new(v: u128) -> Self {
        AtomicU128 {
            word: loom::sync::Mutex::new(v),
        }
    }

    pub(crate) fn load(&self, _order: Ordering) -> u128 {
        *lock(&self.word)
    }

    pub(crate) fn compare_exchange(
        &self,
        current: u128,
        new: u128,
        _success: Ordering,
        _failure: Ordering,
    ) -> Result<u128, u128> {
        let mut w = lock(&self.word);
        if *w == current {
            *w = new;
            Ok(current)
        } else {
            Err(*w)
        }
    }
}

/// Whether the slot word's 16-byte atomic operations are lock-free here.
#[cfg(not(tollgate_loom))]
pub(crate) fn slot_word_is_lock_free() -> bool {
    AtomicU128::is_lock_free()
}

/// Loom models a linearizable word, whatever the hardware.
#[cfg(tollgate_loom)]
pub(crate) fn slot_word_is_lock_free() -> bool {
    true
}

/// Locks `m`, recovering the guard if a previous holder panicked.
///
/// The data behind our locks (a sliding-log ring) is valid after any partial update,
/// so poisoning carries no information we need; a panic elsewhere must not turn every
/// later decision into a panic too.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// A small `Copy` value read on every decision and replaced rarely (a limiter's
/// parameters, by `set_quota`): readers never block one another, and a reader racing
/// a replacement sees the old value or the new one, never a mix.
///
/// crossbeam's `AtomicCell` (a seqlock for values wider than a word: a read is two
/// loads around the copy, retried only if a replacement ran meanwhile).
#[cfg(not(tollgate_loom))]
pub(crate) struct Swap<T: Copy>(crossbeam_utils::atomic::AtomicCell<T>);

#[cfg(not(tollgate_loom))]
impl<T: Copy> Swap<T> {
    pub(crate) fn new(v: T) -> Self {
        Swap(crossbeam_utils::atomic::AtomicCell::new(v))
    }

    #[inline]
    pub(crate) fn load(&self) -> T {
        self.0.load()
    }

    pub(crate) fn store(&self, v: T) {
        self.0.store(v);
    }
}

/// For loom models: the same contract behind a modelled mutex.
#[cfg(tollgate_loom)]
pub(crate) struct Swap<T: Copy>(Mutex<T>);

#[cfg(tollgate_loom)]
impl<T: Copy> Swap<T> {
    pub(crate) fn new(v: T) -> Self {
        Swap(Mutex::new(v))
    }

    pub(crate) fn load(&self) -> T {
        *lock(&self.0)
    }

    pub(crate) fn store(&self, v: T) {
        *lock(&self.0) = v;
    }
}

impl<T: Copy + std::fmt::Debug> std::fmt::Debug for Swap<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.load().fmt(f)
    }
}
