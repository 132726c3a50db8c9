//! Per-project quota overrides (the defaults live in the configuration):
//! one row per project and limit an admin set.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ProjectQuotas {
    Table,
    ProjectId,
    Kind,
    QuotaLimit,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(ProjectQuotas::Table)
                    .if_not_exists()
                    .col(schema::string_len(ProjectQuotas::ProjectId, 64))
                    .col(schema::string_len(ProjectQuotas::Kind, 32))
                    .col(schema::big_integer(ProjectQuotas::QuotaLimit))
                    .col(schema::timestamp_with_time_zone(ProjectQuotas::UpdatedAt))
                    .primary_key(
                        Index::create()
                            .col(ProjectQuotas::ProjectId)
                            .col(ProjectQuotas::Kind),
                    )
                    .to_owned(),
            )
            .await?;
        // The quota checks count a project's running operations: the
        // stacks in progress, straight from an index of just those.
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE INDEX IF NOT EXISTS stacks_in_progress_roots_by_project ON stacks (project_id) \
                 WHERE status = 'IN_PROGRESS' AND parent_id IS NULL",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared("DROP INDEX IF EXISTS stacks_in_progress_roots_by_project")
            .await?;
        migration::drop_tables(manager, [ProjectQuotas::Table]).await
    }
}
