//! What the engine's maps cost: the estimate behind `/stats` `memory` and
//! the `neardup_memory_bytes` gauges, meant to add up to the process's RSS
//! growth (allocator overhead and table slack included).

use super::{Current, Engine, Record};
use crate::lsh::index::Slot;
use std::sync::atomic::Ordering;

/// Bytes glibc's malloc takes for a block of `n` bytes: an 8-byte header,
/// rounded up to 16, at least 32 (the server's blocks over 512 bytes).
fn malloc_block(n: usize) -> usize {
    (n + 8).div_ceil(16).max(2) * 16
}

/// Bytes a small block (≤ 512 bytes) of `n` bytes takes in the server's
/// allocator (`src/allocator.rs`: mimalloc): 8-byte steps up to 64, then
/// four size classes per doubling.
pub(crate) fn small_block(n: usize) -> usize {
    if n <= 64 {
        return n.div_ceil(8).max(1) * 8;
    }
    let step = 1 << (usize::BITS - 1 - (n - 1).leading_zeros() - 2);
    n.div_ceil(step) * step
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
    /// Every record's bitmap of its passage fingerprints (kept whether or
    /// not the passage index is on, so it can be switched on at any time).
    pub fingerprints_bytes: usize,
    /// The passage index (`passage_index`; 0 while it is off).
    pub passage_index_bytes: usize,
    /// Document frequency (`index.boilerplate`; 0 while it is off).
    pub doc_frequency_bytes: usize,
    pub total_bytes: usize,
    /// What the index costs with no document in it (table shards and their
    /// first buckets): part of `total_bytes`, not of `bytes_per_document`.
    pub fixed_bytes: usize,
    /// `(total_bytes - fixed_bytes) / documents`: the cost of one more
    /// document, not skewed by the fixed part on a nearly empty index.
    pub bytes_per_document: f64,
}

impl Engine {
    /// Approximate memory by component, allocator overhead included: the
    /// figures are meant to add up to the process's RSS growth.
    pub fn memory(&self) -> MemoryStats {
        use std::mem::size_of;
        let docs = self.len();
        let shingle_values = self.shingle_values.load(Ordering::Relaxed);
        let shingles_bytes = shingle_values * 4;
        let signatures_bytes = docs * self.params().index.num_perm * 4;
        // An id of up to 23 bytes is inside the record and the `ids` entry
        // (their sizes below); a longer one is one `Arc<str>` block both
        // share (its two counters are in the rounding below).
        let id_bytes = self.id_bytes.load(Ordering::Relaxed);
        let heap_ids = self.heap_ids.load(Ordering::Relaxed);
        let ids_bytes = id_bytes;
        let metadata_bytes = self.metadata_bytes.load(Ordering::Relaxed);
        // Per document: the `Arc<Record>` block (a small block: mimalloc's
        // size classes), and the allocator's header and rounding on the
        // data block (glibc's) and on a long id's block (estimated from
        // the average sizes).
        let per_doc = |total: usize| total.checked_div(docs).unwrap_or(0);
        let fingerprints_bytes = self.selection_words.load(Ordering::Relaxed) * 4;
        let (passage_index_bytes, passage_fixed) = if self.passage_index() {
            (self.postings.heap_bytes(), self.postings.fixed_bytes())
        } else {
            (0, 0)
        };
        let doc_frequency_bytes = self.frequency_bytes();
        let fixed = self.fixed_bytes + self.lsh.fixed_bytes() + passage_fixed;
        let data = per_doc(signatures_bytes + shingles_bytes + fingerprints_bytes);
        let id = id_bytes.checked_div(heap_ids).unwrap_or(0);
        let arc_record = small_block(2 * size_of::<usize>() + size_of::<Record>());
        let rounding = malloc_block(data) - data;
        let id_rounding = small_block(2 * size_of::<usize>() + id) - id;
        let records_overhead_bytes = docs * (arc_record + rounding) + heap_ids * id_rounding;
        // hashbrown: capacity is 7/8 of the buckets; one control byte each.
        let id_map_bytes = self.ids.capacity() * 8 / 7 * (size_of::<(Current, Slot)>() + 1);
        let doc_map_bytes = self.docs.heap_bytes();
        let lsh_bytes = self.lsh.heap_bytes();
        let total_bytes = shingles_bytes
            + signatures_bytes
            + ids_bytes
            + metadata_bytes
            + records_overhead_bytes
            + id_map_bytes
            + doc_map_bytes
            + lsh_bytes
            + fingerprints_bytes
            + passage_index_bytes
            + doc_frequency_bytes;
        MemoryStats {
            shingles_bytes,
            signatures_bytes,
            ids_bytes,
            metadata_bytes,
            records_overhead_bytes,
            id_map_bytes,
            doc_map_bytes,
            lsh_bytes,
            fingerprints_bytes,
            passage_index_bytes,
            doc_frequency_bytes,
            total_bytes,
            fixed_bytes: fixed,
            bytes_per_document: if docs == 0 {
                0.0
            } else {
                total_bytes.saturating_sub(fixed) as f64 / docs as f64
            },
        }
    }

    /// Non-empty LSH buckets across all bands.
    pub fn lsh_bucket_count(&self) -> usize {
        self.lsh.bucket_count()
    }
}

#[cfg(test)]
mod tests {
    use super::small_block;

    #[test]
    fn small_blocks_round_to_mimalloc_size_classes() {
        let classes = [
            8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512,
        ];
        for n in 1..=512 {
            let class = *classes.iter().find(|&&c| c >= n).unwrap();
            assert_eq!(small_block(n), class, "{n} bytes");
        }
    }
}
