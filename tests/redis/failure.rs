//! Redis down, slow, or answering garbage: errors within the timeout, fallbacks by
//! policy, and service back when Redis returns.

use crate::server::{free_port, RedisServer};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};
use tollgate::redis::{Error, Fallback, RedisRateLimiter};
use tollgate::{Algorithm, Quota};

const TIMEOUT: Duration = Duration::from_millis(200);
/// Generous: the machine is shared; what matters is "bounded", not the exact figure.
const BOUND: Duration = Duration::from_secs(3);

async fn limiter(url: String, fallback: Fallback) -> Result<RedisRateLimiter, Error> {
    RedisRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1000))
        .url(url)
        .timeout(TIMEOUT)
        .fallback(fallback)
        .build()
        .await
}

#[tokio::test]
async fn stopped_redis_gives_errors_then_service_resumes() {
    let mut server = RedisServer::start();
    let l = limiter(server.url(), Fallback::Error).await.expect("build");
    assert!(l.check("a").await.expect("up").is_allowed());
    server.stop();
    let mut slowest = Duration::ZERO;
    for _ in 0..5 {
        let start = Instant::now();
        let r = l.check("a").await;
        assert!(r.is_err(), "decision while redis is down: {r:?}");
        assert!(r.unwrap_err().is_redis_unavailable());
        slowest = slowest.max(start.elapsed());
    }
    println!("redis down: slowest error after {slowest:?} (timeout {TIMEOUT:?})");
    assert!(slowest < BOUND, "took {slowest:?}");
    server.restart();
    // The restarted server has no scripts cached: NOSCRIPT must be handled.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match l.check("a").await {
            Ok(d) => {
                assert!(d.is_allowed());
                break;
            }
            Err(e) => assert!(Instant::now() < deadline, "no recovery: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(l.stats().errors >= 5);
}

#[tokio::test]
async fn fallback_policies_decide_while_redis_is_down() {
    let mut server = RedisServer::start();
    let allow = limiter(server.url(), Fallback::Allow).await.expect("build");
    let deny = limiter(server.url(), Fallback::Deny).await.expect("build");
    let local = limiter(server.url(), Fallback::Local(Quota::per_hour(3)))
        .await
        .expect("build");
    server.stop();
    for _ in 0..5 {
        assert!(allow.check("k").await.expect("fallback").is_allowed());
        assert!(!deny.check("k").await.expect("fallback").is_allowed());
    }
    let admitted = {
        let mut n = 0;
        for _ in 0..10 {
            n += u32::from(local.check("k").await.expect("fallback").is_allowed());
        }
        n
    };
    assert_eq!(admitted, 3, "the local stand-in enforces its own quota");
    assert!(local.check("other").await.expect("fallback").is_allowed());
    for l in [&allow, &deny, &local] {
        let s = l.stats();
        assert!(s.errors >= 1 && s.fallbacks >= 5, "{s:?}");
    }
    server.restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    let before = local.stats().decisions;
    while local.stats().decisions == before {
        assert!(Instant::now() < deadline, "redis never took over again");
        let _ = local.check("k").await.expect("decision");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Fake {
    /// Never answers anything.
    Silent,
    /// Answers `+OK` to everything.
    Garbage,
    /// Answers `+OK` to the connection handshake, then nothing to `EVALSHA`.
    HangsOnScripts,
}

/// A TCP server that plays a broken Redis.
fn fake_server(mode: Fake) -> u16 {
    let port = free_port();
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    let packet = &buf[..n];
                    let script = packet
                        .windows(7)
                        .any(|w| w.eq_ignore_ascii_case(b"EVALSHA"));
                    if mode == Fake::Silent || (mode == Fake::HangsOnScripts && script) {
                        continue;
                    }
                    // One +OK per command in the packet (each starts with '*').
                    let cmds = packet.iter().filter(|b| **b == b'*').count().max(1);
                    for _ in 0..cmds {
                        if s.write_all(b"+OK\r\n").is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    port
}

#[tokio::test]
async fn hung_server_times_out_within_the_timeout() {
    let port = fake_server(Fake::HangsOnScripts);
    let l = limiter(format!("redis://127.0.0.1:{port}"), Fallback::Error)
        .await
        .expect("the handshake is answered");
    let start = Instant::now();
    let e = l.check("k").await.expect_err("no answer is an error");
    println!(
        "hung server: decision error after {:?}: {e}",
        start.elapsed()
    );
    assert!(matches!(e, Error::Timeout(_)), "{e}");
    assert!(
        start.elapsed() >= TIMEOUT / 2,
        "answered before any timeout: {e}"
    );
    assert!(start.elapsed() < BOUND);
}

#[tokio::test]
async fn silent_server_times_out() {
    let port = fake_server(Fake::Silent);
    let start = Instant::now();
    let r = limiter(format!("redis://127.0.0.1:{port}"), Fallback::Error).await;
    match r {
        // Connecting needs no answer: then the first decision must time out.
        Ok(l) => {
            let start = Instant::now();
            let e = l.check("k").await.expect_err("no answer is an error");
            println!(
                "silent server: decision error after {:?}: {e}",
                start.elapsed()
            );
            assert!(e.is_redis_unavailable(), "{e}");
            assert!(start.elapsed() < BOUND);
        }
        Err(e) => {
            println!(
                "silent server: build error after {:?}: {e}",
                start.elapsed()
            );
            assert!(e.is_redis_unavailable(), "{e}");
            assert!(start.elapsed() < BOUND);
        }
    }
}

#[tokio::test]
async fn garbage_replies_are_errors() {
    let port = fake_server(Fake::Garbage);
    let l = limiter(format!("redis://127.0.0.1:{port}"), Fallback::Error)
        .await
        .expect("build against +OK server");
    let start = Instant::now();
    let e = l.check("k").await.expect_err("+OK is not a decision");
    assert!(matches!(e, Error::BadReply(_)), "{e}");
    assert!(start.elapsed() < BOUND);
    let with_fallback = limiter(format!("redis://127.0.0.1:{port}"), Fallback::Deny)
        .await
        .expect("build");
    assert!(!with_fallback
        .check("k")
        .await
        .expect("fallback")
        .is_allowed());
    assert_eq!(with_fallback.stats().fallbacks, 1);
}
