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
//! **The fused ASCII scanner.** For ASCII text (a text with no non-ASCII
//! byte; any other text takes the Unicode scanner, see `utf8_word_hashes`)
//! `ascii_word_states` applies the normalization recipe and hashes words
//! without building the normalized string: it finds runs
//! of kept bytes 64 at a time with bit masks (SSE2, AVX2 or AVX-512 compares, see `kernel`) and hashes each word
//! straight from the text (lowercasing 8 bytes at once). The
//! recipe guarantees that this is the same thing: in the normalized text, a
//! word is the kept bytes between two whitespace runs (stripped bytes join,
//! they never split), and the words are what [`word_hashes`] reads back from
//! the normalized string; a property test holds the two paths equal.
//!
//! **Version 2's words** (`super::tokens`: a character of the scripts
//! written without spaces is a word of its own, with the attaching
//! characters after it) never reach the ASCII scanner (ASCII has none).
//! The Unicode scanner makes each plain solo character (the table's
//! `SOLO`, one output character) a run of its own in its bit masks (see
//! `unicode_word_states`), so Chinese and Japanese words are hashed in
//! lanes as any short word is; the rarer cases (several output characters,
//! an attaching character after a solo or stripped one) are in zones,
//! normalized in full and cut by `tokens::for_each_word`, the function
//! that cuts the reference's words.

use super::kernel::{classify_utf8, ScanKernels};
use super::normalize::AsciiTable;
use super::tokens::{for_each_word, WordSplit};
use super::unicode::{self, CharTable, Kind};

/// Multiplier of the chunk step (odd; from SplitMix64's output constants).
pub(super) const M: u64 = 0xbf58_476d_1ce4_e5b9;
/// Multiplier of the length in the finalizer.
pub(super) const L: u64 = 0x94d0_49bb_1331_11eb;
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

/// A word's *state*: its hash before the finalizer (`fmix64` of the state
/// is the hash). The scanners write states and their entry point,
/// [`utf8_word_hashes`], finalizes all of a text's words in one pass over
/// lanes ([`finish_lanes`], through `kernel::finish_words`).
#[inline(always)]
fn unfinished(h: u64, len: usize) -> u64 {
    h.wrapping_add((len as u64).wrapping_mul(L))
}

/// The hash of one word (any bytes; normally a word of normalized text).
#[inline]
pub fn word_hash(word: &[u8], key: u64) -> u64 {
    fmix64(word_state(word, key))
}

/// Finalize word states in place into word hashes: `fmix64` of each, a
/// loop over lanes that [`super::kernel::finish_words`] compiles for
/// AVX-512 where the CPU has it.
#[inline(always)]
pub(super) fn finish_lanes(states: &mut [u64]) {
    for x in states {
        *x = fmix64(*x);
    }
}

/// The state ([`unfinished`]) of [`word_hash`].
#[inline]
fn word_state(word: &[u8], key: u64) -> u64 {
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
    unfinished(h, word.len())
}

/// Append the hash of every word of `normalized` (as
/// [`normalize`](super::normalize()) leaves it: single spaces, none at
/// either end) to `out`, the words cut by `split` (the recipe version's
/// rule, [`super::tokens`]).
pub fn word_hashes(normalized: &str, split: WordSplit, key: u64, out: &mut Vec<u64>) {
    if normalized.is_empty() {
        return;
    }
    let first = out.len();
    word_states(normalized, split, key, out);
    finish_lanes(&mut out[first..]);
}

/// [`word_hashes`], unfinished: the words' states.
fn word_states(normalized: &str, split: WordSplit, key: u64, out: &mut Vec<u64>) {
    let bytes = normalized.as_bytes();
    for_each_word(normalized, split, |s, e| {
        out.push(word_state(&bytes[s..e], key))
    });
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

/// Reusable buffers of [`ascii_word_states`].
#[derive(Debug, Default)]
pub(crate) struct AsciiScratch {
    /// The kept bytes of the text with no separators, then 16 bytes of slack.
    bytes: Vec<u8>,
    /// Where each word but the first starts in `bytes`, then where the last
    /// ends (scalar scanner); where each kept run starts, with [`JOINED`]
    /// set if it continues the previous run's word (word scanner).
    starts: Runs,
    /// Where each kept run ends (word scanner).
    ends: Runs,
    /// A word gathered from several runs or transcoded character by character.
    word: Vec<u8>,
    /// Word scanner: each short word's two 8-byte chunks and length, and
    /// the states of the other words by their index.
    lanes: Vec<[u64; 3]>,
    patches: Vec<(usize, u64)>,
    /// Word scanners with [`ScanKernels::words`]: the words it left to
    /// hash, by their index and first run.
    deferred: Vec<(usize, usize)>,
    /// Unicode scanner, texts of long words: each word's three 8-byte
    /// chunks and its length.
    wide: Vec<[u64; 4]>,
    /// Unicode scanner: where each kept character that needs transcoding
    /// ([`Kind::Map`], [`Kind::Multi`]) starts.
    gathers: Vec<u32>,
    /// Unicode scanner: where each [`Kind::Slow`] character starts, then
    /// the zones around them that take the full normalizer.
    dirty: Vec<u32>,
    zones: Vec<(u32, u32)>,
    /// The normalized text of one zone.
    norm: String,
}

impl AsciiScratch {
    pub(crate) fn trim(&mut self) {
        // `lanes` holds 24 bytes a word: a text of one-letter words under
        // the 1 MiB of `bytes` can grow it to 12 MiB.
        if self.bytes.capacity() > 1 << 20
            || self.norm.capacity() > 1 << 20
            || self.lanes.capacity() > 1 << 16
            || self.wide.capacity() > 1 << 16
            || self.deferred.capacity() > 1 << 16
        {
            *self = Self::default();
        }
    }
}

/// Normalize ASCII `text` with `table` and append its word states to `out`
/// (hashes before the finalizer, [`unfinished`]); the states of normalizing
/// and then calling [`word_hashes`].
///
/// Two passes, neither with a data-dependent branch (word boundaries are
/// unpredictable, and a mispredicted branch per word cost more than the rest
/// of the work): the first writes the kept bytes back to back, and the start
/// of every word, always storing and advancing the cursors by 0 or 1; the
/// second hashes each word by reading it as two 8-byte chunks masked to its
/// length (a word longer than 16 bytes, rare, continues in a loop).
pub(crate) fn ascii_word_states_scalar(
    text: &[u8],
    table: &AsciiTable,
    key: u64,
    scratch: &mut AsciiScratch,
    out: &mut Vec<u64>,
) {
    debug_assert!(text.is_ascii());
    let AsciiScratch { bytes, starts, .. } = scratch;
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
    for &end in starts.as_slice() {
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
    unfinished(h, len)
}

/// `x` with every byte set to `b`.
pub(super) const fn rep(b: u8) -> u64 {
    0x0101_0101_0101_0101 * b as u64
}

/// High bit of each byte of `x` (all bytes < 0x80) that lies in `lo..=hi`.
#[inline(always)]
pub(super) fn in_range(x: u64, lo: u8, hi: u8) -> u64 {
    x.wrapping_add(rep(0x80 - lo)) & !x.wrapping_add(rep(0x7f - hi)) & rep(0x80)
}

/// The high bits of the bytes of `x` (no other bits set) as an 8-bit mask,
/// byte i → bit i. With [`rep`] and [`in_range`], also the portable byte
/// classifier's (`kernel::classify_utf8_swar`).
#[cfg_attr(all(target_arch = "x86_64", not(test)), allow(dead_code))]
#[inline(always)]
pub(super) fn movemask(x: u64) -> u64 {
    (x >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56
}

/// 8 ASCII bytes lowercased where `case` is all ones (as they are
/// hashed: [`hash_run`], [`short_states`]), unchanged where it is 0.
#[inline(always)]
fn lower(x: u64, case: u64) -> u64 {
    x | ((in_range(x, b'A', b'Z') >> 2) & case)
}

/// 8 bytes of UTF-8 with their ASCII letters lowercased where `case` is
/// all ones ([`hash_run`], [`short_states`]): [`lower`] of the
/// bytes below 0x80, the others unchanged.
#[inline(always)]
fn lower_utf8(x: u64, case: u64) -> u64 {
    x | (((in_range(x & rep(0x7f), b'A', b'Z') & !x) >> 2) & case)
}

/// [`lower_utf8`] with `UTF8`, else [`lower`].
#[inline(always)]
fn lowered<const UTF8: bool>(x: u64, case: u64) -> u64 {
    if UTF8 {
        lower_utf8(x, case)
    } else {
        lower(x, case)
    }
}

/// Flag of a run start in [`AsciiScratch::starts`]: the run continues the
/// word of the previous run (only stripped bytes between them).
pub(super) const JOINED: u32 = 1 << 31;

/// Normalize ASCII `text` with `table` and append its word states to `out`
/// (hashes before the finalizer, [`unfinished`]); the states of normalizing
/// and then calling [`word_hashes`].
///
/// Word at a time. The first pass classifies 64 bytes at once
/// ([`classify_utf8`]) into bit masks of kept and whitespace bytes and turns them
/// into the start and end of every run of kept bytes, flagging the runs that
/// continue the previous run's word (the gap between them is all stripped
/// bytes: "don't"). Branches are per run, not per byte. The second pass
/// hashes each word from the text, lowercasing 8 bytes at once: from
/// [`LANES_MIN`] runs on, the words of one run and at most 16 bytes (nearly
/// all) are read as two 8-byte chunks into lanes and hashed in a loop over
/// lanes ([`short_states`]; compiled for AVX-512 by
/// [`super::kernel::word_states`], articles' word stage 1,256 → 1,133–1,154 ns
/// in `sign_bench`, docs/s +7%), the others one by one; a word made of
/// several runs (rare) is gathered into a buffer first. Inlined, so that
/// `kernel::word_states` compiles it for each instruction set.
#[inline(always)]
pub(crate) fn ascii_word_states(
    kernels: impl ScanKernels,
    text: &[u8],
    table: &AsciiTable,
    key: u64,
    scratch: &mut AsciiScratch,
    out: &mut Vec<u64>,
) {
    debug_assert!(text.is_ascii());
    if text.len() >= JOINED as usize {
        return ascii_word_states_scalar(text, table, key, scratch, out);
    }
    let lowercase = table.class(b'A') == b'a';
    let strip = table.class(b'.') == AsciiTable::DROP;
    let AsciiScratch {
        bytes,
        starts,
        ends,
        word,
        lanes,
        patches,
        deferred,
        ..
    } = scratch;
    starts.clear();
    ends.clear();
    // Kept/stripped state carried across blocks: the last byte was kept; a
    // run of stripped bytes that follows a kept byte reaches the block end.
    let (mut carry_kept, mut carry_drop) = (0u64, 0u64);
    for (b, chunk) in text.chunks(64).enumerate() {
        let base = (b * 64) as u32;
        let (kept, space, valid) = if let Ok(block) = <&[u8; 64]>::try_from(chunk) {
            let (k, s, _, _) = classify_utf8(block, strip);
            (k, s, u64::MAX)
        } else {
            let mut block = [0u8; 64];
            block[..chunk.len()].copy_from_slice(chunk);
            let valid = (1u64 << chunk.len()) - 1;
            let (k, s, _, _) = classify_utf8(&block, strip);
            (k & valid, s & valid, valid)
        };
        let drop = valid & !(kept | space);
        let after_kept = (kept << 1) | carry_kept;
        carry_kept = kept >> 63;
        let run_starts = kept & !after_kept;
        let run_ends = !kept & after_kept;
        // Adding the first bit of each stripped run that follows a kept byte
        // carries through the run to the byte just after it: a kept byte
        // there starts a run that joins the previous one.
        let (t, c1) = drop.overflowing_add(drop & after_kept);
        let (t, c2) = t.overflowing_add(carry_drop);
        carry_drop = u64::from(c1 | c2);
        let joins = t & !drop & kept;
        push_runs(starts, run_starts, base, joins, kernels);
        push_runs(ends, run_ends, base, 0, kernels);
    }
    if carry_kept != 0 {
        ends.push(text.len() as u32);
    }
    debug_assert_eq!(starts.len(), ends.len());
    if starts.is_empty() {
        return;
    }
    // The text with slack for 16-byte reads past a word's end (24 for
    // `ScanKernels::words`).
    bytes.clear();
    bytes.extend_from_slice(text);
    bytes.extend_from_slice(&[0; 24]);
    let case = if lowercase { u64::MAX } else { 0 };
    let n = starts.len();
    // Equal lengths, so that indexing `ends` by a run of `starts` is unchecked.
    let (starts, ends) = (&starts.as_slice()[..n], &ends.as_slice()[..n]);
    let first = out.len();
    // In vector lanes, 8 runs at a time (no wall: nothing to transcode).
    // Articles' word stage 850 → 755 ns, signing 680k → 693k docs/s
    // (`sign_bench`, 3 alternating runs, Zen 4).
    if n >= LANES_MIN {
        if let Some((runs, words)) = kernel_words(
            kernels,
            bytes,
            starts,
            ends,
            0,
            usize::MAX,
            false,
            key,
            case,
            out,
            first,
            deferred,
            word,
        ) {
            debug_assert_eq!(runs, n, "no wall stops it");
            out.truncate(first + words);
            return;
        }
    }
    out.resize(first + n, 0);
    let dest = &mut out[first..];
    // The word that runs `i..` make, gathered in `word`: its state and the
    // next word's first run (the loop over lanes takes `joined_word`; here
    // its larger code cost more than it saved).
    let mut joined = |i: usize| {
        let j = word_runs_end(starts, i);
        (
            long_joined_state(bytes, &starts[i..j], &ends[i..j], key, case, word),
            j,
        )
    };
    let joins_next = |i: usize| starts.get(i + 1).is_some_and(|&s| s & JOINED != 0);
    let mut w = 0;
    let mut i = 0;
    if n < LANES_MIN {
        while i < n {
            if joins_next(i) {
                (dest[w], i) = joined(i);
            } else {
                let (start, end) = ((starts[i] & !JOINED) as usize, ends[i] as usize);
                dest[w] = hash_run::<false>(bytes, start, end, key, case);
                i += 1;
            }
            w += 1;
        }
        out.truncate(first + w);
        return;
    }
    // Each word of one run and at most 16 bytes (nearly all) is gathered as
    // its two 8-byte chunks and its length into lanes, hashed below in a loop
    // over lanes that LLVM vectorizes; the others (joined runs, long words)
    // are hashed here, given an empty lane (a lane's index is its word's)
    // and patched in after. Lanes are pushed, not written into a buffer
    // zeroed first: the word stage 1,028–1,048 → 1,007–1,019 ns an article
    // (`sign_bench`, 3 alternating runs).
    let load = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    lanes.clear();
    lanes.reserve(n);
    patches.clear();
    while i < n {
        if joins_next(i) {
            let state;
            (state, i) = joined_word(bytes, starts, ends, i, key, case, word);
            patches.push((lanes.len(), state));
            lanes.push([0; 3]);
        } else {
            let (start, end) = ((starts[i] & !JOINED) as usize, ends[i] as usize);
            if end - start > 16 {
                patches.push((lanes.len(), hash_run::<false>(bytes, start, end, key, case)));
                lanes.push([0; 3]);
            } else {
                lanes.push([load(start), load(start + 8), (end - start) as u64]);
            }
            i += 1;
        }
    }
    let w = lanes.len();
    short_states::<false>(&lanes[..w], key, case, &mut dest[..w]);
    for &(at, state) in patches.iter() {
        dest[at] = state;
    }
    out.truncate(first + w);
}

/// Fewest runs for which [`ascii_word_states`] hashes short words in lanes
/// (below it, gathering them costs more than the lanes save: texts of a
/// few words).
const LANES_MIN: usize = 16;

/// The states of words of at most 16 bytes, each given as its two 8-byte
/// chunks (read past its end) and its length: [`hash_run`]'s arithmetic
/// (with `UTF8`, lowercasing only the ASCII bytes) with the byte masks
/// computed instead of looked up, in a loop over lanes without a branch,
/// so that LLVM vectorizes it
/// ([`super::kernel::word_states`] compiles it for AVX-512 or AVX2).
#[inline(always)]
fn short_states<const UTF8: bool>(lanes: &[[u64; 3]], key: u64, case: u64, dest: &mut [u64]) {
    // The low `l` bytes (l ≤ 8) of a chunk.
    let keep = |l: u64| {
        if l >= 8 {
            u64::MAX
        } else {
            !(u64::MAX << (8 * l))
        }
    };
    for (d, &[c0, c1, len]) in dest.iter_mut().zip(lanes) {
        let one = step(key, lowered::<UTF8>(c0, case) & keep(len.min(8)));
        let two = step(one, lowered::<UTF8>(c1, case) & keep(len.saturating_sub(8)));
        let h = if len > 8 { two } else { one };
        *d = unfinished(h, len as usize);
    }
}

/// A lane of [`word_loop`]: a word's first chunks and its length.
trait Lane: Copy {
    /// The longest word a lane holds.
    const MAX: usize;
    /// The lane of a word patched in later.
    const ZERO: Self;
    /// The lane of `bytes[start..end]` (at most `MAX` bytes; `bytes`
    /// extends `MAX` bytes past `start`).
    fn load(bytes: &[u8], start: usize, end: usize) -> Self;
    /// A lane of [`mapped_lane`] (a word of at most 16 bytes).
    fn from_short(lane: [u64; 3]) -> Self;
    /// The states of the words of `lanes` into `dest`.
    fn states(lanes: &[Self], key: u64, case: u64, dest: &mut [u64]);
}

#[inline(always)]
fn chunk(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

impl Lane for [u64; 3] {
    const MAX: usize = 16;
    const ZERO: Self = [0; 3];
    #[inline(always)]
    fn load(bytes: &[u8], start: usize, end: usize) -> Self {
        [
            chunk(bytes, start),
            chunk(bytes, start + 8),
            (end - start) as u64,
        ]
    }
    #[inline(always)]
    fn from_short(lane: [u64; 3]) -> Self {
        lane
    }
    #[inline(always)]
    fn states(lanes: &[Self], key: u64, case: u64, dest: &mut [u64]) {
        short_states::<true>(lanes, key, case, dest);
    }
}

impl Lane for [u64; 4] {
    const MAX: usize = 24;
    const ZERO: Self = [0; 4];
    #[inline(always)]
    fn load(bytes: &[u8], start: usize, end: usize) -> Self {
        [
            chunk(bytes, start),
            chunk(bytes, start + 8),
            chunk(bytes, start + 16),
            (end - start) as u64,
        ]
    }
    #[inline(always)]
    fn from_short([c0, c1, len]: [u64; 3]) -> Self {
        [c0, c1, 0, len]
    }
    #[inline(always)]
    fn states(lanes: &[Self], key: u64, case: u64, dest: &mut [u64]) {
        // The low `l` bytes (l ≤ 8) of a chunk.
        let keep = |l: u64| {
            if l >= 8 {
                u64::MAX
            } else {
                !(u64::MAX << (8 * l))
            }
        };
        for (d, &[c0, c1, c2, len]) in dest.iter_mut().zip(lanes) {
            let one = step(key, lower_utf8(c0, case) & keep(len));
            let two = step(one, lower_utf8(c1, case) & keep(len.saturating_sub(8)));
            let three = step(two, lower_utf8(c2, case) & keep(len.saturating_sub(16)));
            let h = if len > 16 {
                three
            } else if len > 8 {
                two
            } else {
                one
            };
            *d = unfinished(h, len as usize);
        }
    }
}

/// The state of the word whose first run is `starts[i]` and which the
/// runs after it flagged [`JOINED`] continue, and the index of the next
/// word's first run. [`joined_state`] gathers it on the stack; a word too
/// long for it, in `word`. In `sign_bench`, the articles' word stage went
/// 1,096–1,148 → 1,037–1,074 ns (3 alternating runs) against a closure
/// that gathered every joined word in `word` and that LLVM did not inline
/// (3.5% of the samples, for the 2% of the words that are joined).
#[inline(always)]
fn joined_word(
    bytes: &[u8],
    starts: &[u32],
    ends: &[u32],
    i: usize,
    key: u64,
    case: u64,
    word: &mut Vec<u8>,
) -> (u64, usize) {
    let j = word_runs_end(starts, i);
    let (starts, ends) = (&starts[i..j], &ends[i..j]);
    let state = joined_state(bytes, starts, ends, key, case)
        .unwrap_or_else(|| long_joined_state(bytes, starts, ends, key, case, word));
    (state, j)
}

/// One past the last run of the word whose first run is `starts[i]`
/// (the runs after it flagged [`JOINED`] continue it).
#[inline(always)]
fn word_runs_end(starts: &[u32], i: usize) -> usize {
    let mut j = i + 1;
    while j < starts.len() && starts[j] & JOINED != 0 {
        j += 1;
    }
    j
}

/// [`ScanKernels::words`] from run `from` up to `wall`, as both scanners
/// call it: the states written into `out` from `w` on (`out` first made
/// long enough for the kernel's whole groups), the words it leaves
/// (joined from three runs or more, or from two where it gathers, or longer
/// than a lane; before the wall, so kept bytes only)
/// hashed by [`left_word_state`], and the runs and words it took
/// returned; `None` without the kernel, `out` untouched.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn kernel_words(
    kernels: impl ScanKernels,
    bytes: &[u8],
    starts: &[u32],
    ends: &[u32],
    from: usize,
    wall: usize,
    wide: bool,
    key: u64,
    case: u64,
    out: &mut Vec<u64>,
    w: usize,
    deferred: &mut Vec<(usize, usize)>,
    word: &mut Vec<u8>,
) -> Option<(usize, usize)> {
    if !kernels.has_words() {
        return None;
    }
    let room = w + (starts.len() - from) + 8;
    if out.len() < room {
        out.resize(room, 0);
    }
    deferred.clear();
    let dest = &mut out[w..];
    let taken = kernels.words(
        bytes, starts, ends, from, wall, wide, key, case, dest, deferred,
    )?;
    for &(at, run) in deferred.iter() {
        out[w + at] = left_word_state(bytes, starts, ends, run, key, case, word);
    }
    Some(taken)
}

/// The state of a word that [`ScanKernels::words`] left to its caller,
/// whose first run is `run`: joined from several runs ([`joined_state`],
/// [`long_joined_state`]) or one run longer than a lane ([`hash_run`]);
/// kept bytes only, lowercased where `case` is all ones (UTF-8 or ASCII:
/// on ASCII bytes the two lowercasings agree).
#[inline]
fn left_word_state(
    bytes: &[u8],
    starts: &[u32],
    ends: &[u32],
    run: usize,
    key: u64,
    case: u64,
    word: &mut Vec<u8>,
) -> u64 {
    let j = word_runs_end(starts, run);
    if j == run + 1 {
        let (start, end) = ((starts[run] & !JOINED) as usize, ends[run] as usize);
        return hash_run::<true>(bytes, start, end, key, case);
    }
    let (runs, run_ends) = (&starts[run..j], &ends[run..j]);
    joined_state(bytes, runs, run_ends, key, case)
        .unwrap_or_else(|| long_joined_state(bytes, runs, run_ends, key, case, word))
}

/// Longest word [`joined_state`] gathers on the stack.
const JOINED_MAX: usize = 48;

/// The state of the word made of the runs `starts[r] & !JOINED ..
/// ends[r]` of `bytes` (kept bytes joined across stripped ones, none
/// transcoded: `l’homme`, `don't`), lowercased where `case` is all ones;
/// `None` if it is longer than [`JOINED_MAX`] bytes. `bytes` extends at
/// least 16 bytes past every run. The runs are copied 16 bytes at a time
/// (fixed-size moves, no `memcpy` call) into a stack buffer, each copy
/// overwriting the previous one's excess; [`hash_run`] reads the word
/// masked to its length, so what lies past it does not count. The same
/// state as copying the runs into a `Vec`, lowercasing and calling
/// `word_state` (a `memmove` per run was 5% of the French man pages' text
/// stage, where 9% of the words are joined runs; the text stage 13–15%
/// faster on French and German). In the ASCII scanner ([`joined_word`])
/// the same change once measured ~6% slower in `text_bench`, for a cause
/// not found; since the lanes it measures 7% faster.
#[inline(always)]
fn joined_state(bytes: &[u8], starts: &[u32], ends: &[u32], key: u64, case: u64) -> Option<u64> {
    let len = runs_len(starts, ends);
    if len > JOINED_MAX {
        return None;
    }
    let mut buf = [0u8; JOINED_MAX + 16];
    copy_runs(&mut buf, bytes, starts, ends);
    Some(hash_run::<true>(&buf, 0, len, key, case))
}

/// The length of the word made of the runs `starts[r] & !JOINED .. ends[r]`.
#[inline(always)]
fn runs_len(starts: &[u32], ends: &[u32]) -> usize {
    starts
        .iter()
        .zip(ends)
        .map(|(&s, &e)| e as usize - (s & !JOINED) as usize)
        .sum()
}

/// Copy the runs `starts[r] & !JOINED .. ends[r]` of `bytes` one after
/// another to the start of `buf`, 16 bytes at a time, each copy
/// overwriting the previous one's excess: `buf` holds at least their
/// length ([`runs_len`]) + 16 bytes, and `bytes` at least 16 past every run.
#[inline(always)]
fn copy_runs(buf: &mut [u8], bytes: &[u8], starts: &[u32], ends: &[u32]) {
    let mut at = 0;
    for (&s, &e) in starts.iter().zip(ends) {
        let (s, e) = ((s & !JOINED) as usize, e as usize);
        let mut from = s;
        while from < e {
            let to = at + (from - s);
            buf[to..to + 16].copy_from_slice(&bytes[from..from + 16]);
            from += 16;
        }
        at += e - s;
    }
}

/// [`joined_state`] of a word of any length (in both scanners, those
/// longer than [`JOINED_MAX`] bytes; in the ASCII scanner's texts of few
/// words, all), copied the same way (16 bytes at a time, each copy
/// overwriting the previous one's excess) into `word`, which keeps its
/// length from call to call: it is neither cleared nor zeroed per word, and
/// [`hash_run`] reads the word masked to its length. It replaced copies a
/// run at a time with `extend_from_slice`, a `memmove` call each (the ASCII
/// scanner's `gathered_state` did the same). Chinese and Japanese clauses
/// are such words (the stripped punctuation joins their runs: 38% of the
/// Chinese man pages' bytes are in words of more than 48 bytes, ~3 runs
/// each): Chinese 1.33 → 1.20 and 1.27 → 1.14 ns/byte, Japanese 1.29 → 1.21
/// and 1.20 → 1.15 (`text_bench`, two sets of 3 alternating runs).
fn long_joined_state(
    bytes: &[u8],
    starts: &[u32],
    ends: &[u32],
    key: u64,
    case: u64,
    word: &mut Vec<u8>,
) -> u64 {
    let len = runs_len(starts, ends);
    if word.len() < len + 16 {
        word.resize(len + 16, 0);
    }
    copy_runs(word, bytes, starts, ends);
    hash_run::<true>(word, 0, len, key, case)
}

/// Positions of runs (or words), appended 32 slots at a time by
/// [`push_runs`]: `slots` keeps its length between texts (its high-water
/// mark) and only `len` of it is live, so a block's 32 slots are written
/// once, by the scanner, not zeroed first. `Vec::resize` by 32 before each
/// block zeroed 128 bytes a call (through `memset`), twice a block: the man
/// pages' word stage 6,549–6,653 → 6,292–6,349 ns and signing 95.4k–97.0k →
/// 98.8k–100.0k docs/s, the articles' 694k–700k → 700k–707k (`sign_bench`,
/// 3 alternating runs, Zen 4).
#[derive(Debug, Default)]
pub(crate) struct Runs {
    slots: Vec<u32>,
    len: usize,
}

impl Runs {
    #[inline(always)]
    fn clear(&mut self) {
        self.len = 0;
    }

    #[inline(always)]
    fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    fn as_slice(&self) -> &[u32] {
        &self.slots[..self.len]
    }

    /// The `n` slots past the live ones (grown, zeroed, when there are
    /// fewer: only while `slots` reaches a new high-water mark).
    #[inline(always)]
    fn spare(&mut self, n: usize) -> &mut [u32] {
        let need = self.len + n;
        if self.slots.len() < need {
            self.grow(need);
        }
        &mut self.slots[self.len..need]
    }

    #[cold]
    fn grow(&mut self, need: usize) {
        self.slots.resize(need.max(2 * self.slots.len()).max(64), 0);
    }

    #[inline(always)]
    fn push(&mut self, x: u32) {
        self.spare(1)[0] = x;
        self.len += 1;
    }

    #[inline(always)]
    fn extend_from_slice(&mut self, xs: &[u32]) {
        self.spare(xs.len()).copy_from_slice(xs);
        self.len += xs.len();
    }
}

/// Append to `v` the position `base + i` of each set bit `i` of `bits`,
/// with [`JOINED`] set where bit `i` of `joins` is. A block of 64 bytes
/// holds at most 32 runs (each needs a byte that is not kept before it or
/// after it), so the 32 slots past `v`'s end are written by index (modulo
/// 32: no bounds or capacity check per run), then the runs found are
/// counted in. The positions used to go into a stack buffer appended with
/// one fixed-size copy, whose 64-byte loads of the just-written 4-byte
/// stores cannot be forwarded from the store buffer (`perf annotate` put
/// 12.7% of the word stage's samples on them, partly skid): writing in
/// place made the
/// articles' word stage 1,113–1,122 → 1,099–1,112 ns in `sign_bench` (3
/// alternating runs). Where the CPU has AVX-512 VBMI2 the positions come
/// from one compress instead of the loop over bits
/// ([`ScanKernels::run_positions`]), whose exit mispredicted about once a
/// call: `sign_bench`, 3 alternating runs, articles 789k–805k → 945k–973k
/// docs/s (word stage 816–829 → 633–753 ns), man pages 76.9k–79.1k →
/// 86.8k–87.8k.
#[inline(always)]
fn push_runs(v: &mut Runs, mut bits: u64, base: u32, joins: u64, kernels: impl ScanKernels) {
    let slots: &mut [u32; 32] = v
        .spare(32)
        .try_into()
        .unwrap_or_else(|_| unreachable!("32 slots"));
    let mut m = 0usize;
    if kernels.run_positions(bits, base, joins, slots) {
        m = bits.count_ones() as usize;
    } else {
        while bits != 0 {
            let i = bits.trailing_zeros();
            let flag = ((joins >> i) & 1) as u32;
            slots[m & 31] = (base + i) | (flag << 31);
            m += 1;
            bits &= bits - 1;
        }
    }
    v.len += m.min(32);
}

/// [`word_hash`] of `bytes[start..end]` lowercased where `case` is all
/// ones (ASCII; with `UTF8`, any UTF-8, of which only the ASCII letters are
/// lowercased), where `bytes` extends at least 16 bytes past `end`.
#[inline(always)]
fn hash_run<const UTF8: bool>(bytes: &[u8], start: usize, end: usize, key: u64, case: u64) -> u64 {
    let len = end - start;
    let load = |at: usize| {
        lowered::<UTF8>(
            u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes")),
            case,
        )
    };
    let c0 = load(start);
    let c1 = load(start + 8);
    let one = step(key, c0 & MASKS[len.min(8)]);
    let two = step(one, c1 & MASKS[len.saturating_sub(8).min(8)]);
    let mut h = if len > 8 { two } else { one };
    let mut at = start + 16;
    while at < end {
        h = step(h, load(at) & MASKS[(end - at).min(8)]);
        at += 8;
    }
    unfinished(h, len)
}

/// The code point whose UTF-8 encoding starts at `bytes[at]` (a lead byte
/// of valid UTF-8) and its length in bytes; `bytes` extends at least 3 bytes
/// past it. Branch-free: the lead byte's leading ones give the length, the
/// sequence is read big-endian and its payload bits gathered.
#[inline(always)]
fn decode(bytes: &[u8], at: usize) -> (u32, usize) {
    let w = u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let len = (!w).leading_zeros();
    let v = w >> (32 - 8 * len);
    let cp = (v & 0x3f) | ((v >> 2) & 0xfc0) | ((v >> 4) & 0x3_f000) | ((v >> 6) & 0x1c_0000);
    (cp & ((1 << (5 * len + 1)) - 1), len as usize)
}

/// Normalize `text` (any UTF-8) with `chars`' options and append its word
/// states to `out` (hashes before the finalizer, [`unfinished`]); the
/// states of normalizing and then calling [`word_hashes`].
///
/// The word scanner of [`ascii_word_states`], extended to UTF-8: ASCII bytes
/// are classified 64 at a time as there; each non-ASCII character is looked
/// up in the [`CharTable`] and marks its bytes as kept (a letter or digit
/// that is its own NFKC and lowercase: `é`, `д`, `日`), whitespace (NBSP,
/// U+3000) or stripped (`’`, `“`, `–`, `£`). A kept character whose output
/// differs (`É`, `Д`, `ﬁ`) is kept too and its word is transcoded into a
/// buffer before hashing. A character that interacts with its neighbours
/// under NFKC (a combining mark, a composing jamo) or whose output has
/// whitespace inside is *slow*: the text around it, out to the nearest
/// ASCII whitespace on either side, is a *zone* normalized by
/// [`unicode::normalize_into`] and split into words there
/// (`tokens::for_each_word`). In version 2 a *solo* character (the table's
/// [`unicode::SOLO`] with one output character: Han, kana, Thai; the BMP
/// kernel's `solo` mask) is a run of its own: its lead and the byte after
/// it cut runs, and no join crosses the stripped characters around it
/// (`你好，世界` is four words, not `你好世界`); an attaching character
/// ([`unicode::ATTACH`]) whose byte before is not of a kept character that
/// is not solo takes a zone, so that it attaches as the tokenizer decides.
/// In blocks without either this costs a test. ASCII whitespace
/// is a normalization boundary on both sides (it is NFKC-stable and
/// composes with nothing) and no word crosses it, so the zones' words and
/// the scanned words, in text order, are the words of the normalized text.
///
/// Words of one run, at most 16 bytes and with nothing to transcode (nearly
/// all, in Latin-script text) are hashed together in lanes by
/// [`short_states`], as in [`ascii_word_states`]: the text stage of the
/// man pages against their ASCII-folded twins went 1.32 / 1.33 / 1.49× →
/// 1.14 / 1.18 / 1.28× (fr / de / es, `text_bench`, 3 alternating runs).
/// In a text whose runs average [`WIDE_RUN`] bytes or more (Russian,
/// Chinese, Japanese) the lanes take words of up to 24 bytes, three chunks
/// ([`word_loop`] over `[u64; 4]` lanes): a fifth of the Russian words are
/// 17 to 24 bytes long. Russian 1.02 → 0.91, Chinese 1.07 → 1.05,
/// Japanese 1.08 → 1.03 ns/byte (`text_bench`, 3 alternating runs), the
/// man pages' word stage 5.18–5.24 → 5.01–5.09 µs in `sign_bench`. Such
/// lanes for every text cost French, German and Spanish 3–6%; lanes of 32
/// bytes cost Russian 3%.
#[inline(always)]
pub(crate) fn unicode_word_states(
    kernels: impl ScanKernels,
    text: &str,
    chars: &CharTable,
    key: u64,
    scratch: &mut AsciiScratch,
    out: &mut Vec<u64>,
) {
    let opts = *chars.options();
    let split = WordSplit::of(&opts);
    // `confusables` maps ASCII bytes too (`m` → `rn`), which the scanner
    // reads as themselves: such texts take the character table's
    // normalizer, then the words (its cost: docs/benchmarks.md).
    if text.len() >= FLAGGED || opts.confusables {
        let mut norm = std::mem::take(&mut scratch.norm);
        super::normalize_into(text, &opts, &mut norm);
        word_states(&norm, split, key, out);
        scratch.norm = norm;
        return;
    }
    let table = AsciiTable::new(&opts);
    let strip = opts.strip_punctuation;
    let AsciiScratch {
        bytes,
        starts,
        ends,
        word,
        lanes,
        wide,
        patches,
        deferred,
        gathers,
        dirty,
        zones,
        norm,
    } = scratch;
    starts.clear();
    ends.clear();
    gathers.clear();
    dirty.clear();
    zones.clear();
    // The text with slack for whole 64-byte blocks, 16-byte reads past a
    // word's end and 4-byte reads of a character, copied a block at a time
    // as the blocks are classified (for the word loop below), which read
    // the text itself. Copied whole first, the text was read twice, and the
    // copy took its cache misses alone: the man pages' word stage 5.50–5.74
    // → 5.37–5.39 µs and signing +1–2.4% (`sign_bench`, 3 alternating runs).
    bytes.clear();
    bytes.reserve(text.len() + 128);
    let whole = text;
    let text = text.as_bytes();
    let bmp = kernels.bmp_table(chars);
    let (mut carry_kept, mut carry_drop) = (0u64, 0u64);
    // Kept bits of a character that runs past its block's end.
    let mut spill = 0u64;
    // The same for a solo character's bytes (version 2: a solo character
    // is a word of its own, see below).
    let mut solo_spill = 0u64;
    // A dirty position was pushed out of order (an attaching character's,
    // found after its block's others).
    let mut unsorted = false;
    // The last blocks' 128 bytes, zero-padded past the text's end.
    let mut tail = [0u8; 128];
    for (b, chunk) in text.chunks(64).enumerate() {
        let base = b * 64;
        // This block and the next: the text itself but near its end.
        let window: &[u8; 128] = match text.get(base..base + 128) {
            Some(w) => w.try_into().expect("128 bytes"),
            None => {
                let rest = &text[base..];
                tail[..rest.len()].copy_from_slice(rest);
                tail[rest.len()..].fill(0);
                &tail
            }
        };
        let block: &[u8; 64] = window[..64].try_into().expect("64 bytes");
        let valid = if chunk.len() == 64 {
            u64::MAX
        } else {
            (1u64 << chunk.len()) - 1
        };
        let (kept, space, lead, cont) = classify_utf8(block, strip);
        let (mut kept, mut space, cont) = (kept & valid, space & valid, cont & valid);
        // Which non-ASCII characters are kept or whitespace, by their lead byte.
        let mut kept_leads = 0u64;
        // Version 2: the leads of solo characters the scanner cuts itself
        // (`unicode::solo_inline`), and of attaching characters, which are
        // checked once the block's classes are known.
        let (mut solo_leads, mut attach_leads) = (0u64, 0u64);
        let mut leads = lead & valid;
        // Two- or three-byte characters (dense Cyrillic, Greek, CJK...; any
        // number of Latin-1 ones): those leads at once; the loop below takes
        // the others and the ones flagged.
        // The kernel may hand back the block with its capitals lowercased
        // (two-byte ones of one table block, as Cyrillic's): the word loop
        // reads them from `bytes`, not flagged, so their words stay in the
        // lanes. The Russian man pages' word stage cost 0.93 ns/byte, their
        // lowercased text 0.68; now 0.80 (from 0.91, `text_bench`, 3
        // alternating runs; the man pages' word stage 5.24–5.48 → 4.99–5.26
        // µs in `sign_bench`, 5).
        let at = bytes.len();
        bytes.extend_from_slice(block);
        let dst: &mut [u8; 64] = (&mut bytes[at..]).try_into().expect("64 bytes");
        if let Some(t) = bmp.and_then(|bmp| kernels.bmp_entries(window, 0, leads, bmp, dst)) {
            kept_leads = t.kept;
            space |= t.space;
            solo_leads = t.solo;
            leads = (leads & !t.handled) | t.flagged;
        }
        while leads != 0 {
            let i = leads.trailing_zeros();
            leads &= leads - 1;
            let at = base + i as usize;
            let w = u32::from_le_bytes(window[i as usize..][..4].try_into().expect("4 bytes"));
            let entry = if w & 0xe0 == 0xc0 {
                chars.entry_low(((w & 0x1f) << 6) | ((w >> 8) & 0x3f))
            } else if w & 0xf0 == 0xe0 {
                chars.entry_bmp(((w & 0x0f) << 12) | ((w >> 2) & 0xfc0) | ((w >> 16) & 0x3f))
            } else {
                chars.entry_of(decode(window, i as usize).0)
            };
            kept_leads |= u64::from(entry & unicode::KEPT) << i;
            space |= u64::from((entry & unicode::SPACE) >> 1) << i;
            let flags = unicode::GATHER | unicode::SLOW | unicode::SOLO | unicode::ATTACH;
            if entry & flags != 0 {
                // A solo character whose output is several characters is
                // cut in its zone, as a slow one.
                if entry & unicode::SLOW != 0
                    || (entry & unicode::SOLO != 0 && !unicode::solo_inline(entry))
                {
                    dirty.push(at as u32);
                } else {
                    if entry & unicode::GATHER != 0 {
                        gathers.push(at as u32);
                    }
                    solo_leads |= u64::from(entry & unicode::SOLO != 0) << i;
                    attach_leads |= u64::from(entry & unicode::ATTACH != 0) << i;
                }
            }
        }
        // A kept character's continuation bytes are kept: carry the lead's
        // bit through the (at most three) continuation bytes after it, and
        // into this block from a character begun in the previous one.
        let mut k = kept_leads | (spill & cont);
        k |= (k << 1) & cont;
        k |= (k << 1) & cont;
        k |= (k << 1) & cont;
        spill = k >> 63;
        kept |= k;
        let base = base as u32;
        let drop = valid & !(kept | space);
        let after_kept = (kept << 1) | carry_kept;
        // Version 2's solo characters, each a run of its own that joins
        // neither the run before it nor the one after it (even across
        // stripped characters): their bytes, and the byte after each (a run
        // boundary where that byte is kept, and no join across the
        // stripped ones that start there). Latin, Cyrillic and version 1
        // text has none and takes the branch without them: computed for
        // every block, the masks cost the Russian man pages' text stage
        // 10% (the French and Spanish 9%).
        let (run_starts, run_ends, joining, not_solo) =
            if solo_leads | solo_spill | attach_leads == 0 {
                carry_kept = kept >> 63;
                (kept & !after_kept, !kept & after_kept, after_kept, u64::MAX)
            } else {
                let mut solo = solo_leads | (solo_spill & cont);
                solo |= (solo << 1) & cont;
                solo |= (solo << 1) & cont;
                solo |= (solo << 1) & cont;
                let solo_ends = ((solo << 1) | solo_spill) & !cont;
                if attach_leads != 0 {
                    // An attaching character continues the word before it:
                    // a word of the scanner's where the byte before it is
                    // of a kept character that is not solo; else (after a
                    // solo character, or stripped ones, whose word the text
                    // before decides) its zone cuts it as the reference does.
                    let kept_before = (kept << 1) | carry_kept;
                    let solo_before = (solo << 1) | solo_spill;
                    let mut check = attach_leads & !(kept_before & !solo_before);
                    while check != 0 {
                        dirty.push(base + check.trailing_zeros());
                        unsorted = true;
                        check &= check - 1;
                    }
                }
                solo_spill = solo >> 63;
                carry_kept = kept >> 63;
                let cut = solo_leads | solo_ends;
                (
                    kept & (!after_kept | cut),
                    after_kept & (!kept | cut),
                    after_kept & !solo_ends,
                    !solo_leads,
                )
            };
        let (t, c1) = drop.overflowing_add(drop & joining);
        let (t, c2) = t.overflowing_add(carry_drop);
        carry_drop = u64::from(c1 | c2);
        let joins = t & !drop & kept & not_solo;
        push_runs(starts, run_starts, base, joins, kernels);
        push_runs(ends, run_ends, base, 0, kernels);
    }
    bytes.extend_from_slice(&[0; 64]);
    if carry_kept != 0 {
        ends.push(text.len() as u32);
    }
    debug_assert_eq!(starts.len(), ends.len());
    if starts.is_empty() {
        return;
    }
    if unsorted {
        dirty.sort_unstable();
    }
    // Zones: from just after the ASCII whitespace before each slow
    // character to the ASCII whitespace after it, merged.
    let is_ws = |b: u8| matches!(b, b'\t'..=b'\r' | b' ');
    for &d in dirty.iter() {
        let d = d as usize;
        if zones.last().is_some_and(|&(_, end)| d < end as usize) {
            continue;
        }
        let start = text[..d]
            .iter()
            .rposition(|&b| is_ws(b))
            .map_or(0, |p| p + 1);
        let end = text[d..]
            .iter()
            .position(|&b| is_ws(b))
            .map_or(text.len(), |p| d + p);
        zones.push((start as u32, end as u32));
    }

    let (starts, ends) = (starts.as_slice(), ends.as_slice());
    if text.len() >= WIDE_RUN * starts.len() {
        word_loop(
            kernels, &opts, table, chars, whole, bytes, starts, ends, zones, gathers, key, wide,
            patches, deferred, norm, word, out,
        );
    } else {
        word_loop(
            kernels, &opts, table, chars, whole, bytes, starts, ends, zones, gathers, key, lanes,
            patches, deferred, norm, word, out,
        );
    }
}

/// Bytes a run of kept bytes takes on average in a text from which
/// [`unicode_word_states`] hashes words of up to 24 bytes in lanes
/// (Russian, Chinese, Japanese), not 16 (French, German, Spanish: wider
/// lanes cost their short words more than their few long ones gain).
const WIDE_RUN: usize = 9;

/// The word loop of [`unicode_word_states`], over lanes of type `L`.
///
/// With kernels that hash words in vector lanes ([`ScanKernels::words`],
/// the VBMI2 builds), the states go straight into `out`: the kernel takes
/// the words up to the first that ends past the wall (the next zone or
/// transcoded character), leaving the long ones among them and the
/// joined ones it does not splice to the loop here (kept bytes only:
/// `joined_state`, `hash_run`); the general path below takes the word at
/// the wall, and so on. The loop before, which these builds took too,
/// gathered every word of one short
/// run into a lane (its flags, a branch on its length and the wall, two or
/// three 8-byte loads and three or four stores), hashed the lanes in a
/// second pass and patched the other words in; it stopped at every joined
/// or long word, 9% of the French and German man pages' words. The man
/// pages' word stage 7,386 → 6,967 ns and signing 87.9k → 90.0k docs/s
/// (`sign_bench`, 3 alternating runs, Zen 4); French, German and Spanish
/// 1.381 / 1.264 / 1.225 → 1.200 / 1.149 / 1.059 ns/byte (`text_bench`, 3);
/// Russian, Chinese and Japanese equal.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn word_loop<L: Lane>(
    kernels: impl ScanKernels,
    opts: &super::NormalizeOptions,
    table: &AsciiTable,
    chars: &CharTable,
    whole: &str,
    bytes: &[u8],
    starts: &[u32],
    ends: &[u32],
    zones: &[(u32, u32)],
    gathers: &[u32],
    key: u64,
    lanes: &mut Vec<L>,
    patches: &mut Vec<(usize, u64)>,
    deferred: &mut Vec<(usize, usize)>,
    norm: &mut String,
    word: &mut Vec<u8>,
    out: &mut Vec<u64>,
) {
    let text = whole.as_bytes();
    let case = if opts.lowercase { u64::MAX } else { 0 };
    let n = starts.len();
    let (starts, ends) = (&starts[..n], &ends[..n]);
    // Without the vector kernel, as in `ascii_word_states`: a word of one
    // run, at most 16 bytes and with nothing to transcode goes into the
    // lanes as its two 8-byte chunks and its length, hashed all at once by
    // `short_states`; the others (joined, transcoded, long, or in a zone)
    // are hashed here and patched in after. Every word has a lane, so a
    // lane's index is its word's index. With it, `w` is where the next
    // word's state goes in `out`, which is kept long enough for the kernel
    // to write a whole group past the words left.
    let vector = kernels.has_words();
    let first = out.len();
    let mut w = first;
    lanes.clear();
    patches.clear();
    if !vector {
        lanes.reserve(n);
    }
    let (mut zi, mut gi) = (0usize, 0usize);
    // The first zone start or transcoded character not yet passed: a word
    // that ends before it is in no zone and has nothing to transcode.
    let barrier = |zi: usize, gi: usize| {
        let z = zones.get(zi).map_or(usize::MAX, |z| z.0 as usize);
        let g = gathers.get(gi).map_or(usize::MAX, |&g| g as usize);
        z.min(g)
    };
    let mut wall = barrier(0, 0);
    let mut i = 0;
    while i < n {
        if vector {
            let wide = L::MAX > 16;
            let (runs, words) = kernel_words(
                kernels, bytes, starts, ends, i, wall, wide, key, case, out, w, deferred, word,
            )
            .unwrap_or_else(|| unreachable!("the kernels hash words"));
            i += runs;
            w += words;
            // It stops at the end or at a word for the general path.
            if i == n {
                break;
            }
        }
        let (start, end) = ((starts[i] & !JOINED) as usize, ends[i] as usize);
        if !vector {
            // Most words: one run (the next run does not join it), at most
            // 16 bytes, before the barrier. The same test as the ASCII
            // scanner's, and one compare for zones and transcoding (the
            // general case below looked both up for every word: the Spanish
            // man pages' word loop cost 0.25 ns/byte more than their ASCII
            // twins').
            let joins_next = starts.get(i + 1).is_some_and(|&s| s & JOINED != 0);
            if !joins_next && end <= wall && end - start <= L::MAX {
                lanes.push(L::load(bytes, start, end));
                i += 1;
                continue;
            }
        }
        // A word's state from the general path: into `out` at `w`, or into
        // the patches with an empty lane.
        let mut emit = |state: u64, out: &mut Vec<u64>| {
            if vector {
                if out.len() <= w {
                    out.resize(w + 1, 0);
                }
                out[w] = state;
                w += 1;
            } else {
                patches.push((lanes.len(), state));
                lanes.push(L::ZERO);
            }
        };
        // The runs of this word: i..j.
        let mut j = word_runs_end(starts, i);
        let end = ends[j - 1] as usize;
        while zi < zones.len() && zones[zi].1 as usize <= start {
            zi += 1;
        }
        if zi < zones.len() && zones[zi].0 as usize <= start {
            // Inside a zone: its words, once, in place of the runs in it.
            let (zs, ze) = zones[zi];
            // Zones start and end at ASCII bytes or the text's ends.
            let zone = &whole[zs as usize..ze as usize];
            unicode::normalize_into(zone, chars, norm);
            // `out` lends its tail (past any room kept for the kernel).
            let from = out.len();
            word_states(norm, WordSplit::of(opts), key, out);
            let count = out.len() - from;
            for z in 0..count {
                let state = out[from + z];
                emit(state, out);
            }
            out.truncate(from.max(w));
            zi += 1;
            while j < n && ((starts[j] & !JOINED) as usize) < ze as usize {
                j += 1;
            }
            i = j;
            wall = barrier(zi, gi);
            continue;
        }
        while gi < gathers.len() && (gathers[gi] as usize) < start {
            gi += 1;
        }
        let gathered = gi < gathers.len() && (gathers[gi] as usize) < end;
        if j == i + 1 && end - start <= 16 {
            let lane = if gathered {
                mapped_lane(bytes, start, end, &gathers[gi..], chars).map(L::from_short)
            } else {
                Some(L::load(bytes, start, end))
            };
            if let Some(lane) = lane {
                if vector {
                    let mut state = [0];
                    L::states(&[lane], key, case, &mut state);
                    emit(state[0], out);
                } else {
                    lanes.push(lane);
                }
                i = j;
                wall = barrier(zi, gi);
                continue;
            }
        }
        let one_run = j == i + 1;
        let state = if one_run && !gathered {
            hash_run::<true>(bytes, start, end, key, case)
        } else if let Some(state) = one_run
            .then(|| mapped_copy(bytes, start, end, &gathers[gi..], chars, word))
            .flatten()
            .map(|copy| hash_run::<true>(copy, 0, end - start, key, case))
        {
            state
        } else if !gathered {
            let (runs, run_ends) = (&starts[i..j], &ends[i..j]);
            joined_state(bytes, runs, run_ends, key, case)
                .unwrap_or_else(|| long_joined_state(bytes, runs, run_ends, key, case, word))
        } else {
            // Runs joined across stripped characters (`l’homme`, `don't`)
            // are copied whole unless a character in them is transcoded.
            word.clear();
            for r in i..j {
                let (s, e) = ((starts[r] & !JOINED) as usize, ends[r] as usize);
                while gi < gathers.len() && (gathers[gi] as usize) < s {
                    gi += 1;
                }
                if gi < gathers.len() && (gathers[gi] as usize) < e {
                    transcode(&bytes[..text.len() + 4], s, e, table, chars, word);
                } else {
                    let from = word.len();
                    word.extend_from_slice(&bytes[s..e]);
                    if opts.lowercase {
                        word[from..].make_ascii_lowercase();
                    }
                }
            }
            word_state(word, key)
        };
        emit(state, out);
        i = j;
        wall = barrier(zi, gi);
    }
    if vector {
        out.truncate(w);
        return;
    }
    out.resize(first + lanes.len(), 0);
    L::states(lanes, key, case, &mut out[first..]);
    for &(at, state) in patches.iter() {
        out[first + at] = state;
    }
}

/// Whether the 64-byte block `b` of `bytes` (the last one may be shorter)
/// holds a non-ASCII byte.
#[inline(always)]
fn block_has_non_ascii(bytes: &[u8], b: usize) -> bool {
    let block = &bytes[b * 64..(b * 64 + 64).min(bytes.len())];
    let mut chunks = block.chunks_exact(8);
    let mut or = 0u64;
    for c in &mut chunks {
        or |= u64::from_le_bytes(c.try_into().expect("8 bytes"));
    }
    for &c in chunks.remainder() {
        or |= u64::from(c);
    }
    or & rep(0x80) != 0
}

/// Normalize `text` (any UTF-8) with `chars`' options and append its word
/// hashes to `out`; equal to normalizing and then calling [`word_hashes`].
///
/// A text with no non-ASCII byte takes [`ascii_word_states`]; any other
/// text, whole, takes [`unicode_word_states`] (`kernel::word_states`
/// checks and picks, each scanner compiled as a function of its own).
/// The Unicode scanner reads ASCII blocks nearly as fast as the ASCII
/// one, so cutting a text into ASCII and non-ASCII stretches for the two
/// (as this did up to round 19) cost more than it saved: finding the
/// stretches read every block once more with a branch each, and each
/// stretch paid a scanner call. One scan of the whole text took the
/// English typography from 1.09 to 0.84 ns/byte, a `’` per article 0.94 →
/// 0.79, the French, German and Spanish man pages 12% less, Russian 8%,
/// Chinese and Japanese 5% (`text_bench`, 5 alternating runs; round 20
/// in `docs/benchmarks.md`).
///
/// The scanners append the words' states (their hashes before the
/// finalizer); all of them are finalized at the end in one pass over lanes.
pub(crate) fn utf8_word_hashes(
    text: &str,
    chars: &CharTable,
    key: u64,
    scratch: &mut AsciiScratch,
    out: &mut Vec<u64>,
) {
    let first = out.len();
    super::kernel::word_states(text, chars, key, scratch, out);
    super::kernel::finish_words(&mut out[first..]);
}

/// [`utf8_word_hashes`] before the finalizer: the words' states, with
/// `kernels` (`kernel::word_states` picks them for each build), by the
/// ASCII scanner if `ASCII` (the caller found `text` all ASCII, see
/// [`is_ascii`]), else by the Unicode one.
#[inline(always)]
pub(super) fn utf8_word_states<const ASCII: bool>(
    kernels: impl ScanKernels,
    text: &str,
    chars: &CharTable,
    key: u64,
    scratch: &mut AsciiScratch,
    out: &mut Vec<u64>,
) {
    // `confusables` maps ASCII too: the Unicode scanner's path for it.
    if ASCII && !chars.options().confusables {
        let table = AsciiTable::new(chars.options());
        ascii_word_states(kernels, text.as_bytes(), table, key, scratch, out);
    } else {
        unicode_word_states(kernels, text, chars, key, scratch, out);
    }
}

/// Whether `bytes` is all ASCII: a 64-byte block at a time, stopping at
/// the first block with a non-ASCII byte. Inlined, so that each build of
/// `kernel::word_states` compiles it with its own instruction set (one
/// 64-byte compare a block with AVX-512; compiled for SSE2 only, a call
/// before the scanners made the short articles' text stage 0.70 against
/// 0.63 ns/byte, 3 alternating runs).
#[inline(always)]
pub(super) fn is_ascii(bytes: &[u8]) -> bool {
    !(0..bytes.len().div_ceil(64)).any(|b| block_has_non_ascii(bytes, b))
}

/// The lane of the word `bytes[start..end]` (one run, at most 16 bytes)
/// whose transcoded characters, the positions in `gathers` before `end`,
/// are all two-byte ones that map to two other bytes (a Cyrillic, Greek
/// or accented Latin capital to its small letter, version 2's `ß` to
/// `ss`: `CharTable::low_map`): its 16
/// bytes with those characters overwritten ([`overwrite_mapped`]), for
/// [`short_states`] (which lowercases the ASCII letters); `None` if any
/// other character is transcoded, for [`transcode`]. The Russian man pages
/// spent 11% of their text stage in `transcode`, for words whose only
/// change is a capital (~8% of their words).
#[inline(always)]
fn mapped_lane(
    bytes: &[u8],
    start: usize,
    end: usize,
    gathers: &[u32],
    chars: &CharTable,
) -> Option<[u64; 3]> {
    let mut word: [u8; 16] = bytes[start..start + 16].try_into().expect("16 bytes");
    overwrite_mapped(&mut word, bytes, start, end, gathers, chars)?;
    let (lo, hi) = word.split_at(8);
    Some([
        u64::from_le_bytes(lo.try_into().expect("8 bytes")),
        u64::from_le_bytes(hi.try_into().expect("8 bytes")),
        (end - start) as u64,
    ])
}

/// [`mapped_lane`] for a word of one run longer than 16 bytes: `word`
/// (kept at length, as in [`long_joined_state`]) holding the word's bytes
/// with its capitals overwritten, and 16 more, for [`hash_run`]. Russian
/// words of nine letters or more; `transcode` was still 4.5% of the Russian
/// man pages' samples after [`mapped_lane`]. Russian 1.19 → 1.15, 1.18 →
/// 1.14 and 1.22 → 1.16 ns/byte (`text_bench`, three sets of 3 alternating
/// runs).
fn mapped_copy<'w>(
    bytes: &[u8],
    start: usize,
    end: usize,
    gathers: &[u32],
    chars: &CharTable,
    word: &'w mut Vec<u8>,
) -> Option<&'w [u8]> {
    let len = end - start;
    if word.len() < len + 16 {
        word.resize(len + 16, 0);
    }
    copy_runs(word, bytes, &[start as u32], &[end as u32]);
    overwrite_mapped(word, bytes, start, end, gathers, chars)?;
    Some(word)
}

/// Overwrite in `word`, a copy of `bytes[start..]`, each transcoded
/// character of `bytes[start..end]` (the positions in `gathers` before
/// `end`) with the two-byte character it maps to; `None` (with `word` part
/// written) as soon as one is not a two-byte character that maps to one.
#[inline(always)]
fn overwrite_mapped(
    word: &mut [u8],
    bytes: &[u8],
    start: usize,
    end: usize,
    gathers: &[u32],
    chars: &CharTable,
) -> Option<()> {
    for &g in gathers {
        let g = g as usize;
        if g >= end {
            break;
        }
        let (lead, cont) = (bytes[g], bytes[g + 1]);
        if lead & 0xe0 != 0xc0 {
            return None;
        }
        let to = chars.low_map((u32::from(lead & 0x1f) << 6) | u32::from(cont & 0x3f))?;
        // `g + 1 < end`: both bytes are in the word.
        let at = g - start;
        word[at..at + 2].copy_from_slice(&to);
    }
    Some(())
}

/// Append the normalized bytes of the run `bytes[start..end]` (kept
/// characters only, none of them slow) to `word`.
fn transcode(
    bytes: &[u8],
    start: usize,
    end: usize,
    table: &AsciiTable,
    chars: &CharTable,
    word: &mut Vec<u8>,
) {
    // A character's 1–4 bytes are appended as a fixed 4-byte copy and a
    // cut: a copy of a variable length calls `memmove`, which was 4.7% of
    // the Russian man pages' text stage (8% of their words have a capital).
    let push = |word: &mut Vec<u8>, utf8: [u8; 4], len: usize| {
        word.extend_from_slice(&utf8);
        word.truncate(word.len() - 4 + len);
    };
    let push_char = |word: &mut Vec<u8>, c: char| {
        let mut utf8 = [0u8; 4];
        c.encode_utf8(&mut utf8);
        push(word, utf8, c.len_utf8());
    };
    let mut at = start;
    while at < end {
        let b = bytes[at];
        if b < 0x80 {
            word.push(table.class(b));
            at += 1;
            continue;
        }
        let (cp, len) = decode(bytes, at);
        let entry = chars.entry_of(cp);
        match unicode::kind(entry) {
            Kind::Map => push_char(word, unicode::mapped(entry)),
            Kind::Multi => chars
                .emit_multi(char::from_u32(cp).expect("decoded from valid UTF-8"), |l| {
                    push_char(word, l)
                }),
            _ => push(word, bytes[at..at + 4].try_into().expect("4 bytes"), len),
        }
        at += len;
    }
}

/// Texts this long or longer take the plain path (positions must fit in
/// 31 bits beside the [`JOINED`] flag).
const FLAGGED: usize = JOINED as usize;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::kernel::Scalar;
    use crate::text::normalize::{all_options, OPTIONS};
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
        ascii_word_states(
            Scalar,
            text.as_bytes(),
            AsciiTable::new(opts),
            key,
            &mut scratch,
            &mut out,
        );
        finish_lanes(&mut out);
        out
    }

    #[test]
    fn trim_drops_a_large_lane_buffer() {
        // 100,000 one-letter words: 200 kB of text, under the 1 MiB that
        // trims `bytes`, but 2.4 MB of lanes.
        let text = "a ".repeat(100_000);
        let mut scratch = AsciiScratch::default();
        let mut out = Vec::new();
        let opts = NormalizeOptions::default();
        ascii_word_states(
            Scalar,
            text.as_bytes(),
            AsciiTable::new(&opts),
            1,
            &mut scratch,
            &mut out,
        );
        assert_eq!(out.len(), 100_000);
        assert!(scratch.lanes.capacity() >= 100_000);
        scratch.trim();
        assert_eq!(scratch.lanes.capacity(), 0);
    }

    fn scalar(text: &str, opts: &NormalizeOptions, key: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut scratch = AsciiScratch::default();
        ascii_word_states_scalar(
            text.as_bytes(),
            AsciiTable::new(opts),
            key,
            &mut scratch,
            &mut out,
        );
        finish_lanes(&mut out);
        out
    }

    #[test]
    fn swar_helpers() {
        for b in 0u8..0x80 {
            let x = u64::from_le_bytes([b, 0, b, 0x7f, b, b'A', b, b'z']);
            let m = movemask(in_range(x, b'0', b'9'));
            let want = (0..8).fold(0u64, |m, i| {
                m | (u64::from(x.to_le_bytes()[i].is_ascii_digit()) << i)
            });
            assert_eq!(m, want, "{b}");
            let low = u64::from_le_bytes(x.to_le_bytes().map(|c| c.to_ascii_lowercase()));
            assert_eq!(lower(x, u64::MAX), low);
        }
    }

    fn two_pass(text: &str, opts: &NormalizeOptions, key: u64) -> Vec<u64> {
        let mut out = Vec::new();
        word_hashes(&normalize(text, opts), WordSplit::of(opts), key, &mut out);
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

    /// The reference: the recipe step by step, then split and hash.
    fn reference(text: &str, opts: &NormalizeOptions, key: u64) -> Vec<u64> {
        let mut out = Vec::new();
        word_hashes(
            &crate::text::normalize::reference_normalize(text, opts),
            WordSplit::of(opts),
            key,
            &mut out,
        );
        out
    }

    fn unicode(text: &str, opts: &NormalizeOptions, key: u64) -> Vec<u64> {
        let mut scratch = AsciiScratch::default();
        let mut scan = |out: &mut Vec<u64>| {
            unicode_word_states(Scalar, text, CharTable::get(opts), key, &mut scratch, out)
        };
        let mut out = vec![7];
        scan(&mut out);
        // A second call on the same scratch gives the same words.
        let mut again = Vec::new();
        scan(&mut again);
        assert_eq!(out[1..], again[..], "scratch state leaked between calls");
        out.remove(0);
        finish_lanes(&mut out);
        // The scanners as the running CPU's build dispatches them (its
        // vector kernels), the same words.
        assert_eq!(mixed(text, opts, key), out, "the dispatched build differs");
        out
    }

    /// Option combination `o` of [`OPTIONS`], both versions.
    fn options(o: usize) -> NormalizeOptions {
        all_options()[o]
    }

    #[test]
    fn the_unicode_scanner_reads_typographic_and_non_latin_text() {
        let opts = NormalizeOptions::default();
        let key = word_key(3);
        for text in [
            "l’homme a dit « bonjour » : c’est l’été !",
            "Straße ÉCOLE Ωμέγα ΣΊΣΥΦΟΣ",
            "Привет, МИР! Это тест.",
            "日本語のテキスト。中文文本，还有 English words.",
            "ﬁne ＡＢＣ x²\u{a0}y ① ½ ㏂",
            "cafe\u{301} e\u{301}\u{323} 가\u{11a8} \u{1100}\u{1161}",
            "İstanbul ıi ẞ ß Σς",
            "\u{301}leading mark and trailing e\u{301}",
            "emoji 😀👍🏻 zwj 👩\u{200d}💻 a\u{200b}b",
            "\u{fdfa} ¨a ¨ a",
            "“Quoted” – dashed — £5 naïve résumé",
        ] {
            assert_eq!(
                unicode(text, &opts, key),
                reference(text, &opts, key),
                "{text:?}"
            );
        }
        assert!(unicode(" ’ … “ ” ", &opts, key).is_empty());
    }

    #[test]
    fn the_unicode_scanner_equals_the_ascii_scanner_on_ascii() {
        let key = word_key(9);
        // Both versions (but `confusables`, which the ASCII scanner never
        // takes: it maps ASCII letters).
        for opts in all_options().into_iter().filter(|o| !o.confusables) {
            let text = "Don't stop -- the MOON is red, 50,000 a_b\tx\x0by";
            assert_eq!(unicode(text, &opts, key), fused(text, &opts, key));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        #[test]
        fn the_unicode_scanner_equals_the_reference_on_hard_text(
            text in crate::text::unicode::hard_text(200),
            o in 0usize..OPTIONS,
            seed: u64,
        ) {
            let opts = options(o);
            let key = word_key(seed);
            prop_assert_eq!(unicode(&text, &opts, key), reference(&text, &opts, key), "{:?}", text);
        }

        #[test]
        fn the_unicode_scanner_equals_the_reference_on_any_text(
            text in any::<String>(),
            o in 0usize..OPTIONS,
        ) {
            let opts = options(o);
            let key = word_key(1);
            prop_assert_eq!(unicode(&text, &opts, key), reference(&text, &opts, key));
        }

        /// Words of 1–4-byte characters straddling the 64-byte blocks,
        /// with stripped, whitespace and transcoded characters between.
        #[test]
        fn the_unicode_scanner_equals_the_reference_on_long_text(
            text in "([a-zA-Zéàßœ_0-9ДдЖжΩωΣ日本語한国😀]{1,30}[ \t\n.,’“”–\u{a0}\u{3000}£-]{1,3}){0,60}",
            o in 0usize..OPTIONS,
        ) {
            let opts = options(o);
            let key = word_key(2);
            prop_assert_eq!(unicode(&text, &opts, key), reference(&text, &opts, key), "{:?}", text);
        }
    }

    fn mixed(text: &str, opts: &NormalizeOptions, key: u64) -> Vec<u64> {
        let mut out = vec![7];
        let mut scratch = AsciiScratch::default();
        utf8_word_hashes(text, CharTable::get(opts), key, &mut scratch, &mut out);
        assert_eq!(out.remove(0), 7, "earlier words kept");
        out
    }

    /// [`Runs`] keeps the slots of a longer text past its live ones (and
    /// the vector kernel leaves slots past the positions it found as they
    /// were): a scratch that read long texts with many runs reads shorter
    /// ones, ASCII and not, as a fresh one does, in every build the CPU
    /// dispatches to.
    #[test]
    fn stale_run_slots_of_a_longer_text_are_never_read() {
        let opts = NormalizeOptions::default();
        let key = word_key(5);
        let long_ascii = "a b c d e f g h i j k l m n o p ".repeat(300);
        let long_cyrillic = "я б в г д е ж з и к л м н о п р ".repeat(300);
        let shorter = [
            "Short text, few words.".to_owned(),
            "Ещё короче: два слова".to_owned(),
            "l’homme et la femme, café".repeat(7),
            "x".repeat(40),
            "a b c d e f g h i j k l m n o p q r s t u v w x y z".to_owned(),
        ];
        let mut scratch = AsciiScratch::default();
        for text in &shorter {
            for long in [&long_ascii, &long_cyrillic] {
                let mut out = Vec::new();
                utf8_word_hashes(long, CharTable::get(&opts), key, &mut scratch, &mut out);
                assert_eq!(out.len(), 16 * 300);
                out.clear();
                utf8_word_hashes(text, CharTable::get(&opts), key, &mut scratch, &mut out);
                assert_eq!(out, mixed(text, &opts, key), "{text}");
                assert_eq!(out, reference(text, &opts, key), "{text}");
            }
        }
    }

    #[test]
    fn ascii_text_with_a_few_non_ascii_characters_reads_as_the_reference() {
        let opts = NormalizeOptions::default();
        let key = word_key(4);
        let filler = "plain ascii words, then MORE of them. ".repeat(12);
        for text in [
            format!("{filler}l’homme{filler}"),
            format!("{filler}café{filler}naïve{filler}"),
            format!("l’{filler}e\u{301}"),
            format!("\u{301}{filler}{}x", "y".repeat(300)),
            format!("{}é{}", "z".repeat(500), "w".repeat(500)),
            format!("{filler}日本語{}ABC {filler}", "q".repeat(200)),
            format!("{filler}ﬁ\t{filler}\u{a0}{filler}Ω"),
            format!("{}£", filler.repeat(3)),
            filler.clone(),
            "é".repeat(100),
        ] {
            assert_eq!(
                mixed(&text, &opts, key),
                reference(&text, &opts, key),
                "{text:?}"
            );
        }
    }

    /// Dense Cyrillic, CJK and Latin-1 text cut at every character boundary
    /// up to 400 bytes: the text ends at every offset of its last two
    /// blocks, which the scanner reads from a zero-padded copy (the others
    /// straight from the text).
    #[test]
    fn dense_text_ending_anywhere_reads_as_the_reference() {
        let key = word_key(5);
        let full = "Мэр открыл НОВЫЙ мост, «через» реку — в понедельник. 北京 市政府 周一 \
                    宣布 新的 交通 计划 Ça déjà ÉTÉ vu über Straße! Ёлка ЖЖ 日本語のテキスト "
            .repeat(3);
        // One byte off too: the two-byte characters at odd positions, some
        // of them a block's last byte.
        let off = format!("a{full}");
        for o in 0..OPTIONS {
            let opts = options(o);
            for (full, (cut, _)) in [&full, &off].into_iter().flat_map(|f| {
                f.char_indices()
                    .take_while(|&(i, _)| i <= 400)
                    .map(move |c| (f, c))
            }) {
                let text = &full[..cut];
                assert_eq!(
                    unicode(text, &opts, key),
                    reference(text, &opts, key),
                    "{text:?}"
                );
            }
            // A capital at every position around the first block's end,
            // after enough Cyrillic for the vector kernel.
            for pad in 40..70 {
                let text = format!("дддд {} Дом ДОМ ёЁ", "x".repeat(pad));
                assert_eq!(
                    unicode(&text, &opts, key),
                    reference(&text, &opts, key),
                    "{text:?}"
                );
            }
        }
    }

    /// Words of 15 to 26 bytes (Cyrillic of 8 to 13 letters, some
    /// capitalized, some joined) in a text of long words, which takes lanes
    /// of 24 bytes, and among short words, which takes lanes of 16.
    #[test]
    fn long_words_read_as_the_reference_in_both_lane_widths() {
        let key = word_key(6);
        let long = "достаточно ВОССТАНОВИТЬ Переменных конфигурации \
                    обязательный-параметр файла. Нераспознанный исполняемого";
        let short = "a b c d e f g h i j k l m n o p q r s t u v w x y z ";
        for o in 0..OPTIONS {
            let opts = options(o);
            for text in [
                long.to_owned(),
                format!("{short}{long}{short}"),
                long.repeat(5),
            ] {
                assert_eq!(
                    unicode(&text, &opts, key),
                    reference(&text, &opts, key),
                    "{text:?}"
                );
            }
        }
    }

    /// Texts of ASCII words with non-ASCII characters set in sparsely or in
    /// clusters, falling everywhere: at block ends, in long words, next to
    /// combining marks.
    fn sparse_text() -> impl Strategy<Value = String> {
        let ascii = "([a-zA-Z0-9_]{1,12}[ \t\n.,'-]{1,2}){0,40}";
        let rare = prop_oneof![
            crate::text::unicode::random_unicode(6),
            "[’“”–£éÉßДж日😀ﬁ\u{301}\u{a0}\u{3000}]{1,3}",
        ];
        proptest::collection::vec((ascii, rare), 0..6)
            .prop_map(|parts| parts.into_iter().map(|(a, r)| a + &r).collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn the_word_scanners_equal_the_reference_on_sparse_text(
            text in sparse_text(),
            o in 0usize..OPTIONS,
        ) {
            let opts = options(o);
            let key = word_key(6);
            prop_assert_eq!(mixed(&text, &opts, key), reference(&text, &opts, key), "{:?}", text);
        }

        #[test]
        fn the_word_scanners_equal_the_reference_on_random_unicode(
            text in crate::text::unicode::random_unicode(300),
            o in 0usize..OPTIONS,
        ) {
            let opts = options(o);
            let key = word_key(8);
            prop_assert_eq!(mixed(&text, &opts, key), reference(&text, &opts, key), "{:?}", text);
            prop_assert_eq!(unicode(&text, &opts, key), reference(&text, &opts, key), "{:?}", text);
        }
    }

    proptest! {
        #[test]
        fn the_fused_ascii_scanner_equals_normalize_then_split(
            text in "[\\x00-\\x7f]{0,120}|([a-zA-Z_0-9]{1,40}[ \t\n.,'-]{1,3}){0,30}",
            lowercase: bool,
            strip: bool,
            seed: u64,
        ) {
            let opts = NormalizeOptions { nfkc: true, lowercase, strip_punctuation: strip, ..NormalizeOptions::default() };
            let key = word_key(seed);
            prop_assert_eq!(fused(&text, &opts, key), two_pass(&text, &opts, key));
            prop_assert_eq!(scalar(&text, &opts, key), two_pass(&text, &opts, key));
        }

        #[test]
        fn the_word_scanner_equals_normalize_then_split_on_long_text(
            text in "([a-zA-Z_0-9]{1,30}[ \t\n.,'!-]{1,4}){0,80}|[\x00-\x7f]{60,300}",
            lowercase: bool,
            strip: bool,
        ) {
            let opts = NormalizeOptions { nfkc: true, lowercase, strip_punctuation: strip, ..NormalizeOptions::default() };
            let key = word_key(5);
            prop_assert_eq!(fused(&text, &opts, key), two_pass(&text, &opts, key));
        }
    }
}
