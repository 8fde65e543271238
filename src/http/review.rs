//! The review desk's decisions (issue 46): `PUT /review/decisions` (a
//! moderator's verdict on a pair: 201 new, 200 edited), `GET
//! /review/decisions` (pages of JSON, or every decision as NDJSON with
//! `Accept: application/x-ndjson`: the export), `GET` and `DELETE
//! /review/decision?a=&b=`. Storage is the backend's
//! ([`Backend::decisions`](crate::backend::Backend::decisions) and its
//! neighbours); the types are `crate::review`'s. docs/review.md describes
//! the semantics.
//!
//! The pair's scores are the server's: exact Jaccard and the larger
//! containment of the two stored documents' shingle sets (what `/explain`
//! reports for them), and content Jaccard when the collection tells
//! boilerplate apart (document frequency counted, or templates). Only when
//! a document is not stored (a write `if_unique` refused) does a decision
//! keep the scores its body gives.

use super::duplicates::NDJSON;
use super::error::ApiError;
use super::extract::{accepts, parse_json, ApiQuery, Coll, JsonBody};
use super::state::{backend, AppState};
use crate::backend::Backend;
use crate::collections::Collection;
use crate::engine::DocId;
use crate::review::{Decision, DecisionScores, PairKey, Verdict, MAX_NOTE_BYTES};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// Decisions in a page by default, and at most.
const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1000;
/// Longest cursor accepted: two ids of `MAX_ID_BYTES` as JSON (every
/// character escaped at worst), in base64.
const MAX_CURSOR: usize = 16 * 1024;

/// `PUT /review/decisions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionIn {
    a: String,
    b: String,
    verdict: String,
    #[serde(default)]
    note: Option<String>,
    #[serde(default)]
    scores: Option<ScoresIn>,
}

/// Scores a client gives for a pair the server cannot score itself.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoresIn {
    jaccard: f64,
    containment: f64,
    /// A number, or left out when unknown (null is refused, naming the
    /// field, as the schema says).
    #[serde(default, deserialize_with = "super::collections::not_null")]
    content_jaccard: Option<serde_json::Value>,
}

/// `GET /review/decisions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    verdict: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

/// `GET|DELETE /review/decision`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairParams {
    a: String,
    b: String,
}

/// A page of decisions.
#[derive(Debug, Serialize)]
pub struct DecisionsPage {
    pub decisions: Vec<Decision>,
    /// Pass as `cursor` for the next page; `null` after the last.
    pub next_cursor: Option<String>,
    /// Decisions matching `verdict` (every one without it).
    pub total: usize,
}

fn check_id(field: &str, id: &str) -> Result<(), String> {
    DocId::parse(id)
        .map(drop)
        .map_err(|e| format!("{field}: {e}"))
}

fn check_score(field: &str, x: f64) -> Result<f64, ApiError> {
    if x.is_finite() && (0.0..=1.0).contains(&x) {
        Ok(x)
    } else {
        Err(ApiError::InvalidBody(format!(
            "scores.{field} must be between 0 and 1, got {x}"
        )))
    }
}

/// The pair of the query's `a` and `b` (400 `invalid-parameter`).
fn pair_of(p: &PairParams) -> Result<PairKey, ApiError> {
    check_id("a", &p.a).map_err(ApiError::InvalidParameter)?;
    check_id("b", &p.b).map_err(ApiError::InvalidParameter)?;
    PairKey::new(&p.a, &p.b).map_err(|e| ApiError::InvalidParameter(format!("a, b: {e}")))
}

/// The cursor after `key`: its `[a, b]` JSON in base64url.
fn cursor_of(key: &PairKey) -> String {
    let json = serde_json::to_vec(&[&key.a, &key.b]).expect("a pair serializes");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

fn parse_cursor(c: &str) -> Result<PairKey, ApiError> {
    let bad = || {
        ApiError::InvalidParameter(format!(
            "cursor {:?} is not a cursor this route gave (pass next_cursor as it came)",
            c.chars().take(64).collect::<String>()
        ))
    };
    if c.is_empty() || c.len() > MAX_CURSOR {
        return Err(bad());
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(c)
        .map_err(|_| bad())?;
    let [a, b]: [String; 2] = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    Ok(PairKey { a, b })
}

/// Now, as a decision's time: RFC 3339 UTC with milliseconds.
fn decided_at(ms: u64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The exact scores of the stored documents `key.a` and `key.b`, or
/// `None` when one is not stored.
async fn scores_of(
    coll: &Collection,
    b: &Backend,
    key: &PairKey,
) -> Result<Option<DecisionScores>, ApiError> {
    let (Some(ra), Some(rb)) = (b.get(&key.a).await?, b.get(&key.b).await?) else {
        return Ok(None);
    };
    let (sa, sb) = (ra.shingles(), rb.shingles());
    let o = crate::jaccard::overlap(sa, sb);
    let share = |n: usize| {
        if n == 0 {
            0.0
        } else {
            o.intersection as f64 / n as f64
        }
    };
    let containment = share(sa.len()).max(share(sb.len()));
    // Content Jaccard as /explain computes it: when the collection counts
    // document frequency or has templates.
    let recipe = coll.recipe();
    let content_jaccard = if b.boilerplate_on() || !recipe.template_shingles().is_empty() {
        let mut all: Vec<u32> = sa.to_vec();
        all.extend_from_slice(sb);
        all.sort_unstable();
        all.dedup();
        let (df, docs) = b.doc_frequencies(&all).await?;
        let df_of = |x: &u32| all.binary_search(x).map_or(0, |i| df[i]);
        let classifier = recipe.classifier_with(docs);
        let dfa: Vec<u32> = sa.iter().map(df_of).collect();
        let dfb: Vec<u32> = sb.iter().map(df_of).collect();
        Some(classifier.scores(sa, &dfa, sb, &dfb).jaccard)
    } else {
        None
    };
    Ok(Some(DecisionScores {
        jaccard: o.jaccard(),
        containment,
        content_jaccard,
    }))
}

/// `PUT /review/decisions`: 201 with the new decision, 200 with the
/// edited one.
pub async fn put(
    State(app): State<AppState>,
    Coll(coll): Coll,
    key_name: Option<Extension<super::auth::KeyName>>,
    body: JsonBody,
) -> Result<Response, ApiError> {
    let req: DecisionIn = parse_json(&body.0)?;
    check_id("a", &req.a).map_err(ApiError::InvalidBody)?;
    check_id("b", &req.b).map_err(ApiError::InvalidBody)?;
    let key =
        PairKey::new(&req.a, &req.b).map_err(|e| ApiError::InvalidBody(format!("a, b: {e}")))?;
    let verdict = Verdict::parse(&req.verdict).ok_or_else(|| {
        ApiError::InvalidBody(format!(
            "verdict must be one of \"duplicate\", \"not_duplicate\", \"related\", got {:?}",
            req.verdict.chars().take(64).collect::<String>()
        ))
    })?;
    if let Some(n) = &req.note {
        if n.len() > MAX_NOTE_BYTES {
            return Err(ApiError::InvalidBody(format!(
                "note is {} bytes; the limit is {MAX_NOTE_BYTES}",
                n.len()
            )));
        }
    }
    let given = match req.scores {
        None => None,
        Some(s) => Some(DecisionScores {
            jaccard: check_score("jaccard", s.jaccard)?,
            containment: check_score("containment", s.containment)?,
            content_jaccard: match s.content_jaccard {
                None => None,
                Some(v) => Some(check_score(
                    "content_jaccard",
                    v.as_f64().ok_or_else(|| {
                        ApiError::InvalidBody(format!(
                            "scores.content_jaccard must be a number between 0 and 1 (or left out), got {v}"
                        ))
                    })?,
                )?),
            },
        }),
    };
    let b = backend(&coll)?;
    let scores = match scores_of(&coll, b, &key).await? {
        Some(exact) => Some(exact),
        None => given,
    };
    let mut d = Decision {
        a: key.a,
        b: key.b,
        verdict,
        note: req.note,
        decided_by: key_name.map(|Extension(n)| n.0.to_string()),
        decided_at: decided_at(wall_ms()),
        revision: 0,
        scores,
    };
    let previous = b.put_decision(coll.dir(), d.clone()).await?;
    d.revision = Decision::revised(previous.as_ref());
    app.metrics
        .observe_review_decision(coll.name.as_str(), verdict);
    let status = if previous.is_some() {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(d)).into_response())
}

/// `GET /review/decisions`: a page of JSON, or every matching decision as
/// NDJSON (`Accept: application/x-ndjson`; `limit` and `cursor` are then
/// checked but the export is whole).
pub async fn list(
    Coll(coll): Coll,
    headers: HeaderMap,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Response, ApiError> {
    let verdict = match p.verdict.as_deref() {
        None => None,
        Some(v) => Some(Verdict::parse(v).ok_or_else(|| {
            ApiError::InvalidParameter(format!(
                "verdict must be one of \"duplicate\", \"not_duplicate\", \"related\", got {:?}",
                v.chars().take(64).collect::<String>()
            ))
        })?),
    };
    let limit = match p.limit {
        None => DEFAULT_LIMIT,
        Some(n) if (1..=MAX_LIMIT).contains(&n) => n,
        Some(n) => {
            return Err(ApiError::InvalidParameter(format!(
                "limit must be between 1 and {MAX_LIMIT}, got {n}"
            )))
        }
    };
    let after = p.cursor.as_deref().map(parse_cursor).transpose()?;
    let set = backend(&coll)?.decisions(coll.dir()).await?;
    let matches = |d: &&Decision| verdict.is_none_or(|v| d.verdict == v);
    if accepts(&headers, NDJSON) {
        let mut body = Vec::new();
        for d in set.iter().filter(matches) {
            serde_json::to_writer(&mut body, d).expect("a decision serializes");
            body.push(b'\n');
        }
        let mut r = (StatusCode::OK, body).into_response();
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(NDJSON));
        return Ok(r);
    }
    let total = set.iter().filter(matches).count();
    let mut page: Vec<Decision> = set
        .after(after.as_ref())
        .filter(matches)
        .take(limit + 1)
        .cloned()
        .collect();
    let next_cursor = if page.len() > limit {
        page.truncate(limit);
        page.last().map(|d| cursor_of(&d.key()))
    } else {
        None
    };
    Ok(Json(DecisionsPage {
        decisions: page,
        next_cursor,
        total,
    })
    .into_response())
}

fn not_found(key: &PairKey) -> ApiError {
    let short = |s: &str| s.chars().take(100).collect::<String>();
    ApiError::DecisionNotFound(format!(
        "no review decision on the pair {:?}, {:?} in this collection",
        short(&key.a),
        short(&key.b)
    ))
}

/// `GET /review/decision?a=&b=`: the pair's decision (either order).
pub async fn get(
    Coll(coll): Coll,
    ApiQuery(p): ApiQuery<PairParams>,
) -> Result<Json<Decision>, ApiError> {
    let key = pair_of(&p)?;
    let set = backend(&coll)?.decisions(coll.dir()).await?;
    set.get(&key.a, &key.b)
        .cloned()
        .map(Json)
        .ok_or_else(|| not_found(&key))
}

/// `DELETE /review/decision?a=&b=`: 204, or 404 when there was none.
pub async fn delete(
    Coll(coll): Coll,
    ApiQuery(p): ApiQuery<PairParams>,
) -> Result<StatusCode, ApiError> {
    let key = pair_of(&p)?;
    match backend(&coll)?.delete_decision(coll.dir(), &key).await? {
        Some(_) => Ok(StatusCode::NO_CONTENT),
        None => Err(not_found(&key)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_strangers_are_refused() {
        let k = PairKey::new("annonce-ж", "annonce-é \"1\"").unwrap();
        assert_eq!(parse_cursor(&cursor_of(&k)).unwrap(), k);
        for bad in [
            "",
            "%%%",
            "WyJhIl0",
            "eyJhIjoxfQ",
            &"A".repeat(MAX_CURSOR + 1),
        ] {
            assert!(
                matches!(parse_cursor(bad), Err(ApiError::InvalidParameter(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn decision_times_have_milliseconds() {
        assert_eq!(decided_at(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(decided_at(1_795_923_495_007), "2026-11-29T03:38:15.007Z");
    }
}
