//! Bulk loading: sizing the maps in advance and storing a batch of records
//! at once: the snapshot restore path ([`Restore`], from
//! [`Engine::start_restore`]) and a batch of writes
//! ([`Engine::insert_many_journaled`], `POST /documents/batch`).
//!
//! A restore has the effect of `insert(…, Upsert)` of each record in order,
//! without a journal, but indexes a whole batch with one lock acquisition
//! per LSH shard (in parallel) instead of one per band per document. The
//! order of its steps keeps the engine's reader guarantees (see the module
//! docs of [`engine`](super)): records are stored and indexed *before*
//! `ids` points at them, so a concurrent query sees a document either fully
//! indexed or not at all, and a slot in a bucket that `ids` does not point
//! to yet is a stale candidate, which queries already skip.
//!
//! **Pipelined.** Publishing ids is serial (each id's entry, in order) and
//! indexing a batch's buckets is parallel, so a [`Restore`] publishes batch
//! k − 1 on one pool thread while the other threads index batch k: the
//! publish runs one batch behind, never ahead of its batch's buckets.

use super::{Current, DocId};
use super::{
    Engine, EngineError, Journal, JournalEntry, Prepared, Record, Stamp, WriteMode, WriteOutcome,
};
use crate::lsh::index::Slot;
use std::sync::Arc;

/// One write of a batch: what [`Engine::insert_journaled`] takes.
pub struct BatchWrite<'a> {
    pub id: DocId,
    pub doc: &'a Prepared,
    pub metadata: Option<Box<str>>,
    pub stamp: Stamp,
}

impl Engine {
    /// Size the slot table, the `ids` map and every LSH shard for
    /// `documents` more documents, so that loading them does not regrow or
    /// rehash.
    pub fn reserve(&self, documents: usize) {
        let slots = self.next_slot.load(std::sync::atomic::Ordering::Relaxed) as usize + documents;
        self.docs.reserve_slots(slots);
        self.reserve_ids(documents);
        self.lsh.reserve(documents);
    }

    /// Size every `ids` shard for the share of `documents` more ids it
    /// will surely get, so that a restore does not rehash every id about
    /// once as the tables double (SipHash over id strings long out of
    /// cache: a tenth of a 1M restore's time). Ids spread over the shards
    /// by a keyed hash, binomially: each shard is sized for 5 standard
    /// deviations below the mean share, which no shard falls short of in
    /// practice (p ≈ 3·10⁻⁷), so a table is never made larger than growth
    /// would leave it (the same bytes in `/stats`); a shard whose share
    /// crosses a power of two above that grows once, as it always did.
    fn reserve_ids(&self, documents: usize) {
        let shards = self.ids.shards();
        let mean = documents as f64 / shards.len() as f64;
        let surely = (mean - 5.0 * mean.sqrt()).floor();
        if surely < 1.0 {
            return;
        }
        for shard in shards {
            shard
                .write()
                .reserve(surely as usize, |(key, _)| self.ids.hash_usize(key) as u64);
        }
    }

    /// Begin loading records in batches ([`Restore::push`]). Call
    /// [`reserve`](Self::reserve) first with the number coming.
    pub fn start_restore(&self) -> Restore<'_> {
        Restore {
            engine: self,
            pending: Vec::new(),
            scratch: PublishScratch::default(),
        }
    }

    /// Store `records` as `insert(id, …, WriteMode::Upsert)` of each in
    /// order would (a later record replaces an earlier one with its id),
    /// without journaling them: one batch of a [`Restore`], finished.
    pub fn restore_batch(&self, records: Vec<Record>) {
        let mut restore = self.start_restore();
        restore.push(records);
        restore.finish();
    }

    /// Slots for a batch (serial: slot allocation is in order, so a
    /// restore reproduces the slots of the same inserts).
    fn stage(&self, records: Vec<Record>) -> Vec<(Slot, Arc<Record>)> {
        let staged: Vec<(Slot, Arc<Record>)> = records
            .into_iter()
            .map(|record| {
                debug_assert_eq!(record.signature().len(), self.params().index.num_perm);
                (self.alloc_slot(), Arc::new(record))
            })
            .collect();
        staged
    }

    /// Point `ids` at every staged record, in order (their buckets are in),
    /// with the effect of [`publish`](Engine::publish) of each in turn.
    ///
    /// At a million documents every id is two cache misses (its string,
    /// decoded a batch ago, and its place in the `ids` table), and taking
    /// an `ids` shard lock per id would make them wait for each other (a
    /// locked instruction lets no later load start). So: the strings of a
    /// group are loaded together, then hashed once each; the batch is
    /// put in shard order (stable: an id always falls in the same shard, so
    /// repeats of an id keep their order, and ids of different shards do
    /// not interact); each shard is locked once for its run, and inside it
    /// a group's places are looked up together before any is written. The
    /// table operations are dashmap's `raw-api` (the hash and shard its
    /// own `entry` would use), all safe code.
    fn publish_staged(&self, staged: Vec<(Slot, Arc<Record>)>, scratch: &mut PublishScratch) {
        const GROUP: usize = 16;
        let shards = self.ids.shards();
        let PublishScratch {
            placed,
            order,
            starts,
        } = scratch;
        // 1. Hashes and shards (strings loaded a group at a time).
        placed.clear();
        for group in staged.chunks(GROUP) {
            let touched = group.iter().fold(0u8, |acc, (_, r)| {
                acc ^ r.id().as_str().as_bytes().first().copied().unwrap_or(0)
            });
            std::hint::black_box(touched);
            placed.extend(group.iter().map(|(_, r)| {
                let hash = self.ids.hash_usize(r.id());
                (hash as u64, self.ids.determine_shard(hash))
            }));
        }
        // 2. A stable counting sort of the batch by shard.
        starts.clear();
        starts.resize(shards.len() + 1, 0);
        for &(_, shard) in placed.iter() {
            starts[shard + 1] += 1;
        }
        for s in 0..shards.len() {
            starts[s + 1] += starts[s];
        }
        order.clear();
        order.resize(staged.len(), 0);
        for (i, &(_, shard)) in placed.iter().enumerate() {
            // `starts[shard]` is the next free place of `shard` for now.
            order[starts[shard]] = i;
            starts[shard] += 1;
        }
        // Shift back: shard s's run is `order[starts[s]..starts[s + 1]]`.
        starts.rotate_right(1);
        starts[0] = 0;
        // 3. Each shard's run under one write lock.
        let rehash =
            |(key, _): &(Current, dashmap::SharedValue<Slot>)| self.ids.hash_usize(key) as u64;
        for (s, lock) in shards.iter().enumerate() {
            let run = &order[starts[s]..starts[s + 1]];
            if run.is_empty() {
                continue;
            }
            let mut table = lock.write();
            for group in run.chunks(GROUP) {
                let mut found = 0usize;
                for &i in group {
                    let id = staged[i].1.id();
                    found += usize::from(table.get(placed[i].0, |(k, _)| k.id() == id).is_some());
                }
                std::hint::black_box(found);
                for &i in group {
                    let (slot, record) = &staged[i];
                    let (hash, id) = (placed[i].0, record.id());
                    match table.get_mut(hash, |(k, _)| k.id() == id) {
                        Some((key, current)) => {
                            // Record and slot together, as `publish` does.
                            *key = Current(Arc::clone(record));
                            let old = std::mem::replace(current.get_mut(), *slot);
                            self.release(old);
                        }
                        None => {
                            table.insert(
                                hash,
                                (
                                    Current(Arc::clone(record)),
                                    dashmap::SharedValue::new(*slot),
                                ),
                                rehash,
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Buffers of [`Engine::publish_staged`], kept for a whole restore.
#[derive(Default)]
struct PublishScratch {
    /// `(hash, shard)` of each staged record's id.
    placed: Vec<(u64, usize)>,
    /// Indexes into the batch, in shard order.
    order: Vec<usize>,
    starts: Vec<usize>,
}

/// A restore in progress (from [`Engine::start_restore`]): each
/// [`push`](Self::push) stores and indexes a batch and publishes the one
/// before it, in parallel. [`finish`](Self::finish) (or dropping it, e.g.
/// on an error half-way) publishes the last batch and frees the bulk
/// buffers, so whatever was pushed is stored, reachable and removable
/// (recovery clears a damaged snapshot's part with [`Engine::clear`]).
pub struct Restore<'e> {
    engine: &'e Engine,
    /// The last batch pushed: stored and indexed, not yet in `ids`.
    pending: Vec<(Slot, Arc<Record>)>,
    scratch: PublishScratch,
}

impl Restore<'_> {
    /// Store and index `records`, and publish the previous batch meanwhile.
    /// Records must come from this engine's parameters (the restore path
    /// checks the fingerprint and each record's shape before calling this).
    pub fn push(&mut self, records: Vec<Record>) {
        let engine = self.engine;
        let staged = engine.stage(records);
        let previous = std::mem::take(&mut self.pending);
        let scratch = &mut self.scratch;
        {
            let signatures: Vec<(Slot, &[u32])> = staged
                .iter()
                .map(|(slot, record)| (*slot, record.signature()))
                .collect();
            // Batch k in the slot table, then its buckets (and counts) on
            // the pool while batch k − 1 (whose buckets the previous push
            // inserted) is published.
            engine.admit_many(staged.iter().map(|(slot, record)| (*slot, record)), || {
                rayon::join(
                    || {
                        engine.lsh.insert_bulk(&signatures);
                        engine.index_passages_bulk(&staged);
                    },
                    || engine.publish_staged(previous, scratch),
                )
            });
        }
        self.pending = staged;
    }

    /// Publish the last batch and free the bulk buffers.
    pub fn finish(self) {
        drop(self);
    }
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        self.engine
            .publish_staged(std::mem::take(&mut self.pending), &mut self.scratch);
        self.engine.lsh.release_bulk_buffers();
    }
}

impl Engine {
    /// Write `items` as [`insert_journaled`](Self::insert_journaled) of each
    /// in order would (the same outcomes, the same journal entries in the
    /// same order, a later item with an id seeing the earlier one), but
    /// with the band buckets of the whole batch inserted at once: one lock
    /// per LSH shard instead of one per band per document.
    ///
    /// 1. **Stage** every item: its record in a fresh slot, indexed in the
    ///    buckets (in bulk). `ids` does not point at it yet, so to a query
    ///    it is a stale candidate, skipped (as in a restore).
    /// 2. **Publish** in order, each under its `ids` entry as a single
    ///    insert does: the `Create` check, the journal append, the swap.
    ///    An item refused there (exists, or the journal failed) has its
    ///    staged slot released, buckets included.
    pub fn insert_many_journaled(
        &self,
        items: Vec<BatchWrite<'_>>,
        mode: WriteMode,
        journal: &dyn Journal,
    ) -> Vec<Result<(WriteOutcome, u64), EngineError>> {
        // 1. Stage.
        let staged: Vec<(Slot, Arc<Record>, &Prepared)> = items
            .into_iter()
            .map(|w| {
                let record = Arc::new(Record::with_selection(
                    w.id,
                    w.metadata,
                    w.stamp,
                    &w.doc.signature,
                    w.doc.shingles.as_slice(),
                    &w.doc.selection,
                ));
                (self.alloc_slot(), record, w.doc)
            })
            .collect();
        let signatures: Vec<(Slot, &[u32])> = staged
            .iter()
            .map(|(slot, record, _)| (*slot, record.signature()))
            .collect();
        self.admit_many(
            staged.iter().map(|(slot, record, _)| (*slot, record)),
            || {
                if self.passage_index() {
                    // The two indexes take their own locks: fill them side by
                    // side (a batch's posting inserts cost about what its band
                    // inserts do).
                    rayon::join(
                        || self.lsh.insert_batch(&signatures),
                        || {
                            self.postings.insert_many(
                                staged.iter().map(|(slot, record, _)| (*slot, &**record)),
                            )
                        },
                    );
                } else {
                    self.lsh.insert_batch(&signatures);
                }
            },
        );
        drop(signatures);
        // 2. Publish, in order.
        staged
            .into_iter()
            .map(|(slot, record, doc)| {
                let entry = self.ids.entry(Current(Arc::clone(&record)));
                let live_before = self.live_under(&entry);
                if mode == WriteMode::Create && live_before {
                    let id = entry.key().id().clone();
                    drop(entry);
                    self.release(slot);
                    return Err(EngineError::AlreadyExists(id));
                }
                let seq = match journal.append(JournalEntry::Upsert(&record, doc.journal_payload()))
                {
                    Ok(seq) => seq,
                    Err(e) => {
                        drop(entry);
                        self.release(slot);
                        return Err(EngineError::Journal(e));
                    }
                };
                Ok((self.publish(entry, slot, live_before), seq))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Current;
    use crate::engine::{DocId, Engine, Query, Record, ValidParams, WriteMode};
    use std::sync::Arc;

    fn record(e: &Engine, id: &str, text: &str) -> Record {
        let p = e.prepare(text).unwrap();
        Record::new(
            DocId::parse(id).unwrap(),
            None,
            crate::engine::Stamp::default(),
            p.signature(),
            p.shingles(),
        )
    }

    /// A journal that records what it is given and refuses the `fail_at`th
    /// append (0-based).
    struct Recorder {
        seen: std::sync::Mutex<Vec<String>>,
        fail_at: Option<usize>,
    }

    impl crate::engine::Journal for Recorder {
        fn append(
            &self,
            entry: crate::engine::JournalEntry<'_>,
        ) -> Result<u64, crate::engine::JournalError> {
            let mut seen = self.seen.lock().unwrap();
            if self.fail_at == Some(seen.len()) {
                seen.push("refused".into());
                return Err(crate::engine::JournalError::new(std::io::Error::other(
                    "disk full",
                )));
            }
            if let crate::engine::JournalEntry::Upsert(r, _) = entry {
                seen.push(r.id().to_string());
            }
            Ok(seen.len() as u64)
        }
    }

    #[test]
    fn a_batch_of_writes_answers_like_the_same_writes_one_by_one() {
        use crate::engine::{BatchWrite, EngineError, Stamp, WriteOutcome};
        let texts = [
            ("a", A),
            ("b", B),
            ("a", B), // Create: exists; Upsert: replaces the first a
            ("c", "trois mots « français » — déjà vu à l’école"),
            ("b", A),
            ("d", "Съешь же ещё этих мягких французских булок"),
        ];
        for mode in [WriteMode::Create, WriteMode::Upsert] {
            let bulk = Engine::new(ValidParams::default());
            let one = Engine::new(ValidParams::default());
            one.insert(
                DocId::parse("b").unwrap(),
                &one.prepare(B).unwrap(),
                None,
                mode,
            )
            .unwrap();
            bulk.insert(
                DocId::parse("b").unwrap(),
                &bulk.prepare(B).unwrap(),
                None,
                mode,
            )
            .unwrap();
            let prepared: Vec<_> = texts
                .iter()
                .map(|(_, t)| bulk.prepare(t).unwrap())
                .collect();
            let journal = Recorder {
                seen: Default::default(),
                fail_at: None,
            };
            let writes = texts
                .iter()
                .zip(&prepared)
                .map(|((id, _), doc)| BatchWrite {
                    id: DocId::parse(id).unwrap(),
                    doc,
                    metadata: Some(format!("{{\"id\":\"{id}\"}}").into()),
                    stamp: Stamp {
                        created_ms: 7,
                        expires_ms: None,
                    },
                })
                .collect();
            let got: Vec<Result<WriteOutcome, EngineError>> = bulk
                .insert_many_journaled(writes, mode, &journal)
                .into_iter()
                .map(|r| r.map(|(o, _)| o))
                .collect();
            let want: Vec<Result<WriteOutcome, EngineError>> = texts
                .iter()
                .map(|(id, t)| {
                    let p = one.prepare(t).unwrap();
                    let meta = Some(format!("{{\"id\":\"{id}\"}}").into());
                    one.insert(DocId::parse(id).unwrap(), &p, meta, mode)
                })
                .collect();
            assert_eq!(got, want, "{mode:?}");
            // Journaled: exactly the accepted writes, in order.
            let accepted: Vec<String> = texts
                .iter()
                .zip(&want)
                .filter(|(_, w)| w.is_ok())
                .map(|((id, _), _)| id.to_string())
                .collect();
            assert_eq!(*journal.seen.lock().unwrap(), accepted);
            let t = bulk.threshold(None).unwrap();
            for id in ["a", "b", "c", "d"] {
                let mut x = bulk.similar_to_id(id, &Query::new(t, 10)).unwrap();
                let mut y = one.similar_to_id(id, &Query::new(t, 10)).unwrap();
                x.matches.iter_mut().for_each(|m| m.created_ms = 0);
                y.matches.iter_mut().for_each(|m| m.created_ms = 0);
                assert_eq!(x, y, "{mode:?} {id}");
                assert_eq!(
                    bulk.get(id).unwrap().shingles(),
                    one.get(id).unwrap().shingles()
                );
            }
            // Refused items leave nothing behind: the same slots, buckets
            // and bytes as the one-by-one engine.
            assert_eq!(bulk.docs.len(), one.docs.len(), "{mode:?}");
            assert_eq!(bulk.lsh_bucket_count(), one.lsh_bucket_count(), "{mode:?}");
            assert_eq!(bulk.memory().shingles_bytes, one.memory().shingles_bytes);
        }
    }

    #[test]
    fn an_item_the_journal_refuses_is_not_written_and_the_rest_go_on() {
        use crate::engine::{BatchWrite, EngineError};
        let e = Engine::new(ValidParams::default());
        let docs = [
            e.prepare(A).unwrap(),
            e.prepare(B).unwrap(),
            e.prepare(A).unwrap(),
        ];
        let journal = Recorder {
            seen: Default::default(),
            fail_at: Some(1),
        };
        let writes = ["x", "y", "z"]
            .iter()
            .zip(&docs)
            .map(|(id, doc)| BatchWrite {
                id: DocId::parse(id).unwrap(),
                doc,
                metadata: None,
                stamp: Default::default(),
            })
            .collect();
        let got = e.insert_many_journaled(writes, WriteMode::Create, &journal);
        assert!(got[0].is_ok() && got[2].is_ok());
        assert!(matches!(got[1], Err(EngineError::Journal(_))));
        assert!(e.get("y").is_none());
        assert_eq!(e.len(), 2);
        assert_eq!(e.docs.len(), 2, "the refused item's slot is released");
        let t = e.threshold(None).unwrap();
        let found = e.similar_to_id("x", &Query::new(t, 10)).unwrap();
        assert_eq!(found.matches.len(), 1, "{found:?}");
        assert_eq!(found.matches[0].id.as_str(), "z");
    }

    #[test]
    fn the_ids_map_holds_the_current_record_itself() {
        use crate::engine::BatchWrite;
        // The map's key is the current record (no id of its own), and its
        // value the record's slot, whichever path stored it. A short id is
        // inline in the record; a long one is a block of its own.
        for suffix in ["", "-long-enough-to-have-its-own-block"] {
            let id = |name: &str| format!("{name}{suffix}");
            let e = Engine::new(ValidParams::default());
            let a = e.prepare(A).unwrap();
            e.insert(
                DocId::parse(&id("one")).unwrap(),
                &a,
                None,
                WriteMode::Create,
            )
            .unwrap();
            // Replaced: the entry's key becomes the new record.
            e.insert(
                DocId::parse(&id("one")).unwrap(),
                &a,
                None,
                WriteMode::Upsert,
            )
            .unwrap();
            let writes = vec![BatchWrite {
                id: DocId::parse(&id("two")).unwrap(),
                doc: &a,
                metadata: None,
                stamp: Default::default(),
            }];
            e.insert_many_journaled(writes, WriteMode::Create, &crate::engine::NoJournal);
            e.restore_batch(vec![record(&e, &id("three"), B)]);
            for name in ["one", "two", "three"] {
                let id = id(name);
                let entry = e.ids.get(id.as_str()).unwrap();
                let in_slot = e.docs.get(entry.value()).unwrap();
                assert!(
                    Arc::ptr_eq(&entry.key().0, &in_slot),
                    "{id}: the slot's record"
                );
                assert_eq!(in_slot.id().as_str(), id);
                let heap = !suffix.is_empty();
                assert_eq!(in_slot.id().is_heap_allocated(), heap, "{id}");
            }
            // The memory report counts only the ids with a block of their own.
            let long: usize = ["one", "two", "three"].map(|n| id(n).len()).iter().sum();
            let expected = if suffix.is_empty() { 0 } else { long };
            assert_eq!(e.memory().ids_bytes, expected);
        }
    }

    /// The ids of the candidates of `id`'s signature (slots differ between
    /// a restore and single inserts once ids repeat: a restore allocates a
    /// batch's slots before it releases the versions they replace).
    fn candidate_ids(e: &Engine, id: &str) -> Vec<String> {
        let mut slots = Vec::new();
        assert!(e
            .lsh
            .candidates(e.get(id).unwrap().signature(), &mut slots, usize::MAX));
        let mut ids: Vec<String> = slots
            .iter()
            .map(|s| e.docs.get(s).unwrap().id().to_string())
            .collect();
        ids.sort();
        ids
    }

    /// Texts where many documents share every band (one text repeated, so
    /// 21 shards get far more keys than the rest) and some are unique.
    fn skewed(i: usize) -> String {
        if i.is_multiple_of(3) {
            A.to_string()
        } else {
            format!(
                "document {i} about « Zoë’s café » in Москва and 東京 🎉 with words w{i} w{} w{}",
                i * 7,
                i % 13
            )
        }
    }

    #[test]
    fn a_pipelined_restore_equals_the_same_inserts_one_by_one() {
        let restored = Engine::new(ValidParams::default());
        let one = Engine::new(ValidParams::default());
        // 700 records in batches of uneven sizes; ids repeat across
        // batches, and the last batch names d0, d1, d2 again and again (a
        // later record replaces an earlier one, also within a group).
        let ids: Vec<String> = (0..700)
            .map(|i| format!("d{}", if i < 600 { i % 450 } else { i % 3 }))
            .collect();
        restored.reserve(ids.len());
        let mut restore = restored.start_restore();
        let mut at = 0;
        for size in [1, 0, 200, 63, 300, 136] {
            let batch = (at..at + size)
                .map(|i| record(&restored, &ids[i], &skewed(i)))
                .collect();
            restore.push(batch);
            at += size;
        }
        assert_eq!(at, ids.len());
        restore.finish();
        for (i, id) in ids.iter().enumerate() {
            let p = one.prepare(&skewed(i)).unwrap();
            one.insert(DocId::parse(id).unwrap(), &p, None, WriteMode::Upsert)
                .unwrap();
        }
        assert_eq!(restored.len(), 450);
        assert_eq!(
            restored.docs.len(),
            one.docs.len(),
            "replaced versions released"
        );
        assert_eq!(restored.lsh_bucket_count(), one.lsh_bucket_count());
        let (m, n) = (restored.memory(), one.memory());
        assert_eq!(
            (m.shingles_bytes, m.signatures_bytes, m.ids_bytes),
            (n.shingles_bytes, n.signatures_bytes, n.ids_bytes)
        );
        let t = restored.threshold(None).unwrap();
        for i in (0..450).step_by(7) {
            let id = format!("d{i}");
            assert_eq!(
                candidate_ids(&restored, &id),
                candidate_ids(&one, &id),
                "{id}"
            );
            let mut x = restored.similar_to_id(&id, &Query::new(t, 500)).unwrap();
            let mut y = one.similar_to_id(&id, &Query::new(t, 500)).unwrap();
            x.matches.iter_mut().for_each(|m| m.created_ms = 0);
            y.matches.iter_mut().for_each(|m| m.created_ms = 0);
            assert_eq!(x, y, "{id}");
        }
        // Everything removable: no stale slot or bucket left behind.
        for i in 0..450 {
            assert!(restored.remove(&format!("d{i}")));
        }
        assert_eq!(restored.lsh_bucket_count(), 0);
        assert_eq!(restored.docs.len(), 0);
    }

    #[test]
    fn a_pipelined_restore_takes_the_bytes_of_the_same_batches_one_at_a_time() {
        // Publishing a batch behind its buckets costs nothing: the memory
        // report equals, to the byte, that of the same batches each
        // indexed and published before the next (the unpipelined path).
        let sizes = [1000, 999, 1001];
        let batches = |e: &Engine| -> Vec<Vec<Record>> {
            let mut all = (0..3000).map(|i| record(e, &format!("id-{i}"), &skewed(i)));
            sizes
                .iter()
                .map(|&n| all.by_ref().take(n).collect())
                .collect()
        };
        let serial = Engine::new(ValidParams::default());
        serial.reserve(3000);
        for batch in batches(&serial) {
            serial.restore_batch(batch);
        }
        let piped = Engine::new(ValidParams::default());
        piped.reserve(3000);
        let mut restore = piped.start_restore();
        for batch in batches(&piped) {
            restore.push(batch);
        }
        restore.finish();
        let (mut p, mut s) = (piped.memory(), serial.memory());
        // The ids map's capacity depends on how each map's own random
        // SipHash key spreads the ids over its shards (see the next test).
        p.id_map_bytes = 0;
        s.id_map_bytes = 0;
        p.total_bytes = 0;
        s.total_bytes = 0;
        p.bytes_per_document = 0.0;
        s.bytes_per_document = 0.0;
        assert_eq!(p, s);
        assert_eq!(piped.lsh_bucket_count(), serial.lsh_bucket_count());
    }

    #[test]
    fn sizing_the_ids_map_up_front_keeps_the_capacity_growth_reaches() {
        // Each shard ends with the capacity a table grown by inserting as
        // many keys has (hashbrown's policy, which std's map shares).
        let grown_capacity = |n: usize| {
            let mut m = std::collections::HashMap::new();
            (0..n).for_each(|i| {
                m.insert(i, ());
            });
            m.capacity()
        };
        for n in [1usize, 100, 5_000, 40_000, 200_000] {
            let e = Engine::new(ValidParams::default());
            e.reserve_ids(n);
            let doc = e.prepare(A).unwrap();
            for i in 0..n {
                let id = DocId::parse(&format!("user/{i}")).unwrap();
                let record = Record::new(
                    id,
                    None,
                    Default::default(),
                    &doc.signature,
                    doc.shingles.as_slice(),
                );
                e.ids.insert(Current(Arc::new(record)), i as u32);
            }
            for (k, shard) in e.ids.shards().iter().enumerate() {
                let t = shard.read();
                assert_eq!(t.capacity(), grown_capacity(t.len()), "{n} ids, shard {k}");
            }
        }
    }

    #[test]
    fn a_restore_abandoned_half_way_leaves_every_pushed_record_removable() {
        let e = Engine::new(ValidParams::default());
        e.reserve(10);
        {
            let mut restore = e.start_restore();
            restore.push(vec![record(&e, "a", A), record(&e, "b", B)]);
            restore.push(vec![record(&e, "c", A)]);
            // Dropped without `finish`, as when the reader fails.
        }
        for id in ["a", "b", "c"] {
            assert!(e.get(id).is_some(), "{id} published");
        }
        e.clear();
        assert_eq!(e.len(), 0);
        assert_eq!(e.docs.len(), 0);
        assert_eq!(e.lsh_bucket_count(), 0);
        assert_eq!(e.memory().shingles_bytes, 0);
    }

    const A: &str = "the quick brown fox jumps over the lazy dog near the river bank today";
    const B: &str = "a completely different sentence about databases and their many indexes";

    #[test]
    fn a_restored_batch_answers_like_inserted_documents() {
        let bulk = Engine::new(ValidParams::default());
        let one = Engine::new(ValidParams::default());
        bulk.reserve(4);
        bulk.restore_batch(vec![
            record(&bulk, "a", A),
            record(&bulk, "a2", A),
            record(&bulk, "b", B),
        ]);
        for (id, text) in [("a", A), ("a2", A), ("b", B)] {
            let p = one.prepare(text).unwrap();
            one.insert(DocId::parse(id).unwrap(), &p, None, WriteMode::Upsert)
                .unwrap();
        }
        let t = bulk.threshold(None).unwrap();
        // The same answers, up to the creation times (the restored records
        // keep theirs: here 0).
        let answer = |e: &Engine, id: &str| {
            let mut q = e.similar_to_id(id, &Query::new(t, 10)).unwrap();
            q.matches.iter_mut().for_each(|m| m.created_ms = 0);
            q
        };
        for id in ["a", "a2", "b"] {
            assert_eq!(answer(&bulk, id), answer(&one, id));
        }
        assert_eq!(bulk.len(), 3);
        assert_eq!(bulk.lsh_bucket_count(), one.lsh_bucket_count());
        assert_eq!(bulk.memory().shingles_bytes, one.memory().shingles_bytes);
    }

    #[test]
    fn a_later_record_with_the_same_id_replaces_the_earlier() {
        let e = Engine::new(ValidParams::default());
        e.restore_batch(vec![record(&e, "x", A), record(&e, "q", A)]);
        e.restore_batch(vec![
            record(&e, "x", B),
            record(&e, "x", A),
            record(&e, "x", B),
        ]);
        assert_eq!(e.len(), 2);
        assert_eq!(e.docs.len(), 2, "replaced records are released");
        let t = e.threshold(None).unwrap();
        assert!(e
            .similar_to_id("q", &Query::new(t, 10))
            .unwrap()
            .matches
            .is_empty());
        let mut buckets = e.lsh_bucket_count();
        e.remove("x");
        e.remove("q");
        buckets -= e.lsh_bucket_count();
        assert!(buckets > 0);
        assert_eq!(e.lsh_bucket_count(), 0, "nothing left indexed");
        assert_eq!(e.memory().shingles_bytes, 0);
    }
}
