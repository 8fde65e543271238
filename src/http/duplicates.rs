//! `/duplicates`: the groups of near-duplicates in the whole index, and
//! the raw verified pairs, streamed.
//!
//! Scans run on a rayon pool of their own (one thread per core, plus the
//! one that hands results to the response), one scan at a time, so a scan
//! neither blocks the async workers nor starves batch ingest of its pool.
//! Responses stream through a channel of a few 64 KiB chunks: memory stays
//! bounded however large the answer, and a client that hangs up stops the
//! scan.
//!
//! Pages of groups (`application/json`) come from one computation cached
//! per (threshold, min_size): a first page always reflects the index as it
//! is, and following pages reuse that computation for
//! [`PAGE_CACHE_SECS`] so a walk through the pages sees one consistent
//! answer. The cursor is the last group's first id (hex), so a page whose
//! computation was evicted is recomputed and still continues after it.

use super::dto::{GroupOut, PairOut};
use super::error::ApiError;
use super::extract::ApiQuery;
use crate::app::AppState;
use crate::engine::{Groups, Threshold};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Mutex, Semaphore};

pub const NDJSON: &str = "application/x-ndjson";
/// How long following pages reuse a computation of the groups.
pub const PAGE_CACHE_SECS: u64 = 60;
/// Bytes buffered before a chunk is handed to the response.
const CHUNK_BYTES: usize = 64 * 1024;
/// Chunks in flight between a scan and a (slow) client.
const CHANNEL_CHUNKS: usize = 4;

/// Scan machinery shared by every request.
pub struct DedupState {
    pool: rayon::ThreadPool,
    /// One scan at a time: a second waits rather than halving both.
    scans: Semaphore,
    cache: Mutex<Option<Cached>>,
}

struct Cached {
    threshold: f64,
    min_size: usize,
    generation: u64,
    at: Instant,
    groups: Arc<Groups>,
}

impl DedupState {
    pub fn new() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(cores + 1)
            .thread_name(|i| format!("neardup-scan-{i}"))
            .build()
            .expect("a thread pool for scans");
        Self {
            pool,
            scans: Semaphore::new(1),
            cache: Mutex::new(None),
        }
    }
}

impl Default for DedupState {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupsParams {
    threshold: Option<f64>,
    min_size: Option<usize>,
    limit: Option<usize>,
    cursor: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairsParams {
    threshold: Option<f64>,
}

/// `GET /duplicates` as `application/json`: one page.
#[derive(Debug, Serialize)]
pub struct GroupsPage<'a> {
    pub threshold: f64,
    pub min_size: usize,
    /// Groups in the whole answer (all pages).
    pub total_groups: usize,
    /// Documents in those groups.
    pub total_members: usize,
    pub groups: Vec<GroupOut<'a>>,
    /// Pass as `cursor` for the next page; null on the last one.
    pub next_cursor: Option<String>,
}

fn wants_ndjson(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.split(';').next().unwrap_or("").trim() == NDJSON)
}

fn encode_cursor(id: &str) -> String {
    id.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_cursor(cursor: &str) -> Result<String, ApiError> {
    let bad =
        || ApiError::InvalidParameter(format!("cursor {cursor:?} is not one this server issued"));
    if cursor.is_empty() || !cursor.len().is_multiple_of(2) || !cursor.is_ascii() {
        return Err(bad());
    }
    let bytes = (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&cursor[i..i + 2], 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| bad())?;
    String::from_utf8(bytes).map_err(|_| bad())
}

fn min_size(raw: Option<usize>) -> Result<usize, ApiError> {
    match raw.unwrap_or(2) {
        n @ 2.. => Ok(n),
        n => Err(ApiError::InvalidParameter(format!(
            "min_size must be at least 2 (a group is two or more documents), got {n}"
        ))),
    }
}

/// `GET /duplicates`.
pub async fn groups(
    State(app): State<AppState>,
    headers: HeaderMap,
    ApiQuery(params): ApiQuery<GroupsParams>,
) -> Result<Response, ApiError> {
    let threshold = app.engine.threshold(params.threshold)?;
    let min_size = min_size(params.min_size)?;
    let after = params.cursor.as_deref().map(decode_cursor).transpose()?;
    if wants_ndjson(&headers) {
        if params.limit.is_some() {
            return Err(ApiError::InvalidParameter(
                "limit pages application/json answers; an application/x-ndjson stream has every group"
                    .into(),
            ));
        }
        return Ok(stream_groups(app, threshold, min_size, after));
    }
    let limit = app.limit(params.limit)?;
    let groups = computed_groups(&app, threshold, min_size, after.is_some()).await?;
    let start = after.as_deref().map_or(0, |id| groups.position_after(id));
    let page = &groups.groups[start.min(groups.groups.len())..];
    let page = &page[..limit.min(page.len())];
    let next_cursor = (start + page.len() < groups.groups.len())
        .then(|| page.last().map(|g| encode_cursor(g.first_id())))
        .flatten();
    Ok(Json(GroupsPage {
        threshold: threshold.value(),
        min_size,
        total_groups: groups.groups.len(),
        total_members: groups.members,
        groups: page.iter().map(GroupOut::from).collect(),
        next_cursor,
    })
    .into_response())
}

/// The groups at (threshold, min_size): cached, or computed now.
async fn computed_groups(
    app: &AppState,
    threshold: Threshold,
    min_size: usize,
    paging: bool,
) -> Result<Arc<Groups>, ApiError> {
    let mut cache = app.dedup.cache.lock().await;
    if let Some(c) = cache.as_ref() {
        let same_query = c.threshold == threshold.value() && c.min_size == min_size;
        let fresh = c.generation == app.engine.generation()
            || (paging && c.at.elapsed() < Duration::from_secs(PAGE_CACHE_SECS));
        if same_query && fresh {
            return Ok(Arc::clone(&c.groups));
        }
    }
    let _permit = app
        .dedup
        .scans
        .acquire()
        .await
        .map_err(|_| ApiError::NotReady)?;
    let generation = app.engine.generation();
    let at = Instant::now();
    let worker = app.clone();
    let groups = tokio::task::spawn_blocking(move || {
        worker
            .dedup
            .pool
            .install(|| worker.engine.duplicate_groups(threshold, min_size, None))
    })
    .await
    .map_err(|e| ApiError::Internal(format!("duplicate scan failed: {e}")))?;
    let groups = Arc::new(groups);
    app.metrics
        .observe_scan("groups", at.elapsed().as_secs_f64());
    tracing::info!(
        threshold = threshold.value(),
        min_size,
        documents = groups.stats.documents,
        candidates = groups.stats.candidates,
        pairs = groups.stats.pairs,
        groups = groups.groups.len(),
        seconds = at.elapsed().as_secs_f64(),
        "duplicate groups computed"
    );
    *cache = Some(Cached {
        threshold: threshold.value(),
        min_size,
        generation,
        at,
        groups: Arc::clone(&groups),
    });
    Ok(groups)
}

type Chunk = Result<Bytes, std::io::Error>;

/// A streaming NDJSON response fed by `rx`.
fn ndjson_response(rx: mpsc::Receiver<Chunk>) -> Response {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    });
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(NDJSON))],
        Body::from_stream(stream),
    )
        .into_response()
}

/// Appends NDJSON lines and hands over full chunks; false once the client is gone.
struct LineWriter {
    tx: mpsc::Sender<Chunk>,
    buf: Vec<u8>,
}

impl LineWriter {
    fn new(tx: mpsc::Sender<Chunk>) -> Self {
        Self {
            tx,
            buf: Vec::with_capacity(CHUNK_BYTES + 4096),
        }
    }

    fn line(&mut self, value: &impl Serialize) -> bool {
        serde_json::to_writer(&mut self.buf, value).expect("serializing to memory");
        self.buf.push(b'\n');
        self.buf.len() < CHUNK_BYTES || self.flush()
    }

    fn flush(&mut self) -> bool {
        if self.buf.is_empty() {
            return true;
        }
        let chunk = Bytes::from(std::mem::replace(
            &mut self.buf,
            Vec::with_capacity(CHUNK_BYTES + 4096),
        ));
        self.tx.blocking_send(Ok(chunk)).is_ok()
    }

    fn fail(self, message: String) {
        let _ = self.tx.blocking_send(Err(std::io::Error::other(message)));
    }
}

fn stream_groups(
    app: AppState,
    threshold: Threshold,
    min_size: usize,
    after: Option<String>,
) -> Response {
    let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
    tokio::spawn(async move {
        let groups = match computed_groups(&app, threshold, min_size, after.is_some()).await {
            Ok(g) => g,
            Err(e) => {
                // Headers are gone: abort the body so the client sees an error.
                let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
                return;
            }
        };
        let _ = tokio::task::spawn_blocking(move || {
            let start = after.as_deref().map_or(0, |id| groups.position_after(id));
            let mut out = LineWriter::new(tx);
            for group in &groups.groups[start..] {
                if !out.line(&GroupOut::from(group)) {
                    return;
                }
            }
            out.flush();
        })
        .await;
    });
    ndjson_response(rx)
}

/// `GET /duplicates/pairs`: every verified pair, as NDJSON, as found.
pub async fn pairs(
    State(app): State<AppState>,
    ApiQuery(params): ApiQuery<PairsParams>,
) -> Result<Response, ApiError> {
    let threshold = app.engine.threshold(params.threshold)?;
    let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
    tokio::spawn(async move {
        let Ok(_permit) = app.dedup.scans.acquire().await else {
            return;
        };
        let worker = app.clone();
        let started = Instant::now();
        let scan = tokio::task::spawn_blocking(move || {
            let mut out = LineWriter::new(tx);
            let stats = worker.dedup.pool.install(|| {
                worker.engine.scan_pairs(threshold, None, &mut |edges| {
                    for edge in &edges {
                        if !out.line(&PairOut::from(edge)) {
                            return ControlFlow::Break(());
                        }
                    }
                    ControlFlow::Continue(())
                })
            });
            if stats.complete && !out.flush() {
                return stats;
            }
            if !stats.complete {
                out.fail("client went away".into());
            }
            stats
        })
        .await;
        app.metrics
            .observe_scan("pairs", started.elapsed().as_secs_f64());
        match scan {
            Ok(stats) => tracing::info!(
                threshold = threshold.value(),
                documents = stats.documents,
                candidates = stats.candidates,
                pairs = stats.pairs,
                complete = stats.complete,
                seconds = started.elapsed().as_secs_f64(),
                "duplicate pairs streamed"
            ),
            Err(e) => tracing::error!(error = %e, "duplicate pair scan failed"),
        }
    });
    Ok(ndjson_response(rx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_any_id() {
        for id in ["a", "doc-17", "ünïcødé/ä b", "x\"y"] {
            assert_eq!(decode_cursor(&encode_cursor(id)).unwrap(), id);
        }
        for bad in ["", "0", "zz", "ff", "é1"] {
            assert!(decode_cursor(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ndjson_is_chosen_only_when_accepted() {
        let mut h = HeaderMap::new();
        assert!(!wants_ndjson(&h));
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        assert!(!wants_ndjson(&h));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/plain, application/x-ndjson;q=0.9"),
        );
        assert!(wants_ndjson(&h));
    }
}
