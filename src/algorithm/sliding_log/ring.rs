//! The sliding log's ring: a key's last `limit` admission timestamps in admission
//! order, over a box of its own or a slice of the keyed table's block.

use super::SlidingLog;

/// A ring slot that has never held an admission.
pub(super) const EMPTY: u64 = u64::MAX;

/// Where a ring's timestamps live: a box of its own (one limiter's log) or a slice of
/// the keyed table's single block (see `table::log`).
pub(crate) trait Stamps {
    /// The `i`-th stored timestamp (`i < len`).
    fn get(&self, i: usize) -> u64;
    /// Stores `v` at `i`.
    fn set(&mut self, i: usize, v: u64);
    /// How many timestamps there are (the limit).
    fn len(&self) -> usize;
}

impl Stamps for Box<[u64]> {
    #[inline]
    fn get(&self, i: usize) -> u64 {
        self[i]
    }
    #[inline]
    fn set(&mut self, i: usize, v: u64) {
        self[i] = v;
    }
    #[inline]
    fn len(&self) -> usize {
        <[u64]>::len(self)
    }
}

/// A slice of the keyed table's block. Its cells are atomics only so that one block
/// can be shared by every slot without `unsafe`: each slice is read and written only
/// under its slot's lock, so relaxed accesses (plain loads and stores) suffice.
impl Stamps for &[crate::sync::PlainAtomicU64] {
    #[inline]
    fn get(&self, i: usize) -> u64 {
        self[i].load(crate::sync::PlainOrdering::Relaxed)
    }
    #[inline]
    fn set(&mut self, i: usize, v: u64) {
        self[i].store(v, crate::sync::PlainOrdering::Relaxed);
    }
    #[inline]
    fn len(&self) -> usize {
        <[crate::sync::PlainAtomicU64]>::len(self)
    }
}

/// The per-key state: `limit` timestamps, oldest at `head`, in admission order.
#[derive(Debug)]
pub(crate) struct Ring<S: Stamps = Box<[u64]>> {
    pub(super) head: u32,
    /// The newest timestamp ever logged (EMPTY if none): the state's time.
    pub(super) newest: u64,
    /// Whether `newest` was booked by a reservation for a time after the time it was
    /// decided at (its reading, or the state's time when the reading was older):
    /// requests read before it queue behind it instead of being decided at its time.
    /// Set only by what the bookings did (a reservation, a refund restoring the mark
    /// its booking recorded), never inferred from a reading.
    pub(super) booked: bool,
    /// How many writes (admissions and bookings) the ring has taken, less those given
    /// back, modulo 2^31: a booking that records it after its own write is the last
    /// write while the two agree (see `SlidingLog::refund`).
    pub(super) writes: u32,
    /// Whether a write of the newest instant may have overwritten entries still in the
    /// window (a charge past what was left), or a stateless give-back removed entries
    /// no booking can tell from its own: a booking of that instant that is no longer
    /// the last write then gives nothing back (see `SlidingLog::refund`). An emptied
    /// ring keeps it.
    pub(super) overdrawn: bool,
    pub(super) ts: S,
}

/// A ring's position and newest timestamp, kept apart from its timestamps (the keyed
/// table stores these in the slot and the timestamps in its block).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cursor {
    pub(super) head: u32,
    /// The ring's `writes` (bits 0–29), `overdrawn` (bit 30) and `booked` (bit 31), in
    /// one word so that a cursor stays 16 bytes.
    pub(super) marks: u32,
    pub(super) newest: u64,
}

/// `Cursor::marks`' bit for `booked`.
const BOOKED: u32 = 1 << 31;

/// `Cursor::marks`' bit for `overdrawn`.
const OVERDRAWN: u32 = 1 << 30;

/// The ring's write count wraps within `marks`' low 30 bits.
pub(super) const WRITES: u32 = OVERDRAWN - 1;

impl Cursor {
    /// The cursor of an empty ring.
    pub(crate) const EMPTY: Cursor = Cursor {
        head: 0,
        marks: 0,
        newest: EMPTY,
    };

    /// Where the ring writes next: the index of its oldest entry.
    pub(crate) fn head(&self) -> u32 {
        self.head
    }

    /// Whether the ring's newest entry was booked for a time after its reading.
    pub(super) fn booked(&self) -> bool {
        self.marks & BOOKED != 0
    }
}

/// The value of a timestamp that has never held an admission.
pub(crate) const EMPTY_STAMP: u64 = EMPTY;

impl Ring {
    /// An empty ring for `params`, allocated once.
    pub(crate) fn new(params: &SlidingLog) -> Self {
        Ring {
            head: 0,
            newest: EMPTY,
            booked: false,
            writes: 0,
            overdrawn: false,
            ts: vec![EMPTY; params.limit as usize].into_boxed_slice(),
        }
    }
}

impl<S: Stamps> Ring<S> {
    /// A ring over `ts` (which must hold `limit` timestamps) at `cursor`.
    pub(crate) fn from_parts(cursor: Cursor, ts: S) -> Self {
        Ring {
            head: cursor.head,
            newest: cursor.newest,
            booked: cursor.booked(),
            writes: cursor.marks & WRITES,
            overdrawn: cursor.marks & OVERDRAWN != 0,
            ts,
        }
    }

    /// The ring's cursor, to store back beside its timestamps.
    pub(crate) fn cursor(&self) -> Cursor {
        Cursor {
            head: self.head,
            marks: (self.writes & WRITES)
                | if self.booked { BOOKED } else { 0 }
                | if self.overdrawn { OVERDRAWN } else { 0 },
            newest: self.newest,
        }
    }

    /// Forgets every admission (the ring becomes fresh), keeping its allocation.
    pub(crate) fn clear(&mut self) {
        self.head = 0;
        self.newest = EMPTY;
        self.booked = false;
        self.writes = 0;
        self.overdrawn = false;
        for i in 0..self.ts.len() {
            self.ts.set(i, EMPTY);
        }
    }

    /// The ring index `i` places after `head` (`head < len`, `i <= len`): one
    /// comparison instead of a division, which the binary search in `active` would
    /// otherwise pay on every probe.
    #[inline]
    pub(super) fn wrap(&self, i: u32) -> usize {
        let j = self.head as usize + i as usize;
        let len = self.ts.len();
        if j >= len {
            j - len
        } else {
            j
        }
    }

    /// Records a write that overwrote entries still in the window (or gave entries
    /// back). The mark stays, through an emptied ring too, until the ring is cleared
    /// or a whole refund as the last write puts back the mark from before it: a
    /// booking cannot tell which of its instant's writes came after the mark.
    #[inline]
    pub(super) fn mark(&mut self, overdrew: bool) {
        self.overdrawn |= overdrew;
    }

    /// Whether a booking for a later time is pending at `reading`: the newest entry
    /// was booked ahead of the time it was decided at, and `reading` is before it. Only
    /// the mark tells that from a reading behind the newest entry (the clock stepped
    /// back), which is decided at the newest entry's time instead.
    #[inline]
    pub(super) fn pending(&self, reading: u64) -> bool {
        self.booked && self.newest > reading
    }

    /// The `i`-th oldest entry.
    #[inline]
    pub(super) fn entry(&self, i: u32) -> u64 {
        self.ts.get(self.wrap(i))
    }

    /// How many timestamps the ring holds (the limit it was built for).
    #[inline]
    pub(super) fn len(&self) -> u32 {
        self.ts.len() as u32
    }
}
