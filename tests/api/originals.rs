//! Originals and keep policies: groups and `/similar` answers name the
//! original (the earliest by the `published_at` metadata field when valid,
//! else by `created_at`; ties to the smaller id), and the drop list keeps
//! exactly the member each policy names, online and offline alike. Every
//! expectation is a brute force over the documents as written.

use crate::helpers::{encode, spawn_app_with, test_settings, Lcg, TestApp};
use neardup::config::Settings;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use time::format_description::well_known::Rfc3339;

const FIELD: &str = "published_at";

/// Words of several languages; a family's text is 80 of them.
const WORDS: &[&str] = &[
    "été",
    "forêt",
    "château",
    "garçon",
    "naïve",
    "cœur",
    "über",
    "Straße",
    "Mädchen",
    "größer",
    "schön",
    "Brücke",
    "город",
    "река",
    "дорога",
    "солнце",
    "книга",
    "зима",
    "北京",
    "上海",
    "河流",
    "山峰",
    "春天",
    "秋月",
    "£12",
    "“quoted”",
    "l’hiver",
    "ça",
    "déjà",
    "señor",
    "niño",
    "mañana",
    "ærø",
    "smørbrød",
    "fjord",
    "København",
    "Zürich",
    "Ελλάδα",
    "θάλασσα",
    "ουρανός",
    "market",
    "window",
    "candle",
    "harbour",
    "lantern",
    "meadow",
    "orchard",
    "pebble",
    "quarry",
    "ribbon",
    "saddle",
    "thistle",
    "umbrella",
    "valley",
    "walnut",
    "yarrow",
    "zephyr",
    "anchor",
    "bramble",
    "cobalt",
];

/// One document as written, with what the brute force needs.
#[derive(Clone, Debug)]
struct Doc {
    id: String,
    family: usize,
    text: String,
    metadata: Option<Value>,
    /// The valid `published_at` instant (ms), if it holds one.
    published_ms: Option<i64>,
}

fn rfc3339(ms: i64, offset_secs: i32) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap()
        .to_offset(time::UtcOffset::from_whole_seconds(offset_secs).unwrap());
    t.format(&Rfc3339).unwrap()
}

/// Families of near-duplicates (sizes 2 to 5) whose members carry
/// `published_at` in varied offsets, or none, or an invalid one, and a
/// `votes` number (or none, or a string).
fn corpus() -> Vec<Doc> {
    let member_ids = ["b", "a", "é", "Z", "c"];
    let mut docs = Vec::new();
    let mut g = 0usize;
    for family in 0..7usize {
        let mut rng = Lcg(family as u64 * 7919 + 17);
        let base: Vec<&str> = (0..80).map(|_| WORDS[rng.next() % WORDS.len()]).collect();
        let size = 2 + family % 4;
        for m in 0..size {
            let mut words: Vec<String> = base.iter().map(|w| (*w).to_owned()).collect();
            if m > 0 {
                words[5 + m * 9] = format!("variante{m}ß");
                for e in 0..(m * 7) % 4 {
                    words.push(format!("ajouté{e}"));
                }
            }
            let instant = 1_600_000_000_000
                + ((family * 7 + m * 13) % 17) as i64 * 86_400_000
                + m as i64 * 1000;
            let (published, published_ms) = match (family, m, g % 6) {
                // A family with no time in its metadata: created_at decides.
                (4, _, _) => (None, None),
                (1, 1, _) => (Some(json!("le 3 mars, au matin")), None),
                // The same instant in two offsets: the smaller id wins.
                (2, 0 | 1, _) => {
                    let t = 1_590_000_000_000;
                    let offset = if m == 0 { 0 } else { 7200 };
                    (Some(json!(rfc3339(t, offset))), Some(t))
                }
                (_, _, 0 | 4) => (Some(json!(rfc3339(instant, 0))), Some(instant)),
                (_, _, 1 | 5) => (Some(json!(rfc3339(instant, 7200))), Some(instant)),
                (_, _, 2) => (Some(json!(rfc3339(instant, -19800))), Some(instant)),
                _ => (None, None),
            };
            let mut meta = serde_json::Map::new();
            meta.insert(
                "titre".into(),
                json!(format!("Édition n° {g} — “{family}”")),
            );
            if let Some(p) = published {
                meta.insert(FIELD.into(), p);
            }
            match g % 4 {
                1 | 3 => {
                    meta.insert("votes".into(), json!((g * 37 % 11) as f64 / 2.0));
                }
                2 => {
                    meta.insert("votes".into(), json!("99"));
                }
                _ => {}
            }
            docs.push(Doc {
                id: format!("f{family}-{}", member_ids[m]),
                family,
                text: words.join(" "),
                metadata: Some(Value::Object(meta)),
                published_ms,
            });
            g += 1;
        }
    }
    docs
}

/// The corpus in a shuffled (deterministic) order.
fn shuffled(docs: &[Doc]) -> Vec<Doc> {
    let mut v: Vec<(usize, Doc)> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| ((i * 7919 + 13) % 101, d.clone()))
        .collect();
    v.sort_by_key(|(k, _)| *k);
    v.into_iter().map(|(_, d)| d).collect()
}

/// Where the suite's collection routes are (`""` for `default`).
fn prefix() -> String {
    crate::COLLECTION.map_or(String::new(), |n| format!("/collections/{n}"))
}

fn settings() -> Settings {
    let mut s = test_settings();
    s.originals.time_field = Some(FIELD.into());
    s
}

async fn write_all(app: &TestApp, docs: &[Doc], prefix: &str) {
    for d in docs {
        let resp = app
            .client
            .post(format!("{}{prefix}/documents", app.base))
            .json(&json!({"id": d.id, "text": d.text, "metadata": d.metadata}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201, "{}", resp.text().await.unwrap());
    }
}

/// What the brute force knows of a stored document.
#[derive(Clone, Debug)]
struct Known {
    created_ms: i64,
    shingles: u64,
    published_ms: Option<i64>,
    votes: Option<f64>,
}

impl Known {
    fn time(&self, by_field: bool) -> i64 {
        match (by_field, self.published_ms) {
            (true, Some(t)) => t,
            _ => self.created_ms,
        }
    }
}

async fn known(app: &TestApp, docs: &[Doc], prefix: &str) -> BTreeMap<String, Known> {
    let mut out = BTreeMap::new();
    for d in docs {
        let path = format!("{}{prefix}/documents/{}", app.read_base, encode(&d.id));
        let resp = app.client.get(path).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let v: Value = resp.json().await.unwrap();
        let created = time::OffsetDateTime::parse(v["created_at"].as_str().unwrap(), &Rfc3339)
            .unwrap()
            .unix_timestamp_nanos()
            / 1_000_000;
        out.insert(
            d.id.clone(),
            Known {
                created_ms: created as i64,
                shingles: v["shingles"].as_u64().unwrap(),
                published_ms: d.published_ms,
                votes: d.metadata.as_ref().and_then(|m| m["votes"].as_f64()),
            },
        );
    }
    out
}

/// The earliest of `ids` by (time, id bytes).
fn brute_original<'a>(
    ids: impl IntoIterator<Item = &'a str>,
    k: &BTreeMap<String, Known>,
    by_field: bool,
) -> Option<String> {
    ids.into_iter()
        .min_by(|a, b| {
            (k[*a].time(by_field), a.as_bytes()).cmp(&(k[*b].time(by_field), b.as_bytes()))
        })
        .map(str::to_owned)
}

/// The member `keep` keeps, by brute force.
fn brute_kept(keep: &str, ids: &[String], k: &BTreeMap<String, Known>) -> String {
    let oldest_key = |id: &String| (k[id].time(true), id.as_bytes().to_vec());
    let mut v: Vec<&String> = ids.iter().collect();
    match keep {
        "oldest" => v.sort_by_key(|id| oldest_key(id)),
        "newest" => v.sort_by(|a, b| {
            k[*b]
                .time(true)
                .cmp(&k[*a].time(true))
                .then(a.as_bytes().cmp(b.as_bytes()))
        }),
        "longest" => v.sort_by(|a, b| {
            k[*b]
                .shingles
                .cmp(&k[*a].shingles)
                .then(oldest_key(a).cmp(&oldest_key(b)))
        }),
        "max:votes" => v.sort_by(|a, b| {
            let rank = |id: &String| k[id].votes.map_or(f64::NEG_INFINITY, |x| x);
            let has = |id: &String| k[id].votes.is_some();
            has(b)
                .cmp(&has(a))
                .then(rank(b).total_cmp(&rank(a)))
                .then(oldest_key(a).cmp(&oldest_key(b)))
        }),
        other => panic!("{other}"),
    }
    v[0].clone()
}

async fn get_json_at(app: &TestApp, url: String) -> Value {
    let resp = app.client.get(url).send().await.unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    resp.json().await.unwrap()
}

async fn ndjson_at(app: &TestApp, url: String) -> Vec<Value> {
    let resp = app
        .client
        .get(url)
        .header("accept", "application/x-ndjson")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.text()
        .await
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The families as groups: member ids sorted.
fn families(docs: &[Doc]) -> Vec<BTreeSet<String>> {
    let mut by: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    for d in docs {
        by.entry(d.family).or_default().insert(d.id.clone());
    }
    by.into_values().collect()
}

#[tokio::test]
async fn groups_name_the_earliest_member_by_published_at_then_created_at() {
    let app = spawn_app_with(settings()).await;
    let docs = corpus();
    write_all(&app, &shuffled(&docs), &prefix()).await;
    let k = known(&app, &docs, &prefix()).await;
    let page = app.get_json("/duplicates?limit=100").await;
    let groups = page["groups"].as_array().unwrap();
    let got: Vec<BTreeSet<String>> = groups
        .iter()
        .map(|g| {
            g["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i.as_str().unwrap().to_owned())
                .collect()
        })
        .collect();
    let mut want = families(&docs);
    want.sort_by(|a, b| a.first().cmp(&b.first()));
    assert_eq!(got, want, "the families are the groups");
    let mut by_created_differs = 0;
    for (g, ids) in groups.iter().zip(&got) {
        let expected = brute_original(ids.iter().map(String::as_str), &k, true).unwrap();
        assert_eq!(g["original"], expected.as_str(), "{g}");
        if brute_original(ids.iter().map(String::as_str), &k, false).unwrap() != expected {
            by_created_differs += 1;
        }
    }
    assert!(by_created_differs >= 2, "the field decides some groups");
    // The tie in two offsets goes to the smaller id.
    let f2 = groups
        .iter()
        .find(|g| g["ids"].as_array().unwrap().contains(&json!("f2-a")))
        .unwrap();
    assert_eq!(f2["original"], "f2-a");
    // NDJSON names the same originals.
    let lines = ndjson_at(&app, app.read_url("/duplicates")).await;
    let originals: Vec<&Value> = lines.iter().map(|g| &g["original"]).collect();
    let paged: Vec<&Value> = groups.iter().map(|g| &g["original"]).collect();
    assert_eq!(originals, paged);
}

#[tokio::test]
async fn similar_names_the_original_among_the_matches_and_the_query() {
    let app = spawn_app_with(settings()).await;
    let docs = corpus();
    write_all(&app, &shuffled(&docs), &prefix()).await;
    let k = known(&app, &docs, &prefix()).await;
    for d in &docs {
        let v = app
            .get_json(&format!("/similar?id={}&limit=100", encode(&d.id)))
            .await;
        let mut ids: Vec<&str> = v["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        assert!(!ids.is_empty(), "{} has its family", d.id);
        ids.push(&d.id);
        let expected = brute_original(ids, &k, true).unwrap();
        assert_eq!(v["original"], expected.as_str(), "{}", d.id);
    }
    // A text that is not stored: the earliest match.
    let f0: Vec<&Doc> = docs.iter().filter(|d| d.family == 0).collect();
    let v: Value = app
        .post_json("/similar", &json!({"text": f0[0].text, "limit": 100}))
        .await
        .json()
        .await
        .unwrap();
    let expected = brute_original(f0.iter().map(|d| d.id.as_str()), &k, true).unwrap();
    assert_eq!(v["original"], expected.as_str());
    let v: Value = app
        .post_json(
            "/similar",
            &json!({"text": "Пусть всегда будет солнце, пусть всегда будет небо"}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["results"], json!([]));
    assert_eq!(v["original"], Value::Null);
    // A write with similar=true dated before every match is the original;
    // one without a time of its own is not (it is the latest stored).
    let early = json!({"id": "f0-précurseur", "text": f0[0].text,
                       "metadata": {FIELD: "2001-09-09T03:46:40+02:00"}});
    let v: Value = app
        .post_json("/documents?similar=true&limit=100", &early)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["original"], "f0-précurseur", "{v}");
    let late = json!({"id": "f0-tardif", "text": f0[0].text});
    let v: Value = app
        .post_json("/documents?similar=true&limit=100", &late)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["original"], "f0-précurseur", "{v}");
    let unique = json!({"id": "seul", "text": "Ein völlig anderer Text über die Brücke am Fluss"});
    let v: Value = app
        .post_json("/documents?similar=true", &unique)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["original"], Value::Null, "{v}");
    let v: Value = app
        .post_json(
            "/documents?if_unique=true&limit=100",
            &json!({"id": "refusé", "text": f0[0].text}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["inserted"], false);
    assert_eq!(v["original"], "f0-précurseur", "{v}");
}

const POLICIES: &[&str] = &["oldest", "newest", "longest", "max:votes"];

#[tokio::test]
async fn drop_lists_keep_exactly_the_member_each_policy_names() {
    let app = spawn_app_with(settings()).await;
    let docs = corpus();
    write_all(&app, &shuffled(&docs), &prefix()).await;
    let k = known(&app, &docs, &prefix()).await;
    let mut fams = families(&docs);
    fams.sort_by(|a, b| a.first().cmp(&b.first()));
    let mut kept_differ = BTreeSet::new();
    for keep in POLICIES {
        // Pages of two groups, followed to the end.
        let mut paged: Vec<Value> = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let mut url = format!("/duplicates/drop-list?keep={}&limit=2", encode(keep));
            if let Some(c) = &cursor {
                url.push_str(&format!("&cursor={c}"));
            }
            let page = app.get_json(&url).await;
            assert_eq!(page["keep"], *keep);
            assert_eq!(page["total_groups"], fams.len());
            let total: usize = fams.iter().map(|f| f.len() - 1).sum();
            assert_eq!(page["total_drops"], total);
            paged.extend(page["drops"].as_array().unwrap().iter().cloned());
            pages += 1;
            match page["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => break,
            }
        }
        assert_eq!(pages, fams.len().div_ceil(2));
        let streamed = ndjson_at(
            &app,
            app.read_url(&format!("/duplicates/drop-list?keep={}", encode(keep))),
        )
        .await;
        assert_eq!(streamed, paged, "NDJSON equals the pages ({keep})");
        for (n, members) in fams.iter().enumerate() {
            let ids: Vec<String> = members.iter().cloned().collect();
            let expected = brute_kept(keep, &ids, &k);
            let drops: Vec<&Value> = paged.iter().filter(|d| d["group"] == n).collect();
            let dropped: BTreeSet<String> = drops
                .iter()
                .map(|d| d["id"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(
                drops.len(),
                members.len() - 1,
                "one kept ({keep}, group {n})"
            );
            assert!(
                drops.iter().all(|d| d["kept"] == expected.as_str()),
                "{keep}: {drops:?}"
            );
            assert!(!dropped.contains(&expected));
            let mut all = dropped.clone();
            all.insert(expected.clone());
            assert_eq!(&all, members, "drops ∪ kept = the group");
            kept_differ.insert((n, expected));
        }
    }
    assert!(
        kept_differ.len() > fams.len() + 3,
        "the policies keep different members"
    );
    for bad in [
        "keep=biggest",
        "keep=",
        "keep=max:",
        "keep=Oldest",
        &format!("keep=max:{}", "é".repeat(129)),
    ] {
        let resp = app.get(&format!("/duplicates/drop-list?{bad}")).await;
        let p = crate::helpers::assert_problem(resp, 400).await;
        assert!(p["detail"].as_str().unwrap().contains("keep"), "{bad}: {p}");
    }
    let resp = app
        .client
        .get(app.read_url("/duplicates/drop-list?limit=3"))
        .header("accept", "application/x-ndjson")
        .send()
        .await
        .unwrap();
    crate::helpers::assert_problem(resp, 400).await;
}

/// Each group of collection `orig`: its ids and its original.
async fn collection_originals(app: &TestApp) -> Vec<(Vec<String>, String)> {
    let url = format!("{}/collections/orig/duplicates?limit=100", app.read_base);
    let v = get_json_at(app, url).await;
    v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let ids: Vec<String> = g["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i.as_str().unwrap().to_owned())
                .collect();
            (ids, g["original"].as_str().unwrap().to_owned())
        })
        .collect()
}

#[tokio::test]
async fn the_time_field_is_set_per_collection_and_patching_it_changes_the_originals() {
    let mut s = test_settings();
    s.originals.time_field = None;
    let app = spawn_app_with(s).await;
    let put = app
        .client
        .put(format!("{}/collections/orig", app.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    let body: Value = put.json().await.unwrap();
    assert_eq!(body["settings"]["originals"], json!({"time_field": null}));
    let docs = corpus();
    write_all(&app, &shuffled(&docs), "/collections/orig").await;
    let k = known(&app, &docs, "/collections/orig").await;
    let check = |got: &[(Vec<String>, String)], by_field: bool| {
        for (ids, original) in got {
            let expected = brute_original(ids.iter().map(String::as_str), &k, by_field).unwrap();
            assert_eq!(original, &expected, "by_field {by_field}: {ids:?}");
        }
    };
    let before = collection_originals(&app).await;
    check(&before, false);
    let patch = |body: Value| {
        let app = &app;
        async move {
            app.client
                .patch(format!("{}/collections/orig", app.base))
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    };
    let r = patch(json!({"originals": {"time_field": FIELD}})).await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let d: Value = r.json().await.unwrap();
    assert_eq!(d["settings"]["originals"]["time_field"], FIELD);
    let after = collection_originals(&app).await;
    check(&after, true);
    assert_ne!(before, after, "the field changes some originals");
    // The reading node follows the change too (GET /collections there).
    let seen = get_json_at(&app, format!("{}/collections/orig", app.read_base)).await;
    assert_eq!(seen["settings"]["originals"]["time_field"], FIELD);
    for (body, status) in [
        (json!({"originals": {"time_field": ""}}), 422),
        (json!({"originals": {"time_field": "x".repeat(257)}}), 422),
        (json!({"originals": {}}), 422),
        (json!({"originals": null}), 422),
        (json!({"originals": {"time_field": 3}}), 422),
    ] {
        let r = patch(body.clone()).await;
        assert_eq!(r.status(), status, "{body}: {}", r.text().await.unwrap());
    }
    let r = patch(json!({"originals": {"time_field": null}})).await;
    assert_eq!(r.status(), 200);
    check(&collection_originals(&app).await, false);
    // The default collection's comes from the configuration.
    let r = app
        .client
        .patch(format!("{}/collections/default", app.base))
        .json(&json!({"originals": {"time_field": FIELD}}))
        .send()
        .await
        .unwrap();
    let p = crate::helpers::assert_problem(r, 409).await;
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("originals.time_field"),
        "{p}"
    );
}

#[tokio::test]
async fn the_cli_drop_list_equals_the_server_s_for_every_policy() {
    let app = spawn_app_with(settings()).await;
    // Written in input order (id order), as the offline run reads it. At
    // most one document of a family goes without a valid time: two such
    // written in the same millisecond would tie online (the smaller id
    // wins) where their lines do not offline.
    let mut docs = corpus();
    let mut undated = BTreeSet::new();
    for (i, d) in docs.iter_mut().enumerate() {
        if d.published_ms.is_none() && !undated.insert(d.family) {
            let t = 1_500_000_000_000 + i as i64 * 60_000;
            d.metadata.as_mut().unwrap()[FIELD] = json!(rfc3339(t, 3600));
            d.published_ms = Some(t);
        }
    }
    docs.sort_by(|a, b| a.id.as_bytes().cmp(b.id.as_bytes()));
    write_all(&app, &docs, &prefix()).await;
    let lines: Vec<String> = docs
        .iter()
        .map(|d| json!({"id": d.id, "text": d.text, "metadata": d.metadata}).to_string())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("corpus.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    for keep in POLICIES {
        let out = crate::helpers::neardup()
            .args([
                "dedup",
                "-q",
                "--drop-list",
                "--keep",
                keep,
                "--time-field",
                FIELD,
            ])
            .arg(&file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let offline = String::from_utf8(out.stdout).unwrap();
        let served = app
            .client
            .get(app.read_url(&format!("/duplicates/drop-list?keep={}", encode(keep))))
            .header("accept", "application/x-ndjson")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(offline, served, "{keep}");
        assert_eq!(offline.lines().count(), docs.len() - 7, "{keep}");
    }
    let out = crate::helpers::neardup()
        .args(["dedup", "-q", "--drop-list", "--keep", "max:"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--keep"));
    // Groups offline name the same originals as the server's.
    let out = crate::helpers::neardup()
        .args(["dedup", "-q", "--time-field", FIELD])
        .arg(&file)
        .output()
        .unwrap();
    let offline: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let served = ndjson_at(&app, app.read_url("/duplicates")).await;
    let originals = |v: &[Value]| v.iter().map(|g| g["original"].clone()).collect::<Vec<_>>();
    assert_eq!(originals(&offline), originals(&served));
}
