//! Delegations: through which Keystone trust the engine acts for the user
//! who made a stack (or an instance, or a cluster) on the openstack
//! backend, after that user's own token has expired. One row per owner,
//! made with it and removed (the trust deleted, when the owner made it)
//! with it.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Delegations {
    Table,
    OwnerKind,
    OwnerId,
    TrustId,
    TrustorUserId,
    ProjectId,
    OwnsTrust,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Delegations::Table)
                    .if_not_exists()
                    .col(schema::string_len(Delegations::OwnerKind, 16))
                    .col(schema::uuid(Delegations::OwnerId))
                    .col(schema::string_len(Delegations::TrustId, 64))
                    .col(schema::string_len(Delegations::TrustorUserId, 64))
                    .col(schema::string_len(Delegations::ProjectId, 64))
                    .col(schema::boolean(Delegations::OwnsTrust).default(true))
                    .col(schema::timestamp_with_time_zone(Delegations::CreatedAt))
                    .primary_key(
                        Index::create()
                            .col(Delegations::OwnerKind)
                            .col(Delegations::OwnerId),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_tables(manager, [Delegations::Table]).await
    }
}
