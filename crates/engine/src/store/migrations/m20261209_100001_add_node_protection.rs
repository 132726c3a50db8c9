//! Scale-in protection: a node marked `protected` is never chosen for
//! removal and cannot be deleted until the mark is cleared; a profile's
//! `protected` is the mark its new nodes start with.

use sea_orm_migration::prelude::*;

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
        manager
            .alter_table(
                Table::alter()
                    .table(ClusterNodes::Table)
                    .add_column(
                        ColumnDef::new(ClusterNodes::Protected)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(ClusterProfiles::Table)
                    .add_column(
                        ColumnDef::new(ClusterProfiles::Protected)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ClusterNodes::Table)
                    .drop_column(ClusterNodes::Protected)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(ClusterProfiles::Table)
                    .drop_column(ClusterProfiles::Protected)
                    .to_owned(),
            )
            .await
    }
}
