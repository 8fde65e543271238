//! Where each unit of the normalized text came from in the text as posted:
//! the byte span of the original behind every character of
//! [`normalize`](super::normalize())'s output, so an explanation can mark
//! passages of the text a person wrote, not of its normalized form.
//!
//! The recipe is applied piece by piece, a piece being an extended grapheme
//! cluster (a letter with its combining marks, a Hangul syllable written as
//! jamo, an emoji sequence): NFKC composes only within such clusters, and
//! lowercasing and stripping are per character, so the pieces' outputs put
//! together are the recipe's output. That is *checked*, not assumed: the
//! result must equal `normalize(text)` exactly. If some input breaks the
//! assumption, the pieces become the runs between whitespace
//! ([`Alignment::Word`]: a unit's span is then its whole run), and as the
//! last resort the whole text ([`Alignment::Text`]). Spans always start and
//! end on grapheme boundaries of the original, so a segment cut at them
//! never splits a character, a combining sequence or an emoji.

use super::normalize::{normalize, NormalizeOptions};
use super::tokens::{for_each_word, WordSplit};
use unicode_normalization::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

/// How finely the normalized text could be traced back to the original.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alignment {
    /// Every unit to its own grapheme clusters (the normal case).
    Grapheme,
    /// Units to the whitespace-delimited run they came from.
    Word,
    /// Units to the whole text.
    Text,
}

impl Alignment {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Grapheme => "grapheme",
            Self::Word => "word",
            Self::Text => "text",
        }
    }
}

/// A byte range of the original text.
pub type Span = (usize, usize);

/// The normalized text with the span of the original behind each of its
/// characters (the spaces included: a space's span is the first whitespace
/// of the run it stands for).
#[derive(Debug)]
pub struct Aligned {
    pub normalized: String,
    /// One per `char` of `normalized`, in order.
    pub spans: Vec<Span>,
    pub alignment: Alignment,
    /// How `normalized` is cut into words (the recipe version's rule).
    split: WordSplit,
}

impl Aligned {
    /// The words of the normalized text (word shingles' units, cut as the
    /// shingles cut them: `tokens::for_each_word`), each with the span from
    /// its first character's origin to its last's. Words that come from one
    /// piece of the original (two ideographs of one compatibility
    /// character, `㍻` → `平` `成`) share its span, so a passage cut at
    /// word spans still never splits a grapheme of the original.
    pub fn words(&self) -> Vec<(&str, Span)> {
        // The byte offset of each character of `normalized`.
        let starts: Vec<usize> = self.normalized.char_indices().map(|(i, _)| i).collect();
        let mut out = Vec::new();
        for_each_word(&self.normalized, self.split, |s, e| {
            let first = starts.partition_point(|&b| b < s);
            let last = starts.partition_point(|&b| b < e) - 1;
            let span = (self.spans[first].0, self.spans[last].1);
            out.push((&self.normalized[s..e], span));
        });
        out
    }

    /// The characters of the normalized text (character shingles' units,
    /// spaces included), each with its span.
    pub fn chars(&self) -> Vec<(char, Span)> {
        self.normalized
            .chars()
            .zip(self.spans.iter().copied())
            .collect()
    }
}

/// Align `text` under the recipe `opts`.
pub fn align(text: &str, opts: &NormalizeOptions) -> Aligned {
    let expected = normalize(text, opts);
    let split = WordSplit::of(opts);
    if text.is_ascii() {
        // Every byte is a character, NFKC leaves it alone, and the one
        // multi-byte grapheme of ASCII (CR LF) is whitespace either way.
        let bytes = (0..text.len()).map(|i| (i, &text[i..i + 1]));
        let ascii = NormalizeOptions {
            nfkc: false,
            ..*opts
        };
        if let Some(spans) = trace(bytes, &ascii, &expected) {
            return Aligned {
                normalized: expected,
                spans,
                alignment: Alignment::Grapheme,
                split,
            };
        }
    }
    let graphemes = text.grapheme_indices(true);
    if let Some(spans) = trace(graphemes, opts, &expected) {
        return Aligned {
            normalized: expected,
            spans,
            alignment: Alignment::Grapheme,
            split,
        };
    }
    if let Some(spans) = trace(whitespace_runs(text), opts, &expected) {
        return Aligned {
            normalized: expected,
            spans,
            alignment: Alignment::Word,
            split,
        };
    }
    let spans = vec![(0, text.len()); expected.chars().count()];
    Aligned {
        normalized: expected,
        spans,
        alignment: Alignment::Text,
        split,
    }
}

/// The text cut into maximal runs of whitespace and of anything else.
fn whitespace_runs(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut rest = text;
    let mut at = 0;
    std::iter::from_fn(move || {
        let first = rest.chars().next()?;
        let white = first.is_whitespace();
        let len = rest
            .char_indices()
            .find(|&(_, c)| c.is_whitespace() != white)
            .map_or(rest.len(), |(i, _)| i);
        let piece = (at, &rest[..len]);
        rest = &rest[len..];
        at += len;
        Some(piece)
    })
}

/// The recipe applied to each piece on its own, recording each output
/// character's piece; `None` unless the output is exactly `expected`.
fn trace<'a>(
    pieces: impl Iterator<Item = (usize, &'a str)>,
    opts: &NormalizeOptions,
    expected: &str,
) -> Option<Vec<Span>> {
    let mut out = String::with_capacity(expected.len());
    let mut spans = Vec::with_capacity(expected.len());
    // The first whitespace since the last kept character, if any.
    let mut pending: Option<Span> = None;
    let mut checked = 0;
    for (start, piece) in pieces {
        let span = (start, start + piece.len());
        let mut emit = |c: char| {
            if c.is_whitespace() {
                pending.get_or_insert(span);
            } else if !opts.strip_punctuation || super::tokens::is_word_char(c, opts) {
                if let Some(space) = pending.take() {
                    if !out.is_empty() {
                        out.push(' ');
                        spans.push(space);
                    }
                }
                out.push(c);
                spans.push(span);
            }
        };
        let mut lower = |c: char| super::fold::fold_char(c, opts, &mut emit);
        if opts.nfkc {
            piece.nfkc().for_each(&mut lower);
        } else {
            piece.chars().for_each(&mut lower);
        }
        // Bail out at the first piece that leaves the recipe's output
        // (checking only what this piece added).
        let (done, now) = (checked, out.len());
        if now > expected.len() || expected.as_bytes()[done..now] != out.as_bytes()[done..] {
            return None;
        }
        checked = now;
    }
    (out == expected).then_some(spans)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn opts() -> NormalizeOptions {
        NormalizeOptions::default()
    }

    /// Each unit's span, read from the original, normalizes to the unit.
    fn check_words(text: &str) -> Aligned {
        let a = align(text, &opts());
        assert_eq!(a.normalized, normalize(text, &opts()));
        assert_eq!(a.spans.len(), a.normalized.chars().count());
        for (word, (s, e)) in a.words() {
            assert!(text.is_char_boundary(s) && text.is_char_boundary(e) && s < e);
            if a.alignment == Alignment::Grapheme {
                assert_eq!(normalize(&text[s..e], &opts()), word, "{text:?}");
            } else {
                assert!(normalize(&text[s..e], &opts()).contains(word), "{text:?}");
            }
        }
        a
    }

    #[test]
    fn ascii_words_map_to_their_letters_without_the_punctuation_around_them() {
        let text = "The night is dark, and \"the moon\" is red.";
        let a = check_words(text);
        assert_eq!(a.alignment, Alignment::Grapheme);
        let spans: Vec<&str> = a.words().iter().map(|(_, (s, e))| &text[*s..*e]).collect();
        assert_eq!(
            spans,
            ["The", "night", "is", "dark", "and", "the", "moon", "is", "red"]
        );
    }

    #[test]
    fn punctuation_inside_a_word_is_inside_its_span() {
        let text = "don't pay £50,000 now";
        let a = check_words(text);
        let spans: Vec<&str> = a.words().iter().map(|(_, (s, e))| &text[*s..*e]).collect();
        assert_eq!(spans, ["don't", "pay", "50,000", "now"]);
    }

    #[test]
    fn accents_combining_marks_ligatures_and_cjk_keep_whole_characters() {
        for text in [
            "Café “crème” à Zürich – São Paulo",
            "e\u{301}le\u{300}ve na\u{308}ive",
            "ﬁnal ﬂow ㎏ Ⅻ",
            "Москва́ — столица России",
            "東京都の天気は晴れです",
            "한국어 ᄒ\u{1161}ᆫ글",
            "family 👨‍👩‍👧 flag 🇫🇷 keycap 1️⃣ done",
            "ΣΊΣΥΦΟΣ ΟΔΥΣΣΕΥΣ",
        ] {
            check_words(text);
            let a = align(text, &opts());
            for (_, (s, e)) in a.chars() {
                assert!(
                    text.is_char_boundary(s) && text.is_char_boundary(e),
                    "{text:?}"
                );
            }
        }
    }

    #[test]
    fn a_char_unit_of_a_ligature_points_at_the_ligature() {
        let text = "ﬁ!";
        let a = align(text, &opts());
        assert_eq!(a.normalized, "fi");
        assert_eq!(a.chars(), [('f', (0, 3)), ('i', (0, 3))]);
    }

    #[test]
    fn spaces_point_at_the_first_whitespace_of_their_run() {
        let text = "a , \t b";
        let a = align(text, &opts());
        assert_eq!(a.normalized, "a b");
        assert_eq!(a.chars()[1], (' ', (1, 2)));
    }

    #[test]
    fn every_option_combination_is_traced() {
        for nfkc in [false, true] {
            for lowercase in [false, true] {
                for strip_punctuation in [false, true] {
                    let o = NormalizeOptions {
                        nfkc,
                        lowercase,
                        strip_punctuation,
                        ..NormalizeOptions::default()
                    };
                    let text = "ﬁne Café, 東京! e\u{301}";
                    let a = align(text, &o);
                    assert_eq!(a.normalized, normalize(text, &o));
                    assert_eq!(a.alignment, Alignment::Grapheme);
                }
            }
        }
    }

    /// Version 2's words (a word per solo character with what attaches
    /// to it) are the units, as the shingles cut them, and their spans
    /// start and end at grapheme boundaries of the original, in both
    /// versions and with every step of version 2.
    #[test]
    fn words_are_the_shingles_words_and_never_split_a_grapheme() {
        use crate::text::tokens::words;
        for o in crate::text::normalize::all_options() {
            for text in [
                "iPhone15发布会，2024年！",
                "ソニーのPlayStation 5が発売された。ｶﾀｶﾅ",
                "ภาษาไทย กินข้าว ที่นี่",
                "㍻ ㌔ 𠀀𠀁 e\u{301}日\u{301}",
                "Straße ΣΊΣΥΦΟΣ pаypal café гололёд",
                "👩\u{200d}💻 日本 🇫🇷",
            ] {
                let a = align(text, &o);
                let units: Vec<&str> = a.words().iter().map(|w| w.0).collect();
                assert_eq!(
                    units,
                    words(&a.normalized, WordSplit::of(&o)),
                    "{text:?} {o:?}"
                );
                let bounds: Vec<usize> = text
                    .grapheme_indices(true)
                    .map(|(i, _)| i)
                    .chain([text.len()])
                    .collect();
                for (w, (s, e)) in a.words() {
                    assert!(
                        bounds.contains(&s) && bounds.contains(&e),
                        "{w:?} at {s}..{e} of {text:?} ({o:?})"
                    );
                }
            }
        }
        let a = align("iPhone15发布会", &NormalizeOptions::default());
        let spans: Vec<(&str, &str)> = a
            .words()
            .iter()
            .map(|(w, (s, e))| (*w, &"iPhone15发布会"[*s..*e]))
            .collect();
        assert_eq!(
            spans,
            [
                ("iphone15", "iPhone15"),
                ("发", "发"),
                ("布", "布"),
                ("会", "会")
            ]
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn any_text_aligns_to_the_recipe_output(text in "\\PC{0,40}|[a-zA-Z \u{300}-\u{36f}\u{1100}-\u{11ff}ﬀ-ﬆ.,’“”£é]{0,40}") {
            let a = align(&text, &opts());
            prop_assert_eq!(&a.normalized, &normalize(&text, &opts()));
            prop_assert_eq!(a.spans.len(), a.normalized.chars().count());
            for &(s, e) in &a.spans {
                prop_assert!(s <= e && e <= text.len());
                prop_assert!(text.is_char_boundary(s) && text.is_char_boundary(e));
            }
            // Spans never go backwards.
            for w in a.spans.windows(2) {
                prop_assert!(w[0].0 <= w[1].0);
            }
        }
    }
}
