//! Evaluation of the `conditions` section (lazily, in any order, with
//! cycle detection) and of the `condition` keys that switch resources and
//! outputs on or off.

use std::cell::RefCell;
use std::collections::BTreeSet;

use indexmap::IndexMap;
use serde_json::Value;

use super::definition::Template;
use super::error::{TemplateError, child_path};
use super::functions::{ResolveContext, Resolver};

/// Evaluates every condition of the template. `context` supplies
/// parameters; its own `condition` answers are not consulted.
pub fn evaluate_conditions(
    template: &Template,
    context: &dyn ResolveContext,
) -> Result<IndexMap<String, bool>, TemplateError> {
    let evaluator = ConditionEvaluator {
        template,
        context,
        resolved: RefCell::new(IndexMap::new()),
        in_progress: RefCell::new(Vec::new()),
    };
    let mut results = IndexMap::new();
    for name in template.conditions.keys() {
        let path = child_path("conditions", name);
        results.insert(name.clone(), evaluator.evaluate(name, &path, 0)?);
    }
    Ok(results)
}

/// Conditions may refer to conditions this many levels deep; this keeps
/// the evaluation's recursion well inside the stack.
const MAX_CONDITION_CHAIN: usize = 64;

struct ConditionEvaluator<'a> {
    template: &'a Template,
    context: &'a dyn ResolveContext,
    resolved: RefCell<IndexMap<String, bool>>,
    /// Conditions being evaluated, outermost first, to report cycles.
    in_progress: RefCell<Vec<String>>,
}

impl ConditionEvaluator<'_> {
    fn evaluate(
        &self,
        name: &str,
        reference_path: &str,
        depth: usize,
    ) -> Result<bool, TemplateError> {
        if let Some(known) = self.resolved.borrow().get(name) {
            return Ok(*known);
        }
        let cycle_start = self
            .in_progress
            .borrow()
            .iter()
            .position(|entry| entry == name);
        if let Some(start) = cycle_start {
            let mut cycle: Vec<String> = self.in_progress.borrow()[start..].to_vec();
            cycle.push(name.to_string());
            return Err(TemplateError::new(
                child_path("conditions", name),
                format!(
                    "conditions refer to each other in a cycle: {}",
                    cycle.join(" -> ")
                ),
            ));
        }
        if self.in_progress.borrow().len() >= MAX_CONDITION_CHAIN {
            return Err(TemplateError::new(
                reference_path,
                format!(
                    "conditions refer to each other more than {MAX_CONDITION_CHAIN} levels deep"
                ),
            ));
        }
        let Some(definition) = self.template.conditions.get(name) else {
            return Err(TemplateError::new(
                reference_path,
                format!("unknown condition '{name}'"),
            ));
        };
        self.in_progress.borrow_mut().push(name.to_string());
        let lookup = |other: &str, path: &str, current_depth: usize| {
            self.evaluate(other, path, current_depth)
        };
        let resolver = Resolver::with_version(self.context, &lookup, depth, self.template.version);
        let result = resolver.condition_definition(definition, &child_path("conditions", name));
        self.in_progress.borrow_mut().pop();
        let result = result?;
        self.resolved.borrow_mut().insert(name.to_string(), result);
        Ok(result)
    }
}

impl Template {
    /// Whether a resource is enabled. Named conditions come from
    /// `context.condition`, normally filled from `evaluate_conditions`.
    pub fn resource_enabled(
        &self,
        name: &str,
        context: &dyn ResolveContext,
    ) -> Result<bool, TemplateError> {
        let Some(resource) = self.resources.get(name) else {
            return Err(TemplateError::new(
                child_path("resources", name),
                format!("unknown resource '{name}'"),
            ));
        };
        let path = child_path(&child_path("resources", name), "condition");
        self.condition_enabled(resource.condition.as_ref(), context, &path)
    }

    /// The names of all enabled resources.
    pub fn enabled_resources(
        &self,
        context: &dyn ResolveContext,
    ) -> Result<BTreeSet<String>, TemplateError> {
        let mut enabled = BTreeSet::new();
        for name in self.resources.keys() {
            if self.resource_enabled(name, context)? {
                enabled.insert(name.clone());
            }
        }
        Ok(enabled)
    }

    /// The names of all enabled outputs, in template order.
    pub fn enabled_outputs(
        &self,
        context: &dyn ResolveContext,
    ) -> Result<Vec<String>, TemplateError> {
        let mut enabled = Vec::new();
        for (name, output) in &self.outputs {
            let path = child_path(&child_path("outputs", name), "condition");
            if self.condition_enabled(output.condition.as_ref(), context, &path)? {
                enabled.push(name.clone());
            }
        }
        Ok(enabled)
    }

    fn condition_enabled(
        &self,
        condition: Option<&Value>,
        context: &dyn ResolveContext,
        path: &str,
    ) -> Result<bool, TemplateError> {
        let Some(condition) = condition else {
            return Ok(true);
        };
        let lookup = |name: &str, reference_path: &str, _depth: usize| {
            context.condition(name).ok_or_else(|| {
                TemplateError::new(reference_path, format!("unknown condition '{name}'"))
            })
        };
        Resolver::with_version(context, &lookup, 0, self.version).condition(condition, path)
    }
}

#[cfg(test)]
mod tests {
    use super::super::StaticResolveContext;
    use super::*;
    use serde_json::json;

    fn template(conditions: &str) -> Template {
        Template::parse(&format!(
            "heat_template_version: 2021-04-16\nparameters:\n  env: {{type: string, default: prod}}\n  big: {{type: boolean, default: false}}\nconditions:\n{conditions}"
        ))
        .unwrap()
    }

    fn context() -> StaticResolveContext {
        let mut context = StaticResolveContext::default();
        context.parameters.insert("env".into(), json!("prod"));
        context.parameters.insert("big".into(), json!(false));
        context
    }

    #[test]
    fn evaluates_conditions_referring_to_each_other_in_any_order() {
        let template = template(
            "  not_prod: {not: is_prod}\n  is_prod: {equals: [{get_param: env}, prod]}\n  both: {and: [is_prod, {get_param: big}]}\n  either: {or: [both, is_prod]}\n  always: true\n  listed: {contains: [{get_param: env}, [dev, prod]]}\n",
        );
        let results = evaluate_conditions(&template, &context()).unwrap();
        assert_eq!(
            results.into_iter().collect::<Vec<_>>(),
            vec![
                ("not_prod".to_string(), false),
                ("is_prod".to_string(), true),
                ("both".to_string(), false),
                ("either".to_string(), true),
                ("always".to_string(), true),
                ("listed".to_string(), true),
            ]
        );
    }

    #[test]
    fn detects_cycles_and_names_them() {
        let template = template("  a: {not: b}\n  b: {and: [true, c]}\n  c: {or: [false, a]}\n");
        let error = evaluate_conditions(&template, &context()).unwrap_err();
        assert_eq!(error.path, "conditions.a");
        assert_eq!(
            error.message,
            "conditions refer to each other in a cycle: a -> b -> c -> a"
        );
        let template = self::template("  a: {not: a}\n");
        assert!(
            evaluate_conditions(&template, &context())
                .unwrap_err()
                .message
                .contains("a -> a")
        );
    }

    #[test]
    fn reports_unknown_conditions_and_non_boolean_definitions() {
        let error = evaluate_conditions(&template("  a: {not: ghost}\n"), &context()).unwrap_err();
        assert_eq!(error.path, "conditions.a.not");
        assert_eq!(error.message, "unknown condition 'ghost'");
        let error =
            evaluate_conditions(&template("  a: {get_param: env}\n"), &context()).unwrap_err();
        assert_eq!(error.path, "conditions.a");
        assert!(
            error
                .message
                .contains("must evaluate to true or false, found \"prod\"")
        );
    }

    #[test]
    fn long_condition_chains_are_refused_not_overflowed() {
        let mut conditions = String::new();
        for index in 0..3000 {
            conditions.push_str(&format!("  c{index}: {{not: c{}}}\n", index + 1));
        }
        conditions.push_str("  c3000: true\n");
        let error = evaluate_conditions(&template(&conditions), &context()).unwrap_err();
        assert!(error.message.contains("levels deep"), "{error}");
    }

    #[test]
    fn resources_and_outputs_follow_their_conditions() {
        let template = Template::parse(
            "heat_template_version: 2021-04-16\nconditions:\n  prod: true\n  dev: false\nresources:\n  a: {type: X, condition: prod}\n  b: {type: X, condition: dev}\n  c: {type: X, condition: {not: dev}}\n  d: {type: X}\n  e: {type: X, condition: false}\noutputs:\n  o1: {value: 1, condition: dev}\n  o2: {value: 2}\n",
        )
        .unwrap();
        let mut context = StaticResolveContext::default();
        context.conditions = evaluate_conditions(&template, &context).unwrap();
        let enabled: Vec<String> = template
            .enabled_resources(&context)
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(enabled, vec!["a", "c", "d"]);
        assert_eq!(template.enabled_outputs(&context).unwrap(), vec!["o2"]);
        let error = template.resource_enabled("zzz", &context).unwrap_err();
        assert_eq!(error.message, "unknown resource 'zzz'");
    }
}
