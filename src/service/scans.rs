//! [`ScanScheduler`]: whole-index duplicate scans, one at a time, on a
//! pool of their own, and the page cache of the last computed groups.
//!
//! **Scans are not requests.** A scan runs on a rayon pool of its own (one
//! thread per core, plus the one that hands results on; built when the
//! first scan needs it), so it neither blocks the async workers nor starves
//! batch ingest of its pool. One scan runs at a time: a scan holds an owned
//! permit for exactly as long as it runs. The scan behind a page of groups
//! ([`ScanScheduler::groups`]) is a task of its own: it stores its result
//! in the page cache whether or not the request that started it still
//! waits, concurrent requests for the same groups wait for that one scan,
//! and a request that stops waiting learns when to come back.
//!
//! **Freshness.** The cache holds the last few computed answers (one per
//! collection and query, [`CACHED_ANSWERS`] at most). A first page
//! reuses one only if nothing was written since its scan started, or if a
//! request was told to come back for it (a 503 `scan-in-progress`) and it
//! finished less than the caller's `recent` window ago; following pages
//! reuse it for [`PAGE_CACHE_SECS`], so a walk through the pages sees one
//! consistent answer.

use super::metrics::Metrics;
use crate::backend::Backend;
use crate::collections::Collection;
use crate::engine::{ExcludedPairs, FilterSpec, Groups, Measure, Threshold};
use futures_util::future::{BoxFuture, FutureExt, Shared};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long following pages reuse a computation of the groups.
pub const PAGE_CACHE_SECS: u64 = 60;
/// Computed answers kept (the oldest goes first).
pub const CACHED_ANSWERS: usize = 8;

/// The groups at one (threshold, min_size), or why the scan failed.
type ScanResult = Result<Arc<Groups>, Arc<str>>;

/// What a page request asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupsKey {
    /// The collection's `id` (unique for the process, so a collection
    /// created again under an old name never sees the old answers).
    pub collection: u64,
    pub threshold: f64,
    /// Jaccard, or (any containment measure) either text inside the other.
    pub measure: Measure,
    /// Over which shingles (`content`: boilerplate left out).
    pub score: crate::engine::Score,
    pub min_size: usize,
    /// The pairs admitted (`filter`, `exclude_same`): part of the key, so
    /// a filtered answer is cached apart from the unfiltered one.
    pub filter: Option<Arc<FilterSpec>>,
    /// The pairs left out (judged not duplicates, with
    /// `review.exclude_not_duplicates`; `None`: none). Keyed by the set
    /// itself (its length and fingerprint, then its pairs), not by a
    /// version of the decisions: a new, edited or deleted `not_duplicate`
    /// decision changes the key, so no answer computed before it is
    /// served, while decisions of other verdicts change nothing.
    pub excluded: Option<Arc<ExcludedPairs>>,
}

/// Why [`ScanScheduler::groups`] has no groups to give.
#[derive(Debug)]
pub enum ScanError {
    /// The scan outlasts the caller's wait; it goes on and fills the cache.
    InProgress { retry_after_secs: u64 },
    /// The scan itself failed (logged where it failed).
    Failed(Arc<str>),
    /// The storage could not say what was written (unavailable now).
    Storage(crate::backend::BackendError),
}

pub struct ScanScheduler {
    /// Built by the first scan: a server that never scans has no threads for it.
    pool: OnceLock<rayon::ThreadPool>,
    /// One scan at a time: a second waits rather than halving both. Scans
    /// own their permit, so it is held exactly as long as the scan runs.
    permits: Arc<Semaphore>,
    /// The last computed groups and the scans running now; held only to
    /// read or swap entries, never across an await.
    cache: Mutex<PageCache>,
}

#[derive(Default)]
struct PageCache {
    /// Finished answers, oldest first.
    done: Vec<Cached>,
    running: Vec<Running>,
}

/// A finished computation of the groups.
struct Cached {
    key: GroupsKey,
    /// The engine's generation when the scan started.
    generation: u64,
    finished: Instant,
    /// A request was answered 503 and told to come back for this answer.
    promised: bool,
    groups: Arc<Groups>,
}

/// A scan in progress; every waiter awaits the same shared future.
struct Running {
    key: GroupsKey,
    started: Instant,
    /// Set when a waiter gives up (503): its retry may take the answer.
    promised: Arc<AtomicBool>,
    result: Shared<BoxFuture<'static, ScanResult>>,
}

impl Default for ScanScheduler {
    fn default() -> Self {
        Self::new()
    }
}

impl ScanScheduler {
    pub fn new() -> Self {
        Self {
            pool: OnceLock::new(),
            permits: Arc::new(Semaphore::new(1)),
            cache: Mutex::new(PageCache::default()),
        }
    }

    /// The scan pool: cores + 1 threads, built on first use.
    pub fn pool(&self) -> &rayon::ThreadPool {
        self.pool.get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
            rayon::ThreadPoolBuilder::new()
                .num_threads(cores + 1)
                .thread_name(|i| format!("neardup-scan-{i}"))
                .build()
                .expect("a thread pool for scans")
        })
    }

    /// Wait for the scan permit; hold it for as long as the scan runs.
    pub async fn permit(&self) -> OwnedSemaphorePermit {
        Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .expect("the scan semaphore is never closed")
    }

    /// Drop the cached answers of a deleted collection (they hold its records).
    pub fn forget(&self, collection: u64) {
        self.cache().done.retain(|c| c.key.collection != collection);
    }

    fn cache(&self) -> MutexGuard<'_, PageCache> {
        self.cache.lock().expect("the page cache lock was poisoned")
    }

    /// The groups of `coll` at `key`: cached, the running scan's, or a new
    /// scan's. `paging` (a page after the first) accepts a cached answer up
    /// to [`PAGE_CACHE_SECS`] old; a first page accepts one only if nothing
    /// was written since, or if it finished within `recent`. With `wait`,
    /// gives up after that long with [`ScanError::InProgress`].
    #[allow(clippy::too_many_arguments)]
    pub async fn groups(
        self: &Arc<Self>,
        coll: &Arc<Collection>,
        backend: &Backend,
        metrics: &Arc<Metrics>,
        threshold: Threshold,
        key: GroupsKey,
        paging: bool,
        recent: Duration,
        wait: Option<Duration>,
    ) -> Result<Arc<Groups>, ScanError> {
        let generation = backend.write_version().await.map_err(ScanError::Storage)?;
        let (scheduler, worker) = (Arc::clone(self), Arc::clone(coll));
        let scanned = key.clone();
        let compute = move || -> BoxFuture<'static, Result<Groups, String>> {
            async move {
                tokio::task::spawn_blocking(move || {
                    let backend = worker
                        .backend()
                        .ok_or_else(|| format!("collection {:?} is not ready", worker.name))?;
                    backend
                        .duplicate_groups(
                            threshold,
                            crate::engine::By::new(scanned.measure, scanned.score),
                            scanned.filter.as_ref(),
                            scanned.excluded.as_deref(),
                            scanned.min_size,
                            scheduler.pool(),
                        )
                        .map_err(|e| e.to_string())
                })
                .await
                .map_err(|e| e.to_string())?
            }
            .boxed()
        };
        self.groups_of(
            coll.name.as_str(),
            metrics,
            key,
            paging,
            recent,
            wait,
            generation,
            compute,
        )
        .await
    }

    /// [`Self::groups`] given `generation`, what was
    /// written up to now (an answer computed at another generation is
    /// stale for a first page), `compute` makes the groups (run under the
    /// scan permit, in a task of its own).
    #[allow(clippy::too_many_arguments)]
    async fn groups_of(
        self: &Arc<Self>,
        collection: &str,
        metrics: &Arc<Metrics>,
        key: GroupsKey,
        paging: bool,
        recent: Duration,
        wait: Option<Duration>,
        generation: u64,
        compute: impl FnOnce() -> BoxFuture<'static, Result<Groups, String>>,
    ) -> Result<Arc<Groups>, ScanError> {
        let (result, started, promised) = {
            let mut cache = self.cache();
            if let Some(c) = cache.done.iter().find(|c| c.key == key) {
                let unchanged = c.generation == generation;
                let reusable = if paging {
                    c.finished.elapsed() < Duration::from_secs(PAGE_CACHE_SECS)
                } else {
                    c.promised && c.finished.elapsed() < recent
                };
                if unchanged || reusable {
                    return Ok(Arc::clone(&c.groups));
                }
            }
            match cache.running.iter().find(|r| r.key == key) {
                Some(r) => (r.result.clone(), r.started, Arc::clone(&r.promised)),
                None => {
                    let running =
                        self.start(collection, metrics, key.clone(), generation, compute());
                    let joined = (
                        running.result.clone(),
                        running.started,
                        Arc::clone(&running.promised),
                    );
                    cache.running.push(running);
                    joined
                }
            }
        };
        let outcome = match wait {
            None => result.await,
            Some(wait) => match tokio::time::timeout(wait, result).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    promised.store(true, Ordering::Release);
                    return Err(ScanError::InProgress {
                        retry_after_secs: retry_after(metrics, collection, started),
                    });
                }
            },
        };
        outcome.map_err(ScanError::Failed)
    }

    /// Start the scan for `key` as a task of its own: it waits for the
    /// permit, runs on the scan pool, records its metric and fills the cache.
    fn start(
        self: &Arc<Self>,
        collection: &str,
        metrics: &Arc<Metrics>,
        key: GroupsKey,
        generation: u64,
        compute: BoxFuture<'static, Result<Groups, String>>,
    ) -> Running {
        let (scheduler, metrics) = (Arc::clone(self), Arc::clone(metrics));
        let collection = collection.to_owned();
        let promised = Arc::new(AtomicBool::new(false));
        let promised_by_waiters = Arc::clone(&promised);
        let running_key = key.clone();
        let handle = tokio::spawn(async move {
            let permit = scheduler.permit().await;
            let at = Instant::now();
            let scanned = compute.await;
            drop(permit);
            let seconds = at.elapsed().as_secs_f64();
            let mut cache = scheduler.cache();
            cache.running.retain(|r| r.key != key);
            let promised = promised_by_waiters.load(Ordering::Acquire);
            let groups = match scanned {
                Ok(groups) => Arc::new(groups),
                Err(e) => {
                    tracing::error!(error = %e, "duplicate scan failed");
                    return Err(Arc::from(e.to_string()));
                }
            };
            metrics.observe_scan(&collection, "groups", seconds);
            tracing::info!(
                collection,
                threshold = key.threshold,
                min_size = key.min_size,
                documents = groups.stats.documents,
                candidates = groups.stats.candidates,
                pairs = groups.stats.pairs,
                excluded = groups.stats.excluded,
                groups = groups.groups.len(),
                seconds,
                "duplicate groups computed"
            );
            cache.done.retain(|c| c.key != key);
            if cache.done.len() == CACHED_ANSWERS {
                cache.done.remove(0);
            }
            cache.done.push(Cached {
                key,
                generation,
                finished: Instant::now(),
                promised,
                groups: Arc::clone(&groups),
            });
            Ok(groups)
        });
        let result = handle
            .map(|joined| match joined {
                Ok(result) => result,
                Err(e) => Err(Arc::from(format!("the scan task failed: {e}"))),
            })
            .boxed()
            .shared();
        Running {
            key: running_key,
            started: Instant::now(),
            promised,
            result,
        }
    }
}

/// Seconds until a scan started at `started` is likely done: the last
/// scan's duration minus the time this one has run, at least 1.
fn retry_after(metrics: &Metrics, collection: &str, started: Instant) -> u64 {
    let expected = metrics
        .last_scan_seconds(collection, "groups")
        .unwrap_or(0.0);
    let left = expected - started.elapsed().as_secs_f64();
    left.ceil().max(1.0) as u64
}
