//! `OS::Heat::Delay`: pauses the stack's operation where it stands in the
//! dependency graph — after what it depends on and before what depends on
//! it during CREATE and SUSPEND, the other way round during DELETE and
//! RESUME — for `min_wait` seconds plus a random jitter of up to
//! `max_jitter × jitter_multiplier` (to spread a scaling group's members).

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{
    PropertySchema, PropertyType, ResourceFailure, ResourceOutcome, ResourceRequest, ResourceType,
    ResourceTypeSchema,
};
use crate::domain::Resource;

pub struct Delay {
    schema: ResourceTypeSchema,
}

impl Delay {
    pub fn new() -> Self {
        Delay {
            schema: ResourceTypeSchema {
                type_name: "OS::Heat::Delay",
                description: "A resource that pauses for a configurable delay during the actions it names.",
                properties: vec![
                    PropertySchema::new(
                        "min_wait",
                        PropertyType::Number,
                        "Minimum time in seconds to wait during the specified actions.",
                    )
                    .default(json!(0))
                    .range(0.0, f64::MAX)
                    .update_allowed(),
                    PropertySchema::new(
                        "max_jitter",
                        PropertyType::Number,
                        "Maximum jitter to add to the minimum wait time.",
                    )
                    .default(json!(0))
                    .range(0.0, f64::MAX)
                    .update_allowed(),
                    PropertySchema::new(
                        "jitter_multiplier",
                        PropertyType::Number,
                        "Number of seconds to multiply the maximum jitter value by.",
                    )
                    .default(json!(1.0))
                    .range(0.0, f64::MAX)
                    .update_allowed(),
                    PropertySchema::new(
                        "actions",
                        PropertyType::List,
                        "Actions during which the delay will occur.",
                    )
                    .default(json!(["CREATE"]))
                    .allowed_values(vec![
                        json!("CREATE"),
                        json!("DELETE"),
                        json!("SUSPEND"),
                        json!("RESUME"),
                    ])
                    .update_allowed(),
                ],
                attributes: Vec::new(),
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
        }
    }
}

/// How long `action` waits with these properties (0 when it is not one of
/// the delayed actions).
fn wait_for(properties: &Map<String, Value>, action: &str) -> Duration {
    let delayed = properties
        .get("actions")
        .and_then(Value::as_array)
        .is_some_and(|actions| actions.iter().any(|listed| listed == action));
    if !delayed {
        return Duration::ZERO;
    }
    let number = |key: &str, default: f64| {
        properties
            .get(key)
            .and_then(Value::as_f64)
            .unwrap_or(default)
            .max(0.0)
    };
    let jitter = number("max_jitter", 0.0) * number("jitter_multiplier", 1.0);
    let seconds = number("min_wait", 0.0) + jitter * rand::random::<f64>();
    Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)
}

fn properties_of(resource: &Resource) -> Map<String, Value> {
    resource.properties.as_object().cloned().unwrap_or_default()
}

#[async_trait]
impl ResourceType for Delay {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    fn acts_outside_its_row(&self) -> bool {
        false
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        tokio::time::sleep(wait_for(&request.properties, "CREATE")).await;
        Ok(ResourceOutcome {
            physical_id: request.physical_resource_name(),
            attributes: Map::new(),
            data: Value::Null,
        })
    }

    /// Heat's Delay does not wait on update: the new timings apply to the
    /// next delayed action.
    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let _ = request;
        Ok(ResourceOutcome {
            physical_id: current.physical_id.clone().unwrap_or_default(),
            attributes: Map::new(),
            data: Value::Null,
        })
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        tokio::time::sleep(wait_for(&properties_of(current), "DELETE")).await;
        Ok(())
    }

    async fn suspend(&self, current: &Resource) -> Result<(), ResourceFailure> {
        tokio::time::sleep(wait_for(&properties_of(current), "SUSPEND")).await;
        Ok(())
    }

    async fn resume(&self, current: &Resource) -> Result<(), ResourceFailure> {
        tokio::time::sleep(wait_for(&properties_of(current), "RESUME")).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_actions_wait_and_jitter_stays_in_its_range() {
        let properties = json!({"min_wait": 2, "max_jitter": 3, "jitter_multiplier": 0.5,
            "actions": ["CREATE", "DELETE"]});
        let properties = properties.as_object().cloned().expect("object");
        for _ in 0..50 {
            let wait = wait_for(&properties, "CREATE").as_secs_f64();
            assert!((2.0..=3.5).contains(&wait), "{wait}");
        }
        assert_eq!(wait_for(&properties, "SUSPEND"), Duration::ZERO);
        assert_eq!(wait_for(&Map::new(), "CREATE"), Duration::ZERO);
    }
}
