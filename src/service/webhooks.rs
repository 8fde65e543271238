//! Webhook delivery (issue 45): one background task per node that, for
//! every collection with subscriptions, asks the backend for the
//! deliveries due, POSTs each signed per **Standard Webhooks**
//! (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64
//! HMAC-SHA256>`), and settles it: 2xx → delivered; anything else → a
//! retry after `min(base·2^(n−1), max)` ±20%, or failed after
//! `webhooks.max_attempts`.
//!
//! The task wakes when this node appended events ([`EventHub::appended`])
//! and every `webhooks.poll_ms` (other nodes' events, retries whose time
//! came). At most `PER_SUBSCRIPTION` deliveries of one subscription and
//! `PER_NODE` in all are in flight; a slow receiver holds only its own
//! subscription's slots.
//!
//! Server-side request forgery: a URL's host must be allowed by
//! `webhooks.allowed_hosts`; a host reached through `*` must not resolve
//! to a loopback, private, link-local (metadata), CGNAT, unique-local,
//! unspecified or multicast address unless `allow_private_networks`.
//! The check of resolved addresses is the HTTP client's DNS resolver, so
//! it holds at connect time (DNS rebinding cannot slip past a check made
//! earlier). Redirects are not followed; proxies from the environment are
//! not used. Secrets never reach a log line or an error.

use crate::collections::{Collection, Collections};
use crate::config::WebhookSettings;
use crate::events::{Attempt, Delivery, Subscription};
use crate::service::events::EventHub;
use crate::service::metrics::Metrics;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Deliveries of one subscription in flight at most.
const PER_SUBSCRIPTION: usize = 16;
/// Deliveries of this node in flight at most.
const PER_NODE: usize = 64;
/// How long the loop waits, once woken by an append, for more to gather
/// into the same round.
const GATHER: Duration = Duration::from_millis(5);

/// Whether `ip` is an address of the operator's own networks (or no
/// real destination): refused unless allowed.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_private_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private_v4(v4);
            }
            let s = v6.segments();
            v6 == Ipv6Addr::LOCALHOST
                || v6 == Ipv6Addr::UNSPECIFIED
                || (s[0] & 0xfe00) == 0xfc00 // unique-local (AWS metadata fd00:ec2::254 too)
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] & 0xff00) == 0xff00 // multicast
                || (s[0] == 0x64 && s[1] == 0xff9b) // NAT64 of any v4
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        }
    }
}

fn is_private_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local() // 169.254/16, the cloud metadata address
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_broadcast()
        || o[0] == 0
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // CGNAT 100.64/10
        || o[0] >= 240 // reserved
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // IETF protocol assignments
}

/// How `webhooks.allowed_hosts` admits a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admission {
    /// Listed by name, IP literal or `*.suffix`: whatever it resolves to.
    Explicit,
    /// Only through `*`: not to private addresses (unless allowed).
    Wildcard,
    Refused,
}

fn admission(host: &str, settings: &WebhookSettings) -> Admission {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let host_ip: Option<IpAddr> = host.trim_matches(['[', ']']).parse().ok();
    let mut any = false;
    for entry in &settings.allowed_hosts {
        let entry = entry.trim_end_matches('.').to_ascii_lowercase();
        if entry == "*" {
            any = true;
        } else if let Some(suffix) = entry.strip_prefix("*.") {
            if host.ends_with(&format!(".{suffix}")) {
                return Admission::Explicit;
            }
        } else if let (Some(a), Ok(b)) = (host_ip, entry.trim_matches(['[', ']']).parse::<IpAddr>())
        {
            if a == b {
                return Admission::Explicit;
            }
        } else if entry == host {
            return Admission::Explicit;
        }
    }
    if any {
        Admission::Wildcard
    } else {
        Admission::Refused
    }
}

/// Check a subscription URL against the settings (at creation, and again
/// before every delivery): the reason it is refused, never the URL's
/// query or credentials.
pub fn check_url(url: &str, settings: &WebhookSettings) -> Result<reqwest::Url, String> {
    if url.len() > settings.max_url_bytes {
        return Err(format!(
            "url: {} bytes, longer than the {} allowed (webhooks.max_url_bytes)",
            url.len(),
            settings.max_url_bytes
        ));
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("url: not an absolute URL ({e})"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "url: the scheme {:?} is not allowed; use http or https",
            parsed.scheme().chars().take(20).collect::<String>()
        ));
    }
    let Some(host) = parsed.host_str() else {
        return Err("url: no host".into());
    };
    match admission(host, settings) {
        Admission::Refused => Err(format!(
            "url: the host {:?} is not in webhooks.allowed_hosts",
            host.chars().take(255).collect::<String>()
        )),
        Admission::Explicit => Ok(parsed),
        Admission::Wildcard => {
            let literal: Option<IpAddr> = host.trim_matches(['[', ']']).parse().ok();
            match literal {
                Some(ip) if is_private(ip) && !settings.allow_private_networks => Err(format!(
                    "url: {ip} is a loopback, private, link-local or otherwise internal address; \
                     list it in webhooks.allowed_hosts or set webhooks.allow_private_networks"
                )),
                _ => Ok(parsed),
            }
        }
    }
}

/// The HTTP client's resolver: a host reached only through `*` resolves
/// to public addresses only (unless private networks are allowed).
struct GuardedResolver {
    settings: WebhookSettings,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        let open = self.settings.allow_private_networks
            || admission(&host, &self.settings) == Admission::Explicit;
        Box::pin(async move {
            let addrs: Vec<std::net::SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let kept: Vec<_> = addrs
                .into_iter()
                .filter(|a| open || !is_private(a.ip()))
                .collect();
            if kept.is_empty() {
                return Err(format!(
                    "{host} resolves to no address webhooks may reach (internal addresses are refused; \
                     list the host in webhooks.allowed_hosts to allow it)"
                )
                .into());
            }
            Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The client every delivery of this node uses.
pub fn client(settings: &WebhookSettings) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_millis(settings.timeout_ms))
        .no_proxy()
        .dns_resolver(Arc::new(GuardedResolver {
            settings: settings.clone(),
        }))
        .user_agent(concat!("neardup/", env!("CARGO_PKG_VERSION")))
        .build()
        .expect("the webhook HTTP client builds")
}

/// A new secret: `whsec_` + base64 of 32 random bytes.
pub fn new_secret() -> String {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).expect("the OS random source");
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

/// The key of a secret `whsec_<base64>` of 24–64 bytes (`None`: not one).
pub fn secret_key(secret: &str) -> Option<Vec<u8>> {
    let key = base64::engine::general_purpose::STANDARD
        .decode(secret.strip_prefix("whsec_")?)
        .ok()?;
    (24..=64).contains(&key.len()).then_some(key)
}

/// `v1,` + base64 of HMAC-SHA256(key, "{id}.{timestamp}.{body}").
pub fn sign(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac =
        <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    )
}

/// RFC 3339 of `ms` since the epoch (UTC, milliseconds).
pub fn rfc3339(ms: u64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// The JSON body of a delivery: `{type, timestamp, data}`.
pub fn payload(collection: &str, sub: &Subscription, d: &Delivery) -> Vec<u8> {
    let e = &d.event;
    let matches = sub.selects(&e.draft).unwrap_or_default();
    serde_json::to_vec(&serde_json::json!({
        "type": e.draft.kind.as_str(),
        "timestamp": rfc3339(e.draft.time_ms),
        "data": {
            "collection": collection,
            "event": e.id,
            "cursor": e.cursor,
            "document": e.draft.document,
            "write": e.draft.write,
            "matches": matches,
        }
    }))
    .expect("a payload serializes")
}

/// The delay before attempt `attempt + 1`, after `attempt` failed ones:
/// `min(base·2^(attempt−1), max)`, ±20% jitter.
pub fn backoff_ms(attempt: u32, settings: &WebhookSettings) -> u64 {
    let exp = settings
        .backoff_base_ms
        .saturating_mul(1u64 << attempt.saturating_sub(1).min(40));
    let d = exp.min(settings.backoff_max_ms);
    let r = getrandom::u32().unwrap_or(0) as f64 / u32::MAX as f64; // 0..1
    (d as f64 * (0.8 + 0.4 * r)).round() as u64
}

/// The delivery task's shared parts.
struct Deliverer {
    collections: Arc<Collections>,
    hub: Arc<EventHub>,
    metrics: Arc<Metrics>,
    settings: WebhookSettings,
    client: reqwest::Client,
    /// This node's name for the Redis consumer groups.
    consumer: String,
    slots: tokio::sync::Semaphore,
    /// (collection id, subscription id) with a round in flight.
    busy: Mutex<HashSet<(u64, String)>>,
    /// What the loop failed to read at its last try, with the error.
    failing: Failing,
}

/// Reads the delivery loop retries at every poll (five a second by
/// default) that fail, keyed by collection id and subscription (`None`:
/// the collection's subscriptions themselves).
type Failing = crate::failing::Failing<(u64, Option<String>)>;

/// Run the delivery loop until dropped (the app aborts it at shutdown;
/// an attempt cut off then is delivered again after the restart).
pub async fn run(
    collections: Arc<Collections>,
    hub: Arc<EventHub>,
    metrics: Arc<Metrics>,
    settings: WebhookSettings,
) {
    let d = Arc::new(Deliverer {
        collections,
        hub,
        metrics,
        client: client(&settings),
        consumer: format!("node-{}", uuid::Uuid::now_v7().simple()),
        slots: tokio::sync::Semaphore::new(PER_NODE),
        busy: Mutex::new(HashSet::new()),
        failing: Failing::default(),
        settings,
    });
    let mut rounds = tokio::task::JoinSet::new();
    let poll = Duration::from_millis(d.settings.poll_ms);
    let timing = crate::backend::DeliveryTiming {
        backoff_base_ms: d.settings.backoff_base_ms,
        backoff_max_ms: d.settings.backoff_max_ms,
        timeout_ms: d.settings.timeout_ms,
    };
    // Woken by this node's appends, the loop delivers with the rules it
    // holds (this node's own subscription changes refresh them at once);
    // at every poll it re-reads them (other nodes' changes) and the
    // pending counts.
    let (mut polled, mut last_poll) = (true, std::time::Instant::now());
    loop {
        while rounds.try_join_next().is_some() {}
        let colls = d.collections.list();
        d.hub
            .retain(&colls.iter().map(|c| c.id).collect::<Vec<_>>());
        for c in colls {
            let Some(b) = c.backend() else {
                continue;
            };
            // On Redis, how long a take is this node's before another node
            // may take it again (the backoff and the timeout configured).
            b.set_delivery_timing(timing);
            let rules = if polled {
                d.hub.refresh(&c).await
            } else {
                d.hub.rules(&c).await
            };
            let key = (c.id, None);
            let rules = match rules {
                Ok(r) => {
                    if d.failing.worked(&key) {
                        tracing::info!(collection = %c.name, "the webhook subscriptions can be read again");
                    }
                    r
                }
                Err(e) => {
                    if d.failing.failed(key, e.to_string()) {
                        tracing::warn!(collection = %c.name, error = %e, "reading the webhook subscriptions failed; retried at every poll, logged again when the error changes");
                    }
                    continue;
                }
            };
            let mut pending = 0;
            for sub in &rules.subscriptions {
                if polled {
                    pending += b.pending_deliveries(c.dir(), &sub.id).await.unwrap_or(0);
                }
                let key = (c.id, sub.id.clone());
                if !d.busy.lock().expect("busy lock").insert(key.clone()) {
                    continue;
                }
                let (d2, c2, sub2) = (Arc::clone(&d), Arc::clone(&c), sub.clone());
                rounds.spawn(async move {
                    let more = d2.round(&c2, &sub2).await;
                    d2.busy.lock().expect("busy lock").remove(&key);
                    if more {
                        d2.hub.appended.notify_one();
                    }
                });
            }
            if polled && !rules.subscriptions.is_empty() {
                d.metrics.set_webhook_pending(c.name.as_str(), pending);
            }
        }
        d.metrics.set_failed_dropped(
            crate::events::FAILED_DROPPED.load(std::sync::atomic::Ordering::Relaxed),
        );
        tokio::select! {
            _ = d.hub.appended.notified() => {
                // Let a burst of appends gather into one round.
                tokio::time::sleep(GATHER.min(poll)).await;
            }
            _ = tokio::time::sleep(poll) => {}
        }
        // A poll is due once `poll` has passed, however often appends wake
        // the loop meanwhile.
        polled = last_poll.elapsed() >= poll;
        if polled {
            last_poll = std::time::Instant::now();
        }
    }
}

impl Deliverer {
    /// Deliver what is due to `sub` now; true if there may be more.
    async fn round(&self, c: &Collection, sub: &Subscription) -> bool {
        let Some(b) = c.backend() else {
            return false;
        };
        let key = (c.id, Some(sub.id.clone()));
        let due = match b
            .due_deliveries(
                c.dir(),
                sub,
                &self.consumer,
                crate::events::now_ms(),
                PER_SUBSCRIPTION,
            )
            .await
        {
            Ok(d) => {
                if self.failing.worked(&key) {
                    tracing::info!(collection = %c.name, subscription = %sub.id, "due deliveries can be read again");
                }
                d
            }
            Err(e) => {
                if self.failing.failed(key, e.to_string()) {
                    tracing::warn!(collection = %c.name, subscription = %sub.id, error = %e, "reading due deliveries failed; retried at every poll, logged again when the error changes");
                }
                return false;
            }
        };
        let full = due.len() == PER_SUBSCRIPTION;
        let attempts = due.iter().map(|d| self.attempt(c, sub, d));
        let outcomes = futures_util::future::join_all(attempts).await;
        // Settled together, once the round's attempts are over (a crash
        // before this delivers them again: at least once).
        let settled: Vec<(&Delivery, Attempt)> = due
            .iter()
            .zip(outcomes)
            .filter_map(|(d, o)| o.map(|o| (d, o)))
            .collect();
        let n = settled.len();
        if let Err(e) = b.settle_many(c.dir(), sub, settled).await {
            tracing::error!(collection = %c.name, subscription = %sub.id, deliveries = n, error = %e, "settling deliveries failed; they will be delivered again");
        }
        full
    }

    /// One attempt of `d`: how it ended (`None`: the node is stopping).
    async fn attempt(&self, c: &Collection, sub: &Subscription, d: &Delivery) -> Option<Attempt> {
        let Ok(_slot) = self.slots.acquire().await else {
            return None;
        };
        let result = self.post(c, sub, d).await;
        let now = crate::events::now_ms();
        let n = d.attempts + 1;
        let (outcome, label) = match result {
            Ok(()) => (Attempt::Delivered, "delivered"),
            Err(error) if n >= self.settings.max_attempts => (Attempt::Failed { error }, "failed"),
            Err(error) => (
                Attempt::Retry {
                    next_ms: now + backoff_ms(n, &self.settings),
                    error,
                },
                "retry",
            ),
        };
        if let Attempt::Retry { error, .. } | Attempt::Failed { error } = &outcome {
            tracing::info!(collection = %c.name, subscription = %sub.id, event = %d.event.id, attempt = n, outcome = label, error = %error, "webhook delivery not accepted");
        }
        let since = (label == "delivered")
            .then(|| now.saturating_sub(d.event.draft.time_ms) as f64 / 1000.0);
        self.metrics.observe_delivery(c.name.as_str(), label, since);
        Some(outcome)
    }

    /// POST `d` to `sub`: Ok on a 2xx, else why not (no secret in it).
    async fn post(&self, c: &Collection, sub: &Subscription, d: &Delivery) -> Result<(), String> {
        let url = check_url(&sub.url, &self.settings)?;
        let key = secret_key(&sub.secret).ok_or("the subscription's secret is not usable")?;
        let body = payload(c.name.as_str(), sub, d);
        let id = d.event.webhook_id(&sub.id);
        let ts = (crate::events::now_ms() / 1000) as i64;
        let signature = sign(&key, &id, ts, &body);
        let answer = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", &id)
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await;
        match answer {
            Ok(r) => {
                let status = r.status();
                drain(r).await;
                if status.is_success() {
                    Ok(())
                } else {
                    Err(format!("the receiver answered HTTP {}", status.as_u16()))
                }
            }
            Err(e) => Err(describe(&e, self.settings.timeout_ms)),
        }
    }
}

/// Read and drop a receiver's answer body of up to [`DRAIN_BYTES`], so
/// its keep-alive connection goes back to the pool for the next delivery:
/// a body not all received with the answer's head and dropped unread
/// closes the connection (a new TCP connection, and TLS handshake, a
/// delivery for a receiver that answers with a page). A longer or broken
/// body just closes it; the outcome is the status's either way.
async fn drain(mut r: reqwest::Response) {
    let mut read = 0usize;
    while read <= DRAIN_BYTES {
        match r.chunk().await {
            Ok(Some(chunk)) => read += chunk.len(),
            Ok(None) | Err(_) => return,
        }
    }
}

/// The most of an answer body a delivery reads to keep its connection.
const DRAIN_BYTES: usize = 64 * 1024;

/// A request error in words, without the URL.
fn describe(e: &reqwest::Error, timeout_ms: u64) -> String {
    if e.is_timeout() {
        return format!("no answer within {timeout_ms} ms (webhooks.timeout_ms)");
    }
    let mut root: &dyn std::error::Error = e;
    while let Some(s) = root.source() {
        root = s;
    }
    let kind = if e.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    format!("{kind}: {root}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_private_and_public_ones_are_not() {
        for ip in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "::1",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:10.0.0.1",
            "::",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn a_url_is_checked_for_scheme_length_and_host() {
        let mut s = WebhookSettings::default();
        assert!(check_url("https://hooks.example.com/x?q=1", &s).is_ok());
        assert!(check_url("ftp://hooks.example.com/", &s)
            .unwrap_err()
            .contains("scheme"));
        assert!(check_url("http://169.254.169.254/latest", &s)
            .unwrap_err()
            .contains("internal"));
        assert!(check_url("http://[::1]:8080/", &s).is_err());
        let long = format!("https://example.com/{}", "a".repeat(10_000));
        assert!(check_url(&long, &s).unwrap_err().contains("longer"));
        s.allowed_hosts = vec!["127.0.0.1".into(), "*.example.org".into()];
        assert!(check_url("http://127.0.0.1:9/", &s).is_ok());
        assert!(check_url("https://a.example.org/", &s).is_ok());
        assert!(check_url("https://example.com/", &s)
            .unwrap_err()
            .contains("allowed_hosts"));
    }

    #[test]
    fn the_backoff_doubles_to_its_cap_within_the_jitter() {
        let s = WebhookSettings::default();
        for (attempt, base) in [(1, 1000), (2, 2000), (4, 8000), (30, 600_000)] {
            let d = backoff_ms(attempt, &s);
            assert!(d >= base * 8 / 10 && d <= base * 12 / 10, "{attempt}: {d}");
        }
    }

    #[test]
    fn a_signature_matches_the_standard_webhooks_example() {
        // The example of the Standard Webhooks specification.
        let key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }
}
