//! Launch hooks: every pending action says which transition its node waits
//! in (`launching` or `terminating`); the actions recorded before launch
//! hooks existed were all terminating.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum PendingLifecycleActions {
    Table,
    TransitionType,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(PendingLifecycleActions::Table)
                    .add_column(
                        ColumnDef::new(PendingLifecycleActions::TransitionType)
                            .string_len(16)
                            .not_null()
                            .default("terminating"),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(PendingLifecycleActions::Table)
                    .drop_column(PendingLifecycleActions::TransitionType)
                    .to_owned(),
            )
            .await
    }
}
