//! Durability: a write-ahead log plus periodic snapshots in `storage.data_dir`.
//!
//! ```text
//!   write ─▶ engine (under the id's lock: append to log buffer, apply) ─▶ log commit (write + fsync) ─▶ 2xx
//!   snapshot: rotate log at LSN L ─▶ copy records ─▶ tmp file ─▶ fsync ─▶ rename ─▶ fsync dir ─▶ prune
//!   start: newest valid snapshot ─▶ replay log from its L ─▶ ready
//! ```
//!
//! Invariants:
//! - a write is acknowledged only after its log record is written (and, in
//!   `always` mode, fsynced), so an acknowledged write survives kill -9;
//! - log order equals apply order for every id (appends happen under the
//!   engine's entry lock), and replaying an upsert or delete twice is
//!   harmless, so a snapshot plus the log from its L is exactly the state;
//! - an incomplete final log record is a torn write and is dropped with a
//!   warning; any other damage refuses the start with the file and offset,
//!   unless an older snapshot *and* an unbroken log since it can stand in;
//! - data written under different signature parameters is refused;
//! - a stored text (`store_text`) travels in its write's log record, so it
//!   is acknowledged only once the log holds it; the text segments are
//!   written from the log as it goes (a cache, rebuilt at start) and
//!   compacted into one fsynced segment per snapshot (see [`texts`]).

pub mod catalog;
pub mod decisions;
pub mod events;
pub mod format;
pub mod fsops;
mod recovery;
pub mod snapshot;
pub mod texts;
pub mod wal;

use crate::config::StorageSettings;
use crate::engine::{
    BatchWrite, DocId, Engine, EngineError, Journal, JournalEntry, JournalError, NewDoc, Query,
    Record, Stamp, UniqueOutcome, WriteMode, WriteOutcome,
};
use format::Fingerprint;
use serde::Serialize;
use snapshot::SnapshotHeader;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use texts::Texts;
use wal::Wal;

/// Errors of the durability layer; every one names the file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is corrupt at byte offset {offset}: {reason}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    #[error(
        "{path} was written with different index parameters ({details}); \
         start with the parameters it was written with, or point storage.data_dir at an empty directory"
    )]
    ParameterMismatch { path: PathBuf, details: String },
    /// The file ends inside its own header: a crash while creating it.
    #[error("{path} ends inside its header")]
    IncompleteHeader { path: PathBuf },
    #[error("{0}")]
    Unrecoverable(String),
    #[error("the write-ahead log failed earlier; writes are refused until a restart")]
    Poisoned,
    /// The log ran out of space and another writer is retrying right now.
    #[error("the write-ahead log is out of space; writes are refused until there is room")]
    Stalled,
    /// The store's collection was deleted: no more snapshots.
    #[error("the collection was deleted")]
    Retired,
}

impl PersistError {
    /// An I/O error for lack of disk space or quota: a retry may succeed
    /// once there is room.
    pub fn is_out_of_space(&self) -> bool {
        matches!(self, PersistError::Io { source, .. } if wal::is_out_of_space(source))
    }
}

/// A write's journal payload: [`TEXT_AT`] and the locator where the text
/// already is, or [`TEXT_PENDING`]; then the compressed text.
fn text_payload(loc: Option<u64>, compressed: &[u8]) -> Box<[u8]> {
    let mut payload = Vec::with_capacity(9 + compressed.len());
    match loc {
        Some(loc) => {
            payload.push(TEXT_AT);
            payload.extend_from_slice(&loc.to_le_bytes());
        }
        None => payload.push(TEXT_PENDING),
    }
    payload.extend_from_slice(compressed);
    payload.into_boxed_slice()
}

/// A document's shingle set, signature and fingerprint bitmap, as a tap keeps them.
pub type Signed = (Box<[u32]>, Box<[u32]>, Box<[u32]>);

/// A write as a reindex replays it on the new index (see `Store::tap`).
#[derive(Debug, Clone)]
pub enum TapOp {
    Upsert {
        id: DocId,
        metadata: Option<Box<str>>,
        stamp: Stamp,
        /// The compressed text (a reindex needs every document's).
        text: Option<Box<[u8]>>,
        /// Its shingle set and signature, when the tap keeps them (a
        /// reindex whose new recipe signs as the old one: not signed again).
        signed: Option<Signed>,
    },
    Delete(String),
}

/// What a finished snapshot looks like, for `/stats` and `POST /admin/snapshot`.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotInfo {
    pub path: PathBuf,
    pub seq: u64,
    pub documents: u64,
    pub bytes: u64,
    /// Bytes of the snapshot's text segment (0: none).
    pub text_bytes: u64,
    pub milliseconds: f64,
    /// Phases: closing the log segment, copying record handles, writing the file.
    pub rotate_ms: f64,
    pub collect_ms: f64,
    pub write_ms: f64,
    pub created_unix_ms: u64,
    pub wal_lsn: u64,
}

/// What startup found and did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RecoveryReport {
    pub snapshot: Option<PathBuf>,
    pub snapshot_documents: u64,
    pub replayed_records: u64,
    pub torn_bytes_dropped: u64,
    /// Damaged snapshots skipped in favour of an older one plus the log.
    pub fallbacks: Vec<String>,
    pub documents: usize,
    pub seconds: f64,
}

/// The durable front of the engine: every write goes through here. In
/// `interval` mode its owner calls `wal().sync_now()` on the interval
/// (the server runs one timer for every collection's log).
pub struct Store {
    engine: Arc<Engine>,
    dir: PathBuf,
    settings: StorageSettings,
    wal: Arc<Wal>,
    fingerprint: Fingerprint,
    /// One snapshot at a time.
    snapshot_lock: Mutex<()>,
    /// Set once its collection is deleted (under `snapshot_lock`).
    retired: std::sync::atomic::AtomicBool,
    next_seq: AtomicU64,
    last_snapshot: Mutex<Option<SnapshotInfo>>,
    pub recovery: RecoveryReport,
    /// The documents' texts on disk (see [`texts`]).
    texts: Texts,
    /// Keep the texts of writes from now on (and in the next snapshot).
    store_text: AtomicBool,
    /// While a reindex runs: every write logged since it began, in log
    /// order, for it to replay on the new index.
    tap: Mutex<Option<Vec<TapOp>>>,
    /// The tap keeps each write's shingles and signature too.
    tap_signed: AtomicBool,
    /// Set when a reindex has switched the collection to a new store:
    /// writes that still reach this one go there. Writes hold the read
    /// lock, the switch the write lock.
    successor: RwLock<Option<Arc<Store>>>,
}

/// The store's journal: the write to the log (its text already in the
/// text tail, or put there now), and to the reindex tap while one runs;
/// called under the id's entry lock, so it does no file I/O but where a
/// write must leave nothing behind when it is refused (`if_unique`).
struct StoreJournal<'a>(&'a Store);

/// The first byte of a write's journal payload ([`Store::attach_text`]):
/// its compressed text follows, not yet in the text tail (the journal
/// appends it)...
const TEXT_PENDING: u8 = 0;
/// ...or already appended: the 8-byte locator (little-endian), then the text.
const TEXT_AT: u8 = 1;

impl Journal for StoreJournal<'_> {
    fn append(&self, entry: JournalEntry<'_>) -> Result<u64, JournalError> {
        let store = self.0;
        let entry = match entry {
            JournalEntry::Upsert(record, Some(payload)) => {
                let (loc, text) = match payload.split_first() {
                    Some((&TEXT_AT, rest)) if rest.len() >= 8 => {
                        let (loc, text) = rest.split_at(8);
                        let loc = u64::from_le_bytes(loc.try_into().expect("8 bytes"));
                        (loc, text)
                    }
                    // If the log then refuses the write, the text is an
                    // orphan in the tail: never pointed to, gone at the
                    // next snapshot.
                    Some((&TEXT_PENDING, text)) => {
                        (store.texts.append(text).map_err(JournalError::new)?, text)
                    }
                    _ => {
                        return Err(JournalError::new(PersistError::Unrecoverable(
                            "a write's text payload has no known tag".into(),
                        )))
                    }
                };
                record.set_text_locator(loc);
                JournalEntry::Upsert(record, Some(text))
            }
            other => other,
        };
        let lsn = store.wal.append(entry)?;
        let mut tap = store.tap.lock().expect("tap lock");
        if let Some(ops) = tap.as_mut() {
            ops.push(match entry {
                JournalEntry::Upsert(r, text) => TapOp::Upsert {
                    id: r.id().clone(),
                    metadata: r.metadata().map(Into::into),
                    stamp: r.stamp(),
                    text: text.map(Into::into),
                    signed: store.tap_signed.load(Ordering::Relaxed).then(|| {
                        (
                            r.shingles().into(),
                            r.signature().into(),
                            r.selection().into(),
                        )
                    }),
                },
                JournalEntry::Delete(id) => TapOp::Delete(id.to_owned()),
            });
        }
        Ok(lsn)
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.dir)
            .field("documents", &self.engine.len())
            .field("next_lsn", &self.wal.next_lsn())
            .finish()
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Store {
    /// Recover the engine's state from `settings.data_dir`, then open the log.
    pub fn open(engine: Arc<Engine>, settings: &StorageSettings) -> Result<Self, PersistError> {
        let dir = settings.data_dir.clone();
        fsops::ensure_dir(&dir)?;
        snapshot::remove_temporaries(&dir)?;
        let fingerprint = Fingerprint::of(engine.params());
        let start = Instant::now();
        let mut report = RecoveryReport::default();
        let texts = Texts::open(&dir)?;
        let (next_lsn, last) = recovery::recover(&engine, &texts, &dir, &fingerprint, &mut report)?;
        report.documents = engine.len();
        report.seconds = start.elapsed().as_secs_f64();
        let older_bytes = wal::list_segments(&dir)?
            .iter()
            .filter(|(s, _)| *s != next_lsn)
            .map(|(_, p)| std::fs::metadata(p).map_or(0, |m| m.len()))
            .sum();
        let wal = Arc::new(Wal::open(
            &dir,
            next_lsn,
            settings.wal_fsync,
            fingerprint.clone(),
            older_bytes,
        )?);
        let next_seq = snapshot::list_snapshots(&dir)?
            .last()
            .map_or(1, |(s, _)| s + 1);
        Ok(Self {
            engine,
            dir,
            settings: settings.clone(),
            wal,
            fingerprint,
            snapshot_lock: Mutex::new(()),
            retired: Default::default(),
            next_seq: AtomicU64::new(next_seq),
            last_snapshot: Mutex::new(last),
            recovery: report,
            texts,
            store_text: AtomicBool::new(settings.store_text),
            tap: Mutex::new(None),
            tap_signed: AtomicBool::new(false),
            successor: RwLock::new(None),
        })
    }

    fn journal(&self) -> StoreJournal<'_> {
        StoreJournal(self)
    }

    /// True if texts of new writes are kept.
    pub fn stores_text(&self) -> bool {
        self.store_text.load(Ordering::Acquire)
    }

    /// Keep texts of writes from now on (`true`), or stop and drop the
    /// stored ones at the next snapshot (`false`).
    pub fn set_store_text(&self, on: bool) {
        self.store_text.store(on, Ordering::Release);
    }

    /// Bytes of the text segments on disk.
    pub fn text_bytes(&self) -> u64 {
        self.texts.bytes()
    }

    /// Compress `new`'s text for the log when texts are kept. With
    /// `append`, also write it to the text tail now (the caller holds a
    /// [`Texts::pin`] until the record is published), before the write takes
    /// its id's lock (a write then refused, say as a create of an existing
    /// id, leaves an orphan there, gone at the next snapshot); without, or
    /// if that write fails (the journal then tries again and fails the
    /// write as before), the journal appends it under the lock, only if the
    /// write is applied.
    fn attach_text(&self, new: &mut NewDoc, append: bool) {
        let Some(compressed) = self.compressed_text(new) else {
            new.doc.set_journal_payload(None);
            return;
        };
        let loc = append
            .then(|| self.texts.append(&compressed).ok())
            .flatten();
        new.doc
            .set_journal_payload(Some(text_payload(loc, &compressed)));
    }

    /// `new`'s text compressed, if texts are kept and it has one.
    fn compressed_text(&self, new: &NewDoc) -> Option<Vec<u8>> {
        match (&new.text, self.stores_text()) {
            (Some(text), true) => Some(texts::compress(text)),
            _ => None,
        }
    }

    /// The stored text of live document `id`: `None` if there is no such
    /// document or it was stored without its text.
    pub fn text(&self, id: &str) -> Result<Option<String>, PersistError> {
        if !self.stores_text() {
            return Ok(None);
        }
        match self.engine.get(id) {
            Some(record) => self.texts.read(&record),
            None => Ok(None),
        }
    }

    /// The stored text of `record` (of this store's engine).
    pub fn text_of(&self, record: &Record) -> Result<Option<String>, PersistError> {
        if !self.stores_text() {
            return Ok(None);
        }
        self.texts.read(record)
    }

    /// Up to `n` live documents with a stored text, drawn uniformly without
    /// replacement (deterministic for a given `seed` and contents), with
    /// their texts, stopping before the texts would pass `max_bytes` in
    /// total. Only the chosen texts are read.
    pub fn sample_texts(
        &self,
        n: usize,
        seed: u64,
        max_bytes: usize,
    ) -> Result<Vec<(String, String)>, PersistError> {
        if !self.stores_text() || n == 0 {
            return Ok(Vec::new());
        }
        let now = self.engine.now_ms();
        let mut pool: Vec<Arc<Record>> = self
            .engine
            .records()
            .into_iter()
            .filter(|r| r.text_locator() != 0 && self.engine.is_live(r, now))
            .collect();
        pool.sort_unstable_by(|a, b| a.id().as_str().cmp(b.id().as_str()));
        let take = crate::engine::sample::draw_front(&mut pool, n, seed);
        let mut out = Vec::with_capacity(take);
        let mut bytes = 0usize;
        for record in &pool[..take] {
            if let Some(text) = self.texts.read(record)? {
                bytes = bytes.saturating_add(text.len());
                if bytes > max_bytes {
                    break;
                }
                out.push((record.id().to_string(), text));
            }
        }
        Ok(out)
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    pub fn wal(&self) -> &Wal {
        &self.wal
    }

    #[cfg(test)]
    fn wal_arc(&self) -> &Arc<Wal> {
        &self.wal
    }

    fn commit(&self, lsn: u64) -> Result<(), EngineError> {
        self.wal
            .commit(lsn)
            .map_err(|e| EngineError::Journal(JournalError::new(e)))
    }

    /// The stamp of a write made now, expiring at `expires_ms` if given.
    fn stamp_now(&self, new: &NewDoc) -> Stamp {
        Stamp {
            created_ms: new.created_ms.unwrap_or_else(|| self.engine.now_ms()),
            expires_ms: new.expires_ms,
        }
    }

    /// Insert or replace durably: returns once the log record is committed.
    pub fn insert(&self, mut new: NewDoc, mode: WriteMode) -> Result<WriteOutcome, EngineError> {
        let gate = self.successor.read().expect("successor lock");
        if let Some(next) = gate.as_ref() {
            return next.insert(next.reprepare(new)?, mode);
        }
        let pin = self.texts.pin();
        self.attach_text(&mut new, true);
        let stamp = self.stamp_now(&new);
        let (outcome, lsn) = self.engine.insert_journaled(
            new.id,
            &new.doc,
            new.metadata,
            mode,
            stamp,
            &self.journal(),
        )?;
        drop(pin);
        self.commit(lsn)?;
        Ok(outcome)
    }

    /// A write prepared for the store a reindex replaced, prepared again by
    /// this store's recipe (a reindexed collection keeps every text).
    fn reprepare(&self, mut new: NewDoc) -> Result<NewDoc, EngineError> {
        let text = new.text.as_deref().ok_or_else(|| {
            EngineError::Journal(JournalError::new(PersistError::Unrecoverable(
                "a write without its text reached a reindexed collection".into(),
            )))
        })?;
        new.doc = self.engine.prepare(text)?;
        Ok(new)
    }

    /// Store `new` with the stamp it already has (a reindex copying a
    /// document), durably once [`Self::commit_all`] returns.
    pub fn insert_stamped(&self, mut new: NewDoc, stamp: Stamp) -> Result<u64, EngineError> {
        let _pin = self.texts.pin();
        self.attach_text(&mut new, true);
        let (_, lsn) = self.engine.insert_journaled(
            new.id,
            &new.doc,
            new.metadata,
            WriteMode::Upsert,
            stamp,
            &self.journal(),
        )?;
        Ok(lsn)
    }

    /// Commit everything appended so far.
    pub fn commit_all(&self) -> Result<(), EngineError> {
        let next = self.wal.next_lsn();
        if next == 0 {
            return Ok(());
        }
        self.commit(next - 1)
    }

    /// Insert-if-unique durably (see [`Engine::insert_if_unique`]): returns
    /// once the log record is committed, or at once with the near-duplicates.
    pub fn insert_if_unique(
        &self,
        mut new: NewDoc,
        q: &Query,
    ) -> Result<UniqueOutcome, EngineError> {
        let gate = self.successor.read().expect("successor lock");
        if let Some(next) = gate.as_ref() {
            return next.insert_if_unique(next.reprepare(new)?, q);
        }
        // A refused write must leave nothing: its text goes to the tail
        // only if it is applied (under the lock, by the journal).
        self.attach_text(&mut new, false);
        let outcome = self.engine.insert_if_unique(
            new.id,
            &new.doc,
            new.metadata,
            new.expires_ms,
            q,
            &self.journal(),
        )?;
        if let UniqueOutcome::Inserted(stored) = outcome {
            self.commit(stored.seq)?;
        }
        Ok(outcome)
    }

    /// Apply many writes with one commit (one write, one fsync) at the end.
    /// Per-item results keep their order; a failed commit fails them all.
    pub fn insert_many(
        &self,
        items: impl IntoIterator<Item = NewDoc>,
        mode: WriteMode,
    ) -> Result<Vec<Result<WriteOutcome, EngineError>>, EngineError> {
        let gate = self.successor.read().expect("successor lock");
        if let Some(next) = gate.as_ref() {
            let items: Vec<NewDoc> = items
                .into_iter()
                .map(|new| next.reprepare(new))
                .collect::<Result<_, _>>()?;
            return next.insert_many(items, mode);
        }
        // Texts are compressed first, in parallel (on the rayon pool, so
        // their buffers do not sit between the records in the allocator's
        // arena of this thread and leave holes there when freed), then
        // written to the text tail in one write, before any id's lock is
        // taken.
        let mut items: Vec<NewDoc> = items.into_iter().collect();
        let pin = self.texts.pin();
        if self.stores_text() {
            use rayon::prelude::*;
            let compressed: Vec<Option<Vec<u8>>> = items
                .par_iter()
                .map(|new| self.compressed_text(new))
                .collect();
            // One write to the tail for the whole batch; if it fails, each
            // text goes through the journal under its lock, as before.
            let texts: Vec<&[u8]> = compressed.iter().flatten().map(Vec::as_slice).collect();
            let mut locs = self.texts.append_many(&texts).ok().map(Vec::into_iter);
            let locs: Vec<Option<u64>> = compressed
                .iter()
                .map(|c| {
                    c.as_ref()
                        .and_then(|_| locs.as_mut().and_then(Iterator::next))
                })
                .collect();
            items
                .par_iter_mut()
                .zip(compressed.par_iter().zip(locs))
                .for_each(|(new, (c, loc))| {
                    new.doc
                        .set_journal_payload(c.as_deref().map(|c| text_payload(loc, c)));
                });
        }
        let journal = self.journal();
        let writes: Vec<BatchWrite<'_>> = items
            .iter_mut()
            .map(|new| BatchWrite {
                id: new.id.clone(),
                doc: &new.doc,
                metadata: new.metadata.take(),
                stamp: self.stamp_now(new),
            })
            .collect();
        let mut last = None;
        let results: Vec<_> = self
            .engine
            .insert_many_journaled(writes, mode, &journal)
            .into_iter()
            .map(|r| {
                r.map(|(outcome, lsn)| {
                    last = Some(lsn);
                    outcome
                })
            })
            .collect();
        drop(pin);
        if let Some(lsn) = last {
            self.commit(lsn)?;
        }
        Ok(results)
    }

    /// Delete durably; false if no live document had the id (an expired
    /// one is purged all the same).
    pub fn remove(&self, id: &str) -> Result<bool, EngineError> {
        let gate = self.successor.read().expect("successor lock");
        if let Some(next) = gate.as_ref() {
            return next.remove(id);
        }
        match self.engine.remove_journaled(id, &self.journal())? {
            Some((lsn, live)) => {
                self.commit(lsn)?;
                Ok(live)
            }
            None => Ok(false),
        }
    }

    /// Purge every document expired at the engine's "now": a journaled
    /// delete each, one commit. Returns how many were purged.
    pub fn purge_expired(&self) -> Result<usize, EngineError> {
        let gate = self.successor.read().expect("successor lock");
        if let Some(next) = gate.as_ref() {
            return next.purge_expired();
        }
        let now = self.engine.now_ms();
        let mut last = None;
        let mut purged = 0;
        for id in self.engine.expired_ids(now) {
            if let Some(lsn) = self.engine.remove_if_expired(&id, now, &self.journal())? {
                last = Some(lsn);
                purged += 1;
            }
        }
        if let Some(lsn) = last {
            self.commit(lsn)?;
        }
        Ok(purged)
    }

    /// Start catching every logged write for a reindex (see [`TapOp`]).
    /// With `signed`, each caught write keeps its shingles and signature.
    pub fn start_tap(&self, signed: bool) {
        let mut tap = self.tap.lock().expect("tap lock");
        self.tap_signed.store(signed, Ordering::Relaxed);
        *tap = Some(Vec::new());
    }

    /// What the tap caught since the last call (it keeps catching).
    pub fn take_tap(&self) -> Vec<TapOp> {
        self.tap
            .lock()
            .expect("tap lock")
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    pub fn stop_tap(&self) {
        *self.tap.lock().expect("tap lock") = None;
    }

    /// A reindex's switch: with every write to this store held off (and
    /// those in flight finished), hand `commit` the rest of the tap; if it
    /// succeeds, every later write to this store goes to `next`.
    pub fn hand_over<E>(
        &self,
        next: Arc<Store>,
        commit: impl FnOnce(Vec<TapOp>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut gate = self.successor.write().expect("successor lock");
        let ops = self.take_tap();
        self.stop_tap();
        commit(ops)?;
        *gate = Some(next);
        Ok(())
    }

    /// Delete `id` without waiting for the log (a reindex replaying
    /// deletes; [`Self::commit_all`] follows).
    pub fn remove_uncommitted(&self, id: &str) -> Result<(), EngineError> {
        self.engine
            .remove_journaled(id, &self.journal())
            .map(|_| ())
    }

    /// Its collection is being deleted: wait for a running snapshot to
    /// finish and refuse later ones, so none writes into a directory on its
    /// way out.
    pub fn retire(&self) {
        let _one = self.snapshot_lock.lock().expect("snapshot lock");
        self.retired
            .store(true, std::sync::atomic::Ordering::Release);
    }

    pub fn is_retired(&self) -> bool {
        self.retired.load(std::sync::atomic::Ordering::Acquire)
    }

    /// True when writes were logged since the last snapshot.
    pub fn changed_since_snapshot(&self) -> bool {
        let since = self
            .last_snapshot
            .lock()
            .expect("snapshot info lock")
            .as_ref()
            .map_or(0, |s| s.wal_lsn);
        self.wal.next_lsn() > since
    }

    /// Write a snapshot now. Writers and readers keep going meanwhile:
    /// they wait at most for the log rotation and one `ids` shard scan.
    pub fn snapshot(&self) -> Result<SnapshotInfo, PersistError> {
        let _one = self.snapshot_lock.lock().expect("snapshot lock");
        if self.is_retired() {
            return Err(PersistError::Retired);
        }
        let start = Instant::now();
        // The text tail first: every text in an older tail then belongs to
        // a record the scan below sees (see `texts`).
        let old_tails = self.texts.rotate_tail()?;
        let wal_lsn = self.wal.rotate()?;
        let rotated = Instant::now();
        let records = self.engine.records();
        let collected = Instant::now();
        let bands = self.engine.bands();
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let header = SnapshotHeader {
            format_version: snapshot::FORMAT_VERSION,
            seq,
            wal_lsn,
            documents: records.len() as u64,
            created_unix_ms: unix_ms(),
            fingerprint: self.fingerprint.clone(),
            threshold: self.engine.params().index.threshold,
            bands: bands.bands as u32,
            rows: bands.rows as u32,
        };
        // Texts of live documents, unless texts are no longer kept.
        let now = self.engine.now_ms();
        let keep = self.stores_text();
        let any_text = keep && records.iter().any(|r| r.text_locator() != 0);
        let (offsets, text_bytes) = if any_text {
            self.texts
                .compact(seq, &records, |r| self.engine.is_live(r, now))?
        } else {
            (Vec::new(), 0)
        };
        let (path, bytes) = match snapshot::write(&self.dir, &header, &records, &offsets) {
            Ok(done) => done,
            Err(e) => {
                if any_text {
                    self.texts.discard(seq);
                }
                return Err(e);
            }
        };
        if any_text {
            self.texts
                .adopt(seq, &records, &offsets, text_bytes, &old_tails)?;
        } else {
            // No text kept: every locator goes (texts turned off, or none).
            for r in &records {
                r.set_text_locator(0);
            }
            self.texts.drop_tails(&old_tails);
        }
        let written = Instant::now();
        drop(records);
        self.prune()?;
        let info = SnapshotInfo {
            path,
            seq: header.seq,
            documents: header.documents,
            bytes,
            text_bytes,
            milliseconds: start.elapsed().as_secs_f64() * 1e3,
            rotate_ms: (rotated - start).as_secs_f64() * 1e3,
            collect_ms: (collected - rotated).as_secs_f64() * 1e3,
            write_ms: (written - collected).as_secs_f64() * 1e3,
            created_unix_ms: header.created_unix_ms,
            wal_lsn,
        };
        tracing::info!(
            path = %info.path.display(),
            documents = info.documents,
            bytes = info.bytes,
            milliseconds = info.milliseconds,
            "snapshot written"
        );
        *self.last_snapshot.lock().expect("snapshot info lock") = Some(info.clone());
        Ok(info)
    }

    /// Keep `snapshots_keep` snapshots and the log they need.
    fn prune(&self) -> Result<(), PersistError> {
        let mut snaps = snapshot::list_snapshots(&self.dir)?;
        let keep = self.settings.snapshots_keep.max(1);
        while snaps.len() > keep {
            let (_, path) = snaps.remove(0);
            std::fs::remove_file(&path).map_err(fsops::io_err(&path))?;
        }
        fsops::sync_dir(&self.dir)?;
        // Keep the log back to the oldest kept snapshot, so a damaged newer
        // snapshot can fall back to it.
        if let Some((seq, oldest)) = snaps.first() {
            let lsn = snapshot::read_header(oldest)?.wal_lsn;
            self.wal.prune_before(lsn)?;
            self.texts.prune_before(*seq)?;
        }
        Ok(())
    }

    pub fn last_snapshot(&self) -> Option<SnapshotInfo> {
        self.last_snapshot
            .lock()
            .expect("snapshot info lock")
            .clone()
    }

    pub fn data_dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests;
