//! The collection catalog in Redis: what every neardup node sharing a
//! cluster reads to serve the same named collections, and the key space of
//! each collection's incarnations.
//!
//! The catalog is one hash, `{prefix}:catalog`: field = the collection's
//! name, value = its entry (JSON the collections module writes and reads:
//! settings, creation time and an *incarnation*, a random tag in every key of
//! the collection, so a name deleted and created again never meets the old
//! collection's keys). Creating, changing and deleting are single scripts on
//! that hash (the commit points: `scripts/catalog_create.lua`,
//! `scripts/catalog_swap.lua`). A reindex proves itself alive by a heartbeat
//! key, `{prefix}:reindexing:{name}`. What the entries mean, and how a node
//! follows the catalog, is the collections module's (`collections/shared.rs`);
//! this is how they are kept.

use super::{script_call, Call, Redis, RedisIndex, Script};
use crate::backend::{Backend, BackendError};
use crate::config::RedisSettings;
use crate::engine::Engine;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

/// Add an entry unless the name is taken or the catalog is full.
/// `KEYS[1]` the catalog; `ARGV[1]` the name, `ARGV[2]` the entry, `ARGV[3]` the
/// most named collections. Returns {'created'}, {'exists', entry} or {'full'}.
static CREATE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/catalog_create.lua")));

/// Replace (`ARGV[3]` an entry) or delete (`ARGV[3]` '') the entry of `ARGV[1]`
/// if it is still the incarnation `ARGV[2]`. `KEYS[1]` the catalog. Returns 1
/// if it did.
static SWAP: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/catalog_swap.lua")));

/// How long a reindex's heartbeat lives without being renewed: past it, any
/// node's watch takes the reindex for dead and ends it (writes resume on the
/// old index).
pub const HEARTBEAT_MS: u64 = 10_000;

/// What [`SharedCatalog::create`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// The entry is in the catalog now.
    Created,
    /// The name was taken: its entry.
    Exists(String),
    /// The catalog holds the most named collections it may.
    Full,
}

/// The catalog and the connection every collection of this node shares.
pub struct SharedCatalog {
    redis: Arc<Redis>,
}

impl std::fmt::Debug for SharedCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedCatalog")
            .field("key_prefix", &self.redis.settings.key_prefix)
            .finish()
    }
}

/// A script call on one key with string arguments.
fn call_script(script: &'static Script, key: String, args: Vec<String>) -> Call {
    script_call(
        script,
        vec![key],
        args.into_iter().map(String::into_bytes).collect(),
    )
}

/// The name a collection's keys carry: `name.incarnation` (`name` alone for
/// the incarnation-less `default`).
fn storage_name(name: &str, incarnation: &str) -> String {
    if incarnation.is_empty() {
        name.to_owned()
    } else {
        format!("{name}.{incarnation}")
    }
}

impl SharedCatalog {
    /// The catalog of the cluster `settings` name (connected on first use).
    pub fn new(settings: RedisSettings) -> Self {
        Self {
            redis: Arc::new(Redis::new(settings)),
        }
    }

    fn key(&self) -> String {
        format!("{{{}}}:catalog", self.redis.settings.key_prefix)
    }

    fn heartbeat_key(&self, name: &str) -> String {
        format!("{{{}}}:reindexing:{name}", self.redis.settings.key_prefix)
    }

    /// True while the last check of the cluster found every primary serving.
    pub fn is_healthy(&self) -> bool {
        self.redis.is_healthy()
    }

    /// Check the cluster now (what [`Self::is_healthy`] answers next).
    pub async fn check(&self) -> bool {
        self.redis.check().await.ok
    }

    /// How often a node reads the catalog (`storage.redis.watch_interval_ms`).
    pub fn watch_interval(&self) -> Duration {
        Duration::from_millis(self.redis.settings.watch_interval_ms)
    }

    /// How long after a change no request can still be using what it
    /// replaced (a round trip's timeout, and a margin).
    fn write_grace(&self) -> Duration {
        Duration::from_millis(self.redis.settings.command_timeout_ms + 500)
    }

    /// Append `neardup_redis_*` to `out` (OpenMetrics text).
    pub fn encode_metrics(&self, out: &mut String) {
        self.redis.encode_metrics(out);
    }

    /// A new incarnation tag: random, 12 hex digits.
    pub fn new_incarnation() -> String {
        use std::hash::BuildHasher;
        let state = std::collections::hash_map::RandomState::new();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{:012x}", state.hash_one(nanos) & 0xffff_ffff_ffff)
    }

    /// Every entry, name → its JSON (one trip).
    pub async fn read_all(&self) -> Result<Vec<(String, String)>, BackendError> {
        let mut all = redis::cmd("HGETALL");
        all.arg(self.key());
        self.redis.one("reading the collection catalog", all).await
    }

    /// The entry of `name`, if there is one.
    pub async fn read(&self, name: &str) -> Result<Option<String>, BackendError> {
        let mut get = redis::cmd("HGET");
        get.arg(self.key()).arg(name);
        self.redis.one("reading the collection catalog", get).await
    }

    /// Add `entry` under `name` unless the name is taken or the catalog
    /// already holds `max_named` entries (one script: the commit point).
    pub async fn create(
        &self,
        name: &str,
        entry: String,
        max_named: usize,
    ) -> Result<Created, BackendError> {
        let inv = call_script(
            &CREATE,
            self.key(),
            vec![name.into(), entry, max_named.to_string()],
        );
        let mut out = self.redis.calls("creating a collection", vec![inv]).await?;
        let answer: Vec<String> = redis::from_redis_value(out.pop().expect("one answer"))
            .map_err(|e| BackendError::Internal(format!("catalog script answer: {e}")))?;
        match answer.first().map(String::as_str) {
            Some("created") => Ok(Created::Created),
            Some("exists") => Ok(Created::Exists(answer.get(1).cloned().unwrap_or_default())),
            Some("full") => Ok(Created::Full),
            other => Err(BackendError::Internal(format!(
                "catalog script said {other:?}"
            ))),
        }
    }

    /// The catalog's one change: replace (`value` an entry) or delete
    /// (`value` empty) the entry of `name` if it is still `incarnation`;
    /// true if it was.
    pub async fn swap(
        &self,
        name: &str,
        incarnation: &str,
        value: String,
    ) -> Result<bool, BackendError> {
        let inv = call_script(
            &SWAP,
            self.key(),
            vec![name.into(), incarnation.into(), value],
        );
        let mut out = self
            .redis
            .calls("changing the collection catalog", vec![inv])
            .await?;
        let done: i64 = redis::from_redis_value(out.pop().expect("one answer"))
            .map_err(|e| BackendError::Internal(format!("catalog script answer: {e}")))?;
        Ok(done == 1)
    }

    /// The text recipe version the `default` collection's keys are
    /// written with (version 1 for keys of the release before versions);
    /// `None` if it has none yet.
    pub async fn default_text_version(&self) -> Result<Option<u8>, BackendError> {
        super::written_text_version(&self.redis, "default").await
    }

    /// The incarnation `incarnation` of collection `name`, signed and
    /// verified by `engine`'s recipe.
    pub async fn open(
        &self,
        engine: Arc<Engine>,
        name: &str,
        incarnation: &str,
    ) -> Result<Backend, BackendError> {
        let index = RedisIndex::open(
            engine,
            Arc::clone(&self.redis),
            &storage_name(name, incarnation),
        )
        .await?;
        tracing::debug!(
            collection = name,
            incarnation,
            documents = index.documents(),
            group_bits = index.keys().group_bits(),
            "index opened in redis"
        );
        Ok(Backend::Redis(index))
    }

    /// Remove the keys of the incarnation `incarnation` of `name` in the
    /// background, once no request can still be writing them (a delete, or
    /// the index a reindex replaced). `what` names it in the log.
    pub fn remove_later(&self, name: &str, incarnation: &str, what: &'static str) {
        let redis = Arc::clone(&self.redis);
        let base = format!(
            "{}:{}",
            redis.settings.key_prefix,
            storage_name(name, incarnation)
        );
        let wait = self.write_grace();
        let collection = name.to_owned();
        tokio::runtime::Handle::current().spawn(async move {
            tokio::time::sleep(wait).await;
            match remove_keys(&redis, &base).await {
                Ok(n) => tracing::info!(collection, base, keys = n, "{what}: keys removed from redis"),
                Err(e) => tracing::error!(collection, base, error = %e, "{what}: removing its keys failed; they stay in redis (never read again)"),
            }
        });
    }

    /// Start renewing the heartbeat of a reindex of `name`; it stops (and
    /// the key goes) when the returned guard is dropped.
    pub fn heartbeat(&self, name: &str) -> Heartbeat {
        let alive = Arc::new(AtomicBool::new(true));
        let (redis, beat, key) = (
            Arc::clone(&self.redis),
            Arc::clone(&alive),
            self.heartbeat_key(name),
        );
        tokio::runtime::Handle::current().spawn(async move {
            while beat.load(Ordering::Relaxed) {
                let mut set = redis::cmd("SET");
                set.arg(&key).arg(1).arg("PX").arg(HEARTBEAT_MS);
                let _: Result<(), _> = redis.one("renewing a reindex heartbeat", set).await;
                tokio::time::sleep(Duration::from_millis(HEARTBEAT_MS / 5)).await;
            }
            let mut del = redis::cmd("DEL");
            del.arg(&key);
            let _: Result<i64, _> = redis.one("ending a reindex heartbeat", del).await;
        });
        Heartbeat { alive }
    }

    /// True while a reindex of `name` renews its heartbeat.
    pub async fn heartbeat_alive(&self, name: &str) -> Result<bool, BackendError> {
        let mut get = redis::cmd("GET");
        get.arg(self.heartbeat_key(name));
        let beat: Option<String> = self.redis.one("reading a reindex heartbeat", get).await?;
        Ok(beat.is_some())
    }
}

/// A reindex's heartbeat, renewed until this is dropped.
pub struct Heartbeat {
    alive: Arc<AtomicBool>,
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.alive.store(false, Ordering::Relaxed);
    }
}

/// Remove every key of the collection whose keys start with `base`
/// (`base:…` and `{base}:…`); how many.
async fn remove_keys(redis: &Redis, base: &str) -> Result<usize, BackendError> {
    let mut keys = redis.scan_all(&format!("{base}:*")).await?;
    keys.extend(redis.scan_all(&format!("{{{base}}}:*")).await?);
    let n = keys.len();
    super::unlink_keys(redis, &keys, "removing a deleted collection's keys").await?;
    Ok(n)
}
