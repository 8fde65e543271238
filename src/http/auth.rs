//! Access control: `Authorization: Bearer <key>` against `auth.api_keys`
//! (every route), `auth.read_only_keys` (GET and HEAD only) and
//! `[[auth.keys]]` (keys limited to some collections and/or to reading).
//!
//! With no key configured everything is open. Otherwise every route but
//! the probes (`/healthz`, `/readyz`), the OpenAPI document
//! (`/openapi.json`) and `/metrics` when `auth.protect_metrics = false`
//! needs a key: none, a malformed header or an unknown key → 401 with
//! `WWW-Authenticate`; a read-only key on anything that is not a read
//! (GET, HEAD, and the POSTs that carry a query: `/similar`, `/explain`,
//! see `routes::READ_POSTS`) → 403. A key
//! with a collections list may use only those collections (the unprefixed
//! document routes are the collection `default`); on any other collection,
//! on creating, changing or deleting collections, and on the server-wide
//! routes (`/metrics`, `/admin/...`) it gets 403, and `GET /collections`
//! lists only its own. Keys are compared in constant time against every
//! configured key, and are never logged.

use super::error::ApiError;
use super::routes::{collection_of, is_open, reads_by_post};
use super::state::AppState;
use crate::collections::DEFAULT_COLLECTION;
use crate::config::{AuthSettings, Secret};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use subtle::{Choice, ConditionallySelectable, ConstantTimeEq};

/// The collections a request's key may use, attached to the request (an
/// open server, or a key without a list: every collection).
#[derive(Clone, Debug, Default)]
pub enum Scope {
    #[default]
    All,
    Only(Arc<[String]>),
}

impl Scope {
    pub fn allows(&self, collection: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Only(names) => names.iter().any(|n| n == collection),
        }
    }
}

/// The name of the request's key (`[[auth.keys]] name`), attached to the
/// request beside its [`Scope`] when the key has one: who decided, on a
/// review decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyName(pub Arc<str>);

/// What a presented key may do.
#[derive(Clone, Debug, PartialEq)]
pub struct Grant {
    pub read_only: bool,
    /// The key's name, if it has one.
    pub name: Option<Arc<str>>,
    /// The collections it may use; `None`: every one, and it may manage them.
    pub collections: Option<Vec<String>>,
}

/// What a request is for, as far as scopes go.
#[derive(Debug, PartialEq, Eq)]
enum Target<'a> {
    /// A collection's documents, queries or description.
    Collection(&'a str),
    /// `GET /collections`: listed by scope.
    List,
    /// Creating, changing or deleting a collection.
    Manage,
    /// Server-wide: `/metrics`, `/admin/...`.
    Server,
    /// Nothing a scope restricts (an unrouted path: 404 follows).
    Other,
}

fn target<'a>(method: &Method, path: &'a str) -> Target<'a> {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segs.as_slice() {
        ["collections"] | ["collections", ""]
            if method == Method::GET || method == Method::HEAD =>
        {
            Target::List
        }
        ["collections"] | ["collections", ""] => Target::Manage,
        ["collections", name] if method == Method::GET || method == Method::HEAD => {
            Target::Collection(name)
        }
        ["collections", _] => Target::Manage,
        // A new recipe is a change to the collection, not a use of it.
        ["collections", _, "reindex"] => Target::Manage,
        ["collections", name, ..] => Target::Collection(name),
        // The unprefixed collection routes, from the router's one list.
        _ if collection_of(path).is_some() => Target::Collection(DEFAULT_COLLECTION),
        ["metrics"] | ["admin", ..] => Target::Server,
        _ => Target::Other,
    }
}

/// The middleware: runs before the readiness gate, inside the metrics layer.
pub async fn require_key(State(app): State<AppState>, mut req: Request, next: Next) -> Response {
    let auth = &app.config.auth;
    if !needs_key(auth, req.uri().path()) {
        return next.run(req).await;
    }
    match authorize(auth, req.method(), req.uri().path(), req.headers()) {
        Ok((scope, name)) => {
            req.extensions_mut().insert(scope);
            if let Some(name) = name {
                req.extensions_mut().insert(KeyName(name));
            }
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}

fn needs_key(auth: &AuthSettings, path: &str) -> bool {
    let metrics_open = path == "/metrics" && !auth.protect_metrics;
    auth.enabled() && !is_open(path) && !metrics_open
}

/// Check the request's credentials for `method` on `path`; the scope the
/// request runs with, and its key's name.
fn authorize(
    auth: &AuthSettings,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
) -> Result<(Scope, Option<Arc<str>>), ApiError> {
    let token = bearer_token(headers)?;
    let grant = access(auth, token).ok_or(ApiError::Unauthorized {
        detail: "the bearer token is not a valid API key",
        key_sent: true,
    })?;
    let reads = method == Method::GET
        || method == Method::HEAD
        || (method == Method::POST && reads_by_post(path));
    if grant.read_only && !reads {
        return Err(ApiError::Forbidden(
            "this key is read-only: it may only read (GET and HEAD routes, POST /similar, /explain, /passages and the analyses)",
        ));
    }
    let name = grant.name;
    let Some(names) = grant.collections else {
        return Ok((Scope::All, name));
    };
    let scope = match target(method, path) {
        Target::Collection(name) if !names.iter().any(|n| n == name) => Err(ApiError::Forbidden(
            "this key may not use this collection (it is not in the key's collections list)",
        )),
        Target::Manage => Err(ApiError::Forbidden(
            "creating, changing or deleting collections needs a key without a collections list",
        )),
        Target::Server => Err(ApiError::Forbidden(
            "server-wide routes need a key without a collections list",
        )),
        _ => Ok(Scope::Only(names.into())),
    }?;
    Ok((scope, name))
}

/// The token of `Authorization: Bearer <token>` (scheme case-insensitive).
fn bearer_token(headers: &HeaderMap) -> Result<&[u8], ApiError> {
    let missing = |detail| ApiError::Unauthorized {
        detail,
        key_sent: false,
    };
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = values
        .next()
        .ok_or_else(|| missing("this route needs an Authorization: Bearer <key> header"))?;
    if values.next().is_some() {
        return Err(missing("send exactly one Authorization header"));
    }
    let value = value.as_bytes();
    let malformed = || missing("the Authorization header must be Bearer <key>");
    let (scheme, rest) = match value.iter().position(|&b| b == b' ') {
        Some(i) => (&value[..i], &value[i + 1..]),
        None => (value, &[][..]),
    };
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return Err(malformed());
    }
    let token = rest.trim_ascii();
    if token.is_empty() {
        return Err(malformed());
    }
    Ok(token)
}

/// The grant `token` carries, if any. Compares against every configured
/// key without stopping at a match (the matched position is selected in
/// constant time too); only a length mismatch is decided faster (by
/// `subtle`'s slice comparison), which reveals key lengths at most.
pub fn access(auth: &AuthSettings, token: &[u8]) -> Option<Grant> {
    let keys: Vec<(&Secret, Grant)> = auth
        .api_keys
        .iter()
        .map(|k| {
            (
                k,
                Grant {
                    read_only: false,
                    name: None,
                    collections: None,
                },
            )
        })
        .chain(auth.read_only_keys.iter().map(|k| {
            (
                k,
                Grant {
                    read_only: true,
                    name: None,
                    collections: None,
                },
            )
        }))
        .chain(auth.keys.iter().map(|k| {
            (
                &k.key,
                Grant {
                    read_only: k.read_only,
                    name: k.name.as_deref().map(Arc::from),
                    collections: k.collections.clone(),
                },
            )
        }))
        .collect();
    let mut found = Choice::from(0);
    let mut index = 0u32;
    for (i, (key, _)) in keys.iter().enumerate() {
        let hit = key.expose().as_bytes().ct_eq(token);
        index.conditional_assign(&(i as u32), hit);
        found |= hit;
    }
    bool::from(found).then(|| keys[index as usize].1.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use axum::body::Body;
    use std::sync::{Arc, Mutex};
    use tower::ServiceExt;

    fn auth() -> AuthSettings {
        AuthSettings {
            api_keys: vec![Secret::new("full-one"), Secret::new("full-two")],
            read_only_keys: vec![Secret::new("reader")],
            protect_metrics: true,
            keys: vec![crate::config::ScopedKey {
                key: Secret::new("scoped"),
                collections: Some(vec!["bodies".into()]),
                read_only: false,
                name: Some("Zoë (équipe « annonces »)".into()),
            }],
        }
    }

    #[test]
    fn requests_are_sorted_by_what_a_scope_restricts() {
        let get = Method::GET;
        assert_eq!(target(&get, "/collections"), Target::List);
        assert_eq!(target(&Method::PUT, "/collections/b"), Target::Manage);
        assert_eq!(target(&Method::DELETE, "/collections/b"), Target::Manage);
        assert_eq!(target(&get, "/collections/b"), Target::Collection("b"));
        assert_eq!(
            target(&Method::POST, "/collections/b/documents"),
            Target::Collection("b")
        );
        assert_eq!(target(&get, "/similar"), Target::Collection("default"));
        assert_eq!(target(&get, "/documents/x"), Target::Collection("default"));
        assert_eq!(
            target(&Method::POST, "/explain"),
            Target::Collection("default")
        );
        assert_eq!(target(&Method::POST, "/admin/snapshot"), Target::Server);
        assert_eq!(target(&get, "/nowhere"), Target::Other);
    }

    #[test]
    fn a_token_matches_any_configured_key_and_nothing_else() {
        let a = auth();
        let full = Some(Grant {
            read_only: false,
            name: None,
            collections: None,
        });
        assert_eq!(access(&a, b"full-one"), full);
        assert_eq!(access(&a, b"full-two"), full);
        assert_eq!(
            access(&a, b"reader"),
            Some(Grant {
                read_only: true,
                name: None,
                collections: None
            })
        );
        assert_eq!(
            access(&a, b"scoped"),
            Some(Grant {
                read_only: false,
                name: Some("Zoë (équipe « annonces »)".into()),
                collections: Some(vec!["bodies".into()])
            })
        );
        for wrong in [
            &b"full-on"[..],
            b"full-one ",
            b"full-onf",
            b"FULL-ONE",
            b"read",
            b"",
        ] {
            assert_eq!(
                access(&a, wrong),
                None,
                "{:?}",
                String::from_utf8_lossy(wrong)
            );
        }
    }

    #[test]
    fn only_a_bearer_header_with_a_token_is_accepted() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, v.parse().unwrap());
            h
        };
        assert_eq!(bearer_token(&with("Bearer abc")).unwrap(), b"abc");
        assert_eq!(bearer_token(&with("bearer abc")).unwrap(), b"abc");
        for bad in [
            "Basic YWxhZGRpbjpvcGVu",
            "Bearer",
            "Bearer ",
            "Bearerabc",
            "abc",
        ] {
            let e = bearer_token(&with(bad)).unwrap_err();
            assert!(
                matches!(
                    e,
                    ApiError::Unauthorized {
                        key_sent: false,
                        ..
                    }
                ),
                "{bad}: {e:?}"
            );
        }
        assert!(bearer_token(&HeaderMap::new()).is_err());
    }

    /// A `MakeWriter` collecting everything logged.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn auth_runs_before_the_readiness_gate_and_the_trace_log_never_contains_a_key() {
        let captured = Captured::default();
        let sink = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::FULL)
            .with_writer(move || sink.clone())
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);

        let mut settings = Settings::default();
        let dir = tempfile::tempdir().unwrap();
        settings.storage.data_dir = dir.path().to_owned();
        settings.auth.api_keys = vec![Secret::new("sekrit-full-key")];
        let config = settings.validate().unwrap();
        let collections = std::sync::Arc::new(
            crate::collections::Collections::open(
                &config,
                std::sync::Arc::new(crate::engine::SystemClock),
            )
            .unwrap(),
        );
        let state = AppState::new(config, collections);
        let router = crate::http::router(state);
        for (path, key) in [
            ("/stats", "sekrit-full-key"),
            ("/stats", "sekrit-wrong-key"),
        ] {
            let req = Request::builder()
                .uri(path)
                .header(header::AUTHORIZATION, format!("Bearer {key}"))
                .body(Body::empty())
                .unwrap();
            let resp = router.clone().oneshot(req).await.unwrap();
            // Never restored here: a right key passes auth and meets the
            // readiness gate (503); a wrong one is stopped before it (401).
            let expected = if key.contains("full") { 503 } else { 401 };
            assert_eq!(resp.status().as_u16(), expected, "{path} with {key}");
        }
        let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(log.contains("/stats"), "the request was logged: {log}");
        assert!(!log.contains("sekrit"), "a key was logged: {log}");
        assert!(!log.to_ascii_lowercase().contains("authorization"), "{log}");
    }
}
