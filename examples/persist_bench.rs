//! Durability and memory figures: memory per document (RSS growth next to
//! `Engine::memory()` by component), restore rate, longest pause during a
//! snapshot, and write throughput with fsync=always vs never.
//!
//! ```text
//! cargo run --release --example persist_bench -- [DOCS] [DIR]
//! ```
//! DOCS defaults to 1,000,000; DIR to a temporary directory (removed after).
//! Documents are ~130 words drawn from a 20,000-word synthetic vocabulary.
//!
//! Restores run in a fresh child process (`persist_bench --restore DIR`), so
//! their RSS growth is the restored state alone, not memory the load phase
//! freed but the allocator kept. They restore twice: a directory holding
//! only the snapshot (the snapshot load rate), then the full directory
//! (snapshot + the log written during the snapshot).

use neardup::config::{StorageSettings, WalFsync};
use neardup::engine::{DocId, Engine, NewDoc, Query, ValidParams, WriteMode};
use neardup::persist::Store;
use rand::{rngs::StdRng, Rng, SeedableRng};
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn text(i: u64) -> String {
    let mut rng = StdRng::seed_from_u64(i);
    (0..130)
        .map(|_| format!("w{}", rng.gen_range(0..20_000)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn settings(dir: &std::path::Path, fsync: WalFsync) -> StorageSettings {
    StorageSettings {
        data_dir: dir.to_owned(),
        wal_fsync: fsync,
        snapshot_interval_secs: 0,
        ..Default::default()
    }
}

fn open(dir: &std::path::Path, fsync: WalFsync) -> Store {
    let engine = Arc::new(Engine::new(ValidParams::default()));
    Store::open(engine, &settings(dir, fsync)).expect("store opens")
}

/// `engine.memory()` by component, per document, on one line.
fn memory_line(engine: &Engine) -> String {
    let m = engine.memory();
    let n = engine.len().max(1) as f64;
    let per = |b: usize| b as f64 / n;
    format!(
        "/stats estimate {:.0} bytes/doc = shingles {:.0} + signatures {:.0} + ids {:.0} + records overhead {:.0} + id map {:.0} + doc map {:.0} + lsh {:.0} (+ metadata {:.0})",
        m.bytes_per_document,
        per(m.shingles_bytes),
        per(m.signatures_bytes),
        per(m.ids_bytes),
        per(m.records_overhead_bytes),
        per(m.id_map_bytes),
        per(m.doc_map_bytes),
        per(m.lsh_bytes),
        per(m.metadata_bytes),
    )
}

/// Child process: restore `dir` and report rate and memory.
fn restore_child(dir: &std::path::Path) {
    let rss0 = rss_kib();
    let start = Instant::now();
    let store = open(dir, WalFsync::Never);
    let secs = start.elapsed().as_secs_f64();
    let rss1 = rss_kib();
    let n = store.engine().len();
    println!(
        "  restore: {n} docs in {secs:.2} s = {:.0} docs/s (snapshot {} + {} log records)",
        n as f64 / secs,
        store.recovery.snapshot_documents,
        store.recovery.replayed_records
    );
    println!(
        "  RSS growth {:.0} bytes/doc; {}",
        (rss1 - rss0) as f64 * 1024.0 / n as f64,
        memory_line(store.engine())
    );
}

fn restore_in_child(dir: &std::path::Path) {
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .arg("--restore")
        .arg(dir)
        .status()
        .expect("spawning the restore child");
    assert!(status.success(), "restore child failed");
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Single-document writes from `threads` threads for `secs`; returns docs/s.
fn write_rate(store: &Store, threads: usize, secs: f64, base: u64) -> f64 {
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let texts: Vec<String> = (0..2000).map(|i| text(base + i)).collect();
    let docs: Vec<_> = texts
        .iter()
        .map(|t| store.engine().prepare(t).unwrap())
        .collect();
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (stop, done, docs) = (&stop, &done, &docs);
            s.spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let id = DocId::parse(&format!("w{base}-{t}-{i}")).unwrap();
                    store
                        .insert(
                            NewDoc {
                                id,
                                doc: docs[(i as usize) % docs.len()].clone(),
                                metadata: None,
                                expires_ms: None,
                                text: None,
                                created_ms: None,
                            },
                            WriteMode::Upsert,
                        )
                        .unwrap();
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            });
        }
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
    });
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("--restore") {
        let dir = args.nth(1).expect("--restore DIR");
        restore_child(std::path::Path::new(&dir));
        return;
    }
    let n: u64 = args
        .next()
        .map_or(1_000_000, |a| a.parse().expect("DOCS is a number"));
    let tmp = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let dir = args
        .next()
        .map_or_else(|| tmp.path().to_owned(), Into::into);
    println!("documents: {n}, data dir: {}", dir.display());

    // 1. Load N documents (batches: one commit each).
    let rss0 = rss_kib();
    let store = open(&dir, WalFsync::Never);
    let start = Instant::now();
    for chunk_start in (0..n).step_by(10_000) {
        let end = (chunk_start + 10_000).min(n);
        let items: Vec<_> = (chunk_start..end)
            .into_par_iter()
            .map(|i| {
                let doc = store.engine().prepare(&text(i)).unwrap();
                NewDoc {
                    id: DocId::parse(&format!("d{i}")).unwrap(),
                    doc,
                    metadata: None,
                    expires_ms: None,
                    text: None,
                    created_ms: None,
                }
            })
            .collect();
        for r in store.insert_many(items, WriteMode::Create).unwrap() {
            r.unwrap();
        }
    }
    let load = start.elapsed().as_secs_f64();
    let rss1 = rss_kib();
    println!(
        "load: {n} docs in {load:.1} s ({:.0} docs/s, prepare on 2 cores + insert); RSS growth {:.0} bytes/doc",
        n as f64 / load,
        (rss1 - rss0) as f64 * 1024.0 / n as f64,
    );
    println!("  {}", memory_line(store.engine()));

    // 2. Snapshot while a writer and a reader run; record their longest stall.
    let stop = AtomicBool::new(false);
    let worst_write = AtomicU64::new(0);
    let worst_read = AtomicU64::new(0);
    let baseline_write = AtomicU64::new(0);
    let in_snapshot = AtomicBool::new(false);
    let epoch = Instant::now();
    let slow: std::sync::Mutex<Vec<(f64, f64)>> = Default::default();
    // The writer cycles through distinct texts (none a copy of the queried
    // document, so no bucket grows hot) under fresh ids.
    let fresh: Vec<_> = (0..2000u64)
        .into_par_iter()
        .map(|i| store.engine().prepare(&text(50_000_000 + i)).unwrap())
        .collect();
    let info = std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let id = DocId::parse(&format!("snapw{i}")).unwrap();
                let doc = &fresh[(i % 2000) as usize];
                let new = NewDoc {
                    id,
                    doc: doc.clone(),
                    metadata: None,
                    expires_ms: None,
                    text: None,
                    created_ms: None,
                };
                store.insert(new, WriteMode::Upsert).unwrap();
                let ns = t.elapsed().as_nanos() as u64;
                if ns > 5_000_000 {
                    slow.lock()
                        .unwrap()
                        .push(((t - epoch).as_secs_f64() * 1e3, ns as f64 / 1e6));
                }
                let slot = if in_snapshot.load(Ordering::Relaxed) {
                    &worst_write
                } else {
                    &baseline_write
                };
                slot.fetch_max(ns, Ordering::Relaxed);
                i += 1;
            }
        });
        s.spawn(|| {
            let t_ = store.engine().threshold(None).unwrap();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                // d7 has no near-duplicates: this times candidate lookup + verification.
                let q = store
                    .engine()
                    .similar_to_id("d7", &Query::new(t_, 10))
                    .unwrap();
                assert!(!q.truncated);
                if in_snapshot.load(Ordering::Relaxed) {
                    worst_read.fetch_max(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                }
            }
        });
        std::thread::sleep(Duration::from_millis(500));
        in_snapshot.store(true, Ordering::Relaxed);
        let snap_start = (Instant::now() - epoch).as_secs_f64() * 1e3;
        let info = store.snapshot().unwrap();
        println!(
            "snapshot phases: rotate {:.1} ms, collect {:.1} ms, write {:.1} ms (starts at t={snap_start:.0} ms)",
            info.rotate_ms, info.collect_ms, info.write_ms
        );
        in_snapshot.store(false, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::Relaxed);
        info
    });
    println!(
        "snapshot: {} docs, {:.0} MiB, {:.0} ms; longest single write during it {:.2} ms (outside: {:.2} ms), longest query {:.2} ms",
        info.documents,
        info.bytes as f64 / 1048576.0,
        info.milliseconds,
        worst_write.load(Ordering::Relaxed) as f64 / 1e6,
        baseline_write.load(Ordering::Relaxed) as f64 / 1e6,
        worst_read.load(Ordering::Relaxed) as f64 / 1e6,
    );
    let mut slow = slow.into_inner().unwrap();
    let slow_count = slow.len();
    slow.sort_by(|a, b| b.1.total_cmp(&a.1));
    slow.truncate(10);
    println!("writes over 5 ms: {slow_count}; longest (t ms, duration ms): {slow:?}");
    let docs_now = store.engine().len();
    drop(store);

    // Decoding alone (no index rebuild), to see where restore time goes.
    let start = Instant::now();
    let mut decoded = 0usize;
    neardup::persist::snapshot::read(&info.path, 16_384, |chunk| {
        decoded += chunk.len();
        Ok(())
    })
    .unwrap();
    let secs = start.elapsed().as_secs_f64();
    println!(
        "snapshot decode only: {decoded} records in {secs:.2} s = {:.0} records/s",
        decoded as f64 / secs
    );

    // 3. Restore, each in a fresh process: the snapshot alone, then with the log.
    let snap_only = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let alone = snap_only.path().join(info.path.file_name().unwrap());
    std::fs::hard_link(&info.path, &alone)
        .or_else(|_| std::fs::copy(&info.path, &alone).map(drop))
        .unwrap();
    println!("restore of the snapshot alone ({} docs):", info.documents);
    restore_in_child(snap_only.path());
    drop(snap_only);
    println!("restore of snapshot + log ({docs_now} docs):");
    restore_in_child(&dir);

    // 4. fsync=always vs never, single-document writes, 16 writer threads.
    for mode in [WalFsync::Never, WalFsync::Always] {
        let d = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
        let s = open(d.path(), mode);
        let rate = write_rate(&s, 16, 3.0, 9_000_000);
        let fsyncs = s.wal().counters.fsyncs.load(Ordering::Relaxed);
        let appends = s.wal().counters.appends.load(Ordering::Relaxed);
        println!(
            "writes, fsync={}: {rate:.0} docs/s with 16 threads ({fsyncs} fsyncs for {appends} appends)",
            mode.as_str()
        );
    }
}
