//! Precision measured from moderators' labels: per score band, with a
//! Wilson interval, and the lowest threshold the labels support.
//!
//! A *label* is a decision with the pair's score on the measure asked for
//! (Jaccard, the larger containment, or content Jaccard): a decision
//! without scores (a document was not stored when it was decided) has no
//! score and is left out. Bands are `width` wide from 0 to 1 (the last one
//! ends at 1 and holds 1); a label falls in the band whose `[lo, hi)` holds
//! its score. *Related* counts as a duplicate or not as the caller says.
//!
//! The suggestion (`Precision::suggested`) is the lowest band edge `t` such that the
//! labels scoring at least `t`, pooled, have a Wilson lower bound of at
//! least `target`, and every band from `t` up that has labels has a point
//! precision of at least `target`; its figures are those of the pooled
//! labels. None unless at least `min_labels` labels have a score.
//!
//! Pure: no I/O.

use super::{Decision, Verdict};

/// The normal quantile of a two-sided 95 % interval.
pub const Z95: f64 = 1.96;

/// Narrowest band width.
pub const MIN_WIDTH: f64 = 0.01;
/// Widest band width.
pub const MAX_WIDTH: f64 = 0.5;
/// Band width when none is asked for.
pub const DEFAULT_WIDTH: f64 = 0.05;
/// Precision the suggestion aims at when none is asked for.
pub const DEFAULT_TARGET: f64 = 0.95;
/// Labels needed before a threshold is suggested, when not asked.
pub const DEFAULT_MIN_LABELS: usize = 30;

/// The Wilson score interval of `successes` out of `n` at normal quantile
/// `z`: `(lo, hi)`, within [0, 1]. `n = 0` has no interval: `(0, 1)`.
pub fn wilson(successes: usize, n: usize, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let n = n as f64;
    let p = successes as f64 / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    // At p = 0 or 1 the bound on that side is exactly p (not a rounding off it).
    let lo = if successes == 0 {
        0.0
    } else {
        (center - half).max(0.0)
    };
    let hi = if p == 1.0 {
        1.0
    } else {
        (center + half).min(1.0)
    };
    (lo, hi)
}

/// Which score of a pair the labels are banded by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelScore {
    /// Exact Jaccard of the shingle sets.
    Jaccard,
    /// The larger of the two containments.
    Containment,
    /// Jaccard over content shingles (boilerplate left out).
    ContentJaccard,
}

impl LabelScore {
    /// The score `d` was decided at, if it was recorded.
    pub fn of(self, d: &Decision) -> Option<f64> {
        let s = d.scores.as_ref()?;
        match self {
            LabelScore::Jaccard => Some(s.jaccard),
            LabelScore::Containment => Some(s.containment),
            LabelScore::ContentJaccard => s.content_jaccard,
        }
    }
}

/// How a *related* verdict counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RelatedAs {
    /// Not a duplicate (the strict reading, the default).
    #[default]
    NotDuplicate,
    /// A duplicate.
    Duplicate,
}

/// Score bands of one width from 0 to 1. The edges are rounded to ten
/// decimals, so `0.85` is an edge of 0.05 bands (not 0.8500000000000001),
/// and a score falls in a band by those edges.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bands {
    width: f64,
    count: usize,
}

/// A width outside [`MIN_WIDTH`], [`MAX_WIDTH`] (or not a number).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("width must be between {MIN_WIDTH} and {MAX_WIDTH}, got {0}")]
pub struct BadWidth(pub f64);

fn round_edge(x: f64) -> f64 {
    (x * 1e10).round() / 1e10
}

impl Bands {
    pub fn new(width: f64) -> Result<Self, BadWidth> {
        if !(MIN_WIDTH..=MAX_WIDTH).contains(&width) {
            return Err(BadWidth(width));
        }
        // Bands until one reaches 1 (the last may be narrower).
        let mut count = (1.0 / width).floor() as usize;
        if round_edge(count as f64 * width) < 1.0 {
            count += 1;
        }
        Ok(Self { width, count })
    }

    pub fn width(&self) -> f64 {
        self.width
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The lower edge of band `i`.
    pub fn lo(&self, i: usize) -> f64 {
        round_edge(i as f64 * self.width)
    }

    /// The upper edge of band `i` (1 for the last).
    pub fn hi(&self, i: usize) -> f64 {
        if i + 1 >= self.count {
            1.0
        } else {
            self.lo(i + 1)
        }
    }

    /// The band that holds `score` (clamped into [0, 1]).
    pub fn of(&self, score: f64) -> usize {
        let s = if score.is_nan() {
            0.0
        } else {
            score.clamp(0.0, 1.0)
        };
        let mut i = ((s / self.width).floor() as usize).min(self.count - 1);
        // Float division may land one off the rounded edges: settle by them.
        while i + 1 < self.count && self.lo(i + 1) <= s {
            i += 1;
        }
        while i > 0 && self.lo(i) > s {
            i -= 1;
        }
        i
    }
}

/// Precision in one band.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct BandPrecision {
    pub lo: f64,
    pub hi: f64,
    pub labels: usize,
    pub duplicates: usize,
    pub related: usize,
    pub not_duplicates: usize,
    /// Share judged duplicates (with *related* as asked); `None` without labels.
    pub precision: Option<f64>,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

impl BandPrecision {
    fn successes(&self, related: RelatedAs) -> usize {
        match related {
            RelatedAs::Duplicate => self.duplicates + self.related,
            RelatedAs::NotDuplicate => self.duplicates,
        }
    }
}

/// The threshold the labels support, with the pooled figures above it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Suggestion {
    pub threshold: f64,
    /// Labels scoring at least `threshold`.
    pub labels: usize,
    pub precision: f64,
    pub low: f64,
    pub high: f64,
    /// "at 0.6, precision 0.97 ± 0.02 from 140 labels".
    pub why: String,
}

/// Precision per band and the suggestion, from a collection's decisions.
#[derive(Clone, Debug, PartialEq)]
pub struct Precision {
    /// Decisions with a score on the measure.
    pub labels: usize,
    pub bands: Vec<BandPrecision>,
    pub suggested: Option<Suggestion>,
}

/// What to measure.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrecisionSpec {
    pub by: LabelScore,
    pub bands: Bands,
    pub related: RelatedAs,
    pub target: f64,
    pub min_labels: usize,
}

/// Precision of `decisions` per band of `spec.bands`, and the suggestion.
pub fn precision<'a>(
    decisions: impl IntoIterator<Item = &'a Decision>,
    spec: &PrecisionSpec,
) -> Precision {
    let b = spec.bands;
    let mut bands: Vec<BandPrecision> = (0..b.len())
        .map(|i| BandPrecision {
            lo: b.lo(i),
            hi: b.hi(i),
            labels: 0,
            duplicates: 0,
            related: 0,
            not_duplicates: 0,
            precision: None,
            low: None,
            high: None,
        })
        .collect();
    let mut labels = 0;
    for d in decisions {
        let Some(score) = spec.by.of(d) else {
            continue;
        };
        labels += 1;
        let band = &mut bands[b.of(score)];
        band.labels += 1;
        match d.verdict {
            Verdict::Duplicate => band.duplicates += 1,
            Verdict::Related => band.related += 1,
            Verdict::NotDuplicate => band.not_duplicates += 1,
        }
    }
    for band in &mut bands {
        if band.labels > 0 {
            let k = band.successes(spec.related);
            let (lo, hi) = wilson(k, band.labels, Z95);
            band.precision = Some(k as f64 / band.labels as f64);
            band.low = Some(lo);
            band.high = Some(hi);
        }
    }
    let suggested = if labels >= spec.min_labels && labels > 0 {
        suggest(&bands, spec.related, spec.target)
    } else {
        None
    };
    Precision {
        labels,
        bands,
        suggested,
    }
}

/// The lowest band edge whose pooled labels from it up reach `target` by
/// their Wilson lower bound, with no labelled band from it up below
/// `target` by its point precision.
fn suggest(bands: &[BandPrecision], related: RelatedAs, target: f64) -> Option<Suggestion> {
    // From the top down: the pooled counts of bands i.. and whether each
    // labelled band from i up is at least `target`.
    let mut best = None;
    let (mut n, mut k) = (0usize, 0usize);
    let mut all_above = true;
    for band in bands.iter().rev() {
        n += band.labels;
        k += band.successes(related);
        if let Some(p) = band.precision {
            all_above &= p >= target;
        }
        if !all_above {
            break;
        }
        if n == 0 {
            continue;
        }
        let (lo, hi) = wilson(k, n, Z95);
        if lo >= target {
            best = Some((band.lo, n, k, lo, hi));
        }
    }
    best.map(|(threshold, n, k, low, high)| {
        let precision = k as f64 / n as f64;
        let plus_minus = (high - low) / 2.0;
        Suggestion {
            threshold,
            labels: n,
            precision,
            low,
            high,
            why: format!(
                "at {}, precision {:.2} ± {:.2} from {n} labels",
                trim(threshold),
                precision,
                plus_minus
            ),
        }
    })
}

/// `x` with no trailing zeros (0.6, 0.65, 1).
fn trim(x: f64) -> String {
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::sample::SplitMix64;
    use crate::review::{DecisionScores, PairKey};

    fn label(i: usize, jaccard: f64, verdict: Verdict) -> Decision {
        let k = PairKey::new(&format!("a{i}"), &format!("b{i}")).unwrap();
        Decision {
            a: k.a,
            b: k.b,
            verdict,
            note: None,
            decided_by: None,
            decided_at: "2026-11-29T00:00:00.000Z".into(),
            revision: 1,
            scores: Some(DecisionScores {
                jaccard,
                containment: (jaccard + 0.1).min(1.0),
                content_jaccard: None,
            }),
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 5e-5
    }

    #[test]
    fn wilson_matches_hand_computations() {
        // 9/10, z = 1.96: z² = 3.8416, z²/n = 0.38416, denominator 1.38416;
        // centre (0.9 + 0.19208) / 1.38416 = 0.788984;
        // half 1.96 / 1.38416 · √(0.9·0.1/10 + 3.8416/400)
        //    = 1.416021 · √0.018604 = 0.193141 → [0.5958, 0.9821].
        let (lo, hi) = wilson(9, 10, Z95);
        assert!(close(lo, 0.5958) && close(hi, 0.9821), "{lo} {hi}");
        // 0/5: centre (0 + 3.8416/10) / 1.76832 = 0.217245, half the same
        // (p = 0: √(3.8416/100)·1.96/1.76832 = 0.217245) → [0, 0.4345].
        let (lo, hi) = wilson(0, 5, Z95);
        assert!(close(lo, 0.0) && close(hi, 0.4345), "{lo} {hi}");
        // 11/12: z²/n = 0.320133, denominator 1.320133; centre
        // (0.916667 + 0.160067) / 1.320133 = 0.815626; half
        // 1.96 / 1.320133 · √(0.916667·0.083333/12 + 3.8416/576)
        //   = 1.484699 · √(0.0063657 + 0.0066694) = 1.484699 · 0.114172
        //   = 0.169511 → [0.6461, 0.9851].
        let (lo, hi) = wilson(11, 12, Z95);
        assert!(close(lo, 0.6461) && close(hi, 0.9851), "{lo} {hi}");
        assert_eq!(wilson(0, 0, Z95), (0.0, 1.0));
    }

    #[test]
    fn the_interval_holds_the_estimate_and_narrows_with_more_labels() {
        let mut rng = SplitMix64::new(46);
        for _ in 0..2000 {
            let n = 1 + (rng.next_u64() % 500) as usize;
            let k = (rng.next_u64() % (n as u64 + 1)) as usize;
            let p = k as f64 / n as f64;
            let (lo, hi) = wilson(k, n, Z95);
            assert!(0.0 <= lo && lo <= p && p <= hi && hi <= 1.0, "{k}/{n}");
            // The same share from four times the labels: a narrower interval.
            let (lo4, hi4) = wilson(4 * k, 4 * n, Z95);
            assert!(hi4 - lo4 < hi - lo, "{k}/{n}: {lo4}..{hi4} vs {lo}..{hi}");
        }
    }

    #[test]
    fn bands_hold_their_lower_edge_and_the_last_holds_one() {
        let b = Bands::new(0.05).unwrap();
        assert_eq!(b.len(), 20);
        assert_eq!((b.lo(17), b.hi(17)), (0.85, 0.9));
        assert_eq!(b.of(0.85), 17);
        assert_eq!(b.of(0.8499999), 16);
        assert_eq!(b.of(1.0), 19);
        assert_eq!(b.of(0.0), 0);
        let b = Bands::new(0.3).unwrap();
        assert_eq!(b.len(), 4);
        assert_eq!((b.lo(3), b.hi(3)), (0.9, 1.0));
        assert_eq!(b.of(0.6), 2);
        let b = Bands::new(0.01).unwrap();
        assert_eq!(b.len(), 100);
        for i in 0..100 {
            assert_eq!(b.of(b.lo(i)), i, "edge {}", b.lo(i));
        }
        assert!(Bands::new(0.005).is_err());
        assert!(Bands::new(0.6).is_err());
        assert!(Bands::new(f64::NAN).is_err());
    }

    fn spec(width: f64, related: RelatedAs, target: f64, min_labels: usize) -> PrecisionSpec {
        PrecisionSpec {
            by: LabelScore::Jaccard,
            bands: Bands::new(width).unwrap(),
            related,
            target,
            min_labels,
        }
    }

    #[test]
    fn precision_per_band_counts_each_verdict_and_related_as_asked() {
        let mut ds = Vec::new();
        // Band [0.6, 0.65): 11 duplicates and 1 not a duplicate.
        for i in 0..11 {
            ds.push(label(i, 0.61, Verdict::Duplicate));
        }
        ds.push(label(11, 0.64, Verdict::NotDuplicate));
        // Band [0.9, 0.95): 2 related, 2 duplicates.
        ds.push(label(12, 0.9, Verdict::Related));
        ds.push(label(13, 0.93, Verdict::Related));
        ds.push(label(14, 0.94, Verdict::Duplicate));
        ds.push(label(15, 0.91, Verdict::Duplicate));
        // No scores: not a label.
        let mut none = label(16, 0.5, Verdict::Duplicate);
        none.scores = None;
        ds.push(none);
        let p = precision(&ds, &spec(0.05, RelatedAs::NotDuplicate, 0.95, 30));
        assert_eq!(p.labels, 16);
        let b = &p.bands[12];
        assert_eq!(
            (b.lo, b.hi, b.labels, b.duplicates, b.not_duplicates),
            (0.6, 0.65, 12, 11, 1)
        );
        // 11/12 = 0.916667, Wilson [0.6461, 0.9851] (computed above).
        assert!(close(b.precision.unwrap(), 0.9167));
        assert!(close(b.low.unwrap(), 0.6461) && close(b.high.unwrap(), 0.9851));
        let b = &p.bands[18];
        assert_eq!((b.labels, b.duplicates, b.related), (4, 2, 2));
        assert_eq!(b.precision, Some(0.5));
        assert_eq!(p.bands[0].precision, None);
        assert_eq!(p.bands[0].low, None);
        // Fewer labels than min_labels: no suggestion.
        assert_eq!(p.suggested, None);
        let p = precision(&ds, &spec(0.05, RelatedAs::Duplicate, 0.95, 30));
        assert_eq!(p.bands[18].precision, Some(1.0));
        // On containment (jaccard + 0.1 here): the same labels two bands up.
        let mut s = spec(0.05, RelatedAs::NotDuplicate, 0.95, 30);
        s.by = LabelScore::Containment;
        let p = precision(&ds, &s);
        assert_eq!((p.bands[14].labels, p.bands[12].labels), (12, 0));
        s.by = LabelScore::ContentJaccard;
        assert_eq!(precision(&ds, &s).labels, 0);
    }

    #[test]
    fn the_suggestion_is_the_lowest_edge_the_pooled_labels_support() {
        let mut ds = Vec::new();
        let mut i = 0;
        let mut add = |ds: &mut Vec<Decision>, n: usize, j: f64, v: Verdict| {
            for _ in 0..n {
                ds.push(label(i, j, v));
                i += 1;
            }
        };
        // [0.9, 1]: 60 duplicates. [0.8, 0.9): 40 duplicates.
        // [0.7, 0.8): 19 duplicates, 1 not (0.95: on target by its point).
        // [0.6, 0.7): 5 duplicates, 5 not.
        add(&mut ds, 60, 0.95, Verdict::Duplicate);
        add(&mut ds, 40, 0.85, Verdict::Duplicate);
        add(&mut ds, 19, 0.75, Verdict::Duplicate);
        add(&mut ds, 1, 0.72, Verdict::NotDuplicate);
        add(&mut ds, 5, 0.65, Verdict::Duplicate);
        add(&mut ds, 5, 0.61, Verdict::NotDuplicate);
        let p = precision(&ds, &spec(0.1, RelatedAs::NotDuplicate, 0.95, 30));
        // At 0.7: 119/120 pooled, p = 0.991667; z²/n = 0.032013,
        // denominator 1.032013, centre (0.991667 + 0.016007) / 1.032013
        // = 0.976413, half 1.96 / 1.032013 · √(0.991667·0.008333/120
        // + 3.8416/57600) = 1.899201 · √(0.00006887 + 0.00006669)
        // = 1.899201 · 0.011643 = 0.022113 → low 0.9543 ≥ 0.95, and every
        // band from 0.7 up is at least 0.95. At 0.6 the band [0.6, 0.7) is
        // at 0.5: not supported.
        let s = p.suggested.expect("a suggestion");
        assert_eq!((s.threshold, s.labels), (0.7, 120));
        assert!(
            close(s.precision, 0.991667) && close(s.low, 0.9543),
            "{s:?}"
        );
        assert_eq!(
            s.why,
            format!(
                "at 0.7, precision 0.99 ± {:.2} from 120 labels",
                (s.high - s.low) / 2.0
            )
        );
        // A target the pooled labels at 0.7 miss (0.96 > 0.9543): the next edge up,
        // 0.8: 100/100, Wilson low 1 − (centre − half)… = 0.9630.
        let p = precision(&ds, &spec(0.1, RelatedAs::NotDuplicate, 0.96, 30));
        let s = p.suggested.expect("a suggestion");
        assert_eq!((s.threshold, s.labels), (0.8, 100));
        // 100/100: z²/n = 0.038416, centre (1 + 0.019208) / 1.038416
        // = 0.981502, half 1.96 / 1.038416 · √(3.8416/40000) = 0.018498
        // → low 0.9630.
        assert!(close(s.low, 0.9630), "{s:?}");
        // Too few labels asked for: none.
        assert_eq!(
            precision(&ds, &spec(0.1, RelatedAs::NotDuplicate, 0.95, 131)).suggested,
            None
        );
        // A band above an edge under target by its point precision rules the
        // edge out even when the pooled labels from it reach the target:
        // [0.9, 1] at 18/20 = 0.9; from 0.8, 318/320 pooled (low 0.9775).
        let mut ds = Vec::new();
        add(&mut ds, 18, 0.95, Verdict::Duplicate);
        add(&mut ds, 2, 0.92, Verdict::NotDuplicate);
        add(&mut ds, 300, 0.85, Verdict::Duplicate);
        let p = precision(&ds, &spec(0.1, RelatedAs::NotDuplicate, 0.95, 30));
        assert!(wilson(318, 320, Z95).0 > 0.95);
        assert_eq!(p.suggested, None);
    }
}
