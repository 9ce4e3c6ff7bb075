//! A real tonic server behind the layer and a real tonic client: a denied call gets
//! RESOURCE_EXHAUSTED with RetryInfo and QuotaFailure, never an HTTP 429 (which gRPC
//! clients read as UNAVAILABLE).

use std::time::Duration;

use tollgate::http::{Global, Policy, RateLimitLayer};
use tollgate::{Algorithm, Quota, RateLimiter};
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;
use tonic::Code;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::ServingStatus;
use tonic_types::StatusExt;

async fn health_server(layer: RateLimitLayer) -> std::net::SocketAddr {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = incoming.local_addr().unwrap();
    tokio::spawn(async move {
        // The reporter must outlive the server for the status to stay set.
        let _reporter = reporter;
        Server::builder()
            .layer(layer)
            .add_service(health)
            .serve_with_incoming(incoming)
            .await
            .unwrap();
    });
    addr
}

#[tokio::test]
async fn denied_call_is_resource_exhausted_with_retry_info() {
    let one = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(1))
        .build()
        .unwrap();
    let addr = health_server(RateLimitLayer::new(Policy::new("calls", one, Global))).await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = HealthClient::new(channel);
    let ok = client.check(HealthCheckRequest::default()).await.unwrap();
    assert_eq!(ok.get_ref().status, ServingStatus::Serving as i32);
    let rl = ok.metadata().get("ratelimit").unwrap().to_str().unwrap();
    assert_eq!(crate::support::parse_list(rl)[0].param("r"), 0);

    let status = client
        .check(HealthCheckRequest::default())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("calls"), "{}", status.message());
    let retry = status.get_details_retry_info().expect("RetryInfo detail");
    let delay = retry.retry_delay.expect("a delay");
    assert!(
        delay >= Duration::from_secs(1) && delay <= Duration::from_secs(60),
        "{delay:?}"
    );
    assert_eq!(delay.subsec_nanos(), 0, "whole seconds");
    let quota = status
        .get_details_quota_failure()
        .expect("QuotaFailure detail");
    assert_eq!(quota.violations.len(), 1);
    assert_eq!(quota.violations[0].subject, "calls");
}

#[tokio::test]
async fn grpc_denial_is_http_200_never_429() {
    use crate::support::send;
    let one = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(1))
        .build()
        .unwrap();
    let addr = crate::support::serve(RateLimitLayer::new(Policy::new("calls", one, Global))).await;
    let grpc = [("content-type", "application/grpc+proto")];
    let _ = send(addr, "POST", "/upload", &grpc, "").await;
    let r = send(addr, "POST", "/upload", &grpc, "").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("grpc-status"), Some("8"));
    assert_eq!(r.header("content-type"), Some("application/grpc"));
    assert!(r.header("grpc-status-details-bin").is_some());
    assert!(r.header("retry-after").is_none());
}

/// Per-client limits behind tonic with no glue: `ClientIp::peer()` reads the peer tonic
/// records for every call (`TcpConnectInfo`, feature `tonic`), so the second call from
/// this client is denied. Without the peer both calls would fail with INTERNAL (a
/// missing key fails closed by default; see missing_key.rs).
#[tokio::test]
async fn per_client_limits_read_tonics_peer_address() {
    use std::net::IpAddr;
    use tollgate::http::ClientIp;
    use tollgate::KeyedRateLimiter;

    let per_ip = KeyedRateLimiter::<IpAddr>::builder(Algorithm::FixedWindow, Quota::per_minute(1))
        .build()
        .unwrap();
    let policy = Policy::new("ip", per_ip, ClientIp::peer());
    let addr = health_server(RateLimitLayer::new(policy.clone())).await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = HealthClient::new(channel);
    let ok = client.check(HealthCheckRequest::default()).await;
    assert!(ok.is_ok(), "{ok:?}");
    let denied = client
        .check(HealthCheckRequest::default())
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::ResourceExhausted);
    assert_eq!(policy.missing_keys(), 0, "the peer was not found");
}
