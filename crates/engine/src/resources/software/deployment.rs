//! The deployment resource types: a derived config per triggered action,
//! applied to a server, waited for until its agent signals the outputs.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::inputs::substitute_inputs;
use super::{
    DEPLOYMENT_KIND, SOFTWARE_DEPLOYMENT_TYPE, STEP_EVENTS_READ, STRUCTURED_DEPLOYMENT_TYPE, owner,
    owner_of,
};
use crate::domain::software::{DEPLOYMENT_OUTPUTS, DeploymentStatus, UNGROUPED};
use crate::domain::{ActionStatus, Resource};
use crate::resources::wait_condition::{WaitConditions, new_signal_token};
use crate::resources::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceOutcome,
    ResourceRequest, ResourceType, ResourceTypeSchema,
};
use crate::software::{DeploymentUpdate, NewConfig, NewDeployment, SoftwareService};
use crate::store::EventListQuery;

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
            "ZAQAR_SIGNAL" => Err(ResourceFailure::new(
                "signal_transport ZAQAR_SIGNAL is not supported by Ember: use CFN_SIGNAL, TEMP_URL_SIGNAL or HEAT_SIGNAL".to_owned(),
            )),
            other => Err(ResourceFailure::new(format!(
                "signal_transport {other:?} is not one of CFN_SIGNAL, TEMP_URL_SIGNAL, HEAT_SIGNAL, NO_SIGNAL"
            ))),
        }
    }
}

/// The properties of a software (or structured) deployment; a deployment
/// group has them too, with `servers` instead of `server`.
pub(in crate::resources) fn deployment_properties(structured: bool) -> Vec<PropertySchema> {
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
            Some(id) if !id.is_empty() => Some(self.software.get_config(&identity, id).await?),
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
            .await?;
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
            .await?;
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
                    .await?;
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
                    .await?;
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
            .await?
            .ok_or_else(|| {
                ResourceFailure::new("the deployment was deleted while it ran".to_owned())
            })?;
        if decided.status == DeploymentStatus::Failed {
            return Err(ResourceFailure::new(format!(
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
            .map_err(ResourceFailure::from)
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
            .await?;
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
            Err(error) => return Err(ResourceFailure::from(error)),
        };
        match self.software.delete_deployment(&identity, id).await {
            Ok(()) | Err(crate::error::Error::NotFound(_)) => {}
            Err(error) => return Err(ResourceFailure::from(error)),
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
            .await?;
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
            .unwrap_or_else(|| {
                crate::resources::derived_id(current.stack_id, current.id, DEPLOYMENT_KIND)
            });
        self.software
            .cancel_deployment(id)
            .await
            .map_err(ResourceFailure::from)
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
                crate::resources::derived_id(in_flight.stack_id, in_flight.id, DEPLOYMENT_KIND)
            });
        let Some(deployment) = self.deployment(id).await? else {
            return Ok(());
        };
        if deployment.action == "DELETE" {
            self.software.wait_for_deployment(id).await?;
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
            Err(error) => return Err(ResourceFailure::from(error)),
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
