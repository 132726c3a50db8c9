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

/// The node keys a cluster operation's `filters` may name (Senlin's).
const MEMBER_FILTER_KEYS: [&str; 4] = ["name", "profile_id", "status", "role"];

/// Which members a cluster operation runs on: each key given must match
/// (one of its values, when it lists several); no key = every member.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberFilter {
    wanted: Vec<(&'static str, Vec<String>)>,
}

impl MemberFilter {
    /// Reads a cluster operation's `filters`; unsupported keys are named
    /// each on its own line, as Senlin's message does.
    pub fn parse(filters: &Map<String, Value>) -> Result<MemberFilter> {
        let unsupported: Vec<String> = filters
            .keys()
            .filter(|key| !MEMBER_FILTER_KEYS.contains(&key.as_str()))
            .map(|key| format!("Filter key '{key}' is unsupported"))
            .collect();
        if !unsupported.is_empty() {
            return Err(Error::InvalidInput(unsupported.join("\n")));
        }
        let mut wanted = Vec::new();
        for key in MEMBER_FILTER_KEYS {
            let Some(value) = filters.get(key) else {
                continue;
            };
            let not_text = || {
                Error::InvalidInput(format!(
                    "Filter value of '{key}' must be a string or a list of strings"
                ))
            };
            let values = match value {
                Value::String(text) => vec![text.clone()],
                Value::Array(items) => items
                    .iter()
                    .map(|item| item.as_str().map(str::to_owned).ok_or_else(not_text))
                    .collect::<Result<Vec<_>>>()?,
                _ => return Err(not_text()),
            };
            wanted.push((key, values));
        }
        Ok(MemberFilter { wanted })
    }

    /// Whether `node` is selected.
    pub fn matches(&self, node: &super::Node) -> bool {
        self.wanted.iter().all(|(key, values)| {
            let actual = match *key {
                "name" => node.name.clone(),
                "profile_id" => node.profile_id.to_string(),
                "status" => node.status.as_str().to_owned(),
                _ => node.role.clone(),
            };
            values.contains(&actual)
        })
    }
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
    fn member_filters_are_senlins_keys_any_of_their_values() {
        let refused = MemberFilter::parse(&params(json!({"zone": "a", "flavor": "b"})));
        match refused {
            Err(Error::InvalidInput(message)) => assert_eq!(
                message,
                "Filter key 'zone' is unsupported\nFilter key 'flavor' is unsupported"
            ),
            other => panic!("expected InvalidInput, got {other:?}"),
        }
        assert!(MemberFilter::parse(&params(json!({"role": 3}))).is_err());
        let now = chrono::Utc::now();
        let node = super::super::Node {
            id: uuid::Uuid::now_v7(),
            name: "web-1".into(),
            cluster_id: None,
            profile_id: uuid::Uuid::now_v7(),
            index: 1,
            role: "master".into(),
            status: super::super::NodeStatus::Active,
            status_reason: String::new(),
            physical_id: None,
            tainted: false,
            protected: false,
            metadata: Map::new(),
            project_id: "p".into(),
            user_id: "u".into(),
            created_at: now,
            updated_at: now,
        };
        let selects = |filters: Value| {
            MemberFilter::parse(&params(filters))
                .map(|filter| filter.matches(&node))
                .unwrap_or(false)
        };
        assert!(selects(json!({})));
        assert!(selects(
            json!({"role": "master", "status": ["ERROR", "ACTIVE"]})
        ));
        assert!(!selects(json!({"role": "slave"})));
        assert!(selects(
            json!({"name": "web-1", "profile_id": node.profile_id.to_string()})
        ));
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
