//! Boilerplate-aware scores through the API (issue 44), on real text:
//! sentences and paragraphs of the Apache and Mozilla licences
//! (`tests/fixtures/realtext/en.txt`) as short posts and articles, with
//! site headers and footers written like real ones (£, ’, “ ”). The test
//! computes document frequencies, the boilerplate rule and the content
//! scores itself, from the reference shingler of `helpers.rs`.

use crate::helpers::{assert_problem, spawn_app_with, test_settings, TestApp};

/// A problem answer with `status` and the `type` of `slug`.
async fn problem(resp: reqwest::Response, status: u16, slug: &str) {
    let body = assert_problem(resp, status).await;
    assert_eq!(
        body["type"],
        format!("urn:neardup:problem:{slug}"),
        "{body}"
    );
}
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

const EN: &str = include_str!("../fixtures/realtext/en.txt");

/// A text's shingle set under the default recipe (the texts are not ASCII,
/// which the helpers' reference shingler is limited to): the recipe is the
/// shared part; document frequency, the rule and the scores are the test's.
fn reference_word_shingles(text: &str, k: usize) -> BTreeSet<u32> {
    assert_eq!(k, 3);
    static RECIPE: std::sync::LazyLock<neardup::engine::Engine> =
        std::sync::LazyLock::new(|| neardup::engine::Engine::new(Default::default()));
    RECIPE
        .prepare(text)
        .map(|p| p.shingles().iter().copied().collect())
        .unwrap_or_default()
}

const FOOTERS: [&str; 3] = [
    "Sign up to the Morning Briefing – the day’s top stories, delivered free to your inbox \
     before 7am. © 2026 Northern Courier Ltd. All rights reserved. Registered in England and \
     Wales, No. 04112935. Subscriptions from £1 a week; cancel at any time. Read our \
     “privacy notice” to see how we use your data and how to opt out of tracking.",
    "This article was produced by the Lakeside Gazette newsroom. Got a story? Email \
     tips@lakeside.example or call our news desk. Comments are moderated under our community \
     guidelines and may take up to 24 hours to appear. Support independent journalism: \
     become a member for €5 a month and read every article without adverts or pop-ups.",
    "Follow Metro Daily on social media for live updates from around the region. Photographs \
     are © their owners and may not be reproduced without permission. If you have been \
     affected by any of the issues raised in this story, help and advice is available from \
     the organisations listed on our support page, open 24 hours a day, every day.",
];

/// Words of the licence text, in order.
fn corpus_words() -> Vec<&'static str> {
    EN.split_whitespace().collect()
}

/// `n` short posts of 15–30 words (consecutive words of the text at
/// distinct places), each with one of the footers.
fn short_posts(n: usize) -> Vec<String> {
    let w = corpus_words();
    assert!(n * 31 <= w.len(), "posts must not overlap");
    (0..n)
        .map(|i| {
            let len = 15 + (i * 7) % 16;
            let start = i * 31;
            format!("{}\n\n{}", w[start..start + len].join(" "), FOOTERS[i % 3])
        })
        .collect()
}

/// The licence's paragraphs grouped into articles of at least 120 words.
fn articles() -> Vec<String> {
    let mut out = Vec::new();
    let (mut cur, mut words) = (Vec::new(), 0);
    for p in EN.lines().filter(|l| !l.trim().is_empty()) {
        cur.push(p);
        words += p.split_whitespace().count();
        if words >= 120 {
            out.push(cur.join("\n\n"));
            cur.clear();
            words = 0;
        }
    }
    out
}

fn settings() -> neardup::config::Settings {
    let mut s = test_settings();
    s.index.passage_index = true;
    s.index.boilerplate.enabled = true;
    s.storage.store_text = true;
    s
}

/// The test's own boilerplate: df from the reference shingles of the
/// posted texts, the rule of `index.boilerplate` (defaults but `min_docs`
/// and `min_collection_docs` as given), content Jaccard and containments.
struct Reference {
    sets: BTreeMap<String, BTreeSet<u32>>,
    df: HashMap<u32, u32>,
    at: Option<u32>,
    templates: BTreeSet<u32>,
}

impl Reference {
    fn new(texts: &BTreeMap<String, String>, share: f64, min_docs: u32, min_coll: usize) -> Self {
        let sets: BTreeMap<String, BTreeSet<u32>> = texts
            .iter()
            .map(|(id, t)| (id.clone(), reference_word_shingles(t, 3)))
            .collect();
        let mut df = HashMap::new();
        for s in sets.values() {
            for x in s {
                *df.entry(*x).or_insert(0u32) += 1;
            }
        }
        let n = sets.len();
        let at = (n >= min_coll).then(|| ((share * n as f64).ceil() as u32).max(min_docs));
        Self {
            sets,
            df,
            at,
            templates: BTreeSet::new(),
        }
    }

    fn is_boilerplate(&self, x: u32) -> bool {
        self.templates.contains(&x)
            || self
                .at
                .is_some_and(|a| self.df.get(&x).copied().unwrap_or(0) >= a)
    }

    fn content(&self, s: &BTreeSet<u32>) -> BTreeSet<u32> {
        s.iter()
            .copied()
            .filter(|&x| !self.is_boilerplate(x))
            .collect()
    }

    /// Content (Jaccard, a in b, b in a) of two shingle sets.
    fn scores(&self, a: &BTreeSet<u32>, b: &BTreeSet<u32>) -> (f64, f64, f64) {
        let (ca, cb) = (self.content(a), self.content(b));
        let i = ca.intersection(&cb).count() as f64;
        let ratio = |x: f64, y: f64| if y == 0.0 { 0.0 } else { x / y };
        (
            ratio(i, ca.len() as f64 + cb.len() as f64 - i),
            ratio(i, ca.len() as f64),
            ratio(i, cb.len() as f64),
        )
    }
}

async fn post_all(app: &TestApp, texts: &BTreeMap<String, String>) {
    for (id, text) in texts {
        let r = app
            .put_json(&format!("/documents/{id}"), &json!({"text": text}))
            .await;
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    }
}

async fn get_json(app: &TestApp, path: &str) -> Value {
    let r = app.get(path).await;
    assert_eq!(r.status(), 200, "{path}: {}", r.text().await.unwrap());
    r.json().await.unwrap()
}

fn raw_jaccard(a: &BTreeSet<u32>, b: &BTreeSet<u32>) -> f64 {
    let i = a.intersection(b).count() as f64;
    i / (a.len() as f64 + b.len() as f64 - i)
}

#[tokio::test]
async fn short_posts_sharing_a_site_footer_are_not_content_duplicates() {
    let app = spawn_app_with(settings()).await;
    let texts: BTreeMap<String, String> = short_posts(120)
        .into_iter()
        .enumerate()
        .map(|(i, t)| (format!("p{i:03}"), t))
        .collect();
    post_all(&app, &texts).await;
    let reference = Reference::new(&texts, 0.05, 10, 50);
    let sets: Vec<&BTreeSet<u32>> = reference.sets.values().collect();
    let mut raw_pairs = 0;
    let mut content_pairs = 0;
    for (i, a) in sets.iter().enumerate() {
        for b in &sets[i + 1..] {
            raw_pairs += usize::from(raw_jaccard(a, b) >= 0.5);
            content_pairs += usize::from(reference.scores(a, b).0 >= 0.5);
        }
    }
    assert!(
        raw_pairs > 1000,
        "raw Jaccard pairs the posts by their footers: {raw_pairs}"
    );
    assert_eq!(content_pairs, 0);
    let pairs = get_json(&app, "/duplicates/pairs?score=content&threshold=0.5").await;
    assert_eq!(pairs["score"], "content");
    assert_eq!(pairs["pairs"].as_array().unwrap().len(), 0, "{pairs}");
    let groups = get_json(&app, "/duplicates?score=content&threshold=0.5").await;
    assert_eq!(groups["total_groups"], 0);
    // A post queried by id: raw containment finds the footer's other posts,
    // every one with a content score that leaves the footer out.
    let found = get_json(
        &app,
        "/similar?id=p000&measure=containment&threshold=0.5&limit=1000",
    )
    .await;
    let results = found["results"].as_array().unwrap();
    assert!(results.len() > 30, "{}", results.len());
    for m in results {
        let other = &reference.sets[m["id"].as_str().unwrap()];
        let (j, _, _) = reference.scores(&reference.sets["p000"], other);
        let c = &m["content"];
        assert!((c["jaccard"].as_f64().unwrap() - j).abs() < 0.02, "{m}");
        assert!(c["shared_boilerplate"].as_u64().unwrap() > 30, "{m}");
    }
    // What repeats: the three footers, each in about a third of the posts.
    let common = get_json(&app, "/boilerplate?limit=10").await;
    assert_eq!(common["documents"], 120);
    assert_eq!(common["applies"], true);
    assert_eq!(common["threshold_docs"], 10);
    let passages = common["passages"].as_array().unwrap();
    for footer in FOOTERS {
        let start: String = footer
            .split_whitespace()
            .take(6)
            .collect::<Vec<_>>()
            .join(" ");
        let p = passages
            .iter()
            .find(|p| p["text"].as_str().unwrap().contains(&start))
            .unwrap_or_else(|| panic!("{start:?} in {common}"));
        let docs = p["documents"].as_u64().unwrap();
        assert!((36..=40).contains(&docs), "{p}");
    }
}

#[tokio::test]
async fn reprints_with_another_sites_footer_are_found_on_content_scores_exactly() {
    let app = spawn_app_with(settings()).await;
    let arts = articles();
    let mut texts = BTreeMap::new();
    for (i, a) in arts.iter().enumerate() {
        texts.insert(format!("a{i:02}"), format!("{a}\n\n{}", FOOTERS[i % 3]));
        // The reprint: another site's footer, one word edited.
        let mut words: Vec<&str> = a.split_whitespace().collect();
        words[10] = "reprinted";
        texts.insert(
            format!("r{i:02}"),
            format!("{}\n\n{}", words.join(" "), FOOTERS[(i + 1) % 3]),
        );
    }
    // Volume, so that footers are common: posts with the same footers.
    for (i, t) in short_posts(60).into_iter().enumerate() {
        texts.insert(format!("p{i:02}"), t);
    }
    post_all(&app, &texts).await;
    let reference = Reference::new(&texts, 0.05, 10, 50);
    assert!(reference.at.is_some());
    let t = 0.8;
    let mut found = 0;
    let mut raw_below = 0;
    for i in 0..arts.len() {
        let (copy, original) = (format!("r{i:02}"), format!("a{i:02}"));
        let me = &reference.sets[&copy];
        let want: BTreeMap<&String, f64> = reference
            .sets
            .iter()
            .filter(|(id, _)| **id != copy)
            .filter_map(|(id, s)| {
                let j = reference.scores(me, s).0;
                (j >= t).then_some((id, j))
            })
            .collect();
        let answer = get_json(
            &app,
            &format!("/similar?id={copy}&score=content&threshold={t}&limit=100"),
        )
        .await;
        assert_eq!(answer["score"], "content");
        let got: BTreeMap<String, f64> = answer["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["id"].as_str().unwrap().to_owned(),
                    m["content"]["jaccard"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().copied().collect::<Vec<_>>(),
            "{copy}"
        );
        for (id, j) in &got {
            assert!(
                (j - want[id]).abs() < 0.01,
                "{copy} ~ {id}: {j} vs {}",
                want[id]
            );
        }
        found += usize::from(got.contains_key(&original));
        raw_below += usize::from(raw_jaccard(me, &reference.sets[&original]) < t);
    }
    assert_eq!(found, arts.len(), "every reprint found");
    assert!(raw_below > 0, "the corpus has reprints raw Jaccard misses");
    // A write can be refused on the content score.
    let r = app
        .post_json(
            "/documents?if_unique=true&score=content&threshold=0.8",
            &json!({"id": "again", "text": texts["r00"].replace(FOOTERS[1], FOOTERS[2])}),
        )
        .await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["inserted"], false);
    assert_eq!(body["score"], "content");
}

#[tokio::test]
async fn templates_are_kept_listed_and_make_their_text_boilerplate() {
    let app = spawn_app_with(settings()).await;
    // Two documents: too few for counts to make anything common.
    let body = |i: usize| corpus_words()[i * 400..i * 400 + 30].join(" ");
    for i in 0..2 {
        let r = app
            .put_json(
                &format!("/documents/d{i}"),
                &json!({"text": format!("{}\n\n{}", body(i), FOOTERS[0])}),
            )
            .await;
        assert_eq!(r.status(), 201);
    }
    let before = get_json(&app, "/similar?id=d0&measure=containment&threshold=0.3").await;
    let c = &before["results"][0]["content"];
    assert_eq!(c["shared_boilerplate"], 0, "{before}");
    let r = app
        .put_json("/templates/courier-footer", &json!({"text": FOOTERS[0]}))
        .await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let t: Value = r.json().await.unwrap();
    assert_eq!(t["id"], "courier-footer");
    assert_eq!(t["shingles"], reference_word_shingles(FOOTERS[0], 3).len());
    let r = app
        .put_json("/templates/courier-footer", &json!({"text": FOOTERS[0]}))
        .await;
    assert_eq!(r.status(), 200, "a second PUT replaces");
    let list = get_json(&app, "/templates").await;
    assert_eq!(list["templates"].as_array().unwrap().len(), 1);
    assert!(list["templates"][0].get("text").is_none());
    let one = get_json(&app, "/templates/courier-footer").await;
    assert_eq!(one["text"], FOOTERS[0]);
    let after = get_json(&app, "/similar?id=d0&measure=containment&threshold=0.3").await;
    let c = &after["results"][0]["content"];
    assert_eq!(c["jaccard"], 0.0, "only the footer was shared: {after}");
    assert_eq!(
        c["shared_boilerplate"].as_u64().unwrap() as usize,
        reference_word_shingles(FOOTERS[0], 3).len()
    );
    // Explain marks the footer as boilerplate on both sides.
    let r = app
        .post_json("/explain", &json!({"a": {"id": "d0"}, "b": {"id": "d1"}}))
        .await;
    assert_eq!(r.status(), 200);
    let x: Value = r.json().await.unwrap();
    for side in ["a", "b"] {
        let marked: String = x[side]["segments"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["boilerplate"] == true)
            .map(|s| s["text"].as_str().unwrap())
            .collect();
        assert_eq!(
            marked.trim(),
            FOOTERS[0].trim_end_matches('.'),
            "{side}: {x}"
        );
    }
    assert_eq!(x["content"]["jaccard"], 0.0);
    // Bad input.
    problem(
        app.put_json("/templates/empty", &json!({"text": " … "}))
            .await,
        422,
        "empty-text",
    )
    .await;
    let huge = "word ".repeat(300_000);
    let r = app
        .put_json("/templates/huge", &json!({"text": huge}))
        .await;
    assert_eq!(r.status(), 413);
    problem(
        app.put_json("/templates/x", &json!({"txt": "a"})).await,
        422,
        "invalid-body",
    )
    .await;
    problem(app.get("/templates/nope").await, 404, "template-not-found").await;
    let r = app.delete("/templates/courier-footer").await;
    assert_eq!(r.status(), 204);
    problem(
        app.delete("/templates/courier-footer").await,
        404,
        "template-not-found",
    )
    .await;
    let again = get_json(&app, "/similar?id=d0&measure=containment&threshold=0.3").await;
    assert_eq!(again["results"][0]["content"]["shared_boilerplate"], 0);
}

#[tokio::test]
async fn templates_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings();
    s.storage.data_dir = dir.path().to_owned();
    let app = spawn_app_with(s.clone()).await;
    let r = app
        .put_json("/templates/f", &json!({"text": FOOTERS[1]}))
        .await;
    assert_eq!(r.status(), 201);
    // Documents, some replaced and deleted: the counts are made again
    // from them at the start.
    let posts = short_posts(60);
    for (i, t) in posts.iter().enumerate() {
        let r = app
            .put_json(&format!("/documents/p{i}"), &json!({"text": t}))
            .await;
        assert_eq!(r.status(), 201);
    }
    for i in 0..10 {
        let r = app
            .put_json(&format!("/documents/p{i}"), &json!({"text": posts[59 - i]}))
            .await;
        assert_eq!(r.status(), 200);
        assert_eq!(
            app.delete(&format!("/documents/p{}", 20 + i))
                .await
                .status(),
            204
        );
    }
    let before = get_json(&app, "/boilerplate").await;
    assert_eq!(before["documents"], 50);
    app.stop().await.unwrap();
    let app = spawn_app_with(s).await;
    let one = get_json(&app, "/templates/f").await;
    assert_eq!(one["text"], FOOTERS[1]);
    let after = get_json(&app, "/boilerplate").await;
    for key in [
        "documents",
        "distinct_shingles",
        "boilerplate_shingles",
        "top_counts",
    ] {
        assert_eq!(after[key], before[key], "{key}");
    }
    let stats = get_json(&app, "/stats").await;
    assert_eq!(
        stats["index"]["boilerplate"]["template_shingles"],
        reference_word_shingles(FOOTERS[1], 3).len()
    );
}

#[tokio::test]
async fn content_scores_need_document_frequency() {
    let mut s = test_settings();
    s.index.passage_index = true;
    let app = spawn_app_with(s).await;
    let r = app.put_json("/documents/a", &json!({"text": EN})).await;
    assert_eq!(r.status(), 201);
    problem(
        app.get("/similar?id=a&score=content&threshold=0.5").await,
        409,
        "boilerplate-off",
    )
    .await;
    problem(
        app.get("/duplicates/pairs?score=content&threshold=0.5")
            .await,
        409,
        "boilerplate-off",
    )
    .await;
    problem(app.get("/boilerplate").await, 409, "boilerplate-off").await;
    problem(
        app.get("/similar?id=a&score=weighted").await,
        400,
        "invalid-parameter",
    )
    .await;
    let found = get_json(&app, "/similar?id=a").await;
    assert_eq!(found["score"], "raw");
}

#[tokio::test]
async fn a_collection_switches_counts_on_and_off() {
    let app = spawn_app_with(settings()).await;
    let r = app
        .put_json(
            "/collections/bp",
            &json!({"store_text": true, "index": {"passage_index": true}}),
        )
        .await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    for (i, t) in short_posts(30).into_iter().enumerate() {
        let r = app
            .put_json(
                &format!("/collections/bp/documents/p{i}"),
                &json!({"text": t}),
            )
            .await;
        assert_eq!(r.status(), 201);
    }
    let patch = |body: Value| {
        let app = &app;
        async move {
            app.client
                .patch(format!("{}/collections/bp", app.base))
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    };
    let r =
        patch(json!({"boilerplate": {"enabled": true, "min_collection_docs": 20, "min_docs": 5}}))
            .await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let d: Value = r.json().await.unwrap();
    assert_eq!(d["settings"]["index"]["boilerplate"]["enabled"], true);
    assert_eq!(d["settings"]["index"]["boilerplate"]["share"], 0.05);
    let common = get_json(&app, "/collections/bp/boilerplate").await;
    assert_eq!(common["documents"], 30);
    assert_eq!(common["threshold_docs"], 5);
    assert!(common["boilerplate_shingles"].as_u64().unwrap() > 100);
    problem(
        patch(json!({"boilerplate": {"share": 0}})).await,
        422,
        "invalid-settings",
    )
    .await;
    problem(
        patch(json!({"boilerplate": {"min_docs": 1}})).await,
        422,
        "invalid-settings",
    )
    .await;
    let r = patch(json!({"boilerplate": {"enabled": false}})).await;
    assert_eq!(r.status(), 200);
    problem(
        app.get("/collections/bp/boilerplate").await,
        409,
        "boilerplate-off",
    )
    .await;
}

#[tokio::test]
async fn the_cli_dedups_on_content_scores_as_the_server_does() {
    let app = spawn_app_with(settings()).await;
    let arts = articles();
    let mut texts = BTreeMap::new();
    for (i, a) in arts.iter().enumerate() {
        texts.insert(format!("a{i:02}"), format!("{a}\n\n{}", FOOTERS[i % 3]));
        texts.insert(
            format!("r{i:02}"),
            format!("{a}\n\n{}", FOOTERS[(i + 1) % 3]),
        );
    }
    for (i, t) in short_posts(60).into_iter().enumerate() {
        texts.insert(format!("p{i:02}"), t);
    }
    post_all(&app, &texts).await;
    let lines: Vec<String> = texts
        .iter()
        .map(|(id, t)| json!({"id": id, "text": t}).to_string())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("corpus.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let mut cmd = crate::helpers::neardup();
    cmd.args([
        "dedup",
        "-q",
        "--pairs",
        "--score",
        "content",
        "--threshold",
        "0.8",
    ]);
    let out = cmd.arg(&file).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("content Jaccard"), "{stderr}");
    let served = app
        .client
        .get(app.read_url("/duplicates/pairs?score=content&threshold=0.8"))
        .header("accept", "application/x-ndjson")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let sorted = |s: &str| {
        let mut l: Vec<String> = s.lines().map(str::to_owned).collect();
        l.sort();
        l
    };
    let offline = String::from_utf8(out.stdout).unwrap();
    assert_eq!(sorted(&offline), sorted(&served));
    // Every article with its reprint, and nothing the footers alone make.
    assert_eq!(offline.lines().count(), arts.len(), "{offline}");
}

#[tokio::test]
async fn the_threshold_histogram_is_drawn_on_content_scores() {
    let app = spawn_app_with(settings()).await;
    let posts = short_posts(60);
    let high = |h: &Value| -> u64 {
        h["histograms"][0]["bins"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["lo"].as_f64().unwrap() >= 0.5)
            .map(|b| b["count"].as_u64().unwrap())
            .sum()
    };
    let mut answers = Vec::new();
    for score in ["raw", "content"] {
        let r = app
            .post_json(
                "/analysis/histogram",
                &json!({"texts": posts, "k": [3], "score": score}),
            )
            .await;
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
        let h: Value = r.json().await.unwrap();
        assert_eq!(h["score"], score);
        answers.push(h);
    }
    // 60 posts, three footers: the 3 × 190 pairs that share one.
    assert!(high(&answers[0]) > 400, "{}", answers[0]);
    assert_eq!(high(&answers[1]), 0, "{}", answers[1]);
    assert_eq!(answers[0]["histograms"][0]["pairs"], 60 * 59 / 2);
    assert_eq!(answers[1]["histograms"][0]["pairs"], 60 * 59 / 2);
}

/// A company's description of itself, at the bottom of every ad.
const ABOUT: &str = "About us: Harbourside Analytics is an award-winning consultancy that \
    helps public bodies and charities across the United Kingdom make better decisions with \
    data. Founded in 2009, we employ 240 people in five offices and were named one of the \
    “Best Small Employers” of 2025. We offer hybrid working, 28 days’ holiday, a £1,200 \
    learning budget and an employer pension contribution of 8%. We welcome applications \
    from everyone.";

#[tokio::test]
async fn job_ads_sharing_the_company_blurb_pair_only_when_the_role_is_the_same() {
    let app = spawn_app_with(settings()).await;
    let w = corpus_words();
    let mut texts = BTreeMap::new();
    for i in 0..60 {
        let len = 15 + (i * 7) % 21;
        let role = w[i * 45..i * 45 + len].join(" ");
        texts.insert(
            format!("ad{i:02}"),
            format!("Location: London. {role}\n\n{ABOUT}"),
        );
    }
    // Five ads copied for another office: only the place differs.
    for i in 0..5 {
        let copy = texts[&format!("ad{i:02}")].replacen("London", "Leeds", 1);
        texts.insert(format!("ad{i:02}-leeds"), copy);
    }
    post_all(&app, &texts).await;
    let reference = Reference::new(&texts, 0.05, 10, 50);
    let ids: Vec<&String> = reference.sets.keys().collect();
    let mut want = BTreeSet::new();
    let mut raw = 0;
    for (i, a) in ids.iter().enumerate() {
        for b in &ids[i + 1..] {
            let (sa, sb) = (&reference.sets[*a], &reference.sets[*b]);
            raw += usize::from(raw_jaccard(sa, sb) >= 0.5);
            if reference.scores(sa, sb).0 >= 0.5 {
                want.insert(((*a).clone(), (*b).clone()));
            }
        }
    }
    assert!(raw > 1000, "the blurb pairs every ad on raw Jaccard: {raw}");
    let expected: BTreeSet<(String, String)> = (0..5)
        .map(|i| (format!("ad{i:02}"), format!("ad{i:02}-leeds")))
        .collect();
    assert_eq!(want, expected, "the test's own content scores");
    let pairs = get_json(&app, "/duplicates/pairs?score=content&threshold=0.5").await;
    let got: BTreeSet<(String, String)> = pairs["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["a"].as_str().unwrap().to_owned(),
                p["b"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(got, expected, "{pairs}");
    // The groups: the same five, each member with the content scores it
    // was grouped by (and its raw ones).
    let groups = get_json(&app, "/duplicates?score=content&threshold=0.5").await;
    assert_eq!(groups["score"], "content");
    assert_eq!(groups["total_groups"], 5, "{groups}");
    for g in groups["groups"].as_array().unwrap() {
        for m in g["members"].as_array().unwrap() {
            let (a, b) = (m["id"].as_str().unwrap(), m["best_match"].as_str().unwrap());
            let (j, ab, ba) = reference.scores(&reference.sets[a], &reference.sets[b]);
            assert!(
                (m["content"]["jaccard"].as_f64().unwrap() - j).abs() < 0.01,
                "{m}"
            );
            assert!(
                (m["content"]["containment"].as_f64().unwrap() - ab.max(ba)).abs() < 0.01,
                "{m}"
            );
            assert!(
                m["jaccard"].as_f64().unwrap() > j,
                "the blurb lifts raw: {m}"
            );
        }
    }
    let raw = get_json(&app, "/duplicates?measure=containment&threshold=0.5").await;
    assert!(raw["groups"][0]["members"][0].get("content").is_none());
}
