//! [`InstanceStore`] on sea-orm, for SQLite and PostgreSQL. Every method is
//! one statement or one transaction.

use std::collections::BTreeMap;

use async_trait::async_trait;
use sea_orm::sea_query::{Expr, OnConflict, SimpleExpr};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, Condition, DatabaseConnection, EntityTrait, ExprTrait,
    QueryFilter, QueryOrder, QuerySelect, TransactionTrait,
};
use serde_json::Value;
use uuid::Uuid;

use super::entity::{instance_events, instances};
use super::{InstanceEvent, InstanceListQuery, InstanceStore, OBSERVED_EVENT, TaskOutcome};
use crate::domain::instance::observation::Observation;
use crate::domain::instance::placement::Placement;
use crate::domain::instance::{
    Instance, InstanceStatus, InstanceTask, LockedBy, MaintenanceLock, PowerState, Workload,
};
use crate::error::{Error, Result};

/// Rows per INSERT when many instances are recorded at once (well under
/// SQLite's limit on bound values per statement).
const INSERT_CHUNK: usize = 500;

pub struct SqlInstanceStore {
    /// Every write, and reads inside a write's transaction.
    connection: DatabaseConnection,
    /// Reads outside transactions (see `ember_runtime::database::connect_reader`).
    reader: ember_runtime::database::Reader,
}

impl SqlInstanceStore {
    /// One connection (pool) for reads and writes.
    pub fn new(connection: DatabaseConnection) -> Self {
        SqlInstanceStore {
            reader: ember_runtime::database::Reader::shared(connection.clone()),
            connection,
        }
    }

    /// Writes through `connection`, reads through `reader`.
    pub fn with_reader(
        connection: DatabaseConnection,
        reader: impl Into<ember_runtime::database::Reader>,
    ) -> Self {
        SqlInstanceStore {
            connection,
            reader: reader.into(),
        }
    }

    /// Sets `columns` (plus revision and updated_at) on `next`'s row if its
    /// stored revision is the one before `next`'s.
    async fn write_if_unchanged(
        &self,
        next: &Instance,
        columns: Vec<(instances::Column, SimpleExpr)>,
    ) -> Result<bool> {
        let mut update = instances::Entity::update_many()
            .col_expr(instances::Column::Revision, Expr::value(next.revision))
            .col_expr(instances::Column::UpdatedAt, Expr::value(next.updated_at));
        for (column, value) in columns {
            update = update.col_expr(column, value);
        }
        let written = update
            .filter(instances::Column::Uuid.eq(next.uuid))
            .filter(instances::Column::Revision.eq(next.revision - 1))
            .exec(&self.connection)
            .await?;
        Ok(written.rows_affected == 1)
    }
}

fn metadata_json(metadata: &BTreeMap<String, String>) -> Value {
    Value::Object(
        metadata
            .iter()
            .map(|(key, value)| (key.clone(), Value::String(value.clone())))
            .collect(),
    )
}

/// NULL for a placement that says nothing.
fn placement_json(placement: &Placement) -> Option<Value> {
    (!placement.is_empty()).then(|| serde_json::to_value(placement).unwrap_or(Value::Null))
}

fn string_list_json(items: &[String]) -> Option<Value> {
    (!items.is_empty()).then(|| Value::Array(items.iter().cloned().map(Value::String).collect()))
}

fn event_row(
    instance_uuid: Uuid,
    project_id: &str,
    kind: &str,
    status: InstanceStatus,
    power_state: PowerState,
    reason: &str,
    at: chrono::DateTime<chrono::Utc>,
) -> instance_events::ActiveModel {
    instance_events::ActiveModel {
        id: Set(Uuid::now_v7()),
        instance_uuid: Set(instance_uuid),
        project_id: Set(project_id.to_owned()),
        kind: Set(kind.to_owned()),
        status: Set(status.as_str().to_owned()),
        power_state: Set(power_state.as_str().to_owned()),
        reason: Set(reason.to_owned()),
        at: Set(at),
    }
}

fn event_from_row(row: instance_events::Model) -> Result<InstanceEvent> {
    let status = InstanceStatus::parse(&row.status).ok_or_else(|| {
        Error::Database(format!(
            "instance event {}: unknown status {:?}",
            row.id, row.status
        ))
    })?;
    let power_state = PowerState::parse(&row.power_state).ok_or_else(|| {
        Error::Database(format!(
            "instance event {}: unknown power state {:?}",
            row.id, row.power_state
        ))
    })?;
    Ok(InstanceEvent {
        id: row.id,
        instance_uuid: row.instance_uuid,
        project_id: row.project_id,
        kind: row.kind,
        status,
        power_state,
        reason: row.reason,
        at: row.at,
    })
}

fn lock_columns(lock: Option<&MaintenanceLock>) -> Vec<(instances::Column, SimpleExpr)> {
    vec![
        (instances::Column::Locked, Expr::value(lock.is_some())),
        (
            instances::Column::LockedBy,
            Expr::value(lock.map(|lock| lock.locked_by.as_str().to_owned())),
        ),
        (
            instances::Column::LockedByUser,
            Expr::value(lock.map(|lock| lock.user_id.clone())),
        ),
        (
            instances::Column::LockedAt,
            Expr::value(lock.map(|lock| lock.locked_at)),
        ),
        (
            instances::Column::LockedReason,
            Expr::value(lock.and_then(|lock| lock.reason.clone())),
        ),
        (
            instances::Column::LockExpiresAt,
            Expr::value(lock.and_then(|lock| lock.expires_at)),
        ),
    ]
}

fn instance_row(instance: &Instance) -> instances::ActiveModel {
    let lock = instance.maintenance_lock.as_ref();
    instances::ActiveModel {
        uuid: Set(instance.uuid),
        name: Set(instance.name.clone()),
        project_id: Set(instance.project_id.clone()),
        user_id: Set(instance.user_id.clone()),
        flavor: Set(instance.flavor.clone()),
        image: Set(instance.image.clone()),
        metadata: Set(metadata_json(&instance.metadata)),
        status: Set(instance.status.as_str().to_owned()),
        power_state: Set(instance.power_state.as_str().to_owned()),
        locked: Set(lock.is_some()),
        locked_by: Set(lock.map(|lock| lock.locked_by.as_str().to_owned())),
        locked_by_user: Set(lock.map(|lock| lock.user_id.clone())),
        locked_at: Set(lock.map(|lock| lock.locked_at)),
        locked_reason: Set(lock.and_then(|lock| lock.reason.clone())),
        lock_expires_at: Set(lock.and_then(|lock| lock.expires_at)),
        status_reason: Set(instance.status_reason.clone()),
        user_data: Set(
            (!instance.workload.user_data.is_empty()).then(|| instance.workload.user_data.clone())
        ),
        command: Set(string_list_json(&instance.workload.command)),
        env: Set((!instance.workload.env.is_empty()).then(|| metadata_json(&instance.workload.env))),
        placement: Set(placement_json(&instance.placement)),
        delegation: Set(instance
            .delegation
            .as_ref()
            .and_then(|delegation| serde_json::to_value(delegation).ok())),
        revision: Set(instance.revision),
        created_at: Set(instance.created_at),
        updated_at: Set(instance.updated_at),
    }
}

fn instance_from_row(row: instances::Model) -> Result<Instance> {
    let corrupt = |what: &str, value: &str| {
        Error::Database(format!("instance {}: unknown {what} {value:?}", row.uuid))
    };
    let status =
        InstanceStatus::parse(&row.status).ok_or_else(|| corrupt("status", &row.status))?;
    let power_state = PowerState::parse(&row.power_state)
        .ok_or_else(|| corrupt("power state", &row.power_state))?;
    let maintenance_lock = match (row.locked, &row.locked_by, row.locked_at) {
        (false, _, _) => None,
        (true, Some(locked_by), Some(locked_at)) => Some(MaintenanceLock {
            locked_by: LockedBy::parse(locked_by).ok_or_else(|| corrupt("locked_by", locked_by))?,
            user_id: row.locked_by_user.clone().unwrap_or_default(),
            locked_at,
            reason: row.locked_reason.clone(),
            expires_at: row.lock_expires_at,
        }),
        (true, _, _) => return Err(corrupt("lock", "locked without locked_by/locked_at")),
    };
    let string_map = |what: &str, value: &Value| -> Result<BTreeMap<String, String>> {
        match value {
            Value::Object(map) => map
                .iter()
                .map(|(key, value)| match value {
                    Value::String(text) => Ok((key.clone(), text.clone())),
                    other => Err(corrupt(what, &other.to_string())),
                })
                .collect::<Result<BTreeMap<_, _>>>(),
            Value::Null => Ok(BTreeMap::new()),
            other => Err(corrupt(what, &other.to_string())),
        }
    };
    let metadata = string_map("metadata", &row.metadata)?;
    let env = string_map("env", row.env.as_ref().unwrap_or(&Value::Null))?;
    let command = match &row.command {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(text) => Ok(text.clone()),
                other => Err(corrupt("command argument", &other.to_string())),
            })
            .collect::<Result<Vec<_>>>()?,
        Some(other) => return Err(corrupt("command", &other.to_string())),
    };
    let placement = match &row.placement {
        None | Some(Value::Null) => Default::default(),
        Some(value) => serde_json::from_value(value.clone())
            .map_err(|error| corrupt("placement", &error.to_string()))?,
    };
    let delegation = match &row.delegation {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            serde_json::from_value(value.clone())
                .map_err(|error| corrupt("delegation", &error.to_string()))?,
        ),
    };
    Ok(Instance {
        uuid: row.uuid,
        name: row.name,
        project_id: row.project_id,
        user_id: row.user_id,
        flavor: row.flavor,
        image: row.image,
        metadata,
        workload: Workload {
            user_data: row.user_data.unwrap_or_default(),
            command,
            env,
        },
        placement,
        delegation,
        status,
        power_state,
        maintenance_lock,
        status_reason: row.status_reason,
        revision: row.revision,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

#[async_trait]
impl InstanceStore for SqlInstanceStore {
    async fn insert_instance(&self, instance: &Instance) -> Result<()> {
        instances::Entity::insert(instance_row(instance))
            .exec_without_returning(&self.connection)
            .await?;
        Ok(())
    }

    async fn insert_instance_if_absent(&self, instance: &Instance) -> Result<bool> {
        let inserted = instances::Entity::insert(instance_row(instance))
            .on_conflict(
                OnConflict::column(instances::Column::Uuid)
                    .do_nothing()
                    .to_owned(),
            )
            .exec_without_returning(&self.connection)
            .await?;
        Ok(inserted == 1)
    }

    async fn insert_instances(&self, instances_to_insert: &[Instance]) -> Result<()> {
        let transaction = self.connection.begin().await?;
        for chunk in instances_to_insert.chunks(INSERT_CHUNK) {
            instances::Entity::insert_many(chunk.iter().map(instance_row))
                .exec_without_returning(&transaction)
                .await?;
        }
        transaction.commit().await?;
        Ok(())
    }

    async fn get_instance(&self, uuid: Uuid) -> Result<Option<Instance>> {
        instances::Entity::find_by_id(uuid)
            .filter(instances::Column::Status.ne(InstanceStatus::Deleted.as_str()))
            .one(&self.reader)
            .await?
            .map(instance_from_row)
            .transpose()
    }

    async fn list_instances(&self, query: &InstanceListQuery) -> Result<Vec<Instance>> {
        let mut select = instances::Entity::find();
        if let Some(project_id) = &query.project_id {
            select = select.filter(instances::Column::ProjectId.eq(project_id.as_str()));
        }
        select = select.filter(instances::Column::Status.ne(InstanceStatus::Deleted.as_str()));
        if let Some(status) = query.status {
            select = select.filter(instances::Column::Status.eq(status.as_str()));
        }
        if let Some(locked) = query.locked {
            select = select.filter(instances::Column::Locked.eq(locked));
        }
        if let Some(name) = &query.name {
            select = select.filter(instances::Column::Name.eq(name.as_str()));
        }
        if let Some(marker) = query.marker {
            let mut marker_query = instances::Entity::find_by_id(marker);
            if let Some(project_id) = &query.project_id {
                marker_query =
                    marker_query.filter(instances::Column::ProjectId.eq(project_id.as_str()));
            }
            let marker_row = marker_query.one(&self.reader).await?.ok_or_else(|| {
                Error::InvalidInput(format!("marker: {marker} names no instance"))
            })?;
            select = select.filter(
                Condition::any()
                    .add(instances::Column::CreatedAt.lt(marker_row.created_at))
                    .add(
                        Condition::all()
                            .add(instances::Column::CreatedAt.eq(marker_row.created_at))
                            .add(instances::Column::Uuid.lt(marker_row.uuid)),
                    ),
            );
        }
        select
            .order_by_desc(instances::Column::CreatedAt)
            .order_by_desc(instances::Column::Uuid)
            .limit(u64::from(query.page_size()))
            .all(&self.reader)
            .await?
            .into_iter()
            .map(instance_from_row)
            .collect()
    }

    async fn lock_instance(&self, next: &Instance) -> Result<bool> {
        if next.maintenance_lock.is_none() {
            return Err(Error::Database(format!(
                "instance {}: lock_instance was given no lock",
                next.uuid
            )));
        }
        self.write_if_unchanged(next, lock_columns(next.maintenance_lock.as_ref()))
            .await
    }

    async fn unlock_instance(&self, next: &Instance) -> Result<bool> {
        self.write_if_unchanged(next, lock_columns(None)).await
    }

    async fn expire_instance_locks(
        &self,
        lifts: &[super::ExpiredInstanceLock],
    ) -> Result<Vec<Uuid>> {
        if lifts.is_empty() {
            return Ok(Vec::new());
        }
        let transaction = self.connection.begin().await?;
        let mut lifted = Vec::new();
        let mut events = Vec::new();
        let mut records = Vec::new();
        for lift in lifts {
            let next = &lift.next;
            let mut update = instances::Entity::update_many()
                .col_expr(instances::Column::Revision, Expr::value(next.revision))
                .col_expr(instances::Column::UpdatedAt, Expr::value(next.updated_at));
            for (column, value) in lock_columns(None) {
                update = update.col_expr(column, value);
            }
            let written = update
                .filter(instances::Column::Uuid.eq(next.uuid))
                .filter(instances::Column::Revision.eq(next.revision - 1))
                .exec(&transaction)
                .await?;
            if written.rows_affected != 1 {
                continue;
            }
            lifted.push(next.uuid);
            events.push(event_row(
                next.uuid,
                &next.project_id,
                super::LOCK_EXPIRED_EVENT,
                next.status,
                next.power_state,
                &lift.reason,
                next.updated_at,
            ));
            records.extend(lift.audit.clone());
        }
        for chunk in events.chunks(INSERT_CHUNK) {
            instance_events::Entity::insert_many(chunk.to_vec())
                .exec_without_returning(&transaction)
                .await?;
        }
        crate::store::audit::insert_audit_records(&transaction, &records).await?;
        transaction.commit().await?;
        Ok(lifted)
    }

    async fn expired_instance_locks(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        limit: u64,
    ) -> Result<Vec<Instance>> {
        instances::Entity::find()
            .filter(instances::Column::LockExpiresAt.lte(now))
            .filter(instances::Column::Locked.eq(true))
            .order_by_asc(instances::Column::LockExpiresAt)
            .limit(limit)
            .all(&self.connection)
            .await?
            .into_iter()
            .map(instance_from_row)
            .collect()
    }

    async fn next_instance_lock_expiry(&self) -> Result<Option<chrono::DateTime<chrono::Utc>>> {
        Ok(instances::Entity::find()
            .filter(instances::Column::LockExpiresAt.is_not_null())
            .filter(instances::Column::Locked.eq(true))
            .order_by_asc(instances::Column::LockExpiresAt)
            .select_only()
            .column(instances::Column::LockExpiresAt)
            .into_tuple::<Option<chrono::DateTime<chrono::Utc>>>()
            .one(&self.connection)
            .await?
            .flatten())
    }

    async fn update_instance_details(&self, next: &Instance) -> Result<bool> {
        let columns = vec![
            (instances::Column::Name, Expr::value(next.name.clone())),
            (
                instances::Column::Metadata,
                Expr::value(metadata_json(&next.metadata)),
            ),
            (
                instances::Column::Placement,
                Expr::value(placement_json(&next.placement)),
            ),
        ];
        self.write_if_unchanged(next, columns).await
    }

    async fn start_instance_task(&self, next: &Instance) -> Result<bool> {
        let columns = vec![
            (instances::Column::Status, Expr::value(next.status.as_str())),
            (
                instances::Column::PowerState,
                Expr::value(next.power_state.as_str()),
            ),
            (
                instances::Column::StatusReason,
                Expr::value(next.status_reason.clone()),
            ),
        ];
        self.write_if_unchanged(next, columns).await
    }

    async fn finish_instance_task(
        &self,
        instance: &Instance,
        outcome: &TaskOutcome,
    ) -> Result<bool> {
        let uuid = instance.uuid;
        let (in_progress_status, in_progress_power) = outcome.task.in_progress();
        let mut update = instances::Entity::update_many()
            .col_expr(
                instances::Column::Status,
                Expr::value(outcome.status.as_str()),
            )
            .col_expr(
                instances::Column::PowerState,
                Expr::value(outcome.power_state.as_str()),
            )
            .col_expr(
                instances::Column::StatusReason,
                Expr::value(outcome.status_reason.clone()),
            )
            .col_expr(instances::Column::UpdatedAt, Expr::value(outcome.at))
            .col_expr(
                instances::Column::Revision,
                Expr::col(instances::Column::Revision).add(1),
            )
            .filter(instances::Column::Uuid.eq(uuid))
            .filter(instances::Column::Status.eq(in_progress_status.as_str()));
        if let Some(power_state) = in_progress_power {
            update = update.filter(instances::Column::PowerState.eq(power_state.as_str()));
        }
        let transaction = self.connection.begin().await?;
        let written = update.exec(&transaction).await?;
        if written.rows_affected != 1 {
            return Ok(false);
        }
        let reason = if outcome.status_reason.is_empty() {
            format!("{} succeeded", outcome.task.as_str())
        } else {
            outcome.status_reason.clone()
        };
        instance_events::Entity::insert(event_row(
            uuid,
            // An instance's project never changes.
            &instance.project_id,
            outcome.task.as_str(),
            outcome.status,
            outcome.power_state,
            &reason,
            outcome.at,
        ))
        .exec_without_returning(&transaction)
        .await?;
        transaction.commit().await?;
        Ok(true)
    }

    async fn record_observation(&self, observation: &Observation) -> Result<bool> {
        let next = &observation.next;
        let update = instances::Entity::update_many()
            .col_expr(instances::Column::Status, Expr::value(next.status.as_str()))
            .col_expr(
                instances::Column::PowerState,
                Expr::value(next.power_state.as_str()),
            )
            .col_expr(
                instances::Column::StatusReason,
                Expr::value(next.status_reason.clone()),
            )
            .col_expr(instances::Column::Revision, Expr::value(next.revision))
            .col_expr(instances::Column::UpdatedAt, Expr::value(next.updated_at))
            .filter(instances::Column::Uuid.eq(next.uuid))
            .filter(instances::Column::Revision.eq(next.revision - 1));
        let transaction = self.connection.begin().await?;
        if update.exec(&transaction).await?.rows_affected != 1 {
            return Ok(false);
        }
        instance_events::Entity::insert(event_row(
            next.uuid,
            &next.project_id,
            OBSERVED_EVENT,
            next.status,
            next.power_state,
            &observation.reason,
            next.updated_at,
        ))
        .exec_without_returning(&transaction)
        .await?;
        transaction.commit().await?;
        Ok(true)
    }

    async fn list_instance_events(&self, uuid: Uuid, limit: u64) -> Result<Vec<InstanceEvent>> {
        let mut events = instance_events::Entity::find()
            .filter(instance_events::Column::InstanceUuid.eq(uuid))
            .order_by_desc(instance_events::Column::At)
            .order_by_desc(instance_events::Column::Id)
            .limit(limit)
            .all(&self.reader)
            .await?
            .into_iter()
            .map(event_from_row)
            .collect::<Result<Vec<_>>>()?;
        events.reverse();
        Ok(events)
    }

    async fn list_watched_instances(
        &self,
        after: Option<Uuid>,
        limit: u64,
    ) -> Result<Vec<Instance>> {
        let watched = Condition::any()
            .add(
                Condition::all()
                    .add(instances::Column::Status.eq(InstanceStatus::Active.as_str()))
                    .add(instances::Column::PowerState.eq(PowerState::On.as_str())),
            )
            .add(
                Condition::all()
                    .add(instances::Column::Status.is_in([
                        InstanceStatus::Stopped.as_str(),
                        InstanceStatus::Error.as_str(),
                    ]))
                    .add(instances::Column::PowerState.eq(PowerState::Off.as_str())),
            );
        let mut select = instances::Entity::find().filter(watched);
        if let Some(after) = after {
            select = select.filter(instances::Column::Uuid.gt(after));
        }
        select
            .order_by_asc(instances::Column::Uuid)
            .limit(limit)
            .all(&self.reader)
            .await?
            .into_iter()
            .map(instance_from_row)
            .collect()
    }

    async fn list_unfinished_instances(&self) -> Result<Vec<Instance>> {
        let mut in_progress = Condition::any();
        for task in InstanceTask::ALL {
            let (status, power_state) = task.in_progress();
            let mut this_task = Condition::all().add(instances::Column::Status.eq(status.as_str()));
            if let Some(power_state) = power_state {
                this_task = this_task.add(instances::Column::PowerState.eq(power_state.as_str()));
            }
            in_progress = in_progress.add(this_task);
        }
        instances::Entity::find()
            .filter(in_progress)
            .order_by_asc(instances::Column::UpdatedAt)
            .all(&self.connection)
            .await?
            .into_iter()
            .map(instance_from_row)
            .collect()
    }
}
