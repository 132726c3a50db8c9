//! What runs on an instance's machine (user data, command, environment:
//! the docker driver makes them the container's), and the instance's
//! events: each driver task's outcome and each time the machine was found
//! in another state than recorded (it died, was removed or started outside
//! Ember), with the reason.

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
        // One column per statement: SQLite alters one at a time. NULL is
        // "none given", so existing rows need no default.
        for column in [
            schema::text_null(Instances::UserData),
            schema::json_null(Instances::Command),
            schema::json_null(Instances::Env),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Instances::Table)
                        .add_column_if_not_exists(column)
                        .to_owned(),
                )
                .await?;
        }
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
        manager
            .create_index(
                Index::create()
                    .name("instance_events_by_instance")
                    .table(InstanceEvents::Table)
                    .col(InstanceEvents::InstanceUuid)
                    .col(InstanceEvents::At)
                    .if_not_exists()
                    .to_owned(),
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
        manager
            .drop_table(Table::drop().table(InstanceEvents::Table).to_owned())
            .await?;
        for column in [Instances::UserData, Instances::Command, Instances::Env] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Instances::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
