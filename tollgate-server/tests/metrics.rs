//! What `/metrics` and the log say about the requests (issue 29, items 10 and 11): labels
//! built from the descriptor's levels, and requests no limit applies to made visible.

mod common;

use common::{Server, TempDir};

const CONFIG: &str = "domain: web
descriptors:
  - key: remote_address
    detailed_metric: true
    rate_limit:
      unit: hour
      requests_per_unit: 9
";

fn call(domain: &str, key: &str, value: &str) -> Vec<u8> {
    format!(
        r#"{{"domain":"{domain}","descriptors":[{{"entries":[{{"key":"{key}","value":"{value}"}}]}}]}}"#
    )
    .into_bytes()
}

/// The sample of the first line of `text` starting with `prefix` and holding every one of
/// `labels`.
fn sample(text: &str, prefix: &str, labels: &[&str]) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with(prefix) && labels.iter().all(|x| l.contains(x)))
        .and_then(|l| l.rsplit(' ').next())
        .map(str::to_string)
}

/// Item 10: a value with dots (an IP address) is one label, `key1="remote_address_50.0.0.5"`,
/// not four.
#[tokio::test]
async fn a_dotted_value_is_one_metric_label() {
    let dir = TempDir::new("metrics-dots");
    dir.write("web.yaml", CONFIG);
    let s = Server::start(&dir.0, &[]);
    let (status, _) = s
        .http("/json", Some(call("web", "remote_address", "50.0.0.5")))
        .await;
    assert_eq!(status, 200);
    let (_, text) = s.http("/metrics", None).await;
    let hits = sample(
        &text,
        "ratelimit_service_rate_limit_total_hits{",
        &["domain=\"web\"", "key1=\"remote_address_50.0.0.5\""],
    );
    assert_eq!(hits.as_deref(), Some("1"), "{text}");
    assert!(!text.contains("key2=\"0\""), "{text}");
}

/// Item 11: a request to an unknown domain is counted, and logged once per domain; a
/// descriptor of a known domain that matches no limit is counted.
#[tokio::test]
async fn requests_no_limit_applies_to_are_counted_and_unknown_domains_logged_once() {
    let dir = TempDir::new("metrics-unknown");
    dir.write("web.yaml", CONFIG);
    let s = Server::start(&dir.0, &[]);
    for _ in 0..2 {
        let (status, text) = s
            .http("/json", Some(call("wbe", "remote_address", "x")))
            .await;
        assert_eq!(status, 200, "{text}");
    }
    let (status, _) = s
        .http("/json", Some(call("web", "remote_adress", "x")))
        .await;
    assert_eq!(status, 200);
    let (_, text) = s.http("/metrics", None).await;
    let not_found = sample(
        &text,
        "ratelimit_service_rate_limit_domain_not_found{",
        &["domain=\"wbe\""],
    );
    assert_eq!(not_found.as_deref(), Some("2"), "{text}");
    let unmatched = sample(
        &text,
        "tollgate_server_descriptors_unmatched_total{",
        &["domain=\"web\""],
    );
    assert_eq!(unmatched.as_deref(), Some("1"), "{text}");
    let log = s.log_text();
    let lines = log
        .lines()
        .filter(|l| l.contains("domain the configuration does not have") && l.contains("wbe"))
        .count();
    assert_eq!(lines, 1, "{log}");
}

/// Item 11: a configuration directory with no file starts, and says that nothing is limited.
#[tokio::test]
async fn an_empty_configuration_directory_is_warned_about() {
    let dir = TempDir::new("metrics-empty");
    let s = Server::start(&dir.0, &[]);
    let log = s.log_text();
    assert!(log.contains("no configuration file"), "{log}");
}
