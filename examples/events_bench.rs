//! Events and webhooks (issue 45): what a subscription costs ingest, and
//! how long a healthy receiver waits for its events.
//!
//! ```text
//! cargo run --release --example events_bench -- --docs 20000 --rounds 3
//! ```
//!
//! A server in this process (default settings, a fresh data directory per
//! round, memory backend), fed single-document writes (`PUT
//! /documents/{id}`) over loopback from `--concurrency` connections. The
//! corpus is `neardup::testkit::Articles` with a near-duplicate of the
//! document before at every 10th one, so 10% of the writes are
//! near-duplicates of a stored document (each written 500 writes after its
//! original, so never concurrently with it). Each round runs twice: without a
//! subscription, and with one (default threshold) whose receiver, a
//! small HTTP server in this process, answers 204 and records when each
//! event arrived (the variant that goes first alternates by round).
//! Reported: the medians over `--rounds` of each throughput, the median
//! of the rounds' own ratios, and the latency from an event's time (when
//! its write was acknowledged) to its arrival, p50 and p99 over every
//! event of every round. The last line is a JSON summary.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use clap::Parser;
use neardup::app::App;
use neardup::config::Settings;
use neardup::testkit::Articles;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[path = "common/serve.rs"]
mod serve;

#[derive(Parser)]
struct Args {
    /// Writes per round.
    #[arg(long, default_value = "20000")]
    docs: usize,
    /// Rounds (each with and without a subscription); medians reported.
    #[arg(long, default_value = "3")]
    rounds: usize,
    /// Connections writing at once.
    #[arg(long, default_value = "8")]
    concurrency: usize,
    /// `storage.wal_fsync` of the server (`always`, the default; `interval`
    /// or `never` show what the fsyncs themselves cost).
    #[arg(long, default_value = "always")]
    wal_fsync: String,
    /// Run only the rounds with a subscription (`with`) or only those
    /// without (`without`), to profile one of them; no ratio is reported.
    #[arg(long)]
    only: Option<String>,
}

#[derive(Default)]
struct Received {
    /// Milliseconds from each event's time to its arrival.
    latencies: Mutex<Vec<f64>>,
    count: AtomicUsize,
    /// Distinct webhook-ids received (a repeat would be a duplicate delivery).
    ids: Mutex<std::collections::HashSet<String>>,
    /// The receiver's own thread's stat file (it runs on a thread of its
    /// own, so its CPU time can be told from the server's).
    stat: std::sync::OnceLock<String>,
}

/// CPU time (user + system) in ticks of `USER_HZ` (100 a second on
/// Linux) from a `/proc/.../stat` file: the whole process's, dead threads
/// included (`/proc/self/stat`), or one thread's.
fn cpu_ticks(stat: &str) -> u64 {
    let text = std::fs::read_to_string(stat).expect("a /proc stat file");
    // Fields after the command name (which may hold spaces), from field 3.
    let rest = &text[text.rfind(')').expect("(comm)") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

const TICK_NS: u64 = 10_000_000;

async fn receive(State(r): State<Arc<Received>>, h: HeaderMap, body: Bytes) -> StatusCode {
    let now = time::OffsetDateTime::now_utc();
    let id = h["webhook-id"].to_str().unwrap().to_owned();
    r.ids.lock().unwrap().insert(id);
    let v: Value = serde_json::from_slice(&body).unwrap();
    let at = time::OffsetDateTime::parse(
        v["timestamp"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    r.latencies
        .lock()
        .unwrap()
        .push((now - at).as_seconds_f64() * 1000.0);
    r.count.fetch_add(1, Ordering::Relaxed);
    StatusCode::NO_CONTENT
}

fn percentile(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn median(v: &[f64]) -> f64 {
    percentile(v, 0.5)
}

/// One round: the writes' throughput (docs/s), the events received, and
/// the CPU time this process spent a write (µs), the receiver's excluded.
async fn round(
    args: &Args,
    corpus: &Articles,
    receiver: Option<(&str, &Received)>,
) -> (f64, usize, f64) {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = Settings::default();
    settings.server.bind = "127.0.0.1:0".into();
    settings.storage.data_dir = dir.path().to_owned();
    settings.webhooks.allowed_hosts = vec!["127.0.0.1".into()];
    settings.storage.wal_fsync = serde_json::from_value(json!(args.wal_fsync))
        .expect("--wal-fsync: always, interval or never");
    let app = App::build(settings.validate().unwrap()).await.unwrap();
    let served = serve::serve(app).await;
    let base = served.base.clone();
    let client = reqwest::Client::new();
    if let Some((url, _)) = receiver {
        let r = client
            .post(format!("{base}/webhooks"))
            .json(&json!({"url": url, "kinds": ["document.duplicate"]}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
    }
    // A near-duplicate is written 500 writes after its original, so the
    // two are never in flight together (each would then name the other).
    let mut order: Vec<usize> = (0..args.docs).collect();
    order.sort_by_key(|&n| n + if corpus.twin_of(n).is_some() { 500 } else { 0 });
    let bodies: Arc<Vec<(String, String)>> = Arc::new(
        order
            .into_iter()
            .map(|n| {
                (
                    format!("{base}/documents/d{n}"),
                    json!({"text": corpus.unicode_text(n)}).to_string(),
                )
            })
            .collect(),
    );
    let next = Arc::new(AtomicUsize::new(0));
    let receiver_ticks = || receiver.map_or(0, |(_, r)| cpu_ticks(r.stat.get().unwrap()));
    let (cpu_start, receiver_start) = (cpu_ticks("/proc/self/stat"), receiver_ticks());
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..args.concurrency {
        let (client, bodies, next) = (client.clone(), Arc::clone(&bodies), Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((url, body)) = bodies.get(i) else {
                    break;
                };
                let r = client
                    .put(url)
                    .header("content-type", "application/json")
                    .body(body.clone())
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
    let secs = start.elapsed().as_secs_f64();
    let mut events = 0;
    if let Some((_, rec)) = receiver {
        // Every event the writes made, delivered.
        let expected = (0..args.docs)
            .filter(|&n| corpus.twin_of(n).is_some())
            .count();
        for _ in 0..6000 {
            if rec.count.load(Ordering::Relaxed) >= expected {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        events = rec.count.swap(0, Ordering::Relaxed);
        let distinct = std::mem::take(&mut *rec.ids.lock().unwrap()).len();
        assert_eq!(distinct, events, "a webhook-id arrived twice");
        let feed = client
            .get(format!("{base}/events?limit=1000"))
            .send()
            .await
            .unwrap();
        let oldest = feed.headers().get("neardup-oldest-cursor").cloned();
        let _ = (oldest, expected);
    }
    // Until every event is delivered: the deliveries are the
    // subscription's cost too.
    let cpu =
        (cpu_ticks("/proc/self/stat") - cpu_start - (receiver_ticks() - receiver_start)) * TICK_NS;
    served.stop().await;
    (
        args.docs as f64 / secs,
        events,
        cpu as f64 / 1000.0 / args.docs as f64,
    )
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let corpus = Articles::new(45, 20_000, 10);
    let received = Arc::new(Received::default());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(Arc::clone(&received));
    // The receiver on a thread and runtime of its own.
    let r = Arc::clone(&received);
    std::thread::spawn(move || {
        let me = std::fs::read_link("/proc/thread-self").unwrap();
        r.stat.set(format!("/proc/{}/stat", me.display())).unwrap();
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                axum::serve(listener, app).await.unwrap()
            })
    });

    let (mut plain, mut subscribed, mut ratios, mut cpu_ratios) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    if let Some(only) = &args.only {
        let with = match only.as_str() {
            "with" => true,
            "without" => false,
            _ => panic!("--only: with or without"),
        };
        for r in 0..args.rounds {
            let (rate, events, cpu) =
                round(&args, &corpus, with.then_some((url.as_str(), &*received))).await;
            println!(
                "round {r}: {rate:.0} docs/s, {cpu:.1} µs CPU a write ({events} events delivered)"
            );
        }
        return;
    }
    for r in 0..args.rounds {
        // The variant that goes first alternates (a drifting machine
        // favours neither), and each round's ratio is of its own pair.
        let ((a, _, cpu_a), (b, events, cpu_b)) = if r % 2 == 0 {
            let a = round(&args, &corpus, None).await;
            (a, round(&args, &corpus, Some((&url, &received))).await)
        } else {
            let b = round(&args, &corpus, Some((&url, &received))).await;
            (round(&args, &corpus, None).await, b)
        };
        println!(
            "round {r}: no subscription {a:.0} docs/s, {cpu_a:.1} µs CPU a write; with one {b:.0} docs/s, {cpu_b:.1} µs; \
             throughput ratio {:.3}, CPU ratio {:.3} ({events} events delivered)",
            b / a,
            cpu_b / cpu_a
        );
        plain.push(a);
        subscribed.push(b);
        ratios.push(b / a);
        cpu_ratios.push(cpu_b / cpu_a);
    }
    let cpu_ratio = median(&cpu_ratios);
    let latencies = received.latencies.lock().unwrap().clone();
    let (a, b) = (median(&plain), median(&subscribed));
    let ratio = median(&ratios);
    println!(
        "median: no subscription {a:.0} docs/s, with one {b:.0} docs/s, median of the rounds' ratios {ratio:.3}; \
         CPU a write with ÷ without (the receiver's excluded), median of the rounds' {cpu_ratio:.3}; \
         event to delivery p50 {:.1} ms, p99 {:.1} ms over {} events",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.len()
    );
    println!(
        "{}",
        json!({"docs": args.docs, "rounds": args.rounds, "concurrency": args.concurrency,
               "plain_docs_per_sec": a, "subscribed_docs_per_sec": b, "ratio": ratio, "cpu_ratio": cpu_ratio,
               "latency_ms_p50": percentile(&latencies, 0.5),
               "latency_ms_p99": percentile(&latencies, 0.99), "events": latencies.len()})
    );
}
