//! The JSON shapes of duplicate groups and pairs: written by the HTTP API
//! (`GET /duplicates`, `/duplicates/pairs`) and by the offline command
//! (`neardup dedup`), which must print byte for byte what the server
//! answers. Depends on the engine's answers only.

use crate::engine::{Edge, Group};
use serde::Serialize;

/// One group on the wire (a page item, or one NDJSON line).
#[derive(Debug, Serialize)]
pub struct GroupOut<'a> {
    pub size: usize,
    pub ids: Vec<&'a str>,
    pub members: Vec<MemberOut<'a>>,
}

#[derive(Debug, Serialize)]
pub struct MemberOut<'a> {
    pub id: &'a str,
    pub best_match: &'a str,
    /// Exact Jaccard with `best_match`.
    pub jaccard: f64,
    /// The larger exact containment of the two (either inside the other).
    pub containment: f64,
    /// With `score=content`: the two scores over content shingles
    /// (boilerplate left out), which the group was formed on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<MemberContentOut>,
}

/// A member's scores over content shingles with its best match.
#[derive(Debug, Serialize)]
pub struct MemberContentOut {
    pub jaccard: f64,
    pub containment: f64,
}

impl<'a> From<&'a Group> for GroupOut<'a> {
    fn from(g: &'a Group) -> Self {
        Self {
            size: g.len(),
            ids: g.members.iter().map(|m| m.record.id().as_str()).collect(),
            members: g
                .members
                .iter()
                .map(|m| MemberOut {
                    id: m.record.id().as_str(),
                    best_match: m.best_match.id().as_str(),
                    jaccard: m.jaccard,
                    containment: m.containment,
                    content: m.content.map(|(jaccard, containment)| MemberContentOut {
                        jaccard,
                        containment,
                    }),
                })
                .collect(),
        }
    }
}

/// One pair on the wire.
#[derive(Debug, Serialize)]
pub struct PairOut<'a> {
    pub a: &'a str,
    pub b: &'a str,
    pub jaccard: f64,
    /// Exact |A ∩ B| / |A|: how much of `a` is in `b`.
    pub a_in_b: f64,
    /// Exact |A ∩ B| / |B|.
    pub b_in_a: f64,
    /// With `score=content`: the scores over content shingles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<PairContentOut>,
}

/// A pair's scores over content shingles (boilerplate left out).
#[derive(Debug, Serialize)]
pub struct PairContentOut {
    pub jaccard: f64,
    pub a_in_b: f64,
    pub b_in_a: f64,
    pub weighted_jaccard: f64,
    pub shared_content: usize,
    pub shared_boilerplate: usize,
}

impl<'a> From<&'a Edge> for PairOut<'a> {
    fn from(e: &'a Edge) -> Self {
        Self {
            a: e.a.id().as_str(),
            b: e.b.id().as_str(),
            jaccard: e.jaccard,
            a_in_b: e.a_in_b,
            b_in_a: e.b_in_a,
            content: e.content.map(|c| PairContentOut {
                jaccard: c.jaccard,
                a_in_b: c.query_in_stored,
                b_in_a: c.stored_in_query,
                weighted_jaccard: c.weighted_jaccard,
                shared_content: c.shared_content,
                shared_boilerplate: c.shared_boilerplate,
            }),
        }
    }
}
