//! Excluding judged pairs (issue 46): with `review.exclude_not_duplicates`
//! on, a pair moderators judged `not_duplicate` (`PUT /review/decisions`)
//! is no edge of `GET /duplicates` groups, `/duplicates/pairs` and
//! `/duplicates/drop-list`, and does not make an `if_unique` write refuse;
//! with it off, decisions change none of them. The corpus is two families
//! of near-identical French, German and Russian job ads and one unrelated
//! ad, so every expected edge is known by construction.

use crate::helpers::{
    assert_problem, collection_label, metric_value, route, spawn_app_with, test_settings,
    wait_reindex_done, Lcg, TestApp,
};
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// Words of several languages, so the texts are real Unicode.
const WORDS: &[&str] = &[
    "poste",
    "à",
    "pourvoir",
    "café",
    "crème",
    "l’équipe",
    "déjà",
    "salaire",
    "£2 400",
    "€",
    "“urgent”",
    "Zürich",
    "Straße",
    "Mädchen",
    "Größe",
    "schön",
    "Frühstück",
    "Arbeitszeit",
    "вакансия",
    "зарплата",
    "опыт",
    "работы",
    "Москва",
    "город",
    "上海",
    "工作",
    "经验",
    "résumé",
    "hôtel",
    "forêt",
    "garçon",
    "soirée",
    "Köln",
    "Kraków",
    "Dvořák",
    "fjord",
    "piñata",
    "jalapeño",
    "château",
    "île",
];

/// The ad of `family` (60 words) with the words at `edits` replaced: two
/// ads of a family differ in a word or two, far above the threshold;
/// ads of different families share next to no shingle.
fn ad(family: u64, edits: &[usize]) -> String {
    let mut rng = Lcg(family * 7919 + 17);
    let mut words: Vec<String> = (0..60)
        .map(|_| WORDS[rng.next() % WORDS.len()].to_owned())
        .collect();
    for &i in edits {
        words[i] = format!("modifié{i}");
    }
    words.join(" ")
}

/// Settings with the exclusion `on` or off (the `default` collection's
/// and, so, the suites' named collection's).
fn settings(on: bool) -> neardup::config::Settings {
    let mut s = test_settings();
    s.review.exclude_not_duplicates = on;
    s
}

/// Three ads of family 1 (each pair an edge), two of family 2 and one
/// unrelated.
async fn load(app: &TestApp) {
    for (id, text) in [
        ("annonce-1", ad(1, &[])),
        ("annonce-2", ad(1, &[59])),
        ("annonce-3", ad(1, &[0])),
        ("stelle-1", ad(2, &[])),
        ("stelle-2", ad(2, &[30])),
        ("вакансия", ad(3, &[])),
    ] {
        let resp = app
            .post_json("/documents", &json!({"id": id, "text": text}))
            .await;
        assert_eq!(resp.status(), 201, "{id}");
    }
}

/// `PUT /review/decisions` of the pair (`a`, `b`): 201 or 200.
async fn decide(app: &TestApp, a: &str, b: &str, verdict: &str) {
    let resp = app
        .put_json(
            "/review/decisions",
            &json!({"a": a, "b": b, "verdict": verdict, "note": "même modèle, autre annonce"}),
        )
        .await;
    let status = resp.status().as_u16();
    let body = resp.text().await.unwrap();
    assert!(
        status == 201 || status == 200,
        "PUT {}: {status} {body}",
        route("/review/decisions")
    );
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_owned(), b.to_owned())
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

/// The pairs of a JSON `/duplicates/pairs` answer, as (a, b).
async fn pairs(app: &TestApp) -> BTreeSet<(String, String)> {
    let body = app.get_json("/duplicates/pairs").await;
    body["pairs"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|p| pair(p["a"].as_str().unwrap(), p["b"].as_str().unwrap()))
        .collect()
}

/// The groups of `GET /duplicates`, as sets of ids.
async fn groups(app: &TestApp) -> BTreeSet<BTreeSet<String>> {
    let body = app.get_json("/duplicates?limit=1000").await;
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

/// The ids `GET /duplicates/drop-list` drops, and its `total_groups`.
async fn drops(app: &TestApp) -> (BTreeSet<String>, u64) {
    let body = app.get_json("/duplicates/drop-list?limit=1000").await;
    let ids = body["drops"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .collect();
    (ids, body["total_groups"].as_u64().unwrap())
}

/// Every edge of the corpus, by construction.
fn every_pair() -> BTreeSet<(String, String)> {
    [
        pair("annonce-1", "annonce-2"),
        pair("annonce-1", "annonce-3"),
        pair("annonce-2", "annonce-3"),
        pair("stelle-1", "stelle-2"),
    ]
    .into()
}

async fn excluded_metric(app: &TestApp, route: &str) -> f64 {
    metric_value(
        &app.metrics().await,
        "neardup_review_excluded_pairs_total",
        &[("collection", collection_label()), ("route", route)],
    )
    .unwrap_or(0.0)
}

#[tokio::test]
async fn with_the_setting_off_judged_pairs_stay_edges_everywhere() {
    let app = spawn_app_with(settings(false)).await;
    load(&app).await;
    decide(&app, "stelle-2", "stelle-1", "not_duplicate").await;
    decide(&app, "annonce-1", "annonce-2", "not_duplicate").await;
    assert_eq!(pairs(&app).await, every_pair());
    assert_eq!(
        groups(&app).await,
        [
            set(&["annonce-1", "annonce-2", "annonce-3"]),
            set(&["stelle-1", "stelle-2"])
        ]
        .into()
    );
    let (dropped, total) = drops(&app).await;
    assert_eq!((dropped.len(), total), (3, 2));
    // if_unique still refuses a copy of a document it was judged not a
    // duplicate of.
    decide(&app, "вакансия-bis", "вакансия", "not_duplicate").await;
    let resp = app
        .post_json(
            "/documents?if_unique=true",
            &json!({"id": "вакансия-bis", "text": ad(3, &[])}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["inserted"], false, "{body}");
    assert_eq!(body["similar"][0]["id"], "вакансия");
    assert_eq!(excluded_metric(&app, "groups").await, 0.0);
    assert_eq!(excluded_metric(&app, "if_unique").await, 0.0);
}

#[tokio::test]
async fn pairs_judged_not_duplicates_leave_groups_pairs_and_the_drop_list() {
    let app = spawn_app_with(settings(true)).await;
    load(&app).await;
    // No decision yet: every edge.
    assert_eq!(pairs(&app).await, every_pair());
    let before = groups(&app).await;
    assert_eq!(before.len(), 2);

    // Family 2's only pair judged not a duplicate: its group goes, at once
    // (the groups computed a moment ago are not served again).
    decide(&app, "stelle-2", "stelle-1", "not_duplicate").await;
    let mut expected = every_pair();
    expected.remove(&pair("stelle-1", "stelle-2"));
    assert_eq!(pairs(&app).await, expected);
    assert_eq!(
        groups(&app).await,
        [set(&["annonce-1", "annonce-2", "annonce-3"])].into()
    );
    let (dropped, total) = drops(&app).await;
    assert_eq!(total, 1);
    assert_eq!(dropped.len(), 2);
    assert!(dropped.is_subset(&set(&["annonce-1", "annonce-2", "annonce-3"])));

    // One pair of family 1: the three stay one group through the third.
    decide(&app, "annonce-1", "annonce-2", "not_duplicate").await;
    expected.remove(&pair("annonce-1", "annonce-2"));
    assert_eq!(pairs(&app).await, expected);
    assert_eq!(
        groups(&app).await,
        [set(&["annonce-1", "annonce-2", "annonce-3"])].into()
    );
    // Other verdicts exclude nothing.
    decide(&app, "annonce-1", "annonce-3", "related").await;
    decide(&app, "annonce-2", "annonce-3", "duplicate").await;
    assert_eq!(pairs(&app).await, expected);
    // annonce-1's other pair judged not a duplicate (an edit of the
    // related verdict): it leaves the group.
    decide(&app, "annonce-3", "annonce-1", "not_duplicate").await;
    assert_eq!(pairs(&app).await, [pair("annonce-2", "annonce-3")].into());
    assert_eq!(
        groups(&app).await,
        [set(&["annonce-2", "annonce-3"])].into()
    );
    let (dropped, total) = drops(&app).await;
    assert_eq!(total, 1);
    assert_eq!(dropped.len(), 1);
    assert!(dropped.is_subset(&set(&["annonce-2", "annonce-3"])));
    // Edited back to a duplicate: an edge again.
    decide(&app, "annonce-1", "annonce-3", "duplicate").await;
    assert_eq!(
        groups(&app).await,
        [set(&["annonce-1", "annonce-2", "annonce-3"])].into()
    );
    // Every answer counted what it left out.
    assert!(excluded_metric(&app, "pairs").await >= 1.0 + 2.0 + 2.0 + 3.0);
    assert!(excluded_metric(&app, "groups").await >= 1.0);
    assert!(excluded_metric(&app, "drop_list").await >= 1.0);
}

#[tokio::test]
async fn if_unique_does_not_refuse_for_a_document_it_was_judged_not_a_duplicate_of() {
    let app = spawn_app_with(settings(true)).await;
    load(&app).await;
    let copy = ad(1, &[]);
    let write = |id: &'static str| {
        let app = &app;
        let copy = copy.clone();
        async move {
            let resp = app
                .post_json(
                    "/documents?if_unique=true",
                    &json!({"id": id, "text": copy}),
                )
                .await;
            let status = resp.status().as_u16();
            let body: Value = resp.json().await.unwrap();
            (status, body)
        }
    };
    let named = |body: &Value| -> BTreeSet<String> {
        body["similar"]
            .as_array()
            .unwrap_or_else(|| panic!("{body}"))
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect()
    };
    // Judged (before it was written) not a duplicate of one of the three
    // ads it matches: still refused, naming only the other two.
    decide(&app, "annonce-nouvelle", "annonce-1", "not_duplicate").await;
    let (status, body) = write("annonce-nouvelle").await;
    assert_eq!((status, &body["inserted"]), (200, &json!(false)), "{body}");
    assert_eq!(named(&body), set(&["annonce-2", "annonce-3"]));
    // Judged not a duplicate of all three: stored.
    decide(&app, "annonce-2", "annonce-nouvelle", "not_duplicate").await;
    decide(&app, "annonce-nouvelle", "annonce-3", "not_duplicate").await;
    let (status, body) = write("annonce-nouvelle").await;
    assert_eq!((status, &body["inserted"]), (201, &json!(true)), "{body}");
    let stored = app.get("/documents/annonce-nouvelle").await;
    assert_eq!(stored.status(), 200);
    // Another id is refused for all four (its own decisions are none).
    let (status, body) = write("annonce-autre").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        named(&body),
        set(&["annonce-1", "annonce-2", "annonce-3", "annonce-nouvelle"])
    );
    // A related or duplicate verdict does not let a write through.
    decide(&app, "вакансия-bis", "вакансия", "related").await;
    let resp = app
        .post_json(
            "/documents?if_unique=true",
            &json!({"id": "вакансия-bis", "text": ad(3, &[])}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(excluded_metric(&app, "if_unique").await, 1.0 + 3.0);
}

#[tokio::test]
async fn the_review_setting_is_set_per_collection_and_checked() {
    let app = spawn_app_with(settings(false)).await;
    let put = app
        .put_json(
            "/collections/revue",
            &json!({"review": {"exclude_not_duplicates": true, "snippet_field": "titre"}}),
        )
        .await;
    assert_eq!(put.status(), 201);
    let body: Value = put.json().await.unwrap();
    assert_eq!(
        body["settings"]["review"],
        json!({"exclude_not_duplicates": true, "snippet_field": "titre"})
    );
    let patch = |body: Value| {
        let app = &app;
        async move {
            app.client
                .patch(app.url("/collections/revue"))
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    };
    let r = patch(json!({"review": {"snippet_field": null}})).await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["settings"]["review"],
        json!({"exclude_not_duplicates": true, "snippet_field": null})
    );
    let r =
        patch(json!({"review": {"exclude_not_duplicates": false, "snippet_field": "заголовок"}}))
            .await;
    assert_eq!(r.status(), 200);
    let seen = app.get_json("/collections/revue").await;
    assert_eq!(
        seen["settings"]["review"],
        json!({"exclude_not_duplicates": false, "snippet_field": "заголовок"})
    );
    for (bad, key) in [
        (
            json!({"review": {"exclude_not_duplicates": "oui"}}),
            "review.exclude_not_duplicates",
        ),
        (
            json!({"review": {"snippet_field": ""}}),
            "review.snippet_field",
        ),
        (
            json!({"review": {"snippet_field": "é".repeat(129)}}),
            "review.snippet_field",
        ),
        (
            json!({"review": {"snippet_field": 7}}),
            "review.snippet_field",
        ),
        (json!({"review": {"seuil": 0.5}}), "review.seuil"),
        (json!({"review": true}), "review"),
    ] {
        let problem = assert_problem(patch(bad.clone()).await, 422).await;
        assert!(
            problem["detail"].as_str().unwrap().contains(key),
            "{bad}: {problem}"
        );
    }
    let problem = assert_problem(
        app.put_json(
            "/collections/autre",
            &json!({"review": {"snippet_field": ""}}),
        )
        .await,
        422,
    )
    .await;
    assert!(problem["detail"]
        .as_str()
        .unwrap()
        .contains("review.snippet_field"));
    // A PUT of the existing collection with other review settings names
    // the first key that differs.
    let conflict = app
        .put_json(
            "/collections/revue",
            &json!({"review": {"exclude_not_duplicates": true}}),
        )
        .await;
    assert_eq!(conflict.status(), 409);
    let problem: Value = conflict.json().await.unwrap();
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("review.exclude_not_duplicates"),
        "{problem}"
    );
    // The default collection's come from the configuration.
    let r = app
        .client
        .patch(app.url("/collections/default"))
        .json(&json!({"review": {"exclude_not_duplicates": true}}))
        .send()
        .await
        .unwrap();
    let problem = assert_problem(r, 409).await;
    assert!(
        problem["detail"].as_str().unwrap().contains("review."),
        "{problem}"
    );
}

#[tokio::test]
async fn the_review_setting_is_kept_by_a_reindex() {
    let app = spawn_app_with(settings(false)).await;
    let review = json!({"exclude_not_duplicates": true, "snippet_field": "intitulé"});
    let put = app
        .put_json(
            "/collections/revue-r",
            &json!({"store_text": true, "review": review}),
        )
        .await;
    assert_eq!(put.status(), 201);
    let resp = app
        .post_json(
            "/collections/revue-r/documents",
            &json!({"id": "annonce-1", "text": ad(1, &[])}),
        )
        .await;
    assert_eq!(resp.status(), 201);
    let resp = app
        .post_json(
            "/collections/revue-r/reindex",
            &json!({"shingle": {"k": 4}}),
        )
        .await;
    assert_eq!(resp.status(), 202, "{}", resp.text().await.unwrap());
    let stats = wait_reindex_done(&app, "revue-r").await;
    assert_eq!(stats["reindex"]["state"], "done", "{stats}");
    // From the node that ran it (on Redis, the other follows the catalog).
    let seen: Value = app
        .client
        .get(format!("{}/collections/revue-r", app.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(seen["settings"]["shingle"]["k"], 4, "{seen}");
    assert_eq!(seen["settings"]["review"], review);
}
