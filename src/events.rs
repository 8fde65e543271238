//! Events for the systems that act on answers (issue 45): what a write
//! found, recorded durably per collection in an *event log* that is both
//! the webhooks' outbox and the pull feed (`GET /events`), and the
//! webhook subscriptions that receive them.
//!
//! These are the data types shared by the storage backends (which keep the
//! log, the subscriptions and the delivery state: a file beside the
//! collection's write-ahead log in memory, a Redis Stream with a consumer
//! group per subscription on Redis), the service layer (which produces
//! events after writes and delivers them, signed per Standard Webhooks)
//! and the HTTP layer. No I/O here.

use crate::engine::{Measure, Score};
use serde::{Deserialize, Serialize};

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A write (create, replace or a batch's document) was stored and is a
    /// near-duplicate (or, by containment, an excerpt or an embedder) of
    /// stored documents: `data.matches` says which, with every score.
    Duplicate,
    /// `if_unique` refused a write: nothing was stored; `data.matches` are
    /// the stored documents that made it a duplicate.
    Refused,
}

impl EventKind {
    pub const ALL: [EventKind; 2] = [EventKind::Duplicate, EventKind::Refused];

    /// The event's `type` on the wire (Standard Webhooks' payload
    /// convention `{type, timestamp, data}`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Duplicate => "document.duplicate",
            EventKind::Refused => "document.refused",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// One matched stored document in an event, with every score the engine
/// computed (a consumer filters by its own measure and threshold).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventMatch {
    pub id: String,
    pub jaccard: f64,
    /// |Q ∩ D| / |Q|: the written text inside the stored one.
    pub query_in_stored: f64,
    /// |Q ∩ D| / |D|: the stored text inside the written one.
    pub stored_in_query: f64,
    /// Content Jaccard (boilerplate left out), when the collection counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_jaccard: Option<f64>,
}

impl EventMatch {
    /// This match's value of `measure` on `score` (`None`: content asked
    /// and not known, never passes).
    pub fn value(&self, measure: Measure, score: Score) -> Option<f64> {
        if score == Score::Content {
            // Content containments are not carried; content applies to
            // Jaccard only in events.
            return match measure {
                Measure::Jaccard => self.content_jaccard,
                _ => None,
            };
        }
        Some(match measure {
            Measure::Jaccard => self.jaccard,
            Measure::QueryInStored => self.query_in_stored,
            Measure::StoredInQuery => self.stored_in_query,
            Measure::Containment => self.query_in_stored.max(self.stored_in_query),
        })
    }
}

/// An event before the log has numbered it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventDraft {
    pub kind: EventKind,
    /// When it happened (ms since the epoch).
    pub time_ms: u64,
    /// The written (or refused) document's id.
    pub document: String,
    /// `created`, `replaced` or `refused`.
    pub write: String,
    /// Stored documents it matched, best first (bounded by the rules'
    /// limit).
    pub matches: Vec<EventMatch>,
}

/// An event as the log holds it: the draft plus its identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Unique and stable (`evt_` + a UUIDv7): the feed's event id, and
    /// with the subscription's id the `webhook-id` of every delivery of it
    /// (the same on retries).
    pub id: String,
    /// The position in the collection's log, opaque to clients, strictly
    /// increasing: the feed's cursor (memory: the decimal sequence number;
    /// Redis: the stream entry id).
    pub cursor: String,
    #[serde(flatten)]
    pub draft: EventDraft,
}

impl Event {
    /// The `webhook-id` of this event's deliveries to subscription `sub`.
    pub fn webhook_id(&self, sub: &str) -> String {
        format!("{}_{}", self.id, sub)
    }
}

/// A webhook subscription, as stored (the secret included: it never
/// leaves the server after creation).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Subscription {
    /// `wh_` + a UUIDv7, or a client id.
    pub id: String,
    pub url: String,
    /// `whsec_` + base64 of 24–64 random or given bytes.
    pub secret: String,
    pub kinds: Vec<EventKind>,
    pub measure: Measure,
    pub score: Score,
    /// The subscription's threshold on `measure` (resolved at creation).
    pub threshold: f64,
    pub created_ms: u64,
}

impl std::fmt::Debug for Subscription {
    /// Never prints the secret (logs see this).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .field("url", &self.url)
            .field("secret", &"<redacted>")
            .field("kinds", &self.kinds)
            .field("measure", &self.measure)
            .field("score", &self.score)
            .field("threshold", &self.threshold)
            .finish()
    }
}

impl Subscription {
    /// Whether `event` concerns this subscription, and the matches it
    /// receives (those at or above its threshold on its measure).
    pub fn selects(&self, event: &EventDraft) -> Option<Vec<EventMatch>> {
        if !self.kinds.contains(&event.kind) {
            return None;
        }
        let kept: Vec<EventMatch> = event
            .matches
            .iter()
            .filter(|m| {
                m.value(self.measure, self.score)
                    .is_some_and(|v| v >= self.threshold)
            })
            .cloned()
            .collect();
        (!kept.is_empty()).then_some(kept)
    }
}

/// What storing a subscription did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionPut {
    /// A new subscription (it receives the events appended from now on).
    Created,
    /// One with its id existed and was replaced (its position kept).
    Replaced,
    /// Refused: the collection already has the most subscriptions allowed,
    /// counted in the same atomic step as the store (so nodes storing at
    /// once cannot pass the limit together).
    Full,
}

/// One event due for delivery to one subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub event: Event,
    /// Attempts already made (0 for the first).
    pub attempts: u32,
    /// Backend-specific handle to settle it (memory: the sequence number;
    /// Redis: the stream entry id).
    pub handle: String,
}

/// How one delivery attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    /// 2xx.
    Delivered,
    /// Not delivered; try again at `next_ms` (ms since the epoch).
    Retry { next_ms: u64, error: String },
    /// Not delivered and out of attempts: into the failed list.
    Failed { error: String },
}

/// A delivery that ran out of attempts, kept until retried by hand or
/// dropped by the failed list's bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedDelivery {
    pub event: Event,
    pub attempts: u32,
    /// The last attempt's error (status code, timeout, connection
    /// refused), never a secret.
    pub error: String,
    pub failed_ms: u64,
}

/// A page of the event feed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EventPage {
    /// Oldest first, strictly after the cursor asked.
    pub events: Vec<Event>,
    /// The cursor to pass next: the last event's, or the one asked when
    /// the page is empty.
    pub next: Option<String>,
    /// The oldest cursor still retained (a client whose cursor is older
    /// missed the events trimmed in between).
    pub oldest: Option<String>,
}

/// Now, in ms since the epoch (the time of events and delivery attempts).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Failed deliveries dropped by the per-subscription bound of the failed
/// lists, in this process since it started, every backend together
/// (`neardup_webhook_failed_dropped_total`).
pub static FAILED_DROPPED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Failed deliveries kept per subscription (the oldest are dropped first).
pub const FAILED_KEEP: usize = 1000;
