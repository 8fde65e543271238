//! Containment queries, passage lookups and containment pairs against
//! brute force on generated corpora.

use super::*;
use crate::jaccard;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn engine(passages: bool) -> Engine {
    engine_on(passages, Arc::new(SystemClock))
}

fn engine_on(passages: bool, clock: Arc<dyn Clock>) -> Engine {
    Engine::with_clock(
        EngineParams {
            index: IndexParams {
                passage_index: passages,
                ..Default::default()
            },
            ..Default::default()
        }
        .validate()
        .unwrap(),
        clock,
    )
}

fn id(s: &str) -> DocId {
    DocId::parse(s).unwrap()
}

/// A text of `n` words drawn from a vocabulary of `vocab` words.
fn words(seed: u64, n: usize, vocab: u64) -> Vec<String> {
    let mut state = seed;
    (0..n)
        .map(|_| format!("w{}", crate::minhash::splitmix64(&mut state) % vocab))
        .collect()
}

fn put(e: &Engine, key: &str, text: &str) {
    let doc = e.prepare(text).unwrap();
    e.insert(id(key), &doc, None, WriteMode::Upsert).unwrap();
}

/// Every stored document whose exact score by `measure` against `query`
/// is at least `t`, with the score.
fn brute_force(e: &Engine, query: &[u32], measure: Measure, t: f64) -> BTreeMap<String, f64> {
    e.records()
        .into_iter()
        .filter_map(|r| {
            let i = jaccard::overlap(query, r.shingles()).intersection as f64;
            let (q, d) = (query.len() as f64, r.shingles().len() as f64);
            let score = match measure {
                Measure::QueryInStored => i / q,
                Measure::StoredInQuery => i / d,
                Measure::Containment => (i / q).max(i / d),
                Measure::Jaccard => i / (q + d - i),
            };
            (score >= t).then(|| (r.id().to_string(), score))
        })
        .collect()
}

fn query(e: &Engine, measure: Measure, t: f64) -> Query {
    Query::new(
        e.threshold_for(measure, crate::engine::Score::Raw, Some(t))
            .unwrap(),
        1000,
    )
    .measure(measure)
}

#[test]
fn a_containment_query_needs_the_passage_index() {
    let e = engine(false);
    put(&e, "a", &words(1, 100, 500).join(" "));
    let doc = e.prepare(&words(1, 50, 500).join(" ")).unwrap();
    let q = query(&e, Measure::QueryInStored, 0.9);
    assert_eq!(
        e.similar_to(&doc, None, &q),
        Err(EngineError::PassageIndexOff("query_in_stored"))
    );
    // Switched on, it is built from the stored records.
    e.set_passage_index(true);
    let found = e.similar_to(&doc, None, &q).unwrap();
    assert_eq!(found.matches.len(), 1);
    assert_eq!(found.matches[0].query_in_stored, 1.0);
    e.set_passage_index(false);
    assert_eq!(e.passage_keys(), 0);
}

#[test]
fn an_excerpt_and_an_embedding_are_found_in_both_directions() {
    let e = engine(true);
    let article = words(7, 400, 3000);
    for i in 0..50 {
        put(
            &e,
            &format!("other{i}"),
            &words(100 + i, 300, 3000).join(" "),
        );
    }
    put(&e, "article", &article.join(" "));
    // An excerpt: a third of the article.
    let excerpt = article[100..240].join(" ");
    let doc = e.prepare(&excerpt).unwrap();
    let found = e
        .similar_to(&doc, None, &query(&e, Measure::QueryInStored, 0.9))
        .unwrap();
    assert_eq!(result_ids(&found), vec!["article"]);
    let m = &found.matches[0];
    assert_eq!(m.query_in_stored, 1.0);
    assert!(
        m.jaccard < 0.5,
        "an excerpt is far below any Jaccard threshold"
    );
    // Jaccard at the index's threshold does not find it.
    let by_jaccard = e
        .similar_to(&doc, None, &Query::new(e.threshold(None).unwrap(), 10))
        .unwrap();
    assert!(by_jaccard.matches.is_empty());
    // A new text that embeds the stored article.
    let mut embedding = words(999, 300, 3000);
    embedding.extend(article.iter().cloned());
    embedding.extend(words(998, 300, 3000));
    let doc = e.prepare(&embedding.join(" ")).unwrap();
    let found = e
        .similar_to(&doc, None, &query(&e, Measure::StoredInQuery, 0.95))
        .unwrap();
    assert_eq!(result_ids(&found), vec!["article"]);
    assert_eq!(found.matches[0].stored_in_query, 1.0);
    // By id: the stored excerpt finds its article.
    put(&e, "excerpt", &excerpt);
    let found = e
        .similar_to_id("excerpt", &query(&e, Measure::QueryInStored, 0.9))
        .unwrap();
    assert_eq!(result_ids(&found), vec!["article"]);
    let found = e
        .similar_to_id("article", &query(&e, Measure::StoredInQuery, 0.9))
        .unwrap();
    assert_eq!(result_ids(&found), vec!["excerpt"]);
}

#[test]
fn queries_by_id_equal_brute_force_when_the_index_is_built_at_once_and_grown_one_by_one() {
    // Half the documents stored before the index is switched on (built in
    // bulk from the records), half after (one by one); excerpts of some,
    // and documents that share no passage with anyone (answered without a
    // lookup). Every measure by id equals brute force over every pair.
    let e = engine(false);
    let mut texts: Vec<(String, Vec<String>)> = Vec::new();
    for i in 0..40u64 {
        let article = words(500 + i, 200, 4000);
        if i % 4 == 0 {
            let excerpt = article[40..140].to_vec();
            texts.push((format!("x{i}"), excerpt));
        }
        texts.push((format!("a{i}"), article));
    }
    let (before, after) = texts.split_at(texts.len() / 2);
    for (id, w) in before {
        put(&e, id, &w.join(" "));
    }
    e.set_passage_index(true);
    for (id, w) in after {
        put(&e, id, &w.join(" "));
    }
    let sets: Vec<(String, Vec<u32>)> = texts
        .iter()
        .map(|(id, w)| {
            (
                id.clone(),
                e.prepare(&w.join(" ")).unwrap().shingles().to_vec(),
            )
        })
        .collect();
    let inter = |a: &[u32], b: &[u32]| a.iter().filter(|x| b.binary_search(x).is_ok()).count();
    for measure in [
        Measure::QueryInStored,
        Measure::StoredInQuery,
        Measure::Containment,
    ] {
        let q = query(&e, measure, 0.9);
        for (id, mine) in &sets {
            let mut want: Vec<String> = sets
                .iter()
                .filter(|(other, theirs)| {
                    let i = inter(mine, theirs) as f64;
                    let (qs, ds) = (i / mine.len() as f64, i / theirs.len() as f64);
                    other != id
                        && match measure {
                            Measure::QueryInStored => qs >= 0.9,
                            Measure::StoredInQuery => ds >= 0.9,
                            _ => qs >= 0.9 || ds >= 0.9,
                        }
                })
                .map(|(other, _)| other.clone())
                .collect();
            want.sort();
            let mut got = result_ids(&e.similar_to_id(id, &q).unwrap());
            got.sort();
            assert_eq!(got, want, "{id} by {measure:?}");
        }
    }
}

fn result_ids(q: &QueryOutcome) -> Vec<String> {
    q.matches.iter().map(|m| m.id.to_string()).collect()
}

#[test]
fn deletes_replaces_and_restores_keep_the_index_exact() {
    let e = engine(true);
    let article = words(3, 300, 2000);
    put(&e, "a", &article.join(" "));
    let excerpt = e.prepare(&article[50..150].join(" ")).unwrap();
    let q = query(&e, Measure::QueryInStored, 0.9);
    assert_eq!(
        result_ids(&e.similar_to(&excerpt, None, &q).unwrap()),
        ["a"]
    );
    // Replaced by another text: gone from the answer.
    put(&e, "a", &words(4, 300, 2000).join(" "));
    assert!(e.similar_to(&excerpt, None, &q).unwrap().matches.is_empty());
    put(&e, "b", &article.join(" "));
    assert_eq!(
        result_ids(&e.similar_to(&excerpt, None, &q).unwrap()),
        ["b"]
    );
    assert!(e.remove("b"));
    assert!(e.similar_to(&excerpt, None, &q).unwrap().matches.is_empty());
    // A bulk restore indexes the passages of what it loads.
    put(&e, "c", &article.join(" "));
    let restored = engine(true);
    let mut restore = restored.start_restore();
    restore.push(
        e.records()
            .iter()
            .map(|r| {
                Record::with_selection(
                    r.id().clone(),
                    None,
                    r.stamp(),
                    r.signature(),
                    r.shingles(),
                    r.selection(),
                )
            })
            .collect(),
    );
    restore.finish();
    assert_eq!(
        result_ids(&restored.similar_to(&excerpt, None, &q).unwrap()),
        ["c"]
    );
    assert_eq!(restored.passage_keys(), e.passage_keys());
}

#[test]
fn a_common_fingerprint_is_skipped_and_reported() {
    let e = Engine::new(
        EngineParams {
            index: IndexParams {
                passage_index: true,
                common_fingerprint_docs: 5,
                ..Default::default()
            },
            ..Default::default()
        }
        .validate()
        .unwrap(),
    );
    let footer = words(5, 40, 100_000).join(" ");
    for i in 0..20 {
        put(
            &e,
            &format!("d{i}"),
            &format!("{} {footer}", words(i + 10, 60, 100_000).join(" ")),
        );
    }
    let doc = e.prepare(&footer).unwrap();
    let found = e
        .similar_to(&doc, None, &query(&e, Measure::QueryInStored, 0.9))
        .unwrap();
    let work = found.passages.unwrap();
    assert!(work.common >= 1, "{work:?}");
    assert!(work.common_docs.iter().all(|&n| n == 20));
    // Every document holds the footer: the common fingerprints count as
    // shared, so they are still candidates through the rest... or, when
    // the footer is all the query has, none is read at all (bounded work).
    assert!(found.candidates <= 20);
}

#[test]
fn passage_lookup_finds_a_quote_and_measures_its_run() {
    let e = engine(true);
    let article = words(11, 400, 5000);
    put(&e, "source", &article.join(" "));
    for i in 0..30 {
        put(&e, &format!("n{i}"), &words(200 + i, 300, 5000).join(" "));
    }
    // A 25-word quote inside a new text.
    let quote = article[200..225].join(" ");
    let passage = e
        .passage(&format!("as he said, {quote}, and left"))
        .unwrap();
    let found = e.passages(&passage, e.passage_window(), 10, None).unwrap();
    assert_eq!(found.hits.len(), 1);
    let hit = &found.hits[0];
    assert_eq!(hit.id.as_str(), "source");
    assert_eq!(hit.longest_run, 23, "25 words are 23 word 3-shingles");
    // A run longer than any shared one finds nothing.
    assert!(e.passages(&passage, 24, 10, None).unwrap().hits.is_empty());
}

/// Pairs as (lower id, higher id) → the larger containment.
type Pairs = BTreeMap<(String, String), f64>;

/// An edge as (lower id, higher id) → its larger containment.
fn pair_of(edge: &Edge) -> ((String, String), f64) {
    (
        (edge.a.id().to_string(), edge.b.id().to_string()),
        edge.containment(),
    )
}

/// Every pair the containment scan at `t` reports, what brute force finds,
/// and the scan's counts.
fn scan_and_brute_force(e: &Engine, t: f64) -> (Pairs, Pairs, ScanStats) {
    let threshold = e
        .threshold_for(Measure::Containment, crate::engine::Score::Raw, Some(t))
        .unwrap();
    let mut got = BTreeMap::new();
    let stats = e.scan_pairs_by(threshold, Measure::Containment, None, &mut |edges| {
        got.extend(edges.iter().map(pair_of));
        std::ops::ControlFlow::Continue(())
    });
    (got, brute_containment_pairs(e, t), stats)
}

/// Every pair of stored documents with either inside the other at ≥ `t`,
/// by brute force.
fn brute_containment_pairs(e: &Engine, t: f64) -> Pairs {
    let mut want = BTreeMap::new();
    let records = e.records();
    for a in &records {
        for b in &records {
            if a.id() >= b.id() {
                continue;
            }
            let i = jaccard::overlap(a.shingles(), b.shingles()).intersection as f64;
            let c = (i / a.shingles().len() as f64).max(i / b.shingles().len() as f64);
            if c >= t {
                want.insert((a.id().to_string(), b.id().to_string()), c);
            }
        }
    }
    want
}

#[test]
fn containment_pairs_equal_brute_force() {
    let e = engine(true);
    let mut texts = Vec::new();
    for i in 0..40u64 {
        let base = words(i, 200, 4000);
        texts.push((format!("base{i}"), base.join(" ")));
        if i % 4 == 0 {
            texts.push((format!("part{i}"), base[20..120].join(" ")));
        }
    }
    for (k, t) in &texts {
        put(&e, k, t);
    }
    let (got, want, _) = scan_and_brute_force(&e, 0.9);
    assert_eq!(got, want);
    assert_eq!(got.len(), 10);
    let t = e
        .threshold_for(Measure::Containment, crate::engine::Score::Raw, Some(0.9))
        .unwrap();
    let groups = e.duplicate_groups_by(t, Measure::Containment, 2, None);
    assert_eq!(groups.groups.len(), 10);
    assert!(groups
        .groups
        .iter()
        .all(|g| g.members[0].containment == 1.0));
}

/// A containment scan counts the documents a Jaccard scan counts: the
/// live ones, not a removed one or the old version of a replaced one (it
/// reads a document's record only when the document has candidates, and
/// counts the others from the slot table), and still equals brute force.
#[test]
fn containment_scans_count_the_documents_a_jaccard_scan_counts() {
    let clock = Arc::new(ManualClock::default());
    let e = engine_on(true, Arc::clone(&clock) as Arc<dyn Clock>);
    for i in 0..30u64 {
        let base = words(i, 150, 4000);
        put(&e, &format!("base{i}"), &base.join(" "));
        if i % 3 == 0 {
            put(&e, &format!("part{i}"), &base[10..110].join(" "));
        }
    }
    put(&e, "base4", &words(400, 150, 4000).join(" "));
    assert!(e.remove("base5") && e.remove("part6"));
    let (got, want, stats) = scan_and_brute_force(&e, 0.9);
    assert_eq!(got, want);
    assert_eq!(got.len(), 9, "{got:?}");
    let jaccard = e.scan_pairs(e.threshold(None).unwrap(), None, &mut |_| {
        std::ops::ControlFlow::Continue(())
    });
    assert_eq!((stats.documents, jaccard.documents), (38, 38));
    // Past a retention TTL every document has expired (none purged yet):
    // both scans count none and pair none, and count them all again once
    // the TTL is lifted (a scan reads records for this only while some can
    // expire).
    e.set_retention(Some(std::time::Duration::from_secs(60)));
    clock.advance(std::time::Duration::from_secs(61));
    let (expired, _, stats) = scan_and_brute_force(&e, 0.9);
    let jaccard = e.scan_pairs(e.threshold(None).unwrap(), None, &mut |_| {
        std::ops::ControlFlow::Continue(())
    });
    assert!(expired.is_empty(), "{expired:?}");
    assert_eq!((stats.documents, jaccard.documents), (0, 0));
    e.set_retention(None);
    let (again, _, stats) = scan_and_brute_force(&e, 0.9);
    assert_eq!((again, stats.documents), (got, 38));
}

/// The scan reads nothing for a document whose lists shared with no one
/// are enough for the pigeonhole (too few of its fingerprints are held by
/// anyone else for any pair to pass the share rule). Each pair is found
/// from its side with fewer fingerprints, so a long source scanned first
/// (its slot lower) still pairs with a short excerpt stored after it, which
/// holds far fewer fingerprints than the source needs on its own side; and
/// documents that share a passage too short to matter are skipped without a
/// pair being lost.
#[test]
fn the_scan_skips_by_shared_counts_and_still_equals_brute_force() {
    let e = engine(true);
    let common = words(999, 12, 4000);
    let mut texts = Vec::new();
    for i in 0..30u64 {
        let mut base = words(i, 400, 4000);
        // Every document shares one 12-word passage with every other.
        base.splice(100..100, common.iter().cloned());
        texts.push((format!("base{i:02}"), base.join(" ")));
        if i % 3 == 0 {
            texts.push((format!("part{i:02}"), base[300..360].join(" ")));
        }
    }
    for (k, t) in &texts {
        put(&e, k, t);
    }
    let (got, want, stats) = scan_and_brute_force(&e, 0.9);
    assert_eq!(got.len(), 10, "{got:?}");
    assert_eq!(got, want);
    // Only the ten sources and their excerpts were verified: the shared
    // 12-word passage gives nobody enough to be a candidate.
    assert_eq!(stats.candidates, 10);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Every answer is exact (its scores equal brute force's) and holds
    /// every planted excerpt and embedding of at least a window of
    /// shingles, whatever surrounds them.
    #[test]
    fn answers_are_exact_and_hold_every_planted_passage(
        seed in any::<u64>(),
        start in 0usize..150,
        len in 22usize..150,
        vocab in 50u64..5000,
        measure_at in 0usize..3,
    ) {
        let measure = [Measure::QueryInStored, Measure::StoredInQuery, Measure::Containment][measure_at];
        let e = engine(true);
        let source = words(seed, 300, vocab);
        put(&e, "source", &source.join(" "));
        for i in 0..20 {
            put(&e, &format!("n{i}"), &words(seed ^ (i + 1), 120 + 10 * i as usize, vocab).join(" "));
        }
        let excerpt = source[start..start + len].to_vec();
        let text = match measure {
            // The query is inside the source.
            Measure::QueryInStored => excerpt.join(" "),
            // The query embeds the source (and more).
            _ => [words(seed.wrapping_mul(3), 40, vocab), source.clone(), words(seed.wrapping_mul(5), 40, vocab)].concat().join(" "),
        };
        let doc = e.prepare(&text).unwrap();
        let t = 0.95;
        let found = e.similar_to(&doc, None, &query(&e, measure, t)).unwrap();
        let truth = brute_force(&e, doc.shingles(), measure, t);
        let got: BTreeMap<String, f64> = found
            .matches
            .iter()
            .map(|m| (m.id.to_string(), measure.score(m)))
            .collect();
        for (id, score) in &got {
            prop_assert_eq!(truth.get(id), Some(score), "{} is not a true match", id);
        }
        prop_assert!(got.contains_key("source"), "the planted passage was missed: {:?}", truth);
        // Sorted by the measure, then id.
        for w in found.matches.windows(2) {
            prop_assert!(measure.score(&w[0]) > measure.score(&w[1])
                || (measure.score(&w[0]) == measure.score(&w[1]) && w[0].id < w[1].id));
        }
    }
}

proptest! {
    #[test]
    fn counting_slots_equals_sorting_them(slots in proptest::collection::vec(0u32..500, 0..2000)) {
        let mut got = super::passages::count_slots_for_tests(&slots);
        got.sort_unstable();
        let mut want: BTreeMap<u32, u32> = BTreeMap::new();
        for s in &slots {
            *want.entry(*s).or_default() += 1;
        }
        prop_assert_eq!(got, want.into_iter().collect::<Vec<_>>());
    }

    /// Counting lists of which a slot must be in `needed` (only the shortest
    /// `lists − needed + 1` adding slots, `empty` lists holding none): every
    /// slot in `needed` or more lists is found with its exact count, and
    /// every slot found has its exact count.
    #[test]
    fn counting_only_slots_that_can_reach_a_share_misses_none_that_do(
        lists in proptest::collection::vec(
            proptest::collection::btree_set(0u32..60, 1..40), 0..30),
        empty in 0usize..5,
        needed in 1usize..12,
    ) {
        let mut slots = Vec::new();
        let mut ends = Vec::new();
        for l in &lists {
            slots.extend(l.iter().copied());
            ends.push(slots.len() as u32);
        }
        let all = lists.len() + empty;
        let first = (all + 1).saturating_sub(needed).saturating_sub(empty);
        let got: BTreeMap<u32, u32> =
            super::passages::count_slots_needing_for_tests(&slots, &ends, first)
                .into_iter()
                .collect();
        let mut want: BTreeMap<u32, u32> = BTreeMap::new();
        for s in &slots {
            *want.entry(*s).or_default() += 1;
        }
        for (s, n) in &got {
            prop_assert_eq!(Some(n), want.get(s), "slot {} counted exactly", s);
        }
        for (s, n) in &want {
            if *n as usize >= needed {
                prop_assert!(got.contains_key(s), "slot {} in {} lists is found", s, n);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The containment scan (each pair from its side with fewer
    /// fingerprints, candidates by the pigeonhole bound, pruned list by
    /// list) equals brute force: sources with excerpts of any length of at
    /// least 60 words and from anywhere, embeddings, a passage every
    /// document shares (common past a random `common_fingerprint_docs`,
    /// above a family's size: a passage all of a family holds is not
    /// common), deletes and edits (a new slot each) after the writes.
    #[test]
    fn containment_pairs_equal_brute_force_on_random_families(
        seed in any::<u64>(),
        families in 1usize..8,
        unrelated in 0usize..12,
        common_at in 6usize..60,
        footer_words in 0usize..30,
        t_at in 0usize..2,
    ) {
        let e = random_families(seed, families, unrelated, common_at, footer_words);
        let t = [0.8, 0.9][t_at];
        let (got, want, _) = scan_and_brute_force(&e, t);
        prop_assert_eq!(got, want);
    }
}

/// A corpus of [`containment_pairs_equal_brute_force_on_random_families`]
/// in an engine: families of a source with excerpts and maybe an embedding,
/// unrelated texts, a footer every text ends with, then deletes and edits,
/// every text at least 60 words long.
fn random_families(
    seed: u64,
    families: usize,
    unrelated: usize,
    common_at: usize,
    footer_words: usize,
) -> Engine {
    let e = Engine::new(
        EngineParams {
            index: IndexParams {
                passage_index: true,
                common_fingerprint_docs: common_at,
                ..Default::default()
            },
            ..Default::default()
        }
        .validate()
        .unwrap(),
    );
    let footer = words(seed ^ 0xf00, footer_words, 3000);
    let mut state = seed;
    let mut next = |n: usize| (crate::minhash::splitmix64(&mut state) % n as u64) as usize;
    let mut texts: Vec<(String, Vec<String>)> = Vec::new();
    for f in 0..families {
        let len = 120 + next(250);
        let mut source = words(seed.wrapping_add(f as u64), len, 3000);
        source.extend(footer.iter().cloned());
        for x in 0..1 + next(3) {
            let n = 60 + next(len - 60);
            let at = next(len - n + 1);
            texts.push((format!("f{f}x{x}"), source[at..at + n].to_vec()));
        }
        if next(2) == 0 {
            let embedding = [
                words(seed ^ (f as u64 + 77), 10 + next(40), 3000),
                source.clone(),
            ]
            .concat();
            texts.push((format!("f{f}e"), embedding));
        }
        texts.push((format!("f{f}"), source));
    }
    for u in 0..unrelated {
        let mut text = words(seed ^ (u as u64 + 1000), 40 + next(300), 3000);
        text.extend(footer.iter().cloned());
        texts.push((format!("u{u}"), text));
    }
    for (k, t) in &texts {
        put(&e, k, &t.join(" "));
    }
    // Deletes and replaces move documents to new slots and empty old ones.
    let mut changed = Vec::new();
    for i in 0..texts.len() {
        if next(4) == 0 {
            changed.push((i, next(2) == 0));
        }
    }
    for (i, delete) in changed {
        let (k, t) = &texts[i];
        if delete {
            e.remove(k);
        } else {
            // An edit: its last fifth rewritten, its length kept (the share
            // rule is measured on texts of 60 words and more).
            let keep = t.len() - t.len() / 5;
            let edited = [
                t[..keep].to_vec(),
                words(seed ^ (i as u64 + 5000), t.len() - keep, 3000),
            ]
            .concat();
            put(&e, k, &edited.join(" "));
        }
    }
    e
}
