//! k-shingles of a normalized string, hashed to 32-bit values.
//!
//! *Word* shingles are k consecutive words joined by one space; *character*
//! shingles are k consecutive characters (spaces included). No shingle string
//! is ever built:
//!
//! - a **word** shingle's hash is combined from the 64-bit hashes of its
//!   words ([`super::words`]), each word hashed once:
//!   `fmix64(c₀ + n·C + Σⱼ Kⱼ·wⱼ)` over its n words (n = k, or fewer for a
//!   short text), with odd seed-derived weights Kⱼ, folded to 32 bits. Each
//!   term is a bijection of its word hash and the sum is taken mod 2⁶⁴, so two
//!   different word sequences collide only if a 64-bit linear combination of
//!   independent hash differences vanishes (probability ~2⁻⁶³), before the
//!   32-bit fold that every shingle pays anyway;
//! - a **character** shingle is a contiguous slice of the normalized string
//!   and is hashed in place with XXH3-64 (seeded).
//!
//! **Width: 32 bits.** A shingle set is stored for exact verification, so its
//! width is most of the memory per document; 32 bits halves it against 64.
//! Collisions are harmless in practice: for two documents of n and m distinct
//! shingles the expected number of spurious cross-collisions is about
//! n·m / 2^32 — 4·10⁻⁶ for two 130-word documents, 0.2 for two 30,000-word
//! documents, where one collision moves a Jaccard score by at most 1/union
//! (< 0.00002). Within one 1,000,000-shingle document about 116 pairs merge
//! (0.01% of its set). Both hashes are specified bit for bit (golden values
//! are tested), so values are identical on every machine and across
//! releases: they are persisted.
//!
//! A text with at least one but fewer than k units is one shingle of all of
//! them; a text with no units is a [`TextError::Empty`].
//!
//! **Multiset mode** counts repeats: the i-th occurrence (i ≥ 2) of a shingle
//! becomes its own element `hash(shingle, i)`, so the set is a bag and the
//! Jaccard score is the multiset one. The first occurrence keeps the plain
//! hash, so documents without repeats have the same set in both modes.

use super::tokens::{for_each_word, WordSplit};
use super::words::{self, fmix64, word_key};
use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Word or character k-grams.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShingleKind {
    Word,
    Char,
}

impl ShingleKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ShingleKind::Word => "word",
            ShingleKind::Char => "char",
        }
    }
}

/// How documents are cut into shingles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShingleOptions {
    pub kind: ShingleKind,
    /// Units per shingle (words or characters), ≥ 1.
    pub k: usize,
    /// Count repeated shingles (bag semantics) instead of distinct ones.
    pub multiset: bool,
}

impl Default for ShingleOptions {
    fn default() -> Self {
        Self {
            kind: ShingleKind::Word,
            k: 3,
            multiset: false,
        }
    }
}

/// A text that cannot be indexed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// Nothing is left after normalization: an empty set would equal every
    /// other empty set, so it is refused rather than matched.
    #[error("the text has no words or characters left after normalization")]
    Empty,
}

/// Sorted, distinct 32-bit shingle hashes: the exact set that Jaccard is computed on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShingleSet(Box<[u32]>);

impl ShingleSet {
    /// Copy hashes that are already sorted and distinct.
    pub(crate) fn from_sorted(hashes: &[u32]) -> Self {
        debug_assert!(hashes.windows(2).all(|w| w[0] < w[1]));
        Self(hashes.into())
    }

    /// Build from arbitrary hashes (sorted and deduplicated here).
    pub fn from_hashes(mut hashes: Vec<u32>) -> Self {
        hashes.sort_unstable();
        hashes.dedup();
        Self(hashes.into_boxed_slice())
    }

    pub fn as_slice(&self) -> &[u32] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn into_boxed_slice(self) -> Box<[u32]> {
        self.0
    }
}

/// Cuts normalized text into hashed shingles.
#[derive(Clone, Debug)]
pub struct Shingler {
    opts: ShingleOptions,
    /// How a normalized string is cut into words (the recipe version's rule).
    split: WordSplit,
    seed: u64,
    /// Start of every word hash ([`words::word_key`]).
    word_key: u64,
    /// c₀ of the word-shingle combination.
    base: u64,
    /// The weights K₀ … K_{k-1} (odd) of the word-shingle combination.
    weights: Box<[u64]>,
}

/// Salt that separates the "i-th occurrence" hashes of multiset mode from plain ones.
const OCCURRENCE_SALT: u64 = 0x6f63_6375_7272_656e;
/// Salt of the word-shingle combination constants.
const COMBINE_SALT: u64 = 0x636f_6d62_696e_6521;
/// C, the multiplier of the word count in a word-shingle combination.
const COUNT_MUL: u64 = 0x9e37_79b9_7f4a_7c15;

/// Reusable buffers of the shingling pipeline: one per thread (see
/// [`Tokenizer::shingles`](super::Tokenizer::shingles)) or per caller.
#[derive(Debug, Default)]
pub struct Scratch {
    pub(crate) norm: String,
    pub(crate) words: Vec<u64>,
    pub(crate) hashes: Vec<u32>,
    /// The winnowed fingerprints of a text, before they are marked in its set.
    pub(crate) selected: Vec<u32>,
    /// Work space of [`sort_hashes`].
    pub(crate) spare: Vec<u32>,
    pub(crate) ascii: words::AsciiScratch,
}

impl Scratch {
    /// Drop buffers a huge document grew, so they are not pinned forever.
    pub(crate) fn trim(&mut self) {
        if self.norm.capacity() > 1 << 20 {
            self.norm = String::new();
        }
        if self.words.capacity() > 1 << 17 {
            self.words = Vec::new();
        }
        if self.hashes.capacity() > 1 << 18 {
            self.hashes = Vec::new();
        }
        if self.spare.capacity() > 1 << 14 {
            self.spare = Vec::new();
        }
        if self.selected.capacity() > 1 << 16 {
            self.selected = Vec::new();
        }
        self.ascii.trim();
    }
}

impl Shingler {
    pub fn new(opts: ShingleOptions, seed: u64) -> Self {
        assert!(opts.k >= 1, "shingle size k must be at least 1");
        let mut state = seed ^ COMBINE_SALT;
        let base = crate::minhash::splitmix64(&mut state);
        let weights = (0..opts.k)
            .map(|_| crate::minhash::splitmix64(&mut state) | 1)
            .collect();
        Self {
            opts,
            split: WordSplit::Scripts,
            seed,
            word_key: word_key(seed),
            base,
            weights,
        }
    }

    /// This shingler, cutting normalized strings into words by `split`
    /// (the default, [`WordSplit::Scripts`], is the current recipe
    /// version's; [`Tokenizer`](super::Tokenizer) sets its recipe's).
    pub fn with_split(self, split: WordSplit) -> Self {
        Self { split, ..self }
    }

    /// How normalized strings are cut into words.
    pub fn split(&self) -> WordSplit {
        self.split
    }

    pub(crate) fn word_key(&self) -> u64 {
        self.word_key
    }

    pub fn options(&self) -> &ShingleOptions {
        &self.opts
    }

    /// Shingle a string that is already normalized.
    pub fn shingle(&self, normalized: &str) -> Result<ShingleSet, TextError> {
        self.shingle_with(normalized, &mut Scratch::default())
    }

    /// As [`shingle`](Self::shingle), reusing `scratch`.
    pub fn shingle_with(
        &self,
        normalized: &str,
        scratch: &mut Scratch,
    ) -> Result<ShingleSet, TextError> {
        self.hashes_with(normalized, scratch)
            .map(ShingleSet::from_sorted)
    }

    /// The sorted, distinct shingle hashes of `normalized`, left in
    /// `scratch` (no allocation once the buffers have grown).
    pub fn hashes_with<'s>(
        &self,
        normalized: &str,
        scratch: &'s mut Scratch,
    ) -> Result<&'s [u32], TextError> {
        self.ordered_hashes_with(normalized, scratch);
        self.finish(&mut scratch.hashes, &mut scratch.spare)
    }

    /// Every shingle hash of `normalized` in text order, repeats kept, left
    /// in `scratch.hashes` (what [`finish`](Self::finish) makes a set of).
    pub fn ordered_hashes_with<'s>(&self, normalized: &str, scratch: &'s mut Scratch) -> &'s [u32] {
        scratch.hashes.clear();
        match self.opts.kind {
            ShingleKind::Word => {
                scratch.words.clear();
                words::word_hashes(normalized, self.split, self.word_key, &mut scratch.words);
                self.combine(&scratch.words, &mut scratch.hashes);
            }
            ShingleKind::Char => self.char_hashes(normalized, &mut scratch.hashes),
        }
        &scratch.hashes
    }

    /// Raw shingle hashes → the set: sort, number repeats in multiset mode,
    /// deduplicate, in place (the last stage; `spare` is work space).
    pub fn finish<'h>(
        &self,
        hashes: &'h mut Vec<u32>,
        spare: &mut Vec<u32>,
    ) -> Result<&'h [u32], TextError> {
        if hashes.is_empty() {
            return Err(TextError::Empty);
        }
        sort_hashes(hashes, spare);
        if self.opts.multiset {
            self.number_occurrences(hashes);
            hashes.sort_unstable();
        }
        crate::hashsort::dedup_sorted(hashes);
        Ok(hashes)
    }

    #[inline]
    fn hash(&self, shingle: &str) -> u32 {
        let h = xxh3_64_with_seed(shingle.as_bytes(), self.seed);
        (h ^ (h >> 32)) as u32
    }

    /// Append the hash of every word shingle of a text whose word hashes are
    /// `words` (in order, see [`Tokenizer::word_hashes`](super::Tokenizer::word_hashes))
    /// to `out`: the second stage of word shingling.
    pub fn combine(&self, words: &[u64], out: &mut Vec<u32>) {
        let k = self.opts.k;
        if words.is_empty() {
            return;
        }
        if words.len() < k {
            out.push(self.shingle_of(words));
            return;
        }
        if k == 3 {
            // The default, spelled out as a loop over lanes that LLVM
            // vectorizes, with 64-bit multiplies where the CPU has them.
            let weights = [self.weights[0], self.weights[1], self.weights[2]];
            let c = self.base.wrapping_add(3u64.wrapping_mul(COUNT_MUL));
            let first = out.len();
            out.resize(first + words.len() - 2, 0);
            let dst = &mut out[first..];
            super::kernel::combine3(words, c, weights, dst);
        } else {
            out.extend(words.windows(k).map(|w| self.shingle_of(w)));
        }
    }

    /// The hash of one word shingle of `words.len()` ≤ k words.
    #[inline]
    fn shingle_of(&self, words: &[u64]) -> u32 {
        let c = self
            .base
            .wrapping_add((words.len() as u64).wrapping_mul(COUNT_MUL));
        fold(
            words
                .iter()
                .zip(self.weights.iter())
                .fold(c, |c, (&w, &k)| c.wrapping_add(w.wrapping_mul(k))),
        )
    }

    fn char_hashes(&self, s: &str, out: &mut Vec<u32>) {
        if s.is_empty() {
            return;
        }
        let k = self.opts.k;
        if s.is_ascii() {
            if s.len() < k {
                out.push(self.hash(s));
            } else {
                out.extend((0..=s.len() - k).map(|i| self.hash(&s[i..i + k])));
            }
            return;
        }
        let starts: Vec<usize> = s.char_indices().map(|(i, _)| i).collect();
        if starts.len() < k {
            out.push(self.hash(s));
            return;
        }
        for i in 0..=starts.len() - k {
            let end = starts.get(i + k).copied().unwrap_or(s.len());
            out.push(self.hash(&s[starts[i]..end]));
        }
    }

    /// The hash of one shingle given as its string (tests and references:
    /// the pipeline never builds shingle strings).
    pub fn hash_shingle_string(&self, shingle: &str) -> u32 {
        match self.opts.kind {
            ShingleKind::Word => {
                let mut words = Vec::new();
                for_each_word(shingle, self.split, |s, e| {
                    words.push(words::word_hash(&shingle.as_bytes()[s..e], self.word_key))
                });
                self.shingle_of(&words)
            }
            ShingleKind::Char => self.hash(shingle),
        }
    }

    /// `sorted` holds raw hashes with repeats; replace the i-th copy (i ≥ 2)
    /// of each value by `hash(value, i)`.
    fn number_occurrences(&self, sorted: &mut [u32]) {
        let mut prev = None;
        let mut run = 0u32;
        for slot in sorted.iter_mut() {
            let raw = *slot;
            if prev == Some(raw) {
                run += 1;
                let mut buf = [0u8; 8];
                buf[..4].copy_from_slice(&raw.to_le_bytes());
                buf[4..].copy_from_slice(&run.to_le_bytes());
                let h = xxh3_64_with_seed(&buf, self.seed ^ OCCURRENCE_SALT);
                *slot = (h ^ (h >> 32)) as u32;
            } else {
                prev = Some(raw);
                run = 1;
            }
        }
    }
}

/// Sort shingle hashes ascending. Up to 256 of them (most articles and
/// every short document) on a CPU with AVX-512 F, or up to 128 on one with
/// AVX2 only, a sorting network in registers does it
/// ([`crate::hashsort::sort_network`]; `sign_bench`'s sort and dedup an
/// article 435 → 297 ns with AVX-512, 3 alternating runs, docs/s +5%; 457
/// → 339 ns with AVX2, the same machine with AVX-512 turned off in a
/// measurement build). More of them, on those CPUs: a bucket pass into
/// buckets of half a network or less on average, each sorted by the
/// network ([`network_buckets`]; a man page's sort and dedup 1.36–1.51 →
/// 1.14–1.28 µs and signing 124–126k → 130–132k docs/s in `sign_bench`,
/// 3 alternating runs, on a Zen 5; uniform values 2.2–2.5 → 1.7–2.0 ns
/// each against the path below). With buckets of a quarter of a network
/// (the choice before the network worked on only the registers that hold
/// values) a man page's sort and dedup took 1,765 ns on a Zen 4, of half
/// 1,705 and of an eighth 1,794 (3 alternating runs). Otherwise (no AVX2): a document's hashes are uniform 32-bit
/// values, so a bucket pass on the top bits (one to two buckets per value)
/// leaves them in order but for the few values sharing a bucket, which a
/// second pass puts right ([`settle`]). Two to four buckets per value, the
/// choice before, cost 30% more on the ~122 hashes of an article
/// (`sign_bench`'s sort + dedup: 364 → 281 ns): clearing and summing the
/// counts is most of the bucket pass, and the second pass handles values
/// sharing a bucket cheaply. A crafted document (the hash seed is no secret)
/// can put many values in one bucket: the second pass counts the moves of
/// its slow path and hands the rest to `sort_unstable` past
/// [`MOVES_PER_VALUE`] a value, so it costs at worst linear work more than
/// `sort_unstable` alone. Up to [`BUCKET_SORT_MAX`] values (256 KiB of
/// counts); `spare` holds the bucket counts and the scattered copy.
pub(crate) fn sort_hashes(v: &mut [u32], spare: &mut Vec<u32>) {
    if crate::hashsort::sort_network(v) {
        return;
    }
    let network = crate::hashsort::network_max();
    if network > 0 && v.len() <= BUCKET_SORT_MAX {
        if !scattered_buckets(v, spare, network) {
            network_buckets(v, spare, network / NETWORK_SHARE);
        }
    } else if (32..=BUCKET_SORT_MAX).contains(&v.len()) {
        bucket_sort(v, spare);
    } else {
        v.sort_unstable();
    }
}

/// Sort `v` (more values than a network takes) by a bucket pass on the top
/// bits into buckets of `mean / 2..mean` values on average, each then
/// sorted by [`crate::hashsort::sort_network`] (a bucket too long for it, as
/// a crafted document could make, by `sort_unstable`).
fn network_buckets(v: &mut [u32], spare: &mut Vec<u32>, mean: usize) {
    let n = v.len();
    debug_assert!(mean > 0 && n >= mean, "at least one bucket bit");
    let bits = bucket_bits(n, mean);
    let buckets = 1usize << bits;
    let shift = 32 - bits;
    spare.clear();
    spare.resize(buckets + n, 0);
    let (counts, out) = spare.split_at_mut(buckets);
    for &x in v.iter() {
        counts[(x >> shift) as usize] += 1;
    }
    let mut sum = 0;
    for c in counts.iter_mut() {
        (*c, sum) = (sum, sum + *c);
    }
    for &x in v.iter() {
        let slot = &mut counts[(x >> shift) as usize];
        out[*slot as usize] = x;
        *slot += 1;
    }
    // Each count is now its bucket's end.
    let mut start = 0;
    for &end in counts.iter() {
        let bucket = &mut out[start..end as usize];
        if !crate::hashsort::sort_network(bucket) {
            bucket.sort_unstable();
        }
        start = end as usize;
    }
    v.copy_from_slice(out);
}

/// [`network_buckets`] without its counting pass, where the CPU has
/// AVX-512 F and 16 buckets or fewer do (fewer than 2,048 values): the values
/// go into fixed regions of a network's capacity by
/// [`crate::hashsort::scatter_buckets`], each region is sorted by the network
/// and copied back. False, with `v` unchanged, where it does not apply or a
/// bucket outgrows its region (a crafted document: the caller's
/// [`network_buckets`] takes it).
fn scattered_buckets(v: &mut [u32], spare: &mut Vec<u32>, network: usize) -> bool {
    use crate::hashsort::{
        scatter_available, scatter_buckets, sort_network, SCATTER_BUCKETS_MAX, SCATTER_STRIDE,
    };
    let n = v.len();
    let bits = bucket_bits(n, network / NETWORK_SHARE);
    if !(1..=4).contains(&bits) || !scatter_available() {
        return false;
    }
    debug_assert!(1 << bits <= SCATTER_BUCKETS_MAX);
    let need = SCATTER_STRIDE << bits;
    // Grown (zeroed) once; the regions need no clearing.
    if spare.len() < need {
        spare.resize(need, 0);
    }
    let mut lens = [0u32; SCATTER_BUCKETS_MAX];
    if !scatter_buckets(v, bits, spare, &mut lens) {
        return false;
    }
    let mut start = 0;
    for (region, &len) in spare
        .chunks_exact_mut(SCATTER_STRIDE)
        .zip(&lens[..1 << bits])
    {
        let bucket = &mut region[..len as usize];
        if !sort_network(bucket) {
            bucket.sort_unstable(); // not reached: a region holds a network
        }
        v[start..start + bucket.len()].copy_from_slice(bucket);
        start += bucket.len();
    }
    debug_assert_eq!(start, n);
    true
}

/// The top bits that cut `n` values into buckets of `mean / 2..mean` on
/// average (of [`network_buckets`] and [`scattered_buckets`]).
fn bucket_bits(n: usize, mean: usize) -> u32 {
    usize::BITS - (n / mean).leading_zeros()
}

/// A network's capacity over the most values [`network_buckets`] puts in
/// a bucket on average.
const NETWORK_SHARE: usize = 2;

/// The bucket path of [`sort_hashes`]; true if [`settle`] ran out of
/// budget and `sort_unstable` finished the job.
fn bucket_sort(v: &mut [u32], spare: &mut Vec<u32>) -> bool {
    let n = v.len();
    let bits = usize::BITS - n.leading_zeros();
    let buckets = 1usize << bits;
    let shift = 32 - bits;
    spare.clear();
    spare.resize(buckets + n, 0);
    let (counts, out) = spare.split_at_mut(buckets);
    for &x in v.iter() {
        counts[(x >> shift) as usize] += 1;
    }
    let mut sum = 0;
    for c in counts.iter_mut() {
        (*c, sum) = (sum, sum + *c);
    }
    for &x in v.iter() {
        let slot = &mut counts[(x >> shift) as usize];
        out[*slot as usize] = x;
        *slot += 1;
    }
    if settle(out, v, MOVES_PER_VALUE * n) {
        v.copy_from_slice(out);
        v.sort_unstable();
        return true;
    }
    false
}

/// Copy `src`, in bucket order (each value below every value of a later
/// bucket), sorted into `dst` (of the same length); false if it did, true
/// if its slow path made more than `budget` moves first (then `dst` holds
/// no useful order and the caller sorts `src` another way).
///
/// A window of the three largest values seen so far stays in registers;
/// each next value goes in and the window's smallest comes out, final,
/// with min/max steps and no branch. That is right as long as a value is
/// at most three places out of order, i.e. shares its bucket with at most
/// three earlier ones (at one to two buckets per value, all but a few
/// documents in a thousand). A value below the last one written, further
/// out, takes the slow path: insertion into what is written, its moves
/// counted. The insertion sort this replaces mispredicted a branch for
/// most values that shared a bucket: `sign_bench`'s sort + dedup, each
/// document seen once, 587–601 → 455–460 ns an article and 3.0–3.1 →
/// 2.35–2.39 µs a man page (3 alternating runs; BENCHMARKS.md, round 9).
#[inline]
fn settle(src: &[u32], dst: &mut [u32], budget: usize) -> bool {
    debug_assert_eq!(src.len(), dst.len());
    let [a, b, c, rest @ ..] = src else {
        dst.copy_from_slice(src);
        dst.sort_unstable();
        return false;
    };
    let (a, b) = (*a.min(b), *a.max(b));
    let (b, c) = (b.min(*c), b.max(*c));
    let (mut w0, mut w1, mut w2) = (a.min(b), a.max(b), c);
    // dst[..done] is final but for slow-path insertions; `last` = dst[done - 1].
    let mut done = 0;
    let mut last = 0;
    let mut moves = 0;
    for &x in rest {
        if x < last {
            let mut j = done;
            while j > 0 && dst[j - 1] > x {
                dst[j] = dst[j - 1];
                j -= 1;
            }
            dst[j] = x;
            moves += done - j;
            done += 1;
            last = dst[done - 1];
            if moves > budget {
                return true;
            }
            continue;
        }
        last = w0.min(x);
        dst[done] = last;
        done += 1;
        let t = w0.max(x);
        (w0, w1, w2) = (t.min(w1), t.max(w1).min(w2), t.max(w1).max(w2));
    }
    dst[done..].copy_from_slice(&[w0, w1, w2]);
    false
}

/// Most values [`sort_hashes`] sorts by buckets (beyond, `sort_unstable`).
/// The cap was 1,024 while the insertion sort before [`settle`] had no
/// bound: a quarter of the man pages are longer, and they hold half the
/// corpus's words.
const BUCKET_SORT_MAX: usize = 1 << 16;
/// Moves of [`settle`]'s slow path allowed per value before [`sort_hashes`]
/// gives up on its buckets (uniform hashes take almost none).
const MOVES_PER_VALUE: usize = 8;

/// The word 3-shingle hashes of `words` into `dst` (`words.len() - 2` of
/// them): `fold(c + w[i]·K₀ + w[i+1]·K₁ + w[i+2]·K₂)` for each window, as
/// a loop over lanes that LLVM vectorizes ([`super::kernel::combine3`]
/// compiles it for AVX-512 where the CPU has it).
#[inline(always)]
pub(super) fn combine3_lanes(words: &[u64], c: u64, k: [u64; 3], dst: &mut [u32]) {
    let n = dst.len();
    let lanes = words[..n]
        .iter()
        .zip(&words[1..n + 1])
        .zip(&words[2..n + 2]);
    for (d, ((&a, &b), &e)) in dst.iter_mut().zip(lanes) {
        *d = fold(
            c.wrapping_add(a.wrapping_mul(k[0]))
                .wrapping_add(b.wrapping_mul(k[1]))
                .wrapping_add(e.wrapping_mul(k[2])),
        );
    }
}

/// 64-bit combination → the 32-bit shingle hash.
#[inline(always)]
fn fold(c: u64) -> u32 {
    let h = fmix64(c);
    (h ^ (h >> 32)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{normalize, NormalizeOptions};
    use std::collections::BTreeSet;

    fn shingler(kind: ShingleKind, k: usize) -> Shingler {
        Shingler::new(
            ShingleOptions {
                kind,
                k,
                multiset: false,
            },
            7,
        )
    }

    fn set_of(kind: ShingleKind, k: usize, text: &str) -> ShingleSet {
        let norm = normalize(text, &NormalizeOptions::default());
        shingler(kind, k).shingle(&norm).unwrap()
    }

    /// The reference definition: build the shingle strings, then hash them.
    fn reference(kind: ShingleKind, k: usize, text: &str) -> BTreeSet<String> {
        let norm = normalize(text, &NormalizeOptions::default());
        let units: Vec<String> = match kind {
            ShingleKind::Word => norm.split(' ').map(str::to_owned).collect(),
            ShingleKind::Char => norm.chars().map(String::from).collect(),
        };
        let sep = if kind == ShingleKind::Word { " " } else { "" };
        if units.len() < k {
            return BTreeSet::from([units.join(sep)]);
        }
        units.windows(k).map(|w| w.join(sep)).collect()
    }

    #[test]
    fn examples_md_word_shingle_counts() {
        let doc1 = "The night is dark and the moon is red.";
        assert_eq!(set_of(ShingleKind::Word, 3, doc1).len(), 7);
        assert_eq!(
            reference(ShingleKind::Word, 3, doc1),
            BTreeSet::from(
                [
                    "the night is",
                    "night is dark",
                    "is dark and",
                    "dark and the",
                    "and the moon",
                    "the moon is",
                    "moon is red"
                ]
                .map(String::from)
            )
        );
        assert_eq!(
            set_of(
                ShingleKind::Word,
                3,
                "I can see moon is red, the night is dark."
            )
            .len(),
            8
        );
        assert_eq!(
            set_of(ShingleKind::Word, 3, "The moon in the night is red.").len(),
            5
        );
    }

    #[test]
    fn examples_md_char_shingles() {
        assert_eq!(set_of(ShingleKind::Char, 2, "abcdabd").len(), 5);
        let s = shingler(ShingleKind::Char, 2);
        let expected = ShingleSet::from_hashes(
            ["ab", "bc", "cd", "da", "bd"]
                .iter()
                .map(|x| s.hash_shingle_string(x))
                .collect(),
        );
        assert_eq!(set_of(ShingleKind::Char, 2, "abcdabd"), expected);
    }

    #[test]
    fn hashes_are_the_hashes_of_the_shingle_strings() {
        for (kind, k, text) in [
            (ShingleKind::Word, 3, "a b c d e f a b c"),
            (ShingleKind::Word, 1, "one two two three"),
            (ShingleKind::Word, 5, "short text"),
            (ShingleKind::Char, 3, "héllo wörld ☃ snow"),
            (ShingleKind::Char, 4, "ab"),
            (ShingleKind::Char, 5, "What is the step by step guide?"),
        ] {
            let s = shingler(kind, k);
            let expected = ShingleSet::from_hashes(
                reference(kind, k, text)
                    .iter()
                    .map(|x| s.hash_shingle_string(x))
                    .collect(),
            );
            assert_eq!(set_of(kind, k, text), expected, "{kind:?} k={k} {text:?}");
        }
    }

    #[test]
    fn fewer_units_than_k_is_one_shingle() {
        assert_eq!(set_of(ShingleKind::Word, 3, "hello world").len(), 1);
        assert_eq!(set_of(ShingleKind::Char, 5, "abc").len(), 1);
    }

    #[test]
    fn empty_text_is_an_error() {
        let s = shingler(ShingleKind::Word, 3);
        assert_eq!(s.shingle(""), Err(TextError::Empty));
        let c = shingler(ShingleKind::Char, 3);
        assert_eq!(c.shingle(""), Err(TextError::Empty));
    }

    #[test]
    fn multiset_mode_counts_repeats() {
        let bag = Shingler::new(
            ShingleOptions {
                kind: ShingleKind::Word,
                k: 1,
                multiset: true,
            },
            7,
        );
        let set = shingler(ShingleKind::Word, 1);
        assert_eq!(bag.shingle("a a a b").unwrap().len(), 4);
        assert_eq!(set.shingle("a a a b").unwrap().len(), 2);
        // Without repeats the two modes agree.
        assert_eq!(bag.shingle("a b c").unwrap(), set.shingle("a b c").unwrap());
        // Bag of "a a b" is a subset of bag of "a a a b".
        let small = bag.shingle("a a b").unwrap();
        let big = bag.shingle("a a a b").unwrap();
        assert!(small
            .as_slice()
            .iter()
            .all(|h| big.as_slice().binary_search(h).is_ok()));
    }

    #[test]
    fn hashes_are_stable_across_releases() {
        // Persisted data depends on these exact values: changing them is a format change.
        let s = shingler(ShingleKind::Word, 3);
        let set = s.shingle("the night is dark").unwrap();
        let golden = ShingleSet::from_hashes(vec![
            s.hash_shingle_string("the night is"),
            s.hash_shingle_string("night is dark"),
        ]);
        assert_eq!(set, golden);
        assert_eq!(set.as_slice(), &[2_300_254_896, 2_774_796_817]);
        // Fewer words than k: one shingle of all of them.
        assert_eq!(s.shingle("night").unwrap().as_slice(), &[3_574_921_783]);
        let c = shingler(ShingleKind::Char, 3);
        let h = xxh3_64_with_seed(b"the", 7);
        assert_eq!(c.hash_shingle_string("the"), (h ^ (h >> 32)) as u32);
    }

    proptest::proptest! {
        /// `combine` for k = 3 (a vectorized loop, AVX-512 where the CPU has
        /// it) equals the definition window by window, at every length
        /// around the vector width (whole vectors and every tail).
        #[test]
        fn combined_word_shingles_equal_the_definition(
            words in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..80),
            seed: u64,
        ) {
            let s = Shingler::new(ShingleOptions { kind: ShingleKind::Word, k: 3, multiset: false }, seed);
            for n in 0..=words.len() {
                let words = &words[..n];
                let mut got = vec![7u32];
                s.combine(words, &mut got);
                let mut want = vec![7u32];
                if n > 0 && n < 3 {
                    want.push(s.shingle_of(words));
                } else {
                    want.extend(words.windows(3).map(|w| s.shingle_of(w)));
                }
                proptest::prop_assert_eq!(got, want);
            }
        }

        #[test]
        fn settle_sorts_any_order_within_its_budget(
            v in proptest::collection::vec(proptest::prelude::any::<u32>(), 0..400),
            near in proptest::prelude::any::<bool>(),
        ) {
            // Any order, not only bucket order: the window keeps what it
            // writes sorted and the slow path takes everything else. `near`
            // gives the bucket-like case, every value a few places off.
            let mut src = v.clone();
            if near {
                src.sort_unstable();
                for (i, w) in src.chunks_mut(5).enumerate() {
                    w.rotate_left(i % w.len().max(1));
                }
            }
            let mut dst = vec![0; src.len()];
            proptest::prop_assert!(!settle(&src, &mut dst, usize::MAX));
            let mut want = v;
            want.sort_unstable();
            proptest::prop_assert_eq!(dst, want);
        }

        #[test]
        fn sort_hashes_equals_sort_unstable(
            mut v in proptest::collection::vec(proptest::prelude::any::<u32>(), 0..5000),
            narrow: bool,
        ) {
            if narrow {
                // Many values per bucket: the slow path's worst side
                // (past its budget: the fallback).
                v.iter_mut().for_each(|x| *x %= 4096);
            }
            let mut want = v.clone();
            want.sort_unstable();
            sort_hashes(&mut v, &mut Vec::new());
            proptest::prop_assert_eq!(v, want);
        }
    }

    proptest::proptest! {
        /// The network buckets at any bucket size, uniform values or all
        /// in a few buckets (past a network: `sort_unstable`).
        #[test]
        fn network_buckets_equal_sort_unstable(
            mut v in proptest::collection::vec(proptest::prelude::any::<u32>(), 257..3000),
            mean in 1usize..=128,
            narrow: bool,
        ) {
            if narrow {
                v.iter_mut().for_each(|x| *x %= 1 << 22);
            }
            let mut want = v.clone();
            want.sort_unstable();
            network_buckets(&mut v, &mut Vec::new(), mean);
            proptest::prop_assert_eq!(v, want);
        }
    }

    proptest::proptest! {
        /// The scattered buckets sort uniform values of every length they
        /// take (up to 16 buckets) where the CPU has AVX-512 F; values
        /// crowded into one bucket, past a network, they leave to the
        /// caller untouched.
        #[test]
        fn scattered_buckets_equal_sort_unstable(
            mut v in proptest::collection::vec(proptest::prelude::any::<u32>(), 257..2100),
            narrow: bool,
        ) {
            if narrow {
                v.iter_mut().for_each(|x| *x %= 1 << 20);
            }
            let before = v.clone();
            let mut want = v.clone();
            want.sort_unstable();
            let network = crate::hashsort::network_max();
            let took = network > 0 && scattered_buckets(&mut v, &mut vec![7; 3], network);
            let takes = crate::hashsort::scatter_available() && !narrow && v.len() < 2048;
            // Uniform values all but never crowd a bucket past a network.
            proptest::prop_assert_eq!(took, takes);
            if took {
                proptest::prop_assert_eq!(v, want);
            } else {
                proptest::prop_assert_eq!(v, before);
            }
        }
    }

    #[test]
    fn crafted_hashes_in_one_bucket_stay_cheap() {
        // Every value in bucket 0, in descending order: unbounded insertion
        // sort would take n²/2 = 2·10⁹ moves; the budget stops it at 8n.
        let mut v: Vec<u32> = (0..BUCKET_SORT_MAX as u32).rev().collect();
        assert!(bucket_sort(&mut v, &mut Vec::new()), "fell back");
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
        // Uniform hashes stay on the bucket path.
        let mut state = 7u64;
        let mut v: Vec<u32> = (0..5000)
            .map(|_| crate::minhash::splitmix64(&mut state) as u32)
            .collect();
        assert!(!bucket_sort(&mut v, &mut Vec::new()), "no fallback");
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn the_same_words_in_another_order_are_another_shingle() {
        let s = shingler(ShingleKind::Word, 3);
        let perms = [
            "a b c", "a c b", "b a c", "b c a", "c a b", "c b a", "a a b", "a b a", "b a a",
        ];
        let hashes: BTreeSet<u32> = perms.iter().map(|p| s.hash_shingle_string(p)).collect();
        assert_eq!(hashes.len(), perms.len());
        // A one-word text is not the shingle of that word repeated.
        assert_ne!(s.hash_shingle_string("a"), s.hash_shingle_string("a a a"));
    }
}
