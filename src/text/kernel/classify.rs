//! The byte classifier of the word scanners: [`classify_utf8`], 64 bytes of
//! UTF-8 to four bit masks, in portable SWAR ([`classify_utf8_swar`]) and
//! with SSE2, AVX2 and AVX-512 BW compares (the widest the CPU has).

#[cfg(target_arch = "x86_64")]
use super::{has_avx2, has_avx512bw};
use crate::text::words::{in_range, movemask, rep};

/// Masks of 64 bytes of UTF-8, byte i → bit i: the kept and the whitespace
/// ASCII bytes (kept: `[A-Za-z0-9_]` if `strip`, else every ASCII byte that
/// is not whitespace; whitespace: `\t`..=`\r` and space), the bytes that
/// start a non-ASCII character (0xC0 and above) and the continuation bytes
/// (0x80–0xBF).
#[inline(always)]
pub(crate) fn classify_utf8(block: &[u8; 64], strip: bool) -> (u64, u64, u64, u64) {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512bw() {
            // SAFETY: `has_avx512bw` found the feature on the running CPU.
            return unsafe { classify_utf8_avx512(block, strip) };
        }
        if has_avx2() {
            // SAFETY: `has_avx2` found the feature on the running CPU.
            return unsafe { classify_utf8_avx2(block, strip) };
        }
        // SAFETY: SSE2 is in the x86-64 baseline, so the CPU has it (module docs).
        unsafe { classify_utf8_sse2(block, strip) }
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

/// [`classify_utf8`] with AVX-512 BW: the 64 bytes in one register, and
/// each byte compare gives its 64-bit mask directly (no gathering of high
/// bits). Unsigned compares; a range test is a subtraction and one compare
/// (bytes below the range wrap to large values).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw")]
fn classify_utf8_avx512(block: &[u8; 64], strip: bool) -> (u64, u64, u64, u64) {
    use std::arch::x86_64::{
        __m512i, _mm512_cmpeq_epi8_mask, _mm512_cmpge_epu8_mask, _mm512_cmple_epu8_mask,
        _mm512_loadu_si512, _mm512_or_si512, _mm512_set1_epi8, _mm512_sub_epi8,
    };
    let c = |b: u8| _mm512_set1_epi8(b as i8);
    // Bytes in `lo..=hi`.
    let between =
        |x: __m512i, lo: u8, hi: u8| _mm512_cmple_epu8_mask(_mm512_sub_epi8(x, c(lo)), c(hi - lo));
    // SAFETY: `block` is 64 readable bytes, the register's size (an
    // unaligned load).
    let x = unsafe { _mm512_loadu_si512(block.as_ptr().cast()) };
    let space = between(x, b'\t', b'\r') | _mm512_cmpeq_epi8_mask(x, c(b' '));
    let lead = _mm512_cmpge_epu8_mask(x, c(0xc0));
    let high = _mm512_cmpge_epu8_mask(x, c(0x80));
    let kept = if strip {
        between(_mm512_or_si512(x, c(0x20)), b'a', b'z')
            | between(x, b'0', b'9')
            | _mm512_cmpeq_epi8_mask(x, c(b'_'))
    } else {
        !(high | space)
    };
    (kept, space, lead, high & !lead)
}

/// [`classify_utf8`] with AVX2, 32 bytes at a time: the SSE2 version's
/// signed compares on twice the lanes (AVX2 has no "less than", so those
/// are "greater than" with the operands swapped).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn classify_utf8_avx2(block: &[u8; 64], strip: bool) -> (u64, u64, u64, u64) {
    use std::arch::x86_64::{
        __m256i, _mm256_and_si256, _mm256_andnot_si256, _mm256_cmpeq_epi8, _mm256_cmpgt_epi8,
        _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8,
    };
    let c = |b: i8| _mm256_set1_epi8(b);
    let between = |x: __m256i, lo: u8, hi: u8| {
        _mm256_and_si256(
            _mm256_cmpgt_epi8(x, c(lo as i8 - 1)),
            _mm256_cmpgt_epi8(c(hi as i8 + 1), x),
        )
    };
    let mask = |v: __m256i| u64::from(_mm256_movemask_epi8(v) as u32);
    let (mut kept, mut space, mut lead, mut cont) = (0u64, 0u64, 0u64, 0u64);
    for (i, half) in block.chunks_exact(32).enumerate() {
        // SAFETY: `half` is 32 readable bytes, the register's size (an
        // unaligned load).
        let x = unsafe { _mm256_loadu_si256(half.as_ptr().cast()) };
        let ws = _mm256_or_si256(
            between(x, b'\t', b'\r'),
            _mm256_cmpeq_epi8(x, c(b' ' as i8)),
        );
        let k = if strip {
            _mm256_or_si256(
                _mm256_or_si256(
                    between(_mm256_or_si256(x, c(0x20)), b'a', b'z'),
                    between(x, b'0', b'9'),
                ),
                _mm256_cmpeq_epi8(x, c(b'_' as i8)),
            )
        } else {
            _mm256_andnot_si256(ws, _mm256_cmpgt_epi8(x, c(-1)))
        };
        // Lead bytes 0xC0..=0xFF are -64..=-1; continuation bytes below -64.
        let neg = _mm256_cmpgt_epi8(c(0), x);
        let low = _mm256_cmpgt_epi8(c(-64), x);
        kept |= mask(k) << (32 * i);
        space |= mask(ws) << (32 * i);
        lead |= mask(_mm256_andnot_si256(low, neg)) << (32 * i);
        cont |= mask(low) << (32 * i);
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

    type Masks = (u64, u64, u64, u64);

    /// Every classifier the running CPU can run, by name: the dispatch, the
    /// portable one, and on x86-64 the SSE2 one and (with AVX-512 BW) the
    /// AVX-512 one, each called directly.
    fn classifiers(block: &[u8; 64], strip: bool) -> Vec<(&'static str, Masks)> {
        #[allow(unused_mut)]
        let mut v = vec![
            ("dispatch", classify_utf8(block, strip)),
            ("swar", classify_utf8_swar(block, strip)),
        ];
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: SSE2 is in the x86-64 baseline.
            v.push(("sse2", unsafe { classify_utf8_sse2(block, strip) }));
            if has_avx2() {
                // SAFETY: `has_avx2` found the feature.
                v.push(("avx2", unsafe { classify_utf8_avx2(block, strip) }));
            }
            if has_avx512bw() {
                // SAFETY: `has_avx512bw` found the feature.
                v.push(("avx512", unsafe { classify_utf8_avx512(block, strip) }));
            }
        }
        v
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
                    for (name, got) in classifiers(&block, strip) {
                        assert_eq!(got, want, "{name}: {v:#x} at {lane}");
                    }
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
            for (name, got) in classifiers(&block, strip) {
                prop_assert_eq!(got, want, "{}", name);
            }
        }
    }
}
