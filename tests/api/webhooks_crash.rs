//! Webhooks across a kill -9 (issue 45), on the memory backend: the real
//! binary (as `crash.rs` runs it) is killed with SIGKILL while its
//! receiver is down and events are undelivered; restarted with the
//! receiver up, it delivers every acknowledged duplicate write's event,
//! and none that was not written. The feed resumes from a cursor read
//! before the kill. Secrets never reach the server's log.

use crate::crash::start;
use crate::webhooks::{closed_port, near, Receiver, TEXTS};
use serde_json::{json, Value};
use std::collections::BTreeSet;

const ENV: &[(&str, &str)] = &[
    ("NEARDUP_WEBHOOKS__ALLOWED_HOSTS", "[\"127.0.0.1\"]"),
    ("NEARDUP_WEBHOOKS__BACKOFF_BASE_MS", "50"),
    ("NEARDUP_WEBHOOKS__BACKOFF_MAX_MS", "200"),
    ("NEARDUP_WEBHOOKS__MAX_ATTEMPTS", "100"),
    ("NEARDUP_WEBHOOKS__POLL_MS", "50"),
];

#[tokio::test]
async fn undelivered_events_of_acknowledged_writes_are_delivered_after_a_kill_9_and_none_is_invented(
) {
    let dir = tempfile::tempdir().unwrap();
    let port = closed_port();
    let server = start(dir.path(), ENV).await;
    let client = reqwest::Client::new();
    let url = |p: &str| format!("{}{p}", server.base);
    let resp = client
        .post(url("/webhooks"))
        .json(&json!({"url": format!("http://127.0.0.1:{port}/hook")}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let sub: Value = resp.json().await.unwrap();
    let secret = sub["secret"].as_str().unwrap().to_owned();

    // Originals, then near-duplicates of them: only the latter are events.
    let mut duplicates = BTreeSet::new();
    for (i, t) in TEXTS.iter().enumerate() {
        let r = client
            .put(url(&format!("/documents/orig-{i}")))
            .json(&json!({"text": t}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
    }
    for i in 0..TEXTS.len() {
        let id = format!("dup-{i}");
        let r = client
            .put(url(&format!("/documents/{id}")))
            .json(&json!({"text": near(i, "variante")}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        duplicates.insert(id);
    }
    // A cursor in the middle of the feed, read before the kill.
    let first: Vec<Value> = client
        .get(url("/events?limit=2"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(first.len(), 2);
    let cursor = first[1]["cursor"].as_str().unwrap().to_owned();
    server.kill9();

    let receiver = Receiver::start(port).await;
    receiver.expect_secret(&secret);
    let server = start(dir.path(), ENV).await;
    let got = receiver.wait_for(duplicates.len()).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let got_after = receiver.delivered();
    let delivered: BTreeSet<String> = got_after
        .iter()
        .map(|r| r.body["data"]["document"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        delivered, duplicates,
        "every acknowledged duplicate, and nothing else"
    );
    let ids: BTreeSet<&str> = got.iter().map(|r| r.webhook_id.as_str()).collect();
    assert_eq!(ids.len(), duplicates.len(), "one webhook-id per event");
    assert_eq!(
        receiver
            .state
            .bad_signatures
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );

    // The feed resumes after the cursor read before the kill.
    let rest: Vec<Value> = client
        .get(format!("{}/events?limit=1000&after={cursor}", server.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rest.len() + 2, duplicates.len());
    let feed: BTreeSet<&str> = first
        .iter()
        .chain(&rest)
        .map(|e| e["document"].as_str().unwrap())
        .collect();
    assert_eq!(feed, duplicates.iter().map(String::as_str).collect());

    let logs = server.logs.lock().unwrap().join("\n");
    assert!(!logs.is_empty());
    assert!(!logs.contains(&secret), "the secret is in the log");
    assert!(
        !logs.contains(&secret["whsec_".len()..]),
        "the key is in the log"
    );
    server.kill9();
}
