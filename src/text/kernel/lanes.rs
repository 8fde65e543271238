//! The loops over 64-bit lanes of `shingle.rs` ([`combine3`]) and
//! `words.rs` ([`finish_words`]), compiled again for AVX-512 F + DQ and for
//! AVX2, the widest the running CPU has picked.

#[cfg(target_arch = "x86_64")]
use super::{has_avx2, has_avx512dq};

/// The word 3-shingle hashes of `words` into `dst`
/// ([`combine3_lanes`](crate::text::shingle::combine3_lanes)), compiled for
/// AVX-512 F + DQ (eight 64-bit lanes with a 64-bit multiply: 290 → 31 ns
/// per article in `examples/sign_bench`) when the running CPU has both,
/// else for AVX2 (four lanes, each 64-bit multiply built from three 32-bit
/// ones: 298 → 179 ns) when it has that, else as built (the x86-64
/// baseline has no 64-bit vector multiply, so LLVM leaves the loop
/// scalar). The loop is the same source inlined into each; wrapping
/// integer arithmetic gives the same integers either way, which the tests
/// check.
///
/// **Safety.** Each `#[target_feature]` function is called only after
/// [`has_avx512dq`] or [`has_avx2`] found its features on the running CPU.
#[inline]
pub(crate) fn combine3(words: &[u64], c: u64, k: [u64; 3], dst: &mut [u32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512dq() {
            // SAFETY: `has_avx512dq` found both features on the running CPU.
            unsafe { combine3_avx512(words, c, k, dst) };
            return;
        }
        if has_avx2() {
            // SAFETY: `has_avx2` found the feature on the running CPU.
            unsafe { combine3_avx2(words, c, k, dst) };
            return;
        }
    }
    crate::text::shingle::combine3_lanes(words, c, k, dst)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
fn combine3_avx512(words: &[u64], c: u64, k: [u64; 3], dst: &mut [u32]) {
    crate::text::shingle::combine3_lanes(words, c, k, dst)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn combine3_avx2(words: &[u64], c: u64, k: [u64; 3], dst: &mut [u32]) {
    crate::text::shingle::combine3_lanes(words, c, k, dst)
}

/// Finalize word states into word hashes
/// ([`finish_lanes`](crate::text::words::finish_lanes): `fmix64` of each), with
/// AVX-512 F + DQ or AVX2 when the running CPU has them, as [`combine3`]
/// does.
///
/// **Safety.** As [`combine3`]: called only after detection.
#[inline]
pub(crate) fn finish_words(states: &mut [u64]) {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512dq() {
            // SAFETY: `has_avx512dq` found both features on the running CPU.
            unsafe { finish_words_avx512(states) };
            return;
        }
        if has_avx2() {
            // SAFETY: `has_avx2` found the feature on the running CPU.
            unsafe { finish_words_avx2(states) };
            return;
        }
    }
    crate::text::words::finish_lanes(states)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
fn finish_words_avx512(states: &mut [u64]) {
    crate::text::words::finish_lanes(states)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn finish_words_avx2(states: &mut [u64]) {
    crate::text::words::finish_lanes(states)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2 builds of the lane loops compute what the portable ones do
    /// (the AVX-512 ones are checked through `combine3` and `finish_words`
    /// by `shingle.rs`'s and `words.rs`'s tests on CPUs that have it).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx2_lane_loops_equal_the_portable_ones() {
        if !has_avx2() {
            return;
        }
        let mut state = 5u64;
        for n in 0..=70usize {
            let words: Vec<u64> = (0..n + 2)
                .map(|_| crate::minhash::splitmix64(&mut state))
                .collect();
            let c = crate::minhash::splitmix64(&mut state);
            let k = [1, 2, 3].map(|_| crate::minhash::splitmix64(&mut state) | 1);
            let (mut got, mut want) = (vec![0u32; n], vec![0u32; n]);
            // SAFETY: `has_avx2` found the feature.
            unsafe { combine3_avx2(&words, c, k, &mut got) };
            crate::text::shingle::combine3_lanes(&words, c, k, &mut want);
            assert_eq!(got, want, "combine3, n = {n}");

            let (mut got, mut want) = (words.clone(), words);
            // SAFETY: as above.
            unsafe { finish_words_avx2(&mut got) };
            crate::text::words::finish_lanes(&mut want);
            assert_eq!(got, want, "finish_words, n = {n}");
        }
    }
}
