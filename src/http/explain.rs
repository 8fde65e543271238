//! `POST /explain`: why two texts match, for the request's collection.
//!
//! Each side is a stored document (`{"id"}`) or a text (`{"text"}`). A
//! stored document's text is needed to mark its passages; a collection
//! that does not store texts answers 409 `text-not-stored` for an id that
//! exists (and 404 for one that does not), so such a document is explained
//! by sending its text.

use super::dto::{ExplainIn, ExplainOperand, ExplainOut, ExplainSideOut, SegmentOut};
use super::error::ApiError;
use super::extract::{parse_json, Coll, JsonBody, Text};
use super::state::{AppState, INLINE_PREPARE_BYTES};
use crate::collections::Collection;
use crate::engine::{EngineError, Explanation, Side};
use crate::text::{normalize, TextError};
use axum::extract::State;
use axum::Json;
use std::sync::Arc;

/// A side's text, checked against the limits.
async fn operand(
    app: &AppState,
    coll: &Arc<Collection>,
    side: &str,
    o: ExplainOperand,
) -> Result<(Option<String>, Text), ApiError> {
    match (o.id, o.text) {
        (None, Some(text)) => Ok((None, Text::parse(text, &app.config.limits)?)),
        (Some(id), None) => {
            if super::state::backend(coll)?.get(&id).await?.is_none() {
                return Err(EngineError::NotFound(id).into());
            }
            let text = super::documents::stored_text(coll, &id)
                .await
                .map_err(|e| match e {
                    ApiError::TextNotStored(detail) => ApiError::TextNotStored(format!(
                        "{side}: {detail}; send its text as {side}.text instead"
                    )),
                    other => other,
                })?;
            Ok((Some(id), Text::stored(text)))
        }
        _ => Err(ApiError::InvalidBody(format!(
            "{side} needs exactly one of \"id\" and \"text\""
        ))),
    }
}

fn side_out(id: Option<String>, text: &str, side: Side) -> ExplainSideOut {
    ExplainSideOut {
        id,
        shingles: side.shingles,
        units: side.units,
        alignment: side.alignment.as_str(),
        segments: side
            .segments
            .into_iter()
            .map(|s| SegmentOut {
                text: text[s.range.0..s.range.1].to_owned(),
                passage: s.passage,
            })
            .collect(),
    }
}

/// `POST /explain`.
pub async fn explain(
    State(app): State<AppState>,
    Coll(coll): Coll,
    body: JsonBody,
) -> Result<Json<ExplainOut>, ApiError> {
    let req: ExplainIn = parse_json(&body.0)?;
    let (id_a, a) = operand(&app, &coll, "a", req.a).await?;
    let (id_b, b) = operand(&app, &coll, "b", req.b).await?;
    let (a, b) = (a.into_string(), b.into_string());
    let (a, b, found) = if a.len() + b.len() <= INLINE_PREPARE_BYTES {
        let found = coll.recipe().explain(&a, &b);
        (a, b, found)
    } else {
        let engine = coll.recipe().clone();
        tokio::task::spawn_blocking(move || {
            let found = engine.explain(&a, &b);
            (a, b, found)
        })
        .await
        .map_err(|e| ApiError::Internal(format!("explain task failed: {e}")))?
    };
    let x: Explanation = found.map_err(|e| match e {
        EngineError::Text(TextError::Empty) => {
            let opts = &coll.recipe().params().normalize;
            let side = if normalize(&a, opts).is_empty() {
                "a"
            } else {
                "b"
            };
            ApiError::EmptyText(format!(
                "{side}.text has no words or characters left after normalization"
            ))
        }
        other => other.into(),
    })?;
    Ok(Json(ExplainOut {
        jaccard: x.jaccard,
        estimate: x.estimate,
        intersection: x.intersection,
        union: x.union,
        containment_a_in_b: x.containment_a_in_b,
        containment_b_in_a: x.containment_b_in_a,
        passages: x.passages,
        a: side_out(id_a, &a, x.a),
        b: side_out(id_b, &b, x.b),
    }))
}
