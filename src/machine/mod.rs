//! The machine-level operations of the hit path: the crate's one module with `unsafe` code.
//!
//! The keyed table's slot is a 16-byte word (`fingerprint << 64 | state`) read with one
//! 16-byte atomic load and written with one 16-byte compare-and-swap. The word is this
//! module's own cell, [`AtomicU128`] (16 bytes, 16-byte aligned, both asserted at compile
//! time), touched only by this module's operations; and all the words of a process are
//! touched by one protocol, chosen once by [`fast_path`] before any word is accessed, never
//! changed:
//!
//! * **Inline** (x86-64, a CPU with `cmpxchg16b`): the compare-and-swap is
//!   `lock cmpxchg16b`; the load is `vmovdqa` (an aligned 16-byte load) where the CPU has
//!   AVX and its vendor documents that load as atomic (see [`vmovdqa_is_documented`]),
//!   else `lock cmpxchg16b` of 0 with 0. Both inline: no call, so the hit path keeps its
//!   values in registers. (portable-atomic has the same instructions, but on a baseline
//!   x86-64 build reaches them through a function pointer on every operation, a call the
//!   compiler cannot see through, which spills the caller's registers around it.)
//! * **portable-atomic** (an x86-64 CPU without `cmpxchg16b`, `TOLLGATE_ATOMICS=portable`,
//!   and every other target): portable-atomic's `AtomicU128` over the same cell, for every
//!   access. What that runs is portable-atomic's choice: lock-free instructions where it
//!   can (on aarch64 chosen at run time, by its outline-atomics dispatch, between `casp`
//!   and `ldxp`/`stxp`, unless built for LSE), a lock of its own otherwise (32-bit targets;
//!   an x86-64 CPU without `cmpxchg16b`; any x86-64 CPU when portable-atomic is built with
//!   `--cfg portable_atomic_no_outline_atomics` and without the `cmpxchg16b` target feature).
//!
//! Why one protocol: portable-atomic's lock-based word takes a lock of its own, then
//! reads and writes the 16 bytes in halves; a `lock cmpxchg16b` takes no such lock, so the
//! two on one word would lose updates and tear loads. Because the cell is this module's,
//! and the process's choice is made (by a compare-and-swap on one byte, so that threads
//! racing to make it agree) before any operation on any word, no word ever sees both.
//!
//! A decision asks [`fast_path`] once (one load of the cached byte and a predictable
//! branch) and hands its answer, a [`HitPath`] proof, to each operation of its hit path:
//! with it, [`AtomicU128::load_fast`] and [`AtomicU128::compare_exchange_fast`] are the
//! inline instructions on x86-64 and portable-atomic's operations elsewhere. `None` (x86-64
//! on portable-atomic's protocol) sends a decision to the table's slow path, whose
//! [`AtomicU128::load`] and [`AtomicU128::compare_exchange`] call portable-atomic out of
//! line.
//!
//! **Orderings.** Every path runs the one check of `crate::ordering` ([`check_load_order`],
//! [`check_failure_order`]) before anything else: a load
//! with `Release` or `AcqRel`, or a compare-and-swap failing with one of those, panics with
//! the standard library's message, the same on every path and in the loom models'
//! stand-in. (A failure ordering stronger than the success one is accepted, as the
//! standard library accepts it.) portable-atomic honours the ordering it is given. The
//! inline instructions honour every valid ordering, `SeqCst` included:
//! `lock cmpxchg16b`, whether it stores or not, is a locked instruction, a full barrier;
//! the `lock cmpxchg16b` load is the same instruction; a `vmovdqa` load is a plain load,
//! which x86-64 never reorders with a later load or store (so it acquires), and which is a
//! valid `SeqCst` load because every `SeqCst` store of the program is a locked
//! instruction: every store to these words is a `lock cmpxchg16b`, and LLVM compiles every
//! other `SeqCst` store as `xchg` (x86-64's mapping puts the fence a sequentially
//! consistent access needs in its stores, none in its loads). Neither asm block is marked
//! `nomem` or `readonly`: the compiler treats each as touching memory, so it moves no load
//! or store across it.
//!
//! The tests run every path on words of its own against a portable-atomic reference (same
//! results, every ordering, under threads), and the ordering check on each;
//! `scripts/test targets` runs them again with `--cfg portable_atomic_no_outline_atomics`,
//! where portable-atomic's word is lock-based. Loom models never see this type: they swap
//! in a stand-in through `crate::sync` (what it cannot check is argued there). The README's
//! "Where the unsafe code is" says the same for users.

use crate::ordering::{check_failure_order, check_load_order};
use std::cell::UnsafeCell;
use std::sync::atomic::Ordering;

/// Whether this build has the inline instructions (x86-64, not under Miri, which cannot
/// run inline assembly).
const INLINE: bool = cfg!(all(target_arch = "x86_64", not(miri)));

/// A 16-byte atomic word, 16-byte aligned: this module's own cell, which only its
/// operations touch, all the words of a process by one protocol (see the module docs).
#[repr(C, align(16))]
pub(crate) struct AtomicU128 {
    word: UnsafeCell<u128>,
}

const _: () = {
    use std::mem::{align_of, size_of};
    // The inline instructions need 16 bytes at a 16-byte aligned address
    // (`lock cmpxchg16b` and `vmovdqa` fault on any other).
    assert!(size_of::<AtomicU128>() == 16 && align_of::<AtomicU128>() == 16);
    // portable-atomic's view of the cell (`AtomicU128::portable`) covers the same 16
    // bytes and needs no more alignment than the cell has.
    assert!(size_of::<portable_atomic::AtomicU128>() == 16);
    assert!(align_of::<portable_atomic::AtomicU128>() <= align_of::<AtomicU128>());
};

// SAFETY: threads sharing an `AtomicU128` reach the cell only through its `&self`
// methods, and every one of them accesses it atomically: by the inline instructions
// (`lock cmpxchg16b`, or a `vmovdqa` load its vendor documents as atomic), or through
// portable-atomic's `AtomicU128`, itself `Sync`. The words of a process see one protocol
// (the module docs), so no two kinds of access race on one word. `new` writes the value
// before any reference exists, and nothing hands out a `&mut u128`.
unsafe impl Sync for AtomicU128 {}

/// As the standard library's and portable-atomic's atomics are: an operation that
/// panics (an invalid ordering) does so before touching the word, and every completed
/// operation leaves a whole word, so a caught panic cannot expose a broken one. (An
/// `UnsafeCell` alone is not `RefUnwindSafe`; the limiters holding these words were, and
/// stay so.)
impl std::panic::RefUnwindSafe for AtomicU128 {}

impl std::fmt::Debug for AtomicU128 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AtomicU128")
            .field(&self.load(Ordering::SeqCst))
            .finish()
    }
}

impl AtomicU128 {
    /// A word holding `v`.
    pub(crate) const fn new(v: u128) -> Self {
        AtomicU128 {
            word: UnsafeCell::new(v),
        }
    }

    /// Whether the word's operations are lock-free here: the inline instructions are,
    /// wherever [`fast_path`] chose them; otherwise portable-atomic's answer (false where
    /// it takes a lock of its own).
    pub(crate) fn is_lock_free() -> bool {
        (INLINE && fast_path().is_some()) || portable_atomic::AtomicU128::is_lock_free()
    }

    /// The word, read atomically: by the process's protocol ([`fast_path`]). For the
    /// cold paths; the hit path asks once per decision and calls
    /// [`load_fast`](Self::load_fast).
    #[inline]
    pub(crate) fn load(&self, order: Ordering) -> u128 {
        match fast_path() {
            Some(proof) => self.load_fast(proof, order),
            // SAFETY: `fast_path` answers `None` only on x86-64 when the process's
            // protocol is portable-atomic's, cached for good before any word was
            // accessed: every access to this word is portable-atomic's.
            None => unsafe { self.slow_load(order) },
        }
    }

    /// Stores `new` if the word holds `current`; returns the word it held (`Ok` when
    /// that was `current`, so the store happened; `Err` with the word otherwise). By the
    /// process's protocol, as [`load`](Self::load).
    #[inline]
    pub(crate) fn compare_exchange(
        &self,
        current: u128,
        new: u128,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u128, u128> {
        match fast_path() {
            Some(proof) => self.compare_exchange_fast(proof, current, new, success, failure),
            // SAFETY: as in `load`: every access to this word is portable-atomic's.
            None => unsafe { self.slow_compare_exchange(current, new, success, failure) },
        }
    }

    /// The word, read with no check of the protocol, for a caller holding the proof
    /// [`fast_path`] gave: on x86-64 an inline instruction (`vmovdqa` where the proof
    /// says so, else `lock cmpxchg16b` of 0 with 0, which writes nothing it did not
    /// read), elsewhere portable-atomic's load.
    #[inline(always)]
    pub(crate) fn load_fast(&self, proof: HitPath, order: Ordering) -> u128 {
        check_load_order(order);
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            let word = self.word.get();
            if proof.vmovdqa {
                // SAFETY: `word` points at this cell: live for `&self`'s lifetime, valid
                // for reads, 16-byte aligned (`repr(align(16))`, asserted at compile
                // time). A `HitPath` with `vmovdqa` is made only from the process's cached
                // answer `VMOVDQA` (or by a test, for words it uses on that path alone),
                // which `answer` gives only on a CPU with `cmpxchg16b`, AVX that the OS
                // saves, and a vendor that documents the aligned 16-byte load as atomic.
                // The answer never changes once cached, so every access to this word is
                // one of this module's atomic instructions, none portable-atomic's.
                unsafe { x86::load(word) }
            } else {
                // SAFETY: as above (the cell is also valid for writes); a `HitPath` is made
                // only from a cached answer `VMOVDQA` or `CX16` (or by a test, as above),
                // both given only on a CPU with `cmpxchg16b`, and every access to this
                // word is one of this module's instructions.
                unsafe { x86::cmpxchg16b(word, 0, 0).0 }
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        {
            let _ = proof;
            // SAFETY: this build has no inline instructions: portable-atomic's operations
            // are the only ones any word sees.
            unsafe { self.portable() }.load(order)
        }
    }

    /// [`compare_exchange`](Self::compare_exchange) with no check of the protocol, for a
    /// caller holding the proof (see [`load_fast`](Self::load_fast)): on x86-64 the
    /// inline `lock cmpxchg16b`, elsewhere portable-atomic's.
    #[inline(always)]
    pub(crate) fn compare_exchange_fast(
        &self,
        proof: HitPath,
        current: u128,
        new: u128,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u128, u128> {
        check_failure_order(failure);
        let _ = proof;
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            let _ = success;
            // SAFETY: as in `load_fast`: a live, 16-byte aligned cell, valid for reads
            // and writes; a `HitPath` exists only where the CPU has `cmpxchg16b` and every
            // access to this word is one of this module's instructions.
            let (prev, swapped) = unsafe { x86::cmpxchg16b(self.word.get(), current, new) };
            if swapped {
                Ok(prev)
            } else {
                Err(prev)
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        {
            // SAFETY: as in `load_fast`: portable-atomic's are the only operations here.
            unsafe { self.portable() }.compare_exchange(current, new, success, failure)
        }
    }

    /// portable-atomic's load, out of line so that callers stay small.
    ///
    /// # Safety
    /// As [`portable`](Self::portable): every access to this word is portable-atomic's.
    #[cold]
    #[inline(never)]
    unsafe fn slow_load(&self, order: Ordering) -> u128 {
        check_load_order(order);
        // SAFETY: the caller's contract.
        unsafe { self.portable() }.load(order)
    }

    /// portable-atomic's compare-and-swap, out of line.
    ///
    /// # Safety
    /// As [`portable`](Self::portable): every access to this word is portable-atomic's.
    #[cold]
    #[inline(never)]
    unsafe fn slow_compare_exchange(
        &self,
        current: u128,
        new: u128,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u128, u128> {
        check_failure_order(failure);
        // SAFETY: the caller's contract.
        unsafe { self.portable() }.compare_exchange(current, new, success, failure)
    }

    /// portable-atomic's `AtomicU128` over this cell.
    ///
    /// # Safety
    /// Every access to this word in its life is portable-atomic's, none by this module's
    /// inline instructions: in the crate because the process's protocol is
    /// portable-atomic's (see the module docs); in the tests because the word is used on
    /// that path alone.
    #[inline(always)]
    unsafe fn portable(&self) -> &portable_atomic::AtomicU128 {
        // SAFETY: `from_ptr`'s conditions. The pointer is 16-byte aligned, all that
        // portable-atomic's `AtomicU128` needs (asserted at compile time), and valid for
        // reads and writes for `&self`'s lifetime (an `UnsafeCell` inside `self`, which
        // nothing moves or frees while it is borrowed). The value is never accessed
        // non-atomically while shared (`new` writes it by value, before any reference
        // exists). And, lock-free or not, every other access to these 16 bytes is
        // portable-atomic's, of the same size (the caller's contract): none is mixed-size
        // or of another protocol.
        unsafe { portable_atomic::AtomicU128::from_ptr(self.word.get()) }
    }
}

/// The proof that the process's protocol lets a decision run the operations of its hit
/// path without asking again, and which load: made only by [`fast_path`], so a caller
/// holding one may use [`AtomicU128::load_fast`] and
/// [`AtomicU128::compare_exchange_fast`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct HitPath {
    /// Loads are `vmovdqa` (else `lock cmpxchg16b`). Read on x86-64 only.
    #[cfg_attr(not(all(target_arch = "x86_64", not(miri))), allow(dead_code))]
    vmovdqa: bool,
}

/// `Some` where a decision's 16-byte operations may run with the proof: on x86-64 where
/// the process's protocol is the inline instructions (a CPU with `cmpxchg16b`, see
/// [`answer`]); on every other target always, where the proof's operations are
/// portable-atomic's (which may dispatch at run time themselves: on aarch64 between
/// `casp` and `ldxp`/`stxp`). `None` (an x86-64 CPU without `cmpxchg16b`, or
/// `TOLLGATE_ATOMICS=portable`) sends a decision to the slow path, whose operations are
/// portable-atomic's. Asked before any operation on any word, and the same answer for
/// the life of the process.
#[inline(always)]
pub(crate) fn fast_path() -> Option<HitPath> {
    if !INLINE {
        return Some(HitPath { vmovdqa: false });
    }
    match CPU.load(Ordering::Relaxed) {
        VMOVDQA => Some(HitPath { vmovdqa: true }),
        CX16 => Some(HitPath { vmovdqa: false }),
        PORTABLE => None,
        _ => detect(),
    }
}

/// The process's protocol, one byte read on every decision: unknown until the first,
/// then set once, by [`detect`], for good.
static CPU: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(UNKNOWN);
const UNKNOWN: u8 = 0;
/// Inline: `vmovdqa` loads, `lock cmpxchg16b`.
const VMOVDQA: u8 = 1;
/// Inline: `lock cmpxchg16b` for both.
const CX16: u8 = 2;
/// portable-atomic's operations for every word.
const PORTABLE: u8 = 3;

/// Chooses the process's protocol: asks the CPU (and the environment) once, and caches
/// the answer in [`CPU`].
///
/// `TOLLGATE_ATOMICS=portable` in the environment at the first decision makes a process
/// use portable-atomic alone, and `TOLLGATE_ATOMICS=cmpxchg16b` the `lock cmpxchg16b` load
/// where `vmovdqa` would run: to compare them, or to rule the assembly out.
#[cold]
#[inline(never)]
fn detect() -> Option<HitPath> {
    let mine = answer(std::env::var_os("TOLLGATE_ATOMICS").as_deref(), cpu());
    // The first answer cached is the process's: a thread that lost the race takes it, so
    // all words see one protocol even if the environment changed between two threads'
    // readings. Relaxed: the byte publishes nothing but itself, and it is written once.
    let chosen = match CPU.compare_exchange(UNKNOWN, mine, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => mine,
        Err(first) => first,
    };
    match chosen {
        VMOVDQA => Some(HitPath { vmovdqa: true }),
        CX16 => Some(HitPath { vmovdqa: false }),
        _ => None,
    }
}

/// What [`answer`] needs to know of the CPU.
#[derive(Clone, Copy, Debug)]
struct Cpu {
    cmpxchg16b: bool,
    /// AVX, with the OS saving its registers.
    avx: bool,
    /// `cpuid` leaf 0's vendor string.
    vendor: [u8; 12],
}

/// The protocol [`detect`] caches, given the environment variable's value.
fn answer(asked: Option<&std::ffi::OsStr>, cpu: Cpu) -> u8 {
    match asked.and_then(|a| a.to_str()) {
        Some("portable") => PORTABLE,
        _ if !cpu.cmpxchg16b => PORTABLE,
        Some("cmpxchg16b") => CX16,
        _ if cpu.avx && vmovdqa_is_documented(&cpu.vendor) => VMOVDQA,
        _ => CX16,
    }
}

/// Whether the CPU's vendor documents an aligned 16-byte `vmovdqa` as atomic on its CPUs
/// with AVX: Intel (`GenuineIntel`) and AMD (`AuthenticAMD`) in their manuals, Zhaoxin
/// (`  Shanghai  `) to GCC (bug 104688). Any other vendor, VIA and the Zhaoxin CPUs that
/// report `CentaurHauls` as VIA's do among them, loads with `lock cmpxchg16b`, atomic on
/// every CPU that has it.
fn vmovdqa_is_documented(vendor: &[u8; 12]) -> bool {
    matches!(vendor, b"GenuineIntel" | b"AuthenticAMD" | b"  Shanghai  ")
}

/// The CPU: std's detection reads `cpuid` and, for AVX, XCR0 (that the OS saves the
/// registers); the vendor is `cpuid` leaf 0's.
#[cfg(all(target_arch = "x86_64", not(miri)))]
fn cpu() -> Cpu {
    Cpu {
        cmpxchg16b: std::arch::is_x86_feature_detected!("cmpxchg16b"),
        avx: std::arch::is_x86_feature_detected!("avx"),
        vendor: x86::vendor(),
    }
}

/// No inline instructions in this build: nothing to detect.
#[cfg(not(all(target_arch = "x86_64", not(miri))))]
fn cpu() -> Cpu {
    Cpu {
        cmpxchg16b: false,
        avx: false,
        vendor: [0; 12],
    }
}

/// Tables whose slots take more than this (4 MiB) are advised onto huge pages.
pub(crate) const HUGE_PAGE_BYTES: usize = 4 << 20;

/// The huge page size the advice aims at (x86-64's and aarch64's usual 2 MiB).
const HUGE_PAGE: usize = 2 << 20;

/// Four slots on one 64-byte cache line: the keyed table's unit of memory, so that a
/// group of 12 slots is three whole lines.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct Line<T>(pub(crate) [T; 4]);

impl<T> Line<T> {
    /// The slots of `lines` as one slice, in order: slot `i` is `lines[i / 4].0[i % 4]`.
    /// Indexing it costs one bounds check and a shift (`lines[i / 4].0[i % 4]` costs a
    /// shift, a bounds check, two more shifts, a mask and two adds: the compiler does
    /// not see that the address is `i × 16` either way), on every slot a lookup reads.
    #[inline(always)]
    pub(crate) fn flat(lines: &[Line<T>]) -> &[T] {
        const {
            assert!(std::mem::size_of::<Line<T>>() == 4 * std::mem::size_of::<T>());
        }
        // SAFETY: `Line<T>` is `repr(C)` around `[T; 4]`, which sits at offset 0, and
        // (asserted above, at compile time) has no padding after it, so a `[Line<T>]`
        // of `n` lines is, in memory, exactly a `[T]` of `4 × n` elements in order,
        // each properly aligned for `T`. The slice borrows `lines` for its lifetime,
        // so nothing may move or free them meanwhile, and it grants no access the
        // lines' own references would not (shared references to the same `T`s).
        unsafe { std::slice::from_raw_parts(lines.as_ptr().cast::<T>(), lines.len() * 4) }
    }
}

/// Asks the OS to back the whole 2 MiB pages inside `spare` (a vector's reserved,
/// not yet written capacity) with transparent huge pages, before the table's first
/// write touches them: a lookup in a table of tens of megabytes then costs one TLB entry
/// per 2 MiB instead of per 4 KiB. Only for buffers over [`HUGE_PAGE_BYTES`]; returns
/// whether the advice was taken. Silent where the OS has no such advice, refuses it
/// (transparent huge pages `never`), or `TOLLGATE_HUGE_PAGES=0` is set: the table then
/// lives on ordinary pages, as before.
pub(crate) fn advise_huge_pages<T>(spare: &mut [std::mem::MaybeUninit<T>]) -> bool {
    let bytes = std::mem::size_of_val(spare);
    if bytes <= HUGE_PAGE_BYTES || std::env::var_os("TOLLGATE_HUGE_PAGES").is_some_and(|v| v == "0")
    {
        return false;
    }
    let start = spare.as_mut_ptr() as usize;
    // The whole huge pages inside the buffer (the advice applies to whole pages).
    let first = start.next_multiple_of(HUGE_PAGE);
    let end = (start + bytes) / HUGE_PAGE * HUGE_PAGE;
    if end <= first {
        return false;
    }
    advise(first, end - first)
}

#[cfg(all(target_os = "linux", not(miri)))]
fn advise(addr: usize, len: usize) -> bool {
    // SAFETY: `[addr, addr + len)` lies inside memory this process owns (a vector's
    // reserved capacity, page-aligned at both ends by the caller), and MADV_HUGEPAGE
    // changes how the kernel backs those pages, never their contents or their mapping:
    // no Rust value is read, written or invalidated by it.
    unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_HUGEPAGE) == 0 }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn advise(_addr: usize, _len: usize) -> bool {
    false
}

/// Asks the CPU to bring the cache lines holding `*r` (one, or two when it straddles a
/// line boundary) into its caches, without waiting for them: a lookup that knows where
/// it will read and write before it gets there (the sliding log's slot, whose second
/// half a locked instruction would otherwise wait for, and its ring, whose position
/// sits in a slot still being loaded; the packed table's second group, whose slot a
/// lookup reads after the first group's) then pays the misses side by side instead of
/// one after another. A hint only: nothing is read that the program sees, and a line never
/// used costs its bandwidth, nothing else. A no-op off x86-64.
#[inline(always)]
pub(crate) fn prefetch<T>(r: &T) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        let first = (r as *const T).cast::<i8>();
        line(first);
        // A value no larger than its alignment (which divides 64) never straddles.
        let size = std::mem::size_of::<T>();
        if size > std::mem::align_of::<T>() {
            let last = first.wrapping_add(size - 1);
            if (first as usize) / 64 != (last as usize) / 64 {
                line(last);
            }
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = r;
}

/// `prefetcht0` of the line holding `p`, a byte of a live value.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[inline(always)]
fn line(p: *const i8) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: `p` points into a value a caller holds a reference to, so into memory this
    // process has mapped; a prefetch never faults, reads nothing into the program's values
    // and writes nothing (SSE, which issues it, is part of the x86-64 baseline). Rust 1.80
    // declares the intrinsic `unsafe`, later ones safe: hence the allow.
    #[allow(unused_unsafe)]
    unsafe {
        _mm_prefetch::<_MM_HINT_T0>(p)
    }
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
mod x86 {
    use std::arch::asm;

    /// `cpuid` leaf 0's vendor string (`GenuineIntel`, `AuthenticAMD`, ...).
    pub(super) fn vendor() -> [u8; 12] {
        // SAFETY: every x86-64 CPU has `cpuid`, and leaf 0 (the highest leaf and the
        // vendor) on every CPU that has it; it reads and writes registers only. Rust 1.80
        // declares the intrinsic `unsafe`, later ones safe: hence the allow.
        #[allow(unused_unsafe)]
        let leaf = unsafe { std::arch::x86_64::__cpuid(0) };
        let mut v = [0; 12];
        v[..4].copy_from_slice(&leaf.ebx.to_le_bytes());
        v[4..8].copy_from_slice(&leaf.edx.to_le_bytes());
        v[8..].copy_from_slice(&leaf.ecx.to_le_bytes());
        v
    }

    /// One aligned 16-byte load (`vmovdqa`), split into the two halves.
    ///
    /// # Safety
    /// `src` is valid for reads and 16-byte aligned; every concurrent access to it is one
    /// of this module's instructions; the CPU has AVX, and its vendor documents the load
    /// as atomic (else it may tear).
    #[inline(always)]
    pub(super) unsafe fn load(src: *mut u128) -> u128 {
        let (lo, hi): (u64, u64);
        // SAFETY: the caller's contract. `vmovdqa` faults on a misaligned address, never
        // reads past the 16 bytes, and writes only the named registers. `vpextrq` and
        // `vmovq` are AVX encodings, available by the same contract.
        unsafe {
            asm!(
                "vmovdqa {tmp}, xmmword ptr [{src}]",
                "vmovq {lo}, {tmp}",
                "vpextrq {hi}, {tmp}, 1",
                src = in(reg) src,
                tmp = out(xmm_reg) _,
                lo = lateout(reg) lo,
                hi = lateout(reg) hi,
                options(nostack, preserves_flags),
            );
        }
        (u128::from(hi) << 64) | u128::from(lo)
    }

    /// `lock cmpxchg16b`: stores `new` if `*dst == old`. Returns the word `*dst` held and
    /// whether the store happened.
    ///
    /// # Safety
    /// `dst` is valid for reads and writes and 16-byte aligned; every concurrent access to
    /// it is one of this module's instructions (a lock-based protocol beside them would
    /// not see this one); the CPU has `cmpxchg16b`.
    #[inline(always)]
    pub(super) unsafe fn cmpxchg16b(dst: *mut u128, old: u128, new: u128) -> (u128, bool) {
        let (prev_lo, prev_hi): (u64, u64);
        let failed: u8;
        // SAFETY: the caller's contract. The instruction compares rdx:rax with the 16
        // bytes at `dst`; if equal it stores rcx:rbx there (ZF set), else loads them into
        // rdx:rax (ZF clear): rdx:rax is the word held either way. rbx is reserved by
        // LLVM, so the new low half travels in r8 and is swapped into rbx around the
        // instruction, rbx restored after. The address is pinned to r9: a `reg` operand
        // could be given rbx, which the `xchg` overwrites before the instruction reads it.
        // Flags are modified (no `preserves_flags`).
        unsafe {
            asm!(
                "xchg r8, rbx",
                "lock cmpxchg16b xmmword ptr [r9]",
                "setne {failed}",
                "mov rbx, r8",
                in("r9") dst,
                failed = lateout(reg_byte) failed,
                inout("r8") new as u64 => _,
                in("rcx") (new >> 64) as u64,
                inout("rax") old as u64 => prev_lo,
                inout("rdx") (old >> 64) as u64 => prev_hi,
                options(nostack),
            );
        }
        (
            (u128::from(prev_hi) << 64) | u128::from(prev_lo),
            failed == 0,
        )
    }
}

#[cfg(test)]
mod tests;
