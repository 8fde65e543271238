//! The spec as data: the operations of `openapi.yaml`, `$ref` resolution, examples.

use serde_json::Value;
use std::sync::OnceLock;

pub(super) const SPEC_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml");

/// The HTTP methods an OpenAPI path item can hold, as path-item keys.
pub(super) const HTTP_METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Path-item keys that are not operations.
pub(super) const PATH_ITEM_FIELDS: [&str; 3] = ["summary", "description", "parameters"];

/// Routes the router serves even while the index is being restored, so they
/// never answer 503 `not-ready` (the server's one list of exceptions).
pub(super) fn served_while_restoring(path: &str) -> bool {
    neardup::http::served_while_restoring(path)
}

pub(super) fn spec() -> &'static Value {
    static SPEC: OnceLock<Value> = OnceLock::new();
    SPEC.get_or_init(|| {
        let text = std::fs::read_to_string(SPEC_FILE).expect("openapi.yaml is readable");
        serde_yaml_ng::from_str(&text).expect("openapi.yaml parses as YAML")
    })
}

/// One documented operation.
pub(super) struct Op {
    /// Upper case, as in `ROUTES`.
    pub(super) method: String,
    pub(super) path: &'static str,
    pub(super) op: &'static Value,
    pub(super) item: &'static Value,
}

impl Op {
    pub(super) fn name(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    /// Path-item and operation parameters, resolved.
    pub(super) fn parameters(&self) -> Vec<&'static Value> {
        [self.item, self.op]
            .iter()
            .filter_map(|v| v.get("parameters").and_then(Value::as_array))
            .flatten()
            .map(resolve)
            .collect()
    }

    /// The (media type, schema, examples) of the JSON request body, if any.
    pub(super) fn request_body(&self) -> Option<(&'static str, &'static Value, Vec<Value>)> {
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
    pub(super) fn response(&self, status: u16) -> Option<&'static Value> {
        self.op["responses"].get(status.to_string()).map(resolve)
    }
}

pub(super) fn operations() -> Vec<Op> {
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

pub(super) fn operation(method: &str, path: &str) -> Op {
    operations()
        .into_iter()
        .find(|o| o.method == method && o.path == path)
        .unwrap_or_else(|| panic!("{method} {path} is not documented"))
}

/// Follow local `$ref`s (`#/json/pointer`) to the referenced value.
pub(super) fn resolve(value: &'static Value) -> &'static Value {
    let mut value = value;
    for _ in 0..16 {
        match value.get("$ref").and_then(Value::as_str) {
            Some(reference) => value = pointer(reference),
            None => return value,
        }
    }
    panic!("$ref chain too long at {value}");
}

pub(super) fn pointer(reference: &str) -> &'static Value {
    let path = reference
        .strip_prefix('#')
        .unwrap_or_else(|| panic!("only local $refs are supported, got {reference:?}"));
    spec()
        .pointer(path)
        .unwrap_or_else(|| panic!("$ref {reference:?} does not resolve"))
}

/// `example` and every `examples.*.value` of a media type or parameter.
pub(super) fn media_examples(holder: &'static Value) -> Vec<Value> {
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

pub(super) fn is_json_media(media: &str) -> bool {
    media == "application/json" || media.ends_with("+json")
}

/// `type/subtype` of a Content-Type value.
pub(super) fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}
