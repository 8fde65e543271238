//! Document frequency on the redis backend (issue 44): a log in Redis,
//! counts on every node. Layout, ordering and costs: docs/redis-layout.md,
//! "Document frequency and templates".
//!
//! **Why a log.** Counts kept in Redis cost one command's work per distinct
//! shingle of every write (~290 a document, against ~51 index members): 3–4
//! times the ingest time of a collection without them, whatever the command
//! (`scripts/bench/redis_count_commands.py`). A log entry per committed
//! batch costs ~0.1 µs of Redis CPU a shingle. So each node keeps the counts
//! in its own memory (the memory engine's [`Frequencies`]) and follows the
//! log.
//!
//! **The log.** `{P:c}:dfl`, a stream: one entry per committed batch of
//! writes, deletes or expiries, `s` = its number in the log's sequence
//! (`{P:c}:dfs`, moved by the same script), `d` = per document version
//! (iid, gen) whether it was stored (+) or removed (−) and its shingles.
//! Appended in the trip after the commit (a write counts once its commit
//! said what happened), trimmed by time to [`log_window`].
//!
//! **Applied exactly once per version.** A node keeps the versions it
//! counted, and every − for [`log_window`]. A + counts its version unless
//! it is counted already (a recount saw it) or removed already (a − that
//! overtook it: another node deleted it before the writer's entry landed);
//! a − uncounts a counted version. A version has at most one + (its
//! commit) and one − (the delete that took it), so the counts are exact
//! whatever order two nodes' entries land in, and an entry read twice
//! counts once.
//!
//! **Start, switch, fall behind.** A node notes where the log ends, counts
//! every stored record (as versions), then applies the log after that
//! point: writes the walk saw and the log holds count once. A node finds
//! the sequence broken (entries trimmed before it read them, the log
//! stopped and started again by a switch off and on, or an entry that will
//! not decode) and counts again.

use super::codec::decode_record;
use super::passages::iid_of_key;
use super::{corrupt, script_call, BackendError, Call, RedisIndex, Script, SCAN_READ};
use crate::engine::Frequencies;
use redis::Value;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

static DF_LOG: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/df_log.lua")));
static DF_HEAD: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/df_head.lua")));
static DF_READ: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/df_read.lua")));
static DF_STOP: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/df_stop.lua")));

/// Log entries read per `XRANGE` (an entry is a batch of up to 250
/// documents, ~1.2 KB each).
const LOG_READ: usize = 32;

/// The format byte of an entry's batch.
const FORMAT: u8 = 1;

/// How long the log keeps an entry: a node that has not read it by then
/// counts every record again. 60 s, or 20 watch intervals and a command
/// timeout if that is longer (every node reads the log at each watch).
pub(super) fn log_window(settings: &crate::config::RedisSettings) -> Duration {
    Duration::from_millis(
        (20 * settings.watch_interval_ms + settings.command_timeout_ms).max(60_000),
    )
}

/// The changes of some committed writes, deletes or expiries, as one log
/// entry's batch: per document version, stored (+) or removed (−), and its
/// shingles (sorted, distinct).
#[derive(Default, Debug)]
pub(super) struct DfDelta {
    bytes: Vec<u8>,
}

impl DfDelta {
    /// Version (`iid`, `gen`) with `shingles` was stored (`stored`) or
    /// removed.
    pub(super) fn add(&mut self, iid: u64, gen: u32, shingles: &[u32], stored: bool) {
        if self.bytes.is_empty() {
            self.bytes.push(FORMAT);
        }
        self.bytes.push(u8::from(stored));
        self.bytes.extend_from_slice(&iid.to_le_bytes());
        self.bytes.extend_from_slice(&gen.to_le_bytes());
        self.bytes
            .extend_from_slice(&(shingles.len() as u32).to_le_bytes());
        for x in shingles {
            self.bytes.extend_from_slice(&x.to_le_bytes());
        }
    }

    /// The removal of the stored record `bytes` of `iid` (as a commit or
    /// delete script returned it).
    pub(super) fn removed(
        &mut self,
        iid: u64,
        key: &str,
        bytes: &[u8],
    ) -> Result<(), BackendError> {
        let stored = decode_record(bytes).map_err(|e| corrupt(key, e))?;
        self.add(iid, stored.gen, &stored.shingles, false);
        Ok(())
    }

    pub(super) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// One document version's change, read back from an entry.
struct Change {
    stored: bool,
    version: (u64, u32),
    shingles: Vec<u32>,
}

/// The changes of an entry's batch.
fn parse_batch(bytes: &[u8]) -> Result<Vec<Change>, String> {
    let Some((&format, mut rest)) = bytes.split_first() else {
        return Err("an empty batch".into());
    };
    if format != FORMAT {
        return Err(format!("batch format {format}, not {FORMAT}"));
    }
    let mut out = Vec::new();
    let take = |rest: &mut &[u8], n: usize| -> Result<Vec<u8>, String> {
        if rest.len() < n {
            return Err("a truncated batch".into());
        }
        let (head, tail) = rest.split_at(n);
        *rest = tail;
        Ok(head.to_vec())
    };
    while !rest.is_empty() {
        let head = take(&mut rest, 17)?;
        let stored = match head[0] {
            0 => false,
            1 => true,
            other => return Err(format!("a change marked {other}")),
        };
        let iid = u64::from_le_bytes(head[1..9].try_into().expect("8 bytes"));
        let gen = u32::from_le_bytes(head[9..13].try_into().expect("4 bytes"));
        let n = u32::from_le_bytes(head[13..17].try_into().expect("4 bytes")) as usize;
        let body = take(&mut rest, n.checked_mul(4).ok_or("a batch too long")?)?;
        let shingles: Vec<u32> = body
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        if !shingles.is_sorted_by(|a, b| a < b) {
            return Err("shingles out of order".into());
        }
        out.push(Change {
            stored,
            version: (iid, gen),
            shingles,
        });
    }
    Ok(out)
}

/// The ms part of a stream entry id (`ms-seq`).
fn id_ms(id: &str) -> u64 {
    id.split('-')
        .next()
        .and_then(|ms| ms.parse().ok())
        .unwrap_or(0)
}

/// A node's counts and where in the log they are.
struct Counted {
    table: Arc<Frequencies>,
    /// The last entry applied (`0-0`: none) and its sequence number.
    last_id: String,
    seq: u64,
    /// The versions counted.
    versions: HashSet<(u64, u32)>,
    /// Versions removed before their + was read, with the ms of the entry
    /// that removed them (kept for the log's window).
    removed: HashMap<(u64, u32), u64>,
}

impl Counted {
    fn new(last_id: String, seq: u64) -> Self {
        Self {
            table: Arc::new(Frequencies::new(true)),
            last_id,
            seq,
            versions: HashSet::new(),
            removed: HashMap::new(),
        }
    }

    /// An entry's changes (its ms `ms`): the shingle sets to count and to
    /// uncount. Each version counts once whatever the order its + and −
    /// arrive in, and however often: a + counts a version neither counted
    /// nor removed, a − uncounts a counted one, and every − is remembered
    /// for the log's window (a + that arrives after it counts nothing).
    /// Counts are applied adds first: a − uncounts a version counted by
    /// an earlier read or by a + of this one.
    fn take(
        &mut self,
        changes: Vec<Change>,
        ms: u64,
        adds: &mut Vec<Vec<u32>>,
        subs: &mut Vec<Vec<u32>>,
    ) {
        for c in changes {
            if c.stored {
                if !self.removed.contains_key(&c.version) && self.versions.insert(c.version) {
                    adds.push(c.shingles);
                }
            } else {
                if self.versions.remove(&c.version) {
                    subs.push(c.shingles);
                }
                self.removed.insert(c.version, ms);
            }
        }
    }

    /// Forget the removals older than `window` before `now` (ms).
    fn forget_removed(&mut self, now: u64, window: u64) {
        self.removed
            .retain(|_, at| at.saturating_add(window) >= now);
    }

    /// Memory of the counts and the version sets (heap, estimated as
    /// hashbrown lays them out: entry and control byte a bucket).
    fn bytes(&self) -> usize {
        self.table.heap_bytes()
            + self.versions.capacity() * (16 + 1)
            + self.removed.capacity() * (24 + 1)
    }
}

/// An entry as `XRANGE` answers it: id, then field, value, ….
type RawEntry = (String, Vec<Vec<u8>>);

/// Entries read from the log: (id, sequence number, batch).
type Entries = Vec<(String, u64, Vec<u8>)>;

/// What applying a read of the log came to.
enum Applied {
    /// Every entry up to the sequence read with them is applied.
    Through,
    /// The read was full: more may follow.
    More,
    /// An entry is missing (trimmed before this node read it, or a stop's
    /// number), or will not decode: count again.
    Gap,
}

/// A read of the log: the sequence at that instant and the entries after
/// a point (at most [`LOG_READ`]).
type LogAnswer = (u64, Entries);

/// This node's copy of a collection's document frequencies (shared by the
/// handles on one collection).
#[derive(Default)]
pub(super) struct DfTail {
    /// The counts and the log position, locked while entries are applied
    /// (and while a missing copy is built).
    state: tokio::sync::Mutex<Option<Counted>>,
    /// The counts readers look up: the state's table, published.
    table: std::sync::RwLock<Option<Arc<Frequencies>>>,
    /// The last entry applied, for reads that put their `XRANGE` in a trip
    /// of their own.
    last_id: std::sync::Mutex<String>,
    /// Memory of the copy as last built or applied (bytes).
    bytes: std::sync::atomic::AtomicUsize,
    /// Versions counted (a gauge for `/stats`).
    versions: std::sync::atomic::AtomicUsize,
    /// When this node counts every record again: a switch it learnt while
    /// running (other nodes' writes before they learnt it were not logged).
    again_at: std::sync::Mutex<Option<Instant>>,
    /// A recount runs on this node.
    pub(super) recounting: std::sync::atomic::AtomicBool,
    /// The watch started a build or a repeat that has not ended.
    building: std::sync::atomic::AtomicBool,
}

impl DfTail {
    fn publish(&self, state: &Counted) {
        *self.table.write().expect("df table") = Some(Arc::clone(&state.table));
        *self.last_id.lock().expect("df last id") = state.last_id.clone();
        self.bytes.store(state.bytes(), Ordering::Relaxed);
        self.versions.store(state.versions.len(), Ordering::Relaxed);
    }

    fn unpublish(&self) {
        *self.table.write().expect("df table") = None;
        *self.last_id.lock().expect("df last id") = "0-0".into();
        self.bytes.store(0, Ordering::Relaxed);
        self.versions.store(0, Ordering::Relaxed);
    }

    /// The counts as published (none until built).
    pub(super) fn table(&self) -> Option<Arc<Frequencies>> {
        self.table.read().expect("df table").clone()
    }

    pub(super) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    pub(super) fn versions(&self) -> usize {
        self.versions.load(Ordering::Relaxed)
    }
}

impl RedisIndex {
    /// The log call for `delta` (an entry), if the collection counts on
    /// this node; none otherwise.
    pub(super) fn df_calls(&self, delta: &DfDelta) -> Vec<Call> {
        if !self.engine.boilerplate_on() || delta.is_empty() {
            return Vec::new();
        }
        self.redis
            .counters
            .df_updates
            .fetch_add(1, Ordering::Relaxed);
        let window = log_window(&self.redis.settings).as_millis() as u64;
        vec![script_call(
            &DF_LOG,
            vec![self.keys.df_log(), self.keys.df_seq()],
            vec![window.to_string().into_bytes(), delta.bytes.clone()],
        )]
    }

    /// The read of the log's entries after the last this node applied, to
    /// put in a trip; [`Self::df_follow_answer`] reads its answer.
    pub(super) fn df_follow_call(&self) -> Call {
        let last = self.df_tail.last_id.lock().expect("df last id").clone();
        self.xrange_call(&last)
    }

    /// `df_read.lua` from after `after` (an entry id; none read yet: from
    /// the start).
    fn xrange_call(&self, after: &str) -> Call {
        let after = if after.is_empty() { "0-0" } else { after };
        script_call(
            &DF_READ,
            vec![self.keys.df_log(), self.keys.df_seq()],
            vec![
                format!("({after}").into_bytes(),
                LOG_READ.to_string().into_bytes(),
            ],
        )
    }

    /// The sequence and the entries of a `df_read.lua` answer.
    fn entries(&self, value: Value) -> Result<(u64, Entries), BackendError> {
        let key = self.keys.df_log();
        let (seq, raw): (u64, Vec<RawEntry>) =
            redis::from_redis_value(value).map_err(|e| corrupt(&key, e))?;
        let entries = raw
            .into_iter()
            .map(|(id, fields)| {
                let (mut seq, mut batch) = (None, None);
                for pair in fields.chunks_exact(2) {
                    match pair[0].as_slice() {
                        b"s" => {
                            seq = std::str::from_utf8(&pair[1])
                                .ok()
                                .and_then(|s| s.parse::<u64>().ok())
                        }
                        b"d" => batch = Some(pair[1].clone()),
                        _ => {}
                    }
                }
                match (seq, batch) {
                    (Some(seq), Some(batch)) => Ok((id, seq, batch)),
                    _ => Err(corrupt(&key, format!("entry {id} lacks its fields"))),
                }
            })
            .collect::<Result<_, _>>()?;
        Ok((seq, entries))
    }

    /// Apply what a [`Self::df_follow_call`] read, then the rest of the log
    /// (and count every record first if this node has no counts yet, or
    /// the log is broken): the counts are then current to this instant.
    pub(super) async fn df_follow_answer(
        &self,
        value: Value,
    ) -> Result<Arc<Frequencies>, BackendError> {
        let read = self.entries(value)?;
        let mut state = self.df_tail.state.lock().await;
        let table = self.follow_locked(&mut state, Some(read)).await?;
        self.redis.counters.df_reads.fetch_add(1, Ordering::Relaxed);
        Ok(table)
    }

    /// Bring this node's counts up to the end of the log (a trip, more when
    /// it holds more than [`LOG_READ`] new entries), building them if there
    /// are none: what every read of counts starts with.
    pub(super) async fn df_follow(&self) -> Result<Arc<Frequencies>, BackendError> {
        let mut state = self.df_tail.state.lock().await;
        let table = self.follow_locked(&mut state, None).await?;
        self.redis.counters.df_reads.fetch_add(1, Ordering::Relaxed);
        Ok(table)
    }

    /// Under the state lock: apply `first` (entries already read), then
    /// read and apply the rest; build the counts when there are none, or
    /// when the log is broken.
    async fn follow_locked(
        &self,
        state: &mut Option<Counted>,
        mut first: Option<LogAnswer>,
    ) -> Result<Arc<Frequencies>, BackendError> {
        if !self.engine.boilerplate_on() {
            return Err(crate::engine::EngineError::BoilerplateOff.into());
        }
        // No counts yet: the switch is new to this node (counted again once
        // every node has learnt it), unless a gap dropped them below.
        let mut learnt = state.is_none();
        loop {
            let Some(counted) = state.as_mut() else {
                let built = self.build().await?;
                *state = Some(built);
                if std::mem::take(&mut learnt) {
                    *self.df_tail.again_at.lock().expect("df again") =
                        Some(Instant::now() + super::passages::settle_delay(&self.redis.settings));
                }
                first = None;
                continue;
            };
            let outcome = match first.take() {
                Some(read) => match self.apply(counted, read).await? {
                    Applied::More => self.read_rest(counted).await?,
                    done => done,
                },
                None => self.read_rest(counted).await?,
            };
            match outcome {
                Applied::Through | Applied::More => {
                    self.df_tail.publish(counted);
                    return Ok(Arc::clone(&counted.table));
                }
                Applied::Gap => {
                    tracing::warn!(
                        keys = self.keys.base(),
                        applied = counted.seq,
                        "document frequency: the log lacks entries this node has not read (trimmed, or the counts were switched off and on); counting every record again"
                    );
                    self.redis
                        .counters
                        .df_log_rebuilds
                        .fetch_add(1, Ordering::Relaxed);
                    *state = None;
                    learnt = false;
                }
            }
        }
    }

    /// Read and apply every entry after `counted`'s last.
    async fn read_rest(&self, counted: &mut Counted) -> Result<Applied, BackendError> {
        loop {
            let mut values = self
                .redis
                .calls(
                    "reading the document-frequency log",
                    vec![self.xrange_call(&counted.last_id)],
                )
                .await?;
            let read = self.entries(values.pop().unwrap_or(Value::Nil))?;
            match self.apply(counted, read).await? {
                Applied::More => continue,
                done => return Ok(done),
            }
        }
    }

    /// Apply a read's entries (in log order) to `counted`: those it has
    /// applied are skipped; a number missing before the next, or after the
    /// last when the read was not full, is a gap.
    async fn apply(
        &self,
        counted: &mut Counted,
        (seq_then, entries): LogAnswer,
    ) -> Result<Applied, BackendError> {
        let full = entries.len() >= LOG_READ;
        let window = log_window(&self.redis.settings).as_millis() as u64;
        let mut adds: Vec<Vec<u32>> = Vec::new();
        let mut subs: Vec<Vec<u32>> = Vec::new();
        let mut outcome = Applied::Through;
        let (mut applied, mut newest) = (0u64, 0u64);
        for (id, seq, batch) in entries {
            if seq <= counted.seq {
                continue;
            }
            if seq != counted.seq + 1 {
                outcome = Applied::Gap;
                break;
            }
            let ms = id_ms(&id);
            let changes = match parse_batch(&batch) {
                Ok(changes) => changes,
                Err(e) => {
                    // Reported, and counted past: the records are what
                    // counts (every read would fail on it otherwise).
                    tracing::error!(key = %self.keys.df_log(), entry = %id, error = %e, "a document-frequency log entry that will not decode; counting every record again");
                    outcome = Applied::Gap;
                    break;
                }
            };
            counted.take(changes, ms, &mut adds, &mut subs);
            counted.seq = seq;
            counted.last_id = id;
            applied += 1;
            newest = ms;
        }
        if !counted.removed.is_empty() {
            counted.forget_removed(newest, window);
        }
        if !adds.is_empty() || !subs.is_empty() {
            // Adds first (see `Counted::take`).
            let table = Arc::clone(&counted.table);
            tokio::task::spawn_blocking(move || {
                let sets: Vec<&[u32]> = adds.iter().map(Vec::as_slice).collect();
                table.count_documents(&sets);
                for s in &subs {
                    table.uncount_document(s);
                }
            })
            .await
            .map_err(|e| BackendError::Internal(format!("applying the log: {e}")))?;
        }
        self.redis
            .counters
            .df_log_applied
            .fetch_add(applied, Ordering::Relaxed);
        Ok(match outcome {
            Applied::Through if full => Applied::More,
            Applied::Through if seq_then > counted.seq => Applied::Gap,
            other => other,
        })
    }

    /// Counts of every stored record, as of a point of the log: where the
    /// log ends is read first, so the entries after it (applied next)
    /// include every write the walk can have missed. Memory while it runs:
    /// the counts (~12 bytes a distinct shingle) and one trip's records.
    async fn build(&self) -> Result<Counted, BackendError> {
        self.df_tail.recounting.store(true, Ordering::Relaxed);
        let mut out = Err(BackendError::Unavailable(
            "document frequency: the log moved faster than this node could count".into(),
        ));
        for _ in 0..3 {
            match self.build_inner().await {
                Ok(Some(counted)) => {
                    out = Ok(counted);
                    break;
                }
                Ok(None) => continue,
                Err(e) => {
                    out = Err(e);
                    break;
                }
            }
        }
        self.df_tail.recounting.store(false, Ordering::Relaxed);
        out
    }

    /// One try of [`Self::build`]: none if the log lost entries before the
    /// walk read them (it reads the log after each trip of records, so
    /// only a trip longer than the log's window does that).
    async fn build_inner(&self) -> Result<Option<Counted>, BackendError> {
        let head = script_call(
            &DF_HEAD,
            vec![self.keys.df_log(), self.keys.df_seq()],
            Vec::new(),
        );
        let mut values = self
            .redis
            .calls("reading where the document-frequency log ends", vec![head])
            .await?;
        let (last_id, seq): (String, u64) =
            redis::from_redis_value(values.pop().unwrap_or(Value::Nil))
                .map_err(|e| corrupt(&self.keys.df_log(), e))?;
        let mut counted = Counted::new(last_id, seq);
        let keys = self.redis.scan_all(&self.keys.record_pattern()).await?;
        let mut records = 0u64;
        for chunk in keys.chunks(SCAN_READ) {
            let iids: Vec<u64> = chunk.iter().filter_map(|k| iid_of_key(k)).collect();
            let mut sets = Vec::with_capacity(iids.len());
            for (&iid, stored) in iids.iter().zip(self.read_records(&iids).await?) {
                let Some(stored) = stored else { continue };
                let version = (iid, stored.gen);
                if !counted.removed.contains_key(&version) && counted.versions.insert(version) {
                    sets.push(stored.shingles);
                }
            }
            records += sets.len() as u64;
            let table = Arc::clone(&counted.table);
            tokio::task::spawn_blocking(move || {
                let sets: Vec<&[u32]> = sets.iter().map(Vec::as_slice).collect();
                table.count_documents(&sets);
            })
            .await
            .map_err(|e| BackendError::Internal(format!("counting records: {e}")))?;
            // The log as the walk goes (a version the walk and the log both
            // hold counts once, in either order), so a long walk does not
            // outlast the log's window.
            if let Applied::Gap = self.read_rest(&mut counted).await? {
                return Ok(None);
            }
        }
        self.redis
            .counters
            .df_recounted
            .fetch_add(records, Ordering::Relaxed);
        tracing::info!(
            keys = self.keys.base(),
            records,
            from_seq = seq,
            "document frequency: every stored record counted on this node"
        );
        Ok(Some(counted))
    }

    /// Count every record again and replace this node's counts with that
    /// once it has caught up with the log (reads go on with the old counts
    /// meanwhile).
    pub(super) async fn df_rebuild(&self) -> Result<(), BackendError> {
        let mut fresh = Some(self.build().await?);
        let mut state = self.df_tail.state.lock().await;
        if !self.engine.boilerplate_on() {
            return Ok(());
        }
        self.follow_locked(&mut fresh, None).await?;
        *state = fresh;
        Ok(())
    }

    /// Drop this node's counts (switched off).
    pub(super) async fn df_forget(&self) {
        let mut state = self.df_tail.state.lock().await;
        *state = None;
        self.df_tail.unpublish();
        *self.df_tail.again_at.lock().expect("df again") = None;
    }

    /// Stop the log (switched off): deleted, its sequence moved past it.
    pub(super) async fn df_stop_log(&self) -> Result<(), BackendError> {
        let call = script_call(
            &DF_STOP,
            vec![self.keys.df_log(), self.keys.df_seq()],
            Vec::new(),
        );
        self.redis
            .calls("stopping the document-frequency log", vec![call])
            .await
            .map(drop)
    }

    /// For the watch: follow the log while the collection counts (building
    /// the counts when the switch is new to this node, counting again once
    /// the switch has settled), drop the counts when it does not.
    pub async fn follow_counts(&self) -> Result<(), BackendError> {
        if !self.engine.boilerplate_on() {
            if self.df_tail.table().is_some() {
                self.df_forget().await;
            }
            return Ok(());
        }
        let due = self
            .df_tail
            .again_at
            .lock()
            .expect("df again")
            .is_some_and(|at| Instant::now() >= at);
        if !due && self.df_tail.table().is_some() {
            return self.df_follow().await.map(drop);
        }
        // A count of every record: in a task of its own, so the watch goes
        // on meanwhile (reads wait for a first build, not for a repeat).
        if self.df_tail.building.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if due {
            *self.df_tail.again_at.lock().expect("df again") = None;
        }
        let this = self.shadow();
        tokio::spawn(async move {
            let done = if due {
                this.df_rebuild().await
            } else {
                this.df_follow().await.map(drop)
            };
            this.df_tail.building.store(false, Ordering::Release);
            if let Err(e) = done {
                tracing::warn!(keys = this.keys.base(), error = %e, "counting document frequency on this node failed; the watch tries again");
            }
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_reads_back_as_written() {
        let mut d = DfDelta::default();
        d.add(7, 9, &[1, 5, 9], true);
        d.add(u64::MAX, 3, &[], false);
        d.add(2, u32::MAX, &[u32::MAX], false);
        let back = parse_batch(&d.bytes).unwrap();
        let got: Vec<(bool, (u64, u32), Vec<u32>)> = back
            .into_iter()
            .map(|c| (c.stored, c.version, c.shingles))
            .collect();
        assert_eq!(
            got,
            vec![
                (true, (7, 9), vec![1, 5, 9]),
                (false, (u64::MAX, 3), vec![]),
                (false, (2, u32::MAX), vec![u32::MAX]),
            ]
        );
    }

    #[test]
    fn a_damaged_batch_is_an_error_not_a_panic() {
        let mut d = DfDelta::default();
        d.add(7, 9, &[1, 5, 9], true);
        for cut in 0..d.bytes.len() {
            if cut == 1 {
                // The format byte alone: no changes.
                assert!(parse_batch(&d.bytes[..cut]).unwrap().is_empty());
                continue;
            }
            assert!(parse_batch(&d.bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut wrong = d.bytes.clone();
        wrong[0] = 2;
        assert!(parse_batch(&wrong).is_err());
        let mut unsorted = DfDelta::default();
        unsorted.add(1, 1, &[5, 1], true);
        assert!(parse_batch(&unsorted.bytes).is_err());
    }

    /// Every version's + and − (each maybe sent twice), in any order, as
    /// two nodes' entries can land: the counts are exactly those of the
    /// versions with no −.
    #[test]
    fn each_version_counts_once_whatever_order_its_changes_land_in() {
        use proptest::prelude::*;
        let versions = proptest::collection::vec(
            (
                proptest::collection::btree_set(0u32..64, 1..8),
                any::<bool>(),
                any::<bool>(),
                any::<bool>(),
            ),
            1..12,
        );
        proptest!(|(versions in versions, seed in any::<u64>())| {
            // (version index, stored?) events, twice when asked.
            let mut events = Vec::new();
            for (i, (_, removed, twice_add, twice_remove)) in versions.iter().enumerate() {
                events.push((i, true));
                if *twice_add {
                    events.push((i, true));
                }
                if *removed {
                    events.push((i, false));
                    if *twice_remove {
                        events.push((i, false));
                    }
                }
            }
            // A seeded shuffle.
            let mut state = seed | 1;
            for k in (1..events.len()).rev() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                events.swap(k, (state % (k as u64 + 1)) as usize);
            }
            let mut counted = Counted::new("0-0".into(), 0);
            // Entries of one to three events each.
            for (n, entry) in events.chunks(1 + (seed % 3) as usize).enumerate() {
                let changes = entry
                    .iter()
                    .map(|&(i, stored)| Change {
                        stored,
                        version: (i as u64, 7),
                        shingles: versions[i].0.iter().copied().collect(),
                    })
                    .collect();
                let (mut adds, mut subs) = (Vec::new(), Vec::new());
                counted.take(changes, n as u64, &mut adds, &mut subs);
                let sets: Vec<&[u32]> = adds.iter().map(Vec::as_slice).collect();
                counted.table.count_documents(&sets);
                for s in &subs {
                    counted.table.uncount_document(s);
                }
            }
            let mut want = [0u32; 64];
            let mut live = 0;
            for (set, removed, _, _) in &versions {
                if !removed {
                    live += 1;
                    for &x in set {
                        want[x as usize] += 1;
                    }
                }
            }
            let all: Vec<u32> = (0..64).collect();
            let mut got = Vec::new();
            counted.table.lookup_sorted(&all, &mut got);
            prop_assert_eq!(got, want.to_vec());
            prop_assert_eq!(counted.table.docs(), live);
            prop_assert_eq!(counted.versions.len(), live);
        });
    }

    #[test]
    fn removals_are_forgotten_after_the_window() {
        let mut counted = Counted::new("0-0".into(), 0);
        let gone = |i| Change {
            stored: false,
            version: (i, 1),
            shingles: vec![1],
        };
        let (mut adds, mut subs) = (Vec::new(), Vec::new());
        counted.take(vec![gone(1)], 1_000, &mut adds, &mut subs);
        counted.take(vec![gone(2)], 50_000, &mut adds, &mut subs);
        assert!(adds.is_empty() && subs.is_empty(), "nothing was counted");
        counted.forget_removed(61_001, 60_000);
        assert_eq!(counted.removed.len(), 1, "the older one is forgotten");
        assert!(counted.removed.contains_key(&(2, 1)));
    }

    #[test]
    fn entry_ids_give_their_ms() {
        assert_eq!(id_ms("1700000000123-4"), 1_700_000_000_123);
        assert_eq!(id_ms("0-0"), 0);
    }
}
