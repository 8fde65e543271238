//! What the `review.exclude_not_duplicates` setting leaves out: the pairs
//! moderators judged `not_duplicate`, as the engine's [`ExcludedPairs`]
//! (scans drop them as edges, an `if_unique` write does not count them).
//! Only this verdict excludes: `duplicate` and `related` pairs stay edges.

use super::{DecisionSet, Verdict};
use crate::engine::ExcludedPairs;

impl DecisionSet {
    /// The pairs judged `not_duplicate` (a pass over every decision).
    pub fn not_duplicate_pairs(&self) -> ExcludedPairs {
        ExcludedPairs::new(
            self.iter()
                .filter(|d| d.verdict == Verdict::NotDuplicate)
                .map(|d| (d.a.as_str(), d.b.as_str())),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::decision;
    use super::*;

    #[test]
    fn only_pairs_judged_not_duplicates_are_excluded() {
        let mut set = DecisionSet::new([
            decision("annonce-1", "annonce-2", Verdict::NotDuplicate),
            decision("annonce-1", "annonce-3", Verdict::Duplicate),
            decision("статья", "北京", Verdict::Related),
            decision("北京", "annonce-2", Verdict::NotDuplicate),
        ]);
        let excluded = set.not_duplicate_pairs();
        assert_eq!(excluded.len(), 2);
        assert!(excluded.contains("annonce-2", "annonce-1"));
        assert!(excluded.contains("annonce-2", "北京"));
        assert!(!excluded.contains("annonce-1", "annonce-3"));
        assert!(!excluded.contains("статья", "北京"));
        assert_eq!(
            excluded.partners("annonce-2"),
            [Box::from("annonce-1"), Box::from("北京")]
        );
        // An edit to another verdict takes the pair out of the set (and
        // changes what a cache keyed by the set sees); an edit between
        // the other verdicts changes nothing.
        set.insert(decision("annonce-1", "annonce-2", Verdict::Related));
        let after = set.not_duplicate_pairs();
        assert_eq!(after.len(), 1);
        assert_ne!(after, excluded);
        set.insert(decision("annonce-1", "annonce-3", Verdict::Related));
        assert_eq!(set.not_duplicate_pairs(), after);
    }
}
