//! Pairs of documents left out of scans, and stored documents a query does
//! not count, by id: what moderators judged *not duplicates* when a
//! collection excludes them (issue 46; `crate::review` builds the set from
//! its decisions, the engine only reads it).
//!
//! **Where it applies.** A whole-index scan ([`Engine::scan_pairs_filtered`](super::Engine::scan_pairs_filtered),
//! and the redis backend's scan) drops an excluded pair once verified, so it
//! is no edge of the groups (and so of the drop list) and is not streamed
//! as a pair; [`ScanStats::excluded`](super::ScanStats::excluded) counts
//! them. An `if_unique` write asks with [`Query::ignoring`](super::Query::ignoring):
//! the documents it was judged not a duplicate of do not make it refuse,
//! and are not named among the matches when another one does.
//!
//! **Cost.** Ids are looked up by hash, with no allocation: a scan pays one
//! lookup per verified pair, and nothing when the set is empty (callers
//! pass `None` then). The set is immutable once built; its
//! [`fingerprint`](ExcludedPairs::fingerprint) and length let a cache of
//! scan answers tell two sets apart cheaply before comparing them.

use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};

/// A set of unordered pairs of document ids.
#[derive(Clone, Debug)]
pub struct ExcludedPairs {
    /// Each id's partners, sorted (every pair is listed under both ids).
    by_id: HashMap<Box<str>, Box<[Box<str>]>>,
    /// Distinct pairs.
    pairs: usize,
    /// A hash of the pairs in order (see [`Self::fingerprint`]).
    fingerprint: u64,
}

impl ExcludedPairs {
    /// The set of `pairs`, in any order and either orientation; repeats
    /// count once and a pair of an id with itself is ignored.
    pub fn new<A: AsRef<str>, B: AsRef<str>>(pairs: impl IntoIterator<Item = (A, B)>) -> Self {
        let ordered: BTreeSet<(Box<str>, Box<str>)> = pairs
            .into_iter()
            .filter_map(|(x, y)| {
                let (x, y) = (x.as_ref(), y.as_ref());
                match x.cmp(y) {
                    std::cmp::Ordering::Less => Some((x.into(), y.into())),
                    std::cmp::Ordering::Greater => Some((y.into(), x.into())),
                    std::cmp::Ordering::Equal => None,
                }
            })
            .collect();
        // SipHash with fixed keys: the same pairs give the same number in
        // this process (all a cache key needs).
        let mut hasher = std::hash::DefaultHasher::new();
        let mut partners: HashMap<Box<str>, Vec<Box<str>>> = HashMap::new();
        for (a, b) in &ordered {
            (a, b).hash(&mut hasher);
            partners.entry(a.clone()).or_default().push(b.clone());
            partners.entry(b.clone()).or_default().push(a.clone());
        }
        let by_id = partners
            .into_iter()
            .map(|(id, mut with)| {
                with.sort_unstable();
                (id, with.into_boxed_slice())
            })
            .collect();
        Self {
            by_id,
            pairs: ordered.len(),
            fingerprint: hasher.finish(),
        }
    }

    /// Distinct pairs.
    pub fn len(&self) -> usize {
        self.pairs
    }

    pub fn is_empty(&self) -> bool {
        self.pairs == 0
    }

    /// Whether the pair of `x` and `y` (either order) is in the set.
    #[inline]
    pub fn contains(&self, x: &str, y: &str) -> bool {
        self.by_id
            .get(x)
            .is_some_and(|with| with.binary_search_by(|p| (**p).cmp(y)).is_ok())
    }

    /// The ids paired with `id`, sorted.
    pub fn partners(&self, id: &str) -> &[Box<str>] {
        self.by_id.get(id).map_or(&[], |with| with)
    }

    /// A 64-bit hash of the pairs (in their order): with [`Self::len`],
    /// what tells two sets apart at a glance; equality compares the pairs.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }
}

impl Default for ExcludedPairs {
    /// The empty set (with the fingerprint of no pairs).
    fn default() -> Self {
        Self::new(std::iter::empty::<(&str, &str)>())
    }
}

/// Two sets are equal when they hold the same pairs (the length and the
/// fingerprint are compared first, so different sets rarely cost more).
impl PartialEq for ExcludedPairs {
    fn eq(&self, other: &Self) -> bool {
        self.pairs == other.pairs
            && self.fingerprint == other.fingerprint
            && self.by_id == other.by_id
    }
}

impl Eq for ExcludedPairs {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_is_found_in_either_order_and_only_it() {
        let set = ExcludedPairs::new([("ж-1", "é-2"), ("é-2", "ж-1"), ("a", "a"), ("b", "a")]);
        assert_eq!(set.len(), 2, "a repeat counts once, a self pair not at all");
        assert!(set.contains("ж-1", "é-2") && set.contains("é-2", "ж-1"));
        assert!(set.contains("a", "b") && set.contains("b", "a"));
        assert!(!set.contains("a", "a"));
        assert!(!set.contains("a", "é-2"));
        assert!(!set.contains("nobody", "a"));
        assert_eq!(set.partners("a"), [Box::from("b")]);
        assert!(set.partners("nobody").is_empty());
    }

    #[test]
    fn equal_sets_have_one_fingerprint_and_a_new_pair_changes_it() {
        let one = ExcludedPairs::new([("x", "y"), ("上海", "北京")]);
        let same = ExcludedPairs::new([("北京", "上海"), ("y", "x")]);
        assert_eq!(one, same);
        assert_eq!(one.fingerprint(), same.fingerprint());
        let more = ExcludedPairs::new([("x", "y"), ("上海", "北京"), ("x", "z")]);
        assert_ne!(one, more);
        assert_ne!(one.fingerprint(), more.fingerprint());
        let other = ExcludedPairs::new([("x", "z"), ("上海", "北京")]);
        assert_eq!(one.len(), other.len());
        assert_ne!(one, other);
        assert!(ExcludedPairs::default().is_empty());
        assert_eq!(
            ExcludedPairs::new(Vec::<(&str, &str)>::new()),
            ExcludedPairs::default()
        );
    }
}
