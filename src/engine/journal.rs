//! The engine's view of durability: a [`Journal`] it appends every write
//! to before applying it. The engine does no I/O; the log behind the trait
//! (`persist::wal`) does, and its errors come back typed as [`JournalError`].

use super::Record;
use std::sync::Arc;

/// A write as the journal sees it: enough to replay it without re-signing.
/// An upsert carries the bytes the caller asked to log with it
/// ([`Prepared::set_journal_payload`](super::Prepared::set_journal_payload)).
#[derive(Debug, Clone, Copy)]
pub enum JournalEntry<'a> {
    Upsert(&'a Record, Option<&'a [u8]>),
    Delete(&'a str),
}

/// A write-ahead log the engine appends to *under the id's entry lock*, so
/// the log order of writes to one id is the order they were applied in.
/// `append` must be quick (buffer the entry); durability is the caller's
/// next step, outside the lock. The engine itself does no I/O.
pub trait Journal: Send + Sync {
    /// Record `entry`; returns a sequence number to wait on for durability.
    fn append(&self, entry: JournalEntry<'_>) -> Result<u64, JournalError>;
}

/// Why a journal refused or could not make durable a write: the journal's
/// own error, kept whole (its source chain, the file it names) for the log,
/// while the engine and the HTTP layer need only know that it was one.
#[derive(Debug, Clone, thiserror::Error)]
#[error(transparent)]
pub struct JournalError(Arc<dyn std::error::Error + Send + Sync>);

/// Two journal errors are equal when they are the same error.
impl PartialEq for JournalError {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl JournalError {
    pub fn new(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(e))
    }

    /// The journal's error, if it is a `T`.
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

/// No journal: an in-memory engine (tests, benches, offline tools).
pub struct NoJournal;

impl Journal for NoJournal {
    fn append(&self, _: JournalEntry<'_>) -> Result<u64, JournalError> {
        Ok(0)
    }
}
