//! The signals wait condition handles receive: one row per signal id of a
//! handle (a signal with an id already there replaces it, as in Heat). Kept
//! beside the stack, not in the handle's row: signals arrive while the
//! stack's operation holds its lease and writes the resources.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

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
                    .col(schema::uuid(WaitConditionSignals::StackId))
                    .col(schema::string_len(WaitConditionSignals::HandleId, 64))
                    .col(schema::string_len(WaitConditionSignals::UniqueId, 255))
                    .col(schema::string_len(WaitConditionSignals::Status, 16))
                    .col(schema::text(WaitConditionSignals::Reason))
                    .col(schema::text(WaitConditionSignals::Data))
                    .col(schema::timestamp_with_time_zone(
                        WaitConditionSignals::ReceivedAt,
                    ))
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
        migration::drop_tables(manager, [WaitConditionSignals::Table]).await
    }
}
