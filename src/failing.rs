//! Failures retried at every use or poll (a damaged event log that the
//! webhook loop reads five times a second), remembered by key with their
//! error, so that each is logged when it starts, when its error changes,
//! and once when it ends, not at every retry.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// The keys whose last try failed, with the error.
pub struct Failing<K>(Mutex<BTreeMap<K, String>>);

impl<K> Default for Failing<K> {
    fn default() -> Self {
        Self(Mutex::new(BTreeMap::new()))
    }
}

impl<K: Ord + Clone> Failing<K> {
    /// `key` failed with `error`: whether to log it (it had not failed,
    /// or failed otherwise).
    pub fn failed(&self, key: K, error: String) -> bool {
        let mut m = self.0.lock().expect("failing lock");
        if m.get(&key) == Some(&error) {
            return false;
        }
        m.insert(key, error);
        true
    }

    /// `key` worked: whether it had failed (to log that it works again).
    pub fn worked(&self, key: &K) -> bool {
        let mut m = self.0.lock().expect("failing lock");
        !m.is_empty() && m.remove(key).is_some()
    }

    /// The keys failing now.
    pub fn keys(&self) -> Vec<K> {
        self.0
            .lock()
            .expect("failing lock")
            .keys()
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_reported_when_it_starts_changes_and_ends_not_at_every_try() {
        let f = Failing::default();
        let sub = (7, Some("wh_1".to_owned()));
        assert!(!f.worked(&sub), "nothing had failed");
        assert!(f.failed(sub.clone(), "damaged at 22".into()));
        assert!(
            !f.failed(sub.clone(), "damaged at 22".into()),
            "the next poll"
        );
        assert!(f.failed((7, None), "damaged at 22".into()), "another read");
        assert!(f.failed(sub.clone(), "disk gone".into()), "another error");
        assert_eq!(f.keys(), vec![(7, None), sub.clone()]);
        assert!(f.worked(&sub));
        assert!(!f.worked(&sub), "logged once");
        assert!(f.failed(sub, "damaged at 22".into()), "failing again");
    }
}
