//! # The tollgate guide
//!
//! A chapter per task, each example a doctest that runs. Start with the first; the rest can be
//! read in any order.
//!
//! | chapter | what it covers |
//! |---|---|
//! | [`choosing`] | which limiter for which job, the five algorithms, `Decision`, `peek`, where fixed windows start |
//! | [`keyed`] | one limit per key: `max_keys`, `OnFull`, memory per key, key identity, threads, the unsafe code |
//! | [`reservations`] | booking capacity for later, cancelling, async and blocking waits |
//! | [`several_limits`] | `check_all`: per user and global, all or nothing |
//! | [`quotas`] | `set_quota` at run time, tiers (a quota per key) |
//! | [`budgets`] | token budgets: check before, charge the real cost after |
//! | [`redis`] | the exact and hybrid modes across instances (feature `redis`) |
//! | [`middleware`] | `RateLimitLayer` for axum, hyper and tonic (features `tower`, `axum`, `tonic`, `grpc`, `metrics`) |
//! | [`testing`] | `ManualClock`, and the other clocks |
//! | [`promises`] | every rule the library keeps, each with the test that checks it |
//!
//! The Redis and middleware chapters hold examples that need their features: they are
//! written out when the documentation is built with them (`cargo doc --all-features`, as
//! docs.rs builds).
//!
//! ## Measuring
//!
//! `cargo run --release --example shootout` measures tollgate's keyed limiter (all five
//! algorithms) against governor, a `Mutex<HashMap>` token bucket, a dashmap of atomic GCRA
//! words and two floors (one hash, one probe, one compare-and-swap: 8-byte and 16-byte) in
//! one run, and prints one table. `cargo bench --bench decision` runs the criterion suite
//! (single key and keyed, hot key, mostly denied, 1,000, 1,000,000 uniform and Zipf keys, 1
//! and 2 threads). `cargo run --release --example probe -- tollgate 1k 1000000 --time` runs
//! one limiter on one workload (best of 9 runs; without `--time`, one run for a profiler such
//! as `valgrind --tool=callgrind`). The current figures, the machine and how to read them are
//! in BENCHMARKS.md.

pub mod budgets;
pub mod choosing;
pub mod keyed;
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub mod middleware;
/// The middleware chapter: build the documentation with the `axum` feature to read it
/// (`cargo doc --all-features`, as docs.rs builds), since its examples need axum.
#[cfg(not(feature = "axum"))]
pub mod middleware {}
pub mod promises;
pub mod quotas;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod redis;
/// The Redis chapter: build the documentation with the `redis` feature to read it
/// (`cargo doc --all-features`, as docs.rs builds), since its examples need it.
#[cfg(not(feature = "redis"))]
pub mod redis {}
pub mod reservations;
pub mod several_limits;
pub mod testing;
