//! The passage index in Redis (containment queries, passage lookups,
//! containment pairs). PLACEHOLDER while the Redis side is built.

use super::RedisIndex;
use crate::backend::BackendError;
use crate::engine::{Edge, Measure, Passage, PassageOutcome, ScanStats, Threshold};

impl RedisIndex {
    pub fn passage_index(&self) -> bool {
        false
    }

    pub async fn set_passage_index(&self, _on: bool) -> Result<(), BackendError> {
        Err(BackendError::Internal(
            "passage index on redis: not built yet".into(),
        ))
    }

    pub async fn passages(
        &self,
        _passage: &Passage,
        _min_run: usize,
        _limit: usize,
        _since: Option<u64>,
    ) -> Result<PassageOutcome, BackendError> {
        Err(BackendError::Internal(
            "passage index on redis: not built yet".into(),
        ))
    }

    pub async fn scan_edges(
        &self,
        threshold: Threshold,
        measure: Measure,
    ) -> Result<(Vec<Edge>, ScanStats), BackendError> {
        if measure.is_containment() {
            return Err(BackendError::Internal(
                "passage index on redis: not built yet".into(),
            ));
        }
        let (pairs, stats) = self.scan_pairs(threshold).await?;
        let edges = pairs
            .into_iter()
            .map(|p| {
                let (na, nb) = (p.a.shingles().len(), p.b.shingles().len());
                let j = p.jaccard;
                let intersection = (j * (na + nb) as f64 / (1.0 + j)).round() as usize;
                Edge::new(p.a, p.b, intersection)
            })
            .collect();
        Ok((edges, stats))
    }
}
