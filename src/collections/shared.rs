//! Named collections with the redis backend: the catalog lives in Redis,
//! so every neardup node serves the same collections.
//!
//! The catalog is one hash, `{prefix}:catalog`: field = the collection's
//! name, value = its entry (JSON: settings, creation time and an
//! *incarnation*, a random tag in every key of the collection, so a name
//! deleted and created again never meets the old collection's keys).
//! Creating, changing and deleting are single scripts on that hash (the
//! commit points); the node that made the change applies it at once, the
//! others when they next read the catalog (every
//! `storage.redis.watch_interval_ms`, and on a request naming a collection
//! they do not know yet). A deleted collection's keys are removed in the
//! background after two watch intervals, when every node has stopped
//! writing to them. The `default` collection is not in the catalog: its
//! settings are the configuration's, as with the memory backend.

use super::{Collection, CollectionError, CollectionName, CollectionSettings, Collections};
use crate::backend::redis::{call, Redis, Script};
use crate::backend::{Backend, BackendError, RedisIndex};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

/// The catalog entry format.
const ENTRY_VERSION: u32 = 1;

/// A named collection as the catalog holds it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Entry {
    version: u32,
    created_ms: u64,
    /// Random, hex: part of every key of this incarnation of the name.
    incarnation: String,
    settings: CollectionSettings,
}

/// Add an entry unless the name is taken or the catalog is full.
/// KEYS[1] the catalog; ARGV[1] the name, ARGV[2] the entry, ARGV[3] the
/// most named collections. Returns {'created'}, {'exists', entry} or {'full'}.
static CREATE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then return {'exists', cur} end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return {'full'} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return {'created'}
",
    )
});

/// Replace (ARGV[3] an entry) or delete (ARGV[3] '') the entry of ARGV[1]
/// if it is still the incarnation ARGV[2]. KEYS[1] the catalog. Returns 1
/// if it did.
static SWAP: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return 0 end
if cjson.decode(cur)['incarnation'] ~= ARGV[2] then return 0 end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
return 1
",
    )
});

fn catalog_key(redis: &Redis) -> String {
    format!("{{{}}}:catalog", redis.settings.key_prefix)
}

/// The name a collection's keys carry: `name.incarnation`.
pub(super) fn storage_name(name: &CollectionName, incarnation: &str) -> String {
    if incarnation.is_empty() {
        name.as_str().to_owned()
    } else {
        format!("{}.{incarnation}", name.as_str())
    }
}

fn new_incarnation() -> String {
    use std::hash::BuildHasher;
    let state = std::collections::hash_map::RandomState::new();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:012x}", state.hash_one(nanos) & 0xffff_ffff_ffff)
}

fn decode(name: &str, raw: &str) -> Result<Entry, BackendError> {
    let e: Entry = serde_json::from_str(raw).map_err(|e| {
        BackendError::Internal(format!("catalog entry of collection {name:?}: {e}"))
    })?;
    if e.version != ENTRY_VERSION {
        return Err(BackendError::Internal(format!(
            "catalog entry of collection {name:?} has format {}, this release reads {ENTRY_VERSION}",
            e.version
        )));
    }
    Ok(e)
}

impl Collections {
    fn shared(&self) -> &Arc<Redis> {
        self.redis.as_ref().expect("the redis backend")
    }

    /// The catalog, name → entry (one trip). An entry that cannot be read
    /// is logged and skipped (its collection is not served here).
    async fn read_catalog(&self) -> Result<BTreeMap<String, Entry>, BackendError> {
        let redis = self.shared();
        let mut all = redis::cmd("HGETALL");
        all.arg(catalog_key(redis));
        let raw: Vec<(String, String)> = redis.one("reading the collection catalog", all).await?;
        let mut out = BTreeMap::new();
        for (name, value) in raw {
            match decode(&name, &value) {
                Ok(e) => {
                    out.insert(name, e);
                }
                Err(e) => {
                    tracing::error!(collection = %name, error = %e, "unreadable catalog entry; the collection is not served")
                }
            }
        }
        Ok(out)
    }

    /// A collection of `entry`, opened in Redis.
    async fn open_entry(
        &self,
        name: CollectionName,
        entry: &Entry,
    ) -> Result<Collection, BackendError> {
        let valid = entry.settings.validate().map_err(|e| {
            BackendError::Internal(format!(
                "catalog entry of collection {name:?} holds invalid settings: {e}"
            ))
        })?;
        let dir = super::catalog::root(&self.data_dir).join(name.as_str());
        let mut c = self.build(
            name.clone(),
            dir,
            entry.settings.clone(),
            entry.created_ms,
            Some(valid),
        );
        c.incarnation = entry.incarnation.clone();
        let index = RedisIndex::open(
            Arc::clone(&c.engine),
            Arc::clone(self.shared()),
            &storage_name(&name, &entry.incarnation),
        )
        .await?;
        index.set_store_text(entry.settings.store_text);
        let _ = c.backend.set(Backend::Redis(index));
        Ok(c)
    }

    /// Put `c` in the map unless it already holds this incarnation; the
    /// collection now under the name.
    fn adopt(&self, c: Collection) -> Arc<Collection> {
        let mut map = self.map.write().expect("map lock");
        if let Some(cur) = map.get(c.name.as_str()) {
            if cur.incarnation == c.incarnation {
                return Arc::clone(cur);
            }
        }
        let c = Arc::new(c);
        map.insert(c.name.as_str().to_owned(), Arc::clone(&c));
        c
    }

    /// Apply `entry`'s changeable settings (retention, store_text) to `c`.
    fn apply(c: &Collection, entry: &Entry) {
        let mut settings = c.settings.write().expect("settings lock");
        if *settings == entry.settings {
            return;
        }
        *settings = entry.settings.clone();
        c.engine.set_retention(entry.settings.retention.ttl());
        if let Some(Backend::Redis(index)) = c.backend() {
            index.set_store_text(entry.settings.store_text);
        }
        tracing::info!(collection = %c.name, ttl_secs = entry.settings.retention.ttl_secs, store_text = entry.settings.store_text, "collection settings changed on another node");
    }

    /// Bring this node's collections in line with the catalog: open the
    /// new ones, apply changed settings, drop the deleted ones.
    pub async fn sync_catalog(&self) -> Result<(), BackendError> {
        if self.redis.is_none() {
            return Ok(());
        }
        let epoch = self.catalog_epoch.load(Ordering::Acquire);
        let catalog = self.read_catalog().await?;
        for (name, entry) in &catalog {
            let Ok(parsed) = CollectionName::parse(name) else {
                continue;
            };
            match self.get(name) {
                Some(c) if c.incarnation == entry.incarnation => Self::apply(&c, entry),
                _ => match self.open_entry(parsed, entry).await {
                    Ok(c) => {
                        let c = self.adopt(c);
                        tracing::info!(collection = %c.name, "collection opened (created on another node)");
                    }
                    Err(e) => {
                        tracing::warn!(collection = %name, error = %e, "cannot open a collection of the catalog; retried")
                    }
                },
            }
        }
        let mut map = self.map.write().expect("map lock");
        if self.catalog_epoch.load(Ordering::Acquire) != epoch {
            // This node changed the catalog since it was read.
            return Ok(());
        }
        map.retain(|name, c| {
            let keep = c.name.is_default()
                || catalog
                    .get(name)
                    .is_some_and(|e| e.incarnation == c.incarnation);
            if !keep {
                tracing::info!(collection = %name, "collection deleted on another node");
                self.dropped
                    .lock()
                    .expect("dropped lock")
                    .push(name.clone());
            }
            keep
        });
        Ok(())
    }

    /// The collection `name` after reading its catalog entry (a request
    /// naming a collection this node has not seen yet).
    pub async fn find(&self, name: &str) -> Result<Option<Arc<Collection>>, BackendError> {
        if let Some(c) = self.get(name) {
            return Ok(Some(c));
        }
        let (Some(redis), Ok(parsed)) = (self.redis.as_ref(), CollectionName::parse(name)) else {
            return Ok(None);
        };
        if parsed.is_default() {
            return Ok(None);
        }
        let mut get = redis::cmd("HGET");
        get.arg(catalog_key(redis)).arg(name);
        let raw: Option<String> = redis.one("reading the collection catalog", get).await?;
        let Some(raw) = raw else { return Ok(None) };
        let entry = decode(name, &raw)?;
        let c = self.open_entry(parsed, &entry).await?;
        Ok(Some(self.adopt(c)))
    }

    /// `PUT /collections/{name}` with the redis backend (blocking).
    pub(super) fn create_shared(
        &self,
        name: CollectionName,
        settings: CollectionSettings,
    ) -> Result<(Arc<Collection>, bool), CollectionError> {
        let handle = tokio::runtime::Handle::current();
        let redis = Arc::clone(self.shared());
        let entry = Entry {
            version: ENTRY_VERSION,
            created_ms: self.clock.now_ms(),
            incarnation: new_incarnation(),
            settings: settings.clone(),
        };
        let json = serde_json::to_string(&entry).expect("an entry serializes");
        let named_max = self.max.saturating_sub(1);
        let key = catalog_key(&redis);
        let answer: Vec<String> = handle.block_on(async {
            let inv = call_script(
                &CREATE,
                key,
                vec![name.as_str().into(), json, named_max.to_string()],
            );
            let mut out = redis.calls("creating a collection", vec![inv]).await?;
            redis::from_redis_value(out.pop().expect("one answer"))
                .map_err(|e| BackendError::Internal(format!("catalog script answer: {e}")))
        })?;
        match answer.first().map(String::as_str) {
            Some("created") => {
                self.catalog_epoch.fetch_add(1, Ordering::AcqRel);
                let c = handle.block_on(self.open_entry(name.clone(), &entry))?;
                let c = self.adopt(c);
                tracing::info!(collection = %name, incarnation = %entry.incarnation, "collection created in redis");
                Ok((c, true))
            }
            Some("exists") => {
                let existing = decode(name.as_str(), answer.get(1).map_or("", String::as_str))?;
                if let Some((key, existing_value, requested)) =
                    existing.settings.first_difference(&settings)
                {
                    return Err(CollectionError::Conflict {
                        name: name.to_string(),
                        key,
                        existing: existing_value.to_string(),
                        requested: requested.to_string(),
                    });
                }
                let c = match self.get(name.as_str()) {
                    Some(c) if c.incarnation == existing.incarnation => c,
                    _ => self.adopt(handle.block_on(self.open_entry(name, &existing))?),
                };
                Ok((c, false))
            }
            Some("full") => Err(CollectionError::TooMany(self.max)),
            other => Err(BackendError::Internal(format!("catalog script said {other:?}")).into()),
        }
    }

    /// Replace or delete (`settings` None) `c`'s catalog entry if it is
    /// still `c`'s incarnation (blocking); false if it was not.
    fn swap_entry(
        &self,
        c: &Collection,
        settings: Option<&CollectionSettings>,
    ) -> Result<bool, CollectionError> {
        let redis = Arc::clone(self.shared());
        let value = match settings {
            Some(s) => serde_json::to_string(&Entry {
                version: ENTRY_VERSION,
                created_ms: c.created_ms,
                incarnation: c.incarnation.clone(),
                settings: s.clone(),
            })
            .expect("an entry serializes"),
            None => String::new(),
        };
        let inv = call_script(
            &SWAP,
            catalog_key(&redis),
            vec![c.name.as_str().into(), c.incarnation.clone(), value],
        );
        let done: i64 = tokio::runtime::Handle::current().block_on(async {
            let mut out = redis
                .calls("changing the collection catalog", vec![inv])
                .await?;
            redis::from_redis_value(out.pop().expect("one answer"))
                .map_err(|e| BackendError::Internal(format!("catalog script answer: {e}")))
        })?;
        Ok(done == 1)
    }

    /// Block until every node's watch has read the catalog since a change
    /// (two watch intervals): a change answers once every node applies it.
    fn wait_for_every_node(&self) {
        let interval = self.shared().settings.watch_interval_ms;
        std::thread::sleep(Duration::from_millis(2 * interval + 50));
    }

    /// `PATCH` with the redis backend (blocking): the catalog entry first
    /// (the commit point), then this node's copy; answered once every node
    /// has it. What expired under the old retention is purged first, so a
    /// longer one cannot bring it back.
    pub(super) fn change_shared(
        &self,
        c: &Arc<Collection>,
        settings: CollectionSettings,
    ) -> Result<(), CollectionError> {
        if settings.retention != c.settings().retention {
            if let Some(Backend::Redis(index)) = c.backend() {
                let purged = tokio::runtime::Handle::current().block_on(index.purge_expired())?;
                tracing::info!(collection = %c.name, documents = purged, "expired documents purged before a retention change");
            }
        }
        if !self.swap_entry(c, Some(&settings))? {
            self.map.write().expect("map lock").remove(c.name.as_str());
            return Err(CollectionError::NotFound(c.name.to_string()));
        }
        Self::apply(
            c,
            &Entry {
                version: ENTRY_VERSION,
                created_ms: c.created_ms,
                incarnation: c.incarnation.clone(),
                settings,
            },
        );
        self.wait_for_every_node();
        Ok(())
    }

    /// `DELETE` with the redis backend (blocking): the catalog entry goes
    /// (the commit point), then this node's copy; the keys are removed in
    /// the background once every node has seen the delete.
    pub(super) fn delete_shared(&self, name: &str) -> Result<Arc<Collection>, CollectionError> {
        let handle = tokio::runtime::Handle::current();
        let c = match self.get(name) {
            Some(c) => c,
            None => handle
                .block_on(self.find(name))?
                .ok_or_else(|| CollectionError::NotFound(name.to_owned()))?,
        };
        if !self.swap_entry(&c, None)? {
            self.map.write().expect("map lock").remove(name);
            return Err(CollectionError::NotFound(name.to_owned()));
        }
        self.catalog_epoch.fetch_add(1, Ordering::AcqRel);
        self.map.write().expect("map lock").remove(name);
        self.wait_for_every_node();
        let redis = Arc::clone(self.shared());
        let base = format!(
            "{}:{}",
            redis.settings.key_prefix,
            storage_name(&c.name, &c.incarnation)
        );
        // Every node stopped using the keys when the delete answered; a
        // request that had started before may still be writing.
        let wait = Duration::from_millis(redis.settings.command_timeout_ms + 500);
        let collection = c.name.to_string();
        handle.spawn(async move {
            tokio::time::sleep(wait).await;
            match remove_keys(&redis, &base).await {
                Ok(n) => tracing::info!(collection, keys = n, "a deleted collection's keys removed from redis"),
                Err(e) => tracing::error!(collection, error = %e, "removing a deleted collection's keys failed; they stay in redis (they are never read again)"),
            }
        });
        tracing::info!(collection = %c.name, "collection deleted from redis");
        Ok(c)
    }
}

/// A script call on one key with string arguments.
fn call_script(
    script: &'static Script,
    key: String,
    args: Vec<String>,
) -> crate::backend::redis::Call {
    crate::backend::redis::script_call(
        script,
        vec![key],
        args.into_iter().map(String::into_bytes).collect(),
    )
}

/// Remove every key of the collection whose keys start with `base`
/// (`base:…` and `{base}:…`); how many.
async fn remove_keys(redis: &Redis, base: &str) -> Result<usize, BackendError> {
    let mut keys = redis.scan_all(&format!("{base}:*")).await?;
    keys.extend(redis.scan_all(&format!("{{{base}}}:*")).await?);
    let n = keys.len();
    for chunk in keys.chunks(1000) {
        let calls = chunk
            .iter()
            .map(|k| {
                let mut unlink = redis::cmd("UNLINK");
                unlink.arg(k);
                call(unlink)
            })
            .collect();
        redis
            .calls("removing a deleted collection's keys", calls)
            .await?;
    }
    Ok(n)
}
