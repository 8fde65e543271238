//! The band buckets: `band key → slots`, one concurrent map for all bands.
//!
//! Keys mix the band number with its r rows through a fixed 64-bit mixer
//! seeded by `index.seed`, so a table rebuilt from stored signatures after a
//! restart is identical. A key collision only adds a false candidate, which
//! exact verification removes.
//!
//! **Memory.** Most buckets hold one document, so a bucket is an enum of
//! one inline slot or a boxed vector: 16 bytes, 24 with its key. The map uses
//! the key itself as its hash (keys are already mixed), so no hasher runs.
//!
//! **Concurrency.** `DashMap` shards the table behind many `RwLock`s; every
//! operation touches one bucket at a time and never holds a guard while
//! taking another, so there is no lock ordering to get wrong.

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use nohash_hasher::BuildNoHashHasher;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Internal document handle stored in buckets.
pub type Slot = u32;

enum Bucket {
    One(Slot),
    // Boxed on purpose: a thin pointer keeps the enum at 16 bytes (a bare
    // Vec would make every bucket 32), and most buckets are `One`.
    #[allow(clippy::box_collection)]
    Many(Box<Vec<Slot>>),
}

pub struct LshIndex {
    bands: usize,
    rows: usize,
    seed: u64,
    /// Every band's buckets; the band number is part of the key.
    buckets: DashMap<u64, Bucket, BuildNoHashHasher<u64>>,
    /// Slots held in `Many` vectors (for the memory report).
    spilled_slots: AtomicUsize,
}

impl std::fmt::Debug for LshIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LshIndex")
            .field("bands", &self.bands)
            .field("rows", &self.rows)
            .field("buckets", &self.buckets.len())
            .finish()
    }
}

const BAND_SALT: u64 = 0x6c73_6862_616e_6473;

impl LshIndex {
    pub fn new(bands: usize, rows: usize, seed: u64) -> Self {
        assert!(bands > 0 && rows > 0);
        Self {
            bands,
            rows,
            seed: seed ^ BAND_SALT,
            buckets: DashMap::with_hasher(BuildNoHashHasher::default()),
            spilled_slots: AtomicUsize::new(0),
        }
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

    fn keys<'a>(&'a self, signature: &'a [u32]) -> impl Iterator<Item = u64> + 'a {
        debug_assert!(signature.len() >= self.bands * self.rows);
        (0..self.bands).map(move |band| self.band_key(signature, band))
    }

    pub fn insert(&self, slot: Slot, signature: &[u32]) {
        for key in self.keys(signature) {
            match self.buckets.entry(key) {
                Entry::Vacant(e) => {
                    e.insert(Bucket::One(slot));
                }
                Entry::Occupied(mut e) => match e.get_mut() {
                    b @ Bucket::One(_) => {
                        let Bucket::One(first) = *b else {
                            unreachable!()
                        };
                        *b = Bucket::Many(Box::new(vec![first, slot]));
                        self.spilled_slots.fetch_add(2, Ordering::Relaxed);
                    }
                    Bucket::Many(v) => {
                        v.push(slot);
                        self.spilled_slots.fetch_add(1, Ordering::Relaxed);
                    }
                },
            }
        }
    }

    pub fn remove(&self, slot: Slot, signature: &[u32]) {
        for key in self.keys(signature) {
            let Entry::Occupied(mut e) = self.buckets.entry(key) else {
                continue;
            };
            match e.get_mut() {
                Bucket::One(s) if *s == slot => {
                    e.remove();
                }
                Bucket::One(_) => {}
                Bucket::Many(v) => {
                    if let Some(pos) = v.iter().position(|&s| s == slot) {
                        v.swap_remove(pos);
                        self.spilled_slots.fetch_sub(1, Ordering::Relaxed);
                        if v.len() == 1 {
                            let last = v[0];
                            self.spilled_slots.fetch_sub(1, Ordering::Relaxed);
                            *e.get_mut() = Bucket::One(last);
                        }
                    }
                }
            }
        }
    }

    /// Append every slot sharing a band with `signature` to `out` (with
    /// repeats; the caller sorts and dedups). Returns false if more than
    /// `cap` slots were found, in which case `out` keeps the first `cap`.
    pub fn candidates(&self, signature: &[u32], out: &mut Vec<Slot>, cap: usize) -> bool {
        for key in self.keys(signature) {
            if let Some(bucket) = self.buckets.get(&key) {
                match &*bucket {
                    Bucket::One(s) => out.push(*s),
                    Bucket::Many(v) => out.extend_from_slice(v),
                }
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
        self.buckets.len()
    }

    /// Approximate heap bytes: table capacity plus spilled vectors.
    pub fn heap_bytes(&self) -> usize {
        let entry = std::mem::size_of::<(u64, Bucket)>() + 1; // + hashbrown control byte
        let spilled = self.spilled_slots.load(Ordering::Relaxed);
        self.buckets.capacity() * entry + spilled * std::mem::size_of::<Slot>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Bucket>(), 16);
    }

    #[test]
    fn identical_signatures_collide_in_every_band() {
        let idx = LshIndex::new(4, 2, 1);
        let sig = [1, 2, 3, 4, 5, 6, 7, 8];
        idx.insert(10, &sig);
        idx.insert(11, &sig);
        let mut out = Vec::new();
        assert!(idx.candidates(&sig, &mut out, usize::MAX));
        out.sort_unstable();
        assert_eq!(out, vec![10, 10, 10, 10, 11, 11, 11, 11]);
    }

    #[test]
    fn one_shared_band_is_enough_and_removal_cleans_up() {
        let idx = LshIndex::new(2, 2, 1);
        idx.insert(1, &[1, 2, 3, 4]);
        idx.insert(2, &[9, 9, 3, 4]);
        let mut out = Vec::new();
        idx.candidates(&[0, 0, 3, 4], &mut out, usize::MAX);
        out.sort_unstable();
        assert_eq!(out, vec![1, 2]);
        idx.remove(1, &[1, 2, 3, 4]);
        idx.remove(2, &[9, 9, 3, 4]);
        assert_eq!(idx.bucket_count(), 0);
        assert_eq!(idx.spilled_slots.load(Ordering::Relaxed), 0);
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
}
