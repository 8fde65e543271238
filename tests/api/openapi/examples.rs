//! Every example in the spec conforms to its schema and is accepted by its operation.

use super::checker::*;
use super::live::*;
use super::spec::*;
use crate::helpers::{spawn_app_with, test_settings};
use serde_json::Value;

#[tokio::test]
async fn every_request_body_example_is_accepted_by_its_operation() {
    let mut sent = 0;
    for op in operations() {
        let Some((media, schema, examples)) = op.request_body() else {
            continue;
        };
        assert!(!examples.is_empty(), "{}: no request example", op.name());
        for example in examples {
            assert_conforms(schema, &example, &format!("{} request example", op.name()));
            // With only the required parameters, then with every parameter
            // example too; a fresh server each time so examples cannot collide.
            // Collections keep the passage index and count document
            // frequency: examples ask by containment and on content.
            for all_query in [false, true] {
                let mut settings = test_settings();
                settings.index.passage_index = true;
                settings.index.boilerplate.enabled = true;
                let app = spawn_app_with(settings).await;
                let url = example_url(&op, all_query);
                // The named collection the example addresses, unless the
                // example is what creates it.
                if let Some(rest) = url.strip_prefix("/collections/") {
                    if !(op.method == "PUT" && op.path == "/collections/{name}") {
                        let name = rest.split(['/', '?']).next().unwrap();
                        let reply = send(
                            &app,
                            "PUT",
                            &format!("/collections/{name}"),
                            &Body::Json(serde_json::json!({
                                "store_text": true,
                                "index": {"passage_index": true, "boilerplate": {"enabled": true}},
                            })),
                        )
                        .await;
                        assert_eq!(reply.status, 201, "{name} is created");
                    }
                }
                // The subscription a webhook example addresses.
                if let Some(rest) = url.split("/webhooks/").nth(1) {
                    let id = rest.split(['/', '?']).next().unwrap();
                    let at = &url[..url.find("/webhooks/").unwrap()];
                    let reply = send(
                        &app,
                        "POST",
                        &format!("{at}/webhooks"),
                        &Body::Json(
                            serde_json::json!({"id": id, "url": "https://hooks.example.com/x"}),
                        ),
                    )
                    .await;
                    assert_eq!(reply.status, 201, "subscription {id} is created");
                }
                let body = match (media, example.as_str()) {
                    ("application/x-ndjson" | "application/octet-stream", Some(lines)) => {
                        Body::Raw(media, lines.to_owned())
                    }
                    _ => Body::Json(example.clone()),
                };
                let reply = send(&app, &op.method, &url, &body).await;
                let what = format!("{} {url} with {example}", op.method);
                assert!(
                    (200..300).contains(&reply.status),
                    "{what} → {}: {}",
                    reply.status,
                    String::from_utf8_lossy(&reply.body)
                );
                let body = assert_documented(&op.method, op.path, &reply);
                if let Some(failed) = body.get("failed") {
                    assert_eq!(failed, 0, "{what}: every batch item is accepted: {body}");
                }
                sent += 1;
            }
        }
    }
    assert!(sent >= 8, "only {sent} request examples were sent");
}

#[test]
fn every_response_example_conforms_to_its_schema() {
    let mut checked = 0;
    let mut check_response = |response: &'static Value, status: Option<u16>, what: &str| {
        let Some(content) = response.get("content").and_then(Value::as_object) else {
            return;
        };
        for (media, media_object) in content {
            let what = format!("{what} {media}");
            let examples = media_examples(media_object);
            assert!(!examples.is_empty(), "{what}: no example");
            for example in examples {
                if is_json_media(media) {
                    // The example is JSON text, not just YAML.
                    let text = serde_json::to_string(&example).expect("serializable");
                    let example: Value = serde_json::from_str(&text).expect("JSON");
                    assert_conforms(&media_object["schema"], &example, &what);
                    if let (Some(status), "application/problem+json") = (status, media.as_str()) {
                        assert_eq!(example["status"], status, "{what}: example status");
                    }
                } else if media == "application/x-ndjson" {
                    assert_conforms(&media_object["schema"], &example, &what);
                    let lines = ndjson_lines(media_object, example.as_str().unwrap(), &what);
                    assert!(lines > 0, "{what}: an example line");
                } else {
                    let text = example.as_str().expect("a text example is a string");
                    let openmetrics = media == "application/openmetrics-text";
                    assert_eq!(
                        text.ends_with("# EOF\n"),
                        openmetrics,
                        "{what}: OpenMetrics, and only it, ends with # EOF"
                    );
                    assert_conforms(&media_object["schema"], &example, &what);
                }
                checked += 1;
            }
        }
    };
    for op in operations() {
        for (code, response) in op.op["responses"].as_object().unwrap() {
            let status = code.parse().unwrap();
            check_response(
                resolve(response),
                Some(status),
                &format!("{} → {code}", op.name()),
            );
        }
    }
    for (name, response) in spec()["components"]["responses"].as_object().unwrap() {
        check_response(response, None, &format!("components/responses/{name}"));
    }
    assert!(checked >= 30, "only {checked} response examples checked");
}

#[test]
fn every_parameter_and_schema_example_conforms_to_its_schema() {
    for op in operations() {
        for p in op.parameters() {
            let what = format!("{} parameter {}", op.name(), p["name"]);
            let examples = media_examples(p);
            assert!(!examples.is_empty(), "{what}: no example");
            for example in examples {
                assert_conforms(&p["schema"], &example, &what);
            }
        }
    }
    for (name, schema) in spec()["components"]["schemas"].as_object().unwrap() {
        for example in schema["examples"].as_array().into_iter().flatten() {
            assert_conforms(schema, example, &format!("schema {name} example"));
        }
    }
}
