//! The sweep path of [`RedisIndex`]: the retention sweep (purge_expired)
//! and the due index it reads (its layout in [`codec`](super::codec)). An
//! expired record is deleted only if it is still the version found
//! expired; a stale due-index member is dropped only once its bucket is
//! [`STALE_GRACE_MINUTES`] behind; each node walks every record at its
//! first sweep and then once a day ([`WALK_EVERY`]).

use super::codec::{
    decode_head, decode_record, due_of, iid, member, members, own_expiry, Due, RecordHead,
    DUE_MINUTE_MS, HEAD_AND_ID, MEMBER,
};
use super::{corrupt, script_call, BackendError, Call, Conn, RedisIndex, Script, SCAN_READ};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

/// Drop members from a due bucket (every copy of each); an emptied or
/// missing bucket leaves its sorted set. `KEYS[1]` the bucket, `KEYS[2]`
/// the set; `ARGV[1]` the bucket's minute, `ARGV[2]` the bucket as the
/// caller read it ('' if it did not), `ARGV[3]` what the caller keeps of
/// that (its members less the dropped ones, in order), `ARGV[4]` the
/// members to drop, concatenated. A bucket only grows at its end (`APPEND`)
/// between rewrites, so while it still starts with what was read that part
/// is replaced by what is kept: string operations, however large the bucket.
/// Otherwise (another sweep rewrote it meanwhile) it is rebuilt member by
/// member without the dropped ones.
static DUE_DROP: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/due_drop.lua")));

/// A member whose record is gone or is another version ("stale": left by a
/// replace, a delete, a refused or interrupted write) is dropped from its
/// due bucket only once the bucket's minute is this far behind now. A write
/// appends its member before it commits its record, and its bucket's minute
/// is its creation or its own expiry, so a member of a write still under
/// way is not dropped (a write whose own expiry is already this far in the
/// past, or an import of documents created that long ago, could lose its
/// member to a sweep in the milliseconds before its commit: the record is
/// then found by the next full walk, and is hidden once expired anyway).
const STALE_GRACE_MINUTES: u64 = 10;

/// Whether a stale member of the due bucket of `minute` may be dropped at
/// `now` (see [`STALE_GRACE_MINUTES`]).
fn past_grace(minute: u64, now: u64) -> bool {
    minute + STALE_GRACE_MINUTES < now / DUE_MINUTE_MS
}

/// Expired records deleted per trip (and their entries removed in the
/// next): a sweep after a busy minute's retention deletes thousands.
const PURGE_PART: usize = 500;

/// Every node walks all of a collection's records (their heads) at its first
/// sweep and then once a day: it adds the due-bucket members of records
/// written without one (by a version of neardup before the due index, during
/// a rolling upgrade) and drops stale members the sweeps never reach (those
/// in buckets of creation while the collection has no retention).
pub(super) const WALK_EVERY: Duration = Duration::from_secs(24 * 3600);

/// What a retention sweep found: the expired records to delete, and the
/// members to drop from due buckets (those of the deleted records are added
/// as they are deleted), with each bucket as it read it.
#[derive(Default)]
struct Sweep {
    expired: Vec<(RecordHead, (Due, u64))>,
    drop: BTreeMap<(Due, u64), Vec<[u8; MEMBER]>>,
    read: HashMap<(Due, u64), Vec<u8>>,
}

impl RedisIndex {
    /// [`Self::refresh_count`] less the documents the due index shows
    /// expired and not yet purged (its buckets up to now: no scan of the
    /// records): the live count, kept as [`Self::documents`].
    pub async fn refresh_live_count(&self) -> Result<usize, BackendError> {
        let stored = self.refresh_count().await?;
        let expired = self.due(self.engine.now_ms()).await?.expired.len();
        let live = stored.saturating_sub(expired);
        self.documents.store(live as u64, Ordering::Relaxed);
        Ok(live)
    }

    /// Delete the expired records, each only if it is still the version
    /// found expired (a replace since made it live again). A sweep reads
    /// the due index: only the buckets whose minute can hold an expired
    /// record, and the heads of their members' records; this node's first
    /// sweep, and then one a day, walks every record instead (see
    /// `WALK_EVERY`).
    pub async fn purge_expired(&self) -> Result<usize, BackendError> {
        if self.paused.load(Ordering::Relaxed) {
            return Ok(0);
        }
        let now = self.engine.now_ms();
        let walk = self
            .next_walk
            .lock()
            .expect("walk lock")
            .is_none_or(|at| Instant::now() >= at);
        let Sweep {
            expired,
            mut drop,
            read,
        } = if walk {
            let sweep = self.walk(now).await?;
            *self.next_walk.lock().expect("walk lock") = Some(Instant::now() + WALK_EVERY);
            sweep
        } else {
            self.due(now).await?
        };
        let mut purged = 0;
        for part in expired.chunks(PURGE_PART) {
            let which: Vec<(&str, Option<u32>)> = part
                .iter()
                .map(|(head, _)| (head.id.as_str(), Some(head.gen)))
                .collect();
            // A record that will not decode is deleted and uncounted all
            // the same; it is reported once the others' entries are gone.
            let counting = self.engine.boilerplate_on();
            let mut df = super::df_log::DfDelta::default();
            let (mut olds, mut unreadable, mut gone) = (Vec::with_capacity(part.len()), None, 0);
            for ((head, _), old) in part.iter().zip(self.delete_records(&which).await?) {
                let Some(old) = old else {
                    continue;
                };
                let i = iid(&head.id);
                gone += 1;
                match decode_record(&old) {
                    Ok(stored) => {
                        if counting {
                            df.add(i, stored.gen, &stored.shingles, false);
                        }
                        olds.push((i, old));
                    }
                    Err(e) => {
                        unreadable.get_or_insert_with(|| corrupt(&self.keys.record(i), e));
                    }
                }
            }
            if gone > 0 {
                let mut trip = self.removal_calls(&olds)?;
                trip.push(self.counter_call(-gone));
                trip.extend(self.df_calls(&df));
                trip.push(self.bump_call());
                self.redis.calls("removing bucket entries", trip).await?;
                purged += gone as usize;
            }
            if let Some(e) = unreadable {
                return Err(e);
            }
            // Deleted here, by another node, or replaced since: their
            // members are stale either way.
            for (head, bucket) in part {
                drop.entry(*bucket)
                    .or_default()
                    .push(member(iid(&head.id), head.gen));
            }
        }
        let calls = self.due_drop_calls(drop, read);
        if !calls.is_empty() {
            self.redis
                .calls("dropping due-index members", calls)
                .await?;
        }
        Ok(purged)
    }

    /// What the due index says may have expired: the buckets of own
    /// expiries up to now and, under a retention, the buckets of creation
    /// up to now minus the retention; of their members, those whose record
    /// is that version and has expired. Stale members of buckets past
    /// [`STALE_GRACE_MINUTES`] are dropped; live ones stay.
    async fn due(&self, now: u64) -> Result<Sweep, BackendError> {
        let mut kinds = vec![(Due::Own, now)];
        let ttl = self.ttl_ms();
        if ttl != 0 {
            kinds.push((Due::Created, now.saturating_sub(ttl)));
        }
        let mut buckets = Vec::new();
        for (due, upto) in kinds {
            let mut range = redis::cmd("ZRANGEBYSCORE");
            range.arg(self.keys.due_set(due)).arg("-inf").arg(upto);
            buckets.extend(self.due_minutes(due, range).await?);
        }
        let contents = self.read_due_buckets(&buckets).await?;
        let mut iids: Vec<u64> = contents
            .iter()
            .flat_map(|bytes| members(bytes).map(|(i, _)| i))
            .collect();
        iids.sort_unstable();
        iids.dedup();
        let mut heads: HashMap<u64, RecordHead> = HashMap::with_capacity(iids.len());
        for chunk in iids.chunks(500) {
            let keys: Vec<String> = chunk.iter().map(|&i| self.keys.record(i)).collect();
            for (&i, head) in chunk.iter().zip(self.read_heads(&keys).await?) {
                if let Some(head) = head {
                    heads.insert(i, head);
                }
            }
        }
        let bucket_count = buckets.len();
        let mut sweep = Sweep::default();
        let mut seen = std::collections::HashSet::new();
        for (bucket, bytes) in buckets.into_iter().zip(contents) {
            for (i, gen) in members(&bytes) {
                if !seen.insert((i, gen)) {
                    continue;
                }
                // The member's own version, if its record still is it.
                match heads.get(&i).filter(|head| head.gen == gen) {
                    Some(head) if !self.head_is_live(head, now) => {
                        sweep.expired.push((head.clone(), bucket));
                    }
                    Some(_) => {} // live: it stays
                    None if past_grace(bucket.1, now) => {
                        sweep.drop.entry(bucket).or_default().push(member(i, gen));
                    }
                    None => {}
                }
            }
            sweep.read.insert(bucket, bytes);
        }
        tracing::debug!(
            keys = self.keys.base(),
            buckets = bucket_count,
            members = seen.len(),
            records = heads.len(),
            expired = sweep.expired.len(),
            "due index read"
        );
        Ok(sweep)
    }

    /// Every record's head (what the sweep read before the due index, and
    /// still reads at each node's first sweep and once a day): the expired
    /// ones, the members live records lack (added here, so records written
    /// by an older neardup are swept from now on) and the stale members of
    /// every bucket past [`STALE_GRACE_MINUTES`].
    async fn walk(&self, now: u64) -> Result<Sweep, BackendError> {
        let mut sweep = Sweep::default();
        // iid -> (gen, due bucket) of every record; the bucket only for live
        // ones (the expired go to `sweep.expired`).
        let mut current: HashMap<u64, (u32, Option<(Due, u64)>)> = HashMap::new();
        let keys = self.redis.scan_all(&self.keys.record_pattern()).await?;
        for chunk in keys.chunks(500) {
            for head in self.read_heads(chunk).await?.into_iter().flatten() {
                let bucket = due_of(head.created_ms, head.expires_ms);
                let live = self.head_is_live(&head, now);
                current.insert(iid(&head.id), (head.gen, live.then_some(bucket)));
                if !live {
                    sweep.expired.push((head, bucket));
                }
            }
        }
        let mut buckets = Vec::new();
        for due in [Due::Own, Due::Created] {
            let mut range = redis::cmd("ZRANGE");
            range.arg(self.keys.due_set(due)).arg(0).arg(-1);
            buckets.extend(self.due_minutes(due, range).await?);
        }
        let contents = self.read_due_buckets(&buckets).await?;
        let mut indexed = std::collections::HashSet::new();
        for (bucket, bytes) in buckets.into_iter().zip(contents) {
            for (i, gen) in members(&bytes) {
                indexed.insert(member(i, gen));
                let is_current = current.get(&i).is_some_and(|&(g, _)| g == gen);
                if !is_current && past_grace(bucket.1, now) {
                    sweep.drop.entry(bucket).or_default().push(member(i, gen));
                }
            }
            sweep.read.insert(bucket, bytes);
        }
        let missing: Vec<((Due, u64), [u8; MEMBER])> = current
            .iter()
            .filter_map(|(&i, &(gen, bucket))| Some((bucket?, member(i, gen))))
            .filter(|(_, m)| !indexed.contains(m))
            .collect();
        for part in missing.chunks(SCAN_READ) {
            self.redis
                .calls(
                    "indexing records by due time",
                    self.due_add_calls(part.iter().copied()),
                )
                .await?;
        }
        tracing::info!(
            keys = self.keys.base(),
            records = keys.len(),
            expired = sweep.expired.len(),
            indexed = missing.len(),
            stale = sweep.drop.values().map(Vec::len).sum::<usize>(),
            "walked every record: expired ones go, members missing from the due index were added"
        );
        Ok(sweep)
    }

    /// [`Engine::is_live_at`](crate::engine::Engine::is_live_at) of a record known by its head.
    fn head_is_live(&self, head: &RecordHead, now: u64) -> bool {
        self.engine
            .is_live_at(head.created_ms, own_expiry(head.expires_ms), now)
    }

    /// The due buckets a `ZRANGE`/`ZRANGEBYSCORE` of `due`'s set names.
    async fn due_minutes(
        &self,
        due: Due,
        range: redis::Cmd,
    ) -> Result<Vec<(Due, u64)>, BackendError> {
        let minutes: Vec<String> = self.redis.one("reading the due index", range).await?;
        minutes
            .into_iter()
            .map(|m| {
                m.parse::<u64>()
                    .map(|minute| (due, minute))
                    .map_err(|e| corrupt(&self.keys.due_set(due), e))
            })
            .collect()
    }

    /// Each of `buckets` as stored (its members, concatenated; empty for
    /// one gone meanwhile), read 500 buckets a trip.
    async fn read_due_buckets(&self, buckets: &[(Due, u64)]) -> Result<Vec<Vec<u8>>, BackendError> {
        let mut out = Vec::with_capacity(buckets.len());
        for chunk in buckets.chunks(500) {
            let commands: Vec<_> = chunk
                .iter()
                .map(|&(due, minute)| {
                    let key = self.keys.due_bucket(due, minute);
                    move |mut c: Conn| async move {
                        let mut get = redis::cmd("GET");
                        get.arg(key);
                        get.query_async::<Option<Vec<u8>>>(&mut c).await
                    }
                })
                .collect();
            for value in self.redis.trip("reading due buckets", commands).await? {
                out.push(value.unwrap_or_default());
            }
        }
        Ok(out)
    }

    /// The heads of the records at `keys` (one trip: `GETRANGE` of the
    /// header and the id, at most [`HEAD_AND_ID`] bytes, not the shingles);
    /// `None` for a record gone meanwhile.
    pub(super) async fn read_heads(
        &self,
        keys: &[String],
    ) -> Result<Vec<Option<RecordHead>>, BackendError> {
        let commands: Vec<_> = keys
            .iter()
            .map(|key| {
                let key = key.clone();
                move |mut c: Conn| async move {
                    let mut get = redis::cmd("GETRANGE");
                    get.arg(key).arg(0).arg(HEAD_AND_ID - 1);
                    get.query_async::<Vec<u8>>(&mut c).await
                }
            })
            .collect();
        let values = self.redis.trip("reading record heads", commands).await?;
        keys.iter()
            .zip(values)
            // A missing key reads as "".
            .map(|(key, bytes)| {
                (!bytes.is_empty())
                    .then(|| decode_head(&bytes).map_err(|e| corrupt(key, e)))
                    .transpose()
            })
            .collect()
    }

    /// `DUE_DROP` calls for the members of each due bucket in `drop`, with
    /// the bucket as the sweep `read` it (moved into the call, not copied:
    /// a bucket can be megabytes) and what it keeps of that.
    fn due_drop_calls(
        &self,
        drop: BTreeMap<(Due, u64), Vec<[u8; MEMBER]>>,
        mut read: HashMap<(Due, u64), Vec<u8>>,
    ) -> Vec<Call> {
        drop.into_iter()
            .filter(|(_, ms)| !ms.is_empty())
            .map(|((due, minute), ms)| {
                let keys = vec![self.keys.due_bucket(due, minute), self.keys.due_set(due)];
                let read = read.remove(&(due, minute)).unwrap_or_default();
                let dropped: std::collections::HashSet<&[u8]> =
                    ms.iter().map(|m| m.as_slice()).collect();
                let kept: Vec<u8> = read
                    .chunks_exact(MEMBER)
                    .filter(|m| !dropped.contains(m))
                    .flatten()
                    .copied()
                    .collect();
                let args = vec![minute.to_string().into_bytes(), read, kept, ms.concat()];
                script_call(&DUE_DROP, keys, args)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::redis::Redis;
    use crate::engine::{Engine, EngineParams};
    use crate::testkit::redis_cluster::RedisCluster;
    use std::sync::Arc;

    /// A collection `name` of a one-node Redis this test starts (kept
    /// running while the first value lives), or `None` (skipped) without
    /// `redis-server`.
    async fn single_node_index(
        engine: Arc<Engine>,
        name: &str,
    ) -> Option<(RedisCluster, RedisIndex)> {
        if !RedisCluster::available_or_skip("the tests that start a Redis") {
            return None;
        }
        let server = RedisCluster::start_single().expect("redis starts");
        let settings = crate::config::RedisSettings {
            nodes: server.urls(),
            key_prefix: "unit".into(),
            ..Default::default()
        };
        let index = RedisIndex::open(engine, Arc::new(Redis::new(settings)), name)
            .await
            .unwrap();
        Some((server, index))
    }

    async fn bucket(index: &RedisIndex, b: (Due, u64)) -> Option<Vec<u8>> {
        let mut get = redis::cmd("GET");
        get.arg(index.keys.due_bucket(b.0, b.1));
        index.redis.one("test", get).await.unwrap()
    }

    async fn minutes(index: &RedisIndex, due: Due) -> Vec<String> {
        let mut range = redis::cmd("ZRANGE");
        range.arg(index.keys.due_set(due)).arg(0).arg(-1);
        index.redis.one("test", range).await.unwrap()
    }

    async fn add(index: &RedisIndex, b: (Due, u64), ms: &[[u8; MEMBER]]) {
        let calls = index.due_add_calls(ms.iter().map(|m| (b, *m)));
        index.redis.calls("test", calls).await.unwrap();
    }

    async fn drop_members(
        index: &RedisIndex,
        b: (Due, u64),
        read: Option<Vec<u8>>,
        ms: &[[u8; MEMBER]],
    ) {
        let read: HashMap<(Due, u64), Vec<u8>> = read.map(|r| (b, r)).into_iter().collect();
        let calls = index.due_drop_calls(BTreeMap::from([(b, ms.to_vec())]), read);
        index.redis.calls("test", calls).await.unwrap();
    }

    /// A sweep whose expired records include one that will not decode
    /// deletes them all, removes the others' bucket entries, moves the
    /// document counter by all of them, and then reports the record.
    #[tokio::test]
    async fn a_sweep_reports_a_record_that_will_not_decode_after_the_others() {
        use crate::engine::{Clock, DocId, ManualClock, NewDoc, WriteMode};
        let clock = Arc::new(ManualClock::default());
        let params = EngineParams::default().validate().unwrap();
        let engine = Arc::new(Engine::with_clock(params, clock.clone()));
        let Some((_server, index)) = single_node_index(engine.clone(), "reçus").await else {
            return;
        };
        let expires = clock.now_ms() + 60_000;
        let texts = [
            "Zoë’s “café” bill came to £12 — paid in full on the Tuesday",
            "Der Bürgermeister öffnete die Straße am Montag früh für alle",
            "Ведущий объявил победителя конкурса в субботу вечером в зале",
        ];
        let docs = texts
            .iter()
            .enumerate()
            .map(|(i, text)| NewDoc {
                id: DocId::parse(&format!("doc-{i}")).unwrap(),
                doc: engine.prepare(text).unwrap(),
                metadata: None,
                expires_ms: Some(expires),
                text: None,
                created_ms: None,
            })
            .collect();
        for outcome in index.insert_many(docs, WriteMode::Create).await.unwrap() {
            outcome.unwrap();
        }
        // Bucket-hash fields of the collection (one a band key in use).
        let fields = || async {
            let mut keys = redis::cmd("KEYS");
            keys.arg(format!("{}:g:*", index.keys.base()));
            let keys: Vec<String> = index.redis.one("test", keys).await.unwrap();
            let mut n = 0;
            for k in keys {
                let mut len = redis::cmd("HLEN");
                len.arg(k);
                n += index.redis.one::<usize>("test", len).await.unwrap();
            }
            n
        };
        let bands = engine
            .band_keys(engine.prepare(texts[1]).unwrap().signature())
            .len();
        assert_eq!(fields().await, 3 * bands);
        // doc-1's record keeps its head and id, and loses its last bytes.
        let key = index.keys.record(iid("doc-1"));
        let mut get = redis::cmd("GET");
        get.arg(&key);
        let bytes: Vec<u8> = index.redis.one("test", get).await.unwrap();
        let mut set = redis::cmd("SET");
        set.arg(&key).arg(&bytes[..bytes.len() - 3]);
        let _: () = index.redis.one("test", set).await.unwrap();

        clock.advance(Duration::from_secs(120));
        let err = index.purge_expired().await.unwrap_err();
        assert!(err.to_string().contains(&key), "{err}");
        for i in 0..3 {
            let mut exists = redis::cmd("EXISTS");
            exists.arg(index.keys.record(iid(&format!("doc-{i}"))));
            assert_eq!(index.redis.one::<u64>("test", exists).await.unwrap(), 0);
        }
        assert_eq!(index.refresh_count().await.unwrap(), 0);
        // Only doc-1's band entries are left, and the next sweep has
        // nothing to do.
        assert_eq!(fields().await, bands);
        assert_eq!(index.purge_expired().await.unwrap(), 0);
    }

    /// The due-bucket scripts on a real Redis: a rewrite of what the sweep
    /// read keeps what was appended since; a bucket another sweep rewrote
    /// meanwhile is rebuilt member by member; every copy of a member goes;
    /// an emptied or missing bucket leaves its sorted set.
    #[tokio::test]
    async fn due_buckets_drop_exactly_the_members_they_are_told_to() {
        let engine = Arc::new(Engine::new(EngineParams::default().validate().unwrap()));
        let Some((_server, index)) = single_node_index(engine, "actualités").await else {
            return;
        };
        let [a, b, c, d] = [1u64, 2, 3, 4].map(|i| member(i << 40 | 0xabc, 7));
        let one = (Due::Own, 28_000_000);
        let other = (Due::Own, 28_000_001);
        add(&index, one, &[a, b, c]).await;
        add(&index, other, &[a]).await;
        assert_eq!(minutes(&index, Due::Own).await, ["28000000", "28000001"]);
        assert_eq!(bucket(&index, one).await, Some([a, b, c].concat()));

        // Read a b c; d appended since; a dropped: b c d.
        let read = bucket(&index, one).await;
        add(&index, one, &[d]).await;
        drop_members(&index, one, read, &[a]).await;
        assert_eq!(bucket(&index, one).await, Some([b, c, d].concat()));

        // Read b c d; another sweep drops b meanwhile; c dropped: d.
        let read = bucket(&index, one).await;
        drop_members(&index, one, None, &[b]).await;
        assert_eq!(bucket(&index, one).await, Some([c, d].concat()));
        drop_members(&index, one, read, &[c]).await;
        assert_eq!(bucket(&index, one).await, Some(d.to_vec()));

        // Every copy of a member goes (a write and a walk may both add it).
        add(&index, one, &[d, a, d]).await;
        let read = bucket(&index, one).await;
        drop_members(&index, one, read, &[d]).await;
        assert_eq!(bucket(&index, one).await, Some(a.to_vec()));

        // Emptied: the bucket and its minute go, the other minute stays.
        let read = bucket(&index, one).await;
        drop_members(&index, one, read, &[a]).await;
        assert_eq!(bucket(&index, one).await, None);
        assert_eq!(minutes(&index, Due::Own).await, ["28000001"]);

        // Missing (deleted meanwhile): its minute goes all the same.
        let mut del = redis::cmd("DEL");
        del.arg(index.keys.due_bucket(other.0, other.1));
        let _: i64 = index.redis.one("test", del).await.unwrap();
        drop_members(&index, other, None, &[a]).await;
        assert!(minutes(&index, Due::Own).await.is_empty());
    }
}
