//! Winnowing (Schleimer, Wilkerson & Aiken, SIGMOD 2003, the MOSS
//! plagiarism detector): which of a document's shingles are its passage
//! fingerprints.
//!
//! Slide a window of `w` consecutive shingle hashes over the document, in
//! order, and keep the smallest of each window (the rightmost on a tie).
//! Neighbouring windows mostly keep the same one, so about 2/(w + 1) of the
//! shingles are kept; and whatever two texts share as a run of at least `w`
//! consecutive shingles (w + k − 1 tokens of k-shingles), both keep at least
//! one of the same fingerprints inside it, since the run's first full
//! window is a window of both. That guarantee is what an index of
//! fingerprints rests on: a passage of the guaranteed length is always
//! found, whatever else surrounds it.
//!
//! A document stores which of its (sorted, distinct) shingles are
//! fingerprints as a bitmap over the set ([`selection_bitmap`]), so the
//! index can be rebuilt from stored records, which have lost the order.
//! Records written before fingerprints existed get [`sampled_bitmap`]: the
//! shingles whose mixed hash falls in 1 of `(w + 1) / 2` values, the same
//! density with no guarantee, until they are written again.

/// The window of word-shingle collections: every shared passage of
/// `20 + k − 1` words (22 at the default k = 3) yields a shared
/// fingerprint; ~9.5% of the shingles are kept (docs/containment-study.md).
pub const WORD_WINDOW: usize = 20;
/// The window of character-shingle collections (a character is a token):
/// every shared passage of `100 + k − 1` characters, ~15 words of English.
pub const CHAR_WINDOW: usize = 100;

/// Words of a bitmap over `n` shingles.
#[inline]
pub const fn bitmap_words(n: usize) -> usize {
    n.div_ceil(32)
}

/// The shingle count of a record whose shingles and bitmap take `len`
/// words together: the inverse of `n + bitmap_words(n)` (which is strictly
/// increasing, so exactly one `n` has it).
#[inline]
pub const fn shingles_in(len: usize) -> usize {
    len - len.div_ceil(33)
}

/// Append the winnowed fingerprints of `hashes` (one document's shingle
/// hashes, in order) to `out`: the minimum of every window of `w`
/// consecutive hashes, the rightmost on a tie, each selected position once.
/// A document shorter than one window keeps its minimum.
pub fn winnow(hashes: &[u32], w: usize, out: &mut Vec<u32>) {
    let w = w.max(1);
    if hashes.is_empty() {
        return;
    }
    if hashes.len() <= w {
        let (at, _) =
            hashes.iter().enumerate().fold(
                (0, u32::MAX),
                |(bi, bv), (i, &v)| {
                    if v <= bv {
                        (i, v)
                    } else {
                        (bi, bv)
                    }
                },
            );
        out.push(hashes[at]);
        return;
    }
    // Every window's minimum, by doubling spans (a window of w = the sum
    // of the powers of two in w): each pass is an element-wise min of two
    // shifted slices, which the compiler vectorizes, so ~6 branch-free
    // passes instead of a branchy scan (~1.2 µs → ~0.2 µs a 400-shingle
    // article, `passage_bench`). Which position of a tie is "the" minimum
    // does not change the values kept, only positions, which a set of
    // fingerprints does not record.
    let n = hashes.len();
    WINDOWS.with(|cell| {
        let (level, next, acc) = &mut *cell.borrow_mut();
        level.clear();
        level.extend_from_slice(hashes);
        acc.clear();
        // `level[i]` = min of hashes[i..i + p]; `acc[i]` = min of
        // hashes[i..i + r]. Every pass reads two slices and writes a third
        // (no aliasing), so each is one vectorized loop.
        let (mut p, mut r, mut bits) = (1usize, 0usize, w);
        loop {
            if bits & 1 == 1 {
                if r == 0 {
                    acc.extend_from_slice(&level[..n - p + 1]);
                } else {
                    let len = n - (r + p) + 1;
                    acc.truncate(len);
                    for (a, &l) in acc.iter_mut().zip(&level[r..r + len]) {
                        *a = (*a).min(l);
                    }
                }
                r += p;
            }
            bits >>= 1;
            if bits == 0 {
                break;
            }
            let len = n - 2 * p + 1;
            next.clear();
            next.extend(
                level[..len]
                    .iter()
                    .zip(&level[p..p + len])
                    .map(|(&a, &b)| a.min(b)),
            );
            std::mem::swap(level, next);
            p *= 2;
        }
        let mut last = None;
        for &m in acc.iter() {
            if last != Some(m) {
                out.push(m);
                last = Some(m);
            }
        }
        if acc.capacity() > 1 << 16 {
            *acc = Vec::new();
            *level = Vec::new();
            *next = Vec::new();
        }
    });
}

thread_local! {
    /// Work space of [`winnow`]: the doubled spans and the window minima.
    static WINDOWS: std::cell::RefCell<(Vec<u32>, Vec<u32>, Vec<u32>)> = Default::default();
}

/// The bitmap over `set` (sorted, distinct) of the values in `selected`
/// (any order, repeats allowed; every value must be in `set`): bit `i % 32`
/// of word `i / 32` is set when `set[i]` is a fingerprint. Sorts `selected`.
pub fn selection_bitmap(set: &[u32], selected: &mut Vec<u32>) -> Box<[u32]> {
    selected.sort_unstable();
    selected.dedup();
    let mut bits = vec![0u32; bitmap_words(set.len())];
    let mut from = 0;
    for &v in selected.iter() {
        // Both are sorted: each search starts where the last one ended.
        let i = from + lower_bound(&set[from..], v);
        if i < set.len() && set[i] == v {
            bits[i / 32] |= 1 << (i % 32);
        }
        from = i;
        if from >= set.len() {
            break;
        }
    }
    bits.into_boxed_slice()
}

/// The first index of `s` (sorted) whose value is not below `v`: a binary
/// search with no unpredictable branch (conditional moves), ~9 steps for
/// a 400-shingle article.
#[inline]
fn lower_bound(s: &[u32], v: u32) -> usize {
    if s.is_empty() {
        return 0;
    }
    let (mut base, mut len) = (0usize, s.len());
    while len > 1 {
        let half = len / 2;
        base = if s[base + half - 1] < v {
            base + half
        } else {
            base
        };
        len -= half;
    }
    base + usize::from(s[base] < v)
}

/// The order-free stand-in for records that were stored without a
/// selection: the shingles whose mixed hash is 0 modulo `(w + 1) / 2`, and
/// the set's smallest one if none is (so every document has one).
pub fn sampled_bitmap(set: &[u32], w: usize) -> Box<[u32]> {
    let p = (w as u64).div_ceil(2).max(1);
    let mut bits = vec![0u32; bitmap_words(set.len())];
    let mut any = false;
    for (i, &h) in set.iter().enumerate() {
        if super::words::fmix64(u64::from(h) ^ SAMPLE_SALT).is_multiple_of(p) {
            bits[i / 32] |= 1 << (i % 32);
            any = true;
        }
    }
    if !any && !set.is_empty() {
        bits[0] |= 1;
    }
    bits.into_boxed_slice()
}

const SAMPLE_SALT: u64 = 0x7361_6d70_6c65_6421;

/// The fingerprints a bitmap marks in `set`, in increasing order.
pub fn fingerprints<'a>(set: &'a [u32], bits: &'a [u32]) -> impl Iterator<Item = u32> + 'a {
    bits.iter().enumerate().flat_map(move |(wi, &word)| {
        let mut word = word;
        std::iter::from_fn(move || {
            if word == 0 {
                return None;
            }
            let b = word.trailing_zeros() as usize;
            word &= word - 1;
            set.get(wi * 32 + b).copied()
        })
    })
}

/// How many fingerprints a bitmap marks.
pub fn count(bits: &[u32]) -> usize {
    bits.iter().map(|w| w.count_ones() as usize).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition, spelled out: every window's rightmost minimum.
    fn reference(hashes: &[u32], w: usize) -> std::collections::BTreeSet<u32> {
        if hashes.len() <= w {
            let m = *hashes.iter().min().unwrap();
            return [m].into();
        }
        hashes
            .windows(w)
            .map(|win| {
                let m = *win.iter().min().unwrap();
                m
            })
            .collect()
    }

    #[test]
    fn shingles_in_inverts_the_record_length() {
        for n in 0..5000 {
            assert_eq!(shingles_in(n + bitmap_words(n)), n, "n = {n}");
        }
    }

    #[test]
    fn the_paper_example() {
        // Schleimer et al., fig. 2: hashes of the 5-grams of
        // "adorunrunrunadorunrun", window 4 → {17, 17, 8, 39, 17} as
        // (value, position) pairs; values {8, 17, 39}.
        let h = [
            77, 74, 42, 17, 98, 50, 17, 98, 8, 88, 67, 39, 77, 74, 42, 17, 98,
        ];
        let mut out = Vec::new();
        winnow(&h, 4, &mut out);
        // Each window's minimum, consecutive repeats once: the values of
        // the paper's selection (17, 17, 8, 39, 17 by position).
        assert_eq!(out, vec![17, 8, 39, 17]);
    }

    proptest! {
        #[test]
        fn winnow_keeps_every_windows_minimum(
            hashes in proptest::collection::vec(any::<u32>(), 1..300),
            w in 1usize..30,
        ) {
            let mut out = Vec::new();
            winnow(&hashes, w, &mut out);
            let got: std::collections::BTreeSet<u32> = out.iter().copied().collect();
            prop_assert_eq!(got, reference(&hashes, w));
        }

        #[test]
        fn a_shared_run_of_a_window_shares_a_fingerprint(
            a in proptest::collection::vec(any::<u32>(), 0..200),
            b in proptest::collection::vec(any::<u32>(), 0..200),
            run in proptest::collection::vec(any::<u32>(), 20..60),
        ) {
            let w = 20;
            let doc = [a.clone(), run.clone(), b.clone()].concat();
            let quote = [b, run.clone(), a].concat();
            let (mut x, mut y) = (Vec::new(), Vec::new());
            winnow(&doc, w, &mut x);
            winnow(&quote, w, &mut y);
            let x: std::collections::HashSet<u32> = x.into_iter().collect();
            prop_assert!(y.iter().any(|v| x.contains(v) && run.contains(v)));
        }

        #[test]
        fn the_bitmap_marks_exactly_the_selected_values(
            set in proptest::collection::btree_set(any::<u32>(), 1..400),
            pick in proptest::collection::vec(any::<prop::sample::Index>(), 0..100),
        ) {
            let set: Vec<u32> = set.into_iter().collect();
            let mut selected: Vec<u32> = pick.iter().map(|i| set[i.index(set.len())]).collect();
            let want: std::collections::BTreeSet<u32> = selected.iter().copied().collect();
            let bits = selection_bitmap(&set, &mut selected);
            let got: std::collections::BTreeSet<u32> = fingerprints(&set, &bits).collect();
            prop_assert_eq!(count(&bits), want.len());
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn sampling_keeps_about_one_in_p_and_at_least_one() {
        let set: Vec<u32> = (0..10_000u32).map(|i| i * 7919).collect();
        let bits = sampled_bitmap(&set, WORD_WINDOW);
        let kept = count(&bits) as f64 / set.len() as f64;
        assert!((0.08..0.11).contains(&kept), "{kept}");
        assert_eq!(count(&sampled_bitmap(&[5], WORD_WINDOW)).max(1), 1);
    }
}
