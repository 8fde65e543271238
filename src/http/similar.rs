//! `/similar` and `/compare`: the read side.

use super::dto::{CompareOut, MatchOut, SimilarOut, SimilarTextIn};
use super::error::ApiError;
use super::extract::{parse_json, ApiQuery, JsonBody, Limit, Text};
use super::state::AppState;
use crate::engine::QueryOutcome;
use axum::extract::State;
use axum::Json;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimilarParams {
    id: String,
    threshold: Option<f64>,
    limit: Option<usize>,
}

fn similar_out(id: Option<String>, threshold: f64, q: QueryOutcome) -> SimilarOut {
    SimilarOut {
        id,
        threshold,
        candidates: q.candidates,
        truncated: q.truncated,
        results: q.matches.into_iter().map(MatchOut::from).collect(),
    }
}

/// `GET /similar?id=&threshold=&limit=`.
pub async fn by_id(
    State(app): State<AppState>,
    ApiQuery(p): ApiQuery<SimilarParams>,
) -> Result<Json<SimilarOut>, ApiError> {
    let threshold = app.engine.threshold(p.threshold)?;
    let limit = Limit::parse(p.limit, &app.config.query)?.get();
    let q = app.engine.similar_to_id(&p.id, threshold, limit)?;
    app.metrics.observe_query(&q);
    Ok(Json(similar_out(Some(p.id), threshold.value(), q)))
}

/// `POST /similar`: query with a text that is not stored.
pub async fn by_text(
    State(app): State<AppState>,
    body: JsonBody,
) -> Result<Json<SimilarOut>, ApiError> {
    let req: SimilarTextIn = parse_json(&body.0)?;
    let text = Text::parse(req.text, &app.config.limits)?;
    let threshold = app.engine.threshold(req.threshold)?;
    let limit = Limit::parse(req.limit, &app.config.query)?.get();
    let prepared = app.prepare(text).await?;
    let q = app.engine.similar_to(&prepared, None, threshold, limit);
    app.metrics.observe_query(&q);
    Ok(Json(similar_out(None, threshold.value(), q)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompareParams {
    a: String,
    b: String,
}

/// `GET /compare?a=&b=`.
pub async fn compare(
    State(app): State<AppState>,
    ApiQuery(p): ApiQuery<CompareParams>,
) -> Result<Json<CompareOut>, ApiError> {
    let c = app.engine.compare(&p.a, &p.b)?;
    Ok(Json(CompareOut {
        a: p.a,
        b: p.b,
        jaccard: c.jaccard,
        estimate: c.estimate,
        intersection: c.overlap.intersection,
        union: c.overlap.union,
    }))
}
