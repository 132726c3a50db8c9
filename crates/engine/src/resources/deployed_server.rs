//! `OS::Heat::DeployedServer`: a server Ember does not create — one that
//! exists already, its agent polling for the software deployments that
//! target it. The resource gives it an id (what deployments' `server`
//! names) and tells its agent where to look (`os_collect_config`): the
//! deployments' metadata URL on the gateway, read with the agent's own
//! token (Ember makes no stack users; see docs/guide/stacks.md, "Software
//! configuration").
//!
//! It makes nothing but its row, and its id derives from the row
//! ([`ResourceRequest::derived_id`]): a step another engine had in flight
//! when it went away is redone, and a create redone gives the server the
//! same id as the earlier attempt, not a second one.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::wait_condition::WaitConditions;
use super::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceOutcome,
    ResourceRequest, ResourceType, ResourceTypeSchema,
};
use crate::domain::Resource;

pub const DEPLOYED_SERVER_TYPE: &str = "OS::Heat::DeployedServer";

/// What the server's id is derived for (see
/// [`ResourceRequest::derived_id`]).
const SERVER_KIND: &str = "deployed server";

pub struct DeployedServer {
    schema: ResourceTypeSchema,
    conditions: Arc<WaitConditions>,
}

impl DeployedServer {
    pub fn new(conditions: Arc<WaitConditions>) -> Self {
        DeployedServer {
            schema: ResourceTypeSchema {
                type_name: DEPLOYED_SERVER_TYPE,
                description: "A server that exists already (not created by the stack), the target of software deployments.",
                properties: vec![
                    PropertySchema::new("name", PropertyType::String, "Server name.")
                        .update_allowed(),
                    PropertySchema::new(
                        "metadata",
                        PropertyType::Map,
                        "Arbitrary key/value metadata to store for this server.",
                    )
                    .update_allowed(),
                    PropertySchema::new(
                        "software_config_transport",
                        PropertyType::String,
                        "How the server's agent receives the metadata its software configuration needs: POLL_SERVER_HEAT (the deployments' metadata URL, read with the agent's token) or POLL_TEMP_URL (the same URL).",
                    )
                    .default(json!("POLL_TEMP_URL"))
                    .allowed_values(
                        ["POLL_SERVER_CFN", "POLL_SERVER_HEAT", "POLL_TEMP_URL", "ZAQAR_MESSAGE"]
                            .into_iter()
                            .map(|transport| json!(transport))
                            .collect(),
                    ),
                    PropertySchema::new(
                        "deployment_swift_data",
                        PropertyType::Map,
                        "Swift container and object to use for storing deployment data (accepted for Heat's templates; Ember serves the data itself).",
                    ),
                ],
                attributes: vec![
                    AttributeSchema {
                        name: "name",
                        description: "Name of the server.",
                    },
                    AttributeSchema {
                        name: "networks",
                        description: "The server's networks (none known to Ember).",
                    },
                    AttributeSchema {
                        name: "os_collect_config",
                        description: "The os-collect-config configuration for the server's local agent.",
                    },
                ],
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
            conditions,
        }
    }

    fn attributes(
        &self,
        request: &ResourceRequest,
        id: &str,
    ) -> Result<Map<String, Value>, ResourceFailure> {
        let transport = request
            .properties
            .get("software_config_transport")
            .and_then(Value::as_str)
            .unwrap_or("POLL_TEMP_URL");
        if matches!(transport, "POLL_SERVER_CFN" | "ZAQAR_MESSAGE") {
            return Err(ResourceFailure::new(format!(
                "software_config_transport {transport}: Ember has no CFN metadata API nor Zaqar; use POLL_SERVER_HEAT or POLL_TEMP_URL"
            )));
        }
        let name = request
            .properties
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| request.resource_name.clone());
        let public = self.conditions.public_url();
        let metadata_url = format!(
            "{public}/orchestration/v1/{}/software_deployments/metadata/{id}",
            request.project_id
        );
        let collect = if transport == "POLL_SERVER_HEAT" {
            json!({"heat": {
                "auth_url": format!("{public}/identity/v3"),
                "project_id": request.project_id,
                "stack_id": request.stack_id.to_string(),
                "resource_name": request.resource_name,
                "server_id": id,
            }})
        } else {
            json!({"request": {"metadata_url": metadata_url}})
        };
        let mut attributes = Map::new();
        attributes.insert("name".to_owned(), json!(name));
        attributes.insert("networks".to_owned(), json!({}));
        attributes.insert("os_collect_config".to_owned(), collect);
        Ok(attributes)
    }
}

#[async_trait]
impl ResourceType for DeployedServer {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let id = request.derived_id(SERVER_KIND).to_string();
        Ok(ResourceOutcome {
            attributes: self.attributes(request, &id)?,
            physical_id: id,
            data: Value::Null,
        })
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let id = current
            .physical_id
            .clone()
            .unwrap_or_else(|| request.derived_id(SERVER_KIND).to_string());
        Ok(ResourceOutcome {
            attributes: self.attributes(request, &id)?,
            physical_id: id,
            data: Value::Null,
        })
    }

    /// It acts on nothing but its row, and a create or update redone after
    /// a take-over gives the same id (see the module's doc).
    fn acts_outside_its_row(&self) -> bool {
        false
    }

    /// Only the transport's change replaces it (the agent must be told).
    fn needs_replacement(&self, old: &Map<String, Value>, new: &Map<String, Value>) -> bool {
        old.get("software_config_transport") != new.get("software_config_transport")
    }
}
