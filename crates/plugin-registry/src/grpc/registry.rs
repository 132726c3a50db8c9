//! Thin gRPC handlers: check the caller is an admin, convert, call the store.

use std::sync::Arc;

use ember_proto::common::v1::StackOperation;
use ember_proto::pluginregistry::v1 as pb;
use ember_runtime::Identity;
use ember_runtime::time::to_timestamp;
use tonic::{Request, Response, Status};

use crate::domain::{FailureMode, NewPlugin, Operation, Plugin};
use crate::error::Error;
use crate::store::PluginStore;

pub struct PluginRegistryHandler {
    store: Arc<dyn PluginStore>,
}

impl PluginRegistryHandler {
    pub fn new(store: Arc<dyn PluginStore>) -> Self {
        PluginRegistryHandler { store }
    }
}

/// The registry changes what every stack operation does: admins only.
fn require_admin<T>(request: &Request<T>) -> Result<(), Status> {
    let identity = Identity::of(request)?;
    if identity.is_admin() {
        Ok(())
    } else {
        Err(Error::Forbidden(format!(
            "the plugin registry is admin only: user {:?} has roles [{}]",
            identity.user_id,
            identity.roles.join(", ")
        ))
        .into())
    }
}

#[tonic::async_trait]
impl pb::plugin_registry_service_server::PluginRegistryService for PluginRegistryHandler {
    async fn register_plugin(
        &self,
        request: Request<pb::RegisterPluginRequest>,
    ) -> Result<Response<pb::Plugin>, Status> {
        require_admin(&request)?;
        let plugin =
            new_plugin_from_proto(request.into_inner())?.into_plugin(ember_runtime::time::now())?;
        self.store.register_plugin(&plugin).await?;
        tracing::info!(plugin = %plugin.name, ordinal = plugin.ordinal, "plugin registered");
        Ok(Response::new(plugin_to_proto(&plugin)))
    }

    async fn get_plugin(
        &self,
        request: Request<pb::GetPluginRequest>,
    ) -> Result<Response<pb::Plugin>, Status> {
        require_admin(&request)?;
        let name = request.into_inner().name;
        let plugin = self
            .store
            .get_plugin(&name)
            .await?
            .ok_or_else(|| Error::NotFound(format!("no plugin named {name:?}")))?;
        Ok(Response::new(plugin_to_proto(&plugin)))
    }

    async fn list_plugins(
        &self,
        request: Request<pb::ListPluginsRequest>,
    ) -> Result<Response<pb::ListPluginsResponse>, Status> {
        require_admin(&request)?;
        let plugins = self.store.list_plugins().await?;
        Ok(Response::new(pb::ListPluginsResponse {
            plugins: plugins.iter().map(plugin_to_proto).collect(),
        }))
    }
}

fn operation_from_proto(value: i32) -> Result<Operation, Error> {
    let operation = StackOperation::try_from(value).map_err(|_| {
        Error::InvalidInput(format!("operations: unknown operation number {value}"))
    })?;
    Ok(match operation {
        StackOperation::Unspecified => {
            return Err(Error::InvalidInput(
                "operations: STACK_OPERATION_UNSPECIFIED is not an operation".to_owned(),
            ));
        }
        StackOperation::Create => Operation::Create,
        StackOperation::Update => Operation::Update,
        StackOperation::Delete => Operation::Delete,
        StackOperation::Abandon => Operation::Abandon,
        StackOperation::Adopt => Operation::Adopt,
        StackOperation::Check => Operation::Check,
        StackOperation::Suspend => Operation::Suspend,
        StackOperation::Resume => Operation::Resume,
        StackOperation::Rollback => Operation::Rollback,
        StackOperation::Lock => Operation::Lock,
        StackOperation::Unlock => Operation::Unlock,
    })
}

fn operation_to_proto(operation: Operation) -> StackOperation {
    match operation {
        Operation::Create => StackOperation::Create,
        Operation::Update => StackOperation::Update,
        Operation::Delete => StackOperation::Delete,
        Operation::Abandon => StackOperation::Abandon,
        Operation::Adopt => StackOperation::Adopt,
        Operation::Check => StackOperation::Check,
        Operation::Suspend => StackOperation::Suspend,
        Operation::Resume => StackOperation::Resume,
        Operation::Rollback => StackOperation::Rollback,
        Operation::Lock => StackOperation::Lock,
        Operation::Unlock => StackOperation::Unlock,
    }
}

fn new_plugin_from_proto(request: pb::RegisterPluginRequest) -> Result<NewPlugin, Error> {
    let failure_mode = match pb::FailureMode::try_from(request.failure_mode) {
        Ok(pb::FailureMode::Unspecified | pb::FailureMode::Fail) => FailureMode::Fail,
        Ok(pb::FailureMode::Warn) => FailureMode::Warn,
        Err(_) => {
            return Err(Error::InvalidInput(format!(
                "failure_mode: unknown value {}",
                request.failure_mode
            )));
        }
    };
    Ok(NewPlugin {
        name: request.name,
        endpoint: request.endpoint,
        ordinal: request.ordinal,
        operations: request
            .operations
            .into_iter()
            .map(operation_from_proto)
            .collect::<Result<_, _>>()?,
        project_ids: request.project_ids,
        failure_mode,
        timeout_ms: (request.timeout_ms != 0).then_some(request.timeout_ms),
        enabled: !request.disabled,
    })
}

fn plugin_to_proto(plugin: &Plugin) -> pb::Plugin {
    pb::Plugin {
        name: plugin.name.clone(),
        endpoint: plugin.endpoint.clone(),
        ordinal: plugin.ordinal,
        operations: plugin
            .operations
            .iter()
            .map(|operation| operation_to_proto(*operation) as i32)
            .collect(),
        project_ids: plugin.project_ids.clone(),
        failure_mode: match plugin.failure_mode {
            FailureMode::Fail => pb::FailureMode::Fail,
            FailureMode::Warn => pb::FailureMode::Warn,
        } as i32,
        timeout_ms: plugin.timeout_ms,
        enabled: plugin.enabled,
        created_at: Some(to_timestamp(plugin.created_at)),
        updated_at: Some(to_timestamp(plugin.updated_at)),
    }
}
