//! A deployment made for envoyproxy/ratelimit, run with only the image changed: its
//! environment variables, its readiness rule and its `/rlconfig` debug page (issue 29).

mod common;

use common::{call, desc, free_port, request, Server, TempDir};
use std::time::{Duration, Instant};

const CONFIG: &str = "domain: app
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 3
  - key: quota
    quota_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 5
";

/// Polls until `f` holds.
async fn eventually<F: std::future::Future<Output = bool>>(mut f: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f().await {
        assert!(Instant::now() < deadline, "condition never held");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config, GRPC_HOST/GRPC_PORT, HOST/PORT, LOG_FORMAT and
/// LIMIT_RESPONSE_HEADERS_ENABLED, with no flag.
#[tokio::test]
async fn upstreams_variables_configure_the_server() {
    let root = TempDir::new("runtime");
    let app = root.0.join("ratelimit").join("config");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::write(app.join("app.yaml"), CONFIG).unwrap();
    let (grpc, http) = (free_port(), free_port());
    let env = [
        ("RUNTIME_ROOT", root.0.display().to_string()),
        ("RUNTIME_SUBDIRECTORY", "ratelimit".to_string()),
        ("GRPC_HOST", "127.0.0.1".to_string()),
        ("GRPC_PORT", grpc.to_string()),
        ("HOST", "127.0.0.1".to_string()),
        ("PORT", http.to_string()),
        ("LOG_FORMAT", "text".to_string()),
        ("LIMIT_RESPONSE_HEADERS_ENABLED", "true".to_string()),
        ("SOME_UPSTREAM_SETTING_WE_DO_NOT_HAVE", "x".to_string()),
    ];
    let s = Server::spawn(None, &[], &env);
    let mut c = s.grpc_client().await;
    let r = call(&mut c, request("app", vec![desc(&[("user", "u")])]))
        .await
        .expect("call");
    assert_eq!(r.statuses[0].limit_remaining, 2);
    let headers: Vec<(&str, &str)> = r
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.as_str(), h.value.as_str()))
        .collect();
    assert_eq!(headers[0], ("RateLimit-Limit", "3"), "{headers:?}");
    assert_eq!(headers[1], ("RateLimit-Remaining", "2"), "{headers:?}");
    assert_eq!(headers[2].0, "RateLimit-Reset", "{headers:?}");
    // LOG_FORMAT=text: not one JSON object per line.
    assert!(s.log_text().contains(" INFO "), "{}", s.log_text());
}

/// A flag wins over a variable.
#[tokio::test]
async fn flags_win_over_variables() {
    let dir = TempDir::new("flags-win");
    dir.write("app.yaml", CONFIG);
    let env = [
        ("GRPC_PORT", "1".to_string()),
        ("PORT", "2".to_string()),
        ("LIMIT_RESPONSE_HEADERS_ENABLED", "true".to_string()),
        ("RUNTIME_ROOT", "/nonexistent".to_string()),
    ];
    let s = Server::spawn(Some(&dir.0), &["--response-headers", "off"], &env);
    let mut c = s.grpc_client().await;
    let r = call(&mut c, request("app", vec![desc(&[("user", "u")])]))
        .await
        .expect("call");
    assert_eq!(r.statuses[0].limit_remaining, 2);
    assert!(r.response_headers_to_add.is_empty(), "{r:?}");
}

/// A variable that cannot be used stops the server with a message naming it.
#[test]
fn a_bad_variable_is_refused_by_name() {
    let dir = TempDir::new("bad-var");
    let log = dir.0.join("stderr.log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tollgate-server"))
        .arg("--config")
        .arg(&dir.0)
        .args(["--http", "127.0.0.1:0"])
        .env("GRPC_PORT", "eighty")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("run");
    // It must stop by itself; a server that ignores the variable would run on.
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running with GRPC_PORT=eighty");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success());
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(err.contains("GRPC_PORT=eighty"), "{err}");
}

/// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: `/healthcheck` fails until a configuration
/// with a domain is loaded.
#[tokio::test]
async fn readiness_waits_for_a_configuration() {
    let dir = TempDir::new("ready");
    let env = [(
        "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
        "true".to_string(),
    )];
    let s = Server::spawn(Some(&dir.0), &[], &env);
    assert_eq!(s.http("/healthcheck", None).await.0, 500);
    dir.write("app.yaml", CONFIG);
    eventually(|| async { s.http("/healthcheck", None).await.0 == 200 }).await;
    // Without the setting, an empty directory is healthy (envoyproxy/ratelimit's default).
    let empty = TempDir::new("ready-default");
    let s = Server::spawn(Some(&empty.0), &[], &[]);
    assert_eq!(s.http("/healthcheck", None).await.0, 200);
}

/// `/rlconfig` prints the loaded limits in upstream's format.
#[tokio::test]
async fn rlconfig_prints_the_loaded_configuration() {
    let dir = TempDir::new("rlconfig");
    dir.write("app.yaml", CONFIG);
    let s = Server::start(&dir.0, &[]);
    let (status, text) = s.http("/rlconfig", None).await;
    assert_eq!(status, 200);
    assert_eq!(
        text,
        "app.quota: unit=MINUTE requests_per_unit=5, shadow_mode: false, quota_mode: true\n\
         app.user: unit=HOUR requests_per_unit=3, shadow_mode: false, quota_mode: false\n"
    );
}
