//! The review desk (issue 46): how long the review queue's first page and
//! the precision per band take on a large collection.
//!
//! ```text
//! cargo run --release --example review_bench -- --docs 100000 --decisions 300 --rounds 7
//! ```
//!
//! A server in this process (default settings but `store_text`, a fresh
//! data directory, memory backend), loaded over loopback with
//! `POST /documents/batch`. The corpus is `neardup::testkit::Articles`
//! (accented words, curly quotes, ellipses); every 10th document is a copy
//! of the one before with its last `m` words replaced, `m` cycling from 0
//! to 44, so the planted pairs spread over the Jaccard bands from about
//! 0.4 to 1 (the sample the queue walks for). Then `--decisions` pairs
//! from the queue are decided (`PUT /review/decisions`: a verdict by the
//! pair's score, some `related`), and the rounds time the queue's first
//! page (`GET /review/queue`, default parameters: what a moderator opens)
//! and `GET /review/precision`, then the first page from 0.3, where the
//! lowest bands hold no pair and the walk runs until its budget (the worst
//! case). Reported: the medians over `--rounds`, with the first page's
//! `documents_searched` and `complete`. The last line is a JSON summary.

use clap::Parser;
use neardup::app::App;
use neardup::config::Settings;
use neardup::testkit::Articles;
use serde_json::{json, Value};
use std::time::Instant;

#[path = "common/median.rs"]
mod median;
use median::median;
#[path = "common/serve.rs"]
mod serve;

#[derive(Parser)]
struct Args {
    /// Documents in the collection.
    #[arg(long, default_value = "100000")]
    docs: usize,
    /// Pairs decided before the rounds (taken from the queue).
    #[arg(long, default_value = "300")]
    decisions: usize,
    /// Rounds; the medians are reported.
    #[arg(long, default_value = "7")]
    rounds: usize,
}

/// Document `n`: an article, or (every 10th) the article before with its
/// last words replaced by those of article `n` itself.
fn text(corpus: &Articles, n: usize) -> String {
    if n % 10 != 1 {
        return corpus.unicode_text(n);
    }
    let mut words = corpus.words(n - 1);
    let other = corpus.words(n + 1_000_000);
    let m = ((n / 10) % 12 * 4).min(words.len());
    let len = words.len();
    for (i, w) in words[len - m..].iter_mut().enumerate() {
        *w = other[i % other.len()];
    }
    corpus.render(&words, n, true)
}

async fn get(client: &reqwest::Client, url: &str) -> (Value, f64) {
    let at = Instant::now();
    let r = client.get(url).send().await.unwrap();
    let status = r.status();
    let body: Value = r.json().await.unwrap();
    let ms = at.elapsed().as_secs_f64() * 1e3;
    assert_eq!(status, 200, "{url}: {body}");
    (body, ms)
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let corpus = Articles::new(46, 20_000, 0);
    let dir = tempfile::tempdir().unwrap();
    let mut settings = Settings::default();
    settings.server.bind = "127.0.0.1:0".into();
    settings.storage.data_dir = dir.path().to_owned();
    settings.storage.store_text = true;
    let app = App::build(settings.validate().unwrap()).await.unwrap();
    let served = serve::serve(app).await;
    let base = served.base.clone();
    let client = reqwest::Client::new();

    let load = Instant::now();
    for start in (0..args.docs).step_by(1000) {
        let docs: Vec<Value> = (start..(start + 1000).min(args.docs))
            .map(|n| json!({"id": format!("d{n:06}"), "text": text(&corpus, n)}))
            .collect();
        let r = client
            .post(format!("{base}/documents/batch"))
            .json(&json!({"documents": docs}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    println!(
        "loaded {} documents in {:.1} s",
        args.docs,
        load.elapsed().as_secs_f64()
    );

    // Decisions, from the queue's pages (seeds apart, so they differ).
    let mut decided = 0;
    let mut seed = 1000;
    'deciding: while decided < args.decisions && seed < 1100 {
        let (page, _) = get(
            &client,
            &format!("{base}/review/queue?limit=200&seed={seed}"),
        )
        .await;
        seed += 1;
        for item in page["items"].as_array().unwrap() {
            if decided >= args.decisions {
                break 'deciding;
            }
            let score = item["score"].as_f64().unwrap();
            let verdict = match (score, decided % 7) {
                (_, 0) => "related",
                (s, _) if s >= 0.7 => "duplicate",
                _ => "not_duplicate",
            };
            let r = client
                .put(format!("{base}/review/decisions"))
                .json(&json!({"a": item["a"], "b": item["b"], "verdict": verdict}))
                .send()
                .await
                .unwrap();
            match r.status().as_u16() {
                200 | 201 => decided += 1,
                404 | 405 => {
                    println!("PUT /review/decisions is not in this build: no decisions");
                    break 'deciding;
                }
                s => panic!("deciding: {s} {}", r.text().await.unwrap()),
            }
        }
    }
    println!("decided {decided} pairs");

    let (mut queue_ms, mut precision_ms) = (Vec::new(), Vec::new());
    let mut last = Value::Null;
    for _ in 0..args.rounds {
        let (q, ms) = get(&client, &format!("{base}/review/queue")).await;
        assert!(!q["items"].as_array().unwrap().is_empty(), "{q}");
        queue_ms.push(ms);
        last = q;
        let (p, ms) = get(&client, &format!("{base}/review/precision")).await;
        assert_eq!(p["labels"], decided, "{p}");
        precision_ms.push(ms);
    }
    // The worst case: bands no planted pair reaches (below about 0.45),
    // so the walk runs until its budget.
    let mut budget_ms = Vec::new();
    let mut budget = Value::Null;
    for _ in 0..args.rounds {
        let (q, ms) = get(&client, &format!("{base}/review/queue?from=0.3")).await;
        budget_ms.push(ms);
        budget = q;
    }
    let found: Vec<u64> = last["bands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["found"].as_u64().unwrap())
        .collect();
    println!(
        "queue first page: median {:.1} ms over {} rounds ({} items, {} documents searched, complete {}, found per band {:?})",
        median(&queue_ms),
        args.rounds,
        last["items"].as_array().unwrap().len(),
        last["documents_searched"],
        last["complete"],
        found
    );
    println!(
        "queue first page from 0.3 (walk to its budget): median {:.1} ms ({} documents searched, complete {})",
        median(&budget_ms),
        budget["documents_searched"],
        budget["complete"]
    );
    println!(
        "precision: median {:.2} ms over {} rounds ({decided} labels)",
        median(&precision_ms),
        args.rounds
    );
    println!(
        "{}",
        json!({
            "docs": args.docs,
            "decisions": decided,
            "rounds": args.rounds,
            "queue_ms": median(&queue_ms),
            "queue_to_budget_ms": median(&budget_ms),
            "precision_ms": median(&precision_ms),
            "documents_searched": last["documents_searched"],
            "complete": last["complete"],
        })
    );
    served.stop().await;
}
