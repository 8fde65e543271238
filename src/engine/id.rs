//! `DocId`: a document id checked once at the edge.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

/// Longest id accepted, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// A non-empty id of at most [`MAX_ID_BYTES`] bytes without control characters.
/// Shared, not copied: the engine's `ids` key and the record hold one string.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DocId(Arc<str>);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("id must not be empty")]
    Empty,
    #[error("id is {0} bytes long; the limit is {MAX_ID_BYTES}")]
    TooLong(usize),
    #[error("id contains a control character at byte {0}")]
    ControlCharacter(usize),
    #[error("id {0:?} is reserved (it cannot be addressed as /documents/{{id}})")]
    Reserved(String),
}

impl DocId {
    pub fn parse(s: &str) -> Result<Self, IdError> {
        if s.is_empty() {
            return Err(IdError::Empty);
        }
        if s.len() > MAX_ID_BYTES {
            return Err(IdError::TooLong(s.len()));
        }
        if let Some((i, _)) = s.char_indices().find(|(_, c)| c.is_control()) {
            return Err(IdError::ControlCharacter(i));
        }
        Ok(Self(s.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for DocId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DocId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for DocId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked_once() {
        assert!(DocId::parse("doc-1").is_ok());
        assert!(DocId::parse("ünïcödé/ok").is_ok());
        assert_eq!(DocId::parse(""), Err(IdError::Empty));
        assert_eq!(DocId::parse(&"x".repeat(257)), Err(IdError::TooLong(257)));
        assert!(DocId::parse(&"x".repeat(256)).is_ok());
        assert_eq!(DocId::parse("a\nb"), Err(IdError::ControlCharacter(1)));
        assert_eq!(DocId::parse("a\u{7f}"), Err(IdError::ControlCharacter(1)));
    }
}
