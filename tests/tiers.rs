//! Per-key quota tiers: a keyed limiter whose requests name their tier decides as one
//! limiter per key whose quota is switched to the named tier before each request.

mod common;

use common::{quota, seed, with_seed};
use std::time::Duration;
use tollgate::{Algorithm, ConfigError, KeyedRateLimiter, ManualClock, Quota, RateLimiter};

fn tiers(a: Algorithm) -> Vec<Quota> {
    let ms = 1_000_000;
    match a {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => vec![
            quota(2, 10 * ms, None),
            quota(20, 10 * ms, Some(5)),
            quota(3, 40 * ms, Some(1)),
        ],
        _ => vec![
            quota(2, 10 * ms, None),
            quota(9, 10 * ms, None),
            quota(5, 10 * ms, None),
        ],
    }
}

#[test]
fn tiers_decide_as_one_limiter_per_key_switched_to_the_tier() {
    for a in Algorithm::ALL {
        let t = tiers(a);
        let clock = ManualClock::new();
        let keyed = KeyedRateLimiter::<u8, _>::builder(a, t[0])
            .tiers(t[1..].iter().copied())
            .clock(clock.clone())
            .build()
            .unwrap();
        assert_eq!(keyed.tier_count(), 3);
        // Built with the largest limit, so the sliding log's ring holds every tier.
        let largest = *t.iter().max_by_key(|q| q.limit()).unwrap();
        let singles: Vec<_> = (0..4)
            .map(|_| {
                RateLimiter::builder(a, largest)
                    .clock(clock.clone())
                    .build()
                    .unwrap()
            })
            .collect();
        with_seed(&format!("tiers {a:?}"), seed(0x71E + a as u64), |rng| {
            let mut allowed = 0;
            for step in 0..3_000 {
                clock.advance(Duration::from_micros(rng.u64(0..3_000)));
                let k = rng.u8(0..4);
                let tier = rng.usize(0..3);
                let single = &singles[k as usize];
                single.set_quota(t[tier]).unwrap();
                let n = rng.u32(1..=single.burst().min(3));
                let got = keyed.tier(tier).unwrap().check_n(&k, n).unwrap();
                let want = single.check_n(n).unwrap();
                assert_eq!(got, want, "step {step}: key {k} tier {tier} cost {n}");
                allowed += usize::from(got.is_allowed());
            }
            assert!(allowed > 300, "{a:?}: degenerate ({allowed})");
        });
    }
}

#[test]
fn window_and_log_tiers_share_the_period() {
    for a in [
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
    ] {
        let err = KeyedRateLimiter::<u8>::builder(a, Quota::per_second(5))
            .tiers([Quota::per_second(50), Quota::per_minute(50)])
            .build()
            .unwrap_err();
        assert!(
            matches!(err, ConfigError::TierPeriod { tier: 2, .. }),
            "{a:?}: {err}"
        );
        let l = KeyedRateLimiter::<u8>::builder(a, Quota::per_second(5))
            .tiers([Quota::per_second(50)])
            .build()
            .unwrap();
        assert!(matches!(
            l.tier(1).unwrap().set_quota(Quota::per_minute(50)),
            Err(ConfigError::PeriodChange { .. } | ConfigError::TierPeriod { .. })
        ));
        assert!(l.set_quota(Quota::per_minute(5)).is_err(), "{a:?}");
        assert_eq!(l.quota(), Quota::per_second(5));
    }
    // The buckets' tiers may differ in everything.
    let l = KeyedRateLimiter::<u8>::builder(Algorithm::TokenBucket, Quota::per_second(5))
        .tiers([Quota::per_hour(5).with_burst(1)])
        .build()
        .unwrap();
    assert_eq!(l.tier(1).unwrap().burst(), 1);
    // A bad tier quota is the same error as a bad quota.
    let err = KeyedRateLimiter::<u8>::builder(Algorithm::TokenBucket, Quota::per_second(5))
        .tiers([Quota::per_second(0)])
        .build()
        .unwrap_err();
    assert_eq!(err, ConfigError::ZeroLimit);
}

#[test]
fn memory_is_fixed_at_build_with_the_largest_tier_ring() {
    for a in Algorithm::ALL {
        let b = KeyedRateLimiter::<u64>::builder(a, Quota::per_second(4))
            .max_keys(1_000)
            .tiers([Quota::per_second(64), Quota::per_second(16)]);
        let before = b.memory_bytes().unwrap();
        let l = b.build().unwrap();
        assert_eq!(l.memory_bytes(), before, "{a:?}");
        if a == Algorithm::SlidingLog {
            assert_eq!(l.ring_bytes(), 64 * 8);
            // A tier can be raised up to the ring, not past it.
            l.tier(2).unwrap().set_quota(Quota::per_second(64)).unwrap();
            assert!(l.tier(2).unwrap().set_quota(Quota::per_second(65)).is_err());
        }
    }
}

/// Found by the fuzzer: a reservation refused under another tier (`TooLong`) changes
/// nothing, not even the rate the key's debt is repaid at (DESIGN's hazard: "a
/// rejected reservation still changed state"): the key's debt of 8 tier-0 requests is
/// still paid off at tier 0's rate, in 8 ms, not in 8 of tier 1's 15 s.
#[test]
fn a_refused_reservation_under_another_tier_changes_nothing() {
    for a in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
        let clock = ManualClock::new();
        let l = KeyedRateLimiter::<u64, _>::builder(a, Quota::per_second(1_000).with_burst(8))
            .tiers([Quota::per_minute(4).with_burst(3)])
            .clock(clock.clone())
            .build()
            .unwrap();
        assert!(l.check_n(&1, 8).unwrap().is_allowed());
        let refused = l.tier(1).unwrap().reserve(&1, 3, Duration::from_micros(1));
        assert!(
            matches!(refused, Err(tollgate::ReserveError::TooLong { .. })),
            "{a:?}: {refused:?}"
        );
        clock.advance(Duration::from_millis(10));
        assert!(
            l.check_n(&1, 8).unwrap().is_allowed(),
            "{a:?}: the refusal converted the debt"
        );
    }
}
