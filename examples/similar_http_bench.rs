//! What containment and content-score queries, and the indexes behind
//! them, cost **through the API** (issues 43 and 44: "≤ 2× the cost of a
//! Jaccard `/similar`", "ingest slows by ≤ 25%"), beside the engine-only
//! ratios `passage_bench` and `boilerplate_bench` measure.
//!
//! ```text
//! cargo run --release --example similar_http_bench -- FILE.jsonl [--n N] [--queries Q] [--rounds R] [--threads C] [--ingest-rounds I] [--ingest-only] [--ingest-connections K] [--redis "redis://127.0.0.1:P …"] [--kinds "NAME;…"]
//! ```
//!
//! With `--redis`, every server runs on the redis backend over those
//! cluster nodes (a key prefix each).
//!
//! Servers in this process (default settings but `storage.wal_fsync =
//! never`), fed the first `N` `{"id", "text"}` lines through `POST
//! /documents/batch`, 1,000 a request, from one connection (or
//! `--ingest-connections`).
//!
//! - **Ingest** (min(R, 3) rounds, or `--ingest-rounds`; `--ingest-only`
//!   skips the queries), after a warm-up load that is not counted: a fresh
//!   server of each configuration (index off; passage index; passage
//!   index and document frequency; document frequency alone) loads the
//!   corpus, the order rotating by round; documents a second, and each
//!   round's ratios to index off and to the same server without document
//!   frequency (what counting it costs a write).
//! - **Queries** (R rounds): `Q` queries of each kind from `C` keep-alive
//!   connections, the kinds in an order rotating by round: on the server
//!   with the passage index, `GET /similar?id=` by Jaccard (the
//!   collection's threshold) and by each containment measure at 0.9, and
//!   `POST /similar` with a stored document's text by Jaccard and by
//!   `containment`; on the server that also counts document frequency,
//!   Jaccard by id and by text (content scores attached) and `score=content`
//!   by id and by text. µs a query (wall time over the round ÷ queries),
//!   medians of the rounds, and the median of each round's own ratio to
//!   the Jaccard query of the same form (by id, by text) on the server
//!   without document frequency.
//!
//! `--kinds` runs only the query kinds named (`;`-separated, as printed;
//! the two Jaccard queries without document frequency always run, as the
//! ratios' base), e.g. to profile one; `--ingest-rounds 0` skips the
//! ingest rounds.
//!
//! The client runs in the same process and on the same cores: its cost is
//! in every figure alike. Prints one JSON object last.

use clap::Parser;
use neardup::app::App;
use neardup::config::{Settings, WalFsync};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

mod common;
use common::{draws, median};
#[path = "common/serve.rs"]
mod serve;

#[derive(Parser)]
struct Args {
    /// The corpus, `--n`, `--queries` (of each kind per round), `--rounds`,
    /// and `--threads`: the connections querying at once.
    #[command(flatten)]
    query: common::QueryArgs,
    /// Ingest rounds (default: `--rounds`, at most 3).
    #[arg(long)]
    ingest_rounds: Option<usize>,
    /// Measure ingest only (no query rounds).
    #[arg(long)]
    ingest_only: bool,
    /// Connections posting batches at once.
    #[arg(long, default_value = "1")]
    ingest_connections: usize,
    /// Run every server on the redis backend over these cluster nodes
    /// (`redis://127.0.0.1:P`, space-separated in one argument; e.g. from
    /// `cargo run --release --example redis_cluster -- 3 1`), each under a
    /// key prefix of its own.
    #[arg(long)]
    redis: Option<String>,
    /// Only these query kinds (`;`-separated names, as printed), beside
    /// the two Jaccard queries every ratio is to.
    #[arg(long)]
    kinds: Option<String>,
}

/// One kind of query: its name, the server it asks (0: passage index; 1:
/// passage index and document frequency), whether it is by text, its
/// measure and its score.
type Kind = (&'static str, usize, bool, &'static str, &'static str);
const KINDS: [Kind; 10] = [
    ("jaccard by id", 0, false, "jaccard", "raw"),
    ("query_in_stored by id", 0, false, "query_in_stored", "raw"),
    ("stored_in_query by id", 0, false, "stored_in_query", "raw"),
    ("containment by id", 0, false, "containment", "raw"),
    ("jaccard by text", 0, true, "jaccard", "raw"),
    ("containment by text", 0, true, "containment", "raw"),
    ("jaccard by id, counts on", 1, false, "jaccard", "raw"),
    ("content jaccard by id", 1, false, "jaccard", "content"),
    ("jaccard by text, counts on", 1, true, "jaccard", "raw"),
    ("content jaccard by text", 1, true, "jaccard", "content"),
];

/// The servers' configurations, for the ingest rounds too (the queries
/// ask the second and third).
const SERVERS: [(&str, bool, bool); 4] = [
    ("index off", false, false),
    ("passage index", true, false),
    ("passage index + document frequency", true, true),
    ("document frequency", false, true),
];

/// The server of `SERVERS` with the same passage index and no document
/// frequency.
fn without_counts(c: usize) -> usize {
    let (_, passages, _) = SERVERS[c];
    SERVERS
        .iter()
        .position(|&(_, p, counts)| p == passages && !counts)
        .expect("a server without counts")
}

/// A server in this process with the passage index (`passages`) and
/// document frequency (`counts`) on or off, and its data directory; on
/// the redis backend when `redis` names cluster nodes.
async fn server(
    passages: bool,
    counts: bool,
    redis: Option<&str>,
) -> (serve::Served, tempfile::TempDir) {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = tempfile::tempdir().unwrap();
    let mut settings = Settings::default();
    if let Some(nodes) = redis {
        settings.storage.backend = neardup::config::StorageBackend::Redis;
        settings.storage.redis.nodes = nodes.split_whitespace().map(str::to_owned).collect();
        settings.storage.redis.key_prefix = format!(
            "bench-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        settings.storage.redis.command_timeout_ms = 10_000;
    }
    settings.server.bind = "127.0.0.1:0".into();
    settings.storage.data_dir = dir.path().to_owned();
    settings.storage.wal_fsync = WalFsync::Never;
    settings.index.passage_index = passages;
    settings.index.boilerplate.enabled = counts;
    let app = App::build(settings.validate().unwrap()).await.unwrap();
    (serve::serve(app).await, dir)
}

/// Every document through `POST /documents/batch`, 1,000 a request, from
/// `connections` connections at once (each takes the next request's
/// documents); documents a second.
async fn load(
    client: &reqwest::Client,
    base: &str,
    docs: &Arc<Vec<(String, String)>>,
    connections: usize,
) -> f64 {
    let start = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (client, base, docs, next) = (
            client.clone(),
            base.to_owned(),
            Arc::clone(docs),
            Arc::clone(&next),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let lo = next.fetch_add(1000, Ordering::Relaxed);
                if lo >= docs.len() {
                    break;
                }
                let chunk = &docs[lo..(lo + 1000).min(docs.len())];
                let body = json!({"documents": chunk.iter().map(|(id, text)| json!({"id": id, "text": text})).collect::<Vec<_>>()});
                let r = client
                    .post(format!("{base}/documents/batch?mode=upsert"))
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                assert!(r.status().is_success(), "{}", r.status());
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    docs.len() as f64 / start.elapsed().as_secs_f64()
}

/// `Q` queries of one kind from `C` connections; µs a query.
async fn run_kind(
    client: &reqwest::Client,
    base: &str,
    docs: &Arc<Vec<(String, String)>>,
    picks: &Arc<Vec<usize>>,
    (by_text, measure, score): (bool, &str, &str),
    concurrency: usize,
) -> f64 {
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (client, docs, picks, next) = (
            client.clone(),
            Arc::clone(docs),
            Arc::clone(picks),
            Arc::clone(&next),
        );
        let (base, measure, score) = (base.to_owned(), measure.to_owned(), score.to_owned());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&d) = picks.get(i) else { break };
                let (id, text) = &docs[d];
                // Containment at 0.9; Jaccard (raw or content) at the
                // collection's threshold.
                let r = if by_text {
                    let mut body = json!({"text": text, "measure": measure, "score": score});
                    if measure != "jaccard" {
                        body["threshold"] = json!(0.9);
                    }
                    client
                        .post(format!("{base}/similar"))
                        .json(&body)
                        .send()
                        .await
                } else {
                    let threshold = if measure == "jaccard" {
                        ""
                    } else {
                        "&threshold=0.9"
                    };
                    client
                        .get(format!(
                            "{base}/similar?id={id}&measure={measure}&score={score}{threshold}"
                        ))
                        .send()
                        .await
                }
                .unwrap();
                assert!(r.status().is_success(), "{}", r.status());
                r.bytes().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    start.elapsed().as_secs_f64() * 1e6 / picks.len() as f64
}

#[tokio::main]
async fn main() {
    let Args {
        query: args,
        ingest_rounds,
        ingest_only,
        ingest_connections,
        redis,
        kinds: only,
    } = Args::parse();
    let wanted: Vec<bool> = KINDS
        .iter()
        .enumerate()
        .map(|(k, &(name, ..))| {
            k == 0
                || k == 4
                || only
                    .as_deref()
                    .is_none_or(|o| o.split(';').any(|n| n.trim() == name))
        })
        .collect();
    let raw = args.read();
    let docs: Arc<Vec<(String, String)>> = Arc::new(
        args.lines(&raw)
            .into_iter()
            .map(|l| {
                let v: Value = serde_json::from_str(l).expect("a JSON line");
                (
                    v["id"].as_str().expect("id").to_owned(),
                    v["text"].as_str().expect("text").to_owned(),
                )
            })
            .collect(),
    );
    drop(raw);
    let client = reqwest::Client::new();
    // Ingest: each configuration loads the corpus into a fresh server, the
    // order rotating by round (at most 3 rounds).
    // A warm-up load first, not counted: the process's first server pays
    // for its allocator's and page cache's first touch.
    {
        let (served, _dir) = server(false, false, redis.as_deref()).await;
        load(&client, &served.base, &docs, ingest_connections).await;
        served.stop().await;
    }
    let mut ingest: Vec<Vec<f64>> = vec![Vec::new(); SERVERS.len()];
    let mut ingest_ratios: Vec<Vec<f64>> = vec![Vec::new(); SERVERS.len()];
    let mut count_ratios: Vec<Vec<f64>> = vec![Vec::new(); SERVERS.len()];
    for round in 0..ingest_rounds.unwrap_or(args.rounds.get().min(3)) {
        let mut this = [0.0; SERVERS.len()];
        for k in 0..SERVERS.len() {
            let c = (k + round) % SERVERS.len();
            let (_, passages, counts) = SERVERS[c];
            let (served, _dir) = server(passages, counts, redis.as_deref()).await;
            this[c] = load(&client, &served.base, &docs, ingest_connections).await;
            served.stop().await;
        }
        for (c, &(name, _, _)) in SERVERS.iter().enumerate() {
            ingest[c].push(this[c]);
            ingest_ratios[c].push(this[c] / this[0]);
            count_ratios[c].push(this[c] / this[without_counts(c)]);
            eprintln!(
                "ingest round {round}: {name:36} {:9.0} docs/s  {:.3}× of index off  {:.3}× without counts",
                this[c],
                this[c] / this[0],
                this[c] / this[without_counts(c)]
            );
        }
    }
    let mut servers = Vec::new();
    for &(_, passages, counts) in SERVERS[1..3].iter().filter(|_| !ingest_only) {
        let s = server(passages, counts, redis.as_deref()).await;
        load(&client, &s.0.base, &docs, ingest_connections).await;
        servers.push(s);
    }
    let mut per_kind: Vec<Vec<f64>> = vec![Vec::new(); KINDS.len()];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); KINDS.len()];
    for round in (0..args.rounds.get()).filter(|_| !ingest_only) {
        let picks = Arc::new(draws(round as u64, args.queries.get(), docs.len()));
        let mut this = vec![0.0; KINDS.len()];
        for k in 0..KINDS.len() {
            let kind = (k + round) % KINDS.len();
            if !wanted[kind] {
                continue;
            }
            let (_, on, by_text, measure, score) = KINDS[kind];
            this[kind] = run_kind(
                &client,
                &servers[on].0.base,
                &docs,
                &picks,
                (by_text, measure, score),
                args.threads.get(),
            )
            .await;
        }
        for (kind, &(name, _, by_text, _, _)) in KINDS.iter().enumerate() {
            if !wanted[kind] {
                continue;
            }
            // The Jaccard query of the same form (by id, by text) on the
            // server without document frequency.
            let jaccard = if by_text { this[4] } else { this[0] };
            per_kind[kind].push(this[kind]);
            ratios[kind].push(this[kind] / jaccard);
            eprintln!(
                "round {round}: {name:24} {:8.1} µs  {:.3}×",
                this[kind],
                this[kind] / jaccard
            );
        }
    }
    for (served, _dir) in servers {
        served.stop().await;
    }
    let ingest: Vec<Value> = SERVERS
        .iter()
        .enumerate()
        .filter(|&(c, _)| !ingest[c].is_empty())
        .map(|(c, &(name, _, _))| {
            json!({"server": name, "docs_per_s": median(&ingest[c]),
                   "ratio_to_index_off": median(&ingest_ratios[c]),
                   "ratio_to_no_counts": median(&count_ratios[c]), "rounds": ingest[c]})
        })
        .collect();
    let kinds: Vec<Value> = KINDS
        .iter()
        .enumerate()
        .filter(|&(k, _)| !per_kind[k].is_empty())
        .map(|(k, &(name, _, _, _, _))| {
            json!({"kind": name, "us_per_query": median(&per_kind[k]),
                   "ratio_to_jaccard": median(&ratios[k]), "rounds_us": per_kind[k]})
        })
        .collect();
    println!(
        "{}",
        json!({"docs": docs.len(), "queries": args.queries.get(), "rounds": args.rounds.get(),
               "connections": args.threads.get(), "ingest": ingest, "kinds": kinds})
    );
}
