//! `/duplicates`: the groups of near-duplicates in the whole index, and
//! the raw verified pairs, streamed. The scans themselves, their pool and
//! the page cache belong to the [`ScanScheduler`](crate::service::scans::ScanScheduler).
//!
//! Pages of groups (`application/json`) come from the scheduler's cache or
//! its running scan. The cursor is the hex of the last group's first id;
//! any hex names a position, so a page whose computation was evicted is
//! recomputed and still continues after it. NDJSON answers (and the JSON
//! stream of pairs) go through a channel of a few 64 KiB chunks: memory
//! stays bounded however large the answer, and a client that hangs up
//! stops the scan.

use super::error::ApiError;
use super::extract::{accepts, ApiQuery, Coll, Limit};
use super::filters;
use super::state::{backend, AppState};
use crate::backend::{Backend, BackendError};
use crate::collections::Collection;
use crate::engine::originals::Keep;
use crate::engine::{
    By, EngineError, ExcludedPairs, FilterSpec, Group, Groups, Measure, ScanStats, Score, Threshold,
};
use crate::service::scans::{GroupsKey, ScanError};
use crate::wire::{drops, DropOut, GroupOut, PairOut};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

pub const NDJSON: &str = "application/x-ndjson";
/// Bytes buffered before a chunk is handed to the response.
const CHUNK_BYTES: usize = 64 * 1024;
/// Chunks in flight between a scan and a (slow) client.
const CHANNEL_CHUNKS: usize = 4;
/// A page request stops waiting this long before `server.request_timeout_secs`,
/// so it answers 503 `scan-in-progress` itself rather than the timeout layer.
const ANSWER_MARGIN: Duration = Duration::from_millis(250);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupsParams {
    threshold: Option<f64>,
    measure: Option<Measure>,
    score: Option<Score>,
    min_size: Option<usize>,
    limit: Option<usize>,
    cursor: Option<String>,
    /// A JSON object: conditions both documents of a pair must satisfy.
    filter: Option<String>,
    /// Comma-separated fields the two documents of a pair must not share.
    exclude_same: Option<String>,
}

/// `GET /duplicates/drop-list`: the groups' parameters and the keep policy.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DropListParams {
    threshold: Option<f64>,
    measure: Option<Measure>,
    score: Option<Score>,
    min_size: Option<usize>,
    limit: Option<usize>,
    cursor: Option<String>,
    keep: Option<String>,
    /// As on `GET /duplicates`.
    filter: Option<String>,
    /// As on `GET /duplicates`.
    exclude_same: Option<String>,
}

impl DropListParams {
    /// The scan behind the drop list: the groups' parameters.
    fn groups(&self) -> GroupsParams {
        GroupsParams {
            threshold: self.threshold,
            measure: self.measure,
            score: self.score,
            min_size: self.min_size,
            limit: self.limit,
            cursor: self.cursor.clone(),
            filter: self.filter.clone(),
            exclude_same: self.exclude_same.clone(),
        }
    }
}

/// What `GET /duplicates` and its drop list ask of the groups' scan.
struct GroupsAsk {
    threshold: Threshold,
    measure: Measure,
    score: Score,
    key: GroupsKey,
    /// The `cursor` decoded: the page starts after this group.
    after: Option<Vec<u8>>,
}

impl GroupsParams {
    /// The scan these parameters ask for, checked (`kind` labels the
    /// filtered-query metric), and the index it needs present; with
    /// `review.exclude_not_duplicates`, the pairs judged not duplicates
    /// it leaves out.
    async fn ask(
        &self,
        app: &AppState,
        coll: &Collection,
        kind: &'static str,
    ) -> Result<GroupsAsk, ApiError> {
        let measure = pair_measure(self.measure);
        let score = self.score.unwrap_or_default();
        let threshold = coll
            .recipe()
            .threshold_for(measure, score, self.threshold)?;
        let key = GroupsKey {
            collection: coll.id,
            threshold: threshold.value(),
            measure,
            score,
            min_size: min_size(self.min_size)?,
            filter: filters::from_query(self.filter.as_deref(), self.exclude_same.as_deref())?,
            excluded: None,
        };
        if key.filter.is_some() {
            app.metrics.observe_filtered(coll.name.as_str(), kind);
        }
        let after = self.cursor.as_deref().map(decode_cursor).transpose()?;
        needs_index(backend(coll)?, By::new(measure, score))?;
        let key = GroupsKey {
            excluded: coll.excluded_pairs().await?,
            ..key
        };
        Ok(GroupsAsk {
            threshold,
            measure,
            score,
            key,
            after,
        })
    }

    /// A stream has every group: `limit` pages JSON answers only.
    fn check_stream(&self, what: &str) -> Result<(), ApiError> {
        match self.limit {
            Some(_) => Err(ApiError::InvalidParameter(format!(
                "limit pages application/json answers; an application/x-ndjson stream has every {what}"
            ))),
            None => Ok(()),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairsParams {
    threshold: Option<f64>,
    measure: Option<Measure>,
    score: Option<Score>,
    /// As [`GroupsParams`]'s.
    filter: Option<String>,
    exclude_same: Option<String>,
}

/// `GET /duplicates` as `application/json`: one page.
#[derive(Debug, Serialize)]
pub struct GroupsPage<'a> {
    pub threshold: f64,
    /// `jaccard`, or `containment` (either text inside the other).
    pub measure: Measure,
    /// Over which shingles.
    pub score: Score,
    pub min_size: usize,
    /// Groups in the whole answer (all pages).
    pub total_groups: usize,
    /// Documents in those groups.
    pub total_members: usize,
    pub groups: Vec<GroupOut<'a>>,
    /// Pass as `cursor` for the next page; null on the last one.
    pub next_cursor: Option<String>,
}

/// `GET /duplicates/drop-list` as `application/json`: the drops of one
/// page of groups.
#[derive(Debug, Serialize)]
pub struct DropListPage<'a> {
    pub threshold: f64,
    pub measure: Measure,
    pub score: Score,
    pub min_size: usize,
    /// The keep policy: `oldest`, `newest`, `longest` or `max:<field>`.
    pub keep: String,
    /// Groups in the whole answer (all pages).
    pub total_groups: usize,
    /// Documents to drop in the whole answer: every group's members but one.
    pub total_drops: usize,
    /// The drops of this page's groups, group by group, each in id order.
    pub drops: Vec<DropOut<'a>>,
    /// Pass as `cursor` for the next page; null on the last one.
    pub next_cursor: Option<String>,
}

fn wants_ndjson(headers: &HeaderMap) -> bool {
    accepts(headers, NDJSON)
}

fn encode_cursor(id: &str) -> String {
    id.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The byte string a cursor names: any non-empty even-length hex string.
fn decode_cursor(cursor: &str) -> Result<Vec<u8>, ApiError> {
    let bad = || {
        ApiError::InvalidParameter(format!(
            "cursor {cursor:?} is not a hexadecimal string (pass a next_cursor this server issued)"
        ))
    };
    if cursor.is_empty() || !cursor.len().is_multiple_of(2) || !cursor.is_ascii() {
        return Err(bad());
    }
    (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&cursor[i..i + 2], 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| bad())
}

/// 409 before a scan by containment starts on a collection without the
/// passage index (a streamed answer could only fail after its status).
fn needs_index(backend: &Backend, by: By) -> Result<(), ApiError> {
    if by.via_passages() && !backend.passage_index() {
        return Err(EngineError::PassageIndexOff(by.measure.as_str()).into());
    }
    if by.score == Score::Content && !backend.boilerplate_on() {
        return Err(EngineError::BoilerplateOff.into());
    }
    Ok(())
}

/// A pair is unordered: every containment measure asks for either text
/// inside the other.
fn pair_measure(m: Option<Measure>) -> Measure {
    match m.unwrap_or_default() {
        Measure::Jaccard => Measure::Jaccard,
        _ => Measure::Containment,
    }
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
    Coll(coll): Coll,
    headers: HeaderMap,
    ApiQuery(params): ApiQuery<GroupsParams>,
) -> Result<Response, ApiError> {
    let GroupsAsk {
        threshold,
        measure,
        score,
        key,
        after,
    } = params.ask(&app, &coll, "groups").await?;
    let time_field = coll.time_field();
    if wants_ndjson(&headers) {
        params.check_stream("group")?;
        return Ok(stream_groups(
            app,
            coll,
            threshold,
            key,
            after,
            "groups",
            move |out, _, group| out.value(&GroupOut::new(group, time_field.as_deref()), b"\n"),
        ));
    }
    let limit = Limit::parse(params.limit, &app.config.query)?.get();
    let min_size = key.min_size;
    let timeout = Duration::from_secs(app.config.server.request_timeout_secs);
    let wait = Some(timeout.saturating_sub(ANSWER_MARGIN));
    let groups = computed_groups(&app, &coll, threshold, key, after.is_some(), wait).await?;
    observe_excluded(&app, &coll, "groups", after.is_none(), &groups);
    let start = after.as_deref().map_or(0, |k| groups.position_after(k));
    let page = &groups.groups[start.min(groups.groups.len())..];
    let page = &page[..limit.min(page.len())];
    let next_cursor = (start + page.len() < groups.groups.len())
        .then(|| page.last().map(|g| encode_cursor(g.first_id())))
        .flatten();
    Ok(Json(GroupsPage {
        threshold: threshold.value(),
        measure,
        score,
        min_size,
        total_groups: groups.groups.len(),
        total_members: groups.members,
        groups: page
            .iter()
            .map(|g| GroupOut::new(g, time_field.as_deref()))
            .collect(),
        next_cursor,
    })
    .into_response())
}

/// The pairs judged not duplicates an answer of `route` left out, counted
/// once per answer: on its first page (`first`) or its stream, not again
/// on the pages after it.
fn observe_excluded(
    app: &AppState,
    coll: &Collection,
    route: &'static str,
    first: bool,
    groups: &Groups,
) {
    if first {
        app.metrics
            .observe_review_excluded(coll.name.as_str(), route, groups.stats.excluded);
    }
}

/// The groups at `key` from the scan scheduler; with `wait`, a scan that
/// outlasts it is 503 `scan-in-progress` (it goes on).
async fn computed_groups(
    app: &AppState,
    coll: &Arc<Collection>,
    threshold: Threshold,
    key: GroupsKey,
    paging: bool,
    wait: Option<Duration>,
) -> Result<Arc<Groups>, ApiError> {
    let recent = Duration::from_secs(app.config.server.request_timeout_secs);
    app.scans
        .groups(
            coll,
            backend(coll)?,
            &app.metrics,
            threshold,
            key,
            paging,
            recent,
            wait,
        )
        .await
        .map_err(scan_error)
}

fn scan_error(e: ScanError) -> ApiError {
    match e {
        ScanError::InProgress { retry_after_secs } => ApiError::ScanInProgress { retry_after_secs },
        ScanError::Failed(e) => ApiError::Internal(format!("duplicate scan failed: {e}")),
        ScanError::Storage(e) => e.into(),
    }
}

pub(super) type Chunk = Result<Bytes, std::io::Error>;

/// A streaming response of `content_type` fed by `rx`.
pub(super) fn streamed(rx: mpsc::Receiver<Chunk>, content_type: &'static str) -> Response {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    });
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        Body::from_stream(stream),
    )
        .into_response()
}

/// Appends to a chunk and hands over full chunks; false once the client is gone.
struct ChunkWriter {
    tx: mpsc::Sender<Chunk>,
    buf: Vec<u8>,
}

impl ChunkWriter {
    fn new(tx: mpsc::Sender<Chunk>) -> Self {
        Self {
            tx,
            buf: Vec::with_capacity(CHUNK_BYTES + 4096),
        }
    }

    /// Raw bytes (JSON punctuation around streamed items).
    fn raw(&mut self, bytes: &[u8]) -> bool {
        self.buf.extend_from_slice(bytes);
        self.buf.len() < CHUNK_BYTES || self.flush()
    }

    /// One value as JSON, followed by `end`.
    fn value(&mut self, value: &impl Serialize, end: &[u8]) -> bool {
        serde_json::to_writer(&mut self.buf, value).expect("serializing to memory");
        self.raw(end)
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

    /// End the body with an error: the client sees a broken response, not
    /// a short one that looks complete.
    fn fail(self, message: String) {
        let _ = self.tx.blocking_send(Err(std::io::Error::other(message)));
    }
}

/// `GET /duplicates/drop-list`: for each group of `GET /duplicates` with
/// the same parameters (the same scan and page cache), every member but
/// the one `keep` keeps; pages of groups as JSON, or every drop as NDJSON.
pub async fn drop_list(
    State(app): State<AppState>,
    Coll(coll): Coll,
    headers: HeaderMap,
    ApiQuery(params): ApiQuery<DropListParams>,
) -> Result<Response, ApiError> {
    let keep = match params.keep.as_deref() {
        None => Keep::Oldest,
        Some(raw) => Keep::parse("keep", raw).map_err(ApiError::InvalidParameter)?,
    };
    let scan = params.groups();
    let GroupsAsk {
        threshold,
        measure,
        score,
        key,
        after,
    } = scan.ask(&app, &coll, "drop_list").await?;
    let time_field = coll.time_field();
    if wants_ndjson(&headers) {
        scan.check_stream("drop")?;
        return Ok(stream_groups(
            app,
            coll,
            threshold,
            key,
            after,
            "drop_list",
            move |out, index, group| {
                drops(group, index, &keep, time_field.as_deref()).all(|d| out.value(&d, b"\n"))
            },
        ));
    }
    let limit = Limit::parse(params.limit, &app.config.query)?.get();
    let timeout = Duration::from_secs(app.config.server.request_timeout_secs);
    let wait = Some(timeout.saturating_sub(ANSWER_MARGIN));
    let (t, min_size) = (key.threshold, key.min_size);
    let groups = computed_groups(&app, &coll, threshold, key, after.is_some(), wait).await?;
    observe_excluded(&app, &coll, "drop_list", after.is_none(), &groups);
    let start = after.as_deref().map_or(0, |k| groups.position_after(k));
    let start = start.min(groups.groups.len());
    let page = &groups.groups[start..];
    let page = &page[..limit.min(page.len())];
    let next_cursor = (start + page.len() < groups.groups.len())
        .then(|| page.last().map(|g| encode_cursor(g.first_id())))
        .flatten();
    Ok(Json(DropListPage {
        threshold: t,
        measure,
        score,
        min_size,
        keep: keep.as_string(),
        total_groups: groups.groups.len(),
        total_drops: groups.redundant(),
        drops: page
            .iter()
            .enumerate()
            .flat_map(|(i, g)| drops(g, start + i, &keep, time_field.as_deref()))
            .collect(),
        next_cursor,
    })
    .into_response())
}

/// The groups at `key` as NDJSON, from the group after `after`: `write`
/// puts each (with its position in the whole answer) on the stream, false
/// once the client is gone. `route` labels the exclusion metric.
fn stream_groups(
    app: AppState,
    coll: Arc<Collection>,
    threshold: Threshold,
    key: GroupsKey,
    after: Option<Vec<u8>>,
    route: &'static str,
    write: impl Fn(&mut ChunkWriter, usize, &Group) -> bool + Send + 'static,
) -> Response {
    let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
    tokio::spawn(async move {
        let groups = match computed_groups(&app, &coll, threshold, key, after.is_some(), None).await
        {
            Ok(g) => g,
            Err(e) => {
                tracing::error!(error = %e, "duplicate groups stream failed");
                let _ = tx.send(Err(std::io::Error::other("scan failed"))).await;
                return;
            }
        };
        observe_excluded(&app, &coll, route, true, &groups);
        let _ = tokio::task::spawn_blocking(move || {
            let start = after.as_deref().map_or(0, |k| groups.position_after(k));
            let mut out = ChunkWriter::new(tx);
            for (i, group) in groups.groups.iter().enumerate().skip(start) {
                if !write(&mut out, i, group) {
                    return;
                }
            }
            out.flush();
        })
        .await;
    });
    streamed(rx, NDJSON)
}

/// `GET /duplicates/pairs`: every verified pair as found, as one JSON
/// object or (`Accept: application/x-ndjson`) one pair per line.
pub async fn pairs(
    State(app): State<AppState>,
    Coll(coll): Coll,
    headers: HeaderMap,
    ApiQuery(params): ApiQuery<PairsParams>,
) -> Result<Response, ApiError> {
    let measure = pair_measure(params.measure);
    let score = params.score.unwrap_or_default();
    let threshold = coll
        .recipe()
        .threshold_for(measure, score, params.threshold)?;
    let by = By::new(measure, score);
    let filter = filters::from_query(params.filter.as_deref(), params.exclude_same.as_deref())?;
    if filter.is_some() {
        app.metrics.observe_filtered(coll.name.as_str(), "pairs");
    }
    let ndjson = wants_ndjson(&headers);
    needs_index(backend(&coll)?, by)?;
    let excluded = coll.excluded_pairs().await?;
    let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
    tokio::spawn(async move {
        let permit = app.scans.permit().await;
        let (scanned, scans) = (Arc::clone(&coll), Arc::clone(&app.scans));
        let started = Instant::now();
        let scan = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let mut out = ChunkWriter::new(tx);
            let Some(backend) = scanned.backend() else {
                return Err(BackendError::Internal("the collection is not ready".into()));
            };
            let result = write_pairs(
                backend,
                scans.pool(),
                threshold,
                by,
                filter.as_ref(),
                excluded.as_deref(),
                ndjson,
                &mut out,
            );
            match &result {
                Ok(stats) if stats.complete => {
                    out.flush();
                }
                Ok(_) => out.fail("client went away".into()),
                Err(_) => out.fail("the scan failed; the cause is logged".into()),
            }
            result
        })
        .await;
        app.metrics
            .observe_scan(coll.name.as_str(), "pairs", started.elapsed().as_secs_f64());
        match scan {
            Ok(Ok(stats)) => {
                app.metrics
                    .observe_review_excluded(coll.name.as_str(), "pairs", stats.excluded);
                tracing::info!(
                    collection = %coll.name,
                    threshold = threshold.value(),
                    documents = stats.documents,
                    candidates = stats.candidates,
                    pairs = stats.pairs,
                    excluded = stats.excluded,
                    complete = stats.complete,
                    seconds = started.elapsed().as_secs_f64(),
                    "duplicate pairs streamed"
                )
            }
            Ok(Err(e)) => {
                tracing::error!(collection = %coll.name, error = %e, "duplicate pair scan failed")
            }
            Err(e) => tracing::error!(error = %e, "duplicate pair scan failed"),
        }
    });
    Ok(streamed(
        rx,
        if ndjson { NDJSON } else { "application/json" },
    ))
}

/// Scan for pairs on `pool`, writing each as found: NDJSON lines, or the
/// members of one JSON object (`{"threshold", "pairs": [...], "documents",
/// "candidates"}`).
#[allow(clippy::too_many_arguments)]
fn write_pairs(
    backend: &Backend,
    pool: &rayon::ThreadPool,
    threshold: Threshold,
    by: By,
    filter: Option<&Arc<FilterSpec>>,
    excluded: Option<&ExcludedPairs>,
    ndjson: bool,
    out: &mut ChunkWriter,
) -> Result<ScanStats, BackendError> {
    let mut first = true;
    if !ndjson {
        let head = format!(
            "{{\"threshold\":{},\"measure\":\"{}\",\"score\":\"{}\",\"pairs\":[",
            serde_json::to_string(&threshold.value()).expect("a float serializes"),
            by.measure.as_str(),
            by.score.as_str()
        );
        if !out.raw(head.as_bytes()) {
            return Ok(ScanStats::default());
        }
    }
    let stats = backend.scan_pairs(threshold, by, filter, excluded, pool, &mut |edge| {
        let pair = PairOut::from(edge);
        if ndjson {
            out.value(&pair, b"\n")
        } else {
            let sep: &[u8] = if first { b"" } else { b"," };
            first = false;
            out.raw(sep) && out.value(&pair, b"")
        }
    })?;
    if !ndjson && stats.complete {
        let tail = format!(
            "],\"documents\":{},\"candidates\":{}}}",
            stats.documents, stats.candidates
        );
        if !out.raw(tail.as_bytes()) {
            return Ok(ScanStats {
                complete: false,
                ..stats
            });
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_any_id_and_any_hex_names_a_position() {
        for id in ["a", "doc-17", "ünïcødé/ä b", "x\"y"] {
            assert_eq!(decode_cursor(&encode_cursor(id)).unwrap(), id.as_bytes());
        }
        assert_eq!(decode_cursor("FF00").unwrap(), [0xff, 0x00]);
        for bad in ["", "0", "zz", "é1", "abc"] {
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
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/x-ndjson;q=0"),
        );
        assert!(!wants_ndjson(&h));
    }
}
