//! The `instances` table: compute instances with their status, power state
//! and maintenance lock (spec `mogan-lock-instance-api`: `locked`,
//! `locked_by` owner|admin), and the indexes that keep a GET by uuid and
//! the list filters fast at tens of thousands of instances.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Instances {
    Table,
    Uuid,
    Name,
    ProjectId,
    UserId,
    Flavor,
    Image,
    Metadata,
    Status,
    PowerState,
    Locked,
    LockedBy,
    LockedByUser,
    LockedAt,
    LockedReason,
    StatusReason,
    Revision,
    CreatedAt,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Instances::Table)
                    .if_not_exists()
                    .col(schema::pk_uuid(Instances::Uuid))
                    .col(schema::string_len(Instances::Name, 255))
                    .col(schema::string_len(Instances::ProjectId, 64))
                    .col(schema::string_len(Instances::UserId, 64))
                    .col(schema::string_len(Instances::Flavor, 255))
                    .col(schema::string_len(Instances::Image, 255))
                    .col(schema::json(Instances::Metadata))
                    .col(schema::string_len(Instances::Status, 16))
                    .col(schema::string_len(Instances::PowerState, 16))
                    .col(schema::boolean(Instances::Locked).default(false))
                    .col(schema::string_len_null(Instances::LockedBy, 8))
                    .col(schema::string_len_null(Instances::LockedByUser, 64))
                    .col(schema::timestamp_with_time_zone_null(Instances::LockedAt))
                    .col(schema::string_len_null(Instances::LockedReason, 255))
                    .col(schema::text(Instances::StatusReason))
                    .col(schema::big_integer(Instances::Revision))
                    .col(schema::timestamp_with_time_zone(Instances::CreatedAt))
                    .col(schema::timestamp_with_time_zone(Instances::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        // GET by uuid uses the primary key. Listing is newest first within a
        // project; the filters narrow by status, lock and name within it.
        let indexes: [(&str, Vec<Instances>); 5] = [
            (
                "instances_by_project_newest_first",
                vec![Instances::ProjectId, Instances::CreatedAt, Instances::Uuid],
            ),
            (
                "instances_by_project_status",
                vec![Instances::ProjectId, Instances::Status],
            ),
            (
                "instances_by_project_locked",
                vec![Instances::ProjectId, Instances::Locked],
            ),
            (
                "instances_by_project_name",
                vec![Instances::ProjectId, Instances::Name],
            ),
            // Admins list across projects, and start-up finds the instances
            // whose driver task was interrupted, by status.
            ("instances_by_status", vec![Instances::Status]),
        ];
        for (name, columns) in indexes {
            migration::create_index(manager, name, Instances::Table, columns).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_tables(manager, [Instances::Table]).await
    }
}
