//! A request the policy cannot key fails closed by default (issue 20, item 11): a server
//! started without the peer address must not switch the limiter off silently. A real axum
//! server served with plain `axum::serve(listener, app)` (no `ConnectInfo`), a real tonic
//! server whose connections record no `TcpConnectInfo`, and real clients.

use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tollgate::http::{ClientIp, Global, HeaderKey, MissingKey, Policy, RateLimitLayer};
use tollgate::{Algorithm, KeyedRateLimiter, Quota, RateLimiter};
use tonic::codegen::tokio_stream::StreamExt;
use tonic::transport::server::{Connected, TcpIncoming};
use tonic::transport::{Channel, Server};
use tonic::Code;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::ServingStatus;

use crate::support::{get_with, send, serve_without_connect_info};

/// The README's middleware example: 3 a minute per client IP, 127.0.0.1 a trusted proxy.
fn readme_policy() -> (Arc<KeyedRateLimiter<IpAddr>>, Policy) {
    let per_ip = Arc::new(
        KeyedRateLimiter::<IpAddr>::builder(Algorithm::FixedWindow, Quota::per_minute(3))
            .build()
            .unwrap(),
    );
    let trusted = ClientIp::trusted_proxies(["10.0.0.0/8", "127.0.0.1/32"]).unwrap();
    (Arc::clone(&per_ip), Policy::new("ip", per_ip, trusted))
}

fn untouched(limiter: &KeyedRateLimiter<IpAddr>) {
    let stats = limiter.stats();
    assert_eq!(
        (stats.allowed, stats.rejected, limiter.len()),
        (0, 0, 0),
        "the limiter was consulted"
    );
}

#[tokio::test]
async fn no_peer_address_is_a_500_that_says_why_on_every_request() {
    let (limiter, policy) = readme_policy();
    let addr = serve_without_connect_info(RateLimitLayer::new(policy.clone())).await;
    // The user's experiment of issue 20: 6 requests against 3 a minute.
    for _ in 0..6 {
        let r = get_with(addr, &[]).await;
        assert_eq!(r.status, 500, "{}", r.body);
        assert_eq!(r.header("content-type"), Some("application/problem+json"));
        assert!(r.body.contains(r#""status":500"#), "{}", r.body);
        for words in [
            r#"rate limit \"ip\""#,
            "no peer address",
            "into_make_service_with_connect_info::<SocketAddr>()",
            "MissingKey::Skip",
        ] {
            assert!(r.body.contains(words), "{words:?} not in {}", r.body);
        }
        assert!(r.header("ratelimit").is_none() && r.header("retry-after").is_none());
    }
    assert_eq!(policy.missing_keys(), 6);
    untouched(&limiter);
}

#[tokio::test]
async fn skip_lets_unkeyed_requests_through_when_asked() {
    let (limiter, policy) = readme_policy();
    let skip = policy.on_missing_key(MissingKey::Skip);
    let addr = serve_without_connect_info(RateLimitLayer::new(skip.clone())).await;
    for _ in 0..6 {
        let r = get_with(addr, &[]).await;
        assert_eq!((r.status, r.body.as_str()), (200, "ok"));
        assert!(r.header("ratelimit").is_none());
    }
    assert_eq!(skip.missing_keys(), 6);
    untouched(&limiter);
}

#[tokio::test]
async fn grpc_request_without_peer_is_internal_never_an_http_error() {
    let (limiter, policy) = readme_policy();
    let addr = serve_without_connect_info(RateLimitLayer::new(policy)).await;
    let r = send(
        addr,
        "POST",
        "/upload",
        &[("content-type", "application/grpc")],
        "",
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("grpc-status"), Some("13"), "INTERNAL");
    let message = r.header("grpc-message").unwrap();
    assert!(
        message.contains("no peer address")
            && message.contains("into_make_service_with_connect_info"),
        "{message}"
    );
    assert!(r.header("grpc-status-details-bin").is_none());
    untouched(&limiter);
}

#[tokio::test]
async fn missing_header_key_names_the_header_and_takes_nothing_from_other_policies() {
    let global = Arc::new(
        RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(3))
            .build()
            .unwrap(),
    );
    let per_key = KeyedRateLimiter::<String>::builder(Algorithm::FixedWindow, Quota::per_minute(3))
        .build()
        .unwrap();
    let layer = RateLimitLayer::new(Policy::new("global", Arc::clone(&global), Global)).policy(
        Policy::new("api-key", per_key, HeaderKey::new("x-api-key").unwrap()),
    );
    let addr = serve_without_connect_info(layer).await;
    for _ in 0..4 {
        let r = get_with(addr, &[]).await;
        assert_eq!(r.status, 500);
        assert!(
            r.body.contains(r#"rate limit \"api-key\""#) && r.body.contains("no x-api-key header"),
            "{}",
            r.body
        );
    }
    let r = get_with(addr, &[("x-api-key", "a"), ("x-api-key", "b")]).await;
    assert!(r.body.contains("2 x-api-key headers"), "{}", r.body);
    // A peek answers for one more request: 2 left after it means none was taken.
    assert_eq!(global.peek().remaining(), 2, "the global budget was taken");
    assert_eq!(get_with(addr, &[("x-api-key", "k")]).await.status, 200);
    assert_eq!(global.peek().remaining(), 1);
}

/// A TCP connection that records no `TcpConnectInfo`: what a tonic server gets from a
/// custom incoming stream (a TLS acceptor or proxy-protocol reader of one's own).
struct NoConnectInfo(tokio::net::TcpStream);

impl Connected for NoConnectInfo {
    type ConnectInfo = ();

    fn connect_info(&self) {}
}

impl AsyncRead for NoConnectInfo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for NoConnectInfo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// A tonic health service behind `layer` on 127.0.0.1, its connections without
/// `TcpConnectInfo`; a client connected to it.
async fn tonic_without_peer(layer: RateLimitLayer) -> HealthClient<Channel> {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = incoming.local_addr().unwrap();
    let incoming = incoming.map(|conn| conn.map(NoConnectInfo));
    tokio::spawn(async move {
        let _reporter = reporter;
        Server::builder()
            .layer(layer)
            .add_service(health)
            .serve_with_incoming(incoming)
            .await
            .unwrap();
    });
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    HealthClient::new(channel)
}

#[tokio::test]
async fn tonic_call_without_peer_is_internal_with_the_reason() {
    let (limiter, policy) = readme_policy();
    let mut client = tonic_without_peer(RateLimitLayer::new(policy.clone())).await;
    for _ in 0..2 {
        let status = client
            .check(HealthCheckRequest::default())
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Internal, "{status:?}");
        let message = status.message();
        assert!(
            message.contains("no peer address") && message.contains("TcpConnectInfo"),
            "{message}"
        );
    }
    assert_eq!(policy.missing_keys(), 2);
    untouched(&limiter);
}

#[tokio::test]
async fn tonic_call_without_peer_passes_with_skip() {
    let (limiter, policy) = readme_policy();
    let skip = policy.on_missing_key(MissingKey::Skip);
    let mut client = tonic_without_peer(RateLimitLayer::new(skip.clone())).await;
    for _ in 0..4 {
        let ok = client.check(HealthCheckRequest::default()).await;
        assert!(ok.is_ok(), "{ok:?}");
    }
    assert_eq!(skip.missing_keys(), 4);
    untouched(&limiter);
}
