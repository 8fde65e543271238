//! `GET /export` and `POST /import` (and their `/collections/{name}/`
//! twins): a collection's documents as NDJSON, to move them between
//! collections, servers and backends (the memory backend to Redis, and
//! back) without their texts having been kept.
//!
//! The first line is a header: `{"neardup_export": 1, "collection", "recipe":
//! {"shingle", "normalize", "seed"}, "documents"}`. The recipe is what
//! decides a document's shingles: an import refuses (409) a collection whose
//! recipe differs, since its shingles would mean something else. Every other
//! setting may differ (`num_perm`, the threshold, retention): signatures and
//! band keys are recomputed from the shingles, so scores stay exact.
//!
//! Each further line is a live document: `{"id", "created_ms", "expires_ms"?,
//! "metadata"?, "shingles", "text"?}` where `shingles` is the sorted shingle
//! hashes as base64 (standard, padded) of their LEB128 deltas, and `text`
//! is there when the collection stores texts. An import keeps `created_ms`
//! and `expires_ms` (so retention counts from the original write), replaces
//! documents of the same id, keeps texts only if the target stores them, and
//! skips documents already expired under the target's retention.

use super::duplicates::{streamed, Chunk, NDJSON};
use super::error::ApiError;
use super::extract::{accepts, Coll};
use super::state::{backend, AppState};
use crate::collections::{Collection, CollectionError};
use crate::engine::{DocId, NewDoc, Record, Stamp, WriteMode, WriteOutcome};
use crate::text::{NormalizeOptions, ShingleOptions};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::Response;
use axum::Json;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::sync::Arc;
use tokio::sync::mpsc;

/// A value as JSON text (for a conflict's message).
mod erased {
    pub trait Ser {
        fn json(&self) -> String;
    }
    impl<T: serde::Serialize> Ser for T {
        fn json(&self) -> String {
            serde_json::to_string(self).unwrap_or_default()
        }
    }
}

/// The export format.
const FORMAT: u32 = 1;
/// Documents read (and sent) per step of an export.
const EXPORT_STEP: usize = 500;
/// Documents written per step of an import.
const IMPORT_STEP: usize = 500;

/// What decides a document's shingles.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Recipe {
    shingle: ShingleOptions,
    /// An export of a release before recipes had versions names none: its
    /// shingles are version 1's.
    #[serde(deserialize_with = "crate::collections::stored_normalize")]
    normalize: NormalizeOptions,
    /// `index.seed`: it also seeds the shingle hashes.
    seed: u64,
}

impl Recipe {
    fn of(coll: &Collection) -> Self {
        let s = coll.settings();
        Self {
            shingle: s.shingle,
            normalize: s.normalize,
            seed: s.index.seed,
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    neardup_export: u32,
    collection: String,
    recipe: Recipe,
    /// Live documents when the export started (writes during it may or
    /// may not be in it).
    documents: usize,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line<'a> {
    #[serde(borrow)]
    id: std::borrow::Cow<'a, str>,
    created_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    metadata: Option<&'a RawValue>,
    shingles: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
}

/// Sorted, distinct hashes as base64 of their LEB128 deltas.
fn encode_shingles(shingles: &[u32]) -> String {
    let mut bytes = Vec::with_capacity(shingles.len() * 3);
    let mut prev = 0u32;
    for (i, &s) in shingles.iter().enumerate() {
        let mut v = if i == 0 { s } else { s - prev };
        prev = s;
        while v >= 0x80 {
            bytes.push((v as u8) | 0x80);
            v >>= 7;
        }
        bytes.push(v as u8);
    }
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn decode_shingles(text: &str) -> Result<Vec<u32>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("shingles is not base64: {e}"))?;
    let mut out = Vec::with_capacity(bytes.len() / 2);
    let (mut v, mut shift, mut prev) = (0u64, 0u32, 0u64);
    for b in bytes {
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            let value = if out.is_empty() { v } else { prev + v };
            if (!out.is_empty() && v == 0) || value > u64::from(u32::MAX) {
                return Err("shingles are not distinct sorted 32-bit hashes".into());
            }
            out.push(value as u32);
            prev = value;
            (v, shift) = (0, 0);
        } else {
            shift += 7;
            if shift > 35 {
                return Err("shingles hold an over-long number".into());
            }
        }
    }
    if shift != 0 {
        return Err("shingles end in the middle of a number".into());
    }
    if out.is_empty() {
        return Err("shingles is empty".into());
    }
    Ok(out)
}

fn line_of(record: &Record, text: Option<String>) -> Vec<u8> {
    let stamp = record.stamp();
    let metadata = record
        .metadata()
        .and_then(|m| serde_json::from_str::<&RawValue>(m).ok());
    let line = Line {
        id: record.id().as_str().into(),
        created_ms: stamp.created_ms,
        expires_ms: stamp.expires_ms,
        metadata,
        shingles: encode_shingles(record.shingles()),
        text,
    };
    let mut out = serde_json::to_vec(&line).expect("a line serializes");
    out.push(b'\n');
    out
}

/// The bytes media type an export is also sent as, and an import taken as
/// (for clients that handle a body only as bytes).
const OCTETS: &str = "application/octet-stream";

/// `GET /export`: every live document of the collection, streamed.
pub async fn export(Coll(coll): Coll, headers: HeaderMap) -> Result<Response, ApiError> {
    let media = if !accepts(&headers, NDJSON) && accepts(&headers, OCTETS) {
        OCTETS
    } else {
        NDJSON
    };
    backend(&coll)?;
    if let Some(b) = coll.backend() {
        b.refresh_documents().await?;
    }
    let header = Header {
        neardup_export: FORMAT,
        collection: coll.name.to_string(),
        recipe: Recipe::of(&coll),
        documents: coll.documents(),
    };
    let (tx, rx) = mpsc::channel::<Chunk>(8);
    let mut first = serde_json::to_vec(&header).expect("a header serializes");
    first.push(b'\n');
    tokio::spawn(async move {
        if tx.send(Ok(Bytes::from(first))).await.is_err() {
            return;
        }
        if let Err(e) = export_documents(&coll, &tx).await {
            tracing::error!(collection = %coll.name, error = %e, "export failed");
            let _ = tx.send(Err(std::io::Error::other("export failed"))).await;
        }
    });
    Ok(streamed(rx, media))
}

async fn export_documents(
    coll: &Arc<Collection>,
    tx: &mpsc::Sender<Chunk>,
) -> Result<(), ApiError> {
    let mut pages = backend(coll)?.export(EXPORT_STEP).await?;
    while let Some(page) = pages.next(line_of).await? {
        if tx.send(Ok(Bytes::from(page))).await.is_err() {
            break;
        }
    }
    Ok(())
}

/// What an import did.
#[derive(Debug, Default, Serialize)]
pub struct ImportOut {
    /// Documents written (created + replaced).
    imported: usize,
    created: usize,
    replaced: usize,
    /// Documents already expired under this collection's retention.
    expired: usize,
}

/// `POST /import`: an export's lines written into this collection.
pub async fn import(
    State(app): State<AppState>,
    Coll(coll): Coll,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<ImportOut>, ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = ct.split(';').next().unwrap_or("").trim();
    if !(media.eq_ignore_ascii_case(NDJSON) || media.eq_ignore_ascii_case(OCTETS)) {
        return Err(ApiError::UnsupportedMediaType(format!(
            "an import is an export's NDJSON: send Content-Type: {NDJSON} (or {OCTETS})"
        )));
    }
    let text = std::str::from_utf8(&body)
        .map_err(|e| ApiError::InvalidBody(format!("the body is not UTF-8 text: {e}")))?;
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, first)) = lines.next() else {
        return Err(ApiError::InvalidBody(
            "the body is empty: an import starts with an export's header line".into(),
        ));
    };
    let header: Header = serde_json::from_str(first).map_err(|e| {
        ApiError::InvalidBody(format!(
            "line 1 is not an export header ({e}); an import is the output of GET /export"
        ))
    })?;
    if header.neardup_export != FORMAT {
        return Err(ApiError::InvalidBody(format!(
            "the export has format {}, this server reads {FORMAT}",
            header.neardup_export
        )));
    }
    let ours = Recipe::of(&coll);
    if header.recipe != ours {
        // Shingles mean something only under the recipe that made them.
        let json = |v: &dyn erased::Ser| v.json();
        let (key, existing, requested) = if header.recipe.shingle != ours.shingle {
            ("shingle", json(&ours.shingle), json(&header.recipe.shingle))
        } else if header.recipe.normalize != ours.normalize {
            (
                "normalize",
                json(&ours.normalize),
                json(&header.recipe.normalize),
            )
        } else {
            ("index.seed", json(&ours.seed), json(&header.recipe.seed))
        };
        return Err(CollectionError::Conflict {
            name: coll.name.to_string(),
            key: format!("{key} (the export's recipe; import into a collection created with it)"),
            existing,
            requested,
        }
        .into());
    }
    let stores_text = coll.stores_text();
    let now = coll.recipe().now_ms();
    let max_text = app.config.limits.max_text_bytes;
    let mut docs = Vec::new();
    let mut out = ImportOut::default();
    for (n, line) in lines {
        let bad = |why: String| ApiError::InvalidBody(format!("line {}: {why}", n + 1));
        let l: Line = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        let id = DocId::parse(&l.id).map_err(|e| bad(e.to_string()))?;
        let shingles = decode_shingles(&l.shingles).map_err(bad)?;
        let doc = coll
            .recipe()
            .prepared_from_shingles(shingles)
            .ok_or_else(|| bad("shingles are not a set".into()))?;
        if let Some(t) = &l.text {
            if t.len() > max_text {
                return Err(ApiError::PayloadTooLarge(format!(
                    "line {}: the text is {} bytes; the limit is {max_text} bytes (limits.max_text_bytes)",
                    n + 1,
                    t.len()
                )));
            }
        }
        let metadata = match l.metadata {
            Some(m) if m.get().trim_start().starts_with('{') => Some(m.get().into()),
            Some(_) => return Err(bad("metadata must be an object".into())),
            None => None,
        };
        let stamp = Stamp {
            created_ms: l.created_ms,
            expires_ms: l.expires_ms,
        };
        let probe = coll.recipe().record_of(id.clone(), &doc, None, stamp);
        if !coll.recipe().is_live(&probe, now) {
            out.expired += 1;
            continue;
        }
        docs.push(NewDoc {
            id,
            doc,
            metadata,
            expires_ms: l.expires_ms,
            text: if stores_text {
                l.text.map(String::into_boxed_str)
            } else {
                None
            },
            created_ms: Some(l.created_ms),
        });
    }
    let backend = backend(&coll)?;
    while !docs.is_empty() {
        let rest = docs.split_off(docs.len().min(IMPORT_STEP));
        let part = std::mem::replace(&mut docs, rest);
        for result in backend.insert_many(part, WriteMode::Upsert).await? {
            match result.map_err(ApiError::from)? {
                WriteOutcome::Created => out.created += 1,
                WriteOutcome::Replaced => out.replaced += 1,
            }
        }
    }
    out.imported = out.created + out.replaced;
    tracing::info!(collection = %coll.name, from = %header.collection, imported = out.imported, created = out.created, replaced = out.replaced, expired = out.expired, "documents imported");
    Ok(Json(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shingles_round_trip_through_base64_deltas() {
        for set in [
            vec![0u32],
            vec![1, 2, 3],
            vec![7, 300, 70_000, u32::MAX - 1, u32::MAX],
        ] {
            assert_eq!(decode_shingles(&encode_shingles(&set)).unwrap(), set);
        }
        assert!(decode_shingles("").is_err());
        assert!(decode_shingles("!!").is_err());
        // A repeated hash (a zero delta) is refused.
        assert!(
            decode_shingles(&base64::engine::general_purpose::STANDARD.encode([5u8, 0])).is_err()
        );
        // A number cut in the middle.
        assert!(
            decode_shingles(&base64::engine::general_purpose::STANDARD.encode([0x85u8])).is_err()
        );
    }
}
