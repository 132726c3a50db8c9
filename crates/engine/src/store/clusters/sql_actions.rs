//! The action half of [`super::ClusterStore`] on sea-orm: recording,
//! listing, lifecycle waits (completion versus deadline) and hooks. Each
//! move that must happen once is an `UPDATE … WHERE id = ? AND status = ?`
//! whose affected row count says whether this caller won. What runs do
//! (claims, fenced writes, ends, takeovers) is in `sql_runs`.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect,
};
use uuid::Uuid;

use super::changes::{begin_write, insert_events};
use super::convert::{action_from, action_row};
use super::entity::{action, node};
use super::{ActionQuery, ReadyOutcome};
use crate::domain::cluster::{
    ActionKind, ActionStatus, ClusterAction, ClusterEvent, LifecycleOutcome, NodeStatus,
};
use crate::error::Result;

pub async fn insert_actions(
    connection: &DatabaseConnection,
    actions: &[ClusterAction],
    events: &[ClusterEvent],
) -> Result<()> {
    let transaction = begin_write(connection).await?;
    if !actions.is_empty() {
        action::Entity::insert_many(actions.iter().map(action_row))
            .exec_without_returning(&transaction)
            .await?;
    }
    insert_events(&transaction, events).await?;
    transaction.commit().await?;
    Ok(())
}

pub async fn list_actions(
    connection: &impl ConnectionTrait,
    query: &ActionQuery,
) -> Result<Vec<ClusterAction>> {
    let mut select = action::Entity::find();
    if let Some(project_id) = &query.project_id {
        select = select.filter(action::Column::ProjectId.eq(project_id.as_str()));
    }
    if let Some(cluster_id) = query.cluster_id {
        select = select.filter(action::Column::ClusterId.eq(cluster_id));
    }
    let statuses: Vec<&str> = query
        .status
        .iter()
        .chain(&query.statuses)
        .map(|status| status.as_str())
        .collect();
    select = super::sql_lists::any_of(select, action::Column::Status, &statuses);
    select = super::sql_lists::any_of(select, action::Column::Name, &query.names);
    select = super::sql_lists::any_of(select, action::Column::Kind, &query.kinds);
    select = super::sql_lists::any_of(select, action::Column::TargetId, &query.targets);
    let page = super::ObjectQuery {
        limit: query.limit,
        ..Default::default()
    }
    .page_size();
    super::sql_lists::ordered_page(
        connection,
        select,
        &query.sort,
        super::sql_lists::action_column,
        action::Column::Id,
        query.marker,
        page,
    )
    .await?
    .into_iter()
    .map(action_from)
    .collect()
}

pub async fn list_by_status(
    connection: &impl ConnectionTrait,
    status: ActionStatus,
    limit: u64,
) -> Result<Vec<ClusterAction>> {
    action::Entity::find()
        .filter(action::Column::Status.eq(status.as_str()))
        .order_by_asc(action::Column::CreatedAt)
        .limit(limit)
        .all(connection)
        .await?
        .into_iter()
        .map(action_from)
        .collect()
}

pub async fn last_success(
    connection: &impl ConnectionTrait,
    cluster_id: Uuid,
    kind: ActionKind,
) -> Result<Option<DateTime<Utc>>> {
    Ok(action::Entity::find()
        .select_only()
        .column(action::Column::UpdatedAt)
        .filter(action::Column::ClusterId.eq(cluster_id))
        .filter(action::Column::Kind.eq(kind.as_str()))
        .filter(action::Column::Status.eq(ActionStatus::Succeeded.as_str()))
        .order_by_desc(action::Column::UpdatedAt)
        .limit(1)
        .into_tuple::<DateTime<Utc>>()
        .one(connection)
        .await?)
}

pub async fn make_ready(
    connection: &DatabaseConnection,
    action_id: Uuid,
    from: ActionStatus,
    outcome: Option<(LifecycleOutcome, &str)>,
    event: Option<&ClusterEvent>,
) -> Result<ReadyOutcome> {
    let transaction = begin_write(connection).await?;
    let mut update = action::Entity::update_many()
        .col_expr(
            action::Column::Status,
            Expr::value(ActionStatus::Ready.as_str()),
        )
        .col_expr(
            action::Column::UpdatedAt,
            Expr::value(ember_runtime::time::now()),
        );
    if let Some((outcome, detail)) = outcome {
        update = update
            .col_expr(
                action::Column::LifecycleOutcome,
                Expr::value(outcome.as_str()),
            )
            .col_expr(action::Column::LifecycleDetail, Expr::value(detail));
    }
    let result = update
        .filter(action::Column::Id.eq(action_id))
        .filter(action::Column::Status.eq(from.as_str()))
        .exec(&transaction)
        .await?;
    let moved = result.rows_affected == 1;
    if moved && let Some(event) = event {
        insert_events(&transaction, std::slice::from_ref(event)).await?;
    }
    let row = action::Entity::find_by_id(action_id)
        .one(&transaction)
        .await?;
    transaction.commit().await?;
    Ok(match row {
        None => ReadyOutcome::Unknown,
        Some(row) if moved => ReadyOutcome::Moved(action_from(row)?),
        Some(row) => ReadyOutcome::NotWaiting(action_from(row)?),
    })
}

/// A launching node's CONTINUE, done at once: its waiting NODE_CREATE
/// WAITING_LIFECYCLE_COMPLETION → SUCCEEDED (outcome COMPLETED, `detail`)
/// and the node CREATING → ACTIVE with `node_reason`, with `events`, in one
/// transaction.
pub async fn continue_launch(
    connection: &DatabaseConnection,
    action_id: Uuid,
    detail: &str,
    reason: &str,
    node_reason: &str,
    events: &[ClusterEvent],
) -> Result<ReadyOutcome> {
    let now = ember_runtime::time::now();
    let transaction = begin_write(connection).await?;
    let result = action::Entity::update_many()
        .col_expr(
            action::Column::Status,
            Expr::value(ActionStatus::Succeeded.as_str()),
        )
        .col_expr(action::Column::StatusReason, Expr::value(reason))
        .col_expr(
            action::Column::LifecycleOutcome,
            Expr::value(LifecycleOutcome::Completed.as_str()),
        )
        .col_expr(action::Column::LifecycleDetail, Expr::value(detail))
        .col_expr(action::Column::UpdatedAt, Expr::value(now))
        .filter(action::Column::Id.eq(action_id))
        .filter(action::Column::Status.eq(ActionStatus::WaitingLifecycleCompletion.as_str()))
        .exec(&transaction)
        .await?;
    let moved = result.rows_affected == 1;
    let row = action::Entity::find_by_id(action_id)
        .one(&transaction)
        .await?;
    if moved && let Some(row) = &row {
        node::Entity::update_many()
            .col_expr(
                node::Column::Status,
                Expr::value(NodeStatus::Active.as_str()),
            )
            .col_expr(node::Column::StatusReason, Expr::value(node_reason))
            .col_expr(node::Column::UpdatedAt, Expr::value(now))
            .filter(node::Column::Id.eq(row.target_id))
            .filter(node::Column::Status.eq(NodeStatus::Creating.as_str()))
            .exec(&transaction)
            .await?;
        insert_events(&transaction, events).await?;
    }
    transaction.commit().await?;
    Ok(match row {
        None => ReadyOutcome::Unknown,
        Some(row) if moved => ReadyOutcome::Moved(action_from(row)?),
        Some(row) => ReadyOutcome::NotWaiting(action_from(row)?),
    })
}

pub async fn expire_waiting<'a>(
    connection: &DatabaseConnection,
    ids: &[Uuid],
    detail: &str,
    event: &'a (dyn for<'b> Fn(&'b ClusterAction) -> ClusterEvent + Send + Sync + 'a),
) -> Result<(Vec<ClusterAction>, Vec<ClusterAction>)> {
    if ids.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let transaction = begin_write(connection).await?;
    let moved = action::Entity::update_many()
        .col_expr(
            action::Column::Status,
            Expr::value(ActionStatus::Ready.as_str()),
        )
        .col_expr(
            action::Column::LifecycleOutcome,
            Expr::value(LifecycleOutcome::Expired.as_str()),
        )
        .col_expr(action::Column::LifecycleDetail, Expr::value(detail))
        .col_expr(
            action::Column::UpdatedAt,
            Expr::value(ember_runtime::time::now()),
        )
        .filter(action::Column::Id.is_in(ids.iter().copied()))
        .filter(action::Column::Status.eq(ActionStatus::WaitingLifecycleCompletion.as_str()))
        .exec_with_returning(&transaction)
        .await?
        .into_iter()
        .map(action_from)
        .collect::<Result<Vec<_>>>()?;
    let events: Vec<ClusterEvent> = moved.iter().map(event).collect();
    insert_events(&transaction, &events).await?;
    let moved_ids: std::collections::HashSet<Uuid> = moved.iter().map(|action| action.id).collect();
    let others = action::Entity::find()
        .filter(action::Column::Id.is_in(ids.iter().copied().filter(|id| !moved_ids.contains(id))))
        .all(&transaction)
        .await?
        .into_iter()
        .map(action_from)
        .collect::<Result<Vec<_>>>()?;
    transaction.commit().await?;
    Ok((moved, others))
}

pub async fn mark_hooks_recorded(
    connection: &DatabaseConnection,
    action_ids: &[Uuid],
) -> Result<()> {
    if action_ids.is_empty() {
        return Ok(());
    }
    action::Entity::update_many()
        .col_expr(action::Column::HookRecorded, Expr::value(true))
        .filter(action::Column::Id.is_in(action_ids.iter().copied()))
        .exec(connection)
        .await?;
    Ok(())
}

pub async fn list_unrecorded_hooks(
    connection: &impl ConnectionTrait,
    limit: u64,
) -> Result<Vec<ClusterAction>> {
    action::Entity::find()
        .filter(action::Column::Status.eq(ActionStatus::WaitingLifecycleCompletion.as_str()))
        .filter(action::Column::HookRecorded.eq(false))
        .order_by_asc(action::Column::CreatedAt)
        .limit(limit)
        .all(connection)
        .await?
        .into_iter()
        .map(action_from)
        .collect()
}
