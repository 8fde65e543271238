//! Every error leaves as RFC 9457 `application/problem+json`.
//!
//! Core errors map to HTTP statuses here and only here, by an exhaustive
//! match (no `_` arm: a new core error must be given a status). 5xx bodies
//! are generic (a fixed text per type); their cause goes to the log, inside
//! the request's span, so under its request id. [`problem_for_status`]
//! turns bodies produced outside our handlers (axum's 405, the timeout and
//! panic layers) into the same shape, so clients parse one format. The
//! router's outermost error layer adds the request id to every problem
//! (`request_id`), so a client can quote it and an operator find the log.

use crate::backend::BackendError;
use crate::collections::{CollectionError, InvalidName};
use crate::engine::{EngineError, IdError};
use crate::text::TextError;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

pub const PROBLEM_JSON: &str = "application/problem+json";

/// An RFC 9457 problem document.
#[derive(Clone, Debug, Serialize)]
pub struct Problem {
    #[serde(rename = "type")]
    pub kind: String,
    pub title: &'static str,
    pub status: u16,
    pub detail: String,
    /// The request's `X-Request-Id` (an extension member), filled in by
    /// the router's outermost error layer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// The detail of every `storage-unavailable` answer.
const STORAGE_DETAIL: &str =
    "the write could not be made durable and was not acknowledged; retry later";
/// The detail of a `storage-unavailable` answer from the shared storage.
const SHARED_STORAGE_DETAIL: &str =
    "the storage holding this collection cannot answer right now; retry later (a write that was not acknowledged may or may not have been applied; retrying it is safe)";
/// The detail of a `storage-unavailable` answer to `POST /admin/snapshot`.
const SNAPSHOT_NO_SPACE_DETAIL: &str =
    "the snapshot could not be written: the data directory has no room; every acknowledged write is still in the log; retry once there is room";
/// The detail of every `internal` answer.
const INTERNAL_DETAIL: &str =
    "the server failed to handle this request; the cause is logged under its request id";

/// Errors the HTTP layer answers with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("invalid id: {0}")]
    InvalidId(#[from] IdError),
    #[error(transparent)]
    InvalidCollectionName(#[from] InvalidName),
    #[error("no collection named {0:?}")]
    CollectionNotFound(String),
    /// Its files could not be restored (the cause is logged at start).
    #[error("collection {0:?} is unavailable: its files could not be restored (see the server log); repair them or delete the collection")]
    CollectionUnavailable(String),
    #[error(transparent)]
    Collection(#[from] CollectionError),
    /// The body is not syntactically valid JSON (or not UTF-8).
    #[error("{0}")]
    MalformedJson(String),
    /// Valid JSON of the wrong shape: missing fields, wrong types, unknown fields.
    #[error("{0}")]
    InvalidBody(String),
    /// A query-string or path parameter is malformed or out of range.
    #[error("{0}")]
    InvalidParameter(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    /// A text given in a request has nothing left after normalization
    /// (the detail names which).
    #[error("{0}")]
    EmptyText(String),
    /// An operation needs a stored document's text, and its collection
    /// does not store texts.
    #[error("{0}")]
    TextNotStored(String),
    #[error("no template {0:?} in this collection")]
    TemplateNotFound(String),
    #[error("no webhook subscription {0:?} in this collection")]
    WebhookNotFound(String),
    /// No review decision on the pair (issue 46): the detail names it.
    #[error("{0}")]
    DecisionNotFound(String),
    /// A subscription URL whose scheme, length or host is refused (the
    /// detail says which; SSRF protection, `webhooks.allowed_hosts`).
    #[error("{0}")]
    WebhookUrlNotAllowed(String),
    /// `webhooks.max_subscriptions` reached.
    #[error("this collection has {0} webhook subscriptions, the most allowed (webhooks.max_subscriptions); delete one first")]
    TooManySubscriptions(usize),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("no route for {0}")]
    RouteNotFound(String),
    #[error("the service is starting and not ready to serve yet")]
    NotReady,
    /// `/readyz` with the redis backend while the cluster is not serving
    /// every slot (the cause is in the log).
    #[error("the shared storage (Redis) is not serving every slot now; this node is not ready until it is")]
    StorageNotReady,
    /// `GET /duplicates`: the scan behind the page outlasts the request;
    /// it goes on and the retry is answered from its result.
    #[error("the duplicate scan behind this page is still running; retry in {retry_after_secs} s")]
    ScanInProgress { retry_after_secs: u64 },
    /// Refused at once: `server.max_concurrent_requests` are already in flight.
    #[error(
        "the server is already handling {0} requests (server.max_concurrent_requests); retry later"
    )]
    Overloaded(usize),
    /// No usable `Authorization: Bearer <key>`. `key_sent` when a bearer
    /// token was sent but matches no configured key (never part of the message).
    #[error("{detail}")]
    Unauthorized {
        detail: &'static str,
        key_sent: bool,
    },
    /// A read-only key on a route that is not GET or HEAD, or a key used
    /// outside its collections.
    #[error("{0}")]
    Forbidden(&'static str),
    /// The shared storage (Redis) cannot answer now; the cause is logged,
    /// never sent.
    #[error("storage unavailable: {0}")]
    StorageUnavailable(String),
    /// A snapshot could not be written for lack of disk space (or quota);
    /// the cause is logged, never sent. Every acknowledged write is still
    /// in the log.
    #[error("snapshot failed: {0}")]
    SnapshotNoSpace(String),
    /// Unexpected failure; the message is logged, never sent.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<BackendError> for ApiError {
    fn from(e: BackendError) -> Self {
        match e {
            BackendError::Engine(e) => ApiError::Engine(e),
            BackendError::Unavailable(why) => ApiError::StorageUnavailable(why),
            BackendError::Internal(why) => ApiError::Internal(why),
            BackendError::SnapshotNoSpace(why) => ApiError::SnapshotNoSpace(why),
        }
    }
}

/// A stable problem `type` URI for each kind of error.
fn type_uri(slug: &str) -> String {
    format!("urn:neardup:problem:{slug}")
}

impl ApiError {
    fn parts(&self) -> (StatusCode, &'static str, &'static str) {
        use StatusCode as S;
        match self {
            ApiError::Engine(e) => match e {
                EngineError::AlreadyExists(_) => {
                    (S::CONFLICT, "already-exists", "Document already exists")
                }
                EngineError::NotFound(_) => {
                    (S::NOT_FOUND, "document-not-found", "Document not found")
                }
                EngineError::Text(TextError::Empty) => (
                    S::UNPROCESSABLE_ENTITY,
                    "empty-text",
                    "Text has nothing to index",
                ),
                EngineError::Journal(_) => (
                    S::SERVICE_UNAVAILABLE,
                    "storage-unavailable",
                    "Storage unavailable",
                ),
                EngineError::ThresholdOutOfRange(_) => {
                    (S::BAD_REQUEST, "invalid-threshold", "Invalid threshold")
                }
                EngineError::ThresholdBelowTuned { .. } => (
                    S::BAD_REQUEST,
                    "threshold-below-tuning",
                    "Threshold below what the index is tuned for",
                ),
                EngineError::PassageIndexOff(_) => (
                    S::CONFLICT,
                    "passage-index-off",
                    "The collection keeps no passage index",
                ),
                EngineError::BoilerplateOff => (
                    S::CONFLICT,
                    "boilerplate-off",
                    "The collection counts no document frequency",
                ),
                EngineError::InvalidCursor(_) => {
                    (S::BAD_REQUEST, "invalid-cursor", "Invalid event cursor")
                }
            },
            ApiError::InvalidId(_) => (S::BAD_REQUEST, "invalid-id", "Invalid document id"),
            ApiError::InvalidCollectionName(_) => (
                S::BAD_REQUEST,
                "invalid-collection-name",
                "Invalid collection name",
            ),
            ApiError::CollectionNotFound(_) => {
                (S::NOT_FOUND, "collection-not-found", "Collection not found")
            }
            ApiError::CollectionUnavailable(_) => (
                S::SERVICE_UNAVAILABLE,
                "collection-unavailable",
                "Collection unavailable",
            ),
            ApiError::Collection(e) => match e {
                // Deleted: only a background reindex meets it (its progress
                // says so); a request would find no collection.
                CollectionError::NotFound(_) | CollectionError::Deleted(_) => {
                    (S::NOT_FOUND, "collection-not-found", "Collection not found")
                }
                CollectionError::InvalidName(_) => (
                    S::BAD_REQUEST,
                    "invalid-collection-name",
                    "Invalid collection name",
                ),
                CollectionError::Settings(_) => (
                    S::UNPROCESSABLE_ENTITY,
                    "invalid-settings",
                    "Invalid collection settings",
                ),
                CollectionError::Conflict { .. } => (
                    S::CONFLICT,
                    "collection-conflict",
                    "Collection exists with other settings",
                ),
                CollectionError::Protected(_) => (
                    S::CONFLICT,
                    "collection-protected",
                    "Collection cannot be changed this way",
                ),
                CollectionError::TooMany(_) => {
                    (S::CONFLICT, "too-many-collections", "Too many collections")
                }
                CollectionError::TooManyTemplates(_) => {
                    (S::CONFLICT, "too-many-templates", "Too many templates")
                }
                CollectionError::Unavailable(_) => (
                    S::SERVICE_UNAVAILABLE,
                    "collection-unavailable",
                    "Collection unavailable",
                ),
                CollectionError::Storage(_)
                | CollectionError::Backend(crate::backend::BackendError::Unavailable(_)) => (
                    S::SERVICE_UNAVAILABLE,
                    "storage-unavailable",
                    "Storage unavailable",
                ),
                CollectionError::Backend(_) => (
                    S::INTERNAL_SERVER_ERROR,
                    "internal",
                    "Internal server error",
                ),
                CollectionError::TextNotStored(_) => {
                    (S::CONFLICT, "text-not-stored", "Text not stored")
                }
                CollectionError::ReindexRunning(_) => (
                    S::CONFLICT,
                    "reindex-running",
                    "A reindex is already running",
                ),
            },
            ApiError::MalformedJson(_) => (S::BAD_REQUEST, "malformed-json", "Malformed JSON"),
            ApiError::InvalidBody(_) => (
                S::UNPROCESSABLE_ENTITY,
                "invalid-body",
                "Invalid request body",
            ),
            ApiError::InvalidParameter(_) => {
                (S::BAD_REQUEST, "invalid-parameter", "Invalid parameter")
            }
            ApiError::PayloadTooLarge(_) => (
                S::PAYLOAD_TOO_LARGE,
                "payload-too-large",
                "Payload too large",
            ),
            ApiError::EmptyText(_) => (
                S::UNPROCESSABLE_ENTITY,
                "empty-text",
                "Text has nothing to index",
            ),
            ApiError::TextNotStored(_) => (S::CONFLICT, "text-not-stored", "Text not stored"),
            ApiError::TemplateNotFound(_) => {
                (S::NOT_FOUND, "template-not-found", "Template not found")
            }
            ApiError::WebhookNotFound(_) => (
                S::NOT_FOUND,
                "webhook-not-found",
                "Webhook subscription not found",
            ),
            ApiError::DecisionNotFound(_) => {
                (S::NOT_FOUND, "decision-not-found", "Decision not found")
            }
            ApiError::WebhookUrlNotAllowed(_) => (
                S::UNPROCESSABLE_ENTITY,
                "webhook-url-not-allowed",
                "Webhook URL not allowed",
            ),
            ApiError::TooManySubscriptions(_) => (
                S::CONFLICT,
                "too-many-subscriptions",
                "Too many webhook subscriptions",
            ),
            ApiError::UnsupportedMediaType(_) => (
                S::UNSUPPORTED_MEDIA_TYPE,
                "unsupported-media-type",
                "Unsupported media type",
            ),
            ApiError::RouteNotFound(_) => (S::NOT_FOUND, "route-not-found", "Not found"),
            ApiError::NotReady | ApiError::StorageNotReady => {
                (S::SERVICE_UNAVAILABLE, "not-ready", "Not ready")
            }
            ApiError::ScanInProgress { .. } => (
                S::SERVICE_UNAVAILABLE,
                "scan-in-progress",
                "Scan in progress",
            ),
            ApiError::Overloaded(_) => {
                (S::SERVICE_UNAVAILABLE, "unavailable", "Service unavailable")
            }
            ApiError::Unauthorized { .. } => (S::UNAUTHORIZED, "unauthorized", "Unauthorized"),
            ApiError::Forbidden(_) => (S::FORBIDDEN, "forbidden", "Forbidden"),
            ApiError::StorageUnavailable(_) => (
                S::SERVICE_UNAVAILABLE,
                "storage-unavailable",
                "Storage unavailable",
            ),
            ApiError::SnapshotNoSpace(_) => (
                S::SERVICE_UNAVAILABLE,
                "storage-unavailable",
                "Storage unavailable",
            ),
            ApiError::Internal(_) => (
                S::INTERNAL_SERVER_ERROR,
                "internal",
                "Internal server error",
            ),
        }
    }

    pub fn status(&self) -> StatusCode {
        self.parts().0
    }

    /// The problem document for this error.
    pub fn problem(&self) -> Problem {
        let (status, slug, title) = self.parts();
        let detail = match self {
            ApiError::Internal(_) => INTERNAL_DETAIL.to_owned(),
            ApiError::SnapshotNoSpace(_) => SNAPSHOT_NO_SPACE_DETAIL.to_owned(),
            ApiError::Engine(EngineError::Journal(_))
            | ApiError::Collection(CollectionError::Storage(_)) => STORAGE_DETAIL.to_owned(),
            ApiError::StorageUnavailable(_)
            | ApiError::Collection(CollectionError::Backend(
                crate::backend::BackendError::Unavailable(_),
            )) => SHARED_STORAGE_DETAIL.to_owned(),
            ApiError::Collection(CollectionError::Backend(_)) => INTERNAL_DETAIL.to_owned(),
            other => other.to_string(),
        };
        Problem {
            kind: type_uri(slug),
            title,
            status: status.as_u16(),
            detail,
            request_id: None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        // The cause of a 5xx goes to the log only (inside the request span,
        // which carries the request id), never into the body.
        match &self {
            ApiError::Internal(msg) => tracing::error!(error = %msg, "internal error"),
            ApiError::SnapshotNoSpace(msg) => {
                tracing::error!(error = %msg, "snapshot failed for lack of disk space")
            }
            ApiError::Engine(EngineError::Journal(e)) => {
                tracing::error!(error = %e, "write not durable")
            }
            ApiError::Collection(CollectionError::Storage(e)) => {
                tracing::error!(error = %e, "collection change not durable")
            }
            ApiError::StorageUnavailable(e) => {
                tracing::error!(error = %e, "storage unavailable")
            }
            ApiError::Collection(CollectionError::Backend(e)) => {
                tracing::error!(error = %e, "collection change in redis failed")
            }
            _ => {}
        }
        let mut resp = problem_response(self.problem());
        if let ApiError::Unauthorized { key_sent, .. } = self {
            let challenge = if key_sent {
                r#"Bearer realm="neardup", error="invalid_token""#
            } else {
                r#"Bearer realm="neardup""#
            };
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(challenge),
            );
        }
        if resp.status() == StatusCode::SERVICE_UNAVAILABLE {
            let seconds = match self {
                ApiError::ScanInProgress { retry_after_secs } => retry_after_secs,
                _ => 1,
            };
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        resp
    }
}

/// A problem+json response. The `Problem` also rides in the response's
/// extensions, so the outer error layer can add the request id without
/// parsing the body back.
pub fn problem_response(problem: Problem) -> Response {
    let status = StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::to_vec(&problem).unwrap_or_default();
    let mut resp = (status, body).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    resp.extensions_mut().insert(problem);
    resp
}

/// A problem for a bare status produced outside our handlers.
pub fn problem_for_status(status: StatusCode) -> Problem {
    let (slug, title, detail): (&str, &'static str, &str) = match status {
        StatusCode::METHOD_NOT_ALLOWED => (
            "method-not-allowed",
            "Method not allowed",
            "this route does not support the request method; see the Allow header",
        ),
        StatusCode::REQUEST_TIMEOUT => (
            "timeout",
            "Request timeout",
            "the request took longer than server.request_timeout_secs",
        ),
        StatusCode::PAYLOAD_TOO_LARGE => (
            "payload-too-large",
            "Payload too large",
            "the request body exceeds server.max_body_bytes",
        ),
        StatusCode::SERVICE_UNAVAILABLE => (
            "unavailable",
            "Service unavailable",
            "the service cannot handle the request right now; retry later",
        ),
        s if s.is_server_error() => ("internal", "Internal server error", INTERNAL_DETAIL),
        _ => (
            "http-error",
            "Request failed",
            "the request could not be handled",
        ),
    };
    Problem {
        kind: type_uri(slug),
        title,
        status: status.as_u16(),
        detail: detail.to_owned(),
        request_id: None,
    }
}
