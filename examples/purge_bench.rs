//! The cost of the expiry sweep (`Store::purge_expired`, run every
//! `storage.purge_interval_secs` per collection).
//!
//! ```text
//! cargo run --release --example purge_bench -- [DOCS] [ROUNDS]
//! ```
//! DOCS defaults to 200,000 (the test kit's ~130-word articles), ROUNDS to 5. Every
//! document gets its own expiry: 10% in one hour, the rest in two. A
//! manual clock then measures, on a store with `wal_fsync = "always"` (the
//! default; a sweep commits once, at its end):
//! 1. the sweep when nothing has expired (the price every interval pays):
//!    median of ROUNDS, per stored document;
//! 2. the sweep an hour later, purging 10% (a delete in the log each);
//! 3. two hours later, purging the remaining 90%;
//!
//! and, for 2, the median `/similar`-style query time of a concurrent reader
//! during the sweep beside the same reader without it.

use neardup::config::{StorageSettings, WalFsync};
use neardup::engine::{Clock, DocId, Engine, ManualClock, NewDoc, Query, ValidParams, WriteMode};
use neardup::persist::Store;
use neardup::testkit::Articles;
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/median.rs"]
mod median;
use median::median;

/// Document `i` of the test kit's article stream.
fn text(i: u64) -> String {
    static ARTICLES: std::sync::OnceLock<Articles> = std::sync::OnceLock::new();
    ARTICLES
        .get_or_init(|| Articles::new(1, 20_000, 0))
        .text(i as usize)
}

/// Query times (µs) of a reader running until `stop`, querying stored texts.
fn reader(store: &Store, stop: &AtomicBool, n: u64) -> Vec<f64> {
    let mut times = Vec::new();
    let mut i = 0u64;
    let q = Query::new(store.engine().threshold(None).unwrap(), 10);
    while !stop.load(Ordering::Acquire) {
        let doc = store.engine().prepare(&text(i % n)).unwrap();
        let t = Instant::now();
        let _ = store.engine().similar_to(&doc, None, &q);
        times.push(t.elapsed().as_secs_f64() * 1e6);
        i += 7919;
    }
    times
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args.get(1).map_or(200_000, |s| s.parse().expect("DOCS"));
    let rounds: usize = args.get(2).map_or(5, |s| s.parse().expect("ROUNDS"));
    let dir = tempfile::tempdir().expect("temp dir");
    let clock = Arc::new(ManualClock::default());
    let engine = Arc::new(Engine::with_clock(ValidParams::default(), clock.clone()));
    let settings = StorageSettings {
        data_dir: dir.path().to_owned(),
        wal_fsync: WalFsync::Always,
        snapshot_interval_secs: 0,
        ..Default::default()
    };
    let store = Store::open(engine, &settings).expect("store opens");
    let hour = 3_600_000u64;
    let now = clock.now_ms();
    for start in (0..n).step_by(10_000) {
        let items: Vec<_> = (start..(start + 10_000).min(n))
            .into_par_iter()
            .map(|i| NewDoc {
                id: DocId::parse(&format!("d{i}")).unwrap(),
                doc: store.engine().prepare(&text(i)).unwrap(),
                metadata: None,
                expires_ms: Some(now + if i % 10 == 0 { hour } else { 2 * hour }),
                text: None,
                created_ms: None,
            })
            .collect();
        for r in store.insert_many(items, WriteMode::Create).unwrap() {
            r.unwrap();
        }
    }
    println!("documents: {n}, each with its own expiry (10% in 1 h, 90% in 2 h)");

    // 1. Nothing expired.
    let idle: Vec<f64> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            assert_eq!(store.purge_expired().unwrap(), 0);
            t.elapsed().as_secs_f64()
        })
        .collect();
    let idle = median(&idle);
    println!(
        "sweep, nothing expired: {:.1} ms median of {rounds} = {:.1} ns per stored document",
        idle * 1e3,
        idle * 1e9 / n as f64
    );

    // A reader alone, for comparison with a reader during the purge.
    let stop = AtomicBool::new(false);
    let alone = std::thread::scope(|s| {
        let h = s.spawn(|| reader(&store, &stop, n));
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Release);
        h.join().unwrap()
    });

    // 2. 10% expired, with a reader running.
    clock.advance(Duration::from_millis(hour + 1_000));
    let stop = AtomicBool::new(false);
    let (purged, secs, during) = std::thread::scope(|s| {
        let h = s.spawn(|| reader(&store, &stop, n));
        let t = Instant::now();
        let purged = store.purge_expired().unwrap();
        let secs = t.elapsed().as_secs_f64();
        stop.store(true, Ordering::Release);
        (purged, secs, h.join().unwrap())
    });
    assert_eq!(purged as u64, n.div_ceil(10));
    println!(
        "sweep, 10% expired: {purged} purged in {:.0} ms = {:.0} docs/s (one commit, fsync always)",
        secs * 1e3,
        purged as f64 / secs
    );
    println!(
        "  a concurrent reader: median query {:.1} µs during the sweep, {:.1} µs without ({} and {} queries)",
        median(&during),
        median(&alone),
        during.len(),
        alone.len()
    );

    // 3. The rest.
    clock.advance(Duration::from_millis(hour));
    let t = Instant::now();
    let purged = store.purge_expired().unwrap();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(purged as u64 + n.div_ceil(10), n);
    assert_eq!(store.engine().len(), 0);
    println!(
        "sweep, the other 90% expired: {purged} purged in {:.0} ms = {:.0} docs/s",
        secs * 1e3,
        purged as f64 / secs
    );
}
