//! neardup: find near-duplicate text documents, with exact answers.
//!
//! The pipeline (*Mining of Massive Datasets*, ch. 3):
//!
//! ```text
//! text ─normalize→ ─shingle→ set of 32-bit hashes ─minhash→ signature (num_perm × u32)
//!      signature ─lsh bands→ candidates ─exact Jaccard on the stored sets→ matches
//! ```
//!
//! Module map — dependencies point inward, and the core never touches I/O
//! (`ARCHITECTURE.md` has the full rule and the invariants):
//! - core: [`text`] (normalize, shingle), [`minhash`], [`jaccard`], [`lsh`]
//!   (banding parameters and index), [`engine`] (the owner of all state),
//!   and beside it [`analysis`] (histograms, threshold advice, estimate
//!   accuracy over a sample of texts) and [`prefetch`] (the cache hint the
//!   query path uses to overlap its misses);
//! - around it: [`config`] (layered settings, validated once), [`persist`]
//!   (write-ahead log, snapshots, recovery), [`backend`] (where a collection's
//!   documents live: in memory, or in Redis), [`collections`] (named indexes,
//!   each an engine and a store with its own recipe and retention), [`wire`] (JSON shapes shared by
//!   the API and the CLI), [`telemetry`] (logs), [`allocator`] (the binary's
//!   global allocator), [`hugepages`] (the index's memory in 2 MiB pages),
//!   [`http`] (router, layers, problem+json, metrics), [`app`] (build and run the server), [`cli`]
//!   (offline `neardup dedup` and `neardup analyze`);
//! - for tests, benches and examples only: `testkit` (feature `testkit`).

pub mod allocator;
pub mod analysis;
pub mod app;
pub mod backend;
pub mod cli;
pub mod collections;
pub mod config;
pub mod engine;
pub mod events;
pub mod failing;
mod hashsort;
pub mod http;
pub mod hugepages;
pub mod jaccard;
pub mod lsh;
pub mod minhash;
pub mod persist;
pub mod prefetch;
pub mod review;
pub mod service;
pub mod telemetry;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
pub mod text;
pub mod wire;
