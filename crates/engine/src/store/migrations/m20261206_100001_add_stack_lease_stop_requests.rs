//! A stack lease may carry a stop request: a delete (or an update's
//! cancel) on one engine of a stack whose operation runs on another writes
//! the generation it found held and what it asks (`stop_kind`: `DELETE`
//! stops the operation, `CANCEL_UPDATE` cancels an update, which rolls
//! back), and the holder's heartbeat, seeing its own generation asked,
//! acts on it. A later take moves the generation on, so a stale request
//! never reaches the next holder.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum StackLeases {
    Table,
    StopGeneration,
    StopKind,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::add_columns(
            manager,
            StackLeases::Table,
            [
                schema::big_integer_null(StackLeases::StopGeneration),
                schema::string_len_null(StackLeases::StopKind, 16),
            ],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_columns(
            manager,
            StackLeases::Table,
            [StackLeases::StopKind, StackLeases::StopGeneration],
        )
        .await
    }
}
