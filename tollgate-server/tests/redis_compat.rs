//! Issue 29's items on Redis exact mode (a real redis-server): a lowered limit at reload
//! keeps the counts kept in Redis, `hits_addend: 0` reports the key as it is, and every
//! status of a denied request reports the window's end in whole seconds.

mod common;

use common::{desc, request, Redis, TempDir};
use tollgate_server::backend::{Backend, BackendConfig, Mode};
use tollgate_server::engine::{Engine, InputLimits};
use tollgate_server::headers::HeaderMode;
use tollgate_server::proto::{Code, RateLimitRequest, RateLimitResponse};
use tollgate_server::rules::Rules;

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

async fn engine(redis: &Redis, yaml: &str) -> (TempDir, Engine) {
    let dir = TempDir::new("redis-compat");
    dir.write("d.yaml", yaml);
    let backend = Backend::new(BackendConfig {
        mode: Mode::Exact,
        redis: Some(redis.url()),
        ..BackendConfig::default()
    })
    .await
    .expect("redis backend");
    let e = Engine::new(
        Rules::default(),
        backend,
        HeaderMode::Off,
        InputLimits::default(),
    );
    tollgate_server::reload::reload(&e, &dir.0)
        .await
        .expect("config loads");
    (dir, e)
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

async fn settle_in_minute() {
    let s = unix_now() % 60;
    if s == 0 || s > 50 {
        tokio::time::sleep(std::time::Duration::from_secs(61 - s)).await;
    }
}

fn yaml(user: u32) -> String {
    format!(
        "domain: d
descriptors:
  - key: user
    rate_limit: {{unit: minute, requests_per_unit: {user}}}
  - key: big
    rate_limit: {{unit: minute, requests_per_unit: 100}}
  - key: zero
    rate_limit: {{unit: minute, requests_per_unit: 0}}
"
    )
}

async fn ask(e: &Engine, req: RateLimitRequest) -> RateLimitResponse {
    e.decide(&req).await.expect("decided")
}

fn user(hits: Option<u64>) -> RateLimitRequest {
    let mut d = desc(&[("user", "alice")]);
    d.hits_addend = hits;
    request("d", vec![d])
}

/// Item 1 on Redis: 5 a minute, 6 requests, lowered to 2, reloaded: denied.
#[tokio::test]
async fn a_lowered_limit_keeps_its_redis_counts() {
    let redis = Redis::start();
    settle_in_minute().await;
    let (dir, e) = engine(&redis, &yaml(5)).await;
    let mut codes = Vec::new();
    for _ in 0..6 {
        codes.push(ask(&e, user(None)).await.overall_code);
    }
    assert_eq!(codes, [OK, OK, OK, OK, OK, OVER]);
    dir.write("d.yaml", &yaml(2));
    tollgate_server::reload::reload(&e, &dir.0).await.unwrap();
    let r = ask(&e, user(None)).await;
    assert_eq!(r.overall_code, OVER, "{r:?}");
}

/// Item 4 on Redis: a check of 0 hits is OK with the remaining count as it is.
#[tokio::test]
async fn hits_addend_zero_on_redis() {
    let redis = Redis::start();
    settle_in_minute().await;
    let (_dir, e) = engine(&redis, &yaml(2)).await;
    assert_eq!(ask(&e, user(None)).await.overall_code, OK);
    let r = ask(&e, user(Some(0))).await;
    assert_eq!((r.overall_code, r.statuses[0].code), (OK, OK), "{r:?}");
    assert_eq!(r.statuses[0].limit_remaining, 1, "{r:?}");
    assert_eq!(ask(&e, user(None)).await.overall_code, OK);
    let r = ask(&e, user(Some(0))).await;
    assert_eq!((r.overall_code, r.statuses[0].code), (OK, OK), "{r:?}");
    assert_eq!(r.statuses[0].limit_remaining, 0, "{r:?}");
}

/// Item 8 on Redis: every status of a request denied by a limit of 0 (the others not
/// asked) carries the end of the window, in whole seconds, not a whole unit.
#[tokio::test]
async fn a_denied_request_reports_the_window_end_on_redis() {
    let redis = Redis::start();
    settle_in_minute().await;
    let (_dir, e) = engine(&redis, &yaml(2)).await;
    let before = 60 - unix_now() % 60;
    let r = ask(
        &e,
        request(
            "d",
            vec![
                desc(&[("big", "b")]),
                desc(&[("zero", "z")]),
                desc(&[("user", "u")]),
            ],
        ),
    )
    .await;
    let after = 60 - unix_now() % 60;
    assert_eq!(r.overall_code, OVER, "{r:?}");
    for s in &r.statuses {
        let d = s.duration_until_reset.unwrap();
        assert_eq!(d.nanos, 0, "{r:?}");
        let secs = u64::try_from(d.seconds).unwrap();
        assert!(
            (after..=before).contains(&secs),
            "{secs} not in {after}..={before}: {r:?}"
        );
    }
}
