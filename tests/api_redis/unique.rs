//! `if_unique` across two nodes: rounds of clients posting one-word
//! variants of the same text at once, half to each node. The guarantee
//! (README, "Running on more than one machine"): never two of them stored;
//! a write that keeps meeting its rivals' pending claims gives up with 503
//! (retrying is safe), so a round may store none until one is retried.

use crate::duplicates::text_of;
use crate::helpers::spawn_app;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn near_identical_posts_racing_on_two_nodes_are_never_both_stored() {
    let app = spawn_app().await;
    let (rounds, clients) = (25, 12);
    let (mut one, mut none, mut gave_up) = (0, 0, 0);
    for round in 0..rounds {
        let base = text_of(300 + round as u64, 100);
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(clients));
        let tasks: Vec<_> = (0..clients)
            .map(|i| {
                let client = app.client.clone();
                // Half to each node.
                let url = if i % 2 == 0 {
                    app.url("/documents?if_unique=true")
                } else {
                    app.read_url("/documents?if_unique=true")
                };
                let mut words = base.clone();
                words[i * 7 % 100] = format!("edit{i}");
                let body = json!({"id": format!("race-{round}-{i}"), "text": words.join(" ")});
                let barrier = std::sync::Arc::clone(&barrier);
                tokio::spawn(async move {
                    barrier.wait().await;
                    let resp = client.post(url).json(&body).send().await.unwrap();
                    let status = resp.status().as_u16();
                    let retry = resp.headers().get("retry-after").cloned();
                    let answer: Value = resp.json().await.unwrap();
                    (status, retry, answer, body)
                })
            })
            .collect();
        let (mut created, mut refused, mut retry) = (Vec::new(), Vec::new(), Vec::new());
        for t in tasks {
            let (status, after, answer, body) = t.await.unwrap();
            match status {
                201 => created.push(answer["id"].as_str().unwrap().to_owned()),
                200 => refused.push(answer),
                503 => {
                    assert_eq!(answer["type"], "urn:neardup:problem:storage-unavailable");
                    assert!(after.is_some(), "a 503 says Retry-After");
                    retry.push(body);
                }
                s => panic!("unexpected {s}: {answer}"),
            }
        }
        assert!(
            created.len() <= 1,
            "round {round}: both stored: {created:?}"
        );
        gave_up += retry.len();
        if let Some(stored) = created.first() {
            one += 1;
            for answer in refused {
                assert_eq!(answer["inserted"], false);
                assert_eq!(answer["similar"][0]["id"], stored.as_str());
            }
        } else {
            none += 1;
            // Nothing stored: a retry of one, alone, is.
            assert!(refused.is_empty());
            let resp = app.post_json("/documents?if_unique=true", &retry[0]).await;
            assert_eq!(resp.status(), 201);
        }
        // Whatever happened, now exactly one of the round is stored: a
        // late retry of another is refused, naming it.
        if let Some(body) = retry.last() {
            let resp = app.post_json("/documents?if_unique=true", body).await;
            assert_eq!(resp.status(), 200);
        }
    }
    eprintln!(
        "if_unique on two nodes: {one} rounds stored one at once, {none} stored none until a retry; {gave_up} of {} posts answered 503",
        rounds * clients
    );
    assert_eq!(app.stats().await["documents"], rounds);
}
