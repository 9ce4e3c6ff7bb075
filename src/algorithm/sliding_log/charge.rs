//! The sliding log's charge and give-back (see `algorithm::booking::Book`).
//!
//! A log's overdraft needs no bound: a charge logs its cost at one time, and the
//! `limit` newest entries, all the ring holds, decide every later request exactly (at
//! most `limit` in any window is decided by the `limit`-th newest entry alone), so a
//! charge past what is left keeps the next admissions out until it leaves the window,
//! one period later, however large it was. The ring logs at most its length of it;
//! the rest is counted in nothing the ring holds, and a give-back takes it first.

use super::{overwritten, ring, Ring, SlidingLog, Stamps};
use crate::algorithm::booking::{Book, Booked, Booking, Counted, Reserved};

impl SlidingLog {
    /// A reservation, a charge or a give-back of `cost` read at `reading`, as `how`
    /// says.
    pub(crate) fn book<S: Stamps>(
        &self,
        ring: &mut Ring<S>,
        reading: u64,
        cost: u32,
        how: Book,
    ) -> Reserved {
        match how {
            Book::Wait(max_wait) => self.reserve(ring, reading, cost, max_wait),
            Book::Charge(_) => self.charge(ring, reading, cost),
            Book::GiveBack => self.give_back(ring, reading, cost),
        }
    }

    /// Charges `cost` read at `reading`, logged at the reading (or at the newest entry,
    /// if later: a pending booking keeps its place) whatever is left.
    pub(crate) fn charge<S: Stamps>(
        &self,
        ring: &mut Ring<S>,
        reading: u64,
        cost: u32,
    ) -> Reserved {
        let at = self.effective(ring, reading);
        let active = self.active(ring, at);
        let logged = cost.min(ring.len());
        if logged == 0 {
            // A charge of nothing writes nothing.
            let counted = Counted {
                taken: 0,
                owed: 0,
                dropped: 0,
                given: 0,
            };
            let decision = self.peek(ring, reading, 1);
            return Ok(Booked {
                wait: 0,
                decision,
                booking: Booking::Nothing,
                counted,
            });
        }
        let prior = overwritten(ring, logged);
        let overdrawn = ring.overdrawn;
        let pending = ring.pending(reading);
        // Past what was left, the charge overwrites entries still in the window.
        let live = self.over_ring(ring.len()).active(ring, at);
        ring.mark(live + logged > ring.len());
        for i in 0..logged {
            let idx = ring.wrap(i);
            ring.ts.set(idx, at);
        }
        ring.head = ring.wrap(logged) as u32;
        if logged > 0 {
            ring.newest = at;
            // Still booked only while a booking for a later time is pending (the charge
            // was logged at its time); a stale reading logs at the newest entry, which
            // is no booking.
            ring.booked = ring.booked && at > reading;
            ring.writes = ring.writes.wrapping_add(1) & ring::WRITES;
        }
        let counted = Counted {
            taken: cost,
            owed: (u64::from(active) + u64::from(cost)).saturating_sub(u64::from(self.limit))
                as u32,
            dropped: 0,
            given: 0,
        };
        // Behind a pending booking for a later time (logged at its time), the charge
        // cannot be given back: the booking's own cancel may be, and the two would
        // each write back what only one of them knows. A reading behind the newest
        // entry with none pending is decided at the state's time, and is given back.
        let booking = if logged > 0 && !pending {
            Booking::Log {
                at,
                cost: logged,
                prior,
                writes: ring.writes,
                future: false,
                booked: false,
                overdrawn,
                rest: 0,
            }
        } else {
            Booking::Nothing
        };
        Ok(Booked {
            wait: 0,
            decision: self.peek(ring, reading, 1),
            booking,
            counted,
        })
    }

    /// Gives `cost` back at `reading`: the newest entries still in the window leave the
    /// log, exactly, while the ring holds every entry in the window (some of its slots
    /// are out of it or never used: the freed slots become never-used ones). A ring
    /// whose every slot is in the window may hold an overdraft it cannot count (a charge
    /// past the ring), and gives nothing back: a charge's own
    /// [`give_back`](crate::charge::Charge::give_back) knows what it took. Nothing either while
    /// a booking for a later time is pending (its entries are the newest: the ring's
    /// `booked` mark says so). A reading behind the newest entry with none pending (the
    /// clock stepped back) counts what is held at the state's time, the newest entry's.
    pub(crate) fn give_back<S: Stamps>(
        &self,
        ring: &mut Ring<S>,
        reading: u64,
        cost: u32,
    ) -> Reserved {
        let len = ring.len();
        let pending = ring.pending(reading);
        let held = self
            .over_ring(len)
            .active(ring, self.effective(ring, reading));
        let given = if pending || held >= len {
            0
        } else {
            cost.min(held)
        };
        if given > 0 {
            let state_time = ring.newest;
            ring.head = ring.wrap(len - given) as u32;
            for i in 0..given {
                let idx = ring.wrap(i);
                ring.ts.set(idx, ring::EMPTY);
            }
            // What had left the window at the state's time never counts again under the
            // period in force (the Redis log drops it too): cleared, the older entries
            // the newest falls back to decide a reading behind the state's time as the
            // state's time would. The expired ones are the oldest, after the never-used
            // ones.
            for i in 0..len {
                let idx = ring.wrap(i);
                let ts = ring.ts.get(idx);
                if ts != ring::EMPTY {
                    if !self.expired(ts, state_time) {
                        break;
                    }
                    ring.ts.set(idx, ring::EMPTY);
                }
            }
            ring.newest = ring.entry(len - 1);
            ring.booked = false;
            ring.writes = ring.writes.wrapping_add(1) & ring::WRITES;
            // No booking can tell its entries from those given back: one that is not
            // the last write gives nothing back from now on.
            ring.mark(true);
        }
        Ok(Booked {
            wait: 0,
            decision: self.peek(ring, reading, 1),
            booking: Booking::Nothing,
            counted: Counted {
                given,
                ..Counted::default()
            },
        })
    }
}
