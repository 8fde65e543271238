//! `POST /passages`: where else does this passage appear? A text (a
//! paragraph, a quote) in; the stored documents that hold a run of at least
//! `min_run` consecutive shingles of it out, with how long the run is and
//! how many of its shingles they hold, and (when the collection stores
//! texts) where in each document it sits. Answered from the passage index
//! and checked exactly on the stored shingle sets.

use super::dto::{format_time, PassagesOut};
use super::error::ApiError;
use super::extract::{parse_json, parse_since, Coll, JsonBody, Limit, Text};
use super::state::{backend, AppState};
use crate::backend::StoredText;
use crate::collections::Collection;
use crate::engine::{PassageHit, Segment};
use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Most shingles a looked-up passage may have: a passage is a paragraph or
/// a quote; a whole document is asked with `/similar` and a containment
/// measure.
pub const MAX_PASSAGE_SHINGLES: usize = 5_000;
/// Characters of a located passage's text returned with it.
const SPAN_TEXT_CHARS: usize = 400;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PassagesIn {
    pub text: String,
    /// The shortest run of consecutive shingles that counts (default: the
    /// run the index is sure to find, `guaranteed_run`).
    #[serde(default, deserialize_with = "super::dto::integral_count")]
    pub min_run: Option<usize>,
    #[serde(default, deserialize_with = "super::dto::integral_count")]
    pub limit: Option<usize>,
    /// Only documents stored at or after this RFC 3339 time.
    #[serde(default)]
    pub since: Option<String>,
    /// Find where each passage sits in the stored texts (default true;
    /// only where the collection stores texts).
    #[serde(default)]
    pub locate: Option<bool>,
}

#[derive(Debug, Serialize)]
pub struct PassagesAnswer {
    /// The run length asked for.
    pub min_run: usize,
    /// Every shared run of at least this many consecutive shingles is
    /// found (the winnowing window); shorter ones only when they hold one
    /// of the document's fingerprints.
    pub guaranteed_run: usize,
    /// The looked-up text's shingles in text order, and distinct.
    pub passage_shingles: usize,
    pub passage_distinct: usize,
    pub results: Vec<PassageResult>,
    /// Documents that shared a fingerprint and were checked.
    pub candidates: usize,
    pub truncated: bool,
    pub passages: PassagesOut,
}

#[derive(Debug, Serialize)]
pub struct PassageResult {
    pub id: String,
    pub created_at: String,
    /// The longest run of the passage's consecutive shingles all in this
    /// document.
    pub longest_run: usize,
    /// Distinct shingles of the passage in this document.
    pub shared: usize,
    /// `shared` over the passage's distinct shingles.
    pub share: f64,
    /// Where the passage sits in the stored text (character offsets), when
    /// the collection stores texts and `locate` is on; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spans: Option<Vec<SpanOut>>,
}

#[derive(Debug, Serialize)]
pub struct SpanOut {
    /// Offsets in Unicode characters (code points) of the stored text.
    pub start: usize,
    pub end: usize,
    /// The stored text of the span (its first 400 characters).
    pub text: String,
}

/// `POST /passages`.
pub async fn lookup(
    State(app): State<AppState>,
    Coll(coll): Coll,
    body: JsonBody,
) -> Result<Json<PassagesAnswer>, ApiError> {
    let req: PassagesIn = parse_json(&body.0)?;
    let text = Text::parse(req.text, &app.config.limits)?.into_string();
    let limit = Limit::parse(req.limit, &app.config.query)?.get();
    let since = req
        .since
        .as_deref()
        .map(|s| parse_since(s).map_err(ApiError::InvalidBody))
        .transpose()?;
    let recipe = coll.recipe().clone();
    let guaranteed_run = recipe.passage_window();
    let min_run = match req.min_run {
        None => guaranteed_run,
        Some(0) => {
            return Err(ApiError::InvalidBody(
                "min_run must be at least 1 (shingles)".into(),
            ))
        }
        Some(n) => n,
    };
    let passage = {
        let text = text.clone();
        tokio::task::spawn_blocking(move || recipe.passage(&text))
            .await
            .map_err(|e| ApiError::Internal(format!("passage task failed: {e}")))??
    };
    if passage.ordered.len() > MAX_PASSAGE_SHINGLES {
        return Err(ApiError::InvalidBody(format!(
            "the passage has {} shingles; a lookup takes at most {MAX_PASSAGE_SHINGLES} \
             (a paragraph or a quote): to find stored documents that contain or are inside a \
             whole text, use POST /similar with measure query_in_stored or stored_in_query",
            passage.ordered.len()
        )));
    }
    let backend = backend(&coll)?;
    let found = backend.passages(&passage, min_run, limit, since).await?;
    app.metrics.observe_passages(coll.name.as_str(), &found);
    let locate = req.locate.unwrap_or(true) && backend.stores_text();
    let distinct = passage.doc.shingles().len();
    let mut results = Vec::with_capacity(found.hits.len());
    for hit in found.hits {
        let spans = if locate {
            locate_in(&coll, &text, &hit).await?
        } else {
            None
        };
        results.push(PassageResult {
            id: hit.id.to_string(),
            created_at: format_time(hit.created_ms),
            longest_run: hit.longest_run,
            shared: hit.shared,
            share: hit.shared as f64 / distinct.max(1) as f64,
            spans,
        });
    }
    Ok(Json(PassagesAnswer {
        min_run,
        guaranteed_run,
        passage_shingles: found.passage_len,
        passage_distinct: distinct,
        results,
        candidates: found.candidates,
        truncated: found.truncated,
        passages: found.work.into(),
    }))
}

/// Where `passage` sits in `hit`'s stored text: the spans `/explain` marks
/// as shared on the stored side, merged where they touch. `None` when the
/// document's text is not there (stored without it, or gone since).
async fn locate_in(
    coll: &Arc<Collection>,
    passage: &str,
    hit: &PassageHit,
) -> Result<Option<Vec<SpanOut>>, ApiError> {
    let stored = match backend(coll)?.text(hit.id.as_str()).await? {
        StoredText::Text(text) => text,
        _ => return Ok(None),
    };
    let recipe = coll.recipe().clone();
    let passage = passage.to_owned();
    tokio::task::spawn_blocking(move || {
        let explanation = recipe.explain(&passage, &stored)?;
        Ok(Some(spans(&stored, &explanation.b.segments)))
    })
    .await
    .map_err(|e| ApiError::Internal(format!("locate task failed: {e}")))?
}

/// The shared segments of a text, merged where they touch, in characters.
fn spans(text: &str, segments: &[Segment]) -> Vec<SpanOut> {
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for s in segments.iter().filter(|s| s.passage.is_some()) {
        match merged.last_mut() {
            Some(last) if text[last.1..s.range.0].trim().is_empty() => last.1 = s.range.1,
            _ => merged.push(s.range),
        }
    }
    merged
        .into_iter()
        .map(|(a, b)| SpanOut {
            start: text[..a].chars().count(),
            end: text[..b].chars().count(),
            text: text[a..b].chars().take(SPAN_TEXT_CHARS).collect(),
        })
        .collect()
}
