//! The memory backend's store of review decisions (issue 46): one
//! append-only log per collection, in the collection directory.
//!
//! ```text
//!   <collection dir>/decisions.log   magic, then checksummed frames (format::push_frame)
//! ```
//!
//! A frame is one JSON record: a decision stored (`put`, the whole
//! decision: a new one or an edit replacing the pair's previous) or a
//! pair's decision deleted (`delete`). The set is rebuilt at open by
//! replaying the log, later frames winning.
//!
//! Why a log rather than a file rewritten whole: a moderator's desk writes
//! one decision at a time, thousands of them; a rewrite would cost the
//! whole set per decision (and its fsync grows with it), an append costs
//! one frame and one fsync whatever the count. The log is compacted by
//! rewrite (temporary file, fsync, rename) once it is at least
//! [`COMPACT_MIN_BYTES`] and more than twice what the live decisions take,
//! so edits and deletes do not make it grow without bound.
//!
//! Invariants:
//! - a frame is written and fsynced (`fdatasync`) before the call
//!   returns, whatever `storage.wal_fsync` says: a decision is a person's
//!   work, rare next to writes, and acknowledged only once it survives a
//!   power loss; a failed write is cut back off the file, so a later frame
//!   never follows a torn one;
//! - a torn final frame (a crash mid-write: never acknowledged) is cut
//!   with a warning at open; any other damage (a checksum, a bad magic, a
//!   record that does not parse) fails the open naming the file and
//!   offset, and nothing is dropped: the backend answers an error until the
//!   file is repaired;
//! - no file exists until the first decision is stored (a read of a
//!   collection without decisions creates nothing).

use super::fsops::{self, io_err};
use super::{format, PersistError};
use crate::review::{Decision, DecisionSet, PairKey};
use format::corrupt;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The decisions log, in the collection directory.
pub const FILE: &str = "decisions.log";
const MAGIC: &[u8; 8] = b"NDREVIW1";
/// Below this many bytes the log is never compacted.
pub const COMPACT_MIN_BYTES: u64 = 256 << 10;

/// One frame of the log.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Rec {
    Put { decision: Decision },
    Delete { a: String, b: String },
}

/// A collection's decisions and the log that keeps them. Not thread-safe
/// by itself: the backend holds it behind a mutex and calls its writes on
/// a blocking thread (each fsyncs).
#[derive(Debug)]
pub struct DecisionLog {
    path: PathBuf,
    /// The log open for appending; `None` until the first decision.
    file: Option<File>,
    /// Its length: the valid prefix.
    bytes: u64,
    /// Frame bytes of the live decisions (what a compaction would write).
    live_bytes: u64,
    /// The current set, shared with readers (copied on write only while
    /// a reader still holds it).
    set: Arc<DecisionSet>,
}

fn frame(out: &mut Vec<u8>, rec: &Rec) {
    let payload = serde_json::to_vec(rec).expect("decision records serialize");
    format::push_frame(out, &payload);
}

fn frame_len(d: &Decision) -> u64 {
    let mut buf = Vec::new();
    frame(
        &mut buf,
        &Rec::Put {
            decision: d.clone(),
        },
    );
    buf.len() as u64
}

/// The records of the log, the length of its valid prefix and of a torn
/// final frame (0 if none).
fn read_log(path: &Path, data: &[u8]) -> Result<(Vec<Rec>, u64, u64), PersistError> {
    if data.len() < MAGIC.len() {
        if MAGIC.starts_with(data) {
            // Torn while the file was being created: nothing was stored.
            return Ok((Vec::new(), 0, data.len() as u64));
        }
        return Err(corrupt(path, 0, "not a neardup decisions log (bad magic)"));
    }
    if &data[..MAGIC.len()] != MAGIC {
        return Err(corrupt(path, 0, "not a neardup decisions log (bad magic)"));
    }
    format::read_json_frames(path, data, MAGIC.len(), "decision record")
}

impl DecisionLog {
    /// Open the decisions of the collection directory `dir` (none if it
    /// has no log yet): the log replayed, a torn final frame cut.
    pub fn open(dir: &Path) -> Result<Self, PersistError> {
        let path = dir.join(FILE);
        let _ = fs::remove_file(dir.join(format!("{FILE}.tmp")));
        let data = match fs::read(&path) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self {
                    path,
                    file: None,
                    bytes: 0,
                    live_bytes: 0,
                    set: Arc::default(),
                })
            }
            Err(e) => return Err(io_err(&path)(e)),
        };
        let (recs, valid, torn) = read_log(&path, &data)?;
        let mut set = DecisionSet::default();
        for rec in recs {
            match rec {
                Rec::Put { decision } => {
                    set.insert(decision);
                }
                Rec::Delete { a, b } => {
                    set.remove(&PairKey { a, b });
                }
            }
        }
        let file = if valid == 0 {
            // Only a torn magic: start again.
            fs::remove_file(&path).map_err(io_err(&path))?;
            None
        } else {
            let f = OpenOptions::new()
                .append(true)
                .open(&path)
                .map_err(io_err(&path))?;
            if torn > 0 {
                tracing::warn!(
                    path = %path.display(),
                    torn_bytes = torn,
                    "the decisions log ends in an incomplete record (a crash while writing it, never acknowledged); cut"
                );
                f.set_len(valid).map_err(io_err(&path))?;
                f.sync_all().map_err(io_err(&path))?;
            }
            Some(f)
        };
        let live_bytes = set.iter().map(frame_len).sum();
        Ok(Self {
            path,
            file,
            bytes: valid,
            live_bytes,
            set: Arc::new(set),
        })
    }

    /// The current decisions (cheap: shared).
    pub fn set(&self) -> Arc<DecisionSet> {
        Arc::clone(&self.set)
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes in the log now.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Store `d` durably, replacing the pair's decision; the previous one.
    /// Its `revision` is set here: 1 for a new pair, one more than the
    /// previous decision's otherwise.
    pub fn put(&mut self, mut d: Decision) -> Result<Option<Decision>, PersistError> {
        let key = d.key();
        let previous = self.set.get(&key.a, &key.b).cloned();
        d.revision = Decision::revised(previous.as_ref());
        let added = frame_len(&d);
        self.append(&Rec::Put {
            decision: d.clone(),
        })?;
        self.live_bytes += added;
        if let Some(p) = &previous {
            self.live_bytes = self.live_bytes.saturating_sub(frame_len(p));
        }
        Arc::make_mut(&mut self.set).insert(d);
        self.maybe_compact()?;
        Ok(previous)
    }

    /// Delete the pair's decision durably; the one deleted, if any.
    pub fn delete(&mut self, key: &PairKey) -> Result<Option<Decision>, PersistError> {
        let Some(previous) = self.set.get(&key.a, &key.b).cloned() else {
            return Ok(None);
        };
        self.append(&Rec::Delete {
            a: key.a.clone(),
            b: key.b.clone(),
        })?;
        self.live_bytes = self.live_bytes.saturating_sub(frame_len(&previous));
        Arc::make_mut(&mut self.set).remove(key);
        self.maybe_compact()?;
        Ok(Some(previous))
    }

    /// Write one frame (creating the log first if there is none) and fsync
    /// it; a failed write is cut back off the file.
    fn append(&mut self, rec: &Rec) -> Result<(), PersistError> {
        if self.file.is_none() {
            let tmp = self.path.with_extension("log.tmp");
            if let Err(e) = write_synced(&tmp, MAGIC) {
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
            fsops::commit_rename(&tmp, &self.path)?;
            let f = OpenOptions::new()
                .append(true)
                .open(&self.path)
                .map_err(io_err(&self.path))?;
            self.file = Some(f);
            self.bytes = MAGIC.len() as u64;
        }
        let file = self.file.as_ref().expect("opened above");
        let mut buf = Vec::new();
        frame(&mut buf, rec);
        let written = (&*file).write_all(&buf).and_then(|()| file.sync_data());
        if let Err(e) = written {
            let _ = file.set_len(self.bytes);
            return Err(io_err(&self.path)(e));
        }
        self.bytes += buf.len() as u64;
        Ok(())
    }

    fn maybe_compact(&mut self) -> Result<(), PersistError> {
        if self.bytes >= COMPACT_MIN_BYTES
            && self.bytes > 2 * (self.live_bytes + MAGIC.len() as u64)
        {
            self.compact()?;
        }
        Ok(())
    }

    /// Rewrite the log as one `put` per live decision (temporary file,
    /// fsync, rename): after a crash at any instant the log is the old one
    /// or the new one, both giving the same set.
    pub fn compact(&mut self) -> Result<(), PersistError> {
        let mut buf = MAGIC.to_vec();
        for d in self.set.iter() {
            frame(
                &mut buf,
                &Rec::Put {
                    decision: d.clone(),
                },
            );
        }
        let tmp = self.path.with_extension("log.tmp");
        if let Err(e) = write_synced(&tmp, &buf) {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        fsops::commit_rename(&tmp, &self.path)?;
        let f = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(io_err(&self.path))?;
        self.file = Some(f);
        self.bytes = buf.len() as u64;
        self.live_bytes = self.bytes - MAGIC.len() as u64;
        Ok(())
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), PersistError> {
    let mut f = File::create(path).map_err(io_err(path))?;
    f.write_all(bytes).map_err(io_err(path))?;
    f.sync_all().map_err(io_err(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::{DecisionScores, Verdict};

    fn decision(x: &str, y: &str, verdict: Verdict, note: Option<&str>) -> Decision {
        let k = PairKey::new(x, y).unwrap();
        Decision {
            a: k.a,
            b: k.b,
            verdict,
            note: note.map(str::to_owned),
            decided_by: Some("modération".into()),
            decided_at: "2026-11-29T03:38:15.123Z".into(),
            revision: 0,
            scores: Some(DecisionScores {
                jaccard: 0.1 + 0.2,
                containment: 2.0 / 3.0,
                content_jaccard: None,
            }),
        }
    }

    #[test]
    fn decisions_are_replayed_with_their_revisions_edits_and_deletes() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = DecisionLog::open(dir.path()).unwrap();
        assert!(log.set().is_empty());
        assert!(!dir.path().join(FILE).exists(), "a read creates nothing");
        let first = decision(
            "offre-é",
            "offre-a",
            Verdict::Duplicate,
            Some("même annonce"),
        );
        assert_eq!(log.put(first.clone()).unwrap(), None);
        let edit = decision(
            "offre-a",
            "offre-é",
            Verdict::NotDuplicate,
            Some("« autre poste »"),
        );
        let previous = log.put(edit).unwrap().unwrap();
        assert_eq!(previous.revision, 1);
        assert_eq!(previous.verdict, Verdict::Duplicate);
        log.put(decision("вакансия-1", "вакансия-2", Verdict::Related, None))
            .unwrap();
        log.put(decision("招聘-1", "招聘-2", Verdict::Duplicate, None))
            .unwrap();
        let gone = log
            .delete(&PairKey::new("招聘-2", "招聘-1").unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(gone.a, "招聘-1");
        assert_eq!(log.delete(&PairKey::new("x", "y").unwrap()).unwrap(), None);
        let before = log.set();
        drop(log);

        let log = DecisionLog::open(dir.path()).unwrap();
        assert_eq!(log.set(), before);
        let d = log.set().get("offre-é", "offre-a").unwrap().clone();
        assert_eq!(d.revision, 2);
        assert_eq!(d.verdict, Verdict::NotDuplicate);
        assert_eq!(d.note.as_deref(), Some("« autre poste »"));
        // The scores come back bit for bit.
        assert_eq!(d.scores.unwrap().jaccard, 0.1 + 0.2);
        assert_eq!(d.scores.unwrap().containment, 2.0 / 3.0);
        assert_eq!(log.set().len(), 2);
        assert!(log.set().get("招聘-1", "招聘-2").is_none());
    }

    #[test]
    fn a_torn_last_frame_is_cut_and_the_log_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = DecisionLog::open(dir.path()).unwrap();
        log.put(decision("a", "b", Verdict::Duplicate, None))
            .unwrap();
        log.put(decision("a", "c", Verdict::Related, None)).unwrap();
        let path = log.path().to_owned();
        let full = fs::metadata(&path).unwrap().len();
        drop(log);
        // A crash in the middle of the second frame's write.
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(full - 7).unwrap();
        drop(f);
        let mut log = DecisionLog::open(dir.path()).unwrap();
        assert_eq!(log.set().len(), 1);
        assert!(log.set().get("a", "b").is_some());
        // The next write follows the cut, and is read back.
        log.put(decision("b", "c", Verdict::NotDuplicate, None))
            .unwrap();
        drop(log);
        let log = DecisionLog::open(dir.path()).unwrap();
        let pairs: Vec<_> = log
            .set()
            .iter()
            .map(|d| (d.a.clone(), d.b.clone()))
            .collect();
        assert_eq!(pairs, [("a".into(), "b".into()), ("b".into(), "c".into())]);
    }

    #[test]
    fn damage_before_the_end_fails_the_open_naming_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = DecisionLog::open(dir.path()).unwrap();
        for i in 0..3 {
            log.put(decision(&format!("d{i}"), "z", Verdict::Duplicate, None))
                .unwrap();
        }
        let path = log.path().to_owned();
        drop(log);
        let mut bytes = fs::read(&path).unwrap();
        // A flipped bit inside the first frame's payload.
        bytes[MAGIC.len() + 20] ^= 0x10;
        fs::write(&path, &bytes).unwrap();
        match DecisionLog::open(dir.path()).unwrap_err() {
            PersistError::Corrupt {
                path: p, offset, ..
            } => {
                assert_eq!(p, path);
                assert_eq!(offset, MAGIC.len() as u64);
            }
            other => panic!("expected Corrupt, got {other}"),
        }
        // The file is left as it was (nothing dropped).
        assert_eq!(fs::read(&path).unwrap(), bytes);
        fs::write(&path, b"NOTALOG!and more").unwrap();
        assert!(matches!(
            DecisionLog::open(dir.path()).unwrap_err(),
            PersistError::Corrupt { offset: 0, .. }
        ));
    }

    #[test]
    fn edits_compact_the_log_to_the_live_decisions() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = DecisionLog::open(dir.path()).unwrap();
        let note = "n".repeat(1500);
        let mut most = 0;
        for round in 0..400u32 {
            let v = if round % 2 == 0 {
                Verdict::Duplicate
            } else {
                Verdict::NotDuplicate
            };
            log.put(decision("ad-1", "ad-2", v, Some(&note))).unwrap();
            most = most.max(log.bytes());
        }
        assert!(most <= COMPACT_MIN_BYTES + 4096, "{most}");
        let d = log.set().get("ad-1", "ad-2").unwrap().clone();
        assert_eq!(d.revision, 400);
        drop(log);
        let log = DecisionLog::open(dir.path()).unwrap();
        assert_eq!(log.set().get("ad-1", "ad-2").unwrap(), &d);
        assert_eq!(log.set().len(), 1);
    }
}
