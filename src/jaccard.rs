//! Exact Jaccard similarity of sorted, distinct 32-bit shingle sets.
//!
//! This is the verifier behind every answer and the oracle in tests. A linear
//! merge handles sets of similar size; when one side is much larger the
//! smaller side gallops (exponential + binary search) through the larger, so
//! a short query against a huge stored document costs O(m log n).

/// Intersection and union sizes of two sorted, distinct slices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overlap {
    pub intersection: usize,
    pub union: usize,
}

impl Overlap {
    /// |A ∩ B| / |A ∪ B|; two empty sets are defined as 0 (never indexed anyway).
    pub fn jaccard(&self) -> f64 {
        if self.union == 0 {
            0.0
        } else {
            self.intersection as f64 / self.union as f64
        }
    }
}

/// Exact overlap of two sorted, deduplicated slices.
pub fn overlap(a: &[u32], b: &[u32]) -> Overlap {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let intersection = if small.len() * 16 < large.len() {
        gallop_intersection(small, large)
    } else {
        merge_intersection(small, large)
    };
    Overlap {
        intersection,
        union: a.len() + b.len() - intersection,
    }
}

/// The intersection of two sets of `len_a` and `len_b` elements whose exact
/// Jaccard is `jaccard` (|A ∩ B| = J·(|A| + |B|) / (1 + J); J is a ratio of
/// integers below 2³², so rounding recovers the integer exactly).
pub fn intersection_of(jaccard: f64, len_a: usize, len_b: usize) -> usize {
    (jaccard * (len_a + len_b) as f64 / (1.0 + jaccard)).round() as usize
}

/// Exact Jaccard similarity of two sorted, deduplicated slices.
pub fn jaccard(a: &[u32], b: &[u32]) -> f64 {
    overlap(a, b).jaccard()
}

/// The exact Jaccard of two sorted, distinct sets if it is at least `t`:
/// the size bound first (no merge for sets too different in size), then
/// the merge. The one place a candidate's score is decided, for every
/// query and scan on every backend.
#[inline]
pub fn at_least(a: &[u32], b: &[u32], t: f64) -> Option<f64> {
    if upper_bound(a.len(), b.len()) < t {
        return None;
    }
    let j = overlap(a, b).jaccard();
    (j >= t).then_some(j)
}

/// The best Jaccard score two sets of these sizes could reach: a cheap filter
/// before the merge.
pub fn upper_bound(len_a: usize, len_b: usize) -> f64 {
    let (lo, hi) = if len_a <= len_b {
        (len_a, len_b)
    } else {
        (len_b, len_a)
    };
    if hi == 0 {
        0.0
    } else {
        lo as f64 / hi as f64
    }
}

/// |A ∩ B| of two sorted, distinct slices if `can_pass` accepts it, else
/// `None`. The merge checks what it has found plus what is left every 64
/// steps and gives up once that bound cannot pass, so a candidate that
/// fails costs only part of its merge. `can_pass` must be monotone (true
/// of a number, true of every larger one).
pub fn intersection_if(a: &[u32], b: &[u32], can_pass: impl Fn(usize) -> bool) -> Option<usize> {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if !can_pass(small.len()) {
        return None;
    }
    if small.len() * 16 < large.len() {
        let n = gallop_intersection(small, large);
        return can_pass(n).then_some(n);
    }
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        for _ in 0..64 {
            if i == a.len() || j == b.len() {
                break;
            }
            let (x, y) = (a[i], b[j]);
            n += usize::from(x == y);
            i += usize::from(x <= y);
            j += usize::from(y <= x);
        }
        if !can_pass(n + (a.len() - i).min(b.len() - j)) {
            return None;
        }
    }
    can_pass(n).then_some(n)
}

fn merge_intersection(a: &[u32], b: &[u32]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        // Branch-light: advance whichever side is behind (both when equal).
        n += usize::from(x == y);
        i += usize::from(x <= y);
        j += usize::from(y <= x);
    }
    n
}

fn gallop_intersection(small: &[u32], large: &[u32]) -> usize {
    let mut rest = large;
    let mut n = 0;
    for &x in small {
        // Exponential search for the first element >= x, then binary search.
        let mut bound = 1;
        while bound < rest.len() && rest[bound] < x {
            bound *= 2;
        }
        let window = &rest[..rest.len().min(bound + 1)];
        match window.binary_search(&x) {
            Ok(pos) => {
                n += 1;
                rest = &rest[pos + 1..];
            }
            Err(pos) => rest = &rest[pos..],
        }
        if rest.is_empty() {
            break;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn oracle(a: &BTreeSet<u32>, b: &BTreeSet<u32>) -> Overlap {
        Overlap {
            intersection: a.intersection(b).count(),
            union: a.union(b).count(),
        }
    }

    proptest! {
        /// `intersection_if` gives the exact intersection whenever it
        /// passes, and gives up only on sets that fail.
        #[test]
        fn intersection_if_is_the_intersection_or_a_fail(
            a in proptest::collection::btree_set(0u32..600, 0..300),
            b in proptest::collection::btree_set(0u32..600, 0..300),
            need in 0usize..200,
        ) {
            let (va, vb): (Vec<u32>, Vec<u32>) = (a.iter().copied().collect(), b.iter().copied().collect());
            let exact = a.intersection(&b).count();
            match intersection_if(&va, &vb, |n| n >= need) {
                Some(n) => prop_assert!(n == exact && n >= need),
                None => prop_assert!(exact < need),
            }
            prop_assert_eq!(intersection_if(&va, &vb, |_| true), Some(exact));
        }
    }

    #[test]
    fn examples_md_char_one_shingles() {
        // "ad" vs "acd" with k = 1: {a, d} vs {a, c, d} → 2/3.
        assert_eq!(jaccard(&[1, 4], &[1, 3, 4]), 2.0 / 3.0);
    }

    #[test]
    fn disjoint_and_identical() {
        assert_eq!(jaccard(&[1, 2], &[3, 4]), 0.0);
        assert_eq!(jaccard(&[1, 2, 3], &[1, 2, 3]), 1.0);
        assert_eq!(jaccard(&[], &[]), 0.0);
    }

    #[test]
    fn gallop_path_agrees_with_merge() {
        let large: Vec<u32> = (0..10_000).map(|i| i * 3).collect();
        let small = vec![0, 3, 4, 2999 * 3, 29_997, 40_000];
        assert_eq!(
            gallop_intersection(&small, &large),
            merge_intersection(&small, &large)
        );
        assert_eq!(overlap(&small, &large).intersection, 4);
    }

    proptest! {
        #[test]
        fn overlap_matches_btreeset_oracle(
            a in proptest::collection::btree_set(0u32..500, 0..200),
            b in proptest::collection::btree_set(0u32..500, 0..40),
        ) {
            let va: Vec<u32> = a.iter().copied().collect();
            let vb: Vec<u32> = b.iter().copied().collect();
            prop_assert_eq!(overlap(&va, &vb), oracle(&a, &b));
            prop_assert_eq!(overlap(&vb, &va), oracle(&a, &b));
        }

        #[test]
        fn jaccard_is_symmetric_bounded_and_one_on_self(
            a in proptest::collection::btree_set(any::<u32>(), 1..100),
            b in proptest::collection::btree_set(any::<u32>(), 1..100),
        ) {
            let va: Vec<u32> = a.into_iter().collect();
            let vb: Vec<u32> = b.into_iter().collect();
            let j = jaccard(&va, &vb);
            prop_assert_eq!(j, jaccard(&vb, &va));
            prop_assert!((0.0..=1.0).contains(&j));
            prop_assert!(j <= upper_bound(va.len(), vb.len()));
            prop_assert_eq!(jaccard(&va, &va), 1.0);
        }
    }
}
