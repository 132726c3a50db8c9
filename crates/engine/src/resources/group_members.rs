//! What the scaling groups (`OS::Heat::ResourceGroup`,
//! `OS::Heat::AutoScalingGroup`) share: their members are the resources of
//! one nested stack, built from a generated template — one resource per
//! member, named after it, and outputs that hand every member's reference
//! and attributes back to the group — and run through the engine's
//! [`NestedStackHost`]. A failed member stays in the template under its
//! name, so the nested update replaces it and member names stay continuous.
//! Each group is a [`NestedStackWork`](super::nested::NestedStackWork):
//! what it makes of its properties is its own; how its nested stack is
//! deleted, checked, suspended, resumed and locked is
//! [`NestedStackType`](super::nested::NestedStackType)'s, through the
//! helpers here, as for every resource whose work is a nested stack.

use std::cmp::Ordering;
use std::sync::{Arc, Weak};

use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{LockChange, LockRequest, NestedStackHost, NestedStackHostSlot, ResourceFailure};
use crate::domain::{ActionStatus, Resource, StackWideAction};

/// The keys a member definition (`resource_def`, `resource`) may have.
const MEMBER_DEFINITION_KEYS: &[&str] = &["type", "properties", "metadata"];

pub(super) fn host(
    slot: &NestedStackHostSlot,
) -> Result<Arc<dyn NestedStackHost>, ResourceFailure> {
    slot.get().and_then(Weak::upgrade).ok_or_else(|| {
        ResourceFailure::new(
            "the engine is shutting down: nested stacks are unavailable".to_owned(),
        )
    })
}

/// The nested stack a group's row points at.
pub(super) fn nested_id(current: &Resource) -> Option<Uuid> {
    current
        .physical_id
        .as_deref()
        .and_then(|id| Uuid::parse_str(id).ok())
}

/// Suspend, resume or check the members.
pub(super) async fn act(
    slot: &NestedStackHostSlot,
    current: &Resource,
    action: StackWideAction,
) -> Result<(), ResourceFailure> {
    match nested_id(current) {
        Some(stack_id) => host(slot)?.act_on_nested_stack(stack_id, action).await,
        None => Ok(()),
    }
}

/// Deletes the row's nested stack: the one its physical id names, or —
/// for a row whose create was in flight when its engine went away, which
/// has no physical id yet — the one that create may have made (its id
/// derives from the row); a nested stack that was never made is deleted
/// already.
pub(super) async fn delete(
    slot: &NestedStackHostSlot,
    current: &Resource,
) -> Result<(), ResourceFailure> {
    let stack_id = nested_id(current).unwrap_or_else(|| {
        super::derived_id(current.stack_id, current.id, super::NESTED_STACK_KIND)
    });
    host(slot)?.delete_nested_stack(stack_id).await
}

/// Locks or unlocks the members' nested stack with the group's stack.
pub(super) async fn lock(
    slot: &NestedStackHostSlot,
    current: &Resource,
    request: &LockRequest,
    change: LockChange,
) -> Result<Value, ResourceFailure> {
    if let Some(stack_id) = nested_id(current) {
        host(slot)?
            .lock_nested_stack(stack_id, request, change)
            .await?;
    }
    Ok(current.data.clone())
}

/// A member's resource definition from the group's `property`: a map with
/// a `type`, and optional `properties` and `metadata` maps.
pub(super) fn member_definition(property: &str, value: &Value) -> Result<Value, ResourceFailure> {
    let invalid = |why: String| ResourceFailure::new(format!("{property}: {why}"));
    let Value::Object(map) = value else {
        return Err(invalid(
            "must be a map with a type and properties".to_owned(),
        ));
    };
    if let Some(unknown) = map
        .keys()
        .find(|key| !MEMBER_DEFINITION_KEYS.contains(&key.as_str()))
    {
        return Err(invalid(format!(
            "unknown key {unknown:?} (expected {})",
            MEMBER_DEFINITION_KEYS.join(", ")
        )));
    }
    let type_name = match map.get("type") {
        Some(Value::String(type_name)) if !type_name.trim().is_empty() => type_name.clone(),
        _ => return Err(invalid("type: a resource type is required".to_owned())),
    };
    let mut definition = Map::new();
    definition.insert("type".to_owned(), Value::String(type_name));
    for key in ["properties", "metadata"] {
        match map.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Object(entries)) => {
                definition.insert(key.to_owned(), Value::Object(entries.clone()));
            }
            Some(_) => return Err(invalid(format!("{key} must be a map"))),
        }
    }
    Ok(Value::Object(definition))
}

/// The nested template of a group: its members in order, and two outputs
/// the group reads back — `refs` (each member's reference, in order) and
/// `members` (each member's attributes by name).
pub(super) fn member_template(description: &str, members: &[(String, Value)]) -> Value {
    let mut resources = Map::new();
    let mut refs = Vec::with_capacity(members.len());
    let mut shown = Map::new();
    for (name, definition) in members {
        resources.insert(name.clone(), definition.clone());
        refs.push(json!({ "get_resource": name }));
        shown.insert(name.clone(), json!({ "get_attr": [name, "show"] }));
    }
    json!({
        "heat_template_version": "2021-04-16",
        "description": description,
        "resources": resources,
        "outputs": {
            "refs": {"value": refs},
            "members": {"value": shown},
        },
    })
}

/// The members as the nested stack's outputs report them, in `order`.
#[derive(Debug, Clone, Default)]
pub(super) struct MemberValues {
    pub names: Vec<String>,
    pub refs: Vec<Value>,
    /// Each member's attributes (a map), in the same order.
    pub attributes: Vec<Value>,
}

impl MemberValues {
    pub fn read(outputs: &Map<String, Value>, order: &[String]) -> MemberValues {
        let refs = outputs.get("refs").and_then(Value::as_array);
        let shown = outputs.get("members").and_then(Value::as_object);
        MemberValues {
            names: order.to_vec(),
            refs: (0..order.len())
                .map(|index| {
                    refs.and_then(|refs| refs.get(index))
                        .cloned()
                        .unwrap_or(Value::Null)
                })
                .collect(),
            attributes: order
                .iter()
                .map(|name| {
                    shown
                        .and_then(|shown| shown.get(name))
                        .filter(|value| value.is_object())
                        .cloned()
                        .unwrap_or_else(|| Value::Object(Map::new()))
                })
                .collect(),
        }
    }

    /// `{name: reference}`.
    pub fn refs_map(&self) -> Value {
        Value::Object(
            self.names
                .iter()
                .cloned()
                .zip(self.refs.iter().cloned())
                .collect(),
        )
    }

    /// Every attribute name any member has.
    fn attribute_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .attributes
            .iter()
            .filter_map(Value::as_object)
            .flat_map(|attributes| attributes.keys().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// `{attribute: {member name: value}}`, for `get_attr: [group,
    /// outputs|attributes, attribute]`.
    pub fn by_attribute_and_name(&self) -> Value {
        let mut by_attribute = Map::new();
        for attribute in self.attribute_names() {
            let values: Map<String, Value> = self
                .names
                .iter()
                .zip(&self.attributes)
                .map(|(name, attributes)| {
                    (
                        name.clone(),
                        attributes.get(&attribute).cloned().unwrap_or(Value::Null),
                    )
                })
                .collect();
            by_attribute.insert(attribute, Value::Object(values));
        }
        Value::Object(by_attribute)
    }

    /// `{attribute: [value of each member, in order]}`.
    pub fn lists_by_attribute(&self) -> Map<String, Value> {
        self.attribute_names()
            .into_iter()
            .map(|attribute| {
                let values = self
                    .attributes
                    .iter()
                    .map(|attributes| attributes.get(&attribute).cloned().unwrap_or(Value::Null))
                    .collect();
                (attribute, Value::Array(values))
            })
            .collect()
    }
}

/// Whether a member is failed in any way (CHECK_FAILED included).
pub(super) fn is_failed(member: &Resource) -> bool {
    member.status == ActionStatus::Failed
}

/// A member name's index, for ordering names "0", "1", … "10" numerically.
pub(super) fn index_of(name: &str) -> Option<u64> {
    name.parse().ok()
}

pub(super) fn by_index(left: &str, right: &str) -> Ordering {
    match (index_of(left), index_of(right)) {
        (Some(left), Some(right)) => left.cmp(&right),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => left.cmp(right),
    }
}

/// The order in which members leave on scale-down: failed members first,
/// then the oldest (as Heat's grouputils sorts them).
pub(super) fn removal_order(members: &mut [Resource]) {
    members.sort_by(|left, right| {
        (!is_failed(left))
            .cmp(&!is_failed(right))
            .then(left.created_at.cmp(&right.created_at))
            .then_with(|| by_index(&left.name, &right.name))
    });
}

/// Reads a whole number from the group's data or properties.
pub(super) fn whole(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::Number(number) => number.as_u64().or_else(|| {
            number
                .as_f64()
                .filter(|float| *float >= 0.0)
                .map(|float| float as u64)
        }),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str, status: ActionStatus, age_seconds: i64) -> Resource {
        let mut resource = Resource::initial(
            Uuid::nil(),
            name,
            "OS::Heat::None",
            ember_runtime::time::now() - chrono::Duration::seconds(age_seconds),
        );
        resource.status = status;
        resource
    }

    #[test]
    fn failed_members_leave_first_then_the_oldest() {
        let mut members = vec![
            member("0", ActionStatus::Complete, 30),
            member("1", ActionStatus::Failed, 20),
            member("2", ActionStatus::Complete, 40),
            member("3", ActionStatus::Failed, 10),
        ];
        removal_order(&mut members);
        let names: Vec<&str> = members.iter().map(|member| member.name.as_str()).collect();
        assert_eq!(names, ["1", "3", "2", "0"]);
    }

    #[test]
    fn member_definitions_need_a_type_and_take_only_known_keys() {
        let definition = member_definition(
            "resource_def",
            &json!({"type": "OS::Heat::None", "properties": {"a": 1}}),
        )
        .expect("valid");
        assert_eq!(definition["type"], "OS::Heat::None");
        for (value, expected) in [
            (json!("OS::Heat::None"), "must be a map"),
            (
                json!({"properties": {}}),
                "type: a resource type is required",
            ),
            (
                json!({"type": "T", "depends_on": "x"}),
                "unknown key \"depends_on\"",
            ),
            (
                json!({"type": "T", "properties": []}),
                "properties must be a map",
            ),
        ] {
            let failure = member_definition("resource_def", &value).expect_err("refused");
            assert!(failure.to_string().contains(expected), "{value}: {failure}");
        }
    }

    #[test]
    fn outputs_become_refs_and_attributes_in_member_order() {
        let outputs = json!({
            "refs": ["id-10", "id-2"],
            "members": {"2": {"output": "b"}, "10": {"output": "a", "extra": 1}},
        });
        let order = vec!["10".to_owned(), "2".to_owned()];
        let values = MemberValues::read(outputs.as_object().expect("map"), &order);
        assert_eq!(values.refs_map(), json!({"10": "id-10", "2": "id-2"}));
        assert_eq!(
            values.by_attribute_and_name()["output"],
            json!({"10": "a", "2": "b"})
        );
        assert_eq!(values.lists_by_attribute()["extra"], json!([1, null]));
        let template = member_template("group", &[("0".to_owned(), json!({"type": "T"}))]);
        assert_eq!(
            template["outputs"]["refs"]["value"],
            json!([{"get_resource": "0"}])
        );
        assert_eq!(
            template["outputs"]["members"]["value"]["0"],
            json!({"get_attr": ["0", "show"]})
        );
    }
}
