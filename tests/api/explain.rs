//! `POST /explain`: the scores and the shared passages, marked on the texts
//! as they were sent.
//!
//! Expected values are derived by hand from `docs/examples.md` or from the
//! test's own reference shingler (`helpers::reference_overlap`); the
//! segment rules (concatenation, whole characters, short passages) are
//! checked on every answer by `check_segments`.

use crate::helpers::{
    assert_problem, reference_overlap, spawn_app, spawn_app_with, test_settings, vocabulary,
    TestApp,
};
use neardup::text::ShingleKind;
use serde_json::{json, Value};

const DOC1: &str = "The night is dark and the moon is red.";
const DOC2: &str = "I can see moon is red, the night is dark.";

/// The side's segments, as (text, match) pairs, after checking that they
/// concatenate to `text` and that no segment starts inside a character
/// sequence (a combining mark, a joiner, a variation selector).
fn check_segments(text: &str, side: &Value) -> Vec<(String, Option<u64>)> {
    let segments: Vec<(String, Option<u64>)> = side["segments"]
        .as_array()
        .unwrap_or_else(|| panic!("no segments: {side}"))
        .iter()
        .map(|s| (s["text"].as_str().unwrap().to_owned(), s["match"].as_u64()))
        .collect();
    let joined: String = segments.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(joined, text, "segments concatenate to the text");
    for (s, _) in &segments {
        assert!(!s.is_empty(), "no empty segment: {side}");
        let first = s.chars().next().unwrap();
        assert!(
            !matches!(first, '\u{300}'..='\u{36f}' | '\u{200d}' | '\u{fe0f}' | '\u{1f3fb}'..='\u{1f3ff}'),
            "a segment starts inside a character sequence: {s:?}"
        );
    }
    segments
}

async fn explain(app: &TestApp, a: &str, b: &str) -> Value {
    let resp = app
        .post_json("/explain", &json!({"a": {"text": a}, "b": {"text": b}}))
        .await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    check_segments(a, &body["a"]);
    check_segments(b, &body["b"]);
    body
}

fn marked(body: &Value, side: &str, text: &str) -> Vec<(String, u64)> {
    check_segments(text, &body[side])
        .into_iter()
        .filter_map(|(t, m)| m.map(|m| (t, m)))
        .collect()
}

#[tokio::test]
async fn the_worked_example_scores_and_passages() {
    let app = spawn_app().await;
    let body = explain(&app, DOC1, DOC2).await;
    assert_eq!(body["intersection"], 3);
    assert_eq!(body["union"], 12);
    assert_eq!(body["jaccard"], 0.25);
    assert_eq!(body["containment_a_in_b"], 3.0 / 7.0);
    assert_eq!(body["containment_b_in_a"], 3.0 / 8.0);
    assert_eq!(body["a"]["shingles"], 7);
    assert_eq!(body["b"]["shingles"], 8);
    assert_eq!(body["a"]["alignment"], "grapheme");
    // "the night is dark" and "moon is red" shared, two words apart (< k).
    assert_eq!(
        marked(&body, "a", DOC1),
        [("The night is dark and the moon is red".to_owned(), 1)]
    );
    assert_eq!(
        marked(&body, "b", DOC2),
        [("moon is red, the night is dark".to_owned(), 1)]
    );
    assert_eq!(body["passages"], 1);
}

#[tokio::test]
async fn scores_are_those_of_compare_for_the_same_texts() {
    let app = spawn_app().await;
    let words = vocabulary(11, 80);
    let a = words[..70].join(" ");
    let b = format!("{} {}", words[5..60].join(" "), words[70..].join(" "));
    app.insert("a", &a).await;
    app.insert("b", &b).await;
    let compare: Value = app.get("/compare?a=a&b=b").await.json().await.unwrap();
    let body = explain(&app, &a, &b).await;
    for key in ["jaccard", "estimate", "intersection", "union"] {
        assert_eq!(body[key], compare[key], "{key}");
    }
    let (inter, union) = reference_overlap(&a, &b);
    assert_eq!(body["intersection"], inter);
    assert_eq!(body["union"], union);
    // Words 5..60 of `a` are the passage shared with the start of `b`.
    assert_eq!(marked(&body, "a", &a), [(words[5..60].join(" "), 1)],);
    assert_eq!(marked(&body, "b", &b), [(words[5..60].join(" "), 1)]);
}

#[tokio::test]
async fn real_text_in_many_scripts_is_cut_between_whole_characters() {
    let app = spawn_app().await;
    let pairs = [
        (
            "Le ministre a déclaré : « Nous allons réduire l’impôt de 5 % dès l’année prochaine », a-t-il dit à Paris.",
            "Selon l’AFP, le ministre a déclaré : « nous allons réduire l’impôt de 5 % dès l’année prochaine ».",
        ),
        (
            "Die Bundesregierung hat am Mittwoch beschlossen, die Förderung für Wärmepumpen deutlich zu erhöhen.",
            "Berlin – Die Bundesregierung hat am Mittwoch beschlossen, die Förderung für Wärmepumpen zu erhöhen.",
        ),
        (
            "Правительство России объявило о новых мерах поддержки малого бизнеса в регионах страны.",
            "Как сообщает ТАСС, правительство России объявило о новых мерах поддержки малого бизнеса.",
        ),
        (
            "Prices rose 5% to £1,250 — “a record”, said Zoë Brontë’s café in Zürich 👩‍👩‍👧‍👦🇬🇧 today.",
            "Prices rose 5% to £1,250 — “a record”, said Zoë Brontë’s café in Zürich 👍🏽 yesterday.",
        ),
        (
            "Cafe\u{301} na\u{ef}ve fac\u{327}ade: e\u{301}le\u{300}ves et professeurs re\u{301}unis ce soir",
            "Café naïve façade : élèves et professeurs réunis ce matin",
        ),
    ];
    for (a, b) in pairs {
        let body = explain(&app, a, b).await;
        assert!(body["jaccard"].as_f64().unwrap() > 0.3, "{a}: {body}");
        assert!(!marked(&body, "a", a).is_empty(), "{a}: {body}");
        assert!(!marked(&body, "b", b).is_empty(), "{b}: {body}");
    }
    // Combining sequences in one text, precomposed in the other: the same
    // words after NFKC, marked on each text as written.
    let (a, b) = pairs[4];
    let body = explain(&app, a, b).await;
    assert_eq!(
        marked(&body, "a", a)[0].0,
        "Cafe\u{301} na\u{ef}ve fac\u{327}ade: e\u{301}le\u{300}ves et professeurs re\u{301}unis ce"
    );
}

#[tokio::test]
async fn character_shingles_explain_short_titles() {
    let mut settings = test_settings();
    settings.shingle.kind = ShingleKind::Char;
    settings.shingle.k = 5;
    settings.index.threshold = 0.7;
    let app = spawn_app_with(settings).await;
    let (a, b) = (
        "Can I make 50,000 a month by day trading?",
        "Can I make 30,000 a month by day trading?",
    );
    let body = explain(&app, a, b).await;
    assert_eq!(body["jaccard"], 0.75);
    assert_eq!(
        marked(&body, "a", a),
        [("Can I make 50,000 a month by day trading".to_owned(), 1)]
    );
    // Chinese: no spaces, character shingles mark characters.
    let (c, d) = (
        "东京都今天的天气晴朗，气温二十度。",
        "大阪府今天的天气晴朗，气温二十度。",
    );
    let body = explain(&app, c, d).await;
    assert_eq!(
        marked(&body, "a", c),
        [("今天的天气晴朗，气温二十度".to_owned(), 1)]
    );
}

#[tokio::test]
async fn ids_name_stored_documents_whose_text_this_collection_does_not_keep() {
    let app = spawn_app().await;
    app.insert("q1", DOC1).await;
    let resp = app
        .post_json("/explain", &json!({"a": {"id": "q1"}, "b": {"text": DOC2}}))
        .await;
    let problem = assert_problem(resp, 409).await;
    assert_eq!(problem["type"], "urn:neardup:problem:text-not-stored");
    assert!(
        problem["detail"].as_str().unwrap().contains("a.text"),
        "{problem}"
    );
    let resp = app
        .post_json(
            "/explain",
            &json!({"a": {"text": DOC1}, "b": {"id": "nope"}}),
        )
        .await;
    let problem = assert_problem(resp, 404).await;
    assert_eq!(problem["type"], "urn:neardup:problem:document-not-found");
}

#[tokio::test]
async fn ids_of_stored_texts_explain_like_the_texts_themselves() {
    let mut settings = test_settings();
    settings.storage.store_text = true;
    let app = spawn_app_with(settings).await;
    let (a, b) = (
        "Crème brûlée à l’école: “the night is dark and the moon is red” 🙂 déjà vu",
        "I can see «the night is dark and the moon is red», e\u{301}cole 👩‍👩‍👧 naïve",
    );
    for (id, text) in [("a", a), ("b", b)] {
        let resp = app
            .put_json(&format!("/documents/{id}"), &json!({"text": text}))
            .await;
        assert_eq!(resp.status(), 201);
    }
    let by_text = explain(&app, a, b).await;
    for (sa, sb) in [
        (json!({"id": "a"}), json!({"id": "b"})),
        (json!({"id": "a"}), json!({"text": b})),
        (json!({"text": a}), json!({"id": "b"})),
    ] {
        let resp = app.post_json("/explain", &json!({"a": sa, "b": sb})).await;
        assert_eq!(resp.status(), 200);
        let body: Value = resp.json().await.unwrap();
        check_segments(a, &body["a"]);
        check_segments(b, &body["b"]);
        for key in ["jaccard", "estimate", "intersection", "union", "passages"] {
            assert_eq!(body[key], by_text[key], "{key}");
        }
        for side in ["a", "b"] {
            assert_eq!(body[side]["segments"], by_text[side]["segments"], "{side}");
        }
    }
    let resp = app
        .post_json("/explain", &json!({"a": {"id": "a"}, "b": {"id": "b"}}))
        .await;
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["a"]["id"], "a", "{body}");
    assert!(body["intersection"].as_u64().unwrap() > 0, "{body}");
}

#[tokio::test]
async fn bad_sides_are_clear_client_errors() {
    let app = spawn_app().await;
    for (body, status, slug) in [
        (json!({"a": {"text": "a b c"}}), 422, "invalid-body"),
        (
            json!({"a": {"text": "x", "id": "y"}, "b": {"text": "z"}}),
            422,
            "invalid-body",
        ),
        (json!({"a": {}, "b": {"text": "z"}}), 422, "invalid-body"),
        (
            json!({"a": {"text": 7}, "b": {"text": "z"}}),
            422,
            "invalid-body",
        ),
        (
            json!({"a": "text", "b": {"text": "z"}}),
            422,
            "invalid-body",
        ),
        (
            json!({"a": {"text": "words here"}, "b": {"text": "—…!"}}),
            422,
            "empty-text",
        ),
    ] {
        let problem = assert_problem(app.post_json("/explain", &body).await, status).await;
        assert_eq!(
            problem["type"],
            format!("urn:neardup:problem:{slug}"),
            "{body}"
        );
    }
    let problem = assert_problem(
        app.post_json(
            "/explain",
            &json!({"a": {"text": "words here"}, "b": {"text": "?"}}),
        )
        .await,
        422,
    )
    .await;
    assert!(
        problem["detail"].as_str().unwrap().starts_with("b.text"),
        "{problem}"
    );
}

#[tokio::test]
async fn large_texts_are_explained_and_oversized_ones_refused() {
    let app = spawn_app().await;
    let words = vocabulary(3, 5_000);
    // ~150 KB each, over the inline limit: explained on a blocking thread.
    let a: String = (0..20_000)
        .map(|i| words[(i * 7) % 5_000].as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let b = format!("preface words {a} and an ending");
    let body = explain(&app, &a, &b).await;
    assert_eq!(marked(&body, "a", &a), [(a.clone(), 1)]);
    let huge = "word ".repeat(300_000);
    let resp = app
        .post_json(
            "/explain",
            &json!({"a": {"text": huge}, "b": {"text": "x"}}),
        )
        .await;
    assert_problem(resp, 413).await;
}
