//! The passage index on the redis backend (docs/redis-layout.md, "The
//! passage index"), driven through the backend's own calls: two nodes (an
//! engine and a connection each) over the shared Redis Cluster, writes on
//! one and reads on the other. Containment queries, passage lookups,
//! containment pairs and `if_unique` by containment, after deletes,
//! replaces and the expiry sweep; switching the index on for stored
//! documents (backfill, also of a node that learnt it late) and off; a
//! common fingerprint skipped and reported; answers equal to the memory
//! engine's and to brute force on a corpus of excerpts.

use crate::helpers::shared_cluster;
use neardup::backend::redis::{Redis, RedisIndex};
use neardup::config::RedisSettings;
use neardup::engine::{
    DocId, Engine, EngineError, EngineParams, ManualClock, Measure, NewDoc, Query, QueryOutcome,
    Threshold, UniqueOutcome, WriteMode,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One neardup node: its engine (recipe, clock, the passage flag) and its
/// own connection to the cluster.
struct Node {
    engine: Arc<Engine>,
    index: RedisIndex,
}

fn settings(prefix: &str) -> RedisSettings {
    RedisSettings {
        nodes: shared_cluster().urls(),
        key_prefix: prefix.to_owned(),
        expected_documents: 2_000,
        watch_interval_ms: 100,
        command_timeout_ms: 2_000,
        ..Default::default()
    }
}

fn params(passages: bool, common: usize) -> EngineParams {
    let mut p = EngineParams::default();
    p.index.passage_index = passages;
    p.index.common_fingerprint_docs = common;
    p
}

fn fresh_prefix() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "passages-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

async fn node(prefix: &str, p: EngineParams, clock: &Arc<ManualClock>) -> Node {
    node_sized(prefix, p, clock, 2_000).await
}

async fn node_sized(
    prefix: &str,
    p: EngineParams,
    clock: &Arc<ManualClock>,
    expected_documents: u64,
) -> Node {
    let clock: Arc<dyn neardup::engine::Clock> = Arc::clone(clock) as _;
    let engine = Arc::new(Engine::with_clock(p.validate().unwrap(), clock));
    let redis = Arc::new(Redis::new(RedisSettings {
        expected_documents,
        ..settings(prefix)
    }));
    let index = RedisIndex::open(Arc::clone(&engine), redis, "default")
        .await
        .unwrap();
    Node { engine, index }
}

/// Two nodes over one fresh key prefix, sharing a clock.
async fn two_nodes(p: EngineParams) -> (Node, Node, Arc<ManualClock>, String) {
    let prefix = fresh_prefix();
    let clock = Arc::new(ManualClock::default());
    let a = node(&prefix, p.clone(), &clock).await;
    let b = node(&prefix, p, &clock).await;
    (a, b, clock, prefix)
}

/// `n` words drawn from a vocabulary of 5,000 (seeded).
fn words(seed: u64, n: usize) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| format!("w{}", rng.gen_range(0..5_000u32)))
        .collect()
}

fn new_doc(engine: &Engine, id: &str, text: &str) -> NewDoc {
    NewDoc {
        id: DocId::parse(id).unwrap(),
        doc: engine.prepare(text).unwrap(),
        metadata: None,
        expires_ms: None,
        text: None,
        created_ms: None,
    }
}

async fn put(node: &Node, id: &str, text: &str) {
    node.index
        .insert(new_doc(&node.engine, id, text), WriteMode::Upsert)
        .await
        .unwrap();
}

fn threshold(t: f64, measure: Measure) -> Threshold {
    Engine::new(EngineParams::default().validate().unwrap())
        .threshold_for(measure, neardup::engine::Score::Raw, Some(t))
        .unwrap()
}

fn q(t: f64, measure: Measure) -> Query {
    Query::new(threshold(t, measure), 1_000).measure(measure)
}

fn ids(out: &QueryOutcome) -> Vec<&str> {
    out.matches.iter().map(|m| m.id.as_str()).collect()
}

async fn by_text(node: &Node, text: &str, query: &Query) -> QueryOutcome {
    let doc = node.engine.prepare(text).unwrap();
    node.index.similar_to(&doc, None, query).await.unwrap()
}

/// Every member of the posting buckets of `text`'s fingerprints, as iids.
async fn posted(node: &Node, text: &str) -> BTreeSet<u64> {
    let doc = node.engine.prepare(text).unwrap();
    let mut out = BTreeSet::new();
    for fp in doc.fingerprints() {
        let mut get = redis::cmd("HGET");
        get.arg(node.index.keys().posting(fp))
            .arg(fp.to_le_bytes().as_slice());
        let v: Option<Vec<u8>> = node.index.redis().one("test", get).await.unwrap();
        for m in v.unwrap_or_default().chunks_exact(12) {
            out.insert(u64::from_le_bytes(m[..8].try_into().unwrap()));
        }
    }
    out
}

fn iid(id: &str) -> u64 {
    neardup::backend::redis::codec::iid(id)
}

async fn layout(node: &Node) -> String {
    let mut get = redis::cmd("GET");
    get.arg(node.index.keys().meta());
    let v: Option<String> = node.index.redis().one("test", get).await.unwrap();
    v.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containment_queries_and_passage_lookups_are_answered_on_the_other_node() {
    let (a, b, _clock, _) = two_nodes(params(true, 1_000)).await;
    let articles: Vec<Vec<String>> = (0..30).map(|i| words(100 + i, 300)).collect();
    let docs = articles
        .iter()
        .enumerate()
        .map(|(i, w)| new_doc(&a.engine, &format!("art-{i}"), &w.join(" ")))
        .collect();
    for r in a.index.insert_many(docs, WriteMode::Create).await.unwrap() {
        r.unwrap();
    }
    assert!(
        layout(&a).await.contains("passages=1"),
        "{}",
        layout(&a).await
    );

    // An excerpt (40%) of article 3 is inside it: query_in_stored 1.0;
    // its Jaccard is ~0.4, which a Jaccard query at 0.8 does not reach.
    let excerpt = articles[3][90..210].join(" ");
    let out = by_text(&b, &excerpt, &q(0.9, Measure::QueryInStored)).await;
    assert_eq!(ids(&out), ["art-3"], "{out:?}");
    assert_eq!(out.matches[0].query_in_stored, 1.0);
    assert!(out.matches[0].jaccard < 0.5);
    assert!(out.passages.as_ref().unwrap().fingerprints > 0);
    let jaccard = by_text(&b, &excerpt, &q(0.8, Measure::Jaccard)).await;
    assert!(jaccard.matches.is_empty(), "{jaccard:?}");

    // A text embedding article 5 (and as much of its own) holds it.
    let embedding = [words(9_999, 300), articles[5].clone()].concat().join(" ");
    let out = by_text(&b, &embedding, &q(0.9, Measure::StoredInQuery)).await;
    assert_eq!(ids(&out), ["art-5"], "{out:?}");
    assert_eq!(out.matches[0].stored_in_query, 1.0);
    // Either direction.
    let out = by_text(&b, &embedding, &q(0.9, Measure::Containment)).await;
    assert_eq!(ids(&out), ["art-5"]);

    // A quote of 30 words of article 7, looked up as a passage.
    let quote = articles[7][100..130].join(" ");
    let passage = b.engine.passage(&quote).unwrap();
    let found = b.index.passages(&passage, 10, 10, None).await.unwrap();
    assert_eq!(found.hits.len(), 1, "{found:?}");
    assert_eq!(found.hits[0].id.as_str(), "art-7");
    assert_eq!(found.hits[0].longest_run, found.passage_len);

    // By id: a stored excerpt finds its source, never itself.
    put(&a, "excerpt-3", &excerpt).await;
    let out = b
        .index
        .similar_to_id("excerpt-3", &q(0.9, Measure::QueryInStored))
        .await
        .unwrap();
    assert_eq!(ids(&out), ["art-3"]);
    let out = b
        .index
        .similar_to_id("art-3", &q(0.9, Measure::StoredInQuery))
        .await
        .unwrap();
    assert_eq!(ids(&out), ["excerpt-3"]);

    // if_unique by containment: an excerpt of a stored article is refused,
    // naming it; a new text is stored (and indexed: found from the other node).
    let other = articles[11][0..150].join(" ");
    let refused = b
        .index
        .insert_if_unique(
            new_doc(&b.engine, "quote-11", &other),
            q(0.9, Measure::QueryInStored),
        )
        .await
        .unwrap();
    match refused {
        UniqueOutcome::Duplicate(out) => assert_eq!(ids(&out), ["art-11"]),
        UniqueOutcome::Inserted(_) => panic!("an excerpt of art-11 was stored"),
    }
    let fresh = words(77_777, 200).join(" ");
    let stored = b
        .index
        .insert_if_unique(
            new_doc(&b.engine, "fresh", &fresh),
            q(0.9, Measure::QueryInStored),
        )
        .await
        .unwrap();
    assert!(matches!(stored, UniqueOutcome::Inserted(_)));
    let out = by_text(&a, &fresh, &q(0.9, Measure::QueryInStored)).await;
    assert_eq!(ids(&out), ["fresh"]);
    assert!(b.index.get("quote-11").await.unwrap().is_none());
    assert!(!posted(&a, &other).await.contains(&iid("quote-11")));

    let stats = b.index.passage_stats();
    assert_eq!(stats["on"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_replaces_and_the_expiry_sweep_take_their_postings_along() {
    let (a, b, clock, _) = two_nodes(params(true, 1_000)).await;
    let one = words(1, 250).join(" ");
    let two = words(2, 250).join(" ");
    put(&a, "doc", &one).await;
    assert!(posted(&b, &one).await.contains(&iid("doc")));
    let excerpt_one = words(1, 250)[50..150].join(" ");
    let excerpt_two = words(2, 250)[50..150].join(" ");
    let query = q(0.9, Measure::QueryInStored);
    assert_eq!(ids(&by_text(&b, &excerpt_one, &query).await), ["doc"]);

    // Replaced on the other node: the old version's postings go.
    put(&b, "doc", &two).await;
    assert!(by_text(&a, &excerpt_one, &query).await.matches.is_empty());
    assert_eq!(ids(&by_text(&a, &excerpt_two, &query).await), ["doc"]);
    assert!(!posted(&a, &one).await.contains(&iid("doc")));
    assert!(posted(&a, &two).await.contains(&iid("doc")));

    // Deleted: gone from the answers and from the buckets.
    assert!(a.index.remove("doc").await.unwrap());
    assert!(by_text(&b, &excerpt_two, &query).await.matches.is_empty());
    assert!(posted(&b, &two).await.is_empty());
    let passage = b.engine.passage(&excerpt_two).unwrap();
    assert!(b
        .index
        .passages(&passage, 5, 10, None)
        .await
        .unwrap()
        .hits
        .is_empty());

    // Expiring: hidden at once, its postings gone after the sweep.
    let mut short = new_doc(&a.engine, "short", &one);
    short.expires_ms = Some(a.engine.now_ms() + 60_000);
    a.index.insert(short, WriteMode::Create).await.unwrap();
    assert_eq!(ids(&by_text(&b, &excerpt_one, &query).await), ["short"]);
    clock.advance(Duration::from_secs(120));
    assert!(by_text(&b, &excerpt_one, &query).await.matches.is_empty());
    assert!(posted(&b, &one).await.contains(&iid("short")));
    assert_eq!(b.index.purge_expired().await.unwrap(), 1);
    assert!(posted(&a, &one).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_the_index_on_backfills_stored_documents_even_from_a_late_node() {
    let (a, b, clock, prefix) = two_nodes(params(false, 1_000)).await;
    let texts: Vec<Vec<String>> = (0..12).map(|i| words(500 + i, 200)).collect();
    for (i, w) in texts.iter().enumerate() {
        put(&a, &format!("old-{i}"), &w.join(" ")).await;
    }
    let excerpt = |i: usize| texts[i][40..140].join(" ");
    let query = q(0.9, Measure::QueryInStored);
    let doc = b.engine.prepare(&excerpt(0)).unwrap();
    let off = b.index.similar_to(&doc, None, &query).await.unwrap_err();
    assert!(
        matches!(
            off,
            neardup::backend::BackendError::Engine(EngineError::PassageIndexOff(_))
        ),
        "{off:?}"
    );
    assert!(posted(&a, &texts[0].join(" ")).await.is_empty());
    assert!(layout(&a).await.contains("passages=0"));

    // On at node a: every stored document is indexed, at once.
    a.index.set_passage_index(true).await.unwrap();
    assert!(layout(&a).await.contains("passages=1"));
    for i in 0..12 {
        let out = by_text(&a, &excerpt(i), &query).await;
        assert_eq!(ids(&out), [format!("old-{i}")]);
    }
    // Node b has not seen it yet: it writes without postings...
    let late = words(999, 200);
    put(&b, "late", &late.join(" ")).await;
    assert!(posted(&a, &late.join(" ")).await.is_empty());
    // ...and node a's repeat, after two watch intervals and the command
    // timeout, indexes it.
    tokio::time::sleep(Duration::from_millis(2 * 100 + 2_000 + 1_500)).await;
    let out = by_text(&a, &late[40..140].join(" "), &query).await;
    assert_eq!(ids(&out), ["late"]);
    b.index.set_passage_index(true).await.unwrap();
    assert_eq!(ids(&by_text(&b, &excerpt(3), &query).await), ["old-3"]);
    // The backfill adds each posting once, however often it runs.
    let members = |n: &Node| {
        let text = texts[4].join(" ");
        let doc = n.engine.prepare(&text).unwrap();
        let fp = doc.fingerprints().next().unwrap();
        let mut get = redis::cmd("HSTRLEN");
        get.arg(n.index.keys().posting(fp))
            .arg(fp.to_le_bytes().as_slice());
        get
    };
    let before: i64 = a.index.redis().one("test", members(&a)).await.unwrap();
    a.index.set_passage_index(false).await.unwrap();
    assert!(posted(&a, &texts[4].join(" ")).await.is_empty());
    assert!(layout(&a).await.contains("passages=0"));
    a.index.set_passage_index(true).await.unwrap();
    let again: i64 = a.index.redis().one("test", members(&a)).await.unwrap();
    assert_eq!(before, again);

    // A node started with the index configured on, over a collection the
    // layout says lacks postings (the default collection when the
    // configuration turns it on), backfills before it serves.
    a.index.set_passage_index(false).await.unwrap();
    b.index.set_passage_index(false).await.unwrap();
    let c = node(&prefix, params(true, 1_000), &clock).await;
    assert!(layout(&c).await.contains("passages=1"));
    assert_eq!(ids(&by_text(&c, &excerpt(7), &query).await), ["old-7"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_common_fingerprint_is_skipped_and_reported() {
    let (a, b, _, _) = two_nodes(params(true, 5)).await;
    let footer = words(4_242, 80);
    for i in 0..8 {
        let text = [words(600 + i, 200), footer.clone()].concat().join(" ");
        put(&a, &format!("post-{i}"), &text).await;
    }
    let before = b
        .index
        .redis()
        .counters
        .postings_common
        .load(Ordering::Relaxed);
    // The footer alone, by containment: each of its fingerprints is held
    // by all 8 > 5 documents, so none is read, and the answer says so
    // (the footer is inside every post: it is boilerplate, reported).
    let out = by_text(&b, &footer.join(" "), &q(0.9, Measure::QueryInStored)).await;
    let work = out.passages.clone().unwrap();
    assert!(out.matches.is_empty(), "{out:?}");
    assert_eq!(out.candidates, 0);
    assert!(work.common > 0);
    assert_eq!(work.common, work.fingerprints, "{work:?}");
    assert_eq!(work.common_docs[0], 8);
    // Looked up as a passage (every shingle of it): the shingles that are
    // fingerprints of all 8 are skipped and counted; hits can only come
    // from the few picked in fewer posts (where the footer meets a body).
    let passage = b.engine.passage(&footer.join(" ")).unwrap();
    let found = b.index.passages(&passage, 10, 10, None).await.unwrap();
    assert!(found.work.common >= work.common, "{found:?}");
    assert_eq!(found.work.common_docs[0], 8);
    assert!(found
        .hits
        .iter()
        .all(|h| h.id.as_str().starts_with("post-") && h.longest_run == found.passage_len));
    let after = b
        .index
        .redis()
        .counters
        .postings_common
        .load(Ordering::Relaxed);
    assert!(after >= before + (work.common + found.work.common) as u64);
    // A post's own body still finds it (its common footer counts as shared).
    let body = words(603, 200)[20..180].join(" ");
    let out = by_text(&b, &body, &q(0.9, Measure::QueryInStored)).await;
    assert_eq!(ids(&out), ["post-3"]);
}

/// A corpus of sources, excerpts (30–60% of a source), abridged copies
/// (about two thirds of a source's paragraphs) and unrelated texts.
fn corpus() -> Vec<(String, Vec<String>)> {
    let mut rng = StdRng::seed_from_u64(43);
    let mut out = Vec::new();
    let sources: Vec<Vec<String>> = (0..25).map(|i| words(7_000 + i, 300)).collect();
    for (i, s) in sources.iter().enumerate() {
        out.push((format!("src-{i}"), s.clone()));
    }
    for i in 0..25 {
        let s = &sources[rng.gen_range(0..sources.len())];
        let len = rng.gen_range(90..180);
        let at = rng.gen_range(0..s.len() - len);
        out.push((format!("excerpt-{i}"), s[at..at + len].to_vec()));
    }
    for i in 0..10 {
        let s = &sources[rng.gen_range(0..sources.len())];
        let kept: Vec<String> = s
            .chunks(30)
            .enumerate()
            .filter(|(p, _)| p % 3 != 1)
            .flat_map(|(_, c)| c.to_vec())
            .collect();
        out.push((format!("abridged-{i}"), kept));
    }
    for i in 0..10 {
        out.push((format!("other-{i}"), words(90_000 + i, 150)));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_equal_brute_force_and_the_memory_engine_on_a_corpus_of_excerpts() {
    let (a, b, _, _) = two_nodes(params(true, 1_000)).await;
    let memory = Engine::new(params(true, 1_000).validate().unwrap());
    let corpus = corpus();
    let docs: Vec<NewDoc> = corpus
        .iter()
        .map(|(id, w)| new_doc(&a.engine, id, &w.join(" ")))
        .collect();
    for d in &docs {
        memory
            .insert(d.id.clone(), &d.doc, None, WriteMode::Create)
            .unwrap();
    }
    for r in a
        .index
        .insert_many(docs.clone(), WriteMode::Create)
        .await
        .unwrap()
    {
        r.unwrap();
    }
    let sets: BTreeMap<&str, &[u32]> = docs
        .iter()
        .map(|d| (d.id.as_str(), d.doc.shingles()))
        .collect();
    let overlap = |x: &[u32], y: &[u32]| neardup::jaccard::overlap(x, y).intersection;
    let t = 0.8;
    for measure in [
        Measure::QueryInStored,
        Measure::StoredInQuery,
        Measure::Containment,
    ] {
        let query = q(t, measure);
        for d in &docs {
            let got = b.index.similar_to_id(d.id.as_str(), &query).await.unwrap();
            let mem = memory.similar_to_id(d.id.as_str(), &query).unwrap();
            let qs = d.doc.shingles();
            let brute: BTreeSet<&str> = sets
                .iter()
                .filter(|(id, _)| **id != d.id.as_str())
                .filter(|(_, s)| {
                    let i = overlap(qs, s) as f64;
                    let (in_stored, in_query) = (i / qs.len() as f64, i / s.len() as f64);
                    match measure {
                        Measure::QueryInStored => in_stored >= t,
                        Measure::StoredInQuery => in_query >= t,
                        _ => in_stored.max(in_query) >= t,
                    }
                })
                .map(|(id, _)| *id)
                .collect();
            let found: BTreeSet<String> = ids(&got).into_iter().map(str::to_owned).collect();
            let brute: BTreeSet<String> = brute.into_iter().map(str::to_owned).collect();
            assert_eq!(found, brute, "{} by {measure:?}", d.id.as_str());
            // The same matches, scores and order (the stamps differ: the
            // nodes' clock is a manual one).
            let unstamped = |out: QueryOutcome| {
                out.matches
                    .into_iter()
                    .map(|m| neardup::engine::Match { created_ms: 0, ..m })
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                unstamped(got),
                unstamped(mem),
                "{} by {measure:?}",
                d.id.as_str()
            );
        }
    }
    // Pairs: either text inside the other at >= t, each once.
    let (edges, stats) = b
        .index
        .scan_edges(threshold(t, Measure::Containment), Measure::Containment)
        .await
        .unwrap();
    let got: BTreeSet<(String, String)> = edges
        .iter()
        .map(|e| (e.a.id().as_str().to_owned(), e.b.id().as_str().to_owned()))
        .collect();
    assert_eq!(got.len(), edges.len(), "a pair twice");
    let mut brute = BTreeSet::new();
    for (x, sx) in &sets {
        for (y, sy) in &sets {
            if x < y {
                let i = overlap(sx, sy) as f64;
                if i / sx.len().min(sy.len()) as f64 >= t {
                    brute.insert((x.to_string(), y.to_string()));
                }
            }
        }
    }
    assert!(brute.len() >= 30, "the corpus has pairs: {}", brute.len());
    assert_eq!(got, brute);
    assert_eq!(stats.documents, corpus.len());
    for e in &edges {
        let i = overlap(e.a.shingles(), e.b.shingles()) as f64;
        assert_eq!(e.a_in_b, i / e.a.shingles().len() as f64);
    }
}

/// Measured, not asserted (run by hand, release build):
/// `cargo test --release --test api_redis passage_index::latency -- --ignored --nocapture`.
/// The same documents written to two collections, the passage index on
/// in one and off in the other: ingest time of each, then the median and
/// 95th percentile of Jaccard queries (a near-duplicate of a stored
/// document) and of containment queries (an excerpt of one), on the same
/// node in the same run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand"]
async fn latency_of_containment_and_jaccard_queries() {
    let n: usize = std::env::var("PASSAGES_DOCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let clock = Arc::new(ManualClock::default());
    let on = node_sized(&fresh_prefix(), params(true, 1_000), &clock, n as u64).await;
    let off = node_sized(&fresh_prefix(), params(false, 1_000), &clock, n as u64).await;
    let texts: Vec<Vec<String>> = (0..n as u64).map(|i| words(i, 400)).collect();
    for (name, target) in [("index off", &off), ("index on", &on)] {
        let started = std::time::Instant::now();
        for (c, part) in texts.chunks(500).enumerate() {
            let docs = part
                .iter()
                .enumerate()
                .map(|(i, w)| new_doc(&target.engine, &format!("d{}", c * 500 + i), &w.join(" ")))
                .collect();
            target
                .index
                .insert_many(docs, WriteMode::Create)
                .await
                .unwrap();
        }
        println!(
            "ingest {n} documents of 400 words, {name}: {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    // What the postings take in Redis (one copy, MEMORY USAGE of every
    // posting hash), per document.
    let mut bytes = 0u64;
    for key in on.index.keys().posting_keys() {
        let mut usage = redis::cmd("MEMORY");
        usage.arg("USAGE").arg(&key).arg("SAMPLES").arg(0);
        let b: Option<u64> = on.index.redis().one("test", usage).await.unwrap();
        bytes += b.unwrap_or(0);
    }
    println!(
        "postings: {} bytes a document ({} posting hashes)",
        bytes / n as u64,
        on.index.keys().posting_keys().count()
    );
    let mut rng = StdRng::seed_from_u64(5);
    let mut timings: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for round in 0..300 {
        let i = rng.gen_range(0..n);
        let mut near = texts[i].clone();
        near[round % 400] = "edited".into();
        let excerpt = texts[i][100..260].join(" ");
        for (name, text, query) in [
            ("jaccard", near.join(" "), q(0.8, Measure::Jaccard)),
            ("query_in_stored", excerpt, q(0.9, Measure::QueryInStored)),
        ] {
            let started = std::time::Instant::now();
            let out = by_text(&on, &text, &query).await;
            timings
                .entry(name)
                .or_default()
                .push(started.elapsed().as_secs_f64() * 1e3);
            assert_eq!(ids(&out), [format!("d{i}")]);
        }
    }
    for (name, mut ms) in timings {
        ms.sort_by(f64::total_cmp);
        println!(
            "{name}: median {:.2} ms, p95 {:.2} ms ({} queries, {n} documents)",
            ms[ms.len() / 2],
            ms[ms.len() * 95 / 100],
            ms.len()
        );
    }
}
