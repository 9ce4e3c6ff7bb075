//! GCRA (generic cell rate algorithm): the token bucket and the leaky-bucket shaper.
//!
//! With emission interval `T = ⌈period / limit⌉` (whole nanoseconds, rounded *up*) and
//! capacity `burst`, the state is the theoretical arrival time `TAT` and a request of
//! cost `n` at time `t` is admitted iff `max(TAT, t) + n·T − t ≤ burst·T`, after which
//! `TAT = max(TAT, t) + n·T`. This is decision for decision what `governor` does
//! (its tolerance `τ = (burst − 1)·T` plus the first cell's `T`), except for the
//! rounding: governor rounds `T` down, which over-admits when the interval is not a
//! whole number of nanoseconds (600,000,000 per second gets `T = 1 ns`, a billion per
//! second). Rounding up never admits more than the quota: over any span `t` at most
//! `burst + t/T ≤ burst + t·limit/period`. The price is a rate lower by less than
//! `1 ns / T` relative (under 0.1 % for any rate below 1,000,000 per second; 600,000,000
//! per second runs at 500,000,000).
//!
//! Stale readings: once any request has been decided at time `e`, `TAT > e` (an
//! admission adds at least `T`; a denial of `n ≤ burst` implies `TAT > e`), so a reading
//! `t ≤ e` yields the same `max(TAT, t) = TAT`: the new state is exactly what a fresh
//! reading would give, and the admission test `TAT + n·T − t ≤ burst·T` is only
//! stricter. An old reading can never re-earn capacity.

use super::booking::{self, Booking, Reserved};
use super::HORIZON_NS;
use crate::{decision::Decision, error::ConfigError, quota::Quota};
use std::time::Duration;

/// Validated GCRA parameters.
///
/// State layout: the whole `u64` is `TAT`, nanoseconds since the clock's zero at which
/// the bucket is full again. `0` is a full bucket (a fresh key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Gcra {
    /// Emission interval `T`, ns per request.
    t: u64,
    /// `burst · T`, ns.
    tau: u64,
    burst: u32,
    /// The quota's limit, reported by decisions next to the burst.
    limit: u32,
    /// Flags, as one word (the first of the words `Replaceable` publishes): bit 8, the
    /// leaky bucket's shaper (report the hold time in `Decision::delay`); bits 16–19,
    /// the rate class a keyed table gave this interval (see `table::packed::rates`: states it
    /// writes are tagged with it, so that a request under another interval converts
    /// what the key owes, see [`convert`](Self::convert)); bit 20, whether the table
    /// may hold states of several classes (several tier rates, or a rate changed by
    /// `set_quota`): only then does a keyed hit compare classes. Kept as the word it
    /// travels as, so reading the parameters decodes nothing.
    flags: u64,
}

const SHAPER: u64 = 1 << 8;
const CLASS_SHIFT: u32 = 16;
const CLASS: u64 = 0xF << CLASS_SHIFT;
const MIXED: u64 = 1 << 20;

/// The parameters as the four words `sync::Replaceable` publishes: the flags, `T`, `τ`, and
/// `burst | limit << 32`.
impl crate::sync::Words for Gcra {
    #[inline]
    fn as_words(&self) -> [u64; 4] {
        [
            self.flags,
            self.t,
            self.tau,
            u64::from(self.burst) | (u64::from(self.limit) << 32),
        ]
    }

    #[inline]
    fn from_words(w: [u64; 4]) -> Self {
        Gcra {
            flags: w[0],
            t: w[1],
            tau: w[2],
            burst: w[3] as u32,
            limit: (w[3] >> 32) as u32,
        }
    }
}

impl Gcra {
    /// Whether the table may hold states of several rate classes (see the field).
    #[inline(always)]
    pub(crate) fn mixed(&self) -> bool {
        self.flags & MIXED != 0
    }

    /// These parameters in a table that may hold several rate classes.
    pub(crate) fn with_mixed(mut self) -> Self {
        self.flags |= MIXED;
        self
    }

    /// Whether this is the leaky bucket's shaper.
    pub(crate) fn is_shaper(&self) -> bool {
        self.flags & SHAPER != 0
    }

    /// The rate class (see the field).
    #[inline(always)]
    pub(crate) fn class(&self) -> u8 {
        ((self.flags & CLASS) >> CLASS_SHIFT) as u8
    }

    /// These parameters under rate class `class`.
    pub(crate) fn with_class(mut self, class: u8) -> Self {
        self.flags = (self.flags & !CLASS) | (u64::from(class) << CLASS_SHIFT & CLASS);
        self
    }

    /// The emission interval `T`, ns.
    pub(crate) fn interval(&self) -> u64 {
        self.t
    }

    /// `tat`, written under the emission interval `from`, as this quota's state at
    /// `now`: what the key still owes carries over in requests, rounded up, so that
    /// the limit is never exceeded: `TAT' = now + ⌈(TAT − now)·T / T_from⌉` when
    /// `TAT > now` (an idle bucket owes nothing and is kept as is). Raising a limit
    /// never lengthens a wait, lowering one never shortens it: a key that used 10 of a
    /// plan's 10 has used 10 of the next plan's 1,000, and 10 of 10 is 10 of 5.
    ///
    /// A converted debt ends at the clock's horizon ([`HORIZON_NS`]) at the latest:
    /// readings stop there (see `algorithm::now`), so the key is whole at the last
    /// reading, and a conversion back to a faster rate later converts what is left of
    /// `HORIZON_NS − c`: one rule a caller can check (`reset_after` is at most the
    /// time left until the horizon). A state that already lay past the horizon (a
    /// charge or a booking read near it) is kept as it is, so that a slower rate never
    /// shortens its wait. Either way `TAT` stays within the sums' bound (see `step`).
    #[inline]
    pub(crate) fn convert(&self, tat: u64, from: u64, now: u64) -> u64 {
        if tat <= now || from == self.t || from == 0 {
            return tat;
        }
        let debt = u128::from(tat - now) * u128::from(self.t);
        let owed = debt.div_ceil(u128::from(from));
        let end = tat.max(HORIZON_NS);
        now + owed.min(u128::from(end - now)) as u64
    }

    pub(crate) fn new(quota: Quota, period: u64, shaper: bool) -> Result<Self, ConfigError> {
        // More than one request per nanosecond cannot be represented at all.
        if period < u64::from(quota.limit()) {
            return Err(ConfigError::RateTooHigh {
                limit: quota.limit(),
                period: quota.period(),
            });
        }
        // Rounded up: the limit is never exceeded (see the module docs).
        let t = period.div_ceil(u64::from(quota.limit()));
        let burst = quota.burst();
        let tau = u128::from(t) * u128::from(burst);
        if tau > u128::from(HORIZON_NS) {
            let span = u64::try_from(tau).unwrap_or(u64::MAX);
            return Err(ConfigError::PeriodTooLong {
                span: Duration::from_nanos(span),
                max: Duration::from_nanos(HORIZON_NS),
            });
        }
        Ok(Gcra {
            t,
            // tau <= HORIZON_NS < u64::MAX by the check above.
            tau: tau as u64,
            burst,
            limit: quota.limit(),
            flags: if shaper { SHAPER } else { 0 },
        })
    }

    pub(crate) fn burst(&self) -> u32 {
        self.burst
    }

    /// The quota's limit.
    pub(crate) fn limit(&self) -> u32 {
        self.limit
    }

    /// `now <= HORIZON_NS`, `tat <= HORIZON_NS + τ' + MAX_WAIT_NS` with `τ'` the `τ`
    /// of the quota that wrote it, at most `HORIZON_NS` (an invariant of the states
    /// this function, [`reserve`](Self::reserve), [`charge`](Self::charge) and
    /// [`convert`](Self::convert) produce) and `cost <= burst` (checked by the
    /// caller): every sum below stays under `2^64` (`2^63 + 2^60`, plus `τ`).
    #[inline(always)]
    pub(crate) fn step(&self, tat: u64, now: u64, cost: u32) -> (Option<u64>, Decision) {
        let base = tat.max(now);
        let weight = u64::from(cost) * self.t;
        let new_tat = base + weight;
        let horizon = now + self.tau;
        // A zero-cost peek is always "allowed": it asks for nothing. Only a stale
        // reading (`now` older than the state) can put `TAT` past `now + τ`; the peek
        // then reports no capacity left rather than a denial.
        if cost == 0 || new_tat <= horizon {
            let remaining = (horizon.saturating_sub(new_tat) / self.t) as u32;
            let delay = if self.is_shaper() { base - now } else { 0 };
            let d =
                Decision::allow(self.burst, remaining, new_tat - now, delay).with_limit(self.limit);
            let next = if cost == 0 { None } else { Some(new_tat) };
            (next, d)
        } else {
            let remaining = (horizon.saturating_sub(base) / self.t) as u32;
            (
                None,
                Decision::deny(self.burst, remaining, base - now, new_tat - horizon)
                    .with_limit(self.limit),
            )
        }
    }

    /// Virtual scheduling: books `cost` at the earliest time it conforms, in one state
    /// transition, so the order of service is the order of the compare-and-swaps (FIFO
    /// with no queue). The request may proceed once `TAT' − τ` is reached (for the
    /// shaper, once its slot `max(TAT, now)` starts). `Err(wait)` when that is more
    /// than `max_wait` (`<= MAX_WAIT_NS`) from now: nothing is booked.
    #[inline]
    pub(crate) fn reserve(
        &self,
        tat: u64,
        now: u64,
        cost: u32,
        max_wait: u64,
    ) -> (Option<u64>, Reserved) {
        let base = tat.max(now);
        let weight = u64::from(cost) * self.t;
        let new_tat = base + weight;
        let conforms = (new_tat - now).saturating_sub(self.tau);
        // For the shaper the slot's start is the later of the two (cost <= burst).
        let wait = if self.is_shaper() {
            base - now
        } else {
            conforms
        };
        if wait > max_wait {
            let allowed = max_wait;
            return (None, Err(booking::Late { wait, allowed }));
        }
        let at = now + wait;
        let remaining = ((at + self.tau).saturating_sub(new_tat) / self.t) as u32;
        let decision =
            Decision::allow(self.burst, remaining, new_tat - at, 0).with_limit(self.limit);
        let booking = Booking::Gcra {
            tat: new_tat,
            weight,
            acts: at + self.tau,
        };
        booking::stored(new_tat, wait, decision, booking)
    }

    /// Gives a booking back at `now`, on a state that descends from it (the callers
    /// check that no reset or reclaim came between: see `booking::Origin`).
    ///
    /// A **cancel** gives back what no later booking depends on (Go x/time/rate's
    /// `CancelAt` rule in GCRA terms, `tokens − (lastEvent − timeToAct)·rate`): the
    /// booking's `weight`, less how far what is still booked reaches past this one's
    /// `due` time. Bookings still standing end at `TAT − τ` (a booking that waited acts
    /// there; one admitted at once acts at its reading, before this one's `due`, as a
    /// cancel comes before it is due): so they depend on `max(TAT − τ − due, 0)`, with
    /// `τ` of the quota the booking was made under (the booking records `due + τ` as
    /// `acts`, as a keyed table refunds with tier 0's parameters). x/time/rate measures
    /// from `lastEvent`, the last booking's time, which a cancel out of order does not
    /// move back; `TAT` does, so after such cancels this gives back more than
    /// x/time/rate (what the cancelled bookings no longer hold), never more than
    /// `weight`. A request admitted at once within the burst depends on nothing, and a
    /// booking left last by earlier cancels gives all of itself back.
    ///
    /// A **roll-back** (the request never proceeded: a multi-limit check denied by
    /// another limit, a middleware whose other policy denied) gives back the part of
    /// the booking's debt still outstanding at `now`, `min(weight, booked TAT − now)`,
    /// whatever other requests were admitted in between: their own debt stays. With
    /// the debt `D = max(TAT − t, 0)` of the bucket with and without the booking, the
    /// difference is `weight` at the booking and shrinks only while the bucket without
    /// it would have been full, which is at most `now − booked TAT + weight` of the
    /// time since; so this never gives back more than the booking still holds (no
    /// capacity is made), and exactly `weight` when the roll-back follows its booking
    /// at the same reading (what `check_all` does).
    ///
    /// The shaper's roll-back is as exact: slots booked behind it meanwhile keep their
    /// release times, and the time given back goes to the next booking (which may
    /// then be released closer to the last of them than the spacing, by at most the
    /// slot given back; `check_all` books leaky buckets after every other limit, so
    /// this takes two leaky buckets in one check and a race). A shaper's *cancel*
    /// gives a slot back only while no later slot was booked: the request it was made
    /// for may still proceed at any time, so a gap in the middle of the schedule could
    /// only be used by overtaking the slots after it.
    #[inline]
    pub(crate) fn refund(
        &self,
        tat: u64,
        (booked_tat, weight, acts): (u64, u64, u64),
        now: u64,
        roll_back: bool,
    ) -> Option<u64> {
        let restore = if roll_back {
            weight.min(booked_tat.saturating_sub(now))
        } else if self.is_shaper() && tat != booked_tat {
            return None;
        } else {
            let later = tat.saturating_sub(acts);
            weight.saturating_sub(later)
        };
        (restore > 0).then(|| tat.saturating_sub(restore))
    }

    /// A charge of `cost` at `now`: taken whatever is left, so `TAT` may pass the burst
    /// `now + τ` by a debt the next admissions wait out at the quota's rate (exact
    /// GCRA: a request conforms once `TAT − τ` is reached). The key owes at most
    /// `max_owed` requests past the burst (and at most [`MAX_WAIT_NS`] of time, which
    /// keeps `TAT` within the sums' bound): the part of the cost past that is dropped,
    /// and reported. The decision is the state after it, as a peek of one request sees
    /// it; the booking gives the taken part back (see `Charge::give_back`).
    ///
    /// [`MAX_WAIT_NS`]: super::booking::MAX_WAIT_NS
    pub(crate) fn charge(
        &self,
        tat: u64,
        now: u64,
        cost: u32,
        max_owed: u32,
    ) -> (Option<u64>, Reserved) {
        let base = tat.max(now);
        let full = now + self.tau;
        // Saturating: `max_owed` may be any u32, `T` up to the horizon.
        let debt = u64::from(max_owed)
            .saturating_mul(self.t)
            .min(super::booking::MAX_WAIT_NS);
        let room = (full + debt).saturating_sub(base) / self.t;
        let taken = u64::from(cost).min(room) as u32;
        let new_tat = base + u64::from(taken) * self.t;
        // Saturating: charges owing up to `u32::MAX` each can put a key more than
        // `2^32` requests past its quota (a lower burst or an older reading adds to
        // that), and `owed` counts in a `u32`: it reads `u32::MAX` then, never a
        // wrapped count that looks paid off.
        let owed = new_tat.saturating_sub(full).div_ceil(self.t);
        let owed = u32::try_from(owed).unwrap_or(u32::MAX);
        let counted = booking::Counted {
            taken,
            owed,
            dropped: cost - taken,
            given: 0,
        };
        let decision = self.step(new_tat, now, 1).1;
        let booked = booking::Booked {
            wait: 0,
            decision,
            booking: Booking::Gcra {
                tat: new_tat,
                weight: u64::from(taken) * self.t,
                acts: 0,
            },
            counted,
        };
        ((taken > 0).then_some(new_tat), Ok(booked))
    }

    /// Gives `cost` back to `tat` at `now`, never below a full bucket (`TAT <= now`):
    /// the requests given back are those the state still held.
    pub(crate) fn give_back(&self, tat: u64, now: u64, cost: u32) -> (Option<u64>, Reserved) {
        let held = tat.saturating_sub(now).div_ceil(self.t);
        let given = u64::from(cost).min(held);
        let next = tat.saturating_sub(given * self.t).max(now.min(tat));
        let counted = booking::Counted {
            given: given as u32,
            ..Default::default()
        };
        let booked = booking::Booked {
            wait: 0,
            decision: self.step(next, now, 1).1,
            booking: Booking::Nothing,
            counted,
        };
        ((given > 0).then_some(next), Ok(booked))
    }

    /// What an admission of `cost` that left `tat` booked.
    #[inline]
    pub(crate) fn booking(&self, tat: u64, cost: u32) -> Booking {
        Booking::Gcra {
            tat,
            weight: u64::from(cost) * self.t,
            // Only rolled back (never cancelled), which does not read it.
            acts: 0,
        }
    }

    /// A bucket that is full again (`TAT <= now`) decides like a fresh one.
    #[inline]
    pub(crate) fn is_idle(&self, tat: u64, now: u64) -> bool {
        tat <= now
    }

    /// The time from which `tat` is idle: the state is its own idle stamp.
    #[inline]
    pub(crate) fn idle_at(&self, tat: u64) -> u64 {
        tat
    }

    /// The keyed table's eviction rank of a state live at `now` (`TAT > now`): what it
    /// has used, its debt `TAT − now` (in nanoseconds, `T` per request; every entry of
    /// a table is ranked at the same interval, so the order is the order in requests),
    /// then its idle stamp. Both grow with `TAT`, so the rank is `TAT` itself: one
    /// comparison per entry.
    #[inline]
    pub(crate) fn evict_rank(&self, tat: u64) -> u64 {
        tat
    }
}
