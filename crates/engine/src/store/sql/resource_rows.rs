//! How a stack's resources and events are read: a resource row's columns
//! ([`RESOURCE_COLUMNS`]) and their decoding, an event list's page; and
//! the one write of a resource row outside the batched upserts of
//! `store::rows`: its health.

use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseTransaction, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect,
};
use uuid::Uuid;

use super::super::entity::{events, resources};
use super::super::{EventListQuery, rows};
use crate::domain::{ActionStatus, Event, Resource, StackAction};
use crate::error::{Error, Result};
use ember_runtime::database::Columns;

/// A resource row's columns, as [`resource_model`] reads them (each by its
/// name: see [`resource_at`]).
pub(super) const RESOURCE_COLUMNS: [resources::Column; 14] = [
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

/// A stack's resources, oldest first (by name among those created
/// together).
pub(super) fn of_stack(stack_id: Uuid) -> sea_orm::Select<resources::Entity> {
    resources::Entity::find()
        .select_only()
        .columns(RESOURCE_COLUMNS)
        .filter(resources::Column::StackId.eq(stack_id))
        .order_by_asc(resources::Column::CreatedAt)
        .order_by_asc(resources::Column::Name)
}

/// Where `column` lies in a row read with [`RESOURCE_COLUMNS`], found at
/// compile time by its name in the list (as `stack_rows::listed_at` finds
/// a stack's).
const fn resource_at(column: resources::Column) -> usize {
    let mut index = 0;
    while index < RESOURCE_COLUMNS.len() {
        if RESOURCE_COLUMNS[index] as usize == column as usize {
            return index;
        }
        index += 1;
    }
    panic!("the column is not among RESOURCE_COLUMNS")
}

/// A resource row read with [`RESOURCE_COLUMNS`], each column by its name.
pub(super) fn resource_model(
    row: &Columns<'_>,
) -> std::result::Result<resources::Model, sea_orm::TryGetError> {
    use resources::Column;
    Ok(resources::Model {
        id: row.get(const { resource_at(Column::Id) })?,
        stack_id: row.get(const { resource_at(Column::StackId) })?,
        name: row.get(const { resource_at(Column::Name) })?,
        type_name: row.get(const { resource_at(Column::TypeName) })?,
        physical_id: row.get(const { resource_at(Column::PhysicalId) })?,
        action: row.get(const { resource_at(Column::Action) })?,
        status: row.get(const { resource_at(Column::Status) })?,
        status_reason: row.get(const { resource_at(Column::StatusReason) })?,
        properties: row.get(const { resource_at(Column::Properties) })?,
        attributes: row.get(const { resource_at(Column::Attributes) })?,
        metadata: row.get(const { resource_at(Column::Metadata) })?,
        data: row.get(const { resource_at(Column::Data) })?,
        created_at: row.get(const { resource_at(Column::CreatedAt) })?,
        updated_at: row.get(const { resource_at(Column::UpdatedAt) })?,
    })
}

pub(super) fn resource_from_row(row: resources::Model) -> Result<Resource> {
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

pub(super) fn corrupt(what: &str, id: Uuid) -> Error {
    Error::Database(format!("{id}: stored {what} is invalid"))
}

/// The page of events `query` asks for.
pub(super) async fn list_events(
    connection: &impl ConnectionTrait,
    query: &EventListQuery,
) -> Result<Vec<Event>> {
    let mut select = events::Entity::find()
        .filter(events::Column::StackId.is_in(query.stack_ids.clone()))
        .filter(super::super::resource_filters::events_condition(
            &query.filter,
        ));
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
        .all(connection)
        .await?
        .into_iter()
        .map(event_from_row)
        .collect()
}

pub(super) fn event_from_row(row: events::Model) -> Result<Event> {
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

/// A resource's health state and its event (see
/// [`crate::store::StackStore::mark_resource_health`]); false, nothing
/// written, when its row is gone.
pub(super) async fn write_health(
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

pub(super) fn resource_gone(resource: &Resource) -> Error {
    Error::NotFound(format!(
        "resource {:?} not found (it was replaced or deleted meanwhile)",
        resource.name
    ))
}
