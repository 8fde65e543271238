//! Document frequency and registered templates in Redis (issue 44), and
//! what content scores need of them. Layout, round trips and the one window
//! where counts can drift: docs/redis-layout.md, "Document frequency and
//! templates".
//!
//! **Counts.** `df(x)`, how many stored documents hold shingle `x`, is a
//! field of one of the collection's document-frequency hashes
//! ([`Keys::df_key`](super::codec::Keys::df_key): field = the shingle, 4
//! bytes; value = the count), and `N`, the documents counted, a counter in
//! the metadata's slot. Exactly what the memory engine counts: every stored
//! record, expired ones until they are purged.
//!
//! **Counted after the commit.** A write counts once its commit script
//! said what happened: created (+1 for its shingles, N + 1), created over an
//! expired record or replaced (−1 for the old record's shingles, +1 for the
//! new, by the net difference), refused (nothing: it never committed). A
//! delete and the expiry sweep uncount the record their delete script
//! returned. So a write retried after a failed commit trip is counted once,
//! by whichever commit stored it. Increments commute, so two nodes writing
//! the same id count right in any order (a decrement may overtake its
//! increment: the field is briefly below 0, read as 0; `df_add.lua`).
//!
//! **Switching.** Like the passage index: on, a recount of every stored
//! record (the hashes replaced, slot by slot) and `df=1` in the layout key;
//! off, `df=0` and the hashes deleted; the node that switched repeats the
//! step [`settle_delay`](super::passages) later for writes of nodes that
//! learnt it late.
//!
//! **Templates.** A hash `id → JSON` and a version counter moved by every
//! change (both in the metadata's slot, read together by one script). A
//! node applies them to its engine when it reads them; every read of
//! frequencies (a content query, `doc_frequencies`) compares the version
//! with the one it applied and reads them again when it moved, and
//! [`RedisIndex::refresh_templates_if_changed`] does the same for a watch.

use super::codec::{decode_record, DF_TAG_BITS};
use super::passages::iid_of_key;
use super::{call, corrupt, script_call, BackendError, Call, RedisIndex, Script, SCAN_READ};
use crate::engine::{Classifier, ContentQuery, Edge, Engine, EngineError, Match, Record, Template};
use redis::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, LazyLock};

/// Add deltas to document frequencies (a field reaching 0 goes). `KEYS` the
/// hashes of one slot; ARGV: key index, delta, the fields concatenated, …
static DF_ADD: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/df_add.lua")));

/// Read document frequencies. `KEYS` the hashes of one slot; ARGV: key
/// index, the fields concatenated, … Returns the counts in order.
static DF_READ: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/df_read.lua")));

/// Write recounted frequencies, replacing a slot's hashes first.
static DF_SET: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/df_set.lua")));

/// The common fields of one hash and its distinct count.
static DF_COMMON: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/df_common.lua")));

static TPL_READ: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/tpl_read.lua")));
static TPL_PUT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/tpl_put.lua")));
static TPL_DEL: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/tpl_del.lua")));

/// The layout key's field that says the counts are complete.
const META_FIELD: &str = "df";
/// Fields per script call of a recount's writes.
const SET_PART: usize = 8192;
/// Document-frequency hashes read per script call by `common_shingles`…
const COMMON_KEYS: usize = 256;
/// …and calls per trip.
const COMMON_CALLS: usize = 16;

/// Whether a layout string says the counts are complete.
pub(super) fn layout_has_counts(meta: &str) -> bool {
    super::layout_flag(meta, META_FIELD)
}

/// The field a layout string gets for a collection created with counts
/// `on` (an empty collection's counts are complete).
pub(super) fn layout_field(on: bool) -> String {
    super::layout_entry(META_FIELD, on)
}

/// Net document-frequency changes of some committed writes: per shingle,
/// and of N.
#[derive(Default, Debug)]
pub(super) struct DfDelta {
    by: HashMap<u32, i64>,
    docs: i64,
}

impl DfDelta {
    /// Count (`by` = 1) or uncount (−1) one document's distinct shingles.
    pub(super) fn add(&mut self, shingles: &[u32], by: i64) {
        for &x in shingles {
            *self.by.entry(x).or_default() += by;
        }
        self.docs += by;
    }

    /// [`Self::add`] of a stored record's bytes (as a commit or delete
    /// script returned them).
    pub(super) fn add_stored(
        &mut self,
        key: &str,
        bytes: &[u8],
        by: i64,
    ) -> Result<(), BackendError> {
        let stored = decode_record(bytes).map_err(|e| corrupt(key, e))?;
        self.add(&stored.shingles, by);
        Ok(())
    }

    pub(super) fn is_empty(&self) -> bool {
        self.docs == 0 && self.by.values().all(|&d| d == 0)
    }
}

/// A read of some shingles' frequencies (and N, and the templates'
/// version), as calls to put in a trip and how to read their answers.
pub(super) struct DfRead {
    /// Per call, the shingles it asks, in order.
    asked: Vec<Vec<u32>>,
}

impl DfRead {
    /// The calls' answers (`values`, in the calls' order) as a map, with N
    /// and the templates' version.
    fn parse(
        self,
        index: &RedisIndex,
        values: Vec<Value>,
    ) -> Result<(HashMap<u32, u32>, usize, u64), BackendError> {
        let mut values = values.into_iter();
        let Some(head) = values.next() else {
            return Err(BackendError::Internal(
                "a frequency read answered nothing".into(),
            ));
        };
        let (n, version): (Option<i64>, Option<u64>) =
            redis::from_redis_value(head).map_err(|e| corrupt(&index.keys.df_docs(), e))?;
        if values.len() != self.asked.len() {
            return Err(BackendError::Internal(
                "a frequency read answered a short list".into(),
            ));
        }
        let mut map = HashMap::new();
        for (asked, value) in self.asked.iter().zip(values) {
            let counts: Vec<i64> =
                redis::from_redis_value(value).map_err(|e| corrupt(&index.keys.df_docs(), e))?;
            if counts.len() != asked.len() {
                return Err(BackendError::Internal(
                    "a frequency read answered a short list".into(),
                ));
            }
            for (&x, n) in asked.iter().zip(counts) {
                map.insert(x, n.clamp(0, i64::from(u32::MAX)) as u32);
            }
        }
        Ok((map, n.unwrap_or(0).max(0) as usize, version.unwrap_or(0)))
    }
}

/// Group `shingles` by document-frequency slot: slot tag → (its hashes,
/// their 1-based indexes, the (index, shingle) pairs).
type SlotPlan = (Vec<String>, HashMap<u64, usize>, Vec<(usize, u32)>);

impl RedisIndex {
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    fn df_slots(&self, shingles: impl IntoIterator<Item = u32>) -> BTreeMap<u64, SlotPlan> {
        let mut by_slot: BTreeMap<u64, SlotPlan> = BTreeMap::new();
        for x in shingles {
            let group = self.keys.df_group_of(x);
            let (hashes, index, asked) = by_slot.entry(self.keys.df_tag_of(group)).or_default();
            let at = *index.entry(group).or_insert_with(|| {
                hashes.push(self.keys.df_key(group));
                hashes.len()
            });
            asked.push((at, x));
        }
        by_slot
    }

    /// The calls that apply `delta` (one per slot, and N's), if the
    /// collection counts on this node; none otherwise.
    pub(super) fn df_calls(&self, delta: &DfDelta) -> Vec<Call> {
        if !self.engine.boilerplate_on() || delta.is_empty() {
            return Vec::new();
        }
        let moved: HashMap<u32, i64> = delta
            .by
            .iter()
            .filter(|(_, &d)| d != 0)
            .map(|(&x, &d)| (x, d))
            .collect();
        let mut calls: Vec<Call> = self
            .df_slots(moved.keys().copied())
            .into_values()
            .map(|(hashes, _, asked)| {
                // Per (hash, delta): the fields, concatenated.
                let mut packed: BTreeMap<(usize, i64), Vec<u8>> = BTreeMap::new();
                for (at, x) in asked {
                    packed
                        .entry((at, moved[&x]))
                        .or_default()
                        .extend_from_slice(&x.to_le_bytes());
                }
                let mut args = Vec::with_capacity(3 * packed.len());
                for ((at, d), fields) in packed {
                    args.push(at.to_string().into_bytes());
                    args.push(d.to_string().into_bytes());
                    args.push(fields);
                }
                script_call(&DF_ADD, hashes, args)
            })
            .collect();
        if delta.docs != 0 {
            let mut incr = redis::cmd("INCRBY");
            incr.arg(self.keys.df_docs()).arg(delta.docs);
            calls.push(call(incr));
        }
        self.redis
            .counters
            .df_updates
            .fetch_add(1, Ordering::Relaxed);
        calls
    }

    /// The calls that read the frequencies of `shingles` (distinct), N and
    /// the templates' version: the `MGET` first, then one call per slot.
    pub(super) fn df_read_calls(&self, shingles: &[u32]) -> (Vec<Call>, DfRead) {
        let mut mget = redis::cmd("MGET");
        mget.arg(self.keys.df_docs())
            .arg(self.keys.templates_version());
        let mut calls = vec![call(mget)];
        let mut asked = Vec::new();
        for (hashes, _, pairs) in self.df_slots(shingles.iter().copied()).into_values() {
            // Per hash: the fields, concatenated; answered in this order.
            let mut packed: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
            for (at, x) in pairs {
                packed.entry(at).or_default().push(x);
            }
            let mut args = Vec::with_capacity(2 * packed.len());
            let mut order = Vec::new();
            for (at, xs) in packed {
                args.push(at.to_string().into_bytes());
                args.push(xs.iter().flat_map(|x| x.to_le_bytes()).collect());
                order.extend(xs);
            }
            asked.push(order);
            calls.push(script_call(&DF_READ, hashes, args));
        }
        (calls, DfRead { asked })
    }

    /// Read what [`Self::df_read_calls`] asked from their answers, and read
    /// the templates again if their version moved.
    pub(super) async fn df_read_answers(
        &self,
        read: DfRead,
        values: Vec<Value>,
    ) -> Result<(HashMap<u32, u32>, usize), BackendError> {
        let (map, n, version) = read.parse(self, values)?;
        self.redis.counters.df_reads.fetch_add(1, Ordering::Relaxed);
        if version != self.templates_seen.load(Ordering::Acquire) {
            self.apply_templates().await?;
        }
        Ok((map, n))
    }

    /// The frequencies of `shingles` (distinct), and N: one trip.
    pub(super) async fn df_map(
        &self,
        shingles: &[u32],
    ) -> Result<(HashMap<u32, u32>, usize), BackendError> {
        let (calls, read) = self.df_read_calls(shingles);
        let values = self
            .redis
            .calls("reading document frequencies", calls)
            .await?;
        self.df_read_answers(read, values).await
    }

    /// Count document frequency (a recount of every stored record, replacing
    /// the counts) or stop (the counts deleted), and do it again after the
    /// settle delay for writes of nodes that learn it later (as
    /// `set_passage_index`). Idempotent, safe on two nodes at once.
    pub async fn set_boilerplate(&self, on: bool) -> Result<(), BackendError> {
        self.engine.set_boilerplate_flag(on);
        let epoch = self.df_epoch.fetch_add(1, Ordering::AcqRel) + 1;
        if on {
            self.recount(false).await?;
        } else {
            self.drop_counts().await?;
        }
        let later = self.shadow();
        let delay = super::passages::settle_delay(&self.redis.settings);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if later.df_epoch.load(Ordering::Acquire) != epoch
                || later.engine.boilerplate_on() != on
            {
                return;
            }
            let done = if on {
                later.recount(true).await.map(drop)
            } else {
                later.drop_counts().await
            };
            if let Err(e) = done {
                tracing::warn!(keys = later.keys.base(), error = %e, on, "repeating the document frequency switch failed; switch it again to repair");
            }
        });
        Ok(())
    }

    /// Set `df=` of the layout key.
    pub(super) async fn mark_counts(&self, complete: bool) -> Result<(), BackendError> {
        self.mark_layout(META_FIELD, complete, "marking document frequency")
            .await
    }

    /// Count every stored record (unless the layout says the counts are
    /// complete and `force` is false) and replace the counts with that,
    /// slot by slot, then say they are complete. How many records were
    /// counted. Memory on this node: the counts of every distinct shingle
    /// while it runs (~16 bytes each).
    pub(super) async fn recount(&self, force: bool) -> Result<usize, BackendError> {
        if !force {
            let meta = super::stored_meta(&self.redis, &self.keys).await?;
            if meta.as_deref().is_some_and(layout_has_counts) {
                return Ok(0);
            }
        }
        self.recounting.store(true, Ordering::Relaxed);
        let outcome = self.recount_all().await;
        self.recounting.store(false, Ordering::Relaxed);
        let counted = outcome?;
        self.mark_counts(true).await?;
        tracing::info!(
            keys = self.keys.base(),
            records = counted,
            "document frequency: every stored record counted"
        );
        Ok(counted)
    }

    async fn recount_all(&self) -> Result<usize, BackendError> {
        let keys = self.redis.scan_all(&self.keys.record_pattern()).await?;
        let mut counts: HashMap<u32, u32> = HashMap::new();
        let mut docs = 0usize;
        for chunk in keys.chunks(SCAN_READ) {
            let iids: Vec<u64> = chunk.iter().filter_map(|k| iid_of_key(k)).collect();
            for stored in self.read_records(&iids).await?.into_iter().flatten() {
                docs += 1;
                for x in stored.shingles {
                    *counts.entry(x).or_default() += 1;
                }
            }
        }
        // Per slot: its hashes (every one, so the first call can delete
        // them) and the fields to set.
        let tags = 1u64 << DF_TAG_BITS.min(self.keys.df_bits());
        let mut per_tag: Vec<Vec<(u64, u32, u32)>> = vec![Vec::new(); tags as usize];
        for (x, n) in counts {
            let group = self.keys.df_group_of(x);
            per_tag[self.keys.df_tag_of(group) as usize].push((group, x, n));
        }
        // Each slot's first call deletes its hashes: the first calls go in
        // one trip, the rest after it (a call may be sent again after a
        // later one, when its node lacks the script, so order within a
        // trip is not relied on).
        let mut first: Vec<Call> = Vec::new();
        let mut rest: Vec<Call> = Vec::new();
        for (tag, fields) in per_tag.into_iter().enumerate() {
            let groups: Vec<u64> = self.keys.df_groups_of_tag(tag as u64).collect();
            let hashes: Vec<String> = groups.iter().map(|&g| self.keys.df_key(g)).collect();
            let at_of = |g: u64| (g >> DF_TAG_BITS) as usize + 1;
            if fields.is_empty() {
                first.push(script_call(&DF_SET, hashes, vec![b"1".to_vec()]));
                continue;
            }
            for (i, part) in fields.chunks(SET_PART).enumerate() {
                let mut args = Vec::with_capacity(1 + 3 * part.len());
                args.push(if i == 0 { b"1".to_vec() } else { b"0".to_vec() });
                for &(g, x, n) in part {
                    debug_assert_eq!(groups[at_of(g) - 1], g);
                    args.push(at_of(g).to_string().into_bytes());
                    args.push(x.to_le_bytes().to_vec());
                    args.push(n.to_string().into_bytes());
                }
                let c = script_call(&DF_SET, hashes.clone(), args);
                if i == 0 {
                    first.push(c);
                } else {
                    rest.push(c);
                }
            }
        }
        let mut set = redis::cmd("SET");
        set.arg(self.keys.df_docs()).arg(docs);
        first.push(call(set));
        self.redis
            .calls("writing document frequencies", first)
            .await?;
        let mut rest = rest.into_iter().peekable();
        while rest.peek().is_some() {
            let calls: Vec<Call> = rest.by_ref().take(256).collect();
            self.redis
                .calls("writing document frequencies", calls)
                .await?;
        }
        self.redis
            .counters
            .df_recounted
            .fetch_add(docs as u64, Ordering::Relaxed);
        Ok(docs)
    }

    /// Say the counts are incomplete, then delete them.
    pub(super) async fn drop_counts(&self) -> Result<(), BackendError> {
        self.mark_counts(false).await?;
        let mut keys: Vec<String> = self.keys.df_keys().collect();
        keys.push(self.keys.df_docs());
        super::unlink_keys(&self.redis, &keys, "dropping document frequencies").await
    }

    /// The document frequency of each of `sorted` (sorted, distinct
    /// shingles), and N: one trip (0s while counts are off).
    pub async fn doc_frequencies(&self, sorted: &[u32]) -> Result<(Vec<u32>, usize), BackendError> {
        let (map, n) = self.df_map(sorted).await?;
        Ok((
            sorted
                .iter()
                .map(|x| map.get(x).copied().unwrap_or(0))
                .collect(),
            n,
        ))
    }

    /// Every shingle held by at least `at` documents (at most `max`, the
    /// most common first, then by shingle), and the distinct shingles
    /// counted: every hash filtered by a script, 256 hashes a call, 16
    /// calls a trip.
    pub async fn common_shingles(
        &self,
        at: u32,
        max: usize,
    ) -> Result<(Vec<(u32, u32)>, usize), BackendError> {
        // One call per 256 hashes of a slot, 16 calls a trip.
        let tags = 1u64 << DF_TAG_BITS;
        let mut groups: Vec<Vec<String>> = Vec::new();
        for tag in 0..tags {
            let hashes: Vec<String> = self
                .keys
                .df_groups_of_tag(tag)
                .map(|g| self.keys.df_key(g))
                .collect();
            groups.extend(hashes.chunks(COMMON_KEYS).map(<[String]>::to_vec));
        }
        let at_arg = at.max(1).to_string().into_bytes();
        let mut all: Vec<(u32, u32)> = Vec::new();
        let mut distinct = 0usize;
        for part in groups.chunks(COMMON_CALLS) {
            let calls = part
                .iter()
                .map(|keys| script_call(&DF_COMMON, keys.clone(), vec![at_arg.clone()]))
                .collect();
            let values = self.redis.calls("reading common shingles", calls).await?;
            let part: Vec<&String> = part.iter().map(|keys| &keys[0]).collect();
            for (key, value) in part.iter().zip(values) {
                let Value::Array(items) = value else {
                    return Err(corrupt(key, "the common read answered no list"));
                };
                let mut it = items.into_iter();
                let n: i64 = it
                    .next()
                    .map(redis::from_redis_value)
                    .transpose()
                    .map_err(|e| corrupt(key, e))?
                    .unwrap_or(0);
                distinct += n.max(0) as usize;
                while let (Some(field), Some(count)) = (it.next(), it.next()) {
                    let field: Vec<u8> =
                        redis::from_redis_value(field).map_err(|e| corrupt(key, e))?;
                    let count: i64 = redis::from_redis_value(count).map_err(|e| corrupt(key, e))?;
                    let x = u32::from_le_bytes(
                        field
                            .as_slice()
                            .try_into()
                            .map_err(|_| corrupt(key, "a field that is not 4 bytes"))?,
                    );
                    all.push((x, count.clamp(0, i64::from(u32::MAX)) as u32));
                }
            }
        }
        all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        all.truncate(max);
        Ok((all, distinct))
    }

    /// The registered templates, by id (and the version read with them,
    /// remembered as the one this node's engine has after the caller
    /// applies them).
    async fn read_templates(&self) -> Result<(Vec<Template>, u64), BackendError> {
        let key = self.keys.templates();
        let call = script_call(
            &TPL_READ,
            vec![key.clone(), self.keys.templates_version()],
            Vec::new(),
        );
        let mut values = self.redis.calls("reading templates", vec![call]).await?;
        let Some(Value::Array(items)) = values.pop() else {
            return Err(corrupt(&key, "the template read answered no list"));
        };
        let mut it = items.into_iter();
        let version: i64 = it
            .next()
            .map(redis::from_redis_value)
            .transpose()
            .map_err(|e| corrupt(&key, e))?
            .unwrap_or(0);
        let mut out = Vec::new();
        while let (Some(_id), Some(json)) = (it.next(), it.next()) {
            let json: Vec<u8> = redis::from_redis_value(json).map_err(|e| corrupt(&key, e))?;
            let t: Template = serde_json::from_slice(&json).map_err(|e| corrupt(&key, e))?;
            out.push(t);
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok((out, version.max(0) as u64))
    }

    /// The collection's registered templates, by id. The caller makes
    /// them its engine's (`Collection::refresh_templates`).
    /// (A read for a listing is not an application: the version this node
    /// has applied moves only in `apply_templates`, so the next
    /// frequency read still applies what this one saw.)
    pub async fn templates(&self) -> Result<Vec<Template>, BackendError> {
        Ok(self.read_templates().await?.0)
    }

    /// Read the templates and make them this node's engine's.
    async fn apply_templates(&self) -> Result<(), BackendError> {
        let (templates, version) = self.read_templates().await?;
        self.engine.use_templates(&templates);
        self.templates_seen.store(version, Ordering::Release);
        Ok(())
    }

    /// Whether another node changed the templates since this node last
    /// read them (one `GET`).
    pub async fn templates_changed(&self) -> Result<bool, BackendError> {
        let mut get = redis::cmd("GET");
        get.arg(self.keys.templates_version());
        let v: Option<u64> = self
            .redis
            .one("reading the templates' version", get)
            .await?;
        Ok(v.unwrap_or(0) != self.templates_seen.load(Ordering::Acquire))
    }

    /// Make the templates in Redis this node's engine's if another node
    /// changed them since (one `GET`; the templates read only then). For
    /// the watch loop; true if they were read again.
    pub async fn refresh_templates_if_changed(&self) -> Result<bool, BackendError> {
        if !self.templates_changed().await? {
            return Ok(false);
        }
        self.apply_templates().await?;
        Ok(true)
    }

    /// Store `t` (replacing one with its id); true if it is new. One script
    /// (the hash and the version move together).
    pub async fn put_template(&self, t: Template) -> Result<bool, BackendError> {
        let json = serde_json::to_vec(&t)
            .map_err(|e| BackendError::Internal(format!("a template as JSON: {e}")))?;
        let call = script_call(
            &TPL_PUT,
            vec![self.keys.templates(), self.keys.templates_version()],
            vec![t.id.into_bytes(), json],
        );
        let mut v = self.redis.calls("storing a template", vec![call]).await?;
        self.redis.replicate().await?;
        let created: i64 = redis::from_redis_value(v.pop().unwrap_or(Value::Nil))
            .map_err(|e| corrupt(&self.keys.templates(), e))?;
        Ok(created == 1)
    }

    /// Delete the template `id`; false if there was none.
    pub async fn delete_template(&self, id: &str) -> Result<bool, BackendError> {
        let call = script_call(
            &TPL_DEL,
            vec![self.keys.templates(), self.keys.templates_version()],
            vec![id.as_bytes().to_vec()],
        );
        let mut v = self.redis.calls("deleting a template", vec![call]).await?;
        self.redis.replicate().await?;
        let gone: i64 = redis::from_redis_value(v.pop().unwrap_or(Value::Nil))
            .map_err(|e| corrupt(&self.keys.templates(), e))?;
        Ok(gone == 1)
    }

    /// The rule now and the frequencies of `shingles` (a query's), for a
    /// query on content scores: 1 trip (2 when the templates moved).
    pub(super) async fn content_start(
        &self,
        shingles: &[u32],
    ) -> Result<(Classifier, HashMap<u32, u32>), BackendError> {
        if !self.engine.boilerplate_on() {
            return Err(EngineError::BoilerplateOff.into());
        }
        let (map, n) = self.df_map(shingles).await?;
        Ok((self.engine.classifier_with(n), map))
    }

    /// Add to `map` the frequencies of the shingles of `records` it lacks
    /// (one trip; none when it has them all).
    pub(super) async fn df_extend<'a>(
        &self,
        map: &mut HashMap<u32, u32>,
        records: impl IntoIterator<Item = &'a Record>,
    ) -> Result<(), BackendError> {
        let mut missing: Vec<u32> = records
            .into_iter()
            .flat_map(|r| r.shingles().iter().copied())
            .filter(|x| !map.contains_key(x))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        missing.sort_unstable();
        missing.dedup();
        let (more, _) = self.df_map(&missing).await?;
        map.extend(more);
        Ok(())
    }

    /// Add the content scores to matches found on raw scores when the
    /// collection counts document frequency (the memory engine's
    /// `attach_content`): `records` holds the verified versions; one trip
    /// for the frequencies of the query's and the matches' shingles.
    pub(super) async fn attach_content(
        &self,
        shingles: &[u32],
        records: &[Arc<Record>],
        matches: &mut [Match],
    ) -> Result<(), BackendError> {
        if !self.engine.boilerplate_on() || matches.is_empty() {
            return Ok(());
        }
        let by_id: HashMap<&str, &Arc<Record>> =
            records.iter().map(|r| (r.id().as_str(), r)).collect();
        let matched: Vec<&Arc<Record>> = matches
            .iter()
            .filter_map(|m| by_id.get(m.id.as_str()).copied())
            .collect();
        let mut all: Vec<u32> = shingles
            .iter()
            .copied()
            .chain(matched.iter().flat_map(|r| r.shingles().iter().copied()))
            .collect();
        all.sort_unstable();
        all.dedup();
        let (map, n) = self.df_map(&all).await?;
        let content = ContentQuery {
            classifier: self.engine.classifier_with(n),
            q_df: Default::default(),
            df: &map,
        };
        for m in matches.iter_mut() {
            if let Some(r) = by_id.get(m.id.as_str()) {
                m.content = Some(content.scores(shingles, r));
            }
        }
        Ok(())
    }

    /// Whether a recount runs on this node (for `/stats`).
    pub fn recounting(&self) -> bool {
        self.recounting.load(Ordering::Relaxed)
    }

    /// The content edge of `record` and `peer` if their content scores
    /// reach `t` by `measure` (the memory scan's rule).
    pub(super) fn content_edge(
        content: &ContentQuery<'_>,
        record: &Arc<Record>,
        peer: &Arc<Record>,
        measure: crate::engine::Measure,
        t: f64,
    ) -> Option<Edge> {
        let scores = content.classifier.scores(
            record.shingles(),
            &content.df.df_of(record.shingles()),
            peer.shingles(),
            &content.df.df_of(peer.shingles()),
        );
        let pass = measure.content_score(&scores) >= t
            && (measure != crate::engine::Measure::Containment
                || scores.query_in_stored.max(scores.stored_in_query) >= t);
        if !pass {
            return None;
        }
        let intersection = crate::jaccard::overlap(record.shingles(), peer.shingles()).intersection;
        let mut edge = Edge::new(Arc::clone(record), Arc::clone(peer), intersection);
        edge.set_content(record, scores);
        Some(edge)
    }
}
