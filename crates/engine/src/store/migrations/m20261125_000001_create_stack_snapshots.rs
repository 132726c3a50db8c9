//! Stack snapshots (Heat's `POST …/snapshots`): a stack's definition and
//! each resource's data at one moment, what restore brings it back to.

use sea_orm_migration::prelude::*;

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
                    .col(
                        ColumnDef::new(StackSnapshots::Id)
                            .uuid()
                            .not_null()
                            .primary_key(),
                    )
                    .col(ColumnDef::new(StackSnapshots::StackId).uuid().not_null())
                    .col(
                        ColumnDef::new(StackSnapshots::ProjectId)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(StackSnapshots::Name)
                            .string_len(255)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(StackSnapshots::Status)
                            .string_len(16)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(StackSnapshots::StatusReason)
                            .text()
                            .not_null(),
                    )
                    .col(ColumnDef::new(StackSnapshots::Data).text().not_null())
                    .col(
                        ColumnDef::new(StackSnapshots::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("stack_snapshots_stack")
                    .table(StackSnapshots::Table)
                    .col(StackSnapshots::StackId)
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(StackSnapshots::Table).to_owned())
            .await
    }
}
