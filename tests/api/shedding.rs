//! Load shedding: beyond `server.max_concurrent_requests` in flight, a
//! request is refused at once with 503 + `Retry-After: 1`; the probes and
//! `/metrics` are always answered, and capacity comes back when requests finish.

use crate::helpers::{
    assert_problem, metric_value, spawn_app_with, start_partial_post, test_settings, TestApp,
};
use serde_json::json;
use std::time::{Duration, Instant};

/// Poll `GET /stats` until it is shed (the half-sent requests hold every
/// permit once the server has read their heads); returns that response.
async fn wait_until_shed(app: &TestApp) -> reqwest::Response {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let resp = app.get("/stats").await;
        if resp.status() == 503 {
            return resp;
        }
        assert_eq!(resp.status(), 200);
        assert!(Instant::now() < deadline, "never shed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn beyond_the_limit_requests_get_503_at_once_and_probes_still_answer() {
    let mut settings = test_settings();
    settings.server.max_concurrent_requests = 2;
    let app = spawn_app_with(settings).await;

    // Two slow uploads: heads sent, bodies half sent, so both hold a permit.
    let body = |id: &str| {
        serde_json::to_vec(&json!({"id": id, "text": "a slow upload of a few words"})).unwrap()
    };
    let (b1, b2) = (body("slow1"), body("slow2"));
    let slow1 = start_partial_post(app.addr, "/documents", &b1, 10).await;
    let slow2 = start_partial_post(app.addr, "/documents", &b2, 10).await;

    let started = Instant::now();
    let resp = wait_until_shed(&app).await;
    assert_eq!(
        resp.headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap()),
        Some("1")
    );
    let problem = assert_problem(resp, 503).await;
    assert_eq!(problem["type"], "urn:neardup:problem:unavailable");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("server.max_concurrent_requests"),
        "{problem}"
    );
    // Refused at once, not queued behind the slow uploads.
    let t = Instant::now();
    let resp = app
        .post_json("/documents", &json!({"id": "third", "text": "x y z"}))
        .await;
    assert!(t.elapsed() < Duration::from_secs(1));
    assert_problem(resp, 503).await;
    assert!(started.elapsed() < Duration::from_secs(5));

    // The probes and the metrics are never shed.
    assert_eq!(app.get("/healthz").await.status(), 200);
    assert_eq!(app.get("/readyz").await.status(), 200);
    let metrics = app.metrics().await;
    let shed = metric_value(&metrics, "neardup_requests_shed_total", &[]).expect("metric");
    assert!(shed >= 2.0, "{shed}");

    // Finish the uploads: both succeed, and capacity is back.
    let r1 = slow1.complete(true).await;
    let r2 = slow2.complete(true).await;
    assert_eq!((r1.status, r2.status), (201, 201));
    assert_eq!(app.get("/stats").await.status(), 200);
    let resp = app
        .post_json("/documents", &json!({"id": "third", "text": "x y z"}))
        .await;
    assert_eq!(resp.status(), 201);
    assert_eq!(app.get("/documents/third").await.status(), 200);

    let metrics = app.metrics().await;
    let counted = metric_value(
        &metrics,
        "neardup_http_requests_total",
        &[("route", "/stats"), ("status", "503")],
    )
    .expect("shed requests are counted by route too");
    assert!(counted >= 1.0);
}

#[tokio::test]
async fn a_client_that_gives_up_frees_its_slot() {
    let mut settings = test_settings();
    settings.server.max_concurrent_requests = 1;
    let app = spawn_app_with(settings).await;
    let body = serde_json::to_vec(&json!({"text": "abandoned upload words"})).unwrap();
    let slow = start_partial_post(app.addr, "/documents", &body, 5).await;
    wait_until_shed(&app).await;
    // The client hangs up mid-body: the request ends and its permit returns.
    drop(slow);
    let deadline = Instant::now() + Duration::from_secs(5);
    while app.get("/stats").await.status() != 200 {
        assert!(Instant::now() < deadline, "the slot never came back");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
