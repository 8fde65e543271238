//! Retention and time: a collection's `retention.ttl_secs`, a document's
//! own `ttl_secs` / `expires_at`, `created_at`, `since`, the background
//! purge, and expiry across restarts. Time is a `ManualClock` moved by the
//! tests, so nothing waits for real hours.
//!
//! Runs against `default` (retention from `retention.ttl_secs`) and, in
//! `tests/api_collection`, against a named collection made with the same
//! defaults.

use crate::helpers::{
    assert_problem, collection_label, doc_path, encode, metric_value, result_ids,
    spawn_app_with_clock, test_settings, TestApp,
};
use neardup::config::Settings;
use neardup::engine::{Clock, ManualClock};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const HOUR: u64 = 3600;
/// Near-duplicates of each other (word 3-shingles, Jaccard ≥ 0.8 pairwise).
const BASE: &str = "the quick brown fox jumps over the lazy dog near the old river bank today";
const V1: &str = "the quick brown fox jumps over the lazy dog near the old river bank today again";
const V2: &str = "so the quick brown fox jumps over the lazy dog near the old river bank today";
const V3: &str = "the quick brown fox jumps over the lazy dog near the old river bank today now";
const V4: &str = "well the quick brown fox jumps over the lazy dog near the old river bank today";

fn settings_with_retention(ttl_secs: Option<u64>) -> Settings {
    let mut settings = test_settings();
    settings.retention.ttl_secs = ttl_secs;
    settings
}

async fn spawn(settings: Settings) -> (TestApp, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::default());
    let app = spawn_app_with_clock(settings, clock.clone()).await;
    (app, clock)
}

/// RFC 3339 of `ms`, as the server writes it.
fn time(ms: u64) -> String {
    neardup::http::dto::format_time(ms)
}

async fn post(app: &TestApp, path: &str, body: Value) -> (u16, Value) {
    let resp = app.post_json(path, &body).await;
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// The ids of `results`, sorted (the order by similarity is tested elsewhere).
fn ids(body: &Value) -> Vec<String> {
    sorted(result_ids(&body["results"]))
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test]
async fn an_expired_document_is_absent_from_every_route_at_once() {
    let (app, clock) = spawn(settings_with_retention(Some(HOUR))).await;
    let t0 = clock.now_ms();
    // `old` by the retention (an hour), `own` by its own minute, `long` by
    // its own two hours (longer than the retention: its own wins).
    assert_eq!(
        post(&app, "/documents", json!({"id": "old", "text": BASE}))
            .await
            .0,
        201
    );
    assert_eq!(
        post(
            &app,
            "/documents",
            json!({"id": "long", "text": V1, "ttl_secs": 2 * HOUR})
        )
        .await
        .0,
        201
    );
    clock.advance(Duration::from_secs(30 * 60));
    let t1 = clock.now_ms();
    assert_eq!(
        post(&app, "/documents", json!({"id": "new", "text": V2}))
            .await
            .0,
        201
    );
    let at = time(t1 + 60_000);
    let resp = app
        .put_json(&doc_path("own"), &json!({"text": V3, "expires_at": at}))
        .await;
    assert_eq!(resp.status(), 201);

    // created_at and expires_at, by the server's clock.
    let old = app.get_json("/documents/old").await;
    assert_eq!(old["created_at"], time(t0));
    assert_eq!(old["expires_at"], time(t0 + HOUR * 1000));
    assert_eq!(
        app.get_json("/documents/long").await["expires_at"],
        time(t0 + 2 * HOUR * 1000)
    );
    assert_eq!(
        app.get_json("/documents/own").await["expires_at"],
        time(t1 + 60_000)
    );
    let sim = app.get_json("/similar?id=new").await;
    assert_eq!(
        ids(&sim),
        ["long", "old", "own"].map(String::from).to_vec(),
        "{sim}"
    );
    for m in sim["results"].as_array().unwrap() {
        let expected = if m["id"] == "own" { time(t1) } else { time(t0) };
        assert_eq!(m["created_at"], expected, "{m}");
    }

    // 61 minutes after t0: `old` (retention) and `own` (its minute) are gone.
    clock.advance(Duration::from_secs(31 * 60));
    for gone in ["old", "own"] {
        let p = assert_problem(app.get(&doc_path(gone)).await, 404).await;
        assert_eq!(p["type"], "urn:neardup:problem:document-not-found");
        assert_problem(app.get(&format!("/similar?id={gone}")).await, 404).await;
        assert_problem(app.get(&format!("/compare?a={gone}&b=new")).await, 404).await;
    }
    assert_eq!(ids(&app.get_json("/similar?id=new").await), ["long"]);
    let (status, body) = post(&app, "/similar", json!({"text": V2})).await;
    assert_eq!(status, 200);
    assert_eq!(
        ids(&body),
        ["long", "new"].map(String::from).to_vec(),
        "{body}"
    );
    let (_, body) = post(
        &app,
        "/documents?similar=true",
        json!({"id": "probe", "text": V4}),
    )
    .await;
    assert_eq!(
        sorted(result_ids(&body["similar"])),
        ["long", "new"].map(String::from).to_vec(),
        "{body}"
    );
    assert_eq!(app.delete(&doc_path("probe")).await.status(), 204);
    let groups = app.get_json("/duplicates").await;
    assert_eq!(
        groups["groups"][0]["ids"],
        json!(["long", "new"]),
        "{groups}"
    );
    let pairs = app.get_json("/duplicates/pairs").await;
    assert_eq!(pairs["pairs"].as_array().unwrap().len(), 1, "{pairs}");
    assert_eq!(
        pairs["documents"], 2,
        "the scan skips expired documents: {pairs}"
    );
    // The counts too (the purge, every 60 s of real time, has not run).
    let stats = app.stats().await;
    assert_eq!(stats["documents"], 2, "{stats}");
    let listed = app.get_json("/collections").await;
    let this = listed["collections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == collection_label())
        .cloned()
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(this["documents"], 2, "{listed}");
    let shown = app
        .get_json(&format!("/collections/{}", collection_label()))
        .await;
    assert_eq!(shown["documents"], 2, "{shown}");
    // A delete of an expired document finds nothing.
    assert_problem(app.delete(&doc_path("own")).await, 404).await;
    // Its id is free: POST creates (not 409), PUT creates (201), a batch creates.
    assert_eq!(
        post(
            &app,
            "/documents",
            json!({"id": "old", "text": "a fresh text entirely"})
        )
        .await
        .0,
        201
    );
    assert_eq!(
        app.get_json("/documents/old").await["created_at"],
        time(clock.now_ms())
    );
    let (_, batch) = post(
        &app,
        "/documents/batch",
        json!({"documents": [{"id": "own", "text": "another fresh text"}]}),
    )
    .await;
    assert_eq!(batch["results"][0]["status"], 201, "{batch}");
    // if_unique: nothing live is near BASE but `long` and `new`, which are.
    let (status, body) = post(
        &app,
        "/documents?if_unique=true",
        json!({"id": "u", "text": BASE}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        sorted(result_ids(&body["similar"])),
        ["long", "new"].map(String::from).to_vec()
    );
    // Three hours on, everything written before is gone; if_unique stores.
    clock.advance(Duration::from_secs(3 * HOUR));
    let (status, body) = post(
        &app,
        "/documents?if_unique=true",
        json!({"id": "u", "text": BASE}),
    )
    .await;
    assert_eq!((status, &body["inserted"]), (201, &json!(true)), "{body}");
}

#[tokio::test]
async fn own_expiry_is_validated() {
    let (app, clock) = spawn(settings_with_retention(None)).await;
    let past = time(clock.now_ms() - 1000);
    for body in [
        json!({"text": BASE, "ttl_secs": 0}),
        json!({"text": BASE, "ttl_secs": 3155760001u64}),
        json!({"text": BASE, "ttl_secs": -5}),
        json!({"text": BASE, "ttl_secs": 1.5}),
        json!({"text": BASE, "expires_at": past}),
        json!({"text": BASE, "expires_at": "1969-12-31T23:59:59Z"}),
        json!({"text": BASE, "expires_at": "tomorrow"}),
        json!({"text": BASE, "ttl_secs": 60, "expires_at": time(clock.now_ms() + 120_000)}),
    ] {
        let resp = app.post_json("/documents", &body).await;
        let p = assert_problem(resp, 422).await;
        assert_eq!(p["type"], "urn:neardup:problem:invalid-body", "{body}");
        let resp = app.put_json("/documents/x", &body).await;
        assert_problem(resp, 422).await;
        let (_, batch) = post(&app, "/documents/batch", json!({"documents": [body]})).await;
        assert_eq!(batch["results"][0]["status"], 422, "{batch}");
    }
    // Whole floats and nulls are fine.
    assert_eq!(
        post(
            &app,
            "/documents",
            json!({"id": "f", "text": BASE, "ttl_secs": 60.0})
        )
        .await
        .0,
        201
    );
    assert_eq!(
        post(
            &app,
            "/documents",
            json!({"id": "n", "text": V1, "ttl_secs": null, "expires_at": null})
        )
        .await
        .0,
        201
    );
    assert_eq!(
        app.get_json("/documents/n").await["expires_at"],
        Value::Null
    );
    // An offset is honoured.
    let resp = app
        .put_json(
            "/documents/o",
            &json!({"text": V2, "expires_at": "2999-01-01T02:00:00+02:00"}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    assert_eq!(
        app.get_json("/documents/o").await["expires_at"],
        "2999-01-01T00:00:00Z"
    );
}

#[tokio::test]
async fn since_keeps_only_documents_stored_at_or_after_it() {
    let (app, clock) = spawn(settings_with_retention(None)).await;
    app.post_json("/documents", &json!({"id": "a", "text": BASE}))
        .await;
    clock.advance(Duration::from_secs(40 * 86400));
    let t1 = clock.now_ms();
    app.post_json("/documents", &json!({"id": "b", "text": V1}))
        .await;
    clock.advance(Duration::from_secs(1));
    let last_30_days = time(clock.now_ms() - 30 * 86_400_000);
    let enc = |t: &str| encode(t);
    let body = app
        .get_json(&format!("/similar?id=b&since={}", enc(&last_30_days)))
        .await;
    assert!(ids(&body).is_empty(), "a is older: {body}");
    let body = app
        .get_json(&format!("/similar?id=a&since={}", enc(&time(t1))))
        .await;
    assert_eq!(ids(&body), ["b"], "at or after: {body}");
    let body = app
        .get_json("/similar?id=a&since=1900-01-01T00:00:00Z")
        .await;
    assert_eq!(ids(&body), ["b"], "before 1970 keeps everything");
    let (_, body) = post(&app, "/similar", json!({"text": V2, "since": last_30_days})).await;
    assert_eq!(ids(&body), ["b"]);
    let (_, body) = post(&app, "/similar", json!({"text": V2})).await;
    assert_eq!(ids(&body), ["a", "b"].map(String::from).to_vec());
    // "Is this a duplicate of anything posted in the last 30 days?"
    let url = format!("/documents?if_unique=true&since={}", enc(&time(t1 + 1)));
    let (status, body) = post(&app, &url, json!({"id": "c", "text": V3})).await;
    assert_eq!((status, &body["inserted"]), (201, &json!(true)), "{body}");
    let url = format!("/documents?similar=true&since={}", enc(&time(t1)));
    let (_, body) = post(&app, &url, json!({"id": "d", "text": V4})).await;
    assert_eq!(
        sorted(result_ids(&body["similar"])),
        ["b", "c"].map(String::from).to_vec(),
        "{body}"
    );
    // Not a time: 400 in the query string, 422 in a body.
    let p = assert_problem(app.get("/similar?id=a&since=yesterday").await, 400).await;
    assert_eq!(p["type"], "urn:neardup:problem:invalid-parameter");
    let p = assert_problem(
        app.post_json("/similar", &json!({"text": V2, "since": "yesterday"}))
            .await,
        422,
    )
    .await;
    assert_eq!(p["type"], "urn:neardup:problem:invalid-body");
}

#[tokio::test]
async fn expired_documents_are_purged_in_the_background_and_stay_gone_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = settings_with_retention(Some(HOUR));
    settings.storage.data_dir = dir.path().to_owned();
    settings.storage.purge_interval_secs = 1;
    let clock = Arc::new(ManualClock::default());
    let app = spawn_app_with_clock(settings.clone(), clock.clone()).await;
    let docs: Vec<Value> = (0..50)
        .map(|i| json!({"id": format!("d{i}"), "text": format!("{BASE} number {i} and {}", i * 7)}))
        .collect();
    post(&app, "/documents/batch", json!({"documents": docs})).await;
    post(
        &app,
        "/documents",
        json!({"id": "keeper", "text": V1, "ttl_secs": 10 * HOUR}),
    )
    .await;
    app.post_json("/admin/snapshot", &json!({})).await;
    clock.advance(Duration::from_secs(2 * HOUR));
    // Absent at once, from the counts too; held in memory until the purge
    // runs (the purged counter below waits for it).
    assert_problem(app.get("/documents/d0").await, 404).await;
    assert_eq!(app.stats().await["documents"], 1);
    // A purge counts its documents when it ends, and on the redis backend
    // the count above falls as the purge goes (either node may run it):
    // the counter may lag the count by a moment, never by more.
    let purged_total = |metrics: &str| {
        metric_value(
            metrics,
            "neardup_documents_purged_total",
            &[("collection", collection_label())],
        )
    };
    let mut metrics = app.metrics().await;
    for _ in 0..100 {
        if purged_total(&metrics) == Some(50.0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        metrics = app.metrics().await;
    }
    assert_eq!(purged_total(&metrics), Some(50.0), "{metrics}");
    app.stop().await.unwrap();

    // The snapshot holds the 51, the log the 50 deletes after it.
    let app = spawn_app_with_clock(settings.clone(), clock.clone()).await;
    let stats = app.stats().await;
    assert_eq!(stats["documents"], 1, "{stats}");
    assert_eq!(app.get_json("/documents/keeper").await["id"], "keeper");
    // Expiry survives a restart: keeper's own ten hours run out later.
    clock.advance(Duration::from_secs(9 * HOUR));
    assert_problem(app.get("/documents/keeper").await, 404).await;
    app.stop().await.unwrap();
    let app = spawn_app_with_clock(settings, clock.clone()).await;
    assert_problem(app.get("/documents/keeper").await, 404).await;
}
