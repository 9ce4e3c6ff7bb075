//! Differential test: `TokenBucket` against `governor` 0.10, decision for decision.
//!
//! Our emission interval is `T = floor(period / limit)` ns with capacity `burst`;
//! governor's quota is built with exactly that interval
//! (`Quota::with_period(T).allow_burst(burst)`), both limiters are driven by fake
//! clocks advanced by the same random gaps, and every request (single `check` or
//! multi-cost `check_n`) must get the same answer: admitted or not, the same wait for a
//! denial (`retry_after` vs `NotUntil::wait_time_from`), and the same "can never fit"
//! error for costs above the burst.

mod common;

use common::{manual, ns, quota, seed, with_seed};
use governor::clock::{Clock as _, FakeRelativeClock};
use std::num::NonZeroU32;
use std::time::Duration;
use tollgate::{Algorithm, InsufficientCapacity, Quota};

const STEPS: usize = 20_000;

/// Tallies of one run, to check the schedule exercised every path.
#[derive(Debug, Default)]
struct Tally {
    allowed: usize,
    denied: usize,
    multi: usize,
    too_big: usize,
}

fn diff(q: Quota, seed_value: u64) -> Tally {
    let label = format!("governor diff {q:?}");
    with_seed(&label, seed_value, |rng| {
        let (ours, our_clock) = manual(Algorithm::TokenBucket, q);
        // governor takes T itself; ours is the quota's interval rounded up.
        let interval = ns(q.period()).div_ceil(u64::from(q.limit()));
        let burst = NonZeroU32::new(q.burst()).expect("burst is nonzero");
        let gq = governor::Quota::with_period(Duration::from_nanos(interval))
            .expect("interval is nonzero")
            .allow_burst(burst);
        let gclock = FakeRelativeClock::default();
        let theirs = governor::RateLimiter::direct_with_clock(gq, gclock.clone());

        let mut tally = Tally::default();
        let mut t = 0u64;
        for step in 0..STEPS {
            let gap = match rng.u32(0..8) {
                0 | 1 => 0,
                2..=4 => rng.u64(0..=interval),
                5 | 6 => rng.u64(0..=interval * u64::from(q.burst())),
                _ => rng.u64(0..=4 * interval * u64::from(q.burst())),
            };
            t += gap;
            our_clock.advance(Duration::from_nanos(gap));
            gclock.advance(Duration::from_nanos(gap));
            let ctx = format!("step {step}, t = {t} ns, gap {gap}");

            let kind = rng.u32(0..10);
            if kind < 4 {
                // Single request.
                let d = ours.check();
                let g = theirs.check();
                assert_eq!(d.is_allowed(), g.is_ok(), "check: {ctx}, ours {d:?}");
                match g {
                    Ok(()) => tally.allowed += 1,
                    Err(not_until) => {
                        tally.denied += 1;
                        assert_eq!(
                            d.retry_after(),
                            Some(not_until.wait_time_from(gclock.now())),
                            "check retry: {ctx}"
                        );
                    }
                }
            } else {
                // Multi-cost request, occasionally beyond the burst.
                let n = if kind == 9 {
                    rng.u32(1..=q.burst().saturating_mul(2).max(2))
                } else {
                    rng.u32(1..=q.burst())
                };
                let ours_n = ours.check_n(n);
                let theirs_n = theirs.check_n(NonZeroU32::new(n).unwrap());
                match (ours_n, theirs_n) {
                    (Err(e), Err(governor::InsufficientCapacity(cap))) => {
                        tally.too_big += 1;
                        assert_eq!(
                            e,
                            InsufficientCapacity {
                                requested: n,
                                capacity: cap
                            },
                            "check_n({n}) capacity: {ctx}"
                        );
                    }
                    (Ok(d), Ok(g)) => {
                        tally.multi += 1;
                        assert_eq!(d.is_allowed(), g.is_ok(), "check_n({n}): {ctx}, ours {d:?}");
                        match g {
                            Ok(()) => tally.allowed += 1,
                            Err(not_until) => {
                                tally.denied += 1;
                                assert_eq!(
                                    d.retry_after(),
                                    Some(not_until.wait_time_from(gclock.now())),
                                    "check_n({n}) retry: {ctx}"
                                );
                            }
                        }
                    }
                    (a, b) => panic!(
                        "check_n({n}) disagree on capacity: ours {a:?}, governor {b:?}: {ctx}"
                    ),
                }
            }
        }
        tally
    })
}

#[test]
fn token_bucket_agrees_with_governor() {
    let quotas = [
        quota(1, 1_000, None),
        quota(10, 1_000_000_000, Some(3)),
        quota(7, 1_000, Some(5)), // T = 142 ns: the period does not divide evenly
        quota(3, 1_000_000, Some(20)),
        quota(1_000, 1_000_000_000, Some(1)),
        quota(50, 60_000_000_000, Some(50)),
        // One request per ns with the largest burst.
        quota(u32::MAX, 5_000_000_000, None),
    ];
    for (i, q) in quotas.into_iter().enumerate() {
        let s = seed(0x6_0000 + i as u64);
        let tally = diff(q, s);
        eprintln!("{q:?} seed {s}: {tally:?}");
        assert!(
            tally.allowed > 1_000 && tally.denied > 1_000 && tally.multi > 1_000,
            "{q:?}: degenerate schedule {tally:?}"
        );
        if q.burst() > 1 && q.burst() < u32::MAX {
            assert!(tally.too_big > 50, "{q:?}: no oversized requests {tally:?}");
        }
    }
}

/// The hazards governor itself shipped: `check_n` of exactly the burst on a full
/// bucket is admitted (no off-by-one), and burst 1 admits exactly one at a time.
#[test]
fn burst_boundaries_agree_with_governor() {
    for burst in [1u32, 2, 5, 17] {
        let q = Quota::per_second(10).with_burst(burst);
        let (ours, clock) = manual(Algorithm::TokenBucket, q);
        let gclock = FakeRelativeClock::default();
        let theirs = governor::RateLimiter::direct_with_clock(
            governor::Quota::with_period(Duration::from_millis(100))
                .unwrap()
                .allow_burst(NonZeroU32::new(burst).unwrap()),
            gclock.clone(),
        );
        let n = NonZeroU32::new(burst).unwrap();
        assert!(ours.check_n(burst).unwrap().is_allowed());
        assert!(theirs.check_n(n).unwrap().is_ok());
        assert!(!ours.check().is_allowed());
        assert!(theirs.check().is_err());
        // Refill exactly the burst: both admit it whole, and not one more.
        let full = Duration::from_millis(100 * u64::from(burst));
        clock.advance(full);
        gclock.advance(full);
        assert!(ours.check_n(burst).unwrap().is_allowed());
        assert!(theirs.check_n(n).unwrap().is_ok());
        assert!(!ours.check().is_allowed());
        assert!(theirs.check().is_err());
        // One more than the burst can never fit, in both.
        assert_eq!(
            ours.check_n(burst + 1).unwrap_err(),
            InsufficientCapacity {
                requested: burst + 1,
                capacity: burst
            }
        );
        assert!(theirs.check_n(NonZeroU32::new(burst + 1).unwrap()).is_err());
    }
}
