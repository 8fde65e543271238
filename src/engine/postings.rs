//! The passage index: `fingerprint → slots`, the inverted index of every
//! stored document's winnowed fingerprints ([`crate::text::winnow`]), for
//! queries by containment and passage lookups.
//!
//! The same open-addressing multimap as the band buckets
//! ([`crate::lsh::table::Table`], ~12 bytes a key at its load), in
//! [`SHARDS`] independently locked shards. A fingerprint is mixed with a
//! fixed 64-bit mixer: the top bits pick the shard, the low 32 (never 0) are
//! the key the shard stores, so two fingerprints are confused only if 40
//! bits agree (an extra candidate, which exact verification removes).
//!
//! It is an option of a collection (`passage_index`): off, it holds nothing
//! and the write path skips it; switched on, it is built from the stored
//! records, which keep their fingerprints as a bitmap over their shingles.
//! A slot may briefly be listed twice (a write racing the build) or after
//! it was freed: as with the band buckets, a candidate is only a hint that
//! is re-read and verified.

use crate::lsh::table::{Bucket, Joined, Table};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

pub use crate::lsh::index::Slot;

const SHARD_BITS: u32 = 8;
const SHARDS: usize = 1 << SHARD_BITS;
const MIX: u64 = 0x7061_7373_6167_6573;
/// Lookups [`Postings::with_many`] overlaps at once (at most 256: a
/// lookup's index in a chunk is a byte).
const BATCH: usize = 64;

#[derive(Default)]
#[repr(align(64))]
struct Shard(RwLock<Table>);

impl Shard {
    fn read(&self) -> RwLockReadGuard<'_, Table> {
        self.0.read().expect("a passage shard lock was poisoned")
    }

    fn write(&self) -> RwLockWriteGuard<'_, Table> {
        self.0.write().expect("a passage shard lock was poisoned")
    }
}

pub(crate) struct Postings {
    shards: Box<[Shard]>,
    /// How many fingerprints each slot's document has, so a candidate can
    /// be ruled out by its share before its record is read.
    counts: SlotCounts,
    /// How many of each slot's fingerprints another document has held too
    /// since it was indexed (a bucket it is in gained a second slot): 0
    /// means no document shares a passage with it, so a query by its id
    /// has no candidate and needs no lookup. Never lowered while the slot
    /// is indexed (a partner's removal leaves it), so it only errs high.
    shared: SlotCounts,
    /// The fewest fingerprints of any document indexed since the index
    /// was made (documents without any aside): a lower bound of every
    /// indexed document's count, so a candidate can be ruled out by the
    /// share rule without reading its own count.
    fewest: std::sync::atomic::AtomicUsize,
}

impl Default for Postings {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            counts: SlotCounts::default(),
            shared: SlotCounts::default(),
            fewest: std::sync::atomic::AtomicUsize::new(usize::MAX),
        }
    }
}

/// The passage index turned around for one containment pair scan
/// ([`Postings::slot_lists`]): the lists that pair documents (held by two
/// to `common_at` of them; slots below the scan's span), each sorted by
/// (fingerprint count, slot); and for each slot, the part of each of its
/// lists after it in that order (the documents it is the contained side
/// for in a pair scan), how many fingerprints it has and how many of them
/// are common. Reading a document's lists from here takes no lock, hash or
/// probe (lookups were the scan's largest cost: docs/benchmarks.md), and
/// no search for where it sits in each. Memory: 4 bytes per entry of those
/// lists, 8 per entry that is not last in its list, 8 per slot. Positions
/// are `u32`, a shard's above its start in its piece ([`PIECE_BITS`]).
pub(crate) struct SlotLists {
    /// Every list's slots: each shard's lists one after another, in a
    /// piece of its own (copied once, not joined).
    slots: Box<[Vec<Slot>]>,
    /// Slot `s`'s parts are `after[firsts[s]..firsts[s + 1]]`.
    firsts: Vec<u32>,
    /// Parts of lists ([`part`]: length, position in `slots`), none empty.
    after: Vec<u64>,
    /// Per slot: its fingerprints held by more than `common_at` documents.
    common: Vec<u16>,
    /// Per slot: its fingerprints ([`Postings::count`], saturated).
    counts: Vec<u16>,
}

/// Bits of a position in [`SlotLists`] below its shard's: a shard's lists
/// hold at most 2^24 entries (~4 billion in all, ~120 million 400-word
/// articles if every passage were shared).
const PIECE_BITS: u32 = 32 - SHARD_BITS;
const PIECE_MASK: u32 = (1 << PIECE_BITS) - 1;

/// The `len` slots at `position` (its shard's piece above its start there).
#[inline]
fn piece_run(pieces: &[Vec<Slot>], position: u32, len: u32) -> &[Slot] {
    let start = (position & PIECE_MASK) as usize;
    &pieces[(position >> PIECE_BITS) as usize][start..start + len as usize]
}

/// A part of a list in [`SlotLists`]: its length in the high half, its
/// position in the low half.
#[inline]
pub(crate) fn part(start: u32, len: u32) -> u64 {
    (u64::from(len) << 32) | u64::from(start)
}

impl SlotLists {
    /// The slots of `part`, one of [`Self::after`]'s.
    #[inline]
    pub(crate) fn slots(&self, part: u64) -> &[Slot] {
        piece_run(&self.slots, part as u32, (part >> 32) as u32)
    }

    /// The parts of `slot`'s lists after it in the lists' order
    /// (fingerprint count, then slot), the empty ones left out, each as
    /// [`part`] gives it: ordered as numbers, the shortest come first.
    #[inline]
    pub(crate) fn after(&self, slot: Slot) -> &[u64] {
        let s = slot as usize;
        if s + 1 >= self.firsts.len() {
            return &[];
        }
        &self.after[self.firsts[s] as usize..self.firsts[s + 1] as usize]
    }

    /// How many of `slot`'s fingerprints are common.
    #[inline]
    pub(crate) fn common(&self, slot: Slot) -> usize {
        self.common
            .get(slot as usize)
            .map_or(0, |&c| usize::from(c))
    }

    /// How many fingerprints `slot` has.
    #[inline]
    pub(crate) fn count(&self, slot: Slot) -> usize {
        self.counts
            .get(slot as usize)
            .map_or(0, |&c| usize::from(c))
    }
}

/// A `u16` per slot, lock-free: chunk `c` holds slots
/// `1024 · (2^c − 1) .. 1024 · (2^(c+1) − 1)`, made by the first write to
/// it (2 bytes a slot; a count above `u16::MAX` is kept as `u16::MAX`).
struct SlotCounts {
    chunks: [std::sync::OnceLock<Box<[std::sync::atomic::AtomicU16]>>; 22],
}

impl Default for SlotCounts {
    fn default() -> Self {
        Self {
            chunks: std::array::from_fn(|_| std::sync::OnceLock::new()),
        }
    }
}

impl SlotCounts {
    #[inline]
    fn locate(slot: Slot) -> (usize, usize) {
        let x = u64::from(slot) / 1024 + 1;
        let c = 63 - x.leading_zeros() as usize;
        let start = ((1u64 << c) - 1) * 1024;
        (c, (u64::from(slot) - start) as usize)
    }

    /// `slot`'s counter, its chunk made on first use.
    fn cell(&self, slot: Slot) -> &std::sync::atomic::AtomicU16 {
        let (c, i) = Self::locate(slot);
        let chunk = self.chunks[c].get_or_init(|| {
            (0..1024usize << c)
                .map(|_| std::sync::atomic::AtomicU16::new(0))
                .collect()
        });
        &chunk[i]
    }

    fn set(&self, slot: Slot, n: usize) {
        self.cell(slot).store(
            n.min(u16::MAX as usize) as u16,
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Add one to `slot`'s count (saturating at `u16::MAX`).
    fn bump(&self, slot: Slot) {
        use std::sync::atomic::Ordering::Relaxed;
        let _ = self
            .cell(slot)
            .fetch_update(Relaxed, Relaxed, |n| n.checked_add(1));
    }

    #[inline]
    fn get(&self, slot: Slot) -> usize {
        let (c, i) = Self::locate(slot);
        self.chunks[c].get().map_or(0, |chunk| {
            usize::from(chunk[i].load(std::sync::atomic::Ordering::Relaxed))
        })
    }

    fn heap_bytes(&self) -> usize {
        self.chunks
            .iter()
            .filter_map(|c| c.get())
            .map(|c| c.len() * 2)
            .sum()
    }
}

/// The shard and the key a fingerprint is stored under.
#[inline]
fn place(fp: u32) -> (usize, u32) {
    let m = crate::text::words::fmix64(u64::from(fp) ^ MIX);
    ((m >> (64 - SHARD_BITS)) as usize, (m as u32).max(1))
}

impl Postings {
    pub(crate) fn insert(&self, slot: Slot, fingerprints: impl Iterator<Item = u32>) {
        let mut n = 0;
        for fp in fingerprints {
            let (shard, key) = place(fp);
            let joined = self.shards[shard].write().insert(key, slot);
            self.note_join(slot, joined);
            n += 1;
        }
        self.counts.set(slot, n);
        self.note_count(n);
    }

    /// Keep [`Self::fewest`] a lower bound after indexing `n` fingerprints.
    #[inline]
    fn note_count(&self, n: usize) {
        if n > 0 {
            self.fewest
                .fetch_min(n, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// A lower bound of every indexed document's fingerprint count
    /// (`usize::MAX` while none is indexed).
    #[inline]
    pub(crate) fn fewest(&self) -> usize {
        self.fewest.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Count what `slot` met when one of its fingerprints was added
    /// ([`Self::shared`]).
    #[inline]
    fn note_join(&self, slot: Slot, joined: Joined) {
        match joined {
            Joined::Nobody => {}
            Joined::One(other) => {
                self.shared.bump(other);
                self.shared.bump(slot);
            }
            Joined::Several => self.shared.bump(slot),
        }
    }

    /// An upper bound on how many of `slot`'s fingerprints another indexed
    /// document holds (0: none does).
    #[inline]
    pub(crate) fn shared(&self, slot: Slot) -> usize {
        self.shared.get(slot)
    }

    /// [`Self::insert`] of many documents: their entries grouped by shard
    /// (a stable counting sort, so each shard's entries keep the
    /// documents' order), each shard locked once.
    pub(crate) fn insert_many<'a>(&self, docs: impl Iterator<Item = (Slot, &'a super::Record)>) {
        self.insert_many_fingerprints(docs.map(|(slot, record)| (slot, record.fingerprints())));
    }

    /// [`Self::insert_many`] of each slot's fingerprints.
    fn insert_many_fingerprints<F: Iterator<Item = u32>>(
        &self,
        docs: impl Iterator<Item = (Slot, F)>,
    ) {
        let mut keyed: Vec<(u16, u32, Slot)> = Vec::new();
        // Shard `s` owns `pairs[starts[s]..starts[s + 1]]`.
        let mut starts = vec![0u32; SHARDS + 1];
        for (slot, fingerprints) in docs {
            let before = keyed.len();
            keyed.extend(fingerprints.map(|fp| {
                let (shard, key) = place(fp);
                starts[shard + 1] += 1;
                (shard as u16, key, slot)
            }));
            self.counts.set(slot, keyed.len() - before);
            self.note_count(keyed.len() - before);
        }
        for s in 0..SHARDS {
            starts[s + 1] += starts[s];
        }
        let mut next = starts.clone();
        let mut pairs: Vec<(u32, Slot)> = vec![(0, 0); keyed.len()];
        for &(shard, key, slot) in &keyed {
            let at = &mut next[usize::from(shard)];
            pairs[*at as usize] = (key, slot);
            *at += 1;
        }
        drop(keyed);
        for (shard, lock) in self.shards.iter().enumerate() {
            let run = &pairs[starts[shard] as usize..starts[shard + 1] as usize];
            if run.is_empty() {
                continue;
            }
            // The home cells of a group are loaded together (`insert_all`),
            // so their cache misses overlap.
            lock.write()
                .insert_all(run, |_, slot, joined| self.note_join(slot, joined));
        }
    }

    pub(crate) fn remove(&self, slot: Slot, fingerprints: impl Iterator<Item = u32>) {
        for fp in fingerprints {
            let (shard, key) = place(fp);
            self.shards[shard].write().remove(key, slot);
        }
        self.counts.set(slot, 0);
        self.shared.set(slot, 0);
    }

    /// How many fingerprints the document in `slot` has (0: none indexed).
    #[inline]
    pub(crate) fn count(&self, slot: Slot) -> usize {
        self.counts.get(slot)
    }

    /// Documents holding `fp`: calls `f` with the bucket (under the
    /// shard's read lock; `f` must not call back into the index). One
    /// lookup at a time: the reference the tests hold
    /// [`Self::with_many`] to.
    #[cfg(test)]
    pub(crate) fn with<R>(&self, fp: u32, f: impl FnOnce(Option<Bucket<'_>>) -> R) -> R {
        let (shard, key) = place(fp);
        let table = self.shards[shard].read();
        f(table.get(key))
    }

    /// The buckets of many fingerprints: `f(i, bucket)` for each
    /// `fps[i]`, in order, until `f` returns false. The lookups of a chunk
    /// of [`BATCH`] overlap their cache misses as the band lookups do
    /// ([`crate::lsh::index::LshIndex::candidates_in`], whose deadlock
    /// argument holds here too: a chunk's shards are read-locked in
    /// increasing order, each once, and released before the next chunk):
    /// the shards' lock lines, then every home cell, then every bucket's
    /// side entry, then the start of every long bucket's slots are loaded
    /// before any bucket is used. `f` runs under the
    /// chunk's read locks and must not call back into the index.
    pub(crate) fn with_many(
        &self,
        fps: &[u32],
        mut f: impl FnMut(usize, Option<Bucket<'_>>) -> bool,
    ) {
        for (c, chunk) in fps.chunks(BATCH).enumerate() {
            let n = chunk.len();
            let mut places = [(0usize, 0u32); BATCH];
            for (p, &fp) in places.iter_mut().zip(chunk) {
                *p = place(fp);
                crate::prefetch::prefetch(&self.shards[p.0]);
            }
            // Lookups by shard (`shard << 8 | lookup`, sorted), one guard
            // per distinct shard, taken in shard order.
            let mut order = [0u16; BATCH];
            for (i, o) in order.iter_mut().enumerate().take(n) {
                *o = ((places[i].0 as u16) << 8) | i as u16;
            }
            let order = &mut order[..n];
            order.sort_unstable();
            let mut guards: [Option<RwLockReadGuard<'_, Table>>; BATCH] = [const { None }; BATCH];
            let mut held = [0u8; BATCH];
            let (mut last, mut g) = (usize::MAX, 0usize);
            for &o in order.iter() {
                let i = usize::from(o & 0xff);
                let shard = places[i].0;
                if shard != last {
                    guards[g] = Some(self.shards[shard].read());
                    g += 1;
                    last = shard;
                }
                held[i] = (g - 1) as u8;
            }
            let table = |i: usize| {
                guards[usize::from(held[i])]
                    .as_deref()
                    .expect("locked above")
            };
            let mut homes = [0u64; BATCH];
            for (i, home) in homes.iter_mut().enumerate().take(n) {
                *home = table(i).home_cell(places[i].1);
            }
            for i in 0..n {
                table(i).prefetch_bucket(places[i].1, homes[i]);
            }
            for i in 0..n {
                table(i).prefetch_slots(places[i].1, homes[i]);
            }
            for i in 0..n {
                if !f(c * BATCH + i, table(i).get_from(places[i].1, homes[i])) {
                    return;
                }
            }
        }
    }

    /// The index turned around for one pair scan over slots below `span`
    /// ([`SlotLists`]), on the rayon pool: the shards' lists of two or more
    /// are copied (read from the tables' bucket storage, not through their
    /// cells), each shard under its read lock in turn (a write meanwhile is
    /// seen or not, as by a scan that looks up each document's
    /// fingerprints), and each sorted by (fingerprint count, slot): as each
    /// slot's place in that order, a `u32` the sorting network takes, so
    /// the sort is a few vector instructions where one of `(count, slot)`
    /// keys cost half the copy (at 100k collage articles ~15 of the ~30 ms
    /// the copy took on two threads); then the parts after each
    /// slot are sorted by slot, the lists cut into a few runs, one a thread
    /// (each counting its run's parts of every slot on an array of its own,
    /// 4 bytes a slot while this runs, then writing them where the runs
    /// before it leave off).
    pub(crate) fn slot_lists(&self, span: usize, common_at: usize) -> SlotLists {
        use rayon::prelude::*;
        // Per shard: its lists' slots one after another, each list's
        // length, and the slots of its common lists.
        let counts: Vec<u16> = (0..span)
            .map(|s| self.counts.get(s as Slot) as u16)
            .collect();
        // Each slot's place in the order (count, slot). Lists are sorted as places
        // (u32s, in vector registers) and written back as slots.
        let (order, place) = by_count(&counts);
        let parts: Vec<(Vec<Slot>, Vec<u32>, Vec<Slot>)> = self
            .shards
            .par_iter()
            .map(|shard| {
                let table = shard.read();
                let (mut slots, mut lens, mut common) = (Vec::new(), Vec::new(), Vec::new());
                let mut keyed: Vec<u32> = Vec::new();
                for many in table.lists() {
                    if many.len() > common_at {
                        common.extend_from_slice(many);
                        continue;
                    }
                    keyed.clear();
                    keyed.extend(
                        many.iter()
                            .filter(|&&s| (s as usize) < span)
                            .map(|&s| place[s as usize]),
                    );
                    if keyed.len() < 2 {
                        continue;
                    }
                    crate::hashsort::sort_short(&mut keyed);
                    slots.extend(keyed.iter().map(|&k| order[k as usize]));
                    lens.push(keyed.len() as u32);
                }
                (slots, lens, common)
            })
            .collect();
        // Each list as (position, length): its shard's piece above its
        // start there ([`piece_run`]); the pieces are kept as they are.
        let mut lists: Vec<(u32, u32)> = Vec::with_capacity(parts.iter().map(|p| p.1.len()).sum());
        let mut common = vec![0u16; span];
        let mut pieces = Vec::with_capacity(parts.len());
        for (shard, (piece, lens, commons)) in parts.into_iter().enumerate() {
            assert!(
                piece.len() <= PIECE_MASK as usize,
                "a pair scan's lists hold at most 2^{PIECE_BITS} entries a shard"
            );
            let mut start = (shard as u32) << PIECE_BITS;
            for n in lens {
                lists.push((start, n));
                start += n;
            }
            for s in commons {
                if let Some(c) = common.get_mut(s as usize) {
                    *c = c.saturating_add(1);
                }
            }
            pieces.push(piece);
        }
        let slots = pieces.into_boxed_slice();
        // Each slot's parts of lists after it: a counting sort of (slot,
        // part) by slot. The lists are split into a few runs, one a thread:
        // each counts its run's parts of every slot, and then, from where
        // the runs before it leave off, writes them.
        let runs = rayon::current_num_threads().clamp(1, 4);
        let run = lists.len().div_ceil(runs).max(1);
        let mut next: Vec<Vec<u32>> = lists
            .par_chunks(run)
            .map(|lists| {
                let mut tally = vec![0u32; span];
                // A list's last slot has nothing after it.
                for &(start, n) in lists {
                    for &s in piece_run(&slots, start, n - 1) {
                        tally[s as usize] += 1;
                    }
                }
                tally
            })
            .collect();
        let mut firsts = vec![0u32; span + 1];
        let mut at = 0u32;
        for s in 0..span {
            firsts[s] = at;
            for tally in next.iter_mut() {
                (tally[s], at) = (at, at + tally[s]);
            }
        }
        firsts[span] = at;
        use std::sync::atomic::{AtomicU64, Ordering};
        // Runs write to places of their own, scattered among the others'.
        let after: Vec<AtomicU64> = (0..at).into_par_iter().map(|_| AtomicU64::new(0)).collect();
        lists
            .par_chunks(run)
            .zip(next.par_iter_mut())
            .for_each(|(lists, next)| {
                for &(start, n) in lists {
                    for (i, &s) in (1..n).zip(piece_run(&slots, start, n - 1)) {
                        let at = &mut next[s as usize];
                        after[*at as usize].store(part(start + i, n - i), Ordering::Relaxed);
                        *at += 1;
                    }
                }
            });
        let by_slot: Vec<u64> = after.into_iter().map(AtomicU64::into_inner).collect();
        SlotLists {
            slots,
            firsts,
            after: by_slot,
            common,
            counts,
        }
    }

    /// Drop every entry (the index was switched off).
    pub(crate) fn clear(&self) {
        for shard in self.shards.iter() {
            *shard.write() = Table::default();
        }
        for counts in [&self.counts, &self.shared] {
            for chunk in counts.chunks.iter().filter_map(|c| c.get()) {
                for n in chunk.iter() {
                    n.store(0, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
    }

    /// Distinct fingerprints held.
    pub(crate) fn keys(&self) -> usize {
        self.shards.iter().map(|s| s.read().len()).sum()
    }

    /// What the index costs with nothing in it (its shard array).
    pub(crate) fn fixed_bytes(&self) -> usize {
        self.shards.len() * std::mem::size_of::<Shard>()
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.read().heap_bytes())
            .sum::<usize>()
            + self.shards.len() * std::mem::size_of::<Shard>()
            + self.counts.heap_bytes()
            + self.shared.heap_bytes()
    }
}

/// Slots `0..counts.len()` in the order (count, slot), and each slot's
/// place in it (`radsort` is stable, so slots ascend within a count).
fn by_count(counts: &[u16]) -> (Vec<Slot>, Vec<u32>) {
    let mut order: Vec<Slot> = (0..counts.len() as Slot).collect();
    radsort::sort_by_key(&mut order, |&s| counts[s as usize]);
    let mut place = vec![0; counts.len()];
    for (at, &s) in (0..).zip(&order) {
        place[s as usize] = at;
    }
    (order, place)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(p: &Postings, fp: u32) -> Vec<Slot> {
        p.with(fp, |b| match b {
            None => vec![],
            Some(Bucket::One(s)) => vec![s],
            Some(Bucket::Many(s)) => s.to_vec(),
        })
    }

    #[test]
    fn insert_lookup_remove() {
        let p = Postings::default();
        p.insert(1, [10, 20, 30].into_iter());
        p.insert(2, [20, 40].into_iter());
        assert_eq!(slots(&p, 10), vec![1]);
        let mut twenty = slots(&p, 20);
        twenty.sort();
        assert_eq!(twenty, vec![1, 2]);
        assert_eq!(p.keys(), 4);
        p.remove(1, [10, 20, 30].into_iter());
        assert_eq!(slots(&p, 20), vec![2]);
        assert!(slots(&p, 10).is_empty());
        p.clear();
        assert_eq!(p.keys(), 0);
    }

    #[test]
    fn many_lookups_at_once_equal_one_at_a_time() {
        let p = Postings::default();
        // Fingerprints shared by a few documents, over many shards and
        // several chunks of lookups.
        for slot in 0..300u32 {
            p.insert(slot, (0..40).map(|k| (slot * 7 + k) % 500));
        }
        let fps: Vec<u32> = (0..600).rev().collect();
        let mut got: Vec<(usize, Vec<Slot>)> = Vec::new();
        p.with_many(&fps, |i, b| {
            let mut slots = match b {
                None => vec![],
                Some(Bucket::One(s)) => vec![s],
                Some(Bucket::Many(s)) => s.to_vec(),
            };
            slots.sort();
            got.push((i, slots));
            true
        });
        assert_eq!(got.len(), fps.len());
        for (k, (i, slots_at_once)) in got.into_iter().enumerate() {
            assert_eq!(k, i);
            let mut one = slots(&p, fps[i]);
            one.sort();
            assert_eq!(slots_at_once, one, "fingerprint {}", fps[i]);
        }
        // Stopping early.
        let mut calls = 0;
        p.with_many(&fps, |_, _| {
            calls += 1;
            calls < 70
        });
        assert_eq!(calls, 70);
    }

    /// Many documents at once fill the same buckets, slots in the same
    /// order, with the same counts, as inserting them one by one.
    #[test]
    fn inserting_many_at_once_equals_one_by_one() {
        let (one, many) = (Postings::default(), Postings::default());
        let docs: Vec<(Slot, Vec<u32>)> = (0..400u32)
            .map(|slot| {
                (
                    slot * 3,
                    (0..30).map(|k| (slot * 11 + k * 5) % 900).collect(),
                )
            })
            .collect();
        for (slot, fps) in &docs {
            one.insert(*slot, fps.iter().copied());
        }
        many.insert_many_fingerprints(docs.iter().map(|(slot, fps)| (*slot, fps.iter().copied())));
        for fp in 0..900 {
            assert_eq!(slots(&one, fp), slots(&many, fp), "fingerprint {fp}");
        }
        for (slot, _) in &docs {
            assert_eq!(one.count(*slot), many.count(*slot));
            assert_eq!(one.shared(*slot), many.shared(*slot), "slot {slot}");
        }
        assert_eq!((one.keys(), one.fewest()), (many.keys(), many.fewest()));
    }

    /// A slot's parts in [`SlotLists`] are the parts after it of the lists
    /// its fingerprints' lookups give (held by two to `common_at`
    /// documents; slots at or past the span left out; each list sorted by
    /// fingerprint count, then slot), the empty ones left out; its common
    /// count and its count match too.
    #[test]
    fn slot_lists_are_each_slots_lookups_turned_around() {
        let p = Postings::default();
        // Documents of 20 to 29 fingerprints, so that counts differ.
        let fps = |slot: u32| -> Vec<u32> {
            (0..20 + slot % 10)
                .map(|k| (slot * 5 + k * 3) % 400)
                .collect()
        };
        for slot in 0..150u32 {
            p.insert(slot, fps(slot).into_iter());
        }
        // A fingerprint every document holds, and some removed documents.
        for slot in 0..150u32 {
            p.insert(slot + 1000, [9999].into_iter());
        }
        for slot in (0..150u32).step_by(7) {
            p.remove(slot, fps(slot).into_iter());
        }
        let (span, common_at) = (140, 12);
        let lists = p.slot_lists(span, common_at);
        let key = |s: Slot| (p.count(s), s);
        for slot in 0..span as u32 {
            let mut want: Vec<Vec<Slot>> = Vec::new();
            let mut common = 0;
            if slot % 7 != 0 {
                p.with_many(&fps(slot), |_, b| {
                    match b {
                        Some(Bucket::Many(many)) if many.len() > common_at => common += 1,
                        Some(Bucket::Many(many)) => {
                            let mut list: Vec<Slot> =
                                many.iter().copied().filter(|&s| s < span as Slot).collect();
                            list.sort_unstable_by_key(|&s| key(s));
                            let at = list.iter().position(|&s| s == slot).unwrap();
                            if at + 1 < list.len() {
                                want.push(list[at + 1..].to_vec());
                            }
                        }
                        _ => {}
                    }
                    true
                });
            }
            let mut got: Vec<Vec<Slot>> = lists
                .after(slot)
                .iter()
                .map(|&l| lists.slots(l).to_vec())
                .collect();
            want.sort();
            got.sort();
            assert_eq!(got, want, "slot {slot}");
            assert_eq!(lists.common(slot), common, "slot {slot}");
            assert_eq!(lists.count(slot), p.count(slot), "slot {slot}");
        }
        assert!(lists.after(span as u32).is_empty() && lists.after(1005).is_empty());
    }

    #[test]
    fn shared_counts_only_what_another_document_holds() {
        let p = Postings::default();
        p.insert(1, [10, 20, 30].into_iter());
        assert_eq!(p.shared(1), 0);
        p.insert(2, [20, 40].into_iter());
        assert_eq!((p.shared(1), p.shared(2)), (1, 1));
        p.insert(3, [20, 30, 50].into_iter());
        assert_eq!((p.shared(1), p.shared(2), p.shared(3)), (2, 1, 2));
        assert_eq!(p.fewest(), 2);
        // A removal resets the slot's own count; its partners' stay high.
        p.remove(3, [20, 30, 50].into_iter());
        assert_eq!((p.shared(1), p.shared(3)), (2, 0));
        // Switching the index off forgets every count.
        p.clear();
        assert_eq!((p.shared(1), p.shared(2)), (0, 0));
    }

    #[test]
    fn slot_counts_cover_every_slot() {
        let c = SlotCounts::default();
        for slot in [0, 1, 1023, 1024, 3071, 3072, 1 << 20, (1 << 30) - 1] {
            c.set(slot, slot as usize % 1000 + 1);
        }
        for slot in [0, 1, 1023, 1024, 3071, 3072, 1 << 20, (1 << 30) - 1] {
            assert_eq!(c.get(slot), slot as usize % 1000 + 1, "slot {slot}");
        }
        assert_eq!(c.get(5), 0);
        c.set(7, 1 << 20);
        assert_eq!(c.get(7), u16::MAX as usize);
    }
}
