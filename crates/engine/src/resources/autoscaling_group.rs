//! `OS::Heat::AutoScalingGroup`: between `min_size` and `max_size` copies of
//! `resource`, the members of one nested stack, named "0", "1", … in the
//! order they were first made. Its capacity starts at `desired_capacity`
//! (else `min_size`) and then moves with scaling policy signals; a stack
//! update keeps it unless `desired_capacity` itself changed. Scaling down
//! removes failed members (CHECK_FAILED and every other *_FAILED) first,
//! then the oldest; scaling up adds new names. On every update the failed
//! members that stay are replaced under their names, so names stay
//! continuous (spec heat-mark-unhealthy). `rolling_updates` is accepted;
//! members are updated all at once.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::group_members::{
    MemberValues, by_index, host, index_of, member_definition, member_template, nested_id,
    removal_order, whole,
};
use super::nested::NestedStackWork;
use super::{
    AttributeSchema, NestedDefinition, NestedStackHost, NestedStackHostSlot, NestedStackOutcome,
    NestedTemplate, PropertySchema, PropertyType, ResourceFailure, ResourceOutcome,
    ResourceRequest, ResourceTypeSchema,
};
use crate::domain::Resource;

pub const AUTOSCALING_GROUP_TYPE: &str = "OS::Heat::AutoScalingGroup";

const MOST_MEMBERS: f64 = 10_000.0;
const ROLLING_UPDATE_KEYS: &[&str] = &["min_in_service", "max_batch_size", "pause_time"];

pub struct AutoScalingGroup {
    schema: ResourceTypeSchema,
    host: NestedStackHostSlot,
}

/// The size settings of a group, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupSizes {
    pub min_size: u64,
    pub max_size: u64,
    pub desired_capacity: Option<u64>,
    /// Seconds between two scalings when a policy names none.
    pub cooldown: Option<u64>,
}

impl GroupSizes {
    pub fn of(properties: &Map<String, Value>) -> Result<GroupSizes, ResourceFailure> {
        let min_size = whole(properties.get("min_size")).unwrap_or(0);
        let max_size = whole(properties.get("max_size")).unwrap_or(0);
        if min_size > max_size {
            return Err(ResourceFailure::new(format!(
                "min_size {min_size} is larger than max_size {max_size}"
            )));
        }
        let desired_capacity = whole(properties.get("desired_capacity"));
        if let Some(desired) = desired_capacity
            && !(min_size..=max_size).contains(&desired)
        {
            return Err(ResourceFailure::new(format!(
                "desired_capacity {desired} must be between min_size {min_size} and max_size {max_size}"
            )));
        }
        Ok(GroupSizes {
            min_size,
            max_size,
            desired_capacity,
            cooldown: whole(properties.get("cooldown")),
        })
    }

    pub fn clamp(&self, capacity: u64) -> u64 {
        capacity.clamp(self.min_size, self.max_size)
    }
}

/// The capacity a group has now, as it recorded it.
pub fn recorded_capacity(group: &Resource) -> Option<u64> {
    whole(group.data.get("capacity")).or_else(|| whole(group.attributes.get("current_size")))
}

impl AutoScalingGroup {
    pub fn new(host: NestedStackHostSlot) -> Self {
        let attribute = |name, description| AttributeSchema { name, description };
        let size = |name, description| {
            PropertySchema::new(name, PropertyType::Integer, description)
                .range(0.0, MOST_MEMBERS)
                .update_allowed()
        };
        AutoScalingGroup {
            schema: ResourceTypeSchema {
                type_name: AUTOSCALING_GROUP_TYPE,
                description: "A group of copies of a resource that scaling policies resize; failed members leave first.",
                properties: vec![
                    size("min_size", "The fewest members.").required(),
                    size("max_size", "The most members.").required(),
                    size(
                        "desired_capacity",
                        "Members to start with (default min_size); changing it resizes the group.",
                    ),
                    PropertySchema::new(
                        "resource",
                        PropertyType::Map,
                        "The members' definition: type, properties, metadata.",
                    )
                    .required()
                    .update_allowed(),
                    PropertySchema::new(
                        "cooldown",
                        PropertyType::Integer,
                        "Seconds after a scaling during which signals of policies without their own cooldown are ignored.",
                    )
                    .range(0.0, 86_400.0)
                    .update_allowed(),
                    PropertySchema::new(
                        "rolling_updates",
                        PropertyType::Map,
                        "min_in_service, max_batch_size, pause_time (accepted; members are updated at once).",
                    )
                    .update_allowed(),
                ],
                attributes: vec![
                    attribute("current_size", "How many members the group has."),
                    attribute("refs", "The members' references, oldest name first."),
                    attribute("refs_map", "Member name -> reference."),
                    attribute("outputs", "get_attr [group, outputs, A]: member name -> A."),
                    attribute("outputs_list", "get_attr [group, outputs_list, A]: A of every member."),
                ],
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
            host,
        }
    }
}

fn check_rolling_updates(properties: &Map<String, Value>) -> Result<(), ResourceFailure> {
    match properties.get("rolling_updates") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Object(settings)) => match settings
            .keys()
            .find(|key| !ROLLING_UPDATE_KEYS.contains(&key.as_str()))
        {
            Some(unknown) => Err(ResourceFailure::new(format!(
                "rolling_updates: unknown key {unknown:?} (expected {})",
                ROLLING_UPDATE_KEYS.join(", ")
            ))),
            None => Ok(()),
        },
        Some(_) => Err(ResourceFailure::new(
            "rolling_updates must be a map".to_owned(),
        )),
    }
}

/// The capacity an update moves the group to: the new `desired_capacity`
/// when it changed, else what the group has now, within the new bounds.
fn capacity_after_update(current: &Resource, sizes: &GroupSizes) -> u64 {
    let previous_desired = whole(current.properties.get("desired_capacity"));
    let capacity = match (sizes.desired_capacity, recorded_capacity(current)) {
        (Some(desired), _) if Some(desired) != previous_desired => desired,
        (_, Some(recorded)) => recorded,
        (desired, None) => desired.unwrap_or(sizes.min_size),
    };
    sizes.clamp(capacity)
}

/// Names after resizing from `existing` members to `capacity`: failed
/// members then the oldest leave; new names continue after the highest
/// ever used. Returns the names in index order and the next free index.
fn member_names(
    mut existing: Vec<Resource>,
    capacity: usize,
    next_index: u64,
) -> (Vec<String>, u64) {
    removal_order(&mut existing);
    let leaving = existing.len().saturating_sub(capacity);
    let mut names: Vec<String> = existing
        .into_iter()
        .skip(leaving)
        .map(|member| member.name)
        .collect();
    let mut next_index = names
        .iter()
        .filter_map(|name| index_of(name))
        .map(|index| index + 1)
        .fold(next_index, u64::max);
    while names.len() < capacity {
        names.push(next_index.to_string());
        next_index += 1;
    }
    names.sort_by(|left, right| by_index(left, right));
    (names, next_index)
}

fn nested_definition(
    request: &ResourceRequest,
    names: &[String],
) -> Result<NestedDefinition, ResourceFailure> {
    let definition = member_definition(
        "resource",
        request.properties.get("resource").unwrap_or(&Value::Null),
    )?;
    let members: Vec<(String, Value)> = names
        .iter()
        .map(|name| (name.clone(), definition.clone()))
        .collect();
    Ok(NestedDefinition {
        template: NestedTemplate::Inline(member_template(
            &format!("members of AutoScalingGroup {}", request.resource_name),
            &members,
        )),
        parameters: Map::new(),
    })
}

fn outcome_of(
    nested: NestedStackOutcome,
    names: &[String],
    mut data: Map<String, Value>,
    next_index: u64,
) -> ResourceOutcome {
    let values = MemberValues::read(&nested.outputs, names);
    let mut attributes = Map::new();
    attributes.insert("current_size".to_owned(), json!(names.len()));
    attributes.insert("refs".to_owned(), Value::Array(values.refs.clone()));
    attributes.insert("refs_map".to_owned(), values.refs_map());
    attributes.insert("outputs".to_owned(), values.by_attribute_and_name());
    attributes.insert(
        "outputs_list".to_owned(),
        Value::Object(values.lists_by_attribute()),
    );
    data.insert("capacity".to_owned(), json!(names.len()));
    data.insert("next_index".to_owned(), json!(next_index));
    ResourceOutcome {
        physical_id: nested.stack_id.to_string(),
        attributes,
        data: Value::Object(data),
    }
}

/// Brings the group `current` (with the properties of `request`) to
/// `capacity` members, replacing the failed ones that stay. Scaling policy
/// signals call this with their new capacity; updates with theirs.
pub async fn resize_autoscaling_group(
    host: &dyn NestedStackHost,
    request: &ResourceRequest,
    current: &Resource,
    capacity: u64,
) -> Result<ResourceOutcome, ResourceFailure> {
    let capacity = usize::try_from(capacity).unwrap_or(usize::MAX);
    let data = current.data.as_object().cloned().unwrap_or_default();
    let next_index = whole(data.get("next_index")).unwrap_or(0);
    let Some(stack_id) = nested_id(current) else {
        let (names, next_index) = member_names(Vec::new(), capacity, next_index);
        let nested = host
            .create_nested_stack(request, nested_definition(request, &names)?)
            .await?;
        return Ok(outcome_of(nested, &names, data, next_index));
    };
    let existing = host.nested_resources(stack_id).await?;
    let (names, next_index) = member_names(existing, capacity, next_index);
    let nested = host
        .update_nested_stack(request, stack_id, nested_definition(request, &names)?)
        .await?;
    Ok(outcome_of(nested, &names, data, next_index))
}

#[async_trait]
impl NestedStackWork for AutoScalingGroup {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    fn host(&self) -> &NestedStackHostSlot {
        &self.host
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let sizes = GroupSizes::of(&request.properties)?;
        check_rolling_updates(&request.properties)?;
        let capacity = sizes.desired_capacity.unwrap_or(sizes.min_size);
        let (names, next_index) = member_names(
            Vec::new(),
            usize::try_from(capacity).unwrap_or(usize::MAX),
            0,
        );
        let nested = host(&self.host)?
            .create_nested_stack(request, nested_definition(request, &names)?)
            .await?;
        Ok(outcome_of(nested, &names, Map::new(), next_index))
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let sizes = GroupSizes::of(&request.properties)?;
        check_rolling_updates(&request.properties)?;
        let capacity = capacity_after_update(current, &sizes);
        resize_autoscaling_group(&*host(&self.host)?, request, current, capacity).await
    }

    fn needs_replacement(&self, _old: &Map<String, Value>, _new: &Map<String, Value>) -> bool {
        false
    }

    fn planned_members(&self, properties: &Map<String, Value>) -> Option<(u64, Value)> {
        let sizes = GroupSizes::of(properties).ok()?;
        let definition = member_definition(
            "resource",
            properties.get("resource").unwrap_or(&Value::Null),
        )
        .ok()?;
        Some((sizes.desired_capacity.unwrap_or(sizes.min_size), definition))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ActionStatus;

    fn member(name: &str, failed: bool, age_seconds: i64) -> Resource {
        let mut resource = Resource::initial(
            uuid::Uuid::nil(),
            name,
            "OS::Heat::None",
            ember_runtime::time::now() - chrono::Duration::seconds(age_seconds),
        );
        if failed {
            resource.status = ActionStatus::Failed;
        }
        resource
    }

    #[test]
    fn scaling_down_drops_failed_members_first_then_the_oldest() {
        let existing = vec![
            member("0", false, 50),
            member("1", false, 40),
            member("2", true, 30),
            member("3", false, 20),
        ];
        let (names, next) = member_names(existing.clone(), 2, 4);
        assert_eq!(names, ["1", "3"]);
        assert_eq!(next, 4);
        let (names, _) = member_names(existing.clone(), 4, 4);
        assert_eq!(
            names,
            ["0", "1", "2", "3"],
            "failed members stay (to be replaced)"
        );
        let (names, next) = member_names(existing, 6, 4);
        assert_eq!(names, ["0", "1", "2", "3", "4", "5"]);
        assert_eq!(next, 6);
    }

    #[test]
    fn new_names_never_reuse_removed_ones() {
        let (names, next) = member_names(vec![member("7", false, 1)], 2, 3);
        assert_eq!(names, ["7", "8"]);
        assert_eq!(next, 9);
    }

    #[test]
    fn sizes_are_checked_and_updates_keep_the_scaled_capacity() {
        let sizes = |value: Value| GroupSizes::of(value.as_object().expect("map"));
        assert!(sizes(json!({"min_size": 3, "max_size": 2})).is_err());
        assert!(sizes(json!({"min_size": 1, "max_size": 2, "desired_capacity": 5})).is_err());
        let bounds =
            sizes(json!({"min_size": 1, "max_size": 5, "desired_capacity": 2})).expect("ok");
        let mut group = member("asg", false, 0);
        group.properties = json!({"min_size": 1, "max_size": 5, "desired_capacity": 2});
        group.data = json!({"capacity": 4});
        assert_eq!(
            capacity_after_update(&group, &bounds),
            4,
            "scaled by a signal"
        );
        let changed =
            sizes(json!({"min_size": 1, "max_size": 5, "desired_capacity": 3})).expect("ok");
        assert_eq!(
            capacity_after_update(&group, &changed),
            3,
            "desired_capacity changed"
        );
        let shrunk =
            sizes(json!({"min_size": 1, "max_size": 3, "desired_capacity": 2})).expect("ok");
        assert_eq!(
            capacity_after_update(&group, &shrunk),
            3,
            "within the new bounds"
        );
    }
}
