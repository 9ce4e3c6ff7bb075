//! # Choosing an algorithm and a limiter
//!
//! ## Which limiter do I want?
//!
//! | you have | use | chapter |
//! |---|---|---|
//! | one thing to limit (an outgoing API, a worker, a whole process) | `RateLimiter` | this one |
//! | one limit per user, API key, IP address or route, in one process | `KeyedRateLimiter<K>` | [keyed tables](super::keyed) |
//! | a different quota per key (plans) | `KeyedRateLimiter` with `.tiers([...])` | [quotas and tiers](super::quotas) |
//! | several limits that must all admit a request | `check_all` | [several limits](super::several_limits) |
//! | a request that must wait its turn rather than be refused | `reserve`, `wait_blocking`, `until_ready` | [reservations](super::reservations) |
//! | a cost known only after the work (tokens, bytes) | `charge` | [token budgets](super::budgets) |
//! | several instances that must share one limit exactly | `redis::RedisRateLimiter` (one Redis round trip per decision) | [Redis](super::redis) |
//! | several instances, high rates, a small bounded overshoot is fine | `redis::HybridRateLimiter` (local decisions, background sync) | [Redis](super::redis) |
//! | an axum, hyper or tonic service | `http::RateLimitLayer` over any of the above | [middleware](super::middleware) |
//!
//! ## One limiter
//!
//! ```rust
//! use std::time::Duration;
//! use tollgate::{Algorithm, Quota, RateLimiter};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // 100 requests per second, at most 20 at once, on the real (monotonic) clock.
//!     let limiter = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(100).with_burst(20)).build()?;
//!
//!     // A burst of 20 goes through at once.
//!     for _ in 0..20 {
//!         assert!(limiter.check().is_allowed());
//!     }
//!
//!     // A denial says when to come back (an HTTP service answers 429 with Retry-After).
//!     let d = limiter.check();
//!     if !d.is_allowed() {
//!         println!("denied: retry in {:?}", d.retry_after().unwrap_or_default()); // about 10 ms
//!     }
//!
//!     // Or block this thread until the request fits: booked first, so nobody overtakes it.
//!     // In async code, `limiter.until_ready().await` (feature `tokio`) does the same.
//!     limiter.wait_blocking(1, Duration::ZERO)?;
//!
//!     // A cost that can never fit is an error, not a denial.
//!     assert!(limiter.check_n(21).is_err());
//!     Ok(())
//! }
//! ```
//!
//! The default clock (`QuantaClock`) is the real one; tests that need time to stand still use
//! `ManualClock` ([testing](super::testing)). Share a `RateLimiter` by reference or `Arc`: it
//! is `Send + Sync`, and concurrent callers never get more than the quota between them
//! ([threads](super::promises)).
//!
//! Every `Decision` carries `is_allowed()`, `limit()` (the quota's limit), `burst()`,
//! `remaining()`, `reset_after()` (until the full quota is back), `retry_after()` (the exact
//! wait until the same request would fit; never too early) and `delay()` (the leaky bucket's
//! hold time).
//!
//! `peek()` (and `KeyedRateLimiter::peek(&key)`) returns the decision a request would get now
//! without consuming anything or inserting the key. Its `remaining()` is, as for every
//! decision, what would be left *after* that request: after one check on a fresh limiter of 5
//! per hour, `peek().remaining()` is 3. For what is left now, ask `peek_n(0)` (4 there):
//!
//! ```rust
//! use tollgate::{Algorithm, Quota, RateLimiter};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let limiter = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_hour(5)).build()?;
//!     assert!(limiter.check().is_allowed());
//!     assert_eq!(limiter.peek().remaining(), 3); // left after the request peek asks about
//!     assert_eq!(limiter.peek_n(0)?.remaining(), 4); // left now
//!     Ok(())
//! }
//! ```
//!
//! ## The five algorithms
//!
//! `Quota::new(limit, period)` (or `per_second` / `per_minute` / `per_hour`), with
//! `.with_burst(b)` for the buckets. `P` is the period, `T = ⌈P / limit⌉` the emission interval
//! in whole nanoseconds, rounded **up** so the limit is never exceeded (governor rounds down
//! and over-admits: 600,000,000 per second gets `T = 1 ns` there, a billion per second). The
//! price is a rate lower by less than `1 ns / T` relative: under 0.1 % for any rate below
//! 1,000,000 per second; 600,000,000 per second runs at 500,000,000.
//!
//! | algorithm | guarantee | state per key | pick it when |
//! |---|---|---|---|
//! | `TokenBucket` | GCRA: a request of cost `n` at `t` is admitted iff `max(TAT, t) + n·T − t ≤ burst·T`; at most `burst + d/T` in any span `d`. Agrees with `governor` decision for decision. | 8 bytes | the default: smooth rate with bounded bursts |
//! | `LeakyBucket` | admits exactly what `TokenBucket` admits; `Decision::delay()` says how long to hold each admitted request so releases are spaced by `T` (nginx `limit_req` with `burst`, no `nodelay`) | 8 bytes | shaping traffic to a downstream that wants an even pace |
//! | `FixedWindow` | at most `limit` per window `[k·P, (k+1)·P)`, aligned to the clock's zero | 8 bytes | quotas users read as "N per minute", billing periods; allows 2×limit across a boundary |
//! | `SlidingWindow` | weighted counter: admitted iff `prev·(P − e) + (curr + n)·P ≤ limit·P`, exact integers | 8 bytes | smooth window limits without the boundary doubling, at counter cost |
//! | `SlidingLog` | exact: at most `limit` admitted in every interval `(t − P, t]` | `8 × limit` bytes (ring) + lock | small limits that must never be exceeded in any window |
//!
//! The exact rules, each with its test, are in [the promises](super::promises) ("The
//! algorithms", "Decisions"), and what `build()` refuses (zero quotas, a burst on a window,
//! rates and spans the layouts cannot hold) under "Building".
//!
//! ## Where fixed windows start
//!
//! Windows count from the clock's zero. For the default `QuantaClock` (and `ManualClock`) that
//! is when the clock was made, in practice when the limiter was built: a `per_minute` window
//! runs from start-up, not from the minute on the wall clock, so a key that used up its minute
//! ten seconds after start-up is told to retry in about fifty seconds. tollgate-server and the
//! Redis exact mode (on Redis `TIME`) count from the Unix epoch. For windows on the wall clock
//! in the library, build on `SystemClock`, whose zero is the Unix epoch: every `per_minute`
//! window then starts on a whole UTC minute, every `per_hour` on the hour.
//!
//! ```rust
//! use std::time::{SystemTime, UNIX_EPOCH};
//! use tollgate::{Algorithm, Quota, RateLimiter, SystemClock};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let limiter = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(3))
//!         .clock(SystemClock::new())
//!         .build()?;
//!     let denied = loop {
//!         let d = limiter.check();
//!         if !d.is_allowed() {
//!             break d;
//!         }
//!     };
//!     // The window ends on the next whole minute of the wall clock.
//!     let into_minute = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() % 60_000_000_000;
//!     let retry = denied.retry_after().expect("a denial says when").as_nanos();
//!     let off = (into_minute + retry) % 60_000_000_000; // 0, but for the time between two readings
//!     assert!(off < 1_000_000_000 || off > 59_000_000_000);
//!     Ok(())
//! }
//! ```
//!
//! ## Time
//!
//! Time is `u64` nanoseconds since the clock's zero, clamped at 2^62 ns (about 146 years). A
//! clock reading older than the state (quanta's TSC stepping back across cores, a reset user
//! clock, a thread pre-empted between its reading and its decision) never re-earns capacity
//! ([clock rules](super::promises)). A reservation never books a wait beyond
//! `Reservation::MAX_WAIT` (about 36 years). The other clocks (`SystemClock`, `CoarseClock`,
//! your own) are in [testing and clocks](super::testing).
