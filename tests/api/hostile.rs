//! Pathological documents: texts at and over `limits.max_text_bytes`,
//! degenerate repetition, every kind of Unicode, control characters,
//! invalid escapes and deep nesting. Each must be answered (never 5xx)
//! within a few seconds, and the server must stay healthy afterwards.

use crate::helpers::{assert_problem, spawn_app, spawn_app_with, test_settings, TestApp};
use neardup::text::ShingleKind;
use serde_json::{json, Value};
use std::time::Duration;

const LIMIT: usize = 1024 * 1024;

/// Await a request, failing the test if it never answers: a guard against
/// a hang, not a timing (a debug build on two busy cores takes seconds
/// over a 10 MB text; release figures are in docs/benchmarks.md).
async fn within<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .expect("answered within 60 s")
}

async fn assert_healthy(app: &TestApp) {
    let resp = within(app.get("/healthz")).await;
    assert_eq!(resp.status(), 200, "/healthz after a hostile request");
}

/// A text of exactly `n` bytes made of distinct-ish words.
fn words_of_len(n: usize) -> String {
    let mut s = String::with_capacity(n + 16);
    let mut i = 0u64;
    while s.len() < n {
        s.push_str(&format!("w{i:x} "));
        i += 1;
    }
    s.truncate(n);
    s
}

async fn assert_too_large(resp: reqwest::Response) {
    let body = assert_problem(resp, 413).await;
    assert_eq!(body["type"], "urn:neardup:problem:payload-too-large");
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains(&LIMIT.to_string()), "{detail}");
    assert!(detail.contains("limits.max_text_bytes"), "{detail}");
}

#[tokio::test]
async fn a_text_at_the_limit_is_accepted_and_one_byte_over_is_413_everywhere() {
    let app = spawn_app().await;
    let at = words_of_len(LIMIT);
    assert_eq!(at.len(), LIMIT);
    let over = format!("{at}x");
    assert_eq!(over.len(), LIMIT + 1);

    let resp = within(app.post_json("/documents", &json!({"id": "at", "text": at}))).await;
    assert_eq!(resp.status(), 201);
    let resp = within(app.put_json("/documents/at2", &json!({"text": at}))).await;
    assert_eq!(resp.status(), 201);
    let resp = within(app.post_json("/similar", &json!({"text": at}))).await;
    assert_eq!(resp.status(), 200);

    let resp = within(app.post_json("/documents", &json!({"id": "over", "text": over}))).await;
    assert_too_large(resp).await;
    let resp = within(app.put_json("/documents/over", &json!({"text": over}))).await;
    assert_too_large(resp).await;
    let resp = within(app.post_json("/similar", &json!({"text": over}))).await;
    assert_too_large(resp).await;
    assert_eq!(app.get("/documents/over").await.status(), 404);

    // In a batch only the oversized item fails; the others are stored.
    let batch = json!({"documents": [
        {"id": "b1", "text": "the first small document"},
        {"id": "b2", "text": over},
        {"id": "b3", "text": "the third small document"},
    ]});
    let resp = within(app.post_json("/documents/batch", &batch)).await;
    assert_eq!(resp.status(), 200);
    let out: Value = resp.json().await.unwrap();
    assert_eq!(out["created"], 2, "{out}");
    assert_eq!(out["failed"], 1, "{out}");
    let statuses: Vec<u64> = out["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [201, 413, 201]);
    assert_eq!(out["results"][1]["id"], "b2");
    let detail = out["results"][1]["detail"].as_str().unwrap();
    assert!(detail.contains(&LIMIT.to_string()), "{detail}");
    assert!(detail.contains("limits.max_text_bytes"), "{detail}");
    assert_eq!(app.get("/documents/b3").await.status(), 200);
    assert_healthy(&app).await;
}

#[tokio::test]
async fn the_text_limit_is_configurable() {
    let mut settings = test_settings();
    settings.limits.max_text_bytes = 10;
    let app = spawn_app_with(settings).await;
    let resp = app
        .post_json("/documents", &json!({"text": "a b c d e"}))
        .await;
    assert_eq!(resp.status(), 201);
    let resp = app
        .post_json("/documents", &json!({"text": "a b c d e f"}))
        .await;
    let body = assert_problem(resp, 413).await;
    assert!(
        body["detail"].as_str().unwrap().contains("10 bytes"),
        "{body}"
    );
}

#[tokio::test]
async fn one_enormous_word_is_one_shingle() {
    let app = spawn_app().await;
    let word = "a".repeat(LIMIT);
    let resp = within(app.post_json("/documents", &json!({"id": "big", "text": word}))).await;
    assert_eq!(resp.status(), 201);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["shingles"], 1, "{body}");
    let resp = within(app.post_json("/similar", &json!({"text": word}))).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["results"][0]["id"], "big", "{body}");
    assert_eq!(body["results"][0]["jaccard"], 1.0, "{body}");
    assert_healthy(&app).await;
}

/// Recipe version 2 makes every ideograph a word: ten megabytes of one
/// ideograph are 3.5 million words and one distinct shingle, answered in
/// bounded time, as a query too; one other ideograph in the middle adds
/// exactly 3 shingles (word 3-shingles).
#[tokio::test]
async fn ten_megabytes_of_one_ideograph_are_one_shingle() {
    let mut settings = test_settings();
    settings.server.max_body_bytes = 12 << 20;
    settings.limits.max_text_bytes = 11 << 20;
    let app = spawn_app_with(settings).await;
    let n = (10 << 20) / 3;
    let text = "日".repeat(n);
    let resp = within(app.post_json("/documents", &json!({"id": "ri", "text": text}))).await;
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.json::<Value>().await.unwrap()["shingles"], 1);
    let edited = format!("{}本{}", "日".repeat(n / 2), "日".repeat(n - n / 2 - 1));
    let resp = within(app.post_json("/documents", &json!({"id": "one", "text": edited}))).await;
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.json::<Value>().await.unwrap()["shingles"], 4);
    let body: Value = within(app.post_json("/similar", &json!({"text": text})))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["results"][0]["id"], "ri", "{body}");
    assert_eq!(body["results"][0]["jaccard"], 1.0, "{body}");
    let pair = within(app.compare("ri", "one")).await;
    assert_eq!(pair["jaccard"], 0.25, "{pair}");
    assert_healthy(&app).await;
}

#[tokio::test]
async fn one_word_repeated_100000_times_as_a_set_and_as_a_multiset() {
    let text = "spam ".repeat(100_000);
    let app = spawn_app().await;
    let resp = within(app.post_json("/documents", &json!({"id": "r", "text": text}))).await;
    assert_eq!(resp.status(), 201);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["shingles"], 1, "{body}");
    assert_healthy(&app).await;

    let mut settings = test_settings();
    settings.shingle.multiset = true;
    let app = spawn_app_with(settings).await;
    let resp = within(app.post_json("/documents", &json!({"id": "r", "text": text}))).await;
    assert_eq!(resp.status(), 201);
    let body: Value = resp.json().await.unwrap();
    // 100,000 words give 99,998 word 3-shingles, every one counted (as
    // distinct 32-bit hashes, so a birthday collision or two may merge).
    let n = body["shingles"].as_u64().unwrap();
    assert!((99_990..=99_998).contains(&n), "{body}");
    let resp = within(app.post_json("/similar", &json!({"text": text}))).await;
    assert_eq!(resp.status(), 200);
    assert_healthy(&app).await;
}

/// One sample per Unicode general category (Cs cannot be in a Rust string).
const CATEGORY_SAMPLES: &[(&str, &str)] = &[
    ("Lu", "A"),
    ("Ll", "a"),
    ("Lt", "\u{01C5}"),
    ("Lm", "\u{02B0}"),
    ("Lo", "\u{3042}"),
    ("Mn", "\u{0301}"),
    ("Mc", "\u{0903}"),
    ("Me", "\u{20DD}"),
    ("Nd", "\u{0663}"),
    ("Nl", "\u{216B}"),
    ("No", "\u{00BD}"),
    ("Pc", "\u{203F}"),
    ("Pd", "\u{2014}"),
    ("Ps", "("),
    ("Pe", ")"),
    ("Pi", "\u{00AB}"),
    ("Pf", "\u{00BB}"),
    ("Po", "!"),
    ("Sm", "\u{2211}"),
    ("Sc", "\u{20AC}"),
    ("Sk", "^"),
    ("So", "\u{00A9}"),
    ("Zs", "\u{3000}"),
    ("Zl", "\u{2028}"),
    ("Zp", "\u{2029}"),
    ("Cc", "\u{0007}"),
    ("Cf", "\u{200D}"),
    ("Co", "\u{E000}"),
    ("Cn", "\u{0378}"),
];

/// POST the text as a document: 201 if something is left to index, 422
/// `empty-text` if not; never anything else.
async fn store_or_empty(app: &TestApp, text: &str) -> u16 {
    let resp = within(app.post_json("/documents", &json!({"text": text}))).await;
    let status = resp.status().as_u16();
    if status == 422 {
        let body = assert_problem(resp, 422).await;
        assert_eq!(body["type"], "urn:neardup:problem:empty-text", "{text:?}");
    } else {
        assert_eq!(status, 201, "{text:?}");
    }
    status
}

#[tokio::test]
async fn every_unicode_general_category_is_answered() {
    let app = spawn_app().await;
    for (cat, sample) in CATEGORY_SAMPLES {
        // Alone, three times, and between words.
        store_or_empty(&app, sample).await;
        store_or_empty(&app, &format!("{sample} {sample} {sample}")).await;
        let mixed = format!("alpha{sample}beta gamma {sample} delta epsilon");
        assert_eq!(store_or_empty(&app, &mixed).await, 201, "category {cat}");
        let resp = within(app.post_json("/similar", &json!({"text": mixed}))).await;
        assert_eq!(resp.status(), 200, "category {cat}");
    }
    let all: String = CATEGORY_SAMPLES
        .iter()
        .map(|(_, s)| *s)
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(store_or_empty(&app, &all).await, 201);
    assert_healthy(&app).await;
}

#[tokio::test]
async fn joiners_combining_marks_rtl_and_emoji_sequences_are_indexed() {
    let app = spawn_app().await;
    let stacked = format!(
        "a{} b{} c",
        "\u{0301}".repeat(1000),
        "\u{0308}".repeat(1000)
    );
    let texts = [
        "zero\u{200D}width joiner\u{200C}non joiner \u{200D}\u{200C} words here",
        &stacked,
        "שלום עולם זה טקסט בעברית עם כמה מילים",
        "مرحبا بالعالم هذا نص عربي مع بعض الكلمات",
        "mixed שלום and مرحبا with \u{202E}override\u{202C} marks",
        "family \u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}\u{200D}\u{1F466} flag \u{1F3F3}\u{FE0F}\u{200D}\u{1F308} coder \u{1F469}\u{1F3FD}\u{200D}\u{1F4BB}",
    ];
    for text in texts {
        assert_eq!(store_or_empty(&app, text).await, 201, "{text:?}");
        let resp = within(app.post_json("/similar", &json!({"text": text}))).await;
        assert_eq!(resp.status(), 200, "{text:?}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["results"][0]["jaccard"], 1.0, "{text:?}: {body}");
    }
    // Emoji and marks alone leave nothing to index.
    store_or_empty(&app, "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}").await;
    store_or_empty(&app, &"\u{0301}".repeat(1000)).await;
    assert_healthy(&app).await;
}

#[tokio::test]
async fn nul_and_control_characters_inside_json_strings_are_accepted() {
    let app = spawn_app().await;
    let text =
        "nul\u{0000}here bell\u{0007} escape\u{001B}[31m tab\there del\u{007F} c1\u{0085}next";
    let resp = within(app.post_json(
        "/documents",
        &json!({"id": "ctl", "text": text, "metadata": {"k": "\u{0000}\u{0001}"}}),
    ))
    .await;
    assert_eq!(resp.status(), 201);
    let doc = app.get_json("/documents/ctl").await;
    assert_eq!(doc["metadata"]["k"], "\u{0000}\u{0001}", "{doc}");
    // Raw (unescaped) control characters inside a JSON string are not JSON.
    let resp = within(app.post_raw(
        "/documents",
        "application/json",
        b"{\"text\":\"a\x00b c\"}".to_vec(),
    ))
    .await;
    let body = assert_problem(resp, 400).await;
    assert_eq!(body["type"], "urn:neardup:problem:malformed-json");
    // A NUL in an id is a control character: invalid-id.
    let resp =
        within(app.post_json("/documents", &json!({"id": "a\u{0000}b", "text": "x y z"}))).await;
    assert_problem(resp, 400).await;
    assert_healthy(&app).await;
}

#[tokio::test]
async fn lone_surrogate_escapes_are_malformed_json() {
    let app = spawn_app().await;
    let bodies: [&[u8]; 5] = [
        br#"{"text":"\ud800 abc def"}"#,
        br#"{"text":"abc \udc00 def"}"#,
        br#"{"text":"\ud800\u0041 abc"}"#,
        br#"{"id":"\ud800","text":"abc def ghi"}"#,
        br#"{"text":"abc def","metadata":{"k":"\udfff"}}"#,
    ];
    for body in bodies {
        let resp = within(app.post_raw("/documents", "application/json", body.to_vec())).await;
        let shown = String::from_utf8_lossy(body).into_owned();
        let problem = assert_problem(resp, 400).await;
        assert_eq!(
            problem["type"], "urn:neardup:problem:malformed-json",
            "{shown}: {problem}"
        );
    }
    let resp = within(app.post_raw(
        "/similar",
        "application/json",
        br#"{"text":"\ud800 abc"}"#.to_vec(),
    ))
    .await;
    assert_problem(resp, 400).await;
    // A valid surrogate pair is fine.
    let resp = within(app.post_raw(
        "/documents",
        "application/json",
        br#"{"text":"pair \ud83d\ude00 ok words"}"#.to_vec(),
    ))
    .await;
    assert_eq!(resp.status(), 201);
    assert_healthy(&app).await;
}

#[tokio::test]
async fn deeply_nested_metadata_is_refused_without_a_crash() {
    let app = spawn_app().await;
    let nested = |depth: usize| {
        format!(
            r#"{{"text":"deep nested words","metadata":{}1{}}}"#,
            r#"{"a":"#.repeat(depth),
            "}".repeat(depth)
        )
    };
    // serde_json keeps metadata as raw text without a depth limit; the
    // server refuses more than 100 levels (within serde_json's own 128).
    for depth in [10_000usize, 101] {
        let resp = within(app.post_raw("/documents", "application/json", nested(depth))).await;
        let problem = assert_problem(resp, 422).await;
        assert_eq!(
            problem["type"], "urn:neardup:problem:invalid-body",
            "{depth}"
        );
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains(&depth.to_string()), "{detail}");
    }
    // Arrays 100,000 deep: not an object.
    let body = format!(
        r#"{{"text":"deep nested words","metadata":{{"a":{}1{}}}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let resp = within(app.post_raw("/documents", "application/json", body)).await;
    assert_problem(resp, 422).await;
    // Outside metadata, serde_json's recursion limit answers 400 or 422.
    let body = format!(
        r#"{{"text":{}"x"{}}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let resp = within(app.post_raw("/documents", "application/json", body)).await;
    let status = resp.status().as_u16();
    assert!(status == 400 || status == 422, "{status}");
    // In a batch the item alone fails.
    let batch = format!(
        r#"{{"documents":[{},{{"id":"ok","text":"fine words here"}}]}}"#,
        nested(10_000)
    );
    let resp = within(app.post_raw("/documents/batch", "application/json", batch)).await;
    assert_eq!(resp.status(), 200);
    let out: Value = resp.json().await.unwrap();
    assert_eq!(out["results"][0]["status"], 422, "{}", out["results"][0]);
    assert_eq!(out["results"][1]["status"], 201);
    // At the limit it is stored and read back.
    let body = format!(
        r#"{{"id":"deep","text":"deep nested words","metadata":{}1{}}}"#,
        r#"{"a":"#.repeat(100),
        "}".repeat(100)
    );
    let resp = within(app.post_raw("/documents", "application/json", body)).await;
    assert_eq!(resp.status(), 201);
    let resp = app.get("/documents/deep").await;
    assert_eq!(resp.status(), 200);
    assert_healthy(&app).await;
}

#[tokio::test]
async fn char_shingles_of_five_on_a_one_mebibyte_text() {
    let mut settings = test_settings();
    settings.shingle.kind = ShingleKind::Char;
    settings.shingle.k = 5;
    let app = spawn_app_with(settings).await;
    let text = words_of_len(LIMIT);
    let resp = within(app.post_json("/documents", &json!({"id": "c", "text": text}))).await;
    assert_eq!(resp.status(), 201);
    let body: Value = resp.json().await.unwrap();
    assert!(body["shingles"].as_u64().unwrap() > 1000, "{body}");
    let resp = within(app.post_json("/similar", &json!({"text": text}))).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["results"][0]["id"], "c", "{body}");
    let resp = within(app.post_json("/documents", &json!({"text": "a".repeat(LIMIT)}))).await;
    assert_eq!(resp.status(), 201);
    assert_healthy(&app).await;
}

/// Ten megabytes of distinct words as a containment query and a stored
/// document (every 3-shingle distinct: ~170,000 fingerprints): answered in
/// bounded time (the passage index reads at most a fixed number of
/// entries), with the embedded article found; a passage lookup of it is
/// refused with the limit named.
#[tokio::test]
async fn a_ten_megabyte_containment_query_is_bounded() {
    let mut settings = test_settings();
    settings.server.max_body_bytes = 12 << 20;
    settings.limits.max_text_bytes = 11 << 20;
    settings.index.passage_index = true;
    let app = spawn_app_with(settings).await;
    let article = (0..300)
        .map(|i| format!("article{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    let resp = within(app.post_json("/documents", &json!({"id": "a", "text": article}))).await;
    assert_eq!(resp.status(), 201);
    let mut huge = String::with_capacity(10 << 20);
    let mut i = 0u64;
    while huge.len() < (10 << 20) - 4000 {
        huge.push_str(&format!("w{i} "));
        i += 1;
    }
    huge.push_str(&article);
    for measure in ["stored_in_query", "containment"] {
        let body: Value = within(app.post_json(
            "/similar",
            &json!({"text": huge, "measure": measure, "threshold": 0.9}),
        ))
        .await
        .json()
        .await
        .unwrap();
        assert_eq!(body["results"][0]["id"], "a", "{measure}: {body}");
        assert_eq!(body["results"][0]["stored_in_query"], 1.0);
    }
    let resp = within(app.post_json("/documents", &json!({"id": "huge", "text": huge}))).await;
    assert_eq!(resp.status(), 201);
    let body: Value = within(app.get("/similar?id=a&measure=query_in_stored&threshold=0.9"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["results"][0]["id"], "huge", "{body}");
    let resp = within(app.post_json("/passages", &json!({"text": huge}))).await;
    assert_eq!(resp.status(), 422);
    assert_healthy(&app).await;
}
