//! A node's physical resource: an instance (`ember.instance-1.0`) or a
//! stack (`os.heat.stack-1.0`), created, checked and deleted through the
//! engine's own instance service and stack operations, as the node's
//! owner. Waits poll the resource with a deadline; deletes of a resource
//! already gone succeed, so a NODE_DELETE can safely run twice.

use std::time::{Duration, Instant};

use ember_runtime::Identity;
use uuid::Uuid;

use super::ClusterService;
use crate::domain::cluster::{Node, NodeStatus, Profile, ProfileKind};
use crate::domain::instance::{InstanceStatus, NewInstance};
use crate::domain::stack::{ActionStatus as StackStatus, StackAction};
use crate::error::{Error, Result};
use crate::stacks::CreateStack;

/// How long a physical create or delete may take before the node is ERROR.
pub const PHYSICAL_TIMEOUT: Duration = Duration::from_secs(600);

async fn pause(started: Instant, what: &str) -> Result<()> {
    if started.elapsed() > PHYSICAL_TIMEOUT {
        return Err(Error::Conflict(format!(
            "{what} did not finish within {PHYSICAL_TIMEOUT:?}"
        )));
    }
    let waited = started.elapsed().as_millis();
    let step = if waited < 20 {
        1
    } else if waited < 200 {
        5
    } else if waited < 2000 {
        25
    } else {
        200
    };
    tokio::time::sleep(Duration::from_millis(step)).await;
    Ok(())
}

impl ClusterService {
    /// Creates the node's resource and waits for it: Ok(physical id) when
    /// it is ACTIVE / CREATE_COMPLETE, Err with the reason otherwise (the
    /// physical id, if any, is in the node already).
    pub(super) async fn create_physical(
        &self,
        caller: &Identity,
        node: &mut Node,
        profile: &Profile,
    ) -> Result<()> {
        let started = Instant::now();
        match &profile.spec.kind {
            ProfileKind::Instance {
                flavor,
                image,
                metadata,
            } => {
                let instance = self
                    .instances
                    .create(
                        caller,
                        NewInstance {
                            name: node.name.clone(),
                            flavor: flavor.clone(),
                            image: image.clone(),
                            metadata: metadata.clone(),
                        },
                    )
                    .await?;
                node.physical_id = Some(instance.uuid.to_string());
                self.store.save_node(node).await?;
                loop {
                    let instance = self.instances.get(caller, instance.uuid).await?;
                    match instance.status {
                        InstanceStatus::Active => return Ok(()),
                        InstanceStatus::Error => {
                            return Err(Error::Conflict(format!(
                                "instance {} failed: {}",
                                instance.uuid, instance.status_reason
                            )));
                        }
                        InstanceStatus::Deleting | InstanceStatus::Deleted => {
                            return Err(Error::Conflict(format!(
                                "instance {} was deleted while building",
                                instance.uuid
                            )));
                        }
                        _ => pause(started, "instance build").await?,
                    }
                }
            }
            ProfileKind::Stack {
                template,
                parameters,
                environment,
                files,
                timeout_mins,
            } => {
                let stack = self
                    .stacks
                    .create_stack(
                        caller,
                        CreateStack {
                            name: format!("node-{}", node.id.simple()),
                            template: template.clone(),
                            environment: environment.clone(),
                            environment_files: Vec::new(),
                            files: files.clone(),
                            parameters: parameters.clone(),
                            timeout_mins: *timeout_mins,
                            disable_rollback: true,
                            tags: vec![format!("cluster_node={}", node.id)],
                            adopt_data: None,
                        },
                    )
                    .await?;
                node.physical_id = Some(stack.id.to_string());
                self.store.save_node(node).await?;
                loop {
                    let stack = self
                        .stacks
                        .find_stack(caller, &stack.id.to_string())
                        .await?;
                    match stack.status {
                        StackStatus::Complete => return Ok(()),
                        StackStatus::Failed => {
                            return Err(Error::Conflict(format!(
                                "stack {} failed: {}",
                                stack.id, stack.status_reason
                            )));
                        }
                        StackStatus::InProgress => pause(started, "stack create").await?,
                    }
                }
            }
        }
    }

    /// Deletes the node's resource and waits until it is gone.
    pub(super) async fn delete_physical(
        &self,
        caller: &Identity,
        node: &Node,
        profile: &Profile,
    ) -> Result<()> {
        let Some(physical_id) = node.physical_id.as_deref() else {
            return Ok(());
        };
        let started = Instant::now();
        match &profile.spec.kind {
            ProfileKind::Instance { .. } => {
                let Ok(uuid) = Uuid::parse_str(physical_id) else {
                    return Ok(());
                };
                match self.instances.delete(caller, uuid).await {
                    Ok(_) | Err(Error::NotFound(_)) => {}
                    // Already being deleted (a NODE_DELETE run again): wait.
                    Err(Error::Conflict(_)) => {}
                    Err(error) => return Err(error),
                }
                loop {
                    match self.instances.get(caller, uuid).await {
                        Err(Error::NotFound(_)) => return Ok(()),
                        Ok(instance) if instance.status == InstanceStatus::Deleted => return Ok(()),
                        Ok(instance) if instance.status == InstanceStatus::Error => {
                            return Err(Error::Conflict(format!(
                                "instance {uuid} failed to delete: {}",
                                instance.status_reason
                            )));
                        }
                        Ok(_) => pause(started, "instance delete").await?,
                        Err(error) => return Err(error),
                    }
                }
            }
            ProfileKind::Stack { .. } => {
                match self.stacks.delete_stack(caller, physical_id).await {
                    Ok(_) | Err(Error::NotFound(_)) => {}
                    Err(Error::Conflict(_)) => {}
                    Err(error) => return Err(error),
                }
                loop {
                    match self.stacks.find_stack(caller, physical_id).await {
                        Err(Error::NotFound(_)) => return Ok(()),
                        Ok(stack)
                            if stack.action == StackAction::Delete
                                && stack.status == StackStatus::Complete =>
                        {
                            return Ok(());
                        }
                        Ok(stack)
                            if stack.action == StackAction::Delete
                                && stack.status == StackStatus::Failed =>
                        {
                            return Err(Error::Conflict(format!(
                                "stack {physical_id} failed to delete: {}",
                                stack.status_reason
                            )));
                        }
                        Ok(_) => pause(started, "stack delete").await?,
                        Err(error) => return Err(error),
                    }
                }
            }
        }
    }

    /// The node's health as its resource reports it now.
    pub(super) async fn check_physical(
        &self,
        caller: &Identity,
        node: &Node,
        profile: &Profile,
    ) -> (NodeStatus, String) {
        let Some(physical_id) = node.physical_id.as_deref() else {
            return (
                NodeStatus::Error,
                "the node has no physical resource".into(),
            );
        };
        match &profile.spec.kind {
            ProfileKind::Instance { .. } => {
                let Ok(uuid) = Uuid::parse_str(physical_id) else {
                    return (
                        NodeStatus::Error,
                        format!("physical id {physical_id:?} is not an instance uuid"),
                    );
                };
                match self.instances.get(caller, uuid).await {
                    Ok(instance) if instance.status == InstanceStatus::Active => {
                        (NodeStatus::Active, "instance is ACTIVE".into())
                    }
                    Ok(instance) => (
                        NodeStatus::Error,
                        format!("instance is {}", instance.status.as_str()),
                    ),
                    Err(error) => (NodeStatus::Error, error.to_string()),
                }
            }
            ProfileKind::Stack { .. } => match self.stacks.find_stack(caller, physical_id).await {
                Ok(stack)
                    if stack.status == StackStatus::Complete
                        && stack.action != StackAction::Delete =>
                {
                    (NodeStatus::Active, "stack is complete".into())
                }
                Ok(stack) => (
                    NodeStatus::Error,
                    format!("stack is {:?} {:?}", stack.action, stack.status),
                ),
                Err(error) => (NodeStatus::Error, error.to_string()),
            },
        }
    }
}
