//! The web console: the files of `ui/` (plain ES modules and the vendored
//! libraries under `ui/vendor/`), built into the binary at compile time
//! (in debug builds rust-embed reads them from disk, so an edit needs no
//! rebuild) and served at `/ui/` when `ui.enabled`.
//!
//! - `/ui` answers 308 to `/ui/`: a page served without the slash would
//!   resolve its relative module imports against `/`.
//! - `/` answers 307 to `/ui/`: someone opening the server's address finds
//!   the console (temporary: with the console disabled later, `/` is 404).
//! - `/ui/` is `index.html`; `/ui/{*path}` is that file, or 404
//!   `route-not-found` like any unrouted path.
//! - Every file carries a strong `ETag` (the SHA-256 of its content) and
//!   `Cache-Control: no-cache`: a browser revalidates each load and gets
//!   304 while the binary is the same, so an upgrade never mixes versions.
//! - A strict Content-Security-Policy: scripts, styles, images and API
//!   calls from this origin only, no inline script or style, no framing,
//!   no forms, no plugins, and Trusted Types required with no policy, so
//!   no string ever reaches an HTML sink. `X-Content-Type-Options: nosniff` and
//!   `Referrer-Policy: no-referrer` too.
//!
//! The files are open (no key): the console asks for a key and sends it
//! on its API calls, which the access layer checks like any other client's.

use super::error::ApiError;
use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use rust_embed::Embed;

/// The console's files, `ui/` at the crate root.
#[derive(Embed)]
#[folder = "ui/"]
pub struct Assets;

/// The Content-Security-Policy of every console file.
/// Trusted Types are required with no policy allowed, so an assignment of
/// a string to an HTML sink (`innerHTML` and the like) throws: untrusted
/// text can only ever become text.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'; \
    require-trusted-types-for 'script'; trusted-types 'none'";

/// The page the console starts from.
const INDEX: &str = "index.html";

/// `GET /`: 307 to `/ui/` (not cached for good: `ui.enabled` may change).
pub async fn root() -> Response {
    (
        StatusCode::TEMPORARY_REDIRECT,
        [(header::LOCATION, HeaderValue::from_static("/ui/"))],
    )
        .into_response()
}

/// `GET /ui`: 308 to `/ui/`.
pub async fn redirect() -> Response {
    (
        StatusCode::PERMANENT_REDIRECT,
        [(header::LOCATION, HeaderValue::from_static("/ui/"))],
    )
        .into_response()
}

/// `GET /ui/`: the console's page.
pub async fn index(headers: HeaderMap) -> Response {
    serve(INDEX, &headers)
}

/// `GET /ui/{*path}`: one of the console's files.
pub async fn file(Path(path): Path<String>, headers: HeaderMap) -> Response {
    serve(&path, &headers)
}

fn serve(path: &str, headers: &HeaderMap) -> Response {
    // rust-embed keys are plain relative paths; nothing with a `..`, an
    // empty segment or a backslash names one, so such paths are 404
    // without asking (in debug builds it reads from disk).
    let plain = !path.is_empty()
        && !path.contains('\\')
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..");
    let Some(file) = plain.then(|| Assets::get(path)).flatten() else {
        return ApiError::RouteNotFound(format!("GET /ui/{path}")).into_response();
    };
    let etag = format!("\"{}\"", hex(&file.metadata.sha256_hash()));
    let mut out = HeaderMap::new();
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    out.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    out.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    out.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if let Ok(v) = HeaderValue::from_str(&etag) {
        out.insert(header::ETAG, v);
    }
    if if_none_match(headers, &etag) {
        return (StatusCode::NOT_MODIFIED, out).into_response();
    }
    let mime = content_type(path, file.metadata.mimetype());
    if let Ok(v) = HeaderValue::from_str(&mime) {
        out.insert(header::CONTENT_TYPE, v);
    }
    (StatusCode::OK, out, file.data.into_owned()).into_response()
}

/// The media type to send: text types say their charset (the files are UTF-8).
fn content_type(path: &str, guessed: &str) -> String {
    let guessed = if path.ends_with(".mjs") || path.ends_with(".js") {
        "text/javascript"
    } else {
        guessed
    };
    if guessed.starts_with("text/") || guessed == "application/json" {
        format!("{guessed}; charset=utf-8")
    } else {
        guessed.to_owned()
    }
}

/// Whether `If-None-Match` names `etag` (or is `*`); weak tags compare
/// weakly, as RFC 9110 asks for this header.
fn if_none_match(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim())
        .any(|t| t == "*" || t.trim_start_matches("W/") == etag)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_and_every_vendored_file_are_embedded() {
        assert!(Assets::get(INDEX).is_some());
        assert!(Assets::iter().any(|p| p.starts_with("vendor/")));
    }

    #[test]
    fn if_none_match_compares_weakly_and_accepts_lists_and_star() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::IF_NONE_MATCH, v.parse().unwrap());
            h
        };
        assert!(if_none_match(&with("\"ab\""), "\"ab\""));
        assert!(if_none_match(&with("W/\"ab\""), "\"ab\""));
        assert!(if_none_match(&with("\"x\", \"ab\""), "\"ab\""));
        assert!(if_none_match(&with("*"), "\"ab\""));
        assert!(!if_none_match(&with("\"abc\""), "\"ab\""));
        assert!(!if_none_match(&HeaderMap::new(), "\"ab\""));
    }

    #[test]
    fn text_types_say_utf8() {
        assert_eq!(
            content_type("app.js", "application/javascript"),
            "text/javascript; charset=utf-8"
        );
        assert_eq!(content_type("a.css", "text/css"), "text/css; charset=utf-8");
        assert_eq!(content_type("a.png", "image/png"), "image/png");
    }
}
