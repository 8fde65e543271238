//! The review desk (issue 46): moderators' decisions on pairs of documents
//! and what they measure.
//!
//! A *decision* says of a pair of documents whether they are duplicates
//! (`duplicate`), not (`not_duplicate`), or related without one being a
//! copy of the other (`related`), with an optional note, who decided and
//! the pair's exact scores when it was decided. Decisions are data: the
//! backends keep them durably per collection (a checksummed log in the
//! collection directory in memory, a hash in Redis), the HTTP layer lists,
//! exports and edits them, and this module turns them into measurements:
//! precision per score band with a Wilson interval, and the threshold the
//! labels support.
//!
//! These are the data types shared by the backends, the service layer and
//! the HTTP layer. No I/O here.

pub mod precision;
pub mod queue;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod exclude;

/// Longest note kept with a decision, in bytes.
pub const MAX_NOTE_BYTES: usize = 2000;

/// What a moderator decided about a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// One is a copy (or an excerpt, an abridged copy) of the other.
    Duplicate,
    /// Not a duplicate: the score was a false alarm (the same template,
    /// a different ad).
    NotDuplicate,
    /// The same source or subject, but not a copy.
    Related,
}

impl Verdict {
    pub const ALL: [Verdict; 3] = [Verdict::Duplicate, Verdict::NotDuplicate, Verdict::Related];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Duplicate => "duplicate",
            Verdict::NotDuplicate => "not_duplicate",
            Verdict::Related => "related",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// A pair of documents, in the one order both ids are kept in: `a < b`
/// (bytewise), so `(x, y)` and `(y, x)` are the same pair.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PairKey {
    pub a: String,
    pub b: String,
}

/// A pair of one document with itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a pair needs two different documents; both ids are {0:?}")]
pub struct SamePair(pub String);

impl PairKey {
    /// The pair of `x` and `y`, ordered.
    pub fn new(x: &str, y: &str) -> Result<Self, SamePair> {
        match x.cmp(y) {
            std::cmp::Ordering::Less => Ok(Self {
                a: x.to_owned(),
                b: y.to_owned(),
            }),
            std::cmp::Ordering::Greater => Ok(Self {
                a: y.to_owned(),
                b: x.to_owned(),
            }),
            std::cmp::Ordering::Equal => Err(SamePair(x.to_owned())),
        }
    }

    /// Whether this is the pair of `x` and `y`, in either order.
    pub fn is(&self, x: &str, y: &str) -> bool {
        (self.a == x && self.b == y) || (self.a == y && self.b == x)
    }
}

/// A pair's exact scores when it was decided.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DecisionScores {
    /// Exact Jaccard of the two shingle sets.
    pub jaccard: f64,
    /// The larger of the two containments (either text inside the other).
    pub containment: f64,
    /// Content Jaccard (boilerplate left out), when the collection counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_jaccard: Option<f64>,
}

/// A moderator's decision on a pair, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub a: String,
    pub b: String,
    pub verdict: Verdict,
    #[serde(default)]
    pub note: Option<String>,
    /// The name of the key that decided (`[[auth.keys]] name`), if it has one.
    #[serde(default)]
    pub decided_by: Option<String>,
    /// When (RFC 3339, UTC, milliseconds).
    pub decided_at: String,
    /// 1 when first decided, one more per edit.
    pub revision: u32,
    /// The pair's exact scores when decided (`None`: a document was not
    /// stored and the request gave none).
    #[serde(default)]
    pub scores: Option<DecisionScores>,
}

impl Decision {
    /// The revision a decision stored over `previous` gets: 1 for a new
    /// pair, one more than the previous decision's otherwise.
    pub fn revised(previous: Option<&Decision>) -> u32 {
        previous.map_or(1, |p| p.revision.saturating_add(1))
    }

    pub fn key(&self) -> PairKey {
        PairKey {
            a: self.a.clone(),
            b: self.b.clone(),
        }
    }
}

/// Every decision of a collection, by pair: what the queue skips, what
/// precision counts and what the exclusion setting consults. Built by the
/// backends from their store; cheap to share (`Arc`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DecisionSet {
    by_pair: BTreeMap<PairKey, Decision>,
}

impl DecisionSet {
    pub fn new(decisions: impl IntoIterator<Item = Decision>) -> Self {
        Self {
            by_pair: decisions.into_iter().map(|d| (d.key(), d)).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.by_pair.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_pair.is_empty()
    }

    /// The decision on the pair of `x` and `y`, in either order.
    pub fn get(&self, x: &str, y: &str) -> Option<&Decision> {
        let key = PairKey::new(x, y).ok()?;
        self.by_pair.get(&key)
    }

    /// Whether the pair of `x` and `y` was judged not a duplicate.
    pub fn judged_not_duplicate(&self, x: &str, y: &str) -> bool {
        self.get(x, y)
            .is_some_and(|d| d.verdict == Verdict::NotDuplicate)
    }

    /// Every decision, ordered by pair (`a`, then `b`).
    pub fn iter(&self) -> impl Iterator<Item = &Decision> {
        self.by_pair.values()
    }

    /// Decisions strictly after the pair `after` (by pair order).
    pub fn after<'a>(&'a self, after: Option<&PairKey>) -> impl Iterator<Item = &'a Decision> + 'a {
        use std::ops::Bound;
        let lower = match after {
            Some(k) => Bound::Excluded(k.clone()),
            None => Bound::Unbounded,
        };
        self.by_pair
            .range((lower, Bound::Unbounded))
            .map(|(_, d)| d)
    }

    pub fn insert(&mut self, d: Decision) -> Option<Decision> {
        self.by_pair.insert(d.key(), d)
    }

    pub fn remove(&mut self, key: &PairKey) -> Option<Decision> {
        self.by_pair.remove(key)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A first decision on the pair of `x` and `y`, without note or scores
    /// (the tests of this module and its children).
    pub(crate) fn decision(x: &str, y: &str, verdict: Verdict) -> Decision {
        let k = PairKey::new(x, y).unwrap();
        Decision {
            a: k.a,
            b: k.b,
            verdict,
            note: None,
            decided_by: None,
            decided_at: "2026-11-29T00:00:00.000Z".into(),
            revision: 1,
            scores: None,
        }
    }

    #[test]
    fn a_pair_is_the_same_in_either_order_and_needs_two_documents() {
        assert_eq!(
            PairKey::new("b", "a").unwrap(),
            PairKey::new("a", "b").unwrap()
        );
        assert_eq!(PairKey::new("é", "e").unwrap().a, "e");
        assert!(PairKey::new("x", "x").is_err());
        let set = DecisionSet::new([decision("ж", "a", Verdict::NotDuplicate)]);
        assert!(set.judged_not_duplicate("ж", "a"));
        assert!(set.judged_not_duplicate("a", "ж"));
        assert!(!set.judged_not_duplicate("a", "b"));
    }

    #[test]
    fn decisions_page_in_pair_order() {
        let set = DecisionSet::new([
            decision("c", "d", Verdict::Duplicate),
            decision("a", "b", Verdict::Related),
            decision("a", "c", Verdict::Duplicate),
        ]);
        let all: Vec<_> = set.iter().map(|d| (d.a.as_str(), d.b.as_str())).collect();
        assert_eq!(all, [("a", "b"), ("a", "c"), ("c", "d")]);
        let k = PairKey::new("a", "b").unwrap();
        let rest: Vec<_> = set.after(Some(&k)).map(|d| d.b.as_str()).collect();
        assert_eq!(rest, ["c", "d"]);
    }

    #[test]
    fn verdicts_read_and_write_their_wire_names() {
        for v in Verdict::ALL {
            assert_eq!(Verdict::parse(v.as_str()), Some(v));
            assert_eq!(
                serde_json::to_string(&v).unwrap(),
                format!("\"{}\"", v.as_str())
            );
        }
        assert_eq!(Verdict::parse("Duplicate"), None);
    }
}
