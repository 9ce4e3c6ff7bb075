//! The sliding log's slot ([`LogSlot`]): the key's fingerprint, a spin lock whose word
//! carries the ring's head and booked flag, and the newest timestamp and incarnation
//! as atomic cells written only under that lock, in 32 bytes (two slots a cache line).
//!
//! A decision takes the lock with one compare-and-swap, which also reads the head,
//! and gives it back with one plain `Release` store, which also writes the head: one
//! read-modify-write per decision where a `Mutex` paid two (its unlock swaps, to wake
//! waiters). The cells hold no `unsafe`: they are atomics accessed relaxed, ordered by
//! the lock, exactly as the ring's timestamps are.

use super::locked::{Held, SlotCell};
use super::log::LogEntry;
use crate::algorithm::sliding_log::Cursor;
use crate::sync::{AtomicU64, Ordering, SpinLock};
use std::ops::{Deref, DerefMut};

/// A sliding log's slot (see the module doc).
#[derive(Debug)]
#[repr(align(32))]
pub(crate) struct LogSlot {
    /// The key's fingerprint, `0` for none: written under the lock, read without it.
    fp: AtomicU64,
    /// The lock; its payload the cursor's word ([`Cursor::pack`]).
    lock: SpinLock,
    /// The cursor's newest timestamp (under the lock).
    newest: AtomicU64,
    /// The log's incarnation (under the lock).
    gen: AtomicU64,
}

/// A locked [`LogSlot`]: a copy of what it holds, written back when dropped, before
/// the lock is given back.
pub(crate) struct LogGuard<'a> {
    slot: &'a LogSlot,
    held: Held<LogEntry>,
}

impl SlotCell<LogEntry> for LogSlot {
    type Guard<'a> = LogGuard<'a>;

    fn new(held: Held<LogEntry>) -> Self {
        let (word, newest) = held.entry.cursor.pack();
        LogSlot {
            fp: AtomicU64::new(held.fp),
            lock: SpinLock::new(word),
            newest: AtomicU64::new(newest),
            gen: AtomicU64::new(held.entry.gen),
        }
    }

    #[inline(always)]
    fn hint(&self) -> u64 {
        self.fp.load(Ordering::Acquire)
    }

    #[inline]
    fn set_hint(&self, fp: u64) {
        self.fp.store(fp, Ordering::Release);
    }

    #[inline(always)]
    fn lock(&self) -> LogGuard<'_> {
        let word = self.lock.lock();
        // Written under the lock only: the lock's acquire ordered the last writes.
        let held = Held {
            fp: self.fp.load(Ordering::Relaxed),
            entry: LogEntry {
                cursor: Cursor::unpack(word, self.newest.load(Ordering::Relaxed)),
                gen: self.gen.load(Ordering::Relaxed),
            },
        };
        LogGuard { slot: self, held }
    }
}

impl Deref for LogGuard<'_> {
    type Target = Held<LogEntry>;

    #[inline(always)]
    fn deref(&self) -> &Held<LogEntry> {
        &self.held
    }
}

impl DerefMut for LogGuard<'_> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Held<LogEntry> {
        &mut self.held
    }
}

impl Drop for LogGuard<'_> {
    /// Writes the entry back, then gives the lock back with the cursor's word (the
    /// fingerprint is published by `set_hint`, under the lock, when it changes).
    #[inline(always)]
    fn drop(&mut self) {
        let (word, newest) = self.held.entry.cursor.pack();
        self.slot.newest.store(newest, Ordering::Relaxed);
        self.slot.gen.store(self.held.entry.gen, Ordering::Relaxed);
        self.slot.lock.unlock(word);
    }
}
