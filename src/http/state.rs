//! [`AppState`]: what every request handler shares, as a cheap-to-clone
//! handle (`Arc` inside, as axum's examples and mini-redis do).

use super::error::ApiError;
use super::extract::Text;
use super::metrics::Metrics;
use super::openapi::ApiDocs;
use super::scans::ScanScheduler;
use crate::config::Config;
use crate::engine::{Engine, EngineError, Prepared};
use crate::persist::{SnapshotInfo, Store};
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// Texts longer than this are prepared on a blocking thread, so one huge
/// document never stalls the async workers.
const INLINE_PREPARE_BYTES: usize = 16 * 1024;

/// The request-serving state: a cheap-to-clone handle.
#[derive(Clone)]
pub struct AppState(Arc<AppInner>);

pub struct AppInner {
    /// The index. Readers use it directly (it is internally synchronized);
    /// writers go through `store` so every write is logged first. `Arc`
    /// so blocking tasks can own a handle.
    pub engine: Arc<Engine>,
    /// The durable write path, set once by the recovery task (`app.rs`);
    /// until then every route but the probes answers 503 `not-ready`.
    /// A `OnceLock`: set once, then read without a lock.
    store: OnceLock<Arc<Store>>,
    /// The validated configuration the server started with.
    pub config: Config,
    /// The Prometheus registry (one per server, so tests run many); `Arc`
    /// so detached scans can record into it.
    pub metrics: Arc<Metrics>,
    /// False until the index is restored, and again while draining:
    /// what `/readyz` answers. An atomic: written twice, read per probe.
    ready: AtomicBool,
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
}

impl Deref for AppState {
    type Target = AppInner;
    fn deref(&self) -> &AppInner {
        &self.0
    }
}

impl AppState {
    pub fn new(config: Config) -> Self {
        let engine = Engine::new(config.engine().clone());
        let inflight = tokio::sync::Semaphore::new(config.server.max_concurrent_requests);
        let docs = ApiDocs::new(&config, engine.bands().min_query_threshold);
        Self(Arc::new(AppInner {
            engine: Arc::new(engine),
            store: OnceLock::new(),
            config,
            metrics: Arc::new(Metrics::default()),
            ready: AtomicBool::new(false),
            inflight,
            started: Instant::now(),
            scans: Arc::new(ScanScheduler::new()),
            docs,
        }))
    }

    /// The store, once recovery has finished; 503 before.
    pub fn store(&self) -> Result<&Arc<Store>, ApiError> {
        self.store.get().ok_or(ApiError::NotReady)
    }

    /// The store if recovery has finished (no error to answer with).
    pub fn store_if_open(&self) -> Option<&Arc<Store>> {
        self.store.get()
    }

    /// Recovery has finished: writes are served from now on.
    pub fn open_store(&self, store: Arc<Store>) {
        let _ = self.store.set(store);
    }

    /// Run a durable write on a blocking thread (it may wait for an fsync).
    pub async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, EngineError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let store = Arc::clone(self.store()?);
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| ApiError::Internal(format!("write task failed: {e}")))?
            .map_err(ApiError::from)
    }

    /// Snapshot now (off the async workers), recording the metrics.
    pub async fn snapshot(&self) -> Result<SnapshotInfo, ApiError> {
        let store = Arc::clone(self.store()?);
        let info = tokio::task::spawn_blocking(move || store.snapshot())
            .await
            .map_err(|e| ApiError::Internal(format!("snapshot task failed: {e}")))?
            .map_err(|e| ApiError::Internal(format!("snapshot failed: {e}")))?;
        self.metrics.observe_snapshot(&info);
        Ok(info)
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// Prepare a text (checked against `limits.max_text_bytes` by its
    /// type), off the async workers when it is large.
    pub async fn prepare(&self, text: Text) -> Result<Prepared, ApiError> {
        let text = text.into_string();
        if text.len() <= INLINE_PREPARE_BYTES {
            return Ok(self.engine.prepare(&text).map_err(EngineError::from)?);
        }
        let engine = Arc::clone(&self.engine);
        tokio::task::spawn_blocking(move || engine.prepare(&text))
            .await
            .map_err(|e| ApiError::Internal(format!("prepare task failed: {e}")))?
            .map_err(|e| EngineError::from(e).into())
    }
}
