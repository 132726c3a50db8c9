//! Message receivers' queues (Senlin's Zaqar queues, kept by Ember in its
//! own database): posting checks every message body as far as it can
//! without running anything and stores all of a request's messages or
//! none; a worker (woken by each post, and sweeping periodically for
//! messages posted through another engine or left by one that died)
//! claims them and runs each as the receiver's creator, through the same
//! path as a webhook (`trigger::run`). `notify` (Senlin's) runs a
//! receiver's pending messages at once. Messages from the message bus
//! (lifecycle-hook's NATS consumer) are posted the same way, as the project
//! their subject names, and a bad one leaves an event on the receiver,
//! since no one reads an answer.
//!
//! Each message runs once while engines live: a claim holds it under a
//! lease with a token of its own, and only that claim deletes it, right
//! after its action is recorded. The action and the delete are two
//! writes: an engine dying between them leaves the message to run again
//! once the lease passes (at-least-once after a crash). A message that
//! cannot run (no such cluster, not allowed, bad params) is dropped with
//! an ERROR event on the receiver saying why; one that expired is dropped
//! unrun, with its event too. A failure worth retrying (the database or a
//! service unavailable) leaves it claimed: it runs again when the lease
//! passes, until it expires.

use std::sync::Arc;
use std::time::Duration;

use ember_runtime::Identity;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};
use uuid::Uuid;

use super::{ReceiverService, refuse_readers, trigger};
use crate::domain::cluster::{ClusterAction, ClusterEvent};
use crate::domain::receiver::{
    Receiver, ReceiverMessage, ReceiverType, message_command, message_ttl, queue_receiver_id,
};
use crate::error::{Error, Result};

/// How long a claim holds a message while it runs.
pub const MESSAGE_LEASE: Duration = Duration::from_secs(30);
/// How often the worker looks for messages no post woke it for.
pub const MESSAGE_SWEEP_INTERVAL: Duration = Duration::from_secs(2);
/// How many messages one claim takes.
const MESSAGES_PER_CLAIM: u64 = 16;
/// At most this many messages in one post (they are stored in one
/// transaction).
pub const MAX_MESSAGES_PER_POST: usize = 100;
/// The `action` of the events about messages that did not run.
const NOTIFY_EVENT_ACTION: &str = "RECEIVER_NOTIFY";

/// One message as a poster sends it.
#[derive(Debug, Clone)]
pub struct PostedMessage {
    /// `{"cluster": …, "action": …, "params": {…}}`.
    pub body: Value,
    /// Seconds; Zaqar's default (3600) when `None`.
    pub ttl: Option<i64>,
}

impl PostedMessage {
    /// Message `index` of a request as callers send it: its body as JSON
    /// text, its ttl.
    pub fn parse(index: usize, body: &str, ttl: Option<i64>) -> Result<PostedMessage> {
        let body = serde_json::from_str(body).map_err(|error| {
            Error::InvalidInput(format!("messages[{index}]: the body is not JSON: {error}"))
        })?;
        Ok(PostedMessage { body, ttl })
    }
}

/// One message as it comes from the message bus: its body as JSON text
/// (not yet parsed: a body that is not JSON is refused with an event on
/// the receiver, like any other bad body).
#[derive(Debug, Clone)]
pub struct BusMessage {
    pub body: String,
    /// Seconds; Zaqar's default (3600) when `None`.
    pub ttl: Option<i64>,
}

/// Why a claimed message did not run.
enum NotRun {
    /// Worth another try: left claimed until its lease passes.
    Retry(Error),
    /// Never going to run: dropped, with an event saying why.
    Drop {
        cluster_id: Option<Uuid>,
        reason: String,
    },
}

impl NotRun {
    fn of(cluster_id: Option<Uuid>, error: Error) -> NotRun {
        match error {
            Error::DatabaseUnavailable(_) | Error::Unavailable(_) => NotRun::Retry(error),
            other => NotRun::Drop {
                cluster_id,
                reason: other.to_string(),
            },
        }
    }
}

/// A bad message's error, naming which message of the request it is.
fn at_index(index: usize, error: Error) -> Error {
    match error {
        Error::InvalidInput(message) => {
            Error::InvalidInput(format!("messages[{index}]: {message}"))
        }
        other => other,
    }
}

fn queue_not_found(queue: &str) -> Error {
    Error::NotFound(format!(
        "queue '{queue}' not found: messages go to the queue of one of this project's \
         message receivers (senlin-receiver-<receiver id>)"
    ))
}

impl ReceiverService {
    /// Posts `posted` to `queue` (the caller's project's message
    /// receiver's): all stored, or none when one is bad (the error names
    /// its index). Wakes the worker that runs them.
    pub async fn post_messages(
        &self,
        caller: &Identity,
        queue: &str,
        posted: Vec<PostedMessage>,
    ) -> Result<Vec<ReceiverMessage>> {
        refuse_readers(caller)?;
        let receiver = self.queue_receiver(&caller.project_id, queue).await?;
        self.store_messages(&receiver, queue, posted).await
    }

    /// Posts what the message bus carried to `queue` of `project_id` (the
    /// project its subject names: no caller's token is involved). Like
    /// [`Self::post_messages`], all or nothing; a bad body is also
    /// recorded as an ERROR event on the receiver, since whoever published
    /// it gets no answer to read.
    pub async fn post_bus_messages(
        &self,
        project_id: &str,
        queue: &str,
        posted: Vec<BusMessage>,
    ) -> Result<Vec<ReceiverMessage>> {
        let receiver = self.queue_receiver(project_id, queue).await?;
        let parsed = posted
            .iter()
            .enumerate()
            .map(|(index, message)| PostedMessage::parse(index, &message.body, message.ttl))
            .collect::<Result<Vec<_>>>();
        let stored = match parsed {
            Ok(parsed) => self.store_messages(&receiver, queue, parsed).await,
            Err(error) => Err(error),
        };
        if let Err(Error::InvalidInput(reason)) = &stored {
            self.record_dropped(
                &receiver,
                None,
                format!("a message from the message bus was refused: {reason}"),
            )
            .await;
        }
        stored
    }

    /// The message receiver of `project_id` whose queue is `queue`.
    async fn queue_receiver(&self, project_id: &str, queue: &str) -> Result<Receiver> {
        match queue_receiver_id(queue) {
            Some(id) => self.store.get_receiver(id).await?,
            None => None,
        }
        .filter(|receiver| {
            receiver.kind == ReceiverType::Message && receiver.project_id == project_id
        })
        .ok_or_else(|| queue_not_found(queue))
    }

    /// Checks every message of a post to `receiver`'s `queue` and stores
    /// them all, or none when one is bad (the error names its index).
    async fn store_messages(
        &self,
        receiver: &Receiver,
        queue: &str,
        posted: Vec<PostedMessage>,
    ) -> Result<Vec<ReceiverMessage>> {
        if posted.is_empty() {
            return Err(Error::InvalidInput("No messages to enqueue.".into()));
        }
        if posted.len() > MAX_MESSAGES_PER_POST {
            return Err(Error::InvalidInput(format!(
                "No more than {MAX_MESSAGES_PER_POST} messages can be posted at a time \
                 ({} were)",
                posted.len()
            )));
        }
        let now = ember_runtime::time::now();
        let mut messages = Vec::with_capacity(posted.len());
        for (index, message) in posted.into_iter().enumerate() {
            let ttl = message_ttl(message.ttl).map_err(|error| at_index(index, error))?;
            let command = message_command(&message.body).map_err(|error| at_index(index, error))?;
            trigger::check_values(&command.params).map_err(|error| at_index(index, error))?;
            let Value::Object(body) = message.body else {
                return Err(at_index(
                    index,
                    Error::InvalidInput("the body must be a JSON object".into()),
                ));
            };
            messages.push(ReceiverMessage {
                id: Uuid::now_v7(),
                receiver_id: receiver.id,
                project_id: receiver.project_id.clone(),
                body,
                posted_at: now,
                expires_at: now + ttl,
            });
        }
        if !self.store.post_messages(receiver.id, &messages).await? {
            return Err(queue_not_found(queue));
        }
        info!(
            receiver_id = %receiver.id,
            messages = messages.len(),
            "messages posted to a receiver's queue"
        );
        self.wake_message_worker();
        Ok(messages)
    }

    /// Senlin's notify: runs the receiver's pending messages now; the
    /// actions they started. The receiver's creator (or an admin) only.
    pub async fn notify(&self, caller: &Identity, name_or_id: &str) -> Result<Vec<ClusterAction>> {
        let receiver = self.find(caller, name_or_id).await?;
        if !caller.is_admin() && caller.user_id != receiver.user_id {
            return Err(Error::Forbidden(
                "You are not authorized to complete this operation.".into(),
            ));
        }
        if receiver.kind != ReceiverType::Message {
            return Err(Error::InvalidInput(
                "Notifying non-message receiver is not allowed.".into(),
            ));
        }
        info!(receiver_id = %receiver.id, "receiver notified");
        self.run_pending(Some(receiver.id)).await
    }

    /// Drops expired messages, then claims and runs the pending messages
    /// of `receiver_id` (of every queue when `None`) until none is left
    /// to claim; the actions they started.
    pub async fn run_pending(&self, receiver_id: Option<Uuid>) -> Result<Vec<ClusterAction>> {
        self.drop_expired().await?;
        let lease = chrono::Duration::from_std(MESSAGE_LEASE).unwrap_or(chrono::Duration::MAX);
        let mut started = Vec::new();
        loop {
            let claim_token = Uuid::now_v7();
            let now = ember_runtime::time::now();
            let claimed = self
                .store
                .claim_messages(
                    receiver_id,
                    claim_token,
                    now,
                    now + lease,
                    MESSAGES_PER_CLAIM,
                )
                .await?;
            if claimed.is_empty() {
                return Ok(started);
            }
            for message in &claimed {
                started.extend(self.run_claimed(message, claim_token).await);
            }
        }
    }

    /// Runs one claimed message and deletes it, unless it is worth
    /// another try.
    async fn run_claimed(
        &self,
        message: &ReceiverMessage,
        claim_token: Uuid,
    ) -> Option<ClusterAction> {
        let receiver = match self.store.get_receiver(message.receiver_id).await {
            Ok(Some(receiver)) => receiver,
            // Deleted since, with its queue: nothing to run.
            Ok(None) => return None,
            Err(error) => {
                warn!(message_id = %message.id, %error, "cannot read a message's receiver: retried later");
                return None;
            }
        };
        let started = match self.run_message(&receiver, message).await {
            Ok(action) => {
                info!(
                    receiver_id = %receiver.id,
                    message_id = %message.id,
                    action_id = %action.id,
                    action = action.kind.as_str(),
                    "receiver message ran"
                );
                Some(action)
            }
            Err(NotRun::Retry(error)) => {
                warn!(
                    receiver_id = %receiver.id,
                    message_id = %message.id,
                    %error,
                    "receiver message not run: retried when its claim lapses"
                );
                return None;
            }
            Err(NotRun::Drop { cluster_id, reason }) => {
                let asked = command_summary(&message.body);
                self.record_dropped(
                    &receiver,
                    cluster_id,
                    format!("message {} ({asked}) dropped: {reason}", message.id),
                )
                .await;
                None
            }
        };
        if let Err(error) = self
            .store
            .delete_claimed_message(message.id, claim_token)
            .await
        {
            warn!(message_id = %message.id, %error, "cannot delete a receiver message that ran");
        }
        started
    }

    /// Records `message`'s action as the receiver's creator: the cluster
    /// it names is looked up in the receiver's project, and must be the
    /// creator's unless the creator is an admin (Senlin's rules).
    async fn run_message(
        &self,
        receiver: &Receiver,
        message: &ReceiverMessage,
    ) -> std::result::Result<ClusterAction, NotRun> {
        let command = message_command(&Value::Object(message.body.clone()))
            .and_then(|command| trigger::check_values(&command.params).map(|()| command))
            .map_err(|error| NotRun::of(None, error))?;
        let owner = receiver.owner();
        let cluster = self
            .clusters
            .store()
            .find_cluster(Some(&receiver.project_id), &command.cluster)
            .await
            .map_err(|error| NotRun::of(None, error))?
            .ok_or_else(|| NotRun::Drop {
                cluster_id: None,
                reason: format!("The cluster '{}' could not be found.", command.cluster),
            })?;
        if !owner.is_admin() && cluster.user_id != receiver.user_id {
            return Err(NotRun::Drop {
                cluster_id: Some(cluster.id),
                reason: format!(
                    "{} is not allowed to trigger actions on cluster {}.",
                    receiver.user_id, command.cluster
                ),
            });
        }
        trigger::run(
            &self.clusters,
            &owner,
            &cluster.id.to_string(),
            &command.action,
            &command.params,
        )
        .await
        .map_err(|error| NotRun::of(Some(cluster.id), error))
    }

    /// Drops the messages that expired unclaimed, each with its event.
    async fn drop_expired(&self) -> Result<()> {
        let expired = self
            .store
            .delete_expired_messages(ember_runtime::time::now())
            .await?;
        for message in expired {
            let Some(receiver) = self.store.get_receiver(message.receiver_id).await? else {
                continue;
            };
            let asked = command_summary(&message.body);
            self.record_dropped(
                &receiver,
                None,
                format!(
                    "message {} ({asked}) dropped unrun: it expired at {} (posted at {})",
                    message.id,
                    message.expires_at.to_rfc3339(),
                    message.posted_at.to_rfc3339()
                ),
            )
            .await;
        }
        Ok(())
    }

    /// An ERROR event on the receiver (and the log) saying why a message
    /// did not run: what its poster can read with `GET /events`.
    async fn record_dropped(&self, receiver: &Receiver, cluster_id: Option<Uuid>, reason: String) {
        error!(receiver_id = %receiver.id, reason = %reason, "receiver message not run");
        let event = ClusterEvent::new(
            "RECEIVER",
            receiver.id,
            &receiver.name,
            cluster_id,
            NOTIFY_EVENT_ACTION,
            "FAILED",
            reason,
            &receiver.project_id,
            &receiver.user_id,
        );
        if let Err(error) = self.clusters.store().record_events(&[event]).await {
            warn!(receiver_id = %receiver.id, %error, "cannot record a receiver message's event");
        }
    }

    fn wake_message_worker(&self) {
        self.wake.notify_one();
    }
}

/// What a message asked, for the events about it: `ACTION on 'cluster'`.
fn command_summary(body: &serde_json::Map<String, Value>) -> String {
    let field = |key: &str| match body.get(key) {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => "nothing".to_owned(),
    };
    format!("{} on cluster '{}'", field("action"), field("cluster"))
}

/// Starts the worker that runs posted messages: at once when a post on
/// this engine wakes it, else every [`MESSAGE_SWEEP_INTERVAL`]. Stops with
/// `shutdown` (messages it held are run by the next claim once their
/// lease passes).
pub fn spawn_message_worker(service: Arc<ReceiverService>, shutdown: CancellationToken) {
    tokio::spawn(async move {
        loop {
            if let Err(error) = service.run_pending(None).await {
                warn!(%error, "cannot run receiver messages: tried again at the next sweep");
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = service.wake.notified() => {}
                () = tokio::time::sleep(MESSAGE_SWEEP_INTERVAL) => {}
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bad_messages_are_named_by_index() {
        let error = at_index(
            2,
            Error::InvalidInput("params must be a JSON object".into()),
        );
        assert_eq!(
            error.to_string(),
            "messages[2]: params must be a JSON object"
        );
        assert!(matches!(
            at_index(0, Error::NotFound("x".into())),
            Error::NotFound(_)
        ));
    }

    #[test]
    fn only_unavailability_is_retried() {
        assert!(matches!(
            NotRun::of(None, Error::DatabaseUnavailable("down".into())),
            NotRun::Retry(_)
        ));
        assert!(matches!(
            NotRun::of(None, Error::Conflict("cooldown".into())),
            NotRun::Drop { .. }
        ));
    }

    #[test]
    fn summaries_say_what_was_asked() {
        let body = json!({"action": "CLUSTER_SCALE_OUT", "cluster": "web"});
        assert_eq!(
            command_summary(body.as_object().unwrap()),
            "CLUSTER_SCALE_OUT on cluster 'web'"
        );
        assert_eq!(
            command_summary(&serde_json::Map::new()),
            "nothing on cluster 'nothing'"
        );
    }
}
