//! Tower middleware for axum, hyper and tonic (feature `tower`).
//!
//! One [`RateLimitLayer`] holds one or more [`Policy`]s: a named limiter, a
//! [`KeyExtractor`] (client IP behind trusted proxies, API key, route, a closure) and a
//! cost. It decides in `call` (never in `poll_ready`), and a denial is a response:
//!
//! - HTTP: `429 Too Many Requests`, `Retry-After` in whole seconds rounded up (never 0),
//!   `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers-11) and an
//!   RFC 9457 `application/problem+json` body;
//! - gRPC (`application/grpc*` requests): HTTP 200 with `grpc-status: 8`
//!   (RESOURCE_EXHAUSTED), and with the `grpc` feature RetryInfo and QuotaFailure details.
//!
//! Allowed responses carry `RateLimit-Policy` and `RateLimit` too
//! ([`RateLimitLayer::headers_on_allowed`]). Several policies are all-or-nothing: a request
//! denied by one consumes nothing from the others.
//!
//! # Example
//!
//! ```no_run
//! # #[cfg(feature = "axum")]
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::net::{IpAddr, SocketAddr};
//! use axum::routing::get;
//! use tollgate::http::{ClientIp, Policy, RateLimitLayer};
//! use tollgate::{Algorithm, KeyedRateLimiter, Quota};
//!
//! let per_ip = KeyedRateLimiter::<IpAddr>::builder(Algorithm::FixedWindow, Quota::per_minute(3)).build()?;
//! let trusted = ClientIp::trusted_proxies(["10.0.0.0/8", "127.0.0.1/32"])?;
//! let layer = RateLimitLayer::new(Policy::new("ip", per_ip, trusted));
//! let app = axum::Router::new().route("/", get(|| async { "hello" })).layer(layer);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok(())
//! # }
//! ```
//!
//! The peer address comes from the request's extensions: axum's
//! `ConnectInfo<SocketAddr>` (feature `axum`, with `into_make_service_with_connect_info`),
//! tonic's `TcpConnectInfo` (feature `tonic`: a tonic server records it for plain TCP
//! connections, not behind its TLS or a custom incoming stream), or [`PeerAddr`], which a
//! plain hyper server inserts itself (see its documentation).
//!
//! A request a policy cannot key (no peer address, no API-key header) is refused by
//! default ([`MissingKey::Fail`]): `500 Internal Server Error` (gRPC: INTERNAL) with a
//! message naming the policy and the cause, such as an axum app served without
//! `into_make_service_with_connect_info`, and reported once per policy on standard
//! error. [`MissingKey::Skip`] lets such requests through, by choice.

mod backend;
mod body;
mod client_ip;
mod decide;
#[cfg(feature = "grpc")]
mod grpc;
mod key;
mod layer;
mod policy;
mod response;

pub use backend::{Acquire, Backend, BackendError, Undo};
pub use body::ResponseBody;
pub use client_ip::{CidrError, ClientIp, PeerAddr};
pub use key::{Global, HeaderKey, KeyExtractor, MethodRoute};
pub use layer::{OnBackendError, RateLimit, RateLimitLayer, ResponseFuture};
pub use policy::{MissingKey, Policy};
