//! The whole query path against brute force: LSH + verification may miss a
//! pair (rarely), but must never invent one.
//!
//! **What is promised.** For a query q and threshold t, every match is a
//! stored document d ≠ q with exact Jaccard J(q, d) ≥ t, reported *exactly*
//! (bit-for-bit the brute-force value), sorted by score descending then id;
//! and a pair at J = t becomes a candidate with probability ≥ 0.99, so over
//! many pairs at and above the threshold the engine finds ≥ 99% of them.
//!
//! **Two oracles.**
//! - *hashed brute force*: [`crate::jaccard::jaccard`] over every stored
//!   record's shingle set, every pair — checks LSH and verification;
//! - *string brute force*: `HashSet<String>` of word 3-grams of the raw text
//!   after a naive, separately written normalizer (interned to numbers for
//!   speed: equal numbers ⇔ equal strings) — checks normalize, shingle and
//!   hash end to end. 32-bit shingle hashes may collide (about n·m/2³²
//!   per pair of documents); collisions are detected, never assumed away.
//!
//! **Corpora.** Synthetic and deterministic from a seed: a vocabulary of a
//! few thousand made-up words (a fifth with é/ü/ñ; half the documents are
//! pure ASCII, so both the ASCII fast path and NFKC run),
//! base documents of 60–150 words, and planted variants made by word edits
//! (delete / insert / substitute / swap) applied one at a time until the
//! variant's exact Jaccard with its base falls into a target band, so the
//! number of pairs just above the threshold is controlled rather than hoped
//! for. Every text is rendered with random case, punctuation, apostrophes
//! inside words and odd whitespace, which normalization must undo.
//!
//! proptest draws the corpus *shape* and seed, the threshold, the limit and
//! some deletes and replaces; failures are not persisted to a regressions
//! file (the failing input is printed instead).

use super::*;
use crate::jaccard;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap, HashSet};

// ---------------------------------------------------------------- corpus --

/// ASCII syllables first, then a few accented ones (precomposed, so NFKC
/// leaves them alone and the naive oracle needs no NFKC of its own).
const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "do", "gu", "fe", "ha", "ji", "ba",
    "co", "wy", "xe", "qu", "re", "mo", "li", "té", "mü", "ño",
];

/// Share of the vocabulary that is pure ASCII: half the base documents use
/// only these words (and plain punctuation), so both the ASCII fast path and
/// the NFKC path of normalization are exercised.
const ASCII_SHARE: f64 = 0.8;

fn ascii_words(vocabulary: usize) -> usize {
    (vocabulary as f64 * ASCII_SHARE) as usize
}

/// A target range [lo, hi) of Jaccard similarity for a planted variant, with
/// its share of the variants. `lo == 1.0` means "same words, restyled text".
#[derive(Clone, Copy, Debug)]
struct Band {
    lo: f64,
    hi: f64,
    weight: u32,
}

const fn band(lo: f64, hi: f64, weight: u32) -> Band {
    Band { lo, hi, weight }
}

/// Planted variants spread over 0.5–1.0 for the property tests.
const SPREAD: &[Band] = &[
    band(0.5, 0.7, 2),
    band(0.7, 0.8, 2),
    band(0.8, 0.85, 3),
    band(0.85, 0.95, 2),
    band(0.95, 1.0, 1),
    band(1.0, 1.0, 1),
];

/// The recall corpus: weighted towards the threshold, where misses happen.
const NEAR_THRESHOLD: &[Band] = &[
    band(0.5, 0.8, 20),
    band(0.8, 0.82, 35),
    band(0.82, 0.85, 20),
    band(0.85, 0.95, 15),
    band(0.95, 1.0, 5),
    band(1.0, 1.0, 5),
];

#[derive(Clone, Debug)]
struct Shape {
    seed: u64,
    vocabulary: usize,
    bases: usize,
    /// Bases that get variants (the first ones).
    with_variants: usize,
    max_variants: usize,
    bands: &'static [Band],
}

struct Doc {
    id: String,
    words: Vec<u32>,
    text: String,
}

/// A variant planted at a known word-trigram Jaccard with its base.
struct Planted {
    base: usize,
    variant: usize,
    jaccard: f64,
}

struct Corpus {
    vocab: Vec<String>,
    docs: Vec<Doc>,
    planted: Vec<Planted>,
    rng: StdRng,
}

impl Corpus {
    fn generate(shape: &Shape) -> Self {
        let mut rng = StdRng::seed_from_u64(shape.seed);
        let vocab = vocabulary(&mut rng, shape.vocabulary);
        let mut corpus = Self {
            vocab,
            docs: Vec::new(),
            planted: Vec::new(),
            rng,
        };
        for _ in 0..shape.bases {
            let len = corpus.rng.gen_range(60..=150);
            let words_from = if corpus.rng.gen_bool(0.5) {
                ascii_words(corpus.vocab.len())
            } else {
                corpus.vocab.len()
            } as u32;
            let words = (0..len)
                .map(|_| corpus.rng.gen_range(0..words_from))
                .collect();
            corpus.push(words);
        }
        let total_weight: u32 = shape.bands.iter().map(|b| b.weight).sum();
        for base in 0..shape.with_variants.min(shape.bases) {
            for _ in 0..corpus.rng.gen_range(1..=shape.max_variants) {
                let mut pick = corpus.rng.gen_range(0..total_weight);
                let band = *shape
                    .bands
                    .iter()
                    .find(|b| {
                        let hit = pick < b.weight;
                        pick = pick.saturating_sub(b.weight);
                        hit
                    })
                    .expect("weights sum to total");
                if let Some((words, jaccard)) = corpus.variant(base, band) {
                    let variant = corpus.push(words);
                    corpus.planted.push(Planted {
                        base,
                        variant,
                        jaccard,
                    });
                }
            }
        }
        corpus
    }

    fn push(&mut self, words: Vec<u32>) -> usize {
        let n = self.docs.len();
        let text = render(&words, &self.vocab, &mut self.rng);
        self.docs.push(Doc {
            id: format!("doc-{n:05}"),
            words,
            text,
        });
        n
    }

    /// Edit the base one word at a time until its Jaccard drops below
    /// `band.hi`; keep the result if it is still ≥ `band.lo`, else retry.
    fn variant(&mut self, base: usize, band: Band) -> Option<(Vec<u32>, f64)> {
        let base_words = &self.docs[base].words;
        if band.lo >= 1.0 {
            return Some((base_words.clone(), 1.0));
        }
        let base_set = trigrams(base_words);
        for _ in 0..200 {
            let mut words = base_words.clone();
            loop {
                let j = sorted_jaccard(&base_set, &trigrams(&words));
                if j < band.hi {
                    if j >= band.lo {
                        return Some((words, j));
                    }
                    break;
                }
                edit(&mut words, &mut self.rng, self.vocab.len() as u32);
            }
        }
        None
    }

    /// A text that is not stored: an edited copy of a random document.
    fn unstored_variant(&mut self) -> String {
        let of = self.rng.gen_range(0..self.docs.len());
        let mut words = self.docs[of].words.clone();
        for _ in 0..self.rng.gen_range(0..4) {
            edit(&mut words, &mut self.rng, self.vocab.len() as u32);
        }
        render(&words, &self.vocab, &mut self.rng)
    }
}

/// `n` distinct words; the first [`ASCII_SHARE`] of them pure ASCII.
fn vocabulary(rng: &mut StdRng, n: usize) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut words = Vec::with_capacity(n);
    let ascii_syllables = SYLLABLES.iter().filter(|s| s.is_ascii()).count();
    while words.len() < n {
        let syllables = rng.gen_range(2..=4);
        let pool = if words.len() < ascii_words(n) {
            ascii_syllables
        } else {
            SYLLABLES.len()
        };
        let w: String = (0..syllables)
            .map(|_| SYLLABLES[rng.gen_range(0..pool)])
            .collect();
        if seen.insert(w.clone()) {
            words.push(w);
        }
    }
    words
}

fn edit(words: &mut Vec<u32>, rng: &mut StdRng, vocab: u32) {
    let i = rng.gen_range(0..words.len());
    match rng.gen_range(0..4) {
        0 if words.len() > 3 => {
            words.remove(i);
        }
        1 => words.insert(i, rng.gen_range(0..vocab)),
        2 => words[i] = rng.gen_range(0..vocab),
        _ if i + 1 < words.len() => words.swap(i, i + 1),
        _ => {}
    }
}

/// Word 3-grams as packed word ids, sorted and distinct (the generator's
/// own measure, independent of the engine's text path).
fn trigrams(words: &[u32]) -> Vec<u64> {
    let key = |a: u32, b: u32, c: u32| (u64::from(a) << 42) | (u64::from(b) << 21) | u64::from(c);
    let mut v: Vec<u64> = words.windows(3).map(|w| key(w[0], w[1], w[2])).collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn sorted_jaccard<T: Ord>(a: &[T], b: &[T]) -> f64 {
    let (mut i, mut k, mut inter) = (0, 0, 0usize);
    while i < a.len() && k < b.len() {
        match a[i].cmp(&b[k]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => k += 1,
            std::cmp::Ordering::Equal => {
                inter += 1;
                i += 1;
                k += 1;
            }
        }
    }
    inter as f64 / (a.len() + b.len() - inter) as f64
}

/// The words as a messy text: random case, punctuation, apostrophes inside
/// words, runs of odd whitespace and free-standing dashes — none of which
/// survives normalization.
fn render(words: &[u32], vocab: &[String], rng: &mut StdRng) -> String {
    const SEPARATORS: &[&str] = &[
        " ",
        " ",
        " ",
        " ",
        "  ",
        "\n",
        "\t",
        " - ",
        " — ",
        " \u{3000}",
    ];
    const TRAILING: &[&str] = &[",", ".", "!", "?", ";", ":", ")", "\"", "…"];
    // Half the texts keep to ASCII decorations (the last entries are not).
    let fancy = rng.gen_bool(0.5);
    let separators = if fancy {
        SEPARATORS.len()
    } else {
        SEPARATORS.len() - 2
    };
    let trailing = if fancy {
        TRAILING.len()
    } else {
        TRAILING.len() - 1
    };
    let mut out = String::new();
    for (i, &w) in words.iter().enumerate() {
        if i > 0 {
            out.push_str(SEPARATORS[rng.gen_range(0..separators)]);
        }
        let mut word = vocab[w as usize].clone();
        match rng.gen_range(0..20) {
            0 | 1 => word = word.to_uppercase(),
            2 | 3 => {
                let mut cs = word.chars();
                let first = cs.next().expect("words are not empty");
                word = first.to_uppercase().chain(cs).collect();
            }
            4 => {
                // don't → dont: the apostrophe is removed, not a word break.
                let at = word.char_indices().nth(1).map_or(word.len(), |(b, _)| b);
                word.insert(at, '\'');
            }
            5 => word.insert(0, '('),
            _ => {}
        }
        out.push_str(&word);
        if rng.gen_range(0..8) == 0 {
            out.push_str(TRAILING[rng.gen_range(0..trailing)]);
        }
    }
    out
}

// --------------------------------------------------------------- oracles --

/// The normalization recipe written naively for this corpus: split on
/// whitespace, lowercase, keep alphanumerics and `_`, drop emptied tokens.
fn naive_words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|t| {
            t.to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

fn naive_shingles(text: &str) -> HashSet<String> {
    let words = naive_words(text);
    if words.len() < 3 {
        return HashSet::from([words.join(" ")]);
    }
    words.windows(3).map(|w| w.join(" ")).collect()
}

/// The string oracle for a set of texts: each text's shingle strings, and
/// the hashes the engine gives them, learned by preparing each 3-word
/// shingle on its own (a 3-word text is exactly one shingle).
struct StringOracle {
    /// Per id, its shingle strings as interned numbers (equal numbers ⇔
    /// equal strings), sorted: the string sets in a form cheap to compare.
    sets: BTreeMap<String, Vec<u32>>,
    /// Ids whose shingles include a hash shared by two different strings.
    tainted: HashSet<String>,
    distinct_shingles: usize,
    collisions: usize,
}

impl StringOracle {
    /// Build it and check that every stored record holds exactly the hashes
    /// of its text's shingle strings.
    fn build(engine: &Engine, texts: &BTreeMap<String, String>) -> Result<Self, TestCaseError> {
        let mut number: HashMap<String, u32> = HashMap::new();
        let mut hash_of: Vec<u32> = Vec::new();
        let mut strings_of: HashMap<u32, usize> = HashMap::new();
        let mut sets = BTreeMap::new();
        for (id, text) in texts {
            let mut set = Vec::new();
            for s in naive_shingles(text) {
                let next = number.len() as u32;
                let n = *number.entry(s).or_insert_with_key(|s| {
                    let p = engine.prepare(s).expect("a shingle is not empty");
                    assert_eq!(p.shingles().len(), 1, "{s:?} is one shingle");
                    hash_of.push(p.shingles()[0]);
                    *strings_of.entry(p.shingles()[0]).or_default() += 1;
                    next
                });
                set.push(n);
            }
            set.sort_unstable();
            sets.insert(id.clone(), set);
        }
        let mut tainted = HashSet::new();
        for (id, set) in &sets {
            let mut hashes: Vec<u32> = set.iter().map(|&n| hash_of[n as usize]).collect();
            hashes.sort_unstable();
            hashes.dedup();
            let record = engine.get(id).expect("the oracle covers stored ids");
            if record.shingles() != &hashes[..] {
                let stored: HashSet<u32> = record.shingles().iter().copied().collect();
                let expected: HashSet<u32> = hashes.iter().copied().collect();
                return Err(TestCaseError::fail(format!(
                    "{id}: stored shingles differ from the hashes of its shingle strings: \
                     {} stored, {} expected, {} only stored, {} only expected",
                    stored.len(),
                    expected.len(),
                    stored.difference(&expected).count(),
                    expected.difference(&stored).count()
                )));
            }
            if hashes.iter().any(|h| strings_of[h] > 1) {
                tainted.insert(id.clone());
            }
        }
        Ok(Self {
            distinct_shingles: number.len(),
            collisions: strings_of.values().filter(|&&n| n > 1).count(),
            sets,
            tainted,
        })
    }

    /// The string-oracle Jaccard, or `None` when a hash collision touches
    /// either side (then the hashed and string values may rightly differ).
    fn jaccard(&self, a: &str, b: &str) -> Option<f64> {
        if self.tainted.contains(a) || self.tainted.contains(b) {
            return None;
        }
        Some(sorted_jaccard(&self.sets[a], &self.sets[b]))
    }
}

/// Hashed brute force for one query: every stored record but `exclude`,
/// with its exact Jaccard.
fn brute_force(
    records: &[Arc<Record>],
    query: &[u32],
    exclude: Option<&str>,
) -> HashMap<String, f64> {
    records
        .iter()
        .filter(|r| Some(r.id().as_str()) != exclude)
        .map(|r| (r.id().to_string(), jaccard::jaccard(query, r.shingles())))
        .collect()
}

/// At J ≥ 0.9 a pair misses every one of 21 bands of 6 rows with
/// probability (1 − 0.9⁶)²¹ ≈ 1.2·10⁻⁷: "always found" for a test.
const SURE: f64 = 0.9;

/// Everything one answer must satisfy. `truth` has the exact Jaccard of
/// stored documents with the query; an id missing from it is not a
/// brute-force pair at or above the threshold.
fn check_outcome(
    q: &QueryOutcome,
    truth: &HashMap<String, f64>,
    exclude: Option<&str>,
    t: f64,
    limit: usize,
) -> Result<(), TestCaseError> {
    let mut seen = HashSet::new();
    prop_assert!(q.matches.len() <= limit);
    for m in &q.matches {
        let id = m.id.as_str();
        prop_assert!(Some(id) != exclude, "the query {} matched itself", id);
        prop_assert!(seen.insert(id), "{} reported twice", id);
        let Some(&j) = truth.get(id) else {
            return Err(TestCaseError::fail(format!(
                "{id} (reported {}) is not a brute-force pair at or above {t}",
                m.jaccard
            )));
        };
        prop_assert!(
            m.jaccard.to_bits() == j.to_bits(),
            "{}: reported {} but brute force says {}",
            id,
            m.jaccard,
            j
        );
        prop_assert!(j >= t, "{} has {} < threshold {}", id, j, t);
        prop_assert!((0.0..=1.0).contains(&m.estimate));
    }
    for w in q.matches.windows(2) {
        let ordered =
            w[0].jaccard > w[1].jaccard || (w[0].jaccard == w[1].jaccard && w[0].id < w[1].id);
        prop_assert!(ordered, "{:?} before {:?}", w[0], w[1]);
    }
    let above = truth.values().filter(|&&j| j >= t).count();
    if !q.truncated && limit >= above {
        // Single-threaded, every candidate is either a match or rejected.
        prop_assert_eq!(q.matches.len() + q.rejected, q.candidates);
        for (id, &j) in truth {
            if j >= t.max(SURE) {
                prop_assert!(seen.contains(id.as_str()), "missed {} at J = {}", id, j);
            }
        }
    }
    Ok(())
}

fn new_engine() -> Engine {
    let engine = Engine::new(ValidParams::default());
    assert_eq!((engine.bands().bands, engine.bands().rows), (21, 6));
    engine
}

fn load(engine: &Engine, docs: &[Doc]) {
    let prepared: Vec<Prepared> = docs
        .par_iter()
        .map(|d| engine.prepare(&d.text).expect("generated texts have words"))
        .collect();
    for (d, p) in docs.iter().zip(&prepared) {
        let id = DocId::parse(&d.id).expect("generated ids are valid");
        engine
            .insert(id, p, None, WriteMode::Create)
            .expect("ids are distinct");
    }
}

// ------------------------------------------------------- property tests --

#[derive(Clone, Debug)]
struct Case {
    shape: Shape,
    /// Fraction of the way from the lowest served threshold to 1; `None`
    /// uses the default (0.8).
    threshold: Option<f64>,
    limit: usize,
    deletes: usize,
    replaces: usize,
    string_oracle: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<u64>(),
        4usize..14,
        0usize..=3,
        prop_oneof![Just(None), (0.0f64..=1.0).prop_map(Some)],
        prop_oneof![1usize..6, Just(1000)],
        0usize..4,
        0usize..4,
        any::<bool>(),
    )
        .prop_map(
            |(seed, bases, max_variants, threshold, limit, deletes, replaces, string_oracle)| {
                Case {
                    shape: Shape {
                        seed,
                        vocabulary: 2000,
                        bases,
                        with_variants: if max_variants == 0 { 0 } else { bases },
                        max_variants: max_variants.max(1),
                        bands: SPREAD,
                    },
                    threshold,
                    limit,
                    deletes,
                    replaces,
                    string_oracle,
                }
            },
        )
}

fn run_case(c: &Case) -> Result<(), TestCaseError> {
    let mut corpus = Corpus::generate(&c.shape);
    let engine = new_engine();
    load(&engine, &corpus.docs);
    // The model: what should be stored after the writes below.
    let mut texts: BTreeMap<String, String> = corpus
        .docs
        .iter()
        .map(|d| (d.id.clone(), d.text.clone()))
        .collect();
    let n = corpus.docs.len();
    for _ in 0..c.deletes {
        let victim = corpus.docs[corpus.rng.gen_range(0..n)].id.clone();
        prop_assert_eq!(engine.remove(&victim), texts.remove(&victim).is_some());
    }
    for _ in 0..c.replaces {
        // Replace a document by an edited copy of another: new pairs appear,
        // old ones vanish, slots are freed and reused.
        let target = corpus.docs[corpus.rng.gen_range(0..n)].id.clone();
        let text = corpus.unstored_variant();
        let p = engine.prepare(&text).expect("generated texts have words");
        engine
            .insert(DocId::parse(&target).unwrap(), &p, None, WriteMode::Upsert)
            .expect("upsert never conflicts");
        texts.insert(target, text);
    }
    let records = engine.records();
    prop_assert_eq!(records.len(), texts.len());
    prop_assert!(records.iter().all(|r| texts.contains_key(r.id().as_str())));

    let min = engine.bands().min_query_threshold;
    let threshold = engine
        .threshold(c.threshold.map(|f| (min + f * (1.0 - min)).min(1.0)))
        .expect("thresholds are drawn from the served range");
    let t = threshold.value();
    let oracle = if c.string_oracle {
        Some(StringOracle::build(&engine, &texts)?)
    } else {
        None
    };

    for (id, text) in &texts {
        let record = engine.get(id).expect("the model lists stored ids");
        let truth = brute_force(&records, record.shingles(), Some(id));
        let full = engine
            .similar_to_id(id, &Query::new(threshold, 1000))
            .expect("stored");
        check_outcome(&full, &truth, Some(id), t, 1000)?;
        // By text, and with a limit: the same answer, or a prefix of it.
        let prepared = engine.prepare(text).expect("stored texts have words");
        let by_text = engine
            .similar_to(&prepared, Some(id), &Query::new(threshold, 1000))
            .unwrap();
        prop_assert_eq!(&by_text.matches, &full.matches);
        let limited = engine
            .similar_to(&prepared, Some(id), &Query::new(threshold, c.limit))
            .unwrap();
        check_outcome(&limited, &truth, Some(id), t, c.limit)?;
        prop_assert_eq!(
            &limited.matches[..],
            &full.matches[..full.matches.len().min(c.limit)]
        );
        if let Some(oracle) = &oracle {
            for (other, &j) in &truth {
                if let Some(s) = oracle.jaccard(id, other) {
                    prop_assert!(
                        s.to_bits() == j.to_bits(),
                        "{} ~ {}: strings give {}, hashes {}",
                        id,
                        other,
                        s,
                        j
                    );
                }
            }
            for m in &full.matches {
                if let Some(s) = oracle.jaccard(id, m.id.as_str()) {
                    prop_assert!(s >= t && s.to_bits() == m.jaccard.to_bits());
                }
            }
        }
    }

    // A query that is not stored: nothing excluded, everything stored counts.
    let text = corpus.unstored_variant();
    let prepared = engine.prepare(&text).expect("generated texts have words");
    let truth = brute_force(&records, prepared.shingles(), None);
    let q = engine
        .similar_to(&prepared, None, &Query::new(threshold, 1000))
        .unwrap();
    check_outcome(&q, &truth, None, t, 1000)?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 32,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn answers_are_exactly_verified_brute_force_pairs_sorted_without_self(c in case()) {
        run_case(&c)?;
    }
}

// ------------------------------------------------------- seeded tests --

#[test]
fn the_string_oracle_agrees_with_every_answer_on_a_seeded_corpus() {
    let corpus = Corpus::generate(&Shape {
        seed: 7,
        vocabulary: 3000,
        bases: 110,
        with_variants: 80,
        max_variants: 3,
        bands: SPREAD,
    });
    let engine = new_engine();
    load(&engine, &corpus.docs);
    let texts: BTreeMap<String, String> = corpus
        .docs
        .iter()
        .map(|d| (d.id.clone(), d.text.clone()))
        .collect();
    let oracle = StringOracle::build(&engine, &texts).unwrap();
    let records = engine.records();
    let threshold = engine.threshold(None).unwrap();
    let (mut pairs, mut found, mut string_pairs) = (0, 0, 0);
    for id in texts.keys() {
        // Truth from strings alone, where no collision blurs them.
        let truth: HashMap<String, f64> = texts
            .keys()
            .filter(|o| *o != id)
            .filter_map(|o| oracle.jaccard(id, o).map(|j| (o.clone(), j)))
            .collect();
        let hashed = brute_force(&records, engine.get(id).unwrap().shingles(), Some(id));
        for (o, j) in &truth {
            assert_eq!(j.to_bits(), hashed[o].to_bits(), "{id} ~ {o}");
        }
        let q = engine
            .similar_to_id(id, &Query::new(threshold, 1000))
            .unwrap();
        check_outcome(&q, &hashed, Some(id), 0.8, 1000).unwrap();
        check_outcome(&q, &truth, Some(id), 0.8, 1000).unwrap();
        pairs += hashed.values().filter(|&&j| j >= 0.8).count();
        string_pairs += truth.values().filter(|&&j| j >= 0.8).count();
        found += q.matches.len();
    }
    let ascii = texts.values().filter(|t| t.is_ascii()).count();
    eprintln!(
        "string oracle: {} docs ({ascii} pure ASCII), {} distinct shingle strings, {} hash collisions, \
         {} tainted docs; ordered pairs ≥ 0.8: {pairs} hashed, {string_pairs} by strings, {found} found",
        texts.len(),
        oracle.distinct_shingles,
        oracle.collisions,
        oracle.tainted.len()
    );
    assert!(pairs > 100, "the corpus plants pairs above the threshold");
}

/// Recall per Jaccard band, with the banding curve's expectation.
#[derive(Default)]
struct Tally {
    pairs: usize,
    found: usize,
    expected: f64,
}

impl Tally {
    fn recall(&self) -> f64 {
        self.found as f64 / self.pairs.max(1) as f64
    }
}

#[test]
fn recall_at_the_threshold_is_at_least_0_99_against_brute_force() {
    let clock = std::time::Instant::now();
    let corpus = Corpus::generate(&Shape {
        seed: 2024,
        vocabulary: 4000,
        bases: 1000,
        with_variants: 1000,
        max_variants: 2,
        bands: NEAR_THRESHOLD,
    });
    let generated = clock.elapsed();
    let engine = new_engine();
    load(&engine, &corpus.docs);
    let loaded = clock.elapsed();
    let (bands, rows) = (engine.bands().bands, engine.bands().rows);
    let threshold = engine.threshold(None).unwrap();
    let t = threshold.value();
    let index: HashMap<&str, usize> = corpus
        .docs
        .iter()
        .enumerate()
        .map(|(i, d)| (d.id.as_str(), i))
        .collect();
    let shingles: Vec<Arc<Record>> = corpus
        .docs
        .iter()
        .map(|d| engine.get(&d.id).unwrap())
        .collect();
    let n = shingles.len();

    // Brute force: every pair, exact Jaccard on the stored sets. A pair
    // whose sizes alone rule it out (J ≤ min/max < t) skips the merge; the
    // bound holds after rounding too, as division rounds monotonically.
    let truth: HashMap<(usize, usize), f64> = (0..n)
        .into_par_iter()
        .flat_map_iter(|i| {
            let shingles = &shingles;
            (i + 1..n).filter_map(move |k| {
                let (a, b) = (shingles[i].shingles(), shingles[k].shingles());
                if (a.len().min(b.len()) as f64 / a.len().max(b.len()) as f64) < t {
                    return None;
                }
                let j = jaccard::jaccard(a, b);
                (j >= t).then_some(((i, k), j))
            })
        })
        .collect();
    let brute = clock.elapsed();

    // The engine, queried by every document.
    let mut truth_of: Vec<HashMap<String, f64>> = vec![HashMap::new(); n];
    for (&(a, b), &j) in &truth {
        truth_of[a].insert(corpus.docs[b].id.clone(), j);
        truth_of[b].insert(corpus.docs[a].id.clone(), j);
    }
    let mut found: HashMap<(usize, usize), usize> = HashMap::new();
    let (mut candidates, mut rejected) = (0usize, 0usize);
    for (i, d) in corpus.docs.iter().enumerate() {
        let q = engine
            .similar_to_id(&d.id, &Query::new(threshold, 1000))
            .unwrap();
        check_outcome(&q, &truth_of[i], Some(&d.id), t, 1000).unwrap();
        candidates += q.candidates;
        rejected += q.rejected;
        for m in &q.matches {
            let k = index[m.id.as_str()];
            *found.entry((i.min(k), i.max(k))).or_default() += 1;
        }
    }
    let queried = clock.elapsed();
    eprintln!(
        "timing: generate {generated:.2?}, load {:.2?}, brute force {:.2?}, queries {:.2?}",
        loaded - generated,
        brute - loaded,
        queried - brute
    );
    // Banding and verification are symmetric: a pair is found from both
    // sides or from neither.
    assert!(found.values().all(|&c| c == 2), "asymmetric answers");

    // The generator's own trigram Jaccard must equal the engine's: the text
    // path (render → normalize → shingle → hash) loses nothing.
    let mismatched: Vec<_> = corpus
        .planted
        .iter()
        .filter(|p| {
            jaccard::jaccard(shingles[p.base].shingles(), shingles[p.variant].shingles()).to_bits()
                != p.jaccard.to_bits()
        })
        .collect();
    assert!(
        mismatched.is_empty(),
        "{} planted pairs changed score",
        mismatched.len()
    );

    let edges = [0.8, 0.82, 0.85, 0.9, 0.95, 1.0];
    let mut tally: Vec<Tally> = (0..edges.len()).map(|_| Tally::default()).collect();
    let mut near = Tally::default(); // [0.8, 0.85)
    let mut total = Tally::default();
    let mut exactly = Tally::default(); // J == t
    for (pair, &j) in &truth {
        let hit = usize::from(found.contains_key(pair));
        let p = crate::lsh::params::candidate_probability(j, bands, rows);
        let slot = edges.iter().rposition(|&e| j >= e).unwrap_or(0);
        let targets = [
            Some(&mut tally[slot]),
            Some(&mut total),
            (j < 0.85).then_some(&mut near),
            (j == t).then_some(&mut exactly),
        ];
        for tl in targets.into_iter().flatten() {
            tl.pairs += 1;
            tl.found += hit;
            tl.expected += p;
        }
    }
    let planted_near = corpus
        .planted
        .iter()
        .filter(|p| (0.8..0.85).contains(&p.jaccard))
        .count();
    eprintln!(
        "recall corpus: {n} docs ({} planted variants, {planted_near} planted in [0.80, 0.85)), \
         b = {bands}, r = {rows}, t = {t}",
        corpus.planted.len()
    );
    eprintln!(
        "queries: {n}; candidates verified: {candidates} ({:.2}/query), rejected by exact \
         Jaccard: {rejected}; pairs found: {}",
        candidates as f64 / n as f64,
        found.len()
    );
    eprintln!("  band            pairs  found  recall    expected (1-(1-s^r)^b)");
    let label = |i: usize| match i {
        i if i + 1 < edges.len() => format!("[{:.2}, {:.2})", edges[i], edges[i + 1]),
        _ => "= 1.00      ".to_owned(),
    };
    let line = |name: &str, tl: &Tally| {
        eprintln!(
            "  {name:<14} {:>6} {:>6}  {:.4}    {:.4}",
            tl.pairs,
            tl.found,
            tl.recall(),
            tl.expected / tl.pairs.max(1) as f64
        )
    };
    for (i, tl) in tally.iter().enumerate() {
        line(&label(i), tl);
    }
    line("[0.80, 0.85)", &near);
    line("J == 0.8", &exactly);
    line("all ≥ 0.8", &total);

    assert!(total.pairs >= 1000, "{} pairs ≥ t", total.pairs);
    assert!(near.pairs >= 500, "{} pairs in [0.8, 0.85)", near.pairs);
    assert!(total.recall() >= 0.99, "recall {}", total.recall());
    assert!(
        near.recall() >= 0.99,
        "recall near the threshold {}",
        near.recall()
    );
    assert!(
        tally[0].recall() >= 0.99,
        "recall in [0.80, 0.82) {}",
        tally[0].recall()
    );
}
