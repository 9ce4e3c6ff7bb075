//! Token budgets: `charge`, `charge_owing`, `Charge::give_back` and the stateless
//! `give_back`, on top of the guide's models of the algorithms (the buckets' GCRA, the
//! windows' counts and the log's entries, `super::entries`).
//!
//! guide ("Token budgets"): "`charge(n)` takes such a cost after the fact, **never
//! denied**: whatever is left is used up and the key then **owes** the rest, which its
//! next requests wait out at the quota's rate (a bucket's debt is exact GCRA: a
//! theoretical arrival time past the burst), or which keeps the rest of the window (fixed
//! window), the next window's weight (sliding window) or the next period (sliding log)
//! from admitting anything. A debt is bounded: a bucket or a window owes at most one
//! burst past its quota (`charge_owing(n, max_owed)` sets another bound); the part of a
//! cost past the bound is not counted". A log needs no bound.
//!
//! The log is modelled by what it truly holds (every request charged or admitted and
//! not given back, the part past its ring included: the newest `limit` of them decide
//! every request, which is all the ring keeps). Where the guide leaves a log's
//! give-back inexact (a charge given back after other writes of its instant: "it cannot
//! tell"), the model goes `loose` until every entry has left the window: then it checks
//! only that nothing is admitted that what is truly held keeps out.

use super::entries::{Entries, Entry};
use super::{new_epoch, Algo, Expect, Params};

/// guide: "a bucket owes at most 36 years of its rate whatever is asked"
/// (`Reservation::MAX_WAIT`, 2^62 / 4 ns).
const MAX_DEBT: u128 = (1 << 62) / 4;

/// What a charge took, for its `Charge::give_back`.
#[derive(Clone, Copy, Debug)]
pub struct Rec {
    pub id: u64,
    /// The state generation it was taken from (a reset, a removal, a bucket's
    /// conversion to another rate start another).
    pub epoch: u64,
    pub taken: u32,
    /// Given back so far.
    pub given: u32,
    /// Buckets: `TAT` right after the charge, and the interval `T` it was taken at.
    pub tat: u128,
    pub rate: u128,
    /// Windows: the window it was counted in; the log: the time it was logged at.
    pub window: u128,
    pub at: u128,
}

/// A budget limiter (or one key of a keyed table) under the guide's model.
#[derive(Clone, Debug)]
pub struct Budget {
    pub algo: Algo,
    /// Buckets: the theoretical arrival time and the interval that wrote it (0: none).
    pub tat: u128,
    pub wt: u128,
    /// Windows and the log: the counted requests (`id` = the charge that took them).
    pub e: Entries,
    /// Windows: the window of the state's last write (a give-back of a charge reaches
    /// only the window the state is in).
    pub stored: u128,
    /// The log's ring length (the largest limit it was built for).
    pub ring: u32,
    pub epoch: u64,
    /// The log: the charge that was the last write, while it is.
    pub last: Option<u64>,
    /// The log: the newest time ever written (refused give-backs included).
    pub newest: u128,
    /// The log: a give-back the guide leaves inexact happened; until every entry has
    /// left the window only the bound (nothing admitted past what is truly held) holds.
    pub loose: bool,
    next_id: u64,
}

impl Budget {
    pub fn new(algo: Algo, ring: u32) -> Budget {
        Budget {
            algo,
            tat: 0,
            wt: 0,
            e: Entries::default(),
            stored: 0,
            ring,
            epoch: new_epoch(),
            last: None,
            newest: 0,
            loose: false,
            next_id: 1,
        }
    }

    /// `reset` / `remove` (a fresh state of a new generation).
    pub fn reset(&mut self) {
        *self = Budget::new(self.algo, self.ring);
    }

    /// Brings the log to `t`: a loose model is exact again once everything written has
    /// left the window.
    pub fn settle(&mut self, t: u128, p: &Params) {
        // Nothing is pruned here: a reading older than the state (the clock stepped back)
        // is decided at the state's time, where entries a later reading saw leave the
        // window may count again; they go only when a write moves the state on.
        let t = self.at(t, p);
        if self.algo == Algo::Log && self.newest + p.period <= t {
            self.loose = false;
        }
    }

    /// The time a reading `t` is decided at: the buckets decide at the reading itself
    /// (README: "admitted iff `max(TAT, t) + n·T − t ≤ burst·T`"), the windows and the
    /// log at the state's time when the reading is older (`Entries::eff`).
    pub fn at(&self, t: u128, p: &Params) -> u128 {
        if self.algo.is_bucket() {
            t
        } else {
            self.e.eff(t, p)
        }
    }

    /// Whether decisions are compared field by field (else only the bound holds).
    pub fn exact(&self) -> bool {
        !self.loose
    }

    fn effective(&self, t: u128, p: &Params) -> u128 {
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

    /// guide: "a bucket's debt at the change `c` is converted into the new quota's
    /// requests ... rounded up"; a state written at another rate starts a new
    /// generation, owing or not ("nor after a bucket's conversion to another rate (...
    /// whether or not it owed anything then, and even once converted back)": a
    /// `RateLimiter`'s `set_quota`, a keyed request under a tier of another rate).
    pub fn convert(&mut self, t: u128, p: &Params) {
        if !self.algo.is_bucket() || self.wt == p.t() {
            return;
        }
        if self.wt != 0 {
            self.tat = self.effective(t, p);
            self.epoch = new_epoch();
        }
        self.wt = p.t();
    }

    /// The decision a request of `n <= cap` gets at `t`.
    pub fn decide(&self, t: u128, n: u32, p: &Params) -> Expect {
        if self.algo.is_bucket() {
            let g = super::gcra::Gcra {
                tat: self.effective(t, p),
                wt: p.t(),
                slots: Vec::new(),
                was_past_horizon: false,
                floor: 0,
            };
            g.decide(t, n, p)
        } else {
            self.e.decide(t, n, p)
        }
    }

    /// `check_n(n)`, `n <= cap`.
    pub fn check(&mut self, t: u128, n: u32, p: &Params) -> Expect {
        self.convert(t, p);
        let d = self.decide(t, n, p);
        if d.allowed && n > 0 {
            if self.algo.is_bucket() {
                self.tat = self.tat.max(t) + u128::from(n) * p.t();
                self.wt = p.t();
            } else {
                self.push(self.at(t, p), n, 0, p);
            }
        }
        d
    }

    fn push(&mut self, t: u128, n: u32, id: u64, p: &Params) {
        self.e.prune(t, p);
        self.e.v.push(Entry {
            ts: t,
            n,
            id,
            future: false,
            window_ahead: false,
            moved: false,
        });
        self.stored = t / p.period;
        self.newest = t;
        self.e.now = self.e.now.max(t);
        self.last = (id != 0).then_some(id);
    }

    fn count(&self, w: u128, p: &Params) -> u128 {
        self.e
            .v
            .iter()
            .filter(|x| x.ts / p.period == w)
            .map(|x| u128::from(x.n))
            .sum()
    }

    /// Removes `n` of window `w`'s requests (newest first; `id` only those of a charge).
    pub fn remove(&mut self, w: Option<u128>, id: Option<u64>, mut n: u32, p: &Params) -> u32 {
        let mut given = 0;
        for x in self.e.v.iter_mut().rev() {
            if n == 0 {
                break;
            }
            if w.is_some_and(|w| x.ts / p.period != w) || id.is_some_and(|id| x.id != id) {
                continue;
            }
            let k = n.min(x.n);
            x.n -= k;
            n -= k;
            given += k;
        }
        self.e.v.retain(|x| x.n > 0);
        given
    }

    /// `charge_owing(n, max_owed)` at `t`: (taken, owed), and the record of the charge.
    pub fn charge(&mut self, t: u128, n: u32, max_owed: u32, p: &Params) -> (u32, u32, Rec) {
        // MODEL CHOICE: a charge that takes nothing writes nothing (a bucket's
        // conversion to the deciding tier's rate included); one that takes something
        // stores the conversion.
        let before = (self.tat, self.wt, self.epoch);
        self.convert(t, p);
        let t = self.at(t, p);
        let id = self.fresh_id();
        let big_p = p.period;
        let l = u128::from(p.limit);
        let m = u128::from(max_owed);
        let n128 = u128::from(n);
        let (taken, owed) = match self.algo {
            Algo::Token | Algo::Leaky => {
                // "a bucket's debt is exact GCRA: a theoretical arrival time past the
                // burst"; at most `max_owed` past it (and 36 years of its rate).
                let tt = p.t();
                let base = self.tat.max(t);
                let full = t + u128::from(p.burst) * tt;
                let room = (full + (m * tt).min(MAX_DEBT)).saturating_sub(base) / tt;
                let taken = n128.min(room);
                if taken > 0 {
                    self.tat = base + taken * tt;
                    self.wt = tt;
                }
                let owed = (base + taken * tt).saturating_sub(full).div_ceil(tt);
                (taken, owed)
            }
            Algo::Fixed => {
                // "a window's count ... passes the limit by at most `max_owed`".
                let k = t / big_p;
                let curr = self.count(k, p);
                let taken = n128.min((l + m).saturating_sub(curr));
                (taken, (curr + taken).saturating_sub(l))
            }
            Algo::Sliding => {
                // guide (Redis, "the in-process semantics"): "the sliding window's
                // `owed` is its weighted count past the limit", at most `max_owed`.
                let k = t / big_p;
                let e = t - k * big_p;
                let prev = if k == 0 { 0 } else { self.count(k - 1, p) };
                let curr = self.count(k, p);
                let room = ((l + m) * big_p).saturating_sub(prev * (big_p - e)) / big_p;
                let taken = n128.min(room.saturating_sub(curr));
                let w = prev * (big_p - e) + (curr + taken) * big_p;
                (taken, w.saturating_sub(l * big_p).div_ceil(big_p))
            }
            Algo::Log => {
                // `Charge::owed`: "for a sliding log, how far this charge went past what
                // was left".
                let live: u128 = self
                    .e
                    .v
                    .iter()
                    .filter(|x| x.ts + big_p > t)
                    .map(|x| u128::from(x.n))
                    .sum();
                (n128, (live.min(l) + n128).saturating_sub(l))
            }
        };
        let taken = taken as u32;
        if taken == 0 {
            (self.tat, self.wt, self.epoch) = before;
        }
        if !self.algo.is_bucket() && taken > 0 {
            self.push(t, taken, id, p);
        }
        let rec = Rec {
            id,
            epoch: self.epoch,
            taken,
            given: 0,
            tat: self.tat,
            rate: p.t(),
            window: t / big_p,
            at: t,
        };
        // `Charge::owed`: "`u32::MAX` for a debt of `u32::MAX` requests or more".
        (taken, u32::try_from(owed).unwrap_or(u32::MAX), rec)
    }

    /// The stateless `give_back(n)` at `t`: how many were given back, `None` when the
    /// model cannot tell (a loose log).
    pub fn give_back(&mut self, t: u128, n: u32, p: &Params) -> Option<u32> {
        // As a charge: a give-back of nothing writes nothing.
        let before = (self.tat, self.wt, self.epoch);
        self.convert(t, p);
        let t = self.at(t, p);
        let big_p = p.period;
        let k = t / big_p;
        let given = match self.algo {
            Algo::Token | Algo::Leaky => {
                // "never below an empty state": the requests the bucket still holds.
                let tt = p.t();
                let held = self.tat.saturating_sub(t).div_ceil(tt);
                let given = u128::from(n).min(held);
                self.tat = self.tat.saturating_sub(given * tt).max(t.min(self.tat));
                given as u32
            }
            // "A window gives back from its counts that still weigh, the current
            // window's first (the sliding window's previous one next)".
            Algo::Fixed => self.remove(Some(k), None, n, p),
            Algo::Sliding => {
                let c = self.remove(Some(k), None, n, p);
                let prev = if k == 0 {
                    0
                } else {
                    self.remove(Some(k - 1), None, n - c, p)
                };
                c + prev
            }
            Algo::Log => {
                // "a log from its newest entries, and nothing while every slot of its
                // ring is in the window (it cannot tell an overdraft it could not log
                // from its admissions)".
                if self.loose {
                    return None;
                }
                // Only what is still in the window at `t` (the state's time), the newest.
                let live: u128 = self
                    .e
                    .v
                    .iter()
                    .filter(|x| x.ts + big_p > t)
                    .map(|x| u128::from(x.n))
                    .sum();
                let given = if live >= u128::from(self.ring) {
                    0
                } else {
                    let n = n.min(live as u32);
                    self.remove(None, None, n, p)
                };
                if given > 0 {
                    self.last = None;
                    // The log's time is its newest entry's (what the ring holds).
                    self.e.now = self.e.v.iter().map(|x| x.ts).max().unwrap_or(0);
                }
                given
            }
        };
        if given > 0 && matches!(self.algo, Algo::Fixed | Algo::Sliding) {
            self.stored = k;
            self.e.now = self.e.now.max(t);
        }
        if given == 0 {
            (self.tat, self.wt, self.epoch) = before;
        }
        Some(given)
    }

    /// `Charge::give_back(n)` at `t` of the charge `r`.
    pub fn refund(&mut self, t: u128, r: &mut Rec, n: u32, p: &Params) {
        let part = n.min(r.taken - r.given);
        if part == 0 {
            return;
        }
        let done = r.given;
        r.given += part;
        // "to the state it was taken from only: never after a `reset`, `remove` or
        // eviction of the key, nor after a bucket's conversion to another rate".
        if r.epoch != self.epoch || (self.algo.is_bucket() && self.wt != r.rate) {
            return;
        }
        match self.algo {
            Algo::Token | Algo::Leaky => {
                // `Charge::give_back`: "a bucket only what of the charge it still owes
                // (time pays debts off)".
                let booked = r.tat.saturating_sub(u128::from(done) * r.rate);
                let restore = (u128::from(part) * r.rate).min(booked.saturating_sub(t));
                self.tat = self.tat.saturating_sub(restore);
            }
            Algo::Fixed | Algo::Sliding => {
                // "A window's charge gives back while the state is still in the charged
                // window (the sliding window: until something is counted in a later one)":
                // while the state is in that window (nothing counted since in a later
                // one), never below its count.
                if self.stored == r.window && self.count(r.window, p) >= u128::from(part) {
                    self.remove(Some(r.window), None, part, p);
                }
            }
            Algo::Log => {
                // The last write is given back exactly (its part past the ring first,
                // which frees nothing). After other writes, the guide leaves what it
                // gives to the ring ("while they are still the newest"; nothing after
                // a later same-instant overdraft): what is truly held keeps the rest
                // out.
                self.remove(None, Some(r.id), part, p);
                if self.last != Some(r.id) {
                    self.loose = true;
                } else {
                    // The last write given back restores the log before it, its time
                    // included: its newest entry's.
                    self.e.now = self.e.v.iter().map(|x| x.ts).max().unwrap_or(0);
                }
            }
        }
    }

    /// A loose log's admission of `n` at `t`, as the engine decided it.
    pub fn force(&mut self, t: u128, n: u32, p: &Params) {
        self.push(self.at(t, p), n, 0, p);
    }

    /// A loose log's stateless give-back of what the engine gave, `g`: its newest.
    pub fn gave(&mut self, g: u32, p: &Params) {
        self.remove(None, None, g, p);
        if g > 0 {
            self.last = None;
            self.e.now = self.e.v.iter().map(|x| x.ts).max().unwrap_or(0);
        }
    }

    /// The log's bound while loose: a request of `n` may be admitted only when what is
    /// truly held in `(t − P, t]` leaves room for it.
    pub fn log_room(&self, t: u128, n: u32, p: &Params) -> bool {
        let t = self.at(t, p);
        let live: u128 = self
            .e
            .v
            .iter()
            .filter(|x| x.ts + p.period > t)
            .map(|x| u128::from(x.n))
            .sum();
        live + u128::from(n) <= u128::from(p.limit)
    }

    fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}
