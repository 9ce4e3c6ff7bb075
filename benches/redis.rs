//! Distributed-mode throughput: decisions per second through one multiplexed connection
//! with many concurrent tasks (exact mode), against `redis-benchmark` running the same
//! GCRA script with `EVALSHA` (the ceiling), and the hybrid mode's local decisions.
//!
//! Starts its own `redis-server` (from `REDIS_SERVER` or `PATH`) on a free loopback
//! port, without persistence. Runs in well under a minute:
//! `cargo bench --features redis --bench redis`.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tollgate::redis::{redis, HybridRateLimiter, RedisRateLimiter};
use tollgate::{Algorithm, Quota};

/// The exact GCRA script, as the crate builds it (prelude + body), for its SHA.
const GCRA_SOURCE: [&str; 2] = [
    include_str!("../src/redis/scripts/prelude.lua"),
    include_str!("../src/redis/scripts/gcra.lua"),
];

const KEYS: u64 = 10_000;
const RUN: Duration = Duration::from_secs(3);

struct Server(Child, u16);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server() -> Server {
    let bin = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port");
    let child = Command::new(&bin)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {bin} (set REDIS_SERVER): {e}"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Server(child, port)
}

/// Exact mode: `tasks` tasks share one limiter (one connection) for `RUN`.
async fn exact(url: &str, tasks: usize) -> f64 {
    // A quota that admits most requests: the script's full write path runs.
    let limiter = RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1000))
        .url(url)
        .prefix("bench")
        .timeout(Duration::from_secs(5))
        .build()
        .await
        .expect("build");
    let count = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (l, count, stop) = (limiter.clone(), count.clone(), stop.clone());
        handles.push(tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(t as u64);
            let mut key = String::new();
            while !stop.load(Ordering::Relaxed) {
                key.clear();
                key.push_str(&rng.u64(0..KEYS).to_string());
                let _ = l.check(&key).await.expect("decision");
                count.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await; // warm up
    let (c0, t0) = (count.load(Ordering::Relaxed), Instant::now());
    tokio::time::sleep(RUN).await;
    let (c1, dt) = (count.load(Ordering::Relaxed), t0.elapsed());
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.await.expect("task");
    }
    assert_eq!(limiter.stats().errors, 0);
    (c1 - c0) as f64 / dt.as_secs_f64()
}

/// The same `EVALSHA` sent with plain redis-rs (a `ConnectionManager`, no tollgate):
/// the client library's own ceiling, to separate tollgate's overhead from redis-rs's.
async fn raw(url: &str, sha: &str, tasks: usize) -> f64 {
    let client = redis::Client::open(url).expect("client");
    let conn = client.get_connection_manager().await.expect("connect");
    let count = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (mut conn, count, stop) = (conn.clone(), count.clone(), stop.clone());
        let sha = sha.to_owned();
        handles.push(tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(t as u64);
            while !stop.load(Ordering::Relaxed) {
                let key = format!("raw:{{{}}}", rng.u64(0..KEYS));
                let reply: Vec<i64> = redis::cmd("EVALSHA")
                    .arg(&sha)
                    .arg(1)
                    .arg(key)
                    .arg(-1)
                    .arg(1)
                    .arg(0)
                    .arg(1000)
                    .arg(1000)
                    .arg(0)
                    .query_async(&mut conn)
                    .await
                    .expect("evalsha");
                assert_eq!(reply.len(), 5);
                count.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (c0, t0) = (count.load(Ordering::Relaxed), Instant::now());
    tokio::time::sleep(RUN).await;
    let (c1, dt) = (count.load(Ordering::Relaxed), t0.elapsed());
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.await.expect("task");
    }
    (c1 - c0) as f64 / dt.as_secs_f64()
}

/// `redis-benchmark` running the same script with `EVALSHA` on random keys.
fn ceiling(port: u16, sha: &str, clients: u32, pipeline: u32) -> (String, f64) {
    let args: Vec<String> = [
        "-h",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-c",
        &clients.to_string(),
        "-P",
        &pipeline.to_string(),
        "-n",
        "100000",
        "-r",
        &KEYS.to_string(),
        "-q",
        "EVALSHA",
        sha,
        "1",
        "bench:{__rand_int__}",
        "-1",
        "1",
        "0",
        "1000",
        "1000",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let command = format!("redis-benchmark {}", args.join(" "));
    let out = Command::new("redis-benchmark")
        .args(&args)
        .output()
        .expect("redis-benchmark (apt-get install redis-tools)");
    let text = String::from_utf8_lossy(&out.stdout);
    // "EVALSHA ...: 81234.56 requests per second, p50=..." (the last \r-separated part).
    let rps = text
        .rsplit('\r')
        .next()
        .and_then(|l| l.split(": ").nth(1))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("cannot parse redis-benchmark output: {text}"));
    (command, rps)
}

/// Hybrid mode: `tasks` OS threads deciding locally, background sync every 50 ms.
async fn hybrid(url: &str, threads: usize) -> (f64, f64) {
    let limiter = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_second(1_000_000))
        .url(url)
        .prefix("bench-hybrid")
        .sync_interval(Duration::from_millis(50))
        .build()
        .await
        .expect("build");
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for t in 0..threads {
        let (l, stop, count) = (limiter.clone(), stop.clone(), count.clone());
        handles.push(std::thread::spawn(move || {
            let mut rng = fastrand::Rng::with_seed(t as u64);
            let keys: Vec<String> = (0..1000).map(|k| k.to_string()).collect();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..256 {
                    let _ = l.check(&keys[rng.usize(0..keys.len())]);
                }
                n += 256;
            }
            count.fetch_add(n, Ordering::Relaxed);
        }));
    }
    let t0 = Instant::now();
    tokio::time::sleep(RUN).await;
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().expect("thread");
    }
    let dt = t0.elapsed();
    let s = limiter.stats();
    (
        count.load(Ordering::Relaxed) as f64 / dt.as_secs_f64(),
        s.round_trips as f64 / s.decisions.max(1) as f64,
    )
}

/// Redis's own time (µs) spent in `EVALSHA` so far, from `INFO commandstats`.
async fn evalsha_usec(url: &str) -> u64 {
    let client = redis::Client::open(url).expect("client");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .expect("info");
    info.lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .and_then(|l| l.split(',').find_map(|f| f.strip_prefix("usec=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// One hybrid sync's cost with `tracked` keys of which `active` were used since the
/// last sync: (wall time of `sync()` in ms, Redis time in `EVALSHA` in ms, keys sent).
async fn sync_cost(url: &str, tracked: usize, active: usize) -> (f64, f64, usize) {
    let limiter = HybridRateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(1_000_000))
        .url(url)
        .prefix(format!("bench-sync-{tracked}-{active}"))
        .max_keys(tracked.max(100_000))
        .timeout(Duration::from_secs(30))
        .sync_interval(Duration::MAX)
        .build()
        .await
        .expect("build");
    let keys: Vec<String> = (0..tracked).map(|k| format!("key-{k}")).collect();
    for k in &keys {
        let _ = limiter.check(k);
    }
    limiter.sync().await.expect("first sync");
    // Spread the active keys over the table.
    let step = tracked / active.max(1);
    for k in keys.iter().step_by(step.max(1)).take(active) {
        let _ = limiter.check(k);
    }
    let before = evalsha_usec(url).await;
    let t0 = Instant::now();
    let sent = limiter.sync().await.expect("measured sync");
    let wall = t0.elapsed().as_secs_f64() * 1e3;
    let redis_ms = (evalsha_usec(url).await - before) as f64 / 1e3;
    (wall, redis_ms, sent)
}

fn main() {
    if std::env::var("REDIS_BENCH").as_deref() == Ok("sync") {
        sync_main();
        return;
    }
    let server = start_server();
    let url = format!("redis://127.0.0.1:{}", server.1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let sha = redis::Script::new(&GCRA_SOURCE.concat())
        .get_hash()
        .to_owned();
    println!(
        "machine: {} cores (shared by this process, redis-server and redis-benchmark)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let mut best = 0f64;
    for tasks in [1, 16, 64, 256] {
        let rps = rt.block_on(exact(&url, tasks));
        best = best.max(rps);
        println!("exact TokenBucket, 1 connection, {tasks:>3} tasks: {rps:>10.0} decisions/s");
    }
    // The ceiling must run the very script the limiter loaded (else it measures errors).
    let loaded: Vec<bool> = rt.block_on(async {
        let client = redis::Client::open(url.as_str()).expect("client");
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        redis::cmd("SCRIPT")
            .arg("EXISTS")
            .arg(&sha)
            .query_async(&mut conn)
            .await
            .expect("script exists")
    });
    assert_eq!(
        loaded,
        [true],
        "the benchmark's SHA is not the limiter's script"
    );
    let raw_rps = rt.block_on(raw(&url, &sha, 256));
    println!(
        "plain redis-rs EVALSHA, 1 connection, 256 tasks: {raw_rps:>10.0}/s \
         (tollgate's best / plain redis-rs: {:.2})",
        best / raw_rps
    );
    let mut top = 0f64;
    for (clients, pipeline) in [(1, 1), (50, 1), (50, 16), (50, 64)] {
        let (cmd, rps) = ceiling(server.1, &sha, clients, pipeline);
        println!("ceiling -c {clients} -P {pipeline}: {rps:>10.0} EVALSHA/s   ({cmd})");
        println!("  ratio best exact / this ceiling: {:.2}", best / rps);
        top = top.max(rps);
    }
    println!(
        "ratio best exact / highest redis-benchmark EVALSHA rate: {:.2}",
        best / top
    );
    for threads in [1, 2] {
        let (rps, rt_ratio) = rt.block_on(hybrid(&url, threads));
        println!(
            "hybrid FixedWindow, {threads} threads, 1000 keys, sync 50 ms: {rps:>12.0} decisions/s, \
             {:.5}% round trips per decision",
            rt_ratio * 100.0
        );
    }
}

/// `REDIS_BENCH=sync cargo bench --features redis --bench redis`: the hybrid sync's
/// cost against tracked and active keys.
fn sync_main() {
    let server = start_server();
    let url = format!("redis://127.0.0.1:{}", server.1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for tracked in [1_000, 10_000, 100_000] {
        for active in [tracked, tracked / 100, 0] {
            let (wall, redis_ms, sent) = rt.block_on(sync_cost(&url, tracked, active));
            println!(
                "hybrid sync, {tracked:>7} tracked, {active:>7} active: {sent:>7} keys sent, \
                 {wall:>8.1} ms wall, {redis_ms:>8.1} ms Redis time"
            );
        }
    }
}
