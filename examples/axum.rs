//! An axum service with four rate limits in one layer:
//!
//! - per client IP, behind a trusted reverse proxy on 127.0.0.1 (so `X-Forwarded-For`
//!   from it is believed, and from anyone else ignored): 5 requests a minute;
//! - per API key (`x-api-key`; requests without one are refused with 401): 10 a second;
//! - global: 100 a second for the whole service;
//! - a byte quota on uploads: 1 MiB a minute per client, the request's `Content-Length`.
//!
//! Run it and try the printed curl lines:
//!
//! ```text
//! cargo run --example axum --features axum
//! ```

use std::net::{IpAddr, SocketAddr};

use axum::routing::{get, post};
use tollgate::http::{ClientIp, Global, HeaderKey, MissingKey, Policy, RateLimitLayer};
use tollgate::{Algorithm, KeyedRateLimiter, Quota, RateLimiter};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Behind a proxy on this machine: trust it, and key by the address it reports.
    let client_ip = ClientIp::trusted_proxies(["127.0.0.1/32", "::1/128"])?;

    let per_ip =
        KeyedRateLimiter::<IpAddr>::builder(Algorithm::SlidingWindow, Quota::per_minute(5))
            .max_keys(100_000)
            .build()?;
    let per_key =
        KeyedRateLimiter::<String>::builder(Algorithm::TokenBucket, Quota::per_second(10))
            .build()?;
    let global = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(100)).build()?;
    let upload_bytes =
        KeyedRateLimiter::<IpAddr>::builder(Algorithm::TokenBucket, Quota::per_minute(1 << 20))
            .build()?;

    let limits = RateLimitLayer::new(Policy::new("ip", per_ip, client_ip.clone()))
        .policy(
            Policy::new("api-key", per_key, HeaderKey::new("x-api-key")?)
                .on_missing_key(MissingKey::Reject(axum::http::StatusCode::UNAUTHORIZED)),
        )
        .policy(Policy::new("global", global, Global));
    let uploads = RateLimitLayer::new(
        // An upload without a declared length counts as 64 KiB.
        Policy::new("upload-bytes", upload_bytes, client_ip).cost_from_content_length(64 << 10),
    );

    let app = axum::Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route(
            "/upload",
            post(|body: axum::body::Bytes| async move { format!("stored {} bytes\n", body.len()) })
                .layer(uploads),
        )
        .layer(limits);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}; try:");
    println!("  curl -i http://{addr}/                                    # 401: no API key");
    println!("  for i in 1 2 3 4 5 6; do curl -si -H 'x-api-key: k1' http://{addr}/ | head -1; done   # the 6th is 429");
    println!("  curl -i -H 'x-api-key: k1' -H 'x-forwarded-for: 203.0.113.9' http://{addr}/   # another client behind the proxy");
    println!("  head -c 900000 /dev/zero | curl -si -H 'x-api-key: k1' --data-binary @- http://{addr}/upload | head -1   # twice: 429");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
