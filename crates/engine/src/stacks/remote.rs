//! `OS::Heat::Stack` with a `context`: Heat's remote stack. Ember has one
//! region, its catalog's (`gateway.region`): a context naming it is a
//! stack of this Ember's (a nested stack, readable by its id as Heat's
//! remote stack is), and one naming another region, or a remote template
//! that does not parse, refuses the whole request at once (400), in
//! Heat's words, as Heat's `RemoteStack.validate` does before anything is
//! made.

use serde_json::Value;

use super::ParsedStack;
use crate::domain::StackDefinition;
use crate::domain::template::{Template, parse_document, resolve};
use crate::error::{Error, Result};

/// Refuses the remote stacks of `parsed` (its own resources) that name a
/// region other than `region`, or whose template is not one.
pub(crate) fn check_remote_stacks(
    parsed: &ParsedStack,
    definition: &StackDefinition,
    region: &str,
) -> Result<()> {
    let context = parsed.static_context(definition);
    for name in &parsed.enabled {
        let Some(resource) = parsed.template.resources.get(name) else {
            continue;
        };
        if resource.resource_type != "OS::Heat::Stack" {
            continue;
        }
        let property = |key: &str| {
            resource.properties.get(key).and_then(|value| {
                resolve(
                    value,
                    &context,
                    &format!("resources.{name}.properties.{key}"),
                )
                .ok()
            })
        };
        let Some(Value::Object(remote)) = property("context") else {
            continue;
        };
        let asked = remote
            .get("region_name")
            .and_then(Value::as_str)
            .unwrap_or(region);
        if asked != region {
            return Err(Error::InvalidInput(format!(
                "Cannot establish connection to Heat endpoint at region \"{asked}\" due to \"publicURL endpoint for orchestration service in {asked} region not found\""
            )));
        }
        let template = match property("template") {
            Some(Value::String(text)) => parse_document(&text, "template")
                .and_then(|document| Template::from_value(Value::Object(document)).map(|_| ())),
            Some(Value::Object(document)) => {
                Template::from_value(Value::Object(document)).map(|_| ())
            }
            _ => Ok(()),
        };
        if let Err(error) = template {
            return Err(Error::InvalidInput(format!(
                "Failed validating stack template using Heat endpoint at region \"{region}\" due to \"ERROR: {error}\""
            )));
        }
    }
    Ok(())
}
