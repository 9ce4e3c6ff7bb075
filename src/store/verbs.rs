//! The verbs, written once over [`Store`]: what `RateLimiter`, `KeyedRateLimiter`,
//! its tiers and its keys' [`Limit`](crate::multi::Limit)s do, each a thin call into these.
//!
//! Each reads one tier's parameters once, so that the cost checked against the burst
//! is the cost decided with, whatever a concurrent `set_quota` does (a store that
//! finds them stale under the request reads them again and checks the cost against
//! the new ones itself: see [`Store`]).

use super::Store;
use crate::algorithm::booking::{Book, Booked, Ledger, Origin};
use crate::charge::Charge;
use crate::decision::Decision;
use crate::error::InsufficientCapacity;
use crate::reservation::{max_wait_ns, reservable, too_long, Reservation, ReserveError};
use crate::table::packed::Applied;
use std::time::Duration;

/// A request of cost `n` for the key hashed to `h` under tier `tier`, decided now.
///
/// # Errors
///
/// [`InsufficientCapacity`] when `n` exceeds the tier's burst.
#[inline(always)]
pub(crate) fn check_n<S: Store>(
    s: &S,
    h: u64,
    n: u32,
    tier: usize,
    now: impl Fn() -> u64,
) -> Result<Decision, InsufficientCapacity> {
    let p = s.params(tier);
    InsufficientCapacity::check(n, s.burst(&p))?;
    match s.decide(h, tier, now, n, p) {
        Some(d) => Ok(d),
        // The parameters went stale under the request, and the new burst is smaller.
        None => Err(InsufficientCapacity {
            requested: n,
            capacity: s.burst(&s.params(tier)),
        }),
    }
}

/// One request of cost 1, which every quota's burst admits (no check needed, and no
/// error possible).
#[inline(always)]
pub(crate) fn check_one<S: Store>(s: &S, h: u64, tier: usize, now: impl Fn() -> u64) -> Decision {
    match s.decide(h, tier, now, 1, s.params(tier)) {
        Some(d) => d,
        None => unreachable!("every burst is at least 1"),
    }
}

/// What a request of cost `n` would get at `now`, consuming and inserting nothing.
///
/// # Errors
///
/// [`InsufficientCapacity`] when `n` exceeds the tier's burst.
pub(crate) fn peek_n<S: Store>(
    s: &S,
    h: u64,
    n: u32,
    tier: usize,
    now: u64,
) -> Result<Decision, InsufficientCapacity> {
    let p = s.params(tier);
    InsufficientCapacity::check(n, s.burst(&p))?;
    Ok(s.peek(h, now, n, p))
}

/// Books `n` at the earliest time it may proceed, within `max_wait`; the reservation
/// gives it back through `ledger`.
///
/// # Errors
///
/// [`ReserveError::InsufficientCapacity`], [`ReserveError::TooLong`],
/// [`ReserveError::Refused`] (a full table under `OnFull::Deny`). Nothing is booked
/// then.
pub(crate) fn reserve<'a, S: Store>(
    s: &S,
    ledger: &'a dyn Ledger,
    h: u64,
    n: u32,
    max_wait: Duration,
    tier: usize,
    now: impl Fn() -> u64,
) -> Result<Reservation<'a>, ReserveError> {
    let limit = max_wait_ns(max_wait);
    let p = s.params(tier);
    reservable(n, s.burst(&p))?;
    let (placed, origin) = s.reserve(h, tier, now, n, Book::Wait(limit), p)?;
    match placed {
        Applied::Stored(Ok((b, now))) => Ok(Reservation::new(b, now, ledger, h, origin)),
        // An untracked admission books nothing (and a booking always writes, so a key
        // left absent cannot have been booked).
        Applied::Untracked(Ok((b, _))) | Applied::Absent(Ok((b, _))) => {
            Ok(Reservation::untracked(b.decision))
        }
        Applied::Stored(Err(late)) | Applied::Untracked(Err(late)) | Applied::Absent(Err(late)) => {
            Err(too_long(late))
        }
        Applied::Refused(d) => Err(ReserveError::Refused {
            retry_after: d.retry_after().unwrap_or_default(),
        }),
    }
}

/// Decides `n` now, all or nothing, and when admitted the reservation that rolls it
/// back exactly (what `check_all` books on each limit). Counted as a check is (a
/// roll-back does not uncount it).
///
/// # Errors
///
/// [`InsufficientCapacity`] when `n` exceeds the tier's burst.
pub(crate) fn book<'a, S: Store>(
    s: &S,
    ledger: &'a dyn Ledger,
    h: u64,
    n: u32,
    tier: usize,
    now: impl Fn() -> u64,
) -> Result<(Decision, Option<Reservation<'a>>), InsufficientCapacity> {
    let p = s.params(tier);
    InsufficientCapacity::check(n, s.burst(&p))?;
    let (placed, origin) = s.book(h, tier, now, n, p)?;
    let (decision, booking) = match placed {
        Applied::Stored(r) => r,
        Applied::Absent((d, _)) | Applied::Untracked((d, _)) => {
            (d, crate::algorithm::booking::Booking::Nothing)
        }
        Applied::Refused(d) => (d, crate::algorithm::booking::Booking::Nothing),
    };
    if n > 0 {
        s.count(n, &decision);
    }
    let booked = Booked {
        wait: 0,
        decision,
        booking,
        counted: Default::default(),
    };
    // Rolled back at once or kept: never cancelled, so its due time is never read.
    let reservation = decision
        .is_allowed()
        .then(|| Reservation::new(booked, 0, ledger, h, origin));
    Ok((decision, reservation))
}

/// Gives `booking` back at `now`: by a cancel only while it is not due (`due`), by a
/// roll-back (`always`) whether or not; only to the state `origin` identifies.
pub(crate) fn refund<S: Store>(
    s: &S,
    h: u64,
    booking: &crate::algorithm::booking::Booking,
    origin: Origin,
    due: u64,
    always: bool,
    now: u64,
) {
    if !always && now > due {
        return;
    }
    s.refund(h, booking, origin, now, always);
}

/// Charges `n` to the key hashed to `h` under tier `tier` whatever is left, the key
/// owing at most `max_owed` requests past its quota after it; the charge gives back
/// through `ledger`. Never refused for its cost; a full table may not count it (see
/// [`Charge::tracked`]).
pub(crate) fn charge<'a, S: Store>(
    s: &S,
    ledger: &'a dyn Ledger,
    h: u64,
    n: u32,
    max_owed: u32,
    tier: usize,
    now: impl Fn() -> u64,
) -> Charge<'a> {
    let p = s.params(tier);
    let untracked = |d: Decision| Charge::untracked(d, n);
    match s.reserve(h, tier, now, n, Book::Charge(max_owed), p) {
        // Absent: a key the charge did not need to write (a cost of 0): counted, as
        // nothing.
        Ok((Applied::Stored(Ok((b, _))) | Applied::Absent(Ok((b, _))), origin)) => {
            Charge::new(b, n, ledger, h, origin)
        }
        Ok((Applied::Untracked(Ok((b, _))), _)) => untracked(b.decision),
        Ok((Applied::Refused(d), _)) => untracked(d),
        // A charge never waits, and fits any burst (`Book::checked_cost`).
        Ok((Applied::Stored(Err(_)) | Applied::Untracked(Err(_)) | Applied::Absent(Err(_)), _))
        | Err(_) => untracked(s.peek(h, 0, 0, s.params(tier))),
    }
}

/// Gives `n` back to the key hashed to `h` under tier `tier`, never below an empty
/// state; returns how many requests were given back (0 for a key the table does not
/// hold).
pub(crate) fn give_back<S: Store>(
    s: &S,
    h: u64,
    n: u32,
    tier: usize,
    now: impl Fn() -> u64,
) -> u32 {
    let p = s.params(tier);
    match s.reserve(h, tier, now, n, Book::GiveBack, p) {
        Ok((Applied::Stored(Ok((b, _))), _)) => b.counted.given,
        _ => 0,
    }
}
