//! Which slots share a bucket: one bit per slot, set when a slot is added
//! to a bucket that already holds another (for both of them), cleared when
//! a slot starts being inserted (a new document in a reused slot).
//!
//! A clear bit is a promise: the slot's document has been alone in every
//! one of its buckets since it was inserted, so it has no candidates and a
//! query for it needs no band lookups. A set bit promises nothing (a
//! partner may have been removed since); it only means "look". Most
//! documents of a real collection are near-duplicates of nothing, so most
//! queries by id are answered from this bit.
//!
//! The bits are in segments that double in size (slots below 4,096, then
//! 4,096 more, then 8,192 more, ...), each made on first use and never
//! moved, so reading a bit takes no lock and the bits cost at most twice
//! the highest slot's: ~0.125 byte per document.

use super::table::{Slot, MAX_SLOT};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Segment 0 holds slots below `1 << FIRST_BITS`; segment k ≥ 1 holds
/// `[1 << (FIRST_BITS + k - 1), 1 << (FIRST_BITS + k))`.
const FIRST_BITS: u32 = 12;
/// Enough segments for every slot up to [`MAX_SLOT`].
const SEGMENTS: usize = (Slot::BITS - MAX_SLOT.leading_zeros()) as usize - FIRST_BITS as usize + 1;

pub(crate) struct SharedBits {
    segments: [OnceLock<Box<[AtomicU64]>>; SEGMENTS],
}

impl Default for SharedBits {
    fn default() -> Self {
        Self {
            segments: [const { OnceLock::new() }; SEGMENTS],
        }
    }
}

/// The segment of `slot` and its bit's position there.
#[inline]
fn place(slot: Slot) -> (usize, usize) {
    let s = slot as usize;
    if s < 1 << FIRST_BITS {
        return (0, s);
    }
    let top = usize::BITS - 1 - s.leading_zeros();
    ((top + 1 - FIRST_BITS) as usize, s - (1 << top))
}

/// Bits in segment `k`.
fn segment_len(k: usize) -> usize {
    if k == 0 {
        1 << FIRST_BITS
    } else {
        1 << (FIRST_BITS as usize + k - 1)
    }
}

impl SharedBits {
    fn word(&self, slot: Slot) -> Option<(&AtomicU64, u64)> {
        let (k, i) = place(slot);
        let words = self.segments[k].get()?;
        Some((&words[i / 64], 1 << (i % 64)))
    }

    /// `slot` shares a bucket with another slot (or may have).
    pub(crate) fn set(&self, slot: Slot) {
        let (k, i) = place(slot);
        let words = self.segments[k].get_or_init(|| {
            (0..segment_len(k) / 64)
                .map(|_| AtomicU64::new(0))
                .collect()
        });
        words[i / 64].fetch_or(1 << (i % 64), Ordering::Release);
    }

    /// `slot` is about to be inserted: alone until a bucket says otherwise.
    pub(crate) fn clear(&self, slot: Slot) {
        if let Some((word, bit)) = self.word(slot) {
            // Read first: most slots have nothing to clear, and a load
            // costs less than a locked instruction.
            if word.load(Ordering::Relaxed) & bit != 0 {
                word.fetch_and(!bit, Ordering::Release);
            }
        }
    }

    /// Whether `slot` may share a bucket with another slot.
    #[inline]
    pub(crate) fn get(&self, slot: Slot) -> bool {
        self.word(slot)
            .is_some_and(|(word, bit)| word.load(Ordering::Acquire) & bit != 0)
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.segments
            .iter()
            .filter_map(OnceLock::get)
            .map(|w| w.len() * 8)
            .sum()
    }
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
    fn bits_are_set_cleared_and_cost_nothing_until_used() {
        let bits = SharedBits::default();
        assert_eq!(bits.heap_bytes(), 0);
        assert!(!bits.get(5));
        bits.clear(5);
        assert_eq!(bits.heap_bytes(), 0, "clearing makes no segment");
        for slot in [0, 5, 63, 64, 4095, 4096, 70_000, 1 << 20] {
            assert!(!bits.get(slot));
            bits.set(slot);
            assert!(bits.get(slot));
            assert!(!bits.get(slot ^ 1), "only slot {slot}'s bit");
        }
        bits.clear(64);
        assert!(!bits.get(64) && bits.get(63) && bits.get(5));
        // Segments 0, 1, 5 and 9.
        let made = [0, 1, place(70_000).0, place(1 << 20).0];
        assert_eq!(
            bits.heap_bytes(),
            made.iter().map(|&k| segment_len(k) / 8).sum::<usize>()
        );
    }
}
