//! Which bands of a slot share a bucket: a 16-bit mask per slot. Bit `c`
//! stands for the bands `b` with `b % 16 == c` (the class of the band); it
//! is set when the slot is added to a bucket of such a band that already
//! holds another slot (for both of them), and the whole mask is cleared
//! when a slot starts being inserted (a new document in a reused slot).
//!
//! A clear bit is a promise: in every band of that class, the slot's
//! document has been alone in its bucket since it was inserted, so those
//! bands hold no candidate for it and a query by its id need not look them
//! up. A clear mask means no candidates at all, and no band lookup. A set
//! bit promises nothing (a partner may have been removed since); it only
//! means "look". Most documents of a real collection are near-duplicates
//! of nothing, so most queries by id are answered from the mask; and a
//! near-duplicate that is not an exact copy shares some of its bands, not
//! all of them, so the others' lookups are skipped (on the benchmark's
//! articles, a query with candidates looks up 13.7 of the 21 bands on
//! average; docs/benchmarks.md, round 18).
//!
//! The masks are in segments that double in size (slots below 4,096, then
//! 4,096 more, then 8,192 more, ...), each made on first use and never
//! moved, so reading a mask takes no lock and the masks cost at most twice
//! the highest slot's. Beside them is one bit per slot, set with any of
//! the slot's mask bits: at a million slots the bits are 128 KiB, which
//! stay in cache, and the masks 2 MiB, which do not, so a query for a
//! document that shares nothing learns it without a miss and only the
//! others read their mask. Together ~2.1 bytes per document (up to twice
//! that right after a segment is made). One bit per class of 16 bands
//! rather than per band: a 21-band index pays half of what a 32-bit mask
//! would cost, and looks up at most two bands per bit.

use super::table::{Slot, MAX_SLOT};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// A set of band classes: bit `c` for the bands `b` with `b % CLASSES == c`.
pub type BandMask = u16;
/// Band classes of a [`BandMask`].
pub const CLASSES: usize = BandMask::BITS as usize;
/// Every class: what a query looks up when it knows nothing of the slot.
pub const ALL_BANDS: BandMask = BandMask::MAX;

/// The class bit of band `band`.
#[inline]
pub fn class_of(band: usize) -> BandMask {
    1 << (band % CLASSES)
}

/// Segment 0 holds slots below `1 << FIRST_BITS`; segment k ≥ 1 holds
/// `[1 << (FIRST_BITS + k - 1), 1 << (FIRST_BITS + k))`.
const FIRST_BITS: u32 = 12;
/// Enough segments for every slot up to [`MAX_SLOT`].
const SEGMENTS: usize = (Slot::BITS - MAX_SLOT.leading_zeros()) as usize - FIRST_BITS as usize + 1;

/// The two levels: whether a slot shares anything (`any`, one bit: 128 KiB
/// at a million slots, which stays in the core's cache, so the 76% of
/// queries that share nothing take no miss to learn it), and in which
/// classes (`bands`, 16 bits: 2 MiB at a million, read only when `any`
/// is set).
#[derive(Default)]
pub(crate) struct SharedBands {
    any: Lanes<1>,
    bands: Lanes<{ CLASSES as u32 }>,
}

impl SharedBands {
    /// `slot` shares a bucket of band `band` with another slot (or may have).
    pub(crate) fn set(&self, slot: Slot, band: usize) {
        self.bands.set(slot, u64::from(class_of(band)));
        self.any.set(slot, 1);
    }

    /// `slot` is about to be inserted: alone until a bucket says otherwise.
    pub(crate) fn clear(&self, slot: Slot) {
        self.any.clear(slot);
        self.bands.clear(slot);
    }

    /// The band classes in which `slot` may share a bucket with another slot.
    #[inline]
    pub(crate) fn get(&self, slot: Slot) -> BandMask {
        if self.any.get(slot) == 0 {
            return 0;
        }
        self.bands.get(slot) as BandMask
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.any.heap_bytes() + self.bands.heap_bytes()
    }
}

/// `W` bits per slot, in segments of `AtomicU64` words.
struct Lanes<const W: u32> {
    segments: [OnceLock<Box<[AtomicU64]>>; SEGMENTS],
}

impl<const W: u32> Default for Lanes<W> {
    fn default() -> Self {
        Self {
            segments: [const { OnceLock::new() }; SEGMENTS],
        }
    }
}

/// The segment of `slot` and its position there.
#[inline]
fn place(slot: Slot) -> (usize, usize) {
    let s = slot as usize;
    if s < 1 << FIRST_BITS {
        return (0, s);
    }
    let top = usize::BITS - 1 - s.leading_zeros();
    ((top + 1 - FIRST_BITS) as usize, s - (1 << top))
}

/// Slots in segment `k`.
fn segment_len(k: usize) -> usize {
    if k == 0 {
        1 << FIRST_BITS
    } else {
        1 << (FIRST_BITS as usize + k - 1)
    }
}

impl<const W: u32> Lanes<W> {
    /// Slots in one word.
    const PER_WORD: usize = (64 / W) as usize;
    /// A slot's bits, at shift 0.
    const ALL: u64 = u64::MAX >> (64 - W);

    /// The word holding `slot`'s bits, and their shift there.
    #[inline]
    fn word(&self, slot: Slot) -> Option<(&AtomicU64, u32)> {
        let (k, i) = place(slot);
        let words = self.segments[k].get()?;
        Some((&words[i / Self::PER_WORD], lane(i, W)))
    }

    /// Set `bits` (at shift 0) among `slot`'s.
    fn set(&self, slot: Slot, bits: u64) {
        let (k, i) = place(slot);
        let words = self.segments[k].get_or_init(|| {
            (0..segment_len(k) / Self::PER_WORD)
                .map(|_| AtomicU64::new(0))
                .collect()
        });
        let word = &words[i / Self::PER_WORD];
        let bits = bits << lane(i, W);
        // Read first: a slot meets company in several bands, and a load
        // costs less than a locked instruction.
        if word.load(Ordering::Relaxed) & bits != bits {
            word.fetch_or(bits, Ordering::Release);
        }
    }

    /// Clear all of `slot`'s bits.
    fn clear(&self, slot: Slot) {
        if let Some((word, shift)) = self.word(slot) {
            let mask = Self::ALL << shift;
            // Read first: most slots have nothing to clear.
            if word.load(Ordering::Relaxed) & mask != 0 {
                word.fetch_and(!mask, Ordering::Release);
            }
        }
    }

    /// `slot`'s bits, at shift 0.
    #[inline]
    fn get(&self, slot: Slot) -> u64 {
        self.word(slot).map_or(0, |(word, shift)| {
            (word.load(Ordering::Acquire) >> shift) & Self::ALL
        })
    }

    fn heap_bytes(&self) -> usize {
        self.segments
            .iter()
            .filter_map(OnceLock::get)
            .map(|w| w.len() * 8)
            .sum()
    }
}

/// The shift of position `i`'s `w` bits in its word.
#[inline]
fn lane(i: usize, w: u32) -> u32 {
    (i % (64 / w as usize)) as u32 * w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_cover_every_slot_once() {
        assert_eq!(place(0), (0, 0));
        assert_eq!(place(4095), (0, 4095));
        assert_eq!(place(4096), (1, 0));
        assert_eq!(place(8191), (1, 4095));
        assert_eq!(place(8192), (2, 0));
        let (k, i) = place(MAX_SLOT);
        assert_eq!(k, SEGMENTS - 1, "the last segment holds the last slot");
        assert_eq!(i, segment_len(k) - 1);
        // Consecutive slots fill each segment from 0 to its end.
        let mut expected = (0, 0);
        for slot in 0..100_000u32 {
            let p = place(slot);
            assert_eq!(p, expected, "slot {slot}");
            expected = if p.1 + 1 == segment_len(p.0) {
                (p.0 + 1, 0)
            } else {
                (p.0, p.1 + 1)
            };
        }
    }

    #[test]
    fn lanes_of_one_and_sixteen_bits() {
        assert_eq!((Lanes::<1>::PER_WORD, Lanes::<1>::ALL), (64, 1));
        assert_eq!((Lanes::<16>::PER_WORD, Lanes::<16>::ALL), (4, 0xffff));
        assert_eq!(lane(0, 1), 0);
        assert_eq!(lane(63, 1), 63);
        assert_eq!(lane(64, 1), 0);
        assert_eq!(lane(5, 16), 16);
        assert_eq!(lane(7, 16), 48);
    }

    #[test]
    fn masks_are_set_by_class_cleared_whole_and_cost_nothing_until_used() {
        let masks = SharedBands::default();
        assert_eq!(masks.heap_bytes(), 0);
        assert_eq!(masks.get(5), 0);
        masks.clear(5);
        assert_eq!(masks.heap_bytes(), 0, "clearing makes no segment");
        for slot in [0, 5, 63, 64, 4095, 4096, 70_000, 1 << 20] {
            assert_eq!(masks.get(slot), 0);
            masks.set(slot, 3);
            assert_eq!(masks.get(slot), 0b1000);
            // Band 19 is in class 3 too; band 20 in class 4.
            masks.set(slot, 19);
            assert_eq!(masks.get(slot), 0b1000);
            masks.set(slot, 20);
            masks.set(slot, 15);
            assert_eq!(masks.get(slot), 0b1000_0000_0001_1000);
            // The neighbours in the same word and the next are untouched.
            assert_eq!(masks.get(slot ^ 1), 0, "only slot {slot}'s mask");
            assert_eq!(masks.get(slot ^ 2), 0, "only slot {slot}'s mask");
        }
        masks.clear(64);
        assert_eq!(masks.get(64), 0);
        assert_eq!(masks.get(63), 0b1000_0000_0001_1000);
        assert_eq!(masks.get(5), 0b1000_0000_0001_1000);
        // Segments 0, 1, 5 and 9, at 2 bytes and 1 bit a slot.
        let made = [0, 1, place(70_000).0, place(1 << 20).0];
        assert_eq!(
            masks.heap_bytes(),
            made.iter()
                .map(|&k| segment_len(k) * 2 + segment_len(k) / 8)
                .sum::<usize>()
        );
    }

    #[test]
    fn band_classes_wrap_at_sixteen() {
        assert_eq!(class_of(0), 1);
        assert_eq!(class_of(15), 1 << 15);
        assert_eq!(class_of(16), 1);
        assert_eq!(class_of(20), 1 << 4);
        let all = (0..CLASSES).fold(0, |m, b| m | class_of(b));
        assert_eq!(all, ALL_BANDS);
    }
}
