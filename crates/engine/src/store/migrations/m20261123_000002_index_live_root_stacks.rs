//! The stack list (live root stacks of a project, newest first) gets an
//! index of its own: the project's index also holds every deleted and
//! nested stack, and a list walked past all of them (thousands after a
//! busy day) to find its page. Partial indexes work on SQLite and
//! PostgreSQL alike.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const INDEX: &str = "stacks_live_roots_by_project_newest_first";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared(&format!(
                "CREATE INDEX IF NOT EXISTS {INDEX} ON stacks (project_id, created_at, id) \
                 WHERE deleted_at IS NULL AND parent_id IS NULL"
            ))
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared(&format!("DROP INDEX IF EXISTS {INDEX}"))
            .await?;
        Ok(())
    }
}
