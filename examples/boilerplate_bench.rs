//! Boilerplate-aware scores (issue 44): what document frequency costs and
//! what content scores find, in one process, on one corpus, as ratios
//! within one run.
//!
//! ```text
//! cargo run --release --example boilerplate_bench -- FILE.jsonl [--n N] [--queries Q] [--rounds R] [--planted P] [--restore-rounds S] [--batch B]
//! ```
//!
//! Loads the first `N` `{"id", "text"}` lines and gives each one of ten
//! site footers (~50 words each, so each is in a tenth of the documents),
//! then:
//!
//! - **ingest**: batch inserts (`B` documents a batch, 1,000 by default)
//!   with the passage index on, document frequency off and on, alternating
//!   rounds (signing shared), docs/s and their ratio; the memory of
//!   document frequency: bytes per distinct shingle and per document;
//! - **count**: the count alone (every document's shingles into fresh
//!   tables, `B` documents a batch, as a write batch counts them) on one
//!   thread, µs a document (median of the rounds): what counting costs a
//!   core, without the inserts it runs beside;
//! - **queries** by id, `Q` random ids per round, alternating: raw Jaccard
//!   at the index's threshold (on the engine without counts, and with them,
//!   where every match also gets its content scores) and content Jaccard at
//!   the same threshold; ns per query (medians) and their ratios;
//! - **restore** (with `--restore-rounds S`): the documents stored and
//!   snapshotted in a temporary directory, then opened `S` times by a fresh
//!   engine with document frequency off and on, alternating: seconds a
//!   restart and their ratio (the counts are made again from the records);
//! - **recall**: `P` reprints (a stored document's text, one word edited,
//!   another site's footer), stored, each queried by content Jaccard; the
//!   answers against brute force over every stored document (content
//!   Jaccard from the test's own document frequencies), and how many the
//!   raw Jaccard query finds.
//!
//! Prints one JSON object.

use clap::Parser;
use neardup::engine::{
    BoilerplateParams, DocId, Engine, EngineParams, IndexParams, Measure, Prepared, Query, Score,
    WriteMode,
};
use rayon::prelude::*;
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::hint::black_box;
use std::time::Instant;

mod common;
use common::{load, load_in, median};

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    query: common::QueryArgs,
    /// Reprints planted for the recall measurement.
    #[arg(long, default_value = "200")]
    planted: usize,
    /// Restarts timed with counts off and on, alternating (0: none).
    #[arg(long, default_value = "0")]
    restore_rounds: usize,
    /// Documents a batch insert of the ingest rounds.
    #[arg(long, default_value = "1000")]
    batch: std::num::NonZeroUsize,
}

const SITES: [&str; 10] = [
    "Northern Courier",
    "Lakeside Gazette",
    "Metro Daily",
    "The Valley Star",
    "Harbour Post",
    "Capital Record",
    "Riverside Echo",
    "Eastern Sentinel",
    "Highland Chronicle",
    "Coastal Times",
];

/// A ~50-word site footer, as news sites write them.
fn footer(site: usize) -> String {
    let name = SITES[site];
    format!(
        "This story was first published by {name}. © 2026 {name} Ltd, all rights reserved. \
         Sign up to the {name} morning briefing – the day’s top stories, free to your inbox. \
         Subscriptions from £{} a week; cancel at any time. Read our “privacy notice” to see \
         how we use your data. Got a story? Contact the {name} news desk.",
        site + 1
    )
}

fn engine(boilerplate: bool) -> Engine {
    Engine::new(
        EngineParams {
            index: IndexParams {
                passage_index: true,
                boilerplate: BoilerplateParams {
                    enabled: boilerplate,
                    ..Default::default()
                },
                ..Default::default()
            },
            ..Default::default()
        }
        .validate()
        .expect("default params"),
    )
}

fn main() {
    let Args {
        query: args,
        planted,
        restore_rounds,
        batch,
    } = Args::parse();
    let (queries, rounds) = (args.queries.get(), args.rounds.get());
    let raw = args.read();
    let lines = args.lines(&raw);
    let mut texts: Vec<(String, String)> = lines
        .par_iter()
        .enumerate()
        .map(|(i, line)| {
            let v: Value = serde_json::from_str(line).expect("a JSON object a line");
            let text = v["text"].as_str().expect("a text");
            (
                v["id"].as_str().expect("an id").to_owned(),
                format!("{text}\n\n{}", footer(i % SITES.len())),
            )
        })
        .collect();
    drop(raw);
    // Reprints: one word edited, another site's footer.
    let stride = (texts.len() / planted.max(1)).max(1);
    let mut reprints = Vec::new();
    for (k, i) in (0..texts.len()).step_by(stride).take(planted).enumerate() {
        let (id, text) = &texts[i];
        let body = text.rsplit_once("\n\n").map_or(text.as_str(), |(b, _)| b);
        let mut words: Vec<&str> = body.split_whitespace().collect();
        let at = words.len() / 3;
        words[at] = "reprinted";
        let copy = format!(
            "{}\n\n{}",
            words.join(" "),
            footer((i + 1 + k % 5) % SITES.len())
        );
        reprints.push((format!("reprint-{k}"), id.clone()));
        texts.push((format!("reprint-{k}"), copy));
    }
    let on = engine(true);
    let docs: Vec<(String, Prepared)> = texts
        .par_iter()
        .filter_map(|(id, t)| Some((id.clone(), on.prepare(t).ok()?)))
        .collect();
    drop(on);
    let restore = (restore_rounds > 0).then(|| restore(&docs, restore_rounds));

    // Ingest, alternating; the last engines are kept.
    let (mut off_rate, mut on_rate) = (Vec::new(), Vec::new());
    let mut kept = None;
    for round in 0..rounds.min(3) {
        let off = engine(false);
        off_rate.push(load_in(&off, &docs, batch.get()));
        let on = engine(true);
        on_rate.push(load_in(&on, &docs, batch.get()));
        if round + 1 == rounds.min(3) {
            kept = Some((off, on));
        }
    }
    let (off, on) = kept.expect("one round");
    let (m_off, m_on) = (off.memory(), on.memory());
    // Counting every stored document at once (switching counts on).
    let switch_s = {
        let e = engine(false);
        load(&e, &docs);
        let t = Instant::now();
        e.set_boilerplate(true);
        t.elapsed().as_secs_f64()
    };
    let distinct = on.distinct_shingles();
    // The count alone, on one thread.
    let count_us = {
        let sets: Vec<&[u32]> = docs.iter().map(|(_, p)| p.shingles()).collect();
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("a pool of one thread");
        let us: Vec<f64> = (0..rounds.min(5))
            .map(|_| {
                let t = Instant::now();
                let counted = one.install(|| neardup::engine::count_in_batches(&sets, batch.get()));
                assert_eq!(
                    counted, distinct,
                    "the count alone counts what the engine counts"
                );
                t.elapsed().as_secs_f64() * 1e6 / sets.len() as f64
            })
            .collect();
        median(&us)
    };

    // The server collapses the index's memory into huge pages after a
    // restore and on a timer (src/hugepages.rs): so does the bench.
    let huge = neardup::hugepages::collapse_resident()
        .ok()
        .map(|p| p.collapsed_bytes());

    // Queries by id.
    let ids: Vec<&str> = docs.iter().map(|(id, _)| id.as_str()).collect();
    let draws: Vec<&str> = common::draws(1, queries, ids.len())
        .into_iter()
        .map(|i| ids[i])
        .collect();
    let t = on.params().index.threshold;
    let raw_q = Query::new(on.threshold(None).unwrap(), 10);
    let content_q = Query::new(
        on.threshold_for(Measure::Jaccard, Score::Content, Some(t))
            .unwrap(),
        10,
    )
    .score(Score::Content);
    let time = |e: &Engine, q: &Query| -> (f64, usize, usize) {
        let (mut found, mut cands) = (0, 0);
        let start = Instant::now();
        for id in &draws {
            let out = e.similar_to_id(black_box(id), q).expect("stored");
            found += out.matches.len();
            cands += out.candidates;
        }
        (
            start.elapsed().as_secs_f64() * 1e9 / draws.len() as f64,
            found,
            cands,
        )
    };
    let (mut raw_off, mut raw_on, mut content) = (Vec::new(), Vec::new(), Vec::new());
    let mut counts = (0, 0, 0, 0);
    for _ in 0..rounds {
        raw_off.push(time(&off, &raw_q).0);
        let (ns, found, _) = time(&on, &raw_q);
        raw_on.push(ns);
        counts.0 = found;
        let (ns, found, cands) = time(&on, &content_q);
        content.push(ns);
        counts.1 = found;
        counts.2 = cands;
    }

    // Recall of the reprints against brute force.
    let records = on.records();
    let mut df: HashMap<u32, u32> = HashMap::new();
    for r in &records {
        for &x in r.shingles() {
            *df.entry(x).or_insert(0) += 1;
        }
    }
    let p = on.boilerplate_params();
    let n = records.len();
    let at = (n >= p.min_collection_docs)
        .then(|| ((p.share * n as f64).ceil() as u32).max(p.min_docs as u32));
    let is_bp = |x: u32| at.is_some_and(|a| df.get(&x).copied().unwrap_or(0) >= a);
    let content_of =
        |s: &[u32]| -> BTreeSet<u32> { s.iter().copied().filter(|&x| !is_bp(x)).collect() };
    let all_content: Vec<(String, BTreeSet<u32>)> = records
        .par_iter()
        .map(|r| (r.id().to_string(), content_of(r.shingles())))
        .collect();
    let (mut want_total, mut got_total, mut hit, mut originals, mut raw_originals) =
        (0usize, 0usize, 0usize, 0usize, 0usize);
    for (copy, original) in &reprints {
        let me = content_of(on.get(copy).expect("stored").shingles());
        let want: BTreeSet<&str> = all_content
            .par_iter()
            .filter(|(id, _)| id != copy)
            .filter_map(|(id, s)| {
                let i = me.intersection(s).count() as f64;
                let u = me.len() as f64 + s.len() as f64 - i;
                (u > 0.0 && i / u >= t).then_some(id.as_str())
            })
            .collect();
        let got: BTreeSet<String> = on
            .similar_to_id(
                copy,
                &Query {
                    limit: 1000,
                    ..content_q.clone()
                },
            )
            .expect("stored")
            .matches
            .into_iter()
            .map(|m| m.id.to_string())
            .collect();
        want_total += want.len();
        got_total += got.len();
        hit += got.iter().filter(|g| want.contains(g.as_str())).count();
        originals += usize::from(got.contains(original));
        raw_originals += usize::from(
            on.similar_to_id(copy, &raw_q)
                .expect("stored")
                .matches
                .iter()
                .any(|m| m.id.as_str() == original),
        );
    }

    let out = json!({
        "documents": docs.len(),
        "restore": restore,
        "words_per_doc": texts.iter().map(|(_, t)| t.split_whitespace().count()).sum::<usize>() as f64 / texts.len() as f64,
        "ingest_batch": batch.get(),
        "ingest_docs_per_s": {"df_off": median(&off_rate), "df_on": median(&on_rate)},
        "ingest_ratio_on_over_off": median(&on_rate) / median(&off_rate),
        "switch_on_seconds": switch_s,
        "count_us_per_doc_one_thread": count_us,
        "huge_pages_collapsed_bytes": huge,
        "memory": {
            "doc_frequency_bytes": m_on.doc_frequency_bytes,
            "distinct_shingles": distinct,
            "bytes_per_distinct_shingle": m_on.doc_frequency_bytes as f64 / distinct.max(1) as f64,
            "doc_frequency_bytes_per_document": m_on.doc_frequency_bytes as f64 / docs.len() as f64,
            "bytes_per_document_off": m_off.bytes_per_document,
            "bytes_per_document_on": m_on.bytes_per_document,
            "boilerplate_threshold_docs": at,
        },
        "query_ns": {
            "raw_jaccard_df_off": median(&raw_off),
            "raw_jaccard_df_on": median(&raw_on),
            "content_jaccard": median(&content),
        },
        "ratios": {
            "content_over_raw_df_off": median(&content) / median(&raw_off),
            "raw_df_on_over_raw_df_off": median(&raw_on) / median(&raw_off),
        },
        "per_round": {"raw_matches": counts.0, "content_matches": counts.1, "content_candidates": counts.2},
        "reprints": {
            "planted": reprints.len(),
            "found_on_content": originals,
            "found_on_raw_jaccard": raw_originals,
            "brute_force_pairs": want_total,
            "answered": got_total,
            "recall": hit as f64 / want_total.max(1) as f64,
            "precision": hit as f64 / got_total.max(1) as f64,
        },
    });
    println!("{}", serde_json::to_string_pretty(&out).expect("json"));
}

/// Restarts: the documents stored and snapshotted once (counts on), then
/// the data directory opened `rounds` times by a fresh engine with counts
/// off and on, alternating: seconds (medians) and docs/s.
fn restore(docs: &[(String, Prepared)], rounds: usize) -> Value {
    use neardup::config::{StorageSettings, WalFsync};
    use neardup::engine::NewDoc;
    use neardup::persist::Store;
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let settings = StorageSettings {
        data_dir: dir.path().to_owned(),
        wal_fsync: WalFsync::Never,
        snapshot_interval_secs: 0,
        ..Default::default()
    };
    let open = |counts: bool| {
        let t = Instant::now();
        let store = Store::open(Arc::new(engine(counts)), &settings).expect("store opens");
        (store, t.elapsed().as_secs_f64())
    };
    {
        let (store, _) = open(true);
        for chunk in docs.chunks(10_000) {
            let items = chunk.iter().map(|(id, doc)| NewDoc {
                id: DocId::parse(id).expect("a valid id"),
                doc: doc.clone(),
                metadata: None,
                expires_ms: None,
                text: None,
                created_ms: None,
            });
            for r in store.insert_many(items, WriteMode::Upsert).expect("stored") {
                r.expect("stored");
            }
        }
        store.snapshot().expect("a snapshot");
    }
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        off.push(open(false).1);
        let (store, secs) = open(true);
        assert_eq!(
            store.engine().counted_docs(),
            docs.len(),
            "every document counted"
        );
        on.push(secs);
    }
    let n = docs.len() as f64;
    json!({"seconds_counts_off": median(&off), "seconds_counts_on": median(&on),
           "docs_per_s_counts_off": n / median(&off), "docs_per_s_counts_on": n / median(&on),
           "on_over_off": median(&on) / median(&off),
           "rounds_off": off, "rounds_on": on})
}
