//! Containment and passage search through the API (issue 43), on real
//! text: "articles" of consecutive paragraphs of the Apache and Mozilla
//! licences (`tests/fixtures/realtext/en.txt`), their excerpts, abridged
//! copies, quotes and texts that embed them. Expected values come from the
//! reference shingler of `helpers.rs`, apart from the server.

use crate::helpers::{
    approx_eq, assert_problem, reference_word_shingles, spawn_app_with, test_settings, TestApp,
};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

const EN: &str = include_str!("../fixtures/realtext/en.txt");

/// Consecutive paragraphs grouped into articles of at least 180 words.
fn articles() -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Vec<&str> = Vec::new();
    let mut words = 0;
    for p in EN.lines() {
        cur.push(p);
        words += p.split_whitespace().count();
        if words >= 180 {
            out.push(cur.join("\n\n"));
            cur.clear();
            words = 0;
        }
    }
    out
}

fn settings() -> neardup::config::Settings {
    let mut s = test_settings();
    s.index.passage_index = true;
    s.storage.store_text = true;
    s
}

async fn app_with_articles() -> (TestApp, Vec<String>) {
    let app = spawn_app_with(settings()).await;
    let arts = articles();
    for (i, a) in arts.iter().enumerate() {
        let r = app
            .put_json(&format!("/documents/art{i}"), &json!({"text": a}))
            .await;
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    }
    (app, arts)
}

/// The reference's containments of `q` in `d` and of `d` in `q`, and Jaccard.
fn reference(q: &str, d: &str) -> (f64, f64, f64) {
    let (sq, sd) = (reference_word_shingles(q, 3), reference_word_shingles(d, 3));
    let i = sq.intersection(&sd).count() as f64;
    let (nq, nd) = (sq.len() as f64, sd.len() as f64);
    (i / nq, i / nd, i / (nq + nd - i))
}

fn words(text: &str) -> Vec<&str> {
    text.split_whitespace().collect()
}

async fn similar_text(app: &TestApp, body: Value) -> Value {
    let r = app.post_json("/similar", &body).await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    r.json().await.unwrap()
}

fn ids(answer: &Value) -> Vec<String> {
    answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn an_excerpt_is_found_in_its_article_with_exact_scores() {
    let (app, arts) = app_with_articles().await;
    let mut found = 0;
    for (i, a) in arts.iter().enumerate() {
        let w = words(a);
        // The leading 30–60% of the words.
        let n = w.len() * (30 + (i * 7) % 31) / 100;
        let excerpt = w[..n].join(" ");
        let answer = similar_text(
            &app,
            json!({"text": excerpt, "measure": "query_in_stored", "threshold": 0.9}),
        )
        .await;
        assert_eq!(answer["measure"], "query_in_stored");
        // Brute force over every stored article.
        let truth: BTreeMap<String, f64> = arts
            .iter()
            .enumerate()
            .map(|(j, d)| (format!("art{j}"), reference(&excerpt, d).0))
            .filter(|(_, c)| *c >= 0.9)
            .collect();
        let got: BTreeMap<String, f64> = answer["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["id"].as_str().unwrap().to_owned(),
                    m["query_in_stored"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            truth.keys().collect::<Vec<_>>(),
            "excerpt of art{i}"
        );
        for (id, c) in &got {
            assert!(approx_eq(*c, truth[id]), "{id}: {c} vs {}", truth[id]);
        }
        let top = &answer["results"][0];
        let (c, back, j) = reference(&excerpt, a);
        assert_eq!(top["id"], format!("art{i}"));
        assert!(approx_eq(top["query_in_stored"].as_f64().unwrap(), c));
        assert!(approx_eq(top["stored_in_query"].as_f64().unwrap(), back));
        assert!(approx_eq(top["jaccard"].as_f64().unwrap(), j));
        if j < 0.763 {
            // No Jaccard query can find it.
            let by_jaccard = similar_text(&app, json!({"text": excerpt})).await;
            assert!(!ids(&by_jaccard).contains(&format!("art{i}")));
            found += 1;
        }
        assert!(answer["passages"]["fingerprints"].as_u64().unwrap() > 0);
    }
    assert!(
        found >= arts.len() / 2,
        "most excerpts are below Jaccard's reach"
    );
}

#[tokio::test]
async fn an_abridged_edited_copy_and_an_embedding_are_found() {
    let (app, arts) = app_with_articles().await;
    for (i, a) in arts.iter().enumerate() {
        // Keep two paragraphs of three, then edit one word in 60.
        let kept: Vec<&str> = a
            .split("\n\n")
            .enumerate()
            .filter(|(k, _)| k % 3 != 1)
            .map(|(_, p)| p)
            .collect();
        let mut w: Vec<String> = words(&kept.join(" "))
            .iter()
            .map(|s| s.to_string())
            .collect();
        for k in (30..w.len()).step_by(60) {
            w[k] = format!("edited{k}");
        }
        let abridged = w.join(" ");
        let (c, _, _) = reference(&abridged, a);
        let answer = similar_text(
            &app,
            json!({"text": abridged, "measure": "query_in_stored", "threshold": 0.8}),
        )
        .await;
        if c >= 0.8 {
            assert!(
                ids(&answer).contains(&format!("art{i}")),
                "abridged art{i} at {c}"
            );
        }
        // A new text embedding the article between two others.
        let (before, after) = (&arts[(i + 1) % arts.len()], &arts[(i + 2) % arts.len()]);
        let embedding = format!("{before}\n\n{a}\n\n{after}");
        let answer = similar_text(
            &app,
            json!({"text": embedding, "measure": "stored_in_query", "threshold": 0.95}),
        )
        .await;
        let got: BTreeSet<String> = ids(&answer).into_iter().collect();
        for j in [i, (i + 1) % arts.len(), (i + 2) % arts.len()] {
            assert!(
                got.contains(&format!("art{j}")),
                "art{j} inside the embedding"
            );
        }
        assert_eq!(answer["results"][0]["stored_in_query"], 1.0);
    }
}

#[tokio::test]
async fn by_id_and_on_writes_the_measure_is_honoured() {
    let (app, arts) = app_with_articles().await;
    let w = words(&arts[3]);
    let excerpt = w[..w.len() / 2].join(" ");
    let r = app
        .put_json("/documents/excerpt", &json!({"text": excerpt}))
        .await;
    assert_eq!(r.status(), 201);
    let up = app
        .get_json("/similar?id=excerpt&measure=query_in_stored&threshold=0.9")
        .await;
    assert_eq!(ids(&up), vec!["art3"]);
    let down = app
        .get_json("/similar?id=art3&measure=stored_in_query&threshold=0.9")
        .await;
    assert_eq!(ids(&down), vec!["excerpt"]);
    let either = app
        .get_json("/similar?id=art3&measure=containment&threshold=0.9")
        .await;
    assert_eq!(ids(&either), vec!["excerpt"]);
    // if_unique refuses an excerpt of something stored, and stores the rest.
    let quote = w[w.len() / 4..w.len() / 4 + 60].join(" ");
    let r = app
        .post_json(
            "/documents?if_unique=true&measure=query_in_stored&threshold=0.9",
            &json!({"id": "repost", "text": quote}),
        )
        .await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["inserted"], false);
    assert_eq!(body["measure"], "query_in_stored");
    let refused: BTreeSet<&str> = body["similar"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(refused, BTreeSet::from(["art3", "excerpt"]));
    assert_eq!(app.get("/documents/repost").await.status(), 404);
    let fresh =
        "An entirely new post about the weather in Lyon, with nothing copied from anywhere at all.";
    let r = app
        .post_json(
            "/documents?if_unique=true&measure=query_in_stored&threshold=0.9",
            &json!({"id": "fresh", "text": fresh}),
        )
        .await;
    assert_eq!(r.status(), 201);
    // similar=true reports by the measure asked.
    let r = app
        .post_json(
            "/documents?similar=true&measure=stored_in_query&threshold=0.99",
            &json!({"id": "omnibus", "text": format!("{}\n\n{}", arts[0], arts[1])}),
        )
        .await;
    assert_eq!(r.status(), 201);
    let body: Value = r.json().await.unwrap();
    let got: BTreeSet<&str> = body["similar"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(got.contains("art0") && got.contains("art1"), "{body}");
}

#[tokio::test]
async fn a_quote_is_looked_up_and_located() {
    let (app, arts) = app_with_articles().await;
    let w = words(&arts[5]);
    let quote = w[40..70].join(" ");
    let r = app
        .post_json(
            "/passages",
            &json!({"text": format!("As the licence puts it: \"{quote}\" - which matters.")}),
        )
        .await;
    assert_eq!(r.status(), 200);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["guaranteed_run"], 20);
    assert_eq!(answer["min_run"], 20);
    let hit = answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == "art5")
        .unwrap_or_else(|| panic!("the quoted article: {answer}"));
    assert!(hit["longest_run"].as_u64().unwrap() >= 28, "{hit}");
    let spans = hit["spans"].as_array().unwrap();
    let located: String = spans
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        words(&located)
            .windows(10)
            .any(|win| quote.contains(&win.join(" "))),
        "{spans:?}"
    );
    // The offsets are characters of the stored text.
    let chars: Vec<char> = arts[5].chars().collect();
    let s = &spans[0];
    let (a, b) = (
        s["start"].as_u64().unwrap() as usize,
        s["end"].as_u64().unwrap() as usize,
    );
    assert_eq!(
        chars[a..b].iter().collect::<String>(),
        s["text"].as_str().unwrap()
    );
    // A run longer than the quote finds nothing; one word finds nothing either.
    let r = app
        .post_json("/passages", &json!({"text": quote, "min_run": 60}))
        .await;
    let none: Value = r.json().await.unwrap();
    assert!(none["results"]
        .as_array()
        .unwrap()
        .iter()
        .all(|h| h["id"] != "art5"));
    let r = app
        .post_json("/passages", &json!({"text": "licence"}))
        .await;
    assert_eq!(r.status(), 200);
    let one: Value = r.json().await.unwrap();
    assert_eq!(one["results"], json!([]));
    // Bad input: a clear 422 (the body's values, as everywhere).
    assert_problem(
        app.post_json("/passages", &json!({"text": "x y z", "min_run": 0}))
            .await,
        422,
    )
    .await;
    let long = (0..6000).map(|i| format!("w{i} ")).collect::<String>();
    let r = app.post_json("/passages", &json!({"text": long})).await;
    let too_long = assert_problem(r, 422).await;
    assert!(
        too_long["detail"].as_str().unwrap().contains("5000"),
        "{too_long}"
    );
}

#[tokio::test]
async fn pairs_and_groups_by_containment_equal_brute_force() {
    let (app, arts) = app_with_articles().await;
    for (i, a) in arts.iter().enumerate().filter(|(i, _)| i % 3 == 0) {
        let w = words(a);
        let r = app
            .put_json(
                &format!("/documents/ex{i}"),
                &json!({"text": w[..w.len() * 2 / 5].join(" ")}),
            )
            .await;
        assert_eq!(r.status(), 201);
    }
    let answer = app
        .get_json("/duplicates/pairs?measure=containment&threshold=0.9")
        .await;
    assert_eq!(answer["measure"], "containment");
    let got: BTreeSet<(String, String)> = answer["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let (a, b) = (p["a"].as_str().unwrap(), p["b"].as_str().unwrap());
            assert!(
                p["a_in_b"]
                    .as_f64()
                    .unwrap()
                    .max(p["b_in_a"].as_f64().unwrap())
                    >= 0.9
            );
            (a.to_owned(), b.to_owned())
        })
        .collect();
    // Brute force over every stored text.
    let mut texts: Vec<(String, String)> = arts
        .iter()
        .enumerate()
        .map(|(i, a)| (format!("art{i}"), a.clone()))
        .collect();
    for (i, a) in arts.iter().enumerate().filter(|(i, _)| i % 3 == 0) {
        let w = words(a);
        texts.push((format!("ex{i}"), w[..w.len() * 2 / 5].join(" ")));
    }
    let mut want = BTreeSet::new();
    for (ka, ta) in &texts {
        for (kb, tb) in &texts {
            if ka < kb {
                let (x, y, _) = reference(ta, tb);
                if x.max(y) >= 0.9 {
                    want.insert((ka.clone(), kb.clone()));
                }
            }
        }
    }
    assert_eq!(got, want);
    let groups = app
        .get_json("/duplicates?measure=containment&threshold=0.9")
        .await;
    assert_eq!(groups["measure"], "containment");
    assert_eq!(
        groups["total_groups"].as_u64().unwrap() as usize,
        want.len()
    );
}

#[tokio::test]
async fn deletes_and_replaces_leave_the_index() {
    let (app, arts) = app_with_articles().await;
    let w = words(&arts[2]);
    let excerpt = w[10..120].join(" ");
    let ask = json!({"text": excerpt, "measure": "query_in_stored", "threshold": 0.9});
    assert_eq!(ids(&similar_text(&app, ask.clone()).await), ["art2"]);
    let r = app
        .put_json("/documents/art2", &json!({"text": arts[7].clone()}))
        .await;
    assert_eq!(r.status(), 200);
    assert!(ids(&similar_text(&app, ask.clone()).await).is_empty());
    let r = app
        .put_json("/documents/copy", &json!({"text": arts[2].clone()}))
        .await;
    assert_eq!(r.status(), 201);
    assert_eq!(ids(&similar_text(&app, ask.clone()).await), ["copy"]);
    assert_eq!(app.delete("/documents/copy").await.status(), 204);
    assert!(ids(&similar_text(&app, ask).await).is_empty());
}

#[tokio::test]
async fn a_common_passage_is_skipped_and_reported() {
    let mut s = settings();
    s.index.common_fingerprint_docs = 10;
    let app = spawn_app_with(s).await;
    let arts = articles();
    let footer = EN.lines().next().unwrap().to_owned() + " " + EN.lines().nth(1).unwrap();
    for i in 0..30 {
        let body = format!(
            "{} {footer}",
            words(&arts[i % arts.len()])[i..i + 40].join(" ")
        );
        let r = app
            .put_json(&format!("/documents/p{i}"), &json!({"text": body}))
            .await;
        assert_eq!(r.status(), 201);
    }
    // A query of the common passage alone: bounded, and the answer says why.
    let answer = similar_text(
        &app,
        json!({"text": footer.repeat(50), "measure": "query_in_stored", "threshold": 0.9}),
    )
    .await;
    let p = &answer["passages"];
    assert!(p["common"].as_u64().unwrap() >= 1, "{answer}");
    assert!(p["common_documents"][0].as_u64().unwrap() >= 11);
    let r = app.post_json("/passages", &json!({"text": footer})).await;
    let looked: Value = r.json().await.unwrap();
    assert!(looked["passages"]["common"].as_u64().unwrap() >= 1);
    let metrics = app.metrics().await;
    assert!(metrics.contains("neardup_common_fingerprints_skipped_total"));
    assert!(metrics.contains("neardup_passage_lookups_total"));
}

#[tokio::test]
async fn without_the_passage_index_a_containment_query_is_409() {
    let mut s = test_settings();
    s.index.passage_index = false;
    let app = spawn_app_with(s).await;
    app.put_json("/documents/a", &json!({"text": "one two three four five"}))
        .await;
    let body = assert_problem(
        app.post_json(
            "/similar",
            &json!({"text": "one two three", "measure": "query_in_stored"}),
        )
        .await,
        409,
    )
    .await;
    assert_eq!(body["type"], "urn:neardup:problem:passage-index-off");
    assert_problem(app.get("/similar?id=a&measure=containment").await, 409).await;
    assert_problem(
        app.post_json("/passages", &json!({"text": "one two three"}))
            .await,
        409,
    )
    .await;
    assert_problem(app.get("/duplicates/pairs?measure=containment").await, 409).await;
    assert_problem(
        app.post_json(
            "/documents?if_unique=true&measure=stored_in_query",
            &json!({"text": "six seven eight"}),
        )
        .await,
        409,
    )
    .await;
    // An unknown measure is a 400 naming the choices.
    let bad = assert_problem(app.get("/similar?id=a&measure=cosine").await, 400).await;
    assert!(
        bad["detail"].as_str().unwrap().contains("query_in_stored"),
        "{bad}"
    );
    // Jaccard works as before, with both containments in every match.
    app.put_json("/documents/b", &json!({"text": "one two three four five"}))
        .await;
    let same = app.get_json("/similar?id=a").await;
    assert_eq!(same["measure"], "jaccard");
    assert_eq!(same["results"][0]["query_in_stored"], 1.0);
    assert!(same.get("passages").is_none());
}

#[tokio::test]
async fn the_cli_dedups_by_containment_as_the_server_does() {
    let (app, arts) = app_with_articles().await;
    let mut lines: Vec<String> = arts
        .iter()
        .enumerate()
        .map(|(i, a)| json!({"id": format!("art{i}"), "text": a}).to_string())
        .collect();
    for (i, a) in arts.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
        let w = words(a);
        let excerpt = w[w.len() / 3..w.len() * 2 / 3].join(" ");
        let r = app
            .put_json(&format!("/documents/ex{i}"), &json!({"text": excerpt}))
            .await;
        assert_eq!(r.status(), 201);
        lines.push(json!({"id": format!("ex{i}"), "text": excerpt}).to_string());
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("corpus.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    for pairs in [true, false] {
        let mut cmd = crate::helpers::neardup();
        cmd.args([
            "dedup",
            "-q",
            "--measure",
            "containment",
            "--threshold",
            "0.9",
        ]);
        if pairs {
            cmd.arg("--pairs");
        }
        let out = cmd.arg(&file).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(stderr.contains("containment"), "{stderr}");
        let path = if pairs {
            "/duplicates/pairs?measure=containment&threshold=0.9"
        } else {
            "/duplicates?measure=containment&threshold=0.9"
        };
        let served = app
            .client
            .get(app.read_url(path))
            .header("accept", "application/x-ndjson")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let sorted = |s: &str| {
            let mut l: Vec<String> = s.lines().map(str::to_owned).collect();
            l.sort();
            l
        };
        let offline = String::from_utf8(out.stdout).unwrap();
        assert_eq!(sorted(&offline), sorted(&served), "pairs: {pairs}");
        assert_eq!(offline.lines().count(), arts.len().div_ceil(2), "{offline}");
    }
}

/// The worked example of docs/examples.md ("Containment: an excerpt and an
/// embedding of document 1"), held to by the API.
#[tokio::test]
async fn the_worked_containment_example() {
    let app = spawn_app_with(settings()).await;
    let r = app
        .put_json(
            "/documents/d",
            &json!({"text": "The night is dark and the moon is red."}),
        )
        .await;
    assert_eq!(r.status(), 201);
    let q1 = similar_text(
        &app,
        json!({"text": "the night is dark and the moon", "measure": "query_in_stored", "threshold": 1.0}),
    )
    .await;
    let m = &q1["results"][0];
    assert_eq!(m["id"], "d");
    assert_eq!(m["query_in_stored"], 1.0);
    assert!(approx_eq(m["stored_in_query"].as_f64().unwrap(), 5.0 / 7.0));
    assert!(approx_eq(m["jaccard"].as_f64().unwrap(), 5.0 / 7.0));
    let by_jaccard = similar_text(&app, json!({"text": "the night is dark and the moon"})).await;
    assert_eq!(by_jaccard["results"], json!([]));
    let q2 = similar_text(
        &app,
        json!({"text": "I said the night is dark and the moon is red tonight",
               "measure": "stored_in_query", "threshold": 1.0}),
    )
    .await;
    let m = &q2["results"][0];
    assert_eq!(m["stored_in_query"], 1.0);
    assert!(approx_eq(m["query_in_stored"].as_f64().unwrap(), 0.7));
    assert!(approx_eq(m["jaccard"].as_f64().unwrap(), 0.7));
    let r = app
        .post_json(
            "/passages",
            &json!({"text": "the night is dark and the moon", "min_run": 5}),
        )
        .await;
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["results"][0]["id"], "d", "{p}");
    assert_eq!(p["results"][0]["longest_run"], 5);
    assert_eq!(p["results"][0]["shared"], 5);
    assert_eq!(p["results"][0]["share"], 1.0);
    assert_eq!(p["passage_distinct"], 5);
}

/// An expired document is never a containment answer, and the purge takes
/// it out of the index.
#[tokio::test]
async fn an_expired_document_leaves_containment_answers() {
    let clock = std::sync::Arc::new(neardup::engine::ManualClock::default());
    let app = crate::helpers::spawn_app_with_clock(settings(), clock.clone()).await;
    let arts = articles();
    let r = app
        .put_json(
            "/documents/brief",
            &json!({"text": arts[0], "ttl_secs": 60}),
        )
        .await;
    assert_eq!(r.status(), 201);
    let r = app
        .put_json("/documents/kept", &json!({"text": arts[0]}))
        .await;
    assert_eq!(r.status(), 201);
    let w = words(&arts[0]);
    let ask =
        json!({"text": w[..w.len() / 2].join(" "), "measure": "query_in_stored", "threshold": 0.9});
    let both: BTreeSet<String> = ids(&similar_text(&app, ask.clone()).await)
        .into_iter()
        .collect();
    assert_eq!(
        both,
        BTreeSet::from(["brief".to_owned(), "kept".to_owned()])
    );
    clock.advance(std::time::Duration::from_secs(61));
    assert_eq!(ids(&similar_text(&app, ask.clone()).await), ["kept"]);
    let r = app
        .post_json("/passages", &json!({"text": w[10..50].join(" ")}))
        .await;
    let p: Value = r.json().await.unwrap();
    assert_eq!(ids(&p), ["kept"]);
}
