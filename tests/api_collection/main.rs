//! The API suites about one collection's routes, run again against a named
//! collection: the same test files as `tests/api` (no copy), with every
//! collection route addressed under `/collections/c1` (see
//! `helpers::route`), a collection created with the server's defaults by
//! `spawn_app`. Everything the unprefixed routes promise, a named
//! collection keeps.

/// The collection the suites run against.
const COLLECTION: Option<&str> = Some("c1");
/// On the memory backend (see tests/api_redis).
const REDIS: bool = false;

// Some helpers serve only suites this binary does not run.
#[path = "../api/helpers.rs"]
#[allow(dead_code)]
mod helpers;

#[path = "../api/analysis.rs"]
mod analysis;
#[path = "../api/boilerplate.rs"]
mod boilerplate;
#[path = "../api/concurrency.rs"]
mod concurrency;
#[path = "../api/documents.rs"]
mod documents;
#[path = "../api/duplicates.rs"]
mod duplicates;
#[path = "../api/errors.rs"]
mod errors;
#[path = "../api/explain.rs"]
mod explain;
#[path = "../api/filters.rs"]
mod filters;
#[path = "../api/hostile.rs"]
mod hostile;
#[path = "../api/originals.rs"]
mod originals;
#[path = "../api/passages.rs"]
mod passages;
#[path = "../api/retention.rs"]
mod retention;
#[path = "../api/review_decisions.rs"]
mod review_decisions;
#[path = "../api/review_exclude.rs"]
mod review_exclude;
#[path = "../api/review_queue.rs"]
mod review_queue;
#[path = "../api/scripts.rs"]
mod scripts;
#[path = "../api/similar.rs"]
mod similar;
#[path = "../api/snippets.rs"]
mod snippets;
#[path = "../api/webhooks.rs"]
mod webhooks;
