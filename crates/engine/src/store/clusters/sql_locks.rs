//! Clusters' maintenance locks: taken, changed, renewed and lifted by one
//! conditional update each — where the lock is still, to the character,
//! the one the writer read — with its events in the same transaction; so
//! a lock, an unlock and an expiry racing each other (on one engine or
//! several) have one winner, and an expiry is recorded exactly once.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use uuid::Uuid;

use super::changes::begin_write;
use super::convert::{cluster_from, event_row};
use super::entity::{cluster, event};
use crate::domain::cluster::{Cluster, ClusterEvent, ClusterLock};
use crate::error::{Error, Result};

/// A lock as stored: its JSON text.
fn stored(lock: &ClusterLock) -> Result<String> {
    serde_json::to_string(lock).map_err(|error| Error::Database(format!("a cluster lock: {error}")))
}

/// Sets `next` (or lifts the lock, `None`) where the cluster's lock is
/// still `expected`, with `events`; false when it changed since.
pub(super) async fn change_cluster_lock(
    connection: &DatabaseConnection,
    cluster_id: Uuid,
    expected: Option<&ClusterLock>,
    next: Option<&ClusterLock>,
    events: &[ClusterEvent],
) -> Result<bool> {
    let transaction = begin_write(connection).await?;
    let next_text = next.map(stored).transpose()?;
    let mut update = cluster::Entity::update_many()
        .col_expr(cluster::Column::MaintenanceLock, Expr::value(next_text))
        .col_expr(
            cluster::Column::LockExpiresAt,
            Expr::value(next.and_then(|lock| lock.expires_at)),
        )
        .filter(cluster::Column::Id.eq(cluster_id));
    update = match expected {
        Some(lock) => update.filter(cluster::Column::MaintenanceLock.eq(stored(lock)?)),
        None => update.filter(cluster::Column::MaintenanceLock.is_null()),
    };
    let written = update.exec(&transaction).await?;
    if written.rows_affected != 1 {
        return Ok(false);
    }
    if !events.is_empty() {
        event::Entity::insert_many(events.iter().map(event_row))
            .exec_without_returning(&transaction)
            .await?;
    }
    transaction.commit().await?;
    Ok(true)
}

/// The clusters whose lock expired by `now`, soonest expired first, at
/// most `limit`.
pub(super) async fn expired_cluster_locks(
    connection: &DatabaseConnection,
    now: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<Cluster>> {
    cluster::Entity::find()
        .filter(cluster::Column::LockExpiresAt.lte(now))
        .order_by_asc(cluster::Column::LockExpiresAt)
        .limit(limit)
        .all(connection)
        .await?
        .into_iter()
        .map(cluster_from)
        .collect()
}

/// When the soonest cluster lock expires.
pub(super) async fn next_cluster_lock_expiry(
    connection: &DatabaseConnection,
) -> Result<Option<DateTime<Utc>>> {
    Ok(cluster::Entity::find()
        .filter(cluster::Column::LockExpiresAt.is_not_null())
        .order_by_asc(cluster::Column::LockExpiresAt)
        .select_only()
        .column(cluster::Column::LockExpiresAt)
        .into_tuple::<Option<DateTime<Utc>>>()
        .one(connection)
        .await?
        .flatten())
}

/// See [`super::ClusterStore::lift_expired_cluster_locks`]: one
/// conditional update per lock, then the events and audit records of
/// those lifted, in one transaction.
pub(super) async fn lift_expired_cluster_locks(
    connection: &DatabaseConnection,
    lifts: &[super::ExpiredLift],
) -> Result<Vec<Uuid>> {
    if lifts.is_empty() {
        return Ok(Vec::new());
    }
    let transaction = begin_write(connection).await?;
    let mut lifted = Vec::new();
    let mut events = Vec::new();
    let mut records = Vec::new();
    for lift in lifts {
        let written = cluster::Entity::update_many()
            .col_expr(
                cluster::Column::MaintenanceLock,
                Expr::value(None::<String>),
            )
            .col_expr(
                cluster::Column::LockExpiresAt,
                Expr::value(None::<DateTime<Utc>>),
            )
            .filter(cluster::Column::Id.eq(lift.cluster_id))
            .filter(cluster::Column::MaintenanceLock.eq(stored(&lift.lock)?))
            .exec(&transaction)
            .await?;
        if written.rows_affected == 1 {
            lifted.push(lift.cluster_id);
            events.push(event_row(&lift.event));
            records.extend(lift.audit.clone());
        }
    }
    if !events.is_empty() {
        event::Entity::insert_many(events)
            .exec_without_returning(&transaction)
            .await?;
    }
    crate::store::audit::insert_audit_records(&transaction, &records).await?;
    transaction.commit().await?;
    Ok(lifted)
}
