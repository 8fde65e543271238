//! Producing events after writes (issue 45): which writes are events, and
//! the per-collection cache of webhook subscriptions that decides it.
//!
//! After an acknowledged write of a collection that has subscriptions or
//! its event feed on (the collection's `events` setting), the new
//! document's stored near-duplicates are looked up once per distinct
//! (measure, score) of the subscriptions and the feed rule, at the lowest
//! threshold among them (at most `events.max_matches`; only documents
//! stored at or before it), and if the feed rule or a subscription selects
//! any, one `document.duplicate` event with the union of the matches (every
//! score) is appended to the collection's event log *before* the write is
//! answered: an acknowledged write's event survives a kill -9. An
//! `if_unique` refusal appends a `document.refused` event with the stored
//! matches when a subscription takes that type or the feed is on. The feed
//! rule is read from the collection's settings at each write (not cached
//! here), so a `PATCH` applies from the next write, on every node that has
//! the change. A failed append never fails the write: it is logged at error
//! and counted in `neardup_events_lost_total`.
//!
//! The subscriptions of each collection are cached here (keyed by the
//! collection's process-unique id), refreshed when this node changes them
//! and, for the other nodes' changes on Redis, by the delivery loop at
//! every poll ([`EventHub::refresh`], the one place that re-reads them).

use crate::backend::BackendError;
use crate::collections::Collection;
use crate::engine::{DocId, Match, Measure, Query, Score};
use crate::events::{EventDraft, EventKind, EventMatch, Subscription};
use crate::service::metrics::Metrics;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use tokio::sync::Notify;

/// A collection's subscriptions and the lookups a write needs for them.
#[derive(Debug, Default)]
pub struct Rules {
    pub subscriptions: Vec<Subscription>,
    /// Per distinct (measure, score): the lowest threshold of the
    /// subscriptions of `document.duplicate` on it.
    lookups: Vec<(Measure, Score, f64)>,
}

impl Rules {
    fn new(subscriptions: Vec<Subscription>) -> Self {
        let mut lookups: Vec<(Measure, Score, f64)> = Vec::new();
        for s in subscriptions
            .iter()
            .filter(|s| s.kinds.contains(&EventKind::Duplicate))
        {
            match lookups
                .iter_mut()
                .find(|(m, sc, _)| *m == s.measure && *sc == s.score)
            {
                Some(l) => l.2 = l.2.min(s.threshold),
                None => lookups.push((s.measure, s.score, s.threshold)),
            }
        }
        Rules {
            subscriptions,
            lookups,
        }
    }

    /// The subscriptions' lookups with `feed`'s (the collection's own
    /// rule, when its feed is on) folded in: per distinct (measure, score)
    /// the lowest threshold.
    fn lookups_with(&self, feed: Option<(Measure, Score, f64)>) -> Vec<(Measure, Score, f64)> {
        let mut lookups = self.lookups.clone();
        if let Some((measure, score, threshold)) = feed {
            match lookups
                .iter_mut()
                .find(|(m, sc, _)| *m == measure && *sc == score)
            {
                Some(l) => l.2 = l.2.min(threshold),
                None => lookups.push((measure, score, threshold)),
            }
        }
        lookups
    }

    fn wants(&self, kind: EventKind) -> bool {
        self.subscriptions.iter().any(|s| s.kinds.contains(&kind))
    }
}

/// Events of one node: the subscription cache, the wake-up of the
/// delivery loop, and the production of events after writes.
pub struct EventHub {
    /// Collection id → its rules, with the ticket of the read that made
    /// them. Read per write; written on a change.
    rules: RwLock<HashMap<u64, (u64, Arc<Rules>)>>,
    /// Taken by every re-read before it reads: a slower read that started
    /// earlier (the delivery loop's) never replaces a newer one (a change's
    /// own re-read) in the cache.
    tickets: std::sync::atomic::AtomicU64,
    /// Woken when this node appended events (the delivery loop waits on it
    /// between polls).
    pub appended: Notify,
    /// Serializes this node's subscription changes (the count limit).
    pub changes: tokio::sync::Mutex<()>,
    /// `events.max_matches`.
    max_matches: usize,
    metrics: Arc<Metrics>,
}

/// An engine match as an event carries it.
pub fn event_match(m: &Match) -> EventMatch {
    EventMatch {
        id: m.id.to_string(),
        jaccard: m.jaccard,
        query_in_stored: m.query_in_stored,
        stored_in_query: m.stored_in_query,
        content_jaccard: m.content.as_ref().map(|c| c.jaccard),
    }
}

impl EventHub {
    pub fn new(max_matches: usize, metrics: Arc<Metrics>) -> Self {
        Self {
            rules: RwLock::new(HashMap::new()),
            tickets: std::sync::atomic::AtomicU64::new(0),
            appended: Notify::new(),
            changes: tokio::sync::Mutex::new(()),
            max_matches,
            metrics,
        }
    }

    /// `coll`'s rules, read through the backend on the first call.
    pub async fn rules(&self, coll: &Collection) -> Result<Arc<Rules>, BackendError> {
        if let Some((_, r)) = self.rules.read().expect("rules lock").get(&coll.id) {
            return Ok(Arc::clone(r));
        }
        self.refresh(coll).await
    }

    /// Re-read `coll`'s subscriptions (after this node changed them, and
    /// at every poll of the delivery loop for other nodes' changes).
    pub async fn refresh(&self, coll: &Collection) -> Result<Arc<Rules>, BackendError> {
        let Some(backend) = coll.backend() else {
            return Ok(Arc::default());
        };
        let ticket = self
            .tickets
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let subs = backend.subscriptions(coll.dir()).await?;
        let rules = Arc::new(Rules::new(subs));
        let mut cache = self.rules.write().expect("rules lock");
        match cache.get(&coll.id) {
            // A read that started later is already there: it is newer.
            Some((newer, current)) if *newer > ticket => Ok(Arc::clone(current)),
            _ => {
                cache.insert(coll.id, (ticket, Arc::clone(&rules)));
                Ok(rules)
            }
        }
    }

    /// Drop the cache of collections no longer served (`alive`: their ids).
    pub fn retain(&self, alive: &[u64]) {
        self.rules
            .write()
            .expect("rules lock")
            .retain(|id, _| alive.contains(id));
    }

    /// After acknowledged writes of `coll` (`(id, "created"|"replaced")`):
    /// append a `document.duplicate` event for each one a subscription
    /// selects. Never fails: see the module docs.
    pub async fn after_writes(&self, coll: &Collection, written: &[(DocId, &'static str)]) {
        let rules = match self.rules(coll).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(collection = %coll.name, error = %e, "reading the webhook subscriptions failed; the writes' events are lost");
                self.metrics.observe_events_lost(written.len());
                return;
            }
        };
        // The collection's own feed rule, read from its settings at every
        // write, so a change (`PATCH` here, the catalog on other nodes)
        // applies from the next write.
        let feed = self.feed_rule(coll);
        let lookups = rules.lookups_with(feed);
        if lookups.is_empty() {
            return;
        }
        let Some(backend) = coll.backend() else {
            return;
        };
        let now = crate::events::now_ms();
        let mut drafts = Vec::new();
        for (id, write) in written {
            // Documents stored after this one are not what it duplicates
            // (two near-duplicates written at once would each name the
            // other): only matches at or before its own time count.
            let own_ms = match backend.get(id.as_str()).await {
                Ok(Some(r)) => r.created_ms(),
                // Deleted meanwhile: nothing to say of it.
                Ok(None) => continue,
                Err(e) => {
                    tracing::error!(collection = %coll.name, document = %id, error = %e, "reading a write back for its event failed; the event is lost");
                    self.metrics.observe_events_lost(1);
                    continue;
                }
            };
            let mut matches: Vec<EventMatch> = Vec::new();
            for &(measure, score, threshold) in &lookups {
                let Ok(t) = coll.recipe().threshold_for(measure, score, Some(threshold)) else {
                    continue;
                };
                let q = Query::new(t, self.max_matches)
                    .measure(measure)
                    .score(score);
                match backend.similar_to_id(id.as_str(), &q).await {
                    Ok(found) => {
                        for m in found.matches.iter().filter(|m| m.created_ms <= own_ms) {
                            if !matches.iter().any(|x| x.id == m.id.as_str()) {
                                matches.push(event_match(m));
                            }
                        }
                    }
                    // Deleted or replaced meanwhile: nothing to say of it.
                    Err(BackendError::Engine(crate::engine::EngineError::NotFound(_))) => {}
                    Err(e) => {
                        tracing::error!(collection = %coll.name, document = %id, error = %e, "looking up a write's matches for its event failed; the event is lost");
                        self.metrics.observe_events_lost(1);
                    }
                }
            }
            let draft = EventDraft {
                kind: EventKind::Duplicate,
                time_ms: now,
                document: id.to_string(),
                write: (*write).to_owned(),
                matches,
            };
            let fed = feed.is_some_and(|(measure, score, threshold)| {
                draft
                    .matches
                    .iter()
                    .any(|m| m.value(measure, score).is_some_and(|v| v >= threshold))
            });
            if fed
                || rules
                    .subscriptions
                    .iter()
                    .any(|s| s.selects(&draft).is_some())
            {
                drafts.push(draft);
            }
        }
        self.append(coll, drafts).await;
    }

    /// `coll`'s `events` setting as a lookup, when its feed is on: the
    /// threshold resolved against its recipe (`null`: its own for the
    /// measure and score). A setting the recipe no longer serves (a
    /// `content` score after boilerplate detection went off) produces
    /// nothing, logged.
    fn feed_rule(&self, coll: &Collection) -> Option<(Measure, Score, f64)> {
        let e = coll.events();
        if !e.feed {
            return None;
        }
        match coll.recipe().threshold_for(e.measure, e.score, e.threshold) {
            Ok(t) => Some((e.measure, e.score, t.value())),
            Err(err) => {
                tracing::warn!(collection = %coll.name, error = %err, "the events feed's threshold does not apply to this collection; no feed events");
                None
            }
        }
    }

    /// After `if_unique` refused `id` for the stored `matches`.
    pub async fn after_refusal(&self, coll: &Collection, id: &DocId, matches: &[Match]) {
        let fed = coll.events().feed;
        match self.rules(coll).await {
            Ok(r) if !fed && !r.wants(EventKind::Refused) => return,
            Ok(_) => {}
            Err(e) => {
                tracing::error!(collection = %coll.name, error = %e, "reading the webhook subscriptions failed; the refusal's event is lost");
                self.metrics.observe_events_lost(1);
                return;
            }
        }
        let draft = EventDraft {
            kind: EventKind::Refused,
            time_ms: crate::events::now_ms(),
            document: id.to_string(),
            write: "refused".into(),
            matches: matches
                .iter()
                .take(self.max_matches)
                .map(event_match)
                .collect(),
        };
        self.append(coll, vec![draft]).await;
    }

    async fn append(&self, coll: &Collection, drafts: Vec<EventDraft>) {
        if drafts.is_empty() {
            return;
        }
        let Some(backend) = coll.backend() else {
            return;
        };
        let n = drafts.len();
        let kinds: Vec<EventKind> = drafts.iter().map(|d| d.kind).collect();
        match backend.append_events(coll.dir(), drafts).await {
            Ok(_) => {
                for k in kinds {
                    self.metrics
                        .observe_events(coll.name.as_str(), k.as_str(), 1);
                }
                self.appended.notify_one();
            }
            Err(e) => {
                tracing::error!(collection = %coll.name, events = n, error = %e, "appending events failed; the writes were acknowledged, their events are lost");
                self.metrics.observe_events_lost(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_feed_rule_joins_the_subscriptions_lookups_at_the_lowest_threshold() {
        let sub = |id: &str, measure, threshold| Subscription {
            id: id.into(),
            url: "https://hooks.example.com/a".into(),
            secret: "whsec_x".into(),
            kinds: vec![EventKind::Duplicate],
            measure,
            score: Score::Raw,
            threshold,
            created_ms: 0,
        };
        let rules = Rules::new(vec![
            sub("a", Measure::Jaccard, 0.9),
            sub("b", Measure::Containment, 0.8),
        ]);
        assert_eq!(
            rules.lookups_with(Some((Measure::Jaccard, Score::Raw, 0.7))),
            vec![
                (Measure::Jaccard, Score::Raw, 0.7),
                (Measure::Containment, Score::Raw, 0.8)
            ]
        );
        assert_eq!(
            rules.lookups_with(Some((Measure::QueryInStored, Score::Raw, 0.95))),
            vec![
                (Measure::Jaccard, Score::Raw, 0.9),
                (Measure::Containment, Score::Raw, 0.8),
                (Measure::QueryInStored, Score::Raw, 0.95)
            ]
        );
        assert_eq!(rules.lookups_with(None), rules.lookups);
        assert_eq!(
            Rules::new(Vec::new()).lookups_with(Some((Measure::Jaccard, Score::Raw, 0.8))),
            vec![(Measure::Jaccard, Score::Raw, 0.8)]
        );
    }
}
