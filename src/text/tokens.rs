//! Words of the normalized text: the units of word shingles, cut by one
//! function (`for_each_word`) for every path that makes them (the
//! reference, the scanners' zones and fallbacks, the shingler on a
//! normalized string, the alignment behind `/explain`).
//!
//! **Version 1** ([`WordSplit::Whitespace`]): a word is a run between
//! spaces of the normalized text.
//!
//! **Version 2** ([`WordSplit::Scripts`]): the same runs, each cut further
//! in scripts written without spaces. A *solo* character is one whose
//! Line_Break property is ID (Han ideographs, Hiragana, most Katakana),
//! CJ (small kana, the prolonged sound mark `ー`) or SA (Thai, Lao, Khmer,
//! Myanmar...) and that is not *attaching*; an attaching character is one
//! whose Grapheme_Cluster_Break is Extend, SpacingMark or ZWJ (combining
//! marks, Thai and Indic vowel signs). Within a run, each solo character
//! with the attaching characters after it is a word of its own, and each
//! maximal stretch of the other characters (Latin, digits, Cyrillic,
//! Hangul, which Korean separates by spaces, with their marks) is a word:
//! `iphone15发布会` → `iphone15` `发` `布` `会`; `2024年` → `2024` `年`;
//! `กิน` → `กิ` `น`. The normalized string itself is unchanged (character
//! shingles see no inserted space).
//!
//! **Why characters, not dictionary words.** A Chinese or Japanese
//! sentence has no spaces, so in version 1 a whole clause was one word and
//! a one-character edit changed every word shingle of it (Jaccard 0 for a
//! 60-character paragraph with one character changed). With one word per
//! character, word 3-shingles are character trigrams inside such runs and
//! stay word shingles across them: a one-character edit changes at most k
//! shingles on each side of it. A dictionary segmenter (ICU's, for Chinese,
//! Japanese and the Southeast Asian scripts) gives linguistic words, but
//! its output depends on its dictionary's version (persisted shingles would
//! change with an upgrade), it is several times slower than a table lookup,
//! and a near-duplicate detector needs stable, local units more than
//! linguistic ones. Grapheme clusters, not code points, so that a Thai
//! vowel sign or a combining mark stays with its letter: a unit is never
//! part of a character as a reader sees it.

use super::normalize::NormalizeOptions;
use icu_properties::props::{GraphemeClusterBreak, LineBreak};
use icu_properties::CodePointMapData;
use std::sync::OnceLock;

/// How the normalized text is cut into words (the recipe version's rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WordSplit {
    /// Version 1: runs between spaces.
    Whitespace,
    /// Version 2: runs between spaces, and each solo character with the
    /// attaching characters after it (see the module docs).
    Scripts,
}

impl WordSplit {
    /// The rule of `opts`' recipe version.
    pub fn of(opts: &NormalizeOptions) -> Self {
        if opts.version >= 2 {
            Self::Scripts
        } else {
            Self::Whitespace
        }
    }
}

/// What a character is to [`WordSplit::Scripts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Unit {
    /// Neither of the others: part of a run.
    Other = 0,
    /// A word of its own, with the attaching characters after it.
    Solo = 1,
    /// Continues the word before it (a solo character's or a run).
    Attach = 2,
}

/// [`Unit`] from the Unicode properties (the definition; [`unit()`] caches it).
pub(crate) fn unit_of(c: char) -> Unit {
    let gcb = CodePointMapData::<GraphemeClusterBreak>::new().get(c);
    if matches!(
        gcb,
        GraphemeClusterBreak::Extend
            | GraphemeClusterBreak::SpacingMark
            | GraphemeClusterBreak::ZWJ
    ) {
        return Unit::Attach;
    }
    let lb = CodePointMapData::<LineBreak>::new().get(c);
    if matches!(
        lb,
        LineBreak::Ideographic | LineBreak::ConditionalJapaneseStarter | LineBreak::ComplexContext
    ) {
        Unit::Solo
    } else {
        Unit::Other
    }
}

/// Whether `c` is a word character of the recipe `opts` (kept when
/// punctuation is stripped): a Unicode alphanumeric or `_`, and in version
/// 2 also a mark of the scripts written without spaces (Line_Break SA:
/// Thai, Lao, Khmer, Myanmar), whose tone marks and some vowel signs are
/// not Alphabetic but spell the word: `ข้าว` (rice) is not `ขาว` (white).
/// Version 1 strips those marks; other scripts' marks that are not
/// Alphabetic (Hebrew points, a lone U+0301) are stripped in both.
#[inline]
pub(crate) fn is_word_char(c: char, opts: &NormalizeOptions) -> bool {
    c.is_alphanumeric() || c == '_' || (opts.version >= 2 && is_spelling_mark(c))
}

/// A mark (General_Category M) of a script with Line_Break SA.
pub(crate) fn is_spelling_mark(c: char) -> bool {
    use icu_properties::props::GeneralCategory;
    !c.is_ascii()
        && matches!(
            CodePointMapData::<GeneralCategory>::new().get(c),
            GeneralCategory::NonspacingMark
                | GeneralCategory::SpacingMark
                | GeneralCategory::EnclosingMark
        )
        && CodePointMapData::<LineBreak>::new().get(c) == LineBreak::ComplexContext
}

/// [`unit_of`], from a table of the BMP (64 KiB, made on first use, ~1 ms)
/// and on the fly beyond it.
#[inline]
pub(crate) fn unit(c: char) -> Unit {
    static BMP: OnceLock<Box<[u8]>> = OnceLock::new();
    let cp = c as usize;
    if cp >= 0x10000 {
        return unit_of(c);
    }
    let table = BMP.get_or_init(|| {
        (0..0x10000u32)
            .map(|cp| char::from_u32(cp).map_or(Unit::Other, unit_of) as u8)
            .collect()
    });
    match table[cp] {
        1 => Unit::Solo,
        2 => Unit::Attach,
        _ => Unit::Other,
    }
}

/// Call `f` with the byte range of each word of `normalized` (the output of
/// [`normalize`](super::normalize()): single spaces, none at either end),
/// in order.
#[inline]
pub(crate) fn for_each_word(normalized: &str, split: WordSplit, mut f: impl FnMut(usize, usize)) {
    if normalized.is_empty() {
        return;
    }
    let mut start = 0;
    for piece in normalized.split(' ') {
        let end = start + piece.len();
        if split == WordSplit::Whitespace || piece.is_ascii() {
            f(start, end);
        } else {
            split_run(piece, start, &mut f);
        }
        start = end + 1;
    }
}

/// The words of one run between spaces (not all ASCII) under
/// [`WordSplit::Scripts`], offset by `base`.
fn split_run(run: &str, base: usize, f: &mut impl FnMut(usize, usize)) {
    // The word being read: where it starts, and whether it is a solo
    // character's.
    let mut open: Option<(usize, bool)> = None;
    for (at, c) in run.char_indices() {
        let u = if c.is_ascii() { Unit::Other } else { unit(c) };
        match (u, open) {
            (Unit::Solo, Some((s, _))) => {
                f(base + s, base + at);
                open = Some((at, true));
            }
            (Unit::Solo, None) => open = Some((at, true)),
            (Unit::Attach, Some(_)) | (Unit::Other, Some((_, false))) => {}
            (Unit::Other, Some((s, true))) => {
                f(base + s, base + at);
                open = Some((at, false));
            }
            (Unit::Attach | Unit::Other, None) => open = Some((at, false)),
        }
    }
    if let Some((s, _)) = open {
        f(base + s, base + run.len());
    }
}

/// The words of `normalized` as strings (tests and references).
#[cfg(test)]
pub(crate) fn words(normalized: &str, split: WordSplit) -> Vec<&str> {
    let mut out = Vec::new();
    for_each_word(normalized, split, |s, e| out.push(&normalized[s..e]));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_2_words_cut_scripts_written_without_spaces() {
        let w = |s| words(s, WordSplit::Scripts);
        assert_eq!(w("iphone15发布会"), ["iphone15", "发", "布", "会"]);
        assert_eq!(w("2024年"), ["2024", "年"]);
        assert_eq!(w("ภาษาไทย"), ["ภ", "า", "ษ", "า", "ไ", "ท", "ย"]);
        assert_eq!(w("กิน"), ["กิ", "น"]);
        assert_eq!(
            w("ソニーのplaystation5が発売"),
            ["ソ", "ニ", "ー", "の", "playstation5", "が", "発", "売"]
        );
        assert_eq!(w("한국어 문장"), ["한국어", "문장"], "Hangul is a run");
        assert_eq!(w("москва café"), ["москва", "café"]);
        assert_eq!(w("\u{301}ab 日\u{301}x"), ["\u{301}ab", "日\u{301}", "x"]);
        assert_eq!(w(""), Vec::<&str>::new());
        assert_eq!(
            words("iphone15发布会 x", WordSplit::Whitespace),
            ["iphone15发布会", "x"]
        );
    }

    #[test]
    fn the_bmp_table_is_the_properties() {
        for cp in 0..0x10000u32 {
            if let Some(c) = char::from_u32(cp) {
                assert_eq!(unit(c), unit_of(c), "U+{cp:04X}");
            }
        }
        assert_eq!(unit('ー'), Unit::Solo);
        assert_eq!(unit('ぁ'), Unit::Solo);
        assert_eq!(unit('\u{e34}'), Unit::Attach);
        assert_eq!(unit('\u{200d}'), Unit::Attach);
        assert_eq!(unit('가'), Unit::Other);
        assert_eq!(unit('𠀀'), Unit::Solo, "CJK Extension B");
    }
}
