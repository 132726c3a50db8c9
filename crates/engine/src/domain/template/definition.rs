//! The parsed template: `Template::parse` reads the top-level sections and
//! the resource and output definitions, enforcing the template version's
//! rules; resource and output entries are read by `resource_definition.rs`.
//! Reference checks and dependency analysis live in `graph.rs`.

use indexmap::IndexMap;
use serde_json::{Map, Value};

use super::document::parse_document;
use super::error::{TemplateError, child_path, describe_value, index_path, type_name};
use super::parameters::ParameterSchema;
use super::resource_definition::{
    OutputDefinition, ResourceDefinition, parse_output, parse_resource,
};
use super::version::TemplateVersion;
use super::walk::{NoVisitor, Walker};

/// A parsed HOT template.
#[derive(Debug, Clone)]
pub struct Template {
    pub version: TemplateVersion,
    pub description: Option<String>,
    pub parameter_groups: Vec<ParameterGroup>,
    pub parameters: IndexMap<String, ParameterSchema>,
    pub resources: IndexMap<String, ResourceDefinition>,
    pub outputs: IndexMap<String, OutputDefinition>,
    /// Condition definitions as written; see `evaluate_conditions`.
    pub conditions: IndexMap<String, Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ParameterGroup {
    pub label: Option<String>,
    pub description: Option<String>,
    pub parameters: Vec<String>,
}

const TOP_LEVEL_KEYS: [&str; 7] = [
    "heat_template_version",
    "description",
    "parameter_groups",
    "parameters",
    "resources",
    "outputs",
    "conditions",
];

impl Template {
    /// Parses a YAML or JSON template.
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        Self::from_map(parse_document(text, "template")?)
    }

    /// Builds a template from an already decoded document.
    pub fn from_value(document: Value) -> Result<Template, TemplateError> {
        match document {
            Value::Object(map) => Self::from_map(map),
            other => Err(TemplateError::new(
                "",
                format!("the template must be a map, found a {}", type_name(&other)),
            )),
        }
    }

    fn from_map(document: Map<String, Value>) -> Result<Template, TemplateError> {
        // A CloudFormation-format template is read as its HOT equivalent.
        let document = if super::cfn::is_cfn(&document) {
            super::cfn::translate(&document)?
        } else {
            document
        };
        let version = parse_version(&document)?;
        super::document::only_known_sections(&document, &TOP_LEVEL_KEYS)?;
        if document.contains_key("conditions") && !version.supports_conditions() {
            return Err(TemplateError::new(
                "conditions",
                format!(
                    "the conditions section requires heat_template_version 2016-10-14 or later (the template uses {version})"
                ),
            ));
        }
        let description = match document.get("description") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(text.clone()),
            Some(other) => {
                return Err(TemplateError::new(
                    "description",
                    format!(
                        "the description must be a string, found a {}",
                        type_name(other)
                    ),
                ));
            }
        };

        let mut parameters = IndexMap::new();
        for (name, definition) in section_map(&document, "parameters")? {
            let path = child_path("parameters", name);
            parameters.insert(
                name.clone(),
                ParameterSchema::parse(name, definition, version, &path)?,
            );
        }
        let parameter_groups =
            parse_parameter_groups(document.get("parameter_groups"), &parameters)?;

        let mut conditions = IndexMap::new();
        for (name, definition) in section_map(&document, "conditions")? {
            let path = child_path("conditions", name);
            if !matches!(definition, Value::Bool(_) | Value::Object(_)) {
                return Err(TemplateError::new(
                    path,
                    format!(
                        "the definition of condition {name} must be a boolean or a condition function, found {}",
                        describe_value(definition)
                    ),
                ));
            }
            Walker::new(version, &mut NoVisitor).walk_condition(definition, &path)?;
            conditions.insert(name.clone(), definition.clone());
        }

        let mut resources = IndexMap::new();
        for (name, definition) in section_map(&document, "resources")? {
            resources.insert(name.clone(), parse_resource(name, definition, version)?);
        }
        let mut outputs = IndexMap::new();
        for (name, definition) in section_map(&document, "outputs")? {
            outputs.insert(name.clone(), parse_output(name, definition, version)?);
        }

        Ok(Template {
            version,
            description,
            parameter_groups,
            parameters,
            resources,
            outputs,
            conditions,
        })
    }
}
fn parse_version(document: &Map<String, Value>) -> Result<TemplateVersion, TemplateError> {
    let key = "heat_template_version";
    match document.get(key) {
        // Heat's words (clients and its own tests look for them).
        None => Err(TemplateError::new(
            "",
            "The template version is invalid: Template version was not provided",
        )),
        Some(Value::String(text)) => TemplateVersion::parse(text).ok_or_else(|| {
            let dates: Vec<&str> = TemplateVersion::ALL.iter().map(|version| version.date()).collect();
            TemplateError::new(
                key,
                format!(
                    "The template version is invalid: \"{key}: {text}\". \"{key}\" should be one of: {} (or newton, ocata, pike, queens, rocky, wallaby)",
                    dates.join(", ")
                ),
            )
        }),
        Some(other) => Err(TemplateError::new(
            key,
            format!(
                "heat_template_version must be a date such as 2018-08-31, found {}",
                describe_value(other)
            ),
        )),
    }
}

/// A section that must be a map; an absent or empty (`null`) section is an
/// empty map, as YAML writes `resources:` with nothing under it that way.
fn section_map<'a>(
    document: &'a Map<String, Value>,
    section: &str,
) -> Result<Vec<(&'a String, &'a Value)>, TemplateError> {
    match document.get(section) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(map)) => Ok(map.iter().collect()),
        Some(other) => Err(TemplateError::new(
            section,
            format!(
                "the {section} section must be a map, found a {}",
                type_name(other)
            ),
        )),
    }
}

pub(super) fn optional_text(
    map: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<String>, TemplateError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(TemplateError::new(
            child_path(path, key),
            format!("{key} must be a string, found a {}", type_name(other)),
        )),
    }
}

fn parse_parameter_groups(
    value: Option<&Value>,
    parameters: &IndexMap<String, ParameterSchema>,
) -> Result<Vec<ParameterGroup>, TemplateError> {
    let section = "parameter_groups";
    let entries = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(entries)) => entries,
        Some(other) => {
            return Err(TemplateError::new(
                section,
                format!(
                    "parameter_groups must be a list, found a {}",
                    type_name(other)
                ),
            ));
        }
    };
    let mut grouped: IndexMap<String, usize> = IndexMap::new();
    let mut groups = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let path = index_path(section, index);
        let Value::Object(map) = entry else {
            return Err(TemplateError::new(
                path,
                format!(
                    "a parameter group must be a map, found a {}",
                    type_name(entry)
                ),
            ));
        };
        if let Some(key) = map
            .keys()
            .find(|key| !["label", "description", "parameters"].contains(&key.as_str()))
        {
            return Err(TemplateError::new(
                child_path(&path, key),
                format!(
                    "unknown key '{key}' in a parameter group, expected label, description or parameters"
                ),
            ));
        }
        let names_path = child_path(&path, "parameters");
        let names = match map.get("parameters") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(names)) => names.clone(),
            Some(other) => {
                return Err(TemplateError::new(
                    names_path,
                    format!(
                        "the parameters of a group must be a list, found a {}",
                        type_name(other)
                    ),
                ));
            }
        };
        let mut member_names = Vec::new();
        for (position, name) in names.iter().enumerate() {
            let name_path = index_path(&names_path, position);
            let Value::String(name) = name else {
                return Err(TemplateError::new(
                    name_path,
                    format!(
                        "parameter group entries must be parameter names, found a {}",
                        type_name(name)
                    ),
                ));
            };
            if !parameters.contains_key(name.as_str()) {
                return Err(TemplateError::new(
                    name_path,
                    format!("parameter group refers to unknown parameter '{name}'"),
                ));
            }
            if let Some(previous) = grouped.insert(name.clone(), index) {
                return Err(TemplateError::new(
                    name_path,
                    format!("parameter '{name}' is already in parameter group {previous}"),
                ));
            }
            member_names.push(name.clone());
        }
        groups.push(ParameterGroup {
            label: optional_text(map, "label", &path)?,
            description: optional_text(map, "description", &path)?,
            parameters: member_names,
        });
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::super::resource_definition::{DeletionPolicy, DeletionPolicySetting};
    use super::*;
    use serde_json::json;

    fn error_of(text: &str) -> TemplateError {
        Template::parse(text).unwrap_err()
    }

    const FULL: &str = r#"
heat_template_version: 2018-08-31
description: demo
parameter_groups:
  - label: sizing
    parameters: [flavor]
parameters:
  flavor:
    type: string
    default: m1.small
resources:
  server:
    type: OS::Nova::Server
    properties:
      flavor: {get_param: flavor}
    depends_on: volume
    deletion_policy: retain
    update_policy: {max_batch_size: 1}
    metadata: {role: web}
    condition: prod
  volume:
    type: OS::Cinder::Volume
outputs:
  id:
    value: {get_resource: server}
    description: the server
    condition: prod
conditions:
  prod: true
"#;

    #[test]
    fn parses_every_section() {
        let template = Template::parse(FULL).unwrap();
        assert_eq!(template.version, TemplateVersion::V2018_08_31);
        assert_eq!(template.description.as_deref(), Some("demo"));
        assert_eq!(template.parameter_groups[0].parameters, vec!["flavor"]);
        let server = &template.resources["server"];
        assert_eq!(server.resource_type, "OS::Nova::Server");
        assert_eq!(
            server.properties,
            json!({"flavor": {"get_param": "flavor"}})
        );
        assert_eq!(server.depends_on, vec!["volume"]);
        assert_eq!(
            server.deletion_policy,
            DeletionPolicySetting::Literal(DeletionPolicy::Retain)
        );
        assert_eq!(server.condition, Some(json!("prod")));
        assert_eq!(template.resources["volume"].properties, json!({}));
        assert_eq!(
            template.outputs["id"].description.as_deref(),
            Some("the server")
        );
        assert_eq!(template.conditions["prod"], json!(true));
    }

    #[test]
    fn accepts_json_and_release_names() {
        let template =
            Template::parse(r#"{"heat_template_version": "wallaby", "resources": null}"#).unwrap();
        assert_eq!(template.version, TemplateVersion::V2021_04_16);
        assert!(template.resources.is_empty());
    }

    #[test]
    fn version_errors() {
        assert_eq!(
            error_of("description: x").message,
            "The template version is invalid: Template version was not provided"
        );
        let error = error_of("heat_template_version: 2099-01-01");
        assert_eq!(error.path, "heat_template_version");
        assert!(
            error
                .message
                .contains("The template version is invalid: \"heat_template_version: 2099-01-01\"")
        );
        assert!(
            error_of("heat_template_version: 2018")
                .message
                .contains("must be a date")
        );
    }

    #[test]
    fn unknown_sections_and_keys_are_errors() {
        let error = error_of("heat_template_version: pike\nResources: {}");
        assert_eq!(
            error.to_string(),
            "The template section is invalid: Resources"
        );
        let error = error_of(
            "heat_template_version: pike\nresources:\n  a:\n    type: X\n    propertes: {}",
        );
        assert_eq!(error.path, "resources.a.propertes");
        assert!(
            error
                .message
                .contains("unknown key 'propertes' in resource a")
        );
        let error =
            error_of("heat_template_version: pike\noutputs:\n  o:\n    value: 1\n    descr: x");
        assert_eq!(error.path, "outputs.o.descr");
    }

    #[test]
    fn version_gated_features() {
        let error = error_of("heat_template_version: 2016-04-08\nconditions: {}");
        assert_eq!(error.path, "conditions");
        assert!(
            error
                .message
                .contains("requires heat_template_version 2016-10-14")
        );
        let error =
            error_of("heat_template_version: 2016-04-08\nresources:\n  a: {type: X, condition: c}");
        assert_eq!(error.path, "resources.a.condition");
        let error = error_of(
            "heat_template_version: 2016-04-08\nresources:\n  a: {type: X, deletion_policy: delete}",
        );
        assert!(error.message.contains("use 'Delete'"));
        let error =
            error_of("heat_template_version: 2016-04-08\noutputs:\n  o: {value: 1, condition: c}");
        assert_eq!(error.path, "outputs.o.condition");
        let error = error_of(
            "heat_template_version: 2016-04-08\nresources:\n  a:\n    type: X\n    properties:\n      p: {if: [c, 1, 2]}",
        );
        assert_eq!(error.path, "resources.a.properties.p.if");
        assert!(
            error
                .message
                .contains("requires heat_template_version 2016-10-14")
        );
    }

    #[test]
    fn removed_and_unsupported_functions_are_errors() {
        let error = error_of(
            "heat_template_version: 2016-10-14\noutputs:\n  o:\n    value: {Fn::Select: [0, [a]]}",
        );
        assert_eq!(error.path, "outputs.o.value.Fn::Select");
        assert!(
            error
                .message
                .contains("not supported in heat_template_version 2016-10-14")
        );
        let error = error_of(
            "heat_template_version: 2016-10-14\noutputs:\n  o:\n    value: {yaql: {expression: '1'}}",
        );
        assert_eq!(error.message, "yaql is not supported by Ember");
    }

    #[test]
    fn conditions_must_be_booleans_or_functions() {
        let error = error_of("heat_template_version: pike\nconditions:\n  a: b");
        assert_eq!(error.path, "conditions.a");
        assert!(
            error
                .message
                .contains("must be a boolean or a condition function")
        );
        let error =
            error_of("heat_template_version: pike\nconditions:\n  a: {str_split: [',', 'x']}");
        assert_eq!(error.path, "conditions.a.str_split");
        assert!(error.message.contains("cannot be used in a condition"));
    }

    #[test]
    fn parameter_group_errors() {
        let base =
            "heat_template_version: pike\nparameters:\n  a: {type: string}\nparameter_groups:\n";
        let error = error_of(&format!("{base}  - parameters: [b]"));
        assert_eq!(error.path, "parameter_groups[0].parameters[0]");
        assert!(error.message.contains("unknown parameter 'b'"));
        let error = error_of(&format!("{base}  - parameters: [a]\n  - parameters: [a]"));
        assert!(error.message.contains("already in parameter group 0"));
        let error = error_of(&format!("{base}  - params: [a]"));
        assert_eq!(error.path, "parameter_groups[0].params");
        let error = error_of(&format!("{base}  - x"));
        assert!(error.message.contains("must be a map"));
    }

    #[test]
    fn section_type_errors() {
        let error = error_of("heat_template_version: pike\nresources: [a]");
        assert_eq!(error.path, "resources");
        assert_eq!(
            error.message,
            "the resources section must be a map, found a list"
        );
        let error = error_of("heat_template_version: pike\ndescription: [a]");
        assert_eq!(error.path, "description");
        assert!(Template::from_value(json!([1])).is_err());
    }
}
