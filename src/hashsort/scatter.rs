//! [`scatter_buckets`]: the bucket pass of the sort of more hashes than one
//! network takes, each value to the region of the bucket of its top bits,
//! 16 values a step with AVX-512 F.
#![allow(unsafe_code)]

#[cfg(target_arch = "x86_64")]
use super::has_avx512f;
#[cfg(doc)]
use super::network::sort_network;
use super::network::NETWORK_MAX;

/// Most buckets [`scatter_buckets`] takes (four top bits).
pub(crate) const SCATTER_BUCKETS_MAX: usize = 16;

/// The values a bucket of [`scatter_buckets`] may fill before it stops
/// (a power of two, twice a network).
const SCATTER_LIMIT: usize = 2 * NETWORK_MAX;

/// The distance between two buckets' regions in [`scatter_buckets`]'s
/// output: its limit and one register's slack.
pub(crate) const SCATTER_STRIDE: usize = SCATTER_LIMIT + 16;

/// Whether [`scatter_buckets`] runs on this CPU (AVX-512 F).
#[inline]
pub(crate) fn scatter_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        has_avx512f()
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Put each value of `v` into one of `1 << bits` buckets (1–4 bits) by its
/// top `bits` bits, keeping their order: bucket `b`'s values go to
/// `out[b * SCATTER_STRIDE..][..lens[b]]`. False, with `out` and `lens`
/// holding nothing useful, if the CPU lacks AVX-512 F
/// ([`scatter_available`]) or a bucket gets more than [`NETWORK_MAX`]
/// values, more than [`sort_network`] sorts (then the caller buckets `v`
/// another way; `v` is only read).
///
/// **Why.** [`sort_hashes`](crate::text::shingle) sorts more hashes than one
/// network takes (a man page's ~570–800) by buckets on their top bits,
/// each sorted by [`sort_network`]. Its scalar bucket pass counts the
/// values of each bucket, sums the counts and then scatters the values,
/// an `inc` of a counter in memory for each value twice: with 8 buckets
/// the same counter comes back every few values, and each `inc` waits for
/// the last one's store. That pass was two thirds of the sort's samples on
/// the man pages, the networks one third. Here the buckets have fixed
/// regions, so no counting pass: 16 values a step are loaded, and for each
/// bucket the lanes whose top bits name it are packed to the front of a
/// register (`vpcompressd`, register form) and stored whole at the
/// bucket's end; its count of lanes moves the end. The buckets are
/// written out (`unroll16!`) so that the ends stay in registers.
///
/// **Safety.** `scatter_avx512` is called only after [`has_avx512f`]
/// found the feature. Its loads are whole registers inside `v`, then a
/// masked load of the tail. Each store writes 16 lanes at `b *
/// SCATTER_STRIDE + end`, with `end < SCATTER_LIMIT` before the step (after
/// every step it stops if an end reached the limit, a power of two: the
/// ends' bitwise or reaches it exactly then): inside bucket `b`'s region,
/// which is inside `out` (asserted). The lanes past the packed ones land
/// in the region past the bucket's end, overwritten by its later stores or
/// never read.
pub(crate) fn scatter_buckets(
    v: &[u32],
    bits: u32,
    out: &mut [u32],
    lens: &mut [u32; SCATTER_BUCKETS_MAX],
) -> bool {
    assert!((1..=4).contains(&bits), "1 to 4 bucket bits");
    assert!(out.len() >= SCATTER_STRIDE << bits, "a region per bucket");
    #[cfg(target_arch = "x86_64")]
    if has_avx512f() {
        // SAFETY: `has_avx512f` found the feature; the regions are inside
        // `out` (asserted above).
        let ok = unsafe {
            match bits {
                1 => scatter_avx512::<2>(v, out, lens),
                2 => scatter_avx512::<4>(v, out, lens),
                3 => scatter_avx512::<8>(v, out, lens),
                _ => scatter_avx512::<16>(v, out, lens),
            }
        };
        return ok && lens.iter().all(|&l| l as usize <= NETWORK_MAX);
    }
    let _ = (v, lens);
    false
}

/// [`scatter_buckets`] with `B` buckets in AVX-512 F (memory accesses at
/// [`scatter_buckets`]); false if it stopped at the limit. Caller:
/// AVX-512 F present, `out.len() >= B * SCATTER_STRIDE`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn scatter_avx512<const B: usize>(
    v: &[u32],
    out: &mut [u32],
    lens: &mut [u32; SCATTER_BUCKETS_MAX],
) -> bool {
    use std::arch::x86_64::{
        _mm512_loadu_si512, _mm512_mask_cmpeq_epi32_mask, _mm512_maskz_compress_epi32,
        _mm512_maskz_loadu_epi32, _mm512_set1_epi32, _mm512_srlv_epi32, _mm512_storeu_si512,
    };
    const { assert!(B <= SCATTER_BUCKETS_MAX && SCATTER_LIMIT.is_power_of_two()) };
    debug_assert!(out.len() >= B * SCATTER_STRIDE);
    let shift = _mm512_set1_epi32((32 - B.trailing_zeros()) as i32);
    let (n, src, dst) = (v.len(), v.as_ptr(), out.as_mut_ptr());
    let mut ends = [0usize; SCATTER_BUCKETS_MAX];
    let mut i = 0;
    while i < n {
        let live: u16 = if n - i >= 16 {
            u16::MAX
        } else {
            ((1u32 << (n - i)) - 1) as u16
        };
        // SAFETY: a whole register only where lanes i..i + 16 are inside
        // `v`; otherwise the lanes set in `live`, elements i..n.
        let x = unsafe {
            if live == u16::MAX {
                _mm512_loadu_si512(src.add(i).cast())
            } else {
                _mm512_maskz_loadu_epi32(live, src.add(i).cast())
            }
        };
        let ids = _mm512_srlv_epi32(x, shift);
        let mut reached = 0;
        unroll16!(K => if K < B {
            let lanes = _mm512_mask_cmpeq_epi32_mask(live, ids, _mm512_set1_epi32(K as i32));
            // SAFETY: `ends[K] < SCATTER_LIMIT` (checked after every step),
            // so lanes K·SCATTER_STRIDE + ends[K] .. + 16 are inside bucket
            // K's region, inside `out`.
            unsafe {
                _mm512_storeu_si512(
                    dst.add(K * SCATTER_STRIDE + ends[K]).cast(),
                    _mm512_maskz_compress_epi32(lanes, x),
                )
            };
            ends[K] += lanes.count_ones() as usize;
            reached |= ends[K];
        });
        if reached >= SCATTER_LIMIT {
            return false;
        }
        i += 16;
    }
    for (len, &end) in lens.iter_mut().zip(&ends) {
        *len = end as u32;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The buckets `scatter_buckets` fills, by the plain loop: each value
    /// in the bucket of its top `bits` bits, in input order.
    fn buckets_by_loop(v: &[u32], bits: u32) -> Vec<Vec<u32>> {
        let mut want = vec![Vec::new(); 1 << bits];
        for &x in v {
            want[(x >> (32 - bits)) as usize].push(x);
        }
        want
    }

    /// `scatter_buckets` (where the CPU has AVX-512 F) puts each value in
    /// the bucket the loop does, in the same order, for every number of
    /// bucket bits and every length up to 40 registers (each tail length),
    /// uniform values and values crowded into a few buckets; where a
    /// bucket gets more than a network takes, it says so.
    #[test]
    fn scatter_buckets_equals_the_loop() {
        let mut state = 5u64;
        let mut out = vec![0u32; SCATTER_STRIDE * SCATTER_BUCKETS_MAX];
        let mut checked = 0;
        for bits in 1..=4u32 {
            for n in 0..=640usize {
                // Uniform; in bucket 0 only; in the lowest quarter.
                for shift in [0u32, 31, 2] {
                    let v: Vec<u32> = (0..n)
                        .map(|_| (crate::minhash::splitmix64(&mut state) as u32) >> shift)
                        .collect();
                    let want = buckets_by_loop(&v, bits);
                    let fits = want.iter().all(|b| b.len() <= NETWORK_MAX);
                    let mut lens = [0u32; SCATTER_BUCKETS_MAX];
                    out.fill(0xdead_beef);
                    let took = scatter_buckets(&v, bits, &mut out, &mut lens);
                    assert_eq!(took, scatter_available() && fits, "bits {bits}, n {n}");
                    if !took {
                        continue;
                    }
                    checked += 1;
                    for (b, want) in want.iter().enumerate() {
                        let got = &out[b * SCATTER_STRIDE..][..lens[b] as usize];
                        assert_eq!(got, &want[..], "bits {bits}, n {n}, bucket {b}");
                    }
                    assert!(lens[1 << bits..].iter().all(|&l| l == 0));
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            checked > 0,
            has_avx512f(),
            "the vector path ran where it exists"
        );
        let _ = checked;
    }

    /// One bucket of exactly a network's values is taken, one more is not,
    /// and past the limit (where the loop stops early) neither; nothing is
    /// written past the regions (a guard after them stays).
    #[test]
    fn scatter_buckets_stop_past_a_network() {
        const GUARD: u32 = 0x6a7d_5e11;
        for bits in 1..=4u32 {
            let regions = SCATTER_STRIDE << bits;
            let mut out = vec![GUARD; regions + 8192];
            let mut lens = [0u32; SCATTER_BUCKETS_MAX];
            for n in [
                NETWORK_MAX,
                NETWORK_MAX + 1,
                SCATTER_LIMIT - 1,
                SCATTER_LIMIT,
                5000,
            ] {
                let v: Vec<u32> = (0..n as u32).collect();
                let took = scatter_buckets(&v, bits, &mut out[..regions], &mut lens);
                assert_eq!(
                    took,
                    scatter_available() && n <= NETWORK_MAX,
                    "bits {bits}, n {n}"
                );
                if took {
                    assert_eq!(&out[..n], &v[..]);
                }
                assert!(
                    out[regions..].iter().all(|&x| x == GUARD),
                    "bits {bits}, n {n}: overran"
                );
            }
        }
    }
}
