//! `check_all` against separate limiters: all or nothing, every denier reported, the
//! longest wait, and never more than any limit's quota under threads.

mod common;

use common::{seed, with_seed};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tollgate::{
    check_all, check_all_costs, Algorithm, KeyedRateLimiter, Limit, ManualClock, Quota,
    RateLimiter, ReserveError,
};

/// Random all-or-nothing checks over three limits of random algorithms, against twin
/// limiters decided one by one (a booking with no wait decides as a check does, and
/// can be given back at the same instant): when every twin admits, the multi check
/// admits with the same decisions; otherwise it consumes nothing (every limit's peek
/// is unchanged), names exactly the twins that denied and reports the longest wait,
/// and the twins' bookings are given back.
#[test]
fn all_or_nothing_against_twin_limiters() {
    // The leaky bucket admits as the token bucket does, but a booking with no wait
    // refuses the spacing its checks report as a delay; it is covered below.
    let algorithms = [
        Algorithm::TokenBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
    ];
    with_seed("check_all twins", seed(0xA11), |rng| {
        for round in 0..40 {
            let clock = ManualClock::new();
            let specs: Vec<(Algorithm, Quota)> = (0..3)
                .map(|_| {
                    let a = algorithms[rng.usize(0..4)];
                    let q = Quota::new(rng.u32(2..8), Duration::from_millis(rng.u64(5..50)));
                    (a, q)
                })
                .collect();
            let build = || -> Vec<RateLimiter<ManualClock>> {
                specs
                    .iter()
                    .map(|&(a, q)| {
                        RateLimiter::builder(a, q)
                            .clock(clock.clone())
                            .build()
                            .unwrap()
                    })
                    .collect()
            };
            let (multi, twins) = (build(), build());
            let limits: Vec<&dyn Limit> = multi.iter().map(|l| l as &dyn Limit).collect();
            let (mut allowed, mut denied) = (0, 0);
            for step in 0..300 {
                clock.advance(Duration::from_micros(rng.u64(0..4_000)));
                let n = rng.u32(1..=2);
                let alone: Vec<_> = twins.iter().map(|t| t.reserve(n, Duration::ZERO)).collect();
                let before: Vec<_> = multi.iter().map(|l| l.peek()).collect();
                let d = check_all(&limits, n).unwrap();
                let ctx = format!("round {round} step {step} {specs:?}");
                if alone.iter().all(Result::is_ok) {
                    allowed += 1;
                    assert!(d.is_allowed(), "{ctx}");
                    let want: Vec<_> = alone.iter().flatten().map(|r| r.decision()).collect();
                    assert_eq!(d.decisions(), &want[..], "{ctx}");
                } else {
                    denied += 1;
                    assert!(!d.is_allowed(), "{ctx}");
                    let after: Vec<_> = multi.iter().map(|l| l.peek()).collect();
                    assert_eq!(after, before, "{ctx}: a denial consumed something");
                    let deniers: Vec<usize> = (0..3).filter(|&i| alone[i].is_err()).collect();
                    assert_eq!(d.denied().collect::<Vec<_>>(), deniers, "{ctx}");
                    let longest = alone
                        .iter()
                        .filter_map(|r| match r {
                            Err(ReserveError::TooLong { wait, .. }) => Some(*wait),
                            _ => None,
                        })
                        .max();
                    assert_eq!(d.retry_after(), longest, "{ctx}");
                    for r in alone.into_iter().flatten() {
                        r.cancel(); // due now, not past: given back
                    }
                }
            }
            assert!(
                allowed >= 5 && denied >= 5,
                "round {round}: {allowed} / {denied}"
            );
        }
    });
}

/// The leaky bucket inside a multi check: admitted with its shaping delay, and a
/// denial elsewhere gives its slot back.
#[test]
fn leaky_bucket_slots_are_given_back() {
    let clock = ManualClock::new();
    let shaper = RateLimiter::builder(Algorithm::LeakyBucket, Quota::per_second(10))
        .clock(clock.clone())
        .build()
        .unwrap();
    let daily = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(2))
        .clock(clock)
        .build()
        .unwrap();
    let limits = [&shaper as &dyn Limit, &daily];
    assert_eq!(
        check_all(&limits, 1).unwrap().decisions()[0].delay(),
        Duration::ZERO
    );
    assert_eq!(
        check_all(&limits, 1).unwrap().decisions()[0].delay(),
        Duration::from_millis(100)
    );
    assert!(!check_all(&limits, 1).unwrap().is_allowed());
    assert_eq!(shaper.peek().delay(), Duration::from_millis(200)); // slot 3 given back
}

/// Many threads, each checking one of eight users against its per-user limit and a
/// global one, all or nothing, with no refill: the global limit admits exactly its
/// quota, each user at most theirs, and the per-user admissions add up to the global.
#[test]
fn threads_never_exceed_any_limit() {
    for a in Algorithm::ALL {
        let clock = ManualClock::new();
        let per_user = KeyedRateLimiter::<u64, _>::builder(a, Quota::per_hour(30))
            .clock(clock.clone())
            .build()
            .unwrap();
        let global = RateLimiter::builder(a, Quota::per_hour(100))
            .clock(clock)
            .build()
            .unwrap();
        let admitted: Vec<AtomicU64> = (0..8).map(|_| AtomicU64::new(0)).collect();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (per_user, global, admitted) = (&per_user, &global, &admitted);
                s.spawn(move || {
                    for i in 0..2_000u64 {
                        let user = (t * 7 + i) % 8;
                        let limits = [&per_user.limit(&user) as &dyn Limit, global];
                        if check_all(&limits, 1).unwrap().is_allowed() {
                            admitted[user as usize].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        let counts: Vec<u64> = admitted.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        assert!(counts.iter().all(|&c| c <= 30), "{a:?}: {counts:?}");
        assert!(counts.iter().sum::<u64>() <= 100, "{a:?}: {counts:?}");
        // Roll-backs may leave a bucket fuller than it ends up, never emptier: every
        // admission is still accounted for by both limits.
        let p = global.peek();
        let used_globally = 100 - u64::from(p.remaining()) - u64::from(p.is_allowed());
        assert!(
            used_globally >= counts.iter().sum::<u64>(),
            "{a:?}: the global limit lost admissions: {counts:?}"
        );
    }
}

#[test]
fn impossible_costs_consume_nothing() {
    let a = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(10))
        .build()
        .unwrap();
    let b = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(3))
        .build()
        .unwrap();
    let err = check_all(&[&a as &dyn Limit, &b], 4).unwrap_err();
    assert_eq!((err.requested, err.capacity), (4, 3));
    assert_eq!(a.peek().remaining(), 9);
}

/// `check_all_costs`: each limit counts its own cost, all or nothing. Threads of
/// mixed-cost requests (a request limit and a byte limit) never exceed either limit, a
/// denial takes nothing (with the roll-backs exact, every limit ends with exactly the
/// admitted costs counted), and a cost that can never fit is an error that consumes
/// nothing.
#[test]
fn mixed_costs_never_exceed_any_limit_and_a_denial_takes_nothing() {
    for a in [
        Algorithm::TokenBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
    ] {
        let clock = ManualClock::new();
        let requests = RateLimiter::builder(a, Quota::per_hour(200))
            .clock(clock.clone())
            .build()
            .unwrap();
        let bytes = RateLimiter::builder(a, Quota::per_hour(1_000))
            .clock(clock.clone())
            .build()
            .unwrap();
        let (counted, weighed) = (AtomicU64::new(0), AtomicU64::new(0));
        std::thread::scope(|s| {
            for t in 0..4u32 {
                let (requests, bytes, counted, weighed) = (&requests, &bytes, &counted, &weighed);
                s.spawn(move || {
                    for i in 0..500u32 {
                        let size = 1 + (t * 13 + i * 7) % 40;
                        let d =
                            check_all_costs(&[(requests as &dyn Limit, 1), (bytes, size)]).unwrap();
                        if d.is_allowed() {
                            counted.fetch_add(1, Ordering::Relaxed);
                            weighed.fetch_add(u64::from(size), Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        let (counted, weighed) = (counted.into_inner(), weighed.into_inner());
        assert!(
            counted <= 200 && weighed <= 1_000,
            "{a:?}: {counted} {weighed}"
        );
        assert!(weighed > 900, "{a:?}: degenerate ({weighed})");
        let used = |l: &RateLimiter<ManualClock>| {
            let d = l.check_n(0).unwrap();
            u64::from(d.burst() - d.remaining())
        };
        assert_eq!(used(&requests), counted, "{a:?}: requests");
        assert_eq!(used(&bytes), weighed, "{a:?}: bytes");
        let err = check_all_costs(&[(&requests as &dyn Limit, 1), (&bytes, 1_001)]).unwrap_err();
        assert_eq!((err.requested, err.capacity), (1_001, 1_000));
        assert_eq!(
            used(&requests),
            counted,
            "{a:?}: an impossible cost took nothing"
        );
    }
}
