//! Shared by the query benches (`lsh_bench`, `query_bench`, `passage_bench`,
//! `boilerplate_bench`): their command line, the corpus they load, their
//! random draws, batch loading and medians.
//! (A directory without a `main.rs`, so Cargo does not take it for an
//! example of its own.)

use clap::Args;
use neardup::engine::{BatchWrite, DocId, Engine, NoJournal, Prepared, Stamp, WriteMode};
use std::num::NonZeroUsize;
use std::time::Instant;

mod median;
pub use median::median;

/// The flags both benches take.
#[derive(Args)]
pub struct QueryArgs {
    /// JSONL file of `{"id", "text"}` lines (`lsh_bench` reads only "text").
    pub file: String,
    /// Load only the first N documents (default: all of them).
    #[arg(long)]
    pub n: Option<NonZeroUsize>,
    /// Queries timed per round (and per thread).
    #[arg(long, default_value = "200000")]
    pub queries: NonZeroUsize,
    /// Rounds; the medians are reported.
    #[arg(long, default_value = "5")]
    pub rounds: NonZeroUsize,
    /// Threads querying at once in the second measurement.
    #[arg(long, default_value = "2")]
    pub threads: NonZeroUsize,
}

impl QueryArgs {
    /// The whole file (the lines borrow from it: see [`Self::lines`]).
    pub fn read(&self) -> String {
        std::fs::read_to_string(&self.file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", self.file))
    }

    /// The first `--n` non-blank lines of `raw`.
    pub fn lines<'a>(&self, raw: &'a str) -> Vec<&'a str> {
        raw.lines()
            .filter(|l| !l.trim().is_empty())
            .take(self.n.map_or(usize::MAX, NonZeroUsize::get))
            .collect()
    }
}

/// `count` indexes below `len`, from xorshift stream `stream` (one per
/// thread, so threads do not ask for the same documents in step).
pub fn draws(stream: u64, count: usize, len: usize) -> Vec<usize> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ stream.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    (0..count)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % len as u64) as usize
        })
        .collect()
}

/// Batch inserts (1,000 a batch) of signed documents; docs/s.
#[allow(dead_code)] // lsh_bench loads no engine
pub fn load(engine: &Engine, docs: &[(String, Prepared)]) -> f64 {
    load_in(engine, docs, 1000)
}

/// Batch inserts of signed documents, `batch` a batch; docs/s.
#[allow(dead_code)] // lsh_bench loads no engine
pub fn load_in(engine: &Engine, docs: &[(String, Prepared)], batch: usize) -> f64 {
    let t = Instant::now();
    engine.reserve(docs.len());
    for chunk in docs.chunks(batch) {
        let writes = chunk
            .iter()
            .map(|(id, doc)| BatchWrite {
                id: DocId::parse(id).expect("a valid id"),
                doc,
                metadata: None,
                stamp: Stamp::default(),
            })
            .collect();
        for r in engine.insert_many_journaled(writes, WriteMode::Upsert, &NoJournal) {
            r.expect("stored");
        }
    }
    docs.len() as f64 / t.elapsed().as_secs_f64()
}
