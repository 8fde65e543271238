use super::*;
use crate::engine::{DocId, EngineParams, IndexParams, NewDoc, Query, WriteMode};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::fs;

type State = BTreeMap<String, (Vec<u32>, Vec<u32>, Option<String>)>;

fn settings(dir: &Path) -> StorageSettings {
    StorageSettings {
        data_dir: dir.to_owned(),
        ..Default::default()
    }
}

fn open_with(dir: &Path, params: EngineParams) -> Result<Store, PersistError> {
    Store::open(
        Arc::new(Engine::new(params.validate().unwrap())),
        &settings(dir),
    )
}

fn open(dir: &Path) -> Store {
    open_with(dir, EngineParams::default()).unwrap()
}

fn state(e: &Engine) -> State {
    e.records()
        .iter()
        .map(|r| {
            (
                r.id().to_string(),
                (
                    r.signature().to_vec(),
                    r.shingles().to_vec(),
                    r.metadata().map(str::to_owned),
                ),
            )
        })
        .collect()
}

fn put(s: &Store, id: &str, text: &str) {
    let doc = s.engine().prepare(text).unwrap();
    s.insert(
        NewDoc {
            id: DocId::parse(id).unwrap(),
            doc,
            metadata: Some("{\"n\":1}".into()),
            expires_ms: None,
            text: None,
            created_ms: None,
        },
        WriteMode::Upsert,
    )
    .unwrap();
}

fn text(i: usize) -> String {
    format!(
        "document number {i} talks about topic {} and more words {}",
        i % 7,
        i * 31
    )
}

#[test]
fn writes_survive_a_restart_through_the_log_alone() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let s = open(dir.path());
        for i in 0..50 {
            put(&s, &format!("d{i}"), &text(i));
        }
        s.remove("d3").unwrap();
        put(&s, "d4", "replaced text of four");
        state(s.engine())
    };
    let s = open(dir.path());
    assert_eq!(state(s.engine()), before);
    assert_eq!(s.recovery.replayed_records, 52);
    assert!(s.recovery.snapshot.is_none());
}

#[test]
fn a_snapshot_plus_the_log_after_it_restores_everything() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let s = open(dir.path());
        for i in 0..30 {
            put(&s, &format!("d{i}"), &text(i));
        }
        let info = s.snapshot().unwrap();
        assert_eq!(info.documents, 30);
        assert!(info
            .path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .contains("snapshot"));
        for i in 30..40 {
            put(&s, &format!("d{i}"), &text(i));
        }
        s.remove("d0").unwrap();
        state(s.engine())
    };
    let s = open(dir.path());
    assert_eq!(state(s.engine()), before);
    assert_eq!(s.recovery.snapshot_documents, 30);
    assert_eq!(s.recovery.replayed_records, 11);
}

#[test]
fn a_snapshot_of_several_restore_batches_answers_queries_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let n = recovery::RESTORE_BATCH + recovery::RESTORE_BATCH / 2;
    let (before, answers, buckets) = {
        let s = open(dir.path());
        let items: Vec<_> = (0..n)
            .into_par_iter()
            .map(|i| {
                // Every 10th document repeats its predecessor's text: shared buckets.
                let doc = s
                    .engine()
                    .prepare(&text(i - usize::from(i % 10 == 9)))
                    .unwrap();
                NewDoc {
                    id: DocId::parse(&format!("d{i}")).unwrap(),
                    doc,
                    metadata: None,
                    expires_ms: None,
                    text: None,
                    created_ms: None,
                }
            })
            .collect();
        for r in s.insert_many(items, WriteMode::Create).unwrap() {
            r.unwrap();
        }
        s.snapshot().unwrap();
        let t = s.engine().threshold(None).unwrap();
        let answers: Vec<_> = (0..n)
            .step_by(97)
            .map(|i| {
                s.engine()
                    .similar_to_id(&format!("d{i}"), &Query::new(t, 10))
                    .unwrap()
            })
            .collect();
        (state(s.engine()), answers, s.engine().lsh_bucket_count())
    };
    let s = open(dir.path());
    assert_eq!(s.recovery.snapshot_documents, n as u64);
    assert_eq!(s.recovery.replayed_records, 0);
    assert_eq!(state(s.engine()), before);
    assert_eq!(s.engine().lsh_bucket_count(), buckets);
    let t = s.engine().threshold(None).unwrap();
    for (k, i) in (0..n).step_by(97).enumerate() {
        let again = s
            .engine()
            .similar_to_id(&format!("d{i}"), &Query::new(t, 10))
            .unwrap();
        assert_eq!(again, answers[k], "d{i}");
    }
}

#[test]
fn a_final_snapshot_leaves_nothing_to_replay() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path());
        for i in 0..10 {
            put(&s, &format!("d{i}"), &text(i));
        }
        s.snapshot().unwrap();
    }
    let s = open(dir.path());
    assert_eq!(s.recovery.replayed_records, 0);
    assert_eq!(s.engine().len(), 10);
}

#[test]
fn old_snapshots_and_covered_log_segments_are_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    for round in 0..4 {
        put(&s, &format!("r{round}"), &text(round));
        s.snapshot().unwrap();
    }
    let snaps = snapshot::list_snapshots(dir.path()).unwrap();
    assert_eq!(snaps.len(), 2, "{snaps:?}");
    // The log reaches back to the oldest kept snapshot and no further.
    let oldest = snapshot::read_header(&snaps[0].1).unwrap().wal_lsn;
    let segs = wal::list_segments(dir.path()).unwrap();
    assert!(segs[0].0 <= oldest && segs.len() <= 3, "{segs:?}");
    drop(s);
    assert_eq!(open(dir.path()).engine().len(), 4);
}

fn last_segment(dir: &Path) -> PathBuf {
    wal::list_segments(dir).unwrap().pop().unwrap().1
}

#[test]
fn a_torn_final_log_record_is_dropped_and_the_rest_kept() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let s = open(dir.path());
        for i in 0..5 {
            put(&s, &format!("d{i}"), &text(i));
        }
        state(s.engine())
    };
    // Simulate a crash in the middle of appending a sixth record.
    let seg = last_segment(dir.path());
    let mut frame = Vec::new();
    format::push_frame(&mut frame, &[7u8; 300]);
    let mut data = fs::read(&seg).unwrap();
    data.extend_from_slice(&frame[..100]);
    fs::write(&seg, &data).unwrap();
    let s = open(dir.path());
    assert_eq!(state(s.engine()), before);
    assert_eq!(s.recovery.torn_bytes_dropped, 100);
    drop(s);
    // The truncation is durable: the next start is clean.
    let s = open(dir.path());
    assert_eq!(s.recovery.torn_bytes_dropped, 0);
    assert_eq!(state(s.engine()), before);
}

#[test]
fn a_flipped_byte_in_the_middle_of_the_log_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path());
        for i in 0..20 {
            put(&s, &format!("d{i}"), &text(i));
        }
    }
    let seg = last_segment(dir.path());
    let mut data = fs::read(&seg).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 0x01;
    fs::write(&seg, &data).unwrap();
    let err = open_with(dir.path(), EngineParams::default()).unwrap_err();
    match &err {
        PersistError::Corrupt { path, offset, .. } => {
            assert_eq!(path, &seg);
            assert!(*offset > 0 && *offset <= mid as u64, "{err}");
        }
        other => panic!("expected corruption, got {other}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("wal-") && msg.contains("offset"), "{msg}");
}

#[test]
fn a_logged_record_that_cannot_be_restored_is_reported_at_its_own_offset() {
    use crate::engine::{DocId, Journal, JournalEntry, Record};
    let dir = tempfile::tempdir().unwrap();
    let next = {
        let s = open(dir.path());
        for i in 0..3 {
            put(&s, &format!("d{i}"), &text(i));
        }
        s.wal().next_lsn()
    };
    // A well-framed, checksummed record whose shingle set is not sorted:
    // the log is intact, the record is not.
    let wal = wal::Wal::open(
        dir.path(),
        next,
        crate::config::WalFsync::Always,
        Fingerprint::of(&EngineParams::default()),
        0,
    )
    .unwrap();
    let bad = Record::new(
        DocId::parse("bad-one").unwrap(),
        None,
        crate::engine::Stamp::default(),
        &[7u32; 128],
        &[9, 3, 5],
    );
    let lsn = wal.append(JournalEntry::Upsert(&bad, None)).unwrap();
    wal.commit(lsn).unwrap();
    drop(wal);
    let seg = last_segment(dir.path());
    let err = open_with(dir.path(), EngineParams::default()).unwrap_err();
    match &err {
        PersistError::Corrupt {
            path,
            offset,
            reason,
        } => {
            assert_eq!(path, &seg);
            // The first frame after the segment header, not offset 0.
            assert!(*offset > 8, "{err}");
            assert!(reason.contains("\"bad-one\""), "{err}");
        }
        other => panic!("expected corruption, got {other}"),
    }
}

#[test]
fn a_damaged_snapshot_falls_back_to_an_older_one_when_the_log_covers_it() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let s = open(dir.path());
        for i in 0..10 {
            put(&s, &format!("a{i}"), &text(i));
        }
        s.snapshot().unwrap();
        for i in 0..10 {
            put(&s, &format!("b{i}"), &text(i + 100));
        }
        s.snapshot().unwrap();
        put(&s, "c", "after both snapshots");
        state(s.engine())
    };
    let newest = snapshot::list_snapshots(dir.path())
        .unwrap()
        .pop()
        .unwrap()
        .1;
    let mut data = fs::read(&newest).unwrap();
    let at = data.len() - 100;
    data[at] ^= 0xff;
    fs::write(&newest, &data).unwrap();
    let s = open(dir.path());
    assert_eq!(state(s.engine()), before);
    assert_eq!(s.recovery.fallbacks.len(), 1);
    assert!(
        s.recovery.fallbacks[0].contains("snapshot-"),
        "{:?}",
        s.recovery.fallbacks
    );
}

#[test]
fn a_snapshot_damaged_in_a_later_restore_batch_falls_back_with_nothing_of_it_left() {
    // The damage is past the first restore batch, so part of the snapshot
    // was already stored, indexed and published when it is found.
    let dir = tempfile::tempdir().unwrap();
    let n = recovery::RESTORE_BATCH * 2 + 10;
    let (before, buckets) = {
        let s = open(dir.path());
        for i in 0..10 {
            put(&s, &format!("a{i}"), &text(i));
        }
        s.snapshot().unwrap();
        let items: Vec<_> = (0..n)
            .into_par_iter()
            .map(|i| NewDoc {
                id: DocId::parse(&format!("b{i}")).unwrap(),
                doc: s.engine().prepare(&text(i % 500)).unwrap(),
                metadata: None,
                expires_ms: None,
                text: None,
                created_ms: None,
            })
            .collect();
        for r in s.insert_many(items, WriteMode::Create).unwrap() {
            r.unwrap();
        }
        s.snapshot().unwrap();
        (state(s.engine()), s.engine().lsh_bucket_count())
    };
    let newest = snapshot::list_snapshots(dir.path())
        .unwrap()
        .pop()
        .unwrap()
        .1;
    let mut data = fs::read(&newest).unwrap();
    let at = data.len() - 2000; // a record of the last batch
    data[at] ^= 0xff;
    fs::write(&newest, &data).unwrap();
    let s = open(dir.path());
    assert_eq!(s.recovery.fallbacks.len(), 1, "{:?}", s.recovery.fallbacks);
    assert!(
        s.recovery.fallbacks[0].contains("snapshot-000002.bin")
            && s.recovery.fallbacks[0].contains("offset"),
        "{:?}",
        s.recovery.fallbacks
    );
    assert_eq!(s.recovery.replayed_records, n as u64);
    assert_eq!(state(s.engine()), before);
    assert_eq!(s.engine().len(), n + 10);
    assert_eq!(s.engine().lsh_bucket_count(), buckets);
}

#[test]
fn a_damaged_snapshot_without_log_coverage_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path());
        for i in 0..10 {
            put(&s, &format!("a{i}"), &text(i));
        }
        s.snapshot().unwrap();
    }
    let snap = snapshot::list_snapshots(dir.path())
        .unwrap()
        .pop()
        .unwrap()
        .1;
    let mut data = fs::read(&snap).unwrap();
    let at = data.len() / 2;
    data[at] ^= 0x10;
    fs::write(&snap, &data).unwrap();
    let err = open_with(dir.path(), EngineParams::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("snapshot-000001.bin") && err.contains("offset"),
        "{err}"
    );
}

#[test]
fn a_crash_between_snapshot_write_and_rename_keeps_the_old_state() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let s = open(dir.path());
        for i in 0..10 {
            put(&s, &format!("d{i}"), &text(i));
        }
        s.snapshot().unwrap();
        put(&s, "late", "written after the snapshot");
        state(s.engine())
    };
    // A snapshot that was fully written but never renamed: garbage to us.
    fs::write(
        dir.path().join("snapshot-000002.bin.tmp"),
        b"half a snapshot",
    )
    .unwrap();
    let s = open(dir.path());
    assert_eq!(state(s.engine()), before);
    assert!(!dir.path().join("snapshot-000002.bin.tmp").exists());
}

#[test]
fn different_signature_parameters_refuse_to_start_but_a_new_threshold_is_fine() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path());
        put(&s, "x", &text(1));
        s.snapshot().unwrap();
        put(&s, "y", &text(2));
    }
    let err = open_with(
        dir.path(),
        EngineParams {
            index: IndexParams {
                num_perm: 64,
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("index.num_perm: stored 128, configured 64"),
        "{err}"
    );
    let err = open_with(
        dir.path(),
        EngineParams {
            shingle: crate::text::ShingleOptions {
                kind: crate::text::ShingleKind::Char,
                k: 5,
                multiset: false,
            },
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("shingle.kind"), "{err}");
    // Threshold and banding are not part of the stored format: tables are rebuilt.
    let s = open_with(
        dir.path(),
        EngineParams {
            index: IndexParams {
                threshold: 0.9,
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(s.engine().len(), 2);
    let t = s.engine().threshold(None).unwrap();
    put(&s, "x-copy", &text(1));
    let found = s.engine().similar_to_id("x", &Query::new(t, 10)).unwrap();
    assert_eq!(found.matches[0].id.as_str(), "x-copy");
}

#[test]
fn a_segment_whose_header_was_never_finished_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path());
        put(&s, "x", &text(1));
    }
    fs::write(dir.path().join(wal::segment_name(999)), b"NDUPW").unwrap();
    let s = open(dir.path());
    assert_eq!(s.engine().len(), 1);
    assert!(!dir.path().join(wal::segment_name(999)).exists());
}

#[test]
fn batches_commit_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let items: Vec<_> = (0..100)
        .map(|i| NewDoc {
            id: DocId::parse(&format!("b{i}")).unwrap(),
            doc: s.engine().prepare(&text(i)).unwrap(),
            metadata: None,
            expires_ms: None,
            text: None,
            created_ms: None,
        })
        .collect();
    let before = s.wal().counters.fsyncs.load(Ordering::Relaxed);
    let results = s.insert_many(items, WriteMode::Create).unwrap();
    assert!(results.iter().all(|r| r.is_ok()));
    assert_eq!(s.wal().counters.fsyncs.load(Ordering::Relaxed) - before, 1);
}

#[test]
fn concurrent_writers_share_fsyncs_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let s = Arc::new(open(dir.path()));
        std::thread::scope(|scope| {
            for t in 0..4 {
                let s = Arc::clone(&s);
                scope.spawn(move || {
                    for i in 0..100 {
                        put(&s, &format!("t{t}-{i}"), &text(i));
                        if i % 10 == 0 {
                            s.remove(&format!("t{t}-{}", i / 2)).unwrap();
                        }
                    }
                });
            }
            let s = Arc::clone(&s);
            scope.spawn(move || {
                for _ in 0..3 {
                    s.snapshot().unwrap();
                }
            });
        });
        let fsyncs = s.wal().counters.fsyncs.load(Ordering::Relaxed);
        let commits = s.wal().counters.appends.load(Ordering::Relaxed);
        assert!(fsyncs <= commits, "{fsyncs} fsyncs for {commits} appends");
        state(s.engine())
    };
    assert_eq!(state(open(dir.path()).engine()), before);
}

#[test]
fn always_mode_acknowledges_only_what_is_fsynced() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    put(&s, "a", &text(1));
    let c = &s.wal().counters;
    // One fsync per committed write when nobody else is waiting.
    assert_eq!(c.fsyncs.load(Ordering::Relaxed), 1);
    // A commit for an LSN that is written but not yet fsynced (another
    // committer is mid-fsync) must not return before its own fsync.
    let doc = s.engine().prepare(&text(2)).unwrap();
    let (_, lsn) = s
        .engine()
        .insert_journaled(
            DocId::parse("b").unwrap(),
            &doc,
            None,
            WriteMode::Upsert,
            crate::engine::Stamp::default(),
            &**s.wal_arc(),
        )
        .unwrap();
    s.wal().write_without_fsync();
    s.wal().commit(lsn).unwrap();
    assert_eq!(c.fsyncs.load(Ordering::Relaxed), 2);
    s.wal().commit(lsn).unwrap();
    assert_eq!(
        c.fsyncs.load(Ordering::Relaxed),
        2,
        "an fsynced LSN needs no second fsync"
    );
}

// -- stamps, expiry and the purge ---------------------------------------------

fn open_clocked(
    dir: &Path,
    clock: Arc<crate::engine::ManualClock>,
    ttl: Option<Duration>,
) -> Store {
    let engine = Engine::with_clock(EngineParams::default().validate().unwrap(), clock);
    engine.set_retention(ttl);
    Store::open(Arc::new(engine), &settings(dir)).unwrap()
}

fn put_expiring(s: &Store, id: &str, text: &str, expires_ms: Option<u64>) {
    let doc = s.engine().prepare(text).unwrap();
    let new = NewDoc {
        id: DocId::parse(id).unwrap(),
        doc,
        metadata: None,
        expires_ms,
        text: None,
        created_ms: None,
    };
    s.insert(new, WriteMode::Upsert).unwrap();
}

/// Every record's id with its stamp.
fn stamps(e: &Engine) -> BTreeMap<String, crate::engine::Stamp> {
    e.records()
        .iter()
        .map(|r| (r.id().to_string(), r.stamp()))
        .collect()
}

use crate::engine::Clock;
use std::time::Duration;

#[test]
fn stamps_survive_the_log_and_snapshots_and_expiry_follows_the_clock_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(crate::engine::ManualClock::default());
    let t0 = clock.now_ms();
    let hour = Some(Duration::from_secs(3600));
    let before = {
        let s = open_clocked(dir.path(), Arc::clone(&clock), hour);
        put_expiring(&s, "retained", &text(1), None);
        put_expiring(&s, "own", &text(2), Some(t0 + 60_000));
        clock.advance(Duration::from_secs(10));
        s.snapshot().unwrap();
        put_expiring(&s, "later", &text(3), Some(t0 + 7_200_000));
        stamps(s.engine())
    };
    assert_eq!(before["retained"].created_ms, t0);
    assert_eq!(before["later"].created_ms, t0 + 10_000);
    // Restored from the snapshot (two) and the log (one): the same stamps.
    let s = open_clocked(dir.path(), Arc::clone(&clock), hour);
    assert_eq!(stamps(s.engine()), before);
    assert_eq!(s.recovery.snapshot_documents, 2);
    assert_eq!(s.recovery.replayed_records, 1);
    let live = |s: &Store, id: &str| s.engine().get(id).is_some();
    assert!(live(&s, "own") && live(&s, "retained") && live(&s, "later"));
    // A minute on: the document's own expiry; an hour: the retention; two:
    // the longer own expiry, which wins over the retention.
    clock.advance(Duration::from_secs(60));
    assert!(!live(&s, "own") && live(&s, "retained"));
    clock.advance(Duration::from_secs(3600));
    assert!(!live(&s, "retained") && live(&s, "later"));
    clock.advance(Duration::from_secs(3600));
    assert!(!live(&s, "later"));
    drop(s);
    // Nothing purged: after a restart they are still expired, not back.
    let s = open_clocked(dir.path(), Arc::clone(&clock), hour);
    assert_eq!(s.engine().len(), 3, "held until purged");
    assert!(!live(&s, "own") && !live(&s, "retained") && !live(&s, "later"));
}

#[test]
fn the_purge_logs_a_delete_per_expired_document_and_a_replay_keeps_them_gone() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(crate::engine::ManualClock::default());
    let t0 = clock.now_ms();
    {
        let s = open_clocked(dir.path(), Arc::clone(&clock), None);
        for i in 0..20 {
            let expires = (i % 2 == 0).then_some(t0 + 1_000);
            put_expiring(&s, &format!("d{i}"), &text(i), expires);
        }
        assert_eq!(s.purge_expired().unwrap(), 0, "nothing expired yet");
        clock.advance(Duration::from_secs(2));
        // Replaced since it expired: live again, so not purged.
        put_expiring(&s, "d0", &text(100), None);
        let bytes_before = s.wal().bytes();
        assert_eq!(s.purge_expired().unwrap(), 9);
        assert!(s.wal().bytes() > bytes_before, "a delete each in the log");
        assert_eq!(s.engine().len(), 11);
        assert_eq!(s.purge_expired().unwrap(), 0, "idempotent");
    }
    // The log alone (no snapshot): the deletes replay.
    let s = open_clocked(dir.path(), Arc::clone(&clock), None);
    assert_eq!(s.engine().len(), 11);
    assert_eq!(s.recovery.replayed_records, 21 + 9);
    let ids: Vec<String> = stamps(s.engine()).into_keys().collect();
    assert!(ids.contains(&"d0".to_owned()) && !ids.contains(&"d2".to_owned()));
}

// -- stored texts ---------------------------------------------------------------

fn open_storing_texts(dir: &Path) -> Result<Store, PersistError> {
    Store::open(
        Arc::new(Engine::new(EngineParams::default().validate().unwrap())),
        &StorageSettings {
            data_dir: dir.to_owned(),
            store_text: true,
            ..Default::default()
        },
    )
}

fn put_text(s: &Store, id: &str, text: &str) {
    let doc = s.engine().prepare(text).unwrap();
    s.insert(
        NewDoc {
            id: DocId::parse(id).unwrap(),
            doc,
            metadata: None,
            expires_ms: None,
            text: Some(text.into()),
            created_ms: None,
        },
        WriteMode::Upsert,
    )
    .unwrap();
}

#[test]
fn texts_are_read_back_and_sampled_without_reading_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let s = open_storing_texts(dir.path()).unwrap();
    for i in 0..50 {
        put_text(
            &s,
            &format!("d{i:02}"),
            &format!("{} — “{i}” ünïcödé 🙂", text(i)),
        );
    }
    assert_eq!(
        s.text("d07").unwrap().unwrap(),
        format!("{} — “7” ünïcödé 🙂", text(7))
    );
    assert_eq!(s.text("missing").unwrap(), None);
    let a = s.sample_texts(10, 42, usize::MAX).unwrap();
    let b = s.sample_texts(10, 42, usize::MAX).unwrap();
    assert_eq!(a, b, "the same seed draws the same sample");
    assert_eq!(a.len(), 10);
    let ids: std::collections::BTreeSet<&String> = a.iter().map(|(id, _)| id).collect();
    assert_eq!(ids.len(), 10, "without replacement");
    for (id, t) in &a {
        assert_eq!(s.text(id).unwrap().as_ref(), Some(t));
    }
    assert_ne!(a, s.sample_texts(10, 43, usize::MAX).unwrap());
    assert_eq!(s.sample_texts(500, 1, usize::MAX).unwrap().len(), 50);
    // A byte budget stops the draw before the texts would pass it.
    let budget = a[..3].iter().map(|(_, t)| t.len()).sum::<usize>();
    assert_eq!(s.sample_texts(10, 42, budget).unwrap(), a[..3].to_vec());
    assert_eq!(s.sample_texts(10, 42, budget - 1).unwrap(), a[..2].to_vec());
    // Uniform: over many seeds every document is drawn about as often.
    let mut seen = BTreeMap::<String, usize>::new();
    for seed in 0..400 {
        for (id, _) in s.sample_texts(5, seed, usize::MAX).unwrap() {
            *seen.entry(id).or_default() += 1;
        }
    }
    assert_eq!(seen.len(), 50);
    // 400 × 5 / 50 = 40 expected draws each.
    assert!(seen.values().all(|&n| (15..=70).contains(&n)), "{seen:?}");
}

fn new_doc(s: &Store, id: &str, text: &str) -> NewDoc {
    NewDoc {
        id: DocId::parse(id).unwrap(),
        doc: s.engine().prepare(text).unwrap(),
        metadata: None,
        expires_ms: None,
        text: Some(text.into()),
        created_ms: None,
    }
}

#[test]
fn a_text_reaches_the_tail_before_its_ids_lock_and_an_if_unique_refusal_writes_none() {
    let dir = tempfile::tempdir().unwrap();
    let first = format!("{} — “déjà vu” 🙂", text(1));
    {
        let s = open_storing_texts(dir.path()).unwrap();
        s.insert(new_doc(&s, "a", &first), WriteMode::Create)
            .unwrap();
        let after_one = s.text_bytes();
        assert!(after_one > 0);
        // A create of an existing id is refused under the id's lock, after
        // its text went to the tail (written before the lock, not under
        // it): an orphan no record points to.
        let refused = s.insert(new_doc(&s, "a", &text(2)), WriteMode::Create);
        assert!(
            matches!(refused, Err(EngineError::AlreadyExists(_))),
            "{refused:?}"
        );
        let orphaned = s.text_bytes();
        assert!(orphaned > after_one, "{orphaned} > {after_one}");
        assert_eq!(s.text("a").unwrap().unwrap(), first);
        // if_unique appends under the lock, only when it stores: a refusal
        // (a near-duplicate is stored) leaves the tail as it was.
        let q = Query::new(s.engine().threshold(None).unwrap(), 10);
        let outcome = s.insert_if_unique(new_doc(&s, "b", &first), &q).unwrap();
        assert!(matches!(
            outcome,
            crate::engine::UniqueOutcome::Duplicate(_)
        ));
        assert_eq!(s.text_bytes(), orphaned);
        let stored = s.insert_if_unique(new_doc(&s, "c", &text(3)), &q).unwrap();
        assert!(matches!(stored, crate::engine::UniqueOutcome::Inserted(_)));
        assert!(s.text_bytes() > orphaned);
        // A batch's texts go to the tail first too, in one write: the
        // refused item's text is there as well.
        let before_batch = s.text_bytes();
        let outcomes = s
            .insert_many(
                [new_doc(&s, "d", &text(4)), new_doc(&s, "a", &text(5))],
                WriteMode::Create,
            )
            .unwrap();
        assert!(outcomes[0].is_ok() && outcomes[1].is_err());
        assert_eq!(s.text("d").unwrap().unwrap(), text(4));
        let one = s.text_bytes() - before_batch;
        let frames = |t: &str| (texts::compress(t).len() + format::FRAME_HEADER) as u64;
        assert_eq!(one, frames(&text(4)) + frames(&text(5)));
        s.snapshot().unwrap();
    }
    // The snapshot compacted the texts: the orphans are gone, every
    // pointed-to text is read back after a restart.
    let s = open_storing_texts(dir.path()).unwrap();
    assert_eq!(s.text("a").unwrap().unwrap(), first);
    assert_eq!(s.text("c").unwrap().unwrap(), text(3));
    assert_eq!(s.text("d").unwrap().unwrap(), text(4));
    assert_eq!(s.text("b").unwrap(), None);
}

#[test]
fn texts_written_while_snapshots_run_are_all_readable() {
    // A write's text reaches the tail before its record is published; a
    // snapshot that rotates the tail in between must not drop that text
    // with the old tail (the record would point into a removed file).
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(open_storing_texts(dir.path()).unwrap());
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let snapshots = {
        let (s, done) = (Arc::clone(&s), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut n = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                s.snapshot().unwrap();
                n += 1;
            }
            n
        })
    };
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let s = Arc::clone(&s);
            std::thread::spawn(move || {
                for i in 0..400 {
                    if i % 4 == 0 {
                        let items = (0..4)
                            .map(|j| new_doc(&s, &format!("w{w}-{i}-{j}"), &text(i + j)))
                            .collect::<Vec<_>>();
                        for r in s.insert_many(items, WriteMode::Upsert).unwrap() {
                            r.unwrap();
                        }
                    } else {
                        s.insert(
                            new_doc(&s, &format!("w{w}-{i}"), &text(i)),
                            WriteMode::Upsert,
                        )
                        .unwrap();
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(snapshots.join().unwrap() > 0);
    for w in 0..2 {
        for i in 0..400 {
            let ids: Vec<String> = if i % 4 == 0 {
                (0..4).map(|j| format!("w{w}-{i}-{j}")).collect()
            } else {
                vec![format!("w{w}-{i}")]
            };
            for id in ids {
                assert!(s.text(&id).unwrap().is_some(), "{id}: its text is gone");
            }
        }
    }
}

#[test]
fn a_damaged_text_segment_names_its_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open_storing_texts(dir.path()).unwrap();
        put_text(&s, "a", "first text to keep");
        put_text(&s, "b", "second text to keep, longer than the first");
        s.snapshot().unwrap();
    }
    let path = dir.path().join("texts-000001.seg");
    let mut bytes = fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    fs::write(&path, &bytes).unwrap();
    let e = open_storing_texts(dir.path()).unwrap_err().to_string();
    assert!(e.contains("texts-000001.seg"), "{e}");
    assert!(e.contains("at byte offset"), "{e}");
    // A missing segment is named too.
    fs::remove_file(&path).unwrap();
    let e = open_storing_texts(dir.path()).unwrap_err().to_string();
    assert!(e.contains("snapshot"), "{e}");
}

#[test]
fn a_damaged_tail_frame_is_an_error_when_read() {
    let dir = tempfile::tempdir().unwrap();
    let s = open_storing_texts(dir.path()).unwrap();
    put_text(&s, "a", "a text in the tail segment only");
    let tail = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("texts-tail"))
        .unwrap();
    let mut bytes = fs::read(&tail).unwrap();
    let at = bytes.len() - 2;
    bytes[at] ^= 0x10;
    fs::write(&tail, &bytes).unwrap();
    let e = s.text("a").unwrap_err().to_string();
    assert!(e.contains("texts-tail-") && e.contains("offset 16"), "{e}");
}

#[test]
fn texts_survive_a_snapshot_and_log_replay() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open_storing_texts(dir.path()).unwrap();
        put_text(&s, "a", "Съешь же ещё этих мягких французских булок");
        s.snapshot().unwrap();
        put_text(&s, "b", "東京都の天気は晴れです");
        s.remove("a").unwrap();
    }
    let s = open_storing_texts(dir.path()).unwrap();
    assert_eq!(s.text("a").unwrap(), None);
    assert_eq!(s.text("b").unwrap().unwrap(), "東京都の天気は晴れです");
}

/// Files of format 2 (the release before stored texts): a snapshot whose
/// records end with their stamp, a log segment `NDUPWAL2` whose upserts
/// carry no text. Written here byte for byte as that release wrote them.
#[test]
fn format_2_snapshots_and_logs_are_read_as_documents_without_texts() {
    use bincode::Encode;
    /// A record as formats 2 and 3 wrote it (no fingerprints).
    #[derive(Encode)]
    struct RefV2<'a> {
        id: &'a str,
        metadata: Option<&'a str>,
        signature: &'a [u32],
        shingles: &'a [u32],
        created_ms: u64,
        expires_ms: u64,
    }
    #[derive(Encode)]
    enum OpV2<'a> {
        Upsert(RefV2<'a>),
        #[allow(dead_code)]
        Delete(&'a str),
    }
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::new(EngineParams::default().validate().unwrap());
    let fp = format::Fingerprint::of(engine.params());
    let a = engine.prepare(&text(1)).unwrap();
    let b = engine.prepare(&text(2)).unwrap();
    let rec = |id: &'static str, d: &'static crate::engine::Prepared| RefV2 {
        id,
        metadata: None,
        signature: d.signature(),
        shingles: d.shingles(),
        created_ms: 1_700_000_000_000,
        expires_ms: 0,
    };
    let a: &'static crate::engine::Prepared = Box::leak(Box::new(a));
    let b: &'static crate::engine::Prepared = Box::leak(Box::new(b));
    // Snapshot 1 (format 2): document "a", log from LSN 1.
    let header = snapshot::SnapshotHeader {
        format_version: 2,
        seq: 1,
        wal_lsn: 1,
        documents: 1,
        created_unix_ms: 1_700_000_000_000,
        fingerprint: fp.clone(),
        threshold: 0.8,
        bands: 21,
        rows: 6,
    };
    let hbytes = bincode::encode_to_vec(&header, format::config()).unwrap();
    let mut snap = Vec::new();
    snap.extend_from_slice(b"NDUPSNP1");
    snap.extend_from_slice(&(hbytes.len() as u32).to_le_bytes());
    snap.extend_from_slice(&hbytes);
    snap.extend_from_slice(&crc32c::crc32c(&hbytes).to_le_bytes());
    let mut frame = Vec::new();
    format::push_frame(
        &mut frame,
        &bincode::encode_to_vec(rec("a", a), format::config()).unwrap(),
    );
    snap.extend_from_slice(&frame);
    snap.extend_from_slice(b"NDUPEND1");
    snap.extend_from_slice(&1u64.to_le_bytes());
    snap.extend_from_slice(&crc32c::crc32c(&frame).to_le_bytes());
    fs::write(dir.path().join(snapshot::snapshot_name(1)), snap).unwrap();
    // Log segment from LSN 1 (format 2): upsert "b".
    let hbody = bincode::encode_to_vec(
        &wal::SegmentHeader {
            start_lsn: 1,
            fingerprint: fp,
        },
        format::config(),
    )
    .unwrap();
    let mut log = Vec::new();
    log.extend_from_slice(b"NDUPWAL2");
    log.extend_from_slice(&(hbody.len() as u32).to_le_bytes());
    log.extend_from_slice(&hbody);
    log.extend_from_slice(&crc32c::crc32c(&hbody).to_le_bytes());
    let op = bincode::encode_to_vec((1u64, OpV2::Upsert(rec("b", b))), format::config()).unwrap();
    format::push_frame(&mut log, &op);
    fs::write(dir.path().join(wal::segment_name(1)), log).unwrap();

    let s = open_storing_texts(dir.path()).unwrap();
    assert_eq!(s.engine().len(), 2);
    assert_eq!(s.recovery.replayed_records, 1);
    assert!(s.engine().get("a").is_some() && s.engine().get("b").is_some());
    assert_eq!(s.text("a").unwrap(), None, "format 2 kept no text");
    // New writes keep theirs; the next snapshot is format 4 and reads back.
    put_text(&s, "c", "a new text after the upgrade “ü”");
    s.snapshot().unwrap();
    drop(s);
    let s = open_storing_texts(dir.path()).unwrap();
    assert_eq!(s.engine().len(), 3);
    assert_eq!(
        s.text("c").unwrap().unwrap(),
        "a new text after the upgrade “ü”"
    );
    assert_eq!(
        snapshot::read_header(
            &snapshot::list_snapshots(dir.path())
                .unwrap()
                .last()
                .unwrap()
                .1
        )
        .unwrap()
        .format_version,
        snapshot::FORMAT_VERSION
    );
    // The new document kept its winnowed fingerprints through the
    // snapshot; the old ones have the sampled stand-in.
    let c = s.engine().get("c").unwrap();
    let fresh = s
        .engine()
        .prepare("a new text after the upgrade “ü”")
        .unwrap();
    assert_eq!(c.selection(), fresh.selection());
    let a = s.engine().get("a").unwrap();
    assert_eq!(
        a.selection(),
        &crate::text::winnow::sampled_bitmap(a.shingles(), s.engine().passage_window())[..]
    );
}

/// Every stored shingle's document frequency against a count of the
/// records the engine holds.
fn assert_df_exact(e: &Engine) {
    let mut want: BTreeMap<u32, u32> = BTreeMap::new();
    for r in e.records() {
        for &x in r.shingles() {
            *want.entry(x).or_insert(0) += 1;
        }
    }
    let keys: Vec<u32> = want.keys().copied().collect();
    let got = e.doc_frequencies(&keys);
    for ((x, n), g) in want.iter().zip(got) {
        assert_eq!(*n, g, "shingle {x:08x}");
    }
    assert_eq!(e.distinct_shingles(), want.len());
}

#[test]
fn document_frequency_is_exact_after_a_restart_from_several_restore_batches_and_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut params = EngineParams::default();
    params.index.boilerplate.enabled = true;
    let n = recovery::RESTORE_BATCH + recovery::RESTORE_BATCH / 2;
    let doc = |s: &Store, i: usize, id: String| NewDoc {
        id: DocId::parse(&id).unwrap(),
        // Texts repeat (shared shingles within and across batches).
        doc: s.engine().prepare(&text(i % 3000)).unwrap(),
        metadata: None,
        expires_ms: None,
        text: None,
        created_ms: None,
    };
    let before = {
        let s = open_with(dir.path(), params.clone()).unwrap();
        let items: Vec<_> = (0..n).map(|i| doc(&s, i, format!("d{i}"))).collect();
        for r in s.insert_many(items, WriteMode::Create).unwrap() {
            r.unwrap();
        }
        for i in (0..n).step_by(13) {
            s.remove(&format!("d{i}")).unwrap();
        }
        s.snapshot().unwrap();
        // After the snapshot, in the log: replaces and deletes.
        let items: Vec<_> = (0..n)
            .step_by(7)
            .map(|i| doc(&s, i + 1, format!("d{i}")))
            .collect();
        for r in s.insert_many(items, WriteMode::Upsert).unwrap() {
            r.unwrap();
        }
        for i in (0..n).step_by(11) {
            s.remove(&format!("d{i}")).unwrap();
        }
        assert_df_exact(s.engine());
        state(s.engine())
    };
    let s = open_with(dir.path(), params).unwrap();
    assert!(s.recovery.replayed_records > 0);
    assert_eq!(state(s.engine()), before);
    assert_df_exact(s.engine());
}
