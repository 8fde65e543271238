//! The memory backend: the engine's maps in this process, every write
//! through the collection's [`Store`] (write-ahead log, then apply), on a
//! blocking thread because it may wait for an fsync. Reads call the engine
//! directly on the caller's thread, as before the seam existed.

use super::BackendError;
use crate::engine::{Engine, EngineError, NewDoc, Query, UniqueOutcome, WriteMode, WriteOutcome};
use crate::persist::Store;
use std::sync::Arc;

/// One collection held in memory.
pub struct Memory {
    /// The index; readers use it directly.
    pub engine: Arc<Engine>,
    /// The durable write path over `engine`.
    pub store: Arc<Store>,
}

impl Memory {
    pub fn new(engine: Arc<Engine>, store: Arc<Store>) -> Self {
        Self { engine, store }
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
}
