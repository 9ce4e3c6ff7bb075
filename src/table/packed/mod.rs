//! The packed keyed table: one 16-byte atomic word per slot, `(fingerprint, state)`.
//!
//! # The protocol, and why one key's request can never touch another key's state
//!
//! Slot word, 128 bits: `fingerprint << 64 | state`; fingerprint `0` is an empty slot.
//! Every write to a slot is a 128-bit compare-and-swap of the whole word:
//!
//! * **update** (the key is present): `load → step → CAS(old word, (fp, new state))`.
//!   The CAS succeeds only if the slot still holds this key's fingerprint *and* the
//!   state the step was computed from. If the fingerprint changed (the slot was
//!   reclaimed or evicted for another key), the request restarts from the lookup. So a
//!   request of key A is never applied to key B's state, nor B's to A's: there is no
//!   "slot handle" to go stale, only a value compared in full (no ABA: equal words
//!   mean equal key and equal state, and the step is a pure function of them).
//! * **claim of an empty slot** (lock-free): a scan of the key's candidate groups in
//!   its canonical order (the two groups interleaved, which balances them: see
//!   `Location::probe`) that reaches an empty slot before any copy of the key installs
//!   the key in that slot. Slots never become empty again, so every slot before a key's
//!   position stays occupied: a scan that meets an empty slot has passed the key's only
//!   possible positions, and so stops there (a miss on a table that is not full costs
//!   a probe or two, not two whole groups). Two threads inserting the same key cannot
//!   both succeed in different slots: the one whose target comes later in the order
//!   read the other's target after it was claimed and so saw the key there.
//! * **claim of an occupied slot** (idle reclaim, eviction): only when the scan found no
//!   empty slot (and none can appear again). These claims take the key's claim lock
//!   (one of a table-wide set, chosen by the fingerprint: see `ClaimLocks`) and rescan
//!   under it, so all replacing claims of one key are serialized; together with the
//!   rule above, a key is never present twice. Claims of other keys, even in the same
//!   shard, usually hold other locks and proceed in parallel; when two pick the same
//!   slot, its compare-and-swap lets one win and the other start over. Ranking the
//!   candidates reads each state once: its *idle stamp* (the time from which it says
//!   nothing, `PackedAlgorithm::idle_at`: a bucket's theoretical arrival time, a window's
//!   end) tells an idle entry from a live one, and an eviction takes the live entry
//!   that has used least (`algorithm::Ranking`: a bucket's debt, a window's count;
//!   ties by idle stamp), so no step runs under the lock and a throttled key is never
//!   evicted while an entry that has used less can go. The eviction's compare-and-swap
//!   fails if the victim's state changed since it was ranked (the request starts
//!   over). Under `Evict`, a key whose candidates are all live is ranked before the
//!   lock is taken, and the lock taken only if nobody took it since the ranking began
//!   (then no claim of the key installed it meanwhile); otherwise the claim rescans
//!   under the lock (see `PackedTable::claim_evict`).
//!
//! * **a request in flight across a reclaim**: a request reads the clock once, before
//!   its lookup. If, meanwhile, another thread with a later reading found the key idle
//!   and gave its slot away, the request finds the key missing. Deciding it fresh at
//!   its own (older) reading would hand back quota the old state still withheld at
//!   that reading. So every replacing claim first raises its shard's `reclaimed_at`
//!   stamp to its reading, then installs; and a key found missing is decided at no
//!   earlier than the stamp (read after the scan, which saw the installed word and so
//!   the stamp before it). Its old state was idle (or, under `Evict`, forgotten) at
//!   the stamp, so deciding fresh there is what the old state would have decided.
//!   This also covers cores whose clocks disagree.
//!
//! * **a refusal when nothing is free** (`OnFull::Deny`, `OnFull::Allow`): a pass over
//!   the key's full groups without the lock that finds every entry live at the
//!   request's reading answers at once (refused, or admitted untracked), writing
//!   nothing: at that reading the key had no room, so the answer is ordered before any
//!   claim of the same key that found room at a later reading (see `PackedTable::claim`).
//!
//! Lookups, updates and refusals never lock; a claim that replaces an entry holds its
//! key's claim lock for one scan of two groups and one CAS.

use super::claim::{ClaimLocks, OnFull};
use super::counters::{new_shards, totals, Shard, Stripes, Totals};
use super::generation;
use super::geometry::{Geometry, MAX_KEYS};
use super::tiers::Tiers;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::packed::PackedAlgorithm;
use crate::decision::Decision;
use crate::sync::{advise_huge_pages, AtomicU128, Ordering};
use crossbeam_utils::CachePadded;
use rates::Rates;
use scan::Scan;

/// The key word of a slot word (see `table::generation`: the key's tag and its
/// state's generation).
#[inline]
pub(super) fn fp_of(word: u128) -> u64 {
    (word >> 64) as u64
}

/// The state of a slot word.
#[inline]
fn state_of(word: u128) -> u64 {
    word as u64
}

/// The slot word for the key word `fp` with `state`.
#[inline]
pub(super) fn pack(fp: u64, state: u64) -> u128 {
    (u128::from(fp) << 64) | u128::from(state)
}

/// Where a transition run by a keyed table (`run_booked`) took effect.
#[derive(Debug)]
pub(crate) enum Applied<R> {
    /// On the key's stored state (found, or inserted).
    Stored(R),
    /// The key is not in the table and nothing was inserted: the result of the
    /// transition on a fresh state, not written.
    Absent(R),
    /// A new key admitted untracked (`OnFull::Allow`): the transition's result on a
    /// fresh state, not written.
    Untracked(R),
    /// A new key refused (`OnFull::Deny`): the refusal.
    Refused(Decision),
}

/// The key word a run left in the key's slot, and the shard epoch of the install when
/// the run installed the key (0 when it updated a state already there): what a
/// booking's [`Origin::Slot`](crate::algorithm::booking::Origin) is made of.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Stored {
    /// The key word (tag, class, generation).
    pub(super) word: u64,
    /// The epoch the installed state's generation was taken from.
    pub(super) installed: u64,
}

/// What [`PackedTable::survey`] finds in a key's full groups.
enum Survey {
    /// The key (inserted meanwhile).
    Found,
    /// An empty slot or an entry idle at the reading.
    Free,
    /// Only live entries; the soonest goes idle at `soonest`.
    Live { soonest: u64 },
}

/// Four slots on one cache line, so that a group of 12 slots is 3 whole lines.
type Line = crate::sync::Line<AtomicU128>;

/// The table's slots in order (see [`PackedTable::slots`]).
#[derive(Clone, Copy)]
struct Slots<'a>(
    #[cfg(not(tollgate_loom))] &'a [AtomicU128],
    #[cfg(tollgate_loom)] &'a [Line],
);

impl<'a> Slots<'a> {
    /// Slot `i`.
    #[inline(always)]
    fn get(self, i: usize) -> &'a AtomicU128 {
        #[cfg(not(tollgate_loom))]
        return &self.0[i];
        #[cfg(tollgate_loom)]
        return &self.0[i / 4].0[i % 4];
    }
}

/// Tables of more slot bytes than this (4 MiB, more than a core's share of the caches
/// here) are *large*: a lookup's loads there are cache misses, and it asks for the
/// second group's line before it reads the first's (see `scan_with`).
const LARGE_BYTES: usize = 4 << 20;

/// The fast path's report that the key's slot went to another key (see
/// `PackedTable::decide_found`).
const MOVED: usize = usize::MAX;
/// The fast path's report that the key is absent and its groups have no empty slot.
const FULL: usize = usize::MAX - 1;

/// A fixed-capacity table of packed states of the algorithm `A` (chosen once, at
/// build: its compare-and-swap loops hold no match on the algorithm).
pub(crate) struct PackedTable<A: PackedAlgorithm> {
    lines: Box<[Line]>,
    shards: Box<[CachePadded<Shard>]>,
    claims: ClaimLocks,
    counts: Stripes,
    geo: Geometry,
    /// Whether lookups prefetch the second group's slot (tables larger than
    /// [`LARGE_BYTES`]).
    large: bool,
    /// Each tier's parameters.
    params: Tiers<A>,
    on_full: OnFull,
    /// Whether the slots were advised onto huge pages (`machine::advise_huge_pages`).
    huge_pages: bool,
    /// The interval of each rate class the buckets' states are tagged with.
    rates: Rates,
}

impl<A: PackedAlgorithm> PackedTable<A> {
    /// The bytes a table of `geo` takes, computed before allocating; `None` when it
    /// exceeds the address space.
    pub(crate) fn bytes_for(geo: &Geometry, tiers: usize) -> Option<usize> {
        geo.slots()
            .div_ceil(4)
            .checked_mul(std::mem::size_of::<Line>())?
            .checked_add(Tiers::<A>::bytes(tiers))?
            .checked_add(Rates::BYTES)?
            .checked_add(geo.shards() * std::mem::size_of::<CachePadded<Shard>>())?
            .checked_add(ClaimLocks::bytes(geo.slots()))?
            .checked_add(Stripes::BYTES)
    }

    /// Allocates every slot, once.
    pub(crate) fn new(
        geo: Geometry,
        mut tiers: Vec<A>,
        on_full: OnFull,
        stats: bool,
    ) -> Result<Self, crate::error::ConfigError> {
        let rates = Rates::new(&mut tiers)?;
        let n = geo.slots().div_ceil(4);
        let mut lines = Vec::new();
        lines
            .try_reserve_exact(n)
            .map_err(|_| crate::error::ConfigError::InvalidCapacity {
                requested: geo.max_keys(),
                max: MAX_KEYS,
            })?;
        // Advised before the first write touches the pages (see `machine`).
        let huge_pages = advise_huge_pages(lines.spare_capacity_mut());
        lines
            .extend((0..n).map(|_| crate::sync::Line(std::array::from_fn(|_| AtomicU128::new(0)))));
        Ok(PackedTable {
            lines: lines.into_boxed_slice(),
            shards: new_shards(geo.shards()),
            claims: ClaimLocks::new(geo.slots()),
            counts: Stripes::new(stats),
            large: n * std::mem::size_of::<Line>() > LARGE_BYTES,
            huge_pages,
            geo,
            rates,
            params: Tiers::new(tiers),
            on_full,
        })
    }

    /// Bytes of the slots and shard metadata.
    pub(crate) fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.lines)
            + self.params.memory_bytes()
            + std::mem::size_of_val(&*self.shards)
            + ClaimLocks::bytes(self.geo.slots())
            + self.counts.memory_bytes()
            + Rates::BYTES
    }

    /// Whether the slots were advised onto huge pages.
    pub(crate) fn huge_pages(&self) -> bool {
        self.huge_pages
    }

    /// Slot `i`.
    #[inline]
    fn slot(&self, i: usize) -> &AtomicU128 {
        self.slots().get(i)
    }

    /// The slots, as a view to index many times: held in a local, its pointer and
    /// length stay in registers across the inline loads, which the compiler must
    /// assume write memory (reading them through `self` at every slot reloaded both:
    /// four instructions a slot, a tenth of a flood's lookup).
    #[inline(always)]
    fn slots(&self) -> Slots<'_> {
        // Loom's atomic word is not 16 bytes: its lines are indexed as lines.
        #[cfg(not(tollgate_loom))]
        return Slots(Line::flat(&self.lines));
        #[cfg(tollgate_loom)]
        return Slots(&self.lines);
    }

    /// Each tier's parameters.
    pub(crate) fn tiers(&self) -> &Tiers<A> {
        &self.params
    }

    /// The interval of each rate class (see `table::packed::rates`).
    pub(super) fn rates(&self) -> &Rates {
        &self.rates
    }

    /// Every slot word, in order.
    pub(super) fn slot_words(&self) -> impl Iterator<Item = &AtomicU128> {
        self.lines.iter().flat_map(|l| l.0.iter())
    }

    /// The decision counters (`stats`).
    pub(crate) fn counts(&self) -> &Stripes {
        &self.counts
    }

    /// The counters.
    pub(crate) fn totals(&self) -> Totals {
        totals(&self.counts)
    }

    /// `(occupied, active)`: slots holding a key, and those whose state is not idle.
    pub(crate) fn occupancy(&self, now: u64) -> (u64, u64) {
        let (mut occupied, mut active) = (0, 0);
        let params = self.params.get(0);
        for s in self.lines.iter().flat_map(|l| l.0.iter()) {
            let w = s.load(Ordering::Acquire);
            if fp_of(w) != 0 {
                occupied += 1;
                if !params.is_idle(state_of(w), now) {
                    active += 1;
                }
            }
        }
        (occupied, active)
    }

    /// `kw`, a state converted to another rate class, with a new generation taken from
    /// shard `shard`'s next epoch (as a reset takes one), and that epoch. Out of line:
    /// only a request of another tier's rate, or a rate retired, converts.
    #[cold]
    #[inline(never)]
    pub(super) fn regenerate(&self, kw: u64, shard: usize) -> (u64, u64) {
        let epoch = self.shards[shard].next_epoch();
        let class = generation::class_of(kw);
        (generation::word(kw, epoch, class), epoch)
    }

    /// The state of `word` as the bucket `rate` reads it at `now`, and the key word
    /// to write with a new state: a state another rate class wrote is converted (what
    /// the key owes carries over in requests: see `table::packed::rates`). Unchanged without a
    /// rate (the groups; reset and refunds, which keep the class).
    #[inline(always)]
    pub(super) fn adopt(&self, word: u128, rate: Option<Gcra>, now: u64) -> (u64, u64) {
        let (kw, state) = (fp_of(word), state_of(word));
        match rate {
            Some(g) if generation::class_of(kw) != g.class() => {
                let from = self.rates.interval(generation::class_of(kw));
                (
                    g.convert(state, from, now),
                    generation::with_class(kw, g.class()),
                )
            }
            _ => (state, kw),
        }
    }

    /// Steps the state of the key probed by `fp` in slot `i` (of shard `shard`) with
    /// `f`, starting from `word`, keeping the state's generation, unless it converts it
    /// to the bucket `rate`'s class (see [`adopt`](Self::adopt)): a converted state
    /// takes a new generation, so that no booking counted at the old rate gives
    /// anything back to it, even once converted back. The result, and the key word of
    /// the state it was computed on with the epoch its generation was taken from when
    /// it took one (0 when it kept its own). `None` when the slot no longer holds the
    /// key (the request must look the key up again).
    #[inline(always)]
    fn update<R>(
        &self,
        (i, shard): (usize, usize),
        fp: u64,
        mut word: u128,
        now: u64,
        (rate, denial_converts): (Option<Gcra>, bool),
        f: &mut impl FnMut(u64, u64) -> (Option<u64>, R),
    ) -> Option<(R, Stored)> {
        loop {
            let (state, kw) = self.adopt(word, rate, now);
            let (kw, installed) = if kw == fp_of(word) {
                (kw, 0)
            } else {
                self.regenerate(kw, shard)
            };
            let (next, r) = f(state, now);
            // A request under another rate class stores the conversion even when it
            // writes nothing else (a denial): the state is then the deciding quota's.
            // Not a refused reservation (`denial_converts` false): it changes nothing.
            let next = match next {
                Some(next) => next,
                None if kw == fp_of(word) || !denial_converts => {
                    let kept = Stored {
                        word: fp_of(word),
                        installed: 0,
                    };
                    return Some((r, kept));
                }
                None => state,
            };
            match self.slot(i).compare_exchange(
                word,
                pack(kw, next),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    return Some((
                        r,
                        Stored {
                            word: kw,
                            installed,
                        },
                    ))
                }
                Err(actual) if generation::holds(fp_of(actual), fp) => word = actual,
                Err(_) => return None,
            }
        }
    }
}

mod booked;
mod claim;
mod decide;
pub(crate) mod rates;
mod scan;
#[cfg(all(test, not(tollgate_loom)))]
mod tests;
