//! `/collections`: creating, listing, changing and deleting collections,
//! their names and settings, their limit, and two collections with
//! different recipes answering independently, each equal to brute force
//! for its own recipe.

use crate::helpers::{
    assert_problem, reference_normalize, reference_word_shingles, spawn_app, spawn_app_with,
    test_settings, TestApp,
};
use neardup::http::COLLECTION_ROUTES;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

async fn put(app: &TestApp, name: &str, body: Value) -> reqwest::Response {
    app.client
        .put(app.url(&format!("/collections/{name}")))
        .json(&body)
        .send()
        .await
        .unwrap()
}

async fn send(app: &TestApp, method: Method, path: &str, body: Option<Value>) -> reqwest::Response {
    let mut req = app.client.request(method, app.url(path));
    match body {
        // An export's NDJSON (POST /import).
        Some(Value::String(lines)) => {
            req = req
                .header("content-type", "application/x-ndjson")
                .body(lines);
        }
        Some(body) => req = req.json(&body),
        None => {}
    }
    req.send().await.unwrap()
}

/// An export of no documents under the default recipe: a valid import
/// body for any collection with that recipe.
pub(crate) const IMPORT_HEADER: &str = r#"{"neardup_export":1,"collection":"default","recipe":{"shingle":{"kind":"word","k":3,"multiset":false},"normalize":{"version":2,"nfkc":true,"lowercase":true,"strip_punctuation":true,"fold_accents":false,"confusables":false},"seed":1},"documents":0}"#;

/// One request per collection route (unprefixed), valid for any collection.
fn collection_requests() -> Vec<(Method, String, Option<Value>)> {
    let requests: Vec<(Method, String, Option<Value>)> = vec![
        (
            Method::POST,
            "/documents".into(),
            Some(json!({"text": "a b c d"})),
        ),
        (
            Method::POST,
            "/documents/batch".into(),
            Some(json!({"documents": []})),
        ),
        (Method::GET, "/documents/x".into(), None),
        (
            Method::PUT,
            "/documents/x".into(),
            Some(json!({"text": "a b c d"})),
        ),
        (Method::DELETE, "/documents/x".into(), None),
        (Method::GET, "/similar?id=x".into(), None),
        (
            Method::POST,
            "/similar".into(),
            Some(json!({"text": "a b c d"})),
        ),
        (Method::GET, "/compare?a=x&b=y".into(), None),
        (
            Method::POST,
            "/explain".into(),
            Some(json!({"a": {"text": "a b c d"}, "b": {"text": "a b c e"}})),
        ),
        (
            Method::POST,
            "/passages".into(),
            Some(json!({"text": "a b c d"})),
        ),
        (
            Method::POST,
            "/snippets".into(),
            Some(json!({"ids": ["x"]})),
        ),
        (Method::GET, "/templates".into(), None),
        (
            Method::PUT,
            "/templates/x".into(),
            Some(json!({"text": "a b c d"})),
        ),
        (Method::GET, "/boilerplate".into(), None),
        (
            Method::POST,
            "/analysis/histogram".into(),
            Some(json!({"texts": ["a b c d", "a b c e"], "k": [2]})),
        ),
        (
            Method::POST,
            "/analysis/accuracy".into(),
            Some(json!({"texts": ["a b c d", "a b c e"], "k": [2], "num_perm": [16]})),
        ),
        (Method::GET, "/duplicates".into(), None),
        (Method::GET, "/duplicates/pairs".into(), None),
        (Method::GET, "/duplicates/drop-list".into(), None),
        (Method::GET, "/stats".into(), None),
        (Method::GET, "/export".into(), None),
        (
            Method::POST,
            "/import".into(),
            Some(Value::String(IMPORT_HEADER.into())),
        ),
        (Method::GET, "/webhooks".into(), None),
        (
            Method::POST,
            "/webhooks".into(),
            Some(json!({"url": "https://hooks.example.com/x"})),
        ),
        (Method::GET, "/webhooks/x".into(), None),
        (Method::GET, "/webhooks/x/failed".into(), None),
        (
            Method::POST,
            "/webhooks/x/failed/retry".into(),
            Some(json!({})),
        ),
        (Method::GET, "/events".into(), None),
        (Method::GET, "/review/queue".into(), None),
        (Method::GET, "/review/precision".into(), None),
        (
            Method::PUT,
            "/review/decisions".into(),
            Some(json!({"a": "x", "b": "y", "verdict": "related"})),
        ),
        (Method::GET, "/review/decisions".into(), None),
        (Method::GET, "/review/decision?a=x&b=y".into(), None),
        (Method::DELETE, "/review/decision?a=x&b=y".into(), None),
    ];
    let routes: BTreeSet<&str> = requests
        .iter()
        .map(|(_, p, _)| {
            let path = p.split('?').next().unwrap();
            if path == "/documents/x" {
                "/documents/{id}"
            } else if path == "/templates/x" {
                "/templates/{id}"
            } else if let Some(rest) = path.strip_prefix("/webhooks/x") {
                match rest {
                    "" => "/webhooks/{id}",
                    "/failed" => "/webhooks/{id}/failed",
                    _ => "/webhooks/{id}/failed/retry",
                }
            } else {
                COLLECTION_ROUTES.iter().find(|r| **r == path).unwrap()
            }
        })
        .collect();
    assert_eq!(
        routes.len(),
        COLLECTION_ROUTES.len(),
        "every collection route"
    );
    requests
}

#[tokio::test]
async fn a_collection_is_created_listed_shown_changed_and_deleted() {
    let app = spawn_app().await;
    let titles = json!({"shingle": {"kind": "char", "k": 5}, "index": {"threshold": 0.7},
                        "retention": {"ttl_secs": 2592000}});
    let resp = put(&app, "titles", titles.clone()).await;
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.headers()["location"], "/collections/titles");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["name"], "titles");
    assert_eq!(body["status"], "ready");
    assert_eq!(body["documents"], 0);
    // What the body left out comes from the server's configuration.
    assert_eq!(
        body["settings"],
        json!({"shingle": {"kind": "char", "k": 5, "multiset": false},
               "normalize": {"version": 2, "nfkc": true, "lowercase": true, "strip_punctuation": true,
                             "fold_accents": false, "confusables": false},
               "index": {"num_perm": 128, "seed": 1, "threshold": 0.7, "bands": null,
                         "rows": null, "max_candidates": 10000, "passage_index": false,
                         "common_fingerprint_docs": 1000,
                         "boilerplate": {"enabled": false, "share": 0.05, "min_docs": 10,
                                         "min_collection_docs": 50}},
               "retention": {"ttl_secs": 2592000},
               "store_text": false,
               "originals": {"time_field": null},
               "events": {"feed": false, "measure": "jaccard", "score": "raw", "threshold": null},
               "review": {"exclude_not_duplicates": false, "snippet_field": null}})
    );
    assert!(body["derived"]["min_query_threshold"].as_f64().unwrap() < 0.7);

    // The same settings again, given fully or partly: 200, nothing changes.
    let resp = put(&app, "titles", titles.clone()).await;
    assert_eq!(resp.status(), 200);
    let resp = put(&app, "titles", body["settings"].clone()).await;
    assert_eq!(resp.status(), 200);
    // Other settings: 409 naming the first key that differs.
    let resp = put(&app, "titles", json!({"shingle": {"kind": "char", "k": 4}})).await;
    let problem = assert_problem(resp, 409).await;
    assert_eq!(problem["type"], "urn:neardup:problem:collection-conflict");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("shingle.k is 5, the request asks for 4"),
        "{problem}"
    );
    // The retention differs from the defaults only there.
    let resp = put(
        &app,
        "titles",
        json!({"shingle": {"kind": "char", "k": 5}, "index": {"threshold": 0.7}}),
    )
    .await;
    let problem = assert_problem(resp, 409).await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("retention.ttl_secs"),
        "{problem}"
    );

    // Listed (default first, by name), and shown with its statistics.
    let list = app.get_json("/collections").await;
    let names: Vec<&str> = list["collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "titles"]);
    app.post_json(
        "/collections/titles/documents",
        &json!({"id": "t1", "text": "Café au lait — £3"}),
    )
    .await;
    let shown = app.get_json("/collections/titles").await;
    assert_eq!(shown["documents"], 1);
    assert_eq!(shown["stats"]["collection"], "titles");
    assert_eq!(shown["stats"]["documents"], 1);
    assert_eq!(shown["stats"]["shingle"]["kind"], "char");
    assert_eq!(shown["stats"]["retention"]["ttl_secs"], 2592000);
    assert_eq!(app.stats().await["documents"], 0, "default is apart");

    // PATCH changes the retention, and nothing else.
    let resp = send(
        &app,
        Method::PATCH,
        "/collections/titles",
        Some(json!({"retention": {"ttl_secs": 60}})),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["settings"]["retention"]["ttl_secs"], 60);
    assert_eq!(
        app.get_json("/collections/titles/stats").await["retention"]["ttl_secs"],
        60
    );
    for bad in [
        json!({"retention": {}}),
        json!({"retention": {"ttl_secs": 60}, "shingle": {"k": 4}}),
        json!({"shingle": {"k": 4}}),
        json!({"retention": {"ttl_secs": -1}}),
    ] {
        let resp = send(
            &app,
            Method::PATCH,
            "/collections/titles",
            Some(bad.clone()),
        )
        .await;
        let problem = assert_problem(resp, 422).await;
        assert!(
            problem["detail"]
                .as_str()
                .unwrap()
                .contains("PATCH changes only"),
            "{bad}: {problem}"
        );
    }
    let resp = send(
        &app,
        Method::PATCH,
        "/collections/titles",
        Some(json!({"retention": {"ttl_secs": 0}})),
    )
    .await;
    assert_problem(resp, 422).await;
    let resp = send(
        &app,
        Method::PATCH,
        "/collections/titles",
        Some(json!({"retention": {"ttl_secs": null}})),
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        app.get_json("/collections/titles").await["settings"]["retention"]["ttl_secs"],
        Value::Null
    );

    // default cannot be deleted, nor its retention changed over HTTP.
    let problem = assert_problem(
        send(&app, Method::DELETE, "/collections/default", None).await,
        409,
    )
    .await;
    assert_eq!(problem["type"], "urn:neardup:problem:collection-protected");
    let resp = send(
        &app,
        Method::PATCH,
        "/collections/default",
        Some(json!({"retention": {"ttl_secs": 60}})),
    )
    .await;
    assert_eq!(
        assert_problem(resp, 409).await["type"],
        "urn:neardup:problem:collection-protected"
    );
    // default's settings are the configuration's: PUT with them is a 200.
    assert_eq!(put(&app, "default", json!({})).await.status(), 200);

    // Deleted: 204, then 404 on every route of it, also its own.
    assert_eq!(
        send(&app, Method::DELETE, "/collections/titles", None)
            .await
            .status(),
        204
    );
    let problem = assert_problem(app.get("/collections/titles").await, 404).await;
    assert_eq!(problem["type"], "urn:neardup:problem:collection-not-found");
    assert_problem(
        send(&app, Method::DELETE, "/collections/titles", None).await,
        404,
    )
    .await;
    assert_problem(
        send(
            &app,
            Method::PATCH,
            "/collections/titles",
            Some(json!({"retention": {"ttl_secs": 1}})),
        )
        .await,
        404,
    )
    .await;
    for (method, path, body) in collection_requests() {
        let resp = send(
            &app,
            method.clone(),
            &format!("/collections/titles{path}"),
            body,
        )
        .await;
        let problem = assert_problem(resp, 404).await;
        assert_eq!(
            problem["type"], "urn:neardup:problem:collection-not-found",
            "{method} {path}"
        );
    }
    let dir = app.data_dir.as_ref().unwrap().path();
    assert!(
        !dir.join("collections/titles").exists(),
        "its files are gone"
    );
    // The name is free again, for other settings, and starts empty.
    assert_eq!(put(&app, "titles", json!({})).await.status(), 201);
    assert_eq!(
        app.get_json("/collections/titles/stats").await["documents"],
        0
    );
}

#[tokio::test]
async fn names_outside_the_rule_are_400_on_every_route_and_64_characters_are_fine() {
    let app = spawn_app().await;
    let long_ok = "a".repeat(64);
    assert_eq!(put(&app, &long_ok, json!({})).await.status(), 201);
    assert_eq!(put(&app, "t_1-x", json!({})).await.status(), 201);
    let too_long = "a".repeat(65);
    for bad in [
        "Titles",
        "a.b",
        "caf%C3%A9",
        "a%20b",
        "-..-",
        too_long.as_str(),
        "a%2Fb",
    ] {
        for (method, path, body) in [
            (Method::PUT, String::new(), Some(json!({}))),
            (Method::GET, String::new(), None),
            (
                Method::PATCH,
                String::new(),
                Some(json!({"retention": {"ttl_secs": 1}})),
            ),
            (Method::DELETE, String::new(), None),
        ]
        .into_iter()
        .chain(collection_requests())
        {
            let url = format!("/collections/{bad}{path}");
            let resp = send(&app, method.clone(), &url, body).await;
            assert_eq!(resp.status(), 400, "{method} {url}");
            let problem = assert_problem(resp, 400).await;
            assert_eq!(
                problem["type"], "urn:neardup:problem:invalid-collection-name",
                "{method} {url}: {problem}"
            );
        }
    }
    // Nothing was created by the refused requests.
    let list = app.get_json("/collections").await;
    assert_eq!(list["collections"].as_array().unwrap().len(), 3, "{list}");
}

#[tokio::test]
async fn settings_that_cannot_work_are_422_naming_the_key() {
    let app = spawn_app().await;
    for (body, names) in [
        (json!({"index": {"threshold": 1.5}}), "index.threshold"),
        (json!({"index": {"threshold": 0}}), "index.threshold"),
        (json!({"index": {"num_perm": 0}}), "num_perm"),
        (json!({"index": {"num_perm": 2048}}), "num_perm"),
        (json!({"index": {"bands": 4}}), "bands"),
        (json!({"index": {"bands": 40, "rows": 4}}), "bands"),
        (json!({"index": {"max_candidates": 0}}), "max_candidates"),
        (json!({"shingle": {"k": 0}}), "k"),
        (json!({"shingle": {"k": 65}}), "k"),
        (json!({"shingle": {"kind": "sentence"}}), "sentence"),
        (json!({"shingle": {"size": 3}}), "size"),
        (json!({"retention": {"ttl_secs": 0}}), "retention.ttl_secs"),
        (
            json!({"retention": {"ttl_secs": 3155760001u64}}),
            "retention.ttl_secs",
        ),
        (json!({"colour": "blue"}), "colour"),
        (json!({"shingle": {"k": 2.5}}), "2.5"),
    ] {
        let resp = put(&app, "c", body.clone()).await;
        let problem = assert_problem(resp, 422).await;
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains(names), "{body}: {detail}");
    }
    assert_problem(
        app.client
            .put(app.url("/collections/c"))
            .header("content-type", "application/json")
            .body("{not json")
            .send()
            .await
            .unwrap(),
        400,
    )
    .await;
    // Whole numbers written as floats are integers, as JSON Schema says.
    let resp = put(
        &app,
        "c",
        json!({"shingle": {"k": 4.0}, "index": {"num_perm": 64.0}}),
    )
    .await;
    assert_eq!(resp.status(), 201);
    assert_eq!(
        app.get_json("/collections/c").await["settings"]["shingle"]["k"],
        4
    );
    assert_eq!(
        app.get_json("/collections").await["collections"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn limits_max_collections_counts_default_and_frees_a_place_on_delete() {
    let mut settings = test_settings();
    settings.limits.max_collections = 3;
    let app = spawn_app_with(settings).await;
    assert_eq!(put(&app, "a", json!({})).await.status(), 201);
    assert_eq!(put(&app, "b", json!({})).await.status(), 201);
    let problem = assert_problem(put(&app, "c", json!({})).await, 409).await;
    assert_eq!(problem["type"], "urn:neardup:problem:too-many-collections");
    assert!(problem["detail"]
        .as_str()
        .unwrap()
        .contains("limits.max_collections"));
    // An existing one is still answered as usual.
    assert_eq!(put(&app, "a", json!({})).await.status(), 200);
    assert_eq!(
        send(&app, Method::DELETE, "/collections/a", None)
            .await
            .status(),
        204
    );
    assert_eq!(put(&app, "c", json!({})).await.status(), 201);
}

/// `default` was created on the first start on its data directory, not at
/// each start: its `created_at` stays put across restarts.
#[tokio::test]
async fn the_default_collections_creation_time_survives_a_restart() {
    use neardup::engine::ManualClock;
    if crate::REDIS {
        // Each node keeps it in its own data directory (the reading node
        // of these suites gets a fresh one at each start): not shared
        // through Redis yet.
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut settings = test_settings();
    settings.storage.data_dir = dir.path().to_owned();
    let clock = std::sync::Arc::new(ManualClock::default());
    let app = crate::helpers::spawn_app_with_clock(settings.clone(), clock.clone()).await;
    let before = app.get_json("/collections/default").await["created_at"].clone();
    assert!(before.is_string(), "{before}");
    app.stop().await.unwrap();

    clock.advance(std::time::Duration::from_secs(3600));
    let app = crate::helpers::spawn_app_with_clock(settings, clock.clone()).await;
    assert_eq!(
        app.get_json("/collections/default").await["created_at"],
        before
    );
    let listed = app.get_json("/collections").await;
    let default = listed["collections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "default")
        .cloned()
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(default["created_at"], before, "{listed}");
}

#[tokio::test]
async fn collections_survive_a_restart_with_their_settings_and_documents() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = test_settings();
    settings.storage.data_dir = dir.path().to_owned();
    let app = spawn_app_with(settings.clone()).await;
    put(
        &app,
        "titles",
        json!({"shingle": {"kind": "char", "k": 5}, "index": {"threshold": 0.7}}),
    )
    .await;
    put(&app, "gone", json!({})).await;
    app.post_json(
        "/collections/titles/documents",
        &json!({"id": "t", "text": "Müller’s “café” in Zürich"}),
    )
    .await;
    app.post_json(
        "/collections/gone/documents",
        &json!({"id": "g", "text": "a b c d"}),
    )
    .await;
    assert_eq!(
        send(&app, Method::DELETE, "/collections/gone", None)
            .await
            .status(),
        204
    );
    let before = app.get_json("/collections/titles").await;
    app.stop().await.unwrap();

    let app = spawn_app_with(settings).await;
    let after = app.get_json("/collections/titles").await;
    assert_eq!(after["settings"], before["settings"]);
    assert_eq!(after["created_at"], before["created_at"]);
    assert_eq!(after["documents"], 1);
    assert_eq!(
        app.get_json("/collections/titles/documents/t").await["id"],
        "t"
    );
    assert_problem(app.get("/collections/gone").await, 404).await;
    // The server's defaults changing later does not change a collection
    // (defaults that `default`'s data allows: a `default` that cannot be
    // restored under its new recipe stops the start, see tests/api/crash.rs).
    app.stop().await.unwrap();
    let mut changed = test_settings();
    changed.storage.data_dir = dir.path().to_owned();
    changed.index.threshold = 0.9;
    changed.retention.ttl_secs = Some(3600);
    let app = spawn_app_with(changed).await;
    assert_eq!(
        app.get_json("/collections/titles").await["settings"],
        before["settings"]
    );
}

// -- two recipes against brute force ------------------------------------------

/// Distinct character k-shingles of the normalized text, spaces included
/// (one shingle of everything if shorter than k).
fn reference_char_shingles(text: &str, k: usize) -> BTreeSet<String> {
    let chars: Vec<char> = reference_normalize(text).chars().collect();
    if chars.is_empty() {
        return BTreeSet::new();
    }
    if chars.len() < k {
        return BTreeSet::from([chars.iter().collect()]);
    }
    chars.windows(k).map(|w| w.iter().collect()).collect()
}

fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let inter = a.intersection(b).count();
    inter as f64 / (a.len() + b.len() - inter) as f64
}

/// Every pair (a < b) of `docs` at or above `t` under `shingles`.
fn brute_pairs(
    docs: &[(String, String)],
    shingles: impl Fn(&str) -> BTreeSet<String>,
    t: f64,
) -> BTreeMap<(String, String), f64> {
    let sets: Vec<_> = docs.iter().map(|(id, text)| (id, shingles(text))).collect();
    let mut out = BTreeMap::new();
    for (i, (a, sa)) in sets.iter().enumerate() {
        for (b, sb) in &sets[i + 1..] {
            let j = jaccard(sa, sb);
            if j >= t {
                let key = if a < b {
                    (a.to_string(), b.to_string())
                } else {
                    (b.to_string(), a.to_string())
                };
                out.insert(key, j);
            }
        }
    }
    out
}

async fn served_pairs(app: &TestApp, collection: &str) -> BTreeMap<(String, String), f64> {
    let body = app
        .get_json(&format!("/collections/{collection}/duplicates/pairs"))
        .await;
    body["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let (a, b) = (
                p["a"].as_str().unwrap().to_owned(),
                p["b"].as_str().unwrap().to_owned(),
            );
            let key = if a < b { (a, b) } else { (b, a) };
            (key, p["jaccard"].as_f64().unwrap())
        })
        .collect()
}

#[tokio::test]
async fn two_recipes_answer_independently_each_as_brute_force_says() {
    let app = spawn_app().await;
    put(
        &app,
        "words",
        json!({"shingle": {"kind": "word", "k": 3}, "index": {"threshold": 0.8}}),
    )
    .await;
    put(
        &app,
        "chars",
        json!({"shingle": {"kind": "char", "k": 5}, "index": {"threshold": 0.7}}),
    )
    .await;
    // The same ids and texts in both: planted families of word edits and
    // the question pairs whose char-5 and word-3 similarities differ.
    let mut docs = neardup::testkit::families(11, 60, 12);
    for (i, q) in neardup::testkit::QUESTION_PAIRS.iter().enumerate() {
        docs.push((format!("q{i}a"), q.a.to_owned()));
        docs.push((format!("q{i}b"), q.b.to_owned()));
    }
    let batch: Vec<Value> = docs
        .iter()
        .map(|(id, text)| json!({"id": id, "text": text}))
        .collect();
    for c in ["words", "chars"] {
        let resp = app
            .post_json(
                &format!("/collections/{c}/documents/batch"),
                &json!({"documents": batch}),
            )
            .await;
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.json::<Value>().await.unwrap()["created"], docs.len());
    }
    let words = brute_pairs(&docs, |t| reference_word_shingles(t, 3), 0.8);
    let chars = brute_pairs(&docs, |t| reference_char_shingles(t, 5), 0.7);
    assert_ne!(
        words, chars,
        "the recipes must disagree for the test to mean anything"
    );
    assert!(
        chars.contains_key(&("q2a".into(), "q2b".into())),
        "manipulation mean(s)"
    );
    assert!(!words.contains_key(&("q2a".into(), "q2b".into())));
    for (collection, truth) in [("words", &words), ("chars", &chars)] {
        let served = served_pairs(&app, collection).await;
        assert_eq!(served.len(), truth.len(), "{collection}");
        for (pair, j) in truth {
            let got = served
                .get(pair)
                .unwrap_or_else(|| panic!("{collection}: {pair:?} missing"));
            assert!(
                (got - j).abs() < 1e-12,
                "{collection} {pair:?}: {got} vs {j}"
            );
        }
    }
    // /similar and /compare agree, per id, each with its own recipe.
    for (i, q) in neardup::testkit::QUESTION_PAIRS.iter().enumerate() {
        let (a, b) = (format!("q{i}a"), format!("q{i}b"));
        let w = app
            .get_json(&format!("/collections/words/compare?a={a}&b={b}"))
            .await;
        let c = app
            .get_json(&format!("/collections/chars/compare?a={a}&b={b}"))
            .await;
        assert!(
            (w["jaccard"].as_f64().unwrap() - q.word3).abs() < 1e-4,
            "{w}"
        );
        assert!(
            (c["jaccard"].as_f64().unwrap() - q.char5).abs() < 1e-4,
            "{c}"
        );
        for (collection, t, expected) in [
            ("words", 0.8, q.word3 >= 0.8),
            ("chars", 0.7, q.char5 >= 0.7),
        ] {
            let body = app
                .get_json(&format!(
                    "/collections/{collection}/similar?id={a}&threshold={t}"
                ))
                .await;
            let found = body["results"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["id"] == b.as_str());
            assert_eq!(found, expected, "{collection} {a}: {body}");
        }
    }
    // The default collection holds none of it.
    assert_eq!(app.stats().await["documents"], 0);
    // And each collection's threshold floor is its own.
    let resp = app
        .get("/collections/chars/similar?id=q0a&threshold=0.65")
        .await;
    assert_eq!(resp.status(), 200);
    let resp = app
        .get("/collections/words/similar?id=q0a&threshold=0.65")
        .await;
    assert_eq!(
        assert_problem(resp, 400).await["type"],
        "urn:neardup:problem:threshold-below-tuning"
    );
}

#[tokio::test]
async fn a_retention_change_applies_at_once_and_never_brings_an_expired_document_back() {
    use neardup::engine::ManualClock;
    use std::time::Duration;
    let clock = std::sync::Arc::new(ManualClock::default());
    let app = crate::helpers::spawn_app_with_clock(test_settings(), clock.clone()).await;
    put(&app, "ads", json!({"retention": {"ttl_secs": 3600}})).await;
    let doc = |id: &str| json!({"id": id, "text": format!("flat to let {id} near the old town")});
    let url = "/collections/ads/documents";
    assert_eq!(app.post_json(url, &doc("a")).await.status(), 201);
    clock.advance(Duration::from_secs(30 * 60));
    assert_eq!(app.post_json(url, &doc("b")).await.status(), 201);
    let patch = |ttl: Value| {
        send(
            &app,
            Method::PATCH,
            "/collections/ads",
            Some(json!({"retention": {"ttl_secs": ttl}})),
        )
    };
    // Twenty minutes: `a` (thirty minutes old) is gone at once.
    assert_eq!(patch(json!(1200)).await.status(), 200);
    assert_problem(app.get("/collections/ads/documents/a").await, 404).await;
    assert_eq!(app.get("/collections/ads/documents/b").await.status(), 200);
    // No retention: `b` no longer expires, `a` does not come back.
    assert_eq!(patch(Value::Null).await.status(), 200);
    assert_problem(app.get("/collections/ads/documents/a").await, 404).await;
    let b = app.get_json("/collections/ads/documents/b").await;
    assert_eq!(b["expires_at"], Value::Null);
    // A minute, and two minutes later `b` is gone too.
    assert_eq!(patch(json!(60)).await.status(), 200);
    clock.advance(Duration::from_secs(120));
    assert_problem(app.get("/collections/ads/documents/b").await, 404).await;
    assert_eq!(
        app.get_json("/collections/ads").await["settings"]["retention"]["ttl_secs"],
        60
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn collections_come_and_go_while_others_ingest_and_answer() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let app = Arc::new(spawn_app().await);
    put(
        &app,
        "steady",
        json!({"shingle": {"kind": "char", "k": 5}, "index": {"threshold": 0.7}}),
    )
    .await;
    let stop = Arc::new(AtomicBool::new(false));
    let docs = neardup::testkit::families(5, 300, 30);
    let mut tasks = Vec::new();
    // Writers: every document into default and steady, in batches.
    for prefix in ["", "/collections/steady"] {
        let (app, docs) = (Arc::clone(&app), docs.clone());
        tasks.push(tokio::spawn(async move {
            for chunk in docs.chunks(25) {
                let batch: Vec<Value> = chunk
                    .iter()
                    .map(|(id, t)| json!({"id": id, "text": t}))
                    .collect();
                let resp = app
                    .post_json(
                        &format!("{prefix}/documents/batch"),
                        &json!({"documents": batch}),
                    )
                    .await;
                assert_eq!(resp.status(), 200, "{prefix}");
                let body: Value = resp.json().await.unwrap();
                assert_eq!(body["failed"], 0, "{body}");
            }
        }));
    }
    // A reader of both.
    {
        let (app, stop, docs) = (Arc::clone(&app), Arc::clone(&stop), docs.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let (_, text) = &docs[i % docs.len()];
                for prefix in ["", "/collections/steady"] {
                    let resp = app
                        .post_json(&format!("{prefix}/similar"), &json!({"text": text}))
                        .await;
                    assert_eq!(resp.status(), 200);
                }
                i += 1;
            }
        }));
    }
    // Collections created, filled, queried and deleted meanwhile.
    let ddl = {
        let (app, stop) = (Arc::clone(&app), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) || n < 5 {
                let name = format!("tmp-{n}");
                assert_eq!(
                    put(&app, &name, json!({"index": {"threshold": 0.9}}))
                        .await
                        .status(),
                    201
                );
                let batch: Vec<Value> = (0..50).map(|i| json!({"id": format!("t{i}"), "text": format!("short lived text {i} of {n}")})).collect();
                let resp = app
                    .post_json(
                        &format!("/collections/{name}/documents/batch"),
                        &json!({"documents": batch}),
                    )
                    .await;
                assert_eq!(resp.status(), 200);
                let stats = app.get_json(&format!("/collections/{name}/stats")).await;
                assert_eq!(stats["documents"], 50);
                let resp = app.get(&format!("/collections/{name}/duplicates")).await;
                assert_eq!(resp.status(), 200);
                assert_eq!(
                    send(&app, Method::DELETE, &format!("/collections/{name}"), None)
                        .await
                        .status(),
                    204
                );
                assert_eq!(
                    app.get(&format!("/collections/{name}/stats"))
                        .await
                        .status(),
                    404
                );
                n += 1;
            }
            n
        })
    };
    let reader = tasks.pop().unwrap();
    for t in tasks {
        t.await.expect("a writer");
    }
    stop.store(true, Ordering::Relaxed);
    reader.await.expect("the reader");
    let rounds = ddl.await.expect("the collection task");
    assert!(rounds >= 5);
    // Both collections hold every document, and answer as before.
    assert_eq!(app.stats().await["documents"], docs.len());
    assert_eq!(
        app.get_json("/collections/steady/stats").await["documents"],
        docs.len()
    );
    let list = app.get_json("/collections").await;
    let names: Vec<&str> = list["collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "steady"]);
    if crate::REDIS {
        // Their keys go in the background, once no node can still be
        // writing to them.
        let cluster = crate::helpers::shared_cluster();
        let mut left = Vec::new();
        for _ in 0..100 {
            left = cluster.keys("*:tmp-*").unwrap();
            left.extend(cluster.keys("{*:tmp-*").unwrap());
            if left.is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(left.is_empty(), "deleted collections left keys: {left:?}");
    } else {
        let dir = app.data_dir.as_ref().unwrap().path().join("collections");
        let left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ["steady"], "deleted collections left nothing");
    }
    let metrics = app.metrics().await;
    // A deleted collection's series go (the request counters aside).
    let stale: Vec<&str> = metrics
        .lines()
        .filter(|l| l.contains("collection=\"tmp-") && !l.starts_with("neardup_http_"))
        .collect();
    assert!(stale.is_empty(), "{}", stale.join("\n"));
}
