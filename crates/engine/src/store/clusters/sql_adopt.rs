//! Adopting an instance as a node: its new profile, the node and the event
//! in one transaction, and only while no node manages that instance yet
//! (on PostgreSQL a transaction-scoped advisory lock on the instance id
//! makes the check and the insert one decision; SQLite's write lock,
//! taken at `BEGIN IMMEDIATE`, does the same).

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, EntityTrait, PaginatorTrait,
    QueryFilter, Statement,
};

use super::changes::begin_write;
use super::convert::{event_row, node_row, profile_row};
use super::entity::{event, node, profile};
use crate::domain::cluster::{ClusterEvent, Node, Profile};
use crate::error::{Error, Result};

pub(super) async fn adopt_node(
    connection: &DatabaseConnection,
    adopted_profile: &Profile,
    adopted: &Node,
    adopted_event: &ClusterEvent,
) -> Result<Node> {
    let physical_id = adopted.physical_id.clone().unwrap_or_default();
    let transaction = begin_write(connection).await?;
    if transaction.get_database_backend() == DbBackend::Postgres {
        transaction
            .execute_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                "SELECT pg_advisory_xact_lock(hashtext($1))",
                [physical_id.clone().into()],
            ))
            .await?;
    }
    let managed = node::Entity::find()
        .filter(node::Column::PhysicalId.eq(physical_id.as_str()))
        .count(&transaction)
        .await?;
    if managed > 0 {
        return Err(Error::Conflict(format!(
            "instance {physical_id} is already managed by a node: delete that node first"
        )));
    }
    profile::Entity::insert(profile_row(adopted_profile))
        .exec_without_returning(&transaction)
        .await?;
    node::Entity::insert(node_row(adopted))
        .exec_without_returning(&transaction)
        .await?;
    event::Entity::insert(event_row(adopted_event))
        .exec_without_returning(&transaction)
        .await?;
    transaction.commit().await?;
    Ok(adopted.clone())
}
