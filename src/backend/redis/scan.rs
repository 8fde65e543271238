//! The scan path of [`RedisIndex`]: every pair of live stored documents
//! at or above a threshold, each once, without holding the collection in
//! memory (docs/redis-layout.md, "`/duplicates` without the corpus in one
//! node"), read band by band. Writes during the scan may or may not be in
//! it.

use super::codec::members;
use super::{BackendError, Conn, RedisIndex, SCAN_READ};
use crate::engine::{Record, ScanStats, Threshold};
use std::collections::HashMap;
use std::sync::Arc;

/// A verified pair of a whole-collection scan (`a` < `b` by id).
#[derive(Clone, Debug)]
pub struct ScanPair {
    pub a: Arc<Record>,
    pub b: Arc<Record>,
    pub jaccard: f64,
}

/// A record met by a scan: the version its buckets must name, its band keys.
struct Scanned {
    record: Arc<Record>,
    gen: u32,
    band_keys: Vec<u64>,
}

impl RedisIndex {
    /// Every pair of live stored documents whose exact Jaccard is at least
    /// `threshold`, each once, without holding the collection in memory
    /// (docs/redis-layout.md, "`/duplicates` without the corpus in one node").
    /// Band by band: the band's bucket hashes are read whole (one trip),
    /// fields with two or more members name candidate pairs, the records
    /// of those members are read (trips of `SCAN_READ`), members whose
    /// `gen` is not their record's are stale and skipped, and a pair is
    /// verified only in the lowest band where the two collide (recomputed
    /// from both signatures): each pair once, with nothing remembered
    /// between bands but the result. Writes during the scan may or may not
    /// be in it.
    pub async fn scan_pairs(
        &self,
        threshold: Threshold,
    ) -> Result<(Vec<ScanPair>, ScanStats), BackendError> {
        let bands = self.engine.bands().bands;
        let groups = 1u64 << self.keys.group_bits();
        let t = threshold.value();
        let now = self.engine.now_ms();
        let mut pairs = Vec::new();
        let mut candidates = 0usize;
        let mut live_documents = 0usize;
        for band in 0..bands {
            let commands: Vec<_> = (0..groups)
                .map(|g| {
                    let hash = self.keys.group_key(band, g);
                    move |mut c: Conn| async move {
                        let mut all = redis::cmd("HGETALL");
                        all.arg(hash);
                        all.query_async::<Vec<(Vec<u8>, Vec<u8>)>>(&mut c).await
                    }
                })
                .collect();
            let hashes = self
                .redis
                .trip("reading a band's buckets", commands)
                .await?;
            let mut all: Vec<Vec<(u64, u32)>> = hashes
                .into_iter()
                .flatten()
                .map(|(_, value)| members(&value).collect::<Vec<_>>())
                .collect();
            // Band 0 holds every document once: its records are all read,
            // to count the live ones (`documents`); in the other bands only
            // those sharing a bucket.
            let every = band == 0;
            let mut gens_of: HashMap<u64, Vec<u32>> = HashMap::new();
            if every {
                for &(i, g) in all.iter().flatten() {
                    gens_of.entry(i).or_default().push(g);
                }
            }
            let mut iids: Vec<u64> = all
                .iter()
                .filter(|m| every || m.len() >= 2)
                .flatten()
                .map(|&(i, _)| i)
                .collect();
            all.retain(|m| m.len() >= 2);
            let buckets = all;
            let mut paired: std::collections::HashSet<u64> = std::collections::HashSet::new();
            if every {
                paired.extend(buckets.iter().flatten().map(|&(i, _)| i));
            }
            iids.sort_unstable();
            iids.dedup();
            let mut current: HashMap<u64, Scanned> = HashMap::new();
            for chunk in iids.chunks(SCAN_READ) {
                let records = self.read_records(chunk).await?;
                for (&i, stored) in chunk.iter().zip(records) {
                    let Some(stored) = stored else { continue };
                    let gen = stored.gen;
                    let record = self.to_record(stored)?;
                    if !self.engine.is_live(&record, now) {
                        continue;
                    }
                    if every {
                        if gens_of.get(&i).is_some_and(|g| g.contains(&gen)) {
                            live_documents += 1;
                        }
                        if !paired.contains(&i) {
                            continue;
                        }
                    }
                    let band_keys = self.engine.band_keys(record.signature());
                    current.insert(
                        i,
                        Scanned {
                            record,
                            gen,
                            band_keys,
                        },
                    );
                }
            }
            for bucket in &buckets {
                let live: Vec<&Scanned> = bucket
                    .iter()
                    .filter_map(|(i, g)| current.get(i).filter(|s| s.gen == *g))
                    .collect();
                for (x, a) in live.iter().enumerate() {
                    for b in &live[x + 1..] {
                        if a.record.id() == b.record.id()
                            || (0..band).any(|lower| a.band_keys[lower] == b.band_keys[lower])
                        {
                            continue;
                        }
                        candidates += 1;
                        let (sa, sb) = (a.record.shingles(), b.record.shingles());
                        if let Some(jaccard) = crate::jaccard::at_least(sa, sb, t) {
                            let (a, b) = if a.record.id() < b.record.id() {
                                (a, b)
                            } else {
                                (b, a)
                            };
                            pairs.push(ScanPair {
                                a: Arc::clone(&a.record),
                                b: Arc::clone(&b.record),
                                jaccard,
                            });
                        }
                    }
                }
            }
        }
        let stats = ScanStats {
            documents: live_documents,
            candidates,
            pairs: pairs.len(),
            excluded: 0,
            complete: true,
        };
        Ok((pairs, stats))
    }
}
