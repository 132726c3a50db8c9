//! [`ClusterStore`] on sea-orm: profiles, policies, clusters, nodes,
//! bindings and events. The action methods are in `sql_actions`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait,
    FromQueryResult, PaginatorTrait, PrimaryKeyTrait, QueryFilter, QueryOrder, QueryResult,
    QuerySelect, Select, TryGetError,
};
use uuid::Uuid;

use super::changes::{begin_write, take_node_indexes_in};
use super::convert::*;
use super::entity::{action, binding, cluster, event, node, policy, profile};
use super::lookup::{NamedObjects, find_by_name_or_id};
use super::{
    ActionQuery, ChangeOutcome, ClusterChange, ClusterStore, EventQuery, NodeDetails, NodeQuery,
    ObjectQuery, ReadyOutcome, Settle, sql_actions, sql_lists, sql_runs, sql_updates,
};
use crate::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterAction, ClusterEvent, Fence, LifecycleOutcome, Node,
    PolicyBinding, PolicyDefinition, Profile,
};
use crate::error::{Error, Result};
use ember_runtime::database::Columns;

pub struct SqlClusterStore {
    /// Every write, and reads inside a write's transaction.
    pub(super) connection: DatabaseConnection,
    /// Reads outside transactions (see `ember_runtime::database::connect_reader`).
    pub(super) reader: ember_runtime::database::Reader,
}

impl SqlClusterStore {
    /// One connection (pool) for reads and writes.
    pub fn new(connection: DatabaseConnection) -> Self {
        SqlClusterStore {
            reader: ember_runtime::database::Reader::shared(connection.clone()),
            connection,
        }
    }

    /// Writes through `connection`, reads through `reader`.
    pub fn with_reader(
        connection: DatabaseConnection,
        reader: impl Into<ember_runtime::database::Reader>,
    ) -> Self {
        SqlClusterStore {
            connection,
            reader: reader.into(),
        }
    }
}

impl NamedObjects for profile::Entity {
    const ID: profile::Column = profile::Column::Id;
    const NAME: profile::Column = profile::Column::Name;
    const PROJECT_ID: profile::Column = profile::Column::ProjectId;
}

impl NamedObjects for policy::Entity {
    const ID: policy::Column = policy::Column::Id;
    const NAME: policy::Column = policy::Column::Name;
    const PROJECT_ID: policy::Column = policy::Column::ProjectId;
}

impl NamedObjects for cluster::Entity {
    const ID: cluster::Column = cluster::Column::Id;
    const NAME: cluster::Column = cluster::Column::Name;
    const PROJECT_ID: cluster::Column = cluster::Column::ProjectId;
}

impl NamedObjects for node::Entity {
    const ID: node::Column = node::Column::Id;
    const NAME: node::Column = node::Column::Name;
    const PROJECT_ID: node::Column = node::Column::ProjectId;
}

/// One page of [`ObjectQuery`]: the project's rows with one of its names,
/// narrowed by what `narrow` adds (types, statuses), in its order (see
/// `sql_lists`).
async fn list_page<E: NamedObjects, T>(
    reader: &ember_runtime::database::Reader,
    query: &ObjectQuery,
    narrow: impl FnOnce(Select<E>) -> Select<E>,
    column: impl Fn(&str) -> Option<E::Column>,
    decode: fn(E::Model) -> Result<T>,
) -> Result<Vec<T>>
where
    E::Model: Sync,
{
    list_select(reader, query, narrow, column)
        .await?
        .all(reader)
        .await?
        .into_iter()
        .map(decode)
        .collect()
}

/// The object `name_or_id` names (see [`find_by_name_or_id`]), decoded.
async fn find_decoded<E: NamedObjects, T>(
    reader: &ember_runtime::database::Reader,
    project_id: Option<&str>,
    name_or_id: &str,
    decode: fn(E::Model) -> Result<T>,
) -> Result<Option<T>> {
    find_by_name_or_id::<E>(reader, project_id, name_or_id)
        .await?
        .map(decode)
        .transpose()
}

/// The row with `id`, decoded.
async fn get_decoded<E: EntityTrait, T>(
    reader: &ember_runtime::database::Reader,
    id: Uuid,
    decode: fn(E::Model) -> Result<T>,
) -> Result<Option<T>>
where
    Uuid: Into<<E::PrimaryKey as PrimaryKeyTrait>::ValueType>,
{
    E::find_by_id(id).one(reader).await?.map(decode).transpose()
}

/// What creating a cluster or a node records beside it: its action and
/// its event, in the creation's transaction.
async fn insert_action_and_event(
    transaction: &impl ConnectionTrait,
    action: &ClusterAction,
    event: &ClusterEvent,
) -> Result<()> {
    action::Entity::insert(action_row(action))
        .exec_without_returning(transaction)
        .await?;
    event::Entity::insert(event_row(event))
        .exec_without_returning(transaction)
        .await?;
    Ok(())
}

/// The query of [`list_page`], for a caller reading more than the
/// entity's columns.
async fn list_select<E: NamedObjects>(
    reader: &ember_runtime::database::Reader,
    query: &ObjectQuery,
    narrow: impl FnOnce(Select<E>) -> Select<E>,
    column: impl Fn(&str) -> Option<E::Column>,
) -> Result<Select<E>>
where
    E::Model: Sync,
{
    let mut select = E::find();
    if let Some(project_id) = &query.project_id {
        select = select.filter(E::PROJECT_ID.eq(project_id.as_str()));
    }
    select = narrow(sql_lists::any_of(select, E::NAME, &query.names));
    sql_lists::ordered_select(
        reader,
        select,
        &query.sort,
        column,
        E::ID,
        query.marker,
        query.page_size(),
    )
    .await
}

/// On SQLite, a cluster row's member ids, joined from the chunks its
/// triggers keep (see [`sql_updates::member_ids_of`]).
const MEMBERS_OF_ROW: &str = "COALESCE((SELECT group_concat(ids, '' ORDER BY chunk) \
     FROM cluster_member_chunks WHERE cluster_member_chunks.cluster_id = clusters.id), '')";

/// The columns [`ClusterWithMembers`] reads a cluster from, each by its
/// name (see [`cluster_at`]); the member ids follow them
/// ([`MEMBER_IDS_AT`]).
const CLUSTER_COLUMNS: [cluster::Column; 19] = [
    cluster::Column::Id,
    cluster::Column::Name,
    cluster::Column::ProfileId,
    cluster::Column::MinSize,
    cluster::Column::MaxSize,
    cluster::Column::DesiredCapacity,
    cluster::Column::Status,
    cluster::Column::StatusReason,
    cluster::Column::Metadata,
    cluster::Column::NextIndex,
    cluster::Column::Timeout,
    cluster::Column::Config,
    cluster::Column::ProjectId,
    cluster::Column::UserId,
    cluster::Column::CreatedAt,
    cluster::Column::UpdatedAt,
    cluster::Column::LockActionId,
    cluster::Column::MaintenanceLock,
    cluster::Column::LockExpiresAt,
];

/// Where `column` lies in a row read with [`CLUSTER_COLUMNS`], found at
/// compile time (every call is in a `const` block), as
/// `store::sql::stack_rows::listed_at` finds a stack's: a column left out
/// of the list fails the build.
const fn cluster_at(column: cluster::Column) -> usize {
    let mut index = 0;
    while CLUSTER_COLUMNS[index] as usize != column as usize {
        index += 1;
    }
    index
}

/// Where a [`ClusterWithMembers`] row holds its member ids: after the
/// cluster's columns.
const MEMBER_IDS_AT: usize = CLUSTER_COLUMNS.len();

/// A cluster row with its member ids (SQLite's, [`MEMBERS_OF_ROW`]).
struct ClusterWithMembers {
    cluster: cluster::Model,
    member_ids: String,
}

/// Read with [`CLUSTER_COLUMNS`], each column by its name, and then
/// `member_ids`. The derived reader looks each column up by name in every
/// row, a tenth of a 200-cluster list's CPU; here each name is resolved
/// once, at compile time.
impl FromQueryResult for ClusterWithMembers {
    fn from_query_result(row: &QueryResult, prefix: &str) -> std::result::Result<Self, DbErr> {
        Ok(Self::from_query_result_nullable(row, prefix)?)
    }

    fn from_query_result_nullable(
        row: &QueryResult,
        _prefix: &str,
    ) -> std::result::Result<Self, TryGetError> {
        use cluster::Column;
        let row = Columns::from(row);
        Ok(ClusterWithMembers {
            cluster: cluster::Model {
                id: row.get(const { cluster_at(Column::Id) })?,
                name: row.get(const { cluster_at(Column::Name) })?,
                profile_id: row.get(const { cluster_at(Column::ProfileId) })?,
                min_size: row.get(const { cluster_at(Column::MinSize) })?,
                max_size: row.get(const { cluster_at(Column::MaxSize) })?,
                desired_capacity: row.get(const { cluster_at(Column::DesiredCapacity) })?,
                status: row.get(const { cluster_at(Column::Status) })?,
                status_reason: row.get(const { cluster_at(Column::StatusReason) })?,
                metadata: row.get(const { cluster_at(Column::Metadata) })?,
                next_index: row.get(const { cluster_at(Column::NextIndex) })?,
                timeout: row.get(const { cluster_at(Column::Timeout) })?,
                config: row.get(const { cluster_at(Column::Config) })?,
                project_id: row.get(const { cluster_at(Column::ProjectId) })?,
                user_id: row.get(const { cluster_at(Column::UserId) })?,
                created_at: row.get(const { cluster_at(Column::CreatedAt) })?,
                updated_at: row.get(const { cluster_at(Column::UpdatedAt) })?,
                lock_action_id: row.get(const { cluster_at(Column::LockActionId) })?,
                maintenance_lock: row.get(const { cluster_at(Column::MaintenanceLock) })?,
                lock_expires_at: row.get(const { cluster_at(Column::LockExpiresAt) })?,
            },
            member_ids: row.get(MEMBER_IDS_AT)?,
        })
    }
}

#[async_trait]
impl ClusterStore for SqlClusterStore {
    async fn insert_profile(&self, profile: &Profile) -> Result<()> {
        profile::Entity::insert(profile_row(profile))
            .exec_without_returning(&self.connection)
            .await?;
        Ok(())
    }

    async fn find_profile(
        &self,
        project_id: Option<&str>,
        name_or_id: &str,
    ) -> Result<Option<Profile>> {
        find_decoded::<profile::Entity, _>(&self.reader, project_id, name_or_id, profile_from).await
    }

    async fn get_profile(&self, id: Uuid) -> Result<Option<Profile>> {
        get_decoded::<profile::Entity, _>(&self.reader, id, profile_from).await
    }

    async fn list_profiles(&self, query: &ObjectQuery) -> Result<Vec<Profile>> {
        list_page::<profile::Entity, _>(
            &self.reader,
            query,
            |select| sql_lists::any_of(select, profile::Column::TypeName, &query.types),
            sql_lists::profile_column,
            profile_from,
        )
        .await
    }

    async fn delete_profile(&self, id: Uuid) -> Result<()> {
        let transaction = begin_write(&self.connection).await?;
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
            .exec_without_returning(&self.connection)
            .await?;
        Ok(())
    }

    async fn find_policy(
        &self,
        project_id: Option<&str>,
        name_or_id: &str,
    ) -> Result<Option<PolicyDefinition>> {
        find_decoded::<policy::Entity, _>(&self.reader, project_id, name_or_id, policy_from).await
    }

    async fn list_policies(&self, query: &ObjectQuery) -> Result<Vec<PolicyDefinition>> {
        list_page::<policy::Entity, _>(
            &self.reader,
            query,
            |select| sql_lists::any_of(select, policy::Column::TypeName, &query.types),
            sql_lists::policy_column,
            policy_from,
        )
        .await
    }

    async fn delete_policy(&self, id: Uuid) -> Result<()> {
        let transaction = begin_write(&self.connection).await?;
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
        let transaction = begin_write(&self.connection).await?;
        cluster::Entity::insert(cluster_row(cluster))
            .exec_without_returning(&transaction)
            .await?;
        insert_action_and_event(&transaction, action, event).await?;
        transaction.commit().await?;
        Ok(())
    }

    async fn find_cluster(
        &self,
        project_id: Option<&str>,
        name_or_id: &str,
    ) -> Result<Option<Cluster>> {
        find_decoded::<cluster::Entity, _>(&self.reader, project_id, name_or_id, cluster_from).await
    }

    async fn get_cluster(&self, id: Uuid) -> Result<Option<Cluster>> {
        get_decoded::<cluster::Entity, _>(&self.reader, id, cluster_from).await
    }

    async fn list_clusters(&self, query: &ObjectQuery) -> Result<Vec<Cluster>> {
        list_page::<cluster::Entity, _>(
            &self.reader,
            query,
            |select| sql_lists::any_of(select, cluster::Column::Status, &query.statuses),
            sql_lists::cluster_column,
            cluster_from,
        )
        .await
    }

    async fn list_clusters_with_members(
        &self,
        query: &ObjectQuery,
    ) -> Result<Vec<(Cluster, Vec<Uuid>)>> {
        let narrow = |select| sql_lists::any_of(select, cluster::Column::Status, &query.statuses);
        if self.reader.get_database_backend() != DbBackend::Sqlite {
            let clusters = self.list_clusters(query).await?;
            let ids: Vec<Uuid> = clusters.iter().map(|cluster| cluster.id).collect();
            let mut members = self.member_ids_of(&ids).await?;
            return Ok(clusters
                .into_iter()
                .map(|cluster| {
                    let ids = members.remove(&cluster.id).unwrap_or_default();
                    (cluster, ids)
                })
                .collect());
        }
        // One query: the page's rows carry their member ids.
        list_select::<cluster::Entity>(&self.reader, query, narrow, sql_lists::cluster_column)
            .await?
            .select_only()
            .columns(CLUSTER_COLUMNS)
            .column_as(Expr::cust(MEMBERS_OF_ROW), "member_ids")
            .into_model::<ClusterWithMembers>()
            .all(&self.reader)
            .await?
            .into_iter()
            .map(|row| {
                let members = sql_updates::parse_member_ids(row.cluster.id, &row.member_ids)?;
                Ok((cluster_from(row.cluster)?, members))
            })
            .collect()
    }

    async fn cluster_lock_holder(&self, cluster_id: Uuid) -> Result<Option<Uuid>> {
        Ok(cluster::Entity::find_by_id(cluster_id)
            .one(&self.reader)
            .await?
            .and_then(|row| row.lock_action_id))
    }

    async fn change_cluster_lock(
        &self,
        cluster_id: Uuid,
        expected: Option<&crate::domain::cluster::ClusterLock>,
        next: Option<&crate::domain::cluster::ClusterLock>,
        events: &[ClusterEvent],
    ) -> Result<bool> {
        super::sql_locks::change_cluster_lock(&self.connection, cluster_id, expected, next, events)
            .await
    }

    async fn expired_cluster_locks(&self, now: DateTime<Utc>, limit: u64) -> Result<Vec<Cluster>> {
        super::sql_locks::expired_cluster_locks(&self.connection, now, limit).await
    }

    async fn next_cluster_lock_expiry(&self) -> Result<Option<DateTime<Utc>>> {
        super::sql_locks::next_cluster_lock_expiry(&self.connection).await
    }

    async fn lift_expired_cluster_locks(&self, lifts: &[super::ExpiredLift]) -> Result<Vec<Uuid>> {
        super::sql_locks::lift_expired_cluster_locks(&self.connection, lifts).await
    }

    async fn take_node_indexes(&self, cluster_id: Uuid, count: i32) -> Result<i32> {
        take_node_indexes_in(&self.connection, cluster_id, count).await
    }

    async fn create_node(
        &self,
        node: &Node,
        action: &ClusterAction,
        event: &ClusterEvent,
    ) -> Result<Node> {
        let transaction = begin_write(&self.connection).await?;
        let mut node = node.clone();
        if let Some(cluster_id) = node.cluster_id {
            node.index = take_node_indexes_in(&transaction, cluster_id, 1).await?;
        }
        node::Entity::insert(node_row(&node))
            .exec_without_returning(&transaction)
            .await?;
        insert_action_and_event(&transaction, action, event).await?;
        transaction.commit().await?;
        Ok(node)
    }

    async fn find_node(&self, project_id: Option<&str>, name_or_id: &str) -> Result<Option<Node>> {
        find_decoded::<node::Entity, _>(&self.reader, project_id, name_or_id, node_from).await
    }

    async fn get_node(&self, id: Uuid) -> Result<Option<Node>> {
        get_decoded::<node::Entity, _>(&self.reader, id, node_from).await
    }

    async fn get_nodes(&self, ids: &[Uuid]) -> Result<Vec<Node>> {
        let mut nodes = Vec::with_capacity(ids.len());
        // In chunks: well under every backend's limit on bound values.
        for chunk in ids.chunks(500) {
            for row in node::Entity::find()
                .filter(node::Column::Id.is_in(chunk.iter().copied()))
                .all(&self.reader)
                .await?
            {
                nodes.push(node_from(row)?);
            }
        }
        Ok(nodes)
    }

    async fn list_cluster_nodes(&self, cluster_id: Uuid) -> Result<Vec<Node>> {
        node::Entity::find()
            .filter(node::Column::ClusterId.eq(cluster_id))
            .order_by_asc(node::Column::NodeIndex)
            .order_by_asc(node::Column::Id)
            .all(&self.reader)
            .await?
            .into_iter()
            .map(node_from)
            .collect()
    }

    async fn list_nodes(&self, query: &NodeQuery) -> Result<Vec<Node>> {
        let mut select = node::Entity::find();
        if let Some(project_id) = &query.project_id {
            select = select.filter(node::Column::ProjectId.eq(project_id.as_str()));
        }
        if let Some(cluster_id) = query.cluster_id {
            select = select.filter(node::Column::ClusterId.eq(cluster_id));
        }
        select = sql_lists::any_of(select, node::Column::Name, &query.names);
        select = sql_lists::any_of(select, node::Column::Status, &query.statuses);
        let page = ObjectQuery {
            limit: query.limit,
            ..ObjectQuery::default()
        }
        .page_size();
        sql_lists::ordered_page(
            &self.reader,
            select,
            &query.sort,
            sql_lists::node_column,
            node::Column::Id,
            query.marker,
            page,
        )
        .await?
        .into_iter()
        .map(node_from)
        .collect()
    }

    async fn update_node_details(&self, id: Uuid, details: NodeDetails) -> Result<Option<Node>> {
        let mut update = node::Entity::update_many().col_expr(
            node::Column::UpdatedAt,
            Expr::value(ember_runtime::time::now()),
        );
        if let Some(name) = details.name {
            update = update.col_expr(node::Column::Name, Expr::value(name));
        }
        if let Some(role) = details.role {
            update = update.col_expr(node::Column::Role, Expr::value(role));
        }
        if let Some(tainted) = details.tainted {
            update = update.col_expr(node::Column::Tainted, Expr::value(tainted));
        }
        if let Some(protected) = details.protected {
            update = update.col_expr(node::Column::Protected, Expr::value(protected));
        }
        if let Some(metadata) = details.metadata {
            update = update.col_expr(
                node::Column::Metadata,
                Expr::value(serde_json::Value::Object(metadata)),
            );
        }
        update
            .filter(node::Column::Id.eq(id))
            .exec_with_returning(&self.connection)
            .await?
            .into_iter()
            .next()
            .map(node_from)
            .transpose()
    }

    async fn list_bindings(
        &self,
        cluster_id: Uuid,
    ) -> Result<Vec<(PolicyBinding, PolicyDefinition)>> {
        sql_updates::bindings_of(&self.reader, &[cluster_id]).await
    }

    async fn clusters_with_health_policies(&self) -> Result<Vec<Uuid>> {
        sql_updates::clusters_with_policy_type(&self.reader, "senlin.policy.health-").await
    }

    async fn insert_actions(
        &self,
        actions: &[ClusterAction],
        events: &[ClusterEvent],
    ) -> Result<()> {
        sql_actions::insert_actions(&self.connection, actions, events).await
    }

    async fn get_action(&self, id: Uuid) -> Result<Option<ClusterAction>> {
        get_decoded::<action::Entity, _>(&self.reader, id, action_from).await
    }

    async fn list_actions(&self, query: &ActionQuery) -> Result<Vec<ClusterAction>> {
        sql_actions::list_actions(&self.reader, query).await
    }

    async fn claim_ready_actions(
        &self,
        engine_id: Uuid,
        lease_until: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<ClusterAction>> {
        sql_runs::claim_ready_actions(&self.connection, engine_id, lease_until, limit).await
    }

    async fn renew_action_leases(
        &self,
        engine_id: Uuid,
        action_ids: &[Uuid],
        lease_until: DateTime<Utc>,
    ) -> Result<u64> {
        sql_runs::renew_action_leases(&self.connection, engine_id, action_ids, lease_until).await
    }

    async fn still_owned(&self, fence: &Fence) -> Result<bool> {
        sql_runs::still_owned(&self.connection, fence).await
    }

    async fn apply_cluster_change(
        &self,
        fence: &Fence,
        change: &ClusterChange,
    ) -> Result<Option<ChangeOutcome>> {
        sql_runs::apply_cluster_change(&self.connection, fence, change).await
    }

    async fn finish_action(
        &self,
        action: &ClusterAction,
        status: ActionStatus,
        reason: &str,
        change: &ClusterChange,
        settle: &Settle,
    ) -> Result<bool> {
        sql_runs::finish_action(&self.connection, action, status, reason, change, settle).await
    }

    async fn finish_cluster_delete(
        &self,
        action: &ClusterAction,
        reason: &str,
        events: &[ClusterEvent],
    ) -> Result<bool> {
        sql_runs::finish_cluster_delete(&self.connection, action, reason, events).await
    }

    async fn start_waiting_on_children(
        &self,
        parent: &ClusterAction,
        children: &[ClusterAction],
        change: &ClusterChange,
    ) -> Result<bool> {
        sql_runs::start_waiting_on_children(&self.connection, parent, children, change).await
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

    async fn continue_launch(
        &self,
        action_id: Uuid,
        detail: &str,
        reason: &str,
        node_reason: &str,
        events: &[ClusterEvent],
    ) -> Result<ReadyOutcome> {
        sql_actions::continue_launch(
            &self.connection,
            action_id,
            detail,
            reason,
            node_reason,
            events,
        )
        .await
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
        sql_actions::list_unrecorded_hooks(&self.reader, limit).await
    }

    async fn finish_parent_if_done(&self, parent_id: Uuid) -> Result<Option<ClusterAction>> {
        sql_runs::finish_parent_if_done(&self.connection, &self.reader, parent_id).await
    }

    async fn update_profile(
        &self,
        id: Uuid,
        name: Option<String>,
        metadata: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> Result<Option<Profile>> {
        sql_updates::update_profile(&self.connection, id, name, metadata).await
    }

    async fn member_ids_of(
        &self,
        cluster_ids: &[Uuid],
    ) -> Result<std::collections::HashMap<Uuid, Vec<Uuid>>> {
        sql_updates::member_ids_of(&self.reader, cluster_ids).await
    }

    async fn profile_names(&self, ids: &[Uuid]) -> Result<std::collections::HashMap<Uuid, String>> {
        sql_updates::profile_names(&self.reader, ids).await
    }

    async fn bindings_of(
        &self,
        cluster_ids: &[Uuid],
    ) -> Result<Vec<(PolicyBinding, PolicyDefinition)>> {
        sql_updates::bindings_of(&self.reader, cluster_ids).await
    }

    async fn update_policy(&self, id: Uuid, name: String) -> Result<Option<PolicyDefinition>> {
        sql_updates::update_policy(&self.connection, id, name).await
    }

    async fn cancel_action<'a>(
        &'a self,
        id: Uuid,
        event: &'a (dyn for<'b> Fn(&'b ClusterAction) -> ClusterEvent + Send + Sync + 'a),
    ) -> Result<Option<std::result::Result<ClusterAction, ClusterAction>>> {
        sql_updates::cancel_action(&self.connection, id, event).await
    }

    async fn last_success(
        &self,
        cluster_id: Uuid,
        kind: ActionKind,
    ) -> Result<Option<DateTime<Utc>>> {
        sql_actions::last_success(&self.reader, cluster_id, kind).await
    }

    async fn list_waiting_parents(&self, limit: u64) -> Result<Vec<ClusterAction>> {
        sql_actions::list_by_status(&self.reader, ActionStatus::Waiting, limit).await
    }

    async fn list_expired_leases(
        &self,
        now: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<ClusterAction>> {
        sql_runs::list_expired_leases(&self.reader, now, limit).await
    }

    async fn recover_expired_action(
        &self,
        action: &ClusterAction,
        now: DateTime<Utc>,
        requeue: bool,
        event: &ClusterEvent,
    ) -> Result<bool> {
        sql_runs::recover_expired_action(&self.connection, action, now, requeue, event).await
    }

    async fn record_events(&self, events: &[ClusterEvent]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        event::Entity::insert_many(events.iter().map(event_row))
            .exec_without_returning(&self.connection)
            .await?;
        Ok(())
    }

    async fn mark_node_machine_failed(
        &self,
        physical_id: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<Node>> {
        let active = crate::domain::cluster::NodeStatus::Active.as_str();
        let transaction = begin_write(&self.connection).await?;
        let Some(row) = node::Entity::find()
            .filter(node::Column::PhysicalId.eq(physical_id))
            .filter(node::Column::Status.eq(active))
            .one(&transaction)
            .await?
        else {
            return Ok(None);
        };
        let written = node::Entity::update_many()
            .col_expr(
                node::Column::Status,
                Expr::value(crate::domain::cluster::NodeStatus::Error.as_str()),
            )
            .col_expr(node::Column::StatusReason, Expr::value(reason))
            .col_expr(node::Column::UpdatedAt, Expr::value(at))
            .filter(node::Column::Id.eq(row.id))
            .filter(node::Column::Status.eq(active))
            .exec(&transaction)
            .await?;
        if written.rows_affected != 1 {
            return Ok(None);
        }
        let node = node_from(row)?;
        let event = ClusterEvent::new(
            "NODE",
            node.id,
            &node.name,
            node.cluster_id,
            "NODE_CHECK",
            "ERROR",
            reason.to_owned(),
            &node.project_id,
            &node.user_id,
        );
        event::Entity::insert(event_row(&event))
            .exec_without_returning(&transaction)
            .await?;
        transaction.commit().await?;
        Ok(Some(node))
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
        select = sql_lists::any_of(select, event::Column::ObjType, &query.obj_types);
        select = sql_lists::any_of(select, event::Column::ObjName, &query.obj_names);
        select = sql_lists::any_of(select, event::Column::Action, &query.actions);
        select = sql_lists::any_of(select, event::Column::Level, &query.levels);
        let page = ObjectQuery {
            limit: query.limit,
            ..ObjectQuery::default()
        }
        .page_size();
        Ok(sql_lists::ordered_page(
            &self.reader,
            select,
            &query.sort,
            sql_lists::event_column,
            event::Column::Id,
            query.marker,
            page,
        )
        .await?
        .into_iter()
        .map(event_from)
        .collect())
    }

    async fn adopt_node(
        &self,
        profile: &Profile,
        node: &Node,
        event: &ClusterEvent,
    ) -> Result<Node> {
        super::sql_adopt::adopt_node(&self.connection, profile, node, event).await
    }

    async fn get_event(&self, project_id: Option<&str>, id: Uuid) -> Result<Option<ClusterEvent>> {
        let mut select = event::Entity::find_by_id(id);
        if let Some(project_id) = project_id {
            select = select.filter(event::Column::ProjectId.eq(project_id));
        }
        Ok(select.one(&self.reader).await?.map(event_from))
    }
}
