//! `POST /json`, `/healthcheck` and `/metrics` with a real HTTP client (hyper), and bad
//! input refused with HTTP 400 while the server keeps serving.

mod common;

use common::{Server, TempDir};

const CONFIG: &str = "domain: web
descriptors:
  - key: user
    rate_limit:
      name: per_user
      unit: hour
      requests_per_unit: 2
      algorithm: token_bucket
  - key: dashboard
    value: main
    detailed_metric: true
    rate_limit:
      unit: hour
      requests_per_unit: 9
";

fn start() -> (TempDir, Server) {
    let dir = TempDir::new("json");
    dir.write("web.yaml", CONFIG);
    let server = Server::start(&dir.0, &[]);
    (dir, server)
}

fn body(user: &str) -> Vec<u8> {
    format!(
        r#"{{"domain":"web","descriptors":[{{"entries":[{{"key":"user","value":"{user}"}}]}}]}}"#
    )
    .into_bytes()
}

#[tokio::test]
async fn json_allows_then_answers_429_in_envoyproxy_ratelimit_shapes() {
    let (_dir, s) = start();
    let (status, text) = s.http("/json", Some(body("alice"))).await;
    assert_eq!(status, 200, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["overallCode"], "OK");
    assert_eq!(v["statuses"][0]["code"], "OK");
    assert_eq!(v["statuses"][0]["currentLimit"]["requestsPerUnit"], 2);
    assert_eq!(v["statuses"][0]["currentLimit"]["unit"], "HOUR");
    assert_eq!(v["statuses"][0]["currentLimit"]["name"], "per_user");
    assert_eq!(v["statuses"][0]["limitRemaining"], 1);
    assert!(v["statuses"][0]["durationUntilReset"]
        .as_str()
        .unwrap()
        .ends_with('s'));
    assert_eq!(v["responseHeadersToAdd"][0]["key"], "RateLimit-Policy");
    assert_eq!(s.http("/json", Some(body("alice"))).await.0, 200);
    let (status, text) = s.http("/json", Some(body("alice"))).await;
    assert_eq!(status, 429, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["overallCode"], "OVER_LIMIT");
    // limitRemaining 0 is left out, as protobuf's JSON mapping does.
    assert!(v["statuses"][0].get("limitRemaining").is_none(), "{text}");
    // The camelCase spelling of hits_addend works too.
    let b = br#"{"domain":"web","hitsAddend":2,"descriptors":[{"entries":[{"key":"user","value":"bob"}]}]}"#;
    let (status, text) = s.http("/json", Some(b.to_vec())).await;
    assert_eq!(status, 200, "{text}");
    assert!(!text.contains("limitRemaining"), "{text}");
}

#[tokio::test]
async fn healthcheck_and_metrics_with_envoyproxy_ratelimit_names() {
    let (_dir, s) = start();
    assert_eq!(s.http("/healthcheck", None).await, (200, "OK\n".into()));
    for _ in 0..3 {
        s.http("/json", Some(body("carol"))).await;
    }
    let b = br#"{"domain":"web","descriptors":[{"entries":[{"key":"dashboard","value":"main"}]}]}"#;
    // Three calls: the first registers the detailed counters, the others reuse them.
    for _ in 0..3 {
        s.http("/json", Some(b.to_vec())).await;
    }
    let (status, text) = s.http("/metrics", None).await;
    assert_eq!(status, 200);
    let line = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name) && l.contains("key1=\"user\""))
            .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(line("ratelimit_service_rate_limit_total_hits{"), "3");
    assert_eq!(line("ratelimit_service_rate_limit_over_limit{"), "1");
    assert_eq!(line("ratelimit_service_rate_limit_within_limit{"), "2");
    assert_eq!(line("ratelimit_service_rate_limit_near_limit{"), "1");
    assert!(text.contains("domain=\"web\""), "{text}");
    // detailed_metric labels with the request's own values.
    let detailed = text
        .lines()
        .find(|l| {
            l.starts_with("ratelimit_service_rate_limit_total_hits{")
                && l.contains("key1=\"dashboard_main\"")
        })
        .unwrap_or_else(|| panic!("no detailed total_hits in:\n{text}"));
    assert!(detailed.ends_with(" 3"), "{detailed}");
}

#[tokio::test]
async fn bad_input_is_refused_with_400_and_the_server_keeps_serving() {
    let (_dir, s) = start();
    let bad: Vec<Vec<u8>> = vec![
        b"\xff\xfe\xfd".to_vec(),
        br#"{"domain":"web","descriptors":[{"entries":[{"key":"user","value":"\xff"}]}]}"#.to_vec(),
        b"{".to_vec(),
        b"[]".to_vec(),
        br#"{"domain":"web","descriptors":[]}"#.to_vec(),
        br#"{"domain":"","descriptors":[{"entries":[]}]}"#.to_vec(),
        br#"{"domain":"web","hits_addend":1e30,"descriptors":[{"entries":[]}]}"#.to_vec(),
        br#"{"domain":"web","unknown":1}"#.to_vec(),
        format!(
            r#"{{"domain":"web","descriptors":[{{"entries":[{{"key":"user","value":"{}"}}]}}]}}"#,
            "v".repeat(100_000)
        )
        .into_bytes(),
        format!(
            r#"{{"domain":"web","descriptors":[{}]}}"#,
            vec![r#"{"entries":[{"key":"user","value":"x"}]}"#; 3000].join(",")
        )
        .into_bytes(),
    ];
    for b in bad {
        let (status, text) = s.http("/json", Some(b.clone())).await;
        assert_eq!(
            status,
            400,
            "{} -> {text}",
            String::from_utf8_lossy(&b[..b.len().min(80)])
        );
        assert!(!text.is_empty());
    }
    // A huge hits_addend is a clean OVER_LIMIT, not an error.
    let b = br#"{"domain":"web","hits_addend":4294967295,"descriptors":[{"entries":[{"key":"user","value":"dan"}]}]}"#;
    assert_eq!(s.http("/json", Some(b.to_vec())).await.0, 429);
    assert_eq!(s.http("/json", Some(body("erin"))).await.0, 200);
    assert_eq!(s.http("/healthcheck", None).await.0, 200);
}

#[tokio::test]
async fn x_ratelimit_headers_when_configured() {
    let dir = TempDir::new("xrl");
    dir.write("web.yaml", CONFIG);
    let s = Server::start(&dir.0, &["--response-headers", "x-ratelimit"]);
    let (status, text) = s.http("/json", Some(body("frank"))).await;
    assert_eq!(status, 200, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let headers: Vec<(String, String)> = v["responseHeadersToAdd"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["key"].as_str().unwrap().into(),
                h["value"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        headers[0],
        ("x-ratelimit-limit".into(), "2, 2;w=3600".into())
    );
    assert_eq!(headers[1], ("x-ratelimit-remaining".into(), "1".into()));
    assert_eq!(headers[2].0, "x-ratelimit-reset");
    let off = Server::start(&dir.0, &["--response-headers", "off"]);
    let (_, text) = off.http("/json", Some(body("frank"))).await;
    assert!(!text.contains("responseHeadersToAdd"), "{text}");
}

/// The README's `/json` example is what the server answers (issue 31, item 8): its
/// `curl` body, sent to the server started on `tollgate-server/testdata/config` as the
/// README starts it, gets exactly the JSON the README prints under it (a token bucket,
/// so the first answer does not depend on the time).
#[tokio::test]
async fn the_readme_json_example_is_what_the_server_answers() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // The server's own README (the workspace README links to it).
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut lines = readme
        .lines()
        .skip_while(|l| !l.starts_with("curl -s localhost:8080/json -d '"));
    let curl = lines.next().expect("the README's /json example");
    let sample = lines
        .next()
        .and_then(|l| l.strip_prefix("# "))
        .expect("its answer");
    let body = curl.split('\'').nth(1).expect("a quoted body");
    let s = Server::start(&root.join("testdata/config"), &[]);
    let (status, text) = s.http("/json", Some(body.as_bytes().to_vec())).await;
    assert_eq!(status, 200, "{text}");
    let got: serde_json::Value = serde_json::from_str(&text).unwrap();
    let want: serde_json::Value =
        serde_json::from_str(sample).expect("the README's answer is JSON");
    assert_eq!(got, want, "the server answered {text}");
}
