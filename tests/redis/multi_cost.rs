//! What an all-or-nothing check of two limits costs Redis against two separate checks:
//! one `EVALSHA` round trip instead of two, and its Redis time (printed; run with
//! `cargo test --release --features redis --test redis multi_cost -- --nocapture`).

use crate::server::RedisServer;
use std::time::{Duration, Instant};
use tollgate::redis::{check_all, redis, RedisRateLimiter};
use tollgate::{Algorithm, Quota};

/// `(calls, usec)` of EVALSHA since the last `CONFIG RESETSTAT`.
async fn evalsha_stats(conn: &mut redis::aio::MultiplexedConnection) -> (u64, u64) {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("info");
    let line = info
        .lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .unwrap_or("cmdstat_evalsha:calls=0,usec=0");
    let field = |name: &str| -> u64 {
        line.split([':', ','])
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("calls"), field("usec"))
}

async fn reset(conn: &mut redis::aio::MultiplexedConnection) {
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(conn)
        .await
        .expect("resetstat");
}

#[tokio::test]
async fn multi_cost() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let build = |algorithm, prefix: &'static str| {
        RedisRateLimiter::builder(algorithm, Quota::per_minute(100_000))
            .url(server.url())
            .prefix(prefix)
            .timeout(Duration::from_secs(5))
            .build()
    };
    let a = build(Algorithm::TokenBucket, "cost:a")
        .await
        .expect("build");
    let b = build(Algorithm::SlidingWindow, "cost:b")
        .await
        .expect("build");
    let keys: Vec<String> = (0..100).map(|k| format!("k{k}")).collect();
    // Load the scripts (a first EVALSHA may meet NOSCRIPT).
    let _ = a.check("warm").await.unwrap();
    let _ = b.check("warm").await.unwrap();
    let _ = check_all(&[(&a, "warm2"), (&b, "warm2")], 1).await.unwrap();
    const N: usize = 2_000;

    reset(&mut conn).await;
    let t = Instant::now();
    for i in 0..N {
        let k = &keys[i % keys.len()];
        let (da, db) = (a.check(k).await.unwrap(), b.check(k).await.unwrap());
        assert!(da.is_allowed() && db.is_allowed());
    }
    let separate_wall = t.elapsed();
    let (separate_calls, separate_us) = evalsha_stats(&mut conn).await;

    reset(&mut conn).await;
    let t = Instant::now();
    for i in 0..N {
        let k = &keys[i % keys.len()];
        assert!(check_all(&[(&a, k), (&b, k)], 1)
            .await
            .unwrap()
            .is_allowed());
    }
    let multi_wall = t.elapsed();
    let (multi_calls, multi_us) = evalsha_stats(&mut conn).await;

    // One round trip per decision of both limits, against two.
    assert_eq!(separate_calls, 2 * N as u64);
    assert_eq!(multi_calls, N as u64);
    println!(
        "two limits (TokenBucket + SlidingWindow), {N} decisions, sequential, one connection each:\n  \
         separate checks: {separate_calls} EVALSHA, {:.1} µs of Redis time per decision, {:.1} µs wall per decision\n  \
         check_all:       {multi_calls} EVALSHA, {:.1} µs of Redis time per decision, {:.1} µs wall per decision",
        separate_us as f64 / N as f64,
        separate_wall.as_micros() as f64 / N as f64,
        multi_us as f64 / N as f64,
        multi_wall.as_micros() as f64 / N as f64,
    );
}
