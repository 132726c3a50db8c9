//! `OS::Heat::Value`: holds a value (optionally of a declared type) and
//! exposes it as the `value` attribute.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceOutcome,
    ResourceRequest, ResourceType, ResourceTypeSchema,
};
use crate::domain::Resource;
use crate::domain::template::{ParameterType, coerce_parameter_value};

pub struct ValueResource {
    schema: ResourceTypeSchema,
}

impl ValueResource {
    pub fn new() -> Self {
        ValueResource {
            schema: ResourceTypeSchema {
                type_name: "OS::Heat::Value",
                description: "Stores a value and exposes it as the value attribute.",
                properties: vec![
                    PropertySchema::new("value", PropertyType::Any, "The value.")
                        .required()
                        .update_allowed(),
                    PropertySchema::new(
                        "type",
                        PropertyType::String,
                        "The type the value must have.",
                    )
                    .update_allowed()
                    .allowed_values(vec![
                        json!("string"),
                        json!("number"),
                        json!("comma_delimited_list"),
                        json!("json"),
                        json!("boolean"),
                    ]),
                ],
                attributes: vec![AttributeSchema {
                    name: "value",
                    description: "The value, of the declared type.",
                }],
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
        }
    }
}

fn typed_value(request: &ResourceRequest) -> Result<Value, ResourceFailure> {
    let value = request
        .properties
        .get("value")
        .cloned()
        .unwrap_or(Value::Null);
    let declared = match request.properties.get("type").and_then(Value::as_str) {
        None => return Ok(value),
        Some("string") => ParameterType::String,
        Some("number") => ParameterType::Number,
        Some("comma_delimited_list") => ParameterType::CommaDelimitedList,
        Some("json") => ParameterType::Json,
        Some("boolean") => ParameterType::Boolean,
        Some(other) => return Err(ResourceFailure::new(format!("unknown type {other:?}"))),
    };
    coerce_parameter_value(declared, &value, false)
        .map_err(|message| ResourceFailure::new(format!("value: {message}")))
}

fn outcome(
    request: &ResourceRequest,
    physical_id: String,
) -> Result<ResourceOutcome, ResourceFailure> {
    let mut attributes = Map::new();
    attributes.insert("value".to_owned(), typed_value(request)?);
    Ok(ResourceOutcome {
        physical_id,
        attributes,
        data: Value::Null,
    })
}

#[async_trait]
impl ResourceType for ValueResource {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    fn acts_outside_its_row(&self) -> bool {
        false
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        outcome(request, request.physical_resource_name())
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let physical_id = request.kept_physical_id(current);
        outcome(request, physical_id)
    }
}
