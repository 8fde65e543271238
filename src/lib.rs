//! neardup: find near-duplicate text documents, with exact answers.
//!
//! The pipeline (*Mining of Massive Datasets*, ch. 3):
//!
//! ```text
//! text ─normalize→ ─shingle→ set of 32-bit hashes ─minhash→ signature (num_perm × u32)
//!      signature ─lsh bands→ candidates ─exact Jaccard on the stored sets→ matches
//! ```
//!
//! Module map — dependencies point inward, and the core never touches I/O:
//! - core: [`text`] (normalize, shingle), [`minhash`], [`jaccard`], [`lsh`]
//!   (banding parameters and index), [`engine`] (the owner of all state);
//! - around it: [`config`] (layered settings), [`telemetry`] (logs),
//!   [`http`] (axum router, problem+json errors, metrics), [`app`] (build
//!   and run the server), [`cli`] (offline `neardup dedup`).

pub mod app;
pub mod cli;
pub mod config;
pub mod engine;
pub mod http;
pub mod jaccard;
pub mod lsh;
pub mod minhash;
pub mod persist;
pub mod telemetry;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
pub mod text;
pub mod wire;
