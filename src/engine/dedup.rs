//! Corpus-wide deduplication: every verified pair, and the groups they form.
//!
//! ```text
//!   slots 0..n ─chunks (rayon, every core)─▶ LSH candidates with a higher slot
//!             ─exact Jaccard ≥ t─▶ edges ─bounded channel─▶ caller's sink
//!   groups: edges ─union-find over slots─▶ connected components ≥ min_size
//! ```
//!
//! Each unordered pair is verified once: a document looks only at
//! candidates in a higher slot (band collisions are symmetric, so the lower
//! slot always sees the higher one). Workers hand edges over in chunks
//! through a channel of a few chunks, so memory stays bounded however many
//! pairs there are, and a sink that stops (a client that hung up) stops the
//! workers. The scan takes each map guard for one lookup only, so writes and
//! queries go on while it runs; documents written during a scan may or may
//! not be part of its answer, and every edge it reports was verified against
//! the stored version of both documents at the time.
//!
//! A group keeps `Arc`s of its members' records, so a page of groups stays
//! valid (ids, best matches) even if a member is deleted afterwards; the
//! memory held is that of the duplicates only, never of the whole corpus.

use super::filter::{FilterSpec, MetaFilter};
use super::postings::SlotLists;
use super::query::{Measure, Verdict, PREFETCH_WINDOW};
use super::slot_counter::DenseCounter;
use super::{By, Engine, ExcludedPairs, Record, Threshold};
use crate::lsh::index::Slot;
use rayon::prelude::*;
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

/// Slots one worker scans before handing its edges over.
const CHUNK_SLOTS: usize = 1024;
/// Chunks of edges in flight between the workers and the sink.
const CHANNEL_CHUNKS: usize = 8;

/// One verified pair, `a`'s id before `b`'s.
#[derive(Clone, Debug)]
pub struct Edge {
    pub a: Arc<Record>,
    pub b: Arc<Record>,
    /// Exact Jaccard similarity of the shingle sets.
    pub jaccard: f64,
    /// Exact |A ∩ B| / |A|: how much of `a` is in `b`.
    pub a_in_b: f64,
    /// Exact |A ∩ B| / |B|.
    pub b_in_a: f64,
    /// The slots `a` and `b` were read from.
    slots: (Slot, Slot),
    /// Scores over content shingles (`query_in_stored`: `a` in `b`), when
    /// the scan was on content scores.
    pub content: Option<super::ContentScores>,
}

impl Edge {
    /// The larger containment: either text inside the other.
    pub fn containment(&self) -> f64 {
        self.a_in_b.max(self.b_in_a)
    }

    /// The score a scan by `by` ranks by.
    pub fn score(&self, by: impl Into<By>) -> f64 {
        let by = by.into();
        match (by.score, &self.content, by.measure) {
            (super::Score::Content, Some(c), Measure::Jaccard) => c.jaccard,
            (super::Score::Content, Some(c), _) => c.query_in_stored.max(c.stored_in_query),
            (super::Score::Content, None, _) => 0.0,
            (super::Score::Raw, _, Measure::Jaccard) => self.jaccard,
            (super::Score::Raw, _, _) => self.containment(),
        }
    }

    /// Attach content scores computed with `x` as the query side.
    pub fn set_content(&mut self, x: &Record, mut scores: super::ContentScores) {
        if !std::ptr::eq(&*self.a, x) {
            std::mem::swap(&mut scores.query_in_stored, &mut scores.stored_in_query);
        }
        self.content = Some(scores);
    }

    /// The edge between `x` and `y`, which share `intersection` shingles
    /// (for a backend that finds pairs outside the engine).
    pub fn new(x: Arc<Record>, y: Arc<Record>, intersection: usize) -> Self {
        Self::between(x, 0, y, 0, intersection)
    }

    /// The edge between `x` (in slot `sx`) and `y` with `intersection`
    /// shared shingles, `a` the one with the smaller id.
    fn between(x: Arc<Record>, sx: Slot, y: Arc<Record>, sy: Slot, intersection: usize) -> Self {
        let (nx, ny) = (x.shingles().len(), y.shingles().len());
        let union = nx + ny - intersection;
        let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        let jaccard = ratio(intersection, union);
        let (x_in_y, y_in_x) = (ratio(intersection, nx), ratio(intersection, ny));
        if x.id() < y.id() {
            Edge {
                a: x,
                b: y,
                jaccard,
                a_in_b: x_in_y,
                b_in_a: y_in_x,
                slots: (sx, sy),
                content: None,
            }
        } else {
            Edge {
                a: y,
                b: x,
                jaccard,
                a_in_b: y_in_x,
                b_in_a: x_in_y,
                slots: (sy, sx),
                content: None,
            }
        }
    }
}

/// What a scan did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Stored documents visited.
    pub documents: usize,
    /// Candidate pairs verified exactly.
    pub candidates: usize,
    /// Pairs at or above the threshold (those excluded not counted).
    pub pairs: usize,
    /// Pairs at or above the threshold left out because they are in the
    /// scan's [`ExcludedPairs`] (judged not duplicates).
    pub excluded: usize,
    /// False when the sink stopped the scan early.
    pub complete: bool,
}

/// What every chunk of a scan by containment or content scores shares.
struct ContainedScan<'a> {
    span: usize,
    threshold: Threshold,
    by: By,
    filter: Option<&'a Arc<FilterSpec>>,
    /// On raw scores, the passage index's lists by slot, made once.
    lists: Option<SlotLists>,
    /// Buffers chunks take and give back: one a thread at most (a
    /// [`DenseCounter`] is 4 bytes a slot).
    work: std::sync::Mutex<Vec<PairWork>>,
}

/// A [`PairWork::order`] entry is a part's length (capped at
/// [`ORDER_LEN_MAX`]) shifted above its index; a document with more parts
/// than [`ORDER_INDEX`] reads them in their own order.
const ORDER_SHIFT: u32 = 20;
const ORDER_INDEX: u32 = (1 << ORDER_SHIFT) - 1;
const ORDER_LEN_MAX: u32 = u32::MAX >> ORDER_SHIFT;

/// Buffers a containment scan keeps from one document to the next: those
/// of [`Engine::contained_candidates`], and the window of documents
/// [`Engine::verify_window`] verifies together.
#[derive(Default)]
struct PairWork {
    /// The document's parts of lists ([`SlotLists::after`]), shortest
    /// first: each as its length above its index ([`ORDER_INDEX`]).
    order: Vec<u32>,
    counter: DenseCounter,
    /// Documents waiting to be verified, each its slot followed by its
    /// candidates ([`Engine::verify_window`]), and where each starts.
    window: Vec<Slot>,
    heads: Vec<usize>,
}

/// The document a containment scan is at, and what its pairs need.
struct ScanDoc<'a> {
    slot: Slot,
    record: &'a Arc<Record>,
    /// What its filter asks of the other side.
    admit: &'a Option<MetaFilter>,
    /// Slots at or past this are not scanned.
    span: usize,
    now: u64,
}

/// A member of a group: its record and its most similar other member.
#[derive(Clone, Debug)]
pub struct GroupMember {
    pub record: Arc<Record>,
    /// The member with the highest score to this one by the scan's measure
    /// (exact Jaccard, or the larger containment; ties: smallest id).
    pub best_match: Arc<Record>,
    /// Exact Jaccard with `best_match`.
    pub jaccard: f64,
    /// The larger exact containment of the two (either inside the other).
    pub containment: f64,
    /// Their scores over content shingles (boilerplate left out), when the
    /// scan was on content scores: (Jaccard, the larger containment).
    pub content: Option<(f64, f64)>,
}

/// A connected component of the verified-pair graph, members sorted by id.
#[derive(Clone, Debug)]
pub struct Group {
    pub members: Vec<GroupMember>,
}

impl Group {
    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The smallest member id: groups are ordered by it.
    pub fn first_id(&self) -> &str {
        self.members[0].record.id().as_str()
    }
}

/// Every group of at least `min_size` members, ordered by first id.
#[derive(Clone, Debug, Default)]
pub struct Groups {
    pub groups: Vec<Group>,
    pub stats: ScanStats,
    /// Members of all groups: the documents that have a near-duplicate.
    pub members: usize,
}

impl Groups {
    /// Documents that could be dropped keeping one per group.
    pub fn redundant(&self) -> usize {
        self.members - self.groups.len()
    }

    /// Index of the first group whose first id sorts after `key`, a byte
    /// string (keyset paging; ids sort as their UTF-8 bytes, and any key
    /// names a position, whether or not it is an id).
    pub fn position_after(&self, key: &[u8]) -> usize {
        self.groups
            .partition_point(|g| g.first_id().as_bytes() <= key)
    }
}

/// Progress callback for long scans: called with (slots scanned, slots in all).
pub type Progress<'a> = &'a (dyn Fn(usize, usize) + Sync);

impl Engine {
    /// Slots a scan started now would visit (an upper bound on document count).
    pub fn slot_span(&self) -> usize {
        self.next_slot.load(Ordering::Acquire) as usize
    }

    /// Find every pair of stored documents with exact Jaccard ≥ `threshold`
    /// (each pair once), scanning on the rayon pool, and hand them to `sink`
    /// in chunks on the calling thread. `sink` returning `Break` stops the scan.
    pub fn scan_pairs(
        &self,
        threshold: Threshold,
        progress: Option<Progress<'_>>,
        sink: &mut dyn FnMut(Vec<Edge>) -> ControlFlow<()>,
    ) -> ScanStats {
        self.scan_pairs_by(threshold, Measure::Jaccard, progress, sink)
    }

    /// [`Self::scan_pairs`] by `measure`: Jaccard (candidates from the LSH
    /// bands), or any containment measure, which for a pair means either
    /// text inside the other at ≥ the threshold (candidates from the
    /// passage index, which must be on).
    pub fn scan_pairs_by(
        &self,
        threshold: Threshold,
        by: impl Into<By>,
        progress: Option<Progress<'_>>,
        sink: &mut dyn FnMut(Vec<Edge>) -> ControlFlow<()>,
    ) -> ScanStats {
        self.scan_pairs_filtered(threshold, by, None, None, progress, sink)
    }

    /// [`Self::scan_pairs_by`] of the pairs `filter` admits (both
    /// documents satisfy its conditions, and they differ on its
    /// `exclude_same` fields) and `except` does not hold: a document that
    /// fails a condition is not scanned, a pair is checked once verified.
    pub fn scan_pairs_filtered(
        &self,
        threshold: Threshold,
        by: impl Into<By>,
        filter: Option<&Arc<FilterSpec>>,
        except: Option<&ExcludedPairs>,
        progress: Option<Progress<'_>>,
        sink: &mut dyn FnMut(Vec<Edge>) -> ControlFlow<()>,
    ) -> ScanStats {
        let by = by.into();
        let span = self.slot_span();
        let chunks = span.div_ceil(CHUNK_SLOTS);
        let documents = AtomicUsize::new(0);
        let candidates = AtomicUsize::new(0);
        let scanned = AtomicUsize::new(0);
        let mut stats = ScanStats {
            complete: true,
            ..Default::default()
        };
        let contained = by.via_passages().then(|| ContainedScan {
            span,
            threshold,
            by,
            filter,
            lists: (by.score == super::Score::Raw).then(|| {
                self.postings
                    .slot_lists(span, self.params().index.common_fingerprint_docs)
            }),
            work: std::sync::Mutex::default(),
        });
        let (tx, rx) = mpsc::sync_channel::<Vec<Edge>>(CHANNEL_CHUNKS);
        // The workers run on the current rayon pool (the global one, or the
        // pool the caller `install`ed this call into); the sink runs here.
        rayon::in_place_scope(|scope| {
            scope.spawn(|_| {
                // Err = the receiver is gone: stop every worker.
                let _ = (0..chunks).into_par_iter().try_for_each_with(tx, |tx, c| {
                    let lo = c * CHUNK_SLOTS;
                    let hi = (lo + CHUNK_SLOTS).min(span);
                    let (edges, docs, cands) = if let Some(scan) = &contained {
                        self.scan_chunk_contained(lo as Slot, hi as Slot, scan)
                    } else {
                        self.scan_chunk(lo as Slot, hi as Slot, span, threshold, filter)
                    };
                    documents.fetch_add(docs, Ordering::Relaxed);
                    candidates.fetch_add(cands, Ordering::Relaxed);
                    let done = scanned.fetch_add(hi - lo, Ordering::Relaxed) + (hi - lo);
                    if let Some(p) = progress {
                        p(done, span);
                    }
                    if edges.is_empty() {
                        return Ok(());
                    }
                    tx.send(edges).map_err(|_| ())
                });
            });
            for mut edges in rx.iter() {
                if let Some(except) = except {
                    let found = edges.len();
                    edges.retain(|e| !except.contains(e.a.id().as_str(), e.b.id().as_str()));
                    stats.excluded += found - edges.len();
                    if edges.is_empty() {
                        continue;
                    }
                }
                stats.pairs += edges.len();
                if sink(edges).is_break() {
                    stats.complete = false;
                    break;
                }
            }
            drop(rx);
        });
        stats.documents = documents.into_inner();
        stats.candidates = candidates.into_inner();
        stats
    }

    /// The current record in `slot`, if `ids` still points there and it
    /// has not expired at `now`.
    fn current(&self, slot: Slot, now: u64) -> Option<Arc<Record>> {
        self.live(slot, now).filter(|r| self.is_current(r))
    }

    /// The record in `slot` if it has not expired at `now`, current or not
    /// (no id lookup: see [`Self::verify_contained_pairs`]).
    fn live(&self, slot: Slot, now: u64) -> Option<Arc<Record>> {
        self.docs.get(&slot).filter(|r| self.is_live(r, now))
    }

    /// Verified edges from the slots in `lo..hi` to higher slots below `span`;
    /// also returns (documents visited, candidates verified).
    fn scan_chunk(
        &self,
        lo: Slot,
        hi: Slot,
        span: usize,
        threshold: Threshold,
        filter: Option<&Arc<FilterSpec>>,
    ) -> (Vec<Edge>, usize, usize) {
        let q = super::Query::new(threshold, usize::MAX);
        let now = self.now_ms();
        let mut edges = Vec::new();
        let mut slots = Vec::new();
        let (mut documents, mut verified) = (0, 0);
        for slot in lo..hi {
            let Some(record) = self.current(slot, now) else {
                continue;
            };
            documents += 1;
            let Some(admit) = admitted(filter, &record) else {
                continue;
            };
            let bands = self.shared_bands(slot, &record);
            if bands == 0 {
                continue;
            }
            slots.clear();
            self.lsh
                .candidates_in(record.signature(), bands, &mut slots, usize::MAX);
            slots.retain(|&s| s > slot && (s as usize) < span);
            slots.sort_unstable();
            slots.dedup();
            for &other in &slots {
                let (peer, j) = match self.verify(record.shingles(), other, &q, now) {
                    Verdict::Missing => continue,
                    Verdict::Below(_) | Verdict::Stale => {
                        verified += 1;
                        continue;
                    }
                    Verdict::Match(peer, j) => {
                        verified += 1;
                        (peer, j)
                    }
                };
                // The filter after the exact check: only pairs are read.
                if !admits(&admit, &peer) {
                    continue;
                }
                let intersection = crate::jaccard::intersection_of(
                    j,
                    record.shingles().len(),
                    peer.shingles().len(),
                );
                edges.push(Edge::between(
                    Arc::clone(&record),
                    slot,
                    peer,
                    other,
                    intersection,
                ));
            }
        }
        (edges, documents, verified)
    }

    /// [`Self::scan_chunk`] from the passage index (common fingerprints
    /// skipped): by containment, either text inside the other; on content
    /// scores, the measure over content shingles, candidates from content
    /// fingerprints only.
    fn scan_chunk_contained(
        &self,
        lo: Slot,
        hi: Slot,
        scan: &ContainedScan<'_>,
    ) -> (Vec<Edge>, usize, usize) {
        match &scan.lists {
            Some(lists) => self.scan_chunk_lists(lo, hi, scan, lists),
            None => self.scan_chunk_content(lo, hi, scan),
        }
    }

    /// [`Self::scan_chunk_contained`] on raw scores: candidates from the
    /// lists by slot alone, so that a record is read only when some pass
    /// the rule (and its id looked up only for a pair that passes). Such a
    /// scan counts its documents as the Jaccard scan does, without the id
    /// lookup: a record that is not current is one a write in flight is
    /// replacing, and pairs are only taken from the current record.
    /// Documents with candidates are verified a window at a time, their
    /// records and their candidates' prefetched together
    /// ([`RecordTable::prefetch`](super::record::RecordTable::prefetch)),
    /// as a query verifies its candidates.
    fn scan_chunk_lists(
        &self,
        lo: Slot,
        hi: Slot,
        scan: &ContainedScan<'_>,
        lists: &SlotLists,
    ) -> (Vec<Edge>, usize, usize) {
        let t = scan.threshold.value();
        let now = self.now_ms();
        // A record is read to count its document only if it can expire.
        let may_expire = self.may_expire();
        let mut work = scan
            .work
            .lock()
            .ok()
            .and_then(|mut w| w.pop())
            .unwrap_or_default();
        let mut edges = Vec::new();
        let (mut documents, mut verified) = (0, 0);
        for slot in lo..hi {
            if !self
                .docs
                .holds_one(slot, |r| !may_expire || self.is_live(r, now))
            {
                continue;
            }
            documents += 1;
            if Self::contained_candidates(slot, lists, t, scan.span, &mut work).is_empty() {
                continue;
            }
            let PairWork {
                counter,
                window,
                heads,
                ..
            } = &mut work;
            heads.push(window.len());
            window.push(slot);
            window.extend_from_slice(counter.passed());
            if window.len() >= PREFETCH_WINDOW {
                verified += self.verify_window(&mut work, scan, now, &mut edges);
            }
        }
        verified += self.verify_window(&mut work, scan, now, &mut edges);
        if let Ok(mut pool) = scan.work.lock() {
            pool.push(work);
        }
        (edges, documents, verified)
    }

    /// Verify the documents gathered in `work`'s window (each its slot,
    /// then its candidates), their records prefetched first; the window is
    /// emptied. Returns the candidates verified.
    fn verify_window(
        &self,
        work: &mut PairWork,
        scan: &ContainedScan<'_>,
        now: u64,
        edges: &mut Vec<Edge>,
    ) -> usize {
        let PairWork { window, heads, .. } = work;
        if window.is_empty() {
            return 0;
        }
        self.docs.prefetch(window, scan.filter.is_some());
        let mut verified = 0;
        for (k, &head) in heads.iter().enumerate() {
            let end = heads.get(k + 1).copied().unwrap_or(window.len());
            let slot = window[head];
            // `current` is asked only of a pair that passes.
            let Some(record) = self.live(slot, now) else {
                continue;
            };
            let Some(admit) = admitted(scan.filter, &record) else {
                continue;
            };
            let doc = ScanDoc {
                slot,
                record: &record,
                admit: &admit,
                span: scan.span,
                now,
            };
            verified += self.verify_contained_pairs(
                &doc,
                &window[head + 1..end],
                scan.threshold.value(),
                edges,
            );
        }
        window.clear();
        heads.clear();
        verified
    }

    /// [`Self::scan_chunk_contained`] on content scores: each document's
    /// content fingerprints looked up (`content_pairs`).
    fn scan_chunk_content(
        &self,
        lo: Slot,
        hi: Slot,
        scan: &ContainedScan<'_>,
    ) -> (Vec<Edge>, usize, usize) {
        let ContainedScan {
            span,
            threshold,
            by,
            filter,
            ..
        } = *scan;
        // A pair scan is symmetric: any containment measure is either text
        // inside the other.
        let measure = match by.measure {
            Measure::Jaccard => Measure::Jaccard,
            _ => Measure::Containment,
        };
        let q = super::Query::new(threshold, usize::MAX).measure(measure);
        let now = self.now_ms();
        let c = self.classifier();
        let mut fps = Vec::new();
        let mut edges = Vec::new();
        let (mut documents, mut verified) = (0, 0);
        for slot in lo..hi {
            let Some(record) = self.current(slot, now) else {
                continue;
            };
            documents += 1;
            let Some(admit) = admitted(filter, &record) else {
                continue;
            };
            let doc = ScanDoc {
                slot,
                record: &record,
                admit: &admit,
                span,
                now,
            };
            fps.clear();
            fps.extend(record.fingerprints());
            verified += self.content_pairs(&doc, &mut fps, &q, &c, &mut edges);
        }
        (edges, documents, verified)
    }

    /// The candidates of [`Self::scan_chunk_contained`] on raw scores that
    /// the document in `slot` is the contained side of, from `lists` alone
    /// (no record is read): each pair is found once, from the side with
    /// fewer fingerprints (ties: the lower slot). The share rule then holds
    /// that side's own fingerprints (a larger side's need is never
    /// smaller), which allows a prefix filter (AllPairs, PPJoin). Each list
    /// is sorted by (fingerprint count, slot), so the documents it can be
    /// the contained side for are the part of each list after it
    /// ([`SlotLists::after`]); only those parts are read.
    ///
    /// 1. **Candidates** come from any `m − needed + 1` of its `m` lists
    ///    that are not common, those with the shortest parts (pigeonhole: a
    ///    slot in none of them shares at most `needed − 1`). Lists with an
    ///    empty part (shared with no one after it) are the shortest of all:
    ///    when they are enough, it has no candidate and nothing is read.
    /// 2. **Pruning**: its other parts are read shortest first, and after
    ///    each a candidate that could no longer reach `needed` with every
    ///    list left is decided against. Reading stops when none is
    ///    undecided. On the 100k collage a document reads ~105 of the
    ///    ~1,200 entries its lists hold: ~67 give ~42 candidates, ~38 more
    ///    decide them, and ~0.25 pass the rule.
    ///
    /// Returns the candidates that pass the rule (held in `work`, where
    /// [`DenseCounter::passed`] gives them again).
    fn contained_candidates<'w>(
        slot: Slot,
        lists: &SlotLists,
        t: f64,
        span: usize,
        work: &'w mut PairWork,
    ) -> &'w [Slot] {
        let own = lists.count(slot);
        let common = lists.common(slot);
        let m = own.saturating_sub(common);
        let needed = Self::fingerprints_needed(own, t, common);
        if needed > m {
            return &[];
        }
        let first = m - needed + 1;
        // The part of each list after this document in the lists' order:
        // the documents it is the contained side for. A list with no such
        // part counts as one it shares with no one.
        let PairWork { order, counter, .. } = work;
        let parts = lists.after(slot);
        let alone = m.saturating_sub(parts.len());
        if first <= alone {
            return &[];
        }
        // Shortest first: each part's length (capped: any order is right,
        // shortest first only reads less) above its index, sorted as u32s.
        order.clear();
        if parts.len() <= ORDER_INDEX as usize {
            order.extend(parts.iter().zip(0..).map(|(&part, i)| {
                let len = (part >> 32).min(u64::from(ORDER_LEN_MAX)) as u32;
                len << ORDER_SHIFT | i
            }));
            crate::hashsort::sort_short(order);
        } else {
            order.extend(0..parts.len() as u32);
        }
        let part = |k: u32| parts[(k & ORDER_INDEX) as usize];
        let from = (first - alone).min(order.len());
        // Their misses overlap.
        for &k in &order[..from] {
            crate::prefetch::prefetch(&lists.slots(part(k))[0]);
        }
        counter.start(span);
        for &k in &order[..from] {
            for &s in lists.slots(part(k)) {
                counter.add(s);
            }
        }
        // After `used` of the `m` lists, a candidate that shares `c` can
        // still reach `c + m − used`, and never more: one that cannot is
        // left where it is (it is not counted as undecided and fails the
        // rule at the end).
        let mut used = alone + from;
        let mut undecided = counter.undecided(needed, m - used);
        for (i, &k) in order.iter().enumerate().skip(from) {
            if undecided == 0 {
                break;
            }
            // The next list's miss overlaps this one's reading.
            if let Some(&next) = order.get(i + 1) {
                crate::prefetch::prefetch_slice(lists.slots(part(next)));
            }
            for &s in lists.slots(part(k)) {
                counter.add_if_there(s);
            }
            used += 1;
            undecided = counter.undecided(needed, m.saturating_sub(used));
        }
        counter.finish(needed)
    }

    /// Verify `doc`'s candidates from [`Self::contained_candidates`]: the
    /// exact containment of the smaller text in the other, the merge giving
    /// up on a pair once it can no longer reach `t`. Pairs at `t` of two
    /// current records go to `edges` (`doc` may not be current: its caller
    /// read it with [`Self::live`]); the number verified is returned.
    fn verify_contained_pairs(
        &self,
        doc: &ScanDoc<'_>,
        candidates: &[Slot],
        t: f64,
        edges: &mut Vec<Edge>,
    ) -> usize {
        let n = doc.record.shingles().len();
        let mut verified = 0;
        // Whether `doc` is the current version of its id, asked at its
        // first pair.
        let mut current = None;
        for &other in candidates {
            let Some(peer) = self.live(other, doc.now) else {
                continue;
            };
            if !admits(doc.admit, &peer) {
                continue;
            }
            verified += 1;
            let least = n.min(peer.shingles().len()).max(1) as f64;
            let passes = |i: usize| i as f64 / least >= t;
            let Some(intersection) =
                crate::jaccard::intersection_if(doc.record.shingles(), peer.shingles(), passes)
            else {
                continue;
            };
            // Only current versions pair (not one a write in flight is
            // replacing): an id lookup each, so asked of pairs that pass
            // (about half the candidates on the collage), not before.
            if *current.get_or_insert_with(|| self.is_current(doc.record)) && self.is_current(&peer)
            {
                edges.push(Edge::between(
                    Arc::clone(doc.record),
                    doc.slot,
                    peer,
                    other,
                    intersection,
                ));
            }
        }
        verified
    }

    /// The pairs of [`Self::scan_chunk_contained`] on content scores that
    /// `doc` has with higher slots: candidates from its content
    /// fingerprints (`fps`, boilerplate taken out here), the share rule on
    /// both sides' content fingerprints, then the content scores, exactly.
    fn content_pairs(
        &self,
        doc: &ScanDoc<'_>,
        fps: &mut Vec<u32>,
        q: &super::Query,
        c: &super::boilerplate::Classifier,
        edges: &mut Vec<Edge>,
    ) -> usize {
        let (slot, record) = (doc.slot, doc.record);
        let t = q.threshold.value();
        // The record's frequencies and totals, read once for all its
        // candidates.
        let own_df = self.doc_frequencies(record.shingles());
        let own_side = c.side(record.shingles(), &own_df);
        let df = self.doc_frequencies(fps);
        let mut i = 0;
        fps.retain(|&x| {
            i += 1;
            !c.is_boilerplate(x, df[i - 1])
        });
        // Each pair once: only the higher slots (below the span).
        let gathered = self.gather_where(fps, |s| s > slot && (s as usize) < doc.span);
        let own_fps = fps.len();
        let mut verified = 0;
        for &(other, shared) in &gathered.shared {
            let Some(peer) = self.current(other, doc.now) else {
                continue;
            };
            if !admits(doc.admit, &peer) {
                continue;
            }
            let peer_fps: Vec<u32> = peer.fingerprints().collect();
            let peer_df = self.doc_frequencies(&peer_fps);
            let peer_content = peer_fps
                .iter()
                .zip(&peer_df)
                .filter(|&(&x, &d)| !c.is_boilerplate(x, d))
                .count();
            if !Self::worth_verifying(
                q,
                own_fps,
                peer_content,
                shared as usize,
                gathered.work.common,
            ) {
                continue;
            }
            verified += 1;
            let scores = c.scores_with(
                record.shingles(),
                &own_df,
                &own_side,
                peer.shingles(),
                |rest, _| self.doc_frequencies(rest),
            );
            if q.measure.content_score(&scores) >= t
                && (q.measure != Measure::Containment
                    || scores.query_in_stored.max(scores.stored_in_query) >= t)
            {
                // Every shared shingle is content or boilerplate.
                let intersection = scores.shared_content + scores.shared_boilerplate;
                let mut edge = Edge::between(Arc::clone(record), slot, peer, other, intersection);
                edge.set_content(record, scores);
                edges.push(edge);
            }
        }
        verified
    }

    /// The connected components of the verified-pair graph at `threshold`
    /// with at least `min_size` members, each sorted by id, ordered by
    /// their first id. Memory: 4 bytes per slot for the union-find, plus
    /// the members of the groups.
    pub fn duplicate_groups(
        &self,
        threshold: Threshold,
        min_size: usize,
        progress: Option<Progress<'_>>,
    ) -> Groups {
        self.duplicate_groups_by(threshold, Measure::Jaccard, min_size, progress)
    }

    /// [`Self::duplicate_groups`] by `measure` (see [`Self::scan_pairs_by`]).
    pub fn duplicate_groups_by(
        &self,
        threshold: Threshold,
        by: impl Into<By>,
        min_size: usize,
        progress: Option<Progress<'_>>,
    ) -> Groups {
        self.duplicate_groups_filtered(threshold, by, None, None, min_size, progress)
    }

    /// [`Self::duplicate_groups_by`] over the pairs `filter` admits and
    /// `except` does not hold ([`Self::scan_pairs_filtered`]): an excluded
    /// pair is no edge, so it joins no groups.
    pub fn duplicate_groups_filtered(
        &self,
        threshold: Threshold,
        by: impl Into<By>,
        filter: Option<&Arc<FilterSpec>>,
        except: Option<&ExcludedPairs>,
        min_size: usize,
        progress: Option<Progress<'_>>,
    ) -> Groups {
        let by = by.into();
        let span = self.slot_span();
        let mut forest = Forest::new(span);
        // Per member slot: its record and best (score, jaccard, containment, other record).
        let mut best: HashMap<Slot, Best> = HashMap::new();
        // False if `slot` already holds a different record (the slot was
        // freed and reused during the scan): that edge is skipped.
        let mut offer = |slot: Slot, me: &Arc<Record>, other: &Arc<Record>, edge: &Edge| {
            let e = best.entry(slot).or_insert_with(|| Best::new(me, other));
            if !Arc::ptr_eq(&e.record, me) {
                return false;
            }
            e.offer(other, edge, by);
            true
        };
        let stats =
            self.scan_pairs_filtered(threshold, by, filter, except, progress, &mut |edges| {
                for edge in edges {
                    let (sa, sb) = edge.slots;
                    if offer(sa, &edge.a, &edge.b, &edge) && offer(sb, &edge.b, &edge.a, &edge) {
                        forest.union(sa, sb);
                    }
                }
                ControlFlow::Continue(())
            });
        Groups::assemble(best, &mut forest, min_size, stats)
    }
}

/// `record` as the scanning side of a filtered scan: `None` when it fails
/// a condition (no pair of it is admitted), else the filter resolved
/// against it (`Some(None)` without a filter).
fn admitted(filter: Option<&Arc<FilterSpec>>, record: &Record) -> Option<Option<MetaFilter>> {
    match filter {
        None => Some(None),
        Some(f) if f.holds_for(record.metadata()) => Some(Some(f.about(record.metadata()))),
        Some(_) => None,
    }
}

/// Whether `admit` (from [`admitted`]) lets `peer` pair with its record.
fn admits(admit: &Option<MetaFilter>, peer: &Record) -> bool {
    admit.as_ref().is_none_or(|f| f.admits(peer.metadata()))
}

impl Groups {
    /// The groups of verified pairs found elsewhere (each pair once; `a`
    /// and `b` the two records, then their exact Jaccard), built as
    /// [`Engine::duplicate_groups`] builds them from its scan: a backend
    /// that finds pairs outside the engine (Redis) gives the same answer.
    pub fn from_pairs(
        pairs: Vec<(Arc<Record>, Arc<Record>, f64)>,
        min_size: usize,
        stats: ScanStats,
    ) -> Groups {
        let edges = pairs
            .into_iter()
            .map(|(a, b, j)| {
                let intersection =
                    crate::jaccard::intersection_of(j, a.shingles().len(), b.shingles().len());
                Edge::between(a, 0, b, 0, intersection)
            })
            .collect();
        Self::from_edges(edges, Measure::Jaccard, min_size, stats)
    }

    /// [`Self::from_pairs`] of edges found by `measure`.
    pub fn from_edges(
        edges: Vec<Edge>,
        by: impl Into<By>,
        min_size: usize,
        stats: ScanStats,
    ) -> Groups {
        let by = by.into();
        let mut index: HashMap<super::DocId, Slot> = HashMap::new();
        let mut best: HashMap<Slot, Best> = HashMap::new();
        let pairs = edges;
        let mut edges = Vec::with_capacity(pairs.len());
        for edge in &pairs {
            let mut node = |me: &Arc<Record>, other: &Arc<Record>| {
                let next = index.len() as Slot;
                let n = *index.entry(me.id().clone()).or_insert(next);
                best.entry(n)
                    .or_insert_with(|| Best::new(me, other))
                    .offer(other, edge, by);
                n
            };
            let (na, nb) = (node(&edge.a, &edge.b), node(&edge.b, &edge.a));
            edges.push((na, nb));
        }
        let mut forest = Forest::new(index.len());
        for (a, b) in edges {
            forest.union(a, b);
        }
        Groups::assemble(best, &mut forest, min_size, stats)
    }

    /// Components of `forest` over the members in `best` (each with its
    /// best match), of at least `min_size` members, ordered by first id.
    fn assemble(
        best: HashMap<Slot, Best>,
        forest: &mut Forest,
        min_size: usize,
        stats: ScanStats,
    ) -> Groups {
        let mut components: HashMap<Slot, Vec<GroupMember>> = HashMap::new();
        for (slot, b) in best {
            components
                .entry(forest.find(slot))
                .or_default()
                .push(GroupMember {
                    record: b.record,
                    best_match: b.other,
                    jaccard: b.jaccard,
                    containment: b.containment,
                    content: b.content,
                });
        }
        let mut members = 0;
        let mut groups: Vec<Group> = components
            .into_values()
            .filter(|m| m.len() >= min_size.max(2))
            .map(|mut m| {
                m.sort_by(|x, y| x.record.id().cmp(y.record.id()));
                members += m.len();
                Group { members: m }
            })
            .collect();
        groups.par_sort_unstable_by(|x, y| x.first_id().cmp(y.first_id()));
        Groups {
            groups,
            stats,
            members,
        }
    }
}

/// A member's best match so far.
struct Best {
    record: Arc<Record>,
    score: f64,
    jaccard: f64,
    containment: f64,
    content: Option<(f64, f64)>,
    other: Arc<Record>,
}

impl Best {
    fn new(me: &Arc<Record>, other: &Arc<Record>) -> Self {
        Self {
            record: Arc::clone(me),
            score: -1.0,
            jaccard: 0.0,
            containment: 0.0,
            content: None,
            other: Arc::clone(other),
        }
    }

    fn offer(&mut self, other: &Arc<Record>, edge: &Edge, by: By) {
        let score = edge.score(by);
        if score > self.score || (score == self.score && other.id() < self.other.id()) {
            self.score = score;
            self.jaccard = edge.jaccard;
            self.containment = edge.containment();
            self.content = edge
                .content
                .map(|c| (c.jaccard, c.query_in_stored.max(c.stored_in_query)));
            self.other = Arc::clone(other);
        }
    }
}

/// Union-find over slots with path halving and union by size.
struct Forest {
    parent: Vec<Slot>,
    size: HashMap<Slot, u32>,
}

impl Forest {
    fn new(n: usize) -> Self {
        Self {
            parent: (0..n as Slot).collect(),
            size: HashMap::new(),
        }
    }

    fn find(&mut self, mut x: Slot) -> Slot {
        while self.parent[x as usize] != x {
            let grand = self.parent[self.parent[x as usize] as usize];
            self.parent[x as usize] = grand;
            x = grand;
        }
        x
    }

    fn union(&mut self, a: Slot, b: Slot) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return;
        }
        let sa = *self.size.get(&ra).unwrap_or(&1);
        let sb = *self.size.get(&rb).unwrap_or(&1);
        let (big, small) = if sa >= sb { (ra, rb) } else { (rb, ra) };
        self.parent[small as usize] = big;
        self.size.insert(big, sa + sb);
        self.size.remove(&small);
    }
}
