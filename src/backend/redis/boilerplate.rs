//! Document frequency and registered templates on the redis backend
//! (issue 44), and what content scores need of them. The counts are this
//! node's, fed by the collection's log ([`super::df_log`]); the templates
//! are in Redis. Layout and round trips: docs/redis-layout.md, "Document
//! frequency and templates".
//!
//! **Counts.** `df(x)`, how many stored documents hold shingle `x`, and
//! `N`, the documents counted: exactly what the memory engine counts (every
//! stored record, expired ones until they are purged), looked up in this
//! node's copy after it has read the log to its end (in the same trip as
//! the templates' version).
//!
//! **Switching.** On: the node that switches counts every record before it
//! answers; the others when they learn it (the watch); each counts again
//! [`settle_delay`](super::passages::settle_delay) later, for writes of
//! nodes that learnt it later than they did (those were not logged). Off:
//! the counts dropped, the log stopped (and again after the same delay).
//!
//! **Templates.** A hash `id → JSON` and a version counter moved by every
//! change (both in the metadata's slot, read together by one script). A
//! node applies them to its engine when it reads them; every read of
//! frequencies (a content query, `doc_frequencies`) compares the version
//! with the one it applied and reads them again when it moved, and
//! [`RedisIndex::refresh_templates_if_changed`] does the same for a watch.

use super::{call, corrupt, script_call, BackendError, Call, RedisIndex, Script};
use crate::engine::{
    Classifier, ContentQuery, Edge, Engine, EngineError, Frequencies, Match, Record, Template,
};
use redis::Value;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, LazyLock};

static TPL_READ: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/tpl_read.lua")));
static TPL_PUT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/tpl_put.lua")));
static TPL_DEL: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/tpl_del.lua")));

/// The layout key's field of the release that kept counts in Redis hashes
/// (`df=1`: they are there). A node that opens such a layout deletes them.
const LEGACY_FIELD: &str = "df";

/// Whether a layout string says counts are kept in Redis hashes (the
/// layout before the log).
pub(super) fn layout_has_legacy_counts(meta: &str) -> bool {
    super::layout_flag(meta, LEGACY_FIELD)
}

/// What a query on content scores starts from: the rule at its instant
/// and this node's counts (looked up in place, as the memory engine's
/// queries do: no copy of the query's frequencies).
pub(super) type ContentStart = (Classifier, Arc<Frequencies>);

impl RedisIndex {
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The calls that bring this node's counts up to date, to put in a
    /// trip: the templates' version's `GET` first, then the log's new
    /// entries ([`Self::df_read_table`] reads their answers; every lookup
    /// after is local).
    pub(super) fn df_read_calls(&self) -> Vec<Call> {
        let mut get = redis::cmd("GET");
        get.arg(self.keys.templates_version());
        vec![call(get), self.df_follow_call()]
    }

    /// This node's counts once the answers of [`Self::df_read_calls`] are
    /// applied (the log's entries; the templates read again if their
    /// version moved).
    pub(super) async fn df_read_table(
        &self,
        values: Vec<Value>,
    ) -> Result<Arc<Frequencies>, BackendError> {
        let [version, entries]: [Value; 2] = values
            .try_into()
            .map_err(|_| BackendError::Internal("a frequency read answered a short list".into()))?;
        let version: Option<u64> = redis::from_redis_value(version)
            .map_err(|e| corrupt(&self.keys.templates_version(), e))?;
        let table = self.df_follow_answer(entries).await?;
        if version.unwrap_or(0) != self.templates_seen.load(Ordering::Acquire) {
            self.apply_templates().await?;
        }
        Ok(table)
    }

    /// This node's counts, up to date: one trip ([`Self::df_read_calls`]).
    async fn df_table(&self) -> Result<Arc<Frequencies>, BackendError> {
        let values = self
            .redis
            .calls("reading document frequencies", self.df_read_calls())
            .await?;
        self.df_read_table(values).await
    }

    /// Count document frequency on this node (every stored record, then the
    /// log) or stop (the counts dropped, the log deleted), and do it again
    /// after the settle delay for writes of nodes that learn it later.
    /// Idempotent, safe on two nodes at once.
    pub async fn set_boilerplate(&self, on: bool) -> Result<(), BackendError> {
        self.engine.set_boilerplate_flag(on);
        let epoch = self.df_epoch.fetch_add(1, Ordering::AcqRel) + 1;
        if on {
            self.df_rebuild().await?;
        } else {
            self.df_forget().await;
            self.df_stop_log().await?;
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
                later.df_rebuild().await
            } else {
                later.df_stop_log().await
            };
            if let Err(e) = done {
                tracing::warn!(keys = later.keys.base(), error = %e, on, "repeating the document frequency switch failed; switch it again to repair");
            }
        });
        Ok(())
    }

    /// Delete the counts of the layout that kept them in Redis hashes, and
    /// say so in the layout (`df=0`).
    pub(super) async fn drop_legacy_counts(&self) -> Result<(), BackendError> {
        let mut keys: Vec<String> = self.keys.df_keys().collect();
        keys.push(self.keys.df_docs());
        super::unlink_keys(&self.redis, &keys, "dropping document frequencies").await?;
        self.mark_layout(LEGACY_FIELD, false, "marking document frequency")
            .await?;
        tracing::info!(
            keys = self.keys.base(),
            "document frequency: the counts of the previous layout (Redis hashes) deleted; each node counts from the log now"
        );
        Ok(())
    }

    /// The document frequency of each of `sorted` (sorted, distinct
    /// shingles), and N: one trip (0s while counts are off, no trip).
    pub async fn doc_frequencies(&self, sorted: &[u32]) -> Result<(Vec<u32>, usize), BackendError> {
        if !self.engine.boilerplate_on() {
            return Ok((vec![0; sorted.len()], 0));
        }
        let table = self.df_table().await?;
        let mut out = Vec::new();
        table.lookup_sorted(sorted, &mut out);
        Ok((out, table.docs()))
    }

    /// Every shingle held by at least `at` documents (at most `max`, the
    /// most common first, then by shingle), and the distinct shingles
    /// counted: from this node's counts, once it has read the log.
    pub async fn common_shingles(
        &self,
        at: u32,
        max: usize,
    ) -> Result<(Vec<(u32, u32)>, usize), BackendError> {
        if !self.engine.boilerplate_on() {
            return Ok((Vec::new(), 0));
        }
        let table = self.df_follow().await?;
        let at = at.max(1);
        let (mut all, distinct) =
            tokio::task::spawn_blocking(move || (table.at_least(at), table.distinct()))
                .await
                .map_err(|e| BackendError::Internal(format!("reading common shingles: {e}")))?;
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

    /// The rule now and this node's counts, for a query on content
    /// scores: 1 trip (the log; 2 when the templates moved).
    pub(super) async fn content_start(&self) -> Result<ContentStart, BackendError> {
        if !self.engine.boilerplate_on() {
            return Err(EngineError::BoilerplateOff.into());
        }
        Ok(self.start_with(self.df_table().await?))
    }

    /// [`Self::content_start`] from the answers of [`Self::df_read_calls`]
    /// put in the caller's trip.
    pub(super) async fn content_start_from(
        &self,
        values: Vec<Value>,
    ) -> Result<ContentStart, BackendError> {
        Ok(self.start_with(self.df_read_table(values).await?))
    }

    /// The rule at this instant (N from `table`) and `table`.
    fn start_with(&self, table: Arc<Frequencies>) -> ContentStart {
        (self.engine.classifier_with(table.docs()), table)
    }

    /// Whether this node has its counts (built, following the log).
    pub(super) fn counts_built(&self) -> bool {
        self.df_tail.table().is_some()
    }

    /// [`Self::content_start`] when the log was read just before (in the
    /// caller's trip): the lookups are this node's, no trip.
    pub(super) fn content_start_read(&self) -> Result<ContentStart, BackendError> {
        let table = self.df_tail.table().ok_or(EngineError::BoilerplateOff)?;
        Ok(self.start_with(table))
    }

    /// Add the content scores to matches found on raw scores when the
    /// collection counts document frequency (the memory engine's
    /// `attach_content`): `records` holds the verified versions; one trip
    /// (the log read to its end), then this node's counts looked up in place.
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
        if matched.is_empty() {
            return Ok(());
        }
        let (classifier, table) = self.content_start().await?;
        let content = ContentQuery {
            classifier,
            q_df: Default::default(),
            df: &*table,
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
        self.df_tail.recounting.load(Ordering::Relaxed)
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
