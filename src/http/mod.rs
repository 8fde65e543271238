//! The HTTP layer: routes, middleware, and the mapping of core errors to
//! problem+json. The only module that imports axum and tower-http.

pub mod auth;
mod documents;
pub mod dto;
pub mod duplicates;
pub mod error;
pub mod extract;
pub mod metrics;
pub mod openapi;
mod ops;
mod similar;

use crate::app::AppState;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use error::{problem_for_status, ApiError, Problem, PROBLEM_JSON};
use std::time::Duration;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

/// The request id header, set (or kept) by the outermost layer.
const REQUEST_ID: &str = "x-request-id";

/// Every (method, path template) the router serves. `openapi.yaml` must
/// list exactly these; the integration tests check both directions.
pub const ROUTES: &[(&str, &str)] = &[
    ("POST", "/documents"),
    ("POST", "/documents/batch"),
    ("GET", "/documents/{id}"),
    ("PUT", "/documents/{id}"),
    ("DELETE", "/documents/{id}"),
    ("GET", "/similar"),
    ("POST", "/similar"),
    ("GET", "/compare"),
    ("GET", "/duplicates"),
    ("GET", "/duplicates/pairs"),
    ("GET", "/stats"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
    ("POST", "/admin/snapshot"),
];

/// Routes served while the index is still being restored.
const ALWAYS_SERVED: &[&str] = &["/healthz", "/readyz", "/metrics", "/openapi.json"];

/// Answered even when `server.max_concurrent_requests` are in flight: the
/// probes, and the metrics that show the shedding while it happens.
const NEVER_SHED: &[&str] = &["/healthz", "/readyz", "/metrics"];

/// The application router with every layer applied.
pub fn router(state: AppState) -> Router {
    let settings = &state.settings.server;
    let timeout = Duration::from_secs(settings.request_timeout_secs);
    let body_limit = settings.max_body_bytes;
    Router::new()
        .route("/documents", post(documents::create))
        .route("/documents/batch", post(documents::batch))
        .route(
            "/documents/{id}",
            get(documents::get)
                .put(documents::put)
                .delete(documents::delete),
        )
        .route("/similar", get(similar::by_id).post(similar::by_text))
        .route("/compare", get(similar::compare))
        .route("/duplicates", get(duplicates::groups))
        .route("/duplicates/pairs", get(duplicates::pairs))
        .route("/stats", get(ops::stats))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .route("/openapi.json", get(ops::openapi))
        .route("/admin/snapshot", post(ops::snapshot))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            until_restored,
        ))
        // Outside the readiness gate (a request without a key learns
        // nothing, not even readiness), inside metrics (401/403 are counted).
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_key,
        ))
        // Inside metrics, so shed requests are counted as 503s too.
        .layer(middleware::from_fn_with_state(state.clone(), shed_load))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            metrics::track,
        ))
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(state)
        .layer(
            // Outermost first. The request id is set before anything else
            // sees the request, the span carries it (so every log line of
            // the request names it), and the error layer adds it to every
            // problem body, the panic and timeout answers inside it included.
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
                .layer(
                    // The span names method, URI and request id only: no
                    // headers, so never an Authorization key.
                    TraceLayer::new_for_http().make_span_with(|req: &Request<Body>| {
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
                        )
                    }),
                )
                .layer(PropagateRequestIdLayer::x_request_id())
                .layer(middleware::from_fn(problem_bodies))
                .layer(CatchPanicLayer::custom(panic_response))
                .layer(TimeoutLayer::with_status_code(
                    StatusCode::SERVICE_UNAVAILABLE,
                    timeout,
                )),
        )
}

/// Until recovery finishes, answer everything but the probes with 503.
async fn until_restored(
    axum::extract::State(app): axum::extract::State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    if app.store().is_err() && !ALWAYS_SERVED.contains(&req.uri().path()) {
        return ApiError::NotReady.into_response();
    }
    next.run(req).await
}

/// Refuse a request at once with 503 (and `Retry-After: 1`) when
/// `server.max_concurrent_requests` are already in flight. The permit is
/// held until the handler has answered (reading the body included).
async fn shed_load(
    axum::extract::State(app): axum::extract::State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    if NEVER_SHED.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    let Ok(_permit) = app.inflight.try_acquire() else {
        app.metrics.observe_shed();
        return ApiError::Overloaded(app.settings.server.max_concurrent_requests).into_response();
    };
    next.run(req).await
}

async fn not_found(req: Request) -> ApiError {
    ApiError::RouteNotFound(format!("{} {}", req.method(), req.uri().path()))
}

/// A handler panicked: log the payload (inside the request span) and
/// answer a generic 500.
fn panic_response(payload: Box<dyn std::any::Any + Send + 'static>) -> Response {
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
async fn problem_bodies(req: Request, next: Next) -> Response {
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
