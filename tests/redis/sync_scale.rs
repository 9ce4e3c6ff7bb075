//! A hybrid sync larger than one timeout's worth of Redis time still completes: it is
//! sent in chunks, each within the timeout, instead of one pipeline that times out
//! whole (and then again at every later sync, so that no count is ever shared).

use crate::server::RedisServer;
use std::time::Duration;
use tollgate::redis::HybridRateLimiter;
use tollgate::{Algorithm, Quota};

#[tokio::test]
async fn a_sync_larger_than_one_timeout_completes_in_chunks() {
    let server = RedisServer::start();
    // 40,000 keys are about 0.5 s of Redis time (12-16 µs each, measured by
    // `REDIS_BENCH=sync cargo bench --features redis --bench redis`): far past the
    // 250 ms timeout as one pipeline, a few tens of ms per 2,000-key chunk.
    let keys = 40_000;
    let l = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(1_000))
        .url(server.url())
        .prefix("chunked")
        .timeout(Duration::from_millis(250))
        .sync_interval(Duration::MAX)
        .max_keys(100_000)
        .build()
        .await
        .expect("build");
    let names: Vec<String> = (0..keys).map(|k| format!("key-{k}")).collect();
    let mut tracked = 0;
    for k in &names {
        tracked += usize::from(l.check(k).is_allowed());
    }
    let synced = l.sync().await.expect("a large sync completes");
    assert_eq!(synced, tracked);
    assert_eq!(l.stats().sync_errors, 0);
    // Every tracked key's count reached Redis: one hash per key and window.
    let mut conn = server.conn().await;
    let stored: u64 = tollgate::redis::redis::cmd("DBSIZE")
        .query_async(&mut conn)
        .await
        .expect("dbsize");
    assert_eq!(stored, tracked as u64);
}

/// Redis's count of `EVALSHA` calls so far, from `INFO commandstats`.
async fn evalsha_calls(server: &RedisServer) -> u64 {
    let mut conn = server.conn().await;
    let info: String = tollgate::redis::redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .expect("info");
    info.lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .and_then(|l| l.split([':', ',']).find_map(|f| f.strip_prefix("calls=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// One script call syncs up to 100 keys (the per-call overhead amortized): 250 keys
/// are 3 calls, not 250; the counts still arrive per key.
#[tokio::test]
async fn a_sync_batches_keys_into_few_script_calls() {
    let server = RedisServer::start();
    let l = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(1_000))
        .url(server.url())
        .prefix("batched")
        .sync_interval(Duration::MAX)
        .timeout(Duration::from_secs(2))
        .build()
        .await
        .expect("build");
    for k in 0..250 {
        assert!(l
            .check_n(&format!("key-{k}"), 3)
            .expect("fits")
            .is_allowed());
    }
    let before = evalsha_calls(&server).await;
    assert_eq!(l.sync().await.expect("sync"), 250);
    assert_eq!(evalsha_calls(&server).await - before, 3);
    // Each key's own count went to its own hash.
    let mut conn = server.conn().await;
    let keys: Vec<String> = tollgate::redis::redis::cmd("KEYS")
        .arg("batched:*")
        .query_async(&mut conn)
        .await
        .expect("keys");
    assert_eq!(keys.len(), 250);
    for key in keys.iter().take(10) {
        let fields: Vec<u64> = tollgate::redis::redis::cmd("HVALS")
            .arg(key)
            .query_async(&mut conn)
            .await
            .expect("hvals");
        assert_eq!(fields, [3], "{key}");
    }
}
