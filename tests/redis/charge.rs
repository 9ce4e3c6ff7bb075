//! Charges and give-backs on the exact mode (issue 30): the scripts against the local
//! engine's `charge`/`charge_owing`/`give_back`, decision for decision on random
//! schedules; a give-back never below empty; many tasks charging, checking and giving
//! back at once count every request once and never more than the budget and its bound;
//! the TTL of a charged key covers its debt; costs up to `u32::MAX`; the hybrid mode's
//! local charges and give-backs, shared by the syncs.

use crate::server::RedisServer;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tollgate::redis::{redis, Error, HybridRateLimiter, RedisRateLimiter};
use tollgate::{Algorithm, Decision, ManualClock, Quota, RateLimiter};

/// Durations in whole microseconds, rounded up (the scripts compute in µs).
fn us(d: Duration) -> u128 {
    d.as_nanos().div_ceil(1000)
}

fn view(d: &Decision) -> (bool, u32, u32, u128, Option<u128>, u128) {
    (
        d.is_allowed(),
        d.limit(),
        d.remaining(),
        us(d.reset_after()),
        d.retry_after().map(us),
        us(d.delay()),
    )
}

async fn remote(
    server: &RedisServer,
    algorithm: Algorithm,
    quota: Quota,
    prefix: &str,
    clock: Option<&ManualClock>,
) -> RedisRateLimiter {
    let mut b = RedisRateLimiter::builder(algorithm, quota)
        .url(server.url())
        .prefix(prefix)
        .timeout(Duration::from_secs(5));
    if let Some(c) = clock {
        b = b.clock(c.clone());
    }
    b.build().await.expect("remote")
}

/// One random schedule of checks, charges (default bound and explicit ones) and
/// give-backs, on the local engine and on Redis under one `ManualClock`.
async fn compare(server: &RedisServer, case: usize, algorithm: Algorithm, quota: Quota, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let clock = ManualClock::new();
    let mut now_us = rng.u64(1_000_000..10_000_000);
    clock.set(Duration::from_micros(now_us));
    let local = RateLimiter::builder(algorithm, quota)
        .clock(clock.clone())
        .build()
        .expect("local");
    let prefix = format!("charge-diff:{case}:{seed}");
    let remote = remote(server, algorithm, quota, &prefix, Some(&clock)).await;
    let period_us = quota.period().as_micros() as u64;
    let burst = local.burst();
    let (mut charged, mut given, mut owing) = (0u64, 0u64, 0u32);
    for step in 0..500 {
        let dt = match rng.u8(0..10) {
            0..=5 => rng.u64(0..period_us / 20),
            6..=8 => rng.u64(0..period_us),
            _ => rng.u64(0..3 * period_us),
        };
        // Sometimes a reading older than the last one: both treat it as the state's time.
        if rng.u8(0..10) == 0 {
            now_us -= rng.u64(0..period_us / 5).min(now_us);
        } else {
            now_us += dt;
        }
        let op = rng.u8(0..10);
        clock.set(Duration::from_micros(now_us));
        let what = match op {
            0..=2 => {
                let n = match rng.u8(0..10) {
                    0 => 0,
                    1 => rng.u32(1..=burst),
                    _ => 1,
                };
                let want = local.check_n(n).expect("n <= burst");
                let got = remote.check_n("k", n).await.expect("redis check");
                assert_eq!(
                    view(&got),
                    view(&want),
                    "{algorithm:?} seed {seed} step {step} check {n}"
                );
                continue;
            }
            3..=6 => {
                let n = match rng.u8(0..10) {
                    0 => 0,
                    1..=5 => rng.u32(1..=burst),
                    6..=8 => rng.u32(1..=3 * burst),
                    _ => rng.u32(1..=u32::MAX),
                };
                let (want, got) = if op == 6 {
                    let max_owed = match rng.u8(0..4) {
                        0 => 0,
                        1 => u32::MAX,
                        _ => rng.u32(0..=3 * burst),
                    };
                    (
                        local.charge_owing(n, max_owed),
                        remote.charge_owing("k", n, max_owed).await.expect("charge"),
                    )
                } else {
                    (
                        local.charge(n),
                        remote.charge("k", n).await.expect("charge"),
                    )
                };
                let w = (
                    view(&want.decision()),
                    want.fit(),
                    want.taken(),
                    want.owed(),
                    want.dropped(),
                );
                let g = (
                    view(&got.decision()),
                    got.fit(),
                    got.taken(),
                    got.owed(),
                    got.dropped(),
                );
                assert_eq!(g, w, "{algorithm:?} seed {seed} step {step} charge {n}");
                assert!(got.tracked());
                charged += u64::from(got.taken());
                owing += u32::from(got.owed() > 0);
                format!("charge {n}")
            }
            _ => {
                let n = match rng.u8(0..10) {
                    0 => 0,
                    1..=7 => rng.u32(1..=burst),
                    8 => rng.u32(1..=3 * burst),
                    _ => u32::MAX,
                };
                let want = local.give_back(n);
                let got = remote.give_back("k", n).await.expect("give back");
                assert_eq!(
                    got, want,
                    "{algorithm:?} seed {seed} step {step} give back {n}"
                );
                given += u64::from(got);
                format!("give back {n}")
            }
        };
        // After every charge and give-back, the state as both see it.
        let want = local.peek_n(0).expect("peek");
        let got = remote.check_n("k", 0).await.expect("redis peek");
        assert_eq!(
            view(&got),
            view(&want),
            "{algorithm:?} seed {seed} step {step} peek after {what}"
        );
    }
    assert!(
        charged > 50 && given > 10 && owing > 5,
        "{algorithm:?} seed {seed}: the schedule charged {charged}, gave back {given}, owed {owing} times: too little to mean much"
    );
}

#[tokio::test]
async fn charges_and_give_backs_agree_with_the_local_engine() {
    let server = RedisServer::start();
    let cases = [
        (
            Algorithm::TokenBucket,
            Quota::new(10, Duration::from_secs(1)).with_burst(4),
        ),
        (
            Algorithm::TokenBucket,
            Quota::new(3, Duration::from_millis(111)),
        ),
        (
            Algorithm::LeakyBucket,
            Quota::new(10, Duration::from_secs(1)).with_burst(6),
        ),
        (
            Algorithm::FixedWindow,
            Quota::new(5, Duration::from_millis(100)),
        ),
        (
            Algorithm::FixedWindow,
            Quota::new(40, Duration::from_millis(1_000)),
        ),
        (
            Algorithm::SlidingWindow,
            Quota::new(7, Duration::from_millis(300)),
        ),
        (
            Algorithm::SlidingWindow,
            Quota::new(30, Duration::from_micros(777_777)),
        ),
        (
            Algorithm::SlidingLog,
            Quota::new(5, Duration::from_millis(250)),
        ),
        (
            Algorithm::SlidingLog,
            Quota::new(20, Duration::from_millis(1_000)),
        ),
    ];
    for (case, (algorithm, quota)) in cases.into_iter().enumerate() {
        for seed in 1..=3 {
            compare(&server, case, algorithm, quota, seed).await;
        }
    }
}

/// A give-back never takes a key below empty: what it returns is what the key held,
/// the key is then whole (a full bucket, an empty window or log), and a second one
/// gives nothing; a key Redis does not hold gives nothing and is not created.
#[tokio::test]
async fn a_give_back_never_goes_below_empty() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    for algorithm in Algorithm::ALL {
        let clock = ManualClock::new();
        clock.set(Duration::from_secs(1_000));
        let quota = Quota::per_minute(5);
        let prefix = format!("below-empty:{algorithm:?}");
        let l = remote(&server, algorithm, quota, &prefix, Some(&clock)).await;
        assert_eq!(l.give_back("missing", 3).await.unwrap(), 0, "{algorithm:?}");
        let exists: i64 = redis::cmd("EXISTS")
            .arg(l.redis_key("missing"))
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(exists, 0, "{algorithm:?}: a give-back created a key");

        assert!(l.check_n("k", 3).await.unwrap().is_allowed());
        assert_eq!(l.give_back("k", 10).await.unwrap(), 3, "{algorithm:?}");
        assert_eq!(
            l.check_n("k", 0).await.unwrap().remaining(),
            5,
            "{algorithm:?}"
        );
        assert_eq!(l.give_back("k", 10).await.unwrap(), 0, "{algorithm:?}");
        assert_eq!(
            l.give_back("k", u32::MAX).await.unwrap(),
            0,
            "{algorithm:?}"
        );
        // Whole: exactly the quota fits again, and no more.
        assert!(
            l.check_n("k", 5).await.unwrap().is_allowed(),
            "{algorithm:?}"
        );
        assert!(!l.check("k").await.unwrap().is_allowed(), "{algorithm:?}");

        // A charge into debt given back whole (a log whose every entry of its last
        // `limit` is in the period gives nothing back: the differential test's).
        if algorithm != Algorithm::SlidingLog {
            clock.advance(Duration::from_secs(3_600));
            let c = l.charge("d", 8).await.unwrap();
            assert_eq!((c.taken(), c.owed()), (8, 3), "{algorithm:?}");
            assert_eq!(
                l.give_back("d", u32::MAX).await.unwrap(),
                8,
                "{algorithm:?}"
            );
            let d = l.check_n("d", 0).await.unwrap();
            assert_eq!(d.remaining(), 5, "{algorithm:?}");
            assert_eq!(l.give_back("d", 1).await.unwrap(), 0, "{algorithm:?}");
        }
    }
}

/// Tasks on four instances (separate connections) charge, check and give back one key
/// at once on a frozen clock: every request is counted once (what the key holds at the
/// end is exactly what was admitted and taken less what was given back), a charge's
/// cost is taken or dropped, never both or neither, and the key never holds more than
/// the budget plus the bound a charge may owe (for the log, whose charges owe without a
/// bound and which gives back nothing here, checks never admit past the limit and the
/// log holds everything counted, up to its limit).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_charges_and_checks_count_everything_once() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    clock.set(Duration::from_secs(5_000));
    for algorithm in Algorithm::ALL {
        let quota = Quota::per_hour(40);
        let prefix = format!("charge-threads:{algorithm:?}");
        let mut limiters = Vec::new();
        for _ in 0..4 {
            limiters.push(remote(&server, algorithm, quota, &prefix, Some(&clock)).await);
        }
        let burst = limiters[0].burst();
        let max_owed = 25;
        let admitted = Arc::new(AtomicU64::new(0));
        let taken = Arc::new(AtomicU64::new(0));
        let given = Arc::new(AtomicU64::new(0));
        let dropped = Arc::new(AtomicU64::new(0));
        let log = algorithm == Algorithm::SlidingLog;
        let mut tasks = Vec::new();
        for (i, l) in limiters.iter().enumerate() {
            for t in 0..4 {
                let l = l.clone();
                let (admitted, taken, given, dropped) = (
                    Arc::clone(&admitted),
                    Arc::clone(&taken),
                    Arc::clone(&given),
                    Arc::clone(&dropped),
                );
                tasks.push(tokio::spawn(async move {
                    let mut rng = fastrand::Rng::with_seed((i * 16 + t) as u64);
                    for _ in 0..40 {
                        match rng.u8(0..10) {
                            0..=3 => {
                                if l.check("shared").await.unwrap().is_allowed() {
                                    admitted.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                            5..=7 => {
                                let n = rng.u32(0..=6);
                                let c = l.charge_owing("shared", n, max_owed).await.unwrap();
                                assert_eq!(c.taken() + c.dropped(), n);
                                if !log {
                                    // Never past the budget and its bound, at any charge.
                                    assert!(c.owed() <= max_owed, "{algorithm:?}: {c:?}");
                                }
                                taken.fetch_add(u64::from(c.taken()), Ordering::Relaxed);
                                dropped.fetch_add(u64::from(c.dropped()), Ordering::Relaxed);
                            }
                            // The log's give-backs free its newest entries only while
                            // some of its last `limit` have left the period: what it then
                            // holds is the differential test's to check.
                            _ if algorithm != Algorithm::SlidingLog => {
                                let n = rng.u32(0..=4);
                                let g = l.give_back("shared", n).await.unwrap();
                                assert!(g <= n);
                                given.fetch_add(u64::from(g), Ordering::Relaxed);
                            }
                            _ => {
                                if l.check("shared").await.unwrap().is_allowed() {
                                    admitted.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                    }
                }));
            }
        }
        for t in tasks {
            t.await.expect("task");
        }
        let (admitted, taken, given) = (
            admitted.load(Ordering::Relaxed),
            taken.load(Ordering::Relaxed),
            given.load(Ordering::Relaxed),
        );
        let dropped = dropped.load(Ordering::Relaxed);
        // Something of each, and the bound reached (the log has none).
        assert!(
            admitted > 0 && taken > 0 && (log || given > 0 && dropped > 0),
            "{algorithm:?}: the schedule did too little"
        );
        // What the key holds: what a give-back of everything returns; for the log,
        // whose give-back returns nothing while all its last `limit` entries are in
        // the period, the entries a peek sees.
        let held = if log {
            let d = limiters[0].check_n("shared", 0).await.unwrap();
            u64::from(40 - d.remaining())
        } else {
            u64::from(limiters[0].give_back("shared", u32::MAX).await.unwrap())
        };
        if log {
            // The log holds its newest `limit` entries: everything counted, up to that;
            // checks admitted only while there was room.
            assert_eq!(held, (admitted + taken).min(40), "{algorithm:?}");
            assert!(admitted <= 40, "{algorithm:?}: {admitted} admitted");
        } else {
            assert_eq!(
                held,
                admitted + taken - given,
                "{algorithm:?}: admitted {admitted}, taken {taken}, given {given}"
            );
            assert!(
                held <= u64::from(burst + max_owed),
                "{algorithm:?}: {held} held past the budget and its bound"
            );
        }
    }
}

/// A charge or a give-back on a key holding another algorithm's state is a clear
/// error (`Error::ForeignState`), never a panic or a decision on a guess, and writes
/// nothing.
#[tokio::test]
async fn a_charge_on_foreign_state_is_an_error() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let clock = ManualClock::new();
    clock.set(Duration::from_secs(1_000));
    let quota = Quota::per_minute(5);
    for (i, algorithm) in Algorithm::ALL.into_iter().enumerate() {
        // Every algorithm's prefix holds the next one's state.
        let other = Algorithm::ALL[(i + 2) % Algorithm::ALL.len()];
        let prefix = format!("foreign:{i}");
        let writer = remote(&server, other, quota, &prefix, Some(&clock)).await;
        assert!(writer.check("k").await.unwrap().is_allowed());
        let before: Vec<u8> = redis::cmd("DUMP")
            .arg(writer.redis_key("k"))
            .query_async(&mut conn)
            .await
            .unwrap();
        let l = remote(&server, algorithm, quota, &prefix, Some(&clock)).await;
        let e = l.charge("k", 3).await.unwrap_err();
        assert!(
            matches!(e, Error::ForeignState(_)),
            "{algorithm:?} on {other:?}: {e}"
        );
        let e = l.give_back("k", 3).await.unwrap_err();
        assert!(
            matches!(e, Error::ForeignState(_)),
            "{algorithm:?} on {other:?}: {e}"
        );
        let after: Vec<u8> = redis::cmd("DUMP")
            .arg(writer.redis_key("k"))
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(before, after, "{algorithm:?} on {other:?}");
    }
}

/// A charged key lives until its debt is paid: a bucket's TTL is its debt, a window's
/// the rest of the windows that count it, a log's its period (Redis TIME).
#[tokio::test]
async fn a_charged_keys_ttl_covers_its_debt() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    for algorithm in Algorithm::ALL {
        let quota = Quota::per_minute(60); // T = 1 s, a window of 60 s
        let l = remote(
            &server,
            algorithm,
            quota,
            &format!("ttl:{algorithm:?}"),
            None,
        )
        .await;
        let c = l.charge_owing("k", 60 + 600, 600).await.unwrap();
        assert_eq!(c.taken(), 660, "{algorithm:?}");
        let ttl: i64 = redis::cmd("PTTL")
            .arg(l.redis_key("k"))
            .query_async(&mut conn)
            .await
            .unwrap();
        let (lo, hi) = match algorithm {
            // 600 s of debt past a full bucket of 60 s.
            Algorithm::TokenBucket | Algorithm::LeakyBucket => (659_000, 660_000),
            // The rest of the window (and, sliding, the next one).
            Algorithm::FixedWindow => (0, 60_000),
            Algorithm::SlidingWindow => (60_000, 120_000),
            Algorithm::SlidingLog => (59_000, 60_000),
        };
        assert!((lo..=hi).contains(&ttl), "{algorithm:?}: PTTL {ttl}");
        // And the next request waits it out.
        assert!(!l.check("k").await.unwrap().is_allowed(), "{algorithm:?}");
        if algorithm == Algorithm::SlidingLog {
            // The log keeps its newest `limit` entries, as the local ring does.
            assert_eq!(l.charge("k", 30).await.unwrap().owed(), 30);
            let size: i64 = redis::cmd("ZCARD")
                .arg(l.redis_key("k"))
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(size, 60, "{algorithm:?}");
        }
    }
}

/// Costs and bounds up to `u32::MAX` are counted as the local engine counts them (no
/// double past 2^53 in the scripts): a window up to what the engine's count field
/// holds, a log the whole cost; a bucket owes at most 2^50 µs of its rate (the engine
/// 2^60 ns), which a bound of `u32::MAX` intervals of an hour's quota reaches.
#[tokio::test]
async fn the_largest_costs_and_bounds() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    clock.set(Duration::from_secs(10_000));
    for algorithm in Algorithm::ALL {
        let bucket = matches!(algorithm, Algorithm::TokenBucket | Algorithm::LeakyBucket);
        // T = 720 s for the buckets: u32::MAX of them is past 2^50 µs.
        let quota = if bucket {
            Quota::per_hour(5)
        } else {
            Quota::per_second(5)
        };
        let prefix = format!("largest:{algorithm:?}");
        let l = remote(&server, algorithm, quota, &prefix, Some(&clock)).await;
        let cases = [
            (u32::MAX, 5),
            (u32::MAX, u32::MAX),
            (u32::MAX, 0),
            (0, u32::MAX),
        ];
        for (i, (n, max_owed)) in cases.into_iter().enumerate() {
            let key = format!("k{i}");
            let local = RateLimiter::builder(algorithm, quota)
                .clock(clock.clone())
                .build()
                .unwrap();
            let c = l.charge_owing(key.as_str(), n, max_owed).await.unwrap();
            assert_eq!(u64::from(c.taken()) + u64::from(c.dropped()), u64::from(n));
            // The engine's bucket multiplies `max_owed · T` in 64 bits, which overflows
            // for u32::MAX hours of 720 s (reported): not asked.
            let capped = bucket && max_owed == u32::MAX;
            if capped {
                assert_eq!(
                    l.give_back(key.as_str(), u32::MAX).await.unwrap(),
                    c.taken()
                );
                if n == 0 {
                    assert_eq!((c.taken(), c.owed()), (0, 0));
                    continue;
                }
                let t_us = 720_000_000u64;
                let taken = ((1u64 << 50) + 5 * t_us) / t_us;
                assert_eq!(u64::from(c.taken()), taken, "{algorithm:?}");
                assert_eq!(u64::from(c.owed()), taken - 5, "{algorithm:?}");
                continue;
            }
            let want = local.charge_owing(n, max_owed);
            {
                assert_eq!(
                    (view(&c.decision()), c.taken(), c.owed(), c.dropped()),
                    (
                        view(&want.decision()),
                        want.taken(),
                        want.owed(),
                        want.dropped()
                    ),
                    "{algorithm:?} charge {n} owing {max_owed}"
                );
            }
            let want = local.give_back(u32::MAX);
            let got = l.give_back(key.as_str(), u32::MAX).await.unwrap();
            assert_eq!(got, want, "{algorithm:?} give back after charge {n}");
        }
    }
}

async fn hybrid(
    server: &RedisServer,
    algorithm: Algorithm,
    prefix: &str,
    clock: &ManualClock,
) -> HybridRateLimiter {
    HybridRateLimiter::builder(algorithm, Quota::new(100, Duration::from_secs(60)))
        .url(server.url())
        .prefix(prefix)
        .timeout(Duration::from_secs(5))
        .sync_interval(Duration::MAX)
        .clock(clock.clone())
        .build()
        .await
        .expect("hybrid")
}

/// Syncs every instance twice over, each having used `k` (a sync reads only the keys
/// used since the last one), so that every view holds every count.
async fn sync_all(ls: &[&HybridRateLimiter]) {
    for _ in 0..2 {
        for l in ls {
            let _ = l.check_n("k", 0).expect("a peek");
            l.sync().await.expect("sync");
        }
    }
}

/// The hybrid mode's charges and give-backs count locally, as the in-process window
/// charges (the bound, what is owed and dropped), and reach the other instances with
/// the syncs: a give-back as a count of its own (`<id>:g`) that the global count
/// subtracts, sent again by a later sync without counting twice.
#[tokio::test]
async fn hybrid_charges_and_give_backs_travel_with_the_syncs() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    for algorithm in [Algorithm::FixedWindow, Algorithm::SlidingWindow] {
        let clock = ManualClock::new();
        // 1 ms into a window of 60 s: the previous window is empty and weighs nothing.
        clock.set(Duration::from_secs(3_600) + Duration::from_millis(1));
        let prefix = format!("hybrid-charge:{algorithm:?}");
        let a = hybrid(&server, algorithm, &prefix, &clock).await;
        let b = hybrid(&server, algorithm, &prefix, &clock).await;

        let c = a.charge("k", 130);
        assert_eq!(
            (c.taken(), c.owed(), c.dropped(), c.fit()),
            (130, 30, 0, false)
        );
        assert!(!c.decision().is_allowed(), "{algorithm:?}");
        // At most one burst (the limit, 100) owed: 70 more, 30 dropped.
        let c = a.charge("k", 100);
        assert_eq!(
            (c.taken(), c.owed(), c.dropped()),
            (70, 100, 30),
            "{algorithm:?}"
        );
        assert_eq!(a.charge_owing("k", 5, 0).dropped(), 5, "{algorithm:?}");
        // B has not heard of it yet.
        assert!(b.check("k").is_allowed(), "{algorithm:?}");
        sync_all(&[&a, &b]).await;
        assert!(
            !b.check("k").is_allowed(),
            "{algorithm:?}: B sees A's charge"
        );

        // B gives back 150 of the 201 it sees: A sees it after the syncs.
        assert_eq!(b.give_back("k", 150), 150, "{algorithm:?}");
        assert_eq!(b.check_n("k", 0).unwrap().remaining(), 49, "{algorithm:?}");
        assert!(!a.check("k").is_allowed(), "{algorithm:?}: not yet synced");
        sync_all(&[&a, &b]).await;
        assert_eq!(a.check_n("k", 0).unwrap().remaining(), 49, "{algorithm:?}");
        assert_eq!(b.check_n("k", 0).unwrap().remaining(), 49, "{algorithm:?}");
        let window = 3_600 / 60;
        let hash = format!("{prefix}:{{k}}:{window}");
        let fields: Vec<(String, i64)> = redis::cmd("HGETALL")
            .arg(&hash)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(fields.len(), 3, "{algorithm:?}: {fields:?}");
        assert_eq!(
            fields
                .iter()
                .filter(|(f, _)| f.ends_with(":g"))
                .map(|(_, v)| v)
                .sum::<i64>(),
            150,
            "{algorithm:?}: {fields:?}"
        );
        // Sent again, counted once.
        sync_all(&[&b, &a]).await;
        assert_eq!(a.check_n("k", 0).unwrap().remaining(), 49, "{algorithm:?}");

        // Never below 0 as this instance sees it, and nothing for an unknown key.
        assert_eq!(a.give_back("k", 1_000), 51, "{algorithm:?}");
        assert_eq!(a.give_back("k", 1), 0, "{algorithm:?}");
        assert_eq!(a.give_back("unknown", 5), 0, "{algorithm:?}");
        sync_all(&[&a, &b]).await;
        assert_eq!(b.check_n("k", 0).unwrap().remaining(), 100, "{algorithm:?}");

        // The next window: the sliding window gives back from the previous window's
        // count, which still weighs; the fixed window's is over.
        assert_eq!(a.charge("k", 60).taken(), 60, "{algorithm:?}");
        sync_all(&[&a, &b]).await;
        clock.advance(Duration::from_secs(60));
        let given = a.give_back("k", 50);
        sync_all(&[&a, &b]).await;
        let left = b.check_n("k", 0).unwrap().remaining();
        if algorithm == Algorithm::SlidingWindow {
            // 10 left in the previous window, 1 ms into this one: 9.99 weighs.
            assert_eq!((given, left), (50, 90), "{algorithm:?}");
        } else {
            assert_eq!((given, left), (0, 100), "{algorithm:?}");
        }
    }
}

/// Rounds of charges on three instances between syncs: the global count stays within
/// the limit, the bound a charge may owe, and the hybrid overshoot bound (3·N·m for m
/// charged per instance per sync interval), and once every view holds it, charges
/// take nothing more.
#[tokio::test]
async fn hybrid_charges_stay_within_the_bound() {
    let server = RedisServer::start();
    for algorithm in [Algorithm::FixedWindow, Algorithm::SlidingWindow] {
        let clock = ManualClock::new();
        clock.set(Duration::from_secs(3_600) + Duration::from_millis(1));
        let prefix = format!("hybrid-bound:{algorithm:?}");
        let mut ls = Vec::new();
        for _ in 0..3 {
            ls.push(hybrid(&server, algorithm, &prefix, &clock).await);
        }
        let (m, max_owed) = (7u32, 10u32);
        let mut taken = 0;
        for _ in 0..20 {
            for l in &ls {
                let c = l.charge_owing("k", m, max_owed);
                assert_eq!(c.taken() + c.dropped(), m);
                taken += c.taken();
            }
            for l in &ls {
                l.sync().await.expect("sync");
            }
        }
        let n = ls.len() as u32;
        assert!(taken >= 100 + max_owed, "{algorithm:?}: taken {taken}");
        assert!(
            taken <= 100 + max_owed + 3 * n * m,
            "{algorithm:?}: taken {taken}"
        );
        sync_all(&ls.iter().collect::<Vec<_>>()).await;
        for l in &ls {
            assert_eq!(l.charge_owing("k", m, max_owed).taken(), 0, "{algorithm:?}");
        }
    }
}

/// Issue 37 item 3: a bucket's debt past 2^32 requests. 8 per second, burst 4: two
/// charges of `u32::MAX` owing at most `u32::MAX`, then a burst of 3, leave the key
/// `2^32` requests past its quota; every charge on it then failed with a `BadReply`
/// (the script replied owed = 2^32, which the client refused). `owed` saturates at
/// `u32::MAX`, as in-process: the two agree, and so after a backward clock step.
#[tokio::test]
async fn a_debt_past_2_32_requests_saturates_owed() {
    let server = RedisServer::start();
    let q = |burst| Quota::per_second(8).with_burst(burst);
    for algorithm in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
        let clock = ManualClock::new();
        clock.set(Duration::from_secs(10));
        let local = RateLimiter::builder(algorithm, q(4))
            .clock(clock.clone())
            .build()
            .unwrap();
        let prefix = format!("owed-2-32:{algorithm:?}");
        let l = remote(&server, algorithm, q(4), &prefix, Some(&clock)).await;
        for _ in 0..2 {
            let want = local.charge_owing(u32::MAX, u32::MAX);
            let got = l.charge_owing("k", u32::MAX, u32::MAX).await.unwrap();
            assert_eq!((got.taken(), got.owed()), (want.taken(), want.owed()));
        }
        local.set_quota(q(3)).unwrap();
        l.set_quota(q(3)).unwrap();
        for back in [false, true] {
            if back {
                clock.set(Duration::from_secs(9));
            }
            for n in [0, 1] {
                let want = local.charge(n);
                let got = l.charge("k", n).await.unwrap_or_else(|e| {
                    panic!("{algorithm:?} charge {n} (clock back: {back}): {e}")
                });
                assert_eq!(got.owed(), u32::MAX, "{algorithm:?} charge {n}");
                assert!(!got.fit());
                assert_eq!(
                    (
                        view(&got.decision()),
                        got.taken(),
                        got.owed(),
                        got.dropped()
                    ),
                    (
                        view(&want.decision()),
                        want.taken(),
                        want.owed(),
                        want.dropped()
                    ),
                    "{algorithm:?} charge {n} (clock back: {back})"
                );
            }
        }
    }
}

/// Issue 37 item 3's differential: a leaky bucket charged with `max_owed = u32::MAX`
/// and costs up to `u32::MAX`, under readings that step back, against the engine:
/// every charge, give-back and peek agrees, debts past 2^32 requests included (a
/// schedule that never reaches one fails).
#[tokio::test]
async fn debts_past_2_32_requests_agree_with_the_local_engine() {
    let server = RedisServer::start();
    let quota = Quota::new(10, Duration::from_secs(1)).with_burst(6);
    for seed in 1..=3u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let clock = ManualClock::new();
        let mut now_us = 1_000_000_000u64;
        clock.set(Duration::from_micros(now_us));
        let local = RateLimiter::builder(Algorithm::LeakyBucket, quota)
            .clock(clock.clone())
            .build()
            .unwrap();
        let prefix = format!("owed-2-32-diff:{seed}");
        let l = remote(
            &server,
            Algorithm::LeakyBucket,
            quota,
            &prefix,
            Some(&clock),
        )
        .await;
        let mut saturated = 0;
        for step in 0..200 {
            match rng.u8(0..10) {
                0..=1 => now_us -= rng.u64(0..2_000_000),
                2..=3 => now_us += rng.u64(0..2_000_000),
                _ => {}
            }
            clock.set(Duration::from_micros(now_us));
            let what = match rng.u8(0..10) {
                0..=5 => {
                    let n = match rng.u8(0..4) {
                        0 => 0,
                        1 => rng.u32(1..=12),
                        _ => u32::MAX - rng.u32(0..3),
                    };
                    let want = local.charge_owing(n, u32::MAX);
                    let got = l
                        .charge_owing("k", n, u32::MAX)
                        .await
                        .unwrap_or_else(|e| panic!("seed {seed} step {step} charge {n}: {e}"));
                    assert_eq!(
                        (
                            view(&got.decision()),
                            got.fit(),
                            got.taken(),
                            got.owed(),
                            got.dropped()
                        ),
                        (
                            view(&want.decision()),
                            want.fit(),
                            want.taken(),
                            want.owed(),
                            want.dropped()
                        ),
                        "seed {seed} step {step} charge {n}"
                    );
                    saturated += u32::from(got.owed() == u32::MAX);
                    format!("charge {n}")
                }
                6..=7 => {
                    let n = rng.u32(0..=20);
                    let want = local.give_back(n);
                    let got = l.give_back("k", n).await.unwrap();
                    assert_eq!(got, want, "seed {seed} step {step} give back {n}");
                    format!("give back {n}")
                }
                _ => {
                    let want = local.check();
                    let got = l.check("k").await.unwrap();
                    assert_eq!(view(&got), view(&want), "seed {seed} step {step} check");
                    "check".to_string()
                }
            };
            let want = local.peek_n(0).unwrap();
            let got = l.check_n("k", 0).await.unwrap();
            assert_eq!(
                view(&got),
                view(&want),
                "seed {seed} step {step} peek after {what}"
            );
        }
        assert!(
            saturated > 5,
            "seed {seed}: only {saturated} debts past 2^32"
        );
    }
}
