//! The exact mode's buckets carry what a key used over a quota change **in requests**,
//! as the in-process engine does (issue 20, item 6): the state records the emission
//! interval that wrote it, and a script run under another interval converts the debt,
//! `TAT' = t + ⌈(TAT − t)·T_b / T_a⌉`, at the first request under the new quota.
//! Checked against the in-process `RateLimiter` fed the same calls on the same clock
//! (the change and the next request at one instant, where the lazy conversion and the
//! engine's eager one coincide).

use crate::server::RedisServer;
use std::time::Duration;
use tollgate::redis::{check_all, redis, Error, RedisRateLimiter};
use tollgate::{Algorithm, Decision, ManualClock, Quota, RateLimiter};

const BUCKETS: [Algorithm; 2] = [Algorithm::TokenBucket, Algorithm::LeakyBucket];
const MS: Duration = Duration::from_millis(1);

/// Durations rounded up to whole microseconds (the scripts compute in µs).
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
        .timeout(Duration::from_secs(5))
        .build()
        .await
        .expect("build")
}

fn local(algorithm: Algorithm, quota: Quota, clock: &ManualClock) -> RateLimiter<ManualClock> {
    RateLimiter::builder(algorithm, quota)
        .clock(clock.clone())
        .build()
        .expect("local")
}

/// The Redis limiter and the in-process engine, decided together and compared.
struct Pair {
    remote: RedisRateLimiter,
    local: RateLimiter<ManualClock>,
    what: String,
}

impl Pair {
    async fn new(
        server: &RedisServer,
        a: Algorithm,
        q: Quota,
        prefix: &str,
        c: &ManualClock,
    ) -> Self {
        Pair {
            remote: exact(server, a, q, &format!("{prefix}:{a:?}"), c).await,
            local: local(a, q, c),
            what: format!("{a:?} {prefix}"),
        }
    }

    /// Cost `n` (0: a peek) on both; the same decision, returned.
    async fn check_n(&self, n: u32) -> Decision {
        let r = self.remote.check_n("k", n).await.expect("decision");
        let l = self.local.check_n(n).expect("local");
        assert_eq!(view(&r), view(&l), "{}: cost {n}", self.what);
        r
    }

    /// Cost `n` on both, for the comparison alone.
    async fn agree(&self, n: u32) {
        let _ = self.check_n(n).await;
    }

    fn set_quota(&self, q: Quota) {
        self.remote.set_quota(q).expect("redis set_quota");
        self.local.set_quota(q).expect("local set_quota");
    }

    /// The raw value of the key in Redis.
    async fn raw(&self, server: &RedisServer) -> Option<String> {
        let mut conn = server.conn().await;
        redis::cmd("GET")
            .arg(self.remote.redis_key("k"))
            .query_async(&mut conn)
            .await
            .expect("GET")
    }
}

/// Go x/time/rate's TestReserveSetLimit on Redis: 5 per second with a burst of 2, two
/// at t0 and two at t2 (denied: the bucket is full until t4), then 10 per second. The
/// next request is decided as the in-process engine decides it: with the debt carried
/// over in requests (one request owed, 100 ms at the new rate) it is admitted at t2;
/// read at the new interval as before (two requests owed) it was denied.
#[tokio::test]
async fn raising_the_rate_as_x_time_rate_and_the_engine() {
    let server = RedisServer::start();
    for a in BUCKETS {
        for raise in [false, true] {
            let clock = ManualClock::new();
            clock.set(Duration::from_secs(1_000));
            let p = Pair::new(
                &server,
                a,
                Quota::per_second(5).with_burst(2),
                &format!("xrate:{raise}"),
                &clock,
            )
            .await;
            assert!(p.check_n(2).await.is_allowed());
            clock.advance(200 * MS);
            let second = p.check_n(2).await;
            if a == Algorithm::TokenBucket {
                assert!(!second.is_allowed());
                assert_eq!(second.retry_after(), Some(200 * MS));
            }
            if raise {
                p.set_quota(Quota::per_second(10).with_burst(2));
                // A peek converts for its answer and writes nothing.
                let peek = p.check_n(0).await;
                assert_eq!(peek.reset_after(), 100 * MS, "{a:?}: one request owed");
                assert!(p.raw(&server).await.unwrap().ends_with(" 200000"));
            }
            let next = p.check_n(1).await;
            if a == Algorithm::TokenBucket {
                assert!(next.is_allowed(), "{a:?} raise {raise}");
                let reset = if raise { 200 * MS } else { 400 * MS };
                assert_eq!(next.reset_after(), reset, "{a:?} raise {raise}");
            }
            if raise {
                // The admission stored the converted state with its interval.
                assert!(p.raw(&server).await.unwrap().ends_with(" 100000"));
            }
            // From here on both run on the same state: the same decisions.
            for _ in 0..20 {
                clock.advance(37 * MS);
                p.agree(1).await;
            }
        }
    }
}

/// A key that used 10 of a 10-per-minute plan has used 10 of a 1,000-per-minute plan
/// (not all of it); a key that used 10 of the 1,000 has nothing left on 10 per minute.
#[tokio::test]
async fn plan_upgrades_and_downgrades_carry_over_what_was_used() {
    let server = RedisServer::start();
    let (free, pro) = (Quota::per_minute(10), Quota::per_minute(1_000));
    for a in BUCKETS {
        let clock = ManualClock::new();
        clock.set(Duration::from_secs(5_000));
        let up = Pair::new(&server, a, free, "upgrade", &clock).await;
        assert!(up.check_n(10).await.is_allowed());
        assert!(!up.check_n(1).await.is_allowed());
        up.set_quota(pro);
        assert_eq!(up.check_n(0).await.remaining(), 1_000 - 10, "{a:?}");
        let d = up.check_n(1).await;
        assert!(d.is_allowed(), "{a:?}");
        assert_eq!(d.remaining(), 1_000 - 11, "{a:?}");

        let down = Pair::new(&server, a, pro, "downgrade", &clock).await;
        assert!(down.check_n(10).await.is_allowed());
        down.set_quota(free);
        for _ in 0..3 {
            let d = down.check_n(1).await;
            assert!(!d.is_allowed(), "{a:?}: 10 used of 10");
            assert_eq!(d.remaining(), 0);
            assert_eq!(down.check_n(0).await.remaining(), 0);
        }
        // And back up: what was used is still 10 requests (the denials stored it in the
        // free plan's interval, converted back now).
        down.set_quota(pro);
        assert_eq!(down.check_n(1).await.remaining(), 1_000 - 11, "{a:?}");
    }
}

/// A key retrying after a lowered limit pays its debt off at the new rate: its first
/// denial stores the conversion, so a retry 100 ms later is still denied (at the old
/// rate it would have been admitted after about 60 ms), as in the engine.
#[tokio::test]
async fn a_denial_under_a_lowered_limit_stores_the_conversion() {
    let server = RedisServer::start();
    for a in BUCKETS {
        let clock = ManualClock::new();
        clock.set(Duration::from_secs(7_000));
        let p = Pair::new(&server, a, Quota::per_minute(1_000), "retry", &clock).await;
        assert!(p.check_n(10).await.is_allowed());
        p.set_quota(Quota::per_minute(10));
        assert!(!p.check_n(1).await.is_allowed(), "{a:?}");
        assert!(p.raw(&server).await.unwrap().ends_with(" 6000000"), "{a:?}");
        for _ in 0..5 {
            clock.advance(100 * MS);
            assert!(!p.check_n(1).await.is_allowed(), "{a:?}");
        }
    }
}

/// Intervals whose product with the debt is far past 2^53 (where doubles stop being
/// exact): the conversion is still exact to the microsecond. (Computed in doubles,
/// `⌈d·T_b / T_a⌉` comes out one short here for an elapsed 1 or 2 µs.)
#[tokio::test]
async fn the_conversion_is_exact_past_2_pow_53() {
    let server = RedisServer::start();
    let (t_a, t_b) = (1_000_000_007u128, 3_000_000_001u128);
    let qa = Quota::new(1, Duration::from_micros(t_a as u64)).with_burst(3);
    let qb = Quota::new(1, Duration::from_micros(t_b as u64)).with_burst(5);
    for a in BUCKETS {
        for elapsed in [1u128, 2, 123_456_789] {
            let clock = ManualClock::new();
            clock.set(Duration::from_secs(7_000));
            let p = Pair::new(&server, a, qa, &format!("exact:{elapsed}"), &clock).await;
            assert!(p.check_n(3).await.is_allowed());
            clock.advance(Duration::from_micros(elapsed as u64));
            p.set_quota(qb);
            let debt = 3 * t_a - elapsed;
            assert!(debt * t_b > 1 << 60);
            let owed = (debt * t_b).div_ceil(t_a);
            let peek = p.check_n(0).await;
            assert_eq!(us(peek.reset_after()), owed, "{a:?} {elapsed}");
            assert_eq!(u128::from(peek.remaining()), (5 * t_b - owed) / t_b);
            p.agree(1).await;
            p.agree(1).await;
        }
    }
}

/// A debt no wait can pay (a million a second used up, then one a day): a denial, not
/// an error, and nothing past what the scripts compute exactly.
#[tokio::test]
async fn a_debt_past_any_wait_is_capped() {
    let server = RedisServer::start();
    for a in BUCKETS {
        let clock = ManualClock::new();
        clock.set(Duration::from_secs(9_000));
        let l = exact(
            &server,
            a,
            Quota::per_second(1_000_000),
            &format!("capped-{a:?}"),
            &clock,
        )
        .await;
        assert!(l.check_n("k", 1_000_000).await.unwrap().is_allowed());
        l.set_quota(Quota::new(1, Duration::from_secs(86_400)))
            .unwrap();
        let d = l.check("k").await.expect("a decision");
        assert!(!d.is_allowed());
        let years = d.retry_after().unwrap().as_secs() / (365 * 86_400);
        assert!((30..=40).contains(&years), "{a:?}: {d:?}");
        assert_eq!(l.check_n("k", 0).await.unwrap().remaining(), 0);
    }
}

/// State written by the previous version (a bare TAT, no interval) is read as written
/// under the current interval, decided as before, and rewritten with the interval by
/// the next admission; a value no version wrote is still foreign state.
#[tokio::test]
async fn state_in_the_old_format_decides_as_before() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    for a in BUCKETS {
        let clock = ManualClock::new();
        clock.set(Duration::from_secs(11_000));
        let now_us = 11_000_000_000u64;
        let p = Pair::new(&server, a, Quota::per_minute(10), "old", &clock).await;
        // 9 of 10 used: the TAT 9 intervals (6 s each) ahead, as the old script wrote it.
        let old = (now_us + 9 * 6_000_000).to_string();
        let _: () = redis::cmd("SET")
            .arg(p.remote.redis_key("k"))
            .arg(&old)
            .query_async(&mut conn)
            .await
            .unwrap();
        // The engine fed the same 9.
        assert!(p.local.check_n(9).unwrap().is_allowed());
        assert_eq!(p.check_n(0).await.remaining(), 1);
        let d = p.check_n(1).await;
        assert!(d.is_allowed() && d.remaining() == 0, "{a:?}");
        assert_eq!(
            p.raw(&server).await.unwrap(),
            format!("{} 6000000", now_us + 60_000_000)
        );
        let d = p.check_n(1).await;
        assert!(!d.is_allowed());
        assert_eq!(d.retry_after(), Some(Duration::from_secs(6)));

        // An old value under a changed quota is read at the new interval (the old
        // behaviour: it does not say which interval wrote it).
        let q = Pair::new(&server, a, Quota::per_minute(1_000), "old-changed", &clock).await;
        let _: () = redis::cmd("SET")
            .arg(q.remote.redis_key("k"))
            .arg((now_us + 10 * 60_000).to_string())
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(q.remote.check("k").await.unwrap().remaining(), 1_000 - 11);

        for foreign in [
            "12 abc",
            "12 0",
            "12 1125899906842625",
            "-5",
            "1e9",
            "12 6000000 7",
        ] {
            let _: () = redis::cmd("SET")
                .arg(p.remote.redis_key("f"))
                .arg(foreign)
                .query_async(&mut conn)
                .await
                .unwrap();
            let e = p.remote.check("f").await.expect_err(foreign);
            assert!(matches!(e, Error::ForeignState(_)), "{foreign}: {e}");
        }
    }
}

/// The multi-limit script converts too, and a denial by the converted bucket takes
/// nothing from the other limits.
#[tokio::test]
async fn check_all_carries_over_in_requests() {
    let server = RedisServer::start();
    for a in BUCKETS {
        let clock = ManualClock::new();
        clock.set(Duration::from_secs(13_000));
        let bucket = exact(
            &server,
            a,
            Quota::per_minute(10),
            &format!("multi-b-{a:?}"),
            &clock,
        )
        .await;
        let window = exact(
            &server,
            Algorithm::FixedWindow,
            Quota::per_hour(100),
            &format!("multi-w-{a:?}"),
            &clock,
        )
        .await;
        let limits = [(&bucket, "{u}"), (&window, "{u}")];
        let d = check_all(&limits, 10).await.unwrap();
        assert!(d.is_allowed());
        bucket.set_quota(Quota::per_minute(1_000)).unwrap();
        let d = check_all(&limits, 1).await.unwrap();
        assert!(d.is_allowed(), "{a:?}");
        assert_eq!(d.decisions()[0].remaining(), 1_000 - 11, "{a:?}");
        assert_eq!(d.decisions()[1].remaining(), 100 - 11);
        // Down to 10 per minute: 11 used of 10, denied; the window keeps its count.
        bucket.set_quota(Quota::per_minute(10)).unwrap();
        let d = check_all(&limits, 1).await.unwrap();
        assert!(!d.is_allowed(), "{a:?}");
        assert!(!d.decisions()[0].is_allowed());
        assert_eq!(
            window.check_n("{u}", 0).await.unwrap().remaining(),
            100 - 11
        );
    }
}
