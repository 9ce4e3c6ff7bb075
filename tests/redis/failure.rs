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
    for _ in 0..5 {
        let start = Instant::now();
        let r = l.check("a").await;
        assert!(r.is_err(), "decision while redis is down: {r:?}");
        assert!(r.unwrap_err().is_redis_unavailable());
        assert!(start.elapsed() < BOUND, "took {:?}", start.elapsed());
    }
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

/// A TCP server that accepts and either never answers or answers `+OK` to everything.
fn fake_server(garbage: bool) -> u16 {
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
                    if garbage {
                        // One +OK per command in the packet (each starts with '*').
                        let cmds = buf[..n].iter().filter(|b| **b == b'*').count().max(1);
                        for _ in 0..cmds {
                            if s.write_all(b"+OK\r\n").is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    port
}

#[tokio::test]
async fn silent_server_times_out() {
    let port = fake_server(false);
    let start = Instant::now();
    let r = limiter(format!("redis://127.0.0.1:{port}"), Fallback::Error).await;
    match r {
        // Connecting needs no answer: then the first decision must time out.
        Ok(l) => {
            let start = Instant::now();
            let e = l.check("k").await.expect_err("no answer is an error");
            assert!(e.is_redis_unavailable(), "{e}");
            assert!(start.elapsed() < BOUND);
        }
        Err(e) => {
            assert!(e.is_redis_unavailable(), "{e}");
            assert!(start.elapsed() < BOUND);
        }
    }
}

#[tokio::test]
async fn garbage_replies_are_errors() {
    let port = fake_server(true);
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
