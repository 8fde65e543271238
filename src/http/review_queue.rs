//! `GET /review/queue` and `GET /review/precision` (issue 46): pairs for
//! moderators to label, sampled across score bands, and the precision
//! their labels measure, with the threshold it supports.
//!
//! The arithmetic is `review::{queue, precision}`, the walk over the
//! documents `service::review`; this module checks the parameters, reads
//! the collection's decisions and shapes the answers. A label's score is
//! the one recorded with its decision: Jaccard, the larger containment, or
//! content Jaccard (`score=content`, only with `measure=jaccard`: a
//! decision keeps no content containment).

use super::error::ApiError;
use super::extract::{ApiQuery, Coll};
use super::snippets::{self, snippets_of, SnippetOut};
use super::state::{backend, AppState};
use crate::collections::Collection;
use crate::engine::{EngineError, Measure, Query, Score, Threshold};
use crate::review::precision::{
    self, BandPrecision, Bands, LabelScore, PrecisionSpec, RelatedAs, Suggestion,
    DEFAULT_MIN_LABELS, DEFAULT_TARGET, DEFAULT_WIDTH,
};
use crate::review::queue::{quotas, QueueBands};
use crate::review::DecisionSet;
use crate::service::review::{self as walk, WalkSpec};
use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Items of a queue page when none is asked for.
pub const DEFAULT_LIMIT: usize = 20;
/// Most items of a queue page.
pub const MAX_LIMIT: usize = 200;
/// The queue's seed when none is given: the same queue on every call.
pub const DEFAULT_SEED: u64 = 46;
/// How far under the collection's threshold the queue samples by default.
pub const DEFAULT_BELOW: f64 = 0.3;
/// Most labels a suggestion may ask for.
const MAX_MIN_LABELS: usize = 1_000_000;

/// The measures labels are kept for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewMeasure {
    #[default]
    Jaccard,
    /// The larger of the two containments.
    Containment,
}

impl ReviewMeasure {
    fn measure(self) -> Measure {
        match self {
            ReviewMeasure::Jaccard => Measure::Jaccard,
            ReviewMeasure::Containment => Measure::Containment,
        }
    }
}

/// How a *related* verdict counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Related {
    #[default]
    NotDuplicate,
    Duplicate,
}

/// Which recorded score labels are banded by, or why none fits.
fn label_score(measure: ReviewMeasure, score: Score) -> Result<LabelScore, ApiError> {
    match (measure, score) {
        (ReviewMeasure::Jaccard, Score::Raw) => Ok(LabelScore::Jaccard),
        (ReviewMeasure::Containment, Score::Raw) => Ok(LabelScore::Containment),
        (ReviewMeasure::Jaccard, Score::Content) => Ok(LabelScore::ContentJaccard),
        (ReviewMeasure::Containment, Score::Content) => Err(ApiError::InvalidParameter(
            "score=content goes with measure=jaccard only: a decision records the pair's content Jaccard, not its content containment".into(),
        )),
    }
}

fn bands(width: Option<f64>) -> Result<Bands, ApiError> {
    Bands::new(width.unwrap_or(DEFAULT_WIDTH))
        .map_err(|e| ApiError::InvalidParameter(e.to_string()))
}

/// `x` rounded to ten decimals (0.5, not 0.5000000000000001).
fn tidy(x: f64) -> f64 {
    (x * 1e10).round() / 1e10
}

// ---- GET /review/queue ----

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueParams {
    measure: Option<ReviewMeasure>,
    score: Option<Score>,
    from: Option<f64>,
    width: Option<f64>,
    limit: Option<usize>,
    seed: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct BandEdges {
    pub lo: f64,
    pub hi: f64,
}

#[derive(Debug, Serialize)]
pub struct QueueItem {
    pub a: String,
    pub b: String,
    /// The pair's exact score on the queue's measure and score.
    pub score: f64,
    pub band: BandEdges,
    /// `detected`: at or above the collection's threshold (what
    /// `/duplicates` and writes report); `sample`: below it.
    pub source: &'static str,
}

#[derive(Debug, Serialize)]
pub struct QueueBand {
    pub lo: f64,
    pub hi: f64,
    /// Decisions whose score on this measure falls in the band.
    pub labels: usize,
    /// Undecided pairs the walk found in the band.
    pub found: usize,
}

#[derive(Debug, Serialize)]
pub struct QueueOut {
    pub measure: ReviewMeasure,
    pub score: Score,
    /// The collection's threshold.
    pub threshold: f64,
    pub from: f64,
    pub width: f64,
    pub items: Vec<QueueItem>,
    pub bands: Vec<QueueBand>,
    pub documents_searched: usize,
    pub complete: bool,
    pub snippets: BTreeMap<String, SnippetOut>,
}

/// Decisions per queue band, by their recorded score.
fn labels_per_band(decided: &DecisionSet, by: LabelScore, qb: &QueueBands) -> Vec<usize> {
    let mut labels = vec![0; qb.len()];
    for d in decided.iter() {
        if let Some(band) = by.of(d).and_then(|s| qb.of(s)) {
            labels[band] += 1;
        }
    }
    labels
}

/// `GET /review/queue`.
pub async fn queue(
    State(app): State<AppState>,
    Coll(coll): Coll,
    ApiQuery(p): ApiQuery<QueueParams>,
) -> Result<Json<QueueOut>, ApiError> {
    let (measure, score) = (p.measure.unwrap_or_default(), p.score.unwrap_or_default());
    let by = label_score(measure, score)?;
    let bands = bands(p.width)?;
    let threshold = coll.recipe().params().index.threshold;
    let from = tidy(p.from.unwrap_or((threshold - DEFAULT_BELOW).max(0.0)));
    if !(0.0..=1.0).contains(&from) {
        return Err(ApiError::InvalidParameter(format!(
            "from must be between 0 and 1, got {from}"
        )));
    }
    let limit = p.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::InvalidParameter(format!(
            "limit must be between 1 and {MAX_LIMIT}, got {limit}"
        )));
    }
    let seed = p.seed.unwrap_or(DEFAULT_SEED);
    let backend = backend(&coll)?;
    let measure_of = measure.measure();
    if (measure_of.is_containment() || score == Score::Content) && !backend.passage_index() {
        let what = if score == Score::Content {
            "score=content"
        } else {
            measure_of.as_str()
        };
        return Err(EngineError::PassageIndexOff(what).into());
    }
    if score == Score::Content && !backend.boilerplate_on() {
        return Err(EngineError::BoilerplateOff.into());
    }
    let decided = backend.decisions(coll.dir()).await?;
    let qb = QueueBands::new(bands, from);
    let labels = labels_per_band(&decided, by, &qb);
    let spec = WalkSpec {
        // A pair at exactly 0 shares nothing: the walk queries just above it.
        query: Query::new(
            Threshold::unbanded(from.max(1e-9))?,
            walk::MATCHES_PER_DOCUMENT,
        )
        .measure(measure_of)
        .score(score),
        bands: qb,
        quotas: quotas(&labels, limit),
        max_time: walk::MAX_TIME,
    };
    let mut ids = backend.sample_ids(walk::MAX_DOCUMENTS + 1, seed).await?;
    let all = ids.len() <= walk::MAX_DOCUMENTS;
    ids.truncate(walk::MAX_DOCUMENTS);
    let (worker, scans, walked_decisions) = (
        Arc::clone(&coll),
        Arc::clone(&app.scans),
        Arc::clone(&decided),
    );
    let walked = tokio::task::spawn_blocking(move || {
        let backend = worker
            .backend()
            .ok_or_else(|| ApiError::CollectionUnavailable(worker.name.to_string()))?;
        walk::walk(backend, &ids, all, &spec, &walked_decisions, scans.pool())
            .map_err(ApiError::from)
    })
    .await
    .map_err(|e| ApiError::Internal(format!("review queue task failed: {e}")))??;
    app.metrics.observe_review_queue(
        coll.name.as_str(),
        walked.seconds,
        walked.documents_searched,
    );
    let items: Vec<QueueItem> = walked
        .found
        .page(&labels, limit)
        .into_iter()
        .map(|(band, pair)| {
            let (lo, hi) = qb.edges(band);
            QueueItem {
                a: pair.key.a.clone(),
                b: pair.key.b.clone(),
                score: pair.score,
                band: BandEdges { lo, hi },
                source: if pair.score >= threshold {
                    "detected"
                } else {
                    "sample"
                },
            }
        })
        .collect();
    let found = walked.found.counts();
    let out_bands = (0..qb.len())
        .map(|i| {
            let (lo, hi) = qb.edges(i);
            QueueBand {
                lo,
                hi,
                labels: labels[i],
                found: found[i],
            }
        })
        .collect();
    let mut ids: Vec<&str> = items
        .iter()
        .flat_map(|i| [i.a.as_str(), i.b.as_str()])
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let snippets = snippets_of(
        &coll,
        &ids,
        snippets::DEFAULT_WORDS,
        snippets::default_snippet_field(&coll),
    )
    .await?;
    Ok(Json(QueueOut {
        measure,
        score,
        threshold,
        from,
        width: bands.width(),
        items,
        bands: out_bands,
        documents_searched: walked.documents_searched,
        complete: walked.complete,
        snippets,
    }))
}

// ---- GET /review/precision ----

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrecisionParams {
    measure: Option<ReviewMeasure>,
    score: Option<Score>,
    width: Option<f64>,
    target: Option<f64>,
    min_labels: Option<usize>,
    related: Option<Related>,
}

#[derive(Debug, Serialize)]
pub struct PrecisionOut {
    pub measure: ReviewMeasure,
    pub score: Score,
    /// Decisions with a score on this measure.
    pub labels: usize,
    pub target: f64,
    pub bands: Vec<BandPrecision>,
    /// The threshold the labels support (also the advisor's `measured`).
    pub suggested: Option<Suggestion>,
}

/// `GET /review/precision`.
pub async fn precision(
    Coll(coll): Coll,
    ApiQuery(p): ApiQuery<PrecisionParams>,
) -> Result<Json<PrecisionOut>, ApiError> {
    let (measure, score) = (p.measure.unwrap_or_default(), p.score.unwrap_or_default());
    let by = label_score(measure, score)?;
    let bands = bands(p.width)?;
    let target = p.target.unwrap_or(DEFAULT_TARGET);
    if !(target > 0.0 && target <= 1.0) {
        return Err(ApiError::InvalidParameter(format!(
            "target must be in (0, 1], got {target}"
        )));
    }
    let min_labels = p.min_labels.unwrap_or(DEFAULT_MIN_LABELS);
    if !(1..=MAX_MIN_LABELS).contains(&min_labels) {
        return Err(ApiError::InvalidParameter(format!(
            "min_labels must be between 1 and {MAX_MIN_LABELS}, got {min_labels}"
        )));
    }
    let related = match p.related.unwrap_or_default() {
        Related::NotDuplicate => RelatedAs::NotDuplicate,
        Related::Duplicate => RelatedAs::Duplicate,
    };
    let decided = backend(&coll)?.decisions(coll.dir()).await?;
    let spec = PrecisionSpec {
        by,
        bands,
        related,
        target,
        min_labels,
    };
    let measured = precision::precision(decided.iter(), &spec);
    Ok(Json(PrecisionOut {
        measure,
        score,
        labels: measured.labels,
        target,
        bands: measured.bands,
        suggested: measured.suggested,
    }))
}

/// The advisor's `measured` (`POST /analysis/histogram`): the threshold
/// the collection's labels support on Jaccard (content Jaccard for
/// `score=content`) with the defaults of `/review/precision`; `None`
/// with fewer than [`DEFAULT_MIN_LABELS`] labels.
pub(super) async fn measured(
    coll: &Collection,
    score: Score,
) -> Result<Option<Suggestion>, ApiError> {
    let by = label_score(ReviewMeasure::Jaccard, score)?;
    let decided = backend(coll)?.decisions(coll.dir()).await?;
    let spec = PrecisionSpec {
        by,
        bands: bands(None)?,
        related: RelatedAs::NotDuplicate,
        target: DEFAULT_TARGET,
        min_labels: DEFAULT_MIN_LABELS,
    };
    Ok(precision::precision(decided.iter(), &spec).suggested)
}
