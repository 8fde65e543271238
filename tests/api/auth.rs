//! Access control: `auth.api_keys`, `auth.read_only_keys`, `auth.protect_metrics`.

use crate::helpers::{assert_problem, metric_value, spawn_app_with, test_settings, TestApp};
use neardup::config::{Secret, Settings};
use neardup::http::ROUTES;
use reqwest::Method;
use serde_json::{json, Value};

const FULL: &str = "full-key-0123456789";
const OTHER_FULL: &str = "second-full-key";
const READER: &str = "reader-key-abcdef";

fn keyed_settings() -> Settings {
    let mut settings = passages_on();
    settings.auth.api_keys = vec![Secret::new(FULL), Secret::new(OTHER_FULL)];
    settings.auth.read_only_keys = vec![Secret::new(READER)];
    settings
}

/// Every route answers a success: the passage index on (for `/passages`),
/// document frequency counted (for `/boilerplate`).
fn passages_on() -> Settings {
    let mut settings = test_settings();
    settings.index.passage_index = true;
    settings.index.boilerplate.enabled = true;
    settings
}

async fn spawn_keyed_app() -> TestApp {
    spawn_app_with(keyed_settings()).await
}

/// A request with an optional raw `Authorization` value and JSON body.
async fn send(
    app: &TestApp,
    method: Method,
    path: &str,
    authorization: Option<&str>,
    body: Option<Value>,
) -> reqwest::Response {
    let mut req = app.client.request(method, app.url(path));
    if let Some(value) = authorization {
        req = req.header("authorization", value);
    }
    if let Some(Value::String(lines)) = &body {
        // An export's NDJSON (POST /import).
        req = req
            .header("content-type", "application/x-ndjson")
            .body(lines.clone());
    } else if let Some(body) = body {
        req = req.json(&body);
    }
    req.send().await.expect("request sent")
}

fn bearer(key: &str) -> String {
    format!("Bearer {key}")
}

/// The collection the prefixed twins of the document routes use.
const COLL: &str = "c1";

/// Requests for the routes every collection serves, as (method, route,
/// url, body) with unprefixed paths, in an order that leaves each one
/// something to work on (the DELETE comes last, see below).
fn collection_requests() -> Vec<(Method, &'static str, String, Option<Value>)> {
    let doc = |t: &str| json!({ "text": t });
    vec![
        (
            Method::POST,
            "/documents",
            "/documents".to_owned(),
            Some(json!({"id": "a1", "text": "the night is dark and the moon is red"})),
        ),
        (
            Method::POST,
            "/documents/batch",
            "/documents/batch".to_owned(),
            Some(
                json!({"documents": [{"id": "a2", "text": "the night is dark and the moon is bright red"}]}),
            ),
        ),
        (
            Method::GET,
            "/documents/{id}",
            "/documents/a1".to_owned(),
            None,
        ),
        (
            Method::PUT,
            "/documents/{id}",
            "/documents/a3".to_owned(),
            Some(doc("a completely different text about cats")),
        ),
        (Method::GET, "/similar", "/similar?id=a1".to_owned(), None),
        (
            Method::POST,
            "/similar",
            "/similar".to_owned(),
            Some(doc("the night is dark and the moon is red")),
        ),
        (
            Method::GET,
            "/compare",
            "/compare?a=a1&b=a2".to_owned(),
            None,
        ),
        (
            Method::POST,
            "/explain",
            "/explain".to_owned(),
            Some(json!({"a": {"text": "the night is dark"}, "b": {"text": "the night is red"}})),
        ),
        (
            Method::POST,
            "/passages",
            "/passages".to_owned(),
            Some(json!({"text": "the night is dark"})),
        ),
        (
            Method::POST,
            "/snippets",
            "/snippets".to_owned(),
            Some(json!({"ids": ["a1", "a2"], "words": 3})),
        ),
        (
            Method::PUT,
            "/templates/{id}",
            "/templates/footer".to_owned(),
            Some(json!({"text": "follow us for more news"})),
        ),
        (Method::GET, "/templates", "/templates".to_owned(), None),
        (
            Method::GET,
            "/templates/{id}",
            "/templates/footer".to_owned(),
            None,
        ),
        (
            Method::DELETE,
            "/templates/{id}",
            "/templates/footer".to_owned(),
            None,
        ),
        // Again, so that the next key finds it.
        (
            Method::PUT,
            "/templates/{id}",
            "/templates/footer".to_owned(),
            Some(json!({"text": "follow us for more news"})),
        ),
        (Method::GET, "/boilerplate", "/boilerplate".to_owned(), None),
        (
            Method::POST,
            "/webhooks",
            "/webhooks".to_owned(),
            Some(json!({"id": "hook1", "url": "https://hooks.example.com/neardup"})),
        ),
        (Method::GET, "/webhooks", "/webhooks".to_owned(), None),
        (
            Method::GET,
            "/webhooks/{id}",
            "/webhooks/hook1".to_owned(),
            None,
        ),
        (
            Method::GET,
            "/webhooks/{id}/failed",
            "/webhooks/hook1/failed".to_owned(),
            None,
        ),
        (
            Method::POST,
            "/webhooks/{id}/failed/retry",
            "/webhooks/hook1/failed/retry".to_owned(),
            Some(json!({})),
        ),
        (Method::GET, "/events", "/events".to_owned(), None),
        (
            Method::DELETE,
            "/webhooks/{id}",
            "/webhooks/hook1".to_owned(),
            None,
        ),
        // Again, so that the next key finds it.
        (
            Method::POST,
            "/webhooks",
            "/webhooks".to_owned(),
            Some(json!({"id": "hook1", "url": "https://hooks.example.com/neardup"})),
        ),
        (
            Method::PUT,
            "/review/decisions",
            "/review/decisions".to_owned(),
            Some(json!({"a": "a2", "b": "a1", "verdict": "duplicate"})),
        ),
        (
            Method::GET,
            "/review/decisions",
            "/review/decisions".to_owned(),
            None,
        ),
        (
            Method::GET,
            "/review/decision",
            "/review/decision?a=a1&b=a2".to_owned(),
            None,
        ),
        (
            Method::DELETE,
            "/review/decision",
            "/review/decision?a=a1&b=a2".to_owned(),
            None,
        ),
        // Again, so that the next key finds it.
        (
            Method::PUT,
            "/review/decisions",
            "/review/decisions".to_owned(),
            Some(json!({"a": "a1", "b": "a2", "verdict": "related"})),
        ),
        (
            Method::POST,
            "/analysis/histogram",
            "/analysis/histogram".to_owned(),
            Some(json!({"texts": ["the night is dark", "the night is red"], "k": [2]})),
        ),
        (
            Method::POST,
            "/analysis/accuracy",
            "/analysis/accuracy".to_owned(),
            Some(
                json!({"texts": ["the night is dark", "the night is red"], "k": [2], "num_perm": [16]}),
            ),
        ),
        (Method::GET, "/duplicates", "/duplicates".to_owned(), None),
        (
            Method::GET,
            "/duplicates/pairs",
            "/duplicates/pairs".to_owned(),
            None,
        ),
        (
            Method::GET,
            "/duplicates/drop-list",
            "/duplicates/drop-list".to_owned(),
            None,
        ),
        (Method::GET, "/stats", "/stats".to_owned(), None),
        (
            Method::GET,
            "/review/queue",
            "/review/queue?limit=5".to_owned(),
            None,
        ),
        (
            Method::GET,
            "/review/precision",
            "/review/precision".to_owned(),
            None,
        ),
        (Method::GET, "/export", "/export".to_owned(), None),
        (
            Method::POST,
            "/import",
            "/import".to_owned(),
            Some(Value::String(crate::collections::IMPORT_HEADER.to_owned())),
        ),
        (
            Method::DELETE,
            "/documents/{id}",
            "/documents/a3".to_owned(),
            None,
        ),
    ]
}

/// A request per route (from `ROUTES`) that succeeds with a full key, in
/// an order that leaves each one something to work on: the collection
/// routes for `default`, the collection `c1` created, its twins, the
/// management routes, the service routes, and `c1` deleted.
fn one_request_per_route() -> Vec<(Method, &'static str, String, Option<Value>)> {
    let base = collection_requests();
    let mut requests = base.clone();
    requests.push((
        Method::PUT,
        "/collections/{name}",
        format!("/collections/{COLL}"),
        Some(json!({"retention": {"ttl_secs": 3600}, "store_text": true})),
    ));
    for (method, route, url, body) in base {
        let route: &'static str = neardup::http::ROUTES
            .iter()
            .map(|(_, p)| *p)
            .find(|p| p.strip_prefix("/collections/{name}") == Some(route))
            .expect("a prefixed twin of every collection route");
        requests.push((method, route, format!("/collections/{COLL}{url}"), body));
    }
    requests.extend([
        (Method::GET, "/collections", "/collections".to_owned(), None),
        (
            Method::GET,
            "/collections/{name}",
            format!("/collections/{COLL}"),
            None,
        ),
        (
            Method::PATCH,
            "/collections/{name}",
            format!("/collections/{COLL}"),
            Some(json!({"retention": {"ttl_secs": 7200}})),
        ),
        (Method::GET, "/healthz", "/healthz".to_owned(), None),
        (Method::GET, "/readyz", "/readyz".to_owned(), None),
        (Method::GET, "/metrics", "/metrics".to_owned(), None),
        (
            Method::GET,
            "/openapi.json",
            "/openapi.json".to_owned(),
            None,
        ),
        (
            Method::POST,
            "/admin/snapshot",
            "/admin/snapshot".to_owned(),
            None,
        ),
        (
            Method::POST,
            "/collections/{name}/reindex",
            format!("/collections/{COLL}/reindex"),
            Some(json!({"shingle": {"k": 2}})),
        ),
        (
            Method::DELETE,
            "/collections/{name}",
            format!("/collections/{COLL}"),
            None,
        ),
    ]);
    let covered: std::collections::BTreeSet<(String, &str)> = requests
        .iter()
        .map(|(m, route, _, _)| (m.to_string(), *route))
        .collect();
    let all: std::collections::BTreeSet<(String, &str)> =
        ROUTES.iter().map(|(m, p)| (m.to_string(), *p)).collect();
    assert_eq!(covered, all, "one request per route");
    requests
}

/// Routes served without a key (the server's one list of them).
fn is_probe(route: &str) -> bool {
    neardup::http::is_open(route)
}

fn challenge(resp: &reqwest::Response) -> String {
    resp.headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("{} without WWW-Authenticate", resp.status()))
}

async fn assert_unauthorized(resp: reqwest::Response, key_sent: bool) {
    let header = challenge(&resp);
    let expected = if key_sent {
        r#"Bearer realm="neardup", error="invalid_token""#
    } else {
        r#"Bearer realm="neardup""#
    };
    assert_eq!(header, expected);
    let body = assert_problem(resp, 401).await;
    assert_eq!(body["type"], "urn:neardup:problem:unauthorized", "{body}");
    let text = body.to_string();
    for key in [FULL, OTHER_FULL, READER] {
        assert!(!text.contains(key), "the problem names a key: {text}");
    }
}

#[tokio::test]
async fn without_configured_keys_every_route_is_open() {
    let app = spawn_app_with(passages_on()).await;
    for (method, route, url, body) in one_request_per_route() {
        let resp = send(&app, method.clone(), &url, None, body).await;
        assert!(
            resp.status().is_success(),
            "{method} {route} answered {}",
            resp.status()
        );
    }
}

#[tokio::test]
async fn with_keys_every_route_but_the_probes_answers_401_without_a_key() {
    let app = spawn_keyed_app().await;
    for (method, route, url, body) in one_request_per_route() {
        let resp = send(&app, method.clone(), &url, None, body).await;
        if is_probe(route) {
            assert_eq!(resp.status(), 200, "{method} {route}");
        } else {
            assert_unauthorized(resp, false).await;
        }
    }
    // Unrouted paths and methods too: no key, no information.
    assert_unauthorized(send(&app, Method::GET, "/nowhere", None, None).await, false).await;
    assert_unauthorized(send(&app, Method::PATCH, "/stats", None, None).await, false).await;
}

#[tokio::test]
async fn a_wrong_key_is_401_with_an_invalid_token_challenge() {
    let app = spawn_keyed_app().await;
    let wrong = [
        "not-a-key",
        "full-key-012345678",   // a prefix of a key
        "full-key-01234567890", // a key plus one
        "FULL-KEY-0123456789",  // case matters
    ];
    for key in wrong {
        let resp = send(&app, Method::GET, "/stats", Some(&bearer(key)), None).await;
        assert_unauthorized(resp, true).await;
    }
    let resp = send(
        &app,
        Method::POST,
        "/documents",
        Some(&bearer("nope")),
        Some(json!({"text": "a b c"})),
    )
    .await;
    assert_unauthorized(resp, true).await;
}

#[tokio::test]
async fn a_malformed_authorization_header_is_401_with_a_plain_challenge() {
    let app = spawn_keyed_app().await;
    let basic = "Basic ZnVsbC1rZXktMDEyMzQ1Njc4OTo=";
    for value in [
        basic,
        "Bearer",
        "Bearer ",
        FULL,
        "Token full-key-0123456789",
    ] {
        let resp = send(&app, Method::GET, "/stats", Some(value), None).await;
        assert_unauthorized(resp, false).await;
    }
}

#[tokio::test]
async fn every_configured_full_key_opens_every_route_kind() {
    let app = spawn_keyed_app().await;
    for key in [FULL, OTHER_FULL] {
        // Each pass starts from the same documents.
        send(
            &app,
            Method::DELETE,
            "/documents/a1",
            Some(&bearer(key)),
            None,
        )
        .await;
        send(
            &app,
            Method::DELETE,
            "/documents/a2",
            Some(&bearer(key)),
            None,
        )
        .await;
        for (method, route, url, body) in one_request_per_route() {
            let resp = send(&app, method.clone(), &url, Some(&bearer(key)), body).await;
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            assert!(
                status.is_success(),
                "{method} {route} with {key}: {status} {text}"
            );
        }
    }
    // The scheme is case-insensitive (RFC 9110).
    let resp = send(
        &app,
        Method::GET,
        "/stats",
        Some(&format!("bearer {FULL}")),
        None,
    )
    .await;
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn a_read_only_key_can_read_but_gets_403_on_writes() {
    let app = spawn_keyed_app().await;
    let ro = Some(bearer(READER));
    let ro = ro.as_deref();
    let resp = send(
        &app,
        Method::POST,
        "/documents",
        Some(&bearer(FULL)),
        Some(json!({"id": "r1", "text": "one two three four"})),
    )
    .await;
    assert_eq!(resp.status(), 201);
    for path in [
        "/documents/r1",
        "/similar?id=r1",
        "/compare?a=r1&b=r1",
        "/stats",
        "/metrics",
    ] {
        let resp = send(&app, Method::GET, path, ro, None).await;
        assert_eq!(resp.status(), 200, "GET {path}");
        let resp = send(&app, Method::HEAD, path, ro, None).await;
        assert_eq!(resp.status(), 200, "HEAD {path}");
    }
    let writes = [
        (
            Method::POST,
            "/documents",
            Some(json!({"text": "five six seven"})),
        ),
        (
            Method::POST,
            "/documents/batch",
            Some(json!({"documents": []})),
        ),
        (
            Method::PUT,
            "/documents/r1",
            Some(json!({"text": "five six seven"})),
        ),
        (Method::DELETE, "/documents/r1", None),
        (Method::POST, "/admin/snapshot", None),
        (Method::PUT, "/collections/c9", Some(json!({}))),
    ];
    // The POSTs that carry a query in their body are reads.
    let reads = [
        ("/similar", json!({"text": "one two three four"})),
        (
            "/explain",
            json!({"a": {"text": "one two three four"}, "b": {"text": "one two three five"}}),
        ),
    ];
    for (path, body) in reads {
        let resp = send(&app, Method::POST, path, ro, Some(body)).await;
        assert_eq!(resp.status(), 200, "POST {path}");
    }
    for (method, path, body) in writes {
        let resp = send(&app, method.clone(), path, ro, body).await;
        assert!(
            resp.headers().get("www-authenticate").is_none(),
            "{method} {path}"
        );
        let body = assert_problem(resp, 403).await;
        assert_eq!(
            body["type"], "urn:neardup:problem:forbidden",
            "{method} {path}: {body}"
        );
    }
    // Nothing was written.
    let resp = send(&app, Method::GET, "/documents/r1", ro, None).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(app.get("/healthz").await.status(), 200);
}

#[tokio::test]
async fn metrics_need_a_key_by_default_and_count_the_401s_and_403s() {
    let app = spawn_keyed_app().await;
    assert_unauthorized(send(&app, Method::GET, "/metrics", None, None).await, false).await;
    let resp = send(
        &app,
        Method::DELETE,
        "/documents/x",
        Some(&bearer(READER)),
        None,
    )
    .await;
    assert_eq!(resp.status(), 403);
    let resp = send(&app, Method::GET, "/metrics", Some(&bearer(READER)), None).await;
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    let count = |route: &str, method: &str, status: &str| {
        metric_value(
            &text,
            "neardup_http_requests_total",
            &[("route", route), ("method", method), ("status", status)],
        )
    };
    assert_eq!(count("/metrics", "GET", "401"), Some(1.0), "{text}");
    assert_eq!(
        count("/documents/{id}", "DELETE", "403"),
        Some(1.0),
        "{text}"
    );
}

#[tokio::test]
async fn metrics_are_open_when_protect_metrics_is_false_but_the_rest_is_not() {
    let mut settings = keyed_settings();
    settings.auth.protect_metrics = false;
    let app = spawn_app_with(settings).await;
    let resp = app.get("/metrics").await;
    assert_eq!(resp.status(), 200);
    assert!(resp
        .text()
        .await
        .unwrap()
        .contains("# TYPE neardup_http_requests_total counter"));
    assert_unauthorized(app.get("/stats").await, false).await;
}

#[tokio::test]
async fn read_only_keys_alone_turn_access_control_on() {
    let mut settings = test_settings();
    settings.auth.read_only_keys = vec![Secret::new(READER)];
    let app = spawn_app_with(settings).await;
    assert_unauthorized(app.get("/stats").await, false).await;
    let resp = send(&app, Method::GET, "/stats", Some(&bearer(READER)), None).await;
    assert_eq!(resp.status(), 200);
    let resp = send(
        &app,
        Method::POST,
        "/admin/snapshot",
        Some(&bearer(READER)),
        None,
    )
    .await;
    assert_problem(resp, 403).await;
}

#[test]
fn invalid_keys_are_rejected_by_validation_without_echoing_them() {
    for (bad, expected) in [
        ("", "auth.api_keys[0] is empty"),
        ("has space-zz", "whitespace"),
        ("tab\tzz", "whitespace"),
        ("newline\nzz", "whitespace"),
        ("nul\u{0}zz", "control"),
    ] {
        let mut settings = test_settings();
        settings.auth.api_keys = vec![Secret::new(bad)];
        let e = settings.validate().expect_err(bad).to_string();
        assert!(e.contains(expected), "{bad:?}: {e}");
        assert!(!e.contains("zz"), "{bad:?}: {e}");
    }
    let mut settings = test_settings();
    settings.auth.read_only_keys = vec![Secret::new("ok"), Secret::new("bad key")];
    let e = settings.validate().unwrap_err().to_string();
    assert!(e.contains("auth.read_only_keys[1]"), "{e}");
}

#[tokio::test]
async fn settings_with_an_invalid_key_are_refused_before_anything_starts() {
    let mut settings = test_settings();
    settings.auth.api_keys = vec![Secret::new("two words")];
    let e = settings.validate().expect_err("refused");
    assert!(e.to_string().contains("auth.api_keys[0]"), "{e}");
}

#[test]
fn settings_debug_output_never_contains_a_key() {
    let debug = format!("{:?}", keyed_settings());
    for key in [FULL, OTHER_FULL, READER] {
        assert!(!debug.contains(key), "{debug}");
    }
    assert!(debug.contains("***"), "{debug}");
}

#[test]
fn print_config_shows_how_many_keys_but_never_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .arg("print-config")
        .current_dir(dir.path())
        .env(
            "NEARDUP_AUTH__API_KEYS",
            format!(r#"["{FULL}","{OTHER_FULL}"]"#),
        )
        .env("NEARDUP_AUTH__READ_ONLY_KEYS", format!(r#"["{READER}"]"#))
        .env("NEARDUP_AUTH__PROTECT_METRICS", "false")
        .output()
        .expect("neardup runs");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    for key in [FULL, OTHER_FULL, READER] {
        assert!(
            !stdout.contains(key) && !stderr.contains(key),
            "{stdout}{stderr}"
        );
    }
    let config: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        config["auth"],
        json!({"api_keys": ["***", "***"], "read_only_keys": ["***"], "protect_metrics": false, "keys": []})
    );
}

#[test]
fn an_invalid_key_in_the_environment_is_a_startup_error_that_does_not_echo_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .arg("print-config")
        .current_dir(dir.path())
        .env("NEARDUP_AUTH__API_KEYS", r#"["ok-zz","bad zz"]"#)
        .output()
        .expect("neardup runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("auth.api_keys[1]"), "{stderr}");
    assert!(!stderr.contains("zz"), "{stderr}");
}

// -- keys scoped to collections (`[[auth.keys]]`) ------------------------------

use neardup::config::ScopedKey;

fn scoped(key: &str, collections: Option<&[&str]>, read_only: bool) -> ScopedKey {
    ScopedKey {
        key: Secret::new(key),
        collections: collections.map(|c| c.iter().map(|s| s.to_string()).collect()),
        read_only,
        name: None,
    }
}

/// The outcome a key should get: allowed (2xx), or 403.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    Ok,
    Forbidden,
}

/// Every collection route's request, unprefixed (`default`) or under
/// `/collections/{name}`; `true` for the reads.
fn requests_on(collection: Option<&str>) -> Vec<(Method, String, Option<Value>, bool)> {
    let prefix = collection.map_or(String::new(), |c| format!("/collections/{c}"));
    collection_requests()
        .into_iter()
        .map(|(m, route, url, mut body)| {
            let read =
                m == Method::GET || (m == Method::POST && neardup::http::reads_by_post(route));
            // The documents are there already (see the caller): POST without an id.
            if url == "/documents" {
                if let Some(b) = body.as_mut().and_then(Value::as_object_mut) {
                    b.remove("id");
                }
            }
            (m, format!("{prefix}{url}"), body, read)
        })
        .collect()
}

#[tokio::test]
async fn scoped_keys_reach_their_collections_only_on_every_route() {
    let mut settings = keyed_settings();
    settings.auth.keys = vec![
        scoped("bodies-titles", Some(&["bodies", "titles"]), false),
        scoped("bodies-reader", Some(&["bodies"]), true),
        scoped("default-only", Some(&["default"]), false),
        scoped("everything-reader", None, true),
        scoped("everything", None, false),
        scoped("ghost-only", Some(&["ghost"]), false),
    ];
    let app = spawn_app_with(settings).await;
    let full = Some(bearer(FULL));
    for name in ["bodies", "titles", "other"] {
        let resp = send(
            &app,
            Method::PUT,
            &format!("/collections/{name}"),
            full.as_deref(),
            Some(json!({})),
        )
        .await;
        assert_eq!(resp.status(), 201);
    }
    let collections = [None, Some("bodies"), Some("titles"), Some("other")];
    for c in collections {
        let prefix = c.map_or(String::new(), |c| format!("/collections/{c}"));
        for (id, text) in [
            ("a1", "the night is dark and the moon is red"),
            ("a2", "the night is dark and the moon is bright red"),
        ] {
            let resp = send(
                &app,
                Method::PUT,
                &format!("{prefix}/documents/{id}"),
                full.as_deref(),
                Some(json!({"text": text})),
            )
            .await;
            assert_eq!(resp.status(), 201);
        }
        // A template for the readers of each collection to read.
        let resp = send(
            &app,
            Method::PUT,
            &format!("{prefix}/templates/footer"),
            full.as_deref(),
            Some(json!({"text": "follow us for more news"})),
        )
        .await;
        assert_eq!(resp.status(), 201);
        // And a webhook subscription.
        let resp = send(
            &app,
            Method::POST,
            &format!("{prefix}/webhooks"),
            full.as_deref(),
            Some(json!({"id": "hook1", "url": "https://hooks.example.com/neardup"})),
        )
        .await;
        assert_eq!(resp.status(), 201);
        // And a review decision.
        let resp = send(
            &app,
            Method::PUT,
            &format!("{prefix}/review/decisions"),
            full.as_deref(),
            Some(json!({"a": "a1", "b": "a2", "verdict": "duplicate"})),
        )
        .await;
        assert_eq!(resp.status(), 201);
    }
    // Which collection each key may use, and whether it may write.
    let keys: [(&str, &[&str], bool); 5] = [
        ("bodies-titles", &["bodies", "titles"], true),
        ("bodies-reader", &["bodies"], false),
        ("default-only", &["default"], true),
        (
            "everything-reader",
            &["default", "bodies", "titles", "other"],
            false,
        ),
        (
            "everything",
            &["default", "bodies", "titles", "other"],
            true,
        ),
    ];
    let mut checked = 0;
    for (key, allowed, writes) in keys {
        let auth = bearer(key);
        for collection in collections {
            let name = collection.unwrap_or("default");
            for (method, url, body, read) in requests_on(collection) {
                let expect = if allowed.contains(&name) && (read || writes) {
                    Expect::Ok
                } else {
                    Expect::Forbidden
                };
                let resp = send(&app, method.clone(), &url, Some(&auth), body).await;
                let status = resp.status().as_u16();
                match expect {
                    Expect::Ok => assert!(
                        (200..300).contains(&status),
                        "{key}: {method} {url} → {status}"
                    ),
                    Expect::Forbidden => {
                        assert!(resp.headers().get("www-authenticate").is_none());
                        let p = assert_problem(resp, 403).await;
                        assert_eq!(
                            p["type"], "urn:neardup:problem:forbidden",
                            "{key}: {method} {url}"
                        );
                    }
                }
                checked += 1;
            }
            // The collection's own description follows the same rule.
            if let Some(c) = collection {
                let resp = send(
                    &app,
                    Method::GET,
                    &format!("/collections/{c}"),
                    Some(&auth),
                    None,
                )
                .await;
                let expected = if allowed.contains(&c) { 200 } else { 403 };
                assert_eq!(resp.status(), expected, "{key}: GET /collections/{c}");
            }
        }
        // The list shows what the key may use.
        let resp = send(&app, Method::GET, "/collections", Some(&auth), None).await;
        let body: Value = resp.json().await.unwrap();
        let listed: Vec<&str> = body["collections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        let mut expected: Vec<&str> = allowed.to_vec();
        expected.sort();
        assert_eq!(listed, expected, "{key}");
        // Managing collections, snapshots and metrics need a key without a list.
        let unlisted = allowed.len() == 4;
        for (method, path, body) in [
            (Method::PUT, "/collections/newone", Some(json!({}))),
            (
                Method::PATCH,
                "/collections/other",
                Some(json!({"retention": {"ttl_secs": 60}})),
            ),
            (Method::POST, "/admin/snapshot", None),
            (Method::GET, "/metrics", None),
            (Method::DELETE, "/collections/newone", None),
        ] {
            let resp = send(&app, method.clone(), path, Some(&auth), body).await;
            let status = resp.status().as_u16();
            let ok = unlisted && (writes || method == Method::GET);
            if ok {
                assert!(
                    (200..300).contains(&status),
                    "{key}: {method} {path} → {status}"
                );
            } else {
                assert_eq!(status, 403, "{key}: {method} {path}");
            }
        }
    }
    assert!(checked > 200);
    // A reindex changes a collection: a key with a list gets 403 even on its own.
    for key in ["bodies-titles", "bodies-reader"] {
        let resp = send(
            &app,
            Method::POST,
            "/collections/bodies/reindex",
            Some(&bearer(key)),
            Some(json!({"shingle": {"k": 2}})),
        )
        .await;
        assert_eq!(resp.status(), 403, "{key}");
    }
    // A key limited to a collection that does not exist gets the 404 for it
    // (it may know of it), and a 403 elsewhere.
    let ghost = bearer("ghost-only");
    let resp = send(
        &app,
        Method::GET,
        "/collections/ghost/stats",
        Some(&ghost),
        None,
    )
    .await;
    assert_eq!(
        assert_problem(resp, 404).await["type"],
        "urn:neardup:problem:collection-not-found"
    );
    let resp = send(
        &app,
        Method::GET,
        "/collections/bodies/stats",
        Some(&ghost),
        None,
    )
    .await;
    assert_problem(resp, 403).await;
    // Someone else's collection that does not exist: 403, nothing learned.
    let resp = send(
        &app,
        Method::GET,
        "/collections/nope/stats",
        Some(&bearer("bodies-titles")),
        None,
    )
    .await;
    assert_problem(resp, 403).await;
    // Today's keys keep working beside them.
    let resp = send(
        &app,
        Method::GET,
        "/collections/other/stats",
        Some(&bearer(READER)),
        None,
    )
    .await;
    assert_eq!(resp.status(), 200);
    let resp = send(
        &app,
        Method::DELETE,
        "/collections/other",
        Some(&bearer(READER)),
        None,
    )
    .await;
    assert_problem(resp, 403).await;
}

#[test]
fn scoped_keys_are_validated_like_the_others_and_never_echoed() {
    let mut settings = test_settings();
    settings.auth.keys = vec![
        scoped("ok-key", Some(&["bodies"]), false),
        scoped("bad zz", None, false),
    ];
    let e = settings.validate().unwrap_err().to_string();
    assert!(e.contains("auth.keys[1]"), "{e}");
    assert!(!e.contains("zz"), "{e}");
    let mut settings = test_settings();
    settings.auth.keys = vec![scoped("k1-key", Some(&["Not A Name"]), false)];
    let e = settings.validate().unwrap_err().to_string();
    assert!(e.contains("auth.keys[0].collections"), "{e}");
    let mut settings = test_settings();
    settings.auth.keys = vec![scoped("same-key", None, false)];
    settings.auth.api_keys = vec![Secret::new("same-key")];
    let e = settings.validate().unwrap_err().to_string();
    assert!(e.contains("twice") || e.contains("more than once"), "{e}");
    assert!(!e.contains("same-key"), "{e}");
    let debug = format!("{:?}", {
        let mut s = test_settings();
        s.auth.keys = vec![scoped("secret-scoped-key", Some(&["a"]), true)];
        s
    });
    assert!(!debug.contains("secret-scoped-key"), "{debug}");
}

#[test]
fn scoped_keys_load_from_toml_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("neardup.toml");
    std::fs::write(
        &path,
        r#"
[[auth.keys]]
key = "bodies-key-123"
collections = ["bodies", "titles"]

[[auth.keys]]
key = "reader-key-123"
read_only = true
name = "Zoë, relecture"
"#,
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["--config", path.to_str().unwrap(), "print-config"])
        .current_dir(dir.path())
        .output()
        .expect("neardup runs");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !stdout.contains("bodies-key-123") && !stdout.contains("reader-key-123"),
        "{stdout}"
    );
    let config: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        config["auth"]["keys"],
        json!([
            {"key": "***", "collections": ["bodies", "titles"], "read_only": false},
            {"key": "***", "collections": null, "read_only": true, "name": "Zoë, relecture"},
        ])
    );
}
