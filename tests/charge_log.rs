//! Issue 30, found by the `budget` fuzz target (fuzz/regressions/budget/): a sliding
//! log's charges given back, and the sliding window's bound on what a charge may owe.

use std::time::Duration;
use tollgate::{Algorithm, ManualClock, Quota, RateLimiter};

fn limiter(a: Algorithm, limit: u32) -> (RateLimiter<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let l = RateLimiter::builder(a, Quota::new(limit, Duration::from_millis(100)))
        .clock(clock.clone())
        .build()
        .unwrap();
    (l, clock)
}

fn remaining(l: &RateLimiter<ManualClock>) -> u32 {
    l.peek_n(0).unwrap().remaining()
}

/// A charge given back whole, in parts, leaves the log as it found it: every part, the
/// one past its ring first (which frees nothing), then the entries it logged (the
/// later parts were kept: the first part's refund made the charge no longer the last
/// write, and the rest of what it overwrote, never-used slots, was read as a time).
#[test]
fn a_log_charge_given_back_in_parts_gives_every_part() {
    for earlier in 0..4u32 {
        for cost in 4..9u32 {
            for first in 1..cost {
                let (l, clock) = limiter(Algorithm::SlidingLog, 4);
                for _ in 0..earlier {
                    assert!(l.check().is_allowed());
                }
                clock.advance(Duration::from_millis(10));
                let before = remaining(&l);
                let mut c = l.charge(cost);
                c.give_back(first);
                c.give_back(cost - first);
                assert_eq!(
                    remaining(&l),
                    before,
                    "{earlier} admitted, charge({cost}) given back as {first} + {}",
                    cost - first
                );
            }
        }
    }
}

/// A charge given back after a later charge of the same instant overdrew the log: the
/// later one's requests are still held, so the log stays full (it let one in).
#[test]
fn a_log_charge_given_back_after_a_later_overdraft_keeps_the_log_full() {
    let (l, _clock) = limiter(Algorithm::SlidingLog, 8);
    let mut first = l.charge(25);
    let second = l.charge_owing(26, 17);
    assert_eq!(second.taken(), 26);
    first.give_back(25);
    assert!(
        !l.check().is_allowed(),
        "26 requests of the second charge are held"
    );
    assert_eq!(remaining(&l), 0);
}

/// A charge whose entries a stateless give-back took, given back after admissions of
/// the same instant: those admissions are held, and a full log stays full.
#[test]
fn a_log_charge_given_back_after_a_stateless_give_back_keeps_later_admissions() {
    let (l, clock) = limiter(Algorithm::SlidingLog, 3);
    assert!(l.check().is_allowed()); // an entry that leaves before the charge
    clock.advance(Duration::from_millis(150));
    let mut c = l.charge(2);
    assert_eq!(l.give_back(2), 2);
    for _ in 0..3 {
        assert!(l.check().is_allowed());
    }
    c.give_back(2);
    assert!(!l.check().is_allowed(), "three admissions are held");
    assert_eq!(remaining(&l), 0);
}

/// A sliding window's charge owes at most `max_owed`: the bound is on the weighted
/// count, the previous window's weight included (it owed past it while that weighed).
#[test]
fn a_sliding_window_charge_owes_at_most_max_owed_while_the_previous_window_weighs() {
    let (l, clock) = limiter(Algorithm::SlidingWindow, 1);
    let c = l.charge_owing(5, 3);
    assert_eq!((c.taken(), c.owed()), (4, 3));
    clock.advance(Duration::from_millis(100)); // the 4 weigh fully at the window's start
    let c = l.charge_owing(5, 0);
    assert_eq!((c.taken(), c.owed(), c.dropped()), (0, 3, 5), "{c:?}");
    clock.advance(Duration::from_millis(75)); // they weigh 1 now
    let c = l.charge_owing(5, 1);
    assert_eq!((c.taken(), c.owed(), c.dropped()), (1, 1, 4), "{c:?}");
}

/// A charge that overdrew the log, given back in part, is still the last write: an
/// earlier charge of its instant, given back next, is not taken for the last write
/// (which would step back over the overdraft's entries still held).
#[test]
fn a_log_overdraft_given_back_in_part_stays_the_last_write() {
    let (l, _clock) = limiter(Algorithm::SlidingLog, 3);
    let mut earlier = l.charge(2);
    let mut over = l.charge(3); // 5 held in a ring of 3
    over.give_back(1);
    earlier.give_back(2);
    // 2 of the overdraft are held (the log may keep more: it cannot tell them apart).
    assert!(remaining(&l) <= 1, "remaining {}", remaining(&l));
}
