//! Persistence of quotas: a project's overrides, and what it uses now —
//! counted in the database (one `COUNT` each, on indexed columns; live
//! instances, counted at every instance created, from a count the
//! database's triggers keep), so every engine replica sees the same use.

use async_trait::async_trait;
use chrono::Utc;
use sea_orm::{ConnectionTrait, DatabaseConnection, TransactionTrait};
use uuid::Uuid;

use crate::domain::quota::QuotaKind;
use crate::error::{Error, Result};
use ember_runtime::database::statement;

/// What a quota counts, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    Stacks,
    Clusters,
    Nodes,
    NodesOf(Uuid),
    Instances,
    RunningOperations,
    SoftwareConfigs,
    SoftwareDeployments,
}

#[async_trait]
pub trait QuotaStore: Send + Sync + 'static {
    /// The limits an admin set for `project_id`.
    async fn quota_overrides(&self, project_id: &str) -> Result<Vec<(QuotaKind, u64)>>;
    /// Sets `set` and removes `reset` (back to the default), in one
    /// transaction.
    async fn set_quota_overrides(
        &self,
        project_id: &str,
        set: &[(QuotaKind, u64)],
        reset: &[QuotaKind],
    ) -> Result<()>;
    /// How much of `usage` `project_id` holds now.
    async fn quota_usage(&self, project_id: &str, usage: Usage) -> Result<u64>;
    /// The project's live root stacks and its running operations, in one
    /// read (what a stack create is checked against).
    async fn stack_create_usage(&self, project_id: &str) -> Result<(u64, u64)>;
}

pub struct SqlQuotaStore {
    connection: DatabaseConnection,
    reader: ember_runtime::database::Reader,
}

impl SqlQuotaStore {
    pub fn new(
        connection: DatabaseConnection,
        reader: impl Into<ember_runtime::database::Reader>,
    ) -> Self {
        SqlQuotaStore {
            connection,
            reader: reader.into(),
        }
    }
}

#[async_trait]
impl QuotaStore for SqlQuotaStore {
    async fn quota_overrides(&self, project_id: &str) -> Result<Vec<(QuotaKind, u64)>> {
        let backend = self.reader.get_database_backend();
        let rows = self
            .reader
            .query_all_raw(statement(
                backend,
                "SELECT kind, quota_limit FROM project_quotas WHERE project_id = $1",
                vec![project_id.into()],
            ))
            .await?;
        rows.into_iter()
            .map(|row| {
                let kind: String = row.try_get("", "kind")?;
                let limit: i64 = row.try_get("", "quota_limit")?;
                let kind = QuotaKind::parse(&kind).ok_or_else(|| {
                    Error::Database(format!(
                        "project {project_id}: stored quota {kind:?} is unknown"
                    ))
                })?;
                Ok((kind, u64::try_from(limit).unwrap_or(0)))
            })
            .collect()
    }

    async fn set_quota_overrides(
        &self,
        project_id: &str,
        set: &[(QuotaKind, u64)],
        reset: &[QuotaKind],
    ) -> Result<()> {
        let backend = self.connection.get_database_backend();
        let transaction = self.connection.begin().await?;
        for kind in reset.iter().chain(set.iter().map(|(kind, _)| kind)) {
            transaction
                .execute_raw(statement(
                    backend,
                    "DELETE FROM project_quotas WHERE project_id = $1 AND kind = $2",
                    vec![project_id.into(), kind.as_str().into()],
                ))
                .await?;
        }
        for (kind, limit) in set {
            transaction
                .execute_raw(statement(
                    backend,
                    "INSERT INTO project_quotas (project_id, kind, quota_limit, updated_at) VALUES ($1, $2, $3, $4)",
                    vec![
                        project_id.into(),
                        kind.as_str().into(),
                        i64::try_from(*limit).unwrap_or(i64::MAX).into(),
                        Utc::now().into(),
                    ],
                ))
                .await?;
        }
        transaction.commit().await?;
        Ok(())
    }

    async fn quota_usage(&self, project_id: &str, usage: Usage) -> Result<u64> {
        let backend = self.reader.get_database_backend();
        let (sql, values): (&str, Vec<sea_orm::Value>) = match usage {
            Usage::Stacks => (
                "SELECT COUNT(*) AS used FROM stacks WHERE project_id = $1 AND deleted_at IS NULL AND parent_id IS NULL",
                vec![project_id.into()],
            ),
            Usage::Clusters => (
                "SELECT COUNT(*) AS used FROM clusters WHERE project_id = $1",
                vec![project_id.into()],
            ),
            Usage::Nodes => (
                "SELECT COUNT(*) AS used FROM cluster_nodes WHERE project_id = $1",
                vec![project_id.into()],
            ),
            Usage::NodesOf(cluster_id) => (
                "SELECT COUNT(*) AS used FROM cluster_nodes WHERE cluster_id = $1",
                vec![cluster_id.into()],
            ),
            // Kept by triggers (migration m20261211_100001): a count of
            // the project's instances would visit every one of them.
            Usage::Instances => (
                "SELECT COALESCE((SELECT used FROM project_instance_counts WHERE project_id = $1), 0) AS used",
                vec![project_id.into()],
            ),
            Usage::SoftwareConfigs => (
                "SELECT COUNT(*) AS used FROM software_configs WHERE project_id = $1",
                vec![project_id.into()],
            ),
            Usage::SoftwareDeployments => (
                "SELECT COUNT(*) AS used FROM software_deployments WHERE project_id = $1",
                vec![project_id.into()],
            ),
            Usage::RunningOperations => (
                "SELECT (SELECT COUNT(*) FROM stacks WHERE project_id = $1 AND status = 'IN_PROGRESS' AND parent_id IS NULL) \
                 + (SELECT COUNT(*) FROM cluster_actions WHERE project_id = $1 AND status IN ('RUNNING', 'WAITING') AND CAST(depended_by AS TEXT) = '[]') AS used",
                vec![project_id.into()],
            ),
        };
        let row = self
            .reader
            .query_one_raw(statement(backend, sql, values))
            .await?
            .ok_or_else(|| Error::Database("a COUNT returned no row".into()))?;
        let used: i64 = row.try_get("", "used")?;
        Ok(u64::try_from(used).unwrap_or(0))
    }

    async fn stack_create_usage(&self, project_id: &str) -> Result<(u64, u64)> {
        let backend = self.reader.get_database_backend();
        let row = self
            .reader
            .query_one_raw(statement(
                backend,
                "SELECT (SELECT COUNT(*) FROM stacks WHERE project_id = $1 AND deleted_at IS NULL AND parent_id IS NULL) AS stacks, \
                 (SELECT COUNT(*) FROM stacks WHERE project_id = $1 AND status = 'IN_PROGRESS' AND parent_id IS NULL) \
                 + (SELECT COUNT(*) FROM cluster_actions WHERE project_id = $1 AND status IN ('RUNNING', 'WAITING') AND CAST(depended_by AS TEXT) = '[]') AS running",
                vec![project_id.into()],
            ))
            .await?
            .ok_or_else(|| Error::Database("a COUNT returned no row".into()))?;
        let stacks: i64 = row.try_get("", "stacks")?;
        let running: i64 = row.try_get("", "running")?;
        Ok((
            u64::try_from(stacks).unwrap_or(0),
            u64::try_from(running).unwrap_or(0),
        ))
    }
}
