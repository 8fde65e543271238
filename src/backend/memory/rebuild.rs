//! A reindex of a collection held in memory, the store's part of it: a new
//! index of a new recipe in its own directory, built from the old index's
//! stored texts while the old one serves, caught up from the old store's
//! tap (every write logged since the rebuild began), and switched under the
//! old store's write gate. The collections module runs it (its checks, the
//! collection lock, the manifest that commits the switch, the name map):
//! see `collections/reindex.rs`.
//!
//! A text the new recipe leaves empty (say, only punctuation under a recipe
//! that strips it) is left out, as a fresh collection with that recipe would
//! refuse it: it is counted as skipped.

use super::super::Backend;
use crate::config::StorageSettings;
use crate::engine::{DocId, Engine, EngineError, NewDoc, Record, Stamp};
use crate::persist::{fsops, texts, PersistError, Store, TapOp};
use crate::text::TextError;
use rayon::prelude::*;
use std::sync::Arc;

/// Records read, prepared and written per step.
const CHUNK: usize = 1024;
/// Catch-up rounds before the switch; the last tap is applied under the gate.
const CATCH_UP_ROUNDS: usize = 4;

/// Why a rebuild stopped.
#[derive(Debug, thiserror::Error)]
pub enum RebuildError {
    /// A document it needs has no stored text.
    #[error("{0}")]
    TextNotStored(String),
    /// The new index could not be written (or the old one's texts read).
    #[error(transparent)]
    Storage(#[from] PersistError),
}

fn unrecoverable(detail: impl Into<String>) -> RebuildError {
    RebuildError::Storage(PersistError::Unrecoverable(detail.into()))
}

fn engine_err(e: EngineError) -> RebuildError {
    unrecoverable(format!("writing the new index failed: {e}"))
}

/// A rebuild in progress ([`Backend::rebuild`]): the old store's tap is on
/// until it is switched or abandoned.
pub struct Rebuild {
    old: Arc<Store>,
    new: Arc<Store>,
    engine: Arc<Engine>,
}

impl Backend {
    /// Start rebuilding this collection into a new index of `engine`'s
    /// recipe in `settings.data_dir` (made here; it must not exist), which
    /// keeps texts. From now on every write to the old index is also
    /// caught for the new one. Only the memory backend rebuilds this way (a
    /// collection in Redis is reindexed through the shared catalog).
    pub fn rebuild(
        &self,
        engine: Arc<Engine>,
        settings: &StorageSettings,
    ) -> Result<Rebuild, RebuildError> {
        let Backend::Memory(m) = self else {
            return Err(unrecoverable(
                "a collection in redis is reindexed through the shared catalog",
            ));
        };
        let dir = &settings.data_dir;
        std::fs::create_dir(dir).map_err(fsops::io_err(dir))?;
        let new = Arc::new(Store::open(
            Arc::clone(&engine),
            &StorageSettings {
                store_text: true,
                ..settings.clone()
            },
        )?);
        m.store.start_tap();
        Ok(Rebuild {
            old: Arc::clone(&m.store),
            new,
            engine,
        })
    }

    /// Live documents, and the ids of those stored without their text
    /// (written before the collection kept texts): what a rebuild from
    /// texts needs to know first. `None` where it is not known up front
    /// (redis: the copy finds out).
    pub fn texts_missing(&self) -> Option<(usize, Vec<String>)> {
        let Backend::Memory(m) = self else {
            return None;
        };
        let now = m.engine.now_ms();
        let live: Vec<Arc<Record>> = m
            .engine
            .records()
            .into_iter()
            .filter(|r| m.engine.is_live(r, now))
            .collect();
        let without = live
            .iter()
            .filter(|r| r.text_locator() == 0)
            .map(|r| r.id().to_string())
            .collect();
        Some((live.len(), without))
    }
}

impl Rebuild {
    /// Copy every live document of the old index (its text read, prepared
    /// by the new recipe on the rayon pool, written with its stamp and
    /// metadata), then catch up with what the tap caught meanwhile, a few
    /// rounds. `progress` gets (written, skipped) after each step.
    pub fn copy(&self, progress: &dyn Fn(u64, u64)) -> Result<(), RebuildError> {
        let (old, new, engine) = (&self.old, &self.new, &self.engine);
        let old_engine = old.engine();
        let now = old_engine.now_ms();
        let records: Vec<Arc<Record>> = old_engine
            .records()
            .into_iter()
            .filter(|r| old_engine.is_live(r, now))
            .collect();
        engine.reserve(records.len());
        for chunk in records.chunks(CHUNK) {
            let prepared: Vec<Result<Option<(NewDoc, Stamp)>, RebuildError>> = chunk
                .par_iter()
                .map(|r| {
                    let text = old.text_of(r)?.ok_or_else(|| {
                        RebuildError::TextNotStored(format!(
                            "document {:?} has no stored text (store_text was turned off during the reindex?)",
                            r.id().as_str()
                        ))
                    })?;
                    Ok(prepare(engine, r.id().clone(), r.metadata().map(Into::into), r.stamp(), text))
                })
                .collect();
            let (mut done, mut skipped) = (0, 0);
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
            progress(done, skipped);
        }
        for _ in 0..CATCH_UP_ROUNDS {
            let ops = old.take_tap();
            let n = ops.len();
            self.apply_tap(ops, progress)?;
            if n < CHUNK {
                break;
            }
        }
        Ok(())
    }

    /// Switch to the new index: under the old store's write gate, the rest
    /// of the tap, a snapshot of the new store, then `commit` with the new
    /// index's backend (the caller's commit point: the manifest, the name
    /// map). Writes still reaching the old store go to the new one from
    /// then on; the old store is retired.
    pub fn switch<E: From<RebuildError>>(
        self,
        progress: &dyn Fn(u64, u64),
        commit: impl FnOnce(Backend) -> Result<(), E>,
    ) -> Result<(), E> {
        let backend = Backend::in_memory(Arc::clone(&self.engine), Arc::clone(&self.new));
        self.old.hand_over(Arc::clone(&self.new), |ops| {
            self.apply_tap(ops, progress)?;
            self.new.snapshot().map_err(RebuildError::from)?;
            commit(backend)
        })?;
        self.old.retire();
        Ok(())
    }

    /// Give up: the old index stops catching writes (its directory is the
    /// caller's to remove).
    pub fn abandon(self) {
        self.old.stop_tap();
    }

    /// Replay what the tap caught on the new store, in log order, committed.
    fn apply_tap(&self, ops: Vec<TapOp>, progress: &dyn Fn(u64, u64)) -> Result<(), RebuildError> {
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
                        RebuildError::TextNotStored(format!(
                            "document {:?} was written without its text during the reindex (store_text turned off?)",
                            id.as_str()
                        ))
                    })?;
                    let text =
                        texts::decompress(&text).map_err(|e| unrecoverable(e.to_string()))?;
                    match prepare(&self.engine, id, metadata, stamp, text) {
                        Some((doc, stamp)) => {
                            self.new.insert_stamped(doc, stamp).map_err(engine_err)?;
                            done += 1;
                        }
                        // A fresh collection would refuse this write and
                        // keep what it had: so does the new index.
                        None => skipped += 1,
                    }
                }
                TapOp::Delete(id) => self.new.remove_uncommitted(&id).map_err(engine_err)?,
            }
        }
        self.new.commit_all().map_err(engine_err)?;
        progress(done, skipped);
        Ok(())
    }
}

/// A document prepared by the new recipe; `None` if the recipe leaves its
/// text empty.
fn prepare(
    engine: &Engine,
    id: DocId,
    metadata: Option<Box<str>>,
    stamp: Stamp,
    text: String,
) -> Option<(NewDoc, Stamp)> {
    match engine.prepare(&text) {
        Ok(doc) => Some((
            NewDoc {
                id,
                doc,
                metadata,
                expires_ms: stamp.expires_ms,
                text: Some(text.into_boxed_str()),
                created_ms: None,
            },
            stamp,
        )),
        Err(TextError::Empty) => None,
    }
}
