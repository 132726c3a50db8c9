use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

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
        migration::add_columns(
            manager,
            Stacks::Table,
            [
                schema::json(Stacks::Template).default("{}").to_owned(),
                schema::json(Stacks::Environment).default("{}").to_owned(),
                schema::json(Stacks::Files).default("{}").to_owned(),
                schema::json(Stacks::Parameters).default("{}").to_owned(),
                schema::integer(Stacks::NestedDepth).default(0).to_owned(),
                schema::string_len_null(Stacks::ParentResource, 255),
                schema::timestamp_with_time_zone_null(Stacks::DeletedAt),
            ],
        )
        .await?;
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
                    .col(schema::pk_uuid(Resources::Id))
                    .col(schema::uuid(Resources::StackId))
                    .col(schema::string_len(Resources::Name, 255))
                    .col(schema::string_len(Resources::TypeName, 255))
                    .col(schema::string_len_null(Resources::PhysicalId, 255))
                    .col(schema::string_len(Resources::Action, 16))
                    .col(schema::string_len(Resources::Status, 16))
                    .col(schema::text(Resources::StatusReason))
                    .col(schema::json(Resources::Properties))
                    .col(schema::json(Resources::Attributes))
                    .col(schema::json(Resources::Metadata))
                    .col(schema::json(Resources::Data))
                    .col(schema::timestamp_with_time_zone(Resources::CreatedAt))
                    .col(schema::timestamp_with_time_zone(Resources::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        migration::create_index(
            manager,
            "resources_by_stack_and_name",
            Resources::Table,
            [Resources::StackId, Resources::Name],
        )
        .await?;
        migration::create_index(
            manager,
            "resources_by_physical_id",
            Resources::Table,
            [Resources::PhysicalId],
        )
        .await?;

        manager
            .create_table(
                Table::create()
                    .table(Events::Table)
                    .if_not_exists()
                    .col(schema::pk_uuid(Events::Id))
                    .col(schema::uuid(Events::StackId))
                    .col(schema::string_len(Events::ResourceName, 255))
                    .col(schema::string_len(Events::PhysicalResourceId, 255))
                    .col(schema::string_len(Events::ResourceType, 255))
                    .col(schema::string_len(Events::Action, 16))
                    .col(schema::string_len(Events::Status, 16))
                    .col(schema::text(Events::Reason))
                    .col(schema::timestamp_with_time_zone(Events::CreatedAt))
                    .to_owned(),
            )
            .await?;
        migration::create_index(
            manager,
            "events_by_stack_in_order",
            Events::Table,
            [Events::StackId, Events::Id],
        )
        .await?;

        // The engine-level mutex of each stack (Heat's "stack lock").
        manager
            .create_table(
                Table::create()
                    .table(StackLeases::Table)
                    .if_not_exists()
                    .col(schema::pk_uuid(StackLeases::StackId))
                    .col(schema::uuid(StackLeases::EngineId))
                    .col(schema::string_len(StackLeases::Operation, 32))
                    .col(schema::timestamp_with_time_zone(StackLeases::ExpiresAt))
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
