//! The redis backend's bytes: key names, the record, bucket members.
//! Pure functions (no I/O), so the layout is tested without a server.
//!
//! **Record** (little-endian; the fixed header first so the Lua scripts
//! can read it without a parser):
//!
//! ```text
//!   0      u8   version (2; 1 is still read)
//!   1..5   u32  gen: random per write; bucket members carry it
//!   5..13  u64  created_ms
//!   13..21 u64  expires_ms (0: none of its own)
//!   21..23 u16  id length n, then n bytes of id (UTF-8)
//!   varint metadata length + 1 (0: none), then the metadata (JSON text)
//!   varint shingle count, then the sorted shingles as varint deltas
//!   version 2 only: varint count of passage fingerprints, then their
//!     positions among the sorted shingles as varint deltas (increasing)
//! ```
//!
//! The fingerprints (the shingles winnowing picked, `text::winnow`) are
//! kept as positions, ~1 byte each (~40 bytes for a 400-word article):
//! they need the text's order, which the set alone does not have. A
//! version 1 record has none; it is read with the sampled stand-in
//! (`Engine::prepared_from_shingles(.., None)`). The header is the same in
//! both versions, so the scripts read either.
//!
//! No signature: it is recomputed from the shingles when a record is read
//! (`Engine::prepared_from_shingles`), which keeps a record at ~400 bytes.
//!
//! **Member** of a bucket: 12 bytes, `iid` (u64) then `gen` (u32).
//!
//! **Posting buckets** (the passage index, when a collection keeps it): the
//! same hashes of members as the band buckets, named
//! `{prefix}:{collection}:f:{f.<group/16>}:<group>`, field = the fingerprint
//! (u32 LE, 4 bytes); the group is the top bits of a mix of the fingerprint
//! ([`Keys::posting_group_of`]: winnowing picks window minima, so the raw
//! values are skewed low).
//!
//! **Due index** (what the retention sweep reads instead of every record):
//! each record's member is also appended to one *due bucket*, a string of
//! members named by the minute its expiry is counted from: its own expiry
//! (`x:e:<minute>`) or, without one, its creation (`x:c:<minute>`, due once
//! the collection's retention has passed, whatever the retention is then).
//! A sorted set per kind (`x:e`, `x:c`) names the buckets, scored by their
//! minute's first millisecond, so a sweep asks it for the buckets whose
//! minute can hold something expired. All of a collection's due keys share
//! its metadata's slot, so one script appends a member and names its bucket.

use xxhash_rust::xxh3::xxh3_64_with_seed;

pub const RECORD_VERSION: u8 = 2;
/// The version before passage fingerprints (still read).
pub const RECORD_VERSION_1: u8 = 1;
/// Posting hashes per band hash: `2^POSTING_EXTRA_BITS` times as many
/// (a 400-word article has ~40 fingerprints and 21 band keys).
pub const POSTING_EXTRA_BITS: u32 = 5;
/// Posting hashes that share a slot: `2^POSTING_SLOT_BITS`.
pub const POSTING_SLOT_BITS: u32 = 4;
/// Bytes before the id.
pub const HEADER: usize = 23;
pub const MEMBER: usize = 12;
/// Seed of the id hash: fixed, so every node computes the same `iid`.
const IID_SEED: u64 = 0x6e64_7570_6969_6431;

/// The 64-bit internal id of an external id (a collision is detected on
/// write: the record names its external id).
pub fn iid(id: &str) -> u64 {
    xxh3_64_with_seed(id.as_bytes(), IID_SEED)
}

/// Key names of one collection: `{prefix}:{collection}:…`.
#[derive(Clone, Debug)]
pub struct Keys {
    /// `key_prefix:collection`.
    base: String,
    /// Bits of a band key that pick its bucket hash (`g`).
    group_bits: u32,
}

impl Keys {
    pub fn new(key_prefix: &str, collection: &str, group_bits: u32) -> Self {
        Self {
            base: format!("{key_prefix}:{collection}"),
            group_bits,
        }
    }

    /// `key_prefix:collection`, every key's start (or hash tag).
    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn group_bits(&self) -> u32 {
        self.group_bits
    }

    /// The record of `iid`: tagged by the document, so its keys share a slot.
    pub fn record(&self, iid: u64) -> String {
        format!("{}:r:{{{iid:016x}}}", self.base)
    }

    /// The stored text (zstd) of `iid`'s record (same slot as the record,
    /// so the commit writes both at once).
    pub fn text(&self, iid: u64) -> String {
        format!("{}:t:{{{iid:016x}}}", self.base)
    }

    /// A pending `if_unique` write of `iid` (same slot as its record).
    pub fn pending(&self, iid: u64) -> String {
        format!("{}:p:{{{iid:016x}}}", self.base)
    }

    /// The prefix every record key starts with (for SCAN's MATCH).
    pub fn record_pattern(&self) -> String {
        format!("{}:r:*", self.base)
    }

    /// The group (bucket hash) number of a band key: its top `g` bits.
    pub fn group_of(&self, band_key: u64) -> u64 {
        if self.group_bits == 0 {
            0
        } else {
            band_key >> (64 - self.group_bits)
        }
    }

    /// The bucket hash of band `band` holding `band_key`; tagged by band
    /// and group, so a collection's hashes spread over every slot.
    pub fn group(&self, band: usize, band_key: u64) -> String {
        self.group_key(band, self.group_of(band_key))
    }

    pub fn group_key(&self, band: usize, group: u64) -> String {
        format!("{}:g:{{{band}.{group:x}}}", self.base)
    }

    /// Bits of a fingerprint's mix that pick its posting hash.
    pub fn posting_bits(&self) -> u32 {
        (self.group_bits + POSTING_EXTRA_BITS).min(24)
    }

    /// The posting hash number of a fingerprint: the top bits of its mix.
    pub fn posting_group_of(&self, fingerprint: u32) -> u64 {
        let mixed =
            (u64::from(fingerprint) ^ 0x6670_7269_6e74_7321).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        mixed >> (64 - self.posting_bits())
    }

    /// The posting hash holding `fingerprint`'s bucket.
    pub fn posting(&self, fingerprint: u32) -> String {
        self.posting_key(self.posting_group_of(fingerprint))
    }

    /// Posting hash number `group`; tagged `f.<group / 16>`, so the hashes
    /// spread over the slots, 16 of them share one (a write's or a query's
    /// script call covers the hashes of one slot at once: 16 times fewer
    /// calls than one per hash, for hashes of the same size), and never
    /// share a tag with a band hash.
    pub fn posting_key(&self, group: u64) -> String {
        format!(
            "{}:f:{{f.{:x}}}:{group:x}",
            self.base,
            group >> POSTING_SLOT_BITS
        )
    }

    /// The slot tag number of posting hash `group`.
    pub fn posting_slot_of(&self, group: u64) -> u64 {
        group >> POSTING_SLOT_BITS
    }

    /// Every posting hash of the collection (to drop the index).
    pub fn posting_keys(&self) -> impl Iterator<Item = String> + '_ {
        (0..1u64 << self.posting_bits()).map(|g| self.posting_key(g))
    }

    /// The collection's metadata (layout, settings), one slot.
    pub fn meta(&self) -> String {
        format!("{{{}}}:meta", self.base)
    }

    /// The collection's write counter: moved by every write and delete,
    /// so a cached `/duplicates` answer knows whether it is current.
    pub fn writes(&self) -> String {
        format!("{{{}}}:w", self.base)
    }

    /// The collection's document counter (same slot as its metadata).
    pub fn counter(&self) -> String {
        format!("{{{}}}:n", self.base)
    }
}

/// The document-frequency hashes of the layout before the log (until
/// 2026-11-30): `2^(g + DF_EXTRA_BITS)` of them (at most 2^22), in
/// `2^DF_TAG_BITS` slots. Only their names are still needed: a node that
/// opens such a layout deletes them (`drop_legacy_counts`).
const DF_EXTRA_BITS: u32 = 9;
const DF_TAG_BITS: u32 = 6;

impl Keys {
    /// Every document-frequency hash of the layout before the log.
    pub fn df_keys(&self) -> impl Iterator<Item = String> + '_ {
        let bits = (self.group_bits + DF_EXTRA_BITS).min(22);
        (0..1u64 << bits).map(|group| {
            format!(
                "{}:d:{{d.{:x}}}:{group:x}",
                self.base,
                group & ((1 << DF_TAG_BITS) - 1)
            )
        })
    }

    /// Documents counted by the document-frequency hashes of the layout
    /// before the log (N; metadata's slot): deleted when a node opens it.
    pub fn df_docs(&self) -> String {
        format!("{{{}}}:dn", self.base)
    }

    /// The document-frequency log: a stream of the changes to counts
    /// (metadata's slot; `df_log.rs`).
    pub fn df_log(&self) -> String {
        format!("{{{}}}:dfl", self.base)
    }

    /// The log's sequence: the number of its last entry (metadata's slot).
    pub fn df_seq(&self) -> String {
        format!("{{{}}}:dfs", self.base)
    }

    /// The registered templates: id → JSON (metadata's slot).
    pub fn templates(&self) -> String {
        format!("{{{}}}:tpl", self.base)
    }

    /// Moved by every change of the templates (metadata's slot).
    pub fn templates_version(&self) -> String {
        format!("{{{}}}:tv", self.base)
    }

    /// The event log (issue 45): one Stream, the webhooks' outbox and the
    /// feed; a consumer group per subscription (metadata's slot, like every
    /// events key, so one script may touch them together).
    pub fn events(&self) -> String {
        format!("{{{}}}:ev", self.base)
    }

    /// The webhook subscriptions: id → JSON (metadata's slot).
    pub fn subscriptions(&self) -> String {
        format!("{{{}}}:wh", self.base)
    }

    /// Moved by every change of the subscriptions (metadata's slot).
    pub fn subscriptions_version(&self) -> String {
        format!("{{{}}}:whv", self.base)
    }

    /// Subscription `sub`'s delivery schedule: a sorted set of the
    /// deliveries taken and not settled (member: the stream entry id, or
    /// `h` + it for a retry by hand), scored by when they are due again.
    pub fn event_due(&self, sub: &str) -> String {
        format!("{{{}}}:ev:due:{sub}", self.base)
    }

    /// Subscription `sub`'s retries by hand: entry id → the event's JSON
    /// (a copy: the stream may have trimmed it).
    pub fn event_retries(&self, sub: &str) -> String {
        format!("{{{}}}:ev:rq:{sub}", self.base)
    }

    /// How often each of `sub`'s retries by hand was taken: entry id → n.
    pub fn event_retry_takes(&self, sub: &str) -> String {
        format!("{{{}}}:ev:rqn:{sub}", self.base)
    }

    /// Subscription `sub`'s failed deliveries: a list, newest first, of
    /// `FailedDelivery` JSON (bounded).
    pub fn event_failed(&self, sub: &str) -> String {
        format!("{{{}}}:ev:fail:{sub}", self.base)
    }

    /// The review decisions (issue 46): `[a, b]` (JSON) → the decision's
    /// JSON (metadata's slot).
    pub fn decisions(&self) -> String {
        format!("{{{}}}:rv", self.base)
    }

    /// Moved by every change of the decisions (metadata's slot).
    pub fn decisions_version(&self) -> String {
        format!("{{{}}}:rvv", self.base)
    }

    /// Every events key of subscription `sub` but the stream and its group.
    pub fn event_sub_keys(&self, sub: &str) -> [String; 4] {
        [
            self.event_due(sub),
            self.event_retries(sub),
            self.event_retry_takes(sub),
            self.event_failed(sub),
        ]
    }
}

/// The two kinds of due bucket (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Due {
    /// By creation: due when the collection's retention has passed.
    Created,
    /// By the record's own expiry.
    Own,
}

/// A due bucket spans this many milliseconds.
pub const DUE_MINUTE_MS: u64 = 60_000;

/// The due bucket of a record created at `created_ms` with its own expiry
/// `expires_ms` (0: none): its kind and minute.
pub fn due_of(created_ms: u64, expires_ms: u64) -> (Due, u64) {
    match own_expiry(expires_ms) {
        Some(at) => (Due::Own, at / DUE_MINUTE_MS),
        None => (Due::Created, created_ms / DUE_MINUTE_MS),
    }
}

/// A record's `expires_ms` as the engine's own expiry (0 in the record: none).
pub fn own_expiry(expires_ms: u64) -> Option<u64> {
    (expires_ms != 0).then_some(expires_ms)
}

impl Due {
    fn letter(self) -> char {
        match self {
            Due::Created => 'c',
            Due::Own => 'e',
        }
    }
}

impl Keys {
    /// The sorted set naming the due buckets of `due` (members: minutes).
    pub fn due_set(&self, due: Due) -> String {
        format!("{{{}}}:x:{}", self.base, due.letter())
    }

    /// The due bucket of `due` for `minute` (a string of members).
    pub fn due_bucket(&self, due: Due, minute: u64) -> String {
        format!("{{{}}}:x:{}:{minute}", self.base, due.letter())
    }
}

/// `g` for `expected` documents: ⌈log2(expected / 256)⌉ (0 for small ones),
/// so a bucket hash holds ~100–400 fields and stays a listpack.
pub fn group_bits_for(expected: u64) -> u32 {
    let per_hash = 256u64;
    if expected <= per_hash {
        return 0;
    }
    let groups = expected.div_ceil(per_hash);
    (64 - (groups - 1).leading_zeros()).min(24)
}

/// A bucket member.
pub fn member(iid: u64, gen: u32) -> [u8; MEMBER] {
    let mut m = [0u8; MEMBER];
    m[..8].copy_from_slice(&iid.to_le_bytes());
    m[8..].copy_from_slice(&gen.to_le_bytes());
    m
}

/// The members of a bucket field's value (a trailing partial member, which
/// only corruption could leave, is ignored).
pub fn members(value: &[u8]) -> impl Iterator<Item = (u64, u32)> + '_ {
    value.chunks_exact(MEMBER).map(|m| {
        let iid = u64::from_le_bytes(m[..8].try_into().expect("8 bytes"));
        let gen = u32::from_le_bytes(m[8..].try_into().expect("4 bytes"));
        (iid, gen)
    })
}

/// Bytes from a record's start that hold its header and any id: what the
/// retention sweep reads of each record (`GETRANGE 0 HEAD_AND_ID - 1`).
pub const HEAD_AND_ID: usize = HEADER + crate::engine::MAX_ID_BYTES;

/// What the retention sweep needs of a record: its version, times and id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordHead {
    pub gen: u32,
    pub created_ms: u64,
    /// 0: none of its own.
    pub expires_ms: u64,
    pub id: String,
}

/// Decode the head of a record from its first bytes (at least the header
/// and the id; the rest, if given, is not read).
pub fn decode_head(bytes: &[u8]) -> Result<RecordHead, CorruptRecord> {
    if bytes.len() < HEADER {
        return Err(CorruptRecord("shorter than its header"));
    }
    if bytes[0] != RECORD_VERSION && bytes[0] != RECORD_VERSION_1 {
        return Err(CorruptRecord("unknown record version"));
    }
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let id_len = usize::from(u16::from_le_bytes([bytes[21], bytes[22]]));
    let id = bytes
        .get(HEADER..HEADER + id_len)
        .and_then(|b| std::str::from_utf8(b).ok())
        .ok_or(CorruptRecord("bad id"))?
        .to_owned();
    Ok(RecordHead {
        gen: u32::from_le_bytes(bytes[1..5].try_into().expect("4 bytes")),
        created_ms: u64_at(5),
        expires_ms: u64_at(13),
        id,
    })
}

/// A record's fields, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRecord {
    pub gen: u32,
    pub created_ms: u64,
    /// 0: none of its own.
    pub expires_ms: u64,
    pub id: String,
    pub metadata: Option<String>,
    pub shingles: Vec<u32>,
    /// The passage fingerprints as a bitmap over `shingles`
    /// (`text::winnow`); `None` in a version 1 record.
    pub selection: Option<Box<[u32]>>,
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Encode a record (`shingles` sorted and distinct): version 2 with the
/// fingerprint bitmap `selection` (over `shingles`), version 1 without.
pub fn encode_record(
    gen: u32,
    created_ms: u64,
    expires_ms: u64,
    id: &str,
    metadata: Option<&str>,
    shingles: &[u32],
    selection: Option<&[u32]>,
) -> Vec<u8> {
    let meta_len = metadata.map_or(0, str::len);
    let mut out = Vec::with_capacity(HEADER + id.len() + meta_len + 16 + shingles.len() * 4);
    out.push(if selection.is_some() {
        RECORD_VERSION
    } else {
        RECORD_VERSION_1
    });
    out.extend_from_slice(&gen.to_le_bytes());
    out.extend_from_slice(&created_ms.to_le_bytes());
    out.extend_from_slice(&expires_ms.to_le_bytes());
    debug_assert!(id.len() <= usize::from(u16::MAX));
    out.extend_from_slice(&(id.len() as u16).to_le_bytes());
    out.extend_from_slice(id.as_bytes());
    match metadata {
        None => put_varint(&mut out, 0),
        Some(m) => {
            put_varint(&mut out, m.len() as u64 + 1);
            out.extend_from_slice(m.as_bytes());
        }
    }
    put_varint(&mut out, shingles.len() as u64);
    let mut prev = 0u32;
    for (i, &s) in shingles.iter().enumerate() {
        let delta = if i == 0 { s } else { s - prev };
        put_varint(&mut out, u64::from(delta));
        prev = s;
    }
    if let Some(bits) = selection {
        debug_assert_eq!(
            bits.len(),
            crate::text::winnow::bitmap_words(shingles.len())
        );
        let positions = bit_positions(bits, shingles.len());
        put_varint(&mut out, positions.len() as u64);
        let mut prev = 0usize;
        for (i, &p) in positions.iter().enumerate() {
            put_varint(&mut out, (if i == 0 { p } else { p - prev }) as u64);
            prev = p;
        }
    }
    out
}

/// The set bits of a bitmap below `n`, increasing.
fn bit_positions(bits: &[u32], n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    for (wi, &word) in bits.iter().enumerate() {
        let mut word = word;
        while word != 0 {
            let p = wi * 32 + word.trailing_zeros() as usize;
            word &= word - 1;
            if p < n {
                out.push(p);
            }
        }
    }
    out
}

/// Why stored bytes are not a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stored record is corrupt: {0}")]
pub struct CorruptRecord(pub &'static str);

/// The `gen` of an encoded record, read from its header.
pub fn record_gen(bytes: &[u8]) -> Option<u32> {
    (bytes.len() >= HEADER && (bytes[0] == RECORD_VERSION || bytes[0] == RECORD_VERSION_1))
        .then(|| u32::from_le_bytes(bytes[1..5].try_into().expect("4 bytes")))
}

pub fn decode_record(bytes: &[u8]) -> Result<StoredRecord, CorruptRecord> {
    let RecordHead {
        gen,
        created_ms,
        expires_ms,
        id,
    } = decode_head(bytes)?;
    // The id's bytes are the header's `id_len` of them (decode_head checked).
    let mut at = HEADER + id.len();
    let meta_len = get_varint(bytes, &mut at).ok_or(CorruptRecord("bad metadata length"))?;
    let metadata = if meta_len == 0 {
        None
    } else {
        let end = at
            .checked_add(meta_len as usize - 1)
            .ok_or(CorruptRecord("bad metadata length"))?;
        let m = bytes
            .get(at..end)
            .and_then(|b| std::str::from_utf8(b).ok())
            .ok_or(CorruptRecord("bad metadata"))?;
        at = end;
        Some(m.to_owned())
    };
    let n = get_varint(bytes, &mut at).ok_or(CorruptRecord("bad shingle count"))? as usize;
    if n > bytes.len() {
        return Err(CorruptRecord("shingle count beyond the record"));
    }
    let mut shingles = Vec::with_capacity(n);
    let mut prev = 0u64;
    for i in 0..n {
        let d = get_varint(bytes, &mut at).ok_or(CorruptRecord("truncated shingles"))?;
        let v = if i == 0 { d } else { prev + d };
        if v > u64::from(u32::MAX) || (i > 0 && d == 0) {
            return Err(CorruptRecord("shingles out of order"));
        }
        shingles.push(v as u32);
        prev = v;
    }
    let selection = if bytes[0] == RECORD_VERSION {
        let count = get_varint(bytes, &mut at).ok_or(CorruptRecord("bad fingerprint count"))?;
        if count as usize > n {
            return Err(CorruptRecord("more fingerprints than shingles"));
        }
        let mut bits = vec![0u32; crate::text::winnow::bitmap_words(n)];
        let mut p = 0u64;
        for i in 0..count {
            let d = get_varint(bytes, &mut at).ok_or(CorruptRecord("truncated fingerprints"))?;
            p = if i == 0 { d } else { p + d };
            if (i > 0 && d == 0) || p >= n as u64 {
                return Err(CorruptRecord("fingerprints out of order"));
            }
            bits[p as usize / 32] |= 1 << (p % 32);
        }
        Some(bits.into_boxed_slice())
    } else {
        None
    };
    if at != bytes.len() {
        return Err(CorruptRecord("trailing bytes"));
    }
    Ok(StoredRecord {
        gen,
        created_ms,
        expires_ms,
        id,
        metadata,
        shingles,
        selection,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_with_non_ascii_ids_and_metadata() {
        let shingles = vec![0, 1, 7, 300, 70_000, u32::MAX];
        for (id, meta) in [
            (
                "café-№1 “quoted” £ 東京 🦀 e\u{301}",
                Some(r#"{"t":"Ёж ’ 😀"}"#),
            ),
            ("a", None),
            ("x", Some("{}")),
        ] {
            let bytes = encode_record(0xdead_beef, 1_700_000_000_123, 0, id, meta, &shingles, None);
            assert_eq!(record_gen(&bytes), Some(0xdead_beef));
            let r = decode_record(&bytes).unwrap();
            assert_eq!(r.id, id);
            assert_eq!(r.metadata.as_deref(), meta);
            assert_eq!(r.shingles, shingles);
            assert_eq!(
                (r.gen, r.created_ms, r.expires_ms),
                (0xdead_beef, 1_700_000_000_123, 0)
            );
        }
    }

    #[test]
    fn a_head_read_from_the_first_bytes_agrees_with_the_whole_record() {
        let shingles: Vec<u32> = (0..150).map(|i| i * 28_000_000).collect();
        let longest = "é".repeat(crate::engine::MAX_ID_BYTES / 2);
        let sel = crate::text::winnow::sampled_bitmap(&shingles, 20);
        for (id, meta, expires) in [
            (
                "café-№1 “quoted” 東京",
                Some(r#"{"t":"Ёж"}"#),
                1_800_000_000_000,
            ),
            ("a", None, 0),
            (longest.as_str(), Some("{}"), 7),
        ] {
            let bytes = encode_record(
                42,
                1_700_000_000_123,
                expires,
                id,
                meta,
                &shingles,
                Some(&sel),
            );
            let whole = decode_record(&bytes).unwrap();
            // What GETRANGE 0 HEAD_AND_ID-1 returns: the record, cut there.
            let head = decode_head(&bytes[..bytes.len().min(HEAD_AND_ID)]).unwrap();
            assert_eq!(
                (head.gen, head.created_ms, head.expires_ms, head.id.as_str()),
                (
                    whole.gen,
                    whole.created_ms,
                    whole.expires_ms,
                    whole.id.as_str()
                )
            );
        }
        let bytes = encode_record(42, 1, 0, "abc", None, &shingles, None);
        assert!(
            decode_head(&bytes[..HEADER + 2]).is_err(),
            "an id cut short"
        );
        assert!(
            decode_head(&bytes[..HEADER - 1]).is_err(),
            "a header cut short"
        );
        assert!(decode_head(&[]).is_err(), "GETRANGE of a missing key");
    }

    #[test]
    fn delta_varints_keep_a_typical_record_small() {
        // 150 shingles spread over u32: ~4 bytes each as deltas of ~2^25.
        let shingles: Vec<u32> = (0..150u32).map(|i| i * 28_000_000 + 5).collect();
        let bytes = encode_record(1, 2, 0, "doc-1", None, &shingles, None);
        assert!(
            bytes.len() < HEADER + 5 + 2 + 150 * 4 + 4,
            "{}",
            bytes.len()
        );
    }

    #[test]
    fn damaged_records_are_refused_not_misread() {
        for bytes in [
            encode_record(1, 2, 3, "id", Some("{}"), &[1, 2, 3], None),
            encode_record(1, 2, 3, "id", Some("{}"), &[1, 2, 3], Some(&[0b101])),
        ] {
            for cut in 0..bytes.len() {
                assert!(decode_record(&bytes[..cut]).is_err(), "cut at {cut}");
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(decode_record(&longer).is_err());
            let mut v3 = bytes;
            v3[0] = 3;
            assert_eq!(
                decode_record(&v3),
                Err(CorruptRecord("unknown record version"))
            );
        }
        // A fingerprint position past the shingles, or repeated.
        let mut bad = encode_record(1, 2, 3, "id", None, &[1, 2, 3], Some(&[0b100]));
        *bad.last_mut().unwrap() = 3;
        assert_eq!(
            decode_record(&bad),
            Err(CorruptRecord("fingerprints out of order"))
        );
        let mut bad = encode_record(1, 2, 3, "id", None, &[1, 2, 3], Some(&[0b11]));
        *bad.last_mut().unwrap() = 0;
        assert_eq!(
            decode_record(&bad),
            Err(CorruptRecord("fingerprints out of order"))
        );
    }

    #[test]
    fn version_2_keeps_the_fingerprint_bitmap_and_version_1_still_reads() {
        use crate::text::winnow;
        for n in [1usize, 31, 32, 33, 150, 1000] {
            let shingles: Vec<u32> = (0..n as u32).map(|i| i * 4_000_000 + 7).collect();
            for bits in [
                winnow::sampled_bitmap(&shingles, 20),
                vec![0u32; winnow::bitmap_words(n)].into_boxed_slice(),
                {
                    let mut all = vec![u32::MAX; winnow::bitmap_words(n)];
                    if n % 32 != 0 {
                        *all.last_mut().unwrap() = (1u32 << (n % 32)) - 1;
                    }
                    all.into_boxed_slice()
                },
            ] {
                let v2 = encode_record(9, 10, 11, "doc", Some("{}"), &shingles, Some(&bits));
                assert_eq!(v2[0], RECORD_VERSION);
                let r = decode_record(&v2).unwrap();
                assert_eq!(r.shingles, shingles);
                assert_eq!(r.selection.as_deref(), Some(&*bits), "n = {n}");
                assert_eq!(record_gen(&v2), Some(9));
                let head = decode_head(&v2).unwrap();
                assert_eq!((head.gen, head.id.as_str()), (9, "doc"));
                // Positions cost about a byte each at the winnowing density.
                let v1 = encode_record(9, 10, 11, "doc", Some("{}"), &shingles, None);
                assert!(v2.len() <= v1.len() + 2 + 2 * winnow::count(&bits));
            }
            let v1 = encode_record(9, 10, 11, "doc", None, &shingles, None);
            assert_eq!(v1[0], RECORD_VERSION_1);
            let r = decode_record(&v1).unwrap();
            assert_eq!((r.shingles.len(), r.selection), (n, None));
        }
    }

    #[test]
    fn posting_hashes_spread_and_never_share_a_band_tag() {
        let k = Keys::new("nd1", "default", 3);
        assert_eq!(k.posting_bits(), 3 + POSTING_EXTRA_BITS);
        assert_eq!(k.posting_keys().count(), 256);
        // Window minima are small numbers: the mix still spreads them.
        let mut used = std::collections::HashSet::new();
        for fp in 0..4096u32 {
            used.insert(k.posting_group_of(fp));
        }
        assert!(used.len() > 240, "{}", used.len());
        let key = k.posting(12345);
        assert!(key.starts_with("nd1:default:f:{f."), "{key}");
        // 16 posting hashes a slot tag, each its own key.
        let tag = |key: &str| key[key.find('{').unwrap()..=key.find('}').unwrap()].to_owned();
        let keys: Vec<String> = k.posting_keys().collect();
        assert_eq!(tag(&keys[0]), tag(&keys[15]));
        assert_ne!(tag(&keys[15]), tag(&keys[16]));
        assert_eq!(keys[17], "nd1:default:f:{f.1}:11");
        assert_eq!(
            keys.iter()
                .map(|k| tag(k))
                .collect::<std::collections::HashSet<_>>()
                .len(),
            16
        );
        assert!(k.posting_keys().any(|p| p == key));
        assert_eq!(Keys::new("p", "c", 24).posting_bits(), 24);
    }

    #[test]
    fn members_pack_iid_and_gen() {
        let mut v = Vec::new();
        v.extend_from_slice(&member(7, 9));
        v.extend_from_slice(&member(u64::MAX, u32::MAX));
        v.push(1); // a torn tail is ignored
        assert_eq!(
            members(&v).collect::<Vec<_>>(),
            vec![(7, 9), (u64::MAX, u32::MAX)]
        );
    }

    #[test]
    fn groups_are_sized_for_a_few_hundred_fields() {
        assert_eq!(group_bits_for(1), 0);
        assert_eq!(group_bits_for(256), 0);
        assert_eq!(group_bits_for(257), 1);
        assert_eq!(group_bits_for(1_000_000), 12);
        let k = Keys::new("nd1", "default", 12);
        assert_eq!(k.group_of(u64::MAX), 4095);
        assert_eq!(k.group_of(0), 0);
        assert_eq!(Keys::new("p", "c", 0).group_of(u64::MAX), 0);
        assert_eq!(k.record(255), "nd1:default:r:{00000000000000ff}");
        assert_eq!(k.group(3, u64::MAX), "nd1:default:g:{3.fff}");
        assert_eq!(k.meta(), "{nd1:default}:meta");
    }

    #[test]
    fn due_buckets_share_the_metadata_slot_and_count_from_the_right_time() {
        // 2026-11-24 03:59:59.999 and 04:00:00.000 UTC: adjacent minutes.
        let (a, b) = (1_795_492_799_999u64, 1_795_492_800_000u64);
        assert_eq!(a / 60_000 + 1, b / 60_000);
        assert_eq!(due_of(a, 0), (Due::Created, a / 60_000));
        assert_eq!(
            due_of(a, b),
            (Due::Own, b / 60_000),
            "its own expiry counts"
        );
        assert_eq!(due_of(0, 0), (Due::Created, 0));
        let k = Keys::new("nd1", "actualités", 12);
        assert_eq!(k.due_set(Due::Own), "{nd1:actualités}:x:e");
        assert_eq!(k.due_bucket(Due::Created, 7), "{nd1:actualités}:x:c:7");
        // One hash tag for all of them: a script may touch them together.
        let tag = |key: &str| key[1..key.find('}').unwrap()].to_owned();
        for key in [
            k.due_set(Due::Created),
            k.due_bucket(Due::Own, b / 60_000),
            k.counter(),
        ] {
            assert_eq!(tag(&key), tag(&k.meta()), "{key}");
        }
    }

    #[test]
    fn events_keys_share_the_metadata_slot_whatever_the_subscription_id() {
        let k = Keys::new("nd1", "nouvelles.0123456789ab", 12);
        assert_eq!(k.events(), "{nd1:nouvelles.0123456789ab}:ev");
        // The slot is the first {…} of the key (Redis's hash tag rule), so
        // a subscription id with braces cannot move its keys elsewhere.
        let slot_tag = |key: &str| {
            let open = key.find('{').unwrap();
            let close = open + key[open..].find('}').unwrap();
            key[open + 1..close].to_owned()
        };
        let meta = slot_tag(&k.meta());
        let mut keys = vec![
            k.events(),
            k.subscriptions(),
            k.subscriptions_version(),
            k.decisions(),
            k.decisions_version(),
        ];
        for sub in ["wh_0193a", "{other}", "wh_}{", "Über-Abo"] {
            keys.extend(k.event_sub_keys(sub));
        }
        for key in &keys {
            assert_eq!(slot_tag(key), meta, "{key}");
        }
        // Each subscription's keys are its own.
        let a: std::collections::HashSet<String> = k.event_sub_keys("a").into();
        assert!(k.event_sub_keys("b").iter().all(|key| !a.contains(key)));
        assert_eq!(a.len(), 4);
    }
}
