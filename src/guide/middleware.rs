//! # Middleware: axum, hyper, tonic
//!
//! Feature `tower` (plus `axum` to read axum's peer address, `tonic` to read tonic's,
//! `grpc` for google.rpc error details, `metrics` for counters through the `metrics`
//! facade): one `RateLimitLayer`, any number of policies.
//!
//! ```toml
//! [dependencies]
//! tollgate = { path = "../tollgate", features = ["axum"] }   # or git = "...": see the README
//! axum = "0.8"
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
//!
//! ```rust,no_run
//! use std::net::{IpAddr, SocketAddr};
//! use axum::routing::get;
//! use tollgate::http::{ClientIp, Policy, RateLimitLayer};
//! use tollgate::{Algorithm, KeyedRateLimiter, Quota};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let per_ip = KeyedRateLimiter::<IpAddr>::builder(Algorithm::FixedWindow, Quota::per_minute(3)).build()?;
//!     let trusted = ClientIp::trusted_proxies(["10.0.0.0/8", "127.0.0.1/32"])?;
//!     let layer = RateLimitLayer::new(Policy::new("ip", per_ip, trusted));
//!     let app = axum::Router::new().route("/", get(|| async { "hello" })).layer(layer);
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//!     axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//!     Ok(())
//! }
//! ```
//!
//! - **No key, no pass**: a request a policy cannot key (no peer address, no API-key header,
//!   an `unknown` forwarded address) is refused by default (`MissingKey::Fail`):
//!   `500 Internal Server Error` with a problem+json `detail` naming the policy and the cause
//!   (gRPC: `grpc-status: 13`, INTERNAL, with that message), and the first such request of
//!   each policy is reported on standard error, once. Served with plain
//!   `axum::serve(listener, app)` instead of `into_make_service_with_connect_info::<SocketAddr>()`,
//!   the example above has no peer address, and every request gets that 500 with the fix in
//!   its body — a limiter that let unkeyed requests through would switch itself off without
//!   a word. `.on_missing_key(MissingKey::Skip)` lets them through by choice (where some
//!   requests legitimately have no key); `MissingKey::Reject(status)` answers another status
//!   (401 for a missing API key, say). `Policy::missing_keys()` and
//!   `tollgate_missing_keys_total` count them all.
//! - **Responses**: a denied HTTP request gets `429`, `Retry-After` in whole seconds rounded
//!   up (never 0 for a sub-second wait), `RateLimit-Policy: "ip";q=3;w=60` and
//!   `RateLimit: "ip";r=0;t=41` (draft-ietf-httpapi-ratelimit-headers-11, structured-field
//!   Lists; `q` is the quota's limit, not the burst) and an RFC 9457 `application/problem+json`
//!   body with the `quota-exceeded` type and `violated-policies`. Admitted responses carry the
//!   two RateLimit fields too (`headers_on_allowed(false)` turns them off); `legacy_headers(true)`
//!   adds `X-RateLimit-Limit/Remaining/Reset` (Reset is a delay in seconds). A gRPC request
//!   (`application/grpc*`) is answered HTTP 200 with `grpc-status: 8` (RESOURCE_EXHAUSTED) and,
//!   with the `grpc` feature, RetryInfo and QuotaFailure in `grpc-status-details-bin` — never a
//!   429, which gRPC clients read as UNAVAILABLE.
//! - **Client IP**: `ClientIp::peer()` keys by the connection's peer. `ClientIp::trusted_proxies(cidrs)`
//!   believes forwarding headers only from those proxies and takes the rightmost address that is
//!   not a trusted proxy, over all `X-Forwarded-For` lines joined in order (or RFC 7239
//!   `Forwarded` with `.use_forwarded()`): a client cannot choose its own key by sending the
//!   header, adding an entry on the left, or sending a line of its own. IPv4-mapped IPv6 is
//!   IPv4; IPv6 clients are keyed by their /64 (`ipv6_prefix(n)`). `unknown` or obfuscated
//!   addresses give no key (never the address further left).
//! - **Policies**: `Policy::new(name, limiter, key)` with any limiter — `RateLimiter` (key
//!   `Global`), `KeyedRateLimiter<K>`, `RedisRateLimiter`, `HybridRateLimiter`, by value or
//!   `Arc` — and a key: `ClientIp`, `HeaderKey` (API key), `MethodRoute`, `Global`, or any
//!   `Fn(&Parts) -> Option<K>`. `.cost(..)` / `.cost_from_content_length(..)` for byte quotas,
//!   `.shadow()` to decide and count without enforcing (no `RateLimit*` field names a shadow
//!   policy, so that no client backs off from a limit nobody enforces;
//!   `.shadow_headers(true)` names it), `.on_missing_key(..)` (see above: refused by
//!   default). The policies of one layer are all or nothing: a request one of them denies
//!   consumes nothing from the others. Stacked layers are not: a request an inner layer
//!   denies has been counted by the layers outside it, so put limits that must hold
//!   together in one layer. A backend error (Redis down, no fallback) answers 503
//!   (`on_backend_error`).
//! - **Peer address**: axum's `ConnectInfo<SocketAddr>` (feature `axum`, with
//!   `into_make_service_with_connect_info::<SocketAddr>()`), tonic's `TcpConnectInfo`
//!   (feature `tonic`: a tonic server records it for plain TCP connections, not behind its
//!   TLS or a custom incoming stream), or `PeerAddr` inserted by the server per connection
//!   (see `tollgate::http::PeerAddr`). Without one, a `ClientIp` policy refuses every
//!   request (above).
//! - **Metrics** (feature `metrics`): `tollgate_decisions_total{policy, outcome}`,
//!   `tollgate_backend_errors_total{policy}`, `tollgate_missing_keys_total{policy}`; never a
//!   per-key label.
//!
//! For a tonic server, the gRPC example's dependencies (a health service and a client that
//! reads RetryInfo):
//!
//! ```toml
//! [dependencies]
//! tollgate = { path = "../tollgate", features = ["grpc", "tonic"] }   # or git = "...": see the README
//! tonic = "0.14"
//! tonic-health = "0.14"
//! tonic-types = "0.14"
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
//!
//! Examples: `cargo run --example axum --features axum` (per-IP behind a proxy, per-API-key,
//! global, byte quota; prints curl lines) and `cargo run --example grpc --features grpc`.
//! Each uses only the crates of its dependency block above (a test in `tests/http` checks
//! that every path they name starts with one of those crates).
//!
//! ## Token budgets: charge the real cost after the response
//!
//! When what a request costs is known only once it is done (the tokens an LLM generated,
//! the bytes a download streamed), make the policy a budget, `Policy::budget(name, limiter,
//! key)`, and record the cost in the request's `tollgate::http::Budget`: the layer then does
//! the peek before and the `charge` after ([token budgets](super::budgets)) for you.
//!
//! ```toml
//! [dependencies]
//! tollgate = { path = "../tollgate", features = ["axum"] }   # or git = "...": see the README
//! axum = "0.8"
//! http-body = "1"   # for the example's streamed body
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "time"] }
//! ```
//!
//! ```rust,no_run
//! use axum::routing::post;
//! use tollgate::http::{Budget, HeaderKey, Policy, RateLimitLayer};
//! use tollgate::{Algorithm, KeyedRateLimiter, Quota};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // 10,000 tokens a minute per API key, refilled smoothly.
//!     let tokens = KeyedRateLimiter::<String>::builder(Algorithm::TokenBucket, Quota::per_minute(10_000)).build()?;
//!     let layer = RateLimitLayer::new(Policy::budget("tokens", tokens, HeaderKey::new("x-api-key")?));
//!     let app = axum::Router::new()
//!         .route("/complete", post(|budget: Budget, prompt: String| async move {
//!             let answer = format!("echo: {prompt}"); // the model's answer
//!             budget.charge(answer.split_whitespace().count() as u32); // its tokens
//!             answer
//!         }))
//!         .layer(layer);
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//!     axum::serve(listener, app).await?;
//!     Ok(())
//! }
//! ```
//!
//! - **Check before, charge after.** A request is admitted while its key has anything left
//!   (at least the policy's `.cost(..)`, 1 by default: say a request's `max_tokens`), by a
//!   peek that takes nothing, so no request is counted twice. The handler records the real
//!   cost with `budget.charge(n)` (adds; call it per streamed chunk) or `budget.set_cost(n)`
//!   (replaces); clones of the handle share the count. The layer charges the total when the
//!   response body ends (before its last frame goes out), or when the body is dropped early
//!   (a client that disconnects mid-stream is charged what was recorded until then), or when
//!   the handler fails, exactly once. `budget.remaining()` is what the key had left at
//!   admission, to bound the work.
//! - **Debt.** A charge is never denied: past the quota the key owes the excess (at most one
//!   burst; `Policy::budget_owing(.., max_owed)` sets another bound) and its next requests
//!   get `429` with `Retry-After` and `RateLimit` saying when the debt is paid off. The
//!   `RateLimit` fields of an admitted response report the state at admission (`r` is what
//!   was left before the request); the charge shows in the key's next response.
//! - **With other policies.** Budget policies are asked first, so a request one refuses
//!   takes nothing from the others; request-count policies in the same layer work as before.
//!   Several budget policies (tokens per minute and per day) and stacked layers share the
//!   one handle and are charged the same total. Concurrent requests of one key are all
//!   admitted while it has something left: their charges together may put it in debt.
//! - **Backends.** `RateLimiter`, `KeyedRateLimiter`, both Redis limiters (feature `redis`,
//!   key `String`), or any `BudgetBackend`. On `RedisRateLimiter` (exact mode) the admission
//!   is `peek_n`, the decision script's peek mode (one round trip, nothing written), and the
//!   charge at the body's end is a `charge_owing` spawned on the tokio runtime (the layer
//!   cannot wait there): it lands one round trip later, so a request the key sends in that
//!   moment is judged without it. A charge that nothing counted (Redis failed, a
//!   `Fallback::Allow`/`Deny` answered, no runtime) is counted in
//!   `RedisStats::background_errors`, never lost silently. On `HybridRateLimiter` both are
//!   local and immediate (`peek_n`, `charge_owing`), within the hybrid mode's bound.
//!
//! `cargo run --example llm_budget --features axum` streams an answer of `?tokens=N` tokens
//! per `x-api-key`, recording each as it goes, with curl lines for the budget, the debt and
//! a client that disconnects mid-stream (`tests/http/budget.rs` runs it on a real server).
