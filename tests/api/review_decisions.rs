//! Review decisions (issue 46) through the API: created, edited (revision
//! 2, who decided from the key's name), read, listed by pages, exported as
//! NDJSON and deleted; bad requests refused naming the field; read-only
//! keys read but do not decide; the server's scores equal `/explain`'s
//! on French, Russian and Chinese texts; decisions survive a restart, a
//! reindex and go with their collection; a damaged decisions file is an
//! error, never an empty list. Runs in the three suites (memory, a named
//! collection, Redis with reads on a second node).

use crate::helpers::{
    assert_problem, encode, metric_value, spawn_app_with, test_settings, TestApp,
};
use crate::webhooks::{near, TEXTS};
use neardup::config::{ScopedKey, Secret, Settings};
use reqwest::Method;
use serde_json::{json, Value};

const ADMIN: &str = "cle-admin-0001";
const CAMILLE: &str = "cle-camille-0002";
const READER: &str = "cle-lecture-0003";
const CAMILLE_NAME: &str = "Camille (modération « annonces »)";

/// Keys: an administrator without a name (the suites' own key), a named
/// moderator, a read-only key.
fn keyed_settings() -> Settings {
    let mut s = test_settings();
    s.auth.api_keys = vec![Secret::new(ADMIN)];
    s.auth.keys = vec![
        ScopedKey {
            key: Secret::new(CAMILLE),
            collections: None,
            read_only: false,
            name: Some(CAMILLE_NAME.into()),
        },
        ScopedKey {
            key: Secret::new(READER),
            collections: None,
            read_only: true,
            name: Some("lecteur".into()),
        },
    ];
    s.storage.store_text = true;
    s.index.boilerplate.enabled = true;
    s
}

/// A request with `key`; reads go to the reading node.
async fn call(
    app: &TestApp,
    method: Method,
    path: &str,
    key: &str,
    body: Option<&Value>,
) -> reqwest::Response {
    let url = if method == Method::GET {
        app.read_url(path)
    } else {
        app.url(path)
    };
    let mut req = app.client.request(method, url).bearer_auth(key);
    if let Some(b) = body {
        req = req.json(b);
    }
    req.send().await.expect("request sent")
}

async fn decide(app: &TestApp, key: &str, body: Value) -> reqwest::Response {
    call(app, Method::PUT, "/review/decisions", key, Some(&body)).await
}

fn pair_path(route: &str, a: &str, b: &str) -> String {
    format!("{route}?a={}&b={}", encode(a), encode(b))
}

/// A decision read back, retried while the reading node has not seen the
/// write yet (Redis: it reads the version per call, so at once; memory:
/// the same node).
async fn read_decision(app: &TestApp, key: &str, a: &str, b: &str) -> reqwest::Response {
    call(
        app,
        Method::GET,
        &pair_path("/review/decision", a, b),
        key,
        None,
    )
    .await
}

/// Every decision, page by page (`limit` at a time).
async fn all_pages(app: &TestApp, key: &str, query: &str, limit: usize) -> (Vec<Value>, usize) {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    let mut total = None;
    loop {
        let mut path = format!("/review/decisions?limit={limit}{query}");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let resp = call(app, Method::GET, &path, key, None).await;
        assert_eq!(resp.status(), 200, "{path}");
        assert!(resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json"));
        let page: Value = resp.json().await.unwrap();
        let n = page["total"].as_u64().unwrap() as usize;
        assert_eq!(
            *total.get_or_insert(n),
            n,
            "total is the same on every page"
        );
        let items = page["decisions"].as_array().unwrap();
        assert!(items.len() <= limit);
        out.extend(items.iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) => {
                assert_eq!(items.len(), limit, "only a full page has a next one");
                cursor = Some(c.to_owned());
            }
            None => return (out, total.unwrap_or(0)),
        }
    }
}

/// `/explain`'s scores of two texts: (jaccard, the larger containment,
/// content jaccard).
async fn explained(app: &TestApp, a: &str, b: &str) -> (f64, f64, Option<f64>) {
    let resp = call(
        app,
        Method::POST,
        "/explain",
        ADMIN,
        Some(&json!({"a": {"text": a}, "b": {"text": b}})),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let x: Value = resp.json().await.unwrap();
    let ab = x["containment_a_in_b"].as_f64().unwrap();
    let ba = x["containment_b_in_a"].as_f64().unwrap();
    (
        x["jaccard"].as_f64().unwrap(),
        ab.max(ba),
        x["content"]["jaccard"].as_f64(),
    )
}

fn is_ms_time(s: &str) -> bool {
    // 2026-11-29T03:38:15.123Z
    s.len() == 24
        && s.as_bytes()[10] == b'T'
        && s.ends_with('Z')
        && s.as_bytes()[19] == b'.'
        && s[20..23].bytes().all(|b| b.is_ascii_digit())
}

#[tokio::test]
async fn decisions_are_created_edited_read_listed_exported_and_deleted() {
    let app = spawn_app_with(keyed_settings()).await;
    let half: String = {
        let words: Vec<&str> = TEXTS[0].split(' ').collect();
        words[..words.len() / 2].join(" ")
    };
    let docs = [
        ("fr-1", TEXTS[0].to_owned()),
        ("fr-2", near(0, "nitrites")),
        ("fr-3", half.clone()),
        ("ru-1", TEXTS[3].to_owned()),
        ("ru-2", near(3, "горсовета")),
        ("zh-1", TEXTS[4].to_owned()),
        ("zh-2", format!("{}，另据报道", TEXTS[4])),
        ("de-1", TEXTS[1].to_owned()),
    ];
    for (id, text) in &docs {
        let r = call(
            &app,
            Method::PUT,
            &format!("/documents/{id}"),
            ADMIN,
            Some(&json!({ "text": text })),
        )
        .await;
        assert!(r.status().is_success(), "{id}: {}", r.status());
    }
    let text = |id: &str| docs.iter().find(|(i, _)| *i == id).unwrap().1.clone();

    // A new decision by the named moderator: 201, the pair ordered, the
    // server's scores.
    let resp = decide(
        &app,
        CAMILLE,
        json!({"a": "fr-2", "b": "fr-1", "verdict": "duplicate", "note": "Même annonce, l’adresse change"}),
    )
    .await;
    assert_eq!(resp.status(), 201);
    let d: Value = resp.json().await.unwrap();
    assert_eq!(
        (d["a"].as_str(), d["b"].as_str()),
        (Some("fr-1"), Some("fr-2")),
        "{d}"
    );
    assert_eq!(d["verdict"], "duplicate");
    assert_eq!(d["revision"], 1);
    assert_eq!(d["decided_by"], CAMILLE_NAME);
    assert_eq!(d["note"], "Même annonce, l’adresse change");
    assert!(is_ms_time(d["decided_at"].as_str().unwrap()), "{d}");
    let (j, c, content) = explained(&app, &text("fr-1"), &text("fr-2")).await;
    assert_eq!(d["scores"]["jaccard"].as_f64(), Some(j), "{d}");
    assert_eq!(d["scores"]["containment"].as_f64(), Some(c), "{d}");
    assert!(content.is_some(), "the collection counts boilerplate");
    assert_eq!(d["scores"]["content_jaccard"].as_f64(), content, "{d}");
    assert!(j > 0.8 && j < 1.0, "a near-duplicate: {j}");

    // Edited by a key without a name: 200, revision 2, decided_by null;
    // the body's scores are ignored for a stored pair.
    let resp = decide(
        &app,
        ADMIN,
        json!({"a": "fr-1", "b": "fr-2", "verdict": "not_duplicate",
               "scores": {"jaccard": 0.01, "containment": 0.02}}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let edited: Value = resp.json().await.unwrap();
    assert_eq!(edited["revision"], 2);
    assert_eq!(edited["decided_by"], Value::Null);
    assert_eq!(edited["note"], Value::Null);
    assert_eq!(edited["verdict"], "not_duplicate");
    assert_eq!(edited["scores"]["jaccard"].as_f64(), Some(j));
    let back = read_decision(&app, READER, "fr-2", "fr-1").await;
    assert_eq!(back.status(), 200);
    assert_eq!(back.json::<Value>().await.unwrap(), edited);

    // Containment differs from Jaccard for an excerpt; Russian and Chinese.
    for (x, y, verdict) in [
        ("fr-3", "fr-1", "related"),
        ("ru-1", "ru-2", "duplicate"),
        ("zh-2", "zh-1", "duplicate"),
    ] {
        let resp = decide(&app, CAMILLE, json!({"a": x, "b": y, "verdict": verdict})).await;
        assert_eq!(resp.status(), 201, "{x} {y}");
        let d: Value = resp.json().await.unwrap();
        let (j, c, content) = explained(&app, &text(x), &text(y)).await;
        assert_eq!(d["scores"]["jaccard"].as_f64(), Some(j), "{x} {y}: {d}");
        assert_eq!(d["scores"]["containment"].as_f64(), Some(c), "{x} {y}: {d}");
        assert_eq!(
            d["scores"]["content_jaccard"].as_f64(),
            content,
            "{x} {y}: {d}"
        );
        if x == "fr-3" {
            assert!(c > j + 0.3, "an excerpt is contained: {c} against {j}");
        }
    }
    // A pair with a document that is not stored: the body's scores, or none.
    let resp = decide(
        &app,
        CAMILLE,
        json!({"a": "de-1", "b": "refusé-1", "verdict": "duplicate",
               "scores": {"jaccard": 0.875, "containment": 0.9375, "content_jaccard": 0.5}}),
    )
    .await;
    assert_eq!(resp.status(), 201);
    let d: Value = resp.json().await.unwrap();
    assert_eq!(
        d["scores"],
        json!({"jaccard": 0.875, "containment": 0.9375, "content_jaccard": 0.5})
    );
    let resp = decide(
        &app,
        CAMILLE,
        json!({"a": "refusé-2", "b": "de-1", "verdict": "related", "note": null}),
    )
    .await;
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.json::<Value>().await.unwrap()["scores"], Value::Null);

    // Pages of 2, in pair order, the same as one page and as the export.
    let (paged, total) = all_pages(&app, READER, "", 2).await;
    assert_eq!(total, 6);
    let pairs: Vec<(String, String)> = paged
        .iter()
        .map(|d| {
            (
                d["a"].as_str().unwrap().into(),
                d["b"].as_str().unwrap().into(),
            )
        })
        .collect();
    let mut sorted = pairs.clone();
    sorted.sort();
    assert_eq!(pairs, sorted);
    assert_eq!(
        pairs[0],
        ("de-1".to_owned(), "refusé-1".to_owned()),
        "bytewise order"
    );
    let (whole, _) = all_pages(&app, READER, "", 1000).await;
    assert_eq!(whole, paged);
    let resp = app
        .client
        .get(app.read_url("/review/decisions"))
        .bearer_auth(READER)
        .header("accept", "application/x-ndjson")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/x-ndjson");
    let lines: Vec<Value> = resp
        .text()
        .await
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one decision per line"))
        .collect();
    assert_eq!(lines, paged);
    let (dups, n) = all_pages(&app, READER, "&verdict=duplicate", 1).await;
    assert_eq!(n, 3);
    assert!(dups.iter().all(|d| d["verdict"] == "duplicate"));

    // Deleted: 204, then 404 on a read and on a second delete.
    let resp = call(
        &app,
        Method::DELETE,
        &pair_path("/review/decision", "zh-1", "zh-2"),
        CAMILLE,
        None,
    )
    .await;
    assert_eq!(resp.status(), 204);
    let body = assert_problem(read_decision(&app, READER, "zh-2", "zh-1").await, 404).await;
    assert_eq!(body["type"], "urn:neardup:problem:decision-not-found");
    let resp = call(
        &app,
        Method::DELETE,
        &pair_path("/review/decision", "zh-1", "zh-2"),
        CAMILLE,
        None,
    )
    .await;
    let body = assert_problem(resp, 404).await;
    assert_eq!(body["type"], "urn:neardup:problem:decision-not-found");
    let (_, total) = all_pages(&app, READER, "", 100).await;
    assert_eq!(total, 5);

    // Written decisions are counted by verdict (an edit counts again).
    // The writing node counted them (reads may go to another).
    let metrics = app
        .client
        .get(format!("{}/metrics", app.base))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let count = |verdict: &str| {
        metric_value(
            &metrics,
            "neardup_review_decisions_total",
            &[
                ("collection", crate::helpers::collection_label()),
                ("verdict", verdict),
            ],
        )
    };
    assert_eq!(count("duplicate"), Some(4.0), "{metrics}");
    assert_eq!(count("not_duplicate"), Some(1.0));
    assert_eq!(count("related"), Some(2.0));
}

#[tokio::test]
async fn bad_decisions_are_refused_naming_the_field_and_read_only_keys_cannot_decide() {
    let app = spawn_app_with(keyed_settings()).await;
    let cases: Vec<(Value, &str)> = vec![
        (json!({"a": "x", "b": "x", "verdict": "duplicate"}), "a, b"),
        (
            json!({"a": "x", "b": "y", "verdict": "Duplicate"}),
            "verdict",
        ),
        (json!({"a": "x", "b": "y", "verdict": "doublon"}), "verdict"),
        (json!({"a": "", "b": "y", "verdict": "related"}), "a:"),
        (json!({"a": "x", "b": "y\u{7}", "verdict": "related"}), "b:"),
        (
            json!({"a": "x", "b": "y", "verdict": "related", "note": "é".repeat(1001)}),
            "note",
        ),
        (
            json!({"a": "x", "b": "y", "verdict": "related", "scores": {"jaccard": 1.5, "containment": 0.5}}),
            "scores.jaccard",
        ),
        (
            json!({"a": "x", "b": "y", "verdict": "related", "scores": {"jaccard": 0.5, "containment": -0.1}}),
            "scores.containment",
        ),
        (
            json!({"a": "x", "b": "y", "verdict": "related", "scores": {"jaccard": 0.5, "containment": 0.5, "content_jaccard": null}}),
            "content_jaccard",
        ),
        (json!({"a": "x", "b": "y"}), "verdict"),
        (
            json!({"a": "x", "b": "y", "verdict": "related", "who": "me"}),
            "who",
        ),
        (json!(["x", "y", "related"]), "object"),
    ];
    for (body, field) in cases {
        let resp = decide(&app, CAMILLE, body.clone()).await;
        let p = assert_problem(resp, 422).await;
        assert_eq!(p["type"], "urn:neardup:problem:invalid-body", "{body}");
        assert!(
            p["detail"].as_str().unwrap().contains(field),
            "{body}: {}",
            p["detail"]
        );
    }
    // A note of exactly 2000 bytes is kept.
    let resp = decide(
        &app,
        CAMILLE,
        json!({"a": "x", "b": "y", "verdict": "related", "note": "ж".repeat(1000)}),
    )
    .await;
    assert_eq!(resp.status(), 201);

    for path in [
        "/review/decision?a=x",
        "/review/decision?a=x&b=x",
        "/review/decision?a=x&b=y&c=z",
        "/review/decisions?verdict=doublon",
        "/review/decisions?limit=0",
        "/review/decisions?limit=1001",
        "/review/decisions?cursor=%%%",
        "/review/decisions?cursor=WyJhIl0",
    ] {
        let p = assert_problem(call(&app, Method::GET, path, READER, None).await, 400).await;
        assert_eq!(p["type"], "urn:neardup:problem:invalid-parameter", "{path}");
    }
    let p = assert_problem(
        call(&app, Method::DELETE, "/review/decision?b=y", CAMILLE, None).await,
        400,
    )
    .await;
    assert!(p["detail"].as_str().unwrap().contains('a'), "{p}");

    // Read-only: reads yes, decisions no.
    let resp = decide(
        &app,
        READER,
        json!({"a": "x", "b": "z", "verdict": "duplicate"}),
    )
    .await;
    assert_problem(resp, 403).await;
    let resp = call(
        &app,
        Method::DELETE,
        "/review/decision?a=x&b=y",
        READER,
        None,
    )
    .await;
    assert_problem(resp, 403).await;
    let resp = read_decision(&app, READER, "y", "x").await;
    assert_eq!(resp.status(), 200);
    let d: Value = resp.json().await.unwrap();
    assert_eq!(d["decided_by"], CAMILLE_NAME);
    let (all, total) = all_pages(&app, READER, "", 10).await;
    assert_eq!((all.len(), total), (1, 1), "the refused ones left nothing");
    // Without a key: 401.
    let resp = app
        .client
        .get(app.read_url("/review/decisions"))
        .send()
        .await
        .unwrap();
    assert_problem(resp, 401).await;
}

/// Settings on a data directory the test keeps, so a second server finds
/// what the first stored.
fn on_dir(dir: &std::path::Path) -> Settings {
    let mut s = test_settings();
    s.storage.data_dir = dir.to_owned();
    s
}

#[tokio::test]
async fn decisions_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let app = spawn_app_with(on_dir(dir.path())).await;
    app.insert("annonce-1", TEXTS[2]).await;
    app.insert("annonce-2", &near(2, "consultation.")).await;
    let mut written = Vec::new();
    for (x, y, v) in [
        ("annonce-1", "annonce-2", "duplicate"),
        ("annonce-1", "absente", "not_duplicate"),
        ("annonce-2", "absente", "related"),
    ] {
        let resp = app
            .put_json(
                "/review/decisions",
                &json!({"a": x, "b": y, "verdict": v, "note": "« vu »"}),
            )
            .await;
        assert_eq!(resp.status(), 201);
        written.push(resp.json::<Value>().await.unwrap());
    }
    let resp = app
        .put_json(
            "/review/decisions",
            &json!({"a": "absente", "b": "annonce-2", "verdict": "duplicate"}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    written[2] = resp.json::<Value>().await.unwrap();
    assert_eq!(written[2]["revision"], 2);
    let resp = app
        .delete(&pair_path("/review/decision", "absente", "annonce-1"))
        .await;
    assert_eq!(resp.status(), 204);
    written.remove(1);
    // Listed by pair: "absente" < "annonce-1".
    written.sort_by_key(|d| {
        (
            d["a"].as_str().unwrap().to_owned(),
            d["b"].as_str().unwrap().to_owned(),
        )
    });
    app.stop().await.unwrap();

    let app = spawn_app_with(on_dir(dir.path())).await;
    let page = app.get_json("/review/decisions").await;
    assert_eq!(page["decisions"], Value::Array(written.clone()), "{page}");
    assert_eq!(page["total"], 2);
    // And the log goes on after the restart.
    let resp = app
        .put_json(
            "/review/decisions",
            &json!({"a": "annonce-2", "b": "absente", "verdict": "related"}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.json::<Value>().await.unwrap()["revision"], 3);
}

#[tokio::test]
async fn a_damaged_decisions_file_is_an_error_until_it_is_repaired_never_an_empty_list() {
    if crate::REDIS {
        // The file is the memory backend's.
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let app = spawn_app_with(on_dir(dir.path())).await;
    for i in 0..3 {
        let resp = app
            .put_json(
                "/review/decisions",
                &json!({"a": format!("offre-{i}"), "b": "offre-z", "verdict": "duplicate"}),
            )
            .await;
        assert_eq!(resp.status(), 201);
    }
    app.stop().await.unwrap();
    let file = find_file(dir.path(), "decisions.log").expect("the decisions log");
    let good = std::fs::read(&file).unwrap();
    let mut bad = good.clone();
    bad[20] ^= 0x40;
    std::fs::write(&file, &bad).unwrap();

    let app = spawn_app_with(on_dir(dir.path())).await;
    let p = assert_problem(app.get("/review/decisions").await, 500).await;
    assert_eq!(p["type"], "urn:neardup:problem:internal");
    let resp = app
        .put_json(
            "/review/decisions",
            &json!({"a": "offre-9", "b": "offre-z", "verdict": "related"}),
        )
        .await;
    assert_problem(resp, 500).await;
    assert_eq!(
        std::fs::read(&file).unwrap(),
        bad,
        "nothing written over it"
    );
    // An operator sees it in the metrics too, for as long as it lasts.
    let unreadable = |text: &str| {
        crate::helpers::metric_value(
            text,
            "neardup_file_unreadable",
            &[
                ("collection", crate::COLLECTION.unwrap_or("default")),
                ("file", "decisions"),
            ],
        )
    };
    let m = app.metrics().await;
    assert_eq!(unreadable(&m), Some(1.0), "{m}");
    // Repaired (here: the good bytes back), it answers again, all of it.
    std::fs::write(&file, &good).unwrap();
    let page = app.get_json("/review/decisions").await;
    assert_eq!(page["total"], 3, "{page}");
    let m = app.metrics().await;
    assert_eq!(unreadable(&m), None, "{m}");
}

fn find_file(dir: &std::path::Path, name: &str) -> Option<std::path::PathBuf> {
    find_file_where(dir, &|p| p.file_name().is_some_and(|n| n == name))
}

/// The first file under `dir` that `wanted` accepts, of the collection the
/// suite addresses.
pub(crate) fn find_file_where(
    dir: &std::path::Path,
    wanted: &dyn Fn(&std::path::Path) -> bool,
) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(dir).ok()? {
        let p = entry.ok()?.path();
        if p.is_dir() {
            if let Some(f) = find_file_where(&p, wanted) {
                return Some(f);
            }
        } else if wanted(&p) {
            // The collection the suite addresses (its directory's name).
            if crate::COLLECTION.is_none_or(|c| p.to_string_lossy().contains(c)) {
                return Some(p);
            }
        }
    }
    None
}

#[tokio::test]
async fn decisions_are_kept_by_a_reindex_and_go_with_their_collection() {
    if crate::COLLECTION.is_some() {
        // The test makes collections of its own; once is enough.
        return;
    }
    let app = spawn_app_with(test_settings()).await;
    let resp = app
        .put_json("/collections/revues", &json!({"store_text": true}))
        .await;
    assert_eq!(resp.status(), 201);
    for (id, text) in [("a", TEXTS[5].to_owned()), ("b", near(5, "barrio"))] {
        let r = app
            .put_json(
                &format!("/collections/revues/documents/{id}"),
                &json!({ "text": text }),
            )
            .await;
        assert!(r.status().is_success());
    }
    let resp = app
        .put_json(
            "/collections/revues/review/decisions",
            &json!({"a": "b", "b": "a", "verdict": "duplicate", "note": "misma petición"}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    let decided: Value = resp.json().await.unwrap();
    let resp = app
        .post_json(
            "/collections/revues/reindex",
            &json!({"index": {"threshold": 0.7}}),
        )
        .await;
    assert!(resp.status().is_success(), "{}", resp.status());
    let stats = crate::helpers::wait_reindex_done(&app, "revues").await;
    assert_eq!(stats["reindex"]["state"], "done", "{stats}");
    // On Redis the reading node follows the switch to the new keys within
    // its catalog watch: wait for it (the decision is there either way).
    for _ in 0..25 {
        let d = app
            .get_json("/collections/revues/review/decision?a=a&b=b")
            .await;
        assert_eq!(d, decided);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Edited after the reindex: on the new index, revision 2.
    let resp = app
        .put_json(
            "/collections/revues/review/decisions",
            &json!({"a": "a", "b": "b", "verdict": "related"}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.json::<Value>().await.unwrap()["revision"], 2);

    // Deleted with the collection: a new one of the name has none.
    let resp = app.delete("/collections/revues").await;
    assert_eq!(resp.status(), 204);
    let resp = app
        .put_json("/collections/revues", &json!({"store_text": true}))
        .await;
    assert_eq!(resp.status(), 201);
    let page = app.get_json("/collections/revues/review/decisions").await;
    assert_eq!(
        page,
        json!({"decisions": [], "next_cursor": null, "total": 0})
    );
    // The default collection never saw any.
    let page = app.get_json("/review/decisions").await;
    assert_eq!(page["total"], 0);
}
