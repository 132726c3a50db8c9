//! Each project's live instances (any status but DELETED) are counted in
//! `project_instance_counts`, kept by triggers on `instances`, instead of
//! by a `COUNT(*)` over the project's index entries at every admission.
//! That count visited every live instance of the project for each one
//! created: 1.4 ms a create at 10,000 on SQLite, so a cluster's growth
//! cost grew with its size (issue 45: µs per node flat from 100 to
//! 10,000). Reading the kept count is one row at any size.
//!
//! Triggers, not the store's writes, keep it: every path that inserts,
//! deletes, or moves an instance into or out of DELETED (tasks, the
//! watcher, retention, a restore from a backup) is counted, and a path
//! added later cannot forget it. The row of a project is written in the
//! transaction that changes its instances: on PostgreSQL, creates in one
//! project wait for each other's commit (a row lock held for one short
//! transaction, never across a cluster's growth).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

#[derive(DeriveMigrationName)]
pub struct Migration;

const TABLE: &str = "CREATE TABLE project_instance_counts (\
    project_id VARCHAR(64) NOT NULL PRIMARY KEY, \
    used BIGINT NOT NULL)";

const BACKFILL: &str = "INSERT INTO project_instance_counts (project_id, used) \
    SELECT project_id, COUNT(*) FROM instances WHERE status <> 'DELETED' GROUP BY project_id";

/// One more live instance of `row`'s (NEW's) project.
fn counted_in(row: &str) -> String {
    format!(
        "INSERT INTO project_instance_counts (project_id, used) \
         SELECT {row}.project_id, 1 WHERE {row}.status <> 'DELETED' \
         ON CONFLICT (project_id) DO UPDATE SET used = project_instance_counts.used + 1;"
    )
}

/// One fewer live instance of `row`'s (OLD's) project.
fn counted_out(row: &str) -> String {
    format!(
        "UPDATE project_instance_counts SET used = used - 1 \
         WHERE project_id = {row}.project_id AND {row}.status <> 'DELETED';"
    )
}

/// Whether an update changes what is counted: the instance went into or
/// out of DELETED, or moved project.
const COUNTED_CHANGE: &str = "(OLD.status = 'DELETED') <> (NEW.status = 'DELETED') \
    OR OLD.project_id <> NEW.project_id";

const SQLITE_TRIGGERS: [&str; 3] = [
    "project_instance_counts_after_insert",
    "project_instance_counts_after_delete",
    "project_instance_counts_after_update",
];

fn sqlite_statements() -> Vec<String> {
    vec![
        TABLE.to_owned(),
        BACKFILL.to_owned(),
        format!(
            "CREATE TRIGGER {} AFTER INSERT ON instances BEGIN {} END",
            SQLITE_TRIGGERS[0],
            counted_in("NEW")
        ),
        format!(
            "CREATE TRIGGER {} AFTER DELETE ON instances BEGIN {} END",
            SQLITE_TRIGGERS[1],
            counted_out("OLD")
        ),
        format!(
            "CREATE TRIGGER {} AFTER UPDATE OF status, project_id ON instances \
             WHEN {COUNTED_CHANGE} BEGIN {} {} END",
            SQLITE_TRIGGERS[2],
            counted_out("OLD"),
            counted_in("NEW")
        ),
    ]
}

const POSTGRES_FUNCTION: &str = "project_instance_counts_keep";
const POSTGRES_TRIGGERS: [&str; 2] = [
    "project_instance_counts_after_insert_or_delete",
    "project_instance_counts_after_update",
];

fn postgres_statements() -> Vec<String> {
    vec![
        TABLE.to_owned(),
        BACKFILL.to_owned(),
        format!(
            "CREATE FUNCTION {POSTGRES_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN \
               IF TG_OP IN ('UPDATE', 'DELETE') THEN {} END IF; \
               IF TG_OP IN ('INSERT', 'UPDATE') THEN {} END IF; \
               RETURN NULL; \
             END $$",
            counted_out("OLD"),
            counted_in("NEW")
        ),
        format!(
            "CREATE TRIGGER {} AFTER INSERT OR DELETE ON instances \
             FOR EACH ROW EXECUTE FUNCTION {POSTGRES_FUNCTION}()",
            POSTGRES_TRIGGERS[0]
        ),
        format!(
            "CREATE TRIGGER {} AFTER UPDATE OF status, project_id ON instances \
             FOR EACH ROW WHEN ({COUNTED_CHANGE}) EXECUTE FUNCTION {POSTGRES_FUNCTION}()",
            POSTGRES_TRIGGERS[1]
        ),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statements = match manager.get_database_backend() {
            DbBackend::Sqlite => sqlite_statements(),
            DbBackend::Postgres => postgres_statements(),
            other => {
                return Err(DbErr::Migration(format!(
                    "project_instance_counts: {other:?} is not a supported store"
                )));
            }
        };
        let connection = manager.get_connection();
        for statement in statements {
            connection.execute_unprepared(&statement).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let connection = manager.get_connection();
        let drops: Vec<String> = match manager.get_database_backend() {
            DbBackend::Postgres => POSTGRES_TRIGGERS
                .iter()
                .map(|trigger| format!("DROP TRIGGER IF EXISTS {trigger} ON instances"))
                .chain([format!("DROP FUNCTION IF EXISTS {POSTGRES_FUNCTION}()")])
                .collect(),
            _ => SQLITE_TRIGGERS
                .iter()
                .map(|trigger| format!("DROP TRIGGER IF EXISTS {trigger}"))
                .collect(),
        };
        for statement in drops {
            connection.execute_unprepared(&statement).await?;
        }
        connection
            .execute_unprepared("DROP TABLE project_instance_counts")
            .await?;
        Ok(())
    }
}
