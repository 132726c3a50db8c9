//! The operations each profile type offers on its nodes (Senlin's
//! `OPERATIONS`): the one table that `POST /nodes/{id}/ops` checks requests
//! against and `GET /profile-types/{type}/ops` describes. An operation is
//! listed only when Ember can do it: instance nodes map Senlin's
//! `os.nova.server` operations onto what an Ember instance has (power
//! actions and the maintenance lock); a stack node has none.

use serde_json::{Map, Value, json};

use super::profile::InstanceProfileType;
use crate::domain::instance::PowerAction;
use crate::error::{Error, Result};

/// A parameter of an operation, as Senlin describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperationParameter {
    pub name: &'static str,
    pub description: &'static str,
    pub kind: ParameterKind,
    /// Empty: any value of the kind.
    pub allowed: &'static [&'static str],
    pub default: Option<&'static str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParameterKind {
    String,
    Integer,
}

impl ParameterKind {
    fn as_str(self) -> &'static str {
        match self {
            ParameterKind::String => "String",
            ParameterKind::Integer => "Integer",
        }
    }
}

/// One operation of a profile type and what it does to an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperationDefinition {
    pub name: &'static str,
    pub description: &'static str,
    pub parameters: &'static [OperationParameter],
    /// What it does to the node's instance.
    pub effect: NodeOperation,
}

/// What an operation does to an instance node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeOperation {
    Power(PowerAction),
    Lock,
    Unlock,
}

const REBOOT_TYPE: OperationParameter = OperationParameter {
    name: "type",
    description: "Type of reboot which can be 'SOFT' or 'HARD'.",
    kind: ParameterKind::String,
    allowed: &["SOFT", "HARD"],
    default: Some("SOFT"),
};

const RESTART_WAIT: OperationParameter = OperationParameter {
    name: "wait_time",
    description: "Number of seconds to wait before killing the container.",
    kind: ParameterKind::Integer,
    allowed: &[],
    default: None,
};

const SERVER_OPERATIONS: &[OperationDefinition] = &[
    OperationDefinition {
        name: "reboot",
        description: "Reboot the nova server.",
        parameters: &[REBOOT_TYPE],
        effect: NodeOperation::Power(PowerAction::Reboot),
    },
    OperationDefinition {
        name: "start",
        description: "Start the server.",
        parameters: &[],
        effect: NodeOperation::Power(PowerAction::On),
    },
    OperationDefinition {
        name: "stop",
        description: "Stop the server.",
        parameters: &[],
        effect: NodeOperation::Power(PowerAction::Off),
    },
    OperationDefinition {
        name: "lock",
        description: "Lock the server.",
        parameters: &[],
        effect: NodeOperation::Lock,
    },
    OperationDefinition {
        name: "unlock",
        description: "Unlock the server.",
        parameters: &[],
        effect: NodeOperation::Unlock,
    },
];

const CONTAINER_OPERATIONS: &[OperationDefinition] = &[OperationDefinition {
    name: "restart",
    description: "Restart a container.",
    parameters: &[RESTART_WAIT],
    effect: NodeOperation::Power(PowerAction::Reboot),
}];

/// The operations of the profile type named `type_name` (e.g.
/// `os.nova.server-1.0`); none for a type without any (or unknown).
pub fn operations(type_name: &str) -> &'static [OperationDefinition] {
    const INSTANCE_TYPES: [InstanceProfileType; 2] =
        [InstanceProfileType::Ember, InstanceProfileType::NovaServer];
    if INSTANCE_TYPES
        .iter()
        .any(|instance| instance.type_name() == type_name)
    {
        SERVER_OPERATIONS
    } else if type_name == InstanceProfileType::Docker.type_name() {
        CONTAINER_OPERATIONS
    } else {
        &[]
    }
}

/// Senlin's description of a type's operations:
/// `{"reboot": {"description": …, "parameters": {"type": {…}}}, …}`.
pub fn describe(type_name: &str) -> Value {
    let described: Map<String, Value> = operations(type_name)
        .iter()
        .map(|operation| {
            let parameters: Map<String, Value> = operation
                .parameters
                .iter()
                .map(|parameter| (parameter.name.to_owned(), describe_parameter(parameter)))
                .collect();
            (
                operation.name.to_owned(),
                json!({"description": operation.description, "parameters": parameters}),
            )
        })
        .collect();
    Value::Object(described)
}

fn describe_parameter(parameter: &OperationParameter) -> Value {
    let mut described = json!({
        "type": parameter.kind.as_str(),
        "description": parameter.description,
        "required": false,
    });
    if let Some(default) = parameter.default {
        described["default"] = json!(default);
    }
    if !parameter.allowed.is_empty() {
        described["constraints"] =
            json!([{"type": "AllowedValues", "constraint": parameter.allowed}]);
    }
    described
}

/// Checks `operation` with `params` against the type's table; the errors
/// are Senlin's messages (the suite compares them).
pub fn parse(
    type_name: &str,
    operation: &str,
    params: &Map<String, Value>,
) -> Result<NodeOperation> {
    let definition = operations(type_name)
        .iter()
        .find(|definition| definition.name == operation)
        .ok_or_else(|| {
            Error::InvalidInput(format!(
                "The requested operation '{operation}' is not supported by the profile type '{type_name}'."
            ))
        })?;
    if let Some(unknown) = params
        .keys()
        .find(|key| !definition.parameters.iter().any(|p| p.name == key.as_str()))
    {
        return Err(Error::InvalidInput(format!(
            "Unrecognizable parameter '{unknown}'"
        )));
    }
    for parameter in definition.parameters {
        if let Some(value) = params.get(parameter.name) {
            check_parameter(parameter, value)?;
        }
    }
    Ok(definition.effect)
}

fn check_parameter(parameter: &OperationParameter, value: &Value) -> Result<()> {
    let text = match (parameter.kind, value) {
        (ParameterKind::String, Value::String(text)) => text.clone(),
        (ParameterKind::String, _) => {
            return Err(Error::InvalidInput(format!(
                "{}: value is not a string",
                parameter.name
            )));
        }
        (ParameterKind::Integer, Value::Number(number)) if number.is_i64() => number.to_string(),
        (ParameterKind::Integer, Value::String(text)) if text.trim().parse::<i64>().is_ok() => {
            text.clone()
        }
        (ParameterKind::Integer, other) => {
            let shown = other
                .as_str()
                .map_or_else(|| other.to_string(), str::to_owned);
            return Err(Error::InvalidInput(format!(
                "The value '{shown}' is not a valid Integer"
            )));
        }
    };
    if !parameter.allowed.is_empty() && !parameter.allowed.contains(&text.as_str()) {
        return Err(Error::InvalidInput(format!(
            "'{text}' must be one of the allowed values: {}.",
            parameter.allowed.join(", ")
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_server_reboots_with_an_allowed_type() {
        let parsed = parse(
            "os.nova.server-1.0",
            "reboot",
            &params(json!({"type": "HARD"})),
        );
        assert_eq!(parsed.ok(), Some(NodeOperation::Power(PowerAction::Reboot)));
        assert_eq!(
            parse("ember.instance-1.0", "stop", &Map::new()).ok(),
            Some(NodeOperation::Power(PowerAction::Off))
        );
    }

    #[test]
    fn senlins_messages_for_what_cannot_run() {
        let message = |result: Result<NodeOperation>| match result {
            Err(Error::InvalidInput(message)) => message,
            other => panic!("expected InvalidInput, got {other:?}"),
        };
        assert_eq!(
            message(parse("os.nova.server-1.0", "dance", &Map::new())),
            "The requested operation 'dance' is not supported by the profile type 'os.nova.server-1.0'."
        );
        assert_eq!(
            message(parse(
                "os.nova.server-1.0",
                "reboot",
                &params(json!({"type": "Unknown"}))
            )),
            "'Unknown' must be one of the allowed values: SOFT, HARD."
        );
        assert_eq!(
            message(parse(
                "os.nova.server-1.0",
                "reboot",
                &params(json!({"kind": "SOFT"}))
            )),
            "Unrecognizable parameter 'kind'"
        );
        assert!(parse("os.heat.stack-1.0", "reboot", &Map::new()).is_err());
    }

    #[test]
    fn the_description_names_each_operation_and_its_constraints() {
        let described = describe("os.nova.server-1.0");
        assert_eq!(
            described["reboot"]["parameters"]["type"]["constraints"][0]["constraint"],
            json!(["SOFT", "HARD"])
        );
        assert_eq!(describe("os.heat.stack-1.0"), json!({}));
    }
}
