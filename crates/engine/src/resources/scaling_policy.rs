//! `OS::Heat::ScalingPolicy`: how a signal resizes an AutoScalingGroup
//! (`auto_scaling_group_id`, usually `get_resource` of the group). The
//! resource itself only holds its settings and its signal URL; the stack
//! operations apply a signal (see `stacks::signal`), using
//! [`new_capacity`] — Heat's arithmetic, clamped to the group's bounds.
//!
//! Its steps write nothing but its own row (the signal path writes the
//! time of its last scaling there, outside any step), so every step
//! another engine had in flight when it went away is redone: a create
//! redone names a physical id no one saw (it is recorded only when the
//! step completes), and an update keeps the recorded last scaling.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceOutcome,
    ResourceRequest, ResourceType, ResourceTypeSchema,
};
use crate::domain::Resource;

pub const SCALING_POLICY_TYPE: &str = "OS::Heat::ScalingPolicy";

/// How `scaling_adjustment` is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdjustmentType {
    ChangeInCapacity,
    ExactCapacity,
    PercentChangeInCapacity,
}

impl AdjustmentType {
    pub fn parse(text: &str) -> Option<AdjustmentType> {
        match text {
            "change_in_capacity" => Some(AdjustmentType::ChangeInCapacity),
            "exact_capacity" => Some(AdjustmentType::ExactCapacity),
            "percent_change_in_capacity" => Some(AdjustmentType::PercentChangeInCapacity),
            _ => None,
        }
    }
}

/// A policy's settings, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicySettings {
    pub group: String,
    pub adjustment_type: AdjustmentType,
    pub scaling_adjustment: f64,
    pub cooldown: Option<u64>,
    pub min_adjustment_step: Option<u64>,
}

impl PolicySettings {
    pub fn of(properties: &Map<String, Value>) -> Result<PolicySettings, ResourceFailure> {
        let group = properties
            .get("auto_scaling_group_id")
            .and_then(Value::as_str)
            .filter(|group| !group.is_empty())
            .ok_or_else(|| {
                ResourceFailure::new(
                    "auto_scaling_group_id: the group (get_resource of an OS::Heat::AutoScalingGroup) is required"
                        .to_owned(),
                )
            })?
            .to_owned();
        let adjustment_type = properties
            .get("adjustment_type")
            .and_then(Value::as_str)
            .and_then(AdjustmentType::parse)
            .ok_or_else(|| {
                ResourceFailure::new(
                    "adjustment_type must be change_in_capacity, exact_capacity or percent_change_in_capacity"
                        .to_owned(),
                )
            })?;
        let scaling_adjustment = properties
            .get("scaling_adjustment")
            .and_then(Value::as_f64)
            .ok_or_else(|| {
                ResourceFailure::new("scaling_adjustment must be a number".to_owned())
            })?;
        let whole = |key: &str| {
            properties
                .get(key)
                .and_then(Value::as_f64)
                .map(|n| n.max(0.0) as u64)
        };
        Ok(PolicySettings {
            group,
            adjustment_type,
            scaling_adjustment,
            cooldown: whole("cooldown"),
            min_adjustment_step: whole("min_adjustment_step"),
        })
    }
}

/// The capacity a signal asks for, within `minimum..=maximum` (Heat's
/// scalingutil: a percentage rounds away from zero below one member and
/// towards zero above, then grows to `min_adjustment_step`).
pub fn new_capacity(current: u64, policy: &PolicySettings, minimum: u64, maximum: u64) -> u64 {
    let current_members = current as f64;
    let wanted = match policy.adjustment_type {
        AdjustmentType::ChangeInCapacity => current_members + policy.scaling_adjustment.trunc(),
        AdjustmentType::ExactCapacity => policy.scaling_adjustment.trunc(),
        AdjustmentType::PercentChangeInCapacity => {
            let delta = current_members * policy.scaling_adjustment / 100.0;
            let mut rounded = if delta.abs() < 1.0 {
                if delta > 0.0 {
                    delta.ceil()
                } else {
                    delta.floor()
                }
            } else if delta > 0.0 {
                delta.floor()
            } else {
                delta.ceil()
            };
            if let Some(step) = policy.min_adjustment_step
                && (step as f64) > rounded.abs()
            {
                rounded = if rounded > 0.0 {
                    step as f64
                } else {
                    -(step as f64)
                };
            }
            current_members + rounded
        }
    };
    if wanted >= maximum as f64 {
        maximum
    } else if wanted <= minimum as f64 {
        minimum
    } else {
        wanted as u64
    }
}

pub struct ScalingPolicy {
    schema: ResourceTypeSchema,
}

impl ScalingPolicy {
    pub fn new() -> Self {
        ScalingPolicy {
            schema: ResourceTypeSchema {
                type_name: SCALING_POLICY_TYPE,
                description: "Resizes an AutoScalingGroup when signalled (POST …/resources/{policy}/signal).",
                properties: vec![
                    PropertySchema::new(
                        "auto_scaling_group_id",
                        PropertyType::String,
                        "The group to resize: get_resource of an OS::Heat::AutoScalingGroup.",
                    )
                    .required()
                    .update_allowed(),
                    PropertySchema::new(
                        "adjustment_type",
                        PropertyType::String,
                        "How scaling_adjustment is read.",
                    )
                    .required()
                    .allowed_values(vec![
                        json!("change_in_capacity"),
                        json!("exact_capacity"),
                        json!("percent_change_in_capacity"),
                    ])
                    .update_allowed(),
                    PropertySchema::new(
                        "scaling_adjustment",
                        PropertyType::Number,
                        "Members to add (negative: remove), the exact capacity, or a percentage.",
                    )
                    .required()
                    .update_allowed(),
                    PropertySchema::new(
                        "cooldown",
                        PropertyType::Number,
                        "Seconds after this policy scaled during which its signals are ignored.",
                    )
                    .range(0.0, 86_400.0)
                    .update_allowed(),
                    PropertySchema::new(
                        "min_adjustment_step",
                        PropertyType::Integer,
                        "The least a percent_change_in_capacity changes the capacity by.",
                    )
                    .range(0.0, 10_000.0)
                    .update_allowed(),
                ],
                attributes: vec![
                    AttributeSchema {
                        name: "alarm_url",
                        description: "Where to POST to signal this policy (path on the gateway).",
                    },
                    AttributeSchema {
                        name: "signal_url",
                        description: "Where to POST to signal this policy (path on the gateway).",
                    },
                ],
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
        }
    }
}

/// The signal endpoint of a policy on the gateway, relative to its origin
/// (the engine does not know the public address).
fn signal_url(request: &ResourceRequest) -> String {
    format!(
        "/orchestration/v1/{}/stacks/{}/{}/resources/{}/signal",
        request.project_id, request.stack_name, request.stack_id, request.resource_name
    )
}

fn outcome(
    request: &ResourceRequest,
    physical_id: String,
    data: Value,
) -> Result<ResourceOutcome, ResourceFailure> {
    PolicySettings::of(&request.properties)?;
    let url = signal_url(request);
    let mut attributes = Map::new();
    attributes.insert("alarm_url".to_owned(), Value::String(url.clone()));
    attributes.insert("signal_url".to_owned(), Value::String(url));
    Ok(ResourceOutcome {
        physical_id,
        attributes,
        data,
    })
}

#[async_trait]
impl ResourceType for ScalingPolicy {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        outcome(request, request.physical_resource_name(), json!({}))
    }

    /// Keeps the time of its last scaling, so an update does not reset the
    /// cooldown.
    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let physical_id = request.kept_physical_id(current);
        outcome(request, physical_id, current.data.clone())
    }

    /// Its steps write nothing but its row (see the module's doc): every
    /// step is redone after a take-over, and its transitions are
    /// group-committed.
    fn acts_outside_its_row(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(
        adjustment_type: AdjustmentType,
        adjustment: f64,
        step: Option<u64>,
    ) -> PolicySettings {
        PolicySettings {
            group: "g".into(),
            adjustment_type,
            scaling_adjustment: adjustment,
            cooldown: None,
            min_adjustment_step: step,
        }
    }

    #[test]
    fn capacities_follow_heats_arithmetic_and_are_clamped() {
        use AdjustmentType::*;
        assert_eq!(
            new_capacity(2, &policy(ChangeInCapacity, 3.0, None), 1, 10),
            5
        );
        assert_eq!(
            new_capacity(2, &policy(ChangeInCapacity, 30.0, None), 1, 10),
            10
        );
        assert_eq!(
            new_capacity(2, &policy(ChangeInCapacity, -5.0, None), 1, 10),
            1
        );
        assert_eq!(new_capacity(2, &policy(ExactCapacity, 7.0, None), 1, 10), 7);
        assert_eq!(new_capacity(2, &policy(ExactCapacity, 0.0, None), 1, 10), 1);
        // 10% of 4 is 0.4: at least one member.
        assert_eq!(
            new_capacity(4, &policy(PercentChangeInCapacity, 10.0, None), 0, 10),
            5
        );
        // 50% of 5 is 2.5: rounded towards zero.
        assert_eq!(
            new_capacity(5, &policy(PercentChangeInCapacity, 50.0, None), 0, 10),
            7
        );
        assert_eq!(
            new_capacity(5, &policy(PercentChangeInCapacity, -50.0, None), 0, 10),
            3
        );
        assert_eq!(
            new_capacity(5, &policy(PercentChangeInCapacity, 50.0, Some(4)), 0, 20),
            9
        );
        assert_eq!(
            new_capacity(5, &policy(PercentChangeInCapacity, -10.0, Some(2)), 0, 20),
            3
        );
    }

    #[test]
    fn settings_name_the_group_and_a_known_adjustment_type() {
        let settings = PolicySettings::of(
            json!({"auto_scaling_group_id": "g", "adjustment_type": "exact_capacity", "scaling_adjustment": 3, "cooldown": 60})
                .as_object()
                .expect("map"),
        )
        .expect("valid");
        assert_eq!(settings.cooldown, Some(60));
        assert!(
            PolicySettings::of(
                json!({"auto_scaling_group_id": "g", "adjustment_type": "double", "scaling_adjustment": 3})
                    .as_object()
                    .expect("map")
            )
            .is_err()
        );
    }
}
