//! The redis backend: a collection's records and LSH buckets in a Redis
//! Cluster (or one Redis), shared by every neardup node that points at it.
//! The layout, the round trips and the guarantees are in docs/redis-layout.md
//! the bytes in [`codec`]; the connection in [`conn`].
//!
//! The node keeps an [`Engine`] per collection for its recipe, clock and
//! retention only: it signs texts, computes band keys, decides expiry and
//! verifies candidates exactly, as the memory backend does, so both give
//! the same answers (the same bits). Redis holds what must be shared.
//!
//! [`RedisIndex`] is defined here with what every path uses (opening a
//! collection, its settings and counters); each path is an `impl RedisIndex`
//! of its own file, with the scripts it runs:
//!
//! - `write.rs`: insert, insert_many, the commit, remove (entries first,
//!   the record last);
//! - `read.rs`: get, text, samples, export, similar_to, compare;
//! - `unique.rs`: insert_if_unique (publish, then verify);
//! - `scan.rs`: scan_pairs, every pair of a collection, band by band;
//! - `sweep.rs`: purge_expired and the due index it reads;
//! - `passages.rs`: the passage index (posting buckets): containment
//!   queries, passage lookups, containment pairs, switching it on and off;
//! - `df_log.rs`: document frequency: every committed write, delete and
//!   expiry appended to a log in Redis, the counts kept on every node that
//!   follows it;
//! - `boilerplate.rs`: reading those counts, switching them, the
//!   registered templates, and what content scores read of them;
//! - `events.rs`: the event log (a Stream), webhook subscriptions (a
//!   consumer group each) and their deliveries (issue 45);
//! - `decisions.rs`: the review decisions (a hash and its version, issue 46);
//! - `catalog.rs`: the catalog of named collections every node shares;
//! - `conn.rs`, `codec.rs`, `metrics.rs`: the connection, the key layout and
//!   record encoding, `neardup_redis_*`.

mod boilerplate;
mod catalog;
pub mod codec;
pub mod conn;
mod decisions;
mod df_log;
mod events;
mod metrics;

mod passages;
mod read;
mod scan;
mod sweep;
mod unique;
mod write;

use super::BackendError;
use crate::engine::Engine;
pub use catalog::{Created, Heartbeat, SharedCatalog, HEARTBEAT_MS};
use codec::Keys;
pub use conn::{call, script_call, Call, Conn, Redis, RedisCounters, Script};
pub use events::{DeliveryTiming, FAILED_KEPT};
pub use read::Export;
pub use scan::ScanPair;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Instant;

/// Records read per trip by a whole-collection scan.
const SCAN_READ: usize = 4096;

/// A random `gen` per write: a process-random key over a counter.
fn new_gen() -> u32 {
    static STATE: LazyLock<std::collections::hash_map::RandomState> =
        LazyLock::new(std::collections::hash_map::RandomState::new);
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    STATE.hash_one(COUNTER.fetch_add(1, Ordering::Relaxed)) as u32
}

/// One collection stored in Redis.
pub struct RedisIndex {
    /// The recipe, clock and retention (its maps stay empty).
    engine: Arc<Engine>,
    redis: Arc<Redis>,
    keys: Keys,
    /// The document counter as last read (refreshed in the background).
    documents: AtomicU64,
    /// Keep each write's text (zstd) beside its record (`store_text`).
    store_text: std::sync::atomic::AtomicBool,
    /// A reindex runs: writes wait (503) until it ends.
    paused: std::sync::atomic::AtomicBool,
    /// When this node next walks every record instead of reading the due
    /// index (`None`: at its next sweep); see [`WALK_EVERY`](sweep::WALK_EVERY).
    next_walk: std::sync::Mutex<Option<Instant>>,
    /// Moved by every switch of the passage index (a delayed repeat of an
    /// older switch sees it moved and does nothing).
    passage_epoch: Arc<AtomicU64>,
    /// A backfill of the postings runs on this node.
    backfilling: std::sync::atomic::AtomicBool,
    /// Moved by every switch of document frequency (as `passage_epoch`).
    df_epoch: Arc<AtomicU64>,
    /// This node's document frequencies, fed by the log (df_log.rs).
    df_tail: Arc<df_log::DfTail>,
    /// The templates' version this node's engine has (`u64::MAX`: none read).
    templates_seen: Arc<AtomicU64>,
    /// The lease of a webhook delivery this node takes (events.rs).
    delivery_timing: Arc<std::sync::Mutex<DeliveryTiming>>,
    /// The review decisions as last read and the version they are at
    /// (decisions.rs: checked against the shared version per call).
    decisions_seen: decisions::Cached,
}

fn corrupt(key: &str, e: impl std::fmt::Display) -> BackendError {
    BackendError::Internal(format!("{key}: {e}"))
}

/// The metadata key of the collection `probe` names, if it exists.
async fn stored_meta(redis: &Redis, probe: &Keys) -> Result<Option<String>, BackendError> {
    let mut get = redis::cmd("GET");
    get.arg(probe.meta());
    redis.one("reading the collection layout", get).await
}

/// Whether a layout says `field=1` (the passage index's `passages`, the
/// document frequency's `df`: that what it names is complete).
fn layout_flag(meta: &str, field: &str) -> bool {
    meta.split(';')
        .filter_map(|kv| kv.split_once('='))
        .any(|(k, v)| k == field && v == "1")
}

/// The entry a layout string gets for `field` `on`.
fn layout_entry(field: &str, on: bool) -> String {
    format!("{field}={}", u8::from(on))
}

/// Keys `UNLINK`ed per trip by [`unlink_keys`].
const UNLINK_PART: usize = 1000;

/// `UNLINK` every one of `keys`, [`UNLINK_PART`] a trip.
async fn unlink_keys(redis: &Redis, keys: &[String], what: &str) -> Result<(), BackendError> {
    for part in keys.chunks(UNLINK_PART) {
        let calls = part
            .iter()
            .map(|k| {
                let mut unlink = redis::cmd("UNLINK");
                unlink.arg(k);
                call(unlink)
            })
            .collect();
        redis.calls(what, calls).await?;
    }
    Ok(())
}

/// The text recipe a layout names (`text=`; `"1"` if none).
fn stored_recipe(meta: &str) -> String {
    meta.split(';')
        .find_map(|kv| kv.strip_prefix("text="))
        .unwrap_or("1")
        .to_owned()
}

/// The text recipe version the collection `name` in `redis` is written
/// with: `None` if it has no keys yet (a new deployment).
pub(super) async fn written_text_version(
    redis: &Redis,
    name: &str,
) -> Result<Option<u8>, BackendError> {
    let probe = Keys::new(&redis.settings.key_prefix, name, 0);
    Ok(stored_meta(redis, &probe)
        .await?
        .map(|meta| crate::text::recipe_version(&stored_recipe(&meta))))
}

impl RedisIndex {
    /// Set `field=` of the collection's layout key to 1 (`complete`) or 0.
    async fn mark_layout(
        &self,
        field: &str,
        complete: bool,
        what: &str,
    ) -> Result<(), BackendError> {
        let call = script_call(
            &passages::META_SET,
            vec![self.keys.meta()],
            vec![
                field.as_bytes().to_vec(),
                (if complete { "1" } else { "0" }).as_bytes().to_vec(),
            ],
        );
        self.redis.calls(what, vec![call]).await.map(drop)
    }

    /// The collection `name` in `redis`, laid out as its metadata key says
    /// (written by the first node that opens it: the bucket-hash size `g`
    /// is fixed from then on, so every node computes the same keys).
    pub async fn open(
        engine: Arc<Engine>,
        redis: Arc<Redis>,
        name: &str,
    ) -> Result<Self, BackendError> {
        let prefix = redis.settings.key_prefix.clone();
        let probe = Keys::new(&prefix, name, 0);
        let wanted = codec::group_bits_for(redis.settings.expected_documents);
        let recipe = engine.params().normalize.recipe_name();
        // A new collection's postings are complete if it keeps the index.
        let meta = format!(
            "layout=1;group_bits={wanted};{};text={recipe}",
            passages::layout_field(engine.passage_index()),
        );
        let mut set = redis::cmd("SET");
        set.arg(probe.meta()).arg(&meta).arg("NX");
        let _: Option<String> = redis.one("writing the collection layout", set).await?;
        let stored = stored_meta(&redis, &probe).await?.unwrap_or(meta);
        let group_bits = stored
            .split(';')
            .find_map(|kv| kv.strip_prefix("group_bits="))
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|g| *g <= 24)
            .ok_or_else(|| corrupt(&probe.meta(), format!("unreadable layout {stored:?}")))?;
        // The text recipe the keys are written with: a layout of the
        // release before recipes had versions names none (version 1).
        let written = stored_recipe(&stored);
        if written != recipe {
            return Err(BackendError::Internal(format!(
                "collection {name:?} in redis is written with text recipe {written} \
                 (normalize.version and steps) and this node's recipe is {recipe}: \
                 configure the same, or reindex the collection"
            )));
        }
        let this = Self {
            engine,
            redis,
            keys: Keys::new(&prefix, name, group_bits),
            documents: AtomicU64::new(0),
            store_text: std::sync::atomic::AtomicBool::new(false),
            paused: std::sync::atomic::AtomicBool::new(false),
            next_walk: std::sync::Mutex::new(None),
            passage_epoch: Arc::new(AtomicU64::new(0)),
            backfilling: std::sync::atomic::AtomicBool::new(false),
            df_epoch: Arc::new(AtomicU64::new(0)),
            df_tail: Arc::default(),
            templates_seen: Arc::new(AtomicU64::new(u64::MAX)),
            delivery_timing: Arc::default(),
            decisions_seen: Arc::default(),
        };
        this.refresh_count().await?;
        // The passage index as configured against what the layout says the
        // stored data has: postings added if they are missing (a collection
        // written without the index, or while it was off), or the layout
        // told they are no longer kept whole (this node does not write them;
        // they are left for nodes that still read them, and dropped when the
        // index is switched off).
        let complete = passages::layout_has_postings(&stored);
        if this.passage_index() && !complete {
            this.build_postings(true).await?;
        } else if !this.passage_index() && complete {
            this.mark_postings(false).await?;
        }
        // Document frequency: counts of the layout that kept them in Redis
        // go; this node counts every record (then follows the log) before
        // it serves, if the collection counts.
        if boilerplate::layout_has_legacy_counts(&stored) {
            this.drop_legacy_counts().await?;
        }
        if this.engine.boilerplate_on() {
            this.df_rebuild().await?;
        }
        Ok(this)
    }

    /// Another handle on the same collection (for a task that outlives a
    /// call): the same engine, connection, keys and switch epoch.
    fn shadow(&self) -> Self {
        Self {
            engine: Arc::clone(&self.engine),
            redis: Arc::clone(&self.redis),
            keys: self.keys.clone(),
            documents: AtomicU64::new(self.documents.load(Ordering::Relaxed)),
            store_text: std::sync::atomic::AtomicBool::new(self.stores_text()),
            paused: std::sync::atomic::AtomicBool::new(self.paused.load(Ordering::Relaxed)),
            next_walk: std::sync::Mutex::new(None),
            passage_epoch: Arc::clone(&self.passage_epoch),
            backfilling: std::sync::atomic::AtomicBool::new(false),
            df_epoch: Arc::clone(&self.df_epoch),
            df_tail: Arc::clone(&self.df_tail),
            templates_seen: Arc::clone(&self.templates_seen),
            delivery_timing: Arc::clone(&self.delivery_timing),
            decisions_seen: Arc::clone(&self.decisions_seen),
        }
    }

    /// The passage index's state, for `/stats`.
    pub fn passage_stats(&self) -> serde_json::Value {
        serde_json::json!({
            "on": self.passage_index(),
            "posting_hashes": 1u64 << self.keys.posting_bits(),
            "backfilling": self.backfilling.load(Ordering::Relaxed),
        })
    }

    /// Document frequency's state, for `/stats`.
    pub fn boilerplate_stats(&self) -> serde_json::Value {
        let table = self.df_tail.table();
        serde_json::json!({
            "on": self.engine.boilerplate_on(),
            "recounting": self.recounting(),
            "documents": table.as_ref().map_or(0, |t| t.docs()),
            "versions": self.df_tail.versions(),
            "node_bytes": self.df_tail.bytes(),
        })
    }

    /// Keep the texts of writes from now on (or stop).
    pub fn set_store_text(&self, on: bool) {
        self.store_text.store(on, Ordering::Relaxed);
    }

    /// Refuse writes (503) while a reindex copies the collection.
    pub fn set_paused(&self, on: bool) {
        self.paused.store(on, Ordering::Relaxed);
    }

    pub(crate) fn check_writable(&self) -> Result<(), BackendError> {
        if self.paused.load(Ordering::Relaxed) {
            return Err(BackendError::Unavailable(
                "the collection is being reindexed; writes resume when it finishes".into(),
            ));
        }
        Ok(())
    }

    pub fn stores_text(&self) -> bool {
        self.store_text.load(Ordering::Relaxed)
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    pub fn redis(&self) -> &Arc<Redis> {
        &self.redis
    }

    /// Stored documents as last counted.
    pub fn documents(&self) -> usize {
        self.documents.load(Ordering::Relaxed) as usize
    }

    /// Read the document counter.
    pub async fn refresh_count(&self) -> Result<usize, BackendError> {
        let mut get = redis::cmd("GET");
        get.arg(self.keys.counter());
        let n: Option<i64> = self.redis.one("reading the document count", get).await?;
        let n = n.unwrap_or(0).max(0) as u64;
        self.documents.store(n, Ordering::Relaxed);
        Ok(n as usize)
    }

    fn ttl_ms(&self) -> u64 {
        self.engine
            .retention()
            .map_or(0, |d| (d.as_millis() as u64).max(1))
    }

    /// The write counter: changes whenever a document is written or
    /// deleted through any node.
    pub async fn write_version(&self) -> Result<u64, BackendError> {
        let mut get = redis::cmd("GET");
        get.arg(self.keys.writes());
        let n: Option<u64> = self.redis.one("reading the write counter", get).await?;
        Ok(n.unwrap_or(0))
    }
}

impl RedisIndex {
    /// Copy the keys `names` (each `(from, to)`) of this index to `to`,
    /// whole (`DUMP`/`RESTORE ... REPLACE`: a stream keeps its entry ids and
    /// consumer groups), then wait for the copies to reach the replicas;
    /// keys that do not exist are skipped. How many were copied. `what`
    /// names the keys in errors ("the event log").
    pub(super) async fn copy_keys_to(
        &self,
        to: &RedisIndex,
        names: &[(String, String)],
        what: &str,
    ) -> Result<usize, BackendError> {
        let dumps = names
            .iter()
            .map(|(from, _)| {
                let mut dump = redis::cmd("DUMP");
                dump.arg(from);
                call(dump)
            })
            .collect();
        let dumps = self
            .redis
            .calls(&format!("reading {what} to carry it over"), dumps)
            .await?;
        let restores: Vec<Call> = names
            .iter()
            .zip(dumps)
            .filter_map(|((_, dest), dump)| match dump {
                redis::Value::BulkString(bytes) => {
                    let mut restore = redis::cmd("RESTORE");
                    restore.arg(dest).arg(0).arg(bytes).arg("REPLACE");
                    Some(call(restore))
                }
                _ => None,
            })
            .collect();
        let n = restores.len();
        if n > 0 {
            to.redis
                .calls(&format!("carrying {what} over"), restores)
                .await?;
            to.redis.replicate().await?;
        }
        Ok(n)
    }
}
