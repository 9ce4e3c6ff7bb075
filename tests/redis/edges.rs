//! Edges of the exact mode found in review (issues 10 and 13): a lowered limit fails
//! closed, billing-period fixed windows build, the bucket interval in whole µs is
//! rounded up, and the local fallback runs on the limiter's own clock.

use crate::server::RedisServer;
use std::time::Duration;
use tollgate::redis::{Fallback, RedisRateLimiter};
use tollgate::{Algorithm, ManualClock, Quota};

async fn build(
    server: &RedisServer,
    algorithm: Algorithm,
    quota: Quota,
    prefix: &str,
    clock: &ManualClock,
    fallback: Fallback,
) -> RedisRateLimiter {
    RedisRateLimiter::builder(algorithm, quota)
        .url(server.url())
        .prefix(prefix)
        .clock(clock.clone())
        .timeout(Duration::from_secs(2))
        .fallback(fallback)
        .build()
        .await
        .expect("build")
}

/// A rolling deploy lowers 10 per minute to 5 under the same prefix while a key holds 10:
/// the key is denied with nothing remaining. It used to be a `BadReply` (a negative
/// remaining count), which `Fallback::Allow` turned into an admission.
#[tokio::test]
async fn lowering_a_limit_fails_closed() {
    let server = RedisServer::start();
    for algorithm in [Algorithm::FixedWindow, Algorithm::SlidingLog] {
        let clock = ManualClock::new();
        let prefix = format!("lowered-{algorithm:?}");
        let old = build(
            &server,
            algorithm,
            Quota::per_minute(10),
            &prefix,
            &clock,
            Fallback::Error,
        )
        .await;
        for _ in 0..10 {
            assert!(old.check("k").await.unwrap().is_allowed());
        }
        let new = build(
            &server,
            algorithm,
            Quota::per_minute(5),
            &prefix,
            &clock,
            Fallback::Allow,
        )
        .await;
        for cost in [1, 0] {
            let d = new
                .check_n("k", cost)
                .await
                .expect("a decision, not an error");
            assert_eq!(d.remaining(), 0, "{algorithm:?}");
            if cost == 1 {
                assert!(!d.is_allowed(), "{algorithm:?}");
            }
        }
        assert_eq!(new.stats().fallbacks, 0, "{algorithm:?}");
        assert_eq!(new.stats().errors, 0, "{algorithm:?}");
    }
}

/// Billing periods: the fixed window's script never forms `limit × period`, so quotas
/// past the 2^50 µs product build and count.
#[tokio::test]
async fn billing_period_fixed_windows_build() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    let day = Duration::from_secs(86_400);
    for (quota, name) in [
        (Quota::new(20_000, day), "20k-per-day"),
        (Quota::new(1_000, 30 * day), "1k-per-30-days"),
        (Quota::new(u32::MAX, 365 * day), "max-per-year"),
    ] {
        let l = build(
            &server,
            Algorithm::FixedWindow,
            quota,
            name,
            &clock,
            Fallback::Error,
        )
        .await;
        assert!(l.check_n("acct", 3).await.unwrap().is_allowed());
        assert_eq!(
            l.check_n("acct", 0).await.unwrap().remaining(),
            quota.limit() - 3
        );
    }
}

/// 2 per 3 µs: an interval of 1.5 µs. Rounded down to 1 µs, requests every µs were all
/// admitted (3,000 in 3 ms against a quota of 2,000); rounded up to 2 µs, never more
/// than `burst + elapsed·limit/period`.
#[tokio::test]
async fn bucket_intervals_in_whole_microseconds_are_rounded_up() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    let quota = Quota::new(2, Duration::from_micros(3));
    let l = build(
        &server,
        Algorithm::TokenBucket,
        quota,
        "rounding",
        &clock,
        Fallback::Error,
    )
    .await;
    let mut admitted = 0u64;
    for us in 0..3_000u64 {
        clock.set(Duration::from_micros(us));
        admitted += u64::from(l.check("k").await.unwrap().is_allowed());
    }
    assert!(admitted <= 2 + 3_000 * 2 / 3, "{admitted}");
    assert!(admitted >= 1_500, "{admitted}");
}

/// While Redis is down, `Fallback::Local` decides on the clock given to the builder:
/// advancing a `ManualClock` refills the local bucket, as it would the Redis one.
#[tokio::test]
async fn the_local_fallback_runs_on_the_limiters_clock() {
    let mut server = RedisServer::start();
    let clock = ManualClock::new();
    let l = build(
        &server,
        Algorithm::TokenBucket,
        Quota::per_hour(100),
        "local-clock",
        &clock,
        Fallback::Local(Quota::per_hour(1)),
    )
    .await;
    server.stop();
    assert!(l.check("k").await.unwrap().is_allowed());
    assert!(!l.check("k").await.unwrap().is_allowed());
    clock.advance(Duration::from_secs(3_600));
    assert!(
        l.check("k").await.unwrap().is_allowed(),
        "the fallback ignored the clock"
    );
    assert!(l.stats().fallbacks >= 3);
}

/// Issue 10.4: with a fallback, `build()` succeeds while Redis is down at start; the
/// fallback answers until Redis is reachable, then Redis decides.
#[tokio::test]
async fn with_a_fallback_build_succeeds_while_redis_is_down() {
    let mut server = RedisServer::start();
    server.stop();
    let l = RedisRateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(100))
        .url(server.url())
        .prefix("lazy")
        .timeout(Duration::from_millis(200))
        .fallback(Fallback::Local(Quota::per_hour(1)))
        .build()
        .await
        .expect("a fallback makes Redis optional at start");
    assert!(l.check("k").await.unwrap().is_allowed());
    assert!(!l.check("k").await.unwrap().is_allowed());
    assert_eq!(l.stats().fallbacks, 2);
    server.restart();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let d = l.check("k").await.unwrap();
        if l.stats().decisions > 0 {
            // Redis decided: a fresh key there, 100 per hour.
            assert!(d.is_allowed());
            assert_eq!(d.remaining(), 99);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Redis never took over"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue 10.4: without a fallback, a refused connection at build is reported as a
/// refused connection, not as a timeout.
#[tokio::test]
async fn a_refused_connection_is_not_a_timeout() {
    let mut server = RedisServer::start();
    server.stop();
    // The default timeout (100 ms): reconnect retries used to outlast it.
    let err = RedisRateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(100))
        .url(server.url())
        .build()
        .await
        .expect_err("nothing listens");
    assert!(
        err.is_connection_refused(),
        "expected a refused connection, got {err}"
    );
    assert!(err.is_redis_unavailable());
}

/// Issue 10.3: another algorithm's state under the same prefix, or a foreign value in
/// a key, is a typed error (`ForeignState`), never a fallback admission.
#[tokio::test]
async fn foreign_state_is_a_typed_error_not_a_fallback() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    let fixed = build(
        &server,
        Algorithm::FixedWindow,
        Quota::per_minute(10),
        "mixed",
        &clock,
        Fallback::Error,
    )
    .await;
    assert!(fixed.check("k").await.unwrap().is_allowed());
    let bucket = build(
        &server,
        Algorithm::TokenBucket,
        Quota::per_minute(10),
        "mixed",
        &clock,
        Fallback::Allow,
    )
    .await;
    let e = bucket
        .check("k")
        .await
        .expect_err("a hash where a TAT should be");
    assert!(matches!(e, tollgate::redis::Error::ForeignState(_)), "{e}");
    assert!(!e.is_redis_unavailable());
    // A value something else wrote.
    let mut conn = server.conn().await;
    let _: () = tollgate::redis::redis::cmd("SET")
        .arg(bucket.redis_key("other"))
        .arg("not a number")
        .query_async(&mut conn)
        .await
        .unwrap();
    let e = bucket.check("other").await.expect_err("a foreign value");
    assert!(matches!(e, tollgate::redis::Error::ForeignState(_)), "{e}");
    assert_eq!(bucket.stats().fallbacks, 0);
}
