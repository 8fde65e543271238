//! `GET /openapi.json`: the OpenAPI document of this deployment.
//!
//! The repository's `openapi.yaml` is compiled in and describes the server
//! as shipped (the compiled-in defaults). A few of its values depend on the
//! configuration; each is marked in the document with an extension that
//! names the setting it comes from:
//!
//! ```yaml
//! schema:
//!   type: integer
//!   maximum: 1000
//!   x-neardup-setting: {maximum: query.max_limit}
//! ```
//!
//! [`ApiDocs::new`] replaces every marked value with this deployment's, and
//! requires the bearer scheme when keys are configured, so a client
//! generated from, or a fuzzer driven by, the served document knows exactly
//! what this server accepts. Nothing else differs from the file (a test
//! holds the two equal up to these values). It is rendered once, at start.

use crate::config::Settings;
use axum::body::Bytes;
use serde_json::{json, Value};

/// The document as shipped in the repository.
pub const SPEC_YAML: &str = include_str!("../../openapi.yaml");

/// The extension keyword that marks a configuration-dependent value.
pub const SETTING_MARKER: &str = "x-neardup-setting";

/// The rendered document, served as it is.
pub struct ApiDocs {
    pub json: Bytes,
}

impl ApiDocs {
    /// Render the document for `settings`, whose index tuning gives the
    /// lowest accepted threshold `min_query_threshold`.
    pub fn new(settings: &Settings, min_query_threshold: f64) -> Self {
        let doc = document(settings, min_query_threshold);
        let json = serde_json::to_vec_pretty(&doc).expect("a JSON value serializes");
        Self {
            json: Bytes::from(json),
        }
    }
}

/// The value of a setting a document may name in [`SETTING_MARKER`].
fn setting(settings: &Settings, min_query_threshold: f64, name: &str) -> Option<Value> {
    Some(match name {
        "index.min_query_threshold" => json!(min_query_threshold),
        "query.max_limit" => json!(settings.query.max_limit),
        "server.max_batch" => json!(settings.server.max_batch),
        "limits.max_text_bytes" => json!(settings.limits.max_text_bytes),
        _ => return None,
    })
}

/// The shipped document with this deployment's values.
pub fn document(settings: &Settings, min_query_threshold: f64) -> Value {
    let mut doc: Value =
        serde_yaml_ng::from_str(SPEC_YAML).expect("the compiled-in openapi.yaml parses");
    apply_settings(&mut doc, &|name| {
        setting(settings, min_query_threshold, name)
    });
    if settings.auth.enabled() {
        add_bearer_security(&mut doc, !settings.auth.protect_metrics);
    }
    doc
}

/// Replace every marked value in `value` (recursively) by the setting's.
/// A marker naming an unknown setting is a bug in the document, caught by
/// the tests; it is left as written.
fn apply_settings(value: &mut Value, lookup: &dyn Fn(&str) -> Option<Value>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(marks)) = map.get(SETTING_MARKER).cloned() {
                for (keyword, name) in marks {
                    if let Some(v) = name.as_str().and_then(lookup) {
                        map.insert(keyword, v);
                    }
                }
            }
            for v in map.values_mut() {
                apply_settings(v, lookup);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| apply_settings(v, lookup)),
        _ => {}
    }
}

/// Keys are configured: every operation needs a bearer key (the scheme
/// `bearerAuth` is declared in the file) except those that already say
/// `security: []` (the probes, this document) and, when `metrics_open`,
/// `GET /metrics`.
fn add_bearer_security(doc: &mut Value, metrics_open: bool) {
    doc["security"] = json!([{ "bearerAuth": [] }]);
    if metrics_open {
        if let Some(op) = doc.pointer_mut("/paths/~1metrics/get") {
            op["security"] = json!([]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn markers(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::Object(marks)) = map.get(SETTING_MARKER) {
                    out.extend(marks.values().filter_map(|v| v.as_str().map(str::to_owned)));
                }
                map.values().for_each(|v| markers(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| markers(v, out)),
            _ => {}
        }
    }

    #[test]
    fn every_marker_names_a_known_setting() {
        let doc: Value = serde_yaml_ng::from_str(SPEC_YAML).unwrap();
        let mut names = Vec::new();
        markers(&doc, &mut names);
        assert!(names.len() >= 4, "{names:?}");
        let settings = Settings::default();
        for name in names {
            assert!(
                setting(&settings, 0.5, &name).is_some(),
                "unknown setting {name}"
            );
        }
    }

    #[test]
    fn marked_values_take_the_settings_values() {
        let mut settings = Settings::default();
        settings.query.max_limit = 77;
        settings.server.max_batch = 5;
        let doc = document(&settings, 0.625);
        let limit = &doc["components"]["schemas"]["Limit"];
        assert_eq!(limit["maximum"], 77);
        assert_eq!(doc["components"]["schemas"]["Threshold"]["minimum"], 0.625);
        assert_eq!(
            doc["components"]["schemas"]["BatchIn"]["properties"]["documents"]["maxItems"],
            5
        );
        assert!(doc.get("security").is_none());
    }

    #[test]
    fn keys_add_the_bearer_scheme_and_keep_the_probes_open() {
        let mut settings = Settings::default();
        settings.auth.api_keys = vec![crate::config::Secret::new("k")];
        settings.auth.protect_metrics = false;
        let doc = document(&settings, 0.7);
        assert_eq!(doc["security"], json!([{"bearerAuth": []}]));
        assert_eq!(
            doc["components"]["securitySchemes"]["bearerAuth"]["scheme"],
            "bearer"
        );
        assert_eq!(doc["paths"]["/healthz"]["get"]["security"], json!([]));
        assert_eq!(doc["paths"]["/metrics"]["get"]["security"], json!([]));
    }
}
