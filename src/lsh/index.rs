//! The band buckets: `band key → slots` for all bands, in [`SHARDS`]
//! independently locked open-addressing tables.
//!
//! Keys mix the band number with its r rows through a fixed 64-bit mixer
//! seeded by `index.seed`, so a table rebuilt from stored signatures after a
//! restart is identical. The top [`SHARD_BITS`] bits of the 64-bit key pick
//! the shard and its low 32 bits are what the shard stores, with the low 4
//! of those replaced by the band's class (its number mod 16, see
//! [`BandMask`]). So two band keys are confused only if their bands are of
//! one class and 38 more of their bits agree: a query probes 21 shards
//! holding ~n·21/1024 keys each, of which the 1/21 or 2/21 of its band's
//! class can collide, so it meets a false bucket with probability
//! ~21·(n·21/1024)·(2/21)/2²⁸ (≈ 1.5e-4 per query at a million documents).
//! Such a collision only adds a false candidate, which exact verification
//! removes. (Keeping the class in the key is what makes the shared-band
//! masks exact: a bucket shared by mistake is shared by two bands of one
//! class, so both slots have that class's bit set.)
//!
//! **Memory.** A key costs one 8-byte cell (32-bit key, 32-bit slot) at a
//! load of 55–75%, about 12 bytes; buckets holding two or more documents
//! keep their slots in a side vector (see [`table`](super::table)). The old
//! `DashMap<u64, Bucket>` cost 25 bytes per bucket at hashbrown's load.
//!
//! **Concurrency.** Each shard is one `RwLock`; every write holds one
//! shard lock at a time and never takes another while holding it, and
//! [`LshIndex::candidates`] read-locks the shards of its bands together, in
//! increasing shard order (so that its cache misses overlap; the argument
//! that this cannot deadlock is on that method). There is no global lock:
//! writers to different shards and all readers proceed in parallel. A shard grows by
//! rehashing under its write lock; at a million documents a shard holds
//! ~20,000 keys, so that pause is well under a millisecond.
//!
//! **Who shares, in which bands.** Every insert path reports whom a slot
//! met in each band's bucket ([`Joined`]) and keeps `SharedBands`
//! (`shared.rs`) up to date: a slot's mask is cleared before its keys go in,
//! and the bit of a band's class is set when the slot meets another there
//! (for both, the first time a bucket holds two).
//! [`LshIndex::shared_bands`] reads it: a clear mask means the document has
//! no candidates, and [`LshIndex::candidates_in`] looks up only the bands of
//! the classes set.
//!
//! **Bulk load.** [`LshIndex::insert_bulk`] computes the keys of a whole
//! batch, groups them by shard and takes each shard's lock once, spread
//! over the rayon pool; [`LshIndex::reserve`] sizes every shard up front
//! (at 70% load, tighter than growth leaves it) so a restore never rehashes.
//! Inside a shard the keys go in with [`Table::insert_all`], which loads a
//! group's home cells before inserting any, so their cache misses overlap.

use super::shared::{SharedBands, CLASSES};
use super::table::{Bucket, Joined, Table, MAX_SLOT};
use crate::prefetch::prefetch;
use rayon::prelude::*;
use std::sync::{Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

pub use super::shared::{class_of, BandMask, ALL_BANDS};
pub use super::table::Slot;

/// log2 of the number of shards.
pub const SHARD_BITS: u32 = 10;
pub const SHARDS: usize = 1 << SHARD_BITS;

/// One shard on its own cache line, so writers of neighbouring shards do
/// not invalidate each other's lock word.
#[derive(Default)]
#[repr(align(64))]
struct Shard(RwLock<Table>);

impl Shard {
    fn read(&self) -> RwLockReadGuard<'_, Table> {
        self.0.read().expect("an LSH shard lock was poisoned")
    }

    fn write(&self) -> RwLockWriteGuard<'_, Table> {
        self.0.write().expect("an LSH shard lock was poisoned")
    }
}

pub struct LshIndex {
    bands: usize,
    rows: usize,
    seed: u64,
    /// Every band's buckets; the band number is part of the key. Made by
    /// the first insert, so an empty index (a new collection) costs next
    /// to nothing.
    shards: OnceLock<Box<[Shard]>>,
    /// In which bands each slot shares a bucket (see [`SharedBands`]).
    shared: SharedBands,
    /// Buffers of [`insert_bulk`](Self::insert_bulk), kept between calls
    /// until [`release_bulk_buffers`](Self::release_bulk_buffers). The lock
    /// serializes bulk inserts (only the restore path makes them).
    bulk_scratch: Mutex<Vec<ByShard>>,
}

impl std::fmt::Debug for LshIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LshIndex")
            .field("bands", &self.bands)
            .field("rows", &self.rows)
            .field("buckets", &self.bucket_count())
            .finish()
    }
}

/// One part of a bulk insert: `(key, slot)` pairs grouped by shard.
#[derive(Default)]
struct ByShard {
    /// `(shard, band, key, slot)` in document order (scratch).
    keys: Vec<(u16, u16, u32, Slot)>,
    entries: Vec<(u32, Slot)>,
    /// The band of each entry (for [`SharedBands`]).
    bands: Vec<u16>,
    /// Shard `s` owns `entries[starts[s]..starts[s + 1]]`.
    starts: Vec<u32>,
    next: Vec<u32>,
}

impl ByShard {
    fn fill(&mut self, index: &LshIndex, docs: &[(Slot, &[u32])]) {
        self.keys.clear();
        self.starts.clear();
        self.starts.resize(SHARDS + 1, 0);
        for &(slot, signature) in docs {
            assert!(slot <= MAX_SLOT, "slot {slot} is beyond the index's range");
            // Before any of the batch goes into a bucket.
            index.shared.clear(slot);
            for (band, (shard, key)) in index.keys(signature).enumerate() {
                self.starts[shard + 1] += 1;
                // Shards < 2^10; bands ≤ num_perm < 2^16 (`Record`).
                self.keys.push((shard as u16, band as u16, key, slot));
            }
        }
        for i in 0..SHARDS {
            self.starts[i + 1] += self.starts[i];
        }
        self.next.clone_from(&self.starts);
        self.entries.clear();
        self.entries.resize(self.keys.len(), (0, 0));
        self.bands.clear();
        self.bands.resize(self.keys.len(), 0);
        for &(shard, band, key, slot) in &self.keys {
            let at = &mut self.next[shard as usize];
            self.entries[*at as usize] = (key, slot);
            self.bands[*at as usize] = band;
            *at += 1;
        }
    }

    fn heap_bytes(&self) -> usize {
        self.keys.capacity() * 12
            + self.entries.capacity() * 8
            + self.bands.capacity() * 2
            + (self.starts.capacity() + self.next.capacity()) * 4
    }

    /// Shard `shard`'s entries, and their bands.
    fn of(&self, shard: usize) -> (&[(u32, Slot)], &[u16]) {
        let range = self.starts[shard] as usize..self.starts[shard + 1] as usize;
        (&self.entries[range.clone()], &self.bands[range])
    }
}

const BAND_SALT: u64 = 0x6c73_6862_616e_6473;

/// Most bands [`LshIndex::candidates`] looks up together (the default
/// banding has 21); more take one band at a time.
const BATCH: usize = 64;
// `candidates` sorts bands as `shard << 6 | band` in a u16.
const _: () = assert!(BATCH <= 64 && SHARD_BITS + 6 <= 16);

/// Bits of a stored key that hold the band's class.
const CLASS_BITS: u32 = CLASSES.trailing_zeros();
// The stored key's low bits are the class, whose mask fits in them.
const _: () = assert!(1 << CLASS_BITS == CLASSES);

/// Where the 64-bit key of band `band` lives: its shard, and the 32-bit
/// key stored there, whose low [`CLASS_BITS`] are the band's class (see
/// the module docs; never 0, which marks an empty cell). Tables place a
/// key by its high bits (`Table::home`).
#[inline]
fn split(key: u64, band: usize) -> (usize, u32) {
    let class = (band % CLASSES) as u32;
    let stored = ((key as u32) & !(CLASSES as u32 - 1)) | class;
    let stored = if stored == 0 { CLASSES as u32 } else { stored };
    ((key >> (64 - SHARD_BITS)) as usize, stored)
}

impl LshIndex {
    pub fn new(bands: usize, rows: usize, seed: u64) -> Self {
        assert!(bands > 0 && rows > 0);
        Self {
            bands,
            rows,
            seed: seed ^ BAND_SALT,
            shards: OnceLock::new(),
            shared: SharedBands::default(),
            bulk_scratch: Mutex::new(Vec::new()),
        }
    }

    /// The shards, none before the first insert.
    fn shards(&self) -> &[Shard] {
        self.shards.get().map_or(&[], |s| s)
    }

    /// The shards, made if this is the first write.
    fn shards_for_write(&self) -> &[Shard] {
        self.shards
            .get_or_init(|| (0..SHARDS).map(|_| Shard::default()).collect())
    }

    pub fn bands(&self) -> usize {
        self.bands
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The key of band `band` of `signature`.
    pub fn band_key(&self, signature: &[u32], band: usize) -> u64 {
        let rows = &signature[band * self.rows..(band + 1) * self.rows];
        let mut h = self.seed ^ (band as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for &v in rows {
            h = (h ^ u64::from(v)).wrapping_mul(0xff51_afd7_ed55_8ccd);
            h ^= h >> 32;
        }
        // Final avalanche (MurmurHash3 fmix64) so every key bit depends on every row.
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }

    fn keys<'a>(&'a self, signature: &'a [u32]) -> impl Iterator<Item = (usize, u32)> + 'a {
        debug_assert!(signature.len() >= self.bands * self.rows);
        (0..self.bands).map(move |band| split(self.band_key(signature, band), band))
    }

    pub fn insert(&self, slot: Slot, signature: &[u32]) {
        assert!(slot <= MAX_SLOT, "slot {slot} is beyond the index's range");
        let shards = self.shards_for_write();
        self.shared.clear(slot);
        for (band, (shard, key)) in self.keys(signature).enumerate() {
            let joined = shards[shard].write().insert(key, slot);
            self.note(slot, band, joined);
        }
    }

    /// Record whom `slot` joined in a bucket of band `band`.
    #[inline]
    fn note(&self, slot: Slot, band: usize, joined: Joined) {
        match joined {
            Joined::Nobody => {}
            Joined::One(other) => {
                self.shared.set(slot, band);
                self.shared.set(other, band);
            }
            // The others were marked when their bucket first held two.
            Joined::Several => self.shared.set(slot, band),
        }
    }

    /// The classes of bands (see [`BandMask`]) in which `slot` may share a
    /// bucket with another slot. A clear bit means it has been alone in
    /// the buckets of those bands since it was inserted; 0 means it has no
    /// candidates but itself (see `shared.rs`).
    #[inline]
    pub fn shared_bands(&self, slot: Slot) -> BandMask {
        self.shared.get(slot)
    }

    /// Whether `slot` may share a bucket with another slot in any band.
    pub fn shares_bucket(&self, slot: Slot) -> bool {
        self.shared_bands(slot) != 0
    }

    /// Insert many documents at once: the same result as calling
    /// [`insert`](Self::insert) for each, with one lock acquisition per
    /// shard and the work spread over the rayon pool.
    pub fn insert_bulk(&self, docs: &[(Slot, &[u32])]) {
        if docs.is_empty() {
            return;
        }
        // 1. Keys, computed in parallel parts; each part counting-sorted by
        //    shard, into buffers kept from the previous call (a restore
        //    calls this ~100 times; fresh multi-megabyte temporaries each
        //    time cost page faults and allocator consolidation).
        let mut parts = self.bulk_scratch.lock().expect("bulk scratch lock");
        let part = docs
            .len()
            .div_ceil(rayon::current_num_threads() * 2)
            .max(256);
        let n_parts = docs.len().div_ceil(part);
        if parts.len() < n_parts {
            parts.resize_with(n_parts, ByShard::default);
        }
        let parts = &mut parts[..n_parts];
        docs.par_chunks(part)
            .zip(parts.par_iter_mut())
            .for_each(|(docs, by_shard)| by_shard.fill(self, docs));
        let parts = &*parts;
        let shards = self.shards_for_write();
        // 2. Each shard locked once; shards in parallel.
        (0..SHARDS)
            .into_par_iter()
            .with_min_len(SHARDS / 64)
            .for_each(|shard| {
                let n: usize = parts.iter().map(|p| p.of(shard).0.len()).sum();
                if n == 0 {
                    return;
                }
                let mut table = shards[shard].write();
                table.reserve(n);
                for p in parts {
                    let (entries, bands) = p.of(shard);
                    table.insert_all(entries, |i, slot, joined| {
                        self.note(slot, usize::from(bands[i]), joined);
                    });
                }
            });
    }

    /// Insert a batch of documents on this thread: the same result as
    /// calling [`insert`](Self::insert) for each, with one lock acquisition
    /// per shard the batch touches (a write batch: its tables grow in the
    /// caller's allocator arena, next to its records, as single inserts
    /// would; [`insert_bulk`](Self::insert_bulk) spreads a restore over the
    /// pool instead).
    pub fn insert_batch(&self, docs: &[(Slot, &[u32])]) {
        if docs.is_empty() {
            return;
        }
        let mut parts = self.bulk_scratch.lock().expect("bulk scratch lock");
        if parts.is_empty() {
            parts.push(ByShard::default());
        }
        let by_shard = &mut parts[0];
        by_shard.fill(self, docs);
        let shards = self.shards_for_write();
        for (shard, lock) in shards.iter().enumerate() {
            let (entries, bands) = by_shard.of(shard);
            if entries.is_empty() {
                continue;
            }
            lock.write().insert_all(entries, |i, slot, joined| {
                self.note(slot, usize::from(bands[i]), joined);
            });
        }
    }

    /// Free the buffers [`insert_bulk`](Self::insert_bulk) keeps between calls.
    pub fn release_bulk_buffers(&self) {
        *self.bulk_scratch.lock().expect("bulk scratch lock") = Vec::new();
    }

    /// Size every shard for `documents` more documents, so that loading
    /// them does not rehash.
    pub fn reserve(&self, documents: usize) {
        let keys = documents.saturating_mul(self.bands);
        // Keys spread binomially over shards; 4 standard deviations of
        // headroom keeps every shard from growing during the load.
        let mean = keys as f64 / SHARDS as f64;
        let per_shard = (mean + 4.0 * mean.sqrt()).ceil() as usize;
        if documents == 0 {
            return;
        }
        self.shards_for_write()
            .par_iter()
            .with_min_len(SHARDS / 64)
            .for_each(|s| s.write().presize(per_shard));
    }

    pub fn remove(&self, slot: Slot, signature: &[u32]) {
        let shards = self.shards();
        if shards.is_empty() {
            return;
        }
        for (shard, key) in self.keys(signature) {
            shards[shard].write().remove(key, slot);
        }
    }

    /// Append every slot sharing a band with `signature` to `out` (with
    /// repeats, in band order; the caller sorts and dedups). Returns false
    /// if more than `cap` slots were found, in which case `out` keeps the
    /// first `cap`.
    pub fn candidates(&self, signature: &[u32], out: &mut Vec<Slot>, cap: usize) -> bool {
        self.candidates_in(signature, ALL_BANDS, out, cap)
    }

    /// [`candidates`](Self::candidates) in the bands of the classes in
    /// `bands` only. A stored document's [`shared_bands`](Self::shared_bands)
    /// skips the bands where it has been alone (whose buckets hold only
    /// itself), with the same result but for its own slot.
    ///
    /// **Overlapped misses.** At a million documents each band lookup is a
    /// cache and TLB miss. Taking and releasing a shard lock around each
    /// lookup would serialize them (a locked instruction waits for every
    /// earlier load), so the lookup is done in three steps: read-lock every
    /// shard the bands fall in, load every band's home cell (independent
    /// loads with no locked instruction between them, so the misses are in
    /// flight together), then resolve each bucket and unlock. Two
    /// prefetches widen the overlap: the bands' shard lines before the
    /// locks (a lock is an atomic write that waits for its line), and each
    /// found bucket's side entry (buckets of two or more) before any bucket
    /// is resolved (`query_bench`, round 17 in docs/benchmarks.md).
    ///
    /// **No deadlock.** The shards are locked in increasing shard order,
    /// each once (a second read lock on one shard could wait behind a
    /// queued writer forever). Writers (`insert`, `remove`, `insert_bulk`,
    /// `reserve`) hold one shard lock at a time and wait for none while
    /// holding it. So if this call waits for shard s, whoever it waits for
    /// is a writer holding s (which finishes without waiting), a writer
    /// queued for s (which waits only for the current holders of s) or a
    /// reader holding s, which can itself only be waiting for a shard above
    /// s: every chain of waits climbs in shard number and ends.
    pub fn candidates_in(
        &self,
        signature: &[u32],
        bands: BandMask,
        out: &mut Vec<Slot>,
        cap: usize,
    ) -> bool {
        let shards = self.shards();
        if shards.is_empty() {
            return true;
        }
        if self.bands > BATCH {
            return self.sequential_in(signature, bands, out, cap);
        }
        debug_assert!(signature.len() >= self.bands * self.rows);
        // The keys of the bands looked up, in band order.
        let mut keys = [(0usize, 0u32); BATCH];
        let mut n = 0;
        for band in (0..self.bands).filter(|&b| class_of(b) & bands != 0) {
            keys[n] = split(self.band_key(signature, band), band);
            n += 1;
        }
        let keys = &keys[..n];
        // The shards' lock words: each lock below is an atomic write, which
        // waits for its cache line, so lines not yet in cache would be
        // fetched one after another.
        for &(shard, _) in keys {
            prefetch(&shards[shard]);
        }
        // Bands by shard: `shard << 6 | band` sorted as plain integers (the
        // insertion sort through `keys` it replaces, with its data-dependent
        // branches, was ~15% of this call: `lsh_bench`).
        let mut order = [0u16; BATCH];
        for (b, o) in order.iter_mut().enumerate().take(n) {
            *o = ((keys[b].0 as u16) << 6) | b as u16;
        }
        let order = &mut order[..n];
        order.sort_unstable();
        // One read guard per distinct shard, taken in shard order; `held[b]`
        // is the guard band b looks up in.
        let mut guards: [Option<RwLockReadGuard<'_, Table>>; BATCH] = [const { None }; BATCH];
        let mut held = [0u8; BATCH];
        let mut last = usize::MAX;
        let mut g = 0usize;
        for &o in order.iter() {
            let b = o & 63;
            let shard = keys[b as usize].0;
            if shard != last {
                guards[g] = Some(shards[shard].read());
                g += 1;
                last = shard;
            }
            held[b as usize] = (g - 1) as u8;
        }
        let table = |b: usize| guards[held[b] as usize].as_deref().expect("locked above");
        // Every home cell first, then the buckets.
        let mut homes = [0u64; BATCH];
        for (b, home) in homes.iter_mut().enumerate().take(n) {
            *home = table(b).home_cell(keys[b].1);
        }
        // Then every bucket's side entry (buckets of two or more slots).
        for b in 0..n {
            table(b).prefetch_bucket(keys[b].1, homes[b]);
        }
        for b in 0..n {
            match table(b).get_from(keys[b].1, homes[b]) {
                None => {}
                Some(Bucket::One(s)) => out.push(s),
                Some(Bucket::Many(v)) => out.extend_from_slice(v),
            }
            if out.len() > cap {
                out.truncate(cap);
                return false;
            }
        }
        true
    }

    /// [`candidates`](Self::candidates) one band at a time, one lock at a
    /// time: the same result, with the misses one after another (indexes
    /// with more than [`BATCH`] bands; benchmarks and tests compare the two).
    #[doc(hidden)]
    pub fn candidates_sequential(
        &self,
        signature: &[u32],
        out: &mut Vec<Slot>,
        cap: usize,
    ) -> bool {
        self.sequential_in(signature, ALL_BANDS, out, cap)
    }

    fn sequential_in(
        &self,
        signature: &[u32],
        bands: BandMask,
        out: &mut Vec<Slot>,
        cap: usize,
    ) -> bool {
        let shards = self.shards();
        if shards.is_empty() {
            return true;
        }
        for (band, (shard, key)) in self.keys(signature).enumerate() {
            if class_of(band) & bands == 0 {
                continue;
            }
            match shards[shard].read().get(key) {
                None => {}
                Some(Bucket::One(s)) => out.push(s),
                Some(Bucket::Many(v)) => out.extend_from_slice(v),
            }
            if out.len() > cap {
                out.truncate(cap);
                return false;
            }
        }
        true
    }

    /// Number of non-empty buckets.
    pub fn bucket_count(&self) -> usize {
        self.shards().iter().map(|s| s.read().len()).sum()
    }

    /// What the index costs whatever its size: the shard array, once made.
    pub fn fixed_bytes(&self) -> usize {
        std::mem::size_of_val(self.shards())
    }

    /// Heap bytes: every shard's table and spilled buckets, the shard
    /// array, and bulk-insert buffers if any are kept.
    pub fn heap_bytes(&self) -> usize {
        let scratch: usize = self
            .bulk_scratch
            .lock()
            .expect("bulk scratch lock")
            .iter()
            .map(ByShard::heap_bytes)
            .sum();
        scratch
            + self.shared.heap_bytes()
            + std::mem::size_of_val(self.shards())
            + self
                .shards()
                .iter()
                .map(|s| s.read().heap_bytes())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn sorted_candidates(idx: &LshIndex, sig: &[u32]) -> Vec<Slot> {
        let mut out = Vec::new();
        assert!(idx.candidates(sig, &mut out, usize::MAX));
        out.sort_unstable();
        out
    }

    #[test]
    fn identical_signatures_collide_in_every_band() {
        let idx = LshIndex::new(4, 2, 1);
        let sig = [1, 2, 3, 4, 5, 6, 7, 8];
        idx.insert(10, &sig);
        idx.insert(11, &sig);
        assert_eq!(
            sorted_candidates(&idx, &sig),
            vec![10, 10, 10, 10, 11, 11, 11, 11]
        );
    }

    #[test]
    fn one_shared_band_is_enough_and_removal_cleans_up() {
        let idx = LshIndex::new(2, 2, 1);
        idx.insert(1, &[1, 2, 3, 4]);
        idx.insert(2, &[9, 9, 3, 4]);
        assert_eq!(sorted_candidates(&idx, &[0, 0, 3, 4]), vec![1, 2]);
        idx.remove(1, &[1, 2, 3, 4]);
        idx.remove(2, &[9, 9, 3, 4]);
        assert_eq!(idx.bucket_count(), 0);
        // The shared-band masks stay: one segment of 4,096 slots, 8 KiB
        // of masks and 512 bytes of bits.
        assert!(idx.shares_bucket(1) && idx.shares_bucket(2));
        assert_eq!(
            idx.heap_bytes(),
            SHARDS * std::mem::size_of::<Shard>() + 8192 + 512,
            "every table released"
        );
    }

    #[test]
    fn an_empty_index_allocates_nothing_until_its_first_insert() {
        let idx = LshIndex::new(21, 6, 1);
        assert_eq!(idx.heap_bytes(), 0);
        assert_eq!(sorted_candidates(&idx, &[1; 126]), Vec::<Slot>::new());
        idx.remove(3, &[1; 126]);
        idx.reserve(0);
        assert_eq!(idx.heap_bytes(), 0);
        idx.insert(3, &[1; 126]);
        assert!(idx.heap_bytes() >= SHARDS * std::mem::size_of::<Shard>());
        assert_eq!(sorted_candidates(&idx, &[1; 126]), vec![3; 21]);
    }

    #[test]
    fn band_keys_depend_on_band_number_and_every_row() {
        let idx = LshIndex::new(2, 2, 1);
        let sig = [5, 5, 5, 5];
        assert_ne!(idx.band_key(&sig, 0), idx.band_key(&sig, 1));
        assert_ne!(
            idx.band_key(&[5, 5, 5, 5], 0),
            idx.band_key(&[5, 6, 5, 5], 0)
        );
        assert_ne!(
            idx.band_key(&[5, 5, 5, 5], 0),
            idx.band_key(&[6, 5, 5, 5], 0)
        );
        // Same seed → same key on every run and machine.
        assert_eq!(
            LshIndex::new(2, 2, 1).band_key(&sig, 0),
            idx.band_key(&sig, 0)
        );
    }

    #[test]
    fn candidate_cap_truncates_and_reports() {
        let idx = LshIndex::new(1, 1, 1);
        for s in 0..10 {
            idx.insert(s, &[7]);
        }
        let mut out = Vec::new();
        assert!(!idx.candidates(&[7], &mut out, 4));
        assert_eq!(out.len(), 4);
    }

    #[test]
    fn bulk_insert_equals_one_by_one_insert() {
        let sigs: Vec<Vec<u32>> = (0..3000u32)
            .map(|i| {
                (0..8)
                    .map(|r| (i / 3).wrapping_mul(2654435761) ^ r)
                    .collect()
            })
            .collect();
        let one = LshIndex::new(4, 2, 9);
        let bulk = LshIndex::new(4, 2, 9);
        bulk.reserve(1000);
        for (i, s) in sigs.iter().enumerate() {
            one.insert(i as Slot, s);
        }
        let docs: Vec<(Slot, &[u32])> = sigs
            .iter()
            .enumerate()
            .map(|(i, s)| (i as Slot, s.as_slice()))
            .collect();
        bulk.insert_bulk(&docs[..1000]);
        bulk.insert_bulk(&docs[1000..]);
        let batch = LshIndex::new(4, 2, 9);
        batch.insert_batch(&docs[..1500]);
        batch.insert_batch(&docs[1500..]);
        assert_eq!(one.bucket_count(), bulk.bucket_count());
        assert_eq!(one.bucket_count(), batch.bucket_count());
        // Every third signature repeats: each of those shares its buckets.
        for slot in 0..3000 {
            assert!(one.shares_bucket(slot), "slot {slot}");
            assert!(bulk.shares_bucket(slot), "slot {slot}");
            assert!(batch.shares_bucket(slot), "slot {slot}");
        }
        let kept = bulk.heap_bytes();
        bulk.release_bulk_buffers();
        assert!(bulk.heap_bytes() < kept, "buffers were kept, now freed");
        for s in &sigs {
            assert_eq!(sorted_candidates(&one, s), sorted_candidates(&bulk, s));
            assert_eq!(sorted_candidates(&one, s), sorted_candidates(&batch, s));
        }
        // Distinct signatures: nobody shares, by any insert path.
        let lone: Vec<(Slot, &[u32])> = sigs
            .iter()
            .step_by(3)
            .enumerate()
            .map(|(i, s)| (i as Slot, s.as_slice()))
            .collect();
        let (one, bulk, batch) = (
            LshIndex::new(4, 2, 9),
            LshIndex::new(4, 2, 9),
            LshIndex::new(4, 2, 9),
        );
        for &(slot, s) in &lone {
            one.insert(slot, s);
        }
        bulk.insert_bulk(&lone);
        batch.insert_batch(&lone);
        for &(slot, _) in &lone {
            assert!(!one.shares_bucket(slot) && !bulk.shares_bucket(slot));
            assert!(!batch.shares_bucket(slot), "slot {slot}");
        }
    }

    /// A slot's bit is set when a second slot joins one of its buckets,
    /// stays set while it shares, and is cleared when the slot is reused
    /// for a document that shares nothing.
    #[test]
    fn the_shared_bit_follows_the_buckets() {
        let idx = LshIndex::new(3, 1, 4);
        idx.insert(1, &[10, 20, 30]);
        assert!(!idx.shares_bucket(1), "alone");
        idx.insert(2, &[11, 21, 30]);
        assert!(
            idx.shares_bucket(1) && idx.shares_bucket(2),
            "band 2 in common"
        );
        idx.insert(3, &[12, 22, 30]);
        assert!(idx.shares_bucket(3), "a third in the same bucket");
        idx.insert(4, &[13, 23, 33]);
        assert!(!idx.shares_bucket(4));
        // Slot 1 freed and reused by a document alone in every bucket.
        idx.remove(1, &[10, 20, 30]);
        idx.insert(1, &[14, 24, 34]);
        assert!(!idx.shares_bucket(1), "the new document's own bit");
        assert!(idx.shares_bucket(2), "a set bit is only ever a hint");
    }

    /// A stored key carries its band's class in its low bits and is never
    /// the empty cell's 0; the shard is the key's top bits.
    #[test]
    fn stored_keys_carry_the_band_class() {
        for band in 0..70 {
            for key in [0u64, 1, 0xf, 0x10, u64::MAX, 0x9e37_79b9_7f4a_7c15] {
                let (shard, stored) = split(key, band);
                assert_eq!(shard, (key >> (64 - SHARD_BITS)) as usize);
                assert_ne!(stored, 0);
                assert_eq!(class_of(stored as usize), class_of(band), "band {band}");
                if key as u32 >> 4 != 0 {
                    assert_eq!(stored >> 4, key as u32 >> 4, "the rest is the key's");
                }
            }
        }
    }

    /// Bands are looked up only in the classes asked for: two documents
    /// sharing band 1 alone find each other through class 1 only, and the
    /// mask of each names class 1 only.
    #[test]
    fn the_shared_bands_name_the_classes_in_common() {
        let idx = LshIndex::new(3, 1, 4);
        idx.insert(1, &[10, 20, 30]);
        idx.insert(2, &[11, 20, 31]);
        assert_eq!(idx.shared_bands(1), 0b010);
        assert_eq!(idx.shared_bands(2), 0b010);
        let found = |bands| {
            let mut out = Vec::new();
            assert!(idx.candidates_in(&[10, 20, 30], bands, &mut out, usize::MAX));
            out.sort_unstable();
            out
        };
        assert_eq!(found(0b010), vec![1, 2]);
        assert_eq!(found(0b101), vec![1, 1], "its own slot, in bands 0 and 2");
        assert_eq!(found(0), Vec::<Slot>::new());
        assert_eq!(found(ALL_BANDS), vec![1, 1, 1, 2]);
    }

    #[test]
    fn a_slot_beyond_the_range_is_refused() {
        let idx = LshIndex::new(1, 1, 1);
        let r = std::panic::catch_unwind(|| idx.insert(MAX_SLOT + 1, &[1]));
        assert!(r.is_err());
    }

    /// Writers insert and remove their own slots while readers query: no
    /// deadlock, readers never see a slot of a signature it was not
    /// inserted under, and the end state is exactly what was left inserted.
    #[test]
    fn concurrent_inserts_removes_and_queries_stay_consistent() {
        let idx = LshIndex::new(8, 2, 3);
        // 40 signature families; slot s always uses family s % 40, so any
        // candidate of a family-f query must be ≡ f (mod 40) unless a band
        // key happens to collide, which these small values never do.
        let family = |f: u32| -> Vec<u32> { (0..16).map(|r| f * 1000 + r).collect() };
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let writers: Vec<_> = (0..4u32)
                .map(|w| {
                    let idx = &idx;
                    s.spawn(move || {
                        for round in 0..300u32 {
                            for k in 0..10u32 {
                                let slot = w * 10_000 + k * 40 + (k + round) % 40;
                                idx.insert(slot, &family(slot % 40));
                            }
                            for k in 0..10u32 {
                                let slot = w * 10_000 + k * 40 + (k + round) % 40;
                                if round % 7 != 6 {
                                    idx.remove(slot, &family(slot % 40));
                                }
                            }
                        }
                    })
                })
                .collect();
            for r in 0..2u32 {
                let (idx, stop) = (&idx, &stop);
                s.spawn(move || {
                    let mut out = Vec::new();
                    let mut f = r;
                    while !stop.load(Ordering::Relaxed) {
                        out.clear();
                        idx.candidates(&family(f % 40), &mut out, usize::MAX);
                        assert!(out.iter().all(|s| s % 40 == f % 40), "foreign slot");
                        f += 1;
                    }
                });
            }
            for w in writers {
                w.join().expect("writer");
            }
            stop.store(true, Ordering::Relaxed);
        });
        // Every slot left is one inserted in a round ≡ 6 (mod 7), once per band.
        let mut expected: BTreeMap<u32, Vec<Slot>> = BTreeMap::new();
        for w in 0..4u32 {
            for round in (0..300u32).filter(|r| r % 7 == 6) {
                for k in 0..10u32 {
                    let slot = w * 10_000 + k * 40 + (k + round) % 40;
                    expected.entry(slot % 40).or_default().extend([slot; 8]);
                }
            }
        }
        for f in 0..40 {
            let mut e = expected.remove(&f).unwrap_or_default();
            e.sort_unstable();
            assert_eq!(sorted_candidates(&idx, &family(f)), e, "family {f}");
        }
        for s in idx.shards().iter() {
            s.read().validate();
        }
    }

    /// The overlapped lookup (every shard locked, every home cell loaded,
    /// then the buckets) gives what one band at a time gives, in the same
    /// order, with the same truncation, for indexes with fewer and more
    /// bands than it handles at once.
    #[test]
    fn the_overlapped_lookup_equals_the_sequential_one() {
        for bands in [1usize, 5, 21, 64, 70] {
            let rows = 2;
            // A small alphabet so that bands collide often.
            let sig = |d: u32| -> Vec<u32> {
                let mut x = d.wrapping_mul(0x9e37_79b9) | 1;
                (0..bands * rows)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        x % 3
                    })
                    .collect()
            };
            let idx = LshIndex::new(bands, rows, 9);
            for d in 0..400 {
                idx.insert(d, &sig(d));
            }
            for d in (0..400).step_by(3) {
                idx.remove(d, &sig(d));
            }
            for q in 0..60 {
                for cap in [usize::MAX, 0, 5, 37, 400] {
                    let (mut a, mut b) = (vec![9], vec![9]);
                    let ra = idx.candidates(&sig(q), &mut a, cap);
                    let rb = idx.candidates_sequential(&sig(q), &mut b, cap);
                    assert_eq!((ra, &a), (rb, &b), "bands {bands}, query {q}, cap {cap}");
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Candidates are exactly the slots sharing a band, as a brute-force
        /// scan over a model of the stored signatures finds them.
        #[test]
        fn candidates_match_a_brute_force_model(
            ops in proptest::collection::vec((0u32..30, 0u32..6, any::<bool>()), 1..200),
            query in 0u32..6,
        ) {
            let (bands, rows) = (3, 2);
            // Band b of value v is (v mod (b + 2)) twice: values share band b
            // exactly when they agree modulo b + 2.
            let sig = |v: u32| -> Vec<u32> { (0..6u32).map(|i| v % (i / 2 + 2)).collect() };
            let idx = LshIndex::new(bands, rows, 5);
            let mut model: BTreeMap<Slot, Vec<u32>> = BTreeMap::new();
            for (slot, v, insert) in ops {
                if insert && !model.contains_key(&slot) {
                    idx.insert(slot, &sig(v));
                    model.insert(slot, sig(v));
                } else if let Some(old) = model.remove(&slot) {
                    idx.remove(slot, &old);
                }
            }
            let q = sig(query);
            let mut expected: Vec<Slot> = Vec::new();
            for (&slot, s) in &model {
                for b in 0..bands {
                    if s[b * rows..(b + 1) * rows] == q[b * rows..(b + 1) * rows] {
                        expected.push(slot);
                    }
                }
            }
            expected.sort_unstable();
            prop_assert_eq!(sorted_candidates(&idx, &q), expected);
            // Two stored slots sharing a band both have their bit set: a
            // clear bit means alone in every bucket.
            for (&a, sa) in &model {
                for (&b, sb) in &model {
                    let share = (0..bands)
                        .any(|band| sa[band * rows..(band + 1) * rows] == sb[band * rows..(band + 1) * rows]);
                    if a != b && share {
                        prop_assert!(idx.shares_bucket(a), "slot {} shares with {}", a, b);
                    }
                }
            }
            // A stored slot's own mask finds what the full lookup finds
            // (its own slot aside).
            for (&a, sa) in &model {
                let without = |mut v: Vec<Slot>| {
                    v.retain(|&s| s != a);
                    v
                };
                let mut masked = Vec::new();
                prop_assert!(idx.candidates_in(sa, idx.shared_bands(a), &mut masked, usize::MAX));
                masked.sort_unstable();
                prop_assert_eq!(without(masked), without(sorted_candidates(&idx, sa)), "slot {}", a);
            }
        }
    }
}
