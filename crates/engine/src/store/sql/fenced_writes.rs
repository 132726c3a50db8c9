//! The writes of running operations, each under its lease's fence: a
//! batch of them (resources, stacks, events, audit records of any
//! stacks) committed in one transaction, skipping the writes whose fence
//! no longer holds, and the takes that start operations with their first
//! writes.

use std::collections::HashMap;

use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, DatabaseConnection, DatabaseTransaction, EntityTrait, ExprTrait, QueryFilter,
    TransactionTrait,
};
use uuid::Uuid;

use super::super::entity::{stack_leases, stack_update_origins};
use super::super::{
    BatchOutcome, FencedWrite, LeaseFence, LeaseTake, StartWrites, WriteBatch, rows,
};
use super::leases::{held_fences, release_all_fenced, release_fenced, take_lease};
use super::resource_rows::{resource_gone, write_health};
use super::stack_writes::{
    first_lease_of, insert_new_stacks, write_stack_columns, write_stack_state, write_update_start,
};
use crate::domain::StackAction;
use crate::error::Result;

/// Where a batch's takes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Takes {
    /// In the batch's transaction, between the writes before them and the
    /// writes under the leases they take (SQLite: one writer, nothing
    /// waits inside a transaction).
    InTheTransaction,
    /// After the commit, each on its own, by the caller (PostgreSQL: see
    /// [`record_batch`]).
    AfterTheCommit,
}

/// Writes `batch` in one transaction (see
/// [`crate::store::StackStore::record_batch`]); its takes too when `takes`
/// says so, else the outcome's takes are left to the caller.
pub(super) async fn record_batch(
    connection: &DatabaseConnection,
    batch: &WriteBatch,
    takes: Takes,
) -> Result<BatchOutcome> {
    let mut outcome = BatchOutcome {
        lost: Vec::new(),
        new_stacks: Vec::new(),
        takes: Vec::with_capacity(batch.takes.len()),
    };
    if batch.is_empty() {
        return Ok(outcome);
    }
    // PostgreSQL: takes go after the commit, each a statement of its
    // own. Inside the transaction a take would wait, holding the share
    // locks the fenced writes took, for a lease row another engine's
    // batch holds — and that engine's take for one of ours: a deadlock.
    // SQLite has one writer: nothing waits inside a transaction.
    let takes_inside = takes == Takes::InTheTransaction;
    let transaction = connection.begin().await?;
    // New stacks first: a run may queue writes under a new stack's
    // first lease before that stack is recorded (they are then in this
    // batch or a later one, never an earlier one).
    let recorded = insert_new_stacks(&transaction, &batch.new_stacks).await?;
    outcome.new_stacks = batch
        .new_stacks
        .iter()
        .map(|new| first_lease_of(new, &recorded))
        .collect();
    // Writes under a lease a take of this batch takes (queued by its
    // run before it committed) go after the takes.
    let (after_takes, before_takes): (Vec<&FencedWrite>, Vec<&FencedWrite>) = batch
        .writes
        .iter()
        .partition(|write| takes_inside && batch.after_takes(write));
    if !before_takes.is_empty() {
        outcome.lost = write_fenced(&transaction, &before_takes).await?;
    }
    if takes_inside {
        for take in &batch.takes {
            let taken = take_and_start(&transaction, take).await?;
            outcome.takes.push(Ok(taken));
        }
    }
    if !after_takes.is_empty() {
        outcome
            .lost
            .extend(write_fenced(&transaction, &after_takes).await?);
    }
    transaction.commit().await?;
    Ok(outcome)
}

/// Writes `writes` in `transaction`, in their order, each under its own
/// fence; returns the fences that no longer held (their writes skipped).
pub(super) async fn write_fenced(
    transaction: &DatabaseTransaction,
    writes: &[&FencedWrite],
) -> Result<Vec<LeaseFence>> {
    let fences: std::collections::BTreeSet<LeaseFence> =
        writes.iter().map(|write| write.fence()).collect();
    let held = held_fences(transaction, &fences).await?;
    let kept: Vec<&FencedWrite> = writes
        .iter()
        .copied()
        .filter(|write| held.contains(&write.fence()))
        .collect();
    // A batch may hold several transitions of one resource (a resource
    // that acts only on its row starts and ends before the writer takes
    // the next batch): its row is written once, as the last of them
    // left it — PostgreSQL refuses an upsert touching a row twice —
    // and every transition keeps its event.
    let latest = last_of_each(
        kept.iter().filter_map(|write| match write {
            FencedWrite::Resource(transition) => Some(&transition.resource),
            _ => None,
        }),
        |resource| resource.id,
    );
    rows::upsert_resources(transaction, latest.iter().copied()).await?;
    // Each stack's row once, as the last of its states in the batch left
    // it (each write carries every column it sets); the ends' leases
    // released together (held above, and locked until the commit); the
    // snapshots of deleted stacks and the origins of ended updates
    // removed together.
    let stacks_written = last_of_each(
        kept.iter().filter_map(|write| match write {
            FencedWrite::Resource(_) => None,
            FencedWrite::Stack { stack, .. } | FencedWrite::Finish { stack, .. } => Some(stack),
        }),
        |stack| stack.id,
    );
    let ends: Vec<LeaseFence> = kept
        .iter()
        .filter_map(|write| match write {
            FencedWrite::Finish { fence, .. } => Some(*fence),
            _ => None,
        })
        .collect();
    // Ended updates: nothing resumes them any more.
    let updates_over: Vec<Uuid> = kept
        .iter()
        .filter_map(|write| match write {
            FencedWrite::Finish { stack, .. }
                if matches!(
                    stack.action,
                    StackAction::Update | StackAction::Rollback | StackAction::Restore
                ) =>
            {
                Some(stack.id)
            }
            _ => None,
        })
        .collect();
    release_all_fenced(transaction, &ends).await?;
    for stack in &stacks_written {
        write_stack_columns(transaction, stack).await?;
    }
    let deleted: Vec<Uuid> = stacks_written
        .iter()
        .filter(|stack| stack.deleted_at.is_some())
        .map(|stack| stack.id)
        .collect();
    if !deleted.is_empty() {
        super::super::snapshots::delete_all_of(transaction, &deleted).await?;
    }
    if !updates_over.is_empty() {
        stack_update_origins::Entity::delete_many()
            .filter(stack_update_origins::Column::StackId.is_in(updates_over))
            .exec(transaction)
            .await?;
    }
    rows::insert_events(transaction, kept.iter().map(|write| write.event())).await?;
    let audit: Vec<crate::domain::audit::AuditRecord> = kept
        .iter()
        .filter_map(|write| match write {
            FencedWrite::Stack {
                audit: Some(record),
                ..
            } => Some((**record).clone()),
            _ => None,
        })
        .collect();
    if !audit.is_empty() {
        crate::store::audit::insert_audit_records(transaction, &audit).await?;
    }
    Ok(fences
        .into_iter()
        .filter(|fence| !held.contains(fence))
        .collect())
}

/// Takes the lease as `take` asks (see [`take_lease`]); one that starts
/// an operation ([`crate::store::LeaseTake::start`]) is taken only while
/// the lease is free at the generation the caller saw — an existing row
/// moved on by one, never a row inserted afresh — and its start is
/// written with it.
pub(super) async fn take_and_start(
    transaction: &DatabaseTransaction,
    take: &LeaseTake,
) -> Result<Option<LeaseFence>> {
    let Some(start) = &take.start else {
        return take_lease(transaction, take.stack_id, &take.lease).await;
    };
    let taken = stack_leases::Entity::update_many()
        .col_expr(
            stack_leases::Column::EngineId,
            Expr::value(take.lease.engine_id),
        )
        .col_expr(
            stack_leases::Column::Operation,
            Expr::value(take.lease.operation.clone()),
        )
        .col_expr(
            stack_leases::Column::ExpiresAt,
            Expr::value(take.lease.expires_at),
        )
        .col_expr(
            stack_leases::Column::Generation,
            Expr::col(stack_leases::Column::Generation).add(1),
        )
        .col_expr(stack_leases::Column::Holder, Expr::value(start.holder))
        .filter(stack_leases::Column::StackId.eq(take.stack_id))
        .filter(stack_leases::Column::Generation.eq(start.generation))
        .filter(stack_leases::Column::ExpiresAt.lt(take.lease.now))
        .exec(transaction)
        .await?;
    if taken.rows_affected != 1 {
        return Ok(None);
    }
    let fence = start.fence(take.stack_id);
    match &start.writes {
        StartWrites::Stack { stack, event } => {
            write_stack_state(transaction, stack).await?;
            rows::insert_events(transaction, [event]).await?;
        }
        StartWrites::Update {
            stack,
            definition,
            new_resources,
            event,
        } => write_update_start(transaction, stack, definition, new_resources, event).await?,
        StartWrites::ResourceHealth { resource, event } => {
            // Its rows change only under the lease, unchanged since the
            // caller read them: gone now means something wrote without it.
            if !write_health(transaction, resource, event).await? {
                return Err(resource_gone(resource));
            }
            release_fenced(transaction, fence).await?;
        }
    }
    Ok(Some(fence))
}

/// The last of `items` for each id, in the order each id first came.
pub(super) fn last_of_each<'a, T>(
    items: impl Iterator<Item = &'a T>,
    id_of: impl Fn(&T) -> Uuid,
) -> Vec<&'a T> {
    let mut last: Vec<&T> = Vec::new();
    let mut position: HashMap<Uuid, usize> = HashMap::new();
    for item in items {
        match position.get(&id_of(item)) {
            Some(&index) => last[index] = item,
            None => {
                position.insert(id_of(item), last.len());
                last.push(item);
            }
        }
    }
    last
}
