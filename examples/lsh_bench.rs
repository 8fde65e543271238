//! Band lookups alone: the LSH index of `/similar` at a realistic size,
//! without HTTP, ids or verification.
//!
//! ```text
//! cargo run --release --example lsh_bench -- FILE.jsonl [--n N] [--queries Q] [--threads T] [--rounds R]
//! ```
//!
//! Signs the first `N` documents of FILE (all of them by default; in
//! parallel, with the engine's default recipe: word 3-shingles, 128
//! permutations, bands for threshold 0.8), loads their signatures into an
//! [`LshIndex`] as a restore does, then times `candidates` for `Q` (200,000)
//! signatures of indexed documents drawn at random: on one thread, and on
//! `T` (2) threads at once, each with its own draws. Prints one JSON object:
//! ns per query on one thread and queries/s on `T` threads (medians of `R`
//! rounds, 5), candidates per query, and the share of documents that share
//! a bucket with another (`sharing_a_bucket`: the others are answered by id
//! without band lookups).
//! Each round times both `candidates` (the band lookups overlapped) and
//! `candidates_sequential` (one band, one lock, one miss after another: the
//! lookup before), alternating, and the speedup is the ratio of medians.
//! At a million documents the band tables (~250 MB) are far larger than the
//! caches: every band lookup is a cache (and TLB) miss, which is what this
//! measures.

use clap::Parser;
use neardup::lsh::{BandParams, LshIndex};
use neardup::minhash::MinHasher;
use neardup::text::{NormalizeOptions, Scratch, ShingleOptions, Tokenizer};
use rayon::prelude::*;
use serde_json::{json, Value};
use std::hint::black_box;
use std::time::Instant;

mod common;

const SEED: u64 = 1;
const NUM_PERM: usize = 128;

/// Command line (see the module docs).
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    query: common::QueryArgs,
}

fn main() {
    let args = Args::parse().query;
    let (queries, threads, rounds) = (args.queries.get(), args.threads.get(), args.rounds.get());
    let raw = args.read();
    let texts = args.lines(&raw);

    let t0 = Instant::now();
    let tokenizer = Tokenizer::new(NormalizeOptions::default(), ShingleOptions::default(), SEED);
    let minhasher = MinHasher::new(NUM_PERM, SEED);
    let signatures: Vec<Box<[u32]>> = texts
        .par_iter()
        .map_init(Scratch::default, |scratch, line| {
            let v: Value = serde_json::from_str(line).expect("a JSON object a line");
            let text = v["text"].as_str().expect("a string \"text\"");
            let mut sig = vec![0u32; NUM_PERM].into_boxed_slice();
            if let Ok(h) = tokenizer.hashes(text, scratch) {
                minhasher.sign_into(h, &mut sig);
            }
            sig
        })
        .collect();
    drop(raw);
    let signed_s = t0.elapsed().as_secs_f64();
    let bands = BandParams::resolve(0.8, NUM_PERM, None, None).expect("default banding");
    let index = LshIndex::new(bands.bands, bands.rows, SEED);
    let t1 = Instant::now();
    index.reserve(signatures.len());
    let docs: Vec<(u32, &[u32])> = signatures
        .iter()
        .enumerate()
        .map(|(i, s)| (i as u32, &s[..]))
        .collect();
    for chunk in docs.chunks(10_000) {
        index.insert_bulk(chunk);
    }
    index.release_bulk_buffers();
    let loaded_s = t1.elapsed().as_secs_f64();

    // Query draws: a different stream per thread.
    let draws = |thread: u64| common::draws(thread + 1, queries, signatures.len());
    let run = |ids: &[usize], sequential: bool| -> (f64, usize) {
        let mut out = Vec::new();
        let mut found = 0usize;
        let t = Instant::now();
        for &i in ids {
            out.clear();
            let sig = black_box(&signatures[i]);
            if sequential {
                black_box(index.candidates_sequential(sig, &mut out, usize::MAX));
            } else {
                black_box(index.candidates(sig, &mut out, usize::MAX));
            }
            found += out.len();
        }
        (t.elapsed().as_secs_f64(), found)
    };
    let single = draws(0);
    let each: Vec<Vec<usize>> = (0..threads as u64).map(draws).collect();
    let mut report = serde_json::Map::new();
    // Both lookups in each round, alternating, so that both see the same load.
    let mut results = [[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
    let mut per_query = 0.0;
    for _ in 0..rounds {
        for (mode, sequential) in [(0, false), (1, true)] {
            let (s, found) = run(&single, sequential);
            results[mode][0].push(s * 1e9 / queries as f64);
            per_query = found as f64 / queries as f64;
            let t = Instant::now();
            std::thread::scope(|scope| {
                for ids in &each {
                    scope.spawn(|| run(ids, sequential));
                }
            });
            results[mode][1].push((threads * queries) as f64 / t.elapsed().as_secs_f64());
        }
    }
    use common::median;
    for (mode, name) in [(0, "overlapped"), (1, "sequential")] {
        report.insert(
            name.into(),
            json!({
                "one_thread_ns_per_query": median(&results[mode][0]),
                "one_thread_rounds_ns": results[mode][0],
                "threads_queries_per_s": median(&results[mode][1]),
                "threads_rounds_queries_per_s": results[mode][1],
            }),
        );
    }
    println!(
        "{}",
        json!({
            "docs": signatures.len(),
            "bands": bands.bands,
            "rows": bands.rows,
            "buckets": index.bucket_count(),
            "lsh_heap_mb": index.heap_bytes() as f64 / 1e6,
            "sign_s": signed_s,
            "load_s": loaded_s,
            "queries": queries,
            "slots_per_query": per_query,
            "sharing_a_bucket": (0..signatures.len() as u32)
                .filter(|&s| index.shares_bucket(s))
                .count() as f64
                / signatures.len() as f64,
            "threads": threads,
            "lookups": report,
            "speedup_one_thread": median(&results[1][0]) / median(&results[0][0]),
            "speedup_threads": median(&results[0][1]) / median(&results[1][1]),
        })
    );
}
