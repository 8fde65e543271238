//! Containment queries and passage lookups, answered from the passage
//! index (`postings.rs`) and verified exactly on the stored shingle sets.
//!
//! ```text
//!   query fingerprints ─postings→ slots, with how many fingerprints each shares
//!     ─(common fingerprints skipped and reported)─▶ candidates sharing enough
//!     ─docs→ records ─exact |Q ∩ D|─▶ matches by the measure asked
//! ```
//!
//! **Which candidates are verified.** Winnowing guarantees a shared
//! fingerprint for every shared run of a window of shingles
//! (`text::winnow`), so a document that holds most of the query's
//! shingles in the query's order holds most of its fingerprints too. A
//! candidate is verified when it shares at least [`SHARE`] · t of the
//! fingerprints of the text that must be contained (the query's for
//! `query_in_stored`, the document's for `stored_in_query`; fingerprints
//! skipped as common count as shared), and at least one. Every answer is
//! then exact: |Q ∩ D| is computed, not estimated. The rule is measured,
//! not proven: docs/containment-study.md gives the recall against brute
//! force on excerpts, abridged copies and quotes of real text.
//!
//! **Bounded work.** A fingerprint held by more than
//! `index.common_fingerprint_docs` documents is not read (a footer, a
//! licence sentence): the answer counts it as common and gives the
//! document counts of the largest ones. A query reads at most
//! [`MAX_READ`] bucket entries in all and verifies at most
//! `index.max_candidates` documents, the best-sharing first; past either
//! its answer says `truncated`.

use super::boilerplate::ContentQuery;
use super::query::{finish, Measure, PassageWork, Query, QueryOutcome, Score};
use super::slot_counter::SlotCounter;
use super::{DocId, Engine, EngineError, Match, Prepared, Record};
use crate::lsh::index::Slot;
use crate::lsh::table::Bucket;
use crate::minhash;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The share of the contained text's fingerprints (times the threshold) a
/// candidate must hold to be verified. At 0.25 a query of the 100k collage
/// corpus verified 4.5–10.6 candidates and at 1M 360–590; at 0.5, 0.49 at
/// 100k with the same recall (excerpts ≥ 0.9 and abridged copies ≥ 0.8:
/// 1.000; docs/benchmarks.md).
pub const SHARE: f64 = 0.5;
/// Bucket entries one query reads at most.
pub const MAX_READ: usize = 200_000;
/// Document counts of common fingerprints an answer lists.
pub const COMMON_LISTED: usize = 10;

/// [`Engine::worth_verifying`] for one query side, worked out once: the
/// document's fingerprint count is read only where the rule still needs
/// it, not when the query's side decides alone, nor when no indexed
/// document could have few enough fingerprints for its side to decide.
pub(crate) struct ShareRule<'q> {
    q: &'q Query,
    query_fps: usize,
    common: usize,
    by_query_at: usize,
    doc_floor: usize,
}

impl<'q> ShareRule<'q> {
    /// The rule for `q` with `query_fps` fingerprints, `common` of those
    /// looked up skipped, when every indexed document has ≥ `fewest`.
    pub(crate) fn new(q: &'q Query, query_fps: usize, common: usize, fewest: usize) -> Self {
        let t = q.threshold.value();
        ShareRule {
            q,
            query_fps,
            common,
            by_query_at: Engine::fingerprints_needed(query_fps, t, common),
            doc_floor: Engine::fingerprints_needed(fewest, t, common),
        }
    }

    /// Whether a document sharing `shared` fingerprints is worth
    /// verifying; `count` gives its own fingerprint count.
    #[inline]
    pub(crate) fn admits(&self, shared: usize, count: impl FnOnce() -> usize) -> bool {
        match self.q.measure {
            Measure::QueryInStored => shared >= self.by_query_at,
            Measure::Containment if shared >= self.by_query_at => true,
            _ if shared < self.doc_floor => false,
            _ => Engine::worth_verifying(self.q, self.query_fps, count(), shared, self.common),
        }
    }
}

/// A stored document that shares a passage with a looked-up text.
#[derive(Clone, Debug, PartialEq)]
pub struct PassageHit {
    pub id: DocId,
    pub created_ms: u64,
    /// The longest run of consecutive shingles of the passage (in its
    /// order) that are all in the document.
    pub longest_run: usize,
    /// Distinct shingles of the passage in the document.
    pub shared: usize,
    /// The passage's distinct shingles.
    pub passage_shingles: usize,
    /// Its stored text's locator (0: none), for the caller to find where.
    pub text_locator: u64,
}

/// The answer to a passage lookup.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PassageOutcome {
    /// Longest run descending, then shared, then id; at most the limit.
    pub hits: Vec<PassageHit>,
    /// Documents that shared a fingerprint and were checked.
    pub candidates: usize,
    pub truncated: bool,
    pub work: PassageWork,
    /// Shingles in the passage's text order (its length in shingles).
    pub passage_len: usize,
}

/// The shingle hashes of a looked-up passage, in text order, with its set.
#[derive(Clone, Debug)]
pub struct Passage {
    pub ordered: Vec<u32>,
    pub doc: Prepared,
}

impl Passage {
    /// What a lookup reads from the passage index: every distinct shingle
    /// of the passage (a stored document's fingerprint inside any shared
    /// run is one of them), not only the passage's own fingerprints.
    pub fn keys(&self) -> &[u32] {
        self.doc.shingles()
    }
}

/// What the passage index gave for a set of fingerprints.
pub(crate) struct Gathered {
    /// (slot, shared fingerprints), slots distinct and increasing.
    pub shared: Vec<(Slot, u32)>,
    pub work: PassageWork,
    pub truncated: bool,
}

impl Engine {
    /// The window that selects this recipe's passage fingerprints.
    pub fn passage_window(&self) -> usize {
        self.tokenizer.window()
    }

    /// Whether the passage index is kept (the collection's `passage_index`).
    pub fn passage_index(&self) -> bool {
        self.passages_on.load(Ordering::Acquire)
    }

    /// Switch the passage index on (building it from every stored record's
    /// fingerprints) or off (dropping it).
    pub fn set_passage_index(&self, on: bool) {
        if self.passages_on.swap(on, Ordering::AcqRel) == on {
            return;
        }
        if on {
            // A write racing this loop may add its slot twice: harmless
            // (candidates are distinct slots, verified exactly).
            let entries: Vec<(Slot, Arc<Record>)> = self
                .ids
                .iter()
                .map(|e| (*e.value(), Arc::clone(&e.key().0)))
                .collect();
            use rayon::prelude::*;
            entries.par_chunks(4096).for_each(|chunk| {
                self.postings
                    .insert_many(chunk.iter().map(|(slot, record)| (*slot, &**record)));
            });
        } else {
            self.postings.clear();
        }
    }

    /// What a containment query looks up in the passage index: the query's
    /// fingerprints, or, for a query shorter than a window (whose one
    /// fingerprint is only its smallest hash), every shingle it has (fewer
    /// than a window's worth). Sorted and distinct.
    pub fn containment_keys(
        &self,
        shingles: &[u32],
        fingerprints: impl Iterator<Item = u32>,
    ) -> Vec<u32> {
        if shingles.len() < self.passage_window() {
            shingles.to_vec()
        } else {
            fingerprints.collect()
        }
    }

    /// The fingerprint count the candidate rule holds a query to: none
    /// (any shared key will do) for a query shorter than a window, which
    /// looks up every shingle ([`Self::containment_keys`]).
    pub fn query_fingerprints(&self, query_shingles: usize, keys: usize) -> usize {
        if query_shingles < self.passage_window() {
            0
        } else {
            keys
        }
    }

    /// Set whether the passage index is kept without building or dropping
    /// anything (a backend that keeps it outside the engine).
    pub fn set_passage_index_flag(&self, on: bool) {
        self.passages_on.store(on, Ordering::Release);
    }

    /// Index `record`'s fingerprints at `slot` if the index is on.
    #[inline]
    pub(crate) fn index_passages(&self, slot: Slot, record: &Record) {
        if self.passage_index() {
            self.postings.insert(slot, record.fingerprints());
        }
    }

    /// [`Self::index_passages`] of a restored batch, on the rayon pool.
    pub(crate) fn index_passages_bulk(&self, staged: &[(Slot, Arc<Record>)]) {
        if !self.passage_index() {
            return;
        }
        use rayon::prelude::*;
        staged.par_chunks(1024).for_each(|chunk| {
            self.postings
                .insert_many(chunk.iter().map(|(slot, record)| (*slot, &**record)));
        });
    }

    /// Distinct fingerprints in the passage index.
    pub fn passage_keys(&self) -> usize {
        self.postings.keys()
    }

    /// Read the buckets of `fingerprints` (sorted, distinct): every slot
    /// that holds one, with how many it holds (`own` left out).
    pub(crate) fn gather(&self, fingerprints: &[u32], own: Option<Slot>) -> Gathered {
        self.gather_where(fingerprints, |s| Some(s) != own)
    }

    /// [`Self::gather`] of the slots `keep` accepts.
    pub(crate) fn gather_where(
        &self,
        fingerprints: &[u32],
        keep: impl Fn(Slot) -> bool,
    ) -> Gathered {
        self.gather_needing(fingerprints, keep, None)
    }

    /// [`Self::gather_where`], where only slots that can share at least
    /// `fingerprints_needed(of, t, common)` of the fingerprints are wanted
    /// (`need` = `Some((of, t))`; `None`: every slot sharing one). Such a
    /// slot is in at least one of any `lists − needed + 1` of the lists
    /// that are not common (pigeonhole), so only the shortest that many
    /// add slots; the others only add to the counts of slots already
    /// found. A slot that is left out could not pass; every slot kept has
    /// its exact count.
    pub(crate) fn gather_needing(
        &self,
        fingerprints: &[u32],
        keep: impl Fn(Slot) -> bool,
        need: Option<(usize, f64)>,
    ) -> Gathered {
        let common_at = self.params().index.common_fingerprint_docs;
        let mut work = PassageWork {
            fingerprints: fingerprints.len(),
            ..Default::default()
        };
        let mut slots: Vec<Slot> = Vec::with_capacity(fingerprints.len() * 2);
        // Each list's end in `slots`, for the lists that add any.
        let mut ends: Vec<u32> = Vec::with_capacity(fingerprints.len());
        let mut truncated = false;
        self.postings.with_many(fingerprints, |_, bucket| {
            if slots.len() >= MAX_READ {
                truncated = true;
                return false;
            }
            let before = slots.len();
            match bucket {
                None => {}
                Some(Bucket::One(s)) if keep(s) => slots.push(s),
                Some(Bucket::One(_)) => {}
                Some(Bucket::Many(many)) if many.len() > common_at => {
                    work.common += 1;
                    work.common_docs.push(many.len());
                }
                Some(Bucket::Many(many)) => slots.extend(many.iter().copied().filter(|&s| keep(s))),
            }
            if slots.len() > before {
                ends.push(slots.len() as u32);
            }
            true
        });
        work.common_docs.sort_unstable_by(|a, b| b.cmp(a));
        work.common_docs.truncate(COMMON_LISTED);
        let shared = match need {
            // A truncated read has not seen every list: no bound holds.
            Some((of, t)) if !truncated => {
                let lists = fingerprints.len() - work.common;
                let needed = Self::fingerprints_needed(of, t, work.common);
                // Lists that hold none of the kept slots are the shortest.
                let first = (lists + 1)
                    .saturating_sub(needed)
                    .saturating_sub(lists - ends.len());
                count_slots_needing(&slots, &ends, first)
            }
            _ => count_slots(&slots),
        };
        Gathered {
            shared,
            work,
            truncated,
        }
    }

    /// The fewest shared fingerprints that make a candidate worth verifying
    /// when `of` fingerprints must be contained at threshold `t` and
    /// `common` of the looked-up ones were skipped.
    pub fn fingerprints_needed(of: usize, t: f64, common: usize) -> usize {
        let need = (SHARE * t * of as f64).ceil() as usize;
        need.saturating_sub(common).max(1)
    }

    /// Verify `record` against a query set by a containment `q`: the exact
    /// match, or `None` (below, expired, older than `since`). Shared by
    /// every backend, as `Engine::judge` is for Jaccard; its caller has
    /// checked `q`'s metadata filter (before counting the candidate).
    pub fn judge_contained(
        &self,
        shingles: &[u32],
        signature: &[u32],
        record: &Record,
        q: &Query,
        now: u64,
    ) -> Option<Match> {
        if !self.is_live(record, now) || !q.recent(record) {
            return None;
        }
        let (qn, dn) = (shingles.len(), record.shingles().len());
        let t = q.threshold.value();
        // Size bounds: |Q ∩ D| ≤ min(|Q|, |D|).
        let possible = match q.measure {
            Measure::QueryInStored => dn as f64 >= t * qn as f64 - 1e-9,
            Measure::StoredInQuery => qn as f64 >= t * dn as f64 - 1e-9,
            _ => true,
        };
        if !possible {
            return None;
        }
        let overlap = crate::jaccard::overlap(shingles, record.shingles());
        let m = Match::with_intersection(
            record,
            qn,
            overlap.intersection,
            overlap.jaccard(),
            minhash::estimate(signature, record.signature()),
        );
        (q.measure.score(&m) >= t).then_some(m)
    }

    /// Whether a candidate sharing `shared` fingerprints is verified (see
    /// the module docs); `record_fps` is the document's own count.
    pub fn worth_verifying(
        q: &Query,
        query_fps: usize,
        record_fps: usize,
        shared: usize,
        common: usize,
    ) -> bool {
        let t = q.threshold.value();
        let by_query = shared >= Self::fingerprints_needed(query_fps, t, common);
        let by_doc = shared >= Self::fingerprints_needed(record_fps, t, common);
        match q.measure {
            Measure::QueryInStored => by_query,
            Measure::StoredInQuery => by_doc,
            // J ≥ t holds both containments at ≥ t.
            Measure::Jaccard => by_query && by_doc,
            Measure::Containment => by_query || by_doc,
        }
    }

    /// A query answered from the passage index in this engine: a
    /// containment measure, or any measure on content scores. `alone`: the
    /// caller knows that no other document holds any of `fingerprints`
    /// (a stored document's [`super::postings::Postings::shared`] count is 0), so the
    /// answer is empty without a lookup.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn contained(
        &self,
        shingles: &[u32],
        signature: &[u32],
        fingerprints: &[u32],
        exclude: Option<&str>,
        own: Option<Slot>,
        alone: bool,
        q: &Query,
    ) -> Result<QueryOutcome, EngineError> {
        if !self.passage_index() {
            return Err(EngineError::PassageIndexOff(q.measure.as_str()));
        }
        let content = self.content_query(q)?;
        // On content scores, only the query's content fingerprints are read.
        let keys: Vec<u32>;
        let fingerprints = match &content {
            Some(c) => {
                keys = c.classifier.content_keys(fingerprints, c.df);
                &keys[..]
            }
            None => fingerprints,
        };
        if alone {
            // What the lookups would find: nothing, and no common
            // fingerprint (a common one is held by other documents).
            let mut out = QueryOutcome {
                passages: Some(PassageWork {
                    fingerprints: fingerprints.len(),
                    ..Default::default()
                }),
                ..Default::default()
            };
            finish(&mut out, q);
            return Ok(out);
        }
        let query_fps = self.query_fingerprints(shingles.len(), fingerprints.len());
        // Measures that hold the query's side to a share: only documents
        // that can reach it are gathered (see the filter below).
        let need = matches!(q.measure, Measure::QueryInStored)
            || (content.is_some() && q.measure == Measure::Jaccard);
        let gathered = self.gather_needing(
            fingerprints,
            |s| Some(s) != own,
            need.then_some((query_fps, q.threshold.value())),
        );
        let common = gathered.work.common;
        // The share rule from the index alone (each slot's fingerprint
        // count is kept beside it): no record is read for a candidate it
        // rules out. The survivors are verified best-sharing first. (On
        // content scores a document's count includes its boilerplate
        // fingerprints, so only the query's side is ruled on here.)
        // The share rule needs at least this many on the document's side
        // (its count is at least the fewest indexed).
        let rule = ShareRule::new(q, query_fps, common, self.postings.fewest());
        let mut worth: Vec<(Slot, u32)> = gathered
            .shared
            .into_iter()
            .filter(|&(slot, shared)| match &content {
                None => rule.admits(shared as usize, || self.postings.count(slot)),
                Some(_) => match q.measure {
                    Measure::QueryInStored | Measure::Jaccard => {
                        shared as usize
                            >= Self::fingerprints_needed(query_fps, q.threshold.value(), common)
                    }
                    _ => true,
                },
            })
            .collect();
        worth.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        // Read the survivors' records, current versions only (a stale slot
        // is skipped, as everywhere), and verify them.
        let candidates = worth.into_iter().filter_map(|(slot, shared)| {
            let record = self.docs.get(&slot)?;
            self.is_current(&record)
                .then_some((record, shared as usize))
        });
        let mut out = self.verify_contained(
            (shingles, signature),
            query_fps,
            exclude,
            q,
            content.as_ref(),
            candidates,
            gathered.work,
            gathered.truncated,
        );
        if content.is_none() {
            self.attach_content(shingles, &mut out.matches);
        }
        Ok(out)
    }

    /// What a query on content scores needs beyond its shingles: the rule
    /// now and where frequencies are read (`None` on raw scores).
    pub(crate) fn content_query<'a>(
        &'a self,
        q: &Query,
    ) -> Result<Option<ContentQuery<'a>>, EngineError> {
        if q.score != Score::Content {
            return Ok(None);
        }
        if !self.boilerplate_on() {
            return Err(EngineError::BoilerplateOff);
        }
        Ok(Some(ContentQuery {
            classifier: self.classifier(),
            q_df: Default::default(),
            df: &self.frequencies,
        }))
    }

    /// A containment query answered from candidates found outside this
    /// engine (a backend that keeps the passage index elsewhere): each
    /// candidate is the current version of its document as read by the
    /// caller, with how many of `fingerprints` (the query's) it shares,
    /// best-sharing first. The same rule as `Engine::contained`: the
    /// fingerprint share, then the exact containment.
    #[allow(clippy::too_many_arguments)]
    pub fn verify_contained_candidates(
        &self,
        doc: &Prepared,
        fingerprints: usize,
        exclude: Option<&str>,
        q: &Query,
        content: Option<&ContentQuery<'_>>,
        candidates: impl IntoIterator<Item = (Arc<Record>, usize)>,
        work: PassageWork,
        truncated: bool,
    ) -> QueryOutcome {
        let query_fps = self.query_fingerprints(doc.shingles().len(), fingerprints);
        self.verify_contained(
            (doc.shingles(), doc.signature()),
            query_fps,
            exclude,
            q,
            content,
            candidates,
            work,
            truncated,
        )
    }

    /// The share rule on each candidate's own count, then the exact
    /// containment: the one verifier of containment queries on every
    /// backend. `query` is the query's (shingles, signature).
    #[allow(clippy::too_many_arguments)]
    fn verify_contained(
        &self,
        (shingles, signature): (&[u32], &[u32]),
        query_fps: usize,
        exclude: Option<&str>,
        q: &Query,
        content: Option<&ContentQuery<'_>>,
        candidates: impl IntoIterator<Item = (Arc<Record>, usize)>,
        work: PassageWork,
        truncated: bool,
    ) -> QueryOutcome {
        let cap = self.params().index.max_candidates;
        let now = self.now_ms();
        let mut out = QueryOutcome {
            truncated,
            ..Default::default()
        };
        let mut verified = 0usize;
        for (record, shared) in candidates {
            if exclude == Some(record.id().as_str()) {
                continue;
            }
            let record_fps = match content {
                Some(c) => c.content_fingerprints(&record),
                None => crate::text::winnow::count(record.selection()),
            };
            if !Self::worth_verifying(q, query_fps, record_fps, shared, work.common) {
                continue;
            }
            // A document the filter refuses is no candidate: it takes no
            // place under the cap.
            if q.filter.is_some() && !q.admits(&record) {
                continue;
            }
            if verified == cap {
                out.truncated = true;
                break;
            }
            verified += 1;
            out.candidates += 1;
            let judged = match content {
                Some(c) => self.judge_content(shingles, signature, &record, q, c, now),
                None => self.judge_contained(shingles, signature, &record, q, now),
            };
            match judged {
                Some(m) => out.matches.push(m),
                None => out.rejected += 1,
            }
        }
        out.passages = Some(work);
        finish(&mut out, q);
        out
    }

    /// A passage lookup answered from candidates found outside this engine
    /// (current versions, read by the caller), as [`Self::passages`].
    #[allow(clippy::too_many_arguments)]
    pub fn verify_passage_candidates(
        &self,
        passage: &Passage,
        min_run: usize,
        limit: usize,
        since: Option<u64>,
        candidates: impl IntoIterator<Item = Arc<Record>>,
        work: PassageWork,
        truncated: bool,
    ) -> PassageOutcome {
        let cap = self.params().index.max_candidates;
        let now = self.now_ms();
        let mut out = PassageOutcome {
            truncated,
            passage_len: passage.ordered.len(),
            work,
            ..Default::default()
        };
        for record in candidates {
            if !self.is_live(&record, now) || since.is_some_and(|s| record.created_ms() < s) {
                continue;
            }
            if out.candidates == cap {
                out.truncated = true;
                break;
            }
            out.candidates += 1;
            if let Some(hit) = passage_hit(passage, &record, min_run) {
                out.hits.push(hit);
            }
        }
        finish_passages(&mut out, limit);
        out
    }

    /// Shingle a looked-up passage: its hashes in text order and its set.
    pub fn passage(&self, text: &str) -> Result<Passage, EngineError> {
        let doc = self.prepare(text)?;
        let mut scratch = crate::text::Scratch::default();
        let ordered = self.tokenizer.ordered_hashes(text, &mut scratch).to_vec();
        Ok(Passage { ordered, doc })
    }

    /// The longest run of `ordered` (a passage's shingles in its order)
    /// whose shingles are all in `set`, and how many distinct shingles of
    /// `distinct` (the passage's set) are in it.
    pub fn passage_in(ordered: &[u32], distinct: &[u32], set: &[u32]) -> (usize, usize) {
        let (mut best, mut run) = (0, 0);
        for h in ordered {
            if set.binary_search(h).is_ok() {
                run += 1;
                best = best.max(run);
            } else {
                run = 0;
            }
        }
        let shared = crate::jaccard::overlap(distinct, set).intersection;
        (best, shared)
    }

    /// Stored documents sharing a run of at least `min_run` consecutive
    /// shingles with `passage`: at most `limit`, longest run first.
    pub fn passages(
        &self,
        passage: &Passage,
        min_run: usize,
        limit: usize,
        since: Option<u64>,
    ) -> Result<PassageOutcome, EngineError> {
        if !self.passage_index() {
            return Err(EngineError::PassageIndexOff("passages"));
        }
        let gathered = self.gather(passage.keys(), None);
        let mut shared = gathered.shared;
        shared.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let candidates = shared.into_iter().filter_map(|(slot, _)| {
            let record = self.docs.get(&slot)?;
            self.is_current(&record).then_some(record)
        });
        Ok(self.verify_passage_candidates(
            passage,
            min_run,
            limit,
            since,
            candidates,
            gathered.work,
            gathered.truncated,
        ))
    }
}

/// [`count_slots`] of lists (`slots` cut at `ends`), where only slots of
/// the `first` shortest lists are counted; the other lists add only to
/// those.
fn count_slots_needing(slots: &[Slot], ends: &[u32], first: usize) -> Vec<(Slot, u32)> {
    if first == 0 {
        return Vec::new();
    }
    let mut lists: Vec<(u32, u32)> = Vec::with_capacity(ends.len());
    let mut start = 0;
    for &end in ends {
        lists.push((start, end));
        start = end;
    }
    if first < lists.len() {
        lists.sort_unstable_by_key(|&(a, b)| b - a);
    }
    let (found, then) = lists.split_at(first.min(lists.len()));
    let list = |&(a, b): &(u32, u32)| &slots[a as usize..b as usize];
    with_counter(|counter| {
        counter.start(found.iter().map(|l| list(l).len()).sum());
        found.iter().flat_map(list).for_each(|&s| counter.add(s));
        then.iter()
            .flat_map(list)
            .for_each(|&s| counter.add_if_there(s));
    })
}

/// How often each slot occurs in `slots`, as (slot, count), in no order
/// ([`SlotCounter`]).
fn count_slots(slots: &[Slot]) -> Vec<(Slot, u32)> {
    with_counter(|counter| {
        counter.start(slots.len());
        slots.iter().for_each(|&s| counter.add(s));
    })
}

/// What `count` counted on this thread's [`SlotCounter`], which is then
/// emptied for the next call.
fn with_counter(count: impl FnOnce(&mut SlotCounter)) -> Vec<(Slot, u32)> {
    thread_local! {
        static COUNTER: std::cell::RefCell<SlotCounter> = std::cell::RefCell::default();
    }
    COUNTER.with(|cell| {
        let counter = &mut *cell.borrow_mut();
        count(counter);
        let out = counter.found().to_vec();
        counter.clear();
        out
    })
}

/// `record` as a hit of `passage`, if it holds a long enough run.
pub fn passage_hit(passage: &Passage, record: &Record, min_run: usize) -> Option<PassageHit> {
    let (longest_run, shared) =
        Engine::passage_in(&passage.ordered, passage.doc.shingles(), record.shingles());
    (longest_run >= min_run.max(1)).then(|| PassageHit {
        id: record.id().clone(),
        created_ms: record.created_ms(),
        longest_run,
        shared,
        passage_shingles: passage.doc.shingles().len(),
        text_locator: record.text_locator(),
    })
}

/// Order the hits (longest run, then shared shingles, descending; then id)
/// and cut them at `limit`.
pub fn finish_passages(out: &mut PassageOutcome, limit: usize) {
    out.hits.sort_by(|a, b| a.id.cmp(&b.id));
    out.hits.dedup_by(|later, earlier| later.id == earlier.id);
    out.hits.sort_by(|a, b| {
        b.longest_run
            .cmp(&a.longest_run)
            .then(b.shared.cmp(&a.shared))
            .then_with(|| a.id.cmp(&b.id))
    });
    out.hits.truncate(limit);
}

#[cfg(test)]
pub(crate) fn count_slots_for_tests(slots: &[Slot]) -> Vec<(Slot, u32)> {
    count_slots(slots)
}

#[cfg(test)]
pub(crate) fn count_slots_needing_for_tests(
    slots: &[Slot],
    ends: &[u32],
    first: usize,
) -> Vec<(Slot, u32)> {
    count_slots_needing(slots, ends, first)
}
