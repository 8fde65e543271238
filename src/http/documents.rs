//! `/documents`: create, replace, read, delete, and bulk load.

use super::dto::{
    BatchIn, BatchItemOut, BatchOut, DocumentIn, DocumentOut, DocumentPut, MatchOut, WrittenOut,
};
use super::error::ApiError;
use super::extract::{parse_json, ApiPath, ApiQuery, JsonBody, Limit, Text};
use super::state::AppState;
use crate::engine::{
    DocId, EngineError, IdError, Prepared, Threshold, UniqueOutcome, WriteMode, WriteOutcome,
};
use crate::persist::Store;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use rayon::prelude::*;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::sync::Arc;

/// Characters left as-is in a `Location` path segment (RFC 3986 unreserved).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

fn location(id: &DocId) -> HeaderValue {
    let path = format!("/documents/{}", utf8_percent_encode(id.as_str(), SEGMENT));
    HeaderValue::from_str(&path).expect("percent-encoded paths are valid header values")
}

/// Ids a client may not choose: `batch` is the bulk route's path, and URL
/// clients rewrite `.` and `..` path segments, so those documents could be
/// created but never addressed again.
const RESERVED_IDS: &[&str] = &["batch", ".", ".."];

/// Parse a client-chosen id for a write.
fn client_id(raw: &str) -> Result<DocId, ApiError> {
    if RESERVED_IDS.contains(&raw) {
        return Err(ApiError::InvalidId(IdError::Reserved(raw.to_owned())));
    }
    Ok(DocId::parse(raw)?)
}

/// A new server-side id: UUIDv7, so generated ids sort by creation time.
fn generate_id() -> DocId {
    DocId::parse(&uuid::Uuid::now_v7().to_string()).expect("a UUID is a valid id")
}

/// Deepest metadata nesting accepted: within serde_json's own recursion
/// limit (128), so every client that parses it back with serde_json can.
const MAX_METADATA_DEPTH: usize = 100;

/// How deeply objects and arrays nest in `json` (already valid JSON).
fn json_depth(json: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for b in json.bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Metadata must be a JSON object (or absent / null), nested at most
/// [`MAX_METADATA_DEPTH`] levels, that serde_json can read back.
fn metadata_text(raw: Option<Box<RawValue>>) -> Result<Option<Box<str>>, ApiError> {
    match raw {
        None => Ok(None),
        Some(raw) if raw.get().trim_start().starts_with('{') => {
            let depth = json_depth(raw.get());
            if depth > MAX_METADATA_DEPTH {
                return Err(ApiError::InvalidBody(format!(
                    "metadata nests {depth} levels deep; the limit is {MAX_METADATA_DEPTH}"
                )));
            }
            // Kept as raw text, which serde_json only scanned: a lone
            // surrogate escape ("\ud800") or an out-of-range number would be
            // stored, and then refused by every serde_json client reading it.
            if let Err(e) = serde_json::from_str::<serde_json::Value>(raw.get()) {
                return Err(ApiError::MalformedJson(format!("metadata: {e}")));
            }
            Ok(Some(raw.get().into()))
        }
        Some(_) => Err(ApiError::InvalidBody(
            "metadata must be a JSON object".into(),
        )),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateParams {
    /// Also return the stored near-duplicates (computed before this insert).
    #[serde(default)]
    similar: bool,
    /// Store only if no stored document reaches the threshold (atomically).
    #[serde(default)]
    if_unique: bool,
    threshold: Option<f64>,
    limit: Option<usize>,
}

/// `POST /documents`.
pub async fn create(
    State(app): State<AppState>,
    ApiQuery(params): ApiQuery<CreateParams>,
    body: JsonBody,
) -> Result<Response, ApiError> {
    let doc: DocumentIn = parse_json(&body.0)?;
    let text = Text::parse(doc.text, &app.config.limits)?;
    let id = match doc.id {
        Some(id) => client_id(&id)?,
        None => generate_id(),
    };
    let metadata = metadata_text(doc.metadata)?;
    // Checked even without `similar=true`: a bad value is never silently ignored.
    let threshold = app.engine.threshold(params.threshold)?;
    let limit = Limit::parse(params.limit, &app.config.query)?.get();
    if params.if_unique {
        return create_if_unique(app, id, text, metadata, threshold, limit).await;
    }
    let check = params.similar.then_some((threshold, limit));
    let prepared = app.prepare(text).await?;
    let similar = check.map(|(threshold, limit)| {
        let q = app
            .engine
            .similar_to(&prepared, Some(id.as_str()), threshold, limit);
        app.metrics.observe_query(&q);
        q
    });
    let shingles = prepared.shingles().len();
    let key = id.clone();
    app.write(move |store| store.insert(key, &prepared, metadata, WriteMode::Create))
        .await
        .inspect_err(|_| app.metrics.observe_write("failed"))?;
    app.metrics.observe_write("created");
    let body = WrittenOut {
        id: id.to_string(),
        shingles,
        inserted: None,
        truncated: similar.as_ref().map(|q| q.truncated),
        similar: similar.map(|q| q.matches.into_iter().map(MatchOut::from).collect()),
    };
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location(&id))],
        Json(body),
    )
        .into_response())
}

/// `POST /documents?if_unique=true`: 201 and `"inserted": true` when
/// stored; 200 and `"inserted": false` with the stored near-duplicates in
/// `similar` when not (nothing is stored then).
async fn create_if_unique(
    app: AppState,
    id: DocId,
    text: Text,
    metadata: Option<Box<str>>,
    threshold: Threshold,
    limit: usize,
) -> Result<Response, ApiError> {
    let prepared = app.prepare(text).await?;
    let shingles = prepared.shingles().len();
    let key = id.clone();
    let outcome = app
        .write(move |store| store.insert_if_unique(key, &prepared, metadata, threshold, limit))
        .await
        .inspect_err(|_| app.metrics.observe_write("failed"))?;
    Ok(match outcome {
        UniqueOutcome::Inserted(_) => {
            app.metrics.observe_write("created");
            let body = WrittenOut {
                id: id.to_string(),
                shingles,
                inserted: Some(true),
                similar: Some(Vec::new()),
                truncated: Some(false),
            };
            (
                StatusCode::CREATED,
                [(header::LOCATION, location(&id))],
                Json(body),
            )
                .into_response()
        }
        UniqueOutcome::Duplicate(q) => {
            app.metrics.observe_query(&q);
            app.metrics.observe_write("rejected_duplicate");
            let body = WrittenOut {
                id: id.to_string(),
                shingles,
                inserted: Some(false),
                truncated: Some(q.truncated),
                similar: Some(q.matches.into_iter().map(MatchOut::from).collect()),
            };
            (StatusCode::OK, Json(body)).into_response()
        }
    })
}

/// `PUT /documents/{id}`: create (201) or replace (200).
pub async fn put(
    State(app): State<AppState>,
    ApiPath(raw_id): ApiPath<String>,
    body: JsonBody,
) -> Result<Response, ApiError> {
    let id = client_id(&raw_id)?;
    let doc: DocumentPut = parse_json(&body.0)?;
    let text = Text::parse(doc.text, &app.config.limits)?;
    let metadata = metadata_text(doc.metadata)?;
    let prepared = app.prepare(text).await?;
    let shingles = prepared.shingles().len();
    let key = id.clone();
    let outcome = app
        .write(move |store| store.insert(key, &prepared, metadata, WriteMode::Upsert))
        .await?;
    let body = Json(WrittenOut {
        id: id.to_string(),
        shingles,
        inserted: None,
        similar: None,
        truncated: None,
    });
    Ok(match outcome {
        WriteOutcome::Created => {
            app.metrics.observe_write("created");
            (
                StatusCode::CREATED,
                [(header::LOCATION, location(&id))],
                body,
            )
                .into_response()
        }
        WriteOutcome::Replaced => {
            app.metrics.observe_write("replaced");
            (StatusCode::OK, body).into_response()
        }
    })
}

/// `GET /documents/{id}`.
pub async fn get(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let record = app.engine.get(&id).ok_or(EngineError::NotFound(id))?;
    let metadata = record
        .metadata()
        .map(serde_json::from_str::<&RawValue>)
        .transpose()
        .map_err(|e| ApiError::Internal(format!("stored metadata is not JSON: {e}")))?;
    Ok(Json(DocumentOut {
        id: record.id().as_str(),
        metadata,
        shingles: record.shingles().len(),
    })
    .into_response())
}

/// `DELETE /documents/{id}`.
pub async fn delete(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    let key = id.clone();
    if app.write(move |store| store.remove(&key)).await? {
        app.metrics.observe_write("deleted");
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(EngineError::NotFound(id).into())
    }
}

#[derive(Debug, Default, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BatchMode {
    /// Existing ids fail with 409, as `POST /documents`.
    #[default]
    Create,
    /// Existing ids are replaced, as `PUT /documents/{id}`.
    Upsert,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchParams {
    #[serde(default)]
    mode: BatchMode,
}

/// `POST /documents/batch`: parse and sign on every core, insert in order.
pub async fn batch(
    State(app): State<AppState>,
    ApiQuery(params): ApiQuery<BatchParams>,
    body: JsonBody,
) -> Result<Json<BatchOut>, ApiError> {
    let store = Arc::clone(app.store()?);
    let worker = app.clone();
    tokio::task::spawn_blocking(move || run_batch(&worker, &store, &body.0, params.mode))
        .await
        .map_err(|e| ApiError::Internal(format!("batch worker failed: {e}")))?
        .map(Json)
}

type ItemResult = Result<(DocId, Prepared, Option<Box<str>>), (Option<String>, ApiError)>;

fn prepare_item(app: &AppState, raw: &RawValue) -> ItemResult {
    let doc: DocumentIn = parse_json(raw.get().as_bytes()).map_err(|e| (None, e))?;
    let given = doc.id.clone();
    let fail = |e: ApiError| (given.clone(), e);
    let id = match &doc.id {
        Some(id) => client_id(id).map_err(fail)?,
        None => generate_id(),
    };
    let text = Text::parse(doc.text, &app.config.limits).map_err(fail)?;
    let metadata = metadata_text(doc.metadata).map_err(fail)?;
    let prepared = app
        .engine
        .prepare(text.as_str())
        .map_err(|e| fail(EngineError::from(e).into()))?;
    Ok((id, prepared, metadata))
}

fn run_batch(
    app: &AppState,
    store: &Store,
    bytes: &[u8],
    mode: BatchMode,
) -> Result<BatchOut, ApiError> {
    let batch: BatchIn<'_> = parse_json(bytes)?;
    let max = app.config.server.max_batch;
    if batch.documents.len() > max {
        return Err(ApiError::PayloadTooLarge(format!(
            "the batch has {} documents; the limit is {max} (server.max_batch)",
            batch.documents.len()
        )));
    }
    // Parse and sign on every core.
    let prepared: Vec<ItemResult> = batch
        .documents
        .par_iter()
        .map(|raw| prepare_item(app, raw))
        .collect();
    let write_mode = match mode {
        BatchMode::Create => WriteMode::Create,
        BatchMode::Upsert => WriteMode::Upsert,
    };
    // Insert the valid items in request order (repeated ids behave as
    // sequential calls) with one log commit for the whole batch.
    let mut valid = Vec::with_capacity(prepared.len());
    // Per request item, in order: what to answer for an item that failed
    // before the store, or (id, shingles) of one handed to it.
    let mut items: Vec<Result<(String, usize), BatchItemOut>> = Vec::with_capacity(prepared.len());
    for item in prepared {
        match item {
            Ok((id, doc, metadata)) => {
                items.push(Ok((id.to_string(), doc.shingles().len())));
                valid.push((id, doc, metadata));
            }
            Err((id, e)) => items.push(Err(failed_item(id, e))),
        }
    }
    let mut outcomes = store.insert_many(valid, write_mode)?.into_iter();
    let mut out = BatchOut {
        created: 0,
        replaced: 0,
        failed: 0,
        results: Vec::with_capacity(items.len()),
    };
    for item in items {
        let result = match item {
            Err(failed) => failed,
            Ok((id, shingles)) => match outcomes.next().expect("one outcome per valid item") {
                Ok(outcome) => {
                    let (status, label) = match outcome {
                        WriteOutcome::Created => {
                            out.created += 1;
                            (StatusCode::CREATED, "created")
                        }
                        WriteOutcome::Replaced => {
                            out.replaced += 1;
                            (StatusCode::OK, "replaced")
                        }
                    };
                    app.metrics.observe_write(label);
                    BatchItemOut {
                        id: Some(id),
                        status: status.as_u16(),
                        shingles: Some(shingles),
                        detail: None,
                    }
                }
                Err(e) => failed_item(Some(id), e.into()),
            },
        };
        if result.status >= 400 {
            out.failed += 1;
        }
        out.results.push(result);
    }
    Ok(out)
}

fn failed_item(id: Option<String>, e: ApiError) -> BatchItemOut {
    // The problem's detail: what went wrong for a 4xx, a fixed text for a
    // 5xx (whose cause is logged).
    let problem = e.problem();
    if e.status().is_server_error() {
        tracing::error!(error = %e, item = id.as_deref(), "batch item failed");
    }
    BatchItemOut {
        id,
        status: problem.status,
        shingles: None,
        detail: Some(problem.detail),
    }
}

#[cfg(test)]
mod tests {
    use super::json_depth;

    #[test]
    fn json_depth_counts_nesting_outside_strings() {
        assert_eq!(json_depth("{}"), 1);
        assert_eq!(json_depth(r#"{"a":[1,{"b":[]}]}"#), 4);
        assert_eq!(json_depth(r#"{"a":"[[[{{{\"[[["}"#), 1);
        assert_eq!(json_depth(r#"{"a":"\\","b":[[]]}"#), 3);
    }
}
