//! The read side: similarity queries, pairwise comparison, and the one
//! candidate verifier every path goes through.
//!
//! A candidate slot from the LSH index is only a hint (see the module docs
//! of [`super`]): [`Engine::verify`] re-reads its record, drops it if it
//! has expired or is older than the query's `since`, bounds the Jaccard by
//! the set sizes, computes it exactly, and accepts it only if the record is
//! still the version `ids` points to. Queries and the whole-index scan
//! (`dedup.rs`) both call it, so the rule lives once.

use super::filter::MetaFilter;
use super::{DocId, Engine, EngineError, Prepared, Record};
use crate::jaccard::{self, Overlap};
use crate::lsh::index::{BandMask, Slot, ALL_BANDS};
use crate::minhash;
use crate::prefetch::prefetch_slice;
use std::sync::Arc;

/// Candidates whose records are prefetched together before they are
/// verified: enough to overlap the misses of a typical query (2.2
/// candidates at 1M articles, docs/benchmarks.md round 17), few enough that
/// a window's records and first shingle lines (~1.2 KiB each) stay in L1
/// and L2 until used. The containment pair scan verifies its documents'
/// candidates in windows of this many slots too (`dedup.rs`).
pub(super) const PREFETCH_WINDOW: usize = 16;

/// A query threshold checked against what the index is tuned for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Threshold(f64);

impl Threshold {
    pub fn value(self) -> f64 {
        self.0
    }

    /// Any value in (0, 1], not checked against the banding: what a
    /// sample below the tuned range queries at (the review queue), knowing
    /// that the LSH bands find a pair there only with the S-curve's
    /// probability.
    pub fn unbanded(value: f64) -> Result<Self, EngineError> {
        if !(value > 0.0 && value <= 1.0) {
            return Err(EngineError::ThresholdOutOfRange(value));
        }
        Ok(Threshold(value))
    }
}

/// Which score a query's threshold applies to, and its answer is sorted by.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// |Q ∩ D| / |Q ∪ D|: near-duplicates (candidates from the LSH bands).
    #[default]
    Jaccard,
    /// |Q ∩ D| / |Q|: the query is inside a stored document (an excerpt
    /// or quote of it). Candidates from the passage index.
    QueryInStored,
    /// |Q ∩ D| / |D|: a stored document is inside the query (the query
    /// embeds it). Candidates from the passage index.
    StoredInQuery,
    /// The larger of the two containments: either text inside the other.
    Containment,
}

impl Measure {
    pub const ALL: [Measure; 4] = [
        Measure::Jaccard,
        Measure::QueryInStored,
        Measure::StoredInQuery,
        Measure::Containment,
    ];

    /// Its name in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Measure::Jaccard => "jaccard",
            Measure::QueryInStored => "query_in_stored",
            Measure::StoredInQuery => "stored_in_query",
            Measure::Containment => "containment",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == name)
    }

    /// A containment measure (answered from the passage index).
    pub fn is_containment(self) -> bool {
        self != Measure::Jaccard
    }

    /// The content score this measure reads.
    pub fn content_score(self, c: &super::ContentScores) -> f64 {
        match self {
            Measure::Jaccard => c.jaccard,
            Measure::QueryInStored => c.query_in_stored,
            Measure::StoredInQuery => c.stored_in_query,
            Measure::Containment => c.query_in_stored.max(c.stored_in_query),
        }
    }

    /// The score this measure reads from a match.
    pub fn score(self, m: &Match) -> f64 {
        match self {
            Measure::Jaccard => m.jaccard,
            Measure::QueryInStored => m.query_in_stored,
            Measure::StoredInQuery => m.stored_in_query,
            Measure::Containment => m.query_in_stored.max(m.stored_in_query),
        }
    }
}

/// Which shingles a score counts: all of them (`raw`), or only those that
/// are not boilerplate (`content`: `boilerplate.rs`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Score {
    #[default]
    Raw,
    Content,
}

impl Score {
    pub const ALL: [Score; 2] = [Score::Raw, Score::Content];

    pub fn as_str(self) -> &'static str {
        match self {
            Score::Raw => "raw",
            Score::Content => "content",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// What a scan or query ranks by: a measure on raw or content scores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct By {
    pub measure: Measure,
    pub score: Score,
}

impl From<Measure> for By {
    fn from(measure: Measure) -> Self {
        By {
            measure,
            score: Score::Raw,
        }
    }
}

impl By {
    pub fn new(measure: Measure, score: Score) -> Self {
        By { measure, score }
    }

    /// Answered from the passage index.
    pub fn via_passages(self) -> bool {
        self.measure.is_containment() || self.score == Score::Content
    }
}

/// What a similarity query asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    pub threshold: Threshold,
    /// Most matches returned.
    pub limit: usize,
    /// Only documents stored at or after this instant (ms since the epoch).
    pub since: Option<u64>,
    /// The score the threshold applies to.
    pub measure: Measure,
    /// Over which shingles.
    pub score: Score,
    /// Conditions on the candidates' metadata (`filter`, `exclude_same`,
    /// resolved against the query document): a candidate it refuses is
    /// not a candidate at all, as one older than `since` is.
    pub filter: Option<Arc<MetaFilter>>,
    /// Stored documents that do not count, by id (sorted; `None`: none):
    /// for an `if_unique` write, those moderators judged it not a
    /// duplicate of ([`super::ExcludedPairs`]). They are verified like any
    /// candidate and dropped from the answer before it is cut to `limit`
    /// ([`QueryOutcome::ignored`] counts them).
    pub ignore: Option<Arc<[Box<str>]>>,
}

impl Query {
    pub fn new(threshold: Threshold, limit: usize) -> Self {
        Self {
            threshold,
            limit,
            since: None,
            measure: Measure::Jaccard,
            score: Score::Raw,
            filter: None,
            ignore: None,
        }
    }

    /// This query not counting the stored documents `ids` (sorted, as
    /// [`super::ExcludedPairs::partners`] gives them); none: unchanged.
    pub fn ignoring(self, ids: &[Box<str>]) -> Self {
        debug_assert!(ids.is_sorted(), "ignored ids are sorted");
        Self {
            ignore: (!ids.is_empty()).then(|| ids.into()),
            ..self
        }
    }

    /// Whether the stored document `id` does not count for this query.
    #[inline]
    pub fn ignores(&self, id: &str) -> bool {
        self.ignore
            .as_ref()
            .is_some_and(|ids| ids.binary_search_by(|i| (**i).cmp(id)).is_ok())
    }

    /// Only candidates `filter` admits.
    pub fn filter(self, filter: Option<MetaFilter>) -> Self {
        Self {
            filter: filter.map(Arc::new),
            ..self
        }
    }

    /// This query with its filter's `exclude_same` fields resolved against
    /// the query document's metadata `metadata` (a query by a stored id
    /// learns it only once the document is read).
    pub fn about(&self, metadata: Option<&str>) -> Self {
        match &self.filter {
            Some(f) if f.spec().excludes() => Self {
                filter: Some(Arc::new(f.spec().about(metadata))),
                ..self.clone()
            },
            _ => self.clone(),
        }
    }

    /// Whether `record` was stored at or after `since`.
    #[inline]
    pub fn recent(&self, record: &Record) -> bool {
        self.since.is_none_or(|s| record.created_ms() >= s)
    }

    /// Whether `record` may answer this query at all: stored since `since`,
    /// and admitted by the filter.
    #[inline]
    pub fn admits(&self, record: &Record) -> bool {
        self.recent(record)
            && self
                .filter
                .as_ref()
                .is_none_or(|f| f.admits(record.metadata()))
    }

    pub fn score(self, score: Score) -> Self {
        Self { score, ..self }
    }

    /// Whether the passage index answers it (a containment measure, or any
    /// measure on content scores).
    pub fn via_passages(&self) -> bool {
        self.measure.is_containment() || self.score == Score::Content
    }

    /// The value this query's threshold applies to in `m`.
    pub fn value_of(&self, m: &Match) -> f64 {
        match (self.score, &m.content) {
            (Score::Content, Some(c)) => self.measure.content_score(c),
            (Score::Content, None) => 0.0,
            (Score::Raw, _) => self.measure.score(m),
        }
    }

    pub fn since(self, since: Option<u64>) -> Self {
        Self { since, ..self }
    }

    pub fn measure(self, measure: Measure) -> Self {
        Self { measure, ..self }
    }
}

/// One verified near-duplicate.
#[derive(Clone, Debug, PartialEq)]
pub struct Match {
    pub id: DocId,
    /// When the matched version was stored (ms since the epoch).
    pub created_ms: u64,
    /// Exact Jaccard similarity of the shingle sets.
    pub jaccard: f64,
    /// Exact |Q ∩ D| / |Q|: how much of the query is in this document.
    pub query_in_stored: f64,
    /// Exact |Q ∩ D| / |D|: how much of this document is in the query.
    pub stored_in_query: f64,
    /// MinHash estimate (fraction of equal signature slots).
    pub estimate: f64,
    /// The scores over content shingles, when the collection counts
    /// document frequency (`index.boilerplate`).
    pub content: Option<super::ContentScores>,
}

impl Match {
    /// A match of a query of `query_len` shingles with `record`, given their
    /// exact Jaccard `jaccard` (their intersection follows from it and the
    /// sizes: Jaccard is a ratio of integers below 2³², so rounding
    /// recovers it exactly).
    pub(crate) fn from_jaccard(
        record: &Record,
        query_len: usize,
        jaccard: f64,
        estimate: f64,
    ) -> Self {
        let intersection = jaccard::intersection_of(jaccard, query_len, record.shingles().len());
        Self::with_intersection(record, query_len, intersection, jaccard, estimate)
    }

    pub(crate) fn with_intersection(
        record: &Record,
        query_len: usize,
        intersection: usize,
        jaccard: f64,
        estimate: f64,
    ) -> Self {
        let stored_len = record.shingles().len();
        Self {
            id: record.id().clone(),
            created_ms: record.created_ms(),
            jaccard,
            query_in_stored: ratio(intersection, query_len),
            stored_in_query: ratio(intersection, stored_len),
            estimate,
            content: None,
        }
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// The answer to a similarity query, with the work it took.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueryOutcome {
    /// Sorted by Jaccard descending, then id; at most `limit`.
    pub matches: Vec<Match>,
    /// Distinct candidates the LSH index proposed (the queried document excluded).
    pub candidates: usize,
    /// Candidates whose exact Jaccard fell below the threshold.
    pub rejected: usize,
    /// True when the candidate list hit `max_candidates` and was cut.
    pub truncated: bool,
    /// Containment queries: what the passage index was asked and skipped.
    pub passages: Option<PassageWork>,
    /// Matches left out because the query ignores their documents
    /// ([`Query::ignoring`]).
    pub ignored: usize,
}

/// The passage-index side of a containment query or passage lookup.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PassageWork {
    /// The query's fingerprints looked up.
    pub fingerprints: usize,
    /// Of those, held by more documents than a query reads
    /// (`index.common_fingerprint_docs`): skipped, as boilerplate.
    pub common: usize,
    /// The document counts of the skipped fingerprints (largest first, at
    /// most ten).
    pub common_docs: Vec<usize>,
}

/// `GET /compare`: both scores and the raw counts.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub jaccard: f64,
    pub estimate: f64,
    pub overlap: Overlap,
}

/// What checking one candidate slot against a query set found.
pub(crate) enum Verdict {
    /// No record in the slot (removed since the bucket was read), or one
    /// that has expired or that the query does not admit (older than its
    /// `since`, refused by its filter): not a candidate.
    Missing,
    /// Exact Jaccard (or its size bound) below the threshold.
    Below(Arc<Record>),
    /// At or above the threshold, but `ids` no longer points to this
    /// version (replaced or removed while it was verified).
    Stale,
    /// A true match: the current version, with its exact Jaccard.
    Match(Arc<Record>, f64),
}

/// What [`Engine::judge`] says of one candidate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Judgement {
    /// Expired, or not admitted by the query (`since`, filter): not a
    /// candidate at all.
    Skip,
    /// A candidate below the threshold.
    Below,
    /// At or above it, with its exact Jaccard.
    Match(f64),
}

impl Engine {
    /// The candidate rule, the one verifier of every query on every
    /// backend: live and admitted by `q` (`since`, the metadata filter) →
    /// size bound → exact Jaccard ([`jaccard::at_least`]) against
    /// `q.threshold`. `shingles` is the query's sorted set, `now` the
    /// query's instant.
    #[inline]
    pub(crate) fn judge(
        &self,
        shingles: &[u32],
        record: &Record,
        q: &Query,
        now: u64,
    ) -> Judgement {
        if !self.is_live(record, now) || !q.admits(record) {
            return Judgement::Skip;
        }
        match jaccard::at_least(shingles, record.shingles(), q.threshold.value()) {
            Some(j) => Judgement::Match(j),
            None => Judgement::Below,
        }
    }

    /// [`Self::judge`] on the record in `slot`, then still the current
    /// version of its id (the memory index's buckets may name a slot being
    /// replaced).
    #[inline]
    pub(crate) fn verify(&self, shingles: &[u32], slot: Slot, q: &Query, now: u64) -> Verdict {
        let Some(record) = self.docs.get(&slot) else {
            return Verdict::Missing;
        };
        match self.judge(shingles, &record, q, now) {
            Judgement::Skip => Verdict::Missing,
            Judgement::Below => Verdict::Below(record),
            Judgement::Match(_) if !self.is_current(&record) => Verdict::Stale,
            Judgement::Match(j) => Verdict::Match(record, j),
        }
    }

    /// Check a query threshold for `measure` on `score`: a raw Jaccard
    /// threshold against the range the banding serves, any other in (0, 1]
    /// (the passage index is not tuned to a threshold). The default is the
    /// index's threshold either way.
    pub fn threshold_for(
        &self,
        measure: Measure,
        score: Score,
        value: Option<f64>,
    ) -> Result<Threshold, EngineError> {
        if !measure.is_containment() && score == Score::Raw {
            return self.threshold(value);
        }
        let value = value.unwrap_or(self.params().index.threshold);
        if !(value > 0.0 && value <= 1.0) {
            return Err(EngineError::ThresholdOutOfRange(value));
        }
        Ok(Threshold(value))
    }

    /// Check a query threshold against the range this index serves.
    pub fn threshold(&self, value: Option<f64>) -> Result<Threshold, EngineError> {
        let Some(value) = value else {
            return Ok(Threshold(self.params().index.threshold));
        };
        if !(value > 0.0 && value <= 1.0) {
            return Err(EngineError::ThresholdOutOfRange(value));
        }
        if value < self.bands().min_query_threshold {
            return Err(EngineError::ThresholdBelowTuned {
                value,
                min: self.bands().min_query_threshold,
                tuned: self.params().index.threshold,
            });
        }
        Ok(Threshold(value))
    }

    /// Near-duplicates of the stored document `id` (never `id` itself).
    pub fn similar_to_id(&self, id: &str, q: &Query) -> Result<QueryOutcome, EngineError> {
        let (slot, record) = self
            .get_with_slot(id)
            .ok_or_else(|| EngineError::NotFound(id.to_owned()))?;
        let q = &q.about(record.metadata());
        if q.via_passages() {
            let fingerprints = self.containment_keys(record.shingles(), record.fingerprints());
            // No other document holds any of its fingerprints: no
            // candidate, no lookup (as `shared_bands` for Jaccard). The
            // count is read first and the slot checked after, so it is
            // `record`'s.
            let alone = record.shingles().len() >= self.passage_window()
                && self.postings.shared(slot) == 0
                && self.docs.holds(slot, &record);
            return self.contained(
                record.shingles(),
                record.signature(),
                &fingerprints,
                Some(id),
                Some(slot),
                alone,
                q,
            );
        }
        let bands = self.shared_bands(slot, &record);
        if bands == 0 {
            return Ok(QueryOutcome::default());
        }
        // The id is hashed once: its slot is the one to exclude.
        let mut out = self.query(
            record.shingles(),
            record.signature(),
            bands,
            Some(id),
            Some(slot),
            q,
        );
        self.attach_content(record.shingles(), &mut out.matches);
        Ok(out)
    }

    /// The bands (by class, [`BandMask`]) in which `record`, read from
    /// `slot`, may share a bucket with another document. The others' buckets
    /// hold only `record`, so a query for it need not look them up; with
    /// none (0) it has no candidates and the answer is empty without a band
    /// lookup. The index's mask is read first and the slot checked after:
    /// if it still holds `record`, the mask was not yet cleared for a later
    /// document in a reused slot, so it is `record`'s (a set bit only means
    /// "look"). Otherwise every band is looked up. (Checking `ids` instead,
    /// whose entry the callers have just read, was slower in `query_bench`:
    /// lone queries ~1,000 → 1,040–1,330 ns in 3 alternating pairs.)
    pub(crate) fn shared_bands(&self, slot: Slot, record: &Arc<Record>) -> BandMask {
        let bands = self.lsh.shared_bands(slot);
        if self.docs.holds(slot, record) {
            bands
        } else {
            ALL_BANDS
        }
    }

    /// Near-duplicates of an unstored document; `exclude` skips one id.
    pub fn similar_to(
        &self,
        doc: &Prepared,
        exclude: Option<&str>,
        q: &Query,
    ) -> Result<QueryOutcome, EngineError> {
        let own_slot = exclude.and_then(|id| self.ids.get(id).map(|s| *s));
        if q.via_passages() {
            let fingerprints = self.containment_keys(doc.shingles(), doc.fingerprints());
            return self.contained(
                doc.shingles.as_slice(),
                &doc.signature,
                &fingerprints,
                exclude,
                own_slot,
                false,
                q,
            );
        }
        let mut out = self.query(
            doc.shingles.as_slice(),
            &doc.signature,
            ALL_BANDS,
            exclude,
            own_slot,
            q,
        );
        self.attach_content(doc.shingles(), &mut out.matches);
        Ok(out)
    }

    /// `own_slot` is `exclude`'s slot, if it is stored; `bands` the band
    /// classes to look up.
    fn query(
        &self,
        shingles: &[u32],
        signature: &[u32],
        bands: BandMask,
        exclude: Option<&str>,
        own_slot: Option<Slot>,
        q: &Query,
    ) -> QueryOutcome {
        // The band keys read the whole signature, and verification the
        // whole shingle set: start their cache misses together.
        prefetch_slice(signature);
        prefetch_slice(shingles);
        let cap = self.params().index.max_candidates;
        // The queried document never counts against the cap.
        let mut slots = Vec::with_capacity(self.bands().bands * 2);
        let complete = self.lsh.candidates_in(
            signature,
            bands,
            &mut slots,
            cap.saturating_add(1).saturating_mul(self.bands().bands),
        );
        slots.sort_unstable();
        slots.dedup();
        if let Some(own) = own_slot {
            slots.retain(|&s| s != own);
        }
        let truncated = !complete || slots.len() > cap;
        slots.truncate(cap);

        let now = self.now_ms();
        let mut out = QueryOutcome {
            truncated,
            ..Default::default()
        };
        // Candidates are loaded a window at a time (`RecordTable::prefetch`):
        // a window's misses overlap, and its records and shingles stay in
        // cache until they are verified, however many candidates there are.
        for window in slots.chunks(PREFETCH_WINDOW) {
            self.docs.prefetch(window, q.filter.is_some());
            for &slot in window {
                match self.verify(shingles, slot, q, now) {
                    Verdict::Missing | Verdict::Stale => {} // removed or replaced meanwhile
                    Verdict::Below(record) | Verdict::Match(record, _)
                        if exclude == Some(record.id().as_str()) => {}
                    Verdict::Below(_) => {
                        out.candidates += 1;
                        out.rejected += 1;
                    }
                    Verdict::Match(record, jaccard) => {
                        out.candidates += 1;
                        out.matches.push(Match::from_jaccard(
                            &record,
                            shingles.len(),
                            jaccard,
                            minhash::estimate(signature, record.signature()),
                        ));
                    }
                }
            }
        }
        finish(&mut out, q);
        out
    }

    /// A query answered from candidates found outside this engine (a
    /// backend that keeps buckets and records elsewhere): each candidate
    /// is the current version of its document as read by the caller, who
    /// has already dropped stale ones. The same rule as every other path:
    /// live and recent enough → size bound → exact Jaccard; the answer is
    /// sorted and cut as [`Self::similar_to`]'s. `exclude` skips one id;
    /// `truncated` says the caller cut the candidate list.
    pub fn verify_candidates(
        &self,
        doc: &Prepared,
        exclude: Option<&str>,
        q: &Query,
        candidates: impl IntoIterator<Item = Arc<Record>>,
        truncated: bool,
    ) -> QueryOutcome {
        let shingles = doc.shingles.as_slice();
        let now = self.now_ms();
        let mut out = QueryOutcome {
            truncated,
            ..Default::default()
        };
        for record in candidates {
            if exclude == Some(record.id().as_str()) {
                continue;
            }
            let j = match self.judge(shingles, &record, q, now) {
                Judgement::Skip => continue,
                Judgement::Below => {
                    out.candidates += 1;
                    out.rejected += 1;
                    continue;
                }
                Judgement::Match(j) => j,
            };
            out.candidates += 1;
            out.matches.push(Match::from_jaccard(
                &record,
                shingles.len(),
                j,
                minhash::estimate(&doc.signature, record.signature()),
            ));
        }
        finish(&mut out, q);
        out
    }

    /// Exact and estimated similarity of two records (of this engine or
    /// read from another backend).
    pub fn compare_records(&self, ra: &Record, rb: &Record) -> Comparison {
        let overlap = jaccard::overlap(ra.shingles(), rb.shingles());
        Comparison {
            jaccard: overlap.jaccard(),
            estimate: minhash::estimate(ra.signature(), rb.signature()),
            overlap,
        }
    }

    /// Exact and estimated similarity of two stored documents.
    pub fn compare(&self, a: &str, b: &str) -> Result<Comparison, EngineError> {
        let ra = self
            .get(a)
            .ok_or_else(|| EngineError::NotFound(a.to_owned()))?;
        let rb = self
            .get(b)
            .ok_or_else(|| EngineError::NotFound(b.to_owned()))?;
        Ok(self.compare_records(&ra, &rb))
    }
}

/// Order the matches (Jaccard descending, then id) and cut them at the
/// query's limit. A replace racing a query can let both versions of one id
/// pass verification at different instants; the one verified last is kept.
pub(crate) fn finish(out: &mut QueryOutcome, q: &Query) {
    if q.ignore.is_some() {
        let before = out.matches.len();
        out.matches.retain(|m| !q.ignores(m.id.as_str()));
        out.ignored += before - out.matches.len();
    }
    if out.matches.len() > 1 {
        let mut by_id: Vec<(usize, Match)> = out.matches.drain(..).enumerate().collect();
        by_id.sort_by(|(i, a), (j, b)| a.id.cmp(&b.id).then(j.cmp(i)));
        by_id.dedup_by(|later, earlier| later.1.id == earlier.1.id);
        out.matches = by_id.into_iter().map(|(_, m)| m).collect();
    }
    out.matches.sort_by(|a, b| {
        q.value_of(b)
            .total_cmp(&q.value_of(a))
            .then_with(|| a.id.cmp(&b.id))
    });
    out.matches.truncate(q.limit);
}
