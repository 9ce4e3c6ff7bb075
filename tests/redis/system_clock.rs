//! `SystemClock` as the caller-side clock of the Redis limiters: it shares its zero
//! (the UNIX epoch) with Redis `TIME` and with every other process, so instances on
//! either time share one state.

use crate::server::RedisServer;
use std::time::Duration;
use tollgate::redis::{HybridRateLimiter, RedisRateLimiter};
use tollgate::{Algorithm, Clock, Quota, SystemClock};

fn current_hour() -> u64 {
    SystemClock::new().now() / 3_600_000_000_000
}

async fn exact(
    server: &RedisServer,
    algorithm: Algorithm,
    prefix: &str,
    wall: bool,
) -> RedisRateLimiter {
    let b = RedisRateLimiter::builder(algorithm, Quota::per_hour(10))
        .url(server.url())
        .prefix(prefix)
        .timeout(Duration::from_secs(2));
    let b = if wall { b.clock(SystemClock::new()) } else { b };
    b.build().await.expect("build")
}

/// One instance decides at its `SystemClock`, another at Redis `TIME`, on one prefix:
/// together they admit the quota once. (On a `QuantaClock`, whose zero is the process's
/// start, the second instance would find a bucket "drained" in 1970 and admit 10 more.)
#[tokio::test]
async fn system_clock_and_redis_time_share_one_state() {
    let server = RedisServer::start();
    for algorithm in Algorithm::ALL {
        let prefix = format!("wall:{algorithm:?}");
        let on_wall = exact(&server, algorithm, &prefix, true).await;
        let on_redis = exact(&server, algorithm, &prefix, false).await;
        let hour = current_hour();
        let mut admitted = 0;
        for i in 0..30 {
            let l = if i % 2 == 0 { &on_wall } else { &on_redis };
            if l.check("k").await.expect("decision").is_allowed() {
                admitted += 1;
            }
        }
        // 10 per hour; a bucket refills one every 6 minutes. (A fixed window that rolled
        // over an hour boundary during the loop is not checked.)
        if algorithm != Algorithm::FixedWindow || current_hour() == hour {
            assert!(
                (10..=11).contains(&admitted),
                "{algorithm:?}: admitted {admitted}"
            );
        }
        // A denial's wait is sane on both clocks: within two periods, never the decades
        // between 1970 and a process's start. (Two, not one: a full sliding window
        // counter read t into its window waits P - t for the window to end, then P/10
        // for its 10 to weigh 9 — up to 1.1 P in the first minutes of an hour.)
        for l in [&on_wall, &on_redis] {
            let d = l.check("k").await.expect("decision");
            if let Some(wait) = d.retry_after() {
                assert!(
                    wait <= Duration::from_secs(2 * 3600),
                    "{algorithm:?}: wait {wait:?}"
                );
            }
        }
    }
}

/// The exact mode's fixed windows on `SystemClock` are Redis's: the window index
/// stored in Redis is the UNIX time divided by the period.
#[tokio::test]
async fn system_clock_windows_are_aligned_to_the_epoch() {
    let server = RedisServer::start();
    let l = exact(&server, Algorithm::FixedWindow, "wall-k", true).await;
    assert!(l.check("k").await.expect("decision").is_allowed());
    let mut conn = server.conn().await;
    let k: u64 = tollgate::redis::redis::cmd("HGET")
        .arg(l.redis_key("k"))
        .arg("k")
        .query_async(&mut conn)
        .await
        .expect("hget");
    let hours_since_epoch = current_hour();
    assert!(
        hours_since_epoch.abs_diff(k) <= 1,
        "window {k} vs {hours_since_epoch}"
    );
}

/// The hybrid mode accepts it too, and its windows match the system-time default.
#[tokio::test]
async fn hybrid_runs_on_system_clock() {
    let server = RedisServer::start();
    let build = |wall: bool| {
        let b = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(10))
            .url(server.url())
            .prefix("wall-hybrid")
            .sync_interval(Duration::MAX);
        let b = if wall { b.clock(SystemClock::new()) } else { b };
        b.build()
    };
    let hour = current_hour();
    let a = build(true).await.expect("build");
    let b = build(false).await.expect("build");
    for _ in 0..6 {
        assert!(a.check("k").is_allowed());
    }
    a.sync().await.expect("sync");
    b.sync().await.expect("sync"); // learns nothing yet: b had no key
    let mut b_admitted = 0;
    for _ in 0..10 {
        if b.check("k").is_allowed() {
            b_admitted += 1;
        }
        b.sync().await.expect("sync");
    }
    // b admits one before its first sync reads a's 6 in the same window, then 3 more
    // (not checked if the hour rolled over meanwhile).
    if current_hour() == hour {
        assert_eq!(b_admitted, 4);
    }
}
