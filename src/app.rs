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

use crate::collections::{Collections, Status};
use crate::config::{Config, WalFsync};
use crate::engine::{Clock, SystemClock};
use crate::http::{self, AppState};
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
    /// Lock the data dir, find the collections, build the state and bind
    /// the listener.
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        Self::build_with_clock(config, Arc::new(SystemClock)).await
    }

    /// [`Self::build`] with every engine's "now" from `clock` (tests move it
    /// by hand to expire documents).
    pub async fn build_with_clock(config: Config, clock: Arc<dyn Clock>) -> anyhow::Result<Self> {
        let addr = config.bind_addr();
        let dir_lock = lock_data_dir(&config.storage.data_dir)?;
        let collections = Collections::open(&config, clock).with_context(|| {
            format!(
                "cannot read the collections in storage.data_dir {}",
                config.storage.data_dir.display()
            )
        })?;
        let state = AppState::new(config, Arc::new(collections));
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let auth = &state.config.auth;
        if auth.enabled() {
            tracing::info!(
                api_keys = auth.api_keys.len(),
                read_only_keys = auth.read_only_keys.len(),
                scoped_keys = auth.keys.len(),
                protect_metrics = auth.protect_metrics,
                "access control on: requests need Authorization: Bearer <key>"
            );
        } else {
            tracing::warn!(
                "no auth.api_keys or auth.read_only_keys configured: the API is open to anyone who can reach it"
            );
        }
        let default = state.collections.default_collection();
        let (p, b) = (default.recipe().params(), default.recipe().bands());
        tracing::info!(
            addr = %listener.local_addr()?,
            collections = state.collections.len(),
            num_perm = p.index.num_perm,
            threshold = p.index.threshold,
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
    /// A `default` collection that cannot be restored stops the server at
    /// once (its recipe is the configuration: an operator's error) and is
    /// returned; a named one that cannot is served as failed.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let state = self.state.clone();
        let grace = Duration::from_secs(state.config.server.shutdown_grace_secs);
        let (fatal_tx, mut fatal_rx) = tokio::sync::oneshot::channel::<anyhow::Error>();
        let background = tokio::spawn(restore_then_maintain(state.clone(), fatal_tx));

        let (draining_tx, draining_rx) = tokio::sync::oneshot::channel::<()>();
        let drain_state = state.clone();
        let delay = Duration::from_secs(state.config.server.shutdown_delay_secs);
        let serve = http::serve(self.listener, state.clone(), async move {
            shutdown.await;
            // Not ready from now on; keep serving for the delay so load
            // balancers see it and stop routing here before we stop accepting.
            drain_state.set_ready(false);
            if !delay.is_zero() {
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
            Ok(fatal) = &mut fatal_rx => {
                // The listener closes with `serve`, dropped here.
                background.abort();
                return Err(fatal);
            }
        }
        background.abort();
        if state.is_restored() {
            match state.snapshot_changed().await {
                Ok(written) if written.is_empty() => {
                    tracing::info!(
                        "nothing written since the last snapshots; no final snapshot needed"
                    )
                }
                Ok(written) => {
                    for (c, info) in written {
                        tracing::info!(collection = %c.name, documents = info.documents, path = %info.path.display(), "final snapshot written");
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "final snapshot failed; the log still holds every write")
                }
            }
        }
        let documents: usize = state.collections.list().iter().map(|c| c.documents()).sum();
        tracing::info!(documents, "stopped");
        Ok(())
    }
}

/// The background task: restore every collection, then keep them: the
/// snapshot timer, the purge of expired documents, and (in `interval`
/// mode) the periodic log fsync; with the redis backend, the watch of the
/// cluster and of the collection catalog.
async fn restore_then_maintain(
    state: AppState,
    fatal: tokio::sync::oneshot::Sender<anyhow::Error>,
) {
    if let Err(e) = restore(&state).await {
        let _ = fatal.send(e);
        return;
    }
    drop(fatal);
    tokio::join!(
        snapshot_timer(&state),
        purge_timer(&state),
        fsync_timer(&state),
        storage_watch(&state),
        huge_pages_timer(&state),
        crate::service::webhooks::run(
            Arc::clone(&state.collections),
            Arc::clone(&state.events),
            Arc::clone(&state.metrics),
            state.config.webhooks.clone(),
        ),
        events_trim_timer(&state)
    );
}

/// Every `events.trim_interval_secs`, apply each collection's event
/// retention (`events.retention_secs`, `events.max_events`); an event a
/// subscription still owes is kept.
async fn events_trim_timer(state: &AppState) {
    let Some(mut tick) = every(state.config.events.trim_interval_secs).await else {
        return;
    };
    let keep_ms = state.config.events.retention_secs.saturating_mul(1000);
    let keep_max = state.config.events.max_events;
    loop {
        tick.tick().await;
        for c in state.collections.list() {
            let Some(b) = c.backend() else { continue };
            match b
                .trim_events(c.dir(), keep_ms, keep_max, crate::events::now_ms())
                .await
            {
                Ok(0) => {}
                Ok(n) => tracing::debug!(collection = %c.name, events = n, "events trimmed"),
                Err(e) => {
                    tracing::warn!(collection = %c.name, error = %e, "trimming events failed")
                }
            }
        }
    }
}

/// With `storage.backend = "redis"`, every `storage.redis.watch_interval_ms`:
/// check the cluster (`/readyz` follows the verdict) and bring this node's
/// collections in line with the catalog in Redis.
async fn storage_watch(state: &AppState) {
    let Some(every) = state.collections.watch_interval() else {
        return;
    };
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        state.collections.watch().await;
    }
}

/// Restore every collection off the async workers; a named collection
/// that fails is reported (and answers 503) while the others serve. Then
/// the server is ready. A `default` collection that fails is an error:
/// its recipe is the configuration, so nothing could serve it.
async fn restore(state: &AppState) -> anyhow::Result<()> {
    let collections = Arc::clone(&state.collections);
    let started = std::time::Instant::now();
    if let Err(e) = tokio::task::spawn_blocking(move || collections.restore()).await {
        tracing::error!(error = %e, "the restore task failed");
    }
    let default = state.collections.default_collection();
    if default.status() != Status::Ready {
        let why = default.failure().unwrap_or("it was not restored");
        tracing::error!(collection = %default.name, error = %why, "the default collection cannot be restored; stopping");
        anyhow::bail!(
            "the default collection cannot be restored from storage.data_dir {}: {why}. \
             Its recipe is the server's configuration, so the server does not start: \
             fix the configuration or the files, then start again",
            default.dir().display()
        );
    }
    let all = state.collections.list();
    let failed: Vec<String> = all
        .iter()
        .filter(|c| c.status() == Status::Failed)
        .map(|c| c.name.to_string())
        .collect();
    let documents: usize = all.iter().map(|c| c.documents()).sum();
    tracing::info!(
        collections = all.len(),
        documents,
        failed = failed.len(),
        seconds = started.elapsed().as_secs_f64(),
        "index restored; ready"
    );
    if !failed.is_empty() {
        tracing::error!(
            collections = failed.join(","),
            "some collections could not be restored; they answer 503 collection-unavailable"
        );
    }
    state.mark_restored();
    Ok(())
}

/// A tick every `secs` seconds (none while `secs` is 0), the first after a period.
async fn every(secs: u64) -> Option<tokio::time::Interval> {
    if secs == 0 {
        return None;
    }
    let mut tick = tokio::time::interval(Duration::from_secs(secs));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await; // the first tick is immediate
    Some(tick)
}

/// Every `storage.snapshot_interval_secs` (0: never), snapshot each
/// collection written since its last snapshot. Runs until the server stops.
async fn snapshot_timer(state: &AppState) {
    let Some(mut tick) = every(state.config.storage.snapshot_interval_secs).await else {
        return;
    };
    loop {
        tick.tick().await;
        if let Err(e) = state.snapshot_changed().await {
            tracing::error!(error = %e, "periodic snapshot failed");
        }
    }
}

/// Every `storage.purge_interval_secs`, purge the documents that have
/// expired (a journaled delete each: the memory goes, the log says so).
async fn purge_timer(state: &AppState) {
    let Some(mut tick) = every(state.config.storage.purge_interval_secs).await else {
        return;
    };
    loop {
        tick.tick().await;
        purge_expired(state).await;
    }
}

/// Purge every collection's expired documents now (a journaled delete
/// each in memory; in Redis any node may run it, and a record rewritten
/// meanwhile is kept by the compare-on-gen).
pub async fn purge_expired(state: &AppState) {
    for c in state.collections.list() {
        let Some(backend) = c.backend() else { continue };
        let started = std::time::Instant::now();
        match backend.purge_expired().await {
            Ok(0) => {}
            Ok(n) => {
                state.metrics.observe_purge(c.name.as_str(), n);
                tracing::info!(collection = %c.name, documents = n, seconds = started.elapsed().as_secs_f64(), "expired documents purged");
            }
            Err(e) => {
                tracing::error!(collection = %c.name, error = %e, "purging expired documents failed; they stay hidden and are retried")
            }
        }
    }
}

/// Right after the restore, then every `storage.huge_pages_interval_secs`
/// (0: never), collapse the index's resident memory into huge pages, off
/// the async workers; a pass waits while memory grows fast (a bulk load;
/// `hugepages::Schedule`). Stops for good where the kernel cannot.
async fn huge_pages_timer(state: &AppState) {
    let secs = state.config.storage.huge_pages_interval_secs;
    if secs == 0 {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_secs(secs));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut schedule = crate::hugepages::Schedule::default();
    for first in std::iter::once(true).chain(std::iter::repeat(false)) {
        tick.tick().await;
        let rss = crate::hugepages::resident_bytes().unwrap_or(0);
        if !schedule.due(rss) {
            tracing::debug!(rss, "memory still growing; the huge-page pass waits");
            continue;
        }
        let started = std::time::Instant::now();
        match tokio::task::spawn_blocking(crate::hugepages::collapse_resident).await {
            Ok(Ok(pass)) => {
                let seconds = started.elapsed().as_secs_f64();
                let bytes = pass.collapsed_bytes();
                // The first pass at info; later ones (every few seconds)
                // at debug: `neardup_memory_huge_page_bytes` follows them.
                if first {
                    tracing::info!(
                        bytes,
                        ranges = pass.ranges,
                        failed = pass.failed,
                        seconds,
                        "memory in huge pages"
                    );
                } else {
                    tracing::debug!(
                        bytes,
                        ranges = pass.ranges,
                        failed = pass.failed,
                        seconds,
                        "memory in huge pages"
                    );
                }
            }
            Ok(Err(why)) => {
                tracing::info!(reason = %why, "the index stays in 4 KiB pages");
                return;
            }
            Err(e) => {
                tracing::error!(error = %e, "the huge-page task failed");
                return;
            }
        }
    }
}

/// In `interval` mode, fsync every collection's log each
/// `storage.wal_fsync_interval_ms`.
async fn fsync_timer(state: &AppState) {
    if state.config.storage.wal_fsync != WalFsync::Interval {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_millis(
        state.config.storage.wal_fsync_interval_ms,
    ));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let collections = Arc::clone(&state.collections);
        let _ = tokio::task::spawn_blocking(move || {
            for c in collections.list() {
                if let Some(backend) = c.backend() {
                    if let Err(e) = backend.sync_log() {
                        tracing::error!(collection = %c.name, error = %e, "periodic log fsync failed");
                    }
                }
            }
        })
        .await;
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
