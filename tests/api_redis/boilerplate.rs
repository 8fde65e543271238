//! Document frequency, templates and content scores on the redis backend
//! (issue 44; docs/redis-layout.md, "Document frequency and templates"),
//! driven through the backend's own calls: two nodes (an engine and a
//! connection each) over the shared Redis Cluster, writes on one and reads
//! on the other. Every answer is checked against the test's own brute
//! force: document frequencies counted from the texts it stored, the
//! boilerplate set, content Jaccard and containment computed here.

use crate::helpers::shared_cluster;
use neardup::backend::redis::{Redis, RedisIndex};
use neardup::config::RedisSettings;
use neardup::engine::{
    BoilerplateParams, By, DocId, Engine, EngineError, EngineParams, ManualClock, Measure, NewDoc,
    Query, Score, Template, Threshold, UniqueOutcome, WriteMode,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

struct Node {
    engine: Arc<Engine>,
    index: RedisIndex,
}

fn rule() -> BoilerplateParams {
    BoilerplateParams {
        enabled: true,
        share: 0.2,
        min_docs: 3,
        min_collection_docs: 10,
    }
}

fn params(counting: bool) -> EngineParams {
    let mut p = EngineParams::default();
    p.index.passage_index = true;
    p.index.boilerplate = BoilerplateParams {
        enabled: counting,
        ..rule()
    };
    p
}

fn fresh_prefix() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "boilerplate-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

async fn node(prefix: &str, p: EngineParams, clock: &Arc<ManualClock>) -> Node {
    let clock: Arc<dyn neardup::engine::Clock> = Arc::clone(clock) as _;
    let engine = Arc::new(Engine::with_clock(p.validate().unwrap(), clock));
    let redis = Arc::new(Redis::new(RedisSettings {
        nodes: shared_cluster().urls(),
        key_prefix: prefix.to_owned(),
        expected_documents: 2_000,
        watch_interval_ms: 100,
        command_timeout_ms: 2_000,
        ..Default::default()
    }));
    let index = RedisIndex::open(Arc::clone(&engine), redis, "default")
        .await
        .unwrap();
    Node { engine, index }
}

async fn two_nodes(p: EngineParams) -> (Node, Node, Arc<ManualClock>) {
    let prefix = fresh_prefix();
    let clock = Arc::new(ManualClock::default());
    let a = node(&prefix, p.clone(), &clock).await;
    let b = node(&prefix, p, &clock).await;
    (a, b, clock)
}

/// `n` words drawn from a vocabulary of 5,000 (seeded).
fn words(seed: u64, n: usize) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| format!("w{}", rng.gen_range(0..5_000u32)))
        .collect()
}

fn text(seed: u64, n: usize) -> String {
    words(seed, n).join(" ")
}

fn new_doc(engine: &Engine, id: &str, text: &str) -> NewDoc {
    NewDoc {
        id: DocId::parse(id).unwrap(),
        doc: engine.prepare(text).unwrap(),
        metadata: None,
        expires_ms: None,
        text: None,
        created_ms: None,
    }
}

fn shingles(engine: &Engine, text: &str) -> Vec<u32> {
    engine.prepare(text).unwrap().shingles().to_vec()
}

fn threshold(t: f64, measure: Measure, score: Score) -> Threshold {
    Engine::new(EngineParams::default().validate().unwrap())
        .threshold_for(measure, score, Some(t))
        .unwrap()
}

fn content_query(t: f64, measure: Measure) -> Query {
    Query::new(threshold(t, measure, Score::Content), 1_000)
        .measure(measure)
        .score(Score::Content)
}

/// What the test stored: id → shingles (expired documents stay until purged).
#[derive(Default)]
struct Model(BTreeMap<String, Vec<u32>>);

impl Model {
    fn df(&self) -> HashMap<u32, u32> {
        let mut df = HashMap::new();
        for s in self.0.values() {
            for &x in s {
                *df.entry(x).or_insert(0) += 1;
            }
        }
        df
    }

    /// The boilerplate set by the rule (and the templates' shingles).
    fn boilerplate(&self, templates: &HashSet<u32>) -> HashSet<u32> {
        let n = self.0.len();
        let df = self.df();
        let r = rule();
        let mut out: HashSet<u32> = templates.clone();
        if n >= r.min_collection_docs {
            let at = ((r.share * n as f64) - 1e-9).ceil().max(r.min_docs as f64) as u32;
            out.extend(df.iter().filter(|(_, &c)| c >= at).map(|(&x, _)| x));
        }
        out
    }
}

/// (content Jaccard, |Qc ∩ Dc| / |Qc|, |Qc ∩ Dc| / |Dc|) computed here.
fn content_scores(q: &[u32], d: &[u32], bp: &HashSet<u32>) -> (f64, f64, f64) {
    let qc: BTreeSet<u32> = q.iter().copied().filter(|x| !bp.contains(x)).collect();
    let dc: BTreeSet<u32> = d.iter().copied().filter(|x| !bp.contains(x)).collect();
    let shared = qc.intersection(&dc).count();
    let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    (
        ratio(shared, qc.len() + dc.len() - shared),
        ratio(shared, qc.len()),
        ratio(shared, dc.len()),
    )
}

/// Store `t` under `id` in the model, its shingles among those `seen`.
fn remember(model: &mut Model, seen: &mut BTreeSet<u32>, engine: &Engine, id: &str, t: &str) {
    let s = shingles(engine, t);
    seen.extend(s.iter().copied());
    model.0.insert(id.to_owned(), s);
}

/// Every shingle the model ever held or `extra` names, sorted.
fn universe(seen: &BTreeSet<u32>) -> Vec<u32> {
    seen.iter().copied().collect()
}

/// The frequencies in Redis (read on `node`) equal the model's, for every
/// shingle ever stored; N too; and `common_shingles` lists exactly the
/// counts at or above 2, with the distinct total.
async fn assert_exact(node: &Node, model: &Model, seen: &BTreeSet<u32>, when: &str) {
    let all = universe(seen);
    let (counts, n) = node.index.doc_frequencies(&all).await.unwrap();
    let df = model.df();
    let mut wrong = Vec::new();
    for (x, c) in all.iter().zip(&counts) {
        let want = df.get(x).copied().unwrap_or(0);
        if *c != want {
            wrong.push((*x, *c, want));
        }
    }
    assert!(
        wrong.is_empty(),
        "{when}: {} of {} counts differ (shingle, redis, brute force): {:?}",
        wrong.len(),
        all.len(),
        &wrong[..wrong.len().min(10)]
    );
    assert_eq!(n, model.0.len(), "{when}: N");
    let (common, distinct) = node.index.common_shingles(2, usize::MAX).await.unwrap();
    assert_eq!(distinct, df.len(), "{when}: distinct shingles");
    let mut want: Vec<(u32, u32)> = df
        .iter()
        .filter(|(_, &c)| c >= 2)
        .map(|(&x, &c)| (x, c))
        .collect();
    want.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    assert_eq!(common, want, "{when}: common shingles");
}

async fn layout(node: &Node) -> String {
    let mut get = redis::cmd("GET");
    get.arg(node.index.keys().meta());
    let v: Option<String> = node.index.redis().one("test", get).await.unwrap();
    v.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn document_frequency_is_exact_through_writes_replaces_deletes_expiry_and_recounts() {
    let (a, b, clock) = two_nodes(params(true)).await;
    assert!(!layout(&a).await.contains("df="), "{}", layout(&a).await);
    let mut model = Model::default();
    let mut seen = BTreeSet::new();
    let footer = words(7, 40);
    let body = |seed: u64| [words(seed, 60), footer.clone()].concat().join(" ");

    // A batch on a (a repeated id: written in a later wave).
    let mut batch = Vec::new();
    for i in 0..20u64 {
        batch.push(new_doc(&a.engine, &format!("d{i}"), &body(100 + i)));
        remember(
            &mut model,
            &mut seen,
            &a.engine,
            &format!("d{i}"),
            &body(100 + i),
        );
    }
    batch.push(new_doc(&a.engine, "d3", &body(999)));
    remember(&mut model, &mut seen, &a.engine, "d3", &body(999));
    for r in a.index.insert_many(batch, WriteMode::Upsert).await.unwrap() {
        r.unwrap();
    }
    assert_exact(&b, &model, &seen, "after a batch").await;

    // Single writes, replaces on the other node, a refused create.
    for i in 20..26u64 {
        let t = body(100 + i);
        a.index
            .insert(new_doc(&a.engine, &format!("d{i}"), &t), WriteMode::Create)
            .await
            .unwrap();
        remember(&mut model, &mut seen, &a.engine, &format!("d{i}"), &t);
    }
    for i in [1u64, 5, 21] {
        let t = body(500 + i);
        b.index
            .insert(new_doc(&b.engine, &format!("d{i}"), &t), WriteMode::Upsert)
            .await
            .unwrap();
        remember(&mut model, &mut seen, &b.engine, &format!("d{i}"), &t);
    }
    let refused = b
        .index
        .insert(new_doc(&b.engine, "d2", &body(4_242)), WriteMode::Create)
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            neardup::backend::BackendError::Engine(EngineError::AlreadyExists(_))
        ),
        "{refused:?}"
    );
    seen.extend(shingles(&b.engine, &body(4_242)));
    // The same text written again: replaced, counted once.
    b.index
        .insert(new_doc(&b.engine, "d4", &body(104)), WriteMode::Upsert)
        .await
        .unwrap();
    assert_exact(&a, &model, &seen, "after replaces and a refused create").await;

    // Deletes (one of an id that is not there).
    for id in ["d0", "d7", "d21"] {
        assert!(a.index.remove(id).await.unwrap());
        model.0.remove(id);
    }
    assert!(!b.index.remove("d0").await.unwrap());
    assert_exact(&b, &model, &seen, "after deletes").await;

    // if_unique: a refused duplicate counts nothing, a stored one counts.
    let dup = b
        .index
        .insert_if_unique(
            new_doc(&b.engine, "u1", &body(110)),
            Query::new(threshold(0.8, Measure::Jaccard, Score::Raw), 10),
        )
        .await
        .unwrap();
    assert!(matches!(dup, UniqueOutcome::Duplicate(_)), "{dup:?}");
    let fresh = text(31_337, 80);
    let stored = b
        .index
        .insert_if_unique(
            new_doc(&b.engine, "u2", &fresh),
            Query::new(threshold(0.8, Measure::Jaccard, Score::Raw), 10),
        )
        .await
        .unwrap();
    assert!(matches!(stored, UniqueOutcome::Inserted(_)));
    remember(&mut model, &mut seen, &b.engine, "u2", &fresh);
    assert_exact(&a, &model, &seen, "after if_unique writes").await;

    // Expiry: counted until purged; one replaced while expired (created
    // over an expired record), the others purged by the sweep.
    for i in 0..3u64 {
        let t = text(800 + i, 70);
        let mut d = new_doc(&a.engine, &format!("e{i}"), &t);
        d.expires_ms = Some(a.engine.now_ms() + 60_000);
        a.index.insert(d, WriteMode::Create).await.unwrap();
        remember(&mut model, &mut seen, &a.engine, &format!("e{i}"), &t);
    }
    clock.advance(Duration::from_secs(120));
    assert_exact(&b, &model, &seen, "expired, not yet purged").await;
    let again = text(900, 70);
    b.index
        .insert(new_doc(&b.engine, "e2", &again), WriteMode::Create)
        .await
        .unwrap();
    remember(&mut model, &mut seen, &b.engine, "e2", &again);
    assert_eq!(b.index.purge_expired().await.unwrap(), 2);
    model.0.remove("e0");
    model.0.remove("e1");
    assert_exact(&a, &model, &seen, "after the sweep").await;

    // Drift (a log entry for a version no record holds: a write whose
    // commit failed after its entry was appended, here made by hand) is
    // seen by both nodes, and repaired by switching off and on: a recount.
    let some = model.0["d9"][0];
    log_by_hand(&a, 0xdead, 1, &[some]).await;
    let (counts, _) = b.index.doc_frequencies(&[some]).await.unwrap();
    assert_eq!(counts, [model.df()[&some] + 1], "the drift reached b");
    a.index.set_boilerplate(false).await.unwrap();
    // b learns the switch (the catalog's watch sets the flag).
    b.engine.set_boilerplate_flag(false);
    b.index.follow_counts().await.unwrap();
    let (counts, n) = b.index.doc_frequencies(&universe(&seen)).await.unwrap();
    assert!(counts.iter().all(|&c| c == 0) && n == 0);
    assert_eq!(
        b.index.boilerplate_stats()["node_bytes"],
        0,
        "counts dropped"
    );
    a.index.set_boilerplate(true).await.unwrap();
    b.engine.set_boilerplate_flag(true);
    assert_exact(
        &a,
        &model,
        &seen,
        "after a recount (the node that switched)",
    )
    .await;
    assert_exact(
        &b,
        &model,
        &seen,
        "after a recount (the node that learnt it)",
    )
    .await;
    // The repeat a settle delay later (for nodes that learn late) recounts
    // again: still exact.
    tokio::time::sleep(Duration::from_millis(2_600)).await;
    assert_exact(&b, &model, &seen, "after the repeated recount").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_opens_a_collection_written_without_counts_recounts_it() {
    let prefix = fresh_prefix();
    let clock = Arc::new(ManualClock::default());
    let off = node(&prefix, params(false), &clock).await;
    let mut model = Model::default();
    let mut seen = BTreeSet::new();
    for i in 0..15u64 {
        let t = text(2_000 + i, 50);
        off.index
            .insert(
                new_doc(&off.engine, &format!("x{i}"), &t),
                WriteMode::Create,
            )
            .await
            .unwrap();
        let s = shingles(&off.engine, &t);
        seen.extend(s.iter().copied());
        model.0.insert(format!("x{i}"), s);
    }
    let on = node(&prefix, params(true), &clock).await;
    assert_exact(&on, &model, &seen, "counted at open").await;
    // Then it follows writes of the node that does not count… which does
    // not log them: it counts only when it learns the switch (the watch),
    // and then every node counts its records again after the settle delay.
    off.engine.set_boilerplate_flag(true);
    let t = text(2_100, 50);
    off.index
        .insert(new_doc(&off.engine, "x100", &t), WriteMode::Create)
        .await
        .unwrap();
    seen.extend(shingles(&off.engine, &t));
    model.0.insert("x100".into(), shingles(&off.engine, &t));
    assert_exact(&on, &model, &seen, "a write logged by the other node").await;
    // The node that learnt the switch counts at its first read (before its
    // watch would).
    assert_exact(&off, &model, &seen, "the node that learnt the switch").await;
}

/// Append a log entry by hand: version (`iid`, `gen`) stored with
/// `shingles` (docs/redis-layout.md: the entry's format).
async fn log_by_hand(node: &Node, iid: u64, gen: u32, shingles: &[u32]) {
    let mut batch = vec![1u8, 1u8];
    batch.extend_from_slice(&iid.to_le_bytes());
    batch.extend_from_slice(&gen.to_le_bytes());
    batch.extend_from_slice(&(shingles.len() as u32).to_le_bytes());
    for x in shingles {
        batch.extend_from_slice(&x.to_le_bytes());
    }
    append_by_hand(node, &batch).await;
}

/// Append an entry with `batch` to the log, numbered as `df_log.lua` does.
async fn append_by_hand(node: &Node, batch: &[u8]) {
    let keys = node.index.keys();
    let mut incr = redis::cmd("INCR");
    incr.arg(keys.df_seq());
    let seq: u64 = node.index.redis().one("test", incr).await.unwrap();
    let mut xadd = redis::cmd("XADD");
    xadd.arg(keys.df_log())
        .arg("*")
        .arg("s")
        .arg(seq)
        .arg("d")
        .arg(batch);
    let _: String = node.index.redis().one("test", xadd).await.unwrap();
}

/// A node that missed the counts switched off and on (writes meanwhile were
/// not logged) finds the log's sequence broken and counts every record
/// again; so does one whose log entries were trimmed before it read them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_missed_entries_of_the_log_counts_again() {
    let (a, b, _) = two_nodes(params(true)).await;
    let mut model = Model::default();
    let mut seen = BTreeSet::new();
    let write = |model: &mut Model, seen: &mut BTreeSet<u32>, node: &Node, id: &str, seed| {
        let t = text(seed, 40);
        remember(model, seen, &node.engine, id, &t);
        new_doc(&node.engine, id, &t)
    };
    let d = write(&mut model, &mut seen, &a, "m0", 1);
    a.index.insert(d, WriteMode::Create).await.unwrap();
    assert_exact(&b, &model, &seen, "b follows").await;
    let rebuilds = || {
        b.index
            .redis()
            .counters
            .df_log_rebuilds
            .load(Ordering::Relaxed)
    };
    let before = rebuilds();
    // Off and on on a, between two of b's reads: a write while off is not
    // logged, and there is no entry after the switch on.
    a.index.set_boilerplate(false).await.unwrap();
    let d = write(&mut model, &mut seen, &a, "m1", 2);
    a.index.insert(d, WriteMode::Create).await.unwrap();
    assert!(a.index.remove("m0").await.unwrap());
    model.0.remove("m0");
    a.index.set_boilerplate(true).await.unwrap();
    assert_exact(&b, &model, &seen, "after a switch b missed").await;
    assert_eq!(rebuilds(), before + 1, "b counted again");
    // Entries b has not read, trimmed (here by hand, as the window would).
    let d = write(&mut model, &mut seen, &a, "m2", 3);
    a.index.insert(d, WriteMode::Create).await.unwrap();
    let mut trim = redis::cmd("XTRIM");
    trim.arg(a.index.keys().df_log()).arg("MAXLEN").arg(0);
    let _: i64 = a.index.redis().one("test", trim).await.unwrap();
    assert_exact(
        &b,
        &model,
        &seen,
        "after entries b had not read were trimmed",
    )
    .await;
    assert_eq!(rebuilds(), before + 2, "b counted again");
    // Entries b had read, trimmed: nothing to do.
    let mut trim = redis::cmd("XTRIM");
    trim.arg(a.index.keys().df_log()).arg("MAXLEN").arg(0);
    let _: i64 = a.index.redis().one("test", trim).await.unwrap();
    let d = write(&mut model, &mut seen, &a, "m3", 4);
    a.index.insert(d, WriteMode::Create).await.unwrap();
    assert_exact(&b, &model, &seen, "after entries b had read were trimmed").await;
    assert_eq!(rebuilds(), before + 2, "b did not count again");
    // An entry that will not decode is reported and counted past (the
    // records are counted again), not an error for every read.
    append_by_hand(&a, &[9u8, 1, 2]).await;
    let d = write(&mut model, &mut seen, &a, "m4", 5);
    a.index.insert(d, WriteMode::Create).await.unwrap();
    assert_exact(&b, &model, &seen, "after an entry that will not decode").await;
    assert_eq!(rebuilds(), before + 3, "b counted again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templates_are_durable_and_reach_the_other_node() {
    let (a, b, _clock) = two_nodes(params(true)).await;
    assert!(b.index.templates().await.unwrap().is_empty());
    // A listing is not an application: the node applies them once.
    b.index.refresh_templates_if_changed().await.unwrap();
    assert!(!b.index.templates_changed().await.unwrap());
    let t = |id: &str, text: &str| Template {
        id: id.to_owned(),
        text: text.to_owned(),
        created_ms: 1_000,
    };
    assert!(a
        .index
        .put_template(t("footer", "read more at our site"))
        .await
        .unwrap());
    assert!(a
        .index
        .put_template(t("alpha", "a legal notice of some length"))
        .await
        .unwrap());
    assert!(!a
        .index
        .put_template(t("footer", "read more on our website"))
        .await
        .unwrap());
    assert!(b.index.templates_changed().await.unwrap());
    assert!(b.index.refresh_templates_if_changed().await.unwrap());
    assert!(!b.index.templates_changed().await.unwrap());
    let listed = b.index.templates().await.unwrap();
    assert_eq!(
        listed.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["alpha", "footer"]
    );
    assert_eq!(listed[1].text, "read more on our website");
    // Applied to b's engine: the template's shingles.
    let want: HashSet<u32> = ["a legal notice of some length", "read more on our website"]
        .iter()
        .flat_map(|s| shingles(&b.engine, s))
        .collect();
    assert_eq!(*b.engine.templates(), want);
    assert!(a.index.delete_template("alpha").await.unwrap());
    assert!(!a.index.delete_template("alpha").await.unwrap());
    // A frequency read notices the move and reads them again by itself.
    b.index.doc_frequencies(&[1, 2, 3]).await.unwrap();
    let want: HashSet<u32> = shingles(&b.engine, "read more on our website")
        .into_iter()
        .collect();
    assert_eq!(*b.engine.templates(), want);
    // A third node (a restart) reads them from Redis.
    let prefix = a.index.keys().base().split(':').next().unwrap().to_owned();
    let c = node(&prefix, params(true), &Arc::new(ManualClock::default())).await;
    assert_eq!(c.index.templates().await.unwrap().len(), 1);
}

/// A corpus of sites: each post is a body of its own and its site's
/// footer; reprints carry another site's footer; excerpts quote a body.
fn corpus() -> Vec<(String, String)> {
    let footers: Vec<Vec<String>> = (0..3).map(|s| words(40 + s, 45)).collect();
    let mut out = Vec::new();
    let mut bodies = Vec::new();
    for i in 0..36u64 {
        let site = (i % 3) as usize;
        let body = words(1_000 + i, 25 + (i as usize * 7) % 40);
        out.push((
            format!("post-{i}"),
            [body.clone(), footers[site].clone()].concat().join(" "),
        ));
        bodies.push(body);
    }
    for i in [2usize, 9, 17] {
        let other = (i + 1) % 3;
        out.push((
            format!("reprint-{i}"),
            [bodies[i].clone(), footers[other].clone()]
                .concat()
                .join(" "),
        ));
    }
    // A near copy (a few words changed) under the same footer.
    let mut near = bodies[20].clone();
    near[3] = "changed".into();
    out.push((
        "near-20".into(),
        [near, footers[20 % 3].clone()].concat().join(" "),
    ));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_scores_queries_if_unique_and_pair_scans_equal_brute_force() {
    let (a, b, _clock) = two_nodes(params(true)).await;
    let docs = corpus();
    let mut model = Model::default();
    let batch = docs
        .iter()
        .map(|(id, t)| new_doc(&a.engine, id, t))
        .collect();
    for r in a.index.insert_many(batch, WriteMode::Create).await.unwrap() {
        r.unwrap();
    }
    for (id, t) in &docs {
        model.0.insert(id.clone(), shingles(&a.engine, t));
    }
    // A template registered on a: the first 12 words of post-0's body
    // (held by one document: boilerplate only as a template).
    let signature = docs[0].1.split(' ').take(12).collect::<Vec<_>>().join(" ");
    a.index
        .put_template(Template {
            id: "sig".into(),
            text: signature.clone(),
            created_ms: 0,
        })
        .await
        .unwrap();
    let templates: HashSet<u32> = shingles(&a.engine, &signature).into_iter().collect();
    let bp = model.boilerplate(&templates);
    assert!(!bp.is_empty());
    // The footers are boilerplate (12 documents each of 40 ≥ 0.2 · 40).
    let footer0 = shingles(&a.engine, &words(40, 45).join(" "));
    assert!(footer0.iter().all(|x| bp.contains(x)));

    let t = 0.5;
    let mut found = 0;
    for measure in [
        Measure::Jaccard,
        Measure::QueryInStored,
        Measure::Containment,
    ] {
        for (qid, qtext) in docs.iter().step_by(3).chain(docs.iter().rev().take(4)) {
            let qs = shingles(&b.engine, qtext);
            let mut want: BTreeMap<String, f64> = BTreeMap::new();
            for (id, ds) in &model.0 {
                if id == qid {
                    continue;
                }
                let (j, qin, din) = content_scores(&qs, ds, &bp);
                let v = match measure {
                    Measure::Jaccard => j,
                    Measure::QueryInStored => qin,
                    Measure::StoredInQuery => din,
                    Measure::Containment => qin.max(din),
                };
                if v >= t {
                    want.insert(id.clone(), j);
                }
            }
            let doc = b.engine.prepare(qtext).unwrap();
            let out = b
                .index
                .similar_to(&doc, Some(qid), &content_query(t, measure))
                .await
                .unwrap();
            let got: BTreeMap<String, f64> = out
                .matches
                .iter()
                .map(|m| (m.id.as_str().to_owned(), m.content.unwrap().jaccard))
                .collect();
            assert_eq!(
                got.keys().collect::<Vec<_>>(),
                want.keys().collect::<Vec<_>>(),
                "{measure:?} from {qid}"
            );
            for (id, j) in &want {
                assert!((got[id] - j).abs() < 1e-12, "{id}: {} vs {j}", got[id]);
            }
            found += want.len();
            // By id: the same answer.
            let by_id = b
                .index
                .similar_to_id(qid, &content_query(t, measure))
                .await
                .unwrap();
            assert_eq!(
                by_id
                    .matches
                    .iter()
                    .map(|m| m.id.as_str())
                    .collect::<BTreeSet<_>>(),
                got.keys().map(String::as_str).collect::<BTreeSet<_>>(),
                "{measure:?} by id {qid}"
            );
        }
    }
    // The queries met reprints and near copies (not only empty answers).
    assert!(found >= 10, "{found}");
    // Raw queries carry the content scores too (a collection that counts).
    let post9 = &docs.iter().find(|(id, _)| id == "post-9").unwrap().1;
    let doc = b.engine.prepare(post9).unwrap();
    let raw = b
        .index
        .similar_to(
            &doc,
            None,
            &Query::new(threshold(0.8, Measure::Jaccard, Score::Raw), 100),
        )
        .await
        .unwrap();
    assert!(raw.matches.iter().any(|m| m.id.as_str() == "post-9"));
    for m in &raw.matches {
        let c = m.content.expect("content scores attached");
        let (j, _, _) = content_scores(doc.shingles(), &model.0[m.id.as_str()], &bp);
        assert!((c.jaccard - j).abs() < 1e-12);
    }
    // A reprint is found on the content score (raw Jaccard far lower).
    let reprint = &docs.iter().find(|(id, _)| id == "reprint-9").unwrap().1;
    let doc = b.engine.prepare(reprint).unwrap();
    let out = b
        .index
        .similar_to(
            &doc,
            Some("reprint-9"),
            &content_query(0.7, Measure::Jaccard),
        )
        .await
        .unwrap();
    assert_eq!(
        out.matches
            .iter()
            .map(|m| m.id.as_str())
            .collect::<Vec<_>>(),
        ["post-9"]
    );
    assert!(out.matches[0].jaccard < 0.7, "{:?}", out.matches[0]);

    // if_unique on content scores: a reprint under a third footer is
    // refused (naming its source); a new post under a footer is stored.
    let footers: Vec<Vec<String>> = (0..3).map(|s| words(40 + s, 45)).collect();
    let body17 = words(1_017, 25 + (17 * 7) % 40);
    let third = [body17, footers[0].clone()].concat().join(" ");
    match b
        .index
        .insert_if_unique(
            new_doc(&b.engine, "u-17", &third),
            content_query(0.7, Measure::Jaccard),
        )
        .await
        .unwrap()
    {
        UniqueOutcome::Duplicate(out) => {
            let ids: BTreeSet<&str> = out.matches.iter().map(|m| m.id.as_str()).collect();
            assert!(ids.contains("post-17"), "{ids:?}");
        }
        UniqueOutcome::Inserted(_) => panic!("a reprint was stored on content scores"),
    }
    let new_post = [words(77, 40), footers[1].clone()].concat().join(" ");
    assert!(matches!(
        b.index
            .insert_if_unique(
                new_doc(&b.engine, "u-new", &new_post),
                content_query(0.5, Measure::Jaccard)
            )
            .await
            .unwrap(),
        UniqueOutcome::Inserted(_)
    ));
    model
        .0
        .insert("u-new".into(), shingles(&b.engine, &new_post));
    let bp = model.boilerplate(&templates);

    // Pair scans on content scores: Jaccard, and either way containment.
    for (measure, pick) in [(Measure::Jaccard, 0usize), (Measure::Containment, 1)] {
        let mut want: BTreeSet<(String, String)> = BTreeSet::new();
        let ids: Vec<&String> = model.0.keys().collect();
        for (i, x) in ids.iter().enumerate() {
            for y in &ids[i + 1..] {
                let (j, xin, yin) = content_scores(&model.0[*x], &model.0[*y], &bp);
                let v = if pick == 0 { j } else { xin.max(yin) };
                if v >= t {
                    want.insert(((*x).clone(), (*y).clone()));
                }
            }
        }
        assert!(!want.is_empty());
        let (edges, stats) = b
            .index
            .scan_edges(
                threshold(t, measure, Score::Content),
                By::new(measure, Score::Content),
            )
            .await
            .unwrap();
        let got: BTreeSet<(String, String)> = edges
            .iter()
            .map(|e| (e.a.id().as_str().to_owned(), e.b.id().as_str().to_owned()))
            .collect();
        assert_eq!(got, want, "{measure:?} pairs on content scores");
        assert_eq!(stats.documents, model.0.len());
        for e in &edges {
            let c = e.content.expect("content scores on the edge");
            let (j, ain, bin) = content_scores(
                &model.0[e.a.id().as_str()],
                &model.0[e.b.id().as_str()],
                &bp,
            );
            assert!((c.jaccard - j).abs() < 1e-12);
            assert!((c.query_in_stored - ain).abs() < 1e-12);
            assert!((c.stored_in_query - bin).abs() < 1e-12);
        }
    }
    // Raw scans are unchanged.
    let (raw, _) = b
        .index
        .scan_edges(
            threshold(0.8, Measure::Jaccard, Score::Raw),
            Measure::Jaccard,
        )
        .await
        .unwrap();
    assert!(
        raw.iter()
            .any(|e| e.a.id().as_str() == "near-20" && e.b.id().as_str() == "post-20"),
        "{}",
        raw.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_queries_need_the_counts_on() {
    let (a, _b, _clock) = two_nodes(params(false)).await;
    a.index
        .insert(new_doc(&a.engine, "x", &text(1, 50)), WriteMode::Create)
        .await
        .unwrap();
    let doc = a.engine.prepare(&text(1, 50)).unwrap();
    let err = a
        .index
        .similar_to(&doc, None, &content_query(0.5, Measure::Jaccard))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            neardup::backend::BackendError::Engine(EngineError::BoilerplateOff)
        ),
        "{err:?}"
    );
}

/// Round trips of this node's connection while `f` runs (a write's
/// background trip included: it is waited for).
async fn trips<F: std::future::Future<Output = ()>>(node: &Node, f: F) -> u64 {
    let before = node
        .index
        .redis()
        .counters
        .round_trips
        .load(Ordering::Relaxed);
    f.await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    node.index
        .redis()
        .counters
        .round_trips
        .load(Ordering::Relaxed)
        - before
}

/// The round trips counting costs a write, and those of content queries
/// (docs/redis-layout.md, "Document frequency and templates").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trips_of_counting_and_of_content_queries() {
    let (on, _, _) = two_nodes(params(true)).await;
    let (off, _, _) = two_nodes(params(false)).await;
    let footer = words(3, 40);
    let post = |seed: u64| [words(seed, 50), footer.clone()].concat().join(" ");
    for node in [&on, &off] {
        let batch = (0..20u64)
            .map(|i| new_doc(&node.engine, &format!("p{i}"), &post(10 + i)))
            .collect();
        node.index
            .insert_many(batch, WriteMode::Create)
            .await
            .unwrap();
        // The templates applied (as a node's collection does at open).
        node.index.refresh_templates_if_changed().await.unwrap();
    }
    let create = |node: &'static Node, id: &'static str, seed: u64| async move {
        node.index
            .insert(new_doc(&node.engine, id, &post(seed)), WriteMode::Upsert)
            .await
            .unwrap();
    };
    // Leak the nodes for the 'static closures of this test.
    let on: &'static Node = Box::leak(Box::new(on));
    let off: &'static Node = Box::leak(Box::new(off));
    // A create: appends, commit, then the counting with the write counter
    // (awaited) where the uncounted write moves the write counter in the
    // background: 3 trips either way, 1 more awaited.
    assert_eq!(trips(on, create(on, "new", 99)).await, 3);
    assert_eq!(trips(off, create(off, "new", 99)).await, 3);
    // A replace: the counting goes in the cleanup trip: 3 either way.
    assert_eq!(trips(on, create(on, "new", 98)).await, 3);
    assert_eq!(trips(off, create(off, "new", 98)).await, 3);
    // A delete: 2 either way.
    assert_eq!(
        trips(on, async { assert!(on.index.remove("p0").await.unwrap()) }).await,
        2
    );
    assert_eq!(
        trips(off, async {
            assert!(off.index.remove("p0").await.unwrap())
        })
        .await,
        2
    );

    // p1's body without its footer (boilerplate): content Jaccard ~0.9.
    let reprint = words(11, 50).join(" ");
    let doc = on.engine.prepare(&reprint).unwrap();
    let raw_jaccard = Query::new(threshold(0.8, Measure::Jaccard, Score::Raw), 10);
    let raw_containment = Query::new(threshold(0.5, Measure::QueryInStored, Score::Raw), 10)
        .measure(Measure::QueryInStored);
    let content = content_query(0.8, Measure::Jaccard);
    let mut found = None;
    let t_content = trips(on, async {
        found = Some(on.index.similar_to(&doc, None, &content).await.unwrap());
    })
    .await;
    let found = found.unwrap();
    assert_eq!(
        found
            .matches
            .iter()
            .map(|m| m.id.as_str())
            .collect::<Vec<_>>(),
        ["p1"]
    );
    // The postings of its content fingerprints (picked by this node's
    // counts) with the log read to its end and the templates' version, the
    // candidates' records; their frequencies are this node's.
    assert_eq!(t_content, 2);
    // By id: the record is read in the trip that reads the log.
    on.index
        .insert(new_doc(&on.engine, "r1", &reprint), WriteMode::Create)
        .await
        .unwrap();
    let t_content_by_id = trips(on, async {
        let out = on.index.similar_to_id("r1", &content).await.unwrap();
        assert_eq!(out.matches.len(), 1);
        assert_eq!(out.matches[0].id.as_str(), "p1");
    })
    .await;
    assert_eq!(t_content_by_id, 3);
    let t_raw_off = trips(off, async {
        off.index
            .similar_to(&doc, None, &raw_jaccard)
            .await
            .unwrap();
    })
    .await;
    assert_eq!(t_raw_off, 2);
    let t_contained_off = trips(off, async {
        off.index
            .similar_to(&doc, None, &raw_containment)
            .await
            .unwrap();
    })
    .await;
    assert_eq!(t_contained_off, 2);
    // On raw scores with counts on: one more trip when there are matches
    // (their content scores).
    let own = on.engine.prepare(&post(12)).unwrap();
    let t_raw_on = trips(on, async {
        let out = on.index.similar_to(&own, None, &raw_jaccard).await.unwrap();
        assert!(out.matches[0].content.is_some());
    })
    .await;
    assert_eq!(t_raw_on, 3);
}

/// What counting costs, measured (run by hand: `cargo test --test
/// api_redis cost_of_counting -- --ignored --nocapture`): ingest time of
/// the same batches with counts on and off (on: the writing node also
/// counting what the log says after each batch, as its watch does), the memory of a node's counts
/// per distinct shingle, and the Redis memory of the log (`MEMORY USAGE`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn cost_of_counting_measured() {
    let footers: Vec<Vec<String>> = (0..5).map(|s| words(60 + s, 50)).collect();
    let texts: Vec<String> = (0..2_000u64)
        .map(|i| {
            [words(5_000 + i, 250), footers[(i % 5) as usize].clone()]
                .concat()
                .join(" ")
        })
        .collect();
    let mut times = Vec::new();
    for round in 0..2 {
        for counting in [false, true] {
            let (a, _, _) = two_nodes(params(counting)).await;
            let started = std::time::Instant::now();
            for (chunk_no, chunk) in texts.chunks(250).enumerate() {
                let batch = chunk
                    .iter()
                    .enumerate()
                    .map(|(i, t)| new_doc(&a.engine, &format!("d{chunk_no}-{i}"), t))
                    .collect();
                a.index.insert_many(batch, WriteMode::Create).await.unwrap();
                // What the watch does every interval: this node counts
                // what the log says (paid by every node, for every write).
                a.index.follow_counts().await.unwrap();
            }
            let took = started.elapsed();
            times.push((round, counting, took));
            if !counting && round == 1 {
                let raw_q = Query::new(threshold(0.8, Measure::Jaccard, Score::Raw), 10);
                let mut ms = Vec::new();
                for t in texts.iter().take(200) {
                    let d = a.engine.prepare(t).unwrap();
                    let started = std::time::Instant::now();
                    let out = a.index.similar_to(&d, None, &raw_q).await.unwrap();
                    ms.push(started.elapsed().as_secs_f64() * 1e3);
                    assert_eq!(out.matches.len(), 1);
                }
                ms.sort_by(f64::total_cmp);
                println!(
                    "query median, counts off: raw jaccard {:.2} ms",
                    ms[ms.len() / 2]
                );
            }
            if counting && round == 1 {
                let (_, distinct) = a.index.common_shingles(u32::MAX, 0).await.unwrap();
                let stats = a.index.boilerplate_stats();
                let node_bytes = stats["node_bytes"].as_u64().unwrap();
                let mut usage = redis::cmd("MEMORY");
                usage
                    .arg("USAGE")
                    .arg(a.index.keys().df_log())
                    .arg("SAMPLES")
                    .arg(0);
                let log: Option<u64> = a.index.redis().one("test", usage).await.unwrap();
                let log = log.unwrap_or(0);
                println!(
                    "counts on a node: {distinct} distinct shingles, {} versions, {node_bytes} bytes: {:.1} B a distinct shingle, {:.0} B a document",
                    stats["versions"],
                    node_bytes as f64 / distinct as f64,
                    node_bytes as f64 / texts.len() as f64
                );
                println!(
                    "the log in Redis (every document still in its window): {log} bytes, {:.0} B a document",
                    log as f64 / texts.len() as f64
                );
                // A node's start: every record counted, then the log.
                let started = std::time::Instant::now();
                let prefix = a.index.keys().base().split(':').next().unwrap().to_owned();
                let third = node(&prefix, params(true), &Arc::new(ManualClock::default())).await;
                println!(
                    "a node's start with counts on: {:?} ({} documents counted)",
                    started.elapsed(),
                    third.index.boilerplate_stats()["documents"]
                );
                // Query latency: content Jaccard (a body without its
                // footer) against raw Jaccard (the full text), alternating.
                let raw_q = Query::new(threshold(0.8, Measure::Jaccard, Score::Raw), 10);
                let content_q = content_query(0.8, Measure::Jaccard);
                let (mut raw_ms, mut content_ms) = (Vec::new(), Vec::new());
                for i in 0..200u64 {
                    let body = words(5_000 + i, 250).join(" ");
                    let full = &texts[i as usize];
                    let d = a.engine.prepare(&body).unwrap();
                    let started = std::time::Instant::now();
                    let out = a.index.similar_to(&d, None, &content_q).await.unwrap();
                    content_ms.push(started.elapsed().as_secs_f64() * 1e3);
                    assert_eq!(out.matches.len(), 1);
                    let d = a.engine.prepare(full).unwrap();
                    let started = std::time::Instant::now();
                    let out = a.index.similar_to(&d, None, &raw_q).await.unwrap();
                    raw_ms.push(started.elapsed().as_secs_f64() * 1e3);
                    assert_eq!(out.matches.len(), 1);
                }
                let median = |v: &mut Vec<f64>| {
                    v.sort_by(f64::total_cmp);
                    v[v.len() / 2]
                };
                println!(
                    "query median: content jaccard {:.2} ms, raw jaccard (content scores attached) {:.2} ms",
                    median(&mut content_ms),
                    median(&mut raw_ms)
                );
            }
        }
    }
    for (round, counting, took) in &times {
        println!(
            "round {round} counting {counting}: {} documents in {took:?}",
            texts.len()
        );
    }
}

/// A collection laid out by the release that kept counts in Redis hashes
/// (`df=1`): the first node of this release that opens it deletes them and
/// counts in its own memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_opens_the_layout_with_counts_in_redis_deletes_them() {
    let prefix = fresh_prefix();
    let clock = Arc::new(ManualClock::default());
    let old = node(&prefix, params(false), &clock).await;
    let t = text(4_000, 50);
    old.index
        .insert(new_doc(&old.engine, "o1", &t), WriteMode::Create)
        .await
        .unwrap();
    // As that release left it: the layout says so, a hash and N exist.
    let keys = old.index.keys();
    let legacy: Vec<String> = keys.df_keys().collect();
    let redis = old.index.redis();
    let meta = layout(&old).await;
    let mut set = redis::cmd("SET");
    set.arg(keys.meta()).arg(format!("{meta};df=1"));
    let _: String = redis.one("test", set).await.unwrap();
    for k in [&legacy[0], &legacy[legacy.len() - 1]] {
        let mut hset = redis::cmd("HSET");
        hset.arg(k).arg(7u32.to_le_bytes().as_slice()).arg(3);
        let _: i64 = redis.one("test", hset).await.unwrap();
    }
    let mut set = redis::cmd("SET");
    set.arg(keys.df_docs()).arg(1);
    let _: String = redis.one("test", set).await.unwrap();

    let new = node(&prefix, params(true), &clock).await;
    assert!(
        layout(&new).await.contains("df=0"),
        "{}",
        layout(&new).await
    );
    for k in [&legacy[0], &legacy[legacy.len() - 1], &keys.df_docs()] {
        let mut exists = redis::cmd("EXISTS");
        exists.arg(k);
        let n: i64 = redis.one("test", exists).await.unwrap();
        assert_eq!(n, 0, "{k} is gone");
    }
    let mut model = Model::default();
    let mut seen = BTreeSet::new();
    remember(&mut model, &mut seen, &new.engine, "o1", &t);
    assert_exact(&new, &model, &seen, "counted by the new node").await;
}

/// A content query picks its content fingerprints by this node's counts as
/// they are and reads the log in the same trip: a fingerprint that the log
/// turns from boilerplate into content (its documents deleted on the other
/// node) has its postings read once the log is applied, so the answer is
/// the one counts read first would give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_content_query_reads_postings_of_fingerprints_the_log_made_content() {
    let (a, b, _) = two_nodes(params(true)).await;
    let footer = words(42, 40);
    let mut batch = Vec::new();
    for i in 0..12u64 {
        let t = [words(600 + i, 40), footer.clone()].concat().join(" ");
        batch.push(new_doc(&a.engine, &format!("f{i}"), &t));
    }
    for i in 0..10u64 {
        batch.push(new_doc(&a.engine, &format!("u{i}"), &text(700 + i, 60)));
    }
    for r in a.index.insert_many(batch, WriteMode::Create).await.unwrap() {
        r.unwrap();
    }
    let q = content_query(0.9, Measure::QueryInStored);
    let query = b.engine.prepare(&footer.join(" ")).unwrap();
    // On b: the footer is boilerplate (12 of 22 documents hold it).
    let out = b.index.similar_to(&query, None, &q).await.unwrap();
    assert!(out.matches.is_empty(), "{out:?}");
    // a deletes ten of them: two hold the footer now, under min_docs.
    for i in 0..10u64 {
        assert!(a.index.remove(&format!("f{i}")).await.unwrap());
    }
    let mut found = None;
    let t = trips(&b, async {
        found = Some(b.index.similar_to(&query, None, &q).await.unwrap());
    })
    .await;
    let mut ids: Vec<String> = found
        .unwrap()
        .matches
        .iter()
        .map(|m| m.id.as_str().to_owned())
        .collect();
    ids.sort();
    assert_eq!(ids, ["f10", "f11"]);
    // The guessed keys' postings with the log, the keys that became
    // content, the candidates' records.
    assert_eq!(t, 3);
}
