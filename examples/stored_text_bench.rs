//! Stored texts: compression ratio and read latency of one zstd frame per
//! text (what `persist::texts` does) against small blocks of texts, and the
//! store's own `text(id)` from the tail segment and from a snapshot's
//! compacted segment.
//!
//! ```sh
//! cargo run --release --example stored_text_bench -- 20000
//! ```

use neardup::config::StorageSettings;
use neardup::engine::{DocId, Engine, EngineParams, NewDoc, WriteMode};
use neardup::persist::{texts, Store};
use neardup::testkit::Articles;
use std::sync::Arc;
use std::time::Instant;

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * p) as usize]
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let a = Articles::new(1, 20_000, 10);
    let docs: Vec<String> = (0..n)
        .map(|i| {
            if i % 2 == 0 {
                a.unicode_text(i)
            } else {
                a.text(i)
            }
        })
        .collect();
    let raw: usize = docs.iter().map(String::len).sum();
    println!("{n} texts, {:.0} bytes on average", raw as f64 / n as f64);

    // One frame per text.
    let start = Instant::now();
    let frames: Vec<Vec<u8>> = docs.iter().map(|t| texts::compress(t)).collect();
    let secs = start.elapsed().as_secs_f64();
    let packed: usize = frames.iter().map(|f| f.len() + 12).sum();
    let mut lat = Vec::with_capacity(n);
    for f in frames.iter().step_by(7) {
        let t = Instant::now();
        std::hint::black_box(texts::decompress(f).unwrap());
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    println!(
        "per text:      ratio {:.2} ({:.0} B/doc with the 12-byte frame), compress {:.0} MB/s, read one: p50 {:.1} µs, p99 {:.1} µs",
        raw as f64 / packed as f64,
        packed as f64 / n as f64,
        raw as f64 / secs / 1e6,
        percentile(lat.clone(), 0.5),
        percentile(lat, 0.99)
    );

    // Blocks of `per` texts: better ratio, but a read decompresses the block
    // (with a reused context, as the store's reads use).
    let mut dctx = zstd::bulk::Decompressor::new().unwrap();
    for per in [8usize, 32, 128] {
        let blocks: Vec<Vec<u8>> = docs
            .chunks(per)
            .map(|c| zstd::bulk::compress(c.concat().as_bytes(), texts::ZSTD_LEVEL).unwrap())
            .collect();
        // A block also needs an offset table: 4 bytes a text.
        let packed: usize = blocks.iter().map(|b| b.len() + 12).sum::<usize>() + 4 * n;
        let mut lat = Vec::new();
        for b in blocks.iter().step_by(3) {
            let t = Instant::now();
            std::hint::black_box(dctx.decompress(b, 1 << 24).unwrap());
            lat.push(t.elapsed().as_secs_f64() * 1e6);
        }
        println!(
            "blocks of {per:>3}: ratio {:.2} ({:.0} B/doc), read one: p50 {:.1} µs, p99 {:.1} µs",
            raw as f64 / packed as f64,
            packed as f64 / n as f64,
            percentile(lat.clone(), 0.5),
            percentile(lat, 0.99)
        );
    }

    // The store: write with texts, read back from the tail, snapshot, read
    // back from the compacted segment.
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(Engine::new(EngineParams::default().validate().unwrap()));
    let store = Store::open(
        Arc::clone(&engine),
        &StorageSettings {
            data_dir: dir.path().to_owned(),
            store_text: true,
            wal_fsync: neardup::config::WalFsync::Never,
            ..Default::default()
        },
    )
    .unwrap();
    let start = Instant::now();
    for (i, t) in docs.iter().enumerate() {
        let doc = engine.prepare(t).unwrap();
        store
            .insert(
                NewDoc {
                    id: DocId::parse(&format!("d{i}")).unwrap(),
                    doc,
                    metadata: None,
                    expires_ms: None,
                    text: Some(t.as_str().into()),
                    created_ms: None,
                },
                WriteMode::Upsert,
            )
            .unwrap();
    }
    println!(
        "store insert with texts: {:.0} docs/s; log {:.0} B/doc, text tail {:.0} B/doc",
        n as f64 / start.elapsed().as_secs_f64(),
        store.wal().bytes() as f64 / n as f64,
        store.text_bytes() as f64 / n as f64
    );
    let read = |what: &str| {
        let mut lat = Vec::new();
        for i in (0..n).step_by(5) {
            let t = Instant::now();
            let got = store.text(&format!("d{i}")).unwrap().unwrap();
            lat.push(t.elapsed().as_secs_f64() * 1e6);
            assert_eq!(got, docs[i]);
        }
        println!(
            "store text(id) from {what}: p50 {:.1} µs, p99 {:.1} µs",
            percentile(lat.clone(), 0.5),
            percentile(lat, 0.99)
        );
    };
    read("the tail");
    let info = store.snapshot().unwrap();
    println!(
        "snapshot: {} B ({:.0} B/doc), text segment {} B ({:.0} B/doc) in {:.0} ms",
        info.bytes,
        info.bytes as f64 / n as f64,
        info.text_bytes,
        info.text_bytes as f64 / n as f64,
        info.milliseconds
    );
    read("the compacted segment");
    let start = Instant::now();
    let sample = store.sample_texts(2000, 7, usize::MAX).unwrap();
    println!(
        "sample_texts(2000): {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    assert_eq!(sample.len(), 2000.min(n));
}
