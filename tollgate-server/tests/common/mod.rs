//! Shared by the integration tests: the real `tollgate-server` binary on free loopback
//! ports (killed on drop), a throwaway `redis-server`, a gRPC client (the crate's generated
//! tonic client) and an HTTP client (hyper).

#![allow(dead_code, unreachable_pub, missing_docs)]

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tollgate_server::proto::rate_limit_service::rate_limit_service_client::RateLimitServiceClient;
use tollgate_server::proto::{Entry, RateLimitDescriptor, RateLimitRequest, RateLimitResponse};

pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free loopback port");
    l.local_addr().expect("local addr").port()
}

/// A temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "tollgate-server-{name}-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }

    pub fn write(&self, file: &str, text: &str) {
        // Written beside, then renamed: a reload never reads a half-written file.
        let tmp = self.0.join(format!(".{file}.tmp"));
        std::fs::write(&tmp, text).expect("write config");
        std::fs::rename(&tmp, self.0.join(file)).expect("rename config");
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running tollgate-server.
pub struct Server {
    pub grpc: u16,
    pub http: u16,
    pub log: PathBuf,
    child: Child,
}

impl Server {
    pub fn start(config: &Path, extra: &[&str]) -> Server {
        Server::spawn(Some(config), extra, &[])
    }

    /// Starts the binary with `env` added to its environment; `--config`, `--grpc` and
    /// `--http` are given only with `config` (else the variables must say them, and
    /// GRPC_PORT and PORT are then the ports waited for).
    ///
    /// A free port is free only when asked: another process (a test running beside, a
    /// client's own ephemeral port) may take it before the server binds it. With
    /// `config`, a server that exits on "Address already in use" is started again on
    /// new ports (at most five times).
    pub fn spawn(config: Option<&Path>, extra: &[&str], env: &[(&str, String)]) -> Server {
        for _ in 0..4 {
            if let Some(server) = Server::try_spawn(config, extra, env) {
                return server;
            }
        }
        Server::try_spawn(config, extra, env).expect("tollgate-server bound its ports")
    }

    /// One start; `None` when the server exited because a port it was given was taken.
    fn try_spawn(config: Option<&Path>, extra: &[&str], env: &[(&str, String)]) -> Option<Server> {
        let var = |k: &str| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        let (grpc, http) = match config {
            Some(_) => (free_port(), free_port()),
            None => (
                var("GRPC_PORT")
                    .and_then(|p| p.parse().ok())
                    .unwrap_or(8081),
                var("PORT").and_then(|p| p.parse().ok()).unwrap_or(8080),
            ),
        };
        let log = std::env::temp_dir().join(format!(
            "tollgate-server-{}-{grpc}-{}.log",
            std::process::id(),
            free_port()
        ));
        let out = std::fs::File::create(&log).expect("log file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tollgate-server"));
        if let Some(config) = config {
            cmd.arg("--config")
                .arg(config)
                .args(["--grpc", &format!("127.0.0.1:{grpc}")])
                .args(["--http", &format!("127.0.0.1:{http}")])
                .args(["--log-format", "text"]);
        }
        let mut child = cmd
            .args(if extra.contains(&"--watch-interval-ms") {
                &[][..]
            } else {
                &["--watch-interval-ms", "100"][..]
            })
            .args(extra)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .expect("spawn tollgate-server");
        let deadline = Instant::now() + Duration::from_secs(20);
        for port in [http, grpc] {
            while TcpStream::connect(("127.0.0.1", port)).is_err() {
                if let Ok(Some(_)) = child.try_wait() {
                    let text = std::fs::read_to_string(&log).unwrap_or_default();
                    assert!(
                        config.is_some() && text.contains("Address already in use"),
                        "tollgate-server exited before listening on {port}: {text}"
                    );
                    return None;
                }
                assert!(
                    Instant::now() < deadline,
                    "tollgate-server never listened on {port}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Some(Server {
            grpc,
            http,
            log,
            child,
        })
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -{sig}");
    }

    pub async fn grpc_client(&self) -> RateLimitServiceClient<tonic::transport::Channel> {
        RateLimitServiceClient::connect(format!("http://127.0.0.1:{}", self.grpc))
            .await
            .expect("connect gRPC")
    }

    /// POSTs `body` to /json (or GETs `path` when body is None): (status, body).
    pub async fn http(&self, path: &str, body: Option<Vec<u8>>) -> (u16, String) {
        let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
        let uri = format!("http://127.0.0.1:{}{path}", self.http);
        let req = match body {
            Some(b) => hyper::Request::post(uri)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(b))),
            None => hyper::Request::get(uri).body(Full::new(Bytes::new())),
        }
        .expect("request");
        let resp = client.request(req).await.expect("HTTP call");
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// One descriptor of (key, value) entries.
pub fn desc(pairs: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: pairs
            .iter()
            .map(|(k, v)| Entry {
                key: (*k).to_string(),
                value: (*v).to_string(),
            })
            .collect(),
        limit: None,
        hits_addend: None,
        is_negative_hits: false,
    }
}

pub fn request(domain: &str, descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_string(),
        descriptors,
        hits_addend: 0,
    }
}

pub async fn call(
    c: &mut RateLimitServiceClient<tonic::transport::Channel>,
    req: RateLimitRequest,
) -> Result<RateLimitResponse, tonic::Status> {
    c.should_rate_limit(req)
        .await
        .map(tonic::Response::into_inner)
}

/// A throwaway redis-server on a free loopback port, killed on drop.
pub struct Redis {
    pub port: u16,
    child: Child,
}

impl Redis {
    /// Starts one; a redis-server that exits before listening (its free port was taken
    /// meanwhile, as `Server::spawn` says) is started again on another (five tries).
    pub fn start() -> Redis {
        let bin = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new(&bin)
                .args(["--port", &port.to_string()])
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server not found: install it (apt-get install redis-server)");
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Redis { port, child };
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "redis-server never listened on {port}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("redis-server exited before listening, five times");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status();
        self.kill();
    }
}

/// envoyproxy/ratelimit's `examples/ratelimit/config/example.yaml` with its two
/// quota-mode services made budgets (issue 30): the one change is a `budget: true` line
/// in each.
pub fn upstream_example_with_budgets() -> String {
    let text = include_str!("../../testdata/upstream/examples/example.yaml");
    let from = "    quota_mode: true\n    rate_limit:\n";
    assert_eq!(text.matches(from).count(), 2, "service_1 and service_2");
    text.replace(
        from,
        "    quota_mode: true\n    rate_limit:\n      budget: true\n",
    )
}
