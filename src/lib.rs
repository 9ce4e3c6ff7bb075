// The README is the crate's front page when every feature is on (docs.rs builds so), so
// its examples, which use those features, are compiled as doc tests there. Any other
// feature set gets a short page of its own that compiles with it.
#![cfg_attr(all(feature = "redis", feature = "axum"), doc = include_str!("../README.md"))]
#![cfg_attr(
    not(all(feature = "redis", feature = "axum")),
    doc = "A lock-free, fixed-memory rate-limiter engine: GCRA token and leaky buckets, fixed
and sliding windows, an exact sliding log, one limit or one limit per key.

```
use tollgate::{Algorithm, KeyedRateLimiter, Quota, RateLimiter};

fn main() -> Result<(), tollgate::ConfigError> {
    let one = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(100)).build()?;
    assert!(one.check().is_allowed());

    let per_user = KeyedRateLimiter::<str>::builder(Algorithm::SlidingWindow, Quota::per_minute(60))
        .max_keys(10_000)
        .build()?;
    assert!(per_user.check(\"alice\").is_allowed());
    Ok(())
}
```

The full guide (which limiter to pick, keyed tables, the distributed mode, the
middleware, performance) is the README, shown here when the crate's documentation is
built with every feature (`cargo doc --all-features`, as on docs.rs)."
)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod algorithm;
mod cell;
mod clock;
mod decision;
mod error;
mod keyed;
mod limiter;
#[cfg(tollgate_loom)]
#[doc(hidden)]
pub mod loom_hooks;
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
