//! Operational routes: probes, stats, metrics.

use super::dto::StatusOut;
use super::error::ApiError;
use super::extract::accepts;
use super::state::AppState;
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::IntoResponse;
use axum::Json;
use serde_json::{json, Value};

/// `GET /healthz`: the process is alive and serving HTTP.
pub async fn healthz() -> Json<StatusOut> {
    Json(StatusOut { status: "ok" })
}

/// `GET /readyz`: 200 once the index is loaded, 503 before and while draining.
pub async fn readyz(State(app): State<AppState>) -> Result<Json<StatusOut>, ApiError> {
    if app.is_ready() {
        Ok(Json(StatusOut { status: "ready" }))
    } else {
        Err(ApiError::NotReady)
    }
}

/// `GET /stats`.
pub async fn stats(State(app): State<AppState>) -> Json<Value> {
    let engine = &app.engine;
    let p = engine.params();
    let b = engine.bands();
    Json(json!({
        "documents": engine.len(),
        "index": {
            "num_perm": p.index.num_perm,
            "seed": p.index.seed,
            "threshold": p.index.threshold,
            "bands": b.bands,
            "rows": b.rows,
            "recall_at_threshold": b.recall_at_threshold,
            "min_query_threshold": b.min_query_threshold,
            "max_candidates": p.index.max_candidates,
            "lsh_buckets": engine.lsh_bucket_count(),
            "hash_family": crate::engine::HASH_FAMILY,
        },
        "shingle": {
            "kind": p.shingle.kind.as_str(),
            "k": p.shingle.k,
            "multiset": p.shingle.multiset,
            "hash_bits": 32,
        },
        "normalize": p.normalize,
        "storage": storage_stats(&app),
        "memory": engine.memory(),
        "uptime_seconds": app.started.elapsed().as_secs(),
        "version": env!("CARGO_PKG_VERSION"),
    }))
}

/// `GET /metrics`: OpenMetrics when the client asks for it (Prometheus
/// does), else the Prometheus text format 0.0.4.
pub async fn metrics(State(app): State<AppState>, headers: HeaderMap) -> impl IntoResponse {
    let text = app
        .metrics
        .render(&app.engine, app.store().ok().map(|s| &**s));
    if accepts(&headers, OPENMETRICS) {
        (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
    } else {
        (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            super::metrics::to_prometheus_text(&text),
        )
    }
}

const OPENMETRICS: &str = "application/openmetrics-text";

/// `GET /openapi.json`: the OpenAPI document with this deployment's values.
pub async fn openapi(State(app): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        app.docs.json.clone(),
    )
}

fn storage_stats(app: &AppState) -> Value {
    let storage = &app.config.storage;
    // `/stats` is answered only once the store is open (see `until_restored`).
    let Ok(store) = app.store() else {
        return Value::Null;
    };
    let wal = store.wal();
    let c = &wal.counters;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    json!({
        "data_dir": store.data_dir(),
        "wal_fsync": wal.mode().as_str(),
        "wal_fsync_interval_ms": storage.wal_fsync_interval_ms,
        "wal_bytes": wal.bytes(),
        "wal_next_lsn": wal.next_lsn(),
        "wal_appends": load(&c.appends),
        "wal_fsyncs": load(&c.fsyncs),
        "snapshot_interval_secs": storage.snapshot_interval_secs,
        "snapshots_keep": storage.snapshots_keep,
        "last_snapshot": store.last_snapshot(),
        "recovery": store.recovery,
    })
}

/// `POST /admin/snapshot`: write a snapshot now.
pub async fn snapshot(State(app): State<AppState>) -> Result<Json<Value>, ApiError> {
    let info = app.snapshot().await?;
    Ok(Json(json!({
        "path": info.path,
        "documents": info.documents,
        "bytes": info.bytes,
        "milliseconds": info.milliseconds,
    })))
}
