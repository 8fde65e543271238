//! [`Recipe`]: what a collection does to a text and how it answers, the
//! same on every backend: normalize, shingle and sign (`prepare`), the
//! banding and thresholds, the clock and the expiry rule, `/explain`.
//!
//! It is a view of the collection's [`Engine`] with only those operations.
//! The index itself (documents, buckets) is reached only through the
//! collection's [`Backend`](crate::backend::Backend): on the memory backend
//! that engine also holds the maps, on the redis backend they stay empty,
//! and a caller that asked this view for a document would silently find
//! nothing there. So it cannot ask.

use crate::engine::{
    DocId, Engine, EngineError, EngineParams, Explanation, Measure, Passage, Prepared, Record,
    Score, Stamp, Threshold,
};
use crate::lsh::BandParams;
use crate::text::snippet::Snippet;
use crate::text::TextError;
use std::sync::Arc;
use std::time::Duration;

/// A collection's recipe (see the module docs). Cheap to clone.
#[derive(Clone)]
pub struct Recipe(Arc<Engine>);

impl std::fmt::Debug for Recipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Recipe").field(self.0.params()).finish()
    }
}

impl Recipe {
    pub(super) fn new(engine: Arc<Engine>) -> Self {
        Self(engine)
    }

    /// The engine behind the view: for the collections module, which hands
    /// it to the backend it builds.
    pub(super) fn engine(&self) -> &Arc<Engine> {
        &self.0
    }

    pub fn params(&self) -> &EngineParams {
        self.0.params()
    }

    /// The banding (b, r) and what it finds at and below the threshold.
    pub fn bands(&self) -> &BandParams {
        self.0.bands()
    }

    /// `value` checked against what this index finds (default: its own
    /// `index.threshold`).
    pub fn threshold(&self, value: Option<f64>) -> Result<Threshold, EngineError> {
        self.0.threshold(value)
    }

    /// Normalize, shingle and sign `text`.
    /// A threshold for `measure` (a containment one is not bound to the
    /// banding: see [`Engine::threshold_for`]).
    pub fn threshold_for(
        &self,
        measure: Measure,
        score: Score,
        value: Option<f64>,
    ) -> Result<Threshold, EngineError> {
        self.0.threshold_for(measure, score, value)
    }

    /// A text to look up as a passage: its shingles in order and its set.
    pub fn passage(&self, text: &str) -> Result<Passage, EngineError> {
        self.0.passage(text)
    }

    /// The number of consecutive shingles every shared passage of which
    /// the passage index is sure to find (the winnowing window).
    pub fn passage_window(&self) -> usize {
        self.0.passage_window()
    }

    pub fn prepare(&self, text: &str) -> Result<Prepared, TextError> {
        self.0.prepare(text)
    }

    /// The first `words` words of `text` as posted, cut on this recipe's
    /// word boundaries ([`crate::text::snippet`]); `more`: `text` is only
    /// the start of the document.
    pub fn snippet<'a>(&self, text: &'a str, words: usize, more: bool) -> Snippet<'a> {
        crate::text::snippet::first_words(text, words, &self.params().normalize, more)
    }

    /// Where the two texts share passages, and their scores.
    pub fn explain(&self, a: &str, b: &str) -> Result<Explanation, EngineError> {
        self.0.explain(a, b)
    }

    /// [`Engine::explain_marked`]: with each side's boilerplate marked.
    pub fn explain_marked(
        &self,
        a: &str,
        b: &str,
        boilerplate: Option<(&[bool], &[bool])>,
    ) -> Result<Explanation, EngineError> {
        self.0.explain_marked(a, b, boilerplate)
    }

    /// What decides boilerplate in a collection of `docs` counted
    /// documents (this node's templates and rule).
    pub fn classifier_with(&self, docs: usize) -> crate::engine::Classifier {
        self.0.classifier_with(docs)
    }

    /// Whether the collection counts document frequency.
    pub fn boilerplate_params(&self) -> crate::engine::BoilerplateParams {
        self.0.boilerplate_params()
    }

    /// The registered templates' shingles.
    pub fn template_shingles(&self) -> Arc<std::collections::HashSet<u32>> {
        self.0.templates()
    }

    /// "Now" by the collection's clock (ms since the epoch).
    pub fn now_ms(&self) -> u64 {
        self.0.now_ms()
    }

    /// The retention TTL, if any.
    pub fn retention(&self) -> Option<Duration> {
        self.0.retention()
    }

    /// When `record` expires (ms since the epoch), if it does.
    pub fn expiry_ms(&self, record: &Record) -> Option<u64> {
        self.0.expiry_ms(record)
    }

    /// False once `record` has expired at `now`.
    pub fn is_live(&self, record: &Record, now: u64) -> bool {
        self.0.is_live(record, now)
    }

    /// A record of `doc` as stored under `id` with `stamp` (an import's
    /// line, checked before it is written).
    pub fn record_of(
        &self,
        id: DocId,
        doc: &Prepared,
        metadata: Option<Box<str>>,
        stamp: Stamp,
    ) -> Record {
        self.0.record_of(id, doc, metadata, stamp)
    }

    /// A prepared document from its shingles (an import's line): signed
    /// again, `None` unless they are sorted and distinct.
    pub fn prepared_from_shingles(&self, shingles: Vec<u32>) -> Option<Prepared> {
        self.0.prepared_from_shingles(shingles, None)
    }
}
