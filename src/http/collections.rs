//! `/collections`: list, show, create, change the retention of, and delete
//! collections. Collection changes do I/O (a manifest, directories, fsyncs),
//! so they run on a blocking thread.

use super::auth::Scope;
use super::dto::format_time;
use super::error::ApiError;
use super::extract::{parse_json, CollName, JsonBody};
use super::ops::{reindex_json, stats_of};
use super::state::AppState;
use crate::collections::{integral_floats_to_integers, Collection, Retention, Status};
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// A collection as listed: name, status, size, settings and the banding
/// its settings resolve to.
fn describe(c: &Collection) -> Value {
    let b = c.recipe().bands();
    json!({
        "name": c.name,
        "status": c.status(),
        "created_at": format_time(c.created_ms),
        "documents": c.documents(),
        "settings": c.settings(),
        "derived": {
            "bands": b.bands,
            "rows": b.rows,
            "recall_at_threshold": b.recall_at_threshold,
            "min_query_threshold": b.min_query_threshold,
            "passage_guaranteed_run": c.recipe().passage_window(),
        },
    })
}

/// `GET /collections`: the collections this key may use.
pub async fn list(
    State(app): State<AppState>,
    scope: Option<Extension<Scope>>,
) -> Result<Json<Value>, ApiError> {
    let scope = scope.map(|Extension(s)| s).unwrap_or_default();
    // With the redis backend: as the catalog says now, not as last seen.
    app.collections.sync_catalog().await?;
    let collections: Vec<Value> = app
        .collections
        .list()
        .iter()
        .filter(|c| scope.allows(c.name.as_str()))
        .map(|c| describe(c))
        .collect();
    Ok(Json(json!({ "collections": collections })))
}

/// `GET /collections/{name}`: its description and its `/stats` body (null
/// while it is restored or if it failed).
pub async fn show(
    State(app): State<AppState>,
    CollName(name): CollName,
) -> Result<Json<Value>, ApiError> {
    let c = app
        .collections
        .find(name.as_str())
        .await?
        .ok_or_else(|| ApiError::CollectionNotFound(name.to_string()))?;
    if let Some(backend) = c.backend() {
        backend.refresh_documents().await?;
    }
    let mut body = describe(&c);
    body["stats"] = match c.status() {
        Status::Ready => stats_of(&app, &c),
        Status::Restoring | Status::Failed => Value::Null,
    };
    Ok(Json(body))
}

fn location(c: &Collection) -> HeaderValue {
    HeaderValue::from_str(&format!("/collections/{}", c.name))
        .expect("collection names are valid header values")
}

/// `PUT /collections/{name}`: 201 created, 200 when it exists with the same
/// settings, 409 with other ones (naming the first key that differs).
pub async fn put(
    State(app): State<AppState>,
    CollName(name): CollName,
    body: JsonBody,
) -> Result<Response, ApiError> {
    let settings: Value = parse_json(&body.0)?;
    let collections = Arc::clone(&app.collections);
    let (c, created) =
        tokio::task::spawn_blocking(move || collections.create(name.as_str(), &settings))
            .await
            .map_err(|e| ApiError::Internal(format!("collection task failed: {e}")))??;
    Ok(if created {
        (
            StatusCode::CREATED,
            [(header::LOCATION, location(&c))],
            Json(describe(&c)),
        )
            .into_response()
    } else {
        (StatusCode::OK, Json(describe(&c))).into_response()
    })
}

/// What `PATCH /collections/{name}` may change (at least one).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Patch {
    #[serde(default, deserialize_with = "not_null")]
    retention: Option<RetentionPatch>,
    #[serde(default, deserialize_with = "not_null")]
    store_text: Option<bool>,
    /// `index.passage_index`: keep the passage index (built from the
    /// stored documents' fingerprints when switched on).
    #[serde(default, deserialize_with = "not_null")]
    passage_index: Option<bool>,
    /// `index.boilerplate`: the keys given (document frequency counted
    /// from every stored document when `enabled` turns on).
    #[serde(default, deserialize_with = "not_null")]
    boilerplate: Option<crate::collections::BoilerplatePatch>,
    /// `originals.time_field`: a metadata field name, or null for the time
    /// documents were stored; later answers use it (nothing is reindexed).
    #[serde(default, deserialize_with = "not_null")]
    originals: Option<OriginalsPatch>,
    /// `events`: the keys given (`feed`, `measure`, `score`, `threshold`)
    /// replace the collection's; each is checked by the collection layer
    /// so a bad one is a 422 naming it.
    #[serde(default, deserialize_with = "not_null")]
    events: Option<Value>,
    /// `review`: the keys given (`exclude_not_duplicates`,
    /// `snippet_field`) replace the collection's, checked by the
    /// collection layer (a bad one is a 422 naming it).
    #[serde(default, deserialize_with = "not_null")]
    review: Option<Value>,
}

/// `{"time_field": "name"}` or `{"time_field": null}`: the key is required.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OriginalsPatch {
    #[serde(default, deserialize_with = "present")]
    time_field: Option<Option<String>>,
}

/// A field that may be left out but not null.
pub(super) fn not_null<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// `{"ttl_secs": n}` or `{"ttl_secs": null}`: the key is required, so an
/// empty object cannot clear a retention by accident.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetentionPatch {
    #[serde(default, deserialize_with = "present")]
    ttl_secs: Option<Option<u64>>,
}

/// A field that may be null but must be there: `Some(None)` for null.
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// `PATCH /collections/{name}`: change the retention, at once and without
/// a rebuild (the recipe and index parameters are fixed at creation).
pub async fn patch(
    State(app): State<AppState>,
    CollName(name): CollName,
    body: JsonBody,
) -> Result<Json<Value>, ApiError> {
    let hint = |detail: String| {
        ApiError::InvalidBody(format!(
            "{detail}; PATCH changes only {{\"retention\": {{\"ttl_secs\": n or null}}}} and \
             {{\"store_text\": true or false}} and {{\"passage_index\": true or false}} and {{\"boilerplate\": {{\"enabled\", \"share\", \
             \"min_docs\", \"min_collection_docs\"}}}} and {{\"originals\": {{\"time_field\": name or null}}}} and \
             {{\"events\": {{\"feed\", \"measure\", \"score\", \"threshold\"}}}} and \
             {{\"review\": {{\"exclude_not_duplicates\", \"snippet_field\"}}}}: the \
             recipe and the other index parameters change by \
             POST /collections/{{name}}/reindex"
        ))
    };
    let mut value: Value = parse_json(&body.0)?;
    integral_floats_to_integers(&mut value);
    let patch: Patch = serde_json::from_value(value)
        .map_err(|e| hint(format!("the body does not match the schema: {e}")))?;
    let retention = match patch.retention {
        Some(r) => match r.ttl_secs {
            Some(ttl_secs) => Some(Retention { ttl_secs }),
            None => return Err(hint("retention.ttl_secs is missing".into())),
        },
        None => None,
    };
    let store_text = patch.store_text;
    let passage_index = patch.passage_index;
    let boilerplate = patch.boilerplate;
    let originals = match patch.originals {
        Some(o) => match o.time_field {
            Some(time_field) => Some(crate::collections::Originals { time_field }),
            None => return Err(hint("originals.time_field is missing".into())),
        },
        None => None,
    };
    let collections = Arc::clone(&app.collections);
    let c = tokio::task::spawn_blocking(move || {
        collections.change(
            name.as_str(),
            retention,
            store_text,
            passage_index,
            boilerplate,
            originals,
            patch.events,
            patch.review,
        )
    })
    .await
    .map_err(|e| ApiError::Internal(format!("collection task failed: {e}")))??;
    Ok(Json(describe(&c)))
}

/// `POST /collections/{name}/reindex`: 202 with the progress (and its
/// `Location`, the collection) once the new index is being built in the
/// background; 409 when the collection does not store texts, a reindex
/// runs, or it is `default`.
pub async fn reindex(
    State(app): State<AppState>,
    CollName(name): CollName,
    body: JsonBody,
) -> Result<Response, ApiError> {
    let mut settings: Value = parse_json(&body.0)?;
    if !settings.is_object() {
        return Err(ApiError::InvalidBody(
            "the body must be an object of shingle, normalize and index settings".into(),
        ));
    }
    integral_floats_to_integers(&mut settings);
    let collections = Arc::clone(&app.collections);
    let job =
        tokio::task::spawn_blocking(move || collections.start_reindex(name.as_str(), &settings))
            .await
            .map_err(|e| ApiError::Internal(format!("collection task failed: {e}")))??;
    let c = Arc::clone(job.collection());
    let collections = Arc::clone(&app.collections);
    let scans = Arc::clone(&app.scans);
    // Detached: the build outlives the request (progress in the stats).
    tokio::spawn(async move {
        let old_id = job.collection().id;
        let done = tokio::task::spawn_blocking(move || collections.run_reindex(job)).await;
        if let Ok(Ok(_)) = done {
            scans.forget(old_id);
        }
    });
    let progress = reindex_json(&c);
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, location(&c))],
        Json(progress),
    )
        .into_response())
}

/// `DELETE /collections/{name}`: gone durably; 409 for `default`.
pub async fn delete(
    State(app): State<AppState>,
    CollName(name): CollName,
) -> Result<StatusCode, ApiError> {
    let collections = Arc::clone(&app.collections);
    let c = tokio::task::spawn_blocking(move || collections.delete(name.as_str()))
        .await
        .map_err(|e| ApiError::Internal(format!("collection task failed: {e}")))??;
    app.scans.forget(c.id);
    app.metrics.forget_collection(c.name.as_str());
    Ok(StatusCode::NO_CONTENT)
}
