//! [`AppState`]: what every request handler shares, as a cheap-to-clone
//! handle (`Arc` inside, as axum's examples and mini-redis do).

use super::error::ApiError;
use super::extract::Text;
use super::openapi::ApiDocs;
use crate::backend::{Backend, SnapshotInfo};
use crate::collections::{Collection, Collections};
use crate::config::Config;
use crate::engine::{EngineError, Prepared};
use crate::service::metrics::Metrics;
use crate::service::scans::ScanScheduler;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Texts longer than this are prepared on a blocking thread, so one huge
/// document never stalls the async workers.
pub(crate) const INLINE_PREPARE_BYTES: usize = 16 * 1024;

/// The request-serving state: a cheap-to-clone handle.
#[derive(Clone)]
pub struct AppState(Arc<AppInner>);

pub struct AppInner {
    /// Every collection (the one owner; see `collections`). `Arc` so
    /// blocking tasks (restore, snapshots, purges) can own a handle.
    pub collections: Arc<Collections>,
    /// The validated configuration the server started with.
    pub config: Config,
    /// The Prometheus registry (one per server, so tests run many); `Arc`
    /// so detached scans and snapshots can record into it.
    pub metrics: Arc<Metrics>,
    /// False until every collection is restored (or failed), and again
    /// while draining: what `/readyz` answers. An atomic: written a few
    /// times, read per probe.
    ready: AtomicBool,
    /// True once the start's restore has finished; until then every route
    /// but the probes answers 503 `not-ready`.
    restored: AtomicBool,
    /// One permit per request in flight (`server.max_concurrent_requests`);
    /// the shedding layer takes one without waiting or answers 503.
    pub inflight: tokio::sync::Semaphore,
    /// When the server started (`/stats` `uptime_seconds`).
    pub started: Instant,
    /// Whole-index duplicate scans: one at a time, and their page cache;
    /// `Arc` so a scan task outlives the request that started it.
    pub scans: Arc<ScanScheduler>,
    /// The OpenAPI document with this deployment's values, rendered once.
    pub docs: ApiDocs,
    /// Events of writes and the webhook subscriptions' cache (issue 45);
    /// shared with the delivery task.
    pub events: Arc<crate::service::events::EventHub>,
}

impl Deref for AppState {
    type Target = AppInner;
    fn deref(&self) -> &AppInner {
        &self.0
    }
}

impl AppState {
    pub fn new(config: Config, collections: Arc<Collections>) -> Self {
        let inflight = tokio::sync::Semaphore::new(config.server.max_concurrent_requests);
        let docs = ApiDocs::new(&config, config.engine().bands().min_query_threshold);
        let metrics = Arc::new(Metrics::default());
        let events = Arc::new(crate::service::events::EventHub::new(
            config.events.max_matches,
            Arc::clone(&metrics),
        ));
        Self(Arc::new(AppInner {
            collections,
            config,
            events,
            metrics,
            ready: AtomicBool::new(false),
            restored: AtomicBool::new(false),
            inflight,
            started: Instant::now(),
            scans: Arc::new(ScanScheduler::new()),
            docs,
        }))
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// True once the start's restore has finished.
    pub fn is_restored(&self) -> bool {
        self.restored.load(Ordering::Acquire)
    }

    /// The start's restore has finished: serve every route, and be ready.
    pub fn mark_restored(&self) {
        self.restored.store(true, Ordering::Release);
        self.set_ready(true);
    }

    /// Snapshot every collection that changed since its last snapshot (off
    /// the async workers, in a task of its own so a request that stops
    /// waiting does not stop it), recording the metrics; returns what was
    /// written, collection by collection.
    pub async fn snapshot_changed(&self) -> Result<Vec<(Arc<Collection>, SnapshotInfo)>, ApiError> {
        self.snapshot_where(true).await
    }

    /// Snapshot every collection now (`POST /admin/snapshot`).
    pub async fn snapshot_all(&self) -> Result<Vec<(Arc<Collection>, SnapshotInfo)>, ApiError> {
        self.snapshot_where(false).await
    }

    async fn snapshot_where(
        &self,
        only_if_changed: bool,
    ) -> Result<Vec<(Arc<Collection>, SnapshotInfo)>, ApiError> {
        Ok(
            crate::service::snapshots::snapshot(&self.collections, &self.metrics, only_if_changed)
                .await?,
        )
    }

    /// Prepare a text (checked against `limits.max_text_bytes` by its
    /// type) by `collection`'s recipe, off the async workers when it is large.
    pub async fn prepare(&self, collection: &Collection, text: Text) -> Result<Prepared, ApiError> {
        let text = text.into_string();
        if text.len() <= INLINE_PREPARE_BYTES {
            return Ok(collection
                .recipe()
                .prepare(&text)
                .map_err(EngineError::from)?);
        }
        let engine = collection.recipe().clone();
        tokio::task::spawn_blocking(move || engine.prepare(&text))
            .await
            .map_err(|e| ApiError::Internal(format!("prepare task failed: {e}")))?
            .map_err(|e| EngineError::from(e).into())
    }
}

/// The backend of a collection the `Coll` extractor found ready (503
/// `collection-unavailable` if it is not: a collection that failed).
pub fn backend(collection: &Collection) -> Result<&Backend, ApiError> {
    collection
        .backend()
        .ok_or_else(|| ApiError::CollectionUnavailable(collection.name.to_string()))
}
