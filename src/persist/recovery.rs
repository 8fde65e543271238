//! Recovery: from the files in `storage.data_dir` to the engine's state.
//!
//! ```text
//!   choose the base   newest snapshot that loads; an older one only if the log still reaches back to it
//!   check the log     it must start at or before the base's LSN, with no gap
//!   per segment       read → check (fingerprint, continuity) → truncate a torn tail (last segment only) → apply
//! ```
//!
//! Every refusal names the file (and, for damage, the byte offset or the
//! record), and nothing acknowledged is dropped silently: a torn final
//! record was never acknowledged, anything else that is wrong stops the
//! start unless an older snapshot *and* an unbroken log since it can stand in.

use super::format::{self, Fingerprint, StoredRecord};
use super::snapshot::{self, SnapshotHeader};
use super::texts::{self, Texts};
use super::wal::{self, LogEntry, SegmentContents, WalOp};
use super::{fsops, PersistError, RecoveryReport, SnapshotInfo};
use crate::engine::{
    DocId, Engine, Journal, JournalEntry, JournalError, NoJournal, Record, WriteMode,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Records per batch handed from the reading thread to the indexing one.
pub(super) const RESTORE_BATCH: usize = 8192;

/// Seconds since `start` and the rate of `n` items over them.
fn rate(start: Instant, n: u64) -> (f64, f64) {
    let s = start.elapsed().as_secs_f64();
    (s, if s > 0.0 { n as f64 / s } else { 0.0 })
}

/// Load the newest usable snapshot and replay the log after it. Returns
/// the next LSN and the snapshot used.
pub(super) fn recover(
    engine: &Engine,
    texts: &Texts,
    dir: &Path,
    fingerprint: &Fingerprint,
    report: &mut RecoveryReport,
) -> Result<(u64, Option<SnapshotInfo>), PersistError> {
    let snapshots = snapshot::list_snapshots(dir)?;
    let segments = wal::list_segments(dir)?;
    let base = choose_base(engine, texts, &snapshots, &segments, fingerprint, report)?;
    let from = base.as_ref().map_or(0, |(h, _)| h.wal_lsn);
    check_log_reaches(&segments, from)?;
    let last = base.as_ref().map(|(h, path)| snapshot_info(h, path));
    if let Some((h, path)) = &base {
        report.snapshot = Some(path.clone());
        report.snapshot_documents = h.documents;
    }
    let next = replay(engine, texts, &segments, from, fingerprint, report)?;
    Ok((next, last))
}

/// True if the log still holds every record from `lsn` on.
fn log_covers(segments: &[(u64, PathBuf)], lsn: u64) -> bool {
    segments.first().is_none_or(|(first, _)| *first <= lsn)
}

/// Try the snapshots newest first and load the first that is intact. A
/// damaged one is skipped only if an older one can stand in with an
/// unbroken log since it; otherwise the start is refused.
fn choose_base(
    engine: &Engine,
    texts: &Texts,
    snapshots: &[(u64, PathBuf)],
    segments: &[(u64, PathBuf)],
    fingerprint: &Fingerprint,
    report: &mut RecoveryReport,
) -> Result<Option<(SnapshotHeader, PathBuf)>, PersistError> {
    let mut first_error: Option<PersistError> = None;
    for (_, path) in snapshots.iter().rev() {
        let header = match snapshot::read_header(path) {
            Ok(h) => h,
            Err(e) => {
                first_error.get_or_insert(e);
                continue;
            }
        };
        check_fingerprint(path, &header.fingerprint, fingerprint)?;
        if first_error.is_some() && !log_covers(segments, header.wal_lsn) {
            break; // the log no longer reaches back this far
        }
        match load_snapshot(engine, texts, path) {
            Ok(h) => {
                if let Some(e) = &first_error {
                    tracing::error!(error = %e, fallback = %path.display(), "newer snapshot is damaged; using an older one plus the log");
                    report.fallbacks.push(e.to_string());
                }
                return Ok(Some((h, path.clone())));
            }
            Err(e) => {
                tracing::error!(error = %e, "snapshot is damaged");
                engine.clear();
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        None => Ok(None),
        Some(e) => Err(PersistError::Unrecoverable(format!(
            "{e}; no older snapshot is intact with an unbroken log since it, so starting would lose acknowledged writes. \
             Move the damaged file aside to start from what remains, knowingly"
        ))),
    }
}

/// Data written under other signature parameters is refused, naming them.
fn check_fingerprint(
    path: &Path,
    stored: &Fingerprint,
    configured: &Fingerprint,
) -> Result<(), PersistError> {
    let diffs = stored.differences(configured);
    if diffs.is_empty() {
        return Ok(());
    }
    Err(PersistError::ParameterMismatch {
        path: path.to_owned(),
        details: diffs.join("; "),
    })
}

/// The log must hold every record from `from` (the base's LSN) on.
fn check_log_reaches(segments: &[(u64, PathBuf)], from: u64) -> Result<(), PersistError> {
    if log_covers(segments, from) {
        return Ok(());
    }
    let (first, path) = &segments[0];
    Err(PersistError::Unrecoverable(format!(
        "the log starts at record {first} ({}) but the state needs it from record {from}: records are missing",
        path.display()
    )))
}

fn snapshot_info(h: &SnapshotHeader, path: &Path) -> SnapshotInfo {
    SnapshotInfo {
        path: path.to_owned(),
        seq: h.seq,
        documents: h.documents,
        bytes: std::fs::metadata(path).map_or(0, |m| m.len()),
        text_bytes: path
            .parent()
            .and_then(|d| std::fs::metadata(d.join(super::texts::compacted_name(h.seq))).ok())
            .map_or(0, |m| m.len()),
        milliseconds: 0.0,
        rotate_ms: 0.0,
        collect_ms: 0.0,
        write_ms: 0.0,
        created_unix_ms: h.created_unix_ms,
        wal_lsn: h.wal_lsn,
    }
}

/// Load a snapshot into `engine` as a two-stage pipeline: a reader thread
/// reads, checksums and decodes frames straight into records (see
/// [`format::decode_record`]) while this thread indexes the previous batch
/// ([`Restore::push`](crate::engine::Restore::push), which spreads the LSH work over the rayon
/// pool and publishes the batch before it meanwhile). Every map is sized from the header's document count first, so
/// nothing rehashes on the way. On error the engine may hold part of the
/// snapshot; the caller clears it.
fn load_snapshot(
    engine: &Engine,
    texts: &Texts,
    path: &Path,
) -> Result<SnapshotHeader, PersistError> {
    let start = Instant::now();
    tracing::info!(path = %path.display(), "loading snapshot");
    let planned = snapshot::read_header(path)?;
    // Its text segment, checked whole, if it has one (format 3).
    let dir = path.parent().unwrap_or(Path::new("."));
    let text_file =
        if planned.format_version >= 3 && dir.join(texts::compacted_name(planned.seq)).exists() {
            Some(texts.open_compacted(planned.seq)?)
        } else {
            None
        };
    // The header is checksummed, but bound the reservation by what the file
    // could hold (a record frame is well over 64 bytes) all the same.
    let file_len = std::fs::metadata(path).map_err(fsops::io_err(path))?.len();
    engine.reserve(planned.documents.min(file_len / 64) as usize);
    let num_perm = engine.params().index.num_perm;
    let window = engine.passage_window();
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Record>>(4);
    let mut loaded = 0u64;
    let mut last_log = Instant::now();
    let mut restore = engine.start_restore();
    let header = std::thread::scope(|s| {
        let reader = std::thread::Builder::new()
            .name("snapshot-read".into())
            .spawn_scoped(s, move || {
                snapshot::read_with(
                    path,
                    RESTORE_BATCH,
                    |payload, header| {
                        format::decode_record(payload, num_perm, header.layout(text_file), window)
                    },
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
            restore.push(batch);
            if last_log.elapsed() > Duration::from_secs(2) {
                let (_, per_second) = rate(start, loaded);
                tracing::info!(
                    documents = loaded,
                    per_second = per_second as u64,
                    "restoring"
                );
                last_log = Instant::now();
            }
        }
        reader
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    restore.finish();
    let header = header?;
    let (secs, per_second) = rate(start, loaded);
    tracing::info!(
        path = %path.display(),
        documents = loaded,
        seconds = secs,
        per_second = per_second as u64,
        "snapshot loaded"
    );
    Ok(header)
}

/// Replay every log record at or after `from`. Returns the next LSN.
fn replay(
    engine: &Engine,
    texts: &Texts,
    segments: &[(u64, PathBuf)],
    from: u64,
    fingerprint: &Fingerprint,
    report: &mut RecoveryReport,
) -> Result<u64, PersistError> {
    let start = Instant::now();
    let mut next = from;
    for (i, (seg_start, path)) in segments.iter().enumerate() {
        let is_last = i + 1 == segments.len();
        if segments.get(i + 1).is_some_and(|(end, _)| *end <= from) {
            continue; // entirely before the base
        }
        let Some(contents) = read_segment(path, is_last)? else {
            break;
        };
        check_segment(path, &contents, fingerprint, *seg_start, next)?;
        truncate_torn_tail(path, &contents, is_last, report)?;
        next = apply(engine, texts, path, contents.entries, from, next, report)?;
        next = next.max(*seg_start);
    }
    if report.replayed_records > 0 {
        let (secs, per_second) = rate(start, report.replayed_records);
        tracing::info!(
            records = report.replayed_records,
            seconds = secs,
            per_second = per_second as u64,
            "log replayed"
        );
    }
    Ok(next)
}

/// Read a segment; `None` for a newest segment whose header a crash left
/// unfinished (it holds no record, and is removed).
fn read_segment(path: &Path, is_last: bool) -> Result<Option<SegmentContents>, PersistError> {
    match wal::read_segment(path) {
        Ok(c) => Ok(Some(c)),
        Err(PersistError::IncompleteHeader { .. }) if is_last => {
            tracing::warn!(path = %path.display(), "removing a log segment whose header was never completed");
            std::fs::remove_file(path).map_err(fsops::io_err(path))?;
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The segment was written with these parameters, and continues the log
/// where the previous one ended (`next`).
fn check_segment(
    path: &Path,
    contents: &SegmentContents,
    fingerprint: &Fingerprint,
    seg_start: u64,
    next: u64,
) -> Result<(), PersistError> {
    check_fingerprint(path, &contents.header.fingerprint, fingerprint)?;
    if seg_start > next {
        return Err(PersistError::Unrecoverable(format!(
            "{} starts at record {seg_start} but record {next} is missing",
            path.display()
        )));
    }
    Ok(())
}

/// An incomplete final record is a torn write (never acknowledged): cut it
/// off, in the newest segment only. Anywhere else it is damage.
fn truncate_torn_tail(
    path: &Path,
    contents: &SegmentContents,
    is_last: bool,
    report: &mut RecoveryReport,
) -> Result<(), PersistError> {
    if contents.torn_bytes == 0 {
        return Ok(());
    }
    if !is_last {
        return Err(PersistError::Corrupt {
            path: path.to_owned(),
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
    Ok(())
}

/// Apply the records at or after `from`; returns the next LSN.
fn apply(
    engine: &Engine,
    texts: &Texts,
    path: &Path,
    entries: Vec<LogEntry>,
    from: u64,
    mut next: u64,
    report: &mut RecoveryReport,
) -> Result<u64, PersistError> {
    for entry in entries {
        if entry.lsn < from {
            continue;
        }
        match entry.op {
            WalOp::Upsert(rec, text) => {
                restore_record(engine, texts, path, entry.offset, rec, text)?
            }
            WalOp::Delete(id) => {
                engine
                    .remove_journaled(&id, &NoJournal)
                    .expect("no journal, no journal error");
            }
        }
        report.replayed_records += 1;
        next = entry.lsn + 1;
    }
    Ok(next)
}

/// Apply one logged upsert; a record that cannot be restored is damage at
/// its frame's offset.
fn restore_record(
    engine: &Engine,
    texts: &Texts,
    path: &Path,
    offset: u64,
    rec: StoredRecord,
    text: Option<Vec<u8>>,
) -> Result<(), PersistError> {
    let corrupt = |reason: String| PersistError::Corrupt {
        path: path.to_owned(),
        offset,
        reason,
    };
    let id = DocId::parse(&rec.id)
        .map_err(|e| corrupt(format!("record {:?} has an invalid id: {e}", rec.id)))?;
    let stamp = rec.stamp();
    let mut doc = engine
        .prepared_from_parts(
            rec.signature.into(),
            rec.shingles,
            Some(rec.selection.into()),
        )
        .ok_or_else(|| {
            corrupt(format!(
                "record {:?} has an invalid signature or shingle set",
                rec.id
            ))
        })?;
    if let Some(text) = &text {
        // Checked here, so a damaged text is reported at its log record.
        texts::decompress(text).map_err(|e| corrupt(format!("record {:?}: {e}", rec.id)))?;
    }
    doc.set_journal_payload(text.map(Vec::into_boxed_slice));
    engine
        .insert_journaled(
            id,
            &doc,
            rec.metadata.map(String::into_boxed_str),
            WriteMode::Upsert,
            stamp,
            &TextTail(texts),
        )
        .map_err(|e| corrupt(format!("record {:?} cannot be restored: {e}", rec.id)))?;
    Ok(())
}

/// The journal of a replay: a logged text goes to the text tail again
/// (the log is not written twice).
struct TextTail<'a>(&'a Texts);

impl Journal for TextTail<'_> {
    fn append(&self, entry: JournalEntry<'_>) -> Result<u64, JournalError> {
        if let JournalEntry::Upsert(record, Some(text)) = entry {
            let loc = self.0.append(text).map_err(JournalError::new)?;
            record.set_text_locator(loc);
        }
        Ok(0)
    }
}
