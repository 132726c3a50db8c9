//! Pages of Senlin's list calls: every filter in the `WHERE` (so a page is
//! full whenever enough rows match), the order a caller asked for
//! (`sort=name:desc,created_at`), ties broken by id, and a marker read as a
//! place in that order — the page starts after the marker's row. Without a
//! sort, rows come in id order (ids are UUIDv7: creation order) and any
//! UUID is a marker; with one, a marker naming no row starts from the
//! beginning, as Senlin does. A row whose sort column is NULL sorts as the
//! database puts NULLs and is not found again after a marker inside them.

use sea_orm::sea_query::IntoCondition;
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, EntityTrait, ModelTrait, Order, QueryFilter,
    QueryOrder, QuerySelect, Select,
};
use uuid::Uuid;

use super::SortKey;
use super::entity::{action, cluster, event, node, policy, profile};
use crate::error::Result;

/// Keeps rows whose `column` is one of `values` (no values: every row).
pub(super) fn any_of<E, C, V>(select: Select<E>, column: C, values: &[V]) -> Select<E>
where
    E: EntityTrait,
    C: ColumnTrait,
    V: Clone + Into<sea_orm::Value>,
{
    if values.is_empty() {
        select
    } else {
        select.filter(column.is_in(values.iter().cloned()))
    }
}

/// One page of `select`: ordered by `sort` (each key mapped to a column by
/// `column`), then by `id`; after `marker` in that order.
pub(super) async fn ordered_page<E>(
    reader: &impl ConnectionTrait,
    select: Select<E>,
    sort: &[SortKey],
    column: impl Fn(&str) -> Option<E::Column>,
    id: E::Column,
    marker: Option<Uuid>,
    page_size: u64,
) -> Result<Vec<E::Model>>
where
    E: EntityTrait,
    E::Model: ModelTrait<Entity = E> + Sync,
{
    Ok(
        ordered_select(reader, select, sort, column, id, marker, page_size)
            .await?
            .all(reader)
            .await?,
    )
}

/// The query of [`ordered_page`], for a caller reading more than the
/// entity's columns.
pub(super) async fn ordered_select<E>(
    reader: &impl ConnectionTrait,
    mut select: Select<E>,
    sort: &[SortKey],
    column: impl Fn(&str) -> Option<E::Column>,
    id: E::Column,
    marker: Option<Uuid>,
    page_size: u64,
) -> Result<Select<E>>
where
    E: EntityTrait,
    E::Model: ModelTrait<Entity = E> + Sync,
{
    let order: Vec<(E::Column, bool)> = sort
        .iter()
        .filter_map(|key| column(&key.key).map(|column| (column, key.descending)))
        .collect();
    if let Some(marker) = marker {
        if order.is_empty() {
            select = select.filter(id.gt(marker));
        } else if let Some(row) = E::find().filter(id.eq(marker)).one(reader).await? {
            select = select.filter(after::<E>(&row, &order, id, marker));
        }
    }
    for (column, descending) in &order {
        let direction = if *descending { Order::Desc } else { Order::Asc };
        select = select.order_by(*column, direction);
    }
    Ok(select.order_by_asc(id).limit(page_size))
}

/// Rows after `row` in `order` then id: for some key, every earlier key
/// equal and this one past the marker's value; or every key equal and a
/// greater id.
fn after<E>(row: &E::Model, order: &[(E::Column, bool)], id: E::Column, marker: Uuid) -> Condition
where
    E: EntityTrait,
    E::Model: ModelTrait<Entity = E>,
{
    let mut any = Condition::any();
    for (position, (column, descending)) in order.iter().enumerate() {
        let mut all = equal_before::<E>(row, &order[..position]);
        let value = row.get(*column);
        all = all.add(if *descending {
            column.lt(value)
        } else {
            column.gt(value)
        });
        any = any.add(all);
    }
    any.add(
        equal_before::<E>(row, order)
            .add(id.gt(marker))
            .into_condition(),
    )
}

fn equal_before<E>(row: &E::Model, keys: &[(E::Column, bool)]) -> Condition
where
    E: EntityTrait,
    E::Model: ModelTrait<Entity = E>,
{
    keys.iter().fold(Condition::all(), |all, (column, _)| {
        all.add(column.eq(row.get(*column)))
    })
}

/// Senlin's profile sort keys.
pub(super) fn profile_column(key: &str) -> Option<profile::Column> {
    match key {
        "type" => Some(profile::Column::TypeName),
        "name" => Some(profile::Column::Name),
        "created_at" => Some(profile::Column::CreatedAt),
        "updated_at" => Some(profile::Column::UpdatedAt),
        _ => None,
    }
}

/// Senlin's policy sort keys.
pub(super) fn policy_column(key: &str) -> Option<policy::Column> {
    match key {
        "type" => Some(policy::Column::TypeName),
        "name" => Some(policy::Column::Name),
        "created_at" => Some(policy::Column::CreatedAt),
        "updated_at" => Some(policy::Column::UpdatedAt),
        _ => None,
    }
}

/// Senlin's cluster sort keys (`init_at` is when it was created).
pub(super) fn cluster_column(key: &str) -> Option<cluster::Column> {
    match key {
        "name" => Some(cluster::Column::Name),
        "status" => Some(cluster::Column::Status),
        "init_at" | "created_at" => Some(cluster::Column::CreatedAt),
        "updated_at" => Some(cluster::Column::UpdatedAt),
        _ => None,
    }
}

/// Senlin's node sort keys.
pub(super) fn node_column(key: &str) -> Option<node::Column> {
    match key {
        "index" => Some(node::Column::NodeIndex),
        "name" => Some(node::Column::Name),
        "status" => Some(node::Column::Status),
        "init_at" | "created_at" => Some(node::Column::CreatedAt),
        "updated_at" => Some(node::Column::UpdatedAt),
        _ => None,
    }
}

/// Senlin's action sort keys.
pub(super) fn action_column(key: &str) -> Option<action::Column> {
    match key {
        "name" => Some(action::Column::Name),
        "target" => Some(action::Column::TargetId),
        "action" => Some(action::Column::Kind),
        "created_at" => Some(action::Column::CreatedAt),
        "status" => Some(action::Column::Status),
        _ => None,
    }
}

/// Senlin's event sort keys.
pub(super) fn event_column(key: &str) -> Option<event::Column> {
    match key {
        "timestamp" => Some(event::Column::GeneratedAt),
        "level" => Some(event::Column::Level),
        "otype" => Some(event::Column::ObjType),
        "oname" => Some(event::Column::ObjName),
        "action" => Some(event::Column::Action),
        "status" => Some(event::Column::Status),
        "oid" => Some(event::Column::ObjId),
        "cluster_id" => Some(event::Column::ClusterId),
        _ => None,
    }
}
