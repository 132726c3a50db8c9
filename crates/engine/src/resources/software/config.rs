//! The config resource types: immutable software configs made from the
//! template (plain, structured, cloud-config, multipart MIME).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{CONFIG_KIND, owner, owner_of};
use crate::domain::Resource;
use crate::domain::software::UNGROUPED;
use crate::resources::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceOutcome,
    ResourceRequest, ResourceType, ResourceTypeSchema,
};
use crate::software::{NewConfig, SoftwareService};

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
                    .map_err(|error| ResourceFailure::new(format!("cloud_config: {error}")))?;
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
                        return Err(ResourceFailure::new(format!(
                            "parts[{index}] must be a map with a config"
                        )));
                    };
                    let reference =
                        part.get("config").and_then(Value::as_str).ok_or_else(|| {
                            ResourceFailure::new(format!("parts[{index}].config is required"))
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
                        return Err(ResourceFailure::new(format!(
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
pub(super) fn multipart_message(parts: &[(String, String, String, String)]) -> String {
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
            .await?;
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
            Err(error) => Err(ResourceFailure::from(error)),
        }
    }

    /// A row whose create was in flight has no config id recorded: the
    /// derived one names what that create may have made (none: deleted
    /// already). A config a deployment uses stays, as in [`Self::delete`].
    async fn resume_delete(&self, in_flight: &Resource) -> Result<(), ResourceFailure> {
        if in_flight.physical_id.is_some() {
            return self.delete(in_flight).await;
        }
        let id = crate::resources::derived_id(in_flight.stack_id, in_flight.id, CONFIG_KIND);
        self.software
            .store()
            .delete_config(None, id)
            .await
            .map(|_| ())
            .map_err(ResourceFailure::from)
    }

    /// Every step is taken over: a create finds the config an earlier
    /// attempt made (its id derives from the row), a delete of what is
    /// gone is done, and the other steps change nothing.
    fn take_over(&self, _step: crate::domain::StackAction) -> Result<(), String> {
        Ok(())
    }
}
