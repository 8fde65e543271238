//! `/similar` and `/compare`: the read side, for the request's collection.

use super::documents::{metadata_text, since};
use super::dto::{CompareOut, MatchOut, PassagesOut, SimilarOut, SimilarTextIn};
use super::error::ApiError;
use super::extract::{parse_json, parse_since, ApiQuery, Coll, JsonBody, Limit, Text};
use super::filters;
use super::state::{backend, AppState};
use crate::backend::Backend;
use crate::collections::Collection;
use crate::engine::originals::{self, Dated};
use crate::engine::{Match, Measure, Query, QueryOutcome, Score};
use axum::extract::State;
use axum::Json;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimilarParams {
    id: String,
    threshold: Option<f64>,
    limit: Option<usize>,
    since: Option<String>,
    measure: Option<Measure>,
    score: Option<Score>,
    /// A JSON object: conditions on the candidates' metadata.
    filter: Option<String>,
    /// Comma-separated fields a candidate must not share with `id`.
    exclude_same: Option<String>,
}

/// The stored document a query stands for: its id, and its time for
/// originals when already known (a write's new document).
pub(super) struct Stored<'a> {
    pub id: &'a str,
    pub time_ms: Option<i64>,
}

/// The original among `matches` and the query document `query` when it
/// is stored: the earliest by the collection's `originals.time_field` (or
/// `created_at`), ties to the smaller id (`engine::originals`); `None`
/// with no match. Without a time field the matches' `created_at` is
/// enough; with one, their metadata is read in one batch (a match deleted
/// or replaced since counts by its `created_at`).
pub(super) async fn original_of(
    coll: &Collection,
    backend: &Backend,
    query: Option<Stored<'_>>,
    matches: &[Match],
) -> Result<Option<String>, ApiError> {
    if matches.is_empty() {
        return Ok(None);
    }
    let field = coll.time_field();
    let field = field.as_deref();
    let mut read: Vec<&str> = Vec::new();
    let query_unknown = query.as_ref().filter(|q| q.time_ms.is_none());
    if let Some(q) = query_unknown {
        read.push(q.id);
    }
    if field.is_some() {
        read.extend(matches.iter().map(|m| m.id.as_str()));
    }
    let dates = if read.is_empty() {
        Vec::new()
    } else {
        backend.dates(&read).await?
    };
    let mut dates = dates.into_iter();
    let mut docs: Vec<Dated<'_>> = Vec::with_capacity(matches.len() + 1);
    if let Some(q) = &query {
        match q.time_ms {
            Some(time_ms) => docs.push(Dated { id: q.id, time_ms }),
            None => {
                // Gone since the query: it is no candidate.
                if let Some(d) = dates.next().flatten() {
                    docs.push(Dated {
                        id: q.id,
                        time_ms: originals::time_of(d.metadata.as_deref(), d.created_ms, field),
                    });
                }
            }
        }
    }
    for m in matches {
        let date = if field.is_some() {
            dates.next().flatten()
        } else {
            None
        };
        let metadata = date
            .as_ref()
            .filter(|d| d.created_ms == m.created_ms)
            .and_then(|d| d.metadata.as_deref());
        docs.push(Dated {
            id: m.id.as_str(),
            time_ms: originals::time_of(metadata, m.created_ms, field),
        });
    }
    Ok(originals::original(docs).map(|d| d.id.to_owned()))
}

fn similar_out(
    id: Option<String>,
    query: &Query,
    q: QueryOutcome,
    original: Option<String>,
) -> SimilarOut {
    SimilarOut {
        original,
        id,
        threshold: query.threshold.value(),
        measure: query.measure,
        score: query.score,
        candidates: q.candidates,
        truncated: q.truncated,
        results: q.matches.into_iter().map(MatchOut::from).collect(),
        passages: q.passages.map(PassagesOut::from),
    }
}

/// `GET /similar?id=&threshold=&limit=&since=`.
pub async fn by_id(
    State(app): State<AppState>,
    Coll(coll): Coll,
    ApiQuery(p): ApiQuery<SimilarParams>,
) -> Result<Json<SimilarOut>, ApiError> {
    let (measure, score) = (p.measure.unwrap_or_default(), p.score.unwrap_or_default());
    let q = Query::new(
        coll.recipe().threshold_for(measure, score, p.threshold)?,
        Limit::parse(p.limit, &app.config.query)?.get(),
    )
    .since(since(p.since.as_deref())?)
    .measure(measure)
    .score(score)
    // `exclude_same` is resolved against the stored document once it is read.
    .filter(filters::about(
        &filters::from_query(p.filter.as_deref(), p.exclude_same.as_deref())?,
        None,
    ));
    if q.filter.is_some() {
        app.metrics.observe_filtered(coll.name.as_str(), "similar");
    }
    let backend = backend(&coll)?;
    let found = backend.similar_to_id(&p.id, &q).await?;
    app.metrics.observe_measure(
        coll.name.as_str(),
        crate::engine::By::new(q.measure, q.score),
        &found,
    );
    let stored = Stored {
        id: &p.id,
        time_ms: None,
    };
    let original = original_of(&coll, backend, Some(stored), &found.matches).await?;
    Ok(Json(similar_out(Some(p.id), &q, found, original)))
}

/// `POST /similar`: query with a text that is not stored.
pub async fn by_text(
    State(app): State<AppState>,
    Coll(coll): Coll,
    body: JsonBody,
) -> Result<Json<SimilarOut>, ApiError> {
    let req: SimilarTextIn = parse_json(&body.0)?;
    let text = Text::parse(req.text, &app.config.limits)?;
    let (measure, score) = (
        req.measure.unwrap_or_default(),
        req.score.unwrap_or_default(),
    );
    let q = Query::new(
        coll.recipe().threshold_for(measure, score, req.threshold)?,
        Limit::parse(req.limit, &app.config.query)?.get(),
    )
    .since(
        req.since
            .as_deref()
            .map(|s| parse_since(s).map_err(ApiError::InvalidBody))
            .transpose()?,
    )
    .measure(measure)
    .score(score);
    let spec = filters::from_body(req.filter.as_ref(), req.exclude_same.as_ref())?;
    let metadata = metadata_text(req.metadata.as_deref())?;
    let q = q.filter(filters::about(&spec, metadata.as_deref()));
    if q.filter.is_some() {
        app.metrics.observe_filtered(coll.name.as_str(), "similar");
    }
    let prepared = app.prepare(&coll, text).await?;
    let backend = backend(&coll)?;
    let found = backend.similar_to(&prepared, None, &q).await?;
    app.metrics.observe_measure(
        coll.name.as_str(),
        crate::engine::By::new(q.measure, q.score),
        &found,
    );
    let original = original_of(&coll, backend, None, &found.matches).await?;
    Ok(Json(similar_out(None, &q, found, original)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompareParams {
    a: String,
    b: String,
}

/// `GET /compare?a=&b=`.
pub async fn compare(
    Coll(coll): Coll,
    ApiQuery(p): ApiQuery<CompareParams>,
) -> Result<Json<CompareOut>, ApiError> {
    let c = backend(&coll)?.compare(&p.a, &p.b).await?;
    Ok(Json(CompareOut {
        a: p.a,
        b: p.b,
        jaccard: c.jaccard,
        estimate: c.estimate,
        intersection: c.overlap.intersection,
        union: c.overlap.union,
    }))
}
