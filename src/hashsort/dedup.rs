//! [`dedup_sorted`]: the removal of repeats from a sorted slice of hashes,
//! 16 values a step with AVX-512 F, else `Vec::dedup`.
#![allow(unsafe_code)]

#[cfg(target_arch = "x86_64")]
use super::has_avx512f;

/// Remove repeats from sorted `v` in place (what `Vec::dedup` does), with
/// AVX-512 F where the CPU has it: 16 values a step are compared with their
/// predecessors (the previous register's last lane shifted in), and the
/// ones unequal to theirs are packed to the front of the register
/// (`vpcompressd`, register form: its memory form is microcoded on Zen 4)
/// and stored at the output position. Else `Vec::dedup`. `sign_bench`, 2
/// alternating runs: sort + dedup 297–299 → 273–274 ns an article, and
/// 2,342–2,446 → 1,918–1,974 ns a man page (more repeats, on which
/// `Vec::dedup`'s branch mispredicts).
///
/// **Safety.** The `#[target_feature]` function is called only after
/// [`has_avx512f`] found the feature; its argument is at
/// [`dedup_avx512`].
#[inline]
pub(crate) fn dedup_sorted(v: &mut Vec<u32>) {
    #[cfg(target_arch = "x86_64")]
    if has_avx512f() {
        // SAFETY: `has_avx512f` found the feature on the running CPU.
        let n = unsafe { dedup_avx512(v) };
        v.truncate(n);
        return;
    }
    v.dedup();
}

/// [`dedup_sorted`]'s AVX-512 loop; returns how many values are kept
/// (at the front of `v`). Memory: whole-register loads at `i` with
/// `i + 16 <= v.len()`, then a masked load of the tail; the store of step
/// `i` goes to `out..out + 16` with `out <= i`, inside `v` and below the
/// next step's load, and the lanes past the kept ones are overwritten
/// later or cut off (the tail's store is masked to the kept lanes).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn dedup_avx512(v: &mut [u32]) -> usize {
    use std::arch::x86_64::{
        _mm512_alignr_epi32, _mm512_cmpneq_epi32_mask, _mm512_loadu_si512,
        _mm512_mask_storeu_epi32, _mm512_maskz_compress_epi32, _mm512_maskz_loadu_epi32,
        _mm512_setzero_si512, _mm512_storeu_si512,
    };
    let n = v.len();
    let p = v.as_mut_ptr();
    let mut prev = _mm512_setzero_si512();
    let (mut out, mut i) = (0usize, 0usize);
    while i + 16 <= n {
        // SAFETY: lanes i..i + 16 are inside `v`.
        let cur = unsafe { _mm512_loadu_si512(p.add(i).cast()) };
        // Lane l holds the value before `cur`'s lane l.
        let before = _mm512_alignr_epi32::<15>(cur, prev);
        let keep = _mm512_cmpneq_epi32_mask(cur, before) | u16::from(i == 0);
        // SAFETY: `out <= i`, so lanes out..out + 16 are inside `v`.
        unsafe { _mm512_storeu_si512(p.add(out).cast(), _mm512_maskz_compress_epi32(keep, cur)) };
        out += keep.count_ones() as usize;
        prev = cur;
        i += 16;
    }
    if i < n {
        let live = ((1u32 << (n - i)) - 1) as u16;
        // SAFETY: the lanes set in `live` are elements i..n of `v`.
        let cur = unsafe { _mm512_maskz_loadu_epi32(live, p.add(i).cast()) };
        let before = _mm512_alignr_epi32::<15>(cur, prev);
        let keep = (_mm512_cmpneq_epi32_mask(cur, before) | u16::from(i == 0)) & live;
        let kept = keep.count_ones() as usize;
        // SAFETY: `out + kept <= i + (n - i)`: the lanes written are inside `v`.
        unsafe {
            _mm512_mask_storeu_epi32(
                p.add(out).cast(),
                ((1u32 << kept) - 1) as u16,
                _mm512_maskz_compress_epi32(keep, cur),
            )
        };
        out += kept;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `dedup_sorted` keeps what `Vec::dedup` keeps, for every length up
    /// to five registers, with runs of repeats across register boundaries,
    /// leading zeros and `u32::MAX`.
    #[test]
    fn dedup_sorted_equals_vec_dedup() {
        let mut state = 3u64;
        for n in 0..=80usize {
            for spread in [u32::MAX, 40, 3, 1] {
                let mut v: Vec<u32> = (0..n)
                    .map(|_| {
                        let x = crate::minhash::splitmix64(&mut state) as u32;
                        if spread == u32::MAX {
                            x
                        } else {
                            x % spread
                        }
                    })
                    .collect();
                v.sort_unstable();
                let mut want = v.clone();
                want.dedup();
                dedup_sorted(&mut v);
                assert_eq!(v, want, "n = {n}, spread {spread}");
            }
        }
    }

    proptest! {
        #[test]
        fn dedup_sorted_equals_vec_dedup_on_random_runs(
            mut v in proptest::collection::vec(
                prop_oneof![any::<u32>(), Just(u32::MAX), Just(0u32), 0u32..8],
                0..300,
            ),
        ) {
            v.sort_unstable();
            let mut want = v.clone();
            want.dedup();
            dedup_sorted(&mut v);
            prop_assert_eq!(v, want);
        }
    }
}
