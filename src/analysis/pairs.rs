//! Every pair of a sample that shares at least one shingle, with the size
//! of its intersection, from an inverted index: no pair is merged.
//!
//! Most pairs of a real sample share no shingle at all (2,000 texts make
//! ~2 million pairs), so comparing every pair's sets would waste nearly all
//! of its work. Instead each shingle held by two or more texts gets a
//! posting list (the texts holding it, ascending), and row i walks the
//! posting lists of text i's shingles, counting, for each j > i met, how
//! many shingles it shares with i. The cost is Σ df²/2 over shingles (df:
//! texts holding it), independent of how many pairs share nothing; a pair
//! never met shares nothing, so its Jaccard is 0 without looking at it.
//! Rows run in parallel on the current rayon pool, each with its own
//! counters.

use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Stopped on request (the caller gave up waiting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the analysis was stopped")]
pub struct Stopped;

/// The inverted index of a sample's shingle sets.
pub struct Overlaps<'s> {
    sets: &'s [Vec<u32>],
    /// Posting list `g` is `docs[offsets[g]..offsets[g + 1]]`.
    offsets: Vec<u32>,
    docs: Vec<u32>,
    /// The posting lists of each text's shingles (shingles of one text only
    /// have none).
    lists: Vec<Vec<u32>>,
}

impl<'s> Overlaps<'s> {
    /// Index `sets` (each sorted and distinct).
    pub fn new(sets: &'s [Vec<u32>]) -> Self {
        let mut entries: Vec<u64> = sets
            .iter()
            .enumerate()
            .flat_map(|(d, set)| set.iter().map(move |&h| (u64::from(h) << 32) | d as u64))
            .collect();
        entries.par_sort_unstable();
        let mut offsets = vec![0u32];
        let mut docs = Vec::new();
        let mut lists = vec![Vec::new(); sets.len()];
        let mut i = 0;
        while i < entries.len() {
            let h = entries[i] >> 32;
            let mut j = i;
            while j < entries.len() && entries[j] >> 32 == h {
                j += 1;
            }
            if j - i >= 2 {
                let g = (offsets.len() - 1) as u32;
                for e in &entries[i..j] {
                    let d = (e & 0xffff_ffff) as u32;
                    docs.push(d);
                    lists[d as usize].push(g);
                }
                offsets.push(docs.len() as u32);
            }
            i = j;
        }
        Self {
            sets,
            offsets,
            docs,
            lists,
        }
    }

    pub fn texts(&self) -> usize {
        self.sets.len()
    }

    /// Every pair (i < j) of the sample.
    pub fn pairs(&self) -> u64 {
        let n = self.sets.len() as u64;
        n * n.saturating_sub(1) / 2
    }

    pub fn set(&self, i: usize) -> &[u32] {
        &self.sets[i]
    }

    /// For each row i (in parallel): `visit(i, met)` with every j > i that
    /// shares a shingle with i and the intersection size, then fold the
    /// rows' results with `merge`. Checks `stop` between rows; `progress`
    /// counts finished rows.
    pub fn fold_rows<T: Send>(
        &self,
        stop: &AtomicBool,
        progress: &(dyn Fn(u64) + Sync),
        init: impl Fn() -> T + Sync + Send,
        visit: impl Fn(&mut T, usize, &[(u32, u32)]) + Sync + Send,
        merge: impl Fn(T, T) -> T + Sync + Send,
    ) -> Result<T, Stopped> {
        let n = self.sets.len();
        let done = AtomicU64::new(0);
        let result = (0..n)
            .into_par_iter()
            .try_fold(
                || (init(), vec![0u32; n], Vec::new()),
                |(mut acc, mut counts, mut met), i| {
                    if stop.load(Ordering::Relaxed) {
                        return Err(Stopped);
                    }
                    for &g in &self.lists[i] {
                        let list = &self.docs[self.offsets[g as usize] as usize
                            ..self.offsets[g as usize + 1] as usize];
                        let after = list.partition_point(|&d| d as usize <= i);
                        for &j in &list[after..] {
                            let c = &mut counts[j as usize];
                            if *c == 0 {
                                met.push((j, 0));
                            }
                            *c += 1;
                        }
                    }
                    for m in met.iter_mut() {
                        m.1 = std::mem::take(&mut counts[m.0 as usize]);
                    }
                    visit(&mut acc, i, &met);
                    met.clear();
                    progress(done.fetch_add(1, Ordering::Relaxed) + 1);
                    Ok((acc, counts, met))
                },
            )
            .map(|r| r.map(|(acc, _, _)| acc))
            .try_reduce(&init, |a, b| Ok(merge(a, b)))?;
        Ok(result)
    }
}

/// The bin of Jaccard `c / u` among `bins` equal-width bins over [0, 1],
/// the last one closed: exact integer arithmetic, so 0.25 is never 0.2499….
pub fn bin_of(intersection: u64, union: u64, bins: usize) -> usize {
    if union == 0 {
        return 0;
    }
    ((intersection * bins as u64 / union) as usize).min(bins - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets(raw: &[&[u32]]) -> Vec<Vec<u32>> {
        raw.iter().map(|s| s.to_vec()).collect()
    }

    #[test]
    fn every_sharing_pair_is_met_once_with_its_intersection() {
        let s = sets(&[&[1, 2, 3], &[2, 3, 4], &[9], &[1, 3, 9]]);
        let o = Overlaps::new(&s);
        assert_eq!(o.pairs(), 6);
        let stop = AtomicBool::new(false);
        let mut met = o
            .fold_rows(
                &stop,
                &|_| {},
                Vec::new,
                |acc: &mut Vec<(usize, u32, u32)>, i, row| {
                    acc.extend(row.iter().map(|&(j, c)| (i, j, c)))
                },
                |mut a, b| {
                    a.extend(b);
                    a
                },
            )
            .unwrap();
        met.sort();
        assert_eq!(met, [(0, 1, 2), (0, 3, 2), (1, 3, 1), (2, 3, 1)]);
    }

    #[test]
    fn a_stop_request_ends_the_walk() {
        let s = sets(&[&[1], &[1], &[1]]);
        let stop = AtomicBool::new(true);
        let r = Overlaps::new(&s).fold_rows(&stop, &|_| {}, || 0, |_, _, _| {}, |a, b| a + b);
        assert_eq!(r, Err(Stopped));
    }

    #[test]
    fn bins_are_exact_and_the_last_is_closed() {
        assert_eq!(bin_of(1, 4, 4), 1);
        assert_eq!(bin_of(3, 10, 10), 3);
        assert_eq!(bin_of(5, 5, 20), 19);
        assert_eq!(bin_of(0, 7, 20), 0);
        assert_eq!(bin_of(1, 3, 3), 1);
    }
}
