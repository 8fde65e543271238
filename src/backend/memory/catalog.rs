//! The memory backend's catalog of collections: directories in
//! `storage.data_dir` (see [`persist::catalog`](crate::persist::catalog):
//! every change atomic and durable before it is acknowledged), and the
//! store each collection's index is restored from.

use super::super::Backend;
use crate::config::StorageSettings;
use crate::engine::Engine;
pub use crate::persist::catalog::DefaultCollection;
use crate::persist::{catalog, PersistError, Store};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The collections kept under one data directory.
#[derive(Debug, Clone)]
pub struct LocalCatalog {
    data_dir: PathBuf,
}

impl LocalCatalog {
    pub fn new(data_dir: &Path) -> Self {
        Self {
            data_dir: data_dir.to_owned(),
        }
    }

    fn root(&self) -> PathBuf {
        catalog::root(&self.data_dir)
    }

    /// The directory a named collection lives in.
    pub fn dir_of(&self, name: &str) -> PathBuf {
        self.root().join(name)
    }

    /// Remove what an interrupted create or delete left; how many.
    pub fn clean_leftovers(&self) -> Result<usize, PersistError> {
        catalog::clean_leftovers(&self.root())
    }

    /// The `default` collection's creation time (`now` on the first
    /// start) and the text recipe version its data is written with, if
    /// it has data or a record of one.
    pub fn default_collection(&self, now: u64) -> Result<DefaultCollection, PersistError> {
        catalog::default_collection(&self.data_dir, now)
    }

    /// Keep `record` as the `default` collection's (atomic, durable).
    pub fn record_default_collection(&self, record: DefaultCollection) -> Result<(), PersistError> {
        catalog::record_default_collection(&self.data_dir, record)
    }

    /// Every named collection's (name, directory).
    pub fn list(&self) -> Result<Vec<(String, PathBuf)>, PersistError> {
        catalog::list(&self.root())
    }

    /// The manifest in `dir`.
    pub fn read_manifest<T: DeserializeOwned>(dir: &Path) -> Result<T, PersistError> {
        catalog::read_manifest(dir)
    }

    /// Create the collection `name` with `manifest` (atomic); its directory.
    pub fn create<T: Serialize>(&self, name: &str, manifest: &T) -> Result<PathBuf, PersistError> {
        catalog::create(&self.root(), name, manifest)
    }

    /// Replace the manifest in `dir` (atomic): a change's commit point.
    pub fn write_manifest<T: Serialize>(dir: &Path, manifest: &T) -> Result<(), PersistError> {
        catalog::write_manifest(dir, manifest)
    }

    /// The registered templates kept in the collection directory `dir`
    /// (none if it has no file).
    pub fn read_templates(dir: &Path) -> Result<Vec<crate::engine::Template>, PersistError> {
        catalog::read_templates(dir)
    }

    /// Replace the templates kept in `dir` (atomic).
    pub fn write_templates(
        dir: &Path,
        templates: &[crate::engine::Template],
    ) -> Result<(), PersistError> {
        catalog::write_templates(dir, templates)
    }

    /// Delete the collection `name` (atomic).
    pub fn remove(&self, name: &str) -> Result<(), PersistError> {
        catalog::remove(&self.root(), name)
    }

    /// Remove what reindexes left in `dir` (index directories other than
    /// `current`, and old index files beside the manifest when the index
    /// lives in `current`).
    pub fn clean_reindex_leftovers(dir: &Path, current: Option<&str>) -> Result<(), PersistError> {
        catalog::clean_reindex_leftovers(dir, current)
    }

    /// Restore the index of `engine`'s recipe kept in `settings.data_dir`
    /// (newest valid snapshot, then the log), logged as `collection`'s.
    pub fn open(
        collection: &str,
        engine: Arc<Engine>,
        settings: &StorageSettings,
    ) -> Result<Backend, PersistError> {
        let store = Store::open(Arc::clone(&engine), settings)?;
        let r = &store.recovery;
        tracing::info!(
            collection,
            documents = r.documents,
            snapshot = r.snapshot.as_ref().map(|p| p.display().to_string()),
            replayed_records = r.replayed_records,
            torn_bytes_dropped = r.torn_bytes_dropped,
            seconds = r.seconds,
            "collection restored"
        );
        Ok(Backend::in_memory(engine, Arc::new(store)))
    }
}
