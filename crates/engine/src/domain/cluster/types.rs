//! The profile and policy types the engine makes objects of, described as
//! Senlin describes its plugins (`GET /profile-types/{name}`): a name, a
//! version, the spec's property schema and a support status per version.
//! The table holds exactly the type versions `ProfileSpec::parse` and
//! `PolicyKind::parse` accept, and only the properties they read (or, for
//! Senlin's types, accept and ignore, marked in the description).
//!
//! Senlin's API lists only its own plugins, and clients compare that list
//! with Senlin's; Ember's own `ember.instance-1.0` is therefore described
//! (`GET /profile-types/ember.instance-1.0`) but not listed.

use serde_json::{Map, Value, json};

use super::operations;
use crate::error::{Error, Result};

/// One property of a spec, in Senlin's schema terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Property {
    pub name: &'static str,
    /// Senlin's type name: `String`, `Integer`, `Boolean`, `Map`, `List`.
    pub kind: &'static str,
    pub description: &'static str,
    pub required: bool,
}

/// One version of a profile or policy type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeDefinition {
    /// `os.nova.server`.
    pub name: &'static str,
    /// `1.0`.
    pub version: &'static str,
    /// Senlin's support status of this version: (status, since).
    pub support: &'static [(&'static str, &'static str)],
    pub properties: &'static [Property],
    /// Whether Senlin's type list shows it.
    pub listed: bool,
}

impl TypeDefinition {
    /// `os.nova.server-1.0`, the name a spec's type and version make.
    pub fn full_name(&self) -> String {
        format!("{}-{}", self.name, self.version)
    }

    /// Senlin's `schema`: each property's type, description, and whether
    /// it is required. `updatable` is true throughout: a node whose
    /// profile changes has its resource replaced, so every property can.
    pub fn schema(&self) -> Value {
        let schema: Map<String, Value> = self
            .properties
            .iter()
            .map(|property| {
                (
                    property.name.to_owned(),
                    json!({
                        "type": property.kind,
                        "description": property.description,
                        "required": property.required,
                        "updatable": true,
                    }),
                )
            })
            .collect();
        Value::Object(schema)
    }

    /// Senlin's `support_status`: `{"1.0": [{"status": …, "since": …}]}`.
    pub fn support_status(&self) -> Value {
        let entries: Vec<Value> = self
            .support
            .iter()
            .map(|(status, since)| json!({"status": status, "since": since}))
            .collect();
        json!({ self.version: entries })
    }
}

const fn property(
    name: &'static str,
    kind: &'static str,
    description: &'static str,
    required: bool,
) -> Property {
    Property {
        name,
        kind,
        description,
        required,
    }
}

const SUPPORTED_2016: &[(&str, &str)] = &[("SUPPORTED", "2016.04")];

const NOVA_SERVER: &[Property] = &[
    property(
        "context",
        "Map",
        "Customized security context for operating servers (not used by Ember).",
        false,
    ),
    property(
        "adminPass",
        "String",
        "Password for the administrator account (not used by Ember).",
        false,
    ),
    property(
        "auto_disk_config",
        "Boolean",
        "Whether the disk partition is done automatically (not used by Ember).",
        false,
    ),
    property(
        "availability_zone",
        "String",
        "Name of availability zone for running the server (not used by Ember).",
        false,
    ),
    property(
        "block_device_mapping",
        "List",
        "A list specifying the properties of block devices to be used for this server (not supported by Ember).",
        false,
    ),
    property(
        "block_device_mapping_v2",
        "List",
        "A list specifying the properties of block devices to be used for this server (not supported by Ember).",
        false,
    ),
    property(
        "config_drive",
        "Boolean",
        "Whether config drive should be enabled for the server (not used by Ember).",
        false,
    ),
    property(
        "flavor",
        "String",
        "ID of flavor used for the server.",
        true,
    ),
    property(
        "image",
        "String",
        "ID of image to be used for the new server.",
        true,
    ),
    property(
        "key_name",
        "String",
        "Name of Nova keypair to be injected to server (not used by Ember).",
        false,
    ),
    property(
        "metadata",
        "Map",
        "A collection of key/value pairs to be associated with the server created.",
        false,
    ),
    property(
        "name",
        "String",
        "Name of the server. When omitted, the node name will be used.",
        false,
    ),
    property(
        "networks",
        "List",
        "List of networks for the server (not used by Ember).",
        false,
    ),
    property(
        "personality",
        "List",
        "List of files to be injected into the server (not used by Ember).",
        false,
    ),
    property(
        "scheduler_hints",
        "Map",
        "A collection of key/value pairs to be associated with the Scheduler hints (not used by Ember).",
        false,
    ),
    property(
        "security_groups",
        "List",
        "List of security groups (not used by Ember).",
        false,
    ),
    property(
        "user_data",
        "String",
        "User data to be exposed by the metadata server.",
        false,
    ),
];

const HEAT_STACK: &[Property] = &[
    property(
        "context",
        "Map",
        "A dictionary for specifying the customized context for stack operations (not used by Ember).",
        false,
    ),
    property("template", "Map", "Heat stack template.", true),
    property(
        "parameters",
        "Map",
        "Parameters to be passed to Heat for stack operations.",
        false,
    ),
    property(
        "timeout",
        "Integer",
        "A integer that specifies the number of minutes that a stack operation times out.",
        false,
    ),
    property(
        "environment",
        "Map",
        "A map that specifies the environment used for stack operations.",
        false,
    ),
];

const DOCKER: &[Property] = &[
    property(
        "context",
        "Map",
        "Customized security context for operating containers (not used by Ember).",
        false,
    ),
    property(
        "image",
        "String",
        "The image used to create a container",
        true,
    ),
    property("name", "String", "The name of the container.", false),
    property(
        "command",
        "String",
        "The command to run when container is started.",
        false,
    ),
    property(
        "port",
        "Integer",
        "The port number used to connect to docker daemon (not used by Ember).",
        false,
    ),
    property(
        "host_node",
        "String",
        "The node on which container will be launched (not used by Ember).",
        false,
    ),
    property(
        "host_cluster",
        "String",
        "The cluster on which container will be launched (not used by Ember).",
        false,
    ),
    property(
        "flavor",
        "String",
        "Ember: the flavor limiting the container's resources.",
        false,
    ),
    property(
        "env",
        "Map",
        "Ember: environment variables of the container.",
        false,
    ),
    property(
        "metadata",
        "Map",
        "Ember: key/value pairs kept with the container.",
        false,
    ),
];

const EMBER_INSTANCE: &[Property] = &[
    property("flavor", "String", "The flavor of the instance.", true),
    property("image", "String", "The image of the instance.", true),
    property(
        "metadata",
        "Map",
        "Key/value pairs kept with the instance.",
        false,
    ),
    property(
        "user_data",
        "String",
        "User data given to the instance.",
        false,
    ),
    property("command", "List", "The command the instance runs.", false),
    property(
        "env",
        "Map",
        "Environment variables of the instance.",
        false,
    ),
];

const DELETION_1_0: &[Property] = &[
    property(
        "criteria",
        "String",
        "Criteria used in selecting candidates for deletion: OLDEST_FIRST, OLDEST_PROFILE_FIRST, YOUNGEST_FIRST or RANDOM.",
        false,
    ),
    property(
        "destroy_after_deletion",
        "Boolean",
        "Whether a node should be completely destroyed after deletion. Default to True",
        false,
    ),
    property(
        "grace_period",
        "Integer",
        "Number of seconds before real deletion happens.",
        false,
    ),
    property(
        "reduce_desired_capacity",
        "Boolean",
        "Whether the desired capacity of the cluster should be reduced along the deletion. Default to True.",
        false,
    ),
];

const DELETION_1_1: &[Property] = &[
    DELETION_1_0[0],
    DELETION_1_0[1],
    DELETION_1_0[2],
    DELETION_1_0[3],
    property(
        "hooks",
        "Map",
        "Lifecycle hook properties: type (zaqar or webhook), params (queue or url) and timeout.",
        false,
    ),
];

const SCALING: &[Property] = &[
    property(
        "event",
        "String",
        "Event that will trigger this policy. Must be one of CLUSTER_SCALE_IN and CLUSTER_SCALE_OUT.",
        true,
    ),
    property(
        "adjustment",
        "Map",
        "Detailed specification for scaling adjustments: type, number, min_step, best_effort, cooldown.",
        false,
    ),
];

/// The profile types, in Senlin's order, then Ember's own.
pub const PROFILE_TYPES: &[TypeDefinition] = &[
    TypeDefinition {
        name: "os.nova.server",
        version: "1.0",
        support: SUPPORTED_2016,
        properties: NOVA_SERVER,
        listed: true,
    },
    TypeDefinition {
        name: "os.heat.stack",
        version: "1.0",
        support: SUPPORTED_2016,
        properties: HEAT_STACK,
        listed: true,
    },
    TypeDefinition {
        name: "container.dockerinc.docker",
        version: "1.0",
        support: &[("EXPERIMENTAL", "2017.02")],
        properties: DOCKER,
        listed: true,
    },
    TypeDefinition {
        name: "ember.instance",
        version: "1.0",
        support: &[("SUPPORTED", "2026.01")],
        properties: EMBER_INSTANCE,
        listed: false,
    },
];

/// The policy types (versions) the engine accepts.
pub const POLICY_TYPES: &[TypeDefinition] = &[
    TypeDefinition {
        name: "senlin.policy.deletion",
        version: "1.0",
        support: SUPPORTED_2016,
        properties: DELETION_1_0,
        listed: true,
    },
    TypeDefinition {
        name: "senlin.policy.deletion",
        version: "1.1",
        support: &[("SUPPORTED", "2018.01")],
        properties: DELETION_1_1,
        listed: true,
    },
    TypeDefinition {
        name: "senlin.policy.scaling",
        version: "1.0",
        support: SUPPORTED_2016,
        properties: SCALING,
        listed: true,
    },
    TypeDefinition {
        name: "senlin.policy.health",
        version: "1.0",
        support: SUPPORTED_2016,
        properties: HEALTH,
        listed: true,
    },
    TypeDefinition {
        name: "senlin.policy.health",
        version: "1.1",
        support: &[("SUPPORTED", "2018.09")],
        properties: HEALTH,
        listed: true,
    },
    // Ember's own: described, not in Senlin's list (its clients compare
    // the list with Senlin's).
    TypeDefinition {
        name: "ember.policy.launch",
        version: "1.0",
        support: &[("SUPPORTED", "2026.12")],
        properties: LAUNCH,
        listed: false,
    },
];

const LAUNCH: &[Property] = &[
    property(
        "hooks",
        "Map",
        "The lifecycle hook every new node waits on before it goes into service: type (zaqar, queue or webhook), params (queue or url), timeout (30-7200 seconds, default 300), default_result on timeout (ABANDON, the default, or CONTINUE).",
        true,
    ),
    property(
        "on_abandon",
        "String",
        "What an abandoned node's action does once the node is deleted: RETRY (the default) builds another in its place, FAIL fails the action.",
        false,
    ),
    property(
        "retries",
        "Integer",
        "Rounds of replacements one action may build for abandoned nodes before it fails (0-10, default 3).",
        false,
    ),
];

const HEALTH: &[Property] = &[
    property(
        "detection",
        "Map",
        "Policy aspect for node failure detection. Ember detects failures from its machine watcher whatever the mode; interval: how often held recoveries are looked at again.",
        false,
    ),
    property(
        "recovery",
        "Map",
        "Policy aspect for node failure recovery: actions[0].name is REBOOT, REBUILD or RECREATE (the default).",
        false,
    ),
    property(
        "remediation",
        "Map",
        "Ember: the recovery budget. max_unhealthy (a count, or a percentage such as \"40%\"; default 100%): beyond it recovery stops; max_recoveries (0: no limit) per window seconds (default 600).",
        false,
    ),
];

/// The type named `full_name` (`os.nova.server-1.0`) among `types`, with
/// Senlin's message when there is none (`what`: profile_type, policy_type).
pub fn find(
    types: &'static [TypeDefinition],
    what: &str,
    full_name: &str,
) -> Result<&'static TypeDefinition> {
    types
        .iter()
        .find(|definition| definition.full_name() == full_name)
        .ok_or_else(|| Error::NotFound(format!("The {what} '{full_name}' could not be found.")))
}

/// Senlin's `{"operations": …}` of a profile type; an unknown type is a
/// bad request there, with the not-found message.
pub fn profile_type_operations(full_name: &str) -> Result<Value> {
    match find(PROFILE_TYPES, "profile_type", full_name) {
        Ok(_) => Ok(operations::describe(full_name)),
        Err(Error::NotFound(message)) => Err(Error::InvalidInput(message)),
        Err(other) => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::cluster::{PolicyKind, ProfileSpec};

    #[test]
    fn every_type_listed_is_one_the_engine_accepts() {
        for definition in PROFILE_TYPES {
            let mut properties = Map::new();
            for property in definition.properties.iter().filter(|p| p.required) {
                let value = match property.kind {
                    "Map" => json!({"heat_template_version": "2021-04-16", "resources": {}}),
                    _ => json!("x"),
                };
                properties.insert(property.name.to_owned(), value);
            }
            let spec = json!({
                "type": definition.name,
                "version": definition.version,
                "properties": properties,
            });
            let parsed = ProfileSpec::parse(spec).expect(definition.name);
            assert_eq!(parsed.type_name(), definition.full_name());
        }
        for definition in POLICY_TYPES {
            // Only the required properties: a policy refuses any its type
            // does not have (scaling's one required property is its event,
            // a launch policy's its hooks).
            let properties: Map<String, Value> = definition
                .properties
                .iter()
                .filter(|property| property.required)
                .map(|property| {
                    let value = match property.kind {
                        "Map" => json!({"params": {"queue": "q"}}),
                        _ => json!("CLUSTER_SCALE_IN"),
                    };
                    (property.name.to_owned(), value)
                })
                .collect();
            let spec = json!({
                "type": definition.name,
                "version": definition.version,
                "properties": properties,
            });
            let parsed = PolicyKind::parse(&spec).expect(definition.name);
            assert_eq!(parsed.type_name(), definition.full_name());
        }
    }

    #[test]
    fn an_unknown_type_has_senlins_message() {
        let error = find(PROFILE_TYPES, "profile_type", "os.nova.server-9.9").unwrap_err();
        assert_eq!(
            error.to_string(),
            "The profile_type 'os.nova.server-9.9' could not be found."
        );
        assert!(matches!(
            profile_type_operations("bogus-1.0"),
            Err(Error::InvalidInput(_))
        ));
    }

    #[test]
    fn schema_and_support_status_are_senlins_shape() {
        let server = find(PROFILE_TYPES, "profile_type", "os.nova.server-1.0").unwrap();
        let schema = server.schema();
        assert_eq!(schema["flavor"]["type"], "String");
        assert_eq!(schema["flavor"]["required"], true);
        assert_eq!(
            server.support_status(),
            json!({"1.0": [{"status": "SUPPORTED", "since": "2016.04"}]})
        );
    }
}
