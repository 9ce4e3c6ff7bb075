//! The claim of a slot for a new key in a table that has no free one: the scan that
//! ranks a key's candidates, the refusal of a full table, and the claim locks.

use crate::decision::Decision;
use crate::sync::{lock, spin_loop, AtomicU64, Mutex, MutexGuard, Ordering};

/// What a [`KeyedRateLimiter`](crate::keyed::KeyedRateLimiter) does with a new key when every slot it may use holds a
/// key whose state still says something (none is idle).
///
/// Idle entries (a full bucket again, expired groups, an empty log) are always
/// reclaimed first, silently: they decide exactly as a fresh key would. The policy
/// only applies when a new key finds no idle slot.
///
/// | policy | new key | existing keys | under a flood of new keys |
/// |---|---|---|---|
/// | `Evict` (default) | tracked | the entry that has used least is forgotten | a throttled key is forgotten only when every entry in its groups has used as much |
/// | `Deny` | refused (a denial) | never forgotten | throttled keys stay throttled; new keys wait for a slot to go idle |
/// | `Allow` | admitted untracked | never forgotten | throttled keys stay throttled; new keys are not limited until a slot frees |
///
/// # Example
///
/// ```
/// use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, OnFull, Quota};
///
/// let limiter = KeyedRateLimiter::<u64, _>::builder(Algorithm::TokenBucket, Quota::per_hour(1))
///     .max_keys(1)
///     .on_full(OnFull::Deny)
///     .clock(ManualClock::new())
///     .build()?;
/// assert!(limiter.check(&1).is_allowed());
/// assert!(limiter.check(&2).is_allowed()); // the table keeps a little slack
/// assert!(!limiter.check(&3).is_allowed()); // full: the new key is refused
/// assert!(!limiter.check(&1).is_allowed()); // and key 1 is still throttled
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OnFull {
    /// Forget the entry whose loss can over-admit least, what it has used (a bucket's
    /// debt, a window's count, the log's entries in the period; of equals, the one that
    /// goes idle soonest), and track the new key in its place; counted in
    /// [`Stats::evictions`](crate::keyed::Stats::evictions). A throttled key is never forgotten while an entry that has
    /// used less can go.
    #[default]
    Evict,
    /// Refuse the new key: a flood of new keys can never reset a throttled one.
    /// The denial's [`retry_after`](Decision::retry_after) is the soonest time an
    /// entry in the key's groups frees its quota (a hint: other new keys may take the
    /// slot first). Counted in [`Stats::refused`](crate::keyed::Stats::refused) (and [`Stats::rejected`](crate::keyed::Stats::rejected)).
    Deny,
    /// Admit the new key's request without tracking it; counted in
    /// [`Stats::untracked`](crate::keyed::Stats::untracked) (and [`Stats::allowed`](crate::keyed::Stats::allowed)).
    Allow,
}

/// What a replacing claim learns from one pass over a key's two groups: the first
/// free (empty or idle) slot of each, how many live entries each holds, and, once
/// ranked, the live entry to evict and the soonest idle stamp.
///
/// Entries are ranked by what forgetting them can over-admit: what they have used at
/// the claim's reading (a bucket's debt, a window's count, the log's entries in the
/// period), ties broken by the *idle stamp* (the time from which the state says
/// nothing any more: a token bucket's theoretical arrival time, the end of a window,
/// the newest logged admission plus the period), the soonest idle first. Each
/// algorithm reads both off the state as one number ordered that way (its
/// `evict_rank`; see `algorithm::Ranking`), with no step run, so ranking an entry is
/// one comparison. The victim is the entry of lowest rank: a throttled key is never
/// evicted while an entry that has used less is there to go. A new key refused under
/// `Deny` can retry when the soonest ranked entry goes idle, whichever the victim
/// would have been.
pub(crate) struct ClaimScan<S> {
    live: [usize; 2],
    free: [Option<S>; 2],
    /// The live entry of lowest rank.
    victim: Option<S>,
    /// Its rank (`u128::MAX` before any).
    lowest: u128,
    /// The earliest idle stamp of the ranked entries (`u64::MAX` before any).
    soonest: u64,
}

impl<S: Copy> ClaimScan<S> {
    /// An empty scan.
    pub(crate) fn new() -> Self {
        ClaimScan {
            live: [0; 2],
            free: [None; 2],
            victim: None,
            lowest: u128::MAX,
            soonest: u64::MAX,
        }
    }

    /// A free slot in group `w` (the first one seen is kept).
    pub(crate) fn free(&mut self, w: usize, slot: S) {
        self.free[w].get_or_insert(slot);
    }

    /// A live entry in group `w`.
    pub(crate) fn live(&mut self, w: usize) {
        self.live[w] += 1;
    }

    /// Ranks a live entry: `rank` orders as (what it has used, its idle stamp) and is
    /// comparable within one table at one reading (below `u128::MAX`); `idle_at` is
    /// its idle stamp.
    #[inline]
    pub(crate) fn rank(&mut self, slot: S, rank: u128, idle_at: u64) {
        if rank < self.lowest {
            self.lowest = rank;
            self.victim = Some(slot);
        }
        self.soonest = self.soonest.min(idle_at);
    }

    /// [`rank`](Self::rank) for an entry whose rank is at least `floor`, computing it
    /// (`rank()`) only when that could make the entry the victim.
    #[inline]
    pub(crate) fn rank_above(
        &mut self,
        slot: S,
        floor: u128,
        idle_at: u64,
        rank: impl FnOnce() -> u128,
    ) {
        if floor < self.lowest {
            self.rank(slot, rank(), idle_at);
        } else {
            self.soonest = self.soonest.min(idle_at);
        }
    }

    /// Where to claim: the first free slot of the group with fewer live entries (two
    /// choices balance the groups), or of the only group with one.
    pub(crate) fn target(&self) -> Option<S> {
        match self.free {
            [Some(a), Some(b)] => Some(if self.live[1] < self.live[0] { b } else { a }),
            [a, b] => a.or(b),
        }
    }

    /// The ranked live entry that has used least (of those, the soonest idle).
    pub(crate) fn victim(&self) -> Option<S> {
        self.victim
    }

    /// The denial of a refused new key at `now`: retry when the soonest ranked entry
    /// goes idle (at least 1 ns).
    pub(crate) fn refusal(&self, burst: u32, now: u64) -> Decision {
        refusal(burst, self.soonest(), now)
    }

    /// The soonest idle stamp of the ranked entries, when any was ranked.
    pub(crate) fn soonest(&self) -> Option<u64> {
        self.victim.map(|_| self.soonest)
    }
}

/// The denial of a new key refused at `now` by a full table: retry when the soonest
/// live entry of its groups goes idle, at `soonest` (at least 1 ns from now).
pub(crate) fn refusal(burst: u32, soonest: Option<u64>, now: u64) -> Decision {
    let wait = soonest.map_or(1, |at| at.saturating_sub(now)).max(1);
    Decision::deny(burst, 0, wait, wait)
}

/// The locks that serialize the claims replacing an entry (idle reclaim, eviction).
///
/// All replacing claims of one key take the same lock (chosen by its fingerprint): a
/// key is never installed twice. Claims of different keys usually take different locks
/// and run in parallel, even within one shard: after warm-up, when every new key replaces
/// an idle entry, a flood of new keys is not serialized on one lock per shard. Two
/// claims of different keys that pick the same slot are settled by the slot's own
/// compare-and-swap (packed table) or lock (locked table): the loser looks again.
///
/// Each lock is a sequence number (a seqlock's): even when free, odd while held, one
/// more on every acquisition and every release, so it never repeats. A claim may read
/// it ([`ClaimLock::seen`]), rank its candidates without the lock, and then take the
/// lock with one compare-and-swap only if nobody took it since
/// ([`ClaimLock::lock_if_unchanged`]): then no claim of the key installed anything since
/// the ranking began, and what the ranking saw of the key (absent) still holds.
/// Otherwise the claim waits for the lock ([`ClaimLock::lock`]) and rescans under it.
/// Claims that find the lock held queue on a mutex, so that only the first of them
/// spins on the sequence number.
pub(crate) struct ClaimLocks {
    locks: Box<[ClaimLock]>,
}

/// One claim lock (see [`ClaimLocks`]): 16 bytes on Linux.
pub(crate) struct ClaimLock {
    /// The sequence number: odd while the lock is held.
    seq: AtomicU64,
    /// The queue of the claims waiting for the lock.
    waiting: Mutex<()>,
}

/// A held [`ClaimLock`]; released when dropped.
pub(crate) struct ClaimGuard<'a> {
    lock: &'a ClaimLock,
    /// The (odd) sequence number the lock was taken at.
    held: u64,
    /// The place at the head of the queue of a claim that waited (released after the
    /// lock: this struct's fields drop after its `drop`).
    _queue: Option<MutexGuard<'a, ()>>,
}

impl ClaimLock {
    /// The lock's sequence number now, for [`lock_if_unchanged`](Self::lock_if_unchanged)
    /// (read before the loads it vouches for).
    #[inline]
    pub(crate) fn seen(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }

    /// The lock, taken only if nobody has held it since its sequence number read
    /// `seen` (free then): every claim that held it before released it before that
    /// read, so whatever it installed is visible to loads made after the read. `None`
    /// when it was held or has been taken since.
    #[inline]
    pub(crate) fn lock_if_unchanged(&self, seen: u64) -> Option<ClaimGuard<'_>> {
        self.take(seen, None).ok()
    }

    /// The lock, waiting for it when held: first in the queue of waiting claims, then
    /// for the claim holding it (a claim holds it for one scan of a key's groups at
    /// most). Free, it is one compare-and-swap.
    pub(crate) fn lock(&self) -> ClaimGuard<'_> {
        if let Ok(guard) = self.take(self.seq.load(Ordering::Relaxed), None) {
            return guard;
        }
        let mut queue = Some(lock(&self.waiting));
        let mut spins = 0u32;
        loop {
            match self.take(self.seq.load(Ordering::Relaxed), queue.take()) {
                Ok(guard) => return guard,
                Err(back) => queue = back,
            }
            spins = spins.saturating_add(1);
            if cfg!(not(tollgate_loom)) && spins > 64 {
                // The holder may have lost its core: give ours back. (Under loom,
                // `spin_loop` yields to the model's other threads.)
                std::thread::yield_now();
            } else {
                spin_loop();
            }
        }
    }

    /// The lock at sequence number `seen`, if free there and unchanged; `queue` is
    /// handed back when it is not taken.
    #[inline]
    fn take<'a>(
        &'a self,
        seen: u64,
        queue: Option<MutexGuard<'a, ()>>,
    ) -> Result<ClaimGuard<'a>, Option<MutexGuard<'a, ()>>> {
        if seen & 1 != 0 {
            return Err(queue);
        }
        match self
            .seq
            .compare_exchange(seen, seen + 1, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Ok(ClaimGuard {
                lock: self,
                held: seen + 1,
                _queue: queue,
            }),
            Err(_) => Err(queue),
        }
    }
}

impl Drop for ClaimGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // Only the holder writes the sequence number: a plain store releases it.
        self.lock.seq.store(self.held + 1, Ordering::Release);
    }
}

impl ClaimLocks {
    /// One lock per 128 slots (0.125 byte per slot), a power of two from 1 to 2,048.
    fn count(slots: usize) -> usize {
        ((slots / 64).clamp(1, 4096).next_power_of_two().min(4096) / 2).max(1)
    }

    /// The locks for a table of `slots` slots.
    pub(crate) fn new(slots: usize) -> Self {
        ClaimLocks {
            locks: (0..Self::count(slots))
                .map(|_| ClaimLock {
                    seq: AtomicU64::new(0),
                    waiting: Mutex::new(()),
                })
                .collect(),
        }
    }

    /// Bytes of the locks of a table of `slots` slots.
    pub(crate) fn bytes(slots: usize) -> usize {
        Self::count(slots) * std::mem::size_of::<ClaimLock>()
    }

    /// The lock of the key with fingerprint `fp`: its bits mixed, so that keys sharing
    /// a shard or a group spread over the locks.
    #[inline]
    pub(crate) fn of(&self, fp: u64) -> &ClaimLock {
        let mixed = fp.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
        &self.locks[mixed as usize & (self.locks.len() - 1)]
    }
}
