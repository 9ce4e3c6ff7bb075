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
//! ([`RateLimitLayer::headers_on_allowed`]); a shadow policy ([`Policy::shadow`]) is in
//! them only when it asks ([`Policy::shadow_headers`]). The policies of one layer are
//! all-or-nothing: a request one of them denies consumes nothing from the others.
//! Stacked layers are not: a request an inner layer denies has been counted by the
//! layers outside it, so limits that must hold together belong in one layer.
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
//! # Token budgets
//!
//! A cost known only once the response is done (LLM tokens, streamed bytes) takes a
//! budget policy ([`Policy::budget`]): the layer admits a request while its key has
//! anything left, by a peek that takes nothing, and inserts a [`Budget`] into the
//! request's extensions; the handler records the real cost in it (as often as it likes,
//! while streaming); the layer charges the total when the response body ends, or when it
//! is dropped early (a client that went away is charged what was recorded until then),
//! exactly once. A charge past the quota puts the key in debt, and its next requests are
//! refused with a `Retry-After` that says when the debt is paid. The protocol is on
//! [`Budget`]; `examples/llm_budget.rs` limits tokens per API key.
//!
//! ```
//! # #[cfg(feature = "axum")]
//! # fn app() -> Result<axum::Router, Box<dyn std::error::Error>> {
//! use axum::routing::post;
//! use tollgate::http::{Budget, HeaderKey, Policy, RateLimitLayer};
//! use tollgate::{Algorithm, KeyedRateLimiter, Quota};
//!
//! let tokens = KeyedRateLimiter::<String>::builder(Algorithm::TokenBucket, Quota::per_minute(10_000)).build()?;
//! let layer = RateLimitLayer::new(Policy::budget("tokens", tokens, HeaderKey::new("x-api-key")?));
//! Ok(axum::Router::new()
//!     .route("/complete", post(|budget: Budget, prompt: String| async move {
//!         let answer = format!("echo: {prompt}");
//!         budget.charge(answer.split_whitespace().count() as u32);
//!         answer
//!     }))
//!     .layer(layer))
//! # }
//! ```
//!
//! A request a policy cannot key (no peer address, no API-key header) is refused by
//! default ([`MissingKey::Fail`]): `500 Internal Server Error` (gRPC: INTERNAL) with a
//! message naming the policy and the cause, such as an axum app served without
//! `into_make_service_with_connect_info`, and reported once per policy on standard
//! error. [`MissingKey::Skip`] lets such requests through, by choice.

mod backend;
mod body;
mod budget;
mod budget_backend;
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
pub use budget::Budget;
pub use budget_backend::BudgetBackend;
pub use client_ip::{CidrError, ClientIp, PeerAddr};
pub use key::{Global, HeaderKey, KeyExtractor, MethodRoute};
pub use layer::{OnBackendError, RateLimit, RateLimitLayer, ResponseFuture};
pub use policy::{MissingKey, Policy};
