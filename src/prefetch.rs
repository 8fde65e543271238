//! A software prefetch: start loading a value's cache line now, so that a
//! later read of it (or a lock taken on it) finds it in cache. Used where a
//! query knows several addresses before it needs any of them, so that their
//! cache misses overlap instead of following one another. And
//! [`written_zeros`], the empty slot array of a table that grows by
//! rehashing, with its pages mapped up front.

#![allow(unsafe_code)]

/// Ask the CPU to bring the cache line holding `value`'s first byte into
/// every cache level. A hint: no effect on the program's result, and a
/// no-op on targets without the instruction.
#[inline(always)]
pub fn prefetch<T: ?Sized>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 CPU has (it
        // is in the target's baseline features). PREFETCHT0 reads no data
        // into a register, never faults (whatever the address), and is not
        // a memory access in the memory model: it cannot race, and it
        // changes nothing the program can observe but timing. The address
        // comes from a live reference anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Lines [`prefetch_slice`] asks for at most: the start of a long slice;
/// the hardware prefetcher follows a sequential read from there.
const SLICE_LINES: usize = 16;

/// Prefetch the first cache lines of `values` (one element every 64 bytes,
/// at most `SLICE_LINES` of them: 1 KiB).
#[inline]
pub fn prefetch_slice<T>(values: &[T]) {
    let step = (64 / std::mem::size_of::<T>().max(1)).max(1);
    for v in values.iter().step_by(step).take(SLICE_LINES) {
        prefetch(v);
    }
}

/// `n` zeros, every page written: the new slot array of an open-addressing
/// table that rehashes into it (`lsh::table`, `engine::counts`). A rehash
/// reads a slot before it writes it; `vec![0; n]` hands over pages the
/// kernel has not mapped, so that first read maps the shared zero page and
/// the store after it copies the page, flushing the TLB of every core the
/// process runs on (an inter-processor interrupt a page, costly in a VM:
/// 7% of a 1M restore's samples, 4% of a saturated ingest's with document
/// frequency counted; docs/benchmarks.md, stop 69). Written first, each
/// page takes one plain fault. `black_box` hides the zero from the
/// compiler, so the fill is not turned back into a zeroed (lazily mapped)
/// allocation.
pub fn written_zeros(n: usize) -> Vec<u64> {
    let mut v = Vec::with_capacity(n);
    v.resize(n, std::hint::black_box(0u64));
    v
}
