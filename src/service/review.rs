//! The review queue's walk (issue 46): pairs to review, found by querying
//! the collection's documents one by one in a seeded order.
//!
//! **Why a walk, not a scan.** A whole-collection pair scan at a threshold
//! well below the collection's (the queue samples from `from`, by default
//! 0.3 under it) is the most expensive thing the service does; a page of
//! twenty pairs needs only a few of each band. The walk takes documents in
//! an order fixed by the seed (`Backend::sample_ids`: a keyed hash of each
//! id, so the order survives writes elsewhere), queries each at `from`
//! (`Backend::similar_to_many`, a chunk at a time: in parallel on the scan
//! pool in memory, concurrently on Redis), keeps each undecided pair once
//! by band, and stops as soon as every band has the pairs a page needs
//! ([`crate::review::queue::quotas`]), or when its budget (documents,
//! wall time) is spent: the answer says which (`complete`).
//!
//! A Jaccard query below the banding's tuned range finds a pair only with
//! the LSH S-curve's probability (e.g. about 28 % at 0.5 with 21 × 6
//! bands): the low bands fill more slowly, and a pair there is a sample,
//! not every such pair. That is what a precision estimate needs.
//!
//! **Not under the scan permit.** The walk is short (its budget is about
//! 150 ms) and a page must not wait behind a duplicate scan of minutes: it
//! runs on the scan pool beside whatever runs there, blocking (the caller
//! runs it with `spawn_blocking`).

use crate::backend::{Backend, BackendError};
use crate::engine::{EngineError, Query};
use crate::review::queue::{Found, QueueBands};
use crate::review::DecisionSet;
use std::time::{Duration, Instant};

/// Most documents one walk queries.
pub const MAX_DOCUMENTS: usize = 20_000;
/// Wall time after which a walk stops at the end of its chunk.
pub const MAX_TIME: Duration = Duration::from_millis(150);
/// Documents queried together (in parallel, or in one set of round trips).
const CHUNK: usize = 128;
/// Most matches kept per queried document: enough that a document with
/// many near-duplicates above the queue still yields pairs in its low bands.
pub const MATCHES_PER_DOCUMENT: usize = 256;

/// What a walk looks for.
pub struct WalkSpec {
    /// At `from`, on the queue's measure and score.
    pub query: Query,
    pub bands: QueueBands,
    /// Pairs each band needs before the walk may stop.
    pub quotas: Vec<usize>,
    pub max_time: Duration,
}

/// What a walk found.
#[derive(Debug)]
pub struct Walk {
    pub found: Found,
    pub documents_searched: usize,
    /// Every band reached its quota, or every document was searched; false
    /// when the budget ran out first.
    pub complete: bool,
    pub seconds: f64,
}

/// Walk `ids` (in their order; `all`: they are every live document) with
/// `spec`, skipping pairs in `decided`. Blocking.
pub fn walk(
    backend: &Backend,
    ids: &[String],
    all: bool,
    spec: &WalkSpec,
    decided: &DecisionSet,
    pool: &rayon::ThreadPool,
) -> Result<Walk, BackendError> {
    let started = Instant::now();
    let mut found = Found::new(spec.bands);
    let mut searched = 0;
    let mut complete = found.meets(&spec.quotas);
    for chunk in ids.chunks(CHUNK) {
        if complete {
            break;
        }
        if started.elapsed() >= spec.max_time {
            break;
        }
        let answers = backend.similar_to_many(chunk, &spec.query, pool);
        for (id, answer) in chunk.iter().zip(answers) {
            let outcome = match answer {
                Ok(outcome) => outcome,
                // Deleted since the ids were read: nothing to pair.
                Err(BackendError::Engine(EngineError::NotFound(_))) => continue,
                Err(e) => return Err(e),
            };
            for m in &outcome.matches {
                found.add(id, m.id.as_str(), spec.query.value_of(m), decided);
            }
        }
        searched += chunk.len();
        complete = found.meets(&spec.quotas);
    }
    Ok(Walk {
        found,
        documents_searched: searched,
        complete: complete || (all && searched == ids.len()),
        seconds: started.elapsed().as_secs_f64(),
    })
}
