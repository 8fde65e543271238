//! What the redis backend does not keep yet is refused, never answered from
//! one node's disk: stored texts (and so texts by id and analysis samples).

use crate::helpers::{assert_problem, on_redis, spawn_app, test_settings};
use serde_json::json;

#[tokio::test]
async fn texts_are_not_stored_on_the_redis_backend_and_say_so() {
    let mut settings = on_redis(test_settings());
    settings.storage.store_text = true;
    let e = settings.validate().unwrap_err().to_string();
    assert!(
        e.contains("storage.store_text") && e.contains("redis"),
        "{e}"
    );

    let app = spawn_app().await;
    app.insert("q1", "the night is dark and the moon is red")
        .await;
    for (path, body) in [
        (
            "/explain",
            Some(json!({"a": {"id": "q1"}, "b": {"text": "the night is dark"}})),
        ),
        ("/analysis/histogram", Some(json!({"sample": 10}))),
    ] {
        let p = assert_problem(app.post_json(path, &body.unwrap()).await, 409).await;
        assert_eq!(
            p["type"], "urn:neardup:problem:text-not-stored",
            "{path}: {p}"
        );
        assert!(
            p["detail"].as_str().unwrap().contains("Redis"),
            "{path}: {p}"
        );
    }
    let p = assert_problem(app.get("/documents/q1?include=text").await, 409).await;
    assert_eq!(p["type"], "urn:neardup:problem:text-not-stored");
    // An id that is not stored is still a 404.
    let resp = app
        .post_json(
            "/explain",
            &json!({"a": {"id": "nope"}, "b": {"text": "the night is dark"}}),
        )
        .await;
    assert_problem(resp, 404).await;
}
