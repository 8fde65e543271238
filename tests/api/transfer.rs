//! `GET /export` and `POST /import`: a collection moved from the memory
//! backend to the redis backend (a real Redis Cluster) answers as before:
//! the same documents, stamps, metadata and texts, and the same exact
//! scores, also under another `num_perm` and threshold.

use crate::helpers::*;
use serde_json::{json, Value};

async fn export_of(app: &TestApp, prefix: &str) -> String {
    let resp = app
        .client
        .get(format!("{}{prefix}/export", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/x-ndjson");
    resp.text().await.unwrap()
}

async fn import_into(app: &TestApp, prefix: &str, body: String) -> reqwest::Response {
    app.client
        .post(format!("{}{prefix}/import", app.base))
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send()
        .await
        .unwrap()
}

async fn similar(app: &TestApp, prefix: &str, text: &str, threshold: f64) -> Vec<(String, f64)> {
    let body = json!({"text": text, "threshold": threshold, "limit": 100});
    similar_scores(app, &format!("{}{prefix}/similar", app.base), &body).await
}

#[tokio::test]
async fn a_collection_moves_from_memory_to_redis_and_answers_the_same() {
    let mut settings = test_settings();
    settings.storage.store_text = true;
    let memory = spawn_app_with(settings).await;
    let mut docs = neardup::testkit::families(41, 120, 30);
    docs.push((
        "fr".into(),
        "L’école de la rue Saint-Honoré ouvre à 8 h; déjà 120 élèves, £3 le café".into(),
    ));
    docs.push((
        "ru".into(),
        "Съешь же ещё этих мягких французских булок, да выпей же чаю".into(),
    ));
    for (i, (id, text)) in docs.iter().enumerate() {
        let mut body = json!({"id": id, "text": text, "metadata": {"n": i, "tag": "é"}});
        if i % 10 == 0 {
            body["ttl_secs"] = json!(86_400);
        }
        assert_eq!(memory.post_json("/documents", &body).await.status(), 201);
    }
    let export = export_of(&memory, "").await;
    let mut lines = export.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(header["neardup_export"], 1);
    assert_eq!(header["documents"], docs.len());
    assert_eq!(lines.count(), docs.len());

    // Into a named collection on the redis backend with another num_perm
    // and threshold (the recipe is the same).
    let redis = spawn_app_with(on_redis(test_settings())).await;
    let put = redis
        .client
        .put(format!("{}/collections/moved", redis.base))
        .json(&json!({"store_text": true, "index": {"num_perm": 64, "threshold": 0.7}}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    let resp = import_into(&redis, "/collections/moved", export.clone()).await;
    assert_eq!(resp.status(), 200);
    let out: Value = resp.json().await.unwrap();
    assert_eq!(
        out,
        json!({"imported": docs.len(), "created": docs.len(), "replaced": 0, "expired": 0})
    );
    // Again: every document replaced by itself.
    let out: Value = import_into(&redis, "/collections/moved", export.clone())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(out["replaced"], docs.len());
    assert_eq!(
        redis.get_json("/collections/moved/stats").await["documents"],
        docs.len()
    );

    // The same documents: stamps, metadata, texts.
    for (id, text) in docs.iter().step_by(7) {
        let a = memory
            .get_json(&format!("/documents/{id}?include=text"))
            .await;
        let b = redis
            .get_json(&format!("/collections/moved/documents/{id}?include=text"))
            .await;
        for key in ["created_at", "expires_at", "metadata", "text", "shingles"] {
            assert_eq!(a[key], b[key], "{id} {key}");
        }
        assert_eq!(b["text"], *text);
    }
    // The same exact scores.
    for (_, text) in docs.iter().step_by(11) {
        let a = similar(&memory, "", text, 0.8).await;
        let b = similar(&redis, "/collections/moved", text, 0.8).await;
        assert_scores_eq(&b, &a);
    }
    // And back: the redis collection exported equals the memory one, line
    // for line (order aside).
    let back = export_of(&redis, "/collections/moved").await;
    let sorted = |e: &str| {
        let mut l: Vec<String> = e.lines().skip(1).map(str::to_owned).collect();
        l.sort();
        l
    };
    assert_eq!(sorted(&back), sorted(&export));
}

#[tokio::test]
async fn an_import_refuses_another_recipe_and_bad_lines_before_writing() {
    let app = spawn_app().await;
    app.insert("a", "the night is dark and the moon is red over the sea")
        .await;
    let export = export_of(&app, "").await;
    let put = app
        .client
        .put(format!("{}/collections/chars", app.base))
        .json(&json!({"shingle": {"kind": "char", "k": 5}}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    let p = assert_problem(
        import_into(&app, "/collections/chars", export.clone()).await,
        409,
    )
    .await;
    assert_eq!(p["type"], "urn:neardup:problem:collection-conflict");
    assert!(p["detail"].as_str().unwrap().contains("shingle"), "{p}");
    // An export of a release before recipe versions names none: its
    // shingles are version 1's, which a version 2 collection refuses.
    let mut lines = export.lines();
    let mut header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    header["recipe"]["normalize"] =
        json!({"nfkc": true, "lowercase": true, "strip_punctuation": true});
    let old: String = std::iter::once(header.to_string())
        .chain(lines.map(str::to_owned))
        .map(|l| l + "\n")
        .collect();
    let p = assert_problem(import_into(&app, "", old).await, 409).await;
    assert!(p["detail"].as_str().unwrap().contains("normalize"), "{p}");

    let put = app
        .client
        .put(format!("{}/collections/copy", app.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    for (body, status, says) in [
        (String::new(), 422, "empty"),
        ("{\"x\":1}\n".to_owned(), 422, "line 1"),
        (
            format!("{export}{{\"id\":\"b\",\"created_ms\":1,\"shingles\":\"!!\"}}\n"),
            422,
            "line 3",
        ),
        (
            format!("{export}{{\"id\":\"b\",\"created_ms\":1,\"shingles\":\"BQA=\"}}\n"),
            422,
            "line 3",
        ),
        (
            format!("{export}{{\"id\":\"b\",\"created_ms\":1}}\n"),
            422,
            "line 3",
        ),
    ] {
        let p = assert_problem(
            import_into(&app, "/collections/copy", body.clone()).await,
            status,
        )
        .await;
        assert!(
            p["detail"].as_str().unwrap().contains(says),
            "{body:?}: {p}"
        );
    }
    // Nothing was written by the refused imports.
    assert_eq!(
        app.get_json("/collections/copy/stats").await["documents"],
        0
    );
    let resp = app
        .client
        .post(format!("{}/collections/copy/import", app.base))
        .header("content-type", "application/json")
        .body(export.clone())
        .send()
        .await
        .unwrap();
    assert_problem(resp, 415).await;
    // As bytes (for clients that handle bodies only so): the same lines.
    let resp = app
        .client
        .get(format!("{}/export", app.base))
        .header("accept", "application/octet-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "application/octet-stream");
    let bytes = resp.text().await.unwrap();
    assert_eq!(bytes, export);
    let resp = app
        .client
        .post(format!("{}/collections/copy/import", app.base))
        .header("content-type", "application/octet-stream")
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        app.get_json("/collections/copy/stats").await["documents"],
        1
    );
}
