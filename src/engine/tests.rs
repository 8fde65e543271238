use super::*;
use crate::text::{ShingleKind, ShingleOptions};
use std::collections::HashMap;

fn engine_with(kind: ShingleKind, k: usize, threshold: f64) -> Engine {
    Engine::new(
        EngineParams {
            shingle: ShingleOptions {
                kind,
                k,
                multiset: false,
            },
            index: IndexParams {
                threshold,
                ..Default::default()
            },
            ..Default::default()
        }
        .validate()
        .unwrap(),
    )
}

/// Upsert `(id, document)` pairs as one batch (`insert_many_journaled`),
/// each stored.
pub(super) fn insert_batch<'a>(e: &Engine, items: impl Iterator<Item = (&'a str, &'a Prepared)>) {
    let writes = items
        .map(|(key, doc)| BatchWrite {
            id: id(key),
            doc,
            metadata: None,
            stamp: Stamp::default(),
        })
        .collect();
    for r in e.insert_many_journaled(writes, WriteMode::Upsert, &NoJournal) {
        r.unwrap();
    }
}

fn id(s: &str) -> DocId {
    DocId::parse(s).unwrap()
}

fn put(e: &Engine, key: &str, text: &str) {
    let doc = e.prepare(text).unwrap();
    e.insert(id(key), &doc, None, WriteMode::Upsert).unwrap();
}

const DOC1: &str = "The night is dark and the moon is red.";
const DOC2: &str = "I can see moon is red, the night is dark.";
const DOC3: &str = "The moon in the night is red.";

#[test]
fn examples_md_word_three_shingle_jaccard_values() {
    let e = engine_with(ShingleKind::Word, 3, 0.8);
    put(&e, "1", DOC1);
    put(&e, "2", DOC2);
    put(&e, "3", DOC3);
    let c12 = e.compare("1", "2").unwrap();
    assert_eq!((c12.overlap.intersection, c12.overlap.union), (3, 12));
    assert_eq!(c12.jaccard, 0.25);
    let c13 = e.compare("1", "3").unwrap();
    assert_eq!((c13.overlap.intersection, c13.overlap.union), (1, 11));
    let c23 = e.compare("2", "3").unwrap();
    assert_eq!((c23.overlap.intersection, c23.overlap.union), (1, 12));
    assert_eq!(e.get("1").unwrap().shingles().len(), 7);
    assert_eq!(e.get("2").unwrap().shingles().len(), 8);
    assert_eq!(e.get("3").unwrap().shingles().len(), 5);
}

#[test]
fn examples_md_question_pairs() {
    let chars = engine_with(ShingleKind::Char, 5, 0.5);
    let words = engine_with(ShingleKind::Word, 3, 0.5);
    for pair in crate::testkit::QUESTION_PAIRS {
        let (a, b) = (pair.a, pair.b);
        for (e, expected) in [(&chars, pair.char5), (&words, pair.word3)] {
            put(e, "a", a);
            put(e, "b", b);
            let j = e.compare("a", "b").unwrap().jaccard;
            assert!(
                (j - expected).abs() < 5e-5,
                "{a:?} vs {b:?}: {j} != {expected}"
            );
        }
    }
}

#[test]
fn similar_returns_verified_matches_sorted_without_self() {
    let e = engine_with(ShingleKind::Word, 1, 0.5);
    put(&e, "base", "alpha beta gamma delta epsilon zeta eta theta");
    put(&e, "near", "alpha beta gamma delta epsilon zeta eta iota");
    put(&e, "same", "alpha beta gamma delta epsilon zeta eta theta");
    put(&e, "far", "one two three four five six seven eight");
    let t = e.threshold(None).unwrap();
    let out = e.similar_to_id("base", &Query::new(t, 10)).unwrap();
    let ids: Vec<&str> = out.matches.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, vec!["same", "near"]);
    assert_eq!(out.matches[0].jaccard, 1.0);
    assert_eq!(out.matches[0].estimate, 1.0);
    assert_eq!(out.matches[1].jaccard, 7.0 / 9.0);
    // Ties on Jaccard break by id.
    put(
        &e,
        "also-same",
        "alpha beta gamma delta epsilon zeta eta theta",
    );
    let out = e.similar_to_id("base", &Query::new(t, 2)).unwrap();
    let ids: Vec<&str> = out.matches.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, vec!["also-same", "same"]);
}

/// A query by id, which looks up only the bands the index's shared-band
/// mask names (none for a document alone in all its buckets), gives what
/// the full lookup gives: the same query through `similar_to` with the
/// stored text, which never reads the mask. Through inserts, replaces,
/// deletes and slots reused by documents with and without near-duplicates,
/// one at a time and in batches.
#[test]
fn queries_answered_by_the_shared_bands_equal_the_full_lookup() {
    let e = engine_with(ShingleKind::Word, 1, 0.5);
    let words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "zeta",
        "eta",
        "theta",
        "iota",
        "kappa",
        "café",
        "naïve",
        "Straße",
        "москва",
        "東京",
        "l’été",
    ];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || crate::minhash::splitmix64(&mut state);
    let mut texts: HashMap<String, String> = HashMap::new();
    let t = e.threshold(None).unwrap();
    let (mut alone, mut partial) = (0, 0);
    let every = (0..e.bands().bands).fold(0, |m, b| m | crate::lsh::index::class_of(b));
    for round in 0..400 {
        let n = (next() % 40) as usize;
        let key = format!("d{n}");
        match next() % 6 {
            0 => {
                e.remove(&key);
                texts.remove(&key);
            }
            1 if texts.len() > 1 => {
                // A near-duplicate of a stored document: one word changed.
                let base = texts.values().nth(round % texts.len()).unwrap().clone();
                let mut w: Vec<&str> = base.split(' ').collect();
                w[0] = words[(next() % words.len() as u64) as usize];
                let text = w.join(" ");
                put(&e, &key, &text);
                texts.insert(key, text);
            }
            2 => {
                // A batch of two, sharing nothing with each other.
                let batch: Vec<(String, String)> = (0..2)
                    .map(|i| {
                        let text = (0..12)
                            .map(|j| format!("b{round}x{i}y{j}"))
                            .collect::<Vec<_>>()
                            .join(" ");
                        (format!("d{}", (n + i) % 40), text)
                    })
                    .collect();
                let docs: Vec<Prepared> =
                    batch.iter().map(|(_, t)| e.prepare(t).unwrap()).collect();
                insert_batch(&e, batch.iter().map(|(k, _)| k.as_str()).zip(&docs));
                texts.extend(batch);
            }
            _ => {
                let text = (0..10)
                    .map(|_| words[(next() % words.len() as u64) as usize])
                    .collect::<Vec<_>>()
                    .join(" ");
                put(&e, &key, &text);
                texts.insert(key, text);
            }
        }
        for (key, text) in &texts {
            let q = Query::new(t, 100);
            let by_id = e.similar_to_id(key, &q).unwrap();
            let full = e
                .similar_to(&e.prepare(text).unwrap(), Some(key), &q)
                .unwrap();
            assert_eq!(by_id, full, "round {round}, {key}: {text}");
            let (slot, record) = e.get_with_slot(key).unwrap();
            let bands = e.shared_bands(slot, &record);
            alone += usize::from(bands == 0);
            // Some bands skipped, some looked up.
            partial += usize::from(bands != 0 && bands != every);
        }
    }
    assert!(alone > 1000, "the mask answered {alone} queries");
    assert!(partial > 100, "{partial} queries looked up only some bands");
}

/// `is_current` compares records, not contents: a replace with the same
/// text makes an equal record the current one, and the old one stale; a
/// removed id has no current record.
#[test]
fn only_the_version_ids_points_at_is_current() {
    let e = engine_with(ShingleKind::Word, 3, 0.8);
    put(&e, "x", DOC1);
    let old = e.get("x").unwrap();
    assert!(e.is_current(&old));
    put(&e, "x", DOC1);
    let new = e.get("x").unwrap();
    assert_eq!(old.shingles(), new.shingles());
    assert!(e.is_current(&new));
    assert!(!e.is_current(&old), "an equal record is not the same one");
    assert!(e.remove("x"));
    assert!(!e.is_current(&new));
}

#[test]
fn create_mode_refuses_existing_ids_and_upsert_replaces() {
    let e = engine_with(ShingleKind::Word, 3, 0.8);
    let doc = e.prepare(DOC1).unwrap();
    assert_eq!(
        e.insert(id("x"), &doc, None, WriteMode::Create),
        Ok(WriteOutcome::Created)
    );
    assert_eq!(
        e.insert(id("x"), &doc, None, WriteMode::Create),
        Err(EngineError::AlreadyExists(id("x")))
    );
    let doc3 = e.prepare(DOC3).unwrap();
    assert_eq!(
        e.insert(id("x"), &doc3, Some("{}".into()), WriteMode::Upsert),
        Ok(WriteOutcome::Replaced)
    );
    let r = e.get("x").unwrap();
    assert_eq!(r.shingles().len(), 5);
    assert_eq!(r.metadata(), Some("{}"));
    assert_eq!(e.len(), 1);
}

#[test]
fn remove_unindexes_and_frees_memory_accounting() {
    let e = engine_with(ShingleKind::Word, 3, 0.8);
    put(&e, "a", DOC1);
    put(&e, "b", DOC1);
    assert!(e.remove("a"));
    assert!(!e.remove("a"));
    let t = e.threshold(None).unwrap();
    assert!(e
        .similar_to_id("b", &Query::new(t, 10))
        .unwrap()
        .matches
        .is_empty());
    assert!(e.remove("b"));
    assert_eq!(e.lsh_bucket_count(), 0);
    let m = e.memory();
    assert_eq!((m.shingles_bytes, m.ids_bytes, m.metadata_bytes), (0, 0, 0));
}

#[test]
fn replaced_documents_leave_no_stale_matches() {
    let e = engine_with(ShingleKind::Word, 3, 0.8);
    put(&e, "q", DOC1);
    put(&e, "x", DOC1);
    put(&e, "x", DOC2); // now dissimilar
    let t = e.threshold(None).unwrap();
    assert!(e
        .similar_to_id("q", &Query::new(t, 10))
        .unwrap()
        .matches
        .is_empty());
    put(&e, "x", DOC1);
    assert_eq!(
        e.similar_to_id("q", &Query::new(t, 10))
            .unwrap()
            .matches
            .len(),
        1
    );
}

#[test]
fn thresholds_are_checked_against_the_tuning() {
    let e = engine_with(ShingleKind::Word, 3, 0.8);
    assert_eq!(e.threshold(None).unwrap().value(), 0.8);
    assert!(e.threshold(Some(0.9)).is_ok());
    assert!(e.threshold(Some(1.0)).is_ok());
    assert!(
        e.threshold(Some(0.79)).is_ok(),
        "0.79 still has recall ≥ 0.99 with (21, 6)"
    );
    assert!(matches!(
        e.threshold(Some(0.5)),
        Err(EngineError::ThresholdBelowTuned { .. })
    ));
    assert!(matches!(
        e.threshold(Some(0.0)),
        Err(EngineError::ThresholdOutOfRange(_))
    ));
    assert!(matches!(
        e.threshold(Some(1.01)),
        Err(EngineError::ThresholdOutOfRange(_))
    ));
    assert!(matches!(
        e.threshold(Some(f64::NAN)),
        Err(EngineError::ThresholdOutOfRange(_))
    ));
}

#[test]
fn empty_texts_are_refused() {
    let e = engine_with(ShingleKind::Word, 3, 0.8);
    assert_eq!(e.prepare(" ?! ...").unwrap_err(), TextError::Empty);
}

#[test]
fn candidate_cap_reports_truncation() {
    let e = Engine::new(
        EngineParams {
            index: IndexParams {
                max_candidates: 5,
                ..Default::default()
            },
            ..Default::default()
        }
        .validate()
        .unwrap(),
    );
    for i in 0..20 {
        put(&e, &format!("d{i}"), DOC1);
    }
    let t = e.threshold(None).unwrap();
    let out = e
        .similar_to(&e.prepare(DOC1).unwrap(), None, &Query::new(t, 100))
        .unwrap();
    assert!(out.truncated);
    assert_eq!(out.matches.len(), 5);
}

#[test]
fn restored_parts_rebuild_the_same_document() {
    let e = engine_with(ShingleKind::Word, 3, 0.8);
    let doc = e.prepare(DOC1).unwrap();
    let again = e
        .prepared_from_parts(
            doc.signature().into(),
            doc.shingles().to_vec(),
            Some(doc.selection().into()),
        )
        .unwrap();
    assert_eq!(again, doc);
    assert!(e
        .prepared_from_parts(vec![1; 3].into(), doc.shingles().to_vec(), None)
        .is_none());
    assert!(e
        .prepared_from_parts(doc.signature().into(), vec![3, 2], None)
        .is_none());
}

#[test]
fn concurrent_writers_and_readers_see_whole_documents() {
    // Writers flip ids between two texts while readers query; every
    // match a reader sees must carry the exact score of a real version.
    let e = Arc::new(engine_with(ShingleKind::Word, 1, 0.5));
    let a = "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10";
    let b = "w1 w2 w3 w4 w5 w6 w7 w8 x9 x10";
    put(&e, "probe", a);
    let valid: Vec<f64> = vec![1.0, 8.0 / 12.0];
    std::thread::scope(|s| {
        for w in 0..2 {
            let e = Arc::clone(&e);
            s.spawn(move || {
                for i in 0..2000 {
                    let key = format!("k{}", i % 50);
                    let text = if (i + w) % 2 == 0 { a } else { b };
                    if i % 7 == 0 {
                        e.remove(&key);
                    } else {
                        put(&e, &key, text);
                    }
                }
            });
        }
        for _ in 0..2 {
            let e = Arc::clone(&e);
            let valid = valid.clone();
            s.spawn(move || {
                let t = e.threshold(None).unwrap();
                for _ in 0..500 {
                    let out = e.similar_to_id("probe", &Query::new(t, 1000)).unwrap();
                    let mut seen = HashMap::new();
                    for m in &out.matches {
                        assert!(valid.contains(&m.jaccard), "{m:?}");
                        assert!(seen.insert(m.id.clone(), ()).is_none(), "duplicate {m:?}");
                    }
                }
            });
        }
    });
    // Afterwards the index agrees with brute force exactly.
    let t = e.threshold(None).unwrap();
    let out = e.similar_to_id("probe", &Query::new(t, 1000)).unwrap();
    let probe = e.get("probe").unwrap();
    let mut expected: Vec<(String, f64)> = e
        .records()
        .iter()
        .filter(|r| r.id().as_str() != "probe")
        .map(|r| {
            (
                r.id().to_string(),
                crate::jaccard::jaccard(probe.shingles(), r.shingles()),
            )
        })
        .filter(|(_, j)| *j >= 0.5)
        .collect();
    expected.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
    let got: Vec<(String, f64)> = out
        .matches
        .iter()
        .map(|m| (m.id.to_string(), m.jaccard))
        .collect();
    assert_eq!(got, expected);
    assert_eq!(e.docs.len(), e.len(), "no orphaned records");
}
