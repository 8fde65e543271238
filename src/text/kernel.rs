//! The text stage's SIMD, the one place in `text` allowed `unsafe` (for
//! calling `#[target_feature]` functions, and for intrinsics' loads and
//! stores: unaligned whole-register ones in the classifiers, masked ones
//! and gathers in the VBMI2 kernels):
//!
//! - the byte classifier of the word scanners. [`classify_utf8`] turns 64
//!   bytes of UTF-8 into four bit masks (kept and whitespace ASCII bytes,
//!   lead and continuation bytes of non-ASCII characters). The portable
//!   version ([`classify_utf8_swar`]) does it with 64-bit arithmetic and a
//!   multiply per mask to gather the high bits; with SSE2 (the x86-64
//!   baseline) the compares take one instruction per 16 bytes and
//!   `pmovmskb` gathers the bits, which made non-ASCII text ~15% faster to
//!   normalize and hash (`examples/text_bench`, see BENCHMARKS.md). The
//!   compiler does not find `pmovmskb` on its own in either the SWAR or the
//!   byte-loop form. AVX2 does 32 bytes an instruction, and AVX-512 BW all
//!   64, each compare giving its 64-bit mask directly; the widest the CPU
//!   has is picked, and [`word_states`] compiles the scanners themselves for
//!   it, so that the classifier inlines into them.
//! - two loops over 64-bit lanes, [`combine3`] (word 3-shingle hashes) and
//!   [`finish_words`] (MurmurHash3's finalizer over a text's word states),
//!   written as plain Rust in `shingle.rs` and `words.rs` and compiled here
//!   twice more, for AVX-512 F + DQ and for AVX2, the widest the running
//!   CPU has picked: the x86-64 baseline has no 64-bit vector multiply, so
//!   LLVM leaves them scalar otherwise (with AVX2 it builds the multiply
//!   from 32-bit ones).
//!
//! **Safety.** SSE2 is part of the x86-64 baseline (every x86_64 CPU has it,
//! and Rust's x86_64 targets enable it), so calling the `sse2` function on
//! x86-64 never reaches an unsupported instruction. The function reads the
//! block through value moves, not raw pointers. Tests hold it equal to the
//! portable version on every byte value in every lane and on random blocks.
//! The AVX-512 and AVX2 functions are called only after
//! `is_x86_feature_detected!` found their features; they compute the same
//! wrapping integer arithmetic as the plain build, which property tests
//! check against the definitions (`shingle.rs`: every window; `words.rs`:
//! the reference normalizer) and, for the AVX2 builds, this module's tests
//! against the plain loops (the machine CI runs on has AVX-512, so the
//! dispatch picks that one there). The sort and deduplication of the
//! shingle hashes, which are not text, are in `crate::hashsort`.
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

/// Whether the running CPU has AVX-512 BW (cached by the standard library).
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx512bw() -> bool {
    std::arch::is_x86_feature_detected!("avx512bw")
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

/// The word scanners ([`utf8_word_states`](super::words::utf8_word_states)
/// with the ASCII or the Unicode scanner inlined into it) compiled for AVX-512
/// BW + DQ, else for AVX2, when the running CPU has it, else as built. Each
/// build checks whether the text is all ASCII ([`is_ascii`](super::words::is_ascii),
/// compiled for its instruction set) and calls one of two functions, one
/// per scanner (`scan_*`): the two scanners inlined into one function
/// measured slower on both kinds of text (the ASCII articles 0.68 against
/// 0.64 ns/byte in `text_bench`, 5 alternating runs), as register
/// allocation and layout served neither. The
/// scanners classify 64 bytes at a time through [`classify_utf8`]; compiled
/// for the instruction set the classifier uses, the classifier inlines into
/// them (a `#[target_feature]` function does not inline into a caller
/// without the feature) and LLVM may use the wider registers elsewhere in
/// them too: the loop over lanes that hashes short words
/// (`words::short_states`) becomes 64-bit vector multiplies (AVX-512 DQ).
/// Articles, `sign_bench`: the word stage 1,372–1,390 → 1,277–1,306 ns and
/// docs/s +2.5–3.6% over the AVX-512 classifier called from the baseline
/// build (2 alternating runs, medians of 5 rounds), before the lanes.
///
/// **Safety.** Each `#[target_feature]` function is called only after
/// detection found its feature on the running CPU.
#[inline]
pub(crate) fn word_states(
    text: &str,
    chars: &super::unicode::CharTable,
    key: u64,
    scratch: &mut super::words::AsciiScratch,
    out: &mut Vec<u64>,
) {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512bw() && has_avx512dq() {
            if let Some(k) = Vbmi2::detect() {
                // SAFETY: the token exists only where the CPU has its
                // features, a superset of this build's.
                unsafe { word_states_vbmi2(text, chars, key, scratch, out, k) };
            } else {
                // SAFETY: the two found the features on the running CPU.
                unsafe { word_states_avx512(text, chars, key, scratch, out) };
            }
            return;
        }
        if has_avx2() {
            // SAFETY: `has_avx2` found the feature on the running CPU.
            unsafe { word_states_avx2(text, chars, key, scratch, out) };
            return;
        }
    }
    word_states_portable(text, chars, key, scratch, out)
}

/// Make the tables that [`word_states`] reads for text with non-ASCII
/// characters on the running CPU, which the first such text would
/// otherwise make while it waits: with [`Vbmi2`], the class of every BMP
/// code point (8.6 ms in a release build on a Zen 4, 60 ms in a debug
/// build). The other builds look their characters up in the table's
/// blocks, each made when first read (128 code points, microseconds).
pub(crate) fn warm(chars: &super::unicode::CharTable) {
    #[cfg(target_arch = "x86_64")]
    if has_avx512bw() && has_avx512dq() {
        if let Some(k) = Vbmi2::detect() {
            let _ = k.bmp_table(chars);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = chars;
}

/// [`word_states`] as built (no run-time features): the portable kernels.
fn word_states_portable(
    text: &str,
    chars: &super::unicode::CharTable,
    key: u64,
    scratch: &mut super::words::AsciiScratch,
    out: &mut Vec<u64>,
) {
    if super::words::is_ascii(text.as_bytes()) {
        super::words::utf8_word_states::<true>(Scalar, text, chars, key, scratch, out)
    } else {
        super::words::utf8_word_states::<false>(Scalar, text, chars, key, scratch, out)
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw,avx512dq")]
fn word_states_avx512(
    text: &str,
    chars: &super::unicode::CharTable,
    key: u64,
    scratch: &mut super::words::AsciiScratch,
    out: &mut Vec<u64>,
) {
    if super::words::is_ascii(text.as_bytes()) {
        scan_avx512::<true>(text, chars, key, scratch, out)
    } else {
        scan_avx512::<false>(text, chars, key, scratch, out)
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw,avx512dq")]
#[inline(never)]
fn scan_avx512<const ASCII: bool>(
    text: &str,
    chars: &super::unicode::CharTable,
    key: u64,
    scratch: &mut super::words::AsciiScratch,
    out: &mut Vec<u64>,
) {
    super::words::utf8_word_states::<ASCII>(Scalar, text, chars, key, scratch, out)
}

/// [`word_states_avx512`] with VBMI, VBMI2 and BMI2 as well, and the
/// scanners instantiated with the [`Vbmi2`] kernels.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw,avx512dq,avx512vbmi,avx512vbmi2,bmi2")]
fn word_states_vbmi2(
    text: &str,
    chars: &super::unicode::CharTable,
    key: u64,
    scratch: &mut super::words::AsciiScratch,
    out: &mut Vec<u64>,
    kernels: Vbmi2,
) {
    if super::words::is_ascii(text.as_bytes()) {
        scan_vbmi2::<true>(text, chars, key, scratch, out, kernels)
    } else {
        scan_vbmi2::<false>(text, chars, key, scratch, out, kernels)
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw,avx512dq,avx512vbmi,avx512vbmi2,bmi2")]
#[inline(never)]
fn scan_vbmi2<const ASCII: bool>(
    text: &str,
    chars: &super::unicode::CharTable,
    key: u64,
    scratch: &mut super::words::AsciiScratch,
    out: &mut Vec<u64>,
    kernels: Vbmi2,
) {
    super::words::utf8_word_states::<ASCII>(kernels, text, chars, key, scratch, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn word_states_avx2(
    text: &str,
    chars: &super::unicode::CharTable,
    key: u64,
    scratch: &mut super::words::AsciiScratch,
    out: &mut Vec<u64>,
) {
    if super::words::is_ascii(text.as_bytes()) {
        scan_avx2::<true>(text, chars, key, scratch, out)
    } else {
        scan_avx2::<false>(text, chars, key, scratch, out)
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline(never)]
fn scan_avx2<const ASCII: bool>(
    text: &str,
    chars: &super::unicode::CharTable,
    key: u64,
    scratch: &mut super::words::AsciiScratch,
    out: &mut Vec<u64>,
) {
    super::words::utf8_word_states::<ASCII>(Scalar, text, chars, key, scratch, out)
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
    super::shingle::combine3_lanes(words, c, k, dst)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
fn combine3_avx512(words: &[u64], c: u64, k: [u64; 3], dst: &mut [u32]) {
    super::shingle::combine3_lanes(words, c, k, dst)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn combine3_avx2(words: &[u64], c: u64, k: [u64; 3], dst: &mut [u32]) {
    super::shingle::combine3_lanes(words, c, k, dst)
}

/// Finalize word states into word hashes
/// ([`finish_lanes`](super::words::finish_lanes): `fmix64` of each), with
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
    super::words::finish_lanes(states)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
fn finish_words_avx512(states: &mut [u64]) {
    super::words::finish_lanes(states)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn finish_words_avx2(states: &mut [u64]) {
    super::words::finish_lanes(states)
}

/// The two kernels of the word scanners that need AVX-512 VBMI/VBMI2 (and
/// BMI2): the scanners are generic over this, instantiated with [`Scalar`]
/// (the kernels decline; the scanners loop) in the portable, AVX2 and
/// AVX-512 builds, and with [`Vbmi2`] in `word_states_vbmi2`. A generic
/// parameter rather than a run-time check in the scanners: the check
/// costs in a loop that runs twice a 64-byte block.
pub(crate) trait ScanKernels: Copy {
    /// Write to `dst` the position `base + i` of each set bit `i` of `bits`,
    /// in order, with bit 31 set where bit `i` of `joins` is, and return true;
    /// or return false, `dst` untouched ([`Scalar`]: the caller then loops
    /// over the bits). At most 32 bits of `bits` may be set (only the first
    /// 32 positions are written); `base` is below 2³¹ − 64. The slots past
    /// the positions hold anything: the caller counts the set bits.
    ///
    /// **Why.** The word scanners call this twice a 64-byte block, for the
    /// starts and the ends of its runs of kept bytes. The loop over set bits
    /// (`tzcnt`, store, clear the bit) runs a data-dependent number of times,
    /// and its exit mispredicts about once a call. Here it is one compress of
    /// the lane indices by the mask (`vpcompressb`, register form), widened to
    /// 32-bit lanes: no branch.
    fn run_positions(self, bits: u64, base: u32, joins: u64, dst: &mut [u32; 32]) -> bool;

    /// The tables [`Self::bmp_entries`] reads, from `chars` (the whole-BMP
    /// one made on the first call:
    /// [`CharTable::bmp_classes`](super::unicode::CharTable::bmp_classes)),
    /// or `None` where the kernels decline ([`Scalar`], which so never makes
    /// it).
    fn bmp_table(self, chars: &super::unicode::CharTable) -> Option<BmpTables<'_>>;

    /// The classes of the two- and three-byte characters (code points
    /// 0x80–0xFFFF) among the characters whose lead bytes are the set bits
    /// of `leads` in the 64 bytes of `bytes[base..]`, from `bmp` (indexed by
    /// code point, from [`Self::bmp_table`]), as masks of their lead
    /// positions ([`Entries`]): which it classified, which are kept
    /// ([`KEPT`](super::unicode::KEPT)), whitespace, or
    /// [`GATHER`](super::unicode::GATHER) or [`SLOW`](super::unicode::SLOW)
    /// (the caller handles those, and the leads not classified, one by
    /// one). `None` ([`Scalar`], or a block it declines): the caller looks
    /// each character up itself. It reads `bytes[base..base + 128]` (the
    /// continuation bytes of a lead at 62 or 63 are in the next block) and
    /// declines a block with less after it. On the byte-permute path (below)
    /// it writes the block, its mapped capitals overwritten, to `dst` (the
    /// block's copy in the caller's buffer) and says so; otherwise `dst` is
    /// left as it is.
    ///
    /// **Why.** Russian, Greek or Hebrew text is mostly two-byte
    /// characters, ~30 lead bytes a block, and Chinese or Japanese three-byte
    /// ones, ~21 a block, each looked up one at a time in a loop whose exit
    /// mispredicts (and, for three-byte characters, through a lazily made
    /// block of the table). Here all of them at once: the lead positions
    /// compressed out of the lane indices, the bytes of each character
    /// gathered with byte permutes (`vpermb`, `vpermi2b`), the code points
    /// computed in 32-bit lanes and their class bytes gathered from `bmp`
    /// (`vpgatherdd`), the class bits tested into masks and deposited back at
    /// the lead positions (`pdep`). Where the characters are all two-byte
    /// ones of one 128-character block of the table (Cyrillic, or Latin-1),
    /// a byte permute of that block's class bytes replaces the gather:
    /// Russian man pages 1.51 → 1.38 ns/byte (`text_bench`, 3 alternating
    /// runs); it is done at every byte position and masked to the leads,
    /// with no compress or deposit. On the gather path it declines a block
    /// with fewer than [`BMP_MIN`] of them, where the loop is cheaper; the
    /// byte-permute path takes a block with any: Latin prose has one to three a block in most
    /// of its blocks (é, ü, «), and a capital among them (É, Ü) is lowercased
    /// in the block, so its word needs no transcoding. French, German and
    /// Spanish 1.011–1.056 / 1.029–1.086 / 0.987–1.055 → 0.975–1.005 /
    /// 0.985–1.032 / 0.931–1.000 ns/byte (`text_bench`, 4 alternating runs,
    /// Zen 4); Russian, Chinese, Japanese and the English typography equal.
    fn bmp_entries(
        self,
        bytes: &[u8],
        base: usize,
        leads: u64,
        bmp: BmpTables<'_>,
        dst: &mut [u8; 64],
    ) -> Option<Entries>;

    /// Whether [`Self::words`] answers (it does for every call if so).
    fn has_words(self) -> bool;

    /// The word loop of both scanners, in vector lanes: from run `from`
    /// on, over the runs of kept bytes `starts[r] & !JOINED .. ends[r]` of
    /// `bytes` (`starts` flags with [`JOINED`](super::words::JOINED) a run
    /// that continues the previous run's word; `bytes` extends at least 24
    /// bytes past every run), the words that end at or before `wall` (the
    /// Unicode scanner's next zone or transcoded character; the ASCII
    /// scanner has none), up to the first that does not. A word of one
    /// run of at most 16 bytes (24 with `wide`), or of two runs as long
    /// together where the group takes the byte permutes, gets its state in
    /// `dest[m]` (`m`, its index among the words taken); any other gets a
    /// slot there, and `(m, its first run)` is pushed to `todo` for the
    /// caller to hash (none of its runs is past the wall, so it is a copy
    /// of kept bytes, without transcoding). Returns the runs and the words
    /// taken; `dest.len() >= starts.len() - from + 8`. `None` ([`Scalar`]):
    /// the caller loops itself. The states are `words::short_states`'
    /// (`[u64; 4]` lanes' with `wide`).
    ///
    /// **Why.** The scanners' loops took each run in turn (its flags, a
    /// branch on its length and on the wall, two or three 8-byte loads and
    /// three or four stores into a lane), then hashed the lanes in a second
    /// pass and patched the other words in. Here 8 runs at a time: their
    /// chunks picked by two-source byte permutes (`vpermi2b`) from the 256
    /// bytes at the group's first run (gathered, `vpgatherdq`, where they
    /// reach past them), the word hash computed in 64-bit lanes, and the
    /// states of the runs that start words packed into place
    /// (`vpcompressq`, register form). The permutes instead of the gathers:
    /// the man pages' word stage 7,017 → 6,856 ns (`sign_bench`, 3
    /// alternating runs, Zen 4); Russian 1.191 → 1.136 and Chinese 1.498 →
    /// 1.450 ns/byte (`text_bench`, 3). The words of two runs (`l’homme`,
    /// `e-mail`, `--max-count`: 9% of the French man pages' words) spliced
    /// by the permute index, the second run's bytes `gap` further on,
    /// instead of left to the caller: the man pages' word stage 6,909 →
    /// 6,561 ns and French 6,380 → 5,771 (`sign_bench`, 5 and 3 runs),
    /// the articles' 716 → 754 (7 runs: they have few such words and pay
    /// the extra lanes' work).
    #[allow(clippy::too_many_arguments)]
    fn words(
        self,
        bytes: &[u8],
        starts: &[u32],
        ends: &[u32],
        from: usize,
        wall: usize,
        wide: bool,
        key: u64,
        case: u64,
        dest: &mut [u64],
        todo: &mut Vec<(usize, usize)>,
    ) -> Option<(usize, usize)>;
}

/// [`ScanKernels`] that always decline.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scalar;

impl ScanKernels for Scalar {
    #[inline(always)]
    fn run_positions(self, _: u64, _: u32, _: u64, _: &mut [u32; 32]) -> bool {
        false
    }

    #[inline(always)]
    fn bmp_table(self, _: &super::unicode::CharTable) -> Option<BmpTables<'_>> {
        None
    }

    #[inline(always)]
    fn bmp_entries(
        self,
        _: &[u8],
        _: usize,
        _: u64,
        _: BmpTables<'_>,
        _: &mut [u8; 64],
    ) -> Option<Entries> {
        None
    }

    #[inline(always)]
    fn has_words(self) -> bool {
        false
    }

    #[inline(always)]
    fn words(
        self,
        _: &[u8],
        _: &[u32],
        _: &[u32],
        _: usize,
        _: usize,
        _: bool,
        _: u64,
        _: u64,
        _: &mut [u64],
        _: &mut Vec<(usize, usize)>,
    ) -> Option<(usize, usize)> {
        None
    }
}

/// [`ScanKernels`] in AVX-512 VBMI/VBMI2 and BMI2: a token that only
/// [`Vbmi2::detect`] makes, after finding the features on the running CPU.
///
/// **Safety.** Its methods call `#[target_feature]` functions; that is
/// sound because a `Vbmi2` exists only where the CPU has the features.
/// `run_positions_vbmi2` stores one or two whole registers (16 lanes of
/// `u32` each) into `dst`, 32 lanes; `bmp_entries_vbmi2` reads the 128
/// bytes of the window (a checked slice) and its bytes 1..65, gathers 4 bytes from
/// `bmp.classes` at code points of 16 bits, within its 65,536 + 3 bytes,
/// reads the 128 bytes of one block of `bmp.low_classes` and of each of
/// `bmp.low_maps` (checked slices), and stores one register into `dst`,
/// 64 bytes; `words_avx512` reads and writes what its docs list,
/// within the lengths its caller asserts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Vbmi2(());

impl Vbmi2 {
    /// The token, if the running CPU has the features.
    #[inline]
    pub(crate) fn detect() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        if has_avx512vbmi2() {
            return Some(Vbmi2(()));
        }
        None
    }
}

impl ScanKernels for Vbmi2 {
    #[inline(always)]
    fn run_positions(self, bits: u64, base: u32, joins: u64, dst: &mut [u32; 32]) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: `self` exists, so the CPU has the features (type docs).
            unsafe { run_positions_vbmi2(bits, base, joins, dst) };
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (bits, base, joins, dst);
            false
        }
    }

    #[inline(always)]
    fn bmp_table(self, chars: &super::unicode::CharTable) -> Option<BmpTables<'_>> {
        Some(BmpTables {
            classes: chars.bmp_classes(),
            low_classes: chars.low_classes(),
            low_maps: chars.low_maps(),
        })
    }

    #[inline(always)]
    fn bmp_entries(
        self,
        bytes: &[u8],
        base: usize,
        leads: u64,
        bmp: BmpTables<'_>,
        dst: &mut [u8; 64],
    ) -> Option<Entries> {
        #[cfg(target_arch = "x86_64")]
        {
            if leads == 0 {
                return None;
            }
            let window: &[u8; 128] = bytes.get(base..base + 128)?.try_into().ok()?;
            // SAFETY: `self` exists, so the CPU has the features (type docs).
            unsafe { bmp_entries_vbmi2(window, leads, bmp, dst) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (bytes, base, leads, bmp);
            None
        }
    }

    #[inline(always)]
    fn has_words(self) -> bool {
        cfg!(target_arch = "x86_64")
    }

    #[inline(always)]
    fn words(
        self,
        bytes: &[u8],
        starts: &[u32],
        ends: &[u32],
        from: usize,
        wall: usize,
        wide: bool,
        key: u64,
        case: u64,
        dest: &mut [u64],
        todo: &mut Vec<(usize, usize)>,
    ) -> Option<(usize, usize)> {
        #[cfg(target_arch = "x86_64")]
        {
            let n = starts.len();
            assert!(ends.len() == n && from < n && dest.len() >= n - from + 8);
            assert!(bytes.len() >= 24 && bytes.len() <= i32::MAX as usize);
            // Runs end below 2^31; a wall past that is no wall.
            let wall = wall.min(u32::MAX as usize) as u32;
            // SAFETY: `self` exists, so the CPU has the features (type
            // docs); the lengths are as `words_avx512` needs.
            Some(unsafe {
                if wide {
                    words_avx512::<true>(bytes, starts, ends, from, wall, key, case, dest, todo)
                } else {
                    words_avx512::<false>(bytes, starts, ends, from, wall, key, case, dest, todo)
                }
            })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (bytes, starts, ends, from, wall, wide, key, case, dest, todo);
            None
        }
    }
}

/// The word states of 8 runs at once (`words::short_states`' arithmetic,
/// and `[u64; 4]` lanes' with `WIDE`): the words start at the 32-bit lanes
/// of `start` and are the 32-bit lanes of `len` long; only the lanes in
/// `take` are read (the others' states are garbage). With `window`
/// (`Some(first)`: every lane in `take` starts at `first` or after and
/// ends its last chunk within 256 bytes of it) the bytes come from those
/// 256 bytes by byte permutes, a word's bytes from its `split`-th on
/// `gap` bytes further (a word of two runs: its first run `split` bytes
/// long, the second `gap` bytes after the first's end; `gap` 0 for a word
/// of one run); else by gathers (`gap` 0 in every lane of `take`).
/// Lowercases the ASCII letters where `cases` is all ones (bytes from 0x80
/// up are never in `A..=Z`, so UTF-8 text is lowercased as `lower_utf8`
/// does).
///
/// **Safety.** Call only where AVX-512 F, BW, DQ, VL and VBMI are
/// enabled, with every lane of `start` in `take` at most `bytes.len() -
/// 16` (`- 24` with `WIDE`) and `first` at most `bytes.len()`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn group_states<const WIDE: bool>(
    bytes: &[u8],
    start: std::arch::x86_64::__m256i,
    len: std::arch::x86_64::__m256i,
    split: std::arch::x86_64::__m256i,
    gap: std::arch::x86_64::__m256i,
    take: u8,
    window: Option<usize>,
    key: u64,
    cases: u64,
) -> std::arch::x86_64::__m512i {
    use super::words::{L, M};
    use std::arch::x86_64::{
        __m512i, _mm256_add_epi32, _mm256_set1_epi32, _mm256_sub_epi32, _mm512_add_epi64,
        _mm512_add_epi8, _mm512_and_si512, _mm512_andnot_si512, _mm512_cmpge_epu8_mask,
        _mm512_cmpgt_epu64_mask, _mm512_cmplt_epu8_mask, _mm512_cvtepu32_epi64, _mm512_loadu_si512,
        _mm512_mask_add_epi8, _mm512_mask_blend_epi64, _mm512_mask_blend_epi8,
        _mm512_mask_i32gather_epi64, _mm512_maskz_loadu_epi8, _mm512_movepi8_mask,
        _mm512_mullo_epi64, _mm512_or_si512, _mm512_permutex2var_epi8, _mm512_rol_epi64,
        _mm512_set1_epi64, _mm512_set1_epi8, _mm512_setzero_si512, _mm512_shuffle_epi8,
        _mm512_slli_epi64, _mm512_sllv_epi64, _mm512_sub_epi64, _mm512_sub_epi8, _mm512_xor_si512,
    };
    /// Byte 0 of each 8-byte lane into all 8 (a `vpshufb` pattern).
    const SPREAD: [u8; 64] = {
        let mut a = [0u8; 64];
        let mut i = 0;
        while i < 64 {
            a[i] = (i & 8) as u8;
            i += 1;
        }
        a
    };
    /// 0..7 in each 8-byte lane.
    const WITHIN: [u8; 64] = {
        let mut a = [0u8; 64];
        let mut i = 0;
        while i < 64 {
            a[i] = (i & 7) as u8;
            i += 1;
        }
        a
    };
    // SAFETY (the whole body): the features are the caller's; each gather
    // reads 8 bytes at `start + 8·c` (c < 2, or 3 with WIDE) for the lanes
    // in `take` only, inside `bytes` by the caller's bound; the window's
    // loads read `bytes[base..base + 256]` masked to `bytes`' end.
    unsafe {
        let ones = _mm512_set1_epi64(-1);
        let lower = |x: __m512i| {
            let upper = _mm512_cmplt_epu8_mask(
                _mm512_sub_epi8(x, _mm512_set1_epi8(b'A' as i8)),
                _mm512_set1_epi8(26),
            ) & cases;
            _mm512_mask_blend_epi8(upper, x, _mm512_or_si512(x, _mm512_set1_epi8(0x20)))
        };
        // The low `l` bytes of each lane (all 8 for l >= 8: a shift by 64 or
        // more gives 0).
        let keep = |l: __m512i| {
            _mm512_andnot_si512(_mm512_sllv_epi64(ones, _mm512_slli_epi64::<3>(l)), ones)
        };
        let step = |h: __m512i, c: __m512i| {
            _mm512_rol_epi64::<31>(_mm512_mullo_epi64(
                _mm512_xor_si512(h, c),
                _mm512_set1_epi64(M as i64),
            ))
        };
        // The runs' bytes, from the 256 bytes at `base` where they all lie
        // within them (two-source byte permutes, picked by the index's top
        // bit), else gathered. Written without closures: a closure is a
        // function of its own, compiled without the caller's features, and
        // one too large to inline calls its intrinsics.
        let (mut c0, mut c1, mut c2) = (
            _mm512_setzero_si512(),
            _mm512_setzero_si512(),
            _mm512_setzero_si512(),
        );
        if let Some(base) = window {
            let rest = &bytes[base..];
            let mut w = [_mm512_setzero_si512(); 4];
            for (j, w) in w.iter_mut().enumerate() {
                let at = rest.as_ptr().wrapping_add(64 * j);
                *w = match rest.len().saturating_sub(64 * j) {
                    0 => _mm512_setzero_si512(),
                    n if n >= 64 => _mm512_loadu_si512(at.cast()),
                    n => _mm512_maskz_loadu_epi8((1u64 << n) - 1, at.cast()),
                };
            }
            let offsets =
                _mm512_cvtepu32_epi64(_mm256_sub_epi32(start, _mm256_set1_epi32(base as i32)));
            let spreads = _mm512_loadu_si512(SPREAD.as_ptr().cast());
            let spread = _mm512_shuffle_epi8(offsets, spreads);
            let within = _mm512_loadu_si512(WITHIN.as_ptr().cast());
            let split = _mm512_shuffle_epi8(_mm512_cvtepu32_epi64(split), spreads);
            let gap = _mm512_shuffle_epi8(_mm512_cvtepu32_epi64(gap), spreads);
            let mut at = within;
            let mut index = _mm512_add_epi8(spread, within);
            for (c, out) in [&mut c0, &mut c1, &mut c2].into_iter().enumerate() {
                if c < 2 || WIDE {
                    // A word's bytes past its first run's come from its
                    // second run, `gap` bytes further on.
                    let second = _mm512_cmpge_epu8_mask(at, split);
                    let index = _mm512_mask_add_epi8(index, second, index, gap);
                    let low = _mm512_permutex2var_epi8(w[0], index, w[1]);
                    let high = _mm512_permutex2var_epi8(w[2], index, w[3]);
                    *out = _mm512_mask_blend_epi8(_mm512_movepi8_mask(index), low, high);
                }
                index = _mm512_add_epi8(index, _mm512_set1_epi8(8));
                at = _mm512_add_epi8(at, _mm512_set1_epi8(8));
            }
        } else {
            for (c, out) in [&mut c0, &mut c1, &mut c2].into_iter().enumerate() {
                if c < 2 || WIDE {
                    *out = _mm512_mask_i32gather_epi64::<1>(
                        _mm512_setzero_si512(),
                        take,
                        _mm256_add_epi32(start, _mm256_set1_epi32(8 * c as i32)),
                        bytes.as_ptr().cast(),
                    );
                }
            }
        }
        let len = _mm512_cvtepu32_epi64(len);
        let eight = _mm512_set1_epi64(8);
        let one = step(
            _mm512_set1_epi64(key as i64),
            _mm512_and_si512(lower(c0), keep(len)),
        );
        let past8 = _mm512_sub_epi64(len, eight);
        let two = step(one, _mm512_and_si512(lower(c1), keep(past8)));
        let mut h = _mm512_mask_blend_epi64(_mm512_cmpgt_epu64_mask(len, eight), one, two);
        if WIDE {
            let three = step(
                two,
                _mm512_and_si512(lower(c2), keep(_mm512_sub_epi64(past8, eight))),
            );
            h = _mm512_mask_blend_epi64(
                _mm512_cmpgt_epu64_mask(len, _mm512_set1_epi64(16)),
                h,
                three,
            );
        }
        _mm512_add_epi64(h, _mm512_mullo_epi64(len, _mm512_set1_epi64(L as i64)))
    }
}

/// [`ScanKernels::words`] for [`Vbmi2`] (it needs AVX-512 F, BW, DQ, VL
/// and VBMI, and POPCNT, which [`Vbmi2::detect`] checks). Memory: masked
/// loads of `starts[i..]`, `starts[i + 1..]`, `starts[i + 2..]`,
/// `ends[i..]` and `ends[i + 1..]` (lanes inside them);
/// the reads of [`group_states`] (`bytes[first..first + 256]` masked to
/// the end of `bytes`, `first` a run's start, or gathers) for runs whose
/// start is at most `bytes.len() - 24` (checked a group at a time: a start
/// past it panics); stores of 8 lanes at `dest[m..]`, `m` the words so far, at
/// most the runs so far, below `starts.len() - from`, and `dest.len() >=
/// starts.len() - from + 8`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,popcnt")]
#[allow(clippy::too_many_arguments)]
fn words_avx512<const WIDE: bool>(
    bytes: &[u8],
    starts: &[u32],
    ends: &[u32],
    from: usize,
    wall: u32,
    key: u64,
    case: u64,
    dest: &mut [u64],
    todo: &mut Vec<(usize, usize)>,
) -> (usize, usize) {
    use super::words::JOINED;
    use std::arch::x86_64::{
        _mm256_add_epi32, _mm256_andnot_si256, _mm256_cmpgt_epu32_mask, _mm256_cmple_epu32_mask,
        _mm256_mask_blend_epi32, _mm256_maskz_loadu_epi32, _mm256_maskz_sub_epi32,
        _mm256_set1_epi32, _mm256_sub_epi32, _mm256_test_epi32_mask, _mm512_maskz_compress_epi64,
        _mm512_storeu_si512,
    };
    let n = starts.len();
    let cases = if case != 0 { u64::MAX } else { 0 };
    let joined = _mm256_set1_epi32(JOINED as i32);
    let max = _mm256_set1_epi32(if WIDE { 24 } else { 16 });
    let wall = _mm256_set1_epi32(wall as i32);
    let limit = _mm256_set1_epi32((bytes.len() - 24) as i32);
    // Runs taken and words written so far.
    let (mut k, mut m) = (0usize, 0usize);
    while from + k < n {
        let i = from + k;
        let live: u8 = if n - i >= 8 {
            0xff
        } else {
            (1u8 << (n - i)) - 1
        };
        let after: u8 = if n - i > 8 { 0xff } else { live >> 1 };
        let after2: u8 = if n - i > 9 { 0xff } else { after >> 1 };
        // SAFETY: the lanes set in `live` are starts[i..n] and ends[i..n],
        // in `after` starts[i + 1..n] and ends[i + 1..n], in `after2`
        // starts[i + 2..n].
        let (s, next, next2, e, e_next) = unsafe {
            (
                _mm256_maskz_loadu_epi32(live, starts.as_ptr().add(i).cast()),
                _mm256_maskz_loadu_epi32(after, starts.as_ptr().add(i + 1).cast()),
                _mm256_maskz_loadu_epi32(after2, starts.as_ptr().add(i + 2).cast()),
                _mm256_maskz_loadu_epi32(live, ends.as_ptr().add(i).cast()),
                _mm256_maskz_loadu_epi32(after, ends.as_ptr().add(i + 1).cast()),
            )
        };
        let cont = _mm256_test_epi32_mask(s, joined) & live;
        let head = !cont & live;
        let start = _mm256_andnot_si256(joined, s);
        let len = _mm256_sub_epi32(e, start);
        let before = _mm256_cmple_epu32_mask(e, wall);
        let joins = _mm256_test_epi32_mask(next, joined);
        let simple = head & before & !joins & _mm256_cmple_epu32_mask(len, max);
        // Words of two runs (`l’homme`, `don't`, `e-mail`) that fit a
        // lane and end before the wall: hashed here too where the group
        // takes the byte permutes (their bytes spliced by the index).
        let next_start = _mm256_andnot_si256(joined, next);
        let total = _mm256_add_epi32(len, _mm256_sub_epi32(e_next, next_start));
        let pairs = head
            & joins
            & !_mm256_test_epi32_mask(next2, joined)
            & _mm256_cmple_epu32_mask(e_next, wall)
            & _mm256_cmple_epu32_mask(total, max);
        // The lanes before the first past the wall.
        let mut taken = (!(before | !live)).trailing_zeros().min(live.count_ones());
        // A run past the wall that continues a word: the word goes back
        // to the caller whole, from its first run.
        if taken < 8 && cont >> taken & 1 == 1 {
            let heads = head & ((1u16 << taken) - 1) as u8;
            if heads != 0 {
                taken = 7 - heads.leading_zeros();
            } else {
                // Its first run is in an earlier group: the last word
                // deferred, and every run since continues it.
                let (at, run) = todo.pop().unwrap_or_else(|| {
                    unreachable!("a word's first run is taken before its others")
                });
                return (run - from, at);
            }
        }
        let take = ((1u16 << taken) - 1) as u8;
        assert!(
            _mm256_cmpgt_epu32_mask(start, limit) & (simple | pairs) & take == 0,
            "a run starts within 24 bytes of the buffer's end"
        );
        // The 256 bytes from the group's first run hold every run it hashes
        // (most groups of short words): byte permutes instead of gathers.
        // Where they hold the two-run words too, those are hashed as well;
        // else they are left to the caller, as the gathers cannot splice.
        // (Runs are in order, so the last lane's last run reaches furthest.)
        let window_of = |lanes: u8| {
            (lanes != 0)
                .then(|| {
                    let last = (7 - lanes.leading_zeros()) as usize;
                    let last = i + last + usize::from(pairs >> last & 1 == 1);
                    let (first, last) = (
                        (starts[i] & !JOINED) as usize,
                        (starts[last] & !JOINED) as usize,
                    );
                    (last + if WIDE { 24 } else { 16 } <= first + 256).then_some(first)
                })
                .flatten()
        };
        let (hashed, window) = match window_of((simple | pairs) & take) {
            Some(first) => ((simple | pairs) & take, Some(first)),
            None => (simple & take, window_of(simple & take)),
        };
        let paired = pairs & hashed;
        let (first_len, len) = (len, _mm256_mask_blend_epi32(paired, len, total));
        let gap = _mm256_maskz_sub_epi32(paired, next_start, e);
        // SAFETY: the features are enabled here; the lanes in `hashed`
        // start at most 24 bytes before the end of `bytes` (checked
        // above), `window` inside it, and the two-run words only with it.
        let state = unsafe {
            group_states::<WIDE>(
                bytes, start, len, first_len, gap, hashed, window, key, cases,
            )
        };
        let words = head & take;
        // SAFETY: m <= k < n - from, so m + 8 <= dest.len().
        unsafe {
            _mm512_storeu_si512(
                dest.as_mut_ptr().add(m).cast(),
                _mm512_maskz_compress_epi64(words, state),
            )
        };
        let mut deferred = words & !hashed;
        while deferred != 0 {
            let b = deferred.trailing_zeros();
            let before = (words & ((1u8 << b) - 1)).count_ones() as usize;
            todo.push((m + before, i + b as usize));
            deferred &= deferred - 1;
        }
        m += words.count_ones() as usize;
        k += taken as usize;
        if taken < 8 {
            break;
        }
    }
    (k, m)
}

/// The byte lanes' indices, 0..63: what the VBMI2 kernels compress by a
/// mask to get the positions of its set bits.
#[cfg(target_arch = "x86_64")]
const LANE_INDICES: [u8; 64] = {
    let mut a = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        a[i] = i as u8;
        i += 1;
    }
    a
};

/// The tables [`ScanKernels::bmp_entries`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BmpTables<'a> {
    /// The class of every code point of the BMP, a byte each, and 3 more:
    /// [`CharTable::bmp_classes`](super::unicode::CharTable::bmp_classes).
    pub classes: &'a [u8; super::unicode::BMP_CLASSES],
    /// The classes of the code points below 0x800, a byte each:
    /// [`CharTable::low_classes`](super::unicode::CharTable::low_classes).
    pub low_classes: &'a [u8; super::unicode::LOW],
    /// What those code points map to:
    /// [`CharTable::low_maps`](super::unicode::CharTable::low_maps).
    pub low_maps: &'a [[u8; super::unicode::LOW]; 2],
}

/// Fewest two- and three-byte characters in a block for which
/// [`ScanKernels::bmp_entries`] classifies them at once by gathers (on the
/// byte-permute path, one is enough).
pub(crate) const BMP_MIN: u32 = 4;

/// What [`ScanKernels::bmp_entries`] found: masks of lead positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entries {
    /// The two- and three-byte leads it classified (the others are the caller's).
    pub handled: u64,
    /// Of those, the kept characters.
    pub kept: u64,
    /// The whitespace characters.
    pub space: u64,
    /// The `GATHER` or `SLOW` characters (also for the caller).
    pub flagged: u64,
    /// Whether the block's characters all lie in one 128-character block
    /// of the table (the byte-permute path), so that it wrote the block to
    /// `dst` with those that map to one two-byte character (`CLASS_MAPPED`:
    /// Cyrillic, Greek and Latin-1 capitals) overwritten by what they map
    /// to, whether it has any or not; those are not `flagged` (but a lead in
    /// the block's last byte, whose continuation is in the next). False on
    /// the gather path, `dst` untouched. Written there from its register,
    /// not returned: a returned block went through the stack, and its load
    /// back, right after the store, waited for it (an eighth of the Unicode
    /// scanner's samples on the Russian man pages).
    pub rewritten: bool,
}

/// [`ScanKernels::bmp_entries`] with AVX-512 VBMI and VBMI2 and BMI2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vbmi2,bmi2")]
#[inline]
fn bmp_entries_vbmi2(
    window: &[u8; 128],
    leads: u64,
    bmp: BmpTables<'_>,
    dst: &mut [u8; 64],
) -> Option<Entries> {
    use super::unicode::{CLASS_FLAGGED, CLASS_KEPT, CLASS_MAPPED, CLASS_SPACE};
    use std::arch::x86_64::{
        _mm512_add_epi8, _mm512_and_si512, _mm512_castsi512_si128, _mm512_cmpeq_epi8_mask,
        _mm512_cmpge_epu32_mask, _mm512_cmplt_epu8_mask, _mm512_cvtepu8_epi32,
        _mm512_extracti32x4_epi32, _mm512_i32gather_epi32, _mm512_loadu_si512,
        _mm512_mask_blend_epi32, _mm512_mask_blend_epi8, _mm512_maskz_compress_epi8,
        _mm512_or_si512, _mm512_permutex2var_epi8, _mm512_permutexvar_epi8, _mm512_set1_epi32,
        _mm512_set1_epi8, _mm512_slli_epi16, _mm512_slli_epi32, _mm512_storeu_si512,
        _mm512_sub_epi8, _mm512_test_epi32_mask, _mm512_test_epi8_mask, _pdep_u64,
    };
    // SAFETY: `window` is 128 readable bytes, `LANE_INDICES` 64 (unaligned
    // loads).
    let (lo, hi, iota) = unsafe {
        (
            _mm512_loadu_si512(window.as_ptr().cast()),
            _mm512_loadu_si512(window.as_ptr().add(64).cast()),
            _mm512_loadu_si512(LANE_INDICES.as_ptr().cast()),
        )
    };
    // The leads of two- and three-byte characters: 0xC0–0xEF. Each takes
    // at least two bytes, so a block starts at most 32 of them.
    let found = leads & _mm512_cmplt_epu8_mask(lo, _mm512_set1_epi8(0xf0_u8 as i8));
    let n = found.count_ones();
    if !(1..=32).contains(&n) {
        return None;
    }
    // Two-byte characters all in one 128-character block of the table
    // (their leads equal but for the last bit: Cyrillic is 0xD0/0xD1,
    // Latin-1 0xC2/0xC3): their classes looked up a byte each with one
    // `vpermi2b` of the block's 128 class bytes, no gather (92% of the
    // Russian man pages' blocks with four or more such characters; most
    // blocks of French, German or Spanish prose). At every byte position at
    // once, as if a lead were there (its last bit, the next byte's 6), then
    // masked to the leads: no compress of the lead positions and no deposit
    // back. The Russian man pages 1.017–1.036 → 0.965–0.977 ns/byte, the
    // man pages' signing 100.4k–102.2k → 100.9k–104.1k docs/s (`text_bench`,
    // `sign_bench`, 3 alternating runs each, Zen 4).
    let lead = window[found.trailing_zeros() as usize];
    let pair = _mm512_and_si512(lo, _mm512_set1_epi8(0xfe_u8 as i8));
    let same = _mm512_cmpeq_epi8_mask(pair, _mm512_set1_epi8((lead & 0xfe) as i8));
    if lead < 0xe0 && same & found == found {
        let block = usize::from((lead & 0x1f) >> 1) * 128;
        let [classes, leads_to, conts_to] = [bmp.low_classes, &bmp.low_maps[0], &bmp.low_maps[1]]
            .map(|m| -> &[u8; 128] {
                m[block..block + 128]
                    .try_into()
                    .unwrap_or_else(|_| unreachable!("16 blocks of 128"))
            });
        // SAFETY: the tables are 128 readable bytes each, and `window` 128
        // (bytes 1..65 of it; unaligned loads).
        let (tlo, thi, llo, lhi, clo, chi, after) = unsafe {
            (
                _mm512_loadu_si512(classes.as_ptr().cast()),
                _mm512_loadu_si512(classes.as_ptr().add(64).cast()),
                _mm512_loadu_si512(leads_to.as_ptr().cast()),
                _mm512_loadu_si512(leads_to.as_ptr().add(64).cast()),
                _mm512_loadu_si512(conts_to.as_ptr().cast()),
                _mm512_loadu_si512(conts_to.as_ptr().add(64).cast()),
                _mm512_loadu_si512(window.as_ptr().add(1).cast()),
            )
        };
        // At every byte position, the index in the block of the character
        // a lead there would start (a 16-bit shift moves no bit across
        // bytes here).
        let at_index = _mm512_or_si512(
            _mm512_slli_epi16::<6>(_mm512_and_si512(lo, _mm512_set1_epi8(1))),
            _mm512_and_si512(after, _mm512_set1_epi8(0x3f)),
        );
        let class = _mm512_permutex2var_epi8(tlo, at_index, thi);
        let has = |bit: u8| _mm512_test_epi8_mask(class, _mm512_set1_epi8(bit as i8)) & found;
        // Capitals that map to one small letter: overwritten in a copy of
        // the block, so that their words need no transcoding (but one at
        // byte 63, whose continuation byte is the next block's).
        let mapped = has(CLASS_MAPPED) & !(1 << 63);
        // The block is written whether or not it has any: the branch on it
        // mispredicted (a third of the Russian blocks have a capital).
        // Russian 1.231 → 1.183 ns/byte (`text_bench`, 4 alternating runs,
        // Zen 4); the other languages equal.
        let lead_to = _mm512_permutex2var_epi8(llo, at_index, lhi);
        let cont_to = _mm512_permutex2var_epi8(clo, at_index, chi);
        // Each continuation byte one position after its lead.
        let cont_to = _mm512_permutexvar_epi8(_mm512_sub_epi8(iota, _mm512_set1_epi8(1)), cont_to);
        let out = _mm512_mask_blend_epi8(mapped, lo, lead_to);
        let out = _mm512_mask_blend_epi8(mapped << 1, out, cont_to);
        // SAFETY: `dst` is 64 writable bytes (unaligned store).
        unsafe { _mm512_storeu_si512(dst.as_mut_ptr().cast(), out) };
        return Some(Entries {
            handled: found,
            kept: has(CLASS_KEPT),
            space: has(CLASS_SPACE),
            flagged: has(CLASS_FLAGGED) & !mapped,
            rewritten: true,
        });
    }
    if n < BMP_MIN {
        return None;
    }
    // Lane j: the position of the j-th lead; its byte and the two after
    // (positions up to 65: `vpermi2b` reads the 128-byte window).
    let at = _mm512_maskz_compress_epi8(found, iota);
    let first = _mm512_permutexvar_epi8(at, lo);
    let next = |k: i8| _mm512_permutex2var_epi8(lo, _mm512_add_epi8(at, _mm512_set1_epi8(k)), hi);
    let second = next(1);
    // Lanes past the last lead read position 0: cut them before depositing.
    let live = (1u64 << n) - 1;
    let third = next(2);
    let splat = |bits: u32| _mm512_set1_epi32(bits as i32);
    let classes = |a, b, c| {
        let (a, b, c) = (
            _mm512_cvtepu8_epi32(a),
            _mm512_cvtepu8_epi32(b),
            _mm512_cvtepu8_epi32(c),
        );
        let b6 = _mm512_and_si512(b, splat(0x3f));
        // Two bytes: 5 + 6 bits. Three: 4 + 6 + 6, so below 0x10000 (and
        // below it too in the lanes past the last lead, whatever they read).
        let two = _mm512_or_si512(_mm512_slli_epi32::<6>(_mm512_and_si512(a, splat(0x1f))), b6);
        let three = _mm512_or_si512(
            _mm512_or_si512(
                _mm512_slli_epi32::<12>(_mm512_and_si512(a, splat(0x0f))),
                _mm512_slli_epi32::<6>(b6),
            ),
            _mm512_and_si512(c, splat(0x3f)),
        );
        let cp = _mm512_mask_blend_epi32(_mm512_cmpge_epu32_mask(a, splat(0xe0)), two, three);
        // SAFETY: `cp` has 16 bits, so the 4 bytes at it lie within the
        // 65,536 + 3 of `bmp.classes`. The class is the first of them (the
        // low byte of the lane), and the class bits are in its low 3 bits.
        let e = unsafe { _mm512_i32gather_epi32::<1>(cp, bmp.classes.as_ptr().cast()) };
        (
            u64::from(_mm512_test_epi32_mask(e, splat(CLASS_KEPT.into()))),
            u64::from(_mm512_test_epi32_mask(e, splat(CLASS_SPACE.into()))),
            u64::from(_mm512_test_epi32_mask(e, splat(CLASS_FLAGGED.into()))),
        )
    };
    let (mut kept, mut space, mut flagged) = classes(
        _mm512_castsi512_si128(first),
        _mm512_castsi512_si128(second),
        _mm512_castsi512_si128(third),
    );
    if n > 16 {
        let (k1, s1, f1) = classes(
            _mm512_extracti32x4_epi32::<1>(first),
            _mm512_extracti32x4_epi32::<1>(second),
            _mm512_extracti32x4_epi32::<1>(third),
        );
        kept |= k1 << 16;
        space |= s1 << 16;
        flagged |= f1 << 16;
    }
    Some(Entries {
        handled: found,
        kept: _pdep_u64(kept & live, found),
        space: _pdep_u64(space & live, found),
        flagged: _pdep_u64(flagged & live, found),
        rewritten: false,
    })
}

/// Whether the running CPU has AVX-512 F, BW, DQ, VL, VBMI and VBMI2,
/// POPCNT and BMI2: what the [`Vbmi2`] kernels and the builds that take
/// them use (cached by the standard library).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn has_avx512vbmi2() -> bool {
    std::arch::is_x86_feature_detected!("avx512vbmi2")
        && std::arch::is_x86_feature_detected!("avx512vbmi")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("popcnt")
        && std::arch::is_x86_feature_detected!("bmi2")
}

/// [`ScanKernels::run_positions`] with AVX-512 VBMI2: the byte lanes 0..63, bit 7 set in
/// the lanes of `joins`, compressed by `bits`; the first 16 bytes (32 if
/// more than 16 bits are set) widened to `u32`, bit 7 moved to bit 31 and
/// `base` added. Storing the second 16 lanes only when they hold positions:
/// the articles' word stage 781–858 → 672–700 ns, signing 695k–702k →
/// 720k–727k docs/s (`sign_bench`, 3 alternating runs, Zen 4); the man
/// pages' word stage 6,247–6,333 → 6,145–6,225 ns.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi2")]
#[inline]
fn run_positions_vbmi2(bits: u64, base: u32, joins: u64, dst: &mut [u32; 32]) {
    use std::arch::x86_64::{
        _mm512_add_epi32, _mm512_and_si512, _mm512_castsi512_si128, _mm512_cvtepu8_epi32,
        _mm512_extracti32x4_epi32, _mm512_loadu_si512, _mm512_mask_blend_epi8,
        _mm512_maskz_compress_epi8, _mm512_or_si512, _mm512_set1_epi32, _mm512_slli_epi32,
        _mm512_storeu_si512,
    };
    const IOTA_JOINED: [u8; 64] = {
        let mut a = LANE_INDICES;
        let mut i = 0;
        while i < 64 {
            a[i] |= 0x80;
            i += 1;
        }
        a
    };
    // SAFETY: the constants are 64 readable bytes each (unaligned loads).
    let (iota, joined) = unsafe {
        (
            _mm512_loadu_si512(LANE_INDICES.as_ptr().cast()),
            _mm512_loadu_si512(IOTA_JOINED.as_ptr().cast()),
        )
    };
    let packed = _mm512_maskz_compress_epi8(bits, _mm512_mask_blend_epi8(joins, iota, joined));
    let widen = |x| {
        let x = _mm512_cvtepu8_epi32(x);
        let at = _mm512_add_epi32(
            _mm512_and_si512(x, _mm512_set1_epi32(0x7f)),
            _mm512_set1_epi32(base as i32),
        );
        _mm512_or_si512(
            at,
            _mm512_slli_epi32::<24>(_mm512_and_si512(x, _mm512_set1_epi32(0x80))),
        )
    };
    let lo = widen(_mm512_castsi512_si128(packed));
    // SAFETY: `dst` is 32 `u32`s, two registers of 16: its first half
    // (an unaligned store).
    unsafe { _mm512_storeu_si512(dst.as_mut_ptr().cast(), lo) };
    // The second 16 only when there are more than 16 positions (a block
    // of prose has 6 to 12 runs).
    if bits.count_ones() > 16 {
        let hi = widen(_mm512_extracti32x4_epi32::<1>(packed));
        // SAFETY: its second half, lanes 16..32 (an unaligned store).
        unsafe { _mm512_storeu_si512(dst.as_mut_ptr().add(16).cast(), hi) };
    }
}

/// Whether the running CPU has AVX2 (cached by the standard library).
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
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
            super::super::shingle::combine3_lanes(&words, c, k, &mut want);
            assert_eq!(got, want, "combine3, n = {n}");

            let (mut got, mut want) = (words.clone(), words);
            // SAFETY: as above.
            unsafe { finish_words_avx2(&mut got) };
            super::super::words::finish_lanes(&mut want);
            assert_eq!(got, want, "finish_words, n = {n}");
        }
    }

    /// Each compiled build of the word scanners (AVX2, AVX-512, and
    /// AVX-512 with the VBMI2 kernels, where the CPU has them; the portable
    /// build uses the scalar ones) writes the states the portable build writes, on
    /// texts of every kind of word the scanners tell apart: short and long
    /// ASCII, accented and capital accented (transcoded), joined across
    /// stripped characters, non-Latin, compatibility (`ﬁ`) and combining
    /// (zones), non-ASCII whitespace; in long runs (lanes) and short ones.
    /// The dispatch picks only the widest, so without this the AVX2 build
    /// ran only on CPUs without AVX-512.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn every_build_of_the_word_scanners_equals_the_portable_one() {
        const PIECES: [&str; 24] = [
            "word",
            "a",
            "Mixed",
            "internationalization",
            "ÉCOLE",
            "año",
            "Málaga",
            "l’homme",
            "don't",
            "naïve",
            "Straße",
            "日本語の文",
            "Добрый",
            "ДЕНЬ",
            "ﬁn",
            "e\u{301}t\u{e9}",
            "\u{a0}",
            "\u{3000}",
            "£5",
            "“quoted”",
            "x--y",
            "Ωmega",
            "7",
            "ünd-so-weiter",
        ];
        let mut state = 11u64;
        let mut next = |n: u64| crate::minhash::splitmix64(&mut state) % n;
        for case in 0..600 {
            let mut text = String::new();
            for _ in 0..next(if case % 3 == 0 { 12 } else { 300 }) {
                text.push_str(PIECES[next(PIECES.len() as u64) as usize]);
                text.push_str([" ", " ", " ", "\n", ", ", ""][next(6) as usize]);
            }
            assert_builds_agree(&text);
        }
    }

    /// Every build of the word scanners (those the CPU has) states the
    /// words of `text` as the portable one does, with three option sets.
    fn assert_builds_agree(text: &str) {
        use super::super::unicode::CharTable;
        use super::super::words::AsciiScratch;
        use super::super::NormalizeOptions;
        for o in [0, 3, 4] {
            let opts = NormalizeOptions {
                nfkc: o & 4 == 0,
                lowercase: o & 2 == 0,
                strip_punctuation: o & 1 == 0,
            };
            let chars = CharTable::get(&opts);
            let mut want = Vec::new();
            word_states_portable(text, chars, 9, &mut AsciiScratch::default(), &mut want);
            if has_avx2() {
                let mut got = Vec::new();
                // SAFETY: `has_avx2` found the feature.
                unsafe { word_states_avx2(text, chars, 9, &mut AsciiScratch::default(), &mut got) };
                assert_eq!(got, want, "AVX2, options {o}, {text:?}");
            }
            if has_avx512bw() && has_avx512dq() {
                let mut got = Vec::new();
                // SAFETY: the two found the features.
                unsafe {
                    word_states_avx512(text, chars, 9, &mut AsciiScratch::default(), &mut got)
                };
                assert_eq!(got, want, "AVX-512, options {o}, {text:?}");
            }
            if let Some(k) = Vbmi2::detect().filter(|_| has_avx512bw() && has_avx512dq()) {
                let mut got = Vec::new();
                let scratch = &mut AsciiScratch::default();
                // SAFETY: the token and the two found the features.
                unsafe { word_states_vbmi2(text, chars, 9, scratch, &mut got, k) };
                assert_eq!(got, want, "AVX-512 VBMI2, options {o}, {text:?}");
            }
        }
    }

    /// A word of two runs that ends a group of runs (the word kernel's 8),
    /// its second run near, at or past 256 bytes from the group's first:
    /// the kernel hashes it from the byte permutes only where they reach
    /// its second run, else leaves it to its caller. ASCII and Cyrillic
    /// text, lanes of 16 and 24 bytes (texts of long runs).
    #[test]
    fn two_run_words_far_from_their_group_read_alike() {
        for short in ["ab", "дом"] {
            for long in [false, true] {
                let word = if long { "достаточно" } else { short };
                for before in 0..=9 {
                    for gap in [1, 100, 200, 230, 240, 250, 255, 256, 260, 300] {
                        let mut text = format!("{word} ").repeat(before);
                        text.push_str(word);
                        text.push_str(&".".repeat(gap));
                        text.push_str(word);
                        text.push_str(&format!(" {word}").repeat(9));
                        assert_builds_agree(&text);
                    }
                }
            }
        }
    }

    /// `run_positions`, where the CPU has VBMI2, writes what the loop over
    /// set bits writes: masks with 0 to 32 bits set (runs of kept bytes
    /// alternate with others, so a block has at most 32), any `joins`
    /// (bits outside `bits` must not matter), bases up to the largest text.
    #[test]
    fn run_positions_equals_the_loop_over_bits() {
        let mut state = 5u64;
        let mut next = || crate::minhash::splitmix64(&mut state);
        let mut vector = 0;
        for case in 0..20_000u32 {
            // Every other bit at most: 0..=32 bits set.
            let bits = match case % 4 {
                0 => next() & 0x5555_5555_5555_5555,
                1 => next() & next() & 0xaaaa_aaaa_aaaa_aaaa,
                2 => 0x5555_5555_5555_5555 >> (next() % 64),
                _ => (next() & next() & next()) & 0x5555_5555_5555_5555,
            };
            let joins = next();
            let base = (next() as u32 % (1 << 25)) * 64;
            let mut want = [0u32; 32];
            let (mut m, mut b) = (0, bits);
            while b != 0 {
                let i = b.trailing_zeros();
                want[m] = (base + i) | ((((joins >> i) & 1) as u32) << 31);
                m += 1;
                b &= b - 1;
            }
            let mut got = [0u32; 32];
            assert!(!Scalar.run_positions(bits, base, joins, &mut got));
            if Vbmi2::detect().is_some_and(|k| k.run_positions(bits, base, joins, &mut got)) {
                vector += 1;
                assert_eq!(
                    got[..m],
                    want[..m],
                    "bits {bits:#x} joins {joins:#x} base {base}"
                );
            }
        }
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            vector > 0,
            has_avx512vbmi2(),
            "the vector path ran where it exists"
        );
    }

    /// `bmp_entries`, where the CPU has its instructions, classifies
    /// exactly the two- and three-byte leads of a block, as the table
    /// lookups one at a time do: on random text of ASCII, two-byte (Latin,
    /// Cyrillic, NBSP, capitals that map), three-byte (CJK, `’`, the
    /// ideographic space, the `ﬁ` ligature, full-width capitals) and
    /// four-byte characters, in blocks with 0 to 32 of them, for each
    /// normalization option.
    #[test]
    fn bmp_entries_equals_the_lookups_one_at_a_time() {
        use super::super::unicode::{mapped_low, CharTable, GATHER, KEPT, SLOW, SPACE};
        use super::super::NormalizeOptions;
        #[rustfmt::skip]
        const CHARS: [&str; 27] = [
            // ASCII and four-byte.
            "a", " ", ",", "😀",
            // Latin-1 (one block of the table: 0xC2/0xC3), of each class.
            "é", "\u{a0}", "«", "É", "ß",
            // Cyrillic (one block: 0xD0/0xD1), capitals that map and not.
            "Д", "д", "ё", "Ё", "ѐ", "Ѣ", "ѣ", "ж",
            // Other two-byte characters: Greek, a combining mark.
            "Ω", "\u{301}",
            // Three-byte.
            "€", "日", "’", "\u{3000}", "ﬁ", "Ａ", "カ", "\u{ffff}",
        ];
        let mut state = 17u64;
        let mut next = |n: u64| crate::minhash::splitmix64(&mut state) % n;
        let mut vector = 0;
        let mut sparse_taken = 0;
        for case in 0..3_000 {
            let mut text = String::new();
            // Dense Latin-1, dense Cyrillic (each in one block of the table:
            // the byte-permute path), dense two-byte, dense three-byte, dense
            // mixed, or anything.
            // Or sparse: ASCII with one of those now and then (Latin prose
            // has one to three a block, which the byte-permute path takes too).
            let (from, to) = [
                (4, 9),
                (9, 17),
                (4, 19),
                (19, 27),
                (4, 27),
                (0, 27),
                (4, 27),
                (4, 9),
            ][case % 8];
            let sparse = case % 8 >= 6;
            // Every other text one byte off: two-byte characters start at
            // odd positions, one in a block's last byte.
            if case / 8 % 2 == 1 {
                text.push('a');
            }
            while text.len() < 64 * 3 {
                if sparse && next(16) != 0 {
                    text.push_str(CHARS[next(3) as usize]);
                } else {
                    text.push_str(CHARS[(from + next(to - from)) as usize]);
                }
            }
            let mut bytes = text.as_bytes().to_vec();
            bytes.extend_from_slice(&[0; 64]);
            for o in [0, 3, 4] {
                let opts = NormalizeOptions {
                    nfkc: o & 4 == 0,
                    lowercase: o & 2 == 0,
                    strip_punctuation: o & 1 == 0,
                };
                let chars = CharTable::get(&opts);
                assert_eq!(Scalar.bmp_table(chars), None);
                let Some((k, bmp)) = Vbmi2::detect().map(|k| (k, k.bmp_table(chars).unwrap()))
                else {
                    continue;
                };
                for base in [0, 64, 128] {
                    let block: &[u8; 64] = bytes[base..base + 64].try_into().unwrap();
                    let (_, _, leads, _) = classify_utf8(block, opts.strip_punctuation);
                    let mut dst = *block;
                    assert_eq!(Scalar.bmp_entries(&bytes, base, leads, bmp, &mut dst), None);
                    assert_eq!(&dst, block);
                    let ours = |i: usize| leads >> i & 1 == 1 && bytes[base + i] < 0xf0;
                    // One block of the table (two-byte leads equal but for
                    // the last bit): the block comes back, its capitals that
                    // map to one two-byte character overwritten, but in
                    // byte 63.
                    let pairs: Vec<u8> = (0..64)
                        .filter(|&i| ours(i))
                        .map(|i| bytes[base + i] & 0xfe)
                        .collect();
                    let one_block = pairs.first().is_some_and(|&p| p < 0xe0)
                        && pairs.iter().all(|&p| p == pairs[0]);
                    let Some(t) = k.bmp_entries(&bytes, base, leads, bmp, &mut dst) else {
                        let n = pairs.len() as u32;
                        assert!(
                            n == 0 || (n < BMP_MIN && !one_block),
                            "it declines only blocks with none, or sparse ones that need the gather"
                        );
                        assert_eq!(&dst, block, "declined, and wrote nothing");
                        continue;
                    };
                    vector += 1;
                    if pairs.len() < BMP_MIN as usize {
                        sparse_taken += 1;
                    }
                    let (mut handled, mut kept, mut space, mut flagged) = (0, 0, 0, 0);
                    let mut block = bytes[base..base + 64].to_vec();
                    for i in (0..64).filter(|&i| ours(i)) {
                        let b = u32::from(bytes[base + i]);
                        let c = |k: usize| u32::from(bytes[base + i + k] & 0x3f);
                        let e = if b < 0xe0 {
                            chars.entry_low(((b & 0x1f) << 6) | c(1))
                        } else {
                            chars.entry_bmp(((b & 0x0f) << 12) | (c(1) << 6) | c(2))
                        };
                        handled |= 1 << i;
                        kept |= u64::from(e & KEPT != 0) << i;
                        space |= u64::from(e & SPACE != 0) << i;
                        flagged |= u64::from(e & (GATHER | SLOW) != 0) << i;
                        if let Some(to) = mapped_low(e).filter(|_| one_block && i < 63) {
                            let mut utf8 = [0; 4];
                            let to = char::from_u32(to).unwrap().encode_utf8(&mut utf8);
                            block[i..i + 2].copy_from_slice(to.as_bytes());
                            flagged &= !(1 << i);
                        }
                    }
                    let want = Entries {
                        handled,
                        kept,
                        space,
                        flagged,
                        rewritten: one_block,
                    };
                    assert_eq!(t, want, "options {o}, block {base} of {text:?}");
                    assert_eq!(
                        &dst[..],
                        &block[..],
                        "options {o}, block {base} of {text:?}"
                    );
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            (vector > 0, sparse_taken > 0),
            (has_avx512vbmi2(), has_avx512vbmi2()),
            "the vector path ran where it exists, on sparse blocks too"
        );
    }
}
