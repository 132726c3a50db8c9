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

use std::sync::Arc;

use ember_runtime::Identity;
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

use super::lease::StackLease;
use super::mark_unhealthy::{current_rows, find_resource};
use super::{LeaseHolder, StackCaller, StackOperation, StackOperations};
use crate::domain::wait_condition::{
    HandleStyle, parse_signal, signal_reason as wait_signal_reason,
};
use crate::domain::{ActionStatus, Event, Resource, Stack, StackAction};
use crate::error::{Error, Result};
use crate::resources::software::is_deployment;
use crate::resources::wait_condition::{handle_style, signal_token};
use crate::resources::{
    AUTOSCALING_GROUP_TYPE, GroupSizes, PolicySettings, ResourceRequest, SCALING_POLICY_TYPE,
    new_capacity, recorded_capacity, resize_autoscaling_group,
};
use crate::store::FencedTransition;

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

/// What the policy's signal comes to, decided under the stack lease.
enum Decision {
    Ignore {
        row: Box<Resource>,
        message: String,
    },
    Scale {
        policy: Box<Resource>,
        group: Box<Resource>,
        scaling: Scaling,
    },
}

/// Heat: an alarm notification whose state is not "alarm" changes nothing.
fn alarm_state(details: &Value) -> Option<String> {
    let details = details.as_object()?;
    details
        .get("current")
        .or_else(|| details.get("state"))
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase)
}

fn properties(resource: &Resource) -> Map<String, Value> {
    resource.properties.as_object().cloned().unwrap_or_default()
}

fn invalid_settings(resource: &Resource, why: impl std::fmt::Display) -> Error {
    Error::InvalidInput(format!("resource {:?}: {why}", resource.name))
}

/// Seconds of cooldown left after the last scaling recorded in `data`.
fn cooldown_left(data: &Value, cooldown: u64, now: chrono::DateTime<chrono::Utc>) -> Option<i64> {
    let last = data.get("last_scaled_at").and_then(Value::as_str)?;
    let last = chrono::DateTime::parse_from_rfc3339(last).ok()?;
    let ends = last.with_timezone(&chrono::Utc)
        + chrono::Duration::seconds(i64::try_from(cooldown).unwrap_or(i64::MAX / 2));
    (ends > now).then(|| ((ends - now).num_milliseconds() + 999) / 1000)
}

fn with_last_scaled(resource: &Resource, now: chrono::DateTime<chrono::Utc>) -> Value {
    let mut data = resource.data.as_object().cloned().unwrap_or_default();
    data.insert("last_scaled_at".to_owned(), json!(now.to_rfc3339()));
    Value::Object(data)
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

    async fn scale_with_lease(
        self: Arc<Self>,
        identity: &Identity,
        stack: Stack,
        policy: Resource,
        group_name: String,
        answer: oneshot::Sender<Result<SignalOutcome>>,
    ) {
        let stack_lease = match self
            .shared
            .take_lease(stack.id, &stack.name, LeaseHolder::Signal)
            .await
        {
            Ok(stack_lease) => stack_lease,
            Err(error) => {
                self.signal_refused(&policy, &error).await;
                let _ = answer.send(Err(error));
                return;
            }
        };
        let started = match self
            .decide(identity, &stack, &policy.name, &group_name)
            .await
        {
            Ok(Decision::Ignore { row, message }) => {
                self.resource_event(&row, &message).await;
                Ok((
                    SignalOutcome {
                        scaling: None,
                        message,
                    },
                    None,
                ))
            }
            Ok(Decision::Scale {
                policy,
                group,
                scaling,
            }) => self
                .start_scaling(*policy, *group, &scaling, stack_lease.fence())
                .await
                .map(|group| {
                    let message = format!(
                        "signal: scaling {:?} from {} to {} members",
                        scaling.group, scaling.from_capacity, scaling.to_capacity
                    );
                    let to_capacity = scaling.to_capacity;
                    (
                        SignalOutcome {
                            scaling: Some(scaling),
                            message,
                        },
                        Some((group, to_capacity)),
                    )
                }),
            Err(error) => Err(error),
        };
        match started {
            Ok((outcome, Some((group, to_capacity)))) => {
                let _ = answer.send(Ok(outcome));
                self.finish_scaling(&stack, group, to_capacity, stack_lease)
                    .await;
            }
            Ok((outcome, None)) => {
                // Released before the answer: the caller's next call finds
                // the stack free.
                stack_lease.release().await;
                let _ = answer.send(Ok(outcome));
            }
            Err(error) => {
                stack_lease.release().await;
                let _ = answer.send(Err(error));
            }
        }
    }

    /// Reads the policy and the group again under the lease and decides.
    async fn decide(
        &self,
        identity: &Identity,
        stack: &Stack,
        policy_name: &str,
        group_name: &str,
    ) -> Result<Decision> {
        let stack = self
            .store()
            .get_stack(stack.id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("stack {:?} not found", stack.name)))?;
        self.admit(&stack, StackOperation::Signal, StackCaller::User(identity))
            .await?;
        let mut rows = current_rows(self.store().list_resources(stack.id).await?);
        let missing = |name: &str| {
            Error::NotFound(format!(
                "resource {name:?} not found in stack {:?}",
                stack.name
            ))
        };
        let policy = rows
            .remove(policy_name)
            .ok_or_else(|| missing(policy_name))?;
        let group = rows.remove(group_name).ok_or_else(|| missing(group_name))?;
        let settings = PolicySettings::of(&properties(&policy))
            .map_err(|failure| invalid_settings(&policy, failure))?;
        let sizes = GroupSizes::of(&properties(&group))
            .map_err(|failure| invalid_settings(&group, failure))?;
        let now = ember_runtime::time::now();
        let (cooldown, recorded_on, whose) = match settings.cooldown {
            Some(cooldown) => (cooldown, &policy, format!("policy {:?}", policy.name)),
            None => (
                sizes.cooldown.unwrap_or(0),
                &group,
                format!("group {:?}", group.name),
            ),
        };
        if let Some(left) = cooldown_left(&recorded_on.data, cooldown, now) {
            return Ok(Decision::Ignore {
                message: format!(
                    "signal ignored: {whose} is in cooldown for another {left} s (cooldown {cooldown} s since its last scaling)"
                ),
                row: Box::new(policy),
            });
        }
        let from_capacity = recorded_capacity(&group).unwrap_or(sizes.min_size);
        let to_capacity = new_capacity(from_capacity, &settings, sizes.min_size, sizes.max_size);
        if to_capacity == from_capacity {
            return Ok(Decision::Ignore {
                message: format!(
                    "signal ignored: group {:?} stays at {from_capacity} members (min_size {}, max_size {})",
                    group.name, sizes.min_size, sizes.max_size
                ),
                row: Box::new(policy),
            });
        }
        Ok(Decision::Scale {
            scaling: Scaling {
                group: group.name.clone(),
                from_capacity,
                to_capacity,
            },
            policy: Box::new(policy),
            group: Box::new(group),
        })
    }

    /// Records the scaling on the policy (its cooldown starts now) and puts
    /// the group UPDATE_IN_PROGRESS, in one transaction.
    async fn start_scaling(
        &self,
        mut policy: Resource,
        mut group: Resource,
        scaling: &Scaling,
        fence: crate::store::LeaseFence,
    ) -> Result<Resource> {
        let now = ember_runtime::time::now();
        policy.data = with_last_scaled(&policy, now);
        policy.status_reason = format!(
            "signal: scaling {:?} from {} to {} members",
            scaling.group, scaling.from_capacity, scaling.to_capacity
        );
        policy.updated_at = now;
        group.data = with_last_scaled(&group, now);
        group.action = StackAction::Update;
        group.status = ActionStatus::InProgress;
        group.status_reason = format!(
            "scaling from {} to {} members (signal to policy {:?})",
            scaling.from_capacity, scaling.to_capacity, policy.name
        );
        group.updated_at = now;
        let transitions = [
            FencedTransition {
                fence,
                event: Event::for_resource(&policy, now),
                resource: policy,
            },
            FencedTransition {
                fence,
                event: Event::for_resource(&group, now),
                resource: group.clone(),
            },
        ];
        let lost = self
            .store()
            .record_resource_transitions(&transitions)
            .await?;
        if !lost.is_empty() {
            return Err(Error::LeaseLost(format!(
                "stack {} was taken over while its signal was decided",
                fence.stack_id
            )));
        }
        Ok(group)
    }

    /// Resizes the group's members, then records the group's final state
    /// and releases the lease in one transaction.
    async fn finish_scaling(
        &self,
        stack: &Stack,
        group: Resource,
        capacity: u64,
        stack_lease: StackLease,
    ) {
        let request = ResourceRequest {
            stack_id: stack.id,
            stack_name: stack.name.clone(),
            project_id: stack.project_id.clone(),
            user_id: stack.user_id.clone(),
            nested_depth: stack.nested_depth,
            type_name: group.type_name.clone(),
            resource_name: group.name.clone(),
            resource_id: group.id,
            properties: properties(&group),
        };
        let resized = resize_autoscaling_group(self, &request, &group, capacity).await;
        let mut finished = group;
        match resized {
            Ok(outcome) => {
                finished.physical_id = Some(outcome.physical_id);
                finished.attributes = Value::Object(outcome.attributes);
                finished.data = outcome.data;
                finished.status = ActionStatus::Complete;
                finished.status_reason = "state changed".to_owned();
            }
            Err(failure) => {
                finished.status = ActionStatus::Failed;
                finished.status_reason = format!("resources.{}: {failure}", finished.name);
            }
        }
        finished.updated_at = ember_runtime::time::now();
        let event = Event::for_resource(&finished, finished.updated_at);
        match self
            .store()
            .finish_scaling(&finished, &event, stack_lease.fence())
            .await
        {
            Ok(()) => stack_lease.settle(),
            Err(error) => {
                // The guard releases the lease as it drops.
                tracing::error!(stack_id = %stack.id, %error, "cannot record the end of a scaling");
            }
        }
    }

    /// "signal ignored: …" on the policy, for a refused scaling signal.
    async fn signal_refused(&self, policy: &Resource, error: &Error) {
        if matches!(error, Error::Conflict(_)) {
            // An event of the resource that received the signal, as the
            // other ignored signals are: the stack's own events record only
            // its state transitions.
            self.resource_event(policy, &format!("signal ignored: {error}"))
                .await;
        }
    }

    /// Signals a wait condition handle with its secret instead of a user's
    /// token: `project_id` (when the URL names one) must be the stack's,
    /// `stack_id` is the stack's id, `handle` the handle's name or id.
    /// A wrong secret is answered as an unknown handle.
    pub async fn signal_wait_handle_with_token(
        &self,
        project_id: Option<&str>,
        stack_id: &str,
        handle: &str,
        token: &str,
        details: Value,
    ) -> Result<SignalOutcome> {
        let not_found = || {
            Error::NotFound(format!(
                "no wait condition handle {:?} of stack {:?} takes signals with this token",
                ember_runtime::quote::quoted(handle),
                ember_runtime::quote::quoted(stack_id)
            ))
        };
        let stack_uuid = uuid::Uuid::parse_str(stack_id).map_err(|_| not_found())?;
        let stack = self
            .store()
            .get_stack(stack_uuid)
            .await?
            .filter(|stack| project_id.is_none_or(|project| stack.project_id == project))
            .ok_or_else(not_found)?;
        let resource = match find_resource(
            &stack.name,
            self.store().list_resources(stack.id).await?,
            handle,
        ) {
            Ok(resource) => resource,
            // A deployment being created has no physical id yet: its
            // signal URL names the deployment, whose derived config holds
            // the secret.
            Err(_) => {
                return self
                    .signal_deployment_with_token(&stack, handle, token, &details)
                    .await
                    .map_err(|error| match error {
                        Error::NotFound(_) => not_found(),
                        other => other,
                    });
            }
        };
        let style = handle_style(&resource.type_name);
        if style.is_none() && !is_deployment(&resource.type_name) {
            return Err(not_found());
        }
        let expected = signal_token(&resource).ok_or_else(not_found)?;
        if !ember_runtime::identity::constant_time_eq(expected.as_bytes(), token.as_bytes()) {
            return Err(not_found());
        }
        match style {
            Some(style) => self.signal_wait_handle(&resource, style, &details).await,
            None => {
                self.signal_deployment(&resource, Some(&stack.project_id), &details)
                    .await
            }
        }
    }

    /// A signal to deployment `deployment` of `stack` with its secret (the
    /// token of the signal URL in its derived config).
    async fn signal_deployment_with_token(
        &self,
        stack: &Stack,
        deployment: &str,
        token: &str,
        details: &Value,
    ) -> Result<SignalOutcome> {
        let unknown = || Error::NotFound("no such deployment".to_owned());
        let deployment_id = uuid::Uuid::parse_str(deployment).map_err(|_| unknown())?;
        let software =
            self.shared.registry.software().ok_or_else(|| {
                Error::Unavailable("software deployments are not enabled".to_owned())
            })?;
        let record = software
            .store()
            .get_deployment(Some(&stack.project_id), deployment_id)
            .await?
            .ok_or_else(unknown)?;
        let config = software
            .store()
            .get_config(Some(&stack.project_id), record.config_id)
            .await?
            .ok_or_else(unknown)?;
        let input = |name: &str| {
            config
                .inputs
                .iter()
                .find(|input| input.get("name").and_then(Value::as_str) == Some(name))
                .and_then(|input| input.get("value"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let expected = input("deploy_signal_id")
            .and_then(|url| url.split_once("token=").map(|(_, token)| token.to_owned()))
            .ok_or_else(unknown)?;
        let stack_matches =
            input("deploy_stack_id").is_some_and(|path| path.ends_with(&format!("/{}", stack.id)));
        if !stack_matches
            || !ember_runtime::identity::constant_time_eq(expected.as_bytes(), token.as_bytes())
        {
            return Err(unknown());
        }
        let message = software
            .signal_deployment(Some(&stack.project_id), deployment_id, details)
            .await?;
        if let Some(name) = input("deploy_resource_name")
            && let Ok(resource) = find_resource(
                &stack.name,
                self.store().list_resources(stack.id).await?,
                &name,
            )
        {
            self.resource_event(&resource, &message).await;
        }
        Ok(SignalOutcome {
            scaling: None,
            message,
        })
    }

    /// An agent's outputs for a deployment resource: decide its deployment
    /// (the resource waiting on it is woken) and leave an event.
    async fn signal_deployment(
        &self,
        resource: &Resource,
        project_id: Option<&str>,
        details: &Value,
    ) -> Result<SignalOutcome> {
        let deployment = resource
            .data
            .get("deployment_id")
            .and_then(Value::as_str)
            .and_then(|id| uuid::Uuid::parse_str(id).ok())
            .ok_or_else(|| {
                Error::Conflict(format!(
                    "deployment {:?} is {}: it takes signals once created",
                    resource.name,
                    resource.resource_status()
                ))
            })?;
        let software =
            self.shared.registry.software().ok_or_else(|| {
                Error::Unavailable("software deployments are not enabled".to_owned())
            })?;
        let message = software
            .signal_deployment(project_id, deployment, details)
            .await?;
        self.resource_event(resource, &message).await;
        Ok(SignalOutcome {
            scaling: None,
            message,
        })
    }

    /// Stores a signal of a wait condition handle and wakes what waits on
    /// it. Signals are data, not a change of the stack: no lease, and a
    /// maintenance lock does not stop them.
    async fn signal_wait_handle(
        &self,
        handle: &Resource,
        style: HandleStyle,
        details: &Value,
    ) -> Result<SignalOutcome> {
        let Some(handle_id) = handle.physical_id.as_deref() else {
            return Err(Error::Conflict(format!(
                "wait condition handle {:?} is {}: it takes signals once created",
                handle.name,
                handle.resource_status()
            )));
        };
        if handle.action == StackAction::Delete {
            return Err(Error::Conflict(format!(
                "wait condition handle {:?} is {}: it takes no more signals",
                handle.name,
                handle.resource_status()
            )));
        }
        let conditions = self
            .shared
            .registry
            .wait_conditions()
            .ok_or_else(|| Error::Unavailable("wait conditions are not enabled".to_owned()))?;
        let signal = parse_signal(details, style).map_err(Error::InvalidInput)?;
        let stored = conditions
            .signals()
            .record_wait_signal(handle.stack_id, handle_id, &signal)
            .await?;
        conditions.wake(handle_id);
        let message = wait_signal_reason(&stored);
        self.resource_event(handle, &message).await;
        Ok(SignalOutcome {
            scaling: None,
            message,
        })
    }

    /// An event of `resource` that changes nothing.
    async fn resource_event(&self, resource: &Resource, reason: &str) {
        let mut event = Event::for_resource(resource, ember_runtime::time::now());
        event.reason = reason.to_owned();
        if let Err(error) = self.store().record_events(&[event]).await {
            tracing::warn!(stack_id = %resource.stack_id, %error, "cannot record a signal event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_alarm_states_other_than_alarm_are_ignored() {
        assert_eq!(
            alarm_state(&json!({"current": "OK"})),
            Some("ok".to_owned())
        );
        assert_eq!(
            alarm_state(&json!({"state": "alarm"})),
            Some("alarm".to_owned())
        );
        assert_eq!(alarm_state(&json!({"anything": 1})), None);
        assert_eq!(alarm_state(&json!(null)), None);
    }

    #[test]
    fn cooldown_counts_from_the_last_scaling() {
        let now = ember_runtime::time::now();
        let data = json!({"last_scaled_at": (now - chrono::Duration::seconds(10)).to_rfc3339()});
        assert_eq!(cooldown_left(&data, 60, now), Some(50));
        assert_eq!(cooldown_left(&data, 5, now), None);
        assert_eq!(cooldown_left(&json!({}), 60, now), None, "never scaled");
    }
}
