//! The token bucket never admits more than its quota when the emission interval is not
//! a whole number of nanoseconds (issue 13.2). `T` is rounded up: over any span `S`, at
//! most `burst + ⌊S·limit/period⌋` are admitted, and the rate given up is less than
//! `1 ns / T` relative.

mod common;

use common::{manual, ns, with_seed};
use std::collections::VecDeque;
use std::time::Duration;
use tollgate::{Algorithm, Quota};

/// Quotas whose interval `period / limit` is not a whole number of nanoseconds, from
/// the extreme (600,000,000 per second: 1.67 ns) to ordinary ones.
fn non_integral() -> Vec<Quota> {
    vec![
        Quota::per_second(600_000_000),
        Quota::per_second(600_000_000).with_burst(50),
        Quota::new(3, Duration::from_nanos(1_000)),
        Quota::new(7, Duration::from_nanos(999)).with_burst(3),
        Quota::new(1_000, Duration::from_nanos(1_999)),
        Quota::per_second(3),
        Quota::per_minute(7).with_burst(2),
    ]
}

/// Drives `quota` with random gaps and costs and checks every window of the given
/// spans against `burst + ⌊S·limit/period⌋`.
fn check(algorithm: Algorithm, quota: Quota, seed: u64) {
    let period = ns(quota.period());
    let limit = u64::from(quota.limit());
    let burst = u64::from(quota.burst());
    let t_ns = period.div_ceil(limit);
    let spans = [period, (period / 3).max(1), 10 * t_ns, t_ns];
    with_seed(&format!("{algorithm:?} {quota:?}"), seed, |rng| {
        let (l, clock) = manual(algorithm, quota);
        // Admission times, one entry per admitted unit, newest last.
        let mut log: VecDeque<u64> = VecDeque::new();
        let longest = *spans.iter().max().unwrap();
        let mut now = 0u64;
        for _ in 0..50_000 {
            now += match rng.u32(0..4) {
                0 => 0,
                1 => rng.u64(0..=t_ns),
                2 => rng.u64(0..=2 * t_ns),
                _ => rng.u64(0..=period / 4 + 1),
            };
            clock.set(Duration::from_nanos(now));
            let cost = rng.u32(1..=quota.burst().min(4));
            if l.check_n(cost).unwrap().is_allowed() {
                log.extend(std::iter::repeat(now).take(cost as usize));
            }
            while log.front().is_some_and(|&t| t + longest < now) {
                log.pop_front();
            }
            for &s in &spans {
                // Admissions in the closed span [now − s, now].
                let inside = log.iter().rev().take_while(|&&t| t + s >= now).count() as u64;
                let bound = burst
                    + u64::try_from(u128::from(s) * u128::from(limit) / u128::from(period))
                        .unwrap();
                assert!(
                    inside <= bound,
                    "{inside} admitted in {s} ns, bound {bound} (T = {t_ns} ns)"
                );
            }
        }
    });
}

#[test]
fn buckets_never_exceed_the_quota_with_non_integral_intervals() {
    for algorithm in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
        for (i, q) in non_integral().into_iter().enumerate() {
            check(algorithm, q, 0x5eed + i as u64);
        }
    }
}

/// The figure the issue reproduced, at a scale a test can run: requests as fast as the
/// clock ticks at 600,000,000 per second over 1 ms admit at most 600,000 + burst
/// (rounding down admitted 1,000,000), and at least 500,000 (T = 2 ns).
#[test]
fn six_hundred_million_per_second_is_never_exceeded() {
    let q = Quota::per_second(600_000_000).with_burst(1);
    let (l, clock) = manual(Algorithm::TokenBucket, q);
    let mut admitted = 0u64;
    for t in 0..1_000_000u64 {
        clock.set(Duration::from_nanos(t));
        admitted += u64::from(l.check().is_allowed());
    }
    assert!(admitted <= 600_000 + 1, "{admitted}");
    assert!(admitted >= 500_000, "{admitted}");
}
