//! Quotas, the application side: a project's limits (the configured
//! defaults with an admin's overrides), what it uses now, and the checks the
//! stack, cluster and instance services make before anything starts.
//! Members may read their own project's quotas; only admins read others'
//! and set them.
//!
//! The checks count what exists and then admit: two requests racing for the
//! last unit may both pass (as with most quota systems without
//! reservations); the excess is bounded by the number of requests in
//! flight, never by what one request asks.

use std::sync::Arc;

use ember_runtime::Identity;

use crate::domain::quota::{QuotaKind, QuotaLimits, admit, validate_limit};
use crate::error::{Error, Result};
use crate::store::quotas::{QuotaStore, Usage};

pub struct Quotas {
    store: Arc<dyn QuotaStore>,
    defaults: QuotaLimits,
    /// Each project's limits as last read, for [`LIMITS_CACHE_TTL`]: limits
    /// change rarely, and a check should not pay a read for them (a change
    /// reaches every replica within the TTL).
    cached: std::sync::Mutex<std::collections::HashMap<String, (std::time::Instant, QuotaLimits)>>,
}

/// How long a project's limits are served from memory.
pub const LIMITS_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(2);

/// The most projects whose limits are kept in memory.
const LIMITS_CACHE_PROJECTS: usize = 10_000;

/// A project's quotas as shown to a caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaReport {
    pub project_id: String,
    pub limits: QuotaLimits,
    /// The kinds an admin set for this project (the rest are defaults).
    pub overridden: Vec<QuotaKind>,
    /// What the project holds now, for the kinds counted per project.
    pub usage: Vec<(QuotaKind, u64)>,
}

impl Quotas {
    pub fn new(store: Arc<dyn QuotaStore>, defaults: QuotaLimits) -> Arc<Quotas> {
        Arc::new(Quotas {
            store,
            defaults,
            cached: Default::default(),
        })
    }

    /// `project_id`'s limits (at most [`LIMITS_CACHE_TTL`] old).
    pub async fn limits(&self, project_id: &str) -> Result<QuotaLimits> {
        if let Ok(cached) = self.cached.lock()
            && let Some((read_at, limits)) = cached.get(project_id)
            && read_at.elapsed() < LIMITS_CACHE_TTL
        {
            return Ok(*limits);
        }
        let overrides = self.store.quota_overrides(project_id).await?;
        let limits = self.defaults.with_overrides(&overrides);
        if let Ok(mut cached) = self.cached.lock() {
            if cached.len() >= LIMITS_CACHE_PROJECTS {
                cached.retain(|_, (read_at, _)| read_at.elapsed() < LIMITS_CACHE_TTL);
                if cached.len() >= LIMITS_CACHE_PROJECTS {
                    cached.clear();
                }
            }
            cached.insert(project_id.to_owned(), (std::time::Instant::now(), limits));
        }
        Ok(limits)
    }

    /// The checks of a new root stack of `resources` resources, in one
    /// read of the project's use: its size, the project's stacks, and its
    /// running operations.
    pub async fn admit_stack_create(&self, project_id: &str, resources: u64) -> Result<()> {
        let limits = self.limits(project_id).await?;
        admit(
            project_id,
            QuotaKind::ResourcesPerStack,
            limits.resources_per_stack,
            0,
            resources,
        )?;
        let (stacks, running) = self.store.stack_create_usage(project_id).await?;
        admit(project_id, QuotaKind::Stacks, limits.stacks, stacks, 1)?;
        admit(
            project_id,
            QuotaKind::ConcurrentOperations,
            limits.concurrent_operations,
            running,
            1,
        )
    }

    /// Refuses when `project_id` holding `usage` may not take `more` of
    /// `kind`.
    pub async fn admit(
        &self,
        project_id: &str,
        kind: QuotaKind,
        usage: Usage,
        more: u64,
    ) -> Result<()> {
        let limit = self.limits(project_id).await?.get(kind);
        let used = self.store.quota_usage(project_id, usage).await?;
        admit(project_id, kind, limit, used, more)
    }

    /// Refuses a size that is itself the quantity (resources of one stack,
    /// nesting depth): `size` must be within the limit.
    pub async fn admit_size(&self, project_id: &str, kind: QuotaKind, size: u64) -> Result<()> {
        let limit = self.limits(project_id).await?.get(kind);
        admit(project_id, kind, limit, 0, size)
    }

    fn project_for(caller: &Identity, project: Option<&str>) -> Result<String> {
        match project.filter(|project| !project.is_empty()) {
            None => Ok(caller.project_id.clone()),
            Some(own) if own == caller.project_id => Ok(own.to_owned()),
            Some(other) if caller.is_admin() => Ok(other.to_owned()),
            Some(other) => Err(Error::Forbidden(format!(
                "project {:?}: only an admin may read another project's quotas",
                ember_runtime::quote::quoted(other)
            ))),
        }
    }

    /// A project's limits and use: the caller's, or any for an admin.
    pub async fn show(&self, caller: &Identity, project: Option<&str>) -> Result<QuotaReport> {
        let project_id = Self::project_for(caller, project)?;
        let overrides = self.store.quota_overrides(&project_id).await?;
        let mut usage = Vec::new();
        for (kind, counted) in [
            (QuotaKind::Stacks, Usage::Stacks),
            (QuotaKind::Clusters, Usage::Clusters),
            (QuotaKind::Nodes, Usage::Nodes),
            (QuotaKind::Instances, Usage::Instances),
            (QuotaKind::ConcurrentOperations, Usage::RunningOperations),
            (QuotaKind::SoftwareConfigs, Usage::SoftwareConfigs),
            (QuotaKind::SoftwareDeployments, Usage::SoftwareDeployments),
        ] {
            usage.push((kind, self.store.quota_usage(&project_id, counted).await?));
        }
        Ok(QuotaReport {
            limits: self.defaults.with_overrides(&overrides),
            overridden: overrides.iter().map(|(kind, _)| *kind).collect(),
            usage,
            project_id,
        })
    }

    /// Sets (or, in `reset`, returns to the default) a project's limits;
    /// admins only. Every name and value is checked before anything is
    /// written.
    pub async fn set(
        &self,
        caller: &Identity,
        project_id: &str,
        set: &[(String, i64)],
        reset: &[String],
    ) -> Result<QuotaReport> {
        if !caller.is_admin() {
            return Err(Error::Forbidden("only an admin may set quotas".to_owned()));
        }
        if project_id.is_empty() || project_id.len() > 64 {
            return Err(Error::InvalidInput(
                "project: give the project id (at most 64 characters)".to_owned(),
            ));
        }
        let kind_of = |name: &str| {
            QuotaKind::parse(name).ok_or_else(|| {
                Error::InvalidInput(format!(
                    "quota {:?} does not exist: use one of {}",
                    ember_runtime::quote::quoted(name),
                    QuotaKind::ALL.map(QuotaKind::as_str).join(", ")
                ))
            })
        };
        let mut limits = Vec::with_capacity(set.len());
        for (name, limit) in set {
            let kind = kind_of(name)?;
            limits.push((kind, validate_limit(kind, *limit)?));
        }
        let reset = reset
            .iter()
            .map(|name| kind_of(name))
            .collect::<Result<Vec<_>>>()?;
        if limits.is_empty() && reset.is_empty() {
            return Err(Error::InvalidInput(
                "give at least one limit to set or reset".to_owned(),
            ));
        }
        self.store
            .set_quota_overrides(project_id, &limits, &reset)
            .await?;
        // This replica sees the change at once; others within the TTL.
        if let Ok(mut cached) = self.cached.lock() {
            cached.remove(project_id);
        }
        tracing::info!(project_id, admin = %caller.user_id, ?limits, ?reset, "quotas set");
        self.show(caller, Some(project_id)).await
    }
}
