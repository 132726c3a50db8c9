//! Upgrading a database the old engine used, on SQLite and PostgreSQL:
//! member indexes the old allocator repeated are renumbered before the
//! unique index is made, and the cluster action running at the upgrade
//! gets its cluster's lock.

use ember_engine::domain::cluster::ActionKind;
use ember_engine::store::clusters::{ClusterStore, SqlClusterStore};
use ember_engine::store::migrations::Migrator;
use ember_runtime::database::{connect, testing::TestDatabase};
use sea_orm::ConnectionTrait;
use sea_orm::sea_query::{Alias, Query, SimpleExpr};
use sea_orm_migration::MigratorTrait;
use serde_json::json;
use uuid::Uuid;

/// How many migrations come before the cluster lock's.
fn before_locks() -> u32 {
    let position = Migrator::migrations()
        .iter()
        .position(|migration| {
            migration.name() == "m20261123_100001_add_cluster_locks_and_action_attempts"
        })
        .expect("the cluster lock migration is listed");
    u32::try_from(position).expect("a few migrations")
}

fn insert(table: &str, values: Vec<(&str, SimpleExpr)>) -> sea_orm::sea_query::InsertStatement {
    let mut statement = Query::insert();
    statement
        .into_table(Alias::new(table))
        .columns(values.iter().map(|(column, _)| Alias::new(*column)));
    statement
        .values(values.into_iter().map(|(_, value)| value))
        .expect("values");
    statement.to_owned()
}

async fn an_old_database_is_upgraded(database: &TestDatabase) {
    let connection = connect(&database.url).await.expect("connected");
    Migrator::up(&connection, Some(before_locks()))
        .await
        .expect("old schema");
    let now = ember_runtime::time::now();
    let cluster_id = Uuid::now_v7();
    connection
        .execute(&insert(
            "clusters",
            vec![
                ("id", cluster_id.into()),
                ("name", "web".into()),
                ("profile_id", Uuid::now_v7().into()),
                ("min_size", 0.into()),
                ("max_size", (-1).into()),
                ("desired_capacity", 4.into()),
                ("status", "RESIZING".into()),
                ("status_reason", "".into()),
                ("metadata", json!({}).into()),
                // Reset by the old save_cluster: behind the indexes in use.
                ("next_index", 3.into()),
                ("project_id", "demo".into()),
                ("user_id", "demo".into()),
                ("created_at", now.into()),
                ("updated_at", now.into()),
            ],
        ))
        .await
        .expect("cluster");
    let mut node_ids = Vec::new();
    for index in [1, 2, 1, 2] {
        let id = Uuid::now_v7();
        node_ids.push(id);
        connection
            .execute(&insert(
                "cluster_nodes",
                vec![
                    ("id", id.into()),
                    ("name", format!("node-{index:03}").into()),
                    ("cluster_id", cluster_id.into()),
                    ("profile_id", Uuid::now_v7().into()),
                    ("node_index", index.into()),
                    ("role", "".into()),
                    ("status", "ACTIVE".into()),
                    ("status_reason", "".into()),
                    ("tainted", false.into()),
                    ("metadata", json!({}).into()),
                    ("project_id", "demo".into()),
                    ("user_id", "demo".into()),
                    ("created_at", now.into()),
                    ("updated_at", now.into()),
                ],
            ))
            .await
            .expect("node");
    }
    let running = Uuid::now_v7();
    let queued = Uuid::now_v7();
    for (id, kind, status) in [
        (running, ActionKind::ClusterScaleOut, "RUNNING"),
        (queued, ActionKind::ClusterScaleIn, "READY"),
    ] {
        connection
            .execute(&insert(
                "cluster_actions",
                vec![
                    ("id", id.into()),
                    ("name", kind.as_str().to_ascii_lowercase().into()),
                    ("kind", kind.as_str().into()),
                    ("target_id", cluster_id.into()),
                    ("cluster_id", cluster_id.into()),
                    ("status", status.into()),
                    ("status_reason", "".into()),
                    ("inputs", json!({}).into()),
                    ("outputs", json!({}).into()),
                    ("depends_on", json!([]).into()),
                    ("depended_by", json!([]).into()),
                    ("lifecycle_detail", "".into()),
                    ("hook_recorded", false.into()),
                    ("project_id", "demo".into()),
                    ("user_id", "demo".into()),
                    ("roles", "member".into()),
                    ("created_at", now.into()),
                    ("updated_at", now.into()),
                ],
            ))
            .await
            .expect("action");
    }

    Migrator::up(&connection, None).await.expect("upgraded");
    let store = SqlClusterStore::new(connection);
    let nodes = store.list_cluster_nodes(cluster_id).await.expect("nodes");
    let mut indexes: Vec<i32> = nodes.iter().map(|node| node.index).collect();
    indexes.sort_unstable();
    assert_eq!(indexes, vec![1, 2, 3, 4], "the repeated indexes renumbered");
    let cluster = store
        .get_cluster(cluster_id)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(cluster.next_index, 5, "the counter past every index");
    assert_eq!(
        store.cluster_lock_holder(cluster_id).await.expect("read"),
        Some(running),
        "the running action holds the lock"
    );
    let queued = store.get_action(queued).await.expect("read").expect("kept");
    assert!(queued.takes_cluster_lock());
    assert_eq!(queued.attempt, 0);
    // The next allocation does not collide either.
    let next = store.take_node_indexes(cluster_id, 2).await.expect("taken");
    assert_eq!(next, 5);
}

ember_runtime::store_suite!(an_old_database_is_upgraded);
