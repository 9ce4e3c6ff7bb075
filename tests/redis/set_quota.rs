//! `set_quota` at run time against a real redis-server: the stated over-admission bound
//! (from the change on, never more than a limiter built fresh with the new quota at the
//! change), clean denials for state above a lowered limit, and refused quotas that
//! change nothing.

use crate::server::RedisServer;
use std::time::Duration;
use tollgate::redis::{Fallback, HybridRateLimiter, RedisRateLimiter};
use tollgate::{Algorithm, ConfigError, ManualClock, Quota, RateLimiter};

const STEP: Duration = Duration::from_millis(10);

async fn exact(
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
        .timeout(Duration::from_secs(2))
        // Fail-open fallback: a change must never reach it.
        .fallback(Fallback::Allow)
        .build()
        .await
        .expect("build")
}

/// A limiter of `quota` built fresh on `clock` now: the bound's reference.
fn fresh(algorithm: Algorithm, quota: Quota, clock: &ManualClock) -> RateLimiter<ManualClock> {
    RateLimiter::builder(algorithm, quota)
        .clock(clock.clone())
        .build()
        .expect("model")
}

/// Requests every 10 ms for `before` under `old`, then `set_quota(new)`, then every
/// 10 ms for `after`. Returns the admission times (ns) before and after the change, and
/// the change's time,
/// checking at every step after it that the admissions since the change never exceed
/// those of a fresh limiter of the new quota on the same requests.
async fn around_a_change(
    server: &RedisServer,
    algorithm: Algorithm,
    old: Quota,
    new: Quota,
    before: Duration,
    after: Duration,
) -> (Vec<u64>, Vec<u64>, u64) {
    let clock = ManualClock::new();
    clock.set(Duration::from_millis(100_003));
    let prefix = format!(
        "sq:{algorithm:?}:{}/{:?}:{}/{:?}",
        old.limit(),
        old.period(),
        new.limit(),
        new.period()
    );
    let l = exact(server, algorithm, old, &prefix, &clock).await;
    let now = || tollgate::Clock::now(&clock);
    let mut early = Vec::new();
    let end = now() + before.as_nanos() as u64;
    while now() < end {
        if l.check("k").await.expect("decision").is_allowed() {
            early.push(now());
        }
        clock.advance(STEP);
    }
    let change = now();
    l.set_quota(new).expect("valid quota");
    assert_eq!(l.quota(), new);
    let model = fresh(algorithm, new, &clock);
    let (mut late, mut model_admitted) = (Vec::new(), 0usize);
    let end = now() + after.as_nanos() as u64;
    while now() < end {
        if l.check("k").await.expect("decision").is_allowed() {
            late.push(now());
        }
        if model.check().is_allowed() {
            model_admitted += 1;
        }
        assert!(
            late.len() <= model_admitted,
            "{algorithm:?} {old:?} -> {new:?}: {} admitted since the change, a fresh limiter {model_admitted}",
            late.len()
        );
        clock.advance(STEP);
    }
    let s = l.stats();
    assert_eq!((s.errors, s.fallbacks), (0, 0), "{algorithm:?}");
    (early, late, change)
}

/// The most admissions in any interval `[t, t + span)`.
fn densest(times: &[u64], span: Duration) -> usize {
    let span = span.as_nanos() as u64;
    (0..times.len())
        .map(|i| {
            times[i..]
                .iter()
                .take_while(|&&t| t < times[i] + span)
                .count()
        })
        .max()
        .unwrap_or(0)
}

const SEC: Duration = Duration::from_secs(1);

#[tokio::test]
async fn the_stated_bound_holds_across_every_kind_of_change() {
    let server = RedisServer::start();
    let changes = [
        // lower, raise (same period)
        (Quota::per_second(10), Quota::per_second(4)),
        (Quota::per_second(4), Quota::per_second(10)),
        // a longer and a shorter period
        (Quota::per_second(10), Quota::new(4, 2 * SEC)),
        (Quota::new(10, 2 * SEC), Quota::per_second(4)),
    ];
    for algorithm in Algorithm::ALL {
        for (old, new) in changes {
            let (early, late, change) =
                around_a_change(&server, algorithm, old, new, SEC * 5 / 2, 4 * SEC).await;
            assert!(!late.is_empty(), "{algorithm:?} {old:?} -> {new:?}");
            // After the change, the new quota alone: never more than its limit per
            // period for the fixed window's aligned windows and the log's intervals.
            let per = new.period();
            match algorithm {
                Algorithm::SlidingLog => {
                    assert!(densest(&late, per) <= new.limit() as usize, "{algorithm:?}");
                }
                Algorithm::FixedWindow => {
                    let p = per.as_nanos() as u64;
                    for w in late.iter().map(|t| t / p) {
                        let n = late.iter().filter(|&&t| t / p == w).count();
                        assert!(n <= new.limit() as usize, "{algorithm:?} window {w}: {n}");
                    }
                }
                _ => {}
            }
            // Around the change, at most L_old + L_new: for the log in
            // (c - P_old, c + P_new); for the fixed window from the start of the old
            // window holding the change to the end of the new one holding it (at most
            // the larger limit when the period is the same).
            let all: Vec<u64> = early.iter().chain(&late).copied().collect();
            let sum = (old.limit() + new.limit()) as usize;
            if algorithm == Algorithm::SlidingLog {
                let (from, to) = (
                    change - old.period().as_nanos() as u64,
                    change + per.as_nanos() as u64,
                );
                let seen = all.iter().filter(|&&t| from < t && t < to).count();
                assert!(
                    seen <= sum,
                    "{algorithm:?} {old:?} -> {new:?}: {seen} > {sum}"
                );
            }
            if algorithm == Algorithm::FixedWindow {
                let (p_old, p_new) = (old.period().as_nanos() as u64, per.as_nanos() as u64);
                let from = change / p_old * p_old;
                let to = (change / p_new + 1) * p_new;
                let seen = all.iter().filter(|&&t| from <= t && t < to).count();
                let bound = if p_old == p_new {
                    old.limit().max(new.limit()) as usize
                } else {
                    sum
                };
                assert!(
                    seen <= bound,
                    "{algorithm:?} {old:?} -> {new:?}: {seen} > {bound}"
                );
            }
        }
    }
}

/// A key holding more than a lowered limit: a clean denial with nothing remaining (a
/// peek too), never an error, never the (fail-open) fallback, until it drains.
#[tokio::test]
async fn a_lowered_limit_with_state_above_it_denies_cleanly() {
    let server = RedisServer::start();
    for algorithm in Algorithm::ALL {
        let clock = ManualClock::new();
        clock.set(Duration::from_millis(50_250));
        let l = exact(
            &server,
            algorithm,
            Quota::per_minute(10),
            &format!("lowered:{algorithm:?}"),
            &clock,
        )
        .await;
        for _ in 0..10 {
            assert!(l.check("k").await.unwrap().is_allowed(), "{algorithm:?}");
        }
        l.set_quota(Quota::per_minute(3)).unwrap();
        assert_eq!(l.burst(), 3);
        for _ in 0..5 {
            let d = l.check("k").await.expect("a decision, not an error");
            assert!(!d.is_allowed(), "{algorithm:?}");
            assert_eq!((d.remaining(), d.limit()), (0, 3), "{algorithm:?}");
            assert!(d.retry_after().is_some_and(|w| w > Duration::ZERO));
            let peek = l.check_n("k", 0).await.expect("peek");
            assert_eq!(peek.remaining(), 0, "{algorithm:?}");
            clock.advance(Duration::from_secs(1));
        }
        let s = l.stats();
        assert_eq!((s.errors, s.fallbacks), (0, 0), "{algorithm:?}");
        // Two periods on (the sliding window's previous count then weighs nothing), and
        // for the buckets once the 10 requests used, carried over into the new quota's
        // (20 s each), are paid off: the key is admitted again, under the new limit.
        clock.advance(Duration::from_secs(240));
        let mut admitted = 0;
        for _ in 0..10 {
            admitted += u32::from(l.check("k").await.unwrap().is_allowed());
        }
        assert_eq!(admitted, 3, "{algorithm:?}");
    }
}

/// A raised limit of a window or the log is available at once; a raised burst too.
#[tokio::test]
async fn a_raised_limit_is_available_at_once() {
    let server = RedisServer::start();
    for algorithm in Algorithm::ALL {
        let clock = ManualClock::new();
        clock.set(Duration::from_millis(70_250));
        let (old, new) = if matches!(algorithm, Algorithm::TokenBucket | Algorithm::LeakyBucket) {
            (
                Quota::per_minute(10).with_burst(4),
                Quota::per_minute(10).with_burst(10),
            )
        } else {
            (Quota::per_minute(4), Quota::per_minute(10))
        };
        let l = exact(
            &server,
            algorithm,
            old,
            &format!("raised:{algorithm:?}"),
            &clock,
        )
        .await;
        for _ in 0..4 {
            assert!(l.check("k").await.unwrap().is_allowed());
        }
        assert!(!l.check("k").await.unwrap().is_allowed());
        l.set_quota(new).unwrap();
        let mut admitted = 0;
        for _ in 0..10 {
            admitted += u32::from(l.check("k").await.unwrap().is_allowed());
        }
        assert_eq!(admitted, 6, "{algorithm:?}");
    }
}

/// A quota `build` would refuse is refused with the same error, and changes nothing.
#[tokio::test]
async fn refused_quotas_change_nothing() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    let quota = Quota::per_second(5);
    let l = exact(&server, Algorithm::TokenBucket, quota, "refused", &clock).await;
    assert_eq!(
        l.set_quota(Quota::per_second(0)),
        Err(ConfigError::ZeroLimit)
    );
    // Two per µs: fine locally, not in whole microseconds.
    let too_fast = l.set_quota(Quota::new(2_000_000, SEC));
    assert!(
        matches!(too_fast, Err(ConfigError::Unrepresentable { .. })),
        "{too_fast:?}"
    );
    let sliding = exact(
        &server,
        Algorithm::SlidingWindow,
        quota,
        "refused-sw",
        &clock,
    )
    .await;
    let huge = sliding.set_quota(Quota::new(u32::MAX / 2, Duration::from_secs(86_400 * 365)));
    assert!(huge.is_err(), "{huge:?}");
    let burst = sliding.set_quota(Quota::per_second(5).with_burst(9));
    assert!(matches!(burst, Err(ConfigError::BurstNotSupported { .. })));
    assert_eq!((l.quota(), sliding.quota()), (quota, quota));
    for _ in 0..5 {
        assert!(l.check("k").await.unwrap().is_allowed());
    }
    assert!(!l.check("k").await.unwrap().is_allowed());
}

/// The hybrid mode: a lowered limit denies on the kept global counts; a period change
/// restarts the windows; a period within the sync interval is refused.
#[tokio::test]
async fn hybrid_set_quota_keeps_counts_and_restarts_windows_on_a_new_period() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    clock.set(Duration::from_millis(100_100));
    let build = || {
        HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(10))
            .url(server.url())
            .prefix("sq-hybrid")
            .clock(clock.clone())
            .sync_interval(Duration::MAX)
            .build()
    };
    let a = build().await.expect("build");
    let b = build().await.expect("build");
    for _ in 0..6 {
        assert!(a.check("k").is_allowed());
    }
    a.sync().await.unwrap();
    assert!(b.check("k").is_allowed());
    b.sync().await.unwrap(); // b now sees 7 in this window
    for l in [&a, &b] {
        l.set_quota(Quota::per_second(4)).unwrap();
        let d = l.check("k");
        assert!(!d.is_allowed());
        assert_eq!(d.remaining(), 0);
    }
    // The next window: the new limit, exactly.
    clock.advance(SEC);
    let mut admitted = 0;
    for _ in 0..10 {
        admitted += u32::from(a.check("k").is_allowed());
    }
    assert_eq!(admitted, 4);
    a.sync().await.unwrap();
    // A longer period mid-window: the windows restart (a fresh 10 per 2 s), so from the
    // start of the old window to the end of the new one, at most 4 + 10.
    clock.advance(Duration::from_millis(500));
    a.set_quota(Quota::new(10, 2 * SEC)).unwrap();
    let mut after = 0;
    for _ in 0..20 {
        after += u32::from(a.check("k").is_allowed());
    }
    assert_eq!(after, 10);
    a.sync().await.unwrap();
    // b, still on 1 s windows, is unaffected by a's new windows' keys in Redis.
    b.sync().await.unwrap();
    // A period the sync interval cannot serve, and a zero limit: refused, unchanged.
    let synced = HybridRateLimiter::builder(Algorithm::SlidingWindow, Quota::per_second(10))
        .url(server.url())
        .prefix("sq-hybrid-interval")
        .sync_interval(Duration::from_millis(100))
        .build()
        .await
        .expect("build");
    let e = synced.set_quota(Quota::new(10, Duration::from_millis(50)));
    assert!(
        matches!(e, Err(ConfigError::Unrepresentable { .. })),
        "{e:?}"
    );
    assert_eq!(
        synced.set_quota(Quota::per_second(0)),
        Err(ConfigError::ZeroLimit)
    );
    assert_eq!(synced.quota(), Quota::per_second(10));
}

/// Deciders racing quota changes: every decision is made and reported under one whole
/// quota, the old or the new (never the script under one and the reply read under the
/// other), none fails, none reaches the fallback.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deciders_racing_changes_see_one_whole_quota() {
    let server = RedisServer::start();
    for algorithm in Algorithm::ALL {
        let clock = ManualClock::new();
        clock.set(Duration::from_secs(9_000));
        let l = exact(
            &server,
            algorithm,
            Quota::per_minute(10),
            &format!("race:{algorithm:?}"),
            &clock,
        )
        .await;
        let changer = {
            let l = l.clone();
            tokio::spawn(async move {
                for i in 0..200 {
                    let q = if i % 2 == 0 {
                        Quota::per_minute(3)
                    } else {
                        Quota::per_minute(10)
                    };
                    l.set_quota(q).unwrap();
                    tokio::task::yield_now().await;
                }
            })
        };
        let mut deciders = Vec::new();
        for t in 0..4 {
            let l = l.clone();
            deciders.push(tokio::spawn(async move {
                for i in 0..50 {
                    // A fresh key: admitted, with all but one of its quota remaining,
                    // whichever quota decided it.
                    let key = format!("k{t}-{i}");
                    let d = l.check_n(&key, 1).await.expect("decision");
                    assert!(d.is_allowed(), "{d:?}");
                    assert!(matches!(d.limit(), 3 | 10), "{d:?}");
                    assert_eq!(d.remaining(), d.limit() - 1, "{d:?}");
                }
            }));
        }
        changer.await.unwrap();
        for d in deciders {
            d.await.unwrap();
        }
        let s = l.stats();
        assert_eq!((s.errors, s.fallbacks), (0, 0), "{algorithm:?}");
        assert_eq!(s.decisions, 200);
    }
}
