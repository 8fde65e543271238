//! The redis backend's event log, webhook subscriptions and delivery
//! state (issue 45): see the `Backend` methods of the same names, and
//! docs/redis-layout.md, "Events and webhooks", for the keys and the
//! at-least-once argument.
//!
//! **The log** is one Stream per collection (`Keys::events`): an entry
//! per event, fields `id` (the event's `evt_…` id) and `e` (its draft as
//! JSON); the entry id is the event's cursor. Appending is one script call
//! per batch (the entries in order, one round trip on the write path).
//!
//! **Subscriptions** are a hash id → JSON and a version counter, as the
//! templates are; each has a *consumer group* on the stream named by its
//! id, created at `$` by the script that stores a new one (so it receives
//! only later events), and destroyed with it.
//!
//! **Deliveries.** A node takes deliveries with one script per
//! subscription (`scripts/ev_due.lua`): entries due again from the
//! subscription's *schedule* (a sorted set: every delivery taken and not
//! settled, scored by when it is due again) are `XCLAIM`ed to it, then new
//! entries are read with `XREADGROUP >`. Every take is scheduled at the end
//! of its *lease*: the backoff of its take number plus a request's timeout
//! ([`DeliveryTiming`]); a node that dies holding a delivery leaves it
//! there, and any node takes it again once the lease ends, with the same
//! event (the same `webhook-id`) and one attempt more (attempts are the
//! entry's delivery count, less one). `Retry` reschedules the entry at its
//! `next_ms`; `Delivered` and `Failed` `XACK` it (a failed one is pushed on
//! the subscription's bounded failed list, with its own copy of the event).
//! A settle from a node whose lease ended and whose delivery another node
//! took over changes nothing (its handle names its take). Retrying by hand
//! moves failed deliveries into the subscription's retries (a hash of the
//! events' JSON: the stream may have trimmed them), scheduled at 0 so the
//! next take drains them first.
//!
//! Why a schedule rather than `XPENDING`'s idle times alone: a retry is due
//! at a time the delivery task chose (`next_ms`, with jitter), which an
//! idle time cannot say (`XCLAIM TIME` in the future is clamped to now),
//! and the clock is the caller's (`now_ms`), as on the memory backend.

use super::{call, corrupt, script_call, RedisIndex, Script};
use crate::backend::BackendError;
use crate::engine::EngineError;
use crate::events::{
    Attempt, Delivery, Event, EventDraft, EventPage, FailedDelivery, Subscription, SubscriptionPut,
};
use redis::Value;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::LazyLock;

static APPEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/ev_append.lua")));
static SUB_PUT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/ev_sub_put.lua")));
static SUB_DEL: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/ev_sub_del.lua")));
static DUE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/ev_due.lua")));
static SETTLE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/ev_settle.lua")));
static RETRY: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/ev_retry.lua")));
static TRIM: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/ev_trim.lua")));
static PENDING: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/ev_pending.lua")));

/// Failed deliveries kept per subscription: the newest, as on every
/// backend (the dropped are counted in
/// `neardup_redis_failed_deliveries_dropped_total`).
pub const FAILED_KEPT: usize = crate::events::FAILED_KEEP;
/// Entries one `trim_events` call drops to honour the count bound, at most
/// (the retention timer calls it again).
const TRIM_STEP: usize = 10_000;
/// Takes per `due_deliveries` call, at most, when the events taken are
/// ones the subscription does not select (settled silently).
const DUE_ROUNDS: usize = 8;
/// Deliveries one `due_deliveries` call takes, at most (a larger `max`
/// takes this many: the caller asks again).
const DUE_MAX: usize = 10_000;
/// Events one feed page reads, at most (likewise).
const PAGE_MAX: usize = 100_000;

/// How long a node may hold a delivery before another takes it again: the
/// backoff of its take number (`min(base · 2^(take − 1), max)`) plus a
/// request's timeout. The delivery task's settings (`webhooks.*`); the
/// defaults are theirs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeliveryTiming {
    pub backoff_base_ms: u64,
    pub backoff_max_ms: u64,
    pub timeout_ms: u64,
}

impl Default for DeliveryTiming {
    fn default() -> Self {
        Self {
            backoff_base_ms: 1_000,
            backoff_max_ms: 600_000,
            timeout_ms: 5_000,
        }
    }
}

/// A stream entry id (`ms-seq`), as a cursor: both parts decimal.
fn parse_cursor(cursor: &str) -> Result<(u64, u64), BackendError> {
    let bad = || {
        BackendError::Engine(EngineError::InvalidCursor(
            cursor.chars().take(64).collect(),
        ))
    };
    let (ms, seq) = cursor.split_once('-').ok_or_else(bad)?;
    let part = |s: &str| {
        if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse::<u64>().ok()
    };
    Ok((part(ms).ok_or_else(bad)?, part(seq).ok_or_else(bad)?))
}

/// The first entry id after `(ms, seq)`; `None` after the last possible.
fn id_after((ms, seq): (u64, u64)) -> Option<String> {
    if seq < u64::MAX {
        Some(format!("{ms}-{}", seq + 1))
    } else {
        ms.checked_add(1).map(|ms| format!("{ms}-0"))
    }
}

fn text(v: &Value, key: &str) -> Result<String, BackendError> {
    redis::from_redis_value_ref(v).map_err(|e| corrupt(key, e))
}

/// An event from its stream entry's parts.
fn event_of(key: &str, cursor: String, id: String, draft: &str) -> Result<Event, BackendError> {
    let draft: EventDraft = serde_json::from_str(draft).map_err(|e| corrupt(key, e))?;
    Ok(Event { id, cursor, draft })
}

/// The events of an `XRANGE` answer.
fn entries(key: &str, v: Value) -> Result<Vec<Event>, BackendError> {
    let Value::Array(items) = v else {
        return Err(corrupt(key, "a stream read answered no list"));
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let (cursor, fields): (String, Vec<String>) =
            redis::from_redis_value(item).map_err(|e| corrupt(key, e))?;
        let (mut id, mut draft) = (None, None);
        for pair in fields.chunks_exact(2) {
            match pair[0].as_str() {
                "id" => id = Some(pair[1].clone()),
                "e" => draft = Some(pair[1].as_str()),
                _ => {}
            }
        }
        let (Some(id), Some(draft)) = (id, draft) else {
            return Err(corrupt(key, format!("entry {cursor} has no event")));
        };
        out.push(event_of(key, cursor, id, draft)?);
    }
    Ok(out)
}

/// A delivery's handle: the schedule member, the take number and the
/// consumer that took it (`member take consumer`).
fn handle(member: &str, take: u64, consumer: &str) -> String {
    format!("{member} {take} {consumer}")
}

fn parse_handle(h: &str) -> Result<(&str, &str, &str), BackendError> {
    let mut parts = h.splitn(3, ' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(n), Some(c)) if !m.is_empty() && !n.is_empty() => Ok((m, n, c)),
        _ => Err(BackendError::Internal(format!(
            "a delivery handle the redis backend did not give: {h:?}"
        ))),
    }
}

impl RedisIndex {
    /// The lease timing this node takes deliveries with.
    pub fn set_delivery_timing(&self, timing: DeliveryTiming) {
        *self.delivery_timing.lock().expect("timing lock") = timing;
    }

    fn delivery_timing(&self) -> DeliveryTiming {
        *self.delivery_timing.lock().expect("timing lock")
    }

    fn sub_keys(&self, sub: &str) -> Vec<String> {
        let k = &self.keys;
        let mut keys = vec![k.subscriptions(), k.subscriptions_version(), k.events()];
        keys.extend(k.event_sub_keys(sub));
        keys
    }

    pub(crate) async fn subscriptions(
        &self,
        dir: &Path,
    ) -> Result<Vec<Subscription>, BackendError> {
        let _ = dir;
        let key = self.keys.subscriptions();
        let mut all = redis::cmd("HGETALL");
        all.arg(&key);
        let pairs: Vec<(String, Vec<u8>)> =
            self.redis.one("reading webhook subscriptions", all).await?;
        let mut subs = pairs
            .into_iter()
            .map(|(_, json)| serde_json::from_slice(&json).map_err(|e| corrupt(&key, e)))
            .collect::<Result<Vec<Subscription>, _>>()?;
        subs.sort_by(|a, b| a.created_ms.cmp(&b.created_ms).then(a.id.cmp(&b.id)));
        Ok(subs)
    }

    pub(crate) async fn put_subscription(
        &self,
        dir: &Path,
        s: Subscription,
        max: usize,
    ) -> Result<SubscriptionPut, BackendError> {
        let _ = dir;
        // Paused with writes while a reindex copies the collection: a
        // change made after its carry-over would be lost with the old keys.
        self.check_writable()?;
        let json = serde_json::to_vec(&s)
            .map_err(|e| BackendError::Internal(format!("a subscription as JSON: {e}")))?;
        let call = script_call(
            &SUB_PUT,
            self.sub_keys(&s.id),
            vec![
                s.id.clone().into_bytes(),
                json,
                max.to_string().into_bytes(),
            ],
        );
        let mut v = self
            .redis
            .calls("storing a webhook subscription", vec![call])
            .await?;
        self.redis.replicate().await?;
        let put: i64 = redis::from_redis_value(v.pop().unwrap_or(Value::Nil))
            .map_err(|e| corrupt(&self.keys.subscriptions(), e))?;
        Ok(match put {
            1 => SubscriptionPut::Created,
            0 => SubscriptionPut::Replaced,
            _ => SubscriptionPut::Full,
        })
    }

    pub(crate) async fn delete_subscription(
        &self,
        dir: &Path,
        id: &str,
    ) -> Result<bool, BackendError> {
        let _ = dir;
        self.check_writable()?;
        let call = script_call(&SUB_DEL, self.sub_keys(id), vec![id.as_bytes().to_vec()]);
        let mut v = self
            .redis
            .calls("deleting a webhook subscription", vec![call])
            .await?;
        self.redis.replicate().await?;
        let gone: i64 = redis::from_redis_value(v.pop().unwrap_or(Value::Nil))
            .map_err(|e| corrupt(&self.keys.subscriptions(), e))?;
        Ok(gone == 1)
    }

    pub(crate) async fn append_events(
        &self,
        dir: &Path,
        drafts: Vec<EventDraft>,
    ) -> Result<Vec<Event>, BackendError> {
        let _ = dir;
        if drafts.is_empty() {
            return Ok(Vec::new());
        }
        let key = self.keys.events();
        let ids: Vec<String> = drafts
            .iter()
            .map(|_| format!("evt_{}", uuid::Uuid::now_v7().simple()))
            .collect();
        let mut args = Vec::with_capacity(drafts.len() * 2);
        for (id, draft) in ids.iter().zip(&drafts) {
            args.push(id.clone().into_bytes());
            args.push(
                serde_json::to_vec(draft)
                    .map_err(|e| BackendError::Internal(format!("an event as JSON: {e}")))?,
            );
        }
        let call = script_call(&APPEND, vec![key.clone()], args);
        let mut v = self.redis.calls("appending events", vec![call]).await?;
        self.redis.replicate().await?;
        let cursors: Vec<String> =
            redis::from_redis_value(v.pop().unwrap_or(Value::Nil)).map_err(|e| corrupt(&key, e))?;
        if cursors.len() != drafts.len() {
            return Err(corrupt(&key, "an append answered a short list"));
        }
        Ok(ids
            .into_iter()
            .zip(cursors)
            .zip(drafts)
            .map(|((id, cursor), draft)| Event { id, cursor, draft })
            .collect())
    }

    pub(crate) async fn read_events(
        &self,
        dir: &Path,
        after: Option<&str>,
        limit: usize,
    ) -> Result<EventPage, BackendError> {
        let _ = dir;
        let key = self.keys.events();
        let limit = limit.min(PAGE_MAX);
        let start = match after {
            None => Some("-".to_owned()),
            Some(c) => id_after(parse_cursor(c)?),
        };
        let mut first = redis::cmd("XRANGE");
        first.arg(&key).arg("-").arg("+").arg("COUNT").arg(1);
        let mut calls = vec![call(first)];
        if let (Some(start), true) = (&start, limit > 0) {
            let mut range = redis::cmd("XRANGE");
            range.arg(&key).arg(start).arg("+").arg("COUNT").arg(limit);
            calls.push(call(range));
        }
        let mut v = self.redis.calls("reading events", calls).await?.into_iter();
        let oldest = entries(&key, v.next().unwrap_or(Value::Nil))?
            .pop()
            .map(|e| e.cursor);
        let events = match v.next() {
            Some(page) => entries(&key, page)?,
            None => Vec::new(),
        };
        let next = events
            .last()
            .map(|e| e.cursor.clone())
            .or_else(|| after.map(str::to_owned));
        Ok(EventPage {
            events,
            next,
            oldest,
        })
    }

    pub(crate) async fn trim_events(
        &self,
        dir: &Path,
        keep_ms: u64,
        keep_max: usize,
        now_ms: u64,
    ) -> Result<usize, BackendError> {
        let _ = dir;
        let key = self.keys.events();
        let call = script_call(
            &TRIM,
            vec![key.clone()],
            vec![
                now_ms.saturating_sub(keep_ms).to_string().into_bytes(),
                keep_max.to_string().into_bytes(),
                TRIM_STEP.to_string().into_bytes(),
            ],
        );
        let mut v = self.redis.calls("trimming events", vec![call]).await?;
        let n: i64 =
            redis::from_redis_value(v.pop().unwrap_or(Value::Nil)).map_err(|e| corrupt(&key, e))?;
        Ok(n.max(0) as usize)
    }

    pub(crate) async fn due_deliveries(
        &self,
        dir: &Path,
        sub: &Subscription,
        consumer: &str,
        now_ms: u64,
        max: usize,
    ) -> Result<Vec<Delivery>, BackendError> {
        let _ = dir;
        let key = self.keys.events();
        let t = self.delivery_timing();
        let max = max.min(DUE_MAX);
        let mut out = Vec::new();
        for _ in 0..DUE_ROUNDS {
            let want = max - out.len();
            if want == 0 {
                break;
            }
            let mut keys = vec![key.clone()];
            keys.extend(self.keys.event_sub_keys(&sub.id).into_iter().take(3));
            let call = script_call(
                &DUE,
                keys,
                [
                    sub.id.clone(),
                    consumer.to_owned(),
                    now_ms.to_string(),
                    want.to_string(),
                    t.backoff_base_ms.to_string(),
                    t.backoff_max_ms.to_string(),
                    t.timeout_ms.to_string(),
                ]
                .into_iter()
                .map(String::into_bytes)
                .collect(),
            );
            let mut v = self.redis.calls("taking deliveries", vec![call]).await?;
            let Some(Value::Array(items)) = v.pop() else {
                return Err(corrupt(&key, "taking deliveries answered no list"));
            };
            let taken = items.len();
            let mut unselected = Vec::new();
            for item in items {
                let Value::Array(f) = item else {
                    return Err(corrupt(&key, "taking deliveries answered no list"));
                };
                if f.len() != 6 {
                    return Err(corrupt(&key, "taking deliveries answered a short list"));
                }
                let kind = text(&f[0], &key)?;
                let member = text(&f[1], &key)?;
                let take: u64 = redis::from_redis_value_ref(&f[2]).map_err(|e| corrupt(&key, e))?;
                let (a, b, before) = (text(&f[3], &key)?, text(&f[4], &key)?, text(&f[5], &key)?);
                let event = if kind == "h" {
                    serde_json::from_str::<Event>(&a).map_err(|e| corrupt(&key, e))?
                } else {
                    event_of(&key, member.clone(), a, &b)?
                };
                if !before.is_empty() && before != consumer {
                    self.redis
                        .counters
                        .deliveries_reclaimed
                        .fetch_add(1, Ordering::Relaxed);
                }
                let d = Delivery {
                    event,
                    attempts: take.saturating_sub(1).min(u64::from(u32::MAX)) as u32,
                    handle: handle(&member, take, consumer),
                };
                if sub.selects(&d.event.draft).is_some() {
                    out.push(d);
                } else {
                    unselected.push(d);
                }
            }
            // Events the subscription does not select: settled silently.
            if !unselected.is_empty() {
                let calls = unselected
                    .iter()
                    .map(|d| self.settle_call(sub, d, &Attempt::Delivered))
                    .collect::<Result<Vec<_>, _>>()?;
                self.redis
                    .calls("settling unselected events", calls)
                    .await?;
            }
            if taken < want {
                break;
            }
        }
        Ok(out)
    }

    /// The script call that settles `d` as `outcome`.
    fn settle_call(
        &self,
        sub: &Subscription,
        d: &Delivery,
        outcome: &Attempt,
    ) -> Result<super::Call, BackendError> {
        let (member, take, consumer) = parse_handle(&d.handle)?;
        let (code, next_ms, failed) = match outcome {
            Attempt::Delivered => ("d", 0, Vec::new()),
            Attempt::Retry { next_ms, .. } => ("r", *next_ms, Vec::new()),
            Attempt::Failed { error } => {
                let f = FailedDelivery {
                    event: d.event.clone(),
                    attempts: d.attempts.saturating_add(1),
                    error: error.clone(),
                    failed_ms: self.engine.now_ms(),
                };
                let json = serde_json::to_vec(&f).map_err(|e| {
                    BackendError::Internal(format!("a failed delivery as JSON: {e}"))
                })?;
                ("f", 0, json)
            }
        };
        let mut keys = vec![self.keys.events()];
        keys.extend(self.keys.event_sub_keys(&sub.id));
        Ok(script_call(
            &SETTLE,
            keys,
            vec![
                sub.id.as_bytes().to_vec(),
                member.as_bytes().to_vec(),
                take.as_bytes().to_vec(),
                consumer.as_bytes().to_vec(),
                code.as_bytes().to_vec(),
                next_ms.to_string().into_bytes(),
                failed,
                FAILED_KEPT.to_string().into_bytes(),
            ],
        ))
    }

    pub(crate) async fn settle_many(
        &self,
        dir: &Path,
        sub: &Subscription,
        settled: Vec<(&Delivery, Attempt)>,
    ) -> Result<(), BackendError> {
        let _ = dir;
        let calls = settled
            .iter()
            .map(|(d, outcome)| self.settle_call(sub, d, outcome))
            .collect::<Result<Vec<_>, _>>()?;
        let answers = self.redis.calls("settling deliveries", calls).await?;
        self.redis.replicate().await?;
        for ((d, _), v) in settled.iter().zip(answers) {
            let (applied, dropped): (i64, i64) =
                redis::from_redis_value(v).map_err(|e| corrupt(&self.keys.events(), e))?;
            if dropped > 0 {
                self.redis
                    .counters
                    .failed_dropped
                    .fetch_add(dropped as u64, Ordering::Relaxed);
            }
            if applied == 0 {
                tracing::debug!(
                    subscription = %sub.id,
                    event = %d.event.id,
                    "a delivery another node took over meanwhile: its outcome is that node's"
                );
            }
        }
        Ok(())
    }

    /// The failed list of `sub_id`, newest first, raw (each item's JSON
    /// exactly as stored) and parsed.
    async fn failed_raw(
        &self,
        sub_id: &str,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, FailedDelivery)>, BackendError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let key = self.keys.event_failed(sub_id);
        let mut range = redis::cmd("LRANGE");
        range
            .arg(&key)
            .arg(0)
            .arg(limit.min(FAILED_KEPT) as i64 - 1);
        let items: Vec<Vec<u8>> = self.redis.one("reading failed deliveries", range).await?;
        items
            .into_iter()
            .map(|raw| {
                let f = serde_json::from_slice(&raw).map_err(|e| corrupt(&key, e))?;
                Ok((raw, f))
            })
            .collect()
    }

    pub(crate) async fn failed_deliveries(
        &self,
        dir: &Path,
        sub_id: &str,
        limit: usize,
    ) -> Result<Vec<FailedDelivery>, BackendError> {
        let _ = dir;
        Ok(self
            .failed_raw(sub_id, limit)
            .await?
            .into_iter()
            .map(|(_, f)| f)
            .collect())
    }

    pub(crate) async fn retry_failed(
        &self,
        dir: &Path,
        sub_id: &str,
        event_id: Option<&str>,
    ) -> Result<usize, BackendError> {
        let _ = dir;
        self.check_writable()?;
        let chosen: Vec<(Vec<u8>, FailedDelivery)> = self
            .failed_raw(sub_id, FAILED_KEPT)
            .await?
            .into_iter()
            .filter(|(_, f)| event_id.is_none_or(|id| f.event.id == id))
            .collect();
        if chosen.is_empty() {
            return Ok(0);
        }
        let mut args = Vec::with_capacity(chosen.len() * 3);
        for (raw, f) in chosen {
            let event = serde_json::to_vec(&f.event)
                .map_err(|e| BackendError::Internal(format!("an event as JSON: {e}")))?;
            args.extend([raw, f.event.cursor.into_bytes(), event]);
        }
        let k = &self.keys;
        let keys = vec![
            k.event_failed(sub_id),
            k.event_due(sub_id),
            k.event_retries(sub_id),
            k.event_retry_takes(sub_id),
        ];
        let call = script_call(&RETRY, keys, args);
        let mut v = self
            .redis
            .calls("retrying failed deliveries", vec![call])
            .await?;
        self.redis.replicate().await?;
        let n: i64 = redis::from_redis_value(v.pop().unwrap_or(Value::Nil))
            .map_err(|e| corrupt(&k.event_failed(sub_id), e))?;
        Ok(n.max(0) as usize)
    }

    pub(crate) async fn pending_deliveries(
        &self,
        dir: &Path,
        sub_id: &str,
    ) -> Result<u64, BackendError> {
        let _ = dir;
        let key = self.keys.events();
        let call = script_call(
            &PENDING,
            vec![key.clone(), self.keys.event_retries(sub_id)],
            vec![sub_id.as_bytes().to_vec()],
        );
        let mut v = self
            .redis
            .calls("counting pending deliveries", vec![call])
            .await?;
        let n: i64 =
            redis::from_redis_value(v.pop().unwrap_or(Value::Nil)).map_err(|e| corrupt(&key, e))?;
        Ok(n.max(0) as u64)
    }

    /// Copy the event log, the subscriptions and their delivery state to
    /// `to` (a reindex's new incarnation of this collection), whole:
    /// `DUMP`/`RESTORE` keeps the stream's entry ids (the feed's cursors),
    /// its consumer groups with their pending entries and last-delivered
    /// ids, the schedules, retries and failed lists. Writes, subscription
    /// changes and hand retries are paused while a reindex runs, so no
    /// event is appended and no subscription changed meanwhile; a delivery
    /// settled on the old keys after this copy is delivered again from the
    /// new ones (at least once, the same `webhook-id`). How many keys.
    pub async fn carry_events_to(&self, to: &RedisIndex) -> Result<usize, BackendError> {
        let mut names = vec![
            (self.keys.events(), to.keys.events()),
            (self.keys.subscriptions(), to.keys.subscriptions()),
            (
                self.keys.subscriptions_version(),
                to.keys.subscriptions_version(),
            ),
        ];
        for s in self.subscriptions(Path::new("")).await? {
            names.extend(
                self.keys
                    .event_sub_keys(&s.id)
                    .into_iter()
                    .zip(to.keys.event_sub_keys(&s.id)),
            );
        }
        self.copy_keys_to(to, &names, "the event log").await
    }
}

impl crate::backend::Backend {
    /// The lease timing of the webhook deliveries this node takes from
    /// this collection (the delivery settings, `webhooks.*`): on Redis, how
    /// long a node that took a delivery has before another takes it again
    /// ([`DeliveryTiming`]). The memory backend has one node: no lease.
    pub fn set_delivery_timing(&self, timing: DeliveryTiming) {
        if let crate::backend::Backend::Redis(r) = self {
            r.set_delivery_timing(timing);
        }
    }

    /// A reindex's carry-over of the event log, the webhook subscriptions
    /// and their delivery state from this index to `to`, the new one; how
    /// many keys were copied. On Redis they are keys of the incarnation:
    /// [`RedisIndex::carry_events_to`]. The memory backend keeps them in
    /// the collection's directory, which a reindex keeps: nothing to do.
    pub async fn carry_events_to(
        &self,
        to: &crate::backend::Backend,
    ) -> Result<usize, BackendError> {
        use crate::backend::Backend;
        match (self, to) {
            (Backend::Redis(from), Backend::Redis(to)) => from.carry_events_to(to).await,
            _ => Ok(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_stream_ids_or_refused() {
        assert_eq!(parse_cursor("1764375006000-0").unwrap(), (1764375006000, 0));
        assert_eq!(parse_cursor("0-18").unwrap(), (0, 18));
        for bad in [
            "",
            "-",
            "12",
            "12-",
            "-3",
            "+1-2",
            "1-+2",
            "1-2-3",
            "a-1",
            "1 -2",
            "١٢-٣",
            "99999999999999999999999-0",
            "1-2x",
        ] {
            let e = parse_cursor(bad).unwrap_err();
            assert!(
                matches!(e, BackendError::Engine(EngineError::InvalidCursor(_))),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn the_id_after_a_cursor_is_the_next_possible_entry() {
        assert_eq!(id_after((5, 7)).as_deref(), Some("5-8"));
        assert_eq!(id_after((5, u64::MAX)).as_deref(), Some("6-0"));
        assert_eq!(id_after((u64::MAX, u64::MAX)), None);
    }

    #[test]
    fn handles_keep_consumer_names_with_spaces() {
        let h = handle("1-2", 3, "node a");
        assert_eq!(parse_handle(&h).unwrap(), ("1-2", "3", "node a"));
        assert!(parse_handle("1-2").is_err());
    }
}
