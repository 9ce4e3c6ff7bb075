//! The loom models' stand-in for the keyed table's 16-byte slot word (`sync::AtomicU128`,
//! a modelled mutex) refuses an invalid ordering as `machine`'s paths do, by the same
//! check (`ordering::check_load_order`, `ordering::check_failure_order`): with the standard
//! library's message, whichever path runs (`src/machine/tests.rs` checks the others), and
//! before it touches the word. A failure ordering stronger than the success one is valid.
//!
//! Run: `RUSTFLAGS="--cfg tollgate_loom" cargo test -p tollgate-loom-tests --release --test slot_word`
#![cfg(tollgate_loom)]

use std::hint::black_box;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use tollgate::loom_hooks::SlotWord;

/// The message `f` panicked with.
fn panic_message(f: impl FnOnce()) -> String {
    let payload = catch_unwind(AssertUnwindSafe(f)).expect_err("an invalid ordering was accepted");
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => p.downcast::<&str>().map(|s| s.to_string()).unwrap(),
    }
}

#[test]
fn an_invalid_ordering_panics_as_the_standard_library_does() {
    // The standard library's messages, read from its own atomics (the ordering through
    // `black_box`, which a constant invalid ordering's lint would refuse).
    let std_word = AtomicU64::new(0);
    let mut expected = Vec::new();
    for invalid in [Ordering::Release, Ordering::AcqRel] {
        let load = panic_message(|| {
            std_word.load(black_box(invalid));
        });
        let failure = panic_message(|| {
            let _ = std_word.compare_exchange(0, 1, Ordering::SeqCst, black_box(invalid));
        });
        expected.push((invalid, load, failure));
    }
    loom::model(move || {
        let word = SlotWord::new(5);
        for (invalid, load, failure) in &expected {
            let got = panic_message(|| {
                let _ = word.load(black_box(*invalid));
            });
            assert_eq!(&got, load);
            for success in [Ordering::Relaxed, Ordering::Acquire, Ordering::SeqCst] {
                let got = panic_message(|| {
                    let _ = word.compare_exchange(5, 6, success, black_box(*invalid));
                });
                assert_eq!(&got, failure);
            }
        }
        // Nothing was written, and a failure ordering stronger than the success one is
        // valid.
        assert_eq!(
            word.compare_exchange(4, 6, Ordering::Relaxed, Ordering::SeqCst),
            Err(5)
        );
        assert_eq!(
            word.compare_exchange(5, 6, Ordering::Release, Ordering::Acquire),
            Ok(5)
        );
        assert_eq!(word.load(Ordering::Relaxed), 6);
    });
}
