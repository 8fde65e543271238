//! `/stats` of a redis node conforms to openapi.yaml (the api suite's
//! walk checks the memory backend's): the storage object with the passage
//! index and this node's copy of the document frequencies; and that copy
//! following the writes on every node by the watch alone.

use super::checker::{assert_conforms, component_schema};
use crate::helpers::{spawn_app_with, test_settings};
use serde_json::{json, Value};

#[tokio::test]
async fn stats_of_a_redis_node_match_the_spec() {
    let app = spawn_app_with(test_settings()).await;
    let r = app
        .put_json(
            "/collections/bp",
            &json!({"index": {"passage_index": true, "boilerplate": {"enabled": true}}}),
        )
        .await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    for i in 0..3 {
        let r = app
            .put_json(
                &format!("/collections/bp/documents/d{i}"),
                &json!({"text": format!("the {i} café article, £5 a month; signed up")}),
            )
            .await;
        assert_eq!(r.status(), 201);
    }
    for path in ["/stats", "/collections/bp/stats"] {
        let stats: Value = app.get(path).await.json().await.unwrap();
        assert_conforms(component_schema("Stats"), &stats, path);
    }
    // The reading node's counts as of its last read of the log: its watch
    // reads it every watch interval (100 ms here).
    let stats = stats_once_counted(&app, &app.read_url("/collections/bp/stats"), 3).await;
    let bp = &stats["storage"]["boilerplate"];
    assert_eq!(bp["on"], true, "{stats}");
    assert_eq!(bp["documents"], 3, "{stats}");
    assert_eq!(bp["versions"], 3, "{stats}");
    assert!(bp["node_bytes"].as_u64().unwrap() > 0, "{stats}");
}

/// Both nodes count the default collection's writes as they come, by their
/// watch (not at their first read of counts: the `default` collection is
/// not in the catalog the watch walks, and its nodes once counted nothing
/// until a content query made them count every record at once).
#[tokio::test]
async fn the_default_collection_is_counted_on_both_nodes_without_a_read() {
    let mut settings = test_settings();
    settings.index.passage_index = true;
    settings.index.boilerplate.enabled = true;
    let app = spawn_app_with(settings).await;
    for i in 0..3 {
        let r = app
            .put_json(
                &format!("/documents/d{i}"),
                &json!({"text": format!("the {i} café article, £5 a month; signed up")}),
            )
            .await;
        assert_eq!(r.status(), 201);
    }
    for url in [app.url("/stats"), app.read_url("/stats")] {
        let stats = stats_once_counted(&app, &url, 3).await;
        let bp = &stats["storage"]["boilerplate"];
        assert_eq!(bp["documents"], 3, "{url}: {stats}");
        assert_eq!(bp["versions"], 3, "{url}: {stats}");
    }
}

/// `GET url` (a node's `/stats`) until its counts hold `documents`, for
/// at most 5 s: the last answer.
async fn stats_once_counted(app: &crate::helpers::TestApp, url: &str, documents: u64) -> Value {
    let mut stats = Value::Null;
    for _ in 0..100 {
        stats = app
            .client
            .get(url)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if stats["storage"]["boilerplate"]["documents"] == documents {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    stats
}
