//! Per-shard words (the reclaim stamp, the epoch) and the per-thread stripes of the
//! counters: the two every decision bumps, and the table's events (evictions, idle
//! reclaims, keys admitted untracked or refused).

use crate::sync::{AtomicU64, Ordering};
use crossbeam_utils::CachePadded;

/// Per-shard words, on their own cache lines: the reclaim stamp and the epoch.
#[derive(Debug, Default)]
pub(crate) struct Shard {
    /// The newest clock reading at which an entry of this shard was reclaimed or
    /// evicted (a running maximum). A key found missing is decided no earlier than
    /// this: its old entry, if it had one here, was idle (or forgotten) at that
    /// reading, so a request that read the clock before the reclaim, or on a core
    /// whose clock lags, cannot decide the key fresh while its old state still held
    /// quota back. Raised before the claim's store, read after a scan.
    pub(crate) reclaimed_at: AtomicU64,
    /// The shard's epoch: a count of the events after which one of its keys has a new
    /// state (a reset or removal, a reclaim or an eviction), each of which takes the
    /// next value after loading the entry it replaces. New states are numbered from it
    /// (see `algorithm::booking::Origin`), so that a booking is given back only to the state
    /// it was made on.
    pub(crate) epoch: AtomicU64,
}

/// The counters summed over every shard.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Totals {
    pub(crate) allowed: u64,
    pub(crate) rejected: u64,
    pub(crate) evictions: u64,
    pub(crate) idle_reclaims: u64,
    pub(crate) untracked: u64,
    pub(crate) refused: u64,
}

impl Shard {
    /// Records a reclaim at `now`, before the slot is handed over.
    #[inline]
    pub(crate) fn stamp(&self, now: u64) {
        self.reclaimed_at.fetch_max(now, Ordering::AcqRel);
    }

    /// The shard's epoch now (for a state installed in an empty slot, and for a
    /// booking, read before it loads the state it books on).
    #[inline]
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The next epoch, for an event that replaces a state (taken after loading it).
    #[inline]
    pub(crate) fn next_epoch(&self) -> u64 {
        self.epoch.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The earliest reading at which a key missing from this shard may be decided.
    #[inline]
    pub(crate) fn floor(&self, now: u64) -> u64 {
        now.max(self.reclaimed_at.load(Ordering::Acquire))
    }
}

/// A table event, counted in the stripes beside the decisions (see [`Stripes::event`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// A live entry forgotten to make room (`OnFull::Evict`).
    Eviction = 0,
    /// An idle entry's slot given to a new key.
    IdleReclaim = 1,
    /// A new key admitted without an entry (`OnFull::Allow`).
    Untracked = 2,
    /// A new key refused for want of room (`OnFull::Deny`).
    Refused = 3,
}

/// Stripes of the two counters every decision bumps (`allowed`, `rejected`), and of
/// the table's [`Event`]s.
///
/// Each of the first [`STRIPES`] threads to count (an id is taken on a thread's first
/// decision and given back when it exits) owns one stripe and is its only writer, so it
/// bumps its counters with a plain load and store: no locked instruction, which on x86
/// would wait for the slot's compare-and-swap to drain and cost more than the rest of
/// the decision. Threads beyond that share one overflow stripe with `fetch_add`.
/// The events were per-shard counters bumped with `fetch_add`: one locked instruction
/// per new key of a flood into a full table, under every `OnFull` policy (a `Deny`
/// flood's only one).
#[derive(Debug)]
pub(crate) struct Stripes {
    /// `STRIPES` owned stripes, then the shared overflow stripe.
    stripes: Box<[CachePadded<Stripe>]>,
    /// Whether decisions are counted (the builder's `stats(false)` turns the
    /// per-decision update off).
    on: bool,
}

/// One thread's counters.
#[derive(Debug, Default)]
struct Stripe {
    allowed: AtomicU64,
    rejected: AtomicU64,
    /// Indexed by [`Event`].
    events: [AtomicU64; 4],
}

/// Owned counter stripes per table; threads past this many share the overflow stripe.
pub(crate) const STRIPES: usize = 32;

/// Thread ids `0..STRIPES` for owned stripes, recycled when threads exit.
#[cfg(not(tollgate_loom))]
mod thread_id {
    use super::STRIPES;
    use crate::sync::StdMutex as Mutex;
    use std::cell::Cell;

    /// Ids given back by exited threads.
    static FREE: Mutex<Vec<usize>> = Mutex::new(Vec::new());
    /// The next never-used id.
    static NEXT: Mutex<usize> = Mutex::new(0);

    /// No id taken yet.
    const UNSET: usize = usize::MAX;

    thread_local! {
        /// This thread's id. Constant-initialized and without a destructor, so reading
        /// it is one thread-local load (no lazy-initialization check on the hot path).
        static ID: Cell<usize> = const { Cell::new(UNSET) };
        /// Gives the id back when the thread exits.
        static RELEASE: Release = const { Release };
    }

    /// Gives the thread's id back when dropped (at thread exit).
    struct Release;

    impl Drop for Release {
        fn drop(&mut self) {
            let id = ID.with(|c| c.replace(STRIPES));
            if id < STRIPES {
                crate::sync::lock_std(&FREE).push(id);
            }
        }
    }

    /// Takes an id for this thread and arranges for it to be given back.
    #[cold]
    fn acquire() -> usize {
        // Registering the release fails only while the thread is exiting: it then
        // counts in the shared overflow stripe.
        if RELEASE.try_with(|_| ()).is_err() {
            ID.with(|c| c.set(STRIPES));
            return STRIPES;
        }
        let id = match crate::sync::lock_std(&FREE).pop() {
            Some(id) => id,
            None => {
                let mut next = crate::sync::lock_std(&NEXT);
                if *next < STRIPES {
                    *next += 1;
                    *next - 1
                } else {
                    STRIPES
                }
            }
        };
        ID.with(|c| c.set(id));
        id
    }

    /// This thread's stripe: `< STRIPES` when it owns one, `STRIPES` (the shared
    /// overflow stripe) otherwise, including while the thread is exiting.
    #[inline]
    pub(super) fn current() -> usize {
        let id = ID.with(Cell::get);
        if id == UNSET {
            acquire()
        } else {
            id
        }
    }
}

impl Stripes {
    /// Stripes that count decisions when `on`.
    pub(crate) fn new(on: bool) -> Self {
        Stripes {
            stripes: (0..=STRIPES)
                .map(|_| CachePadded::new(Stripe::default()))
                .collect(),
            on,
        }
    }

    /// Counts a decision of cost `cost` (peeks of cost 0 are not counted; nothing is
    /// when the stripes are off).
    #[inline]
    pub(crate) fn count(&self, cost: u32, d: &crate::decision::Decision) {
        if cost == 0 || !self.on {
            return;
        }
        let allowed = d.is_allowed();
        self.bump(|s| if allowed { &s.allowed } else { &s.rejected });
    }

    /// Counts one table event: always, whatever `stats` says (the builder's switch is
    /// for the per-decision counters; events are rare but under a flood).
    #[inline]
    pub(crate) fn event(&self, e: Event) {
        self.bump(|s| &s.events[e as usize]);
    }

    /// Adds one to the counter `which` picks in this thread's stripe.
    #[inline(always)]
    fn bump(&self, which: impl Fn(&Stripe) -> &AtomicU64) {
        #[cfg(not(tollgate_loom))]
        let id = thread_id::current();
        // Under loom every model thread shares the overflow stripe.
        #[cfg(tollgate_loom)]
        let id = STRIPES;
        let counter = which(&self.stripes[id]);
        if id < STRIPES {
            // This thread is the stripe's only writer (see `thread_id`): a plain
            // increment loses nothing.
            counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        } else {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Bytes of the stripes.
    pub(crate) fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.stripes)
    }

    /// What [`memory_bytes`](Self::memory_bytes) reports, known before allocating.
    pub(crate) const BYTES: usize = (STRIPES + 1) * std::mem::size_of::<CachePadded<Stripe>>();
}

pub(crate) fn new_shards(n: usize) -> Box<[CachePadded<Shard>]> {
    (0..n).map(|_| CachePadded::new(Shard::default())).collect()
}

/// Sums the counters of `stripes`.
pub(crate) fn totals(stripes: &Stripes) -> Totals {
    let mut t = Totals::default();
    for s in stripes.stripes.iter() {
        let event = |e: Event| s.events[e as usize].load(Ordering::Relaxed);
        t.allowed += s.allowed.load(Ordering::Relaxed);
        t.rejected += s.rejected.load(Ordering::Relaxed);
        t.evictions += event(Event::Eviction);
        t.idle_reclaims += event(Event::IdleReclaim);
        t.untracked += event(Event::Untracked);
        t.refused += event(Event::Refused);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events are counted with the decision counters off (`stats(false)`), each under
    /// its own name.
    #[test]
    fn events_are_counted_whatever_stats_says() {
        let stripes = Stripes::new(false);
        stripes.count(1, &crate::decision::Decision::allow(1, 0, 0, 0));
        for (n, e) in [
            Event::Eviction,
            Event::IdleReclaim,
            Event::Untracked,
            Event::Refused,
        ]
        .into_iter()
        .enumerate()
        {
            for _ in 0..=n {
                stripes.event(e);
            }
        }
        let t = totals(&stripes);
        assert_eq!(
            (
                t.allowed,
                t.evictions,
                t.idle_reclaims,
                t.untracked,
                t.refused
            ),
            (0, 1, 2, 3, 4)
        );
    }

    /// More threads than owned stripes, some exiting and handing their ids on while
    /// others count: no increment is lost.
    #[test]
    fn stripes_count_every_decision_from_any_number_of_threads() {
        let stripes = crate::sync::Arc::new(Stripes::new(true));
        let ok = crate::decision::Decision::allow(1, 0, 0, 0);
        let no = crate::decision::Decision::deny(1, 0, 1, 1);
        for round in 0..3 {
            let handles: Vec<_> = (0..(STRIPES + 8))
                .map(|i| {
                    let s = stripes.clone();
                    std::thread::spawn(move || {
                        for _ in 0..1000 {
                            s.count(1, if i % 2 == 0 { &ok } else { &no });
                            if i % 2 == 1 {
                                s.event(Event::Refused);
                            }
                        }
                        s.count(0, &ok); // peeks are not counted
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
            let t = totals(&stripes);
            let per_round = (STRIPES as u64 + 8) / 2 * 1000;
            assert_eq!(
                (t.allowed, t.rejected, t.refused),
                (
                    per_round * (round + 1),
                    per_round * (round + 1),
                    per_round * (round + 1)
                )
            );
            assert_eq!((t.evictions, t.idle_reclaims, t.untracked), (0, 0, 0));
        }
    }
}
