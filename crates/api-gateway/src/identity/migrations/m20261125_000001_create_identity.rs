//! Projects, users (with argon2 password hashes, never the password), role
//! assignments, and revocations: one token by its id, or every token of a
//! user and/or project issued up to a moment (in milliseconds) (what losing a role, a
//! password change or a deletion revokes, as Keystone's revocation events).

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum IdentityProjects {
    Table,
    Id,
    Name,
    Description,
    CreatedAt,
}

#[derive(DeriveIden)]
enum IdentityUsers {
    Table,
    Id,
    Name,
    PasswordHash,
    DefaultProjectId,
    CreatedAt,
}

#[derive(DeriveIden)]
enum IdentityRoleAssignments {
    Table,
    UserId,
    ProjectId,
    Role,
}

#[derive(DeriveIden)]
enum IdentityRevocations {
    Table,
    Id,
    TokenId,
    UserId,
    ProjectId,
    IssuedBefore,
    ExpiresAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(IdentityProjects::Table)
                    .if_not_exists()
                    .col(schema::string_len(IdentityProjects::Id, 64).primary_key())
                    .col(schema::string_len_uniq(IdentityProjects::Name, 64))
                    .col(schema::text(IdentityProjects::Description))
                    .col(schema::timestamp_with_time_zone(
                        IdentityProjects::CreatedAt,
                    ))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(IdentityUsers::Table)
                    .if_not_exists()
                    .col(schema::string_len(IdentityUsers::Id, 64).primary_key())
                    .col(schema::string_len_uniq(IdentityUsers::Name, 64))
                    .col(schema::string_len(IdentityUsers::PasswordHash, 255))
                    .col(ColumnDef::new(IdentityUsers::DefaultProjectId).string_len(64))
                    .col(schema::timestamp_with_time_zone(IdentityUsers::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(IdentityRoleAssignments::Table)
                    .if_not_exists()
                    .col(schema::string_len(IdentityRoleAssignments::UserId, 64))
                    .col(schema::string_len(IdentityRoleAssignments::ProjectId, 64))
                    .col(schema::string_len(IdentityRoleAssignments::Role, 64))
                    .primary_key(
                        Index::create()
                            .col(IdentityRoleAssignments::UserId)
                            .col(IdentityRoleAssignments::ProjectId)
                            .col(IdentityRoleAssignments::Role),
                    )
                    .to_owned(),
            )
            .await?;
        migration::create_index(
            manager,
            "identity_role_assignments_project",
            IdentityRoleAssignments::Table,
            [IdentityRoleAssignments::ProjectId],
        )
        .await?;
        manager
            .create_table(
                Table::create()
                    .table(IdentityRevocations::Table)
                    .if_not_exists()
                    .col(schema::big_pk_auto(IdentityRevocations::Id))
                    .col(ColumnDef::new(IdentityRevocations::TokenId).string_len(64))
                    .col(ColumnDef::new(IdentityRevocations::UserId).string_len(64))
                    .col(ColumnDef::new(IdentityRevocations::ProjectId).string_len(64))
                    .col(schema::big_integer(IdentityRevocations::IssuedBefore))
                    .col(schema::timestamp_with_time_zone(
                        IdentityRevocations::ExpiresAt,
                    ))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_tables(
            manager,
            [
                IdentityRevocations::Table.into_iden(),
                IdentityRoleAssignments::Table.into_iden(),
                IdentityUsers::Table.into_iden(),
                IdentityProjects::Table.into_iden(),
            ],
        )
        .await
    }
}
