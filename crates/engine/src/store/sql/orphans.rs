//! Stacks left in progress under a lease that expired or was released
//! (their engine went away): the sweep finds them, and either fails one
//! or takes its operation over — each decision one transaction that first
//! takes the lease over from the generation the sweep saw.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter, TransactionTrait,
};
use uuid::Uuid;

use super::super::entity::{resources, stack_leases, stack_update_origins, stacks};
use super::super::{LeaseFence, OrphanCandidate, rows};
use super::leases::{released_at, take_over_lease};
use super::resource_rows::resource_from_row;
use crate::domain::{ActionStatus, Event, Stack};
use crate::error::Result;

/// The stacks of `in_progress` whose lease is not live, as orphan
/// candidates (see [`orphan`]).
pub(super) async fn with_leases(
    connection: &impl sea_orm::ConnectionTrait,
    in_progress: Vec<Stack>,
    now: DateTime<Utc>,
) -> Result<Vec<OrphanCandidate>> {
    if in_progress.is_empty() {
        return Ok(Vec::new());
    }
    let leases: HashMap<Uuid, stack_leases::Model> = stack_leases::Entity::find()
        .filter(stack_leases::Column::StackId.is_in(in_progress.iter().map(|stack| stack.id)))
        .all(connection)
        .await?
        .into_iter()
        .map(|lease| (lease.stack_id, lease))
        .collect();
    Ok(in_progress
        .into_iter()
        .filter_map(|stack| {
            let lease = leases.get(&stack.id);
            orphan(stack, lease, now)
        })
        .collect())
}

/// Fails `candidate`'s operation (see
/// [`crate::store::StackStore::fail_orphaned_stack`]): the stack and its
/// resources in progress, with their events; `None` when the lease or the
/// stack moved meanwhile.
pub(super) async fn fail(
    connection: &DatabaseConnection,
    candidate: &OrphanCandidate,
    engine_id: Uuid,
    now: DateTime<Utc>,
    reason: &str,
) -> Result<Option<Stack>> {
    let stack_id = candidate.stack.id;
    let transaction = connection.begin().await?;
    // The sweep's own lease lives only as long as this transaction.
    if take_over_lease(&transaction, candidate, engine_id, "SWEEP", now, now)
        .await?
        .is_none()
    {
        return Ok(None);
    }
    // Only while the stack is still in the operation the sweep saw.
    let marked = stacks::Entity::update_many()
        .col_expr(
            stacks::Column::Status,
            Expr::value(ActionStatus::Failed.as_str()),
        )
        .col_expr(stacks::Column::StatusReason, Expr::value(reason))
        .col_expr(stacks::Column::UpdatedAt, Expr::value(now))
        .filter(stacks::Column::Id.eq(stack_id))
        .filter(stacks::Column::Status.eq(ActionStatus::InProgress.as_str()))
        .filter(stacks::Column::Action.eq(candidate.stack.action.as_str()))
        .exec(&transaction)
        .await?;
    if marked.rows_affected != 1 {
        return Ok(None);
    }
    let interrupted = resources::Entity::update_many()
        .col_expr(
            resources::Column::Status,
            Expr::value(ActionStatus::Failed.as_str()),
        )
        .col_expr(resources::Column::StatusReason, Expr::value(reason))
        .col_expr(resources::Column::UpdatedAt, Expr::value(now))
        .filter(resources::Column::StackId.eq(stack_id))
        .filter(resources::Column::Status.eq(ActionStatus::InProgress.as_str()))
        .exec_with_returning(&transaction)
        .await?
        .into_iter()
        .map(resource_from_row)
        .collect::<Result<Vec<_>>>()?;
    let mut stack = candidate.stack.clone();
    stack.status = ActionStatus::Failed;
    stack.status_reason = reason.to_owned();
    stack.updated_at = now;
    let mut events: Vec<Event> = interrupted
        .iter()
        .map(|resource| Event::for_resource(resource, now))
        .collect();
    events.push(Event::for_stack(&stack, reason, now));
    rows::insert_events(&transaction, &events).await?;
    // A failed update is not resumed: its origin goes.
    stack_update_origins::Entity::delete_by_id(stack_id)
        .exec(&transaction)
        .await?;
    stack_leases::Entity::update_many()
        .col_expr(stack_leases::Column::ExpiresAt, Expr::value(released_at()))
        .filter(stack_leases::Column::StackId.eq(stack_id))
        .exec(&transaction)
        .await?;
    transaction.commit().await?;
    Ok(Some(stack))
}

/// Takes `candidate`'s operation over for `engine_id` (see
/// [`crate::store::StackStore::take_over_orphaned_stack`]).
pub(super) async fn take_over(
    connection: &DatabaseConnection,
    candidate: &OrphanCandidate,
    engine_id: Uuid,
    now: DateTime<Utc>,
    expires_at: DateTime<Utc>,
) -> Result<Option<LeaseFence>> {
    let stack_id = candidate.stack.id;
    let transaction = connection.begin().await?;
    let operation = candidate.stack.action.as_str();
    let Some(generation) = take_over_lease(
        &transaction,
        candidate,
        engine_id,
        operation,
        now,
        expires_at,
    )
    .await?
    else {
        return Ok(None);
    };
    // Only while the stack is still in the operation the sweep saw.
    let still = stacks::Entity::find()
        .filter(stacks::Column::Id.eq(stack_id))
        .filter(stacks::Column::Status.eq(ActionStatus::InProgress.as_str()))
        .filter(stacks::Column::Action.eq(operation))
        .count(&transaction)
        .await?;
    if still != 1 {
        return Ok(None);
    }
    transaction.commit().await?;
    Ok(Some(LeaseFence::at(stack_id, generation)))
}
/// `stack` (in progress) as an orphan candidate: none while its `lease`
/// is live; else with the lease's holder and generation (none, 0, when it
/// has no lease row).
pub(super) fn orphan(
    stack: Stack,
    lease: Option<&stack_leases::Model>,
    now: DateTime<Utc>,
) -> Option<OrphanCandidate> {
    match lease {
        Some(lease) if lease.expires_at >= now => None,
        Some(lease) => Some(OrphanCandidate {
            stack,
            holder: Some(lease.engine_id),
            generation: lease.generation,
        }),
        None => Some(OrphanCandidate {
            stack,
            holder: None,
            generation: 0,
        }),
    }
}
