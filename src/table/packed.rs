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
//!   over).
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

use super::claim::{refusal, ClaimLocks, ClaimScan, OnFull};
use super::counters::{new_shards, totals, Shard, Stripes, Totals};
use super::generation::{self, MATCH_BITS};
use super::geometry::{Geometry, Location, MAX_CAPACITY};
use super::rates::Rates;
use super::tiers::Tiers;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::packed::{Classed, PackedAlgorithm, Step};
use crate::reservation::Origin;
use crate::sync::{lock, AtomicU128, Ordering};
use crate::Decision;
use crossbeam_utils::CachePadded;

/// The key word of a slot word (see `keyed::generation`: the key's tag and its
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
pub(crate) enum Placed<R> {
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

/// The outcome of a scan of a key's candidate groups.
enum Scan {
    Found(usize, u128),
    Absent { first_empty: Option<usize> },
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

impl Scan {
    /// The scan a fast path's miss (`PackedTable::decide_found`'s `Err`) reports, for the
    /// slow path to start from: `None` when the key's slot went to another key (the
    /// slow path scans again).
    fn resume(missed: usize) -> Option<Scan> {
        match missed {
            MOVED => None,
            FULL => Some(Scan::Absent { first_empty: None }),
            e => Some(Scan::Absent {
                first_empty: Some(e),
            }),
        }
    }
}

/// Four slots on one cache line, so that a group of 12 slots is 3 whole lines.
#[repr(align(64))]
struct Line([AtomicU128; 4]);

/// Tables of more slot bytes than this (4 MiB, more than a core's share of the caches
/// here) probe both candidate groups in pairs all the way: there a lookup's loads are
/// cache misses, and overlapping them hides one. Smaller tables probe the first pair
/// together and the rest one slot at a time (a slot a key rarely reaches is then not
/// loaded for nothing).
const PAIRED_BYTES: usize = 4 << 20;

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
    /// Whether lookups load both groups' slots in pairs (tables larger than
    /// [`PAIRED_BYTES`]) rather than one at a time.
    paired: bool,
    /// Each tier's parameters.
    params: Tiers<A>,
    on_full: OnFull,
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
    ) -> Result<Self, crate::ConfigError> {
        let rates = Rates::new(&mut tiers)?;
        let n = geo.slots().div_ceil(4);
        let mut lines = Vec::new();
        lines
            .try_reserve_exact(n)
            .map_err(|_| crate::ConfigError::InvalidCapacity {
                requested: geo.capacity(),
                max: MAX_CAPACITY,
            })?;
        lines.extend((0..n).map(|_| Line(std::array::from_fn(|_| AtomicU128::new(0)))));
        Ok(PackedTable {
            lines: lines.into_boxed_slice(),
            shards: new_shards(geo.shards()),
            claims: ClaimLocks::new(geo.slots()),
            counts: Stripes::new(stats),
            paired: n * std::mem::size_of::<Line>() > PAIRED_BYTES,
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

    /// Slot `i`.
    #[inline]
    fn slot(&self, i: usize) -> &AtomicU128 {
        &self.lines[i / 4].0[i % 4]
    }

    /// Each tier's parameters.
    pub(crate) fn tiers(&self) -> &Tiers<A> {
        &self.params
    }

    /// The interval of each rate class (see `keyed::rates`).
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
        totals(&self.shards, &self.counts)
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

    /// Scans the key's candidate groups in canonical order.
    #[inline(always)]
    fn scan(&self, fp: u64, loc: &Location) -> Scan {
        let [a, b] = loc.groups;
        let [mut ja, mut jb] = loc.starts;
        let group = self.geo.group();
        // The first empty slot ends the scan: the key is not further on (see the
        // protocol: a key sits at the first slot that was empty in its order when it
        // was installed, and slots never become empty again, so every slot before
        // it is occupied for good).
        let check = |i: usize, w: u128| -> Option<Scan> {
            match fp_of(w) {
                f if generation::holds(f, fp) => Some(Scan::Found(i, w)),
                0 => Some(Scan::Absent {
                    first_empty: Some(i),
                }),
                _ => None,
            }
        };
        // A pair of slots, one from each group, loaded together: the match is picked
        // without a branch on which of the two holds it. For a random key stream that
        // branch went either way at random, a mispredicted jump on most decisions. The
        // test "either is the key" is written as "the smaller difference is zero",
        // which the compiler keeps as one branch (`hit_a | hit_b` became two). The key
        // is in at most one of them.
        let pair = |(ia, wa): (usize, u128), (ib, wb): (usize, u128)| -> Option<Scan> {
            if ((fp_of(wa) | MATCH_BITS) ^ fp).min((fp_of(wb) | MATCH_BITS) ^ fp) == 0 {
                let (i, w) = if generation::holds(fp_of(wa), fp) {
                    (ia, wa)
                } else {
                    (ib, wb)
                };
                return Some(Scan::Found(i, w));
            }
            check(ia, wa).or_else(|| check(ib, wb))
        };
        // The order of `Location::probe`, written out so it compiles to tight loops.
        if a == b {
            for _ in 0..group {
                let i = a + ja;
                if let Some(found) = check(i, self.slot(i).load(Ordering::Acquire)) {
                    return found;
                }
                ja = if ja + 1 == group { 0 } else { ja + 1 };
            }
        } else if self.paired {
            // A table larger than the caches: pairs all the way, so that the two
            // cache misses of each pair overlap instead of following each other.
            for _ in 0..group {
                let (ia, ib) = (a + ja, b + jb);
                let wa = self.slot(ia).load(Ordering::Acquire);
                // An empty slot of the first group ends the scan before the second
                // group's slot is read: it comes first in the key's order. A table
                // filling up (a random stream of new keys) then pays one cache miss per
                // key instead of two (first fill of 1,000,000 keys: 174 -> 113 ns per
                // decision); on a table of present keys the branch is never taken and
                // the second load still issues alongside the first.
                if fp_of(wa) == 0 {
                    return Scan::Absent {
                        first_empty: Some(ia),
                    };
                }
                let wb = self.slot(ib).load(Ordering::Acquire);
                if let Some(done) = pair((ia, wa), (ib, wb)) {
                    return done;
                }
                ja = if ja + 1 == group { 0 } else { ja + 1 };
                jb = if jb + 1 == group { 0 } else { jb + 1 };
            }
        } else {
            // A table the caches hold: the first pair (where about nine keys in ten
            // sit) together, the rest one slot at a time.
            let (ia, ib) = (a + ja, b + jb);
            let wa = self.slot(ia).load(Ordering::Acquire);
            let wb = self.slot(ib).load(Ordering::Acquire);
            if let Some(done) = pair((ia, wa), (ib, wb)) {
                return done;
            }
            ja = if ja + 1 == group { 0 } else { ja + 1 };
            jb = if jb + 1 == group { 0 } else { jb + 1 };
            for _ in 1..group {
                let (ia, ib) = (a + ja, b + jb);
                if let Some(found) = check(ia, self.slot(ia).load(Ordering::Acquire)) {
                    return found;
                }
                if let Some(found) = check(ib, self.slot(ib).load(Ordering::Acquire)) {
                    return found;
                }
                ja = if ja + 1 == group { 0 } else { ja + 1 };
                jb = if jb + 1 == group { 0 } else { jb + 1 };
            }
        }
        Scan::Absent { first_empty: None }
    }

    /// The state of `word` as the bucket `rate` reads it at `now`, and the key word
    /// to write with a new state: a state another rate class wrote is converted (what
    /// the key owes carries over in requests: see `keyed::rates`). Unchanged without a
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

    /// Steps the state of the key probed by `fp` in slot `i` with `f`, starting from
    /// `word`, keeping the state's generation (and converting it to the bucket `rate`'s
    /// class, see [`adopt`](Self::adopt)): the result, and the key word of the state it
    /// was computed on. `None` when the slot no longer holds the key (the request must
    /// look the key up again).
    #[inline(always)]
    fn update<R>(
        &self,
        i: usize,
        fp: u64,
        mut word: u128,
        now: u64,
        rate: Option<Gcra>,
        f: &mut impl FnMut(u64, u64) -> (Option<u64>, R),
    ) -> Option<(R, u64)> {
        loop {
            let (state, kw) = self.adopt(word, rate, now);
            let (next, r) = f(state, now);
            // A request under another rate class stores the conversion even when it
            // writes nothing else (a denial): the state is then the deciding quota's.
            let next = match next {
                Some(next) => next,
                None if kw == fp_of(word) => return Some((r, kw)),
                None => state,
            };
            match self.slot(i).compare_exchange(
                word,
                pack(kw, next),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some((r, kw)),
                Err(actual) if generation::holds(fp_of(actual), fp) => word = actual,
                Err(_) => return None,
            }
        }
    }

    /// One decision for the key hashed to `h` under `params` (one tier's, read once by
    /// the caller), at `now()` (re-read when the request has to start over), for
    /// `cost <= capacity`.
    #[inline]
    pub(crate) fn decide(&self, h: u64, now: impl Fn() -> u64, cost: u32, params: A) -> Decision {
        // The fast path: the key is present and its slot keeps it. The loop computes
        // only the next state; the decision is computed once, from the state the
        // winning compare-and-swap replaced (the step is pure). Carrying the 40-byte
        // decision through the loop kept it in memory and stalled store forwarding
        // (39 ns instead of 28 ns per keyed check).
        // The table is generic over the algorithm, so the loop holds only its values;
        // a bucket in a table of several rates compares classes on a hit (`Classed`).
        let hit = match params.gcra().filter(Gcra::mixed) {
            Some(g) => self.decide_found(h, &now, cost, Classed(g)),
            None => self.decide_found(h, &now, cost, params),
        };
        match hit {
            Ok(d) => d,
            Err(missed) => self.decide_slow(h, now, cost, params, Scan::resume(missed)),
        }
    }

    /// The fast path of [`decide`](Self::decide): the key is present and its slot keeps
    /// it, or it is new and takes the empty slot its scan ended at. Otherwise `Err`: the
    /// first empty slot of the scan that found the key absent
    /// (for the slow path to start from), [`FULL`] when that scan met no empty slot, or
    /// [`MOVED`] when the key's slot went to another key.
    #[inline(always)]
    fn decide_found(
        &self,
        h: u64,
        now: &impl Fn() -> u64,
        cost: u32,
        step: impl Step,
    ) -> Result<Decision, usize> {
        let fp = generation::probe_word(h);
        let loc = self.geo.locate(h);
        // The clock is read once, before the lookup (as the protocol has it): its
        // latency then overlaps the scan's loads instead of following them, and the
        // calls of the scan do not have to preserve the reading's inputs (a keyed hit
        // at 1,000 keys: 26.1 ns with the reading after the scan, 24.8 ns before).
        let t = now();
        let (i, mut word) = match self.scan(fp, &loc) {
            Scan::Found(i, word) => (i, word),
            Scan::Absent {
                first_empty: Some(e),
            } if cost > 0 => {
                // A new key and an empty slot (a table filling up): `run_from`'s claim of
                // an empty slot, here without its generic machinery. The reading (a
                // fresh one: reusing `t` here made the hit path's code slower by a
                // nanosecond) is never older than a reclaim in the shard (the floor of
                // the protocol, read after the scan); a lost race goes the whole way
                // round.
                let shard = &self.shards[loc.shard];
                let t = shard.floor(now());
                let Some(next) = step.next_state(0, t, cost) else {
                    return Err(e);
                };
                let class = step.class().unwrap_or(0);
                return match self.slot(e).compare_exchange(
                    0,
                    pack(generation::word(fp, shard.epoch(), class), next),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        let d = step.decision(0, t, cost);
                        self.counts.count(cost, &d);
                        Ok(d)
                    }
                    Err(_) => Err(MOVED),
                };
            }
            Scan::Absent { first_empty } => return Err(first_empty.unwrap_or(FULL)),
        };
        let slot = self.slot(i);
        // A state another rate class wrote is converted on the slow path (checked
        // again when a compare-and-swap fails).
        let foreign = |word: u128| {
            step.class()
                .is_some_and(|class| generation::class_of(fp_of(word)) != class)
        };
        if foreign(word) {
            return Err(MOVED);
        }
        loop {
            let state = state_of(word);
            let Some(next) = step.next_state(state, t, cost) else {
                let d = step.decision(state, t, cost);
                if !d.is_allowed() && step.ahead(state, t) {
                    // Denied only in a window later than the reading's: the slow path
                    // decides again at a fresh reading (see `Step::ahead`).
                    return Err(MOVED);
                }
                self.counts.count(cost, &d);
                return Ok(d);
            };
            match slot.compare_exchange(
                word,
                pack(fp_of(word), next),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    let d = step.decision(state, t, cost);
                    self.counts.count(cost, &d);
                    return Ok(d);
                }
                Err(actual) if generation::holds(fp_of(actual), fp) && !foreign(actual) => {
                    word = actual
                }
                // The slot went to another key (or another rate class wrote it): the
                // full protocol.
                Err(_) => return Err(MOVED),
            }
        }
    }

    /// The rest of [`decide`](Self::decide), out of line so that the fast path keeps
    /// its few values in registers: a key absent or moved goes through the whole
    /// protocol (insert, reclaim, the reading floor).
    #[inline(never)]
    #[cold]
    fn decide_slow(
        &self,
        h: u64,
        now: impl Fn() -> u64,
        cost: u32,
        params: A,
        absent: Option<Scan>,
    ) -> Decision {
        let rate = params.gcra();
        let (placed, _) = self.run_from(absent, h, now, cost > 0, rate, |state, t| {
            (params.next_state(state, t, cost), (state, t))
        });
        let d = match placed {
            // A peek (cost 0) at an absent key: it decides as fresh, uncounted.
            Placed::Absent((state, t)) => return params.decision(state, t, cost),
            Placed::Stored((state, t)) | Placed::Untracked((state, t)) => {
                params.decision(state, t, cost)
            }
            // Refused under the deciding tier's policy (the table's is tier 0's).
            Placed::Refused(d) => d.with_policy(params.limit(), params.capacity()),
        };
        self.counts.count(cost, &d);
        d
    }

    /// Runs the transition `f(state, now) -> (new state or None, result)` on the key
    /// hashed to `h`, inside the table's protocol (lock-free lookup and update, claims
    /// of empty slots, locked reclaims, the reclaim-race floor on readings). A missing
    /// key is inserted only if `insert` and `f` writes a state for it; otherwise `f`
    /// is run on the fresh state `0` and nothing is written ([`Placed::Absent`]).
    /// `f` may run several times under contention, so it must be pure.
    ///
    /// Also returns what identifies the state the transition was stored on
    /// ([`Origin::Slot`]; see `keyed::generation`), for a later
    /// [`refund`](Self::refund).
    pub(crate) fn run_booked<R>(
        &self,
        h: u64,
        now: impl Fn() -> u64,
        insert: bool,
        rate: Option<Gcra>,
        f: impl FnMut(u64, u64) -> (Option<u64>, R),
    ) -> (Placed<R>, Origin) {
        // Read before the state is loaded: every later event on the key numbers above it.
        let epoch = self.shards[self.geo.locate(h).shard].epoch();
        let (placed, word) = self.run_from(None, h, now, insert, rate, f);
        let (gen, class) = (generation::of(word), generation::class_of(word));
        (placed, Origin::Slot { gen, class, epoch })
    }

    /// Applies `f(state, now)` to the key hashed to `h` only while its state is the
    /// one `origin` (from [`run_booked`](Self::run_booked)) identifies: nothing when
    /// the key is gone, or was reset, reclaimed or evicted since (see
    /// `keyed::generation`).
    pub(crate) fn refund(
        &self,
        h: u64,
        origin: Origin,
        now: u64,
        mut f: impl FnMut(u64, u64) -> Option<u64>,
    ) {
        let Origin::Slot { gen, class, epoch } = origin else {
            return;
        };
        let fp = generation::probe_word(h);
        let loc = self.geo.locate(h);
        let Scan::Found(i, mut word) = self.scan(fp, &loc) else {
            return;
        };
        let shard = &self.shards[loc.shard];
        loop {
            let kw = fp_of(word);
            if generation::of(kw) != gen
                || generation::class_of(kw) != class
                || !generation::within(gen, epoch, shard.epoch())
            {
                return;
            }
            let Some(next) = f(state_of(word), now) else {
                return;
            };
            match self.slot(i).compare_exchange(
                word,
                pack(fp_of(word), next),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(actual) if generation::holds(fp_of(actual), fp) => word = actual,
                Err(_) => return,
            }
        }
    }

    /// Gives the key hashed to `h` a fresh state (`0`) of a new generation, so that no
    /// booking made before gives anything to it. `false` when the table does not hold
    /// the key.
    pub(crate) fn reset(&self, h: u64) -> bool {
        let fp = generation::probe_word(h);
        let loc = self.geo.locate(h);
        let shard = &self.shards[loc.shard];
        let Scan::Found(i, mut word) = self.scan(fp, &loc) else {
            return false;
        };
        loop {
            // The next epoch is taken after loading the word it replaces.
            let class = generation::class_of(fp_of(word));
            let fresh = pack(generation::word(fp, shard.next_epoch(), class), 0);
            match self
                .slot(i)
                .compare_exchange(word, fresh, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(actual) if generation::holds(fp_of(actual), fp) => word = actual,
                Err(_) => return false,
            }
        }
    }

    /// [`run_booked`](Self::run_booked), starting from `first`, a scan of the key's groups the
    /// caller made (before or after this function's reading, either is sound: a missing
    /// key's reading is floored by the reclaim stamp read after the scan, and a found
    /// key's state decides any reading, a stale one only more strictly).
    #[inline(always)]
    fn run_from<R>(
        &self,
        mut first: Option<Scan>,
        h: u64,
        now: impl Fn() -> u64,
        insert: bool,
        rate: Option<Gcra>,
        mut f: impl FnMut(u64, u64) -> (Option<u64>, R),
    ) -> (Placed<R>, u64) {
        let mut key_word = 0;
        let fp = generation::probe_word(h);
        let loc = self.geo.locate(h);
        let mut t = now();
        loop {
            let scan = match first.take() {
                Some(scan) => scan,
                None => self.scan(fp, &loc),
            };
            match scan {
                Scan::Found(i, w) => {
                    if let Some((r, kw)) = self.update(i, fp, w, t, rate, &mut f) {
                        return (Placed::Stored(r), kw);
                    }
                }
                Scan::Absent { first_empty } => {
                    // Never decide a missing key at a reading older than a reclaim in
                    // its shard: its old entry may have been reclaimed at that reading.
                    t = self.shards[loc.shard].floor(t);
                    let (next, r) = f(0, t);
                    let Some(next) = next.filter(|_| insert) else {
                        return (Placed::Absent(r), 0);
                    };
                    if let Some(e) = first_empty {
                        let class = rate.map_or(0, |g| g.class());
                        let kw = generation::word(fp, self.shards[loc.shard].epoch(), class);
                        if self
                            .slot(e)
                            .compare_exchange(
                                0,
                                pack(kw, next),
                                Ordering::AcqRel,
                                Ordering::Acquire,
                            )
                            .is_ok()
                        {
                            return (Placed::Stored(r), kw);
                        }
                    } else if let Some(placed) =
                        self.claim(fp, &loc, t, rate, &mut key_word, &mut f)
                    {
                        return (placed, key_word);
                    }
                }
            }
            // Lost a race: the slot changed under us. Start over with a fresh reading
            // (never older than the one we had).
            t = t.max(now());
        }
    }

    /// The decision for `cost` (at least 1) for the key hashed to `h` at `now`,
    /// writing and inserting nothing.
    pub(crate) fn peek(&self, h: u64, now: u64, cost: u32, params: A) -> Decision {
        let fp = generation::probe_word(h);
        let loc = self.geo.locate(h);
        match self.scan(fp, &loc) {
            Scan::Found(_, w) => params.decision(self.adopt(w, params.gcra(), now).0, now, cost),
            // A missing key is decided as fresh, at no older reading than a reclaim
            // (as `decide` would).
            Scan::Absent { .. } => {
                let now = self.shards[loc.shard].floor(now);
                params.decision(0, now, cost)
            }
        }
    }

    /// The claim of a full pair of groups (no empty slot, the key absent). Under
    /// `Deny` and `Allow` a pass without the lock first checks whether any entry is
    /// idle at `now`: when none is, nothing can be claimed and the new key is refused
    /// or admitted untracked with no lock taken (a flood of new keys into a table of
    /// live keys then costs two passes over the key's groups and no locked
    /// instruction). Otherwise, and always under `Evict`, [`claim_locked`](Self::claim_locked).
    ///
    /// The lock-free answer is what the locked claim would have answered at `now`:
    /// the pass saw every slot of the key's groups hold another key's live entry. A
    /// concurrent claim of the same key can only take a slot that is idle at its own
    /// (later) reading; if the pass read that slot before the claim's install, it held
    /// an entry live at `now`, so at `now` the key had no room, and the refusal (or the
    /// untracked admission) is ordered before that claim. If the pass read it after,
    /// it saw the key and the request starts over. No state is written either way, so
    /// a key is still never installed twice (model-checked in `loom-tests`).
    fn claim<R>(
        &self,
        fp: u64,
        loc: &Location,
        now: u64,
        rate: Option<Gcra>,
        key_word: &mut u64,
        f: &mut impl FnMut(u64, u64) -> (Option<u64>, R),
    ) -> Option<Placed<R>> {
        if self.on_full == OnFull::Evict {
            return self.claim_locked(fp, loc, now, rate, key_word, f);
        }
        let params = self.params.get(0);
        let survey = self.survey(fp, loc, now, |s| params.idle_at(s));
        let soonest = match survey {
            // Inserted meanwhile: start over (the scan will find it).
            Survey::Found => return None,
            // Something may be claimed: the locked claim decides what.
            Survey::Free => return self.claim_locked(fp, loc, now, rate, key_word, f),
            Survey::Live { soonest } => soonest,
        };
        let (next, fresh) = f(0, now);
        if next.is_none() {
            return Some(Placed::Absent(fresh));
        }
        let shard = &self.shards[loc.shard];
        Some(match self.on_full {
            OnFull::Allow => {
                Shard::bump(&shard.untracked);
                Placed::Untracked(fresh)
            }
            _ => {
                Shard::bump(&shard.refused);
                Placed::Refused(
                    refusal(params.capacity(), Some(soonest), now).with_limit(params.limit()),
                )
            }
        })
    }

    /// One pass over the key's groups without the lock, for [`claim`](Self::claim).
    #[inline(always)]
    fn survey(&self, fp: u64, loc: &Location, now: u64, idle_at: impl Fn(u64) -> u64) -> Survey {
        let group = self.geo.group();
        let [a, b] = loc.groups;
        let mut soonest = u64::MAX;
        for base in if a == b {
            &loc.groups[..1]
        } else {
            &loc.groups[..]
        } {
            for i in *base..*base + group {
                let w = self.slot(i).load(Ordering::Acquire);
                if generation::holds(fp_of(w), fp) {
                    return Survey::Found;
                }
                let at = idle_at(state_of(w));
                if fp_of(w) == 0 || at <= now {
                    return Survey::Free;
                }
                soonest = soonest.min(at);
            }
        }
        Survey::Live { soonest }
    }

    /// The claim of a full pair of groups, under the key's claim lock: rescan, then
    /// reclaim an idle entry, or apply the `OnFull` policy. `None` when a CAS lost a
    /// race and the whole request should start over.
    fn claim_locked<R>(
        &self,
        fp: u64,
        loc: &Location,
        now: u64,
        rate: Option<Gcra>,
        key_word: &mut u64,
        f: &mut impl FnMut(u64, u64) -> (Option<u64>, R),
    ) -> Option<Placed<R>> {
        let shard = &self.shards[loc.shard];
        let _guard = lock(self.claims.of(fp));
        let params = self.params.get(0);
        // A reclaim may have happened since the caller's scan.
        let now = shard.floor(now);
        let mut scan = ClaimScan::new();
        let reading = params.reading(now);
        // In a table of several bucket rates, what each entry used is compared in
        // requests: its debt converted into tier 0's interval (an idle state stays idle).
        let mixed = params.gcra().filter(Gcra::mixed);
        let group = self.geo.group();
        let [a, b] = loc.groups;
        let count = if a == b { 1 } else { 2 };
        // Each group in the key's order from its start offset (what `ClaimScan`
        // needs: each group's first free slot in that order, its live entries, and the
        // entry that has used least); one group after the other, a tighter loop than
        // the interleaved `Location::probe`.
        for wi in 0..count {
            let (base, start) = (loc.groups[wi], loc.starts[wi]);
            let mut j = start;
            for _ in 0..group {
                let i = base + j;
                j = if j + 1 == group { 0 } else { j + 1 };
                let w = self.slot(i).load(Ordering::Acquire);
                let fw = fp_of(w);
                if generation::holds(fw, fp) {
                    // Inserted meanwhile (claims of this key are serialized by this
                    // lock, or were an empty-slot claim that finished before).
                    return self.update(i, fp, w, now, rate, f).map(|(r, kw)| {
                        *key_word = kw;
                        Placed::Stored(r)
                    });
                }
                // O(1) per entry, no step: the state is its own idle stamp, and its
                // own eviction rank.
                let state = match mixed {
                    Some(g) => g.convert(
                        state_of(w),
                        self.rates.interval(generation::class_of(fw)),
                        now,
                    ),
                    None => state_of(w),
                };
                let (idle_at, rank) = params.rank(state, &reading);
                if fw == 0 || idle_at <= now {
                    scan.free(wi, (i, w));
                } else {
                    scan.live(wi);
                    scan.rank((i, w), rank, idle_at);
                }
            }
        }
        let (next, fresh) = f(0, now);
        let Some(next) = next else {
            // The transition writes nothing for a fresh key after all.
            return Some(Placed::Absent(fresh));
        };
        // A new generation, taken after the scan loaded the entries it may replace.
        let kw = generation::word(fp, shard.next_epoch(), rate.map_or(0, |g| g.class()));
        *key_word = kw;
        let install = |(i, old): (usize, u128)| {
            self.slot(i)
                .compare_exchange(old, pack(kw, next), Ordering::AcqRel, Ordering::Acquire)
                .ok()
        };
        if let Some(target) = scan.target() {
            if fp_of(target.1) != 0 {
                shard.stamp(now);
            }
            install(target)?;
            if fp_of(target.1) != 0 {
                Shard::bump(&shard.idle_reclaims);
            }
            return Some(Placed::Stored(fresh));
        }
        match self.on_full {
            OnFull::Evict => {
                let victim = scan.victim()?;
                shard.stamp(now);
                install(victim)?;
                Shard::bump(&shard.evictions);
                Some(Placed::Stored(fresh))
            }
            OnFull::Deny => {
                Shard::bump(&shard.refused);
                Some(Placed::Refused(
                    scan.refusal(params.capacity(), now)
                        .with_limit(params.limit()),
                ))
            }
            OnFull::Allow => {
                Shard::bump(&shard.untracked);
                Some(Placed::Untracked(fresh))
            }
        }
    }
}

#[cfg(all(test, not(tollgate_loom)))]
mod tests {
    use super::*;
    use crate::algorithm::{Algorithm, Params};
    use crate::Quota;

    const SECOND: u64 = 1_000_000_000;

    /// The token bucket's parameters for `quota`.
    fn token_bucket(quota: Quota) -> Gcra {
        match Params::new(Algorithm::TokenBucket, quota).unwrap() {
            Params::Packed(p) => Gcra::from_params(p).expect("the token bucket's parameters"),
            Params::Log(_) => unreachable!("the token bucket is packed"),
        }
    }

    /// A hash whose two groups are `groups` (slot indices of their first slots).
    fn hash_for(geo: &Geometry, groups: [usize; 2], seed: &mut u64) -> u64 {
        loop {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            if geo.locate(*seed).groups == groups {
                return *seed;
            }
        }
    }

    /// A key's request in flight across a reclaim of its own slot, when its other
    /// group has an empty slot: the key is found missing, and the insert into the
    /// empty slot (the fast path's, not the locked claim's) must still decide it no
    /// earlier than the reclaim. Key A (groups 0 and 24) spends its burst at 10 s and
    /// is idle from 11 s; 23 keys fill groups 0 and 12 at 10.9 s; C (groups 0 and
    /// 12) reclaims A's slot at 11 s; then A's request read at 10.5 s arrives, and A
    /// is drained at 11 s. A single bucket fed A's readings in order admits 4; deciding
    /// the in-flight request at 10.5 s as a fresh key admits 5.
    #[test]
    fn an_insert_into_an_empty_slot_never_decides_before_a_reclaim() {
        let geo = Geometry::new(17, Some(1)).unwrap();
        assert_eq!((geo.slots(), geo.group()), (36, 12));
        let p = token_bucket(Quota::per_second(2));
        let table = PackedTable::new(geo, vec![p], OnFull::Deny, true).unwrap();
        let mut seed = 0x2545_f491_4f6c_dd1d;
        let a = hash_for(&geo, [0, 24], &mut seed);
        let c = hash_for(&geo, [0, 12], &mut seed);
        let decide = |h: u64, t: u64, cost: u32| table.decide(h, || t, cost, p).is_allowed();
        let mut admitted = 0;
        assert!(decide(a, 10 * SECOND, 2));
        admitted += 2;
        // Fill every other slot of groups 0 and 12 with keys live until 11.4 s.
        let mut fillers = 0;
        while fillers < 23 {
            let h = hash_for(&geo, [[0, 12], [12, 0]][fillers % 2], &mut seed);
            assert!(decide(h, 10_900_000_000, 1), "filler {fillers}");
            fillers += 1;
        }
        // C finds both its groups full and only A idle: it takes A's slot.
        assert!(decide(c, 11 * SECOND, 1));
        assert_eq!(table.totals().idle_reclaims, 1);
        // A's request that read the clock at 10.5 s, before the reclaim.
        admitted += u32::from(decide(a, 10_500_000_000, 1));
        while admitted < 10 && decide(a, 11 * SECOND, 1) {
            admitted += 1;
        }
        assert_eq!(admitted, 4);
    }

    /// A table larger than the caches, scanned in pairs with the first group's empty
    /// slot ending the scan: every key of a random stream filling it to `max_keys` is
    /// installed once and found again (its second request, at a quota of one per
    /// hour, is denied; a key installed twice would be admitted afresh).
    #[test]
    fn a_paired_table_finds_every_key_it_installed_once() {
        const KEYS: usize = 200_000;
        let geo = Geometry::new(KEYS, None).unwrap();
        let p = token_bucket(Quota::per_hour(1));
        let table = PackedTable::new(geo, vec![p], OnFull::Deny, true).unwrap();
        assert!(table.paired);
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let keys: Vec<u64> = (0..KEYS)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            })
            .collect();
        let decide = |h: u64| table.decide(h, || SECOND, 1, p);
        let refused = keys.iter().filter(|&&h| !decide(h).is_allowed()).count();
        // Two-choice placement refuses a few keys in 10,000 at exactly `max_keys`.
        assert!(refused < KEYS / 1000, "{refused} refused");
        let admitted_again = keys.iter().filter(|&&h| decide(h).is_allowed()).count();
        assert_eq!(admitted_again, 0);
        assert_eq!(table.occupancy(SECOND).0, (KEYS - refused) as u64);
    }
}
