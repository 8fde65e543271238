//! The redis backend's review decisions (issue 46): see the `Backend`
//! methods of the same names, and docs/redis-layout.md, "Review
//! decisions".
//!
//! One hash per collection incarnation (`Keys::decisions`): field = the
//! pair as the JSON array `[a, b]` (unambiguous whatever the ids hold),
//! value = the decision's JSON; and a version counter (`Keys::
//! decisions_version`) every change moves, in the same slot. A change is
//! one script: it reads the pair's stored revision, writes the decision
//! with the next one and moves the version, so two nodes editing a pair
//! at once both count.
//!
//! **Reads are cached per node, checked per call.** `decisions` reads the
//! version (one `GET`) and answers the set it holds when the version is
//! the one it was read at; otherwise it reads the hash and the version
//! together (one script) and keeps them. This node's own changes are
//! applied to the cached set when the version it gets back is the next
//! one (no other node wrote in between), so a moderator deciding pair
//! after pair does not make every queue read the whole hash again. Why a
//! version rather than `HGETALL` on every call: the queue, precision and
//! the exclusion setting ask on every request (a scan, a write with
//! `if_unique`), and 10,000 decisions are 2 to 3 MB to read and parse
//! each time (about 220 bytes a decision without a note) against one
//! small `GET` (measured on a local redis-server, a busy 2-core machine:
//! `HGETALL` of 10,000 decisions, 2.5 MB, 13 ms at best and 51 ms median
//! to transfer alone; a `GET` 0.02 ms).

use super::{corrupt, script_call, RedisIndex, Script};
use crate::backend::BackendError;
use crate::review::{Decision, DecisionSet, PairKey};
use redis::Value;
use std::sync::{Arc, LazyLock};

static PUT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/rv_put.lua")));
static DEL: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/rv_del.lua")));
static READ: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/rv_read.lua")));

/// This node's copy of a collection's decisions and the version it is at.
pub(super) type Cached = Arc<std::sync::Mutex<Option<(u64, Arc<DecisionSet>)>>>;

/// A revision no decision reaches: the mark split out of a decision's
/// JSON for the script to put the real one in.
const REVISION_MARK: &str = "\"revision\":4294967295";

/// The hash field of a pair.
fn field(key: &PairKey) -> Vec<u8> {
    serde_json::to_vec(&[&key.a, &key.b]).expect("a pair serializes")
}

/// `d`'s JSON in two parts, before and after its revision number.
fn split_json(d: &Decision) -> Result<(Vec<u8>, Vec<u8>), BackendError> {
    let mut d = d.clone();
    d.revision = u32::MAX;
    let json = serde_json::to_string(&d)
        .map_err(|e| BackendError::Internal(format!("a decision as JSON: {e}")))?;
    // Field names are written unescaped once; a note's quotes are escaped
    // (`\"`), so the mark is found exactly once, at the field.
    let at = json
        .find(REVISION_MARK)
        .ok_or_else(|| BackendError::Internal("a decision's JSON has no revision".into()))?;
    let before = &json[..at + REVISION_MARK.len() - "4294967295".len()];
    let after = &json[at + REVISION_MARK.len()..];
    Ok((before.as_bytes().to_vec(), after.as_bytes().to_vec()))
}

impl RedisIndex {
    /// The decisions hash and its version key.
    fn decision_keys(&self) -> Vec<String> {
        vec![self.keys.decisions(), self.keys.decisions_version()]
    }

    fn parse_decision(&self, json: &[u8]) -> Result<Decision, BackendError> {
        serde_json::from_slice(json).map_err(|e| corrupt(&self.keys.decisions(), e))
    }

    /// The previous decision and the version a change script answered.
    fn change_answer(&self, v: Value) -> Result<(Option<Decision>, u64), BackendError> {
        let key = self.keys.decisions();
        let Value::Array(mut parts) = v else {
            return Err(corrupt(&key, "a decision change answered no list"));
        };
        if parts.len() != 2 {
            return Err(corrupt(&key, "a decision change answered a short list"));
        }
        let version: u64 = redis::from_redis_value(parts.pop().expect("two parts"))
            .map_err(|e| corrupt(&key, e))?;
        let old: Option<Vec<u8>> = redis::from_redis_value(parts.pop().expect("two parts"))
            .map_err(|e| corrupt(&key, e))?;
        let old = old.map(|j| self.parse_decision(&j)).transpose()?;
        Ok((old, version))
    }

    /// Apply this node's own change to the cached set when `version` is
    /// the next after the cached one; otherwise drop the cache (the next
    /// read reloads).
    fn apply_own(&self, version: u64, change: impl FnOnce(&mut DecisionSet)) {
        let mut cached = self.decisions_seen.lock().expect("decisions cache");
        match cached.as_mut() {
            Some((seen, set)) if *seen + 1 == version => {
                change(Arc::make_mut(set));
                *seen = version;
            }
            Some((seen, _)) if *seen == version => {}
            _ => *cached = None,
        }
    }

    pub(crate) async fn decisions(&self) -> Result<Arc<DecisionSet>, BackendError> {
        let cached = self.decisions_seen.lock().expect("decisions cache").clone();
        if let Some((seen, set)) = cached {
            let mut get = redis::cmd("GET");
            get.arg(self.keys.decisions_version());
            let now: Option<u64> = self
                .redis
                .one("reading the decisions' version", get)
                .await?;
            if now.unwrap_or(0) == seen {
                return Ok(set);
            }
        }
        let key = self.keys.decisions();
        let mut v = self
            .redis
            .calls(
                "reading the review decisions",
                vec![script_call(&READ, self.decision_keys(), Vec::new())],
            )
            .await?;
        let Some(Value::Array(mut parts)) = v.pop() else {
            return Err(corrupt(&key, "reading decisions answered no list"));
        };
        if parts.len() != 2 {
            return Err(corrupt(&key, "reading decisions answered a short list"));
        }
        let pairs: Vec<(Vec<u8>, Vec<u8>)> =
            redis::from_redis_value(parts.pop().expect("two parts"))
                .map_err(|e| corrupt(&key, e))?;
        let version: u64 = redis::from_redis_value(parts.pop().expect("two parts"))
            .map_err(|e| corrupt(&key, e))?;
        let set = Arc::new(DecisionSet::new(
            pairs
                .iter()
                .map(|(_, json)| self.parse_decision(json))
                .collect::<Result<Vec<_>, _>>()?,
        ));
        *self.decisions_seen.lock().expect("decisions cache") = Some((version, Arc::clone(&set)));
        Ok(set)
    }

    pub(crate) async fn put_decision(&self, d: Decision) -> Result<Option<Decision>, BackendError> {
        self.check_writable()?;
        let (before, after) = split_json(&d)?;
        let call = script_call(
            &PUT,
            self.decision_keys(),
            vec![field(&d.key()), before, after],
        );
        let mut v = self
            .redis
            .calls("storing a review decision", vec![call])
            .await?;
        self.redis.replicate().await?;
        let (previous, version) = self.change_answer(v.pop().unwrap_or(Value::Nil))?;
        let mut stored = d;
        stored.revision = Decision::revised(previous.as_ref());
        self.apply_own(version, |set| {
            set.insert(stored);
        });
        Ok(previous)
    }

    pub(crate) async fn delete_decision(
        &self,
        key: &PairKey,
    ) -> Result<Option<Decision>, BackendError> {
        self.check_writable()?;
        let call = script_call(&DEL, self.decision_keys(), vec![field(key)]);
        let mut v = self
            .redis
            .calls("deleting a review decision", vec![call])
            .await?;
        self.redis.replicate().await?;
        let (previous, version) = self.change_answer(v.pop().unwrap_or(Value::Nil))?;
        if previous.is_some() {
            self.apply_own(version, |set| {
                set.remove(key);
            });
        }
        Ok(previous)
    }

    /// Copy the decisions to `to` (a reindex's new incarnation of this
    /// collection), whole (`DUMP`/`RESTORE` of the hash and its version).
    /// Decisions, like writes, answer 503 while a reindex runs (the
    /// collection is paused), so none is stored on the old keys after this
    /// copy. How many keys.
    pub async fn carry_decisions_to(&self, to: &RedisIndex) -> Result<usize, BackendError> {
        let names = [
            (self.keys.decisions(), to.keys.decisions()),
            (self.keys.decisions_version(), to.keys.decisions_version()),
        ];
        let n = self.copy_keys_to(to, &names, "the decisions").await?;
        *to.decisions_seen.lock().expect("decisions cache") = None;
        Ok(n)
    }
}

impl crate::backend::Backend {
    /// A reindex's carry-over of the review decisions from this index to
    /// `to`, the new one; how many keys were copied. On Redis they are
    /// keys of the incarnation: [`RedisIndex::carry_decisions_to`]. The
    /// memory backend keeps them in the collection's directory, which a
    /// reindex keeps: nothing to do.
    pub async fn carry_decisions_to(
        &self,
        to: &crate::backend::Backend,
    ) -> Result<usize, BackendError> {
        use crate::backend::Backend;
        match (self, to) {
            (Backend::Redis(from), Backend::Redis(to)) => from.carry_decisions_to(to).await,
            _ => Ok(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::Verdict;

    #[test]
    fn a_decision_splits_around_its_revision_whatever_its_note_says() {
        let d = Decision {
            a: "\"revision\":4294967295".into(),
            b: "z".into(),
            verdict: Verdict::Related,
            note: Some("\"revision\":4294967295 — « même source »".into()),
            decided_by: None,
            decided_at: "2026-11-29T03:38:15.000Z".into(),
            revision: 7,
            scores: None,
        };
        let (before, after) = split_json(&d).unwrap();
        let joined = [before, b"12".to_vec(), after].concat();
        let back: Decision = serde_json::from_slice(&joined).unwrap();
        assert_eq!(back.revision, 12);
        assert_eq!(back.note, d.note);
        assert_eq!(back.a, d.a);
        assert_eq!(
            field(&PairKey::new("b\",\"", "a").unwrap()),
            br#"["a","b\",\""]"#.to_vec()
        );
    }
}
