//! Keystone's role objects and groups, and enabling and disabling users
//! and projects. Roles become rows: `admin`, `member` and `reader` (their
//! ids are their names) and every other role an assignment already named
//! (Ember took any well-formed name before roles existed on their own; such
//! a role's id is its name too), so no assignment is left pointing at
//! nothing. Assignments keep naming their role: renaming one rewrites
//! them. A group's role on a project is held by each of its members there.
//! Users gain a description and an email; users and projects an `enabled`
//! flag, true for those already there.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

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
                    .col(schema::string_len(IdentityRoles::Id, 64).primary_key())
                    .col(schema::string_len_uniq(IdentityRoles::Name, 64))
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
                    .col(schema::string_len(IdentityGroups::Id, 64).primary_key())
                    .col(schema::string_len_uniq(IdentityGroups::Name, 64))
                    .col(schema::text(IdentityGroups::Description))
                    .col(schema::timestamp_with_time_zone(IdentityGroups::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(IdentityGroupMembers::Table)
                    .if_not_exists()
                    .col(schema::string_len(IdentityGroupMembers::GroupId, 64))
                    .col(schema::string_len(IdentityGroupMembers::UserId, 64))
                    .primary_key(
                        Index::create()
                            .col(IdentityGroupMembers::GroupId)
                            .col(IdentityGroupMembers::UserId),
                    )
                    .to_owned(),
            )
            .await?;
        // A user's roles are looked up at every login, through its groups.
        migration::create_index(
            manager,
            "identity_group_members_user",
            IdentityGroupMembers::Table,
            [IdentityGroupMembers::UserId],
        )
        .await?;
        manager
            .create_table(
                Table::create()
                    .table(IdentityGroupRoleAssignments::Table)
                    .if_not_exists()
                    .col(schema::string_len(
                        IdentityGroupRoleAssignments::GroupId,
                        64,
                    ))
                    .col(schema::string_len(
                        IdentityGroupRoleAssignments::ProjectId,
                        64,
                    ))
                    .col(schema::string_len(IdentityGroupRoleAssignments::Role, 64))
                    .primary_key(
                        Index::create()
                            .col(IdentityGroupRoleAssignments::GroupId)
                            .col(IdentityGroupRoleAssignments::ProjectId)
                            .col(IdentityGroupRoleAssignments::Role),
                    )
                    .to_owned(),
            )
            .await?;
        migration::create_index(
            manager,
            "identity_group_role_assignments_project",
            IdentityGroupRoleAssignments::Table,
            [IdentityGroupRoleAssignments::ProjectId],
        )
        .await?;
        migration::add_columns(
            manager,
            IdentityUsers::Table,
            [
                schema::text_null(IdentityUsers::Description),
                schema::text_null(IdentityUsers::Email),
                schema::boolean(IdentityUsers::Enabled)
                    .default(true)
                    .to_owned(),
            ],
        )
        .await?;
        migration::add_columns(
            manager,
            IdentityProjects::Table,
            [schema::boolean(IdentityProjects::Enabled)
                .default(true)
                .to_owned()],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_tables(
            manager,
            [
                IdentityGroupRoleAssignments::Table.into_iden(),
                IdentityGroupMembers::Table.into_iden(),
                IdentityGroups::Table.into_iden(),
                IdentityRoles::Table.into_iden(),
            ],
        )
        .await?;
        migration::drop_columns(
            manager,
            IdentityUsers::Table,
            [
                IdentityUsers::Description,
                IdentityUsers::Email,
                IdentityUsers::Enabled,
            ],
        )
        .await?;
        migration::drop_columns(
            manager,
            IdentityProjects::Table,
            [IdentityProjects::Enabled],
        )
        .await
    }
}
