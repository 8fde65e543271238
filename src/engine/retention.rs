//! Time in the engine: when a version was stored, when it expires, and
//! the purge of expired documents.
//!
//! A document expires at its own `expires_ms` if it set one, else at
//! `created_ms` plus the index's retention TTL (if any). The TTL is read
//! at every check, so changing it (`PATCH /collections/{name}`) moves the
//! expiry of every document that did not set its own, at once and without
//! a rebuild. An expired document is absent from every answer from the
//! instant it expires ([`Engine::is_live`] is checked by `get`, the
//! candidate verifier and the scans); it stays in memory until
//! [`Engine::remove_if_expired`] purges it (journaled, so a purge is a
//! delete in the log). Purging is final: a TTL raised later brings back
//! only documents not yet purged.
//!
//! Time comes from a [`Clock`], the system's by default, so tests can move
//! it by hand ([`ManualClock`]); the engine does no I/O for it.
//!
//! The count of live documents ([`Engine::live_len`], what `/stats` says)
//! needs no scan: [`ExpiryCounts`] counts the stored documents by the
//! second they expire in (own expiries) or were created in (the others,
//! whose expiry moves with the TTL); the expired ones not yet purged are
//! the few seconds before now.

use super::{DocId, Engine, EngineError, Journal, JournalEntry, Record};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where "now" comes from.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

/// A clock moved by hand (tests): starts at the system time.
#[derive(Debug)]
pub struct ManualClock(AtomicU64);

impl Default for ManualClock {
    fn default() -> Self {
        Self(AtomicU64::new(SystemClock.now_ms()))
    }
}

impl ManualClock {
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_millis() as u64, Ordering::AcqRel);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// Stored documents counted by the second (rounded up) their expiry falls
/// in, if they set one (`own`), else by the second they were created in
/// (`created`: they expire the retention TTL later, whatever it is when
/// asked). A key per second, shared by every document of that second: a
/// bulk load adds a few keys, not one per document.
#[derive(Debug, Default)]
pub(super) struct ExpiryCounts {
    own: BTreeMap<u64, u64>,
    created: BTreeMap<u64, u64>,
}

/// The second `ms` falls in, rounded up: every document of a key's second
/// has expired once that second has passed.
fn second_up(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

impl ExpiryCounts {
    /// Count `record` in (`add`) or out.
    pub(super) fn account(&mut self, record: &Record, add: bool) {
        let stamp = record.stamp();
        let (map, ms) = match stamp.expires_ms {
            Some(at) => (&mut self.own, at),
            None => (&mut self.created, record.created_ms()),
        };
        let key = second_up(ms);
        if add {
            *map.entry(key).or_default() += 1;
        } else if let std::collections::btree_map::Entry::Occupied(mut e) = map.entry(key) {
            *e.get_mut() -= 1;
            if *e.get() == 0 {
                e.remove();
            }
        }
    }

    /// Documents that have expired at `now` under a TTL of `ttl_ms` (0:
    /// none), give or take the second `now` is in: a document counts as
    /// expired from the end of the second its expiry falls in.
    fn expired(&self, now: u64, ttl_ms: u64) -> u64 {
        let sum = |map: &BTreeMap<u64, u64>, upto_ms: u64| -> u64 {
            map.range(..=upto_ms / 1000).map(|(_, n)| n).sum()
        };
        let own = sum(&self.own, now);
        match now.checked_sub(ttl_ms) {
            Some(upto) if ttl_ms != 0 => own + sum(&self.created, upto),
            _ => own,
        }
    }
}

impl Engine {
    /// Stored documents that have not expired (the expired ones are in
    /// [`Self::len`] until the purge), counted without a scan; a document
    /// is counted as live until the end of the second it expires in.
    pub fn live_len(&self) -> usize {
        let expired = self
            .expiries
            .lock()
            .expect("expiry counts lock")
            .expired(self.now_ms(), self.ttl_ms.load(Ordering::Acquire));
        self.len().saturating_sub(expired as usize)
    }

    /// Milliseconds since the epoch, by this engine's clock.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// The retention TTL applied to documents without an expiry of their own.
    pub fn retention(&self) -> Option<Duration> {
        match self.ttl_ms.load(Ordering::Acquire) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// Change the retention TTL; applies at once to every stored document
    /// without an expiry of its own.
    pub fn set_retention(&self, ttl: Option<Duration>) {
        let ms = ttl.map_or(0, |d| (d.as_millis() as u64).max(1));
        self.ttl_ms.store(ms, Ordering::Release);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// When `record` expires (ms since the epoch), if it does.
    pub fn expiry_ms(&self, record: &Record) -> Option<u64> {
        self.expiry_of(record.created_ms(), record.stamp().expires_ms)
    }

    /// When a document created at `created_ms` with an expiry of its own
    /// `own` (if any) expires: `own`, else the retention TTL after
    /// `created_ms`, else never. [`Self::expiry_ms`] of a record, from its
    /// stamp alone (the redis backend's sweep reads only records' heads).
    pub fn expiry_of(&self, created_ms: u64, own: Option<u64>) -> Option<u64> {
        own.or_else(|| {
            let ttl = self.ttl_ms.load(Ordering::Acquire);
            (ttl != 0).then(|| created_ms.saturating_add(ttl))
        })
    }

    /// Whether any stored document can expire: a retention TTL is set, or
    /// some record has an expiry of its own. While neither holds, every
    /// record is live and a scan need not read one to know it.
    pub(crate) fn may_expire(&self) -> bool {
        self.ttl_ms.load(Ordering::Acquire) != 0 || self.own_expiries.load(Ordering::Acquire) != 0
    }

    /// False once `record` has expired (at `now`).
    #[inline]
    pub fn is_live(&self, record: &Record, now: u64) -> bool {
        self.is_live_at(record.created_ms(), record.stamp().expires_ms, now)
    }

    /// [`Self::is_live`] of a document known by its stamp alone (see
    /// [`Self::expiry_of`]).
    #[inline]
    pub fn is_live_at(&self, created_ms: u64, own: Option<u64>, now: u64) -> bool {
        self.expiry_of(created_ms, own).is_none_or(|at| now < at)
    }

    /// The ids of stored documents expired at `now` (a scan of every slot;
    /// the purge calls [`Self::remove_if_expired`] on each).
    pub fn expired_ids(&self, now: u64) -> Vec<DocId> {
        if !self.may_expire() {
            return Vec::new();
        }
        (0..self.slot_span() as u32)
            .filter_map(|slot| self.docs.get(&slot))
            .filter(|record| !self.is_live(record, now))
            .map(|record| record.id().clone())
            .collect()
    }

    /// Remove `id` if its current version has expired at `now`, journaling
    /// the delete first; `None` if it is not stored or still live (a
    /// replace since the scan made it live again).
    pub fn remove_if_expired(
        &self,
        id: &DocId,
        now: u64,
        journal: &dyn Journal,
    ) -> Result<Option<u64>, EngineError> {
        let Some(entry) = self.occupied(id.as_str()) else {
            return Ok(None);
        };
        let expired = !self.is_live(&entry.key().0, now);
        if !expired {
            return Ok(None);
        }
        let seq = journal
            .append(JournalEntry::Delete(id.as_str()))
            .map_err(EngineError::Journal)?;
        let (_, slot) = entry.remove_entry();
        self.release(slot);
        Ok(Some(seq))
    }
}
