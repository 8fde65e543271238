//! The connection to Redis: a cluster connection (slot map, MOVED/ASK,
//! reconnects, one multiplexed connection per node) or, for a single
//! non-cluster Redis, one multiplexed connection; every round trip bounded
//! by `storage.redis.command_timeout_ms`, counted, and its failure turned
//! into [`BackendError::Unavailable`] (503 with Retry-After).
//!
//! A round trip is a set of commands sent at once (`futures` joined): on
//! the cluster connection each goes to its node's multiplexed connection,
//! so the commands of one trip are pipelined per node and run on every
//! node in parallel.

use super::super::BackendError;
use crate::config::{Durability, RedisSettings};
use futures_util::{FutureExt, StreamExt};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, FromRedisValue, Pipeline, RedisFuture, Value};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Commands of one round trip in flight at once.
const TRIP_WINDOW: usize = 256;

/// One command of a round trip, as a boxed call (commands of different
/// kinds share a trip).
pub type Call = Box<
    dyn FnOnce(Conn) -> std::pin::Pin<Box<dyn Future<Output = redis::RedisResult<Value>> + Send>>
        + Send,
>;

/// A plain command as a [`Call`].
pub fn call(cmd: Cmd) -> Call {
    Box::new(move |mut c: Conn| Box::pin(async move { cmd.query_async::<Value>(&mut c).await }))
}

/// A Lua script, run by `EVALSHA` on the node of its first key, and by
/// `EVAL` there when that node does not have it cached (a replica just
/// promoted, a restarted node). Not `redis::Script`: on a missing script
/// it sends `SCRIPT LOAD` to *every* node, so one dead node, still listed
/// in the topology after a failover, would fail every script call.
pub struct Script {
    code: &'static str,
    hash: String,
}

impl Script {
    pub fn new(code: &'static str) -> Self {
        Self {
            code,
            hash: redis::Script::new(code).get_hash().to_owned(),
        }
    }

    /// An invocation with its first key.
    pub fn key(&'static self, key: impl redis::ToRedisArgs) -> Invocation {
        let mut inv = self.prepare_invoke();
        inv.key(key);
        inv
    }

    pub fn prepare_invoke(&'static self) -> Invocation {
        Invocation {
            script: self,
            keys: Vec::new(),
            args: Vec::new(),
        }
    }
}

/// A script's keys and arguments, ready to run.
pub struct Invocation {
    script: &'static Script,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

impl Invocation {
    pub fn key(&mut self, key: impl redis::ToRedisArgs) -> &mut Self {
        self.keys.extend(key.to_redis_args());
        self
    }

    pub fn arg(&mut self, arg: impl redis::ToRedisArgs) -> &mut Self {
        self.args.extend(arg.to_redis_args());
        self
    }

    fn command(&self, verb: &str, head: &str) -> Cmd {
        let mut cmd = redis::cmd(verb);
        cmd.arg(head).arg(self.keys.len());
        for k in &self.keys {
            cmd.arg(k.as_slice());
        }
        for a in &self.args {
            cmd.arg(a.as_slice());
        }
        cmd
    }

    /// `EVALSHA`, then `EVAL` if the node answers `NOSCRIPT`.
    pub async fn invoke_async<T: FromRedisValue>(&self, conn: &mut Conn) -> redis::RedisResult<T> {
        match self
            .command("EVALSHA", &self.script.hash)
            .query_async(conn)
            .await
        {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                self.command("EVAL", self.script.code)
                    .query_async(conn)
                    .await
            }
            other => other,
        }
    }
}

/// A script invocation (`keys`, `args`) as a [`Call`].
pub fn script_call(script: &'static Script, keys: Vec<String>, args: Vec<Vec<u8>>) -> Call {
    Box::new(move |mut c: Conn| {
        Box::pin(async move {
            let mut inv = script.prepare_invoke();
            for k in keys {
                inv.key(k);
            }
            for a in &args {
                inv.arg(a.as_slice());
            }
            inv.invoke_async::<Value>(&mut c).await
        })
    })
}

/// `call`, answering `Nil` when it fails, after handing the error to
/// `refused` (a call whose failure the caller answers another way, in a
/// trip that must not fail for it).
pub fn refusal_as_nil(
    call: Call,
    refused: impl FnOnce(redis::RedisError) + Send + 'static,
) -> Call {
    Box::new(move |c: Conn| {
        Box::pin(async move {
            Ok(match call(c).await {
                Ok(v) => v,
                Err(e) => {
                    refused(e);
                    Value::Nil
                }
            })
        })
    })
}

/// Either kind of connection; cheap to clone (a handle to shared tasks).
#[derive(Clone)]
pub enum Conn {
    Cluster(ClusterConnection),
    Single(MultiplexedConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Cluster(c) => c.req_packed_command(cmd),
            Conn::Single(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Cluster(c) => c.get_db(),
            Conn::Single(c) => c.get_db(),
        }
    }
}

/// Counters of the traffic to Redis (read by `/metrics`).
#[derive(Debug, Default)]
pub struct RedisCounters {
    /// Round trips started.
    pub round_trips: AtomicU64,
    /// Commands sent.
    pub commands: AtomicU64,
    /// Round trips that failed (an error or the timeout).
    pub errors: AtomicU64,
    /// Round trips that hit `command_timeout_ms`.
    pub timeouts: AtomicU64,
    /// Replicated writes no replica confirmed in time.
    pub replication_failures: AtomicU64,
    /// Attempts this node made again: `if_unique` writes that withdrew
    /// before a concurrent near-duplicate and tried again.
    pub retries: AtomicU64,
    /// MOVED and ASK redirections answered by the cluster's primaries (all
    /// their clients, read from `INFO errorstats` by each check): the
    /// client follows them by itself, so they show up here, not as errors.
    pub moved: AtomicU64,
    pub ask: AtomicU64,
    /// Checks of the cluster's state that failed.
    pub check_failures: AtomicU64,
    /// Fresh connections made after a failed check.
    pub reconnects: AtomicU64,
    /// Posting buckets (passage index) read in full by queries and scans.
    pub postings_read: AtomicU64,
    /// Posting buckets skipped as common (more than
    /// `index.common_fingerprint_docs` members): sized, not read.
    pub postings_common: AtomicU64,
    /// Records whose postings a backfill (switching the index on) added.
    pub postings_backfilled: AtomicU64,
    /// Entries appended to the document-frequency log (a write's, delete's or
    /// sweep's counting).
    pub df_updates: AtomicU64,
    /// Reads of document frequencies (content queries, content scores).
    pub df_reads: AtomicU64,
    /// Records a recount of document frequency counted.
    pub df_recounted: AtomicU64,
    /// Entries of the document-frequency log this node applied.
    pub df_log_applied: AtomicU64,
    /// Times this node counted every record again because the log lacked
    /// entries it had not read.
    pub df_log_rebuilds: AtomicU64,
    /// Webhook deliveries taken over from a node that took them and did
    /// not settle them before their lease ended (a dead or stalled node).
    pub deliveries_reclaimed: AtomicU64,
    /// Failed deliveries dropped from a subscription's failed list by its
    /// bound (the oldest beyond the newest 1,000).
    pub failed_dropped: AtomicU64,
    /// Reads grouped by node (posting buckets of many slots in one script
    /// call) that a node refused, read again slot by slot.
    pub grouped_read_failures: AtomicU64,
}

/// What the last check of the cluster saw (see [`Redis::check`]).
#[derive(Clone, Debug)]
pub struct Health {
    /// Every primary answered and the cluster state is ok.
    pub ok: bool,
    /// Why not (for the log; never sent to clients).
    pub reason: String,
    /// Primaries answering `PING` at the last check.
    pub primaries: u64,
}

/// Redis Cluster's hash slots.
const SLOTS: usize = 16_384;

/// The hash slot of `key` (Redis Cluster's rule: CRC16-XMODEM of its hash
/// tag, the text between the first `{` and the next `}` when not empty,
/// else of the whole key; mod 16,384).
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16::State::<crc16::XMODEM>::calculate(tagged.unwrap_or(key)) % SLOTS as u16
}

/// Which primary served each hash slot when last read (`CLUSTER SLOTS`),
/// so that reads of keys in many slots can be put in one script call a
/// node (`allow-cross-slot-keys`). Only a grouping: a call is still routed
/// by its first key, and a node that no longer serves one of the others
/// refuses the call ("non local key"), which the caller answers by reading
/// slot by slot and [`Redis::slot_owners_failed`].
pub struct SlotOwners {
    /// Per slot, its primary's number; `u16::MAX`: no primary served it.
    owner: Vec<u16>,
}

impl SlotOwners {
    /// One node serves every slot (a single Redis, not a cluster).
    pub(super) fn single() -> Self {
        Self {
            owner: vec![0; SLOTS],
        }
    }

    /// From a `CLUSTER SLOTS` answer: `[start, end, [host, port, …], …]`
    /// per range.
    fn from_cluster_slots(value: Value) -> Result<Self, String> {
        let Value::Array(ranges) = value else {
            return Err("CLUSTER SLOTS answered no list".into());
        };
        let mut owner = vec![u16::MAX; SLOTS];
        let mut nodes: Vec<Vec<u8>> = Vec::new();
        for range in ranges {
            let Value::Array(fields) = range else {
                return Err("a CLUSTER SLOTS range is no list".into());
            };
            let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(primary))) =
                (fields.first(), fields.get(1), fields.get(2))
            else {
                return Err("a CLUSTER SLOTS range lacks its bounds or primary".into());
            };
            let name = match (primary.first(), primary.get(1)) {
                (Some(Value::BulkString(host)), Some(Value::Int(port))) => {
                    let mut name = host.clone();
                    name.extend_from_slice(format!(":{port}").as_bytes());
                    name
                }
                _ => return Err("a CLUSTER SLOTS primary lacks its address".into()),
            };
            let at = match nodes.iter().position(|n| *n == name) {
                Some(at) => at,
                None => {
                    nodes.push(name);
                    nodes.len() - 1
                }
            };
            let (start, end) = (*start, *end);
            if !(0..SLOTS as i64).contains(&start) || !(start..SLOTS as i64).contains(&end) {
                return Err(format!(
                    "a CLUSTER SLOTS range {start}-{end} is out of bounds"
                ));
            }
            for slot in &mut owner[start as usize..=end as usize] {
                *slot = at as u16;
            }
        }
        Ok(Self { owner })
    }

    /// The primary that served `key`'s slot (`None`: none did).
    pub fn node_of(&self, key: &str) -> Option<u16> {
        let n = self.owner[key_slot(key.as_bytes()) as usize];
        (n != u16::MAX).then_some(n)
    }
}

/// How long after a grouped read failed reads go slot by slot (the slot map
/// moving, or a Redis that refuses the script): not every query pays for
/// a failed call and a read of the map while it settles.
const OWNERS_PAUSE: Duration = Duration::from_secs(10);

/// The connection shared by every collection of a server.
pub struct Redis {
    conn: tokio::sync::RwLock<Option<Conn>>,
    pub settings: RedisSettings,
    pub counters: Arc<RedisCounters>,
    /// True when the seed nodes run in cluster mode (known once connected).
    cluster: std::sync::atomic::AtomicBool,
    /// The last check's verdict; `None` before the first.
    health: std::sync::Mutex<Option<Health>>,
    /// The last round trip failed: the next check fails too, whatever its
    /// own probe saw (the client may route a probe around a dead primary
    /// that requests still reach).
    last_trip_failed: std::sync::atomic::AtomicBool,
    /// `neardup_redis_*`, fed from `counters` and `health` at each scrape.
    metrics: super::metrics::RedisMetrics,
    /// The slot map as last read, for grouping reads by node
    /// ([`Self::slot_owners`]); none until read, or after a grouped read
    /// failed.
    pub(super) owners: std::sync::RwLock<Option<Arc<SlotOwners>>>,
    /// Grouped reads are off until then (see [`OWNERS_PAUSE`]).
    pub(super) owners_paused: std::sync::Mutex<Option<std::time::Instant>>,
}

fn unavailable(what: &str, e: impl std::fmt::Display) -> BackendError {
    BackendError::Unavailable(format!("{what}: {e}"))
}

impl Redis {
    pub fn new(settings: RedisSettings) -> Self {
        Self {
            conn: tokio::sync::RwLock::new(None),
            settings,
            counters: Arc::default(),
            cluster: std::sync::atomic::AtomicBool::new(false),
            health: std::sync::Mutex::new(None),
            last_trip_failed: std::sync::atomic::AtomicBool::new(false),
            metrics: super::metrics::RedisMetrics::new(),
            owners: std::sync::RwLock::new(None),
            owners_paused: std::sync::Mutex::new(None),
        }
    }

    /// Which primary serves each slot, to group reads by node: read once
    /// (`CLUSTER SLOTS`, one trip) and kept until a grouped read fails;
    /// `None` while grouped reads are paused after a failure, or when the
    /// map cannot be read (then reads go slot by slot).
    pub async fn slot_owners(&self) -> Option<Arc<SlotOwners>> {
        if let Some(o) = self.owners.read().expect("owners lock").as_ref() {
            return Some(Arc::clone(o));
        }
        {
            let mut paused = self.owners_paused.lock().expect("owners pause");
            match *paused {
                Some(until) if std::time::Instant::now() < until => return None,
                Some(_) => *paused = None,
                None => {}
            }
        }
        let mut conn = self.conn().await.ok()?;
        self.counters.round_trips.fetch_add(1, Ordering::Relaxed);
        self.counters.commands.fetch_add(1, Ordering::Relaxed);
        self.read_owners(&mut conn).await
    }

    /// Read which primary serves each slot on `conn` (one command, bounded
    /// by `command_timeout_ms`; none for a single Redis) and keep it, or
    /// pause grouped reads when that failed.
    async fn read_owners(&self, conn: &mut Conn) -> Option<Arc<SlotOwners>> {
        let read = async {
            if let Conn::Single(_) = conn {
                return Ok(SlotOwners::single());
            }
            let value: Value = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query_async(conn)
                .await
                .map_err(|e| e.to_string())?;
            SlotOwners::from_cluster_slots(value)
        };
        let read = tokio::time::timeout(self.timeout(), read)
            .await
            .unwrap_or_else(|_| Err("timed out".into()));
        match read {
            Ok(o) => {
                let owners = Arc::new(o);
                *self.owners.write().expect("owners lock") = Some(Arc::clone(&owners));
                Some(owners)
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the cluster's slot map; reads go slot by slot for a while");
                *self.owners.write().expect("owners lock") = None;
                self.pause_owners();
                None
            }
        }
    }

    /// A grouped read failed: forget the slot map (read again after
    /// 10 s) and count it.
    pub fn slot_owners_failed(&self, e: &redis::RedisError) {
        let had = self.owners.write().expect("owners lock").take().is_some();
        self.counters
            .grouped_read_failures
            .fetch_add(1, Ordering::Relaxed);
        if had {
            tracing::warn!(error = %e, "a read grouped by node failed (the slot map moved, or the script was refused); read slot by slot, and the map read again in 10 s");
        }
        self.pause_owners();
    }

    fn pause_owners(&self) {
        *self.owners_paused.lock().expect("owners pause") =
            Some(std::time::Instant::now() + OWNERS_PAUSE);
    }

    /// Append `neardup_redis_*`, brought up to date, to `out` (OpenMetrics text).
    pub fn encode_metrics(&self, out: &mut String) {
        self.metrics.encode(self, out);
    }

    /// The last check's verdict (`None` before the first).
    pub fn health(&self) -> Option<Health> {
        self.health.lock().expect("health lock").clone()
    }

    /// True when the last check found the cluster serving.
    pub fn is_healthy(&self) -> bool {
        self.health().is_some_and(|h| h.ok)
    }

    /// Check the cluster now and keep the verdict (logged when it changes):
    /// every primary of the current slot map answers `PING`, a node says
    /// `cluster_state:ok` (a cluster), and the primaries' redirection
    /// counts are read. Bounded by `command_timeout_ms` per step.
    pub async fn check(&self) -> Health {
        let verdict = match self.probe().await {
            Ok(primaries) => Health {
                ok: true,
                reason: String::new(),
                primaries,
            },
            Err(e) => {
                self.counters.check_failures.fetch_add(1, Ordering::Relaxed);
                Health {
                    ok: false,
                    reason: e.to_string(),
                    primaries: 0,
                }
            }
        };
        {
            let mut slot = self.health.lock().expect("health lock");
            let was = slot.as_ref().map(|h| h.ok);
            if was != Some(verdict.ok) {
                if verdict.ok {
                    tracing::info!(primaries = verdict.primaries, "redis is serving; ready");
                } else {
                    tracing::warn!(reason = %verdict.reason, "redis is not serving every slot; /readyz answers 503");
                }
            }
            *slot = Some(verdict.clone());
        }
        if !verdict.ok {
            self.reconnect().await;
        }
        verdict
    }

    /// After a failed check: build a fresh connection (a new slot map from
    /// the seed nodes) and put it in place of the current one. Requests
    /// keep the current one meanwhile, so none waits for this. The
    /// client's own recovery can stall every node's traffic for as long as
    /// requests keep failing against a dead node after a failover
    /// (measured with redis 1.8.1 under steady load: no request served in
    /// 20 s); a fresh connection reaches the promoted replica at once.
    async fn reconnect(&self) {
        if self.conn.read().await.is_none() {
            return;
        }
        let budget = Duration::from_millis(
            self.settings.connect_timeout_ms + self.settings.command_timeout_ms,
        );
        match tokio::time::timeout(budget, self.connect()).await {
            Ok(Ok(mut fresh)) => {
                // A failover moved slots: the map as the fresh connection
                // sees it.
                self.read_owners(&mut fresh).await;
                *self.conn.write().await = Some(fresh);
                self.counters.reconnects.fetch_add(1, Ordering::Relaxed);
                tracing::info!("a fresh connection to redis replaces the current one");
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "reconnecting to redis failed; retried at the next check")
            }
            Err(_) => tracing::warn!("reconnecting to redis timed out; retried at the next check"),
        }
    }

    async fn probe(&self) -> Result<u64, BackendError> {
        if self.last_trip_failed.swap(false, Ordering::Relaxed) {
            return Err(unavailable(
                "the last round trip of a request",
                "it failed (see the request's log line)",
            ));
        }
        let conn = self.conn().await?;
        let bounded = |what: &'static str, cmd: Cmd| {
            let mut conn = conn.clone();
            async move {
                tokio::time::timeout(self.timeout(), cmd.query_async::<Value>(&mut conn))
                    .await
                    .map_err(|_| unavailable(what, "timed out"))?
                    .map_err(|e| unavailable(what, e))
            }
        };
        // PING goes to every primary of the slot map (all must answer).
        bounded("pinging every primary", redis::cmd("PING")).await?;
        if self.is_cluster() {
            let mut info = redis::cmd("CLUSTER");
            info.arg("INFO");
            let state = bounded("reading the cluster state", info).await?;
            let mut ok = false;
            walk_strings(&state, &mut |s| ok |= s.contains("cluster_state:ok"));
            if !ok {
                return Err(unavailable(
                    "the cluster state",
                    "cluster_state is not ok (a slot has no serving primary)",
                ));
            }
        }
        let mut stats = redis::cmd("INFO");
        stats.arg("errorstats");
        let stats = bounded("reading error statistics", stats).await?;
        let (mut moved, mut ask) = (0u64, 0u64);
        walk_strings(&stats, &mut |s| {
            moved += errorstat(s, "MOVED");
            ask += errorstat(s, "ASK");
        });
        self.counters.moved.store(moved, Ordering::Relaxed);
        self.counters.ask.store(ask, Ordering::Relaxed);
        let primaries = tokio::time::timeout(self.timeout(), self.primaries())
            .await
            .map_err(|_| unavailable("reading the cluster's nodes", "timed out"))??;
        Ok(primaries.len() as u64)
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.settings.command_timeout_ms)
    }

    pub fn is_cluster(&self) -> bool {
        self.cluster.load(Ordering::Relaxed)
    }

    /// Connect (once; later calls return the same connection). A cluster
    /// connection reconnects by itself from then on.
    pub async fn conn(&self) -> Result<Conn, BackendError> {
        if let Some(c) = self.conn.read().await.as_ref() {
            return Ok(c.clone());
        }
        let mut slot = self.conn.write().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let budget = Duration::from_millis(
            self.settings.connect_timeout_ms + self.settings.command_timeout_ms,
        );
        let mut conn = tokio::time::timeout(budget, self.connect())
            .await
            .map_err(|_| unavailable("connecting to redis", "timed out"))??;
        // The slot map for grouped reads, so that no query waits for it.
        self.read_owners(&mut conn).await;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    async fn connect(&self) -> Result<Conn, BackendError> {
        let s = &self.settings;
        let connect_timeout = Duration::from_millis(s.connect_timeout_ms);
        // Ask the first node that answers whether it runs in cluster mode.
        let mut last = None;
        let mut cluster = None;
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(Some(self.timeout()));
        let mut single = None;
        for url in &s.nodes {
            let client = match redis::Client::open(url.as_str()) {
                Ok(c) => c,
                Err(e) => {
                    last = Some(unavailable(url, e));
                    continue;
                }
            };
            match client
                .get_multiplexed_async_connection_with_config(&config)
                .await
            {
                Ok(mut c) => {
                    let info: Result<String, _> =
                        redis::cmd("INFO").arg("cluster").query_async(&mut c).await;
                    match info {
                        Ok(info) => {
                            cluster = Some(info.contains("cluster_enabled:1"));
                            single = Some(c);
                            break;
                        }
                        Err(e) => last = Some(unavailable(url, e)),
                    }
                }
                Err(e) => last = Some(unavailable(url, e)),
            }
        }
        let Some(cluster) = cluster else {
            return Err(last.unwrap_or_else(|| unavailable("redis", "no node configured")));
        };
        self.cluster.store(cluster, Ordering::Relaxed);
        if !cluster {
            return Ok(Conn::Single(single.expect("set with cluster")));
        }
        let mut builder = redis::cluster::ClusterClientBuilder::new(s.nodes.clone())
            .connection_timeout(connect_timeout)
            .response_timeout(self.timeout())
            .retries(2)
            .min_retry_wait(50)
            .max_retry_wait(300);
        if s.read_from_replicas {
            builder = builder.read_routing_strategy(
                redis::cluster_read_routing::RoundRobinReplicaStrategy::default(),
            );
        }
        let client = builder
            .build()
            .map_err(|e| unavailable("redis cluster", e))?;
        let conn = client
            .get_async_connection()
            .await
            .map_err(|e| unavailable("redis cluster", e))?;
        Ok(Conn::Cluster(conn))
    }

    /// One round trip: `commands` futures, each given its own clone of the
    /// connection, run at once; all their results, or the first error, or
    /// 503 after `command_timeout_ms`.
    pub async fn trip<T, F, Fut>(
        &self,
        what: &str,
        commands: Vec<F>,
    ) -> Result<Vec<T>, BackendError>
    where
        F: FnOnce(Conn) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        // Connecting (only before the first connection is made) counts
        // against the trip's time too.
        let conn = tokio::time::timeout(self.timeout(), self.conn())
            .await
            .map_err(|_| unavailable(what, "timed out connecting"))??;
        let c = &self.counters;
        c.round_trips.fetch_add(1, Ordering::Relaxed);
        c.commands
            .fetch_add(commands.len() as u64, Ordering::Relaxed);
        // At most TRIP_WINDOW commands in flight: they are still pipelined
        // per node, but the cluster client's cost per completion grows with
        // the commands in flight (a batch's trip of ~5,000 spent most of
        // its CPU there).
        // A trip longer than a window gets command_timeout_ms per window.
        let windows = commands.len().div_ceil(TRIP_WINDOW).max(1) as u32;
        let n = commands.len();
        let all = async move {
            let mut done: Vec<(usize, redis::RedisResult<T>)> = futures_util::stream::iter(
                commands
                    .into_iter()
                    .enumerate()
                    .map(|(i, f)| f(conn.clone()).map(move |r| (i, r))),
            )
            .buffer_unordered(TRIP_WINDOW)
            .collect()
            .await;
            done.sort_unstable_by_key(|(i, _)| *i);
            debug_assert_eq!(done.len(), n);
            done.into_iter().map(|(_, r)| r).collect::<Vec<_>>()
        };
        let outcome = match tokio::time::timeout(self.timeout() * windows, all).await {
            Err(_) => {
                c.errors.fetch_add(1, Ordering::Relaxed);
                c.timeouts.fetch_add(1, Ordering::Relaxed);
                Err(unavailable(
                    what,
                    "timed out (storage.redis.command_timeout_ms)",
                ))
            }
            Ok(results) => results
                .into_iter()
                .collect::<Result<Vec<T>, _>>()
                .map_err(|e| {
                    c.errors.fetch_add(1, Ordering::Relaxed);
                    unavailable(what, e)
                }),
        };
        // What the last request trip saw, for the next check.
        self.last_trip_failed
            .store(outcome.is_err(), Ordering::Relaxed);
        outcome
    }

    /// One round trip of boxed calls.
    pub async fn calls(&self, what: &str, calls: Vec<Call>) -> Result<Vec<Value>, BackendError> {
        self.trip(what, calls).await
    }

    /// One command as its own round trip.
    pub async fn one<T: FromRedisValue>(&self, what: &str, cmd: Cmd) -> Result<T, BackendError> {
        let mut out = self
            .trip(
                what,
                vec![move |mut c: Conn| async move { cmd.query_async::<T>(&mut c).await }],
            )
            .await?;
        Ok(out.pop().expect("one result per command"))
    }

    /// With `durability = "replicated"`: wait until at least one replica of
    /// every primary has what this connection wrote (`WAIT 1`), else 503.
    pub async fn replicate(&self) -> Result<(), BackendError> {
        if self.settings.durability != Durability::Replicated {
            return Ok(());
        }
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(1).arg(self.settings.replication_timeout_ms);
        let acked: i64 = self.one("waiting for a replica", cmd).await?;
        if acked < 1 {
            self.counters
                .replication_failures
                .fetch_add(1, Ordering::Relaxed);
            return Err(BackendError::Unavailable(
                "no replica confirmed the write within storage.redis.replication_timeout_ms".into(),
            ));
        }
        Ok(())
    }

    /// The addresses (`host:port`) of the primaries serving slots now (the
    /// seed node itself for a single Redis).
    pub async fn primaries(&self) -> Result<Vec<String>, BackendError> {
        let conn = self.conn().await?;
        if let Conn::Single(_) = conn {
            let url = self.settings.nodes.first().cloned().unwrap_or_default();
            return Ok(vec![url
                .trim_start_matches("redis://")
                .trim_end_matches('/')
                .to_owned()]);
        }
        let text: String = self
            .one("reading the cluster's nodes", {
                let mut c = redis::cmd("CLUSTER");
                c.arg("NODES");
                c
            })
            .await?;
        Ok(text
            .lines()
            .filter_map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                (f.len() >= 9 && f[2].contains("master") && !f[2].contains("fail"))
                    .then(|| f[1].split('@').next().unwrap_or("").to_owned())
            })
            .filter(|a| !a.is_empty())
            .collect())
    }

    /// Every key matching `pattern` on every primary (`SCAN`, 1,000 at a
    /// step; a key moved by a resharding meanwhile may be seen twice or
    /// missed, as SCAN itself promises).
    pub async fn scan_all(&self, pattern: &str) -> Result<Vec<String>, BackendError> {
        let mut keys = Vec::new();
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_millis(
                self.settings.connect_timeout_ms,
            )))
            .set_response_timeout(Some(self.timeout()));
        for addr in self.primaries().await? {
            let client = redis::Client::open(format!("redis://{addr}"))
                .map_err(|e| unavailable(&addr, e))?;
            let mut c = client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .map_err(|e| unavailable(&addr, e))?;
            let mut cursor: u64 = 0;
            loop {
                let mut scan = redis::cmd("SCAN");
                scan.arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(1000);
                self.counters.round_trips.fetch_add(1, Ordering::Relaxed);
                let (next, batch): (u64, Vec<String>) =
                    tokio::time::timeout(self.timeout(), scan.query_async(&mut c))
                        .await
                        .map_err(|_| unavailable(&addr, "SCAN timed out"))?
                        .map_err(|e| unavailable(&addr, e))?;
                keys.extend(batch);
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        keys.sort_unstable();
        keys.dedup();
        Ok(keys)
    }
}

/// Call `f` on every text in `v` (a reply of one node, or a map of the
/// replies of several).
fn walk_strings(v: &Value, f: &mut impl FnMut(&str)) {
    match v {
        Value::BulkString(b) => f(&String::from_utf8_lossy(b)),
        Value::SimpleString(s) => f(s),
        Value::VerbatimString { text, .. } => f(text),
        Value::Okay => f("OK"),
        Value::Array(items) | Value::Set(items) => items.iter().for_each(|i| walk_strings(i, f)),
        Value::Map(pairs) => pairs.iter().for_each(|(_, v)| walk_strings(v, f)),
        _ => {}
    }
}

/// `count` of `errorstat_<kind>:count=N` in an `INFO errorstats` text.
fn errorstat(info: &str, kind: &str) -> u64 {
    let prefix = format!("errorstat_{kind}:count=");
    info.lines()
        .filter_map(|l| l.trim().strip_prefix(prefix.as_str()))
        .filter_map(|rest| rest.split(',').next()?.parse::<u64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errorstats_are_summed_per_kind() {
        let info = "# Errorstats\r\nerrorstat_ASK:count=2\r\nerrorstat_MOVED:count=17\r\nerrorstat_NOSCRIPT:count=3\r\n";
        assert_eq!(errorstat(info, "MOVED"), 17);
        assert_eq!(errorstat(info, "ASK"), 2);
        assert_eq!(errorstat(info, "CROSSSLOT"), 0);
    }

    #[test]
    fn replies_of_several_nodes_are_walked() {
        let v = Value::Map(vec![
            (
                Value::SimpleString("a:1".into()),
                Value::SimpleString("PONG".into()),
            ),
            (
                Value::SimpleString("b:2".into()),
                Value::SimpleString("PONG".into()),
            ),
        ]);
        let mut n = 0;
        walk_strings(&v, &mut |s| n += usize::from(s == "PONG"));
        assert_eq!(n, 2);
    }
}
