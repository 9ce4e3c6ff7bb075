//! Property tests of every algorithm through the public API (`RateLimiter` driven by a
//! `ManualClock`) against reference models (in `common/mod.rs`) written in a
//! deliberately different formulation:
//!
//! - TokenBucket / LeakyBucket: a "debt" in nanoseconds that drains with elapsed time
//!   (not a theoretical arrival time); the leaky bucket's delay is the debt.
//! - FixedWindow: a `HashMap` from window number to count.
//! - SlidingWindow: a `HashMap` of window counts, weighted in exact `u128` arithmetic.
//! - SlidingLog: a `Vec` of every admitted timestamp, counted over `(t − P, t]`.
//!
//! Every model only answers "does a request of cost `n` fit at time `t`?". `remaining`
//! is then the largest cost that fits, and `retry_after` / `reset_after` are the least
//! waits after which the request (or a full-capacity request) fits, found by binary
//! search on that predicate — never by the closed forms the implementation uses.
//!
//! Schedules are random (seeded; the seed is printed on failure and can be replayed
//! with `TOLLGATE_SEED=<seed>`), 10,000 steps per algorithm and quota.

mod common;

use common::{largest_fit, least_wait, manual, model_for, ns, quota, seed, with_seed};
use std::time::Duration;
use tollgate::{Algorithm, Quota};

const STEPS: usize = 10_000;

/// Counts of what a run exercised, to make sure the schedules are not degenerate.
#[derive(Debug, Default)]
struct Coverage {
    allowed: usize,
    denied: usize,
    peeks: usize,
    probes: usize,
}

/// Drives `algorithm` on `q` through `steps` random steps and compares every decision
/// with the model.
fn run(algorithm: Algorithm, q: Quota, steps: usize, seed_value: u64) -> Coverage {
    let label = format!("{algorithm:?} {q:?}");
    with_seed(&label, seed_value, |rng| {
        let (limiter, clock) = manual(algorithm, q);
        let mut model = model_for(algorithm, q);
        let capacity = limiter.burst();
        let expected_capacity = match algorithm {
            Algorithm::TokenBucket | Algorithm::LeakyBucket => q.burst(),
            _ => q.limit(),
        };
        assert_eq!(capacity, expected_capacity);
        let period = ns(q.period());
        let interval = (period / u64::from(q.limit())).max(1);
        let mut t = 0u64;
        let mut cov = Coverage::default();
        // A pending probe of a denial's retry_after: (cost, remaining wait).
        let mut probe: Option<(u32, u64)> = None;
        for step in 0..steps {
            let (gap, cost, probing) = match probe.take() {
                Some((cost, retry)) if retry > 1 => {
                    // First wait retry − 1: the request must still be denied.
                    probe = Some((cost, 1));
                    (retry - 1, cost, Some(false))
                }
                Some((cost, wait)) => (wait, cost, Some(true)),
                None => {
                    let gap = match rng.u32(0..10) {
                        0..=2 => 0,
                        3..=5 => rng.u64(0..=2 * interval),
                        6 | 7 => rng.u64(0..=period),
                        8 => rng.u64(0..=3 * period),
                        _ => rng.u64(0..=8 * period),
                    };
                    let cost = match rng.u32(0..10) {
                        0 => 0,
                        1..=5 => 1,
                        _ => rng.u32(0..=capacity),
                    };
                    (gap, cost, None)
                }
            };
            t += gap;
            assert!(t < 1 << 61, "schedule ran too close to the horizon");
            clock.advance(Duration::from_nanos(gap));
            let d = if cost == 1 && step % 2 == 0 {
                limiter.check()
            } else {
                limiter.check_n(cost).expect("cost within capacity")
            };
            let ctx = || format!("step {step}, t = {t} ns, cost {cost}, decision {d:?}");

            let fits = model.fits(t, cost);
            assert_eq!(d.is_allowed(), fits, "admission differs: {}", ctx());
            if let Some(should_fit) = probing {
                cov.probes += 1;
                assert_eq!(
                    fits,
                    should_fit,
                    "waiting retry_after{} {}: {}",
                    if should_fit { "" } else { " - 1ns" },
                    if should_fit {
                        "must admit"
                    } else {
                        "must still deny"
                    },
                    ctx()
                );
            }
            if fits {
                assert_eq!(
                    d.delay(),
                    Duration::from_nanos(model.delay(t)),
                    "delay: {}",
                    ctx()
                );
                model.admit(t, cost);
                if cost == 0 {
                    cov.peeks += 1;
                } else {
                    cov.allowed += 1;
                }
            } else {
                cov.denied += 1;
                assert_eq!(
                    d.delay(),
                    Duration::ZERO,
                    "a denial has no delay: {}",
                    ctx()
                );
            }
            assert_eq!(d.burst(), capacity, "burst: {}", ctx());
            assert_eq!(d.limit(), q.limit(), "limit: {}", ctx());
            assert_eq!(
                d.remaining(),
                largest_fit(&*model, t, capacity),
                "remaining: {}",
                ctx()
            );
            assert_eq!(
                d.reset_after(),
                Duration::from_nanos(least_wait(&*model, t, capacity)),
                "reset_after: {}",
                ctx()
            );
            if fits {
                assert_eq!(
                    d.retry_after(),
                    None,
                    "retry_after of an admission: {}",
                    ctx()
                );
            } else {
                let truth = least_wait(&*model, t, cost);
                let got = ns(d.retry_after().expect("a denial has a retry_after"));
                assert!(
                    got >= truth,
                    "retry_after too early (true minimum {truth}): {}",
                    ctx()
                );
                assert!(
                    got - truth <= truth / 100,
                    "retry_after more than 1% late (true minimum {truth}): {}",
                    ctx()
                );
                // The implementation means to be exact for every algorithm.
                assert_eq!(got, truth, "retry_after not exact: {}", ctx());
                assert!(got > 0, "a denial must ask for a positive wait: {}", ctx());
                // Probe, unless the wait would carry the clock near the engine's
                // horizon (2^62 ns), where time stops and the model no longer applies.
                if probing.is_none() && t + got < 1 << 61 && rng.u32(0..3) == 0 {
                    probe = Some((cost, got));
                }
            }
        }
        cov
    })
}

/// Runs every quota in `quotas` for `algorithm` and checks the schedules exercised
/// admissions, denials, peeks and retry probes.
fn run_all(algorithm: Algorithm, quotas: &[Quota], base_seed: u64) {
    for (i, &q) in quotas.iter().enumerate() {
        let s = seed(base_seed + i as u64);
        let cov = run(algorithm, q, STEPS, s);
        // A burst of u32::MAX mostly asks for waits of decades, past what the
        // schedule can probe before the horizon: only a few probes happen there.
        let min_probes = if q.burst() == u32::MAX && q.limit() == 1 {
            0
        } else {
            10
        };
        eprintln!("{algorithm:?} {q:?} seed {s}: {cov:?}");
        assert!(
            cov.allowed > 100 && cov.denied > 100 && cov.peeks > 100 && cov.probes > min_probes,
            "{algorithm:?} {q:?}: degenerate schedule {cov:?}"
        );
    }
}

fn bucket_quotas() -> Vec<Quota> {
    vec![
        quota(1, 1_000, None),
        quota(2, 1_000, Some(1)),
        quota(1, 1_000, Some(3)),
        quota(7, 1_000, Some(3)), // T = 142 ns: the period does not divide evenly
        quota(3, 10_000, Some(11)),
        quota(10, 1_000_000_000, Some(25)),
        quota(100, 999_983, Some(40)),
        // The extremes: one request per ns with the largest burst, and the largest
        // burst over a second each (136 years to refill).
        quota(u32::MAX, 5_000_000_000, None),
        quota(1, 1_000_000_000, Some(u32::MAX)),
    ]
}

fn window_quotas() -> Vec<Quota> {
    vec![
        quota(1, 1_000, None),
        quota(2, 1_000, None),
        quota(3, 999, None),
        quota(7, 1_009, None),
        quota(10, 1_000_000_000, None),
        quota(64, 8_209, None),
        quota(10, 129, None), // a period of a few ns per request (129 ns: the SlidingWindow minimum)
    ]
}

/// Window quotas with larger limits (too slow for the list-based log model).
fn large_window_quotas(algorithm: Algorithm) -> Vec<Quota> {
    let mut qs = vec![quota(1_000, 999_983, None), quota(997, 1_000_000_000, None)];
    match algorithm {
        // The largest limit, at a period just above its layout minimum (2^31 + 1 ns).
        Algorithm::FixedWindow => {
            qs.push(quota(u32::MAX, (1 << 31) + 1, None));
            // Windows have no emission interval: more than a request per ns is
            // representable (15 needs 4 count bits, the mark one more: 2^3 + 1 ns).
            qs.push(quota(15, 9, None));
        }
        // 2^20 needs 21-bit counts, the mark one bit more, leaving 21 index bits: at
        // least 2^41 + 1 ns.
        Algorithm::SlidingWindow => qs.push(quota(1 << 20, (1 << 41) + 1, None)),
        _ => {}
    }
    qs
}

#[test]
fn token_bucket_matches_debt_model() {
    run_all(Algorithm::TokenBucket, &bucket_quotas(), 0x7B00);
}

#[test]
fn leaky_bucket_matches_debt_model_with_delay() {
    run_all(Algorithm::LeakyBucket, &bucket_quotas(), 0x1EA0);
}

#[test]
fn fixed_window_matches_window_map() {
    run_all(Algorithm::FixedWindow, &window_quotas(), 0xF1C0);
    run_all(
        Algorithm::FixedWindow,
        &large_window_quotas(Algorithm::FixedWindow),
        0xF1D0,
    );
}

#[test]
fn sliding_window_matches_weighted_window_map() {
    run_all(Algorithm::SlidingWindow, &window_quotas(), 0x5110);
    run_all(
        Algorithm::SlidingWindow,
        &large_window_quotas(Algorithm::SlidingWindow),
        0x5120,
    );
}

#[test]
fn sliding_log_matches_timestamp_list() {
    run_all(Algorithm::SlidingLog, &window_quotas(), 0x5100);
    // Windows have no emission interval: 2 requests per ns are representable.
    run_all(Algorithm::SlidingLog, &[quota(10, 5, None)], 0x5180);
}

/// The leaky bucket admits exactly what the token bucket admits, step for step.
#[test]
fn leaky_bucket_admits_as_token_bucket() {
    let s = seed(0x1EAF);
    with_seed("leaky vs token", s, |rng| {
        for q in bucket_quotas() {
            let (token, token_clock) = manual(Algorithm::TokenBucket, q);
            let (leaky, leaky_clock) = manual(Algorithm::LeakyBucket, q);
            let period = ns(q.period());
            for step in 0..STEPS {
                let gap = rng.u64(0..=period / u64::from(q.limit()) * 2);
                token_clock.advance(Duration::from_nanos(gap));
                leaky_clock.advance(Duration::from_nanos(gap));
                let cost = rng.u32(0..=q.burst());
                let a = token.check_n(cost).unwrap();
                let b = leaky.check_n(cost).unwrap();
                assert_eq!(a.is_allowed(), b.is_allowed(), "{q:?} step {step}");
                assert_eq!(a.remaining(), b.remaining(), "{q:?} step {step}");
                assert_eq!(a.reset_after(), b.reset_after(), "{q:?} step {step}");
                assert_eq!(a.retry_after(), b.retry_after(), "{q:?} step {step}");
                assert_eq!(a.delay(), Duration::ZERO);
            }
        }
    });
}

/// The DESIGN examples, as concrete numbers: GCRA spacing, leaky delays, window edges.
#[test]
fn worked_examples() {
    // Token bucket 10/s burst 20: 20 at once, then one per 100 ms.
    let (l, clock) = manual(Algorithm::TokenBucket, Quota::per_second(10).with_burst(20));
    assert!(l.check_n(20).unwrap().is_allowed());
    let d = l.check();
    assert!(!d.is_allowed());
    assert_eq!(d.retry_after(), Some(Duration::from_millis(100)));
    assert_eq!(d.reset_after(), Duration::from_secs(2));
    clock.advance(Duration::from_millis(100));
    assert!(l.check().is_allowed());
    assert!(!l.check().is_allowed());

    // Leaky bucket 10/s burst 3: delays 0, 100, 200 ms, then denial.
    let (l, _clock) = manual(Algorithm::LeakyBucket, Quota::per_second(10).with_burst(3));
    let delays: Vec<_> = (0..3).map(|_| l.check().delay()).collect();
    assert_eq!(delays, [0, 100, 200].map(Duration::from_millis).to_vec());
    assert!(!l.check().is_allowed());

    // Sliding window 10 per 10 s: 10 admitted late in window 0; at 25% into window 1
    // the previous window still weighs 7.5, so 2 more fit and the third waits.
    let (l, clock) = manual(
        Algorithm::SlidingWindow,
        Quota::new(10, Duration::from_secs(10)),
    );
    clock.advance(Duration::from_secs(9));
    assert!(l.check_n(10).unwrap().is_allowed());
    clock.advance(Duration::from_millis(3_500)); // t = 12.5 s, e = 2.5 s
    assert!(l.check_n(2).unwrap().is_allowed()); // 10·0.75 + 2 = 9.5
    let d = l.check();
    assert!(!d.is_allowed()); // 7.5 + 3 = 10.5
                              // Fits when 10·(P − e)/P + 3 <= 10, i.e. e >= 3 s: 500 ms from now.
    assert_eq!(d.retry_after(), Some(Duration::from_millis(500)));

    // Sliding log 2 per second: the third waits until the first leaves (t − P, t].
    let (l, clock) = manual(Algorithm::SlidingLog, Quota::per_second(2));
    assert!(l.check().is_allowed());
    clock.advance(Duration::from_millis(300));
    assert!(l.check().is_allowed());
    let d = l.check();
    assert_eq!(d.retry_after(), Some(Duration::from_millis(700)));
    assert_eq!(d.reset_after(), Duration::from_millis(1_000));
}
