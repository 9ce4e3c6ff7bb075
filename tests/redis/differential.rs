//! The Redis scripts against the local engine, decision for decision, on random
//! schedules driven by one shared `ManualClock` (the caller's clock).

use crate::server::RedisServer;
use std::time::Duration;
use tollgate::redis::RedisRateLimiter;
use tollgate::{Algorithm, Decision, ManualClock, Quota, RateLimiter};

/// Durations rounded up to whole microseconds: the scripts compute in µs, and the
/// one place the engines may round differently (the sliding window's exact wait) is
/// the local engine's nanosecond ceiling of the same boundary.
fn us(d: Duration) -> u128 {
    d.as_nanos().div_ceil(1000)
}

fn view(d: &Decision) -> (bool, u32, u32, u128, Option<u128>, u128) {
    (
        d.is_allowed(),
        d.limit(),
        d.remaining(),
        us(d.reset_after()),
        d.retry_after().map(us),
        us(d.delay()),
    )
}

async fn compare(server: &RedisServer, case: usize, algorithm: Algorithm, quota: Quota, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let clock = ManualClock::new();
    // Start somewhere that is not a window boundary.
    let mut now_us = rng.u64(1_000_000..10_000_000);
    clock.set(Duration::from_micros(now_us));
    let local = RateLimiter::builder(algorithm, quota)
        .clock(clock.clone())
        .build()
        .expect("local");
    let remote = RedisRateLimiter::builder(algorithm, quota)
        .url(server.url())
        .prefix(format!("diff:{case}:{seed}"))
        .timeout(Duration::from_secs(5))
        .clock(clock.clone())
        .build()
        .await
        .expect("remote");
    let period_us = quota.period().as_micros() as u64;
    let capacity = local.burst();
    let mut allowed = 0;
    for step in 0..600 {
        // Mostly small steps (contention), sometimes a whole period or more (idle).
        let dt = match rng.u8(0..10) {
            0..=5 => rng.u64(0..period_us / 20),
            6..=8 => rng.u64(0..period_us),
            _ => rng.u64(0..3 * period_us),
        };
        // Sometimes a reading older than the last one (clocks of different instances,
        // TSC steps): both engines treat it as the state's time.
        if rng.u8(0..10) == 0 {
            now_us -= rng.u64(0..period_us / 5);
        } else {
            now_us += dt;
        }
        clock.set(Duration::from_micros(now_us));
        let n = match rng.u8(0..10) {
            0 => 0,
            1 => rng.u32(1..=capacity),
            _ => 1,
        };
        let want = local.check_n(n).expect("n <= capacity");
        let got = remote.check_n("k", n).await.expect("redis decision");
        assert_eq!(
            view(&got),
            view(&want),
            "{algorithm:?} seed {seed} step {step} cost {n}: redis {got:?} vs local {want:?}"
        );
        allowed += u32::from(want.is_allowed() && n > 0);
    }
    assert!(
        allowed > 20,
        "{algorithm:?}: schedule admitted too little to mean much"
    );
}

#[tokio::test]
async fn redis_agrees_with_the_local_engine() {
    let server = RedisServer::start();
    let cases = [
        // T = 100 ms, burst 4.
        (
            Algorithm::TokenBucket,
            Quota::new(10, Duration::from_secs(1)).with_burst(4),
        ),
        // T = 37 ms.
        (
            Algorithm::TokenBucket,
            Quota::new(3, Duration::from_millis(111)),
        ),
        (
            Algorithm::LeakyBucket,
            Quota::new(10, Duration::from_secs(1)).with_burst(6),
        ),
        (
            Algorithm::FixedWindow,
            Quota::new(5, Duration::from_millis(100)),
        ),
        (
            Algorithm::FixedWindow,
            Quota::new(40, Duration::from_millis(1_000)),
        ),
        (
            Algorithm::SlidingWindow,
            Quota::new(7, Duration::from_millis(300)),
        ),
        (
            Algorithm::SlidingWindow,
            Quota::new(30, Duration::from_micros(777_777)),
        ),
        (
            Algorithm::SlidingLog,
            Quota::new(5, Duration::from_millis(250)),
        ),
        (
            Algorithm::SlidingLog,
            Quota::new(20, Duration::from_millis(1_000)),
        ),
    ];
    for (case, (algorithm, quota)) in cases.into_iter().enumerate() {
        for seed in 1..=3 {
            compare(&server, case, algorithm, quota, seed).await;
        }
    }
}
