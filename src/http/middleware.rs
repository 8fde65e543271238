//! The layers around the routes, innermost last as `router` applies them:
//! request tracking (metrics), load shedding, access control (`auth.rs`),
//! the readiness gate; and, outside the routes, the problem+json layer that
//! gives every error a body with the request id, and the panic handler.

use super::error::{problem_for_status, ApiError, Problem, PROBLEM_JSON};
use super::routes::{collection_of, never_shed, refuses_query, served_while_restoring, REQUEST_ID};
use super::state::AppState;
use crate::service::metrics::HttpLabels;
use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::time::Instant;

/// The request's span: method, URI and request id only (no headers, so
/// never an Authorization key). Every log line of the request carries it.
pub fn request_span(req: &Request<Body>) -> tracing::Span {
    let request_id = req
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    tracing::info_span!(
        "request",
        method = %req.method(),
        uri = %req.uri(),
        request_id = %request_id,
        collection = collection_of(req.uri().path()).unwrap_or(""),
    )
}

/// Middleware: count and time every request by its route template.
pub async fn track(State(app): State<AppState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = req.method().as_str().to_owned();
    // Only collections that exist become label values: a client must not
    // grow the series without bound by naming random ones.
    let collection = collection_of(req.uri().path())
        .filter(|name| app.collections.get(name).is_some())
        .unwrap_or("")
        .to_owned();
    let start = Instant::now();
    let resp = next.run(req).await;
    let labels = HttpLabels {
        collection,
        route,
        method,
        status: resp.status().as_u16(),
    };
    app.metrics
        .observe_request(labels, start.elapsed().as_secs_f64());
    resp
}

/// Until recovery finishes, answer everything but the probes with 503.
pub async fn until_restored(
    axum::extract::State(app): axum::extract::State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    if !app.is_restored() && !served_while_restoring(req.uri().path()) {
        return ApiError::NotReady.into_response();
    }
    next.run(req).await
}

/// Refuse a request at once with 503 (and `Retry-After: 1`) when
/// `server.max_concurrent_requests` are already in flight. The permit is
/// held until the handler has answered (reading the body included).
pub async fn shed_load(
    axum::extract::State(app): axum::extract::State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    if never_shed(req.uri().path()) {
        return next.run(req).await;
    }
    let Ok(_permit) = app.inflight.try_acquire() else {
        app.metrics.observe_shed();
        return ApiError::Overloaded(app.config.server.max_concurrent_requests).into_response();
    };
    next.run(req).await
}

/// Middleware: a route that takes no query parameters answers 400
/// `invalid-parameter` to a request with some (`routes::refuses_query`),
/// as the others do for a parameter they do not know.
pub async fn refuse_stray_query(req: Request, next: Next) -> Response {
    let query = req.uri().query().filter(|q| !q.is_empty());
    let route = req.extensions().get::<MatchedPath>();
    if let (Some(query), Some(route)) = (query, route) {
        if refuses_query(req.method().as_str(), route.as_str()) {
            let names: Vec<&str> = query
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| p.split('=').next().unwrap_or(p))
                .collect();
            return ApiError::InvalidParameter(format!(
                "{} {} takes no query parameters (got {})",
                req.method(),
                route.as_str(),
                names.join(", ")
            ))
            .into_response();
        }
    }
    next.run(req).await
}

pub async fn not_found(req: Request) -> ApiError {
    ApiError::RouteNotFound(format!("{} {}", req.method(), req.uri().path()))
}

/// A handler panicked: log the payload (inside the request span) and
/// answer a generic 500.
pub fn panic_response(payload: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    ApiError::Internal(format!("handler panicked: {message}")).into_response()
}

/// Give every error response a problem+json body carrying the request id:
/// ours (the `Problem` rides in the response extensions) get the id added;
/// those produced outside our handlers (405 from the router, the timeout)
/// get a problem for their status.
pub async fn problem_bodies(req: Request, next: Next) -> Response {
    let request_id = req
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let resp = next.run(req).await;
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let mut problem = match parts.extensions.remove::<Problem>() {
        Some(problem) => problem,
        None => {
            if status == StatusCode::SERVICE_UNAVAILABLE {
                tracing::warn!("request ran over server.request_timeout_secs; answered 503");
            }
            drop(body);
            problem_for_status(status)
        }
    };
    problem.request_id = request_id;
    parts.headers.remove(header::CONTENT_LENGTH);
    parts
        .headers
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    if status == StatusCode::SERVICE_UNAVAILABLE && !parts.headers.contains_key(header::RETRY_AFTER)
    {
        parts
            .headers
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    let body = serde_json::to_vec(&problem).unwrap_or_default();
    Response::from_parts(parts, Body::from(body))
}
