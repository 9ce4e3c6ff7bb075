//! `peek` (issue 9.1): the decision a cost-1 request would get now, consuming and
//! inserting nothing, for all five algorithms, single and keyed. Checked against the
//! engine itself: on a random schedule, a peek equals the check that follows it at the
//! same reading, and a second peek equals the first.

mod common;

use common::with_seed;
use std::time::Duration;
use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, OnFull, Quota, RateLimiter};

fn quotas(algorithm: Algorithm) -> Vec<Quota> {
    let mut q = vec![
        Quota::new(3, Duration::from_millis(10)),
        Quota::new(1, Duration::from_millis(7)),
        Quota::new(10, Duration::from_millis(100)),
    ];
    if algorithm.is_packed()
        && !matches!(algorithm, Algorithm::FixedWindow | Algorithm::SlidingWindow)
    {
        q.push(Quota::new(10, Duration::from_millis(100)).with_burst(4));
    }
    q
}

#[test]
fn a_peek_is_the_decision_the_next_check_gets() {
    for algorithm in Algorithm::ALL {
        for (i, quota) in quotas(algorithm).into_iter().enumerate() {
            with_seed(
                &format!("peek {algorithm:?} {quota:?}"),
                0xbee5 + i as u64,
                |rng| {
                    let clock = ManualClock::new();
                    let single = RateLimiter::builder(algorithm, quota)
                        .clock(clock.clone())
                        .build()
                        .unwrap();
                    let keyed = KeyedRateLimiter::<u64, _>::builder(algorithm, quota)
                        .max_keys(4)
                        .on_full(OnFull::Deny)
                        .clock(clock.clone())
                        .build()
                        .unwrap();
                    let (mut allowed, mut denied) = (0, 0);
                    let mut now = 0u64;
                    for _ in 0..3_000 {
                        now += rng.u64(0..=4_000_000);
                        clock.set(Duration::from_nanos(now));
                        let key = rng.u64(0..6);
                        // Occasionally a larger cost, so the state moves in other ways too.
                        if rng.u32(0..5) == 0 {
                            let n = rng.u32(1..=single.burst());
                            let _ = single.check_n(n).unwrap();
                            let _ = keyed.check_n(&key, n).unwrap();
                            continue;
                        }
                        let p = single.peek();
                        assert_eq!(single.peek(), p, "a peek changed the state");
                        let d = single.check();
                        assert_eq!(p, d, "single: peek then check at {now}");
                        let occupied = keyed.stats().occupied;
                        let kp = keyed.peek(&key);
                        assert_eq!(keyed.stats().occupied, occupied, "a peek inserted");
                        assert_eq!(keyed.peek(&key), kp);
                        let kd = keyed.check(&key);
                        assert_eq!(kp, kd, "keyed: peek then check of key {key} at {now}");
                        if d.is_allowed() {
                            allowed += 1;
                        } else {
                            denied += 1;
                        }
                    }
                    assert!(
                        allowed > 100 && denied > 100,
                        "{allowed} allowed, {denied} denied"
                    );
                },
            );
        }
    }
}

/// `peek_n` (the one peek at any cost): on a random schedule of costs, single, keyed
/// and under a tier, a `peek_n` equals the `check_n` that follows it at the same
/// reading, a second one equals the first (nothing consumed, nothing inserted), and a
/// cost past the burst is the same error `check_n` gives.
#[test]
fn a_peek_n_is_the_decision_the_next_check_n_gets() {
    for algorithm in Algorithm::ALL {
        for (i, quota) in quotas(algorithm).into_iter().enumerate() {
            with_seed(
                &format!("peek_n {algorithm:?} {quota:?}"),
                0xbee6 + i as u64,
                |rng| {
                    let clock = ManualClock::new();
                    let single = RateLimiter::builder(algorithm, quota)
                        .clock(clock.clone())
                        .build()
                        .unwrap();
                    let keyed = KeyedRateLimiter::<u64, _>::builder(algorithm, quota)
                        .max_keys(4)
                        .on_full(OnFull::Deny)
                        .tiers([quota])
                        .clock(clock.clone())
                        .build()
                        .unwrap();
                    let tier = keyed.tier(1).unwrap();
                    let burst = single.burst();
                    assert!(single.peek_n(burst + 1).is_err());
                    assert!(keyed.peek_n(&0, burst + 1).is_err());
                    assert!(tier.peek_n(&0, burst + 1).is_err());
                    let (mut allowed, mut denied) = (0, 0);
                    let mut now = 0u64;
                    for _ in 0..3_000 {
                        now += rng.u64(0..=4_000_000);
                        clock.set(Duration::from_nanos(now));
                        let key = rng.u64(0..6);
                        let n = rng.u32(0..=burst);
                        let p = single.peek_n(n).unwrap();
                        assert_eq!(single.peek_n(n).unwrap(), p, "a peek_n changed the state");
                        assert_eq!(p, single.check_n(n).unwrap(), "single at {now}, cost {n}");
                        let occupied = keyed.stats().occupied;
                        let (kp, tp) = (
                            keyed.peek_n(&key, n).unwrap(),
                            tier.peek_n(&key, n).unwrap(),
                        );
                        assert_eq!(keyed.stats().occupied, occupied, "a peek_n inserted");
                        assert_eq!(kp, tp, "the tier has the same quota");
                        let kd = if rng.bool() {
                            keyed.check_n(&key, n).unwrap()
                        } else {
                            tier.check_n(&key, n).unwrap()
                        };
                        assert_eq!(kp, kd, "keyed: key {key} at {now}, cost {n}");
                        if n > 0 {
                            if kd.is_allowed() {
                                allowed += 1;
                            } else {
                                denied += 1;
                            }
                        }
                    }
                    assert!(
                        allowed > 100 && denied > 100,
                        "{allowed} allowed, {denied} denied"
                    );
                },
            );
        }
    }
}

/// Issue 27, item 8: `remaining` is "how many more requests of cost 1 would be admitted
/// right now": while a booking is pending every request queues behind it, so none is.
#[test]
fn remaining_is_zero_while_a_booking_is_pending() {
    for a in [
        Algorithm::SlidingLog,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
    ] {
        let clock = ManualClock::new();
        let l = RateLimiter::builder(a, Quota::per_second(2))
            .clock(clock.clone())
            .build()
            .unwrap();
        assert!(l.check_n(2).unwrap().is_allowed());
        let r = l.reserve(1, Duration::from_secs(2)).unwrap();
        assert!(r.wait_time() > Duration::ZERO, "{a:?}");
        assert!(!l.peek().is_allowed(), "{a:?}");
        assert_eq!(
            l.peek_n(0).unwrap().remaining(),
            0,
            "{a:?}: README: remaining is what would be admitted right now"
        );
        assert_eq!(l.peek().remaining(), 0, "{a:?}");
    }
}
