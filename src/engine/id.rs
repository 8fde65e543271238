//! `DocId`: a document id checked once at the edge.

use smol_str::SmolStr;
use std::borrow::Borrow;
use std::fmt;

/// Longest id accepted, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// Longest id held inline, in the `DocId` itself (no allocation).
pub(crate) const INLINE_ID_BYTES: usize = 23;
// `SmolStr` is 24 bytes: the inline id and its length.
const _: () = assert!(std::mem::size_of::<SmolStr>() == INLINE_ID_BYTES + 1);

/// A non-empty id of at most [`MAX_ID_BYTES`] bytes without control characters.
/// An id of up to 23 bytes (`INLINE_ID_BYTES`) is held inline, in the engine's
/// `ids` key and in the record alike: looking an id up compares it without
/// a read elsewhere in memory (a cache miss at a million documents), and
/// costs no allocation. A longer id is one `Arc<str>` that both share.
/// Hashes, compares and orders as its `str`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DocId(SmolStr);

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
        Ok(Self(SmolStr::new(s)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the id lives in a block of its own (longer than
    /// [`INLINE_ID_BYTES`]), for the memory report.
    pub(crate) fn is_heap_allocated(&self) -> bool {
        self.0.is_heap_allocated()
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

    #[test]
    fn short_ids_are_inline_and_long_ones_shared() {
        use std::collections::hash_map::DefaultHasher;
        use std::hash::{Hash, Hasher};
        let hash = |v: &dyn Fn(&mut DefaultHasher)| {
            let mut h = DefaultHasher::new();
            v(&mut h);
            h.finish()
        };
        let short = "x".repeat(INLINE_ID_BYTES);
        let long = "ü".repeat(INLINE_ID_BYTES); // 46 bytes
        for (s, heap) in [(short.as_str(), false), (long.as_str(), true)] {
            let id = DocId::parse(s).unwrap();
            assert_eq!(id.is_heap_allocated(), heap, "{s}");
            assert_eq!(id.as_str(), s);
            // The id map is keyed by `DocId` and probed with `&str`.
            assert_eq!(hash(&|h| id.hash(h)), hash(&|h| s.hash(h)));
            assert_eq!(<DocId as Borrow<str>>::borrow(&id), s);
        }
        let (a, b) = (DocId::parse("a-2").unwrap(), DocId::parse("a-10").unwrap());
        assert_eq!(a.cmp(&b), "a-2".cmp("a-10"));
    }
}
