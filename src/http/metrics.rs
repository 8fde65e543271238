//! Prometheus metrics (OpenMetrics text at `GET /metrics`).
//!
//! The registry only: what is counted and how it is exported. The layer
//! that times requests sits with the other layers (`middleware.rs`).
//! One registry per app instance (not a process global), so tests can run
//! many servers in one process. Gauges that mirror engine state are set at
//! scrape time rather than on every write.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

use crate::engine::{Engine, QueryOutcome};
use crate::persist::{SnapshotInfo, Store};
use std::sync::atomic::Ordering;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    pub route: String,
    pub method: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ComponentLabels {
    pub component: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: &'static str,
}

fn scan_histogram() -> Histogram {
    // 1 ms .. ~65 s
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// The log's counter totals at the last scrape.
#[derive(Clone, Copy, Debug, Default)]
struct WalSeen {
    appends: u64,
    append_nanos: u64,
    fsyncs: u64,
    fsync_nanos: u64,
}

pub struct Metrics {
    registry: Registry,
    /// Requests and their latency by route, method and status: written by
    /// the tracking layer (`middleware::track`) through [`Metrics::observe_request`].
    requests: Family<HttpLabels, Counter>,
    latency: Family<HttpLabels, Histogram>,
    documents: Gauge,
    memory: Family<ComponentLabels, Gauge>,
    query_candidates: Histogram,
    candidates_verified: Counter,
    candidates_rejected: Counter,
    rejected_ratio: Gauge<f64, AtomicU64>,
    truncated_queries: Counter,
    requests_shed: Counter,
    writes: Family<OutcomeLabels, Counter>,
    snapshot_seconds: Histogram,
    snapshot_bytes: Gauge,
    wal_appends: Counter,
    wal_append_seconds: Counter<f64, AtomicU64>,
    wal_fsyncs: Counter,
    wal_fsync_seconds: Counter<f64, AtomicU64>,
    wal_bytes: Gauge,
    /// Whole-index duplicate scans by kind (`groups`, `pairs`).
    scans: Family<KindLabels, Counter>,
    scan_seconds: Family<KindLabels, Histogram>,
    /// The duration of the last finished scan of each kind (for `Retry-After`).
    last_scan: std::sync::Mutex<std::collections::HashMap<&'static str, f64>>,
    /// WAL counter values already exported (the WAL keeps plain atomics).
    wal_seen: std::sync::Mutex<WalSeen>,
}

fn latency_histogram() -> Histogram {
    // 25 µs .. ~0.8 s
    Histogram::new(exponential_buckets(0.000_025, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("neardup");
        let requests = Family::<HttpLabels, Counter>::default();
        let latency = Family::<HttpLabels, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let documents = Gauge::default();
        let memory = Family::<ComponentLabels, Gauge>::default();
        let query_candidates = Histogram::new(exponential_buckets(1.0, 2.0, 15));
        let candidates_verified = Counter::default();
        let candidates_rejected = Counter::default();
        let rejected_ratio = Gauge::<f64, AtomicU64>::default();
        let truncated_queries = Counter::default();
        let requests_shed = Counter::default();
        let writes = Family::<OutcomeLabels, Counter>::default();
        let snapshot_seconds = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        let snapshot_bytes = Gauge::default();
        let wal_appends = Counter::default();
        let wal_append_seconds = Counter::<f64, AtomicU64>::default();
        let wal_fsyncs = Counter::default();
        let wal_fsync_seconds = Counter::<f64, AtomicU64>::default();
        let wal_bytes = Gauge::default();
        registry.register(
            "snapshot_duration_seconds",
            "Time to write a snapshot",
            snapshot_seconds.clone(),
        );
        registry.register(
            "snapshot_size_bytes",
            "Size of the last snapshot",
            snapshot_bytes.clone(),
        );
        registry.register(
            "wal_appends",
            "Records appended to the write-ahead log",
            wal_appends.clone(),
        );
        registry.register(
            "wal_append_seconds",
            "Time spent appending records to the log buffer (divide by wal_appends_total for the mean)",
            wal_append_seconds.clone(),
        );
        registry.register(
            "wal_fsyncs",
            "fsync calls on the write-ahead log",
            wal_fsyncs.clone(),
        );
        registry.register(
            "wal_fsync_seconds",
            "Time spent in log fsyncs",
            wal_fsync_seconds.clone(),
        );
        registry.register(
            "wal_size_bytes",
            "Bytes in live log segments",
            wal_bytes.clone(),
        );
        registry.register(
            "http_requests",
            "HTTP requests by route, method and status",
            requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "HTTP request latency by route, method and status",
            latency.clone(),
        );
        registry.register("documents", "Documents stored", documents.clone());
        registry.register(
            "memory_bytes",
            "Estimated heap bytes by component",
            memory.clone(),
        );
        registry.register(
            "query_candidates",
            "Distinct LSH candidates verified per similarity query",
            query_candidates.clone(),
        );
        registry.register(
            "candidates_verified",
            "LSH candidates checked by exact Jaccard",
            candidates_verified.clone(),
        );
        registry.register(
            "candidates_rejected",
            "LSH candidates whose exact Jaccard fell below the threshold",
            candidates_rejected.clone(),
        );
        registry.register(
            "candidates_rejected_ratio",
            "Fraction of all verified candidates rejected by exact verification",
            rejected_ratio.clone(),
        );
        registry.register(
            "queries_truncated",
            "Queries whose candidate list was cut at index.max_candidates",
            truncated_queries.clone(),
        );
        registry.register(
            "requests_shed",
            "Requests refused with 503 because server.max_concurrent_requests were in flight",
            requests_shed.clone(),
        );
        registry.register("writes", "Document writes by outcome", writes.clone());
        let scans = Family::<KindLabels, Counter>::default();
        let scan_seconds = Family::<KindLabels, Histogram>::new_with_constructor(
            scan_histogram as fn() -> Histogram,
        );
        registry.register(
            "duplicate_scans",
            "Whole-index duplicate scans (GET /duplicates computations, /duplicates/pairs streams)",
            scans.clone(),
        );
        registry.register(
            "duplicate_scan_duration_seconds",
            "Time of a whole-index duplicate scan, by kind",
            scan_seconds.clone(),
        );
        Self {
            scans,
            scan_seconds,
            registry,
            requests,
            latency,
            documents,
            memory,
            query_candidates,
            candidates_verified,
            candidates_rejected,
            rejected_ratio,
            truncated_queries,
            requests_shed,
            writes,
            snapshot_seconds,
            snapshot_bytes,
            wal_appends,
            wal_append_seconds,
            wal_fsyncs,
            wal_fsync_seconds,
            wal_bytes,
            wal_seen: Default::default(),
            last_scan: Default::default(),
        }
    }
}

impl Metrics {
    /// Record the verification work of one query.
    pub fn observe_query(&self, q: &QueryOutcome) {
        self.query_candidates.observe(q.candidates as f64);
        self.candidates_verified.inc_by(q.candidates as u64);
        self.candidates_rejected.inc_by(q.rejected as u64);
        if q.truncated {
            self.truncated_queries.inc();
        }
    }

    /// A finished whole-index scan of `kind` (`groups` or `pairs`).
    pub fn observe_scan(&self, kind: &'static str, seconds: f64) {
        let labels = KindLabels { kind };
        self.scans.get_or_create(&labels).inc();
        self.scan_seconds.get_or_create(&labels).observe(seconds);
        self.last_scan
            .lock()
            .expect("metrics lock")
            .insert(kind, seconds);
    }

    /// How long the last finished scan of `kind` took.
    pub fn last_scan_seconds(&self, kind: &str) -> Option<f64> {
        self.last_scan
            .lock()
            .expect("metrics lock")
            .get(kind)
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

    pub fn observe_write(&self, outcome: &'static str) {
        self.writes.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    pub fn observe_snapshot(&self, info: &SnapshotInfo) {
        self.snapshot_seconds.observe(info.milliseconds / 1e3);
        self.snapshot_bytes.set(info.bytes as i64);
    }

    /// Move the exported WAL counters up to the log's own totals.
    fn export_wal(&self, store: &Store) {
        let wal = store.wal();
        let c = &wal.counters;
        let now = WalSeen {
            appends: c.appends.load(Ordering::Relaxed),
            append_nanos: c.append_nanos.load(Ordering::Relaxed),
            fsyncs: c.fsyncs.load(Ordering::Relaxed),
            fsync_nanos: c.fsync_nanos.load(Ordering::Relaxed),
        };
        let mut seen = self.wal_seen.lock().expect("metrics lock");
        let since = |now: u64, seen: u64| now.saturating_sub(seen);
        self.wal_appends.inc_by(since(now.appends, seen.appends));
        self.wal_append_seconds
            .inc_by(since(now.append_nanos, seen.append_nanos) as f64 / 1e9);
        self.wal_fsyncs.inc_by(since(now.fsyncs, seen.fsyncs));
        self.wal_fsync_seconds
            .inc_by(since(now.fsync_nanos, seen.fsync_nanos) as f64 / 1e9);
        *seen = now;
        self.wal_bytes.set(wal.bytes() as i64);
    }

    /// The OpenMetrics text, with engine gauges refreshed.
    pub fn render(&self, engine: &Engine, store: Option<&Store>) -> String {
        if let Some(store) = store {
            self.export_wal(store);
        }
        self.documents.set(engine.len() as i64);
        let m = engine.memory();
        for (component, bytes) in [
            ("shingles", m.shingles_bytes),
            ("signatures", m.signatures_bytes),
            ("ids", m.ids_bytes),
            ("metadata", m.metadata_bytes),
            ("records_overhead", m.records_overhead_bytes),
            ("id_map", m.id_map_bytes),
            ("doc_map", m.doc_map_bytes),
            ("lsh", m.lsh_bytes),
        ] {
            self.memory
                .get_or_create(&ComponentLabels { component })
                .set(bytes as i64);
        }
        let verified = self.candidates_verified.get();
        let ratio = if verified == 0 {
            0.0
        } else {
            self.candidates_rejected.get() as f64 / verified as f64
        };
        self.rejected_ratio.set(ratio);
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
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
    use super::to_prometheus_text;

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
}
