//! Bulk loading: sizing the maps in advance and storing a batch of records
//! at once (the snapshot restore path).
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

use super::{Engine, Record};
use crate::lsh::index::Slot;
use dashmap::mapref::entry::Entry;
use std::sync::Arc;

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
            let old = match self.ids.entry(record.id().clone()) {
                Entry::Occupied(mut e) => Some(e.insert(slot)),
                Entry::Vacant(e) => {
                    e.insert(slot);
                    None
                }
            };
            if let Some(old) = old {
                self.release(old);
            }
        }
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
