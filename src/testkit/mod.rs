//! Deterministic corpora and fixtures shared by the unit tests, the
//! integration tests, the benches and the examples (compiled for tests and
//! with the `testkit` feature, which the crate's own dev-dependency on
//! itself turns on; never in a release build).
//!
//! - [`QUESTION_PAIRS`]: the question pairs of `docs/examples.md` with
//!   their exact Jaccard values, derived by hand.
//! - [`vocabulary`]: distinct pseudo-words from a seed.
//! - [`families`]: unrelated documents plus planted families of
//!   near-duplicates (chains and stars of word edits): the corpus the
//!   correctness tests compare against brute force.
//! - [`Articles`]: a stream of ~130-word "articles" in sentences (a quarter
//!   stop words), seeded per document so any range generates in parallel,
//!   with a planted near-duplicate every `plant_every` documents: the
//!   corpus the benches and the load generator measure with. Its Unicode
//!   rendering (accented letters, curly quotes, ellipses) exercises the
//!   normalizer's non-ASCII path.
//!
//! - [`redis_cluster`]: a real Redis Cluster (or one Redis) of Debian's
//!   `redis-server` on free loopback ports, for the redis backend's tests.
//!
//! Everything is a pure function of its seed: LSH answers depend on the
//! texts, so a fixed corpus keeps every test and bench repeatable.

pub mod redis_cluster;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;

/// One question pair of `docs/examples.md`.
#[derive(Clone, Copy, Debug)]
pub struct QuestionPair {
    pub a: &'static str,
    pub b: &'static str,
    /// Exact Jaccard of the character 5-shingle sets (4 decimals).
    pub char5: f64,
    /// Exact Jaccard of the word 3-shingle sets (4 decimals).
    pub word3: f64,
}

/// The question pairs of `docs/examples.md`: character shingles catch
/// short near-duplicates that word shingles miss.
pub const QUESTION_PAIRS: [QuestionPair; 5] = [
    QuestionPair {
        a: "What is the step by step guide to invest in share market in india?",
        b: "What is the step by step guide to invest in share market?",
        char5: 0.8621,
        word3: 0.8333,
    },
    QuestionPair {
        a: "What was your first sexual experience like?",
        b: "What was your first sexual experience?",
        char5: 0.8684,
        word3: 0.8000,
    },
    QuestionPair {
        a: "What does manipulation mean?",
        b: "What does manipulation means?",
        char5: 0.9583,
        word3: 0.3333,
    },
    QuestionPair {
        a: "When can I expect my Cognizant confirmation mail?",
        b: "When can I expect Cognizant confirmation mail?",
        char5: 0.8085,
        word3: 0.3750,
    },
    QuestionPair {
        a: "Can I make 50,000 a month by day trading?",
        b: "Can I make 30,000 a month by day trading?",
        char5: 0.7500,
        word3: 0.4000,
    },
];

/// `n` distinct pseudo-words (syllables and a number) derived from `seed`.
pub fn vocabulary(seed: u64, n: usize) -> Vec<String> {
    const SYLLABLES: [&str; 16] = [
        "ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "va", "ze", "bo", "du", "fi", "gu", "ho",
        "ju",
    ];
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let r = crate::minhash::splitmix64(&mut state);
        let word: String = (0..4)
            .map(|i| SYLLABLES[((r >> (i * 4)) & 15) as usize])
            .collect::<String>()
            + &format!("{}", (r >> 16) % 100);
        if seen.insert(word.clone()) {
            out.push(word);
        }
    }
    out
}

/// `n` random word indices below `vocab`.
pub fn random_words(rng: &mut StdRng, n: usize, vocab: usize) -> Vec<usize> {
    (0..n).map(|_| rng.gen_range(0..vocab)).collect()
}

/// Word indices as a text of `w<index>` words: any vocabulary size, no
/// table needed.
pub fn numbered_words(words: &[usize]) -> String {
    words
        .iter()
        .map(|w| format!("w{w}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Replace `k` random positions of `words` with random words of `vocab`.
pub fn edit(rng: &mut StdRng, words: &mut [usize], k: usize, vocab: usize) {
    for _ in 0..k {
        let i = rng.gen_range(0..words.len());
        words[i] = rng.gen_range(0..vocab);
    }
}

/// `(id, text)`: `unrelated` documents of 40–100 words (`u0000`, ...) and
/// `families` planted families of 2–5 documents of 60–120 words (`f000-0`,
/// `f000-1`, ...), each member 0–2 word substitutions away from the previous
/// member (even families: chains, whose ends may fall below a threshold
/// while the family stays connected) or from the first (odd: stars).
pub fn families(seed: u64, unrelated: usize, families: usize) -> Vec<(String, String)> {
    let vocab = vocabulary(seed, 4000);
    let mut rng = StdRng::seed_from_u64(seed);
    let render = |w: &[usize]| {
        w.iter()
            .map(|&i| vocab[i].as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut docs = Vec::with_capacity(unrelated + families * 4);
    for i in 0..unrelated {
        let n = rng.gen_range(40..100);
        let w: Vec<usize> = (0..n).map(|_| rng.gen_range(0..vocab.len())).collect();
        docs.push((format!("u{i:04}"), render(&w)));
    }
    for f in 0..families {
        let n = rng.gen_range(60..120);
        let base: Vec<usize> = (0..n).map(|_| rng.gen_range(0..vocab.len())).collect();
        let size = rng.gen_range(2..6);
        let mut prev = base.clone();
        docs.push((format!("f{f:03}-0"), render(&base)));
        for v in 1..size {
            let mut w = if f % 2 == 0 {
                prev.clone()
            } else {
                base.clone()
            };
            let k = rng.gen_range(0..3);
            edit(&mut rng, &mut w, k, vocab.len());
            docs.push((format!("f{f:03}-{v}"), render(&w)));
            prev = w;
        }
    }
    docs
}

/// The 20 stop words that make up a quarter of an article's words.
pub const STOP_WORDS: &[&str] = &[
    "the", "of", "and", "a", "to", "in", "is", "that", "it", "for", "as", "with", "was", "on",
    "be", "by", "or", "this", "which", "from",
];

/// A deterministic stream of articles (see the module docs).
#[derive(Clone, Debug)]
pub struct Articles {
    seed: u64,
    /// Stop words first, then made-up lowercase ASCII words.
    ascii: Vec<String>,
    /// The same words with some vowels accented (é, ü, ô).
    unicode: Vec<String>,
    plant_every: usize,
}

impl Articles {
    /// A stream over a vocabulary of `vocab` words (stop words included),
    /// with a near-duplicate of document `n - 1` at every `n` with
    /// `n % plant_every == 1` (`plant_every` = 0: none).
    pub fn new(seed: u64, vocab: usize, plant_every: usize) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut seen: BTreeSet<String> = STOP_WORDS.iter().map(|w| w.to_string()).collect();
        let mut ascii: Vec<String> = STOP_WORDS.iter().map(|w| w.to_string()).collect();
        while ascii.len() < vocab.max(STOP_WORDS.len() + 1) {
            let len = rng.gen_range(3..=9);
            let w: String = (0..len)
                .map(|_| rng.gen_range(b'a'..=b'z') as char)
                .collect();
            if seen.insert(w.clone()) {
                ascii.push(w);
            }
        }
        let unicode = ascii
            .iter()
            .map(|w| {
                w.chars()
                    .map(|c| match c {
                        'e' if rng.gen_bool(0.5) => 'é',
                        'u' if rng.gen_bool(0.5) => 'ü',
                        'o' if rng.gen_bool(0.3) => 'ô',
                        c => c,
                    })
                    .collect()
            })
            .collect();
        Self {
            seed,
            ascii,
            unicode,
            plant_every,
        }
    }

    /// The document `n` is a planted near-duplicate of, if it is one.
    pub fn twin_of(&self, n: usize) -> Option<usize> {
        (self.plant_every > 1 && n % self.plant_every == 1).then(|| n - 1)
    }

    /// Word indices of the original article `n`: 110–150 words, a
    /// quarter of them stop words.
    fn original_words(&self, n: usize) -> Vec<u32> {
        let mut rng = StdRng::seed_from_u64(self.seed.rotate_left(32) ^ n as u64);
        let stops = STOP_WORDS.len() as u32;
        let vocab = self.ascii.len() as u32;
        let len = rng.gen_range(110..=150);
        (0..len)
            .map(|_| {
                if rng.gen_bool(0.25) {
                    rng.gen_range(0..stops)
                } else {
                    rng.gen_range(stops..vocab)
                }
            })
            .collect()
    }

    /// Word indices of document `n`: an original, or a planted twin (its
    /// original with 1–2 words substituted).
    pub fn words(&self, n: usize) -> Vec<u32> {
        match self.twin_of(n) {
            None => self.original_words(n),
            Some(original) => {
                let mut rng = StdRng::seed_from_u64(!self.seed ^ n as u64);
                let mut w = self.original_words(original);
                for _ in 0..rng.gen_range(1..=2) {
                    let at = rng.gen_range(0..w.len());
                    w[at] = rng.gen_range(STOP_WORDS.len() as u32..self.ascii.len() as u32);
                }
                w
            }
        }
    }

    /// Document `n` as ASCII sentences (capitalized, commas, full stops).
    pub fn text(&self, n: usize) -> String {
        self.render(&self.words(n), n, false)
    }

    /// Document `n` with accented words, curly quotes and ellipses.
    pub fn unicode_text(&self, n: usize) -> String {
        self.render(&self.words(n), n, true)
    }

    /// `words` as the normalization recipe leaves them: lowercase, joined
    /// by one space (the rendering's capitals and punctuation gone).
    pub fn normalized(&self, words: &[u32], unicode: bool) -> String {
        let vocab = if unicode { &self.unicode } else { &self.ascii };
        words
            .iter()
            .map(|&w| vocab[w as usize].as_str())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// `words` in sentences of 6–20 words; the punctuation is seeded by `n`.
    pub fn render(&self, words: &[u32], n: usize, unicode: bool) -> String {
        let vocab = if unicode { &self.unicode } else { &self.ascii };
        let mut rng = StdRng::seed_from_u64(self.seed ^ 0x7e47 ^ n as u64);
        let mut out = String::with_capacity(words.len() * 8);
        let mut left = 0;
        for &w in words {
            let word = &vocab[w as usize];
            if left == 0 {
                if !out.is_empty() {
                    out.push_str(if unicode { "… " } else { ". " });
                }
                left = rng.gen_range(6..=20);
                let mut cs = word.chars();
                let first = cs.next().expect("words are not empty");
                out.extend(first.to_uppercase());
                out.push_str(cs.as_str());
            } else {
                out.push(' ');
                if unicode && rng.gen_bool(0.05) {
                    out.push('“');
                    out.push_str(word);
                    out.push('”');
                } else {
                    out.push_str(word);
                }
                if rng.gen_bool(0.06) {
                    out.push(',');
                }
            }
            left -= 1;
        }
        out.push(if unicode { '…' } else { '.' });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpora_are_functions_of_their_seed() {
        assert_eq!(families(3, 20, 5), families(3, 20, 5));
        assert_ne!(families(3, 20, 5), families(4, 20, 5));
        let a = Articles::new(9, 500, 10);
        assert_eq!(a.text(17), Articles::new(9, 500, 10).text(17));
        assert_eq!(vocabulary(1, 50).len(), 50);
    }

    #[test]
    fn planted_twins_differ_from_their_original_by_a_word_or_two() {
        let a = Articles::new(2, 2000, 10);
        assert_eq!(a.twin_of(11), Some(10));
        assert_eq!(a.twin_of(12), None);
        let (orig, twin) = (a.words(10), a.words(11));
        assert_eq!(orig.len(), twin.len());
        let changed = orig.iter().zip(&twin).filter(|(x, y)| x != y).count();
        assert!((1..=2).contains(&changed), "{changed}");
        assert!(!a.unicode_text(10).is_ascii());
    }

    #[test]
    fn normalized_words_are_what_the_recipe_makes_of_the_rendered_text() {
        let a = Articles::new(5, 3000, 0);
        let opts = crate::text::NormalizeOptions::default();
        for n in 0..50 {
            let w = a.words(n);
            assert_eq!(
                crate::text::normalize(&a.text(n), &opts),
                a.normalized(&w, false)
            );
            assert_eq!(
                crate::text::normalize(&a.unicode_text(n), &opts),
                a.normalized(&w, true)
            );
        }
    }

    #[test]
    fn families_hold_their_members_and_unrelated_documents() {
        let docs = families(7, 30, 6);
        assert_eq!(
            docs.iter().filter(|(id, _)| id.starts_with('u')).count(),
            30
        );
        assert!(docs.iter().any(|(id, _)| id == "f005-1"));
    }
}
