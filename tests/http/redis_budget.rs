//! Token budgets on the Redis limiters (issue 30): `Policy::budget` on a
//! `RedisRateLimiter` (exact mode: admitted by the script's peek mode, charged by a task
//! spawned when the body ends) and on a `HybridRateLimiter` (peeked and charged locally),
//! through a real axum server on 127.0.0.1, a real HTTP client and a real
//! `redis-server`, every limiter on a `ManualClock` so that every number is exact. Redis
//! stopped between admission and the body's end: the lost charge is counted in
//! `RedisStats::background_errors`. The hybrid's request-count peek inserts no key.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::get;
use http::Uri;
use tokio::sync::{mpsc, Mutex};
use tollgate::http::{Budget, HeaderKey, Policy, RateLimitLayer};
use tollgate::redis::{HybridRateLimiter, RedisRateLimiter};
use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, Quota};

use crate::redis_server::RedisServer;
use crate::support::{parse_list, send, serve_app, Reply};

/// `GET /gen?tokens=N` charges N to the request's budget and answers "N tokens".
fn app(policy: Policy) -> axum::Router {
    axum::Router::new()
        .route(
            "/gen",
            get(|budget: Budget, uri: Uri| async move {
                let n = tokens_of(&uri);
                budget.charge(n);
                format!("{n} tokens")
            }),
        )
        .layer(RateLimitLayer::new(policy))
}

fn tokens_of(uri: &Uri) -> u32 {
    uri.query()
        .and_then(|q| q.strip_prefix("tokens="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

async fn generate(addr: std::net::SocketAddr, key: &str, n: u32) -> Reply {
    send(
        addr,
        "GET",
        &format!("/gen?tokens={n}"),
        &[("x-api-key", key)],
        "",
    )
    .await
}

/// The `(r, t)` of the `RateLimit` field's one member.
fn rate_limit(reply: &Reply) -> (i64, i64) {
    let items = parse_list(reply.header("ratelimit").expect("a RateLimit field"));
    assert_eq!(items.len(), 1, "{items:?}");
    (items[0].param("r"), items[0].param("t"))
}

/// Waits (at most 5 s) until `done` holds: the exact mode's charge lands on a task of
/// its own, one round trip after the body ended.
async fn eventually<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done().await {
        assert!(Instant::now() < deadline, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn exact(redis: &RedisServer, clock: &ManualClock, prefix: &str) -> RedisRateLimiter {
    // 600 tokens a minute (10 a second, a burst of 600).
    RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_minute(600))
        .url(redis.url())
        .prefix(prefix)
        .clock(clock.clone())
        .timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap()
}

async fn left(tokens: &RedisRateLimiter, key: &str) -> u32 {
    tokens.peek_n(key, 0).await.unwrap().remaining()
}

#[tokio::test]
async fn exact_mode_admits_by_a_peek_charges_at_the_end_and_refuses_the_debt() {
    let redis = RedisServer::start();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(3_600));
    let tokens = exact(&redis, &clock, "budget-exact").await;
    let policy = Policy::budget(
        "tokens",
        tokens.clone(),
        HeaderKey::new("x-api-key").unwrap(),
    );
    let addr = serve_app(app(policy)).await;

    // 500 of 600: admitted with everything left (nothing taken at admission), then
    // charged once the body ended.
    let r = generate(addr, "k1", 500).await;
    assert_eq!((r.status, r.body.as_str()), (200, "500 tokens"));
    assert_eq!(rate_limit(&r), (600, 0));
    eventually("the charge of 500", || async {
        left(&tokens, "k1").await == 100
    })
    .await;

    // 300 with 100 left: admitted, charged in full: 200 owed.
    let r = generate(addr, "k1", 300).await;
    assert_eq!(r.status, 200);
    assert_eq!(rate_limit(&r), (100, 50)); // whole again in 500 / 10 s
    eventually("the charge of 300", || async {
        tokens.peek("k1").await.unwrap().retry_after() == Some(Duration::from_millis(20_100))
    })
    .await;

    // The debt: 200 tokens at 10 a second, then 0.1 s for the token a request needs.
    let r = generate(addr, "k1", 10).await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.header("retry-after"), Some("21"));
    assert_eq!(rate_limit(&r), (0, 21));
    // Refused: nothing charged, then or later.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        tokens.peek("k1").await.unwrap().retry_after(),
        Some(Duration::from_millis(20_100))
    );

    // Another key has its own budget; once the debt is paid, k1 is admitted again.
    assert_eq!(generate(addr, "k2", 1).await.status, 200);
    clock.advance(Duration::from_millis(20_100));
    let r = generate(addr, "k1", 1).await;
    assert_eq!(r.status, 200);
    assert_eq!(rate_limit(&r).0, 1);
    eventually("the charge of 1", || async {
        left(&tokens, "k1").await == 0
    })
    .await;
    let s = tokens.stats();
    assert_eq!((s.errors, s.background_errors), (0, 0), "{s:?}");
}

#[tokio::test]
async fn a_charge_lost_to_a_redis_outage_is_counted() {
    let mut redis = RedisServer::start();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(3_600));
    let tokens = exact(&redis, &clock, "budget-outage").await;
    let policy = Policy::budget(
        "tokens",
        tokens.clone(),
        HeaderKey::new("x-api-key").unwrap(),
    );
    // The handler says when it runs (the request was admitted), then waits for the test
    // before it answers.
    let (admitted_tx, mut admitted) = mpsc::channel::<()>(1);
    let (go, go_rx) = mpsc::channel::<()>(1);
    let go_rx = Arc::new(Mutex::new(go_rx));
    let app = axum::Router::new()
        .route(
            "/slow",
            get(move |budget: Budget| {
                let (admitted_tx, go_rx) = (admitted_tx.clone(), Arc::clone(&go_rx));
                async move {
                    budget.charge(70);
                    admitted_tx.send(()).await.unwrap();
                    go_rx.lock().await.recv().await;
                    "done"
                }
            }),
        )
        .layer(RateLimitLayer::new(policy));
    let addr = serve_app(app).await;
    let request =
        tokio::spawn(async move { send(addr, "GET", "/slow", &[("x-api-key", "k1")], "").await });
    admitted.recv().await.unwrap();
    assert_eq!(tokens.stats().background_errors, 0);
    redis.stop();
    go.send(()).await.unwrap();
    let r = request.await.unwrap();
    assert_eq!((r.status, r.body.as_str()), (200, "done"));
    eventually("the lost charge counted", || async {
        tokens.stats().background_errors == 1
    })
    .await;
    assert!(tokens.stats().errors >= 1);
    // And with Redis gone, the next request is answered 503 (no fallback), not admitted.
    let r = send(addr, "GET", "/slow", &[("x-api-key", "k1")], "").await;
    assert_eq!(r.status, 503, "{}", r.body);
}

#[tokio::test]
async fn hybrid_mode_peeks_and_charges_locally() {
    let redis = RedisServer::start();
    let clock = ManualClock::new();
    // 10 s into a 60 s window: the window ends in 50 s.
    clock.advance(Duration::from_secs(3_610));
    let tokens = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(600))
        .url(redis.url())
        .prefix("budget-hybrid")
        .sync_interval(Duration::MAX)
        .clock(clock.clone())
        .build()
        .await
        .unwrap();
    let policy = Policy::budget(
        "tokens",
        tokens.clone(),
        HeaderKey::new("x-api-key").unwrap(),
    );
    let addr = serve_app(app(policy)).await;
    let left = |key: &str| tokens.peek_n(key, 0).unwrap().remaining();

    let r = generate(addr, "k1", 500).await;
    assert_eq!((r.status, rate_limit(&r)), (200, (600, 0)));
    assert_eq!(
        left("k1"),
        100,
        "charged at once, before the client saw the end"
    );
    let r = generate(addr, "k1", 300).await;
    assert_eq!((r.status, rate_limit(&r)), (200, (100, 50)));
    assert_eq!(left("k1"), 0);
    // 800 counted in a window of 600: refused until the window ends.
    let r = generate(addr, "k1", 10).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("50"));
    assert_eq!(rate_limit(&r), (0, 50));
    // A refused key and a peeked one: only k1 is in the table.
    assert_eq!(tokens.stats().keys, 1);
    // The charges go to Redis with the next sync.
    assert_eq!(tokens.sync().await.unwrap(), 1);
    clock.advance(Duration::from_secs(50));
    assert_eq!(generate(addr, "k1", 1).await.status, 200);
}

/// A request-count policy on the hybrid mode, with another policy in the same layer:
/// the layer peeks every policy first, and the hybrid's peek inserts nothing, so a
/// request the other policy refuses leaves no key behind (it used to insert one, with
/// a decision counted and a key to sync).
#[tokio::test]
async fn the_hybrid_request_count_peek_inserts_nothing() {
    let redis = RedisServer::start();
    let hybrid = HybridRateLimiter::builder(Algorithm::SlidingWindow, Quota::per_minute(100))
        .url(redis.url())
        .prefix("count-hybrid")
        .sync_interval(Duration::MAX)
        .build()
        .await
        .unwrap();
    let closed = KeyedRateLimiter::<String>::builder(Algorithm::FixedWindow, Quota::per_hour(1))
        .build()
        .unwrap();
    assert!(closed.check(&"t1".to_owned()).is_allowed());
    let layer = RateLimitLayer::new(Policy::new(
        "tenant",
        hybrid.clone(),
        HeaderKey::new("x-tenant").unwrap(),
    ))
    .policy(Policy::new(
        "hourly",
        closed,
        HeaderKey::new("x-tenant").unwrap(),
    ));
    let addr = serve_app(
        axum::Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer),
    )
    .await;
    let r = send(addr, "GET", "/", &[("x-tenant", "t1")], "").await;
    assert_eq!(r.status, 429);
    let s = hybrid.stats();
    assert_eq!((s.keys, s.decisions), (0, 0), "{s:?}");
    assert_eq!(hybrid.sync().await.unwrap(), 0);
}
