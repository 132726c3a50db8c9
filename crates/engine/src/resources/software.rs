//! Software configuration resources: configs (`OS::Heat::SoftwareConfig`,
//! `StructuredConfig`, `CloudConfig`, `MultipartMime`) are immutable
//! software configs made from the template; deployments
//! (`OS::Heat::SoftwareDeployment`, `StructuredDeployment`) apply one to
//! a server for the actions they name and hold the stack until the
//! server's agent signals the outputs back.
//!
//! For each triggered action a deployment makes a *derived* config — the
//! source config with the input values filled in, plus Heat's `deploy_*`
//! inputs (server, action, stack, resource, and how to signal) — which is
//! what the agent reads from the server's metadata
//! (`GET …/software_deployments/metadata/{server}`), then it waits for the
//! signal (CFN_SIGNAL and HEAT_SIGNAL: an HTTP POST to `deploy_signal_id`,
//! a URL carrying its secret; TEMP_URL_SIGNAL: a PUT there; or a `PUT
//! /software_deployments/{id}` by a user; NO_SIGNAL: no wait). The secret
//! lives in the derived config's inputs, so a signal is checked against
//! the deployment itself while its resource is still being created.
//!
//! A deployment's id derives from its resource's row
//! ([`ResourceRequest::derived_id`]), and its outputs are stored when the
//! agent signals them: every step another engine had in flight when it
//! went away is taken over — the deployment that engine triggered is
//! found and waited for again (its agent keeps the same signal URL and
//! secret), one never triggered is triggered now. A suspend or resume
//! tells its own trigger by when it happened: a deployment moved to the
//! step's action after the step began (its first IN_PROGRESS event) was
//! triggered by it, so the agent never runs one step's config twice.
//!
//! A config resource's config id derives from its row too: a create
//! taken over finds the config the earlier attempt made (configs are
//! immutable, so it is the same one) instead of making a second.

use std::sync::Arc;

use async_trait::async_trait;
use ember_runtime::Identity;
use serde_json::{Map, Value, json};

use super::wait_condition::{WaitConditions, new_signal_token};
use super::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceOutcome,
    ResourceRequest, ResourceType, ResourceTypeSchema,
};
use crate::domain::software::{DEPLOYMENT_OUTPUTS, DeploymentStatus, UNGROUPED};
use crate::domain::{ActionStatus, Resource};
use crate::software::{DeploymentUpdate, NewConfig, NewDeployment, SoftwareService};
use crate::store::EventListQuery;

pub const SOFTWARE_DEPLOYMENT_TYPE: &str = "OS::Heat::SoftwareDeployment";

/// What a deployment's id is derived for (see
/// [`ResourceRequest::derived_id`]).
const DEPLOYMENT_KIND: &str = "software deployment";
pub const STRUCTURED_DEPLOYMENT_TYPE: &str = "OS::Heat::StructuredDeployment";

/// What a config resource's config id is derived for.
const CONFIG_KIND: &str = "software config";

/// How many of a resource's newest events are read to find when its step
/// began (the step's IN_PROGRESS events, and the signals recorded while it
/// waits, come first).
const STEP_EVENTS_READ: u32 = 50;

/// Whether a resource type is a deployment (signals go to its deployment).
pub fn is_deployment(type_name: &str) -> bool {
    matches!(
        type_name,
        SOFTWARE_DEPLOYMENT_TYPE | STRUCTURED_DEPLOYMENT_TYPE
    )
}

/// The identity the resources act with: the stack's owner in its project.
fn owner(request: &ResourceRequest) -> Identity {
    Identity::new(
        request.user_id.clone(),
        request.project_id.clone(),
        vec!["member".to_owned()],
    )
}

fn owner_of(resource: &Resource, project_id: &str) -> Identity {
    let _ = resource;
    Identity::new("engine", project_id.to_owned(), vec!["member".to_owned()])
}

fn failure(error: crate::error::Error) -> ResourceFailure {
    ResourceFailure(error.to_string())
}

/// Which config resource a type is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConfigKind {
    Software,
    Structured,
    Cloud,
    Multipart,
}

pub struct ConfigResource {
    schema: ResourceTypeSchema,
    kind: ConfigKind,
    software: Arc<SoftwareService>,
}

fn io_properties() -> Vec<PropertySchema> {
    vec![
        PropertySchema::new(
            "group",
            PropertyType::String,
            "Namespace to group this software config by when delivered to a server. This may imply what configuration tool is going to perform the configuration.",
        )
        .default(json!(UNGROUPED)),
        PropertySchema::new(
            "options",
            PropertyType::Map,
            "Map containing options specific to the configuration management tool used by this resource.",
        ),
        PropertySchema::new(
            "inputs",
            PropertyType::List,
            "Schema representing the inputs that this software config is expecting.",
        ),
        PropertySchema::new(
            "outputs",
            PropertyType::List,
            "Schema representing the outputs that this software config will produce.",
        ),
    ]
}

impl ConfigResource {
    fn with(
        type_name: &'static str,
        description: &'static str,
        kind: ConfigKind,
        properties: Vec<PropertySchema>,
        software: Arc<SoftwareService>,
    ) -> Self {
        ConfigResource {
            schema: ResourceTypeSchema {
                type_name,
                description,
                properties,
                attributes: vec![AttributeSchema {
                    name: "config",
                    description: "The config value of the software config.",
                }],
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
            kind,
            software,
        }
    }

    pub fn software(software: Arc<SoftwareService>) -> Self {
        let mut properties = io_properties();
        properties.push(PropertySchema::new(
            "config",
            PropertyType::String,
            "Configuration script or manifest which specifies what actual configuration is performed.",
        ));
        ConfigResource::with(
            "OS::Heat::SoftwareConfig",
            "A script or manifest and its inputs and outputs, stored immutable for deployments to apply to servers.",
            ConfigKind::Software,
            properties,
            software,
        )
    }

    pub fn structured(software: Arc<SoftwareService>) -> Self {
        let mut properties = io_properties();
        properties.push(PropertySchema::new(
            "config",
            PropertyType::Map,
            "Map representing the configuration data structure which will be serialized to JSON format.",
        ));
        ConfigResource::with(
            "OS::Heat::StructuredConfig",
            "A software config whose config is a structure; StructuredDeployment replaces its get_input calls with input values.",
            ConfigKind::Structured,
            properties,
            software,
        )
    }

    pub fn cloud(software: Arc<SoftwareService>) -> Self {
        ConfigResource::with(
            "OS::Heat::CloudConfig",
            "A cloud-init configuration: #cloud-config and the YAML of cloud_config.",
            ConfigKind::Cloud,
            vec![PropertySchema::new(
                "cloud_config",
                PropertyType::Map,
                "Map representing the cloud-config data structure which will be formatted as YAML.",
            )],
            software,
        )
    }

    pub fn multipart(software: Arc<SoftwareService>) -> Self {
        ConfigResource::with(
            "OS::Heat::MultipartMime",
            "A multipart MIME message made of other configs or texts, as cloud-init reads user data.",
            ConfigKind::Multipart,
            vec![
                PropertySchema::new(
                    "parts",
                    PropertyType::List,
                    "Parts belonging to this message: [{config: a config id or text, filename, type: text|multipart, subtype}].",
                )
                .default(json!([])),
                PropertySchema::new("group", PropertyType::String, "The config's group.")
                    .default(json!(UNGROUPED)),
            ],
            software,
        )
    }

    async fn config_value(&self, request: &ResourceRequest) -> Result<Value, ResourceFailure> {
        let properties = &request.properties;
        match self.kind {
            ConfigKind::Software | ConfigKind::Structured => {
                Ok(properties.get("config").cloned().unwrap_or(Value::Null))
            }
            ConfigKind::Cloud => {
                let cloud_config = properties
                    .get("cloud_config")
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                let yaml = serde_yaml_ng::to_string(&cloud_config)
                    .map_err(|error| ResourceFailure(format!("cloud_config: {error}")))?;
                Ok(json!(format!("#cloud-config\n{yaml}")))
            }
            ConfigKind::Multipart => {
                let parts = properties
                    .get("parts")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let mut message_parts = Vec::new();
                for (index, part) in parts.iter().enumerate() {
                    let Some(part) = part.as_object() else {
                        return Err(ResourceFailure(format!(
                            "parts[{index}] must be a map with a config"
                        )));
                    };
                    let reference =
                        part.get("config").and_then(Value::as_str).ok_or_else(|| {
                            ResourceFailure(format!("parts[{index}].config is required"))
                        })?;
                    // A config id stands for that config's text.
                    let text = match self.software.get_config(&owner(request), reference).await {
                        Ok(config) => match config.config {
                            Value::String(text) => text,
                            other => other.to_string(),
                        },
                        Err(_) => reference.to_owned(),
                    };
                    let subtype = part
                        .get("subtype")
                        .and_then(Value::as_str)
                        .unwrap_or("x-shellscript");
                    let kind = part.get("type").and_then(Value::as_str).unwrap_or("text");
                    if !matches!(kind, "text" | "multipart") {
                        return Err(ResourceFailure(format!(
                            "parts[{index}].type must be text or multipart, got {kind:?}"
                        )));
                    }
                    let filename = part
                        .get("filename")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .unwrap_or_else(|| format!("part-{index:03}"));
                    message_parts.push((kind.to_owned(), subtype.to_owned(), filename, text));
                }
                Ok(json!(multipart_message(&message_parts)))
            }
        }
    }
}

/// A `multipart/mixed` message of (type, subtype, filename, body) parts.
fn multipart_message(parts: &[(String, String, String, String)]) -> String {
    let boundary = format!("==============={}==", uuid::Uuid::new_v4().simple());
    let mut message =
        format!("Content-Type: multipart/mixed; boundary=\"{boundary}\"\nMIME-Version: 1.0\n\n");
    for (kind, subtype, filename, body) in parts {
        if kind == "multipart" {
            message.push_str(&format!("--{boundary}\n{body}\n"));
            continue;
        }
        message.push_str(&format!(
            "--{boundary}\nContent-Type: text/{subtype}; charset=\"us-ascii\"\nMIME-Version: 1.0\nContent-Transfer-Encoding: 7bit\nContent-Disposition: attachment; filename=\"{filename}\"\n\n{body}\n"
        ));
    }
    message.push_str(&format!("--{boundary}--\n"));
    message
}

#[async_trait]
impl ResourceType for ConfigResource {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    /// Makes the row's config — or finds the one an earlier attempt made
    /// (same derived id), whose value is the attribute then (a multipart
    /// message made again would have another boundary).
    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let config = self.config_value(request).await?;
        let properties = &request.properties;
        let created = self
            .software
            .find_or_create_config(
                &owner(request),
                request.derived_id(CONFIG_KIND),
                NewConfig {
                    name: request.physical_resource_name(),
                    group: properties
                        .get("group")
                        .and_then(Value::as_str)
                        .unwrap_or(UNGROUPED)
                        .to_owned(),
                    config: config.clone(),
                    inputs: properties.get("inputs").cloned().unwrap_or(Value::Null),
                    outputs: properties.get("outputs").cloned().unwrap_or(Value::Null),
                    options: properties.get("options").cloned().unwrap_or(Value::Null),
                },
            )
            .await
            .map_err(failure)?;
        let mut attributes = Map::new();
        attributes.insert("config".to_owned(), created.config);
        Ok(ResourceOutcome {
            physical_id: created.id.to_string(),
            attributes,
            data: json!({ "project_id": request.project_id }),
        })
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let (Some(id), Some(project)) = (
            current.physical_id.as_deref(),
            current.data.get("project_id").and_then(Value::as_str),
        ) else {
            return Ok(());
        };
        match self
            .software
            .delete_config(&owner_of(current, project), id)
            .await
        {
            Ok(()) | Err(crate::error::Error::NotFound(_)) => Ok(()),
            Err(error) => Err(failure(error)),
        }
    }

    /// A row whose create was in flight has no config id recorded: the
    /// derived one names what that create may have made (none: deleted
    /// already). A config a deployment uses stays, as in [`Self::delete`].
    async fn resume_delete(&self, in_flight: &Resource) -> Result<(), ResourceFailure> {
        if in_flight.physical_id.is_some() {
            return self.delete(in_flight).await;
        }
        let id = super::derived_id(in_flight.stack_id, in_flight.id, CONFIG_KIND);
        self.software
            .store()
            .delete_config(None, id)
            .await
            .map(|_| ())
            .map_err(failure)
    }

    /// Every step is taken over: a create finds the config an earlier
    /// attempt made (its id derives from the row), a delete of what is
    /// gone is done, and the other steps change nothing.
    fn take_over(&self, _step: crate::domain::StackAction) -> Result<(), String> {
        Ok(())
    }
}

/// How a deployment's agent signals its outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DeploymentTransport {
    Cfn,
    TempUrl,
    Heat,
    None,
}

impl DeploymentTransport {
    fn parse(text: &str) -> Result<DeploymentTransport, ResourceFailure> {
        match text {
            "CFN_SIGNAL" => Ok(DeploymentTransport::Cfn),
            "TEMP_URL_SIGNAL" => Ok(DeploymentTransport::TempUrl),
            "HEAT_SIGNAL" => Ok(DeploymentTransport::Heat),
            "NO_SIGNAL" => Ok(DeploymentTransport::None),
            "ZAQAR_SIGNAL" => Err(ResourceFailure(
                "signal_transport ZAQAR_SIGNAL is not supported by Ember: use CFN_SIGNAL, TEMP_URL_SIGNAL or HEAT_SIGNAL".to_owned(),
            )),
            other => Err(ResourceFailure(format!(
                "signal_transport {other:?} is not one of CFN_SIGNAL, TEMP_URL_SIGNAL, HEAT_SIGNAL, NO_SIGNAL"
            ))),
        }
    }
}

/// The properties of a software (or structured) deployment; a deployment
/// group has them too, with `servers` instead of `server`.
pub(super) fn deployment_properties(structured: bool) -> Vec<PropertySchema> {
    let mut properties = vec![
        PropertySchema::new(
            "config",
            PropertyType::String,
            "ID of software configuration resource to execute when applying to the server.",
        )
        .update_allowed(),
        PropertySchema::new(
            "server",
            PropertyType::String,
            "ID of resource to apply configuration to. Normally this should be a Nova server ID.",
        )
        .required(),
        PropertySchema::new(
            "input_values",
            PropertyType::Map,
            "Input values to apply to the software configuration on this server.",
        )
        .update_allowed(),
        PropertySchema::new(
            "actions",
            PropertyType::List,
            "Which lifecycle actions of the deployment resource will result in this deployment being triggered.",
        )
        .default(json!(["CREATE", "UPDATE"]))
        .allowed_values(
            ["CREATE", "UPDATE", "DELETE", "SUSPEND", "RESUME"]
                .into_iter()
                .map(|action| json!(action))
                .collect(),
        )
        .update_allowed(),
        PropertySchema::new(
            "name",
            PropertyType::String,
            "Name of the derived config associated with this deployment. This is used to apply a sort order to the list of configurations currently deployed to a server.",
        )
        .update_allowed(),
        PropertySchema::new(
            "signal_transport",
            PropertyType::String,
            "How the server should signal the deployment output values: CFN_SIGNAL (an HTTP POST to deploy_signal_id), TEMP_URL_SIGNAL (an HTTP PUT there), HEAT_SIGNAL (an HTTP POST to deploy_signal_id, whose token is also deploy_signal_token), NO_SIGNAL (complete without waiting).",
        )
        .default(json!("CFN_SIGNAL"))
        .allowed_values(
            ["CFN_SIGNAL", "TEMP_URL_SIGNAL", "HEAT_SIGNAL", "NO_SIGNAL", "ZAQAR_SIGNAL"]
                .into_iter()
                .map(|transport| json!(transport))
                .collect(),
        ),
    ];
    if structured {
        properties.push(
            PropertySchema::new(
                "input_key",
                PropertyType::String,
                "Name of key to use for substituting inputs during deployment.",
            )
            .default(json!("get_input")),
        );
        properties.push(
            PropertySchema::new(
                "input_values_validate",
                PropertyType::String,
                "Perform a check on the input values passed to verify that each required input has a corresponding value. STRICT fails the deployment when one is missing.",
            )
            .default(json!("LAX"))
            .allowed_values(vec![json!("LAX"), json!("STRICT")]),
        );
    }
    properties
}

pub struct DeploymentResource {
    schema: ResourceTypeSchema,
    /// StructuredDeployment: `get_input` calls in a structured config are
    /// replaced by the input values.
    structured: bool,
    software: Arc<SoftwareService>,
    conditions: Arc<WaitConditions>,
}

impl DeploymentResource {
    fn with(
        type_name: &'static str,
        structured: bool,
        software: Arc<SoftwareService>,
        conditions: Arc<WaitConditions>,
    ) -> Self {
        let properties = deployment_properties(structured);
        DeploymentResource {
            schema: ResourceTypeSchema {
                type_name,
                description: "Applies a software config to a server for the actions it names and waits for the server's agent to signal the outputs.",
                properties,
                attributes: vec![
                    AttributeSchema {
                        name: "deploy_stdout",
                        description: "Captured stdout from the configuration execution.",
                    },
                    AttributeSchema {
                        name: "deploy_stderr",
                        description: "Captured stderr from the configuration execution.",
                    },
                    AttributeSchema {
                        name: "deploy_status_code",
                        description: "Returned status code from the configuration execution.",
                    },
                ],
                accepts_any_properties: false,
                // The config's outputs are attributes too.
                accepts_any_attributes: true,
            },
            structured,
            software,
            conditions,
        }
    }

    pub fn software(software: Arc<SoftwareService>, conditions: Arc<WaitConditions>) -> Self {
        DeploymentResource::with(SOFTWARE_DEPLOYMENT_TYPE, false, software, conditions)
    }

    pub fn structured(software: Arc<SoftwareService>, conditions: Arc<WaitConditions>) -> Self {
        DeploymentResource::with(STRUCTURED_DEPLOYMENT_TYPE, true, software, conditions)
    }

    fn triggered(properties: &Map<String, Value>, action: &str) -> bool {
        properties
            .get("actions")
            .and_then(Value::as_array)
            .is_some_and(|actions| actions.iter().any(|listed| listed == action))
    }

    /// Makes the derived config of `action` and returns its id.
    async fn derive(
        &self,
        request: &ResourceRequest,
        resource_id: &str,
        token: &str,
        action: &str,
    ) -> Result<uuid::Uuid, ResourceFailure> {
        let identity = owner(request);
        let properties = &request.properties;
        let source = match properties.get("config").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => Some(
                self.software
                    .get_config(&identity, id)
                    .await
                    .map_err(failure)?,
            ),
            _ => None,
        };
        let transport = DeploymentTransport::parse(
            properties
                .get("signal_transport")
                .and_then(Value::as_str)
                .unwrap_or("CFN_SIGNAL"),
        )?;
        let mut values = properties
            .get("input_values")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut inputs = Vec::new();
        for input in source.iter().flat_map(|config| config.inputs.iter()) {
            let mut input = input.clone();
            let Some(name) = input.get("name").and_then(Value::as_str).map(str::to_owned) else {
                continue;
            };
            let value = values
                .remove(&name)
                .unwrap_or_else(|| input.get("default").cloned().unwrap_or(Value::Null));
            if let Value::Object(fields) = &mut input {
                fields.insert("value".to_owned(), value);
            }
            inputs.push(input);
        }
        for (name, value) in values {
            inputs.push(json!({"name": name, "type": "String", "value": value}));
        }
        let stack_path = format!("{}/{}", request.stack_name, request.stack_id);
        let transport_name = properties
            .get("signal_transport")
            .and_then(Value::as_str)
            .unwrap_or("CFN_SIGNAL");
        let mut derived_inputs = vec![
            (
                "deploy_server_id",
                json!(properties.get("server").cloned().unwrap_or(Value::Null)),
                "ID of the server being deployed to",
            ),
            (
                "deploy_action",
                json!(action),
                "Name of the current action being deployed",
            ),
            (
                "deploy_stack_id",
                json!(stack_path),
                "ID of the stack this deployment belongs to",
            ),
            (
                "deploy_resource_name",
                json!(request.resource_name),
                "Name of this deployment resource in the stack",
            ),
            (
                "deploy_signal_transport",
                json!(transport_name),
                "How the server should signal to heat with the deployment output values.",
            ),
        ];
        let signal_url = self
            .conditions
            .token_url(request.stack_id, resource_id, token);
        match transport {
            DeploymentTransport::Cfn => {
                derived_inputs.push((
                    "deploy_signal_id",
                    json!(signal_url),
                    "ID of signal to use for signaling output values",
                ));
                derived_inputs.push((
                    "deploy_signal_verb",
                    json!("POST"),
                    "HTTP verb to use for signaling output values",
                ));
            }
            DeploymentTransport::TempUrl => {
                derived_inputs.push((
                    "deploy_signal_id",
                    json!(signal_url),
                    "ID of signal to use for signaling output values",
                ));
                derived_inputs.push((
                    "deploy_signal_verb",
                    json!("PUT"),
                    "HTTP verb to use for signaling output values",
                ));
            }
            DeploymentTransport::Heat => {
                // Heat hands out Keystone credentials of a stack user here;
                // Ember has none: the signal URL and its secret.
                derived_inputs.push((
                    "deploy_signal_id",
                    json!(signal_url),
                    "URL to signal output values to",
                ));
                derived_inputs.push((
                    "deploy_signal_verb",
                    json!("POST"),
                    "HTTP verb to use for signaling output values",
                ));
                derived_inputs.push((
                    "deploy_signal_token",
                    json!(token),
                    "The signal's secret (also the token of the URL)",
                ));
            }
            DeploymentTransport::None => {}
        }
        for (name, value, description) in derived_inputs {
            inputs.push(
                json!({"name": name, "type": "String", "description": description, "value": value}),
            );
        }
        let mut config = source
            .as_ref()
            .map(|config| config.config.clone())
            .unwrap_or_else(|| json!(""));
        if self.structured {
            let key = properties
                .get("input_key")
                .and_then(Value::as_str)
                .unwrap_or("get_input");
            let strict = properties
                .get("input_values_validate")
                .and_then(Value::as_str)
                == Some("STRICT");
            let values: Map<String, Value> = inputs
                .iter()
                .filter_map(|input| {
                    Some((
                        input.get("name")?.as_str()?.to_owned(),
                        input.get("value").cloned().unwrap_or(Value::Null),
                    ))
                })
                .collect();
            config = substitute_inputs(&config, key, &values, strict)?;
        }
        let name = properties
            .get("name")
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty())
            .map(str::to_owned)
            .or_else(|| {
                source
                    .as_ref()
                    .map(|config| config.name.clone())
                    .filter(|name| !name.is_empty())
            })
            .unwrap_or_else(|| request.physical_resource_name());
        let derived = self
            .software
            .create_config(
                &identity,
                NewConfig {
                    name,
                    group: source
                        .as_ref()
                        .map(|config| config.group.clone())
                        .filter(|group| !group.is_empty())
                        .unwrap_or_else(|| UNGROUPED.to_owned()),
                    config,
                    inputs: Value::Array(inputs),
                    outputs: Value::Array(
                        source
                            .as_ref()
                            .map(|config| config.outputs.clone())
                            .unwrap_or_default(),
                    ),
                    options: source
                        .as_ref()
                        .map(|config| Value::Object(config.options.clone()))
                        .unwrap_or(Value::Null),
                },
            )
            .await
            .map_err(failure)?;
        Ok(derived.id)
    }

    /// Triggers the deployment for `action` (creating or updating its
    /// record with a fresh derived config) and waits for its outputs.
    async fn run_action(
        &self,
        request: &ResourceRequest,
        current: Option<&Resource>,
        action: &str,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let identity = owner(request);
        let (deployment_id, token) = match current {
            Some(current) => (
                current
                    .data
                    .get("deployment_id")
                    .and_then(Value::as_str)
                    .and_then(|id| uuid::Uuid::parse_str(id).ok())
                    .unwrap_or_else(uuid::Uuid::new_v4),
                current
                    .data
                    .get("token")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(new_signal_token),
            ),
            None => (request.derived_id(DEPLOYMENT_KIND), new_signal_token()),
        };
        let physical_id = deployment_id.to_string();
        let data = json!({
            "deployment_id": physical_id,
            "token": token,
            "project_id": request.project_id,
        });
        if !Self::triggered(&request.properties, action) {
            return Ok(ResourceOutcome {
                physical_id,
                attributes: current
                    .and_then(|current| current.attributes.as_object().cloned())
                    .unwrap_or_default(),
                data,
            });
        }
        let no_signal = request
            .properties
            .get("signal_transport")
            .and_then(Value::as_str)
            == Some("NO_SIGNAL");
        let (status, reason) = if no_signal {
            ("COMPLETE", "Not waiting for outputs signal")
        } else {
            ("IN_PROGRESS", "Deploy data available")
        };
        let derived = self.derive(request, &physical_id, &token, action).await?;
        let existing = self
            .software
            .store()
            .get_deployment(Some(&request.project_id), deployment_id)
            .await
            .map_err(failure)?;
        match existing {
            None => {
                self.software
                    .create_deployment(
                        &identity,
                        NewDeployment {
                            id: Some(deployment_id),
                            config_id: derived.to_string(),
                            server_id: request
                                .properties
                                .get("server")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_owned(),
                            input_values: request
                                .properties
                                .get("input_values")
                                .cloned()
                                .unwrap_or(Value::Null),
                            action: action.to_owned(),
                            status: status.to_owned(),
                            status_reason: reason.to_owned(),
                        },
                    )
                    .await
                    .map_err(failure)?;
            }
            Some(previous) => {
                self.software
                    .update_deployment(
                        &identity,
                        &physical_id,
                        DeploymentUpdate {
                            config_id: Some(derived.to_string()),
                            input_values: request.properties.get("input_values").cloned(),
                            output_values: None,
                            action: Some(action.to_owned()),
                            status: Some(status.to_owned()),
                            status_reason: Some(reason.to_owned()),
                        },
                    )
                    .await
                    .map_err(failure)?;
                // The previous derived config goes (as in Heat).
                if previous.config_id != derived {
                    let _ = self
                        .software
                        .delete_config(&identity, &previous.config_id.to_string())
                        .await;
                }
            }
        }
        self.outputs_of(deployment_id, data).await
    }

    /// Waits until deployment `deployment_id` is decided (its agent
    /// signalled) and makes its outputs the resource's attributes.
    async fn outputs_of(
        &self,
        deployment_id: uuid::Uuid,
        data: Value,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let decided = self
            .software
            .wait_for_deployment(deployment_id)
            .await
            .map_err(failure)?
            .ok_or_else(|| ResourceFailure("the deployment was deleted while it ran".to_owned()))?;
        if decided.status == DeploymentStatus::Failed {
            return Err(ResourceFailure(format!(
                "Deployment to server failed: {}",
                decided.status_reason
            )));
        }
        let mut attributes = decided.output_values.clone();
        for name in DEPLOYMENT_OUTPUTS {
            attributes.entry(name.to_owned()).or_insert(Value::Null);
        }
        Ok(ResourceOutcome {
            physical_id: deployment_id.to_string(),
            attributes,
            data,
        })
    }

    /// The deployment of `id`, whatever project it is in (`None`: gone or
    /// never made).
    async fn deployment(
        &self,
        id: uuid::Uuid,
    ) -> Result<Option<crate::domain::software::SoftwareDeployment>, ResourceFailure> {
        self.software
            .store()
            .get_deployment(None, id)
            .await
            .map_err(failure)
    }

    /// The secret `deployment`'s agent signals with: in its derived
    /// config's signal URL (none with NO_SIGNAL: a new one, never used).
    async fn signal_secret_of(
        &self,
        deployment: &crate::domain::software::SoftwareDeployment,
    ) -> Result<String, ResourceFailure> {
        let config = self
            .software
            .store()
            .get_config(Some(&deployment.project_id), deployment.config_id)
            .await
            .map_err(failure)?;
        let token = config.and_then(|config| {
            config.inputs.iter().find_map(|input| {
                (input.get("name").and_then(Value::as_str) == Some("deploy_signal_id"))
                    .then(|| input.get("value").and_then(Value::as_str))
                    .flatten()
                    .and_then(|url| url.split_once("token=").map(|(_, token)| token.to_owned()))
            })
        });
        Ok(token.unwrap_or_else(new_signal_token))
    }

    /// Waits again for deployment `deployment`, which the engine that went
    /// away triggered for the step this engine takes over.
    async fn wait_again(
        &self,
        request: &ResourceRequest,
        deployment: &crate::domain::software::SoftwareDeployment,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let token = self.signal_secret_of(deployment).await?;
        let data = json!({
            "deployment_id": deployment.id.to_string(),
            "token": token,
            "project_id": request.project_id,
            "stack_name": request.stack_name,
        });
        self.outputs_of(deployment.id, data).await
    }

    /// Deletes the deployment record and its derived config.
    async fn forget(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let Some(project) = current.data.get("project_id").and_then(Value::as_str) else {
            return Ok(());
        };
        let identity = owner_of(current, project);
        let Some(id) = current.data.get("deployment_id").and_then(Value::as_str) else {
            return Ok(());
        };
        let config_id = match self.software.get_deployment(&identity, id).await {
            Ok(deployment) => Some(deployment.config_id),
            Err(crate::error::Error::NotFound(_)) => None,
            Err(error) => return Err(failure(error)),
        };
        match self.software.delete_deployment(&identity, id).await {
            Ok(()) | Err(crate::error::Error::NotFound(_)) => {}
            Err(error) => return Err(failure(error)),
        }
        if let Some(config_id) = config_id {
            let _ = self
                .software
                .delete_config(&identity, &config_id.to_string())
                .await;
        }
        Ok(())
    }

    /// SUSPEND or RESUME of an existing deployment (see
    /// [`Self::run_existing`]), triggered once per step: when this step
    /// triggered the deployment already — the engine that began it went
    /// away, and this one takes it over — the trigger's outcome is waited
    /// for (or taken, if its agent signalled meanwhile) instead of
    /// triggering the agent again.
    async fn run_existing_once(
        &self,
        current: &Resource,
        action: &'static str,
    ) -> Result<(), ResourceFailure> {
        let properties = current.properties.as_object().cloned().unwrap_or_default();
        if !Self::triggered(&properties, action) {
            return Ok(());
        }
        match self.triggered_in_this_step(current, action).await? {
            Some(deployment) => {
                tracing::info!(deployment_id = %deployment.id, action, resource = %current.name, "waiting again for the deployment this step triggered");
                self.outputs_of(deployment.id, current.data.clone())
                    .await
                    .map(|_| ())
            }
            None => self.run_existing(current, action).await,
        }
    }

    /// The row's deployment, when the step `current` is in triggered it
    /// already: the deployment's action is the step's, and it was made or
    /// changed after the step began (a trigger of an earlier step of the
    /// same action, and its agent's signal, came before this step's first
    /// IN_PROGRESS).
    async fn triggered_in_this_step(
        &self,
        current: &Resource,
        action: &str,
    ) -> Result<Option<crate::domain::software::SoftwareDeployment>, ResourceFailure> {
        let Some(id) = current
            .data
            .get("deployment_id")
            .and_then(Value::as_str)
            .and_then(|id| uuid::Uuid::parse_str(id).ok())
        else {
            return Ok(None);
        };
        let Some(deployment) = self.deployment(id).await? else {
            return Ok(None);
        };
        if deployment.action != action {
            return Ok(None);
        }
        let changed = deployment.updated_at.unwrap_or(deployment.created_at);
        let began = self.step_began(current).await?;
        Ok((changed >= began).then_some(deployment))
    }

    /// When the step `current` is in began: the oldest of its newest run of
    /// IN_PROGRESS events of the step's action. The engine that began the
    /// step recorded one before it acted, and an engine taking the step
    /// over records another, so the row's own `updated_at` (this
    /// attempt's) is only the answer when no event says otherwise.
    async fn step_began(
        &self,
        current: &Resource,
    ) -> Result<chrono::DateTime<chrono::Utc>, ResourceFailure> {
        let events = self
            .conditions
            .stacks()
            .list_events(&EventListQuery {
                stack_ids: vec![current.stack_id],
                resource_name: Some(current.name.clone()),
                limit: STEP_EVENTS_READ,
                descending: true,
                ..EventListQuery::default()
            })
            .await
            .map_err(failure)?;
        Ok(events
            .iter()
            .take_while(|event| {
                (event.action, event.status) == (current.action, ActionStatus::InProgress)
            })
            .last()
            .map_or(current.updated_at, |event| event.created_at))
    }

    /// DELETE, SUSPEND or RESUME of an existing deployment: triggered when
    /// named in `actions`, with the properties it was last run with.
    async fn run_existing(&self, current: &Resource, action: &str) -> Result<(), ResourceFailure> {
        let properties = current.properties.as_object().cloned().unwrap_or_default();
        if !Self::triggered(&properties, action) {
            return Ok(());
        }
        let Some(project) = current.data.get("project_id").and_then(Value::as_str) else {
            return Ok(());
        };
        let request = ResourceRequest {
            stack_id: current.stack_id,
            stack_name: current
                .data
                .get("stack_name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            project_id: project.to_owned(),
            user_id: "engine".to_owned(),
            nested_depth: 0,
            type_name: current.type_name.clone(),
            resource_name: current.name.clone(),
            resource_id: current.id,
            properties,
        };
        self.run_action(&request, Some(current), action).await?;
        Ok(())
    }
}

/// Replaces `{<key>: name}` in a structured config with the input's value;
/// with `strict`, a name without an input fails.
fn substitute_inputs(
    config: &Value,
    key: &str,
    values: &Map<String, Value>,
    strict: bool,
) -> Result<Value, ResourceFailure> {
    Ok(match config {
        Value::Object(map) if map.len() == 1 && map.contains_key(key) => {
            let name = map.get(key).and_then(Value::as_str).unwrap_or_default();
            match values.get(name) {
                Some(value) => value.clone(),
                None if strict => {
                    return Err(ResourceFailure(format!(
                        "Input {name} not found in input_values for {key}"
                    )));
                }
                None => Value::Null,
            }
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(field, value)| {
                    Ok((
                        field.clone(),
                        substitute_inputs(value, key, values, strict)?,
                    ))
                })
                .collect::<Result<_, ResourceFailure>>()?,
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| substitute_inputs(item, key, values, strict))
                .collect::<Result<_, _>>()?,
        ),
        other => other.clone(),
    })
}

#[async_trait]
impl ResourceType for DeploymentResource {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    /// The deployment still waiting for its server fails: its action was
    /// cut short (Heat's handle_<action>_cancel).
    async fn cancel(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let id = current
            .data
            .get("deployment_id")
            .and_then(Value::as_str)
            .and_then(|id| uuid::Uuid::parse_str(id).ok())
            .unwrap_or_else(|| super::derived_id(current.stack_id, current.id, DEPLOYMENT_KIND));
        self.software.cancel_deployment(id).await.map_err(failure)
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let mut outcome = self.run_action(request, None, "CREATE").await?;
        if let Value::Object(data) = &mut outcome.data {
            data.insert("stack_name".to_owned(), json!(request.stack_name));
        }
        Ok(outcome)
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let mut outcome = self.run_action(request, Some(current), "UPDATE").await?;
        if let Value::Object(data) = &mut outcome.data {
            data.insert("stack_name".to_owned(), json!(request.stack_name));
        }
        Ok(outcome)
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        self.run_existing(current, "DELETE").await?;
        self.forget(current).await
    }

    /// The deployment the engine that went away made (same derived id) is
    /// waited for again; one never made is made now.
    async fn resume_create(
        &self,
        request: &ResourceRequest,
        _in_flight: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        match self.deployment(request.derived_id(DEPLOYMENT_KIND)).await? {
            Some(deployment) => self.wait_again(request, &deployment).await,
            None => self.create(request).await,
        }
    }

    /// The update's trigger is found by when it happened: a deployment
    /// moved to UPDATE after the step began was triggered by it, and is
    /// waited for again; otherwise the update runs now.
    async fn resume_update(
        &self,
        request: &ResourceRequest,
        in_flight: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let id = in_flight
            .data
            .get("deployment_id")
            .and_then(Value::as_str)
            .and_then(|id| uuid::Uuid::parse_str(id).ok());
        let deployment = match id {
            Some(id) => self.deployment(id).await?,
            None => None,
        };
        match deployment {
            Some(deployment)
                if deployment.action == "UPDATE"
                    && deployment
                        .updated_at
                        .is_some_and(|at| at >= in_flight.updated_at) =>
            {
                self.wait_again(request, &deployment).await
            }
            _ => self.update(request, in_flight).await,
        }
    }

    /// A deployment gone is deleted; one whose DELETE the engine that went
    /// away triggered is waited for, then forgotten; otherwise the delete
    /// runs now. A row whose create was in flight has no deployment id
    /// recorded yet: the derived one names what that create made.
    async fn resume_delete(&self, in_flight: &Resource) -> Result<(), ResourceFailure> {
        let id = in_flight
            .data
            .get("deployment_id")
            .and_then(Value::as_str)
            .and_then(|id| uuid::Uuid::parse_str(id).ok())
            .unwrap_or_else(|| {
                super::derived_id(in_flight.stack_id, in_flight.id, DEPLOYMENT_KIND)
            });
        let Some(deployment) = self.deployment(id).await? else {
            return Ok(());
        };
        if deployment.action == "DELETE" {
            self.software
                .wait_for_deployment(id)
                .await
                .map_err(failure)?;
        } else {
            self.run_existing(in_flight, "DELETE").await?;
        }
        let identity = owner_of(in_flight, &deployment.project_id);
        match self
            .software
            .delete_deployment(&identity, &id.to_string())
            .await
        {
            Ok(()) | Err(crate::error::Error::NotFound(_)) => {}
            Err(error) => return Err(failure(error)),
        }
        let _ = self
            .software
            .delete_config(&identity, &deployment.config_id.to_string())
            .await;
        Ok(())
    }

    /// Every step is taken over (see the module's doc): creates, updates,
    /// deletes, suspends and resumes find the deployment an earlier attempt
    /// triggered and wait for its agent again instead of triggering it
    /// twice, and a check changes nothing.
    fn take_over(&self, _step: crate::domain::StackAction) -> Result<(), String> {
        Ok(())
    }

    async fn suspend(&self, current: &Resource) -> Result<(), ResourceFailure> {
        self.run_existing_once(current, "SUSPEND").await
    }

    async fn resume(&self, current: &Resource) -> Result<(), ResourceFailure> {
        self.run_existing_once(current, "RESUME").await
    }

    /// `server` (and the signal transport) cannot change in place.
    fn needs_replacement(&self, old: &Map<String, Value>, new: &Map<String, Value>) -> bool {
        old.get("server") != new.get("server")
            || old.get("signal_transport") != new.get("signal_transport")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_configs_take_their_inputs() {
        let config = json!({"config": {"port": {"get_input": "port"}, "list": [{"get_input": "deploy_action"}]}});
        let values = json!({"port": 80, "deploy_action": "CREATE"});
        let substituted = substitute_inputs(
            &config,
            "get_input",
            values.as_object().expect("map"),
            false,
        )
        .expect("substituted");
        assert_eq!(
            substituted,
            json!({"config": {"port": 80, "list": ["CREATE"]}})
        );
        let missing = json!({"x": {"get_input": "nope"}});
        assert_eq!(
            substitute_inputs(&missing, "get_input", &Map::new(), false).expect("lax"),
            json!({"x": null})
        );
        assert!(substitute_inputs(&missing, "get_input", &Map::new(), true).is_err());
    }

    #[test]
    fn a_multipart_message_holds_each_part() {
        let message = multipart_message(&[
            (
                "text".into(),
                "x-shellscript".into(),
                "boot.sh".into(),
                "#!/bin/sh\necho hi".into(),
            ),
            (
                "text".into(),
                "cloud-config".into(),
                "part-001".into(),
                "#cloud-config\n".into(),
            ),
        ]);
        assert!(message.starts_with("Content-Type: multipart/mixed; boundary="));
        assert!(message.contains("filename=\"boot.sh\""));
        assert!(message.contains("Content-Type: text/cloud-config"));
        assert!(message.trim_end().ends_with("--"));
    }
}
