//! From a request to a runnable stack: parse the template and environments,
//! resolve parameters, evaluate conditions, find each resource's type and
//! the dependency graph. Every problem is a [`TemplateError`] naming the
//! template path, reported before anything is recorded.

use std::collections::{BTreeMap, BTreeSet};

use indexmap::IndexMap;
use serde_json::{Map, Value};

use crate::domain::StackDefinition;
use crate::domain::template::{
    DependencyGraph, Environment, ResolvedParameters, ResolvedType, StackIdentity,
    StaticResolveContext, Template, TemplateError, evaluate_conditions, parse_document,
    resolve_parameters,
};
use crate::resources::ResourceTypeRegistry;

/// A stack's template, environment and parameters, checked and resolved.
#[derive(Debug)]
pub struct ParsedStack {
    pub template: Template,
    pub environment: Environment,
    pub parameters: ResolvedParameters,
    pub conditions: IndexMap<String, bool>,
    /// Resources whose condition holds, in template order.
    pub enabled: Vec<String>,
    pub graph: DependencyGraph,
    pub files: BTreeMap<String, String>,
    /// Resource name → the built-in type that implements it.
    pub resource_types: BTreeMap<String, String>,
}

impl ParsedStack {
    /// What resolves before anything exists: its parameters, conditions
    /// and `definition`'s files (a property that needs a resource does
    /// not resolve).
    pub(crate) fn static_context(&self, definition: &StackDefinition) -> StaticResolveContext {
        let mut context = StaticResolveContext::new(self.template.version);
        context.parameters = self.parameters.values();
        context.files = definition
            .files
            .iter()
            .map(|(name, text)| (name.clone(), text.clone()))
            .collect();
        context.conditions = self.conditions.clone();
        context
    }
}

impl ParsedStack {
    pub fn build(
        definition: &StackDefinition,
        identity: StackIdentity,
        registry: &ResourceTypeRegistry,
    ) -> Result<ParsedStack, TemplateError> {
        let template = Template::from_value(definition.template.clone())?;
        let environment = Environment::from_value(definition.environment.clone())?;
        template.validate_references()?;
        let parameters = resolve_parameters(&template, &environment, &definition.parameters)?
            .with_stack_identity(identity);
        let mut context = StaticResolveContext {
            version: template.version,
            parameters: parameters.values(),
            resource_references: IndexMap::new(),
            resource_attributes: IndexMap::new(),
            files: definition
                .files
                .iter()
                .map(|(name, text)| (name.clone(), text.clone()))
                .collect(),
            conditions: IndexMap::new(),
        };
        let conditions = evaluate_conditions(&template, &context)?;
        context.conditions = conditions.clone();
        let enabled_set: BTreeSet<String> = template.enabled_resources(&context)?;
        let enabled: Vec<String> = template
            .resources
            .keys()
            .filter(|name| enabled_set.contains(*name))
            .cloned()
            .collect();
        let graph = template.dependency_graph_for(&enabled_set);
        graph.levels()?;

        let mut resource_types = BTreeMap::new();
        for name in &enabled {
            let Some(resource_definition) = template.resources.get(name) else {
                continue;
            };
            let (type_name, resource_type) = resolve_resource_type(
                definition,
                &environment,
                registry,
                name,
                resource_definition,
            )?;
            check_property_names(
                resource_type.schema(),
                &resource_definition.properties,
                name,
            )?;
            check_refused_properties(
                resource_type.as_ref(),
                &resource_definition.properties,
                name,
            )?;
            resource_types.insert(name.clone(), type_name);
        }
        Ok(ParsedStack {
            template,
            environment,
            parameters,
            conditions,
            enabled,
            graph,
            files: definition.files.clone(),
            resource_types,
        })
    }
}

impl ParsedStack {
    /// Checks that every resource of the template names a type this
    /// engine offers (a template resource: a file sent with it), without
    /// parameter values: what validate still checks when some parameter
    /// has none, as Heat's does.
    pub fn check_resource_types(
        definition: &StackDefinition,
        template: &Template,
        environment: &Environment,
        registry: &ResourceTypeRegistry,
    ) -> Result<(), TemplateError> {
        for (name, resource_definition) in &template.resources {
            resolve_resource_type(definition, environment, registry, name, resource_definition)?;
        }
        Ok(())
    }
}

/// The type resource `name` is made with (the environment's mapping
/// applied): its name and the registry's implementation, or why it is not
/// offered.
fn resolve_resource_type<'r>(
    definition: &StackDefinition,
    environment: &Environment,
    registry: &'r ResourceTypeRegistry,
    name: &str,
    resource_definition: &crate::domain::template::ResourceDefinition,
) -> Result<
    (
        String,
        &'r std::sync::Arc<dyn crate::resources::ResourceType>,
    ),
    TemplateError,
> {
    let path = format!("resources.{name}.type");
    let type_name = match environment.resolve_type(name, &resource_definition.resource_type)? {
        ResolvedType::Builtin(type_name) => type_name,
        ResolvedType::TemplateResource { file } => {
            let Some(text) = definition.files.get(&file) else {
                return Err(TemplateError::new(
                    path,
                    format!("template file {file:?} is not among the files sent with the stack"),
                ));
            };
            check_template_resource_properties(text, &file, &resource_definition.properties, name)?;
            file
        }
    };
    let Some(resource_type) = registry.get(&type_name) else {
        if let Some(why) = registry.why_not_offered(&type_name) {
            return Err(TemplateError::new(
                path,
                format!("{type_name} is not offered here: {why}"),
            ));
        }
        return Err(TemplateError::new(
            path,
            format!(
                "unknown resource type {:?}: GET /resource_types lists the available ones",
                ember_runtime::quote::quoted(&type_name)
            ),
        ));
    };
    Ok((type_name, resource_type))
}

/// Refuses what the type cannot honour on this backend among the
/// properties written as values (those a function gives are checked when
/// the resource is made).
fn check_refused_properties(
    resource_type: &dyn crate::resources::ResourceType,
    properties: &Value,
    resource_name: &str,
) -> Result<(), TemplateError> {
    let Value::Object(given) = properties else {
        return Ok(());
    };
    let written: serde_json::Map<String, Value> = given
        .iter()
        .filter(|(_, value)| !is_function_call(value))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    resource_type
        .refuse_unhonoured(&written)
        .map_err(|message| {
            TemplateError::new(format!("resources.{resource_name}.properties"), message)
        })
}

/// Whether `value` is a function call (`{get_param: …}`), resolved later.
fn is_function_call(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            map.len() == 1 && map.keys().next().is_some_and(|key| is_function_name(key))
        }
        _ => false,
    }
}

/// A template resource's properties are the nested template's parameters:
/// every given one must be declared there.
fn check_template_resource_properties(
    nested_text: &str,
    file: &str,
    properties: &Value,
    resource_name: &str,
) -> Result<(), TemplateError> {
    let nested = Template::parse(nested_text).map_err(|error| {
        TemplateError::new(
            format!("resources.{resource_name}.type"),
            format!("{file}: {error}"),
        )
    })?;
    let Value::Object(given) = properties else {
        return Ok(());
    };
    if let Some(unknown) = given
        .keys()
        .find(|key| !nested.parameters.contains_key(*key))
    {
        let declared: Vec<&str> = nested.parameters.keys().map(String::as_str).collect();
        return Err(TemplateError::new(
            format!("resources.{resource_name}.properties"),
            format!(
                "unknown property {unknown:?}: the template {file:?} declares the parameters {}",
                if declared.is_empty() {
                    "(none)".to_owned()
                } else {
                    declared.join(", ")
                }
            ),
        ));
    }
    Ok(())
}

/// Before anything runs: no unknown property names, no required property
/// missing (values are checked once functions resolve).
fn check_property_names(
    schema: &crate::resources::ResourceTypeSchema,
    properties: &Value,
    resource_name: &str,
) -> Result<(), TemplateError> {
    if schema.accepts_any_properties {
        return Ok(());
    }
    let path = format!("resources.{resource_name}.properties");
    let Value::Object(given) = properties else {
        // A function producing the map: checked at run time.
        return Ok(());
    };
    if given.len() == 1 && given.keys().next().is_some_and(|key| is_function_name(key)) {
        return Ok(());
    }
    let given = &crate::resources::translate_aliases(schema, given.clone())
        .map_err(|message| TemplateError::new(path.clone(), message))?;
    for key in given.keys() {
        if schema.property(key).is_none() {
            let known: Vec<&str> = schema
                .properties
                .iter()
                .map(|property| property.name)
                .collect();
            return Err(TemplateError::new(
                path,
                format!(
                    "unknown property {key:?} for {} (known: {})",
                    schema.type_name,
                    known.join(", ")
                ),
            ));
        }
    }
    for property in &schema.properties {
        if property.required && property.default.is_none() && !given.contains_key(property.name) {
            return Err(TemplateError::new(
                format!("{path}.{}", property.name),
                "property is required".to_owned(),
            ));
        }
        // A value written out (no function in it) is checked now, as Heat
        // validates a stack before creating it.
        if let Some(value) = given.get(property.name)
            && !contains_function(value)
        {
            crate::resources::check_literal_property(property, value).map_err(|message| {
                TemplateError::new(format!("{path}.{}", property.name), message)
            })?;
        }
    }
    Ok(())
}

/// Whether a value holds an intrinsic function anywhere (its value is
/// known only once the function resolves).
fn contains_function(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            (map.len() == 1
                && map.keys().next().is_some_and(|key| {
                    is_function_name(key)
                        || key.starts_with("Fn::")
                        || key == "Ref"
                        || crate::domain::template::function_versions()
                            .iter()
                            .any(|(name, _, _)| name == key)
                }))
                || map.values().any(contains_function)
        }
        Value::Array(items) => items.iter().any(contains_function),
        _ => false,
    }
}

fn is_function_name(key: &str) -> bool {
    key.starts_with("get_") || matches!(key, "if" | "map_merge" | "map_replace" | "yaql" | "repeat")
}

/// The request's pieces, parsed into what the stack keeps.
pub struct DefinitionInput<'a> {
    pub template: &'a str,
    pub environment: &'a str,
    pub environment_files: &'a [String],
    pub files: BTreeMap<String, String>,
    pub parameters: Map<String, Value>,
}

pub fn definition_from_input(input: DefinitionInput<'_>) -> Result<StackDefinition, TemplateError> {
    if input.template.trim().is_empty() {
        return Err(TemplateError::new(
            "template",
            "a template is required".to_owned(),
        ));
    }
    let template = Value::Object(parse_document(input.template, "template")?);
    let mut documents = Vec::new();
    if !input.environment.trim().is_empty() {
        documents.push(Value::Object(parse_document(
            input.environment,
            "environment",
        )?));
    }
    for name in input.environment_files {
        let text = input.files.get(name).ok_or_else(|| {
            TemplateError::new(
                "environment_files",
                format!("environment file {name:?} is not among the files sent with the request"),
            )
        })?;
        documents.push(Value::Object(parse_document(text, "environment")?));
    }
    let environment = merge_environment_documents(documents);
    // Parse once now so a malformed environment fails before anything runs.
    Environment::from_value(environment.clone())?;
    Ok(StackDefinition {
        template,
        environment,
        files: input.files,
        parameters: input.parameters,
    })
}

/// Merges environment documents in order, later winning key by key inside
/// each section (and per resource inside `resource_registry.resources`).
pub fn merge_environment_documents(documents: Vec<Value>) -> Value {
    let mut merged = Map::new();
    for document in documents {
        let Value::Object(sections) = document else {
            continue;
        };
        for (section, value) in sections {
            match (merged.get_mut(&section), value) {
                (Some(Value::Object(existing)), Value::Object(incoming)) => {
                    deep_merge(existing, incoming)
                }
                (_, value) => {
                    merged.insert(section, value);
                }
            }
        }
    }
    Value::Object(merged)
}

fn deep_merge(existing: &mut Map<String, Value>, incoming: Map<String, Value>) {
    for (key, value) in incoming {
        match (existing.get_mut(&key), value) {
            (Some(Value::Object(inner)), Value::Object(incoming_inner)) => {
                deep_merge(inner, incoming_inner)
            }
            (_, value) => {
                existing.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn identity() -> StackIdentity {
        StackIdentity {
            stack_name: "web".into(),
            stack_id: "00000000-0000-0000-0000-000000000001".into(),
            project_id: "demo".into(),
        }
    }

    fn parse(template: &str, parameters: Value) -> Result<ParsedStack, TemplateError> {
        let definition = definition_from_input(DefinitionInput {
            template,
            environment: "",
            environment_files: &[],
            files: BTreeMap::new(),
            parameters: parameters.as_object().cloned().unwrap_or_default(),
        })?;
        ParsedStack::build(&definition, identity(), &ResourceTypeRegistry::builtin())
    }

    #[test]
    fn a_valid_template_yields_types_graph_and_parameters() {
        let parsed = parse(
            "heat_template_version: 2018-08-31\nparameters:\n  n: {type: number, default: 3}\nresources:\n  a: {type: OS::Heat::None}\n  b:\n    type: OS::Heat::TestResource\n    properties: {value: {get_resource: a}}\n",
            json!({"n": "5"}),
        )
        .expect("valid");
        assert_eq!(parsed.enabled, ["a", "b"]);
        assert_eq!(parsed.resource_types["b"], "OS::Heat::TestResource");
        assert_eq!(parsed.parameters.value("n"), Some(json!(5)));
        assert_eq!(
            parsed.parameters.value("OS::stack_name"),
            Some(json!("web"))
        );
        assert!(
            parsed
                .graph
                .dependencies_of("b")
                .is_some_and(|deps| deps.contains("a"))
        );
    }

    #[test]
    fn problems_point_at_the_template_path() {
        let cases = [
            (
                "heat_template_version: 2018-08-31\nresources:\n  a: {type: OS::Nope}\n",
                "resources.a.type",
            ),
            (
                "heat_template_version: 2018-08-31\nresources:\n  a:\n    type: OS::Heat::TestResource\n    properties: {colour: red}\n",
                "resources.a.properties",
            ),
            (
                "heat_template_version: 2018-08-31\nresources:\n  a:\n    type: OS::Heat::Value\n",
                "resources.a.properties.value",
            ),
            (
                "heat_template_version: 2018-08-31\nresources:\n  a: {type: OS::Heat::None, depends_on: b}\n  b: {type: OS::Heat::None, depends_on: a}\n",
                "",
            ),
        ];
        for (template, path) in cases {
            let error = parse(template, json!({})).expect_err("invalid");
            assert!(
                error.to_string().starts_with(path),
                "{error} should start with {path}"
            );
        }
        let error = parse(
            "heat_template_version: 2018-08-31\nparameters:\n  n: {type: number}\nresources: {}\n",
            json!({}),
        )
        .expect_err("missing parameter");
        assert!(error.to_string().contains("n"), "{error}");
    }

    #[test]
    fn environments_merge_in_order() {
        let merged = merge_environment_documents(vec![
            json!({"parameters": {"a": 1, "b": 1}, "resource_registry": {"X": "OS::Heat::None"}}),
            json!({"parameters": {"b": 2}, "resource_registry": {"Y": "OS::Heat::Value"}}),
        ]);
        assert_eq!(merged["parameters"], json!({"a": 1, "b": 2}));
        assert_eq!(
            merged["resource_registry"],
            json!({"X": "OS::Heat::None", "Y": "OS::Heat::Value"})
        );
    }

    #[test]
    fn environment_files_must_be_sent() {
        let error = definition_from_input(DefinitionInput {
            template: "heat_template_version: 2018-08-31\n",
            environment: "",
            environment_files: &["env.yaml".to_owned()],
            files: BTreeMap::new(),
            parameters: Map::new(),
        })
        .expect_err("missing file");
        assert!(error.to_string().contains("env.yaml"), "{error}");
    }
}
