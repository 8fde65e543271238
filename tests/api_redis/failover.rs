//! A primary dies while a node writes with `durability = "replicated"`:
//! requests fail fast with 503 + Retry-After (never hang), `/readyz` says
//! 503 while the cluster is not serving and 200 again after the failover,
//! the node recovers by itself, and every acknowledged write is readable.
//! On a cluster of its own (the shared one must stay whole), with two
//! replicas per primary: after the failover the promoted replica still has
//! one, so replicated writes can be acknowledged again (with one replica
//! each they are refused until the dead node comes back, as they must be).

use crate::helpers::{spawn_app_with, test_settings};
use neardup::testkit::redis_cluster::RedisCluster;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn text(i: usize) -> String {
    format!(
        "failover document {i} written while a primary dies, word{i} and word{}",
        i * 7
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_primary_killed_while_writing_loses_no_acknowledged_write() {
    crate::helpers::skip_all_without_redis();
    let mut cluster = RedisCluster::start(3, 2).expect("a cluster of our own");
    let mut settings = test_settings();
    settings.storage.backend = neardup::config::StorageBackend::Redis;
    settings.storage.redis.nodes = cluster.urls();
    settings.storage.redis.key_prefix = format!("fo{}", std::process::id());
    settings.storage.redis.durability = neardup::config::Durability::Replicated;
    settings.storage.redis.command_timeout_ms = 1000;
    settings.storage.redis.replication_timeout_ms = 500;
    settings.storage.redis.watch_interval_ms = 100;
    settings.storage.redis.expected_documents = 10_000;
    let app = spawn_app_with(settings).await;
    // No request may hang: a generous bound over command_timeout_ms.
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap();

    let acked: Arc<Mutex<Vec<usize>>> = Arc::default();
    // Each refused write: its status and Retry-After.
    type Refusals = Arc<Mutex<Vec<(u16, Option<String>)>>>;
    let failures: Refusals = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let killed_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let recovered_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    // When the first write after the kill and the last write were refused.
    let first_refusal: Arc<Mutex<Option<Instant>>> = Arc::default();
    let last_refusal: Arc<Mutex<Option<Instant>>> = Arc::default();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (client, base) = (client.clone(), app.base.clone());
            let (acked, failures, stop) = (acked.clone(), failures.clone(), stop.clone());
            let (killed_at, recovered_at) = (killed_at.clone(), recovered_at.clone());
            let (first_refusal, last_refusal) = (first_refusal.clone(), last_refusal.clone());
            tokio::spawn(async move {
                let mut i = w;
                while !stop.load(Ordering::Relaxed) {
                    let sent = Instant::now();
                    let resp = client
                        .post(format!("{base}/documents"))
                        .json(&serde_json::json!({"id": format!("d{i}"), "text": text(i)}))
                        .send()
                        .await
                        .expect("no request hangs past the timeout");
                    let status = resp.status().as_u16();
                    if status == 201 {
                        acked.lock().unwrap().push(i);
                        // Recovered: a write *sent* after the first refusal
                        // went through (one in flight since before it does
                        // not count).
                        let refused = *first_refusal.lock().unwrap();
                        let mut rec = recovered_at.lock().unwrap();
                        if rec.is_none() && refused.is_some_and(|at| sent > at) {
                            *rec = Some(Instant::now());
                        }
                    } else {
                        let retry = resp
                            .headers()
                            .get("retry-after")
                            .map(|v| v.to_str().unwrap().to_owned());
                        let body: serde_json::Value = resp.json().await.unwrap();
                        assert_eq!(status, 503, "{body}");
                        assert_eq!(body["type"], "urn:neardup:problem:storage-unavailable");
                        // Nothing internal in a 5xx body.
                        let detail = body["detail"].as_str().unwrap();
                        assert!(
                            !detail.contains("127.0.0.1") && !detail.contains("redis://"),
                            "{detail}"
                        );
                        failures.lock().unwrap().push((status, retry));
                        let now = Instant::now();
                        if killed_at.lock().unwrap().is_some() {
                            first_refusal.lock().unwrap().get_or_insert(now);
                        }
                        *last_refusal.lock().unwrap() = Some(now);
                    }
                    i += 4;
                }
            })
        })
        .collect();
    // Since when /readyz has said 200 without a break (None: it said 503 last).
    let ready_since: Arc<Mutex<Option<Instant>>> = Arc::default();
    let readyz = {
        let (client, base, stop) = (client.clone(), app.base.clone(), stop.clone());
        let ready_since = ready_since.clone();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let s = client
                    .get(format!("{base}/readyz"))
                    .send()
                    .await
                    .expect("readyz answers")
                    .status()
                    .as_u16();
                if seen.last() != Some(&s) {
                    seen.push(s);
                    *ready_since.lock().unwrap() = (s == 200).then(Instant::now);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            seen
        })
    };

    // Writes go through (a first replicated write may wait out the
    // replicas' first acknowledgement), then the kill.
    for _ in 0..200 {
        if acked.lock().unwrap().len() >= 40 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = acked.lock().unwrap().len();
    assert!(
        before > 0,
        "writes go through before the kill (refused: {:?})",
        failures.lock().unwrap()
    );
    let victim = cluster.primaries().unwrap()[0];
    cluster.kill(victim);
    *killed_at.lock().unwrap() = Some(Instant::now());
    let t0 = Instant::now();
    // Until the node writes again after failing, and then until a second
    // has passed with no write refused and /readyz at 200 throughout: with
    // replicated durability a write can still be refused after the
    // promotion, while the dead primary's other replica resynchronizes with
    // the new primary (longer on a loaded machine), and /readyz rightly
    // says 503 after each such refusal.
    let settled = |at: &Mutex<Option<Instant>>| {
        at.lock()
            .unwrap()
            .is_some_and(|t| t.elapsed() > Duration::from_secs(1))
    };
    loop {
        let unrefused = last_refusal
            .lock()
            .unwrap()
            .is_none_or(|t| t.elapsed() > Duration::from_secs(1));
        if settled(&recovered_at) && unrefused && settled(&ready_since) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the node did not recover within 60 s ({} failures)",
            failures.lock().unwrap().len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.expect("a writer");
    }
    let seen = readyz.await.expect("the readyz poller");
    let failures = failures.lock().unwrap().clone();
    let recovered = recovered_at.lock().unwrap().unwrap();
    let last = last_refusal.lock().unwrap().expect("refusals were seen");
    eprintln!(
        "failover: first write after the kill acknowledged {:.2} s after it, the last refusal {:.2} s after it; {} writes refused with 503; readyz went {:?}",
        recovered.duration_since(t0).as_secs_f64(),
        last.duration_since(t0).as_secs_f64(),
        failures.len(),
        seen
    );
    assert!(
        failures.len() > 1,
        "the dead primary's slots refused writes meanwhile"
    );
    assert!(
        failures.iter().all(|(_, r)| r.as_deref() == Some("1")),
        "every 503 says Retry-After: {failures:?}"
    );
    assert_eq!(seen.first(), Some(&200));
    assert!(
        seen.contains(&503),
        "/readyz said 503 during the failover: {seen:?}"
    );
    assert_eq!(seen.last(), Some(&200), "/readyz is 200 again: {seen:?}");

    // Every acknowledged write is readable after the failover.
    let acked: BTreeSet<usize> = acked.lock().unwrap().iter().copied().collect();
    assert!(acked.len() > before);
    for &i in &acked {
        let resp = client
            .get(format!("{}/documents/d{i}", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "acknowledged d{i} is readable");
    }
    // The same document, the same exact answer: it is there whole.
    let i = *acked.iter().next().unwrap();
    let hits: serde_json::Value = client
        .post(format!("{}/similar", app.base))
        .json(&serde_json::json!({"text": text(i)}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(hits["results"][0]["id"], format!("d{i}"), "{hits}");
    assert_eq!(hits["results"][0]["jaccard"], 1.0, "{hits}");

    let metrics = app.metrics().await;
    let value = |name: &str| -> f64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in /metrics"))
    };
    assert!(value("neardup_redis_errors_total") >= 1.0);
    assert!(value("neardup_redis_round_trips_total") > acked.len() as f64);
    assert_eq!(value("neardup_redis_up"), 1.0);
    assert!(value("neardup_redis_check_failures_total") >= 1.0);
}
