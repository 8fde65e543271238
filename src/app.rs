//! Build the service, then run it until told to stop.
//!
//! [`App::build`] does everything fallible (validate settings, create the
//! engine, bind the socket) so `main` can report a clear error before
//! serving; [`App::run_until_stopped`] takes the shutdown future as an
//! argument so tests pass their own.

use crate::config::Settings;
use crate::engine::{Engine, Prepared};
use crate::http::{self, error::ApiError, metrics::Metrics};
use anyhow::Context;
use std::future::Future;
use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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
    pub settings: Settings,
    pub metrics: Metrics,
    /// False until the index is loaded, and again while draining.
    ready: AtomicBool,
    pub started: Instant,
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
        Ok(Self(Arc::new(AppInner {
            engine: Arc::new(engine),
            settings,
            metrics: Metrics::default(),
            ready: AtomicBool::new(false),
            started: Instant::now(),
        })))
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
}

impl App {
    /// Validate settings, build the engine and bind the listener.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let addr = settings.bind_addr()?;
        let state = AppState::new(settings)?;
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
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
        Ok(Self { listener, state })
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

    /// Serve until `shutdown` resolves, then drain in-flight requests for up
    /// to `server.shutdown_grace_secs`.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let state = self.state.clone();
        let grace = Duration::from_secs(state.settings.server.shutdown_grace_secs);
        let router = http::router(state.clone());
        let (draining_tx, draining_rx) = tokio::sync::oneshot::channel::<()>();
        let drain_state = state.clone();
        let serve = axum::serve(self.listener, router).with_graceful_shutdown(async move {
            shutdown.await;
            drain_state.set_ready(false);
            tracing::info!("shutdown requested; draining in-flight requests");
            let _ = draining_tx.send(());
        });
        state.set_ready(true);
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
        tracing::info!(documents = state.engine.len(), "stopped");
        Ok(())
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
