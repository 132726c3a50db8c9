//! The HOT template language of Ember, compatible with OpenStack Heat:
//! parsing templates and environments, parameters and their constraints,
//! intrinsic functions, conditions and dependency analysis. Pure code: no
//! I/O, no async.
//!
//! Typical use: `Template::parse` → `Template::validate_references` →
//! `resolve_parameters` → `evaluate_conditions` → `resolve` each resource's
//! properties with a `ResolveContext` while walking
//! `Template::dependency_graph_for(enabled).levels()`.

mod cfn;
mod conditions;
mod constraint_parsing;
mod constraints;
mod definition;
mod document;
mod environment;
mod error;
mod functions;
mod graph;
mod parameter_values;
mod parameters;
mod python_compat;
mod resource_definition;
mod resource_registry;
mod version;
mod walk;

pub use cfn::{CFN_VERSIONS, cfn_functions};
pub use conditions::evaluate_conditions;
pub use constraints::{ConstraintRule, ParameterConstraint};
pub use definition::{ParameterGroup, Template};
pub use document::{MAX_DOCUMENT_BYTES, parse_document};
pub use environment::Environment;
pub use error::TemplateError;
pub use functions::{
    ResolveContext, StaticResolveContext, resolve, resolve_condition, select_attribute_path,
};
pub use graph::DependencyGraph;
pub use parameter_values::{
    PSEUDO_PARAMETERS, ParameterSource, ResolvedParameter, ResolvedParameters, StackIdentity,
    resolve_parameters,
};
pub use parameters::{HIDDEN_VALUE_MASK, ParameterSchema, ParameterType, coerce_parameter_value};
pub use resource_definition::{
    DeletionPolicy, DeletionPolicySetting, OutputDefinition, ResourceDefinition,
};
pub use resource_registry::{ResolvedType, ResourceOverrides, ResourceRegistry, child_environment};
pub use version::{TemplateVersion, function_versions, template_functions};

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::{Map, Value, json};

    use super::*;

    const STACK: &str = r#"
heat_template_version: 2021-04-16
description: a web tier
parameters:
  env: {type: string, default: dev, constraints: [{allowed_values: [dev, prod]}]}
  replicas: {type: number, default: 2, constraints: [{range: {min: 1, max: 4}}]}
  db_password: {type: string, hidden: true}
conditions:
  is_prod: {equals: [{get_param: env}, prod]}
  not_prod: {not: is_prod}
resources:
  net:
    type: My::Net
  servers:
    type: OS::Heat::ResourceGroup
    properties:
      count: {get_param: replicas}
      name: {list_join: ['-', [{get_param: OS::stack_name}, web]]}
      network: {get_resource: net}
      monitoring: {if: [is_prod, {get_resource: monitor}]}
  monitor:
    type: OS::Monitor
    condition: is_prod
    depends_on: net
outputs:
  url:
    value: {str_replace: {template: 'http://host/', params: {host: {get_attr: [servers, ip]}}}}
  monitor_id:
    value: {get_resource: monitor}
    condition: is_prod
"#;

    struct Engine {
        parameters: ResolvedParameters,
        conditions: indexmap::IndexMap<String, bool>,
    }

    impl ResolveContext for Engine {
        fn parameter(&self, name: &str) -> Option<Value> {
            self.parameters.value(name)
        }
        fn resource_reference(&self, name: &str) -> Result<Value, String> {
            Ok(json!(format!("{name}-id")))
        }
        fn resource_attribute(
            &self,
            name: &str,
            attribute: &str,
            _path: &[Value],
        ) -> Result<Value, String> {
            Ok(json!(format!("{name}.{attribute}")))
        }
        fn file(&self, _name: &str) -> Option<String> {
            None
        }
        fn condition(&self, name: &str) -> Option<bool> {
            self.conditions.get(name).copied()
        }
        fn template_version(&self) -> TemplateVersion {
            TemplateVersion::V2021_04_16
        }
    }

    #[test]
    fn a_stack_goes_from_text_to_resolved_properties() {
        let template = Template::parse(STACK).unwrap();
        template.validate_references().unwrap();
        let environment =
            Environment::parse("resource_registry: {My::Net: OS::Neutron::Net}").unwrap();
        let mut user = Map::new();
        user.insert("db_password".into(), json!("secret"));
        let parameters = resolve_parameters(&template, &environment, &user)
            .unwrap()
            .with_stack_identity(StackIdentity {
                stack_name: "shop".into(),
                stack_id: "1".into(),
                project_id: "p".into(),
            });
        assert_eq!(parameters.display_values()["db_password"], json!("******"));
        let mut engine = Engine {
            parameters,
            conditions: Default::default(),
        };
        engine.conditions = evaluate_conditions(&template, &engine).unwrap();
        assert!(!engine.conditions["is_prod"]);

        let enabled = template.enabled_resources(&engine).unwrap();
        assert_eq!(
            enabled,
            BTreeSet::from(["net".to_string(), "servers".to_string()])
        );
        let levels = template.dependency_graph_for(&enabled).levels().unwrap();
        assert_eq!(levels, vec![vec!["net"], vec!["servers"]]);
        assert_eq!(
            environment
                .resolve_type("net", &template.resources["net"].resource_type)
                .unwrap(),
            ResolvedType::Builtin("OS::Neutron::Net".into())
        );

        let properties = resolve(
            &template.resources["servers"].properties,
            &engine,
            "resources.servers.properties",
        )
        .unwrap();
        assert_eq!(
            properties,
            json!({"count": 2, "name": "shop-web", "network": "net-id"})
        );
        assert_eq!(template.enabled_outputs(&engine).unwrap(), vec!["url"]);
        let url = resolve(&template.outputs["url"].value, &engine, "outputs.url.value").unwrap();
        assert_eq!(url, json!("http://servers.ip/"));
    }

    /// A small deterministic generator, so the robustness test needs no
    /// extra dependency and always explores the same inputs.
    struct Generator(u64);

    impl Generator {
        fn next(&mut self, bound: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % bound.max(1)
        }

        fn value(&mut self, depth: u32) -> Value {
            const KEYS: [&str; 30] = [
                "get_param",
                "get_resource",
                "get_attr",
                "get_file",
                "str_replace",
                "str_replace_strict",
                "str_replace_vstrict",
                "list_join",
                "str_split",
                "repeat",
                "map_merge",
                "map_replace",
                "digest",
                "if",
                "equals",
                "not",
                "and",
                "or",
                "contains",
                "list_concat",
                "list_concat_unique",
                "filter",
                "make_url",
                "yaql",
                "template",
                "params",
                "for_each",
                "permutations",
                "keys",
                "values",
            ];
            const STRINGS: [&str; 8] = ["name", "zones", "prod", "%x%", "", ",", "md5", "server"];
            let choice = if depth == 0 {
                self.next(4)
            } else {
                self.next(7)
            };
            match choice {
                0 => Value::Null,
                1 => json!(self.next(5) as i64 - 2),
                2 => json!(STRINGS[self.next(STRINGS.len() as u64) as usize]),
                3 => json!(self.next(2) == 0),
                4 | 5 => {
                    let key = KEYS[self.next(KEYS.len() as u64) as usize];
                    let mut map = Map::new();
                    map.insert(key.to_string(), self.value(depth - 1));
                    if self.next(3) == 0 {
                        let other = KEYS[self.next(KEYS.len() as u64) as usize];
                        map.insert(other.to_string(), self.value(depth - 1));
                    }
                    Value::Object(map)
                }
                _ => Value::Array((0..self.next(4)).map(|_| self.value(depth - 1)).collect()),
            }
        }
    }

    #[test]
    fn random_text_never_panics() {
        const ALPHABET: &[u8] = b"{}[]:,-\n 'a\"&*!|>%@#?0.~";
        let mut generator = Generator(11);
        for _ in 0..5_000 {
            let length = generator.next(60) as usize;
            let text: String = (0..length)
                .map(|_| char::from(ALPHABET[generator.next(ALPHABET.len() as u64) as usize]))
                .collect();
            let _ = Template::parse(&format!("heat_template_version: pike\n{text}"));
            let _ = Environment::parse(&text);
        }
    }

    #[test]
    fn random_snippets_never_panic() {
        let mut context = StaticResolveContext::default();
        context.parameters.insert("name".into(), json!("web"));
        context.parameters.insert("zones".into(), json!(["a", "b"]));
        context
            .resource_references
            .insert("server".into(), json!("id"));
        context.conditions.insert("prod".into(), true);
        let mut generator = Generator(7);
        for round in 0..20_000 {
            let snippet = generator.value(6);
            let _ = resolve(&snippet, &context, "p");
            let _ = resolve_condition(&snippet, &context, "c");
            if round % 10 == 0 {
                let document = json!({"heat_template_version": "2021-04-16", "resources": {"r": {"type": "X", "properties": {"p": snippet.clone()}}}, "outputs": {"o": {"value": snippet}}});
                if let Ok(template) = Template::from_value(document) {
                    let _ = template.validate_references();
                    let _ = template.topological_levels();
                }
            }
        }
    }
}
