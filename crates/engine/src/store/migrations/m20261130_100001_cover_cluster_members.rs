//! A cluster's members by index, with their ids in the index itself: the
//! batched member read behind cluster lists (`member_ids_of`) is answered
//! from the index alone, without a table lookup per node.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ClusterNodes {
    Table,
    Id,
    ClusterId,
    NodeIndex,
}

const COVERING: &str = "cluster_nodes_by_cluster_with_ids";
const NARROW: &str = "cluster_nodes_by_cluster";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        use ClusterNodes as N;
        migration::create_index(
            manager,
            COVERING,
            N::Table,
            [N::ClusterId, N::NodeIndex, N::Id],
        )
        .await?;
        migration::drop_index(manager, NARROW, N::Table).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        use ClusterNodes as N;
        migration::create_index(manager, NARROW, N::Table, [N::ClusterId, N::NodeIndex]).await?;
        migration::drop_index(manager, COVERING, N::Table).await
    }
}
