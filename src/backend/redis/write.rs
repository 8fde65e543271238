//! The write path of [`RedisIndex`]: insert, insert_many (the commit of
//! each write by script), remove, and the calls the other paths share to
//! append and remove bucket entries, add due-index members and move the
//! counters.
//!
//! **Writes: entries first, the record last.** An insert appends its
//! `(iid, gen)` member to the field of each of its band keys (one trip,
//! every band at once), then commits the record with a script on the
//! record's own key (create, replace or refuse). A reader accepts a
//! bucket member only if the record it reads has the member's `gen`, so a
//! document is visible only once fully indexed, and entries of older or
//! unfinished versions are skipped. Removing entries removes exactly one
//! `(iid, gen)`, so it never touches another version's entries.

use super::codec::{decode_record, due_of, encode_record, iid, member, Due, DUE_MINUTE_MS, MEMBER};
use super::df_log::DfDelta;
use super::{call, corrupt, new_gen, script_call, BackendError, Call, Conn, RedisIndex, Script};
use crate::engine::{DocId, EngineError, NewDoc, WriteMode, WriteOutcome};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock};

/// Append members to fields of one bucket hash.
/// `KEYS[1]` the hash; ARGV: field, member, field, member, …
pub(super) static APPEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/append.lua")));

/// Append members to posting buckets of hashes sharing a slot. `KEYS` the
/// hashes; ARGV: key index (1-based), field, member, …
pub(super) static POSTINGS_APPEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/postings_append.lua")));

/// Remove exactly these members from posting buckets of hashes sharing a
/// slot (a field left empty goes). `KEYS` the hashes; ARGV: key index,
/// field, member, …
static POSTINGS_REMOVE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/postings_remove.lua")));

/// Remove exactly these members from fields of one bucket hash (a field
/// left empty goes). `KEYS[1]` the hash; ARGV: field, member, …
static REMOVE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/remove.lua")));

/// The commit of a write. `KEYS[1]` the record, `KEYS[2]` its text (`KEYS[3]`
/// the pending key of an if_unique write, which must still hold `ARGV[1]`);
/// `ARGV[1]` the new record, `ARGV[2]` 'c' (create) or 'u' (upsert), `ARGV[3]`
/// now (ms), `ARGV[4]` the collection's retention (ms, 0: none), `ARGV[5]` the
/// id, `ARGV[6]` the text (zstd) or '' (none kept: an older one goes).
/// Returns {outcome[, old record]}: 'created', 'replaced', 'exists',
/// 'collision' (another id hashes to the same iid), 'expired' (the
/// pending key is gone).
static COMMIT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/commit.lua")));

/// Delete a record (and its text) if it names this id (and, given `ARGV[2]`,
/// is still that `gen`). `KEYS[1]` the record, `KEYS[2]` its text; `ARGV[1]` the
/// id, `ARGV[2]` the gen (4 bytes) or ''. Returns the deleted record, or nil.
static DELETE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/delete.lua")));

/// Append members to a due bucket and name the bucket in its sorted set.
/// `KEYS[1]` the bucket, `KEYS[2]` the set; `ARGV[1]` the bucket's minute,
/// `ARGV[2]` its score (the minute's first ms), `ARGV[3]` the members.
static DUE_ADD: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/due_add.lua")));

/// Documents written per pair of trips by a batch.
const WRITE_PART: usize = 250;

/// A written document's parts, ready to send.
pub(super) struct Staged {
    pub(super) iid: u64,
    pub(super) gen: u32,
    pub(super) id: DocId,
    pub(super) value: Vec<u8>,
    pub(super) band_keys: Vec<u64>,
    /// Its passage fingerprints (posting buckets), when the collection
    /// keeps the passage index; empty otherwise.
    pub(super) fingerprints: Vec<u32>,
    /// Its due bucket (kind, minute).
    pub(super) due: (Due, u64),
    /// The text to keep (zstd), when the collection stores texts.
    pub(super) text: Option<Vec<u8>>,
}

/// What a commit script said.
pub(super) enum Committed {
    Created(Option<Vec<u8>>),
    Replaced(Vec<u8>),
    Exists,
    Collision,
    Expired,
}

pub(super) fn parse_commit(v: redis::Value) -> Result<Committed, BackendError> {
    let parts: Vec<redis::Value> = redis::from_redis_value(v)
        .map_err(|e| BackendError::Internal(format!("commit script answer: {e}")))?;
    let mut it = parts.into_iter();
    let outcome: String = it
        .next()
        .map(redis::from_redis_value)
        .transpose()
        .map_err(|e| BackendError::Internal(format!("commit script answer: {e}")))?
        .unwrap_or_default();
    let old: Option<Vec<u8>> = it
        .next()
        .map(redis::from_redis_value)
        .transpose()
        .map_err(|e| BackendError::Internal(format!("commit script answer: {e}")))?;
    Ok(match (outcome.as_str(), old) {
        ("created", old) => Committed::Created(old),
        ("replaced", Some(old)) => Committed::Replaced(old),
        ("exists", _) => Committed::Exists,
        ("collision", _) => Committed::Collision,
        ("expired", _) => Committed::Expired,
        (other, _) => {
            return Err(BackendError::Internal(format!(
                "commit script said {other:?}"
            )))
        }
    })
}

impl RedisIndex {
    /// Move the counter by `delta`, as its own trip.
    async fn adjust(&self, delta: i64) -> Result<(), BackendError> {
        self.redis
            .calls("counting documents", vec![self.counter_call(delta)])
            .await
            .map(drop)
    }

    pub(super) fn stage(&self, new: &NewDoc, created_ms: u64) -> Staged {
        let gen = new_gen();
        let (created_ms, expires_ms) = (
            new.created_ms.unwrap_or(created_ms),
            new.expires_ms.unwrap_or(0),
        );
        let value = encode_record(
            gen,
            created_ms,
            expires_ms,
            new.id.as_str(),
            new.metadata.as_deref(),
            new.doc.shingles(),
            Some(new.doc.selection()),
        );
        Staged {
            iid: iid(new.id.as_str()),
            gen,
            id: new.id.clone(),
            value,
            band_keys: self.engine.band_keys(new.doc.signature()),
            fingerprints: if self.passage_index() {
                new.doc.fingerprints().collect()
            } else {
                Vec::new()
            },
            due: due_of(created_ms, expires_ms),
            text: new
                .text
                .as_deref()
                .filter(|_| self.stores_text())
                .map(crate::persist::texts::compress),
        }
    }

    /// The bucket commands for `docs`' members (append or remove), one
    /// script call per bucket hash.
    pub(super) fn bucket_calls<'a>(
        &self,
        docs: impl IntoIterator<Item = (u64, u32, &'a [u64])>,
    ) -> BTreeMap<String, Vec<Vec<u8>>> {
        let mut by_hash: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
        for (iid, gen, band_keys) in docs {
            for (band, &key) in band_keys.iter().enumerate() {
                let args = by_hash.entry(self.keys.group(band, key)).or_default();
                args.push(key.to_le_bytes().to_vec());
                args.push(member(iid, gen).to_vec());
            }
        }
        by_hash
    }

    /// `script` (`POSTINGS_APPEND`, `POSTINGS_REMOVE`, `ADD_ABSENT`) calls
    /// for the posting members of `docs` (iid, gen, fingerprints): one call
    /// per slot, over the posting hashes of that slot (a posting bucket is
    /// a band bucket in another hash, with a 4-byte field).
    pub(super) fn posting_calls<'a>(
        &self,
        script: &'static Script,
        docs: impl IntoIterator<Item = (u64, u32, &'a [u32])>,
    ) -> Vec<Call> {
        type Slot = (Vec<String>, HashMap<u64, usize>, Vec<Vec<u8>>);
        // slot tag → (its hashes, their indexes, the args).
        let mut by_slot: BTreeMap<u64, Slot> = BTreeMap::new();
        for (iid, gen, fingerprints) in docs {
            for &fp in fingerprints {
                let group = self.keys.posting_group_of(fp);
                let (hashes, index, args) =
                    by_slot.entry(self.keys.posting_slot_of(group)).or_default();
                let at = *index.entry(group).or_insert_with(|| {
                    hashes.push(self.keys.posting_key(group));
                    hashes.len()
                });
                args.push(at.to_string().into_bytes());
                args.push(fp.to_le_bytes().to_vec());
                args.push(member(iid, gen).to_vec());
            }
        }
        by_slot
            .into_values()
            .map(|(hashes, _, args)| script_call(script, hashes, args))
            .collect()
    }

    /// The script calls of `calls` (one per bucket hash).
    pub(super) fn bucket_script_calls(
        script: &'static Script,
        calls: BTreeMap<String, Vec<Vec<u8>>>,
    ) -> Vec<Call> {
        calls
            .into_iter()
            .map(|(hash, args)| script_call(script, vec![hash], args))
            .collect()
    }

    /// `DUE_ADD` calls for `members` (one per due bucket).
    pub(super) fn due_add_calls(
        &self,
        members: impl IntoIterator<Item = ((Due, u64), [u8; MEMBER])>,
    ) -> Vec<Call> {
        let mut by_bucket: BTreeMap<(Due, u64), Vec<[u8; MEMBER]>> = BTreeMap::new();
        for (bucket, m) in members {
            by_bucket.entry(bucket).or_default().push(m);
        }
        by_bucket
            .into_iter()
            .map(|((due, minute), ms)| {
                let keys = vec![self.keys.due_bucket(due, minute), self.keys.due_set(due)];
                let args = vec![
                    minute.to_string().into_bytes(),
                    (minute * DUE_MINUTE_MS).to_string().into_bytes(),
                    ms.concat(),
                ];
                script_call(&DUE_ADD, keys, args)
            })
            .collect()
    }

    /// `INCR` of the write counter, as a call.
    pub(super) fn bump_call(&self) -> Call {
        let mut cmd = redis::cmd("INCR");
        cmd.arg(self.keys.writes());
        call(cmd)
    }

    /// `INCRBY` of the document counter, as a call.
    pub(super) fn counter_call(&self, delta: i64) -> Call {
        let mut cmd = redis::cmd("INCRBY");
        cmd.arg(self.keys.counter()).arg(delta);
        call(cmd)
    }

    /// The entries of the stored records `olds` (band keys recomputed from
    /// their shingles; their postings too, from the stored fingerprints,
    /// while this node keeps the passage index) as removal calls.
    pub(super) fn removal_calls(&self, olds: &[(u64, Vec<u8>)]) -> Result<Vec<Call>, BackendError> {
        let mut docs = Vec::with_capacity(olds.len());
        for (iid, bytes) in olds {
            let stored = decode_record(bytes).map_err(|e| corrupt(&self.keys.record(*iid), e))?;
            let Some(prepared) = self
                .engine
                .prepared_from_shingles(stored.shingles, stored.selection)
            else {
                return Err(corrupt(&self.keys.record(*iid), "an empty shingle set"));
            };
            let fingerprints: Vec<u32> = if self.passage_index() {
                prepared.fingerprints().collect()
            } else {
                Vec::new()
            };
            docs.push((
                *iid,
                stored.gen,
                self.engine.band_keys(prepared.signature()),
                fingerprints,
            ));
        }
        let calls = self.bucket_calls(docs.iter().map(|(i, g, k, _)| (*i, *g, k.as_slice())));
        let mut out = Self::bucket_script_calls(&REMOVE, calls);
        out.extend(self.posting_calls(
            &POSTINGS_REMOVE,
            docs.iter().map(|(i, g, _, f)| (*i, *g, f.as_slice())),
        ));
        Ok(out)
    }

    /// Remove the entries of the stored records `olds`.
    pub(super) async fn remove_entries(&self, olds: &[(u64, Vec<u8>)]) -> Result<(), BackendError> {
        let calls = self.removal_calls(olds)?;
        self.redis
            .calls("removing bucket entries", calls)
            .await
            .map(drop)
    }

    /// The commit script call for `doc`.
    pub(super) fn commit_call(
        &self,
        doc: &Staged,
        mode: WriteMode,
        pending: bool,
        now: u64,
    ) -> impl FnOnce(
        Conn,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = redis::RedisResult<redis::Value>> + Send>,
    > {
        let record = self.keys.record(doc.iid);
        let text_key = self.keys.text(doc.iid);
        let text = doc.text.clone().unwrap_or_default();
        let pending_key = pending.then(|| self.keys.pending(doc.iid));
        let value = doc.value.clone();
        let mode = if mode == WriteMode::Create { "c" } else { "u" };
        let ttl = self.ttl_ms();
        let id = doc.id.as_str().to_owned();
        move |mut c: Conn| {
            Box::pin(async move {
                let mut inv = COMMIT.key(record);
                inv.key(text_key);
                if let Some(p) = pending_key {
                    inv.key(p);
                }
                inv.arg(value).arg(mode).arg(now).arg(ttl).arg(id).arg(text);
                inv.invoke_async::<redis::Value>(&mut c).await
            })
        }
    }

    /// Create or replace one document: 2 round trips (appends, commit),
    /// plus the old version's entries removed after a replace.
    pub async fn insert(&self, new: NewDoc, mode: WriteMode) -> Result<WriteOutcome, BackendError> {
        let mut out = self.insert_many(vec![new], mode).await?;
        out.pop()
            .expect("one outcome per document")
            .map_err(BackendError::from)
    }

    /// Many writes: every append at once, then every commit at once, then
    /// the entries of replaced versions and of refused writes removed. A
    /// repeated id is written in a later wave (as sequential calls would).
    pub async fn insert_many(
        &self,
        items: Vec<NewDoc>,
        mode: WriteMode,
    ) -> Result<Vec<Result<WriteOutcome, EngineError>>, BackendError> {
        self.check_writable()?;
        let mut results: Vec<Option<Result<WriteOutcome, EngineError>>> = vec![None; items.len()];
        // Waves of distinct ids, in request order.
        let mut waves: Vec<Vec<usize>> = Vec::new();
        let mut wave_of: HashMap<&str, usize> = HashMap::new();
        for (i, new) in items.iter().enumerate() {
            let w = wave_of.get(new.id.as_str()).map_or(0, |&w| w + 1);
            wave_of.insert(new.id.as_str(), w);
            if waves.len() <= w {
                waves.push(Vec::new());
            }
            waves[w].push(i);
        }
        // Long waves go in parts: each part's trips stay small enough to
        // finish well within command_timeout_ms (a batch of 1,000 articles
        // is ~9,000 bucket appends).
        let parts = waves.into_iter().flat_map(|wave| {
            wave.chunks(WRITE_PART)
                .map(<[usize]>::to_vec)
                .collect::<Vec<_>>()
        });
        for wave in parts {
            let now = self.engine.now_ms();
            let staged: Vec<(usize, Staged)> = wave
                .iter()
                .map(|&i| (i, self.stage(&items[i], now)))
                .collect();
            let calls = self.bucket_calls(
                staged
                    .iter()
                    .map(|(_, s)| (s.iid, s.gen, s.band_keys.as_slice())),
            );
            // Trip 1: every entry, and the counter as if every write
            // created a document (corrected with the cleanup below), so the
            // count is exact once a write is answered, in 2 trips.
            let mut trip = Self::bucket_script_calls(&APPEND, calls);
            trip.extend(
                self.posting_calls(
                    &POSTINGS_APPEND,
                    staged
                        .iter()
                        .map(|(_, s)| (s.iid, s.gen, s.fingerprints.as_slice())),
                ),
            );
            trip.extend(
                self.due_add_calls(staged.iter().map(|(_, s)| (s.due, member(s.iid, s.gen)))),
            );
            trip.push(self.counter_call(staged.len() as i64));
            self.redis.calls("appending bucket entries", trip).await?;
            let commits: Vec<_> = staged
                .iter()
                .map(|(_, s)| self.commit_call(s, mode, false, now))
                .collect();
            let answers = self.redis.trip("committing records", commits).await?;
            let mut cleanup: Vec<(u64, Vec<u8>)> = Vec::new();
            let mut not_created = 0i64;
            // Document frequency, by what each commit did (boilerplate.rs).
            let counting = self.engine.boilerplate_on();
            let mut df = DfDelta::default();
            for ((i, s), answer) in staged.into_iter().zip(answers) {
                let result = match parse_commit(answer)? {
                    Committed::Created(old) => {
                        not_created += i64::from(old.is_some());
                        if counting {
                            if let Some(old) = &old {
                                df.removed(s.iid, &self.keys.record(s.iid), old)?;
                            }
                            df.add(s.iid, s.gen, items[i].doc.shingles(), true);
                        }
                        if let Some(old) = old {
                            cleanup.push((s.iid, old));
                        }
                        Ok(WriteOutcome::Created)
                    }
                    Committed::Replaced(old) => {
                        not_created += 1;
                        if counting {
                            df.removed(s.iid, &self.keys.record(s.iid), &old)?;
                            df.add(s.iid, s.gen, items[i].doc.shingles(), true);
                        }
                        cleanup.push((s.iid, old));
                        Ok(WriteOutcome::Replaced)
                    }
                    Committed::Exists => {
                        not_created += 1;
                        cleanup.push((s.iid, s.value));
                        Err(EngineError::AlreadyExists(s.id))
                    }
                    Committed::Collision => {
                        self.remove_entries(&[(s.iid, s.value)]).await?;
                        self.adjust(-1).await?;
                        tracing::error!(
                            id = s.id.as_str(),
                            iid = s.iid,
                            "two ids hash to the same internal id; the write is refused"
                        );
                        return Err(BackendError::Unavailable(format!(
                            "id {:?} collides with a stored id",
                            s.id.as_str()
                        )));
                    }
                    Committed::Expired => {
                        return Err(BackendError::Internal(
                            "a plain commit has no pending key".into(),
                        ))
                    }
                };
                results[i] = Some(result);
            }
            self.redis.replicate().await?;
            // The write counter moves once the records are in (a scan
            // reads it before it starts, so one that missed these writes
            // is recomputed): with the cleanup when there is one, else
            // just after the answer, so a plain insert stays at 2 round
            // trips.
            // The counting of document frequency goes in that trip too
            // (one more trip for plain creates while it is counted).
            let counts = self.df_calls(&df);
            if !cleanup.is_empty() || not_created != 0 || !counts.is_empty() {
                let mut trip = self.removal_calls(&cleanup)?;
                if not_created != 0 {
                    trip.push(self.counter_call(-not_created));
                }
                trip.extend(counts);
                trip.push(self.bump_call());
                self.redis.calls("removing bucket entries", trip).await?;
            } else {
                let (redis, bump) = (Arc::clone(&self.redis), self.bump_call());
                tokio::spawn(async move {
                    if let Err(e) = redis.calls("counting writes", vec![bump]).await {
                        tracing::warn!(error = %e, "moving the write counter failed; a cached /duplicates answer may be reused until the next write");
                    }
                });
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.expect("every item is in a wave"))
            .collect())
    }

    /// Delete `id`: the record first (invisible from then on), then its
    /// entries. False if no live document had it (an expired one is
    /// removed all the same).
    pub async fn remove(&self, id: &str) -> Result<bool, BackendError> {
        self.check_writable()?;
        match self.delete_record(id, None).await? {
            None => Ok(false),
            Some(old) => {
                let stored = decode_record(&old).map_err(|e| corrupt(id, e))?;
                let gen = stored.gen;
                let record = self.to_record(stored)?;
                let live = self.engine.is_live(&record, self.engine.now_ms());
                self.redis.replicate().await?;
                let mut df = DfDelta::default();
                if self.engine.boilerplate_on() {
                    df.add(iid(id), gen, record.shingles(), false);
                }
                let mut trip = self.removal_calls(&[(iid(id), old)])?;
                trip.push(self.counter_call(-1));
                trip.extend(self.df_calls(&df));
                trip.push(self.bump_call());
                self.redis.calls("removing bucket entries", trip).await?;
                Ok(live)
            }
        }
    }

    /// Delete the record of `id` (if it is still version `gen`, when given).
    /// Its stored bytes, if it was deleted here.
    pub(super) async fn delete_record(
        &self,
        id: &str,
        gen: Option<u32>,
    ) -> Result<Option<Vec<u8>>, BackendError> {
        let mut out = self.delete_records(&[(id, gen)]).await?;
        Ok(out.pop().flatten())
    }

    /// [`Self::delete_record`] of each `(id, gen)`, in one trip: the stored
    /// bytes of those deleted here, in order.
    pub(super) async fn delete_records(
        &self,
        which: &[(&str, Option<u32>)],
    ) -> Result<Vec<Option<Vec<u8>>>, BackendError> {
        let calls = which
            .iter()
            .map(|&(id, gen)| {
                let key = self.keys.record(iid(id));
                let text = self.keys.text(iid(id));
                let id = id.to_owned();
                let gen = gen.map(|g| g.to_le_bytes().to_vec()).unwrap_or_default();
                move |mut c: Conn| async move {
                    DELETE
                        .key(key)
                        .key(text)
                        .arg(id)
                        .arg(gen)
                        .invoke_async::<Option<Vec<u8>>>(&mut c)
                        .await
                }
            })
            .collect();
        self.redis.trip("deleting records", calls).await
    }
}
