//! Resource signals (Heat's `POST …/resources/{name}/signal`). A signal to
//! an `OS::Heat::ScalingPolicy` resizes the AutoScalingGroup the policy
//! names. Admission (`StackOperation::Signal`) is asked for the policy's
//! stack (with every stack above it) and the group's nested stack; then
//! the policy's stack lease is taken (the group's row lives there), the
//! cooldown is respected (the policy's, else the group's), the capacity is
//! clamped to min_size..max_size, and the group's nested stack is updated
//! under its own lease in the background — the call returns once the
//! group is UPDATE_IN_PROGRESS. A signal that changes nothing (refused, in
//! cooldown, an alarm that is not in alarm state, no change of size) leaves
//! an event that starts with "signal ignored:".
//!
//! One file per kind of signal: `scaling` (a scaling policy's), `tokens`
//! (a signal URL's, with its token), `handles` (a user's, to a deployment
//! or a wait condition handle).

use std::sync::Arc;

use ember_runtime::Identity;
use serde_json::Value;
use tokio::sync::oneshot;

use super::mark_unhealthy::{current_rows, find_resource};
use super::{StackCaller, StackOperation, StackOperations};
use crate::domain::{Event, Resource};
use crate::error::{Error, Result};
use crate::resources::software::is_deployment;
use crate::resources::wait_condition::handle_style;
use crate::resources::{AUTOSCALING_GROUP_TYPE, PolicySettings, SCALING_POLICY_TYPE};

mod handles;
mod scaling;
mod tokens;

use scaling::{alarm_state, invalid_settings, properties};

/// What a signal did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignalOutcome {
    /// Set when the signal started a scaling.
    pub scaling: Option<Scaling>,
    /// What happened, as the event says it.
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scaling {
    pub group: String,
    pub from_capacity: u64,
    pub to_capacity: u64,
}

impl StackOperations {
    /// Signals a resource of `stack` (by name or physical id) with
    /// `details` (any JSON; alarm notifications carry `current`/`state`).
    pub async fn signal_resource(
        self: &Arc<Self>,
        identity: &Identity,
        stack: &str,
        resource: &str,
        details: Value,
    ) -> Result<SignalOutcome> {
        if let Some(hook) = super::breakpoints::unset_hook_of(&details) {
            let message = self
                .clear_breakpoint(identity, stack, resource, hook)
                .await?;
            return Ok(SignalOutcome {
                scaling: None,
                message,
            });
        }
        let stack = self.find_stack(identity, stack).await?;
        let policy = find_resource(
            &stack.name,
            self.store().list_resources(stack.id).await?,
            resource,
        )?;
        if let Some(style) = handle_style(&policy.type_name) {
            return self.signal_wait_handle(&policy, style, &details).await;
        }
        if is_deployment(&policy.type_name) {
            return self
                .signal_deployment(&policy, Some(&stack.project_id), &details)
                .await;
        }
        if policy.type_name != SCALING_POLICY_TYPE {
            return Err(Error::InvalidInput(format!(
                "resource {:?} ({}) does not accept signals: {SCALING_POLICY_TYPE} resources and wait condition handles do",
                policy.name, policy.type_name
            )));
        }
        if let Err(error) = self
            .admit(&stack, StackOperation::Signal, StackCaller::User(identity))
            .await
        {
            self.signal_refused(&policy, &error).await;
            return Err(error);
        }
        if let Some(state) = alarm_state(&details).filter(|state| state != "alarm") {
            let message = format!("signal ignored: the alarm state is {state:?}, not \"alarm\"");
            self.resource_event(&policy, &message).await;
            return Ok(SignalOutcome {
                scaling: None,
                message,
            });
        }
        // A policy whose create never finished (its stack's create failed
        // or was stopped) has no settings to act on yet.
        if policy.action == crate::domain::StackAction::Init
            || (policy.action == crate::domain::StackAction::Create
                && policy.status != crate::domain::ActionStatus::Complete)
        {
            return Err(Error::Conflict(format!(
                "scaling policy {:?} is {}: it takes signals once created",
                policy.name,
                policy.resource_status()
            )));
        }
        let settings = PolicySettings::of(&properties(&policy))
            .map_err(|failure| invalid_settings(&policy, failure))?;
        let group = current_rows(self.store().list_resources(stack.id).await?)
            .into_values()
            .find(|row| {
                row.type_name == AUTOSCALING_GROUP_TYPE
                    && (row.physical_id.as_deref() == Some(settings.group.as_str())
                        || row.name == settings.group)
            });
        let Some(group) = group else {
            // An operation that began since the stack was read (a delete,
            // an update replacing the group) moved the rows on: the
            // caller retries, as for any busy stack.
            let now = self.store().get_stack(stack.id).await?;
            if now.as_ref().is_none_or(|now| {
                now.status == crate::domain::ActionStatus::InProgress
                    || now.updated_at != stack.updated_at
                    || now.deleted_at.is_some()
            }) {
                return Err(Error::Conflict(format!(
                    "stack {:?} is busy: an operation began while the signal was read (try again when it finishes)",
                    stack.name
                )));
            }
            return Err(invalid_settings(
                &policy,
                format!(
                    "auto_scaling_group_id {:?} names no {AUTOSCALING_GROUP_TYPE} of stack {:?}",
                    settings.group, stack.name
                ),
            ));
        };
        let nested = match group.physical_id.as_deref().map(uuid::Uuid::parse_str) {
            Some(Ok(nested_id)) => self.store().get_stack(nested_id).await?,
            _ => None,
        };
        let Some(nested) = nested else {
            return Err(Error::Conflict(format!(
                "group {:?} is {}: it has no members to scale yet",
                group.name,
                group.resource_status()
            )));
        };
        // The members' stack belongs to the group: its own state decides.
        if let Err(error) = self
            .admit(
                &nested,
                StackOperation::Signal,
                StackCaller::ParentOperation(None),
            )
            .await
        {
            self.signal_refused(&policy, &error).await;
            return Err(error);
        }
        // The rest runs in its own task, so the lease is always released
        // even if the caller goes away.
        let (answer, answered) = oneshot::channel();
        let operations = self.clone();
        let group_name = group.name.clone();
        let identity = identity.clone();
        tokio::spawn(async move {
            operations
                .scale_with_lease(&identity, stack, policy, group_name, answer)
                .await;
        });
        answered.await.map_err(|_| {
            Error::DatabaseUnavailable("the signal stopped before it was decided".to_owned())
        })?
    }

    /// An event of `resource` that changes nothing.
    pub(super) async fn resource_event(&self, resource: &Resource, reason: &str) {
        let mut event = Event::for_resource(resource, ember_runtime::time::now());
        event.reason = reason.to_owned();
        if let Err(error) = self.store().record_events(&[event]).await {
            tracing::warn!(stack_id = %resource.stack_id, %error, "cannot record a signal event");
        }
    }
}
