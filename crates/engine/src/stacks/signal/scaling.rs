//! A scaling policy's signal: decided under the policy's stack lease
//! (alarm state, cooldown, the new capacity clamped to the group's
//! sizes), then the group's nested stack resized under its own lease.

use std::sync::Arc;

use ember_runtime::Identity;
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

use super::{Scaling, SignalOutcome};
use crate::domain::{ActionStatus, Event, Resource, Stack, StackAction};
use crate::error::{Error, Result};
use crate::resources::{
    GroupSizes, PolicySettings, ResourceRequest, new_capacity, recorded_capacity,
    resize_autoscaling_group,
};
use crate::stacks::lease::StackLease;
use crate::stacks::mark_unhealthy::current_rows;
use crate::stacks::{LeaseHolder, StackCaller, StackOperation, StackOperations};
use crate::store::FencedTransition;

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
pub(super) fn alarm_state(details: &Value) -> Option<String> {
    let details = details.as_object()?;
    details
        .get("current")
        .or_else(|| details.get("state"))
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase)
}

pub(super) fn properties(resource: &Resource) -> Map<String, Value> {
    resource.properties.as_object().cloned().unwrap_or_default()
}

pub(super) fn invalid_settings(resource: &Resource, why: impl std::fmt::Display) -> Error {
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
    pub(super) async fn scale_with_lease(
        self: Arc<Self>,
        identity: &Identity,
        stack: Stack,
        policy: Resource,
        group_name: String,
        answer: oneshot::Sender<Result<SignalOutcome>>,
    ) {
        let stack_lease = match self
            .engine
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
    pub(super) async fn signal_refused(&self, policy: &Resource, error: &Error) {
        if matches!(error, Error::Conflict(_)) {
            // An event of the resource that received the signal, as the
            // other ignored signals are: the stack's own events record only
            // its state transitions.
            self.resource_event(policy, &format!("signal ignored: {error}"))
                .await;
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
