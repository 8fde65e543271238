//! Reindexing a collection from its stored texts: a new recipe (`shingle`,
//! `normalize`, `index`) without the source system.
//!
//! ```text
//!   start    checks (named, ready, stores texts, every live document has its text, none running)
//!   build    new engine + store in <collection>/index-<ms>/; the old store's tap on; every live record's
//!            text read, prepared by the new recipe (rayon), written with its stamp and metadata
//!   catch up what the tap caught meanwhile (writes go on against the old index), a few rounds
//!   switch   under the collection lock and the old store's write gate: the rest of the tap, a snapshot
//!            of the new store, the manifest (new settings + index_dir) renamed into place, the map
//!            entry replaced; writes still reaching the old store go to the new one from then on
//!   clean    the old index files removed (or at the next start)
//! ```
//!
//! The old index answers every query until the switch. The manifest's
//! rename is the commit point: a crash before it restarts on the old
//! recipe (the unfinished `index-*` directory is removed at start), a crash
//! after it on the new one (the old files are removed at start).
//!
//! A text the new recipe leaves empty (say, only punctuation under a recipe
//! that strips it) is left out, as a fresh collection with that recipe would
//! refuse it; `skipped` counts them.

use super::{
    Collection, CollectionError, CollectionSettings, Collections, Manifest, SettingsError,
    MANIFEST_VERSION,
};
use crate::backend::{LocalCatalog, RebuildError};
use crate::engine::{Engine, ValidParams};
use serde::Serialize;
use serde_json::Value;
use std::sync::{Arc, OnceLock, RwLock};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReindexState {
    /// Building the new index (the old one answers).
    Running,
    /// The new index answers.
    Done,
    /// Stopped; the old index answers (see `error`).
    Failed,
}

/// A reindex's progress, in the collection's stats.
#[derive(Clone, Debug, Serialize)]
pub struct ReindexProgress {
    pub state: ReindexState,
    /// Documents written to the new index (bulk and catch-up).
    pub done: u64,
    /// Live documents when it started.
    pub total: u64,
    /// Texts the new recipe leaves empty (left out).
    pub skipped: u64,
    pub started_ms: u64,
    pub finished_ms: Option<u64>,
    pub error: Option<String>,
    /// The recipe and index parameters it builds.
    pub settings: CollectionSettings,
}

/// A reindex accepted by [`Collections::start_reindex`], to run with
/// [`Collections::run_reindex`] (blocking).
pub struct ReindexJob {
    collection: Arc<Collection>,
    settings: CollectionSettings,
    valid: ValidParams,
}

impl ReindexJob {
    pub fn collection(&self) -> &Arc<Collection> {
        &self.collection
    }
}

impl From<RebuildError> for CollectionError {
    fn from(e: RebuildError) -> Self {
        match e {
            RebuildError::TextNotStored(why) => CollectionError::TextNotStored(why),
            RebuildError::Storage(e) => CollectionError::Storage(e),
        }
    }
}

impl Collections {
    /// `POST /collections/{name}/reindex`: check that `name` can be
    /// reindexed with `body` (`shingle`, `normalize`, `index`, each
    /// optional, over the current settings) and mark it running. Blocking
    /// (it scans the records for texts), but short.
    pub fn start_reindex(&self, name: &str, body: &Value) -> Result<ReindexJob, CollectionError> {
        let _ddl = self.ddl.lock().expect("ddl lock");
        let c = self
            .lookup(name)?
            .ok_or_else(|| CollectionError::NotFound(name.to_owned()))?;
        if c.name.is_default() {
            return Err(CollectionError::Protected(
                "the default collection's recipe comes from the server configuration; \
                 create a named collection with \"store_text\": true to reindex",
            ));
        }
        if let Some(key) = body.as_object().and_then(|m| {
            m.keys()
                .find(|k| !["shingle", "normalize", "index"].contains(&k.as_str()))
        }) {
            return Err(SettingsError::Shape(format!(
                "a reindex changes only shingle, normalize and index; {key:?} is not one of them (see PATCH)"
            ))
            .into());
        }
        // A reindex brings the text recipe to the current version unless
        // the body names one: it is how stored data moves to a new recipe.
        let mut current = c.settings();
        if !CollectionSettings::names_version(body) {
            current.normalize.version = crate::text::TEXT_VERSION;
        }
        let (settings, valid) = CollectionSettings::from_body(&current, body)?;
        if self.shared.is_some() {
            self.check_reindex_shared(&c)?;
            let total = match c.backend() {
                Some(b) => tokio::runtime::Handle::current()
                    .block_on(b.refresh_documents())
                    .map_err(CollectionError::Backend)?,
                None => 0,
            };
            let mut progress = c.reindex.lock().expect("reindex lock");
            if progress
                .as_ref()
                .is_some_and(|p| p.state == ReindexState::Running)
            {
                return Err(CollectionError::ReindexRunning(c.name.to_string()));
            }
            *progress = Some(ReindexProgress {
                state: ReindexState::Running,
                done: 0,
                total: total as u64,
                skipped: 0,
                started_ms: c.recipe.engine().now_ms(),
                finished_ms: None,
                error: None,
                settings: settings.clone(),
            });
            drop(progress);
            return Ok(ReindexJob {
                collection: c,
                settings,
                valid,
            });
        }
        let Some(backend) = c.backend() else {
            return Err(CollectionError::Unavailable(c.name.to_string()));
        };
        if !backend.stores_text() {
            return Err(CollectionError::TextNotStored(format!(
                "collection {:?} does not store texts, so there is nothing to rebuild its index from; \
                 create it with \"store_text\": true (or PATCH it on and write its documents again)",
                c.name.as_str()
            )));
        }
        let mut progress = c.reindex.lock().expect("reindex lock");
        if progress
            .as_ref()
            .is_some_and(|p| p.state == ReindexState::Running)
        {
            return Err(CollectionError::ReindexRunning(c.name.to_string()));
        }
        let now = c.recipe.now_ms();
        let (live, without) = backend.texts_missing().unwrap_or_default();
        if let Some(first) = without.first() {
            return Err(CollectionError::TextNotStored(format!(
                "{} of the {} documents of collection {:?} were stored without their text \
                 (before store_text was on), e.g. {first:?}: write them again first",
                without.len(),
                live,
                c.name.as_str()
            )));
        }
        *progress = Some(ReindexProgress {
            state: ReindexState::Running,
            done: 0,
            total: live as u64,
            skipped: 0,
            started_ms: now,
            finished_ms: None,
            error: None,
            settings: settings.clone(),
        });
        drop(progress);
        Ok(ReindexJob {
            collection: c,
            settings,
            valid,
        })
    }

    /// Build, catch up and switch (see the module docs); blocking. The
    /// outcome is also in the collection's progress.
    pub fn run_reindex(&self, job: ReindexJob) -> Result<Arc<Collection>, CollectionError> {
        let c = Arc::clone(&job.collection);
        if self.shared.is_some() {
            let shared = Arc::clone(&c.reindex);
            let progress = move |done: u64, skipped: u64| {
                if let Some(p) = shared.lock().expect("reindex lock").as_mut() {
                    p.done = done;
                    p.skipped = skipped;
                }
            };
            let result = self.reindex_shared(&c, &job.settings, job.valid.clone(), &progress);
            let mut progress = c.reindex.lock().expect("reindex lock");
            let p = progress.as_mut().expect("a running reindex has progress");
            p.finished_ms = Some(c.recipe.engine().now_ms());
            match &result {
                Ok(_) => p.state = ReindexState::Done,
                Err(e) => {
                    p.state = ReindexState::Failed;
                    p.error = Some(e.to_string());
                    tracing::error!(collection = %c.name, error = %e, "reindex failed; the old index answers");
                }
            }
            return result;
        }
        let sub = format!("index-{}", c.recipe.engine().now_ms());
        let new_dir = c.dir.join(&sub);
        let result = self.reindex_into(&job, &sub);
        let mut progress = c.reindex.lock().expect("reindex lock");
        let p = progress.as_mut().expect("a running reindex has progress");
        p.finished_ms = Some(c.recipe.engine().now_ms());
        match &result {
            Ok(_) => {
                p.state = ReindexState::Done;
                tracing::info!(collection = %c.name, documents = p.done, skipped = p.skipped, "reindex finished: the new index answers");
            }
            Err(e) => {
                p.state = ReindexState::Failed;
                p.error = Some(e.to_string());
                if matches!(e, CollectionError::Deleted(_)) {
                    tracing::info!(collection = %c.name, "reindex abandoned: the collection was deleted");
                } else {
                    tracing::error!(collection = %c.name, error = %e, "reindex failed; the old index answers");
                }
                let _ = std::fs::remove_dir_all(&new_dir);
            }
        }
        result
    }

    fn reindex_into(
        &self,
        job: &ReindexJob,
        sub: &str,
    ) -> Result<Arc<Collection>, CollectionError> {
        let c = &job.collection;
        let old = c
            .backend()
            .ok_or_else(|| CollectionError::Unavailable(c.name.to_string()))?;
        let dir = c.dir.join(sub);
        let engine = Arc::new(Engine::with_clock(
            job.valid.clone(),
            Arc::clone(&self.clock),
        ));
        engine.set_retention(c.settings().retention.ttl());
        let settings = self.storage_for(&dir, &job.settings);
        // The new index's directory is made, and its store opened, under
        // the collection lock and only while the collection is current: a
        // delete that came first must not see its directory made again
        // (a later create of the name would find it), and one that comes
        // later renames the directory away with everything in it, so the
        // new store's next file fails and the reindex with it.
        let rebuild = {
            let _ddl = self.ddl.lock().expect("ddl lock");
            self.still_current(c)?;
            old.rebuild(Arc::clone(&engine), &settings)?
        };
        let progress = |d, s| self.advance(c, d, s);
        if let Err(e) = rebuild.copy(&progress) {
            rebuild.abandon();
            return Err(e.into());
        }
        // The switch.
        let _ddl = self.ddl.lock().expect("ddl lock");
        let current = c.settings();
        let checked = self.still_current(c).and_then(|()| {
            if current.store_text {
                Ok(())
            } else {
                Err(CollectionError::TextNotStored(format!(
                    "store_text was turned off on collection {:?} during the reindex",
                    c.name.as_str()
                )))
            }
        });
        if let Err(e) = checked {
            rebuild.abandon();
            return Err(e);
        }
        let settings = CollectionSettings {
            retention: current.retention,
            originals: current.originals.clone(),
            review: current.review.clone(),
            store_text: true,
            ..job.settings.clone()
        };
        let next = Arc::new(Collection {
            name: c.name.clone(),
            id: self
                .next_id
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            created_ms: c.created_ms,
            dir: c.dir.clone(),
            index_dir: Some(sub.to_owned()),
            reindex: Arc::clone(&c.reindex),
            settings: RwLock::new(settings.clone()),
            recipe: super::Recipe::new(Arc::clone(&engine)),
            backend: OnceLock::new(),
            failure: OnceLock::new(),
            incarnation: String::new(),
            templates_lock: Arc::clone(&c.templates_lock),
        });
        // The new recipe's shingles of the templates, before it serves.
        engine.use_templates(&tokio::runtime::Handle::current().block_on(old.templates(&c.dir))?);
        rebuild.switch(&progress, |backend| {
            let _ = next.backend.set(backend);
            catalog_switch(c, &settings, sub)?;
            self.map
                .write()
                .expect("map lock")
                .insert(c.name.as_str().to_owned(), Arc::clone(&next));
            Ok::<(), CollectionError>(())
        })?;
        if let Err(e) = LocalCatalog::clean_reindex_leftovers(&c.dir, Some(sub)) {
            tracing::warn!(collection = %c.name, error = %e, "could not remove the old index files; the next start will");
        }
        Ok(next)
    }

    /// `c` is still the collection under its name (not deleted, nor
    /// replaced by a collection created again under it). Called under the
    /// collection lock.
    fn still_current(&self, c: &Arc<Collection>) -> Result<(), CollectionError> {
        if self
            .get(c.name.as_str())
            .is_some_and(|cur| Arc::ptr_eq(&cur, c))
        {
            Ok(())
        } else {
            Err(CollectionError::Deleted(c.name.to_string()))
        }
    }

    fn advance(&self, c: &Collection, done: u64, skipped: u64) {
        if let Some(p) = c.reindex.lock().expect("reindex lock").as_mut() {
            p.done += done;
            p.skipped += skipped;
        }
    }
}

/// The manifest with the new settings and index directory: the commit point.
fn catalog_switch(
    c: &Collection,
    settings: &CollectionSettings,
    sub: &str,
) -> Result<(), CollectionError> {
    let manifest = Manifest {
        version: MANIFEST_VERSION,
        created_ms: c.created_ms,
        index_dir: Some(sub.to_owned()),
        settings: settings.clone(),
    };
    LocalCatalog::write_manifest(&c.dir, &manifest)?;
    *c.settings.write().expect("settings lock") = settings.clone();
    Ok(())
}
