//! The if_unique path of [`RedisIndex`]: store a document unless a stored
//! one matches it, by publishing, then verifying (docs/redis-layout.md,
//! "if_unique across nodes"). Of two concurrent near-duplicate writes that
//! share a band, at least one sees the other: never both stored. By a
//! containment measure the same, over the posting buckets: the write
//! publishes its postings with its band entries, then reads the posting
//! buckets of its fingerprints, so of two concurrent writes sharing a
//! fingerprint that is not common, at least one sees the other.

use super::codec::{decode_record, member};
use super::df_log::DfDelta;
use super::write::{parse_commit, Committed, Staged, APPEND, POSTINGS_APPEND};
use super::{corrupt, new_gen, BackendError, Conn, RedisIndex, Script};
use crate::engine::{
    ContentQuery, EngineError, NewDoc, Query, Record, Score, UniqueInsert, UniqueOutcome, WriteMode,
};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, LazyLock};
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
        if q.via_passages() && !self.passage_index() {
            return Err(EngineError::PassageIndexOff(q.measure.as_str()).into());
        }
        if q.score == Score::Content && !self.engine.boilerplate_on() {
            return Err(EngineError::BoilerplateOff.into());
        }
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
        trip.extend(self.posting_calls(
            &POSTINGS_APPEND,
            [(doc.iid, doc.gen, doc.fingerprints.as_slice())],
        ));
        trip.extend(self.due_add_calls([(doc.due, member(doc.iid, doc.gen))]));
        // On content scores, the document-frequency log read in the same
        // trip (this node's counts are then looked up in place).
        let df_calls = if q.score == Score::Content {
            let calls = self.df_read_calls();
            let n = calls.len();
            trip.extend(calls);
            n
        } else {
            0
        };
        let mut answers = self.redis.calls("appending bucket entries", trip).await?;
        let content_ctx = if df_calls > 0 {
            let tail = answers.split_off(answers.len() - df_calls);
            Some(self.content_start_from(tail).await?)
        } else {
            None
        };
        // Trip 2: the buckets (by containment: the posting buckets), after
        // our own entries are in.
        let cap = self.engine.params().index.max_candidates;
        let mut query_keys = 0;
        let (found, postings, iids, truncated) = if q.via_passages() {
            let mut keys = self
                .engine
                .containment_keys(new.doc.shingles(), new.doc.fingerprints());
            // On content scores only the query's content keys are read.
            if let Some((classifier, table)) = &content_ctx {
                keys = classifier.content_keys(&keys, &**table);
            }
            let postings = self.read_postings(&keys, Some(doc.iid)).await?;
            let common = postings.work.common;
            let n = self.query_fingerprints(&new.doc, keys.len());
            let mut ranked = postings.ranked();
            ranked.retain(|&(_, shared)| Self::worth_by_query(q, n, shared, common));
            query_keys = keys.len();
            let truncated = postings.truncated || ranked.len() > cap;
            ranked.truncate(cap);
            let iids: Vec<u64> = ranked.iter().map(|&(i, _)| i).collect();
            let mut gens = postings.gens();
            let found: HashMap<u64, Vec<u32>> = iids
                .iter()
                .map(|&i| (i, gens.remove(&i).unwrap_or_default()))
                .collect();
            (found, Some(postings), iids, truncated)
        } else {
            let mut found = self.bucket_members(&doc.band_keys).await?;
            found.remove(&doc.iid);
            let mut iids: Vec<u64> = found.keys().copied().collect();
            iids.sort_unstable();
            let truncated = iids.len() > cap;
            iids.truncate(cap);
            (found, None, iids, truncated)
        };
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
        // Each candidate's version the buckets named, with the fingerprints
        // it shares (0 by Jaccard, where they are not counted).
        let mut committed = Vec::new();
        let mut pending = Vec::new();
        let shared_by = |i: u64, gen: u32| postings.as_ref().map_or(Some(0), |p| p.shared(i, gen));
        for (i, (rec, pend)) in iids.iter().zip(pairs) {
            let gens = &found[i];
            if let Some(stored) = rec
                .map(|b| decode_record(&b))
                .transpose()
                .map_err(|e| corrupt(&self.keys.record(*i), e))?
            {
                if let (true, Some(n)) = (gens.contains(&stored.gen), shared_by(*i, stored.gen)) {
                    committed.push((self.to_record(stored)?, n));
                }
            }
            if let Some(stored) = pend
                .map(|b| decode_record(&b))
                .transpose()
                .map_err(|e| corrupt(&self.keys.pending(*i), e))?
            {
                if let (true, Some(n)) = (gens.contains(&stored.gen), shared_by(*i, stored.gen)) {
                    pending.push((self.to_record(stored)?, n));
                }
            }
        }
        let prepared = &new.doc;
        let own = Some(new.id.as_str());
        // On content scores: every frequency is this node's, in place.
        let content = content_ctx
            .as_ref()
            .map(|(classifier, table)| ContentQuery {
                q_df: Default::default(),
                classifier: classifier.clone(),
                df: &**table,
            });
        let verified: Vec<Arc<Record>> = committed.iter().map(|(r, _)| Arc::clone(r)).collect();
        let verify = |candidates: Vec<(Arc<Record>, usize)>, truncated: bool| match &postings {
            Some(p) => self.engine.verify_contained_candidates(
                prepared,
                query_keys,
                own,
                q,
                content.as_ref(),
                candidates,
                p.work.clone(),
                truncated,
            ),
            None => self.engine.verify_candidates(
                prepared,
                own,
                q,
                candidates.into_iter().map(|(r, _)| r),
                truncated,
            ),
        };
        let mut matches = verify(committed, truncated);
        if !matches.matches.is_empty() {
            self.withdraw(&doc).await?;
            if content.is_none() {
                self.attach_content(prepared.shingles(), &verified, &mut matches.matches)
                    .await?;
            }
            return Ok(Some(UniqueOutcome::Duplicate(matches)));
        }
        let rivals = verify(pending, false);
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
                let mut df = DfDelta::default();
                if self.engine.boilerplate_on() {
                    if let Some(old) = &old {
                        df.removed(doc.iid, &self.keys.record(doc.iid), old)?;
                    }
                    df.add(doc.iid, doc.gen, new.doc.shingles(), true);
                }
                let mut trip = match &old {
                    Some(old) => self.removal_calls(&[(doc.iid, old.clone())])?,
                    None => Vec::new(),
                };
                if old.is_none() {
                    trip.push(self.counter_call(1));
                }
                trip.extend(self.df_calls(&df));
                trip.push(self.bump_call());
                self.redis.calls("committing a record", trip).await?;
                Ok(Some(UniqueOutcome::Inserted(UniqueInsert {
                    seq: 0,
                    ignored: matches.ignored,
                })))
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
