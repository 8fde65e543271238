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

pub use memory::Memory;
pub use redis::RedisIndex;

use crate::engine::{
    Comparison, EngineError, NewDoc, Prepared, Query, QueryOutcome, Record, UniqueOutcome,
    WriteMode, WriteOutcome,
};
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

    /// Near-duplicates of an unstored document; `exclude` skips one id.
    pub async fn similar_to(
        &self,
        doc: &Prepared,
        exclude: Option<&str>,
        q: &Query,
    ) -> Result<QueryOutcome, BackendError> {
        match self {
            Backend::Memory(m) => Ok(m.engine.similar_to(doc, exclude, q)),
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

    /// The memory backend's store (snapshots, the log, purges), if this is one.
    pub fn store(&self) -> Option<&Arc<crate::persist::Store>> {
        match self {
            Backend::Memory(m) => Some(&m.store),
            Backend::Redis(_) => None,
        }
    }
}
