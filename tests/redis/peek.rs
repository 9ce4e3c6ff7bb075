//! `RedisRateLimiter::peek` / `peek_n` (issue 30): the decision script's peek mode
//! writes nothing at all (the key's `DUMP` and TTL are the same before and after, and a
//! key Redis does not hold is not created) and gives the decision a check of the same
//! cost gives at the same reading, on every algorithm, on random schedules of checks,
//! charges and quota changes; the two writes a decision makes on its own (a log's
//! clean-up of entries expired under a shorter period, a bucket's conversion stored by
//! a denial after `set_quota`) are left out by a peek.

use crate::server::RedisServer;
use std::time::Duration;
use tollgate::redis::redis::aio::MultiplexedConnection;
use tollgate::redis::{redis, Error, Fallback, RedisRateLimiter};
use tollgate::{Algorithm, ManualClock, Quota};

/// A TTL (ms) no script ever sets: a peek that refreshed the TTL would replace it.
const SENTINEL_TTL_MS: i64 = 3_600_000_007;

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

/// The key's serialized value (`None`: no key) and its TTL in ms.
async fn state(conn: &mut MultiplexedConnection, key: &str) -> (Option<Vec<u8>>, i64) {
    let dump: Option<Vec<u8>> = redis::cmd("DUMP")
        .arg(key)
        .query_async(conn)
        .await
        .expect("DUMP");
    let pttl: i64 = redis::cmd("PTTL")
        .arg(key)
        .query_async(conn)
        .await
        .expect("PTTL");
    (dump, pttl)
}

/// Peeks `n` for `key` and asserts that Redis holds exactly what it held before: the
/// same value, and (after the TTL is set to a sentinel no script sets) the same TTL.
async fn peek_writes_nothing(
    l: &RedisRateLimiter,
    conn: &mut MultiplexedConnection,
    key: &str,
    n: u32,
    what: &str,
) -> tollgate::Decision {
    let name = l.redis_key(key);
    let (before, _) = state(conn, &name).await;
    if before.is_some() {
        let _: i64 = redis::cmd("PEXPIRE")
            .arg(&name)
            .arg(SENTINEL_TTL_MS)
            .query_async(conn)
            .await
            .expect("PEXPIRE");
    }
    let d = l.peek_n(key, n).await.expect("peek");
    let (after, pttl) = state(conn, &name).await;
    assert_eq!(before, after, "{what}: the peek of {n} changed the value");
    if before.is_some() {
        assert!(
            pttl > SENTINEL_TTL_MS - 60_000 && pttl <= SENTINEL_TTL_MS,
            "{what}: the peek of {n} changed the TTL to {pttl} ms"
        );
    }
    d
}

/// Random schedules on every algorithm: before each check of `n`, a peek of `n` at the
/// same reading writes nothing and gives the same decision; charges put keys in debt
/// and quota changes (limit and period) reach the conversions and the restarts.
#[tokio::test]
async fn a_peek_writes_nothing_and_decides_as_a_check() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let quotas = [
        Quota::per_minute(5),
        Quota::new(3, Duration::from_secs(20)),
        Quota::per_minute(8).with_burst(4),
    ];
    for algorithm in Algorithm::ALL {
        for seed in 0..3u64 {
            let mut rng = fastrand::Rng::with_seed(seed * 7 + algorithm as u64);
            let clock = ManualClock::new();
            clock.advance(Duration::from_secs(3_600));
            let prefix = format!("peek:{algorithm:?}:{seed}");
            let l = limiter(&server, algorithm, quotas[0], &prefix, &clock).await;
            let (mut peeked_denials, mut peeked_admissions) = (0, 0);
            for step in 0..250 {
                let key = format!("k{}", rng.u8(0..3));
                match rng.u8(0..20) {
                    0 => {
                        // Windows accept no burst but the limit: those quotas are
                        // refused for them, and nothing changes.
                        let _ = l.set_quota(quotas[rng.usize(0..quotas.len())]);
                    }
                    1 => {
                        let _ = l.charge(&key, rng.u32(1..12)).await.expect("charge");
                    }
                    _ => {}
                }
                clock.advance(Duration::from_millis(rng.u64(0..6_000)));
                let n = rng.u32(0..=3);
                let what = format!("{algorithm:?} seed {seed} step {step} {key}");
                let peeked = peek_writes_nothing(&l, &mut conn, &key, n, &what).await;
                let checked = l.check_n(&key, n).await.expect("check");
                assert_eq!(peeked, checked, "{what}: peek_n({n}) and check_n({n})");
                if n > 0 {
                    if peeked.is_allowed() {
                        peeked_admissions += 1;
                    } else {
                        peeked_denials += 1;
                    }
                }
            }
            // The schedule reached both answers.
            assert!(
                peeked_denials > 10 && peeked_admissions > 10,
                "{algorithm:?}: {peeked_denials} denials, {peeked_admissions} admissions"
            );
        }
    }
}

/// A key Redis does not hold is reported whole and is not created.
#[tokio::test]
async fn a_peek_of_a_new_key_creates_nothing() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(3_600));
    for algorithm in Algorithm::ALL {
        let l = limiter(&server, algorithm, Quota::per_minute(5), "fresh", &clock).await;
        let d = l.peek("nobody").await.unwrap();
        assert!(d.is_allowed(), "{algorithm:?}");
        assert_eq!(d.remaining(), 4, "{algorithm:?}");
        assert_eq!(l.peek_n("nobody", 0).await.unwrap().remaining(), 5);
        assert!(l.peek_n("nobody", 5).await.unwrap().is_allowed());
        let exists: i64 = redis::cmd("EXISTS")
            .arg(l.redis_key("nobody"))
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(exists, 0, "{algorithm:?}: a peek created the key");
        assert!(matches!(
            l.peek_n("nobody", 6).await,
            Err(Error::InsufficientCapacity(_))
        ));
        assert_eq!(l.stats().decisions, 3, "{algorithm:?}: one per peek");
    }
}

/// The sliding log drops entries that can never count again when it decides (here:
/// those older than a period shortened by `set_quota`); a peek leaves them.
#[tokio::test]
async fn a_peek_leaves_a_logs_expired_entries() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(3_600));
    let l = limiter(
        &server,
        Algorithm::SlidingLog,
        Quota::per_minute(5),
        "log-clean",
        &clock,
    )
    .await;
    for _ in 0..3 {
        assert!(l.check("k").await.unwrap().is_allowed());
        clock.advance(Duration::from_secs(3));
    }
    l.set_quota(Quota::new(5, Duration::from_secs(1))).unwrap();
    let card = |conn: &mut MultiplexedConnection| {
        let name = l.redis_key("k");
        let mut c = conn.clone();
        async move {
            let n: i64 = redis::cmd("ZCARD")
                .arg(name)
                .query_async(&mut c)
                .await
                .unwrap();
            n
        }
    };
    let d = peek_writes_nothing(&l, &mut conn, "k", 1, "log").await;
    assert_eq!(card(&mut conn).await, 3, "the peek kept every entry");
    assert_eq!(d, l.check_n("k", 1).await.unwrap());
    // The check dropped the three entries older than the new period (two as it read
    // the log, one as it wrote) and logged itself.
    assert_eq!(card(&mut conn).await, 1);
}

/// A bucket's state written under another emission interval is converted by a denial
/// and stored (see `set_quota`); a peek of the same denial stores nothing.
#[tokio::test]
async fn a_peeked_denial_stores_no_conversion() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(3_600));
    for algorithm in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
        let prefix = format!("gcra-convert:{algorithm:?}");
        let l = limiter(&server, algorithm, Quota::per_minute(10), &prefix, &clock).await;
        assert!(l.check_n("k", 10).await.unwrap().is_allowed());
        l.set_quota(Quota::per_minute(5)).unwrap();
        let d = peek_writes_nothing(&l, &mut conn, "k", 1, "bucket").await;
        assert!(!d.is_allowed(), "{algorithm:?}");
        let before = state(&mut conn, &l.redis_key("k")).await.0;
        assert_eq!(d, l.check_n("k", 1).await.unwrap(), "{algorithm:?}");
        // The check's denial stored the converted state: the peek was the one to spare.
        assert_ne!(before, state(&mut conn, &l.redis_key("k")).await.0);
    }
}

/// While Redis is down, a `Fallback::Local` peek takes nothing from the local table.
#[tokio::test]
async fn a_peek_through_the_local_fallback_takes_nothing() {
    let mut server = RedisServer::start();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(3_600));
    let l = RedisRateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(10))
        .url(server.url())
        .prefix("fallback-peek")
        .clock(clock.clone())
        .timeout(Duration::from_millis(200))
        .fallback(Fallback::Local(Quota::per_minute(2)))
        .build()
        .await
        .unwrap();
    server.stop();
    for _ in 0..5 {
        let d = l.peek("k").await.unwrap();
        assert!(d.is_allowed());
        assert_eq!(d.remaining(), 1);
    }
    assert!(l.check("k").await.unwrap().is_allowed());
    assert!(l.check("k").await.unwrap().is_allowed());
    assert!(!l.peek("k").await.unwrap().is_allowed());
    assert!(l.stats().fallbacks >= 8);
}
