//! Stored texts on the redis backend: each text zstd-compressed beside its
//! record (same slot, written by the commit), read back exactly through the
//! other node; replaced, deleted and expired with the document; turned on
//! and off per collection (`PATCH`), which every node follows.

use crate::helpers::*;
use neardup::engine::ManualClock;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

use crate::helpers::WORLD_TEXTS as TEXTS;

async fn text_of(app: &TestApp, path: &str) -> reqwest::Response {
    app.get(&format!("{path}?include=text")).await
}

async fn put_text(app: &TestApp, path: &str, text: &str) -> u16 {
    app.put_json(path, &json!({"text": text}))
        .await
        .status()
        .as_u16()
}

#[tokio::test]
async fn texts_are_kept_in_redis_exactly_as_posted_and_go_with_their_document() {
    let clock = Arc::new(ManualClock::default());
    let mut settings = test_settings();
    settings.storage.store_text = true;
    settings.retention.ttl_secs = Some(3600);
    let app = spawn_app_with_clock(settings, clock.clone()).await;
    for (id, text) in TEXTS {
        assert_eq!(put_text(&app, &format!("/documents/{id}"), text).await, 201);
    }
    // Written through one node, read through the other, byte for byte.
    for (id, text) in TEXTS {
        let body: Value = text_of(&app, &format!("/documents/{id}"))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(body["text"], *text, "{id}");
    }
    assert_eq!(app.stats().await["storage"]["store_text"], true);
    // /explain by id reads them, and equals /explain by text.
    let by_id = app
        .post_json(
            "/explain",
            &json!({"a": {"id": "accents"}, "b": {"id": "quotes"}}),
        )
        .await;
    assert_eq!(by_id.status(), 200);
    let by_id: Value = by_id.json().await.unwrap();
    let by_text: Value = app
        .post_json(
            "/explain",
            &json!({"a": {"text": TEXTS[1].1}, "b": {"text": TEXTS[2].1}}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(by_id["jaccard"], by_text["jaccard"]);
    assert_eq!(by_id["a"]["segments"], by_text["a"]["segments"]);
    // A replace keeps the new text; a delete takes it.
    assert_eq!(
        put_text(&app, "/documents/ascii", "Replaced: “ünïcödé” 🙂").await,
        200
    );
    let body: Value = text_of(&app, "/documents/ascii")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["text"], "Replaced: “ünïcödé” 🙂");
    let prefix = app.stats().await["storage"]["key_prefix"]
        .as_str()
        .unwrap()
        .to_owned();
    let text_keys = || {
        shared_cluster()
            .keys(&format!("{prefix}:default:t:*"))
            .unwrap()
            .len()
    };
    assert_eq!(text_keys(), TEXTS.len());
    assert_eq!(app.delete("/documents/ascii").await.status(), 204);
    assert_problem(text_of(&app, "/documents/ascii").await, 404).await;
    assert_eq!(
        text_keys(),
        TEXTS.len() - 1,
        "the text went with its document"
    );
    // Expired: not served.
    clock.advance(Duration::from_secs(7200));
    assert_problem(text_of(&app, "/documents/cjk").await, 404).await;
}

#[tokio::test]
async fn store_text_is_turned_on_and_off_per_collection_and_every_node_follows() {
    let app = spawn_app().await;
    let put = app
        .client
        .put(format!("{}/collections/notes", app.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    assert_eq!(
        put_text(&app, "/collections/notes/documents/before", TEXTS[1].1).await,
        201
    );
    // Off: 409 through either node.
    let p = assert_problem(
        text_of(&app, "/collections/notes/documents/before").await,
        409,
    )
    .await;
    assert_eq!(p["type"], "urn:neardup:problem:text-not-stored");
    let resp = app
        .client
        .patch(format!("{}/collections/notes", app.base))
        .json(&json!({"store_text": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // On (the other node follows): new writes keep their text; the older
    // document says it was stored without one.
    assert_eq!(
        app.get_json("/collections/notes/stats").await["storage"]["store_text"],
        true
    );
    assert_eq!(
        put_text(&app, "/collections/notes/documents/after", TEXTS[3].1).await,
        201
    );
    let body: Value = text_of(&app, "/collections/notes/documents/after")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["text"], TEXTS[3].1);
    let p = assert_problem(
        text_of(&app, "/collections/notes/documents/before").await,
        409,
    )
    .await;
    assert!(
        p["detail"].as_str().unwrap().contains("without its text"),
        "{p}"
    );
    // A sample reads the stored texts in Redis.
    assert_eq!(
        put_text(&app, "/collections/notes/documents/third", TEXTS[5].1).await,
        201
    );
    let resp = app
        .post_json(
            "/collections/notes/analysis/histogram",
            &json!({"sample": 5, "k": [1], "seed": 7}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let h: Value = resp.json().await.unwrap();
    assert_eq!(h["texts"], 2, "{h}");
    // Off again: no text is served; a replace drops the old text.
    let resp = app
        .client
        .patch(format!("{}/collections/notes", app.base))
        .json(&json!({"store_text": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_problem(
        text_of(&app, "/collections/notes/documents/after").await,
        409,
    )
    .await;
    assert_eq!(
        put_text(&app, "/collections/notes/documents/after", TEXTS[4].1).await,
        200
    );
    assert_eq!(
        app.client
            .patch(format!("{}/collections/notes", app.base))
            .json(&json!({"store_text": true}))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let p = assert_problem(
        text_of(&app, "/collections/notes/documents/after").await,
        409,
    )
    .await;
    assert!(
        p["detail"].as_str().unwrap().contains("without its text"),
        "{p}"
    );
    // A reindex needs every text: it stops (failed, naming a document
    // stored without one) and writes resume on the old index.
    assert_eq!(
        app.post_json("/collections/notes/reindex", &json!({"shingle": {"k": 2}}))
            .await
            .status(),
        202
    );
    let state = wait_reindex_done(&app, "notes").await["reindex"].clone();
    assert_eq!(state["state"], "failed", "{state}");
    assert!(
        state["error"]
            .as_str()
            .unwrap()
            .contains("without its text"),
        "{state}"
    );
    let mut status = 0;
    for _ in 0..100 {
        status = put_text(&app, "/collections/notes/documents/again", TEXTS[2].1).await;
        if status == 201 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, 201, "writes resume after a failed reindex");
    assert_eq!(
        app.get_json("/collections/notes").await["settings"]["shingle"]["k"],
        3
    );
}
