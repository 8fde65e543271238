//! `POST /snippets` (issue 46): the first words of stored texts as posted,
//! cut on the recipe's words (a word per Han character), titles from a
//! metadata field, hostile text returned verbatim (the console keeps it
//! inert), missing and expired ids absent; on every backend and collection.
//! On Redis the snippets are read from the second node.

use crate::helpers::{spawn_app_with, spawn_app_with_clock, test_settings, TestApp};
use neardup::engine::ManualClock;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const FR: &str = "  L’été à Montréal, « ça coûte 12 £ » : les cafés débordent, dit-elle.";
const RU: &str = "Съешь же ещё этих мягких французских булок, да выпей чаю.";
const ZH: &str = "北京欢迎你，我们的朋友来自世界各地。";
/// Markup, a right-to-left override and a right-to-left mark.
const HOSTILE: &str =
    "<img src=x onerror=alert(1)> \u{202E}txt.exe \u{200F}שלום <script>alert(2)</script> fin";

fn storing_texts() -> neardup::config::Settings {
    let mut s = test_settings();
    s.storage.store_text = true;
    s
}

async fn put(app: &TestApp, id: &str, text: &str, metadata: Value) {
    let r = app
        .put_json(
            &format!("/documents/{id}"),
            &json!({"text": text, "metadata": metadata}),
        )
        .await;
    assert_eq!(r.status(), 201, "{id}: {}", r.text().await.unwrap());
}

/// `POST /snippets` with `body`, from the reading node; the answer's map.
async fn snippets(app: &TestApp, body: Value) -> Value {
    let r = app
        .client
        .post(app.read_url("/snippets"))
        .json(&body)
        .send()
        .await
        .expect("request sent");
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer.as_object().unwrap().len(), 1, "{answer}");
    answer["snippets"].clone()
}

async fn app_with_texts() -> TestApp {
    let app = spawn_app_with(storing_texts()).await;
    put(
        &app,
        "fr",
        FR,
        json!({"title": "Été « caniculaire »", "n": 3}),
    )
    .await;
    put(&app, "ru", RU, json!({"title": ["not", "a string"]})).await;
    put(&app, "zh", ZH, Value::Null).await;
    put(
        &app,
        "evil",
        HOSTILE,
        json!({"title": "<b onmouseover=alert(3)>x</b>\u{202E}"}),
    )
    .await;
    app
}

#[tokio::test]
async fn snippets_are_the_first_words_of_the_stored_texts_as_posted() {
    let app = app_with_texts().await;
    let got = snippets(
        &app,
        json!({"ids": ["fr", "ru", "zh", "evil", "nope"], "words": 4, "field": "title"}),
    )
    .await;
    assert_eq!(
        got["fr"],
        json!({"text": "L’été à Montréal, « ça", "title": "Été « caniculaire »", "truncated": true})
    );
    // A title is a string value only.
    assert_eq!(
        got["ru"],
        json!({"text": "Съешь же ещё этих", "title": null, "truncated": true})
    );
    // A word per Han character, punctuation inside kept as posted.
    assert_eq!(
        got["zh"],
        json!({"text": "北京欢迎", "title": null, "truncated": true})
    );
    // Hostile text comes back byte for byte: markup and bidi controls kept
    // (the console shows it as text; the API does not escape).
    assert_eq!(
        got["evil"],
        json!({"text": "<img src=x onerror=alert(1)> \u{202E}txt.exe",
               "title": "<b onmouseover=alert(3)>x</b>\u{202E}", "truncated": true})
    );
    assert!(got.get("nope").is_none(), "{got}");
    assert_eq!(got.as_object().unwrap().len(), 4, "{got}");

    // Enough words for the whole text: all of it (trimmed), not truncated.
    let got = snippets(&app, json!({"ids": ["fr", "zh", "evil"], "words": 200})).await;
    assert_eq!(
        got["fr"],
        json!({"text": FR.trim(), "title": null, "truncated": false})
    );
    assert_eq!(
        got["zh"],
        json!({"text": ZH, "title": null, "truncated": false})
    );
    assert_eq!(got["evil"]["text"], HOSTILE);
    // The default is 40 words; a repeated id is answered once.
    let got = snippets(&app, json!({"ids": ["ru", "ru"]})).await;
    assert_eq!(got.as_object().unwrap().len(), 1, "{got}");
    assert_eq!(got["ru"]["text"], RU);
    assert_eq!(got["ru"]["truncated"], false);
}

#[tokio::test]
async fn a_page_of_two_hundred_ids_is_answered_in_one_request() {
    let app = spawn_app_with(storing_texts()).await;
    let docs: Vec<Value> = (0..150)
        .map(|i| {
            json!({"id": format!("d{i:03}"), "text": format!("Numéro {i} : « un texte » n° {i} de plus"),
                   "metadata": {"title": format!("Titre {i}")}})
        })
        .collect();
    let r = app
        .post_json("/documents/batch", &json!({"documents": docs}))
        .await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    // 150 stored ids and 50 never stored, interleaved.
    let ids: Vec<String> = (0..200)
        .map(|i| {
            if i % 4 == 3 {
                format!("missing{i}")
            } else {
                format!("d{:03}", i - i / 4)
            }
        })
        .collect();
    let got = snippets(&app, json!({"ids": ids, "words": 2, "field": "title"})).await;
    let map = got.as_object().unwrap();
    assert_eq!(map.len(), 150, "{got}");
    for i in 0..150 {
        let s = &got[format!("d{i:03}")];
        assert_eq!(
            *s,
            json!({"text": format!("Numéro {i}"), "title": format!("Titre {i}"), "truncated": true})
        );
    }
}

#[tokio::test]
async fn without_stored_texts_a_snippet_has_its_title_only() {
    let app = spawn_app_with(test_settings()).await;
    put(&app, "a", FR, json!({"headline": "Chaleur à Montréal"})).await;
    let got = snippets(&app, json!({"ids": ["a"], "field": "headline"})).await;
    assert_eq!(
        got["a"],
        json!({"text": null, "title": "Chaleur à Montréal", "truncated": false})
    );
    // No field named, none configured: no title.
    let got = snippets(&app, json!({"ids": ["a"]})).await;
    assert_eq!(
        got["a"],
        json!({"text": null, "title": null, "truncated": false})
    );
}

#[tokio::test]
async fn the_collections_snippet_field_names_the_title_when_a_request_names_none() {
    let mut settings = test_settings();
    settings.review.snippet_field = Some("headline".into());
    let app = spawn_app_with(settings).await;
    put(
        &app,
        "a",
        FR,
        json!({"headline": "Chaleur à Montréal", "titre": "Été"}),
    )
    .await;
    let got = snippets(&app, json!({"ids": ["a"]})).await;
    assert_eq!(
        got["a"],
        json!({"text": null, "title": "Chaleur à Montréal", "truncated": false})
    );
    // A request's own field wins over the setting.
    let got = snippets(&app, json!({"ids": ["a"], "field": "titre"})).await;
    assert_eq!(got["a"]["title"], "Été");
}

#[tokio::test]
async fn an_expired_or_deleted_document_has_no_snippet() {
    let clock = Arc::new(ManualClock::default());
    let app = spawn_app_with_clock(storing_texts(), clock.clone()).await;
    let r = app
        .put_json("/documents/short", &json!({"text": RU, "ttl_secs": 60}))
        .await;
    assert_eq!(r.status(), 201);
    put(&app, "kept", ZH, Value::Null).await;
    put(&app, "gone", FR, Value::Null).await;
    assert_eq!(app.delete("/documents/gone").await.status(), 204);
    let got = snippets(&app, json!({"ids": ["short", "kept", "gone"], "words": 2})).await;
    assert_eq!(got.as_object().unwrap().len(), 2, "{got}");
    assert_eq!(got["short"]["text"], "Съешь же");
    clock.advance(Duration::from_secs(61));
    let got = snippets(&app, json!({"ids": ["short", "kept", "gone"], "words": 2})).await;
    let ids: Vec<&String> = got.as_object().unwrap().keys().collect();
    assert_eq!(ids, ["kept"], "{got}");
}
