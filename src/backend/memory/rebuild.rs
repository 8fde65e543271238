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
use crate::persist::{fsops, texts, PersistError, Signed, Store, TapOp};
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
    /// The new recipe signs every text as the old one does (only the
    /// banding, threshold or candidate guard change): documents keep their
    /// shingles and signatures, nothing is signed again.
    signs_alike: bool,
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
        let signs_alike = engine.params().signs_like(m.engine.params());
        m.store.start_tap(signs_alike);
        Ok(Rebuild {
            old: Arc::clone(&m.store),
            new,
            engine,
            signs_alike,
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
        if self.signs_alike {
            tracing::info!(
                "the new recipe signs as the old one: documents keep their shingles and signatures"
            );
        }
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
                    let signed = self
                        .signs_alike
                        .then(|| (r.shingles().into(), r.signature().into(), r.selection().into()));
                    Ok(self.prepare(r.id().clone(), r.metadata().map(Into::into), r.stamp(), text, signed))
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

    /// A document of the new recipe: its old shingles and signature when
    /// they are given (the recipe signs alike), else prepared from its
    /// text; `None` if the recipe leaves the text empty.
    fn prepare(
        &self,
        id: DocId,
        metadata: Option<Box<str>>,
        stamp: Stamp,
        text: String,
        signed: Option<Signed>,
    ) -> Option<(NewDoc, Stamp)> {
        let reused = signed.and_then(|(shingles, signature, selection)| {
            self.engine
                .prepared_from_parts(signature, shingles.into_vec(), Some(selection))
        });
        let doc = match reused {
            Some(doc) => doc,
            None => match self.engine.prepare(&text) {
                Ok(doc) => doc,
                Err(TextError::Empty) => return None,
            },
        };
        Some((
            NewDoc {
                id,
                doc,
                metadata,
                expires_ms: stamp.expires_ms,
                text: Some(text.into_boxed_str()),
                created_ms: None,
            },
            stamp,
        ))
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
                    signed,
                } => {
                    let text = text.ok_or_else(|| {
                        RebuildError::TextNotStored(format!(
                            "document {:?} was written without its text during the reindex (store_text turned off?)",
                            id.as_str()
                        ))
                    })?;
                    let text =
                        texts::decompress(&text).map_err(|e| unrecoverable(e.to_string()))?;
                    match self.prepare(id, metadata, stamp, text, signed) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{EngineParams, WriteMode};

    fn params(threshold: f64, k: usize) -> EngineParams {
        let mut p = EngineParams::default();
        p.index.threshold = threshold;
        p.shingle.k = k;
        p
    }

    fn storage(dir: &std::path::Path) -> StorageSettings {
        StorageSettings {
            data_dir: dir.to_owned(),
            store_text: true,
            ..Default::default()
        }
    }

    /// Old index: "a" stored with the text `text` but the shingles and
    /// signature of `signed_as` (as only a recipe that signs alike could
    /// tell apart); then a rebuild under `next`; the new record of "a".
    fn rebuilt(next: EngineParams, text: &str, signed_as: &str) -> (Arc<Record>, Arc<Engine>) {
        let dir = tempfile::tempdir().unwrap();
        let engine = Arc::new(Engine::new(params(0.8, 3).validate().unwrap()));
        let store = Arc::new(Store::open(Arc::clone(&engine), &storage(dir.path())).unwrap());
        store
            .insert(
                NewDoc {
                    id: DocId::parse("a").unwrap(),
                    doc: engine.prepare(signed_as).unwrap(),
                    metadata: None,
                    expires_ms: None,
                    text: Some(text.into()),
                    created_ms: None,
                },
                WriteMode::Create,
            )
            .unwrap();
        let old = Backend::in_memory(Arc::clone(&engine), store);
        let new_engine = Arc::new(Engine::new(next.validate().unwrap()));
        let rebuild = old
            .rebuild(
                Arc::clone(&new_engine),
                &storage(&dir.path().join("index-1")),
            )
            .unwrap();
        rebuild.copy(&|_, _| {}).unwrap();
        rebuild
            .switch(&|_, _| {}, |_| Ok::<(), RebuildError>(()))
            .unwrap();
        (new_engine.get("a").unwrap(), new_engine)
    }

    #[test]
    fn a_recipe_that_signs_alike_keeps_shingles_and_signatures_and_another_signs_again() {
        let (text, signed_as) = (
            "the text as it was sent to the collection",
            "other words entirely for the stored shingle set",
        );
        // Only the threshold changes: nothing is signed again.
        let (record, engine) = rebuilt(params(0.6, 3), text, signed_as);
        let kept = engine.prepare(signed_as).unwrap();
        assert_eq!(record.shingles(), kept.shingles());
        assert_eq!(record.signature(), kept.signature());
        // k changes: the text is signed by the new recipe.
        let (record, engine) = rebuilt(params(0.8, 2), text, signed_as);
        let fresh = engine.prepare(text).unwrap();
        assert_eq!(record.shingles(), fresh.shingles());
        assert_eq!(record.signature(), fresh.signature());
    }

    #[test]
    fn signs_like_is_the_normalization_shingles_permutations_and_seed() {
        let base = params(0.8, 3);
        assert!(base.signs_like(&params(0.5, 3)));
        let mut p = base.clone();
        p.index.max_candidates = 7;
        assert!(base.signs_like(&p));
        assert!(!base.signs_like(&params(0.8, 4)));
        let mut p = base.clone();
        p.index.num_perm = 64;
        assert!(!base.signs_like(&p));
        let mut p = base.clone();
        p.index.seed += 1;
        assert!(!base.signs_like(&p));
        let mut p = base.clone();
        p.normalize.lowercase = !p.normalize.lowercase;
        assert!(!base.signs_like(&p));
    }
}
