//! Operational routes: probes, stats, metrics, snapshots, the OpenAPI document.

use super::dto::format_time;
use super::dto::StatusOut;
use super::error::ApiError;
use super::extract::{accepts, Coll};
use super::state::AppState;
use crate::backend::SnapshotInfo;
use crate::collections::Collection;
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::IntoResponse;
use axum::Json;
use serde_json::{json, Value};

/// `GET /healthz`: the process is alive and serving HTTP.
pub async fn healthz() -> Json<StatusOut> {
    Json(StatusOut { status: "ok" })
}

/// `GET /readyz`: 200 once every collection is restored (or known to be
/// failed: `failed_collections` names them), 503 before and while
/// draining; with the redis backend, also 503 while the last check of the
/// cluster failed (a primary down, a slot without a serving primary:
/// `storage.redis.watch_interval_ms`).
pub async fn readyz(State(app): State<AppState>) -> Result<Json<Value>, ApiError> {
    if app.is_ready() && !app.collections.storage_healthy() {
        return Err(ApiError::StorageNotReady);
    }
    if app.is_ready() {
        let failed: Vec<String> = app
            .collections
            .list()
            .iter()
            .filter(|c| c.status() == crate::collections::Status::Failed)
            .map(|c| c.name.to_string())
            .collect();
        let mut body = json!({ "status": "ready" });
        if !failed.is_empty() {
            body["failed_collections"] = json!(failed);
        }
        Ok(Json(body))
    } else {
        Err(ApiError::NotReady)
    }
}

/// `GET /stats` and `/collections/{name}/stats`.
pub async fn stats(State(app): State<AppState>, Coll(coll): Coll) -> Result<Json<Value>, ApiError> {
    if let Some(backend) = coll.backend() {
        backend.refresh_documents().await?;
    }
    Ok(Json(stats_of(&app, &coll)))
}

/// The `/stats` body of `coll`.
pub fn stats_of(app: &AppState, coll: &Collection) -> Value {
    let engine = &coll.recipe();
    let p = engine.params();
    let b = engine.bands();
    let bp = engine.boilerplate_params();
    json!({
        "collection": coll.name,
        "documents": coll.documents(),
        "index": {
            "num_perm": p.index.num_perm,
            "seed": p.index.seed,
            "threshold": p.index.threshold,
            "bands": b.bands,
            "rows": b.rows,
            "recall_at_threshold": b.recall_at_threshold,
            "min_query_threshold": b.min_query_threshold,
            "max_candidates": p.index.max_candidates,
            "passage_index": coll.backend().is_some_and(|b| b.passage_index()),
            "passage_guaranteed_run": engine.passage_window(),
            "common_fingerprint_docs": p.index.common_fingerprint_docs,
            "boilerplate": {
                "enabled": coll.backend().is_some_and(|b| b.boilerplate_on()),
                "share": bp.share,
                "min_docs": bp.min_docs,
                "min_collection_docs": bp.min_collection_docs,
                "template_shingles": engine.template_shingles().len(),
            },
            "lsh_buckets": coll.backend().map_or(0, |b| b.lsh_buckets()),
            "hash_family": crate::engine::HASH_FAMILY,
        },
        "shingle": {
            "kind": p.shingle.kind.as_str(),
            "k": p.shingle.k,
            "multiset": p.shingle.multiset,
            "hash_bits": 32,
        },
        "normalize": p.normalize,
        "retention": {
            "ttl_secs": engine.retention().map(|d| d.as_secs()),
        },
        "storage": storage_stats(app, coll),
        "reindex": reindex_json(coll),
        "memory": coll.backend().and_then(|b| b.memory()).unwrap_or_default(),
        "uptime_seconds": app.started.elapsed().as_secs(),
        "version": env!("CARGO_PKG_VERSION"),
    })
}

/// `GET /metrics`: OpenMetrics when the client asks for it (Prometheus
/// does), else the Prometheus text format 0.0.4.
pub async fn metrics(State(app): State<AppState>, headers: HeaderMap) -> impl IntoResponse {
    let text = app.metrics.render(&app.collections, app.is_ready());
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
            crate::service::metrics::to_prometheus_text(&text),
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

fn storage_stats(app: &AppState, coll: &Collection) -> Value {
    coll.backend()
        .map_or(Value::Null, |b| b.storage_stats(&app.config.storage))
}

/// `POST /admin/snapshot`: write a snapshot of every collection now. The
/// top-level fields are the `default` collection's (as before there were
/// collections); `collections` lists every snapshot written.
pub async fn snapshot(State(app): State<AppState>) -> Result<Json<Value>, ApiError> {
    let written = app.snapshot_all().await?;
    let fields = |info: &SnapshotInfo| {
        json!({
            "path": info.path,
            "documents": info.documents,
            "bytes": info.bytes,
            "milliseconds": info.milliseconds,
        })
    };
    let mut body = written
        .iter()
        .find(|(c, _)| c.name.is_default())
        .map(|(_, info)| fields(info))
        .unwrap_or_else(|| json!({}));
    body["collections"] = written
        .iter()
        .map(|(c, info)| {
            let mut entry = json!({ "collection": c.name });
            if let (Some(e), Value::Object(f)) = (entry.as_object_mut(), fields(info)) {
                e.extend(f);
            }
            entry
        })
        .collect();
    Ok(Json(body))
}

/// A collection's last reindex, as `/stats` and `POST .../reindex` show it.
pub fn reindex_json(c: &Collection) -> Value {
    match c.reindex_progress() {
        None => Value::Null,
        Some(p) => json!({
            "state": p.state,
            "done": p.done,
            "total": p.total,
            "skipped": p.skipped,
            "started_at": format_time(p.started_ms),
            "finished_at": p.finished_ms.map(format_time),
            "error": p.error,
            "settings": {
                "shingle": p.settings.shingle,
                "normalize": p.settings.normalize,
                "index": p.settings.index,
            },
        }),
    }
}
