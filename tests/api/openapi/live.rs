//! Live requests: send one, buffer the reply, check it against the documented response.

use super::checker::*;
use super::spec::*;
use crate::helpers::TestApp;
use reqwest::header::HeaderMap;
use reqwest::Method;
use serde_json::Value;

/// A request body to send.
pub(super) enum Body {
    None,
    Json(Value),
    Raw(&'static str, String),
}

/// A finished response, buffered.
pub(super) struct Reply {
    pub(super) status: u16,
    pub(super) headers: HeaderMap,
    pub(super) body: Vec<u8>,
}

impl Reply {
    pub(super) fn content_type(&self) -> Option<String> {
        self.headers
            .get("content-type")
            .map(|v| v.to_str().expect("an ASCII content type").to_owned())
    }

    pub(super) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The problem `type` of a JSON body, if it has one.
    pub(super) fn problem_type(&self) -> Option<String> {
        let body: Value = serde_json::from_slice(&self.body).ok()?;
        body.get("type")?.as_str().map(str::to_owned)
    }
}

pub(super) async fn send(app: &TestApp, method: &str, path: &str, body: &Body) -> Reply {
    send_with_key(app, method, path, body, None).await
}

/// `send` with an optional `Authorization: Bearer <key>`.
pub(super) async fn send_with_key(
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
pub(super) fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub(super) fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The operation's path with `{params}` filled and its query parameters
/// (the required ones, or all of them) set from their examples.
pub(super) fn example_url(op: &Op, all_query: bool) -> String {
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
pub(super) fn assert_matches_response(
    response: &'static Value,
    reply: &Reply,
    what: &str,
) -> Value {
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
pub(super) fn ndjson_lines(media_object: &'static Value, text: &str, what: &str) -> usize {
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
pub(super) fn assert_documented(method: &str, path: &str, reply: &Reply) -> Value {
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

pub(super) fn component_response(name: &str) -> &'static Value {
    pointer(&format!("#/components/responses/{name}"))
}
