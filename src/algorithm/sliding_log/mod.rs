//! Exact sliding log: a ring of the last `limit` admission timestamps.
//!
//! A request of cost `n` at time `t` is admitted iff fewer than `limit − n + 1` of the
//! logged admissions fall in `(t − P, t]`, that is, iff the `n`-th oldest entry of the
//! ring is empty or at most `t − P`. Then the `n` oldest entries are overwritten with
//! `t`. The ring holds timestamps in admission order, so at most `limit` admissions lie
//! in any interval `(t − P, t]`.

use super::booking::{Booked, Booking, Overwritten, Reserved};
use super::SLIDING_LOG_MAX_LIMIT;
use crate::{decision::Decision, error::ConfigError, quota::Quota};
use ring::EMPTY;
pub(crate) use ring::{Cursor, Ring, Stamps, EMPTY_STAMP};

mod charge;
mod refund;
mod ring;

/// Validated sliding-log parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlidingLog {
    period: u64,
    limit: u32,
}

/// The parameters as the words `sync::Replaceable` publishes: the period and the limit (the
/// other two unused).
impl crate::sync::Words for SlidingLog {
    #[inline]
    fn as_words(&self) -> [u64; 4] {
        [self.period, u64::from(self.limit), 0, 0]
    }

    #[inline]
    fn from_words(w: [u64; 4]) -> Self {
        SlidingLog {
            period: w[0],
            limit: w[1] as u32,
        }
    }
}

impl SlidingLog {
    pub(crate) fn new(quota: Quota, period: u64) -> Result<Self, ConfigError> {
        let limit = quota.limit();
        if limit > SLIDING_LOG_MAX_LIMIT {
            return Err(ConfigError::LogTooLarge {
                limit,
                max: SLIDING_LOG_MAX_LIMIT,
            });
        }
        Ok(SlidingLog { period, limit })
    }

    pub(crate) fn limit(&self) -> u32 {
        self.limit
    }

    /// These parameters counting every entry of a ring of `len` timestamps (`len` at
    /// least the limit: a keyed table's rings hold its largest tier's limit), for the
    /// eviction rank, which compares what keys of every tier used.
    pub(crate) fn over_ring(&self, len: u32) -> SlidingLog {
        SlidingLog {
            period: self.period,
            limit: len.max(self.limit),
        }
    }

    /// The window length, ns.
    pub(crate) fn period(&self) -> u64 {
        self.period
    }

    /// The `i`-th oldest of the newest `limit` entries: a ring built for a larger
    /// limit (before a `set_quota` lowered it) keeps older entries before them, which
    /// no longer count.
    #[inline]
    fn nth<S: Stamps>(&self, ring: &Ring<S>, i: u32) -> u64 {
        ring.entry(ring.len() - self.limit + i)
    }

    /// What an empty log decides for `cost`, without a ring: exactly what
    /// [`step`](Self::step) decides on a fresh [`Ring`] at any time.
    pub(crate) fn fresh(&self, cost: u32) -> Decision {
        let reset = if cost == 0 { 0 } else { self.period };
        // Saturating: a charge may cost more than the limit.
        Decision::allow(self.limit, self.limit.saturating_sub(cost), reset, 0)
    }

    /// Whether an entry no longer lies in `(now − P, now]`.
    #[inline]
    fn expired(&self, ts: u64, now: u64) -> bool {
        // ts <= HORIZON_NS and period <= HORIZON_NS: no overflow.
        ts == EMPTY || ts + self.period <= now
    }

    /// Entries still in the window at `now`.
    fn active<S: Stamps>(&self, ring: &Ring<S>, now: u64) -> u32 {
        // Entries are in admission order, so the expired ones are a prefix.
        let (mut lo, mut hi) = (0u32, self.limit);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.expired(self.nth(ring, mid), now) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        self.limit - lo
    }

    /// Whether `cost` read at `reading` may be logged: `Ok` with the time it is logged
    /// at (never older than the newest entry), or `Err` with the decision when it
    /// is not (queued behind a booking, denied, or a cost of 0, which reports the
    /// state). Entries are in admission order, so when the `cost`-th oldest has left
    /// the window, all older ones have too.
    #[inline(always)]
    fn judge<S: Stamps>(&self, ring: &Ring<S>, reading: u64, cost: u32) -> Result<u64, Decision> {
        if ring.pending(reading) {
            return Err(self.queued(ring, reading, cost));
        }
        let now = self.effective(ring, reading);
        if cost == 0 {
            return Err(self.state(ring, now, reading));
        }
        let nth_oldest = self.nth(ring, cost - 1);
        if !self.expired(nth_oldest, now) {
            return Err(self.denial(ring, now, reading, nth_oldest));
        }
        Ok(now)
    }

    /// `now <= HORIZON_NS`, `cost <= limit`.
    ///
    /// Its fast path inline, the rest out of line: one function for both paid a call,
    /// a frame and the ring through memory on every decision.
    #[inline(always)]
    pub(crate) fn step<S: Stamps>(&self, ring: &mut Ring<S>, now: u64, cost: u32) -> Decision {
        // When the newest entry has left the window, every entry has (they are in
        // admission order, the newest last): the log is empty at this reading, so the
        // request is admitted at it and its `cost` entries are all that is active,
        // decided from the cursor alone, with no timestamp read (what `judge` and
        // `step_judged` decide too; `cost == limit` takes the general path, whose count
        // of active entries a zero period would change).
        if cost > 0 && cost < self.limit && self.expired(ring.newest, now) {
            self.log(ring, now, cost);
            return Decision::allow(self.limit, self.limit - cost, self.period, 0);
        }
        self.step_judged(ring, now, cost)
    }

    /// [`step`](Self::step) past its fast path: judged on the ring's entries.
    #[inline(never)]
    fn step_judged<S: Stamps>(&self, ring: &mut Ring<S>, now: u64, cost: u32) -> Decision {
        let reading = now;
        let now = match self.judge(ring, reading, cost) {
            Ok(at) => at,
            Err(d) => return d,
        };
        self.log(ring, now, cost);
        // When the newest entry before these has left the window, so has every older
        // one: the `cost` just admitted are all that is active (the common case of a
        // key used less often than its limit per period), without the search.
        let active =
            if cost < self.limit && self.expired(self.nth(ring, self.limit - cost - 1), now) {
                cost
            } else {
                self.active(ring, now)
            };
        Decision::allow(
            self.limit,
            self.limit - active,
            now + self.period - reading,
            0,
        )
    }

    /// [`step`](Self::step), with what an admission booked, for a roll-back: the
    /// entries it logged, and the newest of the ring's entries it overwrote.
    #[inline]
    pub(crate) fn step_booked<S: Stamps>(
        &self,
        ring: &mut Ring<S>,
        now: u64,
        cost: u32,
    ) -> (Decision, Booking) {
        let prior = (cost > 0).then(|| overwritten(ring, cost));
        let overdrawn = ring.overdrawn;
        // An admission is never behind a pending booking (it would be queued).
        let booked = ring.pending(now);
        let d = self.step(ring, now, cost);
        let booking = if let (true, Some(prior)) = (d.is_allowed(), prior) {
            Booking::Log {
                at: ring.newest,
                cost,
                prior,
                writes: ring.writes,
                future: false,
                booked,
                overdrawn,
                rest: 0,
            }
        } else {
            Booking::Nothing
        };
        (d, booking)
    }

    /// Logs `cost` admissions at `now` (no older than the newest entry).
    #[inline(always)]
    fn log<S: Stamps>(&self, ring: &mut Ring<S>, now: u64, cost: u32) {
        for i in 0..cost {
            let idx = ring.wrap(i);
            ring.ts.set(idx, now);
        }
        // cost <= limit = len, so the new head is one wrap away.
        ring.head = ring.wrap(cost) as u32;
        ring.newest = now;
        ring.booked = false;
        ring.writes = ring.writes.wrapping_add(1) & ring::WRITES;
    }

    /// The denial of `cost` read at `reading`, before a booking at `ring.newest`:
    /// nothing is admitted ahead of it (order of booking), so retry once it is due and
    /// the request fits then.
    ///
    /// A cost of 0 asks for nothing and is allowed, with nothing remaining: no request
    /// is admitted before the booking is due.
    #[cold]
    fn queued<S: Stamps>(&self, ring: &Ring<S>, reading: u64, cost: u32) -> Decision {
        let due = ring.newest;
        if cost == 0 {
            return Decision::allow(self.limit, 0, due + self.period - reading, 0);
        }
        let nth_oldest = self.nth(ring, cost - 1);
        let fits_at = if self.expired(nth_oldest, due) {
            due
        } else {
            nth_oldest + self.period
        };
        Decision::deny(
            self.limit,
            0,
            due + self.period - reading,
            fits_at - reading,
        )
    }

    /// Books `cost` entries at the earliest time they fit if nothing else arrives: the
    /// reading (or the newest entry, if later), or when the `cost`-th oldest entry
    /// leaves the window. Entries stay in order, so later requests are served after
    /// this one. `Err(wait)` when that is more than `max_wait` after the reading.
    ///
    /// A reading behind the newest entry with no booking pending (the clock stepped
    /// back) is decided at the newest entry's time, as [`step`](Self::step) decides
    /// it: booked then when it fits, with no wait; a booking for a later time waits
    /// from the reading, never too early for its caller.
    pub(crate) fn reserve<S: Stamps>(
        &self,
        ring: &mut Ring<S>,
        reading: u64,
        cost: u32,
        max_wait: u64,
    ) -> Reserved {
        let pending = ring.pending(reading);
        let now = self.effective(ring, reading);
        let nth_oldest = self.nth(ring, cost - 1);
        let at = if self.expired(nth_oldest, now) {
            now
        } else {
            nth_oldest + self.period
        };
        // Behind a pending booking, `now` is that booking's time, not a time the state
        // was decided at: this one is booked ahead too.
        let future = pending || at > now;
        let wait = if future { at - reading } else { 0 };
        if let Some(late) = super::booking::Late::check(wait, max_wait, at, reading) {
            return Err(late);
        }
        let prior = overwritten(ring, cost);
        let overdrawn = ring.overdrawn;
        for i in 0..cost {
            let idx = ring.wrap(i);
            ring.ts.set(idx, at);
        }
        ring.head = ring.wrap(cost) as u32;
        ring.newest = at;
        ring.booked = future;
        ring.writes = ring.writes.wrapping_add(1) & ring::WRITES;
        let active = self.active(ring, at);
        let decision = Decision::allow(self.limit, self.limit - active, self.period, 0);
        let booking = Booking::Log {
            at,
            cost,
            prior,
            writes: ring.writes,
            future,
            booked: pending,
            overdrawn,
            rest: 0,
        };
        Ok(Booked {
            wait,
            decision,
            booking,
            counted: Default::default(),
        })
    }

    /// The log's state at the decision time `now` (read at `reading`), asking for
    /// nothing: what a request of cost 0 gets.
    fn state<S: Stamps>(&self, ring: &Ring<S>, now: u64, reading: u64) -> Decision {
        let active = self.active(ring, now);
        let reset = self.reset(ring, now, reading);
        Decision::allow(self.limit, self.limit - active, reset, 0)
    }

    /// What [`step`](Self::step) would decide for `cost` at `now`, logging nothing:
    /// logging would add exactly `cost` active entries.
    pub(crate) fn peek<S: Stamps>(&self, ring: &Ring<S>, now: u64, cost: u32) -> Decision {
        let reading = now;
        let now = match self.judge(ring, reading, cost) {
            Ok(at) => at,
            Err(d) => return d,
        };
        let active = self.active(ring, now);
        Decision::allow(
            self.limit,
            self.limit - active - cost,
            now + self.period - reading,
            0,
        )
    }

    /// The time a reading is decided at: a reading older than the newest admission is
    /// treated as that admission's time (waits are still measured from the reading, so
    /// they are never too early for the caller whose clock read it).
    #[inline]
    fn effective<S: Stamps>(&self, ring: &Ring<S>, reading: u64) -> u64 {
        if ring.newest == EMPTY {
            reading
        } else {
            reading.max(ring.newest)
        }
    }

    /// How long from `reading` until the log is empty again (0 when it is).
    #[inline]
    fn reset<S: Stamps>(&self, ring: &Ring<S>, now: u64, reading: u64) -> u64 {
        if ring.newest == EMPTY || self.expired(ring.newest, now) {
            0
        } else {
            ring.newest + self.period - reading
        }
    }

    /// The denial of a request whose `cost`-th oldest entry, `nth_oldest`, is still in
    /// the window: retry when it leaves.
    fn denial<S: Stamps>(
        &self,
        ring: &Ring<S>,
        now: u64,
        reading: u64,
        nth_oldest: u64,
    ) -> Decision {
        let active = self.active(ring, now);
        let retry = nth_oldest + self.period - reading;
        Decision::deny(
            self.limit,
            self.limit - active,
            self.reset(ring, now, reading),
            retry,
        )
    }

    /// Idle when every logged admission has left the window, from the cursor alone.
    pub(crate) fn cursor_is_idle(&self, cursor: Cursor, now: u64) -> bool {
        self.expired(cursor.newest, now)
    }

    /// The time from which the log at `cursor` is idle: when its newest admission
    /// leaves the window (0 when it never logged one).
    pub(crate) fn cursor_idle_at(&self, cursor: Cursor) -> u64 {
        if cursor.newest == EMPTY {
            0
        } else {
            cursor.newest + self.period
        }
    }

    /// The keyed table's eviction rank of a log live at `now`, whose idle stamp is
    /// `idle_at` ([`cursor_idle_at`](Self::cursor_idle_at)): what it has used, its
    /// entries still in `(now − P, now]` (and any booked after `now`), then its idle
    /// stamp, as one number (`used << 64 | idle stamp`). A log holding a booking after
    /// `now` (a reservation: it admits nothing before the booking is due, so forgetting
    /// it can over-admit a whole quota) ranks above every log that does not (bit 96).
    /// A binary search of the ring (call under the ring's lock).
    pub(crate) fn evict_rank<S: Stamps>(&self, ring: &Ring<S>, now: u64, idle_at: u64) -> u128 {
        let mut used = u128::from(self.active(ring, now));
        if ring.pending(now) {
            used |= 1 << 32;
        }
        (used << 64) | u128::from(idle_at)
    }

    /// Bounds of [`evict_rank`](Self::evict_rank) read off the cursor alone, with no
    /// ring read: a live log has used at least 1 entry and at most `limit`.
    pub(crate) fn evict_rank_bounds(&self, cursor: Cursor, now: u64, idle_at: u64) -> [u128; 2] {
        let booked = if cursor.booked() && cursor.newest > now {
            1 << 32
        } else {
            0
        };
        [1, self.limit].map(|used| ((u128::from(used) | booked) << 64) | u128::from(idle_at))
    }
}

/// The `cost` oldest entries of `ring` (`1 <= cost <= len`), which a booking of `cost`
/// is about to overwrite: one read for a cost of 1; an allocation only when they held
/// more than one time (never-used entries come first, as the ring fills in order).
fn overwritten<S: Stamps>(ring: &Ring<S>, cost: u32) -> Overwritten {
    let time = ring.entry(cost - 1);
    let mut empties = 0;
    for i in 0..cost - 1 {
        match ring.entry(i) {
            EMPTY if empties == i => empties += 1,
            t if t == time && t != EMPTY => {}
            _ => return Overwritten::Each((0..cost).map(|i| ring.entry(i)).collect()),
        }
    }
    if time == EMPTY {
        empties = cost;
    }
    Overwritten::Uniform { empties, time }
}
