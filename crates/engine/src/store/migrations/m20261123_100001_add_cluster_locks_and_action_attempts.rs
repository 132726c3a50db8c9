//! Cluster actions serialised per cluster and fenced per run:
//! - `clusters.lock_action_id`: the action holding the cluster's lock
//!   (Senlin's cluster lock), taken in the transaction that claims it and
//!   released in the one that makes it final;
//! - `cluster_actions.takes_cluster_lock`: whether the action needs that lock
//!   (cluster actions and the node actions of members; not the NODE_DELETE
//!   children of a removal, which run under their parent's lock);
//! - `cluster_actions.attempt`: the fencing token, incremented by each claim;
//!   every write of a run is conditional on it;
//! - a unique index on (cluster_id, node_index) of member nodes, so a
//!   repeated index fails loudly. Indexes repeated by the old allocator are
//!   renumbered first.

use std::collections::{HashMap, HashSet};

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;
use sea_orm_migration::sea_orm::{ConnectionTrait, QueryResult};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Clusters {
    Table,
    Id,
    NextIndex,
    LockActionId,
}

#[derive(DeriveIden)]
enum ClusterActions {
    Table,
    Id,
    Kind,
    ClusterId,
    Status,
    Inputs,
    Attempt,
    TakesClusterLock,
    CreatedAt,
}

#[derive(DeriveIden)]
enum ClusterNodes {
    Table,
    Id,
    ClusterId,
    NodeIndex,
    CreatedAt,
}

const UNIQUE_MEMBER_INDEX: &str = "cluster_nodes_unique_member_index";
const READY_BY_CLUSTER_INDEX: &str = "cluster_actions_ready_by_cluster";

fn read<T: sea_orm_migration::sea_orm::TryGetable>(
    row: &QueryResult,
    column: &str,
) -> Result<T, DbErr> {
    row.try_get("", column)
}

/// Sets `takes_cluster_lock` on the actions not yet final, and gives the
/// lock to the one running or waiting on each cluster (the first, should
/// the old code have run several at once).
async fn backfill_locks(manager: &SchemaManager<'_>) -> Result<(), DbErr> {
    let connection = manager.get_connection();
    let unfinished = connection
        .query_all(
            Query::select()
                .columns([
                    ClusterActions::Id,
                    ClusterActions::Kind,
                    ClusterActions::ClusterId,
                    ClusterActions::Status,
                    ClusterActions::Inputs,
                ])
                .from(ClusterActions::Table)
                .and_where(Expr::col(ClusterActions::Status).is_in(["READY", "RUNNING", "WAITING"]))
                .order_by(ClusterActions::CreatedAt, Order::Asc),
        )
        .await?;
    let mut locked: HashSet<uuid::Uuid> = HashSet::new();
    for row in unfinished {
        let id: uuid::Uuid = read(&row, "id")?;
        let kind: String = read(&row, "kind")?;
        let cluster_id: Option<uuid::Uuid> = read(&row, "cluster_id")?;
        let status: String = read(&row, "status")?;
        let inputs: serde_json::Value = read(&row, "inputs")?;
        let Some(cluster_id) = cluster_id else {
            continue;
        };
        let takes_lock = match kind.as_str() {
            "NODE_DELETE" => inputs.get("standalone") == Some(&serde_json::Value::Bool(true)),
            _ => true,
        };
        if !takes_lock {
            continue;
        }
        connection
            .execute(
                Query::update()
                    .table(ClusterActions::Table)
                    .value(ClusterActions::TakesClusterLock, true)
                    .and_where(Expr::col(ClusterActions::Id).eq(id)),
            )
            .await?;
        if status != "READY" && locked.insert(cluster_id) {
            connection
                .execute(
                    Query::update()
                        .table(Clusters::Table)
                        .value(Clusters::LockActionId, id)
                        .and_where(Expr::col(Clusters::Id).eq(cluster_id))
                        .and_where(Expr::col(Clusters::LockActionId).is_null()),
                )
                .await?;
        }
    }
    Ok(())
}

/// Gives the member nodes that share an index with an older member of
/// their cluster a fresh index past the cluster's counter.
async fn renumber_repeated_indexes(manager: &SchemaManager<'_>) -> Result<(), DbErr> {
    let connection = manager.get_connection();
    let members = connection
        .query_all(
            Query::select()
                .columns([
                    ClusterNodes::Id,
                    ClusterNodes::ClusterId,
                    ClusterNodes::NodeIndex,
                ])
                .from(ClusterNodes::Table)
                .and_where(Expr::col(ClusterNodes::ClusterId).is_not_null())
                .order_by(ClusterNodes::CreatedAt, Order::Asc)
                .order_by(ClusterNodes::Id, Order::Asc),
        )
        .await?;
    let mut seen: HashMap<uuid::Uuid, HashSet<i32>> = HashMap::new();
    let mut repeated: Vec<(uuid::Uuid, uuid::Uuid)> = Vec::new();
    let mut highest: HashMap<uuid::Uuid, i32> = HashMap::new();
    for row in members {
        let id: uuid::Uuid = read(&row, "id")?;
        let cluster_id: uuid::Uuid = read(&row, "cluster_id")?;
        let index: i32 = read(&row, "node_index")?;
        let top = highest.entry(cluster_id).or_insert(index);
        *top = Ord::max(*top, index);
        if !seen.entry(cluster_id).or_default().insert(index) {
            repeated.push((cluster_id, id));
        }
    }
    for (cluster_id, node_id) in repeated {
        let Some(row) = connection
            .query_one(
                Query::select()
                    .column(Clusters::NextIndex)
                    .from(Clusters::Table)
                    .and_where(Expr::col(Clusters::Id).eq(cluster_id)),
            )
            .await?
        else {
            continue;
        };
        let next: i32 = read(&row, "next_index")?;
        let floor = highest
            .get(&cluster_id)
            .copied()
            .unwrap_or(0)
            .saturating_add(1);
        let index = Ord::max(next, floor);
        connection
            .execute(
                Query::update()
                    .table(ClusterNodes::Table)
                    .value(ClusterNodes::NodeIndex, index)
                    .and_where(Expr::col(ClusterNodes::Id).eq(node_id)),
            )
            .await?;
        connection
            .execute(
                Query::update()
                    .table(Clusters::Table)
                    .value(Clusters::NextIndex, index.saturating_add(1))
                    .and_where(Expr::col(Clusters::Id).eq(cluster_id)),
            )
            .await?;
        highest.insert(cluster_id, index);
    }
    Ok(())
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::add_columns(
            manager,
            Clusters::Table,
            [schema::uuid_null(Clusters::LockActionId)],
        )
        .await?;
        migration::add_columns(
            manager,
            ClusterActions::Table,
            [
                schema::integer(ClusterActions::Attempt)
                    .default(0)
                    .to_owned(),
                schema::boolean(ClusterActions::TakesClusterLock)
                    .default(false)
                    .to_owned(),
            ],
        )
        .await?;
        backfill_locks(manager).await?;
        renumber_repeated_indexes(manager).await?;
        // A partial index: orphan nodes (no cluster) keep whatever index
        // they had. The same statement on SQLite and PostgreSQL.
        manager
            .get_connection()
            .execute_unprepared(&format!(
                "CREATE UNIQUE INDEX IF NOT EXISTS {UNIQUE_MEMBER_INDEX} \
                 ON cluster_nodes (cluster_id, node_index) WHERE cluster_id IS NOT NULL"
            ))
            .await?;
        // The claim looks for each cluster's oldest READY action.
        migration::create_index(
            manager,
            READY_BY_CLUSTER_INDEX,
            ClusterActions::Table,
            [
                ClusterActions::ClusterId,
                ClusterActions::Status,
                ClusterActions::CreatedAt,
            ],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_index(manager, READY_BY_CLUSTER_INDEX, ClusterActions::Table).await?;
        manager
            .get_connection()
            .execute_unprepared(&format!("DROP INDEX IF EXISTS {UNIQUE_MEMBER_INDEX}"))
            .await?;
        migration::drop_columns(manager, Clusters::Table, [Clusters::LockActionId]).await?;
        migration::drop_columns(
            manager,
            ClusterActions::Table,
            [ClusterActions::Attempt, ClusterActions::TakesClusterLock],
        )
        .await
    }
}
