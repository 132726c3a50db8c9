//! Profile specs: what a node is. Three profile types make each node a
//! compute instance (on whatever compute driver the engine runs: with the
//! docker driver, a container):
//! - `ember.instance-1.0`: flavor, image, metadata, user_data, command, env;
//! - Senlin's `os.nova.server-1.0`: flavor, image, name, metadata,
//!   user_data (networks, security groups, key name and the rest of its
//!   schema are accepted and have no effect here);
//! - Senlin's `container.dockerinc.docker-1.0`: image, command (a shell-style
//!   string, or a list), name, host_node, host_cluster, context, port, and
//!   Ember's additions flavor (default `unlimited`), env and metadata.
//!   host_node/host_cluster are recorded as labels (the engine's one
//!   container engine runs every container); name, context and port have
//!   no effect (containers are named after their instance, so retries find
//!   them).
//!
//! `os.heat.stack-1.0` makes a node a stack from a template.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::domain::instance::placement::{NetworkRequest, Placement};
use crate::domain::instance::{UNLIMITED_FLAVOR, Workload};
use crate::error::{Error, Result};

/// Which profile type made an instance node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceProfileType {
    Ember,
    NovaServer,
    Docker,
}

impl InstanceProfileType {
    pub fn type_name(self) -> &'static str {
        match self {
            InstanceProfileType::Ember => "ember.instance-1.0",
            InstanceProfileType::NovaServer => "os.nova.server-1.0",
            InstanceProfileType::Docker => "container.dockerinc.docker-1.0",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ProfileKind {
    Instance {
        profile_type: InstanceProfileType,
        flavor: String,
        image: String,
        metadata: BTreeMap<String, String>,
        workload: Workload,
        /// Networks, security groups, key pair… (`os.nova.server-1.0`).
        placement: Placement,
    },
    Stack {
        /// The template as text (YAML or JSON).
        template: String,
        parameters: Map<String, Value>,
        environment: String,
        files: BTreeMap<String, String>,
        timeout_mins: Option<u32>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProfileSpec {
    pub kind: ProfileKind,
    /// The spec as given.
    pub spec: Value,
}

impl ProfileSpec {
    pub fn type_name(&self) -> &'static str {
        match &self.kind {
            ProfileKind::Instance { profile_type, .. } => profile_type.type_name(),
            ProfileKind::Stack { .. } => "os.heat.stack-1.0",
        }
    }

    /// The flavor of an instance profile's nodes.
    pub fn flavor(&self) -> Option<&str> {
        match &self.kind {
            ProfileKind::Instance { flavor, .. } => Some(flavor),
            ProfileKind::Stack { .. } => None,
        }
    }

    /// Parses `{"type", "version", "properties"}`.
    pub fn parse(spec: Value) -> Result<ProfileSpec> {
        let invalid = |message: String| Error::InvalidInput(message);
        let (type_name, version) = super::policy::spec_type_and_version(&spec)?;
        let object = spec
            .as_object()
            .ok_or_else(|| invalid("The provided spec is not a map.".into()))?;
        let empty = Map::new();
        let properties = match object.get("properties") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(map)) => map,
            Some(_) => return Err(invalid("profile spec properties must be an object".into())),
        };
        let text = |key: &str| -> Result<String> {
            match properties.get(key) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(text)) => Ok(text.clone()),
                Some(other) => Err(invalid(format!(
                    "properties.{key} must be a string, got {other}"
                ))),
            }
        };
        let string_map = |key: &str| -> Result<BTreeMap<String, String>> {
            match properties.get(key) {
                None | Some(Value::Null) => Ok(BTreeMap::new()),
                Some(Value::Object(map)) => map
                    .iter()
                    .map(|(name, value)| match value {
                        Value::String(text) => Ok((name.clone(), text.clone())),
                        other => Ok((name.clone(), other.to_string())),
                    })
                    .collect(),
                Some(other) => Err(invalid(format!(
                    "properties.{key} must be an object, got {other}"
                ))),
            }
        };
        // Senlin's words for a property its schema does not have.
        let refuse_unknown = |known: &[&str]| -> Result<()> {
            match properties.keys().find(|key| !known.contains(&key.as_str())) {
                Some(unknown) => Err(invalid(format!("Unrecognizable spec item '{unknown}'"))),
                None => Ok(()),
            }
        };
        let kind = match (type_name.as_str(), version.as_str()) {
            ("ember.instance", "1.0") => {
                let flavor = text("flavor")?;
                let image = text("image")?;
                if flavor.is_empty() || image.is_empty() {
                    return Err(invalid(
                        "ember.instance-1.0 needs properties.flavor and properties.image".into(),
                    ));
                }
                let workload = Workload {
                    user_data: text("user_data")?,
                    command: command(properties.get("command"))?,
                    env: string_map("env")?,
                };
                workload.validate()?;
                ProfileKind::Instance {
                    profile_type: InstanceProfileType::Ember,
                    flavor,
                    image,
                    metadata: string_map("metadata")?,
                    workload,
                    placement: Placement::default(),
                }
            }
            ("os.nova.server", "1.0") => {
                refuse_unknown(NOVA_SERVER_PROPERTIES)?;
                let flavor = text("flavor")?;
                let image = text("image")?;
                if flavor.is_empty() || image.is_empty() {
                    return Err(invalid(
                        "os.nova.server-1.0 needs properties.flavor and properties.image (booting from a volume is not supported)".into(),
                    ));
                }
                let _ = text("name")?;
                let workload = Workload {
                    user_data: text("user_data")?,
                    ..Workload::default()
                };
                workload.validate()?;
                ProfileKind::Instance {
                    profile_type: InstanceProfileType::NovaServer,
                    flavor,
                    image,
                    metadata: string_map("metadata")?,
                    workload,
                    placement: nova_server_placement(properties)?,
                }
            }
            ("container.dockerinc.docker", "1.0") => {
                refuse_unknown(DOCKER_PROPERTIES)?;
                let image = text("image")?;
                if image.is_empty() {
                    return Err(invalid(
                        "container.dockerinc.docker-1.0 needs properties.image".into(),
                    ));
                }
                let flavor = match text("flavor")? {
                    flavor if flavor.is_empty() => UNLIMITED_FLAVOR.to_owned(),
                    flavor => flavor,
                };
                let _ = text("name")?;
                match properties.get("context") {
                    None | Some(Value::Null) | Some(Value::Object(_)) => {}
                    Some(other) => {
                        return Err(invalid(format!(
                            "properties.context must be an object, got {other}"
                        )));
                    }
                }
                match properties.get("port") {
                    None | Some(Value::Null) => {}
                    Some(value) if value.as_u64().is_some_and(|port| port <= 65_535) => {}
                    Some(other) => {
                        return Err(invalid(format!(
                            "properties.port must be a port number, got {other}"
                        )));
                    }
                }
                let mut metadata = string_map("metadata")?;
                for key in ["host_node", "host_cluster"] {
                    let value = text(key)?;
                    if !value.is_empty() {
                        metadata.insert(key.to_owned(), value);
                    }
                }
                let workload = Workload {
                    command: command(properties.get("command"))?,
                    env: string_map("env")?,
                    ..Workload::default()
                };
                workload.validate()?;
                ProfileKind::Instance {
                    profile_type: InstanceProfileType::Docker,
                    flavor,
                    image,
                    metadata,
                    workload,
                    placement: Placement::default(),
                }
            }
            ("os.heat.stack", "1.0") => {
                let template = match properties.get("template") {
                    Some(Value::String(text)) if !text.trim().is_empty() => text.clone(),
                    Some(Value::Object(map)) if !map.is_empty() => {
                        Value::Object(map.clone()).to_string()
                    }
                    _ => {
                        return Err(invalid(
                            "os.heat.stack-1.0 needs properties.template (text or object)".into(),
                        ));
                    }
                };
                let parameters = match properties.get("parameters") {
                    None | Some(Value::Null) => Map::new(),
                    Some(Value::Object(map)) => map.clone(),
                    Some(_) => {
                        return Err(invalid("properties.parameters must be an object".into()));
                    }
                };
                let environment = match properties.get("environment") {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(text)) => text.clone(),
                    Some(other) => other.to_string(),
                };
                let timeout_mins = match properties.get("timeout") {
                    None | Some(Value::Null) => None,
                    Some(value) => Some(
                        value
                            .as_u64()
                            .and_then(|value| u32::try_from(value).ok())
                            .ok_or_else(|| {
                                invalid(format!("properties.timeout must be minutes, got {value}"))
                            })?,
                    ),
                };
                ProfileKind::Stack {
                    template,
                    parameters,
                    environment,
                    files: string_map("files")?,
                    timeout_mins,
                }
            }
            // Senlin's 404 for a type it has no plugin of (Ember's types:
            // ember.instance, os.nova.server, container.dockerinc.docker and
            // os.heat.stack, each version 1.0).
            _ => {
                return Err(Error::NotFound(format!(
                    "The profile_type '{type_name}-{version}' could not be found."
                )));
            }
        };
        Ok(ProfileSpec { kind, spec })
    }
}

/// Every property of Senlin's `os.nova.server-1.0` (most have no effect).
const NOVA_SERVER_PROPERTIES: &[&str] = &[
    "context",
    "adminPass",
    "auto_disk_config",
    "availability_zone",
    "block_device_mapping",
    "block_device_mapping_v2",
    "config_drive",
    "flavor",
    "image",
    "key_name",
    "metadata",
    "name",
    "networks",
    "personality",
    "scheduler_hints",
    "security_groups",
    "user_data",
];

/// Where an `os.nova.server-1.0` node's server is placed: Senlin's
/// `networks` (`network`, `port`, `subnet`, `fixed_ip`), `security_groups`,
/// `key_name`, `availability_zone`, `scheduler_hints`,
/// `block_device_mapping_v2`, `config_drive`. A network key Ember does not
/// take yet is refused, naming it.
fn nova_server_placement(properties: &Map<String, Value>) -> Result<Placement> {
    let invalid = |message: String| Error::InvalidInput(message);
    let text = |map: &Map<String, Value>, key: &str, at: &str| -> Result<Option<String>> {
        match map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(other) => Err(invalid(format!("{at}.{key} must be a string, got {other}"))),
        }
    };
    let mut networks = Vec::new();
    match properties.get("networks") {
        None | Some(Value::Null) => {}
        Some(Value::Array(entries)) => {
            for (index, entry) in entries.iter().enumerate() {
                let at = format!("properties.networks[{index}]");
                let Value::Object(entry) = entry else {
                    return Err(invalid(format!("{at} must be a map, got {entry}")));
                };
                let taken = ["network", "port", "subnet", "fixed_ip"];
                if let Some(other) = entry.keys().find(|key| !taken.contains(&key.as_str())) {
                    return Err(invalid(format!(
                        "{at}.{other} is not supported by Ember (it takes {})",
                        taken.join(", ")
                    )));
                }
                networks.push(NetworkRequest {
                    network: text(entry, "network", &at)?,
                    port: text(entry, "port", &at)?,
                    subnet: text(entry, "subnet", &at)?,
                    fixed_ip: text(entry, "fixed_ip", &at)?,
                    tag: None,
                });
            }
        }
        Some(other) => {
            return Err(invalid(format!(
                "properties.networks must be a list, got {other}"
            )));
        }
    }
    let security_groups = match properties.get("security_groups") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(name) => Ok(name.clone()),
                other => Err(invalid(format!(
                    "properties.security_groups must be a list of names, got {other}"
                ))),
            })
            .collect::<Result<_>>()?,
        Some(other) => {
            return Err(invalid(format!(
                "properties.security_groups must be a list, got {other}"
            )));
        }
    };
    let placement = Placement {
        networks,
        security_groups,
        key_name: text(properties, "key_name", "properties")?,
        availability_zone: text(properties, "availability_zone", "properties")?,
        block_device_mapping: match properties.get("block_device_mapping_v2") {
            Some(Value::Array(entries)) => entries.clone(),
            _ => Vec::new(),
        },
        scheduler_hints: match properties.get("scheduler_hints") {
            Some(Value::Object(hints)) => hints.clone(),
            _ => Map::new(),
        },
        config_drive: properties.get("config_drive").and_then(Value::as_bool),
    };
    placement.validate()?;
    Ok(placement)
}

/// Senlin's `container.dockerinc.docker-1.0` properties and Ember's
/// additions (flavor, env, metadata).
const DOCKER_PROPERTIES: &[&str] = &[
    "context",
    "image",
    "name",
    "command",
    "host_node",
    "host_cluster",
    "port",
    "flavor",
    "env",
    "metadata",
];

/// A command: a list of arguments, or a string split as a shell would
/// (quotes and backslashes), as Docker clients do.
fn command(value: Option<&Value>) -> Result<Vec<String>> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(text)) => split_shell_words(text).map_err(|problem| {
            Error::InvalidInput(format!("properties.command: {problem} in {text:?}"))
        }),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(text) => Ok(text.clone()),
                other => Err(Error::InvalidInput(format!(
                    "properties.command: arguments must be strings, got {other}"
                ))),
            })
            .collect(),
        Some(other) => Err(Error::InvalidInput(format!(
            "properties.command must be a string or a list of strings, got {other}"
        ))),
    }
}

/// Splits `sleep 60 'a b' "c \"d\""` into words as a POSIX shell would
/// (no expansions).
pub fn split_shell_words(text: &str) -> std::result::Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut characters = text.chars();
    while let Some(character) = characters.next() {
        match character {
            '\'' => {
                in_word = true;
                loop {
                    match characters.next() {
                        Some('\'') => break,
                        Some(inner) => word.push(inner),
                        None => return Err("unterminated single quote".to_owned()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match characters.next() {
                        Some('"') => break,
                        Some('\\') => match characters.next() {
                            Some(escaped @ ('"' | '\\' | '$' | '`')) => word.push(escaped),
                            Some(other) => {
                                word.push('\\');
                                word.push(other);
                            }
                            None => return Err("unterminated double quote".to_owned()),
                        },
                        Some(inner) => word.push(inner),
                        None => return Err("unterminated double quote".to_owned()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match characters.next() {
                    Some(escaped) => word.push(escaped),
                    None => return Err("a trailing backslash".to_owned()),
                }
            }
            blank if blank.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            other => {
                in_word = true;
                word.push(other);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_profile_types_parse() {
        let instance = ProfileSpec::parse(json!({"type": "ember.instance", "version": 1.0,
            "properties": {"flavor": "small", "image": "debian"}}))
        .expect("instance");
        assert_eq!(instance.type_name(), "ember.instance-1.0");
        let stack = ProfileSpec::parse(json!({"type": "os.heat.stack", "version": "1.0",
            "properties": {"template": {"heat_template_version": "2018-08-31"}}}))
        .expect("stack");
        assert_eq!(stack.type_name(), "os.heat.stack-1.0");
        let error = ProfileSpec::parse(json!({"type": "os.nova.server", "version": "2.0"}))
            .expect_err("unsupported")
            .to_string();
        assert!(error.contains("os.nova.server"), "{error}");
    }

    #[test]
    fn senlin_server_and_docker_profiles_make_instance_nodes() {
        let server = ProfileSpec::parse(json!({"type": "os.nova.server", "version": 1.0,
            "properties": {"flavor": "m1.small", "image": "cirros", "name": "web",
                "networks": [{"network": "private"}], "key_name": "oskey",
                "metadata": {"role": "web"}, "user_data": "#!/bin/sh\necho hi"}}))
        .expect("server");
        assert_eq!(server.type_name(), "os.nova.server-1.0");
        let ProfileKind::Instance {
            flavor,
            workload,
            metadata,
            ..
        } = &server.kind
        else {
            panic!("an instance profile");
        };
        assert_eq!(
            (flavor.as_str(), metadata["role"].as_str()),
            ("m1.small", "web")
        );
        assert!(workload.user_data.starts_with("#!/bin/sh"));
        let ProfileKind::Instance { placement, .. } = &server.kind else {
            panic!("an instance profile");
        };
        assert_eq!(placement.networks[0].network.as_deref(), Some("private"));
        assert_eq!(placement.key_name.as_deref(), Some("oskey"));
        let floating = ProfileSpec::parse(json!({"type": "os.nova.server", "version": 1.0,
            "properties": {"flavor": "m1.small", "image": "cirros",
                "networks": [{"network": "private", "floating_network": "public"}]}}))
        .expect_err("not taken yet");
        assert_eq!(
            floating.to_string(),
            "properties.networks[0].floating_network is not supported by Ember (it takes network, port, subnet, fixed_ip)"
        );

        let docker = ProfileSpec::parse(
            json!({"type": "container.dockerinc.docker", "version": "1.0",
            "properties": {"image": "localhost/worker:1", "name": "worker",
                "command": "/bin/sh -c 'echo \"hello world\"; sleep 60'",
                "host_node": "node-1", "context": {"region_name": "RegionOne"}, "port": 2375,
                "env": {"MODE": "work"}}}),
        )
        .expect("docker");
        assert_eq!(docker.type_name(), "container.dockerinc.docker-1.0");
        assert_eq!(docker.flavor(), Some("unlimited"));
        let ProfileKind::Instance {
            workload, metadata, ..
        } = &docker.kind
        else {
            panic!("an instance profile");
        };
        assert_eq!(
            workload.command,
            vec!["/bin/sh", "-c", "echo \"hello world\"; sleep 60"]
        );
        assert_eq!(workload.env["MODE"], "work");
        assert_eq!(metadata["host_node"], "node-1");
    }

    #[test]
    fn senlin_profiles_refuse_what_they_do_not_know() {
        let cases = [
            (
                json!({"type": "container.dockerinc.docker", "version": "1.0",
                "properties": {"command": "sleep 1"}}),
                "needs properties.image",
            ),
            (
                json!({"type": "container.dockerinc.docker", "version": "1.0",
                "properties": {"image": "x", "volumes": []}}),
                "Unrecognizable spec item 'volumes'",
            ),
            (
                json!({"type": "container.dockerinc.docker", "version": "1.0",
                "properties": {"image": "x", "command": "echo 'oops"}}),
                "unterminated single quote",
            ),
            (
                json!({"type": "container.dockerinc.docker", "version": "1.0",
                "properties": {"image": "x", "port": "http"}}),
                "properties.port",
            ),
            (
                json!({"type": "os.nova.server", "version": "1.0",
                "properties": {"flavor": "m1.small"}}),
                "needs properties.flavor and properties.image",
            ),
        ];
        for (spec, expected) in cases {
            let error = ProfileSpec::parse(spec).expect_err("invalid").to_string();
            assert!(error.contains(expected), "{expected}: {error}");
        }
    }

    #[test]
    fn unknown_types_and_bare_specs_are_said_as_senlin_says_them() {
        let spec = json!({"type": "senlin.profile.bogus", "version": "1.0", "properties": {}});
        match ProfileSpec::parse(spec) {
            Err(Error::NotFound(message)) => assert_eq!(
                message,
                "The profile_type 'senlin.profile.bogus-1.0' could not be found."
            ),
            other => panic!("{other:?}"),
        }
        for (spec, expected) in [
            (json!([]), "The provided spec is not a map."),
            (
                json!({"version": "1.0"}),
                "The 'type' key is missing from the provided spec map.",
            ),
            (
                json!({"type": "os.nova.server"}),
                "The 'version' key is missing from the provided spec map.",
            ),
        ] {
            match ProfileSpec::parse(spec) {
                Err(Error::InvalidInput(message)) => assert_eq!(message, expected),
                other => panic!("{expected}: {other:?}"),
            }
        }
    }

    #[test]
    fn shell_words_split_like_a_shell() {
        assert_eq!(
            split_shell_words(r#"a  'b c' "d \"e\" \n" f\ g"#).expect("valid"),
            vec!["a", "b c", r#"d "e" \n"#, "f g"]
        );
        assert_eq!(
            split_shell_words("   ").expect("valid"),
            Vec::<String>::new()
        );
        assert_eq!(split_shell_words("''").expect("valid"), vec![""]);
        assert!(split_shell_words("trailing\\").is_err());
    }
}
