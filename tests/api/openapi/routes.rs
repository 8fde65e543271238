//! The spec lists exactly the router's routes, and the router serves exactly the spec.

use super::checker::*;
use super::live::*;
use super::spec::*;
use crate::helpers::spawn_app;
use neardup::http::ROUTES;
use serde_json::{json, Value};
use std::collections::BTreeSet;

#[test]
fn the_spec_documents_exactly_the_routes_the_router_declares() {
    let version = spec()["openapi"].as_str().expect("an openapi version");
    assert!(version.starts_with("3.1."), "OpenAPI 3.1, got {version}");
    for (path, item) in spec()["paths"].as_object().unwrap() {
        for key in item.as_object().unwrap().keys() {
            assert!(
                HTTP_METHODS.contains(&key.as_str()) || PATH_ITEM_FIELDS.contains(&key.as_str()),
                "{path}: unexpected path-item key {key:?} (a misspelt method?)"
            );
        }
    }
    let documented: BTreeSet<(String, String)> = operations()
        .iter()
        .map(|o| (o.method.clone(), o.path.to_owned()))
        .collect();
    let routed: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(routed.len(), ROUTES.len(), "ROUTES lists a route twice");
    let undocumented: Vec<_> = routed.difference(&documented).collect();
    let unrouted: Vec<_> = documented.difference(&routed).collect();
    assert!(
        undocumented.is_empty(),
        "routes missing from openapi.yaml: {undocumented:?}"
    );
    assert!(
        unrouted.is_empty(),
        "operations not in ROUTES: {unrouted:?}"
    );
}

#[test]
fn operation_ids_are_unique_and_every_ref_resolves() {
    let mut ids = BTreeSet::new();
    for op in operations() {
        let id = op.op["operationId"]
            .as_str()
            .unwrap_or_else(|| panic!("{} has no operationId", op.name()));
        assert!(ids.insert(id), "operationId {id} is used twice");
    }
    fn walk(value: &Value, refs: &mut usize) {
        match value {
            Value::Object(map) => {
                if let Some(reference) = map.get("$ref") {
                    pointer(reference.as_str().expect("$ref is a string"));
                    *refs += 1;
                }
                map.values().for_each(|v| walk(v, refs));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, refs)),
            _ => {}
        }
    }
    let mut refs = 0;
    walk(spec(), &mut refs);
    assert!(
        refs > 20,
        "the spec should share its components, saw {refs} $refs"
    );
}

#[test]
fn every_error_response_in_the_spec_is_a_problem_document() {
    let problem = component_schema("Problem");
    for op in operations() {
        let responses = op.op["responses"].as_object().expect("responses");
        for (code, response) in responses {
            let status: u16 = code.parse().expect("explicit status codes only");
            let response = resolve(response);
            let what = format!("{} → {status}", op.name());
            assert!(
                response["description"].is_string(),
                "{what}: no description"
            );
            if status >= 400 {
                let content = response["content"].as_object().expect("a problem body");
                let keys: Vec<&String> = content.keys().collect();
                assert_eq!(keys, ["application/problem+json"], "{what}");
                let schema = resolve(&content["application/problem+json"]["schema"]);
                assert!(
                    std::ptr::eq(schema, problem),
                    "{what}: not the Problem schema"
                );
            } else if status == 204 {
                assert!(response.get("content").is_none(), "{what}: 204 has no body");
            } else {
                assert!(response["content"].is_object(), "{what}: no content");
            }
        }
        let documents = |status: u16| op.response(status).is_some();
        if let Some((media, _, _)) = op.request_body() {
            // JSON, or an export's lines (POST /import: as bytes first,
            // for generated clients, then as NDJSON).
            assert!(
                ["application/json", "application/octet-stream"].contains(&media),
                "{}: {media}",
                op.name()
            );
            for status in [400, 413, 415, 422] {
                assert!(
                    documents(status),
                    "{}: a JSON body can get {status}",
                    op.name()
                );
            }
        }
        if op.op.get("security") != Some(&json!([])) {
            assert!(
                documents(401),
                "{}: needs a key when keys are configured",
                op.name()
            );
        }
        if op.method != "GET" {
            assert!(documents(403), "{}: read-only keys get 403", op.name());
        }
        if !served_while_restoring(op.path) {
            assert!(
                documents(503),
                "{}: answers 503 not-ready while restoring",
                op.name()
            );
        }
        let has_parameters = op
            .parameters()
            .iter()
            .any(|p| p["in"] == "query" || p["in"] == "path");
        if has_parameters {
            assert!(documents(400), "{}: parameters can be invalid", op.name());
        }
    }
}

// ---------------------------------------------------------------------------
// 2. The router serves exactly the spec
// ---------------------------------------------------------------------------

#[tokio::test]
async fn every_documented_operation_is_routed_by_the_live_server() {
    let app = spawn_app().await;
    for op in operations() {
        let url = example_url(&op, false);
        let body = match op.request_body() {
            Some((_, _, examples)) => Body::Json(examples[0].clone()),
            None => Body::None,
        };
        let reply = send(&app, &op.method, &url, &body).await;
        let what = format!("{} as {url} → {}", op.name(), reply.status);
        assert_ne!(reply.status, 405, "{what}: method not routed");
        assert_ne!(
            reply.problem_type().as_deref(),
            Some("urn:neardup:problem:route-not-found"),
            "{what}: path not routed"
        );
        assert_documented(&op.method, op.path, &reply);
    }
}

#[tokio::test]
async fn every_method_a_documented_path_does_not_list_is_answered_405_with_allow() {
    let app = spawn_app().await;
    let method_not_allowed = component_response("MethodNotAllowed");
    let ops = operations();
    let paths: BTreeSet<&str> = ops.iter().map(|o| o.path).collect();
    for path in paths {
        let op = ops.iter().find(|o| o.path == path).unwrap();
        let url = example_url(op, false).split('?').next().unwrap().to_owned();
        let mut listed: BTreeSet<String> = ops
            .iter()
            .filter(|o| o.path == path)
            .map(|o| o.method.clone())
            .collect();
        if listed.contains("GET") {
            // RFC 9110: HEAD is served wherever GET is, with GET's status.
            let get = send(&app, "GET", &url, &Body::None).await;
            let head = send(&app, "HEAD", &url, &Body::None).await;
            assert_eq!(head.status, get.status, "HEAD {url} answers like GET");
            assert!(head.body.is_empty(), "HEAD {url} has no body");
            listed.insert("HEAD".to_owned());
        }
        for method in HTTP_METHODS.map(|m| m.to_ascii_uppercase()) {
            if listed.contains(&method) {
                continue;
            }
            let reply = send(&app, &method, &url, &Body::None).await;
            let what = format!("{method} {url}");
            assert_eq!(reply.status, 405, "{what}: {:?}", reply.problem_type());
            let allow: BTreeSet<String> = reply.headers["allow"]
                .to_str()
                .unwrap()
                .split(',')
                .map(|m| m.trim().to_owned())
                .collect();
            assert_eq!(allow, listed, "{what}: Allow names the documented methods");
            if method == "HEAD" {
                let ct = reply.content_type().unwrap_or_default();
                assert!(ct.starts_with("application/problem+json"), "{what}: {ct}");
                continue;
            }
            let body = assert_matches_response(method_not_allowed, &reply, &what);
            assert_eq!(body["type"], "urn:neardup:problem:method-not-allowed");
        }
    }
}

#[tokio::test]
async fn paths_outside_the_spec_are_answered_route_not_found() {
    let app = spawn_app().await;
    let route_not_found = component_response("RouteNotFound");
    // (`/` is the console's: a redirect to `/ui/`, see tests/api/ui.rs.)
    for path in [
        "/documents/",
        "/documents/a/b",
        "/similar/q1",
        "/compare/q1",
        "/admin",
        "/admin/snapshot/now",
        "/stats/",
        "/openapi.yaml",
    ] {
        for method in ["GET", "POST"] {
            let reply = send(&app, method, path, &Body::None).await;
            let what = format!("{method} {path}");
            assert_eq!(reply.status, 404, "{what}");
            let body = assert_matches_response(route_not_found, &reply, &what);
            assert_eq!(
                body["type"], "urn:neardup:problem:route-not-found",
                "{what}"
            );
        }
    }
}

/// No query string is silently ignored: an operation that documents no
/// query parameter refuses any (`POST /similar?threshold=0.9` was answered
/// at the configured 0.8), one that documents some refuses unknown ones;
/// both as a documented 400 `invalid-parameter`. The probes, the metrics
/// and the document itself are left alone.
#[tokio::test]
async fn every_operation_refuses_query_parameters_it_does_not_document() {
    let app = spawn_app().await;
    // The collection the examples name, so its routes get past the lookup.
    let name = operation("GET", "/collections/{name}")
        .parameters()
        .into_iter()
        .find(|p| p["in"] == "path")
        .and_then(|p| p["example"].as_str())
        .expect("the collection name has an example");
    let created = send(
        &app,
        "PUT",
        &format!("/collections/{name}"),
        &Body::Json(json!({})),
    )
    .await;
    assert_eq!(created.status, 201);
    for op in operations() {
        if served_while_restoring(op.path) || op.path == "/metrics" {
            continue;
        }
        let url = example_url(&op, false);
        let url = format!("{url}{}bogus=1", if url.contains('?') { '&' } else { '?' });
        let body = match op.request_body() {
            Some((_, _, examples)) => Body::Json(examples[0].clone()),
            None => Body::None,
        };
        let reply = send(&app, &op.method, &url, &body).await;
        let what = format!("{} as {url}", op.name());
        assert_eq!(reply.status, 400, "{what}: {:?}", reply.problem_type());
        let body = assert_documented(&op.method, op.path, &reply);
        assert_eq!(
            body["type"], "urn:neardup:problem:invalid-parameter",
            "{what}"
        );
    }
    for (path, body) in [
        ("/similar?threshold=0.9", json!({"text": "a b c"})),
        ("/similar?limit=abc", json!({"text": "a b c"})),
        (
            "/explain?threshold=0.9",
            json!({"a": {"text": "a b"}, "b": {"text": "a c"}}),
        ),
    ] {
        let reply = send(&app, "POST", path, &Body::Json(body)).await;
        assert_eq!(reply.status, 400, "POST {path}");
        assert_eq!(
            reply.problem_type().as_deref(),
            Some("urn:neardup:problem:invalid-parameter"),
            "POST {path}"
        );
    }
}
