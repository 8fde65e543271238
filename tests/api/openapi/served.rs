//! The document the server serves: the file with this deployment's values.

use super::spec::*;
use crate::helpers::{spawn_app, spawn_app_with, test_settings};
use neardup::config::Secret;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// Escape one JSON pointer token (RFC 6901).
fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The JSON pointers at which `a` and `b` differ (leaves, or a key on one side only).
fn differences(a: &Value, b: &Value, at: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let here = format!("{at}/{}", pointer_token(k));
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => differences(u, v, &here, out),
                    _ => out.push(here),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                differences(u, v, &format!("{at}/{i}"), out);
            }
        }
        _ if a != b => out.push(at.to_owned()),
        _ => {}
    }
}

/// (pointer to the marked keyword, setting name) for every marked value in the file.
fn marked_values(value: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(marks)) = map.get("x-neardup-setting") {
                for (keyword, setting) in marks {
                    let setting = setting.as_str().expect("a setting name").to_owned();
                    out.push((format!("{at}/{}", pointer_token(keyword)), setting));
                }
            }
            for (k, v) in map {
                marked_values(v, &format!("{at}/{}", pointer_token(k)), out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                marked_values(v, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[tokio::test]
async fn a_server_on_the_shipped_configuration_serves_the_file_unchanged() {
    let app = spawn_app().await;
    let resp = app.get("/openapi.json").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let served: Value = resp.json().await.unwrap();
    let mut diffs = Vec::new();
    differences(spec(), &served, "", &mut diffs);
    assert!(diffs.is_empty(), "served document differs at {diffs:?}");
    // The file's marked values are the shipped configuration's.
    let stats = app.get_json("/stats").await;
    assert_eq!(
        spec()["components"]["schemas"]["Threshold"]["minimum"],
        stats["index"]["min_query_threshold"]
    );
}

#[tokio::test]
async fn the_served_document_differs_from_the_file_only_in_this_deployments_values() {
    let mut settings = test_settings();
    settings.index.threshold = 0.9;
    settings.query.max_limit = 50;
    settings.server.max_batch = 7;
    settings.limits.max_text_bytes = 5000;
    settings.auth.api_keys = vec![Secret::new("full-key")];
    settings.auth.protect_metrics = false;
    let app = spawn_app_with(settings).await;
    let served: Value = app.get("/openapi.json").await.json().await.unwrap();
    let stats = app
        .client
        .get(app.url("/stats"))
        .bearer_auth("full-key")
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    let min = stats["index"]["min_query_threshold"].clone();
    assert!(min.as_f64().unwrap() > 0.8, "{min}");
    let mut marked = Vec::new();
    marked_values(spec(), "", &mut marked);
    assert!(marked.len() >= 4, "{marked:?}");
    let mut expected: BTreeSet<String> = BTreeSet::new();
    for (at, setting) in &marked {
        let want = match setting.as_str() {
            "index.min_query_threshold" => min.clone(),
            "query.max_limit" => json!(50),
            "server.max_batch" => json!(7),
            "limits.max_text_bytes" => json!(5000),
            other => panic!("a marker names an unknown setting {other}"),
        };
        assert_eq!(served.pointer(at), Some(&want), "{at} ({setting})");
        expected.insert(at.clone());
    }
    // Keys are configured: the document requires them, but not for /metrics
    // (auth.protect_metrics = false).
    expected.insert("/security".into());
    expected.insert("/paths/~1metrics/get/security".into());
    let mut diffs = Vec::new();
    differences(spec(), &served, "", &mut diffs);
    let diffs: BTreeSet<String> = diffs.into_iter().collect();
    assert_eq!(diffs, expected);
    assert_eq!(served["security"], json!([{"bearerAuth": []}]));
    assert_eq!(served["paths"]["/metrics"]["get"]["security"], json!([]));
}
