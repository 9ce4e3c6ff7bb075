//! A packed table's claim of a full pair of groups: the lock-free survey under
//! `Deny` and `Allow`, and the locked rescan that reclaims an idle entry or applies
//! the `OnFull` policy.

use super::{fp_of, pack, state_of, PackedTable, Placed, Stored, Survey};
use crate::algorithm::gcra::Gcra;
use crate::algorithm::packed::PackedAlgorithm;
use crate::sync::{lock, Ordering};
use crate::table::claim::{refusal, ClaimScan, OnFull};
use crate::table::counters::Shard;
use crate::table::generation;
use crate::table::geometry::Location;

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
            return self.claim_locked(fp, loc, now, (rate, denial_converts), stored, f);
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
                    return self
                        .update((i, loc.shard), fp, w, now, (rate, denial_converts), f)
                        .map(|(r, s)| {
                            *stored = s;
                            Placed::Stored(r)
                        });
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
        let (next, fresh) = f(0, now);
        let Some(next) = next else {
            // The transition writes nothing for a fresh key after all.
            return Some(Placed::Absent(fresh));
        };
        // A new generation, taken after the scan loaded the entries it may replace.
        let installed = shard.next_epoch();
        let kw = generation::word(fp, installed, rate.map_or(0, |g| g.class()));
        *stored = Stored {
            word: kw,
            installed,
        };
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
                    scan.refusal(params.burst(), now).with_limit(params.limit()),
                ))
            }
            OnFull::Allow => {
                Shard::bump(&shard.untracked);
                Some(Placed::Untracked(fresh))
            }
        }
    }
}
