//! Several limits decided together, all or nothing.

use crate::decision::Decision;
use crate::reservation::sealed::Bookable;
use std::time::Duration;

/// The outcome of checking one request against several limits at once (per user and
/// global, per second and per day): admitted only if every limit admits it, and then
/// consumed from every limit; denied if any limit denies, and then consumed from none.
///
/// [`decisions`](Self::decisions) holds one [`Decision`] per limit, in the order the
/// limits were given. When the whole check is denied, a limit that would have admitted
/// the request still reports `is_allowed() == true` there, but nothing was taken from
/// it.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use tollgate::{check_all, Algorithm, Limit, ManualClock, Quota, RateLimiter};
///
/// let clock = ManualClock::new();
/// let per_second = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(10))
///     .clock(clock.clone())
///     .build()?;
/// let per_minute = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(2))
///     .clock(clock.clone())
///     .build()?;
/// let limits: [&dyn Limit; 2] = [&per_second, &per_minute];
/// assert!(check_all(&limits, 1)?.is_allowed());
/// assert!(check_all(&limits, 1)?.is_allowed());
/// let third = check_all(&limits, 1)?;
/// assert!(!third.is_allowed());
/// assert_eq!(third.denied().collect::<Vec<_>>(), [1]); // the per-minute limit
/// assert_eq!(third.retry_after(), Some(Duration::from_secs(60)));
/// // The denial took nothing from the per-second bucket: 8 of 10 are left.
/// assert_eq!(per_second.peek().remaining(), 7);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
#[must_use = "a MultiDecision says whether the request may proceed"]
pub struct MultiDecision {
    decisions: Decisions,
}

/// One decision per limit: on the stack for up to [`INLINE`] limits (no allocation on
/// the usual path), on the heap beyond.
#[derive(Clone)]
enum Decisions {
    Inline(u8, [Decision; INLINE]),
    Heap(Vec<Decision>),
}

impl Decisions {
    /// `n` decisions, each to be set by [`set`](Self::set) (the placeholders are never
    /// read: every position is set before the decisions are returned).
    fn with_len(n: usize) -> Self {
        let placeholder = Decision::allow(0, 0, 0, 0);
        if n <= INLINE {
            Decisions::Inline(n as u8, [placeholder; INLINE])
        } else {
            Decisions::Heap(vec![placeholder; n])
        }
    }

    fn set(&mut self, i: usize, d: Decision) {
        match self {
            Decisions::Inline(_, items) => items[i] = d,
            Decisions::Heap(v) => v[i] = d,
        }
    }

    fn as_slice(&self) -> &[Decision] {
        match self {
            Decisions::Inline(len, items) => &items[..usize::from(*len)],
            Decisions::Heap(v) => v,
        }
    }
}

impl PartialEq for MultiDecision {
    fn eq(&self, other: &Self) -> bool {
        self.decisions() == other.decisions()
    }
}

impl Eq for MultiDecision {}

impl std::fmt::Debug for MultiDecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiDecision")
            .field("decisions", &self.decisions())
            .finish()
    }
}

impl MultiDecision {
    /// The outcome made of one decision per limit, in the limits' order.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn new(decisions: Vec<Decision>) -> Self {
        MultiDecision {
            decisions: Decisions::Heap(decisions),
        }
    }

    /// Whether every limit admitted the request (and so it was consumed from each).
    /// An empty set of limits admits everything.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{check_all, Limit};
    /// assert!(check_all(&[] as &[&dyn Limit], 1)?.is_allowed());
    /// # Ok::<(), tollgate::InsufficientCapacity>(())
    /// ```
    #[must_use]
    pub fn is_allowed(&self) -> bool {
        self.decisions().iter().all(Decision::is_allowed)
    }

    /// One decision per limit, in the order the limits were given.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{check_all, Algorithm, Limit, Quota, RateLimiter};
    /// let a = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(5)).build()?;
    /// let d = check_all(&[&a as &dyn Limit], 2)?;
    /// assert_eq!(d.decisions()[0].remaining(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn decisions(&self) -> &[Decision] {
        self.decisions.as_slice()
    }

    /// The positions of the limits that denied the request (empty when admitted).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{check_all, Algorithm, Limit, Quota, RateLimiter};
    /// let a = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(1)).build()?;
    /// let b = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(9)).build()?;
    /// let limits = [&a as &dyn Limit, &b];
    /// assert_eq!(check_all(&limits, 1)?.denied().count(), 0);
    /// assert_eq!(check_all(&limits, 1)?.denied().collect::<Vec<_>>(), [0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn denied(&self) -> impl Iterator<Item = usize> + '_ {
        self.decisions()
            .iter()
            .enumerate()
            .filter(|(_, d)| !d.is_allowed())
            .map(|(i, _)| i)
    }

    /// `None` when admitted; otherwise the longest wait any denying limit asks for:
    /// no limit that denied would admit the request sooner.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{check_all, Algorithm, Limit, ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let a = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(1)).clock(clock.clone()).build()?;
    /// let b = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(1)).clock(clock).build()?;
    /// let limits = [&a as &dyn Limit, &b];
    /// assert!(check_all(&limits, 1)?.is_allowed());
    /// assert_eq!(check_all(&limits, 1)?.retry_after(), Some(Duration::from_secs(60)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        self.decisions()
            .iter()
            .filter_map(Decision::retry_after)
            .max()
    }
}

/// A limit [`check_all`] can decide together with others: a [`RateLimiter`], or one
/// key of a [`KeyedRateLimiter`] (see [`KeyedRateLimiter::limit`]).
///
/// [`RateLimiter`]: crate::limiter::RateLimiter
/// [`KeyedRateLimiter`]: crate::keyed::KeyedRateLimiter
/// [`KeyedRateLimiter::limit`]: crate::keyed::KeyedRateLimiter::limit
///
/// # Example
///
/// ```
/// use tollgate::{Algorithm, Limit, Quota, RateLimiter};
/// let global = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1_000)).build()?;
/// let limits: Vec<&dyn Limit> = vec![&global];
/// assert_eq!(limits.len(), 1);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
pub trait Limit: Bookable {}

impl<T: Bookable> Limit for T {}

/// Bookings kept on the stack by [`check_all`] before it spills to the heap.
const INLINE: usize = 4;

/// Decides one request of cost `n` against every limit, all or nothing: admitted (and
/// consumed from each) only if every limit admits it; otherwise nothing is consumed
/// from any, and the result names every limit that denied and the longest wait.
///
/// Lock-free like the limits themselves: each limit is booked in turn with its own
/// compare-and-swap, and on a denial the bookings already made are rolled back. A
/// roll-back gives back exactly what its booking took, whatever was admitted on the
/// same limit in between (for the buckets, the booking's debt still outstanding: all
/// of it, as the roll-back follows at once), and only to the state it was booked on
/// (nothing after a `reset` of the key, nor after a quota change converted a bucket's
/// state to another rate: the booking was converted with the rest). A concurrent check
/// may see a limit briefly fuller than it ends up: never emptier. Limits that come
/// after the one that denied are only peeked.
///
/// Leaky buckets are booked after every other limit (the decisions are still reported
/// in the order given), so a denial by any other kind of limit never touches them. A
/// leaky bucket rolled back because a later leaky bucket denied gets its slot back
/// whole even when other requests were scheduled behind it meanwhile: they keep their
/// release times, and the next request takes the time given back (two releases may
/// then come closer than the spacing, by at most that slot).
///
/// # Errors
///
/// [`InsufficientCapacity`](crate::error::InsufficientCapacity) when `n` exceeds some limit's
/// capacity (the request could never be admitted): the first such limit's, and what
/// the limits before it booked is rolled back.
///
/// # Example
///
/// ```
/// use tollgate::{check_all, Algorithm, KeyedRateLimiter, Limit, Quota, RateLimiter};
///
/// let per_user = KeyedRateLimiter::<str>::builder(Algorithm::TokenBucket, Quota::per_minute(2)).build()?;
/// let global = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(3)).build()?;
/// let check = |user: &str| check_all(&[&per_user.limit(user) as &dyn Limit, &global], 1);
/// assert!(check("alice")?.is_allowed());
/// assert!(check("alice")?.is_allowed());
/// assert!(!check("alice")?.is_allowed()); // alice's own limit; the global one keeps 1
/// assert!(check("bob")?.is_allowed());
/// assert!(!check("carol")?.is_allowed()); // the global limit
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn check_all(
    limits: &[&dyn Limit],
    n: u32,
) -> Result<MultiDecision, crate::error::InsufficientCapacity> {
    all_or_nothing(limits.len(), |i| (limits[i], n))
}

/// [`check_all`] with a cost per limit: one request that counts `cost` against `limit`
/// for each `(limit, cost)` (an Envoy rate-limit request's descriptors each carry their
/// own `hits_addend`). Admitted, and consumed from each, only if every limit admits its
/// cost; otherwise nothing is consumed from any, as `check_all` does. A cost of 0 asks
/// nothing of its limit (it reports the limit's state and is always allowed).
///
/// # Errors
///
/// [`InsufficientCapacity`](crate::error::InsufficientCapacity) when some cost exceeds its
/// limit's capacity: the first such limit's, and what the limits before it booked is
/// rolled back.
///
/// # Example
///
/// ```
/// use tollgate::{check_all_costs, Algorithm, Limit, ManualClock, Quota, RateLimiter};
///
/// let clock = ManualClock::new();
/// let requests = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(10))
///     .clock(clock.clone())
///     .build()?;
/// let bytes_kib = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(100))
///     .clock(clock.clone())
///     .build()?;
/// // One request of 60 KiB: 1 against the request limit, 60 against the byte limit.
/// assert!(check_all_costs(&[(&requests as &dyn Limit, 1), (&bytes_kib, 60)])?.is_allowed());
/// let d = check_all_costs(&[(&requests as &dyn Limit, 1), (&bytes_kib, 60)])?;
/// assert!(!d.is_allowed()); // 120 KiB would exceed 100
/// assert_eq!(d.denied().collect::<Vec<_>>(), [1]);
/// assert_eq!(requests.check_n(0)?.remaining(), 9); // the denial took nothing
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn check_all_costs(
    limits: &[(&dyn Limit, u32)],
) -> Result<MultiDecision, crate::error::InsufficientCapacity> {
    all_or_nothing(limits.len(), |i| limits[i])
}

/// The all-or-nothing protocol of [`check_all`] over `count` limits, limit `i` with its
/// cost `at(i)`: book each in turn (every limit that does not book last, then those
/// that do, each group in the given order), peek the rest after a denial, roll back
/// (newest first) on a denial. Decisions are reported in the given order.
fn all_or_nothing<'a>(
    count: usize,
    at: impl Fn(usize) -> (&'a dyn Limit, u32),
) -> Result<MultiDecision, crate::error::InsufficientCapacity> {
    let mut decisions = Decisions::with_len(count);
    // The bookings to roll back on a denial, in booking order: on the stack for the
    // usual few limits.
    let mut first: [Option<crate::reservation::Reservation<'a>>; INLINE] = Default::default();
    let mut more = Vec::new();
    let mut booked = 0;
    let mut denied = false;
    let mut impossible = None;
    'groups: for last in [false, true] {
        for i in 0..count {
            let (limit, n) = at(i);
            if limit.books_last() != last {
                continue;
            }
            let outcome = if denied {
                limit.peek_n(n).map(|d| (d, None))
            } else {
                limit.book(n)
            };
            let (d, reservation) = match outcome {
                Ok(o) => o,
                Err(e) => {
                    impossible = Some(e);
                    denied = true;
                    break 'groups;
                }
            };
            denied |= !d.is_allowed();
            decisions.set(i, d);
            if reservation.is_some() {
                match first.get_mut(booked) {
                    Some(slot) => *slot = reservation,
                    None => more.extend(reservation),
                }
                booked += 1;
            }
        }
    }
    if denied {
        // Newest first: each roll-back then finds its booking the newest one.
        for r in more.into_iter().rev() {
            r.roll_back();
        }
        for r in first.into_iter().rev().flatten() {
            r.roll_back();
        }
    }
    if let Some(e) = impossible {
        return Err(e);
    }
    Ok(MultiDecision { decisions })
}
