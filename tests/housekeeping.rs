//! reset / remove / len and `stats(false)` on the keyed limiter, every algorithm.

use std::time::Duration;
use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, OnFull, Quota};

fn limiter(a: Algorithm, max_keys: usize, on_full: OnFull) -> KeyedRateLimiter<u64, ManualClock> {
    KeyedRateLimiter::builder(a, Quota::per_hour(2))
        .max_keys(max_keys)
        .on_full(on_full)
        .clock(ManualClock::new())
        .build()
        .unwrap()
}

#[test]
fn reset_gives_a_fresh_quota_to_that_key_only() {
    for a in Algorithm::ALL {
        let l = limiter(a, 100, OnFull::Evict);
        for k in [1, 2] {
            assert!(l.check_n(&k, 2).unwrap().is_allowed());
            assert!(!l.check(&k).is_allowed());
        }
        assert_eq!(l.len(), 2, "{a:?}");
        assert!(l.reset(&1), "{a:?}");
        assert_eq!(l.len(), 1, "{a:?}");
        assert_eq!(l.peek(&1).remaining(), 1, "{a:?}: not fresh");
        assert!(!l.check(&2).is_allowed(), "{a:?}: another key was reset");
        assert!(!l.reset(&3), "{a:?}: an absent key reported as reset");
        assert_eq!(l.stats().occupied, 2, "{a:?}: reset inserted a key");
    }
}

/// A full table that refuses new keys takes one again after a removal: the removed
/// key's slot is the free one.
#[test]
fn remove_frees_the_slot_for_a_new_key() {
    for a in Algorithm::ALL {
        let l = limiter(a, 1, OnFull::Deny);
        let mut held = Vec::new();
        let mut k = 0;
        while held.len() < 64 && k < 10_000 {
            if l.check(&k).is_allowed() {
                held.push(k);
            }
            k += 1;
        }
        let newcomer = (k..k + 10_000).find(|n| !l.check(n).is_allowed() && l.peek(n).is_allowed());
        let newcomer = newcomer.expect("a refused new key");
        // Free every held key: the refused newcomer now finds a slot.
        for h in &held {
            assert!(l.remove(h), "{a:?}");
        }
        assert!(l.is_empty(), "{a:?}");
        assert!(
            l.check(&newcomer).is_allowed(),
            "{a:?}: still refused after removals"
        );
    }
}

#[test]
fn a_reservation_of_a_reset_key_gives_nothing_back() {
    for a in Algorithm::ALL {
        let l = limiter(a, 100, OnFull::Evict);
        assert!(l.check_n(&1, 2).unwrap().is_allowed());
        let r = l.reserve(&1, 1, Duration::from_secs(7_200)).unwrap();
        assert!(l.reset(&1));
        assert!(l.check_n(&1, 2).unwrap().is_allowed());
        r.cancel();
        assert!(
            !l.check(&1).is_allowed(),
            "{a:?}: a cancel after reset gave quota back"
        );
    }
}

#[test]
fn stats_off_counts_no_decisions() {
    for a in Algorithm::ALL {
        let l = KeyedRateLimiter::<u64, _>::builder(a, Quota::per_hour(1))
            .stats(false)
            .clock(ManualClock::new())
            .build()
            .unwrap();
        assert!(l.check(&1).is_allowed());
        assert!(!l.check(&1).is_allowed());
        let s = l.stats();
        assert_eq!((s.allowed, s.rejected, s.occupied), (0, 0, 1), "{a:?}");
    }
}
