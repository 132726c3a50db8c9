//! The engine's stack store on sea-orm: one implementation for SQLite and
//! PostgreSQL. Every method is one transaction.
//!
//! Its rooms: `stack_rows` (how a stack is read: its columns, their
//! decoding, the statements that find stacks), `stack_writes` (how a
//! stack's row is written), `resource_rows` (a stack's resources and
//! events as read), `leases` (a stack's lease row and its fences),
//! `fenced_writes` (running operations' writes under their fences, in
//! batches) and `orphans` (the sweep's decisions on stacks whose engine
//! went away). Here, [`SqlStackStore`] and its [`StackStore`]
//! implementation, which hands each operation to them.

mod fenced_writes;
mod leases;
mod orphans;
mod resource_rows;
mod stack_rows;
mod stack_writes;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseBackend, DatabaseConnection, EntityTrait, QueryFilter,
    TransactionTrait,
};
use uuid::Uuid;

use super::entity::{events, resources, stack_leases, stacks};
use super::rows;
use super::{
    BatchOutcome, EventListQuery, FencedWrite, LeaseFence, LeaseRenewal, LeaseTake, NewStack,
    OrphanCandidate, ResourceFilter, StackListQuery, StackStore, StopRequest, WriteBatch,
};
use crate::domain::{ActionStatus, Event, Resource, Stack, StackDefinition};
use crate::error::{Error, Result};
use fenced_writes::Takes;
use stack_rows::{StackKey, stack_from_columns};

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

    /// The stacks `select` finds, its columns [`stack_rows::LIST_COLUMNS`].
    async fn stack_rows(&self, select: sea_orm::Select<stacks::Entity>) -> Result<Vec<Stack>> {
        self.stacks_from(self.statement(&select)).await
    }

    /// The stacks `statement` finds, its columns
    /// [`stack_rows::LIST_COLUMNS`] (read in place on a SQLite file: see
    /// `Reader::rows`).
    async fn stacks_from(&self, statement: sea_orm::Statement) -> Result<Vec<Stack>> {
        self.reader
            .rows(statement, stack_from_columns)
            .await
            .map_err(Error::from)
    }

    /// The resources `select` finds, its columns
    /// [`resource_rows::RESOURCE_COLUMNS`].
    async fn resource_rows(
        &self,
        select: sea_orm::Select<resources::Entity>,
    ) -> Result<Vec<Resource>> {
        self.reader
            .rows(self.statement(&select), resource_rows::resource_model)
            .await?
            .into_iter()
            .map(resource_rows::resource_from_row)
            .collect()
    }
}

#[async_trait]
impl StackStore for SqlStackStore {
    async fn create_stack_with_lease(&self, new_stack: &NewStack) -> Result<LeaseFence> {
        let transaction = self.connection.begin().await?;
        let recorded =
            stack_writes::insert_new_stacks(&transaction, std::slice::from_ref(new_stack)).await?;
        transaction.commit().await?;
        stack_writes::first_lease_of(new_stack, &recorded)
    }

    async fn find_stack(&self, project_id: &str, name_or_id: &str) -> Result<Option<Stack>> {
        let backend = self.reader.get_database_backend();
        for key in StackKey::tried_for(name_or_id) {
            let statement = stack_rows::find_in_project_statement(backend, project_id, key);
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
        for key in StackKey::tried_for(name_or_id) {
            let select = stack_rows::with_free_lease(project_id, key, now);
            // The stack's columns, then the free lease's generation.
            let found = self
                .reader
                .rows(self.statement(&select), |row| {
                    Ok((
                        stack_from_columns(row)?,
                        row.get(stack_rows::FREE_LEASE_GENERATION_AT)?,
                    ))
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
        let select = stack_rows::listed(&self.reader, project_id, query).await?;
        self.stack_rows(select).await
    }

    async fn get_stack(&self, stack_id: Uuid) -> Result<Option<Stack>> {
        Ok(self.stack_rows(stack_rows::by_id(stack_id)).await?.pop())
    }

    async fn expired_stack_locks(&self, now: DateTime<Utc>, limit: u64) -> Result<Vec<Stack>> {
        self.stack_rows(stack_rows::with_expired_locks(now, limit))
            .await
    }

    async fn next_stack_lock_expiry(&self) -> Result<Option<DateTime<Utc>>> {
        stack_rows::next_lock_expiry(&self.connection).await
    }

    async fn list_child_stacks(&self, stack_id: Uuid) -> Result<Vec<Stack>> {
        self.stack_rows(stack_rows::children(stack_id)).await
    }

    async fn load_versioned_definition(&self, stack_id: Uuid) -> Result<(StackDefinition, i64)> {
        stack_rows::load_versioned_definition(&self.reader, stack_id).await
    }

    async fn load_update_origin(&self, stack_id: Uuid) -> Result<Option<StackDefinition>> {
        stack_rows::load_update_origin(&self.reader, stack_id).await
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
        leases::hold_fence(&transaction, fence).await?;
        stack_writes::write_update_start(&transaction, stack, definition, new_resources, event)
            .await?;
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
        leases::hold_fence(&transaction, fence).await?;
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
        let writes: Vec<&FencedWrite> = writes.iter().collect();
        let lost = fenced_writes::write_fenced(&transaction, &writes).await?;
        transaction.commit().await?;
        Ok(lost)
    }

    fn commits_one_at_a_time(&self) -> bool {
        self.connection.get_database_backend() == DatabaseBackend::Sqlite
    }

    async fn record_batch(&self, batch: &WriteBatch) -> Result<BatchOutcome> {
        // See `Takes`: SQLite's one writer takes inside the transaction,
        // PostgreSQL's takes wait for the commit.
        let takes = if self.commits_one_at_a_time() {
            Takes::InTheTransaction
        } else {
            Takes::AfterTheCommit
        };
        let mut outcome = fenced_writes::record_batch(&self.connection, batch, takes).await?;
        if takes == Takes::AfterTheCommit && !batch.takes.is_empty() {
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
        self.resource_rows(resource_rows::of_stack(stack_id)).await
    }

    async fn list_filtered_resources(
        &self,
        stack_id: Uuid,
        filter: &ResourceFilter,
    ) -> Result<Vec<Resource>> {
        let select = resource_rows::of_stack(stack_id).filter(
            super::resource_filters::resources_condition(stack_id, filter),
        );
        self.resource_rows(select).await
    }

    async fn list_events(&self, query: &EventListQuery) -> Result<Vec<Event>> {
        resource_rows::list_events(&self.reader, query).await
    }

    async fn get_event(&self, stack_id: Uuid, event_id: Uuid) -> Result<Option<Event>> {
        events::Entity::find_by_id(event_id)
            .filter(events::Column::StackId.eq(stack_id))
            .one(&self.reader)
            .await?
            .map(resource_rows::event_from_row)
            .transpose()
    }

    async fn take_stack_lease(&self, take: &LeaseTake) -> Result<Option<LeaseFence>> {
        if take.start.is_none() {
            return leases::take_lease(&self.connection, take.stack_id, &take.lease).await;
        }
        let transaction = self.connection.begin().await?;
        let taken = fenced_writes::take_and_start(&transaction, take).await?;
        transaction.commit().await?;
        Ok(taken)
    }

    async fn free_lease_generation(
        &self,
        stack_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<i64>> {
        leases::free_generation(&self.reader, stack_id, now).await
    }

    async fn renew_stack_lease(
        &self,
        fence: LeaseFence,
        expires_at: DateTime<Utc>,
    ) -> Result<LeaseRenewal> {
        leases::renew(&self.connection, fence, expires_at).await
    }

    async fn request_stack_stop(
        &self,
        stack_id: Uuid,
        request: StopRequest,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        leases::request_stop(&self.connection, stack_id, request, now).await
    }

    async fn release_stack_lease(&self, fence: LeaseFence) -> Result<()> {
        leases::release_lease(&self.connection, fence).await?;
        Ok(())
    }

    async fn next_lease_expiry(&self, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>> {
        leases::next_expiry(&self.reader, now).await
    }

    async fn list_orphan_candidates(
        &self,
        now: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<OrphanCandidate>> {
        let in_progress = self.stack_rows(stack_rows::in_progress(limit)).await?;
        orphans::with_leases(&self.reader, in_progress, now).await
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
        Ok(orphans::orphan(stack, lease.as_ref(), now))
    }

    async fn fail_orphaned_stack(
        &self,
        candidate: &OrphanCandidate,
        engine_id: Uuid,
        now: DateTime<Utc>,
        reason: &str,
    ) -> Result<Option<Stack>> {
        orphans::fail(&self.connection, candidate, engine_id, now, reason).await
    }

    async fn take_over_orphaned_stack(
        &self,
        candidate: &OrphanCandidate,
        engine_id: Uuid,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> Result<Option<LeaseFence>> {
        orphans::take_over(&self.connection, candidate, engine_id, now, expires_at).await
    }

    async fn mark_resource_health(
        &self,
        resource: &Resource,
        event: &Event,
        fence: LeaseFence,
    ) -> Result<()> {
        let transaction = self.connection.begin().await?;
        leases::release_fenced(&transaction, fence).await?;
        let written = resource_rows::write_health(&transaction, resource, event).await?;
        transaction.commit().await?;
        if written {
            Ok(())
        } else {
            Err(resource_rows::resource_gone(resource))
        }
    }

    async fn finish_scaling(
        &self,
        group: &Resource,
        event: &Event,
        fence: LeaseFence,
    ) -> Result<()> {
        let transaction = self.connection.begin().await?;
        leases::release_fenced(&transaction, fence).await?;
        rows::upsert_resources(&transaction, [group]).await?;
        rows::insert_events(&transaction, [event]).await?;
        transaction.commit().await?;
        Ok(())
    }
}
