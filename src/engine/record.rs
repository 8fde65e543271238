//! A stored document: id, opaque metadata, signature and shingle set.

use super::DocId;

/// One document as the engine holds it. Immutable once built; a replace
/// builds a new record. Signature and shingles share one allocation.
#[derive(Debug)]
pub struct Record {
    id: DocId,
    /// Caller-supplied JSON, kept as its text; the engine never parses it.
    metadata: Option<Box<str>>,
    num_perm: u32,
    /// `num_perm` signature values, then the sorted, distinct shingle hashes.
    data: Box<[u32]>,
}

impl Record {
    pub(crate) fn new(
        id: DocId,
        metadata: Option<Box<str>>,
        signature: &[u32],
        shingles: &[u32],
    ) -> Self {
        let mut data = Vec::with_capacity(signature.len() + shingles.len());
        data.extend_from_slice(signature);
        data.extend_from_slice(shingles);
        Self {
            id,
            metadata,
            num_perm: signature.len() as u32,
            data: data.into_boxed_slice(),
        }
    }

    pub fn id(&self) -> &DocId {
        &self.id
    }

    pub fn metadata(&self) -> Option<&str> {
        self.metadata.as_deref()
    }

    pub fn signature(&self) -> &[u32] {
        &self.data[..self.num_perm as usize]
    }

    pub fn shingles(&self) -> &[u32] {
        &self.data[self.num_perm as usize..]
    }
}
