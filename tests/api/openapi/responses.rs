//! Live responses, happy and erroneous, conform to their documented schemas.

use super::live::*;
use super::spec::*;
use crate::helpers::{assert_problem, spawn_app, spawn_app_with, test_settings, TestApp};
use neardup::config::{ScopedKey, Secret};
use neardup::http::ROUTES;
use reqwest::header::HeaderMap;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Requests checked against the spec, recording the routes they visit.
struct Walk<'a> {
    app: &'a TestApp,
    /// `""` for `default`, `/collections/{name}` for a named collection.
    prefix: String,
    /// The `{name}` filled in.
    url_prefix: String,
    covered: BTreeSet<(String, String)>,
}

impl Walk<'_> {
    /// Send `method url` (prefixed) as documented at `path` (prefixed);
    /// assert a 2xx documented answer.
    async fn call(&mut self, method: &str, path: &str, url: &str, body: Body) -> (Reply, Value) {
        let (path, url) = (
            format!("{}{path}", self.prefix),
            format!("{}{url}", self.url_prefix),
        );
        let reply = send(self.app, method, &url, &body).await;
        assert!(
            (200..300).contains(&reply.status),
            "{method} {url} → {}: {}",
            reply.status,
            String::from_utf8_lossy(&reply.body)
        );
        let body = assert_documented(method, &path, &reply);
        self.covered.insert((method.to_owned(), path));
        (reply, body)
    }
}

/// Every route a collection serves, through `walk`'s prefix.
async fn collection_happy_path(walk: &mut Walk<'_>) {
    let base = walk.url_prefix.clone();
    let location = |id: &str| format!("{base}/documents/{id}");
    let q1 = json!({"id": "q1", "text": "What is the step by step guide to invest in share market in india?",
                    "metadata": {"source": "forum"}});
    let (reply, body) = walk
        .call("POST", "/documents", "/documents", Body::Json(q1))
        .await;
    assert_eq!(reply.status, 201);
    assert_eq!(reply.headers["location"], location("q1").as_str());
    assert!(body.get("similar").is_none(), "{body}");

    let q2 = json!({"id": "q2", "text": "What is the step by step guide to invest in share market?",
                    "ttl_secs": 3600});
    let url = "/documents?similar=true&threshold=0.8&limit=5&since=1970-01-01T00:00:00Z";
    let (_, body) = walk.call("POST", "/documents", url, Body::Json(q2)).await;
    assert_eq!(body["similar"][0]["id"], "q1", "{body}");
    assert_eq!(body["truncated"], false, "{body}");

    let no_id = json!({"text": "a text stored under a generated id"});
    let (reply, body) = walk
        .call("POST", "/documents", "/documents", Body::Json(no_id))
        .await;
    let id = body["id"].as_str().unwrap();
    assert_eq!(reply.headers["location"], location(id).as_str());

    let q3 = json!({"text": "An unrelated question about gardening in spring",
                    "expires_at": "2999-01-01T00:00:00Z"});
    let (reply, _) = walk
        .call(
            "PUT",
            "/documents/{id}",
            "/documents/q3",
            Body::Json(q3.clone()),
        )
        .await;
    assert_eq!(reply.status, 201);
    let (reply, _) = walk
        .call("PUT", "/documents/{id}", "/documents/q3", Body::Json(q3))
        .await;
    assert_eq!(reply.status, 200);
    assert!(!reply.headers.contains_key("location"));

    let batch = json!({"documents": [
        {"id": "a", "text": "the night is dark and the moon is red", "ttl_secs": 60},
        {"id": "q3", "text": "a replaced text about gardening"},
        {"text": "?!"},
        {"id": "", "text": "an invalid id"},
        {"id": "b", "text": "x", "metadata": [1]},
        5,
    ]});
    let url = "/documents/batch?mode=upsert";
    let (_, body) = walk
        .call("POST", "/documents/batch", url, Body::Json(batch))
        .await;
    let statuses: Vec<&Value> = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["status"])
        .collect();
    assert_eq!(statuses, [201, 200, 422, 400, 422, 422], "{body}");
    let batch = json!({"documents": [{"id": "a", "text": "again"}]});
    let (_, body) = walk
        .call(
            "POST",
            "/documents/batch",
            "/documents/batch",
            Body::Json(batch),
        )
        .await;
    assert_eq!(body["results"][0]["status"], 409, "{body}");

    let (_, body) = walk
        .call("GET", "/documents/{id}", "/documents/q1", Body::None)
        .await;
    assert_eq!(body["metadata"], json!({"source": "forum"}));
    assert!(
        body["created_at"].as_str().unwrap().ends_with('Z'),
        "{body}"
    );
    let (_, body) = walk
        .call("GET", "/documents/{id}", "/documents/q2", Body::None)
        .await;
    assert_eq!(body["metadata"], Value::Null);
    assert!(body["expires_at"].is_string(), "{body}");

    let url = "/similar?id=q1&limit=10&since=2000-01-01T00:00:00%2B02:00";
    let (_, body) = walk.call("GET", "/similar", url, Body::None).await;
    assert_eq!(body["results"][0]["id"], "q2", "{body}");
    assert!(body["results"][0]["created_at"].is_string(), "{body}");
    let text = json!({"text": "what is the step-by-step guide to invest in share market?",
                      "since": "2000-01-01T00:00:00Z"});
    walk.call("POST", "/similar", "/similar", Body::Json(text))
        .await;
    // By containment (the collections of the happy path keep the passage
    // index): the query's text holds all of q2 and is all in q1.
    let text = json!({"text": "What is the step by step guide to invest in share market in india?",
                      "measure": "stored_in_query", "threshold": 0.5});
    let (_, body) = walk
        .call("POST", "/similar", "/similar", Body::Json(text))
        .await;
    assert_eq!(body["measure"], "stored_in_query", "{body}");
    assert_eq!(body["results"][0]["stored_in_query"], 1.0, "{body}");
    assert!(
        body["passages"]["fingerprints"].as_u64().unwrap() > 0,
        "{body}"
    );
    let url = "/similar?id=q1&measure=containment&threshold=0.5";
    let (_, body) = walk.call("GET", "/similar", url, Body::None).await;
    assert_eq!(body["measure"], "containment", "{body}");
    assert!(body["passages"].is_object(), "{body}");
    let passage = json!({"text": "What is the step by step guide to invest in share market in india?", "min_run": 3,
                         "limit": 5, "since": "2000-01-01T00:00:00Z"});
    let (_, body) = walk
        .call("POST", "/passages", "/passages", Body::Json(passage))
        .await;
    let ids: BTreeSet<&str> = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, BTreeSet::from(["q1", "q2"]), "{body}");
    assert_eq!(body["results"][0]["id"], "q1", "{body}");
    assert_eq!(body["results"][0]["longest_run"], 12, "{body}");
    let ask = json!({"ids": ["q1", "q2", "nope"], "words": 4, "field": "source"});
    let (_, body) = walk
        .call("POST", "/snippets", "/snippets", Body::Json(ask))
        .await;
    assert_eq!(body["snippets"]["q1"]["title"], "forum", "{body}");
    assert_eq!(body["snippets"]["q2"]["title"], Value::Null, "{body}");
    assert!(body["snippets"].get("nope").is_none(), "{body}");
    walk.call("GET", "/compare", "/compare?a=q1&b=q2", Body::None)
        .await;
    let pair = json!({"a": {"text": "The night is dark and the moon is red."},
                      "b": {"text": "I can see moon is red, the night is dark."}});
    let (_, body) = walk
        .call("POST", "/explain", "/explain", Body::Json(pair))
        .await;
    assert_eq!(body["a"]["segments"][0]["match"], 1, "{body}");

    // Templates, content scores and the common passages (the collections
    // of the happy path count document frequency).
    let footer = "Unsubscribe from this newsletter at any time by following the link below";
    let (reply, body) = walk
        .call(
            "PUT",
            "/templates/{id}",
            "/templates/footer",
            Body::Json(json!({"text": footer})),
        )
        .await;
    assert_eq!(reply.status, 201, "{body}");
    assert!(body.get("text").is_none(), "{body}");
    let (reply, _) = walk
        .call(
            "PUT",
            "/templates/{id}",
            "/templates/footer",
            Body::Json(json!({"text": footer})),
        )
        .await;
    assert_eq!(reply.status, 200);
    let (_, body) = walk
        .call("GET", "/templates", "/templates", Body::None)
        .await;
    assert_eq!(body["templates"][0]["id"], "footer", "{body}");
    let (_, body) = walk
        .call("GET", "/templates/{id}", "/templates/footer", Body::None)
        .await;
    assert_eq!(body["text"], footer, "{body}");
    let pair = json!({"a": {"text": format!("The night is dark and the moon is red. {footer}")},
                      "b": {"text": format!("A recipe for bread with seeds and honey. {footer}")}});
    let (_, body) = walk
        .call("POST", "/explain", "/explain", Body::Json(pair))
        .await;
    assert_eq!(body["content"]["jaccard"], 0.0, "{body}");
    assert!(
        body["a"]["segments"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["boilerplate"] == true),
        "{body}"
    );
    let url = "/similar?id=q1&score=content&threshold=0.5";
    let (_, body) = walk.call("GET", "/similar", url, Body::None).await;
    assert_eq!(body["score"], "content", "{body}");
    assert_eq!(body["results"][0]["id"], "q2", "{body}");
    assert!(body["results"][0]["content"].is_object(), "{body}");
    let text = json!({"text": "What is the step by step guide to invest in share market?",
                      "score": "content", "measure": "query_in_stored", "threshold": 0.5});
    let (_, body) = walk
        .call("POST", "/similar", "/similar", Body::Json(text))
        .await;
    assert_eq!(body["score"], "content", "{body}");
    let (_, body) = walk
        .call(
            "GET",
            "/boilerplate",
            "/boilerplate?limit=5&sample=10",
            Body::None,
        )
        .await;
    assert_eq!(body["templates"], 1, "{body}");
    let (reply, _) = walk
        .call("DELETE", "/templates/{id}", "/templates/footer", Body::None)
        .await;
    assert_eq!(reply.status, 204);

    // Webhook subscriptions and the event feed (issue 45).
    let hook = json!({"id": "hook1", "url": "https://hooks.example.com/neardup",
                      "kinds": ["document.duplicate"], "threshold": 0.9});
    let (reply, body) = walk
        .call("POST", "/webhooks", "/webhooks", Body::Json(hook.clone()))
        .await;
    assert_eq!(reply.status, 201, "{body}");
    assert!(
        body["secret"].as_str().unwrap().starts_with("whsec_"),
        "{body}"
    );
    let (reply, _) = walk
        .call("POST", "/webhooks", "/webhooks", Body::Json(hook))
        .await;
    assert_eq!(reply.status, 200);
    let (_, body) = walk.call("GET", "/webhooks", "/webhooks", Body::None).await;
    assert_eq!(body["webhooks"][0]["id"], "hook1", "{body}");
    let (_, body) = walk
        .call("GET", "/webhooks/{id}", "/webhooks/hook1", Body::None)
        .await;
    assert!(body.get("secret").is_none(), "{body}");
    walk.call(
        "GET",
        "/webhooks/{id}/failed",
        "/webhooks/hook1/failed?limit=10",
        Body::None,
    )
    .await;
    let (_, body) = walk
        .call(
            "POST",
            "/webhooks/{id}/failed/retry",
            "/webhooks/hook1/failed/retry",
            Body::Json(json!({})),
        )
        .await;
    assert_eq!(body["retried"], 0, "{body}");
    walk.call("GET", "/events", "/events?limit=10", Body::None)
        .await;
    let (_, body) = walk
        .call(
            "GET",
            "/review/queue",
            "/review/queue?from=0.5&width=0.1&limit=5&seed=3",
            Body::None,
        )
        .await;
    assert!(body["items"].is_array(), "{body}");
    let (_, body) = walk
        .call(
            "GET",
            "/review/queue",
            "/review/queue?measure=containment",
            Body::None,
        )
        .await;
    assert_eq!(body["measure"], "containment", "{body}");
    let (_, body) = walk
        .call(
            "GET",
            "/review/precision",
            "/review/precision?width=0.1&related=duplicate",
            Body::None,
        )
        .await;
    assert_eq!(body["bands"].as_array().unwrap().len(), 10, "{body}");
    let (reply, _) = walk
        .call("DELETE", "/webhooks/{id}", "/webhooks/hook1", Body::None)
        .await;
    assert_eq!(reply.status, 204);

    // Review decisions (issue 46).
    let decision = json!({"a": "q2", "b": "q1", "verdict": "not_duplicate",
                          "note": "même gabarit, autre texte"});
    let (reply, body) = walk
        .call(
            "PUT",
            "/review/decisions",
            "/review/decisions",
            Body::Json(decision),
        )
        .await;
    assert_eq!(reply.status, 201, "{body}");
    assert!(body["scores"]["jaccard"].is_number(), "{body}");
    let unstored = json!({"a": "q1", "b": "jamais-écrit", "verdict": "related",
                          "scores": {"jaccard": 0.5, "containment": 0.75}});
    let (reply, body) = walk
        .call(
            "PUT",
            "/review/decisions",
            "/review/decisions",
            Body::Json(unstored),
        )
        .await;
    assert_eq!(reply.status, 201, "{body}");
    let (reply, body) = walk
        .call(
            "PUT",
            "/review/decisions",
            "/review/decisions",
            Body::Json(json!({"a": "q1", "b": "q2", "verdict": "duplicate"})),
        )
        .await;
    assert_eq!(reply.status, 200, "{body}");
    assert_eq!(body["revision"], 2, "{body}");
    let (_, body) = walk
        .call(
            "GET",
            "/review/decisions",
            "/review/decisions?limit=1",
            Body::None,
        )
        .await;
    assert_eq!(body["total"], 2, "{body}");
    assert!(body["next_cursor"].is_string(), "{body}");
    walk.call(
        "GET",
        "/review/decision",
        "/review/decision?a=q2&b=q1",
        Body::None,
    )
    .await;
    let (reply, _) = walk
        .call(
            "DELETE",
            "/review/decision",
            "/review/decision?a=q1&b=q2",
            Body::None,
        )
        .await;
    assert_eq!(reply.status, 204);
    let texts = json!({"texts": ["The night is dark and the moon is red.",
                                 "The night is dark and the moon is red!",
                                 "Prices rose by £3 in Zürich’s cafés."],
                       "k": [2], "bins": 5});
    let (_, body) = walk
        .call(
            "POST",
            "/analysis/histogram",
            "/analysis/histogram",
            Body::Json(texts.clone()),
        )
        .await;
    assert_eq!(body["histograms"][0]["pairs"], 3, "{body}");
    assert_eq!(body["histograms"][0]["bins"][4]["count"], 1, "{body}");
    let mut texts = texts;
    texts.as_object_mut().unwrap().remove("bins");
    texts["num_perm"] = json!([16, 128]);
    let (_, body) = walk
        .call(
            "POST",
            "/analysis/accuracy",
            "/analysis/accuracy",
            Body::Json(texts),
        )
        .await;
    assert_eq!(body["accuracy"][1]["missed"], 0, "{body}");

    let q2_again = json!({"id": "q2-again", "text": "What is the step by step guide to invest in share market?"});
    let (reply, body) = walk
        .call(
            "POST",
            "/documents",
            "/documents?if_unique=true",
            Body::Json(q2_again),
        )
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(body["inserted"], false, "{body}");
    let url = "/duplicates?threshold=0.8&min_size=2&limit=1";
    let (_, body) = walk.call("GET", "/duplicates", url, Body::None).await;
    assert_eq!(body["groups"][0]["ids"], json!(["q1", "q2"]), "{body}");
    assert_eq!(body["next_cursor"], Value::Null, "{body}");
    let url = "/duplicates/pairs?threshold=0.8";
    let (reply, body) = walk.call("GET", "/duplicates/pairs", url, Body::None).await;
    assert_eq!(reply.content_type().as_deref(), Some("application/json"));
    assert_eq!(body["pairs"][0]["a"], "q1", "{body}");
    assert_eq!(body["pairs"][0]["b"], "q2", "{body}");
    assert_eq!(body["pairs"][0]["b_in_a"], 1.0, "{body}");
    assert_eq!(body["measure"], "jaccard", "{body}");
    let url = "/duplicates/drop-list?threshold=0.8&keep=newest&limit=5";
    let (_, body) = walk
        .call("GET", "/duplicates/drop-list", url, Body::None)
        .await;
    assert_eq!(
        body["drops"],
        json!([{"id": "q1", "kept": "q2", "group": 0}]),
        "{body}"
    );
    let url = "/duplicates?measure=containment&threshold=0.9";
    let (_, body) = walk.call("GET", "/duplicates", url, Body::None).await;
    assert_eq!(body["measure"], "containment", "{body}");
    let url = "/duplicates/pairs?measure=query_in_stored&threshold=0.9";
    let (_, body) = walk.call("GET", "/duplicates/pairs", url, Body::None).await;
    assert_eq!(body["measure"], "containment", "{body}");
    let url = "/duplicates?score=content&threshold=0.5";
    let (_, body) = walk.call("GET", "/duplicates", url, Body::None).await;
    assert_eq!(body["score"], "content", "{body}");
    assert_eq!(body["groups"][0]["ids"], json!(["q1", "q2"]), "{body}");
    let url = "/duplicates/pairs?score=content&threshold=0.5";
    let (_, body) = walk.call("GET", "/duplicates/pairs", url, Body::None).await;
    assert_eq!(body["score"], "content", "{body}");
    assert!(body["pairs"][0]["content"].is_object(), "{body}");
    let q4 =
        json!({"id": "q4", "text": "What is the step by step guide to invest in share market?"});
    let url = "/documents?if_unique=true&score=content&threshold=0.9";
    let (reply, body) = walk.call("POST", "/documents", url, Body::Json(q4)).await;
    assert_eq!(reply.status, 200, "{body}");
    assert_eq!(body["score"], "content", "{body}");
    // An export, imported back: every document replaced by itself.
    let (reply, _) = walk.call("GET", "/export", "/export", Body::None).await;
    assert_eq!(
        reply.content_type().as_deref(),
        Some("application/x-ndjson")
    );
    let export = String::from_utf8(reply.body.clone()).unwrap();
    assert!(export.lines().count() > 1, "{export}");
    let (_, body) = walk
        .call(
            "POST",
            "/import",
            "/import",
            Body::Raw("application/x-ndjson", export),
        )
        .await;
    assert_eq!(body["created"], 0, "{body}");
    assert!(body["replaced"].as_u64().unwrap() > 0, "{body}");

    let (_, body) = walk.call("GET", "/stats", "/stats", Body::None).await;
    assert_eq!(body["storage"]["last_snapshot"], Value::Null);
    assert_eq!(body["documents"], 5, "{body}");
}

#[tokio::test]
async fn a_happy_path_through_every_route_matches_the_documented_responses() {
    let mut settings = test_settings();
    settings.index.passage_index = true;
    settings.index.boilerplate.enabled = true;
    let app = spawn_app_with(settings).await;
    let mut walk = Walk {
        app: &app,
        prefix: String::new(),
        url_prefix: String::new(),
        covered: BTreeSet::new(),
    };
    collection_happy_path(&mut walk).await;

    let settings = json!({"retention": {"ttl_secs": 86400}, "store_text": true,
                          "index": {"passage_index": true, "boilerplate": {"enabled": true}}});
    let (reply, body) = walk
        .call(
            "PUT",
            "/collections/{name}",
            "/collections/titles",
            Body::Json(settings.clone()),
        )
        .await;
    assert_eq!(reply.status, 201);
    assert_eq!(reply.headers["location"], "/collections/titles");
    assert_eq!(body["settings"]["retention"]["ttl_secs"], 86400, "{body}");
    let (reply, _) = walk
        .call(
            "PUT",
            "/collections/{name}",
            "/collections/titles",
            Body::Json(settings),
        )
        .await;
    assert_eq!(reply.status, 200);

    walk.prefix = "/collections/{name}".into();
    walk.url_prefix = "/collections/titles".into();
    collection_happy_path(&mut walk).await;
    walk.prefix.clear();
    walk.url_prefix.clear();

    let (_, body) = walk
        .call("GET", "/collections", "/collections", Body::None)
        .await;
    let names: Vec<&Value> = body["collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["name"])
        .collect();
    assert_eq!(names, ["default", "titles"], "{body}");
    let (_, body) = walk
        .call(
            "GET",
            "/collections/{name}",
            "/collections/titles",
            Body::None,
        )
        .await;
    assert_eq!(body["stats"]["documents"], 5, "{body}");
    let patch = json!({"retention": {"ttl_secs": null}, "passage_index": false,
                       "boilerplate": {"share": 0.5, "min_docs": 2, "min_collection_docs": null}});
    let (_, body) = walk
        .call(
            "PATCH",
            "/collections/{name}",
            "/collections/titles",
            Body::Json(patch),
        )
        .await;
    assert_eq!(
        body["settings"]["retention"]["ttl_secs"],
        Value::Null,
        "{body}"
    );
    assert_eq!(body["settings"]["index"]["passage_index"], false, "{body}");
    assert_eq!(
        body["settings"]["index"]["boilerplate"],
        json!({"enabled": true, "share": 0.5, "min_docs": 2, "min_collection_docs": 50}),
        "{body}"
    );
    let (reply, body) = walk
        .call(
            "POST",
            "/collections/{name}/reindex",
            "/collections/titles/reindex",
            Body::Json(json!({"shingle": {"k": 2}})),
        )
        .await;
    assert_eq!(reply.status, 202, "{body}");
    assert_eq!(reply.headers["location"], "/collections/titles");
    for _ in 0..600 {
        let stats: Value = app
            .client
            .get(app.url("/collections/titles/stats"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if stats["reindex"]["state"] != "running" {
            assert_eq!(stats["reindex"]["state"], "done", "{stats}");
            assert_eq!(stats["shingle"]["k"], 2, "{stats}");
            assert_eq!(stats["documents"], 5, "{stats}");
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    let (_, body) = walk
        .call("POST", "/admin/snapshot", "/admin/snapshot", Body::None)
        .await;
    assert_eq!(body["documents"], 5, "{body}");
    assert_eq!(body["collections"].as_array().unwrap().len(), 2, "{body}");
    let (_, body) = walk.call("GET", "/stats", "/stats", Body::None).await;
    assert!(body["storage"]["last_snapshot"].is_object(), "{body}");

    let (_, body) = walk.call("GET", "/healthz", "/healthz", Body::None).await;
    assert_eq!(body, json!({"status": "ok"}));
    let (_, body) = walk.call("GET", "/readyz", "/readyz", Body::None).await;
    assert_eq!(body, json!({"status": "ready"}));
    let (reply, body) = walk.call("GET", "/metrics", "/metrics", Body::None).await;
    assert!(reply.content_type().unwrap().starts_with("text/plain;"));
    let text = body.as_str().unwrap();
    assert!(
        text.contains("neardup_documents{collection=\"default\"} 5"),
        "{text}"
    );
    assert!(
        text.contains("neardup_documents{collection=\"titles\"} 5"),
        "{text}"
    );
    let (_, body) = walk
        .call("GET", "/openapi.json", "/openapi.json", Body::None)
        .await;
    assert_eq!(body["openapi"], "3.1.0");

    for prefix in ["", "/collections/{name}"] {
        walk.prefix = prefix.into();
        walk.url_prefix = prefix.replace("{name}", "titles");
        let (reply, _) = walk
            .call("DELETE", "/documents/{id}", "/documents/q3", Body::None)
            .await;
        assert_eq!(reply.status, 204);
    }
    walk.prefix.clear();
    walk.url_prefix.clear();
    let (reply, _) = walk
        .call(
            "DELETE",
            "/collections/{name}",
            "/collections/titles",
            Body::None,
        )
        .await;
    assert_eq!(reply.status, 204);

    let routes: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    assert_eq!(walk.covered, routes, "the happy path visits every route");
}

/// An error case: (method, documented path, request URL, body, status, slug).
type Case = (
    &'static str,
    &'static str,
    &'static str,
    Body,
    u16,
    &'static str,
);

fn json_body(value: Value) -> Body {
    Body::Json(value)
}

fn text_body() -> Body {
    Body::Raw("text/plain", "the night is dark".into())
}

fn broken_json() -> Body {
    Body::Raw("application/json", "{not json".into())
}

/// Send each case; assert its status, its slug, and that the reply matches
/// what its operation documents for that status.
async fn assert_cases(app: &TestApp, cases: Vec<Case>) {
    for (method, path, url, body, status, slug) in cases {
        let reply = send(app, method, url, &body).await;
        let what = format!("{method} {url}");
        let text = String::from_utf8_lossy(&reply.body).into_owned();
        assert_eq!(reply.status, status, "{what}: {text}");
        let body = assert_documented(method, path, &reply);
        let expected = format!("urn:neardup:problem:{slug}");
        assert_eq!(body["type"], expected, "{what}: {body}");
    }
}

/// A passage of 5,001 shingles (word 3-grams): one over what a lookup takes.
fn long_passage() -> String {
    (0..5003)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every problem each route produces from a request (the 413s, 503s and
/// 500 need other settings or a failing disk: see the tests below).
#[rustfmt::skip]
fn error_cases() -> Vec<Case> {
    use Body::None as Empty;
    let (doc, batch, by_id, sim, cmp, exp) =
        ("/documents", "/documents/batch", "/documents/{id}", "/similar", "/compare", "/explain");
    let (hist, acc) = ("/analysis/histogram", "/analysis/accuracy");
    let (dup, pairs, pas) = ("/duplicates", "/duplicates/pairs", "/passages");
    let (tpls, tpl, common) = ("/templates", "/templates/{id}", "/boilerplate");
    let (rds, rd) = ("/review/decisions", "/review/decision");
    let off = "passage-index-off";
    let snip = "/snippets";
    vec![
        ("POST", doc, doc, text_body(), 415, "unsupported-media-type"),
        ("POST", doc, doc, Empty, 415, "unsupported-media-type"),
        ("POST", doc, doc, broken_json(), 400, "malformed-json"),
        ("POST", doc, doc, json_body(json!({"text": "a b", "x": 1})), 422, "invalid-body"),
        ("POST", doc, doc, json_body(json!({"id": 7, "text": "a b"})), 422, "invalid-body"),
        ("POST", doc, doc, json_body(json!({"text": "a", "metadata": [1]})), 422, "invalid-body"),
        ("POST", doc, doc, json_body(json!({"text": " ?! "})), 422, "empty-text"),
        ("POST", doc, doc, json_body(json!({"id": "", "text": "a b"})), 400, "invalid-id"),
        ("POST", doc, doc, json_body(json!({"id": "a\u{7}", "text": "a"})), 400, "invalid-id"),
        ("POST", doc, doc, json_body(json!({"id": "q1", "text": "a b"})), 409, "already-exists"),
        ("POST", doc, "/documents?bogus=1", json_body(json!({"text": "a"})), 400, "invalid-parameter"),
        ("POST", doc, "/documents?similar=yes", json_body(json!({"text": "a"})), 400, "invalid-parameter"),
        ("POST", doc, "/documents?similar=true&limit=0", json_body(json!({"text": "a"})), 400, "invalid-parameter"),
        ("POST", doc, "/documents?similar=true&threshold=1.5", json_body(json!({"text": "a"})), 400, "invalid-threshold"),
        ("POST", doc, "/documents?similar=true&threshold=0.5", json_body(json!({"text": "a"})), 400, "threshold-below-tuning"),
        ("POST", doc, "/documents?similar=true&measure=bogus", json_body(json!({"text": "a"})), 400, "invalid-parameter"),
        ("POST", doc, "/documents?similar=true&measure=containment&threshold=0", json_body(json!({"text": "a"})), 400, "invalid-threshold"),
        ("POST", doc, "/documents?similar=true&measure=query_in_stored&threshold=0.3", json_body(json!({"text": "a b c"})), 409, off),
        ("POST", doc, "/documents?if_unique=true&measure=stored_in_query", json_body(json!({"text": "a b c"})), 409, off),
        ("POST", batch, batch, text_body(), 415, "unsupported-media-type"),
        ("POST", batch, batch, broken_json(), 400, "malformed-json"),
        ("POST", batch, "/documents/batch?mode=bogus", json_body(json!({"documents": []})), 400, "invalid-parameter"),
        ("POST", batch, batch, json_body(json!([])), 422, "invalid-body"),
        ("POST", batch, batch, json_body(json!({"documents": [], "x": 1})), 422, "invalid-body"),
        ("GET", by_id, "/documents/nope", Empty, 404, "document-not-found"),
        ("GET", by_id, "/documents/%FF", Empty, 400, "invalid-parameter"),
        ("PUT", by_id, "/documents/q9", text_body(), 415, "unsupported-media-type"),
        ("PUT", by_id, "/documents/q9", broken_json(), 400, "malformed-json"),
        ("PUT", by_id, "/documents/%01", json_body(json!({"text": "a"})), 400, "invalid-id"),
        ("PUT", by_id, "/documents/%FF", json_body(json!({"text": "a"})), 400, "invalid-parameter"),
        ("PUT", by_id, "/documents/q9", json_body(json!({"id": "q8", "text": "a"})), 422, "invalid-body"),
        ("PUT", by_id, "/documents/q9", json_body(json!({"text": ""})), 422, "empty-text"),
        ("DELETE", by_id, "/documents/nope", Empty, 404, "document-not-found"),
        ("DELETE", by_id, "/documents/%FF", Empty, 400, "invalid-parameter"),
        ("GET", sim, "/similar", Empty, 400, "invalid-parameter"),
        ("GET", sim, "/similar?id=q1&id=q2", Empty, 400, "invalid-parameter"),
        ("GET", sim, "/similar?id=q1&limit=1001", Empty, 400, "invalid-parameter"),
        ("GET", sim, "/similar?id=q1&threshold=0", Empty, 400, "invalid-threshold"),
        ("GET", sim, "/similar?id=q1&threshold=0.7", Empty, 400, "threshold-below-tuning"),
        ("GET", sim, "/similar?id=nope", Empty, 404, "document-not-found"),
        ("GET", sim, "/similar?id=q1&measure=Jaccard", Empty, 400, "invalid-parameter"),
        ("GET", sim, "/similar?id=q1&measure=containment&threshold=1.5", Empty, 400, "invalid-threshold"),
        ("GET", sim, "/similar?id=q1&measure=containment&threshold=0.3", Empty, 409, off),
        ("GET", sim, "/similar?id=q1&measure=query_in_stored", Empty, 409, off),
        ("POST", sim, sim, text_body(), 415, "unsupported-media-type"),
        ("POST", sim, sim, broken_json(), 400, "malformed-json"),
        ("POST", sim, sim, json_body(json!({"text": "a", "limit": 0})), 400, "invalid-parameter"),
        ("POST", sim, sim, json_body(json!({"text": "a", "threshold": 2})), 400, "invalid-threshold"),
        ("POST", sim, sim, json_body(json!({"text": "a", "threshold": 0.1})), 400, "threshold-below-tuning"),
        ("POST", sim, sim, json_body(json!({"text": "a", "id": "q1"})), 422, "invalid-body"),
        ("POST", sim, sim, json_body(json!({"text": "..."})), 422, "empty-text"),
        ("POST", sim, sim, json_body(json!({"text": "a", "measure": "cosine"})), 422, "invalid-body"),
        ("POST", sim, sim, json_body(json!({"text": "a", "measure": "stored_in_query", "threshold": 0.2})), 409, off),
        ("GET", dup, "/duplicates?measure=overlap", Empty, 400, "invalid-parameter"),
        ("GET", dup, "/duplicates?measure=containment&threshold=0.3", Empty, 409, off),
        ("GET", pairs, "/duplicates/pairs?measure=stored_in_query", Empty, 409, off),
        ("GET", pairs, "/duplicates/pairs?threshold=0.3", Empty, 400, "threshold-below-tuning"),
        ("POST", pas, pas, text_body(), 415, "unsupported-media-type"),
        ("POST", pas, pas, broken_json(), 400, "malformed-json"),
        ("POST", pas, "/passages?min_run=3", json_body(json!({"text": "a b c"})), 400, "invalid-parameter"),
        ("POST", pas, pas, json_body(json!({"text": "a b c", "limit": 0})), 400, "invalid-parameter"),
        ("POST", pas, pas, json_body(json!({"text": "a b c", "threshold": 0.9})), 422, "invalid-body"),
        ("POST", pas, pas, json_body(json!({"text": "a b c", "min_run": 0})), 422, "invalid-body"),
        ("POST", pas, pas, json_body(json!({"text": "a b c", "min_run": -1})), 422, "invalid-body"),
        ("POST", pas, pas, json_body(json!({"text": "a b c", "since": "yesterday"})), 422, "invalid-body"),
        ("POST", pas, pas, json_body(json!({"min_run": 3})), 422, "invalid-body"),
        ("POST", pas, pas, json_body(json!({"text": "¿?"})), 422, "empty-text"),
        ("POST", pas, pas, json_body(json!({"text": long_passage()})), 422, "invalid-body"),
        ("POST", pas, pas, json_body(json!({"text": "the night is dark"})), 409, off),
        ("POST", snip, snip, text_body(), 415, "unsupported-media-type"),
        ("POST", snip, snip, broken_json(), 400, "malformed-json"),
        ("POST", snip, "/snippets?words=3", json_body(json!({"ids": ["q1"]})), 400, "invalid-parameter"),
        ("POST", snip, snip, json_body(json!({"ids": []})), 422, "invalid-body"),
        ("POST", snip, snip, json_body(json!({"ids": vec!["q1"; 201]})), 422, "invalid-body"),
        ("POST", snip, snip, json_body(json!({"ids": [""]})), 422, "invalid-body"),
        ("POST", snip, snip, json_body(json!({"ids": ["q1"], "words": 0})), 422, "invalid-body"),
        ("POST", snip, snip, json_body(json!({"ids": ["q1"], "words": 201})), 422, "invalid-body"),
        ("POST", snip, snip, json_body(json!({"ids": ["q1"], "words": 2.5})), 422, "invalid-body"),
        ("POST", snip, snip, json_body(json!({"ids": ["q1"], "field": ""})), 422, "invalid-body"),
        ("POST", snip, snip, json_body(json!({"ids": ["q1"], "field": "é".repeat(257)})), 422, "invalid-body"),
        ("POST", snip, snip, json_body(json!({"ids": ["q1"], "x": 1})), 422, "invalid-body"),
        ("POST", snip, snip, json_body(json!({"ids": "q1"})), 422, "invalid-body"),
        ("GET", sim, "/similar?id=q1&score=content", Empty, 409, off),
        ("GET", sim, "/similar?id=q1&score=contents", Empty, 400, "invalid-parameter"),
        ("GET", sim, "/similar?id=q1&score=content&threshold=0", Empty, 400, "invalid-threshold"),
        ("POST", sim, sim, json_body(json!({"text": "a", "score": "content"})), 409, off),
        ("POST", sim, sim, json_body(json!({"text": "a", "score": "boilerplate"})), 422, "invalid-body"),
        ("POST", doc, "/documents?similar=true&score=content&threshold=0.3", json_body(json!({"text": "a b c"})), 409, off),
        ("POST", doc, "/documents?score=bogus", json_body(json!({"text": "a b c"})), 400, "invalid-parameter"),
        ("GET", dup, "/duplicates?score=content&threshold=0.3", Empty, 409, off),
        ("GET", pairs, "/duplicates/pairs?score=content", Empty, 409, off),
        ("GET", pairs, "/duplicates/pairs?score=x", Empty, 400, "invalid-parameter"),
        ("GET", "/duplicates/drop-list", "/duplicates/drop-list?keep=max:", Empty, 400, "invalid-parameter"),
        ("GET", "/duplicates/drop-list", "/duplicates/drop-list?keep=largest", Empty, 400, "invalid-parameter"),
        ("GET", "/duplicates/drop-list", "/duplicates/drop-list?score=content", Empty, 409, off),
        ("GET", tpls, "/templates?x=1", Empty, 400, "invalid-parameter"),
        ("GET", tpl, "/templates/nope", Empty, 404, "template-not-found"),
        ("GET", tpl, "/templates/%FF", Empty, 400, "invalid-parameter"),
        ("PUT", tpl, "/templates/t1", text_body(), 415, "unsupported-media-type"),
        ("PUT", tpl, "/templates/t1", broken_json(), 400, "malformed-json"),
        ("PUT", tpl, "/templates/%01", json_body(json!({"text": "a b c"})), 400, "invalid-id"),
        ("PUT", tpl, "/templates/t1", json_body(json!({"text": "a b c", "x": 1})), 422, "invalid-body"),
        ("PUT", tpl, "/templates/t1", json_body(json!({"text": "?!"})), 422, "empty-text"),
        ("DELETE", tpl, "/templates/nope", Empty, 404, "template-not-found"),
        ("GET", common, "/boilerplate", Empty, 409, "boilerplate-off"),
        ("GET", common, "/boilerplate?limit=0", Empty, 400, "invalid-parameter"),
        ("GET", common, "/boilerplate?sample=2001", Empty, 400, "invalid-parameter"),
        ("GET", cmp, "/compare?a=q1", Empty, 400, "invalid-parameter"),
        ("GET", cmp, "/compare?a=q1&b=q2&c=q3", Empty, 400, "invalid-parameter"),
        ("GET", cmp, "/compare?a=q1&b=nope", Empty, 404, "document-not-found"),
        ("POST", exp, exp, text_body(), 415, "unsupported-media-type"),
        ("POST", exp, exp, broken_json(), 400, "malformed-json"),
        ("POST", exp, exp, json_body(json!({"a": {"text": "a b"}})), 422, "invalid-body"),
        ("POST", exp, exp, json_body(json!({"a": {"text": "a b", "id": "q1"}, "b": {"text": "c"}})), 422, "invalid-body"),
        ("POST", exp, exp, json_body(json!({"a": {}, "b": {"text": "c"}})), 422, "invalid-body"),
        ("POST", exp, exp, json_body(json!({"a": {"text": "a b"}, "b": {"text": "?!"}})), 422, "empty-text"),
        ("POST", exp, exp, json_body(json!({"a": {"id": "nope"}, "b": {"text": "c"}})), 404, "document-not-found"),
        ("POST", exp, exp, json_body(json!({"a": {"id": "q1"}, "b": {"text": "c"}})), 409, "text-not-stored"),
        ("POST", hist, hist, text_body(), 415, "unsupported-media-type"),
        ("POST", hist, hist, broken_json(), 400, "malformed-json"),
        ("POST", hist, hist, json_body(json!({})), 422, "invalid-body"),
        ("POST", hist, hist, json_body(json!({"texts": ["a b", "c d"], "sample": 10})), 422, "invalid-body"),
        ("POST", hist, hist, json_body(json!({"texts": ["a b", "c d"], "seed": 1})), 422, "invalid-body"),
        ("POST", hist, hist, json_body(json!({"texts": ["a b"]})), 422, "invalid-body"),
        ("POST", hist, hist, json_body(json!({"texts": ["a b", "c d"], "k": [2, 2]})), 422, "invalid-body"),
        ("POST", hist, hist, json_body(json!({"texts": ["a b", "c d"], "k": [65]})), 422, "invalid-body"),
        ("POST", hist, hist, json_body(json!({"texts": ["a b", "c d"], "bins": 1})), 422, "invalid-body"),
        ("POST", hist, hist, json_body(json!({"texts": ["a b", "c d"], "x": 1})), 422, "invalid-body"),
        ("POST", hist, hist, json_body(json!({"texts": ["a b", "¿?"]})), 422, "empty-text"),
        ("POST", hist, hist, json_body(json!({"sample": 100})), 409, "text-not-stored"),
        ("POST", acc, acc, text_body(), 415, "unsupported-media-type"),
        ("POST", acc, acc, broken_json(), 400, "malformed-json"),
        ("POST", acc, acc, json_body(json!({"k": [2]})), 422, "invalid-body"),
        ("POST", acc, acc, json_body(json!({"texts": ["a b", "c d"], "num_perm": [0]})), 422, "invalid-body"),
        ("POST", acc, acc, json_body(json!({"texts": ["a b", "c d"], "num_perm": []})), 422, "invalid-body"),
        ("POST", acc, acc, json_body(json!({"texts": ["a b", "c d"], "threshold": 0})), 422, "invalid-body"),
        ("POST", acc, acc, json_body(json!({"texts": ["a b", "c d"], "threshold": 1.5})), 422, "invalid-body"),
        ("POST", acc, acc, json_body(json!({"texts": ["", "c d"]})), 422, "empty-text"),
        ("POST", acc, acc, json_body(json!({"sample": 100, "seed": 3})), 409, "text-not-stored"),
        ("PUT", rds, rds, text_body(), 415, "unsupported-media-type"),
        ("PUT", rds, rds, broken_json(), 400, "malformed-json"),
        ("PUT", rds, "/review/decisions?x=1", json_body(json!({"a": "q1", "b": "q2", "verdict": "duplicate"})), 400, "invalid-parameter"),
        ("PUT", rds, rds, json_body(json!({"a": "q1", "b": "q1", "verdict": "duplicate"})), 422, "invalid-body"),
        ("PUT", rds, rds, json_body(json!({"a": "q1", "b": "q2", "verdict": "doublon"})), 422, "invalid-body"),
        ("PUT", rds, rds, json_body(json!({"a": "q1", "b": "q2", "verdict": "related", "note": "é".repeat(1001)})), 422, "invalid-body"),
        ("GET", rds, "/review/decisions?limit=0", Empty, 400, "invalid-parameter"),
        ("GET", rds, "/review/decisions?verdict=maybe", Empty, 400, "invalid-parameter"),
        ("GET", rds, "/review/decisions?cursor=bm9wZQ", Empty, 400, "invalid-parameter"),
        ("GET", rd, "/review/decision?a=q1", Empty, 400, "invalid-parameter"),
        ("GET", rd, "/review/decision?a=q1&b=q2", Empty, 404, "decision-not-found"),
        ("DELETE", rd, "/review/decision?a=q1&b=q1", Empty, 400, "invalid-parameter"),
        ("DELETE", rd, "/review/decision?a=q1&b=q2", Empty, 404, "decision-not-found"),
    ]
}

#[tokio::test]
async fn live_error_responses_match_the_documented_problems() {
    let app = spawn_app().await;
    app.insert("q1", "the night is dark and the moon is red")
        .await;
    app.insert("q2", "the night is dark and the moon is bright red")
        .await;
    assert_cases(&app, error_cases()).await;
    // The shared helper agrees on the problem shape.
    assert_problem(app.get("/documents/nope").await, 404).await;
}

#[tokio::test]
async fn with_keys_configured_the_401s_and_403s_are_answered_as_documented() {
    let mut settings = test_settings();
    settings.auth.api_keys = vec![Secret::new("full-key")];
    settings.auth.read_only_keys = vec![Secret::new("read-key")];
    settings.auth.keys = vec![ScopedKey {
        key: Secret::new("other-collection-key"),
        collections: Some(vec!["other".into()]),
        read_only: false,
        name: None,
    }];
    let app = spawn_app_with(settings).await;
    let mut forbidden = 0;
    let mut scoped_forbidden = 0;
    for op in operations() {
        let url = example_url(&op, false);
        let body = match op.request_body() {
            Some((_, _, examples)) => Body::Json(examples[0].clone()),
            None => Body::None,
        };
        let open = op.op.get("security") == Some(&json!([]));
        for key in [None, Some("wrong-key")] {
            let reply = send_with_key(&app, &op.method, &url, &body, key).await;
            let what = format!("{} as {url} with {key:?}", op.name());
            if open {
                assert_eq!(reply.status, 200, "{what}: documented as open");
                continue;
            }
            assert_eq!(reply.status, 401, "{what}");
            let problem = assert_documented(&op.method, op.path, &reply);
            assert_eq!(
                problem["type"], "urn:neardup:problem:unauthorized",
                "{what}"
            );
        }
        if open {
            continue;
        }
        if op.method != "GET" && !(op.method == "POST" && neardup::http::reads_by_post(op.path)) {
            let reply = send_with_key(&app, &op.method, &url, &body, Some("read-key")).await;
            let what = format!("{} as {url} with a read-only key", op.name());
            assert_eq!(reply.status, 403, "{what}");
            let problem = assert_documented(&op.method, op.path, &reply);
            assert_eq!(problem["type"], "urn:neardup:problem:forbidden", "{what}");
            forbidden += 1;
        }
        // A key limited to another collection: 403 on everything but the
        // list (filtered to its collections).
        let reply =
            send_with_key(&app, &op.method, &url, &body, Some("other-collection-key")).await;
        let what = format!("{} as {url} with a key for another collection", op.name());
        if op.path == "/collections" {
            assert_eq!(reply.status, 200, "{what}");
            assert_eq!(reply.json()["collections"], json!([]), "{what}");
        } else {
            assert_eq!(reply.status, 403, "{what}");
            let problem = assert_documented(&op.method, op.path, &reply);
            assert_eq!(problem["type"], "urn:neardup:problem:forbidden", "{what}");
            scoped_forbidden += 1;
        }
    }
    assert!(forbidden > 0);
    assert!(scoped_forbidden > forbidden);
    // The spec marks exactly the probes and itself as open.
    let open: Vec<String> = operations()
        .iter()
        .filter(|op| op.op.get("security") == Some(&json!([])))
        .map(Op::name)
        .collect();
    assert_eq!(open, ["GET /healthz", "GET /readyz", "GET /openapi.json"]);
    // The file describes the shipped configuration (no keys); this
    // server's document requires the bearer scheme the file declares.
    assert!(spec().get("security").is_none());
    let served = send(&app, "GET", "/openapi.json", &Body::None).await.json();
    assert_eq!(served["security"], json!([{"bearerAuth": []}]));
    assert_eq!(
        served["components"]["securitySchemes"]["bearerAuth"]["scheme"],
        "bearer"
    );
}

#[tokio::test]
async fn bodies_over_the_limits_are_answered_413_as_documented() {
    let mut settings = test_settings();
    settings.server.max_body_bytes = 1024;
    settings.limits.max_text_bytes = 512;
    settings.server.max_batch = 2;
    let app = spawn_app_with(settings).await;
    let big = || json_body(json!({"text": "word ".repeat(400)}));
    // Under the body limit, over the text limit.
    let long = || json_body(json!({"text": "word ".repeat(120)}));
    let three = json!({"documents": [{"text": "a"}, {"text": "b"}, {"text": "c"}]});
    let (doc, batch, by_id) = ("/documents", "/documents/batch", "/documents/{id}");
    let too_large = "payload-too-large";
    let cases: Vec<Case> = vec![
        ("POST", doc, doc, big(), 413, too_large),
        ("PUT", by_id, "/documents/q1", big(), 413, too_large),
        ("POST", "/similar", "/similar", big(), 413, too_large),
        ("POST", batch, batch, big(), 413, too_large),
        ("POST", batch, batch, json_body(three), 413, too_large),
        ("POST", doc, doc, long(), 413, too_large),
        ("PUT", by_id, "/documents/q1", long(), 413, too_large),
        ("POST", "/similar", "/similar", long(), 413, too_large),
        ("POST", "/passages", "/passages", big(), 413, too_large),
        ("POST", "/passages", "/passages", long(), 413, too_large),
    ];
    assert_cases(&app, cases).await;
}

#[tokio::test]
async fn a_request_over_the_timeout_is_answered_503_as_documented() {
    let mut settings = test_settings();
    settings.server.request_timeout_secs = 1;
    let app = spawn_app_with(settings).await;
    // Announce a body and never finish it: the handler waits until the
    // timeout layer answers.
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let head = "POST /documents HTTP/1.1\r\nhost: localhost\r\n\
                content-type: application/json\r\ncontent-length: 100\r\n\r\n{\"text\":";
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let (header_end, content_length) = loop {
        let n = tokio::time::timeout_at(deadline, stream.read(&mut buf))
            .await
            .expect("the server answers before the deadline")
            .unwrap();
        assert!(
            n > 0,
            "connection closed early: {:?}",
            String::from_utf8_lossy(&raw)
        );
        raw.extend_from_slice(&buf[..n]);
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse::<usize>().unwrap())
                .expect("a content-length");
            if raw.len() >= end + 4 + length {
                break (end, length);
            }
        }
    };
    let head = String::from_utf8_lossy(&raw[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let mut headers = HeaderMap::new();
    for line in lines {
        let (name, value) = line.split_once(':').unwrap();
        headers.insert(
            reqwest::header::HeaderName::from_bytes(name.trim().as_bytes()).unwrap(),
            value.trim().parse().unwrap(),
        );
    }
    let body = raw[header_end + 4..header_end + 4 + content_length].to_vec();
    let reply = Reply {
        status,
        headers,
        body,
    };
    assert_eq!(reply.status, 503);
    assert!(reply.headers.contains_key("retry-after"), "{head}");
    let body = assert_documented("POST", "/documents", &reply);
    assert_eq!(body["type"], "urn:neardup:problem:unavailable");
}
