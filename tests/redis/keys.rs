//! Keys of any `RedisKey` type: the Redis key names they write (the same as the text
//! form of the key: `&str` keys write what they always wrote).

use crate::server::RedisServer;
use std::net::IpAddr;
use std::time::Duration;
use tollgate::redis::{check_all, redis, HybridRateLimiter, RedisRateLimiter};
use tollgate::{Algorithm, ManualClock, Quota};

async fn exists(server: &RedisServer, key: &[u8]) -> bool {
    let mut conn = server.conn().await;
    let n: u32 = redis::cmd("EXISTS")
        .arg(key)
        .query_async(&mut conn)
        .await
        .expect("exists");
    n == 1
}

/// An address, its text and its bytes are one Redis key, `<prefix>:{10.0.0.1}`;
/// integers write their decimal text; bytes that are not UTF-8 go to Redis as they are.
#[tokio::test]
async fn exact_mode_keys_of_every_type_name_the_same_redis_keys() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(3_600));
    let l = RedisRateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(10))
        .url(server.url())
        .prefix("typed")
        .clock(clock.clone())
        .timeout(Duration::from_secs(5))
        .build()
        .await
        .expect("build");
    let ip: IpAddr = "10.0.0.1".parse().unwrap();
    assert_eq!(l.check("10.0.0.1").await.unwrap().remaining(), 9);
    assert_eq!(l.check(&ip).await.unwrap().remaining(), 8);
    assert_eq!(
        l.check(&String::from("10.0.0.1"))
            .await
            .unwrap()
            .remaining(),
        7
    );
    assert_eq!(l.check(&b"10.0.0.1"[..]).await.unwrap().remaining(), 6);
    assert!(exists(&server, b"typed:{10.0.0.1}").await);
    assert_eq!(l.redis_key(&ip), "typed:{10.0.0.1}");

    assert_eq!(l.check_n(&42u64, 3).await.unwrap().remaining(), 7);
    assert_eq!(l.check("42").await.unwrap().remaining(), 6);
    assert!(exists(&server, b"typed:{42}").await);
    let v6: IpAddr = "::1".parse().unwrap();
    assert!(l.check(&v6).await.unwrap().is_allowed());
    assert!(exists(&server, b"typed:{::1}").await);

    let raw: &[u8] = b"\xff\x00raw";
    assert!(l.check(raw).await.unwrap().is_allowed());
    assert!(exists(&server, b"typed:{\xff\x00raw}").await);
    assert_eq!(l.redis_key(raw), "typed:{\u{fffd}\u{0}raw}");

    // check_all with integer keys, one per limiter.
    let other = RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_minute(10))
        .url(server.url())
        .prefix("typed-tb")
        .clock(clock.clone())
        .timeout(Duration::from_secs(5))
        .build()
        .await
        .expect("build");
    let d = check_all(&[(&l, &7u32), (&other, &7u32)], 2).await.unwrap();
    assert!(d.is_allowed());
    assert!(exists(&server, b"typed:{7}").await && exists(&server, b"typed-tb:{7}").await);
    assert_eq!(l.check("7").await.unwrap().remaining(), 7);
}

/// The hybrid mode: an address and its text are one tracked key, and a sync writes
/// its window counts under `<prefix>:{10.1.2.3}:<window>`.
#[tokio::test]
async fn hybrid_keys_of_every_type_share_one_entry_and_name() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(7_200) + Duration::from_millis(1));
    let l = HybridRateLimiter::builder(
        Algorithm::FixedWindow,
        Quota::new(10, Duration::from_secs(10)),
    )
    .url(server.url())
    .prefix("htyped")
    .sync_interval(Duration::MAX)
    .timeout(Duration::from_secs(5))
    .clock(clock.clone())
    .build()
    .await
    .expect("build");
    let ip: IpAddr = "10.1.2.3".parse().unwrap();
    assert_eq!(l.check("10.1.2.3").remaining(), 9);
    assert_eq!(l.check(&ip).remaining(), 8);
    assert_eq!(l.check_n(&b"10.1.2.3"[..], 2).unwrap().remaining(), 6);
    assert_eq!(l.check(&99u16).remaining(), 9);
    assert_eq!(l.stats().keys, 2);
    assert_eq!(l.sync().await.expect("sync"), 2);
    assert!(exists(&server, b"htyped:{10.1.2.3}:720").await);
    assert!(exists(&server, b"htyped:{99}:720").await);
}
