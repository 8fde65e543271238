//! `openapi.yaml` against the live router: the spec documents the server
//! exactly as it is served.
//!
//! - **Routes, both directions.** The spec's (method, path) operations equal
//!   `neardup::http::ROUTES`; every operation is routed by a live server; every
//!   method a spec path does not list is answered 405 with an `Allow` header
//!   naming exactly the listed ones; paths outside the spec are
//!   `route-not-found`.
//! - **Examples.** Every request-body example is accepted by its operation,
//!   and every example (request, response, parameter) conforms to its schema.
//! - **Live bodies.** A happy path per route and the error responses each
//!   route produces are checked against the schema documented for their
//!   status code: status documented, media type as documented, required
//!   headers present, body conforming.
//!
//! The conformance checker (`schema_errors`) is deliberately small and
//! strict: `$ref` (local), `type`, `enum`, `const`, `properties`, `required`,
//! `additionalProperties`, `items`, `anyOf`/`oneOf` and the numeric, length
//! and size bounds. A schema keyword it does not know is an error, so the
//! spec cannot grow constraints the tests silently skip; `pattern` and
//! `format` are the only unchecked assertions.

use crate::helpers::{assert_problem, spawn_app, spawn_app_with, test_settings, TestApp};
use neardup::config::Secret;
use neardup::http::ROUTES;
use reqwest::header::HeaderMap;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

// ---------------------------------------------------------------------------
// The spec as data
// ---------------------------------------------------------------------------

const SPEC_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml");

/// The HTTP methods an OpenAPI path item can hold, as path-item keys.
const HTTP_METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Path-item keys that are not operations.
const PATH_ITEM_FIELDS: [&str; 3] = ["summary", "description", "parameters"];

/// Routes the router serves even while the index is being restored, so they
/// never answer 503 `not-ready` (`ALWAYS_SERVED` in `src/http/mod.rs`).
const PROBES: [&str; 4] = ["/healthz", "/readyz", "/metrics", "/openapi.json"];

fn spec() -> &'static Value {
    static SPEC: OnceLock<Value> = OnceLock::new();
    SPEC.get_or_init(|| {
        let text = std::fs::read_to_string(SPEC_FILE).expect("openapi.yaml is readable");
        serde_yaml_ng::from_str(&text).expect("openapi.yaml parses as YAML")
    })
}

/// One documented operation.
struct Op {
    /// Upper case, as in `ROUTES`.
    method: String,
    path: &'static str,
    op: &'static Value,
    item: &'static Value,
}

impl Op {
    fn name(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    /// Path-item and operation parameters, resolved.
    fn parameters(&self) -> Vec<&'static Value> {
        [self.item, self.op]
            .iter()
            .filter_map(|v| v.get("parameters").and_then(Value::as_array))
            .flatten()
            .map(resolve)
            .collect()
    }

    /// The (media type, schema, examples) of the JSON request body, if any.
    fn request_body(&self) -> Option<(&'static str, &'static Value, Vec<Value>)> {
        let body = resolve(self.op.get("requestBody")?);
        let (media, content) = body["content"]
            .as_object()
            .expect("requestBody has content")
            .iter()
            .next()
            .expect("requestBody has a media type");
        Some((media.as_str(), &content["schema"], media_examples(content)))
    }

    /// The documented response for `status`, resolved.
    fn response(&self, status: u16) -> Option<&'static Value> {
        self.op["responses"].get(status.to_string()).map(resolve)
    }
}

fn operations() -> Vec<Op> {
    let paths = spec()["paths"].as_object().expect("the spec has paths");
    let mut ops = Vec::new();
    for (path, item) in paths {
        for (key, op) in item.as_object().expect("a path item is an object") {
            if HTTP_METHODS.contains(&key.as_str()) {
                ops.push(Op {
                    method: key.to_ascii_uppercase(),
                    path: path.as_str(),
                    op,
                    item,
                });
            }
        }
    }
    ops
}

fn operation(method: &str, path: &str) -> Op {
    operations()
        .into_iter()
        .find(|o| o.method == method && o.path == path)
        .unwrap_or_else(|| panic!("{method} {path} is not documented"))
}

/// Follow local `$ref`s (`#/json/pointer`) to the referenced value.
fn resolve(value: &'static Value) -> &'static Value {
    let mut value = value;
    for _ in 0..16 {
        match value.get("$ref").and_then(Value::as_str) {
            Some(reference) => value = pointer(reference),
            None => return value,
        }
    }
    panic!("$ref chain too long at {value}");
}

fn pointer(reference: &str) -> &'static Value {
    let path = reference
        .strip_prefix('#')
        .unwrap_or_else(|| panic!("only local $refs are supported, got {reference:?}"));
    spec()
        .pointer(path)
        .unwrap_or_else(|| panic!("$ref {reference:?} does not resolve"))
}

/// `example` and every `examples.*.value` of a media type or parameter.
fn media_examples(holder: &'static Value) -> Vec<Value> {
    let mut out: Vec<Value> = holder.get("example").into_iter().cloned().collect();
    if let Some(map) = holder.get("examples").and_then(Value::as_object) {
        for (name, example) in map {
            let example = resolve(example);
            let value = example
                .get("value")
                .unwrap_or_else(|| panic!("example {name:?} has no value"));
            out.push(value.clone());
        }
    }
    out
}

fn is_json_media(media: &str) -> bool {
    media == "application/json" || media.ends_with("+json")
}

/// `type/subtype` of a Content-Type value.
fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

// ---------------------------------------------------------------------------
// The conformance checker
// ---------------------------------------------------------------------------

/// Keywords the checker enforces.
const ASSERTIONS: [&str; 18] = [
    "$ref",
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "oneOf",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
];

/// Keywords that annotate, plus `pattern` and `format`, which are not checked.
const ANNOTATIONS: [&str; 8] = [
    "description",
    "title",
    "examples",
    "default",
    "deprecated",
    "format",
    "pattern",
    "readOnly",
];

/// Every way `value` breaks `schema` (empty when it conforms).
fn schema_errors(schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(schema, value, "$", &mut errors);
    errors
}

fn check(schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    let Some(keywords) = schema.as_object() else {
        errors.push(format!("{at}: a schema must be an object, got {schema}"));
        return;
    };
    for key in keywords.keys() {
        // `x-` keys are extensions (`x-neardup-setting` names the setting a
        // value comes from): annotations to a validator.
        let known = ASSERTIONS.contains(&key.as_str())
            || ANNOTATIONS.contains(&key.as_str())
            || key.starts_with("x-");
        if !known {
            errors.push(format!("{at}: unsupported schema keyword `{key}`"));
        }
    }
    if let Some(reference) = schema.get("$ref") {
        let reference = reference.as_str().expect("$ref is a string");
        check(pointer(reference), value, at, errors);
    }
    if let Some(ty) = schema.get("type") {
        let names: Vec<&str> = match ty {
            Value::String(name) => vec![name.as_str()],
            Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
            other => {
                errors.push(format!(
                    "{at}: `type` must be a string or a list, got {other}"
                ));
                return;
            }
        };
        if !names.iter().any(|name| has_type(value, name, at, errors)) {
            errors.push(format!("{at}: expected type {ty}, got {value}"));
            return;
        }
    }
    if let Some(allowed) = schema.get("enum") {
        let allowed = allowed.as_array().expect("enum is a list");
        if !allowed.contains(value) {
            errors.push(format!("{at}: {value} is not one of {allowed:?}"));
        }
    }
    if let Some(constant) = schema.get("const") {
        if constant != value {
            errors.push(format!("{at}: expected {constant}, got {value}"));
        }
    }
    match value {
        Value::Object(map) => check_object(schema, map, at, errors),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{at}[{i}]"), errors);
                }
            }
            check_bound(schema, "minItems", items.len() as f64, at, errors);
            check_bound(schema, "maxItems", items.len() as f64, at, errors);
        }
        Value::String(s) => {
            let chars = s.chars().count() as f64;
            check_bound(schema, "minLength", chars, at, errors);
            check_bound(schema, "maxLength", chars, at, errors);
        }
        Value::Number(n) => {
            let n = n.as_f64().expect("a JSON number is an f64");
            for keyword in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
                check_bound(schema, keyword, n, at, errors);
            }
        }
        Value::Bool(_) | Value::Null => {}
    }
    if let Some(branches) = schema.get("anyOf").and_then(Value::as_array) {
        if !branches.iter().any(|b| schema_errors(b, value).is_empty()) {
            errors.push(format!("{at}: {value} matches no anyOf branch"));
        }
    }
    if let Some(branches) = schema.get("oneOf").and_then(Value::as_array) {
        let matching = branches
            .iter()
            .filter(|b| schema_errors(b, value).is_empty())
            .count();
        if matching != 1 {
            errors.push(format!(
                "{at}: {value} matches {matching} oneOf branches, not exactly one"
            ));
        }
    }
}

fn check_object(
    schema: &Value,
    map: &serde_json::Map<String, Value>,
    at: &str,
    errors: &mut Vec<String>,
) {
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(name) {
                errors.push(format!("{at}: missing required property `{name}`"));
            }
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    for (name, member) in map {
        let at = format!("{at}.{name}");
        match properties.and_then(|p| p.get(name)) {
            Some(member_schema) => check(member_schema, member, &at, errors),
            None => match schema.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    errors.push(format!("{at}: property not allowed by the schema"))
                }
                Some(Value::Bool(true)) | None => {}
                Some(extra) => check(extra, member, &at, errors),
            },
        }
    }
}

fn has_type(value: &Value, name: &str, at: &str, errors: &mut Vec<String>) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        // Strict: 1.0 is not an integer on this wire.
        "integer" => value.is_i64() || value.is_u64(),
        other => {
            errors.push(format!("{at}: unknown type name {other:?}"));
            false
        }
    }
}

fn check_bound(schema: &Value, keyword: &str, actual: f64, at: &str, errors: &mut Vec<String>) {
    let Some(bound) = schema.get(keyword) else {
        return;
    };
    let Some(bound) = bound.as_f64() else {
        errors.push(format!("{at}: `{keyword}` must be a number, got {bound}"));
        return;
    };
    let ok = match keyword {
        "minimum" | "minItems" | "minLength" => actual >= bound,
        "maximum" | "maxItems" | "maxLength" => actual <= bound,
        "exclusiveMinimum" => actual > bound,
        "exclusiveMaximum" => actual < bound,
        _ => unreachable!("not a bound keyword: {keyword}"),
    };
    if !ok {
        errors.push(format!("{at}: {actual} violates {keyword} {bound}"));
    }
}

#[track_caller]
fn assert_conforms(schema: &Value, value: &Value, what: &str) {
    let errors = schema_errors(schema, value);
    assert!(
        errors.is_empty(),
        "{what} does not conform to its schema:\n  {}\nvalue: {value}",
        errors.join("\n  ")
    );
}

fn component_schema(name: &str) -> &'static Value {
    pointer(&format!("#/components/schemas/{name}"))
}

// ---------------------------------------------------------------------------
// Live requests
// ---------------------------------------------------------------------------

/// A request body to send.
enum Body {
    None,
    Json(Value),
    Raw(&'static str, String),
}

/// A finished response, buffered.
struct Reply {
    status: u16,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Reply {
    fn content_type(&self) -> Option<String> {
        self.headers
            .get("content-type")
            .map(|v| v.to_str().expect("an ASCII content type").to_owned())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The problem `type` of a JSON body, if it has one.
    fn problem_type(&self) -> Option<String> {
        let body: Value = serde_json::from_slice(&self.body).ok()?;
        body.get("type")?.as_str().map(str::to_owned)
    }
}

async fn send(app: &TestApp, method: &str, path: &str, body: &Body) -> Reply {
    send_with_key(app, method, path, body, None).await
}

/// `send` with an optional `Authorization: Bearer <key>`.
async fn send_with_key(
    app: &TestApp,
    method: &str,
    path: &str,
    body: &Body,
    key: Option<&str>,
) -> Reply {
    let method = Method::from_bytes(method.as_bytes()).expect("an HTTP method");
    let mut request = app.client.request(method, app.url(path));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let request = match body {
        Body::None => request,
        Body::Json(value) => request.json(value),
        Body::Raw(content_type, text) => request
            .header("content-type", *content_type)
            .body(text.clone()),
    };
    let resp = request.send().await.expect("request sent");
    Reply {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.bytes().await.expect("body read").to_vec(),
    }
}

/// Percent-encode everything but RFC 3986 unreserved characters.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The operation's path with `{params}` filled and its query parameters
/// (the required ones, or all of them) set from their examples.
fn example_url(op: &Op, all_query: bool) -> String {
    let mut path = op.path.to_owned();
    let mut query = Vec::new();
    for p in op.parameters() {
        let name = p["name"].as_str().expect("a parameter has a name");
        let required = p["required"].as_bool().unwrap_or(false);
        let example = p.get("example");
        match p["in"].as_str() {
            Some("path") => {
                let example = example.unwrap_or_else(|| {
                    panic!("{}: path parameter {name} has no example", op.name())
                });
                path = path.replace(&format!("{{{name}}}"), &encode(&scalar(example)));
            }
            Some("query") if required || all_query => {
                let example = example.unwrap_or_else(|| {
                    panic!("{}: query parameter {name} has no example", op.name())
                });
                query.push(format!("{name}={}", encode(&scalar(example))));
            }
            _ => {}
        }
    }
    assert!(!path.contains('{'), "{}: unfilled path {path}", op.name());
    if query.is_empty() {
        path
    } else {
        format!("{path}?{}", query.join("&"))
    }
}

/// Check a live reply against a documented response object: media type,
/// required headers and body schema. Returns the body (JSON, a string for
/// text, null when empty).
#[track_caller]
fn assert_matches_response(response: &'static Value, reply: &Reply, what: &str) -> Value {
    if let Some(headers) = response.get("headers").and_then(Value::as_object) {
        for (name, header) in headers {
            let header = resolve(header);
            if header["required"].as_bool().unwrap_or(false) {
                assert!(
                    reply.headers.contains_key(name.as_str()),
                    "{what}: documented header {name} is missing"
                );
            }
        }
    }
    let Some(content) = response.get("content").and_then(Value::as_object) else {
        assert!(
            reply.body.is_empty(),
            "{what}: documented without a body, got {:?}",
            String::from_utf8_lossy(&reply.body)
        );
        return Value::Null;
    };
    let content_type = reply
        .content_type()
        .unwrap_or_else(|| panic!("{what}: no Content-Type"));
    let media = essence(&content_type);
    let (_, documented) = content
        .iter()
        .find(|(key, _)| essence(key) == media)
        .unwrap_or_else(|| {
            let keys: Vec<&String> = content.keys().collect();
            panic!("{what}: Content-Type {content_type:?} is not among {keys:?}")
        });
    let body = if is_json_media(&media) {
        reply.json()
    } else {
        Value::String(String::from_utf8(reply.body.clone()).expect("a UTF-8 body"))
    };
    assert_conforms(&documented["schema"], &body, what);
    if media == "application/x-ndjson" {
        ndjson_lines(documented, body.as_str().unwrap(), what);
    }
    if media == "application/problem+json" {
        assert_eq!(body["status"], reply.status, "{what}: problem status");
    }
    body
}

/// Check every line of a JSON Lines body against the media type's
/// `x-item-schema`; returns the number of lines.
fn ndjson_lines(media_object: &'static Value, text: &str, what: &str) -> usize {
    let item = media_object
        .get("x-item-schema")
        .unwrap_or_else(|| panic!("{what}: application/x-ndjson without x-item-schema"));
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{what}: lines end in \\n"
    );
    let mut n = 0;
    for line in text.lines() {
        let value: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{what}: line {} is not JSON: {e}", n + 1));
        assert_conforms(item, &value, what);
        n += 1;
    }
    n
}

/// Check a live reply against what `method path` documents for its status.
#[track_caller]
fn assert_documented(method: &str, path: &str, reply: &Reply) -> Value {
    let op = operation(method, path);
    let what = format!("{method} {path} → {}", reply.status);
    let response = op.response(reply.status).unwrap_or_else(|| {
        panic!(
            "{what} is not documented: {}",
            String::from_utf8_lossy(&reply.body)
        )
    });
    assert_matches_response(response, reply, &what)
}

fn component_response(name: &str) -> &'static Value {
    pointer(&format!("#/components/responses/{name}"))
}

// ---------------------------------------------------------------------------
// 1. The spec lists exactly the router's routes
// ---------------------------------------------------------------------------

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
            assert_eq!(media, "application/json", "{}", op.name());
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
        if !PROBES.contains(&op.path) {
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
    for path in [
        "/",
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

// ---------------------------------------------------------------------------
// 3. The examples
// ---------------------------------------------------------------------------

#[tokio::test]
async fn every_request_body_example_is_accepted_by_its_operation() {
    let mut sent = 0;
    for op in operations() {
        let Some((_, schema, examples)) = op.request_body() else {
            continue;
        };
        assert!(!examples.is_empty(), "{}: no request example", op.name());
        for example in examples {
            assert_conforms(schema, &example, &format!("{} request example", op.name()));
            // With only the required parameters, then with every parameter
            // example too; a fresh server each time so examples cannot collide.
            for all_query in [false, true] {
                let app = spawn_app().await;
                let url = example_url(&op, all_query);
                let reply = send(&app, &op.method, &url, &Body::Json(example.clone())).await;
                let what = format!("{} {url} with {example}", op.method);
                assert!(
                    (200..300).contains(&reply.status),
                    "{what} → {}: {}",
                    reply.status,
                    String::from_utf8_lossy(&reply.body)
                );
                let body = assert_documented(&op.method, op.path, &reply);
                if let Some(failed) = body.get("failed") {
                    assert_eq!(failed, 0, "{what}: every batch item is accepted: {body}");
                }
                sent += 1;
            }
        }
    }
    assert!(sent >= 8, "only {sent} request examples were sent");
}

#[test]
fn every_response_example_conforms_to_its_schema() {
    let mut checked = 0;
    let mut check_response = |response: &'static Value, status: Option<u16>, what: &str| {
        let Some(content) = response.get("content").and_then(Value::as_object) else {
            return;
        };
        for (media, media_object) in content {
            let what = format!("{what} {media}");
            let examples = media_examples(media_object);
            assert!(!examples.is_empty(), "{what}: no example");
            for example in examples {
                if is_json_media(media) {
                    // The example is JSON text, not just YAML.
                    let text = serde_json::to_string(&example).expect("serializable");
                    let example: Value = serde_json::from_str(&text).expect("JSON");
                    assert_conforms(&media_object["schema"], &example, &what);
                    if let (Some(status), "application/problem+json") = (status, media.as_str()) {
                        assert_eq!(example["status"], status, "{what}: example status");
                    }
                } else if media == "application/x-ndjson" {
                    assert_conforms(&media_object["schema"], &example, &what);
                    let lines = ndjson_lines(media_object, example.as_str().unwrap(), &what);
                    assert!(lines > 0, "{what}: an example line");
                } else {
                    let text = example.as_str().expect("a text example is a string");
                    let openmetrics = media == "application/openmetrics-text";
                    assert_eq!(
                        text.ends_with("# EOF\n"),
                        openmetrics,
                        "{what}: OpenMetrics, and only it, ends with # EOF"
                    );
                    assert_conforms(&media_object["schema"], &example, &what);
                }
                checked += 1;
            }
        }
    };
    for op in operations() {
        for (code, response) in op.op["responses"].as_object().unwrap() {
            let status = code.parse().unwrap();
            check_response(
                resolve(response),
                Some(status),
                &format!("{} → {code}", op.name()),
            );
        }
    }
    for (name, response) in spec()["components"]["responses"].as_object().unwrap() {
        check_response(response, None, &format!("components/responses/{name}"));
    }
    assert!(checked >= 30, "only {checked} response examples checked");
}

#[test]
fn every_parameter_and_schema_example_conforms_to_its_schema() {
    for op in operations() {
        for p in op.parameters() {
            let what = format!("{} parameter {}", op.name(), p["name"]);
            let examples = media_examples(p);
            assert!(!examples.is_empty(), "{what}: no example");
            for example in examples {
                assert_conforms(&p["schema"], &example, &what);
            }
        }
    }
    for (name, schema) in spec()["components"]["schemas"].as_object().unwrap() {
        for example in schema["examples"].as_array().into_iter().flatten() {
            assert_conforms(schema, example, &format!("schema {name} example"));
        }
    }
}

// ---------------------------------------------------------------------------
// 4. Live responses conform to their documented schemas
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_happy_path_through_every_route_matches_the_documented_responses() {
    let app = spawn_app().await;
    let mut covered: BTreeSet<(&str, &str)> = BTreeSet::new();
    let mut call = async |method: &'static str, path: &'static str, url: &str, body: Body| {
        let reply = send(&app, method, url, &body).await;
        assert!(
            (200..300).contains(&reply.status),
            "{method} {url} → {}: {}",
            reply.status,
            String::from_utf8_lossy(&reply.body)
        );
        covered.insert((method, path));
        let body = assert_documented(method, path, &reply);
        (reply, body)
    };

    let q1 = json!({"id": "q1", "text": "What is the step by step guide to invest in share market in india?",
                    "metadata": {"source": "forum"}});
    let (reply, body) = call("POST", "/documents", "/documents", Body::Json(q1)).await;
    assert_eq!(reply.status, 201);
    assert_eq!(reply.headers["location"], "/documents/q1");
    assert!(body.get("similar").is_none(), "{body}");

    let q2 =
        json!({"id": "q2", "text": "What is the step by step guide to invest in share market?"});
    let url = "/documents?similar=true&threshold=0.8&limit=5";
    let (_, body) = call("POST", "/documents", url, Body::Json(q2)).await;
    assert_eq!(body["similar"][0]["id"], "q1", "{body}");
    assert_eq!(body["truncated"], false, "{body}");

    let no_id = json!({"text": "a text stored under a generated id"});
    let (reply, body) = call("POST", "/documents", "/documents", Body::Json(no_id)).await;
    let id = body["id"].as_str().unwrap();
    assert_eq!(
        reply.headers["location"],
        format!("/documents/{id}").as_str()
    );

    let q3 = json!({"text": "An unrelated question about gardening in spring"});
    let (reply, _) = call(
        "PUT",
        "/documents/{id}",
        "/documents/q3",
        Body::Json(q3.clone()),
    )
    .await;
    assert_eq!(reply.status, 201);
    let (reply, _) = call("PUT", "/documents/{id}", "/documents/q3", Body::Json(q3)).await;
    assert_eq!(reply.status, 200);
    assert!(!reply.headers.contains_key("location"));

    let batch = json!({"documents": [
        {"id": "a", "text": "the night is dark and the moon is red"},
        {"id": "q3", "text": "a replaced text about gardening"},
        {"text": "?!"},
        {"id": "", "text": "an invalid id"},
        {"id": "b", "text": "x", "metadata": [1]},
        5,
    ]});
    let url = "/documents/batch?mode=upsert";
    let (_, body) = call("POST", "/documents/batch", url, Body::Json(batch)).await;
    let statuses: Vec<&Value> = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["status"])
        .collect();
    assert_eq!(statuses, [201, 200, 422, 400, 422, 422], "{body}");
    let batch = json!({"documents": [{"id": "a", "text": "again"}]});
    let (_, body) = call(
        "POST",
        "/documents/batch",
        "/documents/batch",
        Body::Json(batch),
    )
    .await;
    assert_eq!(body["results"][0]["status"], 409, "{body}");

    let (_, body) = call("GET", "/documents/{id}", "/documents/q1", Body::None).await;
    assert_eq!(body["metadata"], json!({"source": "forum"}));
    let (_, body) = call("GET", "/documents/{id}", "/documents/q2", Body::None).await;
    assert_eq!(body["metadata"], Value::Null);

    let (_, body) = call("GET", "/similar", "/similar?id=q1&limit=10", Body::None).await;
    assert_eq!(body["results"][0]["id"], "q2", "{body}");
    let text = json!({"text": "what is the step-by-step guide to invest in share market?"});
    call("POST", "/similar", "/similar", Body::Json(text)).await;
    call("GET", "/compare", "/compare?a=q1&b=q2", Body::None).await;

    let q2_again = json!({"id": "q2-again", "text": "What is the step by step guide to invest in share market?"});
    let (reply, body) = call(
        "POST",
        "/documents",
        "/documents?if_unique=true",
        Body::Json(q2_again),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(body["inserted"], false, "{body}");
    let (_, body) = call(
        "GET",
        "/duplicates",
        "/duplicates?threshold=0.8&min_size=2&limit=1",
        Body::None,
    )
    .await;
    assert_eq!(body["groups"][0]["ids"], json!(["q1", "q2"]), "{body}");
    assert_eq!(body["next_cursor"], Value::Null, "{body}");
    let (reply, body) = call(
        "GET",
        "/duplicates/pairs",
        "/duplicates/pairs?threshold=0.8",
        Body::None,
    )
    .await;
    assert_eq!(reply.content_type().as_deref(), Some("application/json"));
    assert_eq!(body["pairs"][0]["a"], "q1", "{body}");
    assert_eq!(body["pairs"][0]["b"], "q2", "{body}");

    let (_, body) = call("GET", "/stats", "/stats", Body::None).await;
    assert_eq!(body["storage"]["last_snapshot"], Value::Null);
    let (_, body) = call("POST", "/admin/snapshot", "/admin/snapshot", Body::None).await;
    assert_eq!(body["documents"], 5, "{body}");
    let (_, body) = call("GET", "/stats", "/stats", Body::None).await;
    assert!(body["storage"]["last_snapshot"].is_object(), "{body}");

    let (_, body) = call("GET", "/healthz", "/healthz", Body::None).await;
    assert_eq!(body, json!({"status": "ok"}));
    let (_, body) = call("GET", "/readyz", "/readyz", Body::None).await;
    assert_eq!(body, json!({"status": "ready"}));
    let (reply, body) = call("GET", "/metrics", "/metrics", Body::None).await;
    assert!(reply.content_type().unwrap().starts_with("text/plain;"));
    assert!(body.as_str().unwrap().contains("neardup_documents 5"));
    let (_, body) = call("GET", "/openapi.json", "/openapi.json", Body::None).await;
    assert_eq!(body["openapi"], "3.1.0");

    let (reply, _) = call("DELETE", "/documents/{id}", "/documents/q3", Body::None).await;
    assert_eq!(reply.status, 204);

    let routes: BTreeSet<(&str, &str)> = ROUTES.iter().copied().collect();
    assert_eq!(covered, routes, "the happy path visits every route");
}

/// An error case: (method, documented path, request URL, body, status, slug).
type Case = (
    &'static str,
    &'static str,
    &'static str,
    Body,
    u16,
    &'static str,
);

fn json_body(value: Value) -> Body {
    Body::Json(value)
}

fn text_body() -> Body {
    Body::Raw("text/plain", "the night is dark".into())
}

fn broken_json() -> Body {
    Body::Raw("application/json", "{not json".into())
}

/// Send each case; assert its status, its slug, and that the reply matches
/// what its operation documents for that status.
async fn assert_cases(app: &TestApp, cases: Vec<Case>) {
    for (method, path, url, body, status, slug) in cases {
        let reply = send(app, method, url, &body).await;
        let what = format!("{method} {url}");
        let text = String::from_utf8_lossy(&reply.body).into_owned();
        assert_eq!(reply.status, status, "{what}: {text}");
        let body = assert_documented(method, path, &reply);
        let expected = format!("urn:neardup:problem:{slug}");
        assert_eq!(body["type"], expected, "{what}: {body}");
    }
}

/// Every problem each route produces from a request (the 413s, 503s and
/// 500 need other settings or a failing disk: see the tests below).
#[rustfmt::skip]
fn error_cases() -> Vec<Case> {
    use Body::None as Empty;
    let (doc, batch, by_id, sim, cmp) =
        ("/documents", "/documents/batch", "/documents/{id}", "/similar", "/compare");
    vec![
        ("POST", doc, doc, text_body(), 415, "unsupported-media-type"),
        ("POST", doc, doc, Empty, 415, "unsupported-media-type"),
        ("POST", doc, doc, broken_json(), 400, "malformed-json"),
        ("POST", doc, doc, json_body(json!({"text": "a b", "x": 1})), 422, "invalid-body"),
        ("POST", doc, doc, json_body(json!({"id": 7, "text": "a b"})), 422, "invalid-body"),
        ("POST", doc, doc, json_body(json!({"text": "a", "metadata": [1]})), 422, "invalid-body"),
        ("POST", doc, doc, json_body(json!({"text": " ?! "})), 422, "empty-text"),
        ("POST", doc, doc, json_body(json!({"id": "", "text": "a b"})), 400, "invalid-id"),
        ("POST", doc, doc, json_body(json!({"id": "a\u{7}", "text": "a"})), 400, "invalid-id"),
        ("POST", doc, doc, json_body(json!({"id": "q1", "text": "a b"})), 409, "already-exists"),
        ("POST", doc, "/documents?bogus=1", json_body(json!({"text": "a"})), 400, "invalid-parameter"),
        ("POST", doc, "/documents?similar=yes", json_body(json!({"text": "a"})), 400, "invalid-parameter"),
        ("POST", doc, "/documents?similar=true&limit=0", json_body(json!({"text": "a"})), 400, "invalid-parameter"),
        ("POST", doc, "/documents?similar=true&threshold=1.5", json_body(json!({"text": "a"})), 400, "invalid-threshold"),
        ("POST", doc, "/documents?similar=true&threshold=0.5", json_body(json!({"text": "a"})), 400, "threshold-below-tuning"),
        ("POST", batch, batch, text_body(), 415, "unsupported-media-type"),
        ("POST", batch, batch, broken_json(), 400, "malformed-json"),
        ("POST", batch, "/documents/batch?mode=bogus", json_body(json!({"documents": []})), 400, "invalid-parameter"),
        ("POST", batch, batch, json_body(json!([])), 422, "invalid-body"),
        ("POST", batch, batch, json_body(json!({"documents": [], "x": 1})), 422, "invalid-body"),
        ("GET", by_id, "/documents/nope", Empty, 404, "document-not-found"),
        ("GET", by_id, "/documents/%FF", Empty, 400, "invalid-parameter"),
        ("PUT", by_id, "/documents/q9", text_body(), 415, "unsupported-media-type"),
        ("PUT", by_id, "/documents/q9", broken_json(), 400, "malformed-json"),
        ("PUT", by_id, "/documents/%01", json_body(json!({"text": "a"})), 400, "invalid-id"),
        ("PUT", by_id, "/documents/%FF", json_body(json!({"text": "a"})), 400, "invalid-parameter"),
        ("PUT", by_id, "/documents/q9", json_body(json!({"id": "q8", "text": "a"})), 422, "invalid-body"),
        ("PUT", by_id, "/documents/q9", json_body(json!({"text": ""})), 422, "empty-text"),
        ("DELETE", by_id, "/documents/nope", Empty, 404, "document-not-found"),
        ("DELETE", by_id, "/documents/%FF", Empty, 400, "invalid-parameter"),
        ("GET", sim, "/similar", Empty, 400, "invalid-parameter"),
        ("GET", sim, "/similar?id=q1&id=q2", Empty, 400, "invalid-parameter"),
        ("GET", sim, "/similar?id=q1&limit=1001", Empty, 400, "invalid-parameter"),
        ("GET", sim, "/similar?id=q1&threshold=0", Empty, 400, "invalid-threshold"),
        ("GET", sim, "/similar?id=q1&threshold=0.7", Empty, 400, "threshold-below-tuning"),
        ("GET", sim, "/similar?id=nope", Empty, 404, "document-not-found"),
        ("POST", sim, sim, text_body(), 415, "unsupported-media-type"),
        ("POST", sim, sim, broken_json(), 400, "malformed-json"),
        ("POST", sim, sim, json_body(json!({"text": "a", "limit": 0})), 400, "invalid-parameter"),
        ("POST", sim, sim, json_body(json!({"text": "a", "threshold": 2})), 400, "invalid-threshold"),
        ("POST", sim, sim, json_body(json!({"text": "a", "threshold": 0.1})), 400, "threshold-below-tuning"),
        ("POST", sim, sim, json_body(json!({"text": "a", "id": "q1"})), 422, "invalid-body"),
        ("POST", sim, sim, json_body(json!({"text": "..."})), 422, "empty-text"),
        ("GET", cmp, "/compare?a=q1", Empty, 400, "invalid-parameter"),
        ("GET", cmp, "/compare?a=q1&b=q2&c=q3", Empty, 400, "invalid-parameter"),
        ("GET", cmp, "/compare?a=q1&b=nope", Empty, 404, "document-not-found"),
    ]
}

#[tokio::test]
async fn live_error_responses_match_the_documented_problems() {
    let app = spawn_app().await;
    app.insert("q1", "the night is dark and the moon is red")
        .await;
    app.insert("q2", "the night is dark and the moon is bright red")
        .await;
    assert_cases(&app, error_cases()).await;
    // The shared helper agrees on the problem shape.
    assert_problem(app.get("/documents/nope").await, 404).await;
}

#[tokio::test]
async fn with_keys_configured_the_401s_and_403s_are_answered_as_documented() {
    let mut settings = test_settings();
    settings.auth.api_keys = vec![Secret::new("full-key")];
    settings.auth.read_only_keys = vec![Secret::new("read-key")];
    let app = spawn_app_with(settings).await;
    let mut forbidden = 0;
    for op in operations() {
        let url = example_url(&op, false);
        let body = match op.request_body() {
            Some((_, _, examples)) => Body::Json(examples[0].clone()),
            None => Body::None,
        };
        let open = op.op.get("security") == Some(&json!([]));
        for key in [None, Some("wrong-key")] {
            let reply = send_with_key(&app, &op.method, &url, &body, key).await;
            let what = format!("{} as {url} with {key:?}", op.name());
            if open {
                assert_eq!(reply.status, 200, "{what}: documented as open");
                continue;
            }
            assert_eq!(reply.status, 401, "{what}");
            let problem = assert_documented(&op.method, op.path, &reply);
            assert_eq!(
                problem["type"], "urn:neardup:problem:unauthorized",
                "{what}"
            );
        }
        if op.method != "GET" {
            let reply = send_with_key(&app, &op.method, &url, &body, Some("read-key")).await;
            let what = format!("{} as {url} with a read-only key", op.name());
            assert_eq!(reply.status, 403, "{what}");
            let problem = assert_documented(&op.method, op.path, &reply);
            assert_eq!(problem["type"], "urn:neardup:problem:forbidden", "{what}");
            forbidden += 1;
        } else {
            assert!(
                op.response(403).is_none(),
                "{}: GET never answers 403",
                op.name()
            );
        }
    }
    assert!(forbidden > 0);
    // The spec marks exactly the probes and itself as open.
    let open: Vec<String> = operations()
        .iter()
        .filter(|op| op.op.get("security") == Some(&json!([])))
        .map(Op::name)
        .collect();
    assert_eq!(open, ["GET /healthz", "GET /openapi.json", "GET /readyz"]);
    // The file describes the shipped configuration (no keys); this
    // server's document requires the bearer scheme the file declares.
    assert!(spec().get("security").is_none());
    let served = send(&app, "GET", "/openapi.json", &Body::None).await.json();
    assert_eq!(served["security"], json!([{"bearerAuth": []}]));
    assert_eq!(
        served["components"]["securitySchemes"]["bearerAuth"]["scheme"],
        "bearer"
    );
}

#[tokio::test]
async fn bodies_over_the_limits_are_answered_413_as_documented() {
    let mut settings = test_settings();
    settings.server.max_body_bytes = 1024;
    settings.limits.max_text_bytes = 512;
    settings.server.max_batch = 2;
    let app = spawn_app_with(settings).await;
    let big = || json_body(json!({"text": "word ".repeat(400)}));
    // Under the body limit, over the text limit.
    let long = || json_body(json!({"text": "word ".repeat(120)}));
    let three = json!({"documents": [{"text": "a"}, {"text": "b"}, {"text": "c"}]});
    let (doc, batch, by_id) = ("/documents", "/documents/batch", "/documents/{id}");
    let too_large = "payload-too-large";
    let cases: Vec<Case> = vec![
        ("POST", doc, doc, big(), 413, too_large),
        ("PUT", by_id, "/documents/q1", big(), 413, too_large),
        ("POST", "/similar", "/similar", big(), 413, too_large),
        ("POST", batch, batch, big(), 413, too_large),
        ("POST", batch, batch, json_body(three), 413, too_large),
        ("POST", doc, doc, long(), 413, too_large),
        ("PUT", by_id, "/documents/q1", long(), 413, too_large),
        ("POST", "/similar", "/similar", long(), 413, too_large),
    ];
    assert_cases(&app, cases).await;
}

#[tokio::test]
async fn a_request_over_the_timeout_is_answered_503_as_documented() {
    let mut settings = test_settings();
    settings.server.request_timeout_secs = 1;
    let app = spawn_app_with(settings).await;
    // Announce a body and never finish it: the handler waits until the
    // timeout layer answers.
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let head = "POST /documents HTTP/1.1\r\nhost: localhost\r\n\
                content-type: application/json\r\ncontent-length: 100\r\n\r\n{\"text\":";
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let (header_end, content_length) = loop {
        let n = tokio::time::timeout_at(deadline, stream.read(&mut buf))
            .await
            .expect("the server answers before the deadline")
            .unwrap();
        assert!(
            n > 0,
            "connection closed early: {:?}",
            String::from_utf8_lossy(&raw)
        );
        raw.extend_from_slice(&buf[..n]);
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse::<usize>().unwrap())
                .expect("a content-length");
            if raw.len() >= end + 4 + length {
                break (end, length);
            }
        }
    };
    let head = String::from_utf8_lossy(&raw[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let mut headers = HeaderMap::new();
    for line in lines {
        let (name, value) = line.split_once(':').unwrap();
        headers.insert(
            reqwest::header::HeaderName::from_bytes(name.trim().as_bytes()).unwrap(),
            value.trim().parse().unwrap(),
        );
    }
    let body = raw[header_end + 4..header_end + 4 + content_length].to_vec();
    let reply = Reply {
        status,
        headers,
        body,
    };
    assert_eq!(reply.status, 503);
    assert!(reply.headers.contains_key("retry-after"), "{head}");
    let body = assert_documented("POST", "/documents", &reply);
    assert_eq!(body["type"], "urn:neardup:problem:unavailable");
}

// ---------------------------------------------------------------------------
// The checker can fail
// ---------------------------------------------------------------------------

#[test]
fn the_schema_checker_rejects_bodies_that_break_the_spec() {
    let broken: Vec<(&str, Value)> = vec![
        (
            "Problem",
            json!({"type": "urn:neardup:problem:internal", "title": "t", "status": 500}),
        ),
        (
            "Problem",
            json!({"type": "urn:neardup:problem:nope", "title": "t", "status": 500, "detail": "d"}),
        ),
        (
            "Problem",
            json!({"type": "urn:neardup:problem:internal", "title": "t", "status": 200, "detail": "d"}),
        ),
        ("Written", json!({"id": "q1", "shingles": 3, "extra": true})),
        ("Written", json!({"id": "q1", "shingles": 1.5})),
        ("Written", json!({"id": "", "shingles": 1})),
        (
            "DocumentOut",
            json!({"id": "q1", "metadata": [1], "shingles": 1}),
        ),
        ("DocumentOut", json!({"id": "q1", "shingles": 1})),
        ("BatchItem", json!({"id": null, "status": 418})),
        (
            "BatchOut",
            json!({"created": 0, "replaced": 0, "failed": 0, "results": [{"status": 201}]}),
        ),
        (
            "Match",
            json!({"id": "q1", "jaccard": "0.9", "estimate": 0.9}),
        ),
        (
            "Match",
            json!({"id": "q1", "jaccard": 1.2, "estimate": 0.9}),
        ),
        (
            "SimilarToText",
            json!({"id": "q1", "threshold": 0.8, "results": [], "candidates": 0, "truncated": false}),
        ),
        (
            "SimilarToDocument",
            json!({"threshold": 0.8, "results": [], "candidates": 0, "truncated": false}),
        ),
        (
            "RecoveryReport",
            json!({"snapshot": 1, "snapshot_documents": 0, "replayed_records": 0,
                                  "torn_bytes_dropped": 0, "fallbacks": [], "documents": 0, "seconds": 0.1}),
        ),
        ("Health", json!({"status": "ready"})),
    ];
    for (name, value) in broken {
        assert!(
            !schema_errors(component_schema(name), &value).is_empty(),
            "{name} accepted {value}"
        );
    }
    // A nullable $ref (oneOf) takes null and the object, nothing else.
    let stats = component_schema("Stats");
    let last = &stats["properties"]["storage"]["properties"]["last_snapshot"];
    assert!(schema_errors(last, &Value::Null).is_empty());
    assert!(!schema_errors(last, &json!({"path": "p"})).is_empty());
    // Keywords the checker does not enforce are refused, not skipped.
    let unknown = json!({"type": "object", "allOf": [{"required": ["x"]}]});
    assert!(!schema_errors(&unknown, &json!({})).is_empty());
    // And a conforming body passes.
    let ok = json!({"id": "q1", "shingles": 3, "similar": [], "truncated": false});
    assert_conforms(component_schema("Written"), &ok, "a valid Written");
}

// ---------------------------------------------------------------------------
// The served document
// ---------------------------------------------------------------------------

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
