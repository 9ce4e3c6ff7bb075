//! Where a key lives: the table's geometry, the key's fingerprint, its two candidate
//! windows, the per-shard counters, and the claim locks.
//!
//! A key is hashed once with a randomly seeded `ahash` into `h: u64`.
//!
//! * Its identity in the table is the fingerprint `h` itself (`0` is remapped to `1`,
//!   since `0` marks an empty slot): two keys share a state only if their 64-bit
//!   hashes are equal.
//! * The high bits of `h` pick the shard (`h >> (64 − shard_bits)`, at most 8 bits).
//! * Bits 0..32 pick the first window within the shard and bits 24..56 the second
//!   (multiply-shift, so any window count works): a key may live in either of its two
//!   windows of [`WINDOW`] slots (192 bytes, three cache lines each), probed interleaved
//!   (see [`Location::probe`]).

use crate::sync::{AtomicU64, Mutex, Ordering, Swap, Words};
use crate::{ConfigError, Decision};
use crossbeam_utils::CachePadded;

/// Slots per window: 12 slots of 16 bytes, three cache lines.
///
/// Measured with `capacity` live keys churning continuously (one new key per
/// `1 s / capacity`, each live for 1 s): 8-slot windows evict about 0.055% of
/// insertions, 12-slot windows about 0.0003%, 16-slot windows none, at twice the
/// probe length of 8.
pub(crate) const WINDOW: usize = 12;

/// Slots allocated per key of capacity, as a fraction `NUM / DEN` (here 1.48).
///
/// With two candidate windows per key and the new key placed in the window holding
/// fewer live keys, 1.48 slots per key keeps evictions with `capacity` live keys far
/// under 0.1% of insertions (see [`WINDOW`] and `tests/keyed_flood.rs`) at 23.7 bytes per
/// key of capacity (16-byte slots, plus the shard counters).
pub(crate) const SLOTS_NUM: usize = 37;
/// See [`SLOTS_NUM`].
pub(crate) const SLOTS_DEN: usize = 25;

/// The largest capacity a keyed limiter accepts: 2³² keys where the address space
/// allows it, and on 32-bit targets as many as 16-byte slots fit in half the address
/// space (`isize::MAX` bytes, the most one allocation may take).
pub(crate) const MAX_CAPACITY: usize = {
    let by_design: u64 = 1 << 32;
    let by_address_space = isize::MAX as usize / 16 / SLOTS_NUM * SLOTS_DEN;
    if (by_address_space as u64) < by_design {
        by_address_space
    } else {
        // Only reached where usize holds 2^32.
        by_design as usize
    }
};

/// The fewest keys an explicitly chosen shard count may leave each shard: below it,
/// keys spread over shards too unevenly for the table to hold its capacity (at 4 keys
/// per shard, 48 of 1,000 live keys found their shard full).
pub(crate) const MIN_KEYS_PER_SHARD: usize = 256;

/// The largest shard count: the shard takes the top bits of the hash, and the second
/// window the bits just below them.
pub(crate) const MAX_SHARDS: usize = 1 << 8;

/// The fingerprint of the hash `h`: never `0`, which marks an empty slot.
#[inline]
pub(crate) fn fingerprint(h: u64) -> u64 {
    if h == 0 {
        1
    } else {
        h
    }
}

/// Whether `n` is an acceptable shard count on its own (the slot count is checked at
/// build time).
pub(crate) fn check_shards(n: usize) -> Result<(), ConfigError> {
    if n == 0 || !n.is_power_of_two() || n > MAX_SHARDS {
        return Err(ConfigError::InvalidShards { requested: n });
    }
    Ok(())
}

/// The shape of a table: `shards × windows_per_shard × window` slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    capacity: usize,
    shard_bits: u32,
    windows_per_shard: usize,
    window: usize,
    /// Slots per shard (`windows_per_shard × window`).
    shard_slots: usize,
    /// The span the per-key start offsets are drawn from: [`WINDOW`] for full windows,
    /// 0 (probe from the front) for tables too small for one.
    start_span: u64,
}

/// The candidate slots of one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Location {
    /// The shard (index into the shard metadata).
    pub(crate) shard: usize,
    /// The first slot of each candidate window; `windows[1] == windows[0]` when the
    /// shard has a single window.
    pub(crate) windows: [usize; 2],
    /// Where the key's probe starts within each window (then wraps around it).
    pub(crate) starts: [usize; 2],
}

impl Geometry {
    /// The geometry for `capacity` keys over `shards` shards (a default when `None`).
    pub(crate) fn new(capacity: usize, shards: Option<usize>) -> Result<Self, ConfigError> {
        if capacity == 0 || capacity > MAX_CAPACITY {
            return Err(ConfigError::InvalidCapacity {
                requested: capacity,
                max: MAX_CAPACITY,
            });
        }
        // At least 2 slots, so a capacity of 1 still has room to reclaim.
        let needed = (capacity * SLOTS_NUM).div_ceil(SLOTS_DEN).max(2);
        let shards = match shards {
            Some(n) => {
                check_shards(n)?;
                if n > 1 && capacity / n < MIN_KEYS_PER_SHARD {
                    return Err(ConfigError::InvalidShards { requested: n });
                }
                n
            }
            None => default_shards(needed),
        };
        let per_shard = needed.div_ceil(shards);
        let window = WINDOW.min(per_shard);
        let windows_per_shard = per_shard.div_ceil(window);
        Ok(Geometry {
            capacity,
            shard_bits: shards.trailing_zeros(),
            windows_per_shard,
            window,
            shard_slots: windows_per_shard * window,
            start_span: if window == WINDOW { WINDOW as u64 } else { 0 },
        })
    }

    /// The number of keys asked for.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The number of shards.
    pub(crate) fn shards(&self) -> usize {
        1 << self.shard_bits
    }

    /// Slots in one window.
    pub(crate) fn window(&self) -> usize {
        self.window
    }

    /// The shard slot `slot` belongs to.
    pub(crate) fn shard_of(&self, slot: usize) -> usize {
        slot / self.shard_slots
    }

    /// Total slots.
    pub(crate) fn slots(&self) -> usize {
        self.shards() * self.windows_per_shard * self.window
    }

    /// Where the key hashed to `h` may live.
    #[inline]
    pub(crate) fn locate(&self, h: u64) -> Location {
        // The top `shard_bits` bits: `(h >> 1) >> (63 − bits)` is `h >> (64 − bits)`
        // and 0 when there is one shard, with no branch.
        let shard = ((h >> 1) >> (63 - self.shard_bits)) as usize;
        let n = self.windows_per_shard as u64;
        // Multiply-shift: a uniform 32-bit value scaled to 0..n.
        let w1 = ((h & 0xFFFF_FFFF) * n) >> 32;
        let w2 = (((h >> 24) & 0xFFFF_FFFF) * n) >> 32;
        // Two distinct windows whenever the shard has two (the next one, wrapping).
        let w2 = if w2 != w1 {
            w2
        } else if w1 + 1 < n {
            w1 + 1
        } else {
            0
        };
        let base = shard * self.shard_slots;
        let window = self.window as u64;
        // Start offsets from bits mixed out of all of `h`, so they are independent of
        // the window choice. Tables too small for a full window (a handful of slots,
        // as in the loom models) probe from the front (`start_span` 0): with so few
        // slots there is no walk to shorten, and every key then competes for the same
        // first slot.
        let m = (h ^ (h >> 31)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let span = self.start_span;
        Location {
            shard,
            windows: [base + (w1 * window) as usize, base + (w2 * window) as usize],
            starts: [
                (((m & 0xFFFF_FFFF) * span) >> 32) as usize,
                (((m >> 32) * span) >> 32) as usize,
            ],
        }
    }
}

impl Location {
    /// The candidate windows, each as a range of slot indices, without repeating a
    /// window when both candidates coincide.
    #[cfg(test)]
    pub(crate) fn windows(&self, window: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
        let [a, b] = self.windows;
        let second = if b == a { None } else { Some(b..b + window) };
        std::iter::once(a..a + window).chain(second)
    }

    /// The key's canonical probe order: `(which window, slot)`, the two windows
    /// interleaved, each from the key's own start offset and wrapping around
    /// (`a+s, b+t, a+s+1, b+t+1, ...`).
    ///
    /// Empty slots are only ever claimed as the first empty slot of this order, and
    /// never become empty again. The order is fixed per key, which is what makes
    /// lock-free claims of empty slots duplicate-free. The per-key start offsets spread
    /// keys over their windows, so a lookup finds its key within about two probes
    /// instead of walking the window's filled prefix; the first empty slot still tends
    /// to lie in the emptier window (two-choice balancing, measured in
    /// `tests/keyed_flood.rs`).
    #[inline]
    pub(crate) fn probe(&self, window: usize) -> Probe {
        Probe {
            bases: self.windows,
            offsets: self.starts,
            window,
            left: if self.windows[0] == self.windows[1] {
                window
            } else {
                2 * window
            },
            next_window: 0,
        }
    }
}

/// The iterator of [`Location::probe`]: wraps offsets with a comparison instead of a
/// division, so it compiles to a tight loop (a `%`-based `flat_map` measured about a
/// fifth of a sliding-log decision).
pub(crate) struct Probe {
    bases: [usize; 2],
    offsets: [usize; 2],
    window: usize,
    /// Slots still to visit.
    left: usize,
    /// The window the next slot comes from (always 0 when both windows are one).
    next_window: usize,
}

impl Iterator for Probe {
    type Item = (usize, usize);

    #[inline]
    fn next(&mut self) -> Option<(usize, usize)> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let w = self.next_window;
        let slot = self.bases[w] + self.offsets[w];
        let o = self.offsets[w] + 1;
        self.offsets[w] = if o == self.window { 0 } else { o };
        if self.bases[0] != self.bases[1] {
            self.next_window = 1 - w;
        }
        Some((w, slot))
    }
}

/// Windows a default shard keeps at least: keys spread over shards by hash, and a shard
/// of many windows averages out the shards' uneven shares of the keys.
const MIN_WINDOWS_PER_SHARD: usize = 256;

/// The default shard count: a few per core, as long as each shard keeps at least
/// [`MIN_WINDOWS_PER_SHARD`] windows.
fn default_shards(slots: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let wanted = (cores * 4).next_power_of_two().min(MAX_SHARDS);
    let mut shards = wanted;
    while shards > 1 && slots / shards < MIN_WINDOWS_PER_SHARD * WINDOW {
        shards /= 2;
    }
    shards
}

/// Per-shard counters and the reclaim stamp, on their own cache lines.
#[derive(Debug, Default)]
pub(crate) struct Shard {
    /// The newest clock reading at which an entry of this shard was reclaimed or
    /// evicted (a running maximum). A key found missing is decided no earlier than
    /// this: its old entry, if it had one here, was idle (or forgotten) at that
    /// reading, so a request that read the clock before the reclaim, or on a core
    /// whose clock lags, cannot decide the key fresh while its old state still held
    /// quota back. Raised before the claim's store, read after a scan.
    pub(crate) reclaimed_at: AtomicU64,
    /// The shard's epoch: a count of the events after which one of its keys has a new
    /// state (a reset or removal, a reclaim or an eviction), each of which takes the
    /// next value after loading the entry it replaces. New states are numbered from it
    /// (see `reservation::Origin`), so that a booking is given back only to the state
    /// it was made on.
    pub(crate) epoch: AtomicU64,
    pub(crate) evictions: AtomicU64,
    pub(crate) idle_reclaims: AtomicU64,
    pub(crate) untracked: AtomicU64,
    pub(crate) refused: AtomicU64,
}

/// The counters summed over every shard.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Totals {
    pub(crate) allowed: u64,
    pub(crate) rejected: u64,
    pub(crate) evictions: u64,
    pub(crate) idle_reclaims: u64,
    pub(crate) untracked: u64,
    pub(crate) refused: u64,
}

impl Shard {
    /// Records a reclaim at `now`, before the slot is handed over.
    #[inline]
    pub(crate) fn stamp(&self, now: u64) {
        self.reclaimed_at.fetch_max(now, Ordering::AcqRel);
    }

    /// The shard's epoch now (for a state installed in an empty slot, and for a
    /// booking, read before it loads the state it books on).
    #[inline]
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The next epoch, for an event that replaces a state (taken after loading it).
    #[inline]
    pub(crate) fn next_epoch(&self) -> u64 {
        self.epoch.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The earliest reading at which a key missing from this shard may be decided.
    #[inline]
    pub(crate) fn floor(&self, now: u64) -> u64 {
        now.max(self.reclaimed_at.load(Ordering::Acquire))
    }

    #[inline]
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Stripes of the two counters every decision bumps (`allowed`, `rejected`).
///
/// Each of the first [`STRIPES`] threads to count (an id is taken on a thread's first
/// decision and given back when it exits) owns one stripe and is its only writer, so it
/// bumps its counters with a plain load and store: no locked instruction, which on x86
/// would wait for the slot's compare-and-swap to drain and cost more than the rest of
/// the decision. Threads beyond that share one overflow stripe with `fetch_add`.
#[derive(Debug)]
pub(crate) struct Stripes {
    /// `STRIPES` owned stripes, then the shared overflow stripe.
    stripes: Box<[CachePadded<Stripe>]>,
    /// Whether decisions are counted (the builder's `stats(false)` turns the
    /// per-decision update off).
    on: bool,
}

/// One thread's pair of hot counters.
#[derive(Debug, Default)]
struct Stripe {
    allowed: AtomicU64,
    rejected: AtomicU64,
}

/// Owned counter stripes per table; threads past this many share the overflow stripe.
pub(crate) const STRIPES: usize = 32;

/// Thread ids `0..STRIPES` for owned stripes, recycled when threads exit.
#[cfg(not(tollgate_loom))]
mod thread_id {
    use super::STRIPES;
    use std::cell::Cell;
    use std::sync::Mutex;

    /// Ids given back by exited threads.
    static FREE: Mutex<Vec<usize>> = Mutex::new(Vec::new());
    /// The next never-used id.
    static NEXT: Mutex<usize> = Mutex::new(0);

    /// No id taken yet.
    const UNSET: usize = usize::MAX;

    thread_local! {
        /// This thread's id. Constant-initialized and without a destructor, so reading
        /// it is one thread-local load (no lazy-initialization check on the hot path).
        static ID: Cell<usize> = const { Cell::new(UNSET) };
        /// Gives the id back when the thread exits.
        static RELEASE: Release = const { Release };
    }

    /// Gives the thread's id back when dropped (at thread exit).
    struct Release;

    impl Drop for Release {
        fn drop(&mut self) {
            let id = ID.with(|c| c.replace(STRIPES));
            if id < STRIPES {
                crate::sync::lock(&FREE).push(id);
            }
        }
    }

    /// Takes an id for this thread and arranges for it to be given back.
    #[cold]
    fn acquire() -> usize {
        // Registering the release fails only while the thread is exiting: it then
        // counts in the shared overflow stripe.
        if RELEASE.try_with(|_| ()).is_err() {
            ID.with(|c| c.set(STRIPES));
            return STRIPES;
        }
        let id = match crate::sync::lock(&FREE).pop() {
            Some(id) => id,
            None => {
                let mut next = crate::sync::lock(&NEXT);
                if *next < STRIPES {
                    *next += 1;
                    *next - 1
                } else {
                    STRIPES
                }
            }
        };
        ID.with(|c| c.set(id));
        id
    }

    /// This thread's stripe: `< STRIPES` when it owns one, `STRIPES` (the shared
    /// overflow stripe) otherwise, including while the thread is exiting.
    #[inline]
    pub(super) fn current() -> usize {
        let id = ID.with(Cell::get);
        if id == UNSET {
            acquire()
        } else {
            id
        }
    }
}

impl Stripes {
    /// Stripes that count decisions when `on`.
    pub(crate) fn new(on: bool) -> Self {
        Stripes {
            stripes: (0..=STRIPES)
                .map(|_| CachePadded::new(Stripe::default()))
                .collect(),
            on,
        }
    }

    /// Counts a decision of cost `cost` (peeks of cost 0 are not counted; nothing is
    /// when the stripes are off).
    #[inline]
    pub(crate) fn count(&self, cost: u32, d: &crate::Decision) {
        if cost == 0 || !self.on {
            return;
        }
        #[cfg(not(tollgate_loom))]
        let id = thread_id::current();
        // Under loom every model thread shares the overflow stripe.
        #[cfg(tollgate_loom)]
        let id = STRIPES;
        let s = &self.stripes[id];
        let counter = if d.is_allowed() {
            &s.allowed
        } else {
            &s.rejected
        };
        if id < STRIPES {
            // This thread is the stripe's only writer (see `thread_id`): a plain
            // increment loses nothing.
            counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        } else {
            Shard::bump(counter);
        }
    }

    /// Bytes of the stripes.
    pub(crate) fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.stripes)
    }

    /// What [`memory_bytes`](Self::memory_bytes) reports, known before allocating.
    pub(crate) const BYTES: usize = (STRIPES + 1) * std::mem::size_of::<CachePadded<Stripe>>();
}

/// Each quota tier's parameters (tier 0 is the builder's quota), fixed in number at
/// build, each replaceable at run time by `set_quota`; deciders read one tier's once
/// per decision (see [`Swap`](crate::sync::Swap)).
pub(crate) struct Tiers<P: Words>(Box<[Swap<P>]>);

impl<P: Words> Tiers<P> {
    /// The tiers `all`, tier 0 first.
    pub(crate) fn new(all: Vec<P>) -> Self {
        Tiers(all.into_iter().map(Swap::new).collect())
    }

    /// Tier `tier`'s parameters (`tier` < the number of tiers, checked by callers).
    #[inline]
    pub(crate) fn get(&self, tier: usize) -> P {
        self.0[tier].load()
    }

    /// Replaces tier `tier`'s parameters.
    pub(crate) fn set(&self, tier: usize, params: P) {
        self.0[tier].store(params);
    }

    /// Every tier's parameters now, tier 0 first.
    pub(crate) fn all(&self) -> impl Iterator<Item = P> + '_ {
        self.0.iter().map(Swap::load)
    }

    /// The bytes `n` tiers take, known before allocating.
    pub(crate) fn bytes(n: usize) -> usize {
        n * std::mem::size_of::<Swap<P>>()
    }

    /// The bytes these tiers take.
    pub(crate) fn memory_bytes(&self) -> usize {
        Self::bytes(self.0.len())
    }
}

/// What a replacing claim learns from one pass over a key's two windows: the first
/// free (empty or idle) slot of each, how many live entries each holds, and, once
/// ranked, the live entry to evict and the soonest idle stamp.
///
/// Entries are ranked by what forgetting them can over-admit: what they have used at
/// the claim's reading (a bucket's debt, a window's count, the log's entries in the
/// period), ties broken by the *idle stamp* (the time from which the state says
/// nothing any more: a token bucket's theoretical arrival time, the end of a window,
/// the newest logged admission plus the period), the soonest idle first. Each
/// algorithm reads both off the state as one number ordered that way (its
/// `evict_rank`; see `algorithm::Ranking`), with no step run, so ranking an entry is
/// one comparison. The victim is the entry of lowest rank: a throttled key is never
/// evicted while an entry that has used less is there to go. A new key refused under
/// `Deny` can retry when the soonest ranked entry goes idle, whichever the victim
/// would have been.
pub(crate) struct ClaimScan<S> {
    live: [usize; 2],
    free: [Option<S>; 2],
    /// The live entry of lowest rank.
    victim: Option<S>,
    /// Its rank (`u128::MAX` before any).
    lowest: u128,
    /// The earliest idle stamp of the ranked entries (`u64::MAX` before any).
    soonest: u64,
}

impl<S: Copy> ClaimScan<S> {
    /// An empty scan.
    pub(crate) fn new() -> Self {
        ClaimScan {
            live: [0; 2],
            free: [None; 2],
            victim: None,
            lowest: u128::MAX,
            soonest: u64::MAX,
        }
    }

    /// A free slot in window `w` (the first one seen is kept).
    pub(crate) fn free(&mut self, w: usize, slot: S) {
        self.free[w].get_or_insert(slot);
    }

    /// A live entry in window `w`.
    pub(crate) fn live(&mut self, w: usize) {
        self.live[w] += 1;
    }

    /// Ranks a live entry: `rank` orders as (what it has used, its idle stamp) and is
    /// comparable within one table at one reading (below `u128::MAX`); `idle_at` is
    /// its idle stamp.
    #[inline]
    pub(crate) fn rank(&mut self, slot: S, rank: u128, idle_at: u64) {
        if rank < self.lowest {
            self.lowest = rank;
            self.victim = Some(slot);
        }
        self.soonest = self.soonest.min(idle_at);
    }

    /// [`rank`](Self::rank) for an entry whose rank is at least `floor`, computing it
    /// (`rank()`) only when that could make the entry the victim.
    #[inline]
    pub(crate) fn rank_above(
        &mut self,
        slot: S,
        floor: u128,
        idle_at: u64,
        rank: impl FnOnce() -> u128,
    ) {
        if floor < self.lowest {
            self.rank(slot, rank(), idle_at);
        } else {
            self.soonest = self.soonest.min(idle_at);
        }
    }

    /// Where to claim: the first free slot of the window with fewer live entries (two
    /// choices balance the windows), or of the only window with one.
    pub(crate) fn target(&self) -> Option<S> {
        match self.free {
            [Some(a), Some(b)] => Some(if self.live[1] < self.live[0] { b } else { a }),
            [a, b] => a.or(b),
        }
    }

    /// The ranked live entry that has used least (of those, the soonest idle).
    pub(crate) fn victim(&self) -> Option<S> {
        self.victim
    }

    /// The denial of a refused new key at `now`: retry when the soonest ranked entry
    /// goes idle (at least 1 ns).
    pub(crate) fn refusal(&self, capacity: u32, now: u64) -> Decision {
        refusal(capacity, self.victim.map(|_| self.soonest), now)
    }
}

/// The denial of a new key refused at `now` by a full table: retry when the soonest
/// live entry of its windows goes idle, at `soonest` (at least 1 ns from now).
pub(crate) fn refusal(capacity: u32, soonest: Option<u64>, now: u64) -> Decision {
    let wait = soonest.map_or(1, |at| at.saturating_sub(now)).max(1);
    Decision::deny(capacity, 0, wait, wait)
}

/// The locks that serialize the claims replacing an entry (idle reclaim, eviction).
///
/// All replacing claims of one key take the same lock (chosen by its fingerprint), and
/// rescan the key's windows under it: together with the fixed probe order, a key is
/// never installed twice. Claims of different keys usually take different locks and
/// run in parallel, even within one shard: after warm-up, when every new key replaces
/// an idle entry, a flood of new keys is not serialized on one mutex per shard. Two
/// claims of different keys that pick the same slot are settled by the slot's own
/// compare-and-swap (packed table) or lock (sliding log): the loser looks again.
pub(crate) struct ClaimLocks {
    locks: Box<[Mutex<()>]>,
}

impl ClaimLocks {
    /// One lock per 64 slots (about 0.1 byte per slot), a power of two from 1 to 4,096.
    fn count(slots: usize) -> usize {
        (slots / 64).clamp(1, 4096).next_power_of_two().min(4096)
    }

    /// The locks for a table of `slots` slots.
    pub(crate) fn new(slots: usize) -> Self {
        ClaimLocks {
            locks: (0..Self::count(slots)).map(|_| Mutex::new(())).collect(),
        }
    }

    /// Bytes of the locks of a table of `slots` slots.
    pub(crate) fn bytes(slots: usize) -> usize {
        Self::count(slots) * std::mem::size_of::<Mutex<()>>()
    }

    /// The lock of the key with fingerprint `fp`: its bits mixed, so that keys sharing
    /// a shard or a window spread over the locks.
    #[inline]
    pub(crate) fn of(&self, fp: u64) -> &Mutex<()> {
        let mixed = fp.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
        &self.locks[mixed as usize & (self.locks.len() - 1)]
    }
}

pub(crate) fn new_shards(n: usize) -> Box<[CachePadded<Shard>]> {
    (0..n).map(|_| CachePadded::new(Shard::default())).collect()
}

/// Sums the counters of `shards` and `stripes`.
pub(crate) fn totals(shards: &[CachePadded<Shard>], stripes: &Stripes) -> Totals {
    let mut t = Totals::default();
    for s in stripes.stripes.iter() {
        t.allowed += s.allowed.load(Ordering::Relaxed);
        t.rejected += s.rejected.load(Ordering::Relaxed);
    }
    for s in shards {
        t.evictions += s.evictions.load(Ordering::Relaxed);
        t.idle_reclaims += s.idle_reclaims.load(Ordering::Relaxed);
        t.untracked += s.untracked.load(Ordering::Relaxed);
        t.refused += s.refused.load(Ordering::Relaxed);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More threads than owned stripes, some exiting and handing their ids on while
    /// others count: no increment is lost.
    #[test]
    fn stripes_count_every_decision_from_any_number_of_threads() {
        let stripes = std::sync::Arc::new(Stripes::new(true));
        let ok = crate::Decision::allow(1, 0, 0, 0);
        let no = crate::Decision::deny(1, 0, 1, 1);
        for round in 0..3 {
            let handles: Vec<_> = (0..(STRIPES + 8))
                .map(|i| {
                    let s = stripes.clone();
                    std::thread::spawn(move || {
                        for _ in 0..1000 {
                            s.count(1, if i % 2 == 0 { &ok } else { &no });
                        }
                        s.count(0, &ok); // peeks are not counted
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
            let t = totals(&new_shards(1), &stripes);
            let per_round = (STRIPES as u64 + 8) / 2 * 1000;
            assert_eq!(
                (t.allowed, t.rejected),
                (per_round * (round + 1), per_round * (round + 1))
            );
        }
    }

    #[test]
    fn geometry_holds_about_one_and_a_half_slots_per_key() {
        let g = Geometry::new(16_384, Some(16)).unwrap();
        assert!(g.slots() >= 16_384 * SLOTS_NUM / SLOTS_DEN);
        assert!(g.slots() * 16 <= 16_384 * 24);
        assert_eq!(g.window(), WINDOW);
        let g = Geometry::new(1, None).unwrap();
        assert_eq!(g.slots(), 2);
        assert_eq!(g.window(), 2);
    }

    #[test]
    fn bad_shards_and_capacities_are_refused() {
        assert!(Geometry::new(0, None).is_err());
        assert!(Geometry::new(MAX_CAPACITY + 1, None).is_err());
        assert!(Geometry::new(100, Some(3)).is_err());
        assert!(Geometry::new(100, Some(0)).is_err());
        assert!(Geometry::new(1, Some(4)).is_err());
        assert!(Geometry::new(100_000, Some(MAX_SHARDS * 2)).is_err());
    }

    #[test]
    fn locations_stay_inside_their_shard() {
        let g = Geometry::new(10_000, Some(4)).unwrap();
        let per_shard = g.slots() / g.shards();
        for i in 0..10_000u64 {
            let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let loc = g.locate(h);
            assert_eq!(loc.shard, (h >> 62) as usize);
            for r in loc.windows(g.window()) {
                assert_eq!(r.start / per_shard, loc.shard);
                assert!(r.end <= (loc.shard + 1) * per_shard);
            }
            let probe: Vec<_> = loc.probe(g.window()).collect();
            assert_eq!(probe.len(), 2 * g.window());
            let w = g.window();
            assert_eq!(probe[0], (0, loc.windows[0] + loc.starts[0]));
            assert_eq!(probe[1], (1, loc.windows[1] + loc.starts[1]));
            assert_eq!(probe[2], (0, loc.windows[0] + (loc.starts[0] + 1) % w));
            assert_eq!(probe.len(), 2 * w);
            assert_ne!(loc.windows[0], loc.windows[1]);
        }
        assert_eq!(fingerprint(0), 1);
        assert_eq!(fingerprint(7), 7);
    }

    /// The probe order, slot by slot, against its definition (`a+s, b+t, a+s+1,
    /// b+t+1, ...` wrapping within each window), for tables with two windows per key,
    /// one window, and windows smaller than `WINDOW`.
    #[test]
    fn probe_visits_both_windows_interleaved_from_their_offsets() {
        for (keys, shards) in [(10_000, Some(4)), (1, None), (5, None), (17, None)] {
            let g = Geometry::new(keys, shards).unwrap();
            let w = g.window();
            for i in 0..2_000u64 {
                let loc = g.locate(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i);
                let [a, b] = loc.windows;
                let [sa, sb] = loc.starts;
                let mut expected = Vec::new();
                for j in 0..w {
                    expected.push((0, a + (sa + j) % w));
                    if a != b {
                        expected.push((1, b + (sb + j) % w));
                    }
                }
                assert_eq!(loc.probe(w).collect::<Vec<_>>(), expected, "{keys} keys");
            }
        }
    }
}
