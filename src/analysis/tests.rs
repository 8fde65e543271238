use super::*;
use crate::testkit::families;

fn recipe(kind: ShingleKind) -> Recipe {
    Recipe {
        normalize: NormalizeOptions::default(),
        kind,
        multiset: false,
        seed: 1,
    }
}

fn no_progress(_: u64, _: u64) {}

fn texts(corpus: &[(String, String)]) -> Vec<&str> {
    corpus.iter().map(|(_, t)| t.as_str()).collect()
}

#[test]
fn examples_md_three_documents_fall_in_the_bins_derived_by_hand() {
    let docs = [
        "The night is dark and the moon is red.",
        "I can see moon is red, the night is dark.",
        "The moon in the night is red.",
    ];
    let stop = AtomicBool::new(false);
    let h = histograms(
        &recipe(ShingleKind::Word),
        &docs,
        &[3],
        4,
        (21, 6),
        None,
        &stop,
        &no_progress,
    )
    .unwrap();
    // 0.25 → [0.25, 0.5); 1/11 and 1/12 → [0, 0.25).
    let counts: Vec<u64> = h[0].bins.iter().map(|b| b.count).collect();
    assert_eq!(counts, [2, 1, 0, 0]);
    assert_eq!(h[0].pairs, 3);
    assert_eq!((h[0].bins[3].lo, h[0].bins[3].hi), (0.75, 1.0));
}

#[test]
fn inverted_index_counts_equal_a_brute_force_merge_of_every_pair() {
    let corpus = families(11, 120, 12);
    let stop = AtomicBool::new(false);
    for kind in [ShingleKind::Word, ShingleKind::Char] {
        for k in 1..=4 {
            let sets = shingle_sets(&recipe(kind), k, &texts(&corpus), &stop).unwrap();
            for bins in [1, 7, 20] {
                let fast = pair_counts(&sets, bins, &stop, &|_| {}).unwrap();
                assert_eq!(fast, brute_force_counts(&sets, bins), "{kind:?} k={k}");
                let n = sets.len() as u64;
                assert_eq!(fast.iter().sum::<u64>(), n * (n - 1) / 2);
            }
        }
    }
}

#[test]
fn the_advisor_finds_the_valley_with_planted_near_duplicates_and_none_without() {
    let stop = AtomicBool::new(false);
    let planted = families(5, 300, 30);
    let h = histograms(
        &recipe(ShingleKind::Word),
        &texts(&planted),
        &[2, 3],
        20,
        (21, 6),
        None,
        &stop,
        &no_progress,
    )
    .unwrap();
    for hist in &h {
        let t = hist
            .suggested_threshold
            .unwrap_or_else(|| panic!("k={}: {}", hist.k, hist.why));
        assert!((0.1..0.9).contains(&t), "k={} {t}: {}", hist.k, hist.why);
        assert!(hist.why.contains("near-duplicate mode"), "{}", hist.why);
        let recall = hist.recall_at_suggested.unwrap();
        assert_eq!(recall, candidate_probability(t, 21, 6));
    }
    let unrelated = families(5, 330, 0);
    let h = histograms(
        &recipe(ShingleKind::Word),
        &texts(&unrelated),
        &[1, 2, 3],
        20,
        (21, 6),
        None,
        &stop,
        &no_progress,
    )
    .unwrap();
    for hist in &h {
        assert_eq!(hist.suggested_threshold, None, "k={}: {}", hist.k, hist.why);
        assert_eq!(hist.recall_at_suggested, None);
        assert!(!hist.why.is_empty());
    }
}

#[test]
fn the_s_curve_is_the_banding_probability() {
    let c = s_curve(21, 6);
    assert_eq!(c.len(), 21);
    assert_eq!((c[0].s, c[0].p), (0.0, 0.0));
    assert_eq!((c[20].s, c[20].p), (1.0, 1.0));
    assert!((c[16].p - 0.998).abs() < 0.001, "{:?}", c[16]);
    assert!(c.windows(2).all(|w| w[0].p <= w[1].p));
}

#[test]
fn estimate_error_shrinks_with_more_hash_values_and_misses_are_counted() {
    let corpus = families(3, 150, 25);
    let stop = AtomicBool::new(false);
    let rows = accuracy(
        &recipe(ShingleKind::Word),
        &texts(&corpus),
        &[1, 3],
        &[16, 256],
        0.8,
        &stop,
        &no_progress,
    )
    .unwrap();
    assert_eq!(rows.len(), 4);
    for k in [1, 3] {
        let of = |m: usize| rows.iter().find(|r| r.k == k && r.num_perm == m).unwrap();
        let (small, large) = (of(16), of(256));
        assert!(small.measured_pairs > 0);
        assert_eq!(small.sharing_pairs, large.sharing_pairs);
        let mean_p95 = |r: &AccuracyRow| (r.mean_abs_error.unwrap(), r.p95_abs_error.unwrap());
        let ((small_mean, small_p95), (large_mean, large_p95)) = (mean_p95(small), mean_p95(large));
        assert!(
            large_mean < small_mean,
            "k={k}: {large_mean} vs {small_mean}"
        );
        assert!(large_p95 < small_p95);
        assert!(small_p95 >= small_mean * 0.5);
        // The banding for 256 at 0.8 and how many of the pairs at or
        // above 0.8 it misses (the recall rule targets 0.99).
        assert!(large.bands.is_some() && large.rows.is_some());
        let missed = large.missed.unwrap();
        assert!(missed <= large.pairs_at_threshold / 10 + 1, "{large:?}");
    }
    // Word 3-shingles: planted families are at or above 0.8.
    assert!(rows.iter().any(|r| r.k == 3 && r.pairs_at_threshold > 10));
}

#[test]
fn an_empty_text_is_named_by_its_position() {
    let stop = AtomicBool::new(false);
    let r = shingle_sets(&recipe(ShingleKind::Word), 2, &["a b", "…", "c"], &stop);
    assert_eq!(r, Err(AnalysisError::EmptyText { index: 1 }));
}

#[test]
fn percentiles_use_the_nearest_rank() {
    let v: Vec<f64> = (1..=100).map(f64::from).collect();
    assert_eq!(percentile(&v, 0.95), 95.0);
    assert_eq!(percentile(&[0.5], 0.95), 0.5);
    assert_eq!(percentile(&[], 0.95), 0.0);
}
