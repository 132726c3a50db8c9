use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

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
                    .col(schema::pk_uuid(Stacks::Id))
                    .col(schema::string_len(Stacks::Name, 255))
                    .col(schema::string_len(Stacks::ProjectId, 64))
                    .col(schema::string_len(Stacks::UserId, 64))
                    .col(schema::uuid_null(Stacks::ParentId))
                    .col(schema::string_len(Stacks::Action, 16))
                    .col(schema::string_len(Stacks::Status, 16))
                    .col(schema::text(Stacks::StatusReason))
                    .col(schema::text(Stacks::Description))
                    .col(schema::json(Stacks::Tags))
                    .col(schema::integer_null(Stacks::TimeoutMins))
                    .col(schema::boolean(Stacks::DisableRollback))
                    .col(schema::timestamp_with_time_zone(Stacks::CreatedAt))
                    .col(schema::timestamp_with_time_zone(Stacks::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        // Names are unique within a project (Heat answers 409 on a clash).
        migration::create_unique_index(
            manager,
            "stacks_unique_name_per_project",
            Stacks::Table,
            [Stacks::ProjectId, Stacks::Name],
        )
        .await?;
        // Listing is newest first within a project.
        migration::create_index(
            manager,
            "stacks_by_project_newest_first",
            Stacks::Table,
            [Stacks::ProjectId, Stacks::CreatedAt, Stacks::Id],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_tables(manager, [Stacks::Table]).await
    }
}
