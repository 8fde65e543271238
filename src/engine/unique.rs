//! Insert-if-unique: store a document only if nothing stored reaches the
//! threshold, atomically with respect to every other insert-if-unique.
//!
//! **Why striped locks are enough.** A query finds a stored document only
//! through a band key the two signatures share. So two concurrent
//! submissions that would find each other share a band key, and therefore
//! one of the lock stripes that key maps to. Each call locks the stripes of
//! all its band keys (sorted, so no deadlock), queries, inserts, and only
//! then unlocks: of two such submissions the second to lock sees the first
//! in the index. Submissions with no band in common never wait for each
//! other, so unrelated inserts still run in parallel.
//!
//! By containment the same holds of the keys the passage index is read by
//! (a shared run of a window shares a fingerprint; a short text's every
//! shingle is a key): those stripes are locked as well.
//!
//! Plain inserts (`WriteMode`) are not checked and take no stripe.

use super::{DocId, Engine, EngineError, Journal, Prepared, Query, QueryOutcome, Stamp, WriteMode};
use std::sync::{Mutex, MutexGuard};

/// Lock stripes; with b = 21 bands a call takes at most 21 of them.
const STRIPES: usize = 1024;

pub(super) struct Stripes(Box<[Mutex<()>]>);

impl Stripes {
    pub(super) fn new() -> Self {
        Self((0..STRIPES).map(|_| Mutex::new(())).collect())
    }

    /// Lock the stripes of `keys`, in ascending stripe order.
    fn lock(&self, keys: impl Iterator<Item = u64>) -> Vec<MutexGuard<'_, ()>> {
        let mut stripes: Vec<usize> = keys.map(|k| (k % STRIPES as u64) as usize).collect();
        stripes.sort_unstable();
        stripes.dedup();
        stripes
            .into_iter()
            // A panic elsewhere cannot leave `()` inconsistent: ignore poisoning.
            .map(|i| self.0[i].lock().unwrap_or_else(|e| e.into_inner()))
            .collect()
    }
}

/// What an insert-if-unique did.
#[derive(Clone, Debug, PartialEq)]
pub enum UniqueOutcome {
    /// Stored.
    Inserted(UniqueInsert),
    /// Not stored: these stored documents reach the threshold (those the
    /// query ignores left out: [`QueryOutcome::ignored`]).
    Duplicate(QueryOutcome),
}

/// An insert-if-unique that stored its document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UniqueInsert {
    /// The journal's sequence number to wait on.
    pub seq: u64,
    /// Stored documents that reached the threshold but did not count
    /// ([`Query::ignoring`]): stored in spite of them.
    pub ignored: usize,
}

impl Engine {
    /// Store `doc` under the new id `id` (stored now, expiring at
    /// `expires_ms` if given) unless a stored document matches it by `q`
    /// (exact Jaccard ≥ its threshold, stored since its `since`, not one
    /// it ignores: [`Query::ignoring`]); then
    /// nothing is stored and the near-duplicates (at most its limit) are
    /// returned. An existing live `id` is [`EngineError::AlreadyExists`],
    /// as with [`WriteMode::Create`].
    pub fn insert_if_unique(
        &self,
        id: DocId,
        doc: &Prepared,
        metadata: Option<Box<str>>,
        expires_ms: Option<u64>,
        q: &Query,
        journal: &dyn Journal,
    ) -> Result<UniqueOutcome, EngineError> {
        let bands = self.bands().bands;
        // By containment, two submissions that would find each other share
        // a key the query looks up (a fingerprint, or a shingle of a short
        // one) instead of a band key: lock those stripes too.
        let passage_keys = if q.via_passages() {
            self.containment_keys(doc.shingles(), doc.fingerprints())
        } else {
            Vec::new()
        };
        let _stripes = self.unique_locks.lock(
            (0..bands)
                .map(|band| self.lsh.band_key(doc.signature(), band))
                .chain(passage_keys.iter().map(|&k| u64::from(k))),
        );
        if self.get(id.as_str()).is_some() {
            return Err(EngineError::AlreadyExists(id));
        }
        let q = Query {
            limit: q.limit.max(1),
            ..q.clone()
        };
        // Matches of documents the query ignores are dropped before the
        // answer is cut to its limit (`query::finish`): only the others refuse.
        let found = self.similar_to(doc, None, &q)?;
        if !found.matches.is_empty() {
            return Ok(UniqueOutcome::Duplicate(found));
        }
        let stamp = Stamp {
            created_ms: self.now_ms(),
            expires_ms,
        };
        let (_, seq) =
            self.insert_journaled(id, doc, metadata, WriteMode::Create, stamp, journal)?;
        Ok(UniqueOutcome::Inserted(UniqueInsert {
            seq,
            ignored: found.ignored,
        }))
    }
}
