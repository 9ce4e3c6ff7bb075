//! The opt-in coarse clock: a limiter reading it never admits more than the quota
//! allows over the true time (its readings lag, never lead), under threads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tollgate::{Algorithm, CoarseClock, KeyedRateLimiter, Quota, RateLimiter};

#[test]
fn a_coarse_clock_never_admits_more_than_the_quota_over_true_time() {
    let clock = CoarseClock::new(Duration::from_millis(2)).unwrap();
    // 1,000 per second with a burst of 10: over a true span d, at most 10 + d / 1 ms.
    let q = Quota::per_second(1_000).with_burst(10);
    for a in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
        let single = RateLimiter::builder(a, q)
            .clock(clock.clone())
            .build()
            .unwrap();
        let keyed = KeyedRateLimiter::<u8, _>::builder(a, q)
            .clock(clock.clone())
            .build()
            .unwrap();
        let (one, many) = (AtomicU64::new(0), AtomicU64::new(0));
        let started = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    while started.elapsed() < Duration::from_millis(150) {
                        one.fetch_add(u64::from(single.check().is_allowed()), Ordering::Relaxed);
                        many.fetch_add(u64::from(keyed.check(&1).is_allowed()), Ordering::Relaxed);
                    }
                });
            }
        });
        let elapsed = started.elapsed();
        // The limiters' zero is the clock's, made before `started`: allow the time
        // between the two (and the burst) on top of the true span.
        let bound = 10 + (elapsed.as_micros() as u64 + 2_000) / 1_000 + 10;
        for (what, n) in [("single", one.into_inner()), ("keyed", many.into_inner())] {
            assert!(
                n <= bound,
                "{a:?} {what}: {n} admitted in {elapsed:?} (bound {bound})"
            );
            assert!(n >= 50, "{a:?} {what}: the clock moved on ({n})");
        }
    }
}
