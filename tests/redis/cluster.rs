//! A real three-primary Redis Cluster on loopback ports: the exact mode, all five
//! algorithms, and the hybrid mode across its nodes, through redis-rs's cluster
//! connection.
//!
//! The redis stage of `scripts/test` starts the cluster (`redis-server
//! --cluster-enabled yes` three times, then `redis-cli --cluster create`) and names its
//! nodes in `TOLLGATE_REDIS_CLUSTER` (`127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`); the
//! tests then take turns on it, each flushing it first. Without the variable each test
//! starts a cluster of its own and kills it on drop, so `cargo test --features redis
//! --test redis` runs alone too.

use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tollgate::redis::redis::cluster::ClusterClient;
use tollgate::redis::{HybridRateLimiter, RedisRateLimiter};
use tollgate::{Algorithm, ManualClock, Quota};

struct Cluster {
    ports: Vec<u16>,
    /// The nodes this test started (none on the stage's cluster).
    children: Vec<Child>,
    /// Their data directory.
    dir: Option<std::path::PathBuf>,
    /// Held while a test uses the stage's cluster: one test at a time.
    _turn: Option<MutexGuard<'static, ()>>,
}

/// Serializes the tests on the stage's cluster.
static SHARED: Mutex<()> = Mutex::new(());

/// A free port for a cluster node: below 55536, with its cluster bus port (the port
/// plus 10,000) free too. (An ephemeral port from the kernel can be above 55535, which
/// `redis-server --cluster-enabled yes` refuses.)
fn cluster_port() -> u16 {
    loop {
        let p = crate::server::free_port();
        if p <= 45_000 && std::net::TcpListener::bind(("127.0.0.1", p + 10_000)).is_ok() {
            return p;
        }
        let p = 20_000 + (p % 25_000);
        if std::net::TcpListener::bind(("127.0.0.1", p)).is_ok()
            && std::net::TcpListener::bind(("127.0.0.1", p + 10_000)).is_ok()
        {
            return p;
        }
    }
}

/// Polls each port's `CLUSTER INFO` until it says `cluster_state:ok`.
fn wait_until_ok(ports: &[u16]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    for &p in ports {
        loop {
            let info = Command::new("redis-cli")
                .args(["-p", &p.to_string(), "cluster", "info"])
                .output()
                .expect("cluster info");
            if String::from_utf8_lossy(&info.stdout).contains("cluster_state:ok") {
                break;
            }
            assert!(Instant::now() < deadline, "cluster never reached state ok");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Cluster {
    fn start() -> Self {
        match std::env::var("TOLLGATE_REDIS_CLUSTER") {
            Ok(seeds) if !seeds.is_empty() => Self::shared(&seeds),
            _ => Self::own(),
        }
    }

    /// The stage's cluster, flushed, for this test alone until it is dropped.
    fn shared(seeds: &str) -> Self {
        let turn = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        let ports: Vec<u16> = seeds
            .split(',')
            .map(|s| {
                let port = s.trim().strip_prefix("127.0.0.1:");
                port.and_then(|p| p.parse().ok()).unwrap_or_else(|| {
                    panic!("TOLLGATE_REDIS_CLUSTER: {s:?} is not 127.0.0.1:port")
                })
            })
            .collect();
        assert_eq!(
            ports.len(),
            3,
            "TOLLGATE_REDIS_CLUSTER names three primaries"
        );
        wait_until_ok(&ports);
        for &p in &ports {
            let out = Command::new("redis-cli")
                .args(["-p", &p.to_string(), "flushall"])
                .output()
                .expect("redis-cli flushall");
            assert!(
                String::from_utf8_lossy(&out.stdout).contains("OK"),
                "flushall on {p}: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        Cluster {
            ports,
            children: Vec::new(),
            dir: None,
            _turn: Some(turn),
        }
    }

    /// A cluster of this test's own, on free ports.
    fn own() -> Self {
        let ports: Vec<u16> = (0..3).map(|_| cluster_port()).collect();
        let dir = std::env::temp_dir().join(format!(
            "tollgate-cluster-{}-{}",
            std::process::id(),
            ports[0]
        ));
        std::fs::create_dir_all(&dir).expect("cluster dir");
        let server = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let children = ports
            .iter()
            .map(|p| {
                Command::new(&server)
                    .current_dir(&dir)
                    .args(["--port", &p.to_string(), "--bind", "127.0.0.1"])
                    .args(["--cluster-enabled", "yes"])
                    .args(["--cluster-config-file", &format!("nodes-{p}.conf")])
                    .args(["--save", "", "--appendonly", "no"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("spawn a cluster node (redis-server)")
            })
            .collect();
        let c = Cluster {
            ports,
            children,
            dir: Some(dir),
            _turn: None,
        };
        for &p in &c.ports {
            let deadline = Instant::now() + Duration::from_secs(10);
            while std::net::TcpStream::connect(("127.0.0.1", p)).is_err() {
                assert!(Instant::now() < deadline, "cluster node {p} did not start");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let nodes: Vec<String> = c.ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&nodes)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        // Wait until every node agrees the cluster is up.
        wait_until_ok(&c.ports);
        c
    }

    async fn connection(&self) -> tollgate::redis::redis::cluster_async::ClusterConnection {
        let nodes: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect();
        ClusterClient::new(nodes)
            .expect("cluster client")
            .get_async_connection()
            .await
            .expect("cluster connection")
    }

    /// Keys held by each node (`DBSIZE`), to check the work spread over all three.
    fn keys_per_node(&self) -> Vec<u64> {
        self.ports
            .iter()
            .map(|p| {
                let out = Command::new("redis-cli")
                    .args(["-p", &p.to_string(), "dbsize"])
                    .output()
                    .expect("dbsize");
                String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .parse()
                    .unwrap_or(0)
            })
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Every algorithm, 50 keys spread over the three primaries: exactly the limit per
/// key, whichever node holds it.
#[tokio::test]
async fn exact_mode_on_a_three_primary_cluster() {
    let cluster = Cluster::start();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(3_600));
    for algorithm in Algorithm::ALL {
        let l = RedisRateLimiter::builder(algorithm, Quota::per_minute(5))
            .connection(cluster.connection().await)
            .prefix(format!("cl-{algorithm:?}"))
            .clock(clock.clone())
            .timeout(Duration::from_secs(2))
            .build()
            .await
            .expect("build on the cluster");
        for key in 0..50 {
            let key = format!("user-{key}");
            let mut admitted = 0;
            for _ in 0..7 {
                admitted += u32::from(l.check(&key).await.expect("decision").is_allowed());
            }
            assert_eq!(admitted, 5, "{algorithm:?} {key}");
        }
    }
    let per_node = cluster.keys_per_node();
    assert!(
        per_node.iter().all(|&n| n > 0),
        "keys on every node: {per_node:?}"
    );
}

/// Two hybrid instances on the cluster share one limit per key; a sync carries keys
/// of every node in one call.
#[tokio::test]
async fn hybrid_mode_on_a_three_primary_cluster() {
    let cluster = Cluster::start();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(3_600) + Duration::from_millis(1));
    let quota = Quota::new(20, Duration::from_secs(60));
    let mut ls = Vec::new();
    for _ in 0..2 {
        ls.push(
            HybridRateLimiter::builder(Algorithm::FixedWindow, quota)
                .connection(cluster.connection().await)
                .prefix("hy")
                .sync_interval(Duration::MAX)
                .timeout(Duration::from_secs(2))
                .clock(clock.clone())
                .build()
                .await
                .expect("build"),
        );
    }
    let keys: Vec<String> = (0..30).map(|k| format!("tenant-{k}")).collect();
    for key in &keys {
        for _ in 0..15 {
            assert!(ls[0].check(key).is_allowed());
        }
    }
    ls[0].sync().await.expect("sync across nodes");
    ls[1].sync().await.expect("sync");
    for key in &keys {
        // The second instance learns the key's count at its first sync of it.
        let _ = ls[1].check(key);
    }
    ls[1].sync().await.expect("sync");
    for key in &keys {
        let mut more = 0;
        while ls[1].check(key).is_allowed() {
            more += 1;
            assert!(more <= 20);
        }
        // 15 by the first instance, 1 probe by the second: 4 left.
        assert_eq!(more, 4, "{key}");
    }
    let per_node = cluster.keys_per_node();
    assert!(
        per_node.iter().all(|&n| n > 0),
        "keys on every node: {per_node:?}"
    );
}

/// A prefix with braces would make it every key's hash tag (one slot, one node): both
/// modes refuse it at build, before connecting.
#[tokio::test]
async fn a_prefix_with_braces_is_refused() {
    for prefix in ["app{1}", "a}b", "{"] {
        let exact = RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(5))
            .url("redis://127.0.0.1:1")
            .prefix(prefix)
            .build()
            .await;
        assert!(
            matches!(exact, Err(tollgate::redis::Error::Unsupported(_))),
            "{prefix}"
        );
        let hybrid = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(5))
            .url("redis://127.0.0.1:1")
            .prefix(prefix)
            .build()
            .await;
        assert!(
            matches!(hybrid, Err(tollgate::redis::Error::Unsupported(_))),
            "{prefix}"
        );
    }
}

/// `check_all` on the cluster: limits whose keys share a hash tag are decided together
/// (every algorithm, on whichever node holds the slot); keys in different slots are
/// refused before anything is sent, naming the slots.
#[tokio::test]
async fn check_all_on_a_cluster_needs_one_slot() {
    use tollgate::redis::{check_all, Error};
    let cluster = Cluster::start();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(3_600));
    let first = RedisRateLimiter::builder(Algorithm::SlidingWindow, Quota::per_minute(3))
        .connection(cluster.connection().await)
        .prefix("mc-user")
        .clock(clock.clone())
        .timeout(Duration::from_secs(2))
        .build()
        .await
        .expect("build");
    let mut limiters = vec![first];
    for algorithm in [
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingLog,
    ] {
        let l = RedisRateLimiter::builder(algorithm, Quota::per_minute(5))
            .connection_of(&limiters[0])
            .prefix(format!("mc-{algorithm:?}"))
            .clock(clock.clone())
            .timeout(Duration::from_secs(2))
            .build()
            .await
            .expect("build");
        limiters.push(l);
    }
    // Tenants spread over the nodes; each call's keys share the tenant's tag.
    for t in 0..12 {
        let keys: Vec<String> = (0..limiters.len())
            .map(|i| format!("{{tenant-{t}}}:{i}"))
            .collect();
        let limits: Vec<(&RedisRateLimiter, &str)> = limiters
            .iter()
            .zip(&keys)
            .map(|(l, k)| (l, k.as_str()))
            .collect();
        let mut admitted = 0;
        for _ in 0..5 {
            admitted += u32::from(check_all(&limits, 1).await.expect("one slot").is_allowed());
        }
        // The sliding window's 3 bind; the others gave exactly 3 too.
        assert_eq!(admitted, 3, "tenant {t}");
        for (l, k) in &limits[1..] {
            assert_eq!(l.check_n(k, 0).await.unwrap().remaining(), 2, "tenant {t}");
        }
    }
    assert!(cluster.keys_per_node().iter().all(|&n| n > 0));
    // Two keys without a common tag: two slots, refused before sending.
    let limits = [(&limiters[0], "alice"), (&limiters[1], "bob")];
    match check_all(&limits, 1).await {
        Err(Error::CrossSlot { slots }) => {
            assert_eq!(slots.len(), 2);
            assert_eq!(slots[0].0, "mc-user:{alice}");
            assert_eq!(slots[1].0, "mc-TokenBucket:{bob}");
            assert_ne!(slots[0].1, slots[1].1);
            let msg = Error::CrossSlot {
                slots: slots.clone(),
            }
            .to_string();
            assert!(msg.contains(&slots[0].1.to_string()) && msg.contains(&slots[1].1.to_string()));
        }
        other => panic!("expected CrossSlot, got {other:?}"),
    }
    assert_eq!(
        limiters[0].check_n("alice", 0).await.unwrap().remaining(),
        3
    );
    assert_eq!(limiters[1].check_n("bob", 0).await.unwrap().remaining(), 5);
}
