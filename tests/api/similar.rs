//! `/similar` and `/compare`: exact answers through the API.
//!
//! Expected values come from `docs/examples.md` (derived by hand and by a
//! brute-force reference) or from the test's own reference shingler
//! (`helpers::reference_overlap`), never from the server.

use crate::helpers::{
    approx_eq, assert_problem, assert_scores_eq, reference_overlap, result_ids, similar_path,
    spawn_app, spawn_app_with, test_settings, vocabulary, TestApp,
};
use neardup::testkit::{QuestionPair, QUESTION_PAIRS};
use neardup::text::ShingleKind;
use serde_json::{json, Value};

const DOC1: &str = "The night is dark and the moon is red.";
const DOC2: &str = "I can see moon is red, the night is dark.";
const DOC3: &str = "The moon in the night is red.";

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// An app with `kind` k-shingles tuned for threshold 0.5.
async fn spawn_with_shingles(kind: ShingleKind, k: usize, threshold: f64) -> TestApp {
    let mut settings = test_settings();
    settings.shingle.kind = kind;
    settings.shingle.k = k;
    settings.index.threshold = threshold;
    spawn_app_with(settings).await
}

/// A 60-word probe of distinct words, and texts derived from it.
struct Corpus {
    words: Vec<String>,
}

impl Corpus {
    fn new(seed: u64) -> Self {
        Self {
            words: vocabulary(seed, 60),
        }
    }

    fn probe(&self) -> String {
        self.words.join(" ")
    }

    /// The probe with the words at `positions` replaced by fresh words tagged `tag`.
    fn replaced(&self, positions: &[usize], tag: &str) -> String {
        self.words
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if positions.contains(&i) {
                    format!("new{tag}x{i}")
                } else {
                    w.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The probe without its last `n` words.
    fn truncated(&self, n: usize) -> String {
        self.words[..self.words.len() - n].join(" ")
    }
}

/// Check the invariants of every similarity answer: sorted by Jaccard
/// descending then id, no duplicates, all at or above the threshold,
/// estimates in [0, 1] on the 1/128 grid.
fn check_answer(body: &Value) {
    let t = f(&body["threshold"]);
    let results = body["results"].as_array().expect("results");
    assert!(body["candidates"].as_u64().unwrap() >= results.len() as u64);
    assert_eq!(body["truncated"], false);
    for pair in results.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let (ja, jb) = (f(&a["jaccard"]), f(&b["jaccard"]));
        assert!(
            ja > jb || (ja == jb && a["id"].as_str() < b["id"].as_str()),
            "not sorted: {a} before {b}"
        );
    }
    let mut ids = result_ids(&body["results"]);
    ids.sort();
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "duplicate ids in {body}");
    for m in results {
        let j = f(&m["jaccard"]);
        assert!(j >= t && j <= 1.0, "{m} below threshold {t}");
        let e = f(&m["estimate"]);
        assert!((0.0..=1.0).contains(&e), "{m}");
        assert_eq!((e * 128.0).fract(), 0.0, "estimate is k/128: {m}");
    }
}

/// (id, jaccard) pairs a brute-force scan of `stored` gives for `query`
/// at `threshold`, sorted as the API sorts, excluding `exclude`.
fn brute_force(
    query: &str,
    stored: &[(&str, String)],
    threshold: f64,
    exclude: Option<&str>,
) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = stored
        .iter()
        .filter(|(id, _)| Some(*id) != exclude)
        .map(|(id, text)| {
            let (i, u) = reference_overlap(query, text);
            (id.to_string(), i as f64 / u as f64)
        })
        .filter(|(_, j)| *j >= threshold)
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

fn pairs(body: &Value) -> Vec<(String, f64)> {
    body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["id"].as_str().unwrap().to_owned(), f(&m["jaccard"])))
        .collect()
}

#[tokio::test]
async fn compare_gives_the_documented_word_3_intersections_and_unions() {
    let app = spawn_app().await;
    assert_eq!(app.insert("1", DOC1).await["shingles"], 7);
    assert_eq!(app.insert("2", DOC2).await["shingles"], 8);
    assert_eq!(app.insert("3", DOC3).await["shingles"], 5);
    for (a, b, inter, union) in [("1", "2", 3, 12), ("1", "3", 1, 11), ("2", "3", 1, 12)] {
        for (x, y) in [(a, b), (b, a)] {
            let c = app.compare(x, y).await;
            assert_eq!(c["a"], x);
            assert_eq!(c["b"], y);
            assert_eq!(c["intersection"], inter, "{x} vs {y}");
            assert_eq!(c["union"], union, "{x} vs {y}");
            assert!(
                approx_eq(f(&c["jaccard"]), inter as f64 / union as f64),
                "{c}"
            );
            let e = f(&c["estimate"]);
            assert!((0.0..=1.0).contains(&e));
        }
    }
    // None of them is a near-duplicate of another.
    let body = app.similar("1", None, None).await;
    assert_eq!(body["results"], json!([]));
}

#[tokio::test]
async fn comparing_a_document_with_itself_gives_one() {
    let app = spawn_app().await;
    app.insert("1", DOC1).await;
    let c = app.compare("1", "1").await;
    assert_eq!(
        (c["intersection"].clone(), c["union"].clone()),
        (json!(7), json!(7))
    );
    assert_eq!(f(&c["jaccard"]), 1.0);
    assert_eq!(f(&c["estimate"]), 1.0);
}

#[tokio::test]
async fn question_pairs_match_the_documented_char_5_jaccard() {
    let app = spawn_with_shingles(ShingleKind::Char, 5, 0.5).await;
    for (i, QuestionPair { a, b, char5, .. }) in QUESTION_PAIRS.iter().enumerate() {
        let (ia, ib) = (format!("q{i}a"), format!("q{i}b"));
        app.insert(&ia, a).await;
        app.insert(&ib, b).await;
        let c = app.compare(&ia, &ib).await;
        let j = f(&c["jaccard"]);
        assert_eq!(round4(j), *char5, "{a:?} vs {b:?}: {c}");
        assert!(approx_eq(
            j,
            c["intersection"].as_f64().unwrap() / c["union"].as_f64().unwrap()
        ));
    }
    // Every pair is at or above 0.75, so each A finds its B at threshold
    // 0.5 (the unrelated questions stay below it), with the same score.
    for i in 0..QUESTION_PAIRS.len() {
        let (ia, ib) = (format!("q{i}a"), format!("q{i}b"));
        let body = app.similar(&ia, Some(0.5), None).await;
        check_answer(&body);
        assert_eq!(result_ids(&body["results"]), [ib.as_str()], "{body}");
        let expected = f(&app.compare(&ia, &ib).await["jaccard"]);
        assert_eq!(f(&body["results"][0]["jaccard"]), expected);
    }
    // At 0.9 only the manipulation pair (0.9583) survives.
    let body = app.similar("q2a", Some(0.9), None).await;
    assert_eq!(result_ids(&body["results"]), ["q2b"]);
    let body = app.similar("q0a", Some(0.9), None).await;
    assert_eq!(body["results"], json!([]));
}

#[tokio::test]
async fn question_pairs_match_the_documented_word_3_jaccard() {
    let app = spawn_with_shingles(ShingleKind::Word, 3, 0.5).await;
    for (i, QuestionPair { a, b, word3, .. }) in QUESTION_PAIRS.iter().enumerate() {
        let (ia, ib) = (format!("q{i}a"), format!("q{i}b"));
        app.insert(&ia, a).await;
        app.insert(&ib, b).await;
        let c = app.compare(&ia, &ib).await;
        assert_eq!(round4(f(&c["jaccard"])), *word3, "{a:?} vs {b:?}: {c}");
    }
    // Word shingles are more selective: at 0.5 only the first two pairs match.
    for (i, QuestionPair { word3, .. }) in QUESTION_PAIRS.iter().enumerate() {
        let body = app.similar(&format!("q{i}a"), Some(0.5), None).await;
        check_answer(&body);
        let expected: Vec<String> = if *word3 >= 0.5 {
            vec![format!("q{i}b")]
        } else {
            vec![]
        };
        assert_eq!(result_ids(&body["results"]), expected, "pair {i}");
    }
}

#[tokio::test]
async fn character_shingles_follow_the_documented_small_examples() {
    let k2 = spawn_with_shingles(ShingleKind::Char, 2, 0.8).await;
    // {ab, bc, cd, da, bd}
    assert_eq!(k2.insert("s", "abcdabd").await["shingles"], 5);

    let k1 = spawn_with_shingles(ShingleKind::Char, 1, 0.8).await;
    k1.insert("ad", "ad").await;
    k1.insert("acd", "acd").await;
    let c = k1.compare("ad", "acd").await;
    assert_eq!(
        (c["intersection"].clone(), c["union"].clone()),
        (json!(2), json!(3))
    );
    assert!(approx_eq(f(&c["jaccard"]), 2.0 / 3.0), "{c}");
}

#[tokio::test]
async fn results_are_sorted_by_jaccard_then_id_and_match_a_brute_force_scan() {
    let app = spawn_app().await;
    let corpus = Corpus::new(7);
    let probe = corpus.probe();
    let other = Corpus::new(8).probe();
    let stored: Vec<(&str, String)> = vec![
        ("probe", probe.clone()),
        // Three identical copies inserted out of id order: a tie at 1.0.
        ("copy-c", probe.clone()),
        ("copy-a", probe.clone()),
        ("copy-b", probe.clone()),
        // Two different one-word edits: a tie at 55/61.
        ("edit-z", corpus.replaced(&[20], "z")),
        ("edit-y", corpus.replaced(&[40], "y")),
        ("cut-5", corpus.truncated(5)),
        ("cut-10", corpus.truncated(10)),
        // Below the default 0.8 threshold, above the lowest served one.
        ("cut-12", corpus.truncated(12)),
        ("edits-3", corpus.replaced(&[5, 25, 45], "t")),
        ("unrelated", other),
    ];
    for (id, text) in &stored {
        app.insert(id, text).await;
    }

    let body = app.similar("probe", None, Some(1000)).await;
    check_answer(&body);
    assert_eq!(body["id"], "probe");
    assert_eq!(f(&body["threshold"]), 0.8);
    let expected = brute_force(&probe, &stored, 0.8, Some("probe"));
    assert_scores_eq(&pairs(&body), &expected);
    // The fixture really exercises the ties and the threshold.
    let ids = result_ids(&body["results"]);
    assert_eq!(
        ids,
        ["copy-a", "copy-b", "copy-c", "cut-5", "edit-y", "edit-z", "cut-10"]
    );

    // A lower (but served) threshold brings in cut-12 (46/58 = 0.793).
    let body = app.similar("probe", Some(0.78), Some(1000)).await;
    check_answer(&body);
    assert_scores_eq(
        &pairs(&body),
        &brute_force(&probe, &stored, 0.78, Some("probe")),
    );
    assert!(result_ids(&body["results"]).contains(&"cut-12".to_owned()));
}

#[tokio::test]
async fn limit_keeps_the_best_results_and_defaults_to_ten() {
    let app = spawn_app().await;
    let corpus = Corpus::new(11);
    app.insert("probe", &corpus.probe()).await;
    for i in 0..12 {
        app.insert(&format!("same-{i:02}"), &corpus.probe()).await;
    }
    app.insert("edit", &corpus.replaced(&[30], "e")).await;

    let all = app.similar("probe", None, Some(1000)).await;
    check_answer(&all);
    let all_ids = result_ids(&all["results"]);
    assert_eq!(all_ids.len(), 13);
    assert_eq!(all_ids.last().unwrap(), "edit");

    let default = app.similar("probe", None, None).await;
    assert_eq!(result_ids(&default["results"]), all_ids[..10]);

    for limit in [1, 2, 12, 13, 14] {
        let body = app.similar("probe", None, Some(limit)).await;
        check_answer(&body);
        assert_eq!(
            result_ids(&body["results"]),
            all_ids[..limit.min(13)],
            "limit {limit}"
        );
        // candidates counts what was verified, not what was returned.
        assert!(body["candidates"].as_u64().unwrap() >= 13);
    }
}

#[tokio::test]
async fn the_threshold_filters_results_and_is_echoed() {
    let app = spawn_app().await;
    let corpus = Corpus::new(12);
    let stored: Vec<(&str, String)> = vec![
        ("probe", corpus.probe()),
        ("copy", corpus.probe()),
        ("edit", corpus.replaced(&[10], "a")),
        ("cut", corpus.truncated(8)),
    ];
    for (id, text) in &stored {
        app.insert(id, text).await;
    }
    for t in [0.77, 0.8, 0.85, 0.9, 0.95, 1.0] {
        let body = app.similar("probe", Some(t), Some(100)).await;
        check_answer(&body);
        assert_eq!(f(&body["threshold"]), t);
        assert_scores_eq(
            &pairs(&body),
            &brute_force(&corpus.probe(), &stored, t, Some("probe")),
        );
    }
    let body = app.similar("probe", Some(1.0), None).await;
    assert_eq!(result_ids(&body["results"]), ["copy"]);
}

#[tokio::test]
async fn thresholds_outside_the_served_range_are_400() {
    let app = spawn_app().await;
    app.insert("d", DOC1).await;
    let stats = app.stats().await;
    let min = f(&stats["index"]["min_query_threshold"]);
    assert!(min > 0.75 && min < 0.8, "min_query_threshold {min}");

    for t in ["0", "-0.1", "1.0001", "2", "NaN", "inf"] {
        let body =
            assert_problem(app.get(&format!("/similar?id=d&threshold={t}")).await, 400).await;
        assert_eq!(body["type"], "urn:neardup:problem:invalid-threshold", "{t}");
    }
    for t in [0.5, 0.7, min - 1e-9] {
        let body = assert_problem(app.get(&similar_path("d", Some(t), None)).await, 400).await;
        assert_eq!(
            body["type"], "urn:neardup:problem:threshold-below-tuning",
            "{t}"
        );
    }
    for t in ["abc", "", "0.9x"] {
        let body =
            assert_problem(app.get(&format!("/similar?id=d&threshold={t}")).await, 400).await;
        assert_eq!(
            body["type"], "urn:neardup:problem:invalid-parameter",
            "{t:?}"
        );
    }
    // The edges of the served range are accepted.
    for t in [min, 1.0] {
        let resp = app.get(&similar_path("d", Some(t), None)).await;
        assert_eq!(resp.status(), 200, "{t}");
    }
    // The same rules apply to POST /similar.
    for t in [json!(0), json!(1.5), json!(0.5)] {
        let resp = app
            .post_json("/similar", &json!({"text": DOC1, "threshold": t}))
            .await;
        assert_problem(resp, 400).await;
    }
}

#[tokio::test]
async fn limits_outside_one_to_max_limit_are_400() {
    let app = spawn_app().await;
    app.insert("d", DOC1).await;
    for l in ["0", "1001", "-1", "ten", "1.5"] {
        let body = assert_problem(app.get(&format!("/similar?id=d&limit={l}")).await, 400).await;
        assert_eq!(body["type"], "urn:neardup:problem:invalid-parameter", "{l}");
    }
    for l in [1, 1000] {
        assert_eq!(
            app.get(&similar_path("d", None, Some(l))).await.status(),
            200
        );
    }
    for l in [0, 1001] {
        let resp = app
            .post_json("/similar", &json!({"text": DOC1, "limit": l}))
            .await;
        assert_problem(resp, 400).await;
    }
}

#[tokio::test]
async fn the_queried_document_never_appears_in_its_own_results() {
    let app = spawn_app().await;
    let corpus = Corpus::new(13);
    app.insert("self", &corpus.probe()).await;
    let body = app.similar("self", None, None).await;
    assert_eq!(body["results"], json!([]));
    assert_eq!(body["candidates"], 0);
    app.insert("twin", &corpus.probe()).await;
    let body = app.similar("self", Some(1.0), None).await;
    assert_eq!(result_ids(&body["results"]), ["twin"]);
    let body = app.similar("twin", Some(1.0), None).await;
    assert_eq!(result_ids(&body["results"]), ["self"]);
}

#[tokio::test]
async fn deleted_documents_disappear_from_results() {
    let app = spawn_app().await;
    let corpus = Corpus::new(14);
    app.insert("probe", &corpus.probe()).await;
    app.insert("a", &corpus.probe()).await;
    app.insert("b", &corpus.replaced(&[3], "b")).await;
    assert_eq!(
        result_ids(&app.similar("probe", None, None).await["results"]),
        ["a", "b"]
    );
    assert_eq!(app.delete("/documents/a").await.status(), 204);
    let body = app.similar("probe", None, None).await;
    assert_eq!(result_ids(&body["results"]), ["b"]);
    let body: Value = app
        .post_json("/similar", &json!({"text": corpus.probe()}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(result_ids(&body["results"]), ["probe", "b"]);
    // A deleted document cannot be queried or compared either.
    assert_problem(app.get(&similar_path("a", None, None)).await, 404).await;
    assert_problem(app.get("/compare?a=a&b=probe").await, 404).await;
}

#[tokio::test]
async fn replaced_documents_are_scored_by_their_new_text() {
    let app = spawn_app().await;
    let corpus = Corpus::new(15);
    let probe = corpus.probe();
    app.insert("probe", &probe).await;
    app.insert("doc", &probe).await;
    assert_eq!(
        f(&app.similar("probe", None, None).await["results"][0]["jaccard"]),
        1.0
    );

    // Replaced by a near-duplicate: the new, lower score.
    let edited = corpus.replaced(&[7], "r");
    let resp = app
        .put_json("/documents/doc", &json!({"text": edited}))
        .await;
    assert_eq!(resp.status(), 200);
    let body = app.similar("probe", None, None).await;
    let (i, u) = reference_overlap(&probe, &edited);
    assert_scores_eq(&pairs(&body), &[("doc".to_owned(), i as f64 / u as f64)]);

    // Replaced by an unrelated text: gone from the results, and it is the
    // new text that the document's own query uses.
    let unrelated = Corpus::new(16).probe();
    app.put_json("/documents/doc", &json!({"text": unrelated}))
        .await;
    assert_eq!(app.similar("probe", None, None).await["results"], json!([]));
    app.insert("unrelated-twin", &unrelated).await;
    let body = app.similar("doc", None, None).await;
    assert_eq!(result_ids(&body["results"]), ["unrelated-twin"]);

    // The same through a batch upsert.
    let resp = app
        .post_json(
            "/documents/batch?mode=upsert",
            &json!({"documents": [{"id": "doc", "text": probe}]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let body = app.similar("probe", None, None).await;
    assert_scores_eq(&pairs(&body), &[("doc".to_owned(), 1.0)]);
}

#[tokio::test]
async fn posting_similar_text_matches_stored_documents_and_stores_nothing() {
    let app = spawn_app().await;
    let corpus = Corpus::new(17);
    let stored: Vec<(&str, String)> = vec![
        ("copy", corpus.probe()),
        ("edit", corpus.replaced(&[12], "q")),
        ("cut", corpus.truncated(3)),
        ("far", Corpus::new(18).probe()),
    ];
    for (id, text) in &stored {
        app.insert(id, text).await;
    }
    let before = app.stats().await["documents"].clone();
    // Punctuation and case do not matter after normalization.
    let query = format!("{}!!", corpus.probe().to_uppercase());
    for _ in 0..2 {
        let resp = app
            .post_json("/similar", &json!({"text": query, "limit": 50}))
            .await;
        assert_eq!(resp.status(), 200);
        let body: Value = resp.json().await.unwrap();
        check_answer(&body);
        assert!(body.get("id").is_none(), "{body}");
        assert_scores_eq(
            &pairs(&body),
            &brute_force(&corpus.probe(), &stored, 0.8, None),
        );
        assert_eq!(result_ids(&body["results"])[0], "copy");
    }
    assert_eq!(app.stats().await["documents"], before);
}

#[tokio::test]
async fn estimates_lie_in_zero_one_and_are_one_for_identical_texts() {
    let app = spawn_app().await;
    let corpus = Corpus::new(19);
    app.insert("probe", &corpus.probe()).await;
    // Same text after normalization, different spelling.
    app.insert("loud", &corpus.probe().to_uppercase().replace(' ', " ,  "))
        .await;
    for i in 0..6 {
        app.insert(&format!("edit{i}"), &corpus.replaced(&[i * 9 + 1], "e"))
            .await;
    }
    let body = app.similar("probe", None, Some(100)).await;
    check_answer(&body);
    let results = body["results"].as_array().unwrap();
    assert_eq!(results.len(), 7);
    assert_eq!(results[0]["id"], "loud");
    assert_eq!(f(&results[0]["jaccard"]), 1.0);
    assert_eq!(f(&results[0]["estimate"]), 1.0);
    for m in &results[1..] {
        let e = f(&m["estimate"]);
        assert!(e > 0.5 && e < 1.0, "{m}");
    }
    let c = app.compare("probe", "loud").await;
    assert_eq!((f(&c["jaccard"]), f(&c["estimate"])), (1.0, 1.0));
}

/// An app with `index.max_candidates = cap`, a probe and `copies` identical copies.
async fn spawn_with_copies(cap: usize, copies: usize) -> TestApp {
    let mut settings = test_settings();
    settings.index.max_candidates = cap;
    let app = spawn_app_with(settings).await;
    let probe = Corpus::new(20).probe();
    app.insert("probe", &probe).await;
    for i in 0..copies {
        app.insert(&format!("copy{i}"), &probe).await;
    }
    app
}

#[tokio::test]
async fn candidates_beyond_max_candidates_are_cut_and_reported_as_truncated() {
    let app = spawn_with_copies(3, 6).await;
    let body = app.similar("probe", None, Some(100)).await;
    assert_eq!(body["truncated"], true, "{body}");
    let candidates = body["candidates"].as_u64().unwrap();
    assert!((1..=3).contains(&candidates), "{body}");
    let ids = result_ids(&body["results"]);
    assert_eq!(ids.len() as u64, candidates);
    assert!(ids.iter().all(|id| id.starts_with("copy")));

    let resp = app
        .post_json(
            "/documents?similar=true",
            &json!({"id": "late", "text": Corpus::new(20).probe()}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    let written: Value = resp.json().await.unwrap();
    assert_eq!(written["truncated"], true);
    assert_eq!(written["similar"].as_array().unwrap().len(), 3);

    let metrics = app.metrics().await;
    assert_eq!(
        crate::helpers::metric_value(
            &metrics,
            "neardup_queries_truncated_total",
            &[("collection", crate::helpers::collection_label())]
        ),
        Some(2.0)
    );
}

#[tokio::test]
async fn the_queried_document_does_not_count_against_max_candidates() {
    // Regression: `Engine::query` used to cut the
    // candidate slots at `max_candidates` *before* skipping the queried
    // document, so GET /similar?id= verifies one candidate fewer than the
    // cap and reports `truncated: true` when exactly `max_candidates` other
    // documents are candidates (here it returns 5 of 6 copies). `candidates`
    // is documented as excluding the queried document; the cap should too.
    let app = spawn_with_copies(6, 6).await;
    let body = app.similar("probe", None, Some(100)).await;
    assert_eq!(body["truncated"], false, "{body}");
    assert_eq!(result_ids(&body["results"]).len(), 6, "{body}");

    let app = spawn_with_copies(3, 6).await;
    let body = app.similar("probe", None, Some(100)).await;
    assert_eq!(body["candidates"], 3, "{body}");
}

#[tokio::test]
async fn ids_with_reserved_characters_work_in_query_strings() {
    let app = spawn_app().await;
    let corpus = Corpus::new(21);
    let (a, b) = ("a+b c&d=e/ü?#%", "x;y,z");
    app.insert(a, &corpus.probe()).await;
    app.insert(b, &corpus.probe()).await;
    app.insert("a b c", &Corpus::new(22).probe()).await;
    let body = app.similar(a, None, None).await;
    assert_eq!(body["id"], a);
    assert_eq!(result_ids(&body["results"]), [b]);
    let body = app.similar(b, None, None).await;
    assert_eq!(result_ids(&body["results"]), [a]);
    let c = app.compare(a, b).await;
    assert_eq!((c["a"].as_str(), c["b"].as_str()), (Some(a), Some(b)));
    assert_eq!(f(&c["jaccard"]), 1.0);
    // `+` in a query string is a space: "a+b+c" names "a b c".
    let body = app.get_json("/similar?id=a+b+c").await;
    assert_eq!(body["id"], "a b c");
}
