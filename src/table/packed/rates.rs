//! Rate classes: which bucket interval wrote a key's state.
//!
//! A keyed token or leaky bucket may be decided under several quotas: its tiers, and
//! each quota `set_quota` installs. Its state is a time (`TAT`), and what the key owes
//! (`TAT − now`) is counted in the interval of the quota that wrote it. A request under
//! another quota converts that debt into its own requests first (Bucket4j's
//! "additive" carry-over; see `Gcra::convert`), so it must know which interval wrote
//! the state.
//!
//! Each distinct interval a table decides with gets a *class* (0 to 15), kept in every
//! packed slot's key word (`table::generation`) and in the bucket's parameters. A
//! request whose parameters' class differs from its entry's converts the state from
//! the interval this registry holds for the entry's class, and writes its own class.
//!
//! Classes are given out by build and `set_quota` (under the limiter's setting lock):
//! an interval already registered keeps its class; a new one takes a class never used.
//! When all sixteen are taken, `set_quota` retires the classes no tier uses any more
//! and reuses them: it marks them retiring, waits until no write that may put a class
//! into a slot is in flight, converts every entry of the retiring classes into tier 0's
//! class (one pass over the table), then frees them.
//!
//! Class 0 is never retired. It is the class of a table built with one rate, whose
//! parameters are not "mixed" and skip the registry on a hit (they compare the slot's
//! class with 0 only): a request that read them before the table's first rate change
//! may still be deciding long after, and class 0 standing for that rate forever makes
//! what it writes right (it converts any other class's state into class 0 on the slow
//! path, as a request of that quota).
//!
//! The retirement protocol. A write that may put its parameters' class into a slot (a
//! new key, a state converted from another class: in a table of several rates,
//! `PackedTable::run_from` and the fast path's insert into an empty slot) is
//! registered first
//! ([`Rates::enter`]: a count of writers, then the retiring mask, both sequentially
//! consistent). Retiring sets the mask, then waits for the count to reach zero. In the
//! single order of those four operations either the writer sees its class retiring
//! (and starts over with its tier's current parameters, whose class is not retiring)
//! or the retirement sees the writer and waits for it, so the conversion pass that
//! follows finds its write. Any other write keeps the class its slot already holds, and
//! its compare-and-swap fails if the pass converted that slot. So no state of a retired
//! class survives the pass, and a class is reused only once it holds nothing: a
//! request that read an old quota can never write a state the table would misread
//! under a later rate that took over its class.

use super::{fp_of, pack, PackedTable};
use crate::algorithm::gcra::Gcra;
use crate::algorithm::packed::PackedAlgorithm;
use crate::error::ConfigError;
use crate::sync::{AtomicU64, Ordering};
use crate::table::generation;

/// Rate classes per table.
pub(crate) const CLASSES: usize = 16;

/// The interval (ns) of each rate class; 0 for a class never given out.
pub(crate) struct Rates {
    intervals: [AtomicU64; CLASSES],
    /// Bit `c`: class `c` is being retired (see the module docs).
    retiring: AtomicU64,
    /// Writes in flight that may put a class into a slot ([`Rates::enter`]).
    writers: AtomicU64,
}

/// A registered write of a rate class into a slot ([`Rates::enter`]); unregistered
/// when dropped.
pub(crate) struct Writing<'a>(&'a Rates);

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.0.writers.fetch_sub(1, Ordering::Release);
    }
}

impl Rates {
    /// Registers every bucket tier's interval, giving each distinct interval a class
    /// (in `tiers`' parameters). The groups have no classes: their states count
    /// requests, which carry over as they are.
    pub(crate) fn new<A: PackedAlgorithm>(tiers: &mut [A]) -> Result<Self, ConfigError> {
        let rates = Rates {
            intervals: std::array::from_fn(|_| AtomicU64::new(0)),
            retiring: AtomicU64::new(0),
            writers: AtomicU64::new(0),
        };
        for tier in tiers.iter_mut() {
            if let Some(g) = tier.gcra_mut() {
                let class = match rates.find(g.interval()) {
                    Some(c) => c,
                    None => rates.unused().ok_or(ConfigError::TooManyRates {
                        rates: CLASSES + 1,
                        max: CLASSES,
                    })?,
                };
                rates.intervals[class as usize].store(g.interval(), Ordering::Release);
                *g = g.with_class(class);
            }
        }
        if rates.find_used(1) {
            for tier in tiers.iter_mut() {
                if let Some(g) = tier.gcra_mut() {
                    *g = g.with_mixed();
                }
            }
        }
        Ok(rates)
    }

    /// The interval of class `class` (0 when never given out: then a state of that
    /// class owes nothing to convert).
    #[inline]
    pub(crate) fn interval(&self, class: u8) -> u64 {
        self.intervals[usize::from(class) % CLASSES].load(Ordering::Acquire)
    }

    /// The class holding `interval`, if any.
    pub(crate) fn find(&self, interval: u64) -> Option<u8> {
        (0..CLASSES as u8).find(|&c| self.interval(c) == interval)
    }

    /// Whether more than `n` classes have been given out.
    fn find_used(&self, n: usize) -> bool {
        (0..CLASSES as u8)
            .filter(|&c| self.interval(c) != 0)
            .count()
            > n
    }

    /// A class never given out.
    pub(crate) fn unused(&self) -> Option<u8> {
        (0..CLASSES as u8).find(|&c| self.interval(c) == 0)
    }

    /// Gives class `class` to `interval` (the class is free: never given out, or
    /// retired and swept).
    pub(crate) fn give(&self, class: u8, interval: u64) {
        self.intervals[usize::from(class)].store(interval, Ordering::Release);
    }

    /// Whether `g`'s class still stands for `g`'s rate (it was not retired and given
    /// to another rate since `g` was read).
    #[inline(always)]
    pub(crate) fn stands_for(&self, g: &Gcra) -> bool {
        self.interval(g.class()) == g.interval()
    }

    /// Registers a write that may put class `class` into a slot, for as long as the
    /// result lives; `None` when the class is being retired.
    pub(crate) fn enter(&self, class: u8) -> Option<Writing<'_>> {
        self.writers.fetch_add(1, Ordering::SeqCst);
        let writing = Writing(self);
        (self.retiring.load(Ordering::SeqCst) & (1 << class) == 0).then_some(writing)
    }

    /// Registers a write of `g`'s class ([`enter`](Self::enter)) that will write it
    /// for `g`'s rate: `None` when `g` is stale (its class is being retired, or stands
    /// for another rate), and the request starts over with its tier's current
    /// parameters. Registered, the class keeps standing for `g`'s rate.
    pub(crate) fn write(&self, g: &Gcra) -> Option<Writing<'_>> {
        let writing = self.enter(g.class())?;
        self.stands_for(g).then_some(writing)
    }

    /// Retires the classes `retire` accepts: marks them, waits until no registered
    /// write is in flight, runs `sweep` (which converts every state of them), then
    /// frees them (see the module docs).
    pub(crate) fn retire(&self, retire: impl Fn(u8) -> bool, sweep: impl FnOnce()) {
        let mask = (0..CLASSES as u8)
            .filter(|&c| retire(c))
            .fold(0u64, |m, c| m | 1 << c);
        self.retiring.fetch_or(mask, Ordering::SeqCst);
        while self.writers.load(Ordering::SeqCst) != 0 {
            crate::sync::spin_loop();
        }
        sweep();
        for c in 0..CLASSES {
            if mask & 1 << c != 0 {
                self.intervals[c].store(0, Ordering::Release);
            }
        }
        self.retiring.fetch_and(!mask, Ordering::Release);
    }

    /// The bytes of the registry.
    pub(crate) const BYTES: usize = (CLASSES + 2) * std::mem::size_of::<AtomicU64>();
}

/// The table's side of rate classes: giving `set_quota`'s parameters a class, and
/// converting states between classes (one pass over the slots).
impl<A: PackedAlgorithm> PackedTable<A> {
    /// `p`, about to replace tier `tier`'s parameters (under the limiter's setting
    /// lock), with its rate class (see `table::packed::rates`): the class of an interval
    /// already registered, else a class never given out. When every class is taken,
    /// the states of classes no tier uses any more are first converted into tier 0's
    /// class at `now` ([`sweep`](Self::sweep)) and those classes reused.
    ///
    /// # Errors
    ///
    /// [`ConfigError::TooManyRates`](crate::error::ConfigError::TooManyRates) when every
    /// class is in use by a tier.
    pub(crate) fn classify(
        &self,
        tier: usize,
        p: A,
        now: u64,
    ) -> Result<A, crate::error::ConfigError> {
        let mut p = self.pick_class(tier, p, now)?;
        let Some(g) = p.gcra_mut() else {
            return Ok(p);
        };
        // From the first change of rate on, hits compare classes: every tier is
        // republished as mixed before the new class is (see `Gcra::mixed`).
        let old = self.tiers().get(tier).gcra();
        if !old.is_some_and(|o| o.mixed() || o.class() != g.class()) {
            return Ok(p);
        }
        for (i, mut t) in self.tiers().all().enumerate().collect::<Vec<_>>() {
            if let Some(b) = t.gcra_mut().filter(|b| !b.mixed()) {
                *b = b.with_mixed();
                self.tiers().set(i, t);
            }
        }
        *g = g.with_mixed();
        Ok(p)
    }

    /// [`classify`](Self::classify)'s choice of class.
    fn pick_class(&self, tier: usize, mut p: A, now: u64) -> Result<A, crate::error::ConfigError> {
        let Some(g) = p.gcra_mut() else {
            return Ok(p);
        };
        let interval = g.interval();
        if let Some(c) = self
            .rates()
            .find(interval)
            .or_else(|| self.rates().unused())
        {
            self.rates().give(c, interval);
            *g = g.with_class(c);
            return Ok(p);
        }
        let tiers: Vec<Gcra> = self.tiers().all().filter_map(|t| t.gcra()).collect();
        if tiers.is_empty() {
            return Ok(p);
        }
        // Every tier's class is kept, the replaced tier's too while another class
        // can be freed: its parameters stay installed until this change publishes
        // the new ones, and a request under them that meets a retiring class starts
        // over, so retiring it now would make its requests wait for the pass.
        let mut keep = [false; CLASSES];
        for t in &tiers {
            keep[usize::from(t.class())] = true;
        }
        if keep.iter().all(|&k| k) {
            // Sixteen tiers' rates: the replaced tier's class goes, unless shared.
            let own = tiers[tier].class();
            keep[usize::from(own)] = tiers
                .iter()
                .enumerate()
                .any(|(j, o)| j != tier && o.class() == own);
        }
        // Tier 0's current parameters (still installed) receive the retired states.
        let into = tiers[0];
        keep[usize::from(into.class())] = true;
        // Class 0 is never retired: the buckets of one rate (from before the table's
        // first rate change) are of class 0 and do not check the registry.
        keep[0] = true;
        let retired = |c: u8| !keep[usize::from(c)];
        if (0..CLASSES as u8).any(retired) {
            self.rates()
                .retire(retired, || self.sweep(retired, into, now));
        }
        let c = self
            .rates()
            .unused()
            .ok_or(crate::error::ConfigError::TooManyRates {
                rates: CLASSES + 1,
                max: CLASSES,
            })?;
        self.rates().give(c, interval);
        *g = g.with_class(c);
        Ok(p)
    }

    /// `set_quota`'s carry-over, once tier `tier`'s new bucket parameters `into` are
    /// installed: when no other tier shares the class `old` of its previous ones, every
    /// state of that class is this tier's, and is converted into `into`'s class at `now`
    /// (as Go's x/time/rate and Bucket4j do at a rate change: the debt is counted in
    /// the new quota from the change on). A state written meanwhile by a request that
    /// read the old quota keeps the old class and converts at its next decision.
    pub(crate) fn carry_over(&self, tier: usize, old: A, now: u64) {
        let (Some(old), Some(into)) = (old.gcra(), self.tiers().get(tier).gcra()) else {
            return;
        };
        let shared = self
            .tiers()
            .all()
            .enumerate()
            .any(|(i, t)| i != tier && t.gcra().is_some_and(|g| g.class() == old.class()));
        if old.class() != into.class() && !shared {
            self.sweep(|c| c == old.class(), into, now);
        }
    }

    /// Converts every state of a rate class `from` accepts into `into`'s class at
    /// `now` (what each key owes carries over in requests), one compare-and-swap per
    /// slot; deciders are never blocked. A converted state takes a new generation (as
    /// every conversion does, see `update`): bookings counted at the old rate give
    /// nothing back to it.
    fn sweep(&self, from: impl Fn(u8) -> bool, into: Gcra, now: u64) {
        for (i, slot) in self.slot_words().enumerate() {
            loop {
                let w = slot.load(Ordering::Acquire);
                let kw = fp_of(w);
                if kw == 0 || !from(generation::class_of(kw)) {
                    break;
                }
                let (state, kw) = self.adopt(w, Some(into), now);
                let (kw, _) = self.regenerate(kw, self.geo.shard_of(i));
                if slot
                    .compare_exchange(w, pack(kw, state), Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    break;
                }
            }
        }
    }
}
