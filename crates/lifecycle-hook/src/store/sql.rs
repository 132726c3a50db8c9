//! [`PendingActionStore`] on sea-orm: one implementation for SQLite and
//! PostgreSQL.

use async_trait::async_trait;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, Condition, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, TransactionTrait,
};

use super::entity::{self, Entity as PendingActions};
use super::{PendingActionStore, PendingListQuery};
use crate::domain::{DeliveryState, PendingLifecycleAction, Target};
use crate::error::{Error, Result};

pub struct SqlPendingActionStore {
    connection: DatabaseConnection,
}

impl SqlPendingActionStore {
    pub fn new(connection: DatabaseConnection) -> Self {
        SqlPendingActionStore { connection }
    }
}

#[async_trait]
impl PendingActionStore for SqlPendingActionStore {
    async fn record_pending_actions(&self, actions: &[PendingLifecycleAction]) -> Result<()> {
        if actions.is_empty() {
            return Ok(());
        }
        let rows = actions.iter().map(|action| entity::ActiveModel {
            token: Set(action.token),
            node_id: Set(action.node_id),
            resource_id: Set(action.resource_id.clone()),
            cluster_id: Set(action.cluster_id),
            project_id: Set(action.project_id.clone()),
            target_type: Set(action.target.type_name().to_owned()),
            target_address: Set(action.target.address().to_owned()),
            deadline: Set(action.deadline),
            delivery_state: Set(action.delivery_state.as_str().to_owned()),
            delivery_attempts: Set(i32::try_from(action.delivery_attempts).unwrap_or(i32::MAX)),
            last_error: Set(action.last_error.clone()),
            delivered_at: Set(action.delivered_at),
            created_at: Set(action.created_at),
        });
        let transaction = self.connection.begin().await?;
        PendingActions::insert_many(rows)
            .on_conflict_do_nothing_on([entity::Column::Token])
            .exec(&transaction)
            .await?;
        transaction.commit().await?;
        Ok(())
    }

    async fn list_pending(&self, query: &PendingListQuery) -> Result<Vec<PendingLifecycleAction>> {
        let mut select = PendingActions::find();
        if let Some(project_id) = &query.project_id {
            select = select.filter(entity::Column::ProjectId.eq(project_id.as_str()));
        }
        if let Some(cluster_id) = query.cluster_id {
            select = select.filter(entity::Column::ClusterId.eq(cluster_id));
        }
        if let Some(marker) = query.marker {
            let marker_row = PendingActions::find_by_id(marker)
                .one(&self.connection)
                .await?
                .ok_or_else(|| {
                    Error::NotFound(format!("marker {marker} names no pending action"))
                })?;
            select = select.filter(
                Condition::any()
                    .add(entity::Column::Deadline.gt(marker_row.deadline))
                    .add(
                        Condition::all()
                            .add(entity::Column::Deadline.eq(marker_row.deadline))
                            .add(entity::Column::Token.gt(marker_row.token)),
                    ),
            );
        }
        select
            .order_by_asc(entity::Column::Deadline)
            .order_by_asc(entity::Column::Token)
            .limit(u64::from(query.page_size()))
            .all(&self.connection)
            .await?
            .into_iter()
            .map(action_from_row)
            .collect()
    }
}

fn action_from_row(row: entity::Model) -> Result<PendingLifecycleAction> {
    let corrupt = |what: &str| {
        Error::Database(format!(
            "pending action {}: stored {what} is invalid",
            row.token
        ))
    };
    let target = Target::from_parts(&row.target_type, row.target_address.clone())
        .ok_or_else(|| corrupt("target"))?;
    let delivery_state =
        DeliveryState::parse(&row.delivery_state).ok_or_else(|| corrupt("delivery_state"))?;
    Ok(PendingLifecycleAction {
        token: row.token,
        node_id: row.node_id,
        resource_id: row.resource_id,
        cluster_id: row.cluster_id,
        project_id: row.project_id,
        target,
        deadline: row.deadline,
        delivery_state,
        delivery_attempts: u32::try_from(row.delivery_attempts).unwrap_or(0),
        last_error: row.last_error,
        delivered_at: row.delivered_at,
        created_at: row.created_at,
    })
}
