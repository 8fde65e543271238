//! The passage index in Redis: posting buckets (fingerprint → members),
//! kept with every write when the collection keeps the index, and what
//! reads them: containment queries, passage lookups, `if_unique` by
//! containment, containment pairs, and switching the index on (backfill)
//! and off (drop). Layout and round trips: docs/redis-layout.md, "The
//! passage index".
//!
//! **Posting buckets are band buckets.** A posting hash
//! (`P:c:f:{f.<group/16>}:<group>`) holds, per fingerprint (a 4-byte field), the same
//! 12-byte `(iid, gen)` members as a band bucket, appended by the same
//! script in the write's first trip and removed by the same exact-member
//! script with the band entries of a delete, replace, expiry or refused
//! write: so a posting is visible only once its record commits, and a stale
//! one (another `gen`) is skipped like a stale band member.
//!
//! **Common fingerprints are not read.** One script per slot (16 posting
//! hashes share one) reads the buckets of a query's fingerprints there: `HSTRLEN` first (a
//! bucket's size is its length / 12, O(1)), the members only of buckets of
//! at most `index.common_fingerprint_docs` members; a larger one answers
//! its size, and is counted in [`PassageWork`] (its members may include
//! stale ones: the count is an upper bound). So a query reads at most
//! fingerprints × common_fingerprint_docs members, however common its
//! passages are, in one trip.
//!
//! **Answers are the memory engine's.** Candidates are ranked by shared
//! fingerprints, their current records read, and verified by the engine's
//! own functions (`Engine::verify_contained_candidates`,
//! `Engine::verify_passage_candidates`, `Engine::worth_verifying`).
//!
//! **Switching, and nodes that learn it late.** The flag is this node's
//! engine's (`index.passage_index` of the collection). Turning it on
//! backfills the postings of every stored record (a walk of the record
//! keys, members added only if absent, so it can run twice or on two nodes)
//! and records `passages=1` in the collection's layout key; turning it off
//! records `passages=0` and deletes every posting hash. A node that has not
//! yet seen the change keeps writing as before, so the node that made it
//! runs the same step again [`settle_delay`] later (two watch intervals,
//! by when every node has applied it, plus the command timeout, by when
//! every write it started has landed): a document written meanwhile
//! without postings gets them then. Deletes of such a node leave their
//! postings behind: stale members, skipped on read, 12 bytes each until
//! the index is dropped.

use super::codec::{iid, members, MEMBER};
use super::{corrupt, script_call, BackendError, RedisIndex, Script, SCAN_READ};
use crate::engine::{
    ContentQuery, Edge, Engine, EngineError, FilterSpec, Measure, Passage, PassageOutcome,
    PassageWork, Prepared, Query, QueryOutcome, Record, ScanStats, Score, Threshold,
};
use redis::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

/// Read the posting buckets of some fingerprints, skipping (and sizing)
/// the common ones, in the posting hashes of one slot or of several slots
/// one primary serves (`allow-cross-slot-keys`). `KEYS` the hashes of one
/// slot; `ARGV[1]` the most bytes a bucket read in full may hold, `ARGV[2]`
/// how many hash names of other slots, the names, then hash number and
/// field pairs.
static POSTINGS_READ: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/postings_read.lua")));

/// Append members to fields of one bucket hash unless already there (the
/// backfill). `KEYS[1]` the hash; ARGV: field, member, …
static ADD_ABSENT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/add_absent.lua")));

/// Set one `name=value` of the layout key. `KEYS[1]` the layout key;
/// `ARGV[1]` the name, `ARGV[2]` the value.
pub(super) static META_SET: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/meta_set.lua")));

use crate::engine::{COMMON_LISTED, MAX_READ};
/// Slots read in one call at most: a query's (~35) go in one call a
/// primary, while a containment scan's step (every slot) is cut into calls
/// short enough not to hold Redis's one thread for long.
const GROUP_SLOTS: usize = 64;
/// Candidate records read per trip by a query.
const CANDIDATE_READ: usize = 256;
/// Records a containment pair scan handles per step (their postings are
/// read in one trip).
const SCAN_STEP: usize = 1024;
/// The layout key's field that says the postings are complete.
const META_FIELD: &str = "passages";

/// A posting bucket as read.
#[derive(Debug, PartialEq)]
enum Bucket {
    /// Its members, each once.
    Members(Vec<(u64, u32)>),
    /// More than `common_fingerprint_docs` members: not read; how many.
    Common(usize),
}

/// What a containment scan gathered for one record: the later documents'
/// versions sharing its fingerprints, with how many; its common ones.
type Gathered = (HashMap<(u64, u32), usize>, usize);

/// What the posting buckets of a query's fingerprints gave.
pub(super) struct Postings {
    /// Each version met, (iid, gen), with how many of the query's
    /// fingerprints it shares: sorted by version (a query meets ~1,000
    /// versions sharing one or two: a sort of their members costs less
    /// than hashing each into a map).
    shared: Vec<((u64, u32), usize)>,
    pub(super) work: PassageWork,
    pub(super) truncated: bool,
}

impl Postings {
    /// Versions with how many times each is in `members` (any order).
    fn counted(mut members: Vec<(u64, u32)>) -> Vec<((u64, u32), usize)> {
        members.sort_unstable();
        members
            .chunk_by(|a, b| a == b)
            .map(|run| (run[0], run.len()))
            .collect()
    }

    /// Every document met, with the most fingerprints any of its versions
    /// shares: most first, then by iid.
    pub(super) fn ranked(&self) -> Vec<(u64, usize)> {
        let mut out: Vec<(u64, usize)> = self
            .shared
            .chunk_by(|a, b| a.0 .0 == b.0 .0)
            .map(|run| (run[0].0 .0, run.iter().map(|&(_, n)| n).max().unwrap_or(0)))
            .collect();
        out.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }

    /// How many fingerprints version `gen` of `iid` shares (`None`: the
    /// version was not in the buckets: stale, or written after them).
    pub(super) fn shared(&self, iid: u64, gen: u32) -> Option<usize> {
        self.shared
            .binary_search_by(|(v, _)| v.cmp(&(iid, gen)))
            .ok()
            .map(|at| self.shared[at].1)
    }

    /// The versions met of each document.
    pub(super) fn gens(&self) -> HashMap<u64, Vec<u32>> {
        let mut out: HashMap<u64, Vec<u32>> = HashMap::new();
        for &((i, g), _) in &self.shared {
            out.entry(i).or_default().push(g);
        }
        out
    }
}

/// How long after a switch the node that made it runs its step again (see
/// the module docs).
pub(super) fn settle_delay(settings: &crate::config::RedisSettings) -> Duration {
    Duration::from_millis(2 * settings.watch_interval_ms + settings.command_timeout_ms)
}

/// Whether a layout string says the postings are complete.
pub(super) fn layout_has_postings(meta: &str) -> bool {
    super::layout_flag(meta, META_FIELD)
}

/// The field a layout string gets for a collection created with the index
/// `on` (an empty collection's postings are complete).
pub(super) fn layout_field(on: bool) -> String {
    super::layout_entry(META_FIELD, on)
}

impl RedisIndex {
    /// Whether this node keeps the passage index of the collection.
    pub fn passage_index(&self) -> bool {
        self.engine.passage_index()
    }

    /// Keep the passage index (backfill every stored record's postings) or
    /// drop it (delete every posting hash), and do it again after
    /// `settle_delay` for writes of nodes that learn it later (module docs).
    /// Idempotent: the step runs whatever this node's flag was (its watch
    /// may have applied the catalog entry of this very change first), and a
    /// backfill the layout says is complete is skipped.
    pub async fn set_passage_index(&self, on: bool) -> Result<(), BackendError> {
        // The engine's own maps are empty on this backend: only its flag moves.
        self.engine.set_passage_index_flag(on);
        let epoch = self.passage_epoch.fetch_add(1, Ordering::AcqRel) + 1;
        if on {
            self.build_postings(false).await?;
        } else {
            self.drop_postings().await?;
        }
        let later = self.shadow();
        let delay = settle_delay(&self.redis.settings);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            // A later switch (either way) runs its own step.
            if later.passage_epoch.load(Ordering::Acquire) != epoch
                || later.engine.passage_index() != on
            {
                return;
            }
            let done = if on {
                later.build_postings(true).await.map(drop)
            } else {
                later.drop_postings().await
            };
            if let Err(e) = done {
                tracing::warn!(keys = later.keys.base(), error = %e, on, "repeating the passage index switch failed; switch it again to repair");
            }
        });
        Ok(())
    }

    /// Set `passages=` of the layout key.
    pub(super) async fn mark_postings(&self, complete: bool) -> Result<(), BackendError> {
        self.mark_layout(META_FIELD, complete, "marking the passage index")
            .await
    }

    /// Add the postings of every stored record that lacks them (unless the
    /// layout says they are complete and `force` is false), then say they
    /// are complete. How many records were walked.
    pub(super) async fn build_postings(&self, force: bool) -> Result<usize, BackendError> {
        if !force {
            let meta = super::stored_meta(&self.redis, &self.keys).await?;
            if meta.as_deref().is_some_and(layout_has_postings) {
                return Ok(0);
            }
        }
        self.backfilling.store(true, Ordering::Relaxed);
        let outcome = self.backfill().await;
        self.backfilling.store(false, Ordering::Relaxed);
        let walked = outcome?;
        self.mark_postings(true).await?;
        tracing::info!(
            keys = self.keys.base(),
            records = walked,
            "passage index: postings of every stored record added"
        );
        Ok(walked)
    }

    async fn backfill(&self) -> Result<usize, BackendError> {
        let keys = self.redis.scan_all(&self.keys.record_pattern()).await?;
        let mut walked = 0;
        for chunk in keys.chunks(SCAN_READ) {
            let iids: Vec<u64> = chunk.iter().filter_map(|k| iid_of_key(k)).collect();
            let records = self.read_records(&iids).await?;
            let mut docs: Vec<(u64, u32, Vec<u32>)> = Vec::new();
            for (&i, stored) in iids.iter().zip(records) {
                let Some(stored) = stored else { continue };
                let gen = stored.gen;
                let prepared = self
                    .engine
                    .prepared_from_shingles(stored.shingles, stored.selection)
                    .ok_or_else(|| corrupt(&self.keys.record(i), "an empty shingle set"))?;
                docs.push((i, gen, prepared.fingerprints().collect()));
            }
            walked += docs.len();
            let calls = self.posting_calls(
                &ADD_ABSENT,
                docs.iter().map(|(i, g, f)| (*i, *g, f.as_slice())),
            );
            if !calls.is_empty() {
                self.redis.calls("adding postings", calls).await?;
            }
            self.redis
                .counters
                .postings_backfilled
                .fetch_add(docs.len() as u64, Ordering::Relaxed);
        }
        Ok(walked)
    }

    /// Say the postings are incomplete, then delete every posting hash.
    pub(super) async fn drop_postings(&self) -> Result<(), BackendError> {
        self.mark_postings(false).await?;
        let keys: Vec<String> = self.keys.posting_keys().collect();
        super::unlink_keys(&self.redis, &keys, "dropping postings").await
    }

    /// The posting buckets of `fingerprints` (distinct), one script call a
    /// slot (over its posting hashes), all in one trip.
    async fn posting_buckets(
        &self,
        fingerprints: &[u32],
    ) -> Result<HashMap<u32, Bucket>, BackendError> {
        Ok(self.posting_buckets_with(fingerprints, Vec::new()).await?.0)
    }

    /// [`Self::posting_buckets`] with `extra` calls in the same trip: their
    /// answers too, in order.
    async fn posting_buckets_with(
        &self,
        fingerprints: &[u32],
        extra: Vec<super::Call>,
    ) -> Result<(HashMap<u32, Bucket>, Vec<Value>), BackendError> {
        let common_at = self.engine.params().index.common_fingerprint_docs;
        let most = (common_at.saturating_mul(MEMBER)).to_string().into_bytes();
        // slot tag → (its hashes, their indexes, the fingerprints asked).
        type Slot = (Vec<String>, HashMap<u64, usize>, Vec<(usize, u32)>);
        let mut by_slot: BTreeMap<u64, Slot> = BTreeMap::new();
        for &fp in fingerprints {
            let group = self.keys.posting_group_of(fp);
            let (hashes, index, asked) =
                by_slot.entry(self.keys.posting_slot_of(group)).or_default();
            let at = *index.entry(group).or_insert_with(|| {
                hashes.push(self.keys.posting_key(group));
                hashes.len()
            });
            asked.push((at, fp));
        }
        let slots: Vec<Slot> = by_slot.into_values().collect();
        // One call over some slots' hashes (one script for any number).
        let read_call = |members: &[usize]| {
            let mut hashes: Vec<String> = Vec::new();
            let mut pairs: Vec<Vec<u8>> = Vec::new();
            for &i in members {
                let (own, _, asked) = &slots[i];
                for &(at, fp) in asked {
                    pairs.push((hashes.len() + at).to_string().into_bytes());
                    pairs.push(fp.to_le_bytes().to_vec());
                }
                hashes.extend(own.iter().cloned());
            }
            // The first slot's hashes declared (so a slot that is
            // migrating is redirected as for any command), the others named.
            let others = hashes.split_off(slots[members[0]].0.len());
            let mut args = Vec::with_capacity(2 + others.len() + pairs.len());
            args.push(most.clone());
            args.push(others.len().to_string().into_bytes());
            args.extend(others.into_iter().map(String::into_bytes));
            args.extend(pairs);
            script_call(&POSTINGS_READ, hashes, args)
        };
        // The slots grouped by the primary serving them: one call a node.
        let heads: Vec<&str> = slots
            .iter()
            .map(|(hashes, _, _)| hashes[0].as_str())
            .collect();
        let groups = self.by_node(&heads).await;
        // The groups whose call a node refused, with the errors.
        let failed: Arc<std::sync::Mutex<Vec<(usize, redis::RedisError)>>> = Arc::default();
        let mut calls: Vec<super::Call> = groups
            .iter()
            .enumerate()
            .map(|(g, members)| match members.as_slice() {
                [_] => read_call(members),
                _ => {
                    let failed = Arc::clone(&failed);
                    // Refused (the slot map moved): read slot by slot
                    // below, not a failed trip.
                    super::conn::refusal_as_nil(read_call(members), move |e| {
                        failed.lock().expect("failed lock").push((g, e));
                    })
                }
            })
            .collect();
        calls.extend(extra);
        let mut answers = self.redis.calls("reading posting buckets", calls).await?;
        let extra = answers.split_off(groups.len().min(answers.len()));
        let refused = std::mem::take(&mut *failed.lock().expect("failed lock"));
        // Each slot's answers, in its `asked` order.
        let mut per_slot: Vec<Option<Vec<Value>>> = (0..slots.len()).map(|_| None).collect();
        for (g, (members, answer)) in groups.iter().zip(answers).enumerate() {
            if refused.iter().any(|(at, _)| *at == g) {
                continue;
            }
            let hash = &slots[members[0]].0[0];
            let Value::Array(mut values) = answer else {
                return Err(corrupt(hash, "the posting read answered no list"));
            };
            let want: usize = members.iter().map(|&i| slots[i].2.len()).sum();
            if values.len() != want {
                return Err(corrupt(hash, "the posting read answered a short list"));
            }
            for &i in members.iter().rev() {
                per_slot[i] = Some(values.split_off(values.len() - slots[i].2.len()));
            }
        }
        let again: Vec<usize> = (0..slots.len())
            .filter(|&i| per_slot[i].is_none())
            .collect();
        if !again.is_empty() {
            if let Some((_, e)) = refused.first() {
                self.redis.slot_owners_failed(e);
            }
            let calls = again.iter().map(|&i| read_call(&[i])).collect();
            let answers = self.redis.calls("reading posting buckets", calls).await?;
            for (&i, answer) in again.iter().zip(answers) {
                let Value::Array(values) = answer else {
                    return Err(corrupt(&slots[i].0[0], "the posting read answered no list"));
                };
                per_slot[i] = Some(values);
            }
        }
        let mut out = HashMap::with_capacity(fingerprints.len());
        let (mut read, mut common) = (0u64, 0u64);
        for ((hashes, _, asked), values) in slots.iter().zip(per_slot) {
            let hash = &hashes[0];
            let values = values.unwrap_or_default();
            if values.len() != asked.len() {
                return Err(corrupt(hash, "the posting read answered a short list"));
            }
            for (&(_, fp), value) in asked.iter().zip(values) {
                let bucket = match value {
                    Value::Int(n) => {
                        common += 1;
                        Bucket::Common(n.max(0) as usize / MEMBER)
                    }
                    Value::BulkString(bytes) => {
                        if bytes.is_empty() {
                            continue;
                        }
                        read += 1;
                        let mut ms: Vec<(u64, u32)> = members(&bytes).collect();
                        ms.sort_unstable();
                        ms.dedup();
                        Bucket::Members(ms)
                    }
                    Value::Nil => continue,
                    other => {
                        return Err(corrupt(hash, format!("a posting read answered {other:?}")))
                    }
                };
                out.insert(fp, bucket);
            }
        }
        let c = &self.redis.counters;
        c.postings_read.fetch_add(read, Ordering::Relaxed);
        c.postings_common.fetch_add(common, Ordering::Relaxed);
        Ok((out, extra))
    }

    /// The documents sharing `fingerprints` (sorted, distinct), with how
    /// many each version shares (`own` left out): the memory engine's
    /// `gather` over the posting buckets (at most [`MAX_READ`] members, in
    /// fingerprint order; common fingerprints skipped and counted).
    pub(super) async fn read_postings(
        &self,
        fingerprints: &[u32],
        own: Option<u64>,
    ) -> Result<Postings, BackendError> {
        let buckets = self.posting_buckets(fingerprints).await?;
        Ok(Self::gather(fingerprints, buckets, own))
    }

    /// The query's content keys and their postings, the keys picked by
    /// this node's counts as they are while the document-frequency log is
    /// read in the same trip; then the keys as the counts say once it is
    /// applied, and the buckets of any that became content read (one more
    /// trip, only then). The same keys and buckets as reading the log
    /// first, in one trip fewer: a write whose log entry the trip reads
    /// has its postings in place already (they precede its commit).
    async fn content_postings(
        &self,
        all: &[u32],
        own: Option<u64>,
    ) -> Result<(super::boilerplate::ContentStart, Vec<u32>, Postings), BackendError> {
        let (classifier, table) = self.content_start_read()?;
        let guessed = classifier.content_keys(all, &*table);
        let (mut buckets, answers) = self
            .posting_buckets_with(&guessed, self.df_read_calls())
            .await?;
        let (classifier, table) = self.content_start_from(answers).await?;
        let keys = classifier.content_keys(all, &*table);
        let missing: Vec<u32> = keys
            .iter()
            .copied()
            .filter(|k| guessed.binary_search(k).is_err())
            .collect();
        if !missing.is_empty() {
            buckets.extend(self.posting_buckets(&missing).await?);
        }
        let postings = Self::gather(&keys, buckets, own);
        Ok(((classifier, table), keys, postings))
    }

    /// Slots (each named by one of its keys) grouped by the
    /// primary that served them when the slot map was last read: a group
    /// of several (at most [`GROUP_SLOTS`]) is read in one call. Each slot
    /// alone when the map is not known (reads paused after a refusal) or
    /// only one slot is read.
    async fn by_node(&self, slots: &[&str]) -> Vec<Vec<usize>> {
        let alone = || (0..slots.len()).map(|i| vec![i]).collect();
        if slots.len() < 2 {
            return alone();
        }
        let Some(owners) = self.redis.slot_owners().await else {
            return alone();
        };
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut by_node: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
        for (i, hash) in slots.iter().enumerate() {
            match owners.node_of(hash) {
                Some(n) => by_node.entry(n).or_default().push(i),
                None => groups.push(vec![i]),
            }
        }
        for on_node in by_node.into_values() {
            groups.extend(on_node.chunks(GROUP_SLOTS).map(<[usize]>::to_vec));
        }
        groups
    }

    /// What `fingerprints` share, from their `buckets`.
    fn gather(
        fingerprints: &[u32],
        mut buckets: HashMap<u32, Bucket>,
        own: Option<u64>,
    ) -> Postings {
        let mut work = PassageWork {
            fingerprints: fingerprints.len(),
            ..Default::default()
        };
        let mut members: Vec<(u64, u32)> = Vec::new();
        let (mut entries, mut truncated) = (0usize, false);
        for fp in fingerprints {
            if entries >= MAX_READ {
                truncated = true;
                break;
            }
            match buckets.remove(fp) {
                None => {}
                Some(Bucket::Common(n)) => {
                    work.common += 1;
                    work.common_docs.push(n);
                }
                Some(Bucket::Members(ms)) => {
                    entries += ms.len();
                    members.extend(ms.into_iter().filter(|m| Some(m.0) != own));
                }
            }
        }
        work.common_docs.sort_unstable_by(|a, b| b.cmp(a));
        work.common_docs.truncate(COMMON_LISTED);
        Postings {
            shared: Postings::counted(members),
            work,
            truncated,
        }
    }

    /// The current records of `ranked` documents, in that order, each
    /// with the fingerprints its version shares (a version the buckets did
    /// not name is skipped), read [`CANDIDATE_READ`] a trip until `want`
    /// of them passed `keep` (then one more, so the caller's cap sees it is
    /// cut) or `2 · want` were read; true when that cut the list.
    async fn current_candidates(
        &self,
        postings: &Postings,
        ranked: &[(u64, usize)],
        want: usize,
        mut keep: impl FnMut(&Record, usize) -> bool,
    ) -> Result<(Vec<(Arc<Record>, usize)>, bool), BackendError> {
        let budget = want.saturating_mul(2).max(CANDIDATE_READ);
        let mut out = Vec::new();
        let mut read = 0usize;
        for chunk in ranked.chunks(CANDIDATE_READ) {
            if out.len() > want {
                break;
            }
            if read >= budget {
                return Ok((out, true));
            }
            let iids: Vec<u64> = chunk.iter().map(|&(i, _)| i).collect();
            read += iids.len();
            for (&i, stored) in iids.iter().zip(self.read_records(&iids).await?) {
                let Some(stored) = stored else { continue };
                let Some(shared) = postings.shared(i, stored.gen) else {
                    continue;
                };
                let record = self.to_record(stored)?;
                if keep(&record, shared) {
                    out.push((record, shared));
                }
            }
        }
        out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.id().cmp(b.0.id())));
        Ok((out, false))
    }

    /// The fingerprint count the candidate rule holds a query to
    /// ([`Engine::query_fingerprints`](crate::engine::Engine::query_fingerprints)).
    pub(super) fn query_fingerprints(&self, doc: &Prepared, keys: usize) -> usize {
        self.engine.query_fingerprints(doc.shingles().len(), keys)
    }

    /// The share rule on the query's side alone, before a candidate's
    /// record is read (as in memory): on raw scores for `query_in_stored`;
    /// on content scores (a document's count then includes its boilerplate
    /// fingerprints) for `query_in_stored` and Jaccard.
    pub(super) fn worth_by_query(
        q: &Query,
        query_fps: usize,
        shared: usize,
        common: usize,
    ) -> bool {
        match (q.score, q.measure) {
            (Score::Raw, Measure::QueryInStored) => {
                Engine::worth_verifying(q, query_fps, 0, shared, common)
            }
            (Score::Content, Measure::QueryInStored | Measure::Jaccard) => {
                shared >= Engine::fingerprints_needed(query_fps, q.threshold.value(), common)
            }
            _ => true,
        }
    }

    /// A query answered from the passage index (a containment measure, or
    /// any measure on content scores): the posting buckets of the query's
    /// fingerprints (1 trip), the candidates' records (1 trip per 256,
    /// most-sharing first), verified exactly. On content scores only the
    /// query's content fingerprints are read, with the document-frequency
    /// log in the same trip ([`Self::content_postings`]), and every count
    /// is this node's; on raw scores with document frequency counted, the
    /// matches' content scores (1 trip).
    /// `counts_read`: the caller read the log in a trip of its own just
    /// before (a query by id, with the record), so the query's frequencies
    /// are looked up here without a trip.
    pub(super) async fn contained(
        &self,
        doc: &Prepared,
        exclude: Option<&str>,
        q: &Query,
        counts_read: bool,
    ) -> Result<QueryOutcome, BackendError> {
        if !self.passage_index() {
            return Err(EngineError::PassageIndexOff(q.measure.as_str()).into());
        }
        let all = self
            .engine
            .containment_keys(doc.shingles(), doc.fingerprints());
        let own = exclude.map(iid);
        let content = q.score == Score::Content;
        let (start, keys, postings) = if content && !counts_read && self.counts_built() {
            let (start, keys, postings) = self.content_postings(&all, own).await?;
            (Some(start), keys, postings)
        } else {
            let start = match (content, counts_read) {
                (true, false) => Some(self.content_start().await?),
                (true, true) => Some(self.content_start_read()?),
                _ => None,
            };
            let keys = match &start {
                Some((classifier, table)) => classifier.content_keys(&all, &**table),
                None => all,
            };
            let postings = self.read_postings(&keys, own).await?;
            (start, keys, postings)
        };
        let common = postings.work.common;
        let query_fps = self.query_fingerprints(doc, keys.len());
        let mut ranked = postings.ranked();
        ranked.retain(|&(_, shared)| Self::worth_by_query(q, query_fps, shared, common));
        let cap = self.engine.params().index.max_candidates;
        let content = start.is_some();
        let (candidates, cut) = self
            .current_candidates(&postings, &ranked, cap, |record, shared| {
                exclude != Some(record.id().as_str())
                    && (content
                        || Engine::worth_verifying(
                            q,
                            query_fps,
                            crate::text::winnow::count(record.selection()),
                            shared,
                            common,
                        ))
            })
            .await?;
        let Some((classifier, table)) = start else {
            let records: Vec<Arc<Record>> = candidates.iter().map(|(r, _)| Arc::clone(r)).collect();
            let mut out = self.engine.verify_contained_candidates(
                doc,
                keys.len(),
                exclude,
                q,
                None,
                candidates,
                postings.work,
                postings.truncated || cut,
            );
            self.attach_content(doc.shingles(), &records, &mut out.matches)
                .await?;
            return Ok(out);
        };
        let content = ContentQuery {
            q_df: Default::default(),
            classifier,
            df: &*table,
        };
        Ok(self.engine.verify_contained_candidates(
            doc,
            keys.len(),
            exclude,
            q,
            Some(&content),
            candidates,
            postings.work,
            postings.truncated || cut,
        ))
    }

    /// Stored documents sharing a run of at least `min_run` consecutive
    /// shingles with `passage`: the posting buckets of its shingles (every
    /// one: a stored document's fingerprint inside a shared run is one of
    /// them; 1 trip), the candidates' records (1 trip per 256), checked exactly.
    pub async fn passages(
        &self,
        passage: &Passage,
        min_run: usize,
        limit: usize,
        since: Option<u64>,
    ) -> Result<PassageOutcome, BackendError> {
        if !self.passage_index() {
            return Err(EngineError::PassageIndexOff("passages").into());
        }
        let postings = self.read_postings(passage.keys(), None).await?;
        let ranked = postings.ranked();
        let cap = self.engine.params().index.max_candidates;
        let now = self.engine.now_ms();
        let (candidates, cut) = self
            .current_candidates(&postings, &ranked, cap, |record, _| {
                self.engine.is_live(record, now) && since.is_none_or(|s| record.created_ms() >= s)
            })
            .await?;
        Ok(self.engine.verify_passage_candidates(
            passage,
            min_run,
            limit,
            since,
            candidates.into_iter().map(|(r, _)| r),
            postings.work,
            postings.truncated || cut,
        ))
    }

    /// Every verified pair at `threshold` by `measure`: Jaccard from the
    /// band scan; a containment measure (either text inside the other)
    /// from the posting buckets, each pair once.
    pub async fn scan_edges(
        &self,
        threshold: Threshold,
        by: impl Into<crate::engine::By>,
    ) -> Result<(Vec<Edge>, ScanStats), BackendError> {
        let by = by.into();
        if by.via_passages() {
            return self.scan_contained(threshold, by).await;
        }
        let (pairs, stats) = self.scan_pairs(threshold).await?;
        let edges = pairs
            .into_iter()
            .map(|p| {
                let intersection = crate::jaccard::intersection_of(
                    p.jaccard,
                    p.a.shingles().len(),
                    p.b.shingles().len(),
                );
                Edge::new(p.a, p.b, intersection)
            })
            .collect();
        Ok((edges, stats))
    }

    /// [`Self::scan_edges`], keeping the pairs `filter` admits (both
    /// documents satisfy its conditions and differ on its `exclude_same`
    /// fields) and `except` does not hold (the memory engine's rule,
    /// `Engine::scan_pairs_filtered`); `pairs` in the stats counts those
    /// kept, `excluded` those `except` left out.
    pub async fn scan_edges_filtered(
        &self,
        threshold: Threshold,
        by: impl Into<crate::engine::By>,
        filter: Option<&Arc<FilterSpec>>,
        except: Option<&crate::engine::ExcludedPairs>,
    ) -> Result<(Vec<Edge>, ScanStats), BackendError> {
        let (mut edges, mut stats) = self.scan_edges(threshold, by).await?;
        if let Some(f) = filter {
            edges.retain(|e| f.admits_pair(e.a.metadata(), e.b.metadata()));
        }
        if let Some(except) = except {
            let admitted = edges.len();
            edges.retain(|e| !except.contains(e.a.id().as_str(), e.b.id().as_str()));
            stats.excluded = admitted - edges.len();
        }
        stats.pairs = edges.len();
        Ok((edges, stats))
    }

    /// Every pair of live documents with either inside the other at
    /// `threshold` or more, each once (found from the one with the smaller
    /// iid), exact: the memory engine's rule (`worth_verifying` by
    /// `Measure::Containment` with the finder's common fingerprints, then
    /// the exact overlap). The records are walked [`SCAN_STEP`] at a time:
    /// their posting buckets in one trip, the peers' records in trips of
    /// [`SCAN_READ`]. Memory: one step's records, buckets and peers, and
    /// the edges. Writes during the scan may or may not be in it.
    ///
    /// On content scores (the memory scan's rule): each record's content
    /// fingerprints only, the measure Jaccard when `by` asks it, else
    /// either text inside the other, over content shingles; the share rule
    /// on the peer's content fingerprints; the document frequencies of a
    /// step's records and of their peers read in one trip each, N and the
    /// rule once for the scan.
    async fn scan_contained(
        &self,
        threshold: Threshold,
        by: crate::engine::By,
    ) -> Result<(Vec<Edge>, ScanStats), BackendError> {
        if !self.passage_index() {
            return Err(EngineError::PassageIndexOff(by.measure.as_str()).into());
        }
        let content = by.score == Score::Content;
        let measure = if content && by.measure == Measure::Jaccard {
            Measure::Jaccard
        } else {
            Measure::Containment
        };
        let start = if content {
            Some(self.content_start().await?)
        } else {
            None
        };
        let q = Query::new(threshold, usize::MAX).measure(measure);
        let t = threshold.value();
        let now = self.engine.now_ms();
        let keys = self.redis.scan_all(&self.keys.record_pattern()).await?;
        let mut iids: Vec<u64> = keys.iter().filter_map(|k| iid_of_key(k)).collect();
        iids.sort_unstable();
        iids.dedup();
        let mut edges = Vec::new();
        let (mut documents, mut candidates) = (0usize, 0usize);
        for step in iids.chunks(SCAN_STEP) {
            // This step's live records with their fingerprints.
            let mut own: Vec<(u64, Arc<Record>, Vec<u32>)> = Vec::new();
            for chunk in step.chunks(SCAN_READ) {
                for (&i, stored) in chunk.iter().zip(self.read_records(chunk).await?) {
                    let Some(stored) = stored else { continue };
                    let record = self.to_record(stored)?;
                    if !self.engine.is_live(&record, now) {
                        continue;
                    }
                    let fps: Vec<u32> = record.fingerprints().collect();
                    own.push((i, record, fps));
                }
            }
            documents += own.len();
            // On content scores: each record's content fingerprints only
            // (this node's counts, in place).
            if let Some((c, table)) = &start {
                for (_, _, fps) in own.iter_mut() {
                    *fps = c.content_keys(fps, &**table);
                }
            }
            let mut all: Vec<u32> = own.iter().flat_map(|(_, _, f)| f.iter().copied()).collect();
            all.sort_unstable();
            all.dedup();
            let buckets = self.posting_buckets(&all).await?;
            // Per own record: the later documents' versions it shares
            // fingerprints with, and how many; its common fingerprints.
            let mut gathered: Vec<Gathered> = Vec::with_capacity(own.len());
            let mut peers: Vec<u64> = Vec::new();
            for (i, _, fps) in &own {
                let mut shared: HashMap<(u64, u32), usize> = HashMap::new();
                let mut common = 0;
                for fp in fps {
                    match buckets.get(fp) {
                        None => {}
                        Some(Bucket::Common(_)) => common += 1,
                        Some(Bucket::Members(ms)) => {
                            for &m in ms {
                                if m.0 > *i {
                                    *shared.entry(m).or_default() += 1;
                                }
                            }
                        }
                    }
                }
                peers.extend(shared.keys().map(|&(p, _)| p));
                gathered.push((shared, common));
            }
            drop(buckets);
            peers.sort_unstable();
            peers.dedup();
            let mut current: HashMap<u64, (u32, Arc<Record>)> = HashMap::new();
            for chunk in peers.chunks(SCAN_READ) {
                for (&p, stored) in chunk.iter().zip(self.read_records(chunk).await?) {
                    let Some(stored) = stored else { continue };
                    let gen = stored.gen;
                    let record = self.to_record(stored)?;
                    if self.engine.is_live(&record, now) {
                        current.insert(p, (gen, record));
                    }
                }
            }
            let scorer = start.as_ref().map(|(c, table)| ContentQuery {
                classifier: c.clone(),
                q_df: Default::default(),
                df: &**table,
            });
            for ((_, record, fps), (shared, common)) in own.iter().zip(gathered) {
                let mut found: Vec<(&Arc<Record>, usize)> = shared
                    .into_iter()
                    .filter_map(|((p, g), n)| {
                        current
                            .get(&p)
                            .filter(|(gen, _)| *gen == g)
                            .map(|(_, r)| (r, n))
                    })
                    .collect();
                found.sort_by(|a, b| a.0.id().cmp(b.0.id()));
                for (peer, n) in found {
                    let peer_fps = match &scorer {
                        Some(c) => c.content_fingerprints(peer),
                        None => crate::text::winnow::count(peer.selection()),
                    };
                    if !Engine::worth_verifying(&q, fps.len(), peer_fps, n, common) {
                        continue;
                    }
                    candidates += 1;
                    if let Some(c) = &scorer {
                        edges.extend(Self::content_edge(c, record, peer, measure, t));
                        continue;
                    }
                    let intersection =
                        crate::jaccard::overlap(record.shingles(), peer.shingles()).intersection;
                    let smaller = record.shingles().len().min(peer.shingles().len()).max(1);
                    if intersection as f64 / smaller as f64 >= t {
                        edges.push(Edge::new(
                            Arc::clone(record),
                            Arc::clone(peer),
                            intersection,
                        ));
                    }
                }
            }
        }
        let stats = ScanStats {
            documents,
            candidates,
            pairs: edges.len(),
            excluded: 0,
            complete: true,
        };
        Ok((edges, stats))
    }
}

/// The iid a record key names (`…:r:{<16 hex>}`).
pub(super) fn iid_of_key(key: &str) -> Option<u64> {
    let open = key.rfind('{')?;
    let hex = key.get(open + 1..key.len().checked_sub(1)?)?;
    u64::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::redis::Redis;
    use crate::engine::{DocId, EngineParams, NewDoc, WriteMode};
    use crate::testkit::redis_cluster::RedisCluster;
    use proptest::prelude::*;

    /// Reads grouped by node (one script call a primary) answer what reads
    /// slot by slot answer; a node that refuses its call (a slot map gone
    /// stale: here one that puts every slot on one primary) makes the read
    /// go slot by slot for those slots, with the same answer, and the map
    /// is forgotten and reads pause their grouping.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_grouped_by_node_answer_as_reads_by_slot_even_on_a_stale_slot_map() {
        if !RedisCluster::available_or_skip("the tests that start a Redis") {
            return;
        }
        let cluster = RedisCluster::start(3, 0).expect("a cluster starts");
        let mut p = EngineParams::default();
        p.index.passage_index = true;
        let engine = Arc::new(Engine::new(p.validate().unwrap()));
        let redis = Arc::new(Redis::new(crate::config::RedisSettings {
            nodes: cluster.urls(),
            key_prefix: "unit".into(),
            ..Default::default()
        }));
        let index = RedisIndex::open(Arc::clone(&engine), Arc::clone(&redis), "default")
            .await
            .unwrap();
        // 60 documents of words from a small vocabulary (shared passages).
        let mut x = 7u64;
        let mut word = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            format!("w{}", (x >> 33) % 300)
        };
        let texts: Vec<String> = (0..60)
            .map(|_| (0..120).map(|_| word()).collect::<Vec<_>>().join(" "))
            .collect();
        let batch = texts
            .iter()
            .enumerate()
            .map(|(i, t)| NewDoc {
                id: DocId::parse(&format!("d{i}")).unwrap(),
                doc: engine.prepare(t).unwrap(),
                metadata: None,
                expires_ms: None,
                text: None,
                created_ms: None,
            })
            .collect();
        index.insert_many(batch, WriteMode::Create).await.unwrap();
        let mut fps: Vec<u32> = texts
            .iter()
            .flat_map(|t| {
                let d = engine.prepare(t).unwrap();
                engine.containment_keys(d.shingles(), d.fingerprints())
            })
            .collect();
        fps.sort_unstable();
        fps.dedup();
        let commands = || redis.counters.commands.load(Ordering::Relaxed);
        let failures = || redis.counters.grouped_read_failures.load(Ordering::Relaxed);
        let pause = || {
            *redis.owners.write().unwrap() = None;
            *redis.owners_paused.lock().unwrap() =
                Some(std::time::Instant::now() + Duration::from_secs(3600));
        };
        // Slot by slot: the reference.
        pause();
        let before = commands();
        let want = index.posting_buckets(&fps).await.unwrap();
        let slots = commands() - before;
        assert!(
            want.len() > 100 && slots > 3,
            "{} buckets, {slots} calls",
            want.len()
        );
        // Grouped: one call a primary for each GROUP_SLOTS of its slots
        // (and one read of the slot map).
        *redis.owners_paused.lock().unwrap() = None;
        let before = commands();
        assert_eq!(index.posting_buckets(&fps).await.unwrap(), want);
        let owners = redis.owners.read().unwrap().clone().expect("the map read");
        let mut per_node: HashMap<u16, std::collections::HashSet<u64>> = HashMap::new();
        for &fp in &fps {
            let group = index.keys.posting_group_of(fp);
            let node = owners.node_of(&index.keys.posting_key(group)).unwrap();
            per_node
                .entry(node)
                .or_default()
                .insert(index.keys.posting_slot_of(group));
        }
        assert_eq!(per_node.len(), 3);
        let grouped: u64 = per_node
            .values()
            .map(|s| s.len().div_ceil(GROUP_SLOTS) as u64)
            .sum();
        assert_eq!(
            commands() - before,
            1 + grouped,
            "CLUSTER SLOTS, then the calls"
        );
        assert!(grouped * 8 < slots, "{grouped} calls against {slots}");
        let before = commands();
        assert_eq!(index.posting_buckets(&fps).await.unwrap(), want);
        assert_eq!(commands() - before, grouped);
        assert_eq!(failures(), 0);
        // A stale map: every slot on one primary. Its calls (each mixing
        // slots of the three) are refused, their slots read again one by
        // one.
        *redis.owners.write().unwrap() =
            Some(Arc::new(crate::backend::redis::conn::SlotOwners::single()));
        let before = commands();
        assert_eq!(index.posting_buckets(&fps).await.unwrap(), want);
        let calls = (slots as usize).div_ceil(GROUP_SLOTS) as u64;
        assert_eq!(
            commands() - before,
            calls + slots,
            "{calls} grouped calls, then every slot alone"
        );
        assert_eq!(failures(), 1);
        assert!(redis.owners.read().unwrap().is_none());
        // Paused: slot by slot, no call refused.
        let before = commands();
        assert_eq!(index.posting_buckets(&fps).await.unwrap(), want);
        assert_eq!(commands() - before, slots);
        assert_eq!(failures(), 1);
    }

    proptest! {
        /// The sorted counts answer as the map they replaced: per version
        /// its count, per document its best version's, ranked most first.
        #[test]
        fn postings_count_versions_as_a_map_would(
            members in proptest::collection::vec((0u64..20, 0u32..3), 0..200),
        ) {
            let mut map: HashMap<(u64, u32), usize> = HashMap::new();
            for &m in &members {
                *map.entry(m).or_default() += 1;
            }
            let p = Postings {
                shared: Postings::counted(members),
                work: PassageWork::default(),
                truncated: false,
            };
            for i in 0..21u64 {
                for g in 0..4u32 {
                    prop_assert_eq!(p.shared(i, g), map.get(&(i, g)).copied());
                }
            }
            let mut best: HashMap<u64, usize> = HashMap::new();
            for (&(i, _), &n) in &map {
                let b = best.entry(i).or_default();
                *b = (*b).max(n);
            }
            let mut want: Vec<(u64, usize)> = best.into_iter().collect();
            want.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            prop_assert_eq!(p.ranked(), want);
            let gens = p.gens();
            prop_assert_eq!(gens.values().map(Vec::len).sum::<usize>(), map.len());
        }
    }
}
