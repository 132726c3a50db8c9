//! Software configuration (Heat's `software_configs` and
//! `software_deployments`): a config is an immutable script or structure
//! with declared inputs and outputs; a deployment applies one to a server,
//! with input values, and holds the outputs the server's agent reports
//! back. Pure rules: what a config's inputs and outputs may say, how a
//! deployment's state moves on an agent's signal.

use serde_json::{Map, Value, json};

/// A deployment's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeploymentStatus {
    InProgress,
    Complete,
    Failed,
}

impl DeploymentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeploymentStatus::InProgress => "IN_PROGRESS",
            DeploymentStatus::Complete => "COMPLETE",
            DeploymentStatus::Failed => "FAILED",
        }
    }

    pub fn parse(text: &str) -> Option<DeploymentStatus> {
        match text {
            "IN_PROGRESS" => Some(DeploymentStatus::InProgress),
            "COMPLETE" => Some(DeploymentStatus::Complete),
            "FAILED" => Some(DeploymentStatus::Failed),
            _ => None,
        }
    }
}

/// The value types an input or output may declare.
pub const IO_TYPES: [&str; 5] = ["String", "Number", "CommaDelimitedList", "Json", "Boolean"];

/// The group of a config that names none.
pub const UNGROUPED: &str = "Heat::Ungrouped";

/// The outputs every deployment has besides its config's.
pub const DEPLOYMENT_OUTPUTS: [&str; 3] = ["deploy_stdout", "deploy_stderr", "deploy_status_code"];

/// A software config as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct SoftwareConfig {
    pub id: uuid::Uuid,
    pub project_id: String,
    pub name: String,
    pub group: String,
    /// The script (a string) or the structure (for structured groups).
    pub config: Value,
    /// Normalised input declarations (maps).
    pub inputs: Vec<Value>,
    pub outputs: Vec<Value>,
    pub options: Map<String, Value>,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// A software deployment as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct SoftwareDeployment {
    pub id: uuid::Uuid,
    pub project_id: String,
    pub server_id: String,
    pub config_id: uuid::Uuid,
    pub input_values: Map<String, Value>,
    pub output_values: Map<String, Value>,
    pub action: String,
    pub status: DeploymentStatus,
    pub status_reason: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub updated_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Checks and normalises a config's `inputs` (`outputs` when `outputs`):
/// a list of maps, each with a `name`, a known `type` (default String),
/// an optional `description`, and for inputs `default`,
/// `replace_on_change` (and `value`, in derived configs), for outputs
/// `error_output`. What it says is kept as Heat keeps it: defaults filled,
/// false `replace_on_change` dropped.
pub fn normalise_io(value: &Value, outputs: bool) -> Result<Vec<Value>, String> {
    let what = if outputs { "outputs" } else { "inputs" };
    let items = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        _ => return Err(format!("Software config {what} must be a list of maps")),
    };
    let allowed: &[&str] = if outputs {
        &["name", "description", "type", "error_output"]
    } else {
        &[
            "name",
            "description",
            "type",
            "default",
            "replace_on_change",
            "value",
        ]
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let Value::Object(fields) = item else {
                return Err(format!("Software config {what} must be a list of maps"));
            };
            let path = format!("{what}[{index}]");
            if let Some(unknown) = fields.keys().find(|key| !allowed.contains(&key.as_str())) {
                return Err(format!(
                    "{path}: unknown key {:?} (an {} takes {})",
                    ember_runtime::quote::quoted(unknown),
                    if outputs { "output" } else { "input" },
                    allowed.join(", ")
                ));
            }
            let name = match fields.get("name") {
                Some(Value::String(name)) if !name.is_empty() => name.clone(),
                _ => return Err(format!("{path}: name is required (a string)")),
            };
            let kind = match fields.get("type") {
                None | Some(Value::Null) => "String".to_owned(),
                Some(Value::String(kind)) if IO_TYPES.contains(&kind.as_str()) => kind.clone(),
                Some(other) => {
                    return Err(format!(
                        "{path}: type {} is not one of {}",
                        ember_runtime::quote::quoted(&other.to_string()),
                        IO_TYPES.join(", ")
                    ));
                }
            };
            let mut normalised = Map::new();
            normalised.insert("name".to_owned(), json!(name));
            normalised.insert("type".to_owned(), json!(kind));
            match fields.get("description") {
                None | Some(Value::Null) => {}
                Some(Value::String(text)) => {
                    normalised.insert("description".to_owned(), json!(text));
                }
                Some(_) => return Err(format!("{path}: description must be a string")),
            }
            let flag = |key: &str| -> Result<bool, String> {
                match fields.get(key) {
                    None | Some(Value::Null) => Ok(false),
                    Some(Value::Bool(flag)) => Ok(*flag),
                    Some(Value::String(text)) if text.eq_ignore_ascii_case("true") => Ok(true),
                    Some(Value::String(text)) if text.eq_ignore_ascii_case("false") => Ok(false),
                    Some(_) => Err(format!("{path}: {key} must be true or false")),
                }
            };
            if outputs {
                normalised.insert("error_output".to_owned(), json!(flag("error_output")?));
            } else {
                if let Some(default) = fields.get("default").filter(|value| !value.is_null()) {
                    normalised.insert("default".to_owned(), default.clone());
                }
                if flag("replace_on_change")? {
                    normalised.insert("replace_on_change".to_owned(), json!(true));
                }
                if let Some(value) = fields.get("value") {
                    normalised.insert("value".to_owned(), value.clone());
                }
            }
            Ok(Value::Object(normalised))
        })
        .collect()
}

/// What an agent's signal (or a deployment update carrying outputs) does
/// to an IN_PROGRESS deployment, as Heat decides it: a non-zero
/// `deploy_status_code` or a value for an output declared `error_output`
/// fails it (the reason lists each), anything else completes it
/// ("Outputs received"). The outputs declared by the config and the three
/// `deploy_*` outputs are kept.
pub fn apply_outputs(
    deployment_outputs: &Map<String, Value>,
    config_outputs: &[Value],
    details: &Map<String, Value>,
) -> (Map<String, Value>, DeploymentStatus, String) {
    let mut outputs = deployment_outputs.clone();
    let mut reasons: Vec<String> = Vec::new();
    let status_code = details
        .get("deploy_status_code")
        .filter(|code| !code.is_null());
    let code_text = status_code.map(|code| match code {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    });
    if let Some(code) = code_text
        .as_deref()
        .filter(|code| !code.is_empty() && *code != "0")
    {
        reasons.push(format!(
            "deploy_status_code : Deployment exited with non-zero status code: {code}"
        ));
    }
    for output in config_outputs {
        let Some(name) = output.get("name").and_then(Value::as_str) else {
            continue;
        };
        if let Some(value) = details.get(name) {
            outputs.insert(name.to_owned(), value.clone());
            if output.get("error_output").and_then(Value::as_bool) == Some(true) {
                let text = match value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                reasons.push(format!("{name} : {text}"));
            }
        }
    }
    for name in DEPLOYMENT_OUTPUTS {
        outputs.insert(
            name.to_owned(),
            details.get(name).cloned().unwrap_or(Value::Null),
        );
    }
    if reasons.is_empty() {
        (
            outputs,
            DeploymentStatus::Complete,
            "Outputs received".to_owned(),
        )
    } else {
        (outputs, DeploymentStatus::Failed, reasons.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_and_outputs_are_checked_and_normalised() {
        let inputs = normalise_io(
            &json!([{"name": "port", "type": "Number", "default": 80},
                    {"name": "motd", "replace_on_change": false}]),
            false,
        )
        .expect("valid");
        assert_eq!(
            inputs,
            vec![
                json!({"name": "port", "type": "Number", "default": 80}),
                json!({"name": "motd", "type": "String"}),
            ]
        );
        let outputs =
            normalise_io(&json!([{"name": "result", "error_output": true}]), true).expect("valid");
        assert_eq!(
            outputs,
            vec![json!({"name": "result", "type": "String", "error_output": true})]
        );
        for (bad, outputs, expected) in [
            (json!("port"), false, "must be a list of maps"),
            (json!([{"type": "String"}]), false, "name is required"),
            (
                json!([{"name": "x", "type": "Float"}]),
                false,
                "is not one of",
            ),
            (json!([{"name": "x", "colour": 1}]), false, "unknown key"),
            (json!([{"name": "x", "default": 1}]), true, "unknown key"),
        ] {
            let error = normalise_io(&bad, outputs).expect_err("invalid");
            assert!(error.contains(expected), "{bad}: {error}");
        }
    }

    #[test]
    fn signals_complete_or_fail_a_deployment_as_heat_decides() {
        let config_outputs = vec![
            json!({"name": "result", "type": "String", "error_output": false}),
            json!({"name": "problem", "type": "String", "error_output": true}),
        ];
        let details = json!({"deploy_stdout": "done", "deploy_status_code": 0, "result": "42"});
        let (outputs, status, reason) = apply_outputs(
            &Map::new(),
            &config_outputs,
            details.as_object().expect("map"),
        );
        assert_eq!(status, DeploymentStatus::Complete);
        assert_eq!(reason, "Outputs received");
        assert_eq!(outputs["result"], "42");
        assert_eq!(outputs["deploy_stderr"], Value::Null);

        let details = json!({"deploy_status_code": 2, "problem": "disk full"});
        let (_, status, reason) = apply_outputs(
            &Map::new(),
            &config_outputs,
            details.as_object().expect("map"),
        );
        assert_eq!(status, DeploymentStatus::Failed);
        assert!(reason.contains("non-zero status code: 2"), "{reason}");
        assert!(reason.contains("problem : disk full"), "{reason}");
    }
}
