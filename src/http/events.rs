//! The event feed (issue 45): `GET /events?after=&limit=`, NDJSON, one
//! event per line, oldest first, strictly after the cursor `after`.
//!
//! Headers: `neardup-next-cursor` (pass it as `after` next; the cursor
//! asked when the page is empty), `neardup-oldest-cursor` (the oldest event
//! still retained) and `neardup-events-trimmed: true` when events after
//! `after` were trimmed before the client read them (the page then starts
//! at the oldest retained event).

use super::dto::format_time;
use super::duplicates::NDJSON;
use super::error::ApiError;
use super::extract::{accepts, ApiQuery, Coll};
use super::state::backend;
use crate::events::{Event, EventMatch};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1000;
/// Longest cursor accepted (both backends' are far shorter).
const MAX_CURSOR: usize = 64;

/// An event as the feed and the failed list give it.
#[derive(Debug, Serialize)]
pub struct EventOut {
    pub id: String,
    pub cursor: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub time: String,
    pub document: String,
    pub write: String,
    pub matches: Vec<EventMatch>,
}

impl From<&Event> for EventOut {
    fn from(e: &Event) -> Self {
        EventOut {
            id: e.id.clone(),
            cursor: e.cursor.clone(),
            kind: e.draft.kind.as_str(),
            time: format_time(e.draft.time_ms),
            document: e.draft.document.clone(),
            write: e.draft.write.clone(),
            matches: e.draft.matches.clone(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventParams {
    after: Option<String>,
    limit: Option<usize>,
}

/// A cursor as numbers: memory's `N` is `(N, 0)`, Redis's `ms-seq`
/// `(ms, seq)`; `None` when it is neither.
fn cursor_key(c: &str) -> Option<(u64, u64)> {
    match c.split_once('-') {
        None => Some((c.parse().ok()?, 0)),
        Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
    }
}

/// Whether events after `after` were trimmed unread: the oldest retained
/// one is not the next after it (exact for memory's consecutive numbers;
/// for Redis's stream ids, any gap counts).
fn trimmed(after: &str, oldest: &str) -> bool {
    match (cursor_key(after), cursor_key(oldest)) {
        (Some((a, 0)), Some((o, 0))) if !after.contains('-') => a.saturating_add(1) < o,
        (Some(a), Some(o)) => a < o,
        _ => false,
    }
}

/// `GET /events`.
/// The feed's page as one JSON object (`Accept: application/json` without
/// `application/x-ndjson`): the events and the cursors the headers carry.
#[derive(Debug, Serialize)]
pub struct EventPageOut {
    pub events: Vec<EventOut>,
    pub next_cursor: Option<String>,
    pub oldest_cursor: Option<String>,
    pub trimmed: bool,
}

pub async fn feed(
    Coll(coll): Coll,
    headers: axum::http::HeaderMap,
    ApiQuery(params): ApiQuery<EventParams>,
) -> Result<Response, ApiError> {
    let limit = match params.limit {
        None => DEFAULT_LIMIT,
        Some(n) if (1..=MAX_LIMIT).contains(&n) => n,
        Some(n) => {
            return Err(ApiError::InvalidParameter(format!(
                "limit must be between 1 and {MAX_LIMIT}, got {n}"
            )))
        }
    };
    if let Some(a) = &params.after {
        if a.is_empty() || a.len() > MAX_CURSOR || cursor_key(a).is_none() {
            return Err(crate::engine::EngineError::InvalidCursor(
                a.chars().take(MAX_CURSOR).collect(),
            )
            .into());
        }
    }
    let page = backend(&coll)?
        .read_events(coll.dir(), params.after.as_deref(), limit)
        .await?;
    let gap = match (params.after.as_deref(), page.oldest.as_deref()) {
        (Some(a), Some(o)) => trimmed(a, o),
        _ => false,
    };
    let json_page = accepts(&headers, "application/json") && !accepts(&headers, NDJSON);
    let (body, media) = if json_page {
        let out = EventPageOut {
            events: page.events.iter().map(EventOut::from).collect(),
            next_cursor: page.next.clone(),
            oldest_cursor: page.oldest.clone(),
            trimmed: gap,
        };
        let body = serde_json::to_vec(&out).expect("a page serializes");
        (body, "application/json")
    } else {
        let mut body = Vec::new();
        for e in &page.events {
            serde_json::to_writer(&mut body, &EventOut::from(e)).expect("an event serializes");
            body.push(b'\n');
        }
        (body, NDJSON)
    };
    let mut r = (StatusCode::OK, body).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    let value = |s: &str| HeaderValue::from_str(s).ok();
    if let Some(v) = page.next.as_deref().and_then(value) {
        h.insert("neardup-next-cursor", v);
    }
    if let Some(v) = page.oldest.as_deref().and_then(value) {
        h.insert("neardup-oldest-cursor", v);
    }
    if gap {
        h.insert("neardup-events-trimmed", HeaderValue::from_static("true"));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::trimmed;

    #[test]
    fn a_gap_before_the_oldest_event_is_a_trim() {
        assert!(!trimmed("4", "5"));
        assert!(trimmed("3", "5"));
        assert!(!trimmed("9", "5"));
        assert!(trimmed("1700000000000-0", "1700000000001-0"));
        assert!(!trimmed("1700000000001-0", "1700000000001-0"));
    }
}
