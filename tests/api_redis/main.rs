//! The API suites' core run again on the redis backend: the same test
//! files as `tests/api` (no copy), each test's server replaced by two
//! neardup nodes over one shared Redis Cluster (3 primaries, 3 replicas,
//! started once for this binary by `helpers::shared_cluster`), every write
//! sent to the first node and every read (`TestApp::get`) to the second.
//! Each test gets its own key prefix, so tests never see each other's data.

/// The suites address the default collection.
const COLLECTION: Option<&str> = None;
/// Two nodes over the shared Redis Cluster.
const REDIS: bool = true;

// Some helpers serve only suites this binary does not run.
#[path = "../api/helpers.rs"]
#[allow(dead_code)]
mod helpers;

#[path = "../api/analysis.rs"]
mod analysis;
#[path = "../api/auth.rs"]
mod auth;
#[path = "../api/boilerplate.rs"]
mod boilerplate;
#[path = "../api/collections.rs"]
mod collections;
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
// Not run here: texts.rs (snapshots, segment files and damaged files on
// disk: the memory backend's; stored texts in Redis are tested in
// texts.rs below), and the suites of the memory backend's own machinery
// (crash, disk_full, upgrade, reindex: refused on this backend).

mod due_index;
mod events;
mod failover;
mod passage_index;
mod recipe;
#[path = "boilerplate.rs"]
mod redis_boilerplate;
mod reindex;
mod texts;
mod unique;

/// The api suite's spec reader and schema checker, for what only a redis
/// node answers (its `/stats` storage object).
#[path = "../api/openapi"]
mod openapi {
    #[allow(dead_code)]
    mod checker;
    #[allow(dead_code)]
    mod spec;
    #[path = "../../api_redis/stats_schema.rs"]
    mod stats_schema;
}
