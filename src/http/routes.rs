//! What the router serves, and the routes the layers treat apart: one
//! list each, read by the router, the layers and the tests.

/// The request id header, set (or kept) by the outermost layer.
pub const REQUEST_ID: &str = "x-request-id";

/// Every (method, path template) the router serves. `openapi.yaml` must
/// list exactly these; the integration tests check both directions.
pub const ROUTES: &[(&str, &str)] = &[
    ("POST", "/documents"),
    ("POST", "/documents/batch"),
    ("GET", "/documents/{id}"),
    ("PUT", "/documents/{id}"),
    ("DELETE", "/documents/{id}"),
    ("GET", "/similar"),
    ("POST", "/similar"),
    ("GET", "/compare"),
    ("POST", "/explain"),
    ("POST", "/passages"),
    ("POST", "/snippets"),
    ("GET", "/templates"),
    ("GET", "/templates/{id}"),
    ("PUT", "/templates/{id}"),
    ("DELETE", "/templates/{id}"),
    ("GET", "/boilerplate"),
    ("POST", "/analysis/histogram"),
    ("POST", "/analysis/accuracy"),
    ("GET", "/duplicates"),
    ("GET", "/duplicates/pairs"),
    ("GET", "/duplicates/drop-list"),
    ("GET", "/stats"),
    ("GET", "/export"),
    ("POST", "/import"),
    ("GET", "/webhooks"),
    ("POST", "/webhooks"),
    ("GET", "/webhooks/{id}"),
    ("DELETE", "/webhooks/{id}"),
    ("GET", "/webhooks/{id}/failed"),
    ("POST", "/webhooks/{id}/failed/retry"),
    ("GET", "/events"),
    ("GET", "/review/queue"),
    ("GET", "/review/precision"),
    ("GET", "/review/decisions"),
    ("PUT", "/review/decisions"),
    ("GET", "/review/decision"),
    ("DELETE", "/review/decision"),
    ("GET", "/collections"),
    ("GET", "/collections/{name}"),
    ("PUT", "/collections/{name}"),
    ("PATCH", "/collections/{name}"),
    ("DELETE", "/collections/{name}"),
    ("POST", "/collections/{name}/reindex"),
    ("POST", "/collections/{name}/documents"),
    ("POST", "/collections/{name}/documents/batch"),
    ("GET", "/collections/{name}/documents/{id}"),
    ("PUT", "/collections/{name}/documents/{id}"),
    ("DELETE", "/collections/{name}/documents/{id}"),
    ("GET", "/collections/{name}/similar"),
    ("POST", "/collections/{name}/similar"),
    ("GET", "/collections/{name}/compare"),
    ("POST", "/collections/{name}/explain"),
    ("POST", "/collections/{name}/passages"),
    ("POST", "/collections/{name}/snippets"),
    ("GET", "/collections/{name}/templates"),
    ("GET", "/collections/{name}/templates/{id}"),
    ("PUT", "/collections/{name}/templates/{id}"),
    ("DELETE", "/collections/{name}/templates/{id}"),
    ("GET", "/collections/{name}/boilerplate"),
    ("POST", "/collections/{name}/analysis/histogram"),
    ("POST", "/collections/{name}/analysis/accuracy"),
    ("GET", "/collections/{name}/duplicates"),
    ("GET", "/collections/{name}/duplicates/pairs"),
    ("GET", "/collections/{name}/duplicates/drop-list"),
    ("GET", "/collections/{name}/stats"),
    ("GET", "/collections/{name}/export"),
    ("POST", "/collections/{name}/import"),
    ("GET", "/collections/{name}/webhooks"),
    ("POST", "/collections/{name}/webhooks"),
    ("GET", "/collections/{name}/webhooks/{id}"),
    ("DELETE", "/collections/{name}/webhooks/{id}"),
    ("GET", "/collections/{name}/webhooks/{id}/failed"),
    ("POST", "/collections/{name}/webhooks/{id}/failed/retry"),
    ("GET", "/collections/{name}/events"),
    ("GET", "/collections/{name}/review/queue"),
    ("GET", "/collections/{name}/review/precision"),
    ("GET", "/collections/{name}/review/decisions"),
    ("PUT", "/collections/{name}/review/decisions"),
    ("GET", "/collections/{name}/review/decision"),
    ("DELETE", "/collections/{name}/review/decision"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
    ("POST", "/admin/snapshot"),
];

/// The web console's files (`ui.enabled`): served, but not part of the
/// API, so not in `ROUTES` nor in `openapi.yaml` (which describes the JSON
/// API the console itself calls); open without a key (see
/// `SPECIAL_ROUTES`). The tests check they are routed exactly when the
/// console is enabled.
/// `/` sends a browser to the console (404 without it).
pub const UI_ROUTES: &[(&str, &str)] = &[
    ("GET", "/"),
    ("GET", "/ui"),
    ("GET", "/ui/"),
    ("GET", "/ui/{*path}"),
];

/// The routes every collection serves, unprefixed for `default` and under
/// `/collections/{name}` for each collection.
pub const COLLECTION_ROUTES: &[&str] = &[
    "/documents",
    "/documents/batch",
    "/documents/{id}",
    "/similar",
    "/compare",
    "/explain",
    "/passages",
    "/snippets",
    "/templates",
    "/templates/{id}",
    "/boilerplate",
    "/analysis/histogram",
    "/analysis/accuracy",
    "/duplicates",
    "/duplicates/pairs",
    "/duplicates/drop-list",
    "/stats",
    "/export",
    "/import",
    "/webhooks",
    "/webhooks/{id}",
    "/webhooks/{id}/failed",
    "/webhooks/{id}/failed/retry",
    "/events",
    "/review/queue",
    "/review/precision",
    "/review/decisions",
    "/review/decision",
];

/// The routes that take query parameters (a collection route unprefixed:
/// the same under `/collections/{name}`); each refuses the ones it does
/// not know. Every other route of [`ROUTES`] but the probes, the metrics
/// and the document ([`SPECIAL_ROUTES`]) takes none and refuses any
/// ([`refuses_query`]): no query string is silently ignored.
pub const QUERY_ROUTES: &[(&str, &str)] = &[
    ("POST", "/documents"),
    ("POST", "/documents/batch"),
    ("GET", "/documents/{id}"),
    ("GET", "/similar"),
    ("GET", "/compare"),
    ("GET", "/duplicates"),
    ("GET", "/duplicates/pairs"),
    ("GET", "/duplicates/drop-list"),
    ("GET", "/boilerplate"),
    ("GET", "/webhooks/{id}/failed"),
    ("GET", "/events"),
    ("GET", "/review/queue"),
    ("GET", "/review/precision"),
    ("GET", "/review/decisions"),
    ("GET", "/review/decision"),
    ("DELETE", "/review/decision"),
];

/// Whether a request routed to `method` `route` (its template) must come
/// without query parameters. A method the route does not serve is left
/// to the router's 405.
pub fn refuses_query(method: &str, route: &str) -> bool {
    if !ROUTES.contains(&(method, route)) || special(route).is_some() {
        return false;
    }
    let unprefixed = route
        .strip_prefix("/collections/{name}")
        .filter(|rest| COLLECTION_ROUTES.contains(rest))
        .unwrap_or(route);
    !QUERY_ROUTES.contains(&(method, unprefixed))
}

/// Collection routes that only read although they are POSTs (the query
/// travels in the body): read-only keys may call them.
pub const READ_POSTS: &[&str] = &[
    "/similar",
    "/explain",
    "/passages",
    "/snippets",
    "/analysis/histogram",
    "/analysis/accuracy",
];

/// Whether a POST to `path` only reads (a [`READ_POSTS`] route, of
/// `default` or under `/collections/{name}`).
pub fn reads_by_post(path: &str) -> bool {
    let rest = match path.strip_prefix("/collections/") {
        Some(after) => match after.find('/') {
            Some(i) => &after[i..],
            None => return false,
        },
        None => path,
    };
    READ_POSTS.contains(&rest)
}

/// Changes to a collection under `/collections/{name}/` that are not
/// collection routes: no unprefixed twin (the `default` collection's recipe
/// comes from the configuration), and a key needs no `collections` list.
pub const MANAGEMENT_ROUTES: &[&str] = &["/collections/{name}/reindex"];

/// A route treated apart from the rest by the layers.
#[derive(Clone, Copy, Debug)]
pub struct SpecialRoute {
    pub path: &'static str,
    /// Answered without a key even when keys are configured (`/metrics`
    /// follows `auth.protect_metrics` instead).
    pub open: bool,
    /// Answered while the index is being restored.
    pub while_restoring: bool,
    /// Answered even when `server.max_concurrent_requests` are in flight.
    pub never_shed: bool,
}

/// The probes, the metrics, this server's OpenAPI document and the web
/// console's files: the one list the layers (and the tests) take these
/// exceptions from. A path ending in `{*path}` covers everything under it.
pub const SPECIAL_ROUTES: &[SpecialRoute] = &[
    SpecialRoute {
        path: "/healthz",
        open: true,
        while_restoring: true,
        never_shed: true,
    },
    SpecialRoute {
        path: "/readyz",
        open: true,
        while_restoring: true,
        never_shed: true,
    },
    SpecialRoute {
        path: "/metrics",
        open: false,
        while_restoring: true,
        never_shed: true,
    },
    SpecialRoute {
        path: "/openapi.json",
        open: true,
        while_restoring: true,
        never_shed: false,
    },
    // The console's files: the page loads (and says the server is
    // restoring) before the API it calls is ready; `/` redirects to it.
    SpecialRoute {
        path: "/",
        open: true,
        while_restoring: true,
        never_shed: false,
    },
    SpecialRoute {
        path: "/ui",
        open: true,
        while_restoring: true,
        never_shed: false,
    },
    SpecialRoute {
        path: "/ui/",
        open: true,
        while_restoring: true,
        never_shed: false,
    },
    SpecialRoute {
        path: "/ui/{*path}",
        open: true,
        while_restoring: true,
        never_shed: false,
    },
];

fn special(path: &str) -> Option<&'static SpecialRoute> {
    SPECIAL_ROUTES
        .iter()
        .find(|r| match r.path.strip_suffix("{*path}") {
            Some(prefix) => path.len() > prefix.len() && path.starts_with(prefix),
            None => r.path == path,
        })
}

/// Served without a key whatever the configuration (`/metrics` aside).
pub fn is_open(path: &str) -> bool {
    special(path).is_some_and(|r| r.open)
}

/// Served while the index is being restored.
pub fn served_while_restoring(path: &str) -> bool {
    special(path).is_some_and(|r| r.while_restoring)
}

/// Never refused by the concurrency limit.
pub fn never_shed(path: &str) -> bool {
    special(path).is_some_and(|r| r.never_shed)
}

/// The collection a request path is for: the `{name}` of
/// `/collections/{name}/...`, `default` for the unprefixed collection
/// routes, `None` for the rest.
pub fn collection_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix('/')?;
    if let Some(after) = rest.strip_prefix("collections/") {
        let name = after.split('/').next().unwrap_or("");
        return (!name.is_empty()).then_some(name);
    }
    let first = rest.split('/').next().unwrap_or("");
    COLLECTION_ROUTES
        .iter()
        .any(|r| r.trim_start_matches('/').split('/').next() == Some(first))
        .then_some(crate::collections::DEFAULT_COLLECTION)
}

#[cfg(test)]
mod tests {
    use super::collection_of;

    #[test]
    fn a_path_names_its_collection() {
        assert_eq!(collection_of("/collections/bodies/similar"), Some("bodies"));
        assert_eq!(collection_of("/collections/bodies"), Some("bodies"));
        assert_eq!(collection_of("/collections"), None);
        assert_eq!(collection_of("/similar"), Some("default"));
        assert_eq!(collection_of("/documents/x/y"), Some("default"));
        assert_eq!(collection_of("/metrics"), None);
        assert!(super::reads_by_post("/similar"));
        assert!(super::reads_by_post("/collections/b/explain"));
        assert!(!super::reads_by_post("/collections/explain"));
        assert!(!super::reads_by_post("/documents"));
        assert!(!super::reads_by_post("/collections/b/documents"));
        assert_eq!(collection_of("/healthz"), None);
        assert_eq!(collection_of("/ui/app.js"), None);
    }

    #[test]
    fn the_console_files_are_open_and_served_while_restoring_nothing_else_is() {
        use super::{is_open, never_shed, served_while_restoring};
        for path in ["/", "/ui", "/ui/", "/ui/app.js", "/ui/vendor/uPlot.esm.js"] {
            assert!(is_open(path), "{path}");
            assert!(served_while_restoring(path), "{path}");
            assert!(!never_shed(path), "{path}");
        }
        for path in [
            "/uix",
            "/u",
            "/stats",
            "/documents/ui",
            "/collections/ui/stats",
        ] {
            assert!(!is_open(path), "{path}");
        }
    }
}
