//! Everything that fixes the engine's behaviour, resolved and validated once.

use crate::lsh::{BandParams, ParamsError};
use crate::text::{NormalizeOptions, ShingleOptions};
use serde::Serialize;

/// Longest shingle accepted, in units.
pub const MAX_SHINGLE_K: usize = 64;

/// Inputs from configuration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EngineParams {
    pub normalize: NormalizeOptions,
    pub shingle: ShingleOptions,
    /// Hash values per signature.
    pub num_perm: usize,
    /// Seeds the shingle hash, the permutations and the band keys.
    pub seed: u64,
    /// Default query threshold, and the one (b, r) are tuned for.
    pub threshold: f64,
    /// Explicit banding; both or neither.
    pub bands: Option<usize>,
    pub rows: Option<usize>,
    /// Most distinct candidates verified per query (hot-bucket guard).
    pub max_candidates: usize,
}

impl Default for EngineParams {
    fn default() -> Self {
        Self {
            normalize: NormalizeOptions::default(),
            shingle: ShingleOptions::default(),
            num_perm: 128,
            seed: 1,
            threshold: 0.8,
            bands: None,
            rows: None,
            max_candidates: 10_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineParamsError {
    #[error(transparent)]
    Banding(#[from] ParamsError),
    #[error("shingle.k must be between 1 and {MAX_SHINGLE_K}, got {0}")]
    ShingleSize(usize),
    #[error("index.max_candidates must be at least 1")]
    MaxCandidates,
}

impl EngineParams {
    pub fn resolve_bands(&self) -> Result<BandParams, EngineParamsError> {
        if self.shingle.k == 0 || self.shingle.k > MAX_SHINGLE_K {
            return Err(EngineParamsError::ShingleSize(self.shingle.k));
        }
        if self.max_candidates == 0 {
            return Err(EngineParamsError::MaxCandidates);
        }
        Ok(BandParams::resolve(
            self.threshold,
            self.num_perm,
            self.bands,
            self.rows,
        )?)
    }
}
