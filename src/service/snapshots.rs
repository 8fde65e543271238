//! Snapshots of every collection: the periodic timer (only those written
//! since their last snapshot) and `POST /admin/snapshot` (all of them),
//! each recorded in the metrics.

use super::metrics::Metrics;
use crate::backend::{BackendError, SnapshotInfo};
use crate::collections::{Collection, Collections};
use std::sync::Arc;

/// Snapshot every collection (with `only_if_changed`, only those written
/// since their last snapshot), off the async workers in a task of its own,
/// so a request that stops waiting does not stop it. Returns what was
/// written, collection by collection; a failure is logged per collection
/// and the first one is returned once every collection was tried.
pub async fn snapshot(
    collections: &Arc<Collections>,
    metrics: &Arc<Metrics>,
    only_if_changed: bool,
) -> Result<Vec<(Arc<Collection>, SnapshotInfo)>, BackendError> {
    let collections = Arc::clone(collections);
    let metrics = Arc::clone(metrics);
    let task = tokio::task::spawn_blocking(move || {
        let mut written = Vec::new();
        let mut failed = None;
        for c in collections.list() {
            let Some(backend) = c.backend() else { continue };
            match backend.snapshot(only_if_changed) {
                Ok(None) => {}
                Ok(Some(info)) => {
                    metrics.observe_snapshot(c.name.as_str(), &info);
                    written.push((Arc::clone(&c), info));
                }
                Err(e) => {
                    metrics.observe_snapshot_failure(c.name.as_str());
                    tracing::error!(collection = %c.name, error = %e, "snapshot failed; the log still holds every write");
                    failed.get_or_insert(e);
                }
            }
        }
        (written, failed)
    });
    let (written, failed) = task
        .await
        .map_err(|e| BackendError::Internal(format!("snapshot task failed: {e}")))?;
    match failed {
        Some(e) => Err(e),
        None => Ok(written),
    }
}
