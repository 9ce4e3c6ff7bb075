//! Loom models of the verbs built on the cells' and tables' compare-and-swap: a
//! reservation and its cancel racing a check, two all-or-nothing multi-limit checks
//! booking and rolling back on the same limits in opposite orders, a roll-back racing
//! a check (exact, every algorithm), a cancel racing a reset of its key (nothing to the
//! fresh state), and a roll-back of a booking that installed its key over an idle entry
//! racing a check of that key (exact), and a charge given back racing a check on one
//! key (issue 30: exact, every algorithm).
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

/// A multi-limit check whose second limit denies rolls its first booking back while a
/// plain check is admitted on the first limit (capacity 2, clock frozen): whatever the
/// interleaving, the roll-back gives back exactly what it took, so the first limit ends
/// with exactly the plain check counted. (Before roll-backs were exact, a check landing
/// between the booking and the roll-back made the roll-back give back nothing; and a
/// leaky bucket kept a slot that another was booked behind.) The denier is of the same
/// kind, so a leaky bucket is booked before it.
#[test]
fn roll_back_racing_a_check_gives_back_exactly_its_own() {
    for algorithm in Algorithm::ALL {
        loom::model(move || {
            let first = Arc::new(
                RateLimiter::builder(algorithm, Quota::per_second(2))
                    .clock(ManualClock::new())
                    .build()
                    .unwrap(),
            );
            let denier = one_per_second(algorithm);
            assert!(denier.check().is_allowed());
            let plain = {
                let first = first.clone();
                thread::spawn(move || first.check().is_allowed())
            };
            let d = check_all(&[&*first as &dyn Limit, &denier], 1).unwrap();
            assert!(!d.is_allowed());
            assert!(
                plain.join().unwrap(),
                "{algorithm:?}: capacity 2 admits the check"
            );
            let left = first.check_n(0).unwrap().remaining();
            assert_eq!(left, 1, "{algorithm:?}: the roll-back was not exact");
        });
    }
}

/// A reservation cancelled while another thread resets the key and spends its fresh
/// quota (capacity 2, one already used, clock frozen): a cancel never gives anything to
/// the state built after the reset. If the fresh quota of 2 was admitted, the key ends
/// with both counted. If it was denied (the reservation landed on the fresh state
/// first), the cancel gives that booking back, except when the booking itself raced
/// the reset (it read the shard's epoch before the reset and its state after): then it
/// cannot tell the states apart and keeps the capacity, never gives more (see
/// `table::generation`).
#[test]
fn cancel_racing_a_reset_gives_nothing_to_the_fresh_state() {
    for algorithm in [
        Algorithm::TokenBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingLog,
    ] {
        loom::model(move || {
            let l = Arc::new(
                KeyedRateLimiter::<u8, _>::builder(algorithm, Quota::per_second(2))
                    .max_keys(17)
                    .clock(ManualClock::new())
                    .build()
                    .unwrap(),
            );
            assert!(l.check(&1).is_allowed());
            let booker = {
                let l = l.clone();
                thread::spawn(move || {
                    let r = l.reserve(&1, 1, Duration::from_secs(10)).unwrap();
                    r.cancel();
                })
            };
            l.reset(&1);
            let fresh_spent = l.check_n(&1, 2).unwrap().is_allowed();
            booker.join().unwrap();
            // What is left now (the clock is frozen): a cancel that reached the fresh
            // state would have left room.
            let room = (0..3).filter(|_| l.check(&1).is_allowed()).count();
            if fresh_spent {
                assert_eq!(room, 0, "{algorithm:?}: the cancel gave to the fresh state");
            } else {
                assert!((1..=2).contains(&room), "{algorithm:?}: {room} left");
            }
        });
    }
}

/// A multi-limit check rolled back while `set_quota` changes the bucket's rate (1 s
/// and 2 s intervals, each way), on a bucket that owes one request: the roll-back
/// gives back its own request or, when the state was converted to the other interval
/// in between, nothing (as a keyed slot of another rate class). Never more: a booking
/// counted at one rate given back from a state counted at the other would take back
/// what earlier requests owe.
#[test]
fn roll_back_racing_a_rate_change_never_gives_back_more_than_its_own() {
    let fast = Quota::new(4, Duration::from_secs(4)); // T = 1 s
    let slow = Quota::new(2, Duration::from_secs(4)); // T = 2 s
    for (from, to, t_new) in [(fast, slow, 2), (slow, fast, 1)] {
        loom::model(move || {
            let clock = ManualClock::new();
            clock.set(Duration::from_secs(100));
            let build = |a, q| {
                RateLimiter::builder(a, q)
                    .clock(clock.clone())
                    .build()
                    .unwrap()
            };
            let l = Arc::new(build(Algorithm::TokenBucket, from));
            let full = Arc::new(build(Algorithm::FixedWindow, Quota::per_hour(1)));
            assert!(l.check().is_allowed() && full.check().is_allowed());
            let multi = {
                let (l, full) = (l.clone(), full.clone());
                thread::spawn(move || {
                    let d = check_all(&[&*l as &dyn Limit, &*full], 1).unwrap();
                    assert!(!d.is_allowed());
                })
            };
            l.set_quota(to).unwrap();
            multi.join().unwrap();
            let owed = l.check_n(0).unwrap().reset_after();
            let (own, kept) = (Duration::from_secs(t_new), Duration::from_secs(2 * t_new));
            assert!(
                owed == own || owed == kept,
                "{from:?} -> {to:?}: owes {owed:?}, not {own:?} (rolled back) or {kept:?}"
            );
        });
    }
}

/// A multi-limit check whose booking installs a new key in a full table, over an idle
/// entry (issue 27, item 1), races a plain check of the same key; the other limit
/// denies. Whatever the interleaving, the roll-back gives back exactly what it took:
/// the key admits again exactly when the plain check was denied. (The booking's
/// generation is the claim's, taken after the epoch the booking read first; a refund
/// that compared it with that earlier epoch gave nothing back.)
#[test]
fn roll_back_of_a_booking_that_claimed_an_idle_slot_gives_back_exactly() {
    for algorithm in [Algorithm::TokenBucket, Algorithm::FixedWindow] {
        loom::model(move || {
            let clock = ManualClock::new();
            let l = Arc::new(
                KeyedRateLimiter::<u64, _>::builder(algorithm, Quota::per_second(1))
                    .max_keys(1)
                    .hash_seed(1)
                    .clock(clock.clone())
                    .build()
                    .unwrap(),
            );
            assert!(l.check(&100).is_allowed());
            assert!(l.check(&101).is_allowed());
            clock.advance(Duration::from_secs(2)); // both idle, no empty slot
            let denier = one_per_second(algorithm);
            assert!(denier.check().is_allowed());
            let plain = {
                let l = l.clone();
                thread::spawn(move || l.check(&3).is_allowed())
            };
            let d = check_all(&[&l.limit(&3) as &dyn Limit, &denier], 1).unwrap();
            assert!(!d.is_allowed());
            let b_admitted = plain.join().unwrap();
            assert_eq!(
                l.check(&3).is_allowed(),
                !b_admitted,
                "{algorithm:?}: the plain check admitted = {b_admitted}"
            );
        });
    }
}

/// Issue 30: A charges 2 on a limiter of capacity 2 (one key of a keyed table too) and
/// gives it back whole, while B checks one request; clock frozen. Whatever the
/// interleaving, B is admitted only while the charge is not held, and afterwards the
/// limiter holds exactly B's admission: it admits one more exactly when B was denied.
#[test]
fn charge_given_back_racing_a_check_is_exact() {
    for algorithm in Algorithm::ALL {
        loom::model(move || {
            let l = Arc::new(
                RateLimiter::builder(algorithm, Quota::per_second(2))
                    .clock(ManualClock::new())
                    .build()
                    .unwrap(),
            );
            let a = {
                let l = l.clone();
                thread::spawn(move || {
                    let mut c = l.charge(2);
                    assert_eq!(c.taken(), 2);
                    c.give_back(2);
                })
            };
            let b_admitted = l.check().is_allowed();
            a.join().unwrap();
            let left = if b_admitted { 1 } else { 2 };
            assert_eq!(
                l.peek().remaining() + 1,
                left,
                "{algorithm:?}: B admitted = {b_admitted}"
            );
        });
    }
}

/// The same race on one key of a keyed table (its lookup, insert and update path).
#[test]
fn keyed_charge_given_back_racing_a_check_is_exact() {
    for algorithm in [
        Algorithm::TokenBucket,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
    ] {
        loom::model(move || {
            let l = Arc::new(
                KeyedRateLimiter::<u8, _>::builder(algorithm, Quota::per_second(2))
                    .max_keys(17)
                    .clock(ManualClock::new())
                    .build()
                    .unwrap(),
            );
            let a = {
                let l = l.clone();
                thread::spawn(move || {
                    let mut c = l.charge(&1, 2);
                    assert_eq!(c.taken(), 2);
                    c.give_back(2);
                })
            };
            let b_admitted = l.check(&1).is_allowed();
            a.join().unwrap();
            let left = if b_admitted { 1 } else { 2 };
            assert_eq!(
                l.peek(&1).remaining() + 1,
                left,
                "{algorithm:?}: B admitted = {b_admitted}"
            );
        });
    }
}
