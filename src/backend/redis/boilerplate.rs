//! Document frequency and registered templates in Redis (issue 44).
//! PLACEHOLDER: being written; every call answers Unavailable until then.

use super::{BackendError, RedisIndex};
use crate::engine::{Engine, Template};

impl RedisIndex {
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub async fn set_boilerplate(&self, _on: bool) -> Result<(), BackendError> {
        Err(BackendError::Unavailable("not yet".into()))
    }

    pub async fn doc_frequencies(
        &self,
        _sorted: &[u32],
    ) -> Result<(Vec<u32>, usize), BackendError> {
        Err(BackendError::Unavailable("not yet".into()))
    }

    pub async fn common_shingles(
        &self,
        _at: u32,
        _max: usize,
    ) -> Result<(Vec<(u32, u32)>, usize), BackendError> {
        Err(BackendError::Unavailable("not yet".into()))
    }

    pub async fn templates(&self) -> Result<Vec<Template>, BackendError> {
        Err(BackendError::Unavailable("not yet".into()))
    }

    pub async fn put_template(&self, _t: Template) -> Result<bool, BackendError> {
        Err(BackendError::Unavailable("not yet".into()))
    }

    pub async fn delete_template(&self, _id: &str) -> Result<bool, BackendError> {
        Err(BackendError::Unavailable("not yet".into()))
    }
}
