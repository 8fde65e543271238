//! `POST /collections/{name}/reindex`: a collection rebuilt from its stored
//! texts answers exactly like a fresh collection with the new recipe given
//! the same texts; writes during the rebuild are kept; refusals.

use crate::helpers::*;
use neardup::testkit::Articles;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

const NEW_RECIPE: &str = r#"{"shingle": {"kind": "char", "k": 5}, "normalize": {"strip_punctuation": false}, "index": {"threshold": 0.6}}"#;

fn new_recipe() -> Value {
    serde_json::from_str(NEW_RECIPE).unwrap()
}

/// `n` documents: articles with planted twins (ASCII and accented), and a
/// few texts in other scripts.
fn corpus(n: usize) -> Vec<(String, String)> {
    let a = Articles::new(7, 3000, 4);
    let mut docs: Vec<(String, String)> = (0..n)
        .map(|i| {
            let text = if i % 3 == 0 {
                a.unicode_text(i)
            } else {
                a.text(i)
            };
            (format!("d{i:05}"), text)
        })
        .collect();
    docs.extend(
        [
            (
                "x-ru",
                "Съешь же ещё этих мягких французских булок, да выпей чаю",
            ),
            (
                "x-ru2",
                "Съешь же ещё этих мягких французских булок, да выпей кофе",
            ),
            ("x-ja", "東京都の天気は晴れです。明日も晴れるでしょう"),
            ("x-ja2", "東京都の天気は晴れです。明日も晴れるでしょうか"),
            ("x-emoji", "family 👩‍👩‍👧 flag 🇫🇷 e\u{301}cole café “quoted” £3"),
            // Nothing left under a recipe that strips punctuation, but kept
            // whole under one that does not: written while the old recipe
            // keeps punctuation (see `refusals`).
        ]
        .map(|(id, t)| (id.to_owned(), t.to_owned())),
    );
    docs
}

async fn load(app: &TestApp, name: &str, docs: &[(String, String)]) {
    for chunk in docs.chunks(500) {
        let items: Vec<Value> = chunk
            .iter()
            .map(|(id, text)| json!({"id": id, "text": text}))
            .collect();
        let resp = app
            .post_json(
                &format!("/collections/{name}/documents/batch?mode=upsert"),
                &json!({"documents": items}),
            )
            .await;
        assert_eq!(resp.status(), 200);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["failed"], 0, "{body}");
    }
}

async fn reindex(app: &TestApp, name: &str, body: Value) -> reqwest::Response {
    app.post_json(&format!("/collections/{name}/reindex"), &body)
        .await
}

/// Poll the collection's stats until its reindex is no longer running.
async fn wait_done(app: &TestApp, name: &str) -> Value {
    wait_reindex_done(app, name).await
}

/// Everything a collection answers about its documents: per id, the
/// stored shingle count and its near-duplicates (ids and exact scores),
/// and the duplicate pairs.
async fn answers(app: &TestApp, name: &str, ids: &[String]) -> (BTreeMap<String, Value>, Value) {
    let mut per_id = BTreeMap::new();
    for id in ids {
        let doc = app
            .get(&format!("/collections/{name}/documents/{id}"))
            .await;
        if doc.status() == 404 {
            per_id.insert(id.clone(), Value::Null);
            continue;
        }
        let doc: Value = doc.json().await.unwrap();
        let similar = app
            .get_json(&format!(
                "/collections/{name}/similar?id={}&limit=100",
                encode(id)
            ))
            .await;
        // `created_at` is when a document was written: kept by a reindex,
        // so it differs from a fresh collection's (compared apart).
        let mut results = similar["results"].clone();
        for r in results
            .as_array_mut()
            .unwrap_or_else(|| panic!("{similar}"))
        {
            r.as_object_mut().unwrap().remove("created_at");
        }
        per_id.insert(
            id.clone(),
            json!({"shingles": doc["shingles"], "metadata": doc["metadata"],
                   "similar": results}),
        );
    }
    let body = app
        .get_json(&format!("/collections/{name}/duplicates/pairs"))
        .await;
    // In a canonical order: the scan's follows the slots.
    let mut pairs: Vec<String> = body["pairs"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|p| p.to_string())
        .collect();
    pairs.sort();
    (per_id, json!(pairs))
}

/// The two answers agree; else the first id where they differ.
fn assert_same(a: &(BTreeMap<String, Value>, Value), b: &(BTreeMap<String, Value>, Value)) {
    for (id, x) in &a.0 {
        assert_eq!(Some(x), b.0.get(id), "{id}");
    }
    assert_eq!(a.0.len(), b.0.len());
    assert_eq!(a.1, b.1, "duplicate pairs");
}

/// `created_at` of every id.
async fn created(app: &TestApp, name: &str, ids: &[String]) -> Vec<Value> {
    let mut out = Vec::new();
    for id in ids {
        let doc = app
            .get_json(&format!("/collections/{name}/documents/{id}"))
            .await;
        out.push(doc["created_at"].clone());
    }
    out
}

async fn create(app: &TestApp, name: &str, body: Value) {
    let resp = app.put_json(&format!("/collections/{name}"), &body).await;
    assert_eq!(resp.status(), 201, "{name}");
}

#[tokio::test]
async fn a_reindexed_collection_answers_exactly_like_a_fresh_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = test_settings();
    settings.storage.data_dir = dir.path().to_owned();
    let app = spawn_app_with(settings.clone()).await;
    let docs = corpus(400);
    let ids: Vec<String> = docs.iter().map(|(id, _)| id.clone()).collect();
    create(
        &app,
        "src",
        json!({"store_text": true, "retention": {"ttl_secs": 86400}}),
    )
    .await;
    load(&app, "src", &docs).await;
    let mut fresh = new_recipe();
    fresh["store_text"] = json!(true);
    fresh["retention"] = json!({"ttl_secs": 86400});
    create(&app, "fresh", fresh).await;
    load(&app, "fresh", &docs).await;
    let before = answers(&app, "src", &ids).await;
    let stamps = created(&app, "src", &ids).await;
    assert_ne!(
        before,
        answers(&app, "fresh", &ids).await,
        "the recipes differ"
    );

    let resp = reindex(&app, "src", new_recipe()).await;
    assert_eq!(resp.status(), 202);
    assert_eq!(resp.headers()["location"], "/collections/src");
    let accepted: Value = resp.json().await.unwrap();
    assert_eq!(accepted["total"], docs.len(), "{accepted}");
    assert_eq!(accepted["settings"]["shingle"]["k"], 5, "{accepted}");
    let stats = wait_done(&app, "src").await;
    assert_eq!(stats["reindex"]["state"], "done", "{stats}");
    assert_eq!(stats["reindex"]["done"], docs.len(), "{stats}");
    assert_eq!(stats["reindex"]["skipped"], 0, "{stats}");
    assert!(stats["reindex"]["finished_at"].is_string(), "{stats}");
    let fresh_stats = app.get_json("/collections/fresh/stats").await;
    for key in ["shingle", "normalize", "index", "retention", "documents"] {
        let (mut a, mut b) = (stats[key].clone(), fresh_stats[key].clone());
        if key == "index" {
            a["lsh_buckets"] = Value::Null;
            b["lsh_buckets"] = Value::Null;
        }
        assert_eq!(a, b, "{key}");
    }
    let desc = app.get_json("/collections/src").await;
    let fresh_desc = app.get_json("/collections/fresh").await;
    assert_eq!(desc["settings"], fresh_desc["settings"]);
    assert_eq!(desc["derived"], fresh_desc["derived"]);
    let expected = answers(&app, "fresh", &ids).await;
    assert_same(&answers(&app, "src", &ids).await, &expected);
    assert_eq!(created(&app, "src", &ids).await, stamps, "stamps are kept");
    // Texts come back as posted.
    for (id, text) in docs.iter().step_by(37) {
        let body = app
            .get_json(&format!("/collections/src/documents/{id}?include=text"))
            .await;
        assert_eq!(body["text"], json!(text), "{id}");
    }

    // Durable: after a restart the new recipe answers, from the new files.
    app.stop().await.unwrap();
    let app = spawn_app_with(settings).await;
    assert_eq!(
        app.get_json("/collections/src").await["settings"],
        fresh_desc["settings"]
    );
    assert_same(&answers(&app, "src", &ids).await, &expected);
    let cdir = dir.path().join("collections/src");
    let names: Vec<String> = std::fs::read_dir(&cdir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names.iter().filter(|n| n.starts_with("index-")).count(),
        1,
        "{names:?}"
    );
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("index-") || n == "collection.json"),
        "the old index files are gone: {names:?}"
    );
    // And it can be reindexed again, back to the first recipe.
    let resp = reindex(
        &app,
        "src",
        json!({"shingle": {"kind": "word", "k": 3}, "normalize": {"strip_punctuation": true}, "index": {"threshold": 0.8}}),
    )
    .await;
    assert_eq!(resp.status(), 202);
    assert_eq!(wait_done(&app, "src").await["reindex"]["state"], "done");
    assert_same(&answers(&app, "src", &ids).await, &before);
}

#[tokio::test]
async fn writes_during_a_reindex_are_kept() {
    let app = spawn_app().await;
    let docs = corpus(3000);
    create(&app, "src", json!({"store_text": true})).await;
    load(&app, "src", &docs).await;
    let resp = reindex(&app, "src", new_recipe()).await;
    assert_eq!(resp.status(), 202);
    // Writes while it runs: new documents, replacements, deletions.
    let extra = Articles::new(99, 3000, 3);
    let mut final_docs: BTreeMap<String, String> = docs.iter().cloned().collect();
    let mut during = 0;
    for i in 0..300usize {
        let running = app.get_json("/collections/src/stats").await["reindex"]["state"] == "running";
        if running {
            during += 1;
        }
        match i % 3 {
            0 => {
                let (id, text) = (format!("new{i}"), extra.unicode_text(i));
                let resp = app
                    .put_json(
                        &format!("/collections/src/documents/{id}"),
                        &json!({"text": text}),
                    )
                    .await;
                assert!(resp.status().is_success());
                final_docs.insert(id, text);
            }
            1 => {
                let id = format!("d{:05}", i * 7);
                let text = format!("{} — replaced “{i}”", extra.text(i));
                let resp = app
                    .put_json(
                        &format!("/collections/src/documents/{id}"),
                        &json!({"text": text}),
                    )
                    .await;
                assert!(resp.status().is_success());
                final_docs.insert(id, text);
            }
            _ => {
                let id = format!("d{:05}", i * 5 + 1);
                let resp = app
                    .delete(&format!("/collections/src/documents/{id}"))
                    .await;
                assert!(resp.status() == 204 || resp.status() == 404);
                final_docs.remove(&id);
            }
        }
    }
    let stats = wait_done(&app, "src").await;
    assert_eq!(stats["reindex"]["state"], "done", "{stats}");
    assert!(during > 0, "no write happened while the reindex ran");
    let mut fresh = new_recipe();
    fresh["store_text"] = json!(true);
    create(&app, "fresh", fresh).await;
    let final_docs: Vec<(String, String)> = final_docs.into_iter().collect();
    load(&app, "fresh", &final_docs).await;
    assert_eq!(
        app.get_json("/collections/src/stats").await["documents"],
        final_docs.len()
    );
    let mut ids: Vec<String> = final_docs
        .iter()
        .step_by(11)
        .map(|(id, _)| id.clone())
        .collect();
    ids.extend(
        (0..300)
            .map(|i| format!("new{i}"))
            .filter(|id| final_docs.iter().any(|(d, _)| d == id)),
    );
    ids.extend((0..300).map(|i| format!("d{:05}", i * 5 + 1)));
    ids.sort();
    ids.dedup();
    assert_same(
        &answers(&app, "src", &ids).await,
        &answers(&app, "fresh", &ids).await,
    );
}

#[tokio::test]
async fn refusals_say_why() {
    let app = spawn_app().await;
    // Not storing texts.
    create(&app, "plain", json!({})).await;
    app.put_json(
        "/collections/plain/documents/a",
        &json!({"text": "one two three four"}),
    )
    .await;
    let p = assert_problem(reindex(&app, "plain", new_recipe()).await, 409).await;
    assert_eq!(p["type"], "urn:neardup:problem:text-not-stored");
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("does not store texts"),
        "{p}"
    );
    // Storing them since a PATCH, with a document written before.
    let resp = app
        .client
        .patch(app.url("/collections/plain"))
        .json(&json!({"store_text": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let p = assert_problem(reindex(&app, "plain", new_recipe()).await, 409).await;
    assert_eq!(p["type"], "urn:neardup:problem:text-not-stored");
    assert!(p["detail"].as_str().unwrap().contains("\"a\""), "{p}");
    // Written again, it has its text: accepted.
    app.put_json(
        "/collections/plain/documents/a",
        &json!({"text": "one two three four"}),
    )
    .await;
    assert_eq!(reindex(&app, "plain", new_recipe()).await.status(), 202);
    assert_eq!(wait_done(&app, "plain").await["reindex"]["state"], "done");
    // The default collection's recipe is the configuration's.
    let p = assert_problem(reindex(&app, "default", new_recipe()).await, 409).await;
    assert_eq!(p["type"], "urn:neardup:problem:collection-protected");
    // Unknown collection, bad settings, keys a reindex does not change.
    assert_problem(reindex(&app, "nope", new_recipe()).await, 404).await;
    let p = assert_problem(
        reindex(&app, "plain", json!({"index": {"threshold": 1.5}})).await,
        422,
    )
    .await;
    assert!(
        p["detail"].as_str().unwrap().contains("index.threshold"),
        "{p}"
    );
    let p = assert_problem(
        reindex(&app, "plain", json!({"retention": {"ttl_secs": 60}})).await,
        422,
    )
    .await;
    assert!(p["detail"].as_str().unwrap().contains("retention"), "{p}");
    assert_problem(reindex(&app, "plain", json!([1])).await, 422).await;
    // One at a time.
    create(&app, "big", json!({"store_text": true})).await;
    load(&app, "big", &corpus(3000)).await;
    assert_eq!(reindex(&app, "big", new_recipe()).await.status(), 202);
    let p = assert_problem(reindex(&app, "big", new_recipe()).await, 409).await;
    assert_eq!(p["type"], "urn:neardup:problem:reindex-running");
    assert_eq!(wait_done(&app, "big").await["reindex"]["state"], "done");
}

#[tokio::test]
async fn a_text_the_new_recipe_leaves_empty_is_left_out_as_a_fresh_collection_would() {
    let app = spawn_app().await;
    create(
        &app,
        "src",
        json!({"store_text": true, "normalize": {"strip_punctuation": false}, "shingle": {"kind": "char", "k": 2}}),
    )
    .await;
    for (id, text) in [
        ("words", "plain words here and there"),
        ("marks", "!!! … ?? —"),
    ] {
        let resp = app
            .put_json(
                &format!("/collections/src/documents/{id}"),
                &json!({"text": text}),
            )
            .await;
        assert_eq!(resp.status(), 201, "{id}");
    }
    assert_eq!(
        reindex(
            &app,
            "src",
            json!({"normalize": {"strip_punctuation": true}, "shingle": {"kind": "word", "k": 1}})
        )
        .await
        .status(),
        202
    );
    let stats = wait_done(&app, "src").await;
    assert_eq!(stats["reindex"]["skipped"], 1, "{stats}");
    assert_eq!(stats["documents"], 1, "{stats}");
    assert_problem(app.get("/collections/src/documents/marks").await, 404).await;
    // As a fresh collection with that recipe refuses it.
    create(
        &app,
        "fresh",
        json!({"store_text": true, "shingle": {"kind": "word", "k": 1}}),
    )
    .await;
    let resp = app
        .put_json(
            "/collections/fresh/documents/marks",
            &json!({"text": "!!! … ?? —"}),
        )
        .await;
    assert_problem(resp, 422).await;
}

#[tokio::test]
async fn a_collection_deleted_during_its_reindex_can_be_created_again_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = test_settings();
    settings.storage.data_dir = dir.path().to_owned();
    let app = spawn_app_with(settings.clone()).await;
    let docs = corpus(30);
    // The reindex runs on its own; the delete lands before it starts, while
    // it builds, or after it switched: whichever, the name is free again at
    // once and nothing of the deleted collection is left on disk.
    for round in 0..25 {
        create(&app, "r", json!({"store_text": true})).await;
        load(&app, "r", &docs[..(round % 5) * 6 + 1]).await;
        assert_eq!(reindex(&app, "r", new_recipe()).await.status(), 202);
        if round % 3 == 1 {
            tokio::time::sleep(Duration::from_millis(round as u64)).await;
        }
        assert_eq!(app.delete("/collections/r").await.status(), 204);
        let resp = app
            .put_json("/collections/r", &json!({"store_text": true}))
            .await;
        let status = resp.status();
        let body = resp.text().await.unwrap();
        assert_eq!(status, 201, "round {round}: {body}");
        assert_eq!(app.get_json("/collections/r/stats").await["documents"], 0);
        assert_eq!(app.delete("/collections/r").await.status(), 204);
    }
    // Give abandoned reindexes time to notice, then look at the disk.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let left: Vec<String> = std::fs::read_dir(dir.path().join("collections"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        left,
        Vec::<String>::new(),
        "nothing left of the deleted collections"
    );
    app.stop().await.unwrap();
    // A restart finds only `default`.
    let app = spawn_app_with(settings).await;
    let list = app.get_json("/collections").await;
    assert_eq!(list["collections"].as_array().unwrap().len(), 1, "{list}");
}

/// A reindex keeps the passage index (the new index is built with it, from
/// the fingerprints of the signatures it reuses or of the texts it signs
/// again), and a reindex body can switch it off.
#[tokio::test]
async fn a_reindex_keeps_or_drops_the_passage_index() {
    let app = spawn_app().await;
    create(
        &app,
        "clips",
        json!({"store_text": true, "index": {"passage_index": true}}),
    )
    .await;
    let article: String = (0..200).map(|i| format!("word{i} ")).collect();
    let excerpt: String = (50..120).map(|i| format!("word{i} ")).collect();
    let r = app
        .put_json("/collections/clips/documents/a", &json!({"text": article}))
        .await;
    assert_eq!(r.status(), 201);
    let ask = json!({"text": excerpt, "measure": "query_in_stored", "threshold": 0.9});
    let found = |v: Value| v["results"][0]["id"].as_str().map(str::to_owned);
    for (body, keeps) in [
        (json!({"index": {"threshold": 0.7}}), true),
        (json!({"shingle": {"k": 4}}), true),
        (json!({"index": {"passage_index": false}}), false),
    ] {
        assert_eq!(
            reindex(&app, "clips", body.clone()).await.status(),
            202,
            "{body}"
        );
        wait_done(&app, "clips").await;
        let r = app.post_json("/collections/clips/similar", &ask).await;
        if keeps {
            assert_eq!(r.status(), 200, "{body}");
            assert_eq!(
                found(r.json().await.unwrap()).as_deref(),
                Some("a"),
                "{body}"
            );
        } else {
            assert_eq!(r.status(), 409, "{body}");
        }
    }
}
