//! `HybridRateLimiter::peek` / `peek_n` (issue 30): decided from this instance's local
//! view of the key, inserting nothing into the key table, marking nothing for the next
//! sync and counting no decision; the decision a check of the same cost gives at the
//! same reading, with other instances' counts read back by syncs, charges and
//! give-backs in between.

use crate::server::RedisServer;
use std::time::Duration;
use tollgate::redis::HybridRateLimiter;
use tollgate::{Algorithm, InsufficientCapacity, ManualClock, Quota};

async fn hybrid(
    server: &RedisServer,
    algorithm: Algorithm,
    quota: Quota,
    prefix: &str,
    clock: &ManualClock,
) -> HybridRateLimiter {
    HybridRateLimiter::builder(algorithm, quota)
        .url(server.url())
        .prefix(prefix)
        .timeout(Duration::from_secs(5))
        .sync_interval(Duration::MAX)
        .clock(clock.clone())
        .build()
        .await
        .expect("build")
}

/// A peek of a key the table does not hold: whole, and nothing inserted, counted or
/// synced.
#[tokio::test]
async fn a_peek_inserts_nothing() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(3_600));
    for algorithm in [Algorithm::FixedWindow, Algorithm::SlidingWindow] {
        let l = hybrid(&server, algorithm, Quota::per_minute(5), "hp-new", &clock).await;
        let d = l.peek("nobody");
        assert!(d.is_allowed(), "{algorithm:?}");
        assert_eq!(d.remaining(), 4, "{algorithm:?}");
        assert_eq!(l.peek_n("nobody", 0).unwrap().remaining(), 5);
        assert!(l.peek_n("nobody", 5).unwrap().is_allowed());
        assert_eq!(
            l.peek_n("nobody", 6),
            Err(InsufficientCapacity {
                requested: 6,
                capacity: 5
            })
        );
        let s = l.stats();
        assert_eq!((s.keys, s.decisions), (0, 0), "{algorithm:?}: {s:?}");
        assert_eq!(l.sync().await.unwrap(), 0, "{algorithm:?}: nothing to sync");
    }
}

/// A peek of a tracked key marks nothing for the next sync: after a sync has sent
/// everything, peeks leave the next sync with no key to send.
#[tokio::test]
async fn a_peek_marks_nothing_for_the_sync() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(3_600));
    for algorithm in [Algorithm::FixedWindow, Algorithm::SlidingWindow] {
        let l = hybrid(&server, algorithm, Quota::per_minute(5), "hp-sync", &clock).await;
        assert!(l.check_n("k", 2).unwrap().is_allowed());
        assert_eq!(l.sync().await.unwrap(), 1);
        assert_eq!(
            l.sync().await.unwrap(),
            0,
            "{algorithm:?}: clean after a sync"
        );
        for n in 0..=3 {
            let _ = l.peek_n("k", n).unwrap();
        }
        assert_eq!(
            l.sync().await.unwrap(),
            0,
            "{algorithm:?}: a peek touched the key"
        );
        assert_eq!(
            l.stats().decisions,
            1,
            "{algorithm:?}: peeks are not decisions"
        );
    }
}

/// Random schedules of two instances sharing a key through syncs: before each check of
/// `n`, a peek of `n` at the same reading gives the same decision (charges, give-backs,
/// window rolls and the other instance's counts included).
#[tokio::test]
async fn a_peek_decides_as_a_check() {
    let server = RedisServer::start();
    for algorithm in [Algorithm::FixedWindow, Algorithm::SlidingWindow] {
        for seed in 0..3u64 {
            let mut rng = fastrand::Rng::with_seed(seed * 11 + algorithm as u64);
            let clock = ManualClock::new();
            clock.advance(Duration::from_secs(3_600));
            let prefix = format!("hp:{algorithm:?}:{seed}");
            let quota = Quota::per_minute(6);
            let a = hybrid(&server, algorithm, quota, &prefix, &clock).await;
            let b = hybrid(&server, algorithm, quota, &prefix, &clock).await;
            let (mut denials, mut admissions) = (0, 0);
            for step in 0..300 {
                let key = format!("k{}", rng.u8(0..2));
                let l = if rng.bool() { &a } else { &b };
                match rng.u8(0..12) {
                    0 => {
                        let _ = l.charge(&key, rng.u32(1..10));
                    }
                    1 => {
                        let _ = l.give_back(&key, rng.u32(1..4));
                    }
                    2 => {
                        a.sync().await.unwrap();
                        b.sync().await.unwrap();
                    }
                    _ => {}
                }
                clock.advance(Duration::from_millis(rng.u64(0..5_000)));
                let n = rng.u32(0..=4);
                let peeked = l.peek_n(&key, n).unwrap();
                let checked = l.check_n(&key, n).unwrap();
                assert_eq!(
                    peeked, checked,
                    "{algorithm:?} seed {seed} step {step} {key}: peek_n({n}) and check_n({n})"
                );
                if n > 0 {
                    if peeked.is_allowed() {
                        admissions += 1;
                    } else {
                        denials += 1;
                    }
                }
            }
            assert!(
                denials > 10 && admissions > 10,
                "{algorithm:?}: {denials} denials, {admissions} admissions"
            );
        }
    }
}
