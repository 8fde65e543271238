//! Many clients at once: inserts, replaces, deletes, batches and queries
//! interleaved on one server. During the run every answer must be
//! well-formed (no 5xx, no duplicate or self matches, sorted, at or above the
//! threshold, and a client's own documents scored exactly); afterwards the
//! server's answer for a probe must equal a brute-force scan of the final state.

use crate::helpers::{
    approx_eq, assert_scores_eq, doc_path, reference_overlap, reference_word_shingles,
    similar_path, spawn_app, vocabulary, TestApp,
};
use serde_json::{json, Value};
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

const TASKS: usize = 8;
const OPS_PER_TASK: usize = 200;
const OWNED_PER_TASK: usize = 24;
const SHARED_IDS: usize = 6;
const PROBE: &str = "probe";

/// splitmix64: a deterministic op schedule, so any failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Texts relative to a 60-word probe, chosen so that every one is either
/// clearly above the 0.8 threshold (≥ 0.86, where LSH recall is
/// 1 − 2·10⁻⁵) or clearly below it (≤ 0.75): the final comparison with the
/// brute-force answer is then exact, not probabilistic.
struct Corpus {
    words: Vec<String>,
}

impl Corpus {
    fn probe(&self) -> String {
        self.words.join(" ")
    }

    fn variant(&self, rng: &mut Rng, tag: &str) -> String {
        let mut words = self.words.clone();
        match rng.below(6) {
            // An identical copy: ties at 1.0, broken by id.
            0 => {}
            // One word replaced: ≥ 0.90.
            1 | 2 => {
                let p = rng.below(60);
                words[p] = format!("{tag}x{p}");
            }
            // The tail cut by 0..=8 words: ≥ 0.86.
            3 => words.truncate(60 - rng.below(9)),
            // Three spread-out words replaced: 49/67 ≈ 0.73.
            4 => {
                let p = 2 + rng.below(16);
                for q in [p, p + 20, p + 40] {
                    words[q] = format!("{tag}x{q}");
                }
            }
            // Unrelated.
            _ => words = vocabulary(rng.next(), 30),
        }
        words.join(" ")
    }
}

/// What one client saw that the final check needs.
#[derive(Default)]
struct Outcome {
    /// The client's own documents at the end (only it writes them).
    owned: BTreeMap<String, String>,
    /// Every text the client wrote to a shared id.
    shared_texts: Vec<(String, String)>,
}

#[track_caller]
fn check_status(status: u16, allowed: &[u16], what: &str) {
    assert!(status < 500, "server error {status} on {what}");
    assert!(
        allowed.contains(&status),
        "{what}: {status}, expected {allowed:?}"
    );
}

/// Invariants of every similarity answer, whatever else is going on.
#[track_caller]
fn check_answer(body: &Value, include_probe: bool) {
    let results = body["results"].as_array().expect("results");
    let mut seen = BTreeSet::new();
    for m in results {
        let id = m["id"].as_str().unwrap();
        assert!(seen.insert(id), "duplicate {id} in {body}");
        assert!(include_probe || id != PROBE, "the probe matched itself");
        let j = m["jaccard"].as_f64().unwrap();
        assert!((0.8..=1.0).contains(&j), "{m}");
        let e = m["estimate"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&e), "{m}");
    }
    for w in results.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let (ja, jb) = (
            a["jaccard"].as_f64().unwrap(),
            b["jaccard"].as_f64().unwrap(),
        );
        assert!(
            ja > jb || (ja == jb && a["id"].as_str() < b["id"].as_str()),
            "unsorted: {a} then {b}"
        );
    }
}

/// Score of `text` against the probe, from the reference shingler.
fn reference_score(probe: &str, text: &str) -> f64 {
    let (i, u) = reference_overlap(probe, text);
    i as f64 / u as f64
}

async fn client(app: Arc<TestApp>, corpus: Arc<Corpus>, task: usize) -> Outcome {
    let mut rng = Rng(0xC0FFEE + task as u64);
    let probe = corpus.probe();
    let mut out = Outcome::default();
    let owned_id = |k: usize| format!("t{task}-{k:02}");
    for op in 0..OPS_PER_TASK {
        let tag = format!("t{task}o{op}");
        let roll = rng.below(100);
        let k = rng.below(OWNED_PER_TASK);
        let id = owned_id(k);
        match roll {
            // Create an owned document (409 if this client already holds it).
            0..=21 => {
                let text = corpus.variant(&mut rng, &tag);
                let resp = app
                    .post_json("/documents", &json!({"id": id, "text": text}))
                    .await;
                let status = resp.status().as_u16();
                match out.owned.entry(id) {
                    Entry::Occupied(e) => {
                        check_status(status, &[409], &format!("POST existing {}", e.key()))
                    }
                    Entry::Vacant(e) => {
                        check_status(status, &[201], &format!("POST {}", e.key()));
                        e.insert(text);
                    }
                }
            }
            // Create or replace an owned document.
            22..=39 => {
                let text = corpus.variant(&mut rng, &tag);
                let resp = app.put_json(&doc_path(&id), &json!({"text": text})).await;
                let expected = if out.owned.contains_key(&id) {
                    200
                } else {
                    201
                };
                check_status(resp.status().as_u16(), &[expected], &format!("PUT {id}"));
                out.owned.insert(id, text);
            }
            // Delete an owned document.
            40..=49 => {
                let resp = app.delete(&doc_path(&id)).await;
                let expected = if out.owned.remove(&id).is_some() {
                    204
                } else {
                    404
                };
                check_status(resp.status().as_u16(), &[expected], &format!("DELETE {id}"));
            }
            // Query by id.
            50..=63 => {
                let resp = app.get(&similar_path(PROBE, None, Some(1000))).await;
                check_status(resp.status().as_u16(), &[200], "GET /similar");
                let body: Value = resp.json().await.unwrap();
                check_answer(&body, false);
                // The client's own stored near-duplicates are found, with
                // their exact scores (nobody else writes them).
                let found: BTreeMap<String, f64> = body["results"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| {
                        (
                            m["id"].as_str().unwrap().to_owned(),
                            m["jaccard"].as_f64().unwrap(),
                        )
                    })
                    .collect();
                for (id, text) in &out.owned {
                    let j = reference_score(&probe, text);
                    match found.get(id) {
                        Some(got) => assert!(approx_eq(*got, j), "{id}: {got} vs {j}"),
                        None => assert!(j < 0.8, "{id} at {j} missing from {body}"),
                    }
                }
            }
            // Query by text (nothing stored).
            64..=71 => {
                let resp = app
                    .post_json("/similar", &json!({"text": probe, "limit": 1000}))
                    .await;
                check_status(resp.status().as_u16(), &[200], "POST /similar");
                let body: Value = resp.json().await.unwrap();
                check_answer(&body, true);
                assert_eq!(body["results"][0]["id"], PROBE);
            }
            // Contend on shared ids with other clients.
            72..=83 => {
                let shared = format!("shared-{}", rng.below(SHARED_IDS));
                if rng.below(3) == 0 {
                    let resp = app.delete(&doc_path(&shared)).await;
                    check_status(resp.status().as_u16(), &[204, 404], "DELETE shared");
                } else {
                    let text = corpus.variant(&mut rng, &tag);
                    let resp = app
                        .put_json(&doc_path(&shared), &json!({"text": text}))
                        .await;
                    check_status(resp.status().as_u16(), &[200, 201], "PUT shared");
                    out.shared_texts.push((shared, text));
                }
            }
            // Compare and read back an owned document: read-your-writes.
            84..=91 => {
                let resp = app.get(&format!("/compare?a={PROBE}&b={id}")).await;
                let resp_doc = app.get(&doc_path(&id)).await;
                match out.owned.get(&id) {
                    Some(text) => {
                        check_status(resp.status().as_u16(), &[200], "GET /compare");
                        let c: Value = resp.json().await.unwrap();
                        let (i, u) = reference_overlap(&probe, text);
                        assert_eq!(
                            (c["intersection"].as_u64(), c["union"].as_u64()),
                            (Some(i as u64), Some(u as u64)),
                            "{id}"
                        );
                        check_status(resp_doc.status().as_u16(), &[200], "GET doc");
                        let d: Value = resp_doc.json().await.unwrap();
                        assert_eq!(d["shingles"], reference_word_shingles(text, 3).len());
                    }
                    None => {
                        check_status(resp.status().as_u16(), &[404], "GET /compare");
                        check_status(resp_doc.status().as_u16(), &[404], "GET doc");
                    }
                }
            }
            // Upsert a few owned documents in one batch.
            _ => {
                let ids: Vec<String> = (0..3)
                    .map(|_| owned_id(rng.below(OWNED_PER_TASK)))
                    .collect();
                let docs: Vec<(String, String)> = ids
                    .iter()
                    .enumerate()
                    .map(|(n, id)| (id.clone(), corpus.variant(&mut rng, &format!("{tag}b{n}"))))
                    .collect();
                let body = json!({"documents": docs.iter().map(|(id, text)| json!({"id": id, "text": text})).collect::<Vec<_>>()});
                let resp = app.post_json("/documents/batch?mode=upsert", &body).await;
                check_status(resp.status().as_u16(), &[200], "batch");
                let body: Value = resp.json().await.unwrap();
                for (n, (id, text)) in docs.into_iter().enumerate() {
                    let expected = if out.owned.contains_key(&id) {
                        200
                    } else {
                        201
                    };
                    assert_eq!(body["results"][n]["status"], expected, "batch item {id}");
                    out.owned.insert(id, text);
                }
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_leave_a_state_that_queries_answer_exactly() {
    // Default settings: every write is fsynced (group commit) under contention.
    let app = Arc::new(spawn_app().await);
    let corpus = Arc::new(Corpus {
        words: vocabulary(99, 60),
    });
    let probe = corpus.probe();
    app.insert(PROBE, &probe).await;

    let handles: Vec<_> = (0..TASKS)
        .map(|t| tokio::spawn(client(Arc::clone(&app), Arc::clone(&corpus), t)))
        .collect();
    let mut owned: BTreeMap<String, String> = BTreeMap::new();
    let mut shared_texts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for h in handles {
        let out = h.await.expect("client task");
        owned.extend(out.owned);
        for (id, text) in out.shared_texts {
            shared_texts.entry(id).or_default().push(text);
        }
    }

    // The final state, read back. Owned documents must be exactly as their
    // client left them; a shared id holds one of the texts written to it.
    let mut expected: Vec<(String, f64)> = Vec::new();
    for t in 0..TASKS {
        for k in 0..OWNED_PER_TASK {
            let id = format!("t{t}-{k:02}");
            let resp = app.get(&doc_path(&id)).await;
            match owned.get(&id) {
                Some(text) => {
                    assert_eq!(resp.status(), 200, "{id} lost");
                    let c = app.compare(PROBE, &id).await;
                    let (i, u) = reference_overlap(&probe, text);
                    assert_eq!(c["intersection"], i, "{id}");
                    assert_eq!(c["union"], u, "{id}");
                    expected.push((id, i as f64 / u as f64));
                }
                None => assert_eq!(resp.status(), 404, "{id} should be deleted"),
            }
        }
    }
    let mut stored = owned.len() + 1;
    for s in 0..SHARED_IDS {
        let id = format!("shared-{s}");
        if app.get(&doc_path(&id)).await.status() == 404 {
            continue;
        }
        stored += 1;
        let c = app.compare(PROBE, &id).await;
        let (i, u) = (
            c["intersection"].as_u64().unwrap() as usize,
            c["union"].as_u64().unwrap() as usize,
        );
        let written = shared_texts.get(&id).expect("only written ids exist");
        assert!(
            written
                .iter()
                .any(|text| reference_overlap(&probe, text) == (i, u)),
            "{id} holds a text nobody wrote"
        );
        expected.push((id, i as f64 / u as f64));
    }
    assert_eq!(app.stats().await["documents"], stored);
    expected.retain(|(_, j)| *j >= 0.8);
    expected.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    assert!(
        expected.len() > 20,
        "the run should leave many near-duplicates"
    );
    assert!(
        expected.len() < stored - 1,
        "and some documents below the threshold"
    );

    let body = app.similar(PROBE, None, Some(1000)).await;
    check_answer(&body, false);
    let actual: Vec<(String, f64)> = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["id"].as_str().unwrap().to_owned(),
                m["jaccard"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_scores_eq(&actual, &expected);

    // POST /similar with the probe's text: the same, plus the probe itself.
    let body: Value = app
        .post_json("/similar", &json!({"text": probe, "limit": 1000}))
        .await
        .json()
        .await
        .unwrap();
    check_answer(&body, true);
    let mut with_probe = expected.clone();
    with_probe.push((PROBE.to_owned(), 1.0));
    with_probe.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let actual: Vec<(String, f64)> = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["id"].as_str().unwrap().to_owned(),
                m["jaccard"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_scores_eq(&actual, &with_probe);
}

/// Batches sent together (signed on their request threads while others
/// keep the cores busy) answer and store exactly what the same batches
/// sent one at a time (signed on the rayon pool) do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_batches_answer_as_the_same_batches_one_at_a_time() {
    use crate::helpers::WORLD_TEXTS;
    let batches: Vec<Value> = (0..8)
        .map(|b| {
            let docs: Vec<Value> = (0..40)
                .map(|i| {
                    let (name, text) = WORLD_TEXTS[(b * 40 + i) % WORLD_TEXTS.len()];
                    json!({
                        "id": format!("{name}-{b}-{i}"),
                        "text": format!("{text}\n“{b}” {i} — {}", "naïve words ".repeat(i % 7)),
                    })
                })
                .collect();
            json!({ "documents": docs })
        })
        .collect();
    let together = Arc::new(spawn_app().await);
    let tasks: Vec<_> = batches
        .iter()
        .cloned()
        .map(|body| {
            let app = Arc::clone(&together);
            tokio::spawn(async move {
                let resp = app.post_json("/documents/batch", &body).await;
                assert_eq!(resp.status(), 200);
                resp.json::<Value>().await.unwrap()
            })
        })
        .collect();
    let alone = spawn_app().await;
    for (body, task) in batches.iter().zip(tasks) {
        let got = task.await.unwrap();
        let resp = alone.post_json("/documents/batch", body).await;
        assert_eq!(resp.status(), 200);
        let want: Value = resp.json().await.unwrap();
        assert_eq!(got, want);
        assert_eq!(got["created"], 40, "{got}");
    }
    // The two indexes answer queries alike (ids and scores; the creation
    // times differ).
    let scores = |v: Value| -> Vec<(String, f64)> {
        v["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["id"].as_str().unwrap().to_owned(),
                    m["jaccard"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    for body in &batches {
        for doc in body["documents"].as_array().unwrap().iter().step_by(9) {
            let path = similar_path(doc["id"].as_str().unwrap(), None, None);
            assert_scores_eq(
                &scores(together.get_json(&path).await),
                &scores(alone.get_json(&path).await),
            );
        }
    }
}
