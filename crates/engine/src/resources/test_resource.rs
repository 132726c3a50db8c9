//! `OS::Heat::TestResource`, as in Heat's own functional tests: it returns
//! its `value` as the `output` attribute, can be told to fail, to need
//! replacement on update, and to take time per action.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceOutcome,
    ResourceRequest, ResourceType, ResourceTypeSchema,
};
use crate::domain::Resource;

pub struct TestResource {
    schema: ResourceTypeSchema,
}

impl TestResource {
    pub fn new() -> Self {
        TestResource {
            schema: ResourceTypeSchema {
                type_name: "OS::Heat::TestResource",
                description: "A resource for testing: its value becomes the output attribute.",
                properties: vec![
                    PropertySchema::new(
                        "value",
                        PropertyType::String,
                        "The input string to be stored.",
                    )
                    .default(json!("test_string"))
                    .update_allowed(),
                    PropertySchema::new(
                        "fail",
                        PropertyType::Boolean,
                        "Fail the create or update.",
                    )
                    .default(json!(false))
                    .update_allowed(),
                    PropertySchema::new(
                        "update_replace",
                        PropertyType::Boolean,
                        "Replace instead of updating in place.",
                    )
                    .default(json!(false))
                    .update_allowed(),
                    PropertySchema::new(
                        "action_wait_secs",
                        PropertyType::Map,
                        "Seconds to wait per action: {create, update, delete}.",
                    )
                    .update_allowed(),
                    PropertySchema::new(
                        "fail_lock",
                        PropertyType::Boolean,
                        "Fail a maintenance lock of the stack.",
                    )
                    .default(json!(false))
                    .update_allowed(),
                    PropertySchema::new(
                        "fail_unlock",
                        PropertyType::Boolean,
                        "Fail a maintenance unlock of the stack.",
                    )
                    .default(json!(false))
                    .update_allowed(),
                    PropertySchema::new(
                        "wait_secs",
                        PropertyType::Number,
                        "Seconds to wait on create and update.",
                    )
                    .default(json!(0))
                    .update_allowed(),
                ],
                attributes: vec![AttributeSchema {
                    name: "output",
                    description: "The string that was stored.",
                }],
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
        }
    }
}

/// Seconds to wait for `action`, from `action_wait_secs` or `wait_secs`.
fn wait_for(properties: &Map<String, Value>, action: &str) -> Result<Duration, ResourceFailure> {
    let seconds = properties
        .get("action_wait_secs")
        .and_then(|waits| waits.get(action))
        .or_else(|| {
            (action != "delete")
                .then(|| properties.get("wait_secs"))
                .flatten()
        })
        .map(|value| match value {
            Value::Number(number) => number.as_f64().ok_or(()),
            Value::String(text) => text.parse::<f64>().map_err(|_| ()),
            _ => Err(()),
        })
        .transpose()
        .map_err(|()| {
            ResourceFailure::new(format!(
                "action_wait_secs.{action} must be a number of seconds"
            ))
        })?
        .unwrap_or(0.0);
    if !(0.0..=3600.0).contains(&seconds) {
        return Err(ResourceFailure::new(format!(
            "wait of {seconds} s for {action} must be 0-3600"
        )));
    }
    Ok(Duration::from_secs_f64(seconds))
}

async fn pause(properties: &Map<String, Value>, action: &str) -> Result<(), ResourceFailure> {
    let duration = wait_for(properties, action)?;
    if !duration.is_zero() {
        tokio::time::sleep(duration).await;
    }
    Ok(())
}

fn outcome(
    request: &ResourceRequest,
    physical_id: String,
) -> Result<ResourceOutcome, ResourceFailure> {
    if request.properties.get("fail") == Some(&Value::Bool(true)) {
        return Err(ResourceFailure::new("Test Resource failed".to_owned()));
    }
    let value = request
        .properties
        .get("value")
        .cloned()
        .unwrap_or(Value::Null);
    let mut attributes = Map::new();
    attributes.insert("output".to_owned(), value);
    Ok(ResourceOutcome {
        physical_id,
        attributes,
        data: Value::Null,
    })
}

#[async_trait]
impl ResourceType for TestResource {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    fn acts_outside_its_row(&self) -> bool {
        false
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        pause(&request.properties, "create").await?;
        outcome(request, uuid::Uuid::new_v4().to_string())
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        pause(&request.properties, "update").await?;
        let physical_id = current
            .physical_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        outcome(request, physical_id)
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let properties = current.properties.as_object().cloned().unwrap_or_default();
        pause(&properties, "delete").await
    }

    fn has_lock_handler(&self) -> bool {
        true
    }

    async fn lock(
        &self,
        current: &Resource,
        _request: &super::LockRequest,
    ) -> Result<Value, ResourceFailure> {
        if current.properties.get("fail_lock") == Some(&Value::Bool(true)) {
            return Err(ResourceFailure::new(
                "Test Resource failed to lock".to_owned(),
            ));
        }
        Ok(current.data.clone())
    }

    async fn unlock(
        &self,
        current: &Resource,
        _request: &super::LockRequest,
    ) -> Result<Value, ResourceFailure> {
        if current.properties.get("fail_unlock") == Some(&Value::Bool(true)) {
            return Err(ResourceFailure::new(
                "Test Resource failed to unlock".to_owned(),
            ));
        }
        Ok(current.data.clone())
    }

    fn needs_replacement(&self, old: &Map<String, Value>, new: &Map<String, Value>) -> bool {
        new.get("update_replace") == Some(&Value::Bool(true)) && old != new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(properties: Value) -> ResourceRequest {
        ResourceRequest {
            stack_id: uuid::Uuid::nil(),
            stack_name: "s".into(),
            project_id: "p".into(),
            user_id: "u".into(),
            nested_depth: 0,
            type_name: "OS::Heat::TestResource".into(),
            resource_name: "r".into(),
            resource_id: uuid::Uuid::nil(),
            properties: properties.as_object().cloned().unwrap_or_default(),
        }
    }

    #[tokio::test]
    async fn the_value_becomes_the_output_attribute() {
        let outcome = TestResource::new()
            .create(&request(json!({"value": "hello", "fail": false})))
            .await
            .expect("created");
        assert_eq!(outcome.attributes["output"], json!("hello"));
    }

    #[tokio::test]
    async fn fail_makes_the_action_fail() {
        let failure = TestResource::new()
            .create(&request(json!({"value": "x", "fail": true})))
            .await
            .expect_err("fails");
        assert_eq!(failure.to_string(), "Test Resource failed");
    }

    #[test]
    fn waits_are_read_per_action_and_validated() {
        let properties =
            json!({"action_wait_secs": {"create": 2, "delete": "0.5"}, "wait_secs": 7});
        let properties = properties.as_object().expect("map");
        assert_eq!(wait_for(properties, "create"), Ok(Duration::from_secs(2)));
        assert_eq!(
            wait_for(properties, "delete"),
            Ok(Duration::from_millis(500))
        );
        assert_eq!(wait_for(properties, "update"), Ok(Duration::from_secs(7)));
        let bad = json!({"action_wait_secs": {"create": "soon"}});
        assert!(wait_for(bad.as_object().expect("map"), "create").is_err());
    }

    #[test]
    fn update_replace_forces_replacement_only_when_something_changed() {
        let resource = TestResource::new();
        let old = json!({"value": "a", "update_replace": true});
        let new = json!({"value": "b", "update_replace": true});
        let old = old.as_object().expect("map");
        assert!(resource.needs_replacement(old, new.as_object().expect("map")));
        assert!(!resource.needs_replacement(old, old));
    }
}
