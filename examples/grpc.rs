//! A tonic gRPC server behind the rate-limit layer, and a client calling it until it is
//! denied: the denial is `RESOURCE_EXHAUSTED` with a google.rpc RetryInfo telling the
//! client how long to wait, and a QuotaFailure naming the policy.
//!
//! ```text
//! cargo run --example grpc --features grpc
//! ```

use tollgate::http::{Global, Policy, RateLimitLayer};
use tollgate::{Algorithm, Quota, RateLimiter};
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::ServingStatus;
use tonic_types::StatusExt;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let calls = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_minute(3)).build()?;
    let layer = RateLimitLayer::new(Policy::new("calls", calls, Global));

    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse()?)?;
    let addr = incoming.local_addr()?;
    tokio::spawn(
        Server::builder()
            .layer(layer)
            .add_service(health)
            .serve_with_incoming(incoming),
    );
    println!("gRPC health service on {addr}, 3 calls a minute");

    let channel = Channel::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    let mut client = HealthClient::new(channel);
    for i in 1..=4 {
        match client.check(HealthCheckRequest::default()).await {
            Ok(reply) => {
                let rl = reply
                    .metadata()
                    .get("ratelimit")
                    .and_then(|v| v.to_str().ok());
                println!(
                    "call {i}: {:?}, RateLimit: {}",
                    reply.get_ref().status(),
                    rl.unwrap_or("-")
                );
            }
            Err(status) => {
                let wait = status.get_details_retry_info().and_then(|r| r.retry_delay);
                println!(
                    "call {i}: {:?}: {} (retry after {wait:?})",
                    status.code(),
                    status.message()
                );
            }
        }
    }
    drop(reporter);
    Ok(())
}
