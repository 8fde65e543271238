//! The memory backend's event log, webhook subscriptions and delivery
//! state (issue 45): see the `Backend` methods of the same names. The
//! files and their replay are `persist::events::EventLog`'s; here it is
//! opened once per collection directory and called on the caller's thread
//! for what never fsyncs (when its lock is free), else on a blocking one.
//!
//! One `EventLog` per directory, shared by every `Memory` of it (a
//! reindex builds a second one over the same collection directory while
//! the first still serves): a registry of weak references keyed by the
//! directory, each `Memory` holding a strong one once opened.

use super::{persist_err, Memory};
use crate::backend::BackendError;
use crate::config::WalFsync;
use crate::engine::EngineError;
use crate::events::{
    Attempt, Delivery, Event, EventDraft, EventPage, FailedDelivery, Subscription, SubscriptionPut,
};
use crate::persist::events::{parse_cursor, EventLog, Settle};
use crate::persist::{PersistError, Store};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// A collection directory's open event log.
pub(crate) type SharedLog = Arc<Mutex<EventLog>>;

/// Every open event log, by collection directory.
fn registry() -> &'static Mutex<HashMap<PathBuf, Weak<Mutex<EventLog>>>> {
    static LOGS: OnceLock<Mutex<HashMap<PathBuf, Weak<Mutex<EventLog>>>>> = OnceLock::new();
    LOGS.get_or_init(Default::default)
}

/// How often an `interval`-mode log is fsynced at most (its writes are
/// written before they return, so only a power loss can lose that window).
const INTERVAL_FSYNC_MS: u64 = 1000;

/// How often an `always`-mode log's appends are fsynced at most (an idle
/// log's at once): a stream of appends makes 20 fsyncs a second, not one a
/// group, beside the WAL's on the same disk.
const ALWAYS_FSYNC_MS: u64 = 50;

/// The event log of the collection directory `dir` (whose store is
/// `store`), opened if no `Memory` of it has it open.
fn open_log(store: &Store, dir: &Path) -> Result<SharedLog, PersistError> {
    let mut reg = registry().lock().expect("event log registry");
    reg.retain(|_, w| w.strong_count() > 0);
    // A collection deleted and created again under the same name has a
    // new `events` directory: the old log is not reused.
    if let Some(log) = reg.get(dir).and_then(Weak::upgrade) {
        if dir.join(crate::persist::events::DIR).is_dir() {
            return Ok(log);
        }
    }
    let mode = store.wal().mode();
    let interval = match mode {
        WalFsync::Interval => INTERVAL_FSYNC_MS,
        _ => ALWAYS_FSYNC_MS,
    };
    let log = EventLog::open(dir, mode, interval)?;
    let log = Arc::new(Mutex::new(log));
    reg.insert(dir.to_owned(), Arc::downgrade(&log));
    Ok(log)
}

/// `f` on `log` on a blocking thread.
async fn on_blocking_thread<T: Send + 'static>(
    log: SharedLog,
    what: &'static str,
    f: impl FnOnce(&mut EventLog) -> Result<T, PersistError> + Send + 'static,
) -> Result<T, BackendError> {
    tokio::task::spawn_blocking(move || {
        let mut log = log.lock().expect("event log lock");
        f(&mut log)
    })
    .await
    .map_err(|e| BackendError::Internal(format!("{what} task failed: {e}")))?
    .map_err(persist_err(what))
}

impl Memory {
    /// This collection's event log, opened on first use.
    async fn log(&self, dir: &Path, what: &'static str) -> Result<SharedLog, BackendError> {
        if let Some(log) = self.events.get() {
            return Ok(Arc::clone(log));
        }
        let (store, d) = (Arc::clone(&self.store), dir.to_owned());
        let opened = tokio::task::spawn_blocking(move || open_log(&store, &d))
            .await
            .map_err(|e| BackendError::Internal(format!("{what} task failed: {e}")))?;
        let log = self.track(
            "events",
            "the event log cannot be opened; no events until it is repaired",
            what,
            opened,
        )?;
        Ok(Arc::clone(self.events.get_or_init(|| log)))
    }

    /// `f` on this collection's event log (opened on first use), on a
    /// blocking thread: for what may fsync or rewrite the log.
    async fn on_log<T: Send + 'static>(
        &self,
        dir: &Path,
        what: &'static str,
        f: impl FnOnce(&mut EventLog) -> Result<T, PersistError> + Send + 'static,
    ) -> Result<T, BackendError> {
        let log = self.log(dir, what).await?;
        on_blocking_thread(log, what, f).await
    }

    /// [`Self::on_log`] for what never fsyncs (reads, and writes that are
    /// a write(2) of a few hundred bytes): run on the caller's thread when
    /// the log's lock is free and `quick` says so of the log, else on a
    /// blocking thread. A blocking thread costs two thread wake-ups, which
    /// were most of an event's cost (docs/benchmarks.md, issue 45).
    async fn on_log_quick<T: Send + 'static>(
        &self,
        dir: &Path,
        what: &'static str,
        quick: impl FnOnce(&EventLog) -> bool,
        f: impl FnOnce(&mut EventLog) -> Result<T, PersistError> + Send + 'static,
    ) -> Result<T, BackendError> {
        let log = self.log(dir, what).await?;
        let f = match log.try_lock() {
            Ok(mut held) if quick(&held) => return f(&mut held).map_err(persist_err(what)),
            _ => f,
        };
        on_blocking_thread(log, what, f).await
    }

    /// Whether this collection has no event log yet (none is made until a
    /// subscription is created or an event appended).
    fn no_log_yet(&self, dir: &Path) -> bool {
        self.events.get().is_none()
            && !dir.join(crate::persist::events::SUBSCRIPTIONS).exists()
            && !dir.join(crate::persist::events::DIR).exists()
    }

    pub(crate) async fn subscriptions(
        &self,
        dir: &Path,
    ) -> Result<Vec<Subscription>, BackendError> {
        if self.no_log_yet(dir) {
            return Ok(Vec::new());
        }
        self.on_log_quick(
            dir,
            "reading the subscriptions",
            |_| true,
            |log| Ok(log.subscriptions().to_vec()),
        )
        .await
    }

    pub(crate) async fn put_subscription(
        &self,
        dir: &Path,
        s: Subscription,
        max: usize,
    ) -> Result<SubscriptionPut, BackendError> {
        self.on_log(dir, "writing a subscription", move |log| {
            let known = log.subscriptions().iter().any(|x| x.id == s.id);
            if !known && log.subscriptions().len() >= max {
                return Ok(SubscriptionPut::Full);
            }
            Ok(if log.put_subscription(s)? {
                SubscriptionPut::Created
            } else {
                SubscriptionPut::Replaced
            })
        })
        .await
    }

    pub(crate) async fn delete_subscription(
        &self,
        dir: &Path,
        id: &str,
    ) -> Result<bool, BackendError> {
        let id = id.to_owned();
        self.on_log(dir, "deleting a subscription", move |log| {
            log.delete_subscription(&id)
        })
        .await
    }

    pub(crate) async fn append_events(
        &self,
        dir: &Path,
        drafts: Vec<EventDraft>,
    ) -> Result<Vec<Event>, BackendError> {
        let (events, ticket) = self
            .on_log_quick(
                dir,
                "appending events",
                |_| true,
                move |log| {
                    let events =
                        log.append(drafts, || format!("evt_{}", uuid::Uuid::now_v7().simple()))?;
                    Ok((events, log.sync_ticket()))
                },
            )
            .await?;
        // Written (a kill -9 keeps the events); fsynced off the write's
        // path, group-committed with the appends around it and at most
        // once every `ALWAYS_FSYNC_MS` (`INTERVAL_FSYNC_MS` in interval
        // mode; an idle log at once), so a write never waits for a second
        // fsync after its log's and the event log's fsyncs do not crowd
        // the WAL's. A power loss in that window can lose the events of
        // writes that survived (docs/webhooks.md, "At least once").
        if let Some(syncer) = ticket {
            if let Some(wait) = syncer.claim() {
                tokio::spawn(async move {
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                    let _ = tokio::task::spawn_blocking(move || {
                        if let Err(e) = syncer.run_claimed() {
                            tracing::error!(error = %e, "fsync of the event log failed");
                        }
                    })
                    .await;
                });
            }
        }
        Ok(events)
    }

    pub(crate) async fn read_events(
        &self,
        dir: &Path,
        after: Option<&str>,
        limit: usize,
    ) -> Result<EventPage, BackendError> {
        let after_seq = match after {
            None => None,
            Some(c) => {
                Some(parse_cursor(c).ok_or_else(|| EngineError::InvalidCursor(c.to_owned()))?)
            }
        };
        let asked = after.map(str::to_owned);
        if self.no_log_yet(dir) {
            return Ok(EventPage {
                events: Vec::new(),
                next: asked,
                oldest: None,
            });
        }
        self.on_log_quick(
            dir,
            "reading events",
            |_| true,
            move |log| {
                let (events, oldest) = log.read(after_seq, limit);
                let next = events.last().map(|e| e.cursor.clone()).or(asked);
                Ok(EventPage {
                    events,
                    next,
                    oldest,
                })
            },
        )
        .await
    }

    pub(crate) async fn trim_events(
        &self,
        dir: &Path,
        keep_ms: u64,
        keep_max: usize,
        now_ms: u64,
    ) -> Result<usize, BackendError> {
        if self.no_log_yet(dir) {
            return Ok(0);
        }
        self.on_log(dir, "trimming events", move |log| {
            log.trim(keep_ms, keep_max, now_ms)
        })
        .await
    }

    pub(crate) async fn due_deliveries(
        &self,
        dir: &Path,
        sub: &Subscription,
        consumer: &str,
        now_ms: u64,
        max: usize,
    ) -> Result<Vec<Delivery>, BackendError> {
        if self.no_log_yet(dir) {
            return Ok(Vec::new());
        }
        // One node delivers a memory collection: `consumer` names no one else.
        let _ = consumer;
        // Quick unless the subscription's start is to be logged (fsynced).
        let started = |log: &EventLog| log.started(&sub.id);
        let sub = sub.clone();
        self.on_log_quick(dir, "reading due deliveries", started, move |log| {
            Ok(log
                .due(&sub, now_ms, max)?
                .into_iter()
                .map(|(seq, event, attempts)| Delivery {
                    event,
                    attempts,
                    handle: seq.to_string(),
                })
                .collect())
        })
        .await
    }

    pub(crate) async fn settle_many(
        &self,
        dir: &Path,
        sub: &Subscription,
        settled: Vec<(&Delivery, Attempt)>,
    ) -> Result<(), BackendError> {
        let now_ms = crate::events::now_ms();
        let settled = settled
            .into_iter()
            .map(|(d, outcome)| {
                let seq = parse_cursor(&d.handle).ok_or_else(|| {
                    BackendError::Internal(format!(
                        "not a delivery of this backend: {:?}",
                        d.handle
                    ))
                })?;
                let settle = match outcome {
                    Attempt::Delivered => Settle::Delivered,
                    Attempt::Retry { next_ms, .. } => Settle::Retry { next_ms },
                    Attempt::Failed { error } => Settle::Failed { error, now_ms },
                };
                Ok((seq, d.attempts, settle))
            })
            .collect::<Result<Vec<_>, BackendError>>()?;
        let sub = sub.id.clone();
        self.on_log_quick(
            dir,
            "settling deliveries",
            |_| true,
            move |log| {
                settled
                    .into_iter()
                    .try_for_each(|(seq, attempts, settle)| log.settle(&sub, seq, attempts, settle))
            },
        )
        .await
    }

    pub(crate) async fn failed_deliveries(
        &self,
        dir: &Path,
        sub_id: &str,
        limit: usize,
    ) -> Result<Vec<FailedDelivery>, BackendError> {
        if self.no_log_yet(dir) {
            return Ok(Vec::new());
        }
        let sub = sub_id.to_owned();
        self.on_log_quick(
            dir,
            "reading failed deliveries",
            |_| true,
            move |log| Ok(log.failed(&sub, limit)),
        )
        .await
    }

    pub(crate) async fn retry_failed(
        &self,
        dir: &Path,
        sub_id: &str,
        event_id: Option<&str>,
    ) -> Result<usize, BackendError> {
        if self.no_log_yet(dir) {
            return Ok(0);
        }
        let (sub, event) = (sub_id.to_owned(), event_id.map(str::to_owned));
        self.on_log(dir, "retrying failed deliveries", move |log| {
            log.retry_failed(&sub, event.as_deref())
        })
        .await
    }

    pub(crate) async fn pending_deliveries(
        &self,
        dir: &Path,
        sub_id: &str,
    ) -> Result<u64, BackendError> {
        if self.no_log_yet(dir) {
            return Ok(0);
        }
        let sub = sub_id.to_owned();
        self.on_log_quick(
            dir,
            "counting pending deliveries",
            |_| true,
            move |log| Ok(log.pending(&sub)),
        )
        .await
    }
}
