//! A cluster's `config` (Senlin's, API 1.7): a JSON object, empty for the
//! clusters made before it was kept.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Clusters {
    Table,
    Config,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::add_columns(
            manager,
            Clusters::Table,
            [schema::json(Clusters::Config).default("{}").to_owned()],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_columns(manager, Clusters::Table, [Clusters::Config]).await
    }
}
