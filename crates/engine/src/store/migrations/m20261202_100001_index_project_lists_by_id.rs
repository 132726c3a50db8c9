//! The Clustering lists of profiles, policies, clusters and nodes are one
//! project's rows in id order (ids are UUIDv7: creation order) unless a
//! sort is asked for: `WHERE project_id = ? ORDER BY id LIMIT n`. Without
//! an index on both columns the database found the project's rows through
//! another index (or none) and sorted them all for every page — a page of
//! 100 nodes sorted the project's 5,000, and a list of 200 clusters copied
//! each row, member ids included, into a sorter. With `(project_id, id)` a
//! page is read in order and stops at its limit.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// (index, table, columns). A cluster's node list (`project_id = ? AND
/// cluster_id = ?`, in id order) gets an index of its own: given only the
/// project's, SQLite's planner would walk every node of the project in id
/// order to find one cluster's.
const INDEXES: [(&str, &str, &[&str]); 5] = [
    (
        "cluster_profiles_by_project_in_id_order",
        "cluster_profiles",
        &["project_id", "id"],
    ),
    (
        "cluster_policies_by_project_in_id_order",
        "cluster_policies",
        &["project_id", "id"],
    ),
    (
        "clusters_by_project_in_id_order",
        "clusters",
        &["project_id", "id"],
    ),
    (
        "cluster_nodes_by_project_in_id_order",
        "cluster_nodes",
        &["project_id", "id"],
    ),
    (
        "cluster_nodes_by_cluster_in_id_order",
        "cluster_nodes",
        &["cluster_id", "project_id", "id"],
    ),
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for (name, table, columns) in INDEXES {
            let columns = columns.iter().map(|column| Alias::new(*column));
            migration::create_index(manager, name, Alias::new(table), columns).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for (name, table, _) in INDEXES {
            migration::drop_index(manager, name, Alias::new(table)).await?;
        }
        Ok(())
    }
}
