//! Peeks on the three-primary cluster of `cluster.rs` (issue 30): the decision script's
//! peek mode writes nothing on whichever node holds the key.

use super::Cluster;
use std::time::Duration;
use tollgate::redis::RedisRateLimiter;
use tollgate::{Algorithm, ManualClock, Quota};

/// Peeks on the cluster (issue 30): every algorithm, keys on every node; a peek of a
/// new key creates nothing, and a peek of a used key leaves its value and TTL as they
/// were and decides as the check that follows it.
#[tokio::test]
async fn a_peek_writes_nothing_on_a_cluster() {
    use tollgate::redis::redis;
    let cluster = Cluster::start();
    let mut conn = cluster.connection().await;
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(3_600));
    let base = cluster.prefix("pk");
    for algorithm in Algorithm::ALL {
        let l = RedisRateLimiter::builder(algorithm, Quota::per_minute(5))
            .connection(cluster.connection().await)
            .prefix(format!("{base}-{algorithm:?}"))
            .clock(clock.clone())
            .timeout(Duration::from_secs(2))
            .build()
            .await
            .expect("build on the cluster");
        for key in 0..20 {
            let key = format!("user-{key}");
            let name = l.redis_key(&key);
            assert!(l.peek_n(&key, 2).await.unwrap().is_allowed());
            let exists: i64 = redis::cmd("EXISTS")
                .arg(&name)
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(exists, 0, "{algorithm:?} {key}: a peek created the key");
            assert!(l.check_n(&key, 3).await.unwrap().is_allowed());
            let _: i64 = redis::cmd("PEXPIRE")
                .arg(&name)
                .arg(3_600_000_007i64)
                .query_async(&mut conn)
                .await
                .unwrap();
            let dump = |conn: &mut tollgate::redis::redis::cluster_async::ClusterConnection| {
                let (mut c, name) = (conn.clone(), name.clone());
                async move {
                    let d: Vec<u8> = redis::cmd("DUMP")
                        .arg(&name)
                        .query_async(&mut c)
                        .await
                        .unwrap();
                    let t: i64 = redis::cmd("PTTL")
                        .arg(&name)
                        .query_async(&mut c)
                        .await
                        .unwrap();
                    (d, t)
                }
            };
            let (before, _) = dump(&mut conn).await;
            let peeked = l.peek_n(&key, 3).await.unwrap();
            let (after, ttl) = dump(&mut conn).await;
            assert_eq!(before, after, "{algorithm:?} {key}: the peek wrote");
            assert!(
                ttl > 3_600_000_007 - 60_000,
                "{algorithm:?} {key}: TTL {ttl}"
            );
            assert!(!peeked.is_allowed(), "{algorithm:?} {key}");
            assert_eq!(
                peeked,
                l.check_n(&key, 3).await.unwrap(),
                "{algorithm:?} {key}"
            );
        }
    }
    let per_node = cluster.keys_per_node(&base);
    assert!(
        per_node.iter().all(|&n| n > 0),
        "keys on every node: {per_node:?}"
    );
}
