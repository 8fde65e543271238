//! The memory backend's event log, webhook subscriptions and delivery
//! state (issue 45): see the `Backend` methods of the same names.

use super::Memory;
use crate::backend::BackendError;
use crate::events::{
    Attempt, Delivery, Event, EventDraft, EventPage, FailedDelivery, Subscription,
};
use std::path::Path;

impl Memory {
    pub(crate) async fn subscriptions(
        &self,
        dir: &Path,
    ) -> Result<Vec<Subscription>, BackendError> {
        let _ = dir;
        Err(BackendError::Internal(
            "events: not built yet (memory)".into(),
        ))
    }

    pub(crate) async fn put_subscription(
        &self,
        dir: &Path,
        s: Subscription,
    ) -> Result<bool, BackendError> {
        let _ = (dir, s);
        Err(BackendError::Internal(
            "events: not built yet (memory)".into(),
        ))
    }

    pub(crate) async fn delete_subscription(
        &self,
        dir: &Path,
        id: &str,
    ) -> Result<bool, BackendError> {
        let _ = (dir, id);
        Err(BackendError::Internal(
            "events: not built yet (memory)".into(),
        ))
    }

    pub(crate) async fn append_events(
        &self,
        dir: &Path,
        drafts: Vec<EventDraft>,
    ) -> Result<Vec<Event>, BackendError> {
        let _ = (dir, drafts);
        Err(BackendError::Internal(
            "events: not built yet (memory)".into(),
        ))
    }

    pub(crate) async fn read_events(
        &self,
        dir: &Path,
        after: Option<&str>,
        limit: usize,
    ) -> Result<EventPage, BackendError> {
        let _ = (dir, after, limit);
        Err(BackendError::Internal(
            "events: not built yet (memory)".into(),
        ))
    }

    pub(crate) async fn trim_events(
        &self,
        dir: &Path,
        keep_ms: u64,
        keep_max: usize,
        now_ms: u64,
    ) -> Result<usize, BackendError> {
        let _ = (dir, keep_ms, keep_max, now_ms);
        Err(BackendError::Internal(
            "events: not built yet (memory)".into(),
        ))
    }

    pub(crate) async fn due_deliveries(
        &self,
        dir: &Path,
        sub: &Subscription,
        consumer: &str,
        now_ms: u64,
        max: usize,
    ) -> Result<Vec<Delivery>, BackendError> {
        let _ = (dir, sub, consumer, now_ms, max);
        Err(BackendError::Internal(
            "events: not built yet (memory)".into(),
        ))
    }

    pub(crate) async fn settle(
        &self,
        dir: &Path,
        sub: &Subscription,
        d: &Delivery,
        outcome: Attempt,
    ) -> Result<(), BackendError> {
        let _ = (dir, sub, d, outcome);
        Err(BackendError::Internal(
            "events: not built yet (memory)".into(),
        ))
    }

    pub(crate) async fn failed_deliveries(
        &self,
        dir: &Path,
        sub_id: &str,
        limit: usize,
    ) -> Result<Vec<FailedDelivery>, BackendError> {
        let _ = (dir, sub_id, limit);
        Err(BackendError::Internal(
            "events: not built yet (memory)".into(),
        ))
    }

    pub(crate) async fn retry_failed(
        &self,
        dir: &Path,
        sub_id: &str,
        event_id: Option<&str>,
    ) -> Result<usize, BackendError> {
        let _ = (dir, sub_id, event_id);
        Err(BackendError::Internal(
            "events: not built yet (memory)".into(),
        ))
    }

    pub(crate) async fn pending_deliveries(
        &self,
        dir: &Path,
        sub_id: &str,
    ) -> Result<u64, BackendError> {
        let _ = (dir, sub_id);
        Err(BackendError::Internal(
            "events: not built yet (memory)".into(),
        ))
    }
}
