//! The normalization recipe (see `docs/examples.md`):
//!
//! 1. Unicode NFKC (ligatures, full-width forms and compatibility characters fold);
//! 2. fold case: in version 2 ([`TEXT_VERSION`], the default) full Unicode
//!    case folding (`ß` = `ss`, final sigma = sigma), then, if asked, fold
//!    accents and map look-alikes to their prototypes; in version 1
//!    ([`LEGACY_TEXT_VERSION`], data from before versions, kept bit for bit)
//!    lowercasing. Per character, context-free: `super::fold` says what each
//!    step does and why;
//! 3. remove every character that is neither a word character nor whitespace —
//!    removed, not replaced: `don't` becomes `dont`, `50,000` becomes `50000`;
//! 4. collapse whitespace runs to one ASCII space and trim.
//!
//! A *word character* is a Unicode alphanumeric (`char::is_alphanumeric`: the
//! Alphabetic and Numeric properties, which keep the combining vowel signs of
//! Indic scripts inside their words) or `_`. Each step can be switched off.
//! The words of the result (word shingles' units) are cut by
//! `super::tokens`: at spaces, and in version 2 also around each character
//! of the scripts written without spaces (Han, kana, Thai...); the string
//! itself has no space added.
//!
//! The output is built in one pass into a caller-owned buffer; pure ASCII
//! input skips NFKC (ASCII is NFKC-invariant) and takes a byte-level fast
//! path (but with `confusables`, which maps ASCII letters to others: `m` →
//! `rn`); other text goes character by character through the lookup table
//! of `super::unicode`, with the full NFKC algorithm only around the
//! characters that interact with their neighbours. Both are tested against
//! `reference_normalize` (in tests), the recipe spelled out step by step.

use serde::{Deserialize, Serialize};

/// The recipe version new collections get: see [`NormalizeOptions::version`].
pub const TEXT_VERSION: u8 = 2;
/// The recipe version of data written before recipes had versions (its
/// settings and files name none).
pub const LEGACY_TEXT_VERSION: u8 = 1;

/// Which steps of the recipe run. The default is the full recipe of the
/// current version; `fold_accents` and `confusables` are opt-in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NormalizeOptions {
    /// The recipe's version. 1: `lowercase` is Unicode lowercasing, and a
    /// word is a run between whitespace (the recipe before versions). 2
    /// ([`TEXT_VERSION`], the default): `lowercase` is full Unicode case
    /// folding (`ß` = `ss`, final sigma = sigma), and in scripts written
    /// without spaces (Han, Hiragana, Katakana, Thai, Lao, Khmer, Myanmar)
    /// every character, with the marks that attach to it, is a word of its
    /// own. Stored data keeps the version it was written with.
    pub version: u8,
    /// Apply Unicode NFKC before anything else.
    pub nfkc: bool,
    /// Fold case: Unicode lowercasing in version 1, full case folding in 2.
    pub lowercase: bool,
    /// Remove characters that are neither word characters nor whitespace.
    pub strip_punctuation: bool,
    /// Version 2 only: remove combining marks after canonical
    /// decomposition (`café` = `cafe`, `ё` = `е`).
    pub fold_accents: bool,
    /// Version 2 only: map look-alike characters to their prototype
    /// (the skeleton of Unicode TS #39: a Cyrillic `а` in a Latin word =
    /// `a`).
    pub confusables: bool,
}

impl Default for NormalizeOptions {
    fn default() -> Self {
        Self {
            version: TEXT_VERSION,
            nfkc: true,
            lowercase: true,
            strip_punctuation: true,
            fold_accents: false,
            confusables: false,
        }
    }
}

impl NormalizeOptions {
    /// The version-1 recipe (lowercase, whitespace words) with these steps.
    pub fn legacy(self) -> Self {
        Self {
            version: LEGACY_TEXT_VERSION,
            ..self
        }
    }

    /// Why these options cannot be used, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        if !(LEGACY_TEXT_VERSION..=TEXT_VERSION).contains(&self.version) {
            return Err(format!(
                "normalize.version must be {LEGACY_TEXT_VERSION} or {TEXT_VERSION}, not {}",
                self.version
            ));
        }
        if self.version < 2 && (self.fold_accents || self.confusables) {
            return Err(
                "normalize.fold_accents and normalize.confusables need normalize.version 2".into(),
            );
        }
        Ok(())
    }
}

impl NormalizeOptions {
    /// The recipe's version and opt-in steps, as stored data names them:
    /// `"1"`, `"2"`, `"2 fold_accents confusables"`.
    pub fn recipe_name(&self) -> String {
        let mut s = self.version.to_string();
        for (on, step) in [
            (self.fold_accents, "fold_accents"),
            (self.confusables, "confusables"),
        ] {
            if on {
                s.push(' ');
                s.push_str(step);
            }
        }
        s
    }
}

/// The version a [`NormalizeOptions::recipe_name`] names (0 if none).
pub fn recipe_version(name: &str) -> u8 {
    name.split(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Normalize `text` into a new `String`.
pub fn normalize(text: &str, opts: &NormalizeOptions) -> String {
    let mut out = String::with_capacity(text.len());
    normalize_into(text, opts, &mut out);
    out
}

/// Normalize `text` into `out` (cleared first). Whitespace in the output is
/// always single ASCII spaces with none at either end.
pub fn normalize_into(text: &str, opts: &NormalizeOptions, out: &mut String) {
    out.clear();
    out.reserve(text.len());
    // `confusables` maps ASCII too (`m` → `rn`): not a byte-for-byte table.
    if text.is_ascii() && !opts.confusables {
        normalize_ascii(text.as_bytes(), opts, out);
        return;
    }
    super::unicode::normalize_into(text, super::unicode::CharTable::get(opts), out);
}

/// The recipe spelled out, one step after the other on the whole text: the
/// crate's NFKC iterator, then lowercase, classify and collapse per
/// character. The definition the fast paths are tested against.
#[cfg(test)]
pub(crate) fn reference_normalize(text: &str, opts: &NormalizeOptions) -> String {
    use unicode_normalization::UnicodeNormalization;
    let mut out = String::new();
    let mut sink = Sink {
        out: &mut out,
        pending_space: false,
        strip: opts.strip_punctuation,
        opts: *opts,
    };
    if opts.nfkc {
        push_all(&mut sink, text.nfkc(), opts);
    } else {
        push_all(&mut sink, text.chars(), opts);
    }
    out
}

/// Every valid option combination: the 8 of version 1's three steps, then
/// the 32 of version 2's five (tests loop or draw over them by index).
#[cfg(test)]
pub(crate) fn all_options() -> Vec<NormalizeOptions> {
    let mut v = Vec::new();
    for version in [LEGACY_TEXT_VERSION, TEXT_VERSION] {
        let extra = if version >= 2 { 4 } else { 1 };
        for x in 0..extra {
            for o in 0..8 {
                v.push(NormalizeOptions {
                    version,
                    nfkc: o & 4 == 0,
                    lowercase: o & 2 == 0,
                    strip_punctuation: o & 1 == 0,
                    fold_accents: x & 1 != 0,
                    confusables: x & 2 != 0,
                });
            }
        }
    }
    v
}

/// A sample of [`all_options`] for the slower tests: of each version, all
/// steps, none of the three, no NFKC; and version 2 with `fold_accents`,
/// `confusables` and both.
#[cfg(test)]
pub(crate) fn some_options() -> Vec<NormalizeOptions> {
    let all = all_options();
    [0, 3, 4, 8, 11, 12, 16, 24, 32, 39]
        .into_iter()
        .map(|i| all[i])
        .collect()
}

/// How many [`all_options`] there are.
#[cfg(test)]
pub(crate) const OPTIONS: usize = 40;

/// The recipe for one ASCII byte, as a lookup: the byte to keep (already
/// lowercased if asked), [`SPACE`](Self::SPACE) for whitespace or
/// [`DROP`](Self::DROP) for a stripped byte. ASCII whitespace in Unicode's
/// sense is 0x09–0x0D and 0x20 (`u8::is_ascii_whitespace` leaves out 0x0B).
/// Shared by [`normalize`]'s byte path and the fused word scanner
/// ([`super::words`]), so the two cannot disagree on a byte.
#[derive(Debug)]
pub(crate) struct AsciiTable([u8; 128]);

impl AsciiTable {
    /// Kept bytes are ASCII, so codes ≥ 0x80 are free for the two classes.
    pub(crate) const SPACE: u8 = 0x80;
    pub(crate) const DROP: u8 = 0x81;

    const fn build(lowercase: bool, strip: bool) -> Self {
        let mut t = [0u8; 128];
        let mut i = 0;
        while i < 128 {
            let raw = i as u8;
            let b = if lowercase {
                raw.to_ascii_lowercase()
            } else {
                raw
            };
            t[i] = if matches!(b, b'\t'..=b'\r' | b' ') {
                Self::SPACE
            } else if strip && !(b.is_ascii_alphanumeric() || b == b'_') {
                Self::DROP
            } else {
                b
            };
            i += 1;
        }
        Self(t)
    }

    /// The table for `opts` (NFKC is the identity on ASCII).
    pub(crate) fn new(opts: &NormalizeOptions) -> &'static Self {
        static TABLES: [AsciiTable; 4] = [
            AsciiTable::build(false, false),
            AsciiTable::build(false, true),
            AsciiTable::build(true, false),
            AsciiTable::build(true, true),
        ];
        &TABLES[usize::from(opts.lowercase) * 2 + usize::from(opts.strip_punctuation)]
    }

    /// The class of an ASCII byte (`raw < 0x80`).
    #[inline(always)]
    pub(crate) fn class(&self, raw: u8) -> u8 {
        self.0[usize::from(raw & 0x7f)]
    }
}

/// The recipe on ASCII bytes, with the same output as the `char` path
/// (tested below): a table-driven byte loop instead of pushing chars one
/// call at a time.
fn normalize_ascii(text: &[u8], opts: &NormalizeOptions, out: &mut String) {
    let table = AsciiTable::new(opts);
    let mut buf = std::mem::take(out).into_bytes();
    buf.clear();
    let mut pending_space = false;
    for &raw in text {
        let c = table.class(raw);
        if c < AsciiTable::SPACE {
            if pending_space && !buf.is_empty() {
                buf.push(b' ');
            }
            pending_space = false;
            buf.push(c);
        } else if c == AsciiTable::SPACE {
            pending_space = true;
        }
    }
    *out = String::from_utf8(buf).expect("ASCII in, ASCII out");
}

/// Each character through the per-character steps (`super::fold`), then
/// classified.
#[cfg(test)]
fn push_all(sink: &mut Sink<'_>, chars: impl Iterator<Item = char>, opts: &NormalizeOptions) {
    for c in chars {
        super::fold::fold_char(c, opts, |l| sink.push(l));
    }
}

#[cfg(test)]
struct Sink<'a> {
    out: &'a mut String,
    /// A whitespace run was seen after the last kept character.
    pending_space: bool,
    strip: bool,
    opts: NormalizeOptions,
}

#[cfg(test)]
impl Sink<'_> {
    #[inline]
    fn push(&mut self, c: char) {
        if c.is_whitespace() {
            self.pending_space = true;
        } else if !self.strip || super::tokens::is_word_char(c, &self.opts) {
            if self.pending_space && !self.out.is_empty() {
                self.out.push(' ');
            }
            self.pending_space = false;
            self.out.push(c);
        }
        // Stripped characters leave `pending_space` untouched: "a - b" → "a b".
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(s: &str) -> String {
        normalize(s, &NormalizeOptions::default())
    }

    #[test]
    fn examples_md_documents_normalize_as_specified() {
        assert_eq!(
            norm("The night is dark and the moon is red."),
            "the night is dark and the moon is red"
        );
        assert_eq!(
            norm("I can see moon is red, the night is dark."),
            "i can see moon is red the night is dark"
        );
        assert_eq!(
            norm("Can I make 50,000 a month by day trading?"),
            "can i make 50000 a month by day trading"
        );
    }

    #[test]
    fn punctuation_is_removed_not_replaced() {
        assert_eq!(norm("don't stop"), "dont stop");
        assert_eq!(norm("snake_case stays"), "snake_case stays");
    }

    #[test]
    fn whitespace_collapses_and_trims() {
        assert_eq!(norm("  a \t\n b  \u{3000} c  "), "a b c");
        assert_eq!(norm("a - b"), "a b");
        assert_eq!(norm(" ... "), "");
        assert_eq!(norm(""), "");
    }

    #[test]
    fn nfkc_folds_compatibility_characters() {
        // Ligature, full-width letters, superscript digit, non-breaking space.
        assert_eq!(norm("ﬁne ＡＢＣ x²\u{a0}y"), "fine abc x2 y");
    }

    #[test]
    fn unicode_lowercase_and_letters_survive() {
        // Version 2 folds case (ß = ss, final sigma = sigma); version 1 lowercases.
        assert_eq!(norm("Straße ÉCOLE Ωμέγα"), "strasse école ωμέγα");
        assert_eq!(norm("STRASSENBAHN"), norm("Straßenbahn"));
        assert_eq!(norm("ΣΊΣΥΦΟΣ"), norm("σίσυφος"));
        let v1 = NormalizeOptions::default().legacy();
        assert_eq!(normalize("Straße ÉCOLE Ωμέγα", &v1), "straße école ωμέγα");
        assert_ne!(normalize("ΣΊΣΥΦΟΣ", &v1), normalize("σίσυφος", &v1));
        assert_eq!(norm("日本語のテキスト。"), "日本語のテキスト");
        assert_eq!(norm("שלום, עולם"), "שלום עולם");
    }

    #[test]
    fn zero_width_and_combining_marks_do_not_split_words() {
        // U+200B ZERO WIDTH SPACE is not White_Space: it is stripped, joining the halves.
        assert_eq!(norm("ab\u{200b}cd"), "abcd");
        // A decomposed é composes under NFKC.
        assert_eq!(norm("cafe\u{301}"), "café");
    }

    #[test]
    fn steps_can_be_switched_off() {
        let keep_case = NormalizeOptions {
            lowercase: false,
            ..Default::default()
        };
        assert_eq!(normalize("Hello, World", &keep_case), "Hello World");
        let keep_punct = NormalizeOptions {
            strip_punctuation: false,
            ..Default::default()
        };
        assert_eq!(normalize("Hello,  World!", &keep_punct), "hello, world!");
        let no_nfkc = NormalizeOptions {
            nfkc: false,
            ..Default::default()
        };
        // Case folding maps the ligature itself (CaseFolding.txt: ﬁ → fi);
        // lowercasing (version 1) or no case step leaves it.
        assert_eq!(normalize("ﬁne", &no_nfkc), "fine");
        assert_eq!(normalize("ﬁne", &no_nfkc.legacy()), "ﬁne");
        let neither = NormalizeOptions {
            lowercase: false,
            ..no_nfkc
        };
        assert_eq!(normalize("ﬁne", &neither), "ﬁne");
    }

    /// The `char` path, run on any input (the reference for the byte path).
    fn via_chars(s: &str, opts: &NormalizeOptions) -> String {
        let mut out = String::new();
        push_all(
            &mut Sink {
                out: &mut out,
                pending_space: false,
                strip: opts.strip_punctuation,
                opts: *opts,
            },
            s.chars(),
            opts,
        );
        out
    }

    #[test]
    fn ascii_fast_path_matches_the_unicode_path() {
        let s = "Mixed CASE, with: punctuation!! and\ttabs\x0bvt\x0cff";
        assert_eq!(norm(s), via_chars(s, &NormalizeOptions::default()));
        assert_eq!(norm("a\x0bb"), "a b", "VT is Unicode whitespace");
    }

    proptest::proptest! {
        #[test]
        fn ascii_byte_loop_equals_the_char_path(
            s in "[\\x00-\\x7f]{0,80}",
            lowercase: bool,
            strip: bool,
        ) {
            let opts = NormalizeOptions { nfkc: true, lowercase, strip_punctuation: strip, ..NormalizeOptions::default() };
            proptest::prop_assert_eq!(normalize(&s, &opts), via_chars(&s, &opts));
        }
    }
}
