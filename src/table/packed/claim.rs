//! A packed table's claim of a full pair of groups: the lock-free survey under
//! `Deny` and `Allow`, the lock-free ranking under `Evict` whose victim is installed
//! over with one compare-and-swap, and the locked rescan that reclaims an idle entry
//! or applies the `OnFull` policy.

use super::{fp_of, pack, state_of, PackedTable, Placed, Stored, Survey};
use crate::algorithm::gcra::Gcra;
use crate::algorithm::packed::PackedAlgorithm;
use crate::sync::Ordering;
use crate::table::claim::{refusal, ClaimScan, OnFull};
use crate::table::counters::Shard;
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
    ) -> Option<Placed<R>> {
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
    /// without the lock ([`rank_live`](Self::rank_live)), and when every one is live the
    /// victim is installed over with one compare-and-swap expecting exactly the word
    /// ranked, under the key's claim lock taken only if nobody has taken it since the
    /// ranking began (no claim of this key installed anything meanwhile, so the key is
    /// still absent: see `ClaimLocks`). Anything else (a free slot to reclaim, the lock
    /// taken meanwhile, a table of several rates) goes to
    /// [`claim_locked`](Self::claim_locked); a failed compare-and-swap (the victim's
    /// state or key changed since it was ranked) starts the request over (`None`).
    ///
    /// The victim is the one the locked rescan would pick at the same reading: the same
    /// ranks, ties to the first in the key's order (compared on random tables in
    /// `claim_tests.rs`). Other entries may change between the ranking and the install,
    /// as they may between the locked rescan and its compare-and-swap: the ranking is
    /// one scan either way, and the victim's own word is checked by the install
    /// (model-checked in `loom-tests/tests/evict.rs`).
    fn claim_evict<R>(
        &self,
        fp: u64,
        loc: &Location,
        now: u64,
        (rate, denial_converts): (Option<Gcra>, bool),
        stored: &mut Stored,
        f: &mut impl FnMut(u64, u64) -> (Option<u64>, R),
    ) -> Option<Placed<R>> {
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
        let victim = match self.rank_live(fp, loc, now, &params) {
            // Inserted meanwhile: start over (the scan will find it).
            Ranked::Found => return None,
            Ranked::Live(victim) => victim,
            Ranked::Free => {
                return self.claim_locked(fp, loc, now, (rate, denial_converts), stored, f)
            }
        };
        let Some(_guard) = claims.lock_if_unchanged(seen) else {
            return self.claim_locked(fp, loc, now, (rate, denial_converts), stored, f);
        };
        let (next, fresh) = f(0, now);
        let Some(next) = next else {
            // The transition writes nothing for a fresh key after all.
            return Some(Placed::Absent(fresh));
        };
        self.replace(loc.shard, fp, rate, now, next, victim, stored)?;
        Shard::bump(&shard.evictions);
        Some(Placed::Stored(fresh))
    }

    /// One pass over the key's groups without the lock, ranking the entries at `now`
    /// with tier 0's `params` (a table of one rate) as the locked rescan
    /// ([`rescan`](Self::rescan)) does: the entry of lowest rank, of equals the first in
    /// the key's order (its first group, then its second, each from the key's start
    /// offset), with the word it was ranked on, when every entry is live.
    #[inline(always)]
    fn rank_live(&self, fp: u64, loc: &Location, now: u64, params: &A) -> Ranked {
        let reading = params.reading(now);
        let group = self.geo.group();
        let count = if loc.groups[0] == loc.groups[1] { 1 } else { 2 };
        let mut lowest = u128::MAX;
        // The victim: its slot, the word it was ranked on, its place in the key's order.
        let mut victim = (usize::MAX, 0, usize::MAX);
        // One entry, slot `i` holding `w`, at place `at()` in the key's order (only
        // computed for a tie): `Some` ends the pass.
        let mut visit = |i: usize, w: u128, at: &dyn Fn() -> usize| -> Option<Ranked> {
            let fw = fp_of(w);
            if generation::holds(fw, fp) {
                return Some(Ranked::Found);
            }
            let (idle_at, rank) = params.rank(state_of(w), &reading);
            if fw == 0 || idle_at <= now {
                return Some(Ranked::Free);
            }
            if rank <= lowest {
                let at = at();
                if rank < lowest || at < victim.2 {
                    lowest = rank;
                    victim = (i, w, at);
                }
            }
            None
        };
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
            if group == GROUP && base % 4 == 0 {
                // A whole group is three lines: read in slot order with no index
                // arithmetic or bounds check per slot (the loops unroll), ties settled
                // by the place in the key's order.
                for (l, line) in self.lines[base / 4..base / 4 + GROUP / 4]
                    .iter()
                    .enumerate()
                {
                    for (s, slot) in line.0.iter().enumerate() {
                        let k = l * 4 + s;
                        if let Some(r) = visit(base + k, slot.load(Ordering::Acquire), &|| at(k)) {
                            return r;
                        }
                    }
                }
            } else {
                for k in 0..group {
                    let i = base + k;
                    if let Some(r) = visit(i, self.slot(i).load(Ordering::Acquire), &|| at(k)) {
                        return r;
                    }
                }
            }
        }
        Ranked::Live((victim.0, victim.1))
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
    ) -> Option<Placed<R>> {
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
                        Placed::Stored(r)
                    })
            }
        };
        let (next, fresh) = f(0, now);
        let Some(next) = next else {
            // The transition writes nothing for a fresh key after all.
            return Some(Placed::Absent(fresh));
        };
        if let Some(target) = scan.target() {
            self.replace(loc.shard, fp, rate, now, next, target, stored)?;
            if fp_of(target.1) != 0 {
                Shard::bump(&shard.idle_reclaims);
            }
            return Some(Placed::Stored(fresh));
        }
        match self.on_full {
            OnFull::Evict => {
                self.replace(loc.shard, fp, rate, now, next, scan.victim()?, stored)?;
                Shard::bump(&shard.evictions);
                Some(Placed::Stored(fresh))
            }
            OnFull::Deny => {
                Shard::bump(&shard.refused);
                let params = self.params.get(0);
                Some(Placed::Refused(
                    scan.refusal(params.burst(), now).with_limit(params.limit()),
                ))
            }
            OnFull::Allow => {
                Shard::bump(&shard.untracked);
                Some(Placed::Untracked(fresh))
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

/// What [`PackedTable::rank_live`] finds in a key's full groups.
enum Ranked {
    /// The key (inserted meanwhile).
    Found,
    /// An empty slot or an entry idle at the reading.
    Free,
    /// Only live entries; the one of lowest rank, and the word it was ranked on.
    Live((usize, u128)),
}

#[cfg(all(test, not(tollgate_loom)))]
#[path = "claim_tests.rs"]
mod tests;
