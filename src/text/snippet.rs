//! The first words of a text as it was posted: what a list of documents
//! shows under each id (`POST /snippets`), so a reader sees what a document
//! is without opening it.
//!
//! **Words are the recipe's words.** The text is aligned to its normalized
//! form ([`align`]) and cut after the end of its `n`-th word as the
//! shingles count words ([`tokens`](super::tokens)): in version 2 a run
//! between spaces, and each Han, kana or Thai character (with the marks
//! that attach to it) a word of its own, so 40 words of a Chinese text are
//! its first 40 characters and of a French one its first 40 space-separated
//! words; in version 1 only runs between spaces (a Chinese clause is one
//! word there). The snippet is a slice of the *original* text, from its
//! first non-space character to the end of the last word's span: accents,
//! case, punctuation inside it, and any invisible character (a bidi mark)
//! are kept as posted. The caller shows it as plain text.
//!
//! **Bounded.** A recipe word can be long (a URL, a line of base64, a
//! version-1 Chinese clause): a snippet holds at most [`CHARS_PER_WORD`]
//! characters per word asked (plus [`SLACK_CHARS`]), cut on a grapheme
//! boundary, after the last whole word that fits when there is one. Only
//! that window of the text is aligned, so the cost does not grow with the
//! document.

use super::align::align;
use super::normalize::NormalizeOptions;
use unicode_segmentation::UnicodeSegmentation;

/// Characters a snippet may hold per word asked for (see the module docs).
pub const CHARS_PER_WORD: usize = 24;
/// Characters a snippet may hold beyond `CHARS_PER_WORD` per word.
pub const SLACK_CHARS: usize = 40;

/// The most bytes of a text [`first_words`] looks at for `words` words: a
/// reader may hand it only this prefix (saying that the text goes on).
pub fn window_bytes(words: usize) -> usize {
    max_chars(words).saturating_mul(4).saturating_add(4)
}

fn max_chars(words: usize) -> usize {
    words
        .saturating_mul(CHARS_PER_WORD)
        .saturating_add(SLACK_CHARS)
}

/// A snippet: a slice of the text, and whether the text goes on after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snippet<'a> {
    pub text: &'a str,
    pub truncated: bool,
}

/// The first `words` words of `text` under the recipe `opts` (see the
/// module docs). `more` says that `text` is only a prefix of the document
/// (the rest was not read): the snippet is then truncated whatever it
/// holds.
pub fn first_words<'a>(
    text: &'a str,
    words: usize,
    opts: &NormalizeOptions,
    more: bool,
) -> Snippet<'a> {
    let t = text.trim_start();
    let words = words.max(1);
    let most = max_chars(words);
    // Most texts' words are short: align a window of about 8 characters a
    // word first, and a larger one only when it holds too few words.
    let mut chars = words
        .saturating_mul(8)
        .saturating_add(SLACK_CHARS)
        .min(most);
    let end = loop {
        let window = prefix_chars(t, chars);
        if window.is_empty() {
            break 0;
        }
        let aligned = align(window, opts);
        let spans: Vec<(usize, usize)> = aligned.words().iter().map(|w| w.1).collect();
        if spans.len() > words {
            // A word follows the n-th inside the window: the n-th is whole.
            break spans[words - 1].1;
        }
        if window.len() == t.len() {
            break t.len();
        }
        if chars < most {
            chars = chars.saturating_mul(3).min(most);
            continue;
        }
        // The window is full before the n-th word ends: stop after the
        // last word that ends before the window does, if any.
        break match spans.iter().rev().find(|s| s.1 < window.len()) {
            Some(s) if s.1 > 0 => s.1,
            _ => window.len(),
        };
    };
    let snippet = t[..end].trim_end();
    let rest = &t[end..];
    Snippet {
        text: snippet,
        truncated: more || !rest.trim().is_empty(),
    }
}

/// The longest prefix of `s` of at most `max` characters that ends on a
/// grapheme boundary (a letter and its combining marks, an emoji
/// sequence, are never split); and whether `s` goes on after it.
pub fn cut_chars(s: &str, max: usize) -> (&str, bool) {
    let prefix = prefix_chars(s, max);
    (prefix, prefix.len() < s.len())
}

fn prefix_chars(s: &str, max: usize) -> &str {
    // Fast path: a string of at most `max` bytes has at most `max` chars.
    if s.len() <= max {
        return s;
    }
    let mut chars = 0usize;
    let mut end = 0usize;
    for (at, g) in s.grapheme_indices(true) {
        let n = g.chars().count();
        if chars + n > max {
            return &s[..at];
        }
        chars += n;
        end = at + g.len();
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2() -> NormalizeOptions {
        NormalizeOptions::default()
    }

    fn cut(text: &str, n: usize) -> (&str, bool) {
        let s = first_words(text, n, &v2(), false);
        (s.text, s.truncated)
    }

    #[test]
    fn spaced_scripts_are_cut_after_the_nth_word_keeping_the_original_characters() {
        let fr = "  L’été, à Montréal : « Ça coûte 12 £ » — dit-elle.";
        assert_eq!(cut(fr, 3), ("L’été, à Montréal", true));
        assert_eq!(cut(fr, 100), (fr.trim(), false));
        let ru = "Съешь же ещё этих мягких французских булок";
        assert_eq!(cut(ru, 4), ("Съешь же ещё этих", true));
        assert_eq!(cut("one two", 2), ("one two", false));
        // Punctuation after the last word of the whole text is kept.
        assert_eq!(cut("one two.", 2), ("one two.", false));
        assert_eq!(cut("one two. three", 2), ("one two", true));
    }

    #[test]
    fn han_kana_and_thai_count_a_word_per_character() {
        assert_eq!(cut("北京欢迎你，我们的朋友", 4), ("北京欢迎", true));
        assert_eq!(cut("iPhone15发布会在北京", 3), ("iPhone15发布", true));
        assert_eq!(cut("東京タワーへ行きます", 2), ("東京", true));
        // A Thai vowel sign stays with its letter.
        assert_eq!(cut("กินข้าว", 1), ("กิ", true));
        // Version 1: a run between spaces is one word.
        let v1 = v2().legacy();
        let s = first_words("北京欢迎你 朋友", 1, &v1, false);
        assert_eq!((s.text, s.truncated), ("北京欢迎你", true));
    }

    #[test]
    fn hostile_text_comes_back_verbatim_and_invisible_marks_are_kept() {
        let t = "\u{202E}<img src=x onerror=alert(1)> \u{200F}שלום world";
        let s = first_words(t, 3, &v2(), false);
        assert!(s.text.starts_with('\u{202E}'), "{:?}", s.text);
        assert!(s.text.contains("<img src=x"), "{:?}", s.text);
    }

    #[test]
    fn a_long_word_is_cut_on_a_grapheme_boundary_within_the_bound() {
        let blob = "é".repeat(10_000);
        let s = first_words(&blob, 2, &v2(), false);
        assert_eq!(s.text.chars().count(), max_chars(2));
        assert!(s.truncated);
        // A whole word before the long one is kept, the long one dropped.
        let t = format!("début {blob}");
        let s = first_words(&t, 2, &v2(), false);
        assert_eq!((s.text, s.truncated), ("début", true));
        // A combining mark is never split from its letter.
        let marks = "e\u{301}".repeat(100);
        let (p, more) = cut_chars(&marks, 5);
        assert_eq!((p, more), ("e\u{301}e\u{301}", true));
    }

    #[test]
    fn long_words_are_found_past_the_first_window() {
        // 20-letter words: the first window (8 characters a word) holds
        // too few of them, the snippet still has all three.
        let word = "anticonstitutionnellement";
        let t = [word; 6].join(" ");
        let want = [word; 3].join(" ");
        assert_eq!(cut(&t, 3), (want.as_str(), true));
    }

    #[test]
    fn a_prefix_read_is_truncated_and_an_empty_text_is_empty() {
        let s = first_words("one two", 5, &v2(), true);
        assert_eq!((s.text, s.truncated), ("one two", true));
        assert_eq!(cut("   ", 3), ("", false));
        assert!(window_bytes(40) >= 4 * max_chars(40));
    }
}
