//! The passage index (issue 43): what it costs and what it finds, in one
//! process, on one corpus, as ratios within one run.
//!
//! ```text
//! cargo run --release --example passage_bench -- FILE.jsonl [--n N] [--queries Q] [--rounds R] [--planted P] [--scan [--scan-rounds S]]
//! ```
//!
//! Loads the first `N` `{"id", "text"}` lines, signs them once, then:
//!
//! - **text stage**: shingling without and with winnowing (the selection
//!   every `prepare` now makes), ns per document, alternating rounds;
//! - **ingest**: batch inserts into an engine with the passage index off
//!   and one with it on, alternating rounds (the signing is shared: this
//!   is the index's own cost), docs/s and their ratio; the memory of both
//!   (`Engine::memory`): bytes per document, the fingerprint bitmaps and
//!   the passage index;
//! - **queries** by id on the engine with the index on, `Q` random ids per
//!   round, alternating: Jaccard at the index's threshold, and each
//!   containment measure at 0.9; ns per query (medians) and their ratio to
//!   Jaccard; Jaccard on the engine with the index off too;
//! - **recall**: `P` planted queries of each kind, never stored, against
//!   brute force over every stored document: *excerpts* (the leading 30–60%
//!   of a document's words, containment ≥ 0.9), *abridged* copies (two
//!   lines of three kept, one word in 60 edited, containment ≥ 0.8), and
//!   *quotes* (30 consecutive words, a passage lookup at the guaranteed
//!   run); recall and precision of the answers;
//! - with `--scan`: every pair by Jaccard (at the threshold) and by
//!   containment (either inside the other, ≥ 0.9), alternating for
//!   `--scan-rounds` rounds (default `R`, at most 3): medians in seconds and
//!   their ratio.
//!
//! Prints one JSON object.

use clap::Parser;
use neardup::engine::{Engine, EngineParams, IndexParams, Measure, Prepared, Query, Score};
use neardup::text::{NormalizeOptions, ShingleOptions, Tokenizer};
use rayon::prelude::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::hint::black_box;
use std::time::Instant;

mod common;
use common::{load, median};

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    query: common::QueryArgs,
    /// Planted queries of each kind for the recall measurement.
    #[arg(long, default_value = "200")]
    planted: usize,
    /// Also time the pair scans.
    #[arg(long)]
    scan: bool,
    /// Rounds of each pair scan, alternating (default: `--rounds`, at most 3).
    #[arg(long)]
    scan_rounds: Option<std::num::NonZeroUsize>,
}

fn engine(passages: bool) -> Engine {
    Engine::new(
        EngineParams {
            index: IndexParams {
                passage_index: passages,
                ..Default::default()
            },
            ..Default::default()
        }
        .validate()
        .expect("default params"),
    )
}

/// xorshift draws in `0..n`.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn main() {
    let Args {
        query: args,
        planted,
        scan,
        scan_rounds,
    } = Args::parse();
    let (queries, rounds) = (args.queries.get(), args.rounds.get());
    let raw = args.read();
    let lines = args.lines(&raw);
    let texts: Vec<(String, String)> = lines
        .par_iter()
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("a JSON object a line");
            (
                v["id"].as_str().expect("an id").to_owned(),
                v["text"].as_str().expect("a text").to_owned(),
            )
        })
        .collect();
    drop(raw);
    let on = engine(true);
    let docs: Vec<(String, Prepared)> = texts
        .par_iter()
        .filter_map(|(id, t)| Some((id.clone(), on.prepare(t).ok()?)))
        .collect();
    let words_per_doc = texts
        .iter()
        .map(|(_, t)| t.split_whitespace().count())
        .sum::<usize>() as f64
        / texts.len() as f64;

    // Text stage: shingling alone, then with the winnowing selection.
    let tok = Tokenizer::new(NormalizeOptions::default(), ShingleOptions::default(), 1);
    let sample: Vec<&str> = texts.iter().take(20_000).map(|(_, t)| t.as_str()).collect();
    let (mut plain, mut selected) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        for s in &sample {
            black_box(tok.shingles(s).expect("words"));
        }
        plain.push(t.elapsed().as_secs_f64() * 1e9 / sample.len() as f64);
        let t = Instant::now();
        for s in &sample {
            black_box(tok.shingles_selected(s).expect("words"));
        }
        selected.push(t.elapsed().as_secs_f64() * 1e9 / sample.len() as f64);
    }

    // Ingest, alternating; the last engines are kept for the queries.
    let (mut off_rate, mut on_rate) = (Vec::new(), Vec::new());
    let mut kept = None;
    for round in 0..rounds.min(3) {
        let off = engine(false);
        off_rate.push(load(&off, &docs));
        drop(off);
        let on = engine(true);
        on_rate.push(load(&on, &docs));
        if round + 1 == rounds.min(3) {
            kept = Some(on);
        }
    }
    let on = kept.expect("one round");
    let off = engine(false);
    load(&off, &docs);
    let (m_on, m_off) = (on.memory(), off.memory());

    // Queries by id.
    let ids: Vec<&str> = docs.iter().map(|(id, _)| id.as_str()).collect();
    let draws: Vec<&str> = common::draws(1, queries, ids.len())
        .into_iter()
        .map(|i| ids[i])
        .collect();
    let jaccard = Query::new(on.threshold(None).unwrap(), 10);
    let by =
        |m: Measure| Query::new(on.threshold_for(m, Score::Raw, Some(0.9)).unwrap(), 10).measure(m);
    let time = |e: &Engine, q: &Query| -> (f64, usize, usize) {
        let (mut found, mut cands) = (0, 0);
        let t = Instant::now();
        for id in &draws {
            let out = e.similar_to_id(black_box(id), q).expect("stored");
            found += out.matches.len();
            cands += out.candidates;
        }
        (
            t.elapsed().as_secs_f64() * 1e9 / draws.len() as f64,
            found,
            cands,
        )
    };
    let kinds = [
        ("jaccard", jaccard.clone()),
        ("query_in_stored", by(Measure::QueryInStored)),
        ("stored_in_query", by(Measure::StoredInQuery)),
        ("containment", by(Measure::Containment)),
    ];
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); kinds.len() + 1];
    let mut per_query = vec![(0.0, 0.0); kinds.len()];
    for _ in 0..rounds {
        for (k, (_, q)) in kinds.iter().enumerate() {
            let (t, found, cands) = time(&on, q);
            ns[k].push(t);
            per_query[k] = (
                found as f64 / draws.len() as f64,
                cands as f64 / draws.len() as f64,
            );
        }
        ns[kinds.len()].push(time(&off, &jaccard).0);
    }
    let jaccard_ns = median(&ns[0]);
    let query_json: Vec<Value> = kinds
        .iter()
        .enumerate()
        .map(|(k, (name, _))| {
            json!({"measure": name, "ns_per_query": median(&ns[k]), "rounds_ns": ns[k],
                   "ratio_to_jaccard": median(&ns[k]) / jaccard_ns,
                   "matches_per_query": per_query[k].0, "candidates_per_query": per_query[k].1})
        })
        .collect();

    // Recall against brute force.
    let mut rng = Rng(0x243f_6a88_85a3_08d3);
    let records = on.records();
    let mut recall = Vec::new();
    for kind in ["excerpt", "abridged", "quote"] {
        let (mut truth_n, mut found_n, mut wrong) = (0usize, 0usize, 0usize);
        for _ in 0..planted {
            let (_, text) = &texts[rng.below(texts.len())];
            let w: Vec<&str> = text.split_whitespace().collect();
            let query_text = match kind {
                "excerpt" => {
                    let n = w.len() * (30 + rng.below(31)) / 100;
                    w[..n].join(" ")
                }
                "abridged" => {
                    let kept: Vec<&str> = text
                        .lines()
                        .enumerate()
                        .filter(|(i, _)| i % 3 != 1)
                        .map(|(_, l)| l)
                        .collect();
                    let mut words: Vec<String> = kept
                        .join(" ")
                        .split_whitespace()
                        .map(str::to_owned)
                        .collect();
                    let mut k = rng.below(60);
                    while k < words.len() {
                        words[k] = format!("edited{k}");
                        k += 40 + rng.below(40);
                    }
                    words.join(" ")
                }
                _ => {
                    let start = rng.below(w.len().saturating_sub(30).max(1));
                    w[start..(start + 30).min(w.len())].join(" ")
                }
            };
            if kind == "quote" {
                let passage = on.passage(&query_text).expect("words");
                let run = on.passage_window();
                let truth: BTreeSet<String> = records
                    .par_iter()
                    .filter(|r| {
                        Engine::passage_in(&passage.ordered, passage.doc.shingles(), r.shingles()).0
                            >= run
                    })
                    .map(|r| r.id().to_string())
                    .collect();
                let got: BTreeSet<String> = on
                    .passages(&passage, run, 10_000, None)
                    .expect("index on")
                    .hits
                    .into_iter()
                    .map(|h| h.id.to_string())
                    .collect();
                truth_n += truth.len();
                found_n += truth.intersection(&got).count();
                wrong += got.difference(&truth).count();
                continue;
            }
            let t = if kind == "excerpt" { 0.9 } else { 0.8 };
            let doc = on.prepare(&query_text).expect("words");
            let q = Query::new(
                on.threshold_for(Measure::QueryInStored, Score::Raw, Some(t))
                    .unwrap(),
                10_000,
            )
            .measure(Measure::QueryInStored);
            let truth: BTreeSet<String> = records
                .par_iter()
                .filter(|r| {
                    let i = neardup::jaccard::overlap(doc.shingles(), r.shingles()).intersection;
                    i as f64 / doc.shingles().len() as f64 >= t
                })
                .map(|r| r.id().to_string())
                .collect();
            let got: BTreeSet<String> = on
                .similar_to(&doc, None, &q)
                .expect("index on")
                .matches
                .into_iter()
                .map(|m| m.id.to_string())
                .collect();
            truth_n += truth.len();
            found_n += truth.intersection(&got).count();
            wrong += got.difference(&truth).count();
        }
        recall.push(
            json!({"kind": kind, "queries": planted, "true_pairs": truth_n,
            "recall": found_n as f64 / truth_n.max(1) as f64,
            "precision": found_n as f64 / (found_n + wrong).max(1) as f64}),
        );
    }

    // Pair scans.
    let scans = scan.then(|| {
        let (mut j, mut c) = (Vec::new(), Vec::new());
        let (mut jp, mut cp) = (0, 0);
        let tj = on.threshold(None).unwrap();
        let tc = on
            .threshold_for(Measure::Containment, Score::Raw, Some(0.9))
            .unwrap();
        for _ in 0..scan_rounds.map_or(rounds.min(3), |n| n.get()) {
            let t = Instant::now();
            jp = on
                .scan_pairs(tj, None, &mut |_| std::ops::ControlFlow::Continue(()))
                .pairs;
            j.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            cp = on
                .scan_pairs_by(tc, Measure::Containment, None, &mut |_| {
                    std::ops::ControlFlow::Continue(())
                })
                .pairs;
            c.push(t.elapsed().as_secs_f64());
        }
        json!({"jaccard_s": median(&j), "containment_s": median(&c),
               "ratio": median(&c) / median(&j), "jaccard_pairs": jp, "containment_pairs": cp,
               "rounds_jaccard_s": j, "rounds_containment_s": c})
    });

    let n = docs.len() as f64;
    println!(
        "{}",
        json!({
            "docs": docs.len(),
            "words_per_doc": words_per_doc,
            "text_stage_ns": {"shingles": median(&plain), "with_winnowing": median(&selected),
                              "ratio": median(&selected) / median(&plain)},
            "ingest_docs_per_s": {"index_off": median(&off_rate), "index_on": median(&on_rate),
                                  "slowdown": median(&off_rate) / median(&on_rate),
                                  "rounds_off": off_rate, "rounds_on": on_rate},
            "memory_bytes_per_doc": {"index_off": m_off.bytes_per_document, "index_on": m_on.bytes_per_document,
                                     "added_by_index": m_on.bytes_per_document - m_off.bytes_per_document,
                                     "fingerprint_bitmaps": m_on.fingerprints_bytes as f64 / n,
                                     "passage_index": m_on.passage_index_bytes as f64 / n,
                                     "fingerprints_per_doc": docs.iter().map(|(_, d)| d.fingerprints().count()).sum::<usize>() as f64 / n,
                                     "distinct_fingerprints": on.passage_keys()},
            "queries": query_json,
            "jaccard_index_off_ns": median(&ns[kinds.len()]),
            "recall": recall,
            "scans": scans,
        })
    );
}
