//! Service state that is not HTTP: what the server keeps beside its
//! collections while it runs. The HTTP layer (`http/`) and the start-up and
//! timers (`app.rs`) share it; it knows nothing of requests or responses.
//!
//! - [`metrics`]: the Prometheus registry (one per server) and what each
//!   operation records into it;
//! - [`scans`]: whole-collection duplicate scans, one at a time on a pool of
//!   their own, and the page cache of their answers;
//! - [`events`]: the events a write produces (issue 45) and the cache of
//!   webhook subscriptions that decides them;
//! - [`review`]: the review queue's walk over a collection's documents
//!   (issue 46);
//! - [`webhooks`]: delivering them, signed per Standard Webhooks;
//! - [`snapshots`]: snapshots of every collection (the timer and
//!   `POST /admin/snapshot`), recorded in the metrics.

pub mod events;
pub mod metrics;
pub mod review;
pub mod scans;
pub mod snapshots;
pub mod webhooks;
