//! Stack snapshots (Heat's `POST …/snapshots`): a stack's definition and
//! each resource's data at one moment, what restore brings it back to.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum StackSnapshots {
    Table,
    Id,
    StackId,
    ProjectId,
    Name,
    Status,
    StatusReason,
    Data,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(StackSnapshots::Table)
                    .if_not_exists()
                    .col(schema::pk_uuid(StackSnapshots::Id))
                    .col(schema::uuid(StackSnapshots::StackId))
                    .col(schema::string_len(StackSnapshots::ProjectId, 64))
                    .col(schema::string_len(StackSnapshots::Name, 255))
                    .col(schema::string_len(StackSnapshots::Status, 16))
                    .col(schema::text(StackSnapshots::StatusReason))
                    .col(schema::text(StackSnapshots::Data))
                    .col(schema::timestamp_with_time_zone(StackSnapshots::CreatedAt))
                    .to_owned(),
            )
            .await?;
        migration::create_index(
            manager,
            "stack_snapshots_stack",
            StackSnapshots::Table,
            [StackSnapshots::StackId],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_tables(manager, [StackSnapshots::Table]).await
    }
}
