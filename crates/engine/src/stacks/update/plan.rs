//! The definition an update moves the stack to: PUT replaces it, PATCH
//! (`existing`) changes the current one.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::UpdateStack;
use crate::domain::StackDefinition;
use crate::domain::template::parse_document;
use crate::error::{Error, Result};
use crate::stacks::definition::merge_environment_documents;

/// The definition the update moves the stack to.
pub(in crate::stacks) fn updated_definition(
    current: &StackDefinition,
    request: &UpdateStack,
) -> Result<StackDefinition> {
    let mut files = if request.existing {
        current.files.clone()
    } else {
        BTreeMap::new()
    };
    files.extend(request.files.clone());
    let template = if let Some(generated) = &request.generated_template {
        generated.clone()
    } else if request.template.trim().is_empty() {
        if !request.existing {
            return Err(Error::InvalidInput(
                "template: a full update (PUT) needs a template; use PATCH to keep the current one"
                    .to_owned(),
            ));
        }
        current.template.clone()
    } else {
        Value::Object(parse_document(&request.template, "template")?)
    };
    let mut environments = Vec::new();
    if request.existing {
        environments.push(current.environment.clone());
    }
    if !request.environment.trim().is_empty() {
        environments.push(Value::Object(parse_document(
            &request.environment,
            "environment",
        )?));
    }
    for name in &request.environment_files {
        let text = files.get(name).ok_or_else(|| {
            Error::InvalidInput(format!(
                "environment_files: {name:?} is not among the files sent with the request"
            ))
        })?;
        environments.push(Value::Object(parse_document(text, "environment")?));
    }
    let mut parameters = if request.existing {
        current.parameters.clone()
    } else {
        Map::new()
    };
    for name in &request.clear_parameters {
        parameters.remove(name);
    }
    parameters.extend(request.parameters.clone());
    Ok(StackDefinition {
        template,
        environment: merge_environment_documents(environments),
        files,
        parameters,
    })
}
