//! The if_unique path of [`RedisIndex`]: store a document unless a stored
//! one matches it, by publishing, then verifying (docs/redis-layout.md,
//! "if_unique across nodes"). Of two concurrent near-duplicate writes that
//! share a band, at least one sees the other: never both stored.

use super::codec::{decode_record, member};
use super::write::{parse_commit, Committed, Staged, APPEND};
use super::{corrupt, new_gen, BackendError, Conn, RedisIndex, Script};
use crate::engine::{EngineError, NewDoc, Query, UniqueOutcome, WriteMode};
use std::sync::atomic::Ordering;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

/// How long an if_unique write's pending key lives (a crashed writer's
/// claim lapses by itself).
const PENDING_MS: u64 = 30_000;
/// An if_unique write that keeps meeting concurrent near-duplicates gives
/// up after this many attempts (503: retry).
const UNIQUE_ATTEMPTS: u32 = 5;

/// Delete a pending key if it still holds `ARGV[1]`. `KEYS[1]` the pending key.
static UNCLAIM: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/unclaim.lua")));

impl RedisIndex {
    /// Store `new` unless a stored document matches it by `q`: publish,
    /// then verify (docs/redis-layout.md, "if_unique across nodes"). Of two
    /// concurrent near-duplicate writes that share a band, at least one
    /// sees the other: never both stored. One that meets another pending
    /// near-duplicate withdraws and tries again after a short random wait;
    /// after a few attempts it answers 503 (retry).
    pub async fn insert_if_unique(
        &self,
        new: NewDoc,
        q: Query,
    ) -> Result<UniqueOutcome, BackendError> {
        self.check_writable()?;
        let q = Query {
            limit: q.limit.max(1),
            ..q
        };
        for attempt in 0..UNIQUE_ATTEMPTS {
            if attempt > 0 {
                self.redis.counters.retries.fetch_add(1, Ordering::Relaxed);
                let jitter = u64::from(new_gen() % 40) + 10 * u64::from(attempt);
                tokio::time::sleep(Duration::from_millis(jitter)).await;
            }
            match self.try_unique(&new, &q).await? {
                Some(outcome) => return Ok(outcome),
                None => continue,
            }
        }
        Err(BackendError::Unavailable(format!(
            "if_unique write of {:?} kept meeting concurrent near-duplicate writes",
            new.id.as_str()
        )))
    }

    /// One attempt: `None` when a concurrent pending near-duplicate made
    /// it withdraw.
    async fn try_unique(
        &self,
        new: &NewDoc,
        q: &Query,
    ) -> Result<Option<UniqueOutcome>, BackendError> {
        let started = Instant::now();
        let now = self.engine.now_ms();
        let doc = self.stage(new, now);
        let pending_key = self.keys.pending(doc.iid);
        // Trip 1: claim (the pending key) and publish (the entries).
        let claim = {
            let key = pending_key.clone();
            let value = doc.value.clone();
            move |mut c: Conn| async move {
                let mut set = redis::cmd("SET");
                set.arg(key).arg(value).arg("PX").arg(PENDING_MS).arg("NX");
                set.query_async::<Option<String>>(&mut c).await.map(|_| ())
            }
        };
        self.redis.trip("claiming an id", vec![claim]).await?;
        let calls = self.bucket_calls([(doc.iid, doc.gen, doc.band_keys.as_slice())]);
        let mut trip = Self::bucket_script_calls(&APPEND, calls);
        trip.extend(self.due_add_calls([(doc.due, member(doc.iid, doc.gen))]));
        self.redis.calls("appending bucket entries", trip).await?;
        // Trip 2: the buckets, after our own entries are in.
        let mut found = self.bucket_members(&doc.band_keys).await?;
        found.remove(&doc.iid);
        let mut iids: Vec<u64> = found.keys().copied().collect();
        iids.sort_unstable();
        let cap = self.engine.params().index.max_candidates;
        let truncated = iids.len() > cap;
        iids.truncate(cap);
        // Trip 3: each candidate's record and pending write, and our own record.
        let mut keys: Vec<u64> = iids.clone();
        keys.push(doc.iid);
        let commands: Vec<_> = keys
            .iter()
            .map(|&i| {
                let (r, p) = (self.keys.record(i), self.keys.pending(i));
                move |mut c: Conn| async move {
                    let mut mget = redis::cmd("MGET");
                    mget.arg(r).arg(p);
                    mget.query_async::<(Option<Vec<u8>>, Option<Vec<u8>>)>(&mut c)
                        .await
                }
            })
            .collect();
        let mut pairs = self.redis.trip("reading candidates", commands).await?;
        let (own, _) = pairs.pop().expect("our own record was read");
        if let Some(own) = own {
            let stored = decode_record(&own).map_err(|e| corrupt(new.id.as_str(), e))?;
            if stored.id == new.id.as_str() {
                let record = self.to_record(stored)?;
                if self.engine.is_live(&record, now) {
                    self.withdraw(&doc).await?;
                    return Err(EngineError::AlreadyExists(new.id.clone()).into());
                }
            }
        }
        let mut committed = Vec::new();
        let mut pending = Vec::new();
        for (i, (rec, pend)) in iids.iter().zip(pairs) {
            let gens = &found[i];
            if let Some(stored) = rec
                .map(|b| decode_record(&b))
                .transpose()
                .map_err(|e| corrupt(&self.keys.record(*i), e))?
            {
                if gens.contains(&stored.gen) {
                    committed.push(self.to_record(stored)?);
                }
            }
            if let Some(stored) = pend
                .map(|b| decode_record(&b))
                .transpose()
                .map_err(|e| corrupt(&self.keys.pending(*i), e))?
            {
                if gens.contains(&stored.gen) {
                    pending.push(self.to_record(stored)?);
                }
            }
        }
        let prepared = &new.doc;
        let matches =
            self.engine
                .verify_candidates(prepared, Some(new.id.as_str()), q, committed, truncated);
        if !matches.matches.is_empty() {
            self.withdraw(&doc).await?;
            return Ok(Some(UniqueOutcome::Duplicate(matches)));
        }
        let rivals =
            self.engine
                .verify_candidates(prepared, Some(new.id.as_str()), q, pending, false);
        if !rivals.matches.is_empty() {
            self.withdraw(&doc).await?;
            return Ok(None);
        }
        // Trip 4: commit (fails if our claim lapsed meanwhile).
        if started.elapsed() >= Duration::from_millis(PENDING_MS / 2) {
            self.withdraw(&doc).await?;
            return Ok(None);
        }
        let mut answer = self
            .redis
            .trip(
                "committing a record",
                vec![self.commit_call(&doc, WriteMode::Create, true, now)],
            )
            .await?;
        match parse_commit(answer.pop().expect("one answer"))? {
            Committed::Created(old) => {
                self.redis.replicate().await?;
                let mut trip = match &old {
                    Some(old) => self.removal_calls(&[(doc.iid, old.clone())])?,
                    None => Vec::new(),
                };
                if old.is_none() {
                    trip.push(self.counter_call(1));
                }
                trip.push(self.bump_call());
                self.redis.calls("committing a record", trip).await?;
                Ok(Some(UniqueOutcome::Inserted(0)))
            }
            Committed::Exists => {
                self.withdraw(&doc).await?;
                Err(EngineError::AlreadyExists(new.id.clone()).into())
            }
            Committed::Expired => {
                self.remove_entries(&[(doc.iid, doc.value.clone())]).await?;
                Ok(None)
            }
            Committed::Collision => {
                self.withdraw(&doc).await?;
                Err(BackendError::Unavailable(format!(
                    "id {:?} collides with a stored id",
                    new.id.as_str()
                )))
            }
            Committed::Replaced(_) => Err(BackendError::Internal(
                "a create commit replaced a live record".into(),
            )),
        }
    }

    /// Take back an if_unique claim: the pending key (only if it still
    /// holds this write) and the entries it published.
    async fn withdraw(&self, doc: &Staged) -> Result<(), BackendError> {
        let key = self.keys.pending(doc.iid);
        let value = doc.value.clone();
        self.redis
            .trip(
                "withdrawing a claim",
                vec![move |mut c: Conn| async move {
                    UNCLAIM
                        .key(key)
                        .arg(value)
                        .invoke_async::<i64>(&mut c)
                        .await
                }],
            )
            .await?;
        self.remove_entries(&[(doc.iid, doc.value.clone())]).await
    }
}
