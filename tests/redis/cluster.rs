//! A real three-primary Redis Cluster on loopback ports: the exact mode, all five
//! algorithms, and the hybrid mode across its nodes, through redis-rs's cluster
//! connection.
//!
//! The cluster is the one `scripts/test redis` starts when `TOLLGATE_REDIS_CLUSTER`
//! holds its seed addresses (`127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`); otherwise each
//! test starts its own (`redis-server --cluster-enabled yes` three times, then
//! `redis-cli --cluster create`), killed on drop. On a shared cluster every test's
//! prefixes carry this process's id, so runs and tests never see each other's keys.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tollgate::redis::redis::cluster::ClusterClient;
use tollgate::redis::{HybridRateLimiter, RedisRateLimiter};
use tollgate::{Algorithm, ManualClock, Quota};

/// The environment variable holding a running cluster's seed addresses.
const CLUSTER_VAR: &str = "TOLLGATE_REDIS_CLUSTER";

struct Cluster {
    /// Each primary's `(host, port)`.
    nodes: Vec<(String, u16)>,
    /// The nodes this test started (none on a shared cluster).
    children: Vec<Child>,
    /// The nodes' data directory, removed on drop (none on a shared cluster).
    dir: Option<std::path::PathBuf>,
}

/// A free port for a cluster node: below 55536, with its cluster bus port (the port
/// plus 10,000) free too. (An ephemeral port from the kernel can be above 55535, which
/// `redis-server --cluster-enabled yes` refuses: an intermittent failure.)
fn cluster_port() -> u16 {
    loop {
        let p = crate::server::free_port();
        let p = if p <= 45_000 { p } else { 20_000 + p % 25_000 };
        if std::net::TcpListener::bind(("127.0.0.1", p)).is_ok()
            && std::net::TcpListener::bind(("127.0.0.1", p + 10_000)).is_ok()
        {
            return p;
        }
    }
}

impl Cluster {
    /// The cluster named by `TOLLGATE_REDIS_CLUSTER`, or a new one.
    fn start() -> Self {
        match std::env::var(CLUSTER_VAR) {
            Ok(seeds) if !seeds.trim().is_empty() => Self::shared(&seeds),
            _ => Self::own(),
        }
    }

    /// The running cluster at `seeds` (`host:port,host:port,...`), after checking that
    /// it is up and has three primaries.
    fn shared(seeds: &str) -> Self {
        let nodes: Vec<(String, u16)> = seeds
            .split(',')
            .map(|a| {
                let (host, port) = a
                    .trim()
                    .rsplit_once(':')
                    .unwrap_or_else(|| panic!("{CLUSTER_VAR}: {a:?} is not host:port"));
                let port = port
                    .parse()
                    .unwrap_or_else(|_| panic!("{CLUSTER_VAR}: bad port in {a:?}"));
                (host.to_owned(), port)
            })
            .collect();
        let c = Cluster {
            nodes,
            children: Vec::new(),
            dir: None,
        };
        let info = c.cli(0, &["cluster", "info"]);
        assert!(
            info.contains("cluster_state:ok") && info.contains("cluster_size:3"),
            "{CLUSTER_VAR}={seeds} is not a three-primary cluster in state ok:\n{info}"
        );
        c
    }

    /// A new cluster of three primaries on free loopback ports.
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
            nodes: ports.iter().map(|&p| ("127.0.0.1".to_owned(), p)).collect(),
            children,
            dir: Some(dir),
        };
        for &p in &ports {
            let deadline = Instant::now() + Duration::from_secs(10);
            while std::net::TcpStream::connect(("127.0.0.1", p)).is_err() {
                assert!(Instant::now() < deadline, "cluster node {p} did not start");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let nodes: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
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
        let deadline = Instant::now() + Duration::from_secs(20);
        for i in 0..c.nodes.len() {
            while !c.cli(i, &["cluster", "info"]).contains("cluster_state:ok") {
                assert!(Instant::now() < deadline, "cluster never reached state ok");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        c
    }

    /// `redis-cli` against node `i`: its standard output.
    fn cli(&self, i: usize, args: &[&str]) -> String {
        let (host, port) = &self.nodes[i];
        let out = Command::new("redis-cli")
            .args(["-h", host, "-p", &port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `name`, made unique to this process on a shared cluster (a cluster of our own
    /// starts empty).
    fn prefix(&self, name: &str) -> String {
        if self.dir.is_some() {
            name.to_owned()
        } else {
            format!("{name}-{}", std::process::id())
        }
    }

    async fn connection(&self) -> tollgate::redis::redis::cluster_async::ClusterConnection {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|(h, p)| format!("redis://{h}:{p}"))
            .collect();
        ClusterClient::new(nodes)
            .expect("cluster client")
            .get_async_connection()
            .await
            .expect("cluster connection")
    }

    /// Keys whose names start with `prefix` held by each node, to check that the work
    /// spread over all three.
    fn keys_per_node(&self, prefix: &str) -> Vec<usize> {
        let pattern = format!("{prefix}*");
        (0..self.nodes.len())
            .map(|i| {
                self.cli(i, &["--scan", "--pattern", &pattern])
                    .lines()
                    .filter(|l| !l.is_empty())
                    .count()
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
    let base = cluster.prefix("cl");
    for algorithm in Algorithm::ALL {
        let l = RedisRateLimiter::builder(algorithm, Quota::per_minute(5))
            .connection(cluster.connection().await)
            .prefix(format!("{base}-{algorithm:?}"))
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
    let per_node = cluster.keys_per_node(&base);
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
    let prefix = cluster.prefix("hy");
    let mut ls = Vec::new();
    for _ in 0..2 {
        ls.push(
            HybridRateLimiter::builder(Algorithm::FixedWindow, quota)
                .connection(cluster.connection().await)
                .prefix(prefix.as_str())
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
    let per_node = cluster.keys_per_node(&prefix);
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
    let base = cluster.prefix("mc");
    let first = RedisRateLimiter::builder(Algorithm::SlidingWindow, Quota::per_minute(3))
        .connection(cluster.connection().await)
        .prefix(format!("{base}-user"))
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
            .prefix(format!("{base}-{algorithm:?}"))
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
    assert!(cluster.keys_per_node(&base).iter().all(|&n| n > 0));
    // Two keys without a common tag: two slots, refused before sending.
    let limits = [(&limiters[0], "alice"), (&limiters[1], "bob")];
    match check_all(&limits, 1).await {
        Err(Error::CrossSlot { slots }) => {
            assert_eq!(slots.len(), 2);
            assert_eq!(slots[0].0, format!("{base}-user:{{alice}}"));
            assert_eq!(slots[1].0, format!("{base}-TokenBucket:{{bob}}"));
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

/// The buckets carry what a key used over `set_quota` in requests on the cluster too,
/// for keys on every node, through the single-limit and the multi-limit scripts.
#[tokio::test]
async fn set_quota_carries_over_in_requests_on_a_cluster() {
    use tollgate::redis::check_all;
    let cluster = Cluster::start();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(3_600));
    let base = cluster.prefix("co");
    for algorithm in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
        let build = |prefix: String| {
            let clock = clock.clone();
            let cluster = &cluster;
            async move {
                RedisRateLimiter::builder(algorithm, Quota::per_minute(10))
                    .connection(cluster.connection().await)
                    .prefix(prefix)
                    .clock(clock)
                    .timeout(Duration::from_secs(2))
                    .build()
                    .await
                    .expect("build on the cluster")
            }
        };
        let single = build(format!("{base}-{algorithm:?}")).await;
        let multi = build(format!("{base}-multi-{algorithm:?}")).await;
        let keys: Vec<String> = (0..12).map(|k| format!("{{user-{k}}}")).collect();
        for key in &keys {
            assert!(single.check_n(key, 10).await.unwrap().is_allowed());
            assert!(check_all(&[(&multi, key.as_str())], 10)
                .await
                .unwrap()
                .is_allowed());
        }
        // 10 used of 10 per minute: 10 used of 1,000 per minute.
        single.set_quota(Quota::per_minute(1_000)).unwrap();
        multi.set_quota(Quota::per_minute(1_000)).unwrap();
        for key in &keys {
            let d = single.check(key).await.unwrap();
            assert_eq!((d.is_allowed(), d.remaining()), (true, 1_000 - 11), "{key}");
            let d = check_all(&[(&multi, key.as_str())], 1).await.unwrap();
            assert!(d.is_allowed(), "{key}");
            assert_eq!(d.decisions()[0].remaining(), 1_000 - 11, "{key}");
        }
        // 11 used of 1,000: nothing left on 10 per minute.
        single.set_quota(Quota::per_minute(10)).unwrap();
        multi.set_quota(Quota::per_minute(10)).unwrap();
        for key in &keys {
            assert!(!single.check(key).await.unwrap().is_allowed(), "{key}");
            let d = check_all(&[(&multi, key.as_str())], 1).await.unwrap();
            assert!(!d.is_allowed(), "{key}");
        }
    }
    assert!(cluster.keys_per_node(&base).iter().all(|&n| n > 0));
}

// Peeks on the cluster: a file of its own, a child module that uses this one's `Cluster`.
#[path = "cluster_peek.rs"]
mod peek;
