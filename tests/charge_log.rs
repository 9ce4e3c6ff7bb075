//! Issue 30, found by the `budget` fuzz target (fuzz/regressions/budget/): a sliding
//! log's charges given back, and the sliding window's bound on what a charge may owe.

use std::time::Duration;
use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, Quota, RateLimiter};

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

/// Issue 37 (the sliding log read behind, found by the backward clock steps of item 9):
/// a reading behind the log's newest entry, with no booking pending, is decided at the
/// state's time. The stateless `give_back` gives back what is held then (it gave
/// nothing, taking the newest entry for a pending booking); a charge's `give_back` at
/// such a reading leaves the log unmarked (it was marked booked ahead, and queued every
/// request until the clock passed its newest entry); a charge read behind is logged at
/// the state's time and given back. On a single limiter, a keyed one and a tier.
#[test]
fn a_log_given_back_behind_its_newest_entry_gives_what_the_states_time_holds() {
    let clock = ManualClock::new();
    let q = Quota::new(5, Duration::from_millis(100));
    let one = RateLimiter::builder(Algorithm::SlidingLog, q)
        .clock(clock.clone())
        .build()
        .unwrap();
    let keyed = KeyedRateLimiter::<u64, _>::builder(Algorithm::SlidingLog, q)
        .clock(clock.clone())
        .build()
        .unwrap();
    let tiered = KeyedRateLimiter::<u64, _>::builder(
        Algorithm::SlidingLog,
        Quota::new(50, Duration::from_millis(100)),
    )
    .tiers([q])
    .clock(clock.clone())
    .build()
    .unwrap();
    let tier = tiered.tier(1).unwrap();
    let left = || {
        [
            one.peek_n(0).unwrap(),
            keyed.peek_n(&1, 0).unwrap(),
            tier.peek_n(&1, 0).unwrap(),
        ]
        .map(|d| (d.is_allowed(), d.remaining()))
    };
    clock.set(Duration::from_millis(50));
    assert!(one.check_n(2).unwrap().is_allowed());
    assert!(keyed.check_n(&1, 2).unwrap().is_allowed());
    assert!(tier.check_n(&1, 2).unwrap().is_allowed());
    clock.set(Duration::from_millis(40));
    assert_eq!(
        [
            one.give_back(11),
            keyed.give_back(&1, 11),
            tier.give_back(&1, 11)
        ],
        [2; 3]
    );
    assert_eq!(left(), [(true, 5); 3]);
    // A charge at 60 ms given back at 10 ms.
    clock.set(Duration::from_millis(50));
    assert!(one.check().is_allowed());
    assert!(keyed.check(&1).is_allowed());
    assert!(tier.check_n(&1, 1).unwrap().is_allowed());
    clock.set(Duration::from_millis(60));
    let mut charges = [one.charge(1), keyed.charge(&1, 1), tier.charge(&1, 1)];
    clock.set(Duration::from_millis(10));
    for c in &mut charges {
        c.give_back(1);
    }
    assert_eq!(left(), [(true, 4); 3]);
    assert!(one.peek().is_allowed());
    assert!(keyed.peek(&1).is_allowed());
    assert!(tier.peek(&1).is_allowed());
    // A charge read at 10 ms, logged at the state's time (50 ms), given back.
    let mut charges = [one.charge(2), keyed.charge(&1, 2), tier.charge(&1, 2)];
    assert_eq!(left(), [(true, 2); 3]);
    for c in &mut charges {
        assert!(c.tracked());
        c.give_back(2);
    }
    assert_eq!(left(), [(true, 4); 3]);
    // Every slot of the ring in the window at the reading, not at the state's time: a
    // ring of 5 holding 1000, 1000, 1090, 1090, 1150 ms read at 1080 ms holds 3 at the
    // state's time, and gives back (a tier's ring holds its limiter's 50).
    for (at, n) in [(1_000, 3), (1_090, 2), (1_150, 1)] {
        clock.set(Duration::from_millis(at));
        assert!(one.check_n(n).unwrap().is_allowed());
        assert!(keyed.check_n(&1, n).unwrap().is_allowed());
        assert!(tier.check_n(&1, n).unwrap().is_allowed());
    }
    clock.set(Duration::from_millis(1_080));
    assert_eq!(
        [
            one.give_back(1),
            keyed.give_back(&1, 1),
            tier.give_back(&1, 1)
        ],
        [1; 3]
    );
    // Decided at the state's time still: the entries of 1000 ms had left the window.
    assert_eq!(left(), [(true, 3); 3]);
}
