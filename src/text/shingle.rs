//! k-shingles of a normalized string, hashed to 32-bit values.
//!
//! *Word* shingles are k consecutive words joined by one space; *character*
//! shingles are k consecutive characters (spaces included). Because
//! [`normalize`](super::normalize) leaves exactly one space between words,
//! every shingle is a contiguous slice of the normalized string: we hash that
//! slice in place (XXH3-64, seeded) and never build a shingle string.
//!
//! **Width: 32 bits.** A shingle set is stored for exact verification, so its
//! width is most of the memory per document; 32 bits halves it against 64.
//! Collisions are harmless in practice: for two documents of n and m distinct
//! shingles the expected number of spurious cross-collisions is about
//! n·m / 2^32 — 4·10⁻⁶ for two 130-word documents, 0.2 for two 30,000-word
//! documents, where one collision moves a Jaccard score by at most 1/union
//! (< 0.00002). Within one 1,000,000-shingle document about 116 pairs merge
//! (0.01% of its set). XXH3 is specified bit-for-bit, so values are identical
//! on every machine and across releases: they are persisted.
//!
//! A text with at least one but fewer than k units is one shingle of all of
//! them; a text with no units is a [`TextError::Empty`].
//!
//! **Multiset mode** counts repeats: the i-th occurrence (i ≥ 2) of a shingle
//! becomes its own element `hash(shingle, i)`, so the set is a bag and the
//! Jaccard score is the multiset one. The first occurrence keeps the plain
//! hash, so documents without repeats have the same set in both modes.

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Word or character k-grams.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShingleKind {
    Word,
    Char,
}

impl ShingleKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ShingleKind::Word => "word",
            ShingleKind::Char => "char",
        }
    }
}

/// How documents are cut into shingles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShingleOptions {
    pub kind: ShingleKind,
    /// Units per shingle (words or characters), ≥ 1.
    pub k: usize,
    /// Count repeated shingles (bag semantics) instead of distinct ones.
    pub multiset: bool,
}

impl Default for ShingleOptions {
    fn default() -> Self {
        Self {
            kind: ShingleKind::Word,
            k: 3,
            multiset: false,
        }
    }
}

/// A text that cannot be indexed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// Nothing is left after normalization: an empty set would equal every
    /// other empty set, so it is refused rather than matched.
    #[error("the text has no words or characters left after normalization")]
    Empty,
}

/// Sorted, distinct 32-bit shingle hashes: the exact set that Jaccard is computed on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShingleSet(Box<[u32]>);

impl ShingleSet {
    /// Build from arbitrary hashes (sorted and deduplicated here).
    pub fn from_hashes(mut hashes: Vec<u32>) -> Self {
        hashes.sort_unstable();
        hashes.dedup();
        Self(hashes.into_boxed_slice())
    }

    pub fn as_slice(&self) -> &[u32] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn into_boxed_slice(self) -> Box<[u32]> {
        self.0
    }
}

/// Cuts normalized text into hashed shingles.
#[derive(Clone, Debug)]
pub struct Shingler {
    opts: ShingleOptions,
    seed: u64,
}

/// Salt that separates the "i-th occurrence" hashes of multiset mode from plain ones.
const OCCURRENCE_SALT: u64 = 0x6f63_6375_7272_656e;

impl Shingler {
    pub fn new(opts: ShingleOptions, seed: u64) -> Self {
        assert!(opts.k >= 1, "shingle size k must be at least 1");
        Self { opts, seed }
    }

    pub fn options(&self) -> &ShingleOptions {
        &self.opts
    }

    /// Shingle a string that is already normalized.
    pub fn shingle(&self, normalized: &str) -> Result<ShingleSet, TextError> {
        self.shingle_with(normalized, &mut Vec::new())
    }

    /// As [`shingle`](Self::shingle), reusing `scratch` for the raw hashes.
    pub fn shingle_with(
        &self,
        normalized: &str,
        scratch: &mut Vec<u32>,
    ) -> Result<ShingleSet, TextError> {
        scratch.clear();
        match self.opts.kind {
            ShingleKind::Word => self.word_hashes(normalized, scratch),
            ShingleKind::Char => self.char_hashes(normalized, scratch),
        }
        if scratch.is_empty() {
            return Err(TextError::Empty);
        }
        scratch.sort_unstable();
        if self.opts.multiset {
            self.number_occurrences(scratch);
            scratch.sort_unstable();
        }
        scratch.dedup();
        Ok(ShingleSet(scratch.as_slice().into()))
    }

    #[inline]
    fn hash(&self, shingle: &str) -> u32 {
        let h = xxh3_64_with_seed(shingle.as_bytes(), self.seed);
        (h ^ (h >> 32)) as u32
    }

    fn word_hashes(&self, s: &str, out: &mut Vec<u32>) {
        if s.is_empty() {
            return;
        }
        let k = self.opts.k;
        // Byte offsets where each of the last k words starts (a ring buffer),
        // so a shingle is `s[start of word i-k+1 .. end of word i]`.
        let mut starts = vec![0usize; k];
        let mut words = 0usize;
        let bytes = s.as_bytes();
        let mut word_start = 0usize;
        let mut emit = |start: usize, end: usize, words: usize, out: &mut Vec<u32>| {
            starts[(words - 1) % k] = start;
            if words >= k {
                let first = starts[words % k];
                out.push(self.hash(&s[first..end]));
            }
        };
        for (i, &b) in bytes.iter().enumerate() {
            if b == b' ' {
                words += 1;
                emit(word_start, i, words, out);
                word_start = i + 1;
            }
        }
        words += 1;
        emit(word_start, bytes.len(), words, out);
        if words < k {
            out.push(self.hash(s));
        }
    }

    fn char_hashes(&self, s: &str, out: &mut Vec<u32>) {
        if s.is_empty() {
            return;
        }
        let k = self.opts.k;
        if s.is_ascii() {
            if s.len() < k {
                out.push(self.hash(s));
            } else {
                out.extend((0..=s.len() - k).map(|i| self.hash(&s[i..i + k])));
            }
            return;
        }
        let starts: Vec<usize> = s.char_indices().map(|(i, _)| i).collect();
        if starts.len() < k {
            out.push(self.hash(s));
            return;
        }
        for i in 0..=starts.len() - k {
            let end = starts.get(i + k).copied().unwrap_or(s.len());
            out.push(self.hash(&s[starts[i]..end]));
        }
    }

    /// `sorted` holds raw hashes with repeats; replace the i-th copy (i ≥ 2)
    /// of each value by `hash(value, i)`.
    fn number_occurrences(&self, sorted: &mut [u32]) {
        let mut prev = None;
        let mut run = 0u32;
        for slot in sorted.iter_mut() {
            let raw = *slot;
            if prev == Some(raw) {
                run += 1;
                let mut buf = [0u8; 8];
                buf[..4].copy_from_slice(&raw.to_le_bytes());
                buf[4..].copy_from_slice(&run.to_le_bytes());
                let h = xxh3_64_with_seed(&buf, self.seed ^ OCCURRENCE_SALT);
                *slot = (h ^ (h >> 32)) as u32;
            } else {
                prev = Some(raw);
                run = 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{normalize, NormalizeOptions};
    use std::collections::BTreeSet;

    fn shingler(kind: ShingleKind, k: usize) -> Shingler {
        Shingler::new(
            ShingleOptions {
                kind,
                k,
                multiset: false,
            },
            7,
        )
    }

    fn set_of(kind: ShingleKind, k: usize, text: &str) -> ShingleSet {
        let norm = normalize(text, &NormalizeOptions::default());
        shingler(kind, k).shingle(&norm).unwrap()
    }

    /// The reference definition: build the shingle strings, then hash them.
    fn reference(kind: ShingleKind, k: usize, text: &str) -> BTreeSet<String> {
        let norm = normalize(text, &NormalizeOptions::default());
        let units: Vec<String> = match kind {
            ShingleKind::Word => norm.split(' ').map(str::to_owned).collect(),
            ShingleKind::Char => norm.chars().map(String::from).collect(),
        };
        let sep = if kind == ShingleKind::Word { " " } else { "" };
        if units.len() < k {
            return BTreeSet::from([units.join(sep)]);
        }
        units.windows(k).map(|w| w.join(sep)).collect()
    }

    #[test]
    fn examples_md_word_shingle_counts() {
        let doc1 = "The night is dark and the moon is red.";
        assert_eq!(set_of(ShingleKind::Word, 3, doc1).len(), 7);
        assert_eq!(
            reference(ShingleKind::Word, 3, doc1),
            BTreeSet::from(
                [
                    "the night is",
                    "night is dark",
                    "is dark and",
                    "dark and the",
                    "and the moon",
                    "the moon is",
                    "moon is red"
                ]
                .map(String::from)
            )
        );
        assert_eq!(
            set_of(
                ShingleKind::Word,
                3,
                "I can see moon is red, the night is dark."
            )
            .len(),
            8
        );
        assert_eq!(
            set_of(ShingleKind::Word, 3, "The moon in the night is red.").len(),
            5
        );
    }

    #[test]
    fn examples_md_char_shingles() {
        assert_eq!(set_of(ShingleKind::Char, 2, "abcdabd").len(), 5);
        let s = shingler(ShingleKind::Char, 2);
        let expected = ShingleSet::from_hashes(
            ["ab", "bc", "cd", "da", "bd"]
                .iter()
                .map(|x| s.hash(x))
                .collect(),
        );
        assert_eq!(set_of(ShingleKind::Char, 2, "abcdabd"), expected);
    }

    #[test]
    fn hashes_are_the_hashes_of_the_shingle_strings() {
        for (kind, k, text) in [
            (ShingleKind::Word, 3, "a b c d e f a b c"),
            (ShingleKind::Word, 1, "one two two three"),
            (ShingleKind::Word, 5, "short text"),
            (ShingleKind::Char, 3, "héllo wörld ☃ snow"),
            (ShingleKind::Char, 4, "ab"),
            (ShingleKind::Char, 5, "What is the step by step guide?"),
        ] {
            let s = shingler(kind, k);
            let expected = ShingleSet::from_hashes(
                reference(kind, k, text).iter().map(|x| s.hash(x)).collect(),
            );
            assert_eq!(set_of(kind, k, text), expected, "{kind:?} k={k} {text:?}");
        }
    }

    #[test]
    fn fewer_units_than_k_is_one_shingle() {
        assert_eq!(set_of(ShingleKind::Word, 3, "hello world").len(), 1);
        assert_eq!(set_of(ShingleKind::Char, 5, "abc").len(), 1);
    }

    #[test]
    fn empty_text_is_an_error() {
        let s = shingler(ShingleKind::Word, 3);
        assert_eq!(s.shingle(""), Err(TextError::Empty));
        let c = shingler(ShingleKind::Char, 3);
        assert_eq!(c.shingle(""), Err(TextError::Empty));
    }

    #[test]
    fn multiset_mode_counts_repeats() {
        let bag = Shingler::new(
            ShingleOptions {
                kind: ShingleKind::Word,
                k: 1,
                multiset: true,
            },
            7,
        );
        let set = shingler(ShingleKind::Word, 1);
        assert_eq!(bag.shingle("a a a b").unwrap().len(), 4);
        assert_eq!(set.shingle("a a a b").unwrap().len(), 2);
        // Without repeats the two modes agree.
        assert_eq!(bag.shingle("a b c").unwrap(), set.shingle("a b c").unwrap());
        // Bag of "a a b" is a subset of bag of "a a a b".
        let small = bag.shingle("a a b").unwrap();
        let big = bag.shingle("a a a b").unwrap();
        assert!(small
            .as_slice()
            .iter()
            .all(|h| big.as_slice().binary_search(h).is_ok()));
    }

    #[test]
    fn hashes_are_stable_across_releases() {
        // Persisted data depends on these exact values: changing them is a format change.
        let s = shingler(ShingleKind::Word, 3);
        let set = s.shingle("the night is dark").unwrap();
        let golden = ShingleSet::from_hashes(vec![s.hash("the night is"), s.hash("night is dark")]);
        assert_eq!(set, golden);
        assert_eq!(s.hash("the night is"), s.hash("the night is"));
        let h = xxh3_64_with_seed(b"the night is", 7);
        assert_eq!(s.hash("the night is"), (h ^ (h >> 32)) as u32);
    }
}
