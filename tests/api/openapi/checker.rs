//! The conformance checker: a small, strict JSON Schema subset (see the
//! module docs of `openapi`), and the test that it can fail.

use super::spec::*;
use serde_json::{json, Value};

/// Keywords the checker enforces.
pub(super) const ASSERTIONS: [&str; 20] = [
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
    "not",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
];

/// Keywords that annotate, plus `pattern` and `format`, which are not checked.
pub(super) const ANNOTATIONS: [&str; 8] = [
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
pub(super) fn schema_errors(schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(schema, value, "$", &mut errors);
    errors
}

pub(super) fn check(schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
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
            if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
                if let Some(i) = (1..items.len()).find(|&i| items[..i].contains(&items[i])) {
                    errors.push(format!("{at}[{i}]: {} repeats an earlier item", items[i]));
                }
            }
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
    if let Some(forbidden) = schema.get("not") {
        let broken = schema_errors(forbidden, value);
        // A keyword the checker does not know inside `not` would make every
        // value "break" it, so pass: refused, as anywhere else.
        let unknown: Vec<String> = broken
            .iter()
            .filter(|e| e.contains("unsupported schema keyword"))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            errors.extend(unknown);
        } else if broken.is_empty() {
            errors.push(format!("{at}: {value} matches the schema under `not`"));
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

pub(super) fn check_object(
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

pub(super) fn has_type(value: &Value, name: &str, at: &str, errors: &mut Vec<String>) -> bool {
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

pub(super) fn check_bound(
    schema: &Value,
    keyword: &str,
    actual: f64,
    at: &str,
    errors: &mut Vec<String>,
) {
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
pub(super) fn assert_conforms(schema: &Value, value: &Value, what: &str) {
    let errors = schema_errors(schema, value);
    assert!(
        errors.is_empty(),
        "{what} does not conform to its schema:\n  {}\nvalue: {value}",
        errors.join("\n  ")
    );
}

pub(super) fn component_schema(name: &str) -> &'static Value {
    pointer(&format!("#/components/schemas/{name}"))
}

// ---------------------------------------------------------------------------
// The checker can fail
// ---------------------------------------------------------------------------

#[test]
pub(super) fn the_schema_checker_rejects_bodies_that_break_the_spec() {
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
        ("HistogramIn", json!({"texts": ["a", "b"], "k": [2, 3, 2]})),
        ("AccuracyIn", json!({"sample": 10, "num_perm": [16, 16]})),
        // Exactly one of texts and sample (null is absent); seed only with sample.
        ("HistogramIn", json!({"texts": ["a", "b"], "sample": 3})),
        ("HistogramIn", json!({"k": [2]})),
        ("HistogramIn", json!({"texts": null, "sample": null})),
        ("AccuracyIn", json!({"texts": ["a", "b"], "seed": 7})),
        ("AccuracyIn", json!({"sample": 2.5})),
        ("AccuracyIn", json!({"sample": 3, "threshold": 0})),
    ];
    for (name, value) in broken {
        assert!(
            !schema_errors(component_schema(name), &value).is_empty(),
            "{name} accepted {value}"
        );
    }
    // A nullable $ref (oneOf) takes null and the object, nothing else.
    let stats = component_schema("Stats");
    let last = &stats["properties"]["storage"]["oneOf"][0]["properties"]["last_snapshot"];
    assert!(schema_errors(last, &Value::Null).is_empty());
    assert!(!schema_errors(last, &json!({"path": "p"})).is_empty());
    // Keywords the checker does not enforce are refused, not skipped, under
    // `not` too.
    let unknown = json!({"type": "object", "allOf": [{"required": ["x"]}]});
    assert!(!schema_errors(&unknown, &json!({})).is_empty());
    let hidden = json!({"not": {"allOf": [{"required": ["x"]}]}});
    assert!(!schema_errors(&hidden, &json!({})).is_empty());
    // The analysis bodies take what the server takes: nulls for absent
    // values, the one source given, a seed with a sample.
    for (name, value) in [
        (
            "HistogramIn",
            json!({"texts": ["a", "b"], "sample": null, "seed": null, "bins": null}),
        ),
        ("HistogramIn", json!({"sample": 3, "seed": 7, "k": [2, 3]})),
        (
            "AccuracyIn",
            json!({"texts": null, "sample": 2, "threshold": null, "num_perm": [16]}),
        ),
        (
            "AccuracyIn",
            json!({"texts": ["a", "b"], "seed": null, "threshold": 0.8}),
        ),
    ] {
        assert_conforms(component_schema(name), &value, name);
    }
    // And a conforming body passes.
    let ok = json!({"id": "q1", "shingles": 3, "similar": [], "truncated": false});
    assert_conforms(component_schema("Written"), &ok, "a valid Written");
}
