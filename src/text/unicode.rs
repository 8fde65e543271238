//! The normalization recipe for one character at a time, from a lookup
//! table, with the full NFKC algorithm only where characters interact.
//!
//! **Why this is exact.** NFKC is not a per-character mapping: a combining
//! mark composes with the letter before it, Hangul jamo compose into
//! syllables, and marks are reordered by combining class. But it is
//! per-*segment*: a character `c` with canonical combining class 0 whose
//! NFKC quick-check value is Yes (it never changes and never composes with
//! what precedes it), or No with a full compatibility decomposition made of
//! such characters only (`ﬁ` → `fi`, NBSP → space, `Ａ` → `A`), has a
//! *normalization boundary before it*: nothing before `c` interacts with
//! `c` or anything after it, so NFKC(x·c·y) = NFKC(x)·NFKC(c·y) (UAX #15,
//! "stable code points"; ICU's `hasBoundaryBefore`). Such a character is a
//! [`BOUNDARY`] in the table. Between two boundaries lies a segment; a
//! segment of one character `c` normalizes to `c`'s own decomposition
//! (recomposition cannot join characters that are all boundaries), which the
//! table stores already lowercased and classified. Longer segments (a
//! letter and the marks that follow it, jamo sequences, a mark at the start
//! of the text) go through `unicode-normalization`'s NFKC, the same code the
//! reference path runs on the whole text. Case (lowercasing in version 1,
//! case folding in version 2), accents and look-alikes (`super::fold`, all
//! context-free) and the class of each resulting character (whitespace,
//! word character, or stripped) are per-character steps after NFKC, so the
//! table can store their result. In version 2 it also stores whether the
//! output has a character that is a word of its own ([`SOLO`]: Han, kana,
//! Thai) or that continues the word before it ([`ATTACH`]), for the word
//! scanner (`super::tokens` defines both).
//!
//! The tests check the table against the crate for every BMP code point, the
//! boundary property against every composition pair the crate knows, and
//! the whole normalizer against the reference on random strings built from
//! the hard cases (combining marks, Hangul, compatibility characters,
//! Turkish İ, final sigma, ß/ẞ, joiners, emoji).
//!
//! **Table layout.** A 32-bit entry per BMP character: the [`Kind`] of its
//! output, the boundary bit, the [`SOLO`] and [`ATTACH`] bits and, for
//! [`Kind::Map`], the one character it becomes. Two levels (128-character
//! blocks, identical blocks stored once: all of CJK is one block), ~80 KB,
//! built on first use for each option combination (40: the 8 of version 1's
//! three steps, the 32 of version 2's five; a version 2 table takes longer
//! to make, its case folding and properties read through ICU4X, but only
//! once). Characters beyond the BMP (emoji, rare CJK) are classified
//! on the fly with the same function.

use super::normalize::NormalizeOptions;
use std::sync::OnceLock;
use unicode_normalization::char::{canonical_combining_class, decompose_compatible};
use unicode_normalization::{is_nfkc_quick, IsNormalized, UnicodeNormalization};

/// What one character contributes to the normalized text when it is a
/// segment of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Kind {
    /// Kept, and its output is the character itself (same bytes).
    Keep = 0,
    /// Whitespace: ends a word (any stripped characters of its output do not matter).
    Space = 1,
    /// Stripped: contributes nothing, does not end a word.
    Drop = 2,
    /// Kept, and its output is one other character (in the entry's low bits).
    Map = 3,
    /// Kept, and its output is several characters, some possibly stripped
    /// (`ﬁ` → `fi`, `İ` → `i` + U+0307): see [`emit`].
    Multi = 4,
    /// Anything else: not a boundary (a combining mark, a jamo that
    /// composes), or an output mixing whitespace and word characters. The
    /// character's segment must go through the full algorithm.
    Slow = 5,
}

/// Entry bits. The scanner reads the first four directly: its bytes are
/// kept ([`KEPT`]: word bytes, whatever the output), it is whitespace
/// ([`SPACE`]), its word must be transcoded ([`GATHER`]) or its zone
/// normalized in full ([`SLOW`]).
pub(crate) const KEPT: u32 = 1 << 0;
pub(crate) const SPACE: u32 = 1 << 1;
pub(crate) const GATHER: u32 = 1 << 2;
pub(crate) const SLOW: u32 = 1 << 3;
/// Set if the character has a normalization boundary before it.
pub(crate) const BOUNDARY: u32 = 1 << 4;
/// With [`GATHER`]: the output is several characters ([`Kind::Multi`]).
const MULTI: u32 = 1 << 5;
/// Version 2 only: the output has a solo character (a word of its own,
/// `super::tokens`: Han, kana, Thai...). Not a [`Kind`]: the normalizer
/// reads the entry as it would without it. The word scanner makes a
/// [`Kind::Keep`] or [`Kind::Map`] one (its output is one solo
/// character) a word of its own, and treats the others as [`SLOW`]
/// (see [`solo_inline`]).
pub(crate) const SOLO: u32 = 1 << 6;
/// Version 2 only: the output has a kept attaching character (a combining
/// vowel sign: `super::tokens`), which continues the word before it, a
/// solo character's too: the word scanner checks what precedes it.
pub(crate) const ATTACH: u32 = 1 << 7;

/// Whether the word scanner cuts a [`SOLO`] character's word itself: its
/// output is the one solo character (a [`Kind::Keep`] or [`Kind::Map`]
/// entry), not several characters or a segment to normalize.
#[inline(always)]
pub(crate) fn solo_inline(entry: u32) -> bool {
    entry & (SOLO | SLOW | MULTI) == SOLO
}
/// The output character of a [`Kind::Map`] entry is stored from this bit on.
const CHAR_SHIFT: u32 = 8;

#[inline(always)]
pub(crate) fn kind(entry: u32) -> Kind {
    if entry & SLOW != 0 {
        Kind::Slow
    } else if entry & SPACE != 0 {
        Kind::Space
    } else if entry & KEPT == 0 {
        Kind::Drop
    } else if entry & MULTI != 0 {
        Kind::Multi
    } else if entry & GATHER != 0 {
        Kind::Map
    } else {
        Kind::Keep
    }
}

fn entry_of(kind: Kind, boundary: bool, mapped: char) -> u32 {
    let bits = match kind {
        Kind::Keep => KEPT,
        Kind::Space => SPACE,
        Kind::Drop => 0,
        Kind::Map => KEPT | GATHER | ((mapped as u32) << CHAR_SHIFT),
        Kind::Multi => KEPT | GATHER | MULTI,
        Kind::Slow => KEPT | SLOW,
    };
    bits | if boundary { BOUNDARY } else { 0 }
}

/// The character a [`Kind::Map`] entry maps to.
#[inline(always)]
pub(crate) fn mapped(entry: u32) -> char {
    char::from_u32(entry >> CHAR_SHIFT).expect("table entries hold valid chars")
}

/// The code point a [`Kind::Map`] entry maps to if it is a two-byte
/// character (0x80–0x7FF), else `None` (another kind, or another length).
#[inline(always)]
pub(crate) fn mapped_low(entry: u32) -> Option<u32> {
    let to = entry >> CHAR_SHIFT;
    (kind(entry) == Kind::Map && (0x80..0x800).contains(&to)).then_some(to)
}

/// The recipe's class of one character of NFKC output, after lowercasing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Space,
    Kept,
    Dropped,
}

fn class_of(c: char, opts: &NormalizeOptions) -> Class {
    if c.is_whitespace() {
        Class::Space
    } else if !opts.strip_punctuation || super::tokens::is_word_char(c, opts) {
        Class::Kept
    } else {
        Class::Dropped
    }
}

/// The recipe's per-character steps after NFKC (case, accents,
/// look-alikes: `super::fold`), as the reference applies them.
#[inline]
pub(crate) fn lower(c: char, opts: &NormalizeOptions, f: impl FnMut(char)) {
    super::fold::fold_char(c, opts, f)
}

fn is_stable(c: char) -> bool {
    canonical_combining_class(c) == 0 && is_nfkc_quick(std::iter::once(c)) == IsNormalized::Yes
}

/// NFKC of `c` alone, if `c` has a normalization boundary before it (see
/// the module docs); `None` otherwise.
fn boundary_decomposition(c: char, opts: &NormalizeOptions) -> Option<Vec<char>> {
    if !opts.nfkc || c.is_ascii() {
        return Some(vec![c]);
    }
    if canonical_combining_class(c) != 0 {
        return None;
    }
    match is_nfkc_quick(std::iter::once(c)) {
        IsNormalized::Yes => Some(vec![c]),
        IsNormalized::Maybe => None,
        IsNormalized::No => {
            let mut d = Vec::new();
            decompose_compatible(c, |x| d.push(x));
            d.iter().all(|&x| is_stable(x)).then_some(d)
        }
    }
}

/// The table entry of `c` (any character; the table caches the BMP).
pub(crate) fn classify(c: char, opts: &NormalizeOptions) -> u32 {
    let Some(decomposition) = boundary_decomposition(c, opts) else {
        return entry_of(Kind::Slow, false, '\0');
    };
    let mut out = Vec::new();
    for &d in &decomposition {
        lower(d, opts, |l| out.push(l));
    }
    let space = out.iter().any(|&o| class_of(o, opts) == Class::Space);
    let kept = out.iter().any(|&o| class_of(o, opts) == Class::Kept);
    let kind = match (space, kept) {
        (true, true) => Kind::Slow,
        (true, false) => Kind::Space,
        (false, false) => Kind::Drop,
        (false, true) if out == [c] => Kind::Keep,
        (false, true) if out.len() == 1 => Kind::Map,
        (false, true) => Kind::Multi,
    };
    let unit = |u| {
        opts.version >= 2
            && out
                .iter()
                .any(|&o| class_of(o, opts) == Class::Kept && super::tokens::unit(o) == u)
    };
    let flag = |yes: bool, bit: u32| if yes { bit } else { 0 };
    entry_of(kind, true, out.first().copied().unwrap_or('\0'))
        | flag(unit(super::tokens::Unit::Solo), SOLO)
        | flag(unit(super::tokens::Unit::Attach), ATTACH)
}

/// The output of a boundary character `c` that is its own segment, each
/// kept character passed to `f` (stripped ones are left out; `c` must not
/// be [`Kind::Slow`] with a whitespace output, which has no such form).
pub(crate) fn emit(c: char, opts: &NormalizeOptions, mut f: impl FnMut(char)) {
    let mut each = |d: char| {
        lower(d, opts, |l| {
            if class_of(l, opts) == Class::Kept {
                f(l)
            }
        })
    };
    if opts.nfkc && !c.is_ascii() && !is_stable(c) {
        decompose_compatible(c, &mut each);
    } else {
        each(c);
    }
}

const BLOCK_BITS: u32 = 7;
const BLOCK: usize = 1 << BLOCK_BITS;
const BLOCKS: usize = 0x10000 / BLOCK;
/// Code points below this (ASCII and the two-byte UTF-8 range: Latin,
/// Greek, Cyrillic, Hebrew, Arabic...) are classified when the table is made.
pub(crate) const LOW: usize = 0x800;
/// The class bits of [`CharTable::low_classes`]: the entry has [`KEPT`],
/// [`SPACE`], or [`GATHER`] or [`SLOW`].
pub(crate) const CLASS_KEPT: u8 = 1;
pub(crate) const CLASS_SPACE: u8 = 2;
pub(crate) const CLASS_FLAGGED: u8 = 4;
/// A [`Kind::Map`] character that maps to one two-byte character
/// ([`mapped_low`]), or a [`Kind::Multi`] one whose output is two bytes
/// (version 2's `ß` → `ss`; also [`CLASS_FLAGGED`]): [`CharTable::low_maps`]
/// has its bytes.
pub(crate) const CLASS_MAPPED: u8 = 8;
/// A solo character that is its own output ([`SOLO`], [`Kind::Keep`]):
/// a word of its own, which the scanner cuts without a lookup (not
/// [`CLASS_FLAGGED`]).
pub(crate) const CLASS_SOLO: u8 = 16;
/// Code points of the BMP (up to three-byte UTF-8).
pub(crate) const BMP: usize = 0x10000;
/// The CJK Unified Ideographs' BMP block, U+4E00–U+9FFF
/// ([`CharTable::han_class`]).
pub(crate) const HAN: std::ops::Range<usize> = 0x4e00..0xa000;
/// Bytes of [`CharTable::bmp_classes`]: a class for each code point of the
/// BMP and 3 bytes more, so that a 4-byte read at any of them stays inside.
pub(crate) const BMP_CLASSES: usize = BMP + 3;

/// The class bits of `entry` ([`CLASS_KEPT`], [`CLASS_SPACE`],
/// [`CLASS_FLAGGED`]: [`GATHER`], [`SLOW`], [`ATTACH`], or [`SOLO`] but
/// for [`CLASS_SOLO`]).
fn class_byte(entry: u32) -> u8 {
    let has = |bits: u32, class: u8| if entry & bits != 0 { class } else { 0 };
    let plain_solo = entry & (SOLO | GATHER | SLOW) == SOLO;
    has(KEPT, CLASS_KEPT)
        | has(SPACE, CLASS_SPACE)
        | has(GATHER | SLOW | ATTACH, CLASS_FLAGGED)
        | if plain_solo { CLASS_SOLO } else { 0 }
}

/// The entries of the BMP for one option combination: the two-byte range
/// in one array, made with the table, the rest in blocks of 128 characters,
/// each block classified when first looked up (a text touches few: General
/// Punctuation for most European text, ~170 for all of CJK).
#[derive(Debug)]
pub(crate) struct CharTable {
    opts: NormalizeOptions,
    low: Box<[u32; LOW]>,
    /// The classes of `low`, a byte each ([`Self::low_classes`]).
    low_classes: Box<[u8; LOW]>,
    /// The lead and the continuation byte of what each of `low` maps to
    /// ([`Self::low_maps`]).
    low_maps: Box<[[u8; LOW]; 2]>,
    /// The output of each [`Kind::Multi`] code point of `low` (kept
    /// characters only, as [`emit`] gives them), made with the table:
    /// `confusables` maps ASCII letters to several (`m` → `rn`), and
    /// [`emit`] runs the folding steps again at every occurrence (the ASCII
    /// articles' text stage with `confusables` 13.3 ns/byte, 20% of it there).
    low_multi: Box<[Option<Box<str>>]>,
    blocks: [OnceLock<Box<[u32; BLOCK]>>; BLOCKS],
    /// The class of every code point of the BMP, a byte each, for the
    /// vector kernels' gathers ([`Self::bmp_classes`]): made on first use,
    /// whole (a gather cannot build a block on the way).
    bmp: OnceLock<Box<[u8; BMP_CLASSES]>>,
    /// The one class of every code point of [`HAN`], if they have one
    /// ([`Self::han_class`]).
    han: OnceLock<Option<u8>>,
}

impl CharTable {
    fn new(opts: NormalizeOptions) -> Self {
        let mut low = Box::new([0u32; LOW]);
        for (cp, e) in low.iter_mut().enumerate() {
            *e = classify(char::from_u32(cp as u32).expect("below 0x800"), &opts);
        }
        let mut low_classes = Box::new([0u8; LOW]);
        for (c, &e) in low_classes.iter_mut().zip(low.iter()) {
            *c = class_byte(e);
        }
        let low_multi: Box<[Option<Box<str>>]> = (0..LOW)
            .map(|cp| {
                (kind(low[cp]) == Kind::Multi).then(|| {
                    let mut out = String::new();
                    emit(
                        char::from_u32(cp as u32).expect("below 0x800"),
                        &opts,
                        |c| out.push(c),
                    );
                    out.into_boxed_str()
                })
            })
            .collect();
        let mut low_maps = Box::new([[0u8; LOW]; 2]);
        for (cp, &e) in low.iter().enumerate() {
            if e & (SOLO | ATTACH) != 0 {
                continue;
            }
            let two = if let Some(to) = mapped_low(e) {
                Some([0xc0 | (to >> 6) as u8, 0x80 | (to & 0x3f) as u8])
            } else if kind(e) == Kind::Multi {
                // Two bytes of output, as version 2's `ß` → `ss`: written
                // over the character's two bytes as a capital's are.
                let mut out = String::new();
                emit(
                    char::from_u32(cp as u32).expect("below 0x800"),
                    &opts,
                    |c| out.push(c),
                );
                <[u8; 2]>::try_from(out.as_bytes()).ok()
            } else {
                None
            };
            if let Some([lead, cont]) = two {
                low_classes[cp] |= CLASS_MAPPED;
                low_maps[0][cp] = lead;
                low_maps[1][cp] = cont;
            }
        }
        Self {
            opts,
            low,
            low_classes,
            low_maps,
            low_multi,
            blocks: [const { OnceLock::new() }; BLOCKS],
            bmp: OnceLock::new(),
            han: OnceLock::new(),
        }
    }

    #[cold]
    fn build(opts: &NormalizeOptions, block: usize) -> Box<[u32; BLOCK]> {
        let mut b = Box::new([0u32; BLOCK]);
        for (i, e) in b.iter_mut().enumerate() {
            // Surrogates are not chars: never looked up.
            *e = char::from_u32(((block as u32) << BLOCK_BITS) | i as u32)
                .map_or(entry_of(Kind::Slow, false, '\0'), |c| classify(c, opts));
        }
        b
    }

    /// The table for `opts`, created on first use (each of the 8
    /// combinations of version 1's steps, and the 32 of version 2's).
    pub(crate) fn get(opts: &NormalizeOptions) -> &'static CharTable {
        static TABLES: [OnceLock<CharTable>; 40] = [const { OnceLock::new() }; 40];
        let steps = usize::from(opts.nfkc) * 4
            + usize::from(opts.lowercase) * 2
            + usize::from(opts.strip_punctuation);
        let version = if opts.version >= 2 {
            1 + usize::from(opts.fold_accents) + 2 * usize::from(opts.confusables)
        } else {
            0
        };
        TABLES[version * 8 + steps].get_or_init(|| CharTable::new(*opts))
    }

    pub(crate) fn options(&self) -> &NormalizeOptions {
        &self.opts
    }

    /// The entry of a code point below 0x800 (two-byte UTF-8).
    #[inline(always)]
    pub(crate) fn entry_low(&self, cp: u32) -> u32 {
        self.low[cp as usize & (LOW - 1)]
    }

    /// The classes of every code point below 0x800, a byte each
    /// ([`CLASS_KEPT`], [`CLASS_SPACE`], [`CLASS_FLAGGED`]): for the vector
    /// kernel's byte-permute lookups, 128 code points (two registers) at a
    /// time.
    #[inline(always)]
    pub(crate) fn low_classes(&self) -> &[u8; LOW] {
        &self.low_classes
    }

    /// The UTF-8 lead bytes (`[0]`) and continuation bytes (`[1]`) of the
    /// characters the code points below 0x800 with [`CLASS_MAPPED`] map
    /// to (0 for the others): for the vector kernel's byte-permute lookups,
    /// as [`Self::low_classes`].
    #[inline(always)]
    pub(crate) fn low_maps(&self) -> &[[u8; LOW]; 2] {
        &self.low_maps
    }

    /// The class of every code point of the BMP, a byte each, indexed by
    /// code point ([`CLASS_KEPT`], [`CLASS_SPACE`], [`CLASS_FLAGGED`]; below
    /// 0x800 [`Self::low_classes`] itself), then 3 bytes of zeros: for the
    /// vector kernels' gathers, which read 4 bytes at a code point and test
    /// the first; only the builds that have them ask for it. Made whole on the
    /// first call (64 KiB; every block classified: 6–9 ms in a release build,
    /// once per option set and process; a server asks for it before it
    /// serves, through `kernel::warm`), apart from the blocks
    /// [`Self::entry_bmp`] makes one at a time. A byte, not the 4-byte entry:
    /// Chinese and Japanese text reads its classes from 21 KB of the table
    /// instead of 84 KB (the gather was 39% of the Unicode scanner's samples
    /// on them).
    #[inline]
    pub(crate) fn bmp_classes(&self) -> &[u8; BMP_CLASSES] {
        self.bmp.get_or_init(|| {
            let mut all: Box<[u8; BMP_CLASSES]> = vec![0u8; BMP_CLASSES]
                .into_boxed_slice()
                .try_into()
                .unwrap_or_else(|_| unreachable!("BMP classes"));
            all[..LOW].copy_from_slice(&self.low_classes[..]);
            for b in LOW / BLOCK..BLOCKS {
                let block = Self::build(&self.opts, b);
                for (c, &e) in all[b * BLOCK..(b + 1) * BLOCK].iter_mut().zip(block.iter()) {
                    *c = class_byte(e);
                }
            }
            all
        })
    }

    /// The class ([`Self::bmp_classes`]) of every code point of [`HAN`]
    /// (the CJK Unified Ideographs' BMP block), if it is one for all of
    /// them (`CLASS_SOLO` in version 2, `CLASS_KEPT` in version 1): the
    /// vector kernel takes it for them instead of a gather.
    #[inline]
    pub(crate) fn han_class(&self) -> Option<u8> {
        *self.han.get_or_init(|| {
            let classes = &self.bmp_classes()[HAN];
            let first = classes[0];
            classes.iter().all(|&c| c == first).then_some(first)
        })
    }

    /// The two bytes that the two-byte character `cp` (0x80–0x7FF) becomes
    /// if it is [`CLASS_MAPPED`] (a capital that maps to one two-byte
    /// character, or a character that maps to two bytes: `ß` → `ss`).
    #[inline(always)]
    pub(crate) fn low_map(&self, cp: u32) -> Option<[u8; 2]> {
        let cp = cp as usize & (LOW - 1);
        (self.low_classes[cp] & CLASS_MAPPED != 0)
            .then(|| [self.low_maps[0][cp], self.low_maps[1][cp]])
    }

    /// The kept output of the [`Kind::Multi`] character `c` if it is below
    /// 0x800 (made with the table; [`emit`] otherwise).
    #[inline]
    pub(crate) fn multi_low(&self, c: char) -> Option<&str> {
        self.low_multi.get(c as usize)?.as_deref()
    }

    /// Pass each kept character of the [`Kind::Multi`] character `c`'s
    /// output to `f`: [`emit`], from the table below 0x800.
    #[inline]
    pub(crate) fn emit_multi(&self, c: char, f: impl FnMut(char)) {
        match self.multi_low(c) {
            Some(out) => out.chars().for_each(f),
            None => emit(c, &self.opts, f),
        }
    }

    /// The entry of a code point of the BMP at or above 0x800 (three-byte UTF-8).
    #[inline(always)]
    pub(crate) fn entry_bmp(&self, cp: u32) -> u32 {
        let b = (cp >> BLOCK_BITS) as usize & (BLOCKS - 1);
        self.blocks[b].get_or_init(|| Self::build(&self.opts, b))[cp as usize & (BLOCK - 1)]
    }

    /// The entry of the character with code point `cp` (a valid `char`).
    #[inline(always)]
    pub(crate) fn entry_of(&self, cp: u32) -> u32 {
        if cp < LOW as u32 {
            self.entry_low(cp)
        } else if cp < 0x10000 {
            self.entry_bmp(cp)
        } else {
            classify(char::from_u32(cp).expect("a valid code point"), &self.opts)
        }
    }

    /// The entry of `c`.
    #[inline(always)]
    pub(crate) fn entry(&self, c: char) -> u32 {
        self.entry_of(c as u32)
    }

    /// Bytes of heap the table holds.
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        (self.blocks.iter().filter(|b| b.get().is_some()).count() * BLOCK + LOW) * 4
            + self.bmp.get().map_or(0, |_| BMP_CLASSES)
            + std::mem::size_of::<Self>()
    }
}

/// Output sink with the recipe's whitespace rules (as the reference's).
struct Sink<'a> {
    out: &'a mut String,
    pending_space: bool,
}

impl Sink<'_> {
    #[inline(always)]
    fn space(&mut self) {
        self.pending_space = true;
    }

    #[inline(always)]
    fn keep(&mut self, c: char) {
        if self.pending_space && !self.out.is_empty() {
            self.out.push(' ');
        }
        self.pending_space = false;
        self.out.push(c);
    }

    /// One character of NFKC output (not yet lowercased).
    fn push_nfkc(&mut self, c: char, opts: &NormalizeOptions) {
        lower(c, opts, |l| match class_of(l, opts) {
            Class::Space => self.space(),
            Class::Kept => self.keep(l),
            Class::Dropped => {}
        });
    }

    /// A boundary character that is its own segment, by its entry.
    #[inline(always)]
    fn push_entry(&mut self, c: char, entry: u32, table: &CharTable) {
        let opts = table.options();
        match kind(entry) {
            Kind::Keep => self.keep(c),
            Kind::Space => self.space(),
            Kind::Drop => {}
            Kind::Map => self.keep(mapped(entry)),
            Kind::Multi if c < '\u{800}' => table.emit_multi(c, |x| self.keep(x)),
            // Multi: kept and stripped characters only; Slow here: a
            // boundary whose output mixes whitespace in (rare).
            Kind::Multi | Kind::Slow => {
                if opts.nfkc && !is_stable(c) {
                    let mut d = Vec::new();
                    decompose_compatible(c, |x| d.push(x));
                    for x in d {
                        self.push_nfkc(x, opts);
                    }
                } else {
                    self.push_nfkc(c, opts);
                }
            }
        }
    }
}

/// Normalize `text` with `table`'s options into `out` (cleared first):
/// the same output as the reference (NFKC of the whole text, then
/// lowercase, classify and collapse per character).
pub(crate) fn normalize_into(text: &str, table: &CharTable, out: &mut String) {
    out.clear();
    out.reserve(text.len());
    let opts = *table.options();
    let mut sink = Sink {
        out,
        pending_space: false,
    };
    let ascii = super::normalize::AsciiTable::new(&opts);
    let bytes = text.as_bytes();
    // The last boundary character, not yet emitted: it is its own segment
    // only if the character after it is a boundary too.
    let mut held: Option<(usize, char, u32)> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        // With `confusables` ASCII maps to other characters (`m` → `rn`):
        // its entries, below, not the byte table.
        if b < 0x80 && !opts.confusables {
            // ASCII is always a boundary: flush the held one, hold this.
            if let Some((_, c, e)) = held.take() {
                sink.push_entry(c, e, table);
            }
            // Runs of ASCII followed by ASCII need no holding at all.
            let mut j = i;
            while j + 1 < bytes.len() && bytes[j + 1] < 0x80 {
                match ascii.class(bytes[j]) {
                    c if c < super::normalize::AsciiTable::SPACE => sink.keep(char::from(c)),
                    super::normalize::AsciiTable::SPACE => sink.space(),
                    _ => {}
                }
                j += 1;
            }
            let c = char::from(bytes[j]);
            held = Some((j, c, ascii_entry(ascii.class(bytes[j]))));
            i = j + 1;
            continue;
        }
        let c = text[i..].chars().next().expect("a char starts here");
        let e = table.entry(c);
        if e & BOUNDARY != 0 {
            if let Some((_, hc, he)) = held.take() {
                sink.push_entry(hc, he, table);
            }
            held = Some((i, c, e));
            i += c.len_utf8();
            continue;
        }
        // Not a boundary: the segment runs from the held character (or
        // here, at the start of the text) to the next boundary.
        let start = held.take().map_or(i, |(at, _, _)| at);
        let mut end = i + c.len_utf8();
        while end < bytes.len() {
            let next = text[end..].chars().next().expect("a char starts here");
            if table.entry(next) & BOUNDARY != 0 {
                break;
            }
            end += next.len_utf8();
        }
        if opts.nfkc {
            for n in text[start..end].nfkc() {
                sink.push_nfkc(n, &opts);
            }
        } else {
            for n in text[start..end].chars() {
                sink.push_nfkc(n, &opts);
            }
        }
        i = end;
    }
    if let Some((_, c, e)) = held {
        sink.push_entry(c, e, table);
    }
}

/// The entry of an ASCII byte of class `class` (an [`AsciiTable`] class).
///
/// [`AsciiTable`]: super::normalize::AsciiTable
#[inline(always)]
fn ascii_entry(class: u8) -> u32 {
    use super::normalize::AsciiTable;
    match class {
        AsciiTable::SPACE => entry_of(Kind::Space, true, '\0'),
        AsciiTable::DROP => entry_of(Kind::Drop, true, '\0'),
        c => entry_of(Kind::Map, true, char::from(c)),
    }
}

#[cfg(test)]
/// Strings of the hard cases for NFKC, case and classes (combining
/// marks, jamo, compatibility characters, İ, sigma, ß, joiners, emoji,
/// Tibetan and Kannada vowels that decompose or compose) and of version 2
/// (solo characters and what attaches to them, accents that fold or stay,
/// look-alikes, unassigned and private-use code points), mixed with ASCII
/// letters, spaces and punctuation.
pub(crate) fn hard_text(max_len: usize) -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let hard = prop_oneof![
        Just('\u{301}'),
        Just('\u{308}'),
        Just('\u{323}'),
        Just('\u{327}'),
        Just('\u{345}'),
        Just('\u{3099}'),
        Just('\u{309a}'),
        Just('\u{1100}'),
        Just('\u{1161}'),
        Just('\u{11a8}'),
        Just('가'),
        Just('각'),
        Just('ﬁ'),
        Just('①'),
        Just('Ａ'),
        Just('ｶ'),
        Just('ﾞ'),
        Just('İ'),
        Just('ı'),
        Just('Σ'),
        Just('ς'),
        Just('σ'),
        Just('ß'),
        Just('ẞ'),
        Just('\u{200d}'),
        Just('\u{200b}'),
        Just('\u{a0}'),
        Just('\u{3000}'),
        Just('\u{2028}'),
        Just('😀'),
        Just('\u{1f3fb}'),
        Just('é'),
        Just('É'),
        Just('Ά'),
        Just('¨'),
        Just('\u{fdfa}'),
        Just('㏂'),
        Just('½'),
        Just('…'),
        Just('’'),
        Just('\u{f73}'),
        Just('\u{f71}'),
        Just('\u{cc6}'),
        Just('\u{cc2}'),
        Just('\u{1e9b}'),
        Just('K'),
        Just('\u{212a}'),
        Just('Ω'),
        Just('\u{2126}'),
    ];
    // Version 2's cases: solo characters (Han, kana, Thai, an astral
    // ideograph) and what attaches to them, accents that fold or stay,
    // look-alikes (ASCII ones too).
    let scripts = prop_oneof![
        Just('日'),
        Just('本'),
        Just('の'),
        Just('カ'),
        Just('ー'),
        Just('ァ'),
        Just('\u{20000}'),
        Just('ก'),
        Just('ไ'),
        Just('\u{e34}'),
        Just('\u{e33}'),
        Just('\u{e48}'),
        Just('ຫ'),
        Just('ក'),
        Just('\u{17b6}'),
        Just('ह'),
        Just('\u{93f}'),
        Just('\u{64e}'),
        Just('\u{5b8}'),
        Just('ё'),
        Just('Ё'),
        Just('а'),
        Just('А'),
        Just('Ρ'),
        Just('m'),
        Just('0'),
        Just('1'),
        Just('I'),
        Just('ǅ'),
        Just('\u{1e900}'),
        Just('\u{e0001}'),
        Just('\u{10ffff}'),
        Just('\u{378}'),
    ];
    let ch = prop_oneof![
        3 => hard,
        2 => scripts,
        2 => proptest::char::range('a', 'f'),
        1 => Just(' '),
        1 => Just('.'),
        1 => any::<char>(),
    ];
    proptest::collection::vec(ch, 0..max_len).prop_map(|v| v.into_iter().collect())
}

#[cfg(test)]
/// Strings of random characters from the ranges where normalization is
/// hard, not just the listed cases of [`hard_text`]: combining marks
/// (U+0300–036F, U+1AB0–1AFF, U+1DC0–1DFF, U+20D0–20FF, kana voicing),
/// Hangul syllables, conjoining and compatibility jamo, ligatures and
/// presentation forms (U+FB00–FB4F), fullwidth and halfwidth forms,
/// enclosed and squared compatibility characters, emoji with skin tones,
/// ZWJ and variation selectors, Latin, Greek, Cyrillic and CJK letters,
/// the scripts of version 2's words and accents (Thai, Lao, Khmer,
/// Myanmar, Devanagari, Arabic, Hebrew), and ASCII letters, spaces and
/// punctuation between them.
pub(crate) fn random_unicode(max_len: usize) -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::char::range;
    use proptest::prelude::*;
    let ch = prop_oneof![
        4 => range('a', 'z'),
        1 => range('A', 'Z'),
        2 => Just(' '),
        1 => prop_oneof![Just('.'), Just(','), Just('\n'), Just('\''), Just('-')],
        2 => range('\u{300}', '\u{36f}'),
        1 => prop_oneof![
            range('\u{1ab0}', '\u{1aff}'),
            range('\u{1dc0}', '\u{1dff}'),
            range('\u{20d0}', '\u{20ff}'),
            range('\u{3099}', '\u{309c}'),
        ],
        2 => range('\u{ac00}', '\u{d7a3}'),
        2 => prop_oneof![
            range('\u{1100}', '\u{11ff}'),
            range('\u{3130}', '\u{318f}'),
            range('\u{a960}', '\u{a97f}'),
            range('\u{d7b0}', '\u{d7ff}'),
        ],
        1 => range('\u{fb00}', '\u{fb4f}'),
        1 => prop_oneof![range('\u{ff00}', '\u{ffef}'), range('\u{3300}', '\u{33ff}')],
        1 => prop_oneof![range('\u{2460}', '\u{24ff}'), range('\u{1f100}', '\u{1f1ff}')],
        2 => prop_oneof![
            range('\u{1f300}', '\u{1faff}'),
            range('\u{1f3fb}', '\u{1f3ff}'),
            Just('\u{200d}'),
            range('\u{fe00}', '\u{fe0f}'),
        ],
        2 => prop_oneof![
            range('\u{c0}', '\u{24f}'),
            range('\u{370}', '\u{3ff}'),
            range('\u{400}', '\u{4ff}'),
            range('\u{1e00}', '\u{1fff}'),
        ],
        1 => prop_oneof![
            range('\u{3040}', '\u{30ff}'),
            range('\u{4e00}', '\u{9fff}'),
            range('\u{f900}', '\u{faff}'),
            range('\u{2f00}', '\u{2fdf}'),
        ],
        1 => prop_oneof![range('\u{2000}', '\u{206f}'), range('\u{a0}', '\u{bf}')],
        // Scripts written without spaces, and marks that are or are not
        // accents: Thai, Lao, Khmer, Myanmar, Devanagari, Arabic, Hebrew.
        2 => prop_oneof![
            range('\u{e00}', '\u{e7f}'),
            range('\u{e80}', '\u{eff}'),
            range('\u{1780}', '\u{17ff}'),
            range('\u{1000}', '\u{109f}'),
            range('\u{900}', '\u{97f}'),
            range('\u{600}', '\u{6ff}'),
            range('\u{590}', '\u{5ff}'),
        ],
    ];
    proptest::collection::vec(ch, 0..max_len).prop_map(|v| v.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::normalize::reference_normalize;
    use proptest::prelude::*;

    use crate::text::normalize::{all_options, OPTIONS};

    fn fast(text: &str, opts: &NormalizeOptions) -> String {
        let mut out = String::new();
        normalize_into(text, CharTable::get(opts), &mut out);
        out
    }

    #[test]
    fn the_table_agrees_with_classify_and_builds_only_what_is_used() {
        let opts = NormalizeOptions::default();
        let fresh = CharTable::new(opts);
        let before = fresh.heap_bytes();
        assert_eq!(fresh.entry('’'), classify('’', &opts));
        fresh.entry('“');
        assert_eq!(fresh.heap_bytes(), before + 512, "one block built");
        let t = CharTable::get(&opts);
        for cp in (0..0x10000u32).step_by(7) {
            if let Some(c) = char::from_u32(cp) {
                assert_eq!(t.entry(c), classify(c, &opts), "{c:?}");
            }
        }
    }

    /// `kernel::warm` makes exactly the tables the running CPU's word
    /// scanner makes for its first non-ASCII text (the BMP class table
    /// with the VBMI2 kernels, nothing whole otherwise), so that no text
    /// waits for them and no other build holds 64 KiB it never reads.
    #[test]
    fn warm_makes_what_the_first_non_ascii_text_would() {
        let opts = NormalizeOptions::default();
        let warmed = CharTable::new(opts);
        let scanned = CharTable::new(opts);
        assert!(warmed.bmp.get().is_none() && scanned.bmp.get().is_none());
        super::super::kernel::warm(&warmed);
        let mut scratch = super::super::words::AsciiScratch::default();
        let mut out = Vec::new();
        super::super::kernel::word_states("l’été à Zürich", &scanned, 1, &mut scratch, &mut out);
        assert_eq!(out.len(), 3, "lété, à, zürich");
        assert_eq!(warmed.bmp.get().is_some(), scanned.bmp.get().is_some());
        let before = warmed.heap_bytes();
        super::super::kernel::warm(&warmed);
        assert_eq!(warmed.heap_bytes(), before, "a second warm makes nothing");
    }

    /// The vector kernels' byte table holds the class of every BMP code
    /// point's entry (below 0x800, `low_classes` with its [`CLASS_MAPPED`]
    /// bits), then the 3 bytes of slack, zero.
    #[test]
    fn the_bmp_class_bytes_are_the_entries_classes() {
        for opts in [
            NormalizeOptions::default(),
            NormalizeOptions {
                nfkc: false,
                lowercase: false,
                strip_punctuation: false,
                ..Default::default()
            },
        ] {
            let t = CharTable::get(&opts);
            let classes = t.bmp_classes();
            for cp in 0..0x10000u32 {
                // Surrogates are not chars (nor in any UTF-8): never read.
                if let Some(c) = char::from_u32(cp) {
                    let want = class_byte(t.entry(c));
                    assert_eq!(classes[cp as usize] & !CLASS_MAPPED, want, "U+{cp:04X}");
                }
            }
            assert_eq!(classes[BMP..], [0; 3]);
            assert_eq!(classes[..LOW], t.low_classes()[..]);
        }
    }

    /// Every BMP character alone, between ASCII letters and followed by a
    /// combining mark, normalizes as the reference does: the table's claim
    /// for each single character, and the boundary rule around it.
    #[test]
    fn every_bmp_character_normalizes_like_the_reference() {
        for opts in [
            NormalizeOptions::default(),
            NormalizeOptions {
                strip_punctuation: false,
                ..Default::default()
            },
        ] {
            let mut s = String::new();
            for cp in 0x80..0x10000u32 {
                let Some(c) = char::from_u32(cp) else {
                    continue;
                };
                for ctx in [
                    [None, None],
                    [Some('a'), Some('b')],
                    [Some('E'), Some('\u{301}')],
                    [Some('\u{1100}'), Some('\u{1161}')],
                    [Some(' '), Some('\u{3099}')],
                ] {
                    s.clear();
                    s.extend(ctx[0]);
                    s.push(c);
                    s.extend(ctx[1]);
                    assert_eq!(
                        fast(&s, &opts),
                        reference_normalize(&s, &opts),
                        "U+{cp:04X} in {s:?} ({opts:?})"
                    );
                }
            }
        }
    }

    /// No boundary character is ever the second half of a composition the
    /// crate makes: for every code point P whose canonical decomposition
    /// ends in `b`, if `x·b` composes to P then `b` is no boundary.
    #[test]
    fn no_boundary_character_composes_with_what_precedes_it() {
        let opts = NormalizeOptions::default();
        let table = CharTable::get(&opts);
        let mut pairs = 0;
        for cp in 0..0x11_0000u32 {
            let Some(p) = char::from_u32(cp) else {
                continue;
            };
            let mut d = Vec::new();
            unicode_normalization::char::decompose_canonical(p, |x| d.push(x));
            if d.len() < 2 {
                continue;
            }
            let b = d.pop().expect("two or more");
            let x: String = d.iter().collect::<String>().nfc().collect();
            let mut xs = x.chars();
            let (Some(x), None) = (xs.next(), xs.next()) else {
                continue;
            };
            if unicode_normalization::char::compose(x, b) == Some(p) {
                pairs += 1;
                assert_eq!(
                    table.entry(b) & BOUNDARY,
                    0,
                    "U+{:04X} composes into U+{cp:04X}",
                    b as u32
                );
            }
        }
        assert!(pairs > 900, "only {pairs} composition pairs found");
    }

    #[test]
    fn examples_of_each_kind() {
        let opts = NormalizeOptions::default();
        let t = CharTable::get(&opts);
        let k = |c: char| kind(t.entry(c));
        assert_eq!(k('é'), Kind::Keep);
        assert_eq!(k('日'), Kind::Keep);
        assert_eq!(k('д'), Kind::Keep);
        assert_eq!(k('É'), Kind::Map);
        assert_eq!(mapped(t.entry('É')), 'é');
        assert_eq!(k('Д'), Kind::Map);
        assert_eq!(k('Ａ'), Kind::Map);
        assert_eq!(mapped(t.entry('Ａ')), 'a');
        assert_eq!(k('ﬁ'), Kind::Multi);
        assert_eq!(k('İ'), Kind::Multi);
        assert_eq!(k('’'), Kind::Drop);
        assert_eq!(k('“'), Kind::Drop);
        assert_eq!(k('…'), Kind::Drop);
        assert_eq!(k('\u{a0}'), Kind::Space);
        assert_eq!(k('\u{3000}'), Kind::Space);
        assert_eq!(k('\u{301}'), Kind::Slow);
        assert_eq!(t.entry('\u{301}') & BOUNDARY, 0);
        assert_eq!(k('\u{1161}'), Kind::Slow);
        assert_eq!(k('¨'), Kind::Slow);
        assert_eq!(k('😀'), Kind::Drop);
        // Version 2 folds case: ß and ẞ become ss, ς becomes σ.
        assert_eq!(k('ß'), Kind::Multi);
        assert_eq!(k('ẞ'), Kind::Multi);
        assert_eq!(k('Σ'), Kind::Map);
        assert_eq!(k('ς'), Kind::Map);
        assert_eq!(mapped(t.entry('ς')), 'σ');
        // Solo characters (a word each) are flagged in version 2 only.
        assert_ne!(t.entry('日') & SOLO, 0);
        assert_ne!(t.entry('カ') & SOLO, 0);
        assert_ne!(t.entry('ｶ') & SOLO, 0, "half-width kana, NFKC'd to カ");
        assert_eq!(t.entry('가') & SOLO, 0);
        assert_eq!(t.entry('\u{e34}') & SOLO, 0, "an attaching Thai vowel");
        let v1 = CharTable::get(&opts.legacy());
        let k1 = |c: char| kind(v1.entry(c));
        assert_eq!(k1('ß'), Kind::Keep);
        assert_eq!(k1('ẞ'), Kind::Map);
        assert_eq!(k1('ς'), Kind::Keep);
        assert_eq!(v1.entry('日') & SOLO, 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        #[test]
        fn the_fast_normalizer_equals_the_reference_on_hard_text(
            text in hard_text(40),
            o in 0usize..OPTIONS,
        ) {
            let opts = all_options()[o];
            prop_assert_eq!(fast(&text, &opts), reference_normalize(&text, &opts), "{:?}", text);
        }

        #[test]
        fn the_fast_normalizer_equals_the_reference_on_random_unicode(
            text in random_unicode(60),
            o in 0usize..OPTIONS,
        ) {
            let opts = all_options()[o];
            prop_assert_eq!(fast(&text, &opts), reference_normalize(&text, &opts), "{:?}", text);
        }

        #[test]
        fn the_fast_normalizer_equals_the_reference_on_any_text(
            text in any::<String>(),
            o in 0usize..OPTIONS,
        ) {
            let opts = all_options()[o];
            prop_assert_eq!(fast(&text, &opts), reference_normalize(&text, &opts));
        }
    }
}
