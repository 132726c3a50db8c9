//! On SQLite, a cluster's member ids are kept in chunks of at most
//! [`CHUNK`] members (`cluster_member_chunks`: one row per cluster and
//! `node_index / CHUNK`), by triggers on `cluster_nodes`, instead of in one
//! column of the cluster's row (migration m20261201_100001). That column
//! was rewritten whole on every membership change: with 10,000 members, a
//! 330 KB row written for each node created or deleted — a scale-out cost
//! grew with the cluster's size (2.6 ms a node at 10,000 against 1.2 at
//! 100). A chunk is at most ~3.3 KB, so a change costs the same at any
//! size; a read joins the cluster's chunks in order (one chunk for a
//! cluster of up to 100 nodes: the cluster list reads as it did).
//!
//! Each id is 32 upper-case hex digits followed by a comma, as before, so
//! removal by `replace` is exact. A node joins its chunk at the end when
//! it sorts after every other member of that chunk (the usual case:
//! indexes grow); otherwise that chunk alone is built again from the
//! index. A chunk left empty is deleted. PostgreSQL aggregates per read
//! (see the earlier migration): nothing changes there.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Members per chunk: 100 ids of 33 characters fit in one SQLite page.
pub const CHUNK: i64 = 100;

const TRIGGERS: [&str; 3] = [
    "cluster_member_chunks_after_insert",
    "cluster_member_chunks_after_delete",
    "cluster_member_chunks_after_update",
];

/// The earlier migration's triggers (they kept `clusters.member_ids`).
const FORMER_TRIGGERS: [&str; 3] = [
    "cluster_member_ids_after_insert",
    "cluster_member_ids_after_delete",
    "cluster_member_ids_after_update",
];

/// The chunk `node` (NEW or OLD) belongs to.
fn chunk_of(node: &str) -> String {
    format!("{node}.node_index / {CHUNK}")
}

/// The members of `node`'s chunk, in index order, built from the index.
fn rebuilt_chunk(node: &str) -> String {
    format!(
        "(SELECT group_concat(hex(id) || ',', '' ORDER BY node_index, id) FROM cluster_nodes \
         WHERE cluster_id = {node}.cluster_id \
           AND node_index >= ({chunk}) * {CHUNK} AND node_index < ({chunk} + 1) * {CHUNK})",
        chunk = chunk_of(node)
    )
}

/// Adds NEW to its chunk, if it is in a cluster: a new chunk, or appended
/// when it sorts after every other member of the chunk, else the chunk is
/// built again.
fn added() -> String {
    let chunk = chunk_of("NEW");
    format!(
        "INSERT INTO cluster_member_chunks (cluster_id, chunk, ids) \
         SELECT NEW.cluster_id, {chunk}, hex(NEW.id) || ',' WHERE NEW.cluster_id IS NOT NULL \
         ON CONFLICT (cluster_id, chunk) DO UPDATE SET ids = CASE WHEN EXISTS (\
           SELECT 1 FROM cluster_nodes WHERE cluster_id = NEW.cluster_id AND id <> NEW.id \
           AND ((node_index > NEW.node_index AND node_index < ({chunk} + 1) * {CHUNK}) \
             OR (node_index = NEW.node_index AND id > NEW.id))) \
         THEN {} ELSE ids || hex(NEW.id) || ',' END;",
        rebuilt_chunk("NEW")
    )
}

/// Takes OLD out of its former chunk; deletes the chunk if it is empty.
fn removed() -> String {
    let chunk = chunk_of("OLD");
    format!(
        "UPDATE cluster_member_chunks SET ids = replace(ids, hex(OLD.id) || ',', '') \
         WHERE cluster_id = OLD.cluster_id AND chunk = {chunk}; \
         DELETE FROM cluster_member_chunks \
         WHERE cluster_id = OLD.cluster_id AND chunk = {chunk} AND ids = '';"
    )
}

fn statements() -> Vec<String> {
    let mut statements: Vec<String> = FORMER_TRIGGERS
        .iter()
        .map(|trigger| format!("DROP TRIGGER IF EXISTS {trigger}"))
        .collect();
    statements.extend([
        "ALTER TABLE clusters DROP COLUMN member_ids".to_owned(),
        "CREATE TABLE cluster_member_chunks (\
           cluster_id BLOB NOT NULL REFERENCES clusters (id) ON DELETE CASCADE, \
           chunk INTEGER NOT NULL, \
           ids TEXT NOT NULL, \
           PRIMARY KEY (cluster_id, chunk)) WITHOUT ROWID"
            .to_owned(),
        format!(
            "INSERT INTO cluster_member_chunks (cluster_id, chunk, ids) \
             SELECT cluster_id, node_index / {CHUNK}, \
               group_concat(hex(id) || ',', '' ORDER BY node_index, id) \
             FROM cluster_nodes WHERE cluster_id IS NOT NULL \
             GROUP BY cluster_id, node_index / {CHUNK}"
        ),
        format!(
            "CREATE TRIGGER {} AFTER INSERT ON cluster_nodes \
             WHEN NEW.cluster_id IS NOT NULL BEGIN {} END",
            TRIGGERS[0],
            added()
        ),
        format!(
            "CREATE TRIGGER {} AFTER DELETE ON cluster_nodes \
             WHEN OLD.cluster_id IS NOT NULL BEGIN {} END",
            TRIGGERS[1],
            removed()
        ),
        // A node that leaves, joins, moves or changes index: out of the
        // old chunk, into the new one.
        format!(
            "CREATE TRIGGER {} AFTER UPDATE OF cluster_id, node_index, id ON cluster_nodes \
             WHEN OLD.cluster_id IS NOT NEW.cluster_id OR OLD.node_index IS NOT NEW.node_index \
               OR OLD.id IS NOT NEW.id \
             BEGIN {} {} END",
            TRIGGERS[2],
            removed(),
            added()
        ),
    ]);
    statements
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() != DbBackend::Sqlite {
            return Ok(());
        }
        let connection = manager.get_connection();
        for statement in statements() {
            connection.execute_unprepared(&statement).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() != DbBackend::Sqlite {
            return Ok(());
        }
        let connection = manager.get_connection();
        for trigger in TRIGGERS {
            connection
                .execute_unprepared(&format!("DROP TRIGGER IF EXISTS {trigger}"))
                .await?;
        }
        connection
            .execute_unprepared("DROP TABLE cluster_member_chunks")
            .await?;
        // Back to the earlier migration's column and triggers.
        for statement in super::m20261201_100001_keep_cluster_member_ids::statements() {
            connection.execute_unprepared(&statement).await?;
        }
        Ok(())
    }
}
