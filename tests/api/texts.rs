//! Stored texts (`store_text`): kept as posted, on disk, through restarts
//! and snapshots; `?include=text`; turned on and off; compaction.

use crate::helpers::*;
use neardup::engine::ManualClock;
use serde_json::{json, Value};
use std::sync::Arc;

use crate::helpers::WORLD_TEXTS as TEXTS;

fn settings_storing_texts(dir: &std::path::Path) -> neardup::config::Settings {
    let mut s = test_settings();
    s.storage.data_dir = dir.to_owned();
    s.storage.store_text = true;
    s
}

async fn text_of(app: &TestApp, path: &str) -> String {
    let body = app.get_json(&format!("{path}?include=text")).await;
    body["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {body}"))
        .to_owned()
}

async fn put_doc(app: &TestApp, path: &str, text: &str) -> u16 {
    app.put_json(path, &json!({"text": text}))
        .await
        .status()
        .as_u16()
}

#[tokio::test]
async fn texts_come_back_exactly_as_posted_through_restarts_and_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let settings = settings_storing_texts(dir.path());
    let app = spawn_app_with(settings.clone()).await;
    // Every write path keeps the text.
    for (i, (id, text)) in TEXTS.iter().enumerate() {
        let status = match i % 3 {
            0 => put_doc(&app, &doc_path(id), text).await,
            1 => app
                .post_json("/documents", &json!({"id": id, "text": text}))
                .await
                .status()
                .as_u16(),
            _ => app
                .post_json(
                    "/documents?if_unique=true",
                    &json!({"id": id, "text": text}),
                )
                .await
                .status()
                .as_u16(),
        };
        assert_eq!(status, 201, "{id}");
    }
    let batch: Vec<Value> = TEXTS
        .iter()
        .map(|(id, t)| json!({"id": format!("b-{id}"), "text": t}))
        .collect();
    let resp = app
        .post_json("/documents/batch", &json!({"documents": batch}))
        .await;
    assert_eq!(resp.json::<Value>().await.unwrap()["created"], TEXTS.len());
    check(&app).await;
    // Without include there is no text.
    let plain = app.get_json(&doc_path("cjk")).await;
    assert!(plain.get("text").is_none(), "{plain}");
    // A replace keeps the new text.
    assert_eq!(
        put_doc(&app, &doc_path("ascii"), "Replaced: “ünïcödé” 🙂").await,
        200
    );
    assert_eq!(
        text_of(&app, &doc_path("ascii")).await,
        "Replaced: “ünïcödé” 🙂"
    );
    assert_eq!(put_doc(&app, &doc_path("ascii"), TEXTS[0].1).await, 200);
    let stats = app.stats().await;
    assert_eq!(stats["storage"]["store_text"], true);
    assert!(
        stats["storage"]["text_bytes"].as_u64().unwrap() > 16,
        "{stats}"
    );

    // From the log alone, after a restart.
    app.stop().await.unwrap();
    let app = spawn_app_with(settings.clone()).await;
    check(&app).await;
    // From a snapshot's compacted segment, after another.
    let snap = app.post_json("/admin/snapshot", &json!({})).await;
    assert_eq!(snap.status(), 200);
    let stats = app.stats().await;
    assert!(
        stats["storage"]["last_snapshot"]["text_bytes"]
            .as_u64()
            .unwrap()
            > 16
    );
    check(&app).await;
    app.stop().await.unwrap();
    let app = spawn_app_with(settings).await;
    check(&app).await;
    assert!(segments(dir.path())
        .iter()
        .all(|n| !n.starts_with("texts-tail")));
}

async fn check(app: &TestApp) {
    for (id, text) in TEXTS {
        assert_eq!(text_of(app, &doc_path(id)).await, *text, "{id}");
        let b = format!("b-{id}");
        assert_eq!(text_of(app, &doc_path(&b)).await, *text, "{b}");
    }
}

/// Snapshot now; the bytes of `c`'s text segment.
async fn snap(app: &TestApp) -> u64 {
    assert_eq!(
        app.post_json("/admin/snapshot", &json!({})).await.status(),
        200
    );
    app.get_json("/collections/c/stats").await["storage"]["last_snapshot"]["text_bytes"]
        .as_u64()
        .unwrap()
}

/// `texts-*.seg` files in `dir`.
fn segments(dir: &std::path::Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("texts-"))
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn include_is_checked_and_a_collection_without_texts_answers_409() {
    let app = spawn_app().await;
    app.insert("a", "the night is dark and the moon is red")
        .await;
    let resp = app.get(&format!("{}?include=text", doc_path("a"))).await;
    let p = assert_problem(resp, 409).await;
    assert_eq!(p["type"], "urn:neardup:problem:text-not-stored");
    let detail = p["detail"].as_str().unwrap();
    assert!(detail.contains("does not store texts"), "{detail}");
    for bad in ["texts", "text,bogus", "metadata", "", "TEXT"] {
        let resp = app.get(&format!("{}?include={bad}", doc_path("a"))).await;
        let p = assert_problem(resp, 400).await;
        assert_eq!(p["type"], "urn:neardup:problem:invalid-parameter", "{bad}");
    }
    // An unknown document is 404 either way.
    let resp = app.get(&format!("{}?include=text", doc_path("nope"))).await;
    assert_problem(resp, 404).await;
    // The default collection's storage comes from the configuration.
    let resp = app
        .client
        .patch(app.url("/collections/default"))
        .json(&json!({"store_text": true}))
        .send()
        .await
        .unwrap();
    let p = assert_problem(resp, 409).await;
    assert!(
        p["detail"].as_str().unwrap().contains("storage.store_text"),
        "{p}"
    );
}

async fn patch(app: &TestApp, name: &str, body: Value) -> reqwest::Response {
    app.client
        .patch(app.url(&format!("/collections/{name}")))
        .json(&body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn store_text_can_be_turned_on_and_off_later() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = test_settings();
    settings.storage.data_dir = dir.path().to_owned();
    // A segment goes with its snapshot: with one kept, the next snapshot
    // leaves no text on disk.
    settings.storage.snapshots_keep = 1;
    let app = spawn_app_with(settings.clone()).await;
    assert_eq!(
        app.put_json("/collections/c", &json!({})).await.status(),
        201
    );
    let desc = app.get_json("/collections/c").await;
    assert_eq!(desc["settings"]["store_text"], false);
    assert_eq!(
        put_doc(&app, "/collections/c/documents/before", TEXTS[1].1).await,
        201
    );
    let resp = patch(&app, "c", json!({"store_text": true})).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.json::<Value>().await.unwrap()["settings"]["store_text"],
        true
    );
    // Written before: no text (409 saying so); written after: its text.
    let resp = app
        .get("/collections/c/documents/before?include=text")
        .await;
    let p = assert_problem(resp, 409).await;
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("stored without its text"),
        "{p}"
    );
    assert_eq!(
        put_doc(&app, "/collections/c/documents/after", TEXTS[4].1).await,
        201
    );
    assert_eq!(
        text_of(&app, "/collections/c/documents/after").await,
        TEXTS[4].1
    );
    // The setting survives a restart (the manifest), and so does the text.
    app.stop().await.unwrap();
    let app = spawn_app_with(settings.clone()).await;
    assert_eq!(
        app.get_json("/collections/c").await["settings"]["store_text"],
        true
    );
    assert_eq!(
        text_of(&app, "/collections/c/documents/after").await,
        TEXTS[4].1
    );
    // Off: no text is served, and the next snapshot drops them from disk.
    assert_eq!(
        patch(&app, "c", json!({"store_text": false}))
            .await
            .status(),
        200
    );
    let resp = app.get("/collections/c/documents/after?include=text").await;
    assert_problem(resp, 409).await;
    assert_eq!(
        app.post_json("/admin/snapshot", &json!({})).await.status(),
        200
    );
    let stats = app.get_json("/collections/c/stats").await;
    assert_eq!(stats["storage"]["text_bytes"], 0, "{stats}");
    assert_eq!(
        stats["storage"]["last_snapshot"]["text_bytes"], 0,
        "{stats}"
    );
    // On again: the old texts do not come back.
    assert_eq!(
        patch(&app, "c", json!({"store_text": true})).await.status(),
        200
    );
    let resp = app.get("/collections/c/documents/after?include=text").await;
    assert_problem(resp, 409).await;
    // An empty patch changes nothing; null is not a value.
    let resp = patch(&app, "c", json!({})).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.json::<Value>().await.unwrap()["settings"]["store_text"],
        true
    );
    for body in [
        json!({"retention": null, "store_text": true}),
        json!({"store_text": null}),
        json!({"retention": {}}),
    ] {
        assert_problem(patch(&app, "c", body).await, 422).await;
    }
}

#[tokio::test]
async fn snapshots_drop_deleted_replaced_and_expired_texts() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = test_settings();
    settings.storage.data_dir = dir.path().to_owned();
    settings.storage.snapshots_keep = 1;
    let clock = Arc::new(ManualClock::default());
    let app = spawn_app_with_clock(settings.clone(), clock.clone()).await;
    assert_eq!(
        app.put_json("/collections/c", &json!({"store_text": true}))
            .await
            .status(),
        201
    );
    let long = |seed: usize| -> String {
        (0..400)
            .map(|i| format!("w{}x{}", (i * 7919 + seed * 104_729) % 100_003, seed))
            .collect::<Vec<_>>()
            .join(" ")
    };
    for i in 0..4 {
        assert_eq!(
            put_doc(&app, &format!("/collections/c/documents/d{i}"), &long(i)).await,
            201
        );
    }
    let resp = app
        .put_json(
            "/collections/c/documents/expiring",
            &json!({"text": long(9), "ttl_secs": 60}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    let all = snap(&app).await;
    let cdir = dir.path().join("collections/c");
    assert_eq!(segments(&cdir), ["texts-000001.seg"]);
    // Delete one, replace one with a short text, let one expire.
    assert_eq!(
        app.delete("/collections/c/documents/d0").await.status(),
        204
    );
    assert_eq!(
        put_doc(&app, "/collections/c/documents/d1", "short “one” 🙂").await,
        200
    );
    clock.advance(std::time::Duration::from_secs(120));
    let fewer = snap(&app).await;
    assert!(fewer < all * 3 / 5, "{fewer} of {all}");
    // The tail and the older snapshot's segment are gone (snapshots_keep = 1).
    assert_eq!(segments(&cdir), ["texts-000002.seg"]);
    let stats = app.get_json("/collections/c/stats").await;
    assert_eq!(stats["storage"]["text_bytes"], fewer, "{stats}");
    assert_eq!(
        text_of(&app, "/collections/c/documents/d1").await,
        "short “one” 🙂"
    );
    assert_eq!(text_of(&app, "/collections/c/documents/d2").await, long(2));
    // Restarted from that snapshot, the survivors' texts are whole.
    app.stop().await.unwrap();
    let app = spawn_app_with_clock(settings, clock.clone()).await;
    assert_eq!(text_of(&app, "/collections/c/documents/d3").await, long(3));
    assert_problem(
        app.get("/collections/c/documents/d0?include=text").await,
        404,
    )
    .await;
    assert_problem(
        app.get("/collections/c/documents/expiring?include=text")
            .await,
        404,
    )
    .await;
}

#[tokio::test]
async fn a_damaged_text_is_reported_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let settings = settings_storing_texts(dir.path());
    let app = spawn_app_with(settings.clone()).await;
    assert_eq!(put_doc(&app, &doc_path("a"), TEXTS[3].1).await, 201);
    assert_eq!(
        app.post_json("/admin/snapshot", &json!({})).await.status(),
        200
    );
    app.stop().await.unwrap();
    // Flip a byte inside the text's frame.
    let path = dir.path().join("texts-000001.seg");
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() - 3;
    bytes[at] ^= 0x55;
    std::fs::write(&path, bytes).unwrap();
    // The start refuses the damaged segment: the default collection cannot
    // be restored, so the server stops, saying where (a named collection
    // would be served as failed instead: tests/api/crash.rs).
    let mut app = start_app(settings).await;
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(30), &mut app.server)
        .await
        .expect("the server stops by itself")
        .expect("the server task did not panic");
    let e = format!(
        "{:#}",
        stopped.expect_err("a damaged default stops the start")
    );
    assert!(
        e.contains("the default collection cannot be restored") && e.contains("texts-000001.seg"),
        "{e}"
    );
}
