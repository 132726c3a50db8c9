//! [`ClusterStore`] on sea-orm: profiles, policies, clusters, nodes,
//! bindings and events. The action methods are in `sql_actions`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict};
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect, TransactionTrait,
};
use uuid::Uuid;

use super::convert::*;
use super::entity::{action, binding, cluster, event, node, policy, profile};
use super::{
    ActionQuery, ClusterStore, EventQuery, NodeQuery, ObjectQuery, ReadyOutcome, sql_actions,
};
use crate::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterAction, ClusterEvent, LifecycleOutcome, Node,
    PolicyBinding, PolicyDefinition, Profile,
};
use crate::error::{Error, Result};

pub struct SqlClusterStore {
    pub(super) connection: DatabaseConnection,
}

impl SqlClusterStore {
    pub fn new(connection: DatabaseConnection) -> Self {
        SqlClusterStore { connection }
    }
}

/// Finds one row by id or exact name within a project.
macro_rules! find_by_name_or_id {
    ($connection:expr, $entity:ident, $what:literal, $project:expr, $name_or_id:expr) => {{
        let mut select = $entity::Entity::find();
        if let Some(project_id) = $project {
            select = select.filter($entity::Column::ProjectId.eq(project_id));
        }
        let rows = match Uuid::parse_str($name_or_id) {
            Ok(id) => {
                select
                    .filter($entity::Column::Id.eq(id))
                    .all($connection)
                    .await?
            }
            Err(_) => {
                select
                    .filter($entity::Column::Name.eq($name_or_id))
                    .limit(2)
                    .all($connection)
                    .await?
            }
        };
        if rows.len() > 1 {
            return Err(Error::Conflict(format!(
                "more than one {} is named {:?}: use its id",
                $what, $name_or_id
            )));
        }
        rows.into_iter().next()
    }};
}

#[async_trait]
impl ClusterStore for SqlClusterStore {
    async fn insert_profile(&self, profile: &Profile) -> Result<()> {
        profile::Entity::insert(profile_row(profile))
            .exec(&self.connection)
            .await?;
        Ok(())
    }

    async fn find_profile(
        &self,
        project_id: Option<&str>,
        name_or_id: &str,
    ) -> Result<Option<Profile>> {
        find_by_name_or_id!(&self.connection, profile, "profile", project_id, name_or_id)
            .map(profile_from)
            .transpose()
    }

    async fn get_profile(&self, id: Uuid) -> Result<Option<Profile>> {
        profile::Entity::find_by_id(id)
            .one(&self.connection)
            .await?
            .map(profile_from)
            .transpose()
    }

    async fn list_profiles(&self, query: &ObjectQuery) -> Result<Vec<Profile>> {
        let mut select = profile::Entity::find();
        if let Some(project_id) = &query.project_id {
            select = select.filter(profile::Column::ProjectId.eq(project_id.as_str()));
        }
        if let Some(name) = &query.name {
            select = select.filter(profile::Column::Name.eq(name.as_str()));
        }
        if let Some(marker) = query.marker {
            select = select.filter(profile::Column::Id.gt(marker));
        }
        select
            .order_by_asc(profile::Column::Id)
            .limit(query.page_size())
            .all(&self.connection)
            .await?
            .into_iter()
            .map(profile_from)
            .collect()
    }

    async fn delete_profile(&self, id: Uuid) -> Result<()> {
        let transaction = self.connection.begin().await?;
        let clusters = cluster::Entity::find()
            .filter(cluster::Column::ProfileId.eq(id))
            .count(&transaction)
            .await?;
        let nodes = node::Entity::find()
            .filter(node::Column::ProfileId.eq(id))
            .count(&transaction)
            .await?;
        if clusters + nodes > 0 {
            return Err(Error::Conflict(format!(
                "profile {id} is used by {clusters} cluster(s) and {nodes} node(s): delete them first"
            )));
        }
        profile::Entity::delete_by_id(id).exec(&transaction).await?;
        transaction.commit().await?;
        Ok(())
    }

    async fn insert_policy(&self, policy: &PolicyDefinition) -> Result<()> {
        policy::Entity::insert(policy_row(policy))
            .exec(&self.connection)
            .await?;
        Ok(())
    }

    async fn find_policy(
        &self,
        project_id: Option<&str>,
        name_or_id: &str,
    ) -> Result<Option<PolicyDefinition>> {
        find_by_name_or_id!(&self.connection, policy, "policy", project_id, name_or_id)
            .map(policy_from)
            .transpose()
    }

    async fn list_policies(&self, query: &ObjectQuery) -> Result<Vec<PolicyDefinition>> {
        let mut select = policy::Entity::find();
        if let Some(project_id) = &query.project_id {
            select = select.filter(policy::Column::ProjectId.eq(project_id.as_str()));
        }
        if let Some(name) = &query.name {
            select = select.filter(policy::Column::Name.eq(name.as_str()));
        }
        if let Some(marker) = query.marker {
            select = select.filter(policy::Column::Id.gt(marker));
        }
        select
            .order_by_asc(policy::Column::Id)
            .limit(query.page_size())
            .all(&self.connection)
            .await?
            .into_iter()
            .map(policy_from)
            .collect()
    }

    async fn delete_policy(&self, id: Uuid) -> Result<()> {
        let transaction = self.connection.begin().await?;
        let bound = binding::Entity::find()
            .filter(binding::Column::PolicyId.eq(id))
            .count(&transaction)
            .await?;
        if bound > 0 {
            return Err(Error::Conflict(format!(
                "policy {id} is attached to {bound} cluster(s): detach it first"
            )));
        }
        policy::Entity::delete_by_id(id).exec(&transaction).await?;
        transaction.commit().await?;
        Ok(())
    }

    async fn create_cluster(
        &self,
        cluster: &Cluster,
        action: &ClusterAction,
        event: &ClusterEvent,
    ) -> Result<()> {
        let transaction = self.connection.begin().await?;
        cluster::Entity::insert(cluster_row(cluster))
            .exec(&transaction)
            .await?;
        action::Entity::insert(action_row(action))
            .exec(&transaction)
            .await?;
        event::Entity::insert(event_row(event))
            .exec(&transaction)
            .await?;
        transaction.commit().await?;
        Ok(())
    }

    async fn find_cluster(
        &self,
        project_id: Option<&str>,
        name_or_id: &str,
    ) -> Result<Option<Cluster>> {
        find_by_name_or_id!(&self.connection, cluster, "cluster", project_id, name_or_id)
            .map(cluster_from)
            .transpose()
    }

    async fn get_cluster(&self, id: Uuid) -> Result<Option<Cluster>> {
        cluster::Entity::find_by_id(id)
            .one(&self.connection)
            .await?
            .map(cluster_from)
            .transpose()
    }

    async fn list_clusters(&self, query: &ObjectQuery) -> Result<Vec<Cluster>> {
        let mut select = cluster::Entity::find();
        if let Some(project_id) = &query.project_id {
            select = select.filter(cluster::Column::ProjectId.eq(project_id.as_str()));
        }
        if let Some(name) = &query.name {
            select = select.filter(cluster::Column::Name.eq(name.as_str()));
        }
        if let Some(marker) = query.marker {
            select = select.filter(cluster::Column::Id.gt(marker));
        }
        select
            .order_by_asc(cluster::Column::Id)
            .limit(query.page_size())
            .all(&self.connection)
            .await?
            .into_iter()
            .map(cluster_from)
            .collect()
    }

    async fn save_cluster(&self, cluster: &Cluster) -> Result<()> {
        cluster::Entity::update(cluster_row(cluster))
            .exec(&self.connection)
            .await?;
        Ok(())
    }

    async fn delete_cluster(&self, id: Uuid) -> Result<()> {
        let transaction = self.connection.begin().await?;
        binding::Entity::delete_many()
            .filter(binding::Column::ClusterId.eq(id))
            .exec(&transaction)
            .await?;
        cluster::Entity::delete_by_id(id).exec(&transaction).await?;
        transaction.commit().await?;
        Ok(())
    }

    async fn take_node_indexes(&self, cluster_id: Uuid, count: i32) -> Result<i32> {
        // Increment first, then read: the increment is atomic on both
        // backends, so concurrent callers get disjoint ranges.
        let transaction = self.connection.begin().await?;
        cluster::Entity::update_many()
            .col_expr(
                cluster::Column::NextIndex,
                Expr::col(cluster::Column::NextIndex).add(count),
            )
            .filter(cluster::Column::Id.eq(cluster_id))
            .exec(&transaction)
            .await?;
        let row = cluster::Entity::find_by_id(cluster_id)
            .one(&transaction)
            .await?
            .ok_or_else(|| Error::NotFound(format!("cluster {cluster_id} not found")))?;
        transaction.commit().await?;
        Ok(row.next_index - count)
    }

    async fn find_node(&self, project_id: Option<&str>, name_or_id: &str) -> Result<Option<Node>> {
        find_by_name_or_id!(&self.connection, node, "node", project_id, name_or_id)
            .map(node_from)
            .transpose()
    }

    async fn get_node(&self, id: Uuid) -> Result<Option<Node>> {
        node::Entity::find_by_id(id)
            .one(&self.connection)
            .await?
            .map(node_from)
            .transpose()
    }

    async fn list_nodes(&self, query: &NodeQuery) -> Result<Vec<Node>> {
        let mut select = node::Entity::find();
        if let Some(project_id) = &query.project_id {
            select = select.filter(node::Column::ProjectId.eq(project_id.as_str()));
        }
        if let Some(cluster_id) = query.cluster_id {
            select = select.filter(node::Column::ClusterId.eq(cluster_id));
        }
        if let Some(marker) = query.marker {
            select = select.filter(node::Column::Id.gt(marker));
        }
        let page = ObjectQuery {
            limit: query.limit,
            ..ObjectQuery::default()
        }
        .page_size();
        select
            .order_by_asc(node::Column::Id)
            .limit(page)
            .all(&self.connection)
            .await?
            .into_iter()
            .map(node_from)
            .collect()
    }

    async fn save_node(&self, node: &Node) -> Result<()> {
        let mut columns = vec![
            node::Column::Name,
            node::Column::ClusterId,
            node::Column::ProfileId,
            node::Column::NodeIndex,
            node::Column::Role,
            node::Column::Status,
            node::Column::StatusReason,
            node::Column::PhysicalId,
            node::Column::Tainted,
            node::Column::Metadata,
            node::Column::UpdatedAt,
        ];
        columns.shrink_to_fit();
        node::Entity::insert(node_row(node))
            .on_conflict(
                OnConflict::column(node::Column::Id)
                    .update_columns(columns)
                    .to_owned(),
            )
            .exec(&self.connection)
            .await?;
        Ok(())
    }

    async fn delete_node(&self, id: Uuid) -> Result<()> {
        node::Entity::delete_by_id(id)
            .exec(&self.connection)
            .await?;
        Ok(())
    }

    async fn bind_policy(&self, binding: &PolicyBinding) -> Result<()> {
        binding::Entity::insert(binding_row(binding))
            .on_conflict(
                OnConflict::columns([binding::Column::ClusterId, binding::Column::PolicyId])
                    .update_columns([binding::Column::Priority, binding::Column::Enabled])
                    .to_owned(),
            )
            .exec(&self.connection)
            .await?;
        Ok(())
    }

    async fn unbind_policy(&self, cluster_id: Uuid, policy_id: Uuid) -> Result<bool> {
        let result = binding::Entity::delete_many()
            .filter(binding::Column::ClusterId.eq(cluster_id))
            .filter(binding::Column::PolicyId.eq(policy_id))
            .exec(&self.connection)
            .await?;
        Ok(result.rows_affected > 0)
    }

    async fn list_bindings(
        &self,
        cluster_id: Uuid,
    ) -> Result<Vec<(PolicyBinding, PolicyDefinition)>> {
        let rows = binding::Entity::find()
            .filter(binding::Column::ClusterId.eq(cluster_id))
            .order_by_desc(binding::Column::Priority)
            .all(&self.connection)
            .await?;
        let mut bindings = Vec::with_capacity(rows.len());
        for row in rows {
            if let Some(policy) = policy::Entity::find_by_id(row.policy_id)
                .one(&self.connection)
                .await?
            {
                bindings.push((binding_from(row), policy_from(policy)?));
            }
        }
        Ok(bindings)
    }

    async fn insert_actions(
        &self,
        actions: &[ClusterAction],
        events: &[ClusterEvent],
    ) -> Result<()> {
        sql_actions::insert_actions(&self.connection, actions, events).await
    }

    async fn get_action(&self, id: Uuid) -> Result<Option<ClusterAction>> {
        action::Entity::find_by_id(id)
            .one(&self.connection)
            .await?
            .map(action_from)
            .transpose()
    }

    async fn list_actions(&self, query: &ActionQuery) -> Result<Vec<ClusterAction>> {
        sql_actions::list_actions(&self.connection, query).await
    }

    async fn claim_ready_actions(
        &self,
        engine_id: Uuid,
        lease_until: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<ClusterAction>> {
        sql_actions::claim_ready_actions(&self.connection, engine_id, lease_until, limit).await
    }

    async fn renew_action_leases(
        &self,
        engine_id: Uuid,
        lease_until: DateTime<Utc>,
    ) -> Result<u64> {
        sql_actions::renew_action_leases(&self.connection, engine_id, lease_until).await
    }

    async fn finish_action(
        &self,
        action: &ClusterAction,
        engine_id: Uuid,
        status: ActionStatus,
        reason: &str,
        events: &[ClusterEvent],
    ) -> Result<bool> {
        sql_actions::finish_action(&self.connection, action, engine_id, status, reason, events)
            .await
    }

    async fn start_waiting_on_children(
        &self,
        parent: &ClusterAction,
        engine_id: Uuid,
        children: &[ClusterAction],
        cluster: Option<&Cluster>,
        nodes: &[Node],
        events: &[ClusterEvent],
    ) -> Result<bool> {
        sql_actions::start_waiting_on_children(
            &self.connection,
            parent,
            engine_id,
            children,
            cluster,
            nodes,
            events,
        )
        .await
    }

    async fn make_ready(
        &self,
        action_id: Uuid,
        from: ActionStatus,
        outcome: Option<(LifecycleOutcome, &str)>,
        event: Option<&ClusterEvent>,
    ) -> Result<ReadyOutcome> {
        sql_actions::make_ready(&self.connection, action_id, from, outcome, event).await
    }

    async fn expire_waiting<'a>(
        &'a self,
        ids: &[Uuid],
        detail: &str,
        event: &'a (dyn for<'b> Fn(&'b ClusterAction) -> ClusterEvent + Send + Sync + 'a),
    ) -> Result<(Vec<ClusterAction>, Vec<ClusterAction>)> {
        sql_actions::expire_waiting(&self.connection, ids, detail, event).await
    }

    async fn mark_hooks_recorded(&self, action_ids: &[Uuid]) -> Result<()> {
        sql_actions::mark_hooks_recorded(&self.connection, action_ids).await
    }

    async fn list_unrecorded_hooks(&self, limit: u64) -> Result<Vec<ClusterAction>> {
        sql_actions::list_unrecorded_hooks(&self.connection, limit).await
    }

    async fn finish_parent_if_done(&self, parent_id: Uuid) -> Result<Option<ClusterAction>> {
        sql_actions::finish_parent_if_done(&self.connection, parent_id).await
    }

    async fn last_success(
        &self,
        cluster_id: Uuid,
        kind: ActionKind,
    ) -> Result<Option<DateTime<Utc>>> {
        sql_actions::last_success(&self.connection, cluster_id, kind).await
    }

    async fn list_waiting_parents(&self, limit: u64) -> Result<Vec<ClusterAction>> {
        sql_actions::list_by_status(&self.connection, ActionStatus::Waiting, limit).await
    }

    async fn list_expired_leases(
        &self,
        now: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<ClusterAction>> {
        sql_actions::list_expired_leases(&self.connection, now, limit).await
    }

    async fn recover_expired_action(
        &self,
        action: &ClusterAction,
        now: DateTime<Utc>,
        requeue: bool,
        event: &ClusterEvent,
    ) -> Result<bool> {
        sql_actions::recover_expired_action(&self.connection, action, now, requeue, event).await
    }

    async fn record_events(&self, events: &[ClusterEvent]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        event::Entity::insert_many(events.iter().map(event_row))
            .exec(&self.connection)
            .await?;
        Ok(())
    }

    async fn list_events(&self, query: &EventQuery) -> Result<Vec<ClusterEvent>> {
        let mut select = event::Entity::find();
        if let Some(project_id) = &query.project_id {
            select = select.filter(event::Column::ProjectId.eq(project_id.as_str()));
        }
        if let Some(cluster_id) = query.cluster_id {
            select = select.filter(event::Column::ClusterId.eq(cluster_id));
        }
        if let Some(obj_id) = &query.obj_id {
            select = select.filter(event::Column::ObjId.eq(obj_id.as_str()));
        }
        if let Some(marker) = query.marker {
            select = select.filter(event::Column::Id.gt(marker));
        }
        let page = ObjectQuery {
            limit: query.limit,
            ..ObjectQuery::default()
        }
        .page_size();
        Ok(select
            .order_by_asc(event::Column::Id)
            .limit(page)
            .all(&self.connection)
            .await?
            .into_iter()
            .map(event_from)
            .collect())
    }
}
