//! A packed table's control words: one 10-bit *lane* per slot, six lanes to an
//! `AtomicU64`, two words per group of up to 12 slots (16 bytes per group, 1.33 bytes
//! per slot), so that a lookup compares a whole group's lanes with the key's lane tag
//! a word at a time (SWAR) and loads a 16-byte slot only where its lane may hold the
//! key.
//!
//! ```text
//!  63  60 59      50 49      40     19       10 9        0
//! +------+----------+----------+ .. +----------+----------+
//! | zero |  lane 5  |  lane 4  |    |  lane 1  |  lane 0  |   word 0: slots 0..6
//! +------+----------+----------+ .. +----------+----------+   word 1: slots 6..12
//! ```
//!
//! A lane is [`EMPTY`] (0), [`WILD`] (1), or a key's *lane tag* (2 to 1,023, mixed from
//! the 44-bit tag of its key word: [`tag_of`]).
//!
//! # The protocol: the slot word stays the authority, a lane is a hint
//!
//! The invariant: **while a slot holds key `J`, its lane is `EMPTY`, `WILD` or `J`'s
//! lane tag**, never another key's. So a lookup of `K` may skip every slot whose lane
//! holds another tag: at the lane's read that slot held another key (and was
//! occupied: a lane leaves `EMPTY` only after its slot was filled, and slots never
//! become empty again), exactly what reading the slot would have told it. Every other
//! slot (its lane `EMPTY`, `WILD` or `K`'s tag) is read and compared in full, so a lane
//! never causes a false miss, nor a false hit. The transitions that keep it:
//!
//! * **claim of an empty slot** (lock-free): the slot's compare-and-swap `0 → K` first,
//!   then *publish*: the lane `EMPTY → tag(K)`, only if it is still `EMPTY`. A tag is
//!   never written before its slot: a claim that lost the slot would leave its tag on
//!   another key's slot. While unpublished the lane is `EMPTY`, which lookups read
//!   through. If the lane is no longer `EMPTY`, a replacing claim took it (below) and
//!   writes the slot's own tag when it is done.
//! * **claim of an occupied slot** (reclaim, eviction: under the new key's claim lock,
//!   but claims of other keys may target the same slot): *own* the lane (`tag(old)` or
//!   `EMPTY → WILD` in one compare-and-swap; if it is `WILD` another claim owns it, and
//!   if it holds another tag the slot changed since it was ranked: either way the
//!   request starts over), then the slot's compare-and-swap `old → K`, then *release*:
//!   `WILD → ` the tag of what the slot now holds (`K`'s when the swap won, the old
//!   key's when its state moved meanwhile: only the lane's owner changes the key of
//!   an occupied slot). While `WILD` the slot's key may change, and lookups read it.
//!   Owning the lane serializes the claims that replace one slot, so a slow claim can
//!   never write a stale tag over a later claim's (each would otherwise publish the
//!   key its own swap saw).
//!
//! State updates, resets and rate conversions keep the key's tag, so they never touch
//! the lanes. A lane's word is shared by six slots, so its writes are compare-and-swap
//! loops over the word (a claim's, never a hit's).

use super::PackedTable;
use crate::algorithm::packed::PackedAlgorithm;
use crate::sync::{spin_loop, AtomicU64, Ordering};
use crate::table::geometry::GROUP;

/// Bits per lane.
const LANE_BITS: u32 = 10;
/// Lanes per control word.
const LANES: usize = 6;
/// The lane of a slot never yet claimed.
const EMPTY: u64 = 0;
/// The lane of a slot a replacing claim owns: read the slot.
const WILD: u64 = 1;
/// One lane's bits.
const LANE: u64 = (1 << LANE_BITS) - 1;

/// Bit 0 of each lane.
const LO: u64 = {
    let mut lo = 0;
    let mut k = 0;
    while k < LANES {
        lo |= 1 << (k as u32 * LANE_BITS);
        k += 1;
    }
    lo
};
/// The top bit of each lane.
const HI: u64 = LO << (LANE_BITS - 1);
/// The low nine bits of each lane.
const LOW: u64 = LO * (LANE >> 1);
/// Gathers the top bits of the six lanes (shifted down to bit `10k`) into bits
/// 50..56: lane `k`'s bit times `2^(50 − 9k)` lands on bit `50 + k`, and every other
/// product on a bit of its own outside 50..56 (no carries).
const GATHER: u64 = {
    let mut g = 0;
    let mut k = 0;
    while k < LANES {
        g |= 1 << (50 - 9 * k as u32);
        k += 1;
    }
    g
};

/// The lane tag of a key word (or probe word): the 44-bit tag mixed down to 10 bits,
/// never `EMPTY` nor `WILD`. Mixed rather than cut, since the bits that pick the
/// group and the shard are the same for every key of a group.
#[inline(always)]
pub(super) fn tag_of(kw: u64) -> u64 {
    let t = (kw >> 20).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - LANE_BITS);
    if t <= WILD {
        t + 2
    } else {
        t
    }
}

/// The lanes of `w` equal to zero, as their top bits (exact: no borrow crosses lanes).
#[inline(always)]
fn zero_lanes(w: u64) -> u64 {
    !(((w & LOW) + LOW) | w) & HI
}

/// Which of the six lanes of `w` may hold the key of lane tag `tag` (`tag`, `EMPTY`
/// or `WILD`), as bits 0..6.
#[inline(always)]
fn matches(w: u64, tag: u64) -> u32 {
    let z = zero_lanes(w ^ (tag * LO)) | zero_lanes(w & !LO);
    (((z >> (LANE_BITS - 1)).wrapping_mul(GATHER) >> 50) & 0x3F) as u32
}

/// One group's control words, on one cache line.
#[repr(align(16))]
struct Words([AtomicU64; 2]);

/// The control words of a table (see the module docs).
pub(super) struct Control {
    groups: Box<[Words]>,
    group: usize,
}

impl Control {
    /// The control words of `slots` slots in groups of `group` (every lane `EMPTY`).
    pub(super) fn new(slots: usize, group: usize) -> Self {
        let groups = (0..slots / group)
            .map(|_| Words([AtomicU64::new(0), AtomicU64::new(0)]))
            .collect();
        Control { groups, group }
    }

    /// The group of slot `i` and its lane there (a division by a constant in every
    /// table but the smallest).
    #[inline(always)]
    fn split(&self, i: usize) -> (usize, usize) {
        if self.group == GROUP {
            (i / GROUP, i % GROUP)
        } else {
            (i / self.group, i % self.group)
        }
    }

    /// Bytes of the control words of `slots` slots in groups of `group`.
    pub(super) fn bytes(slots: usize, group: usize) -> usize {
        slots / group * std::mem::size_of::<Words>()
    }

    /// The slots of the group starting at slot `base` whose lanes may hold the key of
    /// lane tag `tag`, as bits `0..group` in the group's order rotated to start at
    /// `start` (bit `k` is slot `base + (start + k) mod group`).
    #[inline(always)]
    pub(super) fn candidates(&self, base: usize, start: usize, tag: u64) -> u32 {
        let words = &self.groups[self.split(base).0].0;
        let m = matches(words[0].load(Ordering::SeqCst), tag)
            | matches(words[1].load(Ordering::SeqCst), tag) << LANES;
        let full = (1u32 << self.group) - 1;
        let m = m & full;
        ((m >> start) | (m << (self.group - start))) & full
    }

    /// Slot `i`'s control word and its lane's shift.
    #[inline(always)]
    fn lane(&self, i: usize) -> (&AtomicU64, u32) {
        let (g, j) = self.split(i);
        let high = j >= LANES;
        let k = if high { j - LANES } else { j };
        (&self.groups[g].0[usize::from(high)], k as u32 * LANE_BITS)
    }

    /// Sets slot `i`'s lane to `to` if `ok(lane)`; whether it did.
    #[inline]
    fn swap_if(&self, i: usize, ok: impl Fn(u64) -> bool, to: u64) -> bool {
        let (word, shift) = self.lane(i);
        let mut w = word.load(Ordering::SeqCst);
        loop {
            if !ok((w >> shift) & LANE) {
                return false;
            }
            let next = (w & !(LANE << shift)) | (to << shift);
            match word.compare_exchange(w, next, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return true,
                Err(actual) => w = actual,
            }
        }
    }

    /// Publishes `tag`, the tag of the key a scan read in slot `i` while its lane was
    /// `EMPTY`, unless the lane left `EMPTY` meanwhile. Sound without a lock: a key
    /// leaves an occupied slot only through a replacing claim, which first takes the
    /// lane out of `EMPTY` (so this compare-and-swap then fails); a lane still `EMPTY`
    /// means the slot still holds the key read. Publishing is left to the scans that
    /// read a slot past the first two pairs (lazily: an empty slot's claim writes its
    /// slot only, which kept a table's first fill at one cache line per new key).
    /// Out of line: the fast path inlines an empty slot's claim.
    #[inline(never)]
    pub(super) fn publish(&self, i: usize, tag: u64) {
        self.swap_if(i, |l| l == EMPTY, tag);
    }

    /// Takes slot `i`'s lane for a replacing claim of the slot's entry of lane tag
    /// `old`: `false` when another claim owns it or the slot changed.
    #[inline]
    pub(super) fn own(&self, i: usize, old: u64) -> bool {
        self.swap_if(i, |l| l == EMPTY || l == old, WILD)
    }

    /// Gives back an owned lane with the tag of what slot `i` now holds (only the
    /// owner writes an owned lane, so one exclusive-or does it).
    #[inline]
    pub(super) fn release(&self, i: usize, tag: u64) {
        let (word, shift) = self.lane(i);
        word.fetch_xor((WILD ^ tag) << shift, Ordering::SeqCst);
    }
}

impl<A: PackedAlgorithm> PackedTable<A> {
    /// The claim of the empty slot `e`: `0 → word`, its lane left `EMPTY` (a later
    /// scan that reads the slot publishes its tag: see [`Control::publish`]). `false`
    /// when the slot was taken meanwhile.
    #[inline(always)]
    pub(super) fn claim_empty(&self, e: usize, word: u128) -> bool {
        self.slot(e)
            .compare_exchange(0, word, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Publishes the tag of `word`, just loaded from the occupied slot `i` by a scan,
    /// if its lane is still `EMPTY`.
    #[inline(always)]
    pub(super) fn publish_read(&self, i: usize, word: u128) {
        self.control.publish(i, tag_of(super::fp_of(word)));
    }

    /// The claim of slot `i`, holding `old`, for `new`: an empty slot's
    /// ([`claim_empty`](Self::claim_empty)), or a replacing claim that owns the lane
    /// around the slot's compare-and-swap. `false` when it lost a race (the request
    /// starts over).
    pub(super) fn replace(&self, i: usize, old: u128, new: u128) -> bool {
        if old == 0 {
            return self.claim_empty(i, new);
        }
        if !self.control.own(i, tag_of(super::fp_of(old))) {
            // Another claim is replacing this slot (or did): the caller starts over.
            spin_loop();
            return false;
        }
        let now = self
            .slot(i)
            .compare_exchange(old, new, Ordering::AcqRel, Ordering::Acquire);
        // The slot holds `new`, or still the old key (its state moved): no other
        // claim changes its key while the lane is owned.
        let held = match now {
            Ok(_) => new,
            Err(actual) => actual,
        };
        self.control.release(i, tag_of(super::fp_of(held)));
        now.is_ok()
    }
}

#[cfg(all(test, not(tollgate_loom)))]
mod tests {
    use super::*;

    /// The SWAR match against a lane-by-lane comparison, over words of random lanes
    /// with `EMPTY`, `WILD` and the tag planted.
    #[test]
    fn matches_agrees_with_each_lane() {
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..20_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let tag = tag_of(rng);
            let mut w = 0;
            let mut expected = 0;
            for k in 0..LANES {
                let pick = (rng >> (8 * k)) & 7;
                let lane = match pick {
                    0 => EMPTY,
                    1 => WILD,
                    2 => tag,
                    3 => tag ^ 1,
                    _ => (rng >> (4 * k + 11)) & LANE,
                };
                w |= lane << (k as u32 * LANE_BITS);
                if lane == tag || lane <= WILD {
                    expected |= 1 << k;
                }
            }
            assert_eq!(matches(w, tag), expected, "{w:#x} {tag}");
        }
        for kw in [0, 1 << 20, u64::MAX, 0xFFFF_F000_0000_0000] {
            assert!((2..1024).contains(&tag_of(kw)));
        }
    }

    /// Candidates come rotated to the key's start offset, only within the group.
    #[test]
    fn candidates_rotate_to_the_start() {
        let c = Control::new(24, 12);
        // Slots 14 (lane 2 of group 1) and 21 (lane 9) hold tag 5; others empty.
        assert!(c.own(14, 0));
        c.release(14, 5);
        c.publish(21, 5);
        for j in 0..12 {
            if j != 2 && j != 9 {
                c.publish(12 + j, 7);
            }
        }
        assert_eq!(c.candidates(12, 0, 5), (1 << 2) | (1 << 9));
        assert_eq!(c.candidates(12, 3, 5), (1 << 6) | (1 << 11));
        assert_eq!(c.candidates(12, 10, 5), (1 << 4) | (1 << 11));
        assert_eq!(c.candidates(0, 5, 5), 0xFFF);
        let small = Control::new(6, 3);
        assert_eq!(small.candidates(3, 0, 9), 0b111);
        assert!(!small.own(4, 9) || small.candidates(3, 0, 9) == 0b111);
    }
}
