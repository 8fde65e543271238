//! The text stage's SIMD, the one place in `text` allowed `unsafe` (for
//! calling `#[target_feature]` functions):
//!
//! - the byte classifier of the word scanners, with SSE2 on x86-64.
//!   [`classify_utf8`] turns 64 bytes of UTF-8 into four bit masks (kept and
//!   whitespace ASCII bytes, lead and continuation bytes of non-ASCII
//!   characters). The portable version ([`classify_utf8_swar`]) does it with
//!   64-bit arithmetic and a multiply per mask to gather the high bits; with
//!   SSE2 the compares take one instruction per 16 bytes and `pmovmskb`
//!   gathers the bits, which made non-ASCII text ~15% faster to normalize and
//!   hash (`examples/text_bench`, see BENCHMARKS.md). The compiler does not
//!   find `pmovmskb` on its own in either the SWAR or the byte-loop form.
//! - two loops over 64-bit lanes, [`combine3`] (word 3-shingle hashes) and
//!   [`finish_words`] (MurmurHash3's finalizer over a text's word states),
//!   written as plain Rust in `shingle.rs` and `words.rs` and compiled here
//!   a second time for AVX-512 F + DQ, picked when the running CPU has both:
//!   the x86-64 baseline has no 64-bit vector multiply, so LLVM leaves them
//!   scalar otherwise.
//!
//! **Safety.** SSE2 is part of the x86-64 baseline (every x86_64 CPU has it,
//! and Rust's x86_64 targets enable it), so calling the `sse2` function on
//! x86-64 never reaches an unsupported instruction. The function reads the
//! block through value moves, not raw pointers. Tests hold it equal to the
//! portable version on every byte value in every lane and on random blocks.
//! The AVX-512 functions are called only after `is_x86_feature_detected!`
//! found both features; they compute the same wrapping integer arithmetic
//! as the plain build, which property tests check against the definitions
//! (`shingle.rs`: every window; `words.rs`: the reference normalizer).
#![allow(unsafe_code)]

/// `x` with every byte set to `b`.
const fn rep(b: u8) -> u64 {
    0x0101_0101_0101_0101 * b as u64
}

/// High bit of each byte of `x` (all bytes < 0x80) that lies in `lo..=hi`.
#[inline(always)]
fn in_range(x: u64, lo: u8, hi: u8) -> u64 {
    x.wrapping_add(rep(0x80 - lo)) & !x.wrapping_add(rep(0x7f - hi)) & rep(0x80)
}

/// The high bits of the bytes of `x` (no other bits set) as an 8-bit mask,
/// byte i → bit i.
#[inline(always)]
fn movemask(x: u64) -> u64 {
    (x >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56
}

/// Masks of 64 bytes of UTF-8, byte i → bit i: the kept and the whitespace
/// ASCII bytes (kept: `[A-Za-z0-9_]` if `strip`, else every ASCII byte that
/// is not whitespace; whitespace: `\t`..=`\r` and space), the bytes that
/// start a non-ASCII character (0xC0 and above) and the continuation bytes
/// (0x80–0xBF).
#[inline(always)]
pub(crate) fn classify_utf8(block: &[u8; 64], strip: bool) -> (u64, u64, u64, u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is in the x86-64 baseline, so the CPU has it (module docs).
    unsafe {
        classify_utf8_sse2(block, strip)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        classify_utf8_swar(block, strip)
    }
}

/// [`classify_utf8`] with SSE2, 16 bytes at a time. Signed byte compares:
/// bytes ≥ 0x80 are negative, so they fall outside every ASCII range.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
#[inline]
fn classify_utf8_sse2(block: &[u8; 64], strip: bool) -> (u64, u64, u64, u64) {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_andnot_si128, _mm_cmpeq_epi8, _mm_cmpgt_epi8, _mm_cmplt_epi8,
        _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8, _mm_set_epi64x,
    };
    let between = |x: __m128i, lo: u8, hi: u8| {
        _mm_and_si128(
            _mm_cmpgt_epi8(x, _mm_set1_epi8(lo as i8 - 1)),
            _mm_cmplt_epi8(x, _mm_set1_epi8(hi as i8 + 1)),
        )
    };
    let mask = |v: __m128i| u64::from(_mm_movemask_epi8(v) as u16);
    let (mut kept, mut space, mut lead, mut cont) = (0u64, 0u64, 0u64, 0u64);
    for (i, c) in block.chunks_exact(16).enumerate() {
        let lo = u64::from_le_bytes(c[..8].try_into().expect("8 bytes"));
        let hi = u64::from_le_bytes(c[8..].try_into().expect("8 bytes"));
        let x = _mm_set_epi64x(hi as i64, lo as i64);
        let ws = _mm_or_si128(
            between(x, b'\t', b'\r'),
            _mm_cmpeq_epi8(x, _mm_set1_epi8(b' ' as i8)),
        );
        let k = if strip {
            _mm_or_si128(
                _mm_or_si128(
                    between(_mm_or_si128(x, _mm_set1_epi8(0x20)), b'a', b'z'),
                    between(x, b'0', b'9'),
                ),
                _mm_cmpeq_epi8(x, _mm_set1_epi8(b'_' as i8)),
            )
        } else {
            _mm_andnot_si128(ws, _mm_cmpgt_epi8(x, _mm_set1_epi8(-1)))
        };
        // Lead bytes 0xC0..=0xFF are -64..=-1; continuation bytes below -64.
        let neg = _mm_cmplt_epi8(x, _mm_set1_epi8(0));
        let low = _mm_cmplt_epi8(x, _mm_set1_epi8(-64));
        kept |= mask(k) << (16 * i);
        space |= mask(ws) << (16 * i);
        lead |= mask(_mm_andnot_si128(low, neg)) << (16 * i);
        cont |= mask(low) << (16 * i);
    }
    (kept, space, lead, cont)
}

/// [`classify_utf8`] in portable SWAR: range tests on the low 7 bits,
/// masked to the ASCII bytes, so bytes ≥ 0x80 neither match nor carry.
#[cfg_attr(all(target_arch = "x86_64", not(test)), allow(dead_code))]
#[inline(always)]
pub(crate) fn classify_utf8_swar(block: &[u8; 64], strip: bool) -> (u64, u64, u64, u64) {
    let (mut kept, mut space, mut lead, mut cont) = (0u64, 0u64, 0u64, 0u64);
    for (i, c) in block.chunks_exact(8).enumerate() {
        let x = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        let ascii = !x & rep(0x80);
        let x7 = x & rep(0x7f);
        let ws = (in_range(x7, b'\t', b'\r') | in_range(x7, b' ', b' ')) & ascii;
        let k = if strip {
            (in_range(x7 | rep(0x20), b'a', b'z')
                | in_range(x7, b'0', b'9')
                | in_range(x7, b'_', b'_'))
                & ascii
        } else {
            ascii & !ws
        };
        let high = x & rep(0x80);
        let bit6 = (x << 1) & rep(0x80);
        kept |= movemask(k) << (8 * i);
        space |= movemask(ws) << (8 * i);
        lead |= movemask(high & bit6) << (8 * i);
        cont |= movemask(high & !bit6) << (8 * i);
    }
    (kept, space, lead, cont)
}

/// Whether the running CPU has AVX-512 F and DQ (the standard library
/// caches the detection, so this is a load).
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx512dq() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512dq")
}

/// The word 3-shingle hashes of `words` into `dst`
/// ([`combine3_lanes`](super::shingle::combine3_lanes)), compiled for
/// AVX-512 F + DQ (eight 64-bit lanes with a 64-bit multiply: 290 → 31 ns
/// per article in `examples/sign_bench`) when the running CPU has both, else as built (the
/// x86-64 baseline has no 64-bit vector multiply, so LLVM leaves the loop
/// scalar). The loop is the same source inlined into both; wrapping integer
/// arithmetic gives the same integers either way, which the tests check.
///
/// **Safety.** The `#[target_feature]` function is called only after
/// [`has_avx512dq`] found both features on the running CPU.
#[inline]
pub(crate) fn combine3(words: &[u64], c: u64, k: [u64; 3], dst: &mut [u32]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx512dq() {
        // SAFETY: `has_avx512dq` found both features on the running CPU.
        unsafe { combine3_avx512(words, c, k, dst) };
        return;
    }
    super::shingle::combine3_lanes(words, c, k, dst)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
fn combine3_avx512(words: &[u64], c: u64, k: [u64; 3], dst: &mut [u32]) {
    super::shingle::combine3_lanes(words, c, k, dst)
}

/// Finalize word states into word hashes
/// ([`finish_lanes`](super::words::finish_lanes): `fmix64` of each), with
/// AVX-512 F + DQ when the running CPU has both, as [`combine3`] does.
///
/// **Safety.** As [`combine3`]: called only after detection.
#[inline]
pub(crate) fn finish_words(states: &mut [u64]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx512dq() {
        // SAFETY: `has_avx512dq` found both features on the running CPU.
        unsafe { finish_words_avx512(states) };
        return;
    }
    super::words::finish_lanes(states)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
fn finish_words_avx512(states: &mut [u64]) {
    super::words::finish_lanes(states)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The masks spelled out byte by byte.
    fn by_byte(block: &[u8; 64], strip: bool) -> (u64, u64, u64, u64) {
        let mut m = (0u64, 0u64, 0u64, 0u64);
        for (i, &c) in block.iter().enumerate() {
            let ws = matches!(c, b'\t'..=b'\r' | b' ');
            let kept = if strip {
                c.is_ascii_alphanumeric() || c == b'_'
            } else {
                c.is_ascii() && !ws
            };
            m.0 |= u64::from(kept) << i;
            m.1 |= u64::from(ws) << i;
            m.2 |= u64::from(c >= 0xc0) << i;
            m.3 |= u64::from((0x80..0xc0).contains(&c)) << i;
        }
        m
    }

    #[test]
    fn every_byte_value_in_every_lane_is_classified_alike() {
        for strip in [false, true] {
            for v in 0..=255u8 {
                for lane in 0..64 {
                    let mut block = [b'a'; 64];
                    block[lane] = v;
                    block[(lane + 17) % 64] = v.wrapping_add(1);
                    let want = by_byte(&block, strip);
                    assert_eq!(classify_utf8(&block, strip), want, "{v:#x} at {lane}");
                    assert_eq!(classify_utf8_swar(&block, strip), want, "{v:#x} at {lane}");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn the_classifiers_agree_on_random_blocks(
            bytes in proptest::collection::vec(any::<u8>(), 64),
            strip: bool,
        ) {
            let block: [u8; 64] = bytes.try_into().expect("64 bytes");
            let want = by_byte(&block, strip);
            prop_assert_eq!(classify_utf8(&block, strip), want);
            prop_assert_eq!(classify_utf8_swar(&block, strip), want);
        }
    }
}
