//! # Token budgets: check before, charge after
//!
//! Some costs are known only once the work is done: the tokens of an LLM's answer, the bytes a
//! download served, the rows a query scanned. `RateLimiter`, `KeyedRateLimiter` and `Tier`
//! have three verbs for them:
//!
//! - `charge(n)` takes the cost after the fact and is **never denied**: whatever is left is
//!   used up and the key then **owes** the rest. Its next requests wait the debt out at the
//!   quota's rate (a bucket's debt is exact GCRA: a theoretical arrival time past the burst),
//!   or the debt keeps the rest of the window (fixed window), the next window's weight
//!   (sliding window) or the next period (sliding log) from admitting anything.
//! - A debt is bounded: a bucket or a window owes at most one burst past its quota;
//!   `charge_owing(n, max_owed)` sets another bound (for the sliding window, on its weighted
//!   count, the previous window's weight included, as `owed` is). The part of a cost past the
//!   bound is not counted, and `Charge::dropped()` says how much. A sliding log needs no
//!   bound: its overdraft ends one period after the charge, however large.
//! - `Charge::give_back(n)` returns part or all of what a charge took (a stream cut short), to
//!   the state it was taken from only. A bucket gives back what of the charge the key still
//!   owes; a window while the state is still in the charged window; a log while the charge is
//!   its last write.
//! - `give_back(n)` on the limiter gives back without a `Charge`: a stateless caller, never
//!   below an empty state, that cannot tell its own charge from others'.
//!
//! When a give-back gives nothing (after a `reset`, `remove` or eviction of the key, after a
//! bucket was converted to another rate, after later writes to a log) is a list of rules of
//! its own: [the promises](super::promises) ("Token budgets").
//!
//! A budget that refills smoothly is the token bucket (one token every `period / limit`),
//! not a window that refills at the top of each minute. Tokens per API key, as an LLM
//! gateway counts them:
//!
//! ```rust
//! use std::time::Duration;
//! use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, Quota};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let clock = ManualClock::new();
//!     // 10,000 tokens per API key per minute: one token back every 6 ms.
//!     let tokens = KeyedRateLimiter::<str, _>::builder(Algorithm::TokenBucket, Quota::per_minute(10_000))
//!         .clock(clock.clone())
//!         .build()?;
//!
//!     assert!(tokens.peek("key-1").is_allowed()); // before calling the model: anything left?
//!     assert!(tokens.charge("key-1", 9_400).fit()); // its answer: 9,400 tokens
//!
//!     assert!(tokens.peek("key-1").is_allowed()); // 600 left: the next call goes ahead
//!     let mut late = tokens.charge("key-1", 1_600); // and answers at length
//!     assert_eq!(late.owed(), 1_000); // overdrawn by 1,000 tokens
//!     let next = tokens.peek("key-1");
//!     assert!(!next.is_allowed());
//!     assert_eq!(next.retry_after(), Some(Duration::from_millis(6_006))); // 1,001 tokens' time
//!
//!     late.give_back(400); // the client hung up: 400 of them were never sent
//!     assert_eq!(tokens.peek("key-1").retry_after(), Some(Duration::from_millis(3_606)));
//!     clock.advance(Duration::from_millis(3_606));
//!     assert!(tokens.check("key-1").is_allowed());
//!     assert!(tokens.peek("key-2").is_allowed()); // every key its own budget
//!     Ok(())
//! }
//! ```
//!
//! A per-model or global ceiling is another limiter charged alike (each charge is one
//! compare-and-swap, like a check); `peek` all of them before the call with
//! `check_all`'s limits or one by one.
