//! Internals that the loom models (`loom-tests/`) drive directly; compiled only with
//! `--cfg tollgate_loom`, never part of the public API.

use crate::sync::{Seqlock, Words};

/// The locked table over a test entry (`loom-tests/tests/locked.rs`).
pub use crate::table::locked::model::ModelTable;

/// Four words as a value, each word its own: a torn read shows as words that never
/// stood together in one stored value.
impl Words for [u64; 4] {
    fn as_words(&self) -> [u64; 4] {
        *self
    }

    fn from_words(w: [u64; 4]) -> Self {
        w
    }
}

/// The parameter seqlock (`sync::Seqlock`, what `set_quota` replaces a limiter's
/// parameters through) over four plain words, with loom's atomics.
#[derive(Debug)]
pub struct ParamSeqlock(Seqlock<[u64; 4]>);

impl ParamSeqlock {
    /// A seqlock holding `v`.
    pub fn new(v: [u64; 4]) -> Self {
        ParamSeqlock(Seqlock::new(v))
    }

    /// Reads the value (retrying while a replacement runs).
    pub fn load(&self) -> [u64; 4] {
        self.0.load()
    }

    /// Replaces the value.
    pub fn store(&self, v: [u64; 4]) {
        self.0.store_with(v, || ());
    }

    /// Reads the value and the version it was read at.
    pub fn load_stamped(&self) -> ([u64; 4], u64) {
        self.0.load_stamped()
    }

    /// Whether a replacement began since `stamp`.
    pub fn changed(&self, stamp: u64) -> bool {
        self.0.changed(stamp)
    }

    /// Replaces the value, running `during` while readers wait.
    pub fn store_with(&self, v: [u64; 4], during: impl FnOnce()) {
        self.0.store_with(v, during);
    }
}

/// The keyed table's 16-byte slot word as the loom models see it (`sync::AtomicU128`,
/// a modelled mutex), for the check that an invalid ordering fails there as it does on
/// `machine`'s paths (`loom-tests/tests/slot_word.rs`).
#[derive(Debug)]
pub struct SlotWord(crate::sync::AtomicU128);

impl SlotWord {
    /// A word holding `v`.
    pub fn new(v: u128) -> Self {
        SlotWord(crate::sync::AtomicU128::new(v))
    }

    /// The word, read with `order`.
    pub fn load(&self, order: crate::sync::Ordering) -> u128 {
        self.0.load(order)
    }

    /// Stores `new` if the word holds `current`.
    pub fn compare_exchange(
        &self,
        current: u128,
        new: u128,
        success: crate::sync::Ordering,
        failure: crate::sync::Ordering,
    ) -> Result<u128, u128> {
        self.0.compare_exchange(current, new, success, failure)
    }
}
