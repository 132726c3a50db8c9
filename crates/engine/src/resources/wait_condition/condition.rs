//! The wait condition resource types: hold the stack operation until
//! `count` successes, the first failure, or the timeout (what is left of
//! it after a take-over).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{CFN_WAIT_CONDITION_TYPE, HEAT_WAIT_CONDITION_TYPE, WaitConditions};
use crate::domain::Resource;
use crate::resources::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceOutcome,
    ResourceRequest, ResourceType, ResourceTypeSchema,
};

/// What is left of `timeout` at `now` for a wait that began at `began`
/// (none once it has passed: the signals are read once more, then it
/// times out).
fn remaining(
    timeout: Duration,
    began: chrono::DateTime<chrono::Utc>,
    now: chrono::DateTime<chrono::Utc>,
) -> Duration {
    let waited = (now - began).to_std().unwrap_or(Duration::ZERO);
    timeout.saturating_sub(waited)
}

/// A wait condition, Heat's or CloudFormation's (same rules, other
/// property and attribute names).
pub struct WaitCondition {
    schema: ResourceTypeSchema,
    keys: WaitConditionKeys,
    conditions: Arc<WaitConditions>,
}

struct WaitConditionKeys {
    handle: &'static str,
    timeout: &'static str,
    count: &'static str,
    data: &'static str,
}

impl WaitCondition {
    fn with_keys(
        type_name: &'static str,
        keys: WaitConditionKeys,
        conditions: Arc<WaitConditions>,
    ) -> Self {
        WaitCondition {
            schema: ResourceTypeSchema {
                type_name,
                description: "Holds the stack's operation until its handle received enough SUCCESS signals, fails it on a FAILURE signal or after the timeout.",
                properties: vec![
                    PropertySchema::new(
                        keys.handle,
                        PropertyType::String,
                        "A reference to the wait condition handle used to signal this wait condition.",
                    )
                    .required(),
                    PropertySchema::new(
                        keys.timeout,
                        PropertyType::Number,
                        "The number of seconds to wait for the correct number of signals to arrive.",
                    )
                    .required()
                    .range(1.0, 43200.0),
                    PropertySchema::new(
                        keys.count,
                        PropertyType::Integer,
                        "The number of success signals that must be received before the stack creation process continues.",
                    )
                    .default(json!(1))
                    .range(1.0, f64::from(u32::MAX))
                    .update_allowed(),
                ],
                attributes: vec![AttributeSchema {
                    name: keys.data,
                    description: "JSON string of the data of the signals the handle received, by signal id.",
                }],
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
            keys,
            conditions,
        }
    }

    pub fn heat(conditions: Arc<WaitConditions>) -> Self {
        WaitCondition::with_keys(
            HEAT_WAIT_CONDITION_TYPE,
            WaitConditionKeys {
                handle: "handle",
                timeout: "timeout",
                count: "count",
                data: "data",
            },
            conditions,
        )
    }

    pub fn aws(conditions: Arc<WaitConditions>) -> Self {
        WaitCondition::with_keys(
            CFN_WAIT_CONDITION_TYPE,
            WaitConditionKeys {
                handle: "Handle",
                timeout: "Timeout",
                count: "Count",
                data: "Data",
            },
            conditions,
        )
    }

    /// Waits for the handle's signals, for the timeout counted from
    /// `began` (now, unless the wait is taken over from an engine that
    /// went away: when it began then).
    async fn wait_for_signals(
        &self,
        request: &ResourceRequest,
        began: chrono::DateTime<chrono::Utc>,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let reference = request
            .properties
            .get(self.keys.handle)
            .and_then(Value::as_str)
            .unwrap_or_default();
        let handle = self
            .conditions
            .find_handle(request.stack_id, reference)
            .await?;
        let handle_id = handle.physical_id.clone().unwrap_or_default();
        let timeout = request
            .properties
            .get(self.keys.timeout)
            .and_then(Value::as_f64)
            .unwrap_or(1.0);
        let count = request
            .properties
            .get(self.keys.count)
            .and_then(Value::as_u64)
            .unwrap_or(1);
        let timeout = Duration::from_secs_f64(timeout.clamp(1.0, 43200.0));
        let data = self
            .conditions
            .wait(
                request.stack_id,
                &handle_id,
                count,
                remaining(timeout, began, ember_runtime::time::now()),
            )
            .await?;
        let mut attributes = Map::new();
        attributes.insert(self.keys.data.to_owned(), json!(data));
        Ok(ResourceOutcome {
            physical_id: request.physical_resource_name(),
            attributes,
            data: json!({ "handle": handle_id }),
        })
    }

    /// An update's wait: the wait condition keeps its physical id.
    async fn wait_again(
        &self,
        request: &ResourceRequest,
        current: &Resource,
        began: chrono::DateTime<chrono::Utc>,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let mut outcome = self.wait_for_signals(request, began).await?;
        if let Some(physical_id) = &current.physical_id {
            outcome.physical_id = physical_id.clone();
        }
        Ok(outcome)
    }
}

#[async_trait]
impl ResourceType for WaitCondition {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        self.wait_for_signals(request, ember_runtime::time::now())
            .await
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        self.wait_again(request, current, ember_runtime::time::now())
            .await
    }

    /// Waits again, for what is left of the timeout since the wait began
    /// (when the engine that went away recorded the step in progress).
    async fn resume_create(
        &self,
        request: &ResourceRequest,
        in_flight: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        self.wait_for_signals(request, in_flight.updated_at).await
    }

    async fn resume_update(
        &self,
        request: &ResourceRequest,
        in_flight: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        self.wait_again(request, in_flight, in_flight.updated_at)
            .await
    }

    /// Signals are stored: a wait in flight is waited again (see the
    /// module's doc); a delete clears them, once or twice.
    fn take_over(&self, _step: crate::domain::StackAction) -> Result<(), String> {
        Ok(())
    }

    /// As Heat: the handle's signals go with the wait condition.
    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        if let Some(handle_id) = current.data.get("handle").and_then(Value::as_str) {
            self.conditions
                .signals()
                .clear_wait_signals(current.stack_id, handle_id)
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_taken_over_has_what_is_left_of_its_timeout() {
        let began = ember_runtime::time::now();
        let timeout = Duration::from_secs(10);
        let at = |seconds: i64| began + chrono::Duration::seconds(seconds);
        assert_eq!(remaining(timeout, began, at(0)), timeout);
        assert_eq!(remaining(timeout, began, at(4)), Duration::from_secs(6));
        assert_eq!(remaining(timeout, began, at(30)), Duration::ZERO);
        // A clock that went back does not lengthen the wait.
        assert_eq!(remaining(timeout, began, at(-5)), timeout);
    }
}
