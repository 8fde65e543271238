//! The classes of a block's two- and three-byte characters at once, for
//! the [`Vbmi2`](super::Vbmi2) kernels: the tables it reads ([`BmpTables`]),
//! what it finds ([`Entries`]) and the AVX-512 VBMI/VBMI2 kernel
//! (`bmp_entries_vbmi2`, through [`ScanKernels::bmp_entries`]).

#[cfg(target_arch = "x86_64")]
use super::vbmi2::LANE_INDICES;
#[cfg(doc)]
use super::ScanKernels;

/// The tables [`ScanKernels::bmp_entries`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BmpTables<'a> {
    /// The class of every code point of the BMP, a byte each, and 3 more:
    /// [`CharTable::bmp_classes`](crate::text::unicode::CharTable::bmp_classes).
    pub classes: &'a [u8; crate::text::unicode::BMP_CLASSES],
    /// The classes of the code points below 0x800, a byte each:
    /// [`CharTable::low_classes`](crate::text::unicode::CharTable::low_classes).
    pub low_classes: &'a [u8; crate::text::unicode::LOW],
    /// What those code points map to:
    /// [`CharTable::low_maps`](crate::text::unicode::CharTable::low_maps).
    pub low_maps: &'a [[u8; crate::text::unicode::LOW]; 2],
    /// The one class of the CJK Unified Ideographs, if they have one:
    /// [`CharTable::han_class`](crate::text::unicode::CharTable::han_class).
    pub han: Option<u8>,
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
    /// The `GATHER`, `SLOW` or `ATTACH` characters, and the `SOLO` ones
    /// but the plain (`CLASS_SOLO`) ones (also for the caller).
    pub flagged: u64,
    /// The plain solo characters (`CLASS_SOLO`: kept, each a word of its
    /// own, nothing to transcode).
    pub solo: u64,
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
///
/// Always inlined, into the VBMI2 build of the Unicode scanner (which has
/// the features), with no `#[target_feature]` of its own (a function with
/// one cannot be `inline(always)`) and no closures (a closure is a
/// function of its own, without the caller's features), as
/// `vbmi2::group_states`: once version 2 added its solo mask, LLVM stopped
/// inlining the `#[target_feature]` version, and the call cost the Russian
/// man pages' text stage 13% (17% of its samples in this function).
///
/// **Safety.** Call only where AVX-512 F, BW, VBMI and VBMI2 and BMI2 are
/// enabled.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) unsafe fn bmp_entries_vbmi2(
    window: &[u8; 128],
    leads: u64,
    bmp: BmpTables<'_>,
    dst: &mut [u8; 64],
) -> Option<Entries> {
    use crate::text::unicode::{CLASS_FLAGGED, CLASS_KEPT, CLASS_MAPPED, CLASS_SOLO, CLASS_SPACE};
    use std::arch::x86_64::{
        _mm512_add_epi8, _mm512_and_si512, _mm512_castsi512_si128, _mm512_cmpeq_epi8_mask,
        _mm512_cmpge_epu32_mask, _mm512_cmplt_epu32_mask, _mm512_cmplt_epu8_mask,
        _mm512_cvtepu8_epi32, _mm512_extracti32x4_epi32, _mm512_i32gather_epi32,
        _mm512_loadu_si512, _mm512_mask_blend_epi32, _mm512_mask_blend_epi8,
        _mm512_maskz_compress_epi8, _mm512_or_si512, _mm512_permutex2var_epi8,
        _mm512_permutexvar_epi8, _mm512_set1_epi32, _mm512_set1_epi8, _mm512_setzero_si512,
        _mm512_slli_epi16, _mm512_slli_epi32, _mm512_storeu_si512, _mm512_sub_epi32,
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
        macro_rules! has {
            ($bit:expr) => {
                _mm512_test_epi8_mask(class, _mm512_set1_epi8($bit as i8)) & found
            };
        }
        // Capitals that map to one small letter: overwritten in a copy of
        // the block, so that their words need no transcoding (but one at
        // byte 63, whose continuation byte is the next block's).
        let mapped = has!(CLASS_MAPPED) & !(1 << 63);
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
            kept: has!(CLASS_KEPT),
            space: has!(CLASS_SPACE),
            flagged: has!(CLASS_FLAGGED) & !mapped,
            solo: has!(CLASS_SOLO),
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
    let second = _mm512_permutex2var_epi8(lo, _mm512_add_epi8(at, _mm512_set1_epi8(1)), hi);
    // Lanes past the last lead read position 0: cut them before depositing.
    let live = (1u64 << n) - 1;
    let third = _mm512_permutex2var_epi8(lo, _mm512_add_epi8(at, _mm512_set1_epi8(2)), hi);
    // The class bytes of U+3000–U+30FF and U+FF00–U+FF7F (`classes!`).
    // SAFETY: inside the 65,536 + 3 bytes of `bmp.classes` (unaligned loads).
    // No closure: it would be compiled without the caller's features.
    let (k0, k1, k2, k3, f0, f1) = unsafe {
        let at = bmp.classes.as_ptr();
        (
            _mm512_loadu_si512(at.add(0x3000).cast()),
            _mm512_loadu_si512(at.add(0x3040).cast()),
            _mm512_loadu_si512(at.add(0x3080).cast()),
            _mm512_loadu_si512(at.add(0x30c0).cast()),
            _mm512_loadu_si512(at.add(0xff00).cast()),
            _mm512_loadu_si512(at.add(0xff40).cast()),
        )
    };
    let (han_span, han_class) = match bmp.han {
        Some(class) => (_mm512_set1_epi32(0xa000 - 0x4e00), class),
        None => (_mm512_setzero_si512(), 0),
    };
    macro_rules! splat {
        ($bits:expr) => {
            _mm512_set1_epi32($bits as i32)
        };
    }
    // The class masks of 16 characters, from their first, second and
    // third bytes.
    macro_rules! classes {
        ($a:expr, $b:expr, $c:expr, $live:expr $(,)?) => {{
            let (a, b, c) = (
                _mm512_cvtepu8_epi32($a),
                _mm512_cvtepu8_epi32($b),
                _mm512_cvtepu8_epi32($c),
            );
            let b6 = _mm512_and_si512(b, splat!(0x3f));
            // Two bytes: 5 + 6 bits. Three: 4 + 6 + 6, so below 0x10000 (and
            // below it too in the lanes past the last lead, whatever they read).
            let two = _mm512_or_si512(
                _mm512_slli_epi32::<6>(_mm512_and_si512(a, splat!(0x1f))),
                b6,
            );
            let three = _mm512_or_si512(
                _mm512_or_si512(
                    _mm512_slli_epi32::<12>(_mm512_and_si512(a, splat!(0x0f))),
                    _mm512_slli_epi32::<6>(b6),
                ),
                _mm512_and_si512(c, splat!(0x3f)),
            );
            let cp = _mm512_mask_blend_epi32(_mm512_cmpge_epu32_mask(a, splat!(0xe0)), two, three);
            // Chinese and Japanese blocks (96% and 98% of the man pages'
            // with such characters) have only ideographs (one class, or
            // none: `han_span` 0), CJK symbols and kana (U+3000–U+30FF) and
            // full-width forms (U+FF00–U+FF7F): their classes without the
            // gather, whose latency was a quarter of the scanner's samples
            // on them, by byte permutes of those ranges' 384 class bytes
            // (each lane's low byte indexes them by its code point's low 7
            // bits; the other bytes are not tested).
            let in_han = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(cp, splat!(0x4e00)), han_span);
            let in_kana =
                _mm512_cmplt_epu32_mask(_mm512_sub_epi32(cp, splat!(0x3000)), splat!(0x100));
            let in_wide =
                _mm512_cmplt_epu32_mask(_mm512_sub_epi32(cp, splat!(0xff00)), splat!(0x80));
            let e = if (in_han | in_kana | in_wide | !$live) == u16::MAX {
                let kana = _mm512_mask_blend_epi32(
                    _mm512_test_epi32_mask(cp, splat!(0x80)),
                    _mm512_permutex2var_epi8(k0, cp, k1),
                    _mm512_permutex2var_epi8(k2, cp, k3),
                );
                let wide = _mm512_permutex2var_epi8(f0, cp, f1);
                let e = _mm512_mask_blend_epi32(in_wide, kana, wide);
                _mm512_mask_blend_epi32(in_han, e, splat!(han_class))
            } else {
                // SAFETY: `cp` has 16 bits, so the 4 bytes at it lie within the
                // 65,536 + 3 of `bmp.classes`. The class is the first of them (the
                // low byte of the lane), and the class bits are in its low 3 bits.
                unsafe { _mm512_i32gather_epi32::<1>(cp, bmp.classes.as_ptr().cast()) }
            };
            (
                u64::from(_mm512_test_epi32_mask(e, splat!(CLASS_KEPT))),
                u64::from(_mm512_test_epi32_mask(e, splat!(CLASS_SPACE))),
                u64::from(_mm512_test_epi32_mask(e, splat!(CLASS_FLAGGED))),
                u64::from(_mm512_test_epi32_mask(e, splat!(CLASS_SOLO))),
            )
        }};
    }
    let (mut kept, mut space, mut flagged, mut solo) = classes!(
        _mm512_castsi512_si128(first),
        _mm512_castsi512_si128(second),
        _mm512_castsi512_si128(third),
        live as u16,
    );
    if n > 16 {
        let (k1, s1, f1, o1) = classes!(
            _mm512_extracti32x4_epi32::<1>(first),
            _mm512_extracti32x4_epi32::<1>(second),
            _mm512_extracti32x4_epi32::<1>(third),
            (live >> 16) as u16,
        );
        kept |= k1 << 16;
        space |= s1 << 16;
        flagged |= f1 << 16;
        solo |= o1 << 16;
    }
    Some(Entries {
        handled: found,
        kept: _pdep_u64(kept & live, found),
        space: _pdep_u64(space & live, found),
        flagged: _pdep_u64(flagged & live, found),
        solo: _pdep_u64(solo & live, found),
        rewritten: false,
    })
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "x86_64")]
    use super::super::has_avx512vbmi2;
    use super::super::{classify_utf8, Scalar, ScanKernels, Vbmi2};
    use super::*;

    /// `bmp_entries`, where the CPU has its instructions, classifies
    /// exactly the two- and three-byte leads of a block, as the table
    /// lookups one at a time do: on random text of ASCII, two-byte (Latin,
    /// Cyrillic, NBSP, capitals that map), three-byte (CJK, `’`, the
    /// ideographic space, the `ﬁ` ligature, full-width capitals) and
    /// four-byte characters, in blocks with 0 to 32 of them, for each
    /// normalization option.
    #[test]
    fn bmp_entries_equals_the_lookups_one_at_a_time() {
        use crate::text::unicode::{CharTable, ATTACH, GATHER, KEPT, SLOW, SOLO, SPACE};
        #[rustfmt::skip]
        const CHARS: [&str; 31] = [
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
            // Version 2's: solo (Thai, a half-width kana that maps to one,
            // a square that is two), attaching.
            "ก", "\u{e34}", "ｶ", "㍻",
        ];
        #[rustfmt::skip]
        const CJK: [&str; 24] = [
            "a", " ", ",", "日", "中", "\u{4e00}", "\u{9fff}", "\u{3000}", "、", "。", "「",
            "カ", "か", "ー", "\u{3099}", "\u{309b}", "\u{3040}", "\u{30ff}", "Ａ", "，",
            "ｶ", "\u{ff00}", "\u{ff7f}", "々",
        ];
        const OUTSIDE: [&str; 8] = [
            "\u{2fff}", "\u{3100}", "\u{4dff}", "\u{a000}", "\u{feff}", "\u{ff80}", "€", "é",
        ];
        let mut state = 17u64;
        let mut next = |n: u64| crate::minhash::splitmix64(&mut state) % n;
        let mut vector = 0;
        let mut sparse_taken = 0;
        for case in 0..4_000 {
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
                (19, 31),
                (4, 31),
                (0, 31),
                (4, 31),
                (4, 9),
            ][case % 8];
            let sparse = case % 8 >= 6;
            // Every other text one byte off: two-byte characters start at
            // odd positions, one in a block's last byte.
            if case / 8 % 2 == 1 {
                text.push('a');
            }
            while case >= 3_000 && text.len() < 64 * 3 {
                // Chinese and Japanese blocks, of the ranges classified
                // without the gather (their ends included), and now and
                // then a character just outside them.
                if case % 2 == 0 && next(24) == 0 {
                    text.push_str(OUTSIDE[next(OUTSIDE.len() as u64) as usize]);
                } else {
                    text.push_str(CJK[next(CJK.len() as u64) as usize]);
                }
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
            for (o, opts) in crate::text::normalize::some_options()
                .into_iter()
                .enumerate()
            {
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
                    let (mut handled, mut kept, mut space, mut flagged, mut solo) = (0, 0, 0, 0, 0);
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
                        let plain_solo = e & (SOLO | GATHER | SLOW) == SOLO;
                        flagged |= u64::from(e & (GATHER | SLOW | ATTACH) != 0) << i;
                        solo |= u64::from(plain_solo) << i;
                        let two = (b < 0xe0)
                            .then(|| chars.low_map(((b & 0x1f) << 6) | c(1)))
                            .flatten();
                        if let Some(to) = two.filter(|_| one_block && i < 63) {
                            block[i..i + 2].copy_from_slice(&to);
                            flagged &= !(1 << i);
                        }
                    }
                    let want = Entries {
                        handled,
                        kept,
                        space,
                        flagged,
                        solo,
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
