//! Quotas: how much one project may hold, so one member cannot take the
//! deployment from everyone else (Heat's `max_stacks_per_tenant`,
//! `max_resources_per_stack`, `max_nested_stack_depth`; Senlin's
//! `max_clusters_per_project`, `max_nodes_per_cluster`; Nova's instance
//! quota). Defaults come from the configuration; an admin may override any
//! of them per project. Checked before anything starts: over quota is
//! `Forbidden` naming the limit, what the project has and what was asked.

use crate::error::{Error, Result};

/// One limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QuotaKind {
    /// Live root stacks of the project.
    Stacks,
    /// Resources of one stack (its template's; nested stacks count for
    /// themselves).
    ResourcesPerStack,
    /// How deep stacks nest.
    NestedDepth,
    Clusters,
    /// Nodes of one cluster: a cluster without `max_size` is bounded here.
    NodesPerCluster,
    /// Nodes of the project, all clusters and standalone nodes together.
    Nodes,
    Instances,
    /// Stack operations in progress and cluster actions running at once.
    ConcurrentOperations,
    /// Software configs of the project (those its stacks make included).
    SoftwareConfigs,
    /// Software deployments of the project (those its stacks make
    /// included).
    SoftwareDeployments,
    /// Snapshots of one stack (each keeps the stack's template and data).
    SnapshotsPerStack,
}

impl QuotaKind {
    pub const ALL: [QuotaKind; 11] = [
        QuotaKind::Stacks,
        QuotaKind::ResourcesPerStack,
        QuotaKind::NestedDepth,
        QuotaKind::Clusters,
        QuotaKind::NodesPerCluster,
        QuotaKind::Nodes,
        QuotaKind::Instances,
        QuotaKind::ConcurrentOperations,
        QuotaKind::SoftwareConfigs,
        QuotaKind::SoftwareDeployments,
        QuotaKind::SnapshotsPerStack,
    ];

    /// The name the API, the CLI and the configuration use.
    pub fn as_str(self) -> &'static str {
        match self {
            QuotaKind::Stacks => "stacks",
            QuotaKind::ResourcesPerStack => "resources_per_stack",
            QuotaKind::NestedDepth => "nested_depth",
            QuotaKind::Clusters => "clusters",
            QuotaKind::NodesPerCluster => "nodes_per_cluster",
            QuotaKind::Nodes => "nodes",
            QuotaKind::Instances => "instances",
            QuotaKind::ConcurrentOperations => "concurrent_operations",
            QuotaKind::SoftwareConfigs => "software_configs",
            QuotaKind::SoftwareDeployments => "software_deployments",
            QuotaKind::SnapshotsPerStack => "snapshots_per_stack",
        }
    }

    pub fn parse(text: &str) -> Option<QuotaKind> {
        QuotaKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
    }

    /// What a count of this kind is of, for messages.
    fn noun(self) -> &'static str {
        match self {
            QuotaKind::Stacks => "stacks",
            QuotaKind::ResourcesPerStack => "resources in one stack",
            QuotaKind::NestedDepth => "levels of nested stacks",
            QuotaKind::Clusters => "clusters",
            QuotaKind::NodesPerCluster => "nodes in one cluster",
            QuotaKind::Nodes => "nodes",
            QuotaKind::Instances => "instances",
            QuotaKind::ConcurrentOperations => "operations running at once",
            QuotaKind::SoftwareConfigs => "software configs",
            QuotaKind::SoftwareDeployments => "software deployments",
            QuotaKind::SnapshotsPerStack => "snapshots of one stack",
        }
    }
}

/// Every limit of a project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaLimits {
    pub stacks: u64,
    pub resources_per_stack: u64,
    pub nested_depth: u64,
    pub clusters: u64,
    pub nodes_per_cluster: u64,
    pub nodes: u64,
    pub instances: u64,
    pub concurrent_operations: u64,
    pub software_configs: u64,
    pub software_deployments: u64,
    pub snapshots_per_stack: u64,
}

impl Default for QuotaLimits {
    /// Heat's and Senlin's defaults where they have one (512 stacks, depth
    /// 5, 100 clusters, 1,000 nodes per cluster); 10,000 resources per
    /// stack (Ember creates that many in a second), and as many software
    /// configs and deployments (a deployment resource makes one of each),
    /// and 100 snapshots of a stack (Heat sets none; each keeps up to a
    /// template's 512 KiB and the stack's data).
    fn default() -> Self {
        QuotaLimits {
            stacks: 512,
            resources_per_stack: 10_000,
            nested_depth: 5,
            clusters: 100,
            nodes_per_cluster: 1_000,
            nodes: 10_000,
            instances: 10_000,
            concurrent_operations: 100,
            software_configs: 10_000,
            software_deployments: 10_000,
            snapshots_per_stack: 100,
        }
    }
}

impl QuotaLimits {
    pub fn get(&self, kind: QuotaKind) -> u64 {
        match kind {
            QuotaKind::Stacks => self.stacks,
            QuotaKind::ResourcesPerStack => self.resources_per_stack,
            QuotaKind::NestedDepth => self.nested_depth,
            QuotaKind::Clusters => self.clusters,
            QuotaKind::NodesPerCluster => self.nodes_per_cluster,
            QuotaKind::Nodes => self.nodes,
            QuotaKind::Instances => self.instances,
            QuotaKind::ConcurrentOperations => self.concurrent_operations,
            QuotaKind::SoftwareConfigs => self.software_configs,
            QuotaKind::SoftwareDeployments => self.software_deployments,
            QuotaKind::SnapshotsPerStack => self.snapshots_per_stack,
        }
    }

    pub fn set(&mut self, kind: QuotaKind, limit: u64) {
        let slot = match kind {
            QuotaKind::Stacks => &mut self.stacks,
            QuotaKind::ResourcesPerStack => &mut self.resources_per_stack,
            QuotaKind::NestedDepth => &mut self.nested_depth,
            QuotaKind::Clusters => &mut self.clusters,
            QuotaKind::NodesPerCluster => &mut self.nodes_per_cluster,
            QuotaKind::Nodes => &mut self.nodes,
            QuotaKind::Instances => &mut self.instances,
            QuotaKind::ConcurrentOperations => &mut self.concurrent_operations,
            QuotaKind::SoftwareConfigs => &mut self.software_configs,
            QuotaKind::SoftwareDeployments => &mut self.software_deployments,
            QuotaKind::SnapshotsPerStack => &mut self.snapshots_per_stack,
        };
        *slot = limit;
    }

    /// These limits with a project's overrides applied.
    pub fn with_overrides(mut self, overrides: &[(QuotaKind, u64)]) -> QuotaLimits {
        for (kind, limit) in overrides {
            self.set(*kind, *limit);
        }
        self
    }
}

/// The most any limit may be set to (beyond it, a number is a typo).
pub const MAX_LIMIT: u64 = 1_000_000_000;

/// Checks a limit an admin sets.
pub fn validate_limit(kind: QuotaKind, limit: i64) -> Result<u64> {
    match u64::try_from(limit) {
        Ok(limit) if limit <= MAX_LIMIT => Ok(limit),
        _ => Err(Error::InvalidInput(format!(
            "quota {}: {limit} must be between 0 and {MAX_LIMIT}",
            kind.as_str()
        ))),
    }
}

/// `Ok` when `project` holding `used` may take `more` of `kind` under
/// `limit`; else the Forbidden error naming all three.
pub fn admit(project: &str, kind: QuotaKind, limit: u64, used: u64, more: u64) -> Result<()> {
    if used.saturating_add(more) <= limit {
        return Ok(());
    }
    let asked = if more == 1 {
        "one more".to_owned()
    } else {
        format!("{more} more")
    };
    Err(Error::Forbidden(format!(
        "quota exceeded: project {project:?} may have at most {limit} {} (quota {}), it has {used} and asked for {asked}; an admin can raise it with `ember quota set`",
        kind.noun(),
        kind.as_str()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_round_trip_and_every_kind_has_a_default() {
        let defaults = QuotaLimits::default();
        for kind in QuotaKind::ALL {
            assert_eq!(QuotaKind::parse(kind.as_str()), Some(kind));
            assert!(defaults.get(kind) > 0, "{kind:?}");
        }
        assert_eq!(defaults.resources_per_stack, 10_000);
    }

    #[test]
    fn over_quota_names_the_limit_the_use_and_the_ask() {
        assert!(admit("demo", QuotaKind::Stacks, 2, 1, 1).is_ok());
        let error = admit("demo", QuotaKind::Stacks, 2, 2, 1).expect_err("full");
        assert!(matches!(error, Error::Forbidden(_)));
        assert_eq!(
            error.to_string(),
            "quota exceeded: project \"demo\" may have at most 2 stacks (quota stacks), it has 2 and asked for one more; an admin can raise it with `ember quota set`"
        );
        let error =
            admit("demo", QuotaKind::NodesPerCluster, 1000, 3, 100_000).expect_err("too many");
        assert!(error.to_string().contains("100000 more"), "{error}");
    }

    #[test]
    fn limits_set_by_an_admin_are_checked() {
        assert_eq!(validate_limit(QuotaKind::Stacks, 0).ok(), Some(0));
        assert!(validate_limit(QuotaKind::Stacks, -1).is_err());
        assert!(validate_limit(QuotaKind::Stacks, i64::MAX).is_err());
        let limits = QuotaLimits::default().with_overrides(&[(QuotaKind::Clusters, 3)]);
        assert_eq!(limits.clusters, 3);
        assert_eq!(limits.stacks, 512);
    }

    proptest! {
        #[test]
        fn admission_never_lets_use_pass_the_limit(limit in 0u64..1000, used in 0u64..2000, more in 0u64..u64::MAX) {
            let admitted = admit("p", QuotaKind::Nodes, limit, used, more).is_ok();
            prop_assert_eq!(admitted, used.checked_add(more).is_some_and(|total| total <= limit));
        }
    }
}
