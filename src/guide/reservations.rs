//! # Reservations and waiting
//!
//! A reservation books capacity now for a request that proceeds later, so waiters are served
//! in the order they asked and nobody polls. `reserve(n, max_wait)` returns a `Reservation`
//! whose `wait_time()` says how long to hold the request (zero when it may go at once).
//!
//! - The buckets book by GCRA virtual scheduling in one compare-and-swap: first in, first out,
//!   with no queue and no memory per waiter.
//! - The fixed window books into the earliest window where the request fits, and gives up the
//!   rest of the current one, so nothing overtakes it.
//! - The sliding window books the earliest time its weighted count admits the request.
//! - The sliding log books the time its `n`-th oldest entry leaves the window.
//!
//! While a booking is pending, `check` denies what would overtake it. The sliding window is
//! the exception: its state keeps counts, not the booked time, so within the booking's window
//! a request that fits the counts (after a `set_quota` raised the limit, or a cancel freed
//! room) is admitted, possibly before an earlier booking's time, which that booking keeps.
//!
//! A wait longer than `max_wait`, or than `Reservation::MAX_WAIT` (about 36 years), books
//! nothing: `ReserveError::TooLong` reports the bound as its `max_wait`. A cost that can never
//! fit is `ReserveError::InsufficientCapacity`.
//!
//! ```rust
//! use std::time::Duration;
//! use tollgate::{Algorithm, ManualClock, Quota, RateLimiter, ReserveError};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let clock = ManualClock::new();
//!     let limiter = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(10).with_burst(1))
//!         .clock(clock.clone())
//!         .build()?;
//!     let now = limiter.reserve(1, Duration::ZERO)?;
//!     assert_eq!(now.wait_time(), Duration::ZERO);
//!     let later = limiter.reserve(1, Duration::from_secs(1))?;
//!     assert_eq!(later.wait_time(), Duration::from_millis(100)); // hold the request this long
//!     assert!(!limiter.check().is_allowed()); // a check never overtakes a booking
//!     later.cancel(); // not due yet: its slot is given back
//!     // A wait beyond the bound, or a cost that can never fit, books nothing.
//!     assert!(matches!(limiter.reserve(1, Duration::ZERO), Err(ReserveError::TooLong { .. })));
//!     assert!(matches!(limiter.reserve(2, Duration::MAX), Err(ReserveError::InsufficientCapacity(_))));
//!     Ok(())
//! }
//! ```
//!
//! ## Cancelling
//!
//! `cancel()` gives back what no later booking depends on, by Go x/time/rate's `CancelAt`
//! rule. Dropping a reservation keeps it. In short:
//!
//! - nothing once the reservation is due;
//! - the token bucket: its tokens less how far later bookings reach past its own time
//!   (cancels out of order give back more than x/time/rate, never more than was booked);
//! - the leaky bucket, the windows and the log: everything while nothing later was booked
//!   behind it, else nothing; bookings cancelled last first give everything back;
//! - nothing to a state the booking was not made on: after `reset`/`remove`, a reclaim or an
//!   eviction of the key, or a conversion of a bucket to another rate (`set_quota`, a request
//!   of another tier), even once converted back.
//!
//! Each of these is a rule of [the promises](super::promises) ("Cancels and roll-backs"),
//! exceptions included, with its test.
//!
//! ## Waiting
//!
//! `until_ready`, `until_n_ready` and `until_n_ready_with_jitter` (feature `tokio`: without
//! it these methods do not exist, and the compiler only says so) book first and then sleep
//! exactly the booked wait: waiters are served in arrival order (a test holds 16 waiters on
//! one key to their booked times, in order), and a future dropped before its turn cancels its
//! booking. `wait_blocking(n, jitter)` does the same on a thread.
