//! Loom models of `LockedTable`, the keyed table with a lock and a hint word per slot,
//! for both kinds of entry it holds: the sliding log's (through `KeyedRateLimiter`
//! with `Algorithm::SlidingLog`), and a minimal entry standing in for the Redis
//! hybrid's (`tollgate::loom_hooks::ModelTable`: keys compared whole, slots that
//! empty again, keys displaced outside full groups; the hybrid limiter itself needs
//! Redis and a runtime).
//!
//! The invariants checked: a key is never present twice (the claim's rescan under the
//! key's claim lock, of its groups and of displaced keys); a request is never applied
//! to another key's entry (the fingerprint, then the whole key, confirmed under the
//! slot's lock); a key found missing is decided no earlier than the last reclaim (the
//! reclaim floor). Each model names the break of the code it guards that makes it fail.
//!
//! Run: `RUSTFLAGS="--cfg tollgate_loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p tollgate-loom-tests --release --test locked`
#![cfg(tollgate_loom)]

use loom::sync::Arc;
use loom::thread;
use std::time::Duration;
use tollgate::loom_hooks::ModelTable;
use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, OnFull, Quota};

type Log = KeyedRateLimiter<u64, ManualClock>;

/// A sliding log of 2 per second in a one-group, two-slot table refusing new keys
/// when full.
fn tiny_log(clock: &ManualClock) -> Arc<Log> {
    Arc::new(
        KeyedRateLimiter::builder(Algorithm::SlidingLog, Quota::per_second(2))
            .max_keys(1)
            .on_full(OnFull::Deny)
            .hash_seed(1)
            .clock(clock.clone())
            .build()
            .unwrap(),
    )
}

/// How many entries `key`'s log holds in the period (0 when the key is not tracked).
fn used(l: &Log, key: u64) -> u32 {
    let d = l.check_n(&key, 0).unwrap();
    d.burst() - d.remaining()
}

/// Two threads check the same new key in an empty table: one installs it, the other
/// finds it (under the claim lock, by the rescan of its groups); the key is in one
/// slot holding both admissions.
///
/// Caught breaks: the claim's rescan not returning the key it finds (`Claim::Found`
/// in `claim_locked`): the second thread installs the key again in the other slot.
#[test]
fn log_same_new_key_is_installed_once() {
    loom::model(|| {
        let clock = ManualClock::new();
        let l = tiny_log(&clock);
        let l2 = l.clone();
        let t = thread::spawn(move || l2.check(&7).is_allowed());
        assert!(l.check(&7).is_allowed());
        assert!(t.join().unwrap());
        assert_eq!(used(&l, 7), 2);
        assert_eq!(l.stats().occupied, 1, "key 7 installed twice");
    });
}

/// Two threads decide the same key of a log of two per second, whose one admission
/// (at 0) has left the window (at 1.2 s): both are admitted, the log holds both (none
/// lost, none doubled), and a third request in the period is denied. The first holder
/// of the slot's lock takes the step's fast path (the newest entry has left the
/// window: decided from the cursor alone, no timestamp read); the second must see the
/// cursor and the timestamp the first stored under the lock.
///
/// Caught breaks: the fast path logging without moving the cursor's newest stamp
/// (`SlidingLog::log` skipping `ring.newest = now`): the log keeps looking empty, and
/// the third request is admitted.
#[test]
fn log_same_key_decided_by_two_threads_is_admitted_once() {
    loom::model(|| {
        let clock = ManualClock::new();
        let l = tiny_log(&clock);
        assert!(l.check(&7).is_allowed());
        clock.advance(Duration::from_millis(1200));
        let l2 = l.clone();
        let t = thread::spawn(move || l2.check(&7).is_allowed());
        let a = l.check(&7).is_allowed();
        let b = t.join().unwrap();
        assert!(a && b, "admitted {a} and {b}: two fit in the period");
        assert_eq!(used(&l, 7), 2, "an admission lost or doubled");
        assert!(!l.check(&7).is_allowed(), "a third admission in the period");
    });
}

/// Key A's log is idle (its slot reclaimable), C's is live: a thread checks A while
/// another checks new key B, which reclaims A's slot. A's request lands in A's log (or
/// A, then missing with no room, is refused); never in B's.
///
/// Caught breaks: a lookup trusting the hint without confirming the fingerprint under
/// the slot's lock (`holding`): A's request is logged in B's ring.
#[test]
fn log_lookup_racing_a_reclaim_keeps_to_its_own_key() {
    loom::model(|| {
        let clock = ManualClock::new();
        let l = tiny_log(&clock);
        assert!(l.check(&1).is_allowed()); // A, live until 1 s
        clock.advance(Duration::from_millis(500));
        assert!(l.check(&3).is_allowed()); // C, live until 1.5 s
        clock.advance(Duration::from_millis(700)); // 1.2 s: A idle, C live
        let l2 = l.clone();
        let t = thread::spawn(move || l2.check(&2).is_allowed());
        let a = l.check(&1).is_allowed();
        let b = t.join().unwrap();
        assert_eq!(
            used(&l, 2),
            u32::from(b),
            "B's log holds another key's request"
        );
        assert_eq!(used(&l, 1), u32::from(a));
        assert!(a != b, "one of A and B holds the slot");
        assert_eq!(used(&l, 3), 1);
    });
}

/// Both groups of a key hold live keys while the table has room: two threads add the
/// same new key B at once; it is displaced outside its groups once, holding both
/// requests (the claim's rescan looks for a displaced copy under the claim lock).
///
/// Caught breaks: the claim's rescan skipping displaced copies (`find_displaced` in
/// `claim_locked`): the second thread displaces B again.
#[test]
fn model_same_new_key_is_displaced_once() {
    let mut b = loom::model::Builder::new();
    // The setup fills 24 slots, each insert probing both groups.
    b.max_branches = 50_000;
    b.check(|| {
        // 26 keys: 4 groups of 12; every small hash has groups 0 and 1.
        let t = Arc::new(ModelTable::new(26));
        assert_eq!(t.slots(), 48);
        assert_eq!(t.groups(100), ([0, 12], 12));
        for k in 1..=24 {
            assert_eq!(t.add(k, k, 0, 100), Some(1));
        }
        let t2 = t.clone();
        let h = thread::spawn(move || t2.add(1000, 100, 1, 100));
        let a = t.add(1000, 100, 1, 100);
        let b = h.join().unwrap();
        let mut counts = [a.unwrap(), b.unwrap()];
        counts.sort_unstable();
        assert_eq!(counts, [1, 2]);
        let copies: Vec<_> = t.entries().into_iter().filter(|e| e.0 == 1000).collect();
        assert_eq!(copies, [(1000, 2)], "B installed twice");
        assert_eq!(t.len(), 25);
    });
}

/// Keys X and Y share one hash (one fingerprint). X's entry is idle: a thread adds to
/// X while another drops the idle entries (as a sync does) and then adds Y, which may
/// take X's old slot. Each entry counts only its own key's requests.
///
/// Caught breaks: a lookup comparing the fingerprint but not the key under the slot's
/// lock (`holding`): X's request is counted in Y's entry.
#[test]
fn model_colliding_keys_racing_a_drop_keep_their_own_entries() {
    loom::model(|| {
        let t = Arc::new(ModelTable::new(1));
        assert_eq!(t.add(1, 5, 0, 1), Some(1)); // X, idle from 1
        let t2 = t.clone();
        let h = thread::spawn(move || {
            t2.drop_idle(1);
            t2.add(2, 5, 1, 2) // Y
        });
        let x = t.add(1, 5, 0, 1);
        let y = h.join().unwrap();
        assert_eq!(y, Some(1));
        let entries = t.entries();
        assert_eq!(
            entries.iter().find(|e| e.0 == 2).map(|e| e.1),
            y,
            "Y's entry counts another key's request: {entries:?}"
        );
        let xs: Vec<_> = entries.iter().filter(|e| e.0 == 1).collect();
        assert!(xs.len() <= 1, "X present twice: {entries:?}");
        if let Some(&&(_, n)) = xs.first() {
            assert_eq!(Some(n), x);
        }
    });
}

/// Key X's entry goes idle at 5. A request of X that read the clock at 3 races a drop
/// of the idle entries at 5 (as a sync does). If the drop wins, the request finds X
/// missing and installs it afresh: at no earlier reading than the drop (the reclaim
/// floor), since X's old entry held its quota until then.
///
/// Caught breaks: a claim deciding at its own reading instead of the floor (`claim`
/// skipping `floor_shard(..).floor(now)`): X is installed at 3; and a drop raising the
/// stamp only after it emptied the slot (`remove`): a claim between the two reads the
/// old floor.
#[test]
fn model_request_in_flight_across_a_drop_decides_after_it() {
    loom::model(|| {
        let t = Arc::new(ModelTable::new(1));
        assert_eq!(t.add(1, 5, 0, 5), Some(1)); // X, idle from 5
        let t2 = t.clone();
        let h = thread::spawn(move || t2.drop_idle(5));
        let x = t.add(1, 5, 3, 6);
        let dropped = h.join().unwrap();
        assert!(x.is_some());
        match t.since(1) {
            // Found before the drop, which then kept it (live until 6).
            Some(0) => assert_eq!((dropped, x), (0, Some(2))),
            Some(since) => {
                assert_eq!((dropped, x), (1, Some(1)));
                assert!(since >= 5, "X installed at {since}, before the drop at 5");
            }
            None => panic!("X missing"),
        }
    });
}
