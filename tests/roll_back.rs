//! Roll-back exactness as a property (issue 20, item 2): a multi-limit check denied by
//! a second limit gives the first back exactly what it booked, whatever random
//! requests are admitted on the first between the booking and the roll-back. Compared
//! decision for decision with a twin limiter that only ever saw the requests the first
//! admitted.

mod common;

use common::{seed, with_seed, Hooked};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tollgate::{check_all, Algorithm, KeyedRateLimiter, Limit, ManualClock, Quota, RateLimiter};

fn quotas(a: Algorithm) -> Vec<Quota> {
    let mut q = vec![
        Quota::per_second(5),
        Quota::new(7, Duration::from_millis(300)),
        Quota::per_minute(20),
    ];
    if matches!(a, Algorithm::TokenBucket) {
        q.push(Quota::per_second(10).with_burst(3));
        q.push(Quota::per_second(2).with_burst(6));
    }
    q
}

/// One limit kind: a `RateLimiter`, or key 1 of a keyed table.
enum Subject {
    One(Box<RateLimiter<ManualClock>>),
    Keyed(Box<KeyedRateLimiter<u8, ManualClock>>),
}

impl Subject {
    fn new(keyed: bool, a: Algorithm, q: Quota, clock: &ManualClock) -> Self {
        if keyed {
            Subject::Keyed(Box::new(
                KeyedRateLimiter::builder(a, q)
                    .clock(clock.clone())
                    .build()
                    .unwrap(),
            ))
        } else {
            Subject::One(Box::new(
                RateLimiter::builder(a, q)
                    .clock(clock.clone())
                    .build()
                    .unwrap(),
            ))
        }
    }

    fn check_n(&self, n: u32) -> tollgate::Decision {
        match self {
            Subject::One(l) => l.check_n(n).unwrap(),
            Subject::Keyed(l) => l.check_n(&1, n).unwrap(),
        }
    }

    fn burst(&self) -> u32 {
        match self {
            Subject::One(l) => l.burst(),
            Subject::Keyed(l) => l.burst(),
        }
    }

    fn multi_denied(&self, denier: &RateLimiter<Hooked>, n: u32) {
        let d = match self {
            Subject::One(l) => check_all(&[&**l as &dyn Limit, denier], n).unwrap(),
            Subject::Keyed(l) => check_all(&[&l.limit(&1) as &dyn Limit, denier], n).unwrap(),
        };
        assert!(!d.is_allowed(), "{d:?}");
    }
}

#[test]
fn a_roll_back_gives_back_exactly_what_it_booked_under_any_interleaving() {
    for a in Algorithm::ALL {
        with_seed(
            &format!("roll back {a:?}"),
            seed(0x2011 + a as u64),
            |rng| {
                for case in 0..60 {
                    let q = quotas(a)[rng.usize(0..quotas(a).len())];
                    let keyed = rng.bool();
                    let clock = ManualClock::new();
                    clock.set(Duration::from_secs(100));
                    let tested = Arc::new(Subject::new(keyed, a, q, &clock));
                    let twin = Subject::new(keyed, a, q, &clock);
                    // Leaky buckets book after every other kind of limit: to be booked
                    // before the denier, a leaky bucket is denied by another one.
                    let denier_kind = match a {
                        Algorithm::LeakyBucket => Algorithm::LeakyBucket,
                        _ => Algorithm::FixedWindow,
                    };
                    let denier = RateLimiter::builder(denier_kind, Quota::per_hour(100))
                        .clock(Hooked::new(0))
                        .build()
                        .unwrap();
                    assert!(denier.check_n(100).unwrap().is_allowed());
                    let mut trace = (Vec::new(), Vec::new());
                    for _ in 0..rng.usize(1..25) {
                        clock.advance(Duration::from_millis(rng.u64(0..120)));
                        if rng.u8(0..3) == 0 {
                            // A multi-check that the denier refuses, with other requests
                            // admitted (or not) on the tested limit in between.
                            let others: Vec<u32> = (0..rng.usize(0..4))
                                .map(|_| rng.u32(1..=tested.burst()))
                                .collect();
                            let t = tested.clone();
                            let admitted = Arc::new(Mutex::new(Vec::new()));
                            let seen = admitted.clone();
                            denier.clock().on_next_read(move || {
                                for n in others {
                                    if t.check_n(n).is_allowed() {
                                        seen.lock().unwrap().push(n);
                                    }
                                }
                            });
                            tested.multi_denied(&denier, rng.u32(1..=tested.burst()));
                            assert!(denier.clock().ran(), "the hook ran");
                            // The twin sees what the tested limit admitted meanwhile (a
                            // request denied only because of the pending booking is the
                            // "briefly fuller" of the contract, not a loss).
                            for n in admitted.lock().unwrap().iter() {
                                assert!(twin.check_n(*n).is_allowed(), "case {case}");
                            }
                        } else {
                            let n = rng.u32(1..=tested.burst());
                            trace.0.push(tested.check_n(n));
                            trace.1.push(twin.check_n(n));
                        }
                    }
                    for _ in 0..10 {
                        clock.advance(Duration::from_millis(rng.u64(0..80)));
                        trace.0.push(tested.check_n(1));
                        trace.1.push(twin.check_n(1));
                    }
                    assert_eq!(trace.0, trace.1, "case {case}: {a:?} {q:?} keyed {keyed}");
                }
            },
        );
    }
}
