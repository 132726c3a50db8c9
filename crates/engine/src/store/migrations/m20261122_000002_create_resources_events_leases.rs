use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Stacks {
    Table,
    Template,
    Environment,
    Files,
    Parameters,
    NestedDepth,
    ParentResource,
    DeletedAt,
}

#[derive(DeriveIden)]
enum Resources {
    Table,
    Id,
    StackId,
    Name,
    TypeName,
    PhysicalId,
    Action,
    Status,
    StatusReason,
    Properties,
    Attributes,
    Metadata,
    Data,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Events {
    Table,
    Id,
    StackId,
    ResourceName,
    PhysicalResourceId,
    ResourceType,
    Action,
    Status,
    Reason,
    CreatedAt,
}

#[derive(DeriveIden)]
enum StackLeases {
    Table,
    StackId,
    EngineId,
    Operation,
    ExpiresAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // What each stack was built from, so it can be re-resolved.
        let added_columns = [
            ColumnDef::new(Stacks::Template)
                .json()
                .not_null()
                .default("{}")
                .to_owned(),
            ColumnDef::new(Stacks::Environment)
                .json()
                .not_null()
                .default("{}")
                .to_owned(),
            ColumnDef::new(Stacks::Files)
                .json()
                .not_null()
                .default("{}")
                .to_owned(),
            ColumnDef::new(Stacks::Parameters)
                .json()
                .not_null()
                .default("{}")
                .to_owned(),
            ColumnDef::new(Stacks::NestedDepth)
                .integer()
                .not_null()
                .default(0)
                .to_owned(),
            ColumnDef::new(Stacks::ParentResource)
                .string_len(255)
                .null()
                .to_owned(),
            ColumnDef::new(Stacks::DeletedAt)
                .timestamp_with_time_zone()
                .null()
                .to_owned(),
        ];
        for column in added_columns {
            // SQLite adds one column per ALTER TABLE.
            manager
                .alter_table(
                    Table::alter()
                        .table(Stacks::Table)
                        .add_column(column)
                        .to_owned(),
                )
                .await?;
        }
        // A deleted stack's name may be reused: names are unique among the
        // stacks that are not deleted. Both backends speak partial indexes.
        let connection = manager.get_connection();
        connection
            .execute_unprepared("DROP INDEX IF EXISTS stacks_unique_name_per_project")
            .await?;
        connection
            .execute_unprepared(
                "CREATE UNIQUE INDEX IF NOT EXISTS stacks_unique_live_name_per_project \
                 ON stacks (project_id, name) WHERE deleted_at IS NULL",
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(Resources::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(Resources::Id)
                            .uuid()
                            .not_null()
                            .primary_key(),
                    )
                    .col(ColumnDef::new(Resources::StackId).uuid().not_null())
                    .col(ColumnDef::new(Resources::Name).string_len(255).not_null())
                    .col(
                        ColumnDef::new(Resources::TypeName)
                            .string_len(255)
                            .not_null(),
                    )
                    .col(ColumnDef::new(Resources::PhysicalId).string_len(255).null())
                    .col(ColumnDef::new(Resources::Action).string_len(16).not_null())
                    .col(ColumnDef::new(Resources::Status).string_len(16).not_null())
                    .col(ColumnDef::new(Resources::StatusReason).text().not_null())
                    .col(ColumnDef::new(Resources::Properties).json().not_null())
                    .col(ColumnDef::new(Resources::Attributes).json().not_null())
                    .col(ColumnDef::new(Resources::Metadata).json().not_null())
                    .col(ColumnDef::new(Resources::Data).json().not_null())
                    .col(
                        ColumnDef::new(Resources::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Resources::UpdatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("resources_by_stack_and_name")
                    .table(Resources::Table)
                    .col(Resources::StackId)
                    .col(Resources::Name)
                    .if_not_exists()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("resources_by_physical_id")
                    .table(Resources::Table)
                    .col(Resources::PhysicalId)
                    .if_not_exists()
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(Events::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(Events::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(Events::StackId).uuid().not_null())
                    .col(
                        ColumnDef::new(Events::ResourceName)
                            .string_len(255)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Events::PhysicalResourceId)
                            .string_len(255)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Events::ResourceType)
                            .string_len(255)
                            .not_null(),
                    )
                    .col(ColumnDef::new(Events::Action).string_len(16).not_null())
                    .col(ColumnDef::new(Events::Status).string_len(16).not_null())
                    .col(ColumnDef::new(Events::Reason).text().not_null())
                    .col(
                        ColumnDef::new(Events::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("events_by_stack_in_order")
                    .table(Events::Table)
                    .col(Events::StackId)
                    .col(Events::Id)
                    .if_not_exists()
                    .to_owned(),
            )
            .await?;

        // The engine-level mutex of each stack (Heat's "stack lock").
        manager
            .create_table(
                Table::create()
                    .table(StackLeases::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(StackLeases::StackId)
                            .uuid()
                            .not_null()
                            .primary_key(),
                    )
                    .col(ColumnDef::new(StackLeases::EngineId).uuid().not_null())
                    .col(
                        ColumnDef::new(StackLeases::Operation)
                            .string_len(32)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(StackLeases::ExpiresAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in ["stack_leases", "events", "resources"] {
            manager
                .get_connection()
                .execute_unprepared(&format!("DROP TABLE IF EXISTS {table}"))
                .await?;
        }
        Ok(())
    }
}
