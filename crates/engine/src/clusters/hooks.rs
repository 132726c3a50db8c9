//! The engine's client of lifecycle-hook's internal service: hands over the
//! batch of pending lifecycle actions of one removal, resolves completed
//! ones, and extends deadlines on heartbeats.

use chrono::{DateTime, Utc};
use ember_proto::lifecyclehook::v1 as pb;
use ember_proto::lifecyclehook::v1::lifecycle_hook_internal_service_client::LifecycleHookInternalServiceClient;
use ember_runtime::Identity;
use ember_runtime::channel::failure;
use ember_runtime::identity::InternalCredential;
use ember_runtime::in_process::{InProcessConnector, Upstream};
use ember_runtime::time::to_timestamp;

use crate::domain::cluster::{ClusterAction, HookTarget, HookTransition, LifecycleHooks};
use crate::error::{Error, Result};

/// One pending lifecycle action to hand over.
pub struct PendingHook<'a> {
    pub action: &'a ClusterAction,
    pub resource_id: String,
    pub hooks: &'a LifecycleHooks,
    pub transition: HookTransition,
    pub deadline: DateTime<Utc>,
}

#[derive(Clone)]
pub struct HookClient {
    upstream: Option<Upstream>,
    credential: InternalCredential,
}

impl HookClient {
    /// A lazily connected client, spread over every replica the name
    /// resolves to (within a Tokio runtime; a call that cannot connect to
    /// one is sent again); an empty URL disables hooks
    /// (every hook call then fails Unavailable, and the actions stay
    /// waiting). `in_process`: lifecycle-hook runs in this process, called
    /// directly instead.
    pub fn connect_lazy(
        url: &str,
        in_process: Option<&InProcessConnector>,
        credential: InternalCredential,
    ) -> std::result::Result<HookClient, String> {
        let upstream = if in_process.is_none() && url.is_empty() {
            None
        } else {
            Some(
                Upstream::to(url, in_process, crate::peer_endpoint).map_err(|error| {
                    format!("engine.lifecycle_hook_url {url:?} is invalid: {error}")
                })?,
            )
        };
        Ok(HookClient {
            upstream,
            credential,
        })
    }

    fn client(&self) -> Result<LifecycleHookInternalServiceClient<Upstream>> {
        self.upstream
            .clone()
            .map(LifecycleHookInternalServiceClient::new)
            .ok_or_else(|| {
                Error::Unavailable(
                    "no lifecycle-hook service is configured (engine.lifecycle_hook_url)".into(),
                )
            })
    }

    fn request<T>(&self, project_id: &str, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        let identity = Identity::new("ember-engine", project_id, vec!["admin".to_owned()]);
        identity.attach(&self.credential, &mut request);
        request.set_timeout(std::time::Duration::from_secs(5));
        request
    }

    /// Hands over a batch in one call (idempotent on the tokens).
    pub async fn record(&self, pending: &[PendingHook<'_>]) -> Result<()> {
        let Some(first) = pending.first() else {
            return Ok(());
        };
        let actions = pending
            .iter()
            .map(|hook| pb::NewPendingAction {
                token: hook.action.id.to_string(),
                node_id: hook.action.target_id.to_string(),
                resource_id: hook.resource_id.clone(),
                cluster_id: hook
                    .action
                    .cluster_id
                    .map(|id| id.to_string())
                    .unwrap_or_default(),
                project_id: hook.action.project_id.clone(),
                target: Some(match &hook.hooks.target {
                    HookTarget::Queue(queue) => pb::Target {
                        r#type: pb::TargetType::Queue as i32,
                        queue: queue.clone(),
                        url: String::new(),
                    },
                    HookTarget::Webhook(url) => pb::Target {
                        r#type: pb::TargetType::Webhook as i32,
                        queue: String::new(),
                        url: url.clone(),
                    },
                }),
                timeout_secs: hook.hooks.timeout_secs,
                deadline: Some(to_timestamp(hook.deadline)),
                lifecycle_transition_type: hook.transition.as_str().to_owned(),
            })
            .collect();
        let mut client = self.client()?;
        let message = pb::RecordPendingActionsRequest { actions };
        client
            .record_pending_actions(self.request(&first.action.project_id, message))
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    /// Tells lifecycle-hook these tokens were completed.
    pub async fn resolve(
        &self,
        project_id: &str,
        tokens: Vec<String>,
        resolved_by: &str,
    ) -> Result<()> {
        let mut client = self.client()?;
        let message = pb::ResolvePendingActionsRequest {
            tokens,
            resolution: "COMPLETED".into(),
            resolved_by: resolved_by.to_owned(),
        };
        client
            .resolve_pending_actions(self.request(project_id, message))
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    /// Extends a waiting action's deadline; returns the new one.
    pub async fn extend(&self, project_id: &str, token: &str) -> Result<prost_types::Timestamp> {
        let mut client = self.client()?;
        let message = pb::ExtendDeadlineRequest {
            token: token.to_owned(),
        };
        let response = client
            .extend_deadline(self.request(project_id, message))
            .await
            .map_err(|status| match status.code() {
                tonic::Code::NotFound => Error::NotFound(status.message().to_owned()),
                tonic::Code::FailedPrecondition => Error::Conflict(status.message().to_owned()),
                _ => unavailable(status),
            })?
            .into_inner();
        response
            .deadline
            .ok_or_else(|| Error::Unavailable("lifecycle-hook returned no deadline".into()))
    }
}

fn unavailable(status: tonic::Status) -> Error {
    Error::Unavailable(format!("lifecycle-hook: {}", failure(&status)))
}
