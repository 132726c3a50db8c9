//! The fenced writes of action runs: the fence check that opens each of
//! their transactions, a [`ClusterChange`] applied inside one, the atomic
//! node index allocator, and the settling of a cluster (status and size
//! from its nodes, lock released) when its lock holder ends.
//!
//! Lock order inside a transaction is always: the action row (the fence),
//! then the cluster row, then node rows — and claims, which take cluster
//! rows first, skip locked rows instead of waiting — so PostgreSQL never
//! deadlocks two replicas.

use sea_orm::sea_query::{Expr, ExprTrait, OnConflict};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, EntityTrait,
    QueryFilter, QueryOrder, QuerySelect, SqliteTransactionMode, TransactionOptions,
    TransactionTrait,
};
use serde_json::Value;
use uuid::Uuid;

use super::convert::{binding_row, cluster_from, node_from, node_row};
use super::entity::{action, binding, cluster, event, node};
use super::{ChangeOutcome, ClusterChange, Settle};
use crate::domain::cluster::settle::settle;
use crate::domain::cluster::{
    ActionStatus, ClusterAction, ClusterConfig, ClusterEvent, Fence, Node, NodeStatus,
};
use crate::error::{Error, Result};

/// Begins a transaction that will write: `BEGIN IMMEDIATE` on SQLite, so
/// it takes the database's write lock (waiting for it) before its first
/// read, and never fails on a snapshot another writer made stale.
pub async fn begin_write(connection: &DatabaseConnection) -> Result<DatabaseTransaction> {
    let options = if connection.get_database_backend() == DbBackend::Sqlite {
        TransactionOptions {
            sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
            ..TransactionOptions::default()
        }
    } else {
        TransactionOptions::default()
    };
    Ok(connection.begin_with_options(options).await?)
}

pub async fn insert_events(
    connection: &impl ConnectionTrait,
    events: &[ClusterEvent],
) -> Result<()> {
    if !events.is_empty() {
        event::Entity::insert_many(events.iter().map(super::convert::event_row))
            .exec_without_returning(connection)
            .await?;
    }
    Ok(())
}

/// The fence check: whether the run still owns its action. It writes
/// nothing: inside a fenced write (`BEGIN IMMEDIATE` on SQLite, so no other
/// writer until it ends) the read holds, and on PostgreSQL it locks the row
/// (`FOR UPDATE`) until the transaction ends. An UPDATE here rewrote the
/// action's whole row once per node — a growth's outputs list its planned
/// nodes, 370 KB at 10,000 — which made a growth's cost per node grow with
/// its size.
pub async fn still_owned_in(connection: &impl ConnectionTrait, fence: &Fence) -> Result<bool> {
    let mut select = action::Entity::find()
        .select_only()
        .column(action::Column::Id)
        .filter(action::Column::Id.eq(fence.action_id))
        .filter(action::Column::Status.eq(ActionStatus::Running.as_str()))
        .filter(action::Column::Owner.eq(fence.owner))
        .filter(action::Column::Attempt.eq(fence.attempt));
    if connection.get_database_backend() == DbBackend::Postgres {
        select = select.lock_exclusive();
    }
    Ok(select.into_tuple::<Uuid>().one(connection).await?.is_some())
}

/// Reserves `count` indexes of the cluster in one statement; returns the
/// first.
pub async fn take_node_indexes_in(
    connection: &impl ConnectionTrait,
    cluster_id: Uuid,
    count: i32,
) -> Result<i32> {
    Ok(reserve_member_indexes_in(connection, cluster_id, count)
        .await?
        .0)
}

/// Reserves `count` indexes of the cluster in one statement; returns the
/// first and the cluster's config as that statement read it (so the new
/// members are named by the config of the moment their indexes were
/// taken).
pub async fn reserve_member_indexes_in(
    connection: &impl ConnectionTrait,
    cluster_id: Uuid,
    count: i32,
) -> Result<(i32, ClusterConfig)> {
    if count < 0 {
        return Err(Error::InvalidInput(format!(
            "cannot reserve {count} node indexes"
        )));
    }
    let rows = cluster::Entity::update_many()
        .col_expr(
            cluster::Column::NextIndex,
            Expr::col(cluster::Column::NextIndex).add(count),
        )
        .filter(cluster::Column::Id.eq(cluster_id))
        .exec_with_returning(connection)
        .await?;
    let row = rows
        .into_iter()
        .next()
        .ok_or_else(|| Error::NotFound(format!("cluster {cluster_id} not found")))?;
    let config = match row.config {
        Value::Object(values) => ClusterConfig::stored(values),
        _ => ClusterConfig::default(),
    };
    Ok((row.next_index - count, config))
}

/// Applies `change` inside a transaction whose fence was checked.
pub async fn apply_change_in(
    transaction: &DatabaseTransaction,
    action_id: Uuid,
    change: &ClusterChange,
) -> Result<ChangeOutcome> {
    let now = ember_runtime::time::now();
    let mut outcome = ChangeOutcome::default();
    let needs_cluster = change.cluster != super::ClusterColumns::default()
        || !change.new_members.is_empty()
        || !change.adopt_nodes.is_empty()
        || change.bind_policy.is_some()
        || change.unbind_policy.is_some();
    let cluster_id = match (change.cluster_id, needs_cluster) {
        (Some(id), _) => Some(id),
        (None, false) => None,
        (None, true) => {
            return Err(Error::Database(
                "a cluster change names no cluster".to_owned(),
            ));
        }
    };
    if let Some(cluster_id) = cluster_id {
        let columns = &change.cluster;
        if *columns != super::ClusterColumns::default() {
            let mut update = cluster::Entity::update_many()
                .col_expr(cluster::Column::UpdatedAt, Expr::value(now));
            if let Some(desired) = columns.desired_capacity {
                update = update.col_expr(cluster::Column::DesiredCapacity, Expr::value(desired));
            }
            if let Some(min_size) = columns.min_size {
                update = update.col_expr(cluster::Column::MinSize, Expr::value(min_size));
            }
            if let Some(max_size) = columns.max_size {
                update = update.col_expr(cluster::Column::MaxSize, Expr::value(max_size));
            }
            if let Some((status, reason)) = &columns.status {
                update = update
                    .col_expr(cluster::Column::Status, Expr::value(status.as_str()))
                    .col_expr(cluster::Column::StatusReason, Expr::value(reason.as_str()));
            }
            if let Some(name) = &columns.name {
                update = update.col_expr(cluster::Column::Name, Expr::value(name.as_str()));
            }
            if let Some(metadata) = &columns.metadata {
                update = update.col_expr(
                    cluster::Column::Metadata,
                    Expr::value(Value::Object(metadata.clone())),
                );
            }
            if let Some(timeout) = columns.timeout {
                update = update.col_expr(cluster::Column::Timeout, Expr::value(timeout));
            }
            if let Some(config) = &columns.config {
                update = update.col_expr(
                    cluster::Column::Config,
                    Expr::value(Value::Object(config.values().clone())),
                );
            }
            if let Some(profile_id) = columns.profile_id {
                update = update.col_expr(cluster::Column::ProfileId, Expr::value(profile_id));
            }
            let result = update
                .filter(cluster::Column::Id.eq(cluster_id))
                .exec(transaction)
                .await?;
            if result.rows_affected != 1 {
                return Err(Error::NotFound(format!("cluster {cluster_id} is gone")));
            }
        }
        let joining = change.new_members.len() + change.adopt_nodes.len();
        if joining > 0 {
            let count = i32::try_from(joining)
                .map_err(|_| Error::InvalidInput(format!("{joining} nodes is too many")))?;
            let (mut index, config) =
                reserve_member_indexes_in(transaction, cluster_id, count).await?;
            for member in &change.new_members {
                let mut member = member.clone();
                member.cluster_id = Some(cluster_id);
                member.index = index;
                if member.name.is_empty() {
                    member.name = config.node_name(cluster_id, index);
                }
                node::Entity::insert(node_row(&member))
                    .exec_without_returning(transaction)
                    .await?;
                outcome.new_members.push(member);
                index += 1;
            }
            for node_id in &change.adopt_nodes {
                let result = node::Entity::update_many()
                    .col_expr(node::Column::ClusterId, Expr::value(cluster_id))
                    .col_expr(node::Column::NodeIndex, Expr::value(index))
                    .col_expr(node::Column::UpdatedAt, Expr::value(now))
                    .filter(node::Column::Id.eq(*node_id))
                    .filter(node::Column::ClusterId.is_null())
                    .filter(node::Column::Status.is_not_in([
                        NodeStatus::Deleting.as_str(),
                        NodeStatus::Init.as_str(),
                        NodeStatus::Creating.as_str(),
                    ]))
                    .exec(transaction)
                    .await?;
                if result.rows_affected == 1 {
                    outcome.adopted.push(*node_id);
                }
                index += 1;
            }
        }
        if let Some(binding) = &change.bind_policy {
            binding::Entity::insert(binding_row(binding))
                .on_conflict(
                    OnConflict::columns([binding::Column::ClusterId, binding::Column::PolicyId])
                        .update_columns([binding::Column::Priority, binding::Column::Enabled])
                        .to_owned(),
                )
                .exec_without_returning(transaction)
                .await?;
        }
        if let Some(policy_id) = change.unbind_policy {
            binding::Entity::delete_many()
                .filter(binding::Column::ClusterId.eq(cluster_id))
                .filter(binding::Column::PolicyId.eq(policy_id))
                .exec(transaction)
                .await?;
        }
    }
    for node_change in &change.node_changes {
        let mut update = node::Entity::update_many()
            .col_expr(
                node::Column::Status,
                Expr::value(node_change.status.as_str()),
            )
            .col_expr(
                node::Column::StatusReason,
                Expr::value(node_change.status_reason.as_str()),
            )
            .col_expr(node::Column::UpdatedAt, Expr::value(now));
        if let Some(physical_id) = &node_change.physical_id {
            update = update.col_expr(node::Column::PhysicalId, Expr::value(physical_id.clone()));
        }
        if let Some(profile_id) = node_change.profile_id {
            update = update.col_expr(node::Column::ProfileId, Expr::value(profile_id));
        }
        let mut update = update.filter(node::Column::Id.eq(node_change.node_id));
        if !node_change.only_from.is_empty() {
            update = update.filter(
                node::Column::Status.is_in(node_change.only_from.iter().map(|s| s.as_str())),
            );
        }
        match node_change.only_in_cluster {
            None => {}
            Some(None) => update = update.filter(node::Column::ClusterId.is_null()),
            Some(Some(cluster_id)) => {
                update = update.filter(node::Column::ClusterId.eq(cluster_id))
            }
        }
        if update.exec(transaction).await?.rows_affected == 1 {
            outcome.changed_nodes.push(node_change.node_id);
        }
    }
    if !change.delete_nodes.is_empty() {
        node::Entity::delete_many()
            .filter(node::Column::Id.is_in(change.delete_nodes.iter().copied()))
            .exec(transaction)
            .await?;
    }
    // A node that leaves its cluster is an orphan again: no cluster, and
    // index -1 as Senlin shows orphans.
    for (node_id, status, reason) in &change.release_nodes {
        node::Entity::update_many()
            .col_expr(node::Column::ClusterId, Expr::value(Option::<Uuid>::None))
            .col_expr(node::Column::NodeIndex, Expr::value(-1))
            .col_expr(node::Column::Status, Expr::value(status.as_str()))
            .col_expr(node::Column::StatusReason, Expr::value(reason.as_str()))
            .col_expr(node::Column::UpdatedAt, Expr::value(now))
            .filter(node::Column::Id.eq(*node_id))
            .exec(transaction)
            .await?;
    }
    if let Some(outputs) = &change.outputs {
        action::Entity::update_many()
            .col_expr(
                action::Column::Outputs,
                Expr::value(Value::Object(outputs.clone())),
            )
            .filter(action::Column::Id.eq(action_id))
            .exec(transaction)
            .await?;
    }
    insert_events(transaction, &change.events).await?;
    Ok(outcome)
}

/// Leaves the cluster of `action` as `how` says and releases its lock, if
/// `action` holds it (children and orphan node actions hold none).
pub async fn settle_in(
    transaction: &DatabaseTransaction,
    action: &ClusterAction,
    how: &Settle,
) -> Result<()> {
    let Some(cluster_id) = action.cluster_id else {
        return Ok(());
    };
    if !action.takes_cluster_lock() {
        return Ok(());
    }
    let now = ember_runtime::time::now();
    let Some(row) = cluster::Entity::find_by_id(cluster_id)
        .one(transaction)
        .await?
    else {
        return Ok(());
    };
    if row.lock_action_id != Some(action.id) {
        tracing::warn!(
            action_id = %action.id,
            cluster_id = %cluster_id,
            holder = ?row.lock_action_id,
            "an action ended without holding its cluster's lock"
        );
        return Ok(());
    }
    let release = cluster::Entity::update_many()
        .col_expr(
            cluster::Column::LockActionId,
            Expr::value(Option::<Uuid>::None),
        )
        .col_expr(cluster::Column::UpdatedAt, Expr::value(now))
        .filter(cluster::Column::Id.eq(cluster_id))
        .filter(cluster::Column::LockActionId.eq(action.id));
    let cluster = cluster_from(row)?;
    let (status, reason, desired) = match how {
        Settle::Unchanged => {
            release.exec(transaction).await?;
            return Ok(());
        }
        Settle::Status(status, reason) => (*status, reason.clone(), None),
        Settle::FromNodes { keep_desired, lead } => {
            node::Entity::update_many()
                .col_expr(
                    node::Column::Status,
                    Expr::value(NodeStatus::Error.as_str()),
                )
                .col_expr(
                    node::Column::StatusReason,
                    Expr::value(format!(
                        "left unfinished by action {} ({}): {lead}",
                        action.id,
                        action.kind.as_str()
                    )),
                )
                .col_expr(node::Column::UpdatedAt, Expr::value(now))
                .filter(node::Column::ClusterId.eq(cluster_id))
                .filter(
                    node::Column::Status
                        .is_in([NodeStatus::Creating.as_str(), NodeStatus::Deleting.as_str()]),
                )
                .exec(transaction)
                .await?;
            let members: Vec<NodeStatus> = member_nodes(transaction, cluster_id)
                .await?
                .into_iter()
                .map(|node| node.status)
                .collect();
            let settled = settle(&cluster, &members, *keep_desired, lead);
            (
                settled.status,
                settled.status_reason,
                Some(settled.desired_capacity),
            )
        }
    };
    let mut release = release
        .col_expr(cluster::Column::Status, Expr::value(status.as_str()))
        .col_expr(cluster::Column::StatusReason, Expr::value(reason.as_str()));
    if let Some(desired) = desired {
        release = release.col_expr(cluster::Column::DesiredCapacity, Expr::value(desired));
    }
    release.exec(transaction).await?;
    insert_events(
        transaction,
        &[ClusterEvent::new(
            "CLUSTER",
            cluster.id,
            &cluster.name,
            Some(cluster.id),
            action.kind.as_str(),
            status.as_str(),
            reason,
            &action.project_id,
            &action.user_id,
        )],
    )
    .await
}

/// The cluster's counted members (INIT nodes left out), by index.
pub async fn member_nodes(
    connection: &impl ConnectionTrait,
    cluster_id: Uuid,
) -> Result<Vec<Node>> {
    node::Entity::find()
        .filter(node::Column::ClusterId.eq(cluster_id))
        .filter(node::Column::Status.ne(NodeStatus::Init.as_str()))
        .order_by_asc(node::Column::NodeIndex)
        .all(connection)
        .await?
        .into_iter()
        .map(node_from)
        .collect()
}
