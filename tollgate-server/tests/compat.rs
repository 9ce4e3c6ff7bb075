//! Issue 29's items, decided in process (the engine the gRPC service and `/json` share, on
//! the in-process backend): each answer as envoyproxy/ratelimit gives it.

mod common;

use common::{desc, request, TempDir};
use tollgate_server::backend::{Backend, BackendConfig};
use tollgate_server::engine::{Engine, InputLimits, Policy};
use tollgate_server::headers::HeaderMode;
use tollgate_server::proto::{Code, RateLimitOverride, RateLimitRequest, RateLimitResponse};
use tollgate_server::rules::Rules;

/// An engine serving `yaml` (one file), and its directory (to change and reload).
async fn engine(yaml: &str) -> (TempDir, Engine) {
    let dir = TempDir::new("compat");
    dir.write("d.yaml", yaml);
    let backend = Backend::new(BackendConfig::default())
        .await
        .expect("backend");
    let e = Engine::new(
        Rules::default(),
        backend,
        HeaderMode::Ietf,
        InputLimits::default(),
    );
    tollgate_server::reload::reload(&e, &dir.0)
        .await
        .expect("config loads");
    (dir, e)
}

async fn decide(e: &Engine, req: RateLimitRequest) -> RateLimitResponse {
    e.decide(&req).await.expect("decided")
}

fn one(domain: &str, pairs: &[(&str, &str)], hits: Option<u64>) -> RateLimitRequest {
    let mut d = desc(pairs);
    d.hits_addend = hits;
    request(domain, vec![d])
}

/// Whole seconds since the Unix epoch.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Waits until at least `margin` seconds remain in the current minute, so that a test's
/// calls fall in one fixed window, and not on a second that is a multiple of 60.
async fn settle_in_minute(margin: u64) {
    let s = unix_now() % 60;
    if s == 0 || s + margin >= 60 {
        tokio::time::sleep(std::time::Duration::from_secs(60 - s + 1)).await;
    }
}

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

fn limit_yaml(rpu: u32) -> String {
    format!(
        "domain: d
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: {rpu}
"
    )
}

/// Item 1: 5 per minute, 6 requests, lowered to 2 and reloaded: the next request is
/// denied (the 5 used still count), and raised again the counts still follow.
#[tokio::test]
async fn a_limit_lowered_at_reload_keeps_what_keys_used() {
    settle_in_minute(10).await;
    let (dir, e) = engine(&limit_yaml(5)).await;
    let codes: Vec<i32> = futures_collect(&e, 6).await;
    assert_eq!(codes, [OK, OK, OK, OK, OK, OVER]);
    dir.write("d.yaml", &limit_yaml(2));
    tollgate_server::reload::reload(&e, &dir.0).await.unwrap();
    let r = decide(&e, one("d", &[("user", "alice")], None)).await;
    assert_eq!(r.overall_code, OVER, "{r:?}");
    assert_eq!(
        r.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        2
    );
    // Raised to 7: 5 used, so 2 more, then denied.
    dir.write("d.yaml", &limit_yaml(7));
    tollgate_server::reload::reload(&e, &dir.0).await.unwrap();
    let codes: Vec<i32> = futures_collect(&e, 3).await;
    assert_eq!(codes, [OK, OK, OVER]);
}

async fn futures_collect(e: &Engine, n: usize) -> Vec<i32> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(
            decide(e, one("d", &[("user", "alice")], None))
                .await
                .overall_code,
        );
    }
    out
}

/// Item 1, another algorithm: the limit gets a new limiter (nothing to carry it with),
/// and the reload says so.
#[tokio::test]
async fn a_limit_given_another_algorithm_starts_afresh() {
    let (dir, e) = engine(&limit_yaml(1)).await;
    assert_eq!(
        decide(&e, one("d", &[("user", "a")], None))
            .await
            .overall_code,
        OK
    );
    dir.write(
        "d.yaml",
        &limit_yaml(1).replace(
            "unit: minute",
            "unit: minute\n      algorithm: token_bucket",
        ),
    );
    tollgate_server::reload::reload(&e, &dir.0).await.unwrap();
    assert_eq!(
        decide(&e, one("d", &[("user", "a")], None))
            .await
            .overall_code,
        OK
    );
}

/// Item 2: quota_mode: the request is denied on its quota-mode limits only when all of
/// them are over.
#[tokio::test]
async fn quota_mode_denies_only_when_every_quota_is_over() {
    let yaml = "domain: d
descriptors:
  - key: a
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: b
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2}
";
    let (_dir, e) = engine(yaml).await;
    let both = || request("d", vec![desc(&[("a", "x")]), desc(&[("b", "x")])]);
    let r = decide(&e, both()).await;
    assert_eq!(r.overall_code, OK);
    // `a` is over, `b` is not: OK, `a`'s status says OVER_LIMIT.
    let r = decide(&e, both()).await;
    assert_eq!(r.overall_code, OK, "{r:?}");
    assert_eq!(r.statuses[0].code, OVER);
    assert_eq!(r.statuses[1].code, OK);
    // Both over: denied.
    let r = decide(&e, both()).await;
    assert_eq!(r.overall_code, OVER, "{r:?}");
}

/// Item 2: upstream's current example (quota_mode and metadata) loads.
#[tokio::test]
async fn upstream_example_with_quota_mode_and_metadata_loads() {
    let text = include_str!("../testdata/upstream/examples/example.yaml");
    let (_dir, e) = engine(text).await;
    let r = decide(&e, one("rl", &[("foo", "x")], None)).await;
    assert_eq!(
        r.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        2
    );
}

/// Item 3: wildcards anywhere in a value (upstream's `wildcard.yaml`).
#[tokio::test]
async fn wildcards_anywhere_in_a_value_match() {
    let text = include_str!("../testdata/upstream/test-config/wildcard.yaml");
    let (_dir, e) = engine(text).await;
    let rpu = |r: RateLimitResponse| {
        r.statuses[0]
            .current_limit
            .as_ref()
            .map(|l| l.requests_per_unit)
    };
    for (key, value, want) in [
        ("midWild", "barab", Some(20)),
        ("midWild", "bar123b", Some(20)),
        ("midWild", "barb", Some(20)),
        ("midWild", "bara", None),
        ("midWild", "xbarb", None),
        ("multiWild", "foo123bar456baz", Some(10)),
        ("multiWild", "foobarbaz", Some(10)),
        ("multiWild", "foo123baz", None),
        ("multiWild", "bar456baz", None),
        ("wild", "foo1", Some(20)),
        ("wild", "bar", None),
        ("noWild", "foo1", None),
    ] {
        let got = rpu(decide(&e, one("test-domain", &[(key, value)], None)).await);
        assert_eq!(got, want, "{key}={value}");
    }
}

/// Item 4: `hits_addend: 0` checks only: OK, the remaining count as it is, even when the
/// limit is exactly used.
#[tokio::test]
async fn hits_addend_zero_reports_the_key_as_it_is() {
    settle_in_minute(5).await;
    let (_dir, e) = engine(&limit_yaml(2)).await;
    assert_eq!(
        decide(&e, one("d", &[("user", "z")], None))
            .await
            .overall_code,
        OK
    );
    let r = decide(&e, one("d", &[("user", "z")], Some(0))).await;
    assert_eq!((r.overall_code, r.statuses[0].code), (OK, OK), "{r:?}");
    assert_eq!(r.statuses[0].limit_remaining, 1, "{r:?}");
    assert_eq!(
        decide(&e, one("d", &[("user", "z")], None))
            .await
            .overall_code,
        OK
    );
    let r = decide(&e, one("d", &[("user", "z")], Some(0))).await;
    assert_eq!((r.overall_code, r.statuses[0].code), (OK, OK), "{r:?}");
    assert_eq!(r.statuses[0].limit_remaining, 0);
}

/// Item 5: an OVER_LIMIT status reports 0 remaining.
#[tokio::test]
async fn over_limit_reports_zero_remaining() {
    settle_in_minute(5).await;
    let (_dir, e) = engine(&limit_yaml(20)).await;
    assert_eq!(
        decide(&e, one("d", &[("user", "y")], Some(9)))
            .await
            .overall_code,
        OK
    );
    let r = decide(&e, one("d", &[("user", "y")], Some(15))).await;
    assert_eq!(r.statuses[0].code, OVER, "{r:?}");
    assert_eq!(r.statuses[0].limit_remaining, 0, "{r:?}");
}

/// Item 6: a descriptor's own limit in a domain the configuration does not have is not
/// applied: OK with no limit.
#[tokio::test]
async fn an_override_in_an_unknown_domain_is_not_applied() {
    let (_dir, e) = engine(&limit_yaml(2)).await;
    let mut d = desc(&[("k", "v")]);
    d.limit = Some(RateLimitOverride {
        requests_per_unit: 2,
        unit: 2,
    });
    let r = decide(&e, request("nowhere", vec![d])).await;
    assert_eq!(r.overall_code, OK);
    assert_eq!(r.statuses[0].current_limit, None, "{r:?}");
}

const RESET_YAML: &str = "domain: d
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: zero
    rate_limit: {unit: minute, requests_per_unit: 0}
";

/// Item 7: `duration_until_reset` is whole seconds to the end of the clock-aligned window
/// (`unit − now mod unit`), for an admitted request and a denied one.
#[tokio::test]
async fn duration_until_reset_is_whole_seconds_to_the_window_end() {
    settle_in_minute(5).await;
    let (_dir, e) = engine(RESET_YAML).await;
    expect_window_end(&e, &[("user", OK), ("user", OVER)]).await;
}

/// Item 8: a limit of 0 reports the end of the current window, not a whole unit; and so
/// does a check of 0 hits on it, which is OK.
#[tokio::test]
async fn a_zero_limit_reports_the_window_end() {
    settle_in_minute(5).await;
    let (_dir, e) = engine(RESET_YAML).await;
    expect_window_end(&e, &[("zero", OVER)]).await;
    let r = decide(&e, one("d", &[("zero", "q")], Some(0))).await;
    assert_eq!((r.overall_code, r.statuses[0].code), (OK, OK), "{r:?}");
    expect_window_end(&e, &[("zero", OVER)]).await;
}

/// Each call of `(key, code)` gets `code` and a whole-second reset at the window's end.
async fn expect_window_end(e: &Engine, calls: &[(&str, i32)]) {
    for &(key, code) in calls {
        let before = 60 - unix_now() % 60;
        let r = decide(e, one("d", &[(key, "q")], None)).await;
        let after = 60 - unix_now() % 60;
        assert_eq!(r.statuses[0].code, code, "{r:?}");
        let d = r.statuses[0].duration_until_reset.unwrap();
        assert_eq!(d.nanos, 0, "{key}: {d:?}");
        let secs = u64::try_from(d.seconds).unwrap();
        assert!(
            (after..=before).contains(&secs),
            "{key}: {secs} not in {after}..={before}"
        );
    }
}

/// Item 9: the three files upstream refuses are refused, with upstream's reasons.
#[test]
fn upstreams_refused_files_are_refused() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/upstream/test-config");
    for (file, reason) in [
        (
            "unlimited_with_unit.yaml",
            "should not specify rate limit unit when unlimited",
        ),
        (
            "replaces_self.yaml",
            "replaces should not contain name of same descriptor",
        ),
        (
            "replaces_empty.yaml",
            "should not have an empty replaces entry",
        ),
    ] {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let e = tollgate_server::config::parse_file(&path, &text).expect_err(file);
        assert!(e.to_string().contains(reason), "{file}: {e}");
        assert!(e.line.is_some(), "{file}: {e}");
    }
}

/// An engine serving `yaml` under `policy`.
async fn engine_with(yaml: &str, policy: Policy) -> (TempDir, Engine) {
    let (dir, e) = engine(yaml).await;
    (dir, e.with_policy(policy))
}

const TWO: &str = "domain: d
descriptors:
  - key: a
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: b
    rate_limit: {unit: hour, requests_per_unit: 5}
";

fn remaining(r: &RateLimitResponse, i: usize) -> u32 {
    r.statuses[i].limit_remaining
}

/// `--count-denied-hits`: the other limits of a denied request count their hits, and the
/// denying limit is charged what it had left; by default a denial takes nothing.
#[tokio::test]
async fn count_denied_hits_counts_as_upstream_does() {
    let both = || request("d", vec![desc(&[("a", "x")]), desc(&[("b", "x")])]);
    for (counting, b_left) in [(true, 2), (false, 3)] {
        let policy = Policy {
            count_denied_hits: counting,
            ..Policy::default()
        };
        let (_dir, e) = engine_with(TWO, policy).await;
        assert_eq!(decide(&e, both()).await.overall_code, OK);
        let r = decide(&e, both()).await;
        assert_eq!(r.overall_code, OVER, "{r:?}");
        let r = decide(&e, one("d", &[("b", "x")], None)).await;
        assert_eq!(remaining(&r, 0), b_left, "counting={counting}: {r:?}");
        // 1 left of 5 on `b`; asking 3 is denied, and counting leaves nothing.
        let r = decide(&e, one("d", &[("b", "y")], Some(4))).await;
        assert_eq!(r.overall_code, OK);
        assert_eq!(
            decide(&e, one("d", &[("b", "y")], Some(3)))
                .await
                .overall_code,
            OVER
        );
        let after = decide(&e, one("d", &[("b", "y")], None)).await.overall_code;
        assert_eq!(
            after,
            if counting { OVER } else { OK },
            "counting={counting}"
        );
    }
}

/// `SHADOW_MODE` (`--global-shadow-mode`): every request OK, the statuses still say over.
#[tokio::test]
async fn global_shadow_mode_answers_ok() {
    let policy = Policy {
        global_shadow: true,
        ..Policy::default()
    };
    let (_dir, e) = engine_with(TWO, policy).await;
    decide(&e, one("d", &[("a", "x")], None)).await;
    let r = decide(&e, one("d", &[("a", "x")], None)).await;
    assert_eq!(r.overall_code, OK, "{r:?}");
    assert_eq!(r.statuses[0].code, OVER);
}

/// `QUOTA_MODE` (`--global-quota-mode`): every limit is a quota; only all over denies.
#[tokio::test]
async fn global_quota_mode_makes_every_limit_a_quota() {
    let policy = Policy {
        global_quota: true,
        ..Policy::default()
    };
    let (_dir, e) = engine_with(TWO, policy).await;
    let both = || request("d", vec![desc(&[("a", "x")]), desc(&[("b", "x")])]);
    assert_eq!(decide(&e, both()).await.overall_code, OK);
    let r = decide(&e, both()).await;
    assert_eq!(r.overall_code, OK, "a over, b not: {r:?}");
    let r = decide(&e, one("d", &[("a", "x")], None)).await;
    assert_eq!(r.overall_code, OVER, "the only quota over: {r:?}");
}

/// Item 2, in process: a request whose every quota-mode limit is already over is denied
/// before anything is counted, so its enforced limits keep what they had.
#[tokio::test]
async fn a_request_over_on_every_quota_takes_nothing() {
    let yaml = "domain: d
descriptors:
  - key: a
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: b
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: c
    rate_limit: {unit: hour, requests_per_unit: 5}
";
    let (_dir, e) = engine(yaml).await;
    let all = || {
        request(
            "d",
            vec![
                desc(&[("a", "x")]),
                desc(&[("b", "x")]),
                desc(&[("c", "x")]),
            ],
        )
    };
    assert_eq!(decide(&e, all()).await.overall_code, OK);
    let r = decide(&e, all()).await;
    assert_eq!(r.overall_code, OVER, "{r:?}");
    let r = decide(&e, one("d", &[("c", "x")], None)).await;
    assert_eq!(
        remaining(&r, 0),
        3,
        "the denied request took nothing from c: {r:?}"
    );
}
