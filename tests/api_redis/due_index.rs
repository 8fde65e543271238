//! The retention sweep on the redis backend reads the due index (records
//! by the minute they are due), not every record: its work follows what can
//! have expired, not the size of the collection. Records written without a
//! due entry (by a neardup from before the index) are found by each node's
//! first sweep, which walks every record once.

use crate::helpers::*;
use neardup::engine::ManualClock;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// A distinct non-ASCII text per `i` (news typography, accented names).
fn text(i: usize) -> String {
    format!(
        "Le conseil d’Élodie Müller № {i} a voté “oui” à {} contre {} pour la rénovation du quai — coût £{}",
        i * 7 % 101,
        i * 13 % 97,
        i * 31 % 1009
    )
}

async fn post_batch(app: &TestApp, docs: Vec<Value>) {
    for part in docs.chunks(500) {
        let resp = app
            .post_json("/documents/batch", &json!({ "documents": part }))
            .await;
        assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    }
}

/// `neardup_redis_commands_total` of one node.
async fn commands(app: &TestApp, base: &str) -> u64 {
    counter(app, base, "neardup_redis_commands_total").await
}

/// A counter of one node's `/metrics`.
async fn counter(app: &TestApp, base: &str, name: &str) -> u64 {
    let body = app
        .client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
}

async fn both_nodes_commands(app: &TestApp) -> u64 {
    commands(app, &app.base).await + commands(app, &app.read_base).await
}

async fn prefix(app: &TestApp) -> String {
    app.stats().await["storage"]["key_prefix"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Poll until the sweep has left `n` records in Redis and `/stats`
/// (through the reading node) counts `n` documents (at once: an expired
/// document is not counted, though its record waits for the sweep).
async fn wait_for_documents(app: &TestApp, n: u64, what: &str) {
    let prefix = prefix(app).await;
    for _ in 0..200 {
        let records = shared_cluster()
            .keys(&format!("{prefix}:default:r:*"))
            .unwrap()
            .len() as u64;
        if records == n && app.stats().await["documents"] == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "{what}: {} documents, not {n}",
        app.stats().await["documents"]
    );
}

/// Each node's first sweep (one purge interval, 1 s, after it starts) walks
/// every record; wait until both have, so the tests see the due index at work.
async fn let_the_first_walks_pass() {
    tokio::time::sleep(Duration::from_millis(2500)).await;
}

fn due_keys(prefix: &str, kind: &str) -> Vec<String> {
    shared_cluster()
        .keys(&format!("{{{prefix}:default}}:x:{kind}*"))
        .unwrap()
}

/// The due keys of `kind` once there are `n` of them (a sweep drops them
/// just after it deleted their records), or as they are after 5 s.
async fn due_keys_when(prefix: &str, kind: &str, n: usize) -> Vec<String> {
    for _ in 0..100 {
        let keys = due_keys(prefix, kind);
        if keys.len() == n {
            return keys;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    due_keys(prefix, kind)
}

#[tokio::test]
async fn a_sweep_reads_the_records_that_can_have_expired_not_every_record() {
    let clock = Arc::new(ManualClock::default());
    let mut settings = test_settings();
    settings.retention.ttl_secs = Some(3600);
    settings.storage.purge_interval_secs = 1;
    let app = spawn_app_with_clock(settings, clock.clone()).await;
    let prefix = prefix(&app).await;
    let_the_first_walks_pass().await;
    // 2,000 documents due an hour after their creation, 20 due in 5 minutes
    // by their own expiry.
    let mut docs: Vec<Value> = (0..2000)
        .map(|i| json!({"id": format!("d{i}"), "text": text(i)}))
        .collect();
    docs.extend(
        (0..20)
            .map(|i| json!({"id": format!("soon-{i}"), "text": text(5000 + i), "ttl_secs": 300})),
    );
    post_batch(&app, docs).await;
    assert_eq!(app.stats().await["documents"], 2020);
    assert_eq!(
        due_keys(&prefix, "e:").len(),
        1,
        "one minute of own expiries"
    );
    assert!(!due_keys(&prefix, "c:").is_empty());
    // Idle sweeps, both nodes, one a second each. The other commands in
    // these 3 s (the catalog watch, the document count) are ~140; one sweep
    // that read every record would send 2,020 reads on its own.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let before = both_nodes_commands(&app).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle = both_nodes_commands(&app).await - before;
    assert!(
        idle < 2020,
        "{idle} commands in 3 s of sweeps with nothing due"
    );
    // Own expiries due: those 20 go, and their bucket with them.
    clock.advance(Duration::from_secs(6 * 60));
    wait_for_documents(&app, 2000, "after the own expiries").await;
    assert_eq!(due_keys_when(&prefix, "e", 0).await, Vec::<String>::new());
    assert_problem(app.get("/documents/soon-3").await, 404).await;
    assert_eq!(app.get("/documents/d3").await.status(), 200);
    // A replaced document is due from its new creation, not its old one.
    clock.advance(Duration::from_secs(30 * 60));
    let resp = app
        .put_json("/documents/d7", &json!({"text": text(7000)}))
        .await;
    assert_eq!(resp.status(), 200);
    // The retention passes for the first 2,000: all go but the replaced
    // one, and every due key with them except the replaced one's minute.
    let trips = || async {
        let name = "neardup_redis_round_trips_total";
        counter(&app, &app.base, name).await + counter(&app, &app.read_base, name).await
    };
    let before = trips().await;
    clock.advance(Duration::from_secs(40 * 60));
    wait_for_documents(&app, 1, "after the retention").await;
    // The expired records go 500 a trip (and their entries in one more):
    // deleting them one by one took at least two trips each, 4,000 here.
    // The rest is each node's sweep every second and its other timers.
    let spent = trips().await - before;
    assert!(spent < 1000, "{spent} round trips to purge 2,000 documents");
    assert_eq!(app.get("/documents/d7").await.status(), 200);
    assert_problem(app.get("/documents/d8").await, 404).await;
    let records = shared_cluster()
        .keys(&format!("{prefix}:default:r:*"))
        .unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    // The old version of d7 is a stale member of the first minute's bucket,
    // dropped with the others: only the new version's bucket is left.
    let left = due_keys_when(&prefix, "c:", 1).await;
    assert_eq!(left.len(), 1, "{left:?}");
    let len = shared_cluster().command(&["STRLEN", &left[0]]).unwrap();
    assert_eq!(len.trim(), "12", "one member: d7's new version");
    // Past its own retention, d7 goes too, and the index is empty.
    clock.advance(Duration::from_secs(3600));
    wait_for_documents(&app, 0, "after d7's retention").await;
    assert_eq!(due_keys_when(&prefix, "", 0).await, Vec::<String>::new());
}

#[tokio::test]
async fn records_without_a_due_entry_are_found_by_a_new_nodes_first_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::default());
    let mut settings = test_settings();
    settings.storage.data_dir = dir.path().to_owned();
    settings.storage.purge_interval_secs = 1;
    let app = spawn_app_with_clock(settings.clone(), clock.clone()).await;
    let prefix = prefix(&app).await;
    let_the_first_walks_pass().await;
    let docs: Vec<Value> = (0..60)
        .map(|i| {
            let mut d = json!({"id": format!("n{i}"), "text": text(i)});
            if i % 2 == 0 {
                d["ttl_secs"] = json!(120);
            }
            d
        })
        .collect();
    post_batch(&app, docs).await;
    // As a neardup from before the due index would have left them.
    let mut del = vec!["DEL"];
    let keys = due_keys(&prefix, "");
    assert_eq!(keys.len(), 4, "a set and a bucket of each kind: {keys:?}");
    del.extend(keys.iter().map(String::as_str));
    assert_eq!(shared_cluster().command(&del).unwrap().trim(), "4");
    // Due, but the running nodes read the (empty) index: nothing goes.
    clock.advance(Duration::from_secs(300));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(app.stats().await["documents"], 60);
    // A node that starts walks every record at its first sweep: the 30
    // expired ones go and the 30 others are indexed.
    // (Its own data directory; the same key prefix, so the same data.)
    let mut third = on_redis(settings);
    let other_dir = tempfile::tempdir().unwrap();
    third.storage.data_dir = other_dir.path().to_owned();
    let node = spawn_app_with_clock(third, clock.clone()).await;
    wait_for_documents(&node, 30, "after the new node's walk").await;
    let buckets = due_keys(&prefix, "c:");
    assert_eq!(buckets.len(), 1, "{buckets:?}");
    let len = shared_cluster().command(&["STRLEN", &buckets[0]]).unwrap();
    assert_eq!(len.trim(), (30 * 12).to_string());
    assert_eq!(due_keys(&prefix, "e"), Vec::<String>::new());
}

#[tokio::test]
async fn a_due_bucket_keeps_its_live_members_while_the_others_expire() {
    use neardup::engine::Clock;
    let clock = Arc::new(ManualClock::default());
    let mut settings = test_settings();
    settings.storage.purge_interval_secs = 1;
    let app = spawn_app_with_clock(settings, clock.clone()).await;
    let prefix = prefix(&app).await;
    let_the_first_walks_pass().await;
    // One minute, ten minutes ahead: 10 documents expire at its 10th
    // second, 10 at its 40th; one due bucket holds all 20.
    let minute_ms = (clock.now_ms() / 60_000 + 10) * 60_000;
    let at = |secs: u64| neardup::http::dto::format_time(minute_ms + secs * 1000);
    let docs: Vec<Value> = (0..20)
        .map(|i| {
            let (name, secs) = if i < 10 { ("early", 10) } else { ("late", 40) };
            json!({"id": format!("{name}-{i}"), "text": text(i), "expires_at": at(secs)})
        })
        .collect();
    post_batch(&app, docs).await;
    let bucket = due_keys(&prefix, "e:");
    assert_eq!(bucket.len(), 1, "{bucket:?}");
    let strlen = || {
        shared_cluster()
            .command(&["STRLEN", &bucket[0]])
            .unwrap()
            .trim()
            .parse::<usize>()
            .unwrap()
    };
    assert_eq!(strlen(), 20 * 12);
    // Between the two: the early ones go; the late ones stay, and so do
    // their members (the bucket is rewritten, not dropped).
    clock.advance(Duration::from_millis(minute_ms + 20_000 - clock.now_ms()));
    wait_for_documents(&app, 10, "between the two expiries").await;
    for _ in 0..100 {
        if strlen() == 10 * 12 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(strlen(), 10 * 12);
    assert_eq!(app.get("/documents/late-15").await.status(), 200);
    assert_problem(app.get("/documents/early-5").await, 404).await;
    // After the second: the bucket and its set go.
    clock.advance(Duration::from_secs(30));
    wait_for_documents(&app, 0, "after both expiries").await;
    assert_eq!(due_keys_when(&prefix, "", 0).await, Vec::<String>::new());
}
