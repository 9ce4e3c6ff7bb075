//! `tollgate::redis::check_all` against a real redis-server: all or nothing in one
//! script, for every mix of algorithms, under concurrency, with typed refusals and the
//! fallback rule.

use crate::server::RedisServer;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tollgate::redis::{check_all, redis, Error, Fallback, RedisRateLimiter};
use tollgate::{Algorithm, ManualClock, Quota};

async fn limiter(
    server: &RedisServer,
    algorithm: Algorithm,
    quota: Quota,
    prefix: &str,
    clock: &ManualClock,
) -> RedisRateLimiter {
    RedisRateLimiter::builder(algorithm, quota)
        .url(server.url())
        .prefix(prefix)
        .clock(clock.clone())
        .timeout(Duration::from_secs(5))
        .build()
        .await
        .expect("build")
}

/// The serialized value of a Redis key (None when absent).
async fn dump(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("DUMP")
        .arg(key)
        .query_async(conn)
        .await
        .expect("dump")
}

/// Every pair of algorithms: the second limit (3 per hour) denies the fourth request;
/// that call leaves the first limit's Redis key byte for byte as it was, and the first
/// limit has given exactly three.
#[tokio::test]
async fn a_denial_by_any_limit_consumes_nothing_from_the_others() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let clock = ManualClock::new();
    clock.set(Duration::from_secs(1_000));
    for a in Algorithm::ALL {
        for b in Algorithm::ALL {
            let wide = limiter(
                &server,
                a,
                Quota::per_hour(5),
                &format!("m:{a:?}:{b:?}:a"),
                &clock,
            )
            .await;
            let narrow = limiter(
                &server,
                b,
                Quota::per_hour(3),
                &format!("m:{a:?}:{b:?}:b"),
                &clock,
            )
            .await;
            let limits = [(&wide, "k"), (&narrow, "k")];
            for i in 0..3 {
                let d = check_all(&limits, 1).await.expect("decision");
                assert!(d.is_allowed(), "{a:?}+{b:?} request {i}");
                assert_eq!(d.decisions().len(), 2);
                assert_eq!(d.decisions()[1].remaining(), 2 - i);
            }
            let before = dump(&mut conn, &wide.redis_key("k")).await;
            assert!(before.is_some());
            for _ in 0..3 {
                let d = check_all(&limits, 1).await.expect("decision");
                assert!(!d.is_allowed(), "{a:?}+{b:?}");
                assert_eq!(d.denied().collect::<Vec<_>>(), [1], "{a:?}+{b:?}");
                assert!(d.retry_after().is_some_and(|w| w > Duration::ZERO));
                // The first limit would have admitted it, and reports so.
                assert!(d.decisions()[0].is_allowed());
            }
            assert_eq!(
                dump(&mut conn, &wide.redis_key("k")).await,
                before,
                "{a:?}+{b:?}"
            );
            // The first limit gave exactly the three admitted calls: two left.
            let peek = wide.check_n("k", 0).await.expect("peek");
            assert_eq!(peek.remaining(), 2, "{a:?}+{b:?}");
            // The denial in the first position: nothing from the second either.
            let d = check_all(&[(&narrow, "k2"), (&wide, "k")], 3)
                .await
                .expect("decision");
            assert!(!d.is_allowed());
            assert_eq!(d.denied().collect::<Vec<_>>(), [1], "{a:?}+{b:?}");
            assert_eq!(narrow.check_n("k2", 0).await.unwrap().remaining(), 3);
        }
    }
}

/// Many tasks on two instances (separate connections, same URL) check a per-user and a
/// global limit together: no limit is ever exceeded, and every limit consumed exactly
/// what was admitted (nothing partial under contention).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_multi_checks_never_exceed_any_limit() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    clock.set(Duration::from_secs(5_000));
    let mut instances = Vec::new();
    for _ in 0..2 {
        let global = limiter(
            &server,
            Algorithm::TokenBucket,
            Quota::per_hour(30),
            "c:global",
            &clock,
        )
        .await;
        let user = limiter(
            &server,
            Algorithm::SlidingLog,
            Quota::per_hour(9),
            "c:user",
            &clock,
        )
        .await;
        let user_fw = limiter(
            &server,
            Algorithm::FixedWindow,
            Quota::per_hour(10),
            "c:userfw",
            &clock,
        )
        .await;
        instances.push(Arc::new((global, user, user_fw)));
    }
    let users = ["u0", "u1", "u2", "u3", "u4"];
    let admitted: Arc<Vec<AtomicU32>> = Arc::new(users.iter().map(|_| AtomicU32::new(0)).collect());
    let mut tasks = Vec::new();
    for t in 0..16 {
        let inst = Arc::clone(&instances[t % 2]);
        let admitted = Arc::clone(&admitted);
        tasks.push(tokio::spawn(async move {
            for i in 0..12 {
                let u = (t + i) % users.len();
                let (global, user, user_fw) = &*inst;
                let d = check_all(&[(user, users[u]), (global, "all"), (user_fw, users[u])], 1)
                    .await
                    .expect("decision");
                if d.is_allowed() {
                    admitted[u].fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    let per_user: Vec<u32> = admitted.iter().map(|a| a.load(Ordering::Relaxed)).collect();
    let total: u32 = per_user.iter().sum();
    assert_eq!(total, 30, "the global limit binds: {per_user:?}");
    let (global, user, user_fw) = &*instances[0];
    assert_eq!(global.check_n("all", 0).await.unwrap().remaining(), 0);
    for (u, &n) in users.iter().zip(&per_user) {
        assert!(n <= 9, "{u}: {n}");
        // Each user's limits consumed exactly that user's admissions.
        assert_eq!(user.check_n(u, 0).await.unwrap().remaining(), 9 - n, "{u}");
        assert_eq!(
            user_fw.check_n(u, 0).await.unwrap().remaining(),
            10 - n,
            "{u}"
        );
    }
}

/// Refusals, before anything is sent: another deployment, a key given twice, a cost
/// past some capacity. Limiters on one URL, or built with `connection_of`, are one
/// deployment.
#[tokio::test]
async fn mixed_deployments_and_duplicate_keys_are_refused() {
    let server = RedisServer::start();
    let other = RedisServer::start();
    let clock = ManualClock::new();
    let q = Quota::per_minute(10);
    let a = limiter(&server, Algorithm::TokenBucket, q, "d:a", &clock).await;
    let b = limiter(&server, Algorithm::FixedWindow, q, "d:b", &clock).await;
    let elsewhere = limiter(&other, Algorithm::FixedWindow, q, "d:c", &clock).await;
    let own_conn = RedisRateLimiter::builder(Algorithm::SlidingLog, q)
        .connection(server.conn().await)
        .prefix("d:own")
        .build()
        .await
        .expect("build");
    let shared = RedisRateLimiter::builder(Algorithm::SlidingWindow, q)
        .connection_of(&own_conn)
        .prefix("d:shared")
        .clock(clock.clone())
        .build()
        .await
        .expect("build");
    assert!(check_all(&[(&a, "k"), (&b, "k")], 1)
        .await
        .unwrap()
        .is_allowed());
    assert!(check_all(&[(&own_conn, "k"), (&shared, "k")], 1)
        .await
        .unwrap()
        .is_allowed());
    for (limits, index) in [
        (vec![(&a, "k"), (&elsewhere, "k")], 1),
        (vec![(&a, "k"), (&b, "k"), (&own_conn, "k")], 2),
        (vec![(&shared, "k"), (&a, "k")], 1),
    ] {
        match check_all(&limits, 1).await {
            Err(e @ Error::MixedDeployments { .. }) => {
                assert!(matches!(e, Error::MixedDeployments { index: i, .. } if i == index));
                assert!(!e.is_redis_unavailable());
            }
            other => panic!("expected MixedDeployments, got {other:?}"),
        }
    }
    let dup = check_all(&[(&a, "k"), (&b, "x"), (&a, "k")], 1).await;
    assert!(
        matches!(&dup, Err(Error::DuplicateKey(k)) if k == "d:a:{k}"),
        "{dup:?}"
    );
    let too_big = check_all(&[(&a, "k"), (&b, "k")], 11).await;
    assert!(matches!(too_big, Err(Error::InsufficientCapacity(_))));
    // Nothing of the refused calls was counted: `a` gave one, `elsewhere` none.
    assert_eq!(a.check_n("k", 0).await.unwrap().remaining(), 9);
    assert_eq!(elsewhere.check_n("k", 0).await.unwrap().remaining(), 10);
    assert_eq!(check_all::<str>(&[], 1).await.unwrap().decisions().len(), 0);
}

/// Redis down: with a fallback on every limiter, the fallbacks decide, all or nothing
/// (local tables consumed only when every limit admits); with `Fallback::Error` on any,
/// the error.
#[tokio::test]
async fn fallbacks_decide_all_or_nothing_when_redis_is_down() {
    let mut server = RedisServer::start();
    let clock = ManualClock::new();
    let build = |quota: Quota, prefix: &'static str, fallback: Fallback| {
        RedisRateLimiter::builder(Algorithm::FixedWindow, quota)
            .url(server.url())
            .prefix(prefix)
            .clock(clock.clone())
            .timeout(Duration::from_millis(200))
            .fallback(fallback)
            .build()
    };
    let wide = build(
        Quota::per_hour(100),
        "f:w",
        Fallback::Local(Quota::per_hour(5)),
    )
    .await
    .unwrap();
    let narrow = build(
        Quota::per_hour(100),
        "f:n",
        Fallback::Local(Quota::per_hour(1)),
    )
    .await
    .unwrap();
    let strict = build(Quota::per_hour(100), "f:s", Fallback::Error)
        .await
        .unwrap();
    let closed = build(Quota::per_hour(100), "f:c", Fallback::Deny)
        .await
        .unwrap();
    server.stop();
    let both = [(&wide, "k"), (&narrow, "k")];
    assert!(check_all(&both, 1).await.unwrap().is_allowed());
    let d = check_all(&both, 1).await.unwrap();
    assert!(!d.is_allowed());
    assert_eq!(d.denied().collect::<Vec<_>>(), [1]);
    // The wide local table gave one, not two.
    let d = check_all(&[(&wide, "k")], 4).await.unwrap();
    assert!(d.is_allowed());
    assert!(!check_all(&[(&wide, "k")], 1).await.unwrap().is_allowed());
    // A Deny fallback denies the whole call, and the local tables give nothing.
    let d = check_all(&[(&wide, "j"), (&closed, "j")], 5).await.unwrap();
    assert!(!d.is_allowed());
    assert_eq!(d.denied().collect::<Vec<_>>(), [1]);
    assert!(check_all(&[(&wide, "j")], 5).await.unwrap().is_allowed());
    assert!(wide.stats().fallbacks >= 4);
    // One limiter without a fallback: the error.
    let e = check_all(&[(&wide, "k"), (&strict, "k")], 1)
        .await
        .unwrap_err();
    assert!(e.is_redis_unavailable(), "{e}");
}
