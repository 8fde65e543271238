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
use crate::engine::{Engine, EngineError, NewDoc, Record, ValidParams};
use crate::persist::texts;
use crate::persist::{fsops, PersistError, Store, TapOp};
use crate::text::TextError;
use rayon::prelude::*;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;
use std::sync::{Arc, OnceLock, RwLock};

/// Records read, prepared and written per step.
const CHUNK: usize = 1024;
/// Catch-up rounds before the switch; the last tap is applied under the gate.
const CATCH_UP_ROUNDS: usize = 4;

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

/// Remove what reindexes left in a collection's `dir`: `index-*`
/// directories other than `current`, and, when the index lives in
/// `current`, the old index files beside the manifest.
pub(super) fn clean(dir: &Path, current: Option<&str>) -> Result<(), PersistError> {
    let mut removed = false;
    for entry in std::fs::read_dir(dir).map_err(fsops::io_err(dir))? {
        let entry = entry.map_err(fsops::io_err(dir))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().map_err(fsops::io_err(&path))?.is_dir();
        if is_dir && name.starts_with("index-") && Some(name.as_str()) != current {
            std::fs::remove_dir_all(&path).map_err(fsops::io_err(&path))?;
            tracing::info!(path = %path.display(), "removed an index directory a reindex left");
            removed = true;
        } else if !is_dir && current.is_some() && is_index_file(&name) {
            std::fs::remove_file(&path).map_err(fsops::io_err(&path))?;
            removed = true;
        }
    }
    if removed {
        fsops::sync_dir(dir)?;
    }
    Ok(())
}

/// A snapshot, log segment or text segment (or an unfinished one).
fn is_index_file(name: &str) -> bool {
    (name.starts_with("snapshot-") || name.starts_with("wal-") || name.starts_with("texts-"))
        && (name.ends_with(".bin")
            || name.ends_with(".log")
            || name.ends_with(".seg")
            || name.ends_with(".tmp"))
}

fn storage(detail: impl Into<String>) -> CollectionError {
    CollectionError::Storage(PersistError::Unrecoverable(detail.into()))
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
        let current = c.settings();
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
        let Some(store) = c.store() else {
            return Err(CollectionError::Unavailable(c.name.to_string()));
        };
        if !store.stores_text() {
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
        let now = c.recipe.engine().now_ms();
        let records = c.recipe.engine().records();
        let live: Vec<&Arc<Record>> = records
            .iter()
            .filter(|r| c.recipe.engine().is_live(r, now))
            .collect();
        let without: Vec<&str> = live
            .iter()
            .filter(|r| r.text_locator() == 0)
            .map(|r| r.id().as_str())
            .collect();
        if let Some(first) = without.first() {
            return Err(CollectionError::TextNotStored(format!(
                "{} of the {} documents of collection {:?} were stored without their text \
                 (before store_text was on), e.g. {first:?}: write them again first",
                without.len(),
                live.len(),
                c.name.as_str()
            )));
        }
        *progress = Some(ReindexProgress {
            state: ReindexState::Running,
            done: 0,
            total: live.len() as u64,
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
                if let Some(store) = c.store() {
                    store.stop_tap();
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
            .store()
            .ok_or_else(|| CollectionError::Unavailable(c.name.to_string()))?;
        let dir = c.dir.join(sub);
        let engine = Arc::new(Engine::with_clock(
            job.valid.clone(),
            Arc::clone(&self.clock),
        ));
        engine.set_retention(c.settings().retention.ttl());
        let mut settings = self.storage_for(&dir, &job.settings);
        settings.store_text = true;
        // The new index's directory is made, and its store opened, under
        // the collection lock and only while the collection is current: a
        // delete that came first must not see its directory made again
        // (a later create of the name would find it), and one that comes
        // later renames the directory away with everything in it, so the
        // new store's next file fails and the reindex with it.
        let new = {
            let _ddl = self.ddl.lock().expect("ddl lock");
            self.still_current(c)?;
            std::fs::create_dir(&dir).map_err(fsops::io_err(&dir))?;
            Arc::new(Store::open(Arc::clone(&engine), &settings)?)
        };
        // From here on every write to the old store is also in the tap.
        old.start_tap();
        let now = c.recipe.engine().now_ms();
        let records: Vec<Arc<Record>> = c
            .recipe
            .engine()
            .records()
            .into_iter()
            .filter(|r| c.recipe.engine().is_live(r, now))
            .collect();
        engine.reserve(records.len());
        for chunk in records.chunks(CHUNK) {
            let prepared: Vec<Result<Option<(NewDoc, crate::engine::Stamp)>, CollectionError>> =
                chunk
                    .par_iter()
                    .map(|r| {
                        let text = old.text_of(r)?.ok_or_else(|| {
                            CollectionError::TextNotStored(format!(
                                "document {:?} has no stored text (store_text was turned off during the reindex?)",
                                r.id().as_str()
                            ))
                        })?;
                        prepare(&engine, r.id().clone(), r.metadata().map(Into::into), r.stamp(), text)
                    })
                    .collect();
            let mut done = 0;
            let mut skipped = 0;
            for item in prepared {
                match item? {
                    Some((doc, stamp)) => {
                        new.insert_stamped(doc, stamp).map_err(engine_err)?;
                        done += 1;
                    }
                    None => skipped += 1,
                }
            }
            new.commit_all().map_err(engine_err)?;
            self.advance(c, done, skipped);
        }
        for _ in 0..CATCH_UP_ROUNDS {
            let ops = old.take_tap();
            let n = ops.len();
            apply_tap(&engine, &new, ops, |d, s| self.advance(c, d, s))?;
            if n < CHUNK {
                break;
            }
        }
        // The switch.
        let _ddl = self.ddl.lock().expect("ddl lock");
        self.still_current(c)?;
        let current = c.settings();
        if !current.store_text {
            return Err(CollectionError::TextNotStored(format!(
                "store_text was turned off on collection {:?} during the reindex",
                c.name.as_str()
            )));
        }
        let settings = CollectionSettings {
            retention: current.retention,
            store_text: true,
            ..job.settings.clone()
        };
        let next = Collection {
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
        };
        next.set_store(Arc::clone(&new));
        let next = Arc::new(next);
        old.hand_over(Arc::clone(&new), |ops| {
            apply_tap(&engine, &new, ops, |d, s| self.advance(c, d, s))?;
            new.snapshot()?;
            catalog_switch(c, &settings, sub)?;
            self.map
                .write()
                .expect("map lock")
                .insert(c.name.as_str().to_owned(), Arc::clone(&next));
            Ok::<(), CollectionError>(())
        })?;
        old.retire();
        if let Err(e) = clean(&c.dir, Some(sub)) {
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
    crate::persist::catalog::write_manifest(&c.dir, &manifest)?;
    *c.settings.write().expect("settings lock") = settings.clone();
    Ok(())
}

fn engine_err(e: EngineError) -> CollectionError {
    storage(format!("writing the new index failed: {e}"))
}

/// A document prepared by the new recipe; `None` if the recipe leaves its
/// text empty.
fn prepare(
    engine: &Engine,
    id: crate::engine::DocId,
    metadata: Option<Box<str>>,
    stamp: crate::engine::Stamp,
    text: String,
) -> Result<Option<(NewDoc, crate::engine::Stamp)>, CollectionError> {
    match engine.prepare(&text) {
        Ok(doc) => Ok(Some((
            NewDoc {
                id,
                doc,
                metadata,
                expires_ms: stamp.expires_ms,
                text: Some(text.into_boxed_str()),
                created_ms: None,
            },
            stamp,
        ))),
        Err(TextError::Empty) => Ok(None),
    }
}

/// Replay what the tap caught on the new store, in log order, committed.
fn apply_tap(
    engine: &Engine,
    new: &Store,
    ops: Vec<TapOp>,
    advance: impl Fn(u64, u64),
) -> Result<(), CollectionError> {
    if ops.is_empty() {
        return Ok(());
    }
    let (mut done, mut skipped) = (0, 0);
    for op in ops {
        match op {
            TapOp::Upsert {
                id,
                metadata,
                stamp,
                text,
            } => {
                let text = text.ok_or_else(|| {
                    CollectionError::TextNotStored(format!(
                        "document {:?} was written without its text during the reindex (store_text turned off?)",
                        id.as_str()
                    ))
                })?;
                let text = texts::decompress(&text).map_err(storage)?;
                match prepare(engine, id, metadata, stamp, text)? {
                    Some((doc, stamp)) => {
                        new.insert_stamped(doc, stamp).map_err(engine_err)?;
                        done += 1;
                    }
                    // A fresh collection would refuse this write and keep
                    // what it had: so does the new index.
                    None => skipped += 1,
                }
            }
            TapOp::Delete(id) => new.remove_uncommitted(&id).map_err(engine_err)?,
        }
    }
    new.commit_all().map_err(engine_err)?;
    advance(done, skipped);
    Ok(())
}
