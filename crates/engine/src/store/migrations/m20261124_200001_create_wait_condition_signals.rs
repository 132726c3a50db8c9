//! The signals wait condition handles receive: one row per signal id of a
//! handle (a signal with an id already there replaces it, as in Heat). Kept
//! beside the stack, not in the handle's row: signals arrive while the
//! stack's operation holds its lease and writes the resources.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum WaitConditionSignals {
    Table,
    StackId,
    HandleId,
    UniqueId,
    Status,
    Reason,
    Data,
    ReceivedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(WaitConditionSignals::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(WaitConditionSignals::StackId)
                            .uuid()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(WaitConditionSignals::HandleId)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(WaitConditionSignals::UniqueId)
                            .string_len(255)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(WaitConditionSignals::Status)
                            .string_len(16)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(WaitConditionSignals::Reason)
                            .text()
                            .not_null(),
                    )
                    .col(ColumnDef::new(WaitConditionSignals::Data).text().not_null())
                    .col(
                        ColumnDef::new(WaitConditionSignals::ReceivedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .primary_key(
                        Index::create()
                            .col(WaitConditionSignals::StackId)
                            .col(WaitConditionSignals::HandleId)
                            .col(WaitConditionSignals::UniqueId),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(WaitConditionSignals::Table).to_owned())
            .await
    }
}
