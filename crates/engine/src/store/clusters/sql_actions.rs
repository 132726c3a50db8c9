//! The action half of [`super::ClusterStore`] on sea-orm. Each move that
//! must happen once is an `UPDATE … WHERE id = ? AND status = ?` (plus the
//! owner or lease where it matters) whose affected row count says whether
//! this caller won.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, LockBehavior, LockType};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect, QueryTrait, TransactionTrait,
};
use serde_json::Value;
use uuid::Uuid;

use super::ActionQuery;
use super::ReadyOutcome;
use super::convert::{action_from, action_row, cluster_row, event_row, node_row, uuids_json};
use super::entity::{action, cluster, event, node};
use crate::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterAction, ClusterEvent, ClusterStatus,
    LifecycleOutcome, Node,
};
use crate::error::Result;

async fn insert_events(connection: &impl ConnectionTrait, events: &[ClusterEvent]) -> Result<()> {
    if !events.is_empty() {
        event::Entity::insert_many(events.iter().map(event_row))
            .exec(connection)
            .await?;
    }
    Ok(())
}

pub async fn insert_actions(
    connection: &DatabaseConnection,
    actions: &[ClusterAction],
    events: &[ClusterEvent],
) -> Result<()> {
    let transaction = connection.begin().await?;
    if !actions.is_empty() {
        action::Entity::insert_many(actions.iter().map(action_row))
            .exec(&transaction)
            .await?;
    }
    insert_events(&transaction, events).await?;
    transaction.commit().await?;
    Ok(())
}

pub async fn list_actions(
    connection: &DatabaseConnection,
    query: &ActionQuery,
) -> Result<Vec<ClusterAction>> {
    let mut select = action::Entity::find();
    if let Some(project_id) = &query.project_id {
        select = select.filter(action::Column::ProjectId.eq(project_id.as_str()));
    }
    if let Some(cluster_id) = query.cluster_id {
        select = select.filter(action::Column::ClusterId.eq(cluster_id));
    }
    if let Some(status) = query.status {
        select = select.filter(action::Column::Status.eq(status.as_str()));
    }
    if let Some(marker) = query.marker {
        select = select.filter(action::Column::Id.gt(marker));
    }
    let page = super::ObjectQuery {
        limit: query.limit,
        ..Default::default()
    }
    .page_size();
    select
        .order_by_asc(action::Column::Id)
        .limit(page)
        .all(connection)
        .await?
        .into_iter()
        .map(action_from)
        .collect()
}

pub async fn list_by_status(
    connection: &DatabaseConnection,
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

/// Claims up to `limit` READY actions in one statement: the rows still
/// READY when the UPDATE reaches them become this engine's and are
/// returned. Replicas never both win a row (PostgreSQL re-checks the status
/// of a row another claim just changed; SQLite runs writers one at a time).
pub async fn claim_ready_actions(
    connection: &DatabaseConnection,
    engine_id: Uuid,
    lease_until: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<ClusterAction>> {
    let candidates = action::Entity::find()
        .select_only()
        .column(action::Column::Id)
        .filter(action::Column::Status.eq(ActionStatus::Ready.as_str()))
        .order_by_asc(action::Column::CreatedAt)
        .limit(limit)
        // Rows another claim holds are skipped, not waited for: claims
        // never queue behind each other or deadlock (PostgreSQL; SQLite
        // runs writers one at a time and has no row locks).
        .lock_with_behavior(LockType::Update, LockBehavior::SkipLocked)
        .into_query();
    let mut claimed = action::Entity::update_many()
        .col_expr(
            action::Column::Status,
            Expr::value(ActionStatus::Running.as_str()),
        )
        .col_expr(action::Column::Owner, Expr::value(engine_id))
        .col_expr(action::Column::LeaseExpiresAt, Expr::value(lease_until))
        .col_expr(
            action::Column::UpdatedAt,
            Expr::value(ember_runtime::time::now()),
        )
        .filter(action::Column::Id.in_subquery(candidates))
        .filter(action::Column::Status.eq(ActionStatus::Ready.as_str()))
        .exec_with_returning(connection)
        .await?;
    claimed.sort_by_key(|row| row.created_at);
    claimed.into_iter().map(action_from).collect()
}

pub async fn last_success(
    connection: &DatabaseConnection,
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

pub async fn renew_action_leases(
    connection: &DatabaseConnection,
    engine_id: Uuid,
    lease_until: DateTime<Utc>,
) -> Result<u64> {
    let result = action::Entity::update_many()
        .col_expr(action::Column::LeaseExpiresAt, Expr::value(lease_until))
        .filter(action::Column::Owner.eq(engine_id))
        .filter(action::Column::Status.eq(ActionStatus::Running.as_str()))
        .exec(connection)
        .await?;
    Ok(result.rows_affected)
}

pub async fn finish_action(
    connection: &DatabaseConnection,
    action: &ClusterAction,
    engine_id: Uuid,
    status: ActionStatus,
    reason: &str,
    events: &[ClusterEvent],
) -> Result<bool> {
    let transaction = connection.begin().await?;
    let result = action::Entity::update_many()
        .col_expr(action::Column::Status, Expr::value(status.as_str()))
        .col_expr(action::Column::StatusReason, Expr::value(reason))
        .col_expr(
            action::Column::Outputs,
            Expr::value(Value::Object(action.outputs.clone())),
        )
        .col_expr(action::Column::Owner, Expr::value(Option::<Uuid>::None))
        .col_expr(
            action::Column::LeaseExpiresAt,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .col_expr(
            action::Column::UpdatedAt,
            Expr::value(ember_runtime::time::now()),
        )
        .filter(action::Column::Id.eq(action.id))
        .filter(action::Column::Owner.eq(engine_id))
        .filter(action::Column::Status.eq(ActionStatus::Running.as_str()))
        .exec(&transaction)
        .await?;
    if result.rows_affected != 1 {
        return Ok(false);
    }
    insert_events(&transaction, events).await?;
    transaction.commit().await?;
    Ok(true)
}

pub async fn start_waiting_on_children(
    connection: &DatabaseConnection,
    parent: &ClusterAction,
    engine_id: Uuid,
    children: &[ClusterAction],
    cluster: Option<&Cluster>,
    nodes: &[Node],
    events: &[ClusterEvent],
) -> Result<bool> {
    let transaction = connection.begin().await?;
    let child_ids: Vec<Uuid> = children.iter().map(|child| child.id).collect();
    let result = action::Entity::update_many()
        .col_expr(
            action::Column::Status,
            Expr::value(ActionStatus::Waiting.as_str()),
        )
        .col_expr(
            action::Column::DependsOn,
            Expr::value(uuids_json(&child_ids)),
        )
        .col_expr(
            action::Column::Outputs,
            Expr::value(Value::Object(parent.outputs.clone())),
        )
        .col_expr(action::Column::Owner, Expr::value(Option::<Uuid>::None))
        .col_expr(
            action::Column::LeaseExpiresAt,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .col_expr(
            action::Column::UpdatedAt,
            Expr::value(ember_runtime::time::now()),
        )
        .filter(action::Column::Id.eq(parent.id))
        .filter(action::Column::Owner.eq(engine_id))
        .filter(action::Column::Status.eq(ActionStatus::Running.as_str()))
        .exec(&transaction)
        .await?;
    if result.rows_affected != 1 {
        return Ok(false);
    }
    if !children.is_empty() {
        action::Entity::insert_many(children.iter().map(action_row))
            .exec(&transaction)
            .await?;
    }
    if let Some(cluster) = cluster {
        cluster::Entity::update(cluster_row(cluster))
            .exec(&transaction)
            .await?;
    }
    for node in nodes {
        node::Entity::update(node_row(node))
            .exec(&transaction)
            .await?;
    }
    insert_events(&transaction, events).await?;
    transaction.commit().await?;
    Ok(true)
}

pub async fn make_ready(
    connection: &DatabaseConnection,
    action_id: Uuid,
    from: ActionStatus,
    outcome: Option<(LifecycleOutcome, &str)>,
    event: Option<&ClusterEvent>,
) -> Result<ReadyOutcome> {
    let transaction = connection.begin().await?;
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

pub async fn expire_waiting<'a>(
    connection: &DatabaseConnection,
    ids: &[Uuid],
    detail: &str,
    event: &'a (dyn for<'b> Fn(&'b ClusterAction) -> ClusterEvent + Send + Sync + 'a),
) -> Result<(Vec<ClusterAction>, Vec<ClusterAction>)> {
    if ids.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let transaction = connection.begin().await?;
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
    connection: &DatabaseConnection,
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

pub async fn finish_parent_if_done(
    connection: &DatabaseConnection,
    parent_id: Uuid,
) -> Result<Option<ClusterAction>> {
    let Some(parent) = action::Entity::find_by_id(parent_id)
        .one(connection)
        .await?
    else {
        return Ok(None);
    };
    let parent = action_from(parent)?;
    if parent.status != ActionStatus::Waiting {
        return Ok(None);
    }
    // Counted, not loaded: this runs after every child, so loading the
    // children would make a removal of n nodes cost n² rows.
    let children = || {
        action::Entity::find().filter(action::Column::Id.is_in(parent.depends_on.iter().copied()))
    };
    let unfinished = children()
        .filter(action::Column::Status.is_not_in(ActionStatus::FINAL.map(ActionStatus::as_str)))
        .count(connection)
        .await?;
    if unfinished > 0 {
        return Ok(None);
    }
    let failed = children()
        .filter(action::Column::Status.ne(ActionStatus::Succeeded.as_str()))
        .count(connection)
        .await?;
    let children = parent.depends_on.len();
    let (status, reason) = if failed == 0 {
        (
            ActionStatus::Succeeded,
            format!("{} completed", parent.kind.as_str()),
        )
    } else {
        (
            ActionStatus::Failed,
            format!("{failed} of {children} node action(s) failed"),
        )
    };
    let now = ember_runtime::time::now();
    let transaction = connection.begin().await?;
    let result = action::Entity::update_many()
        .col_expr(action::Column::Status, Expr::value(status.as_str()))
        .col_expr(action::Column::StatusReason, Expr::value(reason.as_str()))
        .col_expr(action::Column::UpdatedAt, Expr::value(now))
        .filter(action::Column::Id.eq(parent_id))
        .filter(action::Column::Status.eq(ActionStatus::Waiting.as_str()))
        .exec(&transaction)
        .await?;
    if result.rows_affected != 1 {
        return Ok(None);
    }
    if let Some(cluster_id) = parent.cluster_id {
        let cluster_status = if failed == 0 {
            ClusterStatus::Active
        } else {
            ClusterStatus::Warning
        };
        cluster::Entity::update_many()
            .col_expr(
                cluster::Column::Status,
                Expr::value(cluster_status.as_str()),
            )
            .col_expr(cluster::Column::StatusReason, Expr::value(reason.as_str()))
            .col_expr(cluster::Column::UpdatedAt, Expr::value(now))
            .filter(cluster::Column::Id.eq(cluster_id))
            .filter(cluster::Column::Status.ne(ClusterStatus::Deleting.as_str()))
            .exec(&transaction)
            .await?;
    }
    transaction.commit().await?;
    Ok(Some(ClusterAction {
        status,
        status_reason: reason,
        ..parent
    }))
}

pub async fn list_expired_leases(
    connection: &DatabaseConnection,
    now: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<ClusterAction>> {
    action::Entity::find()
        .filter(action::Column::Status.eq(ActionStatus::Running.as_str()))
        .filter(action::Column::LeaseExpiresAt.lt(now))
        .limit(limit)
        .all(connection)
        .await?
        .into_iter()
        .map(action_from)
        .collect()
}

pub async fn recover_expired_action(
    connection: &DatabaseConnection,
    action: &ClusterAction,
    now: DateTime<Utc>,
    requeue: bool,
    event: &ClusterEvent,
) -> Result<bool> {
    let (status, reason) = if requeue {
        (
            ActionStatus::Ready,
            format!("taken over: engine {} went away", display_owner(action)),
        )
    } else {
        (
            ActionStatus::Failed,
            format!(
                "engine {} went away while running it",
                display_owner(action)
            ),
        )
    };
    let transaction = connection.begin().await?;
    let result = action::Entity::update_many()
        .col_expr(action::Column::Status, Expr::value(status.as_str()))
        .col_expr(action::Column::StatusReason, Expr::value(reason))
        .col_expr(action::Column::Owner, Expr::value(Option::<Uuid>::None))
        .col_expr(
            action::Column::LeaseExpiresAt,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .col_expr(action::Column::UpdatedAt, Expr::value(now))
        .filter(action::Column::Id.eq(action.id))
        .filter(action::Column::Status.eq(ActionStatus::Running.as_str()))
        .filter(action::Column::LeaseExpiresAt.lt(now))
        .exec(&transaction)
        .await?;
    if result.rows_affected != 1 {
        return Ok(false);
    }
    insert_events(&transaction, std::slice::from_ref(event)).await?;
    transaction.commit().await?;
    Ok(true)
}

fn display_owner(action: &ClusterAction) -> String {
    action
        .owner
        .map(|owner| owner.to_string())
        .unwrap_or_else(|| "(unknown)".to_owned())
}
