//! `/documents`: create, replace, read, delete, and bulk load.

use super::dto::{
    format_time, BatchDocumentIn, BatchIn, BatchItemOut, BatchOut, DocumentIn, DocumentOut,
    DocumentPut, ItemId, MatchOut, PassagesOut, WrittenOut,
};
use super::error::ApiError;
use super::extract::{
    parse_json, parse_since, parse_time, ApiQuery, Coll, DocPath, JsonBody, Limit, Text,
};
use super::filters;
use super::state::{backend, AppState};
use crate::backend::StoredText;
use crate::collections::{Collection, Retention};
use crate::engine::{
    DocId, EngineError, IdError, Measure, NewDoc, Query, Score, UniqueOutcome, WriteMode,
    WriteOutcome,
};
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use rayon::prelude::*;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Characters left as-is in a `Location` path segment (RFC 3986 unreserved).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The new document's path: under `/collections/{name}` unless it is in
/// the default collection, whose routes are unprefixed.
fn location(coll: &Collection, id: &DocId) -> HeaderValue {
    let id = utf8_percent_encode(id.as_str(), SEGMENT);
    let path = if coll.name.is_default() {
        format!("/documents/{id}")
    } else {
        format!("/collections/{}/documents/{id}", coll.name)
    };
    HeaderValue::from_str(&path).expect("percent-encoded paths are valid header values")
}

/// Ids a client may not choose: `batch` is the bulk route's path, and URL
/// clients rewrite `.` and `..` path segments, so those documents could be
/// created but never addressed again.
const RESERVED_IDS: &[&str] = &["batch", ".", ".."];

/// Parse a client-chosen id for a write.
pub(super) fn client_id(raw: &str) -> Result<DocId, ApiError> {
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
pub(super) fn metadata_text(raw: Option<&RawValue>) -> Result<Option<Box<str>>, ApiError> {
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

/// A write's own expiry (ms since the epoch) from `ttl_secs` or
/// `expires_at` (at most one; 422 otherwise), at `now`.
fn own_expiry(
    ttl_secs: Option<usize>,
    expires_at: Option<&str>,
    now: u64,
) -> Result<Option<u64>, ApiError> {
    match (ttl_secs, expires_at) {
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(ApiError::InvalidBody(
            "give ttl_secs or expires_at, not both".into(),
        )),
        (Some(secs), None) if secs == 0 || secs as u64 > Retention::MAX_TTL_SECS => {
            Err(ApiError::InvalidBody(format!(
                "ttl_secs must be 1 to {} (100 years), got {secs}",
                Retention::MAX_TTL_SECS
            )))
        }
        (Some(secs), None) => Ok(Some(now + secs as u64 * 1000)),
        (None, Some(at)) => {
            let ms = parse_time("expires_at", at).map_err(ApiError::InvalidBody)?;
            match u64::try_from(ms) {
                Ok(ms) if ms > now => Ok(Some(ms)),
                _ => Err(ApiError::InvalidBody(format!(
                    "expires_at {at:?} is not in the future"
                ))),
            }
        }
    }
}

/// A `since` query or body value, as ms since the epoch.
pub(super) fn since(raw: Option<&str>) -> Result<Option<u64>, ApiError> {
    raw.map(|s| parse_since(s).map_err(ApiError::InvalidParameter))
        .transpose()
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
    /// With `similar` or `if_unique`: only documents stored since then count.
    since: Option<String>,
    /// With `similar` or `if_unique`: the score the threshold applies to.
    measure: Option<Measure>,
    /// With `similar` or `if_unique`: over which shingles (`raw`, `content`).
    score: Option<Score>,
    /// With `similar` or `if_unique`: a JSON object of conditions on the
    /// stored documents' metadata; only those it admits count.
    filter: Option<String>,
    /// With `similar` or `if_unique`: comma-separated fields a stored
    /// document must not share with this one's metadata to count.
    exclude_same: Option<String>,
}

/// `POST /documents`.
pub async fn create(
    State(app): State<AppState>,
    Coll(coll): Coll,
    ApiQuery(params): ApiQuery<CreateParams>,
    body: JsonBody,
) -> Result<Response, ApiError> {
    let doc: DocumentIn = parse_json(&body.0).map_err(|e| one_document(e, &body.0))?;
    let text = Text::parse(doc.text, &app.config.limits)?;
    let id = match doc.id {
        Some(id) => client_id(&id)?,
        None => generate_id(),
    };
    let metadata = metadata_text(doc.metadata.as_deref())?;
    let expires_ms = own_expiry(
        doc.ttl_secs,
        doc.expires_at.as_deref(),
        coll.recipe().now_ms(),
    )?;
    // Checked even without `similar=true`: a bad value is never silently ignored.
    let (measure, score) = (
        params.measure.unwrap_or_default(),
        params.score.unwrap_or_default(),
    );
    let q = Query::new(
        coll.recipe()
            .threshold_for(measure, score, params.threshold)?,
        Limit::parse(params.limit, &app.config.query)?.get(),
    )
    .since(since(params.since.as_deref())?)
    .measure(measure)
    .score(score)
    .filter(filters::about(
        &filters::from_query(params.filter.as_deref(), params.exclude_same.as_deref())?,
        metadata.as_deref(),
    ));
    if q.filter.is_some() && (params.similar || params.if_unique) {
        let kind = if params.if_unique {
            "if_unique"
        } else {
            "similar_on_write"
        };
        app.metrics.observe_filtered(coll.name.as_str(), kind);
    }
    let kept = coll.stores_text().then(|| text.as_str().into());
    let prepared = app.prepare(&coll, text).await?;
    // With `similar`, the time it is stored is taken here, so the answer's
    // original weighs the very `created_at` it gets.
    let created_ms = params.similar.then(|| coll.recipe().now_ms());
    let time_ms = created_ms.map(|ms| {
        let field = coll.time_field();
        crate::engine::originals::time_of(metadata.as_deref(), ms, field.as_deref())
    });
    let new = NewDoc {
        id: id.clone(),
        doc: prepared,
        metadata,
        expires_ms,
        text: kept,
        created_ms,
    };
    if params.if_unique {
        return create_if_unique(&app, &coll, new, q).await;
    }
    let backend = backend(&coll)?;
    let mut similar = if params.similar {
        let found = backend.similar_to(&new.doc, Some(id.as_str()), &q).await?;
        app.metrics.observe_measure(
            coll.name.as_str(),
            crate::engine::By::new(measure, score),
            &found,
        );
        Some(found)
    } else {
        None
    };
    let shingles = new.doc.shingles().len();
    backend
        .insert(new, WriteMode::Create)
        .await
        .map_err(ApiError::from)
        .inspect_err(|e| {
            app.metrics
                .observe_write_error(coll.name.as_str(), e.status().as_u16())
        })?;
    app.metrics.observe_write(coll.name.as_str(), "created");
    app.events
        .after_writes(&coll, &[(id.clone(), "created")])
        .await;
    let original = match &similar {
        Some(found) => {
            let stored = super::similar::Stored {
                id: id.as_str(),
                time_ms,
            };
            Some(super::similar::original_of(&coll, backend, Some(stored), &found.matches).await?)
        }
        None => None,
    };
    let body = WrittenOut {
        id: id.to_string(),
        shingles,
        original,
        inserted: None,
        truncated: similar.as_ref().map(|q| q.truncated),
        measure: similar.as_ref().map(|_| measure),
        score: similar.as_ref().map(|_| score),
        passages: similar
            .as_mut()
            .and_then(|q| q.passages.take())
            .map(PassagesOut::from),
        similar: similar.map(|q| q.matches.into_iter().map(MatchOut::from).collect()),
    };
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location(&coll, &id))],
        Json(body),
    )
        .into_response())
}

/// `POST /documents` takes one document: a JSON array is told where
/// several go.
fn one_document(e: ApiError, body: &[u8]) -> ApiError {
    match e {
        ApiError::InvalidBody(m) if body.trim_ascii_start().starts_with(b"[") => {
            ApiError::InvalidBody(format!(
                "{m}: POST /documents takes one document, {{\"text\": ..., \"id\": ...}}; \
                 to write several, send {{\"documents\": [...]}} to POST /documents/batch"
            ))
        }
        e => e,
    }
}

/// `POST /documents?if_unique=true`: 201 and `"inserted": true` when
/// stored; 200 and `"inserted": false` with the stored near-duplicates in
/// `similar` when not (nothing is stored then). With
/// `review.exclude_not_duplicates`, the stored documents this id was
/// judged not a duplicate of do not count (nor are they named).
async fn create_if_unique(
    app: &AppState,
    coll: &Arc<Collection>,
    new: NewDoc,
    q: Query,
) -> Result<Response, ApiError> {
    let id = new.id.clone();
    let shingles = new.doc.shingles().len();
    let name = coll.name.as_str();
    let (measure, score) = (q.measure, q.score);
    let q = match coll.excluded_pairs().await? {
        Some(excluded) => q.ignoring(excluded.partners(id.as_str())),
        None => q,
    };
    let outcome = backend(coll)?
        .insert_if_unique(new, q)
        .await
        .map_err(ApiError::from)
        .inspect_err(|e| app.metrics.observe_write_error(name, e.status().as_u16()))?;
    let ignored = match &outcome {
        UniqueOutcome::Inserted(stored) => stored.ignored,
        UniqueOutcome::Duplicate(found) => found.ignored,
    };
    app.metrics
        .observe_review_excluded(name, "if_unique", ignored);
    Ok(match outcome {
        UniqueOutcome::Inserted(_) => {
            app.metrics.observe_write(name, "created");
            app.events
                .after_writes(coll, &[(id.clone(), "created")])
                .await;
            let body = WrittenOut {
                id: id.to_string(),
                shingles,
                inserted: Some(true),
                original: Some(None),
                similar: Some(Vec::new()),
                truncated: Some(false),
                measure: Some(measure),
                score: Some(score),
                passages: None,
            };
            (
                StatusCode::CREATED,
                [(header::LOCATION, location(coll, &id))],
                Json(body),
            )
                .into_response()
        }
        UniqueOutcome::Duplicate(found) => {
            app.metrics
                .observe_measure(name, crate::engine::By::new(measure, score), &found);
            app.metrics.observe_write(name, "rejected_duplicate");
            app.events.after_refusal(coll, &id, &found.matches).await;
            let original =
                super::similar::original_of(coll, backend(coll)?, None, &found.matches).await?;
            let body = WrittenOut {
                id: id.to_string(),
                shingles,
                original: Some(original),
                inserted: Some(false),
                truncated: Some(found.truncated),
                measure: Some(measure),
                score: Some(score),
                passages: found.passages.map(PassagesOut::from),
                similar: Some(found.matches.into_iter().map(MatchOut::from).collect()),
            };
            (StatusCode::OK, Json(body)).into_response()
        }
    })
}

/// `PUT /documents/{id}`: create (201) or replace (200).
pub async fn put(
    State(app): State<AppState>,
    Coll(coll): Coll,
    DocPath(raw_id): DocPath,
    body: JsonBody,
) -> Result<Response, ApiError> {
    let id = client_id(&raw_id)?;
    let doc: DocumentPut = parse_json(&body.0)?;
    let text = Text::parse(doc.text, &app.config.limits)?;
    let metadata = metadata_text(doc.metadata.as_deref())?;
    let expires_ms = own_expiry(
        doc.ttl_secs,
        doc.expires_at.as_deref(),
        coll.recipe().now_ms(),
    )?;
    let kept = coll.stores_text().then(|| text.as_str().into());
    let prepared = app.prepare(&coll, text).await?;
    let shingles = prepared.shingles().len();
    let new = NewDoc {
        id: id.clone(),
        doc: prepared,
        metadata,
        expires_ms,
        text: kept,
        created_ms: None,
    };
    let outcome = backend(&coll)?
        .insert(new, WriteMode::Upsert)
        .await
        .map_err(ApiError::from)
        .inspect_err(|e| {
            app.metrics
                .observe_write_error(coll.name.as_str(), e.status().as_u16())
        })?;
    let body = Json(WrittenOut {
        id: id.to_string(),
        shingles,
        inserted: None,
        original: None,
        similar: None,
        truncated: None,
        measure: None,
        score: None,
        passages: None,
    });
    Ok(match outcome {
        WriteOutcome::Created => {
            app.metrics.observe_write(coll.name.as_str(), "created");
            app.events
                .after_writes(&coll, &[(id.clone(), "created")])
                .await;
            (
                StatusCode::CREATED,
                [(header::LOCATION, location(&coll, &id))],
                body,
            )
                .into_response()
        }
        WriteOutcome::Replaced => {
            app.metrics.observe_write(coll.name.as_str(), "replaced");
            app.events
                .after_writes(&coll, &[(id.clone(), "replaced")])
                .await;
            (StatusCode::OK, body).into_response()
        }
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetParams {
    /// `text`: add the stored text.
    include: Option<String>,
}

/// What `?include=` asks for: true if the text (the one value there is).
fn include_text(include: Option<&str>) -> Result<bool, ApiError> {
    match include {
        None => Ok(false),
        Some("text") => Ok(true),
        Some(other) => Err(ApiError::InvalidParameter(format!(
            "include: {:?} is not a value it takes; the only one is \"text\"",
            other.chars().take(40).collect::<String>()
        ))),
    }
}

/// The stored text of `id` in `coll`, read off the async workers: 409
/// `text-not-stored` when the collection does not keep texts, or kept none
/// for this document; 404 when there is no such document.
pub(super) async fn stored_text(coll: &Arc<Collection>, id: &str) -> Result<String, ApiError> {
    match backend(coll)?.text(id).await? {
        StoredText::Text(text) => Ok(text),
        StoredText::Missing => Err(EngineError::NotFound(id.to_owned()).into()),
        StoredText::NotKept => Err(ApiError::TextNotStored(format!(
            "collection {:?} does not store texts (store_text is off), so the text of {id:?} was not kept",
            coll.name.as_str()
        ))),
        StoredText::StoredWithout => Err(ApiError::TextNotStored(format!(
            "document {id:?} was stored without its text (before collection {:?} stored texts); write it again to keep its text",
            coll.name.as_str()
        ))),
    }
}

/// `GET /documents/{id}` (`?include=text` adds the stored text).
pub async fn get(
    Coll(coll): Coll,
    DocPath(id): DocPath,
    ApiQuery(params): ApiQuery<GetParams>,
) -> Result<Response, ApiError> {
    let with_text = include_text(params.include.as_deref())?;
    let record = backend(&coll)?
        .get(&id)
        .await?
        .ok_or_else(|| EngineError::NotFound(id.clone()))?;
    let text = if with_text {
        Some(stored_text(&coll, &id).await?)
    } else {
        None
    };
    let metadata = record
        .metadata()
        .map(serde_json::from_str::<&RawValue>)
        .transpose()
        .map_err(|e| ApiError::Internal(format!("stored metadata is not JSON: {e}")))?;
    Ok(Json(DocumentOut {
        id: record.id().as_str(),
        metadata,
        shingles: record.shingles().len(),
        created_at: format_time(record.created_ms()),
        expires_at: coll.recipe().expiry_ms(&record).map(format_time),
        text,
    })
    .into_response())
}

/// `DELETE /documents/{id}`.
pub async fn delete(
    State(app): State<AppState>,
    Coll(coll): Coll,
    DocPath(id): DocPath,
) -> Result<StatusCode, ApiError> {
    let removed = backend(&coll)?
        .remove(id.clone())
        .await
        .map_err(ApiError::from)
        .inspect_err(|e| {
            app.metrics
                .observe_write_error(coll.name.as_str(), e.status().as_u16())
        })?;
    if removed {
        app.metrics.observe_write(coll.name.as_str(), "deleted");
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

/// `POST /documents/batch`: parse and sign on every core (off the async
/// workers, on the rayon pool), then store in order through the backend.
pub async fn batch(
    State(app): State<AppState>,
    Coll(coll): Coll,
    ApiQuery(params): ApiQuery<BatchParams>,
    body: JsonBody,
) -> Result<Json<BatchOut>, ApiError> {
    let write_mode = match params.mode {
        BatchMode::Create => WriteMode::Create,
        BatchMode::Upsert => WriteMode::Upsert,
    };
    let (app2, coll2) = (app.clone(), Arc::clone(&coll));
    let (items, valid) = tokio::task::spawn_blocking(move || prepare_batch(&app2, &coll2, &body.0))
        .await
        .map_err(|e| ApiError::Internal(format!("batch worker failed: {e}")))??;
    let name = coll.name.as_str();
    let outcomes = backend(&coll)?
        .insert_many(valid, write_mode)
        .await
        .map_err(ApiError::from)
        .inspect_err(|e| app.metrics.observe_write_error(name, e.status().as_u16()))?;
    let answer = batch_answer(&app, name, items, outcomes);
    // Each stored document's event, before the answer (issue 45).
    let written: Vec<(DocId, &'static str)> = answer
        .results
        .iter()
        .filter_map(|r| match (&r.id, r.status) {
            (Some(ItemId::Stored(id)), 201) => Some((id.clone(), "created")),
            (Some(ItemId::Stored(id)), 200) => Some((id.clone(), "replaced")),
            _ => None,
        })
        .collect();
    app.events.after_writes(&coll, &written).await;
    Ok(Json(answer))
}

/// Per request item, in order: what to answer for an item that failed
/// before the store, or (id, shingles) of one handed to it.
type BatchItems = Vec<Result<(DocId, usize), BatchItemOut>>;

type ItemResult = Result<NewDoc, (Option<String>, ApiError)>;

/// The `id` an item that does not parse still gives (a string), for its answer.
fn given_id(raw: &RawValue) -> Option<String> {
    #[derive(Deserialize)]
    struct JustTheId {
        id: Option<String>,
    }
    serde_json::from_str::<JustTheId>(raw.get())
        .ok()
        .and_then(|j| j.id)
}

fn prepare_item(app: &AppState, coll: &Collection, raw: &RawValue, now: u64) -> ItemResult {
    let doc: BatchDocumentIn<'_> = parse_json(raw.get().as_bytes()).map_err(|e| {
        // The item's own words, not the request body's.
        let e = match e {
            ApiError::InvalidBody(m) => {
                ApiError::InvalidBody(m.replacen("the body", "the item", 1))
            }
            e => e,
        };
        (given_id(raw), e)
    })?;
    let fail = |e: ApiError| (doc.id.as_deref().map(str::to_owned), e);
    let id = match &doc.id {
        Some(id) => client_id(id).map_err(fail)?,
        None => generate_id(),
    };
    Text::check(&doc.text, &app.config.limits).map_err(fail)?;
    let metadata = metadata_text(doc.metadata).map_err(fail)?;
    let expires_ms = own_expiry(doc.ttl_secs, doc.expires_at.as_deref(), now).map_err(fail)?;
    let prepared = coll
        .recipe()
        .prepare(&doc.text)
        .map_err(|e| fail(EngineError::from(e).into()))?;
    Ok(NewDoc {
        id,
        doc: prepared,
        metadata,
        expires_ms,
        text: coll.stores_text().then(|| doc.text.as_ref().into()),
        created_ms: None,
    })
}

/// Batches being signed right now (in every collection).
static BATCHES_SIGNING: AtomicUsize = AtomicUsize::new(0);

/// One batch being signed, counted in [`BATCHES_SIGNING`] while it lives.
struct InFlight {
    /// How many other batches were being signed when this one began.
    others: usize,
}

impl InFlight {
    fn enter() -> Self {
        Self {
            others: BATCHES_SIGNING.fetch_add(1, Ordering::Relaxed),
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        BATCHES_SIGNING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Parse and sign a batch on every core: the answers of the items that
/// failed already, and the documents to store, in request order.
fn prepare_batch(
    app: &AppState,
    coll: &Collection,
    bytes: &[u8],
) -> Result<(BatchItems, Vec<NewDoc>), ApiError> {
    let batch: BatchIn<'_> = parse_json(bytes)?;
    let max = app.config.server.max_batch;
    if batch.documents.len() > max {
        return Err(ApiError::PayloadTooLarge(format!(
            "the batch has {} documents; the limit is {max} (server.max_batch)",
            batch.documents.len()
        )));
    }
    // Parse and sign on every core, unless other batches already keep
    // every core busy: then on this thread, without handing the items to
    // the rayon pool and waiting for them.
    let now = coll.recipe().now_ms();
    let _in_flight = InFlight::enter();
    let prepared: Vec<ItemResult> = if _in_flight.others >= rayon::current_num_threads() - 1 {
        batch
            .documents
            .iter()
            .map(|raw| prepare_item(app, coll, raw, now))
            .collect()
    } else {
        batch
            .documents
            .par_iter()
            .map(|raw| prepare_item(app, coll, raw, now))
            .collect()
    };
    // The valid items go to the backend in request order (repeated ids
    // behave as sequential calls; the memory backend commits its log once
    // for the whole batch).
    let mut valid = Vec::with_capacity(prepared.len());
    let mut items: BatchItems = Vec::with_capacity(prepared.len());
    for item in prepared {
        match item {
            Ok(new) => {
                items.push(Ok((new.id.clone(), new.doc.shingles().len())));
                valid.push(new);
            }
            Err((id, e)) => items.push(Err(failed_item(id.map(ItemId::Given), e))),
        }
    }
    Ok((items, valid))
}

/// The batch's answer: `items` in order, each handed-over one with its
/// outcome from `outcomes` (one per handed-over item, in order). The write
/// counters move once per outcome for the whole batch.
fn batch_answer(
    app: &AppState,
    name: &str,
    items: BatchItems,
    outcomes: Vec<Result<WriteOutcome, EngineError>>,
) -> BatchOut {
    let mut outcomes = outcomes.into_iter();
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
                    let status = match outcome {
                        WriteOutcome::Created => {
                            out.created += 1;
                            StatusCode::CREATED
                        }
                        WriteOutcome::Replaced => {
                            out.replaced += 1;
                            StatusCode::OK
                        }
                    };
                    BatchItemOut {
                        id: Some(ItemId::Stored(id)),
                        status: status.as_u16(),
                        shingles: Some(shingles),
                        detail: None,
                    }
                }
                Err(e) => {
                    let e = ApiError::from(e);
                    app.metrics.observe_write_error(name, e.status().as_u16());
                    failed_item(Some(ItemId::Stored(id)), e)
                }
            },
        };
        if result.status >= 400 {
            out.failed += 1;
        }
        out.results.push(result);
    }
    app.metrics
        .observe_writes(name, "created", out.created as u64);
    app.metrics
        .observe_writes(name, "replaced", out.replaced as u64);
    out
}

fn failed_item(id: Option<ItemId>, e: ApiError) -> BatchItemOut {
    // The problem's detail: what went wrong for a 4xx, a fixed text for a
    // 5xx (whose cause is logged).
    let problem = e.problem();
    if e.status().is_server_error() {
        tracing::error!(error = %e, item = id.as_ref().map(ItemId::as_str), "batch item failed");
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
