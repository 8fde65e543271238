//! `GET /review/queue` and `GET /review/precision` (issue 46): the sampler
//! is stratified (every band it says it found pairs in has items on the
//! page), its scores are the exact ones `/explain` gives, it is stable for
//! a seed and skips decided pairs; precision and its Wilson interval equal
//! a hand computation.
//!
//! The corpus: French paragraphs of 60 words, each planted with a copy
//! whose last `m` words are replaced by Russian ones. With word 3-shingles
//! a text of 58 distinct trigrams shares 58 − m of them with its copy (a
//! trigram holding a replaced word is the copy's alone): Jaccard
//! (58 − m) / (58 + m) (1: 0.97, 3: 0.90, 5: 0.84, 8: 0.76, 11: 0.68,
//! 16: 0.57), a pair in each band from 0.5 up.
//! The test reads each pair's exact score from `/explain` rather than
//! trusting that arithmetic.

use crate::helpers::{assert_problem, metric_value, spawn_app_with, test_settings, TestApp};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

const FRENCH: &[&str] = &[
    "le",
    "château",
    "où",
    "l’été",
    "brûlait",
    "déjà",
    "sous",
    "un",
    "ciel",
    "très",
    "pâle",
    "nous",
    "étions",
    "arrivés",
    "après",
    "quatre",
    "heures",
    "de",
    "route",
    "dans",
    "la",
    "forêt",
    "près",
    "du",
    "lac",
    "garçon",
    "naïf",
    "écrivait",
    "à",
    "sa",
    "sœur",
    "une",
    "lettre",
    "pleine",
    "d’épices",
    "et",
    "fenêtres",
    "ouvertes",
    "sur",
    "rivière",
    "hôtel",
    "ancien",
    "façade",
    "grise",
    "élève",
    "appris",
    "poème",
    "entier",
    "cœur",
    "matin",
    "fraîche",
    "ville",
    "voisine",
    "marché",
    "fromages",
    "œufs",
    "pain",
    "doré",
    "prix",
    "£3",
    "café",
    "crème",
    "théâtre",
    "fermé",
    "depuis",
    "hiver",
    "dernier",
    "âme",
    "inquiète",
    "vieux",
    "quai",
    "bateaux",
    "noël",
    "février",
    "août",
    "enfants",
    "jouaient",
    "cour",
    "école",
    "bibliothèque",
    "ouverte",
    "soir",
    "musée",
    "peintures",
    "célèbres",
    "fenêtre",
    "étroite",
    "escalier",
    "grenier",
    "poussière",
    "lumière",
    "dorée",
    "jardin",
    "roses",
    "fanées",
    "mère",
    "père",
    "grand-mère",
    "racontait",
    "histoires",
    "mer",
    "lointaine",
    "île",
    "phare",
    "tempête",
];

const RUSSIAN: &[&str] = &[
    "цены",
    "выросли",
    "кафе",
    "город",
    "зима",
    "весна",
    "дорога",
    "лес",
    "река",
    "дом",
    "окно",
    "утро",
    "вечер",
    "письмо",
    "сестра",
    "брат",
    "школа",
    "музей",
    "театр",
    "рынок",
    "хлеб",
    "сыр",
    "молоко",
    "чай",
    "сад",
    "море",
    "остров",
    "маяк",
    "буря",
    "книга",
    "стол",
    "стул",
    "лампа",
    "свет",
    "тень",
    "снег",
    "дождь",
    "ветер",
    "солнце",
    "луна",
];

/// Words of a planted paragraph.
const WORDS: usize = 60;
/// Russian words replacing the last ones, per pair: one pair per band from 0.5 up.
const CHANGES: [usize; 6] = [1, 3, 5, 8, 11, 16];

/// A French paragraph of `WORDS` words from `rng`.
fn paragraph(rng: &mut StdRng) -> Vec<&'static str> {
    (0..WORDS)
        .map(|_| FRENCH[rng.gen_range(0..FRENCH.len())])
        .collect()
}

/// `words` with the last `m` replaced by Russian words.
fn changed(rng: &mut StdRng, words: &[&'static str], m: usize) -> Vec<&'static str> {
    let mut out = words.to_vec();
    for w in &mut out[WORDS - m..] {
        *w = RUSSIAN[rng.gen_range(0..RUSSIAN.len())];
    }
    out
}

/// Store the planted corpus: per `CHANGES` entry, `copies` originals
/// (`p{m}-{i}`) each with its changed copy (`p{m}-{i}-c`), and `unrelated`
/// paragraphs (`u{i}`). Returns the planted pairs (original, copy).
async fn plant(app: &TestApp, copies: usize, unrelated: usize) -> Vec<(String, String)> {
    let mut rng = StdRng::seed_from_u64(46);
    let mut docs = Vec::new();
    let mut pairs = Vec::new();
    for m in CHANGES {
        for i in 0..copies {
            let words = paragraph(&mut rng);
            let copy = changed(&mut rng, &words, m);
            let (a, b) = (format!("p{m:02}-{i}"), format!("p{m:02}-{i}-c"));
            docs.push(json!({"id": a, "text": words.join(" ")}));
            docs.push(json!({"id": b, "text": copy.join(" ")}));
            pairs.push((a, b));
        }
    }
    for i in 0..unrelated {
        docs.push(json!({"id": format!("u{i:02}"), "text": paragraph(&mut rng).join(" ")}));
    }
    let resp = app
        .post_json("/documents/batch", &json!({"documents": docs}))
        .await;
    let status = resp.status();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    pairs
}

fn settings() -> neardup::config::Settings {
    let mut s = test_settings();
    s.storage.store_text = true;
    s
}

async fn explain_ids(app: &TestApp, a: &str, b: &str) -> Value {
    let resp = app
        .post_json("/explain", &json!({"a": {"id": a}, "b": {"id": b}}))
        .await;
    assert_eq!(resp.status(), 200, "explain {a} {b}");
    resp.json().await.unwrap()
}

/// (a, b) of every item.
fn pairs_of(queue: &Value) -> Vec<(String, String)> {
    queue["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["a"].as_str().unwrap().to_owned(),
                i["b"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_queue_samples_every_band_with_the_exact_scores() {
    let app = spawn_app_with(settings()).await;
    let planted = plant(&app, 2, 20).await;
    let documents = planted.len() * 2 + 20;
    let q = app
        .get_json("/review/queue?from=0.5&width=0.1&limit=200")
        .await;
    assert_eq!(
        (
            &q["measure"],
            &q["score"],
            &q["threshold"],
            &q["from"],
            &q["width"]
        ),
        (
            &json!("jaccard"),
            &json!("raw"),
            &json!(0.8),
            &json!(0.5),
            &json!(0.1)
        )
    );
    // A small collection: every document searched, the walk complete.
    assert_eq!(q["documents_searched"], documents);
    assert_eq!(q["complete"], true);
    let bands = q["bands"].as_array().unwrap();
    let edges: Vec<(f64, f64)> = bands
        .iter()
        .map(|b| (b["lo"].as_f64().unwrap(), b["hi"].as_f64().unwrap()))
        .collect();
    assert_eq!(
        edges,
        [(0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.0)]
    );
    for b in bands {
        assert_eq!(b["labels"], 0, "no decisions yet: {b}");
    }
    let items = q["items"].as_array().unwrap();
    // Every item: a < b, its score /explain's exact Jaccard, in its band,
    // detected exactly when at or above the collection's 0.8.
    let mut per_band: BTreeMap<String, usize> = BTreeMap::new();
    for item in items {
        let (a, b) = (item["a"].as_str().unwrap(), item["b"].as_str().unwrap());
        assert!(a < b, "{item}");
        let exact = explain_ids(&app, a, b).await["jaccard"].as_f64().unwrap();
        let score = item["score"].as_f64().unwrap();
        assert_eq!(
            score, exact,
            "{a} {b}: the queue's score is the exact Jaccard"
        );
        let (lo, hi) = (
            item["band"]["lo"].as_f64().unwrap(),
            item["band"]["hi"].as_f64().unwrap(),
        );
        assert!(lo <= score && (score < hi || hi == 1.0), "{item}");
        let source = if score >= 0.8 { "detected" } else { "sample" };
        assert_eq!(item["source"], source, "{item}");
        *per_band.entry(format!("{lo}")).or_default() += 1;
    }
    // Stratified: every band that says it found pairs has them on the
    // page (all of them: the page has room), and no pair is listed twice.
    for b in bands {
        let found = b["found"].as_u64().unwrap() as usize;
        let lo = format!("{}", b["lo"].as_f64().unwrap());
        assert_eq!(per_band.get(&lo).copied().unwrap_or(0), found, "band {b}");
    }
    let listed: BTreeSet<(String, String)> = pairs_of(&q).into_iter().collect();
    assert_eq!(listed.len(), items.len(), "each pair once");
    // Every planted pair at 0.7 or more is found (the LSH bands find a
    // pair there with probability ≥ 0.93), so the three top bands are
    // covered; the bands below, each as the walk met them.
    for (a, b) in &planted {
        let exact = explain_ids(&app, a, b).await["jaccard"].as_f64().unwrap();
        if exact >= 0.7 {
            assert!(
                listed.contains(&(a.clone(), b.clone())),
                "{a} {b} at {exact}"
            );
        }
    }
    for b in &bands[2..] {
        assert!(b["found"].as_u64().unwrap() > 0, "band {b} covered");
    }
    // Interleaved, fewest labels first, ties to the higher band: without
    // labels the first items walk down the bands that have pairs.
    let covered: Vec<f64> = bands
        .iter()
        .rev()
        .filter(|b| b["found"].as_u64().unwrap() > 0)
        .map(|b| b["lo"].as_f64().unwrap())
        .collect();
    let first: Vec<f64> = items[..covered.len()]
        .iter()
        .map(|i| i["band"]["lo"].as_f64().unwrap())
        .collect();
    assert_eq!(first, covered);
    // Snippets: every listed id, its first 40 words (60 stored: truncated).
    let snippets = q["snippets"].as_object().unwrap();
    for (a, b) in &listed {
        for id in [a, b] {
            let s = &snippets[id.as_str()];
            let text = s["text"].as_str().unwrap();
            assert_eq!(text.split(' ').count(), 40, "{id}: {s}");
            assert_eq!((&s["title"], &s["truncated"]), (&Value::Null, &json!(true)));
            let stored = app.get_json(&format!("/documents/{id}")).await;
            let words: Vec<&str> = stored["text"]
                .as_str()
                .map(|t| t.split(' ').take(40).collect())
                .unwrap_or_default();
            if !words.is_empty() {
                assert_eq!(text, words.join(" "));
            }
        }
    }
    // The walk is counted.
    let metrics = app.metrics().await;
    let label = [("collection", crate::helpers::collection_label())];
    let searched = metric_value(
        &metrics,
        "neardup_review_queue_documents_searched_total",
        &label,
    );
    assert_eq!(searched, Some(documents as f64));
}

#[tokio::test]
async fn the_queue_is_stable_for_a_seed_and_a_small_page_takes_one_per_band() {
    let app = spawn_app_with(settings()).await;
    plant(&app, 2, 10).await;
    let first = app
        .get_json("/review/queue?from=0.5&width=0.1&limit=200&seed=7")
        .await;
    let again = app
        .get_json("/review/queue?from=0.5&width=0.1&limit=200&seed=7")
        .await;
    assert_eq!(first, again, "the same seed, the same queue");
    // Another seed walks the documents in another order; every document
    // is searched either way, so it finds the same pairs.
    let other = app
        .get_json("/review/queue?from=0.5&width=0.1&limit=200&seed=8")
        .await;
    let set = |q: &Value| pairs_of(q).into_iter().collect::<BTreeSet<_>>();
    assert_eq!(set(&first), set(&other));
    // The default seed is a constant too.
    assert_eq!(
        app.get_json("/review/queue?limit=3").await,
        app.get_json("/review/queue?limit=3").await
    );
    // A page of 3 from bands without labels: the three highest bands that
    // have pairs, one each, and the walk stops as soon as they have them.
    let small = app
        .get_json("/review/queue?from=0.5&width=0.1&limit=3&seed=7")
        .await;
    let bands: Vec<f64> = small["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["band"]["lo"].as_f64().unwrap())
        .collect();
    let expected: Vec<f64> = first["bands"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .filter(|b| b["found"].as_u64().unwrap() > 0)
        .take(3)
        .map(|b| b["lo"].as_f64().unwrap())
        .collect();
    assert_eq!(bands, expected);
    assert_eq!(small["complete"], true);
    assert!(
        small["documents_searched"].as_u64() <= first["documents_searched"].as_u64(),
        "{small}"
    );
}

#[tokio::test]
async fn the_queue_by_containment_lists_an_excerpt_in_the_top_band() {
    let mut s = settings();
    s.index.passage_index = true;
    let app = spawn_app_with(s).await;
    let mut rng = StdRng::seed_from_u64(7);
    let article: Vec<&str> = (0..3).flat_map(|_| paragraph(&mut rng)).collect();
    app.insert("article", &article.join(" ")).await;
    app.insert("extrait", &article[40..100].join(" ")).await;
    app.insert("autre", &paragraph(&mut rng).join(" ")).await;
    let q = app
        .get_json("/review/queue?measure=containment&from=0.5&limit=5")
        .await;
    assert_eq!(q["measure"], "containment");
    let items = q["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{q}");
    assert_eq!(
        (&items[0]["a"], &items[0]["b"]),
        (&json!("article"), &json!("extrait"))
    );
    assert_eq!(items[0]["score"], 1.0);
    assert_eq!(items[0]["band"], json!({"lo": 0.95, "hi": 1.0}));
    assert_eq!(items[0]["source"], "detected");
    // The excerpt is 60 of the article's 180 words: a Jaccard near 1/3,
    // below any band of a Jaccard queue from 0.5.
    let j = app.get_json("/review/queue?from=0.5&limit=5").await;
    assert_eq!(j["items"], json!([]));
}

#[tokio::test]
async fn bad_parameters_are_refused_with_problems() {
    let app = spawn_app_with(settings()).await;
    for query in [
        "width=0.6",
        "width=0.001",
        "width=abc",
        "from=1.5",
        "from=-0.1",
        "limit=0",
        "limit=201",
        "measure=query_in_stored",
        "score=weighted",
        "measure=containment&score=content",
        "seed=-1",
        "threshold=0.5",
    ] {
        let body = assert_problem(app.get(&format!("/review/queue?{query}")).await, 400).await;
        assert_eq!(
            body["type"], "urn:neardup:problem:invalid-parameter",
            "{query}: {body}"
        );
    }
    for query in [
        "width=0.6",
        "target=0",
        "target=1.5",
        "min_labels=0",
        "related=maybe",
        "measure=containment&score=content",
        "limit=5",
    ] {
        let body = assert_problem(app.get(&format!("/review/precision?{query}")).await, 400).await;
        assert_eq!(
            body["type"], "urn:neardup:problem:invalid-parameter",
            "{query}: {body}"
        );
    }
    // The queue by containment (or on content) reads the passage index.
    let body = assert_problem(app.get("/review/queue?measure=containment").await, 409).await;
    assert_eq!(body["type"], "urn:neardup:problem:passage-index-off");
    let body = assert_problem(app.get("/review/queue?score=content").await, 409).await;
    assert_eq!(body["type"], "urn:neardup:problem:passage-index-off");
    // Precision reads only the labels: no index needed.
    assert_eq!(
        app.get("/review/precision?measure=containment")
            .await
            .status(),
        200
    );
}

#[tokio::test]
async fn precision_without_labels_lists_every_band_and_suggests_nothing() {
    let app = spawn_app_with(settings()).await;
    let p = app.get_json("/review/precision").await;
    assert_eq!(
        (
            &p["measure"],
            &p["score"],
            &p["labels"],
            &p["target"],
            &p["suggested"]
        ),
        (
            &json!("jaccard"),
            &json!("raw"),
            &json!(0),
            &json!(0.95),
            &Value::Null
        )
    );
    let bands = p["bands"].as_array().unwrap();
    assert_eq!(bands.len(), 20);
    assert_eq!(bands[17]["lo"], 0.85);
    assert_eq!(bands[19]["hi"], 1.0);
    for b in bands {
        assert_eq!(
            (&b["labels"], &b["precision"], &b["low"], &b["high"]),
            (&json!(0), &Value::Null, &Value::Null, &Value::Null)
        );
    }
    let p = app.get_json("/review/precision?width=0.3").await;
    let edges: Vec<(f64, f64)> = p["bands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["lo"].as_f64().unwrap(), b["hi"].as_f64().unwrap()))
        .collect();
    assert_eq!(edges, [(0.0, 0.3), (0.3, 0.6), (0.6, 0.9), (0.9, 1.0)]);
    // The advisor has no measured threshold without labels.
    let h = app
        .post_json(
            "/analysis/histogram",
            &json!({"texts": ["Цены выросли в кафе.", "Цены выросли в кафе!"], "k": [2]}),
        )
        .await;
    assert_eq!(h.status(), 200);
    let h: Value = h.json().await.unwrap();
    assert_eq!(h["measured"], Value::Null, "{h}");
}

// ---- With stored decisions (PUT /review/decisions) ----

/// Decide the pair `a`, `b`.
async fn decide(app: &TestApp, a: &str, b: &str, verdict: &str) {
    let resp = app
        .put_json(
            "/review/decisions",
            &json!({"a": a, "b": b, "verdict": verdict, "note": "relu — “même annonce”"}),
        )
        .await;
    let status = resp.status().as_u16();
    let body = resp.text().await.unwrap();
    assert!(
        status == 201 || status == 200,
        "deciding {a} {b}: {status} {body}"
    );
}

/// The Wilson interval at z = 1.96, written out.
fn wilson(k: f64, n: f64) -> (f64, f64) {
    let z2 = 1.96_f64 * 1.96;
    let p = k / n;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = 1.96 / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

fn close(a: &Value, b: f64) -> bool {
    (a.as_f64().unwrap() - b).abs() < 1e-9
}

#[tokio::test]
async fn decided_pairs_drop_out_of_the_queue_and_count_as_labels() {
    let app = spawn_app_with(settings()).await;
    plant(&app, 2, 10).await;
    let before = app
        .get_json("/review/queue?from=0.5&width=0.1&limit=200")
        .await;
    let first = &before["items"][0];
    let (a, b) = (first["a"].as_str().unwrap(), first["b"].as_str().unwrap());
    let lo = first["band"]["lo"].as_f64().unwrap();
    // Decided in the other order: the same pair.
    decide(&app, b, a, "duplicate").await;
    let after = app
        .get_json("/review/queue?from=0.5&width=0.1&limit=200")
        .await;
    let listed = pairs_of(&after);
    assert!(!listed.contains(&(a.to_owned(), b.to_owned())), "{after}");
    assert_eq!(listed.len() + 1, pairs_of(&before).len());
    let band = after["bands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|band| band["lo"].as_f64() == Some(lo))
        .unwrap();
    assert_eq!(band["labels"], 1);
    // Now that band has a label, the first item comes from another band.
    assert_ne!(after["items"][0]["band"]["lo"].as_f64(), Some(lo));
}

#[tokio::test]
async fn precision_and_its_interval_equal_a_hand_computation() {
    let app = spawn_app_with(settings()).await;
    let planted = plant(&app, 6, 0).await;
    // Band by band (width 0.1), the planted pairs' exact Jaccard from /explain.
    let mut by_band: BTreeMap<usize, Vec<(String, String)>> = BTreeMap::new();
    for (a, b) in planted {
        let j = explain_ids(&app, &a, &b).await["jaccard"].as_f64().unwrap();
        by_band
            .entry((j * 10.0).floor() as usize)
            .or_default()
            .push((a, b));
    }
    // The top band's pairs all duplicates, the one below: all but one, the
    // next: one related and the rest not duplicates.
    let bands: Vec<usize> = by_band.keys().rev().copied().collect();
    assert!(bands.len() >= 3, "{by_band:?}");
    let mut expected: BTreeMap<usize, (usize, usize, usize)> = BTreeMap::new();
    for (rank, band) in bands.iter().take(3).enumerate() {
        let pairs = &by_band[band];
        let (mut dup, mut rel, mut not) = (0, 0, 0);
        for (i, (a, b)) in pairs.iter().enumerate() {
            let verdict = match (rank, i) {
                (0, _) => "duplicate",
                (1, 0) => "not_duplicate",
                (1, _) => "duplicate",
                (_, 0) => "related",
                _ => "not_duplicate",
            };
            match verdict {
                "duplicate" => dup += 1,
                "related" => rel += 1,
                _ => not += 1,
            }
            decide(&app, a, b, verdict).await;
        }
        expected.insert(*band, (dup, rel, not));
    }
    let labels: usize = expected.values().map(|(d, r, n)| d + r + n).sum();
    let p = app
        .get_json("/review/precision?width=0.1&min_labels=5&target=0.7")
        .await;
    assert_eq!(p["labels"], labels);
    for (band, (dup, rel, not)) in &expected {
        let b = &p["bands"][*band];
        let n = (dup + rel + not) as f64;
        assert_eq!(
            (&b["duplicates"], &b["related"], &b["not_duplicates"]),
            (&json!(dup), &json!(rel), &json!(not)),
            "{b}"
        );
        let (lo, hi) = wilson(*dup as f64, n);
        assert!(close(&b["precision"], *dup as f64 / n), "{b}");
        assert!(close(&b["low"], lo) && close(&b["high"], hi), "{b}");
    }
    // related=duplicate counts the related pair as a success.
    let q = app
        .get_json("/review/precision?width=0.1&related=duplicate")
        .await;
    let third = bands[2];
    let (dup, rel, not) = expected[&third];
    let n = (dup + rel + not) as f64;
    assert!(close(
        &q["bands"][third]["precision"],
        (dup + rel) as f64 / n
    ));
    // The suggestion at target 0.7: the lowest edge from which the pooled
    // labels' Wilson lower bound reaches 0.7 and no labelled band above is
    // under 0.7, computed here the same way from the counts (with the
    // corpus's bands, 0.9: 12/12, 0.8: 5/6, 0.7: 0/6, it is 0.8: 17/18
    // pooled, Wilson low 0.7424).
    let mut best = None;
    let (mut k, mut n) = (0usize, 0usize);
    for band in (0..10).rev() {
        if let Some((dup, rel, not)) = expected.get(&band) {
            let m = dup + rel + not;
            if (*dup as f64) / (m as f64) < 0.7 {
                break;
            }
            k += dup;
            n += m;
        }
        if n > 0 && wilson(k as f64, n as f64).0 >= 0.7 {
            best = Some((band as f64 / 10.0, k, n));
        }
    }
    assert!(best.is_some(), "the planted labels support a threshold");
    match best {
        None => assert_eq!(p["suggested"], Value::Null, "{p}"),
        Some((t, k, n)) => {
            let s = &p["suggested"];
            assert!(close(&s["threshold"], t), "{s}");
            assert_eq!(s["labels"], n);
            assert!(close(&s["precision"], k as f64 / n as f64), "{s}");
            assert!(close(&s["low"], wilson(k as f64, n as f64).0), "{s}");
        }
    }
}

#[tokio::test]
async fn the_advisor_answers_the_threshold_the_labels_support() {
    let app = spawn_app_with(settings()).await;
    let planted = plant(&app, 20, 0).await;
    // The four closest copies (Jaccard 0.97, 0.90, 0.84, 0.76) are
    // duplicates, the two farthest (0.68, 0.57) are not: 80 of 80 from
    // 0.75 up, Wilson low 80 / (80 + 1.96²) = 0.9542 ≥ 0.95; the band
    // [0.7, 0.75) has no label, so the lowest edge is 0.7; [0.65, 0.7) is
    // at 0 and stops it there.
    for (a, b) in &planted {
        let m: usize = a[1..3].parse().unwrap();
        let verdict = if m <= 8 { "duplicate" } else { "not_duplicate" };
        decide(&app, a, b, verdict).await;
    }
    let p = app.get_json("/review/precision").await;
    assert_eq!(p["labels"], 120);
    let s = &p["suggested"];
    assert!(close(&s["threshold"], 0.7), "{p}");
    assert_eq!(s["labels"], 80);
    assert!(close(&s["low"], wilson(80.0, 80.0).0), "{s}");
    assert_eq!(
        s["why"],
        format!(
            "at 0.7, precision 1.00 ± {:.2} from 80 labels",
            (1.0 - wilson(80.0, 80.0).0) / 2.0
        )
    );
    let h = app
        .post_json(
            "/analysis/histogram",
            &json!({"texts": ["Цены выросли в кафе.", "Цены выросли в кафе!"], "k": [2]}),
        )
        .await;
    assert_eq!(h.status(), 200);
    let h: Value = h.json().await.unwrap();
    assert_eq!(h["measured"], p["suggested"], "{h}");
}
