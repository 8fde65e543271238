//! Collections: several indexes in one service, each with its own recipe,
//! index parameters, retention, data directory and log.
//!
//! [`Collections`] is the one owner of every collection: it opens them at
//! start (the `default` collection from the server's configuration, the
//! named ones from their manifests, see [`LocalCatalog`]), restores
//! them, and creates, changes and deletes them at run time. Each change is
//! durable before it returns and serialized with the others by one lock
//! (`ddl`); lookups take a read lock on the name map and clone an `Arc`
//! out, so requests never wait for a change's I/O.
//!
//! A collection whose files cannot be restored (a damaged file, a recipe
//! that does not match its data) is *failed*: it answers 503
//! `collection-unavailable` with the cause in the log (named with the
//! collection, file and offset), and every other collection is served as
//! usual. Deleting a failed collection removes its files.

mod recipe;
mod reindex;
mod settings;
mod shared;

pub use recipe::Recipe;
pub use reindex::{ReindexJob, ReindexProgress, ReindexState};

pub use settings::{
    empty_body, events_over, integral_floats_to_integers, review_over, stored_normalize,
    BoilerplatePatch, CollectionName, CollectionSettings, EventFeed, InvalidName, Originals,
    Retention, Review, SettingsError, DEFAULT_COLLECTION, MAX_NAME_LEN,
};

use crate::backend::{Backend, SharedCatalog};
use crate::backend::{LocalCatalog, PersistError};
use crate::config::{Config, StorageBackend, StorageSettings};
use crate::engine::{Clock, Engine};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

/// `call` until Redis answers it (blocking; on a blocking thread of the
/// runtime), backing off from 100 ms to 5 s: a node started before its
/// cluster becomes ready when the cluster does. An `Internal` error (a bug
/// or corrupt data, which waiting does not mend) ends it.
fn until_redis_answers<T, F>(
    collection: &CollectionName,
    mut call: impl FnMut() -> F,
) -> Result<T, String>
where
    F: std::future::Future<Output = Result<T, crate::backend::BackendError>>,
{
    let handle = tokio::runtime::Handle::current();
    let mut wait = std::time::Duration::from_millis(100);
    loop {
        match handle.block_on(call()) {
            Ok(answer) => return Ok(answer),
            Err(crate::backend::BackendError::Internal(e)) => return Err(e),
            Err(e) => {
                tracing::warn!(collection = %collection, error = %e, retry_in_ms = wait.as_millis() as u64, "redis is not reachable yet; not ready");
                std::thread::sleep(wait);
                wait = (wait * 2).min(std::time::Duration::from_secs(5));
            }
        }
    }
}

/// A named collection's manifest (`collection.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    /// The manifest format, 1.
    version: u32,
    created_ms: u64,
    /// The subdirectory holding its index files since a reindex (absent:
    /// the collection's directory itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    index_dir: Option<String>,
    #[serde(deserialize_with = "settings::stored")]
    settings: CollectionSettings,
}

const MANIFEST_VERSION: u32 = 1;

/// Where a collection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Its files are being read (at start).
    Restoring,
    /// Serving.
    Ready,
    /// Its files could not be restored; see the log.
    Failed,
}

/// One collection: its settings, its engine and its durable store.
pub struct Collection {
    pub name: CollectionName,
    /// Unique for the life of the process (a collection deleted and
    /// created again under its name gets a new one): keys caches.
    pub id: u64,
    /// When it was created (ms since the epoch; for `default`, the first
    /// start on its data directory).
    pub created_ms: u64,
    /// Its directory (its manifest; for `default`, `storage.data_dir`).
    dir: PathBuf,
    /// The subdirectory of `dir` holding its snapshots, log and texts
    /// since a reindex (`None`: `dir` itself).
    index_dir: Option<String>,
    /// The last reindex's progress, shared with the collection a reindex
    /// switches to.
    reindex: Arc<Mutex<Option<ReindexProgress>>>,
    /// Its settings; only the retention changes (`PATCH`), under `ddl`.
    settings: RwLock<CollectionSettings>,
    /// The recipe (signing, thresholds, the clock and retention): the same
    /// on every backend; the index is the backend's.
    recipe: Recipe,
    /// Where its documents live, set once restored: every read and write
    /// of documents goes through it.
    backend: OnceLock<Backend>,
    /// Why restoring failed, if it did (generic: the details are logged).
    failure: OnceLock<String>,
    /// With the redis backend, the tag of this incarnation of the name in
    /// every key (empty for `default` and with the memory backend).
    incarnation: String,
    /// Serializes this node's changes of its templates (shared with the
    /// collection a reindex switches to).
    templates_lock: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for Collection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collection")
            .field("name", &self.name)
            .field("status", &self.status())
            .field("backend", &self.backend.get())
            .finish()
    }
}

impl Collection {
    pub fn status(&self) -> Status {
        if self.backend.get().is_some() {
            Status::Ready
        } else if self.failure.get().is_some() {
            Status::Failed
        } else {
            Status::Restoring
        }
    }

    /// How it prepares texts and answers: the same on every backend.
    pub fn recipe(&self) -> &Recipe {
        &self.recipe
    }

    /// Where its documents live, once restored.
    pub fn backend(&self) -> Option<&Backend> {
        self.backend.get()
    }

    /// Live documents (0 until restored).
    pub fn documents(&self) -> usize {
        self.backend.get().map_or(0, Backend::documents)
    }

    /// True if it keeps the texts of new writes (`store_text`).
    pub fn stores_text(&self) -> bool {
        self.backend.get().is_some_and(Backend::stores_text)
    }

    pub fn settings(&self) -> CollectionSettings {
        self.settings.read().expect("settings lock").clone()
    }

    /// `originals.time_field`: the metadata field a document's time for
    /// originals is read from (`None`: when it was stored); as `PATCH`
    /// last set it.
    pub fn time_field(&self) -> Option<String> {
        self.settings
            .read()
            .expect("settings lock")
            .originals
            .time_field
            .clone()
    }

    /// Its `events` setting (the feed without a webhook), as `PATCH` last
    /// set it.
    pub fn events(&self) -> EventFeed {
        self.settings.read().expect("settings lock").events
    }

    /// Its `review` setting (exclusion of pairs judged not duplicates, the
    /// snippets' title field), as `PATCH` last set it.
    pub fn review(&self) -> Review {
        self.settings.read().expect("settings lock").review.clone()
    }

    /// The pairs its duplicate scans and `if_unique` writes leave out:
    /// with `review.exclude_not_duplicates` on, those its moderators
    /// judged `not_duplicate` (read from the backend now, so a decision
    /// just written counts); `None` when the setting is off, there are no
    /// such pairs or it is not restored (an answer is then the same as
    /// without the setting, and is cached as one).
    pub async fn excluded_pairs(
        &self,
    ) -> Result<Option<Arc<crate::engine::ExcludedPairs>>, crate::backend::BackendError> {
        if !self.review().exclude_not_duplicates {
            return Ok(None);
        }
        let Some(backend) = self.backend() else {
            return Ok(None);
        };
        let pairs = backend.decisions(&self.dir).await?.not_duplicate_pairs();
        Ok((!pairs.is_empty()).then(|| Arc::new(pairs)))
    }

    /// What went wrong restoring it, if it failed.
    pub fn failure(&self) -> Option<&str> {
        self.failure.get().map(String::as_str)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The subdirectory its index files are in, if not `dir` itself.
    fn index_dir(&self) -> Option<String> {
        self.index_dir.clone()
    }

    /// Where its snapshots, log and texts are.
    pub fn store_dir(&self) -> PathBuf {
        match &self.index_dir {
            Some(sub) => self.dir.join(sub),
            None => self.dir.clone(),
        }
    }

    /// Read the registered templates from its storage and make them the
    /// engine's (at open, after a change, and when another node changed
    /// them). A collection not yet restored has none to read.
    pub async fn refresh_templates(&self) -> Result<usize, crate::backend::BackendError> {
        let Some(backend) = self.backend() else {
            return Ok(0);
        };
        let templates = backend.templates(&self.dir).await?;
        self.recipe.engine().use_templates(&templates);
        Ok(templates.len())
    }

    /// Register (or replace) the template `id`: durable, and its shingles
    /// boilerplate on this node, when this returns. True if it is new;
    /// `TooManyTemplates` past [`MAX_TEMPLATES`](crate::engine::MAX_TEMPLATES).
    pub async fn put_template(
        &self,
        template: crate::engine::Template,
    ) -> Result<bool, CollectionError> {
        let backend = self
            .backend()
            .ok_or_else(|| CollectionError::Unavailable(self.name.to_string()))?;
        let _one = self.templates_lock.lock().await;
        let all = backend.templates(&self.dir).await?;
        if all.len() >= crate::engine::MAX_TEMPLATES && !all.iter().any(|t| t.id == template.id) {
            return Err(CollectionError::TooManyTemplates(
                crate::engine::MAX_TEMPLATES,
            ));
        }
        let created = backend.put_template(&self.dir, template).await?;
        self.refresh_templates().await?;
        Ok(created)
    }

    /// Delete the template `id`; false if there was none.
    pub async fn delete_template(&self, id: &str) -> Result<bool, CollectionError> {
        let backend = self
            .backend()
            .ok_or_else(|| CollectionError::Unavailable(self.name.to_string()))?;
        let _one = self.templates_lock.lock().await;
        let gone = backend.delete_template(&self.dir, id).await?;
        self.refresh_templates().await?;
        Ok(gone)
    }

    /// [`Self::refresh_templates`] from a blocking thread; a failure is
    /// logged (the collection serves without them until the next refresh).
    fn refresh_templates_blocking(&self) {
        if let Err(e) = tokio::runtime::Handle::current().block_on(self.refresh_templates()) {
            tracing::error!(collection = %self.name, error = %e, "the collection's templates cannot be read; content scores count their text as content until they are");
        }
    }

    /// The last reindex's progress, if one ran since the start.
    pub fn reindex_progress(&self) -> Option<ReindexProgress> {
        self.reindex.lock().expect("reindex lock").clone()
    }
}

/// Why a collection operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum CollectionError {
    #[error("no collection named {0:?}")]
    NotFound(String),
    #[error(transparent)]
    InvalidName(#[from] InvalidName),
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error(
        "collection {name:?} exists with other settings: {key} is {existing}, the request asks for {requested}"
    )]
    Conflict {
        name: String,
        key: String,
        /// The values, as JSON text.
        existing: String,
        requested: String,
    },
    #[error("{0}")]
    Protected(&'static str),
    /// Its files could not be restored at start.
    #[error("collection {0:?} is unavailable: its files could not be restored (see the server log); repair them or delete the collection")]
    Unavailable(String),
    #[error("the server already holds {0} collections (limits.max_collections)")]
    TooMany(usize),
    #[error("the collection already holds {0} templates, the most it may; delete one first")]
    TooManyTemplates(usize),
    /// The operation needs stored texts the collection does not have.
    #[error("{0}")]
    TextNotStored(String),
    #[error("a reindex of collection {0:?} is already running; its progress is in the collection's stats")]
    ReindexRunning(String),
    /// The collection was deleted while a reindex of it ran.
    #[error("collection {0:?} was deleted during the reindex")]
    Deleted(String),
    /// The change could not be made durable (logged with its cause).
    #[error("the collection change could not be written: {0}")]
    Storage(#[from] PersistError),
    /// The shared storage (Redis) could not make or read the change.
    #[error(transparent)]
    Backend(#[from] crate::backend::BackendError),
}

/// Every collection of the server.
pub struct Collections {
    /// The collections in `storage.data_dir` (with the memory backend; the
    /// `default` collection's creation time with either).
    local: LocalCatalog,
    /// Storage settings every collection's store uses (its own directory aside).
    storage: StorageSettings,
    /// What a new collection's body leaves out comes from here.
    defaults: CollectionSettings,
    /// `limits.max_collections`, `default` included.
    max: usize,
    /// The clock of every engine (expiry, `created_at`).
    clock: Arc<dyn Clock>,
    /// Name → collection. Read per request (cheap read lock, `Arc` cloned
    /// out); written only by the changes below.
    map: RwLock<BTreeMap<String, Arc<Collection>>>,
    /// Serializes creations, changes and deletions (each does I/O).
    ddl: Mutex<()>,
    next_id: AtomicU64,
    /// The catalog every node shares, when `storage.backend = "redis"`
    /// (`None`: this node's catalog is its data directory).
    shared: Option<SharedCatalog>,
    /// Moved by every collection this node creates or deletes in the
    /// catalog: a catalog read older than such a change applies no
    /// removals (it may predate the creation).
    catalog_epoch: AtomicU64,
    /// Collections the catalog watch dropped here (deleted through another
    /// node), until the metrics take them: their series go too.
    dropped: Mutex<Vec<String>>,
    /// The configuration names `normalize.version`: the `default`
    /// collection uses it whatever its data is written with (a mismatch is
    /// refused as the data is opened).
    version_pinned: bool,
}

impl std::fmt::Debug for Collections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collections")
            .field("collections", &self.map.read().expect("map lock").len())
            .finish()
    }
}

impl Collections {
    /// Find the collections in `storage.data_dir` (nothing is restored yet:
    /// see [`Self::restore`]). Fails only if the directory itself cannot be
    /// read; a collection whose manifest is damaged is listed as failed.
    pub fn open(config: &Config, clock: Arc<dyn Clock>) -> Result<Self, PersistError> {
        let data_dir = config.storage.data_dir.clone();
        let local = LocalCatalog::new(&data_dir);
        local.clean_leftovers()?;
        // A new collection stores texts only if its body says so;
        // `storage.store_text` is the default collection's.
        let defaults = CollectionSettings {
            shingle: config.shingle,
            normalize: config.normalize,
            index: config.index.clone(),
            retention: config.retention,
            store_text: false,
            originals: config.originals.clone(),
            events: config.events.feed_defaults(),
            review: config.review.clone(),
        };
        let this = Self {
            local: local.clone(),
            storage: config.storage.clone(),
            defaults: defaults.clone(),
            max: config.limits.max_collections,
            clock,
            map: RwLock::new(BTreeMap::new()),
            ddl: Mutex::new(()),
            next_id: AtomicU64::new(1),
            shared: (config.storage.backend == StorageBackend::Redis)
                .then(|| SharedCatalog::new(config.storage.redis.clone())),
            catalog_epoch: AtomicU64::new(0),
            dropped: Mutex::new(Vec::new()),
            version_pinned: config.normalize_version_pinned(),
        };
        let record = local.default_collection(this.clock.now_ms())?;
        let mut settings = CollectionSettings {
            store_text: config.storage.store_text,
            ..defaults
        };
        // The data keeps the recipe it was written with, unless the
        // configuration names a version (then the files' fingerprints
        // are checked against it as they are restored).
        let version = match record.text_version {
            Some(v) if !config.normalize_version_pinned() => v,
            _ => config.normalize.version,
        };
        settings.normalize.version = version;
        let valid = settings.validate().map_err(|e| {
            PersistError::Unrecoverable(format!(
                "the default collection's data is written with normalize.version {version}, \
                 and the configured recipe does not go with it: {e}; set normalize.version \
                 explicitly, or point storage.data_dir at an empty directory"
            ))
        })?;
        if version != config.normalize.version {
            tracing::info!(
                normalize_version = version,
                configured = config.normalize.version,
                "the default collection keeps the text recipe its data is written with"
            );
        }
        local.record_default_collection(crate::backend::DefaultCollection {
            created_ms: record.created_ms,
            text_version: Some(record.text_version.unwrap_or(version)),
        })?;
        let default = this.build(
            CollectionName::default_collection(),
            data_dir,
            settings,
            record.created_ms,
            Some(valid),
        );
        this.insert(default);
        for (name, dir) in local.list()? {
            let Ok(name) = CollectionName::parse(&name) else {
                tracing::warn!(dir = %dir.display(), "ignoring a directory that is not a collection name");
                continue;
            };
            let collection = match LocalCatalog::read_manifest::<Manifest>(&dir) {
                Ok(m) => match m.settings.validate() {
                    Ok(valid) => {
                        // What an interrupted or finished reindex left.
                        if let Err(e) =
                            LocalCatalog::clean_reindex_leftovers(&dir, m.index_dir.as_deref())
                        {
                            tracing::warn!(collection = %name, error = %e, "could not remove what a reindex left");
                        }
                        this.build_in(
                            name,
                            dir,
                            m.index_dir,
                            m.settings,
                            m.created_ms,
                            Some(valid),
                        )
                    }
                    Err(e) => this.failed(
                        name,
                        dir,
                        format!("its manifest holds invalid settings: {e}"),
                    ),
                },
                Err(e) => this.failed(name, dir, e.to_string()),
            };
            this.insert(collection);
        }
        Ok(this)
    }

    /// A collection of `settings` in `dir` (not yet restored). With
    /// `valid` = `None` the settings were refused: see [`Self::failed`].
    fn build(
        &self,
        name: CollectionName,
        dir: PathBuf,
        settings: CollectionSettings,
        created_ms: u64,
        valid: Option<crate::engine::ValidParams>,
    ) -> Collection {
        self.build_in(name, dir, None, settings, created_ms, valid)
    }

    /// [`Self::build`] with its index files in `dir/index_dir`.
    fn build_in(
        &self,
        name: CollectionName,
        dir: PathBuf,
        index_dir: Option<String>,
        settings: CollectionSettings,
        created_ms: u64,
        valid: Option<crate::engine::ValidParams>,
    ) -> Collection {
        let valid = valid.unwrap_or_default();
        let engine = Engine::with_clock(valid, Arc::clone(&self.clock));
        engine.set_retention(settings.retention.ttl());
        // The text tables, once per normalization options and process,
        // here (at startup, or as the collection is created or found)
        // rather than in its first request with non-ASCII text.
        engine.warm();
        Collection {
            name,
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            created_ms,
            dir,
            index_dir,
            reindex: Arc::new(Mutex::new(None)),
            settings: RwLock::new(settings),
            recipe: Recipe::new(Arc::new(engine)),
            backend: OnceLock::new(),
            failure: OnceLock::new(),
            incarnation: String::new(),
            templates_lock: Default::default(),
        }
    }

    /// A collection that cannot be opened; `why` is logged with its name.
    fn failed(&self, name: CollectionName, dir: PathBuf, why: String) -> Collection {
        tracing::error!(collection = %name, dir = %dir.display(), error = %why, "collection cannot be opened; it answers 503 until it is repaired or deleted");
        let c = self.build(name, dir, self.defaults.clone(), 0, None);
        let _ = c.failure.set(why);
        c
    }

    fn insert(&self, c: Collection) {
        self.map
            .write()
            .expect("map lock")
            .insert(c.name.as_str().to_owned(), Arc::new(c));
    }

    fn storage_for(&self, dir: &Path, settings: &CollectionSettings) -> StorageSettings {
        StorageSettings {
            data_dir: dir.to_owned(),
            store_text: settings.store_text,
            ..self.storage.clone()
        }
    }

    /// False while the storage every collection shares cannot serve (the
    /// last check of the Redis Cluster failed); always true in memory.
    pub fn storage_healthy(&self) -> bool {
        self.shared.as_ref().is_none_or(SharedCatalog::is_healthy)
    }

    /// How often [`Self::watch`] should run: `None` when nothing is shared
    /// with other nodes (the memory backend).
    pub fn watch_interval(&self) -> Option<std::time::Duration> {
        self.shared.as_ref().map(SharedCatalog::watch_interval)
    }

    /// One watch of the shared storage: check the cluster (what
    /// [`Self::storage_healthy`] answers), then bring this node's
    /// collections in line with the catalog other nodes change too.
    pub async fn watch(&self) {
        let Some(shared) = &self.shared else { return };
        if shared.check().await {
            if let Err(e) = self.sync_catalog().await {
                tracing::warn!(error = %e, "reading the collection catalog in redis failed; retried");
            }
        }
    }

    /// Append the shared storage's own metrics (`neardup_redis_*`) to `out`.
    pub fn encode_storage_metrics(&self, out: &mut String) {
        if let Some(shared) = &self.shared {
            shared.encode_metrics(out);
        }
    }

    /// The `default` collection with the text recipe version its keys in
    /// Redis are written with, unless the configuration names one (the
    /// data directory's record is this node's own; the keys are every
    /// node's). Waits for Redis as [`Self::open_in_redis`] does.
    fn default_as_written(&self, c: Arc<Collection>, shared: &SharedCatalog) -> Arc<Collection> {
        if self.version_pinned {
            return c;
        }
        let Ok(written) = until_redis_answers(&c.name, || shared.default_text_version()) else {
            // Unreadable: opening the collection reports it.
            return c;
        };
        let mut settings = c.settings();
        match written {
            Some(v) if v != settings.normalize.version => settings.normalize.version = v,
            _ => return c,
        }
        let Ok(valid) = settings.validate() else {
            // Its configured steps need another version: opening it
            // refuses the keys' recipe, naming both.
            return c;
        };
        tracing::info!(
            normalize_version = settings.normalize.version,
            "the default collection keeps the text recipe its keys in redis are written with"
        );
        let rebuilt = self.build(
            c.name.clone(),
            c.dir.clone(),
            settings,
            c.created_ms,
            Some(valid),
        );
        self.insert(rebuilt);
        self.default_collection()
    }

    /// Open a collection kept in Redis (blocking; on a blocking thread of
    /// the runtime): retried until Redis answers, so a node started before
    /// its cluster becomes ready when the cluster does.
    fn open_in_redis(&self, c: &Collection, shared: &SharedCatalog) {
        let opened = until_redis_answers(&c.name, || {
            shared.open(
                Arc::clone(c.recipe.engine()),
                c.name.as_str(),
                &c.incarnation,
            )
        });
        match opened {
            Ok(backend) => {
                backend.set_store_text(c.settings().store_text);
                tracing::info!(collection = %c.name, documents = backend.documents(), "collection opened in redis");
                let _ = c.backend.set(backend);
                c.refresh_templates_blocking();
            }
            Err(e) => {
                tracing::error!(collection = %c.name, error = %e, "collection cannot be opened in redis; it answers 503 until it is repaired or deleted");
                let _ = c.failure.set(e);
            }
        }
    }

    /// Restore every collection not yet restored (blocking; at start). A
    /// collection that fails is marked failed and the others go on.
    pub fn restore(&self) {
        for c in self.list() {
            if c.status() != Status::Restoring {
                continue;
            }
            if let Some(shared) = &self.shared {
                let c = if c.name.is_default() {
                    self.default_as_written(c, shared)
                } else {
                    c
                };
                self.open_in_redis(&c, shared);
                continue;
            }
            match LocalCatalog::open(
                c.name.as_str(),
                Arc::clone(c.recipe.engine()),
                &self.storage_for(&c.store_dir(), &c.settings()),
            ) {
                Ok(backend) => {
                    let _ = c.backend.set(backend);
                    c.refresh_templates_blocking();
                }
                Err(e) => {
                    tracing::error!(collection = %c.name, error = %e, "collection cannot be restored; it answers 503 until it is repaired or deleted");
                    c.recipe.engine().clear();
                    let _ = c.failure.set(e.to_string());
                }
            }
        }
    }

    /// The collection named `name`, if there is one.
    pub fn get(&self, name: &str) -> Option<Arc<Collection>> {
        self.map.read().expect("map lock").get(name).cloned()
    }

    /// [`Self::get`], and with the redis backend the catalog on a miss
    /// (blocking: call it off the async workers).
    fn lookup(&self, name: &str) -> Result<Option<Arc<Collection>>, CollectionError> {
        match self.get(name) {
            Some(c) => Ok(Some(c)),
            None if self.shared.is_some() => {
                Ok(tokio::runtime::Handle::current().block_on(self.find(name))?)
            }
            None => Ok(None),
        }
    }

    /// The names the catalog watch dropped since the last call.
    pub fn take_dropped(&self) -> Vec<String> {
        std::mem::take(&mut *self.dropped.lock().expect("dropped lock"))
    }

    /// The collection the unprefixed routes serve.
    pub fn default_collection(&self) -> Arc<Collection> {
        self.get(DEFAULT_COLLECTION)
            .expect("the default collection always exists")
    }

    /// Every collection, by name.
    pub fn list(&self) -> Vec<Arc<Collection>> {
        self.map
            .read()
            .expect("map lock")
            .values()
            .cloned()
            .collect()
    }

    pub fn len(&self) -> usize {
        self.map.read().expect("map lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Settings a new collection gets for what its body leaves out.
    pub fn defaults(&self) -> &CollectionSettings {
        &self.defaults
    }

    /// `PUT /collections/{name}` (blocking: it does I/O). Creates the
    /// collection from `body` over the defaults and returns it with `true`;
    /// if it exists with the same settings, returns it with `false`; with
    /// other settings, [`CollectionError::Conflict`] naming the first key.
    pub fn create(
        &self,
        name: &str,
        body: &Value,
    ) -> Result<(Arc<Collection>, bool), CollectionError> {
        let name = CollectionName::parse(name)?;
        let (settings, valid) = CollectionSettings::from_body(&self.defaults, body)?;
        let _ddl = self.ddl.lock().expect("ddl lock");
        if self.shared.is_some() && !name.is_default() {
            return self.create_shared(name, settings, body);
        }
        if let Some(existing) = self.get(name.as_str()) {
            let current = existing.settings();
            return match current.conflict_with(&settings, body) {
                None => Ok((existing, false)),
                Some((key, existing_value, requested)) => Err(CollectionError::Conflict {
                    name: name.to_string(),
                    key,
                    existing: existing_value.to_string(),
                    requested: requested.to_string(),
                }),
            };
        }
        if self.len() >= self.max {
            return Err(CollectionError::TooMany(self.max));
        }
        let created_ms = self.clock.now_ms();
        let manifest = Manifest {
            version: MANIFEST_VERSION,
            created_ms,
            index_dir: None,
            settings: settings.clone(),
        };
        let dir = self.local.create(name.as_str(), &manifest)?;
        let c = self.build(name.clone(), dir, settings, created_ms, Some(valid));
        let backend = LocalCatalog::open(
            name.as_str(),
            Arc::clone(c.recipe.engine()),
            &self.storage_for(&c.dir, &c.settings()),
        )?;
        let _ = c.backend.set(backend);
        let c = Arc::new(c);
        self.map
            .write()
            .expect("map lock")
            .insert(name.as_str().to_owned(), Arc::clone(&c));
        tracing::info!(collection = %name, "collection created");
        Ok((c, true))
    }

    /// `PATCH /collections/{name}` (blocking): change the retention and/or
    /// whether texts are stored, durably, with no rebuild. A new retention
    /// applies at once to every document without an expiry of its own;
    /// `store_text` on keeps the texts of writes from now on, off stops and
    /// drops the stored texts at the next snapshot.
    ///
    /// `passage_index` on builds the passage index from the stored
    /// documents' fingerprints before this returns (every node's writes
    /// keep it from when they see the change); off drops it.
    // One optional argument per changeable setting, as the PATCH body has them.
    #[allow(clippy::too_many_arguments)]
    pub fn change(
        &self,
        name: &str,
        retention: Option<Retention>,
        store_text: Option<bool>,
        passage_index: Option<bool>,
        boilerplate: Option<settings::BoilerplatePatch>,
        originals: Option<settings::Originals>,
        events: Option<Value>,
        review: Option<Value>,
    ) -> Result<Arc<Collection>, CollectionError> {
        if let Some(r) = &retention {
            r.check().map_err(SettingsError::Retention)?;
        }
        if let Some(o) = &originals {
            o.check().map_err(SettingsError::Originals)?;
        }
        let _ddl = self.ddl.lock().expect("ddl lock");
        let c = self
            .lookup(name)?
            .ok_or_else(|| CollectionError::NotFound(name.to_owned()))?;
        if c.name.is_default() {
            return Err(CollectionError::Protected(if retention.is_some() {
                "the default collection's retention comes from the server configuration (retention.ttl_secs)"
            } else if store_text.is_some() {
                "whether the default collection stores texts comes from the server configuration (storage.store_text)"
            } else if passage_index.is_some() {
                "whether the default collection keeps the passage index comes from the server configuration (index.passage_index)"
            } else if originals.is_some() {
                "the default collection's originals.time_field comes from the server configuration (originals.time_field)"
            } else if events.is_some() {
                "the default collection's events settings come from the server configuration (events.feed, events.measure, events.score, events.threshold)"
            } else if review.is_some() {
                "the default collection's review settings come from the server configuration (review.exclude_not_duplicates, review.snippet_field)"
            } else {
                "the default collection's boilerplate settings come from the server configuration (index.boilerplate)"
            }));
        }
        // The new `events` setting, checked against the recipe and the
        // boilerplate detection this change leaves, before anything changes.
        let events = match &events {
            Some(patch) => {
                let mut next = c.settings();
                next.events = settings::events_over(&next.events, patch)?;
                if let Some(b) = &boilerplate {
                    next.index.boilerplate = b.apply(&next.index.boilerplate)?;
                }
                next.check_events(c.recipe.bands().min_query_threshold)?;
                Some(next.events)
            }
            None => {
                if let Some(b) = &boilerplate {
                    let mut next = c.settings();
                    next.index.boilerplate = b.apply(&next.index.boilerplate)?;
                    next.check_events(c.recipe.bands().min_query_threshold)?;
                }
                None
            }
        };
        let review = match &review {
            Some(patch) => Some(settings::review_over(&c.settings().review, patch)?),
            None => None,
        };
        if self.shared.is_some() {
            let mut settings = c.settings();
            if let Some(e) = events {
                settings.events = e;
            }
            if let Some(r) = review {
                settings.review = r;
            }
            if let Some(r) = retention {
                settings.retention = r;
            }
            if let Some(on) = store_text {
                settings.store_text = on;
            }
            if let Some(on) = passage_index {
                settings.index.passage_index = on;
            }
            if let Some(o) = originals {
                settings.originals = o;
            }
            if let Some(b) = &boilerplate {
                settings.index.boilerplate = b.apply(&settings.index.boilerplate)?;
                c.recipe
                    .engine()
                    .set_boilerplate_params(settings.index.boilerplate.clone());
            }
            self.change_shared(&c, settings)?;
            return Ok(c);
        }
        let Some(backend) = c.backend() else {
            return Err(CollectionError::Unavailable(c.name.to_string()));
        };
        if retention.is_some() {
            // What has expired under the old retention stays expired: purge
            // it before a longer retention (or none) could make it live again.
            if let Err(e) = tokio::runtime::Handle::current().block_on(backend.purge_expired()) {
                tracing::warn!(collection = %c.name, error = %e, "purging before a retention change failed");
            }
        }
        let mut settings = c.settings();
        if let Some(r) = retention {
            settings.retention = r;
        }
        if let Some(on) = store_text {
            settings.store_text = on;
        }
        if let Some(o) = originals {
            settings.originals = o;
        }
        if let Some(e) = events {
            settings.events = e;
        }
        if let Some(r) = review {
            settings.review = r;
        }
        if let Some(on) = passage_index {
            settings.index.passage_index = on;
            tokio::runtime::Handle::current().block_on(backend.set_passage_index(on))?;
        }
        if let Some(b) = &boilerplate {
            let b = b.apply(&settings.index.boilerplate)?;
            let on = b.enabled;
            c.recipe.engine().set_boilerplate_params(b.clone());
            settings.index.boilerplate = b;
            tokio::runtime::Handle::current().block_on(backend.set_boilerplate(on))?;
        }
        let manifest = Manifest {
            version: MANIFEST_VERSION,
            created_ms: c.created_ms,
            index_dir: c.index_dir(),
            settings: settings.clone(),
        };
        LocalCatalog::write_manifest(&c.dir, &manifest)?;
        *c.settings.write().expect("settings lock") = settings.clone();
        c.recipe.engine().set_retention(settings.retention.ttl());
        backend.set_store_text(settings.store_text);
        tracing::info!(collection = %c.name, ttl_secs = settings.retention.ttl_secs, store_text = settings.store_text, passage_index = settings.index.passage_index, events_feed = settings.events.feed, exclude_not_duplicates = settings.review.exclude_not_duplicates, "collection settings changed");
        Ok(c)
    }

    /// `DELETE /collections/{name}` (blocking): gone durably when this
    /// returns; its memory goes with the last request still holding it.
    pub fn delete(&self, name: &str) -> Result<Arc<Collection>, CollectionError> {
        if name == DEFAULT_COLLECTION {
            return Err(CollectionError::Protected(
                "the default collection cannot be deleted",
            ));
        }
        let _ddl = self.ddl.lock().expect("ddl lock");
        if self.shared.is_some() {
            return self.delete_shared(name);
        }
        let c = self
            .get(name)
            .ok_or_else(|| CollectionError::NotFound(name.to_owned()))?;
        if let Some(backend) = c.backend() {
            backend.retire();
        }
        self.local.remove(name)?;
        self.map.write().expect("map lock").remove(name);
        tracing::info!(collection = %c.name, documents = c.documents(), "collection deleted");
        Ok(c)
    }
}
