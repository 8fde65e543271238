//! `/duplicates`, `/duplicates/pairs`, `POST /documents?if_unique=true` and
//! the offline `neardup dedup` command, against brute force.
//!
//! Expected pairs come from the test's own reference shingler
//! (`helpers::reference_word_shingles`), never from the server.

use crate::helpers::{
    assert_problem, collection_label, metric_value, neardup, reference_overlap,
    reference_word_shingles, route, spawn_app, vocabulary, TestApp,
};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

type Pairs = BTreeMap<(String, String), f64>;

/// The test kit's planted families (chains and stars of word edits).
fn corpus(seed: u64, unrelated: usize, families: usize) -> Vec<(String, String)> {
    neardup::testkit::families(seed, unrelated, families)
}

fn brute_pairs(docs: &[(String, String)], t: f64) -> Pairs {
    let sets: Vec<_> = docs
        .iter()
        .map(|(id, text)| (id, reference_word_shingles(text, 3)))
        .collect();
    let mut out = Pairs::new();
    for (i, (a, sa)) in sets.iter().enumerate() {
        for (b, sb) in &sets[i + 1..] {
            let inter = sa.intersection(sb).count();
            let j = inter as f64 / (sa.len() + sb.len() - inter) as f64;
            if j >= t {
                let key = if a < b {
                    (a.to_string(), b.to_string())
                } else {
                    (b.to_string(), a.to_string())
                };
                out.insert(key, j);
            }
        }
    }
    out
}

fn components(pairs: &Pairs) -> BTreeSet<Vec<String>> {
    let mut adj: HashMap<&str, Vec<&str>> = HashMap::new();
    for (a, b) in pairs.keys() {
        adj.entry(a).or_default().push(b);
        adj.entry(b).or_default().push(a);
    }
    let mut seen = BTreeSet::new();
    let mut out = BTreeSet::new();
    for &start in adj.keys() {
        if seen.contains(start) {
            continue;
        }
        let mut comp = BTreeSet::new();
        let mut stack = vec![start];
        while let Some(x) = stack.pop() {
            if seen.insert(x) {
                comp.insert(x.to_string());
                stack.extend(&adj[x]);
            }
        }
        out.insert(comp.into_iter().collect());
    }
    out
}

async fn load(app: &TestApp, docs: &[(String, String)]) {
    for chunk in docs.chunks(500) {
        let items: Vec<Value> = chunk
            .iter()
            .map(|(id, t)| json!({"id": id, "text": t}))
            .collect();
        let resp = app
            .post_json("/documents/batch", &json!({"documents": items}))
            .await;
        assert_eq!(resp.status(), 200);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["failed"], 0, "{body}");
    }
}

async fn ndjson(app: &TestApp, path: &str) -> Vec<Value> {
    // From the reading node, like every read (each node caches its own
    // answers).
    let resp = app
        .client
        .get(app.read_url(path))
        .header("accept", "application/x-ndjson")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{path}");
    assert_eq!(resp.headers()["content-type"], "application/x-ndjson");
    let text = resp.text().await.unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every group, page by page through `next_cursor`.
async fn all_pages(app: &TestApp, query: &str) -> Vec<Value> {
    let mut groups = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            None => format!("/duplicates?{query}"),
            Some(c) => format!("/duplicates?{query}&cursor={c}"),
        };
        let page = app.get_json(&path).await;
        assert!(page["groups"].as_array().unwrap().len() <= 7);
        groups.extend(page["groups"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => {
                assert_eq!(page["total_groups"], groups.len());
                return groups;
            }
        }
    }
}

fn group_ids(groups: &[Value]) -> BTreeSet<Vec<String>> {
    groups
        .iter()
        .map(|g| {
            g["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect()
        })
        .collect()
}

fn check_groups_against(groups: &[Value], truth: &Pairs) {
    let want = components(truth);
    let got = group_ids(groups);
    for g in &got {
        assert!(
            want.iter().any(|w| g.iter().all(|id| w.contains(id))),
            "{g:?}"
        );
    }
    let exact = want.iter().filter(|c| got.contains(*c)).count();
    assert!(
        exact as f64 >= 0.97 * want.len() as f64,
        "{exact} of {}",
        want.len()
    );
    for g in groups {
        let ids: Vec<&str> = g["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(g["size"], ids.len());
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids sorted");
        for m in g["members"].as_array().unwrap() {
            let (me, best) = (m["id"].as_str().unwrap(), m["best_match"].as_str().unwrap());
            assert!(ids.contains(&best));
            let key = if me < best {
                (me.to_owned(), best.to_owned())
            } else {
                (best.to_owned(), me.to_owned())
            };
            let j = truth[&key];
            assert!((m["jaccard"].as_f64().unwrap() - j).abs() < 1e-12);
        }
    }
    // Groups ordered by first id.
    let firsts: Vec<&str> = groups
        .iter()
        .map(|g| g["ids"][0].as_str().unwrap())
        .collect();
    assert!(firsts.windows(2).all(|w| w[0] < w[1]));
}

#[tokio::test]
async fn groups_pages_and_stream_are_the_components_of_brute_force_pairs() {
    let app = spawn_app().await;
    let docs = corpus(21, 250, 60);
    load(&app, &docs).await;
    settle().await;
    let truth = brute_pairs(&docs, 0.8);
    assert!(truth.len() > 60);

    let paged = all_pages(&app, "limit=7").await;
    check_groups_against(&paged, &truth);
    let streamed = ndjson(&app, "/duplicates").await;
    assert_eq!(paged, streamed, "pages and the stream give the same groups");

    // A cursor also works on the stream, and min_size filters.
    let cursor = {
        let first = app.get_json("/duplicates?limit=3").await;
        first["next_cursor"].as_str().unwrap().to_owned()
    };
    let rest = ndjson(&app, &format!("/duplicates?cursor={cursor}")).await;
    assert_eq!(rest, streamed[3..]);
    let big = app.get_json("/duplicates?min_size=4&limit=1000").await;
    let expect: Vec<&Value> = streamed
        .iter()
        .filter(|g| g["size"].as_u64().unwrap() >= 4)
        .collect();
    assert_eq!(
        big["groups"].as_array().unwrap().iter().collect::<Vec<_>>(),
        expect
    );
    assert_eq!(big["min_size"], 4);

    // A higher threshold: fewer, tighter groups.
    let strict = ndjson(&app, "/duplicates?threshold=0.95").await;
    check_groups_against(&strict, &brute_pairs(&docs, 0.95));

    // After a write the first page reflects it.
    let (id, text) = docs.iter().find(|(id, _)| id == "u0000").unwrap();
    let resp = app
        .post_json(
            "/documents",
            &json!({"id": format!("{id}-copy"), "text": text}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    settle().await;
    let after = app.get_json("/duplicates?limit=1000").await;
    assert!(group_ids(after["groups"].as_array().unwrap())
        .contains(&vec!["u0000".to_owned(), "u0000-copy".to_owned()]));

    // An unchanged index reuses its computation: 4 scans so far (0.8 with
    // min_size 2, reused by the walk, the stream and the cursors; min_size 4;
    // threshold 0.95; 0.8 again after the write), each with its duration.
    let metrics = app.metrics().await;
    let scans = metric_value(
        &metrics,
        "neardup_duplicate_scans_total",
        &[("collection", collection_label()), ("kind", "groups")],
    );
    assert_eq!(scans, Some(4.0), "{metrics}");
    let timed = metric_value(
        &metrics,
        "neardup_duplicate_scan_duration_seconds_count",
        &[("collection", collection_label()), ("kind", "groups")],
    );
    assert_eq!(timed, Some(4.0));
}

#[tokio::test]
async fn pairs_stream_every_verified_pair_once() {
    let app = spawn_app().await;
    let docs = corpus(5, 200, 50);
    load(&app, &docs).await;
    let truth = brute_pairs(&docs, 0.8);
    let lines = ndjson(&app, "/duplicates/pairs").await;
    let mut found = Pairs::new();
    for l in &lines {
        let (a, b) = (l["a"].as_str().unwrap(), l["b"].as_str().unwrap());
        assert!(a < b);
        let j = l["jaccard"].as_f64().unwrap();
        assert!((truth[&(a.to_owned(), b.to_owned())] - j).abs() < 1e-12);
        assert!(found.insert((a.to_owned(), b.to_owned()), j).is_none());
    }
    assert!(found.len() as f64 >= 0.97 * truth.len() as f64);
    // Without an Accept header for NDJSON: the same pairs as one JSON object.
    let resp = app.get("/duplicates/pairs").await;
    assert_eq!(resp.headers()["content-type"], "application/json");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["threshold"], 0.8);
    assert_eq!(body["documents"], docs.len());
    assert!(body["candidates"].as_u64().unwrap() >= found.len() as u64);
    let mut as_json = Pairs::new();
    for p in body["pairs"].as_array().unwrap() {
        let key = (
            p["a"].as_str().unwrap().to_owned(),
            p["b"].as_str().unwrap().to_owned(),
        );
        as_json.insert(key, p["jaccard"].as_f64().unwrap());
    }
    assert_eq!(
        as_json, found,
        "the JSON and NDJSON forms hold the same pairs"
    );
    // An empty answer is still a whole object.
    let resp = app.get("/duplicates/pairs?threshold=1").await;
    let body: Value = resp.json().await.unwrap();
    assert!(body["pairs"].is_array(), "{body}");
}

#[tokio::test]
async fn a_large_answer_streams_in_chunks_and_can_be_read_incrementally() {
    let app = spawn_app().await;
    let vocab = vocabulary(77, 20_000);
    let pairs = 2500;
    let mut docs = Vec::new();
    for i in 0..pairs {
        let mut state = i as u64 + 1;
        let words: Vec<&str> = (0..60)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                vocab[((state >> 33) as usize) % vocab.len()].as_str()
            })
            .collect();
        let text = words.join(" ");
        docs.push((format!("pair-{i:05}-a-{}", "x".repeat(60)), text.clone()));
        docs.push((format!("pair-{i:05}-b-{}", "x".repeat(60)), text));
    }
    load(&app, &docs).await;
    for path in ["/duplicates", "/duplicates/pairs"] {
        let mut resp = app
            .client
            .get(app.url(path))
            .header("accept", "application/x-ndjson")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert!(
            resp.headers().get("content-length").is_none(),
            "streamed, not sized"
        );
        let (mut chunks, mut lines, mut pending) = (0, 0, Vec::new());
        while let Some(chunk) = resp.chunk().await.unwrap() {
            chunks += 1;
            pending.extend_from_slice(&chunk);
            // Parse each complete line as soon as it arrives.
            while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                let line: Value = serde_json::from_slice(&pending[..end]).unwrap();
                assert!(line.is_object());
                lines += 1;
                pending.drain(..=end);
            }
        }
        assert!(pending.is_empty());
        assert_eq!(lines, pairs, "{path}");
        assert!(chunks > 2, "{path} came in {chunks} chunks");
    }
}

#[tokio::test]
async fn duplicates_refuses_bad_parameters_with_problems() {
    let app = spawn_app().await;
    for path in [
        "/duplicates?min_size=1",
        "/duplicates?min_size=-3",
        "/duplicates?threshold=0",
        "/duplicates?threshold=0.2",
        "/duplicates?limit=0",
        "/duplicates?cursor=zz",
        "/duplicates?cursor=",
        "/duplicates?colour=red",
        "/duplicates/pairs?threshold=1.5",
        "/duplicates/pairs?limit=3",
    ] {
        assert_problem(app.get(path).await, 400).await;
    }
    let resp = app
        .client
        .get(app.url("/duplicates?limit=5"))
        .header("accept", "application/x-ndjson")
        .send()
        .await
        .unwrap();
    assert_problem(resp, 400).await;
    // An empty index has no groups.
    let page = app.get_json("/duplicates").await;
    assert_eq!(page["groups"], json!([]));
    assert_eq!(page["next_cursor"], Value::Null);
    assert!(ndjson(&app, "/duplicates").await.is_empty());
}

pub(crate) fn text_of(seed: u64, n: usize) -> Vec<String> {
    let vocab = vocabulary(seed, 3000);
    (0..n)
        .map(|i| vocab[(i * 31 + seed as usize) % vocab.len()].clone())
        .collect()
}

#[tokio::test]
async fn if_unique_stores_the_first_and_returns_it_for_near_duplicates() {
    let app = spawn_app().await;
    let base = text_of(1, 80);
    let resp = app
        .post_json(
            "/documents?if_unique=true",
            &json!({"id": "first", "text": base.join(" ")}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    assert_eq!(
        resp.headers()["location"],
        route("/documents/first").as_str()
    );
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["inserted"], true);
    assert_eq!(body["similar"], json!([]));

    let mut variant = base.clone();
    variant[40] = "changed".into();
    let resp = app
        .post_json(
            "/documents?if_unique=true",
            &json!({"id": "second", "text": variant.join(" ")}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("location").is_none());
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["inserted"], false);
    assert_eq!(body["id"], "second");
    assert_eq!(body["similar"][0]["id"], "first");
    let (inter, union) = reference_overlap(&base.join(" "), &variant.join(" "));
    let j = inter as f64 / union as f64;
    assert!((body["similar"][0]["jaccard"].as_f64().unwrap() - j).abs() < 1e-12);
    assert_eq!(app.get("/documents/second").await.status(), 404);

    // Above the pair's similarity, it is unique.
    let resp = app
        .post_json(
            "/documents?if_unique=true&threshold=0.99",
            &json!({"id": "second", "text": variant.join(" ")}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    // Generated ids work too; an existing id is still 409.
    let other = text_of(2, 70).join(" ");
    let resp = app
        .post_json("/documents?if_unique=true", &json!({"text": other}))
        .await;
    assert_eq!(resp.status(), 201);
    let resp = app
        .post_json(
            "/documents?if_unique=true",
            &json!({"id": "first", "text": "an entirely new text here"}),
        )
        .await;
    assert_problem(resp, 409).await;
    assert_problem(
        app.post_json("/documents?if_unique=maybe", &json!({"text": other}))
            .await,
        400,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_near_identical_submissions_store_exactly_one() {
    // Rounds of clients submitting one-word variants of the round's text at
    // once: in each round exactly one is stored, the rest get its id back.
    // (The HTTP path rarely hits the race window; the engine test
    // `concurrent_near_identical_if_unique_inserts_store_exactly_one` does,
    // and fails without the stripe locks.)
    let app = spawn_app().await;
    let (rounds, clients) = (25, 12);
    for round in 0..rounds {
        let base = text_of(100 + round as u64, 100);
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(clients));
        let tasks: Vec<_> = (0..clients)
            .map(|i| {
                let client = app.client.clone();
                let url = app.url("/documents?if_unique=true");
                let mut words = base.clone();
                words[i * 7 % 100] = format!("edit{i}");
                let body = json!({"id": format!("sub-{round}-{i}"), "text": words.join(" ")});
                let barrier = std::sync::Arc::clone(&barrier);
                tokio::spawn(async move {
                    barrier.wait().await;
                    let resp = client.post(url).json(&body).send().await.unwrap();
                    let status = resp.status().as_u16();
                    let body: Value = resp.json().await.unwrap();
                    (status, body)
                })
            })
            .collect();
        let mut created = Vec::new();
        let mut refused = Vec::new();
        for t in tasks {
            let (status, body) = t.await.unwrap();
            match status {
                201 => created.push(body["id"].as_str().unwrap().to_owned()),
                200 => refused.push(body),
                s => panic!("unexpected {s}: {body}"),
            }
        }
        assert_eq!(created.len(), 1, "round {round}: stored {created:?}");
        for body in refused {
            assert_eq!(body["inserted"], false);
            assert_eq!(body["similar"][0]["id"], created[0].as_str());
        }
    }
    assert_eq!(app.stats().await["documents"], rounds);
}

// --- the offline command

fn parse_lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8(stdout.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn the_cli_on_a_jsonl_file_matches_the_server_and_reports_bad_lines() {
    let docs = corpus(33, 150, 40);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("corpus.jsonl");
    let mut lines: Vec<String> = docs
        .iter()
        .map(|(id, t)| json!({"id": id, "text": t, "source": "test"}).to_string())
        .collect();
    lines.insert(3, "{not json".into());
    lines.insert(10, "".into());
    lines.insert(20, json!({"id": "no-text"}).to_string());
    lines.insert(
        30,
        json!({"id": docs[0].0, "text": "a repeated id"}).to_string(),
    );
    lines.insert(40, json!({"id": "empty", "text": "  "}).to_string());
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();

    let out = neardup().arg("dedup").arg(&file).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for n in [4, 21, 31, 41] {
        assert!(
            stderr.contains(&format!("line {n}:")),
            "line {n} reported: {stderr}"
        );
    }
    assert!(
        !stderr.contains("line 11:"),
        "a blank line is not a problem"
    );
    assert!(
        stderr.contains(&format!("{} documents (4 skipped)", docs.len())),
        "{stderr}"
    );
    let groups = parse_lines(&out.stdout);
    check_groups_against(&groups, &brute_pairs(&docs, 0.8));

    // The same engine and config as the server: the same groups.
    let app = spawn_app().await;
    load(&app, &docs).await;
    assert_eq!(groups, ndjson(&app, "/duplicates").await);

    // --pairs, --min-size, --strict.
    let out = neardup()
        .args(["dedup", "--pairs", "-q"])
        .arg(&file)
        .output()
        .unwrap();
    let pairs: BTreeSet<(String, String)> = parse_lines(&out.stdout)
        .iter()
        .map(|p| {
            (
                p["a"].as_str().unwrap().to_owned(),
                p["b"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let from_groups: usize = groups.len();
    assert!(pairs.len() >= from_groups);
    let server_pairs: BTreeSet<(String, String)> = ndjson(&app, "/duplicates/pairs")
        .await
        .iter()
        .map(|p| {
            (
                p["a"].as_str().unwrap().to_owned(),
                p["b"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(pairs, server_pairs);
    let out = neardup()
        .args(["dedup", "--min-size", "3"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(parse_lines(&out.stdout)
        .iter()
        .all(|g| g["size"].as_u64().unwrap() >= 3));
    let out = neardup()
        .args(["dedup", "--strict", "-q"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let out = neardup()
        .args(["dedup", "--min-size", "1"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "clap refuses min-size 1");
    let out = neardup()
        .args(["dedup", "--threshold", "1.5"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("threshold"));
    // Below the configured index's tuning: the offline index is tuned for
    // the threshold asked for, and finds the pairs brute force finds.
    let out = neardup()
        .args(["dedup", "--pairs", "-q", "--threshold", "0.6"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let truth = brute_pairs(&docs, 0.6);
    assert!(
        truth.values().any(|&j| j < 0.76),
        "the corpus has pairs below the default tuning"
    );
    let found = parse_lines(&out.stdout);
    for p in &found {
        let key = (
            p["a"].as_str().unwrap().to_owned(),
            p["b"].as_str().unwrap().to_owned(),
        );
        assert!((truth[&key] - p["jaccard"].as_f64().unwrap()).abs() < 1e-12);
    }
    assert!(
        found.len() as f64 >= 0.97 * truth.len() as f64,
        "{} of {}",
        found.len(),
        truth.len()
    );
    let out = neardup()
        .args(["dedup", "/no/such/file.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_cli_on_a_directory_uses_relative_paths_as_ids() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("news/2026")).unwrap();
    let story = text_of(4, 90).join(" ");
    let mut edited = text_of(4, 90);
    edited[10] = "rewritten".into();
    std::fs::write(root.join("a.txt"), &story).unwrap();
    std::fs::write(root.join("news/2026/b.txt"), edited.join(" ")).unwrap();
    std::fs::write(root.join("news/c.txt"), text_of(5, 90).join(" ")).unwrap();
    std::fs::write(root.join(".hidden"), &story).unwrap();
    std::fs::write(root.join("binary.bin"), [0xff, 0xfe, 0x00]).unwrap();
    std::fs::write(root.join("empty.txt"), "").unwrap();

    let out = neardup().arg("dedup").arg(root).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("binary.bin: not UTF-8"), "{stderr}");
    assert!(stderr.contains("empty.txt"), "{stderr}");
    assert!(
        stderr.contains("3 documents (2 skipped), 1 groups, 1 duplicates"),
        "{stderr}"
    );
    let groups = parse_lines(&out.stdout);
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0]["ids"], json!(["a.txt", "news/2026/b.txt"]));
    assert_eq!(groups[0]["size"], 2);
}

/// On the redis backend a write moves the shared write counter just after
/// it is answered (a first page computed before that is computed again):
/// let it land, so the scans counted below are the same on both backends.
async fn settle() {
    if crate::REDIS {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// `neardup_duplicate_scans_total{kind="groups"}`, 0 before the first scan.
async fn groups_scans(app: &TestApp) -> f64 {
    let text = app.get("/metrics").await.text().await.unwrap();
    metric_value(
        &text,
        "neardup_duplicate_scans_total",
        &[("collection", collection_label()), ("kind", "groups")],
    )
    .unwrap_or(0.0)
}

#[tokio::test]
async fn a_page_whose_scan_outlasts_the_request_timeout_is_answered_503_then_from_the_cache() {
    let mut settings = crate::helpers::test_settings();
    settings.server.request_timeout_secs = 1;
    let app = crate::helpers::spawn_app_with(settings).await;
    // One family of 700 near-identical documents: 244,650 verified pairs,
    // about 12 MB of NDJSON.
    let vocab = vocabulary(91, 5000);
    let base: Vec<&str> = (0..60)
        .map(|i| vocab[(i * 7919) % vocab.len()].as_str())
        .collect();
    let docs: Vec<(String, String)> = (0..700)
        .map(|i| {
            let mut words = base.clone();
            words.push(vocab[i % vocab.len()].as_str());
            (format!("d{i:04}"), words.join(" "))
        })
        .collect();
    load(&app, &docs).await;
    assert_eq!(groups_scans(&app).await, 0.0);

    // A pairs stream nobody reads holds the one scan permit (its scan
    // blocks on the full channel), so the groups scan started below
    // cannot finish within any request's timeout, however fast the machine.
    let mut pairs = app
        .client
        .get(app.url("/duplicates/pairs"))
        .header("accept", "application/x-ndjson")
        .send()
        .await
        .unwrap();
    assert_eq!(pairs.status(), 200);
    assert!(
        pairs.chunk().await.unwrap().is_some(),
        "the pairs scan started"
    );

    // Three concurrent first-page requests: all 503 with a pointer to when
    // to come back; they share one scan, which is not cancelled.
    let page = || app.get("/duplicates?limit=5");
    let (a, b, c) = tokio::join!(page(), page(), page());
    for resp in [a, b, c] {
        let retry: u64 = resp.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(retry >= 1);
        let problem = assert_problem(resp, 503).await;
        assert_eq!(
            problem["type"], "urn:neardup:problem:scan-in-progress",
            "{problem}"
        );
        assert!(problem["request_id"].is_string(), "{problem}");
    }
    assert_eq!(groups_scans(&app).await, 0.0);
    // The pairs client hangs up: its scan stops and the waiting groups scan runs.
    drop(pairs);
    let mut waited = 0;
    while groups_scans(&app).await == 0.0 {
        assert!(waited < 1500, "the groups scan never finished");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        waited += 1;
    }
    assert_eq!(groups_scans(&app).await, 1.0);
    // The retry is answered from that scan's result, without scanning again.
    let body = app.get_json("/duplicates?limit=5").await;
    assert_eq!(body["total_groups"], 1, "{body}");
    assert_eq!(body["total_members"], 700, "{body}");
    assert!(body["next_cursor"].is_null(), "{body}");
    assert_eq!(groups_scans(&app).await, 1.0, "one groups scan in all");
}
