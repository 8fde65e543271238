//! Boilerplate: document frequency, what it makes common, and the scores
//! that leave common text out.
//!
//! ```text
//!   every stored record's shingles ─count→ df(x): how many documents hold x
//!   registered templates' shingles ─────────┐
//!   df(x) ≥ max(min_docs, ⌈share · N⌉), N ≥ min_collection_docs ─┴→ x is boilerplate
//!   content scores: Jaccard and containments over the shingles that are not;
//!   weighted Jaccard: each shingle weighted by idf(x) = ln((N + 1) / (df(x) + 1)) + 1,
//!   boilerplate 0
//! ```
//!
//! **Exact counts.** [`Frequencies`] holds `df` for every distinct shingle
//! of the stored documents (expired ones count until they are purged, like
//! `N`), in shards of `u32 → u32` maps, ~9–18 bytes a distinct shingle
//! (the table's load). It is an option of a collection
//! (`index.boilerplate.enabled`): off, it holds nothing and writes skip it.
//! It is not written to the log or snapshots: a restart counts it again
//! from the restored records, so it is exactly as durable as they are.
//!
//! **Exact under concurrency.** A write counts its record in the same step
//! that puts it in the slot table, and a release uncounts it in the step
//! that takes it out, each under the read side of a gate; switching the
//! counts on (a count of every record in the slot table) or off (clearing
//! them) takes the write side. So every record in the table is counted
//! exactly once while the option is on, whatever races the switch.

use super::query::{Match, Query};
use super::{Engine, Record};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

/// `index.boilerplate`: whether a collection counts document frequency,
/// and what count makes a shingle boilerplate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BoilerplateParams {
    /// Count document frequency (content scores, common passages).
    pub enabled: bool,
    /// A shingle held by at least this share of the documents is
    /// boilerplate (0 < share ≤ 1)…
    pub share: f64,
    /// …and by at least this many (≥ 2).
    pub min_docs: usize,
    /// No shingle is boilerplate by its count until the collection holds
    /// this many documents (templates apply from the first).
    pub min_collection_docs: usize,
}

impl Default for BoilerplateParams {
    fn default() -> Self {
        Self {
            enabled: false,
            share: 0.05,
            min_docs: 10,
            min_collection_docs: 50,
        }
    }
}

impl BoilerplateParams {
    /// Check the values (a share outside (0, 1], a count of 1 or less).
    pub fn check(&self) -> Result<(), String> {
        if !(self.share > 0.0 && self.share <= 1.0) {
            return Err(format!(
                "index.boilerplate.share must be greater than 0 and at most 1, got {}",
                self.share
            ));
        }
        if self.min_docs < 2 {
            return Err(format!(
                "index.boilerplate.min_docs must be at least 2 (a shingle of one document is never common), got {}",
                self.min_docs
            ));
        }
        Ok(())
    }

    /// The document count from which a shingle is boilerplate in a
    /// collection of `docs` documents, or `None` while counts do not apply.
    pub fn threshold_docs(&self, docs: usize) -> Option<u32> {
        if docs < self.min_collection_docs.max(1) {
            return None;
        }
        let by_share = (self.share * docs as f64 - 1e-9).ceil().max(0.0) as usize;
        Some(by_share.max(self.min_docs).min(u32::MAX as usize) as u32)
    }
}

/// A registered template: a text whose shingles are always boilerplate in
/// its collection (a footer, a disclaimer, a signature block).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Template {
    pub id: String,
    pub text: String,
    /// When it was stored (ms since the epoch).
    pub created_ms: u64,
}

/// Most templates a collection holds.
pub const MAX_TEMPLATES: usize = 100;

/// Content scores of a pair: the raw scores over the shingles that are not
/// boilerplate, and the idf-weighted Jaccard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ContentScores {
    /// |Qc ∩ Dc| / |Qc ∪ Dc| (0 when both are all boilerplate).
    pub jaccard: f64,
    /// |Qc ∩ Dc| / |Qc|.
    pub query_in_stored: f64,
    /// |Qc ∩ Dc| / |Dc|.
    pub stored_in_query: f64,
    /// Σ_{Q∩D} w / Σ_{Q∪D} w, w = idf for content shingles, 0 for boilerplate.
    pub weighted_jaccard: f64,
    /// Shared shingles that are content.
    pub shared_content: usize,
    /// Shared shingles that are boilerplate.
    pub shared_boilerplate: usize,
}

/// What decides boilerplate at one instant: the templates' shingles, the
/// count from which a shingle is common, and the document count.
#[derive(Clone, Debug, Default)]
pub struct Classifier {
    pub templates: Arc<HashSet<u32>>,
    /// `None`: counts do not apply (off, or a collection below its minimum).
    pub at: Option<u32>,
    pub docs: usize,
}

impl Classifier {
    /// Whether a shingle held by `df` documents is boilerplate.
    #[inline]
    pub fn is_boilerplate(&self, x: u32, df: u32) -> bool {
        self.at.is_some_and(|at| df >= at) || self.templates.contains(&x)
    }

    /// The shingles of `sorted` that are content, their frequencies read
    /// from `df`.
    pub fn content_keys(&self, sorted: &[u32], df: &dyn DfLookup) -> Vec<u32> {
        sorted
            .iter()
            .zip(df.df_of(sorted))
            .filter(|&(&x, n)| !self.is_boilerplate(x, n))
            .map(|(&x, _)| x)
            .collect()
    }

    /// A content shingle's weight.
    #[inline]
    pub fn idf(&self, df: u32) -> f64 {
        ((self.docs as f64 + 1.0) / (f64::from(df) + 1.0)).ln() + 1.0
    }

    /// The content scores of two sorted, distinct sets, given each
    /// element's document frequency (`q_df[i]` of `q[i]`).
    pub fn scores(&self, q: &[u32], q_df: &[u32], d: &[u32], d_df: &[u32]) -> ContentScores {
        let side = self.side(q, q_df);
        self.scores_with(q, q_df, &side, d, |_, at| {
            at.iter().map(|&k| d_df[k as usize]).collect()
        })
    }

    /// One side's totals: how many of `xs` are content and their idf
    /// weight (`df[i]` is `xs[i]`'s frequency).
    pub fn side(&self, xs: &[u32], df: &[u32]) -> Side {
        let mut side = Side::default();
        for (&x, &n) in xs.iter().zip(df) {
            if !self.is_boilerplate(x, n) {
                side.content += 1;
                side.weight += fixed(self.idf(n));
            }
        }
        side
    }

    /// The content scores of `q` (its frequencies `q_df`, its totals
    /// `side`) against `d`, where only the frequencies of `d`'s shingles
    /// that are not in `q` are read: `rest_df(rest, at)` gives those of
    /// `rest` (sorted), which are `d[at[k]]`. A shared shingle's frequency
    /// is the query's. The one computation of content scores, so every
    /// caller gets the same bits.
    pub fn scores_with(
        &self,
        q: &[u32],
        q_df: &[u32],
        side: &Side,
        d: &[u32],
        rest_df: impl FnOnce(&[u32], &[u32]) -> Vec<u32>,
    ) -> ContentScores {
        let (mut sc, mut sb, mut w_shared) = (0usize, 0usize, 0u64);
        let mut rest = Vec::with_capacity(d.len());
        let mut at = Vec::with_capacity(d.len());
        let mut i = 0;
        for (k, &x) in d.iter().enumerate() {
            while i < q.len() && q[i] < x {
                i += 1;
            }
            if i < q.len() && q[i] == x {
                let n = q_df[i];
                if self.is_boilerplate(x, n) {
                    sb += 1;
                } else {
                    sc += 1;
                    w_shared += fixed(self.idf(n));
                }
                i += 1;
            } else {
                rest.push(x);
                at.push(k as u32);
            }
        }
        let df = rest_df(&rest, &at);
        let rest_side = self.side(&rest, &df);
        let (qc, dc) = (side.content, sc + rest_side.content);
        let w_union = side.weight + rest_side.weight;
        let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        ContentScores {
            jaccard: ratio(sc, qc + dc - sc),
            query_in_stored: ratio(sc, qc),
            stored_in_query: ratio(sc, dc),
            weighted_jaccard: if w_union > 0 {
                w_shared as f64 / w_union as f64
            } else {
                0.0
            },
            shared_content: sc,
            shared_boilerplate: sb,
        }
    }
}

/// A weight in fixed point (units of 2⁻³²), so that sums are exact and do
/// not depend on their order: the scores of (a, b) and of (b, a) are the
/// same bits whichever side's totals were worked out first. An idf is
/// below 2⁶ (ln of a count below 2⁶⁴, plus 1), so a sum of 2²⁵ of them fits;
/// it is at least 1 while a count is at most the documents counted (a
/// negative one, never seen, would count as 0).
#[inline]
fn fixed(w: f64) -> u64 {
    (w * 4_294_967_296.0).round() as u64
}

/// One side of content scores: how many shingles are content, and the sum
/// of their idf weights.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Side {
    pub content: usize,
    /// Σ idf in units of 2⁻³² (see `fixed`).
    pub weight: u64,
}

use super::counts::{CountTable, SHARD_BITS};

#[derive(Default)]
#[repr(align(64))]
struct Shard(RwLock<CountTable>);

/// Shards [`Frequencies::count_fresh`] counts at a time (of 2^SHARD_BITS).
const FRESH_GROUP: usize = 8;

/// Bits of a shingle after the shard's that group a batch's values before
/// they are counted ([`Frequencies::count_all`]): 2^10 groups in all, so
/// the grouping's scatter writes to few enough places at once to stay in
/// the core's first cache, and a region (a 16th of a shard's table) is
/// small enough for the second. 4 counted ~9% faster than 8 (2^14
/// groups) on one thread, 0, 2 and 6 slower (docs/benchmarks.md, stop 68).
const REGION_BITS: u32 = 4;

/// The top bits of a shingle that group a batch's values: shard and region.
pub(crate) const GROUP_BITS: u32 = SHARD_BITS + REGION_BITS;

/// A sorted slice cut into its runs of one shard: (shard, run).
fn shard_runs(sorted: &[u32]) -> impl Iterator<Item = (usize, &[u32])> {
    sorted
        .chunk_by(|a, b| Frequencies::shard(*a) == Frequencies::shard(*b))
        .map(|run| (Frequencies::shard(run[0]), run))
}

/// Count `sets` (each a document's sorted, distinct shingles) into fresh
/// tables, `batch` documents at a time as write batches count them, and
/// give the distinct shingles counted: the count alone, for
/// `examples/boilerplate_bench` (which times it on one thread).
#[doc(hidden)]
pub fn count_in_batches(sets: &[&[u32]], batch: usize) -> usize {
    let counts = Frequencies::new(true);
    for chunk in sets.chunks(batch.max(1)) {
        counts.count_documents(chunk);
    }
    counts.distinct()
}

/// Exact document frequency of every distinct shingle (see the module docs).
pub(crate) struct Frequencies {
    shards: Box<[Shard]>,
    /// Documents counted (N).
    docs: AtomicUsize,
    on: AtomicBool,
    gate: RwLock<()>,
}

impl Frequencies {
    pub(crate) fn new(on: bool) -> Self {
        Self {
            shards: (0..1usize << SHARD_BITS)
                .map(|_| Shard::default())
                .collect(),
            docs: AtomicUsize::new(0),
            on: AtomicBool::new(on),
            gate: RwLock::new(()),
        }
    }

    #[inline]
    fn shard(x: u32) -> usize {
        (x >> (32 - SHARD_BITS)) as usize
    }

    pub(crate) fn set_flag(&self, on: bool) {
        self.on.store(on, Ordering::Release);
    }

    pub(crate) fn is_on(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    /// Run `step` (putting a record in the slot table) and count `record`
    /// if the counts are on, as one step against a switch.
    #[inline]
    pub(crate) fn admit<T>(&self, record: &Record, step: impl FnOnce() -> T) -> T {
        let _gate = self.gate.read().expect("df gate");
        let out = step();
        if self.is_on() {
            self.add(record.shingles(), 1);
        }
        out
    }

    /// [`Self::admit`] of a batch: `step` puts them all in the slot table,
    /// then their shingles are counted shard by shard (each shard locked
    /// once, the shards on the rayon pool) while `beside` runs (the
    /// batch's index inserts: the count and the indexes take their own
    /// locks, so neither waits for the other, and the pool's threads take
    /// whichever has work left).
    pub(crate) fn admit_many<T>(
        &self,
        records: &[&Record],
        step: impl FnOnce(),
        beside: impl FnOnce() -> T + Send,
    ) -> T
    where
        T: Send,
    {
        let _gate = self.gate.read().expect("df gate");
        step();
        if self.is_on() && !records.is_empty() {
            let ((), out) = rayon::join(
                || self.count_all(records.iter().map(|r| r.shingles())),
                beside,
            );
            self.docs.fetch_add(records.len(), Ordering::Relaxed);
            out
        } else {
            beside()
        }
    }

    /// Run `step` (taking a record out of the slot table) and uncount what
    /// it took, as one step against a switch.
    #[inline]
    pub(crate) fn release<T>(
        &self,
        step: impl FnOnce() -> Option<T>,
        record: impl Fn(&T) -> &Record,
    ) -> Option<T> {
        let _gate = self.gate.read().expect("df gate");
        let out = step()?;
        if self.is_on() {
            self.add(record(&out).shingles(), -1);
        }
        Some(out)
    }

    /// Count (`by` = 1) or uncount (−1) one document's sorted, distinct
    /// shingles: runs of one shard under one lock.
    fn add(&self, shingles: &[u32], by: i32) {
        for (s, run) in shard_runs(shingles) {
            let mut map = self.shards[s].0.write().expect("df shard");
            if by > 0 {
                map.add_each(run);
            } else {
                map.sub_each(run);
            }
        }
        if by > 0 {
            self.docs.fetch_add(1, Ordering::Relaxed);
        } else {
            self.docs.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Switch the counts on, counting every record `all` gives (the slot
    /// table's, read under the gate), or off, dropping them.
    pub(crate) fn switch(&self, on: bool, all: impl FnOnce() -> Vec<Arc<Record>>) {
        let _gate = self.gate.write().expect("df gate");
        if self.on.swap(on, Ordering::AcqRel) == on {
            return;
        }
        for shard in self.shards.iter() {
            *shard.0.write().expect("df shard") = CountTable::default();
        }
        self.docs.store(0, Ordering::Relaxed);
        if on {
            let records = all();
            self.count_fresh(&records);
            self.docs.store(records.len(), Ordering::Relaxed);
        }
    }

    /// Count every record of `records` into empty tables (a switch on).
    /// A group of [`FRESH_GROUP`] shards at a time,
    /// so the values held at once are that share of all of them (a
    /// record's sorted shingles hold each group's as one run, taken from
    /// a cursor per record); each shard's values sorted and counted
    /// ([`Self::count_into`]), with room made for exactly its distinct
    /// shingles before the first add (the table is empty: no probe needed).
    fn count_fresh(&self, records: &[Arc<Record>]) {
        use rayon::prelude::*;
        // Records a task scatters (each keeps its own per-shard runs).
        const CHUNK: usize = 4096;
        let mut cursors = vec![0u32; records.len()];
        for group in (0..self.shards.len()).step_by(FRESH_GROUP) {
            let end = group + FRESH_GROUP;
            let pieces: Vec<Vec<Vec<u32>>> = records
                .par_chunks(CHUNK)
                .zip(cursors.par_chunks_mut(CHUNK))
                .map(|(records, cursors)| {
                    let mut by_shard = vec![Vec::new(); FRESH_GROUP];
                    for (record, cursor) in records.iter().zip(cursors) {
                        let set = record.shingles();
                        let from = *cursor as usize;
                        let to = from + set[from..].partition_point(|&x| Self::shard(x) < end);
                        for (s, run) in shard_runs(&set[from..to]) {
                            by_shard[s - group].extend_from_slice(run);
                        }
                        *cursor = to as u32;
                    }
                    by_shard
                })
                .collect();
            (0..FRESH_GROUP).into_par_iter().for_each(|k| {
                let mut xs: Vec<u32> = Vec::with_capacity(pieces.iter().map(|p| p[k].len()).sum());
                for p in &pieces {
                    xs.extend_from_slice(&p[k]);
                }
                self.count_into(group + k, &mut xs);
            });
        }
    }

    /// Count the shingles of many documents. Not sorted: grouped by
    /// shard and by the top [`REGION_BITS`] bits after the shard's in one
    /// counting sort over the whole batch (a histogram pass, then each
    /// value written once to its group), so each shard's values are one
    /// slice, counted on the rayon pool under one lock a shard, a region
    /// (a 16th of the shard's table) at a time, in address order. Within
    /// a region the keys are far enough apart that order would not save a
    /// miss, and the prefetch ahead overlaps them (as many as the core
    /// keeps in flight: the limit of this loop, docs/benchmarks.md, stops
    /// 63, 67 and 68).
    fn count_all<'a>(&self, sets: impl Iterator<Item = &'a [u32]>) {
        use rayon::prelude::*;
        let group = |x: u32| (x >> (32 - GROUP_BITS)) as usize;
        let sets: Vec<&[u32]> = sets.collect();
        // Positions are u32 (a histogram a quarter the size of usize's):
        // a batch beyond that is counted in halves.
        if sets.len() > 1 && sets.iter().map(|s| s.len()).sum::<usize>() > u32::MAX as usize {
            let (a, b) = sets.split_at(sets.len() / 2);
            self.count_all(a.iter().copied());
            self.count_all(b.iter().copied());
            return;
        }
        // ends[g + 1] counts group g's values, then (summed) is where group
        // g ends; `next` is where each group's next value goes.
        let mut ends = vec![0u32; (1 << GROUP_BITS) + 1];
        for set in &sets {
            for &x in *set {
                ends[group(x) + 1] += 1;
            }
        }
        for g in 1..ends.len() {
            ends[g] += ends[g - 1];
        }
        let total = ends[ends.len() - 1] as usize;
        if total == 0 {
            return;
        }
        let mut next = ends[..ends.len() - 1].to_vec();
        let mut grouped = vec![0u32; total];
        for set in &sets {
            for &x in *set {
                let at = &mut next[group(x)];
                grouped[*at as usize] = x;
                *at += 1;
            }
        }
        let per_shard = 1usize << REGION_BITS;
        (0..self.shards.len()).into_par_iter().for_each(|s| {
            let from = ends[s * per_shard] as usize;
            let to = ends[(s + 1) * per_shard] as usize;
            if from < to {
                let mut map = self.shards[s].0.write().expect("df shard");
                map.add_all(&grouped[from..to], |&x| (x, 1));
            }
        });
    }

    /// Count shard `s`'s values `xs` on a switch (any order; sorted here,
    /// by radix, so that room is made for exactly the distinct keys: a
    /// whole shard's values hold each key many times).
    fn count_into(&self, s: usize, xs: &mut [u32]) {
        if xs.is_empty() {
            return;
        }
        radsort::sort(xs);
        let runs: Vec<&[u32]> = xs.chunk_by(|a, b| a == b).collect();
        let mut map = self.shards[s].0.write().expect("df shard");
        // The table is empty (a switch): room for exactly the distinct keys.
        map.reserve(runs.len());
        map.add_all(&runs, |run| (run[0], run.len() as u32));
    }

    /// Count whole documents (each a sorted, distinct shingle set) fed
    /// from outside an engine's slot table: a backend that keeps a node's
    /// own copy of counts shared through a log (the redis backend's
    /// `DfTail`). As a batch insert counts ([`Self::count_all`]).
    pub(crate) fn count_documents(&self, sets: &[&[u32]]) {
        if sets.is_empty() {
            return;
        }
        self.count_all(sets.iter().copied());
        self.docs.fetch_add(sets.len(), Ordering::Relaxed);
    }

    /// Uncount one document counted by [`Self::count_documents`].
    pub(crate) fn uncount_document(&self, shingles: &[u32]) {
        self.add(shingles, -1);
    }

    /// Document frequencies of sorted shingles into `out` (one lock a shard run).
    pub(crate) fn lookup_sorted(&self, shingles: &[u32], out: &mut Vec<u32>) {
        out.clear();
        out.reserve(shingles.len());
        for (s, run) in shard_runs(shingles) {
            let map = self.shards[s].0.read().expect("df shard");
            map.get_each(run, out);
        }
    }

    pub(crate) fn docs(&self) -> usize {
        self.docs.load(Ordering::Relaxed)
    }

    /// Distinct shingles counted.
    pub(crate) fn distinct(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.0.read().expect("df shard").len())
            .sum()
    }

    /// Heap bytes of the count maps (capacity × (entry + control byte)).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.0.read().expect("df shard").heap_bytes())
            .sum()
    }

    /// Every shingle held by at least `at` documents, with its count.
    pub(crate) fn at_least(&self, at: u32) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        for s in self.shards.iter() {
            let map = s.0.read().expect("df shard");
            out.extend(map.iter().filter(|&(_, n)| n >= at));
        }
        out
    }
}

impl Engine {
    /// Whether the collection counts document frequency.
    pub fn boilerplate_on(&self) -> bool {
        self.frequencies.is_on()
    }

    /// Switch document frequency on (counting every stored record) or off.
    pub fn set_boilerplate(&self, on: bool) {
        self.frequencies.switch(on, || self.docs.records());
    }

    /// The boilerplate rule in force (`index.boilerplate`, which a settings
    /// change may replace without a reindex).
    pub fn boilerplate_params(&self) -> BoilerplateParams {
        self.boilerplate_params
            .read()
            .expect("boilerplate params")
            .clone()
    }

    /// Replace the rule's numbers (not whether counts are kept: see
    /// [`Self::set_boilerplate`]).
    pub fn set_boilerplate_params(&self, params: BoilerplateParams) {
        *self.boilerplate_params.write().expect("boilerplate params") = params;
        // Content scores change: cached scans are stale.
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Replace the registered templates' shingles.
    pub fn set_templates(&self, shingles: HashSet<u32>) {
        *self.templates.write().expect("templates") = Arc::new(shingles);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Make `templates` the registered ones: every shingle of their texts
    /// (under this recipe) is boilerplate from now on. A text with nothing
    /// left after normalization adds nothing.
    pub fn use_templates(&self, templates: &[Template]) {
        let mut set = HashSet::new();
        for t in templates {
            if let Ok(p) = self.prepare(&t.text) {
                set.extend(p.shingles().iter().copied());
            }
        }
        self.set_templates(set);
    }

    /// Set whether document frequency is counted without counting or
    /// dropping anything (a backend that counts it outside the engine).
    pub fn set_boilerplate_flag(&self, on: bool) {
        self.frequencies.set_flag(on);
    }

    /// The templates' shingles.
    pub fn templates(&self) -> Arc<HashSet<u32>> {
        Arc::clone(&self.templates.read().expect("templates"))
    }

    /// What decides boilerplate now, from this engine's counts; `docs`
    /// overrides the document count (a backend that counts elsewhere).
    pub fn classifier_with(&self, docs: usize) -> Classifier {
        let params = self.boilerplate_params();
        Classifier {
            templates: self.templates(),
            at: params.threshold_docs(docs),
            docs,
        }
    }

    /// [`Self::classifier_with`] this engine's own count.
    pub fn classifier(&self) -> Classifier {
        if self.boilerplate_on() {
            self.classifier_with(self.frequencies.docs())
        } else {
            Classifier {
                templates: self.templates(),
                at: None,
                docs: self.frequencies.docs(),
            }
        }
    }

    /// Document frequencies of sorted shingles, from this engine's counts.
    pub fn doc_frequencies(&self, shingles: &[u32]) -> Vec<u32> {
        let mut out = Vec::new();
        self.frequencies.lookup_sorted(shingles, &mut out);
        out
    }

    /// Documents counted (N).
    pub fn counted_docs(&self) -> usize {
        self.frequencies.docs()
    }

    /// Distinct shingles counted.
    pub fn distinct_shingles(&self) -> usize {
        self.frequencies.distinct()
    }

    /// Every shingle at or above `at` documents, with its count.
    pub fn common_shingles(&self, at: u32) -> Vec<(u32, u32)> {
        self.frequencies.at_least(at)
    }

    /// Heap bytes of the document-frequency counts.
    pub fn frequency_bytes(&self) -> usize {
        self.frequencies.heap_bytes()
    }
}

/// Document frequencies of sorted shingles, from wherever they are counted
/// (this engine's counts, or a map a backend read for a query).
pub trait DfLookup: Sync {
    fn df_of(&self, sorted: &[u32]) -> Vec<u32>;
}

impl DfLookup for Frequencies {
    fn df_of(&self, sorted: &[u32]) -> Vec<u32> {
        let mut out = Vec::new();
        self.lookup_sorted(sorted, &mut out);
        out
    }
}

impl<S: std::hash::BuildHasher + Sync> DfLookup for HashMap<u32, u32, S> {
    fn df_of(&self, sorted: &[u32]) -> Vec<u32> {
        sorted
            .iter()
            .map(|x| self.get(x).copied().unwrap_or(0))
            .collect()
    }
}

/// What a query on content scores carries: the rule at its instant, its
/// own shingles' frequencies, and where the others' are read.
pub struct ContentQuery<'a> {
    pub classifier: Classifier,
    /// The query's shingles' frequencies and its totals, read from `df`
    /// when the first candidate is scored (a query with no candidate reads
    /// none).
    pub q_df: std::sync::OnceLock<(Vec<u32>, Side)>,
    pub df: &'a dyn DfLookup,
}

impl ContentQuery<'_> {
    /// How many of `record`'s fingerprints are content.
    pub fn content_fingerprints(&self, record: &Record) -> usize {
        let fps: Vec<u32> = record.fingerprints().collect();
        self.classifier.content_keys(&fps, self.df).len()
    }

    /// The content scores of the query (`shingles`) against `record`: of
    /// the record's shingles, only those the query lacks are looked up
    /// (a shared one's frequency is the query's).
    pub fn scores(&self, shingles: &[u32], record: &Record) -> ContentScores {
        let (q_df, side) = self.q_df.get_or_init(|| {
            let df = self.df.df_of(shingles);
            let side = self.classifier.side(shingles, &df);
            (df, side)
        });
        self.classifier
            .scores_with(shingles, q_df, side, record.shingles(), |rest, _| {
                self.df.df_of(rest)
            })
    }
}

impl Engine {
    /// Verify `record` against a query on content scores: the exact match
    /// (raw and content scores), or `None` (below, expired, older than
    /// `since`). Shared by every backend; its caller has checked `q`'s
    /// metadata filter.
    pub fn judge_content(
        &self,
        shingles: &[u32],
        signature: &[u32],
        record: &Record,
        q: &Query,
        content: &ContentQuery<'_>,
        now: u64,
    ) -> Option<Match> {
        if !self.is_live(record, now) || !q.recent(record) {
            return None;
        }
        let scores = content.scores(shingles, record);
        if q.measure.content_score(&scores) < q.threshold.value() {
            return None;
        }
        // Every shared shingle is content or boilerplate.
        let intersection = scores.shared_content + scores.shared_boilerplate;
        let overlap = crate::jaccard::Overlap {
            intersection,
            union: shingles.len() + record.shingles().len() - intersection,
        };
        let mut m = Match::with_intersection(
            record,
            shingles.len(),
            overlap.intersection,
            overlap.jaccard(),
            crate::minhash::estimate(signature, record.signature()),
        );
        m.content = Some(scores);
        Some(m)
    }

    /// Add the content scores to matches found on raw scores, when the
    /// collection counts document frequency (each match's current record
    /// is read again; one that has gone keeps none).
    pub fn attach_content(&self, shingles: &[u32], matches: &mut [Match]) {
        if !self.boilerplate_on() || matches.is_empty() {
            return;
        }
        let content = ContentQuery {
            classifier: self.classifier(),
            q_df: Default::default(),
            df: &self.frequencies,
        };
        for m in matches.iter_mut() {
            if let Some(record) = self.get(m.id.as_str()) {
                m.content = Some(content.scores(shingles, &record));
            }
        }
    }
}
