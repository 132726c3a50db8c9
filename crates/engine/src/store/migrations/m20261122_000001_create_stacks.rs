use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Stacks {
    Table,
    Id,
    Name,
    ProjectId,
    UserId,
    ParentId,
    Action,
    Status,
    StatusReason,
    Description,
    Tags,
    TimeoutMins,
    DisableRollback,
    CreatedAt,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Stacks::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(Stacks::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(Stacks::Name).string_len(255).not_null())
                    .col(ColumnDef::new(Stacks::ProjectId).string_len(64).not_null())
                    .col(ColumnDef::new(Stacks::UserId).string_len(64).not_null())
                    .col(ColumnDef::new(Stacks::ParentId).uuid().null())
                    .col(ColumnDef::new(Stacks::Action).string_len(16).not_null())
                    .col(ColumnDef::new(Stacks::Status).string_len(16).not_null())
                    .col(ColumnDef::new(Stacks::StatusReason).text().not_null())
                    .col(ColumnDef::new(Stacks::Description).text().not_null())
                    .col(ColumnDef::new(Stacks::Tags).json().not_null())
                    .col(ColumnDef::new(Stacks::TimeoutMins).integer().null())
                    .col(ColumnDef::new(Stacks::DisableRollback).boolean().not_null())
                    .col(
                        ColumnDef::new(Stacks::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Stacks::UpdatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        // Names are unique within a project (Heat answers 409 on a clash).
        manager
            .create_index(
                Index::create()
                    .name("stacks_unique_name_per_project")
                    .table(Stacks::Table)
                    .col(Stacks::ProjectId)
                    .col(Stacks::Name)
                    .unique()
                    .if_not_exists()
                    .to_owned(),
            )
            .await?;
        // Listing is newest first within a project.
        manager
            .create_index(
                Index::create()
                    .name("stacks_by_project_newest_first")
                    .table(Stacks::Table)
                    .col(Stacks::ProjectId)
                    .col(Stacks::CreatedAt)
                    .col(Stacks::Id)
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Stacks::Table).to_owned())
            .await
    }
}
