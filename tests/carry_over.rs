//! What a key has used carries over, in requests, across a quota change (`set_quota`)
//! and across tiers (issue 20, item 6): raising a limit never lengthens a wait and
//! lowering one never shortens it; a key that used 10 of a free plan's 10 has used 10
//! of the pro plan's 1,000.

mod common;

use common::{seed, with_seed};
use std::time::Duration;
use tollgate::{Algorithm, ConfigError, KeyedRateLimiter, ManualClock, Quota, RateLimiter};

const MS: Duration = Duration::from_millis(1);

/// Go x/time/rate's TestReserveSetLimit: 5 per second with a burst of 2; raising the
/// rate to 10 per second at t2 lets the next reservation proceed at t4 (as Go does),
/// where keeping 5 per second makes it wait until t6.
#[test]
fn raising_the_rate_shortens_the_next_reservation_as_x_time_rate() {
    for a in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
        for (raise, expected) in [(false, 400), (true, 200)] {
            let clock = ManualClock::new();
            let q = Quota::per_second(5).with_burst(2);
            let single = RateLimiter::builder(a, q)
                .clock(clock.clone())
                .build()
                .unwrap();
            let keyed = KeyedRateLimiter::<u8, _>::builder(a, q)
                .clock(clock.clone())
                .build()
                .unwrap();
            let wait = |n| {
                let s = single
                    .reserve(n, Duration::from_secs(1))
                    .unwrap()
                    .wait_time();
                let k = keyed
                    .reserve(&1, n, Duration::from_secs(1))
                    .unwrap()
                    .wait_time();
                assert_eq!(s, k, "{a:?}: single and keyed agree");
                s
            };
            assert_eq!(wait(2), Duration::ZERO);
            clock.advance(200 * MS);
            if a == Algorithm::TokenBucket {
                assert_eq!(wait(2), 200 * MS);
            } else {
                // The shaper holds each request for its slot: the second pair starts
                // once the first is released.
                let _ = wait(2);
            }
            if raise {
                let q2 = Quota::per_second(10).with_burst(2);
                single.set_quota(q2).unwrap();
                keyed.set_quota(q2).unwrap();
            }
            if a == Algorithm::TokenBucket {
                assert_eq!(wait(1), expected * MS, "{a:?} raise {raise}");
            } else {
                let w = wait(1);
                assert!(
                    (w < 400 * MS) == raise,
                    "{a:?}: raising the rate shortens the shaper's slot ({w:?})"
                );
            }
        }
    }
}

/// A key that used 10 of a free plan's 10 per minute has used 10 of the pro plan's
/// 1,000 (not all of it), and a key that used 10 of the pro plan has no room on the
/// free plan: through tiers and through `set_quota` alike.
#[test]
fn what_a_key_used_carries_over_between_plans() {
    for a in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
        let free = Quota::per_minute(10);
        let pro = Quota::per_minute(1_000);
        let keyed = KeyedRateLimiter::<str, _>::builder(a, free)
            .tiers([pro])
            .clock(ManualClock::new())
            .build()
            .unwrap();
        assert!(keyed.check_n("alice", 10).unwrap().is_allowed());
        assert!(!keyed.check("alice").is_allowed());
        let d = keyed.tier(1).unwrap().check("alice");
        assert!(d.is_allowed(), "{a:?}: the upgrade has room");
        assert_eq!(d.remaining(), 1_000 - 11, "{a:?}: 11 of 1,000 used");

        assert!(keyed
            .tier(1)
            .unwrap()
            .check_n("bob", 10)
            .unwrap()
            .is_allowed());
        assert!(
            !keyed.check("bob").is_allowed(),
            "{a:?}: 10 of 10 used on the free plan"
        );

        let single = RateLimiter::builder(a, free)
            .clock(ManualClock::new())
            .build()
            .unwrap();
        assert!(single.check_n(10).unwrap().is_allowed());
        single.set_quota(pro).unwrap();
        assert_eq!(single.check().remaining(), 1_000 - 11, "{a:?}: set_quota");
        single.set_quota(free).unwrap();
        assert!(!single.check().is_allowed(), "{a:?}: 11 used of 10");
    }
}

/// Random usage under quota `a`, then the same key asked under `b`: when `b` is at
/// least as generous in rate and burst the wait is never longer, when it is at most
/// as generous never shorter; through tiers (the key's next request) and `set_quota`.
#[test]
fn raising_never_lengthens_a_wait_and_lowering_never_shortens_one() {
    let quotas = [
        Quota::per_second(10).with_burst(3),
        Quota::per_second(10).with_burst(10),
        Quota::per_second(25).with_burst(3),
        Quota::per_second(100).with_burst(20),
        Quota::new(3, Duration::from_millis(700)).with_burst(2),
        Quota::per_second(1),
    ];
    let at_least = |b: &Quota, a: &Quota| {
        // b's rate >= a's and b's burst >= a's.
        u128::from(b.limit()) * a.period().as_nanos()
            >= u128::from(a.limit()) * b.period().as_nanos()
            && b.burst() >= a.burst()
    };
    for a in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
        with_seed(
            &format!("carry over {a:?}"),
            seed(0xCA44 + a as u64),
            |rng| {
                for _ in 0..300 {
                    let qa = quotas[rng.usize(0..quotas.len())];
                    let qb = quotas[rng.usize(0..quotas.len())];
                    let clock = ManualClock::new();
                    let keyed = KeyedRateLimiter::<u8, _>::builder(a, qa)
                        .tiers([qb])
                        .clock(clock.clone())
                        .build()
                        .unwrap();
                    let kept = RateLimiter::builder(a, qa)
                        .clock(clock.clone())
                        .build()
                        .unwrap();
                    let changed = RateLimiter::builder(a, qa)
                        .clock(clock.clone())
                        .build()
                        .unwrap();
                    for _ in 0..rng.usize(1..30) {
                        clock.advance(Duration::from_micros(rng.u64(0..60_000)));
                        let n = rng.u32(1..=qa.burst());
                        let _ = keyed.check_n(&1, n).unwrap();
                        let _ = kept.check_n(n).unwrap();
                        let _ = changed.check_n(n).unwrap();
                    }
                    clock.advance(Duration::from_micros(rng.u64(0..30_000)));
                    changed.set_quota(qb).unwrap();
                    let wait = |d: tollgate::Decision| d.retry_after().unwrap_or_default();
                    let before = wait(kept.peek());
                    for after in [wait(keyed.tier(1).unwrap().peek(&1)), wait(changed.peek())] {
                        if at_least(&qb, &qa) {
                            assert!(after <= before, "{qa:?} -> {qb:?}: {before:?} -> {after:?}");
                        }
                        if at_least(&qa, &qb) {
                            assert!(after >= before, "{qa:?} -> {qb:?}: {before:?} -> {after:?}");
                        }
                    }
                }
            },
        );
    }
}

/// More distinct rates over time than a table has rate classes: each change keeps
/// what every key used, in requests (the classes no tier uses any more are swept and
/// reused).
#[test]
fn many_quota_changes_keep_what_each_key_used() {
    let clock = ManualClock::new();
    let keyed = KeyedRateLimiter::<u32, _>::builder(
        Algorithm::TokenBucket,
        Quota::per_second(10).with_burst(10),
    )
    .max_keys(1_000)
    .clock(clock.clone())
    .build()
    .unwrap();
    for k in 0..500u32 {
        assert!(keyed.check_n(&k, 1 + k % 5).unwrap().is_allowed());
    }
    for i in 0..40u32 {
        let q = Quota::per_second(11 + i * 7).with_burst(10);
        keyed.set_quota(q).unwrap();
        for k in (0..500u32).step_by(37) {
            let used = 1 + k % 5;
            let d = keyed.peek(&k);
            assert_eq!(d.remaining(), 10 - used - 1, "change {i}, key {k}: {d:?}");
        }
    }
}

/// A table tells at most 16 bucket rates apart at once; more distinct rates among its
/// tiers is a clear error at build.
#[test]
fn too_many_distinct_tier_rates_is_an_error() {
    let tiers = (1..=16).map(|i| Quota::per_second(100 + i));
    let err = KeyedRateLimiter::<u8>::builder(Algorithm::TokenBucket, Quota::per_second(100))
        .tiers(tiers)
        .build()
        .unwrap_err();
    assert!(
        matches!(err, ConfigError::TooManyRates { max: 16, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("16"));
    // Tiers of one rate share a class; the windows have none.
    let same = (0..40).map(|i| Quota::per_second(100).with_burst(1 + i));
    KeyedRateLimiter::<u8>::builder(Algorithm::TokenBucket, Quota::per_second(100))
        .tiers(same)
        .build()
        .unwrap();
    let windows = (1..=40).map(Quota::per_second);
    KeyedRateLimiter::<u8>::builder(Algorithm::FixedWindow, Quota::per_second(100))
        .tiers(windows)
        .build()
        .unwrap();
}

/// Threads deciding one key under two tiers of different rates at once (clock frozen):
/// each conversion carries what was used over in requests, rounded up, so the key is
/// never admitted more than the larger burst in all, and at least the smaller one.
#[test]
fn threads_on_two_tiers_never_exceed_the_larger_burst() {
    for a in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
        for _ in 0..20 {
            let free = Quota::per_hour(10);
            let pro = Quota::per_hour(1_000).with_burst(20);
            let keyed = KeyedRateLimiter::<u8, _>::builder(a, free)
                .tiers([pro])
                .clock(ManualClock::new())
                .build()
                .unwrap();
            let admitted = std::sync::atomic::AtomicU32::new(0);
            std::thread::scope(|s| {
                for _ in 0..4 {
                    let (keyed, admitted) = (&keyed, &admitted);
                    s.spawn(move || {
                        for i in 0..40usize {
                            // The pro tier first, then the free one.
                            let pro = i < 20;
                            let tier = keyed.tier(usize::from(pro)).unwrap();
                            if tier.check(&1).is_allowed() {
                                admitted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                    });
                }
            });
            let n = admitted.into_inner();
            assert!((10..=20).contains(&n), "{a:?}: {n} admitted");
        }
    }
}

/// A reservation booked before a rate change and cancelled after it gives nothing
/// back, on a single limiter and on a key (whether or not a request under the new rate
/// converted the key's state first): its capacity was counted at the old rate and
/// converted with the rest. Giving back its old-rate weight from a state counted at
/// the new rate would take back what the reservations booked after it owe (a single
/// limiter gave back two requests of the new rate for the one cancelled).
#[test]
fn a_booking_cancelled_after_a_rate_change_gives_nothing_back() {
    let (slow, fast) = (Duration::from_secs(10), Duration::from_secs(5));
    for a in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
        let clock = ManualClock::new();
        let single = RateLimiter::builder(a, Quota::new(1, slow))
            .clock(clock.clone())
            .build()
            .unwrap();
        let keyed = KeyedRateLimiter::<u8, _>::builder(a, Quota::new(1, slow))
            .clock(clock.clone())
            .build()
            .unwrap();
        let mut booked: Vec<_> = (0..4)
            .map(|_| single.reserve(1, 100 * slow).unwrap())
            .collect();
        let mut on_key: Vec<_> = (0..4)
            .map(|_| keyed.reserve(&1, 1, 100 * slow).unwrap())
            .collect();
        let mut on_converted: Vec<_> = (0..4)
            .map(|_| keyed.reserve(&2, 1, 100 * slow).unwrap())
            .collect();
        single.set_quota(Quota::new(1, fast)).unwrap();
        keyed.set_quota(Quota::new(1, fast)).unwrap();
        // Key 2's state is converted by a booking under the new rate (4 owed, then 5).
        on_converted.push(keyed.reserve(&2, 1, 100 * slow).unwrap());
        let owed = |d: tollgate::Decision| d.reset_after();
        assert_eq!(owed(single.check_n(0).unwrap()), 4 * fast, "{a:?}");
        assert_eq!(owed(keyed.check_n(&2, 0).unwrap()), 5 * fast, "{a:?}");
        booked.remove(1).cancel();
        on_key.remove(1).cancel();
        on_converted.remove(1).cancel();
        assert_eq!(owed(single.check_n(0).unwrap()), 4 * fast, "{a:?}: single");
        assert_eq!(
            owed(keyed.check_n(&2, 0).unwrap()),
            5 * fast,
            "{a:?}: converted key"
        );
        // Key 1's state is still counted at the old rate: 4 owed, converted on reading.
        assert_eq!(owed(keyed.check_n(&1, 0).unwrap()), 4 * fast, "{a:?}: key");
        // The last booking, cancelled, is given back at once (no rate change since).
        on_converted.pop().unwrap().cancel();
        assert_eq!(
            owed(keyed.check_n(&2, 0).unwrap()),
            4 * fast,
            "{a:?}: own rate"
        );
    }
}

/// Issue 27, item 9: a debt converted by `set_quota` is carried exactly, as the
/// README's formula says (`TAT' = t + ⌈(TAT − t)·T_b / T_a⌉`), however long: 100
/// requests of one per 365 days owe 100 years, not a cap of about 36.
#[test]
fn a_converted_debt_is_carried_exactly_up_to_the_horizon() {
    let year = Duration::from_secs(365 * 86_400);
    for a in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
        let clock = ManualClock::new();
        let l = RateLimiter::builder(a, Quota::per_second(1000).with_burst(100))
            .clock(clock.clone())
            .build()
            .unwrap();
        assert!(l.check_n(100).unwrap().is_allowed());
        l.set_quota(Quota::new(1, year)).unwrap();
        assert_eq!(l.peek_n(0).unwrap().reset_after(), year * 100, "{a:?}");
        let keyed = KeyedRateLimiter::<u64, _>::builder(a, Quota::per_second(1000).with_burst(100))
            .clock(clock.clone())
            .build()
            .unwrap();
        assert!(keyed.check_n(&1, 100).unwrap().is_allowed());
        keyed.set_quota(Quota::new(1, year)).unwrap();
        assert_eq!(
            keyed.peek_n(&1, 0).unwrap().reset_after(),
            year * 100,
            "{a:?} keyed"
        );
    }
}
