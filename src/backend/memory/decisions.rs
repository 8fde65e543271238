//! The memory backend's review decisions (issue 46): see the `Backend`
//! methods of the same names. The log and its replay are
//! `persist::decisions::DecisionLog`'s; here it is opened once per
//! collection directory, its writes run on a blocking thread (each
//! fsyncs), and the current set is kept beside it so a read never waits
//! for a write's fsync.
//!
//! One log per directory, shared by every `Memory` of it (a reindex
//! builds a second one over the same collection directory while the first
//! still serves): a registry of weak references keyed by the directory, as
//! the event log's. A collection deleted and created again under the same
//! name has a new log file: the registry's entry is reused only while it
//! is the same file (device and inode), or while neither has one.

use super::{persist_err, Memory};
use crate::backend::BackendError;
use crate::persist::decisions::{DecisionLog, FILE};
use crate::persist::PersistError;
use crate::review::{Decision, DecisionSet, PairKey};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// A collection directory's open decisions.
#[derive(Debug)]
pub(crate) struct Decisions {
    /// The log: held across a write and its fsync.
    log: Mutex<DecisionLog>,
    /// The set as of the last write, for readers (held for a clone only).
    current: Mutex<Arc<DecisionSet>>,
    /// The log file's (device, inode) as of the last open or write.
    file_id: Mutex<Option<(u64, u64)>>,
}

impl Decisions {
    fn current(&self) -> Arc<DecisionSet> {
        Arc::clone(&self.current.lock().expect("decisions set lock"))
    }
}

fn file_id(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Every open decisions log, by collection directory.
fn registry() -> &'static Mutex<HashMap<PathBuf, Weak<Decisions>>> {
    static LOGS: OnceLock<Mutex<HashMap<PathBuf, Weak<Decisions>>>> = OnceLock::new();
    LOGS.get_or_init(Default::default)
}

/// The decisions of the collection directory `dir`, opened if no `Memory`
/// of it has them open. A damaged log is an error naming its file and
/// offset (logged by the caller), never an empty set.
fn open(dir: &Path) -> Result<Arc<Decisions>, PersistError> {
    let mut reg = registry().lock().expect("decisions registry");
    reg.retain(|_, w| w.strong_count() > 0);
    let path = dir.join(FILE);
    if let Some(d) = reg.get(dir).and_then(Weak::upgrade) {
        if *d.file_id.lock().expect("decisions file id") == file_id(&path) {
            return Ok(d);
        }
    }
    let log = DecisionLog::open(dir)?;
    let d = Arc::new(Decisions {
        current: Mutex::new(log.set()),
        log: Mutex::new(log),
        file_id: Mutex::new(file_id(&path)),
    });
    reg.insert(dir.to_owned(), Arc::downgrade(&d));
    Ok(d)
}

impl Memory {
    /// This collection's decisions, opened (on a blocking thread) at first use.
    async fn decisions_log(&self, dir: &Path) -> Result<Arc<Decisions>, BackendError> {
        if let Some(d) = self.decisions.get() {
            return Ok(Arc::clone(d));
        }
        let d = dir.to_owned();
        let opened = tokio::task::spawn_blocking(move || open(&d))
            .await
            .map_err(|e| BackendError::Internal(format!("reading decisions: task failed: {e}")))?;
        let opened = self.track(
            "decisions",
            "the review decisions cannot be read; the collection's decisions answer errors until the file is repaired",
            "reading the review decisions",
            opened,
        )?;
        Ok(Arc::clone(self.decisions.get_or_init(|| opened)))
    }

    pub(crate) async fn decisions(&self, dir: &Path) -> Result<Arc<DecisionSet>, BackendError> {
        Ok(self.decisions_log(dir).await?.current())
    }

    /// `f` on the log, on a blocking thread; the set published after it.
    async fn write_decisions<T: Send + 'static>(
        &self,
        dir: &Path,
        what: &'static str,
        f: impl FnOnce(&mut DecisionLog) -> Result<T, PersistError> + Send + 'static,
    ) -> Result<T, BackendError> {
        let d = self.decisions_log(dir).await?;
        tokio::task::spawn_blocking(move || {
            let mut log = d.log.lock().expect("decisions log lock");
            let out = f(&mut log);
            *d.current.lock().expect("decisions set lock") = log.set();
            // The first write creates the file, a compaction replaces it:
            // the registry compares the file as it is now.
            *d.file_id.lock().expect("decisions file id") = file_id(log.path());
            out
        })
        .await
        .map_err(|e| BackendError::Internal(format!("{what}: task failed: {e}")))?
        .map_err(persist_err(what))
    }

    pub(crate) async fn put_decision(
        &self,
        dir: &Path,
        d: Decision,
    ) -> Result<Option<Decision>, BackendError> {
        self.write_decisions(dir, "storing a review decision", move |log| log.put(d))
            .await
    }

    pub(crate) async fn delete_decision(
        &self,
        dir: &Path,
        key: &PairKey,
    ) -> Result<Option<Decision>, BackendError> {
        let key = key.clone();
        self.write_decisions(dir, "deleting a review decision", move |log| {
            log.delete(&key)
        })
        .await
    }
}
