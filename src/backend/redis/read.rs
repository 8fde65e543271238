//! The read path of [`RedisIndex`]: a document by id (get, text), samples
//! and exports of the stored texts, queries (similar_to, similar_to_id) and
//! compare. A bucket member counts only if the record read for it has the
//! member's `gen` (the write path commits the record last); candidates are
//! verified exactly by the engine, as on the memory backend. A query by a
//! containment measure is answered from the passage index instead
//! (`passages.rs`).

use super::codec::{decode_record, iid, members, own_expiry, StoredRecord};
use super::{corrupt, BackendError, Conn, RedisIndex};
use crate::backend::{Excerpt, StoredDate};
use crate::engine::{Comparison, DocId, EngineError, Prepared, Query, QueryOutcome, Record, Stamp};
use std::collections::HashMap;
use std::sync::Arc;

impl RedisIndex {
    /// Read and decode the records of `iids` (one trip); `None` for a
    /// missing one.
    pub(super) async fn read_records(
        &self,
        iids: &[u64],
    ) -> Result<Vec<Option<StoredRecord>>, BackendError> {
        let commands: Vec<_> = iids
            .iter()
            .map(|&i| {
                let key = self.keys.record(i);
                move |mut c: Conn| async move {
                    let mut get = redis::cmd("GET");
                    get.arg(key);
                    get.query_async::<Option<Vec<u8>>>(&mut c).await
                }
            })
            .collect();
        let raw = self.redis.trip("reading records", commands).await?;
        raw.into_iter()
            .zip(iids)
            .map(|(bytes, &i)| {
                bytes
                    .map(|b| decode_record(&b).map_err(|e| corrupt(&self.keys.record(i), e)))
                    .transpose()
            })
            .collect()
    }

    /// A decoded record as the engine's [`Record`] (signature recomputed).
    pub(super) fn to_record(&self, s: StoredRecord) -> Result<Arc<Record>, BackendError> {
        let id =
            DocId::parse(&s.id).map_err(|e| BackendError::Internal(format!("stored id: {e}")))?;
        let prepared = self
            .engine
            .prepared_from_shingles(s.shingles, s.selection)
            .ok_or_else(|| BackendError::Internal("stored shingles are not a set".into()))?;
        let stamp = Stamp {
            created_ms: s.created_ms,
            expires_ms: own_expiry(s.expires_ms),
        };
        Ok(Arc::new(self.engine.record_of(
            id,
            &prepared,
            s.metadata.map(String::into_boxed_str),
            stamp,
        )))
    }

    /// The current live version of `id`.
    pub async fn get(&self, id: &str) -> Result<Option<Arc<Record>>, BackendError> {
        let mut found = self.read_records(&[iid(id)]).await?;
        self.live_record(id, found.pop().flatten())
    }

    /// The record read for `id`, if it is `id`'s (not another id's with
    /// the same iid) and live.
    fn live_record(
        &self,
        id: &str,
        stored: Option<StoredRecord>,
    ) -> Result<Option<Arc<Record>>, BackendError> {
        let Some(stored) = stored.filter(|s| s.id == id) else {
            return Ok(None);
        };
        let record = self.to_record(stored)?;
        Ok(self
            .engine
            .is_live(&record, self.engine.now_ms())
            .then_some(record))
    }

    /// When each of `ids` was stored and its metadata, as its record says
    /// (`None`: no record), in trips of `SCAN_READ` record reads; nothing
    /// else of the record is decoded into an engine record.
    pub async fn dates(&self, ids: &[&str]) -> Result<Vec<Option<StoredDate>>, BackendError> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(super::SCAN_READ) {
            let iids: Vec<u64> = chunk.iter().map(|id| iid(id)).collect();
            let found = self.read_records(&iids).await?;
            for (id, stored) in chunk.iter().zip(found) {
                out.push(stored.filter(|s| s.id == *id).map(|s| StoredDate {
                    created_ms: s.created_ms,
                    metadata: s.metadata.map(String::into_boxed_str),
                }));
            }
        }
        Ok(out)
    }

    /// The start of each of `ids`' stored text (at most `text_bytes`
    /// bytes) and its metadata, live documents only, in trips of
    /// `SCAN_READ` ids: one `MGET` of the record and the text per id (they
    /// share a slot), or the records alone when texts are not kept.
    pub async fn excerpts(
        &self,
        ids: &[&str],
        text_bytes: usize,
    ) -> Result<Vec<Option<Excerpt>>, BackendError> {
        let now = self.engine.now_ms();
        let with_texts = self.stores_text();
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(super::SCAN_READ) {
            let iids: Vec<u64> = chunk.iter().map(|id| iid(id)).collect();
            let read: Vec<(Option<StoredRecord>, Option<Vec<u8>>)> = if with_texts {
                let commands: Vec<_> = iids
                    .iter()
                    .map(|&i| {
                        let (record, text) = (self.keys.record(i), self.keys.text(i));
                        move |mut c: Conn| async move {
                            let mut mget = redis::cmd("MGET");
                            mget.arg(record).arg(text);
                            mget.query_async::<(Option<Vec<u8>>, Option<Vec<u8>>)>(&mut c)
                                .await
                        }
                    })
                    .collect();
                let raw = self.redis.trip("reading stored texts", commands).await?;
                raw.into_iter()
                    .zip(&iids)
                    .map(|((record, text), &i)| {
                        let record = record
                            .map(|b| decode_record(&b))
                            .transpose()
                            .map_err(|e| corrupt(&self.keys.record(i), e))?;
                        Ok((record, text))
                    })
                    .collect::<Result<_, BackendError>>()?
            } else {
                self.read_records(&iids)
                    .await?
                    .into_iter()
                    .map(|r| (r, None))
                    .collect()
            };
            for ((id, &i), (record, text)) in chunk.iter().zip(&iids).zip(read) {
                let live = record.filter(|s| {
                    s.id == *id
                        && self
                            .engine
                            .is_live_at(s.created_ms, own_expiry(s.expires_ms), now)
                });
                let Some(stored) = live else {
                    out.push(None);
                    continue;
                };
                let text = text
                    .map(|t| {
                        crate::persist::texts::decompress(&t)
                            .map_err(|e| corrupt(&self.keys.text(i), e))
                    })
                    .transpose()?;
                out.push(Some(Excerpt::new(
                    text,
                    text_bytes,
                    stored.metadata.map(String::into_boxed_str),
                )));
            }
        }
        Ok(out)
    }

    /// The live document `id` and its stored text (`None` when it was
    /// written without one), in one trip; `None` when there is no such
    /// live document.
    pub async fn text(&self, id: &str) -> Result<Option<Option<String>>, BackendError> {
        let i = iid(id);
        let (record, text) = (self.keys.record(i), self.keys.text(i));
        let mut out = self
            .redis
            .trip(
                "reading a stored text",
                vec![move |mut c: Conn| async move {
                    let mut mget = redis::cmd("MGET");
                    mget.arg(record).arg(text);
                    mget.query_async::<(Option<Vec<u8>>, Option<Vec<u8>>)>(&mut c)
                        .await
                }],
            )
            .await?;
        let (record, text) = out.pop().expect("one answer");
        let Some(stored) = record
            .map(|b| decode_record(&b))
            .transpose()
            .map_err(|e| corrupt(&self.keys.record(i), e))?
        else {
            return Ok(None);
        };
        if stored.id != id
            || !self
                .engine
                .is_live(&*self.to_record(stored)?, self.engine.now_ms())
        {
            return Ok(None);
        }
        text.map(|t| {
            crate::persist::texts::decompress(&t).map_err(|e| corrupt(&self.keys.text(i), e))
        })
        .transpose()
        .map(Some)
    }

    /// The ids of up to `n` live documents in the seeded order of
    /// [`crate::engine::sample::seeded_order`] (the memory backend's): a
    /// `SCAN` of every primary and the head of each record (not its shingles).
    pub async fn sample_ids(&self, n: usize, seed: u64) -> Result<Vec<String>, BackendError> {
        let now = self.engine.now_ms();
        let keys = self.redis.scan_all(&self.keys.record_pattern()).await?;
        let mut ids = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(1000) {
            for head in self.read_heads(chunk).await?.into_iter().flatten() {
                let own = super::codec::own_expiry(head.expires_ms);
                if self.engine.is_live_at(head.created_ms, own, now) {
                    ids.push(head.id);
                }
            }
        }
        Ok(crate::engine::sample::seeded_order(
            ids,
            String::as_str,
            n,
            seed,
        ))
    }

    /// A uniform sample without replacement of `n` live documents that
    /// have a stored text, as (id, text): the same draw as the memory
    /// backend's (`Store::sample_texts`: ids sorted, a partial
    /// Fisher–Yates shuffle driven by `seed`), stopping before `max_bytes`
    /// of text. Reads every record (a `SCAN` of every primary).
    pub async fn sample_texts(
        &self,
        n: usize,
        seed: u64,
        max_bytes: usize,
    ) -> Result<Vec<(String, String)>, BackendError> {
        let now = self.engine.now_ms();
        let keys = self.redis.scan_all(&self.keys.record_pattern()).await?;
        let mut pool: Vec<(String, u64)> = Vec::new();
        for chunk in keys.chunks(500) {
            let commands: Vec<_> = chunk
                .iter()
                .map(|key| {
                    let key = key.clone();
                    let text = key.replacen(":r:{", ":t:{", 1);
                    move |mut c: Conn| async move {
                        let mut get = redis::cmd("GET");
                        get.arg(&key);
                        let record = get.query_async::<Option<Vec<u8>>>(&mut c).await?;
                        let mut exists = redis::cmd("EXISTS");
                        exists.arg(text);
                        let has_text = exists.query_async::<i64>(&mut c).await?;
                        Ok((record, has_text == 1))
                    }
                })
                .collect();
            let values = self.redis.trip("reading records", commands).await?;
            for (key, (bytes, has_text)) in chunk.iter().zip(values) {
                let (Some(bytes), true) = (bytes, has_text) else {
                    continue;
                };
                let stored = decode_record(&bytes).map_err(|e| corrupt(key, e))?;
                let id = stored.id.clone();
                let record = self.to_record(stored)?;
                if self.engine.is_live(&record, now) {
                    let i = iid(&id);
                    pool.push((id, i));
                }
            }
        }
        pool.sort_unstable();
        let take = crate::engine::sample::draw_front(&mut pool, n, seed);
        pool.truncate(take);
        let commands: Vec<_> = pool
            .iter()
            .map(|(_, i)| {
                let key = self.keys.text(*i);
                move |mut c: Conn| async move {
                    let mut get = redis::cmd("GET");
                    get.arg(key);
                    get.query_async::<Option<Vec<u8>>>(&mut c).await
                }
            })
            .collect();
        let texts = self.redis.trip("reading stored texts", commands).await?;
        let mut out = Vec::with_capacity(take);
        let mut bytes = 0usize;
        for ((id, i), payload) in pool.into_iter().zip(texts) {
            // A text deleted since the scan: skipped.
            let Some(payload) = payload else { continue };
            let text = crate::persist::texts::decompress(&payload)
                .map_err(|e| corrupt(&self.keys.text(i), e))?;
            bytes = bytes.saturating_add(text.len());
            if bytes > max_bytes {
                break;
            }
            out.push((id, text));
        }
        Ok(out)
    }

    /// Every live document with its text, `step` records at a time (an
    /// export): the record keys now, the records page by page.
    pub async fn export(&self, step: usize) -> Result<Export<'_>, BackendError> {
        Ok(Export {
            index: self,
            keys: self.record_keys().await?,
            at: 0,
            step: step.max(1),
        })
    }

    /// The keys of every record of the collection (a `SCAN` of every
    /// primary), for an export.
    pub async fn record_keys(&self) -> Result<Vec<String>, BackendError> {
        self.redis.scan_all(&self.keys.record_pattern()).await
    }

    /// The live documents of the record keys `keys` with their stored
    /// texts (one trip; a record deleted meanwhile is skipped).
    pub async fn read_with_texts(
        &self,
        keys: &[String],
    ) -> Result<Vec<(Arc<Record>, Option<String>)>, BackendError> {
        let commands: Vec<_> = keys
            .iter()
            .map(|key| {
                let (record, text) = (key.clone(), key.replacen(":r:{", ":t:{", 1));
                move |mut c: Conn| async move {
                    let mut mget = redis::cmd("MGET");
                    mget.arg(record).arg(text);
                    mget.query_async::<(Option<Vec<u8>>, Option<Vec<u8>>)>(&mut c)
                        .await
                }
            })
            .collect();
        let now = self.engine.now_ms();
        let mut out = Vec::with_capacity(keys.len());
        for (key, (record, text)) in keys
            .iter()
            .zip(self.redis.trip("reading records", commands).await?)
        {
            let Some(bytes) = record else { continue };
            let stored = decode_record(&bytes).map_err(|e| corrupt(key, e))?;
            let record = self.to_record(stored)?;
            if !self.engine.is_live(&record, now) {
                continue;
            }
            let text = text
                .map(|t| crate::persist::texts::decompress(&t).map_err(|e| corrupt(key, e)))
                .transpose()?;
            out.push((record, text));
        }
        Ok(out)
    }

    /// The members of the buckets `doc` falls in (one trip): iid → gens.
    pub(super) async fn bucket_members(
        &self,
        band_keys: &[u64],
    ) -> Result<HashMap<u64, Vec<u32>>, BackendError> {
        let commands: Vec<_> = band_keys
            .iter()
            .enumerate()
            .map(|(band, &key)| {
                let hash = self.keys.group(band, key);
                move |mut c: Conn| async move {
                    let mut get = redis::cmd("HGET");
                    get.arg(hash).arg(key.to_le_bytes().as_slice());
                    get.query_async::<Option<Vec<u8>>>(&mut c).await
                }
            })
            .collect();
        let values = self.redis.trip("reading buckets", commands).await?;
        let mut out: HashMap<u64, Vec<u32>> = HashMap::new();
        for v in values.iter().flatten() {
            for (i, g) in members(v) {
                let gens = out.entry(i).or_default();
                if !gens.contains(&g) {
                    gens.push(g);
                }
            }
        }
        Ok(out)
    }

    /// Near-duplicates of an unstored document: 2 round trips (the
    /// buckets, then the candidates' records), verified exactly.
    pub async fn similar_to(
        &self,
        doc: &Prepared,
        exclude: Option<&str>,
        q: &Query,
    ) -> Result<QueryOutcome, BackendError> {
        if q.via_passages() {
            return self.contained(doc, exclude, q, false).await;
        }
        let band_keys = self.engine.band_keys(doc.signature());
        let mut found = self.bucket_members(&band_keys).await?;
        if let Some(own) = exclude {
            found.remove(&iid(own));
        }
        let cap = self.engine.params().index.max_candidates;
        let mut iids: Vec<u64> = found.keys().copied().collect();
        iids.sort_unstable();
        let truncated = iids.len() > cap;
        iids.truncate(cap);
        let records = self.read_records(&iids).await?;
        let mut current = Vec::with_capacity(records.len());
        for (i, stored) in iids.iter().zip(records) {
            // Missing, or not the version the bucket named: stale.
            let Some(stored) = stored else { continue };
            if !found[i].contains(&stored.gen) {
                continue;
            }
            current.push(self.to_record(stored)?);
        }
        let mut out =
            self.engine
                .verify_candidates(doc, exclude, q, current.iter().cloned(), truncated);
        // With document frequency counted, each match's content scores.
        self.attach_content(doc.shingles(), &current, &mut out.matches)
            .await?;
        Ok(out)
    }

    /// Near-duplicates of the stored document `id`.
    /// On content scores the record is read in the trip that reads the
    /// document-frequency log (one trip fewer than a query by text).
    pub async fn similar_to_id(&self, id: &str, q: &Query) -> Result<QueryOutcome, BackendError> {
        let content = q.score == crate::engine::Score::Content
            && q.via_passages()
            && self.passage_index()
            && self.engine.boilerplate_on();
        let record = if content {
            self.get_reading_counts(id).await?
        } else {
            self.get(id).await?
        };
        let record = record.ok_or_else(|| EngineError::NotFound(id.to_owned()))?;
        let doc = self
            .engine
            .prepared_from_shingles(record.shingles().to_vec(), Some(record.selection().into()))
            .ok_or_else(|| BackendError::Internal("stored shingles are not a set".into()))?;
        // `exclude_same` compares with the stored document's metadata.
        let q = q.about(record.metadata());
        if content {
            return self.contained(&doc, Some(id), &q, true).await;
        }
        self.similar_to(&doc, Some(id), &q).await
    }

    /// [`Self::get`] in the trip that reads the document-frequency log (and
    /// the templates' version), applied before it answers.
    async fn get_reading_counts(&self, id: &str) -> Result<Option<Arc<Record>>, BackendError> {
        let mut get = redis::cmd("GET");
        get.arg(self.keys.record(iid(id)));
        let mut calls = vec![super::call(get)];
        calls.extend(self.df_read_calls());
        let mut values = self.redis.calls("reading a record", calls).await?;
        let counts = values.split_off(1);
        self.df_read_table(counts).await?;
        let key = self.keys.record(iid(id));
        let bytes: Option<Vec<u8>> =
            redis::from_redis_value(values.pop().unwrap_or(redis::Value::Nil))
                .map_err(|e| corrupt(&key, e))?;
        let stored = bytes
            .map(|b| decode_record(&b).map_err(|e| corrupt(&key, e)))
            .transpose()?;
        self.live_record(id, stored)
    }

    /// Exact and estimated similarity of two stored documents (one trip).
    pub async fn compare(&self, a: &str, b: &str) -> Result<Comparison, BackendError> {
        let mut found = self.read_records(&[iid(a), iid(b)]).await?.into_iter();
        let now = self.engine.now_ms();
        let mut live = |want: &str| -> Result<Arc<Record>, BackendError> {
            let stored = found.next().flatten().filter(|s| s.id == want);
            let record = stored.map(|s| self.to_record(s)).transpose()?;
            record
                .filter(|r| self.engine.is_live(r, now))
                .ok_or_else(|| EngineError::NotFound(want.to_owned()).into())
        };
        let ra = live(a)?;
        let rb = live(b)?;
        Ok(self.engine.compare_records(&ra, &rb))
    }
}

/// An export of a collection in Redis ([`RedisIndex::export`]).
pub struct Export<'a> {
    index: &'a RedisIndex,
    keys: Vec<String>,
    at: usize,
    step: usize,
}

impl Export<'_> {
    pub async fn next_records(
        &mut self,
    ) -> Result<Option<Vec<(Arc<Record>, Option<String>)>>, BackendError> {
        if self.at >= self.keys.len() {
            return Ok(None);
        }
        let to = (self.at + self.step).min(self.keys.len());
        let chunk = &self.keys[self.at..to];
        self.at = to;
        Ok(Some(self.index.read_with_texts(chunk).await?))
    }

    pub async fn next(
        &mut self,
        format: fn(&Record, Option<String>) -> Vec<u8>,
    ) -> Result<Option<Vec<u8>>, BackendError> {
        Ok(self.next_records().await?.map(|page| {
            page.into_iter()
                .flat_map(|(record, text)| format(&record, text))
                .collect()
        }))
    }
}
