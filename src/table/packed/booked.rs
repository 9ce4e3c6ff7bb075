//! A packed table's transitions beyond a decision: booked runs (for reservations
//! and multi-limit checks), refunds to the state a booking was made on, resets, and
//! peeks.

use super::{fp_of, pack, state_of, Applied, PackedTable, Scan, Stored};
use crate::algorithm::booking::Origin;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::packed::PackedAlgorithm;
use crate::decision::Decision;
use crate::sync::{fast_path, HitPath, Ordering};
use crate::table::generation;

impl<A: PackedAlgorithm> PackedTable<A> {
    /// Runs the transition `f(state, now) -> (new state or None, result)` on the key
    /// hashed to `h`, inside the table's protocol (lock-free lookup and update, claims
    /// of empty slots, locked reclaims, the reclaim-race floor on readings). A missing
    /// key is inserted only if `insert` and `f` writes a state for it; otherwise `f`
    /// is run on the fresh state `0` and nothing is written ([`Applied::Absent`]).
    /// `f` may run several times under contention, so it must be pure.
    ///
    /// Also returns what identifies the state the transition was stored on
    /// ([`Origin::Slot`]; see `table::generation`), for a later
    /// [`refund`](Self::refund). `None` as [`run_from`](Self::run_from).
    ///
    /// `denial_converts`: whether a run that writes nothing still stores a state
    /// converted to `rate`'s class (a denial does; a refused reservation does not).
    ///
    /// `f(state, t, lag)` runs at `t`, `lag` ns after the caller's reading (see
    /// [`run_from`](Self::run_from)): whatever waits it reports are measured from the
    /// reading, `lag` longer than from `t`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_booked<R>(
        &self,
        h: u64,
        now: impl Fn() -> u64,
        insert: bool,
        rate: Option<Gcra>,
        denial_converts: bool,
        mut f: impl FnMut(u64, u64, u64) -> (Option<u64>, R),
    ) -> Option<(Applied<R>, Origin)> {
        // A present key: one compare-and-swap of the next state alone.
        if let Some(fast) = fast_path() {
            if let Ok(done) = self.run_found(fast, h, &now, rate, &mut f) {
                return Some(done);
            }
        }
        // Read before the state is loaded: every later event on the key numbers above it.
        let epoch = self.shards[self.geo.locate(h).shard].epoch();
        let (placed, stored) = self.run_from(None, h, now, insert, (rate, denial_converts), f)?;
        let (gen, class) = (
            generation::of(stored.word),
            generation::class_of(stored.word),
        );
        // A run that installed the key (into an empty slot, or over an idle or evicted
        // entry) made the state it booked on: its generation's epoch is the install's,
        // which may be above the one read before (a claim takes the next epoch), and
        // every later event on the key numbers above the install.
        let epoch = epoch.max(stored.installed);
        Some((placed, Origin::Slot { gen, class, epoch }))
    }

    /// [`run_booked`](Self::run_booked)'s fast path, for a key the table holds in the
    /// class `rate` gives (every key of a table of one rate): the compare-and-swap loop
    /// computes only the next state, and the result `R` (a booking, a charge: large) is
    /// computed once, from the state the winning compare-and-swap replaced (`f` is pure,
    /// so that is the result the full protocol would return: for a key found in its own
    /// class, neither `insert` nor `denial_converts` changes what it does). `Err(())`,
    /// with nothing written, for everything else (a missing key, another class, a table
    /// of several rates, a slot that went to another key): the full protocol then runs.
    #[inline(always)]
    fn run_found<R>(
        &self,
        fast: HitPath,
        h: u64,
        now: &impl Fn() -> u64,
        rate: Option<Gcra>,
        f: &mut impl FnMut(u64, u64, u64) -> (Option<u64>, R),
    ) -> Result<(Applied<R>, Origin), ()> {
        if rate.is_some_and(|g| g.mixed()) {
            return Err(());
        }
        let class = rate.map_or(0, |g| g.class());
        let fp = generation::probe_word(h);
        let loc = self.geo.locate(h);
        // Read before the state is loaded, as `run_booked` does.
        let epoch = self.shards[loc.shard].epoch();
        let t = now();
        let Scan::Found(i, mut word) =
            self.scan_with(fp, &loc, |s| s.load_fast(fast, Ordering::Acquire))
        else {
            return Err(());
        };
        loop {
            let kw = fp_of(word);
            if generation::class_of(kw) != class {
                return Err(());
            }
            let state = state_of(word);
            let origin = Origin::Slot {
                gen: generation::of(kw),
                class,
                epoch,
            };
            // A found key is decided at the reading itself: no lag.
            let (next, r) = f(state, t, 0);
            let Some(next) = next else {
                return Ok((Applied::Stored(r), origin));
            };
            match self.slot(i).compare_exchange_fast(
                fast,
                word,
                pack(kw, next),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok((Applied::Stored(r), origin)),
                Err(actual) if generation::holds(fp_of(actual), fp) => word = actual,
                Err(_) => return Err(()),
            }
        }
    }

    /// Applies `f(state, now)` to the key hashed to `h` only while its state is the
    /// one `origin` (from [`run_booked`](Self::run_booked)) identifies: nothing when
    /// the key is gone, or was reset, reclaimed or evicted since (see
    /// `table::generation`).
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
    ///
    /// A transition may run at a time later than the caller's newest reading: a missing
    /// key's is raised to the reclaim floor (here and again in a claim), and a run that
    /// starts over never goes back to an older time. Its waits must still be measured
    /// from that reading, never too early for the caller whose clock read it: `f`
    /// gets the lag, `t` less the newest reading, and a refusal (built inside the
    /// claim) is shifted by it here. This is the one place the lag is known; on the
    /// hit path it is zero.
    ///
    /// In a table of several rates this (and the fast path's insert into an empty
    /// slot) is how a rate class gets into a slot, so the run is registered with the
    /// rate registry (`rates::Rates::write`); `None`, with nothing written, when
    /// `rate` is stale: the caller starts over with its tier's current parameters.
    #[inline(always)]
    pub(super) fn run_from<R>(
        &self,
        mut first: Option<Scan>,
        h: u64,
        now: impl Fn() -> u64,
        insert: bool,
        (rate, denial_converts): (Option<Gcra>, bool),
        mut f: impl FnMut(u64, u64, u64) -> (Option<u64>, R),
    ) -> Option<(Applied<R>, Stored)> {
        let _writing = match rate.filter(Gcra::mixed) {
            Some(g) => Some(self.rates().write(&g)?),
            None => None,
        };
        let mut stored = Stored::default();
        let fp = generation::probe_word(h);
        let loc = self.geo.locate(h);
        let mut t = now();
        // The caller's newest reading, and the time the transition last ran at: a
        // claim's refusal is made at that time (each claim runs `f` before it refuses).
        let reading = std::cell::Cell::new(t);
        let ran_at = std::cell::Cell::new(t);
        let mut f = |state: u64, at: u64| {
            ran_at.set(at);
            f(state, at, at.saturating_sub(reading.get()))
        };
        loop {
            let scan = match first.take() {
                Some(scan) => scan,
                None => self.scan(fp, &loc),
            };
            match scan {
                Scan::Found(i, w) => {
                    if let Some((r, stored)) =
                        self.update((i, loc.shard), fp, w, t, (rate, denial_converts), &mut f)
                    {
                        return Some((Applied::Stored(r), stored));
                    }
                }
                Scan::Absent { first_empty } => {
                    // Never decide a missing key at a reading older than a reclaim in
                    // its shard: its old entry may have been reclaimed at that reading.
                    t = self.shards[loc.shard].floor(t);
                    let (next, r) = f(0, t);
                    let Some(next) = next.filter(|_| insert) else {
                        return Some((Applied::Absent(r), Stored::default()));
                    };
                    if let Some(e) = first_empty {
                        let class = rate.map_or(0, |g| g.class());
                        let installed = self.shards[loc.shard].epoch();
                        let kw = generation::word(fp, installed, class);
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
                            let stored = Stored {
                                word: kw,
                                installed,
                            };
                            return Some((Applied::Stored(r), stored));
                        }
                    } else if let Some(placed) =
                        self.claim(fp, &loc, t, (rate, denial_converts), &mut stored, &mut f)
                    {
                        let placed = match placed {
                            // "When the soonest entry frees up", from the reading.
                            Applied::Refused(d) => Applied::Refused(
                                d.lagged(ran_at.get().saturating_sub(reading.get())),
                            ),
                            placed => placed,
                        };
                        return Some((placed, stored));
                    }
                }
            }
            // Lost a race: the slot changed under us. Start over with a fresh reading
            // (never older than the one we had).
            reading.set(now());
            t = t.max(reading.get());
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
            // Its waits measured from the reading.
            Scan::Absent { .. } => {
                let at = self.shards[loc.shard].floor(now);
                params.decision(0, at, cost).lagged(at - now)
            }
        }
    }
}
