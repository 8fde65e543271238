//! The storage seam: where a collection's documents and LSH buckets live.
//!
//! [`Backend`] is an enum of the backends (see ARCHITECTURE.md, "Storage
//! backends"): `Memory` is the engine's maps in this process, made durable
//! by [`persist::Store`](crate::persist::Store) (today's code, called
//! exactly as the handlers called it before), and `Redis` keeps records and
//! buckets in a Redis Cluster shared by every neardup node. The HTTP layer
//! reads and writes documents only through this type; every operation is
//! an `async fn` here, and the memory arm of a read is a plain synchronous
//! call inside it (no boxed future, no extra task), so the seam costs the
//! memory backend nothing. An enum rather than a trait object: both
//! backends are ours, and a new operation is a compile error until both
//! have it.
//!
//! Both backends share the core: signing (`Engine::prepare`), band keys,
//! thresholds, the expiry rule and the exact verification of candidates.

mod memory;
pub mod redis;

pub use memory::{DefaultCollection, LocalCatalog, Memory, Rebuild, RebuildError};
pub use redis::{Created, DeliveryTiming, Heartbeat, RedisIndex, SharedCatalog, HEARTBEAT_MS};

pub use crate::persist::{PersistError, SnapshotInfo};

use crate::config::StorageSettings;
use crate::engine::{
    By, Comparison, Edge, Engine, EngineError, ExcludedPairs, FilterSpec, Groups, MemoryStats,
    NewDoc, Passage, PassageOutcome, Prepared, Query, QueryOutcome, Record, ScanStats, Score,
    Template, Threshold, UniqueOutcome, WriteMode, WriteOutcome,
};
use crate::events::{
    Attempt, Delivery, Event, EventDraft, EventPage, FailedDelivery, Subscription, SubscriptionPut,
};
use crate::review::{Decision, DecisionSet, PairKey};
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;

/// Why a backend operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BackendError {
    /// What the engine says about the request (404, 409, a bad threshold,
    /// a write the log refused): the same answers on every backend.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The shared storage cannot answer now (down, failing over, timed
    /// out, a replicated write no replica confirmed): retry later.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// A bug or corrupt data (logged; answered as a generic 500).
    #[error("{0}")]
    Internal(String),
    /// A snapshot could not be written for want of disk space (the log
    /// still holds every write).
    #[error("{0}")]
    SnapshotNoSpace(String),
}

/// The storage behind one collection.
pub enum Backend {
    /// In this process: the engine, its write-ahead log and snapshots.
    Memory(Memory),
    /// In a Redis Cluster (or one Redis) shared with other neardup nodes.
    Redis(RedisIndex),
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backend::Memory(_) => f.write_str("Backend::Memory"),
            Backend::Redis(r) => write!(f, "Backend::Redis({:?})", r.keys()),
        }
    }
}

impl Backend {
    /// A collection held in this process: `engine`'s maps, written through `store`.
    pub fn in_memory(engine: Arc<Engine>, store: Arc<crate::persist::Store>) -> Self {
        Backend::Memory(Memory::new(engine, store))
    }

    /// The backend's name, as `storage.backend` spells it.
    pub fn kind(&self) -> &'static str {
        match self {
            Backend::Memory(_) => "memory",
            Backend::Redis(_) => "redis",
        }
    }

    /// Store `new` (create or replace by `mode`), durably.
    pub async fn insert(&self, new: NewDoc, mode: WriteMode) -> Result<WriteOutcome, BackendError> {
        match self {
            Backend::Memory(m) => m.insert(new, mode).await,
            Backend::Redis(r) => r.insert(new, mode).await,
        }
    }

    /// Store `new` unless a stored document matches it by `q`.
    pub async fn insert_if_unique(
        &self,
        new: NewDoc,
        q: Query,
    ) -> Result<UniqueOutcome, BackendError> {
        match self {
            Backend::Memory(m) => m.insert_if_unique(new, q).await,
            Backend::Redis(r) => r.insert_if_unique(new, q).await,
        }
    }

    /// Store many documents in order (a repeated id behaves as sequential
    /// calls); one result per item, or an error for the whole batch when
    /// nothing could be made durable.
    pub async fn insert_many(
        &self,
        items: Vec<NewDoc>,
        mode: WriteMode,
    ) -> Result<Vec<Result<WriteOutcome, EngineError>>, BackendError> {
        match self {
            Backend::Memory(m) => m.insert_many(items, mode).await,
            Backend::Redis(r) => r.insert_many(items, mode).await,
        }
    }

    /// Delete `id`; false if no live document had it.
    pub async fn remove(&self, id: String) -> Result<bool, BackendError> {
        match self {
            Backend::Memory(m) => m.remove(id).await,
            Backend::Redis(r) => r.remove(&id).await,
        }
    }

    /// The current live version of `id`.
    pub async fn get(&self, id: &str) -> Result<Option<Arc<Record>>, BackendError> {
        match self {
            Backend::Memory(m) => Ok(m.engine.get(id)),
            Backend::Redis(r) => r.get(id).await,
        }
    }

    /// When each of `ids` was stored and its metadata (`None`: not
    /// stored), in their order: what dating a document for originals
    /// needs; on Redis, read in batched trips.
    pub async fn dates(&self, ids: &[&str]) -> Result<Vec<Option<StoredDate>>, BackendError> {
        match self {
            Backend::Memory(m) => Ok(ids
                .iter()
                .map(|id| {
                    m.engine.get(id).map(|r| StoredDate {
                        created_ms: r.created_ms(),
                        metadata: r.metadata().map(Into::into),
                    })
                })
                .collect()),
            Backend::Redis(r) => r.dates(ids).await,
        }
    }

    /// Near-duplicates of an unstored document; `exclude` skips one id.
    pub async fn similar_to(
        &self,
        doc: &Prepared,
        exclude: Option<&str>,
        q: &Query,
    ) -> Result<QueryOutcome, BackendError> {
        match self {
            Backend::Memory(m) => Ok(m.engine.similar_to(doc, exclude, q)?),
            Backend::Redis(r) => r.similar_to(doc, exclude, q).await,
        }
    }

    /// Near-duplicates of the stored document `id` (never `id` itself).
    pub async fn similar_to_id(&self, id: &str, q: &Query) -> Result<QueryOutcome, BackendError> {
        match self {
            Backend::Memory(m) => Ok(m.engine.similar_to_id(id, q)?),
            Backend::Redis(r) => r.similar_to_id(id, q).await,
        }
    }

    /// Stored documents sharing a run of at least `min_run` consecutive
    /// shingles with `passage` (at most `limit`, longest run first), from
    /// the passage index.
    pub async fn passages(
        &self,
        passage: &Passage,
        min_run: usize,
        limit: usize,
        since: Option<u64>,
    ) -> Result<PassageOutcome, BackendError> {
        match self {
            Backend::Memory(m) => Ok(m.engine.passages(passage, min_run, limit, since)?),
            Backend::Redis(r) => r.passages(passage, min_run, limit, since).await,
        }
    }

    /// Whether the passage index is kept (`index.passage_index`).
    pub fn passage_index(&self) -> bool {
        match self {
            Backend::Memory(m) => m.engine.passage_index(),
            Backend::Redis(r) => r.passage_index(),
        }
    }

    /// Keep the passage index (built from every stored document's
    /// fingerprints), or drop it.
    pub async fn set_passage_index(&self, on: bool) -> Result<(), BackendError> {
        match self {
            Backend::Memory(m) => {
                let engine = Arc::clone(&m.engine);
                tokio::task::spawn_blocking(move || engine.set_passage_index(on))
                    .await
                    .map_err(|e| BackendError::Internal(format!("passage index task: {e}")))
            }
            Backend::Redis(r) => r.set_passage_index(on).await,
        }
    }

    /// Whether document frequency is counted (`index.boilerplate.enabled`).
    pub fn boilerplate_on(&self) -> bool {
        match self {
            Backend::Memory(m) => m.engine.boilerplate_on(),
            Backend::Redis(r) => r.engine().boilerplate_on(),
        }
    }

    /// Count document frequency (every stored document counted before
    /// this returns), or stop and drop the counts.
    pub async fn set_boilerplate(&self, on: bool) -> Result<(), BackendError> {
        match self {
            Backend::Memory(m) => {
                let engine = Arc::clone(&m.engine);
                tokio::task::spawn_blocking(move || engine.set_boilerplate(on))
                    .await
                    .map_err(|e| BackendError::Internal(format!("boilerplate task: {e}")))
            }
            Backend::Redis(r) => r.set_boilerplate(on).await,
        }
    }

    /// The document frequency of each of `sorted` (sorted, distinct
    /// shingles), and the documents counted (N): 0s while counts are off.
    pub async fn doc_frequencies(&self, sorted: &[u32]) -> Result<(Vec<u32>, usize), BackendError> {
        match self {
            Backend::Memory(m) => Ok((m.engine.doc_frequencies(sorted), m.engine.counted_docs())),
            Backend::Redis(r) => r.doc_frequencies(sorted).await,
        }
    }

    /// Every shingle held by at least `at` documents, with its count (at
    /// most `max`, the most common first), and the distinct shingles counted.
    pub async fn common_shingles(
        &self,
        at: u32,
        max: usize,
    ) -> Result<(Vec<(u32, u32)>, usize), BackendError> {
        match self {
            Backend::Memory(m) => {
                let mut all = m.engine.common_shingles(at);
                all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                all.truncate(max);
                Ok((all, m.engine.distinct_shingles()))
            }
            Backend::Redis(r) => r.common_shingles(at, max).await,
        }
    }

    /// Re-read the templates if another node changed them (the shared
    /// catalog's watch); true if they were. Nothing to do in memory.
    pub async fn refresh_templates_if_changed(&self) -> Result<bool, BackendError> {
        match self {
            Backend::Memory(_) => Ok(false),
            Backend::Redis(r) => r.refresh_templates_if_changed().await,
        }
    }

    /// Follow the document-frequency log, counting every record first when
    /// counts are new to this node, or drop the counts when they are off
    /// (the shared catalog's watch). Nothing to do in memory.
    pub async fn follow_counts(&self) -> Result<(), BackendError> {
        match self {
            Backend::Memory(_) => Ok(()),
            Backend::Redis(r) => r.follow_counts().await,
        }
    }

    /// The collection's registered templates, by id. `dir` is the
    /// collection's directory (where the memory backend keeps them).
    pub async fn templates(&self, dir: &std::path::Path) -> Result<Vec<Template>, BackendError> {
        match self {
            Backend::Memory(_) => Memory::templates(dir).await,
            Backend::Redis(r) => r.templates().await,
        }
    }

    /// Store `template` (replacing one with its id), durably; true if it
    /// is new. The caller serializes changes of one collection's templates
    /// on this node and checks the count.
    pub async fn put_template(
        &self,
        dir: &std::path::Path,
        template: Template,
    ) -> Result<bool, BackendError> {
        match self {
            Backend::Memory(_) => Memory::put_template(dir, template).await,
            Backend::Redis(r) => r.put_template(template).await,
        }
    }

    /// Delete the template `id`, durably; false if there was none.
    pub async fn delete_template(
        &self,
        dir: &std::path::Path,
        id: &str,
    ) -> Result<bool, BackendError> {
        match self {
            Backend::Memory(_) => Memory::delete_template(dir, id).await,
            Backend::Redis(r) => r.delete_template(id).await,
        }
    }

    /// Exact and estimated similarity of two stored documents.
    pub async fn compare(&self, a: &str, b: &str) -> Result<Comparison, BackendError> {
        match self {
            Backend::Memory(m) => Ok(m.engine.compare(a, b)?),
            Backend::Redis(r) => r.compare(a, b).await,
        }
    }

    /// Live documents (not those expired and not yet purged: an expired
    /// document is absent from every answer, counts included).
    pub fn documents(&self) -> usize {
        match self {
            Backend::Memory(m) => m.engine.live_len(),
            Backend::Redis(r) => r.documents(),
        }
    }

    /// Bring [`Self::documents`] up to date (the redis backend reads the
    /// shared counter other nodes move too).
    pub async fn refresh_documents(&self) -> Result<usize, BackendError> {
        match self {
            Backend::Memory(m) => Ok(m.engine.live_len()),
            Backend::Redis(r) => r.refresh_live_count().await,
        }
    }

    /// Whether new writes keep their texts (`store_text`).
    pub fn stores_text(&self) -> bool {
        match self {
            Backend::Memory(m) => m.store.stores_text(),
            Backend::Redis(r) => r.stores_text(),
        }
    }

    /// Keep (or stop keeping) the texts of writes from now on.
    pub fn set_store_text(&self, on: bool) {
        match self {
            Backend::Memory(m) => m.store.set_store_text(on),
            Backend::Redis(r) => r.set_store_text(on),
        }
    }

    /// The stored text of `id`, or why there is none.
    pub async fn text(&self, id: &str) -> Result<StoredText, BackendError> {
        match self {
            Backend::Memory(m) => m.text(id).await,
            Backend::Redis(r) => {
                if !r.stores_text() {
                    return Ok(match r.get(id).await? {
                        None => StoredText::Missing,
                        Some(_) => StoredText::NotKept,
                    });
                }
                Ok(match r.text(id).await? {
                    None => StoredText::Missing,
                    Some(None) => StoredText::StoredWithout,
                    Some(Some(text)) => StoredText::Text(text),
                })
            }
        }
    }

    /// The start of each of `ids`' stored text (at most `text_bytes`
    /// bytes of it, cut on a character boundary) and its metadata, in
    /// their order (`None`: no live document has the id): what a snippet
    /// is made of. The text is `None` where the collection does not keep
    /// texts or the document was stored without one. Read in batched
    /// trips on Redis, in one blocking task in memory; a whole text is
    /// held only while it is cut.
    pub async fn excerpts(
        &self,
        ids: &[&str],
        text_bytes: usize,
    ) -> Result<Vec<Option<Excerpt>>, BackendError> {
        match self {
            Backend::Memory(m) => m.excerpts(ids, text_bytes).await,
            Backend::Redis(r) => r.excerpts(ids, text_bytes).await,
        }
    }

    /// Up to `n` live documents with a stored text, drawn uniformly
    /// (deterministic for `seed` and the contents), as (id, text), stopping
    /// before the texts pass `max_bytes`.
    pub async fn sample_texts(
        &self,
        n: usize,
        seed: u64,
        max_bytes: usize,
    ) -> Result<Vec<(String, String)>, BackendError> {
        match self {
            Backend::Memory(m) => m.sample_texts(n, seed, max_bytes).await,
            Backend::Redis(r) => r.sample_texts(n, seed, max_bytes).await,
        }
    }

    /// Every live document with its stored text, for an export: a cursor
    /// that hands out pages of about `step` documents, by id on the memory
    /// backend, in the cluster's scan order on redis.
    pub async fn export(&self, step: usize) -> Result<ExportPages<'_>, BackendError> {
        Ok(match self {
            Backend::Memory(m) => ExportPages::Memory(m.export(step)),
            Backend::Redis(r) => ExportPages::Redis(r.export(step).await?),
        })
    }

    /// A number that changes whenever a write is applied (cached scans
    /// compare it); the redis backend reads the shared write counter.
    pub async fn write_version(&self) -> Result<u64, BackendError> {
        match self {
            Backend::Memory(m) => Ok(m.engine.generation()),
            Backend::Redis(r) => r.write_version().await,
        }
    }

    /// Every verified pair at `threshold` by `measure` (Jaccard, or either
    /// text inside the other for a containment measure) that `filter`
    /// admits and `except` does not hold, handed to `sink` as found;
    /// `sink` returns false to stop the scan. Blocking: call it off the
    /// async workers (the memory scan runs on `pool`, the redis scan reads
    /// the cluster on this thread).
    pub fn scan_pairs(
        &self,
        threshold: Threshold,
        by: impl Into<By>,
        filter: Option<&Arc<FilterSpec>>,
        except: Option<&ExcludedPairs>,
        pool: &rayon::ThreadPool,
        sink: &mut (dyn FnMut(&Edge) -> bool + Send),
    ) -> Result<ScanStats, BackendError> {
        let by = by.into();
        self.check_by(by)?;
        match self {
            Backend::Memory(m) => Ok(pool.install(|| {
                m.engine
                    .scan_pairs_filtered(threshold, by, filter, except, None, &mut |edges| {
                        for e in &edges {
                            if !sink(e) {
                                return ControlFlow::Break(());
                            }
                        }
                        ControlFlow::Continue(())
                    })
            })),
            Backend::Redis(r) => {
                let (edges, mut stats) = tokio::runtime::Handle::current()
                    .block_on(r.scan_edges_filtered(threshold, by, filter, except))?;
                for e in &edges {
                    if !sink(e) {
                        stats.complete = false;
                        break;
                    }
                }
                Ok(stats)
            }
        }
    }

    /// The groups of near-duplicates at `threshold` by `measure` with at
    /// least `min_size` members, over the pairs [`Self::scan_pairs`]
    /// hands out. Blocking, like it.
    pub fn duplicate_groups(
        &self,
        threshold: Threshold,
        by: impl Into<By>,
        filter: Option<&Arc<FilterSpec>>,
        except: Option<&ExcludedPairs>,
        min_size: usize,
        pool: &rayon::ThreadPool,
    ) -> Result<Groups, BackendError> {
        let by = by.into();
        self.check_by(by)?;
        match self {
            Backend::Memory(m) => Ok(pool.install(|| {
                m.engine
                    .duplicate_groups_filtered(threshold, by, filter, except, min_size, None)
            })),
            Backend::Redis(r) => {
                let (edges, stats) = tokio::runtime::Handle::current()
                    .block_on(r.scan_edges_filtered(threshold, by, filter, except))?;
                Ok(Groups::from_edges(edges, by, min_size, stats))
            }
        }
    }

    /// A containment measure or content scores need the passage index;
    /// content scores, document frequency too.
    fn check_by(&self, by: By) -> Result<(), BackendError> {
        if by.via_passages() && !self.passage_index() {
            return Err(EngineError::PassageIndexOff(by.measure.as_str()).into());
        }
        if by.score == Score::Content && !self.boilerplate_on() {
            return Err(EngineError::BoilerplateOff.into());
        }
        Ok(())
    }

    /// Delete every document that has expired; how many went.
    pub async fn purge_expired(&self) -> Result<usize, BackendError> {
        match self {
            Backend::Memory(m) => m.purge_expired().await,
            Backend::Redis(r) => r.purge_expired().await,
        }
    }

    /// Write a snapshot (blocking): `None` where there is nothing to write
    /// (a backend whose storage keeps itself, a collection deleted
    /// meanwhile, or with `only_if_changed` nothing written since the last).
    pub fn snapshot(&self, only_if_changed: bool) -> Result<Option<SnapshotInfo>, BackendError> {
        match self {
            Backend::Memory(m) => m.snapshot(only_if_changed),
            Backend::Redis(_) => Ok(None),
        }
    }

    /// fsync the write-ahead log now (blocking; `storage.wal_fsync =
    /// "interval"`); nothing where the storage makes writes durable itself.
    pub fn sync_log(&self) -> Result<(), BackendError> {
        match self {
            Backend::Memory(m) => m
                .store
                .wal()
                .sync_now()
                .map_err(|e| BackendError::Internal(format!("log fsync: {e}"))),
            Backend::Redis(_) => Ok(()),
        }
    }

    /// While `on`, writes answer 503 (a reindex of a shared collection runs
    /// on some node: the catalog says so). A collection in memory is
    /// reindexed behind its store's own write gate, so this does nothing there.
    pub fn set_paused(&self, on: bool) {
        if let Backend::Redis(r) = self {
            r.set_paused(on);
        }
    }

    /// Stop serving writes for good: the collection is being deleted.
    pub fn retire(&self) {
        if let Backend::Memory(m) = self {
            m.store.retire();
        }
    }

    /// The `storage` object of `/stats`.
    pub fn storage_stats(&self, settings: &StorageSettings) -> serde_json::Value {
        match self {
            Backend::Memory(m) => m.storage_stats(settings),
            Backend::Redis(r) => {
                let s = &settings.redis;
                serde_json::json!({
                    "backend": "redis",
                    "key_prefix": s.key_prefix,
                    "durability": s.durability.as_str(),
                    "read_from_replicas": s.read_from_replicas,
                    "store_text": r.stores_text(),
                    "cluster_up": r.redis().is_healthy(),
                    "passage_index": r.passage_stats(),
                    "boilerplate": r.boilerplate_stats(),
                })
            }
        }
    }

    /// Where the index's memory goes, where it is in this process.
    pub fn memory(&self) -> Option<MemoryStats> {
        match self {
            Backend::Memory(m) => Some(m.engine.memory()),
            Backend::Redis(_) => None,
        }
    }

    /// LSH buckets held in this process (0 where they are elsewhere).
    pub fn lsh_buckets(&self) -> usize {
        match self {
            Backend::Memory(m) => m.engine.lsh_bucket_count(),
            Backend::Redis(_) => 0,
        }
    }

    /// The kinds of the collection's own files (`events`, `decisions`) that
    /// could not be read at their last use (none on Redis: its data is
    /// not in files of ours).
    pub fn unreadable_files(&self) -> Vec<&'static str> {
        match self {
            Backend::Memory(m) => m.unreadable_files(),
            Backend::Redis(_) => Vec::new(),
        }
    }

    /// The write-ahead log's counters, where there is one.
    pub fn log_stats(&self) -> Option<LogStats> {
        match self {
            Backend::Memory(m) => Some(m.log_stats()),
            Backend::Redis(_) => None,
        }
    }
}

/// An export in progress ([`Backend::export`]).
pub enum ExportPages<'a> {
    Memory(memory::Export),
    Redis(redis::Export<'a>),
}

impl ExportPages<'_> {
    /// The next page as records with their texts; `None` after the last.
    pub async fn next_records(
        &mut self,
    ) -> Result<Option<Vec<(Arc<Record>, Option<String>)>>, BackendError> {
        match self {
            ExportPages::Memory(e) => e.next_records().await,
            ExportPages::Redis(e) => e.next_records().await,
        }
    }

    /// The next page, each document turned into bytes by `format` (off the
    /// async workers where its text is read from disk); `None` after the last.
    pub async fn next(
        &mut self,
        format: fn(&Record, Option<String>) -> Vec<u8>,
    ) -> Result<Option<Vec<u8>>, BackendError> {
        match self {
            ExportPages::Memory(e) => e.next(format).await,
            ExportPages::Redis(e) => e.next(format).await,
        }
    }
}

/// A document's stored text, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredText {
    Text(String),
    /// No live document has the id.
    Missing,
    /// The collection does not keep texts (`store_text` off).
    NotKept,
    /// The document was written before its collection kept texts.
    StoredWithout,
}

/// The start of a stored document's text and its metadata
/// ([`Backend::excerpts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excerpt {
    /// The first bytes of its stored text (`None`: no text kept).
    pub text: Option<String>,
    /// Whether the stored text goes on after `text`.
    pub text_cut: bool,
    /// Its metadata as stored (JSON text).
    pub metadata: Option<Box<str>>,
}

impl Excerpt {
    /// `text` cut to at most `max` bytes on a character boundary.
    pub(crate) fn new(text: Option<String>, max: usize, metadata: Option<Box<str>>) -> Self {
        let mut text_cut = false;
        let text = text.map(|mut t| {
            if t.len() > max {
                let mut at = max;
                while !t.is_char_boundary(at) {
                    at -= 1;
                }
                t.truncate(at);
                text_cut = true;
            }
            t
        });
        Self {
            text,
            text_cut,
            metadata,
        }
    }
}

/// The write-ahead log's counters (`/metrics`), totals since the start.
/// When a document was stored and its metadata: what dates it for
/// originals (`engine::originals::time_of`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDate {
    pub created_ms: u64,
    /// Its metadata as stored (JSON text).
    pub metadata: Option<Box<str>>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogStats {
    pub appends: u64,
    pub append_nanos: u64,
    pub fsyncs: u64,
    pub fsync_nanos: u64,
    /// Bytes in the log now.
    pub bytes: u64,
    /// Bytes of stored texts on disk.
    pub text_bytes: u64,
    pub writable: bool,
}

// ---- Events, webhooks and the feed (issue 45; types in crate::events) ----

impl Backend {
    /// The collection's webhook subscriptions (secrets included: the caller
    /// never returns them).
    pub async fn subscriptions(&self, dir: &Path) -> Result<Vec<Subscription>, BackendError> {
        match self {
            Backend::Memory(m) => m.subscriptions(dir).await,
            Backend::Redis(r) => r.subscriptions(dir).await,
        }
    }

    /// Store `s` durably (replacing one with its id), unless it is new and
    /// the collection already has `max` subscriptions: checked and stored
    /// in one atomic step, whichever node stores. A new subscription
    /// receives only events appended after it.
    pub async fn put_subscription(
        &self,
        dir: &Path,
        s: Subscription,
        max: usize,
    ) -> Result<SubscriptionPut, BackendError> {
        match self {
            Backend::Memory(m) => m.put_subscription(dir, s, max).await,
            Backend::Redis(r) => r.put_subscription(dir, s, max).await,
        }
    }

    /// Delete subscription `id` with its pending and failed deliveries; false
    /// if there was none.
    pub async fn delete_subscription(&self, dir: &Path, id: &str) -> Result<bool, BackendError> {
        match self {
            Backend::Memory(m) => m.delete_subscription(dir, id).await,
            Backend::Redis(r) => r.delete_subscription(dir, id).await,
        }
    }

    /// Number `drafts` and append them to the event log (the outbox and the
    /// feed), durably before `Ok`.
    pub async fn append_events(
        &self,
        dir: &Path,
        drafts: Vec<EventDraft>,
    ) -> Result<Vec<Event>, BackendError> {
        match self {
            Backend::Memory(m) => m.append_events(dir, drafts).await,
            Backend::Redis(r) => r.append_events(dir, drafts).await,
        }
    }

    /// The feed: up to `limit` events strictly after the cursor `after`,
    /// oldest first.
    pub async fn read_events(
        &self,
        dir: &Path,
        after: Option<&str>,
        limit: usize,
    ) -> Result<EventPage, BackendError> {
        match self {
            Backend::Memory(m) => m.read_events(dir, after, limit).await,
            Backend::Redis(r) => r.read_events(dir, after, limit).await,
        }
    }

    /// Drop events older than `keep_ms` or beyond the newest `keep_max`,
    /// never one a subscription still owes; how many were dropped.
    pub async fn trim_events(
        &self,
        dir: &Path,
        keep_ms: u64,
        keep_max: usize,
        now_ms: u64,
    ) -> Result<usize, BackendError> {
        match self {
            Backend::Memory(m) => m.trim_events(dir, keep_ms, keep_max, now_ms).await,
            Backend::Redis(r) => r.trim_events(dir, keep_ms, keep_max, now_ms).await,
        }
    }

    /// Up to `max` deliveries due to `sub` now: new events it selects and
    /// retries whose time has come (`consumer` names this node).
    pub async fn due_deliveries(
        &self,
        dir: &Path,
        sub: &Subscription,
        consumer: &str,
        now_ms: u64,
        max: usize,
    ) -> Result<Vec<Delivery>, BackendError> {
        match self {
            Backend::Memory(m) => m.due_deliveries(dir, sub, consumer, now_ms, max).await,
            Backend::Redis(r) => r.due_deliveries(dir, sub, consumer, now_ms, max).await,
        }
    }

    /// Record how a delivery attempt ended, durably.
    pub async fn settle(
        &self,
        dir: &Path,
        sub: &Subscription,
        d: &Delivery,
        outcome: Attempt,
    ) -> Result<(), BackendError> {
        self.settle_many(dir, sub, vec![(d, outcome)]).await
    }

    /// [`Self::settle`] of several attempts to `sub` at once (a delivery
    /// round's): one blocking task on the memory backend, one pipelined
    /// trip on Redis.
    pub async fn settle_many(
        &self,
        dir: &Path,
        sub: &Subscription,
        settled: Vec<(&Delivery, Attempt)>,
    ) -> Result<(), BackendError> {
        if settled.is_empty() {
            return Ok(());
        }
        match self {
            Backend::Memory(m) => m.settle_many(dir, sub, settled).await,
            Backend::Redis(r) => r.settle_many(dir, sub, settled).await,
        }
    }

    /// Deliveries to `sub_id` that ran out of attempts, newest first.
    pub async fn failed_deliveries(
        &self,
        dir: &Path,
        sub_id: &str,
        limit: usize,
    ) -> Result<Vec<FailedDelivery>, BackendError> {
        match self {
            Backend::Memory(m) => m.failed_deliveries(dir, sub_id, limit).await,
            Backend::Redis(r) => r.failed_deliveries(dir, sub_id, limit).await,
        }
    }

    /// Put failed deliveries of `sub_id` (one, or all for `None`) back into
    /// delivery with their attempts reset; how many.
    pub async fn retry_failed(
        &self,
        dir: &Path,
        sub_id: &str,
        event_id: Option<&str>,
    ) -> Result<usize, BackendError> {
        match self {
            Backend::Memory(m) => m.retry_failed(dir, sub_id, event_id).await,
            Backend::Redis(r) => r.retry_failed(dir, sub_id, event_id).await,
        }
    }

    /// Deliveries to `sub_id` not yet settled (new or retrying).
    pub async fn pending_deliveries(&self, dir: &Path, sub_id: &str) -> Result<u64, BackendError> {
        match self {
            Backend::Memory(m) => m.pending_deliveries(dir, sub_id).await,
            Backend::Redis(r) => r.pending_deliveries(dir, sub_id).await,
        }
    }
}

// ---- The review desk (issue 46; types in crate::review) ----

impl Backend {
    /// Every decision of the collection whose directory is `dir`, by pair.
    /// Cheap on repeat: the memory backend keeps the set beside its log
    /// after the first read; Redis reads one version counter per call and
    /// the whole hash only when another node changed it.
    pub async fn decisions(&self, dir: &Path) -> Result<Arc<DecisionSet>, BackendError> {
        match self {
            Backend::Memory(m) => m.decisions(dir).await,
            Backend::Redis(r) => r.decisions().await,
        }
    }

    /// Store `d` durably, replacing the pair's decision; the previous one.
    /// The stored revision is the backend's: 1 for a new pair, one more
    /// than the previous decision's ([`Decision::revised`]), whatever `d`
    /// says.
    pub async fn put_decision(
        &self,
        dir: &Path,
        d: Decision,
    ) -> Result<Option<Decision>, BackendError> {
        match self {
            Backend::Memory(m) => m.put_decision(dir, d).await,
            Backend::Redis(r) => r.put_decision(d).await,
        }
    }

    /// Delete the pair's decision durably; the one deleted, if any.
    pub async fn delete_decision(
        &self,
        dir: &Path,
        key: &PairKey,
    ) -> Result<Option<Decision>, BackendError> {
        match self {
            Backend::Memory(m) => m.delete_decision(dir, key).await,
            Backend::Redis(r) => r.delete_decision(key).await,
        }
    }
}

// ---- The review queue's walk (issue 46) ----

impl Backend {
    /// The ids of up to `n` live documents in an order fixed by `seed`
    /// (a keyed hash of each id: [`crate::engine::sample::seeded_order`]),
    /// the same on both backends. Reads every document's id (on Redis, a
    /// `SCAN` and the head of every record).
    pub async fn sample_ids(&self, n: usize, seed: u64) -> Result<Vec<String>, BackendError> {
        match self {
            Backend::Memory(m) => m.sample_ids(n, seed).await,
            Backend::Redis(r) => r.sample_ids(n, seed).await,
        }
    }

    /// [`Self::similar_to_id`] of each of `ids`, in their order (a
    /// document gone meanwhile answers `NotFound`). Blocking, like
    /// [`Self::scan_pairs`]: the memory backend's queries run in parallel
    /// on `pool`, the redis backend's concurrently from this thread.
    pub fn similar_to_many(
        &self,
        ids: &[String],
        q: &Query,
        pool: &rayon::ThreadPool,
    ) -> Vec<Result<QueryOutcome, BackendError>> {
        match self {
            Backend::Memory(m) => pool.install(|| {
                use rayon::prelude::*;
                ids.par_iter()
                    .map(|id| m.engine.similar_to_id(id, q).map_err(BackendError::from))
                    .collect()
            }),
            Backend::Redis(r) => tokio::runtime::Handle::current().block_on(
                futures_util::future::join_all(ids.iter().map(|id| r.similar_to_id(id, q))),
            ),
        }
    }
}
