//! What a reservation booked, so that a cancel can give back exactly its share.

use crate::Decision;

/// The longest wait a reservation may book (about 36 years): with readings clamped to
/// [`HORIZON_NS`](super::HORIZON_NS), every state a reservation writes stays far
/// enough from `2^64` that the algorithms' sums cannot overflow.
pub(crate) const MAX_WAIT_NS: u64 = super::HORIZON_NS / 4;

/// The capacity a reservation took from one state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Booking {
    /// Nothing to give back (an untracked admission, or already given back).
    Nothing,
    /// GCRA: the theoretical arrival time the booking left, and the time it added.
    Gcra {
        /// `TAT` right after the booking.
        tat: u64,
        /// `cost · T`, ns.
        weight: u64,
    },
    /// A window algorithm: the window index booked into, and the cost.
    Window {
        /// The window's index.
        index: u64,
        /// The cost counted in it.
        cost: u32,
    },
    /// The sliding log: the timestamp logged `cost` times.
    Log {
        /// The logged time.
        at: u64,
        /// How many entries.
        cost: u32,
    },
}

/// A successful booking: how long from the reading to hold the request, the decision
/// as of that time, and what was booked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Booked {
    /// ns from the reading until the request may proceed.
    pub(crate) wait: u64,
    /// The decision as of the time the request may proceed.
    pub(crate) decision: Decision,
    /// What a cancel gives back.
    pub(crate) booking: Booking,
}

/// A booking, or the wait (ns from the reading) that exceeded the caller's bound; in
/// the latter case nothing was booked.
pub(crate) type Reserved = Result<Booked, u64>;

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
    };
    (Some(next), Ok(booked))
}
