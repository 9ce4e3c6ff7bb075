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
