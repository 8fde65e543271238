//! The engine's side of `GET /similar?id=` alone: no HTTP, no JSON.
//!
//! ```text
//! cargo run --release --example query_bench -- FILE.jsonl [--n N] [--queries Q] [--rounds R] [--threads T] [--huge-pages]
//! ```
//!
//! Loads the first `N` documents of FILE (all by default; `{"id", "text"}`
//! lines) into an engine with the default recipe (word 3-shingles, 128
//! permutations, threshold 0.8) through batch inserts, then times
//! `similar_to_id` for `Q` (200,000) ids drawn at random, on one thread,
//! `R` (5) rounds, and then on `T` (2) threads at once, each with its own
//! draws (as a server's workers share the index). Prints one JSON object:
//! ns per query on one thread and queries/s on `T` threads (medians of the
//! rounds, and each round), matches and candidates per query, and the same
//! draws split in two, timed apart each round: the documents with no
//! candidates (`lone_ns_per_query`: answered from the shared-bucket bit)
//! and those with some (`sharing_ns_per_query`, `sharing_share`). With the
//! server's CPU per request (`perf stat` under wrk) this splits a query's
//! cost into the engine's part and the HTTP stack's. `--huge-pages` first
//! collapses the loaded index into huge pages, as the server does after a
//! restore (`neardup::hugepages`); run with and without, alternating.

use clap::Parser;
use neardup::engine::{Engine, EngineParams, Query};
use rayon::prelude::*;
use serde_json::{json, Value};
use std::hint::black_box;
use std::time::Instant;

mod common;

/// Command line (see the module docs).
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    query: common::QueryArgs,
    /// Collapse the index into transparent huge pages before timing.
    #[arg(long)]
    huge_pages: bool,
}

fn main() {
    let Args {
        query: args,
        huge_pages,
    } = Args::parse();
    let (queries, threads, rounds) = (args.queries.get(), args.threads.get(), args.rounds.get());
    let raw = args.read();
    let lines = args.lines(&raw);
    let engine = Engine::new(EngineParams::default().validate().expect("default params"));
    let t0 = Instant::now();
    let docs: Vec<(String, neardup::engine::Prepared)> = lines
        .par_iter()
        .filter_map(|line| {
            let v: Value = serde_json::from_str(line).expect("a JSON object a line");
            let id = v["id"].as_str().expect("a string \"id\"").to_owned();
            let doc = engine.prepare(v["text"].as_str()?).ok()?;
            Some((id, doc))
        })
        .collect();
    drop(raw);
    common::load(&engine, &docs);
    let load_s = t0.elapsed().as_secs_f64();
    let huge = huge_pages.then(|| {
        let t = Instant::now();
        let pass = neardup::hugepages::collapse_resident().expect("huge pages supported");
        json!({"seconds": t.elapsed().as_secs_f64(), "bytes": pass.collapsed_bytes(), "failed": pass.failed,
               "anon_huge_bytes": neardup::hugepages::huge_page_bytes()})
    });
    let ids: Vec<&str> = docs.iter().map(|(id, _)| id.as_str()).collect();
    let draws = |thread: u64| -> Vec<&str> {
        common::draws(thread, queries, ids.len())
            .into_iter()
            .map(|i| ids[i])
            .collect()
    };
    let q = Query::new(engine.threshold(None).expect("default threshold"), 10);
    let run = |draws: &[&str]| -> (usize, usize) {
        let (mut m, mut c) = (0, 0);
        for id in draws {
            let out = engine.similar_to_id(black_box(id), &q).expect("stored");
            m += out.matches.len();
            c += out.candidates;
        }
        (m, c)
    };
    let single = draws(0);
    let each: Vec<Vec<&str>> = (1..=threads as u64).map(draws).collect();
    // The same draws split by whether the document has candidates (shares
    // a band bucket with another): the two kinds of query cost apart.
    let (sharing, lone): (Vec<&str>, Vec<&str>) = single
        .iter()
        .partition(|id| engine.similar_to_id(id, &q).expect("stored").candidates > 0);
    let per_query = |draws: &[&str]| -> f64 {
        let t = Instant::now();
        black_box(run(draws));
        t.elapsed().as_secs_f64() * 1e9 / draws.len().max(1) as f64
    };
    let (mut lone_ns, mut sharing_ns) = (Vec::new(), Vec::new());
    let (mut one, mut many, mut matches, mut candidates) = (Vec::new(), Vec::new(), 0, 0);
    for _ in 0..rounds {
        lone_ns.push(per_query(&lone));
        sharing_ns.push(per_query(&sharing));
        let t = Instant::now();
        (matches, candidates) = run(&single);
        one.push(t.elapsed().as_secs_f64() * 1e9 / queries as f64);
        let t = Instant::now();
        std::thread::scope(|scope| {
            for d in &each {
                scope.spawn(|| run(d));
            }
        });
        many.push((threads * queries) as f64 / t.elapsed().as_secs_f64());
    }
    use common::median;
    println!(
        "{}",
        json!({
            "docs": docs.len(),
            "load_s": load_s,
            "huge_pages": huge,
            "queries": queries,
            "ns_per_query": median(&one),
            "rounds_ns": one,
            "threads": threads,
            "threads_queries_per_s": median(&many),
            "threads_rounds_queries_per_s": many,
            "lone_ns_per_query": median(&lone_ns),
            "sharing_ns_per_query": median(&sharing_ns),
            "sharing_share": sharing.len() as f64 / queries as f64,
            "matches_per_query": matches as f64 / queries as f64,
            "candidates_per_query": candidates as f64 / queries as f64,
        })
    );
}
