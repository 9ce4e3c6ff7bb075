//! "A denial takes nothing from any" (README, several limits at once), in the states
//! a differential fuzzer found it broken (issue 27, items 1 and 2): a `check_all`
//! whose booking claimed a slot in a full table (replacing an idle entry, or evicting
//! one), and leaky buckets whose denials raced other requests.

use std::sync::Arc;
use std::time::Duration;
use tollgate::{
    check_all, Algorithm, KeyedRateLimiter, Limit, ManualClock, OnFull, Quota, RateLimiter,
};

/// A limiter that denies every request (spent, on a clock that never moves).
fn wall(clock: &ManualClock) -> RateLimiter<ManualClock> {
    let l = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(100))
        .clock(clock.clone())
        .build()
        .unwrap();
    assert!(l.check_n(100).unwrap().is_allowed());
    l
}

/// Issue 27, item 1: a one-key table full of idle entries (the table's steady state);
/// a `check_all` denied by another limit books the new key into the slot of an idle
/// entry, and its roll-back must give that booking back: the key's first check then
/// is admitted, as if the denial had never happened.
#[test]
fn a_denial_takes_nothing_from_a_key_that_claimed_an_idle_slot() {
    for a in Algorithm::ALL {
        for on_full in [OnFull::Evict, OnFull::Deny, OnFull::Allow] {
            let clock = ManualClock::new();
            let l = KeyedRateLimiter::<u64, _>::builder(a, Quota::per_second(1))
                .max_keys(1)
                .on_full(on_full)
                .clock(clock.clone())
                .build()
                .unwrap();
            let wall = wall(&clock);
            let room = l.max_keys() as u64;
            for k in 0..=room {
                let _ = l.check(&(100 + k));
            }
            clock.advance(Duration::from_secs(2)); // every entry idle
            let d = check_all(&[&l.limit(&3) as &dyn Limit, &wall], 1).unwrap();
            assert!(!d.is_allowed(), "{a:?} {on_full:?}");
            assert!(
                l.check(&3).is_allowed(),
                "{a:?} {on_full:?}: a denial took key 3's only request (README: a denial takes nothing from any)"
            );
        }
    }
}

/// Issue 27, item 1, the eviction case: a full table of live entries under `Evict`; the
/// denied `check_all` evicts an entry to book the new key, and the roll-back gives the
/// key's booking back.
#[test]
fn a_denial_takes_nothing_from_a_key_that_evicted_an_entry() {
    for a in Algorithm::ALL {
        let clock = ManualClock::new();
        let l = KeyedRateLimiter::<u64, _>::builder(a, Quota::per_minute(2))
            .max_keys(1)
            .clock(clock.clone())
            .build()
            .unwrap();
        let wall = wall(&clock);
        for k in 0..=l.max_keys() as u64 {
            let _ = l.check(&(100 + k));
        }
        let d = check_all(&[&l.limit(&3) as &dyn Limit, &wall], 2).unwrap();
        assert!(!d.is_allowed(), "{a:?}");
        assert!(
            l.check_n(&3, 2).unwrap().is_allowed(),
            "{a:?}: a denial took key 3's requests (README: a denial takes nothing from any)"
        );
    }
}

/// Issue 27, item 2: per-user leaky buckets behind a spent global limit, hammered from
/// several threads on one user: every `check_all` is denied, so the user's bucket may
/// lose nothing (it lost up to all of it when a roll-back behind another thread's
/// booking kept its slot).
#[test]
fn contended_denials_take_nothing_from_leaky_buckets() {
    let clock = ManualClock::new();
    let users = Arc::new(
        KeyedRateLimiter::<u64, _>::builder(Algorithm::LeakyBucket, Quota::per_minute(6))
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let wall = Arc::new(wall(&clock));
    let start = Arc::new(std::sync::Barrier::new(3));
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let (users, wall, start) = (users.clone(), wall.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for _ in 0..30_000 {
                    let d = check_all(&[&users.limit(&1) as &dyn Limit, &*wall], 1).unwrap();
                    assert!(!d.is_allowed());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        users.peek_n(&1, 0).unwrap().remaining(),
        6,
        "denials took capacity (README: a denial takes nothing from any)"
    );
}
