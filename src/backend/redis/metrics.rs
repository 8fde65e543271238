//! `neardup_redis_*`: the traffic to Redis and the cluster's state, as
//! the redis backend exports them on `/metrics`.

use super::conn::Redis;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RedirectLabels {
    kind: &'static str,
}

/// `neardup_redis_*`, registered only with the redis backend (so a memory
/// deployment does not export zeros that mean nothing).
pub struct RedisMetrics {
    registry: Registry,
    /// round trips, commands, errors, timeouts, replication failures,
    /// retries, check failures, reconnects, posting reads, common postings
    /// skipped, postings backfilled, document-frequency log entries
    /// appended, reads, records recounted, log entries applied, rebuilds
    /// for a broken log, webhook deliveries reclaimed and failed
    /// deliveries dropped: counters fed from
    /// [`RedisCounters`](super::conn::RedisCounters)' totals.
    counters: [Counter; 19],
    /// Those totals at the last scrape.
    seen: Mutex<[u64; 19]>,
    up: Gauge,
    primaries: Gauge,
    redirections: Family<RedirectLabels, Gauge>,
}

impl RedisMetrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("neardup_redis");
        let counters: [Counter; 19] = Default::default();
        for (c, (name, help)) in counters.iter().zip([
            ("round_trips", "Round trips to Redis (the commands of one are sent at once)"),
            ("commands", "Commands sent to Redis"),
            ("errors", "Round trips to Redis that failed (an error or the timeout): each answered 503 storage-unavailable"),
            ("timeouts", "Round trips to Redis that outlasted storage.redis.command_timeout_ms"),
            ("replication_failures", "Writes no replica confirmed within storage.redis.replication_timeout_ms (durability = \"replicated\")"),
            ("retries", "if_unique writes that met a concurrent near-duplicate write, withdrew and tried again"),
            ("check_failures", "Checks of the cluster (every storage.redis.watch_interval_ms) that failed"),
            ("reconnects", "Fresh connections to the cluster made after a failed check (a new slot map from the seed nodes)"),
            ("posting_reads", "Posting buckets of the passage index read in full by containment queries, passage lookups and containment scans"),
            ("posting_common_skipped", "Posting buckets skipped as common (more than index.common_fingerprint_docs members): sized, not read, reported in the answer"),
            ("posting_backfilled", "Records whose postings a backfill added (the passage index switched on for stored documents)"),
            ("df_updates", "Entries appended to the document-frequency log: batches of writes, deletes and expiries (index.boilerplate.enabled)"),
            ("df_reads", "Reads of document frequencies (each reads the log to its end first): content-score queries, content scores of matches, frequency lookups"),
            ("df_recounted", "Records this node counted to build its document frequencies (at start, when counts are switched on, when the log lacks entries)"),
            ("df_log_applied", "Entries of the document-frequency log this node applied to its counts"),
            ("df_log_rebuilds", "Times this node counted every record again because the document-frequency log lacked entries it had not read (trimmed, or counts switched off and on)"),
            ("deliveries_reclaimed", "Webhook deliveries another node took and did not settle before their lease ended (a dead or stalled node), taken over by this node"),
            ("failed_deliveries_dropped", "Failed webhook deliveries dropped from a subscription's failed list by its bound (the newest 1,000 are kept)"),
            ("grouped_read_failures", "Reads of posting buckets grouped by node (one script call a primary) that a node refused, read again slot by slot: the slot map moved (resharding, failover), or the script was refused"),
        ]) {
            registry.register(name, help, c.clone());
        }
        let up = Gauge::default();
        registry.register(
            "up",
            "1 when the last check found every primary answering and cluster_state ok (/readyz follows it)",
            up.clone(),
        );
        let primaries = Gauge::default();
        registry.register(
            "primaries",
            "Primaries serving slots at the last check",
            primaries.clone(),
        );
        let redirections = Family::<RedirectLabels, Gauge>::default();
        registry.register(
            "cluster_redirections",
            "MOVED and ASK redirections the primaries have answered since they started, all clients (INFO errorstats, read by each check); the client follows them by itself",
            redirections.clone(),
        );
        Self {
            registry,
            counters,
            seen: Mutex::new([0; 19]),
            up,
            primaries,
            redirections,
        }
    }

    /// Bring the series up to date with `redis`, then append them to `out`.
    pub fn encode(&self, redis: &Redis, out: &mut String) {
        let c = &redis.counters;
        let now = [
            &c.round_trips,
            &c.commands,
            &c.errors,
            &c.timeouts,
            &c.replication_failures,
            &c.retries,
            &c.check_failures,
            &c.reconnects,
            &c.postings_read,
            &c.postings_common,
            &c.postings_backfilled,
            &c.df_updates,
            &c.df_reads,
            &c.df_recounted,
            &c.df_log_applied,
            &c.df_log_rebuilds,
            &c.deliveries_reclaimed,
            &c.failed_dropped,
            &c.grouped_read_failures,
        ]
        .map(|a| a.load(Ordering::Relaxed));
        let mut seen = self.seen.lock().expect("metrics lock");
        for ((counter, now), seen) in self.counters.iter().zip(now).zip(seen.iter_mut()) {
            if now > *seen {
                counter.inc_by(now - *seen);
                *seen = now;
            }
        }
        let health = redis.health();
        self.up
            .set(i64::from(health.as_ref().is_some_and(|h| h.ok)));
        self.primaries.set(health.map_or(0, |h| h.primaries) as i64);
        for (kind, v) in [("moved", &c.moved), ("ask", &c.ask)] {
            self.redirections
                .get_or_create(&RedirectLabels { kind })
                .set(v.load(Ordering::Relaxed) as i64);
        }
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode_registry(out, &self.registry);
    }
}

impl Default for RedisMetrics {
    fn default() -> Self {
        Self::new()
    }
}
