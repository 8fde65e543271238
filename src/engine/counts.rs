//! The count table of document frequency (`boilerplate.rs`): one shard's
//! `shingle → documents`, an open-addressing table with linear probing
//! whose home slot is the shingle's own top bits (after the shard's).
//!
//! Shingle hashes are uniform, so their top bits spread them evenly, and
//! the home slot grows with the key: a *sorted* run of shingles (a
//! document's set, a switch's values sorted by the caller) visits the
//! table from one end to the other, and a batch grouped by its keys' top
//! bits visits it a region at a time, so the memory it touches is nearly
//! in address order and the prefetch ahead keeps up, where a hashed table
//! would take a cache miss per shingle at random. One `u64` a slot (key
//! in the high half, count in the low half; 0 is empty, as no count is
//! 0), at most 7/8 full: 8 to 16 bytes a distinct shingle. Deletion shifts the following run back, so
//! there are no tombstones.

/// Bits of a shingle that choose its shard (`boilerplate.rs`); the home
/// slot is taken from the bits after them.
pub(crate) const SHARD_BITS: u32 = 6;

const MIN_BITS: u32 = 4;

/// Keys a loop prefetches ahead of the one it works on.
const AHEAD: usize = 32;

#[derive(Debug, Default)]
pub(crate) struct CountTable {
    slots: Vec<u64>,
    len: usize,
    bits: u32,
}

#[inline]
fn key(slot: u64) -> u32 {
    (slot >> 32) as u32
}

impl CountTable {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Heap bytes of the slots.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.capacity() * 8
    }

    #[inline]
    fn home(&self, x: u32) -> usize {
        (((u64::from(x)) << (32 + SHARD_BITS)) >> (64 - self.bits)) as usize
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The slot holding `x`, or the empty slot where it would go. Always
    /// inlined, as is [`Self::add_growing`]: a call a key cost a tenth of
    /// a batch's count (docs/benchmarks.md, stop 68).
    #[inline(always)]
    fn find(&self, x: u32) -> (usize, bool) {
        let mask = self.mask();
        let mut i = self.home(x);
        loop {
            let s = self.slots[i];
            if s == 0 {
                return (i, false);
            }
            if key(s) == x {
                return (i, true);
            }
            i = (i + 1) & mask;
        }
    }

    /// Start loading `x`'s home slot (a hint: a loop over many keys
    /// prefetches a few ahead, so their cache misses overlap).
    #[inline]
    fn prefetch(&self, x: u32) {
        if !self.slots.is_empty() {
            crate::prefetch::prefetch(&self.slots[self.home(x)]);
        }
    }

    /// Add 1 to each of `xs` (sorted), prefetching ahead, room made for
    /// all of them first (one resize at most).
    pub(crate) fn add_each(&mut self, xs: &[u32]) {
        self.reserve(xs.len());
        self.add_all(xs, |&x| (x, 1));
    }

    /// Add each item's `(key, n)`, prefetching ahead; the table grows on
    /// the way when a new key finds it full.
    pub(crate) fn add_all<T>(&mut self, items: &[T], key_n: impl Fn(&T) -> (u32, u32)) {
        if self.slots.is_empty() {
            self.reserve(items.len());
        }
        for (i, item) in items.iter().enumerate() {
            if let Some(ahead) = items.get(i + AHEAD) {
                self.prefetch(key_n(ahead).0);
            }
            let (x, n) = key_n(item);
            self.add_growing(x, n);
        }
    }

    /// The counts of `xs` into `out`, prefetching ahead.
    pub(crate) fn get_each(&self, xs: &[u32], out: &mut Vec<u32>) {
        for (i, &x) in xs.iter().enumerate() {
            if let Some(&ahead) = xs.get(i + AHEAD) {
                self.prefetch(ahead);
            }
            out.push(self.get(x));
        }
    }

    pub(crate) fn get(&self, x: u32) -> u32 {
        if self.len == 0 {
            return 0;
        }
        match self.find(x) {
            (i, true) => self.slots[i] as u32,
            _ => 0,
        }
    }

    /// Whether `more` keys beyond the present ones fit without growing.
    fn has_room(&self, more: usize) -> bool {
        (self.len + more) * 8 <= self.slots.len() * 7
    }

    /// Make room for `more` keys beyond the present ones.
    pub(crate) fn reserve(&mut self, more: usize) {
        let need = self.len + more;
        if self.slots.is_empty() || !self.has_room(more) {
            let mut bits = self.bits.max(MIN_BITS);
            while need * 8 > (1usize << bits) * 7 {
                bits += 1;
            }
            self.resize(bits);
        }
    }

    fn resize(&mut self, bits: u32) {
        // Written zeros: the rehash reads each slot before it writes it.
        let old = std::mem::replace(&mut self.slots, crate::prefetch::written_zeros(1 << bits));
        self.bits = bits;
        for s in old.into_iter().filter(|&s| s != 0) {
            let (i, _) = self.find(key(s));
            self.slots[i] = s;
        }
    }

    /// Add `n` to `x`'s count.
    #[cfg(test)]
    pub(crate) fn add(&mut self, x: u32, n: u32) {
        self.reserve(1);
        self.add_growing(x, n);
    }

    /// Add `n` to `x`'s count in a table with slots: a key already
    /// counted takes one probe; a new one finding the table full grows it
    /// first.
    #[inline(always)]
    fn add_growing(&mut self, x: u32, n: u32) {
        let (mut i, found) = self.find(x);
        if found {
            self.slots[i] += u64::from(n);
            return;
        }
        if !self.has_room(1) {
            self.grow_by_one();
            i = self.find(x).0;
        }
        self.slots[i] = (u64::from(x) << 32) | u64::from(n);
        self.len += 1;
    }

    #[cold]
    #[inline(never)]
    fn grow_by_one(&mut self) {
        self.reserve(1);
    }

    /// Take one from each of `xs`'s counts, prefetching ahead.
    pub(crate) fn sub_each(&mut self, xs: &[u32]) {
        for (i, &x) in xs.iter().enumerate() {
            if let Some(&ahead) = xs.get(i + AHEAD) {
                self.prefetch(ahead);
            }
            self.sub(x);
        }
    }

    /// Take one from `x`'s count (gone at 0; nothing if absent).
    fn sub(&mut self, x: u32) {
        if self.len == 0 {
            return;
        }
        let (mut i, found) = self.find(x);
        if !found {
            return;
        }
        if (self.slots[i] as u32) > 1 {
            self.slots[i] -= 1;
            return;
        }
        // Backward-shift deletion: pull each following entry of the run
        // back into the hole unless its home lies after the hole.
        let mask = self.mask();
        self.slots[i] = 0;
        self.len -= 1;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s == 0 {
                return;
            }
            let h = self.home(key(s));
            // Moveable if home is not in (i, j] (cyclically).
            let in_between = if i <= j {
                i < h && h <= j
            } else {
                i < h || h <= j
            };
            if !in_between {
                self.slots[i] = s;
                self.slots[j] = 0;
                i = j;
            }
        }
    }

    /// Every (shingle, count).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.slots
            .iter()
            .filter(|&&s| s != 0)
            .map(|&s| (key(s), s as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        #[test]
        fn counts_equal_a_map(ops in proptest::collection::vec((any::<bool>(), 0u32..64, any::<u32>()), 0..2000)) {
            let mut t = CountTable::default();
            let mut m: HashMap<u32, u32> = HashMap::new();
            for (add, small, high) in ops {
                // Few distinct keys, spread over the whole range (and the
                // shard bits, which the table ignores).
                let x = (high & 0xFC00_0000) | small.wrapping_mul(0x0123_4567) >> 6;
                if add {
                    t.add(x, 1);
                    *m.entry(x).or_insert(0) += 1;
                } else {
                    t.sub(x);
                    if let Some(c) = m.get_mut(&x) {
                        *c -= 1;
                        if *c == 0 {
                            m.remove(&x);
                        }
                    }
                }
                prop_assert_eq!(t.len(), m.len());
            }
            for (&x, &c) in &m {
                prop_assert_eq!(t.get(x), c);
            }
            let mut all: Vec<(u32, u32)> = t.iter().collect();
            all.sort_unstable();
            let mut want: Vec<(u32, u32)> = m.into_iter().collect();
            want.sort_unstable();
            prop_assert_eq!(all, want);
        }
    }

    proptest! {
        /// Batches added at once (as a write's count does: the table grows
        /// half-way through a batch when a new key finds it full) and some
        /// taken away again count what a map counts, and the table is never
        /// more than 7/8 full.
        #[test]
        fn batches_grow_the_table_on_the_way(
            batches in proptest::collection::vec(proptest::collection::vec(0u32..3000, 0..600), 1..12),
            mix in any::<u32>(),
        ) {
            let mut t = CountTable::default();
            let mut m: HashMap<u32, u32> = HashMap::new();
            for (b, batch) in batches.iter().enumerate() {
                let xs: Vec<u32> = batch.iter().map(|&k| k.wrapping_mul(0x9E37_79B9) ^ mix).collect();
                t.add_all(&xs, |&x| (x, 1));
                for &x in &xs {
                    *m.entry(x).or_insert(0) += 1;
                }
                prop_assert!(t.len() * 8 <= t.heap_bytes() / 8 * 7);
                if b % 3 == 2 {
                    let gone: Vec<u32> = xs.iter().step_by(2).copied().collect();
                    t.sub_each(&gone);
                    for &x in &gone {
                        let c = m.get_mut(&x).unwrap();
                        *c -= 1;
                        if *c == 0 {
                            m.remove(&x);
                        }
                    }
                }
                prop_assert_eq!(t.len(), m.len());
            }
            for (&x, &c) in &m {
                prop_assert_eq!(t.get(x), c);
            }
        }
    }

    #[test]
    fn colliding_homes_and_wraparound_survive_deletes() {
        let mut t = CountTable::default();
        // Keys whose bits after the shard's are all ones: the last slots,
        // so their run wraps to the start.
        let keys: Vec<u32> = (0..12).map(|i| 0x03FF_FFF0 | i).collect();
        for &k in &keys {
            t.add(k, 2);
        }
        for &k in keys.iter().step_by(2) {
            t.sub(k);
            t.sub(k);
        }
        for (n, &k) in keys.iter().enumerate() {
            assert_eq!(t.get(k), if n % 2 == 0 { 0 } else { 2 }, "{k:x}");
        }
        assert_eq!(t.len(), 6);
    }
}
