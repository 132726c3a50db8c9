use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Plugins {
    Table,
    Name,
    Endpoint,
    Ordinal,
    Operations,
    ProjectIds,
    FailureMode,
    TimeoutMs,
    Enabled,
    CreatedAt,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Plugins::Table)
                    .if_not_exists()
                    .col(schema::string_len(Plugins::Name, 64).primary_key())
                    .col(schema::string(Plugins::Endpoint))
                    .col(schema::integer(Plugins::Ordinal))
                    .col(schema::json(Plugins::Operations))
                    .col(schema::json(Plugins::ProjectIds))
                    .col(schema::string_len(Plugins::FailureMode, 8))
                    .col(schema::big_integer(Plugins::TimeoutMs))
                    .col(schema::boolean(Plugins::Enabled))
                    .col(schema::timestamp_with_time_zone(Plugins::CreatedAt))
                    .col(schema::timestamp_with_time_zone(Plugins::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        migration::create_index(
            manager,
            "plugins_by_calling_order",
            Plugins::Table,
            [Plugins::Ordinal, Plugins::Name],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_tables(manager, [Plugins::Table]).await
    }
}
