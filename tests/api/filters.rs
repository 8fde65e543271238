//! Metadata filters (`filter`, `exclude_same`) on every query and scan:
//! `/similar` by id and by text, `similar=true` and `if_unique` on writes,
//! `/duplicates` pairs and groups. Each filtered answer is compared with
//! the unfiltered exact answer (asked with a limit above any answer)
//! filtered by the test's own implementation of the documented semantics.

use crate::helpers::{
    assert_problem, encode, spawn_app, spawn_app_with, test_settings, Lcg, TestApp,
};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Words of several languages, so the texts are real Unicode.
const WORDS: &[&str] = &[
    "crème",
    "brûlée",
    "l’école",
    "déjà",
    "naïve",
    "façade",
    "über",
    "Straße",
    "Mädchen",
    "Größe",
    "schön",
    "Frühstück",
    "Съешь",
    "мягких",
    "французских",
    "булок",
    "выпей",
    "чаю",
    "东京",
    "天气",
    "晴れ",
    "“quoted”",
    "£12.50",
    "€9",
    "Zürich",
    "año",
    "señor",
    "niño",
    "café",
    "résumé",
    "coöperate",
    "Ærøskøbing",
    "Łódź",
    "Kraków",
    "Dvořák",
    "smørrebrød",
    "fjord",
    "saga",
    "tundra",
    "piñata",
    "jalapeño",
    "crêpe",
    "château",
    "garçon",
    "soirée",
    "hôtel",
    "forêt",
    "île",
    "Köln",
    "Düsseldorf",
    "Москва",
    "Петербург",
    "река",
    "город",
];

const FAMILIES: usize = 8;
const MEMBERS: usize = 6;
const SITES: [&str; 3] = ["lemonde.fr", "spiegel.de", "bbc.co.uk"];
const AUTHORS: [&str; 4] = ["Zoë", "Jürgen", "Анна", "李雷"];

/// The corpus: families of near-duplicates (100 words, each member but
/// the first with one word changed: any two at Jaccard ≥ 0.85), with metadata of every shape the semantics cover:
/// all four fields, some missing, none at all, `null`, a nested object,
/// numbers written as integers or floats, a repeated key.
fn corpus() -> Vec<(String, String, Option<Value>)> {
    let mut rng = Lcg(0x5eed_f11e);
    let mut out = Vec::new();
    for f in 0..FAMILIES {
        let base: Vec<&str> = (0..100).map(|_| WORDS[rng.next() % WORDS.len()]).collect();
        for m in 0..MEMBERS {
            let mut words = base.clone();
            for _ in 0..usize::from(m > 0) {
                let at = rng.next() % words.len();
                words[at] = WORDS[rng.next() % WORDS.len()];
            }
            let text = format!("famille {f}: {}", words.join(" "));
            let n = f * MEMBERS + m;
            let site = SITES[(f + m) % 3];
            let author = AUTHORS[(n * 7 + m) % 4];
            let views = (n % 4) as u64;
            let metadata = match n % 9 {
                0 => None,
                1 => Some(json!({"site": site, "author": author})),
                2 => Some(json!({"site": null, "author": author, "views": views, "draft": true})),
                3 => Some(json!({"site": {"name": site}, "views": views as f64, "draft": false})),
                4 => Some(json!({"author": author, "views": views as f64 + 0.5})),
                _ => Some(json!({
                    "site": site,
                    "author": author,
                    "views": views,
                    "draft": n.is_multiple_of(2),
                    "tags": ["a", {"deep": [1, 2]}],
                })),
            };
            out.push((format!("f{f}-m{m}"), text, metadata));
        }
    }
    out
}

/// A fresh server holding the corpus; the corpus's metadata by id.
async fn loaded(app: &TestApp) -> HashMap<String, Option<Value>> {
    let mut meta = HashMap::new();
    for (id, text, metadata) in corpus() {
        let mut body = json!({"id": id, "text": text});
        if let Some(m) = &metadata {
            body["metadata"] = m.clone();
        }
        let resp = app.post_json("/documents", &body).await;
        assert_eq!(resp.status(), 201, "inserting {id}");
        meta.insert(id, metadata);
    }
    meta
}

/// The test's own equality of two JSON scalars (numbers numerically,
/// integers exactly; different kinds never equal).
fn scalar_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        _ => false,
    }
}

/// A document's scalar value of `field` (absent, null, object, array: none).
fn field<'a>(meta: &'a Option<Value>, name: &str) -> Option<&'a Value> {
    meta.as_ref()?
        .as_object()?
        .get(name)
        .filter(|v| v.is_string() || v.is_number() || v.is_boolean())
}

/// Whether a document with `meta` satisfies every condition of `filter`.
fn holds(filter: &Value, meta: &Option<Value>) -> bool {
    filter.as_object().unwrap().iter().all(|(name, want)| {
        let Some(have) = field(meta, name) else {
            return false;
        };
        match want {
            Value::Array(any) => any.iter().any(|w| scalar_eq(w, have)),
            w => scalar_eq(w, have),
        }
    })
}

/// Whether `exclude` excludes a candidate with `meta` for a query
/// document with `query`.
fn excluded(exclude: &[&str], query: &Option<Value>, meta: &Option<Value>) -> bool {
    exclude
        .iter()
        .any(|f| match (field(query, f), field(meta, f)) {
            (Some(q), Some(c)) => scalar_eq(q, c),
            _ => false,
        })
}

/// (id, jaccard) of an answer's results, in answer order.
fn results(answer: &Value) -> Vec<(String, f64)> {
    answer["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_owned(),
                r["jaccard"].as_f64().unwrap(),
            )
        })
        .collect()
}

async fn get_ok(app: &TestApp, path: &str) -> Value {
    let resp = app.get(path).await;
    let status = resp.status();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(status, 200, "{path}: {body}");
    body
}

/// The filters the tests try: conditions of every kind, one-of lists,
/// numbers written both ways, booleans, and conditions nothing meets.
fn filters() -> Vec<Value> {
    vec![
        json!({"site": "lemonde.fr"}),
        json!({"site": ["spiegel.de", "bbc.co.uk"]}),
        json!({"author": "Анна"}),
        json!({"author": ["Zoë", "李雷"], "site": "bbc.co.uk"}),
        json!({"views": 1}),
        json!({"views": [2.0, 3]}),
        json!({"views": 0.5}),
        json!({"draft": false}),
        json!({"draft": true, "views": [0, 1, 2, 3]}),
        json!({"views": "1"}),
        json!({"site": "LEMONDE.FR"}),
        json!({"tags": "a"}),
    ]
}

fn query_ids() -> Vec<String> {
    (0..FAMILIES)
        .map(|f| format!("f{f}-m{}", f % MEMBERS))
        .collect()
}

#[tokio::test]
async fn similar_by_id_with_a_filter_is_the_unfiltered_answer_filtered() {
    let app = spawn_app().await;
    let meta = loaded(&app).await;
    let mut nonempty = 0;
    for id in query_ids() {
        let all = results(&get_ok(&app, &format!("/similar?id={id}&limit=1000")).await);
        assert!(all.len() >= 3, "{id}: the family is found: {all:?}");
        for f in filters() {
            let expected: Vec<(String, f64)> = all
                .iter()
                .filter(|(c, _)| holds(&f, &meta[c]))
                .cloned()
                .collect();
            nonempty += usize::from(!expected.is_empty());
            let path = format!(
                "/similar?id={id}&limit=1000&filter={}",
                encode(&f.to_string())
            );
            assert_eq!(results(&get_ok(&app, &path).await), expected, "{id} {f}");
            // The limit applies after the filter: the first admitted matches.
            let path = format!("/similar?id={id}&limit=1&filter={}", encode(&f.to_string()));
            let one = results(&get_ok(&app, &path).await);
            assert_eq!(
                one,
                expected.iter().take(1).cloned().collect::<Vec<_>>(),
                "{id} {f}"
            );
        }
    }
    assert!(
        nonempty > 20,
        "the filters admit something often enough ({nonempty})"
    );
}

#[tokio::test]
async fn exclude_same_by_id_compares_with_the_stored_document() {
    let app = spawn_app().await;
    let meta = loaded(&app).await;
    let mut cut = 0;
    for id in query_ids() {
        let all = results(&get_ok(&app, &format!("/similar?id={id}&limit=1000")).await);
        for exclude in [
            vec!["site"],
            vec!["author"],
            vec!["site", "author"],
            vec!["views"],
        ] {
            let f = json!({"draft": [true, false]});
            for with_filter in [false, true] {
                let expected: Vec<(String, f64)> = all
                    .iter()
                    .filter(|(c, _)| !excluded(&exclude, &meta[&id], &meta[c]))
                    .filter(|(c, _)| !with_filter || holds(&f, &meta[c]))
                    .cloned()
                    .collect();
                cut += all.len() - expected.len();
                let mut path = format!(
                    "/similar?id={id}&limit=1000&exclude_same={}",
                    exclude.join(",")
                );
                if with_filter {
                    path.push_str(&format!("&filter={}", encode(&f.to_string())));
                }
                assert_eq!(results(&get_ok(&app, &path).await), expected, "{path}");
            }
        }
    }
    assert!(cut > 10, "exclusions removed matches ({cut})");
}

#[tokio::test]
async fn similar_by_text_filters_and_excludes_by_the_bodys_metadata() {
    let app = spawn_app().await;
    let meta = loaded(&app).await;
    let texts: BTreeMap<String, String> = corpus().into_iter().map(|(i, t, _)| (i, t)).collect();
    let asks = [
        (json!({"site": "spiegel.de", "author": "Zoë"}), vec!["site"]),
        (
            json!({"author": "Анна", "views": 2}),
            vec!["author", "views"],
        ),
        (json!({"views": 2.0}), vec!["views"]),
        (json!({"site": ["lemonde.fr"]}), vec!["site"]),
    ];
    for id in query_ids() {
        let text = &texts[&id];
        let all = results(
            &app.post_json("/similar", &json!({"text": text, "limit": 1000}))
                .await
                .json::<Value>()
                .await
                .unwrap(),
        );
        for f in filters() {
            let expected: Vec<_> = all
                .iter()
                .filter(|(c, _)| holds(&f, &meta[c]))
                .cloned()
                .collect();
            let body = json!({"text": text, "limit": 1000, "filter": f});
            let resp = app.post_json("/similar", &body).await;
            assert_eq!(resp.status(), 200);
            assert_eq!(results(&resp.json().await.unwrap()), expected, "{id} {f}");
        }
        for (own, exclude) in &asks {
            let own = Some(own.clone());
            let expected: Vec<_> = all
                .iter()
                .filter(|(c, _)| !excluded(exclude, &own, &meta[c]))
                .cloned()
                .collect();
            let body =
                json!({"text": text, "limit": 1000, "exclude_same": exclude, "metadata": own});
            let resp = app.post_json("/similar", &body).await;
            assert_eq!(resp.status(), 200);
            assert_eq!(
                results(&resp.json().await.unwrap()),
                expected,
                "{id} {own:?}"
            );
        }
        // Without metadata, exclude_same excludes nothing.
        let body = json!({"text": text, "limit": 1000, "exclude_same": ["site", "author"]});
        let resp = app.post_json("/similar", &body).await;
        assert_eq!(results(&resp.json().await.unwrap()), all);
    }
    // The query's metadata is not stored anywhere.
    let stats = app.get_json("/stats").await;
    assert_eq!(stats["documents"], json!(FAMILIES * MEMBERS), "{stats}");
}

/// The pairs of a JSON `/duplicates/pairs` answer, as (a, b, jaccard).
async fn pairs(app: &TestApp, query: &str) -> BTreeSet<(String, String, u64)> {
    let body = get_ok(app, &format!("/duplicates/pairs{query}")).await;
    body["pairs"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|p| {
            (
                p["a"].as_str().unwrap().to_owned(),
                p["b"].as_str().unwrap().to_owned(),
                p["jaccard"].as_f64().unwrap().to_bits(),
            )
        })
        .collect()
}

/// The groups (sets of ids) the pairs form, of two or more members.
fn components(pairs: &BTreeSet<(String, String, u64)>) -> BTreeSet<BTreeSet<String>> {
    let mut parent: BTreeMap<String, String> = BTreeMap::new();
    fn find(p: &mut BTreeMap<String, String>, x: &str) -> String {
        let up = p.get(x).cloned().unwrap_or_else(|| x.to_owned());
        if up == x {
            return up;
        }
        let root = find(p, &up);
        p.insert(x.to_owned(), root.clone());
        root
    }
    for (a, b, _) in pairs {
        let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
        parent.entry(a.clone()).or_insert_with(|| a.clone());
        parent.entry(b.clone()).or_insert_with(|| b.clone());
        if ra != rb {
            parent.insert(ra, rb);
        }
    }
    let ids: Vec<String> = parent.keys().cloned().collect();
    let mut groups: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for id in ids {
        let root = find(&mut parent, &id);
        groups.entry(root).or_default().insert(id);
    }
    groups.into_values().collect()
}

async fn groups(app: &TestApp, query: &str) -> BTreeSet<BTreeSet<String>> {
    let body = get_ok(app, &format!("/duplicates?limit=1000{query}")).await;
    body["groups"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|g| {
            g["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i.as_str().unwrap().to_owned())
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn pairs_and_groups_are_the_admitted_pairs_of_the_unfiltered_scan() {
    let app = spawn_app().await;
    let meta = loaded(&app).await;
    let all = pairs(&app, "").await;
    assert!(all.len() > FAMILIES * 5, "the families pair: {}", all.len());
    let mut asks: Vec<(Option<Value>, Vec<&str>)> =
        filters().into_iter().map(|f| (Some(f), vec![])).collect();
    asks.push((None, vec!["site"]));
    asks.push((None, vec!["author", "draft"]));
    asks.push((Some(json!({"draft": [true, false]})), vec!["views"]));
    for (f, exclude) in asks {
        let expected: BTreeSet<_> = all
            .iter()
            .filter(|(a, b, _)| {
                f.as_ref()
                    .is_none_or(|f| holds(f, &meta[a]) && holds(f, &meta[b]))
                    && !excluded(&exclude, &meta[a], &meta[b])
            })
            .cloned()
            .collect();
        let mut query = String::new();
        if let Some(f) = &f {
            query.push_str(&format!("&filter={}", encode(&f.to_string())));
        }
        if !exclude.is_empty() {
            query.push_str(&format!("&exclude_same={}", exclude.join(",")));
        }
        let got = pairs(&app, &query.replacen('&', "?", 1)).await;
        assert_eq!(got, expected, "{f:?} {exclude:?}");
        assert_eq!(
            groups(&app, &query).await,
            components(&expected),
            "{f:?} {exclude:?}"
        );
    }
    // The unfiltered groups are still the unfiltered ones (a separate cache entry).
    assert_eq!(groups(&app, "").await, components(&all));
}

#[tokio::test]
async fn containment_queries_and_scans_filter_too() {
    let mut s = test_settings();
    s.index.passage_index = true;
    let app = spawn_app_with(s).await;
    let meta = loaded(&app).await;
    for id in query_ids() {
        let base = format!("/similar?id={id}&limit=1000&measure=containment&threshold=0.5");
        let all = results(&get_ok(&app, &base).await);
        assert!(!all.is_empty(), "{id}");
        for f in filters() {
            let expected: Vec<_> = all
                .iter()
                .filter(|(c, _)| holds(&f, &meta[c]))
                .cloned()
                .collect();
            let path = format!("{base}&filter={}&exclude_same=site", encode(&f.to_string()));
            let expected: Vec<_> = expected
                .into_iter()
                .filter(|(c, _)| !excluded(&["site"], &meta[&id], &meta[c]))
                .collect();
            assert_eq!(results(&get_ok(&app, &path).await), expected, "{path}");
        }
    }
    let all = pairs(&app, "?measure=containment&threshold=0.5").await;
    let f = json!({"site": ["lemonde.fr", "bbc.co.uk"]});
    let expected: BTreeSet<_> = all
        .iter()
        .filter(|(a, b, _)| holds(&f, &meta[a]) && holds(&f, &meta[b]))
        .cloned()
        .collect();
    let q = format!(
        "?measure=containment&threshold=0.5&filter={}",
        encode(&f.to_string())
    );
    assert_eq!(pairs(&app, &q).await, expected);
    assert!(!expected.is_empty() && expected.len() < all.len());
}

#[tokio::test]
async fn writes_count_only_the_documents_the_filter_admits() {
    let app = spawn_app().await;
    let texts: BTreeMap<String, String> = corpus().into_iter().map(|(i, t, _)| (i, t)).collect();
    loaded(&app).await;
    // f0-m5 has {"site": "bbc.co.uk", …} … the family has members of every site.
    let text = format!("{} “encore”", texts["f0-m1"]);
    let own = json!({"site": "nowhere.example", "author": "Zoë"});
    // Unfiltered: a duplicate, refused.
    let resp = app
        .post_json(
            "/documents?if_unique=true",
            &json!({"id": "new-1", "text": text, "metadata": own}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["inserted"], false, "{body}");
    // Restricted to a site nothing of that family is on: stored.
    let filter = encode(&json!({"site": "nowhere.example"}).to_string());
    let resp = app
        .post_json(
            &format!("/documents?if_unique=true&filter={filter}"),
            &json!({"id": "new-1", "text": text, "metadata": own}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.json::<Value>().await.unwrap()["inserted"], true);
    // Now the stored one is on that site: the next such write is refused,
    // with only admitted documents as its near-duplicates.
    let resp = app
        .post_json(
            &format!("/documents?if_unique=true&filter={filter}"),
            &json!({"id": "new-2", "text": text, "metadata": own}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["inserted"], false);
    assert_eq!(
        results(&json!({"results": body["similar"]}))
            .into_iter()
            .map(|r| r.0)
            .collect::<Vec<_>>(),
        ["new-1"]
    );
    // Excluding the same site: new-1 no longer counts, new-2 is stored.
    let resp = app
        .post_json(
            &format!("/documents?if_unique=true&filter={filter}&exclude_same=site"),
            &json!({"id": "new-2", "text": text, "metadata": own}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    // similar=true lists only what the filter admits, compared with the
    // written document's own metadata.
    let resp = app
        .post_json(
            "/documents?similar=true&limit=1000&exclude_same=author",
            &json!({"id": "new-3", "text": text, "metadata": own}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    let body: Value = resp.json().await.unwrap();
    let similar = body["similar"].as_array().unwrap();
    assert!(!similar.is_empty());
    for m in similar {
        let id = m["id"].as_str().unwrap();
        let doc = get_ok(&app, &format!("/documents/{}", encode(id))).await;
        assert_ne!(doc["metadata"]["author"], "Zoë", "{id} {doc}");
    }
    let metrics = app.metrics().await;
    assert!(
        metrics.contains("neardup_filtered_queries_total{")
            && metrics.contains("kind=\"if_unique\"")
            && metrics.contains("kind=\"similar_on_write\""),
        "the metric counts filtered writes"
    );
}

#[tokio::test]
async fn bad_filters_are_a_4xx_naming_the_field() {
    let app = spawn_app().await;
    app.insert("a", "un texte déjà vu à l’école, “bien sûr”")
        .await;
    let mut deep = String::from("1");
    for _ in 0..100 {
        deep = format!("[{deep}]");
    }
    let mut deeper = String::from("1");
    for _ in 0..200 {
        deeper = format!("{{\"x\":{deeper}}}");
    }
    let many: serde_json::Map<String, Value> =
        (0..33).map(|i| (format!("f{i}"), json!(i))).collect();
    let many = Value::Object(many).to_string();
    let long = format!("{{\"{}\":1}}", "é".repeat(129));
    let query_cases: Vec<(String, &str)> = vec![
        (
            r#"{"site":{"name":"x"}}"#.into(),
            "filter.site: values must be",
        ),
        (r#"{"site":[]}"#.into(), "filter.site: an array"),
        (r#"{"site":[["x"]]}"#.into(), "filter.site: values must be"),
        (r#"{"site":null}"#.into(), "filter.site: values must be"),
        (
            format!("{{\"deep\":{deep}}}"),
            "filter.deep: values must be",
        ),
        (deeper.clone(), "filter is not a valid JSON object"),
        (many.clone(), "the limit is 32"),
        (long.clone(), "field names are 1 to 256 bytes"),
        (r#"["site"]"#.into(), "filter must be a JSON object"),
        (r#""site""#.into(), "filter must be a JSON object"),
        ("{site:1".into(), "filter is not a valid JSON object"),
    ];
    for (filter, says) in &query_cases {
        let f = encode(filter);
        for path in [
            format!("/similar?id=a&filter={f}"),
            format!("/duplicates?filter={f}"),
            format!("/duplicates/pairs?filter={f}"),
        ] {
            let body = assert_problem(app.get(&path).await, 400).await;
            assert_eq!(body["type"], "urn:neardup:problem:invalid-parameter");
            let detail = body["detail"].as_str().unwrap();
            assert!(detail.contains(says), "{path}: {detail}");
        }
        let resp = app
            .post_json(
                &format!("/documents?if_unique=true&filter={f}"),
                &json!({"id": "b", "text": "ein ganz anderer Text über Größe"}),
            )
            .await;
        let body = assert_problem(resp, 400).await;
        assert!(body["detail"].as_str().unwrap().contains(says), "{body}");
    }
    for exclude in ["", "site,,author", &"x".repeat(257)] {
        let path = format!("/similar?id=a&exclude_same={}", encode(exclude));
        let body = assert_problem(app.get(&path).await, 400).await;
        assert!(
            body["detail"]
                .as_str()
                .unwrap()
                .starts_with("exclude_same: field names"),
            "{body}"
        );
    }
    let too_many: Vec<String> = (0..33).map(|i| format!("f{i}")).collect();
    let body = assert_problem(
        app.get(&format!(
            "/similar?id=a&exclude_same={}",
            too_many.join(",")
        ))
        .await,
        400,
    )
    .await;
    assert!(
        body["detail"].as_str().unwrap().contains("the limit is 32"),
        "{body}"
    );
    // Bodies: 422 invalid-body, naming the field.
    let body_cases: Vec<(Value, &str)> = vec![
        (
            json!({"filter": {"site": {"a": 1}}}),
            "filter.site: values must be",
        ),
        (json!({"filter": {"site": []}}), "filter.site: an array"),
        (
            json!({"filter": serde_json::from_str::<Value>(&format!("{{\"deep\":{deep}}}")).unwrap()}),
            "filter.deep:",
        ),
        (
            json!({"filter": serde_json::from_str::<Value>(&many).unwrap()}),
            "the limit is 32",
        ),
        (json!({"filter": ["site"]}), "filter must be a JSON object"),
        (json!({"filter": "site"}), "filter must be a JSON object"),
        (
            json!({"exclude_same": "site"}),
            "exclude_same must be an array",
        ),
        (
            json!({"exclude_same": [1]}),
            "exclude_same must be an array",
        ),
        (json!({"exclude_same": [""]}), "exclude_same: field names"),
        (json!({"metadata": ["x"]}), "metadata must be a JSON object"),
    ];
    for (extra, says) in body_cases {
        let mut body = json!({"text": "un texte déjà vu à l’école"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let problem = assert_problem(app.post_json("/similar", &body).await, 422).await;
        assert_eq!(problem["type"], "urn:neardup:problem:invalid-body");
        assert!(
            problem["detail"].as_str().unwrap().contains(says),
            "{extra}: {problem}"
        );
    }
    // A body nested past serde_json's limit is refused as malformed.
    let raw = format!("{{\"text\":\"texte\",\"filter\":{deeper}}}");
    let resp = app.post_raw("/similar", "application/json", raw).await;
    assert_problem(resp, 400).await;
    // Nothing was written by the refused writes.
    assert_eq!(app.get("/documents/b").await.status(), 404);
}
