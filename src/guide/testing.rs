//! # Testing with `ManualClock`, and the other clocks
//!
//! A test that sleeps to see a limiter refill is slow and flaky. Build the limiter on a
//! `ManualClock` instead: it starts at zero, moves only when told to (`advance`, `set`), and
//! its clones share one time, so the test holds one clone and the limiter the other. Keep it
//! out of production code: a limiter on a `ManualClock` nobody advances never refills.
//!
//! ```rust
//! use std::time::Duration;
//! use tollgate::{Algorithm, ManualClock, Quota, RateLimiter};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let clock = ManualClock::new();
//!     let limiter = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(100).with_burst(20))
//!         .clock(clock.clone())
//!         .build()?;
//!
//!     for _ in 0..20 {
//!         assert!(limiter.check().is_allowed());
//!     }
//!     let denied = limiter.check();
//!     assert!(!denied.is_allowed());
//!     assert_eq!(denied.retry_after(), Some(Duration::from_millis(10))); // one token per 10 ms, exactly
//!
//!     clock.advance(Duration::from_millis(10));
//!     assert!(limiter.check().is_allowed());
//!     Ok(())
//! }
//! ```
//!
//! `KeyedRateLimiter`'s builder takes `.clock(..)` the same way. Any type implementing the
//! `Clock` trait (nanoseconds since its own zero) can drive a limiter too: a simulation's
//! time, or a clock your program already keeps.
//!
//! ## The other clocks
//!
//! - `QuantaClock` (the default): monotonic, exact, its zero when it was made.
//! - `SystemClock`: wall time since the Unix epoch, never decreasing within a process. Use it
//!   for a caller-side clock that processes share (the Redis limiters' `.clock(..)`), where
//!   `QuantaClock`'s per-process zero would not agree, and for fixed windows on whole UTC
//!   minutes ([choosing](super::choosing)).
//! - `CoarseClock::new(granularity)`, opt-in: reads a timestamp that one background thread
//!   per process refreshes every `granularity` (quanta's upkeep thread), so a reading is one
//!   atomic load instead of a time-stamp-counter read and its scaling. Its readings lag the
//!   true time by up to one granularity (more while that thread waits for a core) and never
//!   lead it, so a limiter on it never admits more than the quota over the true time; it may
//!   admit less, and report waits up to a granularity longer. Keep the granularity well below
//!   the quota's emission interval (`period / limit`).
