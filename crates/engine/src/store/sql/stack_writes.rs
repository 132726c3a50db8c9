//! How a stack's row is written: recorded with its first lease (a create,
//! or many of a batch), rewritten whole by an update's start (its
//! definition kept as the update's origin), and its state columns by
//! every state write.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, DatabaseTransaction, EntityTrait, ExprTrait, QueryFilter,
};
use serde_json::Value;
use uuid::Uuid;

use super::super::entity::{stack_leases, stack_update_origins, stacks};
use super::super::{LeaseFence, NewStack, rows};
use super::leases::first_lease;
use crate::domain::{Event, Resource, Stack, StackDefinition};
use crate::error::{Error, Result};

pub(super) fn name_taken(name: &str) -> Error {
    Error::Conflict(format!(
        "a stack named {name:?} already exists in this project"
    ))
}

pub(super) fn stack_row(stack: &Stack, definition: &StackDefinition) -> stacks::ActiveModel {
    stacks::ActiveModel {
        id: Set(stack.id),
        name: Set(stack.name.clone()),
        project_id: Set(stack.project_id.clone()),
        user_id: Set(stack.user_id.clone()),
        parent_id: Set(stack.parent_id),
        action: Set(stack.action.as_str().to_owned()),
        status: Set(stack.status.as_str().to_owned()),
        status_reason: Set(stack.status_reason.clone()),
        description: Set(stack.description.clone()),
        tags: Set(serde_json::json!(stack.tags)),
        timeout_mins: Set(stack
            .timeout_mins
            .and_then(|minutes| i32::try_from(minutes).ok())),
        disable_rollback: Set(stack.disable_rollback),
        created_at: Set(stack.created_at),
        updated_at: Set(stack.updated_at),
        template: Set(definition.template.clone()),
        environment: Set(definition.environment.clone()),
        files: Set(serde_json::json!(definition.files)),
        parameters: Set(Value::Object(definition.parameters.clone())),
        nested_depth: Set(i32::try_from(stack.nested_depth).unwrap_or(i32::MAX)),
        parent_resource: Set(stack.parent_resource.clone()),
        deleted_at: Set(stack.deleted_at),
        lock_level: Set(stack
            .maintenance_lock
            .as_ref()
            .map(|lock| lock.level.as_str().to_owned())),
        locked_by_user: Set(stack
            .maintenance_lock
            .as_ref()
            .map(|lock| lock.locked_by_user.clone())),
        locked_by_admin: Set(stack
            .maintenance_lock
            .as_ref()
            .map(|lock| lock.locked_by_admin)),
        locked_at: Set(stack.maintenance_lock.as_ref().map(|lock| lock.locked_at)),
        lock_reason: Set(stack
            .maintenance_lock
            .as_ref()
            .and_then(|lock| lock.reason.clone())),
        definition_version: Set(stack.definition_version),
        lock_expires_at: Set(stack
            .maintenance_lock
            .as_ref()
            .and_then(|lock| lock.expires_at)),
    }
}

/// Rows per statement when new stacks are recorded together (SQLite
/// allows 32766 bound values; a stack row has 24).
pub(super) const STACK_ROWS_PER_STATEMENT: usize = 500;

/// Records `new_stacks` in `transaction` with their first leases, except
/// a stack whose name a live stack of its project has (recorded before, or
/// earlier in this batch): nothing of it is written — no lease, resources
/// or event. Returns the ids of the stacks recorded (see
/// [`first_lease_of`] for what each caller is answered).
pub(super) async fn insert_new_stacks(
    transaction: &DatabaseTransaction,
    new_stacks: &[NewStack],
) -> Result<HashSet<Uuid>> {
    if new_stacks.is_empty() {
        return Ok(HashSet::new());
    }
    let live_name_taken = OnConflict::columns([stacks::Column::ProjectId, stacks::Column::Name])
        .target_and_where(Expr::col(stacks::Column::DeletedAt).is_null())
        .do_nothing()
        .to_owned();
    let mut recorded = HashSet::with_capacity(new_stacks.len());
    for chunk in new_stacks.chunks(STACK_ROWS_PER_STATEMENT) {
        let ids = stacks::Entity::insert_many(
            chunk
                .iter()
                .map(|new| stack_row(&new.stack, &new.definition)),
        )
        .on_conflict(live_name_taken.clone())
        .exec_with_returning_keys(transaction)
        .await?;
        recorded.extend(ids);
    }
    let kept: Vec<&NewStack> = new_stacks
        .iter()
        .filter(|new| recorded.contains(&new.stack.id))
        .collect();
    for chunk in kept.chunks(STACK_ROWS_PER_STATEMENT) {
        stack_leases::Entity::insert_many(chunk.iter().map(|new| {
            first_lease(
                new.stack.id,
                new.lease.engine_id,
                &new.lease.operation,
                new.lease.expires_at,
            )
        }))
        .exec_without_returning(transaction)
        .await?;
    }
    rows::insert_events(transaction, kept.iter().map(|new| &new.event)).await?;
    rows::insert_resources(transaction, kept.iter().flat_map(|new| &new.resources)).await?;
    Ok(recorded)
}

/// What recording `new` answers: its first lease's fence if it is among
/// the `recorded` stacks, else the conflict of its taken name.
pub(super) fn first_lease_of(new: &NewStack, recorded: &HashSet<Uuid>) -> Result<LeaseFence> {
    if recorded.contains(&new.stack.id) {
        Ok(LeaseFence::first(new.stack.id))
    } else {
        Err(name_taken(&new.stack.name))
    }
}

/// An update's start (see
/// [`crate::store::StackStore::begin_stack_update`]), under a lease the
/// caller holds in `transaction`.
pub(super) async fn write_update_start(
    transaction: &DatabaseTransaction,
    stack: &Stack,
    definition: &StackDefinition,
    new_resources: &[Resource],
    event: &Event,
) -> Result<()> {
    keep_update_origin(transaction, stack.id, stack.updated_at).await?;
    // The definition's version moves on from the stored one (parsed
    // templates are cached by it).
    let mut row = stack_row(stack, definition);
    row.definition_version = sea_orm::ActiveValue::NotSet;
    stacks::Entity::update_many()
        .set(row)
        .col_expr(
            stacks::Column::DefinitionVersion,
            Expr::col(stacks::Column::DefinitionVersion).add(1),
        )
        .filter(stacks::Column::Id.eq(stack.id))
        .exec(transaction)
        .await?;
    rows::insert_resources(transaction, new_resources).await?;
    rows::insert_events(transaction, [event]).await?;
    Ok(())
}

/// Keeps the stack's definition as it is now (about to be replaced by an
/// update's or a rollback's) as the running update's origin, replacing
/// any origin kept before.
pub(super) async fn keep_update_origin(
    transaction: &DatabaseTransaction,
    stack_id: Uuid,
    now: DateTime<Utc>,
) -> Result<()> {
    let current = stacks::Entity::find_by_id(stack_id)
        .one(transaction)
        .await?
        .ok_or_else(|| Error::NotFound(format!("stack {stack_id} not found")))?;
    let origin = stack_update_origins::ActiveModel {
        stack_id: Set(stack_id),
        template: Set(current.template),
        environment: Set(current.environment),
        files: Set(current.files),
        parameters: Set(current.parameters),
        recorded_at: Set(now),
    };
    stack_update_origins::Entity::insert(origin)
        .on_conflict(
            OnConflict::column(stack_update_origins::Column::StackId)
                .update_columns([
                    stack_update_origins::Column::Template,
                    stack_update_origins::Column::Environment,
                    stack_update_origins::Column::Files,
                    stack_update_origins::Column::Parameters,
                    stack_update_origins::Column::RecordedAt,
                ])
                .to_owned(),
        )
        .exec(transaction)
        .await?;
    Ok(())
}

/// The columns an operation changes on a stack's row; a deleted stack's
/// snapshots go with it.
pub(super) async fn write_stack_state(
    transaction: &sea_orm::DatabaseTransaction,
    stack: &Stack,
) -> Result<()> {
    if stack.deleted_at.is_some() {
        super::super::snapshots::delete_all(transaction, stack.id).await?;
    }
    write_stack_columns(transaction, stack).await
}

/// The columns an operation changes on a stack's row.
pub(super) async fn write_stack_columns(
    transaction: &sea_orm::DatabaseTransaction,
    stack: &Stack,
) -> Result<()> {
    stacks::Entity::update_many()
        .col_expr(stacks::Column::Action, Expr::value(stack.action.as_str()))
        .col_expr(stacks::Column::Status, Expr::value(stack.status.as_str()))
        .col_expr(
            stacks::Column::StatusReason,
            Expr::value(stack.status_reason.clone()),
        )
        .col_expr(stacks::Column::UpdatedAt, Expr::value(stack.updated_at))
        .col_expr(stacks::Column::DeletedAt, Expr::value(stack.deleted_at))
        .col_expr(
            stacks::Column::LockLevel,
            Expr::value(
                stack
                    .maintenance_lock
                    .as_ref()
                    .map(|lock| lock.level.as_str().to_owned()),
            ),
        )
        .col_expr(
            stacks::Column::LockedByUser,
            Expr::value(
                stack
                    .maintenance_lock
                    .as_ref()
                    .map(|lock| lock.locked_by_user.clone()),
            ),
        )
        .col_expr(
            stacks::Column::LockedByAdmin,
            Expr::value(
                stack
                    .maintenance_lock
                    .as_ref()
                    .map(|lock| lock.locked_by_admin),
            ),
        )
        .col_expr(
            stacks::Column::LockedAt,
            Expr::value(stack.maintenance_lock.as_ref().map(|lock| lock.locked_at)),
        )
        .col_expr(
            stacks::Column::LockReason,
            Expr::value(
                stack
                    .maintenance_lock
                    .as_ref()
                    .and_then(|lock| lock.reason.clone()),
            ),
        )
        .col_expr(
            stacks::Column::LockExpiresAt,
            Expr::value(
                stack
                    .maintenance_lock
                    .as_ref()
                    .and_then(|lock| lock.expires_at),
            ),
        )
        .filter(stacks::Column::Id.eq(stack.id))
        .exec(transaction)
        .await?;
    Ok(())
}
