//! Charges: a cost known only once the work is done, taken whatever is left, and given
//! back in part or whole later (token budgets: check before, charge after).

use crate::algorithm::booking::{Booked, Booking, Ledger, Origin, Overwritten};
use crate::decision::Decision;
use std::fmt;

/// What a charge took: made by `charge` on [`RateLimiter`](crate::limiter::RateLimiter),
/// [`KeyedRateLimiter`](crate::keyed::KeyedRateLimiter) and [`Tier`](crate::keyed::Tier).
///
/// A charge is never denied: it takes its cost whatever is left, and the key then owes
/// what went past its quota ([`owed`](Self::owed)), which its next requests wait out at
/// the quota's rate (a bucket's debt), or which keeps the rest of the window (the fixed
/// window), the next window's weight (the sliding window) or the next period (the log)
/// from admitting anything. The debt is bounded: a bucket or a window owes at most one
/// burst past its quota by default (`charge_owing` sets another bound; the part of a
/// cost past the bound is not counted, and [`dropped`](Self::dropped) says how much); a
/// sliding log needs no bound, as its overdraft ends one period after the charge however
/// large it was.
///
/// [`give_back`](Self::give_back) returns part or all of what it took, to the state it
/// was taken from only (never after a reset, a removal, an eviction, or, for a bucket,
/// a conversion of its state to another rate). Dropping a `Charge` keeps it.
///
/// # Example
///
/// ```
/// use tollgate::{Algorithm, ManualClock, Quota, RateLimiter};
/// // 1,000 tokens a minute, refilled smoothly.
/// let budget = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_minute(1_000))
///     .clock(ManualClock::new())
///     .build()?;
/// assert!(budget.peek().is_allowed()); // before the work: is anything left?
/// let mut spent = budget.charge(1_200); // after it: 200 past the budget
/// assert!(!spent.fit());
/// assert_eq!(spent.owed(), 200);
/// assert!(!budget.peek().is_allowed()); // the next request waits out the debt
/// spent.give_back(300); // say the stream was cut short: 300 tokens were never sent
/// assert!(budget.peek().is_allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Charge<'a> {
    decision: Decision,
    taken: u32,
    owed: u32,
    dropped: u32,
    tracked: bool,
    ticket: Option<Ticket<'a>>,
}

struct Ticket<'a> {
    ledger: &'a dyn Ledger,
    key: u64,
    origin: Origin,
    booking: Booking,
    /// The requests the booking holds (a log holds at most its ring of them).
    held: u32,
    /// The requests of the charge that no state holds (a log's part past its ring):
    /// given back first, and giving them back changes nothing.
    unheld: u32,
    /// What was given back of `held` so far.
    given: u32,
}

impl fmt::Debug for Charge<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Charge")
            .field("decision", &self.decision)
            .field("taken", &self.taken)
            .field("owed", &self.owed)
            .field("dropped", &self.dropped)
            .field("tracked", &self.tracked)
            .finish()
    }
}

impl<'a> Charge<'a> {
    /// The charge `booked` describes, of `cost`, stored for `key` in `ledger` on the
    /// state `origin` identifies.
    pub(crate) fn new(
        booked: Booked,
        cost: u32,
        ledger: &'a dyn Ledger,
        key: u64,
        origin: Origin,
    ) -> Self {
        let c = booked.counted;
        let held = match &booked.booking {
            Booking::Log { cost, .. } => *cost,
            Booking::Nothing => 0,
            _ => c.taken,
        };
        let ticket = (held > 0).then_some(Ticket {
            ledger,
            key,
            origin,
            booking: booked.booking,
            held,
            unheld: c.taken - held,
            given: 0,
        });
        debug_assert_eq!(c.taken + c.dropped, cost);
        Charge {
            decision: booked.decision,
            taken: c.taken,
            owed: c.owed,
            dropped: c.dropped,
            tracked: true,
            ticket,
        }
    }

    /// A charge of `cost` the table did not count (a full table under `OnFull::Deny`
    /// or `OnFull::Allow`): `decision` is what the table answered.
    pub(crate) fn untracked(decision: Decision, cost: u32) -> Self {
        Charge {
            decision,
            taken: 0,
            owed: 0,
            dropped: cost,
            tracked: false,
            ticket: None,
        }
    }

    /// The state after the charge, as a request of cost 1 would be decided then: whether
    /// it would be admitted, what remains, when the key is whole again
    /// (`reset_after`), and, while it owes, when the next request fits
    /// (`retry_after`).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Algorithm, ManualClock, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(10))
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// let c = l.charge(12); // 2 past the burst of 10, then 1 more to wait for
    /// assert_eq!(c.decision().retry_after(), Some(Duration::from_millis(300)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn decision(&self) -> Decision {
        self.decision
    }

    /// Whether the cost fit in what was left (the key owes nothing after it).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(5)).build()?;
    /// assert!(l.charge(5).fit());
    /// assert!(!l.charge(1).fit());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fit(&self) -> bool {
        self.tracked && self.owed == 0
    }

    /// How many requests the key owes past its quota after the charge (0 when it fit;
    /// `u32::MAX` for a debt of `u32::MAX` requests or more; for a sliding log, how far this charge went past what was left: the log keeps no
    /// count of an earlier overdraft past its ring, which ends one period after it
    /// however large it was).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::SlidingLog, Quota::per_minute(5)).build()?;
    /// assert_eq!(l.charge(7).owed(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn owed(&self) -> u32 {
        self.owed
    }

    /// How many requests of the cost were counted.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_minute(5)).build()?;
    /// assert_eq!(l.charge_owing(20, 10).taken(), 15); // 5 left, then 10 owed at most
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn taken(&self) -> u32 {
        self.taken
    }

    /// How many requests of the cost were not counted: past the most the key may owe,
    /// or all of them when the table had no room for the key ([`tracked`](Self::tracked)).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_minute(5)).build()?;
    /// let c = l.charge(30); // 5 left, and at most one burst (5) owed
    /// assert_eq!((c.taken(), c.owed(), c.dropped()), (10, 5, 20));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn dropped(&self) -> u32 {
        self.dropped
    }

    /// Whether the key's state counted the charge: `false` only for a new key in a full
    /// keyed table under `OnFull::Deny` or `OnFull::Allow` (nothing was counted).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, OnFull, Quota};
    /// let l = KeyedRateLimiter::<u32>::builder(Algorithm::TokenBucket, Quota::per_minute(5))
    ///     .max_keys(1)
    ///     .on_full(OnFull::Deny)
    ///     .build()?;
    /// assert!(l.charge(&1, 3).tracked());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tracked(&self) -> bool {
        self.tracked
    }

    /// Gives `n` of what the charge took back (at most what it took, less what was
    /// given back before; a log's part past its ring first, which frees nothing), to the
    /// state it was taken from only: nothing after a `reset`, `remove`, reclaim or
    /// eviction of the key, nor after a bucket's conversion to another rate: by a
    /// `set_quota` that changes its interval (a keyed table's converts at once every
    /// key written at a rate that no tier uses after it), or by a keyed request that
    /// writes the key's state at another rate (a tier's, or after `set_quota`); whether
    /// or not it owed anything then, and even once converted back (the state keeps no
    /// record of when it was converted, so it cannot tell what of the charge it still
    /// holds). A
    /// window gives back only while the state is still in the charged window (the
    /// sliding window: until something is counted in a later one); a bucket only what
    /// of the charge it still owes (time pays debts off); a log exactly while the charge
    /// is its last write (in parts too), and after later writes of its instant nothing
    /// once a later charge of that instant overdrew it or a stateless `give_back` took
    /// entries (it cannot tell them from the charge's own).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::{Algorithm, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(5)).build()?;
    /// let mut c = l.charge(5);
    /// assert!(!l.check().is_allowed());
    /// c.give_back(2);
    /// assert!(l.check().is_allowed());
    /// assert!(l.check().is_allowed());
    /// assert!(!l.check().is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn give_back(&mut self, n: u32) {
        let Some(t) = self.ticket.as_mut() else {
            return;
        };
        let free = n.min(t.unheld);
        t.unheld -= free;
        let m = (n - free).min(t.held - t.given);
        if m == 0 {
            return;
        }
        let part = part(&t.booking, t.held, t.given, m);
        t.given += m;
        // A roll-back: exactly what the part still holds, due or not.
        t.ledger.refund(t.key, &part, t.origin, 0, true);
    }
}

/// The booking of `m` requests of `booking` (which holds `held`, of which `given` were
/// given back already, the newest first): what a roll-back of them gives back.
fn part(booking: &Booking, held: u32, given: u32, m: u32) -> Booking {
    match booking {
        Booking::Gcra { tat, weight, acts } => {
            let t = weight / u64::from(held);
            Booking::Gcra {
                // What the given part left of the charge's debt.
                tat: tat.saturating_sub(u64::from(given) * t),
                weight: u64::from(m) * t,
                acts: *acts,
            }
        }
        Booking::Window { index, .. } => Booking::Window {
            index: *index,
            cost: m,
            later: None,
        },
        Booking::Log {
            at,
            prior,
            writes,
            future,
            booked,
            overdrawn,
            ..
        } => {
            // The entries it overwrote for the newest `m` still held: the `m` before the
            // last `given` of `prior` (oldest first).
            let end = held - given;
            let prior = match prior {
                Overwritten::Uniform { empties, time } => Overwritten::Uniform {
                    empties: empties.saturating_sub(end - m).min(m),
                    time: *time,
                },
                Overwritten::Each(v) => {
                    Overwritten::Each(v[(end - m) as usize..end as usize].into())
                }
            };
            Booking::Log {
                at: *at,
                cost: m,
                prior,
                writes: *writes,
                future: *future,
                booked: *booked,
                overdrawn: *overdrawn,
                // What of the charge is still held after this part.
                rest: end - m,
            }
        }
        Booking::Nothing => Booking::Nothing,
    }
}
