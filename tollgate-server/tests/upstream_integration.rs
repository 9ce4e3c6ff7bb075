//! envoyproxy/ratelimit's `test/integration/integration_test.go` (at f2fb157), ported:
//! its calls against its runtime configuration (`testdata/upstream/integration/`, copied
//! unchanged) and the whole response messages it expects, compared field for field (the
//! durations taken from the response as upstream takes them, then checked to be whole
//! seconds within the unit), on the in-process backend and on Redis (exact mode), with
//! upstream's headers off. Where tollgate-server differs on purpose (a denied request takes
//! nothing, unless `--count-denied-hits`) the test says so.

mod common;

use common::{call, desc, request, Redis, Server, TempDir};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tollgate_server::proto::{Code, DescriptorStatus, RateLimit, RateLimitResponse};

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;
const SECOND: i32 = 1;
const MINUTE: i32 = 2;
const HOUR: i32 = 3;

type Client =
    tollgate_server::proto::rate_limit_service::rate_limit_service_client::RateLimitServiceClient<
        tonic::transport::Channel,
    >;

fn upstream_dir(dir: &TempDir) {
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/upstream");
    for f in ["basic.yaml", "another.yaml", "share_threshold.yaml"] {
        dir.write(
            f,
            &std::fs::read_to_string(base.join("integration").join(f)).unwrap(),
        );
    }
}

/// A server on upstream's runtime configuration; on Redis when `redis` is given.
fn server(dir: &TempDir, redis: Option<&Redis>, extra: &[&str]) -> Server {
    let url = redis.map(Redis::url);
    let mut args = vec!["--response-headers", "off"];
    if let Some(u) = url.as_deref() {
        args.extend(["--redis", u]);
    }
    args.extend(extra);
    Server::start(&dir.0, &args)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Waits until `margin` seconds remain in the current minute (upstream's test relies on
/// its minute limits not resetting in the middle).
async fn settle_in_minute(margin: u64) {
    let s = unix_now() % 60;
    if s + margin >= 60 {
        tokio::time::sleep(Duration::from_secs(60 - s + 1)).await;
    }
}

/// Upstream's `newDescriptorStatus`.
fn status(
    code: i32,
    rpu: u32,
    unit: i32,
    remaining: u32,
    dur: DescriptorStatus,
) -> DescriptorStatus {
    let dur = dur.duration_until_reset;
    let d = dur.expect("a limited status has a duration");
    assert_eq!(d.nanos, 0, "whole seconds: {d:?}");
    let unit_secs = tollgate_server::config::Unit::from_proto(unit)
        .unwrap()
        .period()
        .as_secs();
    assert!(
        (1..=i64::try_from(unit_secs).unwrap()).contains(&d.seconds),
        "{d:?} within the unit"
    );
    DescriptorStatus {
        code,
        current_limit: Some(RateLimit {
            name: String::new(),
            requests_per_unit: rpu,
            unit,
        }),
        limit_remaining: remaining,
        duration_until_reset: Some(d),
    }
}

fn expect(overall: i32, statuses: Vec<DescriptorStatus>) -> RateLimitResponse {
    RateLimitResponse {
        overall_code: overall,
        statuses,
        response_headers_to_add: Vec::new(),
        request_headers_to_add: Vec::new(),
    }
}

async fn ask(c: &mut Client, domain: &str, descs: &[(&str, &str)]) -> RateLimitResponse {
    let d = descs.iter().map(|&(k, v)| desc(&[(k, v)])).collect();
    call(c, request(domain, d)).await.expect("call")
}

fn fresh() -> String {
    format!("{}{}", unix_now(), common::free_port())
}

/// `testBasicBaseConfig`, without the local cache's statistics (no local cache here).
/// `counting`: `--count-denied-hits`, upstream's default counting; else tollgate's
/// default, which answers as upstream's `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`.
async fn basic(redis: Option<&Redis>, counting: bool) {
    let dir = TempDir::new("upstream-it");
    upstream_dir(&dir);
    let extra: &[&str] = if counting {
        &["--count-denied-hits"]
    } else {
        &[]
    };
    let s = server(&dir, redis, extra);
    let mut c = s.grpc_client().await;
    settle_in_minute(15).await;

    let r = ask(&mut c, "foo", &[("hello", "world")]).await;
    let none = DescriptorStatus {
        code: OK,
        current_limit: None,
        limit_remaining: 0,
        duration_until_reset: None,
    };
    assert_eq!(r, expect(OK, vec![none]));

    let r = ask(&mut c, "basic", &[("key1", "foo")]).await;
    let want = expect(OK, vec![status(OK, 50, SECOND, 49, r.statuses[0].clone())]);
    assert_eq!(r, want);

    let v = fresh();
    for i in 0..25u32 {
        let r = ask(&mut c, "another", &[("key2", &v)]).await;
        let (code, left) = if i >= 20 {
            (OVER, 0)
        } else {
            (OK, 20 - (i + 1))
        };
        let want = expect(
            code,
            vec![status(code, 20, MINUTE, left, r.statuses[0].clone())],
        );
        assert_eq!(r, want, "call {i}");
    }

    let v = fresh();
    for i in 0..15u32 {
        let r = ask(&mut c, "another", &[("key2", &v), ("key3", &v)]).await;
        let (code, left2) = if i >= 10 {
            (OVER, 0)
        } else {
            (OK, 10 - (i + 1))
        };
        let left1 = if i >= 10 && !counting {
            // Upstream with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: unchanged at 10.
            10
        } else {
            20 - (i + 1)
        };
        let want = expect(
            code,
            vec![
                status(OK, 20, MINUTE, left1, r.statuses[0].clone()),
                status(code, 10, HOUR, left2, r.statuses[1].clone()),
            ],
        );
        assert_eq!(r, want, "call {i} (counting denied hits: {counting})");
    }

    let r1 = ask(&mut c, "another", &[("key4", "durTest")]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let r2 = ask(&mut c, "another", &[("key4", "durTest")]).await;
    let secs = |r: &RateLimitResponse| r.statuses[0].duration_until_reset.unwrap().seconds;
    assert!(secs(&r2) < secs(&r1), "{r1:?} {r2:?}");
}

#[tokio::test]
async fn basic_config_in_process() {
    basic(None, false).await;
}

#[tokio::test]
async fn basic_config_in_process_counting_denied_hits() {
    basic(None, true).await;
}

#[tokio::test]
async fn basic_config_on_redis() {
    let redis = Redis::start();
    basic(Some(&redis), false).await;
}

#[tokio::test]
async fn basic_config_on_redis_counting_denied_hits() {
    let redis = Redis::start();
    basic(Some(&redis), true).await;
}

/// `testShareThreshold`.
async fn share_threshold(redis: Option<&Redis>) {
    let dir = TempDir::new("upstream-share");
    upstream_dir(&dir);
    let s = server(&dir, redis, &[]);
    let mut c = s.grpc_client().await;
    let domain = "share-threshold-test";
    for _ in 0..10 {
        let r = ask(&mut c, domain, &[("files", "files/a.pdf")]).await;
        assert!(r.overall_code == OK || r.overall_code == OVER);
    }
    let r = ask(&mut c, domain, &[("files", "files/b.csv")]).await;
    let want = expect(OVER, vec![status(OVER, 10, HOUR, 0, r.statuses[0].clone())]);
    assert_eq!(r, want);
    for i in 0..10 {
        let v = format!("files_no_share/{}-{i}", fresh());
        let r = ask(&mut c, domain, &[("files_no_share", &v)]).await;
        let want = expect(OK, vec![status(OK, 10, HOUR, 9, r.statuses[0].clone())]);
        assert_eq!(r, want);
    }
}

#[tokio::test]
async fn share_threshold_in_process() {
    share_threshold(None).await;
}

#[tokio::test]
async fn share_threshold_on_redis() {
    let redis = Redis::start();
    share_threshold(Some(&redis)).await;
}

/// `testConfigReload`: a file added to the directory is served, and its removal reloads.
async fn config_reload(redis: Option<&Redis>) {
    let dir = TempDir::new("upstream-reload");
    upstream_dir(&dir);
    let s = server(&dir, redis, &[]);
    let mut c = s.grpc_client().await;
    let r = ask(&mut c, "reload", &[("block", "foo")]).await;
    let none = DescriptorStatus {
        code: OK,
        current_limit: None,
        limit_remaining: 0,
        duration_until_reset: None,
    };
    assert_eq!(r, expect(OK, vec![none]));
    let reload = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/upstream/integration-reload.yaml");
    dir.write("reload.yaml", &std::fs::read_to_string(reload).unwrap());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let r = loop {
        let r = ask(&mut c, "reload", &[("key1", "foo")]).await;
        if r.statuses[0].current_limit.is_some() {
            break r;
        }
        assert!(std::time::Instant::now() < deadline, "never reloaded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let want = expect(OK, vec![status(OK, 50, SECOND, 49, r.statuses[0].clone())]);
    assert_eq!(r, want);
    let loads = || s.log_text().matches("configuration loaded").count();
    let before = loads();
    std::fs::remove_file(dir.0.join("reload.yaml")).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while loads() == before {
        assert!(
            std::time::Instant::now() < deadline,
            "removal never reloaded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn config_reload_in_process() {
    config_reload(None).await;
}

#[tokio::test]
async fn config_reload_on_redis() {
    let redis = Redis::start();
    config_reload(Some(&redis)).await;
}
