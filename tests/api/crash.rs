//! Durability against the real binary: writes stream in, the process is
//! killed with SIGKILL at random moments, restarted on the same data dir,
//! and every acknowledged write must be there, whole and with the same
//! shingles; nothing unacknowledged may appear half-indexed.

use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A running `neardup` process.
struct Server {
    child: Child,
    base: String,
    client: reqwest::Client,
}

/// Start the binary on a random port with `data_dir`; returns once ready.
async fn start(data_dir: &Path, extra_env: &[(&str, &str)]) -> Server {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_neardup"));
    cmd.env("NEARDUP_SERVER__BIND", "127.0.0.1:0")
        .env("NEARDUP_STORAGE__DATA_DIR", data_dir)
        .env("NEARDUP_LOG__FORMAT", "json")
        .env("RUST_LOG", "info")
        .env("NEARDUP_STORAGE__SNAPSHOT_INTERVAL_SECS", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("the neardup binary starts");
    // Logs go to stderr.
    let logs = child.stderr.take().expect("piped stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(logs).lines().map_while(Result::ok) {
            if !sent && line.contains("neardup listening") {
                let v: Value = serde_json::from_str(&line).expect("json log line");
                let _ = tx.send(v["addr"].as_str().expect("addr field").to_owned());
                sent = true;
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(90))
        .expect("the server logs its address");
    let server = Server {
        child,
        base: format!("http://{addr}"),
        client: reqwest::Client::new(),
    };
    for _ in 0..6000 {
        if let Ok(r) = server
            .client
            .get(format!("{}/readyz", server.base))
            .send()
            .await
        {
            if r.status() == 200 {
                return server;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("server never became ready");
}

impl Server {
    fn kill9(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }

    fn sigterm_and_wait(mut self) -> std::process::ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        self.child.wait().expect("reaped")
    }

    async fn stats(&self) -> Value {
        self.client
            .get(format!("{}/stats", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

/// The last acknowledged state of an id, and the states a write whose
/// answer never came may have left.
#[derive(Clone, Debug, Default)]
struct IdState {
    /// `Some(text)` if stored, `None` if deleted (or never written).
    acked: Option<String>,
    /// The states an unacknowledged write in flight when the process died
    /// may have left: one for a PUT or DELETE; for a batch, every version
    /// of the id in it, because a concurrent commit may have made any
    /// prefix of an unanswered batch durable.
    pending: Vec<Option<String>>,
}

fn text_for(client: usize, n: u64) -> String {
    let mut rng = StdRng::seed_from_u64(client as u64 * 1_000_003 + n);
    (0..40)
        .map(|_| format!("w{}", rng.gen_range(0..5000)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One writer: PUTs, DELETEs and batches over its own ids until the server dies.
async fn writer(
    base: String,
    client_no: usize,
    ids: Arc<Mutex<HashMap<String, IdState>>>,
    seed: u64,
) {
    let http = reqwest::Client::new();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut n = 0u64;
    loop {
        n += 1;
        let choice = rng.gen_range(0..10);
        if choice < 2 {
            // A batch of upserts: acknowledged together.
            let items: Vec<(String, String)> = (0..rng.gen_range(2..20))
                .map(|i| {
                    (
                        format!("c{client_no}-{}", rng.gen_range(0..60)),
                        text_for(client_no, n * 100 + i),
                    )
                })
                .collect();
            {
                let mut map = ids.lock().unwrap();
                for (id, _) in &items {
                    map.entry(id.clone()).or_default().pending.clear();
                }
                for (id, text) in &items {
                    map.get_mut(id).unwrap().pending.push(Some(text.clone()));
                }
            }
            let docs: Vec<Value> = items
                .iter()
                .map(|(id, text)| json!({"id": id, "text": text}))
                .collect();
            let Ok(resp) = http
                .post(format!("{base}/documents/batch?mode=upsert"))
                .json(&json!({"documents": docs}))
                .send()
                .await
            else {
                return;
            };
            assert_eq!(resp.status(), 200);
            let Ok(body) = resp.json::<Value>().await else {
                return;
            };
            let mut map = ids.lock().unwrap();
            for ((id, text), r) in items.iter().zip(body["results"].as_array().unwrap()) {
                assert!(r["status"] == 200 || r["status"] == 201, "{r}");
                let st = map.get_mut(id).unwrap();
                st.acked = Some(text.clone());
                st.pending.clear();
            }
            continue;
        }
        let id = format!("c{client_no}-{}", rng.gen_range(0..60));
        let delete = choice < 4;
        let next = if delete {
            None
        } else {
            Some(text_for(client_no, n))
        };
        ids.lock().unwrap().entry(id.clone()).or_default().pending = vec![next.clone()];
        let sent = match &next {
            None => http.delete(format!("{base}/documents/{id}")).send().await,
            Some(text) => {
                http.put(format!("{base}/documents/{id}"))
                    .json(&json!({"text": text}))
                    .send()
                    .await
            }
        };
        let Ok(resp) = sent else { return };
        let status = resp.status().as_u16();
        assert!(matches!(status, 200 | 201 | 204 | 404), "status {status}");
        let mut map = ids.lock().unwrap();
        let st = map.get_mut(&id).unwrap();
        st.acked = next;
        st.pending.clear();
    }
}

/// Is the stored version of `id` exactly `text` (same shingle set)?
async fn holds_exactly(server: &Server, id: &str, text: &str) -> bool {
    let resp = server
        .client
        .post(format!("{}/similar", server.base))
        .json(&json!({"text": text, "threshold": 1.0, "limit": 1000}))
        .send()
        .await
        .unwrap();
    let body: Value = resp.json().await.unwrap();
    body["results"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["id"] == id && m["jaccard"] == 1.0)
}

async fn verify(server: &Server, ids: &HashMap<String, IdState>) -> usize {
    let mut checked = 0;
    for (id, st) in ids {
        let resp = server
            .client
            .get(format!("{}/documents/{id}", server.base))
            .send()
            .await
            .unwrap();
        let present = resp.status() == 200;
        assert!(
            present || resp.status() == 404,
            "GET {id}: {}",
            resp.status()
        );
        let allowed: Vec<&Option<String>> = std::iter::once(&st.acked)
            .chain(st.pending.iter())
            .collect();
        let ok = if present {
            let mut whole = false;
            for text in allowed.iter().filter_map(|t| t.as_ref()) {
                whole |= holds_exactly(server, id, text).await;
            }
            whole
        } else {
            allowed.iter().any(|t| t.is_none())
        };
        assert!(
            ok,
            "{id}: present={present}, acknowledged {:?}, pending {:?}",
            st.acked.is_some(),
            st.pending
        );
        checked += 1;
    }
    checked
}

/// After a verified restart, an id whose last write was never answered
/// holds one of its two allowed states; record which, so the next round
/// checks against the truth.
async fn settle(server: &Server, ids: &Mutex<HashMap<String, IdState>>) {
    let ambiguous: Vec<(String, IdState)> = ids
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, st)| !st.pending.is_empty())
        .map(|(id, st)| (id.clone(), st.clone()))
        .collect();
    for (id, st) in ambiguous {
        let mut actual = None;
        for text in std::iter::once(&st.acked).chain(&st.pending).flatten() {
            if holds_exactly(server, &id, text).await {
                actual = Some(text.clone());
                break;
            }
        }
        let mut map = ids.lock().unwrap();
        let entry = map.get_mut(&id).unwrap();
        entry.acked = actual;
        entry.pending.clear();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_repeated_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let ids: Arc<Mutex<HashMap<String, IdState>>> = Default::default();
    let mut rng = StdRng::seed_from_u64(0xc0ffee);
    let rounds = 8;
    let mut checked = 0;
    for round in 0..rounds {
        let server = start(dir.path(), &[]).await;
        // What survived the previous kill must match what was acknowledged.
        let expected = ids.lock().unwrap().clone();
        checked += verify(&server, &expected).await;
        settle(&server, &ids).await;
        let tasks: Vec<_> = (0..4)
            .map(|c| tokio::spawn(writer(server.base.clone(), c, Arc::clone(&ids), rng.gen())))
            .collect();
        tokio::time::sleep(Duration::from_millis(rng.gen_range(150..900))).await;
        server.kill9();
        for t in tasks {
            t.await.expect("writer task does not panic");
        }
        eprintln!(
            "round {round}: killed; {} ids tracked",
            ids.lock().unwrap().len()
        );
    }
    let server = start(dir.path(), &[]).await;
    let expected = ids.lock().unwrap().clone();
    checked += verify(&server, &expected).await;
    eprintln!("verified {checked} id states across {rounds} kills");
    assert!(
        ids.lock().unwrap().len() >= 100,
        "the writers made real progress"
    );
    server.kill9();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_writes_a_final_snapshot_and_restart_replays_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        &[("NEARDUP_STORAGE__SNAPSHOT_INTERVAL_SECS", "0")],
    )
    .await;
    let docs: Vec<Value> = (0..200)
        .map(|i| json!({"id": format!("d{i}"), "text": text_for(9, i)}))
        .collect();
    let resp = server
        .client
        .post(format!("{}/documents/batch", server.base))
        .json(&json!({"documents": docs}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(server.sigterm_and_wait().success());
    let snaps: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("snapshot"))
        .collect();
    assert_eq!(snaps.len(), 1, "one final snapshot");
    let server = start(dir.path(), &[]).await;
    let stats = server.stats().await;
    assert_eq!(stats["documents"], 200);
    assert_eq!(
        stats["storage"]["recovery"]["replayed_records"], 0,
        "{stats}"
    );
    assert_eq!(stats["storage"]["recovery"]["snapshot_documents"], 200);
    assert!(holds_exactly(&server, "d17", &text_for(9, 17)).await);
    // Nothing written since: the next stop does not write another snapshot.
    let names = |dir: &std::path::Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("snapshot"))
            .collect();
        v.sort();
        v
    };
    let before = names(dir.path());
    assert!(server.sigterm_and_wait().success());
    assert_eq!(
        names(dir.path()),
        before,
        "no snapshot of an unchanged index"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starting_with_different_signature_parameters_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]).await;
    let resp = server
        .client
        .put(format!("{}/documents/x", server.base))
        .json(&json!({"text": "some words to store here"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    server.kill9();
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .env("NEARDUP_SERVER__BIND", "127.0.0.1:0")
        .env("NEARDUP_STORAGE__DATA_DIR", dir.path())
        .env("NEARDUP_INDEX__NUM_PERM", "64")
        .output()
        .expect("runs");
    assert!(!out.status.success(), "a mismatched start must fail");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        all.contains("index.num_perm: stored 128, configured 64"),
        "{all}"
    );
    // Changing only the threshold is fine: the LSH tables are rebuilt.
    let server = start(dir.path(), &[("NEARDUP_INDEX__THRESHOLD", "0.9")]).await;
    assert_eq!(server.stats().await["documents"], 1);
    server.kill9();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_log_refuses_to_start_naming_the_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        &[("NEARDUP_STORAGE__SNAPSHOT_INTERVAL_SECS", "0")],
    )
    .await;
    for i in 0..20 {
        let resp = server
            .client
            .put(format!("{}/documents/d{i}", server.base))
            .json(&json!({"text": text_for(3, i)}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201);
    }
    server.kill9();
    let seg = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("wal-"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .expect("a log segment");
    let mut data = std::fs::read(&seg).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 0x55;
    std::fs::write(&seg, &data).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .env("NEARDUP_SERVER__BIND", "127.0.0.1:0")
        .env("NEARDUP_STORAGE__DATA_DIR", dir.path())
        .output()
        .expect("runs");
    assert!(!out.status.success(), "a corrupt log must refuse the start");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let name = seg.file_name().unwrap().to_string_lossy().to_string();
    assert!(all.contains(&name) && all.contains("offset"), "{all}");
}
