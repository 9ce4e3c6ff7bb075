//! # Several limits at once: `check_all`
//!
//! Per user and global, per second and per day: `check_all` admits a request only if every
//! limit admits it, and then takes it from each. A denial takes nothing from any, names every
//! limit that denied and reports the longest wait. `check_all_costs` does the same with a cost
//! per limit (requests and bytes).
//!
//! ```rust
//! use tollgate::{check_all, Algorithm, KeyedRateLimiter, Limit, Quota, RateLimiter};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let per_user = KeyedRateLimiter::<str>::builder(Algorithm::TokenBucket, Quota::per_second(5)).build()?;
//!     let global = RateLimiter::builder(Algorithm::SlidingWindow, Quota::per_minute(1_000)).build()?;
//!     let d = check_all(&[&per_user.limit("alice") as &dyn Limit, &global], 1)?;
//!     assert!(d.is_allowed());
//!     assert_eq!(d.decisions().len(), 2); // one Decision per limit, for the headers
//!     Ok(())
//! }
//! ```
//!
//! `check_all` books each limit with its own compare-and-swap and rolls back on a denial, so it
//! stays lock-free; a concurrent check may see a limit briefly fuller, never emptier. The
//! roll-back gives back exactly what the booking took, whatever other requests were admitted
//! in between (theirs stay counted); for a bucket, the part of the booking's debt still
//! outstanding, which is all of it when the roll-back follows at once.
//!
//! Leaky buckets are booked after every other limit (the decisions still come in the order
//! given), so a denial by any other kind of limit never touches them. When one leaky bucket is
//! rolled back because another leaky bucket of the same check denied, it gets its slot back
//! whole, even when other requests were scheduled behind it meanwhile: they keep their release
//! times, so two releases may then come closer together than `T`, by at most the slot given
//! back, once per such roll-back (never more admitted than the token bucket admits).
//!
//! A bucket whose state a `set_quota` (or a request of another tier) converted to another rate
//! between the booking and the roll-back gives nothing back: the booking was converted with
//! the rest. The rules and their tests: [the promises](super::promises) ("Several limits").
