//! The threshold advisor: the deepest valley between the "unrelated" mode
//! and the "near-duplicate" mode of a histogram of pairwise Jaccard.
//!
//! On a sample of real texts the histogram has a huge mode of unrelated
//! pairs at low similarity and, if the data holds near-duplicates, a
//! second, small mode near 1. A threshold anywhere in the valley between
//! them separates the two on this sample; the advisor takes the middle of
//! the deepest part of it, leaving a margin on both sides.
//!
//! - The **low mode** L is the bin with the most pairs (the first, on a tie).
//! - A **near-duplicate mode** is a bin H at least two bins above L that
//!   holds at least [`MIN_MODE_PAIRS`] pairs and at least twice as many as
//!   the emptiest bin between L and H (a bump in a falling tail is noise,
//!   not a mode). Of those, the one with the most pairs (the highest, on a
//!   tie).
//! - The **valley** is the bins strictly between L and H holding the fewest
//!   pairs; of their runs of consecutive bins, the widest (the one nearest
//!   H, on a tie). The suggested threshold is the middle of that run.
//!
//! Without such a mode the answer is `None`, with the reason.

/// Fewest pairs a bin needs to count as the near-duplicate mode.
pub const MIN_MODE_PAIRS: u64 = 3;

/// A suggested threshold (or none) and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Suggestion {
    pub threshold: Option<f64>,
    pub why: String,
}

fn edge(i: usize, bins: usize) -> f64 {
    i as f64 / bins as f64
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

fn bin_name(i: usize, bins: usize) -> String {
    let close = if i + 1 == bins { ']' } else { ')' };
    format!(
        "[{}, {}{close}",
        round4(edge(i, bins)),
        round4(edge(i + 1, bins))
    )
}

/// Suggest a threshold from the pair counts of equal-width bins over [0, 1].
pub fn suggest(counts: &[u64]) -> Suggestion {
    let bins = counts.len();
    let none = |why: String| Suggestion {
        threshold: None,
        why,
    };
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return none("no pairs to compare: the sample has fewer than two texts".into());
    }
    let low = (0..bins)
        .max_by(|&a, &b| counts[a].cmp(&counts[b]).then(b.cmp(&a)))
        .expect("at least one bin");
    let mut best: Option<(usize, u64)> = None;
    let mut valley = u64::MAX;
    for h in low + 2..bins {
        valley = valley.min(counts[h - 1]);
        let c = counts[h];
        if c >= MIN_MODE_PAIRS && c >= 2 * valley && best.is_none_or(|(b, _)| c >= counts[b]) {
            best = Some((h, valley));
        }
    }
    let Some((high, depth)) = best else {
        let above: u64 = counts[low + 1..].iter().sum();
        let why = if low + 2 >= bins {
            format!(
                "the most common similarity is {} ({} of {total} pairs), too near the top for a near-duplicate mode above it",
                bin_name(low, bins),
                counts[low]
            )
        } else if above == 0 {
            format!(
                "every pair is at or below the low mode {} ({} pairs): nothing above it to separate",
                bin_name(low, bins),
                counts[low]
            )
        } else {
            format!(
                "the counts fall from the low mode {} ({} pairs) without a second mode: no bin above it holds {MIN_MODE_PAIRS} or more pairs and twice the emptiest bin below it ({above} pairs above the low mode in all)",
                bin_name(low, bins),
                counts[low]
            )
        };
        return none(why);
    };
    // Runs of bins at the valley's depth between the modes: the widest,
    // nearest the near-duplicate mode on a tie.
    let mut run: Option<(usize, usize)> = None;
    let mut start = None;
    for (i, &c) in counts.iter().enumerate().take(high + 1).skip(low + 1) {
        let at_depth = i < high && c == depth;
        match (at_depth, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                if run.is_none_or(|(a, b)| i - s >= b + 1 - a) {
                    run = Some((s, i - 1));
                }
                start = None;
            }
            _ => {}
        }
    }
    let (first, last) = run.expect("the valley has a bin at its depth");
    let threshold = round4((edge(first, bins) + edge(last + 1, bins)) / 2.0);
    Suggestion {
        threshold: Some(threshold),
        why: format!(
            "low mode {} holds {} pairs; near-duplicate mode {} holds {} pairs; the deepest valley between them is {} with {depth} pairs per bin; {threshold} is its middle",
            bin_name(low, bins),
            counts[low],
            bin_name(high, bins),
            counts[high],
            if first == last {
                bin_name(first, bins)
            } else {
                format!(
                    "[{}, {})",
                    round4(edge(first, bins)),
                    round4(edge(last + 1, bins))
                )
            },
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_middle_of_the_empty_valley_is_suggested() {
        let mut c = vec![0u64; 20];
        c[0] = 1_990_000;
        c[1] = 4000;
        c[2] = 30;
        c[17] = 12;
        c[18] = 25;
        c[19] = 9;
        let s = suggest(&c);
        // Valley: bins 3..=16 empty, [0.15, 0.85): middle 0.5.
        assert_eq!(s.threshold, Some(0.5), "{}", s.why);
        assert!(s.why.contains("[0.9, 0.95)"), "{}", s.why);
        assert!(s.why.contains("25 pairs"), "{}", s.why);
    }

    #[test]
    fn the_deepest_bin_wins_over_a_shallow_one() {
        let c = [100, 50, 10, 2, 9, 40, 30, 5, 12, 3];
        // Near-duplicate mode: bin 5 (40 ≥ 2·2); the valley is bin 3.
        let s = suggest(&c);
        assert_eq!(s.threshold, Some(0.35), "{}", s.why);
    }

    #[test]
    fn a_falling_tail_or_a_single_pair_is_no_mode() {
        let s = suggest(&[1000, 300, 80, 20, 5, 1, 0, 0, 1, 0]);
        assert_eq!(s.threshold, None);
        assert!(s.why.contains("without a second mode"), "{}", s.why);
        let s = suggest(&[5000, 0, 0, 0, 0]);
        assert_eq!(s.threshold, None);
        assert!(s.why.contains("nothing above"), "{}", s.why);
        let s = suggest(&[0, 0, 0, 1, 7]);
        assert_eq!(s.threshold, None);
        assert!(s.why.contains("too near the top"), "{}", s.why);
        let s = suggest(&[0, 0, 0]);
        assert!(s.why.contains("fewer than two texts"), "{}", s.why);
    }
}
