//! Stored texts: the documents' texts as posted, zstd-compressed, in
//! append-only segment files beside the snapshots and the log (only for a
//! collection with `store_text`).
//!
//! ```text
//!   texts-tail-<n>.seg   written as documents arrive (page cache only); rebuilt from the log at start
//!   texts-<seq>.seg      written by snapshot <seq>: every live text, fsynced before the snapshot
//! ```
//!
//! **Where a text lives.** A segment is a 16-byte header (magic
//! `NDUPTXT1`, then the segment's number as u64 LE) followed by frames
//! (see [`format`](mod@super::format): length, payload checksum, header
//! checksum), one per text, each the zstd frame of one text. A document's
//! [`Record`] holds an 8-byte *locator*: the segment's in-memory id (high
//! 24 bits) and the frame's byte offset (low 40 bits); 0 means no text (no
//! frame starts at offset 0). That locator is the only RAM a stored text
//! costs.
//!
//! **Durability.** A text travels in its write's log record (log format 3),
//! so it is exactly as durable as the write: acknowledged only once the
//! log says so. The tail segment is a cache of the log: written with the
//! log append (under the id's entry lock, so its order is the log's), never
//! fsynced, removed at every start and rebuilt by replaying the log. A
//! snapshot writes a compacted segment of the texts of the documents it
//! holds (deleted, replaced and expired ones are left out), fsyncs it
//! *before* the snapshot is renamed into place, and records each
//! document's offset in it, so a snapshot and its segment always go
//! together; the segment is removed with its snapshot.
//!
//! **Compaction.** At a snapshot the tail is switched to a fresh file
//! first; every record whose text is in an older file was published before
//! that switch (texts are appended under the id's entry lock, the snapshot
//! scans `ids` after it), so it is in the snapshot's record list, its text
//! is copied (the compressed frame as is, checksum verified) and its
//! locator moved to the new segment, and the older tails can go. A reader
//! that loaded a locator just before it moved still reads the old file: the
//! open handle outlives the unlink.
//!
//! **Damage.** Every frame is checksummed. A damaged frame is reported as
//! [`PersistError::Corrupt`] with the file and offset when it is read (a
//! `GET ?include=text`, an explain, a reindex) and when a snapshot copies
//! it; a compacted segment is checked whole when a start loads its
//! snapshot.

use super::format::{self, Frame, FRAME_HEADER};
use super::fsops::{self, io_err, list_numbered};
use super::PersistError;
use crate::engine::Record;
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

const MAGIC: &[u8; 8] = b"NDUPTXT1";
const HEADER: u64 = 16;
const OFFSET_BITS: u32 = 40;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
/// Largest segment id a locator can hold (24 bits).
const MAX_FILE_ID: u32 = (1 << 24) - 1;
/// zstd level: 3 is the library's default, ~2.5x on prose at hundreds of MB/s.
pub const ZSTD_LEVEL: i32 = 3;

/// A locator: segment id and frame offset in one u64 (0: no text).
pub fn locator(file: u32, offset: u64) -> u64 {
    debug_assert!((HEADER..=OFFSET_MASK).contains(&offset));
    (u64::from(file) << OFFSET_BITS) | offset
}

fn split(loc: u64) -> (u32, u64) {
    ((loc >> OFFSET_BITS) as u32, loc & OFFSET_MASK)
}

thread_local! {
    /// One compression and one decompression context per thread: making
    /// one costs more than compressing a typical text.
    static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { std::cell::RefCell::new(None) };
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Compress a text for the log and a segment: one zstd frame, which
/// records the text's length.
pub fn compress(text: &str) -> Vec<u8> {
    COMPRESSOR.with(|c| {
        let mut c = c.borrow_mut();
        let c = c.get_or_insert_with(|| {
            zstd::bulk::Compressor::new(ZSTD_LEVEL).expect("a zstd context")
        });
        c.compress(text.as_bytes())
            .expect("zstd compresses any input")
    })
}

/// The text of a compressed frame payload; `Err` names what is wrong.
pub fn decompress(payload: &[u8]) -> Result<String, String> {
    let unreadable = |e: std::io::Error| format!("unreadable text: {e}");
    let bytes = match zstd::zstd_safe::get_frame_content_size(payload) {
        Ok(Some(n)) if n <= format::MAX_FRAME as u64 => DECOMPRESSOR.with(|d| {
            let mut d = d.borrow_mut();
            let d = match d.as_mut() {
                Some(d) => d,
                None => d.insert(zstd::bulk::Decompressor::new().map_err(unreadable)?),
            };
            d.decompress(payload, n as usize).map_err(unreadable)
        })?,
        Ok(Some(n)) => return Err(format!("stored text claims {n} bytes")),
        // Not written by `compress`, which records the length: read it as a stream.
        _ => zstd::stream::decode_all(payload).map_err(unreadable)?,
    };
    String::from_utf8(bytes).map_err(|e| format!("stored text is not UTF-8: {e}"))
}

pub fn compacted_name(seq: u64) -> String {
    format!("texts-{seq:06}.seg")
}

fn tail_name(n: u64) -> String {
    format!("texts-tail-{n:06}.seg")
}

/// `(seq, path)` of every compacted segment in `dir`.
pub fn list_compacted(dir: &Path) -> Result<Vec<(u64, PathBuf)>, PersistError> {
    list_numbered(dir, "texts-", ".seg")
}

struct SegFile {
    path: PathBuf,
    file: File,
    /// Its snapshot's seq (compacted segments), for pruning.
    seq: Option<u64>,
    bytes: AtomicU64,
}

struct Tail {
    id: u32,
    seg: Arc<SegFile>,
    len: u64,
}

/// The stored texts of one store (see the module docs).
pub struct Texts {
    dir: PathBuf,
    files: RwLock<HashMap<u32, Arc<SegFile>>>,
    tail: Mutex<Option<Tail>>,
    /// Held (shared) by a write from the moment its text is in the tail
    /// until its record is published; [`Self::rotate_tail`] takes it
    /// exclusively, so every text in an older tail belongs to a record the
    /// snapshot's scan that follows sees ([`Self::pin`]).
    pins: RwLock<()>,
    next_id: AtomicU32,
    next_tail: AtomicU64,
}

impl std::fmt::Debug for Texts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Texts")
            .field("dir", &self.dir)
            .field("bytes", &self.bytes())
            .finish()
    }
}

fn header(n: u64) -> [u8; HEADER as usize] {
    let mut h = [0u8; HEADER as usize];
    h[..8].copy_from_slice(MAGIC);
    h[8..].copy_from_slice(&n.to_le_bytes());
    h
}

impl Texts {
    /// Open the texts of `dir`: tails left by the last run are removed (the
    /// log rebuilds them); compacted segments are opened when a snapshot
    /// that names them is loaded ([`Self::open_compacted`]).
    pub fn open(dir: &Path) -> Result<Self, PersistError> {
        let mut removed = false;
        for (_, path) in list_numbered(dir, "texts-tail-", ".seg")? {
            fs::remove_file(&path).map_err(io_err(&path))?;
            removed = true;
        }
        if removed {
            fsops::sync_dir(dir)?;
        }
        Ok(Self {
            dir: dir.to_owned(),
            files: RwLock::new(HashMap::new()),
            tail: Mutex::new(None),
            pins: RwLock::new(()),
            next_id: AtomicU32::new(1),
            next_tail: AtomicU64::new(1),
        })
    }

    fn alloc_id(&self) -> Result<u32, PersistError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if id > MAX_FILE_ID {
            return Err(PersistError::Unrecoverable(
                "text segment ids are exhausted; restart the server".into(),
            ));
        }
        Ok(id)
    }

    /// Bytes of every text segment on disk.
    pub fn bytes(&self) -> u64 {
        self.files
            .read()
            .expect("texts lock")
            .values()
            .map(|f| f.bytes.load(Ordering::Relaxed))
            .sum()
    }

    /// Open snapshot `seq`'s compacted segment, checking every frame (read
    /// in a stream: memory does not grow with the file); returns its id for
    /// the snapshot's locators.
    pub fn open_compacted(&self, seq: u64) -> Result<u32, PersistError> {
        use std::io::Read;
        let path = self.dir.join(compacted_name(seq));
        let file = File::open(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                PersistError::Unrecoverable(format!(
                    "{} is missing: snapshot {seq} keeps its documents' texts there",
                    path.display()
                ))
            } else {
                io_err(&path)(e)
            }
        })?;
        let len = file.metadata().map_err(io_err(&path))?.len();
        let corrupt = |offset: u64, reason: &str| PersistError::Corrupt {
            path: path.clone(),
            offset,
            reason: reason.into(),
        };
        let mut r = std::io::BufReader::with_capacity(1 << 20, &file);
        let mut head = [0u8; HEADER as usize];
        if r.read_exact(&mut head).is_err() || head != header(seq) {
            return Err(corrupt(
                0,
                "not the text segment of its snapshot (bad header)",
            ));
        }
        let mut pos = HEADER;
        let mut frame = Vec::new();
        while pos < len {
            frame.resize(FRAME_HEADER, 0);
            r.read_exact(&mut frame)
                .map_err(|_| corrupt(pos, "text segment ends inside a frame"))?;
            let n = u32::from_le_bytes(frame[..4].try_into().expect("4 bytes")) as usize;
            if crc32c::crc32c(&frame[..8]).to_le_bytes() != frame[8..12] {
                return Err(corrupt(pos, "frame header checksum mismatch"));
            }
            if n > format::MAX_FRAME {
                return Err(corrupt(pos, "frame length over the limit"));
            }
            frame.resize(FRAME_HEADER + n, 0);
            r.read_exact(&mut frame[FRAME_HEADER..])
                .map_err(|_| corrupt(pos, "text segment ends inside a frame"))?;
            match format::read_frame(&frame) {
                Frame::Ok(_, used) => pos += used as u64,
                Frame::Incomplete => return Err(corrupt(pos, "text frame is truncated")),
                Frame::Corrupt(reason) => return Err(corrupt(pos, reason)),
            }
        }
        drop(r);
        let id = self.alloc_id()?;
        self.files.write().expect("texts lock").insert(
            id,
            Arc::new(SegFile {
                path,
                file,
                seq: Some(seq),
                bytes: AtomicU64::new(len),
            }),
        );
        Ok(id)
    }

    /// Close the tail: the next text starts a new one. Returns the ids of
    /// every tail so far (removed by [`Self::adopt`] or [`Self::drop_tails`]).
    pub fn rotate_tail(&self) -> Result<Vec<u32>, PersistError> {
        // Every text appended before its record's lock is published first.
        let _published = self.pins.write().expect("texts pins lock");
        let mut tail = self.tail.lock().expect("texts tail lock");
        *tail = None;
        // Under the tail lock: no new tail can appear meanwhile.
        Ok(self
            .files
            .read()
            .expect("texts lock")
            .iter()
            .filter(|(_, f)| f.seq.is_none())
            .map(|(id, _)| *id)
            .collect())
    }

    fn new_tail(&self) -> Result<Tail, PersistError> {
        let n = self.next_tail.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(tail_name(n));
        let file = OpenOptions::new()
            .create_new(true)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io_err(&path))?;
        if let Err(e) = file.write_all_at(&header(n), 0) {
            let _ = fs::remove_file(&path);
            return Err(io_err(&path)(e));
        }
        let id = self.alloc_id()?;
        let seg = Arc::new(SegFile {
            path,
            file,
            seq: None,
            bytes: AtomicU64::new(HEADER),
        });
        self.files
            .write()
            .expect("texts lock")
            .insert(id, Arc::clone(&seg));
        Ok(Tail {
            id,
            seg,
            len: HEADER,
        })
    }

    /// Append many compressed texts to the tail in one write; their
    /// locators, in order. A batch's texts, before any id's lock is taken.
    pub fn append_many(&self, compressed: &[&[u8]]) -> Result<Vec<u64>, PersistError> {
        if compressed.is_empty() {
            return Ok(Vec::new());
        }
        let total: usize = compressed.iter().map(|c| FRAME_HEADER + c.len()).sum();
        let mut frames = Vec::with_capacity(total);
        let mut starts = Vec::with_capacity(compressed.len());
        for c in compressed {
            starts.push(frames.len() as u64);
            format::push_frame(&mut frames, c);
        }
        let mut guard = self.tail.lock().expect("texts tail lock");
        if guard.is_none() {
            *guard = Some(self.new_tail()?);
        }
        let tail = guard.as_mut().expect("a tail was just made");
        if tail.len + frames.len() as u64 > OFFSET_MASK {
            return Err(PersistError::Unrecoverable(
                "the text tail segment is full (1 TiB); take a snapshot".into(),
            ));
        }
        let offset = tail.len;
        tail.seg
            .file
            .write_all_at(&frames, offset)
            .map_err(io_err(&tail.seg.path))?;
        tail.len += frames.len() as u64;
        tail.seg.bytes.store(tail.len, Ordering::Relaxed);
        Ok(starts
            .into_iter()
            .map(|start| locator(tail.id, offset + start))
            .collect())
    }

    /// Append a compressed text to the tail; returns its locator.
    pub fn append(&self, compressed: &[u8]) -> Result<u64, PersistError> {
        Ok(self.append_many(&[compressed])?[0])
    }

    /// Hold off the next tail rotation (a snapshot's) until the guard is
    /// dropped: taken by a write before its text goes to the tail, dropped
    /// once its record is published, so the snapshot that rotates the tail
    /// sees the record and keeps its text. Writes share it; never take it
    /// twice on one thread.
    pub fn pin(&self) -> RwLockReadGuard<'_, ()> {
        self.pins.read().expect("texts pins lock")
    }

    fn file(&self, id: u32) -> Option<Arc<SegFile>> {
        self.files.read().expect("texts lock").get(&id).cloned()
    }

    /// The compressed frame payload at `loc`, checksums verified.
    fn read_raw(&self, record: &Record) -> Result<Option<Vec<u8>>, PersistError> {
        // A snapshot may move the locator (and remove the old file) between
        // the load and the lookup: then the reloaded locator is the new one.
        for _ in 0..3 {
            let loc = record.text_locator();
            if loc == 0 {
                return Ok(None);
            }
            let (id, offset) = split(loc);
            let Some(seg) = self.file(id) else { continue };
            return read_frame_at(&seg, offset).map(Some);
        }
        Err(PersistError::Unrecoverable(format!(
            "the text of {:?} moved while it was read; retry",
            record.id().as_str()
        )))
    }

    /// The text of `record`, if it has one stored.
    pub fn read(&self, record: &Record) -> Result<Option<String>, PersistError> {
        let Some(payload) = self.read_raw(record)? else {
            return Ok(None);
        };
        let (id, offset) = split(record.text_locator());
        decompress(&payload).map(Some).map_err(|reason| {
            let path = self.file(id).map(|f| f.path.clone()).unwrap_or_default();
            PersistError::Corrupt {
                path,
                offset,
                reason,
            }
        })
    }

    /// Write snapshot `seq`'s compacted segment: the texts of `keep`'s
    /// records (a `false` in `live` leaves a record's text out), fsynced.
    /// Returns the offset of each record's text (0: none) and the segment's
    /// size; nothing is registered until [`Self::adopt`].
    pub fn compact(
        &self,
        seq: u64,
        records: &[Arc<Record>],
        live: impl Fn(&Record) -> bool,
    ) -> Result<(Vec<u64>, u64), PersistError> {
        let path = self.dir.join(compacted_name(seq));
        let tmp = path.with_extension("seg.tmp");
        let result = (|| {
            let file = File::create(&tmp).map_err(io_err(&tmp))?;
            let mut w = BufWriter::with_capacity(1 << 20, file);
            w.write_all(&header(seq)).map_err(io_err(&tmp))?;
            let mut offset = HEADER;
            let mut offsets = Vec::with_capacity(records.len());
            let mut frame = Vec::new();
            for r in records {
                if !live(r) {
                    offsets.push(0);
                    continue;
                }
                let Some(payload) = self.read_raw(r)? else {
                    offsets.push(0);
                    continue;
                };
                frame.clear();
                format::push_frame(&mut frame, &payload);
                w.write_all(&frame).map_err(io_err(&tmp))?;
                offsets.push(offset);
                offset += frame.len() as u64;
            }
            let file = w.into_inner().map_err(|e| io_err(&tmp)(e.into_error()))?;
            file.sync_all().map_err(io_err(&tmp))?;
            Ok((offsets, offset))
        })();
        match result {
            Ok(done) => {
                fsops::commit_rename(&tmp, &path)?;
                Ok(done)
            }
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// The snapshot of `seq` is in place: register its segment, move the
    /// locators of `records` to it, and drop the tails in `old_tails`.
    pub fn adopt(
        &self,
        seq: u64,
        records: &[Arc<Record>],
        offsets: &[u64],
        bytes: u64,
        old_tails: &[u32],
    ) -> Result<(), PersistError> {
        let path = self.dir.join(compacted_name(seq));
        let file = File::open(&path).map_err(io_err(&path))?;
        let id = self.alloc_id()?;
        self.files.write().expect("texts lock").insert(
            id,
            Arc::new(SegFile {
                path,
                file,
                seq: Some(seq),
                bytes: AtomicU64::new(bytes),
            }),
        );
        for (r, &off) in records.iter().zip(offsets) {
            r.set_text_locator(if off == 0 { 0 } else { locator(id, off) });
        }
        self.drop_tails(old_tails);
        Ok(())
    }

    /// Remove tails no record points into any more.
    pub fn drop_tails(&self, old_tails: &[u32]) {
        let mut files = self.files.write().expect("texts lock");
        for old in old_tails {
            if let Some(seg) = files.remove(old) {
                if let Err(e) = fs::remove_file(&seg.path) {
                    tracing::warn!(path = %seg.path.display(), error = %e, "could not remove an old text tail; the next start will");
                }
            }
        }
    }

    /// Forget a snapshot that could not be written after its segment was.
    pub fn discard(&self, seq: u64) {
        let _ = fs::remove_file(self.dir.join(compacted_name(seq)));
    }

    /// Remove the compacted segments of snapshots older than `oldest_kept`.
    pub fn prune_before(&self, oldest_kept: u64) -> Result<(), PersistError> {
        let mut files = self.files.write().expect("texts lock");
        files.retain(|_, f| f.seq.is_none_or(|s| s >= oldest_kept));
        drop(files);
        for (seq, path) in list_compacted(&self.dir)? {
            if seq < oldest_kept {
                fs::remove_file(&path).map_err(io_err(&path))?;
            }
        }
        Ok(())
    }
}

/// Read and check the frame at `offset` of `seg`; returns its payload.
fn read_frame_at(seg: &SegFile, offset: u64) -> Result<Vec<u8>, PersistError> {
    let corrupt = |reason: &str| PersistError::Corrupt {
        path: seg.path.clone(),
        offset,
        reason: reason.into(),
    };
    let mut head = [0u8; FRAME_HEADER];
    seg.file
        .read_exact_at(&mut head, offset)
        .map_err(|_| corrupt("text segment ends before this frame"))?;
    let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
    if crc32c::crc32c(&head[..8]).to_le_bytes() != head[8..12] {
        return Err(corrupt("frame header checksum mismatch"));
    }
    if len > format::MAX_FRAME {
        return Err(corrupt("frame length over the limit"));
    }
    let mut buf = vec![0u8; FRAME_HEADER + len];
    buf[..FRAME_HEADER].copy_from_slice(&head);
    seg.file
        .read_exact_at(&mut buf[FRAME_HEADER..], offset + FRAME_HEADER as u64)
        .map_err(|_| corrupt("text segment ends inside this frame"))?;
    match format::read_frame(&buf) {
        Frame::Ok(payload, _) => Ok(payload.to_vec()),
        Frame::Incomplete => Err(corrupt("text frame is truncated")),
        Frame::Corrupt(reason) => Err(corrupt(reason)),
    }
}
