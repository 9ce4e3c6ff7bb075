//! Loom models of the packed table's control words (`table::packed::control`): a lane
//! per slot that a scan reads before the slot, and skips the slot when the lane holds
//! another key's tag. The lane is a hint and must never cause a false miss; these
//! models race the lane's writes (a scan publishing a tag, a replacing claim owning
//! the lane around its compare-and-swap) against lookups and claims of the same slot.
//!
//! A scan reads the first two slots of each group's order directly and the rest
//! through their lanes, so in each model the contested slot is the third of a one-group
//! table (slot 2; tables this small probe from the front): two keys fill slots 0 and 1
//! before the race.
//!
//! Run: `RUSTFLAGS="--cfg tollgate_loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p tollgate-loom-tests --release --test control`
#![cfg(tollgate_loom)]

use loom::sync::Arc;
use loom::thread;
use std::cell::Cell;
use std::time::Duration;
use tollgate::{Algorithm, Clock, KeyedRateLimiter, ManualClock, OnFull, Quota};

const A: u64 = 1;
const B: u64 = 2;
const C: u64 = 3;
const D: u64 = 4;
const E: u64 = 5;

/// How much of its quota `key`'s state has used (0 when the key is not tracked).
fn used<C: Clock>(l: &KeyedRateLimiter<u64, C>, key: u64) -> u32 {
    let d = l.check_n(&key, 0).unwrap();
    d.burst() - d.remaining()
}

/// Two threads insert the same new key B into a table (one group of five slots)
/// whose slot 2, behind a lane, is its first empty slot (slots 0 and 1 hold C and D)
/// and slot 3 the next. Whichever claims slot 2, the other must find B there through a
/// lane still `EMPTY` (an empty slot's claim writes no tag): B is installed once, with
/// both requests. A scan that trusted the lane over the slot would pass B's slot and
/// install B again in slot 3.
#[test]
fn a_lookup_reads_through_an_unpublished_lane() {
    loom::model(|| {
        let clock = ManualClock::new();
        let l = Arc::new(
            KeyedRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(3))
                .max_keys(3)
                .on_full(OnFull::Deny)
                .hash_seed(1)
                .clock(clock.clone())
                .build()
                .unwrap(),
        );
        assert!(l.check(&C).is_allowed());
        assert!(l.check(&D).is_allowed());
        let l2 = l.clone();
        let t = thread::spawn(move || l2.check(&B).is_allowed());
        assert!(l.check(&B).is_allowed());
        assert!(t.join().unwrap());
        assert_eq!(used(&l, B), 2);
        assert_eq!(l.stats().occupied, 3);
    });
}

loom::thread_local! {
    /// Each model thread's own clock reading.
    static READING: Cell<u64> = Cell::new(0);
}

/// A clock whose reading is per thread.
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

/// A three-slot table (one group) under `Deny` on per-thread readings (T = 0.5 s,
/// burst 4): A and D live until 10.5 s in slots 0 and 1 (read directly), C idle since
/// 0.5 s in slot 2 (behind a lane).
fn three_slots_one_idle() -> Arc<KeyedRateLimiter<u64, PerThreadClock>> {
    let l = Arc::new(
        KeyedRateLimiter::<u64, _>::builder(
            Algorithm::TokenBucket,
            Quota::new(4, Duration::from_secs(2)),
        )
        .max_keys(2)
        .on_full(OnFull::Deny)
        .hash_seed(1)
        .clock(PerThreadClock)
        .build()
        .unwrap(),
    );
    set_reading(10_000);
    assert!(l.check(&A).is_allowed());
    assert!(l.check(&D).is_allowed());
    set_reading(0);
    assert!(l.check(&C).is_allowed());
    l
}

/// A replacing claim racing an update of the entry it replaces: at 10.45 s a new key B
/// reclaims C's idle slot while C's own request at 10.4 s makes C live again. Either
/// B's claim wins (C's request then finds C gone and, no slot being free at the
/// reclaim's reading, is refused) or C's update does (B's compare-and-swap fails, and B
/// is refused on its next pass). The lane must end with the tag of the key its slot
/// holds: one given B's tag after B's swap failed would hide C from then on.
#[test]
fn a_replacing_claim_racing_an_update_of_its_victim() {
    loom::model(|| {
        let l = three_slots_one_idle();
        let l2 = l.clone();
        let t = thread::spawn(move || {
            set_reading(10_400);
            l2.check(&C).is_allowed()
        });
        set_reading(10_450);
        let b = l.check(&B).is_allowed();
        let c = t.join().unwrap();
        assert!(b != c, "one of B and C holds slot 2");
        assert_eq!(used(&l, B), u32::from(b));
        assert_eq!(used(&l, C), u32::from(c));
    });
}

/// A scan's publication of a tag racing a replacing claim of the same slot: E's scan
/// reads C in slot 2 behind a lane still `EMPTY` and publishes C's tag, while B's
/// claim replaces C. The publication lands only while the lane is still `EMPTY`: once
/// B's claim has taken the lane, C's tag must not land over B's (B would then be found
/// missing while present). One of B and E gets the slot, the other is refused.
#[test]
fn a_published_tag_racing_a_replacing_claim() {
    loom::model(|| {
        let l = three_slots_one_idle();
        let l2 = l.clone();
        let t = thread::spawn(move || {
            set_reading(10_450);
            l2.check(&E).is_allowed()
        });
        set_reading(10_450);
        let b = l.check(&B).is_allowed();
        let e = t.join().unwrap();
        assert!(b != e, "one of B and E holds slot 2");
        assert_eq!(used(&l, B), u32::from(b));
        assert_eq!(used(&l, E), u32::from(e));
        assert_eq!(used(&l, C), 0);
    });
}
