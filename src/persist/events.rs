//! The memory backend's event log (issue 45): a collection's outbox and
//! feed, its webhook subscriptions and each subscription's delivery state,
//! in the collection directory.
//!
//! ```text
//!   <collection dir>/webhooks.json          the subscriptions (secrets included), replaced atomically
//!   <collection dir>/events/events-<S>.log  magic, then checksummed frames (format::push_frame)
//! ```
//!
//! A frame is one JSON record (`Rec`): an event appended; a
//! subscription's start (it receives events from that sequence number on);
//! a delivery settled (delivered, to retry at a time, failed with a copy of
//! the event); failed deliveries put back by hand; a subscription's
//! watermark (every event below it is settled for it); the feed trimmed
//! below a sequence number; a subscription deleted. The state is rebuilt at
//! open by replaying the log, so an event acknowledged before a kill -9 is
//! delivered after the restart: it is at or above its subscriptions'
//! watermarks and has no `delivered` record.
//!
//! Invariants:
//! - frames are written with write(2) before the call returns, so an
//!   appended event survives kill -9 (the fsync, per the collection's WAL
//!   mode, is the caller's to run: the memory backend runs it off the
//!   write's path, at once or within the log's fsync interval, [`Syncer`]);
//!   a failed write is cut back off the file, so a later frame never
//!   follows a torn one;
//! - a torn final frame (a crash mid-write) is dropped with a warning at
//!   open; any other damage fails the open naming the file and offset
//!   (never skipped silently);
//! - compaction writes the whole state into a new segment
//!   `events-<first retained seq>.log` (temporary file, fsync, rename), and
//!   only then deletes the older segments: the newest segment is always
//!   the whole truth, so an open deletes any older one left by a crash;
//! - the feed is never trimmed past an event a subscription still owes
//!   (not yet looked at, in flight or waiting for a retry); a failed
//!   delivery keeps its own copy of the event.

use super::fsops::{self, io_err};
use super::{format, PersistError};
use crate::config::WalFsync;
use crate::events::{Event, EventDraft, FailedDelivery, Subscription, FAILED_DROPPED, FAILED_KEEP};
use format::corrupt;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The subscriptions file, beside the collection's manifest.
pub const SUBSCRIPTIONS: &str = "webhooks.json";
/// The directory of the event log, inside the collection directory.
pub const DIR: &str = "events";
const MAGIC: &[u8; 8] = b"NDEVLOG1";
/// How long a delivery handed out may stay unsettled before it is handed
/// out again (a delivery task that died; normal attempts settle within
/// `webhooks.timeout_ms`).
const LEASE_MS: u64 = 10 * 60 * 1000;
/// Below this many bytes the log is never compacted.
const COMPACT_MIN_BYTES: u64 = 1 << 20;

/// One frame of the log.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Rec {
    /// The first frame of a segment: the sequence number the next event gets.
    Base {
        next_seq: u64,
    },
    Event {
        seq: u64,
        event: Event,
    },
    /// Subscription `sub` receives the events from `from` on.
    Start {
        sub: String,
        from: u64,
    },
    /// Every event below `at` is settled for `sub`.
    Cursor {
        sub: String,
        at: u64,
    },
    Delivered {
        sub: String,
        seq: u64,
    },
    Retry {
        sub: String,
        seq: u64,
        attempts: u32,
        next_ms: u64,
    },
    Failed {
        sub: String,
        seq: u64,
        failed: FailedDelivery,
    },
    /// Failed deliveries back into delivery, attempts reset.
    RetryFailed {
        sub: String,
        seqs: Vec<u64>,
    },
    /// An owed delivery with its own copy of the event (compaction).
    Owed {
        sub: String,
        seq: u64,
        attempts: u32,
        next_ms: u64,
        event: Event,
    },
    /// The feed no longer holds events below `below`.
    Trim {
        below: u64,
    },
    Deleted {
        sub: String,
    },
}

/// A delivery a subscription still owes: handed out, or waiting for a retry.
#[derive(Debug, Clone)]
struct Owed {
    event: Event,
    attempts: u32,
    next_ms: u64,
}

/// One subscription's delivery state.
#[derive(Debug, Default)]
struct SubLog {
    /// Every event below it is settled (logged as a `Cursor`).
    cursor: u64,
    /// The next event not yet looked at (in memory; `cursor` at open).
    scan: u64,
    owed: BTreeMap<u64, Owed>,
    /// Settled at or above `cursor` (delivered or failed).
    done: BTreeSet<u64>,
    /// Oldest first, at most `FAILED_KEEP`.
    failed: VecDeque<(u64, FailedDelivery)>,
}

impl SubLog {
    fn starting(from: u64) -> Self {
        SubLog {
            cursor: from,
            scan: from,
            ..Default::default()
        }
    }

    /// The lowest event it may still need.
    fn low(&self) -> u64 {
        self.owed
            .keys()
            .next()
            .copied()
            .unwrap_or(self.scan)
            .min(self.scan)
    }

    fn push_failed(&mut self, seq: u64, f: FailedDelivery) {
        self.failed.push_back((seq, f));
        while self.failed.len() > FAILED_KEEP {
            self.failed.pop_front();
            FAILED_DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// How a settled attempt ended, as the log records it.
#[derive(Debug, Clone)]
pub enum Settle {
    Delivered,
    Retry { next_ms: u64 },
    Failed { error: String, now_ms: u64 },
}

/// The group commit of appended events (`always` and `interval` modes): an append writes
/// under the log's lock and fsyncs after releasing it, so one fsync covers
/// every append written before it started.
///
/// The fsyncs are also spaced: at most one every `fsync_interval_ms` of
/// [`EventLog::open`] ([`Syncer::claim`]), so a stream of appends does not
/// put a second fsync stream beside the WAL's on the same disk (each one a
/// device flush that the WAL's group commits then queue behind). An idle
/// log is fsynced at once.
#[derive(Debug)]
pub struct Syncer {
    /// The segment being appended to (replaced by a compaction, which
    /// fsyncs what it writes itself).
    file: Mutex<Arc<File>>,
    path: Mutex<PathBuf>,
    /// Writes made (set under the log's lock) and fsynced.
    written: AtomicU64,
    synced: AtomicU64,
    /// One fsync at a time; a waiter finds its write synced by the one
    /// before it, or makes the next.
    lock: Mutex<()>,
    /// Whether an fsync is claimed and not yet started ([`Syncer::claim`]).
    claimed: AtomicBool,
    /// The least time between two fsyncs, and when the last one started
    /// (nanoseconds since `epoch`).
    spacing: Duration,
    epoch: Instant,
    last_ns: AtomicU64,
    /// Fsyncs made (what the tests check the spacing by).
    fsyncs: AtomicU64,
}

/// `Syncer::last_ns` before the first fsync.
const NEVER: u64 = u64::MAX;

impl Syncer {
    fn new(file: &Arc<File>, path: &Path, spacing_ms: u64) -> Arc<Self> {
        Arc::new(Syncer {
            file: Mutex::new(Arc::clone(file)),
            path: Mutex::new(path.to_owned()),
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            lock: Mutex::new(()),
            claimed: AtomicBool::new(false),
            spacing: Duration::from_millis(spacing_ms),
            epoch: Instant::now(),
            last_ns: AtomicU64::new(NEVER),
            fsyncs: AtomicU64::new(0),
        })
    }

    /// Return once write number `n` is fsynced.
    fn sync_to(&self, n: u64) -> Result<(), PersistError> {
        if self.synced.load(Ordering::Acquire) >= n {
            return Ok(());
        }
        let _one = self.lock.lock().expect("event log sync lock");
        if self.synced.load(Ordering::Acquire) >= n {
            return Ok(());
        }
        let target = self.written.load(Ordering::Acquire);
        let file = Arc::clone(&self.file.lock().expect("event log file"));
        let path = self.path.lock().expect("event log path").clone();
        self.last_ns
            .store(self.epoch.elapsed().as_nanos() as u64, Ordering::Release);
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        file.sync_data().map_err(io_err(&path))?;
        self.synced.fetch_max(target, Ordering::AcqRel);
        Ok(())
    }

    /// After a write with `Durable::Later`: `None` if an fsync already
    /// claimed will cover it, else how long to wait before running
    /// [`Syncer::run_claimed`] (zero when the last fsync started at least
    /// the spacing ago).
    pub fn claim(&self) -> Option<Duration> {
        if self
            .claimed
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return None;
        }
        let last = self.last_ns.load(Ordering::Acquire);
        if last == NEVER {
            return Some(Duration::ZERO);
        }
        let since =
            Duration::from_nanos((self.epoch.elapsed().as_nanos() as u64).saturating_sub(last));
        Some(self.spacing.saturating_sub(since))
    }

    /// The fsync [`Syncer::claim`] promised: it covers every write made
    /// before it releases the claim, so a write that found the claim taken
    /// is in it.
    pub fn run_claimed(&self) -> Result<(), PersistError> {
        self.claimed.store(false, Ordering::SeqCst);
        self.sync_to(self.written.load(Ordering::SeqCst))
    }

    /// Fsyncs made so far.
    pub fn fsyncs(&self) -> u64 {
        self.fsyncs.load(Ordering::Relaxed)
    }
}

impl Drop for Syncer {
    /// A claimed fsync that never ran (the runtime stopped first) is made
    /// here, when the log and its last task are gone.
    fn drop(&mut self) {
        if self.synced.load(Ordering::Acquire) < self.written.load(Ordering::Acquire) {
            let file = self.file.lock().expect("event log file");
            if let Err(e) = file.sync_data() {
                let path = self.path.lock().expect("event log path");
                tracing::error!(path = %path.display(), error = %e, "the last fsync of an event log failed");
            }
        }
    }
}

/// When a write is fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durable {
    /// Written (a kill -9 keeps it); fsynced with the next one that is.
    Written,
    /// Fsynced per the WAL mode before the call returns.
    Now,
    /// Fsynced by the caller after it releases the log, unless the mode is
    /// `never` ([`EventLog::sync_ticket`]).
    Later,
}

/// A collection's event log, subscriptions and delivery state. Not
/// thread-safe by itself: the backend holds it behind a mutex. Appends,
/// settlements and `due` (of a started subscription) write(2) and never
/// fsync; subscription changes, trims (compaction) and hand retries may
/// fsync, so the backend calls those on a blocking thread.
pub struct EventLog {
    /// The collection directory.
    dir: PathBuf,
    fsync: WalFsync,
    fsync_interval_ms: u64,
    last_sync: Instant,
    /// The segment appended to, and its length (the valid prefix).
    file: Arc<File>,
    /// Writes made to the log so far.
    writes: u64,
    syncer: Arc<Syncer>,
    path: PathBuf,
    bytes: u64,
    /// The length of the segment the last compaction wrote.
    base_bytes: u64,
    next_seq: u64,
    /// The retained events, by sequence number.
    events: BTreeMap<u64, Event>,
    subs: HashMap<String, SubLog>,
    /// The subscriptions (webhooks.json), in creation order.
    subscriptions: Vec<Subscription>,
}

fn segment_name(first: u64) -> String {
    format!("events-{first:020}.log")
}

/// A memory cursor: the event's sequence number in decimal.
pub fn parse_cursor(cursor: &str) -> Option<u64> {
    (!cursor.is_empty() && cursor.len() <= 20 && cursor.bytes().all(|b| b.is_ascii_digit()))
        .then(|| cursor.parse().ok())
        .flatten()
}

fn read_subscriptions(dir: &Path) -> Result<Vec<Subscription>, PersistError> {
    let path = dir.join(SUBSCRIPTIONS);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(&path)(e)),
    };
    serde_json::from_slice(&bytes).map_err(|e| PersistError::Corrupt {
        path,
        offset: e.column() as u64,
        reason: format!("unreadable subscriptions file: {e}"),
    })
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), PersistError> {
    let mut f = File::create(path).map_err(io_err(path))?;
    f.write_all(bytes).map_err(io_err(path))?;
    f.sync_all().map_err(io_err(path))
}

fn write_subscriptions(dir: &Path, all: &[Subscription]) -> Result<(), PersistError> {
    let path = dir.join(SUBSCRIPTIONS);
    let tmp = dir.join(format!("{SUBSCRIPTIONS}.tmp"));
    let bytes = serde_json::to_vec(all).expect("subscriptions serialize");
    if let Err(e) = write_synced(&tmp, &bytes) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fsops::commit_rename(&tmp, &path)
}

fn frame(out: &mut Vec<u8>, rec: &Rec) {
    let payload = serde_json::to_vec(rec).expect("event log records serialize");
    format::push_frame(out, &payload);
}

/// The records of one segment, and the length of its valid prefix; a torn
/// final frame is left out (its length is the second value).
fn read_segment(path: &Path) -> Result<(Vec<Rec>, u64, u64), PersistError> {
    let data = fs::read(path).map_err(io_err(path))?;
    if data.len() < MAGIC.len() {
        if MAGIC.starts_with(&data) {
            return Err(PersistError::IncompleteHeader {
                path: path.to_owned(),
            });
        }
        return Err(corrupt(path, 0, "not a neardup event log (bad magic)"));
    }
    if &data[..MAGIC.len()] != MAGIC {
        return Err(corrupt(path, 0, "not a neardup event log (bad magic)"));
    }
    format::read_json_frames(path, &data, MAGIC.len(), "event log record")
}

impl EventLog {
    /// Open (or create) the event log of the collection directory `dir`:
    /// the subscriptions, then the newest segment replayed.
    pub fn open(dir: &Path, fsync: WalFsync, fsync_interval_ms: u64) -> Result<Self, PersistError> {
        let subscriptions = read_subscriptions(dir)?;
        let edir = dir.join(DIR);
        fsops::ensure_dir(&edir)?;
        for entry in fs::read_dir(&edir).map_err(io_err(&edir))? {
            let p = entry.map_err(io_err(&edir))?.path();
            if p.extension().is_some_and(|e| e == "tmp") {
                let _ = fs::remove_file(&p);
            }
        }
        let segments = fsops::list_numbered(&edir, "events-", ".log")?;
        let mut log = match segments.last() {
            None => {
                let path = edir.join(segment_name(0));
                let mut bytes = MAGIC.to_vec();
                frame(&mut bytes, &Rec::Base { next_seq: 0 });
                let tmp = path.with_extension("log.tmp");
                write_synced(&tmp, &bytes)?;
                fsops::commit_rename(&tmp, &path)?;
                let file = OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .map_err(io_err(&path))?;
                let file = Arc::new(file);
                EventLog {
                    dir: dir.to_owned(),
                    fsync,
                    fsync_interval_ms,
                    last_sync: Instant::now(),
                    writes: 0,
                    syncer: Syncer::new(&file, &path, fsync_interval_ms),
                    file,
                    path,
                    bytes: bytes.len() as u64,
                    base_bytes: bytes.len() as u64,
                    next_seq: 0,
                    events: BTreeMap::new(),
                    subs: HashMap::new(),
                    subscriptions: Vec::new(),
                }
            }
            Some((_, path)) => {
                let (recs, valid, torn) = read_segment(path)?;
                if torn > 0 {
                    tracing::warn!(
                        path = %path.display(),
                        torn_bytes = torn,
                        "the event log ends in an incomplete record (a crash while writing it); dropped"
                    );
                    let f = OpenOptions::new()
                        .write(true)
                        .open(path)
                        .map_err(io_err(path))?;
                    f.set_len(valid).map_err(io_err(path))?;
                    f.sync_all().map_err(io_err(path))?;
                }
                let file = OpenOptions::new()
                    .append(true)
                    .open(path)
                    .map_err(io_err(path))?;
                let file = Arc::new(file);
                let mut log = EventLog {
                    dir: dir.to_owned(),
                    fsync,
                    fsync_interval_ms,
                    last_sync: Instant::now(),
                    writes: 0,
                    syncer: Syncer::new(&file, path, fsync_interval_ms),
                    file,
                    path: path.clone(),
                    bytes: valid,
                    base_bytes: valid,
                    next_seq: 0,
                    events: BTreeMap::new(),
                    subs: HashMap::new(),
                    subscriptions: Vec::new(),
                };
                for rec in recs {
                    log.apply(rec);
                }
                for (_, older) in &segments[..segments.len() - 1] {
                    // Left by a crash after a compaction's rename.
                    fs::remove_file(older).map_err(io_err(older))?;
                }
                log
            }
        };
        // Reconcile with webhooks.json (it is written first on create and
        // delete, so a crash in between leaves it ahead of the log).
        log.subs
            .retain(|id, _| subscriptions.iter().any(|s| &s.id == id));
        let missing: Vec<String> = subscriptions
            .iter()
            .filter(|s| !log.subs.contains_key(&s.id))
            .map(|s| s.id.clone())
            .collect();
        log.subscriptions = subscriptions;
        for id in missing {
            log.start(&id)?;
        }
        for s in log.subs.values_mut() {
            s.scan = s.cursor;
        }
        Ok(log)
    }

    /// Apply one record to the state (replay and live writes alike).
    fn apply(&mut self, rec: Rec) {
        match rec {
            Rec::Base { next_seq } => self.next_seq = self.next_seq.max(next_seq),
            Rec::Event { seq, event } => {
                self.next_seq = self.next_seq.max(seq + 1);
                self.events.insert(seq, event);
            }
            Rec::Start { sub, from } => {
                self.subs.insert(sub, SubLog::starting(from));
            }
            Rec::Cursor { sub, at } => {
                if let Some(s) = self.subs.get_mut(&sub) {
                    s.cursor = s.cursor.max(at);
                    s.scan = s.scan.max(at);
                    let keep = s.done.split_off(&at);
                    s.done = keep;
                }
            }
            Rec::Delivered { sub, seq } => {
                if let Some(s) = self.subs.get_mut(&sub) {
                    s.owed.remove(&seq);
                    s.done.insert(seq);
                }
            }
            Rec::Retry {
                sub,
                seq,
                attempts,
                next_ms,
            } => {
                let event = self.events.get(&seq).cloned();
                if let Some(s) = self.subs.get_mut(&sub) {
                    if let Some(o) = s.owed.get_mut(&seq) {
                        o.attempts = attempts;
                        o.next_ms = next_ms;
                    } else if let Some(event) = event {
                        s.owed.insert(
                            seq,
                            Owed {
                                event,
                                attempts,
                                next_ms,
                            },
                        );
                    }
                }
            }
            Rec::Failed { sub, seq, failed } => {
                if let Some(s) = self.subs.get_mut(&sub) {
                    s.owed.remove(&seq);
                    s.done.insert(seq);
                    s.push_failed(seq, failed);
                }
            }
            Rec::RetryFailed { sub, seqs } => {
                if let Some(s) = self.subs.get_mut(&sub) {
                    let (back, keep): (VecDeque<_>, VecDeque<_>) =
                        s.failed.drain(..).partition(|(q, _)| seqs.contains(q));
                    s.failed = keep;
                    for (seq, f) in back {
                        s.done.remove(&seq);
                        s.owed.insert(
                            seq,
                            Owed {
                                event: f.event,
                                attempts: 0,
                                next_ms: 0,
                            },
                        );
                    }
                }
            }
            Rec::Owed {
                sub,
                seq,
                attempts,
                next_ms,
                event,
            } => {
                if let Some(s) = self.subs.get_mut(&sub) {
                    s.owed.insert(
                        seq,
                        Owed {
                            event,
                            attempts,
                            next_ms,
                        },
                    );
                }
            }
            Rec::Trim { below } => {
                let keep = self.events.split_off(&below);
                self.events = keep;
            }
            Rec::Deleted { sub } => {
                self.subs.remove(&sub);
            }
        }
    }

    /// Write `recs` to the segment (write(2); fsync per the mode when
    /// `sync`), then apply them. A failed write is cut back off the file
    /// and applies nothing.
    fn write(&mut self, recs: Vec<Rec>, durable: Durable) -> Result<(), PersistError> {
        let mut buf = Vec::new();
        for r in &recs {
            frame(&mut buf, r);
        }
        if let Err(e) = (&*self.file).write_all(&buf) {
            let _ = self.file.set_len(self.bytes);
            return Err(io_err(&self.path)(e));
        }
        self.bytes += buf.len() as u64;
        self.writes += 1;
        // SeqCst, as `Syncer::claim` and `run_claimed` are: a claim that
        // finds an fsync claimed is sure that fsync reads this count.
        self.syncer.written.store(self.writes, Ordering::SeqCst);
        // `Later` is the caller's to fsync (`sync_ticket`), never here.
        if durable == Durable::Now {
            let due = match self.fsync {
                WalFsync::Always => true,
                WalFsync::Interval => {
                    self.last_sync.elapsed().as_millis() as u64 >= self.fsync_interval_ms
                }
                WalFsync::Never => false,
            };
            if due {
                self.file.sync_data().map_err(io_err(&self.path))?;
                self.syncer.synced.fetch_max(self.writes, Ordering::AcqRel);
                self.last_sync = Instant::now();
            }
        }
        for r in recs {
            self.apply(r);
        }
        Ok(())
    }

    fn start(&mut self, sub: &str) -> Result<(), PersistError> {
        let from = self.next_seq;
        self.write(
            vec![Rec::Start {
                sub: sub.to_owned(),
                from,
            }],
            Durable::Now,
        )
    }

    /// What fsyncs (after the log is released) the writes made with
    /// `Durable::Later`, [`Syncer::claim`]; `None` in `never` mode.
    pub fn sync_ticket(&self) -> Option<Arc<Syncer>> {
        (self.fsync != WalFsync::Never).then(|| Arc::clone(&self.syncer))
    }

    /// Whether `sub`'s start is logged ([`Self::due`] logs it, fsynced,
    /// on the subscription's first call).
    pub fn started(&self, sub: &str) -> bool {
        self.subs.contains_key(sub)
    }

    pub fn subscriptions(&self) -> &[Subscription] {
        &self.subscriptions
    }

    /// Create or replace `s`; true if new (it receives only the events
    /// appended from now on).
    pub fn put_subscription(&mut self, s: Subscription) -> Result<bool, PersistError> {
        let mut all = self.subscriptions.clone();
        let id = s.id.clone();
        let created = match all.iter_mut().find(|x| x.id == s.id) {
            Some(x) => {
                *x = s;
                false
            }
            None => {
                all.push(s);
                true
            }
        };
        write_subscriptions(&self.dir, &all)?;
        self.subscriptions = all;
        if created || !self.subs.contains_key(&id) {
            self.start(&id)?;
        }
        Ok(created)
    }

    /// Delete subscription `id` with its pending and failed deliveries.
    pub fn delete_subscription(&mut self, id: &str) -> Result<bool, PersistError> {
        if !self.subscriptions.iter().any(|s| s.id == id) {
            return Ok(false);
        }
        let all: Vec<Subscription> = self
            .subscriptions
            .iter()
            .filter(|s| s.id != id)
            .cloned()
            .collect();
        write_subscriptions(&self.dir, &all)?;
        self.subscriptions = all;
        self.write(vec![Rec::Deleted { sub: id.to_owned() }], Durable::Now)?;
        Ok(true)
    }

    /// Number and store `drafts` (`new_id` makes each event's id).
    pub fn append(
        &mut self,
        drafts: Vec<EventDraft>,
        mut new_id: impl FnMut() -> String,
    ) -> Result<Vec<Event>, PersistError> {
        let mut seq = self.next_seq;
        let events: Vec<(u64, Event)> = drafts
            .into_iter()
            .map(|draft| {
                let e = Event {
                    id: new_id(),
                    cursor: seq.to_string(),
                    draft,
                };
                seq += 1;
                (seq - 1, e)
            })
            .collect();
        let out = events.iter().map(|(_, e)| e.clone()).collect();
        self.write(
            events
                .into_iter()
                .map(|(seq, event)| Rec::Event { seq, event })
                .collect(),
            Durable::Later,
        )?;
        Ok(out)
    }

    /// Up to `limit` events strictly after `after`, oldest first, and the
    /// oldest retained cursor.
    pub fn read(&self, after: Option<u64>, limit: usize) -> (Vec<Event>, Option<String>) {
        let from = after.map_or(0, |a| a.saturating_add(1));
        let events = self
            .events
            .range(from..)
            .take(limit)
            .map(|(_, e)| e.clone())
            .collect();
        let oldest = self.events.values().next().map(|e| e.cursor.clone());
        (events, oldest)
    }

    /// Drop events older than `keep_ms` or beyond the newest `keep_max`,
    /// never one a subscription still owes; compacts the log when most of
    /// it is garbage. How many were dropped.
    pub fn trim(
        &mut self,
        keep_ms: u64,
        keep_max: usize,
        now_ms: u64,
    ) -> Result<usize, PersistError> {
        let protect = self
            .subs
            .values()
            .map(SubLog::low)
            .min()
            .unwrap_or(u64::MAX);
        let mut below = None;
        let mut left = self.events.len();
        for (&seq, e) in &self.events {
            let old = e.draft.time_ms.saturating_add(keep_ms) < now_ms;
            if seq >= protect || !(old || left > keep_max) {
                break;
            }
            left -= 1;
            below = Some(seq + 1);
        }
        let dropped = self.events.len() - left;
        if let Some(below) = below {
            self.write(vec![Rec::Trim { below }], Durable::Written)?;
        }
        if self.bytes > COMPACT_MIN_BYTES && self.bytes > 2 * self.base_bytes {
            self.compact()?;
        }
        Ok(dropped)
    }

    /// Rewrite the whole state as a new segment, then delete the old one.
    fn compact(&mut self) -> Result<(), PersistError> {
        let first = self.events.keys().next().copied().unwrap_or(self.next_seq);
        let edir = self.dir.join(DIR);
        let path = edir.join(segment_name(first));
        let mut buf = MAGIC.to_vec();
        frame(
            &mut buf,
            &Rec::Base {
                next_seq: self.next_seq,
            },
        );
        for (&seq, e) in &self.events {
            frame(
                &mut buf,
                &Rec::Event {
                    seq,
                    event: e.clone(),
                },
            );
        }
        for (id, s) in &self.subs {
            frame(
                &mut buf,
                &Rec::Start {
                    sub: id.clone(),
                    from: s.low(),
                },
            );
            for &seq in s.done.range(s.low()..) {
                frame(
                    &mut buf,
                    &Rec::Delivered {
                        sub: id.clone(),
                        seq,
                    },
                );
            }
            for (&seq, o) in &s.owed {
                frame(
                    &mut buf,
                    &Rec::Owed {
                        sub: id.clone(),
                        seq,
                        attempts: o.attempts,
                        next_ms: o.next_ms,
                        event: o.event.clone(),
                    },
                );
            }
            for (seq, f) in &s.failed {
                frame(
                    &mut buf,
                    &Rec::Failed {
                        sub: id.clone(),
                        seq: *seq,
                        failed: f.clone(),
                    },
                );
            }
        }
        let tmp = path.with_extension("log.tmp");
        if let Err(e) = write_synced(&tmp, &buf) {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        fsops::commit_rename(&tmp, &path)?;
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io_err(&path))?;
        let old = std::mem::replace(&mut self.path, path);
        self.file = Arc::new(file);
        *self.syncer.file.lock().expect("event log file") = Arc::clone(&self.file);
        *self.syncer.path.lock().expect("event log path") = self.path.clone();
        // Everything written so far is in the new segment, fsynced.
        self.syncer.synced.fetch_max(self.writes, Ordering::AcqRel);
        self.bytes = buf.len() as u64;
        self.base_bytes = self.bytes;
        if old != self.path {
            fs::remove_file(&old).map_err(io_err(&old))?;
        }
        // Replayed, the new segment must give this state: the watermarks
        // are the `low` written above.
        for s in self.subs.values_mut() {
            let low = s.low();
            s.cursor = low;
            s.done = s.done.split_off(&low);
        }
        Ok(())
    }

    /// The deliveries due to `sub` at `now_ms` (retries whose time has
    /// come, then new events it selects), at most `max`; each is leased
    /// until settled.
    pub fn due(
        &mut self,
        sub: &Subscription,
        now_ms: u64,
        max: usize,
    ) -> Result<Vec<(u64, Event, u32)>, PersistError> {
        if !self.subs.contains_key(&sub.id) {
            if !self.subscriptions.iter().any(|s| s.id == sub.id) {
                return Ok(Vec::new());
            }
            self.start(&sub.id)?;
        }
        let next_seq = self.next_seq;
        let s = self.subs.get_mut(&sub.id).expect("started above");
        let mut out = Vec::new();
        for (&seq, o) in s.owed.iter_mut() {
            if out.len() >= max {
                break;
            }
            if o.next_ms <= now_ms {
                o.next_ms = now_ms + LEASE_MS;
                out.push((seq, o.event.clone(), o.attempts));
            }
        }
        while s.scan < next_seq && out.len() < max {
            let seq = s.scan;
            s.scan += 1;
            if s.done.contains(&seq) || s.owed.contains_key(&seq) {
                continue;
            }
            let Some(e) = self.events.get(&seq) else {
                continue;
            };
            if sub.selects(&e.draft).is_some() {
                s.owed.insert(
                    seq,
                    Owed {
                        event: e.clone(),
                        attempts: 0,
                        next_ms: now_ms + LEASE_MS,
                    },
                );
                out.push((seq, e.clone(), 0));
            }
        }
        self.advance(&sub.id)?;
        Ok(out)
    }

    /// Log `sub`'s watermark if it moved.
    fn advance(&mut self, sub: &str) -> Result<(), PersistError> {
        let Some(s) = self.subs.get(sub) else {
            return Ok(());
        };
        let low = s.low();
        if low > s.cursor {
            self.write(
                vec![Rec::Cursor {
                    sub: sub.to_owned(),
                    at: low,
                }],
                Durable::Written,
            )?;
        }
        Ok(())
    }

    /// Record the outcome of attempt number `attempts + 1` of event `seq`
    /// to `sub` (nothing if the subscription or the delivery is gone).
    pub fn settle(
        &mut self,
        sub: &str,
        seq: u64,
        attempts: u32,
        outcome: Settle,
    ) -> Result<(), PersistError> {
        let Some(s) = self.subs.get(sub) else {
            return Ok(());
        };
        let Some(owed) = s.owed.get(&seq) else {
            return Ok(());
        };
        let rec = match outcome {
            Settle::Delivered => Rec::Delivered {
                sub: sub.to_owned(),
                seq,
            },
            Settle::Retry { next_ms } => Rec::Retry {
                sub: sub.to_owned(),
                seq,
                attempts: attempts + 1,
                next_ms,
            },
            Settle::Failed { error, now_ms } => Rec::Failed {
                sub: sub.to_owned(),
                seq,
                failed: FailedDelivery {
                    event: owed.event.clone(),
                    attempts: attempts + 1,
                    error,
                    failed_ms: now_ms,
                },
            },
        };
        // Written, not fsynced: a kill -9 keeps it; a power loss may lose
        // it, and the delivery is then made again (at least once).
        self.write(vec![rec], Durable::Written)?;
        self.advance(sub)
    }

    /// `sub`'s failed deliveries, newest first.
    pub fn failed(&self, sub: &str, limit: usize) -> Vec<FailedDelivery> {
        self.subs.get(sub).map_or_else(Vec::new, |s| {
            s.failed
                .iter()
                .rev()
                .take(limit)
                .map(|(_, f)| f.clone())
                .collect()
        })
    }

    /// Put `sub`'s failed deliveries (of `event_id`, or all) back into
    /// delivery, attempts reset; how many.
    pub fn retry_failed(
        &mut self,
        sub: &str,
        event_id: Option<&str>,
    ) -> Result<usize, PersistError> {
        let Some(s) = self.subs.get(sub) else {
            return Ok(0);
        };
        let seqs: Vec<u64> = s
            .failed
            .iter()
            .filter(|(_, f)| event_id.is_none_or(|id| f.event.id == id))
            .map(|(seq, _)| *seq)
            .collect();
        if seqs.is_empty() {
            return Ok(0);
        }
        let n = seqs.len();
        self.write(
            vec![Rec::RetryFailed {
                sub: sub.to_owned(),
                seqs,
            }],
            Durable::Now,
        )?;
        Ok(n)
    }

    /// Deliveries `sub` owes: waiting for a retry or in flight, plus the
    /// events not yet looked at that it selects.
    pub fn pending(&self, sub: &str) -> u64 {
        let (Some(s), Some(subscription)) = (
            self.subs.get(sub),
            self.subscriptions.iter().find(|x| x.id == sub),
        ) else {
            return 0;
        };
        let unseen = self
            .events
            .range(s.scan..)
            .filter(|(seq, e)| {
                !s.done.contains(seq)
                    && !s.owed.contains_key(seq)
                    && subscription.selects(&e.draft).is_some()
            })
            .count();
        (s.owed.len() + unseen) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Measure, Score};
    use crate::events::{EventKind, EventMatch};

    fn sub(id: &str) -> Subscription {
        Subscription {
            id: id.into(),
            url: "http://127.0.0.1:1/".into(),
            secret: "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0".into(),
            kinds: EventKind::ALL.to_vec(),
            measure: Measure::Jaccard,
            score: Score::Raw,
            threshold: 0.8,
            created_ms: 1,
        }
    }

    fn draft(doc: &str, jaccard: f64, time_ms: u64) -> EventDraft {
        EventDraft {
            kind: EventKind::Duplicate,
            time_ms,
            document: doc.into(),
            write: "created".into(),
            matches: vec![EventMatch {
                id: "stored «é»".into(),
                jaccard,
                query_in_stored: jaccard,
                stored_in_query: jaccard,
                content_jaccard: None,
            }],
        }
    }

    fn ids() -> impl FnMut() -> String {
        let mut n = 0;
        move || {
            n += 1;
            format!("evt_{n}")
        }
    }

    #[test]
    fn an_owed_delivery_survives_a_reopen_and_a_delivered_one_does_not_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let s = sub("wh_1");
        let mut log = EventLog::open(dir.path(), WalFsync::Always, 0).unwrap();
        assert!(log.put_subscription(s.clone()).unwrap());
        let mut mk = ids();
        log.append(
            vec![draft("a", 0.9, 1), draft("b", 0.5, 1), draft("c", 0.95, 1)],
            &mut mk,
        )
        .unwrap();
        let due = log.due(&s, 10, 10).unwrap();
        assert_eq!(due.iter().map(|d| d.0).collect::<Vec<_>>(), vec![0, 2]);
        log.settle("wh_1", 0, 0, Settle::Delivered).unwrap();
        drop(log);
        let mut log = EventLog::open(dir.path(), WalFsync::Always, 0).unwrap();
        assert_eq!(log.pending("wh_1"), 1);
        let due = log.due(&s, 10, 10).unwrap();
        assert_eq!(due.iter().map(|d| d.0).collect::<Vec<_>>(), vec![2]);
        assert_eq!(due[0].1.id, "evt_3");
    }

    #[test]
    fn a_failed_delivery_is_listed_and_retried_by_hand_across_a_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let s = sub("wh_1");
        let mut log = EventLog::open(dir.path(), WalFsync::Never, 0).unwrap();
        log.put_subscription(s.clone()).unwrap();
        log.append(vec![draft("a", 0.9, 1)], ids()).unwrap();
        let due = log.due(&s, 10, 10).unwrap();
        log.settle("wh_1", due[0].0, 0, Settle::Retry { next_ms: 20 })
            .unwrap();
        assert!(log.due(&s, 15, 10).unwrap().is_empty());
        let again = log.due(&s, 20, 10).unwrap();
        assert_eq!(again[0].2, 1);
        log.settle(
            "wh_1",
            again[0].0,
            1,
            Settle::Failed {
                error: "HTTP 500".into(),
                now_ms: 21,
            },
        )
        .unwrap();
        assert_eq!(log.pending("wh_1"), 0);
        // Trim everything and compact: the failed copy remains.
        assert_eq!(log.trim(0, 0, 1000).unwrap(), 1);
        log.compact().unwrap();
        drop(log);
        let mut log = EventLog::open(dir.path(), WalFsync::Never, 0).unwrap();
        let failed = log.failed("wh_1", 10);
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].attempts, 2);
        assert_eq!(log.retry_failed("wh_1", Some("evt_1")).unwrap(), 1);
        let due = log.due(&s, 30, 10).unwrap();
        assert_eq!((due[0].1.id.as_str(), due[0].2), ("evt_1", 0));
        assert!(log.failed("wh_1", 10).is_empty());
    }

    #[test]
    fn trimming_keeps_what_a_subscription_owes() {
        let dir = tempfile::tempdir().unwrap();
        let s = sub("wh_1");
        let mut log = EventLog::open(dir.path(), WalFsync::Never, 0).unwrap();
        log.append(vec![draft("old", 0.9, 1)], ids()).unwrap();
        log.put_subscription(s.clone()).unwrap();
        log.append(vec![draft("a", 0.9, 1), draft("b", 0.9, 1)], ids())
            .unwrap();
        assert_eq!(log.trim(0, 0, 1000).unwrap(), 1);
        assert_eq!(log.read(None, 10).1.as_deref(), Some("1"));
        let due = log.due(&s, 10, 1).unwrap();
        log.settle("wh_1", due[0].0, 0, Settle::Delivered).unwrap();
        assert_eq!(log.trim(0, 0, 1000).unwrap(), 1);
        let (events, oldest) = log.read(Some(0), 10);
        assert_eq!(oldest.as_deref(), Some("2"));
        assert_eq!(events.len(), 1);
    }

    #[test]
    fn a_torn_final_frame_is_dropped_and_a_damaged_one_in_the_middle_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = EventLog::open(dir.path(), WalFsync::Always, 0).unwrap();
        log.append(vec![draft("a", 0.9, 1), draft("b", 0.9, 1)], ids())
            .unwrap();
        let path = log.path.clone();
        drop(log);
        let mut bytes = fs::read(&path).unwrap();
        let full = bytes.len();
        bytes.truncate(full - 3);
        fs::write(&path, &bytes).unwrap();
        let log = EventLog::open(dir.path(), WalFsync::Always, 0).unwrap();
        assert_eq!(log.read(None, 10).0.len(), 1);
        drop(log);
        let mut bytes = fs::read(&path).unwrap();
        let mid = MAGIC.len() + 14;
        bytes[mid] ^= 0xff;
        fs::write(&path, &bytes).unwrap();
        let err = EventLog::open(dir.path(), WalFsync::Always, 0)
            .err()
            .unwrap();
        assert!(err.to_string().contains("events-"), "{err}");
    }

    #[test]
    fn appends_in_a_stream_share_spaced_fsyncs_and_each_is_covered_by_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = EventLog::open(dir.path(), WalFsync::Always, 60).unwrap();
        let mut mk = ids();
        // An idle log is fsynced at once.
        log.append(vec![draft("first", 0.9, 1)], &mut mk).unwrap();
        let syncer = log.sync_ticket().unwrap();
        assert_eq!(syncer.claim(), Some(Duration::ZERO));
        // Claimed and not yet run: later appends ride on that claim.
        log.append(vec![draft("second", 0.9, 1)], &mut mk).unwrap();
        assert_eq!(syncer.claim(), None);
        syncer.run_claimed().unwrap();
        assert_eq!(syncer.fsyncs(), 1);
        assert_eq!(syncer.synced.load(Ordering::SeqCst), log.writes);
        // A stream of appends right after: one fsync, due at the spacing.
        let mut waits = Vec::new();
        for n in 0..50 {
            log.append(vec![draft(&format!("d{n}"), 0.9, 1)], &mut mk)
                .unwrap();
            waits.extend(syncer.claim());
        }
        assert_eq!(waits.len(), 1, "{waits:?}");
        assert!(
            waits[0] > Duration::ZERO && waits[0] <= Duration::from_millis(60),
            "{waits:?}"
        );
        assert!(syncer.synced.load(Ordering::SeqCst) < log.writes);
        syncer.run_claimed().unwrap();
        assert_eq!(syncer.fsyncs(), 2);
        assert_eq!(syncer.synced.load(Ordering::SeqCst), log.writes);
        // Once released, the next append claims again.
        log.append(vec![draft("last", 0.9, 1)], &mut mk).unwrap();
        assert!(syncer.claim().is_some());
    }
}
