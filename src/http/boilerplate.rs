//! Boilerplate: a collection's registered templates (`/templates`), and
//! what text repeats across its documents (`GET /boilerplate`).
//!
//! A template is a text an operator registers (a footer, a disclaimer, a
//! signature block): every shingle of it is boilerplate in the collection,
//! whatever its document count. The common passages are found from the
//! document frequencies (`index.boilerplate`): the shingles at or above the
//! collection's threshold, traced in a sample of stored texts as the runs
//! `/explain` marks, each with the fewest documents any of its shingles is
//! in (an upper bound on the documents holding it whole).

use super::dto::format_time;
use super::error::ApiError;
use super::extract::{parse_json, ApiQuery, Coll, DocPath, JsonBody, Text};
use super::state::{backend, AppState};
use crate::engine::{EngineError, Template};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Characters of a common passage's text returned with it.
const PASSAGE_TEXT_CHARS: usize = 400;
/// Stored texts read for the common passages by default, and at most.
const DEFAULT_SAMPLE: usize = 200;
const MAX_SAMPLE: usize = 2_000;
/// Bytes of sampled texts read at most.
const SAMPLE_BYTES: usize = 32 << 20;
/// Common shingles read at most (the most common first).
const MAX_COMMON: usize = 200_000;
/// Common passages listed by default, and at most.
const DEFAULT_PASSAGES: usize = 20;
const MAX_PASSAGES: usize = 200;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateIn {
    pub text: String,
}

/// A template as listed (its text with `GET /templates/{id}` only).
#[derive(Debug, Serialize)]
pub struct TemplateOut {
    pub id: String,
    /// Distinct shingles of its text under the collection's recipe.
    pub shingles: usize,
    /// Its text's length in bytes.
    pub bytes: usize,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct TemplatesOut {
    pub templates: Vec<TemplateOut>,
    /// The most a collection holds.
    pub max_templates: usize,
}

fn template_out(coll: &crate::collections::Collection, t: Template, text: bool) -> TemplateOut {
    let shingles = coll
        .recipe()
        .prepare(&t.text)
        .map_or(0, |p| p.shingles().len());
    TemplateOut {
        id: t.id,
        shingles,
        bytes: t.text.len(),
        created_at: format_time(t.created_ms),
        text: text.then_some(t.text),
    }
}

/// `GET /templates`.
pub async fn list(Coll(coll): Coll) -> Result<Json<TemplatesOut>, ApiError> {
    let all = backend(&coll)?.templates(coll.dir()).await?;
    Ok(Json(TemplatesOut {
        templates: all
            .into_iter()
            .map(|t| template_out(&coll, t, false))
            .collect(),
        max_templates: crate::engine::MAX_TEMPLATES,
    }))
}

/// `GET /templates/{id}`.
pub async fn get(Coll(coll): Coll, DocPath(id): DocPath) -> Result<Json<TemplateOut>, ApiError> {
    let all = backend(&coll)?.templates(coll.dir()).await?;
    let t = all
        .into_iter()
        .find(|t| t.id == id)
        .ok_or(ApiError::TemplateNotFound(id))?;
    Ok(Json(template_out(&coll, t, true)))
}

/// `PUT /templates/{id}`: register (201) or replace (200) a template.
pub async fn put(
    State(app): State<AppState>,
    Coll(coll): Coll,
    DocPath(id): DocPath,
    body: JsonBody,
) -> Result<Response, ApiError> {
    // The rule of document ids (`.` and `..` would not survive a client's
    // path normalization).
    let id = super::documents::client_id(&id)?.to_string();
    let req: TemplateIn = parse_json(&body.0)?;
    let text = Text::parse(req.text, &app.config.limits)?.into_string();
    // A text with nothing left after normalization would mark nothing.
    let shingles = coll
        .recipe()
        .prepare(&text)
        .map_err(|crate::text::TextError::Empty| {
            ApiError::EmptyText("text has no words or characters left after normalization".into())
        })?
        .shingles()
        .len();
    let template = Template {
        id: id.clone(),
        text,
        created_ms: coll.recipe().now_ms(),
    };
    let created = coll.put_template(template.clone()).await?;
    app.metrics.observe_template_change(
        coll.name.as_str(),
        if created { "created" } else { "replaced" },
    );
    let out = TemplateOut {
        id: template.id,
        shingles,
        bytes: template.text.len(),
        created_at: format_time(template.created_ms),
        text: None,
    };
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(out)).into_response())
}

/// `DELETE /templates/{id}`: 204, or 404 if there is none.
pub async fn delete(
    State(app): State<AppState>,
    Coll(coll): Coll,
    DocPath(id): DocPath,
) -> Result<StatusCode, ApiError> {
    if !coll.delete_template(&id).await? {
        return Err(ApiError::TemplateNotFound(id));
    }
    app.metrics
        .observe_template_change(coll.name.as_str(), "deleted");
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommonParams {
    limit: Option<usize>,
    sample: Option<usize>,
}

/// `GET /boilerplate`.
#[derive(Debug, Serialize)]
pub struct CommonOut {
    /// Documents counted (N).
    pub documents: usize,
    /// Whether counts make boilerplate now (the collection holds at least
    /// `min_collection_docs`).
    pub applies: bool,
    /// The document count from which a shingle is boilerplate (null while
    /// counts do not apply).
    pub threshold_docs: Option<u32>,
    pub share: f64,
    pub min_docs: usize,
    pub min_collection_docs: usize,
    /// Distinct shingles counted, and those at or above `threshold_docs`.
    pub distinct_shingles: usize,
    pub boilerplate_shingles: usize,
    /// Registered templates.
    pub templates: usize,
    /// Document counts of the most common shingles (at most 20).
    pub top_counts: Vec<u32>,
    /// Stored texts read to find the passages (0 when texts are not stored).
    pub sampled: usize,
    /// Most common first.
    pub passages: Vec<CommonPassage>,
}

#[derive(Debug, Serialize)]
pub struct CommonPassage {
    /// The fewest documents any of its shingles is in: at most this many
    /// hold the passage whole.
    pub documents: u32,
    /// Its distinct shingles.
    pub shingles: usize,
    /// Sampled texts it was found in.
    pub sampled_in: usize,
    /// Every shingle of it is a template's.
    pub template: bool,
    /// A document it was found in, and its text there (first 400 characters).
    pub id: String,
    pub text: String,
}

/// `GET /boilerplate?limit=&sample=`: the collection's most common passages.
pub async fn common(
    Coll(coll): Coll,
    ApiQuery(p): ApiQuery<CommonParams>,
) -> Result<Json<CommonOut>, ApiError> {
    let limit = match p.limit.unwrap_or(DEFAULT_PASSAGES) {
        n @ 1..=MAX_PASSAGES => n,
        n => {
            return Err(ApiError::InvalidParameter(format!(
                "limit must be between 1 and {MAX_PASSAGES}, got {n}"
            )))
        }
    };
    let sample = match p.sample.unwrap_or(DEFAULT_SAMPLE) {
        n @ 0..=MAX_SAMPLE => n,
        n => {
            return Err(ApiError::InvalidParameter(format!(
                "sample must be at most {MAX_SAMPLE}, got {n}"
            )))
        }
    };
    let backend = backend(&coll)?;
    if !backend.boilerplate_on() {
        return Err(EngineError::BoilerplateOff.into());
    }
    let (_, documents) = backend.doc_frequencies(&[]).await?;
    let params = coll.recipe().boilerplate_params();
    let at = params.threshold_docs(documents);
    let (common, distinct) = match at {
        Some(at) => backend.common_shingles(at, MAX_COMMON).await?,
        None => backend.common_shingles(u32::MAX, 0).await?,
    };
    let top_counts = common.iter().take(20).map(|c| c.1).collect();
    let boilerplate_shingles = common.len();
    let templates = backend.templates(coll.dir()).await?.len();
    let texts = if backend.stores_text() && sample > 0 {
        backend.sample_texts(sample, 0, SAMPLE_BYTES).await?
    } else {
        Vec::new()
    };
    let sampled = texts.len();
    let recipe = coll.recipe().clone();
    let passages = tokio::task::spawn_blocking(move || {
        common_passages(&recipe, documents, &common, &texts, limit)
    })
    .await
    .map_err(|e| ApiError::Internal(format!("boilerplate task failed: {e}")))?;
    Ok(Json(CommonOut {
        documents,
        applies: at.is_some(),
        threshold_docs: at,
        share: params.share,
        min_docs: params.min_docs,
        min_collection_docs: params.min_collection_docs,
        distinct_shingles: distinct,
        boilerplate_shingles,
        templates,
        top_counts,
        sampled,
        passages,
    }))
}

/// The boilerplate runs of each sampled text (as `/explain` marks them),
/// merged across texts by their shingles, most documents first.
fn common_passages(
    recipe: &crate::collections::Recipe,
    documents: usize,
    common: &[(u32, u32)],
    texts: &[(String, String)],
    limit: usize,
) -> Vec<CommonPassage> {
    let df: HashMap<u32, u32> = common.iter().copied().collect();
    let classifier = recipe.classifier_with(documents);
    let templates = recipe.template_shingles();
    let mut found: HashMap<Vec<u32>, CommonPassage> = HashMap::new();
    for (id, text) in texts {
        let Ok(p) = recipe.passage(text) else {
            continue;
        };
        let mask: Vec<bool> = p
            .ordered
            .iter()
            .map(|x| classifier.is_boilerplate(*x, df.get(x).copied().unwrap_or(0)))
            .collect();
        if !mask.iter().any(|&b| b) {
            continue;
        }
        let Ok(x) = recipe.explain_marked(text, text, Some((&mask, &mask))) else {
            continue;
        };
        for seg in x.a.segments.iter().filter(|s| s.boilerplate) {
            let piece = &text[seg.range.0..seg.range.1];
            let Ok(inner) = recipe.passage(piece) else {
                continue;
            };
            // The passage is its boilerplate shingles (a run may bridge a
            // few words of the document's own between common ones): the
            // same footer in two documents is one passage.
            let key: Vec<u32> = inner
                .doc
                .shingles()
                .iter()
                .copied()
                .filter(|s| df.contains_key(s) || templates.contains(s))
                .collect();
            if key.is_empty() {
                continue;
            }
            // Shingles of the passage that are counted common (a template's
            // may be rarer): the fewest documents among them.
            let counts: Vec<u32> = key.iter().filter_map(|s| df.get(s).copied()).collect();
            let template = key.iter().all(|s| templates.contains(s));
            let entry = found.entry(key.clone()).or_insert_with(|| CommonPassage {
                documents: counts.iter().copied().min().unwrap_or(0),
                shingles: key.len(),
                sampled_in: 0,
                template,
                id: id.clone(),
                text: piece.trim().chars().take(PASSAGE_TEXT_CHARS).collect(),
            });
            entry.sampled_in += 1;
        }
    }
    let mut out: Vec<CommonPassage> = found.into_values().collect();
    out.sort_by(|a, b| {
        b.documents
            .cmp(&a.documents)
            .then(b.sampled_in.cmp(&a.sampled_in))
            .then(b.shingles.cmp(&a.shingles))
            .then(a.text.cmp(&b.text))
    });
    out.truncate(limit);
    out
}
