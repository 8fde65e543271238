//! Word hashes: each word of the normalized text hashed once to 64 bits.
//!
//! Word shingles are combined from these (see [`super::shingle`]), so no
//! shingle is ever re-read byte by byte: a word costs one hash however many
//! shingles it belongs to.
//!
//! **The word hash.** The word's bytes are read as little-endian 64-bit
//! chunks (the last one zero-padded); each chunk is folded into the state
//! with `step(h, c) = (h ⊕ c)·M rotl 31` from a seed-derived key, and the
//! length enters the finalizer: `fmix64(h + len·L)` (MurmurHash3's 64-bit
//! finalizer, a bijection with full avalanche). `step` is a bijection of the
//! chunk for a fixed state, so two distinct words of one chunk (≤ 8 bytes, most
//! words) and equal length never collide; other collisions need a 64-bit
//! coincidence. The definition is byte-exact and tested against golden values:
//! shingle hashes are persisted.
//!
//! **The fused ASCII scanner.** For ASCII text (most text, checked with one
//! vectorized pass) [`ascii_word_hashes`] applies the normalization recipe
//! and hashes words through a 128-entry table ([`AsciiTable`]), without
//! building the normalized string (its words are written back to back, with
//! their offsets, and hashed in a second pass). The
//! recipe guarantees that this is the same thing: in the normalized text, a
//! word is the kept bytes between two whitespace runs (stripped bytes join,
//! they never split), and the words are what [`word_hashes`] reads back from
//! the normalized string; a property test holds the two paths equal.

use super::normalize::AsciiTable;

/// Multiplier of the chunk step (odd; from SplitMix64's output constants).
const M: u64 = 0xbf58_476d_1ce4_e5b9;
/// Multiplier of the length in the finalizer.
const L: u64 = 0x94d0_49bb_1331_11eb;
/// Salt separating the word-hash key from other seed-derived values.
const WORD_SALT: u64 = 0x776f_7264_6861_7368;

/// The per-seed key the word hash starts from.
pub(crate) fn word_key(seed: u64) -> u64 {
    let mut state = seed ^ WORD_SALT;
    crate::minhash::splitmix64(&mut state)
}

#[inline(always)]
fn step(h: u64, chunk: u64) -> u64 {
    (h ^ chunk).wrapping_mul(M).rotate_left(31)
}

/// MurmurHash3's 64-bit finalizer.
#[inline(always)]
pub(crate) fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[inline(always)]
fn finish(h: u64, len: usize) -> u64 {
    fmix64(h.wrapping_add((len as u64).wrapping_mul(L)))
}

/// The hash of one word (any bytes; normally a word of normalized text).
#[inline]
pub fn word_hash(word: &[u8], key: u64) -> u64 {
    let mut h = key;
    let mut chunks = word.chunks_exact(8);
    for c in &mut chunks {
        h = step(h, u64::from_le_bytes(c.try_into().expect("8 bytes")));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut buf = [0u8; 8];
        buf[..rest.len()].copy_from_slice(rest);
        h = step(h, u64::from_le_bytes(buf));
    }
    finish(h, word.len())
}

/// Append the hash of every word of `normalized` (words separated by single
/// spaces, as [`normalize`](super::normalize()) leaves them) to `out`.
pub fn word_hashes(normalized: &str, key: u64, out: &mut Vec<u64>) {
    if normalized.is_empty() {
        return;
    }
    out.extend(normalized.split(' ').map(|w| word_hash(w.as_bytes(), key)));
}

/// `MASKS[l]` keeps the low `l` bytes of a little-endian chunk.
const MASKS: [u64; 9] = {
    let mut m = [0u64; 9];
    let mut l = 1;
    while l < 9 {
        m[l] = u64::MAX >> (64 - 8 * l);
        l += 1;
    }
    m
};

/// Reusable buffers of [`ascii_word_hashes`].
#[derive(Debug, Default)]
pub(crate) struct AsciiScratch {
    /// The kept bytes of the text with no separators, then 16 bytes of slack.
    bytes: Vec<u8>,
    /// Where each word but the first starts in `bytes`, then where the last ends.
    starts: Vec<u32>,
}

impl AsciiScratch {
    pub(crate) fn trim(&mut self) {
        if self.bytes.capacity() > 1 << 20 {
            *self = Self::default();
        }
    }
}

/// Normalize ASCII `text` with `table` and append its word hashes to `out`;
/// equal to normalizing and then calling [`word_hashes`].
///
/// Two passes, neither with a data-dependent branch (word boundaries are
/// unpredictable, and a mispredicted branch per word cost more than the rest
/// of the work): the first writes the kept bytes back to back, and the start
/// of every word, always storing and advancing the cursors by 0 or 1; the
/// second hashes each word by reading it as two 8-byte chunks masked to its
/// length (a word longer than 16 bytes, rare, continues in a loop).
pub(crate) fn ascii_word_hashes(
    text: &[u8],
    table: &AsciiTable,
    key: u64,
    scratch: &mut AsciiScratch,
    out: &mut Vec<u64>,
) {
    debug_assert!(text.is_ascii());
    let AsciiScratch { bytes, starts } = scratch;
    bytes.clear();
    starts.clear();
    // Leading whitespace and stripped bytes first, so that in the main loop
    // a whitespace byte always follows a word (one condition less per byte).
    let Some(first) = text
        .iter()
        .position(|&raw| table.class(raw) < AsciiTable::SPACE)
    else {
        return;
    };
    // Blocks of `BLOCK` bytes go through fixed-size stack buffers indexed
    // modulo their size, so the loop has no bounds checks: an output index
    // never exceeds the input index, so it never actually wraps.
    const BLOCK: usize = 256;
    let mut kept_bytes = [0u8; BLOCK];
    let mut word_starts = [0u32; BLOCK];
    let mut n = 0usize;
    // A whitespace byte came after the last kept byte.
    let mut pending = 0usize;
    for block in text[first..].chunks(BLOCK) {
        let (mut nb, mut mb) = (0usize, 0usize);
        for &raw in block {
            let c = table.class(raw);
            let kept = usize::from(c < AsciiTable::SPACE);
            word_starts[mb % BLOCK] = (n + nb) as u32;
            mb += kept & pending;
            kept_bytes[nb % BLOCK] = c;
            nb += kept;
            // Kept → 0, whitespace → 1, stripped → unchanged (a select).
            pending = if c == AsciiTable::DROP {
                pending
            } else {
                usize::from(c == AsciiTable::SPACE)
            };
        }
        bytes.extend_from_slice(&kept_bytes[..nb]);
        starts.extend_from_slice(&word_starts[..mb]);
        n += nb;
    }
    // Slack for the 16-byte reads of the second pass.
    bytes.extend_from_slice(&[0; 16]);
    starts.push(n as u32);
    let mut start = 0usize;
    for &end in starts.iter() {
        let end = end as usize;
        out.push(hash_at(bytes, start, end, key));
        start = end;
    }
}

/// [`word_hash`] of `bytes[start..end]`, where `bytes` extends at least 16
/// bytes past `end`.
#[inline(always)]
fn hash_at(bytes: &[u8], start: usize, end: usize, key: u64) -> u64 {
    let len = end - start;
    let c0 = u64::from_le_bytes(bytes[start..start + 8].try_into().expect("8 bytes"));
    let c1 = u64::from_le_bytes(bytes[start + 8..start + 16].try_into().expect("8 bytes"));
    let one = step(key, c0 & MASKS[len.min(8)]);
    let two = step(one, c1 & MASKS[len.saturating_sub(8).min(8)]);
    let mut h = if len > 8 { two } else { one };
    if len > 16 {
        let mut chunks = bytes[start + 16..end].chunks(8);
        for c in &mut chunks {
            let mut buf = [0u8; 8];
            buf[..c.len()].copy_from_slice(c);
            h = step(h, u64::from_le_bytes(buf));
        }
    }
    finish(h, len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{normalize, NormalizeOptions};
    use proptest::prelude::*;

    #[test]
    fn word_hashes_are_stable_across_releases() {
        // Persisted shingle sets depend on these exact values (also computed
        // by an independent Python transcription of the module docs).
        let key = word_key(1);
        assert_eq!(key, 0x3b82_413b_c723_bd62);
        assert_eq!(word_hash(b"the", key), 0xec0d_9f7f_1254_c16d);
        assert_eq!(word_hash(b"nightfall", key), 0xbaa1_766c_b1a2_2a33);
        assert_eq!(word_hash(b"", key), fmix64(key));
    }

    #[test]
    fn words_of_different_length_or_content_differ() {
        let key = word_key(7);
        let words = [
            "a",
            "a\0",
            "b",
            "ab",
            "ba",
            "abcdefgh",
            "abcdefgh\0",
            "abcdefghi",
        ];
        let hashes: std::collections::HashSet<u64> =
            words.iter().map(|w| word_hash(w.as_bytes(), key)).collect();
        assert_eq!(hashes.len(), words.len());
    }

    fn fused(text: &str, opts: &NormalizeOptions, key: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut scratch = AsciiScratch::default();
        ascii_word_hashes(
            text.as_bytes(),
            AsciiTable::new(opts),
            key,
            &mut scratch,
            &mut out,
        );
        out
    }

    fn two_pass(text: &str, opts: &NormalizeOptions, key: u64) -> Vec<u64> {
        let mut out = Vec::new();
        word_hashes(&normalize(text, opts), key, &mut out);
        out
    }

    #[test]
    fn the_fused_scanner_reads_the_examples_md_words() {
        let opts = NormalizeOptions::default();
        let text = "I can see moon is red, the night is dark.";
        let key = word_key(1);
        let want: Vec<u64> = "i can see moon is red the night is dark"
            .split(' ')
            .map(|w| word_hash(w.as_bytes(), key))
            .collect();
        assert_eq!(fused(text, &opts, key), want);
        assert_eq!(
            fused("  -- don't,\tstop ..", &opts, key),
            two_pass("dont stop", &opts, key)
        );
        assert!(fused(" ... ", &opts, key).is_empty());
    }

    proptest! {
        #[test]
        fn the_fused_ascii_scanner_equals_normalize_then_split(
            text in "[\\x00-\\x7f]{0,120}|([a-zA-Z_0-9]{1,40}[ \t\n.,'-]{1,3}){0,30}",
            lowercase: bool,
            strip: bool,
            seed: u64,
        ) {
            let opts = NormalizeOptions { nfkc: true, lowercase, strip_punctuation: strip };
            let key = word_key(seed);
            prop_assert_eq!(fused(&text, &opts, key), two_pass(&text, &opts, key));
        }
    }
}
