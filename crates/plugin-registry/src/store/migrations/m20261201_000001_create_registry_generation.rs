//! The registry's change counter: one row whose `generation` every write to
//! `plugins` increments in the same transaction, so each replica can tell
//! with one primary-key read whether its cached registry is still current.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum RegistryGeneration {
    Table,
    Id,
    Generation,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(RegistryGeneration::Table)
                    .if_not_exists()
                    .col(schema::integer(RegistryGeneration::Id).primary_key())
                    .col(schema::big_integer(RegistryGeneration::Generation))
                    .to_owned(),
            )
            .await?;
        let first_row = Query::insert()
            .into_table(RegistryGeneration::Table)
            .columns([RegistryGeneration::Id, RegistryGeneration::Generation])
            .values([1.into(), 0.into()])
            .map_err(|error| DbErr::Custom(error.to_string()))?
            .to_owned();
        manager.exec_stmt(first_row).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_tables(manager, [RegistryGeneration::Table]).await
    }
}
