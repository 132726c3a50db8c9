//! A cluster may carry a maintenance lock (who, when, how far, why): one
//! column of JSON text, written as a whole and only when it holds, to the
//! character, what the writer read (a lock, an unlock and an expiry racing each other: one wins, the
//! others see the change), and the lock's expiry beside it, indexed, for
//! the engine's sweep to find the locks whose time has come.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveIden)]
enum Clusters {
    Table,
    MaintenanceLock,
    LockExpiresAt,
}

const EXPIRY_INDEX: &str = "idx_clusters_lock_expires_at";

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::add_columns(
            manager,
            Clusters::Table,
            [schema::text_null(Clusters::MaintenanceLock)],
        )
        .await?;
        migration::add_indexed_column(
            manager,
            EXPIRY_INDEX,
            Clusters::Table,
            schema::timestamp_with_time_zone_null(Clusters::LockExpiresAt),
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_indexed_column(
            manager,
            EXPIRY_INDEX,
            Clusters::Table,
            Clusters::LockExpiresAt,
        )
        .await?;
        migration::drop_columns(manager, Clusters::Table, [Clusters::MaintenanceLock]).await
    }
}
