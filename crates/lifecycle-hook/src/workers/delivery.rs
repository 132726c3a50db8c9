//! Delivering lifecycle messages. Each due action is claimed (its next
//! attempt pushed past the attempt's own time limit), sent once, and its
//! outcome recorded: delivered, retrying at a backed-off moment, or failed
//! for good (a 4xx from a webhook, or no time left before the deadline).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use tokio::sync::{Mutex, Notify};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::webhook::WebhookClient;
use crate::domain::{DeliveryState, PendingLifecycleAction, Target};
use crate::store::{DeliveryResult, HookEvent, PendingActionStore};
use ember_runtime::https::SendFailure;

/// Header carrying `sha256=<hex HMAC-SHA256 of the body>`.
pub const SIGNATURE_HEADER: &str = "X-Ember-Signature";
/// NATS subjects are `ember.lifecycle.<project>.<queue>` (see
/// [`nats_subject`]), in this stream.
pub const NATS_SUBJECT_PREFIX: &str = "ember.lifecycle.";

/// The subject of `project_id`'s queue `queue`: queues belong to a
/// project, so two projects' queues of one name never share a subject.
/// Queue names are letters, digits, `_` and `-` (checked with the policy);
/// in a project id every other byte is written `%XX`, so no project id can
/// add a token or a wildcard to the subject.
pub fn nats_subject(project_id: &str, queue: &str) -> String {
    let mut project = String::with_capacity(project_id.len());
    for byte in project_id.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-' {
            project.push(char::from(byte));
        } else {
            project.push_str(&format!("%{byte:02X}"));
        }
    }
    if project.is_empty() {
        project.push('%');
    }
    format!("{NATS_SUBJECT_PREFIX}{project}.{queue}")
}
pub const NATS_STREAM: &str = "EMBER_LIFECYCLE";
/// How long the stream keeps a lifecycle message: longer than any hook
/// waits (a deadline is at most a day), short enough not to grow forever.
pub const NATS_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// The most the stream holds; the oldest messages go first.
pub const NATS_MAX_BYTES: i64 = 1024 * 1024 * 1024;
/// How long one attempt (HTTP request or JetStream publish + ack) may take.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// A claimed attempt belongs to this replica for this long; a replica that
/// dies mid-attempt leaves the action to be retried after it.
const CLAIM: Duration = Duration::from_secs(30);
/// Retry backoff: first retry after this, doubling, at most [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Actions claimed per pass.
const BATCH: u64 = 256;

/// `sha256=<hex>` of `body` under `secret` (`None` only for a key HMAC
/// refuses, which it does not for any length).
pub fn signature(secret: &[u8], body: &[u8]) -> Option<String> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).ok()?;
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let mut text = String::with_capacity(7 + digest.len() * 2);
    text.push_str("sha256=");
    for byte in digest {
        text.push_str(&format!("{byte:02x}"));
    }
    Some(text)
}

/// How one attempt ended.
enum Attempt {
    Delivered(String),
    /// Worth trying again (5xx, connection error, broker unavailable).
    Retryable(String),
    /// The target refused it for good.
    Final(String),
}

pub struct Deliverer {
    store: Arc<dyn PendingActionStore>,
    http: WebhookClient,
    webhook_secret: Vec<u8>,
    nats_url: String,
    jetstream: Mutex<Option<async_nats::jetstream::Context>>,
}

impl Deliverer {
    pub fn new(
        store: Arc<dyn PendingActionStore>,
        webhook_secret: Vec<u8>,
        nats_url: String,
        webhook_ca_file: &str,
        webhook_targets: ember_runtime::egress::EgressRules,
    ) -> Result<Deliverer, String> {
        let http = WebhookClient::new(webhook_ca_file, ATTEMPT_TIMEOUT, webhook_targets)?;
        Ok(Deliverer {
            store,
            http,
            webhook_secret,
            nats_url,
            jetstream: Mutex::new(None),
        })
    }

    pub async fn run(self, wake: Arc<Notify>, shutdown: CancellationToken) {
        let pass = || self.pass();
        let due = || self.store.next_delivery_due();
        super::run_passes("delivery", BATCH, pass, due, &wake, &shutdown).await;
    }

    /// Claims and delivers what is due; returns how many were claimed.
    pub async fn pass(&self) -> crate::Result<usize> {
        let now = ember_runtime::time::now();
        let claim_until = now + chrono::Duration::from_std(CLAIM).unwrap_or_default();
        let claimed = self
            .store
            .claim_due_deliveries(now, claim_until, BATCH)
            .await?;
        let count = claimed.len();
        let (embedded, sent): (Vec<_>, Vec<_>) = claimed.into_iter().partition(|action| {
            matches!(action.target, Target::Queue { .. }) && self.nats_url.is_empty()
        });
        if !embedded.is_empty() {
            let messages: Vec<(PendingLifecycleAction, String)> = embedded
                .into_iter()
                .map(|action| {
                    let body = action.message_body();
                    (action, body)
                })
                .collect();
            self.store.enqueue_messages(&messages).await?;
            info!(
                count = messages.len(),
                "lifecycle messages queued (embedded)"
            );
        }
        if !sent.is_empty() {
            let results =
                futures::future::join_all(sent.iter().map(|action| self.deliver(action))).await;
            self.store.record_deliveries(&results).await?;
        }
        Ok(count)
    }

    async fn deliver(&self, action: &PendingLifecycleAction) -> DeliveryResult {
        let body = action.message_body();
        let attempt = match &action.target {
            Target::Webhook { url } => self.post(url, body).await,
            Target::Queue { queue } => self.publish(queue, action, body).await,
        };
        outcome(action, attempt, ember_runtime::time::now())
    }

    async fn post(&self, url: &str, body: String) -> Attempt {
        if self.webhook_secret.is_empty() {
            return Attempt::Final(
                "no lifecycle_hook.webhook_secret is configured: webhooks cannot be signed".into(),
            );
        }
        let Some(signature) = signature(&self.webhook_secret, body.as_bytes()) else {
            return Attempt::Final("the webhook secret cannot key an HMAC".into());
        };
        let response = self
            .http
            .post(url, &[(SIGNATURE_HEADER, signature.as_str())], body)
            .await;
        match response {
            Ok(status) if status.is_success() => {
                Attempt::Delivered(format!("POST {url} answered {status}"))
            }
            // Busy or timed out on its side: worth another try.
            Ok(status)
                if status.is_server_error()
                    || status == http::StatusCode::TOO_MANY_REQUESTS
                    || status == http::StatusCode::REQUEST_TIMEOUT =>
            {
                Attempt::Retryable(format!("POST {url} answered {status}"))
            }
            Ok(status) => Attempt::Final(format!("POST {url} answered {status}: not retried")),
            // The target is (now) an internal address: never retried, the
            // reason recorded (a name that resolved elsewhere when its
            // policy was made, DNS rebinding included).
            // A name that does not resolve now may later: retried.
            Err(SendFailure::Refused(
                refusal @ ember_runtime::egress::EgressRefusal::Unresolved { .. },
            )) => Attempt::Retryable(format!("POST {url} failed: {refusal}")),
            Err(SendFailure::Refused(refusal)) => {
                Attempt::Final(format!("POST {url} refused: {refusal}"))
            }
            Err(SendFailure::Failed(error)) => {
                Attempt::Retryable(format!("POST {url} failed: {error}"))
            }
        }
    }

    async fn jetstream(&self) -> Result<async_nats::jetstream::Context, String> {
        let mut slot = self.jetstream.lock().await;
        if let Some(context) = slot.as_ref() {
            return Ok(context.clone());
        }
        let client = async_nats::ConnectOptions::new()
            .connection_timeout(ATTEMPT_TIMEOUT)
            .connect(self.nats_url.as_str())
            .await
            .map_err(|error| format!("cannot connect to NATS at {}: {error}", self.nats_url))?;
        let context = async_nats::jetstream::new(client);
        // Lifecycle messages are kept a bounded time and size: a stream
        // made by an earlier version without limits gets them too.
        let config = async_nats::jetstream::stream::Config {
            name: NATS_STREAM.to_owned(),
            subjects: vec![format!("{NATS_SUBJECT_PREFIX}>")],
            max_age: NATS_MAX_AGE,
            max_bytes: NATS_MAX_BYTES,
            ..Default::default()
        };
        context
            .get_or_create_stream(config.clone())
            .await
            .map_err(|error| format!("cannot create the NATS stream {NATS_STREAM}: {error}"))?;
        context.update_stream(&config).await.map_err(|error| {
            format!("cannot set the limits of the NATS stream {NATS_STREAM}: {error}")
        })?;
        *slot = Some(context.clone());
        Ok(context)
    }

    async fn publish(&self, queue: &str, action: &PendingLifecycleAction, body: String) -> Attempt {
        let context = match self.jetstream().await {
            Ok(context) => context,
            Err(error) => return Attempt::Retryable(error),
        };
        let subject = nats_subject(&action.project_id, queue);
        let message = async_nats::jetstream::message::PublishMessage::build()
            .payload(body.into())
            .message_id(action.token.to_string());
        let acknowledged = async {
            context
                .send_publish(subject.clone(), message)
                .await
                .map_err(|error| error.to_string())?
                .await
                .map_err(|error| error.to_string())
        };
        match tokio::time::timeout(ATTEMPT_TIMEOUT, acknowledged).await {
            Ok(Ok(ack)) => Attempt::Delivered(format!(
                "published to {subject} (stream {}, sequence {})",
                ack.stream, ack.sequence
            )),
            Ok(Err(error)) => Attempt::Retryable(format!("publishing to {subject}: {error}")),
            Err(_) => Attempt::Retryable(format!(
                "publishing to {subject}: no acknowledgement within {ATTEMPT_TIMEOUT:?}"
            )),
        }
    }
}

#[cfg(test)]
mod subject_tests {
    use super::nats_subject;

    #[test]
    fn subjects_are_per_project_and_cannot_be_steered() {
        assert_eq!(nats_subject("demo", "drain"), "ember.lifecycle.demo.drain");
        assert_ne!(nats_subject("a", "q"), nats_subject("b", "q"));
        assert_eq!(
            nats_subject("x.y*>", "q"),
            "ember.lifecycle.x%2Ey%2A%3E.q",
            "dots and wildcards are escaped"
        );
        assert_eq!(nats_subject("", "q"), "ember.lifecycle.%.q");
    }
}

/// The backoff before retry number `attempts + 1`.
fn backoff(attempts: u32) -> Duration {
    FIRST_BACKOFF
        .saturating_mul(2u32.saturating_pow(attempts.min(16)))
        .min(MAX_BACKOFF)
}

fn outcome(
    action: &PendingLifecycleAction,
    attempt: Attempt,
    now: DateTime<Utc>,
) -> DeliveryResult {
    let attempt_number = action.delivery_attempts + 1;
    let result = |state, error: Option<String>, next, kind: &str, detail: String| DeliveryResult {
        token: action.token,
        state,
        error,
        next_attempt_at: next,
        event: HookEvent::about(action, kind, detail),
    };
    match attempt {
        Attempt::Delivered(detail) => {
            info!(token = %action.token, delivered_to = action.target.type_name(), "lifecycle message delivered");
            result(DeliveryState::Delivered, None, None, "SENT", detail)
        }
        Attempt::Final(error) => {
            warn!(token = %action.token, %error, "lifecycle delivery refused");
            result(
                DeliveryState::Failed,
                Some(error.clone()),
                None,
                "DELIVERY_FAILED",
                format!("attempt {attempt_number}: {error}"),
            )
        }
        Attempt::Retryable(error) => {
            let next = now
                + chrono::Duration::from_std(backoff(action.delivery_attempts)).unwrap_or_default();
            if next >= action.deadline {
                warn!(token = %action.token, %error, "lifecycle delivery given up: deadline");
                result(
                    DeliveryState::Failed,
                    Some(error.clone()),
                    None,
                    "DELIVERY_FAILED",
                    format!(
                        "attempt {attempt_number}: {error}; the deadline comes before another attempt"
                    ),
                )
            } else {
                result(
                    DeliveryState::Retrying,
                    Some(error.clone()),
                    Some(next),
                    "DELIVERY_RETRY",
                    format!(
                        "attempt {attempt_number}: {error}; next attempt at {}",
                        next.to_rfc3339()
                    ),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_hex_hmac_sha256() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?").as_deref(),
            Some("sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        );
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        assert_eq!(backoff(0), Duration::from_millis(200));
        assert_eq!(backoff(1), Duration::from_millis(400));
        assert_eq!(backoff(30), MAX_BACKOFF);
    }
}
