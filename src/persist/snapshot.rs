//! Snapshot files: `snapshot-<seq>.bin`, a full copy of the index.
//!
//! Layout: magic `NDUPSNP1` | u32 header length | [`SnapshotHeader`] |
//! crc32c(header) | one frame per document (see [`format`](mod@super::format)) |
//! trailer: magic `NDUPEND1` | u64 documents | crc32c of every frame byte.
//!
//! Each frame has its own checksum, so a damaged file is reported with the
//! offset of the first bad record; the trailer's body checksum and count
//! make a file that lost records detectable too. Files are written to
//! `*.tmp`, fsynced, renamed and the directory fsynced, so a crash leaves
//! the old snapshot or the new one, never a torn one.

use super::format::{self, Fingerprint, Frame, RecordRef, StoredRecord, FRAME_HEADER};
use super::fsops::{commit_rename, io_err, list_numbered};
use super::PersistError;
use crate::engine::Record;
use bincode::{Decode, Encode};
use std::fs::{self, File};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MAGIC: &[u8; 8] = b"NDUPSNP1";
const END: &[u8; 8] = b"NDUPEND1";
/// The version written; every version since the first is read (format 1
/// records have no stamp, format 2 no text offset: see [`format`](mod@super::format)).
pub const FORMAT_VERSION: u32 = 4;

#[derive(Debug, Clone, PartialEq, Encode, Decode)]
pub struct SnapshotHeader {
    pub format_version: u32,
    pub seq: u64,
    /// Every log record below this LSN is reflected in the snapshot.
    pub wal_lsn: u64,
    pub documents: u64,
    pub created_unix_ms: u64,
    pub fingerprint: Fingerprint,
    /// Banding inputs at write time (informational: tables are rebuilt on load).
    pub threshold: f64,
    pub bands: u32,
    pub rows: u32,
}

pub fn snapshot_name(seq: u64) -> String {
    format!("snapshot-{seq:06}.bin")
}

/// `(seq, path)` of every finished snapshot in `dir`, oldest first.
pub fn list_snapshots(dir: &Path) -> Result<Vec<(u64, PathBuf)>, PersistError> {
    list_numbered(dir, "snapshot-", ".bin")
}

/// Remove `*.tmp` files left by a crash mid-write.
pub fn remove_temporaries(dir: &Path) -> Result<usize, PersistError> {
    let mut n = 0;
    for entry in fs::read_dir(dir).map_err(io_err(dir))? {
        let path = entry.map_err(io_err(dir))?.path();
        if path.extension().is_some_and(|e| e == "tmp") {
            fs::remove_file(&path).map_err(io_err(&path))?;
            tracing::warn!(path = %path.display(), "removed an unfinished snapshot left by a crash");
            n += 1;
        }
    }
    Ok(n)
}

/// Write a snapshot of `records` atomically, with `texts[i]` the offset of
/// record i's text in the snapshot's text segment (0: none; an empty
/// slice: none at all); returns its path and size.
pub fn write(
    dir: &Path,
    header: &SnapshotHeader,
    records: &[Arc<Record>],
    texts: &[u64],
) -> Result<(PathBuf, u64), PersistError> {
    let path = dir.join(snapshot_name(header.seq));
    let tmp = path.with_extension("bin.tmp");
    match write_tmp(&tmp, header, records, texts) {
        Ok(bytes) => {
            commit_rename(&tmp, &path)?;
            Ok((path, bytes))
        }
        Err(e) => {
            // A partial temporary (e.g. the disk filled up) must not keep
            // its space: the log needs it.
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Write and fsync the whole snapshot to `tmp`; returns its length.
fn write_tmp(
    tmp: &Path,
    header: &SnapshotHeader,
    records: &[Arc<Record>],
    texts: &[u64],
) -> Result<u64, PersistError> {
    let file = File::create(tmp).map_err(io_err(tmp))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let hbytes =
        bincode::encode_to_vec(header, format::config()).expect("encoding to a Vec cannot fail");
    let mut head = Vec::with_capacity(16 + hbytes.len());
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&(hbytes.len() as u32).to_le_bytes());
    head.extend_from_slice(&hbytes);
    head.extend_from_slice(&crc32c::crc32c(&hbytes).to_le_bytes());
    w.write_all(&head).map_err(io_err(tmp))?;
    let mut body_crc = 0u32;
    let mut bytes = head.len() as u64;
    let mut frame = Vec::with_capacity(4096);
    let mut payload = Vec::with_capacity(4096);
    for (i, r) in records.iter().enumerate() {
        payload.clear();
        bincode::encode_into_std_write(RecordRef::from(&**r), &mut payload, format::config())
            .expect("encoding to a Vec cannot fail");
        let text = texts.get(i).copied().unwrap_or(0);
        payload.extend_from_slice(&text.to_le_bytes());
        frame.clear();
        format::push_frame(&mut frame, &payload);
        body_crc = crc32c::crc32c_append(body_crc, &frame);
        w.write_all(&frame).map_err(io_err(tmp))?;
        bytes += frame.len() as u64;
    }
    let mut trailer = Vec::with_capacity(20);
    trailer.extend_from_slice(END);
    trailer.extend_from_slice(&(records.len() as u64).to_le_bytes());
    trailer.extend_from_slice(&body_crc.to_le_bytes());
    w.write_all(&trailer).map_err(io_err(tmp))?;
    bytes += trailer.len() as u64;
    let file = w.into_inner().map_err(|e| io_err(tmp)(e.into_error()))?;
    file.sync_all().map_err(io_err(tmp))?;
    Ok(bytes)
}

/// Read only the header (cheap: used to plan recovery).
pub fn read_header(path: &Path) -> Result<SnapshotHeader, PersistError> {
    let file = File::open(path).map_err(io_err(path))?;
    let mut r = BufReader::new(file);
    read_header_from(path, &mut r).map(|(h, _)| h)
}

fn corrupt(path: &Path, offset: u64, reason: impl Into<String>) -> PersistError {
    PersistError::Corrupt {
        path: path.to_owned(),
        offset,
        reason: reason.into(),
    }
}

fn read_header_from(path: &Path, r: &mut impl Read) -> Result<(SnapshotHeader, u64), PersistError> {
    let mut fixed = [0u8; 12];
    r.read_exact(&mut fixed)
        .map_err(|_| corrupt(path, 0, "file too short for a snapshot header"))?;
    if &fixed[..8] != MAGIC {
        return Err(corrupt(path, 0, "not a neardup snapshot (bad magic)"));
    }
    let hlen = u32::from_le_bytes(fixed[8..12].try_into().expect("4 bytes")) as usize;
    if hlen > 1 << 20 {
        return Err(corrupt(path, 8, "snapshot header length is implausible"));
    }
    let mut hbytes = vec![0u8; hlen + 4];
    r.read_exact(&mut hbytes)
        .map_err(|_| corrupt(path, 12, "snapshot header is truncated"))?;
    let (body, crc) = hbytes.split_at(hlen);
    if crc32c::crc32c(body).to_le_bytes() != crc {
        return Err(corrupt(path, 12, "snapshot header checksum mismatch"));
    }
    let (header, _): (SnapshotHeader, usize) =
        bincode::decode_from_slice(body, format::config())
            .map_err(|e| corrupt(path, 12, format!("unreadable snapshot header: {e}")))?;
    if !(1..=FORMAT_VERSION).contains(&header.format_version) {
        return Err(corrupt(
            path,
            12,
            format!(
                "snapshot format version {} is not supported (this build reads 1 to {FORMAT_VERSION})",
                header.format_version
            ),
        ));
    }
    Ok((header, 12 + hlen as u64 + 4))
}

impl SnapshotHeader {
    /// How this snapshot's records are laid out; `text_file` is the id its
    /// text segment was opened under (format 3), if it has one.
    pub fn layout(&self, text_file: Option<u32>) -> format::Layout {
        match self.format_version {
            1 => format::Layout::V1 {
                created_ms: self.created_unix_ms,
            },
            2 => format::Layout::V2,
            3 => format::Layout::V3 { text_file },
            _ => format::Layout::V4 { text_file },
        }
    }
}

/// Stream every record of a snapshot to `sink` in chunks, verifying each
/// frame and the trailer. `sink` may have received records before an
/// error is returned: the caller must discard them then.
pub fn read(
    path: &Path,
    chunk: usize,
    sink: impl FnMut(Vec<StoredRecord>) -> Result<(), PersistError>,
) -> Result<SnapshotHeader, PersistError> {
    read_with(
        path,
        chunk,
        |payload, header| {
            let unreadable = |e: bincode::error::DecodeError| format!("unreadable record: {e}");
            match header.layout(None) {
                // Format 3 records are format 2 records and a text offset.
                format::Layout::V2 | format::Layout::V3 { .. } => {
                    bincode::decode_from_slice::<format::StoredRecordV2, _>(
                        payload,
                        format::config(),
                    )
                    .map(|(rec, _)| rec.into())
                    .map_err(unreadable)
                }
                format::Layout::V4 { .. } => bincode::decode_from_slice(payload, format::config())
                    .map(|(rec, _)| rec)
                    .map_err(unreadable),
                format::Layout::V1 { created_ms } => bincode::decode_from_slice::<
                    format::StoredRecordV1,
                    _,
                >(payload, format::config())
                .map(|(rec, _)| rec.upgrade(created_ms))
                .map_err(unreadable),
            }
        },
        sink,
    )
}

/// [`read`] with a caller-chosen decoder for each record's payload (the
/// restore path decodes straight into engine records). A decoder error is
/// reported as corruption at the record's offset.
pub fn read_with<T>(
    path: &Path,
    chunk: usize,
    decode: impl Fn(&[u8], &SnapshotHeader) -> Result<T, String>,
    mut sink: impl FnMut(Vec<T>) -> Result<(), PersistError>,
) -> Result<SnapshotHeader, PersistError> {
    let file = File::open(path).map_err(io_err(path))?;
    let mut r = BufReader::with_capacity(1 << 20, file);
    let (header, mut offset) = read_header_from(path, &mut r)?;
    let mut body_crc = 0u32;
    let mut batch = Vec::with_capacity(chunk);
    let mut frame = Vec::new();
    for _ in 0..header.documents {
        frame.resize(FRAME_HEADER, 0);
        r.read_exact(&mut frame)
            .map_err(|_| corrupt(path, offset, "snapshot ends before its last record"))?;
        let len = u32::from_le_bytes(frame[..4].try_into().expect("4 bytes")) as usize;
        if len > format::MAX_FRAME {
            return Err(corrupt(path, offset, "record length over the limit"));
        }
        frame.resize(FRAME_HEADER + len, 0);
        r.read_exact(&mut frame[FRAME_HEADER..])
            .map_err(|_| corrupt(path, offset, "snapshot ends inside a record"))?;
        let payload = match format::read_frame(&frame) {
            Frame::Ok(p, _) => p,
            Frame::Incomplete => return Err(corrupt(path, offset, "record is truncated")),
            Frame::Corrupt(reason) => return Err(corrupt(path, offset, reason)),
        };
        let rec = decode(payload, &header).map_err(|e| corrupt(path, offset, e))?;
        body_crc = crc32c::crc32c_append(body_crc, &frame);
        offset += frame.len() as u64;
        batch.push(rec);
        if batch.len() == chunk {
            sink(std::mem::replace(&mut batch, Vec::with_capacity(chunk)))?;
        }
    }
    let mut trailer = [0u8; 20];
    r.read_exact(&mut trailer)
        .map_err(|_| corrupt(path, offset, "snapshot trailer is missing"))?;
    let count = u64::from_le_bytes(trailer[8..16].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(trailer[16..20].try_into().expect("4 bytes"));
    if &trailer[..8] != END || count != header.documents {
        return Err(corrupt(
            path,
            offset,
            "snapshot trailer does not match its header",
        ));
    }
    if crc != body_crc {
        return Err(corrupt(path, offset, "snapshot body checksum mismatch"));
    }
    let mut rest = [0u8; 1];
    if r.read(&mut rest).map_err(io_err(path))? != 0 {
        return Err(corrupt(
            path,
            offset + 20,
            "unexpected bytes after the snapshot trailer",
        ));
    }
    if !batch.is_empty() {
        sink(batch)?;
    }
    Ok(header)
}
