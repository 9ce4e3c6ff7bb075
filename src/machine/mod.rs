//! The machine-level operations of the hit path: the crate's one module with `unsafe` code.
//!
//! The keyed table's slot is a 16-byte word (`fingerprint << 64 | state`) read with one
//! 16-byte atomic load and written with one 16-byte compare-and-swap. portable-atomic
//! provides both on every target, but on x86-64 built for the baseline CPU it chooses the
//! instruction at run time through a function pointer on *every* operation: a call the
//! compiler cannot see through, which spills the caller's registers around it (about 30
//! instructions of a 250-instruction decision). Here the choice is made once per process:
//!
//! * [`fast_path`] asks the CPU once (`cpuid`, cached in a static byte) whether it has
//!   `cmpxchg16b`, and AVX; every later call is one load of that byte and a predictable
//!   branch. A decision asks once and hands the answer, a [`Fast`] proof, to each
//!   operation of its hit path.
//! * With the proof, [`AtomicU128::load_fast`] is `vmovdqa` (an aligned 16-byte load,
//!   which Intel, AMD and Zhaoxin document as atomic on every CPU with AVX; LLVM and
//!   Boost rely on it too), or `lock cmpxchg16b` of 0 with 0 on a CPU without AVX, and
//!   [`AtomicU128::compare_exchange_fast`] is `lock cmpxchg16b`, all inline: no call,
//!   so the hit path keeps its values in registers.
//! * Without it (an x86-64 CPU without `cmpxchg16b`) a decision takes the table's slow
//!   path, whose operations ([`AtomicU128::load`], [`AtomicU128::compare_exchange`])
//!   call portable-atomic's out of line. On other targets portable-atomic's operations
//!   are inline already, and are what the proof's methods run.
//!
//! Both instructions are sequentially consistent on x86-64 (a locked instruction is a
//! full barrier; a load is never reordered with older stores to the same location nor
//! with younger loads), so every `Ordering` the callers pass is honoured. Neither asm
//! block is marked `nomem` or `readonly`: the compiler treats each as touching memory, so
//! it moves no load or store across it.
//!
//! The tests below run each inline path and portable-atomic side by side on the same
//! words (same results, every ordering, under threads); loom models never see this type (they
//! swap in their own through `crate::sync`). The README's "Where the unsafe code is"
//! says the same for users.

use std::sync::atomic::Ordering;

/// A 16-byte atomic word, 16-byte aligned: portable-atomic's, with the load and the
/// compare-and-swap inlined as `vmovdqa` / `lock cmpxchg16b` where [`fast`] says the
/// CPU has them.
#[repr(transparent)]
#[derive(Debug, Default)]
pub(crate) struct AtomicU128(portable_atomic::AtomicU128);

impl AtomicU128 {
    /// A word holding `v`.
    pub(crate) const fn new(v: u128) -> Self {
        AtomicU128(portable_atomic::AtomicU128::new(v))
    }

    /// Whether the word's operations are lock-free here.
    pub(crate) fn is_lock_free() -> bool {
        // Wherever the inline instructions run, portable-atomic's are lock-free too.
        portable_atomic::AtomicU128::is_lock_free()
    }

    /// The word, read atomically: the inline instruction where [`fast_path`] allows,
    /// else portable-atomic's (out of line). For the cold paths; the hit path checks once
    /// per decision and calls [`load_fast`](Self::load_fast).
    #[inline]
    pub(crate) fn load(&self, order: Ordering) -> u128 {
        match fast_path() {
            Some(proof) => self.load_fast(proof, order),
            None => self.slow_load(order),
        }
    }

    /// Stores `new` if the word holds `current`; returns the word it held (`Ok` when
    /// that was `current`, so the store happened; `Err` with the word otherwise). Chooses
    /// its instruction as [`load`](Self::load) does.
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
            None => self.slow_compare_exchange(current, new, success, failure),
        }
    }

    /// The word, read by an inline instruction (`vmovdqa` on a CPU with AVX, else
    /// `lock cmpxchg16b` of 0 with 0, which writes nothing it did not read): no check and
    /// no call, for a caller that holds the proof [`fast_path`] gave.
    #[inline(always)]
    pub(crate) fn load_fast(&self, proof: Fast, order: Ordering) -> u128 {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            let _ = order;
            let word = self.0.as_ptr();
            if proof.avx {
                // SAFETY: `word` points at this word, live for `&self`'s lifetime and
                // 16-byte aligned (portable-atomic's `AtomicU128` is `align(16)`); every
                // access to it is atomic (this module's instructions, or portable-atomic's,
                // which are `lock cmpxchg16b` on this CPU); and a `Fast` with `avx` is made
                // only by `fast_path` on a CPU where `detect` found AVX (whose aligned
                // 16-byte loads are atomic) and `cmpxchg16b`.
                unsafe { x86::load(word) }
            } else {
                // SAFETY: as above (the word is also valid for writes: an `AtomicU128`);
                // a `Fast` is made only on a CPU where `detect` found `cmpxchg16b`.
                unsafe { x86::cmpxchg16b(word, 0, 0).0 }
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        {
            let _ = proof;
            self.0.load(order)
        }
    }

    /// [`compare_exchange`](Self::compare_exchange) by the inline `lock cmpxchg16b`, with
    /// no check and no call (see [`load_fast`](Self::load_fast)).
    #[inline(always)]
    pub(crate) fn compare_exchange_fast(
        &self,
        proof: Fast,
        current: u128,
        new: u128,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u128, u128> {
        let _ = proof;
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            let _ = (success, failure);
            // SAFETY: as in `load_fast`: a live, 16-byte aligned word only ever accessed
            // atomically; a `Fast` exists only on a CPU where `detect` found `cmpxchg16b`.
            let (prev, swapped) = unsafe { x86::cmpxchg16b(self.0.as_ptr(), current, new) };
            if swapped {
                Ok(prev)
            } else {
                Err(prev)
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        self.0.compare_exchange(current, new, success, failure)
    }

    /// portable-atomic's load, out of line so that callers stay small.
    #[cold]
    #[inline(never)]
    fn slow_load(&self, order: Ordering) -> u128 {
        self.0.load(order)
    }

    /// portable-atomic's compare-and-swap, out of line.
    #[cold]
    #[inline(never)]
    fn slow_compare_exchange(
        &self,
        current: u128,
        new: u128,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u128, u128> {
        self.0.compare_exchange(current, new, success, failure)
    }

    /// portable-atomic's operations alone, whatever the CPU: the tests' reference.
    #[cfg(test)]
    fn portable(&self) -> &portable_atomic::AtomicU128 {
        &self.0
    }
}

/// The proof that the inline operations run here, and which load: made only by
/// [`fast_path`], so a caller holding one may use [`AtomicU128::load_fast`] and
/// [`AtomicU128::compare_exchange_fast`] without checking again.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fast {
    /// The CPU has AVX: loads are `vmovdqa` (else `lock cmpxchg16b`).
    avx: bool,
}

/// `Some` where a decision's 16-byte operations may be inline: on x86-64 a CPU with
/// `cmpxchg16b` (see [`Cpu`]); on every other target always (portable-atomic's
/// operations there are already inline instructions, with no run-time dispatch).
/// `None` (an x86-64 CPU without `cmpxchg16b`, or `TOLLGATE_ATOMICS=portable`) sends a
/// decision to the slow path, whose operations go through portable-atomic.
#[inline(always)]
pub(crate) fn fast_path() -> Option<Fast> {
    if !cfg!(all(target_arch = "x86_64", not(miri))) {
        return Some(Fast { avx: false });
    }
    match CPU.load(Ordering::Relaxed) {
        AVX => Some(Fast { avx: true }),
        CX16 => Some(Fast { avx: false }),
        PORTABLE => None,
        _ => detect(),
    }
}

/// What [`detect`] found, one byte read on every decision: unknown until the first.
static CPU: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(UNKNOWN);
const UNKNOWN: u8 = 0;
/// `cmpxchg16b` and AVX (the OS saving AVX state): `vmovdqa` loads, `lock cmpxchg16b`.
const AVX: u8 = 1;
/// `cmpxchg16b` without AVX: `lock cmpxchg16b` for both.
const CX16: u8 = 2;
/// Neither (or asked for): portable-atomic's operations.
const PORTABLE: u8 = 3;

/// Asks the CPU (and the environment) once, and caches the answer in [`CPU`].
///
/// `TOLLGATE_ATOMICS=portable` in the environment at the first decision makes a process
/// use portable-atomic alone, and `TOLLGATE_ATOMICS=cmpxchg16b` the `lock cmpxchg16b` load
/// on a CPU with AVX: to compare them, or to rule the assembly out.
#[cold]
#[inline(never)]
fn detect() -> Option<Fast> {
    let cpu = answer(std::env::var_os("TOLLGATE_ATOMICS").as_deref());
    CPU.store(cpu, Ordering::Relaxed);
    match cpu {
        AVX => Some(Fast { avx: true }),
        CX16 => Some(Fast { avx: false }),
        _ => None,
    }
}

/// What [`detect`] caches, given the environment variable's value.
fn answer(asked: Option<&std::ffi::OsStr>) -> u8 {
    let (cx16, avx) = cpu_features();
    match asked.and_then(|a| a.to_str()) {
        Some("portable") => PORTABLE,
        _ if !cx16 => PORTABLE,
        Some("cmpxchg16b") => CX16,
        _ if avx => AVX,
        _ => CX16,
    }
}

/// `(cmpxchg16b, avx)`: std's detection reads `cpuid` and, for AVX, XCR0 (that the OS
/// saves the registers).
#[cfg(all(target_arch = "x86_64", not(miri)))]
fn cpu_features() -> (bool, bool) {
    (
        std::arch::is_x86_feature_detected!("cmpxchg16b"),
        std::arch::is_x86_feature_detected!("avx"),
    )
}

#[cfg(not(all(target_arch = "x86_64", not(miri))))]
fn cpu_features() -> (bool, bool) {
    (false, false)
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

    /// One aligned 16-byte load (`vmovdqa`), split into the two halves.
    ///
    /// # Safety
    /// `src` is valid for reads, 16-byte aligned, accessed by no non-atomic write
    /// concurrently, and the CPU has AVX.
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
    /// `dst` is valid for reads and writes, 16-byte aligned, accessed by no non-atomic
    /// operation concurrently, and the CPU has `cmpxchg16b`.
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
