//! Token budgets (`budget: true`) and give-backs (`is_negative_hits`), issue 30, through
//! the real binary on loopback ports: envoyproxy/ratelimit's token-quota flow
//! (`integration-test/scripts/token-quota.sh`) on a budget, the README's LLM-gateway
//! example replayed as the README tells it, what a budget does beside other limits in one
//! request, give-backs on budgets and on other limits, reload, refusals; in process and
//! on Redis (exact mode, and the hybrid mode for the token-quota flow).

mod common;

use common::{call, desc, request, upstream_example_with_budgets, Redis, Server, TempDir};
use std::time::{Duration, Instant};
use tollgate_server::proto::{Code, RateLimitDescriptor, RateLimitResponse};

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

/// One descriptor of `pairs` with its own `hits_addend`.
fn hits(pairs: &[(&str, &str)], n: u64) -> RateLimitDescriptor {
    let mut d = desc(pairs);
    d.hits_addend = Some(n);
    d
}

/// One descriptor of `pairs` giving `n` hits back (`is_negative_hits`).
fn back(pairs: &[(&str, &str)], n: u64) -> RateLimitDescriptor {
    let mut d = hits(pairs, n);
    d.is_negative_hits = true;
    d
}

async fn ask(s: &Server, domain: &str, ds: Vec<RateLimitDescriptor>) -> RateLimitResponse {
    let mut c = s.grpc_client().await;
    call(&mut c, request(domain, ds)).await.expect("decided")
}

/// (code, remaining) of every status.
fn codes(r: &RateLimitResponse) -> Vec<(i32, u32)> {
    r.statuses
        .iter()
        .map(|s| (s.code, s.limit_remaining))
        .collect()
}

fn reset_secs(r: &RateLimitResponse, i: usize) -> i64 {
    r.statuses[i].duration_until_reset.as_ref().unwrap().seconds
}

/// Waits until at least 10 seconds remain in the current minute (fixed windows of a
/// minute must not turn over inside a test).
async fn settle() {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        % 60;
    if s > 50 {
        tokio::time::sleep(Duration::from_secs(61 - s)).await;
    }
}

/// `token-quota.sh`: `/tokenquota` checks `service_2` (2 a minute, quota mode) with
/// `hits_addend: 0` before each request and counts 1 hit when its stream is done (Envoy's
/// `apply_on_stream_done`: a second call). Requests 1 to 3 pass; the 3rd's hit goes past
/// the quota, so the 4th is denied, as upstream answers. (The script's one-minute wait for
/// the window to turn over is left out.)
async fn token_quota(extra: &[&str]) {
    settle().await;
    let dir = TempDir::new("budget-token-quota");
    dir.write("example.yaml", &upstream_example_with_budgets());
    let s = Server::start(&dir.0, extra);
    let service_2 = [("service", "service_2")];
    for i in 1..=3u32 {
        let r = ask(&s, "rl", vec![hits(&service_2, 0)]).await;
        assert_eq!(r.overall_code, OK, "request {i} checked: {r:?}");
        assert_eq!(codes(&r), [(OK, 3 - i)], "request {i}: what is left");
        let done = ask(&s, "rl", vec![hits(&service_2, 1)]).await;
        let want = if i <= 2 { (OK, 2 - i) } else { (OVER, 0) };
        assert_eq!(codes(&done), [want], "request {i}'s hit, after it");
        assert_eq!(done.overall_code, want.0);
    }
    let r = ask(&s, "rl", vec![hits(&service_2, 0)]).await;
    assert_eq!(r.overall_code, OVER, "request 4: the quota is spent");
    assert_eq!(codes(&r), [(OVER, 0)]);
    // A fixed window of a minute: over until the top of the minute.
    let left = 60
        - std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            % 60;
    assert!(
        (left..=left + 1).contains(&u64::try_from(reset_secs(&r, 0)).unwrap()),
        "{r:?}"
    );
    // service_1 (1 a minute, a budget too) is untouched.
    let r = ask(&s, "rl", vec![hits(&[("service", "service_1")], 0)]).await;
    assert_eq!(codes(&r), [(OK, 1)]);
    // Beyond the script: two hits given back (is_negative_hits) pay the debt and leave one.
    let r = ask(&s, "rl", vec![back(&service_2, 2)]).await;
    assert_eq!(codes(&r), [(OK, 1)]);
    let r = ask(&s, "rl", vec![hits(&service_2, 0)]).await;
    assert_eq!(codes(&r), [(OK, 1)]);
}

#[tokio::test]
async fn token_quota_sh_on_a_budget() {
    token_quota(&[]).await;
}

#[tokio::test]
async fn token_quota_sh_on_a_budget_counting_denied_hits() {
    token_quota(&["--count-denied-hits"]).await;
}

#[tokio::test]
async fn token_quota_sh_on_a_budget_on_redis() {
    let redis = Redis::start();
    token_quota(&["--redis", &redis.url()]).await;
}

#[tokio::test]
async fn token_quota_sh_on_a_budget_on_redis_counting_denied_hits() {
    let redis = Redis::start();
    token_quota(&["--redis", &redis.url(), "--count-denied-hits"]).await;
}

#[tokio::test]
async fn token_quota_sh_on_a_budget_in_hybrid_mode() {
    let redis = Redis::start();
    token_quota(&["--redis", &redis.url(), "--mode", "hybrid"]).await;
}

/// The README's LLM-gateway example, replayed as the README tells it: its configuration
/// is `testdata/budgets/llm.yaml` word for word, and each number it gives is checked.
#[tokio::test]
async fn readme_llm_gateway_example() {
    // The server's own README (the workspace README links to it).
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("tollgate-server/README.md");
    let file = include_str!("../testdata/budgets/llm.yaml");
    let block = format!("```yaml\n{file}```\n");
    let at = readme
        .find("Token budgets: an LLM gateway")
        .expect("the README's budget section");
    assert!(
        readme[at..].contains(&block),
        "the README shows testdata/budgets/llm.yaml as it is"
    );
    let dir = TempDir::new("budget-llm");
    dir.write("llm.yaml", file);
    let s = Server::start(&dir.0, &[]);
    let three = |user: &str, n: u64| {
        vec![
            hits(&[("user", user)], n),
            hits(&[("model", "large")], n),
            hits(&[("generic_key", "global")], n),
        ]
    };
    // alice's request is checked: three OKs.
    let r = ask(&s, "llm", three("alice", 0)).await;
    assert_eq!(r.overall_code, OK);
    assert_eq!(codes(&r), [(OK, 10_000), (OK, 100_000), (OK, 1_000_000)]);
    let names: Vec<&str> = r
        .statuses
        .iter()
        .map(|s| s.current_limit.as_ref().unwrap().name.as_str())
        .collect();
    assert_eq!(
        names,
        ["user_tokens", "large_model_tokens", "global_tokens"]
    );
    // Charged the 12,000 tokens of its answer.
    let charged = Instant::now();
    let r = ask(&s, "llm", three("alice", 12_000)).await;
    assert_eq!(r.overall_code, OVER);
    assert_eq!(codes(&r)[0], (OVER, 0), "she had 10,000: she owes 2,000");
    let (model, global) = (r.statuses[1].limit_remaining, r.statuses[2].limit_remaining);
    assert_eq!(r.statuses[1].code, OK);
    assert_eq!(r.statuses[2].code, OK);
    assert!((88_000..88_100).contains(&model), "about 88,000: {model}");
    assert!(
        (988_000..989_000).contains(&global),
        "about 988,000: {global}"
    );
    // Her next check: over, until her 10,000 are back in 72 s.
    let r = ask(&s, "llm", three("alice", 0)).await;
    assert_eq!(r.overall_code, OVER);
    assert_eq!(r.statuses[0].code, OVER);
    assert_eq!(reset_secs(&r, 0), 72, "{r:?}");
    // Other users pass all along.
    let r = ask(&s, "llm", three("bob", 0)).await;
    assert_eq!(r.overall_code, OK);
    // 12 s later the debt is paid: her check passes. Just before, it does not.
    tokio::time::sleep(Duration::from_secs(11).saturating_sub(charged.elapsed())).await;
    let r = ask(&s, "llm", three("alice", 0)).await;
    assert_eq!(
        r.statuses[0].code, OVER,
        "11 s: still owes about 170 tokens"
    );
    tokio::time::sleep(Duration::from_millis(12_100).saturating_sub(charged.elapsed())).await;
    let r = ask(&s, "llm", three("alice", 0)).await;
    assert_eq!(r.overall_code, OK, "12 s: paid");
    assert_eq!(r.statuses[0].code, OK);
    // Had her answer been cut short: the same charge (on carol), then 3,000 given back.
    let r = ask(&s, "llm", three("carol", 12_000)).await;
    assert_eq!(codes(&r)[0], (OVER, 0));
    let r = ask(&s, "llm", vec![back(&[("user", "carol")], 3_000)]).await;
    assert_eq!(r.overall_code, OK);
    let left = r.statuses[0].limit_remaining;
    assert!(
        (1_000..1_010).contains(&left),
        "her debt paid, 1,000 left: {left}"
    );
    let r = ask(&s, "llm", three("carol", 0)).await;
    assert_eq!(r.overall_code, OK);
}

/// One domain with a budget and ordinary limits, over an hour (token buckets: no window
/// boundary inside a test).
const MIXED: &str = "domain: mix
descriptors:
  - key: tokens
    rate_limit:
      unit: hour
      requests_per_unit: 100
      algorithm: token_bucket
      budget: true
  - key: calls
    rate_limit:
      unit: hour
      requests_per_unit: 1
      algorithm: token_bucket
  - key: big
    rate_limit:
      unit: hour
      requests_per_unit: 10
      algorithm: token_bucket
  - key: window
    rate_limit:
      unit: day
      requests_per_unit: 3
  - key: log
    rate_limit:
      unit: hour
      requests_per_unit: 5
      algorithm: sliding_log
";

/// The binary serving `MIXED`, in process or on a Redis of its own (exact mode).
fn serve_mixed(name: &str, redis: bool) -> (TempDir, Option<Redis>, Server) {
    let dir = TempDir::new(name);
    dir.write("mix.yaml", MIXED);
    let r = redis.then(Redis::start);
    let s = match &r {
        Some(r) => Server::start(&dir.0, &["--redis", &r.url()]),
        None => Server::start(&dir.0, &[]),
    };
    (dir, r, s)
}

/// A charge in a request another limit denies is not taken: the status says what the
/// charge would have found, and the budget keeps what it had.
async fn a_request_denied_by_another_limit_takes_no_charge(redis: bool) {
    let (_dir, _redis, s) = serve_mixed("budget-mixed", redis);
    let (t, c) = ([("tokens", "a")], [("calls", "a")]);
    let r = ask(&s, "mix", vec![hits(&t, 30), desc(&c)]).await;
    assert_eq!(r.overall_code, OK);
    assert_eq!(codes(&r), [(OK, 70), (OK, 0)]);
    // `calls` is spent: denied, and the budget is not charged.
    let r = ask(&s, "mix", vec![hits(&t, 30), desc(&c)]).await;
    assert_eq!(r.overall_code, OVER);
    assert_eq!(codes(&r), [(OK, 70), (OVER, 0)]);
    // A charge that would not have fit says so, and is not taken either.
    let r = ask(&s, "mix", vec![hits(&t, 80), desc(&c)]).await;
    assert_eq!(codes(&r), [(OVER, 0), (OVER, 0)]);
    let r = ask(&s, "mix", vec![hits(&t, 0)]).await;
    assert_eq!(
        codes(&r),
        [(OK, 70)],
        "nothing taken by the denied requests"
    );
}

/// A budget that owes denies the request at its check, before anything is taken: the
/// other limits keep their counts.
async fn a_budget_in_debt_denies_before_anything_is_taken(redis: bool) {
    let (_dir, _redis, s) = serve_mixed("budget-debt", redis);
    let r = ask(&s, "mix", vec![hits(&[("tokens", "b")], 130)]).await;
    assert_eq!(codes(&r), [(OVER, 0)], "owes 30");
    let r = ask(
        &s,
        "mix",
        vec![hits(&[("tokens", "b")], 0), hits(&[("big", "b")], 4)],
    )
    .await;
    assert_eq!(r.overall_code, OVER);
    assert_eq!(codes(&r), [(OVER, 0), (OK, 10)], "big: nothing taken");
    let r = ask(&s, "mix", vec![hits(&[("big", "b")], 0)]).await;
    assert_eq!(codes(&r), [(OK, 10)]);
}

/// A charge past what was left reports `OVER_LIMIT` but undoes nothing: the request was
/// admitted by the other limits before its cost was known (README, "Token budgets").
async fn a_charge_past_the_budget_undoes_nothing_the_others_took(redis: bool) {
    let (_dir, _redis, s) = serve_mixed("budget-after", redis);
    let r = ask(
        &s,
        "mix",
        vec![hits(&[("tokens", "c")], 150), hits(&[("big", "c")], 4)],
    )
    .await;
    assert_eq!(r.overall_code, OVER);
    assert_eq!(codes(&r), [(OVER, 0), (OK, 6)]);
    let r = ask(&s, "mix", vec![hits(&[("big", "c")], 0)]).await;
    assert_eq!(codes(&r), [(OK, 6)], "big keeps its 4");
}

/// `is_negative_hits` gives hits back to the limit the descriptor matches, budget or not,
/// never below an empty key; give-backs come first in a request.
async fn give_backs_on_budgets_and_other_limits(redis: bool) {
    let (_dir, _redis, s) = serve_mixed("budget-give-back", redis);
    let t = [("tokens", "d")];
    ask(&s, "mix", vec![hits(&t, 130)]).await;
    let r = ask(&s, "mix", vec![back(&t, 50)]).await;
    assert_eq!(r.overall_code, OK);
    assert_eq!(codes(&r), [(OK, 20)], "30 owed, 50 back: 20 left");
    let r = ask(&s, "mix", vec![back(&t, 1_000)]).await;
    assert_eq!(codes(&r), [(OK, 100)], "never past a full budget");
    // A token bucket that is not a budget: 10 used, 4 given back, 4 admitted again.
    let b = [("big", "d")];
    assert_eq!(codes(&ask(&s, "mix", vec![hits(&b, 10)]).await), [(OK, 0)]);
    assert_eq!(ask(&s, "mix", vec![desc(&b)]).await.overall_code, OVER);
    assert_eq!(codes(&ask(&s, "mix", vec![back(&b, 4)]).await), [(OK, 4)]);
    assert_eq!(codes(&ask(&s, "mix", vec![hits(&b, 4)]).await), [(OK, 0)]);
    // A fixed window: 3 of 3 used, 1 given back.
    let w = [("window", "d")];
    assert_eq!(codes(&ask(&s, "mix", vec![hits(&w, 3)]).await), [(OK, 0)]);
    assert_eq!(codes(&ask(&s, "mix", vec![back(&w, 1)]).await), [(OK, 1)]);
    assert_eq!(codes(&ask(&s, "mix", vec![desc(&w)]).await), [(OK, 0)]);
    // First in a request: the hit given back is there for the request's own limit.
    let c = [("calls", "d")];
    assert_eq!(ask(&s, "mix", vec![desc(&c)]).await.overall_code, OK);
    let r = ask(&s, "mix", vec![desc(&c), back(&c, 1)]).await;
    assert_eq!(r.overall_code, OK, "{r:?}");
    // A key the limit never saw: nothing to give back.
    assert_eq!(
        codes(&ask(&s, "mix", vec![back(&[("big", "new")], 5)]).await),
        [(OK, 10)]
    );
    // A sliding log: more than its limit given back to a key it never saw, then to one it
    // holds (the log gives back from its newest entries), and nothing while its whole ring
    // is in the window (the library cannot tell an overdraft from its admissions then).
    let l = [("log", "d")];
    assert_eq!(codes(&ask(&s, "mix", vec![back(&l, 50)]).await), [(OK, 5)]);
    assert_eq!(codes(&ask(&s, "mix", vec![hits(&l, 3)]).await), [(OK, 2)]);
    assert_eq!(codes(&ask(&s, "mix", vec![back(&l, 50)]).await), [(OK, 5)]);
    assert_eq!(codes(&ask(&s, "mix", vec![hits(&l, 5)]).await), [(OK, 0)]);
    assert_eq!(codes(&ask(&s, "mix", vec![back(&l, 2)]).await), [(OK, 0)]);
    // And through /json, in envoyproxy/ratelimit's JSON names.
    let body = r#"{"domain":"mix","descriptors":[{"entries":[{"key":"tokens","value":"d"}],"hitsAddend":"5","isNegativeHits":true}]}"#;
    let (status, text) = s.http("/json", Some(body.as_bytes().to_vec())).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"limitRemaining\":100"), "{text}");
}

/// A new key a full table cannot hold is not charged: `on_full: deny` answers
/// `OVER_LIMIT` (the table's refusal of a new key), `on_full: allow` admits it untracked.
#[tokio::test]
async fn a_full_table_charges_as_its_on_full_says() {
    let dir = TempDir::new("budget-full");
    let budget = |key: &str, on_full: &str| {
        format!("  - key: {key}\n    rate_limit:\n      unit: hour\n      requests_per_unit: 5\n      algorithm: token_bucket\n      budget: true\n      max_keys: 1\n      on_full: {on_full}\n")
    };
    dir.write(
        "full.yaml",
        &format!(
            "domain: full\ndescriptors:\n{}{}",
            budget("deny", "deny"),
            budget("allow", "allow")
        ),
    );
    let s = Server::start(&dir.0, &[]);
    let mut refused = 0;
    for i in 0..10 {
        let v = format!("k{i}");
        let r = ask(&s, "full", vec![hits(&[("deny", &v)], 2)]).await;
        match codes(&r)[0] {
            (OK, 3) => {}
            (OVER, 0) => refused += 1,
            other => panic!("{other:?}"),
        }
        let r = ask(&s, "full", vec![hits(&[("allow", &v)], 2)]).await;
        assert_eq!(r.overall_code, OK, "allow: {r:?}");
    }
    assert!(refused > 0, "the table held 10 keys");
}

/// A charge counts its hits in the metrics as any request does (within or over the
/// limit); a give-back adds nothing.
#[tokio::test]
async fn metrics_count_charges_and_not_give_backs() {
    let dir = TempDir::new("budget-metrics");
    dir.write("mix.yaml", MIXED);
    let s = Server::start(&dir.0, &[]);
    let t = [("tokens", "m")];
    ask(&s, "mix", vec![hits(&t, 30)]).await;
    ask(&s, "mix", vec![hits(&t, 100)]).await;
    ask(&s, "mix", vec![back(&t, 50)]).await;
    ask(&s, "mix", vec![hits(&t, 0)]).await;
    let text = s.http("/metrics", None).await.1;
    let sample = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name) && l.contains("key1=\"tokens\""))
            .and_then(|l| l.rsplit(' ').next())
            .map(str::to_string)
    };
    let total = "ratelimit_service_rate_limit_total_hits{";
    assert_eq!(sample(total).as_deref(), Some("130"), "{text}");
    let within = "ratelimit_service_rate_limit_within_limit{";
    assert_eq!(sample(within).as_deref(), Some("30"), "{text}");
    let over = "ratelimit_service_rate_limit_over_limit{";
    assert_eq!(sample(over).as_deref(), Some("100"), "{text}");
}

/// `budget` changes nothing a limiter holds: turning it off and on again keeps the
/// limiter, and a key in debt stays in debt.
#[tokio::test]
async fn reload_keeps_a_budgets_counts() {
    let dir = TempDir::new("budget-reload");
    let config = |budget: bool| {
        format!(
            "domain: r\ndescriptors:\n  - key: t\n    rate_limit:\n      unit: hour\n      requests_per_unit: 10\n      algorithm: token_bucket\n      budget: {budget}\n"
        )
    };
    dir.write("r.yaml", &config(true));
    let s = Server::start(&dir.0, &[]);
    let t = [("t", "x")];
    assert_eq!(codes(&ask(&s, "r", vec![hits(&t, 13)]).await), [(OVER, 0)]);
    dir.write("r.yaml", &config(false));
    wait_log(&s, "kept=1", 1).await;
    // No longer a budget: a hit is denied (the key still owes), a check is OK at 0 left.
    assert_eq!(codes(&ask(&s, "r", vec![desc(&t)]).await), [(OVER, 0)]);
    assert_eq!(codes(&ask(&s, "r", vec![hits(&t, 0)]).await), [(OK, 0)]);
    dir.write("r.yaml", &config(true));
    wait_log(&s, "kept=1", 2).await;
    assert_eq!(
        codes(&ask(&s, "r", vec![hits(&t, 0)]).await),
        [(OVER, 0)],
        "still in debt"
    );
    let dump = s.http("/rlconfig", None).await.1;
    assert!(dump.contains("r.t: unit=HOUR requests_per_unit=10, shadow_mode: false, quota_mode: false, algorithm: TokenBucket, budget: true"), "{dump}");
}

/// Waits until the server's log holds `needle` `times` times (the watcher polls every
/// 100 ms in these tests).
async fn wait_log(s: &Server, needle: &str, times: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.log_text().matches(needle).count() < times {
        assert!(
            Instant::now() < deadline,
            "never logged {needle} x{times}: {}",
            s.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What the binary printed when it refused to start on `dir` with `extra`, or `None` if
/// it was still running after 20 s (it accepted the configuration: killed).
fn refusal(dir: &TempDir, extra: &[&str]) -> Option<String> {
    use std::io::Read;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tollgate-server"))
        .arg("--config")
        .arg(&dir.0)
        .args(["--grpc", &format!("127.0.0.1:{}", common::free_port())])
        .args(["--http", &format!("127.0.0.1:{}", common::free_port())])
        .args(["--log-format", "text"])
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run tollgate-server");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(!status.success(), "exited 0");
            let mut e = String::new();
            child.stderr.take().unwrap().read_to_string(&mut e).unwrap();
            return Some(e);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The refusals: a value that is not a boolean (file, line and field), a budget on a
/// sliding log or an unlimited limit.
#[test]
fn bad_budgets_are_refused_at_load() {
    let refused = |yaml: &str| {
        let dir = TempDir::new("budget-bad");
        dir.write("bad.yaml", yaml);
        refusal(&dir, &[]).unwrap_or_else(|| panic!("{yaml} was accepted"))
    };
    let head = "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n      requests_per_unit: 5\n";
    let e = refused(&format!("{head}      budget: sure\n"));
    assert!(e.contains("bad.yaml:7:"), "{e}");
    assert!(e.contains("descriptors[0].rate_limit.budget"), "{e}");
    let e = refused(&format!(
        "{head}      algorithm: sliding_log\n      budget: true\n"
    ));
    assert!(e.contains("bad.yaml:"), "{e}");
    assert!(e.contains("a budget cannot use the sliding log"), "{e}");
    let e = refused(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unlimited: true\n      budget: true\n",
    );
    assert!(
        e.contains("an unlimited limit counts nothing to charge"),
        "{e}"
    );
    let e = refused(&format!("{head}      budgett: true\n"));
    assert!(e.contains("budgett"), "{e}");
}

/// While Redis is away a charge follows the failure policy: `open` admits it uncounted,
/// `closed` answers `OVER_LIMIT`, `local` charges this instance's own table (the debt is
/// there for the next check), `error` fails the call (UNAVAILABLE).
#[tokio::test]
async fn redis_away_a_charge_follows_the_failure_policy() {
    for policy in ["open", "closed", "local", "error"] {
        let dir = TempDir::new("budget-redis-away");
        dir.write("mix.yaml", MIXED);
        let mut redis = Redis::start();
        let url = redis.url();
        let s = Server::start(&dir.0, &["--redis", &url, "--redis-failure", policy]);
        let t = [("tokens", "f")];
        assert_eq!(codes(&ask(&s, "mix", vec![hits(&t, 30)]).await), [(OK, 70)]);
        redis.kill();
        let mut c = s.grpc_client().await;
        let charged = call(&mut c, request("mix", vec![hits(&t, 130)])).await;
        let checked = call(&mut c, request("mix", vec![hits(&t, 0)])).await;
        match policy {
            "open" => {
                assert_eq!(charged.unwrap().overall_code, OK, "{policy}");
                assert_eq!(checked.unwrap().overall_code, OK, "{policy}");
            }
            "closed" => {
                assert_eq!(charged.unwrap().overall_code, OVER, "{policy}");
                assert_eq!(checked.unwrap().overall_code, OVER, "{policy}");
            }
            "local" => {
                assert_eq!(codes(&charged.unwrap()), [(OVER, 0)], "{policy}: owes 30");
                assert_eq!(codes(&checked.unwrap()), [(OVER, 0)], "{policy}");
            }
            _ => {
                let e = charged.expect_err("error policy");
                assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
            }
        }
    }
}

macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod in_process {
            $(#[tokio::test] async fn $name() { super::$name(false).await; })*
        }
        mod on_redis {
            $(#[tokio::test] async fn $name() { super::$name(true).await; })*
        }
    };
}

both_backends!(
    a_request_denied_by_another_limit_takes_no_charge,
    a_budget_in_debt_denies_before_anything_is_taken,
    a_charge_past_the_budget_undoes_nothing_the_others_took,
    give_backs_on_budgets_and_other_limits,
);
