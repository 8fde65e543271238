//! The write-ahead log: segment files `wal-<first lsn>.log` in the data dir.
//!
//! A segment is a header (magic, then a checksummed [`SegmentHeader`] with
//! the first LSN and the parameter fingerprint) followed by frames (see
//! [`format`](mod@super::format)), one per write: `lsn: u64 | op`.
//!
//! **Appending** happens under the engine's entry lock for the id and only
//! copies the frame into an in-memory buffer. **Committing** (before the
//! HTTP response) is a group commit: the first waiter takes the I/O lock,
//! writes everything buffered so far with one `write`, fsyncs once (mode
//! `always`), and publishes the durable LSN; waiters whose LSN is covered
//! return without touching the disk. A kill -9 after `write` loses nothing
//! (the data is in the page cache); fsync protects against power loss.
//!
//! **Failures.** A write that fails because the disk is full (ENOSPC,
//! EDQUOT) leaves the file exactly as long as the bytes `write` reported, so
//! the unwritten rest of the buffer is kept and the log *stalls*: the
//! waiting commits fail (503), new appends are refused before anything is
//! applied, and every later commit or append first retries the kept bytes.
//! Once the disk has room the retry succeeds and the log goes on, with no
//! restart: the records that were caught in the buffer become durable then
//! (their requests were answered 503, which promises neither outcome). A
//! crash while stalled leaves at most a torn final frame, which recovery
//! drops. Any other write error, and any fsync error, poisons the log: every
//! later write is refused until a restart re-reads the disk, because after a
//! failed fsync nobody can say what reached it.

use super::format::{
    self, Fingerprint, Frame, Layout, RecordRef, StoredRecord, StoredRecordV1, StoredRecordV2,
};
use super::fsops::{io_err, list_numbered, sync_dir};
use super::PersistError;
use crate::config::WalFsync;
use crate::engine::{Journal, JournalEntry, JournalError};
use bincode::{Decode, Encode};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Segments written now: format 4, an upsert carries its document's
/// compressed text, if the store keeps it, and its record its fingerprint
/// bitmap (see [`format`](mod@super::format)).
const MAGIC: &[u8; 8] = b"NDUPWAL4";
/// Segments of format 3 (records without fingerprints), still read.
const MAGIC_V3: &[u8; 8] = b"NDUPWAL3";
/// Segments of format 2 (records without a text), still read.
const MAGIC_V2: &[u8; 8] = b"NDUPWAL2";
/// Segments of format 1 (records without a stamp), still read.
const MAGIC_V1: &[u8; 8] = b"NDUPWAL1";

#[derive(Debug, Clone, PartialEq, Encode, Decode)]
pub struct SegmentHeader {
    pub start_lsn: u64,
    pub fingerprint: Fingerprint,
}

#[derive(Encode)]
enum OpRef<'a> {
    /// The record and its document's zstd-compressed text, if kept.
    Upsert(RecordRef<'a>, Option<&'a [u8]>),
    Delete(&'a str),
}

/// A logged write, as read back.
#[derive(Debug, Clone, PartialEq, Decode)]
pub enum WalOp {
    Upsert(StoredRecord, Option<Vec<u8>>),
    Delete(String),
}

/// A logged write of a format-2 segment.
#[derive(Decode)]
enum WalOpV2 {
    Upsert(StoredRecordV2),
    Delete(String),
}

impl From<WalOpV2> for WalOp {
    fn from(op: WalOpV2) -> Self {
        match op {
            WalOpV2::Upsert(r) => WalOp::Upsert(r.into(), None),
            WalOpV2::Delete(id) => WalOp::Delete(id),
        }
    }
}

/// A logged write of a format-3 segment.
#[derive(Decode)]
enum WalOpV3 {
    Upsert(StoredRecordV2, Option<Vec<u8>>),
    Delete(String),
}

impl From<WalOpV3> for WalOp {
    fn from(op: WalOpV3) -> Self {
        match op {
            WalOpV3::Upsert(r, text) => WalOp::Upsert(r.into(), text),
            WalOpV3::Delete(id) => WalOp::Delete(id),
        }
    }
}

/// A logged write of a format-1 segment.
#[derive(Decode)]
enum WalOpV1 {
    Upsert(StoredRecordV1),
    Delete(String),
}

impl WalOpV1 {
    fn upgrade(self, created_ms: u64) -> WalOp {
        match self {
            WalOpV1::Upsert(r) => WalOp::Upsert(r.upgrade(created_ms), None),
            WalOpV1::Delete(id) => WalOp::Delete(id),
        }
    }
}

pub fn segment_name(start_lsn: u64) -> String {
    format!("wal-{start_lsn:020}.log")
}

/// `(start_lsn, path)` of every segment in `dir`, oldest first.
pub fn list_segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, PersistError> {
    list_numbered(dir, "wal-", ".log")
}

fn encode_header(h: &SegmentHeader) -> Vec<u8> {
    let body = bincode::encode_to_vec(h, format::config()).expect("encoding to a Vec cannot fail");
    let mut out = Vec::with_capacity(MAGIC.len() + 8 + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    out
}

/// One record of a segment, where it was read.
#[derive(Debug)]
pub struct LogEntry {
    /// Byte offset of the record's frame in the segment file.
    pub offset: u64,
    pub lsn: u64,
    pub op: WalOp,
}

/// The contents of one segment.
#[derive(Debug)]
pub struct SegmentContents {
    pub header: SegmentHeader,
    pub entries: Vec<LogEntry>,
    /// Length of the valid prefix (header + complete frames).
    pub valid_len: u64,
    /// Bytes after `valid_len` that form an incomplete final frame.
    pub torn_bytes: u64,
}

/// Read and check a whole segment. An incomplete final frame is reported
/// in `torn_bytes` (the caller decides if that is acceptable); anything
/// else that is wrong is an error naming the file and offset.
pub fn read_segment(path: &Path) -> Result<SegmentContents, PersistError> {
    let data = fs::read(path).map_err(io_err(path))?;
    let corrupt = |offset: usize, reason: String| PersistError::Corrupt {
        path: path.to_owned(),
        offset: offset as u64,
        reason,
    };
    let incomplete = || PersistError::IncompleteHeader {
        path: path.to_owned(),
    };
    let magic_len = data.len().min(MAGIC.len());
    let starts = |magic: &[u8; 8]| data[..magic_len] == magic[..magic_len];
    // `v2`: a format 1 or 2 segment, whose upserts carry no text.
    let (layout, v2) = if starts(MAGIC) {
        (Layout::V4 { text_file: None }, false)
    } else if starts(MAGIC_V3) {
        (Layout::V3 { text_file: None }, false)
    } else if starts(MAGIC_V2) {
        (Layout::V2, true)
    } else if starts(MAGIC_V1) {
        // Format 1 records get the segment's last write time as their
        // creation time: an upper bound of when each was written.
        let modified = fs::metadata(path)
            .and_then(|m| m.modified())
            .map_err(io_err(path))?;
        let created_ms = modified
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        (Layout::V1 { created_ms }, true)
    } else {
        return Err(corrupt(0, "not a neardup log segment (bad magic)".into()));
    };
    if data.len() < 12 {
        return Err(incomplete());
    }
    let hlen = u32::from_le_bytes(data[8..12].try_into().expect("4 bytes")) as usize;
    if hlen > 1 << 20 {
        return Err(corrupt(8, "segment header length is implausible".into()));
    }
    let hend = 12 + hlen;
    if data.len() < hend + 4 {
        return Err(incomplete());
    }
    let hbytes = &data[12..hend];
    let hcrc = &data[hend..hend + 4];
    if crc32c::crc32c(hbytes).to_le_bytes() != hcrc {
        return Err(corrupt(12, "segment header checksum mismatch".into()));
    }
    let (header, _): (SegmentHeader, usize) = bincode::decode_from_slice(hbytes, format::config())
        .map_err(|e| corrupt(12, format!("unreadable segment header: {e}")))?;
    let mut pos = hend + 4;
    let mut entries = Vec::new();
    let mut expected = header.start_lsn;
    let torn_bytes;
    loop {
        if pos == data.len() {
            torn_bytes = 0;
            break;
        }
        match format::read_frame(&data[pos..]) {
            Frame::Ok(payload, n) => {
                let unreadable = |e: bincode::error::DecodeError| {
                    corrupt(pos, format!("unreadable log record: {e}"))
                };
                let (lsn, op) = match layout {
                    Layout::V2 if v2 => {
                        let ((lsn, op), _) = bincode::decode_from_slice::<(u64, WalOpV2), _>(
                            payload,
                            format::config(),
                        )
                        .map_err(unreadable)?;
                        (lsn, op.into())
                    }
                    Layout::V2 | Layout::V3 { .. } => {
                        let ((lsn, op), _) = bincode::decode_from_slice::<(u64, WalOpV3), _>(
                            payload,
                            format::config(),
                        )
                        .map_err(unreadable)?;
                        (lsn, op.into())
                    }
                    Layout::V4 { .. } => {
                        bincode::decode_from_slice::<(u64, WalOp), _>(payload, format::config())
                            .map_err(unreadable)?
                            .0
                    }
                    Layout::V1 { created_ms } => {
                        let ((lsn, op), _) = bincode::decode_from_slice::<(u64, WalOpV1), _>(
                            payload,
                            format::config(),
                        )
                        .map_err(unreadable)?;
                        (lsn, op.upgrade(created_ms))
                    }
                };
                if lsn != expected {
                    return Err(corrupt(
                        pos,
                        format!("log sequence jumps from {expected} to {lsn}"),
                    ));
                }
                expected += 1;
                entries.push(LogEntry {
                    offset: pos as u64,
                    lsn,
                    op,
                });
                pos += n;
            }
            Frame::Incomplete => {
                torn_bytes = (data.len() - pos) as u64;
                break;
            }
            Frame::Corrupt(reason) => return Err(corrupt(pos, reason.into())),
        }
    }
    Ok(SegmentContents {
        header,
        entries,
        valid_len: pos as u64,
        torn_bytes,
    })
}

/// Counters for `/stats` and `/metrics`.
#[derive(Debug, Default)]
pub struct WalCounters {
    pub appends: AtomicU64,
    pub append_nanos: AtomicU64,
    pub commits: AtomicU64,
    pub fsyncs: AtomicU64,
    pub fsync_nanos: AtomicU64,
    pub bytes_written: AtomicU64,
}

struct Pending {
    buf: Vec<u8>,
    next_lsn: u64,
}

struct Segment {
    file: File,
    path: PathBuf,
    start_lsn: u64,
    bytes: u64,
    /// Written since the last fsync (interval mode).
    dirty: bool,
    /// Frames taken from `pending` whose write failed part way (disk
    /// full): written before anything newer; `written` does not advance
    /// until they are. Empty between commits, its capacity kept (up to
    /// [`RETAINED_BUFFER`]) to become the next pending buffer.
    unwritten: Vec<u8>,
}

/// Largest buffer capacity the log keeps between commits. Two buffers
/// take turns (one collects appends while the other is written), so a
/// busy log reuses warm memory instead of growing a fresh buffer, page
/// fault by page fault, for every commit; an idle one holds at most two
/// of these.
const RETAINED_BUFFER: usize = 4 << 20;

pub struct Wal {
    dir: PathBuf,
    mode: WalFsync,
    fingerprint: Fingerprint,
    /// Frames not yet written; held only to copy a frame in or swap it out.
    pending: Mutex<Pending>,
    /// The open segment; holding it is the right to write, fsync or rotate.
    io: Mutex<Segment>,
    /// Every LSN below this has been written to the file (page cache).
    written: AtomicU64,
    /// Every LSN below this has been fsynced.
    synced: AtomicU64,
    poisoned: AtomicBool,
    /// A write failed for lack of space; appends are refused until a retry
    /// of the unwritten bytes succeeds (see the module docs).
    stalled: AtomicBool,
    /// Bytes in segments before the open one.
    older_bytes: AtomicU64,
    pub counters: WalCounters,
}

impl Wal {
    /// Start a fresh segment at `next_lsn` (recovery has read everything before it).
    pub fn open(
        dir: &Path,
        next_lsn: u64,
        mode: WalFsync,
        fingerprint: Fingerprint,
        older_bytes: u64,
    ) -> Result<Self, PersistError> {
        let segment = create_segment(dir, next_lsn, &fingerprint)?;
        Ok(Self {
            dir: dir.to_owned(),
            mode,
            fingerprint,
            pending: Mutex::new(Pending {
                // Grows with the first appends: an idle collection holds none.
                buf: Vec::new(),
                next_lsn,
            }),
            io: Mutex::new(segment),
            written: AtomicU64::new(next_lsn),
            synced: AtomicU64::new(next_lsn),
            poisoned: AtomicBool::new(false),
            stalled: AtomicBool::new(false),
            older_bytes: AtomicU64::new(older_bytes),
            counters: WalCounters::default(),
        })
    }

    pub fn mode(&self) -> WalFsync {
        self.mode
    }

    /// False while the log is out of space (it resumes with room) or after
    /// a failed fsync (until a restart).
    pub fn is_writable(&self) -> bool {
        !self.poisoned.load(Ordering::Acquire) && !self.stalled.load(Ordering::Acquire)
    }

    /// The LSN the next append gets.
    pub fn next_lsn(&self) -> u64 {
        self.pending.lock().expect("wal lock").next_lsn
    }

    /// Total bytes in all live segments.
    pub fn bytes(&self) -> u64 {
        self.older_bytes.load(Ordering::Relaxed) + self.io.lock().expect("wal lock").bytes
    }

    fn poison<E: std::fmt::Display>(&self, path: &Path, e: E) -> PersistError {
        self.poisoned.store(true, Ordering::Release);
        tracing::error!(path = %path.display(), error = %e, "write-ahead log failed; refusing writes until restart");
        PersistError::Io {
            path: path.to_owned(),
            source: std::io::Error::other(e.to_string()),
        }
    }

    /// The watermark a commit waits for: fsynced in `always` mode, written
    /// (safe from a process crash) otherwise.
    fn acknowledged(&self) -> &AtomicU64 {
        match self.mode {
            WalFsync::Always => &self.synced,
            WalFsync::Interval | WalFsync::Never => &self.written,
        }
    }

    /// Make every append up to and including `lsn` durable (per the mode).
    pub fn commit(&self, lsn: u64) -> Result<(), PersistError> {
        let mark = self.acknowledged();
        if mark.load(Ordering::Acquire) > lsn {
            return Ok(());
        }
        let mut seg = self.io.lock().expect("wal lock");
        if mark.load(Ordering::Acquire) > lsn {
            return Ok(()); // another committer covered us while we waited
        }
        if self.poisoned.load(Ordering::Acquire) {
            return Err(PersistError::Poisoned);
        }
        // Everything appended while the previous holder was in fsync goes
        // out now, with one write and one fsync: the group commit.
        self.flush_pending(&mut seg)?;
        if self.mode == WalFsync::Always {
            self.fsync(&mut seg)?;
        }
        Ok(())
    }

    /// Write the buffered frames (after any left unwritten by a failed
    /// write) to the open segment; returns the new `written` mark. Caller
    /// holds `io`.
    fn flush_pending(&self, seg: &mut Segment) -> Result<u64, PersistError> {
        // The emptied buffer of the last write collects the next appends.
        let spare = if seg.unwritten.is_empty() {
            std::mem::take(&mut seg.unwritten)
        } else {
            Vec::new()
        };
        let (buf, upto) = {
            let mut p = self.pending.lock().expect("wal lock");
            (std::mem::replace(&mut p.buf, spare), p.next_lsn)
        };
        if seg.unwritten.is_empty() {
            seg.unwritten = buf;
        } else {
            seg.unwritten.extend_from_slice(&buf);
        }
        let mut done = 0;
        while done < seg.unwritten.len() {
            match seg.file.write(&seg.unwritten[done..]) {
                Ok(0) => {
                    let e = std::io::Error::from(std::io::ErrorKind::WriteZero);
                    return Err(self.poison(&seg.path, e));
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if is_out_of_space(&e) => {
                    // The file holds exactly the `done` bytes written: keep
                    // the rest for the next try.
                    self.account_written(seg, done);
                    seg.unwritten.drain(..done);
                    self.stalled.store(true, Ordering::Release);
                    tracing::error!(path = %seg.path.display(), error = %e, "write-ahead log is out of space; writes are refused until there is room");
                    return Err(PersistError::Io {
                        path: seg.path.clone(),
                        source: e,
                    });
                }
                Err(e) => return Err(self.poison(&seg.path, e)),
            }
        }
        self.account_written(seg, done);
        seg.unwritten.clear();
        if seg.unwritten.capacity() > RETAINED_BUFFER {
            seg.unwritten = Vec::new();
        }
        if self.stalled.swap(false, Ordering::AcqRel) {
            tracing::info!(path = %seg.path.display(), "write-ahead log has room again; writes resume");
        }
        self.counters.commits.fetch_add(1, Ordering::Relaxed);
        self.written.store(upto, Ordering::Release);
        Ok(upto)
    }

    fn account_written(&self, seg: &mut Segment, bytes: usize) {
        if bytes == 0 {
            return;
        }
        seg.bytes += bytes as u64;
        seg.dirty = true;
        self.counters
            .bytes_written
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// While stalled: retry the unwritten bytes now (never waiting for
    /// another thread's I/O); Ok once the log is writable again.
    fn retry_stalled(&self) -> Result<(), PersistError> {
        let Ok(mut seg) = self.io.try_lock() else {
            return Err(PersistError::Stalled);
        };
        self.flush_pending(&mut seg).map(|_| ())
    }

    /// fsync what has been written; advances `synced`. Caller holds `io`.
    fn fsync(&self, seg: &mut Segment) -> Result<(), PersistError> {
        let upto = self.written.load(Ordering::Acquire);
        self.sync_segment(seg)?;
        self.synced.store(upto, Ordering::Release);
        Ok(())
    }

    /// fsync one segment if anything was written to it since its last fsync.
    fn sync_segment(&self, seg: &mut Segment) -> Result<(), PersistError> {
        if !seg.dirty {
            return Ok(());
        }
        let start = Instant::now();
        seg.file
            .sync_data()
            .map_err(|e| self.poison(&seg.path, e))?;
        seg.dirty = false;
        self.counters.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.counters
            .fsync_nanos
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Write pending frames without fsyncing: the state another committer
    /// leaves while its fsync is still running.
    #[cfg(test)]
    pub(crate) fn write_without_fsync(&self) {
        let mut seg = self.io.lock().expect("wal lock");
        self.flush_pending(&mut seg).unwrap();
    }

    /// `interval` mode: fsync whatever was written since the last call.
    pub fn sync_now(&self) -> Result<(), PersistError> {
        let mut seg = self.io.lock().expect("wal lock");
        self.flush_pending(&mut seg)?;
        self.fsync(&mut seg)
    }

    /// Close the open segment (flushed and fsynced) and start a new one.
    /// Returns the boundary: every LSN below it is in the closed segments.
    ///
    /// Committers wait only for the flush and the new segment's creation.
    /// In `always` mode the closed segment's unsynced tail (what this flush
    /// wrote) is fsynced under the lock, because acknowledgements rest on
    /// `synced` and a later fsync of the new segment must not claim it. In
    /// the other modes acknowledgements do not depend on fsync, so the
    /// closed segment, which may hold every write since the last snapshot,
    /// is fsynced after the lock is released.
    pub fn rotate(&self) -> Result<u64, PersistError> {
        let (mut closed, boundary) = {
            let mut seg = self.io.lock().expect("wal lock");
            if self.poisoned.load(Ordering::Acquire) {
                return Err(PersistError::Poisoned);
            }
            let boundary = self.flush_pending(&mut seg)?;
            if self.mode == WalFsync::Always {
                self.fsync(&mut seg)?;
            }
            if boundary == seg.start_lsn {
                return Ok(boundary); // nothing in this segment yet: keep it
            }
            let new = create_segment(&self.dir, boundary, &self.fingerprint)?;
            self.older_bytes.fetch_add(seg.bytes, Ordering::Relaxed);
            (std::mem::replace(&mut *seg, new), boundary)
        };
        self.sync_segment(&mut closed)?;
        Ok(boundary)
    }

    /// Delete closed segments holding only LSNs below `lsn`.
    pub fn prune_before(&self, lsn: u64) -> Result<(), PersistError> {
        let open_start = self.io.lock().expect("wal lock").start_lsn;
        let segments = list_segments(&self.dir)?;
        for (i, (start, path)) in segments.iter().enumerate() {
            let end = segments.get(i + 1).map_or(open_start, |s| s.0);
            if *start >= open_start || end > lsn {
                continue;
            }
            let size = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            fs::remove_file(path).map_err(io_err(path))?;
            self.older_bytes.fetch_sub(
                size.min(self.older_bytes.load(Ordering::Relaxed)),
                Ordering::Relaxed,
            );
            tracing::debug!(path = %path.display(), "removed log segment covered by a snapshot");
        }
        sync_dir(&self.dir)
    }
}

/// The disk (or the user's quota) is full: a retry may succeed later.
pub(crate) fn is_out_of_space(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

impl Journal for Wal {
    fn append(&self, entry: JournalEntry<'_>) -> Result<u64, JournalError> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(JournalError::new(PersistError::Poisoned));
        }
        if self.stalled.load(Ordering::Acquire) {
            self.retry_stalled().map_err(JournalError::new)?;
        }
        let start = Instant::now();
        let op = match entry {
            JournalEntry::Upsert(r, text) => OpRef::Upsert(RecordRef::from(r), text),
            JournalEntry::Delete(id) => OpRef::Delete(id),
        };
        let lsn = {
            let mut p = self.pending.lock().expect("wal lock");
            let lsn = p.next_lsn;
            format::encode_frame(&mut p.buf, &(lsn, &op));
            p.next_lsn += 1;
            lsn
        };
        self.counters.appends.fetch_add(1, Ordering::Relaxed);
        self.counters
            .append_nanos
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(lsn)
    }
}

fn create_segment(
    dir: &Path,
    start_lsn: u64,
    fingerprint: &Fingerprint,
) -> Result<Segment, PersistError> {
    let path = dir.join(segment_name(start_lsn));
    let header = encode_header(&SegmentHeader {
        start_lsn,
        fingerprint: fingerprint.clone(),
    });
    let created = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)
        .and_then(|mut file| {
            file.write_all(&header)?;
            file.sync_all()?;
            Ok(file)
        });
    let file = match created {
        Ok(file) => file,
        Err(e) => {
            // A half-written segment header (e.g. the disk is full) would
            // stop the next start: remove it. The open segment is unchanged.
            let _ = fs::remove_file(&path);
            return Err(io_err(&path)(e));
        }
    };
    sync_dir(dir)?;
    Ok(Segment {
        file,
        path,
        start_lsn,
        bytes: header.len() as u64,
        dirty: false,
        unwritten: Vec::new(),
    })
}
