//! Prometheus metrics (`GET /metrics`, OpenMetrics or text 0.0.4).
//!
//! The registry only: what is counted and how it is exported. The layer
//! that times requests sits with the other layers (`middleware.rs`). One
//! registry per server (not a process global), so tests run many servers
//! in one process. Everything about a collection carries the label
//! `collection`; gauges that mirror state (documents, memory, the log, the
//! process) are set at scrape time rather than on every write, and the
//! gauges of a deleted collection go with it.

use crate::backend::{LogStats, SnapshotInfo};
use crate::collections::{Collection, Collections, Status};
use crate::engine::{Measure, PassageOutcome, QueryOutcome};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    /// The collection the request was for ("" for server routes).
    pub collection: String,
    pub route: String,
    pub method: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CollectionLabels {
    collection: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ComponentLabels {
    collection: String,
    component: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FileLabels {
    collection: String,
    file: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    collection: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventTypeLabels {
    collection: String,
    r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    collection: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    collection: String,
    route: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabels {
    collection: String,
    verdict: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MeasureLabels {
    collection: String,
    measure: &'static str,
    score: &'static str,
}

fn of(collection: &str) -> CollectionLabels {
    CollectionLabels {
        collection: collection.to_owned(),
    }
}

fn scan_histogram() -> Histogram {
    // 1 ms .. ~65 s
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

fn latency_histogram() -> Histogram {
    // 25 µs .. ~0.8 s
    Histogram::new(exponential_buckets(0.000_025, 2.0, 16))
}

fn candidates_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 15))
}

fn snapshot_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// A log's counter totals at the last scrape (the log keeps plain atomics).
#[derive(Clone, Copy, Debug, Default)]
struct WalSeen {
    appends: u64,
    append_nanos: u64,
    fsyncs: u64,
    fsync_nanos: u64,
}

/// Every metric the server exports. Fields are the families; their help
/// texts (in [`Metrics::default`]) say what each counts.
pub struct Metrics {
    /// Everything of the service, prefixed `neardup_`.
    registry: Registry,
    /// The process's standard `process_*` metrics, unprefixed.
    process: Registry,
    requests: Family<HttpLabels, Counter>,
    latency: Family<HttpLabels, Histogram>,
    requests_shed: Counter,
    collections: Gauge,
    collection_up: Family<CollectionLabels, Gauge>,
    text_version: Family<CollectionLabels, Gauge>,
    passage_index: Family<CollectionLabels, Gauge>,
    boilerplate: Family<CollectionLabels, Gauge>,
    template_changes: Family<KindLabels, Counter>,
    /// Review decisions written (new or edited), by verdict (issue 46).
    review_decisions: Family<VerdictLabels, Counter>,
    /// Issue 45: events appended, lost, and webhook deliveries.
    events: Family<EventTypeLabels, Counter>,
    events_lost: Counter,
    webhook_deliveries: Family<OutcomeLabels, Counter>,
    webhook_pending: Family<CollectionLabels, Gauge>,
    webhook_delivery_seconds: Family<CollectionLabels, Histogram>,
    webhook_failed_dropped: Counter,
    queries_by_measure: Family<MeasureLabels, Counter>,
    passage_lookups: Family<CollectionLabels, Counter>,
    common_fingerprints: Family<CollectionLabels, Counter>,
    ready: Gauge,
    documents: Family<CollectionLabels, Gauge>,
    memory: Family<ComponentLabels, Gauge>,
    /// A collection's own file that could not be read at its last use.
    file_unreadable: Family<FileLabels, Gauge>,
    query_candidates: Family<CollectionLabels, Histogram>,
    candidates_verified: Family<CollectionLabels, Counter>,
    candidates_rejected: Family<CollectionLabels, Counter>,
    rejected_ratio: Family<CollectionLabels, Gauge<f64, AtomicU64>>,
    truncated_queries: Family<CollectionLabels, Counter>,
    filtered_queries: Family<KindLabels, Counter>,
    /// Issue 46: pairs judged not duplicates left out, by route.
    review_excluded: Family<RouteLabels, Counter>,
    writes: Family<OutcomeLabels, Counter>,
    purged: Family<CollectionLabels, Counter>,
    snapshot_seconds: Family<CollectionLabels, Histogram>,
    snapshot_bytes: Family<CollectionLabels, Gauge>,
    snapshot_failures: Family<CollectionLabels, Counter>,
    last_snapshot: Family<CollectionLabels, Gauge>,
    wal_appends: Family<CollectionLabels, Counter>,
    wal_append_seconds: Family<CollectionLabels, Counter<f64, AtomicU64>>,
    wal_fsyncs: Family<CollectionLabels, Counter>,
    wal_fsync_seconds: Family<CollectionLabels, Counter<f64, AtomicU64>>,
    wal_bytes: Family<CollectionLabels, Gauge>,
    text_bytes: Family<CollectionLabels, Gauge>,
    wal_writable: Family<CollectionLabels, Gauge>,
    scans: Family<KindLabels, Counter>,
    scan_seconds: Family<KindLabels, Histogram>,
    analyses: Family<KindLabels, Counter>,
    analysis_seconds: Family<KindLabels, Histogram>,
    review_queue_seconds: Family<CollectionLabels, Histogram>,
    review_queue_documents: Family<CollectionLabels, Counter>,
    process_rss: Gauge,
    huge_pages: Gauge,
    process_cpu: Counter<f64, AtomicU64>,
    /// CPU seconds already exported.
    cpu_seen: Mutex<f64>,
    process_fds: Gauge,
    process_start: Gauge,
    /// Per collection id: its log's counters at the last scrape.
    wal_seen: Mutex<HashMap<u64, WalSeen>>,
    /// Per (collection, kind): the last finished scan's duration, for `Retry-After`.
    last_scan: Mutex<HashMap<(String, &'static str), f64>>,
    /// Collections whose series exist: each one's are made at zero when it
    /// is first seen and removed once it is gone.
    exported: Mutex<HashSet<String>>,
    /// Deleted collections (until a collection of the name exists again):
    /// series a request still running on one made after its deletion are
    /// removed at each scrape.
    deleted: Mutex<HashSet<String>>,
}

/// Every write outcome `neardup_writes_total` counts.
const WRITE_OUTCOMES: [&str; 6] = [
    "created",
    "replaced",
    "deleted",
    "rejected_duplicate",
    "conflict",
    "failed",
];

/// Every scan kind.
const SCAN_KINDS: [&str; 2] = ["groups", "pairs"];
/// The kinds of analysis.
const ANALYSIS_KINDS: [&str; 2] = ["histogram", "accuracy"];

impl Default for Metrics {
    fn default() -> Self {
        let mut r = Registry::with_prefix("neardup");
        macro_rules! reg {
            ($name:literal, $help:literal, $metric:expr) => {{
                let m = $metric;
                r.register($name, $help, m.clone());
                m
            }};
        }
        let requests = reg!(
            "http_requests",
            "HTTP requests by collection, route, method and status",
            Family::<HttpLabels, Counter>::default()
        );
        let latency = reg!(
            "http_request_duration_seconds",
            "HTTP request latency by collection, route, method and status",
            Family::<HttpLabels, Histogram>::new_with_constructor(
                latency_histogram as fn() -> Histogram
            )
        );
        let requests_shed = reg!(
            "requests_shed",
            "Requests refused with 503 because server.max_concurrent_requests were in flight",
            Counter::default()
        );
        let collections = reg!("collections", "Collections held", Gauge::default());
        let collection_up = reg!(
            "collection_up",
            "1 when a collection serves, 0 while it is restored or when its files could not be",
            Family::<CollectionLabels, Gauge>::default()
        );
        let text_version = reg!(
            "collection_text_version",
            "The version of the text recipe a collection's data is written with (normalize.version; 1: data of releases before versions, until a reindex)",
            Family::<CollectionLabels, Gauge>::default()
        );
        let passage_index = reg!(
            "collection_passage_index",
            "1 when a collection keeps the passage index (index.passage_index: containment queries, passage lookups)",
            Family::<CollectionLabels, Gauge>::default()
        );
        let boilerplate = reg!(
            "collection_boilerplate",
            "1 when a collection counts document frequency (index.boilerplate.enabled: content scores, common passages)",
            Family::<CollectionLabels, Gauge>::default()
        );
        let template_changes = reg!(
            "template_changes",
            "Templates registered, replaced or deleted (kind: created, replaced, deleted)",
            Family::<KindLabels, Counter>::default()
        );
        let review_decisions = reg!(
            "review_decisions",
            "Review decisions written, new or edited (verdict: duplicate, not_duplicate, related)",
            Family::<VerdictLabels, Counter>::default()
        );
        let events = reg!(
            "events",
            "Events appended to collections' event logs (type: document.duplicate, document.refused)",
            Family::<EventTypeLabels, Counter>::default()
        );
        let events_lost = reg!(
            "events_lost",
            "Events of acknowledged writes that could not be appended (the write was answered as usual; see the log)",
            Counter::default()
        );
        let webhook_deliveries = reg!(
            "webhook_deliveries",
            "Webhook delivery attempts by outcome (delivered, retry, failed)",
            Family::<OutcomeLabels, Counter>::default()
        );
        let webhook_pending = reg!(
            "webhook_pending",
            "Webhook deliveries owed (new, in flight or waiting for a retry), per collection",
            Family::<CollectionLabels, Gauge>::default()
        );
        let webhook_delivery_seconds = reg!(
            "webhook_delivery_seconds",
            "From an event's time to its successful delivery",
            Family::<CollectionLabels, Histogram>::new_with_constructor(
                scan_histogram as fn() -> Histogram
            )
        );
        let webhook_failed_dropped = reg!(
            "webhook_failed_dropped",
            "Failed deliveries dropped by the per-subscription bound of the failed list",
            Counter::default()
        );
        let queries_by_measure = reg!(
            "queries_by_measure",
            "Similarity queries by the measure asked (jaccard, query_in_stored, stored_in_query, containment) and the shingles it is taken over (score: raw, content)",
            Family::<MeasureLabels, Counter>::default()
        );
        let passage_lookups = reg!(
            "passage_lookups",
            "Passage lookups (POST /passages)",
            Family::<CollectionLabels, Counter>::default()
        );
        let common_fingerprints = reg!(
            "common_fingerprints_skipped",
            "Fingerprints a containment query or passage lookup skipped for being held by more than index.common_fingerprint_docs documents",
            Family::<CollectionLabels, Counter>::default()
        );
        let ready = reg!("ready", "1 when /readyz answers 200", Gauge::default());
        let documents = reg!(
            "documents",
            "Live documents (an expired one stops counting at once, before the purge removes it)",
            Family::<CollectionLabels, Gauge>::default()
        );
        let memory = reg!(
            "memory_bytes",
            "Estimated heap bytes by collection and component",
            Family::<ComponentLabels, Gauge>::default()
        );
        let file_unreadable = reg!(
            "file_unreadable",
            "1 while a collection's file (events, decisions) could not be read at its last use",
            Family::<FileLabels, Gauge>::default()
        );
        let query_candidates = reg!(
            "query_candidates",
            "Distinct LSH candidates verified per similarity query",
            Family::<CollectionLabels, Histogram>::new_with_constructor(
                candidates_histogram as fn() -> Histogram
            )
        );
        let candidates_verified = reg!(
            "candidates_verified",
            "LSH candidates checked by exact Jaccard",
            Family::<CollectionLabels, Counter>::default()
        );
        let candidates_rejected = reg!(
            "candidates_rejected",
            "LSH candidates whose exact Jaccard fell below the threshold",
            Family::<CollectionLabels, Counter>::default()
        );
        let rejected_ratio = reg!(
            "candidates_rejected_ratio",
            "Fraction of all verified candidates rejected by exact verification",
            Family::<CollectionLabels, Gauge<f64, AtomicU64>>::default()
        );
        let truncated_queries = reg!(
            "queries_truncated",
            "Queries whose candidate list was cut at index.max_candidates",
            Family::<CollectionLabels, Counter>::default()
        );
        let filtered_queries = reg!(
            "filtered_queries",
            "Queries and scans with a metadata filter or exclude_same, by kind (similar, similar_on_write, if_unique, pairs, groups)",
            Family::<KindLabels, Counter>::default()
        );
        let review_excluded = reg!(
            "review_excluded_pairs",
            "Pairs moderators judged not duplicates left out (review.exclude_not_duplicates), by route (groups, drop_list, pairs, if_unique): a scan's excluded edges, or the stored documents an if_unique write did not count",
            Family::<RouteLabels, Counter>::default()
        );
        let writes = reg!(
            "writes",
            "Document writes by outcome (created, replaced, deleted, rejected_duplicate, conflict, failed)",
            Family::<OutcomeLabels, Counter>::default()
        );
        let purged = reg!(
            "documents_purged",
            "Expired documents purged from memory (a delete in the log each)",
            Family::<CollectionLabels, Counter>::default()
        );
        let snapshot_seconds = reg!(
            "snapshot_duration_seconds",
            "Time to write a snapshot",
            Family::<CollectionLabels, Histogram>::new_with_constructor(
                snapshot_histogram as fn() -> Histogram
            )
        );
        let snapshot_bytes = reg!(
            "snapshot_size_bytes",
            "Size of the last snapshot",
            Family::<CollectionLabels, Gauge>::default()
        );
        let snapshot_failures = reg!(
            "snapshot_failures",
            "Snapshots that could not be written (the log still holds every write)",
            Family::<CollectionLabels, Counter>::default()
        );
        let last_snapshot = reg!(
            "last_snapshot_timestamp_seconds",
            "When the last snapshot was written (Unix time)",
            Family::<CollectionLabels, Gauge>::default()
        );
        let wal_appends = reg!(
            "wal_appends",
            "Records appended to the write-ahead log",
            Family::<CollectionLabels, Counter>::default()
        );
        let wal_append_seconds = reg!(
            "wal_append_seconds",
            "Time spent appending records to the log buffer (divide by wal_appends_total for the mean)",
            Family::<CollectionLabels, Counter<f64, AtomicU64>>::default()
        );
        let wal_fsyncs = reg!(
            "wal_fsyncs",
            "fsync calls on the write-ahead log",
            Family::<CollectionLabels, Counter>::default()
        );
        let wal_fsync_seconds = reg!(
            "wal_fsync_seconds",
            "Time spent in log fsyncs",
            Family::<CollectionLabels, Counter<f64, AtomicU64>>::default()
        );
        let wal_bytes = reg!(
            "wal_size_bytes",
            "Bytes in live log segments",
            Family::<CollectionLabels, Gauge>::default()
        );
        let text_bytes = reg!(
            "text_size_bytes",
            "Bytes of stored-text segment files on disk (store_text): the tail since the last snapshot and each kept snapshot's segment",
            Family::<CollectionLabels, Gauge>::default()
        );
        let wal_writable = reg!(
            "wal_writable",
            "1 when the log accepts writes; 0 while it is out of space (writes resume with room) or after an fsync failure (until a restart)",
            Family::<CollectionLabels, Gauge>::default()
        );
        let scans = reg!(
            "duplicate_scans",
            "Whole-index duplicate scans (GET /duplicates computations, /duplicates/pairs streams)",
            Family::<KindLabels, Counter>::default()
        );
        let scan_seconds = reg!(
            "duplicate_scan_duration_seconds",
            "Time of a whole-index duplicate scan, by kind",
            Family::<KindLabels, Histogram>::new_with_constructor(
                scan_histogram as fn() -> Histogram
            )
        );
        let analyses = reg!(
            "analyses",
            "Finished analyses (POST /analysis/histogram, /analysis/accuracy), by kind",
            Family::<KindLabels, Counter>::default()
        );
        let analysis_seconds = reg!(
            "analysis_duration_seconds",
            "Time of an analysis on the scan pool, by kind (waiting for the pool not included)",
            Family::<KindLabels, Histogram>::new_with_constructor(
                scan_histogram as fn() -> Histogram
            )
        );
        let review_queue_seconds = reg!(
            "review_queue_duration_seconds",
            "Time of a review queue's walk over the collection (GET /review/queue)",
            Family::<CollectionLabels, Histogram>::new_with_constructor(
                scan_histogram as fn() -> Histogram
            )
        );
        let review_queue_documents = reg!(
            "review_queue_documents_searched",
            "Documents the review queue's walks queried for pairs",
            Family::<CollectionLabels, Counter>::default()
        );
        // The process collector's standard names, without the prefix.
        let mut p = Registry::default();
        let process_rss = Gauge::default();
        p.register(
            "process_resident_memory_bytes",
            "Resident memory of the process",
            process_rss.clone(),
        );
        let huge_pages = reg!(
            "memory_huge_page_bytes",
            "The process's anonymous memory in transparent huge pages (AnonHugePages; see storage.huge_pages_interval_secs)",
            Gauge::default()
        );
        let process_cpu = Counter::<f64, AtomicU64>::default();
        p.register(
            "process_cpu_seconds",
            "User and system CPU time of the process",
            process_cpu.clone(),
        );
        let process_fds = Gauge::default();
        p.register(
            "process_open_fds",
            "Open file descriptors",
            process_fds.clone(),
        );
        let process_start = Gauge::default();
        p.register(
            "process_start_time_seconds",
            "When the process started (Unix time)",
            process_start.clone(),
        );
        Self {
            registry: r,
            process: p,
            cpu_seen: Mutex::new(0.0),
            requests,
            latency,
            requests_shed,
            collections,
            collection_up,
            text_version,
            passage_index,
            boilerplate,
            template_changes,
            review_decisions,
            events,
            events_lost,
            webhook_deliveries,
            webhook_pending,
            webhook_delivery_seconds,
            webhook_failed_dropped,
            queries_by_measure,
            passage_lookups,
            common_fingerprints,
            ready,
            documents,
            memory,
            file_unreadable,
            query_candidates,
            candidates_verified,
            candidates_rejected,
            rejected_ratio,
            truncated_queries,
            filtered_queries,
            review_excluded,
            writes,
            purged,
            snapshot_seconds,
            snapshot_bytes,
            snapshot_failures,
            last_snapshot,
            wal_appends,
            wal_append_seconds,
            wal_fsyncs,
            wal_fsync_seconds,
            wal_bytes,
            text_bytes,
            wal_writable,
            scans,
            scan_seconds,
            analyses,
            analysis_seconds,
            review_queue_seconds,
            review_queue_documents,
            process_rss,
            huge_pages,
            process_cpu,
            process_fds,
            process_start,
            wal_seen: Default::default(),
            last_scan: Default::default(),
            exported: Default::default(),
            deleted: Default::default(),
        }
    }
}

impl Metrics {
    /// Record the verification work of one query on `collection`.
    /// A template registered (`created`), replaced or `deleted`.
    pub fn observe_template_change(&self, collection: &str, kind: &'static str) {
        self.template_changes
            .get_or_create(&KindLabels {
                collection: collection.to_owned(),
                kind,
            })
            .inc();
    }

    /// A review decision written (new or edited) on `collection`.
    pub fn observe_review_decision(&self, collection: &str, verdict: crate::review::Verdict) {
        self.review_decisions
            .get_or_create(&VerdictLabels {
                collection: collection.to_owned(),
                verdict: verdict.as_str(),
            })
            .inc();
    }

    /// Events appended to `collection`'s log, of type `kind`.
    pub fn observe_events(&self, collection: &str, kind: &'static str, n: usize) {
        self.events
            .get_or_create(&EventTypeLabels {
                collection: collection.to_owned(),
                r#type: kind,
            })
            .inc_by(n as u64);
    }

    /// Events of an acknowledged write that could not be appended.
    pub fn observe_events_lost(&self, n: usize) {
        self.events_lost.inc_by(n as u64);
    }

    /// A webhook delivery attempt's outcome (`delivered`, `retry`,
    /// `failed`); for a delivered one, the seconds since its event.
    pub fn observe_delivery(
        &self,
        collection: &str,
        outcome: &'static str,
        since_event: Option<f64>,
    ) {
        self.webhook_deliveries
            .get_or_create(&OutcomeLabels {
                collection: collection.to_owned(),
                outcome,
            })
            .inc();
        if let Some(s) = since_event {
            self.webhook_delivery_seconds
                .get_or_create(&of(collection))
                .observe(s);
        }
    }

    /// The deliveries `collection` owes, every subscription together.
    pub fn set_webhook_pending(&self, collection: &str, pending: u64) {
        self.webhook_pending
            .get_or_create(&of(collection))
            .set(pending as i64);
    }

    /// The failed deliveries dropped by the failed list's bound so far.
    pub fn set_failed_dropped(&self, total: u64) {
        let seen = self.webhook_failed_dropped.get();
        if total > seen {
            self.webhook_failed_dropped.inc_by(total - seen);
        }
    }

    /// A passage lookup's answer.
    pub fn observe_passages(&self, collection: &str, p: &PassageOutcome) {
        let l = of(collection);
        self.passage_lookups.get_or_create(&l).inc();
        self.common_fingerprints
            .get_or_create(&l)
            .inc_by(p.work.common as u64);
    }

    /// A similarity query by `measure` (a write's `similar` or `if_unique`
    /// included).
    pub fn observe_measure(
        &self,
        collection: &str,
        by: impl Into<crate::engine::By>,
        q: &QueryOutcome,
    ) {
        let by = by.into();
        self.queries_by_measure
            .get_or_create(&MeasureLabels {
                collection: collection.to_owned(),
                measure: by.measure.as_str(),
                score: by.score.as_str(),
            })
            .inc();
        if let Some(w) = &q.passages {
            self.common_fingerprints
                .get_or_create(&of(collection))
                .inc_by(w.common as u64);
        }
        self.observe_query(collection, q);
    }

    pub fn observe_query(&self, collection: &str, q: &QueryOutcome) {
        let l = of(collection);
        self.query_candidates
            .get_or_create(&l)
            .observe(q.candidates as f64);
        if q.truncated {
            self.truncated_queries.get_or_create(&l).inc();
        }
        if q.candidates == 0 {
            // Neither total moves, so neither does their ratio.
            return;
        }
        // The ratio of the collection's two counters, read back right after
        // adding to them (no lock of its own on the query path).
        let verified = {
            let c = self.candidates_verified.get_or_create(&l);
            c.inc_by(q.candidates as u64);
            c.get()
        };
        let rejected = {
            let c = self.candidates_rejected.get_or_create(&l);
            c.inc_by(q.rejected as u64);
            c.get()
        };
        if verified > 0 {
            self.rejected_ratio
                .get_or_create(&l)
                .set(rejected as f64 / verified as f64);
        }
    }

    /// A finished whole-index scan of `kind` (`groups` or `pairs`).
    /// A query or scan of `kind` (`similar`, `similar_on_write`,
    /// `if_unique`, `pairs`, `groups`) asked with a metadata filter.
    pub fn observe_filtered(&self, collection: &str, kind: &'static str) {
        self.filtered_queries
            .get_or_create(&KindLabels {
                collection: collection.to_owned(),
                kind,
            })
            .inc();
    }

    /// `pairs` pairs judged not duplicates left out of an answer of
    /// `route` (`groups`, `drop_list`, `pairs`, `if_unique`).
    pub fn observe_review_excluded(&self, collection: &str, route: &'static str, pairs: usize) {
        if pairs == 0 {
            return;
        }
        self.review_excluded
            .get_or_create(&RouteLabels {
                collection: collection.to_owned(),
                route,
            })
            .inc_by(pairs as u64);
    }

    pub fn observe_scan(&self, collection: &str, kind: &'static str, seconds: f64) {
        let labels = KindLabels {
            collection: collection.to_owned(),
            kind,
        };
        self.scans.get_or_create(&labels).inc();
        self.scan_seconds.get_or_create(&labels).observe(seconds);
        self.last_scan
            .lock()
            .expect("metrics lock")
            .insert((collection.to_owned(), kind), seconds);
    }

    /// A finished analysis of `kind` (`histogram` or `accuracy`).
    pub fn observe_analysis(&self, collection: &str, kind: &'static str, seconds: f64) {
        let labels = KindLabels {
            collection: collection.to_owned(),
            kind,
        };
        self.analyses.get_or_create(&labels).inc();
        self.analysis_seconds
            .get_or_create(&labels)
            .observe(seconds);
    }

    /// A review queue's walk: how long it took and how many documents it queried.
    pub fn observe_review_queue(&self, collection: &str, seconds: f64, documents: usize) {
        let l = of(collection);
        self.review_queue_seconds.get_or_create(&l).observe(seconds);
        self.review_queue_documents
            .get_or_create(&l)
            .inc_by(documents as u64);
    }

    /// How long the last finished scan of `kind` on `collection` took.
    pub fn last_scan_seconds(&self, collection: &str, kind: &'static str) -> Option<f64> {
        self.last_scan
            .lock()
            .expect("metrics lock")
            .get(&(collection.to_owned(), kind))
            .copied()
    }

    /// One answered request.
    pub fn observe_request(&self, labels: HttpLabels, seconds: f64) {
        self.latency.get_or_create(&labels).observe(seconds);
        self.requests.get_or_create(&labels).inc();
    }

    /// A request refused by the concurrency limit.
    pub fn observe_shed(&self) {
        self.requests_shed.inc();
    }

    /// A write that took effect: `created`, `replaced`, `deleted` or
    /// `rejected_duplicate` (insert-if-unique kept it out).
    pub fn observe_write(&self, collection: &str, outcome: &'static str) {
        self.observe_writes(collection, outcome, 1);
    }

    /// `n` writes of one outcome at once (a batch's).
    pub fn observe_writes(&self, collection: &str, outcome: &'static str, n: u64) {
        if n > 0 {
            self.writes
                .get_or_create(&OutcomeLabels {
                    collection: collection.to_owned(),
                    outcome,
                })
                .inc_by(n);
        }
    }

    /// A write that did not: `conflict` (409) or `failed` (a 5xx: it could
    /// not be made durable). Other refusals are bad requests, not writes.
    pub fn observe_write_error(&self, collection: &str, status: u16) {
        let outcome = match status {
            409 => "conflict",
            s if s >= 500 => "failed",
            _ => return,
        };
        self.observe_write(collection, outcome);
    }

    /// Expired documents purged from `collection`.
    pub fn observe_purge(&self, collection: &str, documents: usize) {
        self.purged
            .get_or_create(&of(collection))
            .inc_by(documents as u64);
    }

    pub fn observe_snapshot(&self, collection: &str, info: &SnapshotInfo) {
        let l = of(collection);
        self.snapshot_seconds
            .get_or_create(&l)
            .observe(info.milliseconds / 1e3);
        self.snapshot_bytes.get_or_create(&l).set(info.bytes as i64);
        self.last_snapshot
            .get_or_create(&l)
            .set((info.created_unix_ms / 1000) as i64);
    }

    pub fn observe_snapshot_failure(&self, collection: &str) {
        self.snapshot_failures.get_or_create(&of(collection)).inc();
    }

    /// Move a collection's exported log counters up to the log's own totals.
    fn export_wal(&self, collection: &str, id: u64, log: &LogStats) {
        let now = WalSeen {
            appends: log.appends,
            append_nanos: log.append_nanos,
            fsyncs: log.fsyncs,
            fsync_nanos: log.fsync_nanos,
        };
        let mut seen_all = self.wal_seen.lock().expect("metrics lock");
        let seen = seen_all.entry(id).or_default();
        let since = |now: u64, seen: u64| now.saturating_sub(seen);
        let l = of(collection);
        self.wal_appends
            .get_or_create(&l)
            .inc_by(since(now.appends, seen.appends));
        self.wal_append_seconds
            .get_or_create(&l)
            .inc_by(since(now.append_nanos, seen.append_nanos) as f64 / 1e9);
        self.wal_fsyncs
            .get_or_create(&l)
            .inc_by(since(now.fsyncs, seen.fsyncs));
        self.wal_fsync_seconds
            .get_or_create(&l)
            .inc_by(since(now.fsync_nanos, seen.fsync_nanos) as f64 / 1e9);
        *seen = now;
        self.wal_bytes.get_or_create(&l).set(log.bytes as i64);
        self.text_bytes.get_or_create(&l).set(log.text_bytes as i64);
        self.wal_writable
            .get_or_create(&l)
            .set(i64::from(log.writable));
    }

    /// Set the state gauges from `collections` and the process.
    fn refresh(&self, collections: &Collections, ready: bool) {
        // Gauges describe what exists now: a deleted collection's go.
        self.collection_up.clear();
        self.text_version.clear();
        self.passage_index.clear();
        self.boilerplate.clear();
        self.documents.clear();
        self.memory.clear();
        self.file_unreadable.clear();
        self.wal_bytes.clear();
        self.text_bytes.clear();
        self.wal_writable.clear();
        self.ready.set(i64::from(ready));
        for name in collections.take_dropped() {
            self.forget_collection(&name);
        }
        let all = collections.list();
        self.collections.set(all.len() as i64);
        let mut live_ids = Vec::with_capacity(all.len());
        for c in &all {
            let name = c.name.as_str();
            live_ids.push(c.id);
            self.collection_up
                .get_or_create(&of(name))
                .set(i64::from(c.status() == Status::Ready));
            self.text_version
                .get_or_create(&of(name))
                .set(i64::from(c.settings().normalize.version));
            let Some(backend) = c.backend() else { continue };
            self.passage_index
                .get_or_create(&of(name))
                .set(i64::from(backend.passage_index()));
            self.boilerplate
                .get_or_create(&of(name))
                .set(i64::from(backend.boilerplate_on()));
            self.documents
                .get_or_create(&of(name))
                .set(backend.documents() as i64);
            if let Some(log) = backend.log_stats() {
                self.export_wal(name, c.id, &log);
            }
            for file in backend.unreadable_files() {
                self.file_unreadable
                    .get_or_create(&FileLabels {
                        collection: name.to_owned(),
                        file,
                    })
                    .set(1);
            }
            let Some(m) = backend.memory() else { continue };
            for (component, bytes) in [
                ("shingles", m.shingles_bytes),
                ("signatures", m.signatures_bytes),
                ("ids", m.ids_bytes),
                ("metadata", m.metadata_bytes),
                ("records_overhead", m.records_overhead_bytes),
                ("id_map", m.id_map_bytes),
                ("doc_map", m.doc_map_bytes),
                ("lsh", m.lsh_bytes),
                ("fingerprints", m.fingerprints_bytes),
                ("passage_index", m.passage_index_bytes),
                ("doc_frequency", m.doc_frequency_bytes),
            ] {
                self.memory
                    .get_or_create(&ComponentLabels {
                        collection: name.to_owned(),
                        component,
                    })
                    .set(bytes as i64);
            }
        }
        self.wal_seen
            .lock()
            .expect("metrics lock")
            .retain(|id, _| live_ids.contains(id));
        self.export_series_of(&all);
        let p = process_stats();
        self.process_rss.set(p.rss_bytes as i64);
        self.huge_pages
            .set(crate::hugepages::huge_page_bytes().unwrap_or(0) as i64);
        self.process_fds.set(p.open_fds as i64);
        self.process_start.set(p.start_unix_secs as i64);
        let mut seen = self.cpu_seen.lock().expect("metrics lock");
        if p.cpu_seconds > *seen {
            self.process_cpu.inc_by(p.cpu_seconds - *seen);
            *seen = p.cpu_seconds;
        }
    }

    /// `name` was deleted: its series go at the next scrape.
    pub fn forget_collection(&self, name: &str) {
        self.deleted
            .lock()
            .expect("metrics lock")
            .insert(name.to_owned());
    }

    /// Make every per-collection series of a new collection at zero (a
    /// counter that appears only once it moves hides the first increment
    /// from `rate()`), and remove a deleted collection's.
    fn export_series_of(&self, live: &[Arc<Collection>]) {
        let mut exported = self.exported.lock().expect("metrics lock");
        let names: HashSet<&str> = live.iter().map(|c| c.name.as_str()).collect();
        for name in &names {
            if exported.contains(*name) {
                continue;
            }
            let l = of(name);
            let _ = self.query_candidates.get_or_create(&l);
            let _ = self.candidates_verified.get_or_create(&l);
            let _ = self.candidates_rejected.get_or_create(&l);
            let _ = self.rejected_ratio.get_or_create(&l);
            let _ = self.truncated_queries.get_or_create(&l);
            let _ = self.passage_lookups.get_or_create(&l);
            let _ = self.common_fingerprints.get_or_create(&l);
            for m in Measure::ALL {
                for score in crate::engine::Score::ALL {
                    let _ = self.queries_by_measure.get_or_create(&MeasureLabels {
                        collection: (*name).to_owned(),
                        measure: m.as_str(),
                        score: score.as_str(),
                    });
                }
            }
            for kind in ["created", "replaced", "deleted"] {
                let _ = self.template_changes.get_or_create(&KindLabels {
                    collection: (*name).to_owned(),
                    kind,
                });
            }
            for v in crate::review::Verdict::ALL {
                let _ = self.review_decisions.get_or_create(&VerdictLabels {
                    collection: (*name).to_owned(),
                    verdict: v.as_str(),
                });
            }
            let _ = self.purged.get_or_create(&l);
            let _ = self.snapshot_failures.get_or_create(&l);
            let _ = self.review_queue_documents.get_or_create(&l);
            for outcome in WRITE_OUTCOMES {
                let _ = self.writes.get_or_create(&OutcomeLabels {
                    collection: (*name).to_owned(),
                    outcome,
                });
            }
            for kind in SCAN_KINDS {
                let _ = self.scans.get_or_create(&KindLabels {
                    collection: (*name).to_owned(),
                    kind,
                });
            }
            for kind in ANALYSIS_KINDS {
                let _ = self.analyses.get_or_create(&KindLabels {
                    collection: (*name).to_owned(),
                    kind,
                });
            }
            exported.insert((*name).to_owned());
        }
        let mut deleted = self.deleted.lock().expect("metrics lock");
        deleted.retain(|n| !names.contains(n.as_str()));
        let gone: Vec<String> = exported
            .iter()
            .filter(|n| !names.contains(n.as_str()))
            .chain(deleted.iter())
            .cloned()
            .collect::<HashSet<String>>()
            .into_iter()
            .collect();
        for name in gone {
            let l = of(&name);
            self.query_candidates.remove(&l);
            self.candidates_verified.remove(&l);
            self.candidates_rejected.remove(&l);
            self.rejected_ratio.remove(&l);
            self.truncated_queries.remove(&l);
            self.passage_lookups.remove(&l);
            self.common_fingerprints.remove(&l);
            for m in Measure::ALL {
                for score in crate::engine::Score::ALL {
                    self.queries_by_measure.remove(&MeasureLabels {
                        collection: name.clone(),
                        measure: m.as_str(),
                        score: score.as_str(),
                    });
                }
            }
            for kind in ["created", "replaced", "deleted"] {
                self.template_changes.remove(&KindLabels {
                    collection: name.clone(),
                    kind,
                });
            }
            for v in crate::review::Verdict::ALL {
                self.review_decisions.remove(&VerdictLabels {
                    collection: name.clone(),
                    verdict: v.as_str(),
                });
            }
            self.purged.remove(&l);
            self.snapshot_seconds.remove(&l);
            self.snapshot_bytes.remove(&l);
            self.snapshot_failures.remove(&l);
            self.review_queue_seconds.remove(&l);
            self.review_queue_documents.remove(&l);
            self.last_snapshot.remove(&l);
            self.wal_appends.remove(&l);
            self.wal_append_seconds.remove(&l);
            self.wal_fsyncs.remove(&l);
            self.wal_fsync_seconds.remove(&l);
            for outcome in WRITE_OUTCOMES {
                self.writes.remove(&OutcomeLabels {
                    collection: name.clone(),
                    outcome,
                });
            }
            for kind in SCAN_KINDS {
                let k = KindLabels {
                    collection: name.clone(),
                    kind,
                };
                self.scans.remove(&k);
                self.scan_seconds.remove(&k);
            }
            for kind in ANALYSIS_KINDS {
                let k = KindLabels {
                    collection: name.clone(),
                    kind,
                };
                self.analyses.remove(&k);
                self.analysis_seconds.remove(&k);
            }
            self.last_scan
                .lock()
                .expect("metrics lock")
                .retain(|(c, _), _| *c != name);
            exported.remove(&name);
        }
    }

    /// The OpenMetrics text, with the state gauges refreshed.
    pub fn render(&self, collections: &Collections, ready: bool) -> String {
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        self.refresh(collections, ready);
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode_registry(&mut out, &self.registry);
        collections.encode_storage_metrics(&mut out);
        let _ = encode_registry(&mut out, &self.process);
        let _ = encode_eof(&mut out);
        out
    }
}

/// What the process metrics report.
#[derive(Debug, Default)]
struct ProcessStats {
    rss_bytes: u64,
    cpu_seconds: f64,
    open_fds: u64,
    start_unix_secs: u64,
}

/// Read from `/proc/self` (Linux); zeros elsewhere.
fn process_stats() -> ProcessStats {
    let mut p = ProcessStats {
        rss_bytes: crate::hugepages::resident_bytes().unwrap_or(0),
        ..ProcessStats::default()
    };
    let ticks = 100.0; // USER_HZ on every Linux the service targets
    if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
        // Fields after the parenthesized command name, which may hold spaces.
        if let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) {
            let f: Vec<&str> = rest.split_whitespace().collect();
            let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            // utime, stime are fields 14 and 15 (1-based), starttime 22;
            // `rest` starts at field 3.
            p.cpu_seconds = (num(11) + num(12)) as f64 / ticks;
            let start_ticks = num(19);
            if let Ok(uptime) = std::fs::read_to_string("/proc/uptime") {
                let up: f64 = uptime
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0.0);
                let boot = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64())
                    - up;
                p.start_unix_secs = (boot + start_ticks as f64 / ticks).max(0.0) as u64;
            }
        }
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        p.open_fds = fds.count() as u64;
    }
    p
}

/// OpenMetrics text (what [`Metrics::render`] gives) as the Prometheus
/// text format 0.0.4, for scrapers and clients that do not ask for
/// OpenMetrics: no `# EOF` or `# UNIT` lines, and a counter's `# HELP` and
/// `# TYPE` name its `_total` samples (OpenMetrics names the family
/// without the suffix). Samples are the same lines in both formats.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "gauge" | "histogram" | "summary" => (name.to_owned(), kind),
                _ => (name.to_owned(), "untyped"),
            };
            if let Some(text) = help.take().and_then(|h| h.split_once(' ').map(|(_, t)| t)) {
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        if let Some(h) = help.take() {
            out.push_str(&format!("# HELP {h}\n"));
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_becomes_prometheus_text() {
        let om = "# HELP neardup_writes Document writes by outcome.\n\
                  # TYPE neardup_writes counter\n\
                  neardup_writes_total{outcome=\"created\"} 6\n\
                  # HELP neardup_documents Documents stored.\n\
                  # TYPE neardup_documents gauge\n\
                  neardup_documents 3\n\
                  # HELP neardup_scan Scan time.\n\
                  # TYPE neardup_scan histogram\n\
                  # UNIT neardup_scan seconds\n\
                  neardup_scan_bucket{le=\"+Inf\"} 1\n\
                  neardup_scan_sum 0.5\n\
                  neardup_scan_count 1\n\
                  # EOF\n";
        let expected = "# HELP neardup_writes_total Document writes by outcome.\n\
                        # TYPE neardup_writes_total counter\n\
                        neardup_writes_total{outcome=\"created\"} 6\n\
                        # HELP neardup_documents Documents stored.\n\
                        # TYPE neardup_documents gauge\n\
                        neardup_documents 3\n\
                        # HELP neardup_scan Scan time.\n\
                        # TYPE neardup_scan histogram\n\
                        neardup_scan_bucket{le=\"+Inf\"} 1\n\
                        neardup_scan_sum 0.5\n\
                        neardup_scan_count 1\n";
        assert_eq!(to_prometheus_text(om), expected);
    }

    #[test]
    fn process_stats_come_from_proc() {
        let p = process_stats();
        assert!(p.rss_bytes > 1 << 20, "{p:?}");
        assert!(p.open_fds > 2, "{p:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(
            p.start_unix_secs <= now && p.start_unix_secs > now - 3600 * 24,
            "{p:?}"
        );
    }
}
