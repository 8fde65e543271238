//! Criterion benches of the whole-index scan and insert-if-unique.
//!
//! A 50,000-document index of ~130-word random texts with 500 planted
//! twins (one word substituted: exact Jaccard ≈ 0.95 on word 3-shingles),
//! built once. Each timed closure checks its answer: the scan finds exactly
//! the 500 planted groups, insert-if-unique refuses a twin and names its
//! original.
//!
//! ```text
//! cargo bench --bench dedup
//! ```

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use neardup::engine::{DocId, Engine, NoJournal, Query, UniqueOutcome, ValidParams, WriteMode};
use neardup::testkit::Articles;
use rayon::prelude::*;
use std::ops::ControlFlow;
use std::sync::OnceLock;
use std::time::Duration;

const DOCS: usize = 50_000;
const PLANT_EVERY: usize = 100;

/// The test kit's articles: an original and, at every `n % 100 == 1`,
/// a near-duplicate of document `n - 1`.
fn articles() -> &'static Articles {
    static ARTICLES: OnceLock<Articles> = OnceLock::new();
    ARTICLES.get_or_init(|| Articles::new(0xd3d0b, 40_000, PLANT_EVERY))
}

/// A new near-duplicate of the original document `n` (not planted).
fn another_twin(n: usize) -> String {
    let a = articles();
    let mut words = a.words(n);
    let i = words.len() / 2;
    words[i] = words[i].wrapping_add(1) % 40_000;
    a.render(&words, n, false)
}

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let e = Engine::new(ValidParams::default());
        (0..DOCS).into_par_iter().for_each(|n| {
            let doc = e.prepare(&articles().text(n)).unwrap();
            e.insert(
                DocId::parse(&format!("d{n}")).unwrap(),
                &doc,
                None,
                WriteMode::Create,
            )
            .unwrap();
        });
        e
    })
}

fn scan(c: &mut Criterion) {
    let e = engine();
    let t = e.threshold(None).unwrap();
    let planted = DOCS / PLANT_EVERY;
    let mut g = c.benchmark_group("dedup_scan");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(e.len() as u64));
    g.bench_function("groups_50k_on_all_cores", |b| {
        b.iter(|| {
            let groups = e.duplicate_groups(t, 2, None);
            assert_eq!(groups.groups.len(), planted);
            assert!(groups.groups.iter().all(|g| g.len() == 2));
        })
    });
    g.bench_function("pairs_50k_on_all_cores", |b| {
        b.iter(|| {
            let mut pairs = 0;
            e.scan_pairs(t, None, &mut |edges| {
                pairs += edges.len();
                ControlFlow::Continue(())
            });
            assert_eq!(pairs, planted);
        })
    });
    g.finish();
}

fn if_unique(c: &mut Criterion) {
    let e = engine();
    let t = e.threshold(None).unwrap();
    let twins: Vec<_> = (0..DOCS)
        .step_by(PLANT_EVERY)
        .map(|n| (n + 2, e.prepare(&another_twin(n + 2)).unwrap()))
        .collect();
    let mut g = c.benchmark_group("insert_if_unique");
    let mut i = 0;
    g.bench_function("refused_duplicate", |b| {
        b.iter(|| {
            let (n, doc) = &twins[i % twins.len()];
            i += 1;
            let id = DocId::parse("candidate").unwrap();
            match e
                .insert_if_unique(id, doc, None, None, &Query::new(t, 10), &NoJournal)
                .unwrap()
            {
                UniqueOutcome::Duplicate(q) => {
                    assert_eq!(q.matches[0].id.as_str(), format!("d{n}"))
                }
                UniqueOutcome::Inserted(_) => panic!("a twin got in"),
            }
        })
    });
    g.finish();
}

criterion_group!(benches, scan, if_unique);
criterion_main!(benches);
