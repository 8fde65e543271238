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

use crate::engine::{EngineParams, Record, HASH_FAMILY};
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

impl Fingerprint {
    pub fn of(p: &EngineParams) -> Self {
        Self {
            hash_family: HASH_FAMILY.to_owned(),
            num_perm: p.num_perm as u32,
            seed: p.seed,
            shingle_kind: p.shingle.kind.as_str().to_owned(),
            shingle_k: p.shingle.k as u32,
            multiset: p.shingle.multiset,
            nfkc: p.normalize.nfkc,
            lowercase: p.normalize.lowercase,
            strip_punctuation: p.normalize.strip_punctuation,
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
        cmp(
            "hash family",
            self.hash_family.clone(),
            configured.hash_family.clone(),
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

/// A stored document, borrowed for writing.
#[derive(Encode)]
pub struct RecordRef<'a> {
    pub id: &'a str,
    pub metadata: Option<&'a str>,
    pub signature: &'a [u32],
    pub shingles: &'a [u32],
}

impl<'a> From<&'a Record> for RecordRef<'a> {
    fn from(r: &'a Record) -> Self {
        Self {
            id: r.id().as_str(),
            metadata: r.metadata(),
            signature: r.signature(),
            shingles: r.shingles(),
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
}

/// Append one frame holding `payload` to `out`.
pub fn push_frame(out: &mut Vec<u8>, payload: &[u8]) {
    let len = payload.len() as u32;
    let mut head = [0u8; FRAME_HEADER];
    head[..4].copy_from_slice(&len.to_le_bytes());
    head[4..8].copy_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    let hcrc = crc32c::crc32c(&head[..8]);
    head[8..].copy_from_slice(&hcrc.to_le_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(payload);
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

#[cfg(test)]
mod tests {
    use super::*;

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
            num_perm: 64,
            seed: 9,
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
    fn record_ref_and_stored_record_share_a_layout() {
        let r = RecordRef {
            id: "x",
            metadata: Some("{}"),
            signature: &[1, 2],
            shingles: &[3],
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
                shingles: vec![3]
            }
        );
    }
}
