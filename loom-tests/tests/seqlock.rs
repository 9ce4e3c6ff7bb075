//! Loom models of the parameter seqlock (`sync::Seqlock`, through which `set_quota`
//! replaces a limiter's or a tier's parameters while decisions read them): a reader
//! racing replacements sees one whole stored value, never a mix of two (each value's
//! four words are all equal, so a torn read shows as unequal words); a reader never
//! goes back to an older value; concurrent replacements are serialized, so the value
//! left is one of them whole; and a replacement is seen by every read after it.
//!
//! The seqlock is the crate's own code over loom's atomics (`tollgate::loom_hooks`);
//! loom explores the weak-memory outcomes of its relaxed word loads and stores.
//!
//! Run: `RUSTFLAGS="--cfg tollgate_loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p tollgate-loom-tests --release --test seqlock`
#![cfg(tollgate_loom)]

use loom::sync::Arc;
use loom::thread;
use tollgate::loom_hooks::ParamSeqlock;

/// The value whose four words are all `k`.
fn value(k: u64) -> [u64; 4] {
    [k; 4]
}

/// Which stored value `v` is; panics on a torn read (words from different values).
fn which(v: [u64; 4]) -> u64 {
    assert!(v.iter().all(|&w| w == v[0]), "torn read: {v:?}");
    v[0]
}

/// One writer replaces the value twice (0 -> 1 -> 2) while the reader loads twice:
/// every load is one stored value whole, the second never older than the first, and
/// once the writer is joined the last value is what a load returns.
#[test]
fn reader_racing_two_replacements_sees_whole_values_in_order() {
    loom::model(|| {
        let cell = Arc::new(ParamSeqlock::new(value(0)));
        let writer = {
            let cell = cell.clone();
            thread::spawn(move || {
                cell.store(value(1));
                cell.store(value(2));
            })
        };
        let first = which(cell.load());
        let second = which(cell.load());
        assert!(first <= second, "went back from {first} to {second}");
        writer.join().unwrap();
        assert_eq!(which(cell.load()), 2);
    });
}

/// Two writers replace the value at once (with 1 and with 2) while the reader loads:
/// the reader sees one whole value, and what is left is one of the two whole.
#[test]
fn concurrent_replacements_are_serialized() {
    loom::model(|| {
        let cell = Arc::new(ParamSeqlock::new(value(0)));
        let writers: Vec<_> = [1, 2]
            .into_iter()
            .map(|k| {
                let cell = cell.clone();
                thread::spawn(move || cell.store(value(k)))
            })
            .collect();
        let seen = which(cell.load());
        assert!(seen <= 2);
        for w in writers {
            w.join().unwrap();
        }
        let last = which(cell.load());
        assert!(last == 1 || last == 2, "left {last}");
    });
}

/// Two readers and one replacement: both readers see a whole value, old or new.
#[test]
fn two_readers_racing_a_replacement_see_old_or_new() {
    loom::model(|| {
        let cell = Arc::new(ParamSeqlock::new(value(0)));
        let reader = {
            let cell = cell.clone();
            thread::spawn(move || which(cell.load()))
        };
        let writer = {
            let cell = cell.clone();
            thread::spawn(move || cell.store(value(1)))
        };
        let mine = which(cell.load());
        assert!(mine <= 1);
        assert!(reader.join().unwrap() <= 1);
        writer.join().unwrap();
        assert_eq!(which(cell.load()), 1);
    });
}

/// The protocol a bucket's `set_quota` runs on a single cell: the writer converts a
/// state word inside the replacement (`store_with`), a reader loads the value with its
/// stamp and then the state (acquire). A reader that sees the converted state finds
/// its stamp changed unless it read the new value; a reader that read the new value
/// sees the converted state.
#[test]
fn what_a_replacement_writes_during_it_is_seen_with_the_new_value_only() {
    use loom::sync::atomic::{AtomicU64, Ordering};
    loom::model(|| {
        let cell = Arc::new(ParamSeqlock::new(value(0)));
        let state = Arc::new(AtomicU64::new(0));
        let reader = {
            let (cell, state) = (cell.clone(), state.clone());
            thread::spawn(move || {
                let (v, stamp) = cell.load_stamped();
                let converted = state.load(Ordering::Acquire) == 1;
                let stale = cell.changed(stamp);
                match which(v) {
                    0 => assert!(
                        !converted || stale,
                        "the old value with the converted state"
                    ),
                    _ => assert!(converted, "the new value before its conversion"),
                }
            })
        };
        cell.store_with(value(1), || {
            // The conversion: a compare-and-swap, as `PackedCell::update` does.
            let _ = state.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire);
        });
        reader.join().unwrap();
    });
}
