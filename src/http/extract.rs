//! Extractors whose rejections are our problem+json errors.
//!
//! [`JsonBody`] checks the Content-Type and buffers the body (under the
//! router's body limit) without parsing it, so handlers choose where parsing
//! runs: inline for small bodies, on a blocking thread for batches.
//! [`parse_json`] maps serde errors: syntax → 400, shape → 422.

use super::error::ApiError;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::error::Category;

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
        // at all is a 400 even if a shape error came first.
        match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
            Err(syntax) => json_error(syntax),
            Ok(_) => json_error(e),
        }
    })?;
    require_object(bytes)?;
    Ok(value)
}

/// 422 unless the JSON text is an object (syntax was checked by the caller).
pub fn require_object(json: &[u8]) -> Result<(), ApiError> {
    match json.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => Ok(()),
        _ => Err(ApiError::InvalidBody(
            "the body must be a JSON object".into(),
        )),
    }
}

pub fn json_error(e: serde_json::Error) -> ApiError {
    match e.classify() {
        Category::Data => ApiError::InvalidBody(format!("the body does not match the schema: {e}")),
        Category::Syntax | Category::Eof | Category::Io => {
            ApiError::MalformedJson(format!("the body is not valid JSON: {e}"))
        }
    }
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
