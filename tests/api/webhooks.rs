//! Webhooks and the event feed (issue 45) through the API, against real
//! receivers: a small HTTP server each test starts on 127.0.0.1:0 that
//! verifies every delivery with the Standard Webhooks project's own Rust
//! library (`standardwebhooks`, an implementation independent of ours)
//! and records what arrived. Texts are real sentences with accents,
//! typographic quotes and other scripts; a near-duplicate is a text with
//! its last word changed.

use crate::helpers::{assert_problem, route, spawn_app_with, test_settings, TestApp};
use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use neardup::config::Settings;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(crate) const TEXTS: [&str; 6] = [
    "Le comité a présenté vendredi son rapport annuel sur la qualité de l’eau potable dans \
     les communes du département, en soulignant que les analyses réalisées entre janvier et \
     décembre montrent une nette amélioration par rapport à l’année précédente, même si \
     plusieurs villages restent exposés à des concentrations élevées de nitrates",
    "Die Stadtverwaltung hat am Montag angekündigt, dass die Sanierung der historischen Brücke \
     über den Fluss im kommenden Frühjahr beginnen wird; die Arbeiten sollen ungefähr achtzehn \
     Monate dauern und werden zum größten Teil aus Mitteln des Landes finanziert, teilte der \
     Bürgermeister auf einer Pressekonferenz im Rathaus mit",
    "The council’s “green corridor” plan, costed at £4.2 million, would plant eleven thousand \
     trees along the disused railway line and link the two largest parks in the city with a \
     continuous cycle path, according to documents published on Thursday ahead of the public \
     consultation that opens next month",
    "Городской совет утвердил в четверг новый план развития общественного транспорта, \
     который предусматривает строительство двух трамвайных линий и обновление автобусного \
     парка в течение ближайших пяти лет, сообщила пресс служба администрации после \
     заседания депутатов",
    "市政府周一宣布，将在明年春季开始对老城区的供水管网进行全面改造，工程预计持续十八个月，\
     主要资金来自省级财政，改造完成后居民的用水质量和供水稳定性将得到明显提升",
    "La biblioteca municipal ampliará su horario a partir de septiembre y abrirá también los \
     domingos por la mañana, después de que más de tres mil vecinos firmaran la petición \
     presentada el pasado invierno por la asociación de madres y padres del barrio",
];

/// `TEXTS[i]` with its last word replaced: a near-duplicate of it.
pub(crate) fn near(i: usize, tail: &str) -> String {
    let t = TEXTS[i];
    match t.rsplit_once(' ') {
        Some((head, _)) => format!("{head} {tail}"),
        None => format!("{t}{tail}"),
    }
}

/// What a receiver got: one verified delivery.
#[derive(Clone, Debug)]
pub(crate) struct Received {
    pub webhook_id: String,
    pub body: Value,
}

/// How the receiver answers.
pub(crate) const ANSWER_OK: usize = 0;
pub(crate) const ANSWER_500: usize = 1;
pub(crate) const ANSWER_HANG: usize = 2;
/// `200 OK` with a text body of ~35 KB (a receiver that echoes, or
/// answers with an HTML page).
pub(crate) const ANSWER_OK_BODY: usize = 3;

pub(crate) struct ReceiverState {
    secret: Mutex<Option<String>>,
    pub answer: AtomicUsize,
    /// Answer 500 to this many requests first, then `answer`.
    pub fail_first: AtomicUsize,
    /// Every request (verified or not), by webhook-id.
    pub attempts: Mutex<Vec<String>>,
    pub delivered: Mutex<Vec<Received>>,
    pub bad_signatures: AtomicUsize,
    /// The client address of every request (one per connection).
    pub peers: Mutex<Vec<std::net::SocketAddr>>,
}

/// A webhook receiver on loopback.
pub(crate) struct Receiver {
    pub url: String,
    pub state: Arc<ReceiverState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(
    State(s): State<Arc<ReceiverState>>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    s.peers.lock().unwrap().push(peer);
    judge(&s, headers, body).await
}

async fn judge(s: &ReceiverState, headers: HeaderMap, body: Bytes) -> Response {
    let id = headers
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    s.attempts.lock().unwrap().push(id.clone());
    let secret = s
        .secret
        .lock()
        .unwrap()
        .clone()
        .expect("the test set the secret");
    let verified = standardwebhooks::Webhook::new(&secret)
        .expect("a Standard Webhooks secret")
        .verify(&body, &headers);
    if verified.is_err() {
        s.bad_signatures.fetch_add(1, Ordering::SeqCst);
        return StatusCode::BAD_REQUEST.into_response();
    }
    if s.fail_first
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    let answer = s.answer.load(Ordering::SeqCst);
    match answer {
        ANSWER_500 => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        ANSWER_HANG => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            return StatusCode::OK.into_response();
        }
        _ => {}
    }
    assert_eq!(
        headers.get("content-type").unwrap(),
        "application/json",
        "content type"
    );
    let body: Value = serde_json::from_slice(&body).expect("a JSON payload");
    s.delivered.lock().unwrap().push(Received {
        webhook_id: id,
        body,
    });
    if answer == ANSWER_OK_BODY {
        // Longer than one read of the client's: the client must read it.
        return (StatusCode::OK, "reçu, merci. ".repeat(2500)).into_response();
    }
    StatusCode::NO_CONTENT.into_response()
}

impl Receiver {
    /// A receiver on a free port (or on `port`).
    pub(crate) async fn start(port: u16) -> Receiver {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("the receiver binds");
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(ReceiverState {
            secret: Mutex::new(None),
            answer: AtomicUsize::new(ANSWER_OK),
            fail_first: AtomicUsize::new(0),
            attempts: Mutex::new(Vec::new()),
            delivered: Mutex::new(Vec::new()),
            bad_signatures: AtomicUsize::new(0),
            peers: Mutex::new(Vec::new()),
        });
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(Arc::clone(&state));
        let task = tokio::spawn(async move {
            let _ = axum::serve(
                listener,
                app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
            )
            .await;
        });
        Receiver {
            url: format!("http://127.0.0.1:{port}/hook"),
            state,
            task,
        }
    }

    pub(crate) fn expect_secret(&self, secret: &str) {
        *self.state.secret.lock().unwrap() = Some(secret.to_owned());
    }

    pub(crate) fn delivered(&self) -> Vec<Received> {
        self.state.delivered.lock().unwrap().clone()
    }

    /// Wait (at most a minute) until `n` deliveries arrived.
    pub(crate) async fn wait_for(&self, n: usize) -> Vec<Received> {
        for _ in 0..1200 {
            let got = self.delivered();
            if got.len() >= n {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "{} deliveries arrived, {n} expected; attempts: {:?}",
            self.delivered().len(),
            self.state.attempts.lock().unwrap()
        );
    }
}

/// A loopback port nothing listens on (bound, then released).
pub(crate) fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Settings that let webhooks reach the loopback receivers, with small
/// backoffs so retries come quickly.
pub(crate) fn webhook_settings() -> Settings {
    let mut s = test_settings();
    s.webhooks.allowed_hosts = vec!["127.0.0.1".into()];
    s.webhooks.backoff_base_ms = 50;
    s.webhooks.backoff_max_ms = 200;
    s.webhooks.max_attempts = 3;
    s.webhooks.timeout_ms = 500;
    s.webhooks.poll_ms = 50;
    s
}

/// Create a subscription, asserting 201; returns its answer.
async fn subscribe(app: &TestApp, body: Value) -> Value {
    let resp = app.post_json("/webhooks", &body).await;
    assert_eq!(resp.status(), 201, "creating a subscription");
    let location = resp.headers()["location"].to_str().unwrap().to_owned();
    let v: Value = resp.json().await.unwrap();
    assert_eq!(
        location,
        route(&format!("/webhooks/{}", v["id"].as_str().unwrap()))
    );
    v
}

async fn write(app: &TestApp, id: &str, text: &str) {
    let resp = app
        .put_json(&format!("/documents/{id}"), &json!({"text": text}))
        .await;
    assert!(
        resp.status().is_success(),
        "writing {id}: {}",
        resp.status()
    );
}

fn documents(got: &[Received]) -> BTreeSet<String> {
    got.iter()
        .map(|r| r.body["data"]["document"].as_str().unwrap().to_owned())
        .collect()
}

/// Every event of the feed, read `page` at a time from the start.
async fn feed(app: &TestApp, page: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let path = match &after {
            None => format!("/events?limit={page}"),
            Some(c) => format!("/events?limit={page}&after={c}"),
        };
        let resp = app.get(&path).await;
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "application/x-ndjson");
        let next = resp
            .headers()
            .get("neardup-next-cursor")
            .map(|v| v.to_str().unwrap().to_owned());
        let text = resp.text().await.unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON event per line"))
            .collect();
        // The same page as one JSON object, for clients that ask for it.
        let page_json: Value = app
            .client
            .get(app.read_url(&path))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            page_json["events"],
            Value::Array(lines.clone()),
            "{page_json}"
        );
        assert_eq!(page_json["next_cursor"].as_str(), next.as_deref());
        if lines.is_empty() {
            assert_eq!(next, after, "an empty page gives back the cursor asked");
            return out;
        }
        assert_eq!(
            next.as_deref(),
            lines.last().unwrap()["cursor"].as_str(),
            "the next cursor is the last event's"
        );
        out.extend(lines);
        after = next;
    }
}

#[tokio::test]
async fn duplicate_writes_are_delivered_signed_with_their_matches_and_uniques_are_not() {
    let receiver = Receiver::start(0).await;
    let app = spawn_app_with(webhook_settings()).await;
    let sub = subscribe(&app, json!({"url": receiver.url})).await;
    let secret = sub["secret"].as_str().unwrap();
    assert!(secret.starts_with("whsec_"), "{sub}");
    receiver.expect_secret(secret);
    assert_eq!(
        sub["kinds"],
        json!(["document.duplicate", "document.refused"])
    );
    assert_eq!(sub["measure"], "jaccard");

    for (i, t) in TEXTS.iter().enumerate().take(4) {
        write(&app, &format!("orig-{i}"), t).await;
    }
    // Near-duplicates: one by POST, one by PUT, one in a batch beside a
    // unique text.
    let resp = app
        .post_json(
            "/documents",
            &json!({"id": "dup-0", "text": near(0, "phosphates")}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    write(&app, "dup-1", &near(1, "Stadthaus")).await;
    let resp = app
        .post_json(
            "/documents/batch",
            &json!({"documents": [
                {"id": "dup-2", "text": near(2, "week")},
                {"id": "unique-5", "text": TEXTS[5]},
            ]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    write(&app, "unique-4", TEXTS[4]).await;

    let got = receiver.wait_for(3).await;
    assert_eq!(
        documents(&got),
        ["dup-0", "dup-1", "dup-2"].map(String::from).into(),
    );
    let sub_id = sub["id"].as_str().unwrap();
    for r in &got {
        assert_eq!(r.body["type"], "document.duplicate");
        let data = &r.body["data"];
        let doc = data["document"].as_str().unwrap();
        let orig = doc.replace("dup-", "orig-");
        let matches = data["matches"].as_array().unwrap();
        assert_eq!(matches.len(), 1, "{}", r.body);
        assert_eq!(matches[0]["id"], orig.as_str());
        assert!(matches[0]["jaccard"].as_f64().unwrap() >= sub["threshold"].as_f64().unwrap());
        assert_eq!(
            r.webhook_id,
            format!("{}_{sub_id}", data["event"].as_str().unwrap())
        );
        assert_eq!(data["collection"], crate::helpers::collection_label());
    }
    assert_eq!(receiver.state.bad_signatures.load(Ordering::SeqCst), 0);

    // The feed holds the same events, in order, page after page.
    let events = feed(&app, 1).await;
    let ids: Vec<&str> = events.iter().map(|e| e["id"].as_str().unwrap()).collect();
    let mut delivered: Vec<&str> = got
        .iter()
        .map(|r| r.body["data"]["event"].as_str().unwrap())
        .collect();
    let mut sorted_ids = ids.clone();
    sorted_ids.sort();
    delivered.sort();
    assert_eq!(sorted_ids, delivered);
    assert_eq!(
        feed(&app, 100).await,
        events,
        "pages of one and of a hundred agree"
    );
    assert_eq!(events[0]["type"], "document.duplicate");
    assert!(events.iter().all(|e| e["write"] == "created"));

    // Nothing more arrives: the unique writes were not events.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.delivered().len(), 3);
    let listed = app.get_json("/webhooks").await;
    assert_eq!(listed["webhooks"].as_array().unwrap().len(), 1);
    assert!(listed["webhooks"][0].get("secret").is_none(), "{listed}");
    let one = app.get_json(&format!("/webhooks/{sub_id}")).await;
    assert!(one.get("secret").is_none(), "{one}");
    assert_eq!(one["pending"], 0);
    assert_eq!(one["failed"], 0);
    assert!(!listed.to_string().contains(secret));
}

#[tokio::test]
async fn an_if_unique_refusal_is_an_event_with_the_stored_matches() {
    let receiver = Receiver::start(0).await;
    let app = spawn_app_with(webhook_settings()).await;
    let sub = subscribe(
        &app,
        json!({"url": receiver.url, "kinds": ["document.refused"]}),
    )
    .await;
    receiver.expect_secret(sub["secret"].as_str().unwrap());
    write(&app, "première", TEXTS[3]).await;
    // A duplicate that is stored is no event for this subscription.
    write(&app, "stored-copy", &near(3, "народа")).await;
    let resp = app
        .post_json(
            "/documents?if_unique=true",
            &json!({"id": "refusée", "text": near(3, "горожан")}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.json::<Value>().await.unwrap()["inserted"], false);
    let got = receiver.wait_for(1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.delivered().len(), 1);
    let data = &got[0].body["data"];
    assert_eq!(got[0].body["type"], "document.refused");
    assert_eq!(data["document"], "refusée");
    assert_eq!(data["write"], "refused");
    let matched: BTreeSet<&str> = data["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(matched, ["première", "stored-copy"].into());
}

#[tokio::test]
async fn a_receiver_answering_500_is_retried_until_it_accepts_under_the_same_webhook_id() {
    let receiver = Receiver::start(0).await;
    let mut settings = webhook_settings();
    settings.webhooks.max_attempts = 5;
    let app = spawn_app_with(settings).await;
    let sub = subscribe(&app, json!({"url": receiver.url})).await;
    receiver.expect_secret(sub["secret"].as_str().unwrap());
    receiver.state.fail_first.store(2, Ordering::SeqCst);
    write(&app, "a", TEXTS[2]).await;
    write(&app, "b", &near(2, "year")).await;
    let got = receiver.wait_for(1).await;
    let attempts = receiver.state.attempts.lock().unwrap().clone();
    assert_eq!(
        attempts.len(),
        3,
        "two refused attempts, then the accepted one"
    );
    assert!(
        attempts.iter().all(|a| *a == got[0].webhook_id),
        "{attempts:?}"
    );
    if crate::REDIS {
        // Either node may have made the attempts.
        return;
    }
    let metrics = app.metrics().await;
    let label = crate::helpers::collection_label();
    assert_eq!(
        crate::helpers::metric_value(
            &metrics,
            "neardup_webhook_deliveries_total",
            &[("collection", label), ("outcome", "retry")]
        ),
        Some(2.0)
    );
}

/// A receiver answering `200 OK` with a body gets every delivery on one
/// connection: each answer is read to its end, so the connection goes back
/// to the pool (a body longer than what arrived with the head, dropped
/// unread, closes it: four connections here, checked by hand).
#[tokio::test]
async fn a_receiver_answering_200_with_a_body_gets_every_delivery_on_one_connection() {
    let receiver = Receiver::start(0).await;
    receiver
        .state
        .answer
        .store(ANSWER_OK_BODY, Ordering::SeqCst);
    let app = spawn_app_with(webhook_settings()).await;
    let sub = subscribe(&app, json!({"url": receiver.url})).await;
    receiver.expect_secret(sub["secret"].as_str().unwrap());
    let sub_id = sub["id"].as_str().unwrap();
    for (i, text) in TEXTS.iter().enumerate().take(4) {
        write(&app, &format!("orig-{i}"), text).await;
        write(&app, &format!("dup-{i}"), &near(i, "semaine")).await;
        receiver.wait_for(i + 1).await;
        // Settled (so its answer was read) before the next is sent.
        let mut pending = Value::Null;
        for _ in 0..200 {
            pending = app.get_json(&format!("/webhooks/{sub_id}")).await["pending"].clone();
            if pending == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(pending, 0, "delivery {i} settled");
    }
    let peers = receiver.state.peers.lock().unwrap().clone();
    assert_eq!(peers.len(), 4, "{peers:?}");
    let connections: BTreeSet<_> = peers.into_iter().collect();
    // On Redis either node may deliver, each on its own connection.
    let most = if crate::REDIS { 2 } else { 1 };
    assert!(connections.len() <= most, "{connections:?}");
}

/// Wait until subscription `id` lists `n` failed deliveries.
async fn wait_failed(app: &TestApp, id: &str, n: usize) -> Value {
    for _ in 0..1200 {
        let v = app.get_json(&format!("/webhooks/{id}/failed")).await;
        if v["failed"].as_array().unwrap().len() >= n {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("subscription {id} never listed {n} failed deliveries");
}

#[tokio::test]
async fn timeouts_and_refused_connections_end_in_the_failed_list_then_a_retry_by_hand_delivers() {
    let hanging = Receiver::start(0).await;
    hanging.state.answer.store(ANSWER_HANG, Ordering::SeqCst);
    let port = closed_port();
    let app = spawn_app_with(webhook_settings()).await;
    let slow = subscribe(&app, json!({"url": hanging.url})).await;
    hanging.expect_secret(slow["secret"].as_str().unwrap());
    let refused = subscribe(
        &app,
        json!({"url": format!("http://127.0.0.1:{port}/hook")}),
    )
    .await;
    write(&app, "a", TEXTS[0]).await;
    write(&app, "b", &near(0, "sulfates")).await;

    let (slow_id, refused_id) = (
        slow["id"].as_str().unwrap(),
        refused["id"].as_str().unwrap(),
    );
    let failed = wait_failed(&app, slow_id, 1).await;
    let f = &failed["failed"][0];
    assert_eq!(f["attempts"], 3);
    assert!(
        f["error"].as_str().unwrap().contains("no answer within"),
        "{f}"
    );
    assert_eq!(f["event"]["document"], "b");
    let failed = wait_failed(&app, refused_id, 1).await;
    let f = &failed["failed"][0];
    assert!(f["error"].as_str().unwrap().contains("connection"), "{f}");
    let event = f["event"]["id"].as_str().unwrap().to_owned();
    assert_eq!(hanging.state.attempts.lock().unwrap().len(), 3);
    assert!(hanging.delivered().is_empty());

    // The receivers are back: a retry by hand delivers.
    hanging.state.answer.store(ANSWER_OK, Ordering::SeqCst);
    let resp = app
        .post_json(&format!("/webhooks/{slow_id}/failed/retry"), &json!({}))
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.json::<Value>().await.unwrap()["retried"], 1);
    let got = hanging.wait_for(1).await;
    assert_eq!(got[0].body["data"]["document"], "b");

    let back = Receiver::start(port).await;
    back.expect_secret(refused["secret"].as_str().unwrap());
    let resp = app
        .post_json(
            &format!("/webhooks/{refused_id}/failed/retry"),
            &json!({"event": "evt_not_one_of_them"}),
        )
        .await;
    assert_eq!(resp.json::<Value>().await.unwrap()["retried"], 0);
    let resp = app
        .post_json(
            &format!("/webhooks/{refused_id}/failed/retry"),
            &json!({"event": event}),
        )
        .await;
    assert_eq!(resp.json::<Value>().await.unwrap()["retried"], 1);
    let got = back.wait_for(1).await;
    assert_eq!(got[0].body["data"]["event"], event.as_str());
    let failed = app
        .get_json(&format!("/webhooks/{refused_id}/failed"))
        .await;
    assert_eq!(failed["failed"], json!([]));
}

/// A problem answer with `status` and the `type` of `slug`.
async fn problem(resp: reqwest::Response, status: u16, slug: &str) {
    let body = assert_problem(resp, status).await;
    assert_eq!(
        body["type"],
        format!("urn:neardup:problem:{slug}"),
        "{body}"
    );
}

#[tokio::test]
async fn hostile_subscriptions_are_refused_with_clear_4xx() {
    let mut settings = test_settings();
    settings.webhooks.max_subscriptions = 5;
    let app = spawn_app_with(settings).await;
    for url in [
        "http://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://127.0.0.1:8080/",
        "http://[::1]/x",
        "ftp://example.com/hook",
        "file:///etc/passwd",
        "not a url",
    ] {
        let resp = app.post_json("/webhooks", &json!({"url": url})).await;
        problem(resp, 422, "webhook-url-not-allowed").await;
    }
    let long = format!("https://example.com/{}", "é".repeat(5_000));
    let resp = app.post_json("/webhooks", &json!({"url": long})).await;
    let body = assert_problem(resp, 422).await;
    assert!(
        body["detail"].as_str().unwrap().contains("max_url_bytes"),
        "{body}"
    );
    for secret in ["", "whsec_", "whsec_c2hvcnQ=", "not-a-secret", "whsec_!!!"] {
        let resp = app
            .post_json(
                "/webhooks",
                &json!({"url": "https://example.com/hook", "secret": secret}),
            )
            .await;
        let body = assert_problem(resp, 422).await;
        assert!(
            body["detail"].as_str().unwrap().contains("secret"),
            "{body}"
        );
    }
    let resp = app
        .post_json(
            "/webhooks",
            &json!({"url": "https://example.com/h", "kinds": ["document.deleted"]}),
        )
        .await;
    problem(resp, 422, "invalid-body").await;
    let resp = app
        .post_json(
            "/webhooks",
            &json!({"url": "https://example.com/h", "threshold": 1.5}),
        )
        .await;
    problem(resp, 400, "invalid-threshold").await;
    let resp = app
        .post_json(
            "/webhooks",
            &json!({"url": "https://example.com/h", "measure": "cosine"}),
        )
        .await;
    problem(resp, 422, "invalid-body").await;
    let resp = app.get("/webhooks/wh_none").await;
    problem(resp, 404, "webhook-not-found").await;
    let resp = app.delete("/webhooks/wh_none").await;
    problem(resp, 404, "webhook-not-found").await;
    let resp = app.get("/events?after=zzz").await;
    problem(resp, 400, "invalid-cursor").await;
    let resp = app.get("/events?limit=0").await;
    problem(resp, 400, "invalid-parameter").await;

    // A given secret is kept and shown once; then the limit.
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let sub = subscribe(
        &app,
        json!({"url": "https://hooks.example.com/a?token=1", "secret": secret, "id": "mine"}),
    )
    .await;
    assert_eq!(sub["secret"], secret);
    for i in 1..5 {
        subscribe(
            &app,
            json!({"url": format!("https://hooks.example.com/{i}")}),
        )
        .await;
    }
    let resp = app
        .post_json("/webhooks", &json!({"url": "https://hooks.example.com/6"}))
        .await;
    problem(resp, 409, "too-many-subscriptions").await;
    let all = app.get("/webhooks").await.text().await.unwrap();
    assert!(!all.contains("whsec_"), "{all}");
    let resp = app.delete("/webhooks/mine").await;
    assert_eq!(resp.status(), 204);
    subscribe(&app, json!({"url": "https://hooks.example.com/6"})).await;
}

#[tokio::test]
async fn subscriptions_their_deliveries_and_the_feed_survive_a_reindex() {
    if crate::COLLECTION.is_some() {
        // The test makes a collection of its own; once is enough.
        return;
    }
    let receiver = Receiver::start(0).await;
    let app = spawn_app_with(webhook_settings()).await;
    let resp = app
        .put_json("/collections/revues", &json!({"store_text": true}))
        .await;
    assert_eq!(resp.status(), 201);
    let resp = app
        .post_json(
            "/collections/revues/webhooks",
            &json!({"url": receiver.url, "id": "avant"}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    let sub: Value = resp.json().await.unwrap();
    receiver.expect_secret(sub["secret"].as_str().unwrap());
    let put = |id: &'static str, text: String| {
        let app = &app;
        async move {
            let r = app
                .put_json(
                    &format!("/collections/revues/documents/{id}"),
                    &json!({"text": text}),
                )
                .await;
            assert!(r.status().is_success(), "{id}: {}", r.status());
        }
    };
    put("a", TEXTS[5].to_owned()).await;
    put("b", near(5, "barrio")).await;
    receiver.wait_for(1).await;

    let resp = app
        .post_json(
            "/collections/revues/reindex",
            &json!({"index": {"threshold": 0.7}}),
        )
        .await;
    assert!(resp.status().is_success(), "{}", resp.status());
    let stats = crate::helpers::wait_reindex_done(&app, "revues").await;
    assert_eq!(stats["reindex"]["state"], "done", "{stats}");

    put("c", near(5, "vecindario")).await;
    let got = receiver.wait_for(2).await;
    assert_eq!(documents(&got), ["b", "c"].map(String::from).into());
    let listed = app.get_json("/collections/revues/webhooks").await;
    assert_eq!(listed["webhooks"][0]["id"], "avant", "{listed}");
    // On Redis the feed is read from the other node, which follows the
    // reindex's switch to the new keys within its catalog watch: wait.
    let mut feed = String::new();
    for _ in 0..200 {
        feed = app
            .get("/collections/revues/events")
            .await
            .text()
            .await
            .unwrap();
        if feed.lines().count() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(feed.lines().count(), 2, "{feed}");
}

/// `TEXTS[i]` with its last eighth of words replaced by `tail`: similar
/// to it, but less than a one-word change.
fn partly(i: usize, tail: &str) -> String {
    let words: Vec<&str> = TEXTS[i].split(' ').collect();
    let keep = words.len() * 7 / 8;
    format!("{} {tail}", words[..keep].join(" "))
}

/// Settings with the event feed on for every collection (the `default`
/// one from `[events]`, the named ones by default).
fn feed_settings() -> Settings {
    let mut s = webhook_settings();
    s.events.feed = true;
    s
}

/// For each write of `order` (id, in write order): the ids written before
/// it whose exact Jaccard with it (`GET /compare`, every pair) is at
/// least `threshold`. The brute force the events are checked against.
async fn stored_before(app: &TestApp, order: &[&str], threshold: f64) -> Vec<BTreeSet<String>> {
    let mut out = Vec::new();
    for (j, b) in order.iter().enumerate() {
        let mut found = BTreeSet::new();
        for a in &order[..j] {
            let c = app.compare(a, b).await;
            if c["jaccard"].as_f64().unwrap() >= threshold {
                found.insert((*a).to_owned());
            }
        }
        out.push(found);
    }
    out
}

/// The matched ids of an event.
fn matched(event: &Value) -> BTreeSet<String> {
    event["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn with_the_feed_on_and_no_subscription_duplicates_and_refusals_are_events() {
    let s = feed_settings();
    let threshold = s.index.threshold;
    let app = spawn_app_with(s).await;
    let settings = app.get_json("/collections").await;
    let mine = settings["collections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == crate::helpers::collection_label())
        .unwrap()
        .clone();
    assert_eq!(
        mine["settings"]["events"],
        json!({"feed": true, "measure": "jaccard", "score": "raw", "threshold": null})
    );
    assert!(app.get_json("/webhooks").await["webhooks"]
        .as_array()
        .unwrap()
        .is_empty());

    for (i, t) in TEXTS.iter().enumerate().take(4) {
        write(&app, &format!("orig-{i}"), t).await;
    }
    let resp = app
        .post_json(
            "/documents",
            &json!({"id": "dup-0", "text": near(0, "phosphates")}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    let resp = app
        .post_json(
            "/documents/batch",
            &json!({"documents": [
                {"id": "dup-1", "text": near(1, "Stadthaus")},
                {"id": "unique-5", "text": TEXTS[5]},
            ]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    write(&app, "partly-2", &partly(2, "says the mayor’s office")).await;
    write(&app, "unique-4", TEXTS[4]).await;
    write(&app, "dup-2", &near(2, "week")).await;
    write(&app, "dup-0-bis", &near(0, "sulfates")).await;
    let order = [
        "orig-0",
        "orig-1",
        "orig-2",
        "orig-3",
        "dup-0",
        "dup-1",
        "unique-5",
        "partly-2",
        "unique-4",
        "dup-2",
        "dup-0-bis",
    ];
    let expected = stored_before(&app, &order, threshold).await;
    let want: Vec<(String, BTreeSet<String>)> = order
        .iter()
        .zip(&expected)
        .filter(|(_, m)| !m.is_empty())
        .map(|(id, m)| ((*id).to_owned(), m.clone()))
        .collect();
    // The data does what the test needs: several duplicates, one of them
    // of two stored documents.
    assert!(want.len() >= 4, "{want:?}");
    assert!(want.iter().any(|(_, m)| m.len() >= 2), "{want:?}");

    let events = feed(&app, 3).await;
    let got: Vec<(String, BTreeSet<String>)> = events
        .iter()
        .map(|e| (e["document"].as_str().unwrap().to_owned(), matched(e)))
        .collect();
    assert_eq!(
        got, want,
        "every write whose earlier matches reach the rule, no other"
    );
    assert!(events
        .iter()
        .all(|e| e["type"] == "document.duplicate" && e["write"] == "created"));

    // An if_unique refusal is one document.refused event; an if_unique
    // write that is unique is none.
    let resp = app
        .post_json(
            "/documents?if_unique=true",
            &json!({"id": "refusée", "text": near(3, "горожан")}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.json::<Value>().await.unwrap()["inserted"], false);
    let resp = app
        .post_json(
            "/documents?if_unique=true",
            &json!({"id": "nouvelle", "text": "Le marché couvert rouvrira ses portes samedi après deux ans de travaux, avec quarante étals de producteurs locaux et une halle dédiée aux fromages affinés"}),
        )
        .await;
    assert!(resp.status().is_success());
    assert_eq!(resp.json::<Value>().await.unwrap()["inserted"], true);
    let after = feed(&app, 100).await;
    assert_eq!(after.len(), events.len() + 1, "{after:?}");
    assert_eq!(after[..events.len()], events[..]);
    let refused = after.last().unwrap();
    assert_eq!(refused["type"], "document.refused");
    assert_eq!(refused["document"], "refusée");
    assert!(matched(refused).contains("orig-3"), "{refused}");
    let metrics = app.metrics().await;
    let label = crate::helpers::collection_label();
    assert_eq!(
        crate::helpers::metric_value(
            &metrics,
            "neardup_events_total",
            &[("collection", label), ("type", "document.refused")]
        ),
        Some(1.0),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_subscription_with_a_higher_threshold_gets_only_what_it_selects_beside_the_feed() {
    let receiver = Receiver::start(0).await;
    let s = feed_settings();
    let threshold = s.index.threshold;
    let app = spawn_app_with(s).await;
    let sub = subscribe(
        &app,
        json!({"url": receiver.url, "kinds": ["document.duplicate"], "threshold": 0.9}),
    )
    .await;
    receiver.expect_secret(sub["secret"].as_str().unwrap());
    write(&app, "orig-2", TEXTS[2]).await;
    write(&app, "partly-2", &partly(2, "says the mayor’s office")).await;
    write(&app, "dup-2", &near(2, "week")).await;
    // The data spans the two thresholds.
    let partial = app.compare("orig-2", "partly-2").await["jaccard"]
        .as_f64()
        .unwrap();
    assert!(partial >= threshold && partial < 0.9, "{partial}");
    let close = app.compare("orig-2", "dup-2").await["jaccard"]
        .as_f64()
        .unwrap();
    assert!(close >= 0.9, "{close}");

    let events = feed(&app, 100).await;
    let docs: Vec<&str> = events
        .iter()
        .map(|e| e["document"].as_str().unwrap())
        .collect();
    assert_eq!(docs, ["partly-2", "dup-2"], "the feed has both");
    assert_eq!(
        matched(&events[1]),
        ["orig-2", "partly-2"].map(String::from).into(),
        "the event carries the union of the matches"
    );
    let got = receiver.wait_for(1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.delivered().len(), 1, "only what it selects");
    assert_eq!(got[0].body["data"]["document"], "dup-2");
    let delivered: BTreeSet<&str> = got[0].body["data"]["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(delivered, ["orig-2"].into(), "its matches at its threshold");
    assert_eq!(receiver.state.bad_signatures.load(Ordering::SeqCst), 0);
}

/// `PUT /collections/flux/documents/{id}` on the node at `base`.
async fn flux_write(client: &reqwest::Client, base: &str, id: &str, text: String) {
    let r = client
        .put(format!("{base}/collections/flux/documents/{id}"))
        .json(&json!({"text": text}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{id}: {}", r.status());
}

/// The documents of the events of `/collections/flux/events` on the node
/// at `base`, oldest first.
async fn flux_events(client: &reqwest::Client, base: &str) -> Vec<String> {
    let r = client
        .get(format!("{base}/collections/flux/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.text()
        .await
        .unwrap()
        .lines()
        .map(|l| {
            let e: Value = serde_json::from_str(l).unwrap();
            e["document"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// `PATCH /collections/{name}` with `body` on the first node.
async fn patch_collection(app: &TestApp, name: &str, body: Value) -> reqwest::Response {
    app.client
        .patch(format!("{}/collections/{name}", app.base))
        .json(&body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_events_setting_is_checked_patched_and_kept() {
    if crate::COLLECTION.is_some() {
        // The test makes a collection of its own; once is enough.
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut s = webhook_settings();
    if !crate::REDIS {
        s.storage.data_dir = dir.path().to_owned();
    }
    let app = spawn_app_with(s.clone()).await;
    let put = |body: Value| {
        let app = &app;
        async move {
            app.client
                .put(format!("{}/collections/flux", app.base))
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    };
    // Bad settings: 422 naming the key, on create and on change.
    let bad = [
        (json!({"events": {"measure": "cosine"}}), "events.measure"),
        (json!({"events": {"score": "semantic"}}), "events.score"),
        (json!({"events": {"score": "content"}}), "events.score"),
        (json!({"events": {"threshold": 1.5}}), "events.threshold"),
        (json!({"events": {"threshold": 0}}), "events.threshold"),
        (json!({"events": {"threshold": 0.05}}), "events.threshold"),
        (json!({"events": {"threshold": "haut"}}), "events.threshold"),
        (json!({"events": {"feed": "oui"}}), "events.feed"),
        (json!({"events": {"couleur": 1}}), "events.couleur"),
        (json!({"events": ["feed"]}), "events"),
    ];
    for (body, key) in &bad {
        let p = assert_problem(put(body.clone()).await, 422).await;
        assert_eq!(
            p["type"], "urn:neardup:problem:invalid-settings",
            "{body}: {p}"
        );
        assert!(p["detail"].as_str().unwrap().contains(key), "{body}: {p}");
    }
    let r = put(json!({"events": {"feed": true, "threshold": 0.8}})).await;
    assert_eq!(r.status(), 201);
    let created: Value = r.json().await.unwrap();
    assert_eq!(
        created["settings"]["events"],
        json!({"feed": true, "measure": "jaccard", "score": "raw", "threshold": 0.8})
    );
    // The same PUT again is no conflict; another threshold is, named.
    assert_eq!(
        put(json!({"events": {"feed": true, "threshold": 0.8}}))
            .await
            .status(),
        200
    );
    let p = assert_problem(put(json!({"events": {"feed": true}})).await, 409).await;
    assert!(
        p["detail"].as_str().unwrap().contains("events.threshold"),
        "{p}"
    );

    flux_write(&app.client, &app.base, "original", TEXTS[1].to_owned()).await;
    flux_write(&app.client, &app.base, "kopie", near(1, "Rathausplatz")).await;
    assert_eq!(flux_events(&app.client, &app.base).await, ["kopie"]);

    // Off: no more events, and the change is checked.
    for (body, key) in &bad[..9] {
        let p = assert_problem(patch_collection(&app, "flux", body.clone()).await, 422).await;
        assert!(p["detail"].as_str().unwrap().contains(key), "{body}: {p}");
    }
    let r = patch_collection(&app, "flux", json!({"events": {"feed": false}})).await;
    assert_eq!(r.status(), 200);
    let changed: Value = r.json().await.unwrap();
    assert_eq!(
        changed["settings"]["events"],
        json!({"feed": false, "measure": "jaccard", "score": "raw", "threshold": 0.8}),
        "the keys left out stay"
    );
    flux_write(&app.client, &app.base, "kopie-2", near(1, "Marktplatz")).await;
    assert_eq!(flux_events(&app.client, &app.base).await, ["kopie"]);

    // On again, at the collection's own threshold.
    let r = patch_collection(
        &app,
        "flux",
        json!({"events": {"feed": true, "threshold": null}}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let expected = json!({"feed": true, "measure": "jaccard", "score": "raw", "threshold": null});
    if let Some(peer) = app.peer.as_ref() {
        // The other node follows the catalog, then its own writes are events.
        let mut seen = Value::Null;
        for _ in 0..100 {
            let list: Value = app
                .client
                .get(format!("{}/collections", peer.base))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            seen = list["collections"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == "flux")
                .map(|c| c["settings"]["events"].clone())
                .unwrap_or(Value::Null);
            if seen == expected {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(seen, expected);
        flux_write(&peer.client, &peer.base, "kopie-3", near(1, "Bahnhof")).await;
        assert_eq!(
            flux_events(&peer.client, &peer.base).await,
            ["kopie", "kopie-3"]
        );
    } else {
        flux_write(&app.client, &app.base, "kopie-3", near(1, "Bahnhof")).await;
        assert_eq!(
            flux_events(&app.client, &app.base).await,
            ["kopie", "kopie-3"]
        );
        // A restart keeps the setting.
        app.stop().await.unwrap();
        let app = spawn_app_with(s).await;
        let shown = app.get_json("/collections/flux").await;
        assert_eq!(shown["settings"]["events"], expected);
        flux_write(&app.client, &app.base, "kopie-4", near(1, "Dom")).await;
        assert_eq!(
            flux_events(&app.client, &app.base).await,
            ["kopie", "kopie-3", "kopie-4"]
        );
        let p = assert_problem(
            patch_collection(&app, "default", json!({"events": {"feed": true}})).await,
            409,
        )
        .await;
        assert!(p["detail"].as_str().unwrap().contains("events.feed"), "{p}");
        return;
    }
    // The default collection's comes from the configuration.
    let p = assert_problem(
        patch_collection(&app, "default", json!({"events": {"feed": true}})).await,
        409,
    )
    .await;
    assert!(p["detail"].as_str().unwrap().contains("events.feed"), "{p}");
}

#[tokio::test]
async fn a_damaged_event_log_is_an_error_and_a_metric_until_it_is_repaired() {
    if crate::REDIS {
        // The file is the memory backend's.
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut s = feed_settings();
    s.storage.data_dir = dir.path().to_owned();
    let app = spawn_app_with(s.clone()).await;
    write(&app, "orig-0", TEXTS[0]).await;
    write(&app, "dup-0", &near(0, "phosphates")).await;
    assert_eq!(feed(&app, 10).await.len(), 1, "one duplicate, one event");
    app.stop().await.unwrap();
    let file = crate::review_decisions::find_file_where(dir.path(), &|p| {
        p.parent().and_then(|d| d.file_name()) == Some(std::ffi::OsStr::new("events"))
            && p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("events-"))
    })
    .expect("the event log");
    let good = std::fs::read(&file).unwrap();
    let mut bad = good.clone();
    // A frame's byte in the middle (after the magic): damage, not a torn end.
    bad[8 + 14] ^= 0xff;
    std::fs::write(&file, &bad).unwrap();

    let app = spawn_app_with(s).await;
    let resp = app.get("/events?limit=10").await;
    let p = assert_problem(resp, 500).await;
    assert_eq!(p["type"], "urn:neardup:problem:internal");
    assert!(
        !p.to_string().contains("events-"),
        "no file name in a 5xx body: {p}"
    );
    let unreadable = |text: &str| {
        crate::helpers::metric_value(
            text,
            "neardup_file_unreadable",
            &[
                ("collection", crate::helpers::collection_label()),
                ("file", "events"),
            ],
        )
    };
    let m = app.metrics().await;
    assert_eq!(unreadable(&m), Some(1.0), "{m}");
    // Repaired, the feed answers again, and the metric is gone.
    std::fs::write(&file, &good).unwrap();
    assert_eq!(feed(&app, 10).await.len(), 1);
    let m = app.metrics().await;
    assert_eq!(unreadable(&m), None, "{m}");
}
