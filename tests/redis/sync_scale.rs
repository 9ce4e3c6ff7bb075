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
