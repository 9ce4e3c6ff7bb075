//! Loom models of `OnFull::Evict`'s lock-free ranking: the claim ranks a new key's
//! candidates without the lock, then installs it over the victim with one
//! compare-and-swap expecting the word it ranked, under the key's claim lock taken only
//! if nobody took it since the ranking began (otherwise it rescans under the lock).
//!
//! * A claim racing a hit that makes its ranked victim busier: the install must fail
//!   (the word moved) and the claim rank again, so the key that has now used more is
//!   never forgotten while an entry that used less can go.
//! * Two claims of one new key whose readings disagree: the later one reclaims an idle
//!   slot under the lock while the earlier one ranked another slot's entry as its
//!   victim; the earlier one must see that the lock was taken since its ranking, or the
//!   key would be installed twice.
//!
//! Tables of one window of two slots (`max_keys(1)`: keys are probed from the window's
//! front, slot 0 then slot 1), a fixed hash seed.
//!
//! Run: `RUSTFLAGS="--cfg tollgate_loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p tollgate-loom-tests --release --test evict`
#![cfg(tollgate_loom)]

use loom::sync::Arc;
use loom::thread;
use std::cell::Cell;
use std::time::Duration;
use tollgate::{Algorithm, Clock, KeyedRateLimiter, ManualClock, OnFull, Quota};

/// How much of its quota `key`'s state has used (0 when the key is not tracked).
fn used<C: Clock>(l: &KeyedRateLimiter<u64, C>, key: u64) -> u32 {
    let d = l.check_n(&key, 0).unwrap();
    d.burst() - d.remaining()
}

/// Both slots hold live keys: V has used 1, W 2 (a token bucket of 4 per second, the
/// clock frozen). One thread inserts the new key K, whose claim ranks V as the victim;
/// the other spends 2 more of V's quota, so V has used 3, more than W. Whatever the
/// order: V's admissions are never forgotten after they made it busier than W (V
/// holds at least the 2 just admitted), and every request is admitted.
#[test]
fn a_claim_racing_a_hit_that_makes_its_victim_busier() {
    const V: u64 = 1;
    const W: u64 = 2;
    const K: u64 = 3;
    loom::model(|| {
        let clock = ManualClock::new();
        let l = Arc::new(
            KeyedRateLimiter::<u64, _>::builder(Algorithm::TokenBucket, Quota::per_second(4))
                .max_keys(1)
                .on_full(OnFull::Evict)
                .hash_seed(1)
                .clock(clock.clone())
                .build()
                .unwrap(),
        );
        assert!(l.check(&V).is_allowed()); // slot 0
        assert!(l.check_n(&W, 2).unwrap().is_allowed()); // slot 1
        let l2 = l.clone();
        let t = thread::spawn(move || l2.check_n(&V, 2).unwrap().is_allowed());
        assert!(l.check(&K).is_allowed());
        assert!(t.join().unwrap());
        // V is tracked with at least the 2 just admitted: with 1 before them (its
        // entry kept: then W went for K), or as a fresh key after K took its slot
        // (when it had used 1, less than W, which then went for V).
        let v = used(&l, V);
        assert!(v == 3 || v == 2, "V used {v}");
        let s = l.stats();
        assert_eq!(s.occupied, 2);
        assert_eq!(s.evictions, if v == 3 { 1 } else { 2 }, "{s:?}");
        if v == 3 {
            assert_eq!((used(&l, K), used(&l, W)), (1, 0));
        } else {
            assert_eq!((used(&l, K), used(&l, W)), (0, 2));
        }
    });
}

loom::thread_local! {
    /// Each model thread's own clock reading, so threads can disagree about idleness.
    static READING: Cell<u64> = Cell::new(0);
}

/// A clock whose reading is per thread (as with TSCs that differ across cores).
#[derive(Clone)]
struct PerThreadClock;

impl Clock for PerThreadClock {
    fn now(&self) -> u64 {
        READING.with(Cell::get)
    }
}

fn set_reading(ms: u64) {
    READING.with(|r| r.set(ms * 1_000_000));
}

/// A (slot 0) is live until 10.5 s, C (slot 1) until 10.3 s (a token bucket of 4 per
/// 2 s, T = 0.5 s). Two threads insert the new key K: at 10.2 s both entries are live
/// and the claim ranks C, which goes idle sooner, as the victim; at 10.6 s both are
/// idle and the claim reclaims the first free slot of the key's order, A's. Each alone
/// would install K in another slot: the earlier claim, whose ranking may come before
/// the later one's install, must not install over C once the lock was taken since.
/// K is installed once and holds both admissions.
#[test]
fn two_claims_of_one_key_ranking_different_victims() {
    const A: u64 = 1;
    const C: u64 = 3;
    const K: u64 = 2;
    loom::model(|| {
        let l = Arc::new(
            KeyedRateLimiter::<u64, _>::builder(
                Algorithm::TokenBucket,
                Quota::new(4, Duration::from_secs(2)),
            )
            .max_keys(1)
            .on_full(OnFull::Evict)
            .hash_seed(1)
            .clock(PerThreadClock)
            .build()
            .unwrap(),
        );
        set_reading(10_000);
        assert!(l.check(&A).is_allowed()); // slot 0, live until 10.5 s
        set_reading(9_800);
        assert!(l.check(&C).is_allowed()); // slot 1, live until 10.3 s
        let l2 = l.clone();
        let t = thread::spawn(move || {
            set_reading(10_600);
            l2.check(&K).is_allowed()
        });
        set_reading(10_200);
        assert!(l.check(&K).is_allowed());
        assert!(t.join().unwrap());
        // One state for K holding both admissions (a second copy would hold one).
        set_reading(10_600);
        assert_eq!(used(&l, K), 2);
        let s = l.stats();
        assert_eq!(s.evictions + s.idle_reclaims, 1, "{s:?}");
    });
}
