//! Helpers shared by the integration tests: seeded runs and limiter construction.

#![allow(dead_code)]

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::Duration;
use tollgate::{Algorithm, ManualClock, Quota, RateLimiter};

/// The seed to use: `TOLLGATE_SEED` from the environment when set, else `default`.
pub(crate) fn seed(default: u64) -> u64 {
    std::env::var("TOLLGATE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Runs `f` with a generator seeded by `seed`; on failure prints the seed (and how to
/// rerun with it) before propagating the panic.
pub(crate) fn with_seed<R>(label: &str, seed: u64, f: impl FnOnce(&mut fastrand::Rng) -> R) -> R {
    let mut rng = fastrand::Rng::with_seed(seed);
    match catch_unwind(AssertUnwindSafe(|| f(&mut rng))) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{label}: FAILED with seed {seed} (rerun with TOLLGATE_SEED={seed})");
            resume_unwind(e)
        }
    }
}

/// Nanoseconds in `d` (test durations always fit).
pub(crate) fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).expect("test duration fits in u64 ns")
}

/// A limiter on a fresh manual clock, and that clock.
pub(crate) fn manual(
    algorithm: Algorithm,
    quota: Quota,
) -> (RateLimiter<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let limiter = RateLimiter::builder(algorithm, quota)
        .clock(clock.clone())
        .build()
        .unwrap_or_else(|e| panic!("{algorithm:?} {quota:?} should build: {e}"));
    (limiter, clock)
}

/// A quota of `limit` per `period_ns` nanoseconds, with an optional burst.
pub(crate) fn quota(limit: u32, period_ns: u64, burst: Option<u32>) -> Quota {
    let q = Quota::new(limit, Duration::from_nanos(period_ns));
    match burst {
        Some(b) => q.with_burst(b),
        None => q,
    }
}
