//! A data directory written by the release before collections (snapshot
//! format 1, log `NDUPWAL1`; `tests/fixtures/release-0.1.0-data`) opens as
//! the `default` collection: every document, its metadata and its shingles,
//! with a `created_at`; new writes go to the current formats, and a
//! snapshot retires the old files.

use crate::helpers::{spawn_app_with, test_settings};
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
