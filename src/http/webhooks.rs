//! Webhook subscriptions of a collection (issue 45): `POST /webhooks`
//! (201 with the subscription and its secret, shown this once),
//! `GET /webhooks`, `GET|DELETE /webhooks/{id}`, the failed deliveries
//! (`GET /webhooks/{id}/failed`) and their retry by hand
//! (`POST /webhooks/{id}/failed/retry`). Delivery is
//! `service::webhooks`'s; the payload and signatures are described in
//! docs/webhooks.md.

use super::dto::format_time;
use super::error::ApiError;
use super::events::EventOut;
use super::extract::{parse_json, ApiQuery, Coll, DocPath, JsonBody};
use super::state::{backend, AppState};
use crate::collections::Collection;
use crate::engine::{EngineError, Measure, Score};
use crate::events::{EventKind, FailedDelivery, Subscription, SubscriptionPut};
use crate::service::webhooks::{check_url, new_secret, secret_key};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};

/// Failed deliveries listed by default, and at most (the most kept).
const DEFAULT_FAILED: usize = 100;
const MAX_FAILED: usize = crate::events::FAILED_KEEP;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubscriptionIn {
    url: String,
    #[serde(default, deserialize_with = "super::collections::not_null")]
    secret: Option<String>,
    #[serde(default, deserialize_with = "super::collections::not_null")]
    kinds: Option<Vec<String>>,
    #[serde(default, deserialize_with = "super::collections::not_null")]
    measure: Option<Measure>,
    #[serde(default, deserialize_with = "super::collections::not_null")]
    score: Option<Score>,
    #[serde(default, deserialize_with = "super::collections::not_null")]
    threshold: Option<f64>,
    #[serde(default, deserialize_with = "super::collections::not_null")]
    id: Option<String>,
}

/// A subscription as answered (its secret only when created).
#[derive(Debug, Serialize)]
pub struct SubscriptionOut {
    pub id: String,
    pub url: String,
    pub kinds: Vec<&'static str>,
    pub measure: Measure,
    pub score: Score,
    pub threshold: f64,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// Deliveries owed (new, in flight or waiting for a retry).
    pub pending: u64,
    /// Deliveries listed as failed.
    pub failed: usize,
}

#[derive(Debug, Serialize)]
pub struct SubscriptionsOut {
    pub webhooks: Vec<SubscriptionOut>,
    pub max_subscriptions: usize,
}

async fn out(
    coll: &Collection,
    s: Subscription,
    secret: bool,
) -> Result<SubscriptionOut, ApiError> {
    let b = backend(coll)?;
    let pending = b.pending_deliveries(coll.dir(), &s.id).await?;
    let failed = b
        .failed_deliveries(coll.dir(), &s.id, MAX_FAILED)
        .await?
        .len();
    Ok(SubscriptionOut {
        kinds: s.kinds.iter().map(|k| k.as_str()).collect(),
        measure: s.measure,
        score: s.score,
        threshold: s.threshold,
        created_at: format_time(s.created_ms),
        secret: secret.then_some(s.secret),
        pending,
        failed,
        id: s.id,
        url: s.url,
    })
}

/// The subscription `id` of `coll`, or 404.
async fn find(app: &AppState, coll: &Collection, id: &str) -> Result<Subscription, ApiError> {
    let cached = app.events.rules(coll).await?;
    if let Some(s) = cached.subscriptions.iter().find(|s| s.id == id) {
        return Ok(s.clone());
    }
    // Not in this node's cache: another node may have just created it.
    let fresh = app.events.refresh(coll).await?;
    fresh
        .subscriptions
        .iter()
        .find(|s| s.id == id)
        .cloned()
        .ok_or_else(|| ApiError::WebhookNotFound(id.chars().take(200).collect()))
}

/// `POST /webhooks`: 201 with the new subscription and its secret (200
/// when `id` names an existing one, which is replaced).
pub async fn create(
    State(app): State<AppState>,
    Coll(coll): Coll,
    body: JsonBody,
) -> Result<Response, ApiError> {
    let req: SubscriptionIn = parse_json(&body.0)?;
    let settings = &app.config.webhooks;
    check_url(&req.url, settings).map_err(ApiError::WebhookUrlNotAllowed)?;
    let secret = match req.secret {
        None => new_secret(),
        Some(s) if secret_key(&s).is_some() => s,
        Some(_) => {
            return Err(ApiError::InvalidBody(
                "secret: must be \"whsec_\" followed by the base64 of 24 to 64 bytes (leave it out to have one generated)".into(),
            ))
        }
    };
    let kinds = match req.kinds {
        None => EventKind::ALL.to_vec(),
        Some(k) if k.is_empty() => {
            return Err(ApiError::InvalidBody(
                "kinds: give at least one of \"document.duplicate\", \"document.refused\" (or leave it out for both)".into(),
            ))
        }
        Some(k) => {
            let mut kinds = Vec::new();
            for name in &k {
                let kind = EventKind::parse(name).ok_or_else(|| {
                    ApiError::InvalidBody(format!(
                        "kinds: {:?} is not an event type; the types are \"document.duplicate\" and \"document.refused\"",
                        name.chars().take(60).collect::<String>()
                    ))
                })?;
                if !kinds.contains(&kind) {
                    kinds.push(kind);
                }
            }
            kinds
        }
    };
    let (measure, score) = (
        req.measure.unwrap_or_default(),
        req.score.unwrap_or_default(),
    );
    if score == Score::Content && measure != Measure::Jaccard {
        // Events carry content Jaccard only (`EventMatch`): such a
        // subscription could never select anything.
        return Err(ApiError::InvalidBody(format!(
            "score: content applies to measure jaccard in events, not {}",
            measure.as_str()
        )));
    }
    let b = backend(&coll)?;
    if score == Score::Content && !b.boilerplate_on() {
        return Err(EngineError::BoilerplateOff.into());
    }
    let threshold = coll
        .recipe()
        .threshold_for(measure, score, req.threshold)?
        .value();
    let id = match req.id {
        Some(id) => super::documents::client_id(&id)?.to_string(),
        None => format!("wh_{}", uuid::Uuid::now_v7().simple()),
    };
    let sub = Subscription {
        id,
        url: req.url,
        secret,
        kinds,
        measure,
        score,
        threshold,
        created_ms: crate::events::now_ms(),
    };
    let created = {
        let _one = app.events.changes.lock().await;
        // The limit is counted by the backend in the store's own step
        // (other nodes may be storing at the same time).
        let put = b
            .put_subscription(coll.dir(), sub.clone(), settings.max_subscriptions)
            .await?;
        app.events.refresh(&coll).await?;
        match put {
            SubscriptionPut::Full => {
                return Err(ApiError::TooManySubscriptions(settings.max_subscriptions))
            }
            SubscriptionPut::Created => true,
            SubscriptionPut::Replaced => false,
        }
    };
    tracing::info!(collection = %coll.name, subscription = %sub.id, created, "webhook subscription stored");
    let location = format!("{}/webhooks/{}", prefix(&coll), sub.id);
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        [(header::LOCATION, location)],
        Json(out(&coll, sub, true).await?),
    )
        .into_response())
}

/// The path prefix of `coll`'s routes.
fn prefix(coll: &Collection) -> String {
    if coll.name.is_default() {
        String::new()
    } else {
        format!("/collections/{}", coll.name)
    }
}

/// `GET /webhooks`.
pub async fn list(
    State(app): State<AppState>,
    Coll(coll): Coll,
) -> Result<Json<SubscriptionsOut>, ApiError> {
    let rules = app.events.refresh(&coll).await?;
    let mut webhooks = Vec::with_capacity(rules.subscriptions.len());
    for s in rules.subscriptions.iter().cloned() {
        webhooks.push(out(&coll, s, false).await?);
    }
    Ok(Json(SubscriptionsOut {
        webhooks,
        max_subscriptions: app.config.webhooks.max_subscriptions,
    }))
}

/// `GET /webhooks/{id}`.
pub async fn get(
    State(app): State<AppState>,
    Coll(coll): Coll,
    DocPath(id): DocPath,
) -> Result<Json<SubscriptionOut>, ApiError> {
    let s = find(&app, &coll, &id).await?;
    Ok(Json(out(&coll, s, false).await?))
}

/// `DELETE /webhooks/{id}`: 204; its pending and failed deliveries go.
pub async fn delete(
    State(app): State<AppState>,
    Coll(coll): Coll,
    DocPath(id): DocPath,
) -> Result<StatusCode, ApiError> {
    let b = backend(&coll)?;
    let gone = {
        let _one = app.events.changes.lock().await;
        let gone = b.delete_subscription(coll.dir(), &id).await?;
        app.events.refresh(&coll).await?;
        gone
    };
    if !gone {
        return Err(ApiError::WebhookNotFound(id.chars().take(200).collect()));
    }
    tracing::info!(collection = %coll.name, subscription = %id, "webhook subscription deleted");
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailedParams {
    limit: Option<usize>,
}

#[derive(Debug, Serialize)]
pub struct FailedOut {
    pub event: EventOut,
    pub attempts: u32,
    pub error: String,
    pub failed_at: String,
}

#[derive(Debug, Serialize)]
pub struct FailedListOut {
    pub failed: Vec<FailedOut>,
}

impl From<FailedDelivery> for FailedOut {
    fn from(f: FailedDelivery) -> Self {
        FailedOut {
            event: EventOut::from(&f.event),
            attempts: f.attempts,
            error: f.error,
            failed_at: format_time(f.failed_ms),
        }
    }
}

/// `GET /webhooks/{id}/failed?limit=`: newest first.
pub async fn failed(
    State(app): State<AppState>,
    Coll(coll): Coll,
    DocPath(id): DocPath,
    ApiQuery(params): ApiQuery<FailedParams>,
) -> Result<Json<FailedListOut>, ApiError> {
    let limit = match params.limit {
        None => DEFAULT_FAILED,
        Some(n) if (1..=MAX_FAILED).contains(&n) => n,
        Some(n) => {
            return Err(ApiError::InvalidParameter(format!(
                "limit must be between 1 and {MAX_FAILED}, got {n}"
            )))
        }
    };
    let s = find(&app, &coll, &id).await?;
    let failed = backend(&coll)?
        .failed_deliveries(coll.dir(), &s.id, limit)
        .await?;
    Ok(Json(FailedListOut {
        failed: failed.into_iter().map(FailedOut::from).collect(),
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryIn {
    #[serde(default, deserialize_with = "super::collections::not_null")]
    event: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct RetryOut {
    pub retried: usize,
}

/// `POST /webhooks/{id}/failed/retry` `{"event": "evt_…"}` or `{}` (all):
/// back into delivery with their attempts reset.
pub async fn retry(
    State(app): State<AppState>,
    Coll(coll): Coll,
    DocPath(id): DocPath,
    body: JsonBody,
) -> Result<Json<RetryOut>, ApiError> {
    let req: RetryIn = parse_json(&body.0)?;
    let s = find(&app, &coll, &id).await?;
    let retried = backend(&coll)?
        .retry_failed(coll.dir(), &s.id, req.event.as_deref())
        .await?;
    if retried > 0 {
        app.events.appended.notify_one();
    }
    Ok(Json(RetryOut { retried }))
}
