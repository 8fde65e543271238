//! Every error status, each an RFC 9457 `application/problem+json` body
//! (checked by `assert_problem`), with its stable `type`.

use crate::helpers::{
    assert_problem, doc_path, encode, similar_path, spawn_app, spawn_app_with, start_partial_post,
    test_settings, TestApp,
};
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::BTreeSet;

const TEXT: &str = "The night is dark and the moon is red.";

fn problem_type(slug: &str) -> String {
    format!("urn:neardup:problem:{slug}")
}

/// Assert a problem with `status` and `type` `urn:neardup:problem:<slug>`,
/// naming the request (`ctx`) on failure.
async fn expect_problem(
    resp: reqwest::Response,
    status: u16,
    slug: &str,
    ctx: impl std::fmt::Display,
) -> Value {
    assert_eq!(resp.status().as_u16(), status, "{ctx}");
    let body = assert_problem(resp, status).await;
    assert_eq!(body["type"], problem_type(slug), "{ctx}");
    body
}

/// Every route that takes a JSON body, with a valid body for it.
fn json_endpoints() -> Vec<(Method, &'static str, Value)> {
    vec![
        (Method::POST, "/documents", json!({"text": TEXT})),
        (Method::PUT, "/documents/put-target", json!({"text": TEXT})),
        (
            Method::POST,
            "/documents/batch",
            json!({"documents": [{"text": TEXT}]}),
        ),
        (Method::POST, "/similar", json!({"text": TEXT})),
    ]
}

async fn send(
    app: &TestApp,
    method: &Method,
    path: &str,
    content_type: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> reqwest::Response {
    let mut req = app.client.request(method.clone(), app.url(path)).body(body);
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    req.send().await.expect("request sent")
}

#[tokio::test]
async fn valid_bodies_are_accepted_by_every_json_endpoint() {
    // The control for the tests below: the same requests, well formed, succeed.
    let app = spawn_app().await;
    for (method, path, body) in json_endpoints() {
        for ct in ["application/json", "application/json; charset=utf-8"] {
            let resp = send(&app, &method, path, Some(ct), body.to_string()).await;
            assert!(
                resp.status().is_success(),
                "{method} {path}: {}",
                resp.status()
            );
        }
    }
}

/// `body` with a 0xFF byte (never valid UTF-8) inside the text string.
fn not_utf8(body: &str) -> Vec<u8> {
    let mut bytes = body.as_bytes().to_vec();
    bytes.insert(body.find("moon").expect("the text is in the body"), 0xFF);
    bytes
}

#[tokio::test]
async fn malformed_json_is_400() {
    let app = spawn_app().await;
    for (method, path, valid) in json_endpoints() {
        let valid = valid.to_string();
        let bodies: Vec<Vec<u8>> = vec![
            b"{".to_vec(),
            b"not json".to_vec(),
            b"".to_vec(),
            b"{'text': 'single quotes'}".to_vec(),
            b"\xff\xfe".to_vec(),
            // The valid body, cut short, with trailing garbage, or with a
            // byte that is not UTF-8 inside the text.
            valid.as_bytes()[..valid.len() - 1].to_vec(),
            format!("{valid} trailing").into_bytes(),
            not_utf8(&valid),
        ];
        for body in bodies {
            let ctx = format!("{method} {path} {:?}", String::from_utf8_lossy(&body));
            let resp = send(&app, &method, path, Some("application/json"), body).await;
            expect_problem(resp, 400, "malformed-json", ctx).await;
        }
    }
    assert_eq!(app.stats().await["documents"], 0);
}

#[tokio::test]
async fn json_of_the_wrong_shape_is_422() {
    let app = spawn_app().await;
    let document_bodies = [
        json!({}),
        json!({"text": 5}),
        json!({"text": null}),
        json!({"text": ["a"]}),
        json!({"id": 5, "text": TEXT}),
        json!({"text": TEXT, "unknown": 1}),
        json!({"text": TEXT, "metadata": "not an object"}),
        json!([]),
        json!(null),
        json!("a string"),
    ];
    for path in ["/documents", "/documents/put-target"] {
        let method = if path == "/documents" {
            Method::POST
        } else {
            Method::PUT
        };
        for body in &document_bodies {
            let resp = send(
                &app,
                &method,
                path,
                Some("application/json"),
                body.to_string(),
            )
            .await;
            expect_problem(resp, 422, "invalid-body", format!("{path} {body}")).await;
        }
    }
    for body in [
        json!({}),
        json!({"text": 5}),
        json!({"text": TEXT, "limit": "5"}),
        json!({"text": TEXT, "limit": -1}),
        json!({"text": TEXT, "limit": 2.5}),
        json!({"text": TEXT, "threshold": "0.9"}),
        json!({"text": TEXT, "id": "x"}),
    ] {
        expect_problem(
            app.post_json("/similar", &body).await,
            422,
            "invalid-body",
            format!("{body}"),
        )
        .await;
    }
    for body in [
        json!({}),
        json!({"documents": {}}),
        json!({"documents": null}),
        json!({"docs": []}),
        json!({"documents": [], "mode": "upsert"}),
        json!([{"text": TEXT}]),
    ] {
        expect_problem(
            app.post_json("/documents/batch", &body).await,
            422,
            "invalid-body",
            format!("{body}"),
        )
        .await;
    }
    assert_eq!(app.stats().await["documents"], 0);
}

#[tokio::test]
async fn json_arrays_are_not_accepted_in_place_of_objects() {
    // Regression: the request structs derive
    // `Deserialize`, which also accepts a JSON array of the fields in
    // declaration order, so `[null, "text"]` is stored as a document and
    // `["text"]` is a valid POST /similar body. The contract (openapi.yaml,
    // "wrong types are 422") says these bodies are objects.
    let app = spawn_app().await;
    let resp = app.post_json("/documents", &json!([null, TEXT])).await;
    expect_problem(resp, 422, "invalid-body", "POST /documents [null, text]").await;
    let resp = app.put_json("/documents/arr", &json!([null, TEXT])).await;
    expect_problem(resp, 422, "invalid-body", "PUT /documents/arr [null, text]").await;
    let resp = app.post_json("/similar", &json!([TEXT])).await;
    expect_problem(resp, 422, "invalid-body", "POST /similar [text]").await;
    let resp = app
        .post_json("/documents/batch", &json!({"documents": [["arr2", TEXT]]}))
        .await;
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["results"][0]["status"], 422,
        "batch item [id, text]: {body}"
    );
    assert_eq!(app.stats().await["documents"], 0);
}

#[tokio::test]
async fn a_missing_or_non_json_content_type_is_415() {
    let app = spawn_app().await;
    for (method, path, body) in json_endpoints() {
        for ct in [
            None,
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            Some("application/jsonx"),
            Some("json"),
        ] {
            let resp = send(&app, &method, path, ct, body.to_string()).await;
            expect_problem(
                resp,
                415,
                "unsupported-media-type",
                format!("{method} {path} {ct:?}"),
            )
            .await;
        }
    }
    assert_eq!(app.stats().await["documents"], 0);
}

#[tokio::test]
async fn unknown_routes_are_404() {
    let app = spawn_app().await;
    for (method, path) in [
        (Method::GET, "/nope"),
        (Method::GET, "/documents/a/b"),
        (Method::DELETE, "/documents/a/b"),
        (Method::POST, "/similar/extra"),
        (Method::GET, "/Documents/a"),
        (Method::GET, "/stats/"),
    ] {
        let resp = app.request(method.clone(), path).await;
        expect_problem(resp, 404, "route-not-found", format!("{method} {path}")).await;
    }
}

#[tokio::test]
async fn wrong_methods_are_405_with_an_allow_header() {
    let app = spawn_app().await;
    let methods = ["GET", "POST", "PUT", "DELETE", "PATCH"];
    for (method, path, allowed) in [
        (Method::GET, "/documents", &["POST"][..]),
        (Method::DELETE, "/documents", &["POST"]),
        (Method::GET, "/documents/batch", &["POST"]),
        (Method::PATCH, "/documents/x", &["GET", "PUT", "DELETE"]),
        (Method::POST, "/documents/x", &["GET", "PUT", "DELETE"]),
        (Method::DELETE, "/similar", &["GET", "POST"]),
        (Method::POST, "/compare", &["GET"]),
        (Method::POST, "/stats", &["GET"]),
        (Method::DELETE, "/healthz", &["GET"]),
        (Method::PUT, "/readyz", &["GET"]),
        (Method::POST, "/metrics", &["GET"]),
    ] {
        let resp = app.request(method.clone(), path).await;
        let allow: BTreeSet<String> = resp
            .headers()
            .get("allow")
            .unwrap_or_else(|| panic!("{method} {path}: no Allow header"))
            .to_str()
            .unwrap()
            .split(',')
            .map(|m| m.trim().to_owned())
            .collect();
        expect_problem(resp, 405, "method-not-allowed", "").await;
        for m in methods {
            assert_eq!(
                allow.contains(m),
                allowed.contains(&m),
                "{method} {path}: Allow {allow:?}"
            );
        }
    }
}

#[tokio::test]
async fn bodies_over_max_body_bytes_are_413() {
    let mut settings = test_settings();
    settings.server.max_body_bytes = 4096;
    settings.limits.max_text_bytes = 4096;
    let app = spawn_app_with(settings).await;
    let big = "word ".repeat(1000); // 5000 bytes of text
    let small = "word ".repeat(600); // 3000 bytes: under the limit
    for (method, path, body) in [
        (Method::POST, "/documents", json!({"text": big})),
        (Method::PUT, "/documents/big", json!({"text": big})),
        (
            Method::POST,
            "/documents/batch",
            json!({"documents": [{"text": small}, {"text": small}]}),
        ),
        (Method::POST, "/similar", json!({"text": big})),
    ] {
        let resp = send(
            &app,
            &method,
            path,
            Some("application/json"),
            body.to_string(),
        )
        .await;
        expect_problem(resp, 413, "payload-too-large", path.to_string()).await;
    }
    assert_eq!(app.stats().await["documents"], 0);
    // The limit is the body size, not a text size: just under it is fine.
    let resp = app
        .post_json("/documents", &json!({"id": "small", "text": small}))
        .await;
    assert_eq!(resp.status(), 201);
}

#[tokio::test]
async fn a_batch_over_max_batch_is_413() {
    let mut settings = test_settings();
    settings.server.max_batch = 2;
    let app = spawn_app_with(settings).await;
    let docs: Vec<Value> = (0..3).map(|_| json!({"text": TEXT})).collect();
    let resp = app
        .post_json("/documents/batch", &json!({"documents": docs}))
        .await;
    let problem = expect_problem(resp, 413, "payload-too-large", "").await;
    assert!(problem["detail"].as_str().unwrap().contains("max_batch"));
}

#[tokio::test]
async fn invalid_ids_are_400() {
    let app = spawn_app().await;
    let too_long = "x".repeat(257);
    let too_long_multibyte = "ü".repeat(129); // 129 chars, 258 bytes
    for id in [
        "",
        too_long.as_str(),
        too_long_multibyte.as_str(),
        "line\nbreak",
        "tab\there",
        "nul\0",
        "del\u{7f}",
        "c1\u{85}",
    ] {
        let resp = app
            .post_json("/documents", &json!({"id": id, "text": TEXT}))
            .await;
        expect_problem(resp, 400, "invalid-id", format!("POST {id:?}")).await;
        if !id.is_empty() {
            let resp = app.put_json(&doc_path(id), &json!({"text": TEXT})).await;
            expect_problem(resp, 400, "invalid-id", format!("PUT {id:?}")).await;
        }
    }
    assert_eq!(app.stats().await["documents"], 0);
    // The boundary: 256 bytes, in one- or two-byte characters, is fine.
    for id in ["x".repeat(256), "ü".repeat(128)] {
        let resp = app
            .post_json("/documents", &json!({"id": id, "text": TEXT}))
            .await;
        assert_eq!(resp.status(), 201, "{} bytes", id.len());
        assert_eq!(app.get_json(&doc_path(&id)).await["id"], id.as_str());
    }
}

#[tokio::test]
async fn a_path_id_that_is_not_utf8_is_400() {
    let app = spawn_app().await;
    let resp = app
        .put_json("/documents/%FF%FE", &json!({"text": TEXT}))
        .await;
    expect_problem(resp, 400, "invalid-parameter", "").await;
    assert_problem(app.get("/documents/%FF").await, 400).await;
    assert_problem(app.delete("/documents/%FF").await, 400).await;
}

#[tokio::test]
async fn texts_with_nothing_left_after_normalization_are_422() {
    let app = spawn_app().await;
    for text in ["?!...", "", "   \n\t ", "— … ! ? ¿ «»", "\u{200b}"] {
        let resp = app
            .post_json("/documents", &json!({"id": "e", "text": text}))
            .await;
        expect_problem(resp, 422, "empty-text", format!("{text:?}")).await;
        let resp = app.put_json("/documents/e", &json!({"text": text})).await;
        assert_problem(resp, 422).await;
        let resp = app.post_json("/similar", &json!({"text": text})).await;
        assert_problem(resp, 422).await;
        let resp = app
            .post_json("/documents?similar=true", &json!({"text": text}))
            .await;
        assert_problem(resp, 422).await;
    }
    assert_eq!(app.stats().await["documents"], 0);
}

#[tokio::test]
async fn unknown_or_malformed_query_parameters_are_400() {
    let app = spawn_app().await;
    app.insert("d", TEXT).await;
    expect_problem(
        app.get("/similar?id=d&foo=1").await,
        400,
        "invalid-parameter",
        "",
    )
    .await;
    for path in [
        "/similar?id=d&limits=5",
        "/similar?id=d&id=d",
        "/similar",
        "/similar?threshold=0.9",
        "/compare?a=d&b=d&c=d",
        "/compare?a=d",
        "/compare",
    ] {
        expect_problem(
            app.get(path).await,
            400,
            "invalid-parameter",
            path.to_string(),
        )
        .await;
    }
    for path in [
        "/documents?foo=1",
        "/documents?similar=maybe",
        "/documents?similar=true&limit=x",
        "/documents/batch?foo=1",
        "/documents/batch?mode=merge",
    ] {
        let body = if path.starts_with("/documents/batch") {
            json!({"documents": [{"id": "new", "text": TEXT}]})
        } else {
            json!({"id": "new", "text": TEXT})
        };
        expect_problem(
            app.post_json(path, &body).await,
            400,
            "invalid-parameter",
            path.to_string(),
        )
        .await;
    }
    assert_problem(app.get("/documents/new").await, 404).await;
}

#[tokio::test]
async fn unknown_documents_are_404() {
    let app = spawn_app().await;
    app.insert("d", TEXT).await;
    for resp in [
        app.get("/documents/nope").await,
        app.delete("/documents/nope").await,
        app.get(&similar_path("nope", None, None)).await,
        app.get("/compare?a=d&b=nope").await,
        app.get("/compare?a=nope&b=d").await,
        app.get(&format!("/documents/{}", encode("d "))).await,
    ] {
        expect_problem(resp, 404, "document-not-found", "").await;
    }
}

#[tokio::test]
async fn an_existing_id_is_409() {
    let app = spawn_app().await;
    app.insert("d", TEXT).await;
    let resp = app
        .post_json("/documents", &json!({"id": "d", "text": "other"}))
        .await;
    expect_problem(resp, 409, "already-exists", "").await;
}

#[tokio::test]
async fn a_body_id_that_differs_from_the_path_is_422() {
    let app = spawn_app().await;
    let resp = app
        .put_json("/documents/a", &json!({"id": "b", "text": TEXT}))
        .await;
    expect_problem(resp, 422, "invalid-body", "").await;
    assert_eq!(app.stats().await["documents"], 0);
}

#[tokio::test]
async fn a_request_over_the_timeout_is_503_with_retry_after() {
    let mut settings = test_settings();
    settings.server.request_timeout_secs = 1;
    let app = spawn_app_with(settings).await;
    // A client that sends half its body and stalls keeps the handler waiting.
    let body = json!({"id": "slow", "text": TEXT}).to_string();
    let started = std::time::Instant::now();
    let partial = start_partial_post(app.addr, "/documents", body.as_bytes(), 10).await;
    let resp = partial.complete(false).await;
    assert!(started.elapsed() >= std::time::Duration::from_millis(900));
    assert_eq!(resp.status, 503);
    assert!(resp.header("retry-after").is_some(), "no Retry-After");
    assert!(resp
        .header("content-type")
        .unwrap()
        .starts_with("application/problem+json"));
    let problem: Value = serde_json::from_slice(&resp.body).expect("problem JSON");
    assert_eq!(problem["status"], 503);
    assert!(problem["title"].is_string() && problem["detail"].is_string());
    assert_problem(app.get("/documents/slow").await, 404).await;
}

#[tokio::test]
async fn error_responses_carry_a_request_id() {
    let app = spawn_app().await;
    let resp = app.get("/documents/nope").await;
    let id = resp
        .headers()
        .get("x-request-id")
        .expect("x-request-id")
        .to_str()
        .unwrap()
        .to_owned();
    assert!(!id.is_empty());
    assert_problem(resp, 404).await;
    // A client's own request id is echoed back.
    let resp = app
        .client
        .get(app.url("/nope"))
        .header("x-request-id", "client-chosen-17")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-request-id"], "client-chosen-17");
    assert_problem(resp, 404).await;
}
