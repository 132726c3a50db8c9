//! `OS::Heat::ResourceGroup`: `count` copies of `resource_def`, the members
//! of one nested stack, named "0", "1", … — `%index%` (or `index_var`) in
//! the definition's properties becomes the member's index. Members named
//! (or whose physical id is named) by `removal_policies` leave, and their
//! names are never reused. On update, unchanged members are left alone and
//! failed ones are replaced under their names: only the failed members,
//! never all of them. Scaling down removes the highest indices first, as
//! in Heat: indices are often part of names and addresses.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::group_members::{
    MemberValues, host, member_definition, member_template, nested_id, whole,
};
use super::nested::NestedStackWork;
use super::{
    AttributeSchema, NestedDefinition, NestedStackHostSlot, NestedStackOutcome, NestedTemplate,
    PropertySchema, PropertyType, ResourceFailure, ResourceOutcome, ResourceRequest,
    ResourceTypeSchema,
};
use crate::domain::Resource;

/// The most members a group may have.
const MOST_MEMBERS: f64 = 10_000.0;

pub struct ResourceGroup {
    schema: ResourceTypeSchema,
    host: NestedStackHostSlot,
}

/// A group's properties, checked.
#[derive(Debug, Clone)]
struct Settings {
    count: usize,
    definition: Value,
    index_var: String,
    /// Names or physical ids listed by `removal_policies`.
    removal_list: Vec<String>,
    /// `removal_policies_mode: update`: the list replaces earlier removals.
    replace_removals: bool,
}

/// Which members the group has after a create or update.
#[derive(Debug, Clone, PartialEq)]
struct Plan {
    names: Vec<String>,
    /// Names removed by removal policies, never reused.
    removed: Vec<String>,
}

impl ResourceGroup {
    pub fn new(host: NestedStackHostSlot) -> Self {
        let attribute = |name, description| AttributeSchema { name, description };
        ResourceGroup {
            schema: ResourceTypeSchema {
                type_name: "OS::Heat::ResourceGroup",
                description: "count copies of a resource definition, members of one nested stack named 0, 1, …",
                properties: vec![
                    PropertySchema::new("count", PropertyType::Integer, "How many members.")
                        .default(json!(1))
                        .range(0.0, MOST_MEMBERS)
                        .update_allowed(),
                    PropertySchema::new(
                        "resource_def",
                        PropertyType::Map,
                        "The members' definition: type, properties, metadata; index_var in properties becomes the index.",
                    )
                    .required()
                    .update_allowed(),
                    PropertySchema::new(
                        "removal_policies",
                        PropertyType::List,
                        "[{resource_list: [names or physical ids]}]: members to remove; their names are not reused.",
                    )
                    .default(json!([]))
                    .update_allowed(),
                    PropertySchema::new(
                        "removal_policies_mode",
                        PropertyType::String,
                        "append: removals add up across updates; update: the list replaces earlier ones.",
                    )
                    .default(json!("append"))
                    .allowed_values(vec![json!("append"), json!("update")])
                    .update_allowed(),
                    PropertySchema::new(
                        "index_var",
                        PropertyType::String,
                        "The text replaced by each member's index.",
                    )
                    .default(json!("%index%"))
                    .update_allowed(),
                ],
                attributes: vec![
                    attribute("refs", "The members' references, in index order."),
                    attribute("refs_map", "Member name -> reference."),
                    attribute("attributes", "get_attr [group, attributes, A]: member name -> A."),
                    attribute("removed_rsrc_list", "Names removed by removal policies."),
                    attribute("resource.{index}", "One member's attributes (resource.0.A for one)."),
                ],
                accepts_any_properties: false,
                // Any other name is the list of that attribute of every member.
                accepts_any_attributes: true,
            },
            host,
        }
    }

    async fn apply(
        &self,
        request: &ResourceRequest,
        stack_id: Option<uuid::Uuid>,
        settings: &Settings,
        plan: Plan,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let members: Vec<(String, Value)> = plan
            .names
            .iter()
            .map(|name| {
                let definition = substitute(&settings.definition, &settings.index_var, name);
                (name.clone(), definition)
            })
            .collect();
        let nested = NestedDefinition {
            template: NestedTemplate::Inline(member_template(
                &format!("members of ResourceGroup {}", request.resource_name),
                &members,
            )),
            parameters: Map::new(),
        };
        let host = host(&self.host)?;
        let outcome = match stack_id {
            None => host.create_nested_stack(request, nested).await?,
            Some(stack_id) => host.update_nested_stack(request, stack_id, nested).await?,
        };
        Ok(outcome_of(outcome, plan))
    }
}

fn settings(properties: &Map<String, Value>) -> Result<Settings, ResourceFailure> {
    let count = whole(properties.get("count")).unwrap_or(1);
    let definition = member_definition(
        "resource_def",
        properties.get("resource_def").unwrap_or(&Value::Null),
    )?;
    let index_var = properties
        .get("index_var")
        .and_then(Value::as_str)
        .unwrap_or("%index%")
        .to_owned();
    let mut removal_list = Vec::new();
    let policies = match properties.get("removal_policies") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(policies)) => policies.clone(),
        Some(_) => {
            return Err(ResourceFailure::new(
                "removal_policies must be a list".to_owned(),
            ));
        }
    };
    for (index, policy) in policies.iter().enumerate() {
        let Some(policy) = policy.as_object() else {
            return Err(ResourceFailure::new(format!(
                "removal_policies[{index}] must be a map like {{resource_list: [names]}}"
            )));
        };
        if let Some(unknown) = policy.keys().find(|key| *key != "resource_list") {
            return Err(ResourceFailure::new(format!(
                "removal_policies[{index}]: unknown key {unknown:?} (expected resource_list)"
            )));
        }
        for entry in policy
            .get("resource_list")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match entry {
                Value::String(name) => removal_list.push(name.clone()),
                Value::Number(number) => removal_list.push(number.to_string()),
                other => {
                    return Err(ResourceFailure::new(format!(
                        "removal_policies[{index}].resource_list: {other} is not a name or physical id"
                    )));
                }
            }
        }
    }
    Ok(Settings {
        count: usize::try_from(count).unwrap_or(usize::MAX),
        definition,
        index_var,
        removal_list,
        replace_removals: properties.get("removal_policies_mode") == Some(&json!("update")),
    })
}

/// The group's members: the first `count` indices whose names were not
/// removed. `existing` is None on create, when every listed name counts;
/// on update only names or physical ids of current members count.
fn plan(settings: &Settings, previously_removed: &[String], existing: Option<&[Resource]>) -> Plan {
    let mut removed: Vec<String> = if settings.replace_removals {
        Vec::new()
    } else {
        previously_removed.to_vec()
    };
    for entry in &settings.removal_list {
        let name = match existing {
            None => Some(entry.clone()),
            Some(members) => members
                .iter()
                .find(|member| {
                    &member.name == entry || member.physical_id.as_deref() == Some(entry)
                })
                .map(|member| member.name.clone()),
        };
        if let Some(name) = name
            && !removed.contains(&name)
        {
            removed.push(name);
        }
    }
    let names = (0_u64..)
        .map(|index| index.to_string())
        .filter(|name| !removed.contains(name))
        .take(settings.count)
        .collect();
    Plan { names, removed }
}

/// Replaces `index_var` with `index` in every string of the definition's
/// properties.
fn substitute(definition: &Value, index_var: &str, index: &str) -> Value {
    fn walk(value: &Value, index_var: &str, index: &str) -> Value {
        match value {
            Value::String(text) => Value::String(text.replace(index_var, index)),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| walk(item, index_var, index))
                    .collect(),
            ),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(key, item)| (key.clone(), walk(item, index_var, index)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    let mut definition = definition.clone();
    if !index_var.is_empty()
        && let Some(properties) = definition.get_mut("properties")
    {
        *properties = walk(properties, index_var, index);
    }
    definition
}

fn outcome_of(nested: NestedStackOutcome, plan: Plan) -> ResourceOutcome {
    let values = MemberValues::read(&nested.outputs, &plan.names);
    let mut attributes = values.lists_by_attribute();
    for (name, member_attributes) in values.names.iter().zip(&values.attributes) {
        if let Some(member_attributes) = member_attributes.as_object() {
            for (attribute, value) in member_attributes {
                attributes.insert(format!("resource.{name}.{attribute}"), value.clone());
            }
        }
        attributes.insert(format!("resource.{name}"), member_attributes.clone());
    }
    attributes.insert("refs".to_owned(), Value::Array(values.refs.clone()));
    attributes.insert("refs_map".to_owned(), values.refs_map());
    attributes.insert("attributes".to_owned(), values.by_attribute_and_name());
    attributes.insert("removed_rsrc_list".to_owned(), json!(plan.removed));
    ResourceOutcome {
        physical_id: nested.stack_id.to_string(),
        attributes,
        data: json!({ "removed": plan.removed }),
    }
}

#[async_trait]
impl NestedStackWork for ResourceGroup {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    fn host(&self) -> &NestedStackHostSlot {
        &self.host
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let settings = settings(&request.properties)?;
        let plan = plan(&settings, &[], None);
        self.apply(request, None, &settings, plan).await
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let settings = settings(&request.properties)?;
        let Some(stack_id) = nested_id(current) else {
            return self.create(request).await;
        };
        let existing = host(&self.host)?.nested_resources(stack_id).await?;
        let previously_removed: Vec<String> = current
            .data
            .get("removed")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|name| name.as_str().map(str::to_owned))
            .collect();
        let plan = plan(&settings, &previously_removed, Some(&existing));
        self.apply(request, Some(stack_id), &settings, plan).await
    }

    /// Every change is made by updating the members' nested stack.
    fn needs_replacement(&self, _old: &Map<String, Value>, _new: &Map<String, Value>) -> bool {
        false
    }

    fn planned_members(&self, properties: &Map<String, Value>) -> Option<(u64, Value)> {
        let count = whole(properties.get("count")).unwrap_or(1);
        let definition = member_definition(
            "resource_def",
            properties.get("resource_def").unwrap_or(&Value::Null),
        )
        .ok()?;
        Some((count, definition))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings_of(value: Value) -> Settings {
        settings(value.as_object().expect("map")).expect("valid")
    }

    fn member(name: &str, physical_id: &str) -> Resource {
        let mut resource = Resource::initial(
            uuid::Uuid::nil(),
            name,
            "OS::Heat::None",
            ember_runtime::time::now(),
        );
        resource.physical_id = Some(physical_id.to_owned());
        resource
    }

    #[test]
    fn members_are_indices_skipping_removed_names() {
        let group = settings_of(json!({
            "count": 3,
            "resource_def": {"type": "OS::Heat::None"},
            "removal_policies": [{"resource_list": ["1"]}],
        }));
        assert_eq!(
            plan(&group, &[], None),
            Plan {
                names: vec!["0".into(), "2".into(), "3".into()],
                removed: vec!["1".into()]
            }
        );
        // On update a physical id names a member; unknown entries are ignored.
        let group = settings_of(json!({
            "count": 2,
            "resource_def": {"type": "OS::Heat::None"},
            "removal_policies": [{"resource_list": ["phys-0", "nope"]}],
        }));
        let existing = [member("0", "phys-0"), member("1", "phys-1")];
        let planned = plan(&group, &["5".to_owned()], Some(&existing));
        assert_eq!(planned.names, ["1", "2"]);
        assert_eq!(planned.removed, ["5", "0"]);
    }

    #[test]
    fn the_index_replaces_index_var_in_properties_only() {
        let definition = json!({
            "type": "OS::Heat::Value",
            "properties": {"value": "node-%index%", "list": ["%index%", 1]},
            "metadata": {"m": "%index%"},
        });
        let member = substitute(&definition, "%index%", "7");
        assert_eq!(member["properties"]["value"], "node-7");
        assert_eq!(member["properties"]["list"], json!(["7", 1]));
        assert_eq!(member["metadata"]["m"], "%index%");
    }

    #[test]
    fn bad_removal_policies_are_refused() {
        for (policies, expected) in [
            (json!(["1"]), "must be a map"),
            (json!([{"names": ["1"]}]), "unknown key \"names\""),
            (json!([{"resource_list": [{}]}]), "is not a name"),
        ] {
            let properties = json!({
                "resource_def": {"type": "OS::Heat::None"},
                "removal_policies": policies,
            });
            let failure = settings(properties.as_object().expect("map")).expect_err("refused");
            assert!(failure.to_string().contains(expected), "{failure}");
        }
    }
}
