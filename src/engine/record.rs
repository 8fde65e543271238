//! A stored document (id, opaque metadata, when it was stored and when it
//! expires, signature and shingle set), and [`RecordTable`], the
//! `slot → record` map.

use super::DocId;
use crate::lsh::index::Slot;
use crate::prefetch::{prefetch, prefetch_slice};
use crate::text::winnow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// When a version of a document was stored, and its own expiry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    /// Milliseconds since the Unix epoch, by the server's clock.
    pub created_ms: u64,
    /// The document's own expiry (ms since the epoch), if it set one; it
    /// wins over the collection's retention.
    pub expires_ms: Option<u64>,
}

/// Low bits of [`Record`]'s `created_and_perm` holding the signature's length.
const PERM_BITS: u32 = 16;
/// The latest creation time a record can hold (ms since the epoch).
const MAX_CREATED_MS: u64 = u64::MAX >> PERM_BITS;
// A record is 80 bytes (24 of them the id, inline up to 23 bytes) and its
// `Arc` block 96, one of the small-block allocator's size classes
// (`memory::small_block`); the memory per document depends on it.
const _: () = assert!(std::mem::size_of::<Record>() == 80);

/// One document as the engine holds it. Immutable once built; a replace
/// builds a new record. Signature and shingles share one allocation.
#[derive(Debug)]
pub struct Record {
    id: DocId,
    /// Caller-supplied JSON, kept as its text; the engine never parses it.
    metadata: Option<Box<str>>,
    /// When this version was stored (ms since the epoch) in the high 48
    /// bits (good until the year 10889), the signature's length in the low
    /// 16: one word, so a record is 80 bytes and its `Arc` block 96 (with
    /// a word of its own for `num_perm` it would be 88 and 112; see
    /// `memory::small_block`).
    created_and_perm: u64,
    /// Its own expiry (ms since the epoch), 0 for none.
    expires_ms: u64,
    /// Where the store keeps this document's text (0: nowhere). Opaque to
    /// the engine; the store sets it when it logs the text and moves it
    /// when a snapshot compacts the texts (`persist::texts`).
    text: AtomicU64,
    /// `num_perm` signature values, the sorted, distinct shingle hashes,
    /// then the bitmap over them of the passage fingerprints (its length
    /// follows from theirs: [`winnow::shingles_in`]).
    data: Box<[u32]>,
}

impl Record {
    /// A record whose passage fingerprints are sampled from its set (tests,
    /// and records stored before fingerprints: see
    /// [`winnow::sampled_bitmap`]).
    #[cfg(test)]
    pub(crate) fn new(
        id: DocId,
        metadata: Option<Box<str>>,
        stamp: Stamp,
        signature: &[u32],
        shingles: &[u32],
    ) -> Self {
        let selection = winnow::sampled_bitmap(shingles, winnow::WORD_WINDOW);
        Self::with_selection(id, metadata, stamp, signature, shingles, &selection)
    }

    /// A record with its passage fingerprints, `selection` a bitmap over
    /// `shingles` ([`winnow::selection_bitmap`]).
    pub(crate) fn with_selection(
        id: DocId,
        metadata: Option<Box<str>>,
        stamp: Stamp,
        signature: &[u32],
        shingles: &[u32],
        selection: &[u32],
    ) -> Self {
        debug_assert_eq!(selection.len(), winnow::bitmap_words(shingles.len()));
        let mut data = Vec::with_capacity(signature.len() + shingles.len() + selection.len());
        data.extend_from_slice(signature);
        data.extend_from_slice(shingles);
        data.extend_from_slice(selection);
        Self::from_parts(
            id,
            metadata,
            stamp,
            signature.len(),
            data.into_boxed_slice(),
        )
    }

    /// A record over `data` = signature (`num_perm` values), shingles, then
    /// the bitmap of its passage fingerprints, already in their final allocation (the restore path decodes straight
    /// into it). The caller has checked the parts.
    pub(crate) fn from_parts(
        id: DocId,
        metadata: Option<Box<str>>,
        stamp: Stamp,
        num_perm: usize,
        data: Box<[u32]>,
    ) -> Self {
        debug_assert!(num_perm <= data.len());
        debug_assert!(num_perm <= u16::MAX as usize);
        let created_ms = stamp.created_ms.min(MAX_CREATED_MS);
        Self {
            id,
            metadata,
            created_and_perm: (created_ms << PERM_BITS) | num_perm as u64,
            expires_ms: stamp.expires_ms.unwrap_or(0),
            text: AtomicU64::new(0),
            data,
        }
    }

    /// The store's locator of this document's text (0: none stored).
    pub fn text_locator(&self) -> u64 {
        self.text.load(Ordering::Acquire)
    }

    /// Set by the store when it logs the text, and when a snapshot moves it.
    pub fn set_text_locator(&self, locator: u64) {
        self.text.store(locator, Ordering::Release);
    }

    fn num_perm(&self) -> usize {
        (self.created_and_perm & ((1 << PERM_BITS) - 1)) as usize
    }

    /// When this version was stored, and its own expiry.
    pub fn stamp(&self) -> Stamp {
        Stamp {
            created_ms: self.created_ms(),
            expires_ms: (self.expires_ms != 0).then_some(self.expires_ms),
        }
    }

    /// When this version was stored (ms since the Unix epoch).
    pub fn created_ms(&self) -> u64 {
        self.created_and_perm >> PERM_BITS
    }

    pub fn id(&self) -> &DocId {
        &self.id
    }

    pub fn metadata(&self) -> Option<&str> {
        self.metadata.as_deref()
    }

    pub fn signature(&self) -> &[u32] {
        &self.data[..self.num_perm()]
    }

    pub fn shingles(&self) -> &[u32] {
        let p = self.num_perm();
        &self.data[p..p + winnow::shingles_in(self.data.len() - p)]
    }

    /// The bitmap over [`Self::shingles`] of its passage fingerprints.
    pub fn selection(&self) -> &[u32] {
        let p = self.num_perm();
        &self.data[p + winnow::shingles_in(self.data.len() - p)..]
    }

    /// Its passage fingerprints (the shingles the bitmap marks), increasing.
    pub fn fingerprints(&self) -> impl Iterator<Item = u32> + '_ {
        let p = self.num_perm();
        let n = winnow::shingles_in(self.data.len() - p);
        winnow::fingerprints(&self.data[p..p + n], &self.data[p + n..])
    }
}

/// The key of the engine's id map: the id's current record itself, which
/// hashes and compares as its id (and is looked up by `&str`). A lookup by
/// id so finds the record in the map's entry, with no second table to read;
/// and the map stores no id of its own (the record holds it).
#[derive(Clone, Debug)]
pub(crate) struct Current(pub(crate) Arc<Record>);

impl Current {
    pub(crate) fn id(&self) -> &DocId {
        self.0.id()
    }
}

impl std::hash::Hash for Current {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // As `str` hashes: the map is probed with `&str` (`Borrow`).
        self.0.id().as_str().hash(state);
    }
}

impl PartialEq for Current {
    fn eq(&self, other: &Self) -> bool {
        self.0.id() == other.0.id()
    }
}

impl Eq for Current {}

impl std::borrow::Borrow<str> for Current {
    fn borrow(&self) -> &str {
        self.0.id().as_str()
    }
}

/// log2 of the number of [`RecordTable`] shards.
const RECORD_SHARD_BITS: u32 = 6;
const RECORD_SHARDS: usize = 1 << RECORD_SHARD_BITS;

/// One shard on its own cache line (no false sharing between lock words).
#[derive(Default)]
#[repr(align(64))]
struct RecordShard(RwLock<Vec<Option<Arc<Record>>>>);

impl RecordShard {
    fn read(&self) -> RwLockReadGuard<'_, Vec<Option<Arc<Record>>>> {
        self.0.read().expect("a record shard lock was poisoned")
    }

    fn write(&self) -> RwLockWriteGuard<'_, Vec<Option<Arc<Record>>>> {
        self.0.write().expect("a record shard lock was poisoned")
    }
}

/// `slot → Arc<Record>`. Slots are dense (freed ones are reused), so this
/// is a vector indexed by slot, cut into [`RECORD_SHARDS`] `RwLock`ed
/// shards by the slot's low bits: 8 bytes per slot (`Option<Arc>` is one
/// pointer) instead of a hash map's 16 plus control byte and slack.
///
/// `get` returns a cloned `Arc`, so no guard outlives the call. Every call
/// holds one shard lock and takes no other lock meanwhile.
pub(crate) struct RecordTable {
    shards: Box<[RecordShard]>,
}

impl Default for RecordTable {
    fn default() -> Self {
        Self {
            shards: (0..RECORD_SHARDS).map(|_| RecordShard::default()).collect(),
        }
    }
}

#[inline]
fn place(slot: Slot) -> (usize, usize) {
    (
        slot as usize & (RECORD_SHARDS - 1),
        (slot >> RECORD_SHARD_BITS) as usize,
    )
}

impl RecordTable {
    /// Store `record` at `slot`; returns what was there.
    pub(crate) fn insert(&self, slot: Slot, record: Arc<Record>) -> Option<Arc<Record>> {
        let (shard, i) = place(slot);
        let mut v = self.shards[shard].write();
        if i >= v.len() {
            if i >= v.capacity() {
                // Grow by a quarter, not double: slots fill densely, so the
                // slack stays small and the copies stay amortized O(1).
                let len = v.len();
                v.reserve_exact((i + 1).max(len + len / 4) - len);
            }
            v.resize(i + 1, None);
        }
        v[i].replace(record)
    }

    /// Every record in the table (one shard lock at a time).
    pub(crate) fn records(&self) -> Vec<Arc<Record>> {
        self.shards
            .iter()
            .flat_map(|s| s.read().iter().flatten().cloned().collect::<Vec<_>>())
            .collect()
    }

    pub(crate) fn get(&self, slot: &Slot) -> Option<Arc<Record>> {
        let (shard, i) = place(*slot);
        self.shards[shard].read().get(i)?.clone()
    }

    /// Start loading the records of `slots`, and then their shingles, so
    /// that a loop reading them one by one finds them in cache: each stage
    /// over all slots is one round of cache misses in flight together,
    /// where reading each record in turn would wait for its table entry,
    /// its record and its shingles one after another. A hint only: no
    /// record is cloned and no result depends on it (one shard lock at a
    /// time, as every call here).
    pub(crate) fn prefetch(&self, slots: &[Slot], metadata: bool) {
        for &slot in slots {
            let (shard, i) = place(slot);
            if let Some(entry) = self.shards[shard].read().get(i) {
                prefetch(entry);
            }
        }
        for &slot in slots {
            let (shard, i) = place(slot);
            if let Some(Some(record)) = self.shards[shard].read().get(i) {
                // `&**record` is address arithmetic: the record is not read.
                prefetch::<Record>(record);
            }
        }
        for &slot in slots {
            let (shard, i) = place(slot);
            if let Some(Some(record)) = self.shards[shard].read().get(i) {
                prefetch_slice(record.shingles());
                // A filtered query reads each candidate's metadata (its
                // own allocation) before its shingles.
                if metadata {
                    if let Some(m) = record.metadata() {
                        prefetch_slice(m.as_bytes());
                    }
                }
            }
        }
    }

    /// Whether `slot` holds `record` itself (no `Arc` clone).
    pub(crate) fn holds(&self, slot: Slot, record: &Arc<Record>) -> bool {
        self.holds_one(slot, |r| std::ptr::eq(r, Arc::as_ptr(record)))
    }

    /// Whether `slot` holds a record that `f` accepts (no `Arc` clone).
    pub(crate) fn holds_one(&self, slot: Slot, f: impl FnOnce(&Record) -> bool) -> bool {
        let (shard, i) = place(slot);
        self.shards[shard]
            .read()
            .get(i)
            .is_some_and(|r| r.as_deref().is_some_and(f))
    }

    /// Take the record out of `slot`, with the slot.
    pub(crate) fn remove(&self, slot: &Slot) -> Option<(Slot, Arc<Record>)> {
        let (shard, i) = place(*slot);
        let old = self.shards[shard].write().get_mut(i)?.take()?;
        Some((*slot, old))
    }

    /// Records stored (a full scan: tests only).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.read().iter().filter(|r| r.is_some()).count())
            .sum()
    }

    /// Make room for slots `0..slots` without regrowing.
    pub(crate) fn reserve_slots(&self, slots: usize) {
        let per_shard = slots.div_ceil(RECORD_SHARDS);
        for s in self.shards.iter() {
            let mut v = s.write();
            let len = v.len();
            v.reserve_exact(per_shard.saturating_sub(len));
        }
    }

    /// Heap bytes of the slot vectors and the shard array.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.shards.len() * std::mem::size_of::<RecordShard>()
            + self
                .shards
                .iter()
                .map(|s| s.read().capacity() * std::mem::size_of::<Option<Arc<Record>>>())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn creation_time_and_signature_length_share_a_word_without_loss() {
        let now_ms = 1_795_412_345_678; // 2026-11-23
        for (created_ms, num_perm) in [(0, 1), (now_ms, 128), (now_ms, 1024), (MAX_CREATED_MS, 16)]
        {
            let signature: Vec<u32> = (0..num_perm as u32).collect();
            let r = Record::new(
                DocId::parse("x").unwrap(),
                None,
                Stamp {
                    created_ms,
                    expires_ms: Some(created_ms + 5),
                },
                &signature,
                &[7, 9],
            );
            assert_eq!(r.created_ms(), created_ms);
            assert_eq!(r.stamp().expires_ms, Some(created_ms + 5));
            assert_eq!(r.signature(), &signature[..]);
            assert_eq!(r.shingles(), &[7, 9]);
        }
        assert_eq!(MAX_CREATED_MS, (1 << 48) - 1, "ms until the year 10889");
    }

    fn rec(id: &str) -> Arc<Record> {
        Arc::new(Record::new(
            DocId::parse(id).unwrap(),
            None,
            Stamp::default(),
            &[1, 2],
            &[3],
        ))
    }

    #[test]
    fn the_text_locator_costs_at_most_one_word() {
        // The locator is one word: with it a record is 80 bytes, and its
        // `Arc` block (96) still one of the small allocator's size classes.
        assert!(std::mem::size_of::<Record>() <= 80);
        let r = rec("a");
        assert_eq!(r.text_locator(), 0, "no text until the store sets one");
        r.set_text_locator(42 << 40 | 16);
        assert_eq!(r.text_locator(), 42 << 40 | 16);
    }

    #[test]
    fn holds_compares_the_record_itself() {
        let t = RecordTable::default();
        let (a, twin) = (rec("a"), rec("a"));
        t.insert(3, Arc::clone(&a));
        assert!(t.holds(3, &a));
        assert!(!t.holds(3, &twin), "an equal record is not the same one");
        assert!(!t.holds(4, &a) && !t.holds(1 << 20, &a));
        t.remove(&3);
        assert!(!t.holds(3, &a));
    }

    #[test]
    fn option_arc_is_one_pointer() {
        assert_eq!(std::mem::size_of::<Option<Arc<Record>>>(), 8);
    }

    #[test]
    fn records_split_into_signature_and_shingles() {
        let r = Record::from_parts(
            DocId::parse("a").unwrap(),
            None,
            Stamp::default(),
            2,
            vec![1, 2, 3, 4, 0b10].into(),
        );
        assert_eq!((r.signature(), r.shingles()), (&[1, 2][..], &[3, 4][..]));
        assert_eq!(r.fingerprints().collect::<Vec<_>>(), vec![4]);
    }

    #[test]
    fn slots_store_replace_and_remove() {
        let t = RecordTable::default();
        assert!(t.get(&5).is_none());
        assert!(t.remove(&5).is_none());
        assert!(t.insert(5, rec("a")).is_none());
        assert_eq!(t.get(&5).unwrap().id().as_str(), "a");
        assert_eq!(t.insert(5, rec("b")).unwrap().id().as_str(), "a");
        assert_eq!(t.len(), 1);
        let (slot, r) = t.remove(&5).unwrap();
        assert_eq!((slot, r.id().as_str()), (5, "b"));
        assert_eq!(t.len(), 0);
        assert!(t.get(&5).is_none());
    }

    #[test]
    fn reserve_sizes_every_shard() {
        let t = RecordTable::default();
        t.reserve_slots(64_000);
        let before = t.heap_bytes();
        for s in 0..64_000 {
            t.insert(s, rec("x"));
        }
        assert_eq!(t.heap_bytes(), before, "no growth after reserve");
        assert!(before >= 64_000 * 8);
    }

    #[test]
    fn concurrent_writers_and_readers_see_whole_records() {
        let t = RecordTable::default();
        std::thread::scope(|s| {
            for w in 0..4u32 {
                let t = &t;
                s.spawn(move || {
                    for round in 0..200u32 {
                        for k in 0..50u32 {
                            let slot = k * 4 + w;
                            t.insert(slot, rec(&format!("{w}-{round}")));
                            if round % 3 == 0 {
                                t.remove(&slot);
                            }
                        }
                    }
                });
            }
            let t = &t;
            s.spawn(move || {
                for _ in 0..20_000 {
                    for slot in [0u32, 1, 2, 3, 101, 199] {
                        if let Some(r) = t.get(&slot) {
                            let w = slot % 4;
                            assert!(r.id().as_str().starts_with(&format!("{w}-")));
                        }
                    }
                }
            });
        });
        // The last round (199) was not a removing one: all 200 slots filled.
        assert_eq!(t.len(), 200);
        for slot in 0..200u32 {
            let id = format!("{}-199", slot % 4);
            assert_eq!(t.get(&slot).unwrap().id().as_str(), id);
        }
    }

    proptest! {
        /// The table behaves like a `BTreeMap<Slot, id>`.
        #[test]
        fn table_matches_a_map(ops in proptest::collection::vec((0u32..300, any::<bool>()), 1..300)) {
            let t = RecordTable::default();
            let mut model = BTreeMap::new();
            for (i, (slot, insert)) in ops.into_iter().enumerate() {
                if insert {
                    let id = format!("r{i}");
                    let old = t.insert(slot, rec(&id)).map(|r| r.id().to_string());
                    prop_assert_eq!(old, model.insert(slot, id));
                } else {
                    let old = t.remove(&slot).map(|(_, r)| r.id().to_string());
                    prop_assert_eq!(old, model.remove(&slot));
                }
            }
            prop_assert_eq!(t.len(), model.len());
            for s in 0..300u32 {
                prop_assert_eq!(t.get(&s).map(|r| r.id().to_string()), model.get(&s).cloned());
            }
        }
    }
}
