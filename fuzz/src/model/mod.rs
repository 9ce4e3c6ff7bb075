//! Exact models of the guide's promises, in integer nanoseconds (`u128`, so no model
//! sum can overflow). Written from the guide's sentences, not from the engine's code:
//! each function names the sentence it implements.

pub mod budget;
pub mod entries;
pub mod gcra;
pub mod table;

use std::time::Duration;
use tollgate::{Algorithm, Quota};

/// guide: "Time is `u64` nanoseconds since the clock's zero, clamped at 2^62 ns".
pub const HORIZON: u128 = 1 << 62;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algo {
    Token,
    Leaky,
    Fixed,
    Sliding,
    Log,
}

impl Algo {
    pub const ALL: [Algo; 5] = [
        Algo::Token,
        Algo::Leaky,
        Algo::Fixed,
        Algo::Sliding,
        Algo::Log,
    ];

    pub fn from_byte(b: u8) -> Algo {
        Self::ALL[usize::from(b) % 5]
    }

    pub fn engine(self) -> Algorithm {
        match self {
            Algo::Token => Algorithm::TokenBucket,
            Algo::Leaky => Algorithm::LeakyBucket,
            Algo::Fixed => Algorithm::FixedWindow,
            Algo::Sliding => Algorithm::SlidingWindow,
            Algo::Log => Algorithm::SlidingLog,
        }
    }

    pub fn is_bucket(self) -> bool {
        matches!(self, Algo::Token | Algo::Leaky)
    }
}

/// A quota as the model reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub algo: Algo,
    pub limit: u32,
    pub period: u128,
    /// The burst for the buckets; the windows' is their limit.
    pub burst: u32,
}

impl Params {
    /// guide: "`T = ⌈P / limit⌉` the emission interval in whole nanoseconds, rounded **up**".
    pub fn t(&self) -> u128 {
        self.period.div_ceil(u128::from(self.limit))
    }

    /// guide: "burst = bucket capacity"; "Windows accept no burst other than `limit`".
    pub fn cap(&self) -> u32 {
        if self.algo.is_bucket() {
            self.burst
        } else {
            self.limit
        }
    }

    pub fn quota(&self) -> Quota {
        let q = Quota::new(self.limit, Duration::from_nanos(self.period as u64));
        if self.algo.is_bucket() {
            q.with_burst(self.burst)
        } else {
            q
        }
    }
}

/// What one decision must look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expect {
    pub allowed: bool,
    pub limit: u32,
    pub burst: u32,
    /// guide (Decision): "How many more requests of cost 1 would be admitted right now,
    /// after this one."
    pub remaining: u32,
    /// "Duration until the full quota is available again".
    pub reset_after: u128,
    /// "the exact wait until the same request would fit; never too early".
    pub retry_after: Option<u128>,
    /// LeakyBucket: "delay = max(TAT, t) − t"; zero for the others.
    pub delay: u128,
}

/// A booking the model remembers for a later cancel or roll-back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Booking {
    pub id: u64,
    pub n: u32,
    /// When the request may proceed (the reservation's time plus its wait).
    pub due: u128,
    /// The state generation it was booked on (a reset, an eviction or a bucket's
    /// conversion to another rate starts a new one).
    pub epoch: u64,
    /// The burst's span `burst·T` of the quota it was booked under (buckets).
    pub tau: u128,
    /// The bucket's `TAT` right after it (the leaky bucket's slot is given back only
    /// to that state).
    pub tat: u128,
    /// The emission interval it was counted at (buckets).
    pub rate: u128,
}

/// What `reserve` must answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reserved {
    Ok { wait: u128, booking: Booking },
    TooLong { wait: u128 },
    Insufficient,
}

/// One limiter's state under the model.
#[derive(Clone, Debug)]
pub enum State {
    Gcra(gcra::Gcra),
    Entries(entries::Entries),
}

/// A generation no state had before (a fresh state, a reset, a conversion): unique over
/// the process, so that a booking from before a reset never matches a state converted
/// since (a per-state `+ 1` collided with the next fresh state's number).
pub fn new_epoch() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// One limiter (or one key of a keyed table): state plus the bookkeeping for refunds.
/// The deciding parameters are passed to every call (a keyed table's tiers decide one
/// state under several quotas).
#[derive(Clone, Debug)]
pub struct Lim {
    pub s: State,
    pub epoch: u64,
    pub next_id: u64,
}

impl Lim {
    pub fn new(algo: Algo) -> Lim {
        Lim {
            s: if algo.is_bucket() {
                State::Gcra(gcra::Gcra::default())
            } else {
                State::Entries(entries::Entries::default())
            },
            epoch: new_epoch(),
            next_id: 1,
        }
    }

    /// A fresh state of a keyed table's key found missing, decided no earlier than
    /// `floor` (README: a request that finds its key missing "is decided no earlier than
    /// the newest reclaim in its shard"), its waits measured from the reading.
    pub fn fresh_at(algo: Algo, floor: u128) -> Lim {
        let mut l = Lim::new(algo);
        match &mut l.s {
            State::Gcra(g) => g.floor = floor,
            State::Entries(e) => {
                e.now = floor;
                e.floor = floor;
            }
        }
        l
    }

    /// The decision a request of cost `n` gets at `t` under `p`, without committing it.
    /// `None` when `n` can never fit (guide: "`Err(InsufficientCapacity)` when 5 can
    /// never fit").
    pub fn decide(&self, t: u128, n: u32, p: &Params) -> Option<Expect> {
        if n > p.cap() {
            return None;
        }
        Some(match &self.s {
            State::Gcra(g) => g.decide(t, n, p),
            State::Entries(e) => e.decide(t, n, p),
        })
    }

    /// Stores a bucket's conversion to `p`'s rate at `t` (a no-op for the windows and
    /// for a state already at that rate); a conversion starts a new generation (guide:
    /// "after a `set_quota` or tier change that converted a bucket's state to another
    /// rate, nothing either", converted back or not).
    pub fn convert(&mut self, t: u128, p: &Params) {
        if let State::Gcra(g) = &mut self.s {
            if g.convert(t, p) {
                self.epoch = new_epoch();
            }
        }
    }

    /// A `RateLimiter`'s `set_quota` at `t` from `old` to `p`: the conversion, and a
    /// bucket that owes nothing at a change of rate is written as full at `t` (the
    /// state's time is the change's; a reading older than it sees it as owing).
    pub fn set_quota(&mut self, t: u128, old: &Params, p: &Params) {
        self.convert(t, p);
        if let State::Gcra(g) = &mut self.s {
            if old.t() != p.t() {
                g.tat = g.tat.max(t);
                g.wt = p.t();
            }
        }
    }

    /// `check_n`: decides and, when admitted, takes the request. A bucket decided under
    /// another rate keeps the conversion (MODEL CHOICE for keyed tiers: a decision,
    /// admitted or denied, stores the converted state; a peek does not).
    pub fn check(&mut self, t: u128, n: u32, p: &Params) -> Option<Expect> {
        if n <= p.cap() {
            self.convert(t, p);
        }
        let d = self.decide(t, n, p)?;
        if d.allowed && n > 0 {
            let id = self.fresh_id();
            match &mut self.s {
                State::Gcra(g) => g.take(t, t, n, p, id),
                State::Entries(e) => {
                    // Taken at the state's time when the reading is older.
                    let at = e.eff(t, p);
                    e.take(at, at, n, p, id)
                }
            }
        }
        Some(d)
    }

    /// An admission booked and rolled back at once at `t` (`check_all` denied by a later
    /// limit: README "a denial takes nothing"): nothing is taken, but the state is the
    /// one the booking's decision wrote, at its time (a bucket full no earlier than `t`,
    /// a window's state in the decision's window); the log gives back its entries and
    /// its time with them.
    pub fn touch(&mut self, t: u128, p: &Params) {
        match &mut self.s {
            State::Gcra(g) => {
                let t = t.max(std::mem::take(&mut g.floor));
                g.tat = g.tat.max(t);
                if g.wt == 0 {
                    g.wt = p.t();
                }
            }
            State::Entries(e) if p.algo != Algo::Log => e.now = e.now.max(e.eff(t, p)),
            State::Entries(_) => {}
        }
    }

    /// `reserve(n, max_wait)`.
    pub fn reserve(&mut self, t: u128, n: u32, max_wait: u128, p: &Params) -> Reserved {
        if n > p.cap() {
            return Reserved::Insufficient;
        }
        if let State::Gcra(g) = &self.s {
            let at = g.proceed_at(t, n, p);
            if at - t <= max_wait {
                self.convert(t, p);
            }
        }
        // The windows and the log decide a reading older than the state at the state's
        // time (admitted then: no wait); a later booking's wait is measured from the
        // reading.
        let (now, at) = match &self.s {
            State::Gcra(g) => (t.max(g.floor), g.proceed_at(t, n, p)),
            State::Entries(e) => {
                let now = e.eff(t, p);
                (now, e.earliest(now, n, p))
            }
        };
        let wait = if at == now { 0 } else { at - t };
        if wait > max_wait {
            return Reserved::TooLong { wait };
        }
        // Due when it may proceed: a booking admitted at once, at its decision's time
        // (a window's at the reading, which is all its state can tell, or the floor for a
        // keyed table's missing key; the log at the time it is logged at).
        let due = match &self.s {
            State::Entries(e) if at == now && p.algo != Algo::Log => t.max(e.floor),
            _ => at,
        };
        let id = self.fresh_id();
        match &mut self.s {
            State::Gcra(g) => g.take(t, at, n, p, id),
            State::Entries(e) => e.take(now, at, n, p, id),
        }
        let tat = match &self.s {
            State::Gcra(g) => g.tat,
            State::Entries(_) => 0,
        };
        let booking = Booking {
            id,
            n,
            tat,
            due,
            epoch: self.epoch,
            tau: u128::from(p.burst) * p.t(),
            rate: p.t(),
        };
        Reserved::Ok { wait, booking }
    }

    /// `Reservation::cancel` at `t` (guide: "`cancel()` gives back what no later booking
    /// depends on, by Go x/time/rate's `CancelAt` rule (nothing once the reservation is
    /// due)"; x/time/rate gives nothing when `timeToAct.Before(t)`).
    pub fn cancel(&mut self, t: u128, b: &Booking, p: &Params) {
        if t > b.due || b.epoch != self.epoch {
            return;
        }
        match &mut self.s {
            State::Gcra(g) => g.cancel(t, b, p),
            State::Entries(e) => e.cancel(t, b, p),
        }
    }

    /// The time from which the state says nothing (its idle stamp); idle iff `<= t`.
    pub fn idle_at(&self, p: &Params) -> u128 {
        match &self.s {
            State::Gcra(g) => g.tat,
            State::Entries(e) => e.idle_at(p),
        }
    }

    /// Whether every time the state holds is below the horizon (the engine's states are;
    /// beyond it the guide states nothing, so the targets stop comparing).
    pub fn below_horizon(&self) -> bool {
        match &self.s {
            State::Gcra(g) => g.tat < HORIZON && !g.was_past_horizon,
            State::Entries(e) => e.v.iter().all(|x| x.ts < HORIZON),
        }
    }

    pub fn is_idle(&self, t: u128, p: &Params) -> bool {
        self.idle_at(p) <= t
    }

    fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}
