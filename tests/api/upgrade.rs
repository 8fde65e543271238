//! A data directory written by the release before collections (snapshot
//! format 1, log `NDUPWAL1`; `tests/fixtures/release-0.1.0-data`) opens as
//! the `default` collection: every document, its metadata and its shingles,
//! with a `created_at`; new writes go to the current formats, and a
//! snapshot retires the old files. A data directory of the release before
//! text recipes had versions (`tests/fixtures/release-2026-11-data`) keeps
//! version 1 until a reindex; a configuration that names another refuses
//! to start.

use crate::helpers::{metric_value, spawn_app_with, test_settings, wait_reindex_done, TestApp};
use serde_json::{json, Value};
use std::path::Path;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/release-0.1.0-data"
);

fn text(i: usize) -> String {
    format!(
        "release one stored document number {i} about topic {} with café words {} and more",
        i % 5,
        i * 13
    )
}

fn copy_fixture(to: &Path) {
    for entry in std::fs::read_dir(FIXTURE).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "bin" || e == "log") {
            std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
}

#[tokio::test]
async fn a_data_directory_of_the_previous_release_opens_whole() {
    let dir = tempfile::tempdir().unwrap();
    copy_fixture(dir.path());
    let mut settings = test_settings();
    settings.storage.data_dir = dir.path().to_owned();
    let app = spawn_app_with(settings.clone()).await;
    let stats = app.stats().await;
    assert_eq!(stats["documents"], 39, "{stats}");
    assert_eq!(stats["storage"]["recovery"]["snapshot_documents"], 30);
    assert_eq!(stats["storage"]["recovery"]["replayed_records"], 12);
    let v0 = app.get_json("/documents/v0").await;
    assert_eq!(v0["metadata"], json!({"n": 0}));
    assert!(
        v0["created_at"].as_str().unwrap().starts_with("2026-"),
        "{v0}"
    );
    assert_eq!(v0["expires_at"], Value::Null);
    assert_eq!(app.get("/documents/v3").await.status(), 404);
    // Every stored shingle set is the one its text gives today.
    for i in [0, 17, 29, 30, 39] {
        let body = app
            .post_json("/similar", &json!({"text": text(i), "threshold": 1.0}))
            .await
            .json::<Value>()
            .await
            .unwrap();
        let ids: Vec<&str> = body["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, [format!("v{i}").as_str()], "{body}");
    }
    let body = app
        .post_json(
            "/similar",
            &json!({"text": "a replaced text for v4 written after the snapshot", "threshold": 1.0}),
        )
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(body["results"][0]["id"], "v4", "{body}");
    // Written now, in the current formats; a snapshot retires the old files.
    assert_eq!(
        app.put_json(
            "/documents/new",
            &json!({"text": text(99), "ttl_secs": 3600})
        )
        .await
        .status(),
        201
    );
    // Two snapshots: the older one kept (`storage.snapshots_keep`, with the
    // log after it) is then this release's too.
    for _ in 0..2 {
        assert_eq!(
            app.post_json("/admin/snapshot", &json!({})).await.status(),
            200
        );
    }
    app.stop().await.unwrap();
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.contains(&"wal-00000000000000000030.log".to_owned()),
        "{names:?}"
    );
    assert!(
        !names.contains(&"snapshot-000001.bin".to_owned()),
        "{names:?}"
    );
    let app = spawn_app_with(settings).await;
    assert_eq!(app.stats().await["documents"], 40);
    assert_eq!(
        app.get_json("/documents/v0").await["created_at"],
        v0["created_at"]
    );
    assert!(app.get_json("/documents/new").await["expires_at"].is_string());
}

/// A data directory of the release before text recipes had versions
/// (`scripts/make-upgrade-fixture.sh`, run with the binary of 0c57aa9): the
/// `default` collection and the named `news` (which stores texts), each
/// with a snapshot and log records after it, left by a SIGKILL.
const FIXTURE_2026: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/release-2026-11-data"
);

/// The texts that release was given, `{id, text, metadata}`.
fn texts_2026() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/release-2026-11-texts.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_tree(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// `text` with the character at `at` (a char index) replaced by `by`.
fn edited(text: &str, at: usize, by: char) -> String {
    text.chars()
        .enumerate()
        .map(|(i, c)| if i == at { by } else { c })
        .collect()
}

async fn top(app: &TestApp, prefix: &str, text: &str) -> Value {
    app.post_json(&format!("{prefix}/similar"), &json!({"text": text}))
        .await
        .json::<Value>()
        .await
        .unwrap()
}

#[tokio::test]
async fn data_of_the_release_before_recipe_versions_keeps_version_1_until_reindexed() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(Path::new(FIXTURE_2026), dir.path());
    let mut settings = test_settings();
    settings.storage.data_dir = dir.path().to_owned();
    let app = spawn_app_with(settings.clone()).await;
    let docs = texts_2026();
    for prefix in ["", "/collections/news"] {
        let stats = app.get_json(&format!("{prefix}/stats")).await;
        assert_eq!(stats["documents"], docs.len(), "{prefix}: {stats}");
        assert_eq!(stats["normalize"]["version"], 1, "{prefix}: {stats}");
    }
    let metrics = app.metrics().await;
    for name in ["default", "news"] {
        let c = app.get_json(&format!("/collections/{name}")).await;
        assert_eq!(c["settings"]["normalize"]["version"], 1, "{c}");
        let version = metric_value(
            &metrics,
            "neardup_collection_text_version",
            &[("collection", name)],
        );
        assert_eq!(version, Some(1.0), "{name}");
    }
    // Answers as before: every text finds itself at 1.0, and version 1 makes
    // a Chinese paragraph one word, so a one-character edit shares nothing.
    let zh = docs.iter().find(|d| d["id"] == "zh-1").unwrap()["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let zh_edit = edited(&zh, 20, '夜');
    for prefix in ["", "/collections/news"] {
        for d in &docs {
            let body = top(&app, prefix, d["text"].as_str().unwrap()).await;
            assert_eq!(body["results"][0]["id"], d["id"], "{prefix}: {body}");
            assert_eq!(body["results"][0]["jaccard"], 1.0, "{prefix}: {body}");
        }
        let body = top(&app, prefix, &zh_edit).await;
        assert_eq!(body["results"], json!([]), "{prefix}: {body}");
    }
    // A PUT that names no version meets the old collection as it is.
    let resp = app
        .put_json("/collections/news", &json!({"store_text": true}))
        .await;
    assert_eq!(resp.status(), 200);
    // New collections get version 2.
    let fresh = app
        .put_json("/collections/fresh", &json!({"store_text": true}))
        .await;
    assert_eq!(fresh.status(), 201);
    let fresh: Value = fresh.json().await.unwrap();
    assert_eq!(fresh["settings"]["normalize"]["version"], 2, "{fresh}");

    // A reindex moves `news` to version 2: the edit is now a near-duplicate.
    let resp = app.post_json("/collections/news/reindex", &json!({})).await;
    assert_eq!(resp.status(), 202, "{}", resp.text().await.unwrap());
    let stats = wait_reindex_done(&app, "news").await;
    assert_eq!(stats["reindex"]["state"], "done", "{stats}");
    assert_eq!(stats["normalize"]["version"], 2, "{stats}");
    let version = metric_value(
        &app.metrics().await,
        "neardup_collection_text_version",
        &[("collection", "news")],
    );
    assert_eq!(version, Some(2.0));
    let body = top(&app, "/collections/news", &zh_edit).await;
    assert_eq!(body["results"][0]["id"], "zh-1", "{body}");
    assert!(
        body["results"][0]["jaccard"].as_f64().unwrap() > 0.8,
        "{body}"
    );
    // The default collection, whose recipe is the configuration's, stays.
    let body = top(&app, "", &zh_edit).await;
    assert_eq!(body["results"], json!([]), "{body}");

    // After a restart each keeps its version.
    app.stop().await.unwrap();
    let app = spawn_app_with(settings).await;
    assert_eq!(app.stats().await["normalize"]["version"], 1);
    let news = app.get_json("/collections/news").await;
    assert_eq!(news["settings"]["normalize"]["version"], 2, "{news}");
    assert_eq!(
        app.get_json("/collections/news/stats").await["documents"],
        docs.len()
    );
    let body = top(&app, "/collections/news", &zh_edit).await;
    assert_eq!(body["results"][0]["id"], "zh-1", "{body}");
}

#[test]
fn a_configured_version_that_the_data_was_not_written_with_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(Path::new(FIXTURE_2026), dir.path());
    let out = crate::helpers::neardup()
        .current_dir(dir.path())
        .env("NEARDUP_SERVER__BIND", "127.0.0.1:0")
        .env("NEARDUP_STORAGE__DATA_DIR", dir.path())
        .env("NEARDUP_NORMALIZE__VERSION", "2")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("normalize recipe (version and steps): stored 1, configured 2"),
        "{stderr}"
    );
}
