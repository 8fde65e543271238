//! Review decisions across a kill -9 (issue 46), on the memory backend:
//! the real binary (as `crash.rs` runs it) answers decisions, is killed
//! with SIGKILL, and the restarted server has every acknowledged
//! decision, edits and deletes included.

use crate::crash::start;
use serde_json::{json, Value};

#[tokio::test]
async fn acknowledged_decisions_survive_a_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]).await;
    let client = reqwest::Client::new();
    let url = |base: &str, p: &str| format!("{base}{p}");
    let mut acknowledged = Vec::new();
    for i in 0..40 {
        let (verdict, note) = match i % 3 {
            0 => ("duplicate", "même offre « CDI »"),
            1 => ("not_duplicate", "другая вакансия"),
            _ => ("related", "同一公司"),
        };
        let resp = client
            .put(url(&server.base, "/review/decisions"))
            .json(&json!({"a": format!("offre-{i:02}"), "b": "offre-zz", "verdict": verdict, "note": note}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201);
        acknowledged.push(resp.json::<Value>().await.unwrap());
    }
    // An edit and a delete, acknowledged before the kill.
    let resp = client
        .put(url(&server.base, "/review/decisions"))
        .json(&json!({"a": "offre-zz", "b": "offre-00", "verdict": "related"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    acknowledged[0] = resp.json::<Value>().await.unwrap();
    let resp = client
        .delete(url(&server.base, "/review/decision?a=offre-01&b=offre-zz"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    acknowledged.remove(1);
    server.kill9();

    let server = start(dir.path(), &[]).await;
    let page: Value = client
        .get(url(&server.base, "/review/decisions?limit=1000"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page["total"], 39);
    assert_eq!(page["decisions"], Value::Array(acknowledged));
    assert_eq!(page["decisions"][0]["revision"], 2);
    server.kill9();
}
