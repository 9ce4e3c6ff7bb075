//! A packed table's claim of a full pair of groups: the lock-free survey under
//! `Deny` and `Allow`, the lock-free ranking under `Evict` whose victim is installed
//! over with one compare-and-swap, and the locked rescan that reclaims an idle entry
//! or applies the `OnFull` policy.

use super::{fp_of, pack, state_of, Applied, PackedTable, Stored, Survey};
use crate::algorithm::gcra::Gcra;
use crate::algorithm::packed::PackedAlgorithm;
use crate::sync::Ordering;
use crate::table::claim::{refusal, ClaimScan, OnFull};
use crate::table::counters::Event;
use crate::table::generation;
use crate::table::geometry::{Location, GROUP};

impl<A: PackedAlgorithm> PackedTable<A> {
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
    pub(super) fn claim<R>(
        &self,
        fp: u64,
        loc: &Location,
        now: u64,
        (rate, denial_converts): (Option<Gcra>, bool),
        stored: &mut Stored,
        f: &mut impl FnMut(u64, u64) -> (Option<u64>, R),
    ) -> Option<Applied<R>> {
        if self.on_full == OnFull::Evict {
            return self.claim_evict(fp, loc, now, (rate, denial_converts), stored, f);
        }
        let params = self.params.get(0);
        let survey = self.survey(fp, loc, now, |s| params.idle_at(s));
        let soonest = match survey {
            // Inserted meanwhile: start over (the scan will find it).
            Survey::Found => return None,
            // Something may be claimed: the locked claim decides what.
            Survey::Free => {
                return self.claim_locked(fp, loc, now, (rate, denial_converts), stored, f)
            }
            Survey::Live { soonest } => soonest,
        };
        let (next, fresh) = f(0, now);
        if next.is_none() {
            return Some(Applied::Absent(fresh));
        }
        Some(match self.on_full {
            OnFull::Allow => {
                self.counts.event(Event::Untracked);
                Applied::Untracked(fresh)
            }
            _ => {
                self.counts.event(Event::Refused);
                Applied::Refused(
                    refusal(params.burst(), Some(soonest), now).with_limit(params.limit()),
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

    /// The claim of a full pair of groups under `Evict`: the candidates are ranked
    /// without the lock ([`rank`](Self::rank)), and the slot chosen (a free one, else
    /// the victim) is installed over with one compare-and-swap expecting exactly the
    /// word ranked, under the key's claim lock taken only if nobody has taken it since
    /// the ranking began (no claim of this key installed anything meanwhile, so the key
    /// is still absent: see `ClaimLocks`). Otherwise (the lock taken meanwhile, or a
    /// table of several rates) [`claim_locked`](Self::claim_locked) decides; a failed
    /// compare-and-swap (the slot's state or key changed since it was ranked) starts
    /// the request over (`None`).
    ///
    /// The slot is the one the locked rescan would choose at the same reading: the same
    /// ranks, ties to the first in the key's order (compared on random tables in
    /// `claim_tests.rs`). Other entries may change between the ranking and the install,
    /// as they may between the locked rescan and its compare-and-swap: the ranking is
    /// one scan either way, and the chosen slot's own word is checked by the install
    /// (model-checked in `loom-tests/tests/evict.rs`).
    fn claim_evict<R>(
        &self,
        fp: u64,
        loc: &Location,
        now: u64,
        (rate, denial_converts): (Option<Gcra>, bool),
        stored: &mut Stored,
        f: &mut impl FnMut(u64, u64) -> (Option<u64>, R),
    ) -> Option<Applied<R>> {
        let shard = &self.shards[loc.shard];
        let claims = self.claims.of(fp);
        // Read before the ranking's loads.
        let seen = claims.seen();
        // A reclaim may have happened since the caller's scan.
        let now = shard.floor(now);
        let params = self.params.get(0);
        if params.gcra().is_some_and(|g| g.mixed()) {
            // What each entry used is converted between rates: the locked rescan.
            return self.claim_locked(fp, loc, now, (rate, denial_converts), stored, f);
        }
        let Ranked::Claim(target, free) = self.rank(fp, loc, now, &params) else {
            // Inserted meanwhile: start over (the scan will find it).
            return None;
        };
        let Some(_guard) = claims.lock_if_unchanged(seen) else {
            return self.claim_locked(fp, loc, now, (rate, denial_converts), stored, f);
        };
        let (next, fresh) = f(0, now);
        let Some(next) = next else {
            // The transition writes nothing for a fresh key after all.
            return Some(Applied::Absent(fresh));
        };
        self.replace(loc.shard, fp, rate, now, next, target, stored)?;
        if !free {
            self.counts.event(Event::Eviction);
        } else if fp_of(target.1) != 0 {
            self.counts.event(Event::IdleReclaim);
        }
        Some(Applied::Stored(fresh))
    }

    /// One pass over the key's groups without the lock, choosing at `now` with tier 0's
    /// `params` (a table of one rate) the slot the locked rescan
    /// ([`rescan`](Self::rescan), `ClaimScan`) would: the first free (empty or idle)
    /// slot in the key's order of the group with fewer live entries, or of the only
    /// group with one; else the live entry of lowest rank, of equals the first in the
    /// key's order (its first group, then its second, each from the key's start
    /// offset). With the word it read there.
    #[inline(always)]
    fn rank(&self, fp: u64, loc: &Location, now: u64, params: &A) -> Ranked {
        let reading = params.reading(now);
        let group = self.geo.group();
        let count = if loc.groups[0] == loc.groups[1] { 1 } else { 2 };
        // A candidate: its slot, the word read there, its place in the key's order.
        const NONE: (usize, u128, usize) = (usize::MAX, 0, usize::MAX);
        let mut lowest = u128::MAX;
        let mut victim = NONE;
        let mut free = [NONE; 2];
        // Free slots per group (counted on the cold path: a flood meets none).
        let mut frees = [0usize; 2];
        for wi in 0..count {
            let (base, start) = (loc.groups[wi], loc.starts[wi]);
            // Where slot `k` of this group comes in the key's order.
            let at = |k: usize| {
                wi * group
                    + if k >= start {
                        k - start
                    } else {
                        k + group - start
                    }
            };
            // Slot `k` of this group, holding `w` (a macro: always inlined, and the pass
            // ends when it is the key).
            macro_rules! visit {
                ($k:expr, $w:expr) => {{
                    let (k, w): (usize, u128) = ($k, $w);
                    let fw = fp_of(w);
                    if generation::holds(fw, fp) {
                        return Ranked::Found;
                    }
                    let (idle_at, rank) = params.rank(state_of(w), &reading);
                    if fw == 0 || idle_at <= now {
                        note_free(&mut free[wi], &mut frees[wi], (base + k, w, at(k)));
                    } else if rank <= lowest {
                        let at = at(k);
                        if rank < lowest || at < victim.2 {
                            lowest = rank;
                            victim = (base + k, w, at);
                        }
                    }
                }};
            }
            if group == GROUP && base % 4 == 0 {
                // A whole group is three lines: read in slot order with no index
                // arithmetic or bounds check per slot (the loops unroll), the key's
                // order kept by the places compared.
                for (l, line) in self.lines[base / 4..base / 4 + GROUP / 4]
                    .iter()
                    .enumerate()
                {
                    for (s, slot) in line.0.iter().enumerate() {
                        visit!(l * 4 + s, slot.load(Ordering::Acquire));
                    }
                }
            } else {
                for k in 0..group {
                    visit!(k, self.slot(base + k).load(Ordering::Acquire));
                }
            }
        }
        let pick = |c: (usize, u128, usize)| (c.0, c.1);
        match free {
            [a, b] if a.0 != usize::MAX && b.0 != usize::MAX => {
                // The group with fewer live entries (more free ones).
                Ranked::Claim(pick(if frees[1] > frees[0] { b } else { a }), true)
            }
            [a, _] if a.0 != usize::MAX => Ranked::Claim(pick(a), true),
            [_, b] if b.0 != usize::MAX => Ranked::Claim(pick(b), true),
            _ => Ranked::Claim(pick(victim), false),
        }
    }

    /// The claim of a full pair of groups, under the key's claim lock: rescan, then
    /// reclaim an idle entry, or apply the `OnFull` policy. `None` when a CAS lost a
    /// race and the whole request should start over.
    fn claim_locked<R>(
        &self,
        fp: u64,
        loc: &Location,
        now: u64,
        (rate, denial_converts): (Option<Gcra>, bool),
        stored: &mut Stored,
        f: &mut impl FnMut(u64, u64) -> (Option<u64>, R),
    ) -> Option<Applied<R>> {
        let shard = &self.shards[loc.shard];
        let _guard = self.claims.of(fp).lock();
        // A reclaim may have happened since the caller's scan.
        let now = shard.floor(now);
        let scan = match self.rescan(fp, loc, now) {
            Ok(scan) => scan,
            // Inserted meanwhile (claims of this key are serialized by this lock, or
            // were an empty-slot claim that finished before).
            Err((i, w)) => {
                return self
                    .update((i, loc.shard), fp, w, now, (rate, denial_converts), f)
                    .map(|(r, s)| {
                        *stored = s;
                        Applied::Stored(r)
                    })
            }
        };
        let (next, fresh) = f(0, now);
        let Some(next) = next else {
            // The transition writes nothing for a fresh key after all.
            return Some(Applied::Absent(fresh));
        };
        if let Some(target) = scan.target() {
            self.replace(loc.shard, fp, rate, now, next, target, stored)?;
            if fp_of(target.1) != 0 {
                self.counts.event(Event::IdleReclaim);
            }
            return Some(Applied::Stored(fresh));
        }
        match self.on_full {
            OnFull::Evict => {
                self.replace(loc.shard, fp, rate, now, next, scan.victim()?, stored)?;
                self.counts.event(Event::Eviction);
                Some(Applied::Stored(fresh))
            }
            OnFull::Deny => {
                self.counts.event(Event::Refused);
                let params = self.params.get(0);
                Some(Applied::Refused(
                    scan.refusal(params.burst(), now).with_limit(params.limit()),
                ))
            }
            OnFull::Allow => {
                self.counts.event(Event::Untracked);
                Some(Applied::Untracked(fresh))
            }
        }
    }

    /// The scan of the locked claim: every slot of the key's groups at `now`, the free
    /// ones and the live ones ranked (`ClaimScan`), or `Err` with the key's slot and
    /// word when the key is there.
    pub(super) fn rescan(
        &self,
        fp: u64,
        loc: &Location,
        now: u64,
    ) -> Result<ClaimScan<(usize, u128)>, (usize, u128)> {
        let params = self.params.get(0);
        let mut scan = ClaimScan::new();
        let reading = params.reading(now);
        // In a table of several bucket rates, what each entry used is compared in
        // requests: its debt converted into tier 0's interval (an idle state stays idle).
        let mixed = params.gcra().filter(Gcra::mixed);
        let group = self.geo.group();
        let count = if loc.groups[0] == loc.groups[1] { 1 } else { 2 };
        // Each group in the key's order from its start offset (what `ClaimScan`
        // needs: each group's first free slot in that order, its live entries, and the
        // entry that has used least); one group after the other, a tighter loop than
        // the interleaved `Location::probe`.
        for wi in 0..count {
            let (base, mut j) = (loc.groups[wi], loc.starts[wi]);
            for _ in 0..group {
                let i = base + j;
                j = if j + 1 == group { 0 } else { j + 1 };
                let w = self.slot(i).load(Ordering::Acquire);
                let fw = fp_of(w);
                if generation::holds(fw, fp) {
                    return Err((i, w));
                }
                // O(1) per entry, no step: the state is its own idle stamp, and its
                // own eviction rank. In a table of several rates, what the entry used
                // in tier 0's requests (its debt converted), then its own idle stamp:
                // the converted state's time is not when the entry goes idle, so two
                // entries that used as much are told apart by the real one.
                let (idle_at, rank) = match mixed {
                    Some(g) => {
                        let tat = state_of(w);
                        let interval = self.rates.interval(generation::class_of(fw));
                        let used = g.convert(tat, interval, now);
                        (g.idle_at(tat), u128::from(used) << 64 | u128::from(tat))
                    }
                    None => params.rank(state_of(w), &reading),
                };
                if fw == 0 || idle_at <= now {
                    scan.free(wi, (i, w));
                } else {
                    scan.live(wi);
                    scan.rank((i, w), rank, idle_at);
                }
            }
        }
        Ok(scan)
    }

    /// Installs the new key `fp` (its bucket's `rate`) with state `next` in slot `i`
    /// over `old`, the word a scan at `now` read there, with a new generation taken
    /// after that scan, as the claim of shard `shard` it is (the reclaim stamp raised
    /// first when `old` held a key). `None` when the slot changed since.
    #[allow(clippy::too_many_arguments)]
    fn replace(
        &self,
        shard: usize,
        fp: u64,
        rate: Option<Gcra>,
        now: u64,
        next: u64,
        (i, old): (usize, u128),
        stored: &mut Stored,
    ) -> Option<()> {
        let shard = &self.shards[shard];
        let installed = shard.next_epoch();
        let kw = generation::word(fp, installed, rate.map_or(0, |g| g.class()));
        *stored = Stored {
            word: kw,
            installed,
        };
        if fp_of(old) != 0 {
            shard.stamp(now);
        }
        self.slot(i)
            .compare_exchange(old, pack(kw, next), Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| ())
    }
}

/// A free slot met by [`PackedTable::rank`]: counted in its group, and kept when it
/// comes first in the key's order (out of line: a flood into a full table meets none).
#[cold]
#[inline(never)]
fn note_free(first: &mut (usize, u128, usize), count: &mut usize, candidate: (usize, u128, usize)) {
    *count += 1;
    if candidate.2 < first.2 {
        *first = candidate;
    }
}

/// What [`PackedTable::rank`] finds in a key's full groups.
enum Ranked {
    /// The key (inserted meanwhile).
    Found,
    /// The slot to claim and the word read there: a free one (`true`), or the victim.
    Claim((usize, u128), bool),
}

#[cfg(all(test, not(tollgate_loom)))]
#[path = "claim_tests.rs"]
mod tests;
