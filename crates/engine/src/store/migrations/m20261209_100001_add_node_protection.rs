//! Scale-in protection: a node marked `protected` is never chosen for
//! removal and cannot be deleted until the mark is cleared; a profile's
//! `protected` is the mark its new nodes start with.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveIden)]
enum ClusterNodes {
    Table,
    Protected,
}

#[derive(DeriveIden)]
enum ClusterProfiles {
    Table,
    Protected,
}

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::add_columns(
            manager,
            ClusterNodes::Table,
            [schema::boolean(ClusterNodes::Protected)
                .default(false)
                .to_owned()],
        )
        .await?;
        migration::add_columns(
            manager,
            ClusterProfiles::Table,
            [schema::boolean(ClusterProfiles::Protected)
                .default(false)
                .to_owned()],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_columns(manager, ClusterNodes::Table, [ClusterNodes::Protected]).await?;
        migration::drop_columns(
            manager,
            ClusterProfiles::Table,
            [ClusterProfiles::Protected],
        )
        .await
    }
}
