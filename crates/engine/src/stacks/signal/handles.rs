//! Signals a user sends to a software deployment or a wait condition
//! handle by name.

use serde_json::Value;

use super::SignalOutcome;
use crate::domain::wait_condition::{
    HandleStyle, parse_signal, signal_reason as wait_signal_reason,
};
use crate::domain::{Resource, StackAction};
use crate::error::{Error, Result};
use crate::stacks::StackOperations;

impl StackOperations {
    /// An agent's outputs for a deployment resource: decide its deployment
    /// (the resource waiting on it is woken) and leave an event.
    pub(super) async fn signal_deployment(
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
            self.engine.registry.software().ok_or_else(|| {
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
    pub(super) async fn signal_wait_handle(
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
            .engine
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
}
