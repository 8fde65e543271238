//! Criterion benches of every pipeline stage, on a fixed generated corpus.
//!
//! Documents are the test kit's articles (`neardup::testkit::Articles`):
//! ~130 words (110–150) of synthetic English-like text, sentences of
//! made-up words mixed with a few frequent stop words, so unrelated
//! documents share some shingles as real text does. Everything is derived
//! from fixed seeds, so every run measures the same work.
//!
//! **Benchmarks that check themselves.** Each timed closure asserts its
//! answer — the normalized length, the shingle count (computed from the
//! generator's word ids, not by the code under test), the signature the
//! engine stored, the planted near-duplicate found with its exact Jaccard —
//! so a fast wrong result fails instead of looking good. Where it helps to
//! read a number, a baseline runs in the same group (Unicode vs ASCII text,
//! char vs word shingles, `HashSet` vs merge, brute-force scan vs LSH).
//!
//! The 101k-document index (1,000 of them planted near-duplicates of the
//! document before, one or two words substituted) is built once, lazily, by the first bench that
//! needs it; its build rate and memory are printed to stderr.
//!
//! ```text
//! cargo bench --bench engine -- --quick            # all groups, short
//! cargo bench --bench engine -- similar_end_to_end # one group
//! ```

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use neardup::engine::{DocId, Engine, Query, Record, ValidParams, WriteMode};
use neardup::jaccard;
use neardup::lsh::{BandParams, LshIndex};
use neardup::minhash::{Kernel, MinHasher};
use neardup::testkit::Articles;
use neardup::text::{
    normalize, NormalizeOptions, Scratch, ShingleKind, ShingleOptions, Shingler, Tokenizer,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Documents in the sample used by the per-document benches.
const SAMPLE_DOCS: usize = 1_000;
/// Documents in the big index, planted near-duplicates included.
const INDEX_DOCS: usize = 101_000;
/// Every this many index documents, one is a planted near-duplicate of the
/// one before it (1,000 in the index).
const PLANT_EVERY: usize = 101;
const VOCABULARY: usize = 8_000;
const SEED: u64 = 0x006e_6561_7264_7570;

// ------------------------------------------------------------ the corpus --

/// The per-document sample's stream (no planted twins).
fn sample_corpus() -> &'static Articles {
    static C: OnceLock<Articles> = OnceLock::new();
    C.get_or_init(|| Articles::new(SEED ^ 1, VOCABULARY, 0))
}

/// The big index's stream, with its planted twins.
fn index_corpus() -> &'static Articles {
    static C: OnceLock<Articles> = OnceLock::new();
    C.get_or_init(|| Articles::new(SEED ^ 2, VOCABULARY, PLANT_EVERY))
}

/// Distinct word 3-grams, from the word ids alone.
fn trigram_set(words: &[u32]) -> BTreeSet<[u32; 3]> {
    words.windows(3).map(|w| [w[0], w[1], w[2]]).collect()
}

fn trigram_jaccard(a: &[u32], b: &[u32]) -> f64 {
    let (sa, sb) = (trigram_set(a), trigram_set(b));
    let inter = sa.intersection(&sb).count();
    inter as f64 / (sa.len() + sb.len() - inter) as f64
}

struct SampleDoc {
    text: String,
    unicode_text: String,
    normalized: String,
    normalized_len: usize,
    unicode_normalized_len: usize,
    shingles: usize,
    char5_shingles: usize,
}

/// The per-document sample, with answers computed from word ids.
fn sample() -> &'static [SampleDoc] {
    static SAMPLE: OnceLock<Vec<SampleDoc>> = OnceLock::new();
    SAMPLE.get_or_init(|| {
        let corpus = sample_corpus();
        (0..SAMPLE_DOCS)
            .map(|n| {
                let words = corpus.words(n);
                let normalized = corpus.normalized(&words, false);
                let char5_shingles = (0..=normalized.len() - 5)
                    .map(|i| &normalized[i..i + 5])
                    .collect::<HashSet<_>>()
                    .len();
                SampleDoc {
                    text: corpus.text(n),
                    unicode_text: corpus.unicode_text(n),
                    normalized_len: normalized.len(),
                    unicode_normalized_len: corpus.normalized(&words, true).len(),
                    normalized,
                    shingles: trigram_set(&words).len(),
                    char5_shingles,
                }
            })
            .collect()
    })
}

fn engine() -> Engine {
    Engine::new(ValidParams::default())
}

// ------------------------------------------------------- the 100k index --

struct Planted {
    base: String,
    variant: String,
    base_text: String,
    /// Exact Jaccard from the word ids.
    jaccard: f64,
    /// Positions in `World::records`, the slots of `World::lsh`.
    base_slot: u32,
    variant_slot: u32,
}

struct World {
    engine: Engine,
    /// Every stored record; index = slot in `lsh`.
    records: Vec<Arc<Record>>,
    /// A standalone band index over the same signatures, for `lsh_query`.
    lsh: LshIndex,
    planted: Vec<Planted>,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let started = Instant::now();
        let engine = engine();
        // Generate, prepare and insert on every core; nothing is kept but
        // the engine's records and the planted pairs' answers.
        let corpus = index_corpus();
        let planted: Vec<(String, String, String, f64)> = (0..INDEX_DOCS)
            .into_par_iter()
            .filter_map(|n| {
                insert(&engine, &format!("doc-{n:06}"), &corpus.text(n));
                let base = corpus.twin_of(n)?;
                Some((
                    format!("doc-{base:06}"),
                    format!("doc-{n:06}"),
                    corpus.text(base),
                    trigram_jaccard(&corpus.words(base), &corpus.words(n)),
                ))
            })
            .collect();
        let built = started.elapsed();
        let records = engine.records();
        let bands = engine.bands();
        let lsh = LshIndex::new(bands.bands, bands.rows, engine.params().index.seed);
        let mut slot_of = std::collections::HashMap::new();
        for (slot, r) in records.iter().enumerate() {
            lsh.insert(slot as u32, r.signature());
            slot_of.insert(r.id().as_str(), slot as u32);
        }
        let planted = planted
            .into_iter()
            .map(|(base, variant, base_text, jaccard)| Planted {
                base_slot: slot_of[base.as_str()],
                variant_slot: slot_of[variant.as_str()],
                base,
                variant,
                base_text,
                jaccard,
            })
            .collect();
        let mem = engine.memory();
        eprintln!(
            "index: {} documents built in {:.2?} ({:.0} docs/s: generate + prepare + insert on {} threads); \
             {} LSH buckets; engine memory {:.1} MB, {:.0} bytes/document",
            engine.len(),
            built,
            engine.len() as f64 / built.as_secs_f64(),
            rayon::current_num_threads(),
            engine.lsh_bucket_count(),
            mem.total_bytes as f64 / 1e6,
            mem.bytes_per_document
        );
        World {
            engine,
            records,
            lsh,
            planted,
        }
    })
}

fn insert(engine: &Engine, id: &str, text: &str) {
    let p = engine.prepare(text).expect("generated texts have words");
    engine
        .insert(DocId::parse(id).unwrap(), &p, None, WriteMode::Create)
        .expect("ids are distinct");
}

/// Cycles through `0..n`, one step per timed iteration.
struct Cycle(usize, usize);

impl Cycle {
    fn new(n: usize) -> Self {
        Self(0, n)
    }
    fn next(&mut self) -> usize {
        let i = self.0;
        self.0 = (i + 1) % self.1;
        i
    }
}

// ---------------------------------------------------------------- benches --

fn prepare(c: &mut Criterion) {
    let mut g = c.benchmark_group("prepare");
    g.throughput(Throughput::Elements(1));
    g.bench_function("one_document", |b| {
        let (docs, engine) = (sample(), engine());
        let mut i = Cycle::new(docs.len());
        b.iter(|| {
            let d = &docs[i.next()];
            let p = engine.prepare(black_box(&d.text)).unwrap();
            assert_eq!(p.shingles().len(), d.shingles);
            p
        })
    });
    g.throughput(Throughput::Elements(SAMPLE_DOCS as u64));
    g.bench_function("batch_of_1000_on_all_cores", |b| {
        let (docs, engine) = (sample(), engine());
        let expected: usize = docs.iter().map(|d| d.shingles).sum();
        b.iter(|| {
            let total: usize = docs
                .par_iter()
                .map(|d| engine.prepare(black_box(&d.text)).unwrap().shingles().len())
                .sum();
            assert_eq!(total, expected);
        })
    });
    g.finish();
}

fn normalize_text(c: &mut Criterion) {
    let mut g = c.benchmark_group("normalize");
    g.throughput(Throughput::Elements(1));
    let opts = NormalizeOptions::default();
    g.bench_function("ascii", |b| {
        let docs = sample();
        let mut i = Cycle::new(docs.len());
        b.iter(|| {
            let d = &docs[i.next()];
            let out = normalize(black_box(&d.text), &opts);
            assert_eq!(out.len(), d.normalized_len);
            out
        })
    });
    g.bench_function("unicode_nfkc_path", |b| {
        let docs = sample();
        let mut i = Cycle::new(docs.len());
        b.iter(|| {
            let d = &docs[i.next()];
            let out = normalize(black_box(&d.unicode_text), &opts);
            assert_eq!(out.len(), d.unicode_normalized_len);
            out
        })
    });
    g.finish();
}

fn shingle(c: &mut Criterion) {
    let mut g = c.benchmark_group("shingle");
    g.throughput(Throughput::Elements(1));
    g.bench_function("word_3", |b| {
        let docs = sample();
        let s = Shingler::new(ShingleOptions::default(), 1);
        let mut i = Cycle::new(docs.len());
        b.iter(|| {
            let d = &docs[i.next()];
            let set = s.shingle(black_box(&d.normalized)).unwrap();
            assert_eq!(set.len(), d.shingles);
            set
        })
    });
    g.bench_function("word_3_from_raw_text_reused_buffers", |b| {
        // The engine's path: fused ASCII normalize + word hashing, combine,
        // sort + dedup, into reused buffers (no allocation).
        let docs = sample();
        let t = Tokenizer::new(NormalizeOptions::default(), ShingleOptions::default(), 1);
        let mut scratch = Scratch::default();
        let mut i = Cycle::new(docs.len());
        b.iter(|| {
            let d = &docs[i.next()];
            let n = t.hashes(black_box(&d.text), &mut scratch).unwrap().len();
            assert_eq!(n, d.shingles);
            n
        })
    });
    g.bench_function("char_5", |b| {
        let docs = sample();
        let opts = ShingleOptions {
            kind: ShingleKind::Char,
            k: 5,
            multiset: false,
        };
        let s = Shingler::new(opts, 1);
        let mut i = Cycle::new(docs.len());
        b.iter(|| {
            let d = &docs[i.next()];
            let set = s.shingle(black_box(&d.normalized)).unwrap();
            // Distinct strings may share a 32-bit hash: allow the rare merge.
            assert!(set.len() <= d.char5_shingles && set.len() + 2 >= d.char5_shingles);
            set
        })
    });
    g.finish();
}

fn minhash_sign(c: &mut Criterion) {
    let mut g = c.benchmark_group("minhash_sign");
    g.throughput(Throughput::Elements(1));
    // Shingles and the signature the engine computed for them: signing
    // here must reproduce it exactly.
    let prepared = || {
        let engine = engine();
        sample()
            .iter()
            .map(|d| engine.prepare(&d.text).unwrap())
            .collect::<Vec<_>>()
    };
    g.bench_function("128_perm", |b| {
        let docs = prepared();
        let m = MinHasher::new(128, 1);
        let mut i = Cycle::new(docs.len());
        b.iter(|| {
            let p = &docs[i.next()];
            let sig = m.sign(black_box(p.shingles()));
            assert_eq!(&sig[..], p.signature());
            sig
        })
    });
    // Every kernel this CPU has, in one group (the detected one is the last).
    for kernel in Kernel::available() {
        g.bench_function(format!("128_perm_kernel_{}", kernel.name()), |b| {
            let docs = prepared();
            let m = MinHasher::new(128, 1).with_kernel(kernel);
            let mut sig = vec![0u32; 128];
            let mut i = Cycle::new(docs.len());
            b.iter(|| {
                let p = &docs[i.next()];
                m.sign_into(black_box(p.shingles()), &mut sig);
                assert_eq!(&sig[..], p.signature());
            })
        });
    }
    g.bench_function("128_perm_into_reused_buffer", |b| {
        let docs = prepared();
        let m = MinHasher::new(128, 1);
        let mut sig = vec![0u32; 128];
        let mut i = Cycle::new(docs.len());
        b.iter(|| {
            let p = &docs[i.next()];
            m.sign_into(black_box(p.shingles()), &mut sig);
            assert_eq!(sig[0], p.signature()[0]);
        })
    });
    g.finish();
}

fn lsh_query(c: &mut Criterion) {
    let mut g = c.benchmark_group("lsh_query");
    g.throughput(Throughput::Elements(1));
    g.bench_function("candidates_in_101k", |b| {
        let w = world();
        let mut out = Vec::with_capacity(64);
        let mut i = Cycle::new(w.planted.len());
        b.iter(|| {
            let p = &w.planted[i.next()];
            out.clear();
            let sig = w.records[p.base_slot as usize].signature();
            assert!(w.lsh.candidates(black_box(sig), &mut out, usize::MAX));
            assert!(
                out.contains(&p.variant_slot),
                "planted twin not a candidate"
            );
            out.len()
        })
    });
    g.finish();
}

fn verify(c: &mut Criterion) {
    let mut g = c.benchmark_group("verify");
    g.throughput(Throughput::Elements(1));
    // A base and its twin (1-2 words substituted), ~128 shingles each.
    let corpus = index_corpus();
    let engine = engine();
    let base_doc = engine.prepare(&corpus.text(0)).unwrap();
    let twin_doc = engine.prepare(&corpus.text(1)).unwrap();
    let expected = trigram_jaccard(&corpus.words(0), &corpus.words(1));
    let (base_set, twin_set) = (base_doc.shingles().to_vec(), twin_doc.shingles().to_vec());
    g.bench_function(
        format!("merge_{}x{}", base_set.len(), twin_set.len()),
        |b| {
            b.iter(|| {
                let j = jaccard::jaccard(black_box(&base_set), black_box(&twin_set));
                assert_eq!(j.to_bits(), expected.to_bits());
                j
            })
        },
    );
    g.bench_function("hashset_baseline", |b| {
        let (ha, hb): (HashSet<u32>, HashSet<u32>) = (
            base_set.iter().copied().collect(),
            twin_set.iter().copied().collect(),
        );
        b.iter(|| {
            let inter = black_box(&ha).intersection(black_box(&hb)).count();
            let j = inter as f64 / (ha.len() + hb.len() - inter) as f64;
            assert_eq!(j.to_bits(), expected.to_bits());
            j
        })
    });
    // A short query against a huge stored set: the galloping path.
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut large: Vec<u32> = base_set.clone();
    large.extend((0..16_000).map(|_| rng.gen::<u32>()));
    large.sort_unstable();
    large.dedup();
    let gallop_expected = base_set.len() as f64 / large.len() as f64;
    g.bench_function(format!("gallop_{}x{}", base_set.len(), large.len()), |b| {
        b.iter(|| {
            let j = jaccard::jaccard(black_box(&base_set), black_box(&large));
            assert_eq!(j.to_bits(), gallop_expected.to_bits());
            j
        })
    });
    g.finish();
}

fn similar_end_to_end(c: &mut Criterion) {
    let mut g = c.benchmark_group("similar_end_to_end");
    g.throughput(Throughput::Elements(1));
    g.bench_function("similar_to_id_in_101k", |b| {
        let w = world();
        let t = w.engine.threshold(None).unwrap();
        let mut i = Cycle::new(w.planted.len());
        b.iter(|| {
            let p = &w.planted[i.next()];
            let q = w
                .engine
                .similar_to_id(black_box(&p.base), &Query::new(t, 10))
                .unwrap();
            assert_eq!(q.matches.len(), 1, "{}: {:?}", p.base, q.matches);
            assert_eq!(q.matches[0].id.as_str(), p.variant);
            assert_eq!(q.matches[0].jaccard.to_bits(), p.jaccard.to_bits());
            q
        })
    });
    g.bench_function("similar_to_id_of_a_lone_document_in_101k", |b| {
        // Most documents have no near-duplicate: a query by id for one that
        // shares no band bucket is answered from the index's bit, without
        // band lookups (`lsh::shared`).
        let w = world();
        let t = w.engine.threshold(None).unwrap();
        let planted: std::collections::HashSet<&str> = w
            .planted
            .iter()
            .flat_map(|p| [p.base.as_str(), p.variant.as_str()])
            .collect();
        let lone: Vec<String> = (0..INDEX_DOCS)
            .map(|n| format!("doc-{n:06}"))
            .filter(|id| !planted.contains(id.as_str()))
            .take(1000)
            .collect();
        let mut i = Cycle::new(lone.len());
        b.iter(|| {
            let id = &lone[i.next()];
            let q = w
                .engine
                .similar_to_id(black_box(id), &Query::new(t, 10))
                .unwrap();
            assert!(q.matches.is_empty(), "{id}: {:?}", q.matches);
            q
        })
    });
    g.bench_function("similar_to_text_in_101k", |b| {
        // POST /similar: prepare the text, then query; finds the stored
        // original (J = 1) and its twin.
        let w = world();
        let t = w.engine.threshold(None).unwrap();
        let mut i = Cycle::new(w.planted.len());
        b.iter(|| {
            let p = &w.planted[i.next()];
            let doc = w.engine.prepare(black_box(&p.base_text)).unwrap();
            let q = w.engine.similar_to(&doc, None, &Query::new(t, 10)).unwrap();
            assert_eq!(q.matches.len(), 2);
            assert_eq!(
                (q.matches[0].id.as_str(), q.matches[0].jaccard),
                (&*p.base, 1.0)
            );
            assert_eq!(q.matches[1].id.as_str(), p.variant);
            q
        })
    });
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(3));
    g.bench_function("brute_force_scan_baseline_101k", |b| {
        let w = world();
        let mut i = Cycle::new(w.planted.len());
        b.iter(|| {
            let p = &w.planted[i.next()];
            let query = w.records[p.base_slot as usize].shingles();
            let found: Vec<u32> = (0..w.records.len() as u32)
                .filter(|&s| {
                    s != p.base_slot
                        && jaccard::jaccard(query, w.records[s as usize].shingles()) >= 0.8
                })
                .collect();
            assert_eq!(found, [p.variant_slot]);
        })
    });
    g.finish();
}

/// `Engine::explain` (the core of `POST /explain`) on two ~1,000-word
/// documents, one a near-duplicate of the other (every eighth article of
/// the pair differs by a planted edit).
fn explain(c: &mut Criterion) {
    let mut g = c.benchmark_group("explain");
    g.throughput(Throughput::Elements(1));
    let corpus = index_corpus();
    // Articles n and n + 1 are twins when n % PLANT_EVERY == 0.
    let a: String = (0..8)
        .map(|i| corpus.text(i * PLANT_EVERY))
        .collect::<Vec<_>>()
        .join(" ");
    let b: String = (0..8)
        .map(|i| corpus.text(i * PLANT_EVERY + 1))
        .collect::<Vec<_>>()
        .join(" ");
    let engine = engine();
    let words = a.split_whitespace().count();
    // Baseline: what /compare-style scores alone cost (prepare both texts).
    g.bench_function(
        format!("baseline_prepare_two_{words}_word_documents"),
        |bench| {
            bench.iter(|| {
                let pa = engine.prepare(black_box(&a)).unwrap();
                let pb = engine.prepare(black_box(&b)).unwrap();
                jaccard::jaccard(pa.shingles(), pb.shingles())
            })
        },
    );
    g.bench_function(format!("two_{words}_word_documents"), |bench| {
        bench.iter(|| {
            let x = engine.explain(black_box(&a), black_box(&b)).unwrap();
            let joined: usize = x.a.segments.iter().map(|s| s.range.1 - s.range.0).sum();
            assert_eq!(joined, a.len());
            assert!(x.passages >= 1 && x.jaccard > 0.8, "{}", x.jaccard);
            x
        })
    });
    g.finish();
}

/// (21, 6) is what every bench above assumes.
fn check_tuning(_: &mut Criterion) {
    let b = BandParams::resolve(0.8, 128, None, None).unwrap();
    assert_eq!((b.bands, b.rows), (21, 6));
}

/// The threshold advisor: the pairwise histogram of 2,000 accented
/// articles for k = 1..4 (2 million pairs each) and, as its baseline,
/// shingling them alone (what every analysis pays before counting pairs).
fn analysis(c: &mut Criterion) {
    use neardup::analysis::{self, Recipe};
    use std::sync::atomic::AtomicBool;
    let mut g = c.benchmark_group("analysis");
    g.sample_size(10);
    let corpus = index_corpus();
    let texts: Vec<String> = (0..2000).map(|i| corpus.unicode_text(i)).collect();
    let p = engine().params().clone();
    let recipe = Recipe {
        normalize: p.normalize,
        kind: p.shingle.kind,
        multiset: p.shingle.multiset,
        seed: p.index.seed,
    };
    let stop = AtomicBool::new(false);
    g.bench_function("baseline_shingle_2000_texts_k1_to_4", |bench| {
        bench.iter(|| {
            for k in 1..=4 {
                black_box(analysis::shingle_sets(&recipe, k, &texts, &stop).unwrap());
            }
        })
    });
    g.bench_function("histogram_2000_texts_k1_to_4", |bench| {
        bench.iter(|| {
            let h = analysis::histograms(
                &recipe,
                &texts,
                &[1, 2, 3, 4],
                20,
                (21, 6),
                None,
                &stop,
                &|_, _| {},
            )
            .unwrap();
            assert_eq!(h[0].pairs, 1_999_000);
            h
        })
    });
    g.finish();
}

/// Document frequency and content scores (issue 44) on 10,000 generated
/// 120-word posts, each with one of ten 40-word footers: a content query
/// by id against a raw one on the same engine, and one write (a replace:
/// uncount and count) with the counts off and on.
fn boilerplate(c: &mut Criterion) {
    use neardup::engine::{BoilerplateParams, EngineParams, IndexParams, Measure, Score};
    let words = |seed: u64, n: usize, vocab: u32| -> String {
        let mut rng = StdRng::seed_from_u64(seed);
        (0..n)
            .map(|_| format!("w{}", rng.gen_range(0..vocab)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let engine = |on: bool| {
        Engine::new(
            EngineParams {
                index: IndexParams {
                    passage_index: true,
                    boilerplate: BoilerplateParams {
                        enabled: on,
                        ..Default::default()
                    },
                    ..Default::default()
                },
                ..Default::default()
            }
            .validate()
            .unwrap(),
        )
    };
    let footers: Vec<String> = (0..10).map(|f| words(1_000_000 + f, 40, 500)).collect();
    let docs: Vec<(String, String)> = (0..10_000u64)
        .map(|i| {
            (
                format!("p{i}"),
                format!("{} {}", words(i, 120, 50_000), footers[i as usize % 10]),
            )
        })
        .collect();
    let (off, on) = (engine(false), engine(true));
    for e in [&off, &on] {
        for (id, text) in &docs {
            let doc = e.prepare(text).unwrap();
            e.insert(DocId::parse(id).unwrap(), &doc, None, WriteMode::Upsert)
                .unwrap();
        }
    }
    let mut g = c.benchmark_group("boilerplate");
    g.throughput(Throughput::Elements(1));
    let raw = Query::new(on.threshold(None).unwrap(), 10);
    let content = Query::new(
        on.threshold_for(Measure::Jaccard, Score::Content, Some(0.8))
            .unwrap(),
        10,
    )
    .score(Score::Content);
    for (name, e, q) in [
        ("raw_query_counts_off", &off, raw.clone()),
        ("raw_query_counts_on", &on, raw),
        ("content_query", &on, content),
    ] {
        g.bench_function(name, |b| {
            let mut i = Cycle::new(docs.len());
            b.iter(|| e.similar_to_id(black_box(&docs[i.next()].0), &q).unwrap())
        });
    }
    let signed: Vec<_> = docs
        .iter()
        .take(1000)
        .map(|(_, t)| on.prepare(t).unwrap())
        .collect();
    for (name, e) in [("replace_counts_off", &off), ("replace_counts_on", &on)] {
        g.bench_function(name, |b| {
            let mut i = Cycle::new(signed.len());
            b.iter(|| {
                let n = i.next();
                e.insert(
                    DocId::parse(&docs[n].0).unwrap(),
                    black_box(&signed[n]),
                    None,
                    WriteMode::Upsert,
                )
                .unwrap()
            })
        });
    }
    g.finish();
}

/// Metadata filters (`engine/filter.rs`): the same queries by id, without
/// a filter, with one that admits every document (the filter is read on
/// every candidate, nothing is saved by it), and with a one-of condition
/// and an `exclude_same` that admit every match. 20,000 documents of 200
/// words with ~170 bytes of metadata each; every fourth one heads a family
/// of four near-duplicates, so a query verifies and returns 3 matches.
/// The target: a filtered query costs at most 1.2× the unfiltered one.
fn filter(c: &mut Criterion) {
    use neardup::engine::FilterSpec;
    let words = |seed: u64| -> Vec<String> {
        let mut rng = StdRng::seed_from_u64(seed);
        (0..200)
            .map(|_| format!("w{}", rng.gen_range(0..50_000u32)))
            .collect()
    };
    let e = engine();
    let mut heads = Vec::new();
    for family in 0..5_000u64 {
        let base = words(family);
        heads.push(format!("d{family}-0"));
        for m in 0..4u64 {
            let mut text = base.clone();
            if m > 0 {
                text[(m * 37) as usize] = format!("edit{m}");
            }
            let n = family * 4 + m;
            let metadata = format!(
                r#"{{"site":"site-{}.example","author":"Auteur n°{}","views":{},"draft":false,"lang":"fr","tags":["presse","économie"],"title":"Titre {n} — “{}”"}}"#,
                n % 50,
                n % 997,
                n * 3,
                text[0]
            );
            let doc = e.prepare(&text.join(" ")).unwrap();
            e.insert(
                DocId::parse(&format!("d{family}-{m}")).unwrap(),
                &doc,
                Some(metadata.into()),
                WriteMode::Create,
            )
            .unwrap();
        }
    }
    let t = e.threshold(None).unwrap();
    let spec = |f: serde_json::Value, ex: &[&str]| {
        let ex: Vec<String> = ex.iter().map(|s| s.to_string()).collect();
        Arc::new(FilterSpec::parse(Some(&f), &ex).unwrap().unwrap())
    };
    let plain = Query::new(t, 10);
    let all = Query::new(t, 10).filter(Some(
        spec(serde_json::json!({"draft": false}), &[]).about(None),
    ));
    let one_of = Query::new(t, 10).filter(Some(
        spec(serde_json::json!({"lang": ["fr", "de"], "site": (0..50).map(|s| format!("site-{s}.example")).collect::<Vec<_>>()}), &["author"])
            .about(None),
    ));
    let mut g = c.benchmark_group("filter");
    g.throughput(Throughput::Elements(1));
    for (name, q) in [
        ("similar_to_id_unfiltered", &plain),
        ("similar_to_id_filter_admits_all", &all),
        ("similar_to_id_one_of_and_exclude_same", &one_of),
    ] {
        g.bench_function(name, |b| {
            let mut i = Cycle::new(heads.len());
            b.iter(|| {
                let out = e.similar_to_id(black_box(&heads[i.next()]), q).unwrap();
                assert_eq!(out.matches.len(), 3, "{:?}", out.matches);
                out
            })
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    check_tuning,
    prepare,
    normalize_text,
    shingle,
    minhash_sign,
    lsh_query,
    verify,
    similar_end_to_end,
    explain,
    analysis,
    boilerplate,
    filter
);
criterion_main!(benches);
