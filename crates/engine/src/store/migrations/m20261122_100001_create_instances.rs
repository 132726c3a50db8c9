//! The `instances` table: compute instances with their status, power state
//! and maintenance lock (spec `mogan-lock-instance-api`: `locked`,
//! `locked_by` owner|admin), and the indexes that keep a GET by uuid and
//! the list filters fast at tens of thousands of instances.

use sea_orm_migration::prelude::*;

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
                    .col(
                        ColumnDef::new(Instances::Uuid)
                            .uuid()
                            .not_null()
                            .primary_key(),
                    )
                    .col(ColumnDef::new(Instances::Name).string_len(255).not_null())
                    .col(
                        ColumnDef::new(Instances::ProjectId)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(ColumnDef::new(Instances::UserId).string_len(64).not_null())
                    .col(ColumnDef::new(Instances::Flavor).string_len(255).not_null())
                    .col(ColumnDef::new(Instances::Image).string_len(255).not_null())
                    .col(ColumnDef::new(Instances::Metadata).json().not_null())
                    .col(ColumnDef::new(Instances::Status).string_len(16).not_null())
                    .col(
                        ColumnDef::new(Instances::PowerState)
                            .string_len(16)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Instances::Locked)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .col(ColumnDef::new(Instances::LockedBy).string_len(8).null())
                    .col(
                        ColumnDef::new(Instances::LockedByUser)
                            .string_len(64)
                            .null(),
                    )
                    .col(
                        ColumnDef::new(Instances::LockedAt)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .col(
                        ColumnDef::new(Instances::LockedReason)
                            .string_len(255)
                            .null(),
                    )
                    .col(ColumnDef::new(Instances::StatusReason).text().not_null())
                    .col(ColumnDef::new(Instances::Revision).big_integer().not_null())
                    .col(
                        ColumnDef::new(Instances::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Instances::UpdatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
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
            let mut index = Index::create();
            index.name(name).table(Instances::Table).if_not_exists();
            for column in columns {
                index.col(column);
            }
            manager.create_index(index.to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Instances::Table).to_owned())
            .await
    }
}
