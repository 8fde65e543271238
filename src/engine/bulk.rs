//! Bulk loading: sizing the maps in advance and storing a batch of records
//! at once: the snapshot restore path ([`Engine::restore_batch`]) and a
//! batch of writes ([`Engine::insert_many_journaled`], `POST
//! /documents/batch`).
//!
//! [`Engine::restore_batch`] has the effect of `insert(…, Upsert)` of each
//! record in order, without a journal, but indexes the whole batch with
//! one lock acquisition per LSH shard (in parallel) instead of one per
//! band per document. The order of its steps keeps the engine's reader
//! guarantees (see the module docs of [`engine`](super)): records are
//! stored and indexed *before* `ids` points at them, so a concurrent query
//! sees a document either fully indexed or not at all, and a slot in a
//! bucket that `ids` does not point to yet is a stale candidate, which
//! queries already skip.

use super::{
    Engine, EngineError, Journal, JournalEntry, Prepared, Record, Stamp, WriteMode, WriteOutcome,
};
use crate::engine::DocId;
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
    /// Size the slot table and every LSH shard for `documents` more
    /// documents, so that loading them does not regrow or rehash. (`ids` is
    /// a `DashMap`, which cannot reserve after construction; it grows.)
    pub fn reserve(&self, documents: usize) {
        let slots = self.next_slot.load(std::sync::atomic::Ordering::Relaxed) as usize + documents;
        self.docs.reserve_slots(slots);
        self.lsh.reserve(documents);
    }

    /// Free the buffers bulk loading keeps between batches (call after the
    /// last [`restore_batch`](Self::restore_batch)).
    pub fn finish_restore(&self) {
        self.lsh.release_bulk_buffers();
    }

    /// Store `records` as `insert(id, …, WriteMode::Upsert)` of each in
    /// order would (a later record replaces an earlier one with its id),
    /// without journaling them. Records must come from this engine's
    /// parameters (the restore path checks the fingerprint and each
    /// record's shape before calling this).
    pub fn restore_batch(&self, records: Vec<Record>) {
        // 1. Slots and the slot table.
        let placed: Vec<(Slot, Arc<Record>)> = records
            .into_iter()
            .map(|record| {
                debug_assert_eq!(record.signature().len(), self.params().index.num_perm);
                let record = Arc::new(record);
                let slot = self.alloc_slot();
                self.account(&record, true);
                self.docs.insert(slot, Arc::clone(&record));
                (slot, record)
            })
            .collect();
        // 2. The band buckets, all at once.
        let signatures: Vec<(Slot, &[u32])> = placed
            .iter()
            .map(|(slot, record)| (*slot, record.signature()))
            .collect();
        self.lsh.insert_bulk(&signatures);
        drop(signatures);
        // 3. Publish: from here on `ids` points at the new records.
        for (slot, record) in placed {
            self.publish(self.ids.entry(record.id().clone()), slot, false);
        }
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
                let record = Arc::new(Record::new(
                    w.id,
                    w.metadata,
                    w.stamp,
                    &w.doc.signature,
                    w.doc.shingles.as_slice(),
                ));
                let slot = self.alloc_slot();
                self.account(&record, true);
                self.docs.insert(slot, Arc::clone(&record));
                (slot, record, w.doc)
            })
            .collect();
        let signatures: Vec<(Slot, &[u32])> = staged
            .iter()
            .map(|(slot, record, _)| (*slot, record.signature()))
            .collect();
        self.lsh.insert_batch(&signatures);
        drop(signatures);
        // 2. Publish, in order.
        staged
            .into_iter()
            .map(|(slot, record, doc)| {
                let entry = self.ids.entry(record.id().clone());
                let live_before = self.live_under(&entry);
                if mode == WriteMode::Create && live_before {
                    let id = entry.key().clone();
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
    use crate::engine::{DocId, Engine, Query, Record, ValidParams, WriteMode};

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
    fn the_ids_map_and_the_record_share_one_id_string() {
        use crate::engine::BatchWrite;
        let e = Engine::new(ValidParams::default());
        let a = e.prepare(A).unwrap();
        e.insert(DocId::parse("one").unwrap(), &a, None, WriteMode::Create)
            .unwrap();
        // Replaced: the new record shares the key the map already holds.
        e.insert(DocId::parse("one").unwrap(), &a, None, WriteMode::Upsert)
            .unwrap();
        let writes = vec![BatchWrite {
            id: DocId::parse("two").unwrap(),
            doc: &a,
            metadata: None,
            stamp: Default::default(),
        }];
        e.insert_many_journaled(writes, WriteMode::Create, &crate::engine::NoJournal);
        e.restore_batch(vec![record(&e, "three", B)]);
        for id in ["one", "two", "three"] {
            let key = e.ids.get(id).unwrap();
            let record = e.get(id).unwrap();
            assert!(
                std::ptr::eq(key.key().as_str().as_ptr(), record.id().as_str().as_ptr()),
                "{id}: one allocation"
            );
        }
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
