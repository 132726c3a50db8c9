//! The run half of [`super::ClusterStore`] on sea-orm: claims that take
//! the cluster lock, lease renewal, the fenced writes and ends of runs
//! (finish, waiting on children, a parent's end, a cluster's deletion), and
//! the takeover of runs whose engine went away. Each decision is one
//! conditional update whose affected row count says who won; each write of
//! a run is fenced by its token.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, EntityTrait, PaginatorTrait,
    QueryFilter, QuerySelect, UpdateMany,
};
use serde_json::Value;
use uuid::Uuid;

use super::changes::{apply_change_in, begin_write, insert_events, settle_in, still_owned_in};
use super::convert::{action_from, action_row, uuids_json};
use super::entity::{action, binding, cluster, node};
use super::{ClusterChange, Settle};
use crate::domain::cluster::{
    ActionKind, ActionStatus, ClusterAction, ClusterEvent, Fence, NodeStatus,
};
use crate::error::{Error, Result};
use ember_runtime::database::statement;

/// Claims up to `limit` READY actions: two statements in one transaction.
///
/// 1. Each cluster without a lock that has READY lock-taking actions is
///    locked for the oldest of them (FIFO per cluster: a newer action
///    never overtakes an older one).
/// 2. READY actions that need no lock, or hold their cluster's lock (just
///    taken, or kept through a takeover), become RUNNING with attempt + 1.
///
/// On PostgreSQL both pick their rows `FOR UPDATE SKIP LOCKED`: a row
/// another claim holds is skipped, not waited for, so claims never queue
/// behind each other or deadlock; the conditions are checked again on the
/// rows updated. On SQLite the transaction holds the write lock
/// throughout. A cluster locked for an action that statement 2 leaves for
/// later (beyond `limit`) stays locked for it: the next claim, by any
/// engine, takes it.
pub async fn claim_ready_actions(
    connection: &DatabaseConnection,
    engine_id: Uuid,
    lease_until: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<ClusterAction>> {
    let backend = connection.get_database_backend();
    let skip_locked = if backend == DbBackend::Postgres {
        "FOR UPDATE SKIP LOCKED"
    } else {
        ""
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let ready = ActionStatus::Ready.as_str();
    let transaction = begin_write(connection).await?;
    transaction
        .execute_raw(statement(
            backend,
            &format!(
                "UPDATE clusters SET lock_action_id = (\
                   SELECT a.id FROM cluster_actions a \
                   WHERE a.cluster_id = clusters.id AND a.status = '{ready}' AND a.takes_cluster_lock \
                   ORDER BY a.created_at, a.id LIMIT 1) \
                 WHERE clusters.id IN (\
                   SELECT c.id FROM clusters c \
                   WHERE c.lock_action_id IS NULL AND EXISTS (\
                     SELECT 1 FROM cluster_actions a \
                     WHERE a.cluster_id = c.id AND a.status = '{ready}' AND a.takes_cluster_lock) \
                   LIMIT $1 {skip_locked}) \
                 AND clusters.lock_action_id IS NULL"
            ),
            vec![limit.into()],
        ))
        .await?;
    let now = ember_runtime::time::now();
    let mut claimed = action::Entity::find()
        .from_raw_sql(statement(
            backend,
            &format!(
                "UPDATE cluster_actions SET status = '{running}', owner = $1, \
                   lease_expires_at = $2, updated_at = $3, attempt = attempt + 1, \
                   started_at = COALESCE(started_at, $3) \
                 WHERE cluster_actions.id IN (\
                   SELECT a.id FROM cluster_actions a \
                   WHERE a.status = '{ready}' AND (NOT a.takes_cluster_lock OR EXISTS (\
                     SELECT 1 FROM clusters c WHERE c.id = a.cluster_id AND c.lock_action_id = a.id)) \
                   ORDER BY a.created_at, a.id LIMIT $4 {skip_locked}) \
                 AND cluster_actions.status = '{ready}' \
                 RETURNING *",
                running = ActionStatus::Running.as_str(),
            ),
            vec![
                engine_id.into(),
                lease_until.into(),
                now.into(),
                limit.into(),
            ],
        ))
        .all(&transaction)
        .await?;
    transaction.commit().await?;
    claimed.sort_by_key(|row| (row.created_at, row.id));
    claimed.into_iter().map(action_from).collect()
}

pub async fn renew_action_leases(
    connection: &DatabaseConnection,
    engine_id: Uuid,
    action_ids: &[Uuid],
    lease_until: DateTime<Utc>,
) -> Result<u64> {
    let result = action::Entity::update_many()
        .col_expr(action::Column::LeaseExpiresAt, Expr::value(lease_until))
        .filter(action::Column::Id.is_in(action_ids.iter().copied()))
        .filter(action::Column::Owner.eq(engine_id))
        .filter(action::Column::Status.eq(ActionStatus::Running.as_str()))
        .exec(connection)
        .await?;
    Ok(result.rows_affected)
}

/// `update` of a run's action as the run lets it go: owner and lease
/// cleared, and fenced — it applies only while `fence`'s run still owns the
/// action and it is RUNNING.
fn released_by_its_run(
    update: UpdateMany<action::Entity>,
    fence: &Fence,
) -> UpdateMany<action::Entity> {
    update
        .col_expr(action::Column::Owner, Expr::value(Option::<Uuid>::None))
        .col_expr(
            action::Column::LeaseExpiresAt,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .col_expr(
            action::Column::UpdatedAt,
            Expr::value(ember_runtime::time::now()),
        )
        .filter(action::Column::Id.eq(fence.action_id))
        .filter(action::Column::Owner.eq(fence.owner))
        .filter(action::Column::Attempt.eq(fence.attempt))
        .filter(action::Column::Status.eq(ActionStatus::Running.as_str()))
}

/// Moves the run's action RUNNING → `status` (fenced), clearing owner and
/// lease; true when it did.
async fn finish_fenced(
    connection: &impl ConnectionTrait,
    action: &ClusterAction,
    status: ActionStatus,
    reason: &str,
) -> Result<bool> {
    let Some(fence) = action.fence() else {
        return Ok(false);
    };
    let update = action::Entity::update_many()
        .col_expr(action::Column::Status, Expr::value(status.as_str()))
        .col_expr(action::Column::StatusReason, Expr::value(reason));
    let result = released_by_its_run(update, &fence).exec(connection).await?;
    Ok(result.rows_affected == 1)
}

pub async fn finish_action(
    connection: &DatabaseConnection,
    action: &ClusterAction,
    status: ActionStatus,
    reason: &str,
    change: &ClusterChange,
    settle: &Settle,
) -> Result<bool> {
    let transaction = begin_write(connection).await?;
    if !finish_fenced(&transaction, action, status, reason).await? {
        return Ok(false);
    }
    apply_change_in(&transaction, action.id, change).await?;
    settle_in(&transaction, action, settle).await?;
    transaction.commit().await?;
    Ok(true)
}

pub async fn finish_cluster_delete(
    connection: &DatabaseConnection,
    action: &ClusterAction,
    reason: &str,
    events: &[ClusterEvent],
) -> Result<bool> {
    let cluster_id = action.target_id;
    let transaction = begin_write(connection).await?;
    if !finish_fenced(&transaction, action, ActionStatus::Succeeded, reason).await? {
        return Ok(false);
    }
    // Nodes still INIT never got a physical resource (their NODE_CREATE
    // waits for the lock this delete holds): they go with the cluster.
    node::Entity::delete_many()
        .filter(node::Column::ClusterId.eq(cluster_id))
        .filter(node::Column::Status.eq(NodeStatus::Init.as_str()))
        .exec(&transaction)
        .await?;
    let remaining = node::Entity::find()
        .filter(node::Column::ClusterId.eq(cluster_id))
        .count(&transaction)
        .await?;
    if remaining > 0 {
        return Err(Error::Conflict(format!(
            "cluster {cluster_id} still has {remaining} node(s): it is not deleted"
        )));
    }
    binding::Entity::delete_many()
        .filter(binding::Column::ClusterId.eq(cluster_id))
        .exec(&transaction)
        .await?;
    crate::store::receivers::delete_cluster_receivers(&transaction, cluster_id).await?;
    cluster::Entity::delete_by_id(cluster_id)
        .exec(&transaction)
        .await?;
    let now = ember_runtime::time::now();
    let orphaned_reason = format!(
        "cluster {cluster_id} was deleted (by action {}) before this action ran",
        action.id
    );
    let orphaned = action::Entity::update_many()
        .col_expr(
            action::Column::Status,
            Expr::value(ActionStatus::Failed.as_str()),
        )
        .col_expr(
            action::Column::StatusReason,
            Expr::value(orphaned_reason.as_str()),
        )
        .col_expr(action::Column::UpdatedAt, Expr::value(now))
        .filter(action::Column::ClusterId.eq(cluster_id))
        .filter(action::Column::Status.eq(ActionStatus::Ready.as_str()))
        .filter(action::Column::Id.ne(action.id))
        .exec_with_returning(&transaction)
        .await?;
    let mut all_events = events.to_vec();
    for row in orphaned {
        let failed = action_from(row)?;
        all_events.push(ClusterEvent::new(
            "ACTION",
            failed.id,
            &failed.name,
            failed.cluster_id,
            failed.kind.as_str(),
            "FAILED",
            orphaned_reason.clone(),
            &failed.project_id,
            &failed.user_id,
        ));
    }
    insert_events(&transaction, &all_events).await?;
    transaction.commit().await?;
    Ok(true)
}

pub async fn still_owned(
    connection: &DatabaseConnection,
    fence: &crate::domain::cluster::Fence,
) -> Result<bool> {
    still_owned_in(connection, fence).await
}

pub async fn apply_cluster_change(
    connection: &DatabaseConnection,
    fence: &crate::domain::cluster::Fence,
    change: &ClusterChange,
) -> Result<Option<super::ChangeOutcome>> {
    let transaction = begin_write(connection).await?;
    if !still_owned_in(&transaction, fence).await? {
        return Ok(None);
    }
    let outcome = apply_change_in(&transaction, fence.action_id, change).await?;
    transaction.commit().await?;
    Ok(Some(outcome))
}

pub async fn start_waiting_on_children(
    connection: &DatabaseConnection,
    parent: &ClusterAction,
    children: &[ClusterAction],
    change: &ClusterChange,
) -> Result<bool> {
    let Some(fence) = parent.fence() else {
        return Ok(false);
    };
    let transaction = begin_write(connection).await?;
    let child_ids: Vec<Uuid> = children.iter().map(|child| child.id).collect();
    let update = action::Entity::update_many()
        .col_expr(
            action::Column::Status,
            Expr::value(ActionStatus::Waiting.as_str()),
        )
        .col_expr(
            action::Column::DependsOn,
            Expr::value(uuids_json(&child_ids)),
        );
    let result = released_by_its_run(update, &fence)
        .exec(&transaction)
        .await?;
    if result.rows_affected != 1 {
        return Ok(false);
    }
    if !children.is_empty() {
        action::Entity::insert_many(children.iter().map(action_row))
            .exec_without_returning(&transaction)
            .await?;
    }
    apply_change_in(&transaction, parent.id, change).await?;
    transaction.commit().await?;
    Ok(true)
}

pub async fn finish_parent_if_done(
    connection: &DatabaseConnection,
    reader: &impl ConnectionTrait,
    parent_id: Uuid,
) -> Result<Option<ClusterAction>> {
    // Called after every child: first a look that reads no JSON, on the
    // readers (a child calls it after its own end committed, so a read
    // begun now sees it; the writer then decides again). A parent's
    // children are the only actions of its cluster that are not final and
    // do not take the cluster's lock (children never do, and only the
    // parent, which holds the lock, has any now); while one remains, the
    // parent waits. Without it each of n children would load the parent's
    // outputs (its n node ids) and count n ids: n² work. One unfinished
    // sibling is enough to know, looked up by (cluster, status) for each
    // status that is not final: a cluster's finished actions (ten
    // thousand, at ten thousand nodes) are never stepped over.
    let head: Option<(Option<Uuid>, String)> = action::Entity::find_by_id(parent_id)
        .select_only()
        .column(action::Column::ClusterId)
        .column(action::Column::Status)
        .into_tuple()
        .one(reader)
        .await?;
    let Some((cluster_id, status)) = head else {
        return Ok(None);
    };
    if status != ActionStatus::Waiting.as_str() {
        return Ok(None);
    }
    if let Some(cluster_id) = cluster_id {
        let unfinished = ActionStatus::unfinished().map(ActionStatus::as_str);
        let sibling_left: Option<Uuid> = action::Entity::find()
            .select_only()
            .column(action::Column::Id)
            .filter(action::Column::ClusterId.eq(cluster_id))
            .filter(action::Column::Status.is_in(unfinished))
            .filter(action::Column::TakesClusterLock.eq(false))
            .limit(1)
            .into_tuple()
            .one(reader)
            .await?;
        if sibling_left.is_some() {
            return Ok(None);
        }
    }
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
    if parent.outputs.get(RESUME_AFTER_CHILDREN_OUTPUT) == Some(&Value::Bool(true)) {
        return resume_parent(connection, parent).await;
    }
    let failed = children()
        .filter(action::Column::Status.ne(ActionStatus::Succeeded.as_str()))
        .count(connection)
        .await?;
    let children = parent.depends_on.len();
    let (status, reason) = if failed == 0 {
        let mut reason = format!("{} completed", parent.kind.as_str());
        if let Some(kept) = parent
            .outputs
            .get(KEPT_PROTECTED_OUTPUT)
            .and_then(Value::as_u64)
        {
            reason.push_str(&format!(
                ": {children} node(s) removed, {kept} fewer than asked: {KEPT_PROTECTED_REASON}"
            ));
        }
        (ActionStatus::Succeeded, reason)
    } else {
        (
            ActionStatus::Failed,
            format!("{failed} of {children} node action(s) failed"),
        )
    };
    let now = ember_runtime::time::now();
    let transaction = begin_write(connection).await?;
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
    let keep_desired = parent.outputs.get(KEEP_DESIRED_OUTPUT) == Some(&Value::Bool(true));
    let lead = if failed == 0 {
        format!("{} completed", parent.kind.as_str())
    } else {
        format!("{} failed: {reason}", parent.kind.as_str())
    };
    settle_in(
        &transaction,
        &parent,
        &Settle::FromNodes { keep_desired, lead },
    )
    .await?;
    transaction.commit().await?;
    Ok(Some(ClusterAction {
        status,
        status_reason: reason,
        ..parent
    }))
}

/// WAITING → READY, keeping the cluster's lock: the action runs again to
/// finish what its children's answers left (a growth's launch waits).
async fn resume_parent(
    connection: &DatabaseConnection,
    parent: ClusterAction,
) -> Result<Option<ClusterAction>> {
    let reason = "its lifecycle actions are answered: running again";
    let result = action::Entity::update_many()
        .col_expr(
            action::Column::Status,
            Expr::value(ActionStatus::Ready.as_str()),
        )
        .col_expr(action::Column::StatusReason, Expr::value(reason))
        .col_expr(
            action::Column::UpdatedAt,
            Expr::value(ember_runtime::time::now()),
        )
        .filter(action::Column::Id.eq(parent.id))
        .filter(action::Column::Status.eq(ActionStatus::Waiting.as_str()))
        .exec(connection)
        .await?;
    Ok((result.rows_affected == 1).then(|| ClusterAction {
        status: ActionStatus::Ready,
        status_reason: reason.to_owned(),
        ..parent
    }))
}

/// The output of an action that is READY again, not finished, when its
/// children have all ended (see `resume_parent`).
pub const RESUME_AFTER_CHILDREN_OUTPUT: &str = "resume_after_children";

/// The output of a removal whose deletion policy keeps the desired
/// capacity (`reduce_desired_capacity: false`).
pub const KEEP_DESIRED_OUTPUT: &str = "keep_desired_capacity";

/// The output of a scale-in that removed fewer nodes than asked because
/// the members left are protected from scale-in: how many fewer.
pub const KEPT_PROTECTED_OUTPUT: &str = "kept_protected";

/// Why: said in the action's reasons.
pub const KEPT_PROTECTED_REASON: &str = "the other members are protected from scale-in";

pub async fn list_expired_leases(
    connection: &impl ConnectionTrait,
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
            format!(
                "taken over: engine {} went away (run {} of at most {})",
                display_owner(action),
                action.attempt,
                crate::domain::cluster::MAX_RUN_ATTEMPTS
            ),
        )
    } else {
        (
            ActionStatus::Failed,
            format!(
                "engine {} went away while running it, {} time(s): given up",
                display_owner(action),
                action.attempt
            ),
        )
    };
    let transaction = begin_write(connection).await?;
    let result = action::Entity::update_many()
        .col_expr(action::Column::Status, Expr::value(status.as_str()))
        .col_expr(action::Column::StatusReason, Expr::value(reason.as_str()))
        .col_expr(action::Column::Owner, Expr::value(Option::<Uuid>::None))
        .col_expr(
            action::Column::LeaseExpiresAt,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .col_expr(action::Column::UpdatedAt, Expr::value(now))
        .filter(action::Column::Id.eq(action.id))
        .filter(action::Column::Attempt.eq(action.attempt))
        .filter(action::Column::Status.eq(ActionStatus::Running.as_str()))
        .filter(action::Column::LeaseExpiresAt.lt(now))
        .exec(&transaction)
        .await?;
    if result.rows_affected != 1 {
        return Ok(false);
    }
    if !requeue {
        // The node of a node action is left as the run left it: ERROR,
        // with why (a member's cluster is settled below as well).
        let unfinished = match action.kind {
            ActionKind::NodeDelete => Some(("not deleted", vec![NodeStatus::Deleting])),
            ActionKind::NodeCreate => {
                Some(("not created", vec![NodeStatus::Init, NodeStatus::Creating]))
            }
            ActionKind::NodeUpdate | ActionKind::NodeRecover => {
                Some(("not recreated", vec![NodeStatus::Creating]))
            }
            _ => None,
        };
        if let Some((what, from)) = unfinished {
            node::Entity::update_many()
                .col_expr(
                    node::Column::Status,
                    Expr::value(NodeStatus::Error.as_str()),
                )
                .col_expr(
                    node::Column::StatusReason,
                    Expr::value(format!("{what}: {reason}")),
                )
                .col_expr(node::Column::UpdatedAt, Expr::value(now))
                .filter(node::Column::Id.eq(action.target_id))
                .filter(node::Column::Status.is_in(from.iter().map(|status| status.as_str())))
                .exec(&transaction)
                .await?;
        }
        settle_in(
            &transaction,
            action,
            &Settle::FromNodes {
                keep_desired: false,
                lead: format!("{} failed: {reason}", action.kind.as_str()),
            },
        )
        .await?;
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
