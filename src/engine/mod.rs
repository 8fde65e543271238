//! The engine: the one owner of every map. Sync API, no I/O, no async.
//!
//! ```text
//!   text ─prepare→ Prepared{shingles, signature} ─insert→ ids / docs / lsh
//!   query: signature ─lsh→ candidate slots ─docs→ records ─exact Jaccard→ matches
//! ```
//!
//! **State and locks.** Three concurrent maps, each sharded behind many
//! `RwLock`s, so there is no global lock on the hot path:
//! - `ids`: id → (current record, slot), a `DashMap` keyed by the record
//!   itself (`record::Current`: it hashes and compares as its
//!   id), so a lookup by id reads the record from the entry. The entry of an
//!   id is the serialization point for writes to that id: an insert or
//!   replace holds it while indexing the new record and swapping record and
//!   slot together, so a reader sees the old or the new version, never a
//!   half-indexed one.
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
//! same order: it stores and indexes a batch, then publishes its ids (while
//! the next batch is indexed: a publish holds an `ids` entry and may remove
//! a replaced version's buckets, one `lsh` shard lock at a time, as a single
//! insert does; the indexing threads take `lsh` shard locks only).
//!
//! **Stale candidates are harmless.** A bucket may briefly name a slot whose
//! record is being removed or replaced, or whose slot was freed and reused.
//! Every candidate is re-read from `docs`, verified exactly, and accepted only
//! if `ids` still maps its id to that slot, so every returned match is a
//! true statement about a document that is stored.

mod boilerplate;
mod bulk;
mod counts;
mod dedup;
mod excluded;
mod explain;
mod filter;
mod id;
mod journal;
mod memory;
pub mod originals;
mod params;
mod passages;
mod postings;
mod query;
mod record;
mod retention;
pub mod sample;
mod slot_counter;
mod unique;

#[doc(hidden)]
pub use boilerplate::count_in_batches;
pub(crate) use boilerplate::Frequencies;
pub use boilerplate::{
    BoilerplateParams, Classifier, ContentQuery, ContentScores, DfLookup, Template, MAX_TEMPLATES,
};
pub use bulk::{BatchWrite, Restore};
pub use dedup::{Edge, Group, GroupMember, Groups, Progress, ScanStats};
pub use excluded::ExcludedPairs;
pub use explain::{Explanation, Segment, Side};
pub use filter::{
    FilterError, FilterSpec, MetaFilter, MAX_FIELD_BYTES, MAX_FILTER_FIELDS, MAX_FILTER_VALUES,
};
pub use id::{DocId, IdError, MAX_ID_BYTES};
pub use journal::{Journal, JournalEntry, JournalError, NoJournal};
pub use memory::MemoryStats;
pub use params::{EngineParams, EngineParamsError, IndexParams, ValidParams, MAX_SHINGLE_K};
pub use passages::{Passage, PassageHit, PassageOutcome, COMMON_LISTED, MAX_READ};
pub use query::{
    By, Comparison, Match, Measure, PassageWork, Query, QueryOutcome, Score, Threshold,
};
use record::{Current, RecordTable};
pub use record::{Record, Stamp};
pub use retention::{Clock, ManualClock, SystemClock};
pub use unique::{UniqueInsert, UniqueOutcome};

use crate::lsh::index::Slot;
use crate::lsh::{BandParams, LshIndex};
use crate::minhash::MinHasher;
use crate::text::{ShingleSet, TextError, Tokenizer};
use crossbeam_queue::SegQueue;
use dashmap::mapref::entry::{Entry, OccupiedEntry};
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
    /// The bitmap over `shingles` of its passage fingerprints
    /// ([`crate::text::winnow`]).
    selection: Box<[u32]>,
    /// Bytes the journal logs with the record (the store's compressed
    /// text); opaque to the engine, never kept in memory after the insert.
    payload: Option<Box<[u8]>>,
}

impl Prepared {
    /// Give the journal `bytes` to log with this document's record.
    pub fn set_journal_payload(&mut self, bytes: Option<Box<[u8]>>) {
        self.payload = bytes;
    }

    pub fn journal_payload(&self) -> Option<&[u8]> {
        self.payload.as_deref()
    }

    pub fn shingles(&self) -> &[u32] {
        self.shingles.as_slice()
    }

    pub fn signature(&self) -> &[u32] {
        &self.signature
    }

    /// The bitmap over [`Self::shingles`] of its passage fingerprints.
    pub fn selection(&self) -> &[u32] {
        &self.selection
    }

    /// Its passage fingerprints, increasing.
    pub fn fingerprints(&self) -> impl Iterator<Item = u32> + '_ {
        crate::text::winnow::fingerprints(self.shingles.as_slice(), &self.selection)
    }
}

/// A document to write: what the HTTP layer (or the offline command)
/// hands the store.
#[derive(Clone, Debug)]
pub struct NewDoc {
    pub id: DocId,
    pub doc: Prepared,
    /// Caller-supplied JSON object, as text.
    pub metadata: Option<Box<str>>,
    /// The document's own expiry (ms since the epoch), if it set one.
    pub expires_ms: Option<u64>,
    /// The text as posted: kept (on disk) by a store that stores texts.
    pub text: Option<Box<str>>,
    /// When it was first stored (ms since the epoch), for a document moved
    /// from another collection or backend (import); `None`: now.
    pub created_ms: Option<u64>,
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
    /// A containment query or passage lookup on a collection without the
    /// passage index.
    #[error(
        "{0} needs the passage index, which this collection does not keep: switch it on with \
         PATCH /collections/{{name}} {{\"passage_index\": true}} (for `default`: index.passage_index \
         in the configuration, NEARDUP_INDEX__PASSAGE_INDEX=true)"
    )]
    PassageIndexOff(&'static str),
    #[error(
        "scores on content need the collection to count document frequency: \
         PATCH /collections/{{name}} {{\"boilerplate\": {{\"enabled\": true}}}} (for `default`: \
         index.boilerplate.enabled in the configuration, NEARDUP_INDEX__BOILERPLATE__ENABLED=true)"
    )]
    BoilerplateOff,
    /// An event feed cursor this collection's log never gave (issue 45).
    #[error("{0:?} is not a cursor of this collection's event feed")]
    InvalidCursor(String),
}

/// Shards of the `ids` map: scans (snapshots, `records()`) hold one shard's
/// read lock at a time, so more shards mean shorter writer stalls.
const ID_SHARDS: usize = 64;

/// The owner of every map of one index (see the module docs for the
/// locks and the invariants).
pub struct Engine {
    /// The recipe, the index parameters and the banding they resolve to;
    /// fixed for the engine's life (a different recipe is a new engine).
    params: ValidParams,
    /// Normalizes and shingles texts by the recipe.
    tokenizer: Tokenizer,
    /// Signs shingle sets: `num_perm` seeded permutations.
    minhasher: MinHasher,
    /// id → its current record (the key) and slot; the per-id write
    /// serialization point (see module docs). Default SipHash: ids come
    /// from clients, so the hasher must resist flooding. An entry is 16
    /// bytes (an id inline in the entry made it 32, and a lookup then read
    /// `docs` for the record). The cost: a shard that grows rehashes its
    /// ids through their records, a cache miss each (~16,000 per shard at
    /// a million ids, a few ms under that shard's lock, once per doubling;
    /// a restore sizes the shards first, `bulk.rs`).
    ids: DashMap<Current, Slot>,
    /// slot → record. Slots are dense small integers (freed ones are
    /// reused), so a sharded vector indexed by slot: 8 bytes a document.
    docs: RecordTable,
    lsh: LshIndex,
    /// The passage index (fingerprint → slots), maintained while
    /// `passages_on` (see `postings.rs`).
    postings: postings::Postings,
    passages_on: std::sync::atomic::AtomicBool,
    /// Document frequency of every shingle, when `index.boilerplate` is on
    /// (`boilerplate.rs`), the rule's numbers, and the templates' shingles.
    frequencies: boilerplate::Frequencies,
    boilerplate_params: std::sync::RwLock<BoilerplateParams>,
    templates: std::sync::RwLock<Arc<std::collections::HashSet<u32>>>,
    /// Slots released by deletes and replaces, reused before `next_slot` grows.
    /// Lock-free so that allocation is not a global lock on the write path.
    free_slots: SegQueue<Slot>,
    next_slot: AtomicU32,
    /// Sum of shingle-set sizes of stored records (memory report).
    shingle_values: AtomicUsize,
    /// Sum of fingerprint-bitmap lengths (words) of stored records.
    selection_words: AtomicUsize,
    /// Bytes and count of ids in blocks of their own (`DocId`; memory report).
    id_bytes: AtomicUsize,
    heap_ids: AtomicUsize,
    metadata_bytes: AtomicUsize,
    /// Bumped by every applied write: lets callers cache whole-index answers.
    generation: AtomicU64,
    /// Striped by band key: serializes insert-if-unique calls that could see each other.
    unique_locks: unique::Stripes,
    /// Heap bytes of the empty maps, measured at construction (memory report).
    fixed_bytes: usize,
    /// Where "now" comes from (expiry, `created_at`); see `retention.rs`.
    clock: Arc<dyn Clock>,
    /// The retention TTL in ms (0: none), read at every expiry check so a
    /// change applies at once.
    ttl_ms: AtomicU64,
    /// Stored records with an expiry of their own (a purge scan is skipped
    /// while this and `ttl_ms` are 0).
    own_expiries: AtomicU64,
    /// Stored records by the second they expire or were created in
    /// ([`Self::live_len`] without a scan).
    expiries: std::sync::Mutex<retention::ExpiryCounts>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("params", self.params())
            .field("bands", self.bands())
            .field("documents", &self.len())
            .finish()
    }
}

impl Engine {
    pub fn new(valid: ValidParams) -> Self {
        Self::with_clock(valid, Arc::new(SystemClock))
    }

    /// An engine whose "now" comes from `clock`.
    pub fn with_clock(valid: ValidParams, clock: Arc<dyn Clock>) -> Self {
        let (params, bands) = (valid.params(), valid.bands());
        let lsh = LshIndex::new(bands.bands, bands.rows, params.index.seed);
        let docs = RecordTable::default();
        // The record table's directory; the LSH shard array comes with the
        // first document (see `memory`).
        let fixed_bytes = docs.heap_bytes();
        Self {
            tokenizer: Tokenizer::new(params.normalize, params.shingle, params.index.seed),
            minhasher: MinHasher::new(params.index.num_perm, params.index.seed),
            lsh,
            postings: Default::default(),
            passages_on: std::sync::atomic::AtomicBool::new(params.index.passage_index),
            frequencies: boilerplate::Frequencies::new(params.index.boilerplate.enabled),
            boilerplate_params: std::sync::RwLock::new(params.index.boilerplate.clone()),
            templates: Default::default(),
            ids: DashMap::with_shard_amount(ID_SHARDS),
            docs,
            fixed_bytes,
            free_slots: SegQueue::new(),
            next_slot: AtomicU32::new(0),
            shingle_values: AtomicUsize::new(0),
            selection_words: AtomicUsize::new(0),
            id_bytes: AtomicUsize::new(0),
            heap_ids: AtomicUsize::new(0),
            metadata_bytes: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            unique_locks: unique::Stripes::new(),
            params: valid,
            clock,
            ttl_ms: AtomicU64::new(0),
            own_expiries: AtomicU64::new(0),
            expiries: Default::default(),
        }
    }

    /// Make the text stage's lookup tables before the first write or
    /// query needs them ([`Tokenizer::warm`]).
    pub fn warm(&self) {
        self.tokenizer.warm();
    }

    pub fn params(&self) -> &EngineParams {
        self.params.params()
    }

    /// The banding (b, r) and what it finds at and below the threshold.
    pub fn bands(&self) -> &BandParams {
        self.params.bands()
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
        let (shingles, selection) = self.tokenizer.shingles_selected(text)?;
        let signature = self.minhasher.sign(shingles.as_slice());
        Ok(Prepared {
            shingles,
            signature,
            selection,
            payload: None,
        })
    }

    fn alloc_slot(&self) -> Slot {
        self.free_slots.pop().unwrap_or_else(|| {
            let slot = self.next_slot.fetch_add(1, Ordering::Relaxed);
            assert!(slot < Slot::MAX, "slot space exhausted");
            slot
        })
    }

    /// Store a prepared document under `id`, stored now with no expiry of
    /// its own (no journal).
    pub fn insert(
        &self,
        id: DocId,
        doc: &Prepared,
        metadata: Option<Box<str>>,
        mode: WriteMode,
    ) -> Result<WriteOutcome, EngineError> {
        let stamp = Stamp {
            created_ms: self.now_ms(),
            expires_ms: None,
        };
        self.insert_journaled(id, doc, metadata, mode, stamp, &NoJournal)
            .map(|(outcome, _)| outcome)
    }

    /// Store a prepared document under `id` with `stamp`, appending it to
    /// `journal` first; returns the outcome and the journal's sequence
    /// number. If the append fails nothing is applied. An expired document
    /// under `id` counts as absent: `Create` replaces it and says `Created`.
    pub fn insert_journaled(
        &self,
        id: DocId,
        doc: &Prepared,
        metadata: Option<Box<str>>,
        mode: WriteMode,
        stamp: Stamp,
        journal: &dyn Journal,
    ) -> Result<(WriteOutcome, u64), EngineError> {
        // Built before the id's entry is taken: the entry's key is the record.
        let record = Arc::new(Record::with_selection(
            id,
            metadata,
            stamp,
            &doc.signature,
            doc.shingles.as_slice(),
            &doc.selection,
        ));
        let entry = self.ids.entry(Current(Arc::clone(&record)));
        let live_before = self.live_under(&entry);
        if mode == WriteMode::Create && live_before {
            return Err(EngineError::AlreadyExists(entry.key().id().clone()));
        }
        let seq = journal
            .append(JournalEntry::Upsert(&record, doc.journal_payload()))
            .map_err(EngineError::Journal)?;
        let slot = self.alloc_slot();
        self.admit(slot, &record);
        self.lsh.insert(slot, record.signature());
        self.index_passages(slot, &record);
        Ok((self.publish(entry, slot, live_before), seq))
    }

    /// Whether `entry` (held: its id's lock) points at a live version.
    fn live_under(&self, entry: &Entry<'_, Current, Slot>) -> bool {
        match entry {
            // An occupied entry's key is the stored one: the current record.
            Entry::Occupied(e) => self.is_live(&e.key().0, self.now_ms()),
            Entry::Vacant(_) => false,
        }
    }

    /// Point `entry` at its key's record, fully indexed at `slot`: the
    /// instant readers switch to the new version. The old version, if any,
    /// is released.
    fn publish(
        &self,
        entry: Entry<'_, Current, Slot>,
        slot: Slot,
        live_before: bool,
    ) -> WriteOutcome {
        let old = match entry {
            // Key and slot together: the new record replaces the old one.
            Entry::Occupied(e) => Some(e.replace_entry(slot).1),
            Entry::Vacant(e) => {
                e.insert(slot);
                None
            }
        };
        if let Some(old_slot) = old {
            self.release(old_slot);
        }
        if live_before {
            WriteOutcome::Replaced
        } else {
            WriteOutcome::Created
        }
    }

    /// Remove `id`; false if no live document had it.
    pub fn remove(&self, id: &str) -> bool {
        matches!(self.remove_journaled(id, &NoJournal), Ok(Some((_, true))))
    }

    /// Remove `id`, journaling the delete first. `None` if it was not
    /// stored; else the journal's sequence number and whether the removed
    /// version was live (an expired one is purged all the same).
    pub fn remove_journaled(
        &self,
        id: &str,
        journal: &dyn Journal,
    ) -> Result<Option<(u64, bool)>, EngineError> {
        let Some(entry) = self.occupied(id) else {
            return Ok(None);
        };
        let live = self.is_live(&entry.key().0, self.now_ms());
        let seq = journal
            .append(JournalEntry::Delete(id))
            .map_err(EngineError::Journal)?;
        let (_, slot) = entry.remove_entry();
        self.release(slot);
        Ok(Some((seq, live)))
    }

    /// The held entry of `id`, if it is stored. `entry` needs an owned key:
    /// any record with the id will do (the entry keeps the stored one), so
    /// the current one is read first. If the id is removed in between, it
    /// is not stored; if replaced, the entry is the new version's.
    fn occupied(&self, id: &str) -> Option<OccupiedEntry<'_, Current, Slot>> {
        let key = self.ids.get(id).map(|e| e.key().clone())?;
        match self.ids.entry(key) {
            Entry::Occupied(e) => Some(e),
            Entry::Vacant(_) => None,
        }
    }

    /// Remove every document (recovery discards a damaged snapshot's part).
    pub fn clear(&self) {
        let ids: Vec<DocId> = self.ids.iter().map(|e| e.key().id().clone()).collect();
        for id in ids {
            let _ = self.remove_journaled(id.as_str(), &NoJournal);
        }
    }

    /// Drop a slot that `ids` no longer points to.
    fn release(&self, slot: Slot) {
        if let Some((_, record)) = self
            .frequencies
            .release(|| self.docs.remove(&slot), |(_, r)| &**r)
        {
            self.lsh.remove(slot, record.signature());
            if self.passage_index() {
                self.postings.remove(slot, record.fingerprints());
            }
            self.account(&record, false);
        }
        self.free_slots.push(slot);
    }

    /// Put `record` in the slot table at `slot`, accounted and counted
    /// (document frequency) in one step (`boilerplate.rs`).
    #[inline]
    pub(crate) fn admit(&self, slot: Slot, record: &Arc<Record>) {
        self.frequencies.admit(record, || {
            self.account(record, true);
            self.docs.insert(slot, Arc::clone(record));
        });
    }

    /// [`Self::admit`] of a batch, counted in one pass (`boilerplate.rs`)
    /// beside `index` (the batch's bucket inserts), whose result it gives.
    pub(crate) fn admit_many<'a, T: Send>(
        &self,
        staged: impl Iterator<Item = (Slot, &'a Arc<Record>)>,
        index: impl FnOnce() -> T + Send,
    ) -> T {
        let staged: Vec<(Slot, &Arc<Record>)> = staged.collect();
        let records: Vec<&Record> = staged.iter().map(|(_, r)| &***r).collect();
        self.frequencies.admit_many(
            &records,
            || {
                for (slot, record) in &staged {
                    self.account(record, true);
                    self.docs.insert(*slot, Arc::clone(record));
                }
            },
            index,
        )
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
        op(&self.selection_words, record.selection().len());
        self.expiries
            .lock()
            .expect("expiry counts lock")
            .account(record, add);
        let own_expiry = usize::from(record.stamp().expires_ms.is_some());
        if add {
            self.own_expiries
                .fetch_add(own_expiry as u64, Ordering::Relaxed);
        } else {
            self.own_expiries
                .fetch_sub(own_expiry as u64, Ordering::Relaxed);
        }
        // Inline ids are inside the record and the `ids` entry (counted with
        // them); a longer one has a block of its own.
        if record.id().is_heap_allocated() {
            op(&self.id_bytes, record.id().as_str().len());
            op(&self.heap_ids, 1);
        }
        op(&self.metadata_bytes, record.metadata().map_or(0, str::len));
    }

    /// True if `record` is the version `ids` points at now (the check that
    /// makes stale candidates harmless; module docs). The entry's key is the
    /// current record, so this compares the records themselves: a later
    /// version of the id in the same (reused) slot is not `record`.
    fn is_current(&self, record: &Record) -> bool {
        self.ids
            .get(record.id().as_str())
            .is_some_and(|e| std::ptr::eq(Arc::as_ptr(&e.key().0), record))
    }

    /// The current record of `id`, unless it has expired.
    pub fn get(&self, id: &str) -> Option<Arc<Record>> {
        self.get_with_slot(id).map(|(_, record)| record)
    }

    /// [`Self::get`] and the record's slot, from one lookup of the id:
    /// both are in its `ids` entry, read together under the entry's shard
    /// lock (a write swaps them together).
    pub(crate) fn get_with_slot(&self, id: &str) -> Option<(Slot, Arc<Record>)> {
        let (slot, record) = {
            let e = self.ids.get(id)?;
            (*e.value(), Arc::clone(&e.key().0))
        };
        self.is_live(&record, self.now_ms())
            .then_some((slot, record))
    }

    /// Every stored record, current versions only (for snapshots and scans).
    pub fn records(&self) -> Vec<Arc<Record>> {
        self.ids.iter().map(|e| Arc::clone(&e.key().0)).collect()
    }

    /// The LSH band keys of `signature`, band by band (the keys the index
    /// files a document under; a backend that keeps buckets elsewhere uses
    /// the same ones).
    pub fn band_keys(&self, signature: &[u32]) -> Vec<u64> {
        (0..self.bands().bands)
            .map(|band| self.lsh.band_key(signature, band))
            .collect()
    }

    /// A prepared document from a stored shingle set (sorted, distinct,
    /// non-empty, else `None`), its signature recomputed: a backend that
    /// stores shingles only signs them again when it reads them.
    ///
    /// `selection` is the stored bitmap of its passage fingerprints; a
    /// record stored without one (or with one of the wrong length) gets
    /// the sampled stand-in ([`crate::text::winnow::sampled_bitmap`]).
    pub fn prepared_from_shingles(
        &self,
        shingles: Vec<u32>,
        selection: Option<Box<[u32]>>,
    ) -> Option<Prepared> {
        let sorted = shingles.windows(2).all(|w| w[0] < w[1]);
        if !sorted || shingles.is_empty() {
            return None;
        }
        let signature = self.minhasher.sign(&shingles);
        let selection = self.selection_or_sampled(&shingles, selection);
        Some(Prepared {
            shingles: ShingleSet::from_hashes(shingles),
            signature,
            selection,
            payload: None,
        })
    }

    /// `selection` if it is a bitmap over `shingles`, else the sampled one.
    pub(crate) fn selection_or_sampled(
        &self,
        shingles: &[u32],
        selection: Option<Box<[u32]>>,
    ) -> Box<[u32]> {
        use crate::text::winnow;
        match selection {
            Some(bits) if bits.len() == winnow::bitmap_words(shingles.len()) => bits,
            _ => winnow::sampled_bitmap(shingles, self.tokenizer.window()),
        }
    }

    /// A record of `doc` as stored under `id` with `stamp` (for a backend
    /// that keeps records outside the engine).
    pub fn record_of(
        &self,
        id: DocId,
        doc: &Prepared,
        metadata: Option<Box<str>>,
        stamp: Stamp,
    ) -> Record {
        Record::with_selection(
            id,
            metadata,
            stamp,
            &doc.signature,
            doc.shingles.as_slice(),
            &doc.selection,
        )
    }

    /// Rebuild a prepared document from stored parts (restore path): the
    /// signature is trusted only if it has the right length, and the
    /// shingles only if sorted and distinct.
    pub fn prepared_from_parts(
        &self,
        signature: Box<[u32]>,
        shingles: Vec<u32>,
        selection: Option<Box<[u32]>>,
    ) -> Option<Prepared> {
        let sorted = shingles.windows(2).all(|w| w[0] < w[1]);
        (signature.len() == self.params().index.num_perm && sorted && !shingles.is_empty()).then(
            || Prepared {
                selection: self.selection_or_sampled(&shingles, selection),
                shingles: ShingleSet::from_hashes(shingles),
                signature,
                payload: None,
            },
        )
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod recall_tests;

#[cfg(test)]
mod dedup_tests;

#[cfg(test)]
mod passages_tests;

#[cfg(test)]
mod boilerplate_tests;
