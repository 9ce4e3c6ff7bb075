//! A key's lookup: the scan of its two candidate groups in the key's order, in pairs.

use super::{fp_of, PackedTable, FULL, MOVED};
use crate::algorithm::packed::PackedAlgorithm;
use crate::sync::{prefetch, AtomicU128, Ordering};
use crate::table::generation::{self, MATCH_BITS};
use crate::table::geometry::Location;

/// The outcome of a scan of a key's candidate groups.
pub(super) enum Scan {
    Found(usize, u128),
    Absent { first_empty: Option<usize> },
}

impl Scan {
    /// The scan a fast path's miss (`PackedTable::decide_found`'s `Err`) reports, for the
    /// slow path to start from: `None` when the key's slot went to another key (the
    /// slow path scans again).
    pub(super) fn resume(missed: usize) -> Option<Scan> {
        match missed {
            MOVED => None,
            FULL => Some(Scan::Absent { first_empty: None }),
            e => Some(Scan::Absent {
                first_empty: Some(e),
            }),
        }
    }
}

impl<A: PackedAlgorithm> PackedTable<A> {
    /// Scans the key's candidate groups in canonical order.
    #[inline(always)]
    pub(super) fn scan(&self, fp: u64, loc: &Location) -> Scan {
        self.scan_with(fp, loc, |slot| slot.load(Ordering::Acquire))
    }

    /// [`scan`](Self::scan) reading each slot with `load` (the hit path's inline load).
    #[inline(always)]
    pub(super) fn scan_with(
        &self,
        fp: u64,
        loc: &Location,
        load: impl Fn(&AtomicU128) -> u128,
    ) -> Scan {
        let [a, b] = loc.groups;
        let [mut ja, mut jb] = loc.starts;
        let group = self.geo.group();
        let slots = self.slots();
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
        // is in at most one of them. The first slot is known not to be empty (the
        // caller's test); the second, if empty, ends the scan.
        let pair = |(ia, wa): (usize, u128), (ib, wb): (usize, u128)| -> Option<Scan> {
            if ((fp_of(wa) | MATCH_BITS) ^ fp).min((fp_of(wb) | MATCH_BITS) ^ fp) == 0 {
                let (i, w) = if generation::holds(fp_of(wa), fp) {
                    (ia, wa)
                } else {
                    (ib, wb)
                };
                return Some(Scan::Found(i, w));
            }
            (fp_of(wb) == 0).then_some(Scan::Absent {
                first_empty: Some(ib),
            })
        };
        // The order of `Location::probe`, written out so it compiles to tight loops.
        if a == b {
            for _ in 0..group {
                let i = a + ja;
                if let Some(found) = check(i, load(slots.get(i))) {
                    return found;
                }
                ja = if ja + 1 == group { 0 } else { ja + 1 };
            }
        } else {
            // Pairs all the way: the slots of both groups at each step are loaded
            // together and the match picked without a branch on which of the two
            // holds it. For a random stream over the keys of a table the caches hold,
            // that branch (and the one on whether the first slot is the key's) went
            // either way at random, a mispredicted jump on about half the decisions;
            // the price is a second load on a hot key, against one slot at a time.
            // In a table larger than the caches the two loads are cache misses, and
            // the second group's is asked for first (`prefetch`) so that it overlaps
            // the first even when the branch below goes the unusual way.
            if self.large {
                prefetch(slots.get(b + jb));
            }
            for _ in 0..group {
                let (ia, ib) = (a + ja, b + jb);
                let wa = load(slots.get(ia));
                // An empty slot of the first group ends the scan before the second
                // group's slot is read: it comes first in the key's order. A table
                // filling up (a random stream of new keys) then waits for one cache
                // miss per key instead of two; on a table of present keys the branch is never
                // taken and the second load still issues alongside the first.
                if fp_of(wa) == 0 {
                    return Scan::Absent {
                        first_empty: Some(ia),
                    };
                }
                let wb = load(slots.get(ib));
                if let Some(done) = pair((ia, wa), (ib, wb)) {
                    return done;
                }
                ja = if ja + 1 == group { 0 } else { ja + 1 };
                jb = if jb + 1 == group { 0 } else { jb + 1 };
            }
        }
        Scan::Absent { first_empty: None }
    }
}
