//! How many of a document's lists each slot is in, for the passage index's
//! readers: containment queries and lookups (`passages.rs`), on a small
//! hashed table, and the containment pair scan (`dedup.rs`), on an array
//! of every slot.

use crate::lsh::index::Slot;

/// The most cells a counter keeps between rounds (8 MiB).
const KEPT_CELLS: usize = 1 << 20;

/// An open-addressing table of slot counts, at most half full, kept from
/// one document to the next and emptied cell by cell, so that a document
/// costs what it touches, not the table's size (cheaper than sorting the
/// hundreds of entries a query gathers: `passage_bench`).
#[derive(Default)]
pub(crate) struct SlotCounter {
    /// Cells: slot + 1 (0: empty) and the slot's index in `found`.
    cells: Vec<(u32, u32)>,
    /// (slot, count so far), in the order first seen.
    found: Vec<(Slot, u32)>,
}

impl SlotCounter {
    /// Empty (as [`Self::clear`] leaves it), with room for `at_most`
    /// distinct slots.
    pub(crate) fn start(&mut self, at_most: usize) {
        self.found.clear();
        let want = (2 * at_most).next_power_of_two().max(16);
        if self.cells.len() < want {
            self.cells = vec![(0, 0); want];
        }
    }

    #[inline]
    fn home(&self, key: u32) -> usize {
        (key.wrapping_mul(0x9e37_79b1) >> (32 - self.cells.len().trailing_zeros())) as usize
    }

    /// The cell holding `s` (`Ok`), or the empty cell where it would go.
    #[inline]
    fn probe(&self, s: Slot) -> Result<usize, usize> {
        // Slots are below 2^30: slot + 1 never wraps to the empty mark.
        let key = s + 1;
        let mask = self.cells.len() - 1;
        let mut i = self.home(key);
        loop {
            match self.cells[i].0 {
                k if k == key => return Ok(i),
                0 => return Err(i),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Count `s` once more, adding it if new.
    #[inline]
    pub(crate) fn add(&mut self, s: Slot) {
        match self.probe(s) {
            Ok(i) => self.found[self.cells[i].1 as usize].1 += 1,
            Err(i) => {
                self.cells[i] = (s + 1, self.found.len() as u32);
                self.found.push((s, 1));
            }
        }
    }

    /// Count `s` once more if it is counted already.
    #[inline]
    pub(crate) fn add_if_there(&mut self, s: Slot) {
        if let Ok(i) = self.probe(s) {
            self.found[self.cells[i].1 as usize].1 += 1;
        }
    }

    /// Every slot counted, with its count, in the order first seen.
    pub(crate) fn found(&self) -> &[(Slot, u32)] {
        &self.found
    }

    /// Empty the cells used. Every cell on a counted slot's probe sequence
    /// from its home was filled by a slot of this round (nothing is removed
    /// before), and emptying a run from any home empties it to its end, so
    /// emptying from every slot's home empties exactly what was used.
    /// A table of more than [`KEPT_CELLS`] is given back instead.
    pub(crate) fn clear(&mut self) {
        if self.cells.len() > KEPT_CELLS {
            self.cells = Vec::new();
            self.found.clear();
            return;
        }
        let mask = self.cells.len().wrapping_sub(1);
        for k in 0..self.found.len() {
            let mut i = self.home(self.found[k].0 + 1);
            while self.cells[i].0 != 0 {
                self.cells[i] = (0, 0);
                i = (i + 1) & mask;
            }
        }
        self.found.clear();
    }
}

/// A [`SlotCounter`] over an array of every slot, for the pair scan: a
/// count costs one access at the slot, no hash or probe (~10% off the
/// 100k collage scan: docs/benchmarks.md), for 4 bytes a slot held by each
/// of the scan's threads while it runs. Emptied slot by slot.
#[derive(Default)]
pub(crate) struct DenseCounter {
    /// Per slot: its index in `found` + 1 (0: not counted).
    at: Vec<u32>,
    /// (slot, count so far), in the order first seen.
    found: Vec<(Slot, u32)>,
    /// The slots [`Self::finish`] kept.
    passed: Vec<Slot>,
}

impl DenseCounter {
    /// Empty (as [`Self::finish`] leaves it), with room for slots below
    /// `span`.
    pub(crate) fn start(&mut self, span: usize) {
        self.found.clear();
        if self.at.len() < span {
            self.at.resize(span, 0);
        }
    }

    /// Count `s` once more, adding it if new.
    #[inline]
    pub(crate) fn add(&mut self, s: Slot) {
        let at = &mut self.at[s as usize];
        if *at == 0 {
            self.found.push((s, 1));
            *at = self.found.len() as u32;
        } else {
            self.found[*at as usize - 1].1 += 1;
        }
    }

    /// Count `s` once more if it is counted already.
    #[inline]
    pub(crate) fn add_if_there(&mut self, s: Slot) {
        let at = self.at[s as usize];
        if at != 0 {
            self.found[at as usize - 1].1 += 1;
        }
    }

    /// Slots short of `needed` that can still reach it with `left` more.
    pub(crate) fn undecided(&self, needed: usize, left: usize) -> usize {
        self.found
            .iter()
            .filter(|&&(_, c)| (c as usize) < needed && c as usize + left >= needed)
            .count()
    }

    /// What the last [`Self::finish`] kept.
    pub(crate) fn passed(&self) -> &[Slot] {
        &self.passed
    }

    /// The slots counted at least `needed` times; the counter emptied.
    pub(crate) fn finish(&mut self, needed: usize) -> &[Slot] {
        self.passed.clear();
        for &(s, c) in &self.found {
            self.at[s as usize] = 0;
            if c as usize >= needed {
                self.passed.push(s);
            }
        }
        self.found.clear();
        &self.passed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Counts equal a map's, rounds after rounds on one table (each
        /// round starts from an empty one), and only slots seen by `add`
        /// are counted by `add_if_there`; the same of the dense counter,
        /// with what it passes and what is undecided.
        #[test]
        fn counts_equal_a_maps_round_after_round(
            rounds in proptest::collection::vec(
                (proptest::collection::vec(0u32..300, 0..400), proptest::collection::vec(0u32..300, 0..200)),
                1..6),
            needed in 1u32..4,
            left in 0u32..3,
        ) {
            let mut counter = SlotCounter::default();
            let mut dense = DenseCounter::default();
            for (adds, more) in &rounds {
                dense.start(300);
                adds.iter().for_each(|&s| dense.add(s));
                more.iter().for_each(|&s| dense.add_if_there(s));
                counter.start(adds.len());
                prop_assert!(counter.found().is_empty());
                adds.iter().for_each(|&s| counter.add(s));
                more.iter().for_each(|&s| counter.add_if_there(s));
                let mut want: BTreeMap<u32, u32> = BTreeMap::new();
                adds.iter().for_each(|&s| *want.entry(s).or_default() += 1);
                for s in more {
                    if let Some(n) = want.get_mut(s) {
                        *n += 1;
                    }
                }
                let got: BTreeMap<u32, u32> = counter.found().iter().copied().collect();
                prop_assert_eq!(&got, &want);
                let got: BTreeMap<u32, u32> = dense.found.iter().copied().collect();
                prop_assert_eq!(&got, &want);
                let undecided = want.values().filter(|&&n| n < needed && n + left >= needed).count() as u32;
                prop_assert_eq!(dense.undecided(needed as usize, left as usize) as u32, undecided);
                let mut passed = dense.finish(needed as usize).to_vec();
                passed.sort_unstable();
                let want_passed: Vec<u32> = want.iter().filter(|&(_, &n)| n >= needed).map(|(&s, _)| s).collect();
                prop_assert_eq!(passed, want_passed);
                prop_assert!(dense.at.iter().all(|&a| a == 0) && dense.found.is_empty(), "emptied");
                counter.clear();
                prop_assert!(counter.cells.iter().all(|&c| c == (0, 0)), "emptied");
                prop_assert!(counter.found().is_empty());
            }
        }
    }
}
