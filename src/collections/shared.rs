//! Named collections with the redis backend: the catalog lives in Redis,
//! so every neardup node serves the same collections.
//!
//! The catalog is one hash, `{prefix}:catalog`: field = the collection's
//! name, value = its entry (JSON: settings, creation time and an
//! *incarnation*, a random tag in every key of the collection, so a name
//! deleted and created again never meets the old collection's keys).
//! Creating, changing and deleting are single scripts on that hash (the
//! commit points); the node that made the change applies it at once, the
//! others when they next read the catalog (every
//! `storage.redis.watch_interval_ms`, and on a request naming a collection
//! they do not know yet). A deleted collection's keys are removed in the
//! background after two watch intervals, when every node has stopped
//! writing to them. The `default` collection is not in the catalog: its
//! settings are the configuration's, as with the memory backend.

use super::{Collection, CollectionError, CollectionName, CollectionSettings, Collections};
use crate::backend::{BackendError, Created, SharedCatalog, HEARTBEAT_MS};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The catalog entry format.
const ENTRY_VERSION: u32 = 1;

/// A named collection as the catalog holds it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Entry {
    version: u32,
    created_ms: u64,
    /// Random, hex: part of every key of this incarnation of the name.
    incarnation: String,
    #[serde(deserialize_with = "super::settings::stored")]
    settings: CollectionSettings,
    /// A reindex in progress: writes to the collection wait (503) on every
    /// node until it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reindex: Option<Mark>,
}

/// The reindex a catalog entry announces.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Mark {
    /// The incarnation the new index is built under.
    incarnation: String,
    #[serde(deserialize_with = "super::settings::stored")]
    settings: CollectionSettings,
    started_ms: u64,
}

fn decode(name: &str, raw: &str) -> Result<Entry, BackendError> {
    let e: Entry = serde_json::from_str(raw).map_err(|e| {
        BackendError::Internal(format!("catalog entry of collection {name:?}: {e}"))
    })?;
    if e.version != ENTRY_VERSION {
        return Err(BackendError::Internal(format!(
            "catalog entry of collection {name:?} has format {}, this release reads {ENTRY_VERSION}",
            e.version
        )));
    }
    Ok(e)
}

impl Collections {
    fn shared(&self) -> &SharedCatalog {
        self.shared.as_ref().expect("the redis backend")
    }

    /// The catalog, name → entry (one trip). An entry that cannot be read
    /// is logged and skipped (its collection is not served here).
    async fn read_catalog(&self) -> Result<BTreeMap<String, Entry>, BackendError> {
        let raw = self.shared().read_all().await?;
        let mut out = BTreeMap::new();
        for (name, value) in raw {
            match decode(&name, &value) {
                Ok(e) => {
                    out.insert(name, e);
                }
                Err(e) => {
                    tracing::error!(collection = %name, error = %e, "unreadable catalog entry; the collection is not served")
                }
            }
        }
        Ok(out)
    }

    /// A collection of `entry`, opened in Redis.
    async fn open_entry(
        &self,
        name: CollectionName,
        entry: &Entry,
    ) -> Result<Collection, BackendError> {
        let valid = entry.settings.validate().map_err(|e| {
            BackendError::Internal(format!(
                "catalog entry of collection {name:?} holds invalid settings: {e}"
            ))
        })?;
        let dir = self.local.dir_of(name.as_str());
        let mut c = self.build(
            name.clone(),
            dir,
            entry.settings.clone(),
            entry.created_ms,
            Some(valid),
        );
        c.incarnation = entry.incarnation.clone();
        let backend = self
            .shared()
            .open(
                Arc::clone(c.recipe.engine()),
                name.as_str(),
                &entry.incarnation,
            )
            .await?;
        backend.set_store_text(entry.settings.store_text);
        backend.set_paused(entry.reindex.is_some());
        let _ = c.backend.set(backend);
        c.refresh_templates().await?;
        Ok(c)
    }

    /// Put `c` in the map unless it already holds this incarnation; the
    /// collection now under the name.
    fn adopt(&self, c: Collection) -> Arc<Collection> {
        let mut map = self.map.write().expect("map lock");
        if let Some(cur) = map.get(c.name.as_str()) {
            if cur.incarnation == c.incarnation {
                return Arc::clone(cur);
            }
        }
        let c = Arc::new(c);
        map.insert(c.name.as_str().to_owned(), Arc::clone(&c));
        c
    }

    /// Apply `entry`'s changeable settings (retention, store_text) to `c`.
    fn apply(c: &Collection, entry: &Entry) {
        if let Some(backend) = c.backend() {
            backend.set_paused(entry.reindex.is_some());
        }
        let mut settings = c.settings.write().expect("settings lock");
        if *settings == entry.settings {
            return;
        }
        *settings = entry.settings.clone();
        c.recipe
            .engine()
            .set_retention(entry.settings.retention.ttl());
        if let Some(backend) = c.backend() {
            backend.set_store_text(entry.settings.store_text);
        }
        // The index's contents are in Redis (the node that changed the
        // setting built them): here only whether writes keep it.
        c.recipe
            .engine()
            .set_passage_index_flag(entry.settings.index.passage_index);
        // So are the document frequencies; the rule's numbers are this node's.
        c.recipe
            .engine()
            .set_boilerplate_flag(entry.settings.index.boilerplate.enabled);
        c.recipe
            .engine()
            .set_boilerplate_params(entry.settings.index.boilerplate.clone());
        tracing::info!(collection = %c.name, ttl_secs = entry.settings.retention.ttl_secs, store_text = entry.settings.store_text, passage_index = entry.settings.index.passage_index, "collection settings changed on another node");
    }

    /// Bring this node's collections in line with the catalog: open the
    /// new ones, apply changed settings, drop the deleted ones.
    pub async fn sync_catalog(&self) -> Result<(), BackendError> {
        if self.shared.is_none() {
            return Ok(());
        }
        let epoch = self.catalog_epoch.load(Ordering::Acquire);
        let catalog = self.read_catalog().await?;
        for (name, entry) in &catalog {
            let Ok(parsed) = CollectionName::parse(name) else {
                continue;
            };
            if entry.reindex.is_some() {
                if let Err(e) = self.end_dead_reindex(name, entry).await {
                    tracing::warn!(collection = %name, error = %e, "checking a reindex's heartbeat failed");
                }
            }
            match self.get(name) {
                Some(c) if c.incarnation == entry.incarnation => {
                    Self::apply(&c, entry);
                    Self::keep_up(&c).await;
                }
                _ => match self.open_entry(parsed, entry).await {
                    Ok(c) => {
                        let c = self.adopt(c);
                        tracing::info!(collection = %c.name, "collection opened (created on another node)");
                    }
                    Err(e) => {
                        tracing::warn!(collection = %name, error = %e, "cannot open a collection of the catalog; retried")
                    }
                },
            }
        }
        // The `default` collection is not in the catalog (its settings are
        // each node's configuration), but its keys are shared all the same.
        Self::keep_up(&self.default_collection()).await;
        let mut map = self.map.write().expect("map lock");
        if self.catalog_epoch.load(Ordering::Acquire) != epoch {
            // This node changed the catalog since it was read.
            return Ok(());
        }
        map.retain(|name, c| {
            let keep = c.name.is_default()
                || catalog
                    .get(name)
                    .is_some_and(|e| e.incarnation == c.incarnation);
            if !keep {
                tracing::info!(collection = %name, "collection deleted on another node");
                self.dropped
                    .lock()
                    .expect("dropped lock")
                    .push(name.clone());
            }
            keep
        });
        Ok(())
    }

    /// What a watch does for each open collection, the `default` one too:
    /// learn templates another node changed, and follow the
    /// document-frequency log (so this node counts the writes as they
    /// come, not all at once at its first read, and never falls behind
    /// the log's window while nobody reads).
    async fn keep_up(c: &Collection) {
        let Some(backend) = c.backend() else { return };
        if let Err(e) = backend.refresh_templates_if_changed().await {
            tracing::warn!(collection = %c.name, error = %e, "cannot read the collection's templates; retried");
        }
        if let Err(e) = backend.follow_counts().await {
            tracing::warn!(collection = %c.name, error = %e, "cannot follow the document-frequency log; retried");
        }
    }

    /// The collection `name` after reading its catalog entry (a request
    /// naming a collection this node has not seen yet).
    pub async fn find(&self, name: &str) -> Result<Option<Arc<Collection>>, BackendError> {
        if let Some(c) = self.get(name) {
            return Ok(Some(c));
        }
        let (Some(shared), Ok(parsed)) = (self.shared.as_ref(), CollectionName::parse(name)) else {
            return Ok(None);
        };
        if parsed.is_default() {
            return Ok(None);
        }
        let Some(raw) = shared.read(name).await? else {
            return Ok(None);
        };
        let entry = decode(name, &raw)?;
        let c = self.open_entry(parsed, &entry).await?;
        Ok(Some(self.adopt(c)))
    }

    /// `PUT /collections/{name}` with the redis backend (blocking).
    pub(super) fn create_shared(
        &self,
        name: CollectionName,
        settings: CollectionSettings,
        body: &serde_json::Value,
    ) -> Result<(Arc<Collection>, bool), CollectionError> {
        let handle = tokio::runtime::Handle::current();
        let entry = Entry {
            version: ENTRY_VERSION,
            created_ms: self.clock.now_ms(),
            incarnation: SharedCatalog::new_incarnation(),
            settings: settings.clone(),
            reindex: None,
        };
        let json = serde_json::to_string(&entry).expect("an entry serializes");
        let named_max = self.max.saturating_sub(1);
        let answer = handle.block_on(self.shared().create(name.as_str(), json, named_max))?;
        match answer {
            Created::Created => {
                self.catalog_epoch.fetch_add(1, Ordering::AcqRel);
                let c = handle.block_on(self.open_entry(name.clone(), &entry))?;
                let c = self.adopt(c);
                tracing::info!(collection = %name, incarnation = %entry.incarnation, "collection created in redis");
                Ok((c, true))
            }
            Created::Exists(raw) => {
                let existing = decode(name.as_str(), &raw)?;
                if let Some((key, existing_value, requested)) =
                    existing.settings.conflict_with(&settings, body)
                {
                    return Err(CollectionError::Conflict {
                        name: name.to_string(),
                        key,
                        existing: existing_value.to_string(),
                        requested: requested.to_string(),
                    });
                }
                let c = match self.get(name.as_str()) {
                    Some(c) if c.incarnation == existing.incarnation => c,
                    _ => self.adopt(handle.block_on(self.open_entry(name, &existing))?),
                };
                Ok((c, false))
            }
            Created::Full => Err(CollectionError::TooMany(self.max)),
        }
    }

    /// Replace or delete (`settings` None) `c`'s catalog entry if it is
    /// still `c`'s incarnation (blocking); false if it was not.
    fn swap_entry(
        &self,
        c: &Collection,
        settings: Option<&CollectionSettings>,
    ) -> Result<bool, CollectionError> {
        let value = match settings {
            Some(s) => serde_json::to_string(&Entry {
                version: ENTRY_VERSION,
                created_ms: c.created_ms,
                incarnation: c.incarnation.clone(),
                settings: s.clone(),
                reindex: None,
            })
            .expect("an entry serializes"),
            None => String::new(),
        };
        let swapped = tokio::runtime::Handle::current().block_on(self.swap(
            c.name.as_str(),
            &c.incarnation,
            value,
        ))?;
        Ok(swapped)
    }

    /// Block until every node's watch has read the catalog since a change
    /// (two watch intervals): a change answers once every node applies it.
    fn wait_for_every_node(&self) {
        let interval = self.shared().watch_interval();
        std::thread::sleep(2 * interval + Duration::from_millis(50));
    }

    /// `PATCH` with the redis backend (blocking): the catalog entry first
    /// (the commit point), then this node's copy; answered once every node
    /// has it. What expired under the old retention is purged first, so a
    /// longer one cannot bring it back.
    pub(super) fn change_shared(
        &self,
        c: &Arc<Collection>,
        settings: CollectionSettings,
    ) -> Result<(), CollectionError> {
        if settings.retention != c.settings().retention {
            if let Some(backend) = c.backend() {
                let purged = tokio::runtime::Handle::current().block_on(backend.purge_expired())?;
                tracing::info!(collection = %c.name, documents = purged, "expired documents purged before a retention change");
            }
        }
        if !self.swap_entry(c, Some(&settings))? {
            self.map.write().expect("map lock").remove(c.name.as_str());
            return Err(CollectionError::NotFound(c.name.to_string()));
        }
        if settings.index.passage_index != c.settings().index.passage_index {
            // This node builds (or drops) the index; the others start or
            // stop keeping it when they see the entry (`apply`).
            if let Some(backend) = c.backend() {
                tokio::runtime::Handle::current()
                    .block_on(backend.set_passage_index(settings.index.passage_index))?;
            }
        }
        if settings.index.boilerplate.enabled != c.settings().index.boilerplate.enabled {
            // This node counts (or drops) the document frequencies; the
            // others start or stop counting their writes when they see it.
            if let Some(backend) = c.backend() {
                tokio::runtime::Handle::current()
                    .block_on(backend.set_boilerplate(settings.index.boilerplate.enabled))?;
            }
        }
        Self::apply(
            c,
            &Entry {
                version: ENTRY_VERSION,
                created_ms: c.created_ms,
                incarnation: c.incarnation.clone(),
                settings,
                reindex: None,
            },
        );
        self.wait_for_every_node();
        Ok(())
    }

    /// `DELETE` with the redis backend (blocking): the catalog entry goes
    /// (the commit point), then this node's copy; the keys are removed in
    /// the background once every node has seen the delete.
    pub(super) fn delete_shared(&self, name: &str) -> Result<Arc<Collection>, CollectionError> {
        let handle = tokio::runtime::Handle::current();
        let c = match self.get(name) {
            Some(c) => c,
            None => handle
                .block_on(self.find(name))?
                .ok_or_else(|| CollectionError::NotFound(name.to_owned()))?,
        };
        if !self.swap_entry(&c, None)? {
            self.map.write().expect("map lock").remove(name);
            return Err(CollectionError::NotFound(name.to_owned()));
        }
        self.catalog_epoch.fetch_add(1, Ordering::AcqRel);
        self.map.write().expect("map lock").remove(name);
        self.wait_for_every_node();
        // Every node stopped using the keys when the delete answered; a
        // request that had started before may still be writing.
        self.shared()
            .remove_later(c.name.as_str(), &c.incarnation, "a deleted collection");
        tracing::info!(collection = %c.name, "collection deleted from redis");
        Ok(c)
    }
}

impl Collections {
    /// `POST /collections/{name}/reindex` with the redis backend: the
    /// checks that need no scan (blocking, short). The job is
    /// [`Self::reindex_shared`].
    pub(super) fn check_reindex_shared(&self, c: &Collection) -> Result<(), CollectionError> {
        if !c.settings().store_text {
            return Err(CollectionError::TextNotStored(format!(
                "collection {:?} does not store texts, so there is nothing to rebuild its index from; \
                 create it with \"store_text\": true (or PATCH it on and write its documents again)",
                c.name.as_str()
            )));
        }
        let handle = tokio::runtime::Handle::current();
        let raw = handle.block_on(self.shared().read(c.name.as_str()))?;
        let entry = decode(
            c.name.as_str(),
            &raw.ok_or_else(|| CollectionError::NotFound(c.name.to_string()))?,
        )?;
        if entry.reindex.is_some() {
            return Err(CollectionError::ReindexRunning(c.name.to_string()));
        }
        Ok(())
    }

    /// The reindex of a collection in Redis (blocking; a background job):
    /// announce it in the catalog (every node then answers writes to the
    /// collection with 503 until it ends), wait until every node has seen
    /// that, copy every live document into a new incarnation under the new
    /// recipe (from its stored text; signatures, bands and keys all new),
    /// then switch the catalog entry to it in one script and remove the
    /// old keys. A heartbeat key proves the job alive; if it lapses (the
    /// node died), any node's watch ends the reindex and writes resume on
    /// the old index. Returns the collection that now answers.
    pub(super) fn reindex_shared(
        &self,
        c: &Arc<Collection>,
        settings: &CollectionSettings,
        valid: crate::engine::ValidParams,
        progress: &dyn Fn(u64, u64),
    ) -> Result<Arc<Collection>, CollectionError> {
        let handle = tokio::runtime::Handle::current();
        let old = Entry {
            version: ENTRY_VERSION,
            created_ms: c.created_ms,
            incarnation: c.incarnation.clone(),
            settings: c.settings(),
            reindex: None,
        };
        let new_incarnation = SharedCatalog::new_incarnation();
        let marked = Entry {
            reindex: Some(Mark {
                incarnation: new_incarnation.clone(),
                settings: settings.clone(),
                started_ms: self.clock.now_ms(),
            }),
            ..old.clone()
        };
        // The heartbeat, renewed until the job ends (the guard is dropped).
        let heartbeat = self.shared().heartbeat(c.name.as_str());
        if !self.put_entry(c, &marked)? {
            drop(heartbeat);
            return Err(CollectionError::Deleted(c.name.to_string()));
        }
        Self::apply(c, &marked);
        self.wait_for_every_node();
        let result =
            handle.block_on(self.copy_into(c, &new_incarnation, settings, valid, progress));
        let switched = match result {
            Ok(()) => {
                let now_entry = Entry {
                    incarnation: new_incarnation.clone(),
                    settings: settings.clone(),
                    reindex: None,
                    ..old.clone()
                };
                match self.put_entry(c, &now_entry) {
                    Ok(true) => Ok(now_entry),
                    Ok(false) => Err(CollectionError::Deleted(c.name.to_string())),
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        };
        drop(heartbeat);
        match switched {
            Ok(entry) => {
                self.catalog_epoch.fetch_add(1, Ordering::AcqRel);
                let mut next = handle.block_on(self.open_entry(c.name.clone(), &entry))?;
                next.reindex = Arc::clone(&c.reindex);
                let next = {
                    let mut map = self.map.write().expect("map lock");
                    let next = Arc::new(next);
                    map.insert(c.name.as_str().to_owned(), Arc::clone(&next));
                    next
                };
                self.shared().remove_later(
                    c.name.as_str(),
                    &c.incarnation,
                    "the index a reindex replaced",
                );
                tracing::info!(collection = %c.name, incarnation = %new_incarnation, "reindex finished in redis: the new index answers");
                Ok(next)
            }
            Err(e) => {
                // Back to the old index: writes resume there.
                match self.put_entry(c, &old) {
                    Ok(true) => Self::apply(c, &old),
                    Ok(false) => {}
                    Err(e2) => {
                        tracing::error!(collection = %c.name, error = %e2, "ending a failed reindex in the catalog failed; the watch ends it when its heartbeat lapses")
                    }
                }
                self.shared().remove_later(
                    c.name.as_str(),
                    &new_incarnation,
                    "a failed reindex's index",
                );
                Err(e)
            }
        }
    }

    /// The catalog's one change: replace (`value` an entry) or delete
    /// (`value` empty) the entry of `name` if it is still `incarnation`;
    /// true if it was.
    async fn swap(
        &self,
        name: &str,
        incarnation: &str,
        value: String,
    ) -> Result<bool, BackendError> {
        self.shared().swap(name, incarnation, value).await
    }

    /// Replace `c`'s catalog entry by `entry` if it is still `c`'s
    /// incarnation (blocking).
    fn put_entry(&self, c: &Collection, entry: &Entry) -> Result<bool, CollectionError> {
        let value = serde_json::to_string(entry).expect("an entry serializes");
        let swapped = tokio::runtime::Handle::current().block_on(self.swap(
            c.name.as_str(),
            &c.incarnation,
            value,
        ))?;
        Ok(swapped)
    }

    /// Copy every live document of `c` into the incarnation `incarnation`
    /// under `settings`, from the stored texts.
    async fn copy_into(
        &self,
        c: &Collection,
        incarnation: &str,
        settings: &CollectionSettings,
        valid: crate::engine::ValidParams,
        progress: &dyn Fn(u64, u64),
    ) -> Result<(), CollectionError> {
        let Some(old) = c.backend() else {
            return Err(CollectionError::Unavailable(c.name.to_string()));
        };
        let engine = Arc::new(crate::engine::Engine::with_clock(
            valid,
            Arc::clone(&self.clock),
        ));
        engine.set_retention(settings.retention.ttl());
        let new = self
            .shared()
            .open(Arc::clone(&engine), c.name.as_str(), incarnation)
            .await?;
        new.set_store_text(true);
        let signs_alike = engine.params().signs_like(c.recipe.params());
        let mut pages = old.export(500).await?;
        let (mut done, mut skipped) = (0u64, 0u64);
        while let Some(page) = pages.next_records().await? {
            let mut batch = Vec::with_capacity(page.len());
            for (record, text) in page {
                let Some(text) = text else {
                    return Err(CollectionError::TextNotStored(format!(
                        "document {:?} of collection {:?} was stored without its text (before store_text was on): write it again, then reindex",
                        record.id().as_str(),
                        c.name.as_str()
                    )));
                };
                // A recipe that signs as the old one keeps the document's
                // shingles and signature (nothing signed again); a text the
                // new recipe leaves empty is left out (as in memory).
                let reused = signs_alike
                    .then(|| {
                        engine.prepared_from_parts(
                            record.signature().into(),
                            record.shingles().to_vec(),
                            Some(record.selection().into()),
                        )
                    })
                    .flatten();
                let doc = match reused {
                    Some(doc) => doc,
                    None => match engine.prepare(&text) {
                        Ok(doc) => doc,
                        Err(_) => {
                            skipped += 1;
                            continue;
                        }
                    },
                };
                let stamp = record.stamp();
                batch.push(crate::engine::NewDoc {
                    id: record.id().clone(),
                    doc,
                    metadata: record.metadata().map(Into::into),
                    expires_ms: stamp.expires_ms,
                    text: Some(text.into_boxed_str()),
                    created_ms: Some(stamp.created_ms),
                });
            }
            let n = batch.len() as u64;
            for r in new
                .insert_many(batch, crate::engine::WriteMode::Upsert)
                .await?
            {
                r.map_err(|e| CollectionError::Backend(BackendError::Engine(e)))?;
            }
            done += n;
            progress(done, skipped);
        }
        // The templates are keys of the incarnation: they go along.
        for t in old.templates(&c.dir).await? {
            new.put_template(&c.dir, t).await?;
        }
        // So are the event log, the webhook subscriptions and their
        // delivery state (issue 45): copied whole, entry ids, consumer
        // groups and pending deliveries kept.
        old.carry_events_to(&new).await?;
        // And the review decisions (issue 46), hash and version whole.
        old.carry_decisions_to(&new).await?;
        Ok(())
    }

    /// A reindex whose heartbeat lapsed (its node died): end it, so writes
    /// resume on the old index (called by the watch).
    async fn end_dead_reindex(&self, name: &str, entry: &Entry) -> Result<(), BackendError> {
        let beat = self.shared().heartbeat_alive(name).await?;
        let started = entry.reindex.as_ref().map_or(0, |m| m.started_ms);
        if beat || self.clock.now_ms() < started + HEARTBEAT_MS {
            return Ok(());
        }
        let back = Entry {
            reindex: None,
            ..entry.clone()
        };
        let value = serde_json::to_string(&back).expect("an entry serializes");
        self.swap(name, &entry.incarnation, value).await?;
        tracing::warn!(collection = name, "a reindex's node stopped renewing its heartbeat: the reindex is ended, writes resume on the old index");
        Ok(())
    }
}
