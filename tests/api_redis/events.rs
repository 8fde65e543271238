//! The event log, webhook subscriptions and deliveries on the redis
//! backend (issue 45; docs/redis-layout.md, "Events and webhooks"),
//! driven through `Backend` on the shared Redis Cluster: several handles
//! ("nodes": a connection and a consumer name each) on one collection.
//! The clock is the tests' own (`now_ms` is an argument of every call that
//! schedules), so leases and retries are checked without sleeping.

use crate::helpers::shared_cluster;
use neardup::backend::redis::{DeliveryTiming, Redis, RedisIndex, FAILED_KEPT};
use neardup::backend::{Backend, BackendError, SharedCatalog};
use neardup::config::RedisSettings;
use neardup::engine::{Engine, EngineError, EngineParams, Measure, Score};
use neardup::events::{
    Attempt, Delivery, Event, EventDraft, EventKind, EventMatch, Subscription, SubscriptionPut,
};
use std::collections::{BTreeSet, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Small leases: a take is due again `base · 2^(take − 1) + timeout` ms later.
/// `webhooks.max_subscriptions` in these tests.
const MAX: usize = 100;

const TIMING: DeliveryTiming = DeliveryTiming {
    backoff_base_ms: 200,
    backoff_max_ms: 5_000,
    timeout_ms: 100,
};

fn lease(take: u32) -> u64 {
    (TIMING.backoff_base_ms << (take - 1)).min(TIMING.backoff_max_ms) + TIMING.timeout_ms
}

fn dir() -> &'static Path {
    Path::new("")
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn fresh_prefix() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "events-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn settings(prefix: &str) -> RedisSettings {
    RedisSettings {
        nodes: shared_cluster().urls(),
        key_prefix: prefix.to_owned(),
        expected_documents: 2_000,
        watch_interval_ms: 100,
        command_timeout_ms: 2_000,
        ..Default::default()
    }
}

fn engine() -> Arc<Engine> {
    Arc::new(Engine::new(EngineParams::default().validate().unwrap()))
}

/// A node's handle on collection `name` under `prefix` (its own
/// connection).
async fn node(prefix: &str, name: &str) -> Backend {
    let redis = Arc::new(Redis::new(settings(prefix)));
    let index = RedisIndex::open(engine(), redis, name).await.unwrap();
    index.set_delivery_timing(TIMING);
    Backend::Redis(index)
}

/// Two nodes' handles on the `default` collection under `prefix`.
async fn two_nodes(prefix: &str) -> (Backend, Backend) {
    (node(prefix, "default").await, node(prefix, "default").await)
}

fn index(b: &Backend) -> &RedisIndex {
    match b {
        Backend::Redis(r) => r,
        Backend::Memory(_) => unreachable!("these tests open redis backends"),
    }
}

/// A duplicate of `doc` matching `stored` at Jaccard `j` (tests use
/// binary fractions: serde_json without `float_roundtrip` may read a
/// float back one ulp off, e.g. 0.9500000000000001 as 0.95).
fn draft(doc: &str, stored: &str, j: f64) -> EventDraft {
    EventDraft {
        kind: EventKind::Duplicate,
        time_ms: wall_ms(),
        document: doc.to_owned(),
        write: "created".into(),
        matches: vec![EventMatch {
            id: stored.to_owned(),
            jaccard: j,
            query_in_stored: (j + 0.0625).min(1.0),
            stored_in_query: j,
            content_jaccard: None,
        }],
    }
}

fn refused(doc: &str, stored: &str) -> EventDraft {
    EventDraft {
        kind: EventKind::Refused,
        write: "refused".into(),
        ..draft(doc, stored, 0.9375)
    }
}

/// Drafts with real text in their ids: French, German, Russian, Chinese.
fn drafts(n: usize) -> Vec<EventDraft> {
    let names = [
        "café-crème",
        "Straße-Ärger",
        "Москва-отчёт",
        "北京-报告",
        "“quoted”-£",
    ];
    (0..n)
        .map(|i| {
            draft(
                &format!("{}-{i}", names[i % names.len()]),
                "original’s",
                0.875,
            )
        })
        .collect()
}

fn subscription(id: &str, kinds: &[EventKind], threshold: f64) -> Subscription {
    Subscription {
        id: id.to_owned(),
        url: "https://hooks.example.com/neardup".into(),
        secret: "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0".into(),
        kinds: kinds.to_vec(),
        measure: Measure::Jaccard,
        score: Score::Raw,
        threshold,
        created_ms: wall_ms(),
    }
}

fn every_kind(id: &str) -> Subscription {
    subscription(id, &EventKind::ALL, 0.5)
}

fn ids(ds: &[Delivery]) -> Vec<String> {
    ds.iter().map(|d| d.event.id.clone()).collect()
}

fn event_ids(es: &[Event]) -> Vec<String> {
    es.iter().map(|e| e.id.clone()).collect()
}

async fn exists(b: &Backend, key: &str) -> bool {
    let mut cmd = redis::cmd("EXISTS");
    cmd.arg(key);
    let n: i64 = index(b).redis().one("test", cmd).await.unwrap();
    n == 1
}

async fn stream_len(b: &Backend) -> i64 {
    let mut cmd = redis::cmd("XLEN");
    cmd.arg(index(b).keys().events());
    index(b).redis().one("test", cmd).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_pages_by_cursor_from_any_node_and_names_the_oldest() {
    let prefix = fresh_prefix();
    let (a, b) = two_nodes(&prefix).await;
    let empty = b.read_events(dir(), None, 10).await.unwrap();
    assert!(empty.events.is_empty());
    assert_eq!((empty.next, empty.oldest), (None, None));

    let mut written = a.append_events(dir(), drafts(3)).await.unwrap();
    written.extend(a.append_events(dir(), drafts(4)).await.unwrap());
    assert_eq!(written.len(), 7);
    assert_eq!(a.append_events(dir(), Vec::new()).await.unwrap(), vec![]);
    let unique: HashSet<&str> = written.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(unique.len(), 7);
    assert!(written.iter().all(|e| e.id.starts_with("evt_")));

    // Paged on the other node, 3 at a time: the same events, in order.
    let mut read = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = b.read_events(dir(), after.as_deref(), 3).await.unwrap();
        assert_eq!(page.oldest.as_deref(), Some(written[0].cursor.as_str()));
        if page.events.is_empty() {
            assert_eq!(page.next, after, "an empty page gives the cursor back");
            break;
        }
        assert!(page.events.len() <= 3);
        assert_eq!(
            page.next.as_deref(),
            Some(page.events.last().unwrap().cursor.as_str())
        );
        after = page.next.clone();
        read.extend(page.events);
    }
    assert_eq!(read, written, "the feed holds exactly what was appended");
    let all = b.read_events(dir(), None, usize::MAX).await.unwrap();
    assert_eq!(all.events, written);
    // Strictly after: from the 4th cursor, the 5th on.
    let page = b
        .read_events(dir(), Some(&written[3].cursor), 100)
        .await
        .unwrap();
    assert_eq!(event_ids(&page.events), event_ids(&written[4..]));
    // A cursor of the far future is well-formed and past everything.
    let page = b
        .read_events(dir(), Some("99999999999999-18446744073709551615"), 5)
        .await
        .unwrap();
    assert!(page.events.is_empty());
    // A limit of 0 reads nothing and keeps the cursor.
    let page = b
        .read_events(dir(), Some(&written[1].cursor), 0)
        .await
        .unwrap();
    assert!(page.events.is_empty());
    assert_eq!(page.next.as_deref(), Some(written[1].cursor.as_str()));

    for bad in [
        "",
        "abc",
        "12",
        "1-2-3",
        "-1-2",
        "évènement",
        "1-x",
        "1 -2",
        "0x10-0",
    ] {
        match b.read_events(dir(), Some(bad), 5).await {
            Err(BackendError::Engine(EngineError::InvalidCursor(_))) => {}
            other => panic!("cursor {bad:?}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_storing_at_once_never_pass_the_subscription_limit() {
    let prefix = fresh_prefix();
    let (a, b) = two_nodes(&prefix).await;
    let limit = 5;
    // Each node stores five new subscriptions, all at once.
    let puts = (0..10).map(|i| {
        let node = if i % 2 == 0 { &a } else { &b };
        node.put_subscription(dir(), every_kind(&format!("wh_{i}")), limit)
    });
    let outcomes: Vec<SubscriptionPut> = futures_util::future::join_all(puts)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let created = outcomes
        .iter()
        .filter(|&&o| o == SubscriptionPut::Created)
        .count();
    assert_eq!(created, limit, "{outcomes:?}");
    assert_eq!(
        outcomes
            .iter()
            .filter(|&&o| o == SubscriptionPut::Full)
            .count(),
        10 - limit
    );
    let stored = a.subscriptions(dir()).await.unwrap();
    assert_eq!(stored.len(), limit);
    // At the limit, a stored one can still be replaced, and a new one
    // fits once one is deleted.
    let mut changed = stored[0].clone();
    changed.threshold = 0.95;
    assert_eq!(
        b.put_subscription(dir(), changed, limit).await.unwrap(),
        SubscriptionPut::Replaced
    );
    assert_eq!(
        a.put_subscription(dir(), every_kind("wh_new"), limit)
            .await
            .unwrap(),
        SubscriptionPut::Full
    );
    assert!(b.delete_subscription(dir(), &stored[1].id).await.unwrap());
    assert_eq!(
        a.put_subscription(dir(), every_kind("wh_new"), limit)
            .await
            .unwrap(),
        SubscriptionPut::Created
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_receives_only_events_appended_after_it() {
    let prefix = fresh_prefix();
    let a = node(&prefix, "default").await;
    a.append_events(dir(), drafts(3)).await.unwrap();
    let sub = every_kind("wh_après");
    assert_eq!(
        a.put_subscription(dir(), sub.clone(), MAX).await.unwrap(),
        SubscriptionPut::Created
    );
    let later = a.append_events(dir(), drafts(2)).await.unwrap();
    // Storing it again (a change) is not new and keeps its position.
    let mut changed = sub.clone();
    changed.url = "https://hooks.example.com/другой".into();
    assert_eq!(
        a.put_subscription(dir(), changed.clone(), MAX)
            .await
            .unwrap(),
        SubscriptionPut::Replaced
    );
    assert_eq!(a.subscriptions(dir()).await.unwrap(), vec![changed.clone()]);
    let now = wall_ms();
    assert_eq!(a.pending_deliveries(dir(), &sub.id).await.unwrap(), 2);
    let due = a
        .due_deliveries(dir(), &changed, "n1", now, usize::MAX)
        .await
        .unwrap();
    assert_eq!(ids(&due), event_ids(&later));
    assert!(due.iter().all(|d| d.attempts == 0));
    // The full event: cursor and draft as appended.
    assert_eq!(
        due.iter().map(|d| d.event.clone()).collect::<Vec<_>>(),
        later
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_taking_at_once_get_disjoint_deliveries_and_together_all() {
    let prefix = fresh_prefix();
    let (a, b) = two_nodes(&prefix).await;
    let sub = every_kind("wh_shared");
    a.put_subscription(dir(), sub.clone(), MAX).await.unwrap();
    let written = a.append_events(dir(), drafts(60)).await.unwrap();
    let now = wall_ms();
    async fn drain(b: &Backend, sub: &Subscription, consumer: &str, now: u64) -> Vec<Delivery> {
        let mut got = Vec::new();
        loop {
            let due = b
                .due_deliveries(dir(), sub, consumer, now, 7)
                .await
                .unwrap();
            if due.is_empty() {
                return got;
            }
            for d in &due {
                b.settle(dir(), sub, d, Attempt::Delivered).await.unwrap();
            }
            got.extend(due);
        }
    }
    let (x, y) = tokio::join!(
        drain(&a, &sub, "node-a", now),
        drain(&b, &sub, "node-b", now)
    );
    let xs: BTreeSet<String> = ids(&x).into_iter().collect();
    let ys: BTreeSet<String> = ids(&y).into_iter().collect();
    assert_eq!(xs.len(), x.len(), "no event twice to one node");
    assert_eq!(ys.len(), y.len());
    assert!(xs.is_disjoint(&ys), "an event delivered by both nodes");
    let all: BTreeSet<String> = xs.union(&ys).cloned().collect();
    assert_eq!(all, event_ids(&written).into_iter().collect());
    assert_eq!(a.pending_deliveries(dir(), &sub.id).await.unwrap(), 0);
    // Settled: not due again, even long after every lease.
    let later = now + 3_600_000;
    assert!(b
        .due_deliveries(dir(), &sub, "node-b", later, 100)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_nodes_deliveries_are_taken_over_after_their_lease_with_the_same_events() {
    let prefix = fresh_prefix();
    let (a, b) = two_nodes(&prefix).await;
    let sub = every_kind("wh_takeover");
    a.put_subscription(dir(), sub.clone(), MAX).await.unwrap();
    let written = a.append_events(dir(), drafts(3)).await.unwrap();
    let t0 = wall_ms();
    // Node a takes them and dies before settling.
    let held = a
        .due_deliveries(dir(), &sub, "node-a", t0, 10)
        .await
        .unwrap();
    assert_eq!(ids(&held), event_ids(&written));
    assert_eq!(a.pending_deliveries(dir(), &sub.id).await.unwrap(), 3);
    // Within the lease, nobody else gets them.
    let early = b
        .due_deliveries(dir(), &sub, "node-b", t0 + lease(1) - 1, 10)
        .await
        .unwrap();
    assert!(early.is_empty(), "{:?}", ids(&early));
    // After it, node b gets the same events, one attempt counted.
    let taken = b
        .due_deliveries(dir(), &sub, "node-b", t0 + lease(1), 10)
        .await
        .unwrap();
    assert_eq!(ids(&taken), event_ids(&written));
    assert!(taken.iter().all(|d| d.attempts == 1), "{taken:?}");
    for (d, e) in taken.iter().zip(&written) {
        assert_eq!(&d.event, e);
        assert_eq!(d.event.webhook_id(&sub.id), e.webhook_id(&sub.id));
    }
    // Node a comes back late and settles its stale takes: no effect (node
    // b holds them now).
    a.settle(dir(), &sub, &held[0], Attempt::Delivered)
        .await
        .unwrap();
    a.settle(
        dir(),
        &sub,
        &held[1],
        Attempt::Failed {
            error: "HTTP 500".into(),
        },
    )
    .await
    .unwrap();
    assert!(a
        .failed_deliveries(dir(), &sub.id, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(a.pending_deliveries(dir(), &sub.id).await.unwrap(), 3);
    // Node b dies too: the second lease is longer (backoff of take 2).
    let t1 = t0 + lease(1);
    assert!(a
        .due_deliveries(dir(), &sub, "node-a", t1 + lease(2) - 1, 10)
        .await
        .unwrap()
        .is_empty());
    let again = a
        .due_deliveries(dir(), &sub, "node-a", t1 + lease(2), 10)
        .await
        .unwrap();
    assert_eq!(ids(&again), event_ids(&written));
    assert!(again.iter().all(|d| d.attempts == 2));
    for d in &again {
        a.settle(dir(), &sub, d, Attempt::Delivered).await.unwrap();
    }
    assert_eq!(a.pending_deliveries(dir(), &sub.id).await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_wait_for_their_time_failures_are_listed_and_retried_by_hand() {
    let prefix = fresh_prefix();
    let (a, b) = two_nodes(&prefix).await;
    let sub = every_kind("wh_retry");
    a.put_subscription(dir(), sub.clone(), MAX).await.unwrap();
    let written = a.append_events(dir(), drafts(2)).await.unwrap();
    let t0 = wall_ms();
    let first = a
        .due_deliveries(dir(), &sub, "node-a", t0, 1)
        .await
        .unwrap();
    assert_eq!(ids(&first), vec![written[0].id.clone()]);
    let retry_at = t0 + 10_000;
    a.settle(
        dir(),
        &sub,
        &first[0],
        Attempt::Retry {
            next_ms: retry_at,
            error: "HTTP 503".into(),
        },
    )
    .await
    .unwrap();
    // Before its time only the second (new) event is due, on any node.
    let mid = b
        .due_deliveries(dir(), &sub, "node-b", retry_at - 1, 10)
        .await
        .unwrap();
    assert_eq!(ids(&mid), vec![written[1].id.clone()]);
    b.settle(dir(), &sub, &mid[0], Attempt::Delivered)
        .await
        .unwrap();
    // At its time: again, attempts 1, same event.
    let second = b
        .due_deliveries(dir(), &sub, "node-b", retry_at, 10)
        .await
        .unwrap();
    assert_eq!(ids(&second), vec![written[0].id.clone()]);
    assert_eq!(second[0].attempts, 1);
    b.settle(
        dir(),
        &sub,
        &second[0],
        Attempt::Failed {
            error: "connection refused".into(),
        },
    )
    .await
    .unwrap();
    // Failed: listed (with both attempts), not due, not pending.
    let failed = a.failed_deliveries(dir(), &sub.id, 10).await.unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].event, written[0]);
    assert_eq!(failed[0].attempts, 2);
    assert_eq!(failed[0].error, "connection refused");
    assert_eq!(a.pending_deliveries(dir(), &sub.id).await.unwrap(), 0);
    let far = retry_at + 3_600_000;
    assert!(a
        .due_deliveries(dir(), &sub, "node-a", far, 10)
        .await
        .unwrap()
        .is_empty());
    // A retry of an event that is not listed retries nothing.
    assert_eq!(
        a.retry_failed(dir(), &sub.id, Some("evt_none"))
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        a.retry_failed(dir(), &sub.id, Some(&written[0].id))
            .await
            .unwrap(),
        1
    );
    assert!(a
        .failed_deliveries(dir(), &sub.id, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(a.pending_deliveries(dir(), &sub.id).await.unwrap(), 1);
    // Due at once, attempts reset, the same event (and webhook-id).
    let t2 = retry_at + 1;
    let again = b
        .due_deliveries(dir(), &sub, "node-b", t2, 10)
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].event, written[0]);
    assert_eq!(again[0].attempts, 0);
    // Its lease works as any other: node b dies, node a takes it over.
    assert!(a
        .due_deliveries(dir(), &sub, "node-a", t2 + lease(1) - 1, 10)
        .await
        .unwrap()
        .is_empty());
    let over = a
        .due_deliveries(dir(), &sub, "node-a", t2 + lease(1), 10)
        .await
        .unwrap();
    assert_eq!(ids(&over), vec![written[0].id.clone()]);
    assert_eq!(over[0].attempts, 1);
    // Failing again lists it again; retrying everything brings it back.
    a.settle(
        dir(),
        &sub,
        &over[0],
        Attempt::Failed {
            error: "HTTP 500".into(),
        },
    )
    .await
    .unwrap();
    b.settle(dir(), &sub, &again[0], Attempt::Delivered)
        .await
        .unwrap(); // stale: no effect
    assert_eq!(
        a.failed_deliveries(dir(), &sub.id, 10).await.unwrap().len(),
        1
    );
    assert_eq!(a.retry_failed(dir(), &sub.id, None).await.unwrap(), 1);
    let last = a
        .due_deliveries(dir(), &sub, "node-a", t2, 10)
        .await
        .unwrap();
    assert_eq!(ids(&last), vec![written[0].id.clone()]);
    a.settle(dir(), &sub, &last[0], Attempt::Delivered)
        .await
        .unwrap();
    assert_eq!(a.pending_deliveries(dir(), &sub.id).await.unwrap(), 0);
    assert!(a
        .failed_deliveries(dir(), &sub.id, 10)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_failed_list_keeps_the_newest_and_is_read_newest_first() {
    let prefix = fresh_prefix();
    let a = node(&prefix, "default").await;
    let sub = every_kind("wh_bounded");
    a.put_subscription(dir(), sub.clone(), MAX).await.unwrap();
    let n = FAILED_KEPT + 5;
    let written = a.append_events(dir(), drafts(n)).await.unwrap();
    let now = wall_ms();
    let mut failed_order = Vec::new();
    loop {
        let due = a.due_deliveries(dir(), &sub, "n", now, 200).await.unwrap();
        if due.is_empty() {
            break;
        }
        for d in &due {
            a.settle(
                dir(),
                &sub,
                d,
                Attempt::Failed {
                    error: format!("HTTP 500 for {}", d.event.id),
                },
            )
            .await
            .unwrap();
            failed_order.push(d.event.id.clone());
        }
    }
    assert_eq!(failed_order, event_ids(&written));
    let dropped = index(&a)
        .redis()
        .counters
        .failed_dropped
        .load(Ordering::Relaxed);
    assert_eq!(dropped, 5, "the dropped are counted");
    let listed = a
        .failed_deliveries(dir(), &sub.id, usize::MAX)
        .await
        .unwrap();
    assert_eq!(listed.len(), FAILED_KEPT);
    let newest_first: Vec<String> = failed_order
        .iter()
        .rev()
        .take(FAILED_KEPT)
        .cloned()
        .collect();
    assert_eq!(
        listed
            .iter()
            .map(|f| f.event.id.clone())
            .collect::<Vec<_>>(),
        newest_first
    );
    let three = a.failed_deliveries(dir(), &sub.id, 3).await.unwrap();
    assert_eq!(three, listed[..3].to_vec());
    assert!(a
        .failed_deliveries(dir(), &sub.id, 0)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_a_subscription_does_not_select_are_settled_silently() {
    let prefix = fresh_prefix();
    let a = node(&prefix, "default").await;
    // Refusals only, and duplicates at Jaccard ≥ 0.95 only.
    let refusals = subscription("wh_refusals", &[EventKind::Refused], 0.5);
    let strict = subscription("wh_strict", &[EventKind::Duplicate], 0.95);
    a.put_subscription(dir(), refusals.clone(), MAX)
        .await
        .unwrap();
    a.put_subscription(dir(), strict.clone(), MAX)
        .await
        .unwrap();
    let written = a
        .append_events(
            dir(),
            vec![
                draft("Zürich-1", "Zürich-0", 0.75),
                refused("Ελλάδα-1", "Ελλάδα-0"),
                draft("東京-1", "東京-0", 0.96875),
                draft("Kyiv-1", "Kyiv-0", 0.625),
                refused("Montréal-1", "Montréal-0"),
            ],
        )
        .await
        .unwrap();
    let now = wall_ms();
    // A take of 1 at a time still finds the selected ones beyond the
    // unselected.
    let mut got = Vec::new();
    loop {
        let due = a
            .due_deliveries(dir(), &refusals, "n", now, 1)
            .await
            .unwrap();
        if due.is_empty() {
            break;
        }
        assert_eq!(due.len(), 1);
        a.settle(dir(), &refusals, &due[0], Attempt::Delivered)
            .await
            .unwrap();
        got.extend(ids(&due));
    }
    assert_eq!(got, vec![written[1].id.clone(), written[4].id.clone()]);
    let due = a
        .due_deliveries(dir(), &strict, "n", now, 10)
        .await
        .unwrap();
    assert_eq!(ids(&due), vec![written[2].id.clone()]);
    a.settle(dir(), &strict, &due[0], Attempt::Delivered)
        .await
        .unwrap();
    for s in [&refusals, &strict] {
        assert_eq!(
            a.pending_deliveries(dir(), &s.id).await.unwrap(),
            0,
            "{}",
            s.id
        );
        let later = now + 3_600_000;
        assert!(a
            .due_deliveries(dir(), s, "n", later, 10)
            .await
            .unwrap()
            .is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_subscription_removes_its_group_and_delivery_state() {
    let prefix = fresh_prefix();
    let (a, b) = two_nodes(&prefix).await;
    let sub = every_kind("wh_gone");
    let other = every_kind("wh_stays");
    a.put_subscription(dir(), sub.clone(), MAX).await.unwrap();
    a.put_subscription(dir(), other.clone(), MAX).await.unwrap();
    a.append_events(dir(), drafts(4)).await.unwrap();
    let now = wall_ms();
    // One failed, one failed and retried by hand, one to retry later, one
    // unread.
    let due = a.due_deliveries(dir(), &sub, "n", now, 3).await.unwrap();
    a.settle(
        dir(),
        &sub,
        &due[0],
        Attempt::Failed {
            error: "HTTP 410".into(),
        },
    )
    .await
    .unwrap();
    a.settle(
        dir(),
        &sub,
        &due[1],
        Attempt::Failed {
            error: "HTTP 410".into(),
        },
    )
    .await
    .unwrap();
    a.retry_failed(dir(), &sub.id, Some(&due[1].event.id))
        .await
        .unwrap();
    a.settle(
        dir(),
        &sub,
        &due[2],
        Attempt::Retry {
            next_ms: now + 60_000,
            error: "timeout".into(),
        },
    )
    .await
    .unwrap();
    let keys = index(&a).keys().clone();
    let state = [
        keys.event_due(&sub.id),
        keys.event_retries(&sub.id),
        keys.event_retry_takes(&sub.id),
        keys.event_failed(&sub.id),
    ];
    for k in &state {
        assert!(exists(&a, k).await, "{k} before the delete");
    }
    assert!(b.delete_subscription(dir(), &sub.id).await.unwrap());
    assert!(!b.delete_subscription(dir(), &sub.id).await.unwrap());
    for k in &state {
        assert!(!exists(&a, k).await, "{k} after the delete");
    }
    let mut groups = redis::cmd("XINFO");
    groups.arg("GROUPS").arg(keys.events());
    let groups: Vec<redis::Value> = index(&a).redis().one("test", groups).await.unwrap();
    assert_eq!(
        groups.len(),
        1,
        "only the other subscription's group is left"
    );
    assert_eq!(a.subscriptions(dir()).await.unwrap(), vec![other.clone()]);
    // The deleted one has nothing due or pending (and no error), the
    // other still everything.
    let later = now + 3_600_000;
    assert!(a
        .due_deliveries(dir(), &sub, "n", later, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(a.pending_deliveries(dir(), &sub.id).await.unwrap(), 0);
    assert!(a
        .failed_deliveries(dir(), &sub.id, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(a.pending_deliveries(dir(), &other.id).await.unwrap(), 4);
    // Created again under the same id: a new subscription, only later events.
    assert_eq!(
        a.put_subscription(dir(), sub.clone(), MAX).await.unwrap(),
        SubscriptionPut::Created
    );
    assert_eq!(a.pending_deliveries(dir(), &sub.id).await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trimming_drops_old_events_but_never_one_a_subscription_owes() {
    let prefix = fresh_prefix();
    let a = node(&prefix, "default").await;
    let written = a.append_events(dir(), drafts(6)).await.unwrap();
    let now = wall_ms() + 1;
    // Without subscriptions: by count, the newest kept; by age, nothing
    // younger than keep_ms goes.
    assert_eq!(a.trim_events(dir(), 3_600_000, 100, now).await.unwrap(), 0);
    assert_eq!(a.trim_events(dir(), 3_600_000, 4, now).await.unwrap(), 2);
    let page = a.read_events(dir(), None, 100).await.unwrap();
    assert_eq!(page.events, written[2..].to_vec());
    assert_eq!(page.oldest.as_deref(), Some(written[2].cursor.as_str()));

    let sub = every_kind("wh_owed");
    a.put_subscription(dir(), sub.clone(), MAX).await.unwrap();
    let owed = a.append_events(dir(), drafts(5)).await.unwrap();
    let t = wall_ms() + 1;
    // Delivered the first two, the third taken and not settled, the
    // last two unread.
    let due = a.due_deliveries(dir(), &sub, "n", t, 3).await.unwrap();
    assert_eq!(ids(&due), event_ids(&owed[..3]));
    for d in &due[..2] {
        a.settle(dir(), &sub, d, Attempt::Delivered).await.unwrap();
    }
    // Everything is old enough and over the count: only what is owed stays.
    let dropped = a.trim_events(dir(), 0, 0, t + 10).await.unwrap();
    assert_eq!(dropped, 4 + 2);
    let page = a.read_events(dir(), None, 100).await.unwrap();
    assert_eq!(page.events, owed[2..].to_vec());
    // A retry scheduled for later is still owed.
    a.settle(
        dir(),
        &sub,
        &due[2],
        Attempt::Retry {
            next_ms: t + 60_000,
            error: "HTTP 502".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(a.trim_events(dir(), 0, 0, t + 10).await.unwrap(), 0);
    // Failed: the failed list keeps its own copy; the log may drop it.
    let again = a
        .due_deliveries(dir(), &sub, "n", t + 60_000, 10)
        .await
        .unwrap();
    assert_eq!(ids(&again), event_ids(&owed[2..]));
    for d in &again {
        a.settle(
            dir(),
            &sub,
            d,
            Attempt::Failed {
                error: "HTTP 500".into(),
            },
        )
        .await
        .unwrap();
    }
    assert_eq!(a.trim_events(dir(), 0, 0, t + 10).await.unwrap(), 3);
    assert_eq!(stream_len(&a).await, 0);
    let page = a
        .read_events(dir(), Some(&owed[1].cursor), 10)
        .await
        .unwrap();
    assert!(page.events.is_empty());
    assert_eq!(page.oldest, None);
    assert_eq!(a.retry_failed(dir(), &sub.id, None).await.unwrap(), 3);
    let retried = a
        .due_deliveries(dir(), &sub, "n", t + 60_000, 10)
        .await
        .unwrap();
    let mut got = ids(&retried);
    got.sort();
    let mut want = event_ids(&owed[2..]);
    want.sort();
    assert_eq!(got, want, "retried by hand from the failed list's copies");
    // New events after a full trim keep increasing cursors.
    let more = a.append_events(dir(), drafts(1)).await.unwrap();
    assert!(cursor_key(&more[0].cursor) > cursor_key(&owed[4].cursor));
}

fn cursor_key(c: &str) -> (u64, u64) {
    let (ms, seq) = c.split_once('-').unwrap();
    (ms.parse().unwrap(), seq.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_handle_finds_the_same_log_subscriptions_and_pending_deliveries() {
    let prefix = fresh_prefix();
    let a = node(&prefix, "default").await;
    let sub = every_kind("wh_restart");
    a.put_subscription(dir(), sub.clone(), MAX).await.unwrap();
    let written = a.append_events(dir(), drafts(4)).await.unwrap();
    let t0 = wall_ms();
    let held = a
        .due_deliveries(dir(), &sub, "node-a", t0, 2)
        .await
        .unwrap();
    a.settle(
        dir(),
        &sub,
        &held[0],
        Attempt::Failed {
            error: "HTTP 500".into(),
        },
    )
    .await
    .unwrap();
    drop(a); // the node is gone (its connection too)

    let fresh = node(&prefix, "default").await;
    assert_eq!(fresh.subscriptions(dir()).await.unwrap(), vec![sub.clone()]);
    assert_eq!(
        fresh.read_events(dir(), None, 10).await.unwrap().events,
        written
    );
    assert_eq!(fresh.pending_deliveries(dir(), &sub.id).await.unwrap(), 3);
    assert_eq!(
        fresh.failed_deliveries(dir(), &sub.id, 10).await.unwrap()[0].event,
        written[0]
    );
    // The unread two at once; the one the old node held once its lease ends.
    let now = fresh
        .due_deliveries(dir(), &sub, "node-a", t0, 10)
        .await
        .unwrap();
    assert_eq!(ids(&now), event_ids(&written[2..]));
    for d in &now {
        fresh
            .settle(dir(), &sub, d, Attempt::Delivered)
            .await
            .unwrap();
    }
    let held_again = fresh
        .due_deliveries(dir(), &sub, "node-a", t0 + lease(1), 10)
        .await
        .unwrap();
    assert_eq!(ids(&held_again), vec![written[1].id.clone()]);
    assert_eq!(held_again[0].attempts, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reindex_carries_the_log_subscriptions_and_delivery_state_over() {
    let prefix = fresh_prefix();
    let catalog = SharedCatalog::new(settings(&prefix));
    let old = catalog
        .open(engine(), "noticias", "aaaaaaaaaaaa")
        .await
        .unwrap();
    old.set_delivery_timing(TIMING);
    let sub = every_kind("wh_carried");
    old.put_subscription(dir(), sub.clone(), MAX).await.unwrap();
    let written = old.append_events(dir(), drafts(4)).await.unwrap();
    let t0 = wall_ms();
    let due = old.due_deliveries(dir(), &sub, "n", t0, 3).await.unwrap();
    old.settle(dir(), &sub, &due[0], Attempt::Delivered)
        .await
        .unwrap();
    old.settle(
        dir(),
        &sub,
        &due[1],
        Attempt::Failed {
            error: "HTTP 404".into(),
        },
    )
    .await
    .unwrap();
    // due[2] held, written[3] unread.

    // While the reindex copies, subscription changes and hand retries wait
    // with the writes (503), so none is made on keys about to be left.
    old.set_paused(true);
    let refused = [
        old.put_subscription(dir(), every_kind("wh_late"), MAX)
            .await
            .err(),
        old.delete_subscription(dir(), &sub.id).await.err(),
        old.retry_failed(dir(), &sub.id, None).await.err(),
    ];
    for e in refused {
        assert!(
            matches!(e, Some(BackendError::Unavailable(_))),
            "refused while paused: {e:?}"
        );
    }
    // Deliveries go on (their outcomes are carried or made again).
    assert_eq!(old.pending_deliveries(dir(), &sub.id).await.unwrap(), 2);

    let new = catalog
        .open(engine(), "noticias", "bbbbbbbbbbbb")
        .await
        .unwrap();
    new.set_delivery_timing(TIMING);
    assert_eq!(old.carry_events_to(&new).await.unwrap(), 5);
    assert_eq!(new.subscriptions(dir()).await.unwrap(), vec![sub.clone()]);
    let page = new
        .read_events(dir(), Some(&written[0].cursor), 10)
        .await
        .unwrap();
    assert_eq!(page.events, written[1..].to_vec(), "the same cursors");
    assert_eq!(new.pending_deliveries(dir(), &sub.id).await.unwrap(), 2);
    assert_eq!(
        new.failed_deliveries(dir(), &sub.id, 10).await.unwrap()[0].event,
        written[1]
    );
    let unread = new.due_deliveries(dir(), &sub, "m", t0, 10).await.unwrap();
    assert_eq!(ids(&unread), vec![written[3].id.clone()]);
    new.settle(dir(), &sub, &unread[0], Attempt::Delivered)
        .await
        .unwrap();
    let held = new
        .due_deliveries(dir(), &sub, "m", t0 + lease(1), 10)
        .await
        .unwrap();
    assert_eq!(ids(&held), vec![written[2].id.clone()]);
    assert_eq!(held[0].attempts, 1);
    // New events continue the log after the carried ones.
    let more = new.append_events(dir(), drafts(1)).await.unwrap();
    assert!(cursor_key(&more[0].cursor) > cursor_key(&written[3].cursor));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_collection_removes_every_events_key() {
    let prefix = fresh_prefix();
    let catalog = SharedCatalog::new(settings(&prefix));
    let incarnation = "cccccccccccc";
    let c = catalog
        .open(engine(), "spiegel", incarnation)
        .await
        .unwrap();
    c.set_delivery_timing(TIMING);
    let sub = every_kind("wh_doomed");
    c.put_subscription(dir(), sub.clone(), MAX).await.unwrap();
    c.append_events(dir(), drafts(3)).await.unwrap();
    let now = wall_ms();
    let due = c.due_deliveries(dir(), &sub, "n", now, 3).await.unwrap();
    c.settle(
        dir(),
        &sub,
        &due[0],
        Attempt::Failed {
            error: "HTTP 500".into(),
        },
    )
    .await
    .unwrap();
    c.settle(
        dir(),
        &sub,
        &due[1],
        Attempt::Failed {
            error: "HTTP 500".into(),
        },
    )
    .await
    .unwrap();
    c.retry_failed(dir(), &sub.id, Some(&due[1].event.id))
        .await
        .unwrap();
    let keys = index(&c).keys().clone();
    let events_keys: Vec<String> = [
        keys.events(),
        keys.subscriptions(),
        keys.subscriptions_version(),
    ]
    .into_iter()
    .chain(keys.event_sub_keys(&sub.id))
    .collect();
    for k in &events_keys {
        assert!(exists(&c, k).await, "{k} before the delete");
    }
    catalog.remove_later("spiegel", incarnation, "a test's deleted collection");
    // Removed in the background after the write grace (a round trip's
    // timeout and a margin): wait for it, up to a bound.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut left = Vec::new();
        for k in &events_keys {
            if exists(&c, k).await {
                left.push(k.clone());
            }
        }
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still there: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
