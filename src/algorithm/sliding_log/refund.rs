//! The sliding log's refunds: a booking given back to the ring it was logged in.

use super::{ring, Ring, SlidingLog, Stamps, EMPTY};
use crate::algorithm::booking::{Booking, Overwritten};

impl SlidingLog {
    /// Gives back a booking of `cost` entries at `at` while they are still the newest
    /// (no later booking depends on them): the ring steps back over them, and the
    /// slots get back the entries the booking overwrote (`prior`). That is exact when
    /// the booking is the ring's last write (`writes`, what the ring counted after it,
    /// still agrees). After other writes at the same time `at` (requests admitted at
    /// the same instant as a booking that proceeds at once), the entries each of them
    /// overwrote had all left the window by `at`, so writing back this booking's is
    /// exact for every decision under the period in force (a later `set_quota` that
    /// lengthens the period may see the older of them). A booking for a later time
    /// (`future`) that others were written after gives nothing back: what they
    /// overwrote is not known to it.
    /// Anything but a log booking gives nothing back.
    pub(crate) fn refund<S: Stamps>(
        &self,
        ring: &mut Ring<S>,
        booking: &Booking,
        now: u64,
    ) -> bool {
        let Booking::Log {
            at,
            cost,
            ref prior,
            writes,
            future,
            booked,
            overdrawn,
            rest,
        } = *booking
        else {
            return false;
        };
        // The whole ring, not only the newest `limit` entries `set_quota` may have
        // narrowed the window to: the booking overwrote its oldest slots.
        let len = ring.len();
        if ring.newest != at || cost > len || (len - cost..len).any(|i| ring.entry(i) != at) {
            return false;
        }
        let last = ring.writes == writes;
        // After a later write of an overdrawn instant (a charge past what was left
        // overwrote entries still in the window, or a stateless give-back took entries
        // no booking can tell from its own), what this booking overwrote is not what
        // the ring holds before its entries: nothing is given back.
        if !last && ring.overdrawn {
            return false;
        }
        let bound = match (last, future) {
            (true, _) => None,
            (false, true) => return false,
            (false, false) => match self.write_back_bound(ring, cost, prior, now) {
                Ok(bound) => bound,
                Err(()) => return false,
            },
        };
        // cost <= len: one wrap back.
        ring.head = ring.wrap(len - cost) as u32;
        for i in 0..cost {
            let idx = ring.wrap(i);
            let was = match prior {
                Overwritten::Uniform { empties, time } => {
                    if i < *empties {
                        EMPTY
                    } else {
                        *time
                    }
                }
                Overwritten::Each(v) => v[i as usize],
            };
            let was = match bound {
                Some(b) if newer(was, b) => b,
                _ => was,
            };
            ring.ts.set(idx, was);
        }
        ring.newest = ring.entry(len - 1);
        // The mark says what the bookings did: as the last write, the one from before
        // it (a booking pending then is again; this one's own mark goes); after other
        // writes of its instant, theirs. A reading behind the newest entry (the clock
        // stepped back) is no booking. Once the refund's reading has reached the newest
        // entry, the state has too: nothing is pending there any more.
        let mark = if last { booked } else { ring.booked };
        ring.booked = mark && ring.newest != EMPTY && ring.newest > now;
        if last && rest == 0 {
            // The write before it is the last again, with the mark it left.
            ring.writes = ring.writes.wrapping_sub(1) & ring::WRITES;
            ring.overdrawn = overdrawn;
        }
        true
    }
}

/// Whether entry time `a` is newer than `b` in the ring's order (never-used entries,
/// [`EMPTY`], come first).
fn newer(a: u64, b: u64) -> bool {
    a != EMPTY && (b == EMPTY || a > b)
}

impl SlidingLog {
    /// How `prior`, written back as the `cost` oldest entries once the ring has stepped
    /// back over `cost` entries, keeps the ring in admission order (never-used entries
    /// first): `Ok(None)` when it stays no newer than the entry after it; `Ok(Some(n))`
    /// when it is newer than that entry `n` but every entry of it has left the window at
    /// `now` (it was overwritten by requests admitted at once, after other bookings of
    /// that instant were given back out of order), so the written-back entries newer
    /// than `n` are written as `n`, itself out of the window: every decision under the
    /// period in force is the same, and the ring stays in order; `Err` otherwise
    /// (nothing is given back).
    fn write_back_bound<S: Stamps>(
        &self,
        ring: &Ring<S>,
        cost: u32,
        prior: &Overwritten,
        now: u64,
    ) -> Result<Option<u64>, ()> {
        let len = ring.len();
        if cost == len {
            return Ok(None);
        }
        // After the step back, the entry after the written-back ones is today's oldest
        // entry of the ring before the step: the oldest one not overwritten.
        let next = ring.entry(0);
        let newest_prior = match prior {
            // All never used: the ring's first entries.
            Overwritten::Uniform { empties, .. } if *empties >= cost => EMPTY,
            Overwritten::Uniform { time, .. } => *time,
            Overwritten::Each(v) => v[v.len() - 1],
        };
        if !newer(newest_prior, next) {
            Ok(None)
        } else if self.expired(newest_prior, now) {
            Ok(Some(next))
        } else {
            Err(())
        }
    }
}
