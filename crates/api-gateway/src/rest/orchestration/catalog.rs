//! What the service offers, independent of any stack: resource types and
//! their schemas (and a starter template per type, as Heat generates one),
//! template validation, and build information.

use axum::Json;
use axum::extract::{Path, State};
use bytes::Bytes;
use ember_proto::engine::v1 as pb;
use ember_runtime::ErrorKind;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::heat_request::{self, QueryParams};
use super::protobuf_json::struct_to_map;
use super::{HeatCaller, heat_view, stack_service};
use crate::GatewayState;
use crate::error::RestError;

/// The version both "api" and "engine" report: they ship as one build.
const REVISION: &str = env!("CARGO_PKG_VERSION");

/// `GET /build_info`.
pub async fn build_info(_caller: HeatCaller) -> Json<Value> {
    Json(json!({
        "api": { "revision": REVISION },
        "engine": { "revision": REVISION },
    }))
}

/// `GET /resource_types[?name=…&with_description=true]`.
pub async fn list_resource_types(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    query: QueryParams,
) -> Result<Json<Value>, RestError> {
    let with_description = query.boolean("with_description")?.unwrap_or(false);
    let request = pb::ListResourceTypesRequest {
        name_filter: query.first("name").unwrap_or_default().to_owned(),
    };
    let types = stack_service(&state)
        .list_resource_types(state.internal_request(&caller.identity, request))
        .await?
        .into_inner()
        .resource_types;
    if !with_description {
        return Ok(Json(json!({ "resource_types": types })));
    }
    let schemas = types
        .iter()
        .map(|resource_type| schema(&state, &caller, resource_type.clone()));
    let described: Vec<Value> = futures::future::join_all(schemas)
        .await
        .into_iter()
        .zip(&types)
        .map(|(schema, resource_type)| {
            let description = schema.map(|schema| schema.description).unwrap_or_default();
            json!({ "resource_type": resource_type, "description": description })
        })
        .collect();
    Ok(Json(json!({ "resource_types": described })))
}

async fn schema(
    state: &GatewayState,
    caller: &HeatCaller,
    resource_type: String,
) -> Result<pb::ResourceTypeSchema, RestError> {
    let request = pb::GetResourceTypeSchemaRequest { resource_type };
    Ok(stack_service(state)
        .get_resource_type_schema(state.internal_request(&caller.identity, request))
        .await?
        .into_inner())
}

#[derive(Debug, Deserialize)]
pub struct ResourceTypePath {
    type_name: String,
}

/// `GET /resource_types/{type}`: properties, attributes, support status.
pub async fn show_resource_type(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<ResourceTypePath>,
) -> Result<Json<Value>, RestError> {
    let schema = schema(&state, &caller, path.type_name).await?;
    Ok(Json(heat_view::resource_type_schema(&schema)))
}

/// `GET /resource_types/{type}/template[?template_type=hot|cfn]`: a
/// template with one parameter per property and one output per attribute.
/// Heat's default is `cfn`.
pub async fn resource_type_template(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<ResourceTypePath>,
    query: QueryParams,
) -> Result<Json<Value>, RestError> {
    let format = match query.first("template_type").unwrap_or("cfn") {
        text if text.eq_ignore_ascii_case("hot") => TemplateFormat::Hot,
        text if text.eq_ignore_ascii_case("cfn") => TemplateFormat::Cfn,
        other => {
            return Err(RestError::new(
                ErrorKind::InvalidInput,
                format!("template_type must be hot or cfn, got {other:?}"),
            ));
        }
    };
    let schema = schema(&state, &caller, path.type_name).await?;
    Ok(Json(starter_template(&schema, format)))
}

/// `GET /template_versions`: every template version Ember parses.
pub async fn list_template_versions(
    State(state): State<GatewayState>,
    caller: HeatCaller,
) -> Result<Json<Value>, RestError> {
    let versions = stack_service(&state)
        .list_template_versions(
            state.internal_request(&caller.identity, pb::ListTemplateVersionsRequest {}),
        )
        .await?
        .into_inner()
        .template_versions;
    let versions: Vec<Value> = versions
        .into_iter()
        .map(|version| {
            json!({"version": version.version, "type": version.r#type, "aliases": version.aliases})
        })
        .collect();
    Ok(Json(json!({ "template_versions": versions })))
}

#[derive(Debug, Deserialize)]
pub struct TemplateVersionPath {
    template_version: String,
}

/// `GET /template_versions/{version}/functions[?with_condition_func=true]`.
pub async fn list_template_functions(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<TemplateVersionPath>,
    query: QueryParams,
) -> Result<Json<Value>, RestError> {
    let with_condition_functions = query.boolean("with_condition_func")?.unwrap_or(false);
    let request = pb::ListTemplateFunctionsRequest {
        template_version: path.template_version,
        with_condition_functions,
    };
    let functions = stack_service(&state)
        .list_template_functions(state.internal_request(&caller.identity, request))
        .await?
        .into_inner()
        .functions;
    let functions: Vec<Value> = functions
        .into_iter()
        .map(
            |function| json!({"functions": function.function, "description": function.description}),
        )
        .collect();
    Ok(Json(json!({ "template_functions": functions })))
}

/// `POST /validate[?show_nested=true]` → Heat's `{"Description",
/// "Parameters", "ParameterGroups", "Environment", "NestedParameters"}`;
/// an invalid template is a 400 saying where.
pub async fn validate_template(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    query: QueryParams,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let mut request = heat_request::validate_template_request(heat_request::parse_body(&body)?)?;
    request.show_nested = query.boolean("show_nested")?.unwrap_or(false);
    let response = stack_service(&state)
        .validate_template(state.internal_request(&caller.identity, request))
        .await?
        .into_inner();
    Ok(Json(heat_view::validation(&response)))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TemplateFormat {
    Hot,
    Cfn,
}

/// A property's type as a template parameter type.
fn parameter_type(property_type: &str, format: TemplateFormat) -> &'static str {
    let hot = match property_type {
        "integer" | "number" => "number",
        "boolean" => "boolean",
        "list" => "comma_delimited_list",
        "map" => "json",
        _ => "string",
    };
    match (format, hot) {
        (TemplateFormat::Hot, hot) => hot,
        (TemplateFormat::Cfn, "number") => "Number",
        (TemplateFormat::Cfn, "boolean") => "Boolean",
        (TemplateFormat::Cfn, "comma_delimited_list") => "CommaDelimitedList",
        (TemplateFormat::Cfn, "json") => "Json",
        (TemplateFormat::Cfn, _) => "String",
    }
}

fn starter_template(schema: &pb::ResourceTypeSchema, format: TemplateFormat) -> Value {
    let type_name = &schema.resource_type;
    // Heat keys the resource (and its outputs' references) by the type's
    // class name, not by the type.
    let name = if schema.template_resource_name.is_empty() {
        type_name
    } else {
        &schema.template_resource_name
    };
    let text = |value: Option<&Value>| value.and_then(Value::as_str).unwrap_or_default().to_owned();
    let mut parameters = Map::new();
    let mut properties = Map::new();
    for (property, definition) in struct_to_map(schema.properties.as_ref()) {
        let kind = parameter_type(&text(definition.get("type")), format);
        let description = text(definition.get("description"));
        let (parameter, reference) = match format {
            TemplateFormat::Hot => (
                json!({ "type": kind, "description": description }),
                json!({ "get_param": property }),
            ),
            TemplateFormat::Cfn => (
                json!({ "Type": kind, "Description": description }),
                json!({ "Ref": property }),
            ),
        };
        parameters.insert(property.clone(), parameter);
        properties.insert(property, reference);
    }
    let mut outputs = Map::new();
    for (attribute, definition) in struct_to_map(schema.attributes.as_ref()) {
        let description = text(definition.get("description"));
        let output = match format {
            TemplateFormat::Hot => json!({
                "description": description,
                "value": { "get_attr": [name, attribute] },
            }),
            TemplateFormat::Cfn => json!({
                "Description": description,
                "Value": { "Fn::GetAtt": [name, attribute] },
            }),
        };
        outputs.insert(attribute, output);
    }
    let description = format!("Initial template of {name}");
    match format {
        TemplateFormat::Hot => json!({
            "heat_template_version": "2016-10-14",
            "description": description,
            "parameters": parameters,
            "resources": { name.clone(): { "type": type_name, "properties": properties } },
            "outputs": outputs,
        }),
        TemplateFormat::Cfn => json!({
            "HeatTemplateFormatVersion": "2012-12-12",
            "Description": description,
            "Parameters": parameters,
            "Resources": { name.clone(): { "Type": type_name, "Properties": properties } },
            "Outputs": outputs,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::protobuf_json::map_to_struct;
    use super::*;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("object")
    }

    #[test]
    fn a_starter_template_has_a_parameter_per_property_and_an_output_per_attribute() {
        let schema = pb::ResourceTypeSchema {
            resource_type: "OS::Heat::RandomString".into(),
            properties: Some(map_to_struct(object(
                json!({"length": {"type": "integer", "description": "how long"}}),
            ))),
            attributes: Some(map_to_struct(object(
                json!({"value": {"description": "the string"}}),
            ))),
            template_resource_name: "RandomString".into(),
            ..pb::ResourceTypeSchema::default()
        };
        // As Heat: the resource is keyed by the type's class name.
        let hot = starter_template(&schema, TemplateFormat::Hot);
        assert_eq!(hot["parameters"]["length"]["type"], "number");
        assert_eq!(
            hot["resources"]["RandomString"],
            json!({"type": "OS::Heat::RandomString",
                "properties": {"length": {"get_param": "length"}}})
        );
        assert_eq!(
            hot["outputs"]["value"]["value"],
            json!({"get_attr": ["RandomString", "value"]})
        );
        assert_eq!(hot["description"], "Initial template of RandomString");
        let cfn = starter_template(&schema, TemplateFormat::Cfn);
        assert_eq!(cfn["Parameters"]["length"]["Type"], "Number");
        assert_eq!(
            cfn["Resources"]["RandomString"]["Type"],
            "OS::Heat::RandomString"
        );
        assert_eq!(
            cfn["Outputs"]["value"]["Value"],
            json!({"Fn::GetAtt": ["RandomString", "value"]})
        );
    }
}
