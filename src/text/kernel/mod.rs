//! The text stage's SIMD, the one place in `text` allowed `unsafe` (for
//! calling `#[target_feature]` functions, and for intrinsics' loads and
//! stores: unaligned whole-register ones in the classifiers, masked ones
//! and gathers in the VBMI2 kernels), one concept a file:
//!
//! - [`classify`]: the byte classifier of the word scanners.
//!   [`classify_utf8`] turns 64 bytes of UTF-8 into four bit masks (kept
//!   and whitespace ASCII bytes, lead and continuation bytes of non-ASCII
//!   characters). The portable version ([`classify_utf8_swar`]) does it
//!   with 64-bit arithmetic and a multiply per mask to gather the high
//!   bits; with SSE2 (the x86-64 baseline) the compares take one
//!   instruction per 16 bytes and `pmovmskb` gathers the bits, which made
//!   non-ASCII text ~15% faster to normalize and hash (`examples/text_bench`,
//!   see BENCHMARKS.md). The compiler does not find `pmovmskb` on its own
//!   in either the SWAR or the byte-loop form. AVX2 does 32 bytes an
//!   instruction, and AVX-512 BW all 64, each compare giving its 64-bit
//!   mask directly; the widest the CPU has is picked, and [`word_states`]
//!   compiles the scanners themselves for it, so that the classifier
//!   inlines into them.
//! - this file: the dispatch. [`word_states`] and its builds of the word
//!   scanners (one per instruction set, the trampolines `word_states_*` and
//!   `scan_*`), [`warm`], the CPU feature checks, and [`ScanKernels`], the
//!   kernels the scanners are generic over, with [`Scalar`], the ones that
//!   decline.
//! - [`vbmi2`]: the [`Vbmi2`] kernels (AVX-512 VBMI/VBMI2 and BMI2): the
//!   positions of a block's runs, and the word loop in 64-bit lanes.
//! - [`bmp`]: the classes of a block's two- and three-byte characters at
//!   once, from the BMP tables ([`BmpTables`]), for [`Vbmi2`].
//! - [`lanes`]: two loops over 64-bit lanes, [`combine3`] (word 3-shingle
//!   hashes) and [`finish_words`] (MurmurHash3's finalizer over a text's
//!   word states), written as plain Rust in `shingle.rs` and `words.rs`
//!   and compiled here twice more, for AVX-512 F + DQ and for AVX2, the
//!   widest the running CPU has picked: the x86-64 baseline has no 64-bit
//!   vector multiply, so LLVM leaves them scalar otherwise (with AVX2 it
//!   builds the multiply from 32-bit ones).
//!
//! The sort and deduplication of the shingle hashes, which are not text,
//! are in `crate::hashsort`.
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
//! dispatch picks that one there). The VBMI2 kernels' argument is at
//! [`Vbmi2`].
#![allow(unsafe_code)]

mod bmp;
mod classify;
mod lanes;
mod vbmi2;

pub(crate) use bmp::{BmpTables, Entries};
pub(crate) use classify::classify_utf8;
#[cfg(doc)]
use classify::classify_utf8_swar;
pub(crate) use lanes::{combine3, finish_words};
use vbmi2::Vbmi2;

/// Whether the running CPU has AVX-512 BW (cached by the standard library).
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx512bw() -> bool {
    std::arch::is_x86_feature_detected!("avx512bw")
}

/// Whether the running CPU has AVX-512 F and DQ (the standard library
/// caches the detection, so this is a load).
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx512dq() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512dq")
}

/// Whether the running CPU has AVX2 (cached by the standard library).
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
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
                unsafe { word_states_avx512(text, chars, key, scratch, out, Scalar) };
            }
            return;
        }
        if has_avx2() {
            // SAFETY: `has_avx2` found the feature on the running CPU.
            unsafe { word_states_avx2(text, chars, key, scratch, out, Scalar) };
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

/// One build of the word scanners: `$build`, which picks the ASCII or the
/// Unicode scanner as [`word_states_portable`] does, and `$scan`, the
/// scanner (`#[inline(never)]`: one function per scanner, see
/// [`word_states`]), both compiled with `$features` and handed the
/// kernels `$kernels` (a token of [`ScanKernels`]). Written once for the
/// three builds as a macro: each expansion is the code that was written
/// out for its build before, so the builds compile as they did.
macro_rules! scanner_build {
    ($(#[$doc:meta])* $build:ident, $scan:ident, $features:literal, $kernels:ty) => {
        $(#[$doc])*
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        fn $build(
            text: &str,
            chars: &super::unicode::CharTable,
            key: u64,
            scratch: &mut super::words::AsciiScratch,
            out: &mut Vec<u64>,
            kernels: $kernels,
        ) {
            if super::words::is_ascii(text.as_bytes()) {
                $scan::<true>(text, chars, key, scratch, out, kernels)
            } else {
                $scan::<false>(text, chars, key, scratch, out, kernels)
            }
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        #[inline(never)]
        fn $scan<const ASCII: bool>(
            text: &str,
            chars: &super::unicode::CharTable,
            key: u64,
            scratch: &mut super::words::AsciiScratch,
            out: &mut Vec<u64>,
            kernels: $kernels,
        ) {
            super::words::utf8_word_states::<ASCII>(kernels, text, chars, key, scratch, out)
        }
    };
}

scanner_build!(
    /// [`word_states`] for AVX-512 BW + DQ, with the [`Scalar`] kernels.
    word_states_avx512,
    scan_avx512,
    "avx512bw,avx512dq",
    Scalar
);
scanner_build!(
    /// [`word_states_avx512`] with VBMI, VBMI2 and BMI2 as well, and the
    /// scanners instantiated with the [`Vbmi2`] kernels.
    word_states_vbmi2,
    scan_vbmi2,
    "avx512bw,avx512dq,avx512vbmi,avx512vbmi2,bmi2",
    Vbmi2
);
scanner_build!(
    /// [`word_states`] for AVX2, with the [`Scalar`] kernels.
    word_states_avx2,
    scan_avx2,
    "avx2",
    Scalar
);

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
    /// with fewer than [`BMP_MIN`](bmp::BMP_MIN) of them, where the loop is cheaper; the
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

#[cfg(test)]
mod tests {
    use super::*;

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
        for (o, opts) in super::super::normalize::some_options()
            .into_iter()
            .enumerate()
        {
            let chars = CharTable::get(&opts);
            let mut want = Vec::new();
            word_states_portable(text, chars, 9, &mut AsciiScratch::default(), &mut want);
            if has_avx2() {
                let mut got = Vec::new();
                let scratch = &mut AsciiScratch::default();
                // SAFETY: `has_avx2` found the feature.
                unsafe { word_states_avx2(text, chars, 9, scratch, &mut got, Scalar) };
                assert_eq!(got, want, "AVX2, options {o}, {text:?}");
            }
            if has_avx512bw() && has_avx512dq() {
                let mut got = Vec::new();
                let scratch = &mut AsciiScratch::default();
                // SAFETY: the two found the features.
                unsafe { word_states_avx512(text, chars, 9, scratch, &mut got, Scalar) };
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
}
