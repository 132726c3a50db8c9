//! Resource and output definitions: their allowed keys per template
//! version, `depends_on`, deletion policies and `condition` fields.

use serde::Serialize;
use serde_json::{Map, Value};

use super::definition::optional_text;
use super::error::{TemplateError, child_path, describe_value, index_path, type_name};
use super::functions::{ResolveContext, resolve};
use super::version::TemplateVersion;
use super::walk::{NoVisitor, Walker};

/// One entry of the `resources` section, unresolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceDefinition {
    pub name: String,
    pub resource_type: String,
    /// A map, or a function call producing one; an empty map when absent.
    pub properties: Value,
    pub metadata: Option<Value>,
    pub depends_on: Vec<String>,
    pub deletion_policy: DeletionPolicySetting,
    pub update_policy: Option<Value>,
    /// A condition name, a boolean or a condition expression.
    pub condition: Option<Value>,
    pub description: Option<String>,
    pub external_id: Option<Value>,
}

/// One entry of the `outputs` section, unresolved.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputDefinition {
    pub name: String,
    pub value: Value,
    pub description: Option<String>,
    pub condition: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeletionPolicy {
    Delete,
    Retain,
}

/// The deletion policy as written: a literal, or a function (for example
/// `get_param`) that must be resolved before use.
#[derive(Debug, Clone, PartialEq)]
pub enum DeletionPolicySetting {
    Literal(DeletionPolicy),
    Expression(Value),
}

impl DeletionPolicy {
    /// Reads a policy name. Lower-case spellings arrived in 2016-10-14;
    /// snapshots are not something Ember can take.
    pub fn parse(text: &str, version: TemplateVersion) -> Result<DeletionPolicy, String> {
        match text {
            "Delete" => Ok(DeletionPolicy::Delete),
            "Retain" => Ok(DeletionPolicy::Retain),
            "delete" | "retain" if !version.supports_lowercase_deletion_policy() => Err(format!(
                "deletion policy '{text}' needs heat_template_version 2016-10-14 or later, use '{}'",
                if text == "delete" { "Delete" } else { "Retain" }
            )),
            "delete" => Ok(DeletionPolicy::Delete),
            "retain" => Ok(DeletionPolicy::Retain),
            "Snapshot" | "snapshot" => {
                Err("deletion policy Snapshot is not supported by Ember".to_string())
            }
            other => Err(format!(
                "unknown deletion policy '{other}', expected Delete or Retain"
            )),
        }
    }
}

const RESOURCE_KEYS: [&str; 7] = [
    "type",
    "properties",
    "metadata",
    "depends_on",
    "deletion_policy",
    "update_policy",
    "description",
];

const RESOURCE_KEYS_WITH_CONDITIONS: [&str; 2] = ["condition", "external_id"];

impl ResourceDefinition {
    /// The effective deletion policy, resolving a function if one was
    /// written.
    pub fn resolve_deletion_policy(
        &self,
        context: &dyn ResolveContext,
    ) -> Result<DeletionPolicy, TemplateError> {
        let path = child_path(&child_path("resources", &self.name), "deletion_policy");
        match &self.deletion_policy {
            DeletionPolicySetting::Literal(policy) => Ok(*policy),
            DeletionPolicySetting::Expression(expression) => {
                match resolve(expression, context, &path)? {
                    Value::String(text) => DeletionPolicy::parse(&text, context.template_version())
                        .map_err(|message| TemplateError::new(path, message)),
                    other => Err(TemplateError::new(
                        path,
                        format!(
                            "the deletion policy must resolve to a string, found {}",
                            describe_value(&other)
                        ),
                    )),
                }
            }
        }
    }
}

fn optional_map(
    map: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<Value>, TemplateError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value @ Value::Object(_)) => Ok(Some(value.clone())),
        Some(other) => Err(TemplateError::new(
            child_path(path, key),
            format!("{key} must be a map, found a {}", type_name(other)),
        )),
    }
}

fn parse_condition_field(
    map: &Map<String, Value>,
    version: TemplateVersion,
    path: &str,
) -> Result<Option<Value>, TemplateError> {
    let condition_path = child_path(path, "condition");
    match map.get("condition") {
        None | Some(Value::Null) => Ok(None),
        Some(condition @ (Value::String(_) | Value::Bool(_) | Value::Object(_))) => {
            Walker::new(version, &mut NoVisitor).walk_condition(condition, &condition_path)?;
            Ok(Some(condition.clone()))
        }
        Some(other) => Err(TemplateError::new(
            condition_path,
            format!(
                "condition must be a condition name, a boolean or a condition function, found a {}",
                type_name(other)
            ),
        )),
    }
}

pub(super) fn parse_resource(
    name: &str,
    definition: &Value,
    version: TemplateVersion,
) -> Result<ResourceDefinition, TemplateError> {
    let path = child_path("resources", name);
    let Value::Object(map) = definition else {
        return Err(TemplateError::new(
            path,
            format!(
                "resource {name} must be a map with at least a type, found a {}",
                type_name(definition)
            ),
        ));
    };
    for key in map.keys() {
        let base = RESOURCE_KEYS.contains(&key.as_str());
        let conditional = RESOURCE_KEYS_WITH_CONDITIONS.contains(&key.as_str());
        if conditional && !version.supports_conditions() {
            return Err(TemplateError::new(
                child_path(&path, key),
                format!(
                    "the resource key '{key}' requires heat_template_version 2016-10-14 or later (the template uses {version})"
                ),
            ));
        }
        if !base && !conditional {
            return Err(TemplateError::new(
                child_path(&path, key),
                format!(
                    "unknown key '{key}' in resource {name}, expected one of {}, {}",
                    RESOURCE_KEYS.join(", "),
                    RESOURCE_KEYS_WITH_CONDITIONS.join(", ")
                ),
            ));
        }
    }
    let resource_type = match map.get("type") {
        Some(Value::String(text)) if !text.is_empty() => text.clone(),
        Some(Value::String(_)) => {
            return Err(TemplateError::new(
                child_path(&path, "type"),
                "the resource type is empty",
            ));
        }
        None | Some(Value::Null) => {
            return Err(TemplateError::new(
                path,
                format!("resource {name} has no type"),
            ));
        }
        Some(other) => {
            return Err(TemplateError::new(
                child_path(&path, "type"),
                format!(
                    "the resource type must be a string, found a {}",
                    type_name(other)
                ),
            ));
        }
    };
    let properties =
        optional_map(map, "properties", &path)?.unwrap_or_else(|| Value::Object(Map::new()));
    let metadata = optional_map(map, "metadata", &path)?;
    let update_policy = optional_map(map, "update_policy", &path)?;
    let depends_on = parse_depends_on(map.get("depends_on"), &child_path(&path, "depends_on"))?;
    let deletion_policy = parse_deletion_policy(map.get("deletion_policy"), version, &path)?;
    let condition = parse_condition_field(map, version, &path)?;
    let description = optional_text(map, "description", &path)?;
    let external_id = map
        .get("external_id")
        .filter(|value| !value.is_null())
        .cloned();

    let mut walker_visitor = NoVisitor;
    let mut walker = Walker::new(version, &mut walker_visitor);
    walker.walk_value(&properties, &child_path(&path, "properties"))?;
    for (key, value) in [
        ("metadata", &metadata),
        ("update_policy", &update_policy),
        ("external_id", &external_id),
    ] {
        if let Some(value) = value {
            walker.walk_value(value, &child_path(&path, key))?;
        }
    }
    if let DeletionPolicySetting::Expression(expression) = &deletion_policy {
        walker.walk_value(expression, &child_path(&path, "deletion_policy"))?;
    }

    Ok(ResourceDefinition {
        name: name.to_string(),
        resource_type,
        properties,
        metadata,
        depends_on,
        deletion_policy,
        update_policy,
        condition,
        description,
        external_id,
    })
}

fn parse_depends_on(value: Option<&Value>, path: &str) -> Result<Vec<String>, TemplateError> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(name)) => Ok(vec![name.clone()]),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(index, item)| match item {
                Value::String(name) => Ok(name.clone()),
                other => Err(TemplateError::new(
                    index_path(path, index),
                    format!(
                        "depends_on entries must be resource names, found a {}",
                        type_name(other)
                    ),
                )),
            })
            .collect(),
        Some(other) => Err(TemplateError::new(
            path,
            format!(
                "depends_on must be a resource name or a list of names, found a {}",
                type_name(other)
            ),
        )),
    }
}

fn parse_deletion_policy(
    value: Option<&Value>,
    version: TemplateVersion,
    resource_path: &str,
) -> Result<DeletionPolicySetting, TemplateError> {
    let path = child_path(resource_path, "deletion_policy");
    match value {
        None | Some(Value::Null) => Ok(DeletionPolicySetting::Literal(DeletionPolicy::Delete)),
        Some(Value::String(text)) => DeletionPolicy::parse(text, version)
            .map(DeletionPolicySetting::Literal)
            .map_err(|message| TemplateError::new(path, message)),
        Some(expression @ Value::Object(_)) => {
            Ok(DeletionPolicySetting::Expression(expression.clone()))
        }
        Some(other) => Err(TemplateError::new(
            path,
            format!(
                "deletion_policy must be Delete or Retain, found {}",
                describe_value(other)
            ),
        )),
    }
}

pub(super) fn parse_output(
    name: &str,
    definition: &Value,
    version: TemplateVersion,
) -> Result<OutputDefinition, TemplateError> {
    let path = child_path("outputs", name);
    let Value::Object(map) = definition else {
        return Err(TemplateError::new(
            path,
            format!(
                "output {name} must be a map with a value, found a {}",
                type_name(definition)
            ),
        ));
    };
    for key in map.keys() {
        match key.as_str() {
            "value" | "description" => {}
            "condition" if version.supports_conditions() => {}
            "condition" => {
                return Err(TemplateError::new(
                    child_path(&path, key),
                    format!(
                        "the output key 'condition' requires heat_template_version 2016-10-14 or later (the template uses {version})"
                    ),
                ));
            }
            other => {
                return Err(TemplateError::new(
                    child_path(&path, key),
                    format!(
                        "unknown key '{other}' in output {name}, expected value, description or condition"
                    ),
                ));
            }
        }
    }
    let Some(value) = map.get("value") else {
        return Err(TemplateError::new(
            path,
            format!("output {name} has no value"),
        ));
    };
    Walker::new(version, &mut NoVisitor).walk_value(value, &child_path(&path, "value"))?;
    Ok(OutputDefinition {
        name: name.to_string(),
        value: value.clone(),
        description: optional_text(map, "description", &path)?,
        condition: parse_condition_field(map, version, &path)?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::StaticResolveContext;
    use super::super::definition::Template;
    use super::*;
    use serde_json::json;

    fn error_of(text: &str) -> TemplateError {
        Template::parse(text).unwrap_err()
    }

    #[test]
    fn resource_shape_errors_have_paths() {
        let cases = [
            ("a: x", "resources.a", "must be a map"),
            ("a: {}", "resources.a", "resource a has no type"),
            ("a: {type: 5}", "resources.a.type", "must be a string"),
            (
                "a: {type: ''}",
                "resources.a.type",
                "the resource type is empty",
            ),
            (
                "a: {type: X, properties: [1]}",
                "resources.a.properties",
                "properties must be a map",
            ),
            (
                "a: {type: X, depends_on: {b: 1}}",
                "resources.a.depends_on",
                "must be a resource name or a list",
            ),
            (
                "a: {type: X, depends_on: [b, 1]}",
                "resources.a.depends_on[1]",
                "must be resource names",
            ),
            (
                "a: {type: X, deletion_policy: Snapshot}",
                "resources.a.deletion_policy",
                "Snapshot is not supported",
            ),
            (
                "a: {type: X, deletion_policy: Keep}",
                "resources.a.deletion_policy",
                "unknown deletion policy 'Keep'",
            ),
            (
                "a: {type: X, deletion_policy: 3}",
                "resources.a.deletion_policy",
                "must be Delete or Retain",
            ),
            (
                "a: {type: X, condition: [1]}",
                "resources.a.condition",
                "condition must be a condition name",
            ),
        ];
        for (resources, path, fragment) in cases {
            let text = format!("heat_template_version: 2018-08-31\nresources:\n  {resources}\n");
            let error = error_of(&text);
            assert_eq!(error.path, path, "{error}");
            assert!(error.message.contains(fragment), "{error}");
        }
    }

    #[test]
    fn outputs_need_values() {
        let error = error_of("heat_template_version: pike\noutputs:\n  o: {description: x}");
        assert_eq!(error.path, "outputs.o");
        assert_eq!(error.message, "output o has no value");
        let error = error_of("heat_template_version: pike\noutputs:\n  o: 5");
        assert!(error.message.contains("must be a map with a value"));
    }

    #[test]
    fn deletion_policy_expressions_resolve_later() {
        let template = Template::parse(
            "heat_template_version: pike\nparameters:\n  p: {type: string, default: Retain}\nresources:\n  a: {type: X, deletion_policy: {get_param: p}}",
        )
        .unwrap();
        let mut context = StaticResolveContext::new(TemplateVersion::V2017_09_01);
        context.parameters.insert("p".into(), json!("Retain"));
        assert_eq!(
            template.resources["a"]
                .resolve_deletion_policy(&context)
                .unwrap(),
            DeletionPolicy::Retain
        );
        context.parameters.insert("p".into(), json!("Snapshot"));
        let error = template.resources["a"]
            .resolve_deletion_policy(&context)
            .unwrap_err();
        assert_eq!(error.path, "resources.a.deletion_policy");
    }
}
