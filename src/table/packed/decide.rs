//! A packed table's decision: the lock-free fast path (the key present, or a new key
//! taking an empty slot) and the slow path through the whole protocol.

use super::{fp_of, pack, state_of, Applied, PackedTable, Scan, FULL, MOVED};
use crate::algorithm::gcra::Gcra;
use crate::algorithm::packed::{Classed, PackedAlgorithm, Step};
use crate::decision::Decision;
use crate::sync::{fast_path, HitPath, Ordering};
use crate::table::generation;

impl<A: PackedAlgorithm> PackedTable<A> {
    /// One decision for the key hashed to `h` under `params` (one tier's, read once by
    /// the caller), at `now()` (re-read when the request has to start over), for
    /// `cost <= capacity`. When `params` go stale under it (their rate class retired:
    /// see [`run_from`](Self::run_from)), the slow path decides again with tier
    /// `tier`'s current parameters: `None` when `cost` exceeds their burst.
    #[inline]
    pub(crate) fn decide(
        &self,
        h: u64,
        tier: usize,
        now: impl Fn() -> u64,
        cost: u32,
        params: A,
    ) -> Option<Decision> {
        // The fast path: the key is present and its slot keeps it. The loop computes
        // only the next state; the decision is computed once, from the state the
        // winning compare-and-swap replaced (the step is pure). Carrying the 40-byte
        // decision through the loop kept it in memory and stalled store forwarding.
        // The table is generic over the algorithm, so the loop holds only its values;
        // a bucket in a table of several rates compares classes on a hit (`Classed`).
        // On a CPU without the inline 16-byte operations (`machine::fast_path`), every
        // decision takes the slow path, whose operations go through portable-atomic:
        // the hit path then holds no call and no second check.
        let Some(fast) = fast_path() else {
            return self.decide_slow(h, tier, now, cost, params, None);
        };
        let hit = match params.gcra().filter(Gcra::mixed) {
            Some(g) => self.decide_found(fast, h, &now, cost, Classed(g)),
            None => self.decide_found(fast, h, &now, cost, params),
        };
        match hit {
            Ok(d) => Some(d),
            Err((missed, t)) => {
                let absent = Scan::resume(missed).map(|scan| (scan, t));
                self.decide_slow(h, tier, now, cost, params, absent)
            }
        }
    }

    /// The fast path of [`decide`](Self::decide): the key is present and its slot keeps
    /// it, or it is new and takes the empty slot its scan ended at. Otherwise `Err`: the
    /// first empty slot of the scan that found the key absent
    /// (for the slow path to start from), [`FULL`] when that scan met no empty slot, or
    /// [`MOVED`] when the key's slot went to another key; with the reading taken before
    /// the scan.
    #[inline(always)]
    fn decide_found(
        &self,
        fast: HitPath,
        h: u64,
        now: &impl Fn() -> u64,
        cost: u32,
        step: impl Step,
    ) -> Result<Decision, (usize, u64)> {
        let fp = generation::probe_word(h);
        let loc = self.geo.locate(h);
        // The clock is read once, before the lookup (as the protocol has it): its
        // latency then overlaps the scan's loads instead of following them, and the
        // calls of the scan do not have to preserve the reading's inputs (a keyed hit
        // at 1,000 keys: 26.1 ns with the reading after the scan, 24.8 ns before).
        let t = now();
        let (i, mut word) = match self.scan_with(fp, &loc, |s| s.load_fast(fast, Ordering::Acquire))
        {
            Scan::Found(i, word) => (i, word),
            Scan::Absent {
                first_empty: Some(e),
            } if cost > 0 => {
                // A new key and an empty slot (a table filling up): `run_from`'s claim of
                // an empty slot, here without its generic machinery. The reading is the
                // one taken before the scan, raised to the newest reclaim in the shard
                // (the floor of the protocol, read after the scan): never older than a
                // reclaim, as `run_from`'s: one clock reading per new key instead of
                // two. A lost race goes the whole way round.
                // In a table of several rates the class written is registered first, as
                // in `run_from` (a class being retired, or given to another rate since
                // these parameters were read: the slow path, which starts over).
                let _writing = match step.classed() {
                    Some(g) => Some(self.rates.write(&g).ok_or((MOVED, t))?),
                    None => None,
                };
                let shard = &self.shards[loc.shard];
                let reading = t;
                let t = shard.floor(t);
                let Some(next) = step.next_state(0, t, cost) else {
                    return Err((e, reading));
                };
                return match self.slot(e).compare_exchange_fast(
                    fast,
                    0,
                    pack(
                        generation::word(fp, shard.epoch(), step.class().unwrap_or(0)),
                        next,
                    ),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        // Its waits measured from the reading (see `run_from`).
                        let d = step.decision(0, t, cost).lagged(t - reading);
                        self.counts.count(cost, &d);
                        Ok(d)
                    }
                    Err(_) => Err((MOVED, reading)),
                };
            }
            Scan::Absent { first_empty } => return Err((first_empty.unwrap_or(FULL), t)),
        };
        let slot = self.slot(i);
        // A state another rate class wrote is converted on the slow path (checked
        // again when a compare-and-swap fails), and so is every state once the class
        // these parameters carry stands for another rate (retired and given out again
        // since they were read: the slow path then starts over with fresh ones).
        // A bucket of one rate meets another class only after the table's first rate
        // change, when its parameters are those of before it (class 0, kept).
        let foreign = |word: u128| {
            step.class()
                .is_some_and(|c| generation::class_of(fp_of(word)) != c)
                || step.classed().is_some_and(|g| !self.rates.stands_for(&g))
        };
        if foreign(word) {
            return Err((MOVED, t));
        }
        loop {
            let state = state_of(word);
            let Some(next) = step.next_state(state, t, cost) else {
                let d = step.decision(state, t, cost);
                if !d.is_allowed() && step.ahead(state, t) {
                    // Denied only in a window later than the reading's: the slow path
                    // decides again at a fresh reading (see `Step::ahead`).
                    return Err((MOVED, t));
                }
                self.counts.count(cost, &d);
                return Ok(d);
            };
            match slot.compare_exchange_fast(
                fast,
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
                Err(_) => return Err((MOVED, t)),
            }
        }
    }

    /// The rest of [`decide`](Self::decide), out of line so that the fast path keeps
    /// its few values in registers: a key absent or moved goes through the whole
    /// protocol (insert, reclaim, the reading floor), again with the tier's current
    /// parameters while the ones it has go stale.
    ///
    /// `absent`: the fast path's scan that found the key absent, and the reading it
    /// took before that scan. The first run decides at that reading, as `run_from`
    /// would at the one it takes before its own scan (a flood of new keys into a full
    /// table then reads the clock once per key instead of twice); every later reading
    /// is fresh. A fast path that gives up for another reason (the key's slot moved, a
    /// denial in a later window than its reading's) hands nothing over.
    #[inline(never)]
    #[cold]
    fn decide_slow(
        &self,
        h: u64,
        tier: usize,
        now: impl Fn() -> u64,
        cost: u32,
        params: A,
        absent: Option<(Scan, u64)>,
    ) -> Option<Decision> {
        let (mut absent, reading) = match absent {
            Some((scan, t)) => (Some(scan), Some(t)),
            None => (None, None),
        };
        let reading = std::cell::Cell::new(reading);
        let now = || reading.take().unwrap_or_else(&now);
        let reload = || self.tiers().get(tier);
        let run = |p| self.decide_run(h, now, cost, p, absent.take());
        crate::table::tiers::fresh(params, cost, reload, A::burst, run).ok()
    }

    /// One run of [`decide_slow`](Self::decide_slow) with `params`; `None` when they
    /// went stale (see [`run_from`](Self::run_from)).
    #[inline(always)]
    fn decide_run(
        &self,
        h: u64,
        now: impl Fn() -> u64,
        cost: u32,
        params: A,
        absent: Option<Scan>,
    ) -> Option<Decision> {
        let rate = params.gcra();
        let (placed, _) =
            self.run_from(absent, h, now, cost > 0, (rate, true), |state, t, lag| {
                (params.next_state(state, t, cost), (state, t, lag))
            })?;
        let d = match placed {
            // A peek (cost 0) at an absent key: it decides as fresh, uncounted.
            Applied::Absent((state, t, lag)) => {
                return Some(params.decision(state, t, cost).lagged(lag))
            }
            Applied::Stored((state, t, lag)) | Applied::Untracked((state, t, lag)) => {
                params.decision(state, t, cost).lagged(lag)
            }
            // Refused under the deciding tier's policy (the table's is tier 0's).
            Applied::Refused(d) => d.with_policy(params.limit(), params.burst()),
        };
        self.counts.count(cost, &d);
        Some(d)
    }
}
