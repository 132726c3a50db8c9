//! A stack's maintenance lock may expire: when, beside the lock, indexed
//! for the engine's sweep to find the locks whose time has come.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveIden)]
enum Stacks {
    Table,
    LockExpiresAt,
}

const EXPIRY_INDEX: &str = "idx_stacks_lock_expires_at";

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::add_indexed_column(
            manager,
            EXPIRY_INDEX,
            Stacks::Table,
            schema::timestamp_with_time_zone_null(Stacks::LockExpiresAt),
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_indexed_column(manager, EXPIRY_INDEX, Stacks::Table, Stacks::LockExpiresAt)
            .await
    }
}
