//! Software configuration, the application layer: configs (immutable),
//! deployments of them to servers, the metadata an agent on a server
//! polls, and the signals agents send back with a deployment's outputs.
//! A deployment resource waiting for its outputs is woken the moment its
//! deployment changes on this engine (and polls for changes another
//! replica made).

use std::sync::Arc;
use std::time::Duration;

use ember_runtime::Identity;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::domain::quota::QuotaKind;
use crate::domain::software::{
    DeploymentStatus, SoftwareConfig, SoftwareDeployment, apply_outputs, normalise_io,
};
use crate::error::{Error, Result};
use crate::resources::wait_condition::WaitConditions;
use crate::store::quotas::Usage;
use crate::store::software::{DeploymentChange, SoftwareStore};

/// The most configs one list returns.
pub const MAX_PAGE: u64 = 1000;

/// A config to create, as the caller gave it.
#[derive(Debug, Clone, Default)]
pub struct NewConfig {
    pub name: String,
    pub group: String,
    pub config: Value,
    pub inputs: Value,
    pub outputs: Value,
    pub options: Value,
}

/// A deployment to create, as the caller gave it.
#[derive(Debug, Clone, Default)]
pub struct NewDeployment {
    /// Set by the deployment resources (the resource's physical id).
    pub id: Option<Uuid>,
    pub config_id: String,
    pub server_id: String,
    pub input_values: Value,
    pub action: String,
    pub status: String,
    pub status_reason: String,
}

/// A change of a deployment, as the caller gave it (`None` = unchanged).
#[derive(Debug, Clone, Default)]
pub struct DeploymentUpdate {
    pub config_id: Option<String>,
    pub input_values: Option<Value>,
    pub output_values: Option<Value>,
    pub action: Option<String>,
    pub status: Option<String>,
    pub status_reason: Option<String>,
}

pub struct SoftwareService {
    store: Arc<dyn SoftwareStore>,
    waiters: Arc<WaitConditions>,
    /// The quotas every config and deployment made is checked against
    /// (none in unit tests).
    quotas: Option<Arc<crate::quotas::Quotas>>,
}

/// The longest a config's `config` text may be: Heat's
/// `max_template_size` (a config is template content), 512 KiB.
pub const MAX_CONFIG_BYTES: usize = 512 * 1024;

/// Whose objects a caller may see: its project's, or any for an admin
/// asking for every project.
fn scope(identity: &Identity, all_projects: bool) -> Result<Option<&str>> {
    if all_projects {
        if identity.is_admin() {
            return Ok(None);
        }
        return Err(Error::Forbidden(
            "only an admin may list every project's software configs".to_owned(),
        ));
    }
    Ok(Some(identity.project_id.as_str()))
}

fn parse_id(what: &str, id: &str) -> Result<Uuid> {
    Uuid::parse_str(id.trim()).map_err(|_| {
        Error::NotFound(format!(
            "{what} {:?} not found",
            ember_runtime::quote::quoted(id)
        ))
    })
}

fn object(what: &str, value: Value) -> Result<Map<String, Value>> {
    match value {
        Value::Null => Ok(Map::new()),
        Value::Object(map) => Ok(map),
        other => Err(Error::InvalidInput(format!(
            "{what} must be a map, got {}",
            ember_runtime::quote::quoted(&other.to_string())
        ))),
    }
}

fn status(text: &str) -> Result<DeploymentStatus> {
    DeploymentStatus::parse(text).ok_or_else(|| {
        Error::InvalidInput(format!(
            "status must be IN_PROGRESS, COMPLETE or FAILED, got {:?}",
            ember_runtime::quote::quoted(text)
        ))
    })
}

/// A config of the caller's project with `id`, checked and normalised.
fn new_config(identity: &Identity, id: Uuid, new: NewConfig) -> Result<SoftwareConfig> {
    check_length("name", &new.name, 255)?;
    check_length("group", &new.group, 255)?;
    let size = match &new.config {
        Value::String(text) => text.len(),
        structured => structured.to_string().len(),
    };
    if size > MAX_CONFIG_BYTES {
        return Err(Error::InvalidInput(format!(
            "config is {size} bytes long: a software config holds at most {MAX_CONFIG_BYTES} bytes"
        )));
    }
    let inputs = normalise_io(&new.inputs, false).map_err(Error::InvalidInput)?;
    let outputs = normalise_io(&new.outputs, true).map_err(Error::InvalidInput)?;
    Ok(SoftwareConfig {
        id,
        project_id: identity.project_id.clone(),
        name: new.name,
        group: new.group,
        config: new.config,
        inputs,
        outputs,
        options: object("options", new.options)?,
        created_at: ember_runtime::time::now(),
    })
}

fn check_length(what: &str, text: &str, most: usize) -> Result<()> {
    if text.chars().count() > most {
        return Err(Error::InvalidInput(format!(
            "{what} is longer than {most} characters: {:?}",
            ember_runtime::quote::quoted(text)
        )));
    }
    Ok(())
}

impl SoftwareService {
    /// The software config service, checking every config and deployment
    /// made against `quotas` (`None`, as unit tests want: none).
    pub fn new(
        store: Arc<dyn SoftwareStore>,
        waiters: Arc<WaitConditions>,
        quotas: Option<Arc<crate::quotas::Quotas>>,
    ) -> Arc<SoftwareService> {
        Arc::new(SoftwareService {
            store,
            waiters,
            quotas,
        })
    }

    /// Whether the caller's project may hold one more of `kind`, counted
    /// as `usage`.
    async fn admit_one_more(
        &self,
        identity: &Identity,
        kind: QuotaKind,
        usage: Usage,
    ) -> Result<()> {
        match self.quotas.as_ref() {
            Some(quotas) => quotas.admit(&identity.project_id, kind, usage, 1).await,
            None => Ok(()),
        }
    }

    pub async fn create_config(
        &self,
        identity: &Identity,
        new: NewConfig,
    ) -> Result<SoftwareConfig> {
        let config = new_config(identity, Uuid::new_v4(), new)?;
        self.admit_one_more(identity, QuotaKind::SoftwareConfigs, Usage::SoftwareConfigs)
            .await?;
        self.store.create_config(&config).await?;
        Ok(config)
    }

    /// The config of the caller's project with `id`, created from `new`
    /// unless it exists: a stack resource whose create runs again (another
    /// engine took the step over after the one that began it went away)
    /// derives the same id and finds the config the earlier attempt made,
    /// as it was made, instead of making a second. The insert comes first
    /// (a create is almost always the first attempt); only one that fails
    /// reads what holds the id.
    pub async fn find_or_create_config(
        &self,
        identity: &Identity,
        id: Uuid,
        new: NewConfig,
    ) -> Result<SoftwareConfig> {
        let config = new_config(identity, id, new)?;
        // A config the earlier attempt made is found, even at the quota.
        let admitted = self
            .admit_one_more(identity, QuotaKind::SoftwareConfigs, Usage::SoftwareConfigs)
            .await;
        let created = match admitted {
            Ok(()) => self.store.create_config(&config).await,
            Err(refused) => Err(refused),
        };
        match created {
            Ok(()) => Ok(config),
            Err(error) => match self
                .store
                .get_config(Some(identity.project_id.as_str()), id)
                .await?
            {
                Some(existing) => Ok(existing),
                None => Err(error),
            },
        }
    }

    pub async fn get_config(&self, identity: &Identity, id: &str) -> Result<SoftwareConfig> {
        let uuid = parse_id("software config", id)?;
        let project = if identity.is_admin() {
            None
        } else {
            Some(identity.project_id.as_str())
        };
        self.store
            .get_config(project, uuid)
            .await?
            .ok_or_else(|| Error::NotFound(format!("Software config with id {uuid} not found")))
    }

    pub async fn list_configs(
        &self,
        identity: &Identity,
        limit: Option<u64>,
        marker: Option<&str>,
        all_projects: bool,
    ) -> Result<Vec<SoftwareConfig>> {
        let project = scope(identity, all_projects)?;
        let marker = marker
            .filter(|marker| !marker.is_empty())
            .map(|marker| parse_id("marker", marker))
            .transpose()?;
        self.store
            .list_configs(project, limit.unwrap_or(MAX_PAGE).min(MAX_PAGE), marker)
            .await
    }

    pub async fn delete_config(&self, identity: &Identity, id: &str) -> Result<()> {
        let uuid = parse_id("software config", id)?;
        if self
            .store
            .delete_config(Some(&identity.project_id), uuid)
            .await?
        {
            Ok(())
        } else {
            Err(Error::NotFound(format!(
                "Software config with id {uuid} not found"
            )))
        }
    }

    pub async fn create_deployment(
        &self,
        identity: &Identity,
        new: NewDeployment,
    ) -> Result<SoftwareDeployment> {
        if new.server_id.trim().is_empty() {
            return Err(Error::InvalidInput("server_id is required".to_owned()));
        }
        check_length("server_id", &new.server_id, 255)?;
        check_length("action", &new.action, 32)?;
        self.admit_one_more(
            identity,
            QuotaKind::SoftwareDeployments,
            Usage::SoftwareDeployments,
        )
        .await?;
        let config =
            self.get_config(identity, &new.config_id)
                .await
                .map_err(|error| match error {
                    Error::NotFound(message) => {
                        Error::InvalidInput(format!("config_id: {message}"))
                    }
                    other => other,
                })?;
        let deployment = SoftwareDeployment {
            id: new.id.unwrap_or_else(Uuid::new_v4),
            project_id: identity.project_id.clone(),
            server_id: new.server_id,
            config_id: config.id,
            input_values: object("input_values", new.input_values)?,
            output_values: Map::new(),
            action: if new.action.is_empty() {
                "UPDATE".to_owned()
            } else {
                new.action
            },
            status: if new.status.is_empty() {
                DeploymentStatus::InProgress
            } else {
                status(&new.status)?
            },
            status_reason: new.status_reason,
            created_at: ember_runtime::time::now(),
            updated_at: None,
        };
        self.store.create_deployment(&deployment).await?;
        Ok(deployment)
    }

    pub async fn get_deployment(
        &self,
        identity: &Identity,
        id: &str,
    ) -> Result<SoftwareDeployment> {
        let uuid = parse_id("software deployment", id)?;
        self.store
            .get_deployment(Some(&identity.project_id), uuid)
            .await?
            .ok_or_else(|| Error::NotFound(format!("Software deployment with id {uuid} not found")))
    }

    pub async fn list_deployments(
        &self,
        identity: &Identity,
        server_id: Option<&str>,
    ) -> Result<Vec<SoftwareDeployment>> {
        self.store
            .list_deployments(Some(&identity.project_id), server_id)
            .await
    }

    /// An update by a user or an agent. Outputs sent with an
    /// IN_PROGRESS deployment and no status decide it as a signal does.
    pub async fn update_deployment(
        &self,
        identity: &Identity,
        id: &str,
        update: DeploymentUpdate,
    ) -> Result<SoftwareDeployment> {
        let current = self.get_deployment(identity, id).await?;
        let config_id = match &update.config_id {
            Some(config_id) => Some(self.get_config(identity, config_id).await?.id),
            None => None,
        };
        let change = DeploymentChange {
            config_id,
            input_values: update
                .input_values
                .map(|value| object("input_values", value))
                .transpose()?,
            output_values: update
                .output_values
                .map(|value| object("output_values", value))
                .transpose()?,
            action: update.action,
            status: update.status.as_deref().map(status).transpose()?,
            status_reason: update.status_reason,
            only_if_status: None,
        };
        let updated = self
            .store
            .update_deployment(Some(&identity.project_id), current.id, &change)
            .await?
            .ok_or_else(|| {
                Error::NotFound(format!(
                    "Software deployment with id {} not found",
                    current.id
                ))
            })?;
        self.waiters.wake(&deployment_key(updated.id));
        Ok(updated)
    }

    /// Fails deployment `id` if it still waits for its server (Heat's
    /// `Deployment cancelled.`): the resource's action was cut short.
    pub async fn cancel_deployment(&self, id: Uuid) -> Result<()> {
        let change = DeploymentChange {
            status: Some(DeploymentStatus::Failed),
            status_reason: Some("Deployment cancelled.".to_owned()),
            only_if_status: Some(DeploymentStatus::InProgress),
            ..DeploymentChange::default()
        };
        if self
            .store
            .update_deployment(None, id, &change)
            .await?
            .is_some()
        {
            self.waiters.wake(&deployment_key(id));
        }
        Ok(())
    }

    pub async fn delete_deployment(&self, identity: &Identity, id: &str) -> Result<()> {
        let uuid = parse_id("software deployment", id)?;
        if self
            .store
            .delete_deployment(Some(&identity.project_id), uuid)
            .await?
        {
            self.waiters.wake(&deployment_key(uuid));
            Ok(())
        } else {
            Err(Error::NotFound(format!(
                "Software deployment with id {uuid} not found"
            )))
        }
    }

    /// What an agent on `server_id` polls: the configs of the server's
    /// deployments (with their input values), ordered by config name.
    pub async fn server_metadata(
        &self,
        identity: &Identity,
        server_id: &str,
    ) -> Result<Vec<SoftwareConfig>> {
        if server_id.trim().is_empty() {
            return Err(Error::InvalidInput(
                "server_id must be specified".to_owned(),
            ));
        }
        self.store
            .server_configs(Some(&identity.project_id), server_id)
            .await
    }

    /// The configs of `server_id`'s deployments in `project_id`, as
    /// [`Self::server_metadata`] gives them, for the server resource's own
    /// metadata (`deployments`, what Heat's collector reads).
    pub async fn project_server_configs(
        &self,
        project_id: &str,
        server_id: &str,
    ) -> Result<Vec<SoftwareConfig>> {
        self.store.server_configs(Some(project_id), server_id).await
    }

    /// An agent's signal with a deployment's outputs (Heat's
    /// signal_software_deployment): decides an IN_PROGRESS deployment once
    /// (a second signal finds it decided and changes nothing). Returns
    /// what happened, for the resource's event.
    pub async fn signal_deployment(
        &self,
        project_id: Option<&str>,
        id: Uuid,
        details: &Value,
    ) -> Result<String> {
        let deployment = self
            .store
            .get_deployment(project_id, id)
            .await?
            .ok_or_else(|| {
                Error::NotFound(format!("Software deployment with id {id} not found"))
            })?;
        if deployment.status != DeploymentStatus::InProgress {
            return Ok(format!(
                "deployment {id} is {} already: signal ignored",
                deployment.status.as_str()
            ));
        }
        let empty = Map::new();
        let details = details.as_object().unwrap_or(&empty);
        let config_outputs = self
            .store
            .get_config(None, deployment.config_id)
            .await?
            .map(|config| config.outputs)
            .unwrap_or_default();
        let (outputs, status, reason) =
            apply_outputs(&deployment.output_values, &config_outputs, details);
        let change = DeploymentChange {
            output_values: Some(outputs),
            status: Some(status),
            status_reason: Some(reason),
            only_if_status: Some(DeploymentStatus::InProgress),
            ..DeploymentChange::default()
        };
        let decided = self
            .store
            .update_deployment(project_id, id, &change)
            .await?;
        self.waiters.wake(&deployment_key(id));
        Ok(match decided {
            Some(decided) if decided.status == DeploymentStatus::Failed => {
                format!("deployment {id} failed ({})", decided.status_reason)
            }
            Some(_) => format!("deployment {id} succeeded"),
            None => format!("deployment {id} was decided meanwhile: signal ignored"),
        })
    }

    /// Holds until deployment `id` leaves IN_PROGRESS (or is gone).
    pub async fn wait_for_deployment(&self, id: Uuid) -> Result<Option<SoftwareDeployment>> {
        self.waiters
            .wait_until(&deployment_key(id), || async {
                let deployment = self.store.get_deployment(None, id).await?;
                Ok(match deployment {
                    Some(deployment) if deployment.status == DeploymentStatus::InProgress => None,
                    other => Some(other),
                })
            })
            .await
    }

    pub fn store(&self) -> &Arc<dyn SoftwareStore> {
        &self.store
    }
}

fn deployment_key(id: Uuid) -> String {
    format!("deployment:{id}")
}

/// How long a waiter sleeps between reads when nothing woke it.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);
