//! `OS::Heat::ResourceChain`: one resource of each type in `resources`,
//! each given `resource_properties`, members of one nested stack named
//! "0", "1", … — and unless `concurrent`, each depending on the one before
//! it, so they are created in order (and deleted in reverse).

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::group_members::{MemberValues, host, member_template, nested_id};
use super::nested::NestedStackWork;
use super::{
    AttributeSchema, NestedDefinition, NestedStackHostSlot, NestedTemplate, PropertySchema,
    PropertyType, ResourceFailure, ResourceOutcome, ResourceRequest, ResourceTypeSchema,
};
use crate::domain::Resource;

pub struct ResourceChain {
    schema: ResourceTypeSchema,
    host: NestedStackHostSlot,
}

impl ResourceChain {
    pub fn new(host: NestedStackHostSlot) -> Self {
        let attribute = |name, description| AttributeSchema { name, description };
        ResourceChain {
            schema: ResourceTypeSchema {
                type_name: "OS::Heat::ResourceChain",
                description: "Creates one or more resources with the same configuration, one of each type listed, in order unless concurrent.",
                properties: vec![
                    PropertySchema::new(
                        "resources",
                        PropertyType::List,
                        "The list of resource types to create. This list may contain type names or aliases defined in the resource registry.",
                    )
                    .required()
                    .update_allowed(),
                    PropertySchema::new(
                        "concurrent",
                        PropertyType::Boolean,
                        "If true, the resources in the chain will be created concurrently. If false or omitted, each resource will be treated as having a dependency on the previous resource in the list.",
                    )
                    .default(json!(false)),
                    PropertySchema::new(
                        "resource_properties",
                        PropertyType::Map,
                        "Properties to pass to each resource being created in the chain.",
                    )
                    .update_allowed(),
                ],
                attributes: vec![
                    attribute("refs", "A list of resource IDs for the resources in the chain."),
                    attribute(
                        "attributes",
                        "A map of resource names to the specified attribute of each individual resource.",
                    ),
                    attribute("resource.{index}", "One member's attributes (resource.0.A for one)."),
                ],
                accepts_any_properties: false,
                accepts_any_attributes: true,
            },
            host,
        }
    }

    async fn apply(
        &self,
        request: &ResourceRequest,
        stack_id: Option<uuid::Uuid>,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let members = members(&request.properties)?;
        let names: Vec<String> = members.iter().map(|(name, _)| name.clone()).collect();
        let nested = NestedDefinition {
            template: NestedTemplate::Inline(member_template(
                &format!("members of ResourceChain {}", request.resource_name),
                &members,
            )),
            parameters: Map::new(),
        };
        let host = host(&self.host)?;
        let outcome = match stack_id {
            None => host.create_nested_stack(request, nested).await?,
            Some(stack_id) => host.update_nested_stack(request, stack_id, nested).await?,
        };
        let values = MemberValues::read(&outcome.outputs, &names);
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
        attributes.insert("attributes".to_owned(), values.by_attribute_and_name());
        Ok(ResourceOutcome {
            physical_id: outcome.stack_id.to_string(),
            attributes,
            data: Value::Null,
        })
    }
}

/// The chain's members: one per listed type, named by its index, each
/// depending on the previous one unless the chain is concurrent.
fn members(properties: &Map<String, Value>) -> Result<Vec<(String, Value)>, ResourceFailure> {
    let types = properties
        .get("resources")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            ResourceFailure::new("resources: a list of resource types is required".to_owned())
        })?;
    let concurrent = properties
        .get("concurrent")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let member_properties = match properties.get("resource_properties") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => {
            return Err(ResourceFailure::new(
                "resource_properties must be a map".to_owned(),
            ));
        }
    };
    types
        .iter()
        .enumerate()
        .map(|(index, type_name)| {
            let type_name = type_name
                .as_str()
                .filter(|name| !name.trim().is_empty())
                .ok_or_else(|| {
                    ResourceFailure::new(format!(
                        "resources: item {index} must be a resource type name, got {type_name}"
                    ))
                })?;
            let mut definition = Map::new();
            definition.insert("type".to_owned(), json!(type_name));
            if !member_properties.is_empty() {
                definition.insert(
                    "properties".to_owned(),
                    Value::Object(member_properties.clone()),
                );
            }
            if index > 0 && !concurrent {
                definition.insert("depends_on".to_owned(), json!((index - 1).to_string()));
            }
            Ok((index.to_string(), Value::Object(definition)))
        })
        .collect()
}

#[async_trait]
impl NestedStackWork for ResourceChain {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    fn host(&self) -> &NestedStackHostSlot {
        &self.host
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        self.apply(request, None).await
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        self.apply(request, nested_id(current)).await
    }

    /// `concurrent` cannot change in place (Heat: not update_allowed);
    /// everything else is an update of the members' nested stack.
    fn needs_replacement(&self, old: &Map<String, Value>, new: &Map<String, Value>) -> bool {
        old.get("concurrent") != new.get("concurrent")
    }

    fn planned_members(&self, properties: &Map<String, Value>) -> Option<(u64, Value)> {
        let types = properties.get("resources")?.as_array()?;
        let first = types.first()?.as_str()?;
        // Counted as members of the first type; a mixed chain is counted
        // by its length (plug-points see how many resources it brings).
        Some((types.len() as u64, json!({"type": first})))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_depend_on_the_previous_one_unless_concurrent() {
        let properties = json!({"resources": ["OS::Heat::None", "OS::Heat::TestResource"],
            "resource_properties": {"value": "x"}});
        let members = members(properties.as_object().expect("map")).expect("members");
        assert_eq!(members[0].0, "0");
        assert_eq!(members[0].1["type"], "OS::Heat::None");
        assert!(members[0].1.get("depends_on").is_none());
        assert_eq!(members[1].1["depends_on"], "0");
        assert_eq!(members[1].1["properties"], json!({"value": "x"}));
        let concurrent = json!({"resources": ["A", "B"], "concurrent": true});
        let concurrent = super::members(concurrent.as_object().expect("map")).expect("members");
        assert!(concurrent[1].1.get("depends_on").is_none());
        let bad = json!({"resources": ["A", 3]});
        assert!(super::members(bad.as_object().expect("map")).is_err());
    }
}
