//! The text recipe's version on the redis backend: the `default`
//! collection's keys name the recipe they are written with (its layout
//! key), and a node whose configuration leaves `normalize.version` unset
//! keeps that version, also for keys of the release before versions (a
//! layout naming none: version 1), whatever its own data directory says.

use crate::helpers::*;
use serde_json::{json, Value};

const ZH: &str = "市政府周二宣布，从下个月起将夜间公交线路延长至机场，这是通勤者自二零一九年以来一直要求的改变，预计每天有数千名乘客受益。";

async fn similar(app: &TestApp, text: &str) -> Value {
    app.post_json("/similar", &json!({"text": text}))
        .await
        .json::<Value>()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_default_collection_keeps_the_recipe_its_keys_in_redis_are_written_with() {
    // One data directory: `on_redis` gives every server on it the same key prefix.
    let dir = tempfile::tempdir().unwrap();
    let mut settings = test_settings();
    settings.storage.data_dir = dir.path().to_owned();
    let settings = on_redis(settings);
    let mut v1 = settings.clone();
    v1.normalize.version = 1;
    let app = spawn_app_with(v1).await;
    assert_eq!(app.insert("zh", ZH).await["id"], "zh");
    assert_eq!(app.stats().await["normalize"]["version"], 1);
    app.stop().await.unwrap();
    // As the release before versions left its keys: a layout naming no recipe.
    let meta = format!("{{{}:default}}:meta", settings.storage.redis.key_prefix);
    let layout = shared_cluster().command(&["GET", &meta]).unwrap();
    assert!(layout.trim().ends_with(";text=1"), "{layout}");
    let old = layout.trim().trim_end_matches(";text=1").to_owned();
    shared_cluster().command(&["SET", &meta, &old]).unwrap();
    // A node of this release, on a fresh data directory of its own, with
    // the default configuration (version 2 for new data): version 1.
    let other = tempfile::tempdir().unwrap();
    let mut fresh = settings.clone();
    fresh.storage.data_dir = other.path().to_owned();
    let app = spawn_app_with(fresh.clone()).await;
    assert_eq!(app.stats().await["normalize"]["version"], 1);
    let edit: String = ZH
        .chars()
        .enumerate()
        .map(|(i, c)| if i == 20 { '夜' } else { c })
        .collect();
    assert_eq!(similar(&app, ZH).await["results"][0]["jaccard"], 1.0);
    // Version 1: the paragraph is one word, the edit shares no shingle.
    assert_eq!(similar(&app, &edit).await["results"], json!([]));
    app.stop().await.unwrap();
    // A node configured for another recipe than the keys' refuses them: it
    // does not start (the default collection's recipe is its configuration).
    let mut pinned = fresh;
    pinned.normalize.fold_accents = true;
    let mut app = start_app(pinned).await;
    let ended = tokio::time::timeout(std::time::Duration::from_secs(60), &mut app.server)
        .await
        .expect("the node stops")
        .unwrap();
    let error = format!("{:#}", ended.unwrap_err());
    assert!(
        error.contains("written with text recipe 1") && error.contains("recipe is 2 fold_accents"),
        "{error}"
    );
}
