//! Reservations against the reference models: whatever mix of checks and bookings,
//! every request proceeds at a time the quota allows, in the order it was booked;
//! cancel gives back exactly Go's x/time/rate rule; errors book nothing.

mod common;

use common::{model_for, ns, quota, seed, with_seed};
use std::time::Duration;
use tollgate::{
    Algorithm, KeyedRateLimiter, ManualClock, OnFull, Quota, RateLimiter, ReserveError,
};

fn quotas(a: Algorithm) -> Vec<Quota> {
    let mut q = vec![
        quota(5, 1_000_000, None),
        quota(7, 3_000_000_000, None),
        quota(100, 1_000_000_007, None),
    ];
    if matches!(a, Algorithm::TokenBucket | Algorithm::LeakyBucket) {
        q.push(quota(10, 1_000_000, Some(3)));
        q.push(quota(3, 1_000, Some(1)));
    }
    q
}

fn limiter(a: Algorithm, q: Quota) -> (RateLimiter<ManualClock>, ManualClock) {
    common::manual(a, q)
}

/// A random mix of checks and reservations (with random bounds on the wait) on one
/// limiter: each request proceeds at its reading (a check) or its reading plus its
/// wait (a reservation). Those times never decrease in the order of the calls (FIFO:
/// nothing overtakes a booking) and every request fits the reference model at its
/// time. A refused booking changes nothing (the next peek is unchanged).
#[test]
fn reservations_serve_in_booking_order_within_the_quota() {
    for a in Algorithm::ALL {
        for (qi, q) in quotas(a).into_iter().enumerate() {
            let s = seed(0x5E5E + 16 * a as u64 + qi as u64);
            with_seed(&format!("reserve {a:?} {q:?}"), s, |rng| {
                let (l, clock) = limiter(a, q);
                let mut model = model_for(a, q);
                let p = ns(q.period());
                let cap = l.burst();
                let mut now = 0u64;
                let mut last_at = 0u64;
                let (mut booked, mut refused) = (0, 0);
                for step in 0..3_000 {
                    now += match rng.u32(0..4) {
                        0 => 0,
                        1 | 2 => rng.u64(0..=p / u64::from(q.limit()) + 1),
                        _ => rng.u64(0..=p),
                    };
                    clock.set(Duration::from_nanos(now));
                    let n = if rng.bool() { 1 } else { rng.u32(1..=cap) };
                    let at = if rng.u32(0..3) == 0 {
                        let d = l.check_n(n).unwrap();
                        if !d.is_allowed() {
                            continue;
                        }
                        // The leaky bucket's admission proceeds after its delay.
                        now + ns(d.delay())
                    } else {
                        let max_wait = Duration::from_nanos(rng.u64(0..=2 * p));
                        let before = l.peek();
                        match l.reserve(n, max_wait) {
                            Ok(r) => {
                                assert!(r.wait_time() <= max_wait, "step {step}: {r:?}");
                                booked += 1;
                                now + ns(r.wait_time())
                            }
                            Err(ReserveError::TooLong { wait, .. }) => {
                                assert!(wait > max_wait);
                                assert_eq!(
                                    l.peek(),
                                    before,
                                    "step {step}: a refused booking changed the state"
                                );
                                refused += 1;
                                continue;
                            }
                            Err(e) => panic!("step {step}: {e}"),
                        }
                    };
                    assert!(
                        at >= last_at,
                        "step {step}: a request at {at} overtook one booked for {last_at}"
                    );
                    last_at = at;
                    assert!(
                        model.fits(at, n),
                        "step {step}: cost {n} at {at} exceeds the quota"
                    );
                    model.admit(at, n);
                }
                assert!(
                    booked > 100 && refused > 10,
                    "{a:?} {q:?}: degenerate ({booked}, {refused})"
                );
            });
        }
    }
}

/// A wait is exact: the booked time is the earliest the model admits, when the limiter
/// is only ever reserved (nothing else moves the state).
#[test]
fn bucket_waits_are_the_earliest_conforming_time() {
    for a in [
        Algorithm::TokenBucket,
        Algorithm::SlidingLog,
        Algorithm::FixedWindow,
    ] {
        for q in quotas(a) {
            let (l, clock) = limiter(a, q);
            let mut model = model_for(a, q);
            let mut now = 0;
            let mut last = 0;
            for i in 0..200u64 {
                now += (i * 7_919) % (ns(q.period()) / 3 + 1);
                clock.set(Duration::from_nanos(now));
                let r = l.reserve(1, Duration::MAX).unwrap();
                let at = now + ns(r.wait_time());
                assert!(model.fits(at, 1));
                if at > now.max(last) {
                    assert!(
                        !model.fits(at - 1, 1),
                        "{a:?} {q:?}: booked {at}, but {} already fits",
                        at - 1
                    );
                }
                last = at;
                model.admit(at, 1);
            }
        }
    }
}

/// Go's x/time/rate `CancelAt`: a pending reservation gives back its tokens less those
/// reserved after it; a due one gives back nothing; never more than was booked.
#[test]
fn cancel_follows_the_x_time_rate_rule() {
    let q = Quota::per_second(10).with_burst(1); // T = 100 ms
    let ms = Duration::from_millis;
    let (l, clock) = limiter(Algorithm::TokenBucket, q);
    let _first = l.reserve(1, ms(0)).unwrap(); // TAT = 100 ms
    let a = l.reserve(1, ms(1_000)).unwrap(); // proceeds at 100 ms, TAT = 200 ms
    assert_eq!(a.wait_time(), ms(100));
    a.cancel(); // nothing after it: all of it back (TAT = 100 ms)
    assert_eq!(l.reserve(1, ms(1_000)).unwrap().wait_time(), ms(100)); // TAT = 200 ms

    // Two pending after that: cancelling the earlier (cost 2) gives back 2 − 1.
    let (l, clock2) = limiter(Algorithm::TokenBucket, Quota::per_second(10).with_burst(2));
    let _fill = l.reserve(2, ms(0)).unwrap(); // TAT = 200 ms
    let a = l.reserve(2, ms(1_000)).unwrap(); // TAT = 400 ms, proceeds at 200 ms
    let b = l.reserve(1, ms(1_000)).unwrap(); // TAT = 500 ms, proceeds at 300 ms
    assert_eq!((a.wait_time(), b.wait_time()), (ms(200), ms(300)));
    a.cancel(); // 2 − (500 − 400)/100 = 1 token back: TAT = 400 ms
    assert_eq!(l.reserve(1, ms(1_000)).unwrap().wait_time(), ms(300));
    drop(b);

    // Due already: nothing back.
    let (l, clock3) = limiter(Algorithm::TokenBucket, Quota::per_second(10).with_burst(1));
    let _fill = l.reserve(1, ms(0)).unwrap();
    let a = l.reserve(1, ms(1_000)).unwrap(); // due at 100 ms
    clock3.set(ms(150));
    a.cancel();
    assert_eq!(l.reserve(1, ms(1_000)).unwrap().wait_time(), ms(50)); // TAT was 200 ms

    // Windows and the log: all back while still the newest, nothing once superseded.
    for alg in [
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
    ] {
        let (l, _c) = limiter(alg, Quota::per_second(4));
        let _fill = l.reserve(4, ms(0)).unwrap();
        let a = l.reserve(1, ms(5_000)).unwrap();
        let a_wait = a.wait_time();
        let peek_with_a = l.peek();
        let b = l.reserve(1, ms(5_000)).unwrap();
        assert!(b.wait_time() >= a.wait_time(), "{alg:?}");
        b.cancel();
        assert_eq!(
            l.peek(),
            peek_with_a,
            "{alg:?}: cancel of the newest did not restore"
        );
        a.cancel();
        let again = l.reserve(1, ms(5_000)).unwrap();
        assert!(again.wait_time() <= a_wait, "{alg:?}: {again:?}");
    }
    let _ = (clock, clock2);
}

/// Random reservations and cancels (pending ones, at random times): every request
/// that was not cancelled fits the reference model at its time. Cancels never give
/// back capacity a pending booking relies on.
#[test]
fn cancels_never_let_the_quota_be_exceeded() {
    for a in Algorithm::ALL {
        for (qi, q) in quotas(a).into_iter().enumerate() {
            let s = seed(0xCA7C + 16 * a as u64 + qi as u64);
            with_seed(&format!("cancel {a:?} {q:?}"), s, |rng| {
                let (l, clock) = limiter(a, q);
                let p = ns(q.period());
                let cap = l.burst();
                let mut now = 0u64;
                // (time it proceeds, cost), for every request not cancelled.
                let mut kept: Vec<(u64, u32)> = Vec::new();
                let mut pending = Vec::new();
                for _ in 0..1_500 {
                    now += rng.u64(0..=p / u64::from(q.limit()) + 1);
                    clock.set(Duration::from_nanos(now));
                    // Settle what is due: it proceeds.
                    pending.retain(|(at, n, _)| {
                        if *at <= now {
                            kept.push((*at, *n));
                            false
                        } else {
                            true
                        }
                    });
                    if !pending.is_empty() && rng.u32(0..3) == 0 {
                        let i = rng.usize(0..pending.len());
                        let (_, _, r): (u64, u32, tollgate::Reservation<'_>) = pending.remove(i);
                        r.cancel();
                        continue;
                    }
                    let n = rng.u32(1..=cap);
                    if let Ok(r) = l.reserve(n, Duration::from_nanos(2 * p)) {
                        pending.push((now + ns(r.wait_time()), n, r));
                    }
                }
                kept.extend(pending.drain(..).map(|(at, n, _)| (at, n)));
                kept.sort_unstable();
                let mut model = model_for(a, q);
                for (at, n) in kept {
                    assert!(model.fits(at, n), "cost {n} at {at} exceeds the quota");
                    model.admit(at, n);
                }
            });
        }
    }
}

#[test]
fn impossible_costs_and_full_tables_book_nothing() {
    for a in Algorithm::ALL {
        let (l, _c) = limiter(a, Quota::per_second(4));
        for n in [0, 5, u32::MAX] {
            assert!(
                matches!(
                    l.reserve(n, Duration::MAX),
                    Err(ReserveError::InsufficientCapacity(_))
                ),
                "{a:?} cost {n}"
            );
        }
        assert_eq!(l.peek().remaining(), 3, "{a:?}");
        let keyed = KeyedRateLimiter::<u64, _>::builder(a, Quota::per_hour(1))
            .max_keys(1)
            .on_full(OnFull::Deny)
            .clock(ManualClock::new())
            .build()
            .unwrap();
        let mut refused = 0;
        for k in 0..40 {
            match keyed.reserve(&k, 1, Duration::ZERO) {
                Ok(r) => assert_eq!(r.wait_time(), Duration::ZERO),
                Err(ReserveError::Refused { .. }) => refused += 1,
                Err(e) => panic!("{a:?}: {e}"),
            }
        }
        assert!(refused > 30, "{a:?}: {refused}");
        assert!(matches!(
            keyed.reserve(&0, 2, Duration::MAX),
            Err(ReserveError::InsufficientCapacity(_))
        ));
    }
}

/// The keyed limiter books exactly as a single limiter per key does.
#[test]
fn keyed_reservations_match_one_limiter_per_key() {
    for a in Algorithm::ALL {
        let q = quota(3, 10_000_000, None);
        let clock = ManualClock::new();
        let keyed = KeyedRateLimiter::<u32, _>::builder(a, q)
            .max_keys(64)
            .clock(clock.clone())
            .build()
            .unwrap();
        let singles: Vec<_> = (0..8)
            .map(|_| {
                RateLimiter::builder(a, q)
                    .clock(clock.clone())
                    .build()
                    .unwrap()
            })
            .collect();
        with_seed(
            &format!("keyed reserve {a:?}"),
            seed(0x4E7 + a as u64),
            |rng| {
                let mut pending = Vec::new();
                for step in 0..2_000 {
                    clock.advance(Duration::from_nanos(rng.u64(0..2_000_000)));
                    let k = rng.u32(0..8);
                    let n = rng.u32(1..=3);
                    let max_wait = Duration::from_nanos(rng.u64(0..30_000_000));
                    let got = keyed
                        .reserve(&k, n, max_wait)
                        .map(|r| (r.wait_time(), r.decision()));
                    let want = singles[k as usize]
                        .reserve(n, max_wait)
                        .map(|r| (r.wait_time(), r.decision()));
                    assert_eq!(got, want, "step {step}, key {k}");
                    if rng.u32(0..4) == 0 {
                        let a = keyed.reserve(&k, 1, max_wait);
                        let b = singles[k as usize].reserve(1, max_wait);
                        assert_eq!(a.is_ok(), b.is_ok());
                        if let (Ok(a), Ok(b)) = (a, b) {
                            pending.push((a, b));
                        }
                    }
                    if !pending.is_empty() && rng.bool() {
                        let (a, b) = pending.swap_remove(rng.usize(0..pending.len()));
                        a.cancel();
                        b.cancel();
                    }
                }
            },
        );
    }
}

/// Threads booking one key at once (clock frozen, so only the bookings order the
/// schedule): every booking made by one thread proceeds no earlier than the one it
/// made before (its program order is its booking order), and all of them together fit
/// the quota at the times they proceed.
#[test]
fn threads_booking_one_key_never_exceed_the_quota() {
    for a in Algorithm::ALL {
        let q = quota(10, 100_000_000, None);
        let clock = ManualClock::new();
        let keyed = KeyedRateLimiter::<u8, _>::builder(a, q)
            .clock(clock.clone())
            .build()
            .unwrap();
        let booked: Vec<Vec<(u64, u32)>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4u32)
                .map(|t| {
                    let keyed = &keyed;
                    s.spawn(move || {
                        let mut mine = Vec::new();
                        for i in 0..150u32 {
                            let n = 1 + (t + i) % 3;
                            let r = keyed.reserve(&7, n, Duration::from_secs(3_600)).unwrap();
                            mine.push((ns(r.wait_time()), n));
                        }
                        mine
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all = Vec::new();
        for mine in &booked {
            assert!(
                mine.windows(2).all(|w| w[0].0 <= w[1].0),
                "{a:?}: a thread's later booking proceeds earlier"
            );
            all.extend(mine.iter().copied());
        }
        all.sort_unstable();
        let mut model = model_for(a, q);
        for (at, n) in all {
            assert!(
                model.fits(at, n),
                "{a:?}: cost {n} at {at} exceeds the quota"
            );
            model.admit(at, n);
        }
    }
}

/// DESIGN, "What a key has used carries over in requests": a request under another tier
/// keeps the requests a key has used. A reservation or a charge on a key whose state
/// another tier's rate wrote converts it first (the fast path for present keys must not
/// book on the foreign state as if it were its own).
#[test]
fn a_reservation_or_charge_on_a_key_another_tier_wrote_counts_what_it_used() {
    use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, Quota};
    let slow = Quota::per_second(10); // one request every 100 ms, burst 10
    let fast = Quota::per_second(100); // one every 10 ms, burst 100
    let clock = ManualClock::new();
    let keyed = KeyedRateLimiter::<u64, _>::builder(Algorithm::TokenBucket, slow)
        .tiers([fast])
        .clock(clock.clone())
        .build()
        .unwrap();
    // Ten requests under the fast tier: 10 of the slow tier's 10.
    assert!(keyed.tier(1).unwrap().check_n(&7, 10).unwrap().is_allowed());
    assert!(
        keyed.reserve(&7, 1, std::time::Duration::ZERO).is_err(),
        "a reservation under the slow tier found room the key had used"
    );
    let c = keyed.charge(&7, 1);
    assert_eq!(
        c.owed(),
        1,
        "a charge under the slow tier owes what it takes past 10"
    );
}
