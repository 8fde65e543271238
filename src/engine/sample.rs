//! Seeded draws: the one random source of samples that must repeat (a
//! stored-text sample with a `seed` draws the same documents on every
//! backend and every run). splitmix64: tiny, fast, and fully determined by
//! its seed.

/// splitmix64 (Steele, Lea and Flood, 2014).
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Put a uniform draw without replacement of `take` items (all, if fewer)
/// at the front of `items`, in draw order: a partial Fisher–Yates shuffle
/// driven by `seed`. The same items in the same order and the same seed
/// give the same draw.
pub fn draw_front<T>(items: &mut [T], take: usize, seed: u64) -> usize {
    let take = take.min(items.len());
    let mut rng = SplitMix64::new(seed);
    for i in 0..take {
        let j = i + (rng.next_u64() % (items.len() - i) as u64) as usize;
        items.swap(i, j);
    }
    take
}

/// The first `take` of `items` (all, if fewer) in a seeded order of their
/// ids: by a keyed hash of the id (xxh3 seeded with `seed`), ties by id.
/// Unlike a shuffle of the sorted ids, a document keeps its place when
/// others come and go, so a walk in this order is stable while the
/// collection changes around it. Linear in `items` plus `take log take`.
pub fn seeded_order<T>(items: Vec<T>, id: impl Fn(&T) -> &str, take: usize, seed: u64) -> Vec<T> {
    let mut ranked: Vec<(u64, T)> = items
        .into_iter()
        .map(|t| {
            (
                xxhash_rust::xxh3::xxh3_64_with_seed(id(&t).as_bytes(), seed),
                t,
            )
        })
        .collect();
    let by = |a: &(u64, T), b: &(u64, T)| a.0.cmp(&b.0).then_with(|| id(&a.1).cmp(id(&b.1)));
    if take < ranked.len() {
        if take == 0 {
            return Vec::new();
        }
        ranked.select_nth_unstable_by(take - 1, by);
        ranked.truncate(take);
    }
    ranked.sort_unstable_by(by);
    ranked.into_iter().map(|(_, t)| t).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_draw_repeats_with_its_seed_and_is_without_replacement() {
        let mut a: Vec<u32> = (0..100).collect();
        let mut b = a.clone();
        assert_eq!(draw_front(&mut a, 10, 7), 10);
        draw_front(&mut b, 10, 7);
        assert_eq!(a[..10], b[..10]);
        let mut seen = a[..10].to_vec();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 10);
        let mut c: Vec<u32> = (0..100).collect();
        draw_front(&mut c, 10, 8);
        assert_ne!(a[..10], c[..10]);
        assert_eq!(draw_front(&mut c[..3], 10, 1), 3);
    }

    #[test]
    fn a_seeded_order_is_a_prefix_of_the_whole_order_and_keeps_places() {
        let ids: Vec<String> = (0..500).map(|i| format!("doc-{i}-ü")).collect();
        let all = seeded_order(ids.clone(), |s| s.as_str(), usize::MAX, 9);
        assert_eq!(all.len(), 500);
        let first = seeded_order(ids.clone(), |s| s.as_str(), 40, 9);
        assert_eq!(first, all[..40]);
        // Another seed, another order; a document gone, the others in place.
        assert_ne!(seeded_order(ids.clone(), |s| s.as_str(), 40, 10), first);
        let fewer: Vec<String> = ids.iter().filter(|s| **s != all[3]).cloned().collect();
        let without: Vec<&String> = all.iter().filter(|s| **s != all[3]).collect();
        let order = seeded_order(fewer, |s| s.as_str(), usize::MAX, 9);
        assert_eq!(order.iter().collect::<Vec<_>>(), without);
        assert!(seeded_order(ids, |s| s.as_str(), 0, 9).is_empty());
    }

    #[test]
    fn splitmix64_matches_its_reference_values() {
        // First outputs for seed 0 (the published reference sequence).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }
}
