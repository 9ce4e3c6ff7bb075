//! The one check of the memory orderings a 16-byte word's operations take, shared by every
//! path that operates on such a word (`machine`'s inline instructions and its
//! portable-atomic operations, and `sync`'s loom stand-in), so that an invalid ordering
//! fails the same way whichever path runs. It lives below both, so that neither imports
//! the other for it.

use std::sync::atomic::Ordering;

/// The one check of a 16-byte word's load ordering, run first by every path
/// (`machine`'s inline instructions and its portable-atomic operations, and the loom
/// stand-in): `Release` and `AcqRel` panic with the standard library's own message, the
/// same whichever path runs. Inlined, a constant ordering costs nothing.
#[inline(always)]
#[track_caller]
pub(crate) fn check_load_order(order: Ordering) {
    match order {
        Ordering::Release => invalid_order("there is no such thing as a release load"),
        Ordering::AcqRel => invalid_order("there is no such thing as an acquire-release load"),
        _ => {}
    }
}

/// The one check of a 16-byte compare-and-swap's failure ordering (see
/// [`check_load_order`]): a failure is a load, so `Release` and `AcqRel` panic with the
/// standard library's message. Any success ordering is valid, and a failure ordering
/// stronger than the success one is accepted, as the standard library accepts it.
#[inline(always)]
#[track_caller]
pub(crate) fn check_failure_order(failure: Ordering) {
    match failure {
        Ordering::Release => invalid_order("there is no such thing as a release failure ordering"),
        Ordering::AcqRel => {
            invalid_order("there is no such thing as an acquire-release failure ordering")
        }
        _ => {}
    }
}

/// The panic of an invalid ordering, out of line.
#[cold]
#[inline(never)]
#[track_caller]
fn invalid_order(message: &'static str) -> ! {
    panic!("{message}")
}
