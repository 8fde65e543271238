//! Everything that fixes the engine's behaviour, resolved and validated once.
//!
//! [`IndexParams`] is the `[index]` section of the configuration as it is
//! written (the same struct is the settings section, not a copy of it);
//! [`EngineParams`] adds the text recipe. [`EngineParams::resolve`] checks
//! them and derives the LSH banding: what an [`Engine`](super::Engine) is
//! built from.

use crate::lsh::{BandParams, ParamsError};
use crate::text::{NormalizeOptions, ShingleOptions};
use serde::{Deserialize, Serialize};

/// Longest shingle accepted, in units.
pub const MAX_SHINGLE_K: usize = 64;

/// The index: signature size, seed, the threshold the banding is tuned
/// for, and the query guard. `[index]` in the configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IndexParams {
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
    /// Keep the passage index (containment queries, passage lookups,
    /// containment pairs): ~450 bytes more a 400-word article.
    pub passage_index: bool,
    /// A fingerprint held by more documents than this is common: queries
    /// skip it and say so.
    pub common_fingerprint_docs: usize,
    /// Document frequency and what it makes boilerplate (content scores).
    pub boilerplate: super::boilerplate::BoilerplateParams,
}

impl Default for IndexParams {
    fn default() -> Self {
        Self {
            num_perm: 128,
            seed: 1,
            threshold: 0.8,
            bands: None,
            rows: None,
            max_candidates: 10_000,
            passage_index: false,
            common_fingerprint_docs: 1_000,
            boilerplate: Default::default(),
        }
    }
}

/// The recipe (normalization, shingles) and the index.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct EngineParams {
    pub normalize: NormalizeOptions,
    pub shingle: ShingleOptions,
    pub index: IndexParams,
}

impl EngineParams {
    /// True when `other` signs every text exactly as `self` does (the same
    /// normalization, shingles, permutations and seed): a document's shingle
    /// set and signature under one are its own under the other, whatever
    /// the banding, threshold or candidate guard.
    pub fn signs_like(&self, other: &EngineParams) -> bool {
        self.normalize == other.normalize
            && self.shingle == other.shingle
            && self.index.num_perm == other.index.num_perm
            && self.index.seed == other.index.seed
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineParamsError {
    #[error(transparent)]
    Banding(#[from] ParamsError),
    #[error("shingle.k must be between 1 and {MAX_SHINGLE_K}, got {0}")]
    ShingleSize(usize),
    #[error("index.common_fingerprint_docs must be at least 1")]
    CommonFingerprintDocs,
    #[error("index.max_candidates must be at least 1")]
    MaxCandidates,
    #[error("{0}")]
    Normalize(String),
    #[error("{0}")]
    Boilerplate(String),
}

/// Parameters checked once, with the banding they resolve to: the only
/// thing an engine is built from, so it never re-checks them.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidParams {
    params: EngineParams,
    bands: BandParams,
}

/// The compiled-in defaults, which are valid.
impl Default for ValidParams {
    fn default() -> Self {
        EngineParams::default()
            .validate()
            .expect("the default parameters are valid")
    }
}

impl ValidParams {
    pub fn params(&self) -> &EngineParams {
        &self.params
    }

    pub fn bands(&self) -> &BandParams {
        &self.bands
    }
}

impl EngineParams {
    /// Check every value and derive the banding.
    pub fn validate(self) -> Result<ValidParams, EngineParamsError> {
        let bands = self.resolve()?;
        Ok(ValidParams {
            params: self,
            bands,
        })
    }

    fn resolve(&self) -> Result<BandParams, EngineParamsError> {
        if self.shingle.k == 0 || self.shingle.k > MAX_SHINGLE_K {
            return Err(EngineParamsError::ShingleSize(self.shingle.k));
        }
        self.normalize
            .check()
            .map_err(EngineParamsError::Normalize)?;
        let index = &self.index;
        if index.common_fingerprint_docs == 0 {
            return Err(EngineParamsError::CommonFingerprintDocs);
        }
        if index.max_candidates == 0 {
            return Err(EngineParamsError::MaxCandidates);
        }
        index
            .boilerplate
            .check()
            .map_err(EngineParamsError::Boilerplate)?;
        Ok(BandParams::resolve(
            index.threshold,
            index.num_perm,
            index.bands,
            index.rows,
        )?)
    }
}
