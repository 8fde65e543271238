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
use crate::engine::{ContentScores, EngineError, Explanation, Side};
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
                boilerplate: s.boilerplate,
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
    let marks = boilerplate_marks(&coll, &a, &b).await?;
    let recipe = coll.recipe().clone();
    let explain = move |a: String, b: String| {
        let found = match &marks {
            Some(m) => recipe
                .explain_marked(&a, &b, Some((&m.a, &m.b)))
                .map(|x| (x, Some(m.scores))),
            None => recipe.explain(&a, &b).map(|x| (x, None)),
        };
        (a, b, found)
    };
    let (a, b, found) = if a.len() + b.len() <= INLINE_PREPARE_BYTES {
        explain(a, b)
    } else {
        tokio::task::spawn_blocking(move || explain(a, b))
            .await
            .map_err(|e| ApiError::Internal(format!("explain task failed: {e}")))?
    };
    let (x, content): (Explanation, Option<ContentScores>) = found.map_err(|e| match e {
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
        content,
    }))
}

/// Each side's boilerplate, shingle by shingle in text order, and the
/// content scores of the pair.
struct Marks {
    a: Vec<bool>,
    b: Vec<bool>,
    scores: ContentScores,
}

/// The boilerplate marks of `a` and `b` in `coll`, when it counts document
/// frequency or has templates (`None` otherwise, or for a text with
/// nothing left after normalization: explain says so itself).
async fn boilerplate_marks(
    coll: &Arc<Collection>,
    a: &str,
    b: &str,
) -> Result<Option<Marks>, ApiError> {
    let backend = super::state::backend(coll)?;
    let recipe = coll.recipe();
    if !backend.boilerplate_on() && recipe.template_shingles().is_empty() {
        return Ok(None);
    }
    // Shingled off the async workers when large, as the explanation is.
    let shingled = if a.len() + b.len() <= INLINE_PREPARE_BYTES {
        (recipe.passage(a), recipe.passage(b))
    } else {
        let (r, a, b) = (recipe.clone(), a.to_owned(), b.to_owned());
        tokio::task::spawn_blocking(move || (r.passage(&a), r.passage(&b)))
            .await
            .map_err(|e| ApiError::Internal(format!("explain task failed: {e}")))?
    };
    let (Ok(pa), Ok(pb)) = shingled else {
        return Ok(None);
    };
    let mut all: Vec<u32> = pa.doc.shingles().to_vec();
    all.extend_from_slice(pb.doc.shingles());
    all.sort_unstable();
    all.dedup();
    let (df, docs) = backend.doc_frequencies(&all).await?;
    let classifier = recipe.classifier_with(docs);
    let df_of = |x: u32| all.binary_search(&x).map_or(0, |i| df[i]);
    let mask = |ordered: &[u32]| -> Vec<bool> {
        ordered
            .iter()
            .map(|&x| classifier.is_boilerplate(x, df_of(x)))
            .collect()
    };
    let dfs = |set: &[u32]| -> Vec<u32> { set.iter().map(|&x| df_of(x)).collect() };
    let scores = classifier.scores(
        pa.doc.shingles(),
        &dfs(pa.doc.shingles()),
        pb.doc.shingles(),
        &dfs(pb.doc.shingles()),
    );
    Ok(Some(Marks {
        a: mask(&pa.ordered),
        b: mask(&pb.ordered),
        scores,
    }))
}
