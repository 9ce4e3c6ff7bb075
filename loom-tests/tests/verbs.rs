//! Loom models of the verbs built on the cells' and tables' compare-and-swap: a
//! reservation and its cancel racing a check, and two all-or-nothing multi-limit
//! checks booking and rolling back on the same limits in opposite orders.
//!
//! Run: `RUSTFLAGS="--cfg tollgate_loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p tollgate-loom-tests --release`
#![cfg(tollgate_loom)]

use loom::sync::Arc;
use loom::thread;
use std::time::Duration;
use tollgate::{check_all, Algorithm, KeyedRateLimiter, Limit, ManualClock, Quota, RateLimiter};

fn one_per_second(algorithm: Algorithm) -> RateLimiter<ManualClock> {
    RateLimiter::builder(algorithm, Quota::per_second(1))
        .clock(ManualClock::new())
        .build()
        .unwrap()
}

/// A books and cancels while B checks, clock frozen, capacity 1. A cancel never gives
/// back B's admission: afterwards the limiter admits again exactly when B was denied
/// (A's booking, then the only one, was given back whole).
#[test]
fn cancel_racing_a_check_gives_back_only_its_own() {
    for algorithm in Algorithm::ALL {
        loom::model(move || {
            let l = Arc::new(one_per_second(algorithm));
            let a = {
                let l = l.clone();
                thread::spawn(move || {
                    let r = l.reserve(1, Duration::from_secs(10)).unwrap();
                    r.cancel();
                })
            };
            let b_admitted = l.check().is_allowed();
            a.join().unwrap();
            assert_eq!(
                l.check().is_allowed(),
                !b_admitted,
                "{algorithm:?}: B admitted = {b_admitted}"
            );
        });
    }
}

/// The same race on one key of a keyed table (its lookup, insert and update path).
#[test]
fn keyed_cancel_racing_a_check_gives_back_only_its_own() {
    for algorithm in [
        Algorithm::TokenBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingLog,
    ] {
        loom::model(move || {
            let l = Arc::new(
                KeyedRateLimiter::<u8, _>::builder(algorithm, Quota::per_second(1))
                    .max_keys(17)
                    .clock(ManualClock::new())
                    .build()
                    .unwrap(),
            );
            let a = {
                let l = l.clone();
                thread::spawn(move || {
                    let r = l.reserve(&1, 1, Duration::from_secs(10)).unwrap();
                    r.cancel();
                })
            };
            let b_admitted = l.check(&1).is_allowed();
            a.join().unwrap();
            assert_eq!(l.check(&1).is_allowed(), !b_admitted, "{algorithm:?}");
        });
    }
}

/// Two multi-limit checks on the same two limits (capacity 1 each), in opposite
/// orders: at most one is admitted, and it is consumed from both; when neither is
/// (each rolled back after the other's booking), the roll-backs were exact and the
/// pair admits again.
#[test]
fn multi_limit_book_and_roll_back_never_over_admits() {
    for algorithm in Algorithm::ALL {
        loom::model(move || {
            let x = Arc::new(one_per_second(algorithm));
            let y = Arc::new(one_per_second(algorithm));
            let other = {
                let (x, y) = (x.clone(), y.clone());
                thread::spawn(move || {
                    check_all(&[&*y as &dyn Limit, &*x], 1)
                        .unwrap()
                        .is_allowed()
                })
            };
            let mine = check_all(&[&*x as &dyn Limit, &*y], 1)
                .unwrap()
                .is_allowed();
            let theirs = other.join().unwrap();
            assert!(!(mine && theirs), "{algorithm:?}: both admitted");
            let again = check_all(&[&*x as &dyn Limit, &*y], 1)
                .unwrap()
                .is_allowed();
            assert_eq!(again, !(mine || theirs), "{algorithm:?}: {mine} {theirs}");
        });
    }
}
