//! Changes to clustering objects made by a request, not by a run: renaming
//! profiles and policies, and cancelling an action that has not started;
//! and the batched reads behind cluster views (members, profile names and
//! bindings of many clusters in a fixed number of queries).

use sea_orm::sea_query::Expr;
use std::collections::HashMap;

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Statement,
};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::changes::{begin_write, insert_events};
use super::convert::{action_from, binding_from, policy_from, profile_from};
use super::entity::{action, binding, cluster, node, policy, profile};
use crate::domain::cluster::{
    ActionKind, ActionStatus, ClusterAction, ClusterEvent, NodeStatus, PolicyBinding,
    PolicyDefinition, Profile,
};
use crate::error::{Error, Result};

pub async fn update_profile(
    connection: &DatabaseConnection,
    id: Uuid,
    name: Option<String>,
    metadata: Option<Map<String, Value>>,
) -> Result<Option<Profile>> {
    let mut update = profile::Entity::update_many().col_expr(
        profile::Column::UpdatedAt,
        Expr::value(Some(ember_runtime::time::now())),
    );
    if let Some(name) = name {
        update = update.col_expr(profile::Column::Name, Expr::value(name));
    }
    if let Some(metadata) = metadata {
        update = update.col_expr(
            profile::Column::Metadata,
            Expr::value(Value::Object(metadata)),
        );
    }
    update
        .filter(profile::Column::Id.eq(id))
        .exec_with_returning(connection)
        .await?
        .into_iter()
        .next()
        .map(profile_from)
        .transpose()
}

pub async fn update_policy(
    connection: &DatabaseConnection,
    id: Uuid,
    name: String,
) -> Result<Option<PolicyDefinition>> {
    policy::Entity::update_many()
        .col_expr(
            policy::Column::UpdatedAt,
            Expr::value(Some(ember_runtime::time::now())),
        )
        .col_expr(policy::Column::Name, Expr::value(name))
        .filter(policy::Column::Id.eq(id))
        .exec_with_returning(connection)
        .await?
        .into_iter()
        .next()
        .map(policy_from)
        .transpose()
}

/// The statuses an action may be cancelled from: it has not started
/// running (INIT, READY) or it waits for a lifecycle completion.
pub const CANCELLABLE: [ActionStatus; 3] = [
    ActionStatus::Init,
    ActionStatus::Ready,
    ActionStatus::WaitingLifecycleCompletion,
];

/// Cancels the action if it is still cancellable, in one transaction: it
/// becomes CANCELLED, the cluster lock it holds is released, and a
/// NODE_DELETE's node, marked DELETING for it, is ACTIVE again (nothing of
/// it was done). `Ok(Err(action))` = it was no longer cancellable, as it
/// now is; `None` = gone.
pub async fn cancel_action<'a>(
    connection: &DatabaseConnection,
    id: Uuid,
    event: &'a (dyn for<'b> Fn(&'b ClusterAction) -> ClusterEvent + Send + Sync + 'a),
) -> Result<Option<std::result::Result<ClusterAction, ClusterAction>>> {
    let transaction = begin_write(connection).await?;
    let now = ember_runtime::time::now();
    let cancelled = action::Entity::update_many()
        .col_expr(
            action::Column::Status,
            Expr::value(ActionStatus::Cancelled.as_str()),
        )
        .col_expr(
            action::Column::StatusReason,
            Expr::value("Action execution cancelled"),
        )
        .col_expr(action::Column::UpdatedAt, Expr::value(now))
        .filter(action::Column::Id.eq(id))
        .filter(action::Column::Status.is_in(CANCELLABLE.map(ActionStatus::as_str)))
        .exec_with_returning(&transaction)
        .await?
        .into_iter()
        .next()
        .map(action_from)
        .transpose()?;
    let Some(cancelled) = cancelled else {
        let now_as_it_is = action::Entity::find_by_id(id)
            .one(&transaction)
            .await?
            .map(action_from)
            .transpose()?;
        return Ok(now_as_it_is.map(Err));
    };
    cluster::Entity::update_many()
        .col_expr(
            cluster::Column::LockActionId,
            Expr::value(Option::<Uuid>::None),
        )
        .filter(cluster::Column::LockActionId.eq(id))
        .exec(&transaction)
        .await?;
    if cancelled.kind == ActionKind::NodeDelete {
        node::Entity::update_many()
            .col_expr(
                node::Column::Status,
                Expr::value(NodeStatus::Active.as_str()),
            )
            .col_expr(
                node::Column::StatusReason,
                Expr::value("deletion cancelled"),
            )
            .col_expr(node::Column::UpdatedAt, Expr::value(now))
            .filter(node::Column::Id.eq(cancelled.target_id))
            .filter(node::Column::Status.eq(NodeStatus::Deleting.as_str()))
            .exec(&transaction)
            .await?;
    }
    insert_events(&transaction, &[event(&cancelled)]).await?;
    transaction.commit().await?;
    Ok(Some(Ok(cancelled)))
}

/// The member ids of every cluster of `cluster_ids` that has members, in
/// index order, in one query (a cluster list shows its page's member ids
/// at once, not one cluster at a time).
pub async fn member_ids_of(
    connection: &impl ConnectionTrait,
    cluster_ids: &[Uuid],
) -> Result<HashMap<Uuid, Vec<Uuid>>> {
    if cluster_ids.is_empty() {
        return Ok(HashMap::new());
    }
    // One row per cluster, not one per member (each row crossing from
    // SQLite's worker thread costs more than the query). SQLite keeps each
    // cluster's list in chunks of up to 100 (`cluster_member_chunks`, by
    // triggers: see migration m20261210_100001), hex ids each followed by
    // a comma, joined here; PostgreSQL joins the ids per read.
    let backend = connection.get_database_backend();
    let placeholders: Vec<String> = (1..=cluster_ids.len())
        .map(|position| match backend {
            DbBackend::Postgres => format!("${position}"),
            _ => "?".to_owned(),
        })
        .collect();
    let sql = match backend {
        DbBackend::Postgres => format!(
            "SELECT cluster_id, string_agg(id::text, ',' ORDER BY node_index, id) AS members \
             FROM cluster_nodes WHERE cluster_id IN ({}) GROUP BY cluster_id",
            placeholders.join(", ")
        ),
        _ => format!(
            "SELECT cluster_id, group_concat(ids, '' ORDER BY chunk) AS members \
             FROM cluster_member_chunks WHERE cluster_id IN ({}) GROUP BY cluster_id",
            placeholders.join(", ")
        ),
    };
    let rows = connection
        .query_all_raw(Statement::from_sql_and_values(
            backend,
            sql,
            cluster_ids.iter().map(|id| (*id).into()),
        ))
        .await?;
    let mut members = HashMap::with_capacity(rows.len());
    for row in rows {
        let cluster_id: Uuid = row.try_get("", "cluster_id")?;
        let joined: String = row.try_get("", "members")?;
        members.insert(cluster_id, parse_member_ids(cluster_id, &joined)?);
    }
    Ok(members)
}

/// The member ids of `joined`: ids (hex or hyphenated) each followed or
/// separated by a comma, as `cluster_member_chunks` keeps them on SQLite
/// and `string_agg` joins them on PostgreSQL.
pub fn parse_member_ids(cluster_id: Uuid, joined: &str) -> Result<Vec<Uuid>> {
    joined
        .split(',')
        .filter(|id| !id.is_empty())
        .map(|id| {
            Uuid::try_parse(id).map_err(|error| {
                Error::Database(format!(
                    "cluster {cluster_id} lists a member id {id:?} that is not a UUID: {error}"
                ))
            })
        })
        .collect()
}

/// The names of the profiles of `ids` that exist, in one query.
pub async fn profile_names(
    connection: &impl ConnectionTrait,
    ids: &[Uuid],
) -> Result<std::collections::HashMap<Uuid, String>> {
    if ids.is_empty() {
        return Ok(std::collections::HashMap::new());
    }
    Ok(profile::Entity::find()
        .select_only()
        .column(profile::Column::Id)
        .column(profile::Column::Name)
        .filter(profile::Column::Id.is_in(ids.iter().copied()))
        .into_tuple::<(Uuid, String)>()
        .all(connection)
        .await?
        .into_iter()
        .collect())
}

/// The bindings of every cluster of `cluster_ids` with their policies,
/// highest priority first, in two queries (bindings, then their policies).
/// The clusters bound, enabled, to a policy whose type name starts with
/// `type_prefix` (`senlin.policy.health-`).
pub async fn clusters_with_policy_type(
    connection: &impl ConnectionTrait,
    type_prefix: &str,
) -> Result<Vec<Uuid>> {
    let policies: Vec<Uuid> = policy::Entity::find()
        .filter(policy::Column::TypeName.starts_with(type_prefix))
        .all(connection)
        .await?
        .into_iter()
        .map(|row| row.id)
        .collect();
    if policies.is_empty() {
        return Ok(Vec::new());
    }
    let mut clusters: Vec<Uuid> = binding::Entity::find()
        .filter(binding::Column::PolicyId.is_in(policies))
        .filter(binding::Column::Enabled.eq(true))
        .all(connection)
        .await?
        .into_iter()
        .map(|row| row.cluster_id)
        .collect();
    clusters.sort_unstable();
    clusters.dedup();
    Ok(clusters)
}

pub async fn bindings_of(
    connection: &impl ConnectionTrait,
    cluster_ids: &[Uuid],
) -> Result<Vec<(PolicyBinding, PolicyDefinition)>> {
    if cluster_ids.is_empty() {
        return Ok(Vec::new());
    }
    let rows = binding::Entity::find()
        .filter(binding::Column::ClusterId.is_in(cluster_ids.iter().copied()))
        .order_by_desc(binding::Column::Priority)
        .order_by_asc(binding::Column::PolicyId)
        .all(connection)
        .await?;
    let policies: std::collections::HashMap<Uuid, PolicyDefinition> = policy::Entity::find()
        .filter(policy::Column::Id.is_in(rows.iter().map(|row| row.policy_id)))
        .all(connection)
        .await?
        .into_iter()
        .map(|row| policy_from(row).map(|policy| (policy.id, policy)))
        .collect::<Result<_>>()?;
    Ok(rows
        .into_iter()
        .filter_map(|row| {
            let policy = policies.get(&row.policy_id)?.clone();
            Some((binding_from(row), policy))
        })
        .collect())
}
