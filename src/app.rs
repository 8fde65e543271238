//! Build the service, then run it until told to stop: what the process is
//! for, around the request-serving state (`http::AppState`).
//!
//! [`App::build`] does everything fallible that needs no I/O beyond the
//! socket and the data-dir lock (settings are a validated [`Config`]
//! already), so `main` can report a clear error before serving.
//! [`App::run_until_stopped`] takes the shutdown future as an argument so
//! tests pass their own; it restores the index in the background
//! (`restore`), then runs the snapshot timer (`snapshot_timer`), and on
//! shutdown drains requests and writes a final snapshot.

use crate::config::Config;
use crate::http::{self, AppState};
use crate::persist::Store;
use anyhow::Context;
use std::fs::File;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

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
    /// Lock the data dir, build the state and bind the listener.
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        let addr = config.bind_addr();
        let dir_lock = lock_data_dir(&config.storage.data_dir)?;
        let state = AppState::new(config);
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let auth = &state.config.auth;
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
        let b = state.engine.bands();
        tracing::info!(
            addr = %listener.local_addr()?,
            num_perm = state.engine.params().index.num_perm,
            threshold = state.engine.params().index.threshold,
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
    /// `shutdown` resolves, keep serving with `/readyz` at 503 for
    /// `server.shutdown_delay_secs`, drain in-flight requests for up to
    /// `server.shutdown_grace_secs`, then write a final snapshot (unless
    /// nothing was written since the last one).
    /// A recovery failure stops the server and is returned.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let state = self.state.clone();
        let grace = Duration::from_secs(state.config.server.shutdown_grace_secs);
        let (fatal_tx, fatal_rx) = tokio::sync::oneshot::channel::<anyhow::Error>();
        let background = tokio::spawn(restore_then_snapshot(state.clone(), fatal_tx));

        let (draining_tx, draining_rx) = tokio::sync::oneshot::channel::<()>();
        let fatal: Arc<std::sync::Mutex<Option<anyhow::Error>>> = Default::default();
        let fatal_slot = Arc::clone(&fatal);
        let drain_state = state.clone();
        let delay = Duration::from_secs(state.config.server.shutdown_delay_secs);
        let serve = http::serve(self.listener, state.clone(), async move {
            let fatal = tokio::select! {
                _ = shutdown => false,
                Ok(e) = fatal_rx => {
                    *fatal_slot.lock().expect("fatal slot") = Some(e);
                    true
                }
            };
            // Not ready from now on; keep serving for the delay so load
            // balancers see it and stop routing here before we stop accepting.
            drain_state.set_ready(false);
            if !fatal && !delay.is_zero() {
                tracing::info!(
                    delay_secs = delay.as_secs(),
                    "shutdown requested; /readyz answers 503, still serving for the delay"
                );
                tokio::time::sleep(delay).await;
            }
            tracing::info!("draining in-flight requests");
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
        background.abort();
        if let Some(e) = fatal.lock().expect("fatal slot").take() {
            return Err(e);
        }
        let changed = state.store_if_open().map(|s| s.changed_since_snapshot());
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

/// The background task: restore the index, then snapshot on the timer.
async fn restore_then_snapshot(
    state: AppState,
    fatal: tokio::sync::oneshot::Sender<anyhow::Error>,
) {
    match restore(&state).await {
        Ok(()) => snapshot_timer(&state).await,
        Err(e) => {
            let _ = fatal.send(e);
        }
    }
}

/// Load the stored state (snapshot + log) off the async workers, open the
/// store and mark the server ready. An error stops the server.
async fn restore(state: &AppState) -> anyhow::Result<()> {
    let engine = Arc::clone(&state.engine);
    let storage = state.config.storage.clone();
    let store = tokio::task::spawn_blocking(move || Store::open(engine, &storage))
        .await
        .context("the recovery task failed")?
        .map_err(|e| {
            tracing::error!(error = %e, "cannot restore the stored index; refusing to start");
            anyhow::Error::new(e).context("cannot restore the stored index")
        })?;
    let r = &store.recovery;
    tracing::info!(
        documents = r.documents,
        snapshot = r.snapshot.as_ref().map(|p| p.display().to_string()),
        replayed_records = r.replayed_records,
        torn_bytes_dropped = r.torn_bytes_dropped,
        seconds = r.seconds,
        "index restored; ready"
    );
    state.open_store(Arc::new(store));
    state.set_ready(true);
    Ok(())
}

/// Every `storage.snapshot_interval_secs` (0: never), snapshot if anything
/// was written since the last one. Runs until the server stops.
async fn snapshot_timer(state: &AppState) {
    let every = state.config.storage.snapshot_interval_secs;
    if every == 0 {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_secs(every));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await; // the first tick is immediate
    loop {
        tick.tick().await;
        if state
            .store_if_open()
            .is_some_and(|s| s.changed_since_snapshot())
        {
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
