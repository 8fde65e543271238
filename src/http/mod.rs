//! The HTTP layer: routes, the layers around them, the request-serving
//! state, and the mapping of core errors to problem+json. The only module
//! that imports axum and tower-http; it depends on the core (`engine`),
//! `persist` and `config`, and nothing below it depends on it.

mod analysis;
pub mod auth;
mod boilerplate;
mod collections;
mod documents;
pub mod dto;
pub mod duplicates;
pub mod error;
mod events;
mod explain;
pub mod extract;
mod filters;
mod middleware;
pub mod openapi;
mod ops;
mod passages;
mod review;
mod review_queue;
mod routes;
mod similar;
mod snippets;
pub mod state;
mod transfer;
pub mod ui;
mod webhooks;

pub use state::AppState;

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::middleware::from_fn;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use axum::Router;
use std::time::Duration;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::{DefaultOnFailure, TraceLayer};

pub use routes::{
    is_open, never_shed, reads_by_post, refuses_query, served_while_restoring, SpecialRoute,
    COLLECTION_ROUTES, MANAGEMENT_ROUTES, QUERY_ROUTES, READ_POSTS, ROUTES, SPECIAL_ROUTES,
    UI_ROUTES,
};

/// Serve `state`'s router on `listener` until `shutdown` resolves, then
/// stop accepting and let in-flight requests finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}

/// The routes of one collection (the handlers find the collection with
/// the `Coll` extractor: `default` when there is no `{name}`).
fn collection_routes() -> Router<AppState> {
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
        .route("/explain", post(explain::explain))
        .route("/passages", post(passages::lookup))
        .route("/snippets", post(snippets::snippets))
        .route("/templates", get(boilerplate::list))
        .route(
            "/templates/{id}",
            get(boilerplate::get)
                .put(boilerplate::put)
                .delete(boilerplate::delete),
        )
        .route("/boilerplate", get(boilerplate::common))
        .route("/analysis/histogram", post(analysis::histogram))
        .route("/analysis/accuracy", post(analysis::accuracy))
        .route("/duplicates", get(duplicates::groups))
        .route("/duplicates/pairs", get(duplicates::pairs))
        .route("/duplicates/drop-list", get(duplicates::drop_list))
        .route("/stats", get(ops::stats))
        .route("/export", get(transfer::export))
        .route("/import", post(transfer::import))
        .route("/webhooks", get(webhooks::list).post(webhooks::create))
        .route(
            "/webhooks/{id}",
            get(webhooks::get).delete(webhooks::delete),
        )
        .route("/webhooks/{id}/failed", get(webhooks::failed))
        .route("/webhooks/{id}/failed/retry", post(webhooks::retry))
        .route("/events", get(events::feed))
        .route("/review/queue", get(review_queue::queue))
        .route("/review/precision", get(review_queue::precision))
        .route("/review/decisions", get(review::list).put(review::put))
        .route("/review/decision", get(review::get).delete(review::delete))
}

/// The application router with every layer applied.
pub fn router(state: AppState) -> Router {
    let settings = &state.config.server;
    let timeout = Duration::from_secs(settings.request_timeout_secs);
    let body_limit = settings.max_body_bytes;
    let console = if state.config.ui.enabled {
        Router::new()
            .route("/", get(ui::root))
            .route("/ui", get(ui::redirect))
            .route("/ui/", get(ui::index))
            .route("/ui/{*path}", get(ui::file))
    } else {
        Router::new()
    };
    Router::new()
        .merge(collection_routes())
        .merge(console)
        .nest("/collections/{name}", collection_routes())
        .route("/collections", get(collections::list))
        .route(
            "/collections/{name}",
            get(collections::show)
                .put(collections::put)
                .patch(collections::patch)
                .delete(collections::delete),
        )
        .route("/collections/{name}/reindex", post(collections::reindex))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .route("/openapi.json", get(ops::openapi))
        .route("/admin/snapshot", post(ops::snapshot))
        .fallback(middleware::not_found)
        // A query string on a route that takes none is refused, not ignored.
        .layer(from_fn(middleware::refuse_stray_query))
        // Innermost: a panicking handler is a logged, generic 500, and a
        // handler over server.request_timeout_secs a 503; both inside the
        // tracking layer, so they are counted like every other answer.
        .layer(CatchPanicLayer::custom(middleware::panic_response))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            timeout,
        ))
        .layer(from_fn_with_state(
            state.clone(),
            middleware::until_restored,
        ))
        // Outside the readiness gate (a request without a key learns
        // nothing, not even readiness), inside metrics (401/403 are counted).
        .layer(from_fn_with_state(state.clone(), auth::require_key))
        // Inside metrics, so shed requests are counted as 503s too.
        .layer(from_fn_with_state(state.clone(), middleware::shed_load))
        .layer(from_fn_with_state(state.clone(), middleware::track))
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(state)
        .layer(
            // Outermost first. The request id is set before anything else
            // sees the request, the span carries it (so every log line of
            // the request names it), and the error layer adds it to every
            // problem body. The span's own failure events are debug-level:
            // a 5xx's cause is logged where it happens, and a 503 while
            // restoring or shedding is not an error.
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
                .layer(
                    TraceLayer::new_for_http()
                        .make_span_with(middleware::request_span)
                        .on_failure(DefaultOnFailure::new().level(tracing::Level::DEBUG)),
                )
                .layer(PropagateRequestIdLayer::x_request_id())
                .layer(from_fn(middleware::problem_bodies)),
        )
}
