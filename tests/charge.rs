//! Issue 30: charges and give-backs against an exact model of their documented promises,
//! for every algorithm, on one limiter and on a keyed table (with a tier), from random
//! sequences of check, charge, give-back (stateless and through the `Charge`) and time.
//!
//! The model counts requests, not engine states: a bucket is its tokens (scaled by the
//! emission interval `T`, so integral), a window its counts, a log its admission times.
//! README: "A charge is never denied: it takes its cost whatever is left, and the key
//! then owes what went past its quota ... at most one burst past its quota by default;
//! the part of a cost past the bound is not counted"; a give-back "never below an empty
//! state".

use std::collections::VecDeque;
use std::time::Duration;
use tollgate::{Algorithm, Charge, Decision, KeyedRateLimiter, ManualClock, Quota, RateLimiter};

const ALGORITHMS: [Algorithm; 5] = [
    Algorithm::TokenBucket,
    Algorithm::LeakyBucket,
    Algorithm::FixedWindow,
    Algorithm::SlidingWindow,
    Algorithm::SlidingLog,
];

/// What each limit may hold, in the model.
#[derive(Clone, Debug)]
enum Model {
    /// Credit in ns: `burst·T` when full; `credit − n·T` admits `n` when `≥ 0`; it may
    /// go down to `−max_owed·T` by charges; refills at 1 ns per ns.
    Bucket {
        credit: i128,
        at: u128,
        t: u128,
        burst: u128,
    },
    /// `(window index, count)`, and the previous window's count for the sliding one.
    Window {
        k: u128,
        prev: u128,
        curr: u128,
        sliding: bool,
    },
    /// Admission times, oldest first (with an overdraft past the ring: the log keeps the
    /// newest `limit`, which decide every request).
    Log { v: VecDeque<u128> },
}

struct Spec {
    limit: u128,
    period: u128,
}

impl Model {
    fn new(a: Algorithm, s: &Spec) -> Model {
        match a {
            Algorithm::TokenBucket | Algorithm::LeakyBucket => {
                let t = s.period.div_ceil(s.limit);
                Model::Bucket {
                    credit: (s.limit * t) as i128,
                    at: 0,
                    t,
                    burst: s.limit,
                }
            }
            Algorithm::FixedWindow => Model::Window {
                k: 0,
                prev: 0,
                curr: 0,
                sliding: false,
            },
            Algorithm::SlidingWindow => Model::Window {
                k: 0,
                prev: 0,
                curr: 0,
                sliding: true,
            },
            _ => Model::Log { v: VecDeque::new() },
        }
    }

    /// Brings the state to time `now`.
    fn advance(&mut self, now: u128, s: &Spec) {
        match self {
            Model::Bucket {
                credit,
                at,
                t,
                burst,
            } => {
                let full = (*burst * *t) as i128;
                *credit = (*credit + (now - *at) as i128).min(full);
                *at = now;
            }
            Model::Window { k, prev, curr, .. } => {
                let w = now / s.period;
                if w == *k + 1 {
                    *prev = *curr;
                    *curr = 0;
                } else if w > *k + 1 {
                    *prev = 0;
                    *curr = 0;
                }
                *k = w.max(*k);
            }
            Model::Log { v } => {
                while v.front().is_some_and(|&x| x + s.period <= now) {
                    v.pop_front();
                }
            }
        }
    }

    /// How much more than the limit the state holds, in requests, rounded up.
    fn owed(&self, now: u128, s: &Spec) -> u128 {
        match self {
            Model::Bucket { credit, t, .. } => {
                if *credit >= 0 {
                    0
                } else {
                    (-*credit as u128).div_ceil(*t)
                }
            }
            Model::Window {
                k,
                prev,
                curr,
                sliding,
            } => {
                let weighted = if *sliding {
                    let e = now - k * s.period;
                    prev * (s.period - e) + curr * s.period
                } else {
                    curr * s.period
                };
                weighted
                    .saturating_sub(s.limit * s.period)
                    .div_ceil(s.period)
            }
            Model::Log { v } => (v.len() as u128).saturating_sub(s.limit),
        }
    }

    /// What remains for requests of cost 1 (README: `remaining()`).
    fn remaining(&self, now: u128, s: &Spec) -> u128 {
        match self {
            Model::Bucket { credit, t, .. } => (*credit).max(0) as u128 / *t,
            Model::Window {
                k,
                prev,
                curr,
                sliding,
            } => {
                let prev_w = if *sliding {
                    prev * (s.period - (now - k * s.period))
                } else {
                    0
                };
                ((s.limit * s.period).saturating_sub(prev_w) / s.period).saturating_sub(*curr)
            }
            Model::Log { v } => s.limit.saturating_sub(v.len() as u128),
        }
    }

    fn admits(&self, now: u128, n: u128, s: &Spec) -> bool {
        match self {
            Model::Bucket { credit, t, .. } => *credit - (n * t) as i128 >= 0,
            Model::Window {
                k,
                prev,
                curr,
                sliding,
            } => {
                let prev_w = if *sliding {
                    prev * (s.period - (now - k * s.period))
                } else {
                    0
                };
                prev_w + (curr + n) * s.period <= s.limit * s.period
            }
            Model::Log { v } => v.len() as u128 + n <= s.limit,
        }
    }

    fn take(&mut self, now: u128, n: u128) {
        match self {
            Model::Bucket { credit, t, .. } => *credit -= (n * *t) as i128,
            Model::Window { curr, .. } => *curr += n,
            Model::Log { v } => v.extend((0..n).map(|_| now)),
        }
    }

    /// A charge of `n` with at most `max_owed` owed after it: (taken, owed).
    fn charge(&mut self, now: u128, n: u128, max_owed: u128, s: &Spec) -> (u128, u128) {
        let taken = match self {
            Model::Bucket { credit, t, .. } => {
                let floor = -((max_owed * *t) as i128);
                let room = ((*credit - floor).max(0) as u128) / *t;
                n.min(room)
            }
            // The bound is on the weighted count (the sliding window's previous window
            // weighs), as `owed` is.
            Model::Window {
                k,
                prev,
                curr,
                sliding,
            } => {
                let weighs = if *sliding {
                    *prev * (s.period - (now - *k * s.period))
                } else {
                    0
                };
                let room = ((s.limit + max_owed) * s.period).saturating_sub(weighs) / s.period;
                n.min(room.saturating_sub(*curr))
            }
            Model::Log { .. } => n,
        };
        // README (`Charge::owed`): a log owes how far the charge went past what was
        // left; it keeps no count of an earlier overdraft past its ring.
        let owed = match self {
            Model::Log { v } => ((v.len() as u128).min(s.limit) + n).saturating_sub(s.limit),
            _ => 0,
        };
        self.take(now, taken);
        match self {
            Model::Log { .. } => (taken, owed),
            _ => (taken, self.owed(now, s)),
        }
    }

    /// A stateless give-back of `n`: how many were given back.
    fn give_back(&mut self, n: u128, s: &Spec, ring: u128) -> u128 {
        match self {
            Model::Bucket {
                credit, t, burst, ..
            } => {
                let full = (*burst * *t) as i128;
                let held = ((full - *credit).max(0) as u128).div_ceil(*t);
                let given = n.min(held);
                *credit = (*credit + (given * *t) as i128).min(full);
                given
            }
            Model::Window {
                prev,
                curr,
                sliding,
                ..
            } => {
                // README: "A window gives back from its own counts while they weigh":
                // the current window's first, then (sliding) the previous one's.
                let from_curr = n.min(*curr);
                *curr -= from_curr;
                let from_prev = if *sliding {
                    (n - from_curr).min(*prev)
                } else {
                    0
                };
                *prev -= from_prev;
                let _ = s;
                from_curr + from_prev
            }
            Model::Log { v } => {
                // README: nothing while every slot of the ring is in the window.
                if v.len() as u128 >= ring {
                    return 0;
                }
                let given = n.min(v.len() as u128);
                for _ in 0..given {
                    v.pop_back();
                }
                given
            }
        }
    }
}

/// What the test remembers of a charge: what it took, what was given back of it, the
/// bucket's theoretical arrival time right after it, the window it was counted in.
#[derive(Clone, Copy, Debug)]
struct Rec {
    taken: u128,
    given: u128,
    booked: u128,
    window: u128,
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Check(u32),
    Charge(u32, Option<u32>),
    GiveBack(u32),
    Refund(usize, u32),
    Advance(u64),
}

fn random_op(rng: &mut fastrand::Rng, limit: u32, period: u64) -> Op {
    match rng.u8(0..10) {
        0..=2 => Op::Check(rng.u32(1..=limit)),
        3..=4 => Op::Charge(rng.u32(0..=3 * limit), None),
        5 => Op::Charge(rng.u32(0..=4 * limit), Some(rng.u32(0..=2 * limit))),
        6 => Op::GiveBack(rng.u32(0..=2 * limit)),
        7 => Op::Refund(rng.usize(0..8), rng.u32(0..=2 * limit)),
        _ => Op::Advance(rng.u64(0..=period * 3 / 2)),
    }
}

/// One limit under test: a `RateLimiter`, or one key of a keyed table (tier 0 or 1).
trait Under {
    fn check_n(&self, n: u32) -> Decision;
    fn charge(&self, n: u32, max_owed: Option<u32>) -> Charge<'_>;
    fn give_back(&self, n: u32) -> u32;
}

impl Under for RateLimiter<ManualClock> {
    fn check_n(&self, n: u32) -> Decision {
        RateLimiter::check_n(self, n).unwrap()
    }
    fn charge(&self, n: u32, max_owed: Option<u32>) -> Charge<'_> {
        match max_owed {
            Some(m) => self.charge_owing(n, m),
            None => RateLimiter::charge(self, n),
        }
    }
    fn give_back(&self, n: u32) -> u32 {
        RateLimiter::give_back(self, n)
    }
}

struct Keyed<'a>(&'a KeyedRateLimiter<u64, ManualClock>, usize);

impl Under for Keyed<'_> {
    fn check_n(&self, n: u32) -> Decision {
        self.0.tier(self.1).unwrap().check_n(&7, n).unwrap()
    }
    fn charge(&self, n: u32, max_owed: Option<u32>) -> Charge<'_> {
        let tier = self.0.tier(self.1).unwrap();
        match max_owed {
            Some(m) => tier.charge_owing(&7, n, m),
            None => tier.charge(&7, n),
        }
    }
    fn give_back(&self, n: u32) -> u32 {
        self.0.tier(self.1).unwrap().give_back(&7, n)
    }
}

fn run(a: Algorithm, seed: u64, under: &dyn Under, clock: &ManualClock, s: &Spec) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut m = Model::new(a, s);
    let mut charges: Vec<(Charge<'_>, Rec)> = Vec::new();
    let mut last_was_charge = false;
    let mut now: u128 = 0;
    let mut trace = Vec::new();
    for _ in 0..60 {
        let op = random_op(&mut rng, s.limit as u32, s.period as u64);
        trace.push(format!("t={now} {op:?}"));
        let was_charge = last_was_charge;
        last_was_charge = matches!(op, Op::Charge(..));
        let last_was_charge = was_charge;
        let ctx = || format!("{a:?} seed {seed}:\n{}", trace.join("\n"));
        m.advance(now, s);
        match op {
            Op::Check(n) => {
                let d = under.check_n(n);
                let want = m.admits(now, u128::from(n), s);
                assert_eq!(d.is_allowed(), want, "check_n({n}): {d:?}\n{}", ctx());
                if want {
                    m.take(now, u128::from(n));
                }
            }
            Op::Charge(n, max_owed) => {
                let bound = u128::from(max_owed.unwrap_or(s.limit as u32));
                let c = under.charge(n, max_owed);
                let (taken, owed) = m.charge(now, u128::from(n), bound, s);
                assert_eq!(
                    (
                        u128::from(c.taken()),
                        u128::from(c.owed()),
                        u128::from(c.dropped())
                    ),
                    (taken, owed, u128::from(n) - taken),
                    "charge({n}, {max_owed:?}): {c:?}\n{}",
                    ctx()
                );
                assert_eq!(c.fit(), owed == 0, "{}", ctx());
                assert!(c.tracked());
                let booked = match &m {
                    Model::Bucket {
                        credit, t, burst, ..
                    } => now + ((*burst * *t) as i128 - *credit).max(0) as u128,
                    _ => 0,
                };
                let window = match &m {
                    Model::Window { k, .. } => *k,
                    _ => 0,
                };
                charges.push((
                    c,
                    Rec {
                        taken,
                        given: 0,
                        booked,
                        window,
                    },
                ));
            }
            Op::GiveBack(n) => {
                let given = under.give_back(n);
                let want = m.give_back(u128::from(n), s, s.limit);
                assert_eq!(u128::from(given), want, "give_back({n})\n{}", ctx());
            }
            Op::Refund(i, n) => {
                if charges.is_empty() {
                    continue;
                }
                let i = i % charges.len();
                let rec = charges[i].1;
                let last = i + 1 == charges.len() && last_was_charge;
                let n = u128::from(n);
                // What `Charge::give_back` promises, per algorithm: "a bucket only what
                // of the charge it still owes (time pays debts off)"; "a window gives back
                // only while the charged window still counts it" (here: while it is the
                // current window, where the engine's state is sure to be it); a log,
                // exactly, right after its charge (the case exercised here).
                let exercised = match (&mut m, rec) {
                    (
                        Model::Bucket {
                            credit, t, burst, ..
                        },
                        Rec {
                            booked,
                            given,
                            taken,
                            ..
                        },
                    ) => {
                        let full = (*burst * *t) as i128;
                        let part = n.min(taken - given);
                        let outstanding = (booked - given * *t).saturating_sub(now);
                        let restore = (part * *t).min(outstanding);
                        *credit = (*credit + restore as i128).min(full);
                        charges[i].1.given += part;
                        true
                    }
                    (
                        Model::Window { k, curr, .. },
                        Rec {
                            window,
                            given,
                            taken,
                            ..
                        },
                    ) => {
                        if *k != window {
                            false
                        } else {
                            let part = n.min(taken - given);
                            if part <= *curr {
                                *curr -= part;
                            }
                            charges[i].1.given += part;
                            true
                        }
                    }
                    (Model::Log { v }, Rec { taken, given, .. }) if last && given == 0 => {
                        let part = n.min(taken);
                        for _ in 0..part {
                            v.pop_back();
                        }
                        charges[i].1.given += part;
                        true
                    }
                    _ => false,
                };
                if exercised {
                    charges[i].0.give_back(n as u32);
                }
            }
            Op::Advance(d) => {
                clock.advance(Duration::from_nanos(d));
                now += u128::from(d);
            }
        }
        // After every operation: what remains, as a request of cost 0 reports it.
        m.advance(now, s);
        let d = under.check_n(0);
        assert_eq!(
            u128::from(d.remaining()),
            m.remaining(now, s),
            "remaining after the last operation: {d:?}\n{}",
            trace.join("\n")
        );
    }
}

fn spec_for(a: Algorithm) -> (Quota, Spec) {
    let (limit, period) = match a {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => (5u32, 1_000_000u64),
        _ => (5, 1_000_000),
    };
    (
        Quota::new(limit, Duration::from_nanos(period)),
        Spec {
            limit: u128::from(limit),
            period: u128::from(period),
        },
    )
}

#[test]
fn charges_and_give_backs_follow_the_model_on_one_limiter() {
    for a in ALGORITHMS {
        for seed in 0..1500 {
            let (q, s) = spec_for(a);
            let clock = ManualClock::new();
            let l = RateLimiter::builder(a, q)
                .clock(clock.clone())
                .build()
                .unwrap();
            run(a, seed, &l, &clock, &s);
        }
    }
}

#[test]
fn charges_and_give_backs_follow_the_model_on_a_keyed_table_and_a_tier() {
    for a in ALGORITHMS {
        for seed in 0..600 {
            let (q, s) = spec_for(a);
            for tier in [0, 1] {
                let clock = ManualClock::new();
                // Tier 1 has the same quota: its own parameters, the same promises.
                let k = KeyedRateLimiter::<u64, _>::builder(a, q)
                    .tiers([q])
                    .max_keys(4)
                    .clock(clock.clone())
                    .build()
                    .unwrap();
                run(a, seed, &Keyed(&k, tier), &clock, &s);
            }
        }
    }
}

/// Issue 30, "Threads: charges and give-backs racing checks never admit more than the
/// budget plus the debt bound allows, and lose nothing": on a frozen clock (nothing
/// refills), two threads check one request at a time while two charge and give their
/// charges back whole; checks never admit more than the quota, and once every charge
/// was given back the state holds exactly what the checks took.
#[test]
fn charges_racing_checks_admit_no_more_and_lose_nothing() {
    const LIMIT: u32 = 40;
    for a in ALGORITHMS {
        for keyed in [false, true] {
            let clock = ManualClock::new();
            let q = Quota::per_hour(LIMIT);
            let one = RateLimiter::builder(a, q)
                .clock(clock.clone())
                .build()
                .unwrap();
            let many = KeyedRateLimiter::<u64, _>::builder(a, q)
                .clock(clock.clone())
                .build()
                .unwrap();
            let under: &(dyn Under + Sync) = if keyed { &Keyed(&many, 0) } else { &one };
            let admitted = std::sync::atomic::AtomicU32::new(0);
            std::thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| {
                        for _ in 0..3_000 {
                            if under.check_n(1).is_allowed() {
                                admitted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                    });
                    s.spawn(|| {
                        for i in 0..3_000u32 {
                            let n = 1 + i % 7;
                            let mut c = under.charge(n, None);
                            assert_eq!(c.taken() + c.dropped(), n);
                            let taken = c.taken();
                            c.give_back(taken / 2);
                            c.give_back(taken - taken / 2);
                        }
                    });
                }
            });
            let admitted = admitted.into_inner();
            assert!(
                admitted <= LIMIT,
                "{a:?} keyed {keyed}: {admitted} admitted of {LIMIT}"
            );
            let remaining = under.check_n(0).remaining();
            if a == Algorithm::SlidingLog {
                // README, "Token budgets": a log's charge gives back exactly while it is
                // the log's last write; after later writes of its instant, "nothing once
                // a later charge of that instant overdrew the log ... (it keeps them until
                // its period ends, never fewer than it holds)". On a frozen clock racing
                // checks write at the same instant, so the log may keep what was given
                // back, never less than the checks took.
                assert!(
                    remaining <= LIMIT - admitted,
                    "{a:?} keyed {keyed}: {remaining} left after {admitted} admitted"
                );
            } else {
                assert_eq!(
                    remaining,
                    LIMIT - admitted,
                    "{a:?} keyed {keyed}: the charges given back whole left something behind"
                );
            }
        }
    }
}

/// Any bound on the debt is accepted (issue 30 review: `max_owed · T` overflowed u64 for
/// a slow quota, a panic in debug and a wrapped bound in release): the debt then ends
/// at the engine's longest wait, about 36 years.
#[test]
fn any_debt_bound_is_taken_without_overflow() {
    let clock = ManualClock::new();
    let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_hour(5))
        .clock(clock.clone())
        .build()
        .unwrap();
    let c = l.charge_owing(u32::MAX, u32::MAX);
    // 36 years at 12 minutes a request: about 1.6 million owed, the rest dropped.
    assert!(c.owed() > 1_000_000 && c.owed() < 2_000_000, "{c:?}");
    assert_eq!(c.taken() + c.dropped(), u32::MAX);
    assert!(!l.check().is_allowed());
}

/// A log charge read at a time older than the newest entry (another thread's later
/// reading) is logged at that entry's time and is no booking: later stale readings are
/// decided as after a check made there (issue 30 review: they were queued as behind a
/// reservation, and denied).
#[test]
fn a_stale_log_charge_is_no_booking() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    #[derive(Clone)]
    struct Settable(Arc<AtomicU64>);
    impl tollgate::Clock for Settable {
        fn now(&self) -> u64 {
            self.0.load(Ordering::SeqCst)
        }
    }
    let t = Arc::new(AtomicU64::new(10_000_000));
    let l = RateLimiter::builder(Algorithm::SlidingLog, Quota::per_second(4))
        .clock(Settable(t.clone()))
        .build()
        .unwrap();
    assert!(l.check().is_allowed()); // the newest entry at 10 ms
    t.store(5_000_000, Ordering::SeqCst); // readings from a thread that read earlier
    assert!(l.charge(1).fit());
    let d = l.check();
    assert!(d.is_allowed(), "{d:?}");
    assert_eq!(d.remaining(), 1);
}

/// Issue 37 item 2: a bucket's debt past 2^32 requests. `Charge::owed`: "How many
/// requests the key owes past its quota after the charge (0 when it fit)"; it saturates
/// at `u32::MAX`, and `fit()` is true only when nothing is owed. 8 per second, burst 4:
/// two charges of `u32::MAX` owing at most `u32::MAX` leave `u32::MAX` owed; a burst of 3
/// then puts the key `2^32` past its quota (it wrapped to 0, and after a backward clock
/// step to 3). On one limiter, a keyed table, and a tier of one.
#[test]
fn a_debt_past_2_32_requests_saturates_owed() {
    fn check(what: &str, c: Charge<'_>, d: Decision) {
        assert_eq!(c.owed(), u32::MAX, "{what}: {c:?}");
        assert!(!c.fit(), "{what}: {c:?}");
        assert!(!c.decision().is_allowed(), "{what}: {c:?}");
        // 2^32 + 1 requests of 125 ms: the wait the debt stands for.
        assert!(
            d.retry_after() > Some(Duration::from_secs(536_870_000)),
            "{what}: {d:?}"
        );
    }
    let q = |burst| Quota::per_second(8).with_burst(burst);
    for a in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
        for back in [false, true] {
            let what = format!("{a:?}, clock stepped back: {back}");
            let clock = ManualClock::new();
            clock.advance(Duration::from_secs(10));
            let one = RateLimiter::builder(a, q(4))
                .clock(clock.clone())
                .build()
                .unwrap();
            let keyed = KeyedRateLimiter::<u64, _>::builder(a, q(4))
                .clock(clock.clone())
                .build()
                .unwrap();
            let tiered = KeyedRateLimiter::<u64, _>::builder(a, Quota::per_second(2))
                .tiers([q(4)])
                .clock(clock.clone())
                .build()
                .unwrap();
            let tier = tiered.tier(1).unwrap();
            for _ in 0..2 {
                let _ = one.charge_owing(u32::MAX, u32::MAX);
                let _ = keyed.charge_owing(&7, u32::MAX, u32::MAX);
                let _ = tier.charge_owing(&7, u32::MAX, u32::MAX);
            }
            one.set_quota(q(3)).unwrap();
            keyed.set_quota(q(3)).unwrap();
            tier.set_quota(q(3)).unwrap();
            if back {
                clock.set(Duration::from_secs(9));
            }
            check(&format!("{what}: one"), one.charge(0), one.peek());
            check(
                &format!("{what}: keyed"),
                keyed.charge(&7, 0),
                keyed.peek(&7),
            );
            check(&format!("{what}: tier"), tier.charge(&7, 0), tier.peek(&7));
            let c = one.charge(1);
            assert_eq!((c.taken(), c.owed()), (0, u32::MAX), "{what}: {c:?}");
        }
    }
}
