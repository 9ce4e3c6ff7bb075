//! The one module that imports atomics and locks.
//!
//! Everything else in the crate goes through these re-exports, so that building with
//! `RUSTFLAGS="--cfg tollgate_loom"` swaps in [loom]'s model-checked versions. The cfg
//! is crate-specific (not plain `loom`) so that turning it on does not change the code
//! of our dependencies, exactly as crossbeam-utils does with `crossbeam_loom`.
//!
//! A few names are the standard library's in every build, each for a stated reason
//! (a `static` needs a `const` constructor, which loom's types lack; an adapter hands
//! the value to a std API): [`PlainAtomicU64`], [`PlainAtomicBool`], [`StdArc`],
//! [`StdMutex`] with [`lock_std`], and [`OnceLock`]. They are never part of a loom model.
//!
//! The parameter seqlock, [`Seqlock`], is written over the switched atomics, so its own
//! loom model (`loom-tests/tests/seqlock.rs`) checks the code the crate runs; inside the
//! limiters' models [`Replaceable`] is a modelled mutex instead (see there).
//!
//! The keyed table's 16-byte slot word ([`AtomicU128`]) is `machine`'s own cell outside
//! loom models (one protocol per process: the inline instructions or portable-atomic's);
//! inside them it is a `u128` behind a loom mutex, so that the models check the table's
//! protocol, not the instruction. Every path, the stand-in's included, runs the one check
//! of orderings in `crate::ordering` (`check_load_order`, `check_failure_order`).
//!
//! **What the stand-in cannot check.** A mutex makes every operation on the word stronger than the
//! ordering the code passes: each one, a load or a failed compare-and-swap included,
//! acquires (the lock) and releases (the unlock), and all operations on all words (each
//! taking and leaving its lock) are sequentially consistent with one another. So the models
//! would pass if an ordering were too weak: a `Relaxed` load where the protocol needs
//! `Acquire`, or a protocol that needs a total order across two words (a store-buffering
//! pattern: write one word, then read another that a second thread wrote before reading
//! the first), which acquire and release do not give.
//!
//! **Why the orderings are still right.** The table uses `Acquire` loads and
//! compare-and-swaps with `AcqRel` success and `Acquire` failure, and relies on no more:
//! (1) A decision's correctness rests on each word alone: a compare-and-swap stores only
//! over the word its step was computed from, which is the word's atomicity and holds at
//! any ordering (and the mutex gives exactly that). (2) What a word publishes travels from
//! a successful compare-and-swap (its release half) to a load or compare-and-swap that
//! reads the value it wrote (acquire): a state's rate class, whose interval the reader then
//! loads from the table's `Rates` (stored, with release, before any state was tagged with
//! it). Nothing is published by a load or a failed compare-and-swap, so the release the
//! mutex lends them, which the real ones lack, is never relied on. (3) No step needs a total order across words: the one protocol
//! that does, a rate class's retirement against the writes in flight that may tag a state
//! with it, runs on `Rates`' own `SeqCst` counters, loom's atomics in the models; and the
//! retirement's sweep sees every such write through the writers' count (released by each
//! write after its compare-and-swap, acquired by the sweep before its loads), not through
//! the words. On x86-64's inline path every access is `SeqCst` anyway (see `machine`);
//! portable-atomic's path is where these orderings are what runs, and the machine tests
//! run it under threads.
//!
//! [loom]: https://docs.rs/loom

#[cfg(not(tollgate_loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(not(tollgate_loom))]
pub(crate) use std::sync::{Arc, Mutex, MutexGuard};

#[cfg(tollgate_loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(tollgate_loom)]
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard};

/// A busy-wait hint; under loom a yield, so that a spinning model thread lets the
/// thread it waits for run.
#[cfg(tollgate_loom)]
pub(crate) use loom::hint::spin_loop;
/// A busy-wait hint.
#[cfg(not(tollgate_loom))]
pub(crate) use std::hint::spin_loop;

/// Always the standard library's atomic, even in loom models: the sliding log's
/// timestamp block, whose cells are only touched under a (modelled) slot lock, so
/// they need no model of their own (see `algorithm::sliding_log::Stamps`); process-wide
/// `static` counters (loom's atomics have no `const` constructor); and the adapters'
/// counters (HTTP, Redis), which run outside the loom models.
pub(crate) use std::sync::atomic::AtomicU64 as PlainAtomicU64;

/// Always the standard library's atomic, as [`PlainAtomicU64`]: the sliding log's
/// prefetch hints (where each ring's next write goes), written under the slot's lock
/// and read without it only to choose a cache line to prefetch, never to decide.
pub(crate) use std::sync::atomic::AtomicU8 as PlainAtomicU8;

/// The memory orderings of the standard library's atomics ([`PlainAtomicU64`] and
/// the other plain ones), which loom's `Ordering` is not.
pub(crate) use std::sync::atomic::Ordering as PlainOrdering;

/// Always the standard library's atomic: the HTTP adapter's once-per-policy flag,
/// which, like its counters, runs outside the loom models.
#[cfg(feature = "tower")]
pub(crate) use std::sync::atomic::AtomicBool as PlainAtomicBool;

/// Always the standard library's `Arc`: the adapters (HTTP, Redis) pass theirs to std
/// and third-party APIs that name std's type (`Wake`, a `Backend` for `Arc<B>`, metrics'
/// `Counter::from_arc`), and they run outside the loom models.
#[cfg(any(feature = "tower", feature = "redis"))]
pub(crate) use std::sync::Arc as StdArc;
/// The weak counterpart of [`StdArc`] (the hybrid mode's background task holds one).
#[cfg(feature = "redis")]
pub(crate) use std::sync::Weak as StdWeak;

/// Always the standard library's mutex: locks in `static`s (the stripe-id registry,
/// the coarse clock's upkeep state; loom's mutex has no `const` constructor) and the
/// Redis modes' maps, which run outside the loom models. Lock it with [`lock_std`].
pub(crate) use std::sync::{Mutex as StdMutex, MutexGuard as StdMutexGuard};

/// Always the standard library's: process-wide lazily built `static`s (a no-op waker,
/// compiled Redis scripts); loom has no `OnceLock`.
#[cfg(any(feature = "tower", feature = "redis"))]
pub(crate) use std::sync::OnceLock;

/// Huge-page advice for a large table's slots (`machine::advise_huge_pages`).
#[cfg(not(tollgate_loom))]
pub(crate) use crate::machine::advise_huge_pages;
/// A cache-line prefetch hint (`machine::prefetch`).
#[cfg(not(tollgate_loom))]
pub(crate) use crate::machine::prefetch;
/// Four slots on one cache line, with a flat view of many (`machine::Line`).
#[cfg(not(tollgate_loom))]
pub(crate) use crate::machine::Line;

/// Four slots on one cache line. Loom's words are not 16 bytes: its lines are indexed
/// as lines, with no flat view.
#[cfg(tollgate_loom)]
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct Line<T>(pub(crate) [T; 4]);
/// A 128-bit atomic word: the keyed table's slot (fingerprint and state together).
///
/// `machine::AtomicU128`, a cell of that module's own: inline `vmovdqa` /
/// `lock cmpxchg16b` on x86-64 CPUs that have them (detected once), portable-atomic's
/// `AtomicU128` over the same cell everywhere else (lock-free on x86_64 with `cmpxchg16b`
/// and on aarch64 with `casp`/`ldxp`), one of the two for every word of a process.
#[cfg(not(tollgate_loom))]
pub(crate) use crate::machine::AtomicU128;
/// Whether the hit path may use the slot word's inline operations (`machine::fast_path`),
/// and the proof it may.
#[cfg(not(tollgate_loom))]
pub(crate) use crate::machine::{fast_path, HitPath};

/// Loom models' tables are tiny, and their words are not plain memory: no advice.
#[cfg(tollgate_loom)]
pub(crate) fn advise_huge_pages<T>(_spare: &mut [std::mem::MaybeUninit<T>]) -> bool {
    false
}

/// Loom models see no cache: no prefetch.
#[cfg(tollgate_loom)]
#[inline(always)]
pub(crate) fn prefetch<T>(_r: &T) {}

/// A 128-bit atomic word for loom models: a linearizable `u128` behind a loom mutex, so
/// that the models check the table's protocol (not the instruction). It runs the same
/// ordering check as `machine::AtomicU128` (`crate::ordering`), and otherwise ignores the orderings it is given.
///
/// What this stand-in cannot check about orderings, and why the orderings are right
/// nonetheless: see the module docs.
#[cfg(tollgate_loom)]
#[derive(Debug)]
pub(crate) struct AtomicU128 {
    word: loom::sync::Mutex<u128>,
}

#[cfg(tollgate_loom)]
use crate::ordering::{check_failure_order, check_load_order};

#[cfg(tollgate_loom)]
impl AtomicU128 {
    pub(crate) fn new(v: u128) -> Self {
        AtomicU128 {
            word: loom::sync::Mutex::new(v),
        }
    }

    pub(crate) fn load(&self, order: Ordering) -> u128 {
        check_load_order(order);
        *lock(&self.word)
    }

    pub(crate) fn compare_exchange(
        &self,
        current: u128,
        new: u128,
        _success: Ordering,
        failure: Ordering,
    ) -> Result<u128, u128> {
        check_failure_order(failure);
        let mut w = lock(&self.word);
        if *w == current {
            *w = new;
            Ok(current)
        } else {
            Err(*w)
        }
    }

    pub(crate) fn load_fast(&self, _proof: HitPath, order: Ordering) -> u128 {
        self.load(order)
    }

    pub(crate) fn compare_exchange_fast(
        &self,
        _proof: HitPath,
        current: u128,
        new: u128,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u128, u128> {
        self.compare_exchange(current, new, success, failure)
    }
}

/// In loom models the hit path always runs (on the modelled word).
#[cfg(tollgate_loom)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct HitPath(());

/// In loom models the hit path always runs (on the modelled word).
#[cfg(tollgate_loom)]
pub(crate) fn fast_path() -> Option<HitPath> {
    Some(HitPath(()))
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

/// [`lock`] for a [`StdMutex`]: the same recovery from poisoning, in every build.
pub(crate) fn lock_std<T>(m: &StdMutex<T>) -> StdMutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A value read on every decision and replaced rarely (a limiter's parameters, by
/// `set_quota`): outside loom models the [`Seqlock`]; inside them a modelled mutex with
/// the same contract, so that the limiters' models explore the verbs rather than the
/// seqlock's words (which `loom-tests/tests/seqlock.rs` checks on their own).
///
/// Until the first replacement a read is one load and a branch: the value as built
/// is kept beside the seqlock, and a flag set after the first replacement sends
/// readers to the seqlock from then on (a limiter whose quota never changes, the
/// common case, pays nothing for being able to change it). A reader that saw the
/// flag clear while a replacement ran reads the value as built: the old value, as a
/// reader of the seqlock racing the replacement may.
#[cfg(not(tollgate_loom))]
pub(crate) struct Replaceable<T: Words> {
    /// The value as built, read while `replaced` is clear.
    built: T,
    /// Set (after the seqlock holds the new value) by the first replacement.
    replaced: std::sync::atomic::AtomicBool,
    current: Seqlock<T>,
}

#[cfg(not(tollgate_loom))]
impl<T: Words> Replaceable<T> {
    pub(crate) fn new(v: T) -> Self {
        Replaceable {
            built: v,
            replaced: std::sync::atomic::AtomicBool::new(false),
            current: Seqlock::new(v),
        }
    }

    #[inline(always)]
    pub(crate) fn load(&self) -> T {
        if self.replaced.load(Ordering::Acquire) {
            self.current.load()
        } else {
            self.built
        }
    }

    /// Replaces the value; concurrent replacements are serialized by the seqlock.
    pub(crate) fn store(&self, v: T) {
        self.store_with(v, || ());
    }

    /// The value and its stamp: the stamp changes once a replacement begins, so a
    /// reader tells by [`changed`](Self::changed) whether what it read since could
    /// belong to another value (see [`store_with`](Self::store_with)).
    #[inline(always)]
    pub(crate) fn load_stamped(&self) -> (T, u64) {
        if self.replaced.load(Ordering::Acquire) {
            self.current.load_stamped()
        } else {
            // The seqlock's version is 0 until the first replacement begins.
            (self.built, 0)
        }
    }

    /// Whether a replacement has begun since `stamp` was read (by
    /// [`load_stamped`](Self::load_stamped)). One load, ordered after the caller's
    /// earlier acquire loads.
    #[inline(always)]
    pub(crate) fn changed(&self, stamp: u64) -> bool {
        self.current.changed(stamp)
    }

    /// Replaces the value, running `during` first while readers wait: a reader that
    /// loads the value after this returns sees whatever `during` wrote, and a reader
    /// that loaded the old value and then acquires something `during` wrote finds its
    /// stamp [`changed`](Self::changed). This is how a bucket's `set_quota` converts a
    /// cell's state so that no decision applies one quota to a state converted for the
    /// other. Replacements are serialized by the seqlock.
    pub(crate) fn store_with(&self, v: T, during: impl FnOnce()) {
        // Readers go to the seqlock (which holds the value as built until now) before
        // its version moves, so that no reader of the value as built misses the change.
        self.replaced.store(true, Ordering::Release);
        self.current.store_with(v, during);
    }
}

#[cfg(not(tollgate_loom))]
impl<T: Words + std::fmt::Debug> std::fmt::Debug for Replaceable<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.load().fmt(f)
    }
}

/// A value kept as four atomic words behind a per-value sequence lock: a read is
/// six plain loads (the version, the words, the version again), retried only if a
/// replacement ran meanwhile; readers never write and never block one another, and a
/// reader racing a replacement sees the old value or the new one, never a mix.
///
/// Words rather than a generic seqlock cell: the value comes back in registers, so
/// the decision path never copies the parameters through memory (a 40-byte copy read
/// back at another width stalled store forwarding and doubled the cost of a check).
pub(crate) struct Seqlock<T: Words> {
    /// Even when the words are stable; odd while a replacement writes them.
    version: AtomicU64,
    words: [AtomicU64; 4],
    _value: std::marker::PhantomData<T>,
}

/// A value that travels as four `u64` words (see [`Seqlock`]).
pub(crate) trait Words: Copy {
    /// The value as words.
    fn as_words(&self) -> [u64; 4];
    /// The value from words made by [`as_words`](Self::as_words).
    fn from_words(w: [u64; 4]) -> Self;
}

impl<T: Words> Seqlock<T> {
    pub(crate) fn new(v: T) -> Self {
        Seqlock {
            version: AtomicU64::new(0),
            words: v.as_words().map(AtomicU64::new),
            _value: std::marker::PhantomData,
        }
    }

    #[inline]
    pub(crate) fn load(&self) -> T {
        self.load_stamped().0
    }

    /// The value and the (even) version it was read at.
    #[inline]
    pub(crate) fn load_stamped(&self) -> (T, u64) {
        loop {
            let before = self.version.load(Ordering::Acquire);
            let w = [
                self.words[0].load(Ordering::Relaxed),
                self.words[1].load(Ordering::Relaxed),
                self.words[2].load(Ordering::Relaxed),
                self.words[3].load(Ordering::Relaxed),
            ];
            fence(Ordering::Acquire);
            if before & 1 == 0 && self.version.load(Ordering::Relaxed) == before {
                return (T::from_words(w), before);
            }
            spin_loop();
        }
    }

    /// Whether a replacement has begun since the version `stamp` (see
    /// [`store_with`](Self::store_with)).
    #[inline(always)]
    pub(crate) fn changed(&self, stamp: u64) -> bool {
        self.version.load(Ordering::Acquire) != stamp
    }

    /// Replaces the value (concurrent replacements are serialized by the version),
    /// running `during` after the version turns odd (readers
    /// wait) and before the new words are written. Everything `during` writes with
    /// release ordering is ordered after the odd version: a reader that acquires it
    /// then reads a version other than the one its value was read at.
    pub(crate) fn store_with(&self, v: T, during: impl FnOnce()) {
        let mut current = self.version.load(Ordering::Relaxed);
        loop {
            if current & 1 == 0 {
                match self.version.compare_exchange_weak(
                    current,
                    current + 1,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(actual) => current = actual,
                }
            } else {
                spin_loop();
                current = self.version.load(Ordering::Relaxed);
            }
        }
        fence(Ordering::Release);
        during();
        for (cell, w) in self.words.iter().zip(v.as_words()) {
            cell.store(w, Ordering::Relaxed);
        }
        self.version.store(current + 2, Ordering::Release);
    }
}

impl<T: Words + std::fmt::Debug> std::fmt::Debug for Seqlock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.load().fmt(f)
    }
}

/// For loom models: the same contract behind a modelled mutex.
#[cfg(tollgate_loom)]
pub(crate) struct Replaceable<T: Words>(Mutex<(T, u64)>);

#[cfg(tollgate_loom)]
impl<T: Words> Replaceable<T> {
    pub(crate) fn new(v: T) -> Self {
        Replaceable(Mutex::new((v, 0)))
    }

    pub(crate) fn load(&self) -> T {
        lock(&self.0).0
    }

    pub(crate) fn load_stamped(&self) -> (T, u64) {
        *lock(&self.0)
    }

    pub(crate) fn changed(&self, stamp: u64) -> bool {
        lock(&self.0).1 != stamp
    }

    pub(crate) fn store(&self, v: T) {
        self.store_with(v, || ());
    }

    pub(crate) fn store_with(&self, v: T, during: impl FnOnce()) {
        let mut held = lock(&self.0);
        during();
        *held = (v, held.1 + 2);
    }
}

#[cfg(tollgate_loom)]
impl<T: Words + std::fmt::Debug> std::fmt::Debug for Replaceable<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.load().fmt(f)
    }
}

/// A small `Copy` value read rarely and replaced rarely (a limiter's quota, for its
/// accessor): crossbeam's `AtomicCell` (a seqlock for values wider than a word).
#[cfg(not(tollgate_loom))]
pub(crate) struct CopyCell<T: Copy>(crossbeam_utils::atomic::AtomicCell<T>);

#[cfg(not(tollgate_loom))]
impl<T: Copy> CopyCell<T> {
    pub(crate) fn new(v: T) -> Self {
        CopyCell(crossbeam_utils::atomic::AtomicCell::new(v))
    }

    pub(crate) fn load(&self) -> T {
        self.0.load()
    }

    pub(crate) fn store(&self, v: T) {
        self.0.store(v);
    }
}

/// For loom models: the same contract behind a modelled mutex.
#[cfg(tollgate_loom)]
pub(crate) struct CopyCell<T: Copy>(Mutex<T>);

#[cfg(tollgate_loom)]
impl<T: Copy> CopyCell<T> {
    pub(crate) fn new(v: T) -> Self {
        CopyCell(Mutex::new(v))
    }

    pub(crate) fn load(&self) -> T {
        *lock(&self.0)
    }

    pub(crate) fn store(&self, v: T) {
        *lock(&self.0) = v;
    }
}
