//! [`sort_network`]: a bitonic sorting network in vector registers, for
//! AVX-512 F (16 lanes a register, up to 16 registers) and AVX2 (8 lanes,
//! up to 16 registers), their cross-register stages written once over
//! [`Lanes`]. The argument for the networks and their safety is at
//! [`sort_network`].
#![allow(unsafe_code)]

use super::{has_avx2, has_avx512f};

/// Longest slice [`sort_network`] sorts with AVX-512: 16 registers of 16
/// lanes.
pub(crate) const NETWORK_MAX: usize = 256;

/// Longest slice [`sort_network`] sorts with AVX2: 16 registers of 8 lanes
/// (all 16 of AVX2's registers).
pub(crate) const NETWORK_MAX_AVX2: usize = 128;

/// The longest slice [`sort_network`] sorts on the running CPU:
/// [`NETWORK_MAX`] with AVX-512 F, [`NETWORK_MAX_AVX2`] with AVX2, else 0.
#[inline]
pub(crate) fn network_max() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512f() {
            return NETWORK_MAX;
        }
        if has_avx2() {
            return NETWORK_MAX_AVX2;
        }
    }
    0
}

/// Sort `v` with a bitonic sorting network in vector registers and return
/// true: up to [`NETWORK_MAX`] values if the running CPU has AVX-512 F,
/// else up to [`NETWORK_MAX_AVX2`] if it has AVX2; otherwise leave `v` and
/// return false (the caller sorts another way).
///
/// **Why.** A document's shingle hashes are sorted before they are
/// deduplicated and stored. On 122 uniform hashes, each vector sorted once,
/// the bucket sort of `shingle.rs` takes ~370 ns (clearing and summing
/// bucket counts, a branch per value) and this network ~170 ns with
/// AVX-512; on 25 (a short document), `sort_unstable` ~90 ns and the
/// network ~35; on 200, ~610 against ~385 (one thread, this Zen 4 machine).
/// A network has no data-dependent branch, so no input is slower than
/// another: the values are padded with `u32::MAX` to the next power of two
/// ≥ one register (so the padding sorts last and is cut off), loaded into
/// 1–16 registers, and every compare-exchange of the bitonic sort is a lane
/// permute, an unsigned min, an unsigned max and a blend (within a
/// register) or a min and a max (between two registers). The AVX2 network
/// is the same with 8 lanes a register (for CPUs without AVX-512, such as
/// AMD's Zen 2 and 3).
///
/// **Only the registers that hold values.** The AVX-512 network loads and
/// sorts `⌈n/16⌉` registers (`LIVE`); the bitonic levels are those of the
/// next power of two (`R`), whose other registers are the padding
/// constant, so every compare-exchange against them (`min(x, MAX) = x`)
/// folds away at compile time: 129 values take 9 registers' work, not
/// 16's. And every loop over registers is written out (`unroll16!`), so
/// the registers stay registers: LLVM had left the loops of 8 and 16
/// registers rolled, the array on the stack between the levels. Articles
/// (~100–160 shingles, 38% over 128), `sign_bench`'s sort + dedup on this
/// Zen 4, 3 alternating runs: 267 ns → 245 (live registers, in sixteenths
/// and eighths) → 197 (written out) → 189 (live registers in sixteenths);
/// signing 643k → 670k docs/s.
///
/// **Safety.** Each `#[target_feature]` function is called only after
/// `is_x86_feature_detected!` found its feature on the running CPU, and
/// only with as many values as its registers hold; its memory accesses
/// are loads and stores of `v`'s own elements (AVX-512: masked, and LLVM's
/// masked loads and stores do not touch masked-off lanes; AVX2: whole
/// registers inside `v`, the last partial one through a local copy).
/// Tests hold each network equal to `sort_unstable` for every length it
/// takes and on random slices with repeats and `u32::MAX`.
#[inline]
pub(crate) fn sort_network(v: &mut [u32]) -> bool {
    sort_avx512(v) || sort_avx2(v)
}

/// [`sort_network`]'s AVX-512 network, if the CPU has AVX-512 F and `v`
/// fits; false (and `v` untouched) otherwise.
#[inline]
fn sort_avx512(v: &mut [u32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if v.len() <= NETWORK_MAX && has_avx512f() {
        // SAFETY: `has_avx512f` found the feature; `v.len() <= NETWORK_MAX`,
        // and each arm's 16·R lanes cover `v`.
        unsafe {
            match v.len() {
                0..=16 => bitonic_avx512::<1, 1>(v),
                17..=32 => bitonic_avx512::<2, 2>(v),
                33..=48 => bitonic_avx512::<4, 3>(v),
                49..=64 => bitonic_avx512::<4, 4>(v),
                65..=80 => bitonic_avx512::<8, 5>(v),
                81..=96 => bitonic_avx512::<8, 6>(v),
                97..=112 => bitonic_avx512::<8, 7>(v),
                113..=128 => bitonic_avx512::<8, 8>(v),
                129..=144 => bitonic_avx512::<16, 9>(v),
                145..=160 => bitonic_avx512::<16, 10>(v),
                161..=176 => bitonic_avx512::<16, 11>(v),
                177..=192 => bitonic_avx512::<16, 12>(v),
                193..=208 => bitonic_avx512::<16, 13>(v),
                209..=224 => bitonic_avx512::<16, 14>(v),
                225..=240 => bitonic_avx512::<16, 15>(v),
                _ => bitonic_avx512::<16, 16>(v),
            }
        }
        return true;
    }
    let _ = v;
    false
}

/// [`sort_network`]'s AVX2 network, if the CPU has AVX2 and `v` fits;
/// false (and `v` untouched) otherwise.
#[inline]
fn sort_avx2(v: &mut [u32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if v.len() <= NETWORK_MAX_AVX2 && has_avx2() {
        // SAFETY: `has_avx2` found the feature; `v.len() <= NETWORK_MAX_AVX2`,
        // and each arm's 8·R lanes cover `v`.
        unsafe {
            match v.len() {
                0..=8 => bitonic_avx2::<1>(v),
                9..=16 => bitonic_avx2::<2>(v),
                17..=32 => bitonic_avx2::<4>(v),
                33..=64 => bitonic_avx2::<8>(v),
                _ => bitonic_avx2::<16>(v),
            }
        }
        return true;
    }
    let _ = v;
    false
}

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::__m512i;

/// One compare-exchange stage inside a register: lane `l` meets lane
/// `l ^ M`; the lanes in `UPPER` keep the larger value, the others the
/// smaller. (The helpers below are `unsafe fn`s inlined into
/// [`bitonic_avx512`], so that the whole network compiles to straight-line
/// code in registers; a `#[target_feature]` helper is not inlined reliably.
/// Safety: call only where AVX-512 F is enabled.)
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn lane_stage<const M: i32, const UPPER: u16>(x: __m512i) -> __m512i {
    use std::arch::x86_64::{
        _mm512_mask_blend_epi32, _mm512_max_epu32, _mm512_min_epu32, _mm512_permutexvar_epi32,
        _mm512_set1_epi32, _mm512_setr_epi32, _mm512_xor_si512,
    };
    // SAFETY: the caller runs with AVX-512 F enabled.
    unsafe {
        let iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        let p = _mm512_permutexvar_epi32(_mm512_xor_si512(iota, _mm512_set1_epi32(M)), x);
        _mm512_mask_blend_epi32(UPPER, _mm512_min_epu32(x, p), _mm512_max_epu32(x, p))
    }
}

/// Lanes with bit 0, 1, 2 or 3 of their index set.
const B1: u16 = 0xaaaa;
const B2: u16 = 0xcccc;
const B4: u16 = 0xf0f0;
const B8: u16 = 0xff00;

/// The 16 lanes of `x` sorted ascending: the bitonic sort in its "compare
/// with the reversed other half" form, so every stage sorts ascending (10
/// stages of a permute, a min, a max and a blend). Safety: as `lane_stage`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn sort16(x: __m512i) -> __m512i {
    // SAFETY: as the caller's.
    unsafe {
        let x = lane_stage::<1, B1>(x);
        let x = lane_stage::<3, B2>(x);
        let x = lane_stage::<1, B1>(x);
        let x = lane_stage::<7, B4>(x);
        let x = lane_stage::<2, B2>(x);
        let x = lane_stage::<1, B1>(x);
        merge16_from::<15>(x)
    }
}

/// The last merge of 16 lanes: the halves met at partner mask `FIRST`
/// (15: against the reversed other half; 8: a bitonic register), then the
/// half-cleaners at 4, 2 and 1. Safety: as `lane_stage`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn merge16_from<const FIRST: i32>(x: __m512i) -> __m512i {
    // SAFETY: as the caller's.
    unsafe {
        let x = lane_stage::<FIRST, B8>(x);
        let x = lane_stage::<4, B4>(x);
        let x = lane_stage::<2, B2>(x);
        lane_stage::<1, B1>(x)
    }
}

/// Lanes in reverse order. Safety: as `lane_stage`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn reverse16(x: __m512i) -> __m512i {
    use std::arch::x86_64::{_mm512_permutexvar_epi32, _mm512_setr_epi32};
    // SAFETY: as the caller's.
    unsafe {
        _mm512_permutexvar_epi32(
            _mm512_setr_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
            x,
        )
    }
}

/// A vector register of `u32` lanes that the network sorts in: `__m512i`
/// (16 lanes, AVX-512 F) or `__m256i` (8 lanes, AVX2). The cross-register
/// part of the network ([`merge_halves`], [`merge_all`]) is written once
/// over it. Safety of every method: call only where the register's
/// instruction set is enabled.
#[cfg(target_arch = "x86_64")]
trait Lanes: Copy {
    /// Lane-wise unsigned minimum and maximum.
    unsafe fn min_max(self, other: Self) -> (Self, Self);
    /// The lanes in reverse order.
    unsafe fn reversed(self) -> Self;
    /// A bitonic register (an ascending run then a descending one, as
    /// [`merge_halves`] leaves them) sorted ascending.
    unsafe fn merged(self) -> Self;
}

#[cfg(target_arch = "x86_64")]
impl Lanes for __m512i {
    #[inline(always)]
    unsafe fn min_max(self, other: Self) -> (Self, Self) {
        use std::arch::x86_64::{_mm512_max_epu32, _mm512_min_epu32};
        // SAFETY: as the caller's.
        unsafe { (_mm512_min_epu32(self, other), _mm512_max_epu32(self, other)) }
    }
    #[inline(always)]
    unsafe fn reversed(self) -> Self {
        // SAFETY: as the caller's.
        unsafe { reverse16(self) }
    }
    #[inline(always)]
    unsafe fn merged(self) -> Self {
        // SAFETY: as the caller's.
        unsafe { merge16_from::<8>(self) }
    }
}

/// Lane-wise compare-exchange of registers `I` and `J` of `r`: `I` keeps
/// the smaller. Safety: as [`Lanes`]'s.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn exchange<V: Lanes, const I: usize, const J: usize, const R: usize>(r: &mut [V; R]) {
    // SAFETY: as the caller's.
    (r[I], r[J]) = unsafe { r[I].min_max(r[J]) };
}

/// Merge the sorted runs `r[..R/2]` and `r[R/2..]` of `R` registers (2,
/// 4, 8 or 16) into one: the second run reversed (register order and lanes),
/// then the half-cleaners across registers and inside each. Written out
/// stage by stage with constant indices, so that the registers stay
/// registers (loops over them were left rolled, the array in memory, and
/// the network took twice as long). Safety: as [`Lanes`]'s.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn merge_halves<V: Lanes, const R: usize>(r: &mut [V; R]) {
    // SAFETY (the whole body): as the caller's.
    unsafe {
        let h = R / 2;
        unroll16!(I => if I < h / 2 {
            r.swap(h + I, R - 1 - I);
        });
        unroll16!(I => if (h..R).contains(&I) {
            r[I] = r[I].reversed();
        });
        match R {
            2 => exchange::<V, 0, 1, R>(r),
            4 => {
                exchange::<V, 0, 2, R>(r);
                exchange::<V, 1, 3, R>(r);
                exchange::<V, 0, 1, R>(r);
                exchange::<V, 2, 3, R>(r);
            }
            8 => {
                exchange::<V, 0, 4, R>(r);
                exchange::<V, 1, 5, R>(r);
                exchange::<V, 2, 6, R>(r);
                exchange::<V, 3, 7, R>(r);
                exchange::<V, 0, 2, R>(r);
                exchange::<V, 1, 3, R>(r);
                exchange::<V, 4, 6, R>(r);
                exchange::<V, 5, 7, R>(r);
                exchange::<V, 0, 1, R>(r);
                exchange::<V, 2, 3, R>(r);
                exchange::<V, 4, 5, R>(r);
                exchange::<V, 6, 7, R>(r);
            }
            16 => {
                exchange::<V, 0, 8, R>(r);
                exchange::<V, 1, 9, R>(r);
                exchange::<V, 2, 10, R>(r);
                exchange::<V, 3, 11, R>(r);
                exchange::<V, 4, 12, R>(r);
                exchange::<V, 5, 13, R>(r);
                exchange::<V, 6, 14, R>(r);
                exchange::<V, 7, 15, R>(r);
                exchange::<V, 0, 4, R>(r);
                exchange::<V, 1, 5, R>(r);
                exchange::<V, 2, 6, R>(r);
                exchange::<V, 3, 7, R>(r);
                exchange::<V, 8, 12, R>(r);
                exchange::<V, 9, 13, R>(r);
                exchange::<V, 10, 14, R>(r);
                exchange::<V, 11, 15, R>(r);
                exchange::<V, 0, 2, R>(r);
                exchange::<V, 1, 3, R>(r);
                exchange::<V, 4, 6, R>(r);
                exchange::<V, 5, 7, R>(r);
                exchange::<V, 8, 10, R>(r);
                exchange::<V, 9, 11, R>(r);
                exchange::<V, 12, 14, R>(r);
                exchange::<V, 13, 15, R>(r);
                exchange::<V, 0, 1, R>(r);
                exchange::<V, 2, 3, R>(r);
                exchange::<V, 4, 5, R>(r);
                exchange::<V, 6, 7, R>(r);
                exchange::<V, 8, 9, R>(r);
                exchange::<V, 10, 11, R>(r);
                exchange::<V, 12, 13, R>(r);
                exchange::<V, 14, 15, R>(r);
            }
            _ => unreachable!("R is 2, 4, 8 or 16"),
        }
        unroll16!(I => if I < R {
            r[I] = r[I].merged();
        });
    }
}

/// `R` registers, each sorted, into one sorted run (`R` in 1, 2, 4, 8,
/// 16): neighbouring runs of 1, then 2, 4 and 8 registers merged, as many
/// levels as `R` has (the conditions fold for each `R`). Safety: as
/// [`Lanes`]'s.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn merge_all<V: Lanes, const R: usize>(r: &mut [V; R]) {
    // SAFETY (the whole body): as the caller's.
    unsafe {
        unroll16!(Q => if 2 * Q + 2 <= R {
            merge_halves::<V, 2>((&mut r[2 * Q..2 * Q + 2]).try_into().expect("2"));
        });
        unroll16!(Q => if 4 * Q + 4 <= R {
            merge_halves::<V, 4>((&mut r[4 * Q..4 * Q + 4]).try_into().expect("4"));
        });
        unroll16!(Q => if 8 * Q + 8 <= R {
            merge_halves::<V, 8>((&mut r[8 * Q..8 * Q + 8]).try_into().expect("8"));
        });
        if R >= 16 {
            merge_halves::<V, 16>(r.as_mut_slice().try_into().expect("16"));
        }
    }
}

/// The bitonic sort of [`sort_network`] on `R` registers (`R` in 1, 2, 4,
/// 8, 16), of which the first `LIVE` hold `v` (`v.len() <= 16·LIVE`) and
/// the others are padding that the compiler folds away.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn bitonic_avx512<const R: usize, const LIVE: usize>(v: &mut [u32]) {
    use std::arch::x86_64::{_mm512_mask_loadu_epi32, _mm512_mask_storeu_epi32, _mm512_set1_epi32};
    let n = v.len();
    debug_assert!(n <= 16 * LIVE && LIVE <= R);
    // Lanes of register `i` that hold values of `v`.
    let live = |i: usize| -> u16 {
        let k = n.saturating_sub(16 * i).min(16);
        ((1u32 << k) - 1) as u16
    };
    let pad = _mm512_set1_epi32(-1);
    let mut r = [pad; R];
    unroll16!(I => if I < LIVE {
        let m = live(I);
        if m != 0 {
            // SAFETY: the lanes set in `m` are elements 16·I.. of `v`.
            r[I] = unsafe { _mm512_mask_loadu_epi32(pad, m, v.as_ptr().add(16 * I).cast()) };
        }
        // SAFETY: AVX-512 F is enabled here.
        r[I] = unsafe { sort16(r[I]) };
    });
    // SAFETY: AVX-512 F is enabled here.
    unsafe { merge_all(&mut r) };
    unroll16!(I => if I < LIVE {
        let m = live(I);
        if m != 0 {
            // SAFETY: as the loads: only lanes inside `v` are written.
            unsafe { _mm512_mask_storeu_epi32(v.as_mut_ptr().add(16 * I).cast(), m, r[I]) };
        }
    });
}

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::__m256i;

/// [`lane_stage`] for 8 lanes (AVX2): lane `l` meets lane `l ^ M`; the
/// lanes in `UPPER` keep the larger value. Safety: call only where AVX2 is
/// enabled.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn lane_stage8<const M: i32, const UPPER: i32>(x: __m256i) -> __m256i {
    use std::arch::x86_64::{
        _mm256_blend_epi32, _mm256_max_epu32, _mm256_min_epu32, _mm256_permutevar8x32_epi32,
        _mm256_set1_epi32, _mm256_setr_epi32, _mm256_xor_si256,
    };
    // SAFETY: the caller runs with AVX2 enabled.
    unsafe {
        let iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let p = _mm256_permutevar8x32_epi32(x, _mm256_xor_si256(iota, _mm256_set1_epi32(M)));
        _mm256_blend_epi32::<UPPER>(_mm256_min_epu32(x, p), _mm256_max_epu32(x, p))
    }
}

/// Lanes with bit 0, 1 or 2 of their index set, of 8.
const C1: i32 = 0xaa;
const C2: i32 = 0xcc;
const C4: i32 = 0xf0;

/// The 8 lanes of `x` sorted ascending ([`sort16`]'s first six stages).
/// Safety: as `lane_stage8`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn sort8(x: __m256i) -> __m256i {
    // SAFETY: as the caller's.
    unsafe {
        let x = lane_stage8::<1, C1>(x);
        let x = lane_stage8::<3, C2>(x);
        let x = lane_stage8::<1, C1>(x);
        merge8_from::<7>(x)
    }
}

/// The last merge of 8 lanes, as [`merge16_from`]. Safety: as
/// `lane_stage8`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn merge8_from<const FIRST: i32>(x: __m256i) -> __m256i {
    // SAFETY: as the caller's.
    unsafe {
        let x = lane_stage8::<FIRST, C4>(x);
        let x = lane_stage8::<2, C2>(x);
        lane_stage8::<1, C1>(x)
    }
}

#[cfg(target_arch = "x86_64")]
impl Lanes for __m256i {
    #[inline(always)]
    unsafe fn min_max(self, other: Self) -> (Self, Self) {
        use std::arch::x86_64::{_mm256_max_epu32, _mm256_min_epu32};
        // SAFETY: as the caller's.
        unsafe { (_mm256_min_epu32(self, other), _mm256_max_epu32(self, other)) }
    }
    #[inline(always)]
    unsafe fn reversed(self) -> Self {
        use std::arch::x86_64::{_mm256_permutevar8x32_epi32, _mm256_setr_epi32};
        // SAFETY: as the caller's.
        unsafe { _mm256_permutevar8x32_epi32(self, _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0)) }
    }
    #[inline(always)]
    unsafe fn merged(self) -> Self {
        // SAFETY: as the caller's.
        unsafe { merge8_from::<4>(self) }
    }
}

/// The bitonic sort of [`sort_network`] on `R` AVX2 registers (`R` in 1,
/// 2, 4, 8, 16; `v.len() <= 8·R`). Whole registers are loaded from and
/// stored to `v`; the last partial one goes through an 8-lane copy padded
/// with `u32::MAX`, and registers past `v` are all padding.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn bitonic_avx2<const R: usize>(v: &mut [u32]) {
    use std::arch::x86_64::{_mm256_loadu_si256, _mm256_set1_epi32, _mm256_storeu_si256};
    let n = v.len();
    debug_assert!(n <= 8 * R);
    let whole = n / 8;
    let rest = n % 8;
    let mut tail = [u32::MAX; 8];
    tail[..rest].copy_from_slice(&v[8 * whole..]);
    let mut r = [_mm256_set1_epi32(-1); R];
    for (i, reg) in r.iter_mut().enumerate() {
        if i < whole {
            // SAFETY: lanes 8·i..8·i + 8 are inside `v` (i < n / 8).
            *reg = unsafe { _mm256_loadu_si256(v.as_ptr().add(8 * i).cast()) };
        } else if i == whole && rest > 0 {
            // SAFETY: `tail` has 8 lanes.
            *reg = unsafe { _mm256_loadu_si256(tail.as_ptr().cast()) };
        }
        // SAFETY: AVX2 is enabled here.
        *reg = unsafe { sort8(*reg) };
    }
    // SAFETY: AVX2 is enabled here.
    unsafe { merge_all(&mut r) };
    for (i, reg) in r.iter().enumerate().take(whole) {
        // SAFETY: as the loads: lanes 8·i..8·i + 8 are inside `v`.
        unsafe { _mm256_storeu_si256(v.as_mut_ptr().add(8 * i).cast(), *reg) };
    }
    if rest > 0 {
        // SAFETY: `tail` has 8 lanes; `whole < R` when `rest > 0`.
        unsafe { _mm256_storeu_si256(tail.as_mut_ptr().cast(), r[whole]) };
        v[8 * whole..].copy_from_slice(&tail[..rest]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Each network with the longest slice it takes; a network the CPU
    /// lacks returns false and leaves its input (checked below).
    type Sorter = fn(&mut [u32]) -> bool;
    const NETWORKS: [(&str, Sorter, usize); 3] = [
        ("avx512", sort_avx512, NETWORK_MAX),
        ("avx2", sort_avx2, NETWORK_MAX_AVX2),
        ("dispatch", sort_network, NETWORK_MAX),
    ];

    #[test]
    fn the_networks_sort_every_length_they_take() {
        let mut state = 11u64;
        for (name, sort, max) in NETWORKS {
            for n in 0..=max + 1 {
                for spread in [u32::MAX, 7] {
                    let v: Vec<u32> = (0..n)
                        .map(|_| {
                            let x = crate::minhash::splitmix64(&mut state) as u32;
                            if spread == u32::MAX {
                                x
                            } else {
                                x % spread
                            }
                        })
                        .collect();
                    let mut got = v.clone();
                    let mut want = v.clone();
                    want.sort_unstable();
                    if sort(&mut got) {
                        assert!(n <= max, "{name} took {n} values");
                        assert_eq!(got, want, "{name}, n = {n}");
                    } else {
                        assert_eq!(got, v, "{name} declined n = {n} but changed it");
                    }
                }
            }
        }
    }

    /// On x86-64 CPUs with AVX2 (every x86-64 CI machine so far), the
    /// AVX2 network runs: the tests above are not vacuous there even
    /// without AVX-512.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx2_network_runs_where_the_cpu_has_avx2() {
        let mut v = vec![3u32, 1, 2];
        assert_eq!(sort_avx2(&mut v), has_avx2());
        let mut long = vec![0u32; NETWORK_MAX_AVX2 + 1];
        assert!(!sort_avx2(&mut long));
    }

    proptest! {
        #[test]
        fn the_networks_equal_sort_unstable(
            mut v in proptest::collection::vec(
                prop_oneof![any::<u32>(), Just(u32::MAX), Just(0u32), 0u32..4],
                0..=NETWORK_MAX,
            ),
        ) {
            let mut want = v.clone();
            want.sort_unstable();
            let before = v.clone();
            for (name, sort, _) in NETWORKS {
                v.clone_from(&before);
                if sort(&mut v) {
                    prop_assert_eq!(&v, &want, "{}", name);
                } else {
                    prop_assert_eq!(&v, &before, "{}", name);
                }
            }
        }
    }
}
