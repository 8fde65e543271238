//! Build the service, then run it until told to stop.
//!
//! [`App::build`] does everything fallible (validate settings, create the
//! engine, bind the socket) so `main` can report a clear error before
//! serving; [`App::run_until_stopped`] takes the shutdown future as an
//! argument so tests pass their own.

use crate::config::Settings;
use crate::engine::{Engine, EngineError, Prepared};
use crate::http::{self, error::ApiError, metrics::Metrics};
use crate::persist::{SnapshotInfo, Store};
use anyhow::Context;
use std::fs::File;
use std::future::Future;
use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// Texts longer than this are prepared on a blocking thread, so one huge
/// document never stalls the async workers.
const INLINE_PREPARE_BYTES: usize = 16 * 1024;

/// Shared state: a cheap-to-clone handle.
#[derive(Clone)]
pub struct AppState(Arc<AppInner>);

pub struct AppInner {
    /// The index; `Arc` so blocking tasks can own a handle.
    pub engine: Arc<Engine>,
    /// The durable write path; set once recovery has finished.
    store: OnceLock<Arc<Store>>,
    pub settings: Settings,
    pub metrics: Metrics,
    /// False until the index is loaded, and again while draining.
    ready: AtomicBool,
    /// One permit per request in flight (`server.max_concurrent_requests`).
    pub inflight: tokio::sync::Semaphore,
    pub started: Instant,
    /// Whole-index scans for `/duplicates`.
    pub dedup: http::duplicates::DedupState,
    /// The OpenAPI document with this deployment's values, rendered once.
    pub docs: http::openapi::ApiDocs,
}

impl Deref for AppState {
    type Target = AppInner;
    fn deref(&self) -> &AppInner {
        &self.0
    }
}

impl AppState {
    pub fn new(settings: Settings) -> anyhow::Result<Self> {
        let params = settings.validate()?;
        let engine = Engine::new(params).context("invalid index parameters")?;
        let inflight = tokio::sync::Semaphore::new(settings.server.max_concurrent_requests);
        let docs = http::openapi::ApiDocs::new(&settings, engine.band_params().min_query_threshold);
        Ok(Self(Arc::new(AppInner {
            engine: Arc::new(engine),
            store: OnceLock::new(),
            settings,
            metrics: Metrics::default(),
            ready: AtomicBool::new(false),
            inflight,
            started: Instant::now(),
            dedup: http::duplicates::DedupState::new(),
            docs,
        })))
    }

    /// The store, once recovery has finished; 503 before.
    pub fn store(&self) -> Result<&Arc<Store>, ApiError> {
        self.store.get().ok_or(ApiError::NotReady)
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

    /// A query `limit`, defaulted and checked against `query.max_limit`.
    pub fn limit(&self, limit: Option<usize>) -> Result<usize, ApiError> {
        let q = &self.settings.query;
        match limit {
            None => Ok(q.default_limit),
            Some(n) if (1..=q.max_limit).contains(&n) => Ok(n),
            Some(n) => Err(ApiError::InvalidParameter(format!(
                "limit must be between 1 and {} (query.max_limit), got {n}",
                q.max_limit
            ))),
        }
    }

    /// 413 when `text` is over `limits.max_text_bytes`.
    pub fn check_text(&self, text: &str) -> Result<(), ApiError> {
        let max = self.settings.limits.max_text_bytes;
        if text.len() > max {
            return Err(ApiError::PayloadTooLarge(format!(
                "the text is {} bytes; the limit is {max} bytes (limits.max_text_bytes)",
                text.len()
            )));
        }
        Ok(())
    }

    /// Prepare a text, off the async workers when it is large.
    pub async fn prepare(&self, text: String) -> Result<Prepared, ApiError> {
        if text.len() <= INLINE_PREPARE_BYTES {
            return Ok(self
                .engine
                .prepare(&text)
                .map_err(crate::engine::EngineError::from)?);
        }
        let engine = Arc::clone(&self.engine);
        tokio::task::spawn_blocking(move || engine.prepare(&text))
            .await
            .map_err(|e| ApiError::Internal(format!("prepare task failed: {e}")))?
            .map_err(|e| crate::engine::EngineError::from(e).into())
    }
}

pub struct App {
    listener: TcpListener,
    state: AppState,
    /// Held for the process lifetime: two servers on one data dir would
    /// interleave their logs.
    _dir_lock: File,
}

/// Take an exclusive lock on `data_dir/LOCK`.
fn lock_data_dir(dir: &std::path::Path) -> anyhow::Result<File> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create storage.data_dir {}", dir.display()))?;
    let path = dir.join("LOCK");
    let file = File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "{} is locked: another neardup process is using storage.data_dir {}",
            path.display(),
            dir.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

impl App {
    /// Validate settings, build the engine and bind the listener.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let addr = settings.bind_addr()?;
        let dir_lock = lock_data_dir(&settings.storage.data_dir)?;
        let state = AppState::new(settings)?;
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let auth = &state.settings.auth;
        if auth.enabled() {
            tracing::info!(
                api_keys = auth.api_keys.len(),
                read_only_keys = auth.read_only_keys.len(),
                protect_metrics = auth.protect_metrics,
                "access control on: requests need Authorization: Bearer <key>"
            );
        } else {
            tracing::warn!(
                "no auth.api_keys or auth.read_only_keys configured: the API is open to anyone who can reach it"
            );
        }
        let b = state.engine.band_params();
        tracing::info!(
            addr = %listener.local_addr()?,
            num_perm = state.engine.params().num_perm,
            threshold = state.engine.params().threshold,
            bands = b.bands,
            rows = b.rows,
            recall_at_threshold = b.recall_at_threshold,
            "neardup listening"
        );
        Ok(Self {
            listener,
            state,
            _dir_lock: dir_lock,
        })
    }

    /// The bound address (the real port when configured with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    pub fn state(&self) -> AppState {
        self.state.clone()
    }

    /// Recover the index in the background (the socket already answers
    /// `/healthz`; `/readyz` says 503 until recovery is done), serve until
    /// `shutdown` resolves, drain in-flight requests for up to
    /// `server.shutdown_grace_secs`, then write a final snapshot (unless
    /// nothing was written since the last one).
    /// A recovery failure stops the server and is returned.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let state = self.state.clone();
        let grace = Duration::from_secs(state.settings.server.shutdown_grace_secs);
        let router = http::router(state.clone());
        let (fatal_tx, fatal_rx) = tokio::sync::oneshot::channel::<anyhow::Error>();
        let recovery = tokio::spawn(recover(state.clone(), fatal_tx));

        let (draining_tx, draining_rx) = tokio::sync::oneshot::channel::<()>();
        let fatal: Arc<std::sync::Mutex<Option<anyhow::Error>>> = Default::default();
        let fatal_slot = Arc::clone(&fatal);
        let drain_state = state.clone();
        let serve = axum::serve(self.listener, router).with_graceful_shutdown(async move {
            tokio::select! {
                _ = shutdown => {}
                Ok(e) = fatal_rx => {
                    *fatal_slot.lock().expect("fatal slot") = Some(e);
                }
            }
            drain_state.set_ready(false);
            tracing::info!("shutdown requested; draining in-flight requests");
            let _ = draining_tx.send(());
        });
        tokio::select! {
            result = serve => result.context("server error")?,
            _ = async {
                if draining_rx.await.is_ok() {
                    tokio::time::sleep(grace).await;
                } else {
                    std::future::pending::<()>().await;
                }
            } => tracing::warn!(grace_secs = grace.as_secs(), "grace period elapsed; closing remaining connections"),
        }
        recovery.abort();
        if let Some(e) = fatal.lock().expect("fatal slot").take() {
            return Err(e);
        }
        let changed = state.store.get().map(|s| s.changed_since_snapshot());
        if changed == Some(false) {
            tracing::info!("nothing written since the last snapshot; no final snapshot needed");
        }
        if changed == Some(true) {
            match state.snapshot().await {
                Ok(info) => {
                    tracing::info!(documents = info.documents, path = %info.path.display(), "final snapshot written")
                }
                Err(e) => {
                    tracing::error!(error = %e, "final snapshot failed; the log still holds every write")
                }
            }
        }
        tracing::info!(documents = state.engine.len(), "stopped");
        Ok(())
    }
}

/// Load the stored state, then mark the app ready and start the snapshot timer.
async fn recover(state: AppState, fatal: tokio::sync::oneshot::Sender<anyhow::Error>) {
    let engine = Arc::clone(&state.engine);
    let storage = state.settings.storage.clone();
    let opened = tokio::task::spawn_blocking(move || Store::open(engine, &storage)).await;
    let store = match opened {
        Ok(Ok(store)) => store,
        Ok(Err(e)) => {
            tracing::error!(error = %e, "cannot restore the stored index; refusing to start");
            let _ = fatal.send(anyhow::Error::new(e).context("cannot restore the stored index"));
            return;
        }
        Err(e) => {
            let _ = fatal.send(anyhow::anyhow!("recovery task failed: {e}"));
            return;
        }
    };
    let r = &store.recovery;
    tracing::info!(
        documents = r.documents,
        snapshot = r.snapshot.as_ref().map(|p| p.display().to_string()),
        replayed_records = r.replayed_records,
        torn_bytes_dropped = r.torn_bytes_dropped,
        seconds = r.seconds,
        "index restored; ready"
    );
    let _ = state.store.set(Arc::new(store));
    state.set_ready(true);
    let every = state.settings.storage.snapshot_interval_secs;
    if every == 0 {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_secs(every));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await; // the first tick is immediate
    loop {
        tick.tick().await;
        let changed = state
            .store
            .get()
            .is_some_and(|s| s.changed_since_snapshot());
        if changed {
            if let Err(e) = state.snapshot().await {
                tracing::error!(error = %e, "periodic snapshot failed");
            }
        }
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => tracing::info!("received SIGINT"),
        _ = terminate => tracing::info!("received SIGTERM"),
    }
}
