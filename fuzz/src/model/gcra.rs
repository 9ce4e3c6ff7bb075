//! TokenBucket and LeakyBucket: GCRA in integer nanoseconds.
//!
//! guide: "GCRA: a request of cost `n` at `t` is admitted iff
//! `max(TAT, t) + n·T − t ≤ burst·T`"; "`LeakyBucket` admits exactly what `TokenBucket`
//! admits; `Decision::delay()` says how long to hold each admitted request"
//! (DESIGN: "delay = max(TAT, t) − t").

use super::{Algo, Booking, Expect, Params};

#[derive(Clone, Debug, Default)]
pub struct Gcra {
    /// The theoretical arrival time.
    pub tat: u128,
    /// The emission interval that wrote `tat` (0: never written).
    pub wt: u128,
    /// The leaky bucket's admissions still holding their slots, in order (ids).
    pub slots: Vec<u64>,
    /// A conversion took the debt to the horizon (guide::promises: "a converted debt ends at
    /// the clock's horizon at the latest"): from then on the model is no longer
    /// exact, even once converted back below it.
    pub was_past_horizon: bool,
    /// A fresh key of a keyed table found missing: the reading it is decided at until
    /// its first write (README: a missing key "is decided no earlier than the newest
    /// reclaim in its shard"); 0 otherwise.
    pub floor: u128,
}

impl Gcra {
    /// `tat` as the deciding quota's state at `t`. guide: "a bucket's debt at the change
    /// `c` is converted into the new quota's requests, `TAT' = c + ⌈(TAT − c)·T_new /
    /// T_old⌉`, rounded up so the limit is never exceeded"; for tiers, "a request under
    /// another tier converts the key's debt ... into its own tier's requests when it is
    /// decided".
    pub fn effective(&self, t: u128, p: &Params) -> u128 {
        let tn = p.t();
        if self.wt == 0 || self.wt == tn || self.tat <= t {
            return self.tat;
        }
        // README: "a converted debt ends at the clock's horizon at the latest (2^62 ns
        // after its zero, about 146 years), unless it already ended later".
        let end = self.tat.max(super::HORIZON);
        t.saturating_add((self.tat - t).saturating_mul(tn).div_ceil(self.wt))
            .min(end)
    }

    /// Stores the conversion; true when a debt was converted to another rate (bookings
    /// made before it then give nothing back: guide "after a `set_quota` or tier change
    /// that converted a bucket's state to another rate, nothing either").
    pub fn convert(&mut self, t: u128, p: &Params) -> bool {
        let tn = p.t();
        if self.wt == tn {
            return false;
        }
        let converted = self.wt != 0 && self.tat > t;
        self.tat = self.effective(t, p);
        self.was_past_horizon |= self.tat >= super::HORIZON;
        self.wt = tn;
        if converted {
            self.slots.clear();
        }
        converted
    }

    pub fn decide(&self, t: u128, n: u32, p: &Params) -> Expect {
        if self.floor > t {
            // Decided at the floor, every wait measured from the reading.
            let lag = self.floor - t;
            let e = Gcra {
                floor: 0,
                ..self.clone()
            }
            .decide(self.floor, n, p);
            let from_t = |x: u128| if x == 0 { 0 } else { x + lag };
            return Expect {
                reset_after: from_t(e.reset_after),
                retry_after: e.retry_after.map(|x| x + lag),
                delay: from_t(e.delay),
                ..e
            };
        }
        let tt = p.t();
        let tau = u128::from(p.burst) * tt;
        let eff = self.effective(t, p);
        let base = eff.max(t);
        let weight = u128::from(n) * tt;
        let at = (base + weight).saturating_sub(tau).max(t);
        let allowed = at == t;
        let after = if allowed { base + weight } else { eff };
        let held = after.max(t) - t;
        Expect {
            allowed,
            limit: p.limit,
            burst: p.burst,
            remaining: u32::try_from(tau.saturating_sub(held) / tt).unwrap_or(u32::MAX),
            reset_after: held,
            retry_after: (!allowed).then_some(at - t),
            delay: if allowed && p.algo == Algo::Leaky {
                base - t
            } else {
                0
            },
        }
    }

    /// When a booking of `n` at `t` may proceed: GCRA virtual scheduling for the token
    /// bucket (guide: "For the buckets this is GCRA virtual scheduling"), the start of
    /// its release slot for the leaky bucket (its `delay`). MODEL CHOICE: the leaky
    /// bucket's reservation waits for its slot, `max(TAT, t) − t`.
    pub fn proceed_at(&self, t: u128, n: u32, p: &Params) -> u128 {
        let t = t.max(self.floor);
        let base = self.effective(t, p).max(t);
        match p.algo {
            Algo::Leaky => base,
            _ => (base + u128::from(n) * p.t())
                .saturating_sub(u128::from(p.burst) * p.t())
                .max(t),
        }
    }

    /// Takes `n` at `t` (already converted to `p`), due at `due`.
    pub fn take(&mut self, t: u128, _due: u128, n: u32, p: &Params, id: u64) {
        let t = t.max(std::mem::take(&mut self.floor));
        self.tat = self.tat.max(t) + u128::from(n) * p.t();
        self.wt = p.t();
        if p.algo == Algo::Leaky {
            self.slots.push(id);
        }
    }

    /// A cancel at `t <= b.due` on the state it was booked on.
    pub fn cancel(&mut self, t: u128, b: &Booking, p: &Params) {
        if b.rate != self.wt {
            return;
        }
        let weight = u128::from(b.n) * b.rate;
        if p.algo == Algo::Leaky {
            // guide: "for the leaky bucket's spaced slots ... everything while nothing
            // later was booked into a later slot ..., else nothing" (the state as the
            // booking left it).
            if self.slots.last() == Some(&b.id) && self.tat == b.tat {
                self.slots.pop();
                self.tat = self.tat.saturating_sub(weight).max(t);
            }
            return;
        }
        // guide: "for the token bucket, its tokens less how far what is still booked
        // reaches past its own time: the state's `TAT − τ` (with the `τ` it was booked
        // under) against its due time" (x/time/rate measures from `lastEvent`, which
        // cancels out of order do not move back).
        let depends = self.tat.saturating_sub(b.due + b.tau);
        if weight <= depends {
            return;
        }
        let restore = weight - depends;
        self.tat = self.tat.max(t).saturating_sub(restore).max(t);
    }

    /// What the entry has used, in requests of the rate that wrote it: `debt / T` as a
    /// fraction (numerator ns, denominator T).
    pub fn used(&self, t: u128) -> (u128, u128) {
        (self.tat.saturating_sub(t), self.wt.max(1))
    }
}
