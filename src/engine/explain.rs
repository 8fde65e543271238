//! Why two texts match: the exact scores, and the passages they share,
//! marked on each text as it was written.
//!
//! The scores are the ones every other answer gives (exact Jaccard of the
//! two shingle sets, the MinHash estimate of their signatures). The
//! passages come from the units of the recipe (words, or characters for
//! character shingles), traced back to the original text by
//! [`text::align`](crate::text::align):
//!
//! 1. a shingle is *shared* when the other text has it too (compared as
//!    the units themselves, so a 32-bit hash collision never marks text);
//! 2. a unit is *covered* when a shared shingle covers it;
//! 3. runs of covered units form passages; a gap of fewer than k uncovered
//!    units does not break a passage, and a passage of fewer than k + 1
//!    units (a single shared shingle) is not marked;
//! 4. each passage is paired with the passage of the other text that holds
//!    most of its shingles (the earlier one on a tie); passages linked by
//!    pairing share a number, numbered in the order they appear in `a`,
//!    then in `b`. A passage whose shingles all fall in unmarked parts of
//!    the other text keeps a number of its own.
//!
//! Each side's segments are the text cut at the passages' first and last
//! units: they concatenate to exactly that text, and never split a
//! character, combining sequence or emoji.

use super::{Engine, EngineError};
use crate::text::align::{align, Aligned, Alignment, Span};
use crate::text::ShingleKind;
use crate::{jaccard, minhash};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use xxhash_rust::xxh3::Xxh3DefaultBuilder as Fast;

/// A passage's pairing counts each shingle toward at most this many
/// passages of the other text (a bound for pathological repetition).
const MAX_PASSAGES_PER_SHINGLE: usize = 256;

/// One piece of a text: `text[range]`, shared (`passage` = its number) or
/// not, and boilerplate or not (only when asked: [`Engine::explain_marked`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    pub range: (usize, usize),
    pub passage: Option<u32>,
    pub boilerplate: bool,
}

/// What the explanation found on one text.
#[derive(Clone, Debug, PartialEq)]
pub struct Side {
    pub segments: Vec<Segment>,
    /// Distinct shingles of the text (its set's size).
    pub shingles: usize,
    /// Units (words or characters) of its normalized form.
    pub units: usize,
    /// How finely units could be traced back to the text.
    pub alignment: Alignment,
}

/// The answer to "why do these two texts match?".
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    pub jaccard: f64,
    pub estimate: f64,
    pub intersection: usize,
    pub union: usize,
    /// |A ∩ B| / |A|: how much of `a` is in `b`.
    pub containment_a_in_b: f64,
    pub containment_b_in_a: f64,
    /// Distinct passage numbers.
    pub passages: u32,
    pub a: Side,
    pub b: Side,
}

impl Engine {
    /// Explain the similarity of two texts under this engine's recipe.
    /// Errors only when a text has nothing left after normalization.
    pub fn explain(&self, a: &str, b: &str) -> Result<Explanation, EngineError> {
        self.explain_marked(a, b, None)
    }

    /// [`Self::explain`], with each side's boilerplate marked too:
    /// `boilerplate` gives, per side, whether each shingle of the text in
    /// text order ([`Self::passage`]'s `ordered`) is boilerplate. Runs of
    /// covered units are found as for shared passages (gaps under k
    /// bridged, single shingles dropped), and the segments are cut at
    /// their ends, so a segment is wholly boilerplate or not.
    pub fn explain_marked(
        &self,
        a: &str,
        b: &str,
        boilerplate: Option<(&[bool], &[bool])>,
    ) -> Result<Explanation, EngineError> {
        let (pa, pb) = (self.prepare(a)?, self.prepare(b)?);
        let overlap = jaccard::overlap(pa.shingles(), pb.shingles());
        let params = self.params();
        let k = params.shingle.k;
        let (aa, ab) = (align(a, &params.normalize), align(b, &params.normalize));
        let (units, marks) = match params.shingle.kind {
            ShingleKind::Word => {
                let (wa, wb) = (aa.words(), ab.words());
                let units = (wa.len(), wb.len());
                let (ta, tb): (Vec<&str>, Vec<&str>) = (
                    wa.iter().map(|w| w.0).collect(),
                    wb.iter().map(|w| w.0).collect(),
                );
                let spans = (spans_of(&wa), spans_of(&wb));
                (units, (mark(&ta, &tb, k), spans))
            }
            ShingleKind::Char => {
                let (ca, cb) = (aa.chars(), ab.chars());
                let units = (ca.len(), cb.len());
                let (ta, tb): (Vec<char>, Vec<char>) = (
                    ca.iter().map(|c| c.0).collect(),
                    cb.iter().map(|c| c.0).collect(),
                );
                let spans = (spans_of(&ca), spans_of(&cb));
                (units, (mark(&ta, &tb, k), spans))
            }
        };
        let ((passages_a, passages_b, count), (spans_a, spans_b)) = marks;
        let side = |text: &str,
                    al: &Aligned,
                    passages: &[Passage],
                    spans: &[Span],
                    n: usize,
                    size,
                    bp: Option<&[bool]>| {
            let mut segs = segments(text.len(), passages, spans);
            // Shingle positions: one per window of k units (one for a
            // shorter text); a mask of another length is not this text's.
            let windows = if n == 0 { 0 } else { n.saturating_sub(k) + 1 };
            if let Some(bp) = bp.filter(|bp| bp.len() == windows && n > 0) {
                let ranges: Vec<(usize, usize)> = runs(n, bp, k.min(n), k)
                    .into_iter()
                    .map(|(s, e)| (spans[s].0, spans[e - 1].1))
                    .collect();
                segs = cut_at(segs, &ranges);
            }
            Side {
                segments: segs,
                shingles: size,
                units: n,
                alignment: al.alignment,
            }
        };
        let containment = |n: usize| {
            if n == 0 {
                0.0
            } else {
                overlap.intersection as f64 / n as f64
            }
        };
        Ok(Explanation {
            jaccard: overlap.jaccard(),
            estimate: minhash::estimate(pa.signature(), pb.signature()),
            intersection: overlap.intersection,
            union: overlap.union,
            containment_a_in_b: containment(pa.shingles().len()),
            containment_b_in_a: containment(pb.shingles().len()),
            passages: count,
            a: side(
                a,
                &aa,
                &passages_a,
                &spans_a,
                units.0,
                pa.shingles().len(),
                boilerplate.map(|b| b.0),
            ),
            b: side(
                b,
                &ab,
                &passages_b,
                &spans_b,
                units.1,
                pb.shingles().len(),
                boilerplate.map(|b| b.1),
            ),
        })
    }
}

fn spans_of<T>(units: &[(T, Span)]) -> Vec<Span> {
    units.iter().map(|u| u.1).collect()
}

/// Units `start..end` of one text, marked with `number`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Passage {
    pub start: usize,
    pub end: usize,
    pub number: u32,
}

/// One text's shingles: position → the units it covers.
struct Shingles<'t, T> {
    windows: Vec<&'t [T]>,
    /// Units a shingle covers: k, or all of them for a text shorter than k.
    width: usize,
}

impl<'t, T: Hash + Eq> Shingles<'t, T> {
    fn new(units: &'t [T], k: usize) -> Self {
        let windows = if units.is_empty() {
            Vec::new()
        } else if units.len() < k {
            vec![units]
        } else {
            units.windows(k).collect()
        };
        Self {
            windows,
            width: k.min(units.len()),
        }
    }

    fn set(&self) -> HashSet<&'t [T], Fast> {
        let mut set = HashSet::with_capacity_and_hasher(self.windows.len(), Fast);
        set.extend(self.windows.iter().copied());
        set
    }

    /// For each position, whether it is its window's first occurrence.
    fn first_occurrences(&self) -> Vec<bool> {
        let mut seen = HashSet::with_capacity_and_hasher(self.windows.len(), Fast);
        self.windows.iter().map(|w| seen.insert(*w)).collect()
    }
}

/// Runs of covered units, gaps under `k` bridged, runs under `k + 1` dropped.
fn runs(units: usize, shared: &[bool], width: usize, k: usize) -> Vec<(usize, usize)> {
    // Coverage by a difference array: +1 where a shared shingle starts,
    // -1 where it ends.
    let mut delta = vec![0i32; units + 1];
    for (j, _) in shared.iter().enumerate().filter(|(_, &s)| s) {
        delta[j] += 1;
        delta[(j + width).min(units)] -= 1;
    }
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut depth = 0;
    for (i, d) in delta.iter().take(units).enumerate() {
        depth += d;
        if depth == 0 {
            continue;
        }
        match out.last_mut() {
            Some(last) if i - last.1 < k => last.1 = i + 1,
            _ => out.push((i, i + 1)),
        }
    }
    out.retain(|&(s, e)| e - s > k);
    out
}

/// Passage of each unit, if any.
fn owner(units: usize, runs: &[(usize, usize)]) -> Vec<Option<usize>> {
    let mut of = vec![None; units];
    for (p, &(s, e)) in runs.iter().enumerate() {
        of[s..e].iter_mut().for_each(|o| *o = Some(p));
    }
    of
}

/// For each passage of `from`, the passage of `to` holding most of its
/// shingles (each distinct shingle of `from` counted once, in the passage
/// of its first occurrence).
fn best_partners<T: Hash + Eq>(
    from: &Shingles<'_, T>,
    from_runs: &[(usize, usize)],
    to: &Shingles<'_, T>,
    to_runs: &[(usize, usize)],
) -> Vec<Option<usize>> {
    let to_owner = owner(to.windows.len() + to.width, to_runs);
    // Shingle → the first passage of `to` holding an occurrence whole; the
    // rare shingles held by several passages list the others apart.
    let mut first: HashMap<&[T], usize, Fast> = HashMap::default();
    let mut more: HashMap<&[T], Vec<usize>, Fast> = HashMap::default();
    for (j, w) in to.windows.iter().enumerate() {
        let (Some(p), Some(q)) = (to_owner[j], to_owner[j + to.width - 1]) else {
            continue;
        };
        if p != q {
            continue;
        }
        match first.entry(*w) {
            Entry::Vacant(e) => {
                e.insert(p);
            }
            Entry::Occupied(e) if *e.get() != p => {
                let list = more.entry(*w).or_default();
                if list.last() != Some(&p) && list.len() < MAX_PASSAGES_PER_SHINGLE {
                    list.push(p);
                }
            }
            Entry::Occupied(_) => {}
        }
    }
    let distinct = from.first_occurrences();
    let mut counts = vec![0usize; to_runs.len()];
    let mut touched: Vec<usize> = Vec::new();
    from_runs
        .iter()
        .map(|&(s, e)| {
            let last = (e - from.width).min(from.windows.len().saturating_sub(1));
            for j in (s..=last).filter(|&j| distinct[j]) {
                let w = from.windows[j];
                let holders = first
                    .get(w)
                    .into_iter()
                    .chain(more.get(w).into_iter().flatten());
                for &p in holders {
                    if counts[p] == 0 {
                        touched.push(p);
                    }
                    counts[p] += 1;
                }
            }
            // Most shingles; the earlier passage on a tie.
            let best = touched
                .iter()
                .copied()
                .max_by(|&x, &y| counts[x].cmp(&counts[y]).then(y.cmp(&x)));
            for p in touched.drain(..) {
                counts[p] = 0;
            }
            best
        })
        .collect()
}

/// Mark the passages two unit sequences share (see the module docs);
/// returns each side's passages and how many numbers were given.
pub(crate) fn mark<T: Hash + Eq>(a: &[T], b: &[T], k: usize) -> (Vec<Passage>, Vec<Passage>, u32) {
    let (sa, sb) = (Shingles::new(a, k), Shingles::new(b, k));
    let (set_a, set_b) = (sa.set(), sb.set());
    let shared_a: Vec<bool> = sa.windows.iter().map(|w| set_b.contains(w)).collect();
    let shared_b: Vec<bool> = sb.windows.iter().map(|w| set_a.contains(w)).collect();
    let runs_a = runs(a.len(), &shared_a, sa.width, k);
    let runs_b = runs(b.len(), &shared_b, sb.width, k);
    let to_b = best_partners(&sa, &runs_a, &sb, &runs_b);
    let to_a = best_partners(&sb, &runs_b, &sa, &runs_a);

    // Passages linked by pairing share a number: union-find over a's
    // passages (0..) then b's (n_a..).
    let n_a = runs_a.len();
    let mut parent: Vec<usize> = (0..n_a + runs_b.len()).collect();
    fn root(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let mut link = |x: usize, y: usize| {
        let (rx, ry) = (root(&mut parent, x), root(&mut parent, y));
        if rx != ry {
            parent[rx.max(ry)] = rx.min(ry);
        }
    };
    for (i, p) in to_b.iter().enumerate() {
        if let Some(j) = p {
            link(i, n_a + j);
        }
    }
    for (j, p) in to_a.iter().enumerate() {
        if let Some(i) = p {
            link(*i, n_a + j);
        }
    }
    let mut number_of_root: HashMap<usize, u32> = HashMap::new();
    let mut next = 0u32;
    let mut number = |x: usize| {
        let r = root(&mut parent, x);
        *number_of_root.entry(r).or_insert_with(|| {
            next += 1;
            next
        })
    };
    let pa = runs_a
        .iter()
        .enumerate()
        .map(|(i, &(start, end))| Passage {
            start,
            end,
            number: number(i),
        })
        .collect();
    let pb = runs_b
        .iter()
        .enumerate()
        .map(|(j, &(start, end))| Passage {
            start,
            end,
            number: number(n_a + j),
        })
        .collect();
    (pa, pb, next)
}

/// `segments` cut again at the ends of `ranges` (sorted byte ranges), the
/// pieces inside one marked boilerplate.
fn cut_at(segments: Vec<Segment>, ranges: &[(usize, usize)]) -> Vec<Segment> {
    if ranges.is_empty() {
        return segments;
    }
    let mut out = Vec::with_capacity(segments.len() + 2 * ranges.len());
    for seg in segments {
        let (mut at, end) = seg.range;
        while at < end {
            // The range holding `at`, or the next one to start after it.
            let inside = ranges.iter().find(|r| r.0 <= at && at < r.1);
            let (next, bp) = match inside {
                Some(r) => (r.1.min(end), true),
                None => (
                    ranges
                        .iter()
                        .map(|r| r.0)
                        .filter(|&s| s > at)
                        .min()
                        .unwrap_or(end)
                        .min(end),
                    false,
                ),
            };
            out.push(Segment {
                range: (at, next),
                passage: seg.passage,
                boilerplate: bp,
            });
            at = next;
        }
        if seg.range.0 == seg.range.1 {
            out.push(seg);
        }
    }
    out
}

/// A text of `len` bytes cut at its passages (`spans` = each unit's bytes).
fn segments(len: usize, passages: &[Passage], spans: &[Span]) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut at = 0;
    for p in passages {
        let start = spans[p.start].0.max(at);
        let end = spans[p.end - 1].1.max(start);
        if start == end {
            continue;
        }
        if at < start {
            out.push(Segment {
                range: (at, start),
                passage: None,
                boilerplate: false,
            });
        }
        match out.last_mut() {
            // A unit shared by two passages' spans (coarse alignment): one segment.
            Some(last) if last.range.1 == start && last.passage == Some(p.number) => {
                last.range.1 = end
            }
            _ => out.push(Segment {
                range: (start, end),
                passage: Some(p.number),
                boilerplate: false,
            }),
        }
        at = end;
    }
    if at < len || out.is_empty() {
        out.push(Segment {
            range: (at, len),
            passage: None,
            boilerplate: false,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineParams;
    use crate::text::{NormalizeOptions, ShingleOptions};
    use proptest::prelude::*;

    fn engine(kind: ShingleKind, k: usize) -> Engine {
        let params = EngineParams {
            normalize: NormalizeOptions::default(),
            shingle: ShingleOptions {
                kind,
                k,
                multiset: false,
            },
            index: Default::default(),
        };
        Engine::new(params.validate().unwrap())
    }

    fn texts<'t>(text: &'t str, side: &Side) -> Vec<(&'t str, Option<u32>)> {
        side.segments
            .iter()
            .map(|s| (&text[s.range.0..s.range.1], s.passage))
            .collect()
    }

    fn joined(text: &str, side: &Side) -> String {
        texts(text, side).iter().map(|t| t.0).collect()
    }

    #[test]
    fn the_worked_example_scores_and_passages() {
        // docs/examples.md: documents 1 and 2, word 3-shingles: 3 shared of 12.
        let e = engine(ShingleKind::Word, 3);
        let (a, b) = (
            "The night is dark and the moon is red.",
            "I can see moon is red, the night is dark.",
        );
        let x = e.explain(a, b).unwrap();
        assert_eq!((x.intersection, x.union, x.jaccard), (3, 12, 0.25));
        assert_eq!(x.containment_a_in_b, 3.0 / 7.0);
        assert_eq!(x.containment_b_in_a, 3.0 / 8.0);
        // "the night is dark" (2 shared shingles) and "moon is red" (1), with
        // a gap of two words between them (under k = 3): one passage.
        assert_eq!(
            texts(a, &x.a),
            [
                ("The night is dark and the moon is red", Some(1)),
                (".", None)
            ]
        );
        assert_eq!(
            texts(b, &x.b),
            [
                ("I can see ", None),
                ("moon is red, the night is dark", Some(1)),
                (".", None)
            ]
        );
        assert_eq!(x.passages, 1);
    }

    #[test]
    fn a_single_shared_shingle_is_not_marked() {
        let e = engine(ShingleKind::Word, 3);
        let (a, b) = ("Stars: the moon is red tonight", "Our moon is red");
        let x = e.explain(a, b).unwrap();
        assert_eq!(x.intersection, 1);
        assert_eq!(texts(a, &x.a), [(a, None)]);
        assert_eq!(texts(b, &x.b), [(b, None)]);
        assert_eq!(x.passages, 0);
    }

    #[test]
    fn identical_texts_are_one_passage_each() {
        let e = engine(ShingleKind::Word, 3);
        let a = "Café “crème” à Zürich, São Paulo et Москва́ — 東京 👨‍👩‍👧 fin";
        let x = e.explain(a, a).unwrap();
        assert_eq!(x.jaccard, 1.0);
        assert_eq!(joined(a, &x.a), a);
        let marked: Vec<_> = texts(a, &x.a)
            .into_iter()
            .filter(|t| t.1.is_some())
            .collect();
        assert_eq!(
            marked,
            [(
                "Café “crème” à Zürich, São Paulo et Москва́ — 東京 👨‍👩‍👧 fin",
                Some(1)
            )]
        );
    }

    #[test]
    fn a_gap_shorter_than_k_does_not_break_a_passage() {
        let e = engine(ShingleKind::Word, 2);
        // One word replaced in the middle: the passage runs across it.
        let a = "one two three four five six seven eight";
        let b = "one two three four XXX six seven eight";
        let x = e.explain(a, b).unwrap();
        assert_eq!(
            texts(b, &x.b),
            [("one two three four XXX six seven eight", Some(1))]
        );
        // Two words replaced (a gap of k): two passages, one number each.
        let c = "one two three four XXX YYY seven eight nine";
        let d = "one two three four five six seven eight nine";
        let x = e.explain(c, d).unwrap();
        assert_eq!(
            texts(c, &x.a),
            [
                ("one two three four", Some(1)),
                (" XXX YYY ", None),
                ("seven eight nine", Some(2))
            ]
        );
        assert_eq!(x.passages, 2);
    }

    #[test]
    fn passages_are_paired_across_reordering() {
        let e = engine(ShingleKind::Word, 3);
        let a = "alpha beta gamma delta epsilon. one two three. zeta eta theta iota kappa.";
        let b = "zeta eta theta iota kappa! four five six! alpha beta gamma delta epsilon!";
        let x = e.explain(a, b).unwrap();
        assert_eq!(
            texts(a, &x.a),
            [
                ("alpha beta gamma delta epsilon", Some(1)),
                (". one two three. ", None),
                ("zeta eta theta iota kappa", Some(2)),
                (".", None)
            ]
        );
        assert_eq!(
            texts(b, &x.b),
            [
                ("zeta eta theta iota kappa", Some(2)),
                ("! four five six! ", None),
                ("alpha beta gamma delta epsilon", Some(1)),
                ("!", None)
            ]
        );
    }

    #[test]
    fn character_shingles_mark_characters_and_keep_graphemes_whole() {
        let e = engine(ShingleKind::Char, 5);
        let (a, b) = (
            "Can I make 50,000 a month by day trading?",
            "Can I make 30,000 a month by day trading?",
        );
        let x = e.explain(a, b).unwrap();
        assert_eq!(x.jaccard, 0.75);
        assert_eq!(
            texts(a, &x.a),
            // One character changed: a gap of one unit, under k, inside the passage.
            [
                ("Can I make 50,000 a month by day trading", Some(1)),
                ("?", None)
            ]
        );
        // CJK and combining marks: boundaries on whole characters.
        let (c, d) = ("東京都の天気は晴れです。", "大阪府の天気は晴れです。");
        let x = e.explain(c, d).unwrap();
        assert_eq!(
            texts(c, &x.a),
            [
                ("東京都", None),
                ("の天気は晴れです", Some(1)),
                ("。", None)
            ]
        );
        let (f, g) = (
            "e\u{301}le\u{300}ve tre\u{300}s studieux",
            "élève très studieuse",
        );
        let x = e.explain(f, g).unwrap();
        assert_eq!(joined(f, &x.a), f);
        assert!(x.a.segments.iter().all(|s| f.is_char_boundary(s.range.0)));
        assert_eq!(
            texts(f, &x.a)[0],
            ("e\u{301}le\u{300}ve tre\u{300}s studieu", Some(1))
        );
    }

    #[test]
    fn texts_without_shared_shingles_are_one_unmarked_segment() {
        let e = engine(ShingleKind::Word, 3);
        let x = e
            .explain(
                "a completely different thing",
                "nothing in common here at all",
            )
            .unwrap();
        assert_eq!(x.intersection, 0);
        assert_eq!(
            x.a.segments,
            [Segment {
                range: (0, 28),
                passage: None,
                boilerplate: false
            }]
        );
        assert_eq!(x.passages, 0);
    }

    #[test]
    fn an_empty_text_is_an_error() {
        let e = engine(ShingleKind::Word, 3);
        assert!(e.explain("!!!", "words here").is_err());
    }

    /// Units, shingles and coverage recomputed by brute force.
    fn covered_units(a: &[u32], b: &[u32], k: usize) -> Vec<bool> {
        let sa = Shingles::new(a, k);
        let sb = Shingles::new(b, k);
        let mut covered = vec![false; a.len()];
        for (j, w) in sa.windows.iter().enumerate() {
            if sb.windows.contains(w) {
                covered[j..j + sa.width].iter_mut().for_each(|c| *c = true);
            }
        }
        covered
    }

    proptest! {
        #[test]
        fn marked_passages_follow_the_rules(
            a in prop::collection::vec(0u32..6, 0..60),
            b in prop::collection::vec(0u32..6, 0..60),
            k in 1usize..5,
        ) {
            let (pa, pb, n) = mark(&a, &b, k);
            for (units, other, passages) in [(&a, &b, &pa), (&b, &a, &pb)] {
                let covered = covered_units(units, other, k);
                let mut marked = vec![false; units.len()];
                for p in passages.iter() {
                    prop_assert!(p.end - p.start > k);
                    prop_assert!(p.number >= 1 && p.number <= n);
                    // Starts and ends on covered units; uncovered gaps inside are under k.
                    prop_assert!(covered[p.start] && covered[p.end - 1]);
                    let mut gap = 0;
                    for i in p.start..p.end {
                        gap = if covered[i] { 0 } else { gap + 1 };
                        prop_assert!(gap < k);
                        marked[i] = true;
                    }
                }
                // Every covered unit is marked unless its run of covered
                // units (gaps under k bridged) is too short to be marked.
                let mut i = 0;
                while i < units.len() {
                    if !covered[i] { i += 1; continue; }
                    let start = i;
                    let mut end = i + 1;
                    let mut j = i + 1;
                    while j < units.len() {
                        if covered[j] { end = j + 1; j += 1; continue; }
                        let gap_end = (j..units.len()).find(|&x| covered[x]).unwrap_or(units.len());
                        if gap_end < units.len() && gap_end - j < k { j = gap_end; } else { break; }
                    }
                    prop_assert_eq!(end - start > k, marked[start..end].iter().all(|&m| m));
                    i = end.max(j);
                }
            }
            // A passage whose number is on both sides shares a shingle with
            // a passage of that number on the other side.
            let (wa, wb) = (Shingles::new(&a, k), Shingles::new(&b, k));
            let inside = |w: &Shingles<'_, u32>, p: &Passage| -> Vec<Vec<u32>> {
                (p.start..=p.end - w.width)
                    .filter(|&x| x < w.windows.len())
                    .map(|x| w.windows[x].to_vec())
                    .collect()
            };
            for (mine, theirs, wm, wt) in [(&pa, &pb, &wa, &wb), (&pb, &pa, &wb, &wa)] {
                for p in mine.iter() {
                    let partners: Vec<&Passage> = theirs.iter().filter(|q| q.number == p.number).collect();
                    if partners.is_empty() {
                        continue;
                    }
                    let own = inside(wm, p);
                    prop_assert!(partners.iter().any(|q| inside(wt, q).iter().any(|w| own.contains(w))));
                }
            }
        }

        #[test]
        fn segments_concatenate_to_the_text(
            a in "\\PC{0,60}",
            b in "\\PC{0,60}",
        ) {
            let e = engine(ShingleKind::Word, 2);
            if let Ok(x) = e.explain(&a, &b) {
                prop_assert_eq!(joined(&a, &x.a), a.clone());
                prop_assert_eq!(joined(&b, &x.b), b.clone());
                for s in x.a.segments.iter() {
                    prop_assert!(s.range.0 < s.range.1 || a.is_empty());
                }
            }
        }
    }
}
