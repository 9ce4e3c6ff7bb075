//! The machine module's tests: each inline path against portable-atomic, and the
//! CPU and environment answers.

use super::*;
use std::sync::Arc;

const ORDERS: [Ordering; 5] = [
    Ordering::Relaxed,
    Ordering::Acquire,
    Ordering::Release,
    Ordering::AcqRel,
    Ordering::SeqCst,
];

fn failure_order(o: Ordering) -> Ordering {
    match o {
        Ordering::Release | Ordering::Relaxed => Ordering::Relaxed,
        Ordering::AcqRel | Ordering::Acquire => Ordering::Acquire,
        _ => Ordering::SeqCst,
    }
}

fn load_order(o: Ordering) -> Ordering {
    match o {
        Ordering::Release | Ordering::AcqRel => Ordering::Acquire,
        o => o,
    }
}

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

/// Every inline path this CPU can run (the `vmovdqa` load where it has AVX, the
/// `lock cmpxchg16b` load wherever it has `cmpxchg16b`).
fn proofs() -> Vec<Fast> {
    let (cx16, avx) = cpu_features();
    let mut v = Vec::new();
    if !cfg!(all(target_arch = "x86_64", not(miri))) || cx16 {
        v.push(Fast { avx: false });
    }
    if avx && cx16 {
        v.push(Fast { avx: true });
    }
    v
}

#[test]
fn the_cpu_here_takes_the_inline_path_when_it_has_the_features() {
    // On this project's machines (x86-64 with AVX) the assembly is what runs: a
    // broken detection must not be silently the slow path.
    let (cx16, avx) = cpu_features();
    assert_eq!(
        answer(None),
        if !cx16 {
            PORTABLE
        } else if avx {
            AVX
        } else {
            CX16
        }
    );
    if cfg!(target_arch = "x86_64") && std::env::var_os("TOLLGATE_ATOMICS").is_none() {
        assert_eq!(fast_path().is_some(), cx16);
        assert_eq!(fast_path().is_some_and(|f| f.avx), cx16 && avx);
    }
    assert!(AtomicU128::is_lock_free() || !cfg!(target_arch = "x86_64"));
}

#[test]
fn the_environment_chooses_the_path_without_outdoing_the_cpu() {
    // Asked afresh with the variable's value: the process's environment and its
    // cached answer are left alone, so other tests are not disturbed.
    let (cx16, _) = cpu_features();
    assert_eq!(answer(Some("portable".as_ref())), PORTABLE);
    assert_eq!(
        answer(Some("cmpxchg16b".as_ref())),
        if cx16 { CX16 } else { PORTABLE }
    );
    assert_eq!(answer(Some("anything".as_ref())), answer(None));
}

#[test]
fn the_assembly_and_portable_atomic_agree_on_every_word_and_ordering() {
    let proofs = proofs();
    assert!(!proofs.is_empty() || !cfg!(target_arch = "x86_64"));
    for proof in proofs {
        for &a in &words() {
            for &b in &words()[..8] {
                for order in ORDERS {
                    let f = failure_order(order);
                    let ours = AtomicU128::new(a);
                    let theirs = portable_atomic::AtomicU128::new(a);
                    let lo = load_order(order);
                    assert_eq!(ours.load_fast(proof, lo), theirs.load(lo), "{proof:?}");
                    assert_eq!(ours.load_fast(proof, lo), a, "a load wrote");
                    // A compare-and-swap that fails, then one that succeeds.
                    let wrong = !a;
                    assert_eq!(
                        ours.compare_exchange_fast(proof, wrong, b, order, f),
                        theirs.compare_exchange(wrong, b, order, f),
                        "failing CAS of {a:#x}"
                    );
                    assert_eq!(
                        ours.portable().load(Ordering::SeqCst),
                        a,
                        "a failed CAS wrote"
                    );
                    assert_eq!(
                        ours.compare_exchange_fast(proof, a, b, order, f),
                        theirs.compare_exchange(a, b, order, f),
                        "CAS {a:#x} -> {b:#x}"
                    );
                    // The assembly's store is what portable-atomic reads, and back.
                    assert_eq!(ours.portable().load(Ordering::SeqCst), b);
                    ours.portable().store(a, Ordering::SeqCst);
                    assert_eq!(ours.load_fast(proof, Ordering::Acquire), a);
                    // The dispatching and the out-of-line paths alike.
                    assert_eq!(ours.load(lo), a);
                    assert_eq!(ours.slow_load(lo), a);
                    assert_eq!(ours.slow_compare_exchange(wrong, b, order, f), Err(a));
                    assert_eq!(ours.compare_exchange(wrong, b, order, f), Err(a));
                    assert_eq!(ours.slow_compare_exchange(a, b, order, f), Ok(a));
                    assert_eq!(ours.compare_exchange(b, a, order, f), Ok(b));
                }
            }
        }
    }
}

#[test]
fn loads_are_never_torn_and_no_update_is_lost_under_threads() {
    // Two writers bump both halves of one word together (lo == hi always) with
    // compare-and-swap loops, one inline and one through portable-atomic; a reader
    // checks that every load it makes is whole. Each writer's increments all land.
    const PER_WRITER: u64 = 50_000;
    for proof in proofs() {
        let word = Arc::new(AtomicU128::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (word, stop) = (word.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut loads = 0u64;
                // At least a few thousand loads, however the threads are scheduled.
                while !stop.load(Ordering::Relaxed) || loads < 5_000 {
                    let w = word.load_fast(proof, Ordering::Acquire);
                    assert_eq!(w as u64, (w >> 64) as u64, "torn load {w:#x}");
                    loads += 1;
                }
            })
        };
        let writers: Vec<_> = (0..2)
            .map(|t| {
                let word = word.clone();
                std::thread::spawn(move || {
                    for _ in 0..PER_WRITER {
                        let mut cur = word.load_fast(proof, Ordering::Acquire);
                        loop {
                            let n = (cur as u64).wrapping_add(1);
                            let next = (u128::from(n) << 64) | u128::from(n);
                            let (s, f) = (Ordering::AcqRel, Ordering::Acquire);
                            let r = if t == 0 {
                                word.compare_exchange_fast(proof, cur, next, s, f)
                            } else {
                                word.portable().compare_exchange(cur, next, s, f)
                            };
                            match r {
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
        let w = word.load(Ordering::SeqCst);
        assert_eq!(w as u64, 2 * PER_WRITER, "{proof:?}");
        assert_eq!((w >> 64) as u64, 2 * PER_WRITER, "{proof:?}");
    }
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
