//! Projects, users (with argon2 password hashes, never the password), role
//! assignments, and revocations: one token by its id, or every token of a
//! user and/or project issued up to a moment (in milliseconds) (what losing a role, a
//! password change or a deletion revokes, as Keystone's revocation events).

use sea_orm_migration::prelude::*;

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
                    .col(
                        ColumnDef::new(IdentityProjects::Id)
                            .string_len(64)
                            .not_null()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(IdentityProjects::Name)
                            .string_len(64)
                            .not_null()
                            .unique_key(),
                    )
                    .col(
                        ColumnDef::new(IdentityProjects::Description)
                            .text()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(IdentityProjects::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(IdentityUsers::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(IdentityUsers::Id)
                            .string_len(64)
                            .not_null()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(IdentityUsers::Name)
                            .string_len(64)
                            .not_null()
                            .unique_key(),
                    )
                    .col(
                        ColumnDef::new(IdentityUsers::PasswordHash)
                            .string_len(255)
                            .not_null(),
                    )
                    .col(ColumnDef::new(IdentityUsers::DefaultProjectId).string_len(64))
                    .col(
                        ColumnDef::new(IdentityUsers::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(IdentityRoleAssignments::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(IdentityRoleAssignments::UserId)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(IdentityRoleAssignments::ProjectId)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(IdentityRoleAssignments::Role)
                            .string_len(64)
                            .not_null(),
                    )
                    .primary_key(
                        Index::create()
                            .col(IdentityRoleAssignments::UserId)
                            .col(IdentityRoleAssignments::ProjectId)
                            .col(IdentityRoleAssignments::Role),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("identity_role_assignments_project")
                    .table(IdentityRoleAssignments::Table)
                    .col(IdentityRoleAssignments::ProjectId)
                    .if_not_exists()
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(IdentityRevocations::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(IdentityRevocations::Id)
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(ColumnDef::new(IdentityRevocations::TokenId).string_len(64))
                    .col(ColumnDef::new(IdentityRevocations::UserId).string_len(64))
                    .col(ColumnDef::new(IdentityRevocations::ProjectId).string_len(64))
                    .col(
                        ColumnDef::new(IdentityRevocations::IssuedBefore)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(IdentityRevocations::ExpiresAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            IdentityRevocations::Table.into_iden(),
            IdentityRoleAssignments::Table.into_iden(),
            IdentityUsers::Table.into_iden(),
            IdentityProjects::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}
