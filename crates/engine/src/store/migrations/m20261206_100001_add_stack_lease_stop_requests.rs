//! A stack lease may carry a stop request: a delete (or an update's
//! cancel) on one engine of a stack whose operation runs on another writes
//! the generation it found held and what it asks (`stop_kind`: `DELETE`
//! stops the operation, `CANCEL_UPDATE` cancels an update, which rolls
//! back), and the holder's heartbeat, seeing its own generation asked,
//! acts on it. A later take moves the generation on, so a stale request
//! never reaches the next holder.

use sea_orm_migration::prelude::*;

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
        // One column per statement: SQLite alters one at a time.
        manager
            .alter_table(
                Table::alter()
                    .table(StackLeases::Table)
                    .add_column(
                        ColumnDef::new(StackLeases::StopGeneration)
                            .big_integer()
                            .null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(StackLeases::Table)
                    .add_column(ColumnDef::new(StackLeases::StopKind).string_len(16).null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [StackLeases::StopKind, StackLeases::StopGeneration] {
            manager
                .alter_table(
                    Table::alter()
                        .table(StackLeases::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
