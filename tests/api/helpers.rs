//! `spawn_app()`: a real server on 127.0.0.1:0 with typed request helpers.

use neardup::app::App;
use neardup::config::Settings;
use serde_json::Value;
use std::net::SocketAddr;
use tokio::sync::oneshot;

/// `path` as the suites of this test binary address it: a collection route
/// (`/documents...`, `/similar`, `/compare`, `/duplicates...`, `/stats`)
/// goes under `/collections/{name}` when the binary runs them against a
/// named collection (`crate::COLLECTION`); anything else is unchanged.
pub fn route(path: &str) -> String {
    let Some(name) = crate::COLLECTION else {
        return path.to_owned();
    };
    let first = |p: &str| {
        p.trim_start_matches('/')
            .split(['/', '?'])
            .next()
            .unwrap_or("")
            .to_owned()
    };
    let segment = first(path);
    let is_collection_route = neardup::http::COLLECTION_ROUTES
        .iter()
        .any(|r| first(r) == segment);
    if is_collection_route {
        format!("/collections/{name}{path}")
    } else {
        path.to_owned()
    }
}

/// The `collection` label of the collection the suites address.
pub fn collection_label() -> &'static str {
    crate::COLLECTION.unwrap_or("default")
}

/// The Redis Cluster (3 primaries, 3 replicas) every server of this test
/// binary shares when it runs the suites on the redis backend
/// (`crate::REDIS`); each server gets its own `key_prefix`, so tests never
/// see each other's data.
pub fn shared_cluster() -> &'static neardup::testkit::redis_cluster::RedisCluster {
    use neardup::testkit::redis_cluster::RedisCluster;
    static CLUSTER: std::sync::OnceLock<RedisCluster> = std::sync::OnceLock::new();
    CLUSTER.get_or_init(|| {
        skip_all_without_redis();
        RedisCluster::start(3, 1).expect("the test Redis Cluster starts")
    })
}

/// Every test of this binary needs Redis: without `redis-server` (and
/// without `CI` set: see `RedisCluster::available_or_skip`), say so in one
/// line and end the binary here, successfully, rather than fail each test.
pub fn skip_all_without_redis() {
    use neardup::testkit::redis_cluster::RedisCluster;
    if !RedisCluster::available_or_skip("tests/api_redis (the API suites on Redis)") {
        std::process::exit(0);
    }
}

/// `settings` pointed at the shared cluster under a key prefix of its
/// own: fresh for a server on a fresh data directory, and the same for
/// every server a test starts on one data directory it chose (a restart
/// finds the data it left, as it would on disk).
pub fn on_redis(mut settings: Settings) -> Settings {
    use std::hash::{DefaultHasher, Hash, Hasher};
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    settings.storage.backend = neardup::config::StorageBackend::Redis;
    settings.storage.redis.nodes = shared_cluster().urls();
    settings.storage.redis.key_prefix =
        if settings.storage.data_dir == Settings::default().storage.data_dir {
            format!(
                "t{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            )
        } else {
            let mut h = DefaultHasher::new();
            settings.storage.data_dir.hash(&mut h);
            format!("t{}-d{:x}", std::process::id(), h.finish())
        };
    settings.storage.redis.expected_documents = 10_000;
    // Collection changes wait two watch intervals (every node has seen
    // them when they answer): short ones keep the suites quick.
    settings.storage.redis.watch_interval_ms = 100;
    // Two tests at a time, each with two nodes, share one 3 + 3 cluster
    // (AOF on) with the build on a 2-core machine: a command can wait
    // behind another test's burst or a busy disk for over a second (a batch
    // of 40 was once answered 503 on the 1 s default in CI). The suites
    // check answers, not latency; the tests about timeouts set their own.
    settings.storage.redis.command_timeout_ms = 5_000;
    settings
}

pub struct TestApp {
    pub addr: SocketAddr,
    pub base: String,
    /// Where reads (`GET`) go: this server, or on the redis backend a
    /// second server over the same data (write on one, read on the other).
    pub read_base: String,
    /// That second server, when there is one.
    pub peer: Option<Box<TestApp>>,
    pub client: reqwest::Client,
    /// Sending on it, or dropping it (with the TestApp), stops the server.
    shutdown: Option<oneshot::Sender<()>>,
    pub server: tokio::task::JoinHandle<anyhow::Result<()>>,
    /// The server's storage.data_dir when the test did not choose one
    /// (removed when the TestApp is dropped).
    pub data_dir: Option<tempfile::TempDir>,
    /// A key that may create collections, when keys are configured.
    key: Option<String>,
    /// `storage.store_text`: the named collection the suites address
    /// stores texts when `default` does.
    store_text: bool,
}

/// Default settings on a random loopback port.
pub fn test_settings() -> Settings {
    let mut settings = Settings::default();
    settings.server.bind = "127.0.0.1:0".into();
    settings
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(test_settings()).await
}

/// Start a server with `settings` (its `bind` is forced to a random loopback port).
/// Start a server with `settings` (its `bind` is forced to a random loopback
/// port; a default `storage.data_dir` is replaced by a fresh temporary one)
/// and wait until it is ready.
pub async fn spawn_app_with(settings: Settings) -> TestApp {
    let app = start_app(settings).await;
    app.wait_ready().await;
    app.create_collection().await;
    app
}

/// [`spawn_app_with`] on `clock` (a `ManualClock` moves time by hand).
pub async fn spawn_app_with_clock(
    settings: Settings,
    clock: std::sync::Arc<dyn neardup::engine::Clock>,
) -> TestApp {
    let app = start_app_on(settings, clock).await;
    app.wait_ready().await;
    app.create_collection().await;
    app
}

/// Like [`spawn_app_with`], without waiting for the index to be restored.
pub async fn start_app(settings: Settings) -> TestApp {
    start_app_on(settings, std::sync::Arc::new(neardup::engine::SystemClock)).await
}

async fn start_app_on(
    settings: Settings,
    clock: std::sync::Arc<dyn neardup::engine::Clock>,
) -> TestApp {
    if !crate::REDIS || settings.storage.backend == neardup::config::StorageBackend::Redis {
        return start_one(settings, clock).await;
    }
    let settings = on_redis(settings);
    // The reading node keeps its own (empty) data directory: the data is in Redis.
    let mut peer_settings = settings.clone();
    peer_settings.storage.data_dir = Settings::default().storage.data_dir;
    let peer = start_one(peer_settings, std::sync::Arc::clone(&clock)).await;
    let mut app = start_one(settings, clock).await;
    app.read_base = peer.base.clone();
    app.peer = Some(Box::new(peer));
    app
}

async fn start_one(
    mut settings: Settings,
    clock: std::sync::Arc<dyn neardup::engine::Clock>,
) -> TestApp {
    settings.server.bind = "127.0.0.1:0".into();
    let mut data_dir = None;
    if settings.storage.data_dir == Settings::default().storage.data_dir {
        let dir = tempfile::tempdir().expect("temporary data dir");
        settings.storage.data_dir = dir.path().to_owned();
        data_dir = Some(dir);
    }
    let key = settings
        .auth
        .api_keys
        .first()
        .map(|k| k.expose().to_owned());
    let store_text = settings.storage.store_text;
    let config = settings.validate().expect("valid settings");
    // A restart on the same data directory may find its LOCK still held
    // for an instant after the stopped app closed it: a test of this
    // process that spawns a child (the kill -9 tests) forks, and the child
    // holds a copy of every descriptor until it execs (close-on-exec), an
    // flock included. Only that wait is retried, never another error.
    let mut tries = 0;
    let app = loop {
        match App::build_with_clock(config.clone(), std::sync::Arc::clone(&clock)).await {
            Err(e) if e.to_string().contains("is locked") && tries < 100 => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            built => break built.expect("app builds"),
        }
    };
    let addr = app.local_addr();
    let (tx, rx) = oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until_stopped(async move {
        let _ = rx.await;
    }));
    let test_app = TestApp {
        addr,
        base: format!("http://{addr}"),
        read_base: format!("http://{addr}"),
        peer: None,
        client: reqwest::Client::new(),
        shutdown: Some(tx),
        server,
        data_dir,
        key,
        store_text,
    };
    test_app
}

impl TestApp {
    /// Poll `/readyz` until 200 (recovery runs in the background).
    pub async fn wait_ready(&self) {
        if let Some(peer) = &self.peer {
            Box::pin(peer.wait_ready()).await;
        }
        for _ in 0..500 {
            if let Ok(r) = self.client.get(self.url("/readyz")).send().await {
                if r.status() == 200 {
                    return;
                }
            }
            assert!(
                !self.server.is_finished(),
                "server at {} stopped before it was ready",
                self.base
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("server at {} never became ready", self.base);
    }

    /// The URL of `path`, through [`route`].
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, route(path))
    }

    /// The URL a read of `path` goes to (the peer server, when there is one).
    pub fn read_url(&self, path: &str) -> String {
        format!("{}{}", self.read_base, route(path))
    }

    /// Create the named collection the suites run against (with the
    /// server's defaults, so it answers as `default` would), if any; an
    /// existing one (a restarted server) is fine.
    pub async fn create_collection(&self) {
        let Some(name) = crate::COLLECTION else {
            return;
        };
        let mut req = self
            .client
            .put(format!("{}/collections/{name}", self.base))
            .json(&serde_json::json!({"store_text": self.store_text}));
        if let Some(key) = &self.key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.expect("request sent");
        let status = resp.status().as_u16();
        assert!(
            status == 201 || status == 200,
            "creating collection {name}: {status} {}",
            resp.text().await.unwrap_or_default()
        );
    }

    /// GET `path` from the reading server.
    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(self.read_url(path))
            .send()
            .await
            .expect("request sent")
    }

    pub async fn delete(&self, path: &str) -> reqwest::Response {
        self.client
            .delete(self.url(path))
            .send()
            .await
            .expect("request sent")
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .expect("request sent")
    }

    pub async fn put_json(&self, path: &str, body: &Value) -> reqwest::Response {
        self.client
            .put(self.url(path))
            .json(body)
            .send()
            .await
            .expect("request sent")
    }

    /// POST raw bytes with an explicit content type.
    pub async fn post_raw(
        &self,
        path: &str,
        content_type: &str,
        body: impl Into<reqwest::Body>,
    ) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .expect("request sent")
    }

    /// Store a document, asserting 201.
    pub async fn insert(&self, id: &str, text: &str) -> Value {
        let resp = self
            .post_json("/documents", &serde_json::json!({"id": id, "text": text}))
            .await;
        assert_eq!(resp.status(), 201, "inserting {id}");
        resp.json().await.unwrap()
    }
}

/// Assert an RFC 9457 problem with `status`; returns the body.
pub async fn assert_problem(resp: reqwest::Response, status: u16) -> Value {
    assert_eq!(resp.status().as_u16(), status, "status");
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    assert!(
        ct.starts_with("application/problem+json"),
        "content-type {ct:?}"
    );
    let body: Value = resp.json().await.expect("problem body is JSON");
    assert_eq!(body["status"], status, "{body}");
    for key in ["type", "title", "detail"] {
        assert!(body[key].is_string(), "problem lacks {key}: {body}");
    }
    body
}

// ---------------------------------------------------------------------------
// Additions for the endpoint suites (documents, similar, errors, ops,
// concurrency). Everything below is new; nothing above changed.
// ---------------------------------------------------------------------------

use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Percent-encode one path segment or query value (every non-alphanumeric byte).
pub fn encode(s: &str) -> String {
    utf8_percent_encode(s, NON_ALPHANUMERIC).to_string()
}

/// `/documents/<encoded id>`.
pub fn doc_path(id: &str) -> String {
    format!("/documents/{}", encode(id))
}

/// `/similar?id=..&threshold=..&limit=..`, omitting absent parameters.
pub fn similar_path(id: &str, threshold: Option<f64>, limit: Option<usize>) -> String {
    let mut path = format!("/similar?id={}", encode(id));
    if let Some(t) = threshold {
        path.push_str(&format!("&threshold={t}"));
    }
    if let Some(l) = limit {
        path.push_str(&format!("&limit={l}"));
    }
    path
}

/// `/compare?a=..&b=..`.
pub fn compare_path(a: &str, b: &str) -> String {
    format!("/compare?a={}&b={}", encode(a), encode(b))
}

impl TestApp {
    /// Any method, no body.
    pub async fn request(&self, method: reqwest::Method, path: &str) -> reqwest::Response {
        self.client
            .request(method, self.url(path))
            .send()
            .await
            .expect("request sent")
    }

    /// Stop the server (as dropping the TestApp does) and wait for its task.
    pub async fn stop(self) -> anyhow::Result<()> {
        let TestApp {
            shutdown, server, ..
        } = self;
        drop(shutdown);
        server.await.expect("server task did not panic")
    }

    /// Signal shutdown (as SIGTERM would) and return at once.
    pub fn begin_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    /// GET a path, assert `200`, and return the JSON body.
    pub async fn get_json(&self, path: &str) -> Value {
        let resp = self.get(path).await;
        let status = resp.status();
        let text = resp.text().await.unwrap();
        assert_eq!(status, 200, "GET {path}: {text}");
        serde_json::from_str(&text).expect("JSON body")
    }

    /// `GET /stats`.
    pub async fn stats(&self) -> Value {
        self.get_json("/stats").await
    }

    /// `GET /metrics` as text; with a peer server, the two servers'
    /// samples summed series by series (the deployment's counts: each node
    /// counts the requests it served).
    pub async fn metrics(&self) -> String {
        let fetch = |base: String| {
            let client = self.client.clone();
            async move {
                let resp = client
                    .get(format!("{base}/metrics"))
                    .send()
                    .await
                    .expect("request sent");
                assert_eq!(resp.status(), 200);
                resp.text().await.unwrap()
            }
        };
        let own = fetch(self.base.clone()).await;
        if self.peer.is_none() {
            return own;
        }
        let other = fetch(self.read_base.clone()).await;
        let mut sums: Vec<(String, f64)> = Vec::new();
        let mut comments = Vec::new();
        for line in own.lines().chain(other.lines()) {
            if line.starts_with('#') {
                if !comments.contains(&line) {
                    comments.push(line);
                }
                continue;
            }
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(v) = value.parse::<f64>() else {
                continue;
            };
            match sums.iter_mut().find(|(s, _)| s == series) {
                Some((_, sum)) => *sum += v,
                None => sums.push((series.to_owned(), v)),
            }
        }
        let mut text: Vec<String> = comments.into_iter().map(str::to_owned).collect();
        text.extend(sums.into_iter().map(|(s, v)| format!("{s} {v}")));
        text.join("\n")
    }

    /// `GET /similar`, asserting `200`.
    pub async fn similar(&self, id: &str, threshold: Option<f64>, limit: Option<usize>) -> Value {
        self.get_json(&similar_path(id, threshold, limit)).await
    }

    /// `GET /compare`, asserting `200`.
    pub async fn compare(&self, a: &str, b: &str) -> Value {
        self.get_json(&compare_path(a, b)).await
    }
}

/// The ids of a `results`/`similar` array, in order.
pub fn result_ids(results: &Value) -> Vec<String> {
    results
        .as_array()
        .expect("results is an array")
        .iter()
        .map(|m| m["id"].as_str().expect("id is a string").to_owned())
        .collect()
}

/// The value of the sample `name{labels...}` whose labels include every
/// `key="value"` in `labels` (label order does not matter); `None` if absent.
pub fn metric_value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, rest) = match series.split_once('{') {
                Some((m, rest)) => (m, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            if metric != name {
                return None;
            }
            let have: Vec<&str> = rest.split(',').collect();
            labels
                .iter()
                .all(|(k, v)| have.contains(&format!("{k}=\"{v}\"").as_str()))
                .then(|| value.parse().expect("numeric sample"))
        })
}

// --- A reference shingler: the docs/examples.md recipe on ASCII text, written
// --- independently of the server, used as the oracle for exact Jaccard.

/// Lowercase, drop everything but ASCII letters, digits, `_` and whitespace,
/// collapse whitespace, trim (NFKC is the identity on the ASCII texts the tests use).
pub fn reference_normalize(text: &str) -> String {
    assert!(text.is_ascii(), "the reference shingler handles ASCII only");
    let kept: String = text
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || c.is_whitespace())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    kept.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Distinct word k-shingles of `text` (one shingle of all words if fewer than k).
pub fn reference_word_shingles(text: &str, k: usize) -> BTreeSet<String> {
    let norm = reference_normalize(text);
    let words: Vec<&str> = norm.split(' ').filter(|w| !w.is_empty()).collect();
    if words.is_empty() {
        return BTreeSet::new();
    }
    if words.len() < k {
        return BTreeSet::from([words.join(" ")]);
    }
    words.windows(k).map(|w| w.join(" ")).collect()
}

/// (intersection, union) of the word 3-shingle sets of `a` and `b`.
pub fn reference_overlap(a: &str, b: &str) -> (usize, usize) {
    let (sa, sb) = (reference_word_shingles(a, 3), reference_word_shingles(b, 3));
    let inter = sa.intersection(&sb).count();
    (inter, sa.len() + sb.len() - inter)
}

pub use neardup::testkit::vocabulary;

/// The `neardup` binary of this build, on its embedded defaults: no
/// `NEARDUP_*` variable of the test's environment leaks in.
pub fn neardup() -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"));
    for (k, _) in std::env::vars() {
        if k.starts_with("NEARDUP_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

// --- Raw HTTP/1.1 over TCP, for requests reqwest cannot hold half-sent.

/// A connection that has sent a request's head and part of its body.
pub struct PartialRequest {
    pub stream: TcpStream,
    pub rest: Vec<u8>,
}

/// Send `POST path` with a JSON `body`, but only its first `sent` bytes.
pub async fn start_partial_post(
    addr: SocketAddr,
    path: &str,
    body: &[u8],
    sent: usize,
) -> PartialRequest {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let path = route(path);
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body[..sent]).await.unwrap();
    stream.flush().await.unwrap();
    PartialRequest {
        stream,
        rest: body[sent..].to_vec(),
    }
}

/// A raw response: status, lower-cased headers, body.
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl PartialRequest {
    /// Send the rest of the body (if `finish`) and read the whole response
    /// (the request asked for `Connection: close`).
    pub async fn complete(mut self, finish: bool) -> RawResponse {
        if finish {
            self.stream.write_all(&self.rest).await.unwrap();
            self.stream.flush().await.unwrap();
        }
        let mut raw = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), self.stream.read_to_end(&mut raw))
            .await
            .expect("response within 10 s")
            .expect("read response");
        parse_raw_response(&raw)
    }
}

fn parse_raw_response(raw: &[u8]) -> RawResponse {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
    let head = std::str::from_utf8(&raw[..split]).expect("ASCII head");
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect::<Vec<_>>();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    RawResponse {
        status,
        headers,
        body,
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size");
        let size = usize::from_str_radix(
            std::str::from_utf8(&data[..line_end])
                .unwrap()
                .split(';')
                .next()
                .unwrap()
                .trim(),
            16,
        )
        .expect("hex chunk size");
        data = &data[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// Equal up to the last bits lost by a JSON round trip (serde_json's
/// default float parser is not always correctly rounded).
pub fn approx_eq(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12
}

/// Assert two (id, score) lists are equal: ids exactly, scores up to [`approx_eq`].
#[track_caller]
pub fn assert_scores_eq(actual: &[(String, f64)], expected: &[(String, f64)]) {
    let same = actual.len() == expected.len()
        && actual
            .iter()
            .zip(expected)
            .all(|(a, e)| a.0 == e.0 && approx_eq(a.1, e.1));
    assert!(
        same,
        "scores differ:\n  actual:   {actual:?}\n  expected: {expected:?}"
    );
}

/// Texts a real deployment gets: accents, typographic quotes, currency,
/// Cyrillic, CJK, emoji (with joiners and flags), combining marks, spaces.
pub const WORLD_TEXTS: &[(&str, &str)] = &[
    ("ascii", "The quick brown fox jumps over the lazy dog"),
    ("accents", "Crème brûlée à l’école: déjà vu, naïve façade"),
    ("quotes", "He said “don’t” — and ‘maybe’ … £12.50 or €9"),
    (
        "cyrillic",
        "Съешь же ещё этих мягких французских булок, да выпей чаю",
    ),
    ("cjk", "東京都の天気は晴れです。明日も晴れるでしょう"),
    ("emoji", "family 👩‍👩‍👧 flag 🇫🇷 thumbs 👍🏽 and more 🎉 text"),
    (
        "combining",
        "e\u{301}cole cafe\u{301} n\u{303}o Zu\u{308}rich  two  spaces\n",
    ),
];

/// `POST url` (a `/similar` route) with `body`: the near-duplicates found,
/// as (id, exact Jaccard) sorted by id.
pub async fn similar_scores(app: &TestApp, url: &str, body: &Value) -> Vec<(String, f64)> {
    let answer: Value = app
        .client
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut out: Vec<(String, f64)> = answer["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_owned(),
                r["jaccard"].as_f64().unwrap(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Poll collection `name`'s stats on the node that runs its reindex (the
/// one writes go to) until the reindex is no longer running; the stats.
pub async fn wait_reindex_done(app: &TestApp, name: &str) -> Value {
    let stats = || async {
        app.client
            .get(format!("{}/collections/{name}/stats", app.base))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    for _ in 0..6000 {
        if stats().await["reindex"]["state"] != "running" {
            // Read again: a request that resolved the collection just before
            // the switch reports the old index's figures beside the shared
            // progress, which may already say "done"; one begun after that
            // answer sees the new index (the switch precedes the state).
            return stats().await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the reindex of {name} never finished");
}

/// A deterministic generator for test corpora (no random seed): Knuth's
/// MMIX linear congruential step, the high bits.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }
}
