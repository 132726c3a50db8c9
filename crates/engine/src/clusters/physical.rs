//! A node's physical resource: an instance (`ember.instance-1.0`) or a
//! stack (`os.heat.stack-1.0`), created, checked and deleted through the
//! engine's own instance service and stack operations, as the node's
//! owner. Waits poll the resource with a deadline.
//!
//! Every call here may run again — a run taken over after its engine died
//! repeats the step it was in — so each is idempotent:
//! - an instance is created with the uuid chosen when the node was planned
//!   (its physical id from the start): creating it again finds it;
//! - a stack is named after its node (`node-<node id>`) and looked up by
//!   that name before another is created; its id is recorded on the node
//!   (a fenced write) as soon as it is known;
//! - deleting something already gone succeeds (an instance whose delete
//!   completed answers 404).

use std::time::{Duration, Instant};

use ember_runtime::Identity;
use uuid::Uuid;

use super::ClusterService;
use super::run::{Run, RunResult, Stop};
use crate::domain::cluster::{Node, NodeStatus, Profile, ProfileKind};
use crate::domain::instance::{InstanceStatus, NewInstance};
use crate::domain::stack::{ActionStatus as StackStatus, StackAction};
use crate::error::{Error, Result};
use crate::stacks::CreateStack;
use crate::store::clusters::{ClusterChange, NodeStatusChange};

/// How long a physical create or delete may take before the node is ERROR.
pub const PHYSICAL_TIMEOUT: Duration = Duration::from_secs(600);

/// What is left of [`PHYSICAL_TIMEOUT`] for work begun at `started`.
pub(super) fn remaining(started: Instant) -> Duration {
    PHYSICAL_TIMEOUT.saturating_sub(started.elapsed())
}

/// Why `what` was given up on.
pub(super) fn too_long(what: &str) -> String {
    format!("{what} did not finish within {PHYSICAL_TIMEOUT:?}")
}

/// Between two reads of a stack a node's create or delete waits for.
pub(super) async fn pause(started: Instant, what: &str) -> Result<()> {
    if started.elapsed() > PHYSICAL_TIMEOUT {
        return Err(Error::Conflict(too_long(what)));
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

/// The name of the stack behind a node of a stack profile.
pub fn node_stack_name(node_id: Uuid) -> String {
    format!("node-{}", node_id.simple())
}

/// How a create ended for the node.
pub(super) enum Built {
    /// The resource is ACTIVE / CREATE_COMPLETE.
    Ready,
    /// It failed (the node becomes ERROR with this reason).
    Failed(String),
}

impl ClusterService {
    /// Makes sure the node's resource exists (creating it with its planned
    /// identity if not) and waits until it is ready or failed.
    pub(super) async fn ensure_physical(
        &self,
        run: &Run,
        caller: &Identity,
        node: &Node,
        profile: &Profile,
    ) -> RunResult<Built> {
        let started = Instant::now();
        match &profile.spec.kind {
            ProfileKind::Instance {
                flavor,
                image,
                metadata,
                workload,
                placement,
                ..
            } => {
                let Some(uuid) = node
                    .physical_id
                    .as_deref()
                    .and_then(|id| Uuid::parse_str(id).ok())
                else {
                    return Ok(Built::Failed(format!(
                        "node {} has no planned instance id",
                        node.name
                    )));
                };
                // Right before the call that makes something: a run that
                // lost its action makes nothing.
                run.check_still_owned(self).await?;
                let delegation = match self.node_delegation(node).await {
                    Ok(delegation) => delegation,
                    Err(error) => return Ok(Built::Failed(error.to_string())),
                };
                let new = NewInstance {
                    name: node.name.clone(),
                    flavor: flavor.clone(),
                    image: image.clone(),
                    metadata: metadata.clone(),
                    workload: workload.clone(),
                    placement: placement.clone(),
                    delegation,
                };
                if let Err(error) = self.instances.create_with_uuid(caller, uuid, new).await {
                    return Ok(Built::Failed(error.to_string()));
                }
                // A run taken over from an engine that went away: the
                // instance may still be BUILDING by that engine's driver
                // task, which died with it. Someone must finish it.
                if run.is_rerun() {
                    match self.instances.continue_unfinished_task(caller, uuid).await {
                        Ok(_) | Err(Error::NotFound(_)) => {}
                        Err(error) => return Err(Stop::Failed(error)),
                    }
                }
                let waited = self
                    .instances
                    .wait(caller, uuid, remaining(started), |read| match read {
                        Ok(instance) => match instance.status {
                            InstanceStatus::Active => Some(Ok(Built::Ready)),
                            InstanceStatus::Error => Some(Ok(Built::Failed(format!(
                                "instance {uuid} failed: {}",
                                instance.status_reason
                            )))),
                            InstanceStatus::Deleting | InstanceStatus::Deleted => {
                                Some(Ok(Built::Failed(format!(
                                    "instance {uuid} was deleted while building"
                                ))))
                            }
                            _ => None,
                        },
                        Err(Error::NotFound(_)) => Some(Ok(Built::Failed(format!(
                            "instance {uuid} was deleted while building"
                        )))),
                        Err(error) => Some(Err(Stop::Failed(error))),
                    })
                    .await;
                waited.unwrap_or_else(|| Ok(Built::Failed(too_long("instance build"))))
            }
            ProfileKind::Stack {
                template,
                parameters,
                environment,
                files,
                timeout_mins,
            } => {
                let name = node_stack_name(node.id);
                let stack = match self.stacks.find_stack(caller, &name).await {
                    Ok(stack) => stack,
                    Err(Error::NotFound(_)) => {
                        run.check_still_owned(self).await?;
                        let delegation = match self.node_delegation(node).await {
                            Ok(delegation) => delegation,
                            Err(error) => return Ok(Built::Failed(error.to_string())),
                        };
                        let request = CreateStack {
                            name: name.clone(),
                            template: template.clone(),
                            environment: environment.clone(),
                            environment_files: Vec::new(),
                            files: files.clone(),
                            parameters: parameters.clone(),
                            timeout_mins: *timeout_mins,
                            disable_rollback: true,
                            tags: vec![format!("cluster_node={}", node.id)],
                            adopt_data: None,
                        };
                        let created = match &delegation {
                            // On a cloud: the node's stack acts through its
                            // cluster's trust.
                            Some(delegation) => {
                                self.stacks
                                    .create_stack_acting_through(caller, delegation, request)
                                    .await
                            }
                            None => self.stacks.create_stack(caller, request).await,
                        };
                        match created {
                            Ok(stack) => stack,
                            // Created meanwhile by another run of this step.
                            Err(Error::Conflict(_)) => {
                                match self.stacks.find_stack(caller, &name).await {
                                    Ok(stack) => stack,
                                    Err(error) => return Ok(Built::Failed(error.to_string())),
                                }
                            }
                            Err(error) => return Ok(Built::Failed(error.to_string())),
                        }
                    }
                    Err(error) => return Err(Stop::Failed(error)),
                };
                let physical_id = stack.id.to_string();
                if node.physical_id.as_deref() != Some(physical_id.as_str()) {
                    let mut recorded =
                        NodeStatusChange::new(node.id, node.status, node.status_reason.clone());
                    recorded.physical_id = Some(Some(physical_id.clone()));
                    run.apply(
                        self,
                        &ClusterChange {
                            node_changes: vec![recorded],
                            ..ClusterChange::default()
                        },
                    )
                    .await?;
                }
                loop {
                    let stack = match self.stacks.find_stack(caller, &physical_id).await {
                        Ok(stack) => stack,
                        Err(Error::NotFound(_)) => {
                            return Ok(Built::Failed(format!(
                                "stack {physical_id} was deleted while being created"
                            )));
                        }
                        Err(error) => return Err(Stop::Failed(error)),
                    };
                    match (stack.action, stack.status) {
                        (StackAction::Delete, _) => {
                            return Ok(Built::Failed(format!(
                                "stack {physical_id} was deleted while being created"
                            )));
                        }
                        (_, StackStatus::Complete) => return Ok(Built::Ready),
                        (_, StackStatus::Failed) => {
                            return Ok(Built::Failed(format!(
                                "stack {} failed: {}",
                                stack.id, stack.status_reason
                            )));
                        }
                        (_, StackStatus::InProgress) => {
                            if let Err(error) = pause(started, "stack create").await {
                                return Ok(Built::Failed(error.to_string()));
                            }
                        }
                    }
                }
            }
        }
    }

    /// Deletes the node's resource and waits until it is gone; a resource
    /// already gone (or never created) is a success.
    pub(super) async fn delete_physical(
        &self,
        caller: &Identity,
        node: &Node,
        profile: &Profile,
    ) -> Result<()> {
        let started = Instant::now();
        match &profile.spec.kind {
            ProfileKind::Instance { .. } => {
                let Some(uuid) = node
                    .physical_id
                    .as_deref()
                    .and_then(|id| Uuid::parse_str(id).ok())
                else {
                    return Ok(());
                };
                match self.instances.delete(caller, uuid).await {
                    Ok(_) | Err(Error::NotFound(_)) => {}
                    // Already being deleted (a NODE_DELETE run again): wait,
                    // continuing the delete if the engine that started it
                    // went away (a no-op while this engine runs it).
                    // Anything else (a maintenance lock) is the failure.
                    Err(Error::Conflict(message)) => match self.instances.get(caller, uuid).await {
                        Ok(instance) if instance.status == InstanceStatus::Deleting => {
                            match self.instances.continue_unfinished_task(caller, uuid).await {
                                Ok(_) | Err(Error::NotFound(_)) => {}
                                Err(error) => return Err(error),
                            }
                        }
                        Err(Error::NotFound(_)) => return Ok(()),
                        _ => return Err(Error::Conflict(message)),
                    },
                    Err(error) => return Err(error),
                }
                self.instances
                    .wait(caller, uuid, remaining(started), |read| match read {
                        Err(Error::NotFound(_)) => Some(Ok(())),
                        Ok(instance) if instance.status == InstanceStatus::Error => {
                            Some(Err(Error::Conflict(format!(
                                "instance {uuid} failed to delete: {}",
                                instance.status_reason
                            ))))
                        }
                        Ok(_) => None,
                        Err(error) => Some(Err(error)),
                    })
                    .await
                    .unwrap_or_else(|| Err(Error::Conflict(too_long("instance delete"))))
            }
            ProfileKind::Stack { .. } => {
                // Found by its name when the run that created it went away
                // before recording its id.
                let physical_id = match node.physical_id.clone() {
                    Some(id) => id,
                    None => match self
                        .stacks
                        .find_stack(caller, &node_stack_name(node.id))
                        .await
                    {
                        Ok(stack) => stack.id.to_string(),
                        Err(Error::NotFound(_)) => return Ok(()),
                        Err(error) => return Err(error),
                    },
                };
                match self.stacks.delete_stack(caller, &physical_id).await {
                    Ok(_) | Err(Error::NotFound(_)) => {}
                    Err(Error::Conflict(_)) => {}
                    Err(error) => return Err(error),
                }
                loop {
                    match self.stacks.find_stack(caller, &physical_id).await {
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
