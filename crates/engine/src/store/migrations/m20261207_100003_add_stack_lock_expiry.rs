//! A stack's maintenance lock may expire: when, beside the lock, indexed
//! for the engine's sweep to find the locks whose time has come.

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
        manager
            .alter_table(
                Table::alter()
                    .table(Stacks::Table)
                    .add_column(schema::timestamp_with_time_zone_null(Stacks::LockExpiresAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(EXPIRY_INDEX)
                    .table(Stacks::Table)
                    .col(Stacks::LockExpiresAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name(EXPIRY_INDEX)
                    .table(Stacks::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Stacks::Table)
                    .drop_column(Stacks::LockExpiresAt)
                    .to_owned(),
            )
            .await
    }
}
