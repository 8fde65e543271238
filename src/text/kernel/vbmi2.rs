//! The [`Vbmi2`] kernels of the word scanners, in AVX-512 VBMI/VBMI2 and
//! BMI2: the token that proves the CPU has them, [`ScanKernels`] for it,
//! the positions of a block's runs (`run_positions_vbmi2`) and the word
//! loop in 64-bit lanes (`words_avx512`, `group_states`). The classes of a
//! block's characters (`bmp_entries`) are in [`bmp`](super::bmp).

#[cfg(target_arch = "x86_64")]
use super::bmp::bmp_entries_vbmi2;
#[cfg(target_arch = "x86_64")]
use super::has_avx512vbmi2;
use super::{BmpTables, Entries, ScanKernels};

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
    fn bmp_table(self, chars: &crate::text::unicode::CharTable) -> Option<BmpTables<'_>> {
        Some(BmpTables {
            classes: chars.bmp_classes(),
            low_classes: chars.low_classes(),
            low_maps: chars.low_maps(),
            han: chars.han_class(),
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
    use crate::text::words::{L, M};
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
    use crate::text::words::JOINED;
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
pub(super) const LANE_INDICES: [u8; 64] = {
    let mut a = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        a[i] = i as u8;
        i += 1;
    }
    a
};

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

#[cfg(test)]
mod tests {
    use super::super::Scalar;
    use super::*;

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
}
