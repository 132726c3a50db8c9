//! Software configs (immutable: created, read, deleted) and software
//! deployments (a config applied to a server, with its inputs and the
//! outputs its agent reports), each belonging to a project.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum SoftwareConfigs {
    Table,
    Id,
    ProjectId,
    Name,
    GroupName,
    Config,
    Inputs,
    Outputs,
    Options,
    CreatedAt,
}

#[derive(DeriveIden)]
enum SoftwareDeployments {
    Table,
    Id,
    ProjectId,
    ServerId,
    ConfigId,
    InputValues,
    OutputValues,
    Action,
    Status,
    StatusReason,
    CreatedAt,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(SoftwareConfigs::Table)
                    .if_not_exists()
                    .col(schema::pk_uuid(SoftwareConfigs::Id))
                    .col(schema::string_len(SoftwareConfigs::ProjectId, 64))
                    .col(schema::string_len(SoftwareConfigs::Name, 255))
                    .col(schema::string_len(SoftwareConfigs::GroupName, 255))
                    .col(schema::text(SoftwareConfigs::Config))
                    .col(schema::text(SoftwareConfigs::Inputs))
                    .col(schema::text(SoftwareConfigs::Outputs))
                    .col(schema::text(SoftwareConfigs::Options))
                    .col(schema::timestamp_with_time_zone(SoftwareConfigs::CreatedAt))
                    .to_owned(),
            )
            .await?;
        migration::create_index(
            manager,
            "software_configs_by_project",
            SoftwareConfigs::Table,
            [SoftwareConfigs::ProjectId, SoftwareConfigs::Id],
        )
        .await?;
        manager
            .create_table(
                Table::create()
                    .table(SoftwareDeployments::Table)
                    .if_not_exists()
                    .col(schema::pk_uuid(SoftwareDeployments::Id))
                    .col(schema::string_len(SoftwareDeployments::ProjectId, 64))
                    .col(schema::string_len(SoftwareDeployments::ServerId, 255))
                    .col(schema::uuid(SoftwareDeployments::ConfigId))
                    .col(schema::text(SoftwareDeployments::InputValues))
                    .col(schema::text(SoftwareDeployments::OutputValues))
                    .col(schema::string_len(SoftwareDeployments::Action, 32))
                    .col(schema::string_len(SoftwareDeployments::Status, 32))
                    .col(schema::text(SoftwareDeployments::StatusReason))
                    .col(schema::timestamp_with_time_zone(
                        SoftwareDeployments::CreatedAt,
                    ))
                    .col(schema::timestamp_with_time_zone_null(
                        SoftwareDeployments::UpdatedAt,
                    ))
                    .to_owned(),
            )
            .await?;
        migration::create_index(
            manager,
            "software_deployments_by_server",
            SoftwareDeployments::Table,
            [
                SoftwareDeployments::ServerId,
                SoftwareDeployments::ProjectId,
            ],
        )
        .await?;
        migration::create_index(
            manager,
            "software_deployments_by_config",
            SoftwareDeployments::Table,
            [SoftwareDeployments::ConfigId],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_tables(
            manager,
            [
                SoftwareDeployments::Table.into_iden(),
                SoftwareConfigs::Table.into_iden(),
            ],
        )
        .await
    }
}
