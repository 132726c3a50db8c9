//! The engine's stores on sea-orm: one implementation for SQLite and
//! PostgreSQL. Every method is one transaction.

use std::collections::{BTreeMap, HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, Condition, ConnectionTrait, DatabaseBackend, DatabaseConnection,
    DatabaseTransaction, DbErr, EntityTrait, ExprTrait, QueryFilter, QueryOrder, QuerySelect,
    TransactionTrait,
};
use serde_json::Value;
use uuid::Uuid;

use super::entity::{events, resources, stack_leases, stack_update_origins, stacks};
use super::rows;
use super::{
    BatchOutcome, EventListQuery, FencedWrite, LeaseFence, LeaseRenewal, LeaseRequest, LeaseTake,
    NewStack, OrphanCandidate, ResourceFilter, StackListQuery, StackStore, StartWrites,
    StopRequest, WriteBatch, lease_lost,
};
use crate::domain::{
    ActionStatus, Event, LockLevel, MaintenanceLock, Resource, Stack, StackAction, StackDefinition,
};
use crate::error::{Error, Result};
use ember_runtime::database::Columns;

pub struct SqlStackStore {
    /// Every write, and reads inside a write's transaction.
    connection: DatabaseConnection,
    /// Reads outside transactions (see `ember_runtime::database::connect_reader`).
    reader: ember_runtime::database::Reader,
}

impl SqlStackStore {
    /// One connection (pool) for reads and writes.
    pub fn new(connection: DatabaseConnection) -> Self {
        SqlStackStore {
            reader: ember_runtime::database::Reader::shared(connection.clone()),
            connection,
        }
    }

    /// Writes through `connection`, reads through `reader`.
    pub fn with_reader(
        connection: DatabaseConnection,
        reader: impl Into<ember_runtime::database::Reader>,
    ) -> Self {
        SqlStackStore {
            connection,
            reader: reader.into(),
        }
    }

    /// `select` built for this store's backend.
    fn statement(&self, select: &impl sea_orm::QueryTrait) -> sea_orm::Statement {
        select.build(self.reader.get_database_backend())
    }

    /// The stacks `select` finds, its columns [`LIST_COLUMNS`].
    async fn stack_rows(&self, select: sea_orm::Select<stacks::Entity>) -> Result<Vec<Stack>> {
        self.stacks_from(self.statement(&select)).await
    }

    /// The stacks `statement` finds, its columns [`LIST_COLUMNS`] (read in
    /// place on a SQLite file: see `Reader::rows`).
    async fn stacks_from(&self, statement: sea_orm::Statement) -> Result<Vec<Stack>> {
        self.reader
            .rows(statement, stack_from_columns)
            .await
            .map_err(Error::from)
    }
}

fn name_taken(name: &str) -> Error {
    Error::Conflict(format!(
        "a stack named {name:?} already exists in this project"
    ))
}

fn stack_row(stack: &Stack, definition: &StackDefinition) -> stacks::ActiveModel {
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

#[async_trait]
impl StackStore for SqlStackStore {
    async fn create_stack_with_lease(&self, new_stack: &NewStack) -> Result<LeaseFence> {
        let transaction = self.connection.begin().await?;
        let recorded = insert_new_stacks(&transaction, std::slice::from_ref(new_stack)).await?;
        transaction.commit().await?;
        first_lease_of(new_stack, &recorded)
    }

    async fn find_stack(&self, project_id: &str, name_or_id: &str) -> Result<Option<Stack>> {
        let backend = self.reader.get_database_backend();
        for key in StackKey::tried_for(name_or_id) {
            let statement = find_in_project_statement(backend, project_id, key);
            if let Some(stack) = self.stacks_from(statement).await?.pop() {
                return Ok(Some(stack));
            }
        }
        Ok(None)
    }

    async fn find_stack_with_free_lease(
        &self,
        project_id: &str,
        name_or_id: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<(Stack, Option<i64>)>> {
        use sea_orm::sea_query::QueryStatementBuilder;
        let free_generation = sea_orm::sea_query::Query::select()
            .column(stack_leases::Column::Generation)
            .from(stack_leases::Entity)
            .and_where(
                Expr::col((stack_leases::Entity, stack_leases::Column::StackId))
                    .equals((stacks::Entity, stacks::Column::Id)),
            )
            .and_where(Expr::col((stack_leases::Entity, stack_leases::Column::ExpiresAt)).lt(now))
            .to_owned();
        for key in StackKey::tried_for(name_or_id) {
            let select = find_in_project(project_id, key)
                .expr(Expr::SubQuery(
                    None,
                    Box::new(free_generation.clone().into_sub_query_statement()),
                ))
                .limit(1);
            let statement = self.statement(&select);
            // The stack's columns, then the free lease's generation.
            let found = self
                .reader
                .rows(statement, |row| {
                    Ok((stack_from_columns(row)?, row.get(LIST_COLUMNS.len())?))
                })
                .await?
                .pop();
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    async fn list_stacks(&self, project_id: &str, query: &StackListQuery) -> Result<Vec<Stack>> {
        let mut select = stacks::Entity::find()
            .filter(stacks::Column::ProjectId.eq(project_id))
            .filter(stacks::Column::DeletedAt.is_null());
        if !query.show_nested {
            select = select.filter(stacks::Column::ParentId.is_null());
        }
        if let Some(name) = &query.name {
            select = select.filter(stacks::Column::Name.eq(name.as_str()));
        }
        match query.locked {
            Some(true) => select = select.filter(stacks::Column::LockLevel.is_not_null()),
            Some(false) => select = select.filter(stacks::Column::LockLevel.is_null()),
            None => {}
        }
        if let Some(marker) = query.marker {
            let marker_row = stacks::Entity::find_by_id(marker)
                .filter(stacks::Column::ProjectId.eq(project_id))
                .one(&self.reader)
                .await?
                .ok_or_else(|| Error::NotFound(format!("marker {marker} names no stack")))?;
            select = select.filter(
                Condition::any()
                    .add(stacks::Column::CreatedAt.lt(marker_row.created_at))
                    .add(
                        Condition::all()
                            .add(stacks::Column::CreatedAt.eq(marker_row.created_at))
                            .add(stacks::Column::Id.lt(marker_row.id)),
                    ),
            );
        }
        // A list needs no templates: leave the large JSON columns unread.
        self.stack_rows(
            select
                .select_only()
                .columns(LIST_COLUMNS)
                .order_by_desc(stacks::Column::CreatedAt)
                .order_by_desc(stacks::Column::Id)
                .limit(u64::from(query.page_size())),
        )
        .await
    }

    async fn get_stack(&self, stack_id: Uuid) -> Result<Option<Stack>> {
        Ok(self
            .stack_rows(
                stacks::Entity::find_by_id(stack_id)
                    .select_only()
                    .columns(LIST_COLUMNS),
            )
            .await?
            .pop())
    }

    async fn expired_stack_locks(&self, now: DateTime<Utc>, limit: u64) -> Result<Vec<Stack>> {
        self.stack_rows(
            stacks::Entity::find()
                .filter(stacks::Column::LockExpiresAt.lte(now))
                .filter(stacks::Column::ParentId.is_null())
                .filter(stacks::Column::DeletedAt.is_null())
                .filter(stacks::Column::Action.eq(StackAction::Lock.as_str()))
                .filter(stacks::Column::Status.ne(ActionStatus::InProgress.as_str()))
                .order_by_asc(stacks::Column::LockExpiresAt)
                .limit(limit)
                .select_only()
                .columns(LIST_COLUMNS),
        )
        .await
    }

    async fn next_stack_lock_expiry(&self) -> Result<Option<DateTime<Utc>>> {
        Ok(stacks::Entity::find()
            .filter(stacks::Column::LockExpiresAt.is_not_null())
            .filter(stacks::Column::ParentId.is_null())
            .filter(stacks::Column::DeletedAt.is_null())
            .filter(stacks::Column::Action.eq(StackAction::Lock.as_str()))
            .order_by_asc(stacks::Column::LockExpiresAt)
            .select_only()
            .column(stacks::Column::LockExpiresAt)
            .into_tuple::<Option<DateTime<Utc>>>()
            .one(&self.connection)
            .await?
            .flatten())
    }

    async fn list_child_stacks(&self, stack_id: Uuid) -> Result<Vec<Stack>> {
        self.stack_rows(
            stacks::Entity::find()
                .filter(stacks::Column::ParentId.eq(stack_id))
                .filter(stacks::Column::DeletedAt.is_null())
                .order_by_asc(stacks::Column::CreatedAt)
                .select_only()
                .columns(LIST_COLUMNS),
        )
        .await
    }

    async fn load_versioned_definition(&self, stack_id: Uuid) -> Result<(StackDefinition, i64)> {
        let (template, environment, files, parameters, version): (Value, Value, Value, Value, i64) =
            stacks::Entity::find_by_id(stack_id)
                .select_only()
                .columns([
                    stacks::Column::Template,
                    stacks::Column::Environment,
                    stacks::Column::Files,
                    stacks::Column::Parameters,
                    stacks::Column::DefinitionVersion,
                ])
                .into_tuple()
                .one(&self.reader)
                .await?
                .ok_or_else(|| Error::NotFound(format!("stack {stack_id} not found")))?;
        let definition =
            definition_from_columns(stack_id, template, environment, files, parameters)?;
        Ok((definition, version))
    }

    async fn load_update_origin(&self, stack_id: Uuid) -> Result<Option<StackDefinition>> {
        stack_update_origins::Entity::find_by_id(stack_id)
            .one(&self.reader)
            .await?
            .map(|row| {
                definition_from_columns(
                    stack_id,
                    row.template,
                    row.environment,
                    row.files,
                    row.parameters,
                )
            })
            .transpose()
    }

    async fn record_events(&self, events: &[Event]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        rows::insert_events(&self.connection, events).await?;
        Ok(())
    }

    async fn begin_stack_update(
        &self,
        stack: &Stack,
        definition: &StackDefinition,
        new_resources: &[Resource],
        event: &Event,
        fence: LeaseFence,
    ) -> Result<()> {
        let transaction = self.connection.begin().await?;
        hold_fence(&transaction, fence).await?;
        write_update_start(&transaction, stack, definition, new_resources, event).await?;
        transaction.commit().await?;
        Ok(())
    }

    async fn retire_resources(
        &self,
        transitions: &[(Resource, Event)],
        fence: LeaseFence,
    ) -> Result<()> {
        if transitions.is_empty() {
            return Ok(());
        }
        let transaction = self.connection.begin().await?;
        hold_fence(&transaction, fence).await?;
        // Bounded statement sizes: SQLite allows 32766 bound values.
        for chunk in transitions.chunks(500) {
            rows::insert_events(&transaction, chunk.iter().map(|(_, event)| event)).await?;
            resources::Entity::delete_many()
                .filter(resources::Column::Id.is_in(chunk.iter().map(|(resource, _)| resource.id)))
                .exec(&transaction)
                .await?;
        }
        transaction.commit().await?;
        Ok(())
    }

    async fn record_fenced_writes(&self, writes: &[FencedWrite]) -> Result<Vec<LeaseFence>> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        let transaction = self.connection.begin().await?;
        let lost = write_fenced(&transaction, &writes.iter().collect::<Vec<_>>()).await?;
        transaction.commit().await?;
        Ok(lost)
    }

    fn commits_one_at_a_time(&self) -> bool {
        self.connection.get_database_backend() == DatabaseBackend::Sqlite
    }

    async fn record_batch(&self, batch: &WriteBatch) -> Result<BatchOutcome> {
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
        let takes_inside = self.commits_one_at_a_time();
        let transaction = self.connection.begin().await?;
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
        if !takes_inside {
            // The batch is committed: a take that fails now fails alone.
            // They run at once, on connections of their own (the server
            // commits them together).
            outcome.takes = futures::future::join_all(
                batch.takes.iter().map(|take| self.take_stack_lease(take)),
            )
            .await;
        }
        Ok(outcome)
    }

    async fn insert_snapshot(&self, snapshot: &crate::domain::StackSnapshot) -> Result<()> {
        super::snapshots::insert(&self.connection, snapshot).await
    }

    async fn list_snapshots(&self, stack_id: Uuid) -> Result<Vec<crate::domain::StackSnapshot>> {
        super::snapshots::list(&self.reader, stack_id).await
    }

    async fn count_snapshots(&self, stack_id: Uuid) -> Result<u64> {
        super::snapshots::count(&self.reader, stack_id).await
    }

    async fn get_snapshot(
        &self,
        stack_id: Uuid,
        snapshot_id: Uuid,
    ) -> Result<Option<crate::domain::StackSnapshot>> {
        super::snapshots::get(&self.reader, stack_id, snapshot_id).await
    }

    async fn delete_snapshot(&self, stack_id: Uuid, snapshot_id: Uuid) -> Result<bool> {
        super::snapshots::delete(&self.connection, stack_id, snapshot_id).await
    }

    async fn list_resources(&self, stack_id: Uuid) -> Result<Vec<Resource>> {
        let select = resources::Entity::find()
            .select_only()
            .columns(RESOURCE_COLUMNS)
            .filter(resources::Column::StackId.eq(stack_id))
            .order_by_asc(resources::Column::CreatedAt)
            .order_by_asc(resources::Column::Name);
        self.reader
            .rows(self.statement(&select), resource_model)
            .await?
            .into_iter()
            .map(resource_from_row)
            .collect()
    }

    async fn list_filtered_resources(
        &self,
        stack_id: Uuid,
        filter: &ResourceFilter,
    ) -> Result<Vec<Resource>> {
        let select = resources::Entity::find()
            .select_only()
            .columns(RESOURCE_COLUMNS)
            .filter(resources::Column::StackId.eq(stack_id))
            .filter(super::resource_filters::resources_condition(
                stack_id, filter,
            ))
            .order_by_asc(resources::Column::CreatedAt)
            .order_by_asc(resources::Column::Name);
        self.reader
            .rows(self.statement(&select), resource_model)
            .await?
            .into_iter()
            .map(resource_from_row)
            .collect()
    }

    async fn list_events(&self, query: &EventListQuery) -> Result<Vec<Event>> {
        let mut select = events::Entity::find()
            .filter(events::Column::StackId.is_in(query.stack_ids.clone()))
            .filter(super::resource_filters::events_condition(&query.filter));
        if let Some(name) = &query.resource_name {
            select = select.filter(events::Column::ResourceName.eq(name.as_str()));
        }
        if let Some(marker) = query.marker {
            select = if query.descending {
                select.filter(events::Column::Id.lt(marker))
            } else {
                select.filter(events::Column::Id.gt(marker))
            };
        }
        select = if query.descending {
            select.order_by_desc(events::Column::Id)
        } else {
            select.order_by_asc(events::Column::Id)
        };
        select
            .limit(u64::from(query.page_size()))
            .all(&self.reader)
            .await?
            .into_iter()
            .map(event_from_row)
            .collect()
    }

    async fn get_event(&self, stack_id: Uuid, event_id: Uuid) -> Result<Option<Event>> {
        events::Entity::find_by_id(event_id)
            .filter(events::Column::StackId.eq(stack_id))
            .one(&self.reader)
            .await?
            .map(event_from_row)
            .transpose()
    }

    async fn take_stack_lease(&self, take: &LeaseTake) -> Result<Option<LeaseFence>> {
        if take.start.is_none() {
            return take_lease(&self.connection, take.stack_id, &take.lease).await;
        }
        let transaction = self.connection.begin().await?;
        let taken = take_and_start(&transaction, take).await?;
        transaction.commit().await?;
        Ok(taken)
    }

    async fn free_lease_generation(
        &self,
        stack_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<i64>> {
        let generation: Option<i64> = stack_leases::Entity::find_by_id(stack_id)
            .filter(stack_leases::Column::ExpiresAt.lt(now))
            .select_only()
            .column(stack_leases::Column::Generation)
            .into_tuple()
            .one(&self.reader)
            .await?;
        Ok(generation)
    }

    async fn renew_stack_lease(
        &self,
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
            .exec_with_returning(&self.connection)
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

    async fn request_stack_stop(
        &self,
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
            .exec(&self.connection)
            .await?;
        Ok(asked.rows_affected == 1)
    }

    async fn release_stack_lease(&self, fence: LeaseFence) -> Result<()> {
        release_lease(&self.connection, fence).await?;
        Ok(())
    }

    async fn next_lease_expiry(&self, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>> {
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
            .one(&self.reader)
            .await?;
        Ok(soonest.flatten())
    }

    async fn list_orphan_candidates(
        &self,
        now: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<OrphanCandidate>> {
        let in_progress = self
            .stack_rows(
                stacks::Entity::find()
                    .filter(stacks::Column::Status.eq(ActionStatus::InProgress.as_str()))
                    .select_only()
                    .columns(LIST_COLUMNS)
                    .order_by_asc(stacks::Column::UpdatedAt)
                    .limit(limit),
            )
            .await?;
        if in_progress.is_empty() {
            return Ok(Vec::new());
        }
        let leases: std::collections::HashMap<Uuid, stack_leases::Model> =
            stack_leases::Entity::find()
                .filter(
                    stack_leases::Column::StackId.is_in(in_progress.iter().map(|stack| stack.id)),
                )
                .all(&self.reader)
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

    async fn orphan_candidate(
        &self,
        stack_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<OrphanCandidate>> {
        let Some(stack) = self.get_stack(stack_id).await? else {
            return Ok(None);
        };
        if stack.status != ActionStatus::InProgress {
            return Ok(None);
        }
        let lease = stack_leases::Entity::find_by_id(stack_id)
            .one(&self.connection)
            .await?;
        Ok(orphan(stack, lease.as_ref(), now))
    }

    async fn fail_orphaned_stack(
        &self,
        candidate: &OrphanCandidate,
        engine_id: Uuid,
        now: DateTime<Utc>,
        reason: &str,
    ) -> Result<Option<Stack>> {
        let stack_id = candidate.stack.id;
        let transaction = self.connection.begin().await?;
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

    async fn take_over_orphaned_stack(
        &self,
        candidate: &OrphanCandidate,
        engine_id: Uuid,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> Result<Option<LeaseFence>> {
        let stack_id = candidate.stack.id;
        let transaction = self.connection.begin().await?;
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
        use sea_orm::PaginatorTrait;
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

    async fn mark_resource_health(
        &self,
        resource: &Resource,
        event: &Event,
        fence: LeaseFence,
    ) -> Result<()> {
        let transaction = self.connection.begin().await?;
        release_fenced(&transaction, fence).await?;
        let written = write_health(&transaction, resource, event).await?;
        transaction.commit().await?;
        if written {
            Ok(())
        } else {
            Err(resource_gone(resource))
        }
    }

    async fn finish_scaling(
        &self,
        group: &Resource,
        event: &Event,
        fence: LeaseFence,
    ) -> Result<()> {
        let transaction = self.connection.begin().await?;
        release_fenced(&transaction, fence).await?;
        rows::upsert_resources(&transaction, [group]).await?;
        rows::insert_events(&transaction, [event]).await?;
        transaction.commit().await?;
        Ok(())
    }
}

/// A stack's first lease row, held by `engine_id` for `operation`.
fn first_lease(
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

/// Writes `writes` in `transaction`, in their order, each under its own
/// fence; returns the fences that no longer held (their writes skipped).
async fn write_fenced(
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
        super::snapshots::delete_all_of(transaction, &deleted).await?;
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

/// Takes `stack_id`'s lease as `lease` asks unless an unexpired one is
/// held; `None` when it is.
async fn take_lease(
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

/// Takes the lease as `take` asks (see [`take_lease`]); one that starts
/// an operation ([`LeaseTake::start`]) is taken only while the lease is
/// free at the generation the caller saw — an existing row moved on by
/// one, never a row inserted afresh — and its start is written with it.
async fn take_and_start(
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

/// Rows per statement when new stacks are recorded together (SQLite
/// allows 32766 bound values; a stack row has 24).
const STACK_ROWS_PER_STATEMENT: usize = 500;

/// Records `new_stacks` in `transaction` with their first leases, except
/// a stack whose name a live stack of its project has (recorded before, or
/// earlier in this batch): nothing of it is written — no lease, resources
/// or event. Returns the ids of the stacks recorded (see
/// [`first_lease_of`] for what each caller is answered).
async fn insert_new_stacks(
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
fn first_lease_of(new: &NewStack, recorded: &HashSet<Uuid>) -> Result<LeaseFence> {
    if recorded.contains(&new.stack.id) {
        Ok(LeaseFence::first(new.stack.id))
    } else {
        Err(name_taken(&new.stack.name))
    }
}

/// When a released lease "expired": long ago, so any take may have it.
fn released_at() -> DateTime<Utc> {
    DateTime::<Utc>::UNIX_EPOCH
}

/// The fences of `fences` that still hold, checked inside `transaction` so
/// that no takeover can move them on before it commits: PostgreSQL takes a
/// share lock on each lease row (a takeover's UPDATE waits for the commit;
/// writers never block each other); SQLite's first write takes the
/// database's write lock for the whole transaction, so the check is a
/// no-op UPDATE (which also keeps a second process's transaction from
/// failing on a stale read snapshot).
async fn held_fences(
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
/// A stored definition from its columns.
fn definition_from_columns(
    stack_id: Uuid,
    template: Value,
    environment: Value,
    files: Value,
    parameters: Value,
) -> Result<StackDefinition> {
    let files: BTreeMap<String, String> = serde_json::from_value(files).map_err(|error| {
        Error::Database(format!(
            "stack {stack_id}: stored files are invalid: {error}"
        ))
    })?;
    let Value::Object(parameters) = parameters else {
        return Err(Error::Database(format!(
            "stack {stack_id}: stored parameters are invalid"
        )));
    };
    Ok(StackDefinition {
        template,
        environment,
        files,
        parameters,
    })
}

/// Keeps the stack's definition as it is now (about to be replaced by an
/// update's or a rollback's) as the running update's origin, replacing
/// any origin kept before.
/// An update's start (see [`StackStore::begin_stack_update`]), under a
/// lease the caller holds in `transaction`.
async fn write_update_start(
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

/// A resource's health state and its event (see
/// [`StackStore::mark_resource_health`]); false, nothing written, when its
/// row is gone.
async fn write_health(
    transaction: &DatabaseTransaction,
    resource: &Resource,
    event: &Event,
) -> Result<bool> {
    let updated = resources::Entity::update_many()
        .col_expr(
            resources::Column::Action,
            Expr::value(resource.action.as_str()),
        )
        .col_expr(
            resources::Column::Status,
            Expr::value(resource.status.as_str()),
        )
        .col_expr(
            resources::Column::StatusReason,
            Expr::value(resource.status_reason.clone()),
        )
        .col_expr(
            resources::Column::UpdatedAt,
            Expr::value(resource.updated_at),
        )
        .filter(resources::Column::Id.eq(resource.id))
        .exec(transaction)
        .await?;
    if updated.rows_affected != 1 {
        return Ok(false);
    }
    rows::insert_events(transaction, [event]).await?;
    Ok(true)
}

fn resource_gone(resource: &Resource) -> Error {
    Error::NotFound(format!(
        "resource {:?} not found (it was replaced or deleted meanwhile)",
        resource.name
    ))
}

async fn keep_update_origin(
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

async fn hold_fence(transaction: &DatabaseTransaction, fence: LeaseFence) -> Result<()> {
    let held = held_fences(transaction, &std::collections::BTreeSet::from([fence])).await?;
    if held.contains(&fence) {
        Ok(())
    } else {
        Err(lease_lost(fence))
    }
}

/// Takes an orphan's lease over for `engine_id`: only from the generation
/// the sweep saw, and only while it is still expired; its old holder's
/// writes are fenced out from here on. Returns the new generation, or
/// `None` when the lease moved meanwhile.
async fn take_over_lease(
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

/// Releases the lease `fence` holds; returns whether it still held.
async fn release_lease(connection: &impl ConnectionTrait, fence: LeaseFence) -> Result<bool> {
    let released = stack_leases::Entity::update_many()
        .col_expr(stack_leases::Column::ExpiresAt, Expr::value(released_at()))
        .filter(at_fence(fence))
        .exec(connection)
        .await?;
    Ok(released.rows_affected == 1)
}

/// Releases the lease as the fence of a final write: `Error::LeaseLost`
/// (and the caller's transaction rolled back) if it no longer held.
async fn release_fenced(transaction: &DatabaseTransaction, fence: LeaseFence) -> Result<()> {
    release_all_fenced(transaction, std::slice::from_ref(&fence)).await
}

/// The last of `items` for each id, in the order each id first came.
fn last_of_each<'a, T>(
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

/// Lease rows at any of `fences`.
fn any_of_fences(fences: &[LeaseFence]) -> Condition {
    fences
        .iter()
        .fold(Condition::any(), |any, fence| any.add(at_fence(*fence)))
}

/// The lease row at `fence`: its stack's, at its generation, and carrying
/// its holder token if it has one.
fn at_fence(fence: LeaseFence) -> Condition {
    Condition::all()
        .add(stack_leases::Column::StackId.eq(fence.stack_id))
        .add(stack_leases::Column::Generation.eq(fence.generation))
        .add_option(
            fence
                .holder
                .map(|holder| stack_leases::Column::Holder.eq(holder)),
        )
}

/// Releases the leases `fences` hold, as the fences of final writes, in
/// one statement: `Error::LeaseLost` (and the caller's transaction rolled
/// back) if one no longer held.
async fn release_all_fenced(
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

/// The columns an operation changes on a stack's row; a deleted stack's
/// snapshots go with it.
async fn write_stack_state(
    transaction: &sea_orm::DatabaseTransaction,
    stack: &Stack,
) -> Result<()> {
    if stack.deleted_at.is_some() {
        super::snapshots::delete_all(transaction, stack.id).await?;
    }
    write_stack_columns(transaction, stack).await
}

/// The columns an operation changes on a stack's row.
async fn write_stack_columns(
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

fn corrupt(what: &str, id: Uuid) -> Error {
    Error::Database(format!("{id}: stored {what} is invalid"))
}

/// The columns a [`Stack`] is read from: all but what the stack is built
/// from (its template, environment, files and parameters: large JSON,
/// decoded only when a run or a template read needs them).
const LIST_COLUMNS: [stacks::Column; 24] = [
    stacks::Column::Id,
    stacks::Column::Name,
    stacks::Column::ProjectId,
    stacks::Column::UserId,
    stacks::Column::ParentId,
    stacks::Column::Action,
    stacks::Column::Status,
    stacks::Column::StatusReason,
    stacks::Column::Description,
    stacks::Column::Tags,
    stacks::Column::TimeoutMins,
    stacks::Column::DisableRollback,
    stacks::Column::CreatedAt,
    stacks::Column::UpdatedAt,
    stacks::Column::NestedDepth,
    stacks::Column::ParentResource,
    stacks::Column::DeletedAt,
    stacks::Column::LockLevel,
    stacks::Column::LockedByUser,
    stacks::Column::LockedByAdmin,
    stacks::Column::LockedAt,
    stacks::Column::LockReason,
    stacks::Column::DefinitionVersion,
    stacks::Column::LockExpiresAt,
];

/// What a lookup by "name or id" compares: Heat's order (`identify_stack`)
/// — a UUID is first an id (a deleted stack's too), then a live stack's
/// name; anything else is a name. Two plain lookups instead of one with
/// an `OR`, which PostgreSQL answered with a bitmap scan of two indexes
/// and a plan made at every bind: most of a `GET` of one stack's cost.
#[derive(Debug, Clone, Copy)]
enum StackKey<'a> {
    Id(Uuid),
    Name(&'a str),
}

impl<'a> StackKey<'a> {
    fn tried_for(name_or_id: &'a str) -> impl Iterator<Item = StackKey<'a>> {
        let id = Uuid::parse_str(name_or_id).ok().map(StackKey::Id);
        id.into_iter().chain([StackKey::Name(name_or_id)])
    }
}

/// [`find_in_project`]'s statement, one row at most. Its text has two
/// shapes (by id, by name), each built once per backend: a lookup is on
/// every request naming a stack, and building it through the query
/// builder cost as much as stepping it.
fn find_in_project_statement(
    backend: sea_orm::DatabaseBackend,
    project_id: &str,
    key: StackKey<'_>,
) -> sea_orm::Statement {
    use std::sync::OnceLock;
    static TEXTS: [[OnceLock<String>; 2]; 2] = [
        [OnceLock::new(), OnceLock::new()],
        [OnceLock::new(), OnceLock::new()],
    ];
    let postgres = backend == sea_orm::DatabaseBackend::Postgres;
    let by_id = matches!(key, StackKey::Id(_));
    let text = TEXTS[usize::from(postgres)][usize::from(by_id)].get_or_init(|| {
        let shape = match key {
            StackKey::Id(_) => StackKey::Id(Uuid::nil()),
            StackKey::Name(_) => StackKey::Name(""),
        };
        sea_orm::QueryTrait::build(&find_in_project("", shape).limit(1), backend).sql
    });
    // In the order the builder binds them: the project, the id or the
    // name, the limit.
    let key_value = match key {
        StackKey::Id(id) => sea_orm::Value::from(id),
        StackKey::Name(name) => name.into(),
    };
    let values: Vec<sea_orm::Value> = vec![project_id.into(), key_value, 1_u64.into()];
    sea_orm::Statement::from_sql_and_values(backend, text.clone(), values)
}

/// The project's stack with this id (live or deleted) or this name (a
/// live one), as lookups read it ([`LIST_COLUMNS`]).
fn find_in_project(project_id: &str, key: StackKey<'_>) -> sea_orm::Select<stacks::Entity> {
    let by = match key {
        StackKey::Id(id) => Condition::all().add(stacks::Column::Id.eq(id)),
        StackKey::Name(name) => Condition::all()
            .add(stacks::Column::Name.eq(name))
            .add(stacks::Column::DeletedAt.is_null()),
    };
    stacks::Entity::find()
        .filter(stacks::Column::ProjectId.eq(project_id))
        .filter(by)
        .select_only()
        .columns(LIST_COLUMNS)
}

/// A stack as lookups and lists read it, by position in [`LIST_COLUMNS`]'
/// order (the derived reader looked each of the 24 columns up by name,
/// which was most of a list's cost). The action and status, parsed into
/// enums, are read where their text lies, not copied first.
fn stack_from_columns(row: &Columns<'_>) -> std::result::Result<Stack, sea_orm::TryGetError> {
    let id: Uuid = row.get(0)?;
    let corrupt = |what: &str| {
        sea_orm::TryGetError::DbErr(DbErr::Type(format!("{id}: stored {what} is invalid")))
    };
    let tags: Value = row.get(9)?;
    let tags = tags
        .as_array()
        .and_then(|tags| {
            tags.iter()
                .map(|tag| tag.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| corrupt("stack tags"))?;
    let lock_level = match row.get::<Option<String>>(17)? {
        Some(level) => Some(LockLevel::parse(&level).ok_or_else(|| corrupt("lock level"))?),
        None => None,
    };
    let locked_by_user: Option<String> = row.get(18)?;
    let locked_by_admin: Option<bool> = row.get(19)?;
    let locked_at: Option<DateTime<Utc>> = row.get(20)?;
    let lock_reason: Option<String> = row.get(21)?;
    let lock_expires_at: Option<DateTime<Utc>> = row.get(23)?;
    Ok(Stack {
        id,
        name: row.get(1)?,
        project_id: row.get(2)?,
        user_id: row.get(3)?,
        parent_id: row.get(4)?,
        action: row
            .with_text(5, StackAction::parse)?
            .ok_or_else(|| corrupt("stack action"))?,
        status: row
            .with_text(6, ActionStatus::parse)?
            .ok_or_else(|| corrupt("stack status"))?,
        status_reason: row.get(7)?,
        description: row.get(8)?,
        tags,
        timeout_mins: row
            .get::<Option<i32>>(10)?
            .and_then(|minutes| u32::try_from(minutes).ok()),
        disable_rollback: row.get(11)?,
        created_at: row.get(12)?,
        updated_at: row.get(13)?,
        nested_depth: u32::try_from(row.get::<i32>(14)?).unwrap_or(0),
        parent_resource: row.get(15)?,
        deleted_at: row.get(16)?,
        definition_version: row.get(22)?,
        maintenance_lock: match (lock_level, locked_by_user, locked_at) {
            (Some(level), Some(locked_by_user), Some(locked_at)) => Some(MaintenanceLock {
                level,
                locked_by_user,
                locked_by_admin: locked_by_admin.unwrap_or(false),
                locked_at,
                reason: lock_reason,
                expires_at: lock_expires_at,
            }),
            _ => None,
        },
    })
}

/// A resource row's columns, in the order [`resource_model`] reads them.
const RESOURCE_COLUMNS: [resources::Column; 14] = [
    resources::Column::Id,
    resources::Column::StackId,
    resources::Column::Name,
    resources::Column::TypeName,
    resources::Column::PhysicalId,
    resources::Column::Action,
    resources::Column::Status,
    resources::Column::StatusReason,
    resources::Column::Properties,
    resources::Column::Attributes,
    resources::Column::Metadata,
    resources::Column::Data,
    resources::Column::CreatedAt,
    resources::Column::UpdatedAt,
];

/// A resource row read by position ([`RESOURCE_COLUMNS`]), not by name.
fn resource_model(
    row: &Columns<'_>,
) -> std::result::Result<resources::Model, sea_orm::TryGetError> {
    Ok(resources::Model {
        id: row.get(0)?,
        stack_id: row.get(1)?,
        name: row.get(2)?,
        type_name: row.get(3)?,
        physical_id: row.get(4)?,
        action: row.get(5)?,
        status: row.get(6)?,
        status_reason: row.get(7)?,
        properties: row.get(8)?,
        attributes: row.get(9)?,
        metadata: row.get(10)?,
        data: row.get(11)?,
        created_at: row.get(12)?,
        updated_at: row.get(13)?,
    })
}

fn resource_from_row(row: resources::Model) -> Result<Resource> {
    let action =
        StackAction::parse(&row.action).ok_or_else(|| corrupt("resource action", row.id))?;
    let status =
        ActionStatus::parse(&row.status).ok_or_else(|| corrupt("resource status", row.id))?;
    Ok(Resource {
        id: row.id,
        stack_id: row.stack_id,
        name: row.name,
        type_name: row.type_name,
        physical_id: row.physical_id,
        action,
        status,
        status_reason: row.status_reason,
        properties: row.properties,
        attributes: row.attributes,
        metadata: row.metadata,
        data: row.data,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

fn event_from_row(row: events::Model) -> Result<Event> {
    let action = StackAction::parse(&row.action).ok_or_else(|| corrupt("event action", row.id))?;
    let status = ActionStatus::parse(&row.status).ok_or_else(|| corrupt("event status", row.id))?;
    Ok(Event {
        id: row.id,
        stack_id: row.stack_id,
        resource_name: row.resource_name,
        physical_resource_id: row.physical_resource_id,
        resource_type: row.resource_type,
        action,
        status,
        reason: row.reason,
        created_at: row.created_at,
    })
}

/// `stack` (in progress) as an orphan candidate: none while its `lease`
/// is live; else with the lease's holder and generation (none, 0, when it
/// has no lease row).
fn orphan(
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

#[cfg(test)]
mod tests {
    use sea_orm::{DatabaseBackend, QuerySelect, QueryTrait};

    use super::{StackKey, find_in_project, find_in_project_statement};

    #[test]
    fn a_lookups_statement_is_the_one_the_query_builder_makes() {
        for backend in [DatabaseBackend::Sqlite, DatabaseBackend::Postgres] {
            for name_or_id in ["web", "3f0b5bb2-8c4e-4a5e-9d0e-7f1e2a9c6b10", "Web Tier"] {
                for key in StackKey::tried_for(name_or_id) {
                    // Twice: the second from the text written the first time.
                    for _ in 0..2 {
                        assert_eq!(
                            find_in_project_statement(backend, "project-a", key),
                            find_in_project("project-a", key).limit(1).build(backend),
                            "{backend:?} {key:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_uuid_is_looked_up_as_an_id_first_then_as_a_name() {
        let id = "3f0b5bb2-8c4e-4a5e-9d0e-7f1e2a9c6b10";
        let keys: Vec<String> = StackKey::tried_for(id)
            .map(|key| format!("{key:?}"))
            .collect();
        assert_eq!(keys, [format!("Id({id})"), format!("Name({id:?})")]);
        let keys: Vec<String> = StackKey::tried_for("web")
            .map(|key| format!("{key:?}"))
            .collect();
        assert_eq!(keys, ["Name(\"web\")"]);
    }
}
