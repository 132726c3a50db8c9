//! A stack's lease row: taking it (a create's first, a take, an orphan's
//! takeover), renewing it, asking its holder to stop, releasing it, and
//! checking inside a transaction that the fences a write carries still
//! hold. Every take moves the generation on in the statement that takes.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, Condition, ConnectionTrait, DatabaseBackend,
    DatabaseTransaction, DbErr, EntityTrait, ExprTrait, QueryFilter, QueryOrder, QuerySelect,
};
use uuid::Uuid;

use super::super::entity::{stack_leases, stacks};
use super::super::{
    LeaseFence, LeaseRenewal, LeaseRequest, OrphanCandidate, StopRequest, lease_lost,
};
use crate::domain::ActionStatus;
use crate::error::Result;

/// A stack's first lease row, held by `engine_id` for `operation`.
pub(super) fn first_lease(
    stack_id: Uuid,
    engine_id: Uuid,
    operation: &str,
    expires_at: DateTime<Utc>,
) -> stack_leases::ActiveModel {
    stack_leases::ActiveModel {
        stack_id: Set(stack_id),
        engine_id: Set(engine_id),
        operation: Set(operation.to_owned()),
        expires_at: Set(expires_at),
        generation: Set(LeaseFence::FIRST_GENERATION),
        holder: Set(None),
        stop_generation: Set(None),
        stop_kind: Set(None),
    }
}

/// Takes `stack_id`'s lease as `lease` asks unless an unexpired one is
/// held; `None` when it is.
pub(super) async fn take_lease(
    connection: &impl ConnectionTrait,
    stack_id: Uuid,
    lease: &LeaseRequest,
) -> Result<Option<LeaseFence>> {
    let row = first_lease(
        stack_id,
        lease.engine_id,
        &lease.operation,
        lease.expires_at,
    );
    // Insert, or take over an expired (or released) lease — never an
    // unexpired one — moving the generation on in the same statement.
    let taken = stack_leases::Entity::insert(row)
        .on_conflict(
            OnConflict::column(stack_leases::Column::StackId)
                .update_columns([
                    stack_leases::Column::EngineId,
                    stack_leases::Column::Operation,
                    stack_leases::Column::ExpiresAt,
                    stack_leases::Column::Holder,
                ])
                .value(
                    stack_leases::Column::Generation,
                    Expr::col((stack_leases::Entity, stack_leases::Column::Generation)).add(1),
                )
                .action_and_where(
                    Expr::col((stack_leases::Entity, stack_leases::Column::ExpiresAt))
                        .lt(lease.now),
                )
                .to_owned(),
        )
        .exec_with_returning(connection)
        .await;
    match taken {
        Ok(taken) => Ok(Some(LeaseFence::at(stack_id, taken.generation))),
        // The conflict's WHERE kept the row: nothing inserted, nothing
        // returned (sea-orm names it either way).
        Err(DbErr::RecordNotInserted | DbErr::RecordNotFound(_)) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// Takes an orphan's lease over for `engine_id`: only from the generation
/// the sweep saw, and only while it is still expired; its old holder's
/// writes are fenced out from here on. Returns the new generation, or
/// `None` when the lease moved meanwhile.
pub(super) async fn take_over_lease(
    transaction: &DatabaseTransaction,
    candidate: &OrphanCandidate,
    engine_id: Uuid,
    operation: &str,
    now: DateTime<Utc>,
    expires_at: DateTime<Utc>,
) -> Result<Option<i64>> {
    let stack_id = candidate.stack.id;
    if candidate.generation == 0 {
        let row = first_lease(stack_id, engine_id, operation, expires_at);
        let inserted = matches!(
            stack_leases::Entity::insert(row)
                .on_conflict_do_nothing()
                .exec_without_returning(transaction)
                .await?,
            sea_orm::TryInsertResult::Inserted(1)
        );
        return Ok(inserted.then_some(LeaseFence::FIRST_GENERATION));
    }
    let taken = stack_leases::Entity::update_many()
        .col_expr(stack_leases::Column::EngineId, Expr::value(engine_id))
        .col_expr(stack_leases::Column::Operation, Expr::value(operation))
        .col_expr(stack_leases::Column::ExpiresAt, Expr::value(expires_at))
        .col_expr(
            stack_leases::Column::Generation,
            Expr::col(stack_leases::Column::Generation).add(1),
        )
        .col_expr(
            stack_leases::Column::Holder,
            Expr::value(Option::<Uuid>::None),
        )
        .filter(stack_leases::Column::StackId.eq(stack_id))
        .filter(stack_leases::Column::Generation.eq(candidate.generation))
        .filter(stack_leases::Column::ExpiresAt.lt(now))
        .exec(transaction)
        .await?
        .rows_affected
        == 1;
    Ok(taken.then_some(candidate.generation + 1))
}

/// Renews the lease `fence` holds until `expires_at`, and says whether a
/// stop was asked of its generation (see
/// [`crate::store::StackStore::renew_stack_lease`]).
pub(super) async fn renew(
    connection: &impl ConnectionTrait,
    fence: LeaseFence,
    expires_at: DateTime<Utc>,
) -> Result<LeaseRenewal> {
    // Never a released lease: a renewal that raced the operation's
    // final write (which released it) must not hold the stack again
    // for a whole TTL after its operation ended.
    let renewed = stack_leases::Entity::update_many()
        .col_expr(stack_leases::Column::ExpiresAt, Expr::value(expires_at))
        .filter(at_fence(fence))
        .filter(stack_leases::Column::ExpiresAt.gt(released_at()))
        .exec_with_returning(connection)
        .await?;
    Ok(match renewed.first() {
        None => LeaseRenewal::Lost,
        Some(lease) if lease.stop_generation == Some(lease.generation) => lease
            .stop_kind
            .as_deref()
            .and_then(StopRequest::parse)
            .map_or(LeaseRenewal::Renewed, LeaseRenewal::StopRequested),
        Some(_) => LeaseRenewal::Renewed,
    })
}

/// Asks the holder of `stack_id`'s live lease to stop (see
/// [`crate::store::StackStore::request_stack_stop`]); false when no live
/// lease is held.
pub(super) async fn request_stop(
    connection: &impl ConnectionTrait,
    stack_id: Uuid,
    request: StopRequest,
    now: DateTime<Utc>,
) -> Result<bool> {
    // The generation held now: a later take moves it on, so the
    // request never reaches the operation after this one.
    let asked = stack_leases::Entity::update_many()
        .col_expr(
            stack_leases::Column::StopGeneration,
            Expr::col(stack_leases::Column::Generation),
        )
        .col_expr(stack_leases::Column::StopKind, Expr::value(request.label()))
        .filter(stack_leases::Column::StackId.eq(stack_id))
        .filter(stack_leases::Column::ExpiresAt.gt(now))
        .exec(connection)
        .await?;
    Ok(asked.rows_affected == 1)
}

/// The generation of `stack_id`'s lease if it is free (expired or
/// released) at `now`.
pub(super) async fn free_generation(
    connection: &impl ConnectionTrait,
    stack_id: Uuid,
    now: DateTime<Utc>,
) -> Result<Option<i64>> {
    let generation: Option<i64> = stack_leases::Entity::find_by_id(stack_id)
        .filter(stack_leases::Column::ExpiresAt.lt(now))
        .select_only()
        .column(stack_leases::Column::Generation)
        .into_tuple()
        .one(connection)
        .await?;
    Ok(generation)
}

/// A subquery of the generation of the outer stack's lease if it is free
/// at `now` (NULL otherwise), to read with the stack in one statement.
pub(super) fn free_generation_of_stack(now: DateTime<Utc>) -> sea_orm::sea_query::SelectStatement {
    sea_orm::sea_query::Query::select()
        .column(stack_leases::Column::Generation)
        .from(stack_leases::Entity)
        .and_where(
            Expr::col((stack_leases::Entity, stack_leases::Column::StackId))
                .equals((stacks::Entity, stacks::Column::Id)),
        )
        .and_where(Expr::col((stack_leases::Entity, stack_leases::Column::ExpiresAt)).lt(now))
        .to_owned()
}

/// When the soonest live lease of a stack in progress expires.
pub(super) async fn next_expiry(
    connection: &impl ConnectionTrait,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>> {
    let soonest: Option<Option<DateTime<Utc>>> = stack_leases::Entity::find()
        .select_only()
        .column_as(stack_leases::Column::ExpiresAt.min(), "soonest")
        .filter(
            stack_leases::Column::StackId.in_subquery(
                sea_orm::sea_query::Query::select()
                    .column(stacks::Column::Id)
                    .from(stacks::Entity)
                    .and_where(stacks::Column::Status.eq(ActionStatus::InProgress.as_str()))
                    .to_owned(),
            ),
        )
        .filter(stack_leases::Column::ExpiresAt.gt(now))
        .into_tuple()
        .one(connection)
        .await?;
    Ok(soonest.flatten())
}

/// Releases the lease `fence` holds; returns whether it still held.
pub(super) async fn release_lease(
    connection: &impl ConnectionTrait,
    fence: LeaseFence,
) -> Result<bool> {
    let released = stack_leases::Entity::update_many()
        .col_expr(stack_leases::Column::ExpiresAt, Expr::value(released_at()))
        .filter(at_fence(fence))
        .exec(connection)
        .await?;
    Ok(released.rows_affected == 1)
}

/// Releases the lease as the fence of a final write: `Error::LeaseLost`
/// (and the caller's transaction rolled back) if it no longer held.
pub(super) async fn release_fenced(
    transaction: &DatabaseTransaction,
    fence: LeaseFence,
) -> Result<()> {
    release_all_fenced(transaction, std::slice::from_ref(&fence)).await
}

/// Releases the leases `fences` hold, as the fences of final writes, in
/// one statement: `Error::LeaseLost` (and the caller's transaction rolled
/// back) if one no longer held.
pub(super) async fn release_all_fenced(
    transaction: &DatabaseTransaction,
    fences: &[LeaseFence],
) -> Result<()> {
    for chunk in fences.chunks(200) {
        let matching = any_of_fences(chunk);
        let released = stack_leases::Entity::update_many()
            .col_expr(stack_leases::Column::ExpiresAt, Expr::value(released_at()))
            .filter(matching)
            .exec(transaction)
            .await?;
        if released.rows_affected != chunk.len() as u64 {
            return Err(lease_lost(chunk[0]));
        }
    }
    Ok(())
}

/// When a released lease "expired": long ago, so any take may have it.
pub(super) fn released_at() -> DateTime<Utc> {
    DateTime::<Utc>::UNIX_EPOCH
}

/// The fences of `fences` that still hold, checked inside `transaction` so
/// that no takeover can move them on before it commits: PostgreSQL takes a
/// share lock on each lease row (a takeover's UPDATE waits for the commit;
/// writers never block each other); SQLite's first write takes the
/// database's write lock for the whole transaction, so the check is a
/// no-op UPDATE (which also keeps a second process's transaction from
/// failing on a stale read snapshot).
pub(super) async fn held_fences(
    transaction: &DatabaseTransaction,
    fences: &std::collections::BTreeSet<LeaseFence>,
) -> Result<HashSet<LeaseFence>> {
    let mut held = HashSet::with_capacity(fences.len());
    let fences: Vec<LeaseFence> = fences.iter().copied().collect();
    for chunk in fences.chunks(200) {
        let matching = any_of_fences(chunk);
        let rows: Vec<(Uuid, i64, Option<Uuid>)> = match transaction.get_database_backend() {
            DatabaseBackend::Postgres => {
                stack_leases::Entity::find()
                    .select_only()
                    .column(stack_leases::Column::StackId)
                    .column(stack_leases::Column::Generation)
                    .column(stack_leases::Column::Holder)
                    .filter(matching)
                    .order_by_asc(stack_leases::Column::StackId)
                    .lock_shared()
                    .into_tuple()
                    .all(transaction)
                    .await?
            }
            _ => stack_leases::Entity::update_many()
                .col_expr(
                    stack_leases::Column::Generation,
                    Expr::col(stack_leases::Column::Generation),
                )
                .filter(matching)
                .exec_with_returning(transaction)
                .await?
                .into_iter()
                .map(|lease| (lease.stack_id, lease.generation, lease.holder))
                .collect(),
        };
        // A row found for one fence may be at another's generation with
        // another holder (two takes of one generation in a batch).
        let rows: HashMap<(Uuid, i64), Option<Uuid>> = rows
            .into_iter()
            .map(|(stack_id, generation, holder)| ((stack_id, generation), holder))
            .collect();
        held.extend(chunk.iter().filter(|fence| {
            rows.get(&(fence.stack_id, fence.generation))
                .is_some_and(|holder| fence.holder.is_none() || *holder == fence.holder)
        }));
    }
    Ok(held)
}

/// `Error::LeaseLost` unless `fence` still holds (see [`held_fences`]).
pub(super) async fn hold_fence(transaction: &DatabaseTransaction, fence: LeaseFence) -> Result<()> {
    let held = held_fences(transaction, &std::collections::BTreeSet::from([fence])).await?;
    if held.contains(&fence) {
        Ok(())
    } else {
        Err(lease_lost(fence))
    }
}

/// Lease rows at any of `fences`.
pub(super) fn any_of_fences(fences: &[LeaseFence]) -> Condition {
    fences
        .iter()
        .fold(Condition::any(), |any, fence| any.add(at_fence(*fence)))
}

/// The lease row at `fence`: its stack's, at its generation, and carrying
/// its holder token if it has one.
pub(super) fn at_fence(fence: LeaseFence) -> Condition {
    Condition::all()
        .add(stack_leases::Column::StackId.eq(fence.stack_id))
        .add(stack_leases::Column::Generation.eq(fence.generation))
        .add_option(
            fence
                .holder
                .map(|holder| stack_leases::Column::Holder.eq(holder)),
        )
}
