//! The work side of the store on sea-orm: claiming due deliveries and
//! expired deadlines with one conditional update each, recording outcomes,
//! the embedded queue and events.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, LockBehavior, LockType};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, Condition, DatabaseConnection, EntityTrait, PaginatorTrait,
    QueryFilter, QueryOrder, QuerySelect, QueryTrait, TransactionTrait,
};
use uuid::Uuid;

use super::entity::{self, Entity as PendingActions, hook_event, queue_message};
use super::sql::action_from_row;
use super::{DeliveryResult, HookEvent, QueueMessage};
use crate::domain::{DeliveryState, PendingLifecycleAction, Resolution};
use crate::error::{Error, Result};

fn event_row(event: &HookEvent) -> hook_event::ActiveModel {
    hook_event::ActiveModel {
        id: Set(event.id),
        token: Set(event.token),
        cluster_id: Set(event.cluster_id),
        node_id: Set(event.node_id),
        project_id: Set(event.project_id.clone()),
        kind: Set(event.kind.clone()),
        detail: Set(event.detail.clone()),
        created_at: Set(event.created_at),
    }
}

pub async fn record_events(
    connection: &impl sea_orm::ConnectionTrait,
    events: &[HookEvent],
) -> Result<()> {
    if !events.is_empty() {
        hook_event::Entity::insert_many(events.iter().map(event_row))
            .exec_without_returning(connection)
            .await?;
    }
    Ok(())
}

/// Deliveries due and deadlines passed before `due_before`, still not done.
pub async fn count_overdue(
    connection: &DatabaseConnection,
    due_before: DateTime<Utc>,
) -> Result<super::OverdueWork> {
    let now = ember_runtime::time::now();
    let deliveries = PendingActions::find()
        .filter(entity::Column::Resolution.is_null())
        .filter(entity::Column::DeliveryState.is_in([
            DeliveryState::Pending.as_str(),
            DeliveryState::Retrying.as_str(),
        ]))
        .filter(entity::Column::NextAttemptAt.lte(due_before))
        .filter(entity::Column::Deadline.gt(now))
        .count(connection)
        .await?;
    let deadlines = PendingActions::find()
        .filter(entity::Column::Resolution.is_null())
        .filter(entity::Column::Deadline.lte(due_before))
        .count(connection)
        .await?;
    Ok(super::OverdueWork {
        deliveries,
        deadlines,
    })
}

/// The actions whose message may still be sent at `now`, whenever their
/// next attempt is: unresolved, pending or retrying, before the deadline.
fn deliverable(now: DateTime<Utc>) -> Condition {
    Condition::all()
        .add(entity::Column::Resolution.is_null())
        .add(entity::Column::DeliveryState.is_in([
            DeliveryState::Pending.as_str(),
            DeliveryState::Retrying.as_str(),
        ]))
        .add(entity::Column::Deadline.gt(now))
}

/// Claims up to `limit` due deliveries in one statement: the rows still
/// due when the UPDATE reaches them are moved past `claim_until` and
/// returned, so concurrent replicas never claim the same row (PostgreSQL
/// re-checks the conditions on a row another claim just changed; SQLite
/// runs writers one at a time).
pub async fn claim_due_deliveries(
    connection: &DatabaseConnection,
    now: DateTime<Utc>,
    claim_until: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<PendingLifecycleAction>> {
    let due = || deliverable(now).add(entity::Column::NextAttemptAt.lte(now));
    let candidates = PendingActions::find()
        .select_only()
        .column(entity::Column::Token)
        .filter(due())
        .order_by_asc(entity::Column::NextAttemptAt)
        .limit(limit)
        // Rows another claim holds are skipped, not waited for: claims
        // never queue behind each other or deadlock (PostgreSQL; SQLite
        // runs writers one at a time and has no row locks).
        .lock_with_behavior(LockType::Update, LockBehavior::SkipLocked)
        .into_query();
    let mut claimed = PendingActions::update_many()
        .col_expr(entity::Column::NextAttemptAt, Expr::value(claim_until))
        .filter(entity::Column::Token.in_subquery(candidates))
        .filter(due())
        .exec_with_returning(connection)
        .await?;
    claimed.sort_by_key(|row| row.deadline);
    claimed.into_iter().map(action_from_row).collect()
}

pub async fn record_deliveries(
    connection: &DatabaseConnection,
    results: &[DeliveryResult],
) -> Result<()> {
    let transaction = connection.begin().await?;
    let now = ember_runtime::time::now();
    for result in results {
        let delivered = result.state == DeliveryState::Delivered;
        PendingActions::update_many()
            .col_expr(
                entity::Column::DeliveryState,
                Expr::value(result.state.as_str()),
            )
            .col_expr(
                entity::Column::DeliveryAttempts,
                Expr::col(entity::Column::DeliveryAttempts).add(1),
            )
            .col_expr(entity::Column::LastError, Expr::value(result.error.clone()))
            .col_expr(
                entity::Column::NextAttemptAt,
                Expr::value(result.next_attempt_at),
            )
            .col_expr(
                entity::Column::DeliveredAt,
                Expr::value(delivered.then_some(now)),
            )
            .filter(entity::Column::Token.eq(result.token))
            .exec(&transaction)
            .await?;
    }
    let events: Vec<HookEvent> = results.iter().map(|result| result.event.clone()).collect();
    record_events(&transaction, &events).await?;
    transaction.commit().await?;
    Ok(())
}

pub async fn enqueue_messages(
    connection: &DatabaseConnection,
    messages: &[(PendingLifecycleAction, String)],
) -> Result<()> {
    if messages.is_empty() {
        return Ok(());
    }
    let now = ember_runtime::time::now();
    let transaction = connection.begin().await?;
    let rows = messages
        .iter()
        .map(|(action, body)| queue_message::ActiveModel {
            id: sea_orm::ActiveValue::NotSet,
            project_id: Set(action.project_id.clone()),
            queue: Set(action.target.address().to_owned()),
            token: Set(action.token),
            body: Set(body.clone()),
            created_at: Set(now),
        });
    queue_message::Entity::insert_many(rows)
        .on_conflict_do_nothing_on([queue_message::Column::Token])
        .exec(&transaction)
        .await?;
    let tokens: Vec<Uuid> = messages.iter().map(|(action, _)| action.token).collect();
    PendingActions::update_many()
        .col_expr(
            entity::Column::DeliveryState,
            Expr::value(DeliveryState::Delivered.as_str()),
        )
        .col_expr(
            entity::Column::DeliveryAttempts,
            Expr::col(entity::Column::DeliveryAttempts).add(1),
        )
        .col_expr(entity::Column::DeliveredAt, Expr::value(Some(now)))
        .col_expr(
            entity::Column::NextAttemptAt,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .filter(entity::Column::Token.is_in(tokens))
        .exec(&transaction)
        .await?;
    let events: Vec<HookEvent> = messages
        .iter()
        .map(|(action, _)| {
            HookEvent::about(
                action,
                "SENT",
                format!("queued on the embedded queue {:?}", action.target.address()),
            )
        })
        .collect();
    record_events(&transaction, &events).await?;
    transaction.commit().await?;
    Ok(())
}

pub async fn list_queue_messages(
    connection: &DatabaseConnection,
    project_id: &str,
    queue: &str,
    after_id: i64,
    limit: u64,
) -> Result<Vec<QueueMessage>> {
    Ok(queue_message::Entity::find()
        .filter(queue_message::Column::ProjectId.eq(project_id))
        .filter(queue_message::Column::Queue.eq(queue))
        .filter(queue_message::Column::Id.gt(after_id))
        .order_by_asc(queue_message::Column::Id)
        .limit(limit)
        .all(connection)
        .await?
        .into_iter()
        .map(|row| QueueMessage {
            id: row.id,
            project_id: row.project_id,
            queue: row.queue,
            token: row.token,
            body: row.body,
            created_at: row.created_at,
        })
        .collect())
}

/// Claims up to `limit` expired, unresolved actions in one statement (see
/// [`claim_due_deliveries`] for why replicas never claim the same row).
pub async fn claim_expired(
    connection: &DatabaseConnection,
    now: DateTime<Utc>,
    claim_until: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<PendingLifecycleAction>> {
    let expired = || {
        Condition::all()
            .add(entity::Column::Resolution.is_null())
            .add(entity::Column::Deadline.lte(now))
            .add(
                Condition::any()
                    .add(entity::Column::FireClaimedUntil.is_null())
                    .add(entity::Column::FireClaimedUntil.lt(now)),
            )
    };
    let candidates = PendingActions::find()
        .select_only()
        .column(entity::Column::Token)
        .filter(expired())
        .order_by_asc(entity::Column::Deadline)
        .limit(limit)
        // Rows another claim holds are skipped, not waited for: claims
        // never queue behind each other or deadlock (PostgreSQL; SQLite
        // runs writers one at a time and has no row locks).
        .lock_with_behavior(LockType::Update, LockBehavior::SkipLocked)
        .into_query();
    let mut claimed = PendingActions::update_many()
        .col_expr(entity::Column::FireClaimedUntil, Expr::value(claim_until))
        .filter(entity::Column::Token.in_subquery(candidates))
        .filter(expired())
        .exec_with_returning(connection)
        .await?;
    claimed.sort_by_key(|row| row.deadline);
    claimed.into_iter().map(action_from_row).collect()
}

/// Resolves the still unresolved of `tokens`; records the events about
/// those only (another replica may have resolved the rest meanwhile) and
/// returns how many it resolved.
pub async fn resolve(
    connection: &DatabaseConnection,
    tokens: &[Uuid],
    resolution: Resolution,
    resolved_by: &str,
    events: &[HookEvent],
) -> Result<u64> {
    let transaction = connection.begin().await?;
    let resolved: std::collections::HashSet<Uuid> = PendingActions::update_many()
        .col_expr(entity::Column::Resolution, Expr::value(resolution.as_str()))
        .col_expr(
            entity::Column::ResolvedAt,
            Expr::value(ember_runtime::time::now()),
        )
        .col_expr(entity::Column::ResolvedBy, Expr::value(resolved_by))
        .filter(entity::Column::Token.is_in(tokens.iter().copied()))
        .filter(entity::Column::Resolution.is_null())
        .exec_with_returning(&transaction)
        .await?
        .into_iter()
        .map(|row| row.token)
        .collect();
    let events: Vec<HookEvent> = events
        .iter()
        .filter(|event| resolved.contains(&event.token))
        .cloned()
        .collect();
    record_events(&transaction, &events).await?;
    transaction.commit().await?;
    Ok(resolved.len() as u64)
}

pub async fn extend_deadline(
    connection: &DatabaseConnection,
    token: Uuid,
    now: DateTime<Utc>,
) -> Result<PendingLifecycleAction> {
    let row = PendingActions::find_by_id(token)
        .one(connection)
        .await?
        .ok_or_else(|| Error::NotFound(format!("lifecycle action {token} is not pending")))?;
    let action = action_from_row(row)?;
    if let Some(resolution) = action.resolution {
        return Err(Error::Conflict(format!(
            "lifecycle action {token} is already {}",
            resolution.as_str().to_lowercase()
        )));
    }
    let deadline = action.extended_deadline(now);
    let transaction = connection.begin().await?;
    let result = PendingActions::update_many()
        .col_expr(entity::Column::Deadline, Expr::value(deadline))
        .filter(entity::Column::Token.eq(token))
        .filter(entity::Column::Resolution.is_null())
        .filter(entity::Column::Deadline.eq(action.deadline))
        .exec(&transaction)
        .await?;
    if result.rows_affected != 1 {
        return Err(Error::Conflict(format!(
            "lifecycle action {token} changed meanwhile: try again"
        )));
    }
    record_events(
        &transaction,
        &[HookEvent::about(
            &action,
            "HEARTBEAT",
            format!("deadline moved to {}", deadline.to_rfc3339()),
        )],
    )
    .await?;
    transaction.commit().await?;
    Ok(PendingLifecycleAction { deadline, ..action })
}

/// See [`super::PendingActionStore::next_delivery_due`]: the soonest
/// next attempt of a [`deliverable`] action.
pub async fn next_delivery_due(connection: &DatabaseConnection) -> Result<Option<DateTime<Utc>>> {
    let soonest: Option<Option<DateTime<Utc>>> = PendingActions::find()
        .select_only()
        .column(entity::Column::NextAttemptAt)
        .filter(deliverable(ember_runtime::time::now()))
        .filter(entity::Column::NextAttemptAt.is_not_null())
        .order_by_asc(entity::Column::NextAttemptAt)
        .into_tuple()
        .one(connection)
        .await?;
    Ok(soonest.flatten())
}

/// See [`super::PendingActionStore::next_deadline_due`].
pub async fn next_deadline_due(connection: &DatabaseConnection) -> Result<Option<DateTime<Utc>>> {
    let soonest: Option<(DateTime<Utc>, Option<DateTime<Utc>>)> = PendingActions::find()
        .select_only()
        .columns([entity::Column::Deadline, entity::Column::FireClaimedUntil])
        .filter(entity::Column::Resolution.is_null())
        .order_by_asc(entity::Column::Deadline)
        .into_tuple()
        .one(connection)
        .await?;
    Ok(soonest.map(|(deadline, claim)| claim.map_or(deadline, |claim| Ord::max(claim, deadline))))
}

pub async fn list_events(
    connection: &DatabaseConnection,
    project_id: Option<&str>,
    cluster_id: Option<Uuid>,
    token: Option<Uuid>,
    limit: u64,
) -> Result<Vec<HookEvent>> {
    let mut select = hook_event::Entity::find();
    if let Some(project_id) = project_id {
        select = select.filter(hook_event::Column::ProjectId.eq(project_id));
    }
    if let Some(cluster_id) = cluster_id {
        select = select.filter(hook_event::Column::ClusterId.eq(cluster_id));
    }
    if let Some(token) = token {
        select = select.filter(hook_event::Column::Token.eq(token));
    }
    Ok(select
        .order_by_desc(hook_event::Column::Id)
        .limit(limit)
        .all(connection)
        .await?
        .into_iter()
        .map(|row| HookEvent {
            id: row.id,
            token: row.token,
            cluster_id: row.cluster_id,
            node_id: row.node_id,
            project_id: row.project_id,
            kind: row.kind,
            detail: row.detail,
            created_at: row.created_at,
        })
        .collect())
}
