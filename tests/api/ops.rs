//! Operations: probes, `/stats`, `/metrics`, snapshots, graceful shutdown.

use crate::helpers::{
    assert_problem, metric_value, result_ids, spawn_app, spawn_app_with, start_app,
    start_partial_post, test_settings, vocabulary,
};
use neardup::app::App;
use neardup::text::ShingleKind;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

const TEXT: &str = "The night is dark and the moon is red.";

/// P(candidate) for a pair at similarity `s` under (b, r) banding.
fn candidate_probability(s: f64, bands: usize, rows: usize) -> f64 {
    1.0 - (1.0 - s.powi(rows as i32)).powi(bands as i32)
}

/// The documented rule: the largest r, with b = ⌊num_perm / r⌋, whose
/// candidate probability at `threshold` is at least 0.99.
fn expected_banding(threshold: f64, num_perm: usize) -> (usize, usize) {
    (1..=num_perm)
        .rev()
        .map(|r| (num_perm / r, r))
        .find(|&(b, r)| candidate_probability(threshold, b, r) >= 0.99)
        .expect("reachable")
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[tokio::test]
async fn healthz_returns_200_ok() {
    let app = spawn_app().await;
    let resp = app.get("/healthz").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.json::<Value>().await.unwrap(), json!({"status": "ok"}));
}

#[tokio::test]
async fn readyz_is_503_while_the_index_is_restored_then_200() {
    use neardup::engine::{EngineParams, Journal, JournalEntry};
    use neardup::persist::{format::Fingerprint, wal};
    use std::io::Write;
    // A log segment of one record, written elsewhere...
    let elsewhere = tempfile::tempdir().unwrap();
    let segment = {
        let log = wal::Wal::open(
            elsewhere.path(),
            0,
            neardup::config::WalFsync::Always,
            Fingerprint::of(&EngineParams::default()),
            0,
        )
        .unwrap();
        let lsn = log.append(JournalEntry::Delete("never-stored")).unwrap();
        log.commit(lsn).unwrap();
        std::fs::read(elsewhere.path().join(wal::segment_name(0))).unwrap()
    };
    // ...that the data dir holds as a FIFO: recovery blocks reading it
    // until the test writes it, however fast the machine.
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join(wal::segment_name(0));
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // As this release leaves a data directory: the default collection's
    // record names the recipe its log is written with (without one, a log
    // is taken for a release's before versions, version 1).
    std::fs::write(
        dir.path().join("default.json"),
        r#"{"created_ms":1,"text_version":2}"#,
    )
    .unwrap();
    let mut settings = test_settings();
    settings.storage.data_dir = dir.path().to_owned();
    let app = start_app(settings).await;

    // Restoring: the probes and the metrics answer, nothing else does.
    assert_eq!(app.get("/healthz").await.status(), 200);
    assert_eq!(app.get("/metrics").await.status(), 200);
    let resp = app.get("/readyz").await;
    assert_eq!(resp.headers()["retry-after"], "1");
    let problem = assert_problem(resp, 503).await;
    assert_eq!(problem["type"], "urn:neardup:problem:not-ready");
    let resp = app
        .post_json("/documents", &json!({"text": "not while restoring"}))
        .await;
    assert_eq!(
        assert_problem(resp, 503).await["type"],
        "urn:neardup:problem:not-ready"
    );
    assert_eq!(app.get("/readyz").await.status(), 503, "still restoring");

    // Release the log: recovery reads it, finishes, and the server is ready.
    tokio::task::spawn_blocking(move || {
        let mut f = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        f.write_all(&segment).unwrap();
    })
    .await
    .unwrap();
    app.wait_ready().await;
    let resp = app.get("/readyz").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.json::<Value>().await.unwrap(),
        json!({"status": "ready"})
    );
    assert_eq!(
        app.stats().await["storage"]["recovery"]["replayed_records"],
        1
    );
}

#[tokio::test]
async fn readyz_is_503_while_draining_and_requests_are_still_served() {
    let mut settings = test_settings();
    settings.server.shutdown_delay_secs = 2;
    let mut app = spawn_app_with(settings).await;
    assert_eq!(app.get("/readyz").await.status(), 200);
    app.begin_shutdown();
    let mut readyz = app.get("/readyz").await;
    for _ in 0..100 {
        if readyz.status() == 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        readyz = app.get("/readyz").await;
    }
    let problem = assert_problem(readyz, 503).await;
    assert_eq!(problem["type"], "urn:neardup:problem:not-ready");
    // Still serving during the delay: a load balancer has time to notice.
    assert_eq!(app.get("/healthz").await.status(), 200);
    assert_eq!(app.get("/stats").await.status(), 200);
    let stopped = tokio::time::timeout(Duration::from_secs(30), app.server)
        .await
        .expect("the server stops after the delay");
    stopped.unwrap().unwrap();
}

#[tokio::test]
async fn stats_report_the_default_index_contract() {
    let app = spawn_app().await;
    let stats = app.stats().await;
    assert_eq!(stats["documents"], 0);
    let index = &stats["index"];
    assert_eq!(index["num_perm"], 128);
    assert_eq!(index["seed"], 1);
    assert_eq!(f(&index["threshold"]), 0.8);
    assert_eq!(index["bands"], 21);
    assert_eq!(index["rows"], 6);
    assert_eq!(index["max_candidates"], 10_000);
    let recall = f(&index["recall_at_threshold"]);
    assert!(recall >= 0.99, "recall {recall}");
    assert!((recall - candidate_probability(0.8, 21, 6)).abs() < 1e-9);
    // The lowest served threshold is where recall drops to 0.99.
    let min = f(&index["min_query_threshold"]);
    assert!((0.76..0.77).contains(&min), "min_query_threshold {min}");
    assert!((candidate_probability(min, 21, 6) - 0.99).abs() < 1e-6);
    assert!(index["hash_family"].is_string());
    assert_eq!(index["lsh_buckets"], 0);

    let shingle = &stats["shingle"];
    assert_eq!(shingle["kind"], "word");
    assert_eq!(shingle["k"], 3);
    assert_eq!(shingle["multiset"], false);

    let memory = &stats["memory"];
    for key in [
        "shingles_bytes",
        "signatures_bytes",
        "ids_bytes",
        "metadata_bytes",
        "lsh_bytes",
        "total_bytes",
    ] {
        assert!(memory[key].is_u64(), "memory.{key}: {memory}");
    }
    assert_eq!(f(&memory["bytes_per_document"]), 0.0);
    assert!(stats["uptime_seconds"].is_u64());
    assert_eq!(stats["version"], env!("CARGO_PKG_VERSION"));
}

#[tokio::test]
async fn stats_follow_the_configured_index_and_shingles() {
    let mut settings = test_settings();
    settings.index.num_perm = 256;
    settings.index.threshold = 0.5;
    settings.index.seed = 42;
    settings.shingle.kind = ShingleKind::Char;
    settings.shingle.k = 5;
    let app = spawn_app_with(settings).await;
    let stats = app.stats().await;
    let (bands, rows) = expected_banding(0.5, 256);
    assert_eq!(stats["index"]["num_perm"], 256);
    assert_eq!(stats["index"]["seed"], 42);
    assert_eq!(stats["index"]["bands"], bands);
    assert_eq!(stats["index"]["rows"], rows);
    assert!(f(&stats["index"]["recall_at_threshold"]) >= 0.99);
    assert!(f(&stats["index"]["min_query_threshold"]) <= 0.5);
    assert_eq!(stats["shingle"]["kind"], "char");
    assert_eq!(stats["shingle"]["k"], 5);
    // The default banding matches the same rule.
    assert_eq!(expected_banding(0.8, 128), (21, 6));
}

#[tokio::test]
async fn stats_track_inserts_replaces_and_deletes() {
    let app = spawn_app().await;
    let words = vocabulary(3, 40);
    for i in 0..5 {
        app.insert(&format!("d{i}"), &words[i * 5..i * 5 + 20].join(" "))
            .await;
    }
    let stats = app.stats().await;
    assert_eq!(stats["documents"], 5);
    let memory = &stats["memory"];
    let per_doc = f(&memory["bytes_per_document"]);
    // At least the 128 × 4-byte signature and 18 × 4-byte shingles each.
    assert!(per_doc >= (128 * 4 + 18 * 4) as f64, "{memory}");
    assert_eq!(memory["signatures_bytes"], 5 * 128 * 4);
    assert_eq!(memory["shingles_bytes"], 5 * 18 * 4);
    assert!(stats["index"]["lsh_buckets"].as_u64().unwrap() > 0);

    // A replace keeps the count; a delete lowers it.
    let resp = app.put_json("/documents/d0", &json!({"text": TEXT})).await;
    assert_eq!(resp.status(), 200);
    let metadata = json!({"note": "sixteen bytes.."});
    let resp = app
        .put_json(
            "/documents/d9",
            &json!({"text": TEXT, "metadata": metadata}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    assert_eq!(
        app.stats().await["memory"]["metadata_bytes"],
        metadata.to_string().len()
    );
    assert_eq!(app.stats().await["documents"], 6);
    for i in 1..5 {
        assert_eq!(app.delete(&format!("/documents/d{i}")).await.status(), 204);
    }
    let stats = app.stats().await;
    assert_eq!(stats["documents"], 2);
    // d0 and d9 both hold TEXT now: 7 shingles each.
    assert_eq!(stats["memory"]["shingles_bytes"], 2 * 7 * 4);
    app.delete("/documents/d0").await;
    app.delete("/documents/d9").await;
    let stats = app.stats().await;
    assert_eq!(stats["documents"], 0);
    assert_eq!(f(&stats["memory"]["bytes_per_document"]), 0.0);
    assert_eq!(stats["memory"]["shingles_bytes"], 0);
    assert_eq!(stats["memory"]["metadata_bytes"], 0);
    assert_eq!(stats["index"]["lsh_buckets"], 0);
}

#[tokio::test]
async fn metrics_are_openmetrics_text_with_the_expected_series() {
    let app = spawn_app().await;
    app.insert("probe", TEXT).await;
    app.similar("probe", None, None).await;
    let resp = app
        .client
        .get(app.url("/metrics"))
        .header(
            "accept",
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let ct = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
    let text = resp.text().await.unwrap();
    assert!(text.trim_end().ends_with("# EOF"), "no # EOF terminator");
    for series in [
        "neardup_http_requests_total{",
        "neardup_http_request_duration_seconds_bucket{",
        "neardup_http_request_duration_seconds_count{",
        "neardup_http_request_duration_seconds_sum{",
        "neardup_documents{collection=\"default\"} ",
        "neardup_query_candidates_bucket{",
        "neardup_query_candidates_count{collection=\"default\"} ",
        "neardup_candidates_rejected_total{collection=\"default\"} ",
        "neardup_candidates_rejected_ratio{collection=\"default\"} ",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(series)),
            "missing {series} in\n{text}"
        );
    }
    for family in [
        "# TYPE neardup_http_requests counter",
        "# TYPE neardup_http_request_duration_seconds histogram",
        "# TYPE neardup_documents gauge",
        "# TYPE neardup_query_candidates histogram",
        "# TYPE neardup_candidates_rejected counter",
        "# TYPE neardup_candidates_rejected_ratio gauge",
    ] {
        assert!(text.contains(family), "missing {family:?}");
    }
    assert_eq!(
        metric_value(&text, "neardup_documents", &[("collection", "default")]),
        Some(1.0)
    );
}

#[tokio::test]
async fn metrics_default_to_the_prometheus_text_format_for_other_clients() {
    let app = spawn_app().await;
    app.insert("probe", TEXT).await;
    for accept in [None, Some("*/*"), Some("text/plain")] {
        let mut req = app.client.get(app.url("/metrics"));
        if let Some(a) = accept {
            req = req.header("accept", a);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let ct = resp.headers()["content-type"].to_str().unwrap().to_owned();
        assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8", "{accept:?}");
        let text = resp.text().await.unwrap();
        assert!(!text.contains("# EOF"), "{text}");
        // Counter families are named after their `_total` samples.
        assert!(text.contains("# TYPE neardup_http_requests_total counter\n"));
        assert!(text.contains("# TYPE neardup_documents gauge\n"));
        assert_eq!(
            metric_value(&text, "neardup_documents", &[("collection", "default")]),
            Some(1.0)
        );
    }
}

#[tokio::test]
async fn request_counters_move_with_requests_by_route_method_and_status() {
    let app = spawn_app().await;
    let healthz = [("route", "/healthz"), ("method", "GET"), ("status", "200")];
    let missing = [
        ("route", "/documents/{id}"),
        ("method", "GET"),
        ("status", "404"),
    ];
    let created = [
        ("route", "/documents"),
        ("method", "POST"),
        ("status", "201"),
    ];
    let before = app.metrics().await;
    let count = |text: &str, labels: &[(&str, &str)]| {
        metric_value(text, "neardup_http_requests_total", labels).unwrap_or(0.0)
    };
    let observed = |text: &str, labels: &[(&str, &str)]| {
        metric_value(text, "neardup_http_request_duration_seconds_count", labels).unwrap_or(0.0)
    };
    for _ in 0..3 {
        app.get("/healthz").await;
    }
    for i in 0..2 {
        app.get(&format!("/documents/nope-{i}")).await;
    }
    app.insert("a", TEXT).await;
    let after = app.metrics().await;
    assert_eq!(count(&after, &healthz) - count(&before, &healthz), 3.0);
    assert_eq!(count(&after, &missing) - count(&before, &missing), 2.0);
    assert_eq!(count(&after, &created) - count(&before, &created), 1.0);
    assert_eq!(
        observed(&after, &healthz) - observed(&before, &healthz),
        3.0
    );
    assert_eq!(
        observed(&after, &missing) - observed(&before, &missing),
        2.0
    );
    // Scrapes count themselves too.
    let metrics = [("route", "/metrics"), ("method", "GET"), ("status", "200")];
    assert_eq!(count(&after, &metrics), 1.0);
    assert_eq!(metric_value(&after, "neardup_documents", &[]), Some(1.0));
}

#[tokio::test]
async fn unknown_paths_do_not_become_metric_labels() {
    let app = spawn_app().await;
    app.get("/no/such/path-7f3a9c").await;
    app.get("/documents/secret-id-5d2e").await;
    let text = app.metrics().await;
    assert!(!text.contains("7f3a9c"), "raw path leaked into labels");
    assert!(
        !text.contains("secret-id-5d2e"),
        "raw id leaked into labels"
    );
    // The 404s are still counted.
    let total: f64 = text
        .lines()
        .filter(|l| l.starts_with("neardup_http_requests_total{") && l.contains("status=\"404\""))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .sum();
    assert_eq!(total, 2.0);
}

#[tokio::test]
async fn query_metrics_track_candidates_and_rejections() {
    let app = spawn_app().await;
    let words = vocabulary(21, 60);
    let probe = words.join(" ");
    // One near-duplicate (accepted) and several mid-similarity documents
    // that LSH proposes but exact verification rejects.
    app.insert("probe", &probe).await;
    app.insert("near", &words[..58].join(" ")).await;
    for (i, cut) in [14, 15, 16, 17].into_iter().enumerate() {
        app.insert(&format!("mid{i}"), &words[..60 - cut].join(" "))
            .await;
    }
    let before = app.metrics().await;
    let mut candidates = 0.0;
    let mut rejected = 0.0;
    for _ in 0..3 {
        let body = app.similar("probe", None, None).await;
        assert_eq!(result_ids(&body["results"]), ["near"]);
        let c = f(&body["candidates"]);
        candidates += c;
        rejected += c - 1.0;
    }
    assert!(
        rejected > 0.0,
        "the fixture should produce rejected candidates"
    );
    let after = app.metrics().await;
    let delta = |name: &str| {
        metric_value(&after, name, &[]).unwrap_or(0.0)
            - metric_value(&before, name, &[]).unwrap_or(0.0)
    };
    assert_eq!(delta("neardup_query_candidates_count"), 3.0);
    assert_eq!(delta("neardup_query_candidates_sum"), candidates);
    assert_eq!(delta("neardup_candidates_rejected_total"), rejected);
    let ratio = metric_value(&after, "neardup_candidates_rejected_ratio", &[]).unwrap();
    let verified =
        metric_value(&after, "neardup_candidates_verified_total", &[]).expect("verified counter");
    let total_rejected = metric_value(&after, "neardup_candidates_rejected_total", &[]).unwrap();
    assert!((ratio - total_rejected / verified).abs() < 1e-9);
    assert!(ratio > 0.0 && ratio < 1.0);
}

#[tokio::test]
async fn an_admin_snapshot_reports_the_documents_it_wrote() {
    let app = spawn_app().await;
    app.insert("a", TEXT).await;
    app.insert("b", "another text entirely here").await;
    let resp = app.post_json("/admin/snapshot", &json!({})).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["documents"], 2, "{body}");
    let bytes = body["bytes"].as_u64().unwrap();
    assert!(bytes > 0);
    // The snapshot is a file of that size in the app's data dir.
    let path = std::path::PathBuf::from(body["path"].as_str().unwrap());
    let dir = app.data_dir.as_ref().expect("spawn_app made a data dir");
    assert!(path.starts_with(dir.path()), "{path:?} outside {dir:?}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), bytes);
}

#[tokio::test]
async fn a_spawned_app_stops_cleanly_when_told_to() {
    let app = spawn_app().await;
    app.insert("a", TEXT).await;
    let addr = app.addr;
    tokio::time::timeout(Duration::from_secs(5), app.stop())
        .await
        .expect("stops promptly")
        .expect("and cleanly");
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

/// Build an app directly (not through `spawn_app`) so the test owns the
/// shutdown trigger and the server task.
async fn build_app(grace_secs: u64, data_dir: &std::path::Path) -> App {
    let mut settings = test_settings();
    settings.server.shutdown_grace_secs = grace_secs;
    settings.storage.data_dir = data_dir.to_owned();
    App::build(settings.validate().unwrap())
        .await
        .expect("app builds")
}

async fn wait_ready(base: &str) {
    let client = reqwest::Client::new();
    for _ in 0..500 {
        if let Ok(r) = client.get(format!("{base}/readyz")).send().await {
            if r.status() == 200 {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never ready");
}

/// Wait until nothing accepts connections at `addr`.
async fn wait_refused(addr: std::net::SocketAddr) -> bool {
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
async fn graceful_shutdown_finishes_an_in_flight_request_then_stops() {
    let dir = tempfile::tempdir().unwrap();
    let app = build_app(10, dir.path()).await;
    let addr = app.local_addr();
    let state = app.state();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until_stopped(async move {
        let _ = stopped.await;
    }));
    wait_ready(&format!("http://{addr}")).await;

    // A request whose body is half sent is in flight when shutdown starts.
    let body = json!({"id": "in-flight", "text": TEXT}).to_string();
    let partial = start_partial_post(addr, "/documents", body.as_bytes(), 12).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.send(()).unwrap();

    // Draining: not ready, no new connections, but still running.
    assert!(wait_refused(addr).await, "still accepting after shutdown");
    assert!(!state.is_ready(), "ready while draining");
    assert!(!server.is_finished(), "stopped before the request finished");

    // The in-flight request completes normally...
    let resp = partial.complete(true).await;
    assert_eq!(resp.status, 201, "{}", String::from_utf8_lossy(&resp.body));
    let written: Value = serde_json::from_slice(&resp.body).unwrap();
    assert_eq!(written["id"], "in-flight");
    // ...and then the server task ends, cleanly.
    let result = tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("server stopped after the in-flight request")
        .expect("server task did not panic");
    assert!(result.is_ok(), "{result:?}");
    let default = state.collections.default_collection();
    let backend = default.backend().expect("restored");
    assert!(backend.get("in-flight").await.unwrap().is_some());
}

#[tokio::test]
async fn the_grace_period_bounds_how_long_shutdown_waits() {
    let dir = tempfile::tempdir().unwrap();
    let app = build_app(1, dir.path()).await;
    let addr = app.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until_stopped(async move {
        let _ = stopped.await;
    }));
    wait_ready(&format!("http://{addr}")).await;
    // A client that never finishes its request.
    let body = json!({"id": "stuck", "text": TEXT}).to_string();
    let _stuck = start_partial_post(addr, "/documents", body.as_bytes(), 5).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    stop.send(()).unwrap();
    let result = tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("shutdown ended within the grace period")
        .expect("server task did not panic");
    assert!(result.is_ok(), "{result:?}");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900),
        "did not wait for the in-flight request: {waited:?}"
    );
}

#[test]
fn print_config_shows_the_derived_banding_beside_the_settings() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .arg("print-config")
        .env("NEARDUP_INDEX__THRESHOLD", "0.9")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(config["index"]["threshold"], 0.9);
    assert_eq!(config["index"]["bands"], Value::Null, "not configured");
    let derived = &config["derived"]["index"];
    let (bands, rows) = expected_banding(0.9, 128);
    assert_eq!(
        (derived["bands"].clone(), derived["rows"].clone()),
        (json!(bands), json!(rows))
    );
    assert!(f(&derived["recall_at_threshold"]) >= 0.99);
    assert!(f(&derived["min_query_threshold"]) < 0.9);
}

/// Start the binary with `format` logs on a fresh data dir, read its log
/// (stderr) until the index is restored, then stop it.
fn startup_log(format: &str) -> String {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .env("NEARDUP_SERVER__BIND", "127.0.0.1:0")
        .env("NEARDUP_STORAGE__DATA_DIR", dir.path())
        .env("NEARDUP_LOG__FORMAT", format)
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = String::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        log.push_str(&line);
        log.push('\n');
        if line.contains("index restored") {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    log
}

#[test]
fn logs_piped_to_a_file_have_no_colours_and_no_rust_debug_values() {
    let pretty = startup_log("pretty");
    assert!(pretty.contains("neardup listening"), "{pretty}");
    assert!(
        !pretty.contains('\u{1b}'),
        "ANSI escapes in a pipe: {pretty:?}"
    );
    let json = startup_log("json");
    for line in json.lines() {
        let v: Value = serde_json::from_str(line).expect("every line is JSON");
        let text = v.to_string();
        for debug in ["\"None\"", "Some(", "\"()\""] {
            assert!(!text.contains(debug), "Debug text {debug} in {text}");
        }
    }
    assert!(json.contains("\"index restored; ready\""), "{json}");
}
