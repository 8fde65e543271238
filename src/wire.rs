//! The JSON shapes of duplicate groups and pairs: written by the HTTP API
//! (`GET /duplicates`, `/duplicates/pairs`) and by the offline command
//! (`neardup dedup`), which must print byte for byte what the server
//! answers; and the drop list of a dedup with a keep policy
//! (`GET /duplicates/drop-list`, `neardup dedup --drop-list`). Depends on
//! the engine's answers only.

use crate::engine::originals::{self, Keep};
use crate::engine::{Edge, Group};
use serde::Serialize;

/// One group on the wire (a page item, or one NDJSON line).
#[derive(Debug, Serialize)]
pub struct GroupOut<'a> {
    pub size: usize,
    pub ids: Vec<&'a str>,
    /// The member that is the original: the earliest by the collection's
    /// `originals.time_field` or `created_at`, ties to the smaller id
    /// (`engine::originals`).
    pub original: &'a str,
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

impl<'a> GroupOut<'a> {
    /// `g` with its original by the time in metadata field `time_field`
    /// (`None`: when stored).
    pub fn new(g: &'a Group, time_field: Option<&str>) -> Self {
        let original = originals::group_original(g, time_field);
        Self {
            size: g.len(),
            ids: g.members.iter().map(|m| m.record.id().as_str()).collect(),
            original: g.members[original].record.id().as_str(),
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

/// One entry of a drop list: a document to remove, so that `kept` stays
/// alone of its group (a page item, or one NDJSON line).
#[derive(Debug, PartialEq, Serialize)]
pub struct DropOut<'a> {
    pub id: &'a str,
    /// The member of its group the keep policy keeps.
    pub kept: &'a str,
    /// Its group's position in the whole answer (groups ordered by their
    /// smallest id, as `GET /duplicates` lists them), from 0.
    pub group: usize,
}

/// The drop entries of `group` (number `index` of the answer) under
/// `keep`: every member but the kept one, in id order.
pub fn drops<'a>(
    group: &'a Group,
    index: usize,
    keep: &Keep,
    time_field: Option<&str>,
) -> impl Iterator<Item = DropOut<'a>> {
    let k = originals::group_kept(group, keep, time_field);
    let kept = group.members[k].record.id().as_str();
    group
        .members
        .iter()
        .enumerate()
        .filter(move |&(i, _)| i != k)
        .map(move |(_, m)| DropOut {
            id: m.record.id().as_str(),
            kept,
            group: index,
        })
}
