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

/// A running `neardup` process (also used by `hugepages.rs`).
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) base: String,
    pub(crate) client: reqwest::Client,
    /// Every log line so far (JSON, from stderr).
    pub(crate) logs: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

/// Start the binary on a random port with `data_dir`; returns once ready.
pub(crate) async fn start(data_dir: &Path, extra_env: &[(&str, &str)]) -> Server {
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
    let lines: std::sync::Arc<std::sync::Mutex<Vec<String>>> = Default::default();
    let kept = std::sync::Arc::clone(&lines);
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(logs).lines().map_while(Result::ok) {
            kept.lock().unwrap().push(line.clone());
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
        logs: lines,
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

/// A test that panics before it stops its server must not leave the
/// process running (a failed assertion skipped `kill9` once, and the
/// server stayed up for half an hour).
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub(crate) fn kill9(mut self) {
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

    pub(crate) async fn stats(&self) -> Value {
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

/// Is the stored version of `id` in the collection at `prefix` (`""` for
/// `default`) exactly `text` (same shingle set)?
async fn holds_exactly_in(server: &Server, prefix: &str, id: &str, text: &str) -> bool {
    let resp = server
        .client
        .post(format!("{}{prefix}/similar", server.base))
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

async fn holds_exactly(server: &Server, id: &str, text: &str) -> bool {
    holds_exactly_in(server, "", id, text).await
}

async fn verify(server: &Server, ids: &HashMap<String, IdState>) -> usize {
    verify_in(server, "", ids).await
}

async fn verify_in(server: &Server, prefix: &str, ids: &HashMap<String, IdState>) -> usize {
    let mut checked = 0;
    for (id, st) in ids {
        let resp = server
            .client
            .get(format!("{}{prefix}/documents/{id}", server.base))
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
                whole |= holds_exactly_in(server, prefix, id, text).await;
            }
            whole
        } else {
            allowed.iter().any(|t| t.is_none())
        };
        assert!(
            ok,
            "{prefix}/documents/{id}: present={present}, acknowledged {:?}, pending {:?}",
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
    settle_in(server, "", ids).await
}

async fn settle_in(server: &Server, prefix: &str, ids: &Mutex<HashMap<String, IdState>>) {
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
            if holds_exactly_in(server, prefix, &id, text).await {
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

impl Server {
    async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
    }

    /// The log lines so far, joined.
    fn log_text(&self) -> String {
        self.logs.lock().unwrap().join("\n")
    }
}

/// The collection answers 503 `collection-unavailable` and is listed as failed.
async fn assert_failed(server: &Server, documents_path: &str, name: &str) {
    let resp = server.get(documents_path).await;
    assert_eq!(resp.status(), 503, "{documents_path}");
    let problem: Value = resp.json().await.unwrap();
    assert_eq!(
        problem["type"], "urn:neardup:problem:collection-unavailable",
        "{problem}"
    );
    let listed: Value = server
        .get(&format!("/collections/{name}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["status"], "failed", "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_written_under_other_signature_parameters_is_refused_for_its_collection() {
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
    // num_perm 64 against data signed with 128: the default collection's
    // recipe is the configuration, so nothing could serve it: the start
    // stops, non-zero, with the differing key on stderr (the log and the
    // final error line), instead of a node that says ready and answers 503.
    let (status, stderr) = run_to_exit(dir.path(), &[("NEARDUP_INDEX__NUM_PERM", "64")]);
    assert!(!status.success(), "{status}: {stderr}");
    assert!(
        stderr.contains("index.num_perm: stored 128, configured 64"),
        "{stderr}"
    );
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("Error: the default collection cannot be restored")),
        "{stderr}"
    );
    // Changing only the threshold is fine: the LSH tables are rebuilt.
    let server = start(dir.path(), &[("NEARDUP_INDEX__THRESHOLD", "0.9")]).await;
    assert_eq!(server.stats().await["documents"], 1);
    server.kill9();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_log_is_reported_with_its_collection_file_and_offset_and_the_others_serve() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        &[("NEARDUP_STORAGE__SNAPSHOT_INTERVAL_SECS", "0")],
    )
    .await;
    let resp = server
        .client
        .put(format!("{}/collections/kept", server.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    for i in 0..20 {
        for prefix in ["", "/collections/kept"] {
            let resp = server
                .client
                .put(format!("{}{prefix}/documents/d{i}", server.base))
                .json(&json!({"text": text_for(3, i)}))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 201);
        }
    }
    server.kill9();
    // Damage the named collection's log (a damaged `default` stops the
    // start: see above).
    let kept_dir = dir.path().join("collections").join("kept");
    let seg = std::fs::read_dir(&kept_dir)
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
    let server = start(dir.path(), &[]).await;
    assert_failed(&server, "/collections/kept/documents/d1", "kept").await;
    let problem: Value = server
        .get("/collections/kept/documents/d1")
        .await
        .json()
        .await
        .unwrap();
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("repair them or delete the collection")),
        "{problem}"
    );
    let log = server.log_text();
    let name = seg.file_name().unwrap().to_string_lossy().to_string();
    assert!(log.contains(&name) && log.contains("offset"), "{log}");
    // Ready, naming the failed collection; the other collection is whole.
    let ready: Value = server.get("/readyz").await.json().await.unwrap();
    assert_eq!(
        ready,
        json!({"status": "ready", "failed_collections": ["kept"]})
    );
    assert_eq!(server.stats().await["documents"], 20);
    server.kill9();
}

/// Run the binary on `data_dir` until it exits by itself (within a
/// minute): its exit status and everything it wrote to stderr.
fn run_to_exit(data_dir: &Path, extra_env: &[(&str, &str)]) -> (std::process::ExitStatus, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_neardup"));
    cmd.env("NEARDUP_SERVER__BIND", "127.0.0.1:0")
        .env("NEARDUP_STORAGE__DATA_DIR", data_dir)
        .env("NEARDUP_LOG__FORMAT", "json")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("the neardup binary starts");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(out) => {
            let out = out.expect("waited for the server");
            (
                out.status,
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("the server did not stop by itself within a minute");
        }
    }
}

/// What is known of a short-lived collection the DDL task creates, fills
/// and deletes.
#[derive(Clone, Debug, Default)]
struct CollState {
    /// Acknowledged: it exists (created and not deleted since).
    exists: bool,
    /// Documents acknowledged in it.
    documents: u64,
    /// A create, fill or delete whose answer never came.
    pending: bool,
}

/// Create a collection, fill it with a batch, delete it; again, until the
/// server dies. Every step is recorded before it is sent and acknowledged
/// when answered.
async fn ddl(base: String, colls: Arc<Mutex<HashMap<String, CollState>>>, seed: u64) {
    let http = reqwest::Client::new();
    let mut rng = StdRng::seed_from_u64(seed);
    loop {
        let name = format!("tmp{}", rng.gen_range(0..1_000_000));
        colls
            .lock()
            .unwrap()
            .entry(name.clone())
            .or_default()
            .pending = true;
        let settings = json!({"shingle": {"kind": "char", "k": 4}, "index": {"threshold": 0.7}});
        let Ok(resp) = http
            .put(format!("{base}/collections/{name}"))
            .json(&settings)
            .send()
            .await
        else {
            return;
        };
        assert_eq!(resp.status(), 201, "PUT /collections/{name}");
        {
            let mut map = colls.lock().unwrap();
            let st = map.get_mut(&name).unwrap();
            st.exists = true;
            // Still pending: the fill below.
        }
        let docs: Vec<Value> = (0..rng.gen_range(20..200))
            .map(|i| json!({"id": format!("t{i}"), "text": text_for(7, i)}))
            .collect();
        let count = docs.len() as u64;
        let Ok(resp) = http
            .post(format!("{base}/collections/{name}/documents/batch"))
            .json(&json!({"documents": docs}))
            .send()
            .await
        else {
            return;
        };
        assert_eq!(resp.status(), 200);
        if resp.bytes().await.is_err() {
            return;
        }
        {
            let mut map = colls.lock().unwrap();
            let st = map.get_mut(&name).unwrap();
            st.documents = count;
            st.pending = true; // the delete below
        }
        let Ok(resp) = http
            .delete(format!("{base}/collections/{name}"))
            .send()
            .await
        else {
            return;
        };
        assert_eq!(resp.status(), 204, "DELETE /collections/{name}");
        let mut map = colls.lock().unwrap();
        let st = map.get_mut(&name).unwrap();
        st.exists = false;
        st.documents = 0;
        st.pending = false;
    }
}

/// Every short-lived collection is as acknowledged (or, for one whose last
/// step was not answered, in a state that step may have left); a deleted
/// one has left nothing on disk. Records what the unanswered steps did.
async fn verify_collections(
    server: &Server,
    dir: &Path,
    colls: &Mutex<HashMap<String, CollState>>,
) {
    let snapshot = colls.lock().unwrap().clone();
    for (name, st) in snapshot {
        let resp = server.get(&format!("/collections/{name}")).await;
        let exists = resp.status() == 200;
        assert!(exists || resp.status() == 404, "{name}: {}", resp.status());
        let documents = if exists {
            let body: Value = resp.json().await.unwrap();
            assert_eq!(body["status"], "ready", "{name}: {body}");
            body["documents"].as_u64().unwrap()
        } else {
            0
        };
        if st.pending {
            // A create, a fill (any prefix of the batch) or a delete.
            if exists {
                assert!(
                    st.exists || documents == 0,
                    "{name}: {documents} documents from nowhere"
                );
            }
        } else {
            assert_eq!(
                exists, st.exists,
                "{name}: acknowledged exists={}",
                st.exists
            );
            assert_eq!(documents, st.documents, "{name}: documents");
        }
        if !exists {
            assert!(
                !dir.join("collections").join(&name).exists(),
                "{name} is gone but its directory is not"
            );
        }
        let mut map = colls.lock().unwrap();
        let entry = map.get_mut(&name).unwrap();
        *entry = CollState {
            exists,
            documents,
            pending: false,
        };
    }
    // No half-created or half-deleted directory survives a restart.
    if let Ok(entries) = std::fs::read_dir(dir.join("collections")) {
        for e in entries.filter_map(|e| e.ok()) {
            let n = e.file_name().to_string_lossy().into_owned();
            assert!(!n.starts_with('.'), "leftover {n}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_in_several_collections_and_collection_changes_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let prefixes = ["", "/collections/bodies", "/collections/titles"];
    let ids: Vec<Arc<Mutex<HashMap<String, IdState>>>> =
        prefixes.iter().map(|_| Default::default()).collect();
    let colls: Arc<Mutex<HashMap<String, CollState>>> = Default::default();
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let server = start(dir.path(), &[]).await;
    for (name, settings) in [
        ("bodies", json!({})),
        (
            "titles",
            json!({"shingle": {"kind": "char", "k": 5}, "index": {"threshold": 0.7}}),
        ),
    ] {
        let resp = server
            .client
            .put(format!("{}/collections/{name}", server.base))
            .json(&settings)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201);
    }
    server.kill9();
    let rounds = 6;
    let mut checked = 0;
    for round in 0..rounds {
        let server = start(dir.path(), &[]).await;
        for (prefix, ids) in prefixes.iter().zip(&ids) {
            let expected = ids.lock().unwrap().clone();
            checked += verify_in(&server, prefix, &expected).await;
            settle_in(&server, prefix, ids).await;
        }
        verify_collections(&server, dir.path(), &colls).await;
        let mut tasks: Vec<_> = prefixes
            .iter()
            .zip(&ids)
            .enumerate()
            .map(|(c, (prefix, ids))| {
                tokio::spawn(writer(
                    format!("{}{prefix}", server.base),
                    c,
                    Arc::clone(ids),
                    rng.gen(),
                ))
            })
            .collect();
        tasks.push(tokio::spawn(ddl(
            server.base.clone(),
            Arc::clone(&colls),
            rng.gen(),
        )));
        tokio::time::sleep(Duration::from_millis(rng.gen_range(200..1200))).await;
        server.kill9();
        for t in tasks {
            t.await.expect("writer task does not panic");
        }
        eprintln!(
            "round {round}: killed; {} short-lived collections tracked",
            colls.lock().unwrap().len()
        );
    }
    let server = start(dir.path(), &[]).await;
    for (prefix, ids) in prefixes.iter().zip(&ids) {
        let expected = ids.lock().unwrap().clone();
        checked += verify_in(&server, prefix, &expected).await;
    }
    verify_collections(&server, dir.path(), &colls).await;
    eprintln!("verified {checked} id states across {rounds} kills");
    for ids in &ids {
        assert!(
            ids.lock().unwrap().len() >= 20,
            "every collection took writes"
        );
    }
    assert!(
        colls.lock().unwrap().len() >= 3,
        "collections came and went"
    );
    server.kill9();
}

/// Every present document's stored text is one of the states its writes
/// may have left, and it is the text its shingles came from.
async fn verify_texts(server: &Server, ids: &HashMap<String, IdState>) -> usize {
    let mut checked = 0;
    for (id, st) in ids {
        let resp = server.get(&format!("/documents/{id}?include=text")).await;
        if resp.status() == 404 {
            assert!(
                st.acked.is_none() || st.pending.iter().any(|t| t.is_none()),
                "{id} is gone but was acknowledged"
            );
            continue;
        }
        assert_eq!(resp.status(), 200, "{id}");
        let body: Value = resp.json().await.unwrap();
        let text = body["text"].as_str().unwrap().to_owned();
        let allowed: Vec<&String> = std::iter::once(&st.acked)
            .chain(st.pending.iter())
            .flatten()
            .collect();
        assert!(allowed.contains(&&text), "{id}: a text no write sent");
        assert!(
            holds_exactly(server, id, &text).await,
            "{id}: text and shingles disagree"
        );
        checked += 1;
    }
    checked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_texts_survive_repeated_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("NEARDUP_STORAGE__STORE_TEXT", "true")];
    let ids: Arc<Mutex<HashMap<String, IdState>>> = Default::default();
    let mut rng = StdRng::seed_from_u64(0x7e47);
    let mut checked = 0;
    for _ in 0..5 {
        let server = start(dir.path(), &env).await;
        let expected = ids.lock().unwrap().clone();
        checked += verify_texts(&server, &expected).await;
        settle(&server, &ids).await;
        let tasks: Vec<_> = (0..3)
            .map(|c| tokio::spawn(writer(server.base.clone(), c, Arc::clone(&ids), rng.gen())))
            .collect();
        // Long enough for snapshots (every second) to compact texts.
        tokio::time::sleep(Duration::from_millis(rng.gen_range(600..1800))).await;
        server.kill9();
        for t in tasks {
            t.await.expect("writer task does not panic");
        }
    }
    let server = start(dir.path(), &env).await;
    let expected = ids.lock().unwrap().clone();
    checked += verify_texts(&server, &expected).await;
    assert!(checked >= 100, "only {checked} texts checked");
    let stats = server.stats().await;
    assert!(
        stats["storage"]["text_bytes"].as_u64().unwrap() > 0,
        "{stats}"
    );
    server.kill9();
}

/// `n` documents of about 60 words for collection `name`, in batches.
async fn load_collection(server: &Server, name: &str, n: u64) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let docs: Vec<Value> = chunk
            .iter()
            .map(|&i| json!({"id": format!("d{i}"), "text": text_for(5, i)}))
            .collect();
        let resp = server
            .client
            .post(format!(
                "{}/collections/{name}/documents/batch",
                server.base
            ))
            .json(&json!({"documents": docs}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    }
}

fn index_dirs(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("index-"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reindex_killed_midway_restarts_on_the_old_recipe_and_a_finished_one_on_the_new() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]).await;
    let resp = server
        .client
        .put(format!("{}/collections/c", server.base))
        .json(&json!({"store_text": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let n = 20_000;
    load_collection(&server, "c", n).await;
    let reindex = |server: &Server| {
        server
            .client
            .post(format!("{}/collections/c/reindex", server.base))
            .json(&json!({"shingle": {"k": 2}}))
            .send()
    };
    assert_eq!(reindex(&server).await.unwrap().status(), 202);
    tokio::time::sleep(Duration::from_millis(40)).await;
    let stats: Value = server
        .get("/collections/c/stats")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        stats["reindex"]["state"], "running",
        "killed before the switch: {stats}"
    );
    server.kill9();
    let cdir = dir.path().join("collections/c");
    let server = start(dir.path(), &[]).await;
    let stats: Value = server
        .get("/collections/c/stats")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(stats["shingle"]["k"], 3, "the old recipe: {stats}");
    assert_eq!(stats["documents"], n, "{stats}");
    assert!(
        index_dirs(&cdir).is_empty(),
        "the unfinished index is removed"
    );
    assert!(holds_exactly_in(&server, "/collections/c", "d77", &text_for(5, 77)).await);
    // Again, to the end; then a kill: the new recipe is what restarts.
    assert_eq!(reindex(&server).await.unwrap().status(), 202);
    let mut done = false;
    for _ in 0..3000 {
        let stats: Value = server
            .get("/collections/c/stats")
            .await
            .json()
            .await
            .unwrap();
        if stats["reindex"]["state"] != "running" {
            assert_eq!(stats["reindex"]["state"], "done", "{stats}");
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(done);
    server.kill9();
    let server = start(dir.path(), &[]).await;
    let stats: Value = server
        .get("/collections/c/stats")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(stats["shingle"]["k"], 2, "the new recipe: {stats}");
    assert_eq!(stats["documents"], n, "{stats}");
    assert_eq!(index_dirs(&cdir).len(), 1);
    assert!(holds_exactly_in(&server, "/collections/c", "d77", &text_for(5, 77)).await);
    let body: Value = server
        .get("/collections/c/documents/d77?include=text")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["text"], json!(text_for(5, 77)));
    server.kill9();
}

/// The passage index after kill -9: every acknowledged write is found by
/// containment again (log replay, then from a snapshot), and a document
/// deleted before the kill stays out of it.
#[tokio::test]
async fn the_passage_index_is_restored_after_kill_9_from_the_log_and_from_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("NEARDUP_INDEX__PASSAGE_INDEX", "true"),
        // Snapshots only when asked: the first restart replays the log.
        ("NEARDUP_STORAGE__SNAPSHOT_INTERVAL_SECS", "3600"),
    ];
    let article =
        |i: u64| text_for(i as usize, 1000 + i) + " " + &text_for(i as usize + 7, 2000 + i);
    let server = start(dir.path(), &env).await;
    for i in 0..40u64 {
        let r = server
            .client
            .put(format!("{}/documents/a{i}", server.base))
            .json(&json!({"text": article(i)}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
    }
    let r = server
        .client
        .delete(format!("{}/documents/a3", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let excerpt = |i: u64| {
        let t = article(i);
        let w: Vec<&str> = t.split_whitespace().collect();
        w[w.len() / 4..w.len() * 3 / 4].join(" ")
    };
    let found = |server: &Server, i: u64| {
        let (client, base, text) = (server.client.clone(), server.base.clone(), excerpt(i));
        async move {
            let v: Value = client
                .post(format!("{base}/similar"))
                .json(&json!({"text": text, "measure": "query_in_stored", "threshold": 0.95}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            v["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["id"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    server.kill9();
    // From the log.
    let server = start(dir.path(), &env).await;
    for i in 0..40u64 {
        let want: Vec<String> = if i == 3 {
            vec![]
        } else {
            vec![format!("a{i}")]
        };
        assert_eq!(found(&server, i).await, want, "after replay, a{i}");
    }
    let r = server
        .client
        .post(format!("{}/admin/snapshot", server.base))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    server.kill9();
    // From the snapshot (format 4: the fingerprints are in it).
    let server = start(dir.path(), &env).await;
    for i in 0..40u64 {
        let want: Vec<String> = if i == 3 {
            vec![]
        } else {
            vec![format!("a{i}")]
        };
        assert_eq!(found(&server, i).await, want, "after the snapshot, a{i}");
    }
    server.kill9();
}
