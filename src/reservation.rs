//! Reservations: capacity booked now for a request that proceeds after a wait.

use crate::algorithm::booking::{Booked, Booking, Ledger, Origin};
use crate::{decision::Decision, error::InsufficientCapacity};
use std::fmt;
use std::time::Duration;

/// Capacity booked by `reserve`: the request may proceed after
/// [`wait_time`](Self::wait_time), and must not proceed before.
///
/// For the buckets this is GCRA virtual scheduling: the booking is one
/// compare-and-swap of the key's state, so reservations are served in the order they
/// were booked (FIFO with no queue and no memory per waiter), and a later `check` never
/// overtakes an earlier reservation. The windows and the sliding log book into the
/// earliest time the request fits; requests after it queue behind it (see
/// [`reserve`](crate::limiter::RateLimiter::reserve)).
///
/// Dropping a reservation keeps the booking (the capacity counts as used): call
/// [`cancel`](Self::cancel) to give it back. The futures of `until_ready` cancel their
/// reservation when they are dropped before it is due.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Algorithm, ManualClock, Quota, RateLimiter};
///
/// let limiter = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(10).with_burst(1))
///     .clock(ManualClock::new())
///     .build()?;
/// let first = limiter.reserve(1, Duration::ZERO)?;
/// assert_eq!(first.wait_time(), Duration::ZERO);
/// let second = limiter.reserve(1, Duration::from_secs(1))?;
/// assert_eq!(second.wait_time(), Duration::from_millis(100));
/// let third = limiter.reserve(1, Duration::from_secs(1))?;
/// assert_eq!(third.wait_time(), Duration::from_millis(200)); // served in booking order
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a reservation says how long to wait; drop it only if the request proceeds"]
pub struct Reservation<'a> {
    wait: Duration,
    decision: Decision,
    ticket: Option<Ticket<'a>>,
}

struct Ticket<'a> {
    ledger: &'a dyn Ledger,
    key: u64,
    booking: Booking,
    origin: Origin,
    due: u64,
}

impl Reservation<'_> {
    /// The longest wait any `reserve` books: about 36 years (2^60 ns, a quarter of the
    /// engine's 146-year horizon, which keeps every state a booking writes far from
    /// overflowing). A wait beyond it is refused as
    /// [`ReserveError::TooLong`] with this bound as its `max_wait`, whatever larger
    /// `max_wait` the caller allowed: only a quota slower than one request per 36
    /// years can meet it.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Algorithm, Quota, RateLimiter, Reservation, ReserveError};
    ///
    /// let forty_years = Duration::from_secs(40 * 365 * 86_400);
    /// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::new(1, forty_years)).build()?;
    /// assert!(l.check().is_allowed());
    /// match l.reserve(1, Duration::MAX) {
    ///     Err(ReserveError::TooLong { wait, max_wait }) => {
    ///         assert_eq!(max_wait, Reservation::MAX_WAIT);
    ///         assert!(wait > max_wait);
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub const MAX_WAIT: Duration = Duration::from_nanos(crate::algorithm::booking::MAX_WAIT_NS);
}

impl<'a> Reservation<'a> {
    /// A reservation of `booked`, made at the engine reading `now`, for `key` in
    /// `ledger`, on the state `origin` identifies.
    #[inline]
    pub(crate) fn new(
        booked: Booked,
        now: u64,
        ledger: &'a dyn Ledger,
        key: u64,
        origin: Origin,
    ) -> Self {
        // Due when it may proceed; a log booking at the time it is logged at, which is
        // later than a reading behind the log's newest entry that proceeds at once (the
        // clock stepped back: decided at the state's time).
        let due = match booked.booking {
            Booking::Log { at, .. } => at.max(now + booked.wait),
            _ => now + booked.wait,
        };
        let ticket = (booked.booking != Booking::Nothing).then_some(Ticket {
            ledger,
            key,
            booking: booked.booking,
            origin,
            due,
        });
        Reservation {
            wait: Duration::from_nanos(booked.wait),
            decision: booked.decision,
            ticket,
        }
    }

    /// A reservation that booked nothing (an untracked admission) and so has nothing
    /// to give back.
    pub(crate) fn untracked(decision: Decision) -> Self {
        Reservation {
            wait: Duration::ZERO,
            decision,
            ticket: None,
        }
    }

    /// How long, from the reservation, to hold the request before it proceeds (zero
    /// when it may proceed at once).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(3)).build()?;
    /// assert_eq!(l.reserve(3, Duration::ZERO)?.wait_time(), Duration::ZERO);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn wait_time(&self) -> Duration {
        self.wait
    }

    /// The decision as of the time the request proceeds: always allowed; what will
    /// remain then, and when the quota is whole again from then.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::SlidingLog, Quota::per_hour(3)).build()?;
    /// let r = l.reserve(1, Duration::ZERO)?;
    /// assert!(r.decision().is_allowed());
    /// assert_eq!(r.decision().remaining(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn decision(&self) -> Decision {
        self.decision
    }

    /// Gives the booking back, as Go's x/time/rate `Reservation.Cancel` does: nothing
    /// once the reservation is due (its wait has passed: the capacity counts as used);
    /// otherwise the booked capacity less what later bookings depend on (for the
    /// token bucket, the time later reservations were scheduled after this one; for the
    /// leaky bucket's spaced slots, and for the windows and the log, everything while
    /// nothing later was booked into a later slot, window or entry, else nothing; a
    /// log booking for a later time gives nothing back once anything was logged after
    /// it, even at the same time, and a window booking for a window later than its
    /// reading's once anything was booked after it into that window: such bookings
    /// cancelled last first give everything back).
    /// Never more than was booked; nothing after a reset of the key, or after a
    /// bucket's state was converted to another rate (`set_quota`, a request of
    /// another tier), even once converted back: the booking was converted with the
    /// rest.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Algorithm, ManualClock, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1).with_burst(1))
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// let _now = l.reserve(1, Duration::ZERO)?; // proceeds at once
    /// let later = l.reserve(1, Duration::from_secs(5))?;
    /// assert_eq!(later.wait_time(), Duration::from_secs(1));
    /// later.cancel(); // not due yet: the second is given back
    /// assert_eq!(l.reserve(1, Duration::from_secs(5))?.wait_time(), Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel(mut self) {
        if let Some(t) = self.ticket.take() {
            t.ledger.refund(t.key, &t.booking, t.origin, t.due, false);
        }
    }

    /// The booking as an owned token (no borrow of the limiter), for a caller that
    /// gives it back later through [`Undo`]; `None` when nothing was booked.
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    pub(crate) fn into_undo(mut self) -> Option<Undo> {
        self.ticket.take().map(|t| Undo {
            key: t.key,
            booking: t.booking,
            origin: t.origin,
        })
    }

    /// Gives the booking back whether or not it is due: the request never proceeded
    /// (a multi-limit check rolling back, a middleware whose other policy denied).
    pub(crate) fn roll_back(mut self) {
        if let Some(t) = self.ticket.take() {
            t.ledger.refund(t.key, &t.booking, t.origin, t.due, true);
        }
    }
}

impl fmt::Debug for Reservation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("wait", &self.wait)
            .field("decision", &self.decision)
            .finish_non_exhaustive()
    }
}

/// An admission's booking, owned: the key's hash and what was booked, to be given
/// back exactly (whether or not it is due) by the limiter that made it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "tower"), allow(dead_code))]
pub(crate) struct Undo {
    pub(crate) key: u64,
    pub(crate) booking: Booking,
    pub(crate) origin: Origin,
}

/// Why `reserve` booked nothing.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Algorithm, Quota, RateLimiter, ReserveError};
///
/// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_hour(2)).build()?;
/// assert!(matches!(l.reserve(3, Duration::MAX), Err(ReserveError::InsufficientCapacity(_))));
/// let _ = l.reserve(2, Duration::ZERO)?;
/// match l.reserve(1, Duration::from_secs(1)) {
///     Err(ReserveError::TooLong { wait, .. }) => assert!(wait > Duration::from_secs(1700)),
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReserveError {
    /// The request would have to wait longer than allowed.
    TooLong {
        /// How long it would have had to wait.
        wait: Duration,
        /// The longest wait allowed: the caller's `max_wait`, or
        /// [`Reservation::MAX_WAIT`] when that is smaller (a quota slower than one
        /// request per 36 years), or the time left until the engine's horizon (about
        /// 146 years after the clock's zero) when the booking would end past it.
        /// Always less than `wait`.
        max_wait: Duration,
    },
    /// The cost exceeds what the limiter ever admits at once.
    InsufficientCapacity(InsufficientCapacity),
    /// A keyed limiter under [`OnFull::Deny`](crate::table::claim::OnFull::Deny) had no slot for a
    /// new key.
    Refused {
        /// When a slot may free (a hint).
        retry_after: Duration,
    },
}

impl fmt::Display for ReserveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReserveError::TooLong { wait, max_wait } => write!(
                f,
                "the request would wait {wait:?}, longer than the {max_wait:?} allowed"
            ),
            ReserveError::InsufficientCapacity(e) => e.fmt(f),
            ReserveError::Refused { retry_after } => write!(
                f,
                "the keyed table is full and refuses new keys (a slot may free in {retry_after:?})"
            ),
        }
    }
}

impl std::error::Error for ReserveError {}

impl From<InsufficientCapacity> for ReserveError {
    fn from(e: InsufficientCapacity) -> Self {
        ReserveError::InsufficientCapacity(e)
    }
}

/// `max_wait` in engine ns, capped at the longest wait a booking may make.
pub(crate) fn max_wait_ns(max_wait: Duration) -> u64 {
    crate::clock::duration_to_nanos(max_wait).min(crate::algorithm::booking::MAX_WAIT_NS)
}

/// `Ok` when a booking of `n` can ever fit a `capacity` (a booking of 0 books
/// nothing, so it is refused too).
pub(crate) fn reservable(n: u32, capacity: u32) -> Result<(), ReserveError> {
    if n == 0 {
        return Err(InsufficientCapacity {
            requested: 0,
            capacity,
        }
        .into());
    }
    Ok(InsufficientCapacity::check(n, capacity)?)
}

/// The error for a booking refused because its wait exceeded `max_wait`, the engine's
/// own bound [`Reservation::MAX_WAIT`] where that is the smaller, or the time left
/// until the engine's horizon: the `max_wait` reported is always one the wait exceeds.
pub(crate) fn too_long(late: crate::algorithm::booking::Late) -> ReserveError {
    ReserveError::TooLong {
        wait: Duration::from_nanos(late.wait),
        max_wait: Duration::from_nanos(late.allowed),
    }
}

/// The seal of [`Limit`](crate::multi::Limit): a public trait in a private module.
pub(crate) mod sealed {
    use super::Reservation;
    use crate::{decision::Decision, error::InsufficientCapacity};

    /// What [`Limit`](crate::multi::Limit) needs of a limiter (`check_all`'s seam, below the
    /// limiters that implement it); not implementable outside the
    /// crate, so that the all-or-nothing protocol stays the engine's own.
    pub trait Bookable: Sync {
        /// Decides `n` now; when admitted, the booking to roll back. An error when
        /// `n` exceeds the capacity of the parameters it would be decided with.
        fn book(&self, n: u32)
            -> Result<(Decision, Option<Reservation<'_>>), InsufficientCapacity>;
        /// What deciding `n` now would give, consuming nothing (the same error).
        fn peek_n(&self, n: u32) -> Result<Decision, InsufficientCapacity>;
        /// Whether `check_all` books this limit after every limit that returns `false`
        /// (the leaky bucket: rolling back a booking behind which others were scheduled
        /// narrows the spacing of the next release, so it is booked only once every
        /// other kind of limit has admitted).
        fn books_last(&self) -> bool;
    }
}
