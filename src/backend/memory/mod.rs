//! The memory backend: the engine's maps in this process, every write
//! through the collection's [`Store`] (write-ahead log, then apply), on a
//! blocking thread because it may wait for an fsync. Reads call the engine
//! directly on the caller's thread, as before the seam existed.

mod catalog;
mod decisions;
mod events;
mod rebuild;

pub use catalog::{DefaultCollection, LocalCatalog};
pub use rebuild::{Rebuild, RebuildError};

use super::{BackendError, Excerpt, LogStats, SnapshotInfo, StoredText};
use crate::config::StorageSettings;
use crate::engine::{
    Engine, EngineError, NewDoc, Query, Record, Template, UniqueOutcome, WriteMode, WriteOutcome,
};
use crate::persist::{PersistError, Store};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A file's error as a backend error, `what` saying what was being done
/// (the 5xx body says nothing of it: the log has the file and offset).
pub(super) fn persist_err(what: &str) -> impl FnOnce(PersistError) -> BackendError + '_ {
    move |e| BackendError::Internal(format!("{what}: {e}"))
}

/// One collection held in memory.
pub struct Memory {
    /// The index; readers use it directly.
    pub engine: Arc<Engine>,
    /// The durable write path over `engine`.
    pub store: Arc<Store>,
    /// The collection's event log (issue 45), opened at its first use
    /// from the collection directory the caller names (`events.rs`).
    events: std::sync::OnceLock<events::SharedLog>,
    /// The collection's review decisions (issue 46), opened at their first
    /// use from the collection directory the caller names (`decisions.rs`).
    decisions: std::sync::OnceLock<Arc<decisions::Decisions>>,
    /// The collection's files that could not be read at their last use, by
    /// kind (`events`, `decisions`), with the error: each failure is logged
    /// when it starts or its error changes, not at every use (the webhook
    /// loop reads the event log five times a second), and is a metric.
    unreadable: crate::failing::Failing<&'static str>,
}

impl Memory {
    pub fn new(engine: Arc<Engine>, store: Arc<Store>) -> Self {
        Self {
            engine,
            store,
            events: std::sync::OnceLock::new(),
            decisions: std::sync::OnceLock::new(),
            unreadable: Default::default(),
        }
    }

    /// The outcome of opening the collection's `kind` file, remembered:
    /// a failure is logged with `meaning` (what it stops) when it starts
    /// or its error changes, not at every use, and is an error for the
    /// caller in `context`; a success after a failure is logged once.
    fn track<T>(
        &self,
        kind: &'static str,
        meaning: &'static str,
        context: &str,
        opened: Result<T, PersistError>,
    ) -> Result<T, BackendError> {
        match opened {
            Ok(t) => {
                if self.unreadable.worked(&kind) {
                    tracing::info!(file = kind, "the file can be read again");
                }
                Ok(t)
            }
            Err(e) => {
                if self.unreadable.failed(kind, e.to_string()) {
                    tracing::error!(file = kind, error = %e, "{meaning}");
                }
                Err(persist_err(context)(e))
            }
        }
    }

    /// The kinds of the collection's files (`events`, `decisions`) that
    /// could not be read at their last use.
    pub fn unreadable_files(&self) -> Vec<&'static str> {
        self.unreadable.keys()
    }

    /// `f` on the store, on a blocking thread.
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, EngineError> + Send + 'static,
    ) -> Result<T, BackendError> {
        let store = Arc::clone(&self.store);
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| BackendError::Internal(format!("write task failed: {e}")))?
            .map_err(BackendError::from)
    }

    pub async fn insert(&self, new: NewDoc, mode: WriteMode) -> Result<WriteOutcome, BackendError> {
        self.write(move |store| store.insert(new, mode)).await
    }

    pub async fn insert_if_unique(
        &self,
        new: NewDoc,
        q: Query,
    ) -> Result<UniqueOutcome, BackendError> {
        self.write(move |store| store.insert_if_unique(new, &q))
            .await
    }

    pub async fn insert_many(
        &self,
        items: Vec<NewDoc>,
        mode: WriteMode,
    ) -> Result<Vec<Result<WriteOutcome, EngineError>>, BackendError> {
        self.write(move |store| store.insert_many(items, mode))
            .await
    }

    pub async fn remove(&self, id: String) -> Result<bool, BackendError> {
        self.write(move |store| store.remove(&id)).await
    }

    /// `f` on the store, on a blocking thread, for reads of files.
    async fn read<T: Send + 'static>(
        &self,
        what: &'static str,
        f: impl FnOnce(&Store) -> Result<T, PersistError> + Send + 'static,
    ) -> Result<T, BackendError> {
        let store = Arc::clone(&self.store);
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| BackendError::Internal(format!("{what} task failed: {e}")))?
            .map_err(|e| BackendError::Internal(format!("{what}: {e}")))
    }

    /// `f` on the templates file of the collection directory `dir`, on a
    /// blocking thread.
    async fn with_templates<T: Send + 'static>(
        dir: &std::path::Path,
        f: impl FnOnce(&std::path::Path) -> Result<T, PersistError> + Send + 'static,
    ) -> Result<T, BackendError> {
        let dir = dir.to_owned();
        tokio::task::spawn_blocking(move || f(&dir))
            .await
            .map_err(|e| BackendError::Internal(format!("templates task failed: {e}")))?
            .map_err(|e| BackendError::Internal(format!("templates: {e}")))
    }

    pub async fn templates(dir: &std::path::Path) -> Result<Vec<Template>, BackendError> {
        Self::with_templates(dir, LocalCatalog::read_templates).await
    }

    pub async fn put_template(
        dir: &std::path::Path,
        template: Template,
    ) -> Result<bool, BackendError> {
        Self::with_templates(dir, move |dir| {
            let mut all = LocalCatalog::read_templates(dir)?;
            let created = match all.iter_mut().find(|t| t.id == template.id) {
                Some(t) => {
                    *t = template;
                    false
                }
                None => {
                    all.push(template);
                    true
                }
            };
            all.sort_by(|a, b| a.id.cmp(&b.id));
            LocalCatalog::write_templates(dir, &all)?;
            Ok(created)
        })
        .await
    }

    pub async fn delete_template(dir: &std::path::Path, id: &str) -> Result<bool, BackendError> {
        let id = id.to_owned();
        Self::with_templates(dir, move |dir| {
            let mut all = LocalCatalog::read_templates(dir)?;
            let before = all.len();
            all.retain(|t| t.id != id);
            if all.len() == before {
                return Ok(false);
            }
            LocalCatalog::write_templates(dir, &all)?;
            Ok(true)
        })
        .await
    }

    pub async fn text(&self, id: &str) -> Result<StoredText, BackendError> {
        if !self.store.stores_text() {
            return Ok(StoredText::NotKept);
        }
        let key = id.to_owned();
        let found = self
            .read("reading a stored text", move |store| {
                let record = store.engine().get(&key);
                record.map(|r| store.text_of(&r)).transpose()
            })
            .await?;
        Ok(match found {
            None => StoredText::Missing,
            Some(None) => StoredText::StoredWithout,
            Some(Some(text)) => StoredText::Text(text),
        })
    }

    pub async fn excerpts(
        &self,
        ids: &[&str],
        text_bytes: usize,
    ) -> Result<Vec<Option<Excerpt>>, BackendError> {
        if !self.store.stores_text() {
            return Ok(ids
                .iter()
                .map(|id| {
                    let r = self.engine.get(id)?;
                    Some(Excerpt::new(None, 0, r.metadata().map(Into::into)))
                })
                .collect());
        }
        let ids: Vec<String> = ids.iter().map(|id| (*id).to_owned()).collect();
        self.read("reading stored texts", move |store| {
            ids.iter()
                .map(|id| {
                    let Some(record) = store.engine().get(id) else {
                        return Ok(None);
                    };
                    let text = store.text_of(&record)?;
                    let metadata = record.metadata().map(Into::into);
                    Ok(Some(Excerpt::new(text, text_bytes, metadata)))
                })
                .collect()
        })
        .await
    }

    pub async fn sample_texts(
        &self,
        n: usize,
        seed: u64,
        max_bytes: usize,
    ) -> Result<Vec<(String, String)>, BackendError> {
        self.read("reading a sample of texts", move |store| {
            store.sample_texts(n, seed, max_bytes)
        })
        .await
    }

    /// The ids of up to `n` live documents in the seeded order of
    /// [`crate::engine::sample::seeded_order`] (off the async workers: it
    /// hashes every id).
    pub async fn sample_ids(&self, n: usize, seed: u64) -> Result<Vec<String>, BackendError> {
        let engine = Arc::clone(&self.engine);
        tokio::task::spawn_blocking(move || {
            let now = engine.now_ms();
            let live: Vec<Arc<Record>> = engine
                .records()
                .into_iter()
                .filter(|r| engine.is_live(r, now))
                .collect();
            crate::engine::sample::seeded_order(live, |r| r.id().as_str(), n, seed)
                .into_iter()
                .map(|r| r.id().to_string())
                .collect()
        })
        .await
        .map_err(|e| BackendError::Internal(format!("sample task failed: {e}")))
    }

    /// The live documents by id, `step` at a time.
    pub fn export(&self, step: usize) -> Export {
        let mut records = self.engine.records();
        records.sort_unstable_by(|a, b| a.id().as_str().cmp(b.id().as_str()));
        Export {
            store: Arc::clone(&self.store),
            records: Arc::new(records),
            at: 0,
            step: step.max(1),
        }
    }

    pub async fn purge_expired(&self) -> Result<usize, BackendError> {
        self.write(|store| store.purge_expired()).await
    }

    pub fn snapshot(&self, only_if_changed: bool) -> Result<Option<SnapshotInfo>, BackendError> {
        let store = &self.store;
        if store.is_retired() || (only_if_changed && !store.changed_since_snapshot()) {
            return Ok(None);
        }
        match store.snapshot() {
            Ok(info) => Ok(Some(info)),
            // Deleted meanwhile.
            Err(PersistError::Retired) => Ok(None),
            Err(e) if e.is_out_of_space() => Err(BackendError::SnapshotNoSpace(e.to_string())),
            Err(e) => Err(BackendError::Internal(format!("snapshot failed: {e}"))),
        }
    }

    pub fn storage_stats(&self, storage: &StorageSettings) -> serde_json::Value {
        let store = &self.store;
        let wal = store.wal();
        let log = self.log_stats();
        serde_json::json!({
            "data_dir": store.data_dir(),
            "wal_fsync": wal.mode().as_str(),
            "wal_fsync_interval_ms": storage.wal_fsync_interval_ms,
            "wal_bytes": log.bytes,
            "wal_next_lsn": wal.next_lsn(),
            "wal_appends": log.appends,
            "wal_fsyncs": log.fsyncs,
            "wal_writable": log.writable,
            "snapshot_interval_secs": storage.snapshot_interval_secs,
            "snapshots_keep": storage.snapshots_keep,
            "store_text": store.stores_text(),
            "text_bytes": log.text_bytes,
            "last_snapshot": store.last_snapshot(),
            "recovery": store.recovery,
        })
    }

    pub fn log_stats(&self) -> LogStats {
        let wal = self.store.wal();
        let c = &wal.counters;
        LogStats {
            appends: c.appends.load(Ordering::Relaxed),
            append_nanos: c.append_nanos.load(Ordering::Relaxed),
            fsyncs: c.fsyncs.load(Ordering::Relaxed),
            fsync_nanos: c.fsync_nanos.load(Ordering::Relaxed),
            bytes: wal.bytes(),
            text_bytes: self.store.text_bytes(),
            writable: wal.is_writable(),
        }
    }
}

/// An export of the memory backend: the records as they were when it
/// started; each page skips those expired since.
pub struct Export {
    store: Arc<Store>,
    records: Arc<Vec<Arc<Record>>>,
    at: usize,
    step: usize,
}

impl Export {
    pub async fn next_records(
        &mut self,
    ) -> Result<Option<Vec<(Arc<Record>, Option<String>)>>, BackendError> {
        self.page(|r, text| vec![(Arc::clone(r), text)]).await
    }

    pub async fn next(
        &mut self,
        format: fn(&Record, Option<String>) -> Vec<u8>,
    ) -> Result<Option<Vec<u8>>, BackendError> {
        self.page(move |r, text| format(r, text)).await
    }

    /// The next page, each live record and its text turned into `T`s by `f`.
    async fn page<T: Send + 'static>(
        &mut self,
        f: impl Fn(&Arc<Record>, Option<String>) -> Vec<T> + Send + 'static,
    ) -> Result<Option<Vec<T>>, BackendError> {
        if self.at >= self.records.len() {
            return Ok(None);
        }
        let (from, to) = (self.at, (self.at + self.step).min(self.records.len()));
        self.at = to;
        let (store, records) = (Arc::clone(&self.store), Arc::clone(&self.records));
        let page = tokio::task::spawn_blocking(move || {
            let engine = store.engine();
            let now = engine.now_ms();
            let mut out = Vec::new();
            for r in records[from..to].iter().filter(|r| engine.is_live(r, now)) {
                out.extend(f(r, store.text_of(r)?));
            }
            Ok::<_, PersistError>(out)
        })
        .await
        .map_err(|e| BackendError::Internal(format!("export task failed: {e}")))?
        .map_err(|e| BackendError::Internal(format!("reading a stored text: {e}")))?;
        Ok(Some(page))
    }
}
