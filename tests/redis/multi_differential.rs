//! `tollgate::redis::check_all` against the local engine's `tollgate::check_all`,
//! decision for decision, on random schedules driven by one shared `ManualClock`: the
//! multi-limit script decides every mix of algorithms as the engine does, all or
//! nothing.

use crate::server::RedisServer;
use std::time::Duration;
use tollgate::redis::{check_all, RedisRateLimiter};
use tollgate::{Algorithm, Decision, Limit, ManualClock, Quota, RateLimiter};

/// Durations in whole microseconds, rounded up (the scripts compute in µs).
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

fn quota_for(algorithm: Algorithm, i: usize) -> Quota {
    let limit = [4, 7, 5][i % 3];
    let period = Duration::from_millis([200, 350, 500][i % 3]);
    match algorithm {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => {
            Quota::new(limit, period).with_burst(limit - 1)
        }
        _ => Quota::new(limit, period),
    }
}

async fn compare(server: &RedisServer, algorithms: &[Algorithm], seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let clock = ManualClock::new();
    let mut now_us = rng.u64(1_000_000..10_000_000);
    clock.set(Duration::from_micros(now_us));
    let mut local = Vec::new();
    let mut remote = Vec::new();
    for (i, &algorithm) in algorithms.iter().enumerate() {
        let quota = quota_for(algorithm, i);
        local.push(
            RateLimiter::builder(algorithm, quota)
                .clock(clock.clone())
                .build()
                .expect("local"),
        );
        remote.push(
            RedisRateLimiter::builder(algorithm, quota)
                .url(server.url())
                .prefix(format!("mdiff:{algorithms:?}:{seed}:{i}"))
                .clock(clock.clone())
                .timeout(Duration::from_secs(5))
                .build()
                .await
                .expect("remote"),
        );
    }
    let capacity = local.iter().map(|l| l.burst()).min().unwrap_or(1);
    let local_refs: Vec<&dyn Limit> = local.iter().map(|l| l as &dyn Limit).collect();
    let remote_refs: Vec<(&RedisRateLimiter, &str)> = remote.iter().map(|l| (l, "k")).collect();
    let (mut allowed, mut denied) = (0, 0);
    for step in 0..300 {
        now_us += match rng.u8(0..10) {
            0..=6 => rng.u64(0..20_000),
            7..=8 => rng.u64(0..300_000),
            _ => rng.u64(0..1_000_000),
        };
        clock.set(Duration::from_micros(now_us));
        let n = if rng.u8(0..8) == 0 {
            rng.u32(1..=capacity)
        } else {
            1
        };
        let want = tollgate::check_all(&local_refs, n).expect("n <= capacity");
        let got = check_all(&remote_refs, n).await.expect("redis decision");
        let got_views: Vec<_> = got.decisions().iter().map(view).collect();
        let want_views: Vec<_> = want.decisions().iter().map(view).collect();
        assert_eq!(
            got_views, want_views,
            "{algorithms:?} seed {seed} step {step} cost {n}: redis {got:?} vs local {want:?}"
        );
        if want.is_allowed() {
            allowed += 1;
        } else {
            denied += 1;
        }
    }
    assert!(
        allowed > 20 && denied > 20,
        "{algorithms:?}: {allowed} allowed, {denied} denied"
    );
}

#[tokio::test]
async fn redis_check_all_agrees_with_the_local_check_all() {
    let server = RedisServer::start();
    let all = Algorithm::ALL;
    for (i, &a) in all.iter().enumerate() {
        let b = all[(i + 1) % all.len()];
        let c = all[(i + 3) % all.len()];
        for seed in 1..=2 {
            compare(&server, &[a, b], seed).await;
            compare(&server, &[a, b, c], seed).await;
        }
    }
}
