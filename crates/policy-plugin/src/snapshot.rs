//! The stack tree as the rules see it, converted from the plugin protocol's
//! `StackSnapshot` at the edge: names, types, and which properties are set.
//!
//! A snapshot's `resources` list is authoritative. A stack whose snapshot
//! carries no resources but a template (a plain create before the engine
//! expanded anything) is read from the template's `resources` section.

use std::collections::BTreeSet;

use ember_proto::plugin::v1::{ResourceSnapshot, StackSnapshot};
use prost_types::value::Kind;
use prost_types::{Struct, Value};

/// One stack and its nested stacks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackView {
    pub name: String,
    pub resources: Vec<ResourceView>,
    pub nested: Vec<StackView>,
    /// What the whole tree will hold once the operation completes, by
    /// type (the engine's count from the templates, group members and
    /// nested stacks included); empty when not given.
    pub planned: std::collections::BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceView {
    pub name: String,
    pub resource_type: String,
    /// Properties with a value: present, not null, not an empty string, list
    /// or map.
    pub set_properties: BTreeSet<String>,
}

impl From<&StackSnapshot> for StackView {
    fn from(snapshot: &StackSnapshot) -> Self {
        let resources = if snapshot.resources.is_empty() {
            snapshot
                .template
                .as_ref()
                .map(resources_of_template)
                .unwrap_or_default()
        } else {
            snapshot.resources.iter().map(resource_view).collect()
        };
        StackView {
            name: snapshot.stack_name.clone(),
            resources,
            nested: snapshot.nested_stacks.iter().map(StackView::from).collect(),
            planned: snapshot
                .planned_resources
                .iter()
                .map(|(type_name, count)| (type_name.clone(), *count))
                .collect(),
        }
    }
}

fn resource_view(resource: &ResourceSnapshot) -> ResourceView {
    ResourceView {
        name: resource.name.clone(),
        resource_type: resource.r#type.clone(),
        set_properties: resource
            .properties
            .as_ref()
            .map(set_properties)
            .unwrap_or_default(),
    }
}

/// `resources: {name: {type, properties}}` of a HOT template.
fn resources_of_template(template: &Struct) -> Vec<ResourceView> {
    let Some(Kind::StructValue(resources)) = template
        .fields
        .get("resources")
        .and_then(|value| value.kind.as_ref())
    else {
        return Vec::new();
    };
    resources
        .fields
        .iter()
        .filter_map(|(name, definition)| {
            let Some(Kind::StructValue(definition)) = definition.kind.as_ref() else {
                return None;
            };
            let resource_type = match definition.fields.get("type").and_then(|v| v.kind.as_ref()) {
                Some(Kind::StringValue(text)) => text.clone(),
                _ => return None,
            };
            let set_properties = match definition
                .fields
                .get("properties")
                .and_then(|value| value.kind.as_ref())
            {
                Some(Kind::StructValue(properties)) => set_properties(properties),
                _ => BTreeSet::new(),
            };
            Some(ResourceView {
                name: name.clone(),
                resource_type,
                set_properties,
            })
        })
        .collect()
}

fn set_properties(properties: &Struct) -> BTreeSet<String> {
    properties
        .fields
        .iter()
        .filter(|(_, value)| has_value(value))
        .map(|(name, _)| name.clone())
        .collect()
}

fn has_value(value: &Value) -> bool {
    match &value.kind {
        None | Some(Kind::NullValue(_)) => false,
        Some(Kind::StringValue(text)) => !text.is_empty(),
        Some(Kind::ListValue(list)) => !list.values.is_empty(),
        Some(Kind::StructValue(map)) => !map.fields.is_empty(),
        Some(Kind::NumberValue(_) | Kind::BoolValue(_)) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(text: &str) -> Value {
        Value {
            kind: Some(Kind::StringValue(text.to_owned())),
        }
    }

    fn object(fields: Vec<(&str, Value)>) -> Value {
        Value {
            kind: Some(Kind::StructValue(Struct {
                fields: fields
                    .into_iter()
                    .map(|(name, value)| (name.to_owned(), value))
                    .collect(),
            })),
        }
    }

    #[test]
    fn only_properties_with_a_value_count_as_set() {
        let properties = Struct {
            fields: [
                ("image", string("cirros")),
                ("name", string("")),
                (
                    "key_name",
                    Value {
                        kind: Some(Kind::NullValue(0)),
                    },
                ),
                (
                    "security_groups",
                    Value {
                        kind: Some(Kind::ListValue(prost_types::ListValue { values: vec![] })),
                    },
                ),
                ("metadata", object(vec![("a", string("b"))])),
                (
                    "config_drive",
                    Value {
                        kind: Some(Kind::BoolValue(false)),
                    },
                ),
            ]
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect(),
        };
        assert_eq!(
            set_properties(&properties),
            BTreeSet::from(["config_drive".into(), "image".into(), "metadata".into()])
        );
    }

    #[test]
    fn a_snapshot_without_resources_is_read_from_its_template() {
        let Some(Kind::StructValue(template)) = object(vec![(
            "resources",
            object(vec![(
                "server",
                object(vec![
                    ("type", string("OS::Nova::Server")),
                    ("properties", object(vec![("image", string("cirros"))])),
                ]),
            )]),
        )])
        .kind
        else {
            unreachable!("an object")
        };
        let view = StackView::from(&StackSnapshot {
            stack_name: "web".into(),
            template: Some(template),
            ..StackSnapshot::default()
        });
        assert_eq!(view.resources.len(), 1);
        assert_eq!(view.resources[0].resource_type, "OS::Nova::Server");
        assert!(view.resources[0].set_properties.contains("image"));
    }
}
