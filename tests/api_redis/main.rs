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

#[path = "../api/collections.rs"]
mod collections;
#[path = "../api/concurrency.rs"]
mod concurrency;
#[path = "../api/documents.rs"]
mod documents;
#[path = "../api/errors.rs"]
mod errors;
#[path = "../api/hostile.rs"]
mod hostile;
#[path = "../api/similar.rs"]
mod similar;
// Not yet on the redis backend (failing when included, 2026-11-23):
// duplicates.rs (7 of 9 pass: pairs and groups equal brute force and the
// CLI; the 2 that fail check the 60 s page cache, which the redis path does
// not have yet: each page rescans), retention.rs (1 of its
// tests: /duplicates/pairs' `documents` counts expired, unpurged records),
// explain.rs (2 tests: explain by id needs stored texts).

mod failover;
mod limits;
