//! Resource signals (Heat's `POST …/resources/{name}/signal`). A signal to
//! an `OS::Heat::ScalingPolicy` resizes the AutoScalingGroup the policy
//! names. The gate (`ensure_allowed`, Operation::Signal) is asked for the
//! policy's stack, every stack above it and the group's nested stack; then
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
use super::{Operation, StackOperations, ensure_allowed, stack_event};
use crate::domain::{ActionStatus, Event, Resource, Stack, StackAction};
use crate::error::{Error, Result};
use crate::resources::{
    AUTOSCALING_GROUP_TYPE, GroupSizes, PolicySettings, ResourceRequest, SCALING_POLICY_TYPE,
    new_capacity, recorded_capacity, resize_autoscaling_group,
};

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
        let stack = self.find_stack(identity, stack).await?;
        let policy = find_resource(
            &stack.name,
            self.store().list_resources(stack.id).await?,
            resource,
        )?;
        if policy.type_name != SCALING_POLICY_TYPE {
            return Err(Error::InvalidInput(format!(
                "resource {:?} ({}) does not accept signals: only {SCALING_POLICY_TYPE} resources do",
                policy.name, policy.type_name
            )));
        }
        if let Err(error) = self
            .ensure_allowed_with_ancestors(&stack, Operation::Signal)
            .await
        {
            self.signal_refused(&stack, &error).await;
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
        let settings = PolicySettings::of(&properties(&policy))
            .map_err(|failure| invalid_settings(&policy, failure))?;
        let group = current_rows(self.store().list_resources(stack.id).await?)
            .into_values()
            .find(|row| {
                row.type_name == AUTOSCALING_GROUP_TYPE
                    && (row.physical_id.as_deref() == Some(settings.group.as_str())
                        || row.name == settings.group)
            })
            .ok_or_else(|| {
                invalid_settings(
                    &policy,
                    format!(
                        "auto_scaling_group_id {:?} names no {AUTOSCALING_GROUP_TYPE} of stack {:?}",
                        settings.group, stack.name
                    ),
                )
            })?;
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
        if let Err(error) = ensure_allowed(&nested, Operation::Signal) {
            self.signal_refused(&stack, &error).await;
            return Err(error);
        }
        // The rest runs in its own task, so the lease is always released
        // even if the caller goes away.
        let (answer, answered) = oneshot::channel();
        let operations = self.clone();
        let (policy_name, group_name) = (policy.name.clone(), group.name.clone());
        tokio::spawn(async move {
            operations
                .scale_with_lease(stack, policy_name, group_name, answer)
                .await;
        });
        answered.await.map_err(|_| {
            Error::DatabaseUnavailable("the signal stopped before it was decided".to_owned())
        })?
    }

    async fn scale_with_lease(
        self: Arc<Self>,
        stack: Stack,
        policy_name: String,
        group_name: String,
        answer: oneshot::Sender<Result<SignalOutcome>>,
    ) {
        let stack_lease = match StackLease::take(
            self.store().clone(),
            stack.id,
            &stack.name,
            self.shared.engine_id,
            "SIGNAL",
        )
        .await
        {
            Ok(stack_lease) => stack_lease,
            Err(error) => {
                self.signal_refused(&stack, &error).await;
                let _ = answer.send(Err(error));
                return;
            }
        };
        let started = match self.decide(&stack, &policy_name, &group_name).await {
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
                .start_scaling(*policy, *group, &scaling)
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
                let _ = answer.send(Ok(outcome));
                stack_lease.release().await;
            }
            Err(error) => {
                let _ = answer.send(Err(error));
                stack_lease.release().await;
            }
        }
    }

    /// Reads the policy and the group again under the lease and decides.
    async fn decide(&self, stack: &Stack, policy_name: &str, group_name: &str) -> Result<Decision> {
        let stack = self
            .store()
            .get_stack(stack.id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("stack {:?} not found", stack.name)))?;
        ensure_allowed(&stack, Operation::Signal)?;
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
            (policy.clone(), Event::for_resource(&policy, now)),
            (group.clone(), Event::for_resource(&group, now)),
        ];
        self.store()
            .record_resource_transitions(&transitions)
            .await?;
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
        let engine_id = stack_lease.hand_over();
        if let Err(error) = self
            .store()
            .finish_scaling(&finished, &event, stack.id, engine_id)
            .await
        {
            // The lease then expires on its own.
            tracing::error!(stack_id = %stack.id, %error, "cannot record the end of a scaling");
        }
    }

    /// "signal ignored: …" on the stack, for a refused scaling signal.
    async fn signal_refused(&self, stack: &Stack, error: &Error) {
        if matches!(error, Error::Conflict(_)) {
            let event = stack_event(stack, &format!("signal ignored: {error}"));
            if let Err(error) = self.store().record_events(&[event]).await {
                tracing::warn!(stack_id = %stack.id, %error, "cannot record a refused signal");
            }
        }
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
