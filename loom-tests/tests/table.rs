//! Loom models of the keyed table: concurrent claims of one empty slot (same key and
//! different keys), two reclaims for one new key, an idle reclaim racing an update, an
//! eviction racing an update, and exact admission per key under a frozen clock for
//! every algorithm, a request in flight across a reclaim of its own key, and inserts and
//! reclaims in a table of full-size windows (two windows probed interleaved from
//! per-key start offsets, scans stopping at the first empty slot), a refusal made
//! without the lock racing a reclaim of the same key, and a request holding the
//! parameters from before the table's first rate change racing that change.
//!
//! Most tables are built tiny (`max_keys(1)`: one window of two slots) so that every key
//! competes for the same slots, and with a fixed hash seed so that every execution of
//! a model takes the same paths. The slot word is modelled as a linearizable `u128`
//! (`tollgate`'s `sync::AtomicU128` under `--cfg tollgate_loom`).
//!
//! The invariant checked by the race models: every admission is recorded in its own
//! key's state, or counted as untracked; never in another key's state. A request of
//! key A applied to key B's state (the ABA hazard of slot reuse) would show up as B
//! having used more than B was admitted.
//!
//! Run: `RUSTFLAGS="--cfg tollgate_loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p tollgate-loom-tests --release --test table`
#![cfg(tollgate_loom)]

use loom::sync::Arc;
use loom::thread;
use std::cell::Cell;
use std::time::Duration;
use tollgate::{Algorithm, Clock, KeyedRateLimiter, ManualClock, OnFull, Quota};

type Keyed = KeyedRateLimiter<u64, ManualClock>;

/// A one-window, two-slot table (room for one live key plus slack).
fn tiny(algorithm: Algorithm, limit: u32, policy: OnFull, clock: &ManualClock) -> Arc<Keyed> {
    Arc::new(
        KeyedRateLimiter::builder(algorithm, Quota::per_second(limit))
            .max_keys(1)
            .on_full(policy)
            .hash_seed(1)
            .clock(clock.clone())
            .build()
            .unwrap(),
    )
}

/// How much of its quota `key`'s state has used (0 when the key is not tracked).
fn used<C: Clock>(l: &KeyedRateLimiter<u64, C>, key: u64) -> u32 {
    let d = l.check_n(&key, 0).unwrap();
    d.burst() - d.remaining()
}

/// Two threads insert the same new key into the same empty slot: one claims it, the
/// other finds the key there; both requests land in the one state.
#[test]
fn two_threads_claim_the_same_empty_slot_for_the_same_key() {
    loom::model(|| {
        let clock = ManualClock::new();
        let l = tiny(Algorithm::TokenBucket, 3, OnFull::Deny, &clock);
        let l2 = l.clone();
        let t = thread::spawn(move || l2.check(&7).is_allowed());
        assert!(l.check(&7).is_allowed());
        assert!(t.join().unwrap());
        assert_eq!(used(&l, 7), 2);
        let s = l.stats();
        assert_eq!((s.occupied, s.allowed), (1, 2));
    });
}

/// Two threads insert different new keys into the same empty slot: one wins it, the
/// other takes the next slot; each state holds only its own key's request.
#[test]
fn two_threads_claim_the_same_empty_slot_for_different_keys() {
    loom::model(|| {
        let clock = ManualClock::new();
        let l = tiny(Algorithm::TokenBucket, 2, OnFull::Deny, &clock);
        let l2 = l.clone();
        let t = thread::spawn(move || l2.check(&1).is_allowed());
        assert!(l.check(&2).is_allowed());
        assert!(t.join().unwrap());
        assert_eq!((used(&l, 1), used(&l, 2)), (1, 1));
        let s = l.stats();
        assert_eq!((s.occupied, s.allowed, s.evictions), (2, 2, 0));
    });
}

/// Key A's slot is idle; a thread updates A while another reclaims A's slot for new
/// key B (the other slot holds a live key C). Whatever the order, each admission is
/// in its own key's state or untracked (`OnFull::Allow` admits when no slot is free).
/// Every algorithm (the sliding log's locked table included).
#[test]
fn idle_reclaim_racing_an_update() {
    const A: u64 = 1;
    const B: u64 = 2;
    const C: u64 = 3;
    for algorithm in Algorithm::ALL {
        loom::model(move || {
            let clock = ManualClock::new();
            let l = tiny(algorithm, 2, OnFull::Allow, &clock);
            assert!(l.check(&A).is_allowed());
            assert!(l.check(&C).is_allowed());
            clock.advance(Duration::from_secs(2)); // A and C idle, for every algorithm
            assert!(l.check(&C).is_allowed()); // C live again
            let l2 = l.clone();
            let t = thread::spawn(move || l2.check(&A).is_allowed());
            assert!(l.check(&B).is_allowed());
            assert!(t.join().unwrap());
            let s = l.stats();
            assert_eq!(used(&l, C), 1, "{algorithm:?}");
            assert!(used(&l, A) <= 1 && used(&l, B) <= 1, "{algorithm:?}");
            assert_eq!(
                u64::from(used(&l, A) + used(&l, B)) + s.untracked,
                2,
                "{algorithm:?}"
            );
            assert_eq!(s.evictions, 0);
        });
    }
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

/// A one-key table (two slots, one window) under `OnFull::Deny`, on per-thread readings:
/// T = 0.5 s, burst 4, so a key checked once at t is live until t + 0.5 s.
fn two_slots_deny() -> Arc<KeyedRateLimiter<u64, PerThreadClock>> {
    Arc::new(
        KeyedRateLimiter::<u64, _>::builder(
            Algorithm::TokenBucket,
            Quota::new(4, Duration::from_secs(2)),
        )
        .max_keys(1)
        .on_full(OnFull::Deny)
        .hash_seed(1)
        .clock(PerThreadClock)
        .build()
        .unwrap(),
    )
}

fn set_reading(ms: u64) {
    READING.with(|r| r.set(ms * 1_000_000));
}

/// Two threads insert the same new key B into a full window at once, with readings
/// that disagree: at 10.5 s key A's slot is idle, at 10.4 s it is not (but C's is). Each
/// thread alone would reclaim a different slot; the key's claim lock and the rescan
/// under it make sure B is installed once, holding both admissions.
#[test]
fn two_threads_reclaim_for_the_same_new_key() {
    const A: u64 = 1;
    const B: u64 = 2;
    const C: u64 = 3;
    loom::model(|| {
        let l = two_slots_deny();
        set_reading(10_000);
        assert!(l.check(&A).is_allowed()); // slot 0, live until 10.5 s
        set_reading(0);
        assert!(l.check(&C).is_allowed()); // slot 1, live until 0.5 s
        let l2 = l.clone();
        let t = thread::spawn(move || {
            set_reading(10_400);
            l2.check(&B).is_allowed()
        });
        set_reading(10_500);
        assert!(l.check(&B).is_allowed());
        assert!(t.join().unwrap());
        // One state for B, holding both requests (a duplicate would show one).
        let d = l.check_n(&B, 0).unwrap();
        assert_eq!(d.burst() - d.remaining(), 2);
        let s = l.stats();
        assert_eq!((s.idle_reclaims, s.evictions, s.refused), (1, 0, 0));
    });
}

/// A refusal without the lock (`OnFull::Deny` when every entry of the key's windows is
/// live at the reading) racing a reclaim for the same key: at 10.4 s both A and C are
/// live (until 10.5 s), at 10.6 s both are idle. The thread at 10.6 s reclaims a slot
/// for B; the one at 10.4 s either refuses B (its pass ran before the install: at its
/// reading there was no room) or finds B and is admitted into that one state. B is never
/// installed twice: a later request lands in the same state as every admission before it.
#[test]
fn lock_free_refusal_racing_a_reclaim_of_the_same_key() {
    const A: u64 = 1;
    const B: u64 = 2;
    const C: u64 = 3;
    loom::model(|| {
        let l = two_slots_deny();
        set_reading(10_000);
        assert!(l.check(&A).is_allowed());
        assert!(l.check(&C).is_allowed());
        let l2 = l.clone();
        let t = thread::spawn(move || {
            set_reading(10_600);
            l2.check(&B).is_allowed()
        });
        set_reading(10_400);
        let early = l.check(&B).is_allowed();
        assert!(t.join().unwrap());
        let s = l.stats();
        assert_eq!(s.idle_reclaims, 1, "{s:?}");
        assert_eq!(s.refused, u64::from(!early), "{s:?}");
        // One state for B, holding every admission so far and the next one.
        set_reading(10_600);
        assert!(l.check(&B).is_allowed());
        assert_eq!(used(&l, B), 2 + u32::from(early));
    });
}

/// Both slots hold live keys (A and C); a thread updates A while another inserts B,
/// which must evict the entry that has used least. No state ever holds another key's
/// admissions, and every request is admitted (an evicted key comes back fresh).
#[test]
fn eviction_racing_an_update() {
    const A: u64 = 1;
    const B: u64 = 2;
    const C: u64 = 3;
    for algorithm in Algorithm::ALL {
        loom::model(move || {
            let clock = ManualClock::new();
            let l = tiny(algorithm, 2, OnFull::Evict, &clock);
            assert!(l.check(&A).is_allowed());
            assert!(l.check(&C).is_allowed());
            let l2 = l.clone();
            let t = thread::spawn(move || l2.check(&A).is_allowed());
            assert!(l.check(&B).is_allowed());
            assert!(t.join().unwrap());
            let s = l.stats();
            assert!(s.evictions >= 1, "{algorithm:?}");
            assert!(
                used(&l, A) <= 2 && used(&l, B) <= 1 && used(&l, C) <= 1,
                "{algorithm:?}"
            );
            assert!(s.occupied <= 2);
        });
    }
}

/// Three callers on one new key with a frozen clock, capacity 2: exactly 2 admitted,
/// for every algorithm (the sliding log's table included).
#[test]
fn frozen_clock_admits_exactly_capacity_per_key() {
    for algorithm in Algorithm::ALL {
        loom::model(move || {
            let clock = ManualClock::new();
            let l = tiny(algorithm, 2, OnFull::Deny, &clock);
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    let l = l.clone();
                    thread::spawn(move || u32::from(l.check(&9).is_allowed()))
                })
                .collect();
            let mut total = u32::from(l.check(&9).is_allowed());
            for h in handles {
                total += h.join().unwrap();
            }
            assert_eq!(total, 2, "{algorithm:?}");
            assert_eq!(l.stats().occupied, 1, "{algorithm:?}");
        });
    }
}

/// Issue 13.1, model-checked: key A's request reads 10.5 s and races key C's claim at
/// 11 s, which finds A idle and takes its slot. Whichever comes first, A is never
/// decided fresh at a reading older than the reclaim, so over [10 s, 11 s] A gets at
/// most what a single limiter fed the same readings gives: 2 at 10 s, and 2 more by
/// 11 s (burst or window of 2, 2 per second), for every algorithm.
#[test]
fn reclaim_in_flight_never_re_earns_quota() {
    const A: u64 = 1;
    const B: u64 = 2;
    const C: u64 = 3;
    for algorithm in Algorithm::ALL {
        loom::model(move || {
            let l = Arc::new(
                KeyedRateLimiter::<u64, _>::builder(algorithm, Quota::per_second(2))
                    .max_keys(1)
                    .on_full(OnFull::Deny)
                    .hash_seed(1)
                    .clock(PerThreadClock)
                    .build()
                    .unwrap(),
            );
            set_reading(0);
            assert!(l.check(&A).is_allowed());
            set_reading(5_000);
            assert!(l.check(&B).is_allowed());
            set_reading(10_000);
            assert!(l.check_n(&A, 2).unwrap().is_allowed());
            let l2 = l.clone();
            let reclaim = thread::spawn(move || {
                set_reading(11_000);
                l2.check(&C).is_allowed()
            });
            set_reading(10_500);
            let mut admitted = 2 * u32::from(l.check_n(&A, 2).unwrap().is_allowed());
            assert!(reclaim.join().unwrap(), "{algorithm:?}");
            set_reading(11_000);
            while admitted < 10 && l.check(&A).is_allowed() {
                admitted += 1;
            }
            assert!(admitted <= 2, "{algorithm:?}: A got {admitted} after 10 s");
        });
    }
}

/// A table of full-size windows (`max_keys(17)`: 3 windows of 12 slots in one shard),
/// so keys probe two distinct windows interleaved, each from its own start offset,
/// and a scan stops at the first empty slot. 20 keys are inserted first (so scans pass
/// occupied slots in both windows), then two threads insert the same new key while a
/// third inserts another: each key ends up present once, holding its own admissions.
#[test]
fn full_size_windows_insert_each_key_once() {
    loom::model(|| {
        let clock = ManualClock::new();
        let l = Arc::new(
            KeyedRateLimiter::<u64, _>::builder(Algorithm::TokenBucket, Quota::per_second(5))
                .max_keys(17)
                .on_full(OnFull::Deny)
                .hash_seed(3)
                .clock(clock.clone())
                .build()
                .unwrap(),
        );
        for k in 100..120 {
            assert!(l.check(&k).is_allowed());
        }
        let (a, b) = (l.clone(), l.clone());
        let t1 = thread::spawn(move || a.check(&7).is_allowed());
        let t2 = thread::spawn(move || b.check(&8).is_allowed());
        assert!(l.check(&7).is_allowed());
        assert!(t1.join().unwrap());
        assert!(t2.join().unwrap());
        assert_eq!(used(&l, 7), 2);
        assert_eq!(used(&l, 8), 1);
        let s = l.stats();
        assert_eq!((s.occupied, s.allowed, s.refused), (22, 23, 0));
    });
}

/// The same full-size table, no slot empty, half the entries idle at 10.9 s and all at
/// 11 s: two threads with those readings insert key 7 (each alone would reclaim a
/// different slot) while a third updates another key. The replacing claims of key 7
/// serialize on the key's claim lock and rescan under it, so it is installed once.
#[test]
fn full_size_windows_reclaim_each_key_once() {
    // Filling 36 slots takes more loom operations than the default budget.
    let mut model = loom::model::Builder::new();
    model.max_branches = 100_000;
    model.check(|| {
        let l = Arc::new(
            KeyedRateLimiter::<u64, _>::builder(Algorithm::TokenBucket, Quota::per_second(5))
                .max_keys(17)
                .on_full(OnFull::Deny)
                .hash_seed(3)
                .clock(PerThreadClock)
                .build()
                .unwrap(),
        );
        set_reading(0);
        let mut k = 100;
        // Fill every slot (a miss that reaches no empty slot sees the whole table): at
        // reading 0 every entry is live, so a key whose windows are full is refused.
        let slots = l.stats().slots;
        let mut filled = 0;
        while filled < slots {
            filled += u64::from(l.check(&k).is_allowed());
            k += 1;
        }
        // Every other key used again at 10.8 s: live at 10.9 s (TAT 11.0 s), idle at
        // 11.0 s. The two inserting threads disagree about which slots are free, so
        // each alone would pick a different target for key 7.
        set_reading(10_800);
        for key in (100..k).step_by(2) {
            let _ = l.check(&key);
        }
        let (a, b) = (l.clone(), l.clone());
        let t1 = thread::spawn(move || {
            set_reading(10_900);
            a.check(&7).is_allowed()
        });
        let t2 = thread::spawn(move || {
            set_reading(10_950);
            b.check(&100).is_allowed()
        });
        set_reading(11_000);
        assert!(l.check(&7).is_allowed());
        assert!(t1.join().unwrap());
        assert!(t2.join().unwrap());
        set_reading(11_000);
        assert_eq!(used(&l, 7), 2);
        let s = l.stats();
        assert_eq!(s.refused, 0);
        assert!(s.idle_reclaims >= 1 && s.idle_reclaims <= 2, "{s:?}");
    });
}

/// A request that read a table's parameters before its first rate change (class 0,
/// not yet "mixed") racing that change and a request under the new rate, on a key
/// that owes one request of 1 s: whatever the interleaving, the key ends up owing
/// three requests, 6 s at the new 2 s interval. The old request meeting a state the
/// new rate wrote must convert it (a slot of another class goes to the slow path),
/// not add its own 1 s to a state counted in 2 s (5 s).
#[test]
fn a_request_from_before_the_first_rate_change_prices_its_own_class() {
    let fast = Quota::new(4, Duration::from_secs(4)); // T = 1 s
    let slow = Quota::new(4, Duration::from_secs(8)); // T = 2 s
    loom::model(move || {
        let clock = ManualClock::new();
        clock.set(Duration::from_secs(100));
        let l = Arc::new(
            KeyedRateLimiter::builder(Algorithm::TokenBucket, fast)
                .max_keys(1)
                .hash_seed(1)
                .clock(clock.clone())
                .build()
                .unwrap(),
        );
        assert!(l.check(&1).is_allowed());
        let old = {
            let l = l.clone();
            thread::spawn(move || l.check(&1).is_allowed())
        };
        l.set_quota(slow).unwrap();
        assert!(l.check(&1).is_allowed());
        assert!(old.join().unwrap());
        let owed = l.check_n(&1, 0).unwrap().reset_after();
        assert_eq!(owed, Duration::from_secs(6));
    });
}
