//! Feeding Senlin message receivers from NATS JetStream. When NATS is
//! configured, whatever is published to `<prefix>.<project>.<queue>` (by
//! default `ember.receivers.<project>.senlin-receiver-<id>`) is posted to
//! that receiver's queue in the engine, as the project the subject names —
//! the same queue `POST /messaging/v2/queues/{queue}/messages` fills.
//!
//! The stream (a work queue: a message is gone once handled) is made or
//! updated with its limits at start, and every replica pulls from ONE
//! durable consumer, so each message goes to one replica. A message is
//! acknowledged once the engine stored it; one the engine refuses (a bad
//! body, a queue that is not that project's receiver's) is terminated —
//! logged here, and for a bad body an ERROR event on the receiver — never
//! redelivered; while the engine cannot be reached it is redelivered after
//! a growing delay, until the stream's `max_age` drops it.
//!
//! A message stored by the engine whose acknowledgement is lost (NATS or
//! this replica gone at that moment) is redelivered and posted again:
//! at-least-once, like the engine's own queue after a crash.

use std::time::Duration;

use async_nats::jetstream::AckKind;
use async_nats::jetstream::consumer::{AckPolicy, pull};
use async_nats::jetstream::stream::{Config as StreamConfig, RetentionPolicy};
use ember_proto::engine::v1 as engine_pb;
use ember_proto::engine::v1::receiver_queue_service_client::ReceiverQueueServiceClient;
use ember_runtime::Identity;
use ember_runtime::channel::Balanced;
use ember_runtime::identity::InternalCredential;
use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::config::ReceiverStreamConfig;

/// The durable consumer every replica shares.
pub const CONSUMER: &str = "ember-lifecycle-hook";
/// How long a replica holds a message before NATS hands it to another:
/// longer than handling a whole pulled batch takes, every engine call
/// timing out ([`PULL_BATCH`] × [`ENGINE_TIMEOUT`]), so a slow engine does
/// not make NATS hand a message to two replicas.
const ACK_WAIT: Duration = Duration::from_secs(60);
/// How long one engine call may take.
const ENGINE_TIMEOUT: Duration = Duration::from_secs(10);
/// Messages a replica pulls at a time (handled one after the other).
const PULL_BATCH: usize = 4;
/// How long connecting to NATS may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Redelivery (and reconnection) delay: this, doubling, at most
/// [`MAX_RETRY_DELAY`].
const FIRST_RETRY_DELAY: Duration = Duration::from_secs(1);
const MAX_RETRY_DELAY: Duration = Duration::from_secs(60);
/// A message the engine failed on for no reason it named (an internal
/// error) is tried this many times, then terminated.
const MAX_FAILED_DELIVERIES: i64 = 10;

/// Where one message goes: `queue` of `project_id`.
#[derive(Debug, PartialEq, Eq)]
pub struct Destination {
    pub project_id: String,
    pub queue: String,
}

/// The destination of a message published to `subject`, under `prefix`:
/// `<prefix>.<project>.<queue>`, the project written as the lifecycle
/// subjects write it (bytes other than letters, digits, `_`, `-` as
/// `%XX`; `%` alone for an empty id).
pub fn destination(prefix: &str, subject: &str) -> Result<Destination, String> {
    let refused = |why: &str| format!("subject {subject:?}: {why}");
    let rest = subject
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('.'))
        .ok_or_else(|| refused(&format!("not under {prefix}.")))?;
    let (project, queue) = rest
        .split_once('.')
        .filter(|(_, queue)| !queue.is_empty() && !queue.contains('.'))
        .ok_or_else(|| refused(&format!("must be {prefix}.<project>.<queue>")))?;
    let project_id = unescape_project(project)
        .ok_or_else(|| refused(&format!("the project {project:?} is not escaped as %XX")))?;
    Ok(Destination {
        project_id,
        queue: queue.to_owned(),
    })
}

fn unescape_project(token: &str) -> Option<String> {
    if token == "%" {
        return Some(String::new());
    }
    let bytes = token.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = token.get(index + 1..index + 3)?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            decoded.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(decoded).ok().filter(|id| !id.is_empty())
}

/// The message a payload stands for: Zaqar's message object (a JSON
/// object with a `body` key, and an optional integer `ttl`), or else the
/// body itself (`{"cluster", "action", "params"}`). Whatever the body is,
/// the engine judges it (and says why on the receiver when it is bad).
pub fn message_input(payload: &[u8]) -> Result<engine_pb::ReceiverMessageInput, String> {
    if let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(payload)
        && let Some(body) = object.get("body")
    {
        let ttl = match object.get("ttl") {
            None | Some(Value::Null) => None,
            Some(ttl) => Some(ttl.as_i64().ok_or_else(|| {
                format!("the message's ttl must be an integer number of seconds, not {ttl}")
            })?),
        };
        return Ok(engine_pb::ReceiverMessageInput {
            body: body.to_string(),
            ttl,
        });
    }
    Ok(engine_pb::ReceiverMessageInput {
        body: String::from_utf8_lossy(payload).into_owned(),
        ttl: None,
    })
}

/// What becomes of a message after the engine answered.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Stored: acknowledged.
    Stored,
    /// Refused for good (bad body, no such queue in that project):
    /// terminated, never redelivered.
    Refused,
    /// The engine (or the way to it) is unavailable: redelivered later,
    /// for as long as the stream keeps it.
    Unavailable,
    /// The engine failed for a reason it did not name: redelivered later,
    /// at most [`MAX_FAILED_DELIVERIES`] times.
    Failed,
}

fn verdict(code: tonic::Code) -> Verdict {
    use tonic::Code;
    match code {
        Code::Ok => Verdict::Stored,
        Code::InvalidArgument
        | Code::NotFound
        | Code::PermissionDenied
        | Code::FailedPrecondition
        | Code::AlreadyExists
        | Code::OutOfRange => Verdict::Refused,
        // Unauthenticated: the internal credential is misconfigured, which
        // an operator fixes; Unimplemented: an engine older than this
        // service, during an upgrade.
        Code::Unavailable
        | Code::DeadlineExceeded
        | Code::ResourceExhausted
        | Code::Aborted
        | Code::Cancelled
        | Code::Unauthenticated
        | Code::Unimplemented => Verdict::Unavailable,
        Code::Internal | Code::Unknown | Code::DataLoss => Verdict::Failed,
    }
}

/// The delay before delivery number `delivered + 1`.
fn retry_delay(delivered: i64) -> Duration {
    let doublings = u32::try_from(delivered.saturating_sub(1).clamp(0, 16)).unwrap_or(16);
    FIRST_RETRY_DELAY
        .saturating_mul(2u32.saturating_pow(doublings))
        .min(MAX_RETRY_DELAY)
}

/// Pulls the receivers' stream and posts each message to the engine.
pub struct ReceiverFeed {
    nats_url: String,
    stream: ReceiverStreamConfig,
    engine: Balanced,
    credential: InternalCredential,
}

impl ReceiverFeed {
    /// `None` without NATS (receivers are fed by REST only) or without an
    /// engine to post to.
    pub fn new(
        nats_url: &str,
        stream: ReceiverStreamConfig,
        engine: Option<Balanced>,
        credential: InternalCredential,
    ) -> Option<ReceiverFeed> {
        if nats_url.is_empty() {
            return None;
        }
        let Some(engine) = engine else {
            warn!(
                "no lifecycle_hook.engine_url is configured: messages published for receivers wait in NATS until one is"
            );
            return None;
        };
        Some(ReceiverFeed {
            nats_url: nats_url.to_owned(),
            stream,
            engine,
            credential,
        })
    }

    /// Consumes until `shutdown` (the message in hand is finished, so it
    /// is acknowledged or handed back at once, not after [`ACK_WAIT`]);
    /// reconnects (after a growing delay) when NATS goes away.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut failures = 0;
        while !shutdown.is_cancelled() {
            if let Err(error) = self.consume(&mut failures, &shutdown).await {
                failures += 1;
                let delay = retry_delay(failures);
                warn!(%error, retry_in = ?delay, "cannot consume receiver messages from NATS");
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }

    /// Connects, makes the stream and the consumer, and handles messages
    /// until the connection fails; `failures` (of connecting in a row)
    /// starts again from zero once the consumer is pulling.
    async fn consume(
        &self,
        failures: &mut i64,
        shutdown: &CancellationToken,
    ) -> Result<(), String> {
        let connect = async_nats::ConnectOptions::new()
            .connection_timeout(CONNECT_TIMEOUT)
            .connect(self.nats_url.as_str());
        let client = tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            client = connect => client,
        }
        .map_err(|error| format!("cannot connect to NATS at {}: {error}", self.nats_url))?;
        let context = async_nats::jetstream::new(client);
        let name = &self.stream.stream;
        let config = StreamConfig {
            name: name.clone(),
            subjects: vec![format!("{}.*.*", self.stream.subject_prefix)],
            retention: RetentionPolicy::WorkQueue,
            max_age: self.stream.max_age,
            max_bytes: self.stream.max_bytes,
            ..Default::default()
        };
        context
            .get_or_create_stream(config.clone())
            .await
            .map_err(|error| format!("cannot create the NATS stream {name}: {error}"))?;
        context
            .update_stream(&config)
            .await
            .map_err(|error| format!("cannot set the limits of the NATS stream {name}: {error}"))?;
        let consumer = context
            .get_stream(name)
            .await
            .map_err(|error| format!("cannot open the NATS stream {name}: {error}"))?
            .get_or_create_consumer(
                CONSUMER,
                pull::Config {
                    durable_name: Some(CONSUMER.to_owned()),
                    description: Some(
                        "lifecycle-hook: posts each message to its receiver's queue".to_owned(),
                    ),
                    ack_policy: AckPolicy::Explicit,
                    ack_wait: ACK_WAIT,
                    ..Default::default()
                },
            )
            .await
            .map_err(|error| format!("cannot make the consumer {CONSUMER} of {name}: {error}"))?;
        let mut messages = consumer
            .stream()
            .max_messages_per_batch(PULL_BATCH)
            .messages()
            .await
            .map_err(|error| format!("cannot pull from {name}: {error}"))?;
        info!(stream = %name, consumer = CONSUMER, "consuming receiver messages from NATS");
        *failures = 0;
        loop {
            let next = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                next = messages.next() => next,
            };
            match next {
                Some(Ok(message)) => self.handle(message).await,
                Some(Err(error)) => return Err(format!("pulling from {name}: {error}")),
                None => return Err(format!("the pull from {name} ended")),
            }
        }
    }

    async fn handle(&self, message: async_nats::jetstream::Message) {
        let delivered = message.info().map(|info| info.delivered).unwrap_or(1);
        let subject = message.subject.to_string();
        let outcome = self.post(&subject, &message.payload).await;
        let ack = match outcome {
            Ok(message_ids) => {
                info!(%subject, ?message_ids, "receiver message posted from NATS");
                AckKind::Ack
            }
            Err((Verdict::Refused, reason)) => {
                error!(%subject, %reason, "receiver message from NATS refused: dropped");
                AckKind::Term
            }
            Err((Verdict::Failed, reason)) if delivered >= MAX_FAILED_DELIVERIES => {
                error!(%subject, %reason, delivered, "receiver message from NATS failed every time: dropped");
                AckKind::Term
            }
            Err((_, reason)) => {
                let delay = retry_delay(delivered);
                warn!(%subject, %reason, delivered, retry_in = ?delay, "receiver message from NATS not posted: redelivered later");
                AckKind::Nak(Some(delay))
            }
        };
        // Acknowledgements are confirmed: once this returns, NATS will not
        // hand the message out again.
        if let Err(error) = message.double_ack_with(ack).await {
            warn!(%subject, %error, "cannot acknowledge a receiver message: NATS redelivers it");
        }
    }

    /// Posts one message; the ids the engine stored it under, or why not.
    async fn post(&self, subject: &str, payload: &[u8]) -> Result<Vec<String>, (Verdict, String)> {
        let destination = destination(&self.stream.subject_prefix, subject)
            .map_err(|reason| (Verdict::Refused, reason))?;
        let input = message_input(payload).map_err(|reason| (Verdict::Refused, reason))?;
        let mut request = tonic::Request::new(engine_pb::PostProjectReceiverMessagesRequest {
            project_id: destination.project_id,
            queue_name: destination.queue,
            messages: vec![input],
        });
        Identity::new("ember-lifecycle-hook", "ember", vec!["admin".to_owned()])
            .attach(&self.credential, &mut request);
        request.set_timeout(ENGINE_TIMEOUT);
        match ReceiverQueueServiceClient::new(self.engine.clone())
            .post_project_receiver_messages(request)
            .await
        {
            Ok(response) => Ok(response.into_inner().message_ids),
            Err(status) => Err((
                verdict(status.code()),
                format!(
                    "the engine answered {:?}: {}",
                    status.code(),
                    status.message()
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workers::delivery::{NATS_SUBJECT_PREFIX, nats_subject};

    #[test]
    fn subjects_name_the_project_as_lifecycle_subjects_write_it() {
        for project in ["demo", "team-a_1", "x.y*>", "é", ""] {
            let lifecycle = nats_subject(project, "senlin-receiver-1");
            let subject = format!(
                "ember.receivers.{}",
                lifecycle.trim_start_matches(NATS_SUBJECT_PREFIX)
            );
            assert_eq!(
                destination("ember.receivers", &subject),
                Ok(Destination {
                    project_id: project.to_owned(),
                    queue: "senlin-receiver-1".to_owned()
                }),
                "{subject}"
            );
        }
        for (subject, why) in [
            ("ember.lifecycle.demo.q", "not under ember.receivers."),
            ("ember.receiversX.demo.q", "not under ember.receivers."),
            (
                "ember.receivers.demo",
                "must be ember.receivers.<project>.<queue>",
            ),
            (
                "ember.receivers.demo.q.extra",
                "must be ember.receivers.<project>.<queue>",
            ),
            ("ember.receivers.de%2.q", "is not escaped as %XX"),
            ("ember.receivers.%ZZ.q", "is not escaped as %XX"),
            ("ember.receivers.%FF.q", "is not escaped as %XX"),
        ] {
            let error = destination("ember.receivers", subject).expect_err(subject);
            assert!(error.contains(why), "{subject}: {error}");
        }
    }

    #[test]
    fn payloads_are_zaqar_messages_or_bare_bodies() {
        let zaqar = message_input(
            br#"{"body": {"cluster": "web", "action": "CLUSTER_SCALE_OUT"}, "ttl": 300}"#,
        )
        .expect("zaqar");
        assert_eq!(
            serde_json::from_str::<Value>(&zaqar.body).expect("JSON"),
            serde_json::json!({"cluster": "web", "action": "CLUSTER_SCALE_OUT"})
        );
        assert_eq!(zaqar.ttl, Some(300));
        let bare = br#"{"cluster": "web", "action": "CLUSTER_CHECK"}"#;
        let input = message_input(bare).expect("bare");
        assert_eq!(input.body.as_bytes(), bare);
        assert_eq!(input.ttl, None);
        // Not JSON: passed on for the engine to refuse on the receiver.
        assert_eq!(message_input(b"grow").expect("text").body, "grow");
        let error = message_input(br#"{"body": {}, "ttl": "soon"}"#).expect_err("ttl");
        assert!(error.contains("ttl must be an integer"), "{error}");
    }

    #[test]
    fn only_unavailability_is_retried_without_limit() {
        assert_eq!(verdict(tonic::Code::InvalidArgument), Verdict::Refused);
        assert_eq!(verdict(tonic::Code::NotFound), Verdict::Refused);
        assert_eq!(verdict(tonic::Code::Unavailable), Verdict::Unavailable);
        assert_eq!(verdict(tonic::Code::DeadlineExceeded), Verdict::Unavailable);
        assert_eq!(verdict(tonic::Code::Internal), Verdict::Failed);
    }

    #[tokio::test]
    async fn without_nats_or_an_engine_there_is_no_consumer() {
        let engine = ember_runtime::channel::balanced("http://127.0.0.1:1", |endpoint| endpoint)
            .expect("a channel");
        let feed = |nats_url: &str, engine: Option<Balanced>| {
            ReceiverFeed::new(
                nats_url,
                ReceiverStreamConfig::default(),
                engine,
                InternalCredential::new("credential"),
            )
            .is_some()
        };
        assert!(!feed("", Some(engine.clone())));
        assert!(!feed("nats://127.0.0.1:4222", None));
        assert!(feed("nats://127.0.0.1:4222", Some(engine)));
    }

    #[test]
    fn a_pulled_batch_is_handled_within_the_ack_wait() {
        let batch = u32::try_from(PULL_BATCH).expect("small");
        assert!(ENGINE_TIMEOUT * batch < ACK_WAIT);
    }

    #[test]
    fn redeliveries_back_off_up_to_a_minute() {
        assert_eq!(retry_delay(1), Duration::from_secs(1));
        assert_eq!(retry_delay(2), Duration::from_secs(2));
        assert_eq!(retry_delay(3), Duration::from_secs(4));
        assert_eq!(retry_delay(40), MAX_RETRY_DELAY);
        assert_eq!(retry_delay(0), Duration::from_secs(1));
    }
}
