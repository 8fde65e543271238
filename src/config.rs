//! Typed, layered settings.
//!
//! Layers, later wins: compiled-in defaults → `config/default.toml` (if
//! present in the working directory) → `--config FILE` → environment
//! variables `NEARDUP_<SECTION>__<KEY>` (e.g. `NEARDUP_INDEX__THRESHOLD=0.9`,
//! `NEARDUP_SERVER__BIND=127.0.0.1:9000`; lists as arrays,
//! `NEARDUP_AUTH__API_KEYS='["k1","k2"]'`). Unknown keys are errors, so a
//! typo never silently falls back to a default.
//!
//! [`Settings`] is what the layers say; [`Config`] is settings checked once
//! ([`Settings::validate`], which [`Settings::load`] runs), holding what
//! they resolve to: the listen address and the engine's parameters with
//! their LSH banding. Everything that starts (the server, the offline
//! command) takes a `Config`, so nothing validates twice.

use crate::engine::{EngineParams, EngineParamsError, IndexParams, Measure, Score, ValidParams};
use crate::text::{NormalizeOptions, ShingleOptions};
use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The file read after the compiled-in defaults, relative to the working directory.
pub const DEFAULT_CONFIG_FILE: &str = "config/default.toml";

/// Environment variables `NEARDUP_<SECTION>__<KEY>` override every file.
pub const ENV_PREFIX: &str = "NEARDUP_";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub server: ServerSettings,
    pub index: IndexParams,
    pub shingle: ShingleOptions,
    pub normalize: NormalizeOptions,
    /// The `default` collection's retention (named collections have their own).
    pub retention: Retention,
    /// The `default` collection's originals (and the default of new collections).
    pub originals: Originals,
    pub query: QuerySettings,
    pub storage: StorageSettings,
    pub log: LogSettings,
    pub auth: AuthSettings,
    pub limits: LimitsSettings,
    pub ui: UiSettings,
    /// Webhook deliveries (issue 45).
    pub webhooks: WebhookSettings,
    /// The event log and feed (issue 45).
    pub events: EventSettings,
    /// The `default` collection's review settings (and the default of new
    /// collections; issue 46).
    pub review: Review,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSettings {
    /// Listen address; port 0 picks a free port.
    pub bind: String,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Most documents in one `POST /documents/batch`.
    pub max_batch: usize,
    /// Requests running longer than this are answered 503.
    pub request_timeout_secs: u64,
    /// After SIGTERM/SIGINT: keep serving this long with `/readyz`
    /// answering 503, so load balancers stop routing here first.
    pub shutdown_delay_secs: u64,
    /// Time in-flight requests then get to finish.
    pub shutdown_grace_secs: u64,
    /// Requests handled at once; more are refused at once with 503
    /// (`/healthz`, `/readyz` and `/metrics` are never refused).
    pub max_concurrent_requests: usize,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            bind: "0.0.0.0:8080".into(),
            max_body_bytes: 16 * 1024 * 1024,
            max_batch: 10_000,
            request_timeout_secs: 30,
            shutdown_delay_secs: 0,
            shutdown_grace_secs: 10,
            max_concurrent_requests: 512,
        }
    }
}

/// How long documents are kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Retention {
    /// Documents without an expiry of their own expire this long after
    /// they were stored; `None` keeps them until deleted.
    pub ttl_secs: Option<u64>,
}

impl Retention {
    /// The longest retention or document expiry: 100 years of seconds, so
    /// every expiry is a time RFC 3339 can write.
    pub const MAX_TTL_SECS: u64 = 3_155_760_000;

    /// `ttl_secs`, when given, is 1 to [`Self::MAX_TTL_SECS`].
    pub fn check(&self) -> Result<(), String> {
        match self.ttl_secs {
            Some(0) => {
                Err("retention.ttl_secs must be at least 1 (or null for no expiry), got 0".into())
            }
            Some(s) if s > Self::MAX_TTL_SECS => Err(format!(
                "retention.ttl_secs must be at most {} (100 years), got {s}",
                Self::MAX_TTL_SECS
            )),
            _ => Ok(()),
        }
    }

    pub fn ttl(&self) -> Option<std::time::Duration> {
        self.ttl_secs.map(std::time::Duration::from_secs)
    }
}

/// Which member of a set of near-duplicates is the original
/// (`engine::originals`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Originals {
    /// A top-level metadata field holding an RFC 3339 time (e.g.
    /// `published_at`): a document's time when it holds a valid one;
    /// otherwise, and when `None`, the time it was stored.
    pub time_field: Option<String>,
}

impl Originals {
    /// `time_field`, when given, is 1 to 256 bytes.
    pub fn check(&self) -> Result<(), String> {
        use crate::engine::originals::MAX_FIELD_BYTES;
        match &self.time_field {
            Some(f) if f.is_empty() || f.len() > MAX_FIELD_BYTES => Err(format!(
                "originals.time_field must be a metadata field name of 1 to {MAX_FIELD_BYTES} bytes (or null for the time documents were stored), got {} bytes",
                f.len()
            )),
            _ => Ok(()),
        }
    }

    pub fn time_field(&self) -> Option<&str> {
        self.time_field.as_deref()
    }
}

/// A collection's `review` setting (the review desk, issue 46).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Review {
    /// A pair moderators judged `not_duplicate` is no longer an edge of
    /// the duplicate groups, pairs and drop list, and does not make
    /// `if_unique` refuse a write (docs/review.md, "Excluding judged pairs").
    pub exclude_not_duplicates: bool,
    /// The top-level metadata field whose string value titles a document
    /// in snippets (`None`: no title).
    pub snippet_field: Option<String>,
}

impl Review {
    /// Longest `snippet_field`, in bytes.
    pub const MAX_FIELD_BYTES: usize = 256;

    /// `snippet_field`, when given, is a field name of 1 to 256 bytes.
    pub fn check(&self) -> Result<(), String> {
        match &self.snippet_field {
            Some(f) if f.is_empty() || f.len() > Self::MAX_FIELD_BYTES => Err(format!(
                "review.snippet_field must be a top-level metadata field name of 1 to {} bytes (or null for no title), got {} bytes",
                Self::MAX_FIELD_BYTES,
                f.len()
            )),
            _ => Ok(()),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsSettings {
    /// Largest document or query text, in UTF-8 bytes; larger texts get 413.
    pub max_text_bytes: usize,
    /// Most collections the server holds, `default` included.
    pub max_collections: usize,
}

impl Default for LimitsSettings {
    fn default() -> Self {
        Self {
            max_text_bytes: 1024 * 1024,
            max_collections: 1000,
        }
    }
}

/// The web console at `/ui/`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UiSettings {
    /// Serve the console's files; when false `/ui` and everything under it
    /// are `route-not-found` like any other unrouted path.
    pub enabled: bool,
}

impl Default for UiSettings {
    fn default() -> Self {
        Self { enabled: true }
    }
}

/// Webhook deliveries (`webhooks.*`, docs/webhooks.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhookSettings {
    /// Attempts before a delivery is listed as failed.
    pub max_attempts: u32,
    /// The delay after the first failed attempt; each next one doubles,
    /// up to `backoff_max_ms`, ±20% jitter.
    pub backoff_base_ms: u64,
    pub backoff_max_ms: u64,
    /// Per request (connect, send, answer).
    pub timeout_ms: u64,
    /// How often each node looks for due deliveries besides its own
    /// writes' (other nodes' events, retries whose time came).
    pub poll_ms: u64,
    /// Hosts a subscription URL may name: `*` (any), an exact name, an IP
    /// literal, or `*.suffix`. A host listed explicitly (not by `*`) is
    /// allowed whatever it resolves to.
    pub allowed_hosts: Vec<String>,
    /// Allow hosts reached through `*` to resolve to loopback, private,
    /// link-local, CGNAT, unique-local, unspecified, multicast or metadata
    /// addresses (server-side request forgery into the operator's network).
    pub allow_private_networks: bool,
    /// Subscriptions per collection.
    pub max_subscriptions: usize,
    /// Longest subscription URL.
    pub max_url_bytes: usize,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            max_attempts: 8,
            backoff_base_ms: 1000,
            backoff_max_ms: 600_000,
            timeout_ms: 5000,
            poll_ms: 200,
            allowed_hosts: vec!["*".into()],
            allow_private_networks: false,
            max_subscriptions: 100,
            max_url_bytes: 2048,
        }
    }
}

/// The event log and feed (`events.*`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EventSettings {
    /// Events older than this are trimmed (unless a subscription still
    /// owes them).
    pub retention_secs: u64,
    /// At most this many events per collection are kept (the same
    /// exception).
    pub max_events: usize,
    /// Matches an event carries at most.
    pub max_matches: usize,
    /// How often the retention is applied.
    pub trim_interval_secs: u64,
    /// The `default` collection's event feed (and the default of new
    /// collections): see [`EventFeed`].
    pub feed: bool,
    pub measure: Measure,
    pub score: Score,
    pub threshold: Option<f64>,
}

impl EventSettings {
    /// The `events` setting of the `default` collection and the default
    /// of new ones.
    pub fn feed_defaults(&self) -> EventFeed {
        EventFeed {
            feed: self.feed,
            measure: self.measure,
            score: self.score,
            threshold: self.threshold,
        }
    }
}

/// A collection's `events` setting: with `feed` on, a write whose stored
/// matches reach (`measure`, `score`, `threshold`) is a
/// `document.duplicate` event and every `if_unique` refusal a
/// `document.refused` event, with or without a webhook subscription, so a
/// consumer that only pulls `GET /events` gets them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EventFeed {
    pub feed: bool,
    pub measure: Measure,
    pub score: Score,
    /// `None`: the collection's own threshold for the measure and score,
    /// resolved when used (`Recipe::threshold_for`).
    pub threshold: Option<f64>,
}

impl EventFeed {
    /// Checked against the collection's index: `threshold`, when given,
    /// in (0, 1], and for raw Jaccard at least the lowest threshold its
    /// banding serves (`min_query_threshold`); a `content` score needs
    /// boilerplate detection on (`boilerplate`).
    pub fn check(&self, min_query_threshold: f64, boilerplate: bool) -> Result<(), String> {
        match self.threshold {
            Some(t) if !(t > 0.0 && t <= 1.0) => {
                return Err(format!(
                    "events.threshold must be in (0, 1] (or null for the collection's own threshold), got {t}"
                ))
            }
            Some(t)
                if self.measure == Measure::Jaccard
                    && self.score == Score::Raw
                    && t < min_query_threshold =>
            {
                return Err(format!(
                    "events.threshold {t} is below {min_query_threshold:.4}, the lowest raw Jaccard threshold this collection's index serves"
                ))
            }
            _ => {}
        }
        if self.score == Score::Content && self.measure != Measure::Jaccard {
            return Err(format!(
                "events.score \"content\" goes with events.measure \"jaccard\" only (events carry no content containments), got \"{}\"",
                self.measure.as_str()
            ));
        }
        if self.score == Score::Content && !boilerplate {
            return Err(
                "events.score \"content\" needs boilerplate detection (index.boilerplate.enabled)"
                    .into(),
            );
        }
        Ok(())
    }
}

impl Default for EventSettings {
    fn default() -> Self {
        Self {
            retention_secs: 7 * 24 * 3600,
            max_events: 1_000_000,
            max_matches: 100,
            trim_interval_secs: 60,
            feed: false,
            measure: Measure::Jaccard,
            score: Score::Raw,
            threshold: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QuerySettings {
    /// Results returned when a query gives no `limit`.
    pub default_limit: usize,
    /// Largest `limit` accepted.
    pub max_limit: usize,
}

impl Default for QuerySettings {
    fn default() -> Self {
        Self {
            default_limit: 10,
            max_limit: 1000,
        }
    }
}

/// When the write-ahead log is fsynced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WalFsync {
    /// Before every acknowledgement (group-committed): nothing acknowledged is lost.
    Always,
    /// Every `wal_fsync_interval_ms`: a power loss may lose that window
    /// (a process crash loses nothing: records are written before the ack).
    Interval,
    /// Never: the OS decides; a power loss may lose recent writes.
    Never,
}

impl WalFsync {
    pub fn as_str(self) -> &'static str {
        match self {
            WalFsync::Always => "always",
            WalFsync::Interval => "interval",
            WalFsync::Never => "never",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageSettings {
    /// Where snapshots and the write-ahead log live.
    pub data_dir: PathBuf,
    pub wal_fsync: WalFsync,
    pub wal_fsync_interval_ms: u64,
    /// Snapshot this often when something changed; 0 disables the timer.
    pub snapshot_interval_secs: u64,
    /// Snapshots kept (the log is kept back to the oldest of them).
    pub snapshots_keep: usize,
    /// How often expired documents are purged from memory (a delete in the
    /// log each); they are absent from every answer from the instant they
    /// expire either way.
    pub purge_interval_secs: u64,
    /// After the restore and then this often, collapse the index's resident
    /// memory into transparent huge pages (`src/hugepages.rs`; Linux 6.1+);
    /// 0 never does.
    pub huge_pages_interval_secs: u64,
    /// Keep the default collection's texts as posted, on disk (named
    /// collections have their own `store_text` setting).
    pub store_text: bool,
    /// Where documents and LSH buckets live.
    pub backend: StorageBackend,
    /// The redis backend's connection and layout (`backend = "redis"`).
    pub redis: RedisSettings,
}

/// `storage.backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StorageBackend {
    /// In this process, with the write-ahead log and snapshots in `data_dir`.
    Memory,
    /// In a Redis Cluster (or one Redis) shared by any number of neardup nodes.
    Redis,
}

impl StorageBackend {
    pub fn as_str(self) -> &'static str {
        match self {
            StorageBackend::Memory => "memory",
            StorageBackend::Redis => "redis",
        }
    }
}

/// `storage.redis.durability`: when a write is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Once the primary holding each key applied it.
    Primary,
    /// Once at least one replica of each primary written has it too
    /// (`WAIT 1`); otherwise 503, and retrying is safe.
    Replicated,
}

impl Durability {
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Primary => "primary",
            Durability::Replicated => "replicated",
        }
    }
}

/// `[storage.redis]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedisSettings {
    /// Seed nodes, `redis://host:port` (a cluster is discovered from any
    /// of them; a single non-cluster Redis is one URL).
    pub nodes: Vec<String>,
    /// Prepended to every key, so several deployments can share a cluster.
    pub key_prefix: String,
    /// Send reads (`/similar`, `GET /documents/…`, `/compare`) to replicas.
    /// Writes, `if_unique` and the reads of a write always go to primaries.
    pub read_from_replicas: bool,
    pub durability: Durability,
    /// Connecting to a node gives up after this long.
    pub connect_timeout_ms: u64,
    /// One round trip (every command in it) gives up after this long; the
    /// request then answers 503 with Retry-After.
    pub command_timeout_ms: u64,
    /// With `durability = "replicated"`: how long a write waits for a replica.
    pub replication_timeout_ms: u64,
    /// Documents a collection is expected to hold: sizes its bucket hashes
    /// (fixed when the collection is first used; see docs/operations.md).
    pub expected_documents: u64,
    /// How often each node checks the cluster (every primary answers, the
    /// cluster state is ok: what `/readyz` and the Redis metrics show) and
    /// re-reads the collection catalog (how soon a collection created,
    /// changed or deleted on another node is seen here).
    pub watch_interval_ms: u64,
}

impl Default for RedisSettings {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            key_prefix: "nd1".into(),
            read_from_replicas: false,
            durability: Durability::Primary,
            connect_timeout_ms: 1000,
            command_timeout_ms: 1000,
            replication_timeout_ms: 500,
            expected_documents: 1_000_000,
            watch_interval_ms: 1000,
        }
    }
}

impl RedisSettings {
    fn validate(&self, backend: StorageBackend) -> Result<(), ConfigError> {
        let invalid = |m: String| Err(ConfigError::Invalid(m));
        if backend == StorageBackend::Redis && self.nodes.is_empty() {
            return invalid(
                "storage.redis.nodes must name at least one node (redis://host:port) when storage.backend is \"redis\"".into(),
            );
        }
        for (i, node) in self.nodes.iter().enumerate() {
            let ok = node
                .strip_prefix("redis://")
                .and_then(|rest| rest.trim_end_matches('/').rsplit_once(':'))
                .is_some_and(|(host, port)| {
                    !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
                });
            if !ok {
                return invalid(format!(
                    "storage.redis.nodes[{i}] {node:?} is not a URL like redis://127.0.0.1:7000"
                ));
            }
        }
        let prefix_ok = !self.key_prefix.is_empty()
            && self.key_prefix.len() <= 64
            && self
                .key_prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
        if !prefix_ok {
            return invalid(format!(
                "storage.redis.key_prefix {:?} must be 1 to 64 characters of A-Z, a-z, 0-9, '_', '-' and '.'",
                self.key_prefix
            ));
        }
        for (name, v) in [
            ("connect_timeout_ms", self.connect_timeout_ms),
            ("command_timeout_ms", self.command_timeout_ms),
            ("replication_timeout_ms", self.replication_timeout_ms),
            ("watch_interval_ms", self.watch_interval_ms),
        ] {
            if !(1..=600_000).contains(&v) {
                return invalid(format!(
                    "storage.redis.{name} must be between 1 and 600000, got {v}"
                ));
            }
        }
        if !(1..=1u64 << 40).contains(&self.expected_documents) {
            return invalid(format!(
                "storage.redis.expected_documents must be between 1 and 2^40, got {}",
                self.expected_documents
            ));
        }
        Ok(())
    }
}

impl Default for StorageSettings {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("./data"),
            wal_fsync: WalFsync::Always,
            wal_fsync_interval_ms: 100,
            snapshot_interval_secs: 300,
            snapshots_keep: 2,
            purge_interval_secs: 60,
            huge_pages_interval_secs: 10,
            store_text: false,
            backend: StorageBackend::Memory,
            redis: RedisSettings::default(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable, for terminals.
    Pretty,
    /// One JSON object per line, for log shippers.
    Json,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSettings {
    pub format: LogFormat,
    /// Filter directives when `RUST_LOG` is unset, e.g. `info,neardup=debug`.
    pub level: String,
}

/// The level names `log.level` takes, alone or after `target=`.
const LOG_LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

impl LogSettings {
    /// Each comma-separated directive is a level (`info`) or a target with
    /// a level (`neardup=debug`): a bare word that is not a level would be
    /// read as a target to trace, silencing every other line.
    fn validate(&self) -> Result<(), ConfigError> {
        let bad = |why: String| {
            Err(ConfigError::Invalid(format!(
                "log.level {:?} {why}: use one of {}, or directives like info,neardup=debug",
                self.level,
                LOG_LEVELS.join(", ")
            )))
        };
        let is_level = |w: &str| LOG_LEVELS.iter().any(|l| l.eq_ignore_ascii_case(w.trim()));
        let directives: Vec<&str> = self.level.split(',').map(str::trim).collect();
        if directives.iter().all(|d| d.is_empty()) {
            return bad("is empty".to_owned());
        }
        for d in directives.into_iter().filter(|d| !d.is_empty()) {
            let level = d.rsplit_once('=').map_or(d, |(_, level)| level);
            if !is_level(level) {
                return bad(format!("has {level:?}, which is not a level"));
            }
        }
        if let Err(e) = tracing_subscriber::EnvFilter::builder().parse(&self.level) {
            return bad(format!("does not parse ({e})"));
        }
        Ok(())
    }
}

impl Default for LogSettings {
    fn default() -> Self {
        Self {
            format: LogFormat::Pretty,
            level: "info".into(),
        }
    }
}

/// A secret string (an API key). Its `Debug` and `Serialize` print `"***"`,
/// so settings can be logged and printed (`neardup print-config`) without
/// leaking it; the count of keys stays visible.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself; only for comparing.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"***\"")
    }
}

impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("***")
    }
}

/// Access control. With no key in either list the API is open.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthSettings {
    /// Keys that may call every route (`Authorization: Bearer <key>`).
    pub api_keys: Vec<Secret>,
    /// Keys that may only read (GET, HEAD, and the POSTs that carry a query).
    pub read_only_keys: Vec<Secret>,
    /// Whether `/metrics` needs a key too (when any key is configured).
    pub protect_metrics: bool,
    /// Keys with a scope: `[[auth.keys]]` tables of `key`, optional
    /// `collections` (the only collections it may use; omitted: every
    /// collection) and `read_only`.
    pub keys: Vec<ScopedKey>,
}

/// A key limited to some collections, or to reading.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopedKey {
    pub key: Secret,
    /// The collections it may use; `None`: every collection, and it may
    /// also create, change and delete collections (unless read-only).
    #[serde(default)]
    pub collections: Option<Vec<String>>,
    /// Reads only (GET, HEAD, and the POSTs that carry a query).
    #[serde(default)]
    pub read_only: bool,
    /// Who holds the key (a moderator, a team): recorded as `decided_by`
    /// on the review decisions it makes (issue 46). Never a secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Longest `auth.keys[].name`, in bytes.
pub const MAX_KEY_NAME_BYTES: usize = 200;

impl Default for AuthSettings {
    fn default() -> Self {
        Self {
            api_keys: Vec::new(),
            read_only_keys: Vec::new(),
            protect_metrics: true,
            keys: Vec::new(),
        }
    }
}

impl AuthSettings {
    /// True when any key is configured, so requests must carry one.
    pub fn enabled(&self) -> bool {
        !self.api_keys.is_empty() || !self.read_only_keys.is_empty() || !self.keys.is_empty()
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let scoped: Vec<Secret> = self.keys.iter().map(|k| k.key.clone()).collect();
        let lists = [
            ("auth.api_keys", &self.api_keys),
            ("auth.read_only_keys", &self.read_only_keys),
            ("auth.keys", &scoped),
        ];
        for (name, keys) in lists {
            for (i, key) in keys.iter().enumerate() {
                let key = key.expose();
                // The key itself is never part of the message.
                if key.is_empty() {
                    return Err(ConfigError::Invalid(format!(
                        "{name}[{i}] is empty; a key must not be an empty string"
                    )));
                }
                if key.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    return Err(ConfigError::Invalid(format!(
                        "{name}[{i}] contains whitespace or a control character; \
                         a key must be one printable token"
                    )));
                }
            }
        }
        if let Some(i) = self
            .read_only_keys
            .iter()
            .position(|k| self.api_keys.contains(k))
        {
            return Err(ConfigError::Invalid(format!(
                "auth.read_only_keys[{i}] is also in auth.api_keys; \
                 a key must be in only one of the two lists"
            )));
        }
        for (i, k) in self.keys.iter().enumerate() {
            let elsewhere = self.api_keys.contains(&k.key)
                || self.read_only_keys.contains(&k.key)
                || self.keys[..i].iter().any(|o| o.key == k.key);
            if elsewhere {
                return Err(ConfigError::Invalid(format!(
                    "auth.keys[{i}].key is configured twice; a key must appear once"
                )));
            }
            if let Some(name) = &k.name {
                if name.trim().is_empty()
                    || name.len() > MAX_KEY_NAME_BYTES
                    || name.chars().any(char::is_control)
                {
                    return Err(ConfigError::Invalid(format!(
                        "auth.keys[{i}].name {name:?} must be 1 to {MAX_KEY_NAME_BYTES} bytes \
                         without control characters, not only spaces (or left out)"
                    )));
                }
            }
            for (j, name) in k.collections.iter().flatten().enumerate() {
                let valid = !name.is_empty()
                    && name.len() <= 64
                    && name.bytes().all(|b| {
                        b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-'
                    });
                if !valid {
                    return Err(ConfigError::Invalid(format!(
                        "auth.keys[{i}].collections[{j}] {name:?} is not a collection name \
                         (1 to 64 characters of a-z, 0-9, '_' and '-')"
                    )));
                }
            }
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration file {0} does not exist")]
    MissingFile(PathBuf),
    /// A value that does not parse, or an unknown key: each names the key
    /// (`section.key`) and where it came from (the file as given, or the
    /// environment variable).
    #[error("invalid configuration: {0}")]
    Load(String),
    #[error("invalid configuration: {0}")]
    Invalid(String),
    #[error("invalid configuration: {0}")]
    Engine(#[from] EngineParamsError),
}

/// Settings checked once, with what they resolve to. Dereferences to the
/// [`Settings`] it was made from.
#[derive(Clone, Debug)]
pub struct Config {
    settings: Settings,
    bind: SocketAddr,
    engine: ValidParams,
    /// `normalize.version` was set by a file or the environment, not left
    /// to its default (see [`Config::normalize_version_pinned`]).
    version_pinned: bool,
}

impl std::ops::Deref for Config {
    type Target = Settings;
    fn deref(&self) -> &Settings {
        &self.settings
    }
}

impl Config {
    /// Whether `normalize.version` was set by a configuration file or an
    /// environment variable. When it was not, the `default` collection
    /// keeps the version its data directory was written with (version 1
    /// for data of releases before versions), and only a new data
    /// directory gets the current one.
    pub fn normalize_version_pinned(&self) -> bool {
        self.version_pinned
    }

    /// The listen address (`server.bind`).
    pub fn bind_addr(&self) -> SocketAddr {
        self.bind
    }

    /// The default index's recipe, parameters and banding.
    pub fn engine(&self) -> &ValidParams {
        &self.engine
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }
}

impl TryFrom<Settings> for Config {
    type Error = ConfigError;
    fn try_from(settings: Settings) -> Result<Self, ConfigError> {
        settings.validate()
    }
}

impl Settings {
    /// Load all layers and validate. `file` is the optional `--config FILE`.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        Self::load_from(file, Path::new(DEFAULT_CONFIG_FILE), ENV_PREFIX)
    }

    fn load_from(
        file: Option<&Path>,
        default_file: &Path,
        env_prefix: &str,
    ) -> Result<Config, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Settings::default()));
        if default_file.exists() {
            figment = figment.merge(Toml::file_exact(default_file));
        }
        if let Some(file) = file {
            if !file.exists() {
                return Err(ConfigError::MissingFile(file.to_owned()));
            }
            figment = figment.merge(Toml::file_exact(file));
        }
        let figment = figment.merge(Env::prefixed(env_prefix).split("__").lowercase(true));
        let files: Vec<&Path> = [Some(default_file), file].into_iter().flatten().collect();
        let settings: Settings = figment
            .extract()
            .map_err(|e| ConfigError::Load(describe(e, &files, env_prefix)))?;
        let mut config = settings
            .validate()
            .map_err(|e| name_the_source(e, &figment, &files, env_prefix))?;
        config.version_pinned = figment.find_metadata("normalize.version").is_some_and(|m| {
            matches!(m.source, Some(figment::Source::File(_))) || m.name.contains("environment")
        });
        Ok(config)
    }

    /// Check every value, resolving the listen address and the engine
    /// parameters on the way.
    pub fn validate(self) -> Result<Config, ConfigError> {
        let bind = self.server.bind.parse().map_err(|e| {
            ConfigError::Invalid(format!(
                "server.bind {:?} is not an address like 0.0.0.0:8080: {e}",
                self.server.bind
            ))
        })?;
        let invalid = |m: &str| Err(ConfigError::Invalid(m.to_owned()));
        if self.server.max_body_bytes < 1024 {
            return invalid("server.max_body_bytes must be at least 1024");
        }
        if self.server.max_batch == 0 {
            return invalid("server.max_batch must be at least 1");
        }
        if self.server.max_concurrent_requests == 0 {
            return invalid("server.max_concurrent_requests must be at least 1");
        }
        if self.limits.max_text_bytes == 0 {
            return invalid("limits.max_text_bytes must be at least 1");
        }
        if self.limits.max_text_bytes > self.server.max_body_bytes {
            return invalid("limits.max_text_bytes must not exceed server.max_body_bytes");
        }
        if self.server.request_timeout_secs == 0 {
            return invalid("server.request_timeout_secs must be at least 1");
        }
        if self.query.max_limit == 0 || self.query.default_limit == 0 {
            return invalid("query.default_limit and query.max_limit must be at least 1");
        }
        if self.query.default_limit > self.query.max_limit {
            return invalid("query.default_limit must not exceed query.max_limit");
        }
        if self.storage.snapshots_keep == 0 {
            return invalid("storage.snapshots_keep must be at least 1");
        }
        if self.storage.wal_fsync_interval_ms == 0 {
            return invalid("storage.wal_fsync_interval_ms must be at least 1");
        }
        if self.storage.purge_interval_secs == 0 {
            return invalid("storage.purge_interval_secs must be at least 1");
        }
        if self.limits.max_collections == 0 {
            return invalid("limits.max_collections must be at least 1 (the default collection)");
        }
        if let Err(e) = self.retention.check() {
            return Err(ConfigError::Invalid(e));
        }
        if let Err(e) = self.originals.check() {
            return Err(ConfigError::Invalid(e));
        }
        if let Err(e) = self.review.check() {
            return Err(ConfigError::Invalid(e));
        }
        self.log.validate()?;
        self.auth.validate()?;
        self.storage.redis.validate(self.storage.backend)?;
        let w = &self.webhooks;
        if w.max_attempts == 0 || w.max_attempts > 100 {
            return invalid("webhooks.max_attempts must be between 1 and 100");
        }
        if w.backoff_base_ms == 0 || w.backoff_max_ms < w.backoff_base_ms {
            return invalid(
                "webhooks.backoff_base_ms must be at least 1 and at most webhooks.backoff_max_ms",
            );
        }
        if w.timeout_ms == 0 || w.poll_ms == 0 {
            return invalid("webhooks.timeout_ms and webhooks.poll_ms must be at least 1");
        }
        if w.max_subscriptions == 0 || w.max_url_bytes < 16 {
            return invalid("webhooks.max_subscriptions must be at least 1 and webhooks.max_url_bytes at least 16");
        }
        if w.allowed_hosts.iter().any(|h| {
            h.is_empty()
                || (h.contains('*')
                    && h != "*"
                    && !(h.starts_with("*.") && h.len() > 2 && !h[2..].contains('*')))
        }) {
            return invalid("webhooks.allowed_hosts holds names, IP literals, `*` or `*.suffix`");
        }
        let e = &self.events;
        if e.max_events == 0 || e.max_matches == 0 || e.trim_interval_secs == 0 {
            return invalid("events.max_events, events.max_matches and events.trim_interval_secs must be at least 1");
        }
        let engine = self.engine_params().validate()?;
        if let Err(e) = self.events.feed_defaults().check(
            engine.bands().min_query_threshold,
            self.index.boilerplate.enabled,
        ) {
            return Err(ConfigError::Invalid(e));
        }
        Ok(Config {
            settings: self,
            bind,
            engine,
            version_pinned: false,
        })
    }

    /// The default index's recipe and parameters, as configured.
    pub fn engine_params(&self) -> EngineParams {
        EngineParams {
            normalize: self.normalize,
            shingle: self.shingle,
            index: self.index.clone(),
        }
    }
}

/// A validation error with where its first setting was set, when that is a
/// file or an environment variable: `index.threshold ... (set in
/// neardup.toml)`. The setting is the first `section.key` the message names.
fn name_the_source(
    error: ConfigError,
    figment: &Figment,
    files: &[&Path],
    env_prefix: &str,
) -> ConfigError {
    let wrap = |message: String, rebuild: fn(String) -> ConfigError| {
        let key = message
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .map(|w| w.trim_end_matches('.'))
            .find(|w| {
                w.contains('.')
                    && w.split('.').count() == 2
                    && w.split('.').all(|p| !p.is_empty())
                    && figment.find_metadata(w).is_some()
            })
            .map(str::to_owned);
        let Some(key) = key else {
            return rebuild(message);
        };
        let origin = match figment.find_metadata(&key) {
            Some(m) => match &m.source {
                Some(figment::Source::File(path)) => {
                    let canon = path.canonicalize().ok();
                    let shown = files
                        .iter()
                        .find(|f| f.canonicalize().ok() == canon)
                        .map_or_else(|| path.display().to_string(), |f| f.display().to_string());
                    format!(" (set in {shown})")
                }
                _ if m.name.contains("environment") => format!(
                    " (set by the environment variable {env_prefix}{})",
                    key.replace('.', "__").to_uppercase()
                ),
                _ => String::new(),
            },
            None => String::new(),
        };
        rebuild(format!("{message}{origin}"))
    };
    match error {
        ConfigError::Invalid(m) => wrap(m, ConfigError::Invalid),
        ConfigError::Engine(e) => wrap(e.to_string(), ConfigError::Invalid),
        other => other,
    }
}

/// figment's errors in our words: the key as `section.key` (figment adds
/// its profile, `default.`), the file as the user gave it (figment shows
/// paths relative to the working directory), the environment variable by
/// its full name.
fn describe(errors: figment::Error, files: &[&Path], env_prefix: &str) -> String {
    use figment::Source;
    let given = |path: &Path| {
        let canon = path.canonicalize().ok();
        files
            .iter()
            .find(|f| f.canonicalize().ok() == canon || **f == path)
            .map_or_else(|| path.display().to_string(), |f| f.display().to_string())
    };
    errors
        .into_iter()
        .map(|e| {
            let key = e.path.join(".").to_lowercase();
            let origin = match e.metadata.as_ref().and_then(|m| m.source.as_ref()) {
                Some(Source::File(path)) => format!(" in {}", given(path)),
                _ if e
                    .metadata
                    .as_ref()
                    .is_some_and(|m| m.name.contains("environment")) =>
                {
                    format!(
                        " in the environment variable {env_prefix}{}",
                        e.path.join("__").to_uppercase()
                    )
                }
                _ => String::new(),
            };
            if key.is_empty() {
                format!("{}{origin}", e.kind)
            } else {
                format!("{key}{origin}: {}", e.kind)
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::ShingleKind;

    /// Load with `toml` as the `--config` file and `env` as environment
    /// variables (names without the `NEARDUP_` prefix), in a figment `Jail`:
    /// a temporary working directory and environment of its own, so tests
    /// running in parallel never see each other's variables.
    // The closure's error type is figment's own (`Jail::expect_with`).
    #[allow(clippy::result_large_err)]
    fn load(toml: Option<&str>, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let mut out = None;
        figment::Jail::expect_with(|jail| {
            if let Some(t) = toml {
                jail.create_file("c.toml", t)?;
            }
            for (k, v) in env {
                jail.set_env(format!("{ENV_PREFIX}{k}"), v);
            }
            out = Some(Settings::load_from(
                toml.map(|_| Path::new("c.toml")),
                Path::new("no-default.toml"),
                ENV_PREFIX,
            ));
            Ok(())
        });
        out.expect("the jail ran")
    }

    #[test]
    fn a_value_that_fails_validation_is_traced_to_its_file_or_variable() {
        let e = load(Some("[index]\nthreshold = 1.5\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("threshold") && e.contains("(set in c.toml)"),
            "{e}"
        );
        let e = load(None, &[("SERVER__MAX_BATCH", "0")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("server.max_batch")
                && e.contains("(set by the environment variable NEARDUP_SERVER__MAX_BATCH)"),
            "{e}"
        );
        let e = load(Some("[retention]\nttl_secs = 0\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("retention.ttl_secs") && e.contains("c.toml"),
            "{e}"
        );
        // A rule between two settings names the first it mentions.
        let e = load(Some("[limits]\nmax_text_bytes = 99999999\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("(set in c.toml)"), "{e}");
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let s = load(None, &[]).unwrap();
        assert_eq!(s.server.bind, "0.0.0.0:8080");
        assert_eq!(s.server.max_body_bytes, 16 * 1024 * 1024);
        assert_eq!(s.server.max_batch, 10_000);
        assert_eq!(s.index.num_perm, 128);
        assert_eq!(s.index.threshold, 0.8);
        assert_eq!(s.shingle.kind, ShingleKind::Word);
        assert_eq!(s.shingle.k, 3);
        assert_eq!(s.storage.data_dir, PathBuf::from("./data"));
        assert_eq!(s.server.max_concurrent_requests, 512);
        assert_eq!(s.limits.max_text_bytes, 1024 * 1024);
    }

    #[test]
    fn the_event_feed_defaults_come_from_a_file_or_the_environment_and_are_checked() {
        let d = load(None, &[]).unwrap();
        assert_eq!(d.events.feed_defaults(), EventFeed::default());
        let s = load(
            Some("[events]\nfeed = true\nthreshold = 0.8\n"),
            &[("EVENTS__MEASURE", "containment")],
        )
        .unwrap();
        assert_eq!(
            s.events.feed_defaults(),
            EventFeed {
                feed: true,
                measure: Measure::Containment,
                score: Score::Raw,
                threshold: Some(0.8),
            }
        );
        for (toml, key) in [
            ("[events]\nthreshold = 1.5\n", "events.threshold"),
            ("[events]\nthreshold = 0.01\n", "events.threshold"),
            ("[events]\nscore = \"content\"\n", "events.score"),
            (
                "[events]\nscore = \"content\"\nmeasure = \"containment\"\n[index.boilerplate]\nenabled = true\n",
                "events.score",
            ),
        ] {
            let e = load(Some(toml), &[]).unwrap_err().to_string();
            assert!(e.contains(key), "{toml}: {e}");
        }
        assert!(load(Some("[events]\nmeasure = \"cosine\"\n"), &[]).is_err());
    }

    #[test]
    fn limits_are_validated() {
        let e = load(
            Some("[server]\nmax_body_bytes = 2048\n[limits]\nmax_text_bytes = 4096\n"),
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("limits.max_text_bytes"), "{e}");
        let e = load(Some("[limits]\nmax_text_bytes = 0\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("limits.max_text_bytes"), "{e}");
        let e = load(Some("[server]\nmax_concurrent_requests = 0\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("server.max_concurrent_requests"), "{e}");
        let s = load(
            Some("[limits]\nmax_text_bytes = 100\n"),
            &[("SERVER__MAX_CONCURRENT_REQUESTS", "2")],
        )
        .unwrap();
        assert_eq!(s.limits.max_text_bytes, 100);
        assert_eq!(s.server.max_concurrent_requests, 2);
    }

    #[test]
    fn file_then_env_override_in_order() {
        let s = load(
            Some("[index]\nthreshold = 0.9\nnum_perm = 256\n[shingle]\nkind = \"char\"\nk = 5\n"),
            &[("INDEX__THRESHOLD", "0.85"), ("SERVER__MAX_BATCH", "50")],
        )
        .unwrap();
        assert_eq!(s.index.threshold, 0.85);
        assert_eq!(s.index.num_perm, 256);
        assert_eq!(s.shingle.kind, ShingleKind::Char);
        assert_eq!(s.server.max_batch, 50);
    }

    #[test]
    fn the_originals_time_field_comes_from_a_file_or_the_environment_and_is_checked() {
        let s = load(Some("[originals]\ntime_field = \"date\"\n"), &[]).unwrap();
        assert_eq!(s.originals.time_field(), Some("date"));
        let s = load(
            Some("[originals]\ntime_field = \"date\"\n"),
            &[("ORIGINALS__TIME_FIELD", "published_at")],
        )
        .unwrap();
        assert_eq!(s.originals.time_field(), Some("published_at"));
        assert_eq!(load(None, &[]).unwrap().originals.time_field(), None);
        for bad in ["", &"é".repeat(129)] {
            let e = load(None, &[("ORIGINALS__TIME_FIELD", bad)])
                .unwrap_err()
                .to_string();
            assert!(e.contains("originals.time_field"), "{e}");
        }
    }

    #[test]
    fn the_review_defaults_come_from_a_file_or_the_environment_and_are_checked() {
        assert_eq!(load(None, &[]).unwrap().review, Review::default());
        let s = load(
            Some("[review]\nexclude_not_duplicates = true\nsnippet_field = \"title\"\n"),
            &[("REVIEW__SNIPPET_FIELD", "titre_é")],
        )
        .unwrap();
        assert_eq!(
            s.review,
            Review {
                exclude_not_duplicates: true,
                snippet_field: Some("titre_é".into()),
            }
        );
        let s = load(None, &[("REVIEW__EXCLUDE_NOT_DUPLICATES", "true")]).unwrap();
        assert!(s.review.exclude_not_duplicates);
        for bad in ["", &"ж".repeat(129)] {
            let e = load(None, &[("REVIEW__SNIPPET_FIELD", bad)])
                .unwrap_err()
                .to_string();
            assert!(e.contains("review.snippet_field"), "{e}");
        }
        assert!(load(Some("[review]\nexclude = true\n"), &[]).is_err());
    }

    #[test]
    fn unknown_keys_and_bad_values_are_clear_errors() {
        let e = load(Some("[index]\nthreshhold = 0.9\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("threshhold"), "{e}");
        let e = load(Some("[index]\nthreshold = 1.5\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("threshold"), "{e}");
        let e = load(Some("[server]\nbind = \"nope\"\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("server.bind"), "{e}");
        let e = load(Some("[index]\nbands = 30\nrows = 10\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("num_perm"), "{e}");
        let e = load(Some("[shingle]\nk = 0\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("shingle.k"), "{e}");
    }

    #[test]
    fn an_unknown_log_level_is_refused_with_the_levels_it_takes() {
        let e = load(None, &[("LOG__LEVEL", "verbose")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("log.level \"verbose\"")
                && e.contains("trace, debug, info, warn, error, off")
                && e.contains("(set by the environment variable NEARDUP_LOG__LEVEL)"),
            "{e}"
        );
        for bad in ["", "neardup=loud", "info,verbose"] {
            assert!(load(None, &[("LOG__LEVEL", bad)]).is_err(), "{bad:?}");
        }
        for good in [
            "info",
            "WARN",
            "off",
            "info,neardup=debug",
            "warn,tower_http=trace",
        ] {
            let s = load(None, &[("LOG__LEVEL", good)]).unwrap();
            assert_eq!(s.log.level, good);
        }
    }

    #[test]
    fn half_a_banding_is_said_in_the_settings_terms() {
        let e = load(Some("[index]\nbands = 10\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("index.bands is set (10) but index.rows is not")
                && e.contains("(set in c.toml)")
                && !e.contains("Some(")
                && !e.contains("None"),
            "{e}"
        );
        let e = load(None, &[("INDEX__ROWS", "5")]).unwrap_err().to_string();
        assert!(
            e.contains("index.rows is set (5) but index.bands is not"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_key_with_its_section_and_the_file_as_given() {
        let e = load(Some("[index]\nthreshhold = 0.9\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid configuration: index.threshhold in c.toml: unknown field"),
            "{e}"
        );
        assert!(!e.contains("default."), "{e}");
        let e = load(Some("[index]\nthreshold = 1.5\n"), &[])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "invalid configuration: index.threshold must be in (0, 1], got 1.5 (set in c.toml)"
        );
        let e = load(None, &[("INDEX__NUM_PERM", "many")])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid configuration: index.num_perm in the environment variable NEARDUP_INDEX__NUM_PERM: invalid type"),
            "{e}"
        );
    }

    #[test]
    fn auth_is_open_by_default_with_metrics_protected_once_keys_exist() {
        let s = load(None, &[]).unwrap();
        assert!(s.auth.api_keys.is_empty());
        assert!(s.auth.read_only_keys.is_empty());
        assert!(s.auth.protect_metrics);
        assert!(!s.auth.enabled());
    }

    #[test]
    fn api_keys_can_be_given_as_a_list_in_an_environment_variable() {
        let s = load(None, &[("AUTH__API_KEYS", r#"["k1-secret","k2-secret"]"#)]).unwrap();
        let keys: Vec<&str> = s.auth.api_keys.iter().map(Secret::expose).collect();
        assert_eq!(keys, ["k1-secret", "k2-secret"]);
        assert!(s.auth.enabled());
    }

    #[test]
    fn read_only_keys_alone_enable_access_control() {
        let s = load(Some("[auth]\nread_only_keys = [\"r1\"]\n"), &[]).unwrap();
        assert!(s.auth.enabled());
        assert_eq!(s.auth.read_only_keys, [Secret::new("r1")]);
    }

    #[test]
    fn empty_blank_or_shared_keys_are_clear_errors_that_do_not_echo_the_key() {
        let cases = [
            ("api_keys = [\"ok-zz\", \"\"]", "auth.api_keys[1] is empty"),
            (
                "api_keys = [\"two zz\"]",
                "auth.api_keys[0] contains whitespace",
            ),
            (
                "api_keys = [\"zz-trailing\\n\"]",
                "auth.api_keys[0] contains whitespace",
            ),
            (
                "api_keys = [\"tab\\tzz\"]",
                "auth.api_keys[0] contains whitespace",
            ),
            (
                "read_only_keys = [\"bell\\u0007zz\"]",
                "auth.read_only_keys[0] contains whitespace or a control",
            ),
            ("read_only_keys = [\"\"]", "auth.read_only_keys[0] is empty"),
            (
                "api_keys = [\"same-zz\"]\nread_only_keys = [\"other-zz\", \"same-zz\"]",
                "auth.read_only_keys[1] is also in auth.api_keys",
            ),
        ];
        for (toml, expected) in cases {
            let e = load(Some(&format!("[auth]\n{toml}\n")), &[])
                .expect_err(toml)
                .to_string();
            assert!(e.contains(expected), "{toml}: {e}");
            // Every key in the cases contains "zz"; no message may.
            assert!(!e.contains("zz"), "{toml}: the error echoes the key: {e}");
        }
    }

    #[test]
    fn debug_and_serialized_settings_show_how_many_keys_but_never_a_key() {
        let mut s = Settings::default();
        s.auth.api_keys = vec![
            Secret::new("full-access-key-1"),
            Secret::new("full-access-key-2"),
        ];
        s.auth.read_only_keys = vec![Secret::new("read-only-key-1")];
        let debug = format!("{s:?}");
        let json = serde_json::to_string(&s).unwrap();
        for out in [&debug, &json] {
            assert!(!out.contains("access-key"), "{out}");
            assert!(!out.contains("read-only-key"), "{out}");
        }
        assert!(debug.contains(r#"api_keys: ["***", "***"]"#), "{debug}");
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["auth"]["api_keys"], serde_json::json!(["***", "***"]));
        assert_eq!(value["auth"]["read_only_keys"], serde_json::json!(["***"]));
    }

    #[test]
    fn the_shipped_default_file_parses_and_matches_the_compiled_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DEFAULT_CONFIG_FILE);
        let from_file = Settings::load_from(None, &path, "NEARDUP_UNUSED_PREFIX_").unwrap();
        assert_eq!(*from_file, Settings::default());
    }
}
