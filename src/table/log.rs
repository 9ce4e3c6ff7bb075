//! The sliding log's keyed table: `LockedTable<LogEntry>` (the protocol, and why a
//! key's request can never touch another key's log, is on [`LockedTable`]), with the
//! log's entry and its ring-specific verbs.
//!
//! A slot's lock guards the key's fingerprint and its ring's cursor; the rings'
//! timestamps live in one block allocated at build, `limit` timestamps (8 bytes each)
//! per slot, reserved fallibly in one allocation, so a table too large for the machine
//! is a [`ConfigError::InvalidCapacity`] at build, never an abort. Slot `i`'s
//! timestamps are the block's `i`-th run of `limit` cells, touched only under slot
//! `i`'s lock. A key is its fingerprint.
//!
//! What the log's entry chooses ([`SlotEntry`]): empty slots are taken before idle
//! ones (an empty log is idle), a slot never empties again, keys live in their groups
//! only, the reclaim floor is the shard's, and a live log is evicted (`OnFull::Evict`)
//! only when both groups are full of live logs: the one that has used least (its
//! entries in the period, a binary search of its ring under its lock), ties by idle
//! stamp, checked again under its lock to be the log that was ranked (its cursor).
//!
//! [`ConfigError::InvalidCapacity`]: crate::error::ConfigError::InvalidCapacity

use super::claim::{ClaimScan, OnFull};
use super::counters::Shard;
use super::geometry::{fingerprint, Geometry, Location, MAX_KEYS};
use super::locked::{Candidate, Claim, Floor, LockedTable, SlotEntry};
use super::packed::Applied;
use super::tiers::Tiers;
use crate::algorithm::booking::Origin;
use crate::algorithm::sliding_log::{Cursor, Ring, SlidingLog, EMPTY_STAMP};
use crate::decision::Decision;
use crate::sync::{advise_huge_pages, prefetch, PlainAtomicU64, PlainAtomicU8, PlainOrdering};

/// A fixed-capacity table of sliding logs.
pub(crate) type LogTable = LockedTable<LogEntry>;

/// Rings larger than this in all (4 MiB, beyond a core's L2) are assumed to miss the
/// caches at every decision, which then prefetches the lines it is about to need.
/// Smaller ones are not: where the lines are cached, a prefetch only costs.
const FAR_BYTES: usize = 4 << 20;

/// A sliding log's slot entry: its ring's cursor (the timestamps are in the block).
#[derive(Debug)]
pub(crate) struct LogEntry {
    /// The ring's head and newest timestamp.
    cursor: Cursor,
    /// This incarnation of the key's log: the shard's epoch when it was installed or
    /// last reset (unique in the shard), so that a booking is given back only to the
    /// log it was made on (see `algorithm::booking::Origin::Entry`).
    gen: u64,
}

/// What the logs share: their timestamps and their quotas.
pub(crate) struct Logs {
    /// Every slot's timestamps, `ring_len` per slot.
    stamps: Box<[PlainAtomicU64]>,
    /// Each tier's parameters.
    params: Tiers<SlidingLog>,
    /// Timestamps per ring, fixed at build (the largest limit built with).
    ring_len: usize,
    /// Per slot, where its ring writes next (its head `>> shift`): written under the
    /// slot's lock at each write to a ring of a table beyond the caches (`far`), read
    /// without it by a decision, before the slot is loaded, to prefetch the ring's line
    /// the write will need. A hint only: a stale one costs a useless prefetch, never a
    /// wrong decision. One byte a slot.
    next: Box<[PlainAtomicU8]>,
    /// How far a head is shifted to fit a hint byte (0 for rings of up to 256
    /// timestamps: the hint is the head itself).
    shift: u32,
    /// Whether the rings take more than [`FAR_BYTES`]: only then are the hints kept and
    /// the lines prefetched (in the caches, either costs more than it saves).
    far: bool,
    /// Whether the timestamps were advised onto huge pages (`machine`).
    huge_pages: bool,
}

impl Logs {
    /// Slot `i`'s ring at `cursor` (call under slot `i`'s lock).
    #[inline]
    fn ring(&self, i: usize, cursor: Cursor) -> Ring<&[PlainAtomicU64]> {
        let len = self.ring_len;
        Ring::from_parts(cursor, &self.stamps[i * len..(i + 1) * len])
    }

    /// Records where slot `i`'s ring writes next, at `cursor` (call under slot `i`'s
    /// lock). At every write, not only when the hint changes: a store to the line the
    /// prefetch has just read costs less than the comparison.
    #[inline(always)]
    fn note(&self, i: usize, cursor: Cursor) {
        if let Some(hint) = self.next.get(i) {
            hint.store((cursor.head() >> self.shift) as u8, PlainOrdering::Relaxed);
        }
    }

    /// Prefetches the line of slot `i`'s ring its next write goes to (by its hint,
    /// read without the lock).
    #[inline(always)]
    fn prefetch(&self, i: usize) {
        let at = usize::from(self.next[i].load(PlainOrdering::Relaxed)) << self.shift;
        if let Some(cell) = self.stamps.get(i * self.ring_len + at) {
            prefetch(cell);
        }
    }
}

impl SlotEntry for LogEntry {
    /// A log's key is its fingerprint: nothing more to compare.
    type Key = ();
    type Name = ();
    type Ext = Logs;
    /// A ranked log is checked again by its cursor.
    type Mark = Cursor;

    const EMPTY_FIRST: bool = true;
    const EMPTIES: bool = false;
    const FLOOR: Floor = Floor::Shard;

    fn vacant() -> Self {
        LogEntry {
            cursor: Cursor::EMPTY,
            gen: 0,
        }
    }

    #[inline(always)]
    fn is(&self, _: &()) -> bool {
        true
    }

    fn idle(&self, logs: &Logs, _: usize, now: u64) -> bool {
        logs.params.get(0).cursor_is_idle(self.cursor, now)
    }

    fn mark(&self) -> Cursor {
        self.cursor
    }

    fn rank(
        &self,
        logs: &Logs,
        now: u64,
        evict: bool,
        me: Candidate<Cursor>,
        scan: &mut ClaimScan<Candidate<Cursor>>,
    ) {
        // Every entry the ring holds counts: a ring is as long as the largest tier's
        // limit, and a key of that tier used more entries than tier 0's limit shows.
        let params = logs.params.get(0).over_ring(logs.ring_len as u32);
        let at = params.cursor_idle_at(self.cursor);
        // The cursor bounds the rank (a live log has used from 1 to `limit` entries);
        // its ring (other cache lines) is searched only when the bounds differ and the
        // floor could make it the victim, and only for an eviction.
        let [floor, ceiling] = params.evict_rank_bounds(self.cursor, now, at);
        scan.rank_above(me, floor, at, || {
            if evict && floor != ceiling {
                params.evict_rank(&logs.ring(me.0, self.cursor), now, at)
            } else {
                floor
            }
        });
    }

    fn install(&mut self, logs: &Logs, i: usize, shard: &Shard, _: (), _: bool) {
        self.gen = shard.next_epoch();
        let mut ring = logs.ring(i, self.cursor);
        ring.clear();
        self.cursor = ring.cursor();
        logs.note(i, self.cursor);
    }

    fn vacate(&mut self) {}

    fn ext_bytes(logs: &Logs) -> usize {
        std::mem::size_of_val(&*logs.stamps)
            + std::mem::size_of_val(&*logs.next)
            + logs.params.memory_bytes()
    }
}

impl LockedTable<LogEntry> {
    /// The bytes a table of `geo` and `params` takes, computed before allocating;
    /// `None` when it exceeds the address space.
    pub(crate) fn bytes_for(geo: &Geometry, ring_len: u32, tiers: usize) -> Option<usize> {
        let rings = geo
            .slots()
            .checked_mul(ring_len as usize * std::mem::size_of::<u64>() + 1)?;
        Self::bytes_of(geo, rings.checked_add(Tiers::<SlidingLog>::bytes(tiers))?)
    }

    /// Allocates every slot and the timestamp block, once, fallibly.
    pub(crate) fn new(
        geo: Geometry,
        tiers: Vec<SlidingLog>,
        on_full: OnFull,
        stats: bool,
    ) -> Result<Self, crate::error::ConfigError> {
        let n = geo.slots();
        let too_big = || crate::error::ConfigError::InvalidCapacity {
            requested: geo.max_keys(),
            max: MAX_KEYS,
        };
        let limit = tiers.iter().map(SlidingLog::limit).max().unwrap_or(0) as usize;
        let cells = n
            .checked_mul(limit)
            .filter(|&c| c <= isize::MAX as usize / 8)
            .ok_or_else(too_big)?;
        let mut stamps = Vec::new();
        stamps.try_reserve_exact(cells).map_err(|_| too_big())?;
        // Advised before the first write touches the pages (see `machine`).
        let huge_pages = advise_huge_pages(stamps.spare_capacity_mut());
        stamps.extend((0..cells).map(|_| PlainAtomicU64::new(EMPTY_STAMP)));
        let mut next = Vec::new();
        next.try_reserve_exact(n).map_err(|_| too_big())?;
        next.extend((0..n).map(|_| PlainAtomicU8::new(0)));
        // Bits a head takes beyond a byte's 8.
        let shift = (usize::BITS - limit.saturating_sub(1).leading_zeros()).saturating_sub(8);
        let logs = Logs {
            stamps: stamps.into_boxed_slice(),
            params: Tiers::new(tiers),
            ring_len: limit,
            next: next.into_boxed_slice(),
            shift,
            far: cells * std::mem::size_of::<u64>() > FAR_BYTES,
            huge_pages,
        };
        Self::with_ext(geo, logs, on_full, stats)
    }

    /// Whether the rings were advised onto huge pages.
    pub(crate) fn huge_pages(&self) -> bool {
        self.ext().huge_pages
    }

    /// Bytes of one slot's ring.
    pub(crate) fn ring_bytes(&self) -> usize {
        self.ext().ring_len * std::mem::size_of::<u64>()
    }

    /// Each tier's parameters.
    pub(crate) fn tiers(&self) -> &Tiers<SlidingLog> {
        &self.ext().params
    }

    /// Timestamps per ring, fixed at build.
    pub(crate) fn ring_len(&self) -> u32 {
        self.ext().ring_len as u32
    }

    /// For a table beyond the caches, before a lookup: the ring lines the key's two
    /// likeliest slots write next and those slots themselves, fetched together, so that
    /// the decision waits for about one miss instead of one after another (the ring's
    /// position is in the slot).
    #[inline(always)]
    fn prefetch(&self, loc: &Location) {
        for (g, s) in loc.groups.into_iter().zip(loc.starts) {
            self.ext().prefetch(g + s);
        }
        self.prefetch_slots(loc);
    }

    /// Runs `f(ring, now, lag)` on slot `i`'s ring (locked as `e`) and stores the cursor
    /// back (`lag`: see [`run_booked`](Self::run_booked)).
    ///
    /// Always inline: out of line (as the ring's hint made it) the ring and the cursor
    /// went through memory on every decision.
    #[inline(always)]
    fn apply<const FAR: bool, R>(
        &self,
        i: usize,
        e: &mut LogEntry,
        (now, lag): (u64, u64),
        f: &mut impl FnMut(&mut Ring<&[PlainAtomicU64]>, u64, u64) -> R,
    ) -> R {
        let mut ring = self.ext().ring(i, e.cursor);
        let r = f(&mut ring, now, lag);
        e.cursor = ring.cursor();
        if FAR && self.beyond_caches() {
            self.ext().note(i, e.cursor);
        }
        r
    }

    /// One decision for the key hashed to `h` at `now`, for `cost <= capacity`, in a
    /// table whose rings are in the caches (not [`far`](Self::beyond_caches)): no prefetch, no
    /// hint, the code a decision ran before either existed (with either compiled into
    /// it, even behind a branch, a decision in the caches was measurably slower).
    pub(crate) fn decide(&self, h: u64, now: u64, cost: u32, params: SlidingLog) -> Decision {
        self.decide_in::<false>(h, now, cost, params)
    }

    /// [`decide`](Self::decide) for a table beyond the caches ([`far`](Self::beyond_caches)),
    /// out of line: the rings' hints kept, the lines prefetched.
    #[inline(never)]
    pub(crate) fn decide_beyond_caches(
        &self,
        h: u64,
        now: u64,
        cost: u32,
        params: SlidingLog,
    ) -> Decision {
        self.decide_in::<true>(h, now, cost, params)
    }

    /// Whether the rings take more than [`FAR_BYTES`]: decisions then go to
    /// [`decide_beyond_caches`](Self::decide_beyond_caches).
    #[inline(always)]
    pub(crate) fn beyond_caches(&self) -> bool {
        self.ext().far
    }

    #[inline(always)]
    fn decide_in<const FAR: bool>(
        &self,
        h: u64,
        now: u64,
        cost: u32,
        params: SlidingLog,
    ) -> Decision {
        let placed = self
            .run_in::<FAR, _>(
                h,
                now,
                cost > 0,
                |ring, t, lag| params.step(ring, t, cost).lagged_rarely(lag),
                || params.fresh(cost),
            )
            .0;
        let d = match placed {
            // A peek (cost 0) at an absent key: it decides as fresh, uncounted.
            Applied::Absent(d) => return d,
            Applied::Stored(d) | Applied::Untracked(d) => d,
            // Refused under the deciding tier's policy (the table's is tier 0's).
            Applied::Refused(d) => d.with_policy(params.limit(), params.limit()),
        };
        self.counts().count(cost, &d);
        d
    }

    /// Runs `f(ring, now)` on the key hashed to `h` under its slot's lock, inserting a
    /// missing key (with an empty ring, through the claim protocol) only if `insert`;
    /// `fresh()` is the result for a key left absent or admitted untracked. With what
    /// identifies the log the transition ran on ([`Origin::Entry`]), for a later
    /// [`refund`](Self::refund). In a
    /// [`far`](Self::beyond_caches) table it prefetches and keeps the rings' hints as
    /// [`decide_beyond_caches`](Self::decide_beyond_caches) does.
    ///
    /// `f(ring, t, lag)` runs at `t`, `lag` ns after the reading `now`: a missing key is
    /// decided no earlier than the newest reclaim in its shard, and whatever waits `f`
    /// reports are measured from the reading, `lag` longer than from `t` (never too
    /// early for the caller whose clock read it). A found key's lag is zero.
    pub(crate) fn run_booked<R>(
        &self,
        h: u64,
        now: u64,
        insert: bool,
        f: impl FnMut(&mut Ring<&[PlainAtomicU64]>, u64, u64) -> R,
        fresh: impl FnOnce() -> R,
    ) -> (Applied<R>, Origin) {
        self.run_in::<true, R>(h, now, insert, f, fresh)
    }

    /// [`run_booked`](Self::run_booked); with `FAR`, in a [`far`](Self::beyond_caches) table, the
    /// lines prefetched and the rings' hints kept (without, not even the check).
    #[inline(always)]
    fn run_in<const FAR: bool, R>(
        &self,
        h: u64,
        now: u64,
        insert: bool,
        mut f: impl FnMut(&mut Ring<&[PlainAtomicU64]>, u64, u64) -> R,
        fresh: impl FnOnce() -> R,
    ) -> (Applied<R>, Origin) {
        let fp = fingerprint(h);
        let loc = self.geo().locate(h);
        if FAR && self.beyond_caches() {
            self.prefetch(&loc);
        }
        if let Some((i, mut held)) = self.find(fp, &(), &loc) {
            let r = self.apply::<FAR, R>(i, &mut held.entry, (now, 0), &mut f);
            return (
                Applied::Stored(r),
                Origin::Entry {
                    gen: held.entry.gen,
                },
            );
        }
        if !insert {
            // Nothing was booked on an absent key: never given back.
            return (
                Applied::Absent(fresh()),
                Origin::Cell {
                    interval: 0,
                    stamp: 0,
                },
            );
        }
        // The location computed again for the claim (out of line): handing it the
        // lookup's would keep that in memory on the hit path too (spilled before the
        // lookup: 2 to 3 ns of a 33 ns decision at 1,000 keys).
        let reading = now;
        let (claim, now) = self.claim(fp, &(), &self.geo().locate(h), now, ());
        let lag = now - reading;
        let (i, mut held) = match claim {
            Claim::Found(i, held) | Claim::Installed(i, held, ()) => (i, held),
            Claim::Untracked => return (Applied::Untracked(fresh()), Origin::Entry { gen: 0 }),
            Claim::Refused { soonest } => {
                let limit = self.tiers().get(0).limit();
                // "When the soonest entry frees up", from the reading.
                let d = super::claim::refusal(limit, soonest, reading);
                return (Applied::Refused(d), Origin::Entry { gen: 0 });
            }
        };
        let r = self.apply::<FAR, R>(i, &mut held.entry, (now, lag), &mut f);
        (
            Applied::Stored(r),
            Origin::Entry {
                gen: held.entry.gen,
            },
        )
    }

    /// Runs `f(ring, now)` on the key hashed to `h` only while its log is the one
    /// `origin` (from [`run_booked`](Self::run_booked)) identifies: nothing when the
    /// key is gone, or was reset, reclaimed or evicted since.
    pub(crate) fn refund(
        &self,
        h: u64,
        origin: Origin,
        now: u64,
        mut f: impl FnMut(&mut Ring<&[PlainAtomicU64]>, u64),
    ) {
        let Origin::Entry { gen } = origin else {
            return;
        };
        let loc = self.geo().locate(h);
        if let Some((i, mut held)) = self.find(fingerprint(h), &(), &loc) {
            if held.entry.gen == gen {
                self.apply::<true, ()>(i, &mut held.entry, (now, 0), &mut |ring, t, _| f(ring, t));
            }
        }
    }

    /// Empties the log of the key hashed to `h`, as a new incarnation (no booking made
    /// before gives anything to it). `false` when the table does not hold the key.
    pub(crate) fn reset(&self, h: u64) -> bool {
        let loc = self.geo().locate(h);
        let Some((i, mut held)) = self.find(fingerprint(h), &(), &loc) else {
            return false;
        };
        let e = &mut held.entry;
        let mut ring = self.ext().ring(i, e.cursor);
        ring.clear();
        e.cursor = ring.cursor();
        self.ext().note(i, e.cursor);
        e.gen = self.shard(loc.shard).next_epoch();
        true
    }

    /// The decision for `cost` (at least 1) for the key hashed to `h` at `now`,
    /// logging and inserting nothing.
    pub(crate) fn peek(&self, h: u64, now: u64, cost: u32, params: SlidingLog) -> Decision {
        let fp = fingerprint(h);
        match self.find(fp, &(), &self.geo().locate(h)) {
            Some((i, held)) => params.peek(&self.ext().ring(i, held.entry.cursor), now, cost),
            None => params.fresh(cost),
        }
    }
}
