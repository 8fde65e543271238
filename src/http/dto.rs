//! Request and response bodies: the wire contract documented in `openapi.yaml`.
//! The shapes of groups and pairs, which the offline command writes too,
//! are in [`crate::wire`].

use crate::engine::{ContentScores, DocId, Match, Measure, PassageWork, Score};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;

/// `POST /documents` and an item of a batch.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentIn {
    #[serde(default)]
    pub id: Option<String>,
    pub text: String,
    /// Any JSON object; stored verbatim and returned by `GET /documents/{id}`.
    #[serde(default)]
    pub metadata: Option<Box<RawValue>>,
    /// Own expiry, seconds from now (at least 1); not with `expires_at`.
    #[serde(default, deserialize_with = "integral_count")]
    pub ttl_secs: Option<usize>,
    /// Own expiry, an RFC 3339 time in the future; not with `ttl_secs`.
    #[serde(default)]
    pub expires_at: Option<String>,
}

/// An item of `POST /documents/batch`: [`DocumentIn`] with its strings
/// borrowed from the request body where they hold no escape.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchDocumentIn<'a> {
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
    pub id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub text: Cow<'a, str>,
    #[serde(default, borrow)]
    pub metadata: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "integral_count")]
    pub ttl_secs: Option<usize>,
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
    pub expires_at: Option<Cow<'a, str>>,
}

/// An optional string, borrowed from the input when it holds no escape
/// (serde's own `Option<Cow<str>>` always copies).
fn borrowed_str<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Cow<'de, str>>, D::Error> {
    #[derive(Deserialize)]
    struct Borrowed<'a>(#[serde(borrow)] Cow<'a, str>);
    Ok(Option::<Borrowed<'de>>::deserialize(d)?.map(|b| b.0))
}

/// `PUT /documents/{id}`: the id comes from the path only, so a body
/// can never contradict it (an `id` field is an unknown field: 422).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentPut {
    pub text: String,
    #[serde(default)]
    pub metadata: Option<Box<RawValue>>,
    /// Own expiry, seconds from now (at least 1); not with `expires_at`.
    #[serde(default, deserialize_with = "integral_count")]
    pub ttl_secs: Option<usize>,
    /// Own expiry, an RFC 3339 time in the future; not with `ttl_secs`.
    #[serde(default)]
    pub expires_at: Option<String>,
}

/// RFC 3339 (UTC, milliseconds) of `ms` since the Unix epoch.
pub fn format_time(ms: u64) -> String {
    use time::format_description::well_known::Rfc3339;
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
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
    /// An integer; JSON Schema also counts `464.0` as one, so integral
    /// floats are accepted too.
    #[serde(default, deserialize_with = "integral_count")]
    pub limit: Option<usize>,
    /// Only documents stored at or after this RFC 3339 time.
    #[serde(default)]
    pub since: Option<String>,
    /// The score the threshold applies to (default `jaccard`).
    #[serde(default)]
    pub measure: Option<Measure>,
    /// Over which shingles (default `raw`: all; `content`: boilerplate
    /// left out).
    #[serde(default)]
    pub score: Option<Score>,
    /// Conditions on the candidates' top-level metadata fields (checked by
    /// `http::filters`).
    #[serde(default)]
    pub filter: Option<serde_json::Value>,
    /// Fields a candidate must not share with `metadata`.
    #[serde(default)]
    pub exclude_same: Option<serde_json::Value>,
    /// The query text's own metadata (a JSON object, not stored): what
    /// `exclude_same` compares with.
    #[serde(default)]
    pub metadata: Option<Box<RawValue>>,
}

#[derive(Debug, Serialize)]
pub struct MatchOut {
    pub id: String,
    pub jaccard: f64,
    /// Exact |Q ∩ D| / |Q|: how much of the query is in this document.
    pub query_in_stored: f64,
    /// Exact |Q ∩ D| / |D|: how much of this document is in the query.
    pub stored_in_query: f64,
    pub estimate: f64,
    /// When the matched document was stored (RFC 3339).
    pub created_at: String,
    /// The scores over content shingles (boilerplate left out), when the
    /// collection counts document frequency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<ContentScores>,
}

impl From<Match> for MatchOut {
    fn from(m: Match) -> Self {
        Self {
            id: m.id.to_string(),
            jaccard: m.jaccard,
            query_in_stored: m.query_in_stored,
            stored_in_query: m.stored_in_query,
            estimate: m.estimate,
            created_at: format_time(m.created_ms),
            content: m.content,
        }
    }
}

/// `201` from `POST /documents`, `200`/`201` from `PUT /documents/{id}`.
#[derive(Debug, Serialize)]
pub struct WrittenOut {
    pub id: String,
    pub shingles: usize,
    /// With `if_unique=true`: whether the document was stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inserted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similar: Option<Vec<MatchOut>>,
    /// With `similar` or `if_unique`: the original among `similar` and
    /// the written document (when stored); null without matches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original: Option<Option<String>>,
    /// Set when `similar` was computed from a truncated candidate list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    /// With `similar` or `if_unique`: the measure the threshold applied to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measure: Option<Measure>,
    /// With `similar` or `if_unique`: over which shingles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<Score>,
    /// With a containment measure: what the passage index skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passages: Option<PassagesOut>,
}

/// What a containment query read of the passage index.
#[derive(Debug, Serialize)]
pub struct PassagesOut {
    /// The query's passage fingerprints looked up.
    pub fingerprints: usize,
    /// Of those, held by more than `index.common_fingerprint_docs`
    /// documents: skipped as boilerplate (they still count as shared).
    pub common: usize,
    /// The document counts of the largest skipped ones (at most ten).
    pub common_documents: Vec<usize>,
}

impl From<PassageWork> for PassagesOut {
    fn from(w: PassageWork) -> Self {
        Self {
            fingerprints: w.fingerprints,
            common: w.common,
            common_documents: w.common_docs,
        }
    }
}

/// `GET /documents/{id}`.
#[derive(Debug, Serialize)]
pub struct DocumentOut<'a> {
    pub id: &'a str,
    pub metadata: Option<&'a RawValue>,
    pub shingles: usize,
    /// When this version was stored (RFC 3339).
    pub created_at: String,
    /// When it expires (RFC 3339), by its own expiry or its collection's
    /// retention; null if it does not.
    pub expires_at: Option<String>,
    /// The text as posted, with `?include=text`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// `GET /similar` and `POST /similar`.
#[derive(Debug, Serialize)]
pub struct SimilarOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub threshold: f64,
    /// The score `threshold` applies to and `results` are sorted by.
    pub measure: Measure,
    /// Over which shingles that score is taken.
    pub score: Score,
    pub results: Vec<MatchOut>,
    /// The original among the results and the queried document (when it
    /// is stored): the earliest by the collection's `originals.time_field`
    /// or `created_at`, ties to the smaller id; null without results.
    pub original: Option<String>,
    /// Distinct candidates verified for this answer (from the LSH bands,
    /// or from the passage index for a containment measure).
    pub candidates: usize,
    /// True when candidates were cut at `index.max_candidates`.
    pub truncated: bool,
    /// With a containment measure: what the passage index skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passages: Option<PassagesOut>,
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

/// The id of a batch item's answer: as the client gave it (an item that
/// failed before it was checked) or the checked id (shared, not copied).
#[derive(Debug)]
pub enum ItemId {
    Given(String),
    Stored(DocId),
}

impl ItemId {
    pub fn as_str(&self) -> &str {
        match self {
            ItemId::Given(id) => id,
            ItemId::Stored(id) => id.as_str(),
        }
    }
}

impl Serialize for ItemId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One item of `POST /documents/batch`, in request order.
#[derive(Debug, Serialize)]
pub struct BatchItemOut {
    pub id: Option<ItemId>,
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

/// An optional non-negative integer that may be written as `5` or `5.0`.
pub(super) fn integral_count<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<usize>, D::Error> {
    Option::<serde_json::Number>::deserialize(d)?
        .map(|n| count(&n))
        .transpose()
}

/// [`integral_count`] for each value of an optional list.
fn integral_counts<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<usize>>, D::Error> {
    Option::<Vec<serde_json::Number>>::deserialize(d)?
        .map(|values| values.iter().map(count).collect())
        .transpose()
}

/// The largest float below 2⁶⁴: an integral float up to it is a `u64`.
const MAX_U64_FLOAT: f64 = 18_446_744_073_709_549_568.0;

/// [`integral_count`] for a `u64` (a seed).
fn integral_u64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Option::<serde_json::Number>::deserialize(d)?
        .map(|n| integral(&n, MAX_U64_FLOAT).ok_or_else(|| not_integral(&n)))
        .transpose()
}

/// `n` as a count: an integer, or an integral float up to `u32::MAX`.
fn count<E: serde::de::Error>(n: &serde_json::Number) -> Result<usize, E> {
    let u = integral(n, u32::MAX as f64).ok_or_else(|| not_integral(n))?;
    usize::try_from(u).map_err(E::custom)
}

/// `n` as a non-negative integer: an integer, or a float with no
/// fraction up to `max_float` (JSON Schema counts `5.0` as an integer).
fn integral(n: &serde_json::Number, max_float: f64) -> Option<u64> {
    n.as_u64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= max_float)
            .map(|f| f as u64)
    })
}

fn not_integral<E: serde::de::Error>(n: &serde_json::Number) -> E {
    E::custom(format!(
        "invalid value: {n}, expected a non-negative integer"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_written_as_integral_floats_are_integers() {
        let p = |s: &str| serde_json::from_str::<SimilarTextIn>(s).map(|r| r.limit);
        assert_eq!(p(r#"{"text":"a","limit":464.0}"#).unwrap(), Some(464));
        assert_eq!(p(r#"{"text":"a","limit":7}"#).unwrap(), Some(7));
        assert_eq!(p(r#"{"text":"a","limit":null}"#).unwrap(), None);
        assert_eq!(p(r#"{"text":"a"}"#).unwrap(), None);
        assert!(p(r#"{"text":"a","limit":1.5}"#).is_err());
        assert!(p(r#"{"text":"a","limit":-1}"#).is_err());
        assert!(p(r#"{"text":"a","limit":"3"}"#).is_err());
    }

    /// The analysis bodies as their schemas say: every optional value may
    /// be null (the default), and integers may be written as `5.0`.
    #[test]
    fn analysis_bodies_take_nulls_and_integral_floats() {
        let a: AccuracyIn = serde_json::from_str(
            r#"{"sample":3.0,"seed":9007199254740994.0,"k":[2.0,3],"num_perm":[16.0],"threshold":null,"texts":null}"#,
        )
        .unwrap();
        assert_eq!(
            (a.sample, a.seed, a.k, a.num_perm, a.threshold, a.texts),
            (
                Some(3),
                Some((1 << 53) + 2),
                Some(vec![2, 3]),
                Some(vec![16]),
                None,
                None
            )
        );
        let h: HistogramIn = serde_json::from_str(
            r#"{"texts":["a b","c d"],"sample":null,"seed":null,"k":null,"bins":10.0}"#,
        )
        .unwrap();
        assert_eq!(
            (h.sample, h.seed, h.k, h.bins, h.texts.map(|t| t.len())),
            (None, None, None, Some(10), Some(2))
        );
        for bad in [
            r#"{"sample":2.5}"#,
            r#"{"sample":-2}"#,
            r#"{"seed":18446744073709551616.0}"#,
            r#"{"seed":-1}"#,
            r#"{"k":[2,1.5]}"#,
            r#"{"k":[2,"3"]}"#,
            r#"{"bins":"10"}"#,
        ] {
            assert!(serde_json::from_str::<HistogramIn>(bad).is_err(), "{bad}");
        }
        assert!(serde_json::from_str::<AccuracyIn>(r#"{"num_perm":[16,0.5]}"#).is_err());
    }
}

/// One side of `POST /explain`: a stored document or a text.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExplainOperand {
    pub id: Option<String>,
    pub text: Option<String>,
}

/// `POST /explain`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExplainIn {
    pub a: ExplainOperand,
    pub b: ExplainOperand,
}

/// A piece of one side's text, shared (`match` = its passage number) or not.
#[derive(Debug, Serialize)]
pub struct SegmentOut {
    pub text: String,
    #[serde(rename = "match")]
    pub passage: Option<u32>,
    /// Boilerplate (its shingles common in the collection, or a
    /// template's): present, and true, only on such segments.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub boilerplate: bool,
}

/// One side of an explanation.
#[derive(Debug, Serialize)]
pub struct ExplainSideOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub shingles: usize,
    pub units: usize,
    pub alignment: &'static str,
    pub segments: Vec<SegmentOut>,
}

/// `POST /explain`.
#[derive(Debug, Serialize)]
pub struct ExplainOut {
    pub jaccard: f64,
    pub estimate: f64,
    pub intersection: usize,
    pub union: usize,
    pub containment_a_in_b: f64,
    pub containment_b_in_a: f64,
    pub passages: u32,
    pub a: ExplainSideOut,
    pub b: ExplainSideOut,
    /// The scores over content shingles (`content_a_in_b` is `query_in_stored`
    /// with `a` as the query), when the collection counts document frequency
    /// or has templates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<ContentScores>,
}

/// `POST /analysis/histogram`: the texts to analyse (`texts`, or a
/// `sample` of the collection's stored texts) and what to count.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistogramIn {
    #[serde(default)]
    pub texts: Option<Vec<String>>,
    #[serde(default, deserialize_with = "integral_count")]
    pub sample: Option<usize>,
    #[serde(default, deserialize_with = "integral_u64")]
    pub seed: Option<u64>,
    #[serde(default, deserialize_with = "integral_counts")]
    pub k: Option<Vec<usize>>,
    #[serde(default, deserialize_with = "integral_count")]
    pub bins: Option<usize>,
    /// `raw` (default) or `content`.
    #[serde(default)]
    pub score: Option<Score>,
}

/// `POST /analysis/accuracy`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccuracyIn {
    #[serde(default)]
    pub texts: Option<Vec<String>>,
    #[serde(default, deserialize_with = "integral_count")]
    pub sample: Option<usize>,
    #[serde(default, deserialize_with = "integral_u64")]
    pub seed: Option<u64>,
    #[serde(default, deserialize_with = "integral_counts")]
    pub k: Option<Vec<usize>>,
    #[serde(default, deserialize_with = "integral_counts")]
    pub num_perm: Option<Vec<usize>>,
    #[serde(default)]
    pub threshold: Option<f64>,
}

/// `POST /analysis/histogram`.
#[derive(Debug, Serialize)]
pub struct HistogramOut {
    /// Texts analysed (a sample may hold fewer than asked for).
    pub texts: usize,
    /// `content`: the Jaccard of the texts without their boilerplate,
    /// decided within the analysed texts by the collection's rule
    /// (`index.boilerplate`) and templates.
    pub score: Score,
    /// The collection's banding, which the S-curves and recalls are for.
    pub bands: usize,
    pub rows: usize,
    pub histograms: Vec<crate::analysis::Histogram>,
    /// The threshold the collection's review labels support (issue 46:
    /// `GET /review/precision`'s `suggested` on Jaccard, or content Jaccard
    /// for `score=content`); null with too few labels.
    pub measured: Option<crate::review::precision::Suggestion>,
}

/// `POST /analysis/accuracy`.
#[derive(Debug, Serialize)]
pub struct AccuracyOut {
    pub texts: usize,
    /// The threshold the misses are counted at.
    pub threshold: f64,
    pub accuracy: Vec<crate::analysis::AccuracyRow>,
}
