//! A stack lease may carry a stop request: a delete on one engine of a
//! stack whose operation runs on another writes the generation it found
//! held, and the holder's heartbeat, seeing its own generation asked,
//! stops the operation. A later take moves the generation on, so a stale
//! request never stops the next holder.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum StackLeases {
    Table,
    StopGeneration,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
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
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(StackLeases::Table)
                    .drop_column(StackLeases::StopGeneration)
                    .to_owned(),
            )
            .await
    }
}
