//! Receivers (Senlin's `POST /receivers`): a webhook or message receiver
//! that runs one cluster action as its creator. Ids are text (see
//! `store::receivers`); the cluster is not a foreign key (a message
//! receiver has none): CLUSTER_DELETE deletes the cluster's receivers in
//! the transaction that deletes the cluster.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Receivers {
    Table,
    Id,
    Name,
    Type,
    ClusterId,
    Action,
    Params,
    Actor,
    Channel,
    UserId,
    ProjectId,
    CreatedAt,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Receivers::Table)
                    .if_not_exists()
                    .col(schema::string_len(Receivers::Id, 36).primary_key())
                    .col(schema::string_len(Receivers::Name, 255))
                    .col(schema::string_len(Receivers::Type, 16))
                    .col(schema::string_len_null(Receivers::ClusterId, 36))
                    .col(schema::string_len_null(Receivers::Action, 64))
                    .col(schema::text(Receivers::Params))
                    .col(schema::text(Receivers::Actor))
                    .col(schema::text(Receivers::Channel))
                    .col(schema::string_len(Receivers::UserId, 64))
                    .col(schema::string_len(Receivers::ProjectId, 64))
                    .col(schema::timestamp_with_time_zone(Receivers::CreatedAt))
                    .col(schema::timestamp_with_time_zone_null(Receivers::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        migration::create_index(
            manager,
            "receivers_project",
            Receivers::Table,
            [Receivers::ProjectId, Receivers::Name],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_tables(manager, [Receivers::Table]).await
    }
}
