//! Request and response bodies: the wire contract documented in `openapi.yaml`.

use crate::engine::Match;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// `POST /documents`, an item of a batch, and `PUT /documents/{id}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentIn {
    #[serde(default)]
    pub id: Option<String>,
    pub text: String,
    /// Any JSON object; stored verbatim and returned by `GET /documents/{id}`.
    #[serde(default)]
    pub metadata: Option<Box<RawValue>>,
}

/// `POST /documents/batch`. Items stay raw so one bad item fails alone.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchIn<'a> {
    #[serde(borrow)]
    pub documents: Vec<&'a RawValue>,
}

/// `POST /similar`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimilarTextIn {
    pub text: String,
    #[serde(default)]
    pub threshold: Option<f64>,
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Serialize)]
pub struct MatchOut {
    pub id: String,
    pub jaccard: f64,
    pub estimate: f64,
}

impl From<Match> for MatchOut {
    fn from(m: Match) -> Self {
        Self {
            id: m.id.to_string(),
            jaccard: m.jaccard,
            estimate: m.estimate,
        }
    }
}

/// `201` from `POST /documents`, `200`/`201` from `PUT /documents/{id}`.
#[derive(Debug, Serialize)]
pub struct WrittenOut {
    pub id: String,
    pub shingles: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similar: Option<Vec<MatchOut>>,
    /// Set when `similar` was computed from a truncated candidate list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
}

/// `GET /documents/{id}`.
#[derive(Debug, Serialize)]
pub struct DocumentOut<'a> {
    pub id: &'a str,
    pub metadata: Option<&'a RawValue>,
    pub shingles: usize,
}

/// `GET /similar` and `POST /similar`.
#[derive(Debug, Serialize)]
pub struct SimilarOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub threshold: f64,
    pub results: Vec<MatchOut>,
    /// Distinct LSH candidates verified for this answer.
    pub candidates: usize,
    /// True when candidates were cut at `index.max_candidates`.
    pub truncated: bool,
}

/// `GET /compare`.
#[derive(Debug, Serialize)]
pub struct CompareOut {
    pub a: String,
    pub b: String,
    pub jaccard: f64,
    pub estimate: f64,
    pub intersection: usize,
    pub union: usize,
}

/// One item of `POST /documents/batch`, in request order.
#[derive(Debug, Serialize)]
pub struct BatchItemOut {
    pub id: Option<String>,
    pub status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shingles: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct BatchOut {
    pub created: usize,
    pub replaced: usize,
    pub failed: usize,
    pub results: Vec<BatchItemOut>,
}

#[derive(Debug, Serialize)]
pub struct StatusOut {
    pub status: &'static str,
}
