//! HTTP load generator for a running neardup: bulk ingest, similarity
//! queries and health probes, with throughput and latency percentiles.
//!
//! ```text
//! cargo run --release --example loadgen -- --url http://127.0.0.1:18080 \
//!     --docs 200000 --batch 1000 --concurrency 4 --queries 20000
//! ```
//!
//! **Corpus.** `--docs` documents of 110–150 words (~130), generated from
//! `--seed` alone: made-up words with a quarter stop words, in sentences
//! with capitals and punctuation. Every `--plant-every`-th document is a
//! near-duplicate of the one before it (one or two words substituted, exact
//! Jaccard ≈ 0.9–0.96 on word 3-shingles), so queries can check answers.
//! Ids are `lg-<seed>-<n>`; batch bodies are serialized before the clock
//! starts, so ingest time is the server's (plus the HTTP round trips).
//!
//! With `--corpus FILE.jsonl` the documents come from a file instead, one
//! `{"id": "...", "text": "..."}` object per line (the format of
//! `../shared/bench/make_corpus.py`, which `scripts/bench.sh` uses); every
//! line is sent unless `--docs` caps it, and queries draw ids uniformly
//! from the file (no planted twins to check).
//!
//! **Phases** (`--phase all|ingest|query`): *ingest* posts `/documents/batch`
//! from `--concurrency` connections and reports docs/s; *query* runs
//! `--queries` `GET /similar?id=` (half on planted originals, whose twin
//! must be among the results; half on uniformly drawn ids), then as many
//! `GET /healthz` as a floor for the HTTP stack, then reads `/stats`.
//! `--params "score=content"` (any `name=value&…`) adds query parameters to
//! every `GET /similar`, to drive one kind of query (e.g. under `perf`).
//! Load is closed-loop: each connection sends its next request when the
//! previous one is answered, so latencies are service times under that
//! concurrency, not under an open arrival rate.
//!
//! The generator shares the machine with the server: on a small machine
//! keep `--client-threads` at 1 (the default) and read the figures as a
//! lower bound. The last line is a JSON summary for scripts.

use clap::{Parser, ValueEnum};
use neardup::testkit::Articles;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Phase {
    All,
    Ingest,
    Query,
}

/// Load generator for a running neardup server.
#[derive(Debug, Clone, Parser)]
#[command(about)]
struct Args {
    /// Base URL of the server.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// Documents to generate and ingest (default 100,000); with
    /// `--corpus`, at most this many lines of the file (default: all).
    #[arg(long)]
    docs: Option<usize>,
    /// Read documents from this JSONL file (`{"id", "text"}` per line)
    /// instead of generating them.
    #[arg(long)]
    corpus: Option<std::path::PathBuf>,
    /// Documents per `POST /documents/batch`.
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// Concurrent connections (requests in flight).
    #[arg(long, short = 'c', default_value_t = 4)]
    concurrency: usize,
    /// `GET /similar` requests (and as many `GET /healthz`).
    #[arg(long, default_value_t = 20_000)]
    queries: usize,
    /// Corpus seed: the same seed gives the same documents and ids.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Every this many documents one is a near-duplicate of the previous.
    #[arg(long, default_value_t = 50)]
    plant_every: usize,
    #[arg(long, value_enum, default_value_t = Phase::All)]
    phase: Phase,
    /// Tokio worker threads of the load generator.
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
    /// Ingest into and query this collection (`/collections/NAME/...`,
    /// which must exist) instead of `default`.
    #[arg(long)]
    collection: Option<String>,
    /// Extra query parameters of every `GET /similar` (`name=value&…`,
    /// e.g. `score=content`), to drive one kind of query (and profile it).
    #[arg(long)]
    params: Option<String>,
}

impl Args {
    /// The URL of a collection route (`/documents/batch`, `/similar`, `/stats`).
    fn collection_url(&self, route: &str) -> String {
        match &self.collection {
            Some(name) => format!("{}/collections/{name}{route}", self.url),
            None => format!("{}{route}", self.url),
        }
    }
}

// ------------------------------------------------------------ the corpus --

struct Corpus {
    seed: u64,
    docs: usize,
    /// The generated articles (`neardup::testkit`); `None` with `--corpus`.
    articles: Option<Articles>,
    /// Documents read from `--corpus`, in file order; empty when generated.
    file: Vec<FileDoc>,
}

#[derive(serde::Deserialize)]
struct FileDoc {
    id: String,
    text: String,
}

impl Corpus {
    fn from_file(path: &std::path::Path, limit: Option<usize>) -> anyhow::Result<Self> {
        use anyhow::Context;
        let raw = std::fs::read_to_string(path)
            .with_context(|| format!("reading corpus {}", path.display()))?;
        let lines: Vec<(usize, &str)> = raw
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .take(limit.unwrap_or(usize::MAX))
            .collect();
        let file = lines
            .into_par_iter()
            .map(|(i, l)| {
                serde_json::from_str::<FileDoc>(l).with_context(|| {
                    format!(
                        "{}:{}: not a {{\"id\", \"text\"}} object",
                        path.display(),
                        i + 1
                    )
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self {
            seed: 0,
            docs: file.len(),
            articles: None,
            file,
        })
    }

    fn new(args: &Args) -> Self {
        Self {
            seed: args.seed,
            docs: args.docs.unwrap_or(100_000),
            articles: Some(Articles::new(args.seed, 20_000, args.plant_every.max(2))),
            file: Vec::new(),
        }
    }

    fn id(&self, n: usize) -> String {
        match self.file.get(n) {
            Some(d) => d.id.clone(),
            None => format!("lg-{}-{n:07}", self.seed),
        }
    }

    /// A planted near-duplicate's original, if `n` is one.
    fn twin_of(&self, n: usize) -> Option<usize> {
        self.articles.as_ref()?.twin_of(n)
    }

    fn text(&self, n: usize) -> String {
        match (&self.articles, self.file.get(n)) {
            (_, Some(d)) => d.text.clone(),
            (Some(articles), None) => articles.text(n),
            (None, None) => unreachable!("a file corpus has no document {n}"),
        }
    }

    fn batch_body(&self, range: std::ops::Range<usize>) -> Vec<u8> {
        let docs: Vec<Value> = range
            .map(|n| json!({ "id": self.id(n), "text": self.text(n) }))
            .collect();
        serde_json::to_vec(&json!({ "documents": docs })).expect("JSON serializes")
    }
}

// --------------------------------------------------------- measurements --

/// Latencies of one kind of request, and the wall time they took together.
struct Run {
    latencies: Vec<Duration>,
    wall: Duration,
    errors: usize,
}

impl Run {
    fn percentile(sorted: &[Duration], p: f64) -> Duration {
        if sorted.is_empty() {
            return Duration::ZERO;
        }
        // Nearest rank.
        let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    fn summary(&mut self, name: &str, unit: &str, per_request: usize) -> Value {
        self.latencies.sort_unstable();
        let n = self.latencies.len();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let (p50, p99, p999) = (
            Self::percentile(&self.latencies, 0.50),
            Self::percentile(&self.latencies, 0.99),
            Self::percentile(&self.latencies, 0.999),
        );
        let max = self.latencies.last().copied().unwrap_or_default();
        let rate = (n * per_request) as f64 / self.wall.as_secs_f64();
        println!(
            "{name}: {n} requests in {:.2} s = {rate:.0} {unit}/s ({:.0} req/s); latency ms \
             p50 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}; errors {}",
            self.wall.as_secs_f64(),
            n as f64 / self.wall.as_secs_f64(),
            ms(p50),
            ms(p99),
            ms(p999),
            ms(max),
            self.errors
        );
        json!({
            "requests": n,
            "seconds": self.wall.as_secs_f64(),
            format!("{unit}_per_s"): rate,
            "p50_ms": ms(p50),
            "p99_ms": ms(p99),
            "p999_ms": ms(p999),
            "max_ms": ms(max),
            "errors": self.errors,
        })
    }
}

/// Run `requests` calls of `call(i)` from `concurrency` tasks, closed loop.
/// `call` returns whether the answer was right.
async fn drive<F, Fut>(requests: usize, concurrency: usize, call: F) -> Run
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let call = Arc::new(call);
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (next, call) = (Arc::clone(&next), Arc::clone(&call));
            tokio::spawn(async move {
                let (mut lat, mut errors) = (Vec::new(), 0);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= requests {
                        break;
                    }
                    let t0 = Instant::now();
                    let ok = call(i).await;
                    lat.push(t0.elapsed());
                    errors += usize::from(!ok);
                }
                (lat, errors)
            })
        })
        .collect();
    let mut run = Run {
        latencies: Vec::with_capacity(requests),
        wall: Duration::ZERO,
        errors: 0,
    };
    for t in tasks {
        let (lat, errors) = t.await.expect("a load task panicked");
        run.latencies.extend(lat);
        run.errors += errors;
    }
    run.wall = started.elapsed();
    run
}

async fn wait_ready(client: &reqwest::Client, url: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match client.get(format!("{url}/readyz")).send().await {
            Ok(r) if r.status().is_success() => return Ok(()),
            _ if Instant::now() > deadline => anyhow::bail!("{url}/readyz not ready after 60 s"),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The part of a `POST /documents/batch` answer that the ingest checks.
#[derive(serde::Deserialize)]
struct BatchCounts {
    failed: u64,
}

async fn ingest(client: &reqwest::Client, args: &Args, corpus: &Arc<Corpus>) -> Value {
    let batch = args.batch.max(1);
    let batches = corpus.docs.div_ceil(batch);
    let t0 = Instant::now();
    let bodies: Vec<&'static [u8]> = (0..batches)
        .into_par_iter()
        .map(|b| {
            let body = corpus.batch_body(b * batch..((b + 1) * batch).min(corpus.docs));
            &*Box::leak(body.into_boxed_slice())
        })
        .collect();
    let mb = bodies.iter().map(|b| b.len()).sum::<usize>() as f64 / 1e6;
    println!(
        "generated {} documents in {batches} batches ({mb:.1} MB of JSON) in {:.2} s",
        corpus.docs,
        t0.elapsed().as_secs_f64()
    );
    let url = args.collection_url("/documents/batch");
    let (client, bodies) = (client.clone(), Arc::new(bodies));
    let failed_items = Arc::new(AtomicUsize::new(0));
    let failed = Arc::clone(&failed_items);
    let mut run = drive(batches, args.concurrency, move |i| {
        let (client, url, body) = (client.clone(), url.clone(), bodies[i]);
        let failed = Arc::clone(&failed);
        async move {
            let resp = client
                .post(&url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await;
            let Ok(resp) = resp else { return false };
            if !resp.status().is_success() {
                eprintln!("batch {i}: HTTP {}", resp.status());
                return false;
            }
            let Ok(bytes) = resp.bytes().await else {
                return false;
            };
            // The summary count only, as a client that checks it would read
            // it: the thousand results are skipped, not built into a tree
            // (that took a third of this client's CPU, on the cores the
            // server shares); read in full only when some item failed.
            let Ok(BatchCounts { failed: bad }) = serde_json::from_slice(&bytes) else {
                return false;
            };
            let bad = bad as usize;
            if bad > 0 {
                failed.fetch_add(bad, Ordering::Relaxed);
                let v: Value = serde_json::from_slice(&bytes).unwrap_or_default();
                if let Some(item) = v["results"]
                    .as_array()
                    .and_then(|r| r.iter().find(|x| x["status"].as_u64() >= Some(400)))
                {
                    eprintln!("batch {i}: {bad} items failed, e.g. {item}");
                }
            }
            bad == 0
        }
    })
    .await;
    let mut s = run.summary("ingest  POST /documents/batch", "docs", batch);
    s["failed_items"] = json!(failed_items.load(Ordering::Relaxed));
    s["docs"] = json!(corpus.docs);
    // Partial last batch: count the documents actually sent.
    s["docs_per_s"] = json!(corpus.docs as f64 / run.wall.as_secs_f64());
    println!(
        "ingest: {:.0} docs/s overall ({} documents, batch {batch}, concurrency {})",
        corpus.docs as f64 / run.wall.as_secs_f64(),
        corpus.docs,
        args.concurrency
    );
    s
}

async fn query(client: &reqwest::Client, args: &Args, corpus: &Arc<Corpus>) -> Value {
    // Half the queries on planted originals (their twin must be found), half
    // on uniformly drawn documents.
    let mut rng = StdRng::seed_from_u64(args.seed ^ 0x5eed);
    let planted: Vec<usize> = (0..corpus.docs)
        .filter(|&n| corpus.twin_of(n).is_some())
        .collect();
    let picks: Vec<(String, Option<String>)> = (0..args.queries)
        .map(|i| {
            if i % 2 == 0 && !planted.is_empty() {
                let twin = planted[rng.gen_range(0..planted.len())];
                (corpus.id(twin - 1), Some(corpus.id(twin)))
            } else {
                (corpus.id(rng.gen_range(0..corpus.docs)), None)
            }
        })
        .collect();
    let checked = picks.iter().filter(|p| p.1.is_some()).count();
    let (found, results) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let url = args.collection_url("/similar");
    let extra: Vec<(String, String)> = args
        .params
        .as_deref()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_owned(), v.to_owned())
        })
        .collect();
    let extra = Arc::new(extra);
    let picks = Arc::new(picks);
    let (c, f, r) = (client.clone(), Arc::clone(&found), Arc::clone(&results));
    let mut run = drive(args.queries, args.concurrency, move |i| {
        let (client, url, picks) = (c.clone(), url.clone(), Arc::clone(&picks));
        let (found, results, extra) = (Arc::clone(&f), Arc::clone(&r), Arc::clone(&extra));
        async move {
            let (id, twin) = &picks[i];
            let resp = client
                .get(&url)
                .query(&[("id", id.as_str())])
                .query(&*extra)
                .send()
                .await;
            let Ok(resp) = resp else { return false };
            if !resp.status().is_success() {
                eprintln!("GET /similar?id={id}: HTTP {}", resp.status());
                return false;
            }
            let Ok(v) = resp.json::<Value>().await else {
                return false;
            };
            let list = v["results"].as_array().cloned().unwrap_or_default();
            results.fetch_add(list.len(), Ordering::Relaxed);
            if let Some(twin) = twin {
                if list.iter().any(|m| m["id"].as_str() == Some(twin)) {
                    found.fetch_add(1, Ordering::Relaxed);
                }
            }
            true
        }
    })
    .await;
    let mut s = run.summary("query   GET /similar", "queries", 1);
    let found = found.load(Ordering::Relaxed);
    println!(
        "query: planted twins found {found}/{checked}; {:.2} results per query",
        results.load(Ordering::Relaxed) as f64 / args.queries.max(1) as f64
    );
    s["planted_checked"] = json!(checked);
    s["planted_found"] = json!(found);
    s
}

async fn healthz(client: &reqwest::Client, args: &Args) -> Value {
    let url = format!("{}/healthz", args.url);
    let c = client.clone();
    let mut run = drive(args.queries, args.concurrency, move |_| {
        let (client, url) = (c.clone(), url.clone());
        async move {
            match client.get(&url).send().await {
                Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                Err(_) => false,
            }
        }
    })
    .await;
    run.summary("probe   GET /healthz", "requests", 1)
}

async fn stats(client: &reqwest::Client, args: &Args) -> anyhow::Result<Value> {
    let v: Value = client
        .get(args.collection_url("/stats"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let mem = &v["memory"];
    println!(
        "stats: {} documents; engine memory {:.1} MB = {:.0} bytes/document \
         (shingles {:.1} MB, signatures {:.1} MB, lsh {:.1} MB)",
        v["documents"],
        mem["total_bytes"].as_f64().unwrap_or(0.0) / 1e6,
        mem["bytes_per_document"].as_f64().unwrap_or(0.0),
        mem["shingles_bytes"].as_f64().unwrap_or(0.0) / 1e6,
        mem["signatures_bytes"].as_f64().unwrap_or(0.0) / 1e6,
        mem["lsh_bytes"].as_f64().unwrap_or(0.0) / 1e6,
    );
    Ok(json!({
        "documents": v["documents"],
        "bytes_per_document": mem["bytes_per_document"],
        "total_bytes": mem["total_bytes"],
    }))
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.docs.is_none_or(|d| d >= 2),
        "--docs must be at least 2"
    );
    anyhow::ensure!(args.concurrency >= 1, "--concurrency must be at least 1");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.client_threads.max(1))
        .enable_all()
        .build()?;
    rt.block_on(async {
        let client = reqwest::Client::builder()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(args.concurrency)
            .timeout(Duration::from_secs(300))
            .build()?;
        wait_ready(&client, &args.url).await?;
        let corpus = Arc::new(match &args.corpus {
            Some(path) => Corpus::from_file(path, args.docs)?,
            None => Corpus::new(&args),
        });
        anyhow::ensure!(corpus.docs >= 2, "the corpus has fewer than 2 documents");
        let mut summary = json!({
            "url": args.url,
            "docs": corpus.docs,
            "corpus": args.corpus,
            "batch": args.batch,
            "concurrency": args.concurrency,
            "client_threads": args.client_threads,
        });
        let mut errors = 0;
        if args.phase != Phase::Query {
            let s = ingest(&client, &args, &corpus).await;
            errors += s["errors"].as_u64().unwrap_or(0);
            summary["ingest"] = s;
        }
        if args.phase != Phase::Ingest {
            let s = query(&client, &args, &corpus).await;
            errors += s["errors"].as_u64().unwrap_or(0);
            summary["similar"] = s;
            let s = healthz(&client, &args).await;
            errors += s["errors"].as_u64().unwrap_or(0);
            summary["healthz"] = s;
        }
        summary["stats"] = stats(&client, &args).await?;
        println!("summary: {summary}");
        anyhow::ensure!(errors == 0, "{errors} requests failed");
        Ok(())
    })
}
