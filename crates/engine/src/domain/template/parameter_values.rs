//! Turning declared parameters into the values a stack runs with:
//! precedence between user values, environment `parameters`,
//! `parameter_defaults` and template defaults, coercion and constraint
//! checks, pseudo parameters, and masking of hidden values.

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::{Map, Value};

use super::definition::Template;
use super::environment::Environment;
use super::error::{TemplateError, child_path};
use super::parameters::HIDDEN_VALUE_MASK;

/// Parameters every stack has, supplied by the engine.
pub const PSEUDO_PARAMETERS: [&str; 3] = ["OS::stack_name", "OS::stack_id", "OS::project_id"];

/// Where a parameter's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ParameterSource {
    User,
    Environment,
    EnvironmentDefault,
    TemplateDefault,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResolvedParameter {
    /// The coerced value templates see.
    pub value: Value,
    pub hidden: bool,
    pub source: ParameterSource,
}

/// The identity of the stack, exposed as the `OS::*` pseudo parameters.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct StackIdentity {
    pub stack_name: String,
    pub stack_id: String,
    pub project_id: String,
}

/// Every template parameter with its final value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResolvedParameters {
    values: IndexMap<String, ResolvedParameter>,
    stack: Option<StackIdentity>,
}

impl ResolvedParameters {
    /// Adds the pseudo parameters for the given stack.
    pub fn with_stack_identity(mut self, stack: StackIdentity) -> Self {
        self.stack = Some(stack);
        self
    }

    /// A parameter's value, including pseudo parameters; what
    /// `ResolveContext::parameter` should return.
    pub fn value(&self, name: &str) -> Option<Value> {
        if let Some(parameter) = self.values.get(name) {
            return Some(parameter.value.clone());
        }
        let stack = self.stack.as_ref()?;
        let text = match name {
            "OS::stack_name" => &stack.stack_name,
            "OS::stack_id" => &stack.stack_id,
            "OS::project_id" => &stack.project_id,
            _ => return None,
        };
        Some(Value::String(text.clone()))
    }

    pub fn get(&self, name: &str) -> Option<&ResolvedParameter> {
        self.values.get(name)
    }

    pub fn is_hidden(&self, name: &str) -> bool {
        self.values
            .get(name)
            .is_some_and(|parameter| parameter.hidden)
    }

    /// Template parameters in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &ResolvedParameter)> {
        self.values.iter()
    }

    /// Values safe to show to users: hidden ones replaced by `******`.
    pub fn display_values(&self) -> Map<String, Value> {
        self.values
            .iter()
            .map(|(name, parameter)| {
                let shown = if parameter.hidden {
                    Value::String(HIDDEN_VALUE_MASK.to_string())
                } else {
                    parameter.value.clone()
                };
                (name.clone(), shown)
            })
            .collect()
    }

    /// Plain values of the template parameters, for a `ResolveContext`.
    pub fn values(&self) -> IndexMap<String, Value> {
        self.values
            .iter()
            .map(|(name, parameter)| (name.clone(), parameter.value.clone()))
            .collect()
    }
}

/// Decides every parameter's value. Precedence: `user_values` over the
/// environment's `parameters` over its `parameter_defaults` over the
/// template default. Unknown user values are errors; unknown environment
/// entries are ignored because environments are shared between templates.
pub fn resolve_parameters(
    template: &Template,
    environment: &Environment,
    user_values: &Map<String, Value>,
) -> Result<ResolvedParameters, TemplateError> {
    for name in user_values.keys() {
        if !template.parameters.contains_key(name) {
            return Err(TemplateError::new(
                child_path("parameters", name),
                format!("unknown parameter '{name}': the template does not declare it"),
            ));
        }
    }
    let mut values = IndexMap::new();
    for (name, schema) in &template.parameters {
        let path = child_path("parameters", name);
        let (raw, source) = if let Some(value) = supplied(user_values, name) {
            (value, ParameterSource::User)
        } else if let Some(value) = supplied(&environment.parameters, name) {
            (value, ParameterSource::Environment)
        } else if let Some(value) = supplied(&environment.parameter_defaults, name) {
            (value, ParameterSource::EnvironmentDefault)
        } else if let Some(value) = &schema.default {
            (value, ParameterSource::TemplateDefault)
        } else {
            return Err(TemplateError::new(
                path,
                format!(
                    "parameter '{name}' needs a value: it has no default and none was supplied"
                ),
            ));
        };
        let value = schema
            .validate_value(raw)
            .map_err(|message| TemplateError::new(path, message))?;
        values.insert(
            name.clone(),
            ResolvedParameter {
                value,
                hidden: schema.hidden,
                source,
            },
        );
    }
    Ok(ResolvedParameters {
        values,
        stack: None,
    })
}

/// A supplied, non-null value for `name`; null means "not supplied".
fn supplied<'a>(source: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    source.get(name).filter(|value| !value.is_null())
}

impl Template {
    /// Names of `immutable` parameters whose value differs between the
    /// parameters a stack had and those of an update to this template.
    pub fn immutable_parameter_changes(
        &self,
        previous: &ResolvedParameters,
        next: &ResolvedParameters,
    ) -> Vec<String> {
        self.parameters
            .iter()
            .filter(|(_, schema)| schema.immutable)
            .filter(|(name, _)| match (previous.get(name), next.get(name)) {
                (Some(before), Some(after)) => before.value != after.value,
                _ => false,
            })
            .map(|(name, _)| name.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template() -> Template {
        Template::parse(
            "heat_template_version: 2018-08-31\nparameters:\n  flavor: {type: string, default: m1.small}\n  count: {type: number, default: 1, constraints: [{range: {min: 1, max: 5}}]}\n  password: {type: string, hidden: true, immutable: true}\n  zones: {type: comma_delimited_list, default: 'a,b'}\n  debug: {type: boolean, default: 'off'}\n  extra: {type: json, default: {k: v}}\n",
        )
        .unwrap()
    }

    fn user(values: Value) -> Map<String, Value> {
        match values {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn applies_precedence_and_coercion() {
        let environment = Environment::parse(
            "parameters: {flavor: m1.large, count: '2', unrelated: 1}\nparameter_defaults: {flavor: m1.tiny, count: 4, zones: [x]}\n",
        )
        .unwrap();
        let resolved = resolve_parameters(
            &template(),
            &environment,
            &user(json!({"password": "s3cret", "count": "3"})),
        )
        .unwrap();
        assert_eq!(resolved.value("flavor"), Some(json!("m1.large")));
        assert_eq!(
            resolved.get("flavor").map(|p| p.source),
            Some(ParameterSource::Environment)
        );
        assert_eq!(resolved.value("count"), Some(json!(3)));
        assert_eq!(
            resolved.get("count").map(|p| p.source),
            Some(ParameterSource::User)
        );
        assert_eq!(resolved.value("zones"), Some(json!(["x"])));
        assert_eq!(
            resolved.get("zones").map(|p| p.source),
            Some(ParameterSource::EnvironmentDefault)
        );
        assert_eq!(resolved.value("debug"), Some(json!(false)));
        assert_eq!(resolved.value("extra"), Some(json!({"k": "v"})));
        assert_eq!(
            resolved.get("extra").map(|p| p.source),
            Some(ParameterSource::TemplateDefault)
        );
    }

    #[test]
    fn reports_missing_unknown_and_invalid_values() {
        let error =
            resolve_parameters(&template(), &Environment::default(), &Map::new()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "parameters.password: parameter 'password' needs a value: it has no default and none was supplied"
        );
        let error = resolve_parameters(
            &template(),
            &Environment::default(),
            &user(json!({"password": "x", "flavour": "y"})),
        )
        .unwrap_err();
        assert_eq!(error.path, "parameters.flavour");
        assert!(error.message.starts_with("unknown parameter 'flavour'"));
        let error = resolve_parameters(
            &template(),
            &Environment::default(),
            &user(json!({"password": "x", "count": 9})),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "parameters.count: value 9 is out of range (min 1, max 5)"
        );
        let error = resolve_parameters(
            &template(),
            &Environment::default(),
            &user(json!({"password": "x", "count": "many"})),
        )
        .unwrap_err();
        assert_eq!(error.message, "value \"many\" is not a number");
    }

    #[test]
    fn null_user_values_fall_back() {
        let resolved = resolve_parameters(
            &template(),
            &Environment::default(),
            &user(json!({"password": "x", "flavor": null})),
        )
        .unwrap();
        assert_eq!(resolved.value("flavor"), Some(json!("m1.small")));
    }

    #[test]
    fn hidden_values_are_masked_for_display() {
        let resolved = resolve_parameters(
            &template(),
            &Environment::default(),
            &user(json!({"password": "s3cret"})),
        )
        .unwrap();
        assert!(resolved.is_hidden("password"));
        assert!(!resolved.is_hidden("flavor"));
        let shown = resolved.display_values();
        assert_eq!(shown["password"], json!("******"));
        assert_eq!(shown["flavor"], json!("m1.small"));
        assert_eq!(resolved.values()["password"], json!("s3cret"));
    }

    #[test]
    fn pseudo_parameters_come_from_the_stack_identity() {
        let resolved = resolve_parameters(
            &template(),
            &Environment::default(),
            &user(json!({"password": "x"})),
        )
        .unwrap()
        .with_stack_identity(StackIdentity {
            stack_name: "demo".into(),
            stack_id: "id-1".into(),
            project_id: "p-1".into(),
        });
        assert_eq!(resolved.value("OS::stack_name"), Some(json!("demo")));
        assert_eq!(resolved.value("OS::stack_id"), Some(json!("id-1")));
        assert_eq!(resolved.value("OS::project_id"), Some(json!("p-1")));
        assert_eq!(resolved.value("OS::region"), None);
        assert_eq!(resolved.iter().count(), 6);
    }

    #[test]
    fn immutable_changes_are_listed() {
        let template = template();
        let before = resolve_parameters(
            &template,
            &Environment::default(),
            &user(json!({"password": "a"})),
        )
        .unwrap();
        let after = resolve_parameters(
            &template,
            &Environment::default(),
            &user(json!({"password": "b", "count": 2})),
        )
        .unwrap();
        assert_eq!(
            template.immutable_parameter_changes(&before, &after),
            vec!["password"]
        );
        assert!(
            template
                .immutable_parameter_changes(&before, &before)
                .is_empty()
        );
    }
}
