//! A cluster's members by index, with their ids in the index itself: the
//! batched member read behind cluster lists (`member_ids_of`) is answered
//! from the index alone, without a table lookup per node.

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

fn index(name: &str, with_ids: bool) -> IndexCreateStatement {
    let mut index = Index::create();
    index
        .name(name)
        .table(ClusterNodes::Table)
        .col(ClusterNodes::ClusterId)
        .col(ClusterNodes::NodeIndex);
    if with_ids {
        index.col(ClusterNodes::Id);
    }
    index.to_owned()
}

fn drop(name: &str) -> IndexDropStatement {
    Index::drop()
        .name(name)
        .table(ClusterNodes::Table)
        .to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.create_index(index(COVERING, true)).await?;
        manager.drop_index(drop(NARROW)).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.create_index(index(NARROW, false)).await?;
        manager.drop_index(drop(COVERING)).await
    }
}
