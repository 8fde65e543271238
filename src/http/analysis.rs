//! `POST /analysis/histogram` and `POST /analysis/accuracy`: the threshold
//! advisor and the MinHash estimate's accuracy, on texts sent with the
//! request or on a sample of the collection's stored texts, with the
//! collection's recipe (normalization, shingle kind, seed) and banding;
//! only `k` and `num_perm` vary. [`crate::analysis`] computes; this module
//! checks the request, gathers the texts and runs the work.
//!
//! **An analysis is a scan, not a request.** It runs on the scan pool and
//! takes the scan permit, so one analysis or duplicate scan runs at a time
//! and neither blocks the async workers. It stops as soon as its request
//! goes: a client that leaves, or `server.request_timeout_secs` passing
//! (a 503), sets its stop flag, and it releases the pool and the permit
//! within one row of work.

use super::dto::{AccuracyIn, AccuracyOut, HistogramIn, HistogramOut};
use super::error::ApiError;
use super::extract::{parse_json, Coll, JsonBody};
use super::state::AppState;
use crate::analysis::{
    self, AnalysisError, Recipe, DEFAULT_BINS, DEFAULT_KS, DEFAULT_NUM_PERMS, MAX_BINS, MAX_TEXTS,
    MAX_VALUES,
};
use crate::collections::Collection;
use crate::engine::{Score, MAX_SHINGLE_K};
use axum::extract::State;
use axum::Json;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Most bytes of stored text a sample reads; a sample stops before it
/// (the answer's `texts` says how many were analysed).
pub const MAX_SAMPLE_BYTES: usize = 64 << 20;
/// Largest signature size (as for `index.num_perm`).
pub const MAX_NUM_PERM: usize = 1024;

/// The texts of an analysis, and the stored documents they came from.
struct Texts {
    texts: Vec<String>,
    /// For a sample: the id of each text, to name one in an error.
    ids: Option<Vec<String>>,
}

/// `texts` as sent, or a `sample` of the collection's stored texts.
async fn gather(
    app: &AppState,
    coll: &Arc<Collection>,
    texts: Option<Vec<String>>,
    sample: Option<usize>,
    seed: Option<u64>,
) -> Result<Texts, ApiError> {
    match (texts, sample) {
        (Some(texts), None) => {
            if seed.is_some() {
                return Err(ApiError::InvalidBody(
                    "seed chooses a sample's documents; it does not go with texts".into(),
                ));
            }
            if !(2..=MAX_TEXTS).contains(&texts.len()) {
                return Err(ApiError::InvalidBody(format!(
                    "texts must hold between 2 and {MAX_TEXTS} texts, got {}",
                    texts.len()
                )));
            }
            let max = app.config.limits.max_text_bytes;
            if let Some((i, t)) = texts.iter().enumerate().find(|(_, t)| t.len() > max) {
                return Err(ApiError::PayloadTooLarge(format!(
                    "texts[{i}] is {} bytes; the limit is {max} bytes (limits.max_text_bytes)",
                    t.len()
                )));
            }
            Ok(Texts { texts, ids: None })
        }
        (None, Some(n)) => {
            if !(2..=MAX_TEXTS).contains(&n) {
                return Err(ApiError::InvalidBody(format!(
                    "sample must be between 2 and {MAX_TEXTS}, got {n}"
                )));
            }
            if !coll.stores_text() {
                return Err(ApiError::TextNotStored(format!(
                    "collection {:?} does not store texts (store_text is off), so there is nothing to sample; send the texts to analyse as \"texts\" instead",
                    coll.name.as_str()
                )));
            }
            let seed = seed.unwrap_or_else(|| std::hash::RandomState::new().hash_one(0u8));
            let drawn = super::state::backend(coll)?
                .sample_texts(n, seed, MAX_SAMPLE_BYTES)
                .await?;
            let (ids, texts) = drawn.into_iter().unzip();
            Ok(Texts {
                texts,
                ids: Some(ids),
            })
        }
        _ => Err(ApiError::InvalidBody(
            "give exactly one of \"texts\" (the texts to analyse) and \"sample\" (how many stored texts to draw)".into(),
        )),
    }
}

/// `values` checked: 1 to [`MAX_VALUES`] distinct values in `range`.
fn distinct(
    name: &str,
    values: Vec<usize>,
    range: std::ops::RangeInclusive<usize>,
) -> Result<Vec<usize>, ApiError> {
    if values.is_empty() || values.len() > MAX_VALUES {
        return Err(ApiError::InvalidBody(format!(
            "{name} must hold between 1 and {MAX_VALUES} values, got {}",
            values.len()
        )));
    }
    if let Some(v) = values.iter().find(|v| !range.contains(v)) {
        return Err(ApiError::InvalidBody(format!(
            "each {name} must be between {} and {}, got {v}",
            range.start(),
            range.end()
        )));
    }
    if let Some((i, v)) = values
        .iter()
        .enumerate()
        .find(|(i, v)| values[..*i].contains(v))
    {
        return Err(ApiError::InvalidBody(format!(
            "{name}[{i}] repeats {v}: each value once"
        )));
    }
    Ok(values)
}

/// The shingle sizes to analyse: as given, or [`DEFAULT_KS`] and the
/// collection's own (when it is not among them).
fn shingle_sizes(k: Option<Vec<usize>>, own: usize) -> Result<Vec<usize>, ApiError> {
    match k {
        Some(k) => distinct("k", k, 1..=MAX_SHINGLE_K),
        None => {
            let mut ks = DEFAULT_KS.to_vec();
            if !ks.contains(&own) {
                ks.push(own);
                ks.sort_unstable();
            }
            Ok(ks)
        }
    }
}

fn recipe(coll: &Collection) -> Recipe {
    let p = coll.recipe().params();
    Recipe {
        normalize: p.normalize,
        kind: p.shingle.kind,
        multiset: p.shingle.multiset,
        seed: p.index.seed,
    }
}

/// Sets the stop flag when dropped: when the request's future goes (the
/// client left or the timeout answered), the analysis stops too.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Run `work` on the scan pool under the scan permit; record its time.
async fn run<T: Send + 'static>(
    app: &AppState,
    coll: &Collection,
    kind: &'static str,
    ids: Option<Vec<String>>,
    work: impl FnOnce(&AtomicBool) -> Result<T, AnalysisError> + Send + 'static,
) -> Result<T, ApiError> {
    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_drop = StopOnDrop(Arc::clone(&stop));
    let permit = app.scans.permit().await;
    let scans = Arc::clone(&app.scans);
    let at = Instant::now();
    let done = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        scans.pool().install(|| work(&stop))
    })
    .await
    .map_err(|e| ApiError::Internal(format!("analysis task failed: {e}")))?;
    let seconds = at.elapsed().as_secs_f64();
    match done {
        Ok(answer) => {
            app.metrics
                .observe_analysis(coll.name.as_str(), kind, seconds);
            tracing::info!(
                collection = coll.name.as_str(),
                kind,
                seconds,
                "analysis computed"
            );
            Ok(answer)
        }
        Err(AnalysisError::EmptyText { index }) => Err(ApiError::EmptyText(match ids {
            Some(ids) => format!(
                "the sampled document {:?} has no words or characters left after normalization",
                ids[index]
            ),
            None => {
                format!("texts[{index}] has no words or characters left after normalization")
            }
        })),
        // Only a request that is gone stops its analysis: nobody reads this.
        Err(AnalysisError::Stopped(_)) => Err(ApiError::Internal("analysis stopped".into())),
    }
}

/// `POST /analysis/histogram`.
pub async fn histogram(
    State(app): State<AppState>,
    Coll(coll): Coll,
    body: JsonBody,
) -> Result<Json<HistogramOut>, ApiError> {
    let req: HistogramIn = parse_json(&body.0)?;
    let ks = shingle_sizes(req.k, coll.recipe().params().shingle.k)?;
    let bins = req.bins.unwrap_or(DEFAULT_BINS);
    if !(2..=MAX_BINS).contains(&bins) {
        return Err(ApiError::InvalidBody(format!(
            "bins must be between 2 and {MAX_BINS}, got {bins}"
        )));
    }
    let score = req.score.unwrap_or_default();
    let content = match score {
        Score::Raw => None,
        Score::Content => {
            let p = coll.recipe().boilerplate_params();
            let templates = super::state::backend(&coll)?
                .templates(coll.dir())
                .await?
                .into_iter()
                .map(|t| t.text)
                .collect();
            Some(analysis::ContentRule {
                share: p.share,
                min_docs: p.min_docs,
                min_collection_docs: p.min_collection_docs,
                templates,
            })
        }
    };
    let Texts { texts, ids } = gather(&app, &coll, req.texts, req.sample, req.seed).await?;
    let measured = super::review_queue::measured(&coll, score).await?;
    let recipe = recipe(&coll);
    let b = *coll.recipe().bands();
    let n = texts.len();
    let histograms = run(&app, &coll, "histogram", ids, move |stop| {
        analysis::histograms(
            &recipe,
            &texts,
            &ks,
            bins,
            (b.bands, b.rows),
            content.as_ref(),
            stop,
            &|_, _| {},
        )
    })
    .await?;
    Ok(Json(HistogramOut {
        texts: n,
        score,
        bands: b.bands,
        rows: b.rows,
        histograms,
        measured,
    }))
}

/// `POST /analysis/accuracy`.
pub async fn accuracy(
    State(app): State<AppState>,
    Coll(coll): Coll,
    body: JsonBody,
) -> Result<Json<AccuracyOut>, ApiError> {
    let req: AccuracyIn = parse_json(&body.0)?;
    let ks = shingle_sizes(req.k, coll.recipe().params().shingle.k)?;
    let perms = match req.num_perm {
        Some(p) => distinct("num_perm", p, 1..=MAX_NUM_PERM)?,
        None => DEFAULT_NUM_PERMS.to_vec(),
    };
    let threshold = req
        .threshold
        .unwrap_or(coll.recipe().params().index.threshold);
    if !(threshold > 0.0 && threshold <= 1.0) {
        return Err(ApiError::InvalidBody(format!(
            "threshold must be in (0, 1], got {threshold}"
        )));
    }
    let Texts { texts, ids } = gather(&app, &coll, req.texts, req.sample, req.seed).await?;
    let recipe = recipe(&coll);
    let n = texts.len();
    let accuracy = run(&app, &coll, "accuracy", ids, move |stop| {
        analysis::accuracy(&recipe, &texts, &ks, &perms, threshold, stop, &|_, _| {})
    })
    .await?;
    Ok(Json(AccuracyOut {
        texts: n,
        threshold,
        accuracy,
    }))
}
