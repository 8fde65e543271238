//! `filter` and `exclude_same`, as a query string or a JSON body gives
//! them, checked into the engine's [`FilterSpec`] (the semantics are in
//! `engine/filter.rs` and docs/collections.md).
//!
//! In a query string `filter` is the JSON object as a (URL-encoded)
//! string and `exclude_same` a comma-separated list of field names; in a
//! body they are a JSON object and an array of strings. A bad one is a 400
//! `invalid-parameter` (query string) or a 422 `invalid-body` (body)
//! naming the parameter and the field.

use super::error::ApiError;
use crate::engine::{FilterSpec, MetaFilter};
use std::sync::Arc;

/// Query-string `filter` and `exclude_same`.
pub fn from_query(
    filter: Option<&str>,
    exclude_same: Option<&str>,
) -> Result<Option<Arc<FilterSpec>>, ApiError> {
    let bad = ApiError::InvalidParameter;
    let value = filter
        .map(|raw| {
            // serde_json's recursion limit (128) bounds the nesting it reads;
            // deeper is this error, shallower is refused by shape.
            serde_json::from_str::<serde_json::Value>(raw)
                .map_err(|e| bad(format!("filter is not a valid JSON object: {e}")))
        })
        .transpose()?;
    if let Some(v) = &value {
        if !v.is_object() {
            return Err(bad(
                "filter must be a JSON object of field → value(s), e.g. {\"site\":\"example.org\"} (URL-encoded)"
                    .into(),
            ));
        }
    }
    let names: Vec<String> = exclude_same
        .map(|list| list.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    FilterSpec::parse(value.as_ref(), &names)
        .map(|f| f.map(Arc::new))
        .map_err(|e| bad(e.0))
}

/// Body `filter` (a JSON object) and `exclude_same` (an array of field
/// names).
pub fn from_body(
    filter: Option<&serde_json::Value>,
    exclude_same: Option<&serde_json::Value>,
) -> Result<Option<Arc<FilterSpec>>, ApiError> {
    let bad = ApiError::InvalidBody;
    let names: Vec<String> = match exclude_same {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                serde_json::Value::String(s) => Ok(s.clone()),
                _ => Err(bad(
                    "exclude_same must be an array of field names (strings)".into(),
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(bad(
                "exclude_same must be an array of field names (strings)".into(),
            ))
        }
    };
    FilterSpec::parse(filter, &names)
        .map(|f| f.map(Arc::new))
        .map_err(|e| bad(e.0))
}

/// `spec` resolved against the query document's metadata (JSON text).
pub fn about(spec: &Option<Arc<FilterSpec>>, metadata: Option<&str>) -> Option<MetaFilter> {
    spec.as_ref().map(|s| s.about(metadata))
}
