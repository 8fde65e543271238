//! The engine: the one owner of every map. Sync API, no I/O, no async.
//!
//! ```text
//!   text ─prepare→ Prepared{shingles, signature} ─insert→ ids / docs / lsh
//!   query: signature ─lsh→ candidate slots ─docs→ records ─exact Jaccard→ matches
//! ```
//!
//! **State and locks.** Three concurrent maps, each sharded behind many
//! `RwLock`s, so there is no global lock on the hot path:
//! - `ids`: id → slot, a `DashMap`. The entry of an id is the serialization
//!   point for writes to that id: an insert or replace holds it while
//!   indexing the new record and swapping the slot, so a reader sees the old
//!   or the new version, never a half-indexed one.
//! - `docs`: slot → `Arc<Record>`, a `RecordTable` (a vector indexed by
//!   slot in 64 locked shards). Readers clone the `Arc` out; no guard leaves
//!   the call.
//! - `lsh`: band buckets of slots, an [`LshIndex`] of 1,024 locked
//!   open-addressing shards; each call holds one shard lock at a time.
//!
//! Lock order: a writer may take `docs` and `lsh` guards while holding an
//! `ids` entry; nobody takes an `ids` guard while holding a `docs` or `lsh`
//! guard, and no guard is held across two operations on the same map (each
//! `docs` and `lsh` call holds one shard lock and takes no other). That is
//! the whole deadlock argument. The bulk restore path (`bulk.rs`) follows the
//! same order: it stores and indexes a batch, then publishes its ids.
//!
//! **Stale candidates are harmless.** A bucket may briefly name a slot whose
//! record is being removed or replaced, or whose slot was freed and reused.
//! Every candidate is re-read from `docs`, verified exactly, and accepted only
//! if `ids` still maps its id to that slot, so every returned match is a
//! true statement about a document that is stored.

mod bulk;
mod dedup;
mod id;
mod params;
mod record;
mod unique;

pub use dedup::{Edge, Group, GroupMember, Groups, Progress, ScanStats};
pub use id::{DocId, IdError, MAX_ID_BYTES};
pub use params::{EngineParams, EngineParamsError, MAX_SHINGLE_K};
pub use record::Record;
use record::{malloc_block, RecordTable};
pub use unique::UniqueOutcome;

use crate::jaccard::{self, Overlap};
use crate::lsh::index::Slot;
use crate::lsh::{BandParams, LshIndex};
use crate::minhash::{self, MinHasher};
use crate::text::{ShingleSet, TextError, Tokenizer};
use crossbeam_queue::SegQueue;
use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Names the hash functions a signature depends on; persisted data records
/// it, and any change to shingle hashing, the permutation family or band
/// keys must change it.
pub const HASH_FAMILY: &str = "neardup-v2: word shingles = fmix64 of a weighted sum of per-word 64-bit hashes (8-byte chunk steps + fmix64), char shingles = xxh3-64, folded to u32; (x^b)*a mod 2^32 permutations from splitmix64; fmix64 band keys";

/// A document ready to index: its shingle set and signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prepared {
    shingles: ShingleSet,
    signature: Box<[u32]>,
}

impl Prepared {
    pub fn shingles(&self) -> &[u32] {
        self.shingles.as_slice()
    }

    pub fn signature(&self) -> &[u32] {
        &self.signature
    }
}

/// A write as the journal sees it: enough to replay it without re-signing.
#[derive(Debug, Clone, Copy)]
pub enum JournalEntry<'a> {
    Upsert(&'a Record),
    Delete(&'a str),
}

/// A write-ahead log the engine appends to *under the id's entry lock*, so
/// the log order of writes to one id is the order they were applied in.
/// `append` must be quick (buffer the entry); durability is the caller's
/// next step, outside the lock. The engine itself does no I/O.
pub trait Journal: Send + Sync {
    /// Record `entry`; returns a sequence number to wait on for durability.
    fn append(&self, entry: JournalEntry<'_>) -> Result<u64, JournalError>;
}

/// Why a journal refused or could not make durable a write: the journal's
/// own error, kept whole (its source chain, the file it names) for the log,
/// while the engine and the HTTP layer need only know that it was one.
#[derive(Debug, Clone, thiserror::Error)]
#[error(transparent)]
pub struct JournalError(Arc<dyn std::error::Error + Send + Sync>);

/// Two journal errors are equal when they are the same error.
impl PartialEq for JournalError {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl JournalError {
    pub fn new(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(e))
    }

    /// The journal's error, if it is a `T`.
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

/// No journal: an in-memory engine (tests, benches, offline tools).
pub struct NoJournal;

impl Journal for NoJournal {
    fn append(&self, _: JournalEntry<'_>) -> Result<u64, JournalError> {
        Ok(0)
    }
}

/// How an insert treats an id that already exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    /// Fail with [`EngineError::AlreadyExists`].
    Create,
    /// Replace the stored document.
    Upsert,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    Created,
    Replaced,
}

/// A query threshold checked against what the index is tuned for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Threshold(f64);

impl Threshold {
    pub fn value(self) -> f64 {
        self.0
    }
}

/// Errors of engine operations, each carrying what the caller needs to explain it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    #[error("a document with id {0:?} already exists")]
    AlreadyExists(DocId),
    #[error("no document with id {0:?}")]
    NotFound(String),
    #[error(transparent)]
    Text(#[from] TextError),
    #[error("threshold must be greater than 0 and at most 1, got {0:?}")]
    ThresholdOutOfRange(f64),
    /// The journal refused the write (e.g. the disk is full); nothing was applied.
    #[error("the write could not be logged: {0}")]
    Journal(#[source] JournalError),
    #[error(
        "threshold {value:?} is below {min}, the lowest this index finds with recall ≥ 0.99 \
         (its index.threshold is {tuned}); an index tuned for a lower index.threshold can be queried lower"
    )]
    ThresholdBelowTuned { value: f64, min: f64, tuned: f64 },
}

/// One verified near-duplicate.
#[derive(Clone, Debug, PartialEq)]
pub struct Match {
    pub id: DocId,
    /// Exact Jaccard similarity of the shingle sets.
    pub jaccard: f64,
    /// MinHash estimate (fraction of equal signature slots).
    pub estimate: f64,
}

/// The answer to a similarity query, with the work it took.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueryOutcome {
    /// Sorted by Jaccard descending, then id; at most `limit`.
    pub matches: Vec<Match>,
    /// Distinct candidates the LSH index proposed (the queried document excluded).
    pub candidates: usize,
    /// Candidates whose exact Jaccard fell below the threshold.
    pub rejected: usize,
    /// True when the candidate list hit `max_candidates` and was cut.
    pub truncated: bool,
}

/// `GET /compare`: both scores and the raw counts.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub jaccard: f64,
    pub estimate: f64,
    pub overlap: Overlap,
}

/// Approximate heap use by component, for `/stats`.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct MemoryStats {
    pub shingles_bytes: usize,
    pub signatures_bytes: usize,
    pub ids_bytes: usize,
    pub metadata_bytes: usize,
    /// Record headers, `Arc` counts and allocator rounding (estimated).
    pub records_overhead_bytes: usize,
    pub id_map_bytes: usize,
    pub doc_map_bytes: usize,
    pub lsh_bytes: usize,
    pub total_bytes: usize,
    /// What the index costs with no document in it (table shards and their
    /// first buckets): part of `total_bytes`, not of `bytes_per_document`.
    pub fixed_bytes: usize,
    /// `(total_bytes - fixed_bytes) / documents`: the cost of one more
    /// document, not skewed by the fixed part on a nearly empty index.
    pub bytes_per_document: f64,
}

/// Shards of the `ids` map: scans (snapshots, `records()`) hold one shard's
/// read lock at a time, so more shards mean shorter writer stalls.
const ID_SHARDS: usize = 64;

pub struct Engine {
    params: EngineParams,
    bands: BandParams,
    tokenizer: Tokenizer,
    minhasher: MinHasher,
    /// id → slot; the per-id write serialization point (see module docs).
    /// Default SipHash: ids come from clients, so the hasher must resist flooding.
    ids: DashMap<DocId, Slot>,
    /// slot → record. Slots are dense small integers (freed ones are
    /// reused), so a sharded vector indexed by slot: 8 bytes a document.
    docs: RecordTable,
    lsh: LshIndex,
    /// Slots released by deletes and replaces, reused before `next_slot` grows.
    /// Lock-free so that allocation is not a global lock on the write path.
    free_slots: SegQueue<Slot>,
    next_slot: AtomicU32,
    /// Sum of shingle-set sizes of stored records (memory report).
    shingle_values: AtomicUsize,
    id_bytes: AtomicUsize,
    metadata_bytes: AtomicUsize,
    /// Bumped by every applied write: lets callers cache whole-index answers.
    generation: AtomicU64,
    /// Striped by band key: serializes insert-if-unique calls that could see each other.
    unique_locks: unique::Stripes,
    /// Heap bytes of the empty maps, measured at construction (memory report).
    fixed_bytes: usize,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("params", &self.params)
            .field("bands", &self.bands)
            .field("documents", &self.len())
            .finish()
    }
}

impl Engine {
    pub fn new(params: EngineParams) -> Result<Self, EngineParamsError> {
        let bands = params.resolve_bands()?;
        let lsh = LshIndex::new(bands.bands, bands.rows, params.seed);
        let docs = RecordTable::default();
        let fixed_bytes = lsh.heap_bytes() + docs.heap_bytes();
        Ok(Self {
            tokenizer: Tokenizer::new(params.normalize, params.shingle, params.seed),
            minhasher: MinHasher::new(params.num_perm, params.seed),
            lsh,
            ids: DashMap::with_shard_amount(ID_SHARDS),
            docs,
            fixed_bytes,
            free_slots: SegQueue::new(),
            next_slot: AtomicU32::new(0),
            shingle_values: AtomicUsize::new(0),
            id_bytes: AtomicUsize::new(0),
            metadata_bytes: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            unique_locks: unique::Stripes::new(),
            params,
            bands,
        })
    }

    pub fn params(&self) -> &EngineParams {
        &self.params
    }

    pub fn band_params(&self) -> &BandParams {
        &self.bands
    }

    /// Changes whenever a write is applied: equal values mean the same contents.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Number of stored documents.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Normalize, shingle and sign `text`. Pure CPU work: callers run it on
    /// whatever thread suits them (in parallel for batches).
    pub fn prepare(&self, text: &str) -> Result<Prepared, TextError> {
        let shingles = self.tokenizer.shingles(text)?;
        let signature = self.minhasher.sign(shingles.as_slice());
        Ok(Prepared {
            shingles,
            signature,
        })
    }

    /// Check a query threshold against the range this index serves.
    pub fn threshold(&self, value: Option<f64>) -> Result<Threshold, EngineError> {
        let Some(value) = value else {
            return Ok(Threshold(self.params.threshold));
        };
        if !(value > 0.0 && value <= 1.0) {
            return Err(EngineError::ThresholdOutOfRange(value));
        }
        if value < self.bands.min_query_threshold {
            return Err(EngineError::ThresholdBelowTuned {
                value,
                min: self.bands.min_query_threshold,
                tuned: self.params.threshold,
            });
        }
        Ok(Threshold(value))
    }

    fn alloc_slot(&self) -> Slot {
        self.free_slots.pop().unwrap_or_else(|| {
            let slot = self.next_slot.fetch_add(1, Ordering::Relaxed);
            assert!(slot < Slot::MAX, "slot space exhausted");
            slot
        })
    }

    /// Store a prepared document under `id` (no journal).
    pub fn insert(
        &self,
        id: DocId,
        doc: &Prepared,
        metadata: Option<Box<str>>,
        mode: WriteMode,
    ) -> Result<WriteOutcome, EngineError> {
        self.insert_journaled(id, doc, metadata, mode, &NoJournal)
            .map(|(outcome, _)| outcome)
    }

    /// Store a prepared document under `id`, appending it to `journal`
    /// first; returns the outcome and the journal's sequence number. If the
    /// append fails nothing is applied.
    pub fn insert_journaled(
        &self,
        id: DocId,
        doc: &Prepared,
        metadata: Option<Box<str>>,
        mode: WriteMode,
        journal: &dyn Journal,
    ) -> Result<(WriteOutcome, u64), EngineError> {
        let entry = self.ids.entry(id);
        if mode == WriteMode::Create {
            if let Entry::Occupied(e) = &entry {
                return Err(EngineError::AlreadyExists(e.key().clone()));
            }
        }
        let record = Arc::new(Record::new(
            entry.key().clone(),
            metadata,
            &doc.signature,
            doc.shingles.as_slice(),
        ));
        let seq = journal
            .append(JournalEntry::Upsert(&record))
            .map_err(EngineError::Journal)?;
        let slot = self.alloc_slot();
        self.account(&record, true);
        self.docs.insert(slot, Arc::clone(&record));
        self.lsh.insert(slot, record.signature());
        // The swap below is the instant readers switch to the new version.
        let old = match entry {
            Entry::Occupied(mut e) => Some(e.insert(slot)),
            Entry::Vacant(e) => {
                e.insert(slot);
                None
            }
        };
        match old {
            Some(old_slot) => {
                self.release(old_slot);
                Ok((WriteOutcome::Replaced, seq))
            }
            None => Ok((WriteOutcome::Created, seq)),
        }
    }

    /// Remove `id`; false if it was not stored.
    pub fn remove(&self, id: &str) -> bool {
        matches!(self.remove_journaled(id, &NoJournal), Ok(Some(_)))
    }

    /// Remove `id`, journaling the delete first; `None` if it was not stored.
    pub fn remove_journaled(
        &self,
        id: &str,
        journal: &dyn Journal,
    ) -> Result<Option<u64>, EngineError> {
        // `entry` needs an owned key; an id that does not parse cannot be stored.
        let Ok(key) = DocId::parse(id) else {
            return Ok(None);
        };
        let Entry::Occupied(entry) = self.ids.entry(key) else {
            return Ok(None);
        };
        let seq = journal
            .append(JournalEntry::Delete(id))
            .map_err(EngineError::Journal)?;
        let (_, slot) = entry.remove_entry();
        self.release(slot);
        Ok(Some(seq))
    }

    /// Remove every document (recovery discards a damaged snapshot's part).
    pub fn clear(&self) {
        let ids: Vec<DocId> = self.ids.iter().map(|e| e.key().clone()).collect();
        for id in ids {
            self.remove(id.as_str());
        }
    }

    /// Drop a slot that `ids` no longer points to.
    fn release(&self, slot: Slot) {
        if let Some((_, record)) = self.docs.remove(&slot) {
            self.lsh.remove(slot, record.signature());
            self.account(&record, false);
        }
        self.free_slots.push(slot);
    }

    fn account(&self, record: &Record, add: bool) {
        self.generation.fetch_add(1, Ordering::Release);
        let op = |counter: &AtomicUsize, n: usize| {
            if add {
                counter.fetch_add(n, Ordering::Relaxed);
            } else {
                counter.fetch_sub(n, Ordering::Relaxed);
            }
        };
        op(&self.shingle_values, record.shingles().len());
        op(&self.id_bytes, record.id().as_str().len());
        op(&self.metadata_bytes, record.metadata().map_or(0, str::len));
    }

    /// True if `record`, read from `slot`, is the version `ids` points at
    /// now (the check that makes stale candidates harmless; module docs).
    fn is_current(&self, record: &Record, slot: Slot) -> bool {
        self.ids.get(record.id().as_str()).map(|s| *s) == Some(slot)
    }

    /// The current record of `id`.
    pub fn get(&self, id: &str) -> Option<Arc<Record>> {
        let slot = *self.ids.get(id)?;
        self.docs.get(&slot).map(|r| Arc::clone(&r))
    }

    /// Near-duplicates of the stored document `id` (never `id` itself).
    pub fn similar_to_id(
        &self,
        id: &str,
        threshold: Threshold,
        limit: usize,
    ) -> Result<QueryOutcome, EngineError> {
        let record = self
            .get(id)
            .ok_or_else(|| EngineError::NotFound(id.to_owned()))?;
        Ok(self.query(
            record.shingles(),
            record.signature(),
            Some(id),
            threshold,
            limit,
        ))
    }

    /// Near-duplicates of an unstored document; `exclude` skips one id.
    pub fn similar_to(
        &self,
        doc: &Prepared,
        exclude: Option<&str>,
        threshold: Threshold,
        limit: usize,
    ) -> QueryOutcome {
        self.query(
            doc.shingles.as_slice(),
            &doc.signature,
            exclude,
            threshold,
            limit,
        )
    }

    fn query(
        &self,
        shingles: &[u32],
        signature: &[u32],
        exclude: Option<&str>,
        threshold: Threshold,
        limit: usize,
    ) -> QueryOutcome {
        let cap = self.params.max_candidates;
        // The queried document never counts against the cap.
        let own_slot = exclude.and_then(|id| self.ids.get(id).map(|s| *s));
        let mut slots = Vec::with_capacity(self.bands.bands * 2);
        let complete = self.lsh.candidates(
            signature,
            &mut slots,
            cap.saturating_add(1).saturating_mul(self.bands.bands),
        );
        slots.sort_unstable();
        slots.dedup();
        if let Some(own) = own_slot {
            slots.retain(|&s| s != own);
        }
        let truncated = !complete || slots.len() > cap;
        slots.truncate(cap);

        let t = threshold.value();
        let mut out = QueryOutcome {
            truncated,
            ..Default::default()
        };
        for slot in slots {
            let Some(record) = self.docs.get(&slot).map(|r| Arc::clone(&r)) else {
                continue; // removed since the bucket was read
            };
            if exclude == Some(record.id().as_str()) {
                continue;
            }
            out.candidates += 1;
            if jaccard::upper_bound(shingles.len(), record.shingles().len()) < t {
                out.rejected += 1;
                continue;
            }
            let j = jaccard::overlap(shingles, record.shingles()).jaccard();
            if j < t {
                out.rejected += 1;
                continue;
            }
            // Accept only the version `ids` currently points to (see module docs).
            if !self.is_current(&record, slot) {
                out.candidates -= 1;
                continue;
            }
            out.matches.push(Match {
                id: record.id().clone(),
                jaccard: j,
                estimate: minhash::estimate(signature, record.signature()),
            });
        }
        // A replace racing this loop can let both versions of one id pass the
        // `ids` check at different instants; keep the one verified last.
        if out.matches.len() > 1 {
            let mut by_id: Vec<(usize, Match)> = out.matches.drain(..).enumerate().collect();
            by_id.sort_by(|(i, a), (j, b)| a.id.cmp(&b.id).then(j.cmp(i)));
            by_id.dedup_by(|later, earlier| later.1.id == earlier.1.id);
            out.matches = by_id.into_iter().map(|(_, m)| m).collect();
        }
        out.matches.sort_by(|a, b| {
            b.jaccard
                .total_cmp(&a.jaccard)
                .then_with(|| a.id.cmp(&b.id))
        });
        out.matches.truncate(limit);
        out
    }

    /// Exact and estimated similarity of two stored documents.
    pub fn compare(&self, a: &str, b: &str) -> Result<Comparison, EngineError> {
        let ra = self
            .get(a)
            .ok_or_else(|| EngineError::NotFound(a.to_owned()))?;
        let rb = self
            .get(b)
            .ok_or_else(|| EngineError::NotFound(b.to_owned()))?;
        let overlap = jaccard::overlap(ra.shingles(), rb.shingles());
        Ok(Comparison {
            jaccard: overlap.jaccard(),
            estimate: minhash::estimate(ra.signature(), rb.signature()),
            overlap,
        })
    }

    /// Every stored record, current versions only (for snapshots and scans).
    pub fn records(&self) -> Vec<Arc<Record>> {
        let slots: Vec<Slot> = self.ids.iter().map(|e| *e.value()).collect();
        slots
            .into_iter()
            .filter_map(|s| self.docs.get(&s).map(|r| Arc::clone(&r)))
            .collect()
    }

    /// Rebuild a prepared document from stored parts (restore path): the
    /// signature is trusted only if it has the right length, and the
    /// shingles only if sorted and distinct.
    pub fn prepared_from_parts(
        &self,
        signature: Box<[u32]>,
        shingles: Vec<u32>,
    ) -> Option<Prepared> {
        let sorted = shingles.windows(2).all(|w| w[0] < w[1]);
        (signature.len() == self.params.num_perm && sorted && !shingles.is_empty()).then(|| {
            Prepared {
                shingles: ShingleSet::from_hashes(shingles),
                signature,
            }
        })
    }

    /// Approximate memory by component, allocator overhead included: the
    /// figures are meant to add up to the process's RSS growth.
    pub fn memory(&self) -> MemoryStats {
        use std::mem::size_of;
        let docs = self.len();
        let shingle_values = self.shingle_values.load(Ordering::Relaxed);
        let shingles_bytes = shingle_values * 4;
        let signatures_bytes = docs * self.params.num_perm * 4;
        // The id is held twice: as the `ids` key and inside the record.
        let id_bytes = self.id_bytes.load(Ordering::Relaxed);
        let ids_bytes = id_bytes * 2;
        let metadata_bytes = self.metadata_bytes.load(Ordering::Relaxed);
        // Per document: the `Arc<Record>` block, and the allocator's header
        // and rounding on the data block and the two id strings (estimated
        // from the average sizes).
        let per_doc = |total: usize| total.checked_div(docs).unwrap_or(0);
        let data = per_doc(signatures_bytes + shingles_bytes);
        let id = per_doc(id_bytes);
        let arc_record = malloc_block(2 * size_of::<usize>() + size_of::<Record>());
        let rounding = malloc_block(data) - data + 2 * (malloc_block(id) - id);
        let records_overhead_bytes = docs * (arc_record + rounding);
        // hashbrown: capacity is 7/8 of the buckets; one control byte each.
        let id_map_bytes = self.ids.capacity() * 8 / 7 * (size_of::<(DocId, Slot)>() + 1);
        let doc_map_bytes = self.docs.heap_bytes();
        let lsh_bytes = self.lsh.heap_bytes();
        let total_bytes = shingles_bytes
            + signatures_bytes
            + ids_bytes
            + metadata_bytes
            + records_overhead_bytes
            + id_map_bytes
            + doc_map_bytes
            + lsh_bytes;
        MemoryStats {
            shingles_bytes,
            signatures_bytes,
            ids_bytes,
            metadata_bytes,
            records_overhead_bytes,
            id_map_bytes,
            doc_map_bytes,
            lsh_bytes,
            total_bytes,
            fixed_bytes: self.fixed_bytes,
            bytes_per_document: if docs == 0 {
                0.0
            } else {
                total_bytes.saturating_sub(self.fixed_bytes) as f64 / docs as f64
            },
        }
    }

    /// Non-empty LSH buckets across all bands.
    pub fn lsh_bucket_count(&self) -> usize {
        self.lsh.bucket_count()
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod recall_tests;

#[cfg(test)]
mod dedup_tests;
