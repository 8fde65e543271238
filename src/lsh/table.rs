//! One shard of the band buckets: a single-threaded open-addressing
//! multimap `u32 key → slots`, 8 bytes per key.
//!
//! **Layout.** Each table cell is one `u64`: the key in the high half, the
//! value in the low half; `0` marks an empty cell (keys are never 0). A
//! value is either a slot (the common case: most buckets hold one
//! document), or, with [`SMALL_TAG`] set, the index of a `[Slot; 4]` in
//! `small` holding the bucket's two to four slots (unused entries are
//! [`EMPTY`]), or, with [`SPILL_TAG`] set, the index of a `Vec<Slot>` in
//! `spill` holding its five or more. So a key costs 8 bytes plus the
//! table's slack, with no control bytes; a bucket of two to four slots
//! costs 16 bytes more and no allocation of its own (at a million articles
//! 1.18M of the 19.3M buckets hold two or more slots, 99.9% of them at most
//! four: as a `Vec` each, they took ~63 bytes a document in headers and
//! blocks; one more dependent miss per band lookup, too).
//!
//! **Probing.** Linear probing from the key's home cell, which is
//! `key · capacity >> 32` (Lemire's multiply-shift range reduction), so the
//! capacity need not be a power of two and the table can grow by a smaller
//! factor than doubling. Removal shifts later cells of the cluster back
//! (no tombstones), so lookups stay short after many deletes.
//!
//! **Load.** The table grows to [`LOAD_AFTER_GROW`] when an insert would
//! pass [`MAX_LOAD`], so it holds between 55% and 75% keys (about 12 bytes
//! per key on average; a restore presizes to [`PRESIZE_LOAD`], ~11.5); an
//! unsuccessful lookup then probes ~2–8 cells, mostly within one cache line.
//! It shrinks below [`MIN_LOAD`] and frees everything when empty.
//!
//! **Growth.** New cell arrays, grown or shrunk, are written zeros, not
//! handed over as untouched zero pages (see [`Table::presize`]): a rehash
//! reads a cell before it writes it, and a fresh page read first costs a
//! copy-on-write fault and a TLB flush on every core (1.6% of a fresh
//! server's ingest). Growing by load alone, a table moves each key ~2.8
//! times (1 / 0.36) on its way to its size; growing small tables two sizes
//! at once halves that for a young index but makes a collection below
//! ~130,000 documents hold up to a size step (1.36×) more cells: measured,
//! it added ~2% to a fresh server's ingest on top of the written zeros'
//! ~8%, and was left out (docs/benchmarks.md, round 12).

use crate::prefetch::prefetch;

/// Internal document handle stored in buckets. Slots are below [`SMALL_TAG`].
pub type Slot = u32;

/// Set in a cell's value when it indexes `spill` instead of naming a slot.
pub const SPILL_TAG: u32 = 1 << 31;
/// Set in a cell's value when it indexes `small` instead of naming a slot.
pub const SMALL_TAG: u32 = 1 << 30;
/// Largest slot a table can hold (about a billion documents).
pub const MAX_SLOT: Slot = SMALL_TAG - 1;
/// An unused entry of a `small` bucket (never a slot).
pub const EMPTY: Slot = u32::MAX;
/// Most slots a `small` bucket holds.
const SMALL: usize = 4;

/// Spilled buckets [`Table::lists`] prefetches ahead of the one it yields.
const LISTS_AHEAD: usize = 8;

/// An insert that would take the load above this grows the table.
pub const MAX_LOAD: f64 = 0.75;
/// Load right after growing (and the target of [`Table::reserve`]).
pub const LOAD_AFTER_GROW: f64 = 0.55;
/// Load [`Table::presize`] aims at: a restore knows its final size, so it
/// can pack tighter than growth does and still leave room below [`MAX_LOAD`].
pub const PRESIZE_LOAD: f64 = 0.7;
/// Below this load (and above `MIN_CAPACITY`) a removal shrinks the table.
pub const MIN_LOAD: f64 = 0.2;
const MIN_CAPACITY: usize = 16;

/// Whom a slot found in the bucket it was added to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Joined {
    /// The bucket was empty.
    Nobody,
    /// One slot, now no longer alone in the bucket.
    One(Slot),
    /// Two or more slots.
    Several,
}

#[derive(Debug, Default)]
pub struct Table {
    cells: Vec<u64>,
    /// Occupied cells (distinct keys).
    len: usize,
    /// Buckets of two to four slots, filled from the front; a free entry
    /// is all [`EMPTY`].
    small: Slab<[Slot; SMALL]>,
    /// Buckets of five or more slots; a free entry is an empty `Vec`.
    spill: Slab<Vec<Slot>>,
    /// Sum of the capacities of the `spill` vectors (memory report).
    spill_capacity: usize,
}

/// Entries addressed by a `u32` index that a cell's value carries: freed
/// entries are listed for reuse, except the last one, which is popped.
#[derive(Debug)]
struct Slab<T> {
    items: Vec<T>,
    free: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slab<T> {
    /// Store `item`; its index, below `limit` (the cell's tag bit).
    fn put(&mut self, item: T, limit: u32) -> u32 {
        match self.free.pop() {
            Some(index) => {
                self.items[index as usize] = item;
                index
            }
            None => {
                let index = self.items.len() as u32;
                assert!(index < limit, "bucket space exhausted");
                self.items.push(item);
                index
            }
        }
    }

    /// Take the entry at `index` out, leaving `vacant` in its place.
    fn take(&mut self, index: u32, vacant: T) -> T {
        let item = std::mem::replace(&mut self.items[index as usize], vacant);
        if index as usize + 1 == self.items.len() {
            self.items.pop();
        } else {
            self.free.push(index);
        }
        item
    }

    /// Entries in use.
    fn live(&self) -> usize {
        self.items.len() - self.free.len()
    }

    /// Heap bytes of the entries (not what they point to) and the free list.
    fn heap_bytes(&self) -> usize {
        self.items.capacity() * std::mem::size_of::<T>() + self.free.capacity() * 4
    }
}

impl<T> std::ops::Index<u32> for Slab<T> {
    type Output = T;
    fn index(&self, index: u32) -> &T {
        &self.items[index as usize]
    }
}

impl<T> std::ops::IndexMut<u32> for Slab<T> {
    fn index_mut(&mut self, index: u32) -> &mut T {
        &mut self.items[index as usize]
    }
}

/// Cells for `keys` keys at [`LOAD_AFTER_GROW`].
fn capacity_for(keys: usize) -> usize {
    ((keys as f64 / LOAD_AFTER_GROW) as usize).max(MIN_CAPACITY)
}

#[inline]
fn pack(key: u32, value: u32) -> u64 {
    (u64::from(key) << 32) | u64::from(value)
}

#[inline]
fn key_of(cell: u64) -> u32 {
    (cell >> 32) as u32
}

#[inline]
fn value_of(cell: u64) -> u32 {
    cell as u32
}

/// The slots of one bucket, borrowed from the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket<'a> {
    One(Slot),
    Many(&'a [Slot]),
}

impl Table {
    /// Distinct keys stored.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Heap bytes held: the cell array, the small buckets, and spilled
    /// buckets (their slots, `Vec` headers, and ~16 bytes of allocator
    /// overhead per vector).
    pub fn heap_bytes(&self) -> usize {
        self.cells.capacity() * 8
            + self.small.heap_bytes()
            + self.spill.heap_bytes()
            + self.spill_capacity * 4
            + self.spill.live() * 16
    }

    /// Slots held in spilled buckets' vectors (capacity, for tests and reports).
    pub fn spill_capacity(&self) -> usize {
        self.spill_capacity
    }

    #[inline]
    fn home(&self, key: u32) -> usize {
        ((u64::from(key) * self.cells.len() as u64) >> 32) as usize
    }

    #[inline]
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.cells.len() {
            0
        } else {
            i + 1
        }
    }

    /// The cell holding `key`, if any.
    #[inline]
    fn find(&self, key: u32) -> Option<usize> {
        if self.cells.is_empty() {
            return None;
        }
        let mut i = self.home(key);
        loop {
            let cell = self.cells[i];
            if cell == 0 {
                return None;
            }
            if key_of(cell) == key {
                return Some(i);
            }
            i = self.next(i);
        }
    }

    /// The slots stored under `key`.
    #[inline]
    pub fn get(&self, key: u32) -> Option<Bucket<'_>> {
        Some(self.bucket(value_of(self.cells[self.find(key)?])))
    }

    /// The bucket a cell's value names.
    #[inline]
    fn bucket(&self, value: u32) -> Bucket<'_> {
        if value & (SPILL_TAG | SMALL_TAG) == 0 {
            Bucket::One(value)
        } else if value & SPILL_TAG == 0 {
            let small = &self.small[value & !SMALL_TAG];
            // Filled from the front: two slots, then 0–2 more (no branch).
            let len = 2 + usize::from(small[2] != EMPTY) + usize::from(small[3] != EMPTY);
            Bucket::Many(&small[..len])
        } else {
            Bucket::Many(&self.spill[value & !SPILL_TAG])
        }
    }

    /// The cell at `key`'s home position (0 if the table is empty): the
    /// first half of a lookup, which only loads memory, so that callers can
    /// start the cache misses of many lookups before using any of them.
    #[inline]
    pub fn home_cell(&self, key: u32) -> u64 {
        if self.cells.is_empty() {
            return 0;
        }
        self.cells[self.home(key)]
    }

    /// The second half of a lookup: `get(key)`, given `home`, the value
    /// [`home_cell`](Self::home_cell) read for `key` with no write since.
    #[inline]
    pub fn get_from(&self, key: u32, home: u64) -> Option<Bucket<'_>> {
        let value = if key_of(home) == key {
            value_of(home)
        } else if home == 0 {
            return None;
        } else {
            value_of(self.cells[self.find(key)?])
        };
        Some(self.bucket(value))
    }

    /// Start loading the side entry of `key`'s bucket, if the home cell
    /// (read by [`home_cell`](Self::home_cell)) holds the key and names one:
    /// a hint, so that [`get_from`](Self::get_from) of many keys waits for
    /// these misses together rather than one after another. It decodes the
    /// cell's tags itself: `bucket` would read the entry, the very miss
    /// this starts.
    #[inline]
    pub fn prefetch_bucket(&self, key: u32, home: u64) {
        if key_of(home) != key {
            return;
        }
        let value = value_of(home);
        if value & SPILL_TAG != 0 {
            prefetch(&self.spill[value & !SPILL_TAG]);
        } else if value & SMALL_TAG != 0 {
            prefetch(&self.small[value & !SMALL_TAG]);
        }
    }

    /// Start loading the slots of `key`'s bucket when they are in a
    /// spill vector (five or more), after [`prefetch_bucket`](Self::prefetch_bucket)
    /// had the vector's side entry loaded: the third miss of a lookup of a
    /// long bucket, started for many keys before any is read. Smaller
    /// buckets are in the side entry or the cell itself.
    #[inline]
    pub fn prefetch_slots(&self, key: u32, home: u64) {
        if key_of(home) != key {
            return;
        }
        let value = value_of(home);
        if value & SPILL_TAG != 0 {
            crate::prefetch::prefetch_slice(&self.spill[value & !SPILL_TAG]);
        }
    }

    /// Make room for `additional` more keys without growing on the way.
    pub fn reserve(&mut self, additional: usize) {
        let need = self.len + additional;
        if need as f64 > self.cells.len() as f64 * MAX_LOAD {
            self.resize(capacity_for(need));
        }
    }

    /// Size the table for `additional` more keys at [`PRESIZE_LOAD`] (a
    /// restore, which knows how many keys are coming); never shrinks.
    ///
    /// The new cells are *written* (zeroed by a store, not handed over as
    /// untouched zero pages): a restore fills the table, so every page is
    /// used anyway, and a page first read as the kernel's shared zero page
    /// and then written takes a copy-on-write fault that flushes the TLB
    /// of every core running the process (an IPI each): 7% of a 1M
    /// restore's samples went there. Written here, each page takes one
    /// plain fault, in parallel over the shards, before the load starts.
    pub fn presize(&mut self, additional: usize) {
        let capacity = ((self.len + additional) as f64 / PRESIZE_LOAD).ceil() as usize;
        if capacity > self.cells.len() {
            self.resize(capacity.max(MIN_CAPACITY));
        }
    }

    /// Rehash into `capacity` cells, written zeros (as [`presize`](Self::presize)
    /// explains: a fresh page read before it is written costs a
    /// copy-on-write fault and a TLB flush on every core).
    fn resize(&mut self, capacity: usize) {
        self.rehash_into(crate::prefetch::written_zeros(capacity));
    }

    /// Move every key into `cells` (all empty), which becomes the table.
    fn rehash_into(&mut self, cells: Vec<u64>) {
        debug_assert!(cells.len() as f64 * MAX_LOAD >= self.len as f64);
        let old = std::mem::replace(&mut self.cells, cells);
        for cell in old.into_iter().filter(|&c| c != 0) {
            let mut i = self.home(key_of(cell));
            while self.cells[i] != 0 {
                i = self.next(i);
            }
            self.cells[i] = cell;
        }
    }

    /// Insert every `(key, slot)` as [`insert`](Self::insert) of each in
    /// order would. In a large table every insert is a cache (and TLB)
    /// miss; here the home cells of a group of keys are loaded before any
    /// of them is inserted, so the group's misses are in flight together
    /// instead of one after another (the table is reserved first, so no
    /// insert of the group moves a cell the loads fetched).
    /// `joined` is told what each slot joined, as [`insert`](Self::insert)
    /// returns it, with the entry's index in `entries`.
    pub fn insert_all(
        &mut self,
        entries: &[(u32, Slot)],
        mut joined: impl FnMut(usize, Slot, Joined),
    ) {
        const GROUP: usize = 16;
        self.reserve(entries.len());
        for (g, group) in entries.chunks(GROUP).enumerate() {
            let start = g * GROUP;
            let mut touched = 0u64;
            for &(key, _) in group {
                touched ^= self.cells[self.home(key)];
            }
            std::hint::black_box(touched);
            for (j, &(key, slot)) in group.iter().enumerate() {
                joined(start + j, slot, self.insert(key, slot));
            }
        }
    }

    /// Add `slot` to the bucket of `key` (`key != 0`, `slot <= MAX_SLOT`)
    /// and say what it joined. Adding a slot that is already there stores
    /// it twice (and it joins itself).
    pub fn insert(&mut self, key: u32, slot: Slot) -> Joined {
        debug_assert!(key != 0 && slot <= MAX_SLOT);
        if (self.len + 1) as f64 > self.cells.len() as f64 * MAX_LOAD {
            self.resize(capacity_for(self.len + 1));
        }
        let mut i = self.home(key);
        loop {
            let cell = self.cells[i];
            if cell == 0 {
                self.cells[i] = pack(key, slot);
                self.len += 1;
                return Joined::Nobody;
            }
            if key_of(cell) == key {
                let value = value_of(cell);
                if value & (SPILL_TAG | SMALL_TAG) == 0 {
                    let index = self.small.put([value, slot, EMPTY, EMPTY], SMALL_TAG);
                    self.cells[i] = pack(key, SMALL_TAG | index);
                    return Joined::One(value);
                }
                if value & SPILL_TAG == 0 {
                    let index = value & !SMALL_TAG;
                    let small = &mut self.small[index];
                    if let Some(free) = small.iter_mut().find(|s| **s == EMPTY) {
                        *free = slot;
                        return Joined::Several;
                    }
                    // Full: the bucket moves to `spill`.
                    let mut v = Vec::with_capacity(2 * SMALL);
                    v.extend_from_slice(&self.small.take(index, [EMPTY; SMALL]));
                    v.push(slot);
                    let spilled = self.spill_new(v);
                    self.cells[i] = pack(key, SPILL_TAG | spilled);
                    return Joined::Several;
                }
                let v = &mut self.spill[value & !SPILL_TAG];
                let before = v.capacity();
                v.push(slot);
                self.spill_capacity += v.capacity() - before;
                return Joined::Several;
            }
            i = self.next(i);
        }
    }

    fn spill_new(&mut self, v: Vec<Slot>) -> u32 {
        self.spill_capacity += v.capacity();
        self.spill.put(v, SPILL_TAG)
    }

    fn spill_free(&mut self, index: u32) -> Vec<Slot> {
        let v = self.spill.take(index, Vec::new());
        self.spill_capacity -= v.capacity();
        v
    }

    /// Remove one occurrence of `slot` from the bucket of `key`; false if
    /// it was not there.
    pub fn remove(&mut self, key: u32, slot: Slot) -> bool {
        let Some(i) = self.find(key) else {
            return false;
        };
        let value = value_of(self.cells[i]);
        if value & (SPILL_TAG | SMALL_TAG) == 0 {
            if value != slot {
                return false;
            }
            self.delete_at(i);
            self.maybe_shrink();
            return true;
        }
        if value & SPILL_TAG == 0 {
            let index = value & !SMALL_TAG;
            let small = &mut self.small[index];
            let Some(pos) = small.iter().position(|&s| s == slot) else {
                return false;
            };
            // `swap_remove` within the filled front.
            let last = small
                .iter()
                .rposition(|&s| s != EMPTY)
                .expect("two or more");
            small[pos] = small[last];
            small[last] = EMPTY;
            if last == 1 {
                let [only, ..] = self.small.take(index, [EMPTY; SMALL]);
                self.cells[i] = pack(key, only);
            }
            return true;
        }
        let index = value & !SPILL_TAG;
        let v = &mut self.spill[index];
        let Some(pos) = v.iter().position(|&s| s == slot) else {
            return false;
        };
        v.swap_remove(pos);
        if v.len() == SMALL {
            let v = self.spill_free(index);
            let index = self.small.put([v[0], v[1], v[2], v[3]], SMALL_TAG);
            self.cells[i] = pack(key, SMALL_TAG | index);
        }
        true
    }

    /// Empty cell `i` and shift the rest of its cluster back so that every
    /// key stays reachable from its home without tombstones.
    fn delete_at(&mut self, mut i: usize) {
        let cap = self.cells.len();
        let mut j = i;
        loop {
            j = self.next(j);
            let cell = self.cells[j];
            if cell == 0 {
                break;
            }
            let home = self.home(key_of(cell));
            // The cell at j may move to i unless its home lies cyclically in (i, j].
            let from_home = (j + cap - home) % cap;
            let from_hole = (j + cap - i) % cap;
            if from_home >= from_hole {
                self.cells[i] = cell;
                i = j;
            }
        }
        self.cells[i] = 0;
        self.len -= 1;
    }

    fn maybe_shrink(&mut self) {
        let cap = self.cells.len();
        if self.len == 0 {
            debug_assert_eq!(self.spill.live(), 0);
            debug_assert_eq!(self.small.live(), 0);
            *self = Self::default();
        } else if cap > MIN_CAPACITY && (self.len as f64) < cap as f64 * MIN_LOAD {
            self.resize(capacity_for(self.len));
        }
    }

    /// Every `(key, bucket)`, in cell order (tests: the pair scan reads
    /// [`Self::lists`]).
    #[cfg(test)]
    pub fn iter(&self) -> impl Iterator<Item = (u32, Bucket<'_>)> + '_ {
        self.cells
            .iter()
            .filter(|&&c| c != 0)
            .map(move |&c| (key_of(c), self.bucket(value_of(c))))
    }

    /// Every bucket of two or more slots, in the order they sit in memory
    /// (not by key): a pass over the two slabs, with no cell read and no
    /// jump from a cell to its bucket (a pair scan reads every list once).
    pub fn lists(&self) -> impl Iterator<Item = &[Slot]> + '_ {
        let small = self.small.items.iter().filter(|s| s[0] != EMPTY).map(|s| {
            let len = 2 + usize::from(s[2] != EMPTY) + usize::from(s[3] != EMPTY);
            &s[..len]
        });
        // A spilled bucket is an allocation of its own: each is a miss,
        // so the next ones are asked for a few ahead.
        let items = &self.spill.items;
        let spill = items.iter().enumerate().filter_map(move |(i, v)| {
            if let Some(ahead) = items.get(i + LISTS_AHEAD) {
                prefetch(ahead.as_slice());
            }
            (!v.is_empty()).then_some(v.as_slice())
        });
        small.chain(spill)
    }

    /// Check the invariants: every key reachable from its home, `len` right,
    /// spill bookkeeping consistent.
    #[cfg(test)]
    pub fn validate(&self) {
        let mut occupied = 0;
        let mut live_spill = 0;
        let mut live_small = 0;
        for (i, &c) in self.cells.iter().enumerate() {
            if c == 0 {
                continue;
            }
            occupied += 1;
            assert_ne!(key_of(c), 0);
            assert_eq!(self.find(key_of(c)), Some(i), "key unreachable");
            let v = value_of(c);
            if v & SPILL_TAG != 0 {
                live_spill += 1;
                assert!(self.spill[v & !SPILL_TAG].len() > SMALL);
            } else if v & SMALL_TAG != 0 {
                live_small += 1;
                let small = &self.small[v & !SMALL_TAG];
                let filled = small.iter().take_while(|&&s| s != EMPTY).count();
                assert!(filled >= 2, "a small bucket holds two or more");
                assert!(
                    small[filled..].iter().all(|&s| s == EMPTY),
                    "filled from the front"
                );
            }
        }
        assert_eq!(occupied, self.len);
        assert_eq!(live_small, self.small.live());
        for &f in &self.small.free {
            assert_eq!(self.small[f], [EMPTY; SMALL], "a free small entry is empty");
        }
        assert_eq!(live_spill, self.spill.live());
        assert_eq!(
            self.spill.items.iter().map(Vec::capacity).sum::<usize>(),
            self.spill_capacity
        );
        assert_eq!(
            self.spill.items.iter().filter(|v| !v.is_empty()).count(),
            self.spill.live()
        );
        if !self.cells.is_empty() {
            assert!(self.len as f64 <= self.cells.len() as f64 * MAX_LOAD);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn slots(t: &Table, key: u32) -> Vec<Slot> {
        let mut v = match t.get(key) {
            None => vec![],
            Some(Bucket::One(s)) => vec![s],
            Some(Bucket::Many(v)) => v.to_vec(),
        };
        v.sort_unstable();
        v
    }

    #[test]
    fn single_and_spilled_buckets_round_trip() {
        let mut t = Table::default();
        assert_eq!(t.insert(7, 1), Joined::Nobody);
        assert_eq!(t.get(7), Some(Bucket::One(1)));
        assert_eq!(t.insert(7, 2), Joined::One(1));
        assert_eq!(t.insert(7, 3), Joined::Several);
        assert_eq!(slots(&t, 7), vec![1, 2, 3]);
        assert_eq!(t.len(), 1);
        assert!(t.remove(7, 2));
        assert!(!t.remove(7, 2));
        assert!(t.remove(7, 1));
        assert_eq!(t.get(7), Some(Bucket::One(3)));
        assert_eq!(t.spill_capacity(), 0);
        assert!(t.remove(7, 3));
        assert!(t.is_empty());
        assert_eq!(t.get(7), None);
        t.validate();
    }

    #[test]
    fn buckets_move_between_small_and_spilled_storage() {
        let mut t = Table::default();
        for s in 1..=4 {
            t.insert(9, s);
        }
        assert_eq!(t.get(9), Some(Bucket::Many(&[1, 2, 3, 4])));
        assert_eq!(
            (t.small.items.len(), t.spill_capacity()),
            (1, 0),
            "two to four: small"
        );
        assert_eq!(t.insert(9, 5), Joined::Several);
        assert_eq!(slots(&t, 9), vec![1, 2, 3, 4, 5]);
        assert_eq!(
            t.small.free.len(),
            t.small.items.len(),
            "five: spilled, small entry free"
        );
        assert!(t.spill_capacity() >= 5);
        t.validate();
        assert!(t.remove(9, 1));
        assert_eq!(slots(&t, 9), vec![2, 3, 4, 5]);
        assert_eq!(t.spill_capacity(), 0, "back to four: small again");
        t.validate();
        for s in [5, 3, 2] {
            assert!(t.remove(9, s));
            t.validate();
        }
        assert_eq!(t.get(9), Some(Bucket::One(4)));
        assert!(t.small.items.is_empty() && t.small.free.is_empty());
        // The largest slot is stored as itself, never read as a tag.
        assert_eq!(t.insert(9, MAX_SLOT), Joined::One(4));
        assert_eq!(slots(&t, 9), vec![4, MAX_SLOT]);
    }

    #[test]
    fn colliding_homes_survive_removal_in_any_order() {
        // Keys with the same high bits share a home cell in a small table.
        let mut t = Table::default();
        let keys: Vec<u32> = (1..=12).map(|k| 0x8000_0000 | k).collect();
        for (s, &k) in keys.iter().enumerate() {
            t.insert(k, s as Slot);
        }
        t.validate();
        for (s, &k) in keys.iter().enumerate().rev().step_by(2) {
            assert!(t.remove(k, s as Slot));
            t.validate();
        }
        for (s, &k) in keys.iter().enumerate() {
            let expect = if (keys.len() - 1 - s).is_multiple_of(2) {
                vec![]
            } else {
                vec![s as Slot]
            };
            assert_eq!(slots(&t, k), expect, "key {k:#x}");
        }
    }

    #[test]
    fn reserve_prevents_growth_and_load_stays_in_bounds() {
        let mut t = Table::default();
        t.reserve(10_000);
        let cap = t.cells.len();
        for k in 1..=10_000u32 {
            t.insert(k.wrapping_mul(0x9e37_79b9) | 1, k);
        }
        assert_eq!(t.cells.len(), cap, "no growth after reserve");
        for k in 10_001..=30_000u32 {
            t.insert(k.wrapping_mul(0x9e37_79b9) | 1, k);
        }
        t.validate();
        let load = t.len() as f64 / t.cells.len() as f64;
        assert!((0.5..=MAX_LOAD).contains(&load), "load {load}");
    }

    /// Growth by single inserts keeps to one sequence of sizes, each the
    /// size a full table of the one before grows to, from 16: the sizes
    /// that the memory figures in docs/benchmarks.md were measured with.
    #[test]
    fn growth_keeps_to_the_one_step_sequence_of_sizes() {
        let mut one_step = vec![MIN_CAPACITY];
        while *one_step.last().unwrap() < 100_000 {
            let full = (*one_step.last().unwrap() as f64 * MAX_LOAD) as usize + 1;
            one_step.push((full as f64 / LOAD_AFTER_GROW) as usize);
        }
        let mut t = Table::default();
        let mut sizes = vec![];
        for k in 1..=60_000u32 {
            t.insert(k.wrapping_mul(0x9e37_79b9) | 1, k);
            if sizes.last() != Some(&t.cells.len()) {
                sizes.push(t.cells.len());
            }
        }
        t.validate();
        assert_eq!(sizes, one_step[..sizes.len()], "sizes grown to");
        assert!(*sizes.last().unwrap() > 50_000);
    }

    #[test]
    fn presize_packs_tighter_and_still_fits() {
        let mut t = Table::default();
        t.presize(10_000);
        let cap = t.cells.len();
        assert!(cap >= 10_000 && (cap as f64) < 10_000.0 / 0.65);
        for k in 1..=10_000u32 {
            t.insert(k.wrapping_mul(0x9e37_79b9) | 1, k);
        }
        assert_eq!(t.cells.len(), cap, "no growth after presize");
        t.validate();
    }

    #[test]
    fn presizing_a_table_that_holds_keys_keeps_them() {
        let mut t = Table::default();
        for k in 1..=500u32 {
            t.insert(k.wrapping_mul(0x9e37_79b9) | 1, k);
            t.insert(7, k); // one bucket of 500 slots
        }
        t.presize(20_000);
        assert!(t.cells.len() >= 20_000);
        t.validate();
        for k in 1..=500u32 {
            assert_eq!(t.get(k.wrapping_mul(0x9e37_79b9) | 1), Some(Bucket::One(k)));
        }
        assert_eq!(slots(&t, 7), (1..=500).collect::<Vec<_>>());
    }

    #[test]
    fn removing_everything_releases_the_table() {
        let mut t = Table::default();
        for k in 1..=1000u32 {
            t.insert(k.wrapping_mul(0x9e37_79b9) | 1, k);
        }
        for k in 1..=1000u32 {
            assert!(t.remove(k.wrapping_mul(0x9e37_79b9) | 1, k));
        }
        assert_eq!(t.heap_bytes(), 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Grouped inserts fill the same buckets, slots in the same order,
        /// as inserting one by one (repeated keys, shared homes, growth).
        #[test]
        fn insert_all_equals_inserting_one_by_one(
            before in proptest::collection::vec((1u32..60, 0u32..1000), 0..50),
            entries in proptest::collection::vec(
                prop_oneof![1u32..60, (0u32..30).prop_map(|k| 0xffff_ff00 | k), any::<u32>().prop_map(|k| k.max(1))]
                    .prop_flat_map(|k| (Just(k), 0u32..1000)),
                0..300,
            ),
        ) {
            let mut one = Table::default();
            let mut all = Table::default();
            for &(k, s) in &before {
                one.insert(k, s);
                all.insert(k, s);
            }
            let mut told_one = Vec::new();
            for &(k, s) in &entries {
                told_one.push((s, s, one.insert(k, s)));
            }
            let mut told_all = Vec::new();
            all.insert_all(&entries, |i, s, j| told_all.push((entries[i].1, s, j)));
            prop_assert_eq!(told_all, told_one);
            all.validate();
            prop_assert_eq!(all.len(), one.len());
            for (k, bucket) in one.iter() {
                prop_assert_eq!(all.get(k), Some(bucket));
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u32, Slot),
        Remove(u32, Slot),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Few distinct keys (many shared buckets, long clusters) and keys
        // with equal high bits (same home cell) are the interesting cases.
        let key = prop_oneof![
            1u32..40,
            (0u32..40).prop_map(|k| 0xffff_ff00 | k),
            any::<u32>().prop_map(|k| k.max(1))
        ];
        prop_oneof![
            (key.clone(), 0u32..20).prop_map(|(k, s)| Op::Insert(k, s)),
            (key, 0u32..20).prop_map(|(k, s)| Op::Remove(k, s)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// The table behaves like a `BTreeMap<key, sorted multiset of slots>`.
        #[test]
        fn table_matches_a_simple_model(ops in proptest::collection::vec(op(), 1..400)) {
            let mut t = Table::default();
            let mut model: BTreeMap<u32, Vec<Slot>> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Insert(k, s) => {
                        t.insert(k, s);
                        model.entry(k).or_default().push(s);
                    }
                    Op::Remove(k, s) => {
                        let m = model.entry(k).or_default();
                        let expect = m.iter().position(|&x| x == s).map(|p| m.swap_remove(p)).is_some();
                        if m.is_empty() {
                            model.remove(&k);
                        }
                        prop_assert_eq!(t.remove(k, s), expect);
                    }
                }
            }
            t.validate();
            prop_assert_eq!(t.len(), model.len());
            for (k, v) in &mut model {
                v.sort_unstable();
                prop_assert_eq!(&slots(&t, *k), v);
            }
            for (k, _) in t.iter() {
                prop_assert!(model.contains_key(&k));
            }
            // `lists` gives the buckets of two or more, whatever their order.
            let mut lists: Vec<Vec<Slot>> = t.lists().map(|l| {
                let mut l = l.to_vec();
                l.sort_unstable();
                l
            }).collect();
            lists.sort();
            let mut expect: Vec<Vec<Slot>> = model.values().filter(|v| v.len() >= 2).cloned().collect();
            expect.sort();
            prop_assert_eq!(lists, expect);
        }
    }
}
