// The README is the crate's front page when every feature is on (docs.rs builds so), so
// its examples, which use those features, are compiled as doc tests there. Any other
// feature set gets a landing page of its own (which type to pick, an example, the feature
// table) that compiles with it; keep its feature table in step with the README's.
#![cfg_attr(all(feature = "redis", feature = "axum"), doc = include_str!("../README.md"))]
#![cfg_attr(
    not(all(feature = "redis", feature = "axum")),
    doc = r#"A lock-free, fixed-memory rate-limiter engine: GCRA token and leaky buckets, fixed
and sliding windows, an exact sliding log; one limit, or one limit per key in a table whose
memory is fixed when it is built.

```
# fn main() -> Result<(), tollgate::ConfigError> {
use tollgate::{Algorithm, Quota, RateLimiter};
let limiter = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(100)).build()?;
if limiter.check().is_allowed() { /* serve the request */ }
# Ok(())
# }
```

# Which type to pick

| you have | use |
|---|---|
| one thing to limit (an outgoing API, a worker, a whole process) | [`RateLimiter`] |
| one limit per user, API key, IP address or route, in one process | [`KeyedRateLimiter`] (memory fixed at build; [`OnFull`] says what a full table does) |
| plans: a different quota per key | [`KeyedRateLimiter`] with `.tiers([...])` and [`KeyedRateLimiter::tier`] |
| several limits that must all admit a request (per user and global) | [`check_all`] |
| a request that must wait its turn rather than be refused | [`RateLimiter::reserve`], `wait_blocking`, or `until_ready` (feature `tokio`) |
| several instances sharing one limit exactly | `redis::RedisRateLimiter` (feature `redis`) |
| several instances, high rates, a small bounded overshoot is fine | `redis::HybridRateLimiter` (feature `redis`) |
| an axum, hyper or tonic service | `http::RateLimitLayer` (feature `tower`, `axum` or `tonic`) |

Algorithms: [`Algorithm`]; the quota: [`Quota`]; every answer: [`Decision`]; time:
[`QuantaClock`] (the default, real time), [`SystemClock`] (wall time: fixed windows on
whole minutes, a clock every process agrees on), [`ManualClock`] (tests).

```
use tollgate::{Algorithm, KeyedRateLimiter, Quota};

# fn main() -> Result<(), tollgate::ConfigError> {
let per_user = KeyedRateLimiter::<str>::builder(Algorithm::SlidingWindow, Quota::per_minute(60))
    .max_keys(10_000)
    .build()?;
let d = per_user.check("alice");
if !d.is_allowed() {
    println!("429 Too Many Requests, retry in {:?}", d.retry_after());
}
# Ok(())
# }
```

# Cargo features

Nothing is on by default but the engine.

| feature | what it enables | `[dependencies]` line |
|---|---|---|
| *(none)* | [`RateLimiter`], [`KeyedRateLimiter`], all five algorithms, `peek`, reservations, `wait_blocking`, [`check_all`], tiers, `set_quota`, the clocks | `tollgate = { path = "../tollgate" }` |
| `tokio` | async waiting: `until_ready`, `until_n_ready`, `until_n_ready_with_jitter` (without this feature those methods do not exist) | `tollgate = { path = "../tollgate", features = ["tokio"] }` |
| `redis` | `tollgate::redis`: `RedisRateLimiter`, `HybridRateLimiter`, `redis::check_all` (not `until_ready`: add `tokio`) | `tollgate = { path = "../tollgate", features = ["redis"] }` |
| `tower` | `tollgate::http`: `RateLimitLayer`, `Policy`, `ClientIp`, ... | `tollgate = { path = "../tollgate", features = ["tower"] }` |
| `axum` | `tower`, plus axum's `ConnectInfo<SocketAddr>` as the peer address | `tollgate = { path = "../tollgate", features = ["axum"] }` |
| `tonic` | `tower`, plus tonic's `TcpConnectInfo` as the peer address | `tollgate = { path = "../tollgate", features = ["tonic"] }` |
| `grpc` | `tower`, plus google.rpc `RetryInfo` and `QuotaFailure` on gRPC denials | `tollgate = { path = "../tollgate", features = ["grpc"] }` |
| `metrics` | `tollgate::metrics`: the layer's counters through the `metrics` facade | `tollgate = { path = "../tollgate", features = ["metrics"] }` |

The full guide (keyed tables and their memory, the distributed mode, the middleware,
performance against governor and the others, testing) is the README, which is this page
when the documentation is built with every feature (`cargo doc --all-features`, as on
docs.rs)."#
)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// One module may hold `unsafe` code, `machine` (the inline 16-byte atomics); see there.
#![deny(unsafe_code)]

mod algorithm;
mod cell;
mod charge;
mod clock;
mod decision;
mod error;
mod keyed;
mod limiter;
#[cfg(tollgate_loom)]
#[doc(hidden)]
pub mod loom_hooks;
#[cfg(not(tollgate_loom))]
#[allow(unsafe_code)]
mod machine;
mod multi;
mod quota;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod redis;
mod reservation;
mod store;
mod sync;
mod table;
mod wait;

pub use algorithm::Algorithm;
pub use charge::Charge;
pub use clock::SystemClock;
pub use clock::{Clock, CoarseClock, CoarseClockError, ManualClock, QuantaClock};
pub use decision::Decision;
pub use error::{ConfigError, InsufficientCapacity};
pub use keyed::{KeyLimit, KeyedRateLimiter, KeyedRateLimiterBuilder, OnFull, Stats, Tier};
pub use limiter::{RateLimiter, RateLimiterBuilder};
pub use multi::{check_all, check_all_costs, Limit, MultiDecision};
pub use quota::Quota;
pub use reservation::{Reservation, ReserveError};
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod http;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
