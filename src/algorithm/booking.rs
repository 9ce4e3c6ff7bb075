//! What a reservation booked, so that a cancel can give back exactly its share.

use crate::decision::Decision;

/// The longest wait a reservation may book (about 36 years): with readings clamped to
/// [`HORIZON_NS`](super::HORIZON_NS), every state a reservation writes stays far
/// enough from `2^64` that the algorithms' sums cannot overflow.
pub(crate) const MAX_WAIT_NS: u64 = super::HORIZON_NS / 4;

/// Where a booking was made, so that it can be given back (the limiter, with the
/// key's hash for a keyed one).
pub(crate) trait Ledger: Sync {
    /// Gives `booking` (made for the key hashed to `key`, on the state `origin`
    /// identifies) back: a cancel as far as no later booking depends on it, and only
    /// while the booking is not yet due at the ledger's clock (`due`, engine ns), as
    /// Go's x/time/rate `CancelAt` does; a roll-back (`always`) exactly what it took,
    /// due or not. Nothing when the key's state is no longer the one booked on (reset,
    /// removed, reclaimed or evicted since).
    fn refund(&self, key: u64, booking: &Booking, origin: Origin, due: u64, always: bool);
}

/// What identifies the state a booking was made on, so that giving it back never
/// reaches a state created after a `reset`, `remove`, reclaim or eviction of the key:
/// not a value of the state (a theoretical arrival time, a window index, a timestamp),
/// which a state rebuilt later can match by chance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A [`RateLimiter`](crate::RateLimiter)'s one state, which is never replaced.
    Cell {
        /// The bucket interval (ns) the booking was counted in, 0 for the others: a
        /// state converted to another interval since gives nothing back (as a keyed
        /// slot's rate class).
        interval: u64,
        /// The stamp of the parameters the booking was made with (a bucket's; 0 for
        /// the others): a state converted by a `set_quota` published after them gives
        /// nothing back, even once converted back to the booking's interval.
        stamp: u64,
    },
    /// A packed keyed table's entry: the generation in its slot's key word, and the
    /// shard's epoch read before the booking (see `table::counters`'s protocol and ARCHITECTURE.md).
    Slot {
        /// The entry's generation (1 to 65,535).
        gen: u16,
        /// The rate class the booking was counted in (see `table::packed::rates`): a state
        /// converted to another since gives nothing back.
        class: u8,
        /// The shard's epoch before the booking.
        epoch: u64,
    },
    /// A sliding-log table's entry: the number its shard gave this incarnation of the
    /// key (unique: a 64-bit count never wraps).
    Entry {
        /// The incarnation.
        gen: u64,
    },
}

/// The capacity a reservation took from one state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Booking {
    /// Nothing to give back (an untracked admission, or already given back).
    Nothing,
    /// GCRA: the theoretical arrival time the booking left, and the time it added.
    Gcra {
        /// `TAT` right after the booking.
        tat: u64,
        /// `cost · T`, ns.
        weight: u64,
        /// When the booked request may proceed plus the burst's span `τ` of the
        /// quota it was booked under (engine ns): a later booking that leaves `TAT`
        /// past this acts after it, by the difference (what a cancel measures).
        acts: u64,
    },
    /// A window algorithm: the window index booked into, and the cost.
    Window {
        /// The window's index.
        index: u64,
        /// The cost counted in it.
        cost: u32,
        /// For a booking into a window later than its reading's, the state words
        /// around it (see [`Later`]); `None` for one counted in the reading's window.
        later: Option<Later>,
    },
    /// The sliding log: the timestamp logged `cost` times.
    Log {
        /// The logged time.
        at: u64,
        /// How many entries.
        cost: u32,
        /// The entries the booking overwrote (its ring's `cost` oldest), which a
        /// refund writes back: the log's own admission times, never one made up.
        prior: Overwritten,
        /// The ring's write count after the booking (see `SlidingLog::refund`).
        writes: u32,
        /// Whether it was booked for a time after the time it was decided at (its
        /// reading, or the state's time when the reading was older).
        future: bool,
        /// Whether a booking for a later time was pending before it (the ring's
        /// `booked` mark, ahead of its reading): a refund as the last write restores
        /// the mark from this, never from the refund's reading.
        booked: bool,
        /// The ring's `overdrawn` mark before the booking (a whole refund as the last
        /// write restores it).
        overdrawn: bool,
        /// The entries of a charge still held after this part of it is given back (0
        /// for a whole booking): while some are, the charge stays the last write.
        rest: u32,
    },
}

/// A window booking that moved the state into a window later than its reading's (a
/// reservation that did not fit before): the state word right before it and right
/// after it. Both windows keep it only for the booking that moved the state, and give
/// every booking's count back in any order while the state is in its window (see
/// `FixedWindow::refund`, `SlidingWindow::refund`).
///
/// The move itself is undone last first: while the state is still exactly `after`
/// (nothing booked behind it, or everything booked behind it given back), a cancel
/// restores `before`, which puts the key back in the window it was moved from with
/// every count it had there; once anything was booked behind it, the rest of the
/// window it moved from stays given up (only the booking that moved the state knows
/// where it came from).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Later {
    /// The state word before the booking.
    pub(crate) before: u64,
    /// The state word the booking stored.
    pub(crate) after: u64,
}

impl Later {
    /// The state a cancel leaves: `before` while the state is still the booking's own.
    #[inline]
    pub(crate) fn refund(&self, state: u64) -> Option<u64> {
        (state == self.after).then_some(self.before)
    }
}

/// The entries a sliding-log booking overwrote, oldest first, as a refund writes them
/// back: without an allocation when they were all one time (a cost of 1, a key that had
/// never logged that many: the empty entries come first), else each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Overwritten {
    /// `empties` entries that never held an admission, then the rest all at `time`.
    Uniform {
        /// How many never held an admission.
        empties: u32,
        /// The time of the others.
        time: u64,
    },
    /// Each entry's time.
    Each(Box<[u64]>),
}

/// A successful booking: how long from the reading to hold the request, the decision
/// as of that time, and what was booked.
#[derive(Clone, Debug)]
pub(crate) struct Booked {
    /// ns from the reading until the request may proceed.
    pub(crate) wait: u64,
    /// The decision as of the time the request may proceed.
    pub(crate) decision: Decision,
    /// What a cancel gives back.
    pub(crate) booking: Booking,
    /// What a charge or a give-back counted (all zero for a reservation).
    pub(crate) counted: Counted,
}

/// How a state is booked: a reservation that waits at most `Wait` ns, a charge that
/// takes its cost whatever is left and lets the key owe at most `Charge` requests past
/// its quota (see `algorithm::charge`), or a give-back of the cost to the key's state,
/// never below an empty state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Book {
    /// A reservation, and the longest wait (ns, at most [`MAX_WAIT_NS`]).
    Wait(u64),
    /// A charge, and the most the key may owe after it (requests).
    Charge(u32),
    /// A give-back.
    GiveBack,
}

impl Book {
    /// This booking for a transition decided `lag` ns after the caller's reading (see
    /// [`Decision::lagged`]): a reservation's wait is measured from the reading, so it
    /// may wait `lag` less from the time it is decided at. A wait of zero (admitted at
    /// once, at that time) always fits.
    #[inline]
    pub(crate) fn behind(self, lag: u64) -> Book {
        match self {
            Book::Wait(max_wait) => Book::Wait(max_wait.saturating_sub(lag)),
            other => other,
        }
    }

    /// What a transition booked as [`behind(lag)`](Self::behind) (decided at `now`,
    /// `lag` ns after the caller's reading), as that caller sees it: a wait, and the
    /// decision of a booking admitted at once, measured from the reading; with the time
    /// its wait counts from (the booking is due at that time plus its wait, as it would
    /// be had it been decided at `now`). A wait that would have been too long reports
    /// the wait and the bound from the reading.
    #[inline]
    pub(crate) fn seen_behind(
        self,
        r: Reserved,
        now: u64,
        lag: u64,
    ) -> Result<(Booked, u64), Late> {
        match r {
            Ok(mut b) if b.wait > 0 => {
                b.wait = b.wait.saturating_add(lag);
                Ok((b, now - lag))
            }
            Ok(mut b) => {
                b.decision = b.decision.lagged(lag);
                Ok((b, now))
            }
            Err(late) => {
                // `late.allowed` is the lessened bound, at most the horizon from `now`:
                // from the reading, the caller's own bound, at most the horizon.
                let bound = match self {
                    Book::Wait(max_wait) => max_wait,
                    _ => late.allowed,
                };
                Err(Late {
                    wait: late.wait.saturating_add(lag),
                    allowed: late.allowed.saturating_add(lag).min(bound),
                })
            }
        }
    }

    /// The cost a store checks against the burst when its parameters went stale:
    /// a charge or a give-back fits any quota.
    #[inline]
    pub(crate) fn checked_cost(self, n: u32) -> u32 {
        match self {
            Book::Wait(_) => n,
            Book::Charge(_) | Book::GiveBack => 0,
        }
    }

    /// Whether a missing key is inserted for it (a give-back to a key the table does
    /// not hold gives nothing).
    #[inline]
    pub(crate) fn inserts(self) -> bool {
        !matches!(self, Book::GiveBack)
    }
}

/// What a charge or a give-back counted, in requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counted {
    /// A charge: the requests taken (the cost less `dropped`).
    pub(crate) taken: u32,
    /// A charge: how far past the quota the key is after it (0 when it fit).
    pub(crate) owed: u32,
    /// A charge: the requests not counted, as the key reached the most it may owe.
    pub(crate) dropped: u32,
    /// A give-back: the requests given back.
    pub(crate) given: u32,
}

/// A booking refused for its wait: the wait (ns from the reading), and the longest
/// wait that was allowed, always less: the caller's bound (at most [`MAX_WAIT_NS`]),
/// or, where the booked time would lie past the engine's horizon, the time left until
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Late {
    /// How long the request would have had to wait.
    pub(crate) wait: u64,
    /// The longest wait allowed.
    pub(crate) allowed: u64,
}

impl Late {
    /// The refusal of a booking at `at` (`wait` after the reading `now`) that waits
    /// longer than `max_wait` or ends past the horizon; `None` when neither holds.
    #[inline]
    pub(crate) fn check(wait: u64, max_wait: u64, at: u64, now: u64) -> Option<Late> {
        (wait > max_wait || at > super::HORIZON_NS).then(|| Late {
            wait,
            allowed: max_wait.min(super::HORIZON_NS.saturating_sub(now)),
        })
    }
}

/// A booking, or why its wait refused it; in the latter case nothing was booked.
pub(crate) type Reserved = Result<Booked, Late>;

/// A packed algorithm's successful booking: the state `next` to store, and the booking.
#[inline]
pub(crate) fn stored(
    next: u64,
    wait: u64,
    decision: Decision,
    booking: Booking,
) -> (Option<u64>, Reserved) {
    let booked = Booked {
        wait,
        decision,
        booking,
        counted: Counted::default(),
    };
    (Some(next), Ok(booked))
}
