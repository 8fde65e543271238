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
//! - data written under different signature parameters is refused.

pub mod format;
pub mod fsops;
pub mod snapshot;
pub mod wal;

use crate::config::{StorageSettings, WalFsync};
use crate::engine::{
    DocId, Engine, EngineError, JournalError, Prepared, Threshold, UniqueOutcome, WriteMode,
    WriteOutcome,
};
use format::{Fingerprint, StoredRecord};
use serde::Serialize;
use snapshot::SnapshotHeader;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use wal::{Wal, WalOp};

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
}

/// What a finished snapshot looks like, for `/stats` and `POST /admin/snapshot`.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotInfo {
    pub path: PathBuf,
    pub seq: u64,
    pub documents: u64,
    pub bytes: u64,
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

/// The durable front of the engine: every write goes through here.
pub struct Store {
    engine: Arc<Engine>,
    dir: PathBuf,
    settings: StorageSettings,
    wal: Arc<Wal>,
    fingerprint: Fingerprint,
    /// One snapshot at a time.
    snapshot_lock: Mutex<()>,
    next_seq: AtomicU64,
    last_snapshot: Mutex<Option<SnapshotInfo>>,
    pub recovery: RecoveryReport,
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

fn now_stats(start: Instant, n: u64) -> (f64, f64) {
    let s = start.elapsed().as_secs_f64();
    (s, if s > 0.0 { n as f64 / s } else { 0.0 })
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
        let (next_lsn, last) = recover(&engine, &dir, &fingerprint, &mut report)?;
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
        if settings.wal_fsync == WalFsync::Interval {
            spawn_interval_sync(&wal, Duration::from_millis(settings.wal_fsync_interval_ms));
        }
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
            next_seq: AtomicU64::new(next_seq),
            last_snapshot: Mutex::new(last),
            recovery: report,
        })
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

    /// Insert or replace durably: returns once the log record is committed.
    pub fn insert(
        &self,
        id: DocId,
        doc: &Prepared,
        metadata: Option<Box<str>>,
        mode: WriteMode,
    ) -> Result<WriteOutcome, EngineError> {
        let (outcome, lsn) = self
            .engine
            .insert_journaled(id, doc, metadata, mode, &*self.wal)?;
        self.commit(lsn)?;
        Ok(outcome)
    }

    /// Insert-if-unique durably (see [`Engine::insert_if_unique`]): returns
    /// once the log record is committed, or at once with the near-duplicates.
    pub fn insert_if_unique(
        &self,
        id: DocId,
        doc: &Prepared,
        metadata: Option<Box<str>>,
        threshold: Threshold,
        limit: usize,
    ) -> Result<UniqueOutcome, EngineError> {
        let outcome = self
            .engine
            .insert_if_unique(id, doc, metadata, threshold, limit, &*self.wal)?;
        if let UniqueOutcome::Inserted(lsn) = outcome {
            self.commit(lsn)?;
        }
        Ok(outcome)
    }

    /// Apply many writes with one commit (one write, one fsync) at the end.
    /// Per-item results keep their order; a failed commit fails them all.
    pub fn insert_many(
        &self,
        items: impl IntoIterator<Item = (DocId, Prepared, Option<Box<str>>)>,
        mode: WriteMode,
    ) -> Result<Vec<Result<WriteOutcome, EngineError>>, EngineError> {
        let mut last = None;
        let results: Vec<_> = items
            .into_iter()
            .map(|(id, doc, metadata)| {
                self.engine
                    .insert_journaled(id, &doc, metadata, mode, &*self.wal)
                    .map(|(outcome, lsn)| {
                        last = Some(lsn);
                        outcome
                    })
            })
            .collect();
        if let Some(lsn) = last {
            self.commit(lsn)?;
        }
        Ok(results)
    }

    /// Delete durably; false if the id was not stored.
    pub fn remove(&self, id: &str) -> Result<bool, EngineError> {
        match self.engine.remove_journaled(id, &*self.wal)? {
            Some(lsn) => {
                self.commit(lsn)?;
                Ok(true)
            }
            None => Ok(false),
        }
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
        let start = Instant::now();
        let wal_lsn = self.wal.rotate()?;
        let rotated = Instant::now();
        let records = self.engine.records();
        let collected = Instant::now();
        let bands = self.engine.bands();
        let header = SnapshotHeader {
            format_version: snapshot::FORMAT_VERSION,
            seq: self.next_seq.fetch_add(1, Ordering::Relaxed),
            wal_lsn,
            documents: records.len() as u64,
            created_unix_ms: unix_ms(),
            fingerprint: self.fingerprint.clone(),
            threshold: self.engine.params().index.threshold,
            bands: bands.bands as u32,
            rows: bands.rows as u32,
        };
        let (path, bytes) = snapshot::write(&self.dir, &header, &records)?;
        let written = Instant::now();
        drop(records);
        self.prune()?;
        let info = SnapshotInfo {
            path,
            seq: header.seq,
            documents: header.documents,
            bytes,
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
        if let Some((_, oldest)) = snaps.first() {
            let lsn = snapshot::read_header(oldest)?.wal_lsn;
            self.wal.prune_before(lsn)?;
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

fn spawn_interval_sync(wal: &Arc<Wal>, every: Duration) {
    let weak = Arc::downgrade(wal);
    std::thread::Builder::new()
        .name("wal-fsync".into())
        .spawn(move || loop {
            std::thread::sleep(every);
            let Some(wal) = weak.upgrade() else { return };
            if let Err(e) = wal.sync_now() {
                tracing::error!(error = %e, "periodic log fsync failed");
            }
        })
        .expect("spawning a thread");
}

/// Load the newest usable snapshot and replay the log after it. Returns
/// the next LSN and the snapshot used.
fn recover(
    engine: &Engine,
    dir: &Path,
    fingerprint: &Fingerprint,
    report: &mut RecoveryReport,
) -> Result<(u64, Option<SnapshotInfo>), PersistError> {
    let snapshots = snapshot::list_snapshots(dir)?;
    let segments = wal::list_segments(dir)?;
    let log_covers = |lsn: u64| segments.first().is_none_or(|(first, _)| *first <= lsn);

    let mut base: Option<(SnapshotHeader, PathBuf)> = None;
    let mut first_error: Option<PersistError> = None;
    for (_, path) in snapshots.iter().rev() {
        let header = match snapshot::read_header(path) {
            Ok(h) => h,
            Err(e) => {
                first_error.get_or_insert(e);
                continue;
            }
        };
        let diffs = header.fingerprint.differences(fingerprint);
        if !diffs.is_empty() {
            return Err(PersistError::ParameterMismatch {
                path: path.clone(),
                details: diffs.join("; "),
            });
        }
        if first_error.is_some() && !log_covers(header.wal_lsn) {
            break; // the log no longer reaches back this far
        }
        match load_snapshot(engine, path) {
            Ok(h) => {
                if let Some(e) = &first_error {
                    tracing::error!(error = %e, fallback = %path.display(), "newer snapshot is damaged; using an older one plus the log");
                    report.fallbacks.push(e.to_string());
                }
                base = Some((h, path.clone()));
                break;
            }
            Err(e) => {
                tracing::error!(error = %e, "snapshot is damaged");
                engine.clear();
                first_error.get_or_insert(e);
            }
        }
    }
    if base.is_none() {
        if let Some(e) = first_error {
            return Err(PersistError::Unrecoverable(format!(
                "{e}; no older snapshot is intact with an unbroken log since it, so starting would lose acknowledged writes. \
                 Move the damaged file aside to start from what remains, knowingly"
            )));
        }
    }
    let from = base.as_ref().map_or(0, |(h, _)| h.wal_lsn);
    if !log_covers(from) {
        let (first, path) = &segments[0];
        return Err(PersistError::Unrecoverable(format!(
            "the log starts at record {first} ({}) but the state needs it from record {from}: records are missing",
            path.display()
        )));
    }
    let last = base.as_ref().map(|(h, path)| SnapshotInfo {
        path: path.clone(),
        seq: h.seq,
        documents: h.documents,
        bytes: std::fs::metadata(path).map_or(0, |m| m.len()),
        milliseconds: 0.0,
        rotate_ms: 0.0,
        collect_ms: 0.0,
        write_ms: 0.0,
        created_unix_ms: h.created_unix_ms,
        wal_lsn: h.wal_lsn,
    });
    if let Some((h, path)) = &base {
        report.snapshot = Some(path.clone());
        report.snapshot_documents = h.documents;
    }
    let next = replay(engine, &segments, from, fingerprint, report)?;
    Ok((next, last))
}

fn corrupt_record(path: &Path, what: String) -> PersistError {
    PersistError::Corrupt {
        path: path.to_owned(),
        offset: 0,
        reason: what,
    }
}

fn restore_record(engine: &Engine, path: &Path, rec: StoredRecord) -> Result<(), PersistError> {
    let id = DocId::parse(&rec.id)
        .map_err(|e| corrupt_record(path, format!("record {:?} has an invalid id: {e}", rec.id)))?;
    let doc = engine
        .prepared_from_parts(rec.signature.into(), rec.shingles)
        .ok_or_else(|| {
            corrupt_record(
                path,
                format!(
                    "record {:?} has an invalid signature or shingle set",
                    rec.id
                ),
            )
        })?;
    engine
        .insert(
            id,
            &doc,
            rec.metadata.map(String::into_boxed_str),
            WriteMode::Upsert,
        )
        .map_err(|e| {
            corrupt_record(path, format!("record {:?} cannot be restored: {e}", rec.id))
        })?;
    Ok(())
}

/// Records per batch handed from the reading thread to the indexing one.
const RESTORE_BATCH: usize = 8192;

/// Load a snapshot into `engine` as a two-stage pipeline: a reader thread
/// reads, checksums and decodes frames straight into records (see
/// [`format::decode_record`]) while this thread indexes the previous batch
/// ([`Engine::restore_batch`], which spreads the LSH work over the rayon
/// pool). Every map is sized from the header's document count first, so
/// nothing rehashes on the way. On error the engine may hold part of the
/// snapshot; the caller clears it.
fn load_snapshot(engine: &Engine, path: &Path) -> Result<SnapshotHeader, PersistError> {
    let start = Instant::now();
    tracing::info!(path = %path.display(), "loading snapshot");
    let planned = snapshot::read_header(path)?;
    // The header is checksummed, but bound the reservation by what the file
    // could hold (a record frame is well over 64 bytes) all the same.
    let file_len = std::fs::metadata(path).map_err(fsops::io_err(path))?.len();
    engine.reserve(planned.documents.min(file_len / 64) as usize);
    let num_perm = engine.params().index.num_perm;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<crate::engine::Record>>(4);
    let mut loaded = 0u64;
    let mut last_log = Instant::now();
    let header = std::thread::scope(|s| {
        let reader = std::thread::Builder::new()
            .name("snapshot-read".into())
            .spawn_scoped(s, move || {
                snapshot::read_with(
                    path,
                    RESTORE_BATCH,
                    |payload| format::decode_record(payload, num_perm),
                    |batch| {
                        tx.send(batch).map_err(|_| {
                            PersistError::Unrecoverable("snapshot restore stopped".into())
                        })
                    },
                )
            })
            .map_err(fsops::io_err(path))?;
        // Ends when the reader finishes or fails (either drops `tx`).
        for batch in rx {
            loaded += batch.len() as u64;
            engine.restore_batch(batch);
            if last_log.elapsed() > Duration::from_secs(2) {
                let (_, rate) = now_stats(start, loaded);
                tracing::info!(documents = loaded, per_second = rate as u64, "restoring");
                last_log = Instant::now();
            }
        }
        reader
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    engine.finish_restore();
    let header = header?;
    let (secs, rate) = now_stats(start, loaded);
    tracing::info!(
        path = %path.display(),
        documents = loaded,
        seconds = secs,
        per_second = rate as u64,
        "snapshot loaded"
    );
    Ok(header)
}

/// Replay every log record at or after `from`. Returns the next LSN.
fn replay(
    engine: &Engine,
    segments: &[(u64, PathBuf)],
    from: u64,
    fingerprint: &Fingerprint,
    report: &mut RecoveryReport,
) -> Result<u64, PersistError> {
    let start = Instant::now();
    let mut next = from;
    for (i, (seg_start, path)) in segments.iter().enumerate() {
        let is_last = i + 1 == segments.len();
        let seg_end = segments.get(i + 1).map(|s| s.0);
        if seg_end.is_some_and(|end| end <= from) {
            continue; // entirely before the snapshot
        }
        let contents = match wal::read_segment(path) {
            Ok(c) => c,
            Err(PersistError::IncompleteHeader { .. }) if is_last => {
                // A crash while creating the newest segment left a partial header.
                tracing::warn!(path = %path.display(), "removing a log segment whose header was never completed");
                std::fs::remove_file(path).map_err(fsops::io_err(path))?;
                break;
            }
            Err(e) => return Err(e),
        };
        let diffs = contents.header.fingerprint.differences(fingerprint);
        if !diffs.is_empty() {
            return Err(PersistError::ParameterMismatch {
                path: path.clone(),
                details: diffs.join("; "),
            });
        }
        if *seg_start > next {
            return Err(PersistError::Unrecoverable(format!(
                "{} starts at record {seg_start} but record {next} is missing",
                path.display()
            )));
        }
        if contents.torn_bytes > 0 {
            if !is_last {
                return Err(PersistError::Corrupt {
                    path: path.clone(),
                    offset: contents.valid_len,
                    reason: "incomplete record before the end of the log".into(),
                });
            }
            tracing::warn!(
                path = %path.display(),
                offset = contents.valid_len,
                bytes = contents.torn_bytes,
                "dropping a torn final log record (a crash interrupted its write; it was never acknowledged)"
            );
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(fsops::io_err(path))?;
            f.set_len(contents.valid_len).map_err(fsops::io_err(path))?;
            f.sync_all().map_err(fsops::io_err(path))?;
            report.torn_bytes_dropped += contents.torn_bytes;
        }
        for (lsn, op) in contents.entries {
            if lsn < from {
                continue;
            }
            match op {
                WalOp::Upsert(rec) => restore_record(engine, path, rec)?,
                WalOp::Delete(id) => {
                    engine.remove(&id);
                }
            }
            report.replayed_records += 1;
            next = lsn + 1;
        }
        next = next.max(*seg_start);
    }
    if report.replayed_records > 0 {
        let (secs, rate) = now_stats(start, report.replayed_records);
        tracing::info!(
            records = report.replayed_records,
            seconds = secs,
            per_second = rate as u64,
            "log replayed"
        );
    }
    Ok(next)
}

#[cfg(test)]
mod tests;
