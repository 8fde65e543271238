//! Locality-sensitive hashing by banding (*Mining of Massive Datasets*, §3.4).
//!
//! A signature of `b · r` slots is cut into b bands of r rows; two documents
//! become candidates when all r rows of at least one band agree, which for a
//! pair of Jaccard similarity s happens with probability `1 − (1 − sʳ)ᵇ`.
//! [`params`] chooses (b, r) from the threshold; [`index`] holds the band
//! buckets in sharded open-addressing [`table`]s, and `shared` which
//! documents share a bucket at all. Band keys are hashed with
//! a fixed, seeded function, so tables rebuilt after a restart line up
//! exactly.

pub mod index;
pub mod params;
mod shared;
pub mod table;

pub use index::LshIndex;
pub use params::{BandParams, ParamsError};
