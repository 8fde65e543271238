//! A reindex on the redis backend: writes wait (503) while every live
//! document is copied into a new incarnation under the new recipe from its
//! stored text, then the catalog switches to it in one script; afterwards
//! both nodes answer exactly like a collection created with that recipe
//! and given the same texts, stamps kept, and the old keys are gone.

use crate::helpers::*;
use serde_json::{json, Value};
use std::time::Duration;

async fn put(app: &TestApp, name: &str, body: Value) {
    let resp = app.put_json(&format!("/collections/{name}"), &body).await;
    assert_eq!(resp.status(), 201, "{name}");
}

async fn load(app: &TestApp, name: &str, docs: &[(String, String)]) {
    for chunk in docs.chunks(250) {
        let items: Vec<Value> = chunk
            .iter()
            .map(|(id, text)| json!({"id": id, "text": text, "metadata": {"id": id}}))
            .collect();
        let resp = app
            .post_json(
                &format!("/collections/{name}/documents/batch"),
                &json!({"documents": items}),
            )
            .await;
        assert_eq!(resp.status(), 200);
    }
}

/// Per probe text: the ids and exact scores of its near-duplicates.
async fn scores(app: &TestApp, name: &str, docs: &[(String, String)]) -> Vec<Value> {
    let mut out = Vec::new();
    for (_, text) in docs.iter().step_by(9) {
        let url = app.read_url(&format!("/collections/{name}/similar"));
        let r = similar_scores(app, &url, &json!({"text": text, "limit": 100})).await;
        out.push(json!(r));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reindex_in_redis_answers_like_a_fresh_collection_on_both_nodes() {
    let app = spawn_app().await;
    let mut docs = neardup::testkit::families(53, 200, 40);
    docs.push((
        "fr".into(),
        "L’école de la rue Saint-Honoré ouvre à 8 h; déjà 120 élèves".into(),
    ));
    docs.push((
        "fr2".into(),
        "L’école de la rue Saint-Honoré ouvre à 9 h; déjà 120 élèves".into(),
    ));
    let new_recipe = json!({"shingle": {"kind": "char", "k": 5}, "index": {"threshold": 0.6}});
    put(&app, "src", json!({"store_text": true})).await;
    load(&app, "src", &docs).await;
    let mut fresh = new_recipe.clone();
    fresh["store_text"] = json!(true);
    put(&app, "fresh", fresh).await;
    load(&app, "fresh", &docs).await;
    let before = scores(&app, "src", &docs).await;
    let expected = scores(&app, "fresh", &docs).await;
    assert_ne!(before, expected, "the recipes differ");
    let stamp = app.get_json("/collections/src/documents/fr").await["created_at"].clone();

    let resp = app.post_json("/collections/src/reindex", &new_recipe).await;
    assert_eq!(resp.status(), 202);
    // A second one while it runs is refused.
    let again = app
        .post_json("/collections/src/reindex", &new_recipe)
        .await
        .status();
    assert!(again == 409 || again == 202, "{again}");
    // Writes wait while it copies (503, retry), through either node.
    let mut saw_paused = false;
    let mut state = Value::Null;
    for _ in 0..3000 {
        let resp = app
            .client
            .put(app.read_url("/collections/src/documents/late"))
            .json(&json!({"text": "written while the reindex runs or after it"}))
            .send()
            .await
            .unwrap();
        match resp.status().as_u16() {
            503 => {
                assert!(resp.headers().contains_key("retry-after"));
                saw_paused = true;
            }
            s => assert!(s == 201 || s == 200, "{s}"),
        }
        // The progress is on the node running the reindex.
        let body: Value = app
            .client
            .get(format!("{}/collections/src/stats", app.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        state = body["reindex"].clone();
        if state["state"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(state["state"], "done", "{state}");
    // Every document, and `late` if it was written before writes paused.
    let done = state["done"].as_u64().unwrap() as usize;
    assert!(done == docs.len() || done == docs.len() + 1, "{state}");
    // `total` was counted when it was asked for, before writes paused.
    assert!(
        state["total"].as_u64().unwrap() as usize >= docs.len(),
        "{state}"
    );
    assert!(saw_paused, "writes waited during the reindex");
    app.delete("/collections/src/documents/late").await;

    // Both nodes answer with the new recipe, like the fresh collection.
    for _ in 0..100 {
        let b: Value = app.get_json("/collections/src").await;
        if b["settings"]["shingle"]["k"] == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let desc = app.get_json("/collections/src").await;
    let fresh_desc = app.get_json("/collections/fresh").await;
    assert_eq!(desc["settings"], fresh_desc["settings"]);
    assert_eq!(desc["derived"], fresh_desc["derived"]);
    assert_eq!(scores(&app, "src", &docs).await, expected);
    let doc = app
        .get_json("/collections/src/documents/fr?include=text")
        .await;
    assert_eq!(doc["created_at"], stamp, "stamps are kept");
    assert_eq!(doc["text"], docs[docs.len() - 2].1.as_str());
    assert_eq!(doc["metadata"], json!({"id": "fr"}));
    // Writes work again, on the new index.
    let resp = app
        .post_json(
            "/collections/src/documents",
            &json!({"id": "new", "text": docs[0].1}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    // The old incarnation's keys go: only one incarnation's records remain.
    let prefix = app.stats().await["storage"]["key_prefix"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut incarnations = Vec::new();
    for _ in 0..100 {
        let keys = shared_cluster()
            .keys(&format!("{prefix}:src.*:r:*"))
            .unwrap();
        incarnations = keys
            .iter()
            .filter_map(|k| k.split(':').nth(1).map(str::to_owned))
            .collect();
        incarnations.sort();
        incarnations.dedup();
        if incarnations.len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(incarnations.len(), 1, "{incarnations:?}");
}
