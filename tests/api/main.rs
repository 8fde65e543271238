//! The one integration-test binary: every test talks to a real server on a
//! random local port (see `helpers::spawn_app`).

/// The suites address the `default` collection (the unprefixed routes);
/// `tests/api_collection` runs the collection suites again against a named one.
const COLLECTION: Option<&str> = None;
/// The suites run on the memory backend here (see tests/api_redis).
const REDIS: bool = false;

mod helpers;

mod analysis;
mod auth;
mod boilerplate;
mod collections;
mod concurrency;
mod crash;
mod disk_full;
mod documents;
mod duplicates;
mod errors;
mod explain;
mod filters;
mod hostile;
mod hugepages;
mod openapi;
mod ops;
mod originals;
mod passages;
mod reindex;
mod retention;
mod review_crash;
mod review_decisions;
mod review_exclude;
mod review_queue;
mod scripts;
mod shedding;
mod similar;
mod snippets;
mod texts;
mod transfer;
mod ui;
mod upgrade;
mod webhooks;
mod webhooks_crash;
