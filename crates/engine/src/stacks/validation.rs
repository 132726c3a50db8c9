//! `POST /validate`: a template (with its environment and parameters)
//! checked as a create would check it, and described as Heat describes it —
//! each parameter's schema with the value the caller gave, the parameter
//! groups, the environment the stack would run with and, on request, the
//! parameters of every nested template, recursively.

use ember_runtime::Identity;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::StackOperations;
use super::definition::{DefinitionInput, ParsedStack, definition_from_input};
use crate::domain::template::{
    Environment, ParameterSchema, ParameterType, ResolvedType, StackIdentity, Template,
};
use crate::error::Result;

/// How deep `NestedParameters` follows templates inside templates (a
/// template naming itself stops here rather than looping).
const MAX_NESTED_DEPTH: usize = 16;

/// Heat's validate answer.
#[derive(Debug, Clone)]
pub struct ValidationReport {
    pub description: String,
    pub parameters: Map<String, Value>,
    pub parameter_groups: Vec<Value>,
    /// The environment as Heat shows it (`parameters`,
    /// `parameter_defaults`, `resource_registry`, `event_sinks`).
    pub environment: Value,
    /// Resource name → its nested template's description, type and
    /// parameters (empty unless asked for, or when nothing is nested).
    pub nested_parameters: Map<String, Value>,
}

impl StackOperations {
    /// Checks a template (and environment, parameters) as a create would,
    /// and describes its parameters the way Heat's validate does.
    pub fn validate_template(
        &self,
        identity: &Identity,
        input: DefinitionInput<'_>,
        show_nested: bool,
    ) -> Result<ValidationReport> {
        let definition = definition_from_input(input)?;
        let parsed = ParsedStack::build(
            &definition,
            StackIdentity {
                stack_name: "validate".to_owned(),
                stack_id: Uuid::nil().to_string(),
                project_id: identity.project_id.clone(),
            },
            self.registry(),
        );
        if let Ok(parsed) = &parsed {
            super::remote::check_remote_stacks(parsed, &definition, &self.engine.region)?;
        }
        // Missing parameter values are fine for validate: report the schema.
        let (template, environment) = match parsed {
            Ok(parsed) => (parsed.template, parsed.environment),
            Err(error) if error.path.starts_with("parameters") => {
                let template = Template::from_value(definition.template.clone())?;
                let environment = Environment::from_value(definition.environment.clone())?;
                // The resource types are still checked (Heat reports an
                // unknown type whatever the parameters say).
                ParsedStack::check_resource_types(
                    &definition,
                    &template,
                    &environment,
                    self.registry(),
                )?;
                (template, environment)
            }
            Err(error) => return Err(error.into()),
        };
        // The values the caller gave: the request's over the environment's.
        let mut given = environment.parameters.clone();
        given.extend(definition.parameters.clone());
        let parameters = template
            .parameters
            .iter()
            .map(|(name, schema)| (name.clone(), describe(name, schema, given.get(name))))
            .collect();
        let nested_parameters = if show_nested {
            let values = effective_values(&template, &environment, &given);
            nested(&template, &environment, &definition.files, &values, 0)
        } else {
            Map::new()
        };
        Ok(ValidationReport {
            description: template.description.clone().unwrap_or_default(),
            parameters,
            parameter_groups: groups(&template),
            environment: environment_view(&definition.environment, &environment, &given, &template),
            nested_parameters,
        })
    }
}

/// One parameter as Heat's validate shows it: its type, description,
/// label, whether it is hidden, its default (shown to the template's own
/// caller even when hidden, as Heat does) and the value given for it.
fn describe(name: &str, schema: &ParameterSchema, given: Option<&Value>) -> Value {
    let mut entry = Map::new();
    entry.insert(
        "Type".to_owned(),
        json!(heat_parameter_type(schema.parameter_type)),
    );
    entry.insert(
        "Description".to_owned(),
        json!(schema.description.clone().unwrap_or_default()),
    );
    entry.insert(
        "Label".to_owned(),
        json!(schema.label.clone().unwrap_or_else(|| name.to_owned())),
    );
    entry.insert(
        "NoEcho".to_owned(),
        json!(if schema.hidden { "true" } else { "false" }),
    );
    if let Some(default) = &schema.default {
        entry.insert("Default".to_owned(), default.clone());
    }
    if let Some(value) = given.filter(|value| !value.is_null()) {
        entry.insert("Value".to_owned(), value.clone());
    }
    if !schema.tags.is_empty() {
        entry.insert("Tags".to_owned(), json!(schema.tags));
    }
    Value::Object(entry)
}

fn groups(template: &Template) -> Vec<Value> {
    template
        .parameter_groups
        .iter()
        .map(|group| {
            json!({
                "label": group.label,
                "description": group.description,
                "parameters": group.parameters,
            })
        })
        .collect()
}

/// Each parameter's value as far as validate knows it: given, else the
/// environment's default, else the template's.
fn effective_values(
    template: &Template,
    environment: &Environment,
    given: &Map<String, Value>,
) -> Map<String, Value> {
    template
        .parameters
        .iter()
        .filter_map(|(name, schema)| {
            let value = given
                .get(name)
                .or_else(|| environment.parameter_defaults.get(name))
                .or(schema.default.as_ref())
                .filter(|value| !value.is_null())?;
            Some((name.clone(), value.clone()))
        })
        .collect()
}

/// The parameters of the templates `template`'s resources are made from
/// (Heat's `NestedParameters`): a value is shown where the resource's
/// property gives one that is known without running anything (written
/// out, or a parameter of the template above whose value is known).
fn nested(
    template: &Template,
    environment: &Environment,
    files: &std::collections::BTreeMap<String, String>,
    values: &Map<String, Value>,
    depth: usize,
) -> Map<String, Value> {
    let mut found = Map::new();
    if depth >= MAX_NESTED_DEPTH {
        return found;
    }
    for (name, resource) in &template.resources {
        let Ok(ResolvedType::TemplateResource { file }) =
            environment.resolve_type(name, &resource.resource_type)
        else {
            continue;
        };
        let Some(child) = files.get(&file).and_then(|text| Template::parse(text).ok()) else {
            continue;
        };
        let properties = resource.properties.as_object();
        let given: Map<String, Value> = child
            .parameters
            .keys()
            .filter_map(|parameter| {
                let property = properties?.get(parameter)?;
                Some((parameter.clone(), known_value(property, values)?))
            })
            .collect();
        let mut entry = Map::new();
        entry.insert("Type".to_owned(), json!(resource.resource_type));
        entry.insert(
            "Description".to_owned(),
            json!(child.description.clone().unwrap_or_default()),
        );
        entry.insert(
            "Parameters".to_owned(),
            Value::Object(
                child
                    .parameters
                    .iter()
                    .map(|(parameter, schema)| {
                        (
                            parameter.clone(),
                            describe(parameter, schema, given.get(parameter)),
                        )
                    })
                    .collect(),
            ),
        );
        let child_groups = groups(&child);
        if !child_groups.is_empty() {
            entry.insert("ParameterGroups".to_owned(), Value::Array(child_groups));
        }
        let child_values = effective_values(&child, &Environment::default(), &given);
        let deeper = nested(&child, environment, files, &child_values, depth + 1);
        if !deeper.is_empty() {
            entry.insert("NestedParameters".to_owned(), Value::Object(deeper));
        }
        found.insert(name.clone(), Value::Object(entry));
    }
    found
}

/// A property's value when it is written out or is `get_param` of a
/// parameter whose value is known; `None` for anything computed.
fn known_value(property: &Value, values: &Map<String, Value>) -> Option<Value> {
    match property {
        Value::Object(call) if call.len() == 1 => match call.get("get_param") {
            Some(Value::String(parameter)) => values.get(parameter).cloned(),
            _ => None,
        },
        Value::Object(_) => None,
        Value::Array(items) => items
            .iter()
            .map(|item| known_value(item, values))
            .collect::<Option<Vec<Value>>>()
            .map(Value::Array),
        other => Some(other.clone()),
    }
}

/// The environment as Heat's validate shows it: the four sections always
/// there, the caller's parameters in `parameters`, and each template file
/// the template names as a type registered as itself (as Heat registers a
/// template resource).
fn environment_view(
    merged: &Value,
    environment: &Environment,
    given: &Map<String, Value>,
    template: &Template,
) -> Value {
    let section = |name: &str| merged.get(name).cloned();
    let mut registry = match section("resource_registry") {
        Some(Value::Object(registry)) => registry,
        _ => Map::new(),
    };
    for (name, resource) in &template.resources {
        let type_name = &resource.resource_type;
        let is_file = matches!(
            environment.resolve_type(name, type_name),
            Ok(ResolvedType::TemplateResource { file }) if file == *type_name
        );
        if is_file && !registry.contains_key(type_name) {
            registry.insert(type_name.clone(), json!(type_name));
        }
    }
    registry
        .entry("resources")
        .or_insert_with(|| Value::Object(Map::new()));
    json!({
        "parameters": given,
        "parameter_defaults": section("parameter_defaults").unwrap_or_else(|| json!({})),
        "resource_registry": registry,
        "event_sinks": section("event_sinks").unwrap_or_else(|| json!([])),
    })
}

fn heat_parameter_type(parameter_type: ParameterType) -> &'static str {
    match parameter_type {
        ParameterType::String => "String",
        ParameterType::Number => "Number",
        ParameterType::Json => "Json",
        ParameterType::CommaDelimitedList => "CommaDelimitedList",
        ParameterType::Boolean => "Boolean",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(text: &str) -> Template {
        Template::parse(text).expect("template")
    }

    const NESTED: &str = "heat_template_version: 2014-10-16
description: the stack description
parameters:
  aparam: {type: number, default: 10, description: the param description}
resources:
  myres:
    type: OS::Heat::RandomString
    properties: {length: {get_param: aparam}}
";

    #[test]
    fn nested_templates_show_their_parameters_with_the_values_given_them() {
        let parent = template(
            "heat_template_version: 2014-10-16
parameters:
  pparam: {type: number, default: 5}
resources:
  nres:
    type: mynested.yaml
    properties: {aparam: {get_param: pparam}}
  plain: {type: OS::Heat::None}
",
        );
        let files =
            std::collections::BTreeMap::from([("mynested.yaml".to_owned(), NESTED.to_owned())]);
        let environment = Environment::default();
        let values = effective_values(&parent, &environment, &Map::new());
        let found = nested(&parent, &environment, &files, &values, 0);
        assert_eq!(
            Value::Object(found),
            json!({"nres": {
                "Type": "mynested.yaml",
                "Description": "the stack description",
                "Parameters": {"aparam": {
                    "Type": "Number", "Description": "the param description",
                    "Label": "aparam", "NoEcho": "false", "Default": 10, "Value": 5}}
            }})
        );
    }

    #[test]
    fn a_template_nesting_itself_stops() {
        let looping = template(
            "heat_template_version: 2014-10-16
resources:
  again: {type: self.yaml}
",
        );
        let files = std::collections::BTreeMap::from([(
            "self.yaml".to_owned(),
            "heat_template_version: 2014-10-16\nresources:\n  again: {type: self.yaml}\n"
                .to_owned(),
        )]);
        let found = nested(&looping, &Environment::default(), &files, &Map::new(), 0);
        let mut depth = 0;
        let mut level = &found;
        while let Some(Value::Object(deeper)) = level["again"].get("NestedParameters") {
            depth += 1;
            level = deeper;
        }
        assert_eq!(depth, MAX_NESTED_DEPTH - 1);
    }

    #[test]
    fn the_environment_has_heats_four_sections_and_the_template_files_used() {
        let parent = template(
            "heat_template_version: 2014-10-16
resources:
  nres: {type: mynested.yaml}
",
        );
        let given = Map::from_iter([("a".to_owned(), json!(5))]);
        assert_eq!(
            environment_view(
                &json!({"resource_registry": {"X::Y": "OS::Heat::None"}}),
                &Environment::default(),
                &given,
                &parent
            ),
            json!({
                "parameters": {"a": 5},
                "parameter_defaults": {},
                "resource_registry": {"X::Y": "OS::Heat::None", "mynested.yaml": "mynested.yaml", "resources": {}},
                "event_sinks": [],
            })
        );
    }
}
