//! What a metadata filter costs a query: the same queries by id without a
//! filter and with filters that admit every match, alternated round by
//! round so a loaded machine slows every variant alike (criterion's
//! `filter` group in benches/engine.rs measures them one after another).
//!
//! 20,000 documents of 200 words with ~170 bytes of metadata each (seven
//! fields); every fourth heads a family of four near-duplicates, so each
//! query verifies and returns 3 matches. Prints each variant's best and
//! median round (ns per query) and its ratio to the unfiltered one.
//!
//! ```sh
//! cargo run --release --example filter_bench [rounds]
//! ```

use neardup::engine::{DocId, Engine, FilterSpec, Query, ValidParams, WriteMode};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

const FAMILIES: u64 = 5_000;

fn words(seed: u64) -> Vec<String> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..200)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            format!("w{}", x % 50_000)
        })
        .collect()
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|r| r.parse().expect("rounds: a number"))
        .unwrap_or(15);
    let e = Engine::new(ValidParams::default());
    let mut heads = Vec::new();
    for family in 0..FAMILIES {
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
    let sites: Vec<String> = (0..50).map(|s| format!("site-{s}.example")).collect();
    let variants: Vec<(&str, Query)> = vec![
        ("unfiltered", Query::new(t, 10)),
        (
            "filter {draft: false} (admits all)",
            Query::new(t, 10).filter(Some(
                spec(serde_json::json!({"draft": false}), &[]).about(None),
            )),
        ),
        (
            "filter {site: one of 50} (admits all)",
            Query::new(t, 10).filter(Some(
                spec(serde_json::json!({ "site": sites }), &[]).about(None),
            )),
        ),
        (
            "exclude_same author",
            Query::new(t, 10).filter(Some(spec(serde_json::json!({}), &["author"]).about(None))),
        ),
        (
            "filter {lang: [fr, de]} + exclude_same author",
            Query::new(t, 10).filter(Some(
                spec(serde_json::json!({"lang": ["fr", "de"]}), &["author"]).about(None),
            )),
        ),
    ];
    // Warm up, and check every variant answers the same 3 matches.
    for (name, q) in &variants {
        for head in &heads {
            let out = e.similar_to_id(head, q).unwrap();
            assert_eq!(out.matches.len(), 3, "{name} {head}: {:?}", out.matches);
        }
    }
    let mut per_round: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    for _ in 0..rounds {
        for (v, (_, q)) in variants.iter().enumerate() {
            let at = Instant::now();
            for head in &heads {
                black_box(e.similar_to_id(black_box(head), q).unwrap());
            }
            per_round[v].push(at.elapsed().as_nanos() as f64 / heads.len() as f64);
        }
    }
    // The filter alone, on one document's metadata.
    let record = e.get("d7-1").unwrap();
    for (name, q) in &variants[1..] {
        let f = q.filter.as_ref().unwrap();
        let at = Instant::now();
        let n = 1_000_000;
        for _ in 0..n {
            assert!(f.admits(black_box(record.metadata())));
        }
        println!(
            "{name:48} {:.0} ns per candidate read",
            at.elapsed().as_nanos() as f64 / n as f64
        );
    }
    // The same one variant after another (as criterion runs them): each
    // variant's rounds back to back.
    let mut sequential: Vec<f64> = Vec::new();
    for (_, q) in &variants {
        let mut best = f64::MAX;
        for _ in 0..rounds.div_ceil(3) {
            let at = Instant::now();
            for head in &heads {
                black_box(e.similar_to_id(black_box(head), q).unwrap());
            }
            best = best.min(at.elapsed().as_nanos() as f64 / heads.len() as f64);
        }
        sequential.push(best);
    }
    let stat = |xs: &mut Vec<f64>| {
        xs.sort_by(f64::total_cmp);
        (xs[0], xs[xs.len() / 2])
    };
    let (base_min, base_median) = stat(&mut per_round[0].clone());
    println!(
        "{} queries by id per round, {rounds} rounds, variants alternated; ns per query (best, median), ratio to unfiltered (best, median)",
        heads.len()
    );
    for (v, (name, _)) in variants.iter().enumerate() {
        let (min, median) = stat(&mut per_round[v]);
        println!(
            "{name:48} {min:8.0} {median:8.0}   {:.3}× {:.3}×   sequential best {:.0} ({:.3}×)",
            min / base_min,
            median / base_median,
            sequential[v],
            sequential[v] / sequential[0]
        );
    }
}
