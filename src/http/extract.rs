//! Extractors whose rejections are our problem+json errors.
//!
//! [`JsonBody`] checks the Content-Type and buffers the body (under the
//! router's body limit) without parsing it, so handlers choose where parsing
//! runs: inline for small bodies, on a blocking thread for batches.
//! [`parse_json`] maps serde errors: syntax → 400, shape → 422.
//!
//! [`Limit`] and [`Text`] are checked types (parse, don't validate): the
//! only way to get one is to check a raw value against the configured
//! bound, and the code that needs the bound to hold (queries, signing)
//! takes the type, so no handler can forget the check.
//!
//! [`Coll`] is the collection a request is for (the `{name}` of
//! `/collections/{name}/...`, or `default` on the unprefixed routes),
//! found and ready; [`DocPath`] the `{id}` of a document route.

use super::error::ApiError;
use super::state::AppState;
use crate::collections::{Collection, CollectionName, Status};
use crate::config::{LimitsSettings, QuerySettings};
use axum::body::Bytes;
use axum::extract::RawPathParams;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::error::Category;
use std::sync::Arc;

/// A buffered JSON request body, Content-Type checked.
pub struct JsonBody(pub Bytes);

fn is_json_content_type(value: &str) -> bool {
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap_or("").to_owned());
        match content_type {
            Some(ct) if is_json_content_type(&ct) => {}
            Some(ct) => {
                return Err(ApiError::UnsupportedMediaType(format!(
                    "expected Content-Type: application/json, got {ct:?}"
                )))
            }
            None => {
                return Err(ApiError::UnsupportedMediaType(
                    "expected Content-Type: application/json, got none".into(),
                ))
            }
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge("the request body exceeds server.max_body_bytes".into())
            } else {
                ApiError::MalformedJson(format!(
                    "could not read the body: {}",
                    rejection.body_text()
                ))
            }
        })?;
        Ok(JsonBody(bytes))
    }
}

/// Parse a JSON object body, mapping errors to 400 (not JSON) or 422
/// (wrong shape). serde's derive would also accept an array of the fields
/// in order; our bodies are objects only, so anything else is refused.
pub fn parse_json<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, ApiError> {
    let value: T = serde_json::from_slice(bytes).map_err(|e| {
        // serde reports the first problem it meets; a body that is not JSON
        // at all is a 400 even if a shape error came first, and one that
        // is not an object says so (not what serde made of an array).
        match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
            Err(syntax) => json_error(syntax),
            Ok(_) => require_object(bytes).err().unwrap_or_else(|| json_error(e)),
        }
    })?;
    require_object(bytes)?;
    Ok(value)
}

/// 422 unless the JSON text is an object (syntax was checked by the caller).
pub fn require_object(json: &[u8]) -> Result<(), ApiError> {
    let got = match json.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => return Ok(()),
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        Some(_) => "a number",
        None => "nothing",
    };
    Err(ApiError::InvalidBody(format!(
        "the body must be a JSON object, not {got}"
    )))
}

pub fn json_error(e: serde_json::Error) -> ApiError {
    match e.classify() {
        Category::Data => ApiError::InvalidBody(format!("the body does not match the schema: {e}")),
        Category::Syntax | Category::Eof | Category::Io => {
            ApiError::MalformedJson(format!("the body is not valid JSON: {e}"))
        }
    }
}

/// A result count: `query.default_limit` when absent, else between 1 and
/// `query.max_limit` (400 `invalid-parameter` otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit(usize);

impl Limit {
    pub fn parse(raw: Option<usize>, query: &QuerySettings) -> Result<Self, ApiError> {
        match raw {
            None => Ok(Self(query.default_limit)),
            Some(n) if (1..=query.max_limit).contains(&n) => Ok(Self(n)),
            Some(n) => Err(ApiError::InvalidParameter(format!(
                "limit must be between 1 and {} (query.max_limit), got {n}",
                query.max_limit
            ))),
        }
    }

    pub fn get(self) -> usize {
        self.0
    }
}

/// A document or query text of at most `limits.max_text_bytes` UTF-8 bytes
/// (413 `payload-too-large` otherwise).
#[derive(Debug)]
pub struct Text(String);

impl Text {
    pub fn parse(text: String, limits: &LimitsSettings) -> Result<Self, ApiError> {
        Self::check(&text, limits)?;
        Ok(Self(text))
    }

    /// The check of [`Self::parse`] on a borrowed text.
    pub fn check(text: &str, limits: &LimitsSettings) -> Result<(), ApiError> {
        let max = limits.max_text_bytes;
        if text.len() > max {
            return Err(ApiError::PayloadTooLarge(format!(
                "the text is {} bytes; the limit is {max} bytes (limits.max_text_bytes)",
                text.len()
            )));
        }
        Ok(())
    }

    /// A stored document's text: it passed the limit when it was written
    /// (a lower limit since must not make it unreadable).
    pub fn stored(text: String) -> Self {
        Self(text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// The path parameter `key` of the matched route, percent-decoded.
async fn path_param(parts: &mut Parts, key: &str) -> Result<Option<String>, ApiError> {
    let params = RawPathParams::from_request_parts(parts, &())
        .await
        .map_err(|e| ApiError::InvalidParameter(e.body_text()))?;
    Ok(params
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.to_owned()))
}

/// The collection a request is for, ready to serve it: 400 for a name that
/// cannot be one, 404 `collection-not-found`, 503 `collection-unavailable`
/// for a collection whose files could not be restored.
pub struct Coll(pub Arc<Collection>);

impl FromRequestParts<AppState> for Coll {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Self, ApiError> {
        let c = match path_param(parts, "name").await? {
            None => app.collections.default_collection(),
            Some(name) => {
                CollectionName::parse(&name)?;
                match app.collections.get(&name) {
                    Some(c) => c,
                    // With the redis backend: created through another node?
                    None => app
                        .collections
                        .find(&name)
                        .await?
                        .ok_or(ApiError::CollectionNotFound(name))?,
                }
            }
        };
        match c.status() {
            Status::Ready => Ok(Coll(c)),
            Status::Failed => Err(ApiError::CollectionUnavailable(c.name.to_string())),
            Status::Restoring => Err(ApiError::NotReady),
        }
    }
}

/// The `{name}` of a `/collections/{name}` route, checked (400 otherwise).
pub struct CollName(pub CollectionName);

impl<S: Send + Sync> FromRequestParts<S> for CollName {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let name = path_param(parts, "name")
            .await?
            .ok_or_else(|| ApiError::InvalidParameter("no collection name in the path".into()))?;
        Ok(CollName(CollectionName::parse(&name)?))
    }
}

/// The `{id}` of a document route, percent-decoded (not checked: reads of
/// an id that cannot exist answer 404, writes check it).
pub struct DocPath(pub String);

impl<S: Send + Sync> FromRequestParts<S> for DocPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        path_param(parts, "id")
            .await?
            .map(DocPath)
            .ok_or_else(|| ApiError::InvalidParameter("no document id in the path".into()))
    }
}

/// An RFC 3339 timestamp as milliseconds since the Unix epoch (negative
/// before 1970); `field` names it in the error (400 `invalid-parameter`,
/// or 422 `invalid-body` in a body: see the callers).
pub fn parse_time(field: &str, value: &str) -> Result<i64, String> {
    use time::format_description::well_known::Rfc3339;
    let t = time::OffsetDateTime::parse(value, &Rfc3339)
        .map_err(|e| format!("{field} {value:?} is not an RFC 3339 time ({e})"))?;
    // RFC 3339 years end at 9999, well inside i64 milliseconds.
    Ok((t.unix_timestamp_nanos() / 1_000_000) as i64)
}

/// A `since` bound as milliseconds since the epoch: a time before 1970
/// keeps every document.
pub fn parse_since(raw: &str) -> Result<u64, String> {
    parse_time("since", raw).map(|ms| u64::try_from(ms).unwrap_or(0))
}

/// True when an `Accept` header names `media` (with a non-zero q).
pub fn accepts(headers: &HeaderMap, media: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';');
            let name = parts.next().unwrap_or("").trim();
            let q_zero = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f64>().ok())
                    == Some(0.0)
            });
            name.eq_ignore_ascii_case(media) && !q_zero
        })
}

/// `Query` with problem+json rejections.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| ApiQuery(v))
            .map_err(|e| ApiError::InvalidParameter(e.body_text()))
    }
}

/// `Path` with problem+json rejections.
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(v)| ApiPath(v))
            .map_err(|e| ApiError::InvalidParameter(e.body_text()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types_are_recognized() {
        assert!(is_json_content_type("application/json"));
        assert!(is_json_content_type("application/json; charset=utf-8"));
        assert!(is_json_content_type("Application/JSON"));
        assert!(is_json_content_type("application/merge-patch+json"));
        assert!(!is_json_content_type("text/plain"));
        assert!(!is_json_content_type("application/x-www-form-urlencoded"));
    }

    #[test]
    fn json_errors_split_into_syntax_and_shape() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct T {
            text: String,
        }
        assert!(matches!(
            parse_json::<T>(b"{"),
            Err(ApiError::MalformedJson(_))
        ));
        assert!(matches!(
            parse_json::<T>(b"\xff"),
            Err(ApiError::MalformedJson(_))
        ));
        assert!(matches!(
            parse_json::<T>(br#"{"text": 5}"#),
            Err(ApiError::InvalidBody(_))
        ));
        assert!(matches!(
            parse_json::<T>(b"{}"),
            Err(ApiError::InvalidBody(_))
        ));
    }
}
