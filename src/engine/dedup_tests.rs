//! Whole-index scans and insert-if-unique against brute force.

use super::*;
use crate::jaccard;
use crate::testkit::{edit, numbered_words, random_words};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::ControlFlow;

fn engine() -> Engine {
    Engine::new(ValidParams::default())
}

/// The test kit's planted families, by id.
fn corpus(seed: u64, unrelated: usize, families: usize) -> BTreeMap<String, String> {
    crate::testkit::families(seed, unrelated, families)
        .into_iter()
        .collect()
}

fn load(e: &Engine, docs: &BTreeMap<String, String>) {
    for (id, text) in docs {
        let doc = e.prepare(text).unwrap();
        e.insert(DocId::parse(id).unwrap(), &doc, None, WriteMode::Create)
            .unwrap();
    }
}

/// Every pair with exact Jaccard ≥ t, by comparing all pairs.
fn brute_pairs(e: &Engine, t: f64) -> BTreeMap<(String, String), f64> {
    let records: Vec<_> = e.records();
    let mut out = BTreeMap::new();
    for (i, a) in records.iter().enumerate() {
        for b in &records[i + 1..] {
            let j = jaccard::overlap(a.shingles(), b.shingles()).jaccard();
            if j >= t {
                let (x, y) = if a.id() < b.id() { (a, b) } else { (b, a) };
                out.insert((x.id().to_string(), y.id().to_string()), j);
            }
        }
    }
    out
}

fn components(pairs: impl IntoIterator<Item = (String, String)>) -> BTreeSet<BTreeSet<String>> {
    let mut adj: HashMap<String, Vec<String>> = HashMap::new();
    for (a, b) in pairs {
        adj.entry(a.clone()).or_default().push(b.clone());
        adj.entry(b).or_default().push(a);
    }
    let mut seen = BTreeSet::new();
    let mut out = BTreeSet::new();
    let mut keys: Vec<_> = adj.keys().cloned().collect();
    keys.sort();
    for start in keys {
        if seen.contains(&start) {
            continue;
        }
        let mut comp = BTreeSet::new();
        let mut stack = vec![start];
        while let Some(x) = stack.pop() {
            if seen.insert(x.clone()) {
                comp.insert(x.clone());
                stack.extend(adj[&x].iter().cloned());
            }
        }
        out.insert(comp);
    }
    out
}

fn scanned_pairs(e: &Engine, t: Threshold) -> (BTreeMap<(String, String), f64>, ScanStats) {
    let mut out = BTreeMap::new();
    let stats = e.scan_pairs(t, None, &mut |edges| {
        for edge in edges {
            assert!(edge.a.id() < edge.b.id());
            let key = (edge.a.id().to_string(), edge.b.id().to_string());
            assert!(
                out.insert(key, edge.jaccard).is_none(),
                "pair reported twice"
            );
        }
        ControlFlow::Continue(())
    });
    (out, stats)
}

#[test]
fn groups_are_the_connected_components_of_brute_force_pairs() {
    let e = engine();
    let docs = corpus(7, 1500, 300);
    load(&e, &docs);
    let t = e.threshold(None).unwrap();
    let truth = brute_pairs(&e, t.value());
    let (found, stats) = scanned_pairs(&e, t);
    assert!(stats.complete);
    assert_eq!(stats.documents, docs.len());
    // Every reported pair is a true pair with its exact Jaccard.
    for (pair, j) in &found {
        assert_eq!(truth.get(pair), Some(j), "{pair:?}");
    }
    let recall = found.len() as f64 / truth.len() as f64;
    eprintln!(
        "pairs: {} true, {} found, recall {recall:.4}; candidates verified {}",
        truth.len(),
        found.len(),
        stats.candidates
    );
    assert!(truth.len() > 500, "the corpus plants enough pairs");
    assert!(recall >= 0.99, "recall {recall}");

    let groups = e.duplicate_groups(t, 2, None);
    let got: BTreeSet<BTreeSet<String>> = groups
        .groups
        .iter()
        .map(|g| {
            g.members
                .iter()
                .map(|m| m.record.id().to_string())
                .collect()
        })
        .collect();
    // Exactly the components of the pairs the scan found...
    assert_eq!(got, components(found.keys().cloned()));
    // ...and, but for pairs LSH missed, those of the brute-force pairs.
    let want = components(truth.keys().cloned());
    let exact = want.iter().filter(|c| got.contains(*c)).count();
    eprintln!(
        "components: {} true, {} reproduced exactly",
        want.len(),
        exact
    );
    assert!(exact as f64 >= 0.99 * want.len() as f64);
    for g in &got {
        assert!(
            want.iter().any(|w| g.is_subset(w)),
            "{g:?} spans components"
        );
    }
    // Chains make components whose ends are below the threshold.
    assert!(want.iter().any(|c| {
        let v: Vec<_> = c.iter().collect();
        v.iter().enumerate().any(|(i, a)| {
            v[i + 1..]
                .iter()
                .any(|b| !truth.contains_key(&((*a).clone(), (*b).clone())))
        })
    }));

    // Group shape: sorted members, ordered groups, best matches verified.
    assert_eq!(groups.members, got.iter().map(BTreeSet::len).sum::<usize>());
    assert_eq!(groups.redundant(), groups.members - groups.groups.len());
    for w in groups.groups.windows(2) {
        assert!(w[0].first_id() < w[1].first_id());
    }
    for g in &groups.groups {
        let ids: Vec<_> = g.members.iter().map(|m| m.record.id().clone()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        for m in &g.members {
            let (me, best) = (m.record.id().to_string(), m.best_match.id().to_string());
            assert!(ids.contains(m.best_match.id()));
            let key = if me < best {
                (me.clone(), best)
            } else {
                (best, me.clone())
            };
            assert_eq!(found.get(&key), Some(&m.jaccard));
            // No found neighbour beats the best match.
            let top = found
                .iter()
                .filter(|((a, b), _)| *a == me || *b == me)
                .map(|(_, j)| *j)
                .fold(0.0, f64::max);
            assert_eq!(m.jaccard, top);
        }
    }
}

#[test]
fn min_size_and_a_higher_threshold_filter_groups() {
    let e = engine();
    load(&e, &corpus(3, 200, 60));
    let t = e.threshold(None).unwrap();
    let all = e.duplicate_groups(t, 2, None);
    let big = e.duplicate_groups(t, 4, None);
    assert_eq!(
        big.groups.len(),
        all.groups.iter().filter(|g| g.len() >= 4).count()
    );
    let strict = e.duplicate_groups(e.threshold(Some(0.95)).unwrap(), 2, None);
    for g in &strict.groups {
        assert!(g.members.iter().all(|m| m.jaccard >= 0.95));
    }
    assert!(strict.members <= all.members);
    // Keyset paging: the position after a group's first id is the next group.
    for (i, g) in all.groups.iter().enumerate() {
        assert_eq!(all.position_after(g.first_id().as_bytes()), i + 1);
    }
    assert_eq!(all.position_after(b""), 0);
}

#[test]
fn a_sink_that_breaks_stops_the_scan() {
    let e = engine();
    load(&e, &corpus(5, 3000, 400));
    let t = e.threshold(None).unwrap();
    let mut chunks = 0;
    let stats = e.scan_pairs(t, None, &mut |_| {
        chunks += 1;
        ControlFlow::Break(())
    });
    assert_eq!(chunks, 1);
    assert!(!stats.complete);
}

#[test]
fn scans_report_progress_up_to_every_slot() {
    let e = engine();
    load(&e, &corpus(9, 2500, 10));
    let seen = std::sync::atomic::AtomicUsize::new(0);
    let report = |done: usize, total: usize| {
        assert!(done <= total);
        seen.fetch_max(done, Ordering::Relaxed);
    };
    e.duplicate_groups(e.threshold(None).unwrap(), 2, Some(&report));
    assert_eq!(seen.into_inner(), e.slot_span());
}

#[test]
fn deleted_and_replaced_documents_leave_the_groups() {
    let e = engine();
    let text = numbered_words(&random_words(&mut StdRng::seed_from_u64(1), 120, 1000));
    for id in ["a", "b", "c"] {
        let doc = e.prepare(&text).unwrap();
        e.insert(DocId::parse(id).unwrap(), &doc, None, WriteMode::Create)
            .unwrap();
    }
    let t = e.threshold(None).unwrap();
    assert_eq!(e.duplicate_groups(t, 2, None).members, 3);
    e.remove("a");
    let other = e
        .prepare("something else entirely, not near the others at all")
        .unwrap();
    e.insert(DocId::parse("b").unwrap(), &other, None, WriteMode::Upsert)
        .unwrap();
    let g = e.duplicate_groups(t, 2, None);
    assert_eq!(g.groups.len(), 0);
}

#[test]
fn concurrent_near_identical_if_unique_inserts_store_exactly_one() {
    // Rounds of 4 threads released together by a barrier, each submitting a
    // different one-word variant of the round's text, plus an unrelated
    // document that must always get in. Without the stripe locks some rounds
    // store two variants (checked by hand: remove the locks and this fails).
    let e = Arc::new(engine());
    let t = e.threshold(None).unwrap();
    let threads = 4;
    let rounds = 150;
    let barrier = Arc::new(std::sync::Barrier::new(threads));
    let workers: Vec<_> = (0..threads)
        .map(|th| {
            let (e, barrier) = (Arc::clone(&e), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(100 + th as u64);
                let mut inserted = vec![0usize; rounds];
                for (round, count) in inserted.iter_mut().enumerate() {
                    let mut variant =
                        random_words(&mut StdRng::seed_from_u64(round as u64), 120, 50_000);
                    edit(&mut rng, &mut variant, 1, 50_000);
                    let doc = e.prepare(&numbered_words(&variant)).unwrap();
                    let id = DocId::parse(&format!("dup-{round}-{th}")).unwrap();
                    barrier.wait();
                    if let UniqueOutcome::Inserted(_) = e
                        .insert_if_unique(id, &doc, None, None, &Query::new(t, 5), &NoJournal)
                        .unwrap()
                    {
                        *count += 1;
                    }
                }
                let own = random_words(&mut rng, 120, 1_000_000);
                let doc = e.prepare(&numbered_words(&own)).unwrap();
                let id = DocId::parse(&format!("own-{th}")).unwrap();
                let out = e
                    .insert_if_unique(id, &doc, None, None, &Query::new(t, 5), &NoJournal)
                    .unwrap();
                assert!(matches!(out, UniqueOutcome::Inserted(_)));
                inserted
            })
        })
        .collect();
    let mut per_round = vec![0usize; rounds];
    for w in workers {
        for (total, n) in per_round.iter_mut().zip(w.join().unwrap()) {
            *total += n;
        }
    }
    let doubles = per_round.iter().filter(|&&n| n != 1).count();
    assert_eq!(doubles, 0, "rounds not storing exactly one: {doubles}");
    assert_eq!(e.len(), rounds + threads);
}

#[test]
fn if_unique_reports_the_duplicates_and_an_existing_id() {
    let e = engine();
    let text = numbered_words(&random_words(&mut StdRng::seed_from_u64(2), 100, 1000));
    let doc = e.prepare(&text).unwrap();
    let t = e.threshold(None).unwrap();
    let id = |s: &str| DocId::parse(s).unwrap();
    assert!(matches!(
        e.insert_if_unique(id("a"), &doc, None, None, &Query::new(t, 10), &NoJournal),
        Ok(UniqueOutcome::Inserted(_))
    ));
    let Ok(UniqueOutcome::Duplicate(q)) =
        e.insert_if_unique(id("b"), &doc, None, None, &Query::new(t, 10), &NoJournal)
    else {
        panic!("expected a duplicate");
    };
    assert_eq!(q.matches.len(), 1);
    assert_eq!(q.matches[0].id.as_str(), "a");
    assert_eq!(q.matches[0].jaccard, 1.0);
    assert!(e.get("b").is_none());
    let other = e
        .prepare("a different text about other things entirely")
        .unwrap();
    assert_eq!(
        e.insert_if_unique(id("a"), &other, None, None, &Query::new(t, 10), &NoJournal),
        Err(EngineError::AlreadyExists(id("a")))
    );
}

/// The pairs of a scan with `except`, and the scan's stats.
fn scanned_except(
    e: &Engine,
    t: Threshold,
    except: Option<&ExcludedPairs>,
) -> (BTreeSet<(String, String)>, ScanStats) {
    let mut out = BTreeSet::new();
    let stats = e.scan_pairs_filtered(t, Measure::Jaccard, None, except, None, &mut |edges| {
        for edge in edges {
            out.insert((edge.a.id().to_string(), edge.b.id().to_string()));
        }
        ControlFlow::Continue(())
    });
    (out, stats)
}

#[test]
fn excluded_pairs_are_no_edges_of_the_scan_or_the_groups() {
    let e = engine();
    load(&e, &corpus(46, 40, 12));
    let t = e.threshold(None).unwrap();
    let (all, plain) = scanned_except(&e, t, None);
    assert!(
        all.len() >= 12,
        "the planted families pair up: {}",
        all.len()
    );
    assert_eq!(plain.excluded, 0);
    // Every third pair judged not a duplicate (and one pair no scan finds).
    let judged: Vec<(String, String)> = all.iter().step_by(3).cloned().collect();
    let except = ExcludedPairs::new(
        judged
            .iter()
            .map(|(a, b)| (b.as_str(), a.as_str()))
            .chain([("nobody", "nothing")]),
    );
    let (kept, stats) = scanned_except(&e, t, Some(&except));
    let expected: BTreeSet<_> = all
        .difference(&judged.iter().cloned().collect())
        .cloned()
        .collect();
    assert_eq!(kept, expected);
    assert_eq!(stats.excluded, judged.len());
    assert_eq!(stats.pairs, kept.len());
    // The groups are the components of the pairs left.
    let groups = e.duplicate_groups_filtered(t, Measure::Jaccard, None, Some(&except), 2, None);
    let got: BTreeSet<BTreeSet<String>> = groups
        .groups
        .iter()
        .map(|g| {
            g.members
                .iter()
                .map(|m| m.record.id().to_string())
                .collect()
        })
        .collect();
    assert_eq!(got, components(kept.iter().cloned()));
    assert_eq!(groups.stats.excluded, judged.len());
    // Without the exclusion, the groups of every pair.
    let whole = e.duplicate_groups_filtered(t, Measure::Jaccard, None, None, 2, None);
    let whole: BTreeSet<BTreeSet<String>> = whole
        .groups
        .iter()
        .map(|g| {
            g.members
                .iter()
                .map(|m| m.record.id().to_string())
                .collect()
        })
        .collect();
    assert_eq!(whole, components(all.iter().cloned()));
}

#[test]
fn if_unique_does_not_count_the_documents_it_ignores_and_names_only_the_others() {
    let e = engine();
    let mut words = random_words(&mut StdRng::seed_from_u64(46), 100, 1000);
    let text = format!(
        "Offre d’emploi à Zürich, 3 200 £ — {}",
        numbered_words(&words)
    );
    edit(&mut StdRng::seed_from_u64(7), &mut words, 1, 1000);
    let variant = format!(
        "Offre d’emploi à Zürich, 3 200 £ — {}",
        numbered_words(&words)
    );
    let t = e.threshold(None).unwrap();
    let id = |s: &str| DocId::parse(s).unwrap();
    for (name, body) in [("annonce-a", &text), ("annonce-b", &variant)] {
        let doc = e.prepare(body).unwrap();
        e.insert(id(name), &doc, None, WriteMode::Create).unwrap();
    }
    let doc = e.prepare(&text).unwrap();
    let judged = |ids: &[&str]| ExcludedPairs::new(ids.iter().map(|other| ("новая", *other)));
    // The best match ignored, with a limit of one: the other still refuses,
    // and is the one named.
    let one = judged(&["annonce-a"]);
    let q = Query::new(t, 1).ignoring(one.partners("новая"));
    let Ok(UniqueOutcome::Duplicate(found)) =
        e.insert_if_unique(id("новая"), &doc, None, None, &q, &NoJournal)
    else {
        panic!("annonce-b still matches");
    };
    let named: Vec<&str> = found.matches.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(named, ["annonce-b"]);
    assert_eq!(found.ignored, 1);
    assert!(e.get("новая").is_none());
    // Both ignored: stored.
    let both = judged(&["annonce-b", "annonce-a"]);
    let q = Query::new(t, 10).ignoring(both.partners("новая"));
    assert_eq!(
        e.insert_if_unique(id("новая"), &doc, None, None, &q, &NoJournal),
        Ok(UniqueOutcome::Inserted(UniqueInsert { seq: 0, ignored: 2 }))
    );
    assert!(e.get("новая").is_some());
    // Nothing ignored: the same text is refused, naming all three.
    let Ok(UniqueOutcome::Duplicate(found)) = e.insert_if_unique(
        id("encore"),
        &doc,
        None,
        None,
        &Query::new(t, 10).ignoring(&[]),
        &NoJournal,
    ) else {
        panic!("a duplicate");
    };
    assert_eq!((found.matches.len(), found.ignored), (3, 0));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// On small random corpora with planted families, the scan reports each
    /// brute-force pair at most once with its exact value, and nothing else.
    #[test]
    fn scanned_pairs_are_exact_brute_force_pairs(seed in any::<u64>(), unrelated in 0usize..60, families in 0usize..15) {
        let e = engine();
        load(&e, &corpus(seed, unrelated, families));
        let t = e.threshold(None).unwrap();
        let truth = brute_pairs(&e, t.value());
        let (found, _) = scanned_pairs(&e, t);
        for (pair, j) in &found {
            prop_assert_eq!(truth.get(pair), Some(j));
        }
        prop_assert!(found.len() + 2 >= truth.len() * 9 / 10);
    }
}
