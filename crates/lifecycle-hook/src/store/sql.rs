//! [`PendingActionStore`] on sea-orm: one implementation for SQLite and
//! PostgreSQL.

use async_trait::async_trait;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, Condition, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, TransactionTrait,
};

use super::entity::{self, Entity as PendingActions};
use chrono::{DateTime, Utc};

use super::sql_work;
use super::{DeliveryResult, HookEvent, PendingActionStore, PendingListQuery, QueueMessage};
use crate::domain::{DeliveryState, PendingLifecycleAction, Resolution, Target, Transition};
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
            timeout_secs: Set(i32::try_from(action.timeout_secs).unwrap_or(i32::MAX)),
            resolution: Set(action.resolution.map(|r| r.as_str().to_owned())),
            resolved_at: Set(action.resolved_at),
            resolved_by: Set(action.resolved_by.clone()),
            next_attempt_at: Set(Some(action.created_at)),
            fire_claimed_until: Set(None),
            transition_type: Set(action.transition.as_str().to_owned()),
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
        if !query.include_resolved {
            select = select.filter(entity::Column::Resolution.is_null());
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

    async fn get_pending(&self, token: uuid::Uuid) -> Result<Option<PendingLifecycleAction>> {
        PendingActions::find_by_id(token)
            .one(&self.connection)
            .await?
            .map(action_from_row)
            .transpose()
    }

    async fn claim_due_deliveries(
        &self,
        now: DateTime<Utc>,
        claim_until: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<PendingLifecycleAction>> {
        sql_work::claim_due_deliveries(&self.connection, now, claim_until, limit).await
    }

    async fn record_deliveries(&self, results: &[DeliveryResult]) -> Result<()> {
        sql_work::record_deliveries(&self.connection, results).await
    }

    async fn enqueue_messages(&self, messages: &[(PendingLifecycleAction, String)]) -> Result<()> {
        sql_work::enqueue_messages(&self.connection, messages).await
    }

    async fn list_queue_messages(
        &self,
        project_id: &str,
        queue: &str,
        after_id: i64,
        limit: u64,
    ) -> Result<Vec<QueueMessage>> {
        sql_work::list_queue_messages(&self.connection, project_id, queue, after_id, limit).await
    }

    async fn claim_expired(
        &self,
        now: DateTime<Utc>,
        claim_until: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<PendingLifecycleAction>> {
        sql_work::claim_expired(&self.connection, now, claim_until, limit).await
    }

    async fn resolve(
        &self,
        tokens: &[uuid::Uuid],
        resolution: Resolution,
        resolved_by: &str,
        events: &[HookEvent],
    ) -> Result<u64> {
        sql_work::resolve(&self.connection, tokens, resolution, resolved_by, events).await
    }

    async fn extend_deadline(
        &self,
        token: uuid::Uuid,
        now: DateTime<Utc>,
    ) -> Result<PendingLifecycleAction> {
        sql_work::extend_deadline(&self.connection, token, now).await
    }

    async fn next_delivery_due(&self) -> Result<Option<DateTime<Utc>>> {
        sql_work::next_delivery_due(&self.connection).await
    }

    async fn next_deadline_due(&self) -> Result<Option<DateTime<Utc>>> {
        sql_work::next_deadline_due(&self.connection).await
    }

    async fn count_overdue(&self, due_before: DateTime<Utc>) -> Result<super::OverdueWork> {
        sql_work::count_overdue(&self.connection, due_before).await
    }

    async fn record_events(&self, events: &[HookEvent]) -> Result<()> {
        sql_work::record_events(&self.connection, events).await
    }

    async fn list_events(
        &self,
        project_id: Option<&str>,
        cluster_id: Option<uuid::Uuid>,
        token: Option<uuid::Uuid>,
        limit: u64,
    ) -> Result<Vec<HookEvent>> {
        sql_work::list_events(&self.connection, project_id, cluster_id, token, limit).await
    }
}

pub(super) fn action_from_row(row: entity::Model) -> Result<PendingLifecycleAction> {
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
        timeout_secs: u32::try_from(row.timeout_secs).unwrap_or(0),
        resolution: match &row.resolution {
            None => None,
            Some(text) => {
                Some(crate::domain::Resolution::parse(text).ok_or_else(|| corrupt("resolution"))?)
            }
        },
        resolved_at: row.resolved_at,
        resolved_by: row.resolved_by,
        transition: Transition::parse(&row.transition_type)
            .ok_or_else(|| corrupt("transition_type"))?,
    })
}
