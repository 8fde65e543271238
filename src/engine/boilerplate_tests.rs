//! Document frequency, boilerplate and content scores against the test's
//! own computation on generated corpora: df counted from the records, the
//! rule applied by hand, content Jaccard by brute force.

use super::*;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

fn engine(bp: BoilerplateParams) -> Engine {
    Engine::new(
        EngineParams {
            index: IndexParams {
                passage_index: true,
                boilerplate: bp,
                ..Default::default()
            },
            ..Default::default()
        }
        .validate()
        .unwrap(),
    )
}

fn on() -> BoilerplateParams {
    BoilerplateParams {
        enabled: true,
        ..Default::default()
    }
}

fn id(s: &str) -> DocId {
    DocId::parse(s).unwrap()
}

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

/// df of every shingle, counted from the stored records.
fn brute_df(e: &Engine) -> HashMap<u32, u32> {
    let mut df = HashMap::new();
    for r in e.records() {
        for &x in r.shingles() {
            *df.entry(x).or_insert(0) += 1;
        }
    }
    df
}

/// The boilerplate rule applied by hand.
fn brute_rule<'a>(
    n: usize,
    p: &BoilerplateParams,
    df: &'a HashMap<u32, u32>,
    templates: &HashSet<u32>,
) -> impl Fn(u32) -> bool + 'a {
    let at = (n >= p.min_collection_docs)
        .then(|| ((p.share * n as f64).ceil() as u32).max(p.min_docs as u32));
    let templates = templates.clone();
    move |x| templates.contains(&x) || at.is_some_and(|a| df.get(&x).copied().unwrap_or(0) >= a)
}

fn content_jaccard(a: &[u32], b: &[u32], bp: &impl Fn(u32) -> bool) -> f64 {
    let a: BTreeSet<u32> = a.iter().copied().filter(|&x| !bp(x)).collect();
    let b: BTreeSet<u32> = b.iter().copied().filter(|&x| !bp(x)).collect();
    let i = a.intersection(&b).count();
    let u = a.len() + b.len() - i;
    if u == 0 {
        0.0
    } else {
        i as f64 / u as f64
    }
}

fn assert_df_exact(e: &Engine) {
    let df = brute_df(e);
    let mut all: Vec<u32> = df.keys().copied().collect();
    all.sort_unstable();
    let got = e.doc_frequencies(&all);
    for (x, n) in all.iter().zip(got) {
        assert_eq!(n, df[x], "df of {x}");
    }
    assert_eq!(
        e.distinct_shingles(),
        df.len(),
        "no shingle of a gone document is left"
    );
    assert_eq!(e.counted_docs(), e.records().len());
}

const FOOTERS: usize = 3;

fn footer(i: usize) -> String {
    words(900 + i as u64, 50, 400).join(" ")
}

#[test]
fn df_is_exact_through_writes_replaces_deletes_and_switches() {
    let e = engine(on());
    for i in 0..300 {
        let body = words(i, 40 + (i as usize % 60), 3000).join(" ");
        put(
            &e,
            &format!("d{i}"),
            &format!("{body} {}", footer(i as usize % FOOTERS)),
        );
    }
    assert_df_exact(&e);
    for i in 0..50 {
        put(&e, &format!("d{i}"), &words(10_000 + i, 30, 3000).join(" "));
    }
    for i in 250..300 {
        assert!(e.remove(&format!("d{i}")));
    }
    assert_df_exact(&e);
    e.set_boilerplate(false);
    assert_eq!(e.counted_docs(), 0);
    assert_eq!(e.distinct_shingles(), 0);
    put(&e, "while-off", "a text written while the counts are off");
    e.set_boilerplate(true);
    assert_df_exact(&e);
}

#[test]
fn df_is_exact_through_batches_and_a_switch_over_many_documents() {
    // Batches: the count tables grow under some (their new keys counted
    // first) and have room under others; more documents than a switch's
    // scatter task takes (4,096), so a switch on counts several chunks and
    // every group of shards from each record's cursor.
    let e = engine(on());
    let texts: Vec<(String, Prepared)> = (0..5_000u64)
        .map(|i| {
            let body = words(i, 12 + (i as usize % 20), 4_000).join(" ");
            let text = format!("{body} {}", footer(i as usize % FOOTERS));
            (format!("d{i}"), e.prepare(&text).unwrap())
        })
        .collect();
    for batch in texts.chunks(700) {
        super::tests::insert_batch(&e, batch.iter().map(|(key, doc)| (key.as_str(), doc)));
    }
    assert_df_exact(&e);
    e.set_boilerplate(false);
    e.set_boilerplate(true);
    assert_df_exact(&e);
    // The footers are held by a third of the documents each.
    let footer_shingle = e.prepare(&footer(0)).unwrap().shingles()[0];
    assert!(e.doc_frequencies(&[footer_shingle])[0] >= 5_000 / FOOTERS as u32);
}

#[test]
fn df_stays_exact_when_the_switch_races_writes() {
    let e = std::sync::Arc::new(engine(on()));
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let e = std::sync::Arc::clone(&e);
            s.spawn(move || {
                for i in 0..400u64 {
                    let key = format!("t{t}-{}", i % 120);
                    if i % 7 == 3 {
                        e.remove(&key);
                    } else {
                        put(&e, &key, &words(t * 1000 + i, 30, 500).join(" "));
                    }
                }
            });
        }
        let e = std::sync::Arc::clone(&e);
        s.spawn(move || {
            for i in 0..40 {
                e.set_boilerplate(i % 2 == 1);
                std::thread::yield_now();
            }
        });
    });
    e.set_boilerplate(true);
    assert_df_exact(&e);
}

#[test]
fn the_threshold_follows_share_min_docs_and_collection_size() {
    let p = BoilerplateParams {
        enabled: true,
        share: 0.05,
        min_docs: 10,
        min_collection_docs: 50,
    };
    assert_eq!(p.threshold_docs(49), None);
    assert_eq!(p.threshold_docs(50), Some(10));
    assert_eq!(p.threshold_docs(200), Some(10));
    assert_eq!(p.threshold_docs(201), Some(11));
    assert_eq!(p.threshold_docs(1_000_000), Some(50_000));
    assert!(BoilerplateParams {
        share: 0.0,
        ..p.clone()
    }
    .check()
    .is_err());
    assert!(BoilerplateParams {
        share: 1.5,
        ..p.clone()
    }
    .check()
    .is_err());
    assert!(BoilerplateParams {
        min_docs: 1,
        ..p.clone()
    }
    .check()
    .is_err());
    assert!(BoilerplateParams { share: 1.0, ..p }.check().is_ok());
}

/// Articles with one of three site footers, and reprints of some with
/// another site's footer and two words edited.
fn reprints(e: &Engine) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for i in 0..300u64 {
        let body = words(i, 120 + (i as usize % 80), 5000);
        put(
            e,
            &format!("a{i}"),
            &format!("{} {}", body.join(" "), footer(i as usize % FOOTERS)),
        );
        if i % 10 == 0 {
            let mut copy = body.clone();
            copy[5] = "edited".into();
            copy[body.len() / 2] = "changed".into();
            let key = format!("r{i}");
            put(
                e,
                &key,
                &format!("{} {}", copy.join(" "), footer((i as usize + 1) % FOOTERS)),
            );
            pairs.push((key, format!("a{i}")));
        }
    }
    pairs
}

#[test]
fn content_queries_equal_brute_force() {
    let e = engine(on());
    let pairs = reprints(&e);
    let df = brute_df(&e);
    let n = e.records().len();
    let rule = brute_rule(n, &e.boilerplate_params(), &df, &HashSet::new());
    let t = 0.8;
    let q = Query::new(
        e.threshold_for(Measure::Jaccard, Score::Content, Some(t))
            .unwrap(),
        1000,
    )
    .score(Score::Content);
    let mut raw_missed = 0;
    for (copy, original) in &pairs {
        let me = e.get(copy).unwrap();
        let want: BTreeMap<String, f64> = e
            .records()
            .into_iter()
            .filter(|r| r.id().as_str() != copy)
            .filter_map(|r| {
                let c = content_jaccard(me.shingles(), r.shingles(), &rule);
                (c >= t).then(|| (r.id().to_string(), c))
            })
            .collect();
        assert!(
            want.contains_key(original),
            "{copy}: the brute force finds its original"
        );
        let got: BTreeMap<String, f64> = e
            .similar_to_id(copy, &q)
            .unwrap()
            .matches
            .into_iter()
            .map(|m| (m.id.to_string(), m.content.unwrap().jaccard))
            .collect();
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{copy}"
        );
        for (k, v) in &got {
            assert!(
                (v - want[k]).abs() < 1e-12,
                "{copy} ~ {k}: {v} vs {}",
                want[k]
            );
        }
        let raw = crate::jaccard::overlap(me.shingles(), e.get(original).unwrap().shingles());
        raw_missed += usize::from(raw.jaccard() < t);
    }
    // The corpus is one where raw Jaccard misses what content finds.
    assert!(raw_missed > 0, "every reprint was found on raw scores too");
}

#[test]
fn raw_matches_carry_their_content_scores() {
    let e = engine(on());
    let pairs = reprints(&e);
    let df = brute_df(&e);
    let rule = brute_rule(
        e.records().len(),
        &e.boilerplate_params(),
        &df,
        &HashSet::new(),
    );
    // Raw containment: any threshold (the banding serves Jaccard ≥ 0.76).
    let q = Query::new(
        e.threshold_for(Measure::Containment, Score::Raw, Some(0.5))
            .unwrap(),
        10,
    )
    .measure(Measure::Containment);
    let (copy, _) = &pairs[0];
    let me = e.get(copy).unwrap();
    let found = e.similar_to_id(copy, &q).unwrap();
    assert!(!found.matches.is_empty());
    for m in found.matches {
        let other = e.get(m.id.as_str()).unwrap();
        let c = m.content.expect("content scores on every match");
        assert!(
            (c.jaccard - content_jaccard(me.shingles(), other.shingles(), &rule)).abs() < 1e-12
        );
        assert!(
            c.jaccard >= m.jaccard,
            "leaving the footers out never lowers it here"
        );
    }
}

/// 200 short posts of 15–30 words, each with one of three 55-word footers.
fn short_posts(e: &Engine) {
    for i in 0..200u64 {
        let body = words(50_000 + i, 15 + (i as usize % 16), 20_000);
        let foot = words(777 + i % 3, 55, 300).join(" ");
        put(e, &format!("p{i}"), &format!("{} {foot}", body.join(" ")));
    }
}

#[test]
fn a_shared_footer_makes_no_content_pairs() {
    let e = engine(on());
    short_posts(&e);
    let t = e
        .threshold_for(Measure::Jaccard, Score::Content, Some(0.5))
        .unwrap();
    let mut raw = 0;
    let records = e.records();
    for (i, a) in records.iter().enumerate() {
        for b in &records[i + 1..] {
            raw +=
                usize::from(crate::jaccard::overlap(a.shingles(), b.shingles()).jaccard() >= 0.5);
        }
    }
    assert!(
        raw > 100,
        "raw Jaccard pairs the posts by their footers ({raw})"
    );
    let mut content = Vec::new();
    e.scan_pairs_by(
        t,
        By::new(Measure::Jaccard, Score::Content),
        None,
        &mut |edges| {
            content.extend(edges);
            std::ops::ControlFlow::Continue(())
        },
    );
    assert!(content.is_empty(), "{} content pairs", content.len());
    let groups = e.duplicate_groups_by(t, By::new(Measure::Jaccard, Score::Content), 2, None);
    assert!(groups.groups.is_empty());
}

#[test]
fn content_pairs_equal_brute_force() {
    let e = engine(on());
    let pairs = reprints(&e);
    let df = brute_df(&e);
    let rule = brute_rule(
        e.records().len(),
        &e.boilerplate_params(),
        &df,
        &HashSet::new(),
    );
    let t = e
        .threshold_for(Measure::Jaccard, Score::Content, Some(0.8))
        .unwrap();
    let mut got = BTreeSet::new();
    e.scan_pairs_by(
        t,
        By::new(Measure::Jaccard, Score::Content),
        None,
        &mut |edges| {
            for edge in edges {
                let c = edge.content.unwrap();
                let want = content_jaccard(edge.a.shingles(), edge.b.shingles(), &rule);
                assert!((c.jaccard - want).abs() < 1e-12);
                got.insert((edge.a.id().to_string(), edge.b.id().to_string()));
            }
            std::ops::ControlFlow::Continue(())
        },
    );
    let records = e.records();
    let mut want = BTreeSet::new();
    for a in &records {
        for b in &records {
            if a.id() < b.id() && content_jaccard(a.shingles(), b.shingles(), &rule) >= 0.8 {
                want.insert((a.id().to_string(), b.id().to_string()));
            }
        }
    }
    assert_eq!(got, want);
    assert!(want.len() >= pairs.len());
}

#[test]
fn templates_are_boilerplate_in_a_collection_of_any_size() {
    let e = engine(on());
    let foot = footer(0);
    put(&e, "x", &format!("{} {foot}", words(1, 30, 9000).join(" ")));
    put(&e, "y", &format!("{} {foot}", words(2, 30, 9000).join(" ")));
    let q = Query::new(
        e.threshold_for(Measure::Containment, Score::Raw, Some(0.3))
            .unwrap(),
        10,
    )
    .measure(Measure::Containment);
    let before = e.similar_to_id("x", &q).unwrap();
    let c = before.matches[0].content.unwrap();
    assert_eq!(c.shared_boilerplate, 0, "two documents make nothing common");
    assert_eq!(c.jaccard, before.matches[0].jaccard);
    assert!(c.jaccard > 0.3);
    e.use_templates(&[Template {
        id: "footer".into(),
        text: foot.clone(),
        created_ms: 0,
    }]);
    let after = e.similar_to_id("x", &q).unwrap();
    let c = after.matches[0].content.unwrap();
    assert_eq!(c.jaccard, 0.0, "only the footer was shared");
    assert!(c.shared_boilerplate > 40);
    let templates: HashSet<u32> = e
        .prepare(&foot)
        .unwrap()
        .shingles()
        .iter()
        .copied()
        .collect();
    let df = brute_df(&e);
    let rule = brute_rule(2, &e.boilerplate_params(), &df, &templates);
    let (x, y) = (e.get("x").unwrap(), e.get("y").unwrap());
    assert_eq!(
        c.jaccard,
        content_jaccard(x.shingles(), y.shingles(), &rule)
    );
}

#[test]
fn content_queries_need_the_counts_and_the_passage_index() {
    let e = engine(BoilerplateParams::default());
    put(&e, "a", "some words to store here");
    let q = Query::new(
        e.threshold_for(Measure::Jaccard, Score::Content, Some(0.5))
            .unwrap(),
        10,
    )
    .score(Score::Content);
    assert!(matches!(
        e.similar_to_id("a", &q),
        Err(EngineError::BoilerplateOff)
    ));
    let e = Engine::new(
        EngineParams {
            index: IndexParams {
                boilerplate: on(),
                ..Default::default()
            },
            ..Default::default()
        }
        .validate()
        .unwrap(),
    );
    put(&e, "a", "some words to store here");
    assert!(matches!(
        e.similar_to_id("a", &q),
        Err(EngineError::PassageIndexOff(_))
    ));
}

#[test]
fn explain_marks_the_footer_on_both_sides() {
    let e = engine(on());
    short_posts(&e);
    let foot = words(777, 55, 300).join(" ");
    let a = format!("{} {foot}", words(1, 20, 20_000).join(" "));
    let b = format!("{} {foot}", words(2, 25, 20_000).join(" "));
    let df = brute_df(&e);
    let rule = brute_rule(
        e.records().len(),
        &e.boilerplate_params(),
        &df,
        &HashSet::new(),
    );
    let mask = |t: &str| -> Vec<bool> {
        e.passage(t)
            .unwrap()
            .ordered
            .iter()
            .map(|&x| rule(x))
            .collect()
    };
    let (ma, mb) = (mask(&a), mask(&b));
    let x = e.explain_marked(&a, &b, Some((&ma, &mb))).unwrap();
    for (text, side) in [(&a, &x.a), (&b, &x.b)] {
        let marked: String = side
            .segments
            .iter()
            .filter(|s| s.boilerplate)
            .map(|s| &text[s.range.0..s.range.1])
            .collect();
        assert_eq!(
            marked.trim(),
            foot,
            "the footer, and only it, is boilerplate"
        );
        let joined: String = side
            .segments
            .iter()
            .map(|s| &text[s.range.0..s.range.1])
            .collect();
        assert_eq!(&joined, text, "segments still concatenate to the text");
    }
}

/// Content scores as the definition reads: over the union, each shingle
/// classified by its frequency, the weights summed.
fn brute_scores(c: &Classifier, q: &[u32], d: &[u32], df: &HashMap<u32, u32>) -> ContentScores {
    let content = |x: u32| !c.is_boilerplate(x, df.get(&x).copied().unwrap_or(0));
    let weight = |x: u32| c.idf(df.get(&x).copied().unwrap_or(0));
    let qs: BTreeSet<u32> = q.iter().copied().collect();
    let ds: BTreeSet<u32> = d.iter().copied().collect();
    let qc = qs.iter().filter(|&&x| content(x)).count();
    let dc = ds.iter().filter(|&&x| content(x)).count();
    let shared: Vec<u32> = qs.intersection(&ds).copied().collect();
    let sc = shared.iter().filter(|&&x| content(x)).count();
    let w_union: f64 = qs
        .union(&ds)
        .filter(|&&x| content(x))
        .map(|&x| weight(x))
        .sum();
    let w_shared: f64 = shared
        .iter()
        .filter(|&&x| content(x))
        .map(|&x| weight(x))
        .sum();
    let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    ContentScores {
        jaccard: ratio(sc, qc + dc - sc),
        query_in_stored: ratio(sc, qc),
        stored_in_query: ratio(sc, dc),
        weighted_jaccard: if w_union > 0.0 {
            w_shared / w_union
        } else {
            0.0
        },
        shared_content: sc,
        shared_boilerplate: shared.len() - sc,
    }
}

proptest::proptest! {
    /// The scores a query reads (only the record's shingles it lacks looked
    /// up) and the scores of two sets given both sides' frequencies are the
    /// same bits, and equal the definition.
    #[test]
    fn content_scores_equal_the_definition(
        q in proptest::collection::btree_set(0u32..400, 0..120),
        d in proptest::collection::btree_set(0u32..400, 0..120),
        freq in proptest::collection::vec(0u32..40, 400),
        templates in proptest::collection::hash_set(0u32..400, 0..20),
        at in proptest::option::of(1u32..40),
        docs in 40usize..100, // at least every count, as in a collection
    ) {
        let c = Classifier { templates: Arc::new(templates), at, docs };
        let df: HashMap<u32, u32> = (0..400u32).map(|x| (x, freq[x as usize])).collect();
        let q: Vec<u32> = q.into_iter().collect();
        let d: Vec<u32> = d.into_iter().collect();
        let of = |xs: &[u32]| -> Vec<u32> { xs.iter().map(|x| df[x]).collect() };
        let both = c.scores(&q, &of(&q), &d, &of(&d));
        let record = Record::new(id("d"), None, Stamp { created_ms: 1, expires_ms: None }, &[0], &d);
        let query = ContentQuery { classifier: c.clone(), q_df: Default::default(), df: &df };
        let read = query.scores(&q, &record);
        proptest::prop_assert_eq!(both, read);
        let want = brute_scores(&c, &q, &d, &df);
        proptest::prop_assert_eq!(
            (both.jaccard, both.query_in_stored, both.stored_in_query),
            (want.jaccard, want.query_in_stored, want.stored_in_query)
        );
        proptest::prop_assert_eq!(
            (both.shared_content, both.shared_boilerplate),
            (want.shared_content, want.shared_boilerplate)
        );
        // Weights are summed in fixed point (2^-32 a unit).
        proptest::prop_assert!((both.weighted_jaccard - want.weighted_jaccard).abs() < 1e-9);
        // Either way round, the same bits (a pair scan on one backend and
        // the CLI's may take the pair in either order).
        let back = c.scores(&d, &of(&d), &q, &of(&q));
        proptest::prop_assert_eq!(
            (back.jaccard, back.weighted_jaccard, back.shared_content, back.shared_boilerplate),
            (both.jaccard, both.weighted_jaccard, both.shared_content, both.shared_boilerplate)
        );
        proptest::prop_assert_eq!(
            (back.query_in_stored, back.stored_in_query),
            (both.stored_in_query, both.query_in_stored)
        );
    }
}

use proptest::strategy::Strategy as _;

proptest::proptest! {
    /// A batch's count (one counting sort by shard and region over every
    /// document, then each shard's slice added) counts what a map counts,
    /// whatever groups the keys fall in: the first and last of the
    /// 2^GROUP_BITS groups, the first keys of each of the first 16 groups,
    /// many keys in one, documents sharing keys, batches taken away again
    /// document by document.
    #[test]
    fn batches_count_what_a_map_counts(
        docs in proptest::collection::vec(
            proptest::collection::btree_set(
                proptest::prop_oneof![
                    proptest::prelude::any::<u32>(),
                    0u32..64,
                    (u32::MAX - 64)..=u32::MAX,
                    (0u32..16, 0u32..4)
                        .prop_map(|(g, k)| (g << (32 - boilerplate::GROUP_BITS)) | k),
                ],
                0..60,
            ),
            0..40,
        ),
        gone in proptest::collection::vec(proptest::prelude::any::<bool>(), 40),
    ) {
        let f = boilerplate::Frequencies::new(true);
        let sets: Vec<Vec<u32>> = docs.iter().map(|d| d.iter().copied().collect()).collect();
        let refs: Vec<&[u32]> = sets.iter().map(Vec::as_slice).collect();
        f.count_documents(&refs);
        let mut want: HashMap<u32, u32> = HashMap::new();
        for s in &sets {
            for &x in s {
                *want.entry(x).or_default() += 1;
            }
        }
        for (s, &g) in sets.iter().zip(&gone) {
            if g {
                f.uncount_document(s);
                for x in s {
                    let c = want.get_mut(x).unwrap();
                    *c -= 1;
                    if *c == 0 {
                        want.remove(x);
                    }
                }
            }
        }
        let mut keys: Vec<u32> = sets.iter().flatten().copied().collect();
        keys.sort_unstable();
        keys.dedup();
        let mut got = Vec::new();
        f.lookup_sorted(&keys, &mut got);
        for (x, n) in keys.iter().zip(&got) {
            proptest::prop_assert_eq!(*n, want.get(x).copied().unwrap_or(0), "{:x}", x);
        }
        proptest::prop_assert_eq!(f.distinct(), want.len());
        let kept = sets.len() - sets.iter().zip(&gone).filter(|(_, &g)| g).count();
        proptest::prop_assert_eq!(f.docs(), kept);
    }
}
