//! On-disk encodings shared by the log and the snapshots.
//!
//! **Fingerprint.** Every file records the parameters a stored signature
//! depends on (hash family, num_perm, seed, shingle and normalization
//! recipe). Loading data made under different parameters would mix
//! incompatible signatures and give silently wrong answers, so a mismatch
//! refuses to start. The threshold and (b, r) are recorded for information
//! only: the LSH tables are rebuilt from stored signatures on every load.
//!
//! **Frames.** Log records and snapshot records are framed as
//! `len: u32 LE | crc32c(payload): u32 LE | crc32c(first 8 bytes): u32 LE | payload`.
//! The header checksum means a flipped bit in a length is detected as
//! corruption rather than mistaken for a short (torn) final record.
//!
//! Integers are fixed-width little-endian (bincode 2, fixed-int config):
//! signatures and shingle hashes are uniformly random, so varints would
//! only make them larger and slower.
//!
//! **Record layouts.** Format 2 (snapshot format version 2, log segments
//! `NDUPWAL2`) ends a record with its stamp: `created_ms: u64`,
//! `expires_ms: u64` (0: no expiry of its own). Format 1 files, written
//! before documents had a creation time, are still read; their records get
//! the file's own time as their creation time (the snapshot's creation
//! time, or the log segment's modification time), an upper bound of when
//! they were written.
//!
//! Format 3 adds stored texts (see [`texts`](super::texts)): a log segment
//! `NDUPWAL3` record's upsert is followed by `Option<bytes>`, the
//! document's zstd-compressed text when its collection stores texts; a
//! snapshot (format version 3) record ends with `text: u64`, the offset of
//! the document's text in the snapshot's `texts-<seq>.seg` (0: none). New
//! files of format 3 are read as documents without passage fingerprints.
//!
//! Format 4 (log segments `NDUPWAL4`, snapshot format version 4) ends a
//! record's stamp with `selection: Vec<u32>`, the bitmap over its shingles
//! of its passage fingerprints ([`crate::text::winnow`]); a snapshot record
//! then has its text offset, as in format 3. New files are always format 4;
//! records of formats 1 to 3 get the sampled stand-in
//! ([`crate::text::winnow::sampled_bitmap`]) until they are written again.
//! Formats 1 and 2 are read as documents without a stored text.

use crate::engine::{DocId, EngineParams, Record, Stamp, HASH_FAMILY};
use bincode::{Decode, Encode};

pub const FRAME_HEADER: usize = 12;
/// Largest payload accepted when reading (a 16 MiB text has far fewer shingles).
pub const MAX_FRAME: usize = 256 << 20;

pub fn config(
) -> bincode::config::Configuration<bincode::config::LittleEndian, bincode::config::Fixint> {
    bincode::config::standard().with_fixed_int_encoding()
}

/// The parameters stored data depends on.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct Fingerprint {
    pub hash_family: String,
    pub num_perm: u32,
    pub seed: u64,
    pub shingle_kind: String,
    pub shingle_k: u32,
    pub multiset: bool,
    pub nfkc: bool,
    pub lowercase: bool,
    pub strip_punctuation: bool,
}

/// Separates the hash family from the text recipe in
/// [`Fingerprint::hash_family`].
const RECIPE_SEP: &str = " | text recipe ";

impl Fingerprint {
    /// The fingerprint of data written under `p`. The text recipe's
    /// version and opt-in steps are the tail of `hash_family` (they decide
    /// which shingles a text has, as the hash functions do): files written
    /// before recipes had versions name the family alone, which reads as
    /// version 1, and a release that does not know a recipe refuses its
    /// files as a different hash family instead of misreading them. The
    /// binary layout of every header stays as it was.
    pub fn of(p: &EngineParams) -> Self {
        let recipe = p.normalize.recipe_name();
        let hash_family = if recipe == "1" {
            HASH_FAMILY.to_owned()
        } else {
            format!("{HASH_FAMILY}{RECIPE_SEP}{recipe}")
        };
        Self {
            hash_family,
            num_perm: p.index.num_perm as u32,
            seed: p.index.seed,
            shingle_kind: p.shingle.kind.as_str().to_owned(),
            shingle_k: p.shingle.k as u32,
            multiset: p.shingle.multiset,
            nfkc: p.normalize.nfkc,
            lowercase: p.normalize.lowercase,
            strip_punctuation: p.normalize.strip_punctuation,
        }
    }

    /// The hash family and the text recipe (`"1"` when the family names
    /// none), apart.
    fn family_and_recipe(&self) -> (&str, String) {
        match self.hash_family.split_once(RECIPE_SEP) {
            Some((family, recipe)) => (family, recipe.to_owned()),
            None => (&self.hash_family, "1".to_owned()),
        }
    }

    /// Human-readable differences, `stored → configured`.
    pub fn differences(&self, configured: &Fingerprint) -> Vec<String> {
        let mut out = Vec::new();
        let mut cmp = |name: &str, a: String, b: String| {
            if a != b {
                out.push(format!("{name}: stored {a}, configured {b}"));
            }
        };
        let (family, recipe) = self.family_and_recipe();
        let (configured_family, configured_recipe) = configured.family_and_recipe();
        cmp(
            "hash family",
            family.to_owned(),
            configured_family.to_owned(),
        );
        cmp(
            "normalize recipe (version and steps)",
            recipe,
            configured_recipe,
        );
        cmp(
            "index.num_perm",
            self.num_perm.to_string(),
            configured.num_perm.to_string(),
        );
        cmp(
            "index.seed",
            self.seed.to_string(),
            configured.seed.to_string(),
        );
        cmp(
            "shingle.kind",
            self.shingle_kind.clone(),
            configured.shingle_kind.clone(),
        );
        cmp(
            "shingle.k",
            self.shingle_k.to_string(),
            configured.shingle_k.to_string(),
        );
        cmp(
            "shingle.multiset",
            self.multiset.to_string(),
            configured.multiset.to_string(),
        );
        cmp(
            "normalize.nfkc",
            self.nfkc.to_string(),
            configured.nfkc.to_string(),
        );
        cmp(
            "normalize.lowercase",
            self.lowercase.to_string(),
            configured.lowercase.to_string(),
        );
        cmp(
            "normalize.strip_punctuation",
            self.strip_punctuation.to_string(),
            configured.strip_punctuation.to_string(),
        );
        out
    }
}

/// How a record is laid out (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Format 1: no stamp; records get `created_ms`.
    V1 { created_ms: u64 },
    /// Format 2: the stamp follows the shingles.
    V2,
    /// Format 3 (snapshots): format 2, then the offset (u64, 0: none) of
    /// the document's text in the snapshot's text segment, whose id in
    /// memory is `text_file` (`None`: the snapshot has no text segment; see
    /// [`texts`](super::texts)).
    V3 { text_file: Option<u32> },
    /// Format 4: format 2 and the fingerprint bitmap (in snapshots, then
    /// the text offset of format 3).
    V4 { text_file: Option<u32> },
}

/// A stored document, borrowed for writing (format 2).
#[derive(Encode)]
pub struct RecordRef<'a> {
    pub id: &'a str,
    pub metadata: Option<&'a str>,
    pub signature: &'a [u32],
    pub shingles: &'a [u32],
    pub created_ms: u64,
    pub expires_ms: u64,
    /// The bitmap of its passage fingerprints over `shingles`.
    pub selection: &'a [u32],
}

impl<'a> From<&'a Record> for RecordRef<'a> {
    fn from(r: &'a Record) -> Self {
        let stamp = r.stamp();
        Self {
            id: r.id().as_str(),
            metadata: r.metadata(),
            signature: r.signature(),
            shingles: r.shingles(),
            created_ms: stamp.created_ms,
            expires_ms: stamp.expires_ms.unwrap_or(0),
            selection: r.selection(),
        }
    }
}

/// A stored document, owned after reading. Same layout as [`RecordRef`].
#[derive(Debug, Clone, PartialEq, Decode)]
pub struct StoredRecord {
    pub id: String,
    pub metadata: Option<String>,
    pub signature: Vec<u32>,
    pub shingles: Vec<u32>,
    pub created_ms: u64,
    pub expires_ms: u64,
    /// Empty for a record of formats 1 to 3 (no fingerprints stored).
    pub selection: Vec<u32>,
}

/// A record of formats 2 and 3 (no fingerprints).
#[derive(Debug, Clone, PartialEq, Decode)]
pub struct StoredRecordV2 {
    pub id: String,
    pub metadata: Option<String>,
    pub signature: Vec<u32>,
    pub shingles: Vec<u32>,
    pub created_ms: u64,
    pub expires_ms: u64,
}

impl From<StoredRecordV2> for StoredRecord {
    fn from(r: StoredRecordV2) -> Self {
        StoredRecord {
            id: r.id,
            metadata: r.metadata,
            signature: r.signature,
            shingles: r.shingles,
            created_ms: r.created_ms,
            expires_ms: r.expires_ms,
            selection: Vec::new(),
        }
    }
}

impl StoredRecord {
    pub fn stamp(&self) -> Stamp {
        Stamp {
            created_ms: self.created_ms,
            expires_ms: (self.expires_ms != 0).then_some(self.expires_ms),
        }
    }
}

/// A format-1 record (no stamp).
#[derive(Debug, Clone, PartialEq, Decode)]
pub struct StoredRecordV1 {
    pub id: String,
    pub metadata: Option<String>,
    pub signature: Vec<u32>,
    pub shingles: Vec<u32>,
}

impl StoredRecordV1 {
    /// As a format-2 record created at `created_ms`, with no expiry.
    pub fn upgrade(self, created_ms: u64) -> StoredRecord {
        StoredRecord {
            id: self.id,
            metadata: self.metadata,
            signature: self.signature,
            shingles: self.shingles,
            created_ms,
            expires_ms: 0,
            selection: Vec::new(),
        }
    }
}

/// Decode a [`RecordRef`]-encoded payload straight into a [`Record`]: the
/// signature and shingles are copied once, into the record's own
/// allocation, with no intermediate vectors (the restore path; the result
/// equals decoding a [`StoredRecord`] and building the record from it).
///
/// Checks what a record must satisfy before it is indexed: a valid id, a
/// signature of `num_perm` values, a non-empty, strictly increasing shingle
/// set, and no trailing bytes. A frame with a good checksum fails these
/// only if it was written by a different or broken writer, so the error is
/// reported as corruption.
///
/// `window` is the recipe's winnowing window, for the sampled stand-in of
/// a record stored without fingerprints (formats 1 to 3).
pub fn decode_record(
    payload: &[u8],
    num_perm: usize,
    layout: Layout,
    window: usize,
) -> Result<Record, String> {
    let mut r = Reader(payload);
    let id = r.str("id")?;
    let id = DocId::parse(id).map_err(|e| format!("record {id:?} has an invalid id: {e}"))?;
    let metadata = match r.take(1, "metadata tag")?[0] {
        0 => None,
        1 => Some(Box::<str>::from(r.str("metadata")?)),
        t => return Err(format!("record {id}: invalid option tag {t}")),
    };
    let sig_len = r.len("signature")?;
    if sig_len != num_perm {
        return Err(format!(
            "record {id} has a signature of {sig_len} values, not {num_perm}"
        ));
    }
    let sig = r.take(sig_len.saturating_mul(4), "signature")?;
    let sh_len = r.len("shingles")?;
    let sh = r.take(sh_len.saturating_mul(4), "shingles")?;
    let stamp = match layout {
        Layout::V1 { created_ms } => Stamp {
            created_ms,
            expires_ms: None,
        },
        Layout::V2 | Layout::V3 { .. } | Layout::V4 { .. } => {
            let created_ms = r.u64("creation time")?;
            let expires_ms = r.u64("expiry")?;
            Stamp {
                created_ms,
                expires_ms: (expires_ms != 0).then_some(expires_ms),
            }
        }
    };
    let selection = match layout {
        Layout::V4 { .. } => {
            let n = r.len("fingerprints")?;
            if n != crate::text::winnow::bitmap_words(sh_len) {
                return Err(format!(
                    "record {id} has a fingerprint bitmap of {n} words for {sh_len} shingles"
                ));
            }
            Some(r.take(n.saturating_mul(4), "fingerprints")?)
        }
        _ => None,
    };
    let text = match layout {
        Layout::V3 { text_file } | Layout::V4 { text_file } => match r.u64("text offset")? {
            0 => 0,
            offset if !(16..1 << 40).contains(&offset) => {
                return Err(format!(
                    "record {id} has an implausible text offset {offset}"
                ))
            }
            offset => match text_file {
                Some(file) => super::texts::locator(file, offset),
                None => {
                    return Err(format!(
                        "record {id} has a stored text but the snapshot's text segment is missing"
                    ))
                }
            },
        },
        _ => 0,
    };
    if !r.0.is_empty() {
        return Err(format!("record {id} has {} trailing bytes", r.0.len()));
    }
    let words_of_bitmap = crate::text::winnow::bitmap_words(sh_len);
    let mut data = Vec::with_capacity(sig_len + sh_len + words_of_bitmap);
    data.extend(words(sig));
    data.extend(words(sh));
    let shingles = &data[sig_len..];
    if shingles.is_empty() || !shingles.windows(2).all(|w| w[0] < w[1]) {
        return Err(format!("record {id} has an empty or unsorted shingle set"));
    }
    match selection {
        Some(bits) => data.extend(words(bits)),
        None => {
            let bits = crate::text::winnow::sampled_bitmap(&data[sig_len..], window);
            data.extend_from_slice(&bits);
        }
    }
    let record = Record::from_parts(id, metadata, stamp, sig_len, data.into_boxed_slice());
    record.set_text_locator(text);
    Ok(record)
}

/// Little-endian u32s of `b` (a multiple of 4 bytes long).
fn words(b: &[u8]) -> impl Iterator<Item = u32> + '_ {
    b.chunks_exact(4)
        .map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes")))
}

/// A cursor over a payload in bincode's fixed-int little-endian layout.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if n > self.0.len() {
            return Err(format!("record ends inside its {what}"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    /// A u64 length prefix, bounded by what is left of the payload.
    fn len(&mut self, what: &str) -> Result<usize, String> {
        let n = u64::from_le_bytes(self.take(8, what)?.try_into().expect("8 bytes"));
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.0.len())
            .ok_or_else(|| format!("record's {what} length {n} is implausible"))
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }

    fn str(&mut self, what: &str) -> Result<&'a str, String> {
        let n = self.len(what)?;
        std::str::from_utf8(self.take(n, what)?).map_err(|e| format!("record's {what}: {e}"))
    }
}

/// Append one frame holding `payload` to `out`.
pub fn push_frame(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(&frame_header(payload));
    out.extend_from_slice(payload);
}

/// The header of a frame holding `payload`: length, payload CRC, header CRC.
fn frame_header(payload: &[u8]) -> [u8; FRAME_HEADER] {
    let len = payload.len() as u32;
    let mut head = [0u8; FRAME_HEADER];
    head[..4].copy_from_slice(&len.to_le_bytes());
    head[4..8].copy_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    let hcrc = crc32c::crc32c(&head[..8]);
    head[8..].copy_from_slice(&hcrc.to_le_bytes());
    head
}

/// A bincode writer appending to a `Vec`.
struct VecWriter<'a>(&'a mut Vec<u8>);

impl bincode::enc::write::Writer for VecWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> Result<(), bincode::error::EncodeError> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }
}

/// Append one frame holding `value` encoded with [`config`] to `out`:
/// the same bytes as `push_frame(out, &encode_to_vec(value))`, encoded in
/// place (no buffer of its own, no copy of the payload).
pub fn encode_frame<E: Encode>(out: &mut Vec<u8>, value: &E) {
    let start = out.len();
    out.extend_from_slice(&[0u8; FRAME_HEADER]);
    bincode::encode_into_writer(value, VecWriter(out), config())
        .expect("encoding to a Vec cannot fail");
    let head = frame_header(&out[start + FRAME_HEADER..]);
    out[start..start + FRAME_HEADER].copy_from_slice(&head);
}

/// What the frame at the start of `buf` is.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A complete, checksummed frame and its total length.
    Ok(&'a [u8], usize),
    /// The buffer ends inside this frame: a torn write if it is the tail.
    Incomplete,
    /// The frame is complete but fails its checksums (or is absurdly long).
    Corrupt(&'static str),
}

pub fn read_frame(buf: &[u8]) -> Frame<'_> {
    if buf.len() < FRAME_HEADER {
        return Frame::Incomplete;
    }
    let hcrc = u32::from_le_bytes(buf[8..12].try_into().expect("4 bytes"));
    if crc32c::crc32c(&buf[..8]) != hcrc {
        return Frame::Corrupt("frame header checksum mismatch");
    }
    let len = u32::from_le_bytes(buf[..4].try_into().expect("4 bytes")) as usize;
    if len > MAX_FRAME {
        return Frame::Corrupt("frame length over the limit");
    }
    let Some(payload) = buf.get(FRAME_HEADER..FRAME_HEADER + len) else {
        return Frame::Incomplete;
    };
    let crc = u32::from_le_bytes(buf[4..8].try_into().expect("4 bytes"));
    if crc32c::crc32c(payload) != crc {
        return Frame::Corrupt("frame payload checksum mismatch");
    }
    Frame::Ok(payload, FRAME_HEADER + len)
}

/// `PersistError::Corrupt` of `path` at byte `offset`.
pub fn corrupt(
    path: &std::path::Path,
    offset: usize,
    reason: impl Into<String>,
) -> super::PersistError {
    super::PersistError::Corrupt {
        path: path.to_owned(),
        offset: offset as u64,
        reason: reason.into(),
    }
}

/// The JSON records in the frames of `data` from byte `start` (after a
/// log's magic): the records, the length of the valid prefix, and that of a
/// torn final frame (0 if none), which is the one thing a reader may cut.
/// Any other damage is an error naming `path` and the offset; `what` names
/// a record in it ("decision record").
pub fn read_json_frames<T: serde::de::DeserializeOwned>(
    path: &std::path::Path,
    data: &[u8],
    start: usize,
    what: &str,
) -> Result<(Vec<T>, u64, u64), super::PersistError> {
    let mut pos = start;
    let mut recs = Vec::new();
    while pos < data.len() {
        match read_frame(&data[pos..]) {
            Frame::Ok(payload, n) => {
                let rec: T = serde_json::from_slice(payload)
                    .map_err(|e| corrupt(path, pos, format!("unreadable {what}: {e}")))?;
                recs.push(rec);
                pos += n;
            }
            Frame::Incomplete => return Ok((recs, pos as u64, (data.len() - pos) as u64)),
            Frame::Corrupt(reason) => return Err(corrupt(path, pos, reason)),
        }
    }
    Ok((recs, pos as u64, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_encoded_in_place_equals_one_pushed_from_its_encoding() {
        let r = RecordRef {
            id: "café ’quoted’ Привет 日本 👍🏽 e\u{301}",
            metadata: Some(r#"{"£":"“x”"}"#),
            signature: &[1, u32::MAX, 7],
            shingles: &[3, 5, 8, 13],
            selection: &[0b1010],
            created_ms: 1_700_000_000_123,
            expires_ms: 0,
        };
        let mut pushed = b"earlier bytes".to_vec();
        let mut encoded = pushed.clone();
        push_frame(
            &mut pushed,
            &bincode::encode_to_vec((42u64, &r), config()).unwrap(),
        );
        encode_frame(&mut encoded, &(42u64, &r));
        assert_eq!(encoded, pushed);
        let Frame::Ok(payload, n) = read_frame(&encoded[13..]) else {
            panic!("the frame does not read back")
        };
        assert_eq!(n, encoded.len() - 13);
        assert_eq!(
            payload,
            &bincode::encode_to_vec((42u64, &r), config()).unwrap()[..]
        );
    }

    #[test]
    fn frames_round_trip_and_detect_damage() {
        let mut buf = Vec::new();
        push_frame(&mut buf, b"hello");
        push_frame(&mut buf, b"world!");
        let Frame::Ok(p, n) = read_frame(&buf) else {
            panic!()
        };
        assert_eq!(p, b"hello");
        assert_eq!(read_frame(&buf[n..]), Frame::Ok(b"world!", 18));
        // Every proper prefix of a frame is incomplete, never corrupt.
        for cut in 0..n {
            assert_eq!(read_frame(&buf[..cut]), Frame::Incomplete, "cut {cut}");
        }
        // Every single flipped byte of a complete frame is detected.
        for i in 0..n {
            let mut bad = buf[..n].to_vec();
            bad[i] ^= 0x40;
            assert!(matches!(read_frame(&bad), Frame::Corrupt(_)), "flip at {i}");
        }
    }

    #[test]
    fn fingerprint_differences_name_the_keys() {
        let a = Fingerprint::of(&EngineParams::default());
        let b = Fingerprint::of(&EngineParams {
            index: crate::engine::IndexParams {
                num_perm: 64,
                seed: 9,
                ..Default::default()
            },
            ..Default::default()
        });
        assert!(a.differences(&a).is_empty());
        let d = a.differences(&b).join("; ");
        assert!(
            d.contains("index.num_perm: stored 128, configured 64"),
            "{d}"
        );
        assert!(d.contains("index.seed"), "{d}");
    }

    #[test]
    fn the_text_recipe_is_named_after_the_hash_family() {
        use crate::text::NormalizeOptions;
        let with = |normalize: NormalizeOptions| {
            Fingerprint::of(&EngineParams {
                normalize,
                ..Default::default()
            })
        };
        // Version 1 names no recipe: files of earlier releases match it.
        let v1 = with(NormalizeOptions::default().legacy());
        assert_eq!(v1.hash_family, HASH_FAMILY);

        let v2 = with(NormalizeOptions::default());
        assert_eq!(v2.hash_family, format!("{HASH_FAMILY} | text recipe 2"));
        let d = v1.differences(&v2).join("; ");
        assert_eq!(
            d,
            "normalize recipe (version and steps): stored 1, configured 2"
        );
        let folded = with(NormalizeOptions {
            fold_accents: true,
            confusables: true,
            ..Default::default()
        });
        let d = v2.differences(&folded).join("; ");
        assert_eq!(
            d,
            "normalize recipe (version and steps): stored 2, configured 2 fold_accents confusables"
        );
    }

    #[test]
    fn decode_record_reads_what_record_ref_writes() {
        for (metadata, expires_ms) in [(None, 0), (Some("{\"k\": [1, 2]}"), 99)] {
            let r = RecordRef {
                id: "doc-ü",
                metadata,
                signature: &[1, 2, 0xffff_ffff],
                shingles: &[3, 9, 0x8000_0000],
                created_ms: 1_700_000_000_123,
                expires_ms,
                selection: &[0b101],
            };
            let mut bytes = bincode::encode_to_vec(&r, config()).unwrap();
            bytes.extend_from_slice(&0u64.to_le_bytes());
            let back = decode_record(&bytes, 3, Layout::V4 { text_file: None }, 20).unwrap();
            assert_eq!(back.selection(), r.selection);
            assert_eq!(back.id().as_str(), r.id);
            assert_eq!(back.metadata(), r.metadata);
            assert_eq!(back.signature(), r.signature);
            assert_eq!(back.shingles(), r.shingles);
            assert_eq!(back.created_ms(), r.created_ms);
            assert_eq!(
                back.stamp().expires_ms,
                (expires_ms != 0).then_some(expires_ms)
            );
        }
    }

    #[test]
    fn format_1_records_get_the_fallback_creation_time() {
        #[derive(Encode)]
        struct V1<'a> {
            id: &'a str,
            metadata: Option<&'a str>,
            signature: &'a [u32],
            shingles: &'a [u32],
        }
        let v1 = V1 {
            id: "old",
            metadata: None,
            signature: &[1, 2],
            shingles: &[3, 4],
        };
        let bytes = bincode::encode_to_vec(&v1, config()).unwrap();
        let back = decode_record(&bytes, 2, Layout::V1 { created_ms: 42 }, 20).unwrap();
        assert_eq!(
            back.stamp(),
            Stamp {
                created_ms: 42,
                expires_ms: None
            }
        );
        assert_eq!(back.shingles(), [3, 4]);
        // Read as format 2, the same bytes are short: refused, not misread.
        assert!(decode_record(&bytes, 2, Layout::V2, 20).is_err());
        let (old, _): (StoredRecordV1, usize) =
            bincode::decode_from_slice(&bytes, config()).unwrap();
        assert_eq!(old.upgrade(42).stamp().created_ms, 42);
    }

    #[test]
    fn decode_record_refuses_malformed_payloads() {
        // Format 4 snapshot records: the record, then its text offset.
        let enc = |r: &RecordRef<'_>| {
            let mut b = bincode::encode_to_vec(r, config()).unwrap();
            b.extend_from_slice(&0u64.to_le_bytes());
            b
        };
        let decode = |b: &[u8], n: usize| decode_record(b, n, Layout::V4 { text_file: None }, 20);
        let good = RecordRef {
            id: "x",
            metadata: None,
            signature: &[1, 2],
            shingles: &[3, 4],
            created_ms: 5,
            expires_ms: 0,
            selection: &[0b11],
        };
        let bytes = enc(&good);
        // Every truncation and every extra byte is refused, never a panic.
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut], 2).is_err(), "cut {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer, 2).unwrap_err().contains("trailing"));
        assert!(decode(&bytes, 3).unwrap_err().contains("signature"));
        let unsorted = enc(&RecordRef {
            shingles: &[4, 3],
            ..good
        });
        assert!(decode(&unsorted, 2).unwrap_err().contains("shingle"));
        let dup = enc(&RecordRef {
            shingles: &[3, 3],
            ..good
        });
        assert!(decode(&dup, 2).is_err());
        let empty = enc(&RecordRef {
            shingles: &[],
            ..good
        });
        assert!(decode(&empty, 2).is_err());
        let short_bitmap = enc(&RecordRef {
            selection: &[],
            ..good
        });
        assert!(decode(&short_bitmap, 2)
            .unwrap_err()
            .contains("fingerprint bitmap"));
        let bad_id = enc(&RecordRef { id: "a\nb", ..good });
        assert!(decode(&bad_id, 2).unwrap_err().contains("invalid id"));
        let mut bad_tag = bytes.clone();
        bad_tag[8 + 1] = 7; // after the id's length and its one byte
        assert!(decode(&bad_tag, 2).unwrap_err().contains("tag"));
        let mut huge = bytes.clone();
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(&huge, 2).unwrap_err().contains("implausible"));
    }

    #[test]
    fn record_ref_and_stored_record_share_a_layout() {
        let r = RecordRef {
            id: "x",
            metadata: Some("{}"),
            signature: &[1, 2],
            shingles: &[3],
            created_ms: 7,
            expires_ms: 9,
            selection: &[1],
        };
        let bytes = bincode::encode_to_vec(&r, config()).unwrap();
        let (back, _): (StoredRecord, usize) =
            bincode::decode_from_slice(&bytes, config()).unwrap();
        assert_eq!(
            back,
            StoredRecord {
                id: "x".into(),
                metadata: Some("{}".into()),
                signature: vec![1, 2],
                shingles: vec![3],
                created_ms: 7,
                expires_ms: 9,
                selection: vec![1],
            }
        );
    }
}
