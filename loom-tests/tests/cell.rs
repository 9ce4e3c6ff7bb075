//! Loom models of the single-key atomic cell (and the sliding log's lock): concurrent
//! callers on one key admit exactly the capacity, and a stale clock reading racing a
//! fresh one never over-admits.
//!
//! Run: `RUSTFLAGS="--cfg tollgate_loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p tollgate-loom-tests --release`
#![cfg(tollgate_loom)]

use loom::sync::Arc;
use loom::thread;
use std::cell::Cell;
use std::time::Duration;
use tollgate::{Algorithm, Clock, ManualClock, Quota, RateLimiter};

/// Runs `n` checks of `cost` and returns how many were admitted.
fn admitted<C: Clock>(limiter: &RateLimiter<C>, n: usize, cost: u32) -> u32 {
    (0..n)
        .filter(|_| limiter.check_n(cost).unwrap().is_allowed())
        .count() as u32
        * cost
}

/// Three callers, one check each, on a capacity of 2 with a frozen clock: exactly 2.
#[test]
fn three_threads_frozen_clock_admit_exactly_capacity() {
    for algorithm in Algorithm::ALL {
        loom::model(move || {
            let limiter = Arc::new(
                RateLimiter::builder(algorithm, Quota::per_second(2))
                    .clock(ManualClock::new())
                    .build()
                    .unwrap(),
            );
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    let l = limiter.clone();
                    thread::spawn(move || admitted(&l, 1, 1))
                })
                .collect();
            let mut total = admitted(&limiter, 1, 1);
            for h in handles {
                total += h.join().unwrap();
            }
            assert_eq!(total, 2, "{algorithm:?}");
        });
    }
}

/// Two callers, two checks each, on a capacity of 3: exactly 3.
#[test]
fn two_threads_two_checks_admit_exactly_capacity() {
    for algorithm in Algorithm::ALL {
        loom::model(move || {
            let limiter = Arc::new(
                RateLimiter::builder(algorithm, Quota::per_second(3))
                    .clock(ManualClock::new())
                    .build()
                    .unwrap(),
            );
            let l = limiter.clone();
            let other = thread::spawn(move || admitted(&l, 2, 1));
            let total = admitted(&limiter, 2, 1) + other.join().unwrap();
            assert_eq!(total, 3, "{algorithm:?}");
        });
    }
}

/// Two requests of cost 2 racing for a capacity of 3: exactly one is admitted.
#[test]
fn multi_cost_requests_never_overshoot() {
    for algorithm in Algorithm::ALL {
        loom::model(move || {
            let limiter = Arc::new(
                RateLimiter::builder(algorithm, Quota::per_second(3))
                    .clock(ManualClock::new())
                    .build()
                    .unwrap(),
            );
            let l = limiter.clone();
            let other = thread::spawn(move || admitted(&l, 1, 2));
            let total = admitted(&limiter, 1, 2) + other.join().unwrap();
            assert_eq!(total, 2, "{algorithm:?}");
        });
    }
}

loom::thread_local! {
    /// Each model thread's own clock reading, so one thread can lag the other.
    static READING: Cell<u64> = Cell::new(0);
}

/// A clock whose reading is per thread: a thread whose TSC lags another's.
#[derive(Clone)]
struct PerThreadClock;

impl Clock for PerThreadClock {
    fn now(&self) -> u64 {
        READING.with(Cell::get)
    }
}

/// The key is full at t = 0. A fresh thread reads t = 2P (capacity back) and a stale
/// thread still reads t = 0; each tries twice. Whatever the interleaving, exactly the
/// capacity (2) is admitted between them: the stale reading never re-earns anything.
#[test]
fn stale_reading_racing_fresh_one_never_over_admits() {
    const PERIOD: Duration = Duration::from_micros(1);
    for algorithm in Algorithm::ALL {
        loom::model(move || {
            let limiter = Arc::new(
                RateLimiter::builder(algorithm, Quota::new(2, PERIOD))
                    .clock(PerThreadClock)
                    .build()
                    .unwrap(),
            );
            assert_eq!(admitted(&limiter, 2, 1), 2);
            let l = limiter.clone();
            let fresh = thread::spawn(move || {
                READING.with(|r| r.set(2 * PERIOD.as_nanos() as u64));
                admitted(&l, 2, 1)
            });
            let stale = admitted(&limiter, 2, 1);
            let total = stale + fresh.join().unwrap();
            assert_eq!(total, 2, "{algorithm:?}: stale {stale}");
        });
    }
}

/// A request racing `set_quota` between a bucket interval of 1 s and one of 2 s, on a
/// bucket that owes one request: whichever goes first, the bucket then owes exactly
/// two requests of the new quota. A request priced in the old interval on a state
/// already converted, or in the new one on a state converted afterwards, would leave
/// it owing a fraction more or less. Through `check` (the decision's compare-and-swap)
/// and `reserve` (the booking's).
#[test]
fn request_racing_a_rate_change_is_priced_in_one_interval() {
    let fast = Quota::new(4, Duration::from_secs(4)); // T = 1 s, burst 4
    let slow = Quota::new(2, Duration::from_secs(4)); // T = 2 s, burst 2
    for (from, to, owes) in [(fast, slow, 4), (slow, fast, 2)] {
        for reserve in [false, true] {
            loom::model(move || {
                let clock = ManualClock::new();
                clock.set(Duration::from_secs(100));
                let l = Arc::new(
                    RateLimiter::builder(Algorithm::TokenBucket, from)
                        .clock(clock)
                        .build()
                        .unwrap(),
                );
                assert!(l.check().is_allowed());
                let changer = {
                    let l = l.clone();
                    thread::spawn(move || l.set_quota(to).unwrap())
                };
                let admitted = if reserve {
                    l.reserve(1, Duration::ZERO).is_ok()
                } else {
                    l.check().is_allowed()
                };
                changer.join().unwrap();
                assert!(admitted);
                let owed = l.check_n(0).unwrap().reset_after();
                assert_eq!(owed, Duration::from_secs(owes), "{from:?} -> {to:?}");
            });
        }
    }
}
