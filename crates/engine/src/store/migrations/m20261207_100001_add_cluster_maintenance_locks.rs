//! A cluster may carry a maintenance lock (who, when, how far, why): one
//! column of JSON text, written as a whole and only when it holds, to the
//! character, what the writer read (a lock, an unlock and an expiry racing each other: one wins, the
//! others see the change), and the lock's expiry beside it, indexed, for
//! the engine's sweep to find the locks whose time has come.

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
        // One column per statement: SQLite alters one at a time.
        manager
            .alter_table(
                Table::alter()
                    .table(Clusters::Table)
                    .add_column(schema::text_null(Clusters::MaintenanceLock))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Clusters::Table)
                    .add_column(schema::timestamp_with_time_zone_null(
                        Clusters::LockExpiresAt,
                    ))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(EXPIRY_INDEX)
                    .table(Clusters::Table)
                    .col(Clusters::LockExpiresAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name(EXPIRY_INDEX)
                    .table(Clusters::Table)
                    .to_owned(),
            )
            .await?;
        for column in [Clusters::LockExpiresAt, Clusters::MaintenanceLock] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Clusters::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
