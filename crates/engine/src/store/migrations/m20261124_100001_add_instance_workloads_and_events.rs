//! What runs on an instance's machine (user data, command, environment:
//! the docker driver makes them the container's), and the instance's
//! events: each driver task's outcome and each time the machine was found
//! in another state than recorded (it died, was removed or started outside
//! Ember), with the reason.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Instances {
    Table,
    UserData,
    Command,
    Env,
}

#[derive(DeriveIden)]
enum InstanceEvents {
    Table,
    Id,
    InstanceUuid,
    ProjectId,
    Kind,
    Status,
    PowerState,
    Reason,
    At,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // NULL is "none given", so existing rows need no default.
        migration::add_missing_columns(
            manager,
            Instances::Table,
            [
                schema::text_null(Instances::UserData),
                schema::json_null(Instances::Command),
                schema::json_null(Instances::Env),
            ],
        )
        .await?;
        manager
            .create_table(
                Table::create()
                    .table(InstanceEvents::Table)
                    .if_not_exists()
                    .col(schema::pk_uuid(InstanceEvents::Id))
                    .col(schema::uuid(InstanceEvents::InstanceUuid))
                    .col(schema::string_len(InstanceEvents::ProjectId, 64))
                    .col(schema::string_len(InstanceEvents::Kind, 32))
                    .col(schema::string_len(InstanceEvents::Status, 16))
                    .col(schema::string_len(InstanceEvents::PowerState, 16))
                    .col(schema::text(InstanceEvents::Reason))
                    .col(schema::timestamp_with_time_zone(InstanceEvents::At))
                    .to_owned(),
            )
            .await?;
        migration::create_index(
            manager,
            "instance_events_by_instance",
            InstanceEvents::Table,
            [InstanceEvents::InstanceUuid, InstanceEvents::At],
        )
        .await?;
        // A machine found dead is traced to its cluster node by the node's
        // physical id.
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE INDEX IF NOT EXISTS cluster_nodes_by_physical_id ON cluster_nodes (physical_id)",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared("DROP INDEX IF EXISTS cluster_nodes_by_physical_id")
            .await?;
        migration::drop_tables(manager, [InstanceEvents::Table]).await?;
        migration::drop_columns(
            manager,
            Instances::Table,
            [Instances::UserData, Instances::Command, Instances::Env],
        )
        .await
    }
}
