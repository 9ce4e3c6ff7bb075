//! Several instances, separate connections, concurrent tasks: one exact limit.

use crate::server::RedisServer;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tollgate::redis::{redis, Error, RedisRateLimiter};
use tollgate::{Algorithm, ManualClock, Quota};

async fn instances(
    server: &RedisServer,
    algorithm: Algorithm,
    quota: Quota,
    prefix: &str,
    clock: Option<&ManualClock>,
    n: usize,
) -> Vec<RedisRateLimiter> {
    let mut v = Vec::new();
    for i in 0..n {
        let b = RedisRateLimiter::builder(algorithm, quota);
        // One instance on a caller-made connection, the others on their own URL.
        let b = if i == 1 {
            b.connection(server.conn().await)
        } else {
            b.url(server.url())
        };
        let mut b = b.prefix(prefix).timeout(Duration::from_secs(5));
        if let Some(c) = clock {
            b = b.clock(c.clone());
        }
        v.push(b.build().await.expect("build"));
    }
    v
}

async fn hammer(limiters: &[RedisRateLimiter], tasks_per: usize, per_task: usize) -> u32 {
    let admitted = Arc::new(AtomicU32::new(0));
    let mut handles = Vec::new();
    for l in limiters {
        for _ in 0..tasks_per {
            let l = l.clone();
            let admitted = Arc::clone(&admitted);
            handles.push(tokio::spawn(async move {
                for _ in 0..per_task {
                    if l.check("shared").await.expect("decision").is_allowed() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
    }
    for h in handles {
        h.await.expect("task");
    }
    admitted.load(Ordering::Relaxed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn instances_share_one_limit_exactly() {
    let server = RedisServer::start();
    // A frozen shared clock: nothing refills, so exactly the capacity is admitted.
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(1_000));
    for algorithm in Algorithm::ALL {
        let quota = Quota::per_hour(50);
        let prefix = format!("exact:{algorithm:?}");
        let limiters = instances(&server, algorithm, quota, &prefix, Some(&clock), 4).await;
        let admitted = hammer(&limiters, 8, 10).await; // 320 attempts
        assert_eq!(admitted, 50, "{algorithm:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn instances_share_one_limit_with_redis_time() {
    let server = RedisServer::start();
    // 100 per hour refills one request every 36 s: at most one more than the burst.
    let limiters = instances(
        &server,
        Algorithm::TokenBucket,
        Quota::per_hour(100),
        "exact:time",
        None,
        4,
    )
    .await;
    let admitted = hammer(&limiters, 8, 20).await; // 640 attempts
    assert!((100..=101).contains(&admitted), "admitted {admitted}");
    let stats = limiters[0].stats();
    assert_eq!(stats.errors, 0);
    assert!(stats.decisions >= 160);
}

#[tokio::test]
async fn keys_carry_ttls_and_expire() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    for algorithm in Algorithm::ALL {
        let prefix = format!("ttl:{algorithm:?}");
        let quota = Quota::new(5, Duration::from_millis(200));
        let l = &instances(&server, algorithm, quota, &prefix, None, 1).await[0];
        assert!(l.check("k").await.expect("decision").is_allowed());
        let key = l.redis_key("k");
        assert_eq!(key, format!("{prefix}:{{k}}"));
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .expect("pttl");
        // The time until idle: one interval (40 ms) for the buckets, at most one window
        // (two for the sliding window) for the windows, one period for the log.
        assert!(ttl > 0 && ttl <= 400, "{algorithm:?}: ttl {ttl}");
        // A denial writes nothing.
        for _ in 0..10 {
            let _ = l.check("k").await.expect("decision");
        }
        tokio::time::sleep(Duration::from_millis(ttl as u64 + 600)).await;
        let exists: i64 = redis::cmd("EXISTS")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .expect("exists");
        assert_eq!(exists, 0, "{algorithm:?}: key still there");
    }
}

#[tokio::test]
async fn check_n_past_capacity_is_an_error_and_peeks_change_nothing() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    let l = &instances(
        &server,
        Algorithm::TokenBucket,
        Quota::per_second(10).with_burst(3),
        "capacity",
        Some(&clock),
        1,
    )
    .await[0];
    assert!(matches!(
        l.check_n("k", 4).await,
        Err(Error::InsufficientCapacity(_))
    ));
    let peek = l.check_n("k", 0).await.expect("peek");
    assert_eq!(peek.remaining(), 3);
    assert_eq!(l.check_n("k", 3).await.expect("d").remaining(), 0);
    let d = l.check("k").await.expect("d");
    assert!(!d.is_allowed());
    assert_eq!(d.retry_after(), Some(Duration::from_millis(100)));
}

#[tokio::test]
async fn unrepresentable_quotas_are_refused_at_build() {
    let server = RedisServer::start();
    let build = |algorithm, quota| {
        RedisRateLimiter::builder(algorithm, quota)
            .url(server.url())
            .build()
    };
    let sub_us = Quota::new(1, Duration::from_nanos(1500));
    assert!(matches!(
        build(Algorithm::FixedWindow, sub_us).await,
        Err(Error::Unrepresentable(_))
    ));
    let too_fast = Quota::new(2_000_000, Duration::from_secs(1));
    assert!(matches!(
        build(Algorithm::TokenBucket, too_fast).await,
        Err(Error::Unrepresentable(_))
    ));
    let huge = Quota::new(u32::MAX, Duration::from_secs(86_400 * 365));
    assert!(matches!(
        build(Algorithm::SlidingWindow, huge).await,
        Err(Error::Unrepresentable(_) | Error::Config(_))
    ));
    assert!(matches!(
        build(Algorithm::TokenBucket, Quota::per_second(0)).await,
        Err(Error::Config(_))
    ));
    let no_target = RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1))
        .build()
        .await;
    assert!(matches!(no_target, Err(Error::NoTarget)));
}

#[tokio::test]
async fn caller_clock_past_the_exact_range_is_an_error_not_a_fallback() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    let l = RedisRateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(5))
        .url(server.url())
        .clock(clock.clone())
        .fallback(tollgate::redis::Fallback::Allow)
        .build()
        .await
        .expect("build");
    assert!(l.check("k").await.expect("in range").is_allowed());
    clock.set(Duration::from_micros((1 << 52) + 1));
    let e = l.check("k").await.expect_err("past 2^52 µs");
    assert!(matches!(e, Error::Unrepresentable(_)), "{e}");
    assert_eq!(l.stats().fallbacks, 0);
}

/// Issue 37 item 1 on the exact mode with a caller clock: a request at a reading in
/// window 1, then the clock set back into window 0: the script decides the older
/// reading at the state's time, in window 1 with its count (4 of 5 left, a check
/// admitted), on `check_n(0)`, `peek`, `check` and `check_all`, with waits measured from
/// the reading. (It answered as if a booking were pending: nothing left, denied.)
#[tokio::test]
async fn exact_fixed_window_read_behind_decides_at_the_states_time() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    let l = &instances(
        &server,
        Algorithm::FixedWindow,
        Quota::new(5, Duration::from_millis(100)),
        "behind",
        Some(&clock),
        1,
    )
    .await[0];
    clock.set(Duration::from_millis(150));
    assert!(l.check("k").await.unwrap().is_allowed());
    clock.set(Duration::from_millis(50));
    let d = l.check_n("k", 0).await.unwrap();
    assert!(d.is_allowed(), "{d:?}");
    assert_eq!(d.remaining(), 4, "{d:?}");
    assert_eq!(d.reset_after(), Duration::from_millis(150), "{d:?}");
    let p = l.peek("k").await.unwrap();
    assert!(p.is_allowed(), "{p:?}");
    assert_eq!(p.remaining(), 3, "{p:?}");
    let d = l.check("k").await.unwrap();
    assert!(d.is_allowed(), "{d:?}");
    assert_eq!(d.remaining(), 3, "{d:?}");
    let m = tollgate::redis::check_all(&[(l, "k")], 3).await.unwrap();
    assert!(m.is_allowed(), "{m:?}");
    // Window 1 is full: denied until it ends, measured from the reading.
    let d = l.check("k").await.unwrap();
    assert!(!d.is_allowed(), "{d:?}");
    assert_eq!(d.retry_after(), Some(Duration::from_millis(150)));
    clock.set(Duration::from_millis(200));
    assert_eq!(l.check_n("k", 0).await.unwrap().remaining(), 5);
}

/// Issue 37 item 1 for the sliding window's script: a state a newer reading wrote (the
/// Redis mode books nothing ahead) decides an older reading at the state's time, the
/// start of its window, where the previous window weighs the most: 2 in window 0 and 1
/// in window 1 leave 2 of 5 when the caller's clock steps back into window 0.
#[tokio::test]
async fn exact_sliding_window_read_behind_decides_at_the_states_time() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    let l = &instances(
        &server,
        Algorithm::SlidingWindow,
        Quota::new(5, Duration::from_millis(100)),
        "behind-sliding",
        Some(&clock),
        1,
    )
    .await[0];
    clock.set(Duration::from_millis(50));
    assert!(l.check_n("k", 2).await.unwrap().is_allowed());
    clock.set(Duration::from_millis(150));
    assert!(l.check("k").await.unwrap().is_allowed());
    clock.set(Duration::from_millis(50));
    let d = l.check_n("k", 0).await.unwrap();
    assert!(d.is_allowed(), "{d:?}");
    assert_eq!(d.remaining(), 2, "{d:?}");
    // Window 1's count weighs until window 2 ends, 250 ms after the reading.
    assert_eq!(d.reset_after(), Duration::from_millis(250), "{d:?}");
    let p = l.peek("k").await.unwrap();
    assert!(p.is_allowed(), "{p:?}");
    assert_eq!(p.remaining(), 1, "{p:?}");
    let d = l.check("k").await.unwrap();
    assert!(d.is_allowed(), "{d:?}");
    assert_eq!(d.remaining(), 1, "{d:?}");
    let m = tollgate::redis::check_all(&[(l, "k")], 1).await.unwrap();
    assert!(m.is_allowed(), "{m:?}");
    // Full at the state's time: denied until window 0's 2 weigh half, measured from
    // the reading.
    let d = l.check("k").await.unwrap();
    assert!(!d.is_allowed(), "{d:?}");
    assert_eq!(d.retry_after(), Some(Duration::from_millis(100)));
    clock.set(Duration::from_millis(300));
    assert_eq!(l.check_n("k", 0).await.unwrap().remaining(), 5);
}

/// Issue 37 for the sliding log's give-back script (as the local log's): this mode books
/// nothing ahead, so an entry later than the caller's reading is a reading behind the
/// newest entry (the caller's clock stepped back), and `give_back` counts what is held
/// at the newest entry's time. (It gave nothing, taking the entry for a pending booking.)
#[tokio::test]
async fn exact_sliding_log_given_back_behind_its_newest_entry_gives_what_it_holds() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    let l = &instances(
        &server,
        Algorithm::SlidingLog,
        Quota::new(5, Duration::from_millis(100)),
        "behind-log",
        Some(&clock),
        1,
    )
    .await[0];
    clock.set(Duration::from_millis(50));
    assert!(l.check_n("k", 2).await.unwrap().is_allowed());
    clock.set(Duration::from_millis(60));
    assert!(l.check("k").await.unwrap().is_allowed());
    clock.set(Duration::from_millis(40));
    assert_eq!(l.give_back("k", 2).await.unwrap(), 2);
    let d = l.check_n("k", 0).await.unwrap();
    assert!(d.is_allowed(), "{d:?}");
    assert_eq!(d.remaining(), 4, "{d:?}");
    // Read behind a newest entry it holds alone.
    clock.set(Duration::from_millis(160));
    assert!(l.check("k").await.unwrap().is_allowed());
    clock.set(Duration::from_millis(100));
    assert_eq!(l.give_back("k", 5).await.unwrap(), 1);
    assert_eq!(l.check_n("k", 0).await.unwrap().remaining(), 5);
}
