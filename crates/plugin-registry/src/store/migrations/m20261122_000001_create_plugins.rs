use sea_orm_migration::prelude::*;

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
                    .col(
                        ColumnDef::new(Plugins::Name)
                            .string_len(64)
                            .not_null()
                            .primary_key(),
                    )
                    .col(ColumnDef::new(Plugins::Endpoint).string().not_null())
                    .col(ColumnDef::new(Plugins::Ordinal).integer().not_null())
                    .col(ColumnDef::new(Plugins::Operations).json().not_null())
                    .col(ColumnDef::new(Plugins::ProjectIds).json().not_null())
                    .col(
                        ColumnDef::new(Plugins::FailureMode)
                            .string_len(8)
                            .not_null(),
                    )
                    .col(ColumnDef::new(Plugins::TimeoutMs).big_integer().not_null())
                    .col(ColumnDef::new(Plugins::Enabled).boolean().not_null())
                    .col(
                        ColumnDef::new(Plugins::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Plugins::UpdatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("plugins_by_calling_order")
                    .table(Plugins::Table)
                    .col(Plugins::Ordinal)
                    .col(Plugins::Name)
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Plugins::Table).to_owned())
            .await
    }
}
