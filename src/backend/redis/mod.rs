//! The redis backend: a collection's records and LSH buckets in a Redis
//! Cluster (or one Redis), shared by every neardup node that points at it.
//! The layout, the round trips and the guarantees are in ARCHITECTURE.md
//! ("Storage backends"); the bytes in [`codec`]; the connection in [`conn`].
//!
//! The node keeps an [`Engine`] per collection for its recipe, clock and
//! retention only: it signs texts, computes band keys, decides expiry and
//! verifies candidates exactly, as the memory backend does, so both give
//! the same answers (the same bits). Redis holds what must be shared.
//!
//! **Writes: entries first, the record last.** An insert appends its
//! `(iid, gen)` member to the field of each of its band keys (one trip,
//! every band at once), then commits the record with a script on the
//! record's own key (create, replace or refuse). A reader accepts a
//! bucket member only if the record it reads has the member's `gen`, so a
//! document is visible only once fully indexed, and entries of older or
//! unfinished versions are skipped. Removing entries removes exactly one
//! `(iid, gen)`, so it never touches another version's entries.

mod catalog;
pub mod codec;
pub mod conn;
mod metrics;

use super::BackendError;
use crate::engine::{
    Comparison, DocId, Engine, EngineError, NewDoc, Prepared, Query, QueryOutcome, Record,
    ScanStats, Stamp, Threshold, UniqueOutcome, WriteMode, WriteOutcome,
};
pub use catalog::{Created, Heartbeat, SharedCatalog, HEARTBEAT_MS};
use codec::{
    decode_head, decode_record, due_of, encode_record, iid, member, members, own_expiry, Due, Keys,
    RecordHead, StoredRecord, DUE_MINUTE_MS, HEAD_AND_ID, MEMBER,
};
pub use conn::{call, script_call, Call, Conn, Redis, RedisCounters, Script};
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

/// Append members to fields of one bucket hash.
/// `KEYS[1]` the hash; ARGV: field, member, field, member, …
static APPEND: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/append.lua")));

/// Remove exactly these members from fields of one bucket hash (a field
/// left empty goes). `KEYS[1]` the hash; ARGV: field, member, …
static REMOVE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/remove.lua")));

/// The commit of a write. `KEYS[1]` the record, `KEYS[2]` its text (`KEYS[3]`
/// the pending key of an if_unique write, which must still hold `ARGV[1]`);
/// `ARGV[1]` the new record, `ARGV[2]` 'c' (create) or 'u' (upsert), `ARGV[3]`
/// now (ms), `ARGV[4]` the collection's retention (ms, 0: none), `ARGV[5]` the
/// id, `ARGV[6]` the text (zstd) or '' (none kept: an older one goes).
/// Returns {outcome[, old record]}: 'created', 'replaced', 'exists',
/// 'collision' (another id hashes to the same iid), 'expired' (the
/// pending key is gone).
static COMMIT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/commit.lua")));

/// Delete a record (and its text) if it names this id (and, given `ARGV[2]`,
/// is still that `gen`). `KEYS[1]` the record, `KEYS[2]` its text; `ARGV[1]` the
/// id, `ARGV[2]` the gen (4 bytes) or ''. Returns the deleted record, or nil.
static DELETE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/delete.lua")));

/// Delete a pending key if it still holds `ARGV[1]`. `KEYS[1]` the pending key.
static UNCLAIM: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/unclaim.lua")));

/// Append members to a due bucket and name the bucket in its sorted set.
/// `KEYS[1]` the bucket, `KEYS[2]` the set; `ARGV[1]` the bucket's minute,
/// `ARGV[2]` its score (the minute's first ms), `ARGV[3]` the members.
static DUE_ADD: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/due_add.lua")));

/// Drop members from a due bucket (every copy of each); an emptied or
/// missing bucket leaves its sorted set. `KEYS[1]` the bucket, `KEYS[2]`
/// the set; `ARGV[1]` the bucket's minute, `ARGV[2]` the bucket as the
/// caller read it ('' if it did not), `ARGV[3]` what the caller keeps of
/// that (its members less the dropped ones, in order), `ARGV[4]` the
/// members to drop, concatenated. A bucket only grows at its end (`APPEND`)
/// between rewrites, so while it still starts with what was read that part
/// is replaced by what is kept: string operations, however large the bucket.
/// Otherwise (another sweep rewrote it meanwhile) it is rebuilt member by
/// member without the dropped ones.
static DUE_DROP: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/due_drop.lua")));

/// A member whose record is gone or is another version ("stale": left by a
/// replace, a delete, a refused or interrupted write) is dropped from its
/// due bucket only once the bucket's minute is this far behind now. A write
/// appends its member before it commits its record, and its bucket's minute
/// is its creation or its own expiry, so a member of a write still under
/// way is not dropped (a write whose own expiry is already this far in the
/// past, or an import of documents created that long ago, could lose its
/// member to a sweep in the milliseconds before its commit: the record is
/// then found by the next full walk, and is hidden once expired anyway).
const STALE_GRACE_MINUTES: u64 = 10;

/// Whether a stale member of the due bucket of `minute` may be dropped at
/// `now` (see [`STALE_GRACE_MINUTES`]).
fn past_grace(minute: u64, now: u64) -> bool {
    minute + STALE_GRACE_MINUTES < now / DUE_MINUTE_MS
}

/// Every node walks all of a collection's records (their heads) at its first
/// sweep and then once a day: it adds the due-bucket members of records
/// written without one (by a version of neardup before the due index, during
/// a rolling upgrade) and drops stale members the sweeps never reach (those
/// in buckets of creation while the collection has no retention).
const WALK_EVERY: Duration = Duration::from_secs(24 * 3600);

/// Documents written per pair of trips by a batch.
const WRITE_PART: usize = 250;

/// Records read per trip by a whole-collection scan.
const SCAN_READ: usize = 4096;

/// A verified pair of a whole-collection scan (`a` < `b` by id).
#[derive(Clone, Debug)]
pub struct ScanPair {
    pub a: Arc<Record>,
    pub b: Arc<Record>,
    pub jaccard: f64,
}

/// A record met by a scan: the version its buckets must name, its band keys.
struct Scanned {
    record: Arc<Record>,
    gen: u32,
    band_keys: Vec<u64>,
}

/// How long an if_unique write's pending key lives (a crashed writer's
/// claim lapses by itself).
const PENDING_MS: u64 = 30_000;
/// An if_unique write that keeps meeting concurrent near-duplicates gives
/// up after this many attempts (503: retry).
const UNIQUE_ATTEMPTS: u32 = 5;

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
    /// index (`None`: at its next sweep); see [`WALK_EVERY`].
    next_walk: std::sync::Mutex<Option<Instant>>,
}

/// A written document's parts, ready to send.
struct Staged {
    iid: u64,
    gen: u32,
    id: DocId,
    value: Vec<u8>,
    band_keys: Vec<u64>,
    /// Its due bucket (kind, minute).
    due: (Due, u64),
    /// The text to keep (zstd), when the collection stores texts.
    text: Option<Vec<u8>>,
}

/// What a retention sweep found: the expired records to delete, and the
/// members to drop from due buckets (those of the deleted records are added
/// as they are deleted), with each bucket as it read it.
#[derive(Default)]
struct Sweep {
    expired: Vec<(RecordHead, (Due, u64))>,
    drop: BTreeMap<(Due, u64), Vec<[u8; MEMBER]>>,
    read: HashMap<(Due, u64), Vec<u8>>,
}

/// What a commit script said.
enum Committed {
    Created(Option<Vec<u8>>),
    Replaced(Vec<u8>),
    Exists,
    Collision,
    Expired,
}

fn parse_commit(v: redis::Value) -> Result<Committed, BackendError> {
    let parts: Vec<redis::Value> = redis::from_redis_value(v)
        .map_err(|e| BackendError::Internal(format!("commit script answer: {e}")))?;
    let mut it = parts.into_iter();
    let outcome: String = it
        .next()
        .map(redis::from_redis_value)
        .transpose()
        .map_err(|e| BackendError::Internal(format!("commit script answer: {e}")))?
        .unwrap_or_default();
    let old: Option<Vec<u8>> = it
        .next()
        .map(redis::from_redis_value)
        .transpose()
        .map_err(|e| BackendError::Internal(format!("commit script answer: {e}")))?;
    Ok(match (outcome.as_str(), old) {
        ("created", old) => Committed::Created(old),
        ("replaced", Some(old)) => Committed::Replaced(old),
        ("exists", _) => Committed::Exists,
        ("collision", _) => Committed::Collision,
        ("expired", _) => Committed::Expired,
        (other, _) => {
            return Err(BackendError::Internal(format!(
                "commit script said {other:?}"
            )))
        }
    })
}

fn corrupt(key: &str, e: impl std::fmt::Display) -> BackendError {
    BackendError::Internal(format!("{key}: {e}"))
}

impl RedisIndex {
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
        let meta = format!("layout=1;group_bits={wanted}");
        let mut set = redis::cmd("SET");
        set.arg(probe.meta()).arg(&meta).arg("NX");
        let _: Option<String> = redis.one("writing the collection layout", set).await?;
        let mut get = redis::cmd("GET");
        get.arg(probe.meta());
        let stored: Option<String> = redis.one("reading the collection layout", get).await?;
        let stored = stored.unwrap_or(meta);
        let group_bits = stored
            .split(';')
            .find_map(|kv| kv.strip_prefix("group_bits="))
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|g| *g <= 24)
            .ok_or_else(|| corrupt(&probe.meta(), format!("unreadable layout {stored:?}")))?;
        let this = Self {
            engine,
            redis,
            keys: Keys::new(&prefix, name, group_bits),
            documents: AtomicU64::new(0),
            store_text: std::sync::atomic::AtomicBool::new(false),
            paused: std::sync::atomic::AtomicBool::new(false),
            next_walk: std::sync::Mutex::new(None),
        };
        this.refresh_count().await?;
        Ok(this)
    }

    /// Keep the texts of writes from now on (or stop).
    pub fn set_store_text(&self, on: bool) {
        self.store_text.store(on, Ordering::Relaxed);
    }

    /// Refuse writes (503) while a reindex copies the collection.
    pub fn set_paused(&self, on: bool) {
        self.paused.store(on, Ordering::Relaxed);
    }

    fn check_writable(&self) -> Result<(), BackendError> {
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

    /// [`Self::refresh_count`] less the documents the due index shows
    /// expired and not yet purged (its buckets up to now: no scan of the
    /// records): the live count, kept as [`Self::documents`].
    pub async fn refresh_live_count(&self) -> Result<usize, BackendError> {
        let stored = self.refresh_count().await?;
        let expired = self.due(self.engine.now_ms()).await?.expired.len();
        let live = stored.saturating_sub(expired);
        self.documents.store(live as u64, Ordering::Relaxed);
        Ok(live)
    }

    /// Move the counter by `delta`, as its own trip.
    async fn adjust(&self, delta: i64) -> Result<(), BackendError> {
        self.redis
            .calls("counting documents", vec![self.counter_call(delta)])
            .await
            .map(drop)
    }

    fn ttl_ms(&self) -> u64 {
        self.engine
            .retention()
            .map_or(0, |d| (d.as_millis() as u64).max(1))
    }

    fn stage(&self, new: &NewDoc, created_ms: u64) -> Staged {
        let gen = new_gen();
        let (created_ms, expires_ms) = (
            new.created_ms.unwrap_or(created_ms),
            new.expires_ms.unwrap_or(0),
        );
        let value = encode_record(
            gen,
            created_ms,
            expires_ms,
            new.id.as_str(),
            new.metadata.as_deref(),
            new.doc.shingles(),
        );
        Staged {
            iid: iid(new.id.as_str()),
            gen,
            id: new.id.clone(),
            value,
            band_keys: self.engine.band_keys(new.doc.signature()),
            due: due_of(created_ms, expires_ms),
            text: new
                .text
                .as_deref()
                .filter(|_| self.stores_text())
                .map(crate::persist::texts::compress),
        }
    }

    /// The bucket commands for `docs`' members (append or remove), one
    /// script call per bucket hash.
    fn bucket_calls<'a>(
        &self,
        docs: impl IntoIterator<Item = (u64, u32, &'a [u64])>,
    ) -> BTreeMap<String, Vec<Vec<u8>>> {
        let mut by_hash: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
        for (iid, gen, band_keys) in docs {
            for (band, &key) in band_keys.iter().enumerate() {
                let args = by_hash.entry(self.keys.group(band, key)).or_default();
                args.push(key.to_le_bytes().to_vec());
                args.push(member(iid, gen).to_vec());
            }
        }
        by_hash
    }

    /// The script calls of `calls` (one per bucket hash).
    fn bucket_script_calls(
        script: &'static Script,
        calls: BTreeMap<String, Vec<Vec<u8>>>,
    ) -> Vec<Call> {
        calls
            .into_iter()
            .map(|(hash, args)| script_call(script, vec![hash], args))
            .collect()
    }

    /// `DUE_ADD` calls for `members` (one per due bucket).
    fn due_add_calls(
        &self,
        members: impl IntoIterator<Item = ((Due, u64), [u8; MEMBER])>,
    ) -> Vec<Call> {
        let mut by_bucket: BTreeMap<(Due, u64), Vec<[u8; MEMBER]>> = BTreeMap::new();
        for (bucket, m) in members {
            by_bucket.entry(bucket).or_default().push(m);
        }
        by_bucket
            .into_iter()
            .map(|((due, minute), ms)| {
                let keys = vec![self.keys.due_bucket(due, minute), self.keys.due_set(due)];
                let args = vec![
                    minute.to_string().into_bytes(),
                    (minute * DUE_MINUTE_MS).to_string().into_bytes(),
                    ms.concat(),
                ];
                script_call(&DUE_ADD, keys, args)
            })
            .collect()
    }

    /// `DUE_DROP` calls for the members of each due bucket in `drop`, with
    /// the bucket as the sweep `read` it (moved into the call, not copied:
    /// a bucket can be megabytes) and what it keeps of that.
    fn due_drop_calls(
        &self,
        drop: BTreeMap<(Due, u64), Vec<[u8; MEMBER]>>,
        mut read: HashMap<(Due, u64), Vec<u8>>,
    ) -> Vec<Call> {
        drop.into_iter()
            .filter(|(_, ms)| !ms.is_empty())
            .map(|((due, minute), ms)| {
                let keys = vec![self.keys.due_bucket(due, minute), self.keys.due_set(due)];
                let read = read.remove(&(due, minute)).unwrap_or_default();
                let dropped: std::collections::HashSet<&[u8]> =
                    ms.iter().map(|m| m.as_slice()).collect();
                let kept: Vec<u8> = read
                    .chunks_exact(MEMBER)
                    .filter(|m| !dropped.contains(m))
                    .flatten()
                    .copied()
                    .collect();
                let args = vec![minute.to_string().into_bytes(), read, kept, ms.concat()];
                script_call(&DUE_DROP, keys, args)
            })
            .collect()
    }

    /// `INCR` of the write counter, as a call.
    fn bump_call(&self) -> Call {
        let mut cmd = redis::cmd("INCR");
        cmd.arg(self.keys.writes());
        call(cmd)
    }

    /// The write counter: changes whenever a document is written or
    /// deleted through any node.
    pub async fn write_version(&self) -> Result<u64, BackendError> {
        let mut get = redis::cmd("GET");
        get.arg(self.keys.writes());
        let n: Option<u64> = self.redis.one("reading the write counter", get).await?;
        Ok(n.unwrap_or(0))
    }

    /// `INCRBY` of the document counter, as a call.
    fn counter_call(&self, delta: i64) -> Call {
        let mut cmd = redis::cmd("INCRBY");
        cmd.arg(self.keys.counter()).arg(delta);
        call(cmd)
    }

    /// The entries of the stored records `olds` (band keys recomputed from
    /// their shingles) as removal calls.
    fn removal_calls(&self, olds: &[(u64, Vec<u8>)]) -> Result<Vec<Call>, BackendError> {
        let mut docs = Vec::with_capacity(olds.len());
        for (iid, bytes) in olds {
            let stored = decode_record(bytes).map_err(|e| corrupt(&self.keys.record(*iid), e))?;
            let Some(prepared) = self.engine.prepared_from_shingles(stored.shingles) else {
                return Err(corrupt(&self.keys.record(*iid), "an empty shingle set"));
            };
            docs.push((
                *iid,
                stored.gen,
                self.engine.band_keys(prepared.signature()),
            ));
        }
        let calls = self.bucket_calls(docs.iter().map(|(i, g, k)| (*i, *g, k.as_slice())));
        Ok(Self::bucket_script_calls(&REMOVE, calls))
    }

    /// Remove the entries of the stored records `olds`.
    async fn remove_entries(&self, olds: &[(u64, Vec<u8>)]) -> Result<(), BackendError> {
        let calls = self.removal_calls(olds)?;
        self.redis
            .calls("removing bucket entries", calls)
            .await
            .map(drop)
    }

    /// The commit script call for `doc`.
    fn commit_call(
        &self,
        doc: &Staged,
        mode: WriteMode,
        pending: bool,
        now: u64,
    ) -> impl FnOnce(
        Conn,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = redis::RedisResult<redis::Value>> + Send>,
    > {
        let record = self.keys.record(doc.iid);
        let text_key = self.keys.text(doc.iid);
        let text = doc.text.clone().unwrap_or_default();
        let pending_key = pending.then(|| self.keys.pending(doc.iid));
        let value = doc.value.clone();
        let mode = if mode == WriteMode::Create { "c" } else { "u" };
        let ttl = self.ttl_ms();
        let id = doc.id.as_str().to_owned();
        move |mut c: Conn| {
            Box::pin(async move {
                let mut inv = COMMIT.key(record);
                inv.key(text_key);
                if let Some(p) = pending_key {
                    inv.key(p);
                }
                inv.arg(value).arg(mode).arg(now).arg(ttl).arg(id).arg(text);
                inv.invoke_async::<redis::Value>(&mut c).await
            })
        }
    }

    /// Create or replace one document: 2 round trips (appends, commit),
    /// plus the old version's entries removed after a replace.
    pub async fn insert(&self, new: NewDoc, mode: WriteMode) -> Result<WriteOutcome, BackendError> {
        let mut out = self.insert_many(vec![new], mode).await?;
        out.pop()
            .expect("one outcome per document")
            .map_err(BackendError::from)
    }

    /// Many writes: every append at once, then every commit at once, then
    /// the entries of replaced versions and of refused writes removed. A
    /// repeated id is written in a later wave (as sequential calls would).
    pub async fn insert_many(
        &self,
        items: Vec<NewDoc>,
        mode: WriteMode,
    ) -> Result<Vec<Result<WriteOutcome, EngineError>>, BackendError> {
        self.check_writable()?;
        let mut results: Vec<Option<Result<WriteOutcome, EngineError>>> = vec![None; items.len()];
        // Waves of distinct ids, in request order.
        let mut waves: Vec<Vec<usize>> = Vec::new();
        let mut wave_of: HashMap<&str, usize> = HashMap::new();
        for (i, new) in items.iter().enumerate() {
            let w = wave_of.get(new.id.as_str()).map_or(0, |&w| w + 1);
            wave_of.insert(new.id.as_str(), w);
            if waves.len() <= w {
                waves.push(Vec::new());
            }
            waves[w].push(i);
        }
        // Long waves go in parts: each part's trips stay small enough to
        // finish well within command_timeout_ms (a batch of 1,000 articles
        // is ~9,000 bucket appends).
        let parts = waves.into_iter().flat_map(|wave| {
            wave.chunks(WRITE_PART)
                .map(<[usize]>::to_vec)
                .collect::<Vec<_>>()
        });
        for wave in parts {
            let now = self.engine.now_ms();
            let staged: Vec<(usize, Staged)> = wave
                .iter()
                .map(|&i| (i, self.stage(&items[i], now)))
                .collect();
            let calls = self.bucket_calls(
                staged
                    .iter()
                    .map(|(_, s)| (s.iid, s.gen, s.band_keys.as_slice())),
            );
            // Trip 1: every entry, and the counter as if every write
            // created a document (corrected with the cleanup below), so the
            // count is exact once a write is answered, in 2 trips.
            let mut trip = Self::bucket_script_calls(&APPEND, calls);
            trip.extend(
                self.due_add_calls(staged.iter().map(|(_, s)| (s.due, member(s.iid, s.gen)))),
            );
            trip.push(self.counter_call(staged.len() as i64));
            self.redis.calls("appending bucket entries", trip).await?;
            let commits: Vec<_> = staged
                .iter()
                .map(|(_, s)| self.commit_call(s, mode, false, now))
                .collect();
            let answers = self.redis.trip("committing records", commits).await?;
            let mut cleanup: Vec<(u64, Vec<u8>)> = Vec::new();
            let mut not_created = 0i64;
            for ((i, s), answer) in staged.into_iter().zip(answers) {
                let result = match parse_commit(answer)? {
                    Committed::Created(old) => {
                        not_created += i64::from(old.is_some());
                        if let Some(old) = old {
                            cleanup.push((s.iid, old));
                        }
                        Ok(WriteOutcome::Created)
                    }
                    Committed::Replaced(old) => {
                        not_created += 1;
                        cleanup.push((s.iid, old));
                        Ok(WriteOutcome::Replaced)
                    }
                    Committed::Exists => {
                        not_created += 1;
                        cleanup.push((s.iid, s.value));
                        Err(EngineError::AlreadyExists(s.id))
                    }
                    Committed::Collision => {
                        self.remove_entries(&[(s.iid, s.value)]).await?;
                        self.adjust(-1).await?;
                        tracing::error!(
                            id = s.id.as_str(),
                            iid = s.iid,
                            "two ids hash to the same internal id; the write is refused"
                        );
                        return Err(BackendError::Unavailable(format!(
                            "id {:?} collides with a stored id",
                            s.id.as_str()
                        )));
                    }
                    Committed::Expired => {
                        return Err(BackendError::Internal(
                            "a plain commit has no pending key".into(),
                        ))
                    }
                };
                results[i] = Some(result);
            }
            self.redis.replicate().await?;
            // The write counter moves once the records are in (a scan
            // reads it before it starts, so one that missed these writes
            // is recomputed): with the cleanup when there is one, else
            // just after the answer, so a plain insert stays at 2 round
            // trips.
            if !cleanup.is_empty() || not_created != 0 {
                let mut trip = self.removal_calls(&cleanup)?;
                if not_created != 0 {
                    trip.push(self.counter_call(-not_created));
                }
                trip.push(self.bump_call());
                self.redis.calls("removing bucket entries", trip).await?;
            } else {
                let (redis, bump) = (Arc::clone(&self.redis), self.bump_call());
                tokio::spawn(async move {
                    if let Err(e) = redis.calls("counting writes", vec![bump]).await {
                        tracing::warn!(error = %e, "moving the write counter failed; a cached /duplicates answer may be reused until the next write");
                    }
                });
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.expect("every item is in a wave"))
            .collect())
    }

    /// Read and decode the records of `iids` (one trip); `None` for a
    /// missing one.
    async fn read_records(&self, iids: &[u64]) -> Result<Vec<Option<StoredRecord>>, BackendError> {
        let commands: Vec<_> = iids
            .iter()
            .map(|&i| {
                let key = self.keys.record(i);
                move |mut c: Conn| async move {
                    let mut get = redis::cmd("GET");
                    get.arg(key);
                    get.query_async::<Option<Vec<u8>>>(&mut c).await
                }
            })
            .collect();
        let raw = self.redis.trip("reading records", commands).await?;
        raw.into_iter()
            .zip(iids)
            .map(|(bytes, &i)| {
                bytes
                    .map(|b| decode_record(&b).map_err(|e| corrupt(&self.keys.record(i), e)))
                    .transpose()
            })
            .collect()
    }

    /// A decoded record as the engine's [`Record`] (signature recomputed).
    fn to_record(&self, s: StoredRecord) -> Result<Arc<Record>, BackendError> {
        let id =
            DocId::parse(&s.id).map_err(|e| BackendError::Internal(format!("stored id: {e}")))?;
        let prepared = self
            .engine
            .prepared_from_shingles(s.shingles)
            .ok_or_else(|| BackendError::Internal("stored shingles are not a set".into()))?;
        let stamp = Stamp {
            created_ms: s.created_ms,
            expires_ms: own_expiry(s.expires_ms),
        };
        Ok(Arc::new(self.engine.record_of(
            id,
            &prepared,
            s.metadata.map(String::into_boxed_str),
            stamp,
        )))
    }

    /// The current live version of `id`.
    pub async fn get(&self, id: &str) -> Result<Option<Arc<Record>>, BackendError> {
        let mut found = self.read_records(&[iid(id)]).await?;
        let Some(stored) = found.pop().flatten() else {
            return Ok(None);
        };
        if stored.id != id {
            return Ok(None);
        }
        let record = self.to_record(stored)?;
        Ok(self
            .engine
            .is_live(&record, self.engine.now_ms())
            .then_some(record))
    }

    /// The live document `id` and its stored text (`None` when it was
    /// written without one), in one trip; `None` when there is no such
    /// live document.
    pub async fn text(&self, id: &str) -> Result<Option<Option<String>>, BackendError> {
        let i = iid(id);
        let (record, text) = (self.keys.record(i), self.keys.text(i));
        let mut out = self
            .redis
            .trip(
                "reading a stored text",
                vec![move |mut c: Conn| async move {
                    let mut mget = redis::cmd("MGET");
                    mget.arg(record).arg(text);
                    mget.query_async::<(Option<Vec<u8>>, Option<Vec<u8>>)>(&mut c)
                        .await
                }],
            )
            .await?;
        let (record, text) = out.pop().expect("one answer");
        let Some(stored) = record
            .map(|b| decode_record(&b))
            .transpose()
            .map_err(|e| corrupt(&self.keys.record(i), e))?
        else {
            return Ok(None);
        };
        if stored.id != id
            || !self
                .engine
                .is_live(&*self.to_record(stored)?, self.engine.now_ms())
        {
            return Ok(None);
        }
        text.map(|t| {
            crate::persist::texts::decompress(&t).map_err(|e| corrupt(&self.keys.text(i), e))
        })
        .transpose()
        .map(Some)
    }

    /// A uniform sample without replacement of `n` live documents that
    /// have a stored text, as (id, text): the same draw as the memory
    /// backend's (`Store::sample_texts`: ids sorted, a partial
    /// Fisher–Yates shuffle driven by `seed`), stopping before `max_bytes`
    /// of text. Reads every record (a `SCAN` of every primary).
    pub async fn sample_texts(
        &self,
        n: usize,
        seed: u64,
        max_bytes: usize,
    ) -> Result<Vec<(String, String)>, BackendError> {
        let now = self.engine.now_ms();
        let keys = self.redis.scan_all(&self.keys.record_pattern()).await?;
        let mut pool: Vec<(String, u64)> = Vec::new();
        for chunk in keys.chunks(500) {
            let commands: Vec<_> = chunk
                .iter()
                .map(|key| {
                    let key = key.clone();
                    let text = key.replacen(":r:{", ":t:{", 1);
                    move |mut c: Conn| async move {
                        let mut get = redis::cmd("GET");
                        get.arg(&key);
                        let record = get.query_async::<Option<Vec<u8>>>(&mut c).await?;
                        let mut exists = redis::cmd("EXISTS");
                        exists.arg(text);
                        let has_text = exists.query_async::<i64>(&mut c).await?;
                        Ok((record, has_text == 1))
                    }
                })
                .collect();
            let values = self.redis.trip("reading records", commands).await?;
            for (key, (bytes, has_text)) in chunk.iter().zip(values) {
                let (Some(bytes), true) = (bytes, has_text) else {
                    continue;
                };
                let stored = decode_record(&bytes).map_err(|e| corrupt(key, e))?;
                let id = stored.id.clone();
                let record = self.to_record(stored)?;
                if self.engine.is_live(&record, now) {
                    let i = iid(&id);
                    pool.push((id, i));
                }
            }
        }
        pool.sort_unstable();
        let take = crate::engine::sample::draw_front(&mut pool, n, seed);
        pool.truncate(take);
        let commands: Vec<_> = pool
            .iter()
            .map(|(_, i)| {
                let key = self.keys.text(*i);
                move |mut c: Conn| async move {
                    let mut get = redis::cmd("GET");
                    get.arg(key);
                    get.query_async::<Option<Vec<u8>>>(&mut c).await
                }
            })
            .collect();
        let texts = self.redis.trip("reading stored texts", commands).await?;
        let mut out = Vec::with_capacity(take);
        let mut bytes = 0usize;
        for ((id, i), payload) in pool.into_iter().zip(texts) {
            // A text deleted since the scan: skipped.
            let Some(payload) = payload else { continue };
            let text = crate::persist::texts::decompress(&payload)
                .map_err(|e| corrupt(&self.keys.text(i), e))?;
            bytes = bytes.saturating_add(text.len());
            if bytes > max_bytes {
                break;
            }
            out.push((id, text));
        }
        Ok(out)
    }

    /// Every live document with its text, `step` records at a time (an
    /// export): the record keys now, the records page by page.
    pub async fn export(&self, step: usize) -> Result<Export<'_>, BackendError> {
        Ok(Export {
            index: self,
            keys: self.record_keys().await?,
            at: 0,
            step: step.max(1),
        })
    }

    /// The keys of every record of the collection (a `SCAN` of every
    /// primary), for an export.
    pub async fn record_keys(&self) -> Result<Vec<String>, BackendError> {
        self.redis.scan_all(&self.keys.record_pattern()).await
    }

    /// The live documents of the record keys `keys` with their stored
    /// texts (one trip; a record deleted meanwhile is skipped).
    pub async fn read_with_texts(
        &self,
        keys: &[String],
    ) -> Result<Vec<(Arc<Record>, Option<String>)>, BackendError> {
        let commands: Vec<_> = keys
            .iter()
            .map(|key| {
                let (record, text) = (key.clone(), key.replacen(":r:{", ":t:{", 1));
                move |mut c: Conn| async move {
                    let mut mget = redis::cmd("MGET");
                    mget.arg(record).arg(text);
                    mget.query_async::<(Option<Vec<u8>>, Option<Vec<u8>>)>(&mut c)
                        .await
                }
            })
            .collect();
        let now = self.engine.now_ms();
        let mut out = Vec::with_capacity(keys.len());
        for (key, (record, text)) in keys
            .iter()
            .zip(self.redis.trip("reading records", commands).await?)
        {
            let Some(bytes) = record else { continue };
            let stored = decode_record(&bytes).map_err(|e| corrupt(key, e))?;
            let record = self.to_record(stored)?;
            if !self.engine.is_live(&record, now) {
                continue;
            }
            let text = text
                .map(|t| crate::persist::texts::decompress(&t).map_err(|e| corrupt(key, e)))
                .transpose()?;
            out.push((record, text));
        }
        Ok(out)
    }

    /// The members of the buckets `doc` falls in (one trip): iid → gens.
    async fn bucket_members(
        &self,
        band_keys: &[u64],
    ) -> Result<HashMap<u64, Vec<u32>>, BackendError> {
        let commands: Vec<_> = band_keys
            .iter()
            .enumerate()
            .map(|(band, &key)| {
                let hash = self.keys.group(band, key);
                move |mut c: Conn| async move {
                    let mut get = redis::cmd("HGET");
                    get.arg(hash).arg(key.to_le_bytes().as_slice());
                    get.query_async::<Option<Vec<u8>>>(&mut c).await
                }
            })
            .collect();
        let values = self.redis.trip("reading buckets", commands).await?;
        let mut out: HashMap<u64, Vec<u32>> = HashMap::new();
        for v in values.iter().flatten() {
            for (i, g) in members(v) {
                let gens = out.entry(i).or_default();
                if !gens.contains(&g) {
                    gens.push(g);
                }
            }
        }
        Ok(out)
    }

    /// Near-duplicates of an unstored document: 2 round trips (the
    /// buckets, then the candidates' records), verified exactly.
    pub async fn similar_to(
        &self,
        doc: &Prepared,
        exclude: Option<&str>,
        q: &Query,
    ) -> Result<QueryOutcome, BackendError> {
        let band_keys = self.engine.band_keys(doc.signature());
        let mut found = self.bucket_members(&band_keys).await?;
        if let Some(own) = exclude {
            found.remove(&iid(own));
        }
        let cap = self.engine.params().index.max_candidates;
        let mut iids: Vec<u64> = found.keys().copied().collect();
        iids.sort_unstable();
        let truncated = iids.len() > cap;
        iids.truncate(cap);
        let records = self.read_records(&iids).await?;
        let mut current = Vec::with_capacity(records.len());
        for (i, stored) in iids.iter().zip(records) {
            // Missing, or not the version the bucket named: stale.
            let Some(stored) = stored else { continue };
            if !found[i].contains(&stored.gen) {
                continue;
            }
            current.push(self.to_record(stored)?);
        }
        Ok(self
            .engine
            .verify_candidates(doc, exclude, q, current, truncated))
    }

    /// Near-duplicates of the stored document `id`.
    pub async fn similar_to_id(&self, id: &str, q: &Query) -> Result<QueryOutcome, BackendError> {
        let record = self
            .get(id)
            .await?
            .ok_or_else(|| EngineError::NotFound(id.to_owned()))?;
        let doc = self
            .engine
            .prepared_from_shingles(record.shingles().to_vec())
            .ok_or_else(|| BackendError::Internal("stored shingles are not a set".into()))?;
        self.similar_to(&doc, Some(id), q).await
    }

    /// Exact and estimated similarity of two stored documents (one trip).
    pub async fn compare(&self, a: &str, b: &str) -> Result<Comparison, BackendError> {
        let mut found = self.read_records(&[iid(a), iid(b)]).await?.into_iter();
        let now = self.engine.now_ms();
        let mut live = |want: &str| -> Result<Arc<Record>, BackendError> {
            let stored = found.next().flatten().filter(|s| s.id == want);
            let record = stored.map(|s| self.to_record(s)).transpose()?;
            record
                .filter(|r| self.engine.is_live(r, now))
                .ok_or_else(|| EngineError::NotFound(want.to_owned()).into())
        };
        let ra = live(a)?;
        let rb = live(b)?;
        Ok(self.engine.compare_records(&ra, &rb))
    }

    /// Delete `id`: the record first (invisible from then on), then its
    /// entries. False if no live document had it (an expired one is
    /// removed all the same).
    pub async fn remove(&self, id: &str) -> Result<bool, BackendError> {
        self.check_writable()?;
        match self.delete_record(id, None).await? {
            None => Ok(false),
            Some(old) => {
                let stored = decode_record(&old).map_err(|e| corrupt(id, e))?;
                let record = self.to_record(stored)?;
                let live = self.engine.is_live(&record, self.engine.now_ms());
                self.redis.replicate().await?;
                let mut trip = self.removal_calls(&[(iid(id), old)])?;
                trip.push(self.counter_call(-1));
                trip.push(self.bump_call());
                self.redis.calls("removing bucket entries", trip).await?;
                Ok(live)
            }
        }
    }

    /// Delete the record of `id` (if it is still version `gen`, when given).
    async fn delete_record(
        &self,
        id: &str,
        gen: Option<u32>,
    ) -> Result<Option<Vec<u8>>, BackendError> {
        let key = self.keys.record(iid(id));
        let text = self.keys.text(iid(id));
        let id = id.to_owned();
        let gen = gen.map(|g| g.to_le_bytes().to_vec()).unwrap_or_default();
        let mut out = self
            .redis
            .trip(
                "deleting a record",
                vec![move |mut c: Conn| async move {
                    DELETE
                        .key(key)
                        .key(text)
                        .arg(id)
                        .arg(gen)
                        .invoke_async::<Option<Vec<u8>>>(&mut c)
                        .await
                }],
            )
            .await?;
        Ok(out.pop().flatten())
    }

    /// Store `new` unless a stored document matches it by `q`: publish,
    /// then verify (ARCHITECTURE.md, "if_unique across nodes"). Of two
    /// concurrent near-duplicate writes that share a band, at least one
    /// sees the other: never both stored. One that meets another pending
    /// near-duplicate withdraws and tries again after a short random wait;
    /// after a few attempts it answers 503 (retry).
    pub async fn insert_if_unique(
        &self,
        new: NewDoc,
        q: Query,
    ) -> Result<UniqueOutcome, BackendError> {
        self.check_writable()?;
        let q = Query {
            limit: q.limit.max(1),
            ..q
        };
        for attempt in 0..UNIQUE_ATTEMPTS {
            if attempt > 0 {
                self.redis.counters.retries.fetch_add(1, Ordering::Relaxed);
                let jitter = u64::from(new_gen() % 40) + 10 * u64::from(attempt);
                tokio::time::sleep(Duration::from_millis(jitter)).await;
            }
            match self.try_unique(&new, &q).await? {
                Some(outcome) => return Ok(outcome),
                None => continue,
            }
        }
        Err(BackendError::Unavailable(format!(
            "if_unique write of {:?} kept meeting concurrent near-duplicate writes",
            new.id.as_str()
        )))
    }

    /// One attempt: `None` when a concurrent pending near-duplicate made
    /// it withdraw.
    async fn try_unique(
        &self,
        new: &NewDoc,
        q: &Query,
    ) -> Result<Option<UniqueOutcome>, BackendError> {
        let started = Instant::now();
        let now = self.engine.now_ms();
        let doc = self.stage(new, now);
        let pending_key = self.keys.pending(doc.iid);
        // Trip 1: claim (the pending key) and publish (the entries).
        let claim = {
            let key = pending_key.clone();
            let value = doc.value.clone();
            move |mut c: Conn| async move {
                let mut set = redis::cmd("SET");
                set.arg(key).arg(value).arg("PX").arg(PENDING_MS).arg("NX");
                set.query_async::<Option<String>>(&mut c).await.map(|_| ())
            }
        };
        self.redis.trip("claiming an id", vec![claim]).await?;
        let calls = self.bucket_calls([(doc.iid, doc.gen, doc.band_keys.as_slice())]);
        let mut trip = Self::bucket_script_calls(&APPEND, calls);
        trip.extend(self.due_add_calls([(doc.due, member(doc.iid, doc.gen))]));
        self.redis.calls("appending bucket entries", trip).await?;
        // Trip 2: the buckets, after our own entries are in.
        let mut found = self.bucket_members(&doc.band_keys).await?;
        found.remove(&doc.iid);
        let mut iids: Vec<u64> = found.keys().copied().collect();
        iids.sort_unstable();
        let cap = self.engine.params().index.max_candidates;
        let truncated = iids.len() > cap;
        iids.truncate(cap);
        // Trip 3: each candidate's record and pending write, and our own record.
        let mut keys: Vec<u64> = iids.clone();
        keys.push(doc.iid);
        let commands: Vec<_> = keys
            .iter()
            .map(|&i| {
                let (r, p) = (self.keys.record(i), self.keys.pending(i));
                move |mut c: Conn| async move {
                    let mut mget = redis::cmd("MGET");
                    mget.arg(r).arg(p);
                    mget.query_async::<(Option<Vec<u8>>, Option<Vec<u8>>)>(&mut c)
                        .await
                }
            })
            .collect();
        let mut pairs = self.redis.trip("reading candidates", commands).await?;
        let (own, _) = pairs.pop().expect("our own record was read");
        if let Some(own) = own {
            let stored = decode_record(&own).map_err(|e| corrupt(new.id.as_str(), e))?;
            if stored.id == new.id.as_str() {
                let record = self.to_record(stored)?;
                if self.engine.is_live(&record, now) {
                    self.withdraw(&doc).await?;
                    return Err(EngineError::AlreadyExists(new.id.clone()).into());
                }
            }
        }
        let mut committed = Vec::new();
        let mut pending = Vec::new();
        for (i, (rec, pend)) in iids.iter().zip(pairs) {
            let gens = &found[i];
            if let Some(stored) = rec
                .map(|b| decode_record(&b))
                .transpose()
                .map_err(|e| corrupt(&self.keys.record(*i), e))?
            {
                if gens.contains(&stored.gen) {
                    committed.push(self.to_record(stored)?);
                }
            }
            if let Some(stored) = pend
                .map(|b| decode_record(&b))
                .transpose()
                .map_err(|e| corrupt(&self.keys.pending(*i), e))?
            {
                if gens.contains(&stored.gen) {
                    pending.push(self.to_record(stored)?);
                }
            }
        }
        let prepared = &new.doc;
        let matches =
            self.engine
                .verify_candidates(prepared, Some(new.id.as_str()), q, committed, truncated);
        if !matches.matches.is_empty() {
            self.withdraw(&doc).await?;
            return Ok(Some(UniqueOutcome::Duplicate(matches)));
        }
        let rivals =
            self.engine
                .verify_candidates(prepared, Some(new.id.as_str()), q, pending, false);
        if !rivals.matches.is_empty() {
            self.withdraw(&doc).await?;
            return Ok(None);
        }
        // Trip 4: commit (fails if our claim lapsed meanwhile).
        if started.elapsed() >= Duration::from_millis(PENDING_MS / 2) {
            self.withdraw(&doc).await?;
            return Ok(None);
        }
        let mut answer = self
            .redis
            .trip(
                "committing a record",
                vec![self.commit_call(&doc, WriteMode::Create, true, now)],
            )
            .await?;
        match parse_commit(answer.pop().expect("one answer"))? {
            Committed::Created(old) => {
                self.redis.replicate().await?;
                let mut trip = match &old {
                    Some(old) => self.removal_calls(&[(doc.iid, old.clone())])?,
                    None => Vec::new(),
                };
                if old.is_none() {
                    trip.push(self.counter_call(1));
                }
                trip.push(self.bump_call());
                self.redis.calls("committing a record", trip).await?;
                Ok(Some(UniqueOutcome::Inserted(0)))
            }
            Committed::Exists => {
                self.withdraw(&doc).await?;
                Err(EngineError::AlreadyExists(new.id.clone()).into())
            }
            Committed::Expired => {
                self.remove_entries(&[(doc.iid, doc.value.clone())]).await?;
                Ok(None)
            }
            Committed::Collision => {
                self.withdraw(&doc).await?;
                Err(BackendError::Unavailable(format!(
                    "id {:?} collides with a stored id",
                    new.id.as_str()
                )))
            }
            Committed::Replaced(_) => Err(BackendError::Internal(
                "a create commit replaced a live record".into(),
            )),
        }
    }

    /// Take back an if_unique claim: the pending key (only if it still
    /// holds this write) and the entries it published.
    async fn withdraw(&self, doc: &Staged) -> Result<(), BackendError> {
        let key = self.keys.pending(doc.iid);
        let value = doc.value.clone();
        self.redis
            .trip(
                "withdrawing a claim",
                vec![move |mut c: Conn| async move {
                    UNCLAIM
                        .key(key)
                        .arg(value)
                        .invoke_async::<i64>(&mut c)
                        .await
                }],
            )
            .await?;
        self.remove_entries(&[(doc.iid, doc.value.clone())]).await
    }

    /// Every pair of live stored documents whose exact Jaccard is at least
    /// `threshold`, each once, without holding the collection in memory
    /// (ARCHITECTURE.md, "`/duplicates` without the corpus in one node").
    /// Band by band: the band's bucket hashes are read whole (one trip),
    /// fields with two or more members name candidate pairs, the records
    /// of those members are read (trips of `SCAN_READ`), members whose
    /// `gen` is not their record's are stale and skipped, and a pair is
    /// verified only in the lowest band where the two collide (recomputed
    /// from both signatures): each pair once, with nothing remembered
    /// between bands but the result. Writes during the scan may or may not
    /// be in it.
    pub async fn scan_pairs(
        &self,
        threshold: Threshold,
    ) -> Result<(Vec<ScanPair>, ScanStats), BackendError> {
        let bands = self.engine.bands().bands;
        let groups = 1u64 << self.keys.group_bits();
        let t = threshold.value();
        let now = self.engine.now_ms();
        let mut pairs = Vec::new();
        let mut candidates = 0usize;
        let mut live_documents = 0usize;
        for band in 0..bands {
            let commands: Vec<_> = (0..groups)
                .map(|g| {
                    let hash = self.keys.group_key(band, g);
                    move |mut c: Conn| async move {
                        let mut all = redis::cmd("HGETALL");
                        all.arg(hash);
                        all.query_async::<Vec<(Vec<u8>, Vec<u8>)>>(&mut c).await
                    }
                })
                .collect();
            let hashes = self
                .redis
                .trip("reading a band's buckets", commands)
                .await?;
            let mut all: Vec<Vec<(u64, u32)>> = hashes
                .into_iter()
                .flatten()
                .map(|(_, value)| members(&value).collect::<Vec<_>>())
                .collect();
            // Band 0 holds every document once: its records are all read,
            // to count the live ones (`documents`); in the other bands only
            // those sharing a bucket.
            let every = band == 0;
            let mut gens_of: HashMap<u64, Vec<u32>> = HashMap::new();
            if every {
                for &(i, g) in all.iter().flatten() {
                    gens_of.entry(i).or_default().push(g);
                }
            }
            let mut iids: Vec<u64> = all
                .iter()
                .filter(|m| every || m.len() >= 2)
                .flatten()
                .map(|&(i, _)| i)
                .collect();
            all.retain(|m| m.len() >= 2);
            let buckets = all;
            let mut paired: std::collections::HashSet<u64> = std::collections::HashSet::new();
            if every {
                paired.extend(buckets.iter().flatten().map(|&(i, _)| i));
            }
            iids.sort_unstable();
            iids.dedup();
            let mut current: HashMap<u64, Scanned> = HashMap::new();
            for chunk in iids.chunks(SCAN_READ) {
                let records = self.read_records(chunk).await?;
                for (&i, stored) in chunk.iter().zip(records) {
                    let Some(stored) = stored else { continue };
                    let gen = stored.gen;
                    let record = self.to_record(stored)?;
                    if !self.engine.is_live(&record, now) {
                        continue;
                    }
                    if every {
                        if gens_of.get(&i).is_some_and(|g| g.contains(&gen)) {
                            live_documents += 1;
                        }
                        if !paired.contains(&i) {
                            continue;
                        }
                    }
                    let band_keys = self.engine.band_keys(record.signature());
                    current.insert(
                        i,
                        Scanned {
                            record,
                            gen,
                            band_keys,
                        },
                    );
                }
            }
            for bucket in &buckets {
                let live: Vec<&Scanned> = bucket
                    .iter()
                    .filter_map(|(i, g)| current.get(i).filter(|s| s.gen == *g))
                    .collect();
                for (x, a) in live.iter().enumerate() {
                    for b in &live[x + 1..] {
                        if a.record.id() == b.record.id()
                            || (0..band).any(|lower| a.band_keys[lower] == b.band_keys[lower])
                        {
                            continue;
                        }
                        candidates += 1;
                        let (sa, sb) = (a.record.shingles(), b.record.shingles());
                        if let Some(jaccard) = crate::jaccard::at_least(sa, sb, t) {
                            let (a, b) = if a.record.id() < b.record.id() {
                                (a, b)
                            } else {
                                (b, a)
                            };
                            pairs.push(ScanPair {
                                a: Arc::clone(&a.record),
                                b: Arc::clone(&b.record),
                                jaccard,
                            });
                        }
                    }
                }
            }
        }
        let stats = ScanStats {
            documents: live_documents,
            candidates,
            pairs: pairs.len(),
            complete: true,
        };
        Ok((pairs, stats))
    }

    /// Delete the expired records, each only if it is still the version
    /// found expired (a replace since made it live again). A sweep reads
    /// the due index: only the buckets whose minute can hold an expired
    /// record, and the heads of their members' records; this node's first
    /// sweep, and then one a day, walks every record instead (see
    /// `WALK_EVERY`).
    pub async fn purge_expired(&self) -> Result<usize, BackendError> {
        if self.paused.load(Ordering::Relaxed) {
            return Ok(0);
        }
        let now = self.engine.now_ms();
        let walk = self
            .next_walk
            .lock()
            .expect("walk lock")
            .is_none_or(|at| Instant::now() >= at);
        let Sweep {
            expired,
            mut drop,
            read,
        } = if walk {
            let sweep = self.walk(now).await?;
            *self.next_walk.lock().expect("walk lock") = Some(Instant::now() + WALK_EVERY);
            sweep
        } else {
            self.due(now).await?
        };
        let mut purged = 0;
        for (head, bucket) in expired {
            let iid = iid(&head.id);
            if let Some(old) = self.delete_record(&head.id, Some(head.gen)).await? {
                let mut trip = self.removal_calls(&[(iid, old)])?;
                trip.push(self.counter_call(-1));
                trip.push(self.bump_call());
                self.redis.calls("removing bucket entries", trip).await?;
                purged += 1;
            }
            // Deleted here, by another node, or replaced since: its member
            // is stale either way.
            drop.entry(bucket).or_default().push(member(iid, head.gen));
        }
        let calls = self.due_drop_calls(drop, read);
        if !calls.is_empty() {
            self.redis
                .calls("dropping due-index members", calls)
                .await?;
        }
        Ok(purged)
    }

    /// What the due index says may have expired: the buckets of own
    /// expiries up to now and, under a retention, the buckets of creation
    /// up to now minus the retention; of their members, those whose record
    /// is that version and has expired. Stale members of buckets past
    /// [`STALE_GRACE_MINUTES`] are dropped; live ones stay.
    async fn due(&self, now: u64) -> Result<Sweep, BackendError> {
        let mut kinds = vec![(Due::Own, now)];
        let ttl = self.ttl_ms();
        if ttl != 0 {
            kinds.push((Due::Created, now.saturating_sub(ttl)));
        }
        let mut buckets = Vec::new();
        for (due, upto) in kinds {
            let mut range = redis::cmd("ZRANGEBYSCORE");
            range.arg(self.keys.due_set(due)).arg("-inf").arg(upto);
            buckets.extend(self.due_minutes(due, range).await?);
        }
        let contents = self.read_due_buckets(&buckets).await?;
        let mut iids: Vec<u64> = contents
            .iter()
            .flat_map(|bytes| members(bytes).map(|(i, _)| i))
            .collect();
        iids.sort_unstable();
        iids.dedup();
        let mut heads: HashMap<u64, RecordHead> = HashMap::with_capacity(iids.len());
        for chunk in iids.chunks(500) {
            let keys: Vec<String> = chunk.iter().map(|&i| self.keys.record(i)).collect();
            for (&i, head) in chunk.iter().zip(self.read_heads(&keys).await?) {
                if let Some(head) = head {
                    heads.insert(i, head);
                }
            }
        }
        let bucket_count = buckets.len();
        let mut sweep = Sweep::default();
        let mut seen = std::collections::HashSet::new();
        for (bucket, bytes) in buckets.into_iter().zip(contents) {
            for (i, gen) in members(&bytes) {
                if !seen.insert((i, gen)) {
                    continue;
                }
                // The member's own version, if its record still is it.
                match heads.get(&i).filter(|head| head.gen == gen) {
                    Some(head) if !self.head_is_live(head, now) => {
                        sweep.expired.push((head.clone(), bucket));
                    }
                    Some(_) => {} // live: it stays
                    None if past_grace(bucket.1, now) => {
                        sweep.drop.entry(bucket).or_default().push(member(i, gen));
                    }
                    None => {}
                }
            }
            sweep.read.insert(bucket, bytes);
        }
        tracing::debug!(
            keys = self.keys.base(),
            buckets = bucket_count,
            members = seen.len(),
            records = heads.len(),
            expired = sweep.expired.len(),
            "due index read"
        );
        Ok(sweep)
    }

    /// Every record's head (what the sweep read before the due index, and
    /// still reads at each node's first sweep and once a day): the expired
    /// ones, the members live records lack (added here, so records written
    /// by an older neardup are swept from now on) and the stale members of
    /// every bucket past [`STALE_GRACE_MINUTES`].
    async fn walk(&self, now: u64) -> Result<Sweep, BackendError> {
        let mut sweep = Sweep::default();
        // iid -> (gen, due bucket) of every record; the bucket only for live
        // ones (the expired go to `sweep.expired`).
        let mut current: HashMap<u64, (u32, Option<(Due, u64)>)> = HashMap::new();
        let keys = self.redis.scan_all(&self.keys.record_pattern()).await?;
        for chunk in keys.chunks(500) {
            for head in self.read_heads(chunk).await?.into_iter().flatten() {
                let bucket = due_of(head.created_ms, head.expires_ms);
                let live = self.head_is_live(&head, now);
                current.insert(iid(&head.id), (head.gen, live.then_some(bucket)));
                if !live {
                    sweep.expired.push((head, bucket));
                }
            }
        }
        let mut buckets = Vec::new();
        for due in [Due::Own, Due::Created] {
            let mut range = redis::cmd("ZRANGE");
            range.arg(self.keys.due_set(due)).arg(0).arg(-1);
            buckets.extend(self.due_minutes(due, range).await?);
        }
        let contents = self.read_due_buckets(&buckets).await?;
        let mut indexed = std::collections::HashSet::new();
        for (bucket, bytes) in buckets.into_iter().zip(contents) {
            for (i, gen) in members(&bytes) {
                indexed.insert(member(i, gen));
                let is_current = current.get(&i).is_some_and(|&(g, _)| g == gen);
                if !is_current && past_grace(bucket.1, now) {
                    sweep.drop.entry(bucket).or_default().push(member(i, gen));
                }
            }
            sweep.read.insert(bucket, bytes);
        }
        let missing: Vec<((Due, u64), [u8; MEMBER])> = current
            .iter()
            .filter_map(|(&i, &(gen, bucket))| Some((bucket?, member(i, gen))))
            .filter(|(_, m)| !indexed.contains(m))
            .collect();
        for part in missing.chunks(SCAN_READ) {
            self.redis
                .calls(
                    "indexing records by due time",
                    self.due_add_calls(part.iter().copied()),
                )
                .await?;
        }
        tracing::info!(
            keys = self.keys.base(),
            records = keys.len(),
            expired = sweep.expired.len(),
            indexed = missing.len(),
            stale = sweep.drop.values().map(Vec::len).sum::<usize>(),
            "walked every record: expired ones go, members missing from the due index were added"
        );
        Ok(sweep)
    }

    /// [`Engine::is_live_at`] of a record known by its head.
    fn head_is_live(&self, head: &RecordHead, now: u64) -> bool {
        self.engine
            .is_live_at(head.created_ms, own_expiry(head.expires_ms), now)
    }

    /// The due buckets a `ZRANGE`/`ZRANGEBYSCORE` of `due`'s set names.
    async fn due_minutes(
        &self,
        due: Due,
        range: redis::Cmd,
    ) -> Result<Vec<(Due, u64)>, BackendError> {
        let minutes: Vec<String> = self.redis.one("reading the due index", range).await?;
        minutes
            .into_iter()
            .map(|m| {
                m.parse::<u64>()
                    .map(|minute| (due, minute))
                    .map_err(|e| corrupt(&self.keys.due_set(due), e))
            })
            .collect()
    }

    /// Each of `buckets` as stored (its members, concatenated; empty for
    /// one gone meanwhile), read 500 buckets a trip.
    async fn read_due_buckets(&self, buckets: &[(Due, u64)]) -> Result<Vec<Vec<u8>>, BackendError> {
        let mut out = Vec::with_capacity(buckets.len());
        for chunk in buckets.chunks(500) {
            let commands: Vec<_> = chunk
                .iter()
                .map(|&(due, minute)| {
                    let key = self.keys.due_bucket(due, minute);
                    move |mut c: Conn| async move {
                        let mut get = redis::cmd("GET");
                        get.arg(key);
                        get.query_async::<Option<Vec<u8>>>(&mut c).await
                    }
                })
                .collect();
            for value in self.redis.trip("reading due buckets", commands).await? {
                out.push(value.unwrap_or_default());
            }
        }
        Ok(out)
    }

    /// The heads of the records at `keys` (one trip: `GETRANGE` of the
    /// header and the id, at most [`HEAD_AND_ID`] bytes, not the shingles);
    /// `None` for a record gone meanwhile.
    async fn read_heads(&self, keys: &[String]) -> Result<Vec<Option<RecordHead>>, BackendError> {
        let commands: Vec<_> = keys
            .iter()
            .map(|key| {
                let key = key.clone();
                move |mut c: Conn| async move {
                    let mut get = redis::cmd("GETRANGE");
                    get.arg(key).arg(0).arg(HEAD_AND_ID - 1);
                    get.query_async::<Vec<u8>>(&mut c).await
                }
            })
            .collect();
        let values = self.redis.trip("reading record heads", commands).await?;
        keys.iter()
            .zip(values)
            // A missing key reads as "".
            .map(|(key, bytes)| {
                (!bytes.is_empty())
                    .then(|| decode_head(&bytes).map_err(|e| corrupt(key, e)))
                    .transpose()
            })
            .collect()
    }
}

/// An export of a collection in Redis ([`RedisIndex::export`]).
pub struct Export<'a> {
    index: &'a RedisIndex,
    keys: Vec<String>,
    at: usize,
    step: usize,
}

impl Export<'_> {
    pub async fn next_records(
        &mut self,
    ) -> Result<Option<Vec<(Arc<Record>, Option<String>)>>, BackendError> {
        if self.at >= self.keys.len() {
            return Ok(None);
        }
        let to = (self.at + self.step).min(self.keys.len());
        let chunk = &self.keys[self.at..to];
        self.at = to;
        Ok(Some(self.index.read_with_texts(chunk).await?))
    }

    pub async fn next(
        &mut self,
        format: fn(&Record, Option<String>) -> Vec<u8>,
    ) -> Result<Option<Vec<u8>>, BackendError> {
        if self.at >= self.keys.len() {
            return Ok(None);
        }
        let to = (self.at + self.step).min(self.keys.len());
        let chunk = &self.keys[self.at..to];
        self.at = to;
        let mut out = Vec::new();
        for (record, text) in self.index.read_with_texts(chunk).await? {
            out.extend(format(&record, text));
        }
        Ok(Some(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineParams;
    use crate::testkit::redis_cluster::RedisCluster;

    async fn bucket(index: &RedisIndex, b: (Due, u64)) -> Option<Vec<u8>> {
        let mut get = redis::cmd("GET");
        get.arg(index.keys.due_bucket(b.0, b.1));
        index.redis.one("test", get).await.unwrap()
    }

    async fn minutes(index: &RedisIndex, due: Due) -> Vec<String> {
        let mut range = redis::cmd("ZRANGE");
        range.arg(index.keys.due_set(due)).arg(0).arg(-1);
        index.redis.one("test", range).await.unwrap()
    }

    async fn add(index: &RedisIndex, b: (Due, u64), ms: &[[u8; MEMBER]]) {
        let calls = index.due_add_calls(ms.iter().map(|m| (b, *m)));
        index.redis.calls("test", calls).await.unwrap();
    }

    async fn drop_members(
        index: &RedisIndex,
        b: (Due, u64),
        read: Option<Vec<u8>>,
        ms: &[[u8; MEMBER]],
    ) {
        let read: HashMap<(Due, u64), Vec<u8>> = read.map(|r| (b, r)).into_iter().collect();
        let calls = index.due_drop_calls(BTreeMap::from([(b, ms.to_vec())]), read);
        index.redis.calls("test", calls).await.unwrap();
    }

    /// The due-bucket scripts on a real Redis: a rewrite of what the sweep
    /// read keeps what was appended since; a bucket another sweep rewrote
    /// meanwhile is rebuilt member by member; every copy of a member goes;
    /// an emptied or missing bucket leaves its sorted set.
    #[tokio::test]
    async fn due_buckets_drop_exactly_the_members_they_are_told_to() {
        if !RedisCluster::available_or_skip("the tests that start a Redis") {
            return;
        }
        let server = RedisCluster::start_single().expect("redis starts");
        let settings = crate::config::RedisSettings {
            nodes: server.urls(),
            key_prefix: "unit".into(),
            ..Default::default()
        };
        let engine = Arc::new(Engine::new(EngineParams::default().validate().unwrap()));
        let index = RedisIndex::open(engine, Arc::new(Redis::new(settings)), "actualités")
            .await
            .unwrap();
        let [a, b, c, d] = [1u64, 2, 3, 4].map(|i| member(i << 40 | 0xabc, 7));
        let one = (Due::Own, 28_000_000);
        let other = (Due::Own, 28_000_001);
        add(&index, one, &[a, b, c]).await;
        add(&index, other, &[a]).await;
        assert_eq!(minutes(&index, Due::Own).await, ["28000000", "28000001"]);
        assert_eq!(bucket(&index, one).await, Some([a, b, c].concat()));

        // Read a b c; d appended since; a dropped: b c d.
        let read = bucket(&index, one).await;
        add(&index, one, &[d]).await;
        drop_members(&index, one, read, &[a]).await;
        assert_eq!(bucket(&index, one).await, Some([b, c, d].concat()));

        // Read b c d; another sweep drops b meanwhile; c dropped: d.
        let read = bucket(&index, one).await;
        drop_members(&index, one, None, &[b]).await;
        assert_eq!(bucket(&index, one).await, Some([c, d].concat()));
        drop_members(&index, one, read, &[c]).await;
        assert_eq!(bucket(&index, one).await, Some(d.to_vec()));

        // Every copy of a member goes (a write and a walk may both add it).
        add(&index, one, &[d, a, d]).await;
        let read = bucket(&index, one).await;
        drop_members(&index, one, read, &[d]).await;
        assert_eq!(bucket(&index, one).await, Some(a.to_vec()));

        // Emptied: the bucket and its minute go, the other minute stays.
        let read = bucket(&index, one).await;
        drop_members(&index, one, read, &[a]).await;
        assert_eq!(bucket(&index, one).await, None);
        assert_eq!(minutes(&index, Due::Own).await, ["28000001"]);

        // Missing (deleted meanwhile): its minute goes all the same.
        let mut del = redis::cmd("DEL");
        del.arg(index.keys.due_bucket(other.0, other.1));
        let _: i64 = index.redis.one("test", del).await.unwrap();
        drop_members(&index, other, None, &[a]).await;
        assert!(minutes(&index, Due::Own).await.is_empty());
    }
}
