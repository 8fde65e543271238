//! The web console's files at `/ui/`: the redirect, the headers (CSP,
//! nosniff, ETag and 304), open without a key, `ui.enabled = false`, and
//! that they stay out of the API document. The console itself is tested in
//! a browser: `tests/browser/` (scripts/browser-check.sh).

use crate::helpers::{assert_problem, spawn_app, spawn_app_with, test_settings};
use neardup::config::Secret;
use neardup::http::{ROUTES, UI_ROUTES};
use std::collections::BTreeSet;
use std::path::Path;

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
    connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; \
    require-trusted-types-for 'script'; trusted-types 'none'";

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// GET `path` exactly as written; the status and the body.
async fn raw_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).await.unwrap();
    let reply = String::from_utf8_lossy(&reply).into_owned();
    let status = reply[9..12].parse().unwrap();
    let body = reply.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    (status, body)
}

/// Every file of `ui/` (relative paths), as served.
fn console_files() -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
            } else {
                let rel = path.strip_prefix(root).unwrap();
                out.push(rel.to_str().unwrap().replace('\\', "/"));
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("ui");
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    out.sort();
    out
}

/// Someone opening the server's address lands on the console (a
/// temporary redirect: with the console disabled `/` is 404).
#[tokio::test]
async fn the_root_sends_a_browser_to_the_console() {
    let app = spawn_app().await;
    let client = no_redirects();
    let resp = client.get(format!("{}/", app.base)).send().await.unwrap();
    assert_eq!(resp.status(), 307);
    assert_eq!(resp.headers()["location"], "/ui/");
    let page = reqwest::get(format!("{}/", app.base)).await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.url().path(), "/ui/");
}

#[tokio::test]
async fn ui_redirects_to_the_slash_and_the_page_carries_the_security_headers() {
    let app = spawn_app().await;
    let client = no_redirects();
    let resp = client.get(format!("{}/ui", app.base)).send().await.unwrap();
    assert_eq!(resp.status(), 308);
    assert_eq!(resp.headers()["location"], "/ui/");

    let resp = client
        .get(format!("{}/ui/", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let h = resp.headers().clone();
    assert_eq!(h["content-type"], "text/html; charset=utf-8");
    assert_eq!(h["content-security-policy"], CSP);
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["cache-control"], "no-cache");
    assert_eq!(h["referrer-policy"], "no-referrer");
    let etag = h["etag"].to_str().unwrap().to_owned();
    assert!(
        etag.len() == 66 && etag.starts_with('"') && etag.ends_with('"'),
        "a strong SHA-256 tag: {etag}"
    );
    let page = resp.text().await.unwrap();
    assert!(page.contains(r#"<script type="module" src="app.js">"#));
    assert!(
        !page.contains("<style") && !page.contains(" style="),
        "no inline style"
    );
    assert!(!page.contains("http://") && !page.contains("https://"));

    // Revalidation: the same tag is 304 without a body, weakly compared
    // and in a list too; another tag gets the file.
    for tag in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"other\", {etag}"),
        "*".into(),
    ] {
        let resp = client
            .get(format!("{}/ui/", app.base))
            .header("if-none-match", &tag)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 304, "{tag}");
        assert_eq!(resp.headers()["etag"], etag.as_str());
        assert_eq!(resp.headers()["content-security-policy"], CSP);
        assert!(resp.bytes().await.unwrap().is_empty());
    }
    let resp = client
        .get(format!("{}/ui/", app.base))
        .header("if-none-match", "\"other\"")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);

    let head = client
        .head(format!("{}/ui/", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(head.headers()["etag"], etag.as_str());
}

#[tokio::test]
async fn every_console_file_is_served_with_its_type_and_its_own_tag() {
    let app = spawn_app().await;
    let files = console_files();
    assert!(files.contains(&"index.html".to_owned()));
    assert!(files.contains(&"vendor/uPlot.iife.min.js".to_owned()));
    let mut tags = BTreeSet::new();
    for file in &files {
        let resp = app.get(&format!("/ui/{file}")).await;
        assert_eq!(resp.status(), 200, "{file}");
        let ct = resp.headers()["content-type"].to_str().unwrap().to_owned();
        let expected = match file.rsplit('.').next().unwrap() {
            "html" => "text/html; charset=utf-8",
            "js" => "text/javascript; charset=utf-8",
            "css" => "text/css; charset=utf-8",
            _ => "",
        };
        if !expected.is_empty() {
            assert_eq!(ct, expected, "{file}");
        }
        assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
        assert_eq!(resp.headers()["content-security-policy"], CSP);
        tags.insert(resp.headers()["etag"].to_str().unwrap().to_owned());
        let on_disk =
            std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("ui").join(file)).unwrap();
        assert_eq!(resp.bytes().await.unwrap().as_ref(), on_disk, "{file}");
    }
    assert_eq!(tags.len(), files.len(), "each file has its own tag");
}

#[tokio::test]
async fn unknown_files_and_paths_out_of_the_folder_are_route_not_found() {
    let app = spawn_app().await;
    // Sent byte for byte (an HTTP client would resolve dot segments first).
    for path in [
        "/ui/nope.js",
        "/ui/vendor/",
        "/ui/views",
        "/ui//index.html",
        "/ui/./index.html",
        "/ui/%2e%2e/Cargo.toml",
        "/ui/..%2fCargo.toml",
        "/ui/vendor/..%2f..%2fCargo.toml",
        "/ui/%5c..%5cCargo.toml",
        "/ui/../Cargo.toml",
        "/ui/vendor/../../Cargo.toml",
        "/uiindex.html",
    ] {
        let (status, body) = raw_get(app.addr, path).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert!(
            body.contains("urn:neardup:problem:route-not-found"),
            "{path}: {body}"
        );
        assert!(!body.contains("[package]"), "{path}: {body}");
    }
    let resp = app
        .post_json("/ui/index.html", &serde_json::json!({}))
        .await;
    assert_eq!(resp.status(), 405);
    assert_eq!(resp.headers()["allow"], "GET,HEAD");
}

#[tokio::test]
async fn the_files_are_open_when_keys_are_configured_and_the_api_is_not() {
    let mut settings = test_settings();
    settings.auth.api_keys = vec![Secret::new("k-full")];
    let app = spawn_app_with(settings).await;
    let client = no_redirects();
    for path in ["/", "/ui", "/ui/", "/ui/app.js", "/ui/vendor/uPlot.min.css"] {
        let resp = client
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .unwrap();
        assert!(
            resp.status() == 200 || resp.status() == 307 || resp.status() == 308,
            "{path}: {}",
            resp.status()
        );
    }
    assert_problem(app.get("/collections").await, 401).await;
    // Unknown files are 404 without a key too: nothing behind /ui/ is secret.
    assert_problem(app.get("/ui/secret.txt").await, 404).await;
}

#[tokio::test]
async fn ui_enabled_false_leaves_ui_unrouted() {
    let mut settings = test_settings();
    settings.ui.enabled = false;
    let app = spawn_app_with(settings).await;
    let client = no_redirects();
    for path in ["/", "/ui", "/ui/", "/ui/app.js"] {
        let resp = client
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .unwrap();
        let body = assert_problem(resp, 404).await;
        assert_eq!(
            body["type"], "urn:neardup:problem:route-not-found",
            "{path}"
        );
    }
}

#[tokio::test]
async fn requests_for_files_are_counted_under_one_route_label() {
    let app = spawn_app().await;
    for file in ["app.js", "app.css", "index.html"] {
        assert_eq!(app.get(&format!("/ui/{file}")).await.status(), 200);
    }
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.lines().any(|l| l.contains(r#"route="/ui/{*path}""#)
            && l.contains(r#"status="200""#)
            && l.starts_with("neardup_http_requests_total")
            && l.ends_with(" 3")),
        "{metrics}"
    );
}

#[test]
fn the_console_is_not_part_of_the_api_document() {
    let spec: serde_yaml_ng::Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi.yaml"))
            .unwrap(),
    )
    .unwrap();
    let paths = spec["paths"].as_mapping().unwrap();
    assert!(paths
        .keys()
        .all(|p| !p.as_str().unwrap().starts_with("/ui")));
    let api: BTreeSet<_> = ROUTES.iter().collect();
    assert!(UI_ROUTES.iter().all(|r| !api.contains(r)));
}

/// Text from the server must never be parsed as HTML: no console script
/// uses an HTML sink (the CSP's Trusted Types would make one throw in the
/// browser; this catches it before).
#[test]
fn no_console_script_uses_an_html_sink() {
    for file in console_files() {
        if !file.ends_with(".js") || file.starts_with("vendor/") {
            continue;
        }
        let src =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ui").join(&file))
                .unwrap();
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "DOMParser",
            "createContextualFragment",
            "eval(",
            "new Function",
            "localStorage",
            "sessionStorage",
            "document.cookie",
        ] {
            assert!(!src.contains(sink), "ui/{file} uses {sink}");
        }
    }
}
