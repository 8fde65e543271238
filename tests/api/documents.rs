//! `/documents`: create, read, replace, delete, ingest-and-check, and batch.

use crate::helpers::{
    approx_eq, assert_problem, doc_path, reference_overlap, result_ids, route, spawn_app,
    spawn_app_with, test_settings,
};
use serde_json::{json, Value};

const NIGHT: &str = "The night is dark and the moon is red.";
const MOON: &str = "I can see moon is red, the night is dark.";

fn location(resp: &reqwest::Response) -> String {
    resp.headers()
        .get("location")
        .expect("a Location header")
        .to_str()
        .unwrap()
        .to_owned()
}

fn is_uuid_v7(s: &str) -> bool {
    let b = s.as_bytes();
    s.len() == 36
        && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-')
        && s.chars()
            .enumerate()
            .all(|(i, c)| [8, 13, 18, 23].contains(&i) || c.is_ascii_hexdigit())
        && b[14] == b'7'
        && matches!(b[19], b'8' | b'9' | b'a' | b'b')
}

#[tokio::test]
async fn posting_a_document_returns_201_with_location() {
    let app = spawn_app().await;
    let resp = app
        .post_json("/documents", &json!({"id": "doc-1", "text": NIGHT}))
        .await;
    assert_eq!(resp.status(), 201);
    assert_eq!(location(&resp), route("/documents/doc-1"));
    let body: Value = resp.json().await.unwrap();
    // docs/examples.md: document 1 has 7 word 3-shingles.
    assert_eq!(body, json!({"id": "doc-1", "shingles": 7}));
}

#[tokio::test]
async fn a_posted_document_can_be_read_back() {
    let app = spawn_app().await;
    app.insert("doc-2", MOON).await;
    let body = app.get_json("/documents/doc-2").await;
    assert_eq!(body["id"], "doc-2");
    assert_eq!(body["shingles"], 8);
    assert_eq!(body["metadata"], Value::Null);
}

#[tokio::test]
async fn reading_an_unknown_document_is_404() {
    let app = spawn_app().await;
    app.insert("present", NIGHT).await;
    let body = assert_problem(app.get("/documents/absent").await, 404).await;
    assert_eq!(body["type"], "urn:neardup:problem:document-not-found");
}

#[tokio::test]
async fn posting_without_an_id_generates_distinct_uuid_v7_ids_in_creation_order() {
    let app = spawn_app().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let resp = app
            .post_json("/documents", &json!({"text": format!("{NIGHT} take {i}")}))
            .await;
        assert_eq!(resp.status(), 201);
        let loc = location(&resp);
        let body: Value = resp.json().await.unwrap();
        let id = body["id"].as_str().expect("generated id").to_owned();
        assert!(is_uuid_v7(&id), "not a UUIDv7: {id}");
        assert_eq!(loc, route(&format!("/documents/{id}")));
        // The generated id is a real, readable id.
        assert_eq!(app.get_json(&loc).await["id"], id.as_str());
        ids.push(id);
    }
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(
        sorted, ids,
        "generated ids are distinct and sort by creation"
    );
}

#[tokio::test]
async fn location_percent_encodes_ids_and_leads_back_to_the_document() {
    let app = spawn_app().await;
    for (id, expected) in [
        ("a b/ü", "/documents/a%20b%2F%C3%BC"),
        ("100%?#&+", "/documents/100%25%3F%23%26%2B"),
        ("x.y-z_~", "/documents/x.y-z_~"),
    ] {
        let resp = app
            .post_json("/documents", &json!({"id": id, "text": NIGHT}))
            .await;
        assert_eq!(resp.status(), 201, "{id}");
        let loc = location(&resp);
        assert_eq!(loc, route(expected));
        // Following the Location finds the document.
        assert_eq!(app.get_json(&loc).await["id"], id);
        // And so does any other valid encoding of the same id.
        assert_eq!(app.get_json(&doc_path(id)).await["id"], id);
    }
    let resp = app
        .post_json("/documents", &json!({"id": "a b/ü", "text": MOON}))
        .await;
    assert_problem(resp, 409).await;
}

#[tokio::test]
async fn posting_an_existing_id_is_409_and_keeps_the_first_document() {
    let app = spawn_app().await;
    app.insert("dup", NIGHT).await;
    let resp = app
        .post_json(
            "/documents",
            &json!({"id": "dup", "text": "something else entirely"}),
        )
        .await;
    let body = assert_problem(resp, 409).await;
    assert_eq!(body["type"], "urn:neardup:problem:already-exists");
    assert_eq!(app.get_json("/documents/dup").await["shingles"], 7);
    assert_eq!(app.stats().await["documents"], 1);
}

#[tokio::test]
async fn putting_a_new_id_creates_with_201_and_an_existing_one_replaces_with_200() {
    let app = spawn_app().await;
    let resp = app
        .put_json(&doc_path("p/1"), &json!({"text": NIGHT}))
        .await;
    assert_eq!(resp.status(), 201);
    assert_eq!(location(&resp), route("/documents/p%2F1"));
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body, json!({"id": "p/1", "shingles": 7}));

    let resp = app.put_json(&doc_path("p/1"), &json!({"text": MOON})).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body, json!({"id": "p/1", "shingles": 8}));
    assert_eq!(app.get_json(&doc_path("p/1")).await["shingles"], 8);
    assert_eq!(app.stats().await["documents"], 1);
}

#[tokio::test]
async fn a_put_body_with_an_id_of_its_own_is_422_and_changes_nothing() {
    let app = spawn_app().await;
    app.insert("left", NIGHT).await;
    // The id comes from the path only, so a body can never contradict it:
    // an id field is refused even when it agrees.
    for id in ["right", "left"] {
        let resp = app
            .put_json("/documents/left", &json!({"id": id, "text": MOON}))
            .await;
        let problem = assert_problem(resp, 422).await;
        assert_eq!(problem["type"], "urn:neardup:problem:invalid-body");
        assert!(
            problem["detail"].as_str().unwrap().contains("`id`"),
            "{problem}"
        );
    }
    assert_eq!(app.get_json("/documents/left").await["shingles"], 7);
    assert_problem(app.get("/documents/right").await, 404).await;
}

#[tokio::test]
async fn deleting_a_document_returns_204_and_it_is_gone() {
    let app = spawn_app().await;
    app.insert("gone", NIGHT).await;
    app.insert("kept", MOON).await;
    let resp = app.delete("/documents/gone").await;
    assert_eq!(resp.status(), 204);
    assert!(resp.bytes().await.unwrap().is_empty());
    assert_problem(app.get("/documents/gone").await, 404).await;
    assert_problem(app.delete("/documents/gone").await, 404).await;
    assert_eq!(app.get_json("/documents/kept").await["id"], "kept");
    assert_eq!(app.stats().await["documents"], 1);
    // The id is free again.
    app.insert("gone", MOON).await;
}

#[tokio::test]
async fn metadata_objects_are_kept_verbatim() {
    let app = spawn_app().await;
    // Key order, a number beyond f64 precision and escapes must survive as sent.
    let metadata =
        r#"{"z":1,"a":[true,null,{"n":123456789012345678901234567890}],"s":"caf\u00e9 \"q\""}"#;
    let body = format!(r#"{{"id":"m","text":"hello there world","metadata":{metadata}}}"#);
    let resp = app.post_raw("/documents", "application/json", body).await;
    assert_eq!(resp.status(), 201);
    let text = app.get("/documents/m").await.text().await.unwrap();
    assert!(
        text.contains(&format!(r#""metadata":{metadata}"#)),
        "metadata not verbatim: {text}"
    );

    // PUT replaces metadata too, and null clears it.
    let resp = app
        .put_json(
            "/documents/m",
            &json!({"text": "hello", "metadata": {"v": 2}}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        app.get_json("/documents/m").await["metadata"],
        json!({"v": 2})
    );
    let resp = app
        .put_json("/documents/m", &json!({"text": "hello", "metadata": null}))
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(app.get_json("/documents/m").await["metadata"], Value::Null);
}

#[tokio::test]
async fn non_object_metadata_is_422_and_nothing_is_stored() {
    let app = spawn_app().await;
    for (i, metadata) in [json!([1, 2]), json!("text"), json!(5), json!(true)]
        .into_iter()
        .enumerate()
    {
        let id = format!("meta-{i}");
        let resp = app
            .post_json(
                "/documents",
                &json!({"id": id, "text": NIGHT, "metadata": metadata}),
            )
            .await;
        assert_problem(resp, 422).await;
        let resp = app
            .put_json(
                &doc_path(&id),
                &json!({"text": NIGHT, "metadata": metadata}),
            )
            .await;
        assert_problem(resp, 422).await;
        assert_problem(app.get(&doc_path(&id)).await, 404).await;
    }
    assert_eq!(app.stats().await["documents"], 0);
}

#[tokio::test]
async fn ingest_and_check_returns_earlier_near_duplicates_with_exact_jaccard() {
    let app = spawn_app().await;
    let base = "the quick brown fox jumps over the lazy dog while the farmer sleeps \
                under the old oak tree near the river bank on a warm summer afternoon";
    let near = format!("{base} today");
    let far = "completely unrelated words about databases and indexes and query plans";
    app.insert("base", base).await;
    app.insert("far", far).await;

    let resp = app
        .post_json(
            "/documents?similar=true",
            &json!({"id": "near", "text": near}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    assert_eq!(location(&resp), route("/documents/near"));
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["id"], "near");
    assert_eq!(body["truncated"], false);
    assert_eq!(result_ids(&body["similar"]), ["base"]);
    let (inter, union) = reference_overlap(&near, base);
    let m = &body["similar"][0];
    assert!(
        approx_eq(m["jaccard"].as_f64().unwrap(), inter as f64 / union as f64),
        "{m}"
    );
    let estimate = m["estimate"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&estimate));
    // And it was stored.
    assert_eq!(app.get_json("/documents/near").await["id"], "near");

    // Without ?similar the answer has no similar/truncated fields.
    let resp = app
        .post_json("/documents", &json!({"id": "near2", "text": near}))
        .await;
    let body: Value = resp.json().await.unwrap();
    assert!(
        body.get("similar").is_none() && body.get("truncated").is_none(),
        "{body}"
    );

    // similar is computed before the insert: an identical copy sees the
    // others, never itself.
    let resp = app
        .post_json(
            "/documents?similar=true&threshold=0.95&limit=1",
            &json!({"id": "near3", "text": near}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(result_ids(&body["similar"]), ["near"]);
    assert_eq!(body["similar"][0]["jaccard"], 1.0);
}

#[tokio::test]
async fn ingest_and_check_with_an_invalid_threshold_is_400_and_stores_nothing() {
    let app = spawn_app().await;
    for query in [
        "similar=true&threshold=0.5",
        "similar=true&threshold=1.5",
        "similar=true&limit=0",
    ] {
        let resp = app
            .post_json(
                &format!("/documents?{query}"),
                &json!({"id": "x", "text": NIGHT}),
            )
            .await;
        assert_problem(resp, 400).await;
    }
    assert_problem(app.get("/documents/x").await, 404).await;
}

#[tokio::test]
async fn a_batch_creates_every_document_and_reports_them_in_order() {
    let app = spawn_app().await;
    let docs: Vec<Value> = (0..20)
        .map(|i| json!({"id": format!("b{:02}", 19 - i), "text": format!("{NIGHT} number {i}")}))
        .collect();
    let resp = app
        .post_json("/documents/batch", &json!({"documents": docs}))
        .await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["created"], 20);
    assert_eq!(body["replaced"], 0);
    assert_eq!(body["failed"], 0);
    let results = body["results"].as_array().unwrap();
    assert_eq!(results.len(), 20);
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r["id"], format!("b{:02}", 19 - i), "order");
        assert_eq!(r["status"], 201);
        // NIGHT's 9 words plus "number i": 11 words, 9 word 3-shingles.
        assert_eq!(r["shingles"], 9);
        assert!(r.get("detail").is_none());
    }
    assert_eq!(app.stats().await["documents"], 20);
    assert_eq!(app.get_json("/documents/b07").await["shingles"], 9);
}

#[tokio::test]
async fn a_batch_without_ids_generates_them() {
    let app = spawn_app().await;
    let resp = app
        .post_json(
            "/documents/batch",
            &json!({"documents": [{"text": NIGHT}, {"text": MOON, "metadata": {"k": 1}}]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["created"], 2);
    let ids = result_ids(&body["results"]);
    assert_ne!(ids[0], ids[1]);
    for id in &ids {
        assert!(is_uuid_v7(id), "{id}");
    }
    let second = app.get_json(&doc_path(&ids[1])).await;
    assert_eq!(second["metadata"], json!({"k": 1}));
    assert_eq!(second["shingles"], 8);
}

#[tokio::test]
async fn bad_items_in_a_batch_fail_alone_with_their_own_status() {
    let app = spawn_app().await;
    app.insert("exists", NIGHT).await;
    let long_id = "x".repeat(257);
    let docs = json!([
        {"id": "ok-1", "text": NIGHT},
        {"id": "empty", "text": "?!..."},
        {"id": "", "text": NIGHT},
        {"id": long_id, "text": NIGHT},
        {"id": "ctl\u{7}", "text": NIGHT},
        {"id": "no-text"},
        {"id": "typed", "text": 5},
        {"id": "extra", "text": NIGHT, "colour": "red"},
        42,
        {"id": "meta", "text": NIGHT, "metadata": [1]},
        {"id": "exists", "text": MOON},
        {"id": "ok-2", "text": MOON},
    ]);
    let resp = app
        .post_json("/documents/batch", &json!({"documents": docs}))
        .await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    let statuses: Vec<u64> = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_u64().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [201, 422, 400, 400, 400, 422, 422, 422, 422, 422, 409, 201]
    );
    assert_eq!(body["created"], 2);
    assert_eq!(body["replaced"], 0);
    assert_eq!(body["failed"], 10);
    let results = body["results"].as_array().unwrap();
    for r in results {
        let failed = r["status"].as_u64().unwrap() >= 400;
        assert_eq!(r["detail"].is_string(), failed, "{r}");
        assert_eq!(r["shingles"].is_u64(), !failed, "{r}");
    }
    // Items whose id could be read report it, those that did not parse too.
    assert_eq!(results[1]["id"], "empty");
    assert_eq!(results[3]["id"], long_id.as_str());
    assert_eq!(results[5]["id"], "no-text", "{}", results[5]);
    assert_eq!(results[6]["id"], "typed", "{}", results[6]);
    assert_eq!(results[7]["id"], "extra", "{}", results[7]);
    assert_eq!(results[8]["id"], Value::Null);
    assert_eq!(
        results[8]["detail"],
        "the item must be a JSON object, not a number"
    );
    assert_eq!(results[10]["id"], "exists");
    assert_eq!(results[11]["id"], "ok-2");
    // Only the good items were stored; the existing one is untouched.
    assert_eq!(app.stats().await["documents"], 3);
    assert_eq!(app.get_json("/documents/exists").await["shingles"], 7);
    assert_problem(app.get("/documents/empty").await, 404).await;
    assert_problem(app.get("/documents/meta").await, 404).await;
}

#[tokio::test]
async fn a_repeated_id_in_one_batch_is_409_in_create_mode() {
    let app = spawn_app().await;
    let docs = json!([
        {"id": "twice", "text": NIGHT},
        {"id": "other", "text": "a b c d"},
        {"id": "twice", "text": MOON},
    ]);
    let body: Value = app
        .post_json("/documents/batch?mode=create", &json!({"documents": docs}))
        .await
        .json()
        .await
        .unwrap();
    let statuses: Vec<&Value> = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["status"])
        .collect();
    assert_eq!(statuses, [&json!(201), &json!(201), &json!(409)]);
    assert_eq!(
        (body["created"].clone(), body["failed"].clone()),
        (json!(2), json!(1))
    );
    // The first one won.
    assert_eq!(app.get_json("/documents/twice").await["shingles"], 7);
}

#[tokio::test]
async fn a_repeated_id_in_one_batch_is_replaced_in_upsert_mode() {
    let app = spawn_app().await;
    app.insert("old", "a b c d e").await;
    let docs = json!([
        {"id": "twice", "text": NIGHT},
        {"id": "twice", "text": MOON},
        {"id": "old", "text": NIGHT},
    ]);
    let body: Value = app
        .post_json("/documents/batch?mode=upsert", &json!({"documents": docs}))
        .await
        .json()
        .await
        .unwrap();
    let statuses: Vec<u64> = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [201, 200, 200]);
    assert_eq!(body["created"], 1);
    assert_eq!(body["replaced"], 2);
    assert_eq!(body["failed"], 0);
    // The last write wins, as sequential calls would.
    assert_eq!(app.get_json("/documents/twice").await["shingles"], 8);
    assert_eq!(app.get_json("/documents/old").await["shingles"], 7);
    assert_eq!(app.stats().await["documents"], 2);
}

#[tokio::test]
async fn an_empty_batch_is_fine() {
    let app = spawn_app().await;
    let body: Value = app
        .post_json("/documents/batch", &json!({"documents": []}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        body,
        json!({"created": 0, "replaced": 0, "failed": 0, "results": []})
    );
}

#[tokio::test]
async fn a_batch_over_max_batch_is_413_and_stores_nothing() {
    let mut settings = test_settings();
    settings.server.max_batch = 3;
    let app = spawn_app_with(settings).await;
    let docs = |n: usize| -> Value {
        (0..n)
            .map(|i| json!({"id": format!("d{i}"), "text": NIGHT}))
            .collect()
    };
    let resp = app
        .post_json("/documents/batch", &json!({"documents": docs(4)}))
        .await;
    let body = assert_problem(resp, 413).await;
    assert_eq!(body["type"], "urn:neardup:problem:payload-too-large");
    assert_eq!(app.stats().await["documents"], 0);
    // Exactly max_batch is accepted.
    let resp = app
        .post_json("/documents/batch", &json!({"documents": docs(3)}))
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(app.stats().await["documents"], 3);
}

#[tokio::test]
async fn ids_that_could_never_be_addressed_are_reserved() {
    // `batch` would be shadowed by the POST /documents/batch route, and URL
    // clients (RFC 3986 §5.2.4: reqwest, browsers, curl) remove "." and ".."
    // path segments even when percent-encoded, so such documents could be
    // created but never read, replaced or deleted. They are refused with 400
    // on every write path, and nothing is stored.
    let app = spawn_app().await;
    for id in ["batch", ".", ".."] {
        let resp = app
            .post_json("/documents", &json!({"id": id, "text": NIGHT}))
            .await;
        let body = assert_problem(resp, 400).await;
        assert_eq!(
            body["type"], "urn:neardup:problem:invalid-id",
            "{id:?}: {body}"
        );
        let resp = app
            .post_json(
                "/documents/batch",
                &json!({"documents": [{"id": id, "text": NIGHT}]}),
            )
            .await;
        assert_eq!(resp.status(), 200);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["results"][0]["status"], 400, "{id:?}: {body}");
    }
    assert_eq!(app.stats().await["documents"], 0);
}

#[tokio::test]
async fn inserted_texts_get_the_reference_shingle_counts() {
    // A cross-check of the server's shingling against the test's reference
    // shingler on a few shapes: fewer words than k, punctuation, case, repeats.
    let app = spawn_app().await;
    for (i, text) in [
        "hello",
        "Hello, WORLD!",
        "a b c",
        "a b c a b c a b c",
        "  spaced\tout\n\nwords   here  ",
        NIGHT,
        MOON,
    ]
    .into_iter()
    .enumerate()
    {
        let body = app.insert(&format!("t{i}"), text).await;
        let expected = crate::helpers::reference_word_shingles(text, 3).len();
        assert_eq!(body["shingles"], expected, "{text:?}");
    }
}

/// A JSON array posted to `POST /documents` (several documents, or one
/// document's fields in order) is told what the route takes and where
/// several go, in the API's terms, not serde's.
#[tokio::test]
async fn an_array_posted_as_a_document_is_told_where_several_go() {
    let app = spawn_app().await;
    for body in [
        json!([{"id": "a", "text": NIGHT}, {"id": "b", "text": MOON}]),
        json!(["a", NIGHT, null, null, null]),
        json!([NIGHT]),
    ] {
        let problem = assert_problem(app.post_json("/documents", &body).await, 422).await;
        let detail = problem["detail"].as_str().unwrap();
        assert!(
            detail.starts_with("the body must be a JSON object, not an array")
                && detail.contains("/documents/batch"),
            "{detail}"
        );
        for internal in ["struct", "invalid type", "DocumentIn", "elements"] {
            assert!(!detail.contains(internal), "{detail}");
        }
    }
    let problem = assert_problem(app.post_json("/documents", &json!("a text")).await, 422).await;
    assert_eq!(
        problem["detail"],
        "the body must be a JSON object, not a string"
    );
    assert_eq!(app.stats().await["documents"], 0);
}
