//! Keystone's role objects and groups, and enabling and disabling users
//! and projects. Roles become rows: `admin`, `member` and `reader` (their
//! ids are their names) and every other role an assignment already named
//! (Ember took any well-formed name before roles existed on their own; such
//! a role's id is its name too), so no assignment is left pointing at
//! nothing. Assignments keep naming their role: renaming one rewrites
//! them. A group's role on a project is held by each of its members there.
//! Users gain a description and an email; users and projects an `enabled`
//! flag, true for those already there.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum IdentityRoles {
    Table,
    Id,
    Name,
}

#[derive(DeriveIden)]
enum IdentityGroups {
    Table,
    Id,
    Name,
    Description,
    CreatedAt,
}

#[derive(DeriveIden)]
enum IdentityGroupMembers {
    Table,
    GroupId,
    UserId,
}

#[derive(DeriveIden)]
enum IdentityGroupRoleAssignments {
    Table,
    GroupId,
    ProjectId,
    Role,
}

#[derive(DeriveIden)]
enum IdentityUsers {
    Table,
    Description,
    Email,
    Enabled,
}

#[derive(DeriveIden)]
enum IdentityProjects {
    Table,
    Enabled,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(IdentityRoles::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(IdentityRoles::Id)
                            .string_len(64)
                            .not_null()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(IdentityRoles::Name)
                            .string_len(64)
                            .not_null()
                            .unique_key(),
                    )
                    .to_owned(),
            )
            .await?;
        let connection = manager.get_connection();
        connection
            .execute_unprepared(
                "INSERT INTO identity_roles (id, name) VALUES \
                 ('admin', 'admin'), ('member', 'member'), ('reader', 'reader')",
            )
            .await?;
        connection
            .execute_unprepared(
                "INSERT INTO identity_roles (id, name) \
                 SELECT DISTINCT role, role FROM identity_role_assignments \
                 WHERE role NOT IN ('admin', 'member', 'reader')",
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(IdentityGroups::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(IdentityGroups::Id)
                            .string_len(64)
                            .not_null()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(IdentityGroups::Name)
                            .string_len(64)
                            .not_null()
                            .unique_key(),
                    )
                    .col(
                        ColumnDef::new(IdentityGroups::Description)
                            .text()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(IdentityGroups::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(IdentityGroupMembers::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(IdentityGroupMembers::GroupId)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(IdentityGroupMembers::UserId)
                            .string_len(64)
                            .not_null(),
                    )
                    .primary_key(
                        Index::create()
                            .col(IdentityGroupMembers::GroupId)
                            .col(IdentityGroupMembers::UserId),
                    )
                    .to_owned(),
            )
            .await?;
        // A user's roles are looked up at every login, through its groups.
        manager
            .create_index(
                Index::create()
                    .name("identity_group_members_user")
                    .table(IdentityGroupMembers::Table)
                    .col(IdentityGroupMembers::UserId)
                    .if_not_exists()
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(IdentityGroupRoleAssignments::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(IdentityGroupRoleAssignments::GroupId)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(IdentityGroupRoleAssignments::ProjectId)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(IdentityGroupRoleAssignments::Role)
                            .string_len(64)
                            .not_null(),
                    )
                    .primary_key(
                        Index::create()
                            .col(IdentityGroupRoleAssignments::GroupId)
                            .col(IdentityGroupRoleAssignments::ProjectId)
                            .col(IdentityGroupRoleAssignments::Role),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("identity_group_role_assignments_project")
                    .table(IdentityGroupRoleAssignments::Table)
                    .col(IdentityGroupRoleAssignments::ProjectId)
                    .if_not_exists()
                    .to_owned(),
            )
            .await?;
        // One column per statement: SQLite adds one at a time.
        for column in [
            ColumnDef::new(IdentityUsers::Description)
                .text()
                .null()
                .to_owned(),
            ColumnDef::new(IdentityUsers::Email)
                .text()
                .null()
                .to_owned(),
            ColumnDef::new(IdentityUsers::Enabled)
                .boolean()
                .not_null()
                .default(true)
                .to_owned(),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(IdentityUsers::Table)
                        .add_column(column)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(IdentityProjects::Table)
                    .add_column(
                        ColumnDef::new(IdentityProjects::Enabled)
                            .boolean()
                            .not_null()
                            .default(true),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            IdentityGroupRoleAssignments::Table.into_iden(),
            IdentityGroupMembers::Table.into_iden(),
            IdentityGroups::Table.into_iden(),
            IdentityRoles::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        for column in [
            IdentityUsers::Description.into_iden(),
            IdentityUsers::Email.into_iden(),
            IdentityUsers::Enabled.into_iden(),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(IdentityUsers::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(IdentityProjects::Table)
                    .drop_column(IdentityProjects::Enabled)
                    .to_owned(),
            )
            .await
    }
}
