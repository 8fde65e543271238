//! Choosing (b, r): the service's recall rule and datasketch's optimum.
//!
//! **Our rule.** Exact verification removes every false positive, so the
//! index is tuned for recall: among all (b, r) with b · r ≤ num_perm, take the
//! largest r (the most selective curve, fewest wasted candidates) whose
//! candidate probability at the threshold is at least [`TARGET_RECALL`],
//! with b = ⌊num_perm / r⌋. For 128 slots at 0.8 that is (21, 6): recall
//! 0.998 at s = 0.8, where datasketch's (9, 13) finds only ~40% of such pairs.
//!
//! **datasketch's rule** (minimise equally weighted false-positive and
//! false-negative areas) is implemented too, as a documented reference and a
//! test against its published optima.

use serde::Serialize;

/// Candidate probability a pair at exactly the threshold must reach.
pub const TARGET_RECALL: f64 = 0.99;

/// Probability that a pair with Jaccard `s` shares at least one band.
pub fn candidate_probability(s: f64, bands: usize, rows: usize) -> f64 {
    1.0 - (1.0 - s.powi(rows as i32)).powi(bands as i32)
}

/// Banding parameters in force, with what they guarantee.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct BandParams {
    pub bands: usize,
    pub rows: usize,
    /// Candidate probability at the configured threshold.
    pub recall_at_threshold: f64,
    /// Lowest query threshold served: below it recall falls under
    /// [`TARGET_RECALL`] (never above the configured threshold itself).
    pub min_query_threshold: f64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamsError {
    #[error("index.threshold must be in (0, 1], got {0}")]
    ThresholdOutOfRange(f64),
    #[error("index.num_perm must be between 1 and 1024, got {0}")]
    NumPerm(usize),
    #[error(
        "index.bands ({bands}) × index.rows ({rows}) must be between 1 and index.num_perm ({num_perm})"
    )]
    BandsTimesRows {
        bands: usize,
        rows: usize,
        num_perm: usize,
    },
    #[error("{}", half_specified(*bands, *rows))]
    HalfSpecified {
        bands: Option<usize>,
        rows: Option<usize>,
    },
    #[error(
        "no banding of {num_perm} hash values reaches recall {TARGET_RECALL} at threshold {threshold}; \
         raise index.num_perm or the threshold"
    )]
    Unreachable { threshold: f64, num_perm: usize },
}

/// [`ParamsError::HalfSpecified`] in the settings' terms: which one is set
/// (and to what), which one is missing.
fn half_specified(bands: Option<usize>, rows: Option<usize>) -> String {
    let (set, value, unset) = match (bands, rows) {
        (Some(b), _) => ("index.bands", b, "index.rows"),
        (_, Some(r)) => ("index.rows", r, "index.bands"),
        (None, None) => return "set both index.bands and index.rows, or neither".to_owned(),
    };
    format!(
        "{set} is set ({value}) but {unset} is not: set both, or neither \
         (the banding is then derived from index.threshold and index.num_perm)"
    )
}

impl BandParams {
    /// Resolve (b, r): explicit values when both are given, else our recall rule.
    pub fn resolve(
        threshold: f64,
        num_perm: usize,
        bands: Option<usize>,
        rows: Option<usize>,
    ) -> Result<Self, ParamsError> {
        if !(threshold > 0.0 && threshold <= 1.0) {
            return Err(ParamsError::ThresholdOutOfRange(threshold));
        }
        if num_perm == 0 || num_perm > 1024 {
            return Err(ParamsError::NumPerm(num_perm));
        }
        let (bands, rows) = match (bands, rows) {
            (Some(b), Some(r)) => {
                if b == 0 || r == 0 || b.saturating_mul(r) > num_perm {
                    return Err(ParamsError::BandsTimesRows {
                        bands: b,
                        rows: r,
                        num_perm,
                    });
                }
                (b, r)
            }
            (None, None) => {
                for_recall(threshold, num_perm, TARGET_RECALL).ok_or(ParamsError::Unreachable {
                    threshold,
                    num_perm,
                })?
            }
            (bands, rows) => return Err(ParamsError::HalfSpecified { bands, rows }),
        };
        let s99 = similarity_at_probability(bands, rows, TARGET_RECALL);
        Ok(Self {
            bands,
            rows,
            recall_at_threshold: candidate_probability(threshold, bands, rows),
            min_query_threshold: s99.min(threshold),
        })
    }
}

/// Largest r (then largest b) with candidate probability ≥ `target` at `threshold`.
pub fn for_recall(threshold: f64, num_perm: usize, target: f64) -> Option<(usize, usize)> {
    (1..=num_perm)
        .rev()
        .map(|r| (num_perm / r, r))
        .find(|&(b, r)| candidate_probability(threshold, b, r) >= target)
}

/// The similarity at which the candidate probability equals `p` (bisection;
/// the curve is increasing in s).
pub fn similarity_at_probability(bands: usize, rows: usize, p: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..60 {
        let mid = (lo + hi) / 2.0;
        if candidate_probability(mid, bands, rows) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// datasketch's `_optimal_param`: minimise `fp_weight · FP + fn_weight · FN`,
/// where FP is the area under the candidate curve below the threshold and FN
/// the area above it that the curve misses.
pub fn datasketch_optimal(
    threshold: f64,
    num_perm: usize,
    fp_weight: f64,
    fn_weight: f64,
) -> (usize, usize) {
    let mut best = (f64::INFINITY, (1, 1));
    for b in 1..=num_perm {
        for r in 1..=num_perm / b {
            let fp = integrate(|s| candidate_probability(s, b, r), 0.0, threshold);
            let fn_ = integrate(|s| 1.0 - candidate_probability(s, b, r), threshold, 1.0);
            let err = fp * fp_weight + fn_ * fn_weight;
            if err < best.0 {
                best = (err, (b, r));
            }
        }
    }
    best.1
}

/// Composite Simpson's rule; the integrands are smooth polynomials.
fn integrate(f: impl Fn(f64) -> f64, a: f64, b: f64) -> f64 {
    const N: usize = 200;
    let h = (b - a) / N as f64;
    let mut sum = f(a) + f(b);
    for i in 1..N {
        let w = if i % 2 == 1 { 4.0 } else { 2.0 };
        sum += w * f(a + i as f64 * h);
    }
    sum * h / 3.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_tuning_at_point_eight_is_21_bands_of_6_rows() {
        let p = BandParams::resolve(0.8, 128, None, None).unwrap();
        assert_eq!((p.bands, p.rows), (21, 6));
        assert!((p.recall_at_threshold - 0.998).abs() < 0.001, "{p:?}");
        assert!(
            p.min_query_threshold < 0.8 && p.min_query_threshold > 0.75,
            "{p:?}"
        );
    }

    #[test]
    fn recall_rule_meets_the_target_everywhere() {
        for num_perm in [64, 128, 256] {
            for t in [0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0] {
                let p = BandParams::resolve(t, num_perm, None, None).unwrap();
                assert!(
                    p.recall_at_threshold >= TARGET_RECALL,
                    "{num_perm} {t} {p:?}"
                );
                assert!(p.bands * p.rows <= num_perm);
                // One more row would miss the target: r is the most selective choice.
                let r = p.rows + 1;
                if r <= num_perm {
                    assert!(candidate_probability(t, num_perm / r, r) < TARGET_RECALL);
                }
            }
        }
    }

    #[test]
    fn examples_md_probabilities() {
        assert!((candidate_probability(0.8, 9, 13) - 0.40).abs() < 0.01);
        assert!((candidate_probability(0.9, 9, 13) - 0.93).abs() < 0.01);
        assert!((candidate_probability(0.8, 21, 6) - 0.998).abs() < 0.001);
    }

    #[test]
    fn datasketch_optima_match_the_published_table() {
        let table = [
            (128, [(25, 5), (14, 9), (9, 13), (8, 16), (5, 25)]),
            (256, [(42, 6), (25, 10), (17, 15), (13, 19), (9, 28)]),
        ];
        for (num_perm, row) in table {
            for (t, expected) in [0.5, 0.7, 0.8, 0.85, 0.9].into_iter().zip(row) {
                assert_eq!(
                    datasketch_optimal(t, num_perm, 0.5, 0.5),
                    expected,
                    "n={num_perm} t={t}"
                );
            }
        }
    }

    #[test]
    fn explicit_bands_and_rows_override_and_are_validated() {
        let p = BandParams::resolve(0.8, 128, Some(9), Some(13)).unwrap();
        assert_eq!((p.bands, p.rows), (9, 13));
        assert!(p.recall_at_threshold < 0.5);
        assert!(p.min_query_threshold <= 0.8);
        assert!(matches!(
            BandParams::resolve(0.8, 128, Some(20), Some(7)),
            Err(ParamsError::BandsTimesRows { .. })
        ));
        assert!(matches!(
            BandParams::resolve(0.8, 128, Some(20), None),
            Err(ParamsError::HalfSpecified { .. })
        ));
    }

    #[test]
    fn bad_thresholds_and_unreachable_targets_are_errors() {
        assert!(BandParams::resolve(0.0, 128, None, None).is_err());
        assert!(BandParams::resolve(1.5, 128, None, None).is_err());
        assert!(BandParams::resolve(f64::NAN, 128, None, None).is_err());
        assert!(matches!(
            BandParams::resolve(0.01, 128, None, None),
            Err(ParamsError::Unreachable { .. })
        ));
    }
}
