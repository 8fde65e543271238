//! `POST /analysis/histogram` and `POST /analysis/accuracy` on real
//! servers: counts against a brute-force count of every pair (the test's
//! own reference shingler for ASCII text, `/explain`'s exact counts for
//! accented text), the advisor on corpora with and without planted
//! near-duplicates, samples of stored texts, the estimate's error, and an
//! analysis that stops when its request times out.

use crate::helpers::{
    assert_problem, collection_label, metric_value, neardup, reference_word_shingles, spawn_app,
    spawn_app_with, test_settings, TestApp,
};
use neardup::testkit::Articles;
use serde_json::{json, Value};

/// The bin of `c / u` among `bins` equal-width bins, the last closed.
fn bin(c: usize, u: usize, bins: usize) -> usize {
    (c * bins / u).min(bins - 1)
}

/// Brute force: every pair's (intersection, union) of word k-shingles by
/// the reference shingler, binned.
fn reference_counts(texts: &[String], k: usize, bins: usize) -> Vec<u64> {
    let sets: Vec<_> = texts
        .iter()
        .map(|t| reference_word_shingles(t, k))
        .collect();
    let mut counts = vec![0u64; bins];
    for i in 0..sets.len() {
        for j in i + 1..sets.len() {
            let c = sets[i].intersection(&sets[j]).count();
            counts[bin(c, sets[i].len() + sets[j].len() - c, bins)] += 1;
        }
    }
    counts
}

fn counts_of(h: &Value) -> Vec<u64> {
    h["bins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .collect()
}

async fn histogram(app: &TestApp, body: Value) -> Value {
    let resp = app.post_json("/analysis/histogram", &body).await;
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

/// ASCII articles with a planted near-duplicate of every 4th.
fn planted(n: usize) -> Vec<String> {
    let a = Articles::new(11, 2_000, 4);
    (0..n).map(|i| a.text(i)).collect()
}

#[tokio::test]
async fn histogram_counts_equal_a_brute_force_count_of_every_pair_for_each_k() {
    let app = spawn_app().await;
    let mut texts = planted(60);
    // Short texts too: fewer words than k make one shingle.
    texts.extend(["Tiny one.", "Tiny one!", "Another tiny one"].map(String::from));
    let body = histogram(&app, json!({"texts": texts, "k": [1, 2, 3, 5], "bins": 20})).await;
    assert_eq!(body["texts"], 63);
    let hs = body["histograms"].as_array().unwrap();
    assert_eq!(hs.len(), 4);
    for (h, k) in hs.iter().zip([1, 2, 3, 5]) {
        assert_eq!(h["k"], k);
        assert_eq!(h["pairs"], 63 * 62 / 2);
        let bins = h["bins"].as_array().unwrap();
        assert_eq!(bins.len(), 20);
        assert_eq!(bins[0]["lo"], 0.0);
        assert_eq!(bins[19]["hi"], 1.0);
        assert_eq!(bins[7]["lo"], 0.35);
        assert_eq!(counts_of(h), reference_counts(&texts, k, 20), "k = {k}");
    }
}

#[tokio::test]
async fn accented_and_cyrillic_texts_are_counted_like_explain_counts_each_pair() {
    let app = spawn_app().await;
    let a = Articles::new(5, 800, 3);
    let mut texts: Vec<String> = (0..14).map(|i| a.unicode_text(i)).collect();
    texts.push("Цены на кофе в Москве выросли на 3 %, пишет «Ведомости».".into());
    texts.push("Цены на кофе в Москве выросли на 3 % — пишут «Ведомости»!".into());
    texts.push("Le café coûte 3 £ de plus à Zürich, dit-on.".into());
    let body = histogram(&app, json!({"texts": texts, "k": [3], "bins": 10})).await;
    let mut expected = vec![0u64; 10];
    for i in 0..texts.len() {
        for j in i + 1..texts.len() {
            let resp = app
                .post_json(
                    "/explain",
                    &json!({"a": {"text": texts[i]}, "b": {"text": texts[j]}}),
                )
                .await;
            assert_eq!(resp.status(), 200);
            let x: Value = resp.json().await.unwrap();
            let (c, u) = (
                x["intersection"].as_u64().unwrap() as usize,
                x["union"].as_u64().unwrap() as usize,
            );
            expected[bin(c, u, 10)] += 1;
        }
    }
    assert_eq!(counts_of(&body["histograms"][0]), expected);
}

#[tokio::test]
async fn the_advisor_suggests_a_threshold_in_the_valley_only_when_near_duplicates_are_planted() {
    let app = spawn_app().await;
    let texts = planted(120);
    let body = histogram(&app, json!({"texts": texts, "k": [3]})).await;
    let h = &body["histograms"][0];
    let t = h["suggested_threshold"].as_f64().expect("a suggestion");
    // The planted pairs (1–2 words changed in ~130) sit near 0.9; unrelated
    // pairs share almost no 3-shingle.
    assert!((0.1..0.85).contains(&t), "{h}");
    let counts = counts_of(h);
    let at = (t * 20.0) as usize;
    assert_eq!(counts[at], 0, "the suggestion is in an empty bin: {h}");
    assert!(h["why"].as_str().unwrap().contains("pairs"), "{h}");
    // Recall there, under the collection's banding (21, 6).
    assert_eq!(
        (body["bands"].as_u64(), body["rows"].as_u64()),
        (Some(21), Some(6))
    );
    let recall = 1.0 - (1.0 - t.powi(6)).powi(21);
    assert!((h["recall_at_suggested"].as_f64().unwrap() - recall).abs() < 1e-12);
    let curve = h["s_curve"].as_array().unwrap();
    assert_eq!(curve.len(), 21);
    assert_eq!(curve[10]["s"], 0.5);
    let p = 1.0 - (1.0 - 0.5f64.powi(6)).powi(21);
    assert!((curve[10]["p"].as_f64().unwrap() - p).abs() < 1e-12);

    // The same kind of corpus without planted twins: no valley to suggest.
    let a = Articles::new(11, 2_000, 0);
    let texts: Vec<String> = (0..120).map(|i| a.text(i)).collect();
    let body = histogram(&app, json!({"texts": texts, "k": [3]})).await;
    let h = &body["histograms"][0];
    assert_eq!(h["suggested_threshold"], Value::Null, "{h}");
    assert_eq!(h["recall_at_suggested"], Value::Null);
    assert!(!h["why"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn a_sample_of_stored_texts_is_analysed_like_the_same_texts_sent() {
    let mut settings = test_settings();
    settings.storage.store_text = true;
    let app = spawn_app_with(settings).await;
    let texts = planted(40);
    for (i, t) in texts.iter().enumerate() {
        app.insert(&format!("d{i:02}"), t).await;
    }
    // A sample of all of them: the histogram of the texts themselves.
    let sampled = histogram(&app, json!({"sample": 100, "k": [2, 3], "bins": 10})).await;
    let sent = histogram(&app, json!({"texts": texts, "k": [2, 3], "bins": 10})).await;
    assert_eq!(sampled["texts"], 40);
    assert_eq!(sampled["histograms"], sent["histograms"]);
    // A smaller sample: as many texts as asked, the same draw for a seed.
    let one = histogram(&app, json!({"sample": 10, "seed": 7, "k": [3]})).await;
    let again = histogram(&app, json!({"sample": 10, "seed": 7, "k": [3]})).await;
    assert_eq!(one["texts"], 10);
    assert_eq!(one["histograms"][0]["pairs"], 45);
    assert_eq!(one, again);
    // Deleted documents are not drawn.
    for i in 0..38 {
        assert_eq!(
            app.delete(&format!("/documents/d{i:02}")).await.status(),
            204
        );
    }
    let two = histogram(&app, json!({"sample": 10, "k": [3], "bins": 10})).await;
    assert_eq!(two["texts"], 2);
    assert_eq!(two["histograms"][0]["pairs"], 1);
    let metrics = app.metrics().await;
    let histograms = metric_value(
        &metrics,
        "neardup_analyses_total",
        &[("collection", collection_label()), ("kind", "histogram")],
    );
    assert_eq!(histograms, Some(5.0), "{metrics}");
}

#[tokio::test]
async fn the_estimate_error_shrinks_with_more_hash_values_and_misses_are_counted_at_the_threshold()
{
    let app = spawn_app().await;
    let texts = planted(80);
    let resp = app
        .post_json(
            "/analysis/accuracy",
            &json!({"texts": texts, "k": [2, 3], "num_perm": [16, 256], "threshold": 0.7}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["texts"], 80);
    assert_eq!(body["threshold"], 0.7);
    let rows = body["accuracy"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    let row = |k: u64, n: u64| {
        rows.iter()
            .find(|r| r["k"] == k && r["num_perm"] == n)
            .unwrap_or_else(|| panic!("a row for k = {k}, num_perm = {n}: {body}"))
    };
    for k in [2, 3] {
        let sets: Vec<_> = texts
            .iter()
            .map(|t| reference_word_shingles(t, k as usize))
            .collect();
        let (mut sharing, mut above) = (0u64, 0u64);
        for i in 0..sets.len() {
            for j in i + 1..sets.len() {
                let c = sets[i].intersection(&sets[j]).count();
                if c > 0 {
                    sharing += 1;
                }
                if c as f64 / (sets[i].len() + sets[j].len() - c) as f64 >= 0.7 {
                    above += 1;
                }
            }
        }
        let (small, large) = (row(k, 16), row(k, 256));
        for r in [small, large] {
            assert_eq!(r["sharing_pairs"], sharing, "{r}");
            assert_eq!(r["measured_pairs"], sharing, "{r}");
            assert_eq!(r["pairs_at_threshold"], above, "{r}");
            assert!(r["missed"].as_u64().unwrap() <= above, "{r}");
        }
        assert!(above >= 15, "the planted pairs are above 0.7: {above}");
        assert!(
            large["mean_abs_error"].as_f64().unwrap() < small["mean_abs_error"].as_f64().unwrap(),
            "more hash values estimate better: {small} vs {large}"
        );
        // The banding chosen for 256 values at 0.7 misses none of them.
        assert_eq!(large["missed"], 0, "{large}");
        assert!(large["bands"].as_u64().unwrap() * large["rows"].as_u64().unwrap() <= 256);
    }
}

/// As the schemas say: a null value is an absent one, and `2.0` is 2.
#[tokio::test]
async fn nulls_and_integral_floats_are_answered_like_what_they_stand_for() {
    let app = spawn_app().await;
    let texts = planted(12);
    let plain = histogram(&app, json!({"texts": texts, "k": [2, 3], "bins": 10})).await;
    let spelled =
        json!({"texts": texts, "sample": null, "seed": null, "k": [2.0, 3], "bins": 10.0});
    assert_eq!(histogram(&app, spelled).await, plain);
    let accuracy = |body: Value| {
        let app = &app;
        async move {
            let resp = app.post_json("/analysis/accuracy", &body).await;
            assert_eq!(resp.status(), 200, "{body}");
            resp.json::<Value>().await.unwrap()
        }
    };
    let plain = accuracy(json!({"texts": texts, "k": [3], "num_perm": [16, 64]})).await;
    let spelled = json!({"texts": texts, "k": [3.0], "num_perm": [16.0, 64], "threshold": null});
    assert_eq!(accuracy(spelled).await, plain);
    assert_eq!(plain["threshold"], 0.8);
}

#[tokio::test]
async fn bad_requests_are_clear_client_errors() {
    let app = spawn_app().await;
    let cases = [
        (json!({}), 422, "exactly one of"),
        (
            json!({"texts": ["a b", "c d"], "sample": 5}),
            422,
            "exactly one of",
        ),
        (json!({"texts": ["a b", "c d"], "seed": 5}), 422, "seed"),
        (json!({"texts": ["a b"]}), 422, "between 2 and 5000"),
        (
            json!({"texts": ["a b", "c d"], "k": []}),
            422,
            "k must hold",
        ),
        (
            json!({"texts": ["a b", "c d"], "k": [3, 1, 3]}),
            422,
            "k[2] repeats 3",
        ),
        (
            json!({"texts": ["a b", "c d"], "k": [0]}),
            422,
            "between 1 and 64",
        ),
        (json!({"texts": ["a b", "c d"], "bins": 101}), 422, "bins"),
        (json!({"texts": ["a b", "— … —"]}), 422, "texts[1]"),
        (json!({"sample": 5}), 409, "store_text is off"),
        (json!({"sample": 1}), 422, "sample must be"),
    ];
    for (body, status, detail) in cases {
        let resp = app.post_json("/analysis/histogram", &body).await;
        let problem = assert_problem(resp, status).await;
        let said = problem["detail"].as_str().unwrap();
        assert!(said.contains(detail), "{body}: {said}");
    }
    let resp = app
        .post_json(
            "/analysis/accuracy",
            &json!({"texts": ["a b", "c d"], "num_perm": [16, 2048]}),
        )
        .await;
    let problem = assert_problem(resp, 422).await;
    assert!(problem["detail"].as_str().unwrap().contains("num_perm"));
    // A text over limits.max_text_bytes is named.
    let mut settings = test_settings();
    settings.limits.max_text_bytes = 20;
    let small = spawn_app_with(settings).await;
    let resp = small
        .post_json(
            "/analysis/histogram",
            &json!({"texts": ["short", "this one is longer than twenty bytes"]}),
        )
        .await;
    let problem = assert_problem(resp, 413).await;
    assert!(problem["detail"].as_str().unwrap().contains("texts[1]"));
}

#[tokio::test]
async fn an_analysis_that_outlasts_the_timeout_stops_and_frees_the_scan_pool() {
    let mut settings = test_settings();
    settings.server.request_timeout_secs = 1;
    let app = spawn_app_with(settings).await;
    // 5,000 distinct articles with every k up to 8 and every signature size:
    // minutes of work in a debug build.
    let a = Articles::new(3, 500, 0);
    let texts: Vec<String> = (0..5_000).map(|i| a.text(i)).collect();
    let heavy = json!({"texts": texts, "k": [1, 2, 3, 4, 5, 6, 7, 8],
                       "num_perm": [16, 32, 64, 128, 256, 512, 1024]});
    let resp = app.post_json("/analysis/accuracy", &heavy).await;
    assert_problem(resp, 503).await;
    // The next analysis gets the pool (and the scan permit) within its own
    // one-second budget only if the first one stopped.
    let resp = app
        .post_json(
            "/analysis/histogram",
            &json!({"texts": ["a b c d", "a b c e"], "k": [2]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let metrics = app.metrics().await;
    let accuracy = metric_value(
        &metrics,
        "neardup_analyses_total",
        &[("collection", collection_label()), ("kind", "accuracy")],
    );
    assert_eq!(accuracy, Some(0.0), "a stopped analysis is not counted");
}

// --- the offline command

#[tokio::test]
async fn neardup_analyze_on_a_file_answers_like_the_api_and_reports_bad_lines() {
    let app = spawn_app().await;
    let a = Articles::new(21, 1_500, 5);
    let texts: Vec<String> = (0..70).map(|i| a.unicode_text(i)).collect();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("texts.jsonl");
    let mut lines: Vec<String> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"id": i, "text": t, "source": "test"}).to_string())
        .collect();
    lines.insert(5, "{not json".into());
    lines.insert(9, String::new());
    lines.insert(12, json!({"text": "¿…?"}).to_string());
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();

    let out = neardup()
        .args(["analyze", "--json", "-q", "--k", "2,3", "--bins", "10"])
        .args(["--num-perm", "32,128", "--threshold", "0.7"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("line 6: not a JSON object"), "{stderr}");
    assert!(
        stderr.contains("line 13: the text has no words"),
        "{stderr}"
    );
    let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cli["texts"], 70);
    assert_eq!(cli["skipped"], 2);
    // The whole file fits the default sample: the API on the same texts
    // gives the same histograms and the same accuracy rows.
    let api = histogram(&app, json!({"texts": texts, "k": [2, 3], "bins": 10})).await;
    assert_eq!(cli["histograms"], api["histograms"]);
    assert!(
        cli["histograms"][1]["suggested_threshold"].is_number(),
        "{cli}"
    );
    let resp = app
        .post_json(
            "/analysis/accuracy",
            &json!({"texts": texts, "k": [2, 3], "num_perm": [32, 128], "threshold": 0.7}),
        )
        .await;
    let api: Value = resp.json().await.unwrap();
    assert_eq!(cli["accuracy"], api["accuracy"]);

    // Tables for people: a row per bin, the suggestions, the accuracy rows.
    let out = neardup()
        .args(["analyze", "-q", "--k", "3", "--sample", "30", "--seed", "9"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.starts_with("30 texts sampled from 72 lines (2 skipped)"),
        "{table}"
    );
    assert!(table.contains("[0.95, 1.00]"), "{table}");
    assert!(table.lines().any(|l| l.starts_with("suggested")), "{table}");
    assert_eq!(
        table
            .lines()
            .filter(|l| l.trim_start().starts_with("256   3"))
            .count(),
        1,
        "{table}"
    );

    // Too little to compare, or a bad option: exit 2 with the reason.
    let lonely = dir.path().join("one.jsonl");
    std::fs::write(&lonely, "{\"text\": \"only one text here\"}\n").unwrap();
    let out = neardup()
        .args(["analyze", "-q"])
        .arg(&lonely)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least two"));
    let out = neardup()
        .args(["analyze", "-q", "--k", "2,2"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("given twice"));
}

/// With no pair sharing a shingle there is no error to measure: the mean
/// and the 95th percentile say so with null, not a perfect 0.
#[tokio::test]
async fn accuracy_without_pairs_to_measure_reports_null_errors() {
    let app = spawn_app().await;
    let texts = ["alpha beta gamma", "delta epsilon zeta", "eta theta iota"];
    let resp = app
        .post_json(
            "/analysis/accuracy",
            &json!({"texts": texts, "k": [2], "num_perm": [16]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    let row = &body["accuracy"][0];
    assert_eq!(row["measured_pairs"], 0, "{body}");
    assert_eq!(row["mean_abs_error"], Value::Null, "{body}");
    assert_eq!(row["p95_abs_error"], Value::Null, "{body}");
}
