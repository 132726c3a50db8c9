//! What a stack tree will hold once an operation completes, counted by
//! resource type before anything is created — the members scaling groups
//! will make and the resources of nested stacks (template resources and
//! `OS::Heat::Stack`) included. Lifecycle plugins receive it with the
//! pre-operation snapshot, so a limit such as "at most 100 servers" holds
//! however the template nests them (a `ResourceGroup` of 101 servers is
//! 101 servers, not one group).
//!
//! Properties are resolved against parameters only (nothing exists yet): a
//! group size that depends on another resource's attribute counts as the
//! group's own default (1 member, or `min_size`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::definition::ParsedStack;
use crate::domain::StackDefinition;
use crate::domain::template::{StackIdentity, parse_document, resolve};
use crate::resources::{MAX_NESTED_DEPTH, ResourceTypeRegistry};

/// Resources per type, the tree's whole future (`count` saturates).
pub type PlannedResources = BTreeMap<String, u64>;

/// The tree `parsed` (built from `definition`) will hold.
pub fn planned_resources(
    parsed: &ParsedStack,
    definition: &StackDefinition,
    registry: &ResourceTypeRegistry,
) -> PlannedResources {
    let mut planned = PlannedResources::new();
    add_stack(parsed, definition, registry, 1, 0, &mut planned);
    planned
}

fn add(planned: &mut PlannedResources, type_name: &str, count: u64) {
    let entry = planned.entry(type_name.to_owned()).or_default();
    *entry = entry.saturating_add(count);
}

fn add_stack(
    parsed: &ParsedStack,
    definition: &StackDefinition,
    registry: &ResourceTypeRegistry,
    multiplier: u64,
    depth: u32,
    planned: &mut PlannedResources,
) {
    let context = parsed.static_context(definition);
    for name in &parsed.enabled {
        let Some(resource) = parsed.template.resources.get(name) else {
            continue;
        };
        add(planned, &resource.resource_type, multiplier);
        // Property by property: one that needs another resource is left
        // out, the others still count.
        let properties: Map<String, Value> = match &resource.properties {
            Value::Object(written) => written
                .iter()
                .filter_map(|(key, value)| {
                    resolve(
                        value,
                        &context,
                        &format!("resources.{name}.properties.{key}"),
                    )
                    .ok()
                    .map(|value| (key.clone(), value))
                })
                .collect(),
            _ => Map::new(),
        };
        // A nested stack: its own resources, once per copy of it.
        add_nested(
            &resource.resource_type,
            &properties,
            definition,
            registry,
            multiplier,
            depth,
            planned,
        );
        // A group: its members, each a resource of the member type (and,
        // when that type is itself a template, that template's resources).
        let Some(built_in) = parsed.resource_types.get(name) else {
            continue;
        };
        add_members(
            built_in,
            &properties,
            definition,
            registry,
            multiplier,
            depth,
            planned,
        );
    }
}

/// The members a group of `type_name` makes, once per copy of it: each a
/// resource of the member type — and, when that type is a template, its
/// resources; when it is a group itself, its members (a group of 1,000
/// groups of 1,000 is a million resources, as Heat counts the tree).
fn add_members(
    type_name: &str,
    properties: &Map<String, Value>,
    definition: &StackDefinition,
    registry: &ResourceTypeRegistry,
    multiplier: u64,
    depth: u32,
    planned: &mut PlannedResources,
) {
    if depth >= MAX_NESTED_DEPTH || multiplier == 0 {
        return;
    }
    let Some((members, member)) = registry
        .get(type_name)
        .and_then(|resource_type| resource_type.planned_members(properties))
    else {
        return;
    };
    let Some(member_type) = member.get("type").and_then(Value::as_str) else {
        return;
    };
    let copies = multiplier.saturating_mul(members);
    add(planned, member_type, copies);
    let member_properties = match member.get("properties") {
        Some(Value::Object(properties)) => properties.clone(),
        _ => Map::new(),
    };
    add_nested(
        member_type,
        &member_properties,
        definition,
        registry,
        copies,
        depth,
        planned,
    );
    // Each member group is a nested stack of its own members.
    add_members(
        member_type,
        &member_properties,
        definition,
        registry,
        copies,
        depth + 1,
        planned,
    );
}

/// The total of a plan: every resource of the tree (saturating).
pub fn total(planned: &PlannedResources) -> u64 {
    planned
        .values()
        .fold(0_u64, |sum, count| sum.saturating_add(*count))
}

/// The resources of the nested stack a resource of `type_name` makes, if
/// it makes one: a template file among the stack's files, or
/// `OS::Heat::Stack` with its `template` property.
fn add_nested(
    type_name: &str,
    properties: &Map<String, Value>,
    definition: &StackDefinition,
    registry: &ResourceTypeRegistry,
    multiplier: u64,
    depth: u32,
    planned: &mut PlannedResources,
) {
    if depth >= MAX_NESTED_DEPTH || multiplier == 0 {
        return;
    }
    let (template, parameters) = if let Some(text) = definition.files.get(type_name) {
        (parse_document(text, "template").ok(), properties.clone())
    } else if type_name == "OS::Heat::Stack" {
        let template = match properties.get("template") {
            Some(Value::Object(map)) => Some(map.clone()),
            Some(Value::String(text)) => parse_document(text, "template").ok(),
            _ => None,
        };
        let parameters = match properties.get("parameters") {
            Some(Value::Object(map)) => map.clone(),
            _ => Map::new(),
        };
        (template, parameters)
    } else {
        return;
    };
    let Some(template) = template else {
        return;
    };
    let nested = StackDefinition {
        template: Value::Object(template),
        environment: definition.environment.clone(),
        files: definition.files.clone(),
        parameters,
    };
    let identity = StackIdentity {
        stack_name: "planned".to_owned(),
        stack_id: String::new(),
        project_id: String::new(),
    };
    if let Ok(parsed) = ParsedStack::build(&nested, identity, registry) {
        add_stack(&parsed, &nested, registry, multiplier, depth + 1, planned);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan(template: Value, files: &[(&str, &str)]) -> PlannedResources {
        let definition = StackDefinition {
            template,
            environment: json!({}),
            files: files
                .iter()
                .map(|(name, text)| ((*name).to_owned(), (*text).to_owned()))
                .collect(),
            parameters: Map::new(),
        };
        let registry = ResourceTypeRegistry::builtin();
        let parsed = ParsedStack::build(
            &definition,
            StackIdentity {
                stack_name: "web".into(),
                stack_id: "id".into(),
                project_id: "p".into(),
            },
            &registry,
        )
        .expect("parses");
        planned_resources(&parsed, &definition, &registry)
    }

    #[test]
    fn groups_count_their_members_and_nested_templates_their_resources() {
        let planned = plan(
            json!({
                "heat_template_version": "2021-04-16",
                "parameters": {"n": {"type": "number", "default": 101}},
                "resources": {
                    "servers": {"type": "OS::Heat::ResourceGroup", "properties": {
                        "count": {"get_param": "n"},
                        "resource_def": {"type": "OS::Heat::None"}}},
                    "asg": {"type": "OS::Heat::AutoScalingGroup", "properties": {
                        "min_size": 2, "max_size": 10, "desired_capacity": 3,
                        "resource": {"type": "pair.yaml"}}},
                    "inline": {"type": "OS::Heat::Stack", "properties": {
                        "template": {"heat_template_version": "2021-04-16",
                            "resources": {"v": {"type": "OS::Heat::Value", "properties": {"value": 1}}}}}},
                }
            }),
            &[(
                "pair.yaml",
                "heat_template_version: 2021-04-16\nresources:\n  a: {type: OS::Heat::None}\n  b: {type: OS::Heat::RandomString}\n",
            )],
        );
        assert_eq!(planned["OS::Heat::ResourceGroup"], 1);
        assert_eq!(planned["OS::Heat::None"], 101 + 3, "{planned:?}");
        assert_eq!(planned["pair.yaml"], 3);
        assert_eq!(planned["OS::Heat::RandomString"], 3);
        assert_eq!(planned["OS::Heat::Value"], 1);
        assert_eq!(planned["OS::Heat::Stack"], 1);
    }

    #[test]
    fn a_size_that_needs_another_resource_counts_the_default() {
        let planned = plan(
            json!({
                "heat_template_version": "2021-04-16",
                "resources": {
                    "n": {"type": "OS::Heat::Value", "properties": {"value": 7}},
                    "servers": {"type": "OS::Heat::ResourceGroup", "properties": {
                        "count": {"get_attr": ["n", "value"]},
                        "resource_def": {"type": "OS::Heat::None"}}},
                }
            }),
            &[],
        );
        assert_eq!(planned.get("OS::Heat::None"), Some(&1), "{planned:?}");
    }

    #[test]
    fn a_group_of_groups_counts_every_member_of_every_group() {
        let planned = plan(
            json!({
                "heat_template_version": "2021-04-16",
                "resources": {
                    "bomb": {"type": "OS::Heat::ResourceGroup", "properties": {
                        "count": 1000,
                        "resource_def": {"type": "OS::Heat::ResourceGroup", "properties": {
                            "count": 1000,
                            "resource_def": {"type": "OS::Heat::None"}}}}},
                }
            }),
            &[],
        );
        assert_eq!(planned["OS::Heat::ResourceGroup"], 1 + 1000);
        assert_eq!(planned["OS::Heat::None"], 1_000_000, "{planned:?}");
        assert_eq!(total(&planned), 1_001_001);
    }
}
