//! Choosing a recipe and a threshold from the user's own texts: the
//! histogram of exact pairwise Jaccard for several shingle sizes with a
//! suggested threshold (the "valley" method of the tutorials), the LSH
//! S-curve of a banding, and the accuracy of the MinHash estimate for
//! several signature sizes. Shared by `POST /analysis/...` and
//! `neardup analyze`, so both give the same numbers. Pure computation on
//! the current rayon pool; no I/O.
//!
//! - [`pairs`]: every pair that shares a shingle, from an inverted index;
//! - [`valley`]: the threshold advisor;
//! - [`histograms`] and [`accuracy`]: the two analyses.

pub mod pairs;
pub mod valley;

use crate::jaccard;
use crate::lsh::params::{candidate_probability, BandParams};
use crate::minhash::{self, MinHasher};
use crate::text::{NormalizeOptions, ShingleKind, ShingleOptions, TextError, Tokenizer};
use pairs::{bin_of, Overlaps, Stopped};
use rayon::prelude::*;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};

/// Pairs whose estimate error is measured, at most, per k: beyond that an
/// evenly spaced subset (every pair at or above the threshold is always
/// checked for a miss).
pub const MAX_ERROR_PAIRS: usize = 200_000;
/// Points of the S-curve: s = 0, 0.05, …, 1.
pub const S_CURVE_POINTS: usize = 21;
/// Most texts one analysis takes (5,000 texts are 12.5 million pairs; with
/// k = 1 nearly every pair shares a word, and the accuracy keeps each).
pub const MAX_TEXTS: usize = 5_000;
/// Most values of k and of num_perm in one analysis.
pub const MAX_VALUES: usize = 8;
/// Histogram bins: the default and the most.
pub const DEFAULT_BINS: usize = 20;
pub const MAX_BINS: usize = 100;
/// Shingle sizes compared when none are given.
pub const DEFAULT_KS: [usize; 4] = [1, 2, 3, 4];
/// Signature sizes measured when none are given.
pub const DEFAULT_NUM_PERMS: [usize; 5] = [16, 32, 64, 128, 256];

/// The recipe an analysis shingles with; `k` varies, the rest is the
/// collection's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Recipe {
    pub normalize: NormalizeOptions,
    pub kind: ShingleKind,
    pub multiset: bool,
    pub seed: u64,
}

impl Recipe {
    pub fn tokenizer(&self, k: usize) -> Tokenizer {
        Tokenizer::new(
            self.normalize,
            ShingleOptions {
                kind: self.kind,
                k,
                multiset: self.multiset,
            },
            self.seed,
        )
    }
}

/// Why an analysis has no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnalysisError {
    #[error(transparent)]
    Stopped(#[from] Stopped),
    /// Text `index` (0-based, in the order given) has nothing to shingle.
    #[error("text {index} has no words or characters left after normalization")]
    EmptyText { index: usize },
}

/// Finished units of work, for a progress bar: `done` of `total`.
pub type ProgressFn<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// The sorted, distinct shingle sets of `texts` with `k`, in parallel.
pub fn shingle_sets<S: AsRef<str> + Sync>(
    recipe: &Recipe,
    k: usize,
    texts: &[S],
    stop: &AtomicBool,
) -> Result<Vec<Vec<u32>>, AnalysisError> {
    let tokenizer = recipe.tokenizer(k);
    texts
        .par_iter()
        .enumerate()
        .map(|(index, t)| {
            if stop.load(Ordering::Relaxed) {
                return Err(AnalysisError::Stopped(Stopped));
            }
            match tokenizer.shingles(t.as_ref()) {
                Ok(set) => Ok(set.as_slice().to_vec()),
                Err(TextError::Empty) => Err(AnalysisError::EmptyText { index }),
            }
        })
        .collect()
}

/// One bin of a histogram: `[lo, hi)`, the last `[lo, 1]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bin {
    pub lo: f64,
    pub hi: f64,
    pub count: u64,
}

/// A point of the LSH S-curve: the candidate probability `p` at Jaccard `s`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CurvePoint {
    pub s: f64,
    pub p: f64,
}

/// The histogram of exact pairwise Jaccard for one k, and what it suggests.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Histogram {
    pub k: usize,
    pub pairs: u64,
    pub bins: Vec<Bin>,
    pub suggested_threshold: Option<f64>,
    pub why: String,
    pub s_curve: Vec<CurvePoint>,
    /// Candidate probability at the suggested threshold under the banding.
    pub recall_at_suggested: Option<f64>,
}

/// The LSH S-curve `1 − (1 − sʳ)ᵇ` at s = 0, 0.05, …, 1.
pub fn s_curve(bands: usize, rows: usize) -> Vec<CurvePoint> {
    (0..S_CURVE_POINTS)
        .map(|i| {
            let s = i as f64 / (S_CURVE_POINTS - 1) as f64;
            CurvePoint {
                s,
                p: candidate_probability(s, bands, rows),
            }
        })
        .collect()
}

/// Pair counts of `bins` equal-width Jaccard bins over every pair of `sets`.
pub fn pair_counts(
    sets: &[Vec<u32>],
    bins: usize,
    stop: &AtomicBool,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<u64>, Stopped> {
    let overlaps = Overlaps::new(sets);
    let n = sets.len();
    overlaps.fold_rows(
        stop,
        progress,
        || vec![0u64; bins],
        |counts, i, met| {
            let len_i = sets[i].len() as u64;
            for &(j, c) in met {
                let (c, len_j) = (u64::from(c), sets[j as usize].len() as u64);
                counts[bin_of(c, len_i + len_j - c, bins)] += 1;
            }
            // Pairs never met share nothing: Jaccard 0.
            counts[0] += (n - 1 - i - met.len()) as u64;
        },
        |mut a, b| {
            a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
            a
        },
    )
}

/// Content scores in an analysis: boilerplate decided within the analysed
/// texts by a collection's rule (`index.boilerplate`): a shingle held by at
/// least `max(min_docs, ⌈share · n⌉)` of the `n` texts (once `n` reaches
/// `min_collection_docs`), or by a template, is left out of every set.
#[derive(Clone, Debug, Default)]
pub struct ContentRule {
    pub share: f64,
    pub min_docs: usize,
    pub min_collection_docs: usize,
    /// The collection's templates' texts (shingled with each k analysed).
    pub templates: Vec<String>,
}

impl ContentRule {
    /// `sets` without their boilerplate shingles (`k` the shingle size).
    pub fn apply(&self, recipe: &Recipe, k: usize, sets: &mut [Vec<u32>]) {
        let tokenizer = recipe.tokenizer(k);
        let mut common: std::collections::HashSet<u32> = self
            .templates
            .iter()
            .filter_map(|t| tokenizer.shingles(t).ok())
            .flat_map(|s| s.as_slice().to_vec())
            .collect();
        let n = sets.len();
        if n >= self.min_collection_docs.max(1) {
            let at = ((self.share * n as f64 - 1e-9).ceil().max(0.0) as usize).max(self.min_docs);
            let mut df: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
            for s in sets.iter() {
                for &x in s {
                    *df.entry(x).or_insert(0) += 1;
                }
            }
            common.extend(df.into_iter().filter(|&(_, d)| d >= at).map(|(x, _)| x));
        }
        if common.is_empty() {
            return;
        }
        sets.par_iter_mut()
            .for_each(|s| s.retain(|x| !common.contains(x)));
    }
}

/// The histogram, suggestion and S-curve for each k in `ks`, under the
/// banding (`bands`, `rows`); with `content`, of the content Jaccard.
#[allow(clippy::too_many_arguments)]
pub fn histograms<S: AsRef<str> + Sync>(
    recipe: &Recipe,
    texts: &[S],
    ks: &[usize],
    bins: usize,
    (bands, rows): (usize, usize),
    content: Option<&ContentRule>,
    stop: &AtomicBool,
    progress: ProgressFn<'_>,
) -> Result<Vec<Histogram>, AnalysisError> {
    let n = texts.len() as u64;
    let total = n * ks.len() as u64;
    let mut out = Vec::with_capacity(ks.len());
    for (step, &k) in ks.iter().enumerate() {
        let mut sets = shingle_sets(recipe, k, texts, stop)?;
        if let Some(rule) = content {
            rule.apply(recipe, k, &mut sets);
        }
        let base = step as u64 * n;
        let counts = pair_counts(&sets, bins, stop, &|done| progress(base + done, total))?;
        let suggestion = valley::suggest(&counts);
        out.push(Histogram {
            k,
            pairs: counts.iter().sum(),
            bins: counts
                .iter()
                .enumerate()
                .map(|(i, &count)| Bin {
                    lo: i as f64 / bins as f64,
                    hi: (i + 1) as f64 / bins as f64,
                    count,
                })
                .collect(),
            recall_at_suggested: suggestion
                .threshold
                .map(|t| candidate_probability(t, bands, rows)),
            suggested_threshold: suggestion.threshold,
            why: suggestion.why,
            s_curve: s_curve(bands, rows),
        });
    }
    Ok(out)
}

/// The estimate's accuracy for one (num_perm, k).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AccuracyRow {
    pub num_perm: usize,
    pub k: usize,
    /// Pairs sharing at least one shingle (disjoint pairs estimate exactly
    /// 0: the permutations are bijections, so disjoint sets never share a
    /// minimum).
    pub sharing_pairs: u64,
    /// Of those, the pairs the errors are measured on (all, or an evenly
    /// spaced [`MAX_ERROR_PAIRS`]).
    pub measured_pairs: u64,
    /// The mean and 95th percentile of |estimate − exact| over the
    /// measured pairs; `None` when there are none (no error was measured:
    /// 0 would claim a perfect estimate).
    pub mean_abs_error: Option<f64>,
    pub p95_abs_error: Option<f64>,
    /// The banding our recall rule gives for `num_perm` at the threshold,
    /// `None` when no banding reaches it.
    pub bands: Option<usize>,
    pub rows: Option<usize>,
    /// Pairs with exact Jaccard at or above the threshold.
    pub pairs_at_threshold: u64,
    /// Of those, the pairs that share no band: the LSH would never make
    /// them candidates (`None` without a banding).
    pub missed: Option<u64>,
}

/// A pair that shares shingles: (i, j, exact Jaccard).
type SharingPair = (u32, u32, f64);

/// Accuracy of the MinHash estimate for each (num_perm, k), and the pairs
/// at or above `threshold` that the banding for num_perm would miss.
pub fn accuracy<S: AsRef<str> + Sync>(
    recipe: &Recipe,
    texts: &[S],
    ks: &[usize],
    num_perms: &[usize],
    threshold: f64,
    stop: &AtomicBool,
    progress: ProgressFn<'_>,
) -> Result<Vec<AccuracyRow>, AnalysisError> {
    let n = texts.len() as u64;
    let total = n * ks.len() as u64 * (1 + num_perms.len() as u64);
    let mut out = Vec::with_capacity(ks.len() * num_perms.len());
    for (step, &k) in ks.iter().enumerate() {
        let sets = shingle_sets(recipe, k, texts, stop)?;
        let base = step as u64 * n * (1 + num_perms.len() as u64);
        let sharing: Vec<SharingPair> = Overlaps::new(&sets).fold_rows(
            stop,
            &|done| progress(base + done, total),
            Vec::new,
            |acc, i, met| {
                let len_i = sets[i].len();
                acc.extend(met.iter().map(|&(j, c)| {
                    let union = len_i + sets[j as usize].len() - c as usize;
                    (i as u32, j, c as f64 / union as f64)
                }))
            },
            |mut a, b| {
                a.extend(b);
                a
            },
        )?;
        let stride = sharing.len().div_ceil(MAX_ERROR_PAIRS).max(1);
        let at_threshold: Vec<&SharingPair> = sharing.iter().filter(|p| p.2 >= threshold).collect();
        for (m, &num_perm) in num_perms.iter().enumerate() {
            let hasher = MinHasher::new(num_perm, recipe.seed);
            let signatures: Vec<Box<[u32]>> = sets
                .par_iter()
                .map(|s| {
                    if stop.load(Ordering::Relaxed) {
                        Err(Stopped)
                    } else {
                        Ok(hasher.sign(s))
                    }
                })
                .collect::<Result<_, _>>()?;
            progress(base + n * (2 + m as u64), total);
            let mut errors: Vec<f64> = sharing
                .par_iter()
                .step_by(stride)
                .map(|&(i, j, exact)| {
                    (minhash::estimate(&signatures[i as usize], &signatures[j as usize]) - exact)
                        .abs()
                })
                .collect();
            errors.par_sort_unstable_by(f64::total_cmp);
            let banding = BandParams::resolve(threshold, num_perm, None, None).ok();
            let missed = banding.map(|b| {
                at_threshold
                    .iter()
                    .filter(|&&&(i, j, _)| {
                        let (x, y) = (&signatures[i as usize], &signatures[j as usize]);
                        !(0..b.bands).any(|band| {
                            let r = band * b.rows..(band + 1) * b.rows;
                            x[r.clone()] == y[r]
                        })
                    })
                    .count() as u64
            });
            out.push(AccuracyRow {
                num_perm,
                k,
                sharing_pairs: sharing.len() as u64,
                measured_pairs: errors.len() as u64,
                mean_abs_error: (!errors.is_empty())
                    .then(|| errors.iter().sum::<f64>() / errors.len() as f64),
                p95_abs_error: (!errors.is_empty()).then(|| percentile(&errors, 0.95)),
                bands: banding.map(|b| b.bands),
                rows: banding.map(|b| b.rows),
                pairs_at_threshold: at_threshold.len() as u64,
                missed,
            });
        }
    }
    Ok(out)
}

/// The `q` quantile of sorted `values` (nearest rank), 0 when empty.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Exact Jaccard of every pair by merging sets: the brute-force reference
/// for the inverted index (tests, and small samples).
pub fn brute_force_counts(sets: &[Vec<u32>], bins: usize) -> Vec<u64> {
    let mut counts = vec![0u64; bins];
    for i in 0..sets.len() {
        for j in i + 1..sets.len() {
            let o = jaccard::overlap(&sets[i], &sets[j]);
            counts[bin_of(o.intersection as u64, o.union as u64, bins)] += 1;
        }
    }
    counts
}

#[cfg(test)]
mod tests;
