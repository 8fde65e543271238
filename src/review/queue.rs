//! The review queue's arithmetic: which bands it samples, how many pairs
//! each band needs, the pairs a walk found (each pair once, decided pairs
//! skipped) and the order a page hands them out in.
//!
//! **Stratified, and where labels are fewest.** The queue's bands are the
//! precision bands ([`Bands`]) from the one holding `from` up to 1. A page
//! is filled one item at a time from the band with the fewest labels so
//! far (its decisions plus the items already on the page), ties to the
//! higher band, among the bands that still have pairs: labels end up
//! covering every band, and the next label goes where precision is least
//! known. [`quotas`] is the same filling with unlimited pairs: how many a
//! walk must find in each band before the page can be filled exactly as it
//! would be from every pair (the walk's stopping rule).
//!
//! Pure: no I/O; the walk itself is `service::review`.

use super::precision::Bands;
use super::{DecisionSet, PairKey};
use std::collections::HashSet;

/// The bands a queue samples: `bands` from the one holding `from` up.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueueBands {
    pub bands: Bands,
    /// The first band sampled (the one holding `from`).
    pub first: usize,
}

impl QueueBands {
    pub fn new(bands: Bands, from: f64) -> Self {
        Self {
            bands,
            first: bands.of(from),
        }
    }

    /// Bands sampled.
    pub fn len(&self) -> usize {
        self.bands.len() - self.first
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The queue band (0 = the lowest sampled) of `score`; `None` below `from`'s band.
    pub fn of(&self, score: f64) -> Option<usize> {
        self.bands.of(score).checked_sub(self.first)
    }

    /// `(lo, hi)` of queue band `i`.
    pub fn edges(&self, i: usize) -> (f64, f64) {
        (self.bands.lo(self.first + i), self.bands.hi(self.first + i))
    }
}

/// The next band to take from: the fewest `counts` among `open` bands,
/// ties to the higher band.
fn neediest(counts: &[usize], open: impl Fn(usize) -> bool) -> Option<usize> {
    (0..counts.len())
        .rev()
        .filter(|&i| open(i))
        .min_by_key(|&i| counts[i])
}

/// How many items a page of `limit` takes from each band when every band
/// has pairs enough, given each band's `labels`.
pub fn quotas(labels: &[usize], limit: usize) -> Vec<usize> {
    let mut counts = labels.to_vec();
    let mut taken = vec![0; labels.len()];
    for _ in 0..limit {
        let Some(i) = neediest(&counts, |_| true) else {
            break;
        };
        counts[i] += 1;
        taken[i] += 1;
    }
    taken
}

/// A pair the walk found.
#[derive(Clone, Debug, PartialEq)]
pub struct FoundPair {
    pub key: PairKey,
    /// The pair's score on the queue's measure.
    pub score: f64,
}

/// The undecided pairs a walk has found, by band, in the order found.
#[derive(Debug)]
pub struct Found {
    bands: QueueBands,
    by_band: Vec<Vec<FoundPair>>,
    seen: HashSet<PairKey>,
}

impl Found {
    pub fn new(bands: QueueBands) -> Self {
        Self {
            bands,
            by_band: vec![Vec::new(); bands.len()],
            seen: HashSet::new(),
        }
    }

    /// Keep the pair of `x` and `y` at `score` unless it was found before,
    /// is decided, pairs a document with itself or falls below the bands.
    pub fn add(&mut self, x: &str, y: &str, score: f64, decided: &DecisionSet) -> bool {
        let Some(band) = self.bands.of(score) else {
            return false;
        };
        let Ok(key) = PairKey::new(x, y) else {
            return false;
        };
        if decided.get(&key.a, &key.b).is_some() || self.seen.contains(&key) {
            return false;
        }
        self.seen.insert(key.clone());
        self.by_band[band].push(FoundPair { key, score });
        true
    }

    /// Pairs found in each band.
    pub fn counts(&self) -> Vec<usize> {
        self.by_band.iter().map(Vec::len).collect()
    }

    /// Whether every band has at least its quota.
    pub fn meets(&self, quotas: &[usize]) -> bool {
        self.by_band
            .iter()
            .zip(quotas)
            .all(|(found, &quota)| found.len() >= quota)
    }

    /// A page of at most `limit` pairs, interleaved across bands by
    /// `labels` (see the module doc), each with its queue band.
    pub fn page(&self, labels: &[usize], limit: usize) -> Vec<(usize, &FoundPair)> {
        let mut counts = labels.to_vec();
        let mut next = vec![0usize; self.by_band.len()];
        let mut page = Vec::with_capacity(limit);
        while page.len() < limit {
            let Some(i) = neediest(&counts, |i| next[i] < self.by_band[i].len()) else {
                break;
            };
            page.push((i, &self.by_band[i][next[i]]));
            next[i] += 1;
            counts[i] += 1;
        }
        page
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::{Decision, Verdict};

    fn bands(from: f64) -> QueueBands {
        QueueBands::new(Bands::new(0.1).unwrap(), from)
    }

    #[test]
    fn the_queue_samples_from_the_band_of_from_up() {
        let q = bands(0.55);
        assert_eq!((q.first, q.len()), (5, 5));
        assert_eq!(q.edges(0), (0.5, 0.6));
        assert_eq!(q.edges(4), (0.9, 1.0));
        assert_eq!(q.of(0.5), Some(0));
        assert_eq!(q.of(0.49), None);
        assert_eq!(q.of(1.0), Some(4));
    }

    #[test]
    fn quotas_fill_the_bands_with_fewest_labels_first_ties_to_the_higher() {
        // No labels: one each from the top down, then again.
        assert_eq!(quotas(&[0, 0, 0], 4), [1, 1, 2]);
        // Labels 5, 0, 2: band 1 takes two to reach band 2, then ties go up.
        assert_eq!(quotas(&[5, 0, 2], 5), [0, 3, 2]);
        assert_eq!(quotas(&[], 5), Vec::<usize>::new());
    }

    #[test]
    fn found_pairs_are_kept_once_and_decided_ones_skipped() {
        let decided = DecisionSet::new([Decision {
            a: "b".into(),
            b: "ж".into(),
            verdict: Verdict::Duplicate,
            note: None,
            decided_by: None,
            decided_at: "2026-11-29T00:00:00.000Z".into(),
            revision: 1,
            scores: None,
        }]);
        let mut f = Found::new(bands(0.5));
        assert!(f.add("a", "b", 0.95, &decided));
        assert!(
            !f.add("b", "a", 0.95, &decided),
            "the same pair from its other side"
        );
        assert!(!f.add("ж", "b", 0.7, &decided), "decided");
        assert!(!f.add("c", "c", 0.7, &decided));
        assert!(!f.add("c", "d", 0.3, &decided), "below the bands");
        assert!(f.add("c", "d", 0.55, &decided));
        assert!(f.add("c", "e", 0.56, &decided));
        assert!(f.add("d", "e", 0.71, &decided));
        assert_eq!(f.counts(), [2, 0, 1, 0, 1]);
        assert!(f.meets(&[1, 0, 1, 0, 1]));
        assert!(!f.meets(&[1, 1, 0, 0, 0]));
        // No labels: the top band first, then down, then band 0 again.
        let page: Vec<_> = f
            .page(&[0; 5], 10)
            .into_iter()
            .map(|(band, p)| (band, p.key.a.as_str(), p.key.b.as_str()))
            .collect();
        assert_eq!(
            page,
            [(4, "a", "b"), (2, "d", "e"), (0, "c", "d"), (0, "c", "e")]
        );
        // Labels in band 0 and 4: band 2 first.
        let page: Vec<_> = f
            .page(&[3, 0, 0, 0, 1], 2)
            .into_iter()
            .map(|(b, _)| b)
            .collect();
        assert_eq!(page, [2, 4]);
    }
}
