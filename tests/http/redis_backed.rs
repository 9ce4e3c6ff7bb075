//! A Redis-backed policy (exact mode, asynchronous) through a real axum server and a real
//! `redis-server`; a Redis outage without a fallback answers 503.

use tollgate::http::{HeaderKey, Policy, RateLimitLayer};
use tollgate::redis::RedisRateLimiter;
use tollgate::{Algorithm, Quota};

use crate::redis_server::RedisServer;
use crate::support::{get_with, parse_list, serve};

#[tokio::test]
async fn redis_policy_limits_then_503_when_redis_is_gone() {
    let mut redis = RedisServer::start();
    let limiter = RedisRateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(2))
        .url(redis.url())
        .prefix("http-test")
        .build()
        .await
        .unwrap();
    let policy = Policy::new("tenant", limiter, HeaderKey::new("x-tenant").unwrap());
    let addr = serve(RateLimitLayer::new(policy)).await;
    let acme = [("x-tenant", "acme")];
    for left in [1, 0] {
        let r = get_with(addr, &acme).await;
        assert_eq!(r.status, 200);
        assert_eq!(
            parse_list(r.header("ratelimit").unwrap())[0].param("r"),
            left
        );
    }
    let r = get_with(addr, &acme).await;
    assert_eq!(r.status, 429);
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(get_with(addr, &[("x-tenant", "globex")]).await.status, 200);

    redis.stop();
    let r = get_with(addr, &[("x-tenant", "initech")]).await;
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.body.contains("tenant"), "{}", r.body);
}
