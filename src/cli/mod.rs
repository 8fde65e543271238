//! Offline commands of the `neardup` binary that use the engine without a
//! server: file input, stdout output, progress on stderr.

pub mod analyze;
pub mod dedup;
mod lines;
mod progress;
