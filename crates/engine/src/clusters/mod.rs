//! The clustering service (Senlin's model): what every entry point calls to
//! manage profiles, policies, clusters and nodes on behalf of a caller.
//! Requests are admitted by [`crate::domain::admission::cluster::admit`]
//! (the one place that decides what may run when, for whom), and those
//! that change a cluster or node only record a durable action and wake the
//! [`dispatcher`]; the action runs there, on whichever engine claims it,
//! one at a time per cluster (the cluster lock), each write fenced by the
//! run's token (see `execute` for the durable steps of each kind).

mod adopt;
pub mod allowed;
mod cluster_ops;
pub mod dispatcher;
mod execute;
mod grow;
mod health;
pub mod hooks;
mod launch;
pub mod lifecycle;
mod locks;
mod maintenance;
mod membership;
mod node_ops;
mod physical;
pub mod remediation;
mod removal;
mod requests;
mod run;
mod webhook_targets;

use std::sync::Arc;

use ember_runtime::Identity;
use uuid::Uuid;

use crate::domain::cluster::{
    Cluster, ClusterAction, ClusterEvent, Node, PolicyDefinition, Profile,
};
use crate::error::{Error, Result};
use crate::instances::InstanceService;
use crate::stacks::StackOperations;
use crate::store::clusters::ClusterStore;

pub use adopt::Adoption;
pub use locks::ClusterLockRequest;
pub use node_ops::NodeUpdate;
pub use requests::{
    ClusterDetails, ClusterUpdate, HealthAction, NewCluster, NewNode, ResizeRequest,
};

/// Everything the clustering code needs, shared by the request side and
/// the dispatcher.
pub struct ClusterService {
    store: Arc<dyn ClusterStore>,
    instances: Arc<InstanceService>,
    stacks: Arc<StackOperations>,
    hooks: hooks::HookClient,
    wake: Arc<tokio::sync::Notify>,
    engine_id: Uuid,
    /// The dispatcher's lease, sweep and queue settings.
    dispatcher: dispatcher::DispatcherSettings,
    /// The quotas every request is checked against (none in unit tests).
    quotas: Option<Arc<crate::quotas::Quotas>>,
    /// The audit trail of locks, refusals and break-glass.
    audit: crate::audit::Auditing,
    /// The cloud of the openstack backend: a cluster (and a node made
    /// outside one) is made with a delegation its nodes act through.
    cloud: Option<Arc<crate::cloud::OpenStackCloud>>,
    /// Where hook webhooks may point.
    webhook_targets: ember_runtime::egress::EgressRules,
    /// The shortest hook timeout a new deletion policy may have.
    hook_min_timeout_secs: u32,
    /// Held recoveries of the health policies, as this engine saw them.
    remediation: remediation::RemediationState,
}

/// How the clustering service runs and what it checks and records with,
/// all given when it is made: the service is shared with its dispatcher
/// from the start, so nothing is added to it afterwards.
pub struct ClusterSettings {
    /// The dispatcher's lease and sweep timings (tests shorten them).
    pub dispatcher: dispatcher::DispatcherSettings,
    /// The quotas every request is checked against; `None` (unit tests)
    /// checks none.
    pub quotas: Option<Arc<crate::quotas::Quotas>>,
    /// Where locks, refusals and break-glass are recorded; `None` (unit
    /// tests) records nothing and honours no break-glass.
    pub audit: Option<Arc<crate::audit::AuditTrail>>,
    /// The cloud of the openstack backend: clusters (and nodes made
    /// outside one) are made with a delegation to act on it through, and
    /// deleted with it; `None` on the other backends.
    pub cloud: Option<Arc<crate::cloud::OpenStackCloud>>,
    /// Where hook webhooks may point (the engine's `[webhook_targets]`).
    pub webhook_targets: ember_runtime::egress::EgressRules,
    /// The shortest hook timeout a new deletion policy may have (the
    /// engine's `lifecycle_hook_min_timeout_s`).
    pub hook_min_timeout_secs: u32,
}

impl Default for ClusterSettings {
    /// The default dispatcher timings; no quotas, audit trail or cloud;
    /// the strict default webhook rules; and hook timeouts down to the
    /// domain's own floor (`MIN_HOOK_TIMEOUT_SECS`), as unit tests want.
    fn default() -> Self {
        ClusterSettings {
            dispatcher: dispatcher::DispatcherSettings::default(),
            quotas: None,
            audit: None,
            cloud: None,
            webhook_targets: ember_runtime::egress::EgressRules::default(),
            hook_min_timeout_secs: crate::domain::cluster::policy::MIN_HOOK_TIMEOUT_SECS,
        }
    }
}

impl ClusterService {
    /// The clustering service of the engine process `engine_id` (the
    /// owner its dispatcher claims actions as; the same id as its stack
    /// operations'), run as `settings` say.
    pub fn with_settings(
        store: Arc<dyn ClusterStore>,
        instances: Arc<InstanceService>,
        stacks: Arc<StackOperations>,
        hooks: hooks::HookClient,
        settings: ClusterSettings,
        engine_id: Uuid,
    ) -> Arc<ClusterService> {
        let ClusterSettings {
            dispatcher,
            quotas,
            audit,
            cloud,
            webhook_targets,
            hook_min_timeout_secs,
        } = settings;
        Arc::new(ClusterService {
            store,
            instances,
            stacks,
            hooks,
            wake: Arc::new(tokio::sync::Notify::new()),
            engine_id,
            dispatcher,
            quotas,
            audit: crate::audit::Auditing::new(audit),
            cloud,
            webhook_targets,
            hook_min_timeout_secs,
            remediation: Default::default(),
        })
    }

    /// Admits `operation` for `caller`: the first of [`Self::blockers`] is
    /// the refusal. A refusal of an operation on a cluster or node is
    /// recorded in the audit trail, and an admin's break-glass honoured
    /// through a maintenance lock (nothing else).
    pub(crate) async fn admit(
        &self,
        operation: crate::domain::admission::ClusterOperation<'_>,
        caller: &Identity,
    ) -> Result<()> {
        let blockers = self.blockers(&operation, caller).await?;
        self.audit
            .admitted(
                crate::audit::Asked {
                    caller,
                    operation: operation.verb(),
                },
                || operation.audit_subject(),
                &blockers,
                true,
            )
            .await
    }

    /// Every reason `operation` by `caller` would be refused now, in the
    /// order the operation checks them: admission's rules (the one place
    /// that decides: `domain::admission`), then for a scale the project's
    /// quota (growth) and the scaling policy's cooldown. What the dry run
    /// ("allowed?") shows, and the operation's refusal is the first.
    pub(crate) async fn blockers(
        &self,
        operation: &crate::domain::admission::ClusterOperation<'_>,
        caller: &Identity,
    ) -> Result<Vec<crate::domain::admission::Blocker>> {
        use crate::domain::admission::{Blocker, BlockerKind, ClusterOperation};
        use crate::domain::cluster::policy::ScalingEvent;
        let mut blockers =
            crate::domain::admission::blockers(crate::domain::admission::Subject::Cluster {
                operation,
                caller,
            });
        let (cluster, event, growth) = match *operation {
            ClusterOperation::ScaleOut { cluster, count } => (
                cluster,
                ScalingEvent::ScaleOut,
                // A policy's step (count 0) is known when the action runs: 1 here.
                i64::from(count.clamp(1, u64::from(u32::MAX)) as u32),
            ),
            ClusterOperation::ScaleIn { cluster, .. } => (cluster, ScalingEvent::ScaleIn, 0),
            _ => return Ok(blockers),
        };
        let as_blocker = |kind: BlockerKind, result: Result<()>| match result {
            Ok(()) => Ok(None),
            Err(error @ (Error::Forbidden(_) | Error::Conflict(_))) => {
                Ok(Some(Blocker::new(kind, error)))
            }
            Err(other) => Err(other),
        };
        let current = i64::from(cluster.desired_capacity);
        blockers.extend(as_blocker(
            BlockerKind::Quota,
            self.admit_growth(cluster, current, current.saturating_add(growth))
                .await,
        )?);
        blockers.extend(as_blocker(
            BlockerKind::Cooldown,
            self.check_cooldown(cluster, event).await,
        )?);
        Ok(blockers)
    }

    /// Makes `owner`'s delegation with the caller's token when the
    /// clusters act on a cloud (nothing otherwise).
    async fn delegate(
        &self,
        owner: crate::domain::delegation::DelegationOwner,
        caller: &Identity,
        subject_token: Option<&ember_runtime::identity::SubjectToken>,
    ) -> Result<()> {
        if let Some(cloud) = self.cloud.as_ref() {
            cloud.delegate(owner, caller, subject_token).await?;
        }
        Ok(())
    }

    /// Deletes `owner`'s delegation (its trust) when there is one.
    async fn revoke(&self, owner: crate::domain::delegation::DelegationOwner) {
        if let Some(cloud) = self.cloud.as_ref()
            && let Err(error) = cloud.revoke(owner, None).await
        {
            tracing::warn!(owner = owner.kind(), owner_id = %owner.id(), %error, "a delegation stays recorded");
        }
    }

    /// The delegation a node's instance acts through: its cluster's, or
    /// its own for a node made outside any cluster; `None` when clusters
    /// do not act on a cloud.
    async fn node_delegation(
        &self,
        node: &crate::domain::cluster::Node,
    ) -> Result<Option<crate::domain::delegation::Delegation>> {
        use crate::domain::delegation::DelegationOwner;
        let Some(cloud) = self.cloud.as_ref() else {
            return Ok(None);
        };
        let mut owners = Vec::with_capacity(2);
        if let Some(cluster_id) = node.cluster_id {
            owners.push(DelegationOwner::Cluster(cluster_id));
        }
        owners.push(DelegationOwner::Node(node.id));
        for owner in owners {
            if let Some(delegation) = cloud.delegation_of(owner).await? {
                return Ok(Some(delegation));
            }
        }
        Err(Error::Forbidden(format!(
            "node {} has no delegation to act on the cloud through (its cluster was made without a Keystone token)",
            node.name
        )))
    }

    /// Refuses a cluster growing to `to` nodes from `from` when that is
    /// over the project's nodes-per-cluster or nodes quota.
    pub(crate) async fn admit_growth(&self, cluster: &Cluster, from: i64, to: i64) -> Result<()> {
        let Some(quotas) = self.quotas.as_ref() else {
            return Ok(());
        };
        if to <= from {
            return Ok(());
        }
        let (to, more) = (
            u64::try_from(to).unwrap_or(u64::MAX),
            u64::try_from(to - from).unwrap_or(u64::MAX),
        );
        use crate::domain::quota::QuotaKind;
        quotas
            .admit_size(&cluster.project_id, QuotaKind::NodesPerCluster, to)
            .await?;
        quotas
            .admit(
                &cluster.project_id,
                QuotaKind::Nodes,
                crate::store::quotas::Usage::Nodes,
                more,
            )
            .await
    }

    pub(crate) fn quotas(&self) -> Option<&Arc<crate::quotas::Quotas>> {
        self.quotas.as_ref()
    }

    /// Refuses one more of `kind` (counted by `usage`) over the quota.
    pub(crate) async fn admit_one(
        &self,
        project_id: &str,
        kind: crate::domain::quota::QuotaKind,
        usage: crate::store::quotas::Usage,
    ) -> Result<()> {
        match self.quotas.as_ref() {
            Some(quotas) => quotas.admit(project_id, kind, usage, 1).await,
            None => Ok(()),
        }
    }

    pub fn engine_id(&self) -> Uuid {
        self.engine_id
    }

    pub fn store(&self) -> &Arc<dyn ClusterStore> {
        &self.store
    }

    /// Wakes the dispatcher: an action became READY.
    pub(crate) fn wake_dispatcher(&self) {
        self.wake.notify_one();
    }

    /// The project a caller's lookups are limited to (`None` for admins).
    fn scope(caller: &Identity) -> Option<&str> {
        (!caller.is_admin()).then_some(caller.project_id.as_str())
    }

    /// The caller's profile `identity` names (an id, a name, or the start
    /// of an id; see `store::clusters::lookup`).
    pub async fn find_profile(&self, caller: &Identity, identity: &str) -> Result<Profile> {
        self.store
            .find_profile(Self::scope(caller), identity)
            .await?
            .ok_or_else(|| not_found("profile", identity))
    }

    /// The caller's policy `identity` names.
    pub async fn find_policy(&self, caller: &Identity, identity: &str) -> Result<PolicyDefinition> {
        self.store
            .find_policy(Self::scope(caller), identity)
            .await?
            .ok_or_else(|| not_found("policy", identity))
    }

    /// The caller's cluster `identity` names.
    pub async fn find_cluster(&self, caller: &Identity, identity: &str) -> Result<Cluster> {
        self.store
            .find_cluster(Self::scope(caller), identity)
            .await?
            .ok_or_else(|| not_found("cluster", identity))
    }

    /// The caller's node `identity` names.
    pub async fn find_node(&self, caller: &Identity, identity: &str) -> Result<Node> {
        self.store
            .find_node(Self::scope(caller), identity)
            .await?
            .ok_or_else(|| not_found("node", identity))
    }

    /// The caller's action with this id.
    pub async fn get_action(&self, caller: &Identity, id: &str) -> Result<ClusterAction> {
        let uuid = Uuid::parse_str(id).map_err(|_| not_found("action", id))?;
        match self.store.get_action(uuid).await? {
            Some(action) if caller.is_admin() || action.project_id == caller.project_id => {
                Ok(action)
            }
            _ => Err(not_found("action", id)),
        }
    }

    /// Records actions READY (with their events) and wakes the dispatcher.
    async fn submit(&self, actions: &[ClusterAction], events: &[ClusterEvent]) -> Result<()> {
        self.store.insert_actions(actions, events).await?;
        self.wake_dispatcher();
        Ok(())
    }
}

/// Senlin's "not found" (its `ResourceNotFound`, a 404) for the `kind` of
/// object (`cluster`, `node`, `profile`, `policy`, `action`, `event`,
/// `receiver`, `profile_type`, `policy_type`) the caller named
/// `identity`: its clients and API suite compare the text.
pub(crate) fn not_found(kind: &str, identity: &str) -> Error {
    Error::NotFound(format!("The {kind} '{identity}' could not be found."))
}

/// A lookup failure of an object named inside a request about another, as
/// Senlin words it ("The specified profile 'x' could not be found."): the
/// request is what is wrong, so a 400.
pub(crate) fn specified_not_found(kind: &str, identity: &str, error: Error) -> Error {
    match error {
        Error::NotFound(_) => Error::InvalidInput(format!(
            "The specified {kind} '{identity}' could not be found."
        )),
        other => other,
    }
}

/// A list of strings as Python prints it (`['a', 'b']`), the way Senlin's
/// messages name the nodes they refuse.
pub(crate) fn python_list<Item: std::fmt::Display>(items: &[Item]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| format!("'{item}'")).collect();
    format!("[{}]", quoted.join(", "))
}

/// At most this many nodes' physical resources are created, recovered or
/// deleted at once by one action: a 1,000-node growth runs in waves, not
/// as 1,000 driver calls at the same moment.
pub(crate) const NODES_IN_FLIGHT: usize = 32;

/// Runs `work` (one future per node, not yet started), at most
/// [`NODES_IN_FLIGHT`] at a time; the results in the order they finish.
pub(crate) async fn for_each_node<Fut: std::future::Future>(
    work: impl IntoIterator<Item = Fut>,
) -> Vec<Fut::Output> {
    use futures::StreamExt;
    // Collected first: a stream mapping borrowed items to futures trips
    // the compiler's Send check on the spawned dispatcher task.
    let work: Vec<Fut> = work.into_iter().collect();
    futures::stream::iter(work)
        .buffer_unordered(NODES_IN_FLIGHT)
        .collect()
        .await
}

/// An event about an object, by `caller`.
#[allow(clippy::too_many_arguments)] // Senlin's event fields, in Senlin's order
pub(crate) fn event(
    obj_type: &str,
    obj_id: impl ToString,
    obj_name: &str,
    cluster_id: Option<Uuid>,
    action: &str,
    status: &str,
    reason: impl Into<String>,
    caller: &Identity,
) -> ClusterEvent {
    ClusterEvent::new(
        obj_type,
        obj_id,
        obj_name,
        cluster_id,
        action,
        status,
        reason.into(),
        &caller.project_id,
        &caller.user_id,
    )
}

/// An event about a node, recorded under the cluster it belongs to.
pub(crate) fn node_event(
    node: &Node,
    action: &str,
    status: &str,
    reason: impl Into<String>,
    caller: &Identity,
) -> ClusterEvent {
    event(
        "NODE",
        node.id,
        &node.name,
        node.cluster_id,
        action,
        status,
        reason,
        caller,
    )
}

/// An event about an action.
pub(crate) fn action_event(
    action: &ClusterAction,
    status: &str,
    reason: impl Into<String>,
) -> ClusterEvent {
    event(
        "ACTION",
        action.id,
        &action.name,
        action.cluster_id,
        action.kind.as_str(),
        status,
        reason,
        &action.caller(),
    )
}

#[cfg(test)]
mod tests {
    use super::python_list;

    #[test]
    fn lists_print_as_python_does() {
        assert_eq!(python_list(&["a", "b"]), "['a', 'b']");
    }
}
