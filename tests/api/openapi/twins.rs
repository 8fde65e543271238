//! The `/collections/{name}/...` operations of `openapi.yaml` are derived
//! from the unprefixed ones, so the two can never drift apart.
//!
//! Every route a collection serves (`neardup::http::COLLECTION_ROUTES`) is
//! documented once, unprefixed, by hand; its twin under
//! `/collections/{name}` is generated from it by [`twins`]: the collection
//! name parameter first, `InCollection` after the operation id, the
//! threshold schemas without the `default` collection's tuned minimum (a
//! collection has its own), `invalid-collection-name` among the 400s and
//! `collection-not-found` among the 404s. The generated text sits between
//! `BEGIN`/`END` markers in the file; this test fails when it differs from
//! what the rules give, and `NEARDUP_BLESS=1` rewrites it.

use super::spec::{spec, SPEC_FILE};
use neardup::http::{COLLECTION_ROUTES, MANAGEMENT_ROUTES};
use serde_json::{json, Map, Value};

const PREFIX: &str = "/collections/{name}";
/// After a twin operation's id.
const SUFFIX: &str = "InCollection";
/// Before a twin schema's name.
const SCHEMA_PREFIX: &str = "Collection";
const PATHS_BEGIN: &str = "  # BEGIN collection routes";
const PATHS_END: &str = "  # END collection routes";
const SCHEMAS_BEGIN: &str = "    # BEGIN collection schemas";
const SCHEMAS_END: &str = "    # END collection schemas";

/// A `$ref` rewrite applied to everything copied into a twin.
fn rename_refs(value: &mut Value, renames: &[(String, String)]) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if key == "$ref" {
                    if let Some(to) = v
                        .as_str()
                        .and_then(|r| renames.iter().find(|(from, _)| from == r))
                    {
                        *v = Value::String(to.1.clone());
                    }
                } else {
                    rename_refs(v, renames);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rename_refs(v, renames)),
        _ => {}
    }
}

fn mentions(value: &Value, reference: &str) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| (k == "$ref" && v == reference) || mentions(v, reference)),
        Value::Array(items) => items.iter().any(|v| mentions(v, reference)),
        _ => false,
    }
}

/// The generated paths and schemas for `doc`.
pub(super) fn twins(doc: &Value) -> (Map<String, Value>, Map<String, Value>) {
    let schemas = doc["components"]["schemas"]
        .as_object()
        .expect("the spec has schemas");
    // The threshold's tuned minimum is the default collection's: every
    // schema that reaches it gets an `InCollection` twin that does not.
    let mut renames: Vec<(String, String)> = vec![
        (
            "#/components/parameters/Threshold".into(),
            "#/components/parameters/CollectionThreshold".into(),
        ),
        (
            "#/components/schemas/Threshold".into(),
            "#/components/schemas/CollectionThreshold".into(),
        ),
    ];
    let mut generated_schemas = Map::new();
    loop {
        let before = generated_schemas.len();
        for (name, schema) in schemas {
            let twin = format!("{SCHEMA_PREFIX}{name}");
            if generated_schemas.contains_key(&twin) {
                continue;
            }
            if renames.iter().any(|(from, _)| mentions(schema, from)) {
                let mut copy = schema.clone();
                rename_refs(&mut copy, &renames);
                renames.push((
                    format!("#/components/schemas/{name}"),
                    format!("#/components/schemas/{twin}"),
                ));
                generated_schemas.insert(twin, copy);
            }
        }
        if generated_schemas.len() == before {
            break;
        }
    }
    // A second pass: a schema renamed late may be mentioned by one made earlier.
    for schema in generated_schemas.values_mut() {
        rename_refs(schema, &renames);
    }

    let paths = doc["paths"].as_object().expect("the spec has paths");
    let mut generated_paths = Map::new();
    for route in COLLECTION_ROUTES {
        let item = paths
            .get(*route)
            .unwrap_or_else(|| panic!("{route} is not documented"))
            .as_object()
            .expect("a path item");
        let mut twin = Map::new();
        let mut parameters = vec![json!({"$ref": "#/components/parameters/CollectionName"})];
        if let Some(Value::Array(own)) = item.get("parameters") {
            parameters.extend(own.iter().cloned());
        }
        twin.insert("parameters".into(), Value::Array(parameters));
        for (method, op) in item {
            if method == "parameters" {
                continue;
            }
            twin.insert(method.clone(), twin_operation(method, route, op, &renames));
        }
        generated_paths.insert(format!("{PREFIX}{route}"), Value::Object(twin));
    }
    (generated_paths, generated_schemas)
}

fn twin_operation(method: &str, route: &str, op: &Value, renames: &[(String, String)]) -> Value {
    let id = op["operationId"].as_str().expect("an operationId");
    let mut out = Map::new();
    out.insert("tags".into(), op["tags"].clone());
    out.insert("operationId".into(), json!(format!("{id}{SUFFIX}")));
    out.insert(
        "summary".into(),
        json!(format!(
            "{} (named collection)",
            op["summary"].as_str().expect("a summary")
        )),
    );
    out.insert(
        "description".into(),
        json!(format!(
            "`{} {route}` (`{id}`) on the collection `name`, answered by its own \
             index, recipe and retention alone; the same parameters, body and \
             answers.\n",
            method.to_ascii_uppercase()
        )),
    );
    for key in ["parameters", "requestBody", "security"] {
        if let Some(v) = op.get(key) {
            let mut v = v.clone();
            rename_refs(&mut v, renames);
            out.insert(key.into(), v);
        }
    }
    let mut responses = op["responses"].as_object().expect("responses").clone();
    for v in responses.values_mut() {
        rename_refs(v, renames);
    }
    let bad_request = match responses.get("400").and_then(|r| r.get("description")) {
        Some(Value::String(d)) => format!(
            "{}\nAlso `invalid-collection-name` (the path's collection name).\n",
            d.trim_end()
        ),
        _ => "`invalid-collection-name` (the path's collection name).".into(),
    };
    responses.insert(
        "400".into(),
        json!({"$ref": "#/components/responses/BadRequest", "description": bad_request}),
    );
    let not_found = if responses.contains_key("404") {
        "#/components/responses/DocumentOrCollectionNotFound"
    } else {
        "#/components/responses/CollectionNotFound"
    };
    responses.insert("404".into(), json!({ "$ref": not_found }));
    let mut sorted: Vec<(String, Value)> = responses.into_iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    out.insert(
        "responses".into(),
        Value::Object(sorted.into_iter().collect()),
    );
    Value::Object(out)
}

/// The block of text for `entries` (`name: value` pairs) at `indent`.
fn render(entries: &Map<String, Value>, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut out = String::new();
    for (name, value) in entries {
        let mut one = Map::new();
        one.insert(name.clone(), value.clone());
        let yaml = serde_yaml_ng::to_string(&Value::Object(one)).expect("YAML renders");
        for line in yaml.lines() {
            if line.is_empty() {
                out.push('\n');
            } else {
                out.push_str(&pad);
                out.push_str(&quote_timestamp(line));
                out.push('\n');
            }
        }
        out.push('\n');
    }
    out
}

/// The mapping between the `begin` and `end` marker lines, as data.
fn block(text: &str, begin: &str, end: &str) -> Map<String, Value> {
    let start = text.find(begin).unwrap_or_else(|| panic!("no {begin:?}"));
    let stop = text.find(end).unwrap_or_else(|| panic!("no {end:?}"));
    let indent = begin.len() - begin.trim_start().len();
    let body: String = text[start..stop]
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| format!("{}\n", l.get(indent..).unwrap_or("")))
        .collect();
    if body.trim().is_empty() {
        return Map::new();
    }
    serde_yaml_ng::from_str(&body).expect("the generated block parses")
}

/// `line` with an unquoted RFC 3339 value quoted: YAML 1.2 (this crate)
/// reads it as a string, YAML 1.1 parsers (PyYAML) as a timestamp.
fn quote_timestamp(line: &str) -> String {
    let cut = line.find(": ").map(|i| i + 2).or_else(|| {
        line.trim_start()
            .starts_with("- ")
            .then(|| line.find("- ").unwrap() + 2)
    });
    if let Some(i) = cut {
        let value = &line[i..];
        let b = value.as_bytes();
        let is_time = b.len() >= 11
            && b[..4].iter().all(u8::is_ascii_digit)
            && b[4] == b'-'
            && b[7] == b'-'
            && b[10] == b'T';
        if is_time {
            return format!("{}'{}'", &line[..i], value);
        }
    }
    line.to_owned()
}

/// `text` with the lines strictly between the line starting `begin` (and
/// its comment continuation) and the line starting `end` replaced by `block`.
fn splice(text: &str, begin: &str, end: &str, block: &str) -> String {
    let start = text.find(begin).unwrap_or_else(|| panic!("no {begin:?}"));
    let after_begin = text[start..]
        .find("do not edit.\n")
        .map(|i| start + i + "do not edit.\n".len())
        .expect("the BEGIN comment ends with `do not edit.`");
    let stop = text.find(end).unwrap_or_else(|| panic!("no {end:?}"));
    format!("{}{}{}", &text[..after_begin], block, &text[stop..])
}

#[test]
fn the_collection_routes_are_generated_from_the_default_routes() {
    let doc = spec();
    let (paths, schemas) = twins(doc);
    let text = std::fs::read_to_string(SPEC_FILE).unwrap();
    let documented = block(&text, PATHS_BEGIN, PATHS_END);
    let documented_schemas = block(&text, SCHEMAS_BEGIN, SCHEMAS_END);
    // Every `/collections/{name}/...` path is in the generated block, but
    // the changes to a collection that have no twin.
    for path in doc["paths"].as_object().unwrap().keys() {
        assert!(
            !path.starts_with(&format!("{PREFIX}/"))
                || documented.contains_key(path)
                || MANAGEMENT_ROUTES.contains(&path.as_str()),
            "{path} is documented outside the generated block"
        );
    }
    if std::env::var_os("NEARDUP_BLESS").is_some() {
        let text = std::fs::read_to_string(SPEC_FILE).unwrap();
        let text = splice(&text, PATHS_BEGIN, PATHS_END, &render(&paths, 2));
        let text = splice(&text, SCHEMAS_BEGIN, SCHEMAS_END, &render(&schemas, 4));
        std::fs::write(SPEC_FILE, text).unwrap();
        eprintln!("openapi.yaml: the generated collection routes were rewritten");
        return;
    }
    if documented == paths && documented_schemas == schemas {
        return;
    }
    for (path, item) in &paths {
        if documented.get(path) != Some(item) {
            panic!(
                "{path} in openapi.yaml is not what the default route gives; \
                 run `NEARDUP_BLESS=1 cargo test --test api openapi::twins` \
                 and review the diff"
            );
        }
    }
    panic!(
        "openapi.yaml documents collection routes or schemas the default routes do not give; \
         run `NEARDUP_BLESS=1 cargo test --test api openapi::twins` and review the diff"
    );
}
