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

use crate::lsh::table::{Bucket, Table};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

pub use crate::lsh::index::Slot;

const SHARD_BITS: u32 = 8;
const SHARDS: usize = 1 << SHARD_BITS;
const MIX: u64 = 0x7061_7373_6167_6573;

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
}

impl Default for Postings {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
        }
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
        for fp in fingerprints {
            let (shard, key) = place(fp);
            self.shards[shard].write().insert(key, slot);
        }
    }

    pub(crate) fn remove(&self, slot: Slot, fingerprints: impl Iterator<Item = u32>) {
        for fp in fingerprints {
            let (shard, key) = place(fp);
            self.shards[shard].write().remove(key, slot);
        }
    }

    /// Documents holding `fp`: calls `f` with the bucket (under the
    /// shard's read lock; `f` must not call back into the index).
    #[inline]
    pub(crate) fn with<R>(&self, fp: u32, f: impl FnOnce(Option<Bucket<'_>>) -> R) -> R {
        let (shard, key) = place(fp);
        let table = self.shards[shard].read();
        f(table.get(key))
    }

    /// Drop every entry (the index was switched off).
    pub(crate) fn clear(&self) {
        for shard in self.shards.iter() {
            *shard.write() = Table::default();
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
    }
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
}
