//! On SQLite, every cluster row keeps its members' ids, in index order, in
//! `clusters.member_ids`, kept by triggers on `cluster_nodes`. A cluster
//! list shows every member id of every cluster on its page (200 clusters
//! of 25 nodes: 5,000 ids); aggregating them per read cost SQLite ~3 ms
//! (a hex and a sort per id), reading a kept column ~0.1 ms. Membership
//! changes are rare beside reads, and each one costs a trigger a few index
//! lookups.
//!
//! The column holds each id as 32 upper-case hex digits followed by a
//! comma (`"0195…AB,0195…CD,"`). The comma makes removal exact: hex digits
//! never contain one, so `replace(member_ids, '<hex>,', '')` can only
//! match the id itself, never a run of digits that straddles two ids. A
//! node that joins after every other member (the usual case: indexes grow)
//! is appended; one that lands anywhere else has its cluster's list built
//! again from the index.
//!
//! SQLite runs one writer at a time, so a trigger always sees every
//! membership change before it. PostgreSQL runs concurrent writers, where
//! a trigger's view of the members could miss another transaction's
//! insert; there the reads aggregate (`string_agg`, fast on its server)
//! and this migration changes nothing.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// A cluster's members rebuilt from the index, in index order.
fn rebuilt(cluster: &str) -> String {
    format!(
        "COALESCE((SELECT group_concat(hex(id) || ',', '' ORDER BY node_index, id) \
         FROM cluster_nodes WHERE cluster_id = {cluster}), '')"
    )
}

/// Adds `node` (NEW) to its cluster's list: appended when it sorts after
/// every other member, else the list is rebuilt.
fn added() -> String {
    format!(
        "UPDATE clusters SET member_ids = CASE WHEN EXISTS (\
           SELECT 1 FROM cluster_nodes WHERE cluster_id = NEW.cluster_id AND id <> NEW.id \
           AND (node_index > NEW.node_index OR (node_index = NEW.node_index AND id > NEW.id))) \
         THEN {} ELSE member_ids || hex(NEW.id) || ',' END \
         WHERE id = NEW.cluster_id;",
        rebuilt("NEW.cluster_id")
    )
}

/// Takes `node` (OLD) out of its former cluster's list.
const REMOVED: &str = "UPDATE clusters SET member_ids = replace(member_ids, hex(OLD.id) || ',', '') \
     WHERE id = OLD.cluster_id;";

const TRIGGERS: [&str; 3] = [
    "cluster_member_ids_after_insert",
    "cluster_member_ids_after_delete",
    "cluster_member_ids_after_update",
];

/// Also what the next migration's `down` restores.
pub(super) fn statements() -> Vec<String> {
    vec![
        "ALTER TABLE clusters ADD COLUMN member_ids TEXT NOT NULL DEFAULT ''".to_owned(),
        format!(
            "UPDATE clusters SET member_ids = {}",
            rebuilt("clusters.id")
        ),
        format!(
            "CREATE TRIGGER {} AFTER INSERT ON cluster_nodes \
             WHEN NEW.cluster_id IS NOT NULL BEGIN {} END",
            TRIGGERS[0],
            added()
        ),
        format!(
            "CREATE TRIGGER {} AFTER DELETE ON cluster_nodes \
             WHEN OLD.cluster_id IS NOT NULL BEGIN {REMOVED} END",
            TRIGGERS[1]
        ),
        // A node that leaves, joins, moves or changes index: out of the
        // old list, into the new one.
        format!(
            "CREATE TRIGGER {} AFTER UPDATE OF cluster_id, node_index, id ON cluster_nodes \
             WHEN OLD.cluster_id IS NOT NEW.cluster_id OR OLD.node_index IS NOT NEW.node_index \
               OR OLD.id IS NOT NEW.id \
             BEGIN {REMOVED} {} END",
            TRIGGERS[2],
            added()
        ),
    ]
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
            .execute_unprepared("ALTER TABLE clusters DROP COLUMN member_ids")
            .await?;
        Ok(())
    }
}
