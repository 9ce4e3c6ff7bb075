//! The machine module's tests: every path (each inline load, portable-atomic's
//! operations) on words of its own against a portable-atomic reference, the ordering check
//! on each, and the CPU and environment answers.
//!
//! No word here is ever touched by two paths: that is the module's rule, and under
//! `--cfg portable_atomic_no_outline_atomics` (`scripts/test targets`) portable-atomic's
//! word is lock-based, so two paths on one word would lose updates and tear loads.

use super::*;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

const ORDERS: [Ordering; 5] = [
    Ordering::Relaxed,
    Ordering::Acquire,
    Ordering::Release,
    Ordering::AcqRel,
    Ordering::SeqCst,
];

const LOAD_ORDERS: [Ordering; 3] = [Ordering::Relaxed, Ordering::Acquire, Ordering::SeqCst];

/// Words that tell the halves apart and cross every byte boundary.
fn words() -> Vec<u128> {
    let mut v = vec![0, 1, u128::MAX, 1 << 64, (1 << 64) - 1, u128::MAX << 64];
    let mut x: u128 = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210;
    for _ in 0..64 {
        x = x.rotate_left(13) ^ (x >> 7) ^ 0x9e37_79b9_7f4a_7c15;
        v.push(x);
    }
    v
}

/// One way to operate on a word: each test word is used by one path alone.
#[derive(Clone, Copy, Debug)]
enum Path {
    /// The proof's operations (the inline instructions on x86-64).
    HitPath(HitPath),
    /// portable-atomic's operations (the slow path's).
    Portable,
    /// The dispatching operations, by the process's protocol.
    Process,
}

impl Path {
    fn load(self, w: &AtomicU128, order: Ordering) -> u128 {
        match self {
            Path::HitPath(proof) => w.load_fast(proof, order),
            // SAFETY: a word given to `Path::Portable` is used on this path alone.
            Path::Portable => unsafe { w.slow_load(order) },
            Path::Process => w.load(order),
        }
    }

    fn cas(
        self,
        w: &AtomicU128,
        current: u128,
        new: u128,
        s: Ordering,
        f: Ordering,
    ) -> Result<u128, u128> {
        match self {
            Path::HitPath(proof) => w.compare_exchange_fast(proof, current, new, s, f),
            // SAFETY: as in `load`.
            Path::Portable => unsafe { w.slow_compare_exchange(current, new, s, f) },
            Path::Process => w.compare_exchange(current, new, s, f),
        }
    }
}

/// Every path this machine can run: the inline loads its CPU allows (`vmovdqa` where its
/// vendor documents it), portable-atomic's, and the process's.
fn paths() -> Vec<Path> {
    let cpu = cpu();
    let mut v = vec![Path::Portable, Path::Process];
    if !INLINE || cpu.cmpxchg16b {
        v.push(Path::HitPath(HitPath { vmovdqa: false }));
    }
    if answer(None, cpu) == VMOVDQA {
        v.push(Path::HitPath(HitPath { vmovdqa: true }));
    }
    v
}

#[test]
fn the_cpu_here_takes_the_inline_path_when_it_has_the_features() {
    // On this project's machines (x86-64 with AVX, Intel or AMD) the assembly is what
    // runs: a broken detection must not be silently the slow path.
    let cpu = cpu();
    let documented = vmovdqa_is_documented(&cpu.vendor);
    assert_eq!(
        answer(None, cpu),
        if !cpu.cmpxchg16b {
            PORTABLE
        } else if cpu.avx && documented {
            VMOVDQA
        } else {
            CX16
        }
    );
    if INLINE {
        assert!(
            cpu.vendor
                .iter()
                .all(|b| b.is_ascii_graphic() || *b == b' '),
            "{:?}",
            cpu.vendor
        );
    }
    if INLINE && std::env::var_os("TOLLGATE_ATOMICS").is_none() {
        assert_eq!(fast_path().is_some(), cpu.cmpxchg16b);
        assert_eq!(
            fast_path().is_some_and(|f| f.vmovdqa),
            cpu.cmpxchg16b && cpu.avx && documented
        );
    }
    // The inline instructions are lock-free wherever they run, whatever portable-atomic
    // was built as; elsewhere portable-atomic's answer is the word's.
    if INLINE && fast_path().is_some() {
        assert!(AtomicU128::is_lock_free());
    } else {
        assert_eq!(
            AtomicU128::is_lock_free(),
            portable_atomic::AtomicU128::is_lock_free()
        );
    }
}

/// Built with `--cfg portable_atomic_no_outline_atomics` (`scripts/test targets`),
/// portable-atomic's word on x86-64 is lock-based: this module's tests run there are the
/// ones in which two protocols on one word would lose updates and tear loads. The inline
/// words stay lock-free.
#[test]
#[cfg(all(
    portable_atomic_no_outline_atomics,
    target_arch = "x86_64",
    not(target_feature = "cmpxchg16b")
))]
fn without_outline_atomics_portable_atomic_takes_a_lock() {
    assert!(!portable_atomic::AtomicU128::is_lock_free());
    assert_eq!(AtomicU128::is_lock_free(), fast_path().is_some());
}

#[test]
fn vmovdqa_loads_only_where_the_vendor_documents_them() {
    let cpu = |vendor: &[u8; 12], avx| Cpu {
        cmpxchg16b: true,
        avx,
        vendor: *vendor,
    };
    for vendor in [b"GenuineIntel", b"AuthenticAMD", b"  Shanghai  "] {
        assert_eq!(answer(None, cpu(vendor, true)), VMOVDQA);
        assert_eq!(answer(None, cpu(vendor, false)), CX16);
    }
    // VIA (and Zhaoxin parts reporting VIA's string), Hygon, anything else: atomic loads
    // by `lock cmpxchg16b`, AVX or not.
    for vendor in [b"CentaurHauls", b"HygonGenuine", b"VIA VIA VIA ", &[0; 12]] {
        assert_eq!(answer(None, cpu(vendor, true)), CX16, "{vendor:?}");
    }
}

#[test]
fn the_environment_chooses_the_path_without_outdoing_the_cpu() {
    // Asked afresh with the variable's value: the process's environment and its
    // cached answer are left alone, so other tests are not disturbed.
    let cpu = cpu();
    assert_eq!(answer(Some("portable".as_ref()), cpu), PORTABLE);
    assert_eq!(
        answer(Some("cmpxchg16b".as_ref()), cpu),
        if cpu.cmpxchg16b { CX16 } else { PORTABLE }
    );
    assert_eq!(answer(Some("anything".as_ref()), cpu), answer(None, cpu));
}

#[test]
fn every_path_agrees_with_portable_atomic_on_every_word_and_ordering() {
    for path in paths() {
        for &a in &words() {
            for &b in &words()[..8] {
                for order in ORDERS {
                    for failure in LOAD_ORDERS {
                        // A word of this path's own, and a reference word of its own.
                        let ours = AtomicU128::new(a);
                        let theirs = portable_atomic::AtomicU128::new(a);
                        for lo in LOAD_ORDERS {
                            assert_eq!(path.load(&ours, lo), theirs.load(lo), "{path:?}");
                        }
                        assert_eq!(path.load(&ours, order_for_load(order)), a, "a load wrote");
                        // A compare-and-swap that fails, then one that succeeds.
                        let wrong = !a;
                        assert_eq!(
                            path.cas(&ours, wrong, b, order, failure),
                            theirs.compare_exchange(wrong, b, order, failure),
                            "{path:?}: failing CAS of {a:#x}"
                        );
                        assert_eq!(path.load(&ours, Ordering::SeqCst), a, "a failed CAS wrote");
                        assert_eq!(
                            path.cas(&ours, a, b, order, failure),
                            theirs.compare_exchange(a, b, order, failure),
                            "{path:?}: CAS {a:#x} -> {b:#x}"
                        );
                        assert_eq!(path.load(&ours, Ordering::Acquire), b);
                        assert_eq!(path.cas(&ours, b, a, order, failure), Ok(b));
                        assert_eq!(path.load(&ours, Ordering::Relaxed), a);
                    }
                }
            }
        }
    }
}

fn order_for_load(o: Ordering) -> Ordering {
    match o {
        Ordering::Release | Ordering::AcqRel => Ordering::Acquire,
        o => o,
    }
}

#[test]
fn loads_are_never_torn_and_no_update_is_lost_under_threads() {
    // Two writers bump both halves of one word together (lo == hi always) with
    // compare-and-swap loops; a reader checks that every load it makes is whole. Each
    // writer's increments all land. All three use one path on a word of that path's own.
    const PER_WRITER: u64 = 50_000;
    for path in paths() {
        let word = Arc::new(AtomicU128::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (word, stop) = (word.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut loads = 0u64;
                // At least a few thousand loads, however the threads are scheduled.
                while !stop.load(Ordering::Relaxed) || loads < 5_000 {
                    let w = path.load(&word, Ordering::Acquire);
                    assert_eq!(w as u64, (w >> 64) as u64, "{path:?}: torn load {w:#x}");
                    loads += 1;
                }
            })
        };
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let word = word.clone();
                std::thread::spawn(move || {
                    for _ in 0..PER_WRITER {
                        let mut cur = path.load(&word, Ordering::Acquire);
                        loop {
                            let n = (cur as u64).wrapping_add(1);
                            let next = (u128::from(n) << 64) | u128::from(n);
                            match path.cas(&word, cur, next, Ordering::AcqRel, Ordering::Acquire) {
                                Ok(_) => break,
                                Err(actual) => cur = actual,
                            }
                        }
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        reader.join().unwrap();
        let w = path.load(&word, Ordering::SeqCst);
        assert_eq!(w as u64, 2 * PER_WRITER, "{path:?}");
        assert_eq!((w >> 64) as u64, 2 * PER_WRITER, "{path:?}");
    }
}

/// The message `f` panicked with.
fn panic_message(f: impl FnOnce()) -> String {
    let payload = catch_unwind(AssertUnwindSafe(f)).expect_err("an invalid ordering was accepted");
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => p.downcast::<&str>().map(|s| s.to_string()).unwrap(),
    }
}

#[test]
fn an_invalid_ordering_panics_alike_on_every_path() {
    // The standard library's messages, read from its own atomics (the ordering through
    // `black_box`, which a constant invalid ordering's lint would refuse).
    let std_word = std::sync::atomic::AtomicU64::new(0);
    let bad = |o| std::hint::black_box(o);
    for invalid in [Ordering::Release, Ordering::AcqRel] {
        let load = panic_message(|| {
            std_word.load(bad(invalid));
        });
        let failure = panic_message(|| {
            let _ = std_word.compare_exchange(0, 1, Ordering::SeqCst, bad(invalid));
        });
        for path in paths() {
            let w = AtomicU128::new(5);
            assert_eq!(
                panic_message(|| {
                    let _ = path.load(&w, bad(invalid));
                }),
                load,
                "{path:?}"
            );
            for success in ORDERS {
                assert_eq!(
                    panic_message(|| {
                        let _ = path.cas(&w, 5, 6, success, bad(invalid));
                    }),
                    failure,
                    "{path:?}"
                );
            }
            // Nothing was written, and the word still works.
            assert_eq!(path.load(&w, Ordering::SeqCst), 5);
        }
    }
    // A failure ordering stronger than the success one is valid, on every path as in std.
    for path in paths() {
        let w = AtomicU128::new(5);
        assert_eq!(
            path.cas(&w, 4, 6, Ordering::Relaxed, Ordering::SeqCst),
            Err(5)
        );
        assert_eq!(
            path.cas(&w, 5, 6, Ordering::Release, Ordering::Acquire),
            Ok(5)
        );
        assert_eq!(path.load(&w, Ordering::Relaxed), 6);
    }
    assert!(std_word
        .compare_exchange(0, 1, Ordering::Relaxed, Ordering::SeqCst)
        .is_ok());
}

#[test]
fn the_word_is_its_own_aligned_cell_and_keeps_the_limiters_unwind_safe() {
    assert_eq!(std::mem::size_of::<AtomicU128>(), 16);
    assert_eq!(std::mem::align_of::<AtomicU128>(), 16);
    let words: Vec<AtomicU128> = (0..9).map(AtomicU128::new).collect();
    assert!(words.iter().all(|w| w as *const _ as usize % 16 == 0));
    fn shared<T: Send + Sync + std::panic::RefUnwindSafe + std::panic::UnwindSafe>() {}
    shared::<AtomicU128>();
}

/// `Line::flat` is the lines' slots in order: the same elements (by address and by
/// value) as indexing the lines, as many, each 16 bytes after the one before, and a
/// line 64-byte aligned.
#[test]
fn a_flat_view_is_the_lines_slots_in_order() {
    let lines: Vec<Line<AtomicU128>> = (0..5u128)
        .map(|l| Line(std::array::from_fn(|s| AtomicU128::new(l * 4 + s as u128))))
        .collect();
    let flat = Line::flat(&lines);
    assert_eq!(flat.len(), 20);
    for (i, slot) in flat.iter().enumerate() {
        assert!(std::ptr::eq(slot, &lines[i / 4].0[i % 4]), "slot {i}");
        assert_eq!(slot.load(Ordering::Relaxed), i as u128);
    }
    assert_eq!(lines.as_ptr() as usize % 64, 0);
    assert!(Line::flat(&lines[..0]).is_empty());
}

/// A prefetch has no effect a program can see: on a value in one line, on one that may
/// straddle two, on a large one and on a zero-sized one (whose address points at
/// nothing), it returns and changes nothing.
#[test]
fn prefetch_changes_nothing() {
    let words = [7u64; 16];
    let bytes = [3u8; 200];
    // Ten bytes at an offset of 60 in some runs' alignment cross a line boundary.
    let straddling: &[u8; 10] = bytes[60..70].try_into().unwrap();
    super::prefetch(&words[3]);
    super::prefetch(&words);
    super::prefetch(&bytes);
    super::prefetch(straddling);
    super::prefetch(&());
    assert_eq!(words, [7u64; 16]);
    assert!(bytes.iter().all(|&b| b == 3));
}
